/* policy/liveness.c - dead byte ranges of the steady iteration.
 *
 * SuperNeurons §3.2 frees a tensor after its last use in the iteration.  A
 * shim sees ranges, not tensors, and must not guess, so the rule here is
 * the conservative one of data-flow analysis: a byte is dead from its last
 * access to the next access that is known to overwrite it whole without
 * reading it (VMEM_ACCESS_WHOLE: a cuDNN/cuBLAS output with beta = 0, a
 * memset, a copy destination, a workspace).  Any read, read-write or
 * partial write in between keeps it live; a scanned kernel argument is
 * read-write, so it never starts a dead interval.
 *
 * Per allocation the touched bytes are cut at every range boundary into
 * elementary segments; each segment's accesses are walked in issue order:
 *
 *   segment [a,b):   #3 w!      #9 r      #20 r      #41 w!  ...
 *                         live       live      DEAD
 *                                  (after #20 until #41)
 *
 * The iteration is cyclic.  On a STABLE allocation (the same one, at the
 * same offsets, every iteration) a segment whose first access in the
 * iteration is a whole overwrite is dead from its last access to the end
 * and on into the next iteration up to that overwrite (wraps):
 *
 *   gradient dw:   #30 w! (conv_bwd_filter)   #46 r (sgd)  | next iter #30 w!
 *                                                  DEAD from #46 to #30 (wraps)
 *
 * A YOUNG allocation (a per-tensor allocator's fresh tensor) does not wrap:
 * the next iteration's tensor is another allocation, and this one is freed.
 * When the graph saw the free inside the iteration after every use
 * (policy_alloc_t.free_op), its bytes are dead from their last use to the
 * free (`freed`): nothing reads them, and an eviction before the free
 * drops them instead of copying them out (SuperNeurons' "free after the
 * last use", for the window the application's own free leaves):
 *
 *   dy (fresh):   #40 w!   #41 r   #42 r  ......  free before #47
 *                                       DEAD (freed) #42..#47
 *
 * The curves already count those bytes idle (not held), so `freed` ranges
 * only make DEAD steps.
 * UNSTABLE allocations (double buffers, a caching allocator's moving small
 * blocks) and foreign memory get no dead range at all.
 *
 * Adjacent segments with the same interval and the same resolving use are
 * merged.  Every dead range lies inside one use of its after_op (the use
 * that last touched it), so the runtime can find the range of the current
 * iteration from that op's actual arguments.  Only the pool can tell
 * whether a whole page is dead (a caching allocator packs several tensors
 * into a page, and bytes no op touches are never dead): the output is
 * byte ranges.  The curves (live_after, dead_after) are in the pool's
 * units when the graph knows its pages (policy_graph_set_pages): a paged
 * allocation's page counts whole while any byte on it is live.
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ACC_R 1u
#define ACC_KILL 2u
#define ACC_PW 4u

typedef struct {
	int last_op, last_use, last_read, first_op;
	bool first_kill;
} seg_t;

typedef struct {
	policy_dead_t *v;
	int n, cap;
} dvec_t;

static int dpush(dvec_t *d, const policy_dead_t *x)
{
	if (d->n == d->cap) {
		int cap = d->cap ? d->cap * 2 : 256;
		policy_dead_t *nv = realloc(d->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return -1;
		d->v = nv;
		d->cap = cap;
	}
	d->v[d->n++] = *x;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

typedef struct {
	uint64_t alloc_id;
	int use;
} akey_t;

static int cmp_akey(const void *a, const void *b)
{
	const akey_t *x = a, *y = b;

	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->use < y->use ? -1 : x->use > y->use;
}

static int cmp_dead_merge(const void *a, const void *b)
{
	const policy_dead_t *x = a, *y = b;

	if (x->after_op != y->after_op)
		return x->after_op < y->after_op ? -1 : 1;
	if (x->until_op != y->until_op)
		return x->until_op < y->until_op ? -1 : 1;
	if (x->use != y->use)
		return x->use < y->use ? -1 : 1;
	if (x->last_read != y->last_read)
		return x->last_read < y->last_read ? -1 : 1;
	if (x->wraps != y->wraps)
		return x->wraps < y->wraps ? -1 : 1;
	if (x->freed != y->freed)
		return x->freed < y->freed ? -1 : 1;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_dead_out(const void *a, const void *b)
{
	const policy_dead_t *x = a, *y = b;

	if (x->after_op != y->after_op)
		return x->after_op < y->after_op ? -1 : 1;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int seg_index(const uint64_t *bd, int nb, uint64_t off)
{
	int lo = 0, hi = nb;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (bd[mid] < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- whole pages ----
 *
 * The pool holds a paged allocation's memory by the page: a page is on the
 * device while any byte on it is live (or dead but not droppable: the pool
 * drops a page only when every byte of it is dead).  A page whose touched
 * bytes are all idle (a YOUNG allocation before its first or after its
 * last access) is not mapped at all.  The difference to the byte count is
 * added to the curves as a correction, per page, from the not-live ranges
 * over it:
 *
 *   page [ t1 1.5 MiB ][ rest of the page: 0.5 MiB, untouched ]
 *        live after #3 .. #9: 2 MiB held, 1.5 MiB live -> +0.5 MiB there
 */

