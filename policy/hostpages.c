/* policy/hostpages.c - which pages a call beyond the budget maps from the
 * host.
 *
 * A kernel argument vmem cannot see the extent of runs to its allocation's
 * end (VMEM_ACCESS_GUESS): a channel-slice kernel over a 20 MiB caching
 * segment names all of it.  When a call's pages exceed the budget, the
 * pool (pool/hostmap.c, cfg.host_map) keeps on the device the pages the
 * call states - every page of a stated extent, the first of a guessed one
 * - and of the guessed rest those already resident, while the budget
 * holds them; the others it maps from their host slots for that call.
 * So what is resident when the call comes decides which pages leave, and
 * left to chance it is the pages the next call needs on the device:
 *
 *   #71  arg0 a2 [18.0 MiB, end)  arg1 a4 [0, end)     12 pages, budget 11
 *   #72  arg0 a1 [0.8 MiB, ...)   arg1 a4 [0, end)     11 pages
 *
 * The lookahead brought a4 for #71 and found no chunk for its last page:
 * #71 mapped a4's last page from the host, and #72, needing it on the
 * device, waited for #71 to end before its fault could bring it - a miss
 * in every planned iteration (random:185167115 caching at 1/2).  Mapping
 * a2's guessed page instead costs #72 nothing.
 *
 * This pass chooses, for each such call, the guessed pages to leave on the
 * host: of the pages the call only guesses, as many as it needs beyond the
 * budget, those whose next use after the call is furthest (Belady, one
 * call on).  The other passes then act on the choice: the eviction order
 * does not count the call's use of them (they are free to leave before
 * it: a prefetch for the call takes their chunks, evict.c), and prefetches
 * for the call leave them out (plan.c) - the pool then finds them away
 * and maps them from the host.
 *
 * The count is the pool's, from what the plan knows: distinct pages of
 * paged allocations, and for the small ones (which share the pool's slab
 * pages) the fewest pages their bytes fill - a count too low leaves the
 * choice of the rest to the pool, as before this pass; one too high would
 * send away a page the pool then faults back.  A call over an allocation
 * whose blocks move between iterations (UNSTABLE) is left to the pool:
 * the pages it needs next time are not the learned ones.
 */
#include "policy/program.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	uint64_t alloc_id, page;
	bool stated;
} opage_t;

static int cmp_opage(const void *a, const void *b)
{
	const opage_t *x = a, *y = b;

	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return (int)y->stated - (int)x->stated;   /* stated first */
}

static int cmp_hpage(const void *a, const void *b)
{
	const policy_hpage_t *x = a, *y = b;

	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->page < y->page ? -1 : x->page > y->page;
}

typedef struct {
	uint64_t key;   /* next use after the op */
	uint64_t alloc_id, page;
} cand_t;

static int cmp_cand(const void *a, const void *b)
{
	const cand_t *x = a, *y = b;

	/* the furthest first; of equals, the later page (a guessed extent's
	 * end is the likeliest to be no tensor's at all) */
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id > y->alloc_id ? -1 : 1;
	return x->page > y->page ? -1 : x->page < y->page;
}

static int hpush(policy_hostpages_t *h, int *cap, policy_hpage_t x)
{
	if (h->n == *cap) {
		int nc = *cap ? *cap * 2 : 16;
		policy_hpage_t *v = realloc(h->v, (size_t)nc * sizeof(*v));

		if (!v)
			return -1;
		h->v = v;
		*cap = nc;
	}
	h->v[h->n++] = x;
	return 0;
}

/* Op k's pages into pg (distinct, sorted, stated first), the fewest pages
 * its small allocations fill into *small; the number of entries. */
static int op_pages(const policy_graph_t *g, int k, opage_t *pg, uint64_t *small)
{
	const policy_op_t *o = &g->ops[k];
	uint64_t ps = g->page_size, sbytes = 0;
	int n = 0, w = 0;

	for (int x = o->use0; x < o->use0 + o->nuses; x++) {
		const policy_use_t *u = &g->uses[x];
		const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);
		bool seen = false;

		if (!a || a->cls == POLICY_ALLOC_FOREIGN || !u->bytes)
			continue;
		if (!a->paged) {
			/* a small allocation named twice counts once */
			for (int y = o->use0; y < x && !seen; y++)
				seen = g->uses[y].alloc_id == u->alloc_id && g->uses[y].bytes;
			if (!seen)
				sbytes += a->extent;
			continue;
		}
		uint64_t p0 = u->offset / ps, p1 = (u->offset + u->bytes - 1) / ps;

		for (uint64_t p = p0; p <= p1; p++)
			pg[n++] = (opage_t){ u->alloc_id, p,
					     !(u->access & VMEM_ACCESS_GUESS) || p == p0 };
	}
	if (n > 1)
		qsort(pg, (size_t)n, sizeof(*pg), cmp_opage);
	for (int i = 0; i < n; i++)
		if (!w || pg[w - 1].alloc_id != pg[i].alloc_id || pg[w - 1].page != pg[i].page)
			pg[w++] = pg[i];
	*small = (sbytes + ps - 1) / ps;
	return w;
}

