/* policy/evict.c - which page to evict: Belady's MIN, from the plan.
 *
 * Without a plan the pool evicts the least recently used page
 * (SuperNeurons §3.3.2's tensor cache).  With one, the future is known: the
 * steady iteration repeats, so for every page the ops that touch it are
 * the plan's ops, cyclically.  Belady's MIN evicts the page whose next use
 * is furthest away, which is optimal for a known reference string; LRU is
 * its mirror image and is the worst choice exactly where training sits
 * (backward touches the forward's tensors in reverse order: the least
 * recently used is the next needed).
 *
 *   page P of alloc A, touched by ops #4 #17 #40 of a 50-op iteration:
 *       now = #20  ->  next use #40, distance 20 ops (or their measured time)
 *       now = #45  ->  next use #4 of the next iteration, distance 9
 *
 * Dead pages come before all of these, but deadness is not decided here:
 * the runtime marks ranges dead through the plan's DEAD actions (resolved
 * against the calls actually seen), and the pool evicts dead pages first.
 * This index only ranks live ones, so a wrong guess here costs a transfer,
 * never data.
 *
 * The index is per (allocation, page): the sorted op indices that touch
 * the page.  A query is a binary search per page.  Distances are measured
 * time when the plan has durations (an unmeasured op counts as the mean of
 * the measured ones), else op counts.
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	uint64_t alloc_id, page;
	uint32_t op;
} trip_t;

static int cmp_trip(const void *a, const void *b)
{
	const trip_t *x = a, *y = b;

	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

int policy_evict_build(const policy_graph_t *g, uint64_t page_size,
		       const policy_hostpages_t *skip, policy_evict_t *out)
{
	trip_t *t = NULL;
	size_t n = 0, cap = 0;
	uint64_t known = 0, nknown = 0;

	memset(out, 0, sizeof(*out));
	out->page_size = page_size ? page_size : ((uint64_t)2 << 20);
	out->nops = g->nops;
	out->t_at = calloc((size_t)g->nops + 1, sizeof(*out->t_at));
	if (!out->t_at)
		return -1;
	for (int k = 0; k < g->nops; k++)
		if (g->ops[k].dur_ns) {
			known += g->ops[k].dur_ns;
			nknown++;
		}
	for (int k = 0; k < g->nops; k++) {
		uint64_t d = nknown ? (g->ops[k].dur_ns ? g->ops[k].dur_ns : known / nknown) : 1;

		out->t_at[k + 1] = out->t_at[k] + (d ? d : 1);
	}
	for (int i = 0; i < g->nuses; i++) {
		const policy_use_t *u = &g->uses[i];
		uint64_t p0, p1;

		if (u->alloc_id == 0 || u->bytes == 0)
			continue;
		p0 = u->offset / out->page_size;
		p1 = (u->offset + u->bytes - 1) / out->page_size;
		for (uint64_t pg = p0; pg <= p1; pg++) {
			if (skip && skip->n && policy_host_page(skip, u->op, u->alloc_id, pg))
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 1024;
				trip_t *nt = realloc(t, nc * sizeof(*nt));

				if (!nt) {
					free(t);
					policy_evict_free(out);
					return -1;
				}
				t = nt;
				cap = nc;
			}
			t[n++] = (trip_t){ u->alloc_id, pg, (uint32_t)u->op };
		}
	}
	if (n > 1)
		qsort(t, n, sizeof(*t), cmp_trip);
	out->pos = malloc((n ? n : 1) * sizeof(*out->pos));
	out->pages = malloc((n ? n : 1) * sizeof(*out->pages));
	if (!out->pos || !out->pages) {
		free(t);
		policy_evict_free(out);
		return -1;
	}
	{
		uint32_t np = 0;

		for (size_t i = 0; i < n; i++) {
			if (i > 0 && t[i].alloc_id == t[i - 1].alloc_id && t[i].page == t[i - 1].page &&
			    t[i].op == t[i - 1].op)
				continue;
			if (out->npages == 0 || out->pages[out->npages - 1].alloc_id != t[i].alloc_id ||
			    out->pages[out->npages - 1].page != t[i].page) {
				out->pages[out->npages].alloc_id = t[i].alloc_id;
				out->pages[out->npages].page = t[i].page;
				out->pages[out->npages].n = 0;
				out->pages[out->npages].first = np;
				out->npages++;
			}
			out->pos[np++] = t[i].op;
			out->pages[out->npages - 1].n++;
		}
	}
	free(t);
	return 0;
}

void policy_evict_free(policy_evict_t *e)
{
	free(e->t_at);
	free(e->pages);
	free(e->pos);
	memset(e, 0, sizeof(*e));
}

/* First page entry >= (alloc_id, page). */
static int page_lower(const policy_evict_t *e, uint64_t alloc_id, uint64_t page)
{
	int lo = 0, hi = e->npages;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const policy_page_uses_t *p = &e->pages[mid];

		if (p->alloc_id < alloc_id || (p->alloc_id == alloc_id && p->page < page))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Distance from just after op `now` to the next use of page entry pe. */
static uint64_t next_use(const policy_evict_t *e, const policy_page_uses_t *pe, int now)
{
	const uint32_t *v = e->pos + pe->first;
	uint32_t lo = 0, hi = pe->n;
	uint64_t t_now = e->t_at[now + 1];

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if ((int)v[mid] <= now)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < pe->n)
		return e->t_at[v[lo]] - t_now;
	/* wraps into the next iteration */
	return e->t_at[e->nops] - t_now + e->t_at[v[0]];
}

