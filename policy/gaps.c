/* policy/gaps.c - past vDNN: move whatever idles, until the plan fits.
 *
 * vDNN moves feature maps only: what is written in forward and read again
 * in backward.  When even vDNN-all does not fit the budget, what is left
 * is everything else an iteration keeps: weights between their forward
 * and backward reads, gradients between the backward op that writes them
 * and the optimizer that reads them, the optimizer's state between two
 * steps (a whole iteration), and under vDNN-conv the activations it
 * leaves.  Without a plan for them the pool evicts them when it must and
 * the next call that reads them waits on the host for its copy back (a
 * miss).  This pass plans those moves instead (the idea of Capuchin's and
 * SwapAdvisor's swap planning: every tensor's idle interval is a
 * candidate, chosen on the plan's memory curve and its measured times).
 *
 * An interval is one tensor version's idle time between two accesses:
 *
 *   momentum m (STABLE):  #90 sgd rw ................................ #90 sgd (next iteration)
 *                         out after #90             back before #85 (next iteration), the copy
 *                                                   ending as #90 starts
 *   weight w:   #3 conv_fwd r .......... #70 conv_bwd_data r ... #71 conv_bwd_filter r
 *   gradient:   #71 conv_bwd_filter w ................. #92 sgd r
 *
 * Greedy on the curve of policy_need_curve: while some op needs more than
 * the limit, the worst op's intervals (those away while it runs) are
 * ranked - first those whose round trip fits in the interval (the copy
 * hides behind compute), then the longest - and the best is added.  The
 * curve is updated over its interval and the worst op found again.  When
 * no interval is away at the worst op, one whose copy back was placed
 * before it (the ops between it and the next access run shorter than the
 * copy) leaves anyway and comes back right after it, late.  An op that
 * nothing moved can relieve (its own bytes are most of the budget) is
 * left over the limit, and the ops ranked after it still get their
 * intervals: one op that cannot fit does not leave the rest to the
 * reactive layer.  Ranges are cut to the tensor's own pages
 * (policy_own_pages): a page shared with another tensor is not this
 * tensor's to move.  What an interval frees while an op runs is its pages
 * that are not off the device already - away under another interval (the
 * versions of one caching segment that successive scanned launches write
 * overlap) or dead then - so that the curve counts each page once, as the
 * pool holds it.
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	int tensor;
	int a, use, b;           /* out after op a (through use), needed by op b */
	int pf;                  /* prefetch issued before op pf */
	bool wrap;               /* b is in the next iteration */
	bool hidden;             /* the round trip fits */
	bool taken;
	bool late;               /* its copy back was moved after an op it crowded out */
	uint64_t alloc_id;
	uint64_t offset, bytes;  /* the pages it moves (policy_move_pages) */
	uint64_t held;           /* device bytes away while it is */
	uint64_t gap_ns;         /* from a's end to b's start */
} cand_t;

typedef struct {
	cand_t *v;
	int n, cap;
} cvec_t;

static int cpush(cvec_t *c, const cand_t *x)
{
	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 256;
		cand_t *nv = realloc(c->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return -1;
		c->v = nv;
		c->cap = cap;
	}
	c->v[c->n++] = *x;
	return 0;
}

/* One access of a tensor: the op, the use that touches it, and its
 * distance from the tensor's first access in the cyclic order. */
typedef struct {
	int op, use, dist;
} acc_t;

static int cmp_acc(const void *x, const void *y)
{
	const acc_t *a = x, *b = y;

	return (a->dist > b->dist) - (a->dist < b->dist);
}

/* Start of op j on the timeline of two iterations (j in [0, 2p]). */
static double start_of(const uint64_t *at, int p, int j)
{
	return j >= p ? (double)at[j - p] + (double)at[p] : (double)at[j];
}

/* Places the copy back of candidate x (a, b, wrap, held set): it ends as
 * b starts and starts no earlier than the copy out ends (hidden); when the
 * round trip does not fit, it is issued right before b (the device waits
 * on it, the host does not), and never before the op after a's next (an
 * interval is for the ops it is away from).  False when no op runs
 * between a and b. */