/* Page slots op k may fill (every page its uses cover); 0 when one of
 * its uses is on an allocation whose blocks move between iterations
 * (UNSTABLE: a caching segment the allocator lays out anew) - the pages
 * it needs next time are not these, and a choice made on them sends away
 * pages the call then needs (random:154546718 caching at 1/4: a channel
 * copy that fit the budget in the next iteration lost two pages to the
 * choice made for the layout learned). */
static size_t op_slots(const policy_graph_t *g, int k)
{
	const policy_op_t *o = &g->ops[k];
	size_t n = 0;

	for (int x = o->use0; x < o->use0 + o->nuses; x++) {
		const policy_use_t *u = &g->uses[x];
		const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);

		if (a && a->cls == POLICY_ALLOC_UNSTABLE)
			return 0;
		if (u->bytes && g->page_size)
			n += (u->offset + u->bytes - 1) / g->page_size - u->offset / g->page_size + 1;
	}
	return n;
}

int policy_host_pages(const policy_graph_t *g, const policy_evict_t *e, uint64_t budget,
		      policy_hostpages_t *out)
{
	uint64_t bpages = g->page_size ? budget / g->page_size : 0;
	opage_t *pg = NULL;
	cand_t *cd = NULL;
	size_t cap = 0;
	int hcap = 0;

	memset(out, 0, sizeof(*out));
	if (!bpages)
		return 0;
	for (int k = 0; k < g->nops; k++) {
		size_t slots = op_slots(g, k);
		uint64_t small, stated = 0, need;
		int n, nc = 0;

		if (slots <= bpages)
			continue;   /* most calls: no list */
		if (slots > cap) {
			opage_t *np = realloc(pg, slots * sizeof(*np));
			cand_t *nd = np ? realloc(cd, slots * sizeof(*nd)) : NULL;

			if (np)
				pg = np;
			if (!nd)
				goto fail;
			cd = nd;
			cap = slots;
		}
		n = op_pages(g, k, pg, &small);
		for (int i = 0; i < n; i++)
			stated += pg[i].stated;
		if ((uint64_t)n + small <= bpages || stated + small > bpages)
			continue;   /* fits; or the pool runs it another way (stated_split) */
		need = (uint64_t)n + small - bpages;
		for (int i = 0; i < n; i++)
			if (!pg[i].stated)
				cd[nc++] = (cand_t){ policy_evict_key(e, pg[i].alloc_id,
								     pg[i].page * g->page_size,
								     g->page_size, k),
						     pg[i].alloc_id, pg[i].page };
		qsort(cd, (size_t)nc, sizeof(*cd), cmp_cand);
		for (uint64_t i = 0; i < need && i < (uint64_t)nc; i++)
			if (hpush(out, &hcap, (policy_hpage_t){ cd[i].alloc_id, cd[i].page, k }) < 0)
				goto fail;
	}
	free(pg);
	free(cd);
	if (out->n > 1)
		qsort(out->v, (size_t)out->n, sizeof(*out->v), cmp_hpage);
	return 0;
fail:
	free(pg);
	free(cd);
	policy_host_pages_free(out);
	return -1;
}

bool policy_host_page(const policy_hostpages_t *h, int op, uint64_t alloc_id, uint64_t page)
{
	policy_hpage_t key = { alloc_id, page, op };

	return h && h->n && bsearch(&key, h->v, (size_t)h->n, sizeof(*h->v), cmp_hpage);
}

void policy_host_pages_free(policy_hostpages_t *h)
{
	free(h->v);
	memset(h, 0, sizeof(*h));
}

void policy_host_pages_dump(const policy_hostpages_t *h, const policy_graph_t *g,
			    policy_print_fn out, void *ctx)
{
	for (int i = 0; i < h->n; i++) {
		const policy_hpage_t *x = &h->v[i];

		policy_printf(out, ctx, "host page: op #%d %s maps a%llu page %llu from the host",
			      x->op, g->ops[x->op].api, (unsigned long long)x->alloc_id,
			      (unsigned long long)x->page);
	}
}