typedef struct {
	uint64_t page;
	int pos;
	int64_t dnot, didle;     /* not-live bytes and idle bytes entering at pos */
} pev_t;

typedef struct {
	pev_t *v;
	size_t n, cap;
} pvec_t;

static int ppush(pvec_t *e, pev_t x)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 256;
		pev_t *nv = realloc(e->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		e->v = nv;
		e->cap = cap;
	}
	e->v[e->n++] = x;
	return 0;
}

static int cmp_pev(const void *a, const void *b)
{
	const pev_t *x = a, *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The not-live range d over its pages, as events at its interval's ends. */
static int range_events(const policy_dead_t *d, bool is_idle, uint64_t page, int p, pvec_t *e)
{
	int iv[2][2], ni = 0;

	if (!d->wraps) {
		iv[ni][0] = d->after_op;
		iv[ni++][1] = d->until_op;
	} else {
		iv[ni][0] = d->after_op;
		iv[ni++][1] = p;
		iv[ni][0] = 0;
		iv[ni++][1] = d->until_op;
	}
	for (uint64_t pg = d->offset / page; pg * page < d->offset + d->bytes; pg++) {
		uint64_t lo = pg * page > d->offset ? pg * page : d->offset;
		uint64_t hi = (pg + 1) * page < d->offset + d->bytes ? (pg + 1) * page :
				d->offset + d->bytes;
		int64_t ov = (int64_t)(hi - lo);

		for (int i = 0; i < ni; i++) {
			if (iv[i][1] <= iv[i][0])
				continue;
			if (ppush(e, (pev_t){ pg, iv[i][0], ov, is_idle ? ov : 0 }) < 0 ||
			    ppush(e, (pev_t){ pg, iv[i][1], -ov, is_idle ? -ov : 0 }) < 0)
				return -1;
		}
	}
	return 0;
}

/* Adds v over positions [a, b) of a difference array. */
static void span_add(int64_t *df, int a, int b, int64_t v)
{
	if (b > a && v) {
		df[a] += v;
		df[b] -= v;
	}
}

/* One page's correction from `tp` touched bytes (`full`: they are all of
 * the page the allocation has) and its events ev[0..n), sorted by pos. */
static void page_corr(const pev_t *ev, size_t n, uint64_t page, uint64_t tp, bool full, int p,
		      int64_t *cl, int64_t *cw)
{
	int64_t nl = 0, id = 0;
	int prev = 0;

	for (size_t i = 0;; ) {
		int pos = i < n ? ev[i].pos : p;
		bool gone = (uint64_t)id >= tp;                         /* not mapped */
		bool dropped = (uint64_t)nl >= tp && (full || gone);   /* dead, droppable */
		int64_t held = dropped ? 0 : (int64_t)page;

		span_add(cl, prev, pos, held - ((int64_t)tp - nl));
		span_add(cw, prev, pos, (gone ? 0 : (int64_t)page) - ((int64_t)tp - id));
		if (i >= n)
			break;
		for (; i < n && ev[i].pos == pos; i++) {
			nl += ev[i].dnot;
			id += ev[i].didle;
		}
		prev = pos;
	}
}

/* The whole-page correction of one paged allocation: segments [bd[s],
 * bd[s + 1]) touched when seg[s].last_op >= 0, its not-live ranges in
 * out->v[d0..] (dead) and idle->v[i0..] (idle). */
static int alloc_pages(const policy_graph_t *g, uint64_t page, const uint64_t *bd,
		       const seg_t *seg, int nseg, const dvec_t *out, int d0, const dvec_t *idle,
		       int i0, int64_t *cl, int64_t *cw)
{
	uint64_t extent = bd[nseg], npages = (extent + page - 1) / page;
	uint64_t *tp = calloc((size_t)npages, sizeof(*tp));
	pvec_t e = { 0 };
	int p = g->nops, rc = -1;

	if (!tp)
		return -1;
	for (int s = 0; s < nseg; s++)
		for (uint64_t a = bd[s]; seg[s].last_op >= 0 && a < bd[s + 1];) {
			uint64_t pg = a / page, b = (pg + 1) * page < bd[s + 1] ? (pg + 1) * page :
						    bd[s + 1];

			tp[pg] += b - a;
			a = b;
		}
	for (int i = d0; i < out->n; i++)
		if (!out->v[i].freed && range_events(&out->v[i], false, page, p, &e) < 0)
			goto out;
	for (int i = i0; i < idle->n; i++)
		if (range_events(&idle->v[i], true, page, p, &e) < 0)
			goto out;
	if (e.n > 1)
		qsort(e.v, e.n, sizeof(*e.v), cmp_pev);
	for (uint64_t pg = 0, i = 0; pg < npages; pg++) {
		uint64_t j = i, span = (pg + 1) * page < extent ? page : extent - pg * page;

		while (j < e.n && e.v[j].page == pg)
			j++;
		if (tp[pg])
			page_corr(e.v + i, j - i, page, tp[pg], tp[pg] >= span, p, cl, cw);
		i = j;
	}
	rc = 0;
out:
	free(tp);
	free(e.v);
	return rc;
}

/* One allocation's uses: ids[0..n), all of alloc_id, in issue order.
 * cl, cw: whole-page corrections (live, and live with the dead) when the
 * allocation is paged. */
static int one_alloc(const policy_graph_t *g, const int *ids, int n, bool wrap, int free_op,
		     dvec_t *out, dvec_t *idle, uint64_t *touched, int64_t *cl, int64_t *cw)
{
	const int d0 = out->n, i0 = idle->n;
	const uint64_t page = n ? policy_graph_page(g, g->uses[ids[0]].alloc_id) : 0;

	uint64_t *bd = malloc((size_t)(2 * n + 1) * sizeof(*bd));
	seg_t *seg = NULL;
	uint8_t *acc = NULL;
	int *acc_use = NULL, *touch = NULL;
	int nb = 0, nseg, ntouch, rc = -1;

	if (!bd)
		return -1;
	for (int i = 0; i < n; i++) {
		const policy_use_t *u = &g->uses[ids[i]];

		if (u->bytes == 0)
			continue;
		bd[nb++] = u->offset;
		bd[nb++] = u->offset + u->bytes;
	}
	qsort(bd, (size_t)nb, sizeof(*bd), cmp_u64);
	{
		int m = 0;
		for (int i = 0; i < nb; i++)
			if (m == 0 || bd[i] != bd[m - 1])
				bd[m++] = bd[i];
		nb = m;
	}
	nseg = nb > 0 ? nb - 1 : 0;
	if (nseg == 0) {
		free(bd);
		return 0;
	}
	seg = malloc((size_t)nseg * sizeof(*seg));
	acc = calloc((size_t)nseg, 1);
	acc_use = malloc((size_t)nseg * sizeof(int));
	touch = malloc((size_t)nseg * sizeof(int));
	if (!seg || !acc || !acc_use || !touch)
		goto out;
	for (int s = 0; s < nseg; s++)
		seg[s] = (seg_t){ -1, -1, -1, -1, false };

	for (int i = 0; i < n;) {
		int op = g->uses[ids[i]].op;

		ntouch = 0;
		for (; i < n && g->uses[ids[i]].op == op; i++) {
			const policy_use_t *u = &g->uses[ids[i]];
			uint8_t bits;
			int lo, hi;

			if (u->bytes == 0)
				continue;
			if (u->access & VMEM_ACCESS_R)
				bits = ACC_R;
			else if ((u->access & VMEM_ACCESS_W) && (u->access & VMEM_ACCESS_WHOLE))
				bits = ACC_KILL;
			else if (u->access & VMEM_ACCESS_W)
				bits = ACC_PW;
			else
				bits = ACC_R;   /* no access bits at all: assume it reads */
			lo = seg_index(bd, nb, u->offset);
			hi = seg_index(bd, nb, u->offset + u->bytes);
			for (int s = lo; s < hi; s++) {
				if (!acc[s]) {
					touch[ntouch++] = s;
					acc_use[s] = ids[i];
				}
				acc[s] |= bits;
			}
		}
		for (int t = 0; t < ntouch; t++) {
			int s = touch[t];
			seg_t *x = &seg[s];
			uint8_t a = acc[s];
			bool kill = !(a & ACC_R) && (a & ACC_KILL);

			acc[s] = 0;
			if (kill && x->last_op >= 0) {
				policy_dead_t d = { 0 };

				d.alloc_id = g->uses[ids[0]].alloc_id;
				d.offset = bd[s];
				d.bytes = bd[s + 1] - bd[s];
				d.after_op = x->last_op;
				d.until_op = op;
				d.last_read = x->last_read;
				d.use = x->last_use;
				if (dpush(out, &d) < 0)
					goto out;
			}
			if (x->first_op < 0) {
				x->first_op = op;
				x->first_kill = kill;
			}
			x->last_op = op;
			x->last_use = acc_use[s];
			if (a & ACC_R)
				x->last_read = op;
			else if (kill)
				x->last_read = -1;
		}
	}
	for (int s = 0; s < nseg; s++) {
		const seg_t *x = &seg[s];

		if (x->last_op >= 0)
			*touched += bd[s + 1] - bd[s];
		if (!wrap && x->last_op >= 0) {
			/* a fresh allocation holds nothing before its first access
			 * or after its last one (for the peak of live bytes only) */
			policy_dead_t d = { 0 };

			d.alloc_id = g->uses[ids[0]].alloc_id;
			d.offset = bd[s];
			d.bytes = bd[s + 1] - bd[s];
			d.after_op = x->last_op;
			d.until_op = x->first_op;
			d.wraps = true;
			if (dpush(idle, &d) < 0)
				goto out;
			if (free_op > x->last_op) {
				/* freed by the application after its last use */
				d.until_op = free_op < g->nops ? free_op : 0;
				d.wraps = free_op >= g->nops;
				d.last_read = x->last_read;
				d.use = x->last_use;
				d.freed = true;
				if (dpush(out, &d) < 0)
					goto out;
			}
		}
		if (wrap && x->first_kill && x->last_op >= 0) {
			policy_dead_t d = { 0 };

			d.alloc_id = g->uses[ids[0]].alloc_id;
			d.offset = bd[s];
			d.bytes = bd[s + 1] - bd[s];
			d.after_op = x->last_op;
			d.until_op = x->first_op;
			d.wraps = true;
			d.last_read = x->last_read;
			d.use = x->last_use;
			if (dpush(out, &d) < 0)
				goto out;
		}
	}
	if (page && cl && alloc_pages(g, page, bd, seg, nseg, out, d0, idle, i0, cl, cw) < 0)
		goto out;
	rc = 0;
out:
	free(bd);
	free(seg);
	free(acc);
	free(acc_use);
	free(touch);
	return rc;
}

/* Live bytes after each op (and the dead ranges' share of the rest):
 * touched bytes less the dead and idle intervals covering "after op k". */
static int peak(const policy_graph_t *g, policy_live_t *l, const dvec_t *idle, uint64_t touched,
		const int64_t *cl, const int64_t *cw)
{
	int64_t corr_l = 0, corr_w = 0;
	int p = g->nops;
	int64_t *diff = calloc((size_t)p + 1, sizeof(*diff));
	int64_t *ddiff = calloc((size_t)p + 1, sizeof(*ddiff));
	int64_t dead = 0, dl = 0;

	l->peak_live = touched;
	l->peak_op = 0;
	if (p == 0) {
		free(diff);
		free(ddiff);
		return 0;
	}
	l->live_after = malloc((size_t)p * sizeof(*l->live_after));
	l->dead_after = malloc((size_t)p * sizeof(*l->dead_after));
	if (!diff || !ddiff || !l->live_after || !l->dead_after) {
		free(diff);
		free(ddiff);
		return -1;
	}
	/* dead over positions "after op k" for k in [after, until) cyclically */
	for (int i = 0; i < l->ndead + idle->n; i++) {
		const policy_dead_t *d = i < l->ndead ? &l->dead[i] : &idle->v[i - l->ndead];
		int64_t *df = i < l->ndead ? ddiff : diff;
		int a = d->after_op, b = d->until_op;

		if (d->freed)
			continue;   /* idle already */

		if (!d->wraps) {
			df[a] += (int64_t)d->bytes;
			df[b] -= (int64_t)d->bytes;
		} else {
			df[a] += (int64_t)d->bytes;
			df[p] -= (int64_t)d->bytes;
			df[0] += (int64_t)d->bytes;
			df[b] -= (int64_t)d->bytes;
		}
	}
	l->peak_live = 0;
	for (int k = 0; k < p; k++) {
		uint64_t live;

		dl += ddiff[k];
		dead += diff[k] + ddiff[k];
		live = touched > (uint64_t)dead ? touched - (uint64_t)dead : 0;
		l->dead_after[k] = (uint64_t)dl;
		if (cl) {
			/* whole pages: held = live + corr_l, held with the dead
			 * = live + dead + corr_w */
			int64_t h, hw;

			corr_l += cl[k];
			corr_w += cw[k];
			h = (int64_t)live + corr_l;
			hw = (int64_t)live + dl + corr_w;
			live = h > 0 ? (uint64_t)h : 0;
			l->dead_after[k] = hw > h ? (uint64_t)(hw - h) : 0;
		}
		l->live_after[k] = live;
		if (live > l->peak_live) {
			l->peak_live = live;
			l->peak_op = k;
		}
	}
	free(diff);
	free(ddiff);
	return 0;
}

int policy_liveness(const policy_graph_t *g, policy_live_t *out)
{
	int *ids = malloc((size_t)(g->nuses ? g->nuses : 1) * sizeof(int));
	akey_t *keys = malloc((size_t)(g->nuses ? g->nuses : 1) * sizeof(*keys));
	dvec_t d = { 0 }, idle = { 0 };
	uint64_t touched = 0;
	int m = 0;
	/* whole-page corrections, when the graph knows the pool's pages */
	int64_t *cl = g->page_size ? calloc((size_t)g->nops + 1, sizeof(*cl)) : NULL;
	int64_t *cw = g->page_size ? calloc((size_t)g->nops + 1, sizeof(*cw)) : NULL;

	memset(out, 0, sizeof(*out));
	if (!ids || !keys || (g->page_size && (!cl || !cw))) {
		free(ids);
		free(keys);
		free(cl);
		free(cw);
		return -1;
	}
	for (int i = 0; i < g->nuses; i++)
		keys[i] = (akey_t){ g->uses[i].alloc_id, i };
	if (g->nuses > 1)
		qsort(keys, (size_t)g->nuses, sizeof(*keys), cmp_akey);
	for (int i = 0; i < g->nuses; i++)
		ids[i] = keys[i].use;
	free(keys);
	for (int i = 0; i < g->nuses; i = m) {
		const policy_alloc_t *a = policy_graph_alloc(g, g->uses[ids[i]].alloc_id);

		for (m = i; m < g->nuses && g->uses[ids[m]].alloc_id == g->uses[ids[i]].alloc_id; m++)
			;
		if (!a || (a->cls != POLICY_ALLOC_STABLE && a->cls != POLICY_ALLOC_YOUNG))
			continue;
		if (one_alloc(g, ids + i, m - i, a->cls == POLICY_ALLOC_STABLE,
			      a->cls == POLICY_ALLOC_YOUNG ? a->free_op : -1, &d, &idle, &touched,
			      cl, cw) < 0) {
			free(ids);
			free(d.v);
			free(idle.v);
			free(cl);
			free(cw);
			return -1;
		}
	}
	free(ids);
	/* merge adjacent segments of one interval */
	if (d.n > 1)
		qsort(d.v, (size_t)d.n, sizeof(*d.v), cmp_dead_merge);
	{
		int w = 0;

		for (int i = 0; i < d.n; i++) {
			policy_dead_t *x = &d.v[i];

			if (w > 0) {
				policy_dead_t *y = &d.v[w - 1];

				if (y->after_op == x->after_op && y->until_op == x->until_op &&
				    y->use == x->use && y->last_read == x->last_read &&
				    y->wraps == x->wraps && y->freed == x->freed &&
				    y->alloc_id == x->alloc_id &&
				    y->offset + y->bytes == x->offset) {
					y->bytes += x->bytes;
					continue;
				}
			}
			d.v[w++] = *x;
		}
		d.n = w;
	}
	if (d.n > 1)
		qsort(d.v, (size_t)d.n, sizeof(*d.v), cmp_dead_out);
	out->dead = d.v;
	out->ndead = d.n;
	int rc = peak(g, out, &idle, touched, cl, cw);

	free(idle.v);
	free(cl);
	free(cw);
	if (rc < 0) {
		policy_live_free(out);
		return -1;
	}
	return 0;
}

void policy_live_free(policy_live_t *l)
{
	free(l->dead);
	free(l->live_after);
	free(l->dead_after);
	memset(l, 0, sizeof(*l));
}

void policy_live_dump(const policy_graph_t *g, const policy_live_t *l, policy_print_fn out,
		      void *ctx)
{
	uint64_t total = 0;

	(void)g;
	for (int i = 0; i < l->ndead; i++)
		total += l->dead[i].bytes;
	policy_printf(out, ctx, "liveness: %d dead ranges (%" PRIu64 " bytes), peak live %" PRIu64
		      " bytes after #%d", l->ndead, total, l->peak_live, l->peak_op);
	for (int i = 0; i < l->ndead; i++) {
		const policy_dead_t *d = &l->dead[i];

		policy_printf(out, ctx, "dead a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64
			      " after #%d until #%d%s%s last read #%d use %d",
			      d->alloc_id, d->offset, d->bytes, d->after_op, d->until_op,
			      d->wraps ? " (next iter)" : "", d->freed ? " (freed)" : "",
			      d->last_read, d->use);
	}
}