static bool place(const policy_graph_t *g, const uint64_t *at, const policy_timing_t *t,
		  cand_t *x)
{
	int p = g->nops, b = x->wrap ? x->b + p : x->b, s = b;
	uint64_t d2h = t->d2h_bytes_per_s ? t->d2h_bytes_per_s : t->h2d_bytes_per_s;
	/* the pool copies whole pages: a tensor alone in a page moves all of it */
	double out_end = start_of(at, p, x->a + 1) + policy_copy_ns(x->held, d2h);
	double need = start_of(at, p, b);
	double start = need - policy_copy_ns(x->held, t->h2d_bytes_per_s);

	x->gap_ns = (uint64_t)(need - start_of(at, p, x->a + 1));
	if (s < x->a + 2)
		return false;
	/* the last op that starts at or before `start`, leaving at least
	 * one op run with the tensor away */
	if (start >= out_end)
		while (s > x->a + 2 && start_of(at, p, s) > start)
			s--;
	x->hidden = start >= out_end && start_of(at, p, s) <= start;
	x->pf = s % p;
	return true;
}

/* The intervals of tensor t into c.  acc: scratch of g->nops entries. */
static int tensor_cands(const policy_graph_t *g, int t, const policy_gaps_config_t *cfg,
			const uint64_t *at, acc_t *acc, int e0, int e1, cvec_t *c)
{
	const policy_tensor_t *T = &g->tensors[t];
	const policy_alloc_t *al = policy_graph_alloc(g, T->alloc_id);
	int p = g->nops, n = 0, first = T->producer;
	uint64_t lo, bytes, held;
	bool stable;

	if (!al || (al->cls != POLICY_ALLOC_STABLE && al->cls != POLICY_ALLOC_YOUNG) ||
	    !policy_own_pages(g, cfg->page_size, T->alloc_id, T->offset, T->bytes, &lo, &bytes,
			      &held) ||
	    held < cfg->min_bytes || 2 * bytes < held)
		return 0;
	stable = al->cls == POLICY_ALLOC_STABLE;
	if (first < 0 && e0 < e1)
		first = g->edges[e0].op;   /* a live-in version: from its first reader */
	if (T->producer >= 0)
		acc[n++] = (acc_t){ T->producer, T->use, 0 };
	for (int e = e0; e < e1; e++) {
		const policy_edge_t *E = &g->edges[e];
		int d = (E->op - first + p) % p;

		if (T->producer >= 0 && d == 0)
			d = p;   /* the producer reads it again in the next iteration */
		if (n && acc[n - 1].op == E->op && acc[n - 1].dist == d)
			continue;
		acc[n++] = (acc_t){ E->op, E->use, d };
	}
	if (n > 1)
		qsort(acc, (size_t)n, sizeof(*acc), cmp_acc);
	/* a live-in version of a STABLE allocation is the same bytes next
	 * iteration: its last read wraps to its first */
	int m = n;

	if (T->producer < 0 && stable && n > 1)
		acc[m++] = (acc_t){ acc[0].op, acc[0].use, acc[0].dist + p };
	for (int i = 0; i + 1 < m; i++) {
		cand_t x = { 0 };

		if (acc[i + 1].dist == acc[i].dist)
			continue;
		x.tensor = t;
		x.a = acc[i].op;
		x.use = acc[i].use;
		x.b = acc[i + 1].op;
		x.wrap = x.b <= x.a;
		if (x.wrap && !stable)
			continue;   /* a YOUNG allocation is gone by then */
		/* the pages a move after op a takes (a part, when no call
		 * names all of it: policy_move_pages) */
		if (x.use < 0 || !policy_move_pages(g, cfg->page_size, t, x.use, x.a, &x.offset,
						    &x.bytes, &x.held) ||
		    x.held < cfg->min_bytes || 2 * x.bytes < x.held)
			continue;
		x.alloc_id = T->alloc_id;
		if (!place(g, at, &cfg->timing, &x))
			continue;
		if (cpush(c, &x) < 0)
			return -1;
	}
	return 0;
}

/* k in [lo, hi) on the ring of ops (lo == hi: empty). */
static bool within(int k, int lo, int hi)
{
	return lo <= hi ? k >= lo && k < hi : k >= lo || k < hi;
}