uint64_t policy_evict_key(const policy_evict_t *e, uint64_t alloc_id, uint64_t offset,
			  uint64_t bytes, int now)
{
	uint64_t p0, p1, best = POLICY_KEY_UNUSED;
	int i;

	if (!e || e->nops == 0 || alloc_id == 0)
		return POLICY_KEY_UNKNOWN;
	if (now < 0 || now >= e->nops)
		now = e->nops - 1;
	i = page_lower(e, alloc_id, 0);
	if (i >= e->npages || e->pages[i].alloc_id != alloc_id)
		return POLICY_KEY_UNKNOWN;
	p0 = offset / e->page_size;
	p1 = bytes ? (offset + bytes - 1) / e->page_size : p0;
	for (i = page_lower(e, alloc_id, p0);
	     i < e->npages && e->pages[i].alloc_id == alloc_id && e->pages[i].page <= p1; i++) {
		uint64_t d = next_use(e, &e->pages[i], now) + 1;

		if (d < best)
			best = d;
	}
	return best;
}

typedef struct {
	uint64_t key;
	int page;
} ranked_t;

static int cmp_ranked(const void *a, const void *b)
{
	const ranked_t *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->page < y->page ? -1 : x->page > y->page;
}

void policy_evict_dump(const policy_evict_t *e, int now, int top, policy_print_fn out,
		       void *ctx)
{
	ranked_t *r = malloc((size_t)(e->npages ? e->npages : 1) * sizeof(*r));

	policy_printf(out, ctx, "evict: %d pages of %" PRIu64 " bytes; order after #%d (%s)",
		      e->npages, e->page_size, now,
		      e->t_at && e->nops && e->t_at[e->nops] != (uint64_t)e->nops ? "ns" : "ops");
	if (!r)
		return;
	for (int i = 0; i < e->npages; i++) {
		r[i].key = next_use(e, &e->pages[i], now < 0 ? 0 : now);
		r[i].page = i;
	}
	qsort(r, (size_t)e->npages, sizeof(*r), cmp_ranked);
	for (int i = 0; i < e->npages && i < top; i++) {
		const policy_page_uses_t *p = &e->pages[r[i].page];

		policy_printf(out, ctx, "  a%" PRIu64 " page %" PRIu64 ": next use in %" PRIu64,
			      p->alloc_id, p->page, r[i].key);
	}
	free(r);
}