/* Is a tensor out after op a and back before op b away while op k runs,
 * cyclically?  A wrapped interval back before its own op a (a momentum
 * whose copy back does not hide: placed right before its next step) is
 * away from every other op. */
static bool away_while(int a, int b, bool wrap, int k)
{
	if (wrap && b == a)
		return k != a;
	return k != a && within(k, a, b);
}

/* Is op k away-time of x (after a, before its prefetch op)? */
static bool covers(const cand_t *x, int k)
{
	return away_while(x->a, x->pf, x->wrap, k);
}

typedef struct {
	uint64_t alloc_id, offset;
	int i;                    /* in l->dead */
} dkey_t;

/* What is off the device already: the set gaps.c adds to, the intervals
 * taken, and (liveness on) the dead ranges. */
typedef struct {
	const policy_graph_t *g;
	const policy_offloads_t *o;
	const cvec_t *c;
	const policy_live_t *l;   /* NULL: the dead ranges stay resident */
	dkey_t *dead;             /* l's dead ranges by allocation and offset */
	int *taken, ntaken;
	policy_ival_t *scratch;   /* o->n + c->n + l->ndead entries */
} away_t;

static int cmp_dead(const void *a, const void *b)
{
	const dkey_t *x = a, *y = b;

	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Is dead range d off the device while op k runs: dead after the op
 * before (liveness's positions [after_op, until_op), wrapping), and not
 * the op that writes it (its output: need counts it)? */
static bool dead_during(const policy_dead_t *d, int k, int p)
{
	int at = (k + p - 1) % p;

	if (k == d->until_op)
		return false;
	return d->wraps ? at >= d->after_op || at < d->until_op :
			  at >= d->after_op && at < d->until_op;
}

/* The whole pages of d inside [lo, hi), as a range (empty: lo == hi):
 * the pool drops a page only when all of it is dead. */
static policy_ival_t dead_pages(const away_t *s, const policy_dead_t *d, uint64_t lo, uint64_t hi)
{
	uint64_t page = policy_graph_page(s->g, d->alloc_id);
	uint64_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->bytes;

	b = b < hi ? b : hi;
	if (page) {
		a = (a + page - 1) / page * page;
		b = b / page * page;
	}
	return (policy_ival_t){ d->alloc_id, a, b > a ? b : a };
}

/* The bytes of x's pages that are not away already while op k runs.
 * Versions of the same bytes can each have an interval - a scanned
 * kernel argument's extent runs to its allocation's end, so the versions
 * successive launches write overlap - and a page they share frees its
 * bytes once:
 *
 *   a2 [2, 20) MiB   t178 out after #133 ....................... (next iteration)
 *   a2 [6, 20) MiB   t184 out after #135 ....   its [6, 20) left with t178
 */
static uint64_t fresh_at(const away_t *s, const cand_t *x, int k)
{
	policy_ival_t xv = { x->alloc_id, x->offset, x->offset + x->held };
	int p = s->g->nops, m = policy_offloads_over(s->g, s->o, NULL, xv, k, true, s->scratch);

	if (s->l) {
		/* the allocation's dead ranges: binary search for its first */
		int lo = 0, hi = s->l->ndead;

		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (s->dead[mid].alloc_id < xv.alloc_id)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (int i = lo; i < s->l->ndead; i++) {
			const policy_dead_t *d = &s->l->dead[s->dead[i].i];

			if (d->alloc_id != xv.alloc_id || d->offset >= xv.hi)
				break;
			if (d->offset + d->bytes > xv.lo && dead_during(d, k, p)) {
				policy_ival_t v = dead_pages(s, d, xv.lo, xv.hi);

				if (v.hi > v.lo)
					s->scratch[m++] = v;
			}
		}
	}
	for (int i = 0; i < s->ntaken; i++) {
		const cand_t *y = &s->c->v[s->taken[i]];

		if (y != x && y->alloc_id == xv.alloc_id && y->offset < xv.hi &&
		    xv.lo < y->offset + y->held && covers(y, k))
			s->scratch[m++] = (policy_ival_t){ y->alloc_id, y->offset, y->offset + y->held };
	}
	return m ? x->held - policy_ival_covered(xv, s->scratch, m) : x->held;
}

/* x is taken: the ops it is away from hold its pages less. */
static void relieve(away_t *s, cand_t *x, uint64_t *need, int p)
{
	for (int k = 0; k < p; k++)
		if (covers(x, k)) {
			uint64_t h = fresh_at(s, x, k);

			need[k] = need[k] > h ? need[k] - h : 0;
		}
	x->taken = true;
	s->taken[s->ntaken++] = (int)(x - s->c->v);
}

/* Is x back early for op k: prefetched before k runs, needed after it? */
static bool back_early(const cand_t *x, int k)
{
	return x->pf != x->b && within(k, x->pf, x->b);
}

static bool better(const cand_t *x, const cand_t *y)
{
	if (x->hidden != y->hidden)
		return x->hidden;
	if (x->gap_ns != y->gap_ns)
		return x->gap_ns > y->gap_ns;
	return x->held > y->held;
}

/* The op that holds the most, among those not `stuck` (NULL: all). */
static int worst(const uint64_t *need, const bool *stuck, int p)
{
	int w = -1;

	for (int k = 0; k < p; k++)
		if (!(stuck && stuck[k]) && (w < 0 || need[k] > need[w]))
			w = k;
	return w < 0 ? 0 : w;
}

/* The set's tensors, as a flag per tensor (they are not moved twice). */
static bool *moved_tensors(const policy_graph_t *g, const policy_offloads_t *o)
{
	bool *v = calloc((size_t)(g->ntensors ? g->ntensors : 1), sizeof(*v));

	for (int i = 0; v && i < o->n; i++)
		if (o->v[i].tensor >= 0 && o->v[i].tensor < g->ntensors)
			v[o->v[i].tensor] = true;
	return v;
}

/* Appends the taken candidates to o. */
static int append(const cvec_t *c, policy_offloads_t *o, int taken)
{
	policy_offload_t *nv = realloc(o->v, (size_t)(o->n + taken) * sizeof(*nv));

	if (!nv)
		return -1;
	o->v = nv;
	for (int i = 0; i < c->n; i++) {
		const cand_t *x = &c->v[i];
		policy_offload_t *y;

		if (!x->taken)
			continue;
		y = &o->v[o->n++];
		memset(y, 0, sizeof(*y));
		y->tensor = x->tensor;
		y->after_op = x->a;
		y->use = x->use;
		y->need_op = x->b;
		y->prefetch_op = x->pf;
		y->gap = true;
		y->wrap = x->wrap;
		y->offset = x->offset;
		y->bytes = x->bytes;
		y->held = x->held;
	}
	if (o->n > 1)
		qsort(o->v, (size_t)o->n, sizeof(*o->v), policy_offload_cmp);
	return 0;
}

int policy_gaps_fill(const policy_graph_t *g, const policy_live_t *l,
		     const policy_gaps_config_t *cfg, policy_offloads_t *o)
{
	int p = g->nops, taken = 0, nstuck = 0, rc = -1;
	uint64_t *need = NULL, *at = NULL;
	bool *moved = NULL, *stuck = NULL;
	acc_t *acc = NULL;
	cvec_t c = { 0 };
	policy_gaps_t s = { 0 };
	away_t aw = { .g = g, .o = o, .c = &c };

	if (p == 0 || !l->live_after || cfg->limit == 0)
		return 0;
	need = malloc((size_t)p * sizeof(*need));
	stuck = calloc((size_t)p, sizeof(*stuck));
	at = policy_op_starts(g, &cfg->timing);
	acc = malloc(((size_t)g->nedges + 2) * sizeof(*acc));
	moved = moved_tensors(g, o);
	if (!need || !stuck || !at || !acc || !moved ||
	    policy_need_curve(g, l, cfg->with_dead, o, need) < 0)
		goto out;
	s.need_before = need[worst(need, NULL, p)];
	s.tried = true;
	if (s.need_before > cfg->limit) {
		/* edges are sorted by tensor: each tensor's reads in one run */
		for (int t = 0, e = 0; t < g->ntensors; t++) {
			int e0 = e;

			while (e < g->nedges && g->edges[e].tensor == t)
				e++;
			if (!moved[t] && tensor_cands(g, t, cfg, at, acc, e0, e, &c) < 0)
				goto out;
		}
	}
	aw.taken = malloc((size_t)(c.n ? c.n : 1) * sizeof(*aw.taken));
	aw.scratch = malloc((size_t)(o->n + c.n + l->ndead + 1) * sizeof(*aw.scratch));
	aw.dead = malloc((size_t)(l->ndead + 1) * sizeof(*aw.dead));
	if (!aw.taken || !aw.scratch || !aw.dead)
		goto out;
	if (!cfg->with_dead) {
		for (int i = 0; i < l->ndead; i++)
			aw.dead[i] = (dkey_t){ l->dead[i].alloc_id, l->dead[i].offset, i };
		qsort(aw.dead, (size_t)l->ndead, sizeof(*aw.dead), cmp_dead);
		aw.l = l;
	}
	for (;;) {
		int w = worst(need, stuck, p), best = -1, late = -1;

		if (stuck[w] || need[w] <= cfg->limit)
			break;
		for (int i = 0; i < c.n; i++)
			if (!c.v[i].taken && covers(&c.v[i], w) && (!nstuck || c.v[i].hidden) &&
			    (best < 0 || better(&c.v[i], &c.v[best])) && fresh_at(&aw, &c.v[i], w))
				best = i;
		if (best < 0) {
			/* nothing left idles there: an interval whose copy back
			 * runs beside the worst op for a later one comes back
			 * after it instead (the device then waits on the copy) */
			for (int i = 0; i < c.n; i++)
				if (c.v[i].taken && back_early(&c.v[i], w) &&
				    (best < 0 || c.v[i].held > c.v[best].held) && fresh_at(&aw, &c.v[i], w))
					best = i;
			/* or one not taken yet whose copy back was placed
			 * before the worst op (the ops after it run too short
			 * to hide the copy): it leaves, and comes back after */
			for (int i = 0; best < 0 && i < c.n; i++)
				if (!c.v[i].taken && back_early(&c.v[i], w) && w != c.v[i].a &&
				    (late < 0 || c.v[i].held > c.v[late].held) && fresh_at(&aw, &c.v[i], w))
					late = i;
			if (best < 0 && late >= 0) {
				cand_t *y = &c.v[late];

				taken++;
				y->pf = (w + 1) % p;
				y->hidden = false;
				y->late = true;
				relieve(&aw, y, need, p);
				continue;
			}
			if (best < 0) {
				/* the op's own bytes, or what cannot move: the
				 * ops after it in the ranking still get theirs */
				stuck[w] = true;
				nstuck++;
				continue;
			}
			cand_t *y = &c.v[best];

			for (int k = y->pf; k != (w + 1) % p; k = (k + 1) % p) {
				uint64_t h = fresh_at(&aw, y, k);

				need[k] = need[k] > h ? need[k] - h : 0;
			}
			y->pf = (w + 1) % p;
			y->hidden = false;
			y->late = true;
			continue;
		}
		cand_t *x = &c.v[best];

		taken++;
		relieve(&aw, x, need, p);
	}
	for (int i = 0; i < c.n; i++)
		if (c.v[i].taken) {
			s.added++;
			s.wraps += c.v[i].wrap;
			s.hidden += c.v[i].hidden;
			s.late += c.v[i].late;
			s.bytes += c.v[i].bytes;
		}
	s.worst_op = worst(need, NULL, p);
	s.need_after = need[s.worst_op];
	s.worst_own = policy_op_bytes(g, s.worst_op);
	s.fits = s.need_after <= cfg->limit;
	if (taken && append(&c, o, taken) < 0)
		goto out;
	o->gaps = s;
	rc = 0;
out:
	free(need);
	free(stuck);
	free(at);
	free(acc);
	free(moved);
	free(c.v);
	free(aw.taken);
	free(aw.scratch);
	free(aw.dead);
	return rc;
}

size_t policy_gaps_format(const policy_gaps_t *s, char *buf, size_t len)
{
	char b[32], n0[32], n1[32];
	int k;

	if (len)
		buf[0] = 0;
	if (!s->tried)
		return 0;
	policy_human_bytes(s->bytes, b, sizeof(b));
	policy_human_bytes(s->need_before, n0, sizeof(n0));
	policy_human_bytes(s->need_after, n1, sizeof(n1));
	k = snprintf(buf, len, "gaps: %d intervals (%d into the next iteration, %d hidden, %d back "
		     "late), %s each way; most held while an op runs %s -> %s at #%d (%s)",
		     s->added, s->wraps, s->hidden, s->late, b, n0, n1, s->worst_op,
		     s->fits ? "fits" : "does not fit");
	return k < 0 ? 0 : (size_t)k;
}

/* ---- why an op does not fit ---- */

/* Is version t live while op k runs (from its write to its last read,
 * cyclically; a live-in version from the iteration's start, or from its
 * first read on a fresh allocation: nothing was in it before)? */
static bool live_at(const policy_graph_t *g, const policy_tensor_t *t, int k)
{
	const policy_alloc_t *al = policy_graph_alloc(g, t->alloc_id);
	int a = t->producer >= 0 ? t->producer :
		al && al->cls == POLICY_ALLOC_YOUNG && t->first_read >= 0 ? t->first_read : 0;
	int b = t->last_read;

	if (b < 0)
		return k == a;
	if (t->last_read_next)
		return k >= a || k <= b;
	return k >= a && k <= b;
}

/* Is t away while op k runs under o (out after a, back before b, the
 * prefetch's op; cyclically when b is not after a)? */
static bool away_at(const policy_offloads_t *o, int t, int k)
{
	for (int i = 0; o && i < o->n; i++) {
		const policy_offload_t *x = &o->v[i];
		int a = x->after_op, b = x->prefetch_op >= 0 ? x->prefetch_op : x->need_op;

		if (x->tensor == t && a >= 0 && b >= 0 && away_while(a, b, x->wrap, k))
			return true;
	}
	return false;
}

void policy_gaps_explain(const policy_graph_t *g, const policy_offloads_t *o, int op, int most,
			 policy_print_fn out, void *ctx)
{
	int p = g->nops, *v, n = 0;

	if (!out || op < 0 || op >= p || !(v = malloc((size_t)(g->ntensors + 1) * sizeof(*v))))
		return;
	for (int t = 0; t < g->ntensors; t++)
		if (g->tensors[t].bytes && live_at(g, &g->tensors[t], op) && !away_at(o, t, op))
			v[n++] = t;
	/* largest first (a selection: `most` is small) */
	for (int i = 0; i < n && i < most; i++) {
		int best = i;

		for (int j = i + 1; j < n; j++)
			if (g->tensors[v[j]].bytes > g->tensors[v[best]].bytes)
				best = j;
		int tmp = v[i];

		v[i] = v[best];
		v[best] = tmp;
	}
	policy_printf(out, ctx, "held while #%d runs: %d tensor versions live and not away; the largest:",
		      op, n);
	for (int i = 0; i < n && i < most; i++) {
		const policy_tensor_t *t = &g->tensors[v[i]];
		const policy_alloc_t *a = policy_graph_alloc(g, t->alloc_id);
		uint64_t lo, nb, held;
		const char *why;

		if (policy_op_use_at(g, op, t->alloc_id, t->offset, t->bytes) >= 0)
			why = "the op's own";
		else if (!a || (a->cls != POLICY_ALLOC_STABLE && a->cls != POLICY_ALLOC_YOUNG))
			why = "its allocation moves (unstable) or is not vmem's";
		else if (!policy_own_pages(g, g->page_size, t->alloc_id, t->offset, t->bytes, &lo, &nb,
					   &held))
			why = "no page of its own";
		else
			why = "no interval away at this op";
		policy_printf(out, ctx, "  t%d a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64 " (%s, %s): %s",
			      v[i], t->alloc_id, t->offset, t->bytes,
			      a && a->paged ? "paged" : "by the byte",
			      t->producer < 0 ? "live-in" : "written in the iteration", why);
	}
	free(v);
}
