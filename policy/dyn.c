/* policy/dyn.c - vDNN-dyn: how much to offload, from the plan's peak.
 *
 * vDNN §III-C profiles its way to a configuration: it runs one training
 * pass each with no offload, vDNN-conv and vDNN-all (least offload
 * traffic first) and keeps the first that does not run out of memory.
 * The plan already knows the iteration, so the passes are computed here
 * instead of run: for each offload set, the bytes resident after every op
 * of the iteration, and their peak.
 *
 *   resident after op k =   live bytes after k             (liveness.c)
 *                         + bytes of UNSTABLE allocations  (held all along)
 *                         - bytes of every tensor offloaded after an op
 *                           before k and not yet prefetched
 *
 *      t2 (4 MiB):  #3 offload ......................... prefetch before #38
 *      resident:    .. after #3 .. after #37: 4 MiB less; after #38: back
 *
 * A mode fits when its peak plus the headroom (workspaces and the small
 * allocations the plan does not see; budget / 16 by default) is within
 * the budget, and so is the largest single op's own bytes (a call needs
 * all its arguments at once, however much is offloaded).  NONE, CONV and
 * ALL are tried in that order; when none fits ALL is taken (it saves the
 * most; the reactive layer pages the rest).  A budget of 0 (unknown)
 * means NONE.
 *
 * The computed choice is where vmem starts; trial.c then runs each mode
 * for real and keeps the fastest (the paper's passes, judged by measured
 * time), so the other modes' sets are kept (`others`).
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_ival(const void *a, const void *b)
{
	const policy_ival_t *x = a, *y = b;

	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

uint64_t policy_ival_union(policy_ival_t *v, int n)
{
	uint64_t total = 0, lo = 0, hi = 0, id = 0;
	bool open = false;

	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_ival);
	for (int i = 0; i < n; i++) {
		if (open && v[i].alloc_id == id && v[i].lo <= hi) {
			if (v[i].hi > hi)
				hi = v[i].hi;
			continue;
		}
		if (open)
			total += hi - lo;
		id = v[i].alloc_id;
		lo = v[i].lo;
		hi = v[i].hi;
		open = true;
	}
	if (open)
		total += hi - lo;
	return total;
}

uint64_t policy_ival_covered(policy_ival_t x, policy_ival_t *v, int n)
{
	int m = 0;

	for (int i = 0; i < n; i++) {
		if (v[i].alloc_id != x.alloc_id || v[i].hi <= x.lo || x.hi <= v[i].lo)
			continue;
		v[m].alloc_id = x.alloc_id;
		v[m].lo = v[i].lo > x.lo ? v[i].lo : x.lo;
		v[m].hi = v[i].hi < x.hi ? v[i].hi : x.hi;
		m++;
	}
	return policy_ival_union(v, m);
}

/* What the pool holds for use u: its pages when its allocation is paged. */
static policy_ival_t held_ival(const policy_graph_t *g, const policy_use_t *u)
{
	policy_ival_t v = { u->alloc_id, u->offset, u->offset + u->bytes };

	policy_held_span(g, u->alloc_id, &v.lo, &v.hi);
	return v;
}

static uint64_t held_bytes(const policy_graph_t *g, const policy_use_t *u)
{
	policy_ival_t v = held_ival(g, u);

	return v.hi - v.lo;
}

static bool counted(const policy_graph_t *g, uint64_t alloc_id)
{
	const policy_alloc_t *a = policy_graph_alloc(g, alloc_id);

	return alloc_id != 0 && a && a->cls != POLICY_ALLOC_FOREIGN;
}

uint64_t policy_op_bytes(const policy_graph_t *g, int op)
{
	const policy_op_t *o = &g->ops[op];
	policy_ival_t small[16], *v = small;
	uint64_t total;
	int n = 0;

	if (o->nuses > 16 && !(v = malloc((size_t)o->nuses * sizeof(*v)))) {
		/* out of memory: the plain sum (an upper bound) */
		total = 0;
		for (int i = 0; i < o->nuses; i++)
			if (counted(g, g->uses[o->use0 + i].alloc_id))
				total += g->uses[o->use0 + i].bytes;
		return total;
	}
	for (int i = 0; i < o->nuses; i++) {
		const policy_use_t *u = &g->uses[o->use0 + i];

		if (u->bytes && counted(g, u->alloc_id))
			v[n++] = held_ival(g, u);
	}
	total = policy_ival_union(v, n);
	if (v != small)
		free(v);
	return total;
}

/* Bytes of UNSTABLE allocations the iteration touches: liveness gives
 * them no interval (their offsets move), so they count as always held. */
static int unstable_bytes(const policy_graph_t *g, uint64_t *out)
{
	policy_ival_t *v = malloc((size_t)(g->nuses ? g->nuses : 1) * sizeof(*v));
	int n = 0;

	*out = 0;
	if (!v)
		return -1;
	for (int i = 0; i < g->nuses; i++) {
		const policy_use_t *u = &g->uses[i];
		const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);

		if (u->bytes && u->alloc_id && a && a->cls == POLICY_ALLOC_UNSTABLE)
			v[n++] = held_ival(g, u);
	}
	*out = policy_ival_union(v, n);
	free(v);
	return 0;
}

/* Is x away over the position "after op k"?  k in [after_op, back), back
 * = the op its prefetch precedes (need_op when none was placed); a
 * wrapped interval (gaps.c) runs on into the next iteration, [after_op, p)
 * and [0, back), unless its prefetch is placed before the iteration
 * ends. */
static bool away_after(const policy_offload_t *x, int k, int p)
{
	int a = x->after_op, b = x->prefetch_op >= 0 ? x->prefetch_op : x->need_op;

	if (a < 0 || a >= p || b < 0)
		return false;
	if (b > p)
		b = p;
	if (b > a)
		return k >= a && k < b;
	return x->wrap && (k >= a || k < b);
}

/* The op the offload comes back for while it runs (its prefetch's), or -1
 * when it never left. */
static int back_op(const policy_offload_t *x, int p)
{
	int a = x->after_op, b = x->prefetch_op >= 0 ? x->prefetch_op : x->need_op;

	if (a < 0 || a >= p || b < 0 || b >= p || (b <= a && !x->wrap))
		return -1;
	return b;
}

/* Is x away while op k runs: away after the op before, and not brought
 * back for k? */
static bool away_during(const policy_offload_t *x, int k, int p)
{
	return away_after(x, (k + p - 1) % p, p) && back_op(x, p) != k;
}

policy_ival_t policy_offload_ival(const policy_graph_t *g, const policy_offload_t *x)
{
	return (policy_ival_t){ g->tensors[x->tensor].alloc_id, x->offset,
				x->offset + policy_offload_held(x) };
}

int policy_offloads_over(const policy_graph_t *g, const policy_offloads_t *o,
			 const policy_offload_t *skip, policy_ival_t x, int k, bool during,
			 policy_ival_t *out)
{
	int p = g->nops, m = 0;

	for (int i = 0; o && i < o->n; i++) {
		const policy_offload_t *y = &o->v[i];
		policy_ival_t v;

		if (y == skip)
			continue;
		v = policy_offload_ival(g, y);
		if (v.alloc_id == x.alloc_id && v.lo < x.hi && x.lo < v.hi &&
		    (during ? away_during(y, k, p) : away_after(y, k, p)))
			out[m++] = v;
	}
	return m;
}

typedef struct {
	policy_ival_t v;
	int i;
} ranked_t;

static int cmp_ranked(const void *a, const void *b)
{
	const ranked_t *x = a, *y = b;

	if (x->v.alloc_id != y->v.alloc_id)
		return x->v.alloc_id < y->v.alloc_id ? -1 : 1;
	return x->v.lo < y->v.lo ? -1 : x->v.lo > y->v.lo;
}

/* The bytes o has away at each op into away[0 .. p): after op k
 * (`during` false) or while op k runs (true).  Versions of the same bytes
 * can both be in o - a scanned kernel argument's extent runs to the end
 * of its allocation, so the versions that successive launches write
 * overlap - and the pages they share are away once, not once per version:
 * ranges of one allocation that overlap count as their union.  0, or -1
 * when out of memory. */
static int away_curve(const policy_graph_t *g, const policy_offloads_t *o, bool during,
		      uint64_t *away)
{
	int p = g->nops, n = o ? o->n : 0;
	ranked_t *r = malloc((size_t)(n ? n : 1) * sizeof(*r));
	policy_ival_t *v = malloc((size_t)(n ? n : 1) * sizeof(*v));

	memset(away, 0, (size_t)p * sizeof(*away));
	if (!r || !v) {
		free(r);
		free(v);
		return -1;
	}
	for (int i = 0; i < n; i++)
		r[i] = (ranked_t){ policy_offload_ival(g, &o->v[i]), i };
	if (n > 1)
		qsort(r, (size_t)n, sizeof(*r), cmp_ranked);
	for (int i = 0, j; i < n; i = j) {
		/* a cluster: ranges of one allocation overlapping, transitively */
		uint64_t hi = r[i].v.hi;

		for (j = i + 1; j < n && r[j].v.alloc_id == r[i].v.alloc_id && r[j].v.lo < hi; j++)
			if (r[j].v.hi > hi)
				hi = r[j].v.hi;
		for (int k = 0; k < p; k++) {
			int m = 0;

			for (int q = i; q < j; q++) {
				const policy_offload_t *x = &o->v[r[q].i];

				if (during ? away_during(x, k, p) : away_after(x, k, p))
					v[m++] = r[q].v;
			}
			away[k] += m == 1 ? v[0].hi - v[0].lo : policy_ival_union(v, m);
		}
	}
	free(r);
	free(v);
	return 0;
}

/* The bytes of x's pages no other offload of o has away after op k
 * (scratch: o->n entries). */
static uint64_t fresh_after(const policy_graph_t *g, const policy_offloads_t *o,
			    const policy_offload_t *x, int k, policy_ival_t *scratch)
{
	policy_ival_t xv = policy_offload_ival(g, x);
	int m = policy_offloads_over(g, o, x, xv, k, false, scratch);

	return (xv.hi - xv.lo) - policy_ival_covered(xv, scratch, m);
}

/* Bytes resident after each op into curve[0 .. nops): live (plus dead
 * when with_dead), plus `held`, less what `o` has away.  -1 when out of
 * memory (curve then holds the curve without offloads). */
static int resident_curve(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
			  uint64_t held, const policy_offloads_t *o, uint64_t *curve)
{
	int p = g->nops;
	uint64_t *away = o && o->n ? malloc((size_t)p * sizeof(*away)) : NULL;
	bool lost = o && o->n && (!away || away_curve(g, o, false, away) < 0);

	for (int k = 0; k < p; k++) {
		uint64_t r = l->live_after[k] + held + (with_dead ? l->dead_after[k] : 0);

		if (away && !lost)
			r = r > away[k] ? r - away[k] : 0;
		curve[k] = r;
	}
	free(away);
	return lost ? -1 : 0;
}

static bool is_ws(const policy_use_t *u)
{
	return policy_role_is_ws(u->role);
}

/* What op k writes whole into memory the plan counts (its outputs: not
 * live before it), its workspace aside. */
static uint64_t op_written_whole(const policy_graph_t *g, int k)
{
	const policy_op_t *op = &g->ops[k];
	uint64_t b = 0;

	for (int i = 0; i < op->nuses; i++) {
		const policy_use_t *u = &g->uses[op->use0 + i];

		if ((u->access & VMEM_ACCESS_WHOLE) && !is_ws(u) && counted(g, u->alloc_id))
			b += held_bytes(g, u);
	}
	return b;
}

static uint64_t op_workspace(const policy_graph_t *g, int k)
{
	const policy_op_t *op = &g->ops[k];
	uint64_t b = 0;

	for (int i = 0; i < op->nuses; i++)
		if (is_ws(&g->uses[op->use0 + i]))
			b += held_bytes(g, &g->uses[op->use0 + i]);
	return b;
}

static int cmp_need_op(const void *a, const void *b)
{
	const policy_offload_t *x = *(const policy_offload_t *const *)a;
	const policy_offload_t *y = *(const policy_offload_t *const *)b;

	return (x->need_op > y->need_op) - (x->need_op < y->need_op);
}

int policy_prefetch_fit(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
			policy_offloads_t *o, uint64_t limit)
{
	int p = g->nops, moved = 0;
	uint64_t held = 0, *curve;
	policy_offload_t **v;
	policy_ival_t *scratch;

	if (!limit || !o || !o->n || p == 0 || !l->live_after)
		return 0;
	curve = malloc((size_t)p * sizeof(*curve));
	v = malloc((size_t)o->n * sizeof(*v));
	scratch = malloc((size_t)o->n * sizeof(*scratch));
	if (!curve || !v || !scratch || unstable_bytes(g, &held) < 0 ||
	    resident_curve(g, l, with_dead, held, o, curve) < 0) {
		free(curve);
		free(v);
		free(scratch);
		return -1;
	}
	/* while op k runs: what was resident before it, what it writes whole
	 * (its outputs, not live before it: as policy_conv_room counts them)
	 * and its workspace - transients the after-op curve never shows */
	uint64_t wrap = curve[p - 1];

	for (int k = p - 1; k >= 0; k--) {
		uint64_t during = (k ? curve[k - 1] : wrap) + op_written_whole(g, k) +
				  op_workspace(g, k);

		if (during > curve[k])
			curve[k] = during;
	}
	for (int i = 0; i < o->n; i++)
		v[i] = &o->v[i];
	/* the tensors needed first keep their places first */
	qsort(v, (size_t)o->n, sizeof(*v), cmp_need_op);
	for (int i = 0; i < o->n; i++) {
		policy_offload_t *x = v[i];
		int b = x->prefetch_op, u = x->need_op, last = -1;

		if (b < 0 || b >= u || u > p || x->after_op < 0 || b <= x->after_op)
			continue;
		/* resident after ops b .. u - 1: over the limit anywhere there,
		 * it comes back after the last such op instead */
		for (int k = b; k < u; k++)
			if (curve[k] > limit)
				last = k;
		if (last < 0)
			continue;
		x->prefetch_op = last + 1 < u ? last + 1 : u;
		for (int k = b; k < x->prefetch_op; k++) {
			uint64_t h = fresh_after(g, o, x, k, scratch);

			curve[k] = curve[k] > h ? curve[k] - h : 0;
		}
		moved++;
	}
	free(curve);
	free(v);
	free(scratch);
	return moved;
}

/* with_dead: the DEAD ranges stay resident (liveness off). */
static uint64_t peak_resident(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
			      uint64_t held, const policy_offloads_t *o, int *peak_op)
{
	int p = g->nops;
	uint64_t *curve, best = 0;
	int best_op = 0;

	if (peak_op)
		*peak_op = 0;
	if (p == 0 || !l->live_after)
		return held;
	if (!(curve = malloc((size_t)p * sizeof(*curve))))
		return held + l->peak_live;   /* out of memory: no offload counted */
	resident_curve(g, l, with_dead, held, o, curve);
	for (int k = 0; k < p; k++)
		if (k == 0 || curve[k] > best) {
			best = curve[k];
			best_op = k;
		}
	free(curve);
	if (peak_op)
		*peak_op = best_op;
	return best;
}

uint64_t policy_peak_resident(const policy_graph_t *g, const policy_live_t *l,
			      const policy_offloads_t *o, int *peak_op)
{
	uint64_t held = 0;

	unstable_bytes(g, &held);   /* out of memory: counted as 0 */
	return peak_resident(g, l, false, held, o, peak_op);
}

/* The after-op curve into curve[] and, when need != NULL, what each op
 * holds while it runs (policy_need_curve).  0, or -1 when out of memory. */
static int curves(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
		  const policy_offloads_t *o, uint64_t *curve, uint64_t *need)
{
	int p = g->nops;
	uint64_t held = 0;

	if (unstable_bytes(g, &held) < 0 || resident_curve(g, l, with_dead, held, o, curve) < 0)
		return -1;
	if (!need)
		return 0;
	/* while op k runs: what was resident after the op before, less what
	 * is away then (what comes back for k is on the device) */
	uint64_t *before = malloc((size_t)p * sizeof(*before));
	uint64_t *away = malloc((size_t)p * sizeof(*away));
	int rc = -1;

	if (!before || !away || resident_curve(g, l, with_dead, held, NULL, before) < 0 ||
	    away_curve(g, o, true, away) < 0)
		goto out;
	for (int k = 0; k < p; k++) {
		uint64_t r = before[k ? k - 1 : p - 1];

		need[k] = (r > away[k] ? r - away[k] : 0) + op_written_whole(g, k);
	}
	rc = 0;
out:
	free(before);
	free(away);
	return rc;
}

int policy_need_curve(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
		      const policy_offloads_t *o, uint64_t *need)
{
	uint64_t *curve;
	int rc;

	if (g->nops == 0 || !l->live_after)
		return 0;
	if (!(curve = malloc((size_t)g->nops * sizeof(*curve))))
		return -1;
	rc = curves(g, l, with_dead, o, curve, need);
	free(curve);
	return rc;
}

int policy_conv_room(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
		     const policy_offloads_t *o, uint64_t budget, uint64_t *room)
{
	int p = g->nops;
	uint64_t *curve, *need;

	for (int k = 0; k < p; k++)
		room[k] = UINT64_MAX;
	if (p == 0 || budget == 0 || !l->live_after)
		return 0;
	curve = malloc((size_t)p * sizeof(*curve));
	need = malloc((size_t)p * sizeof(*need));
	if (!curve || !need || curves(g, l, with_dead, o, curve, need) < 0) {
		free(curve);
		free(need);
		return -1;
	}
	/* a plan whose resident bytes exceed the budget somewhere does not
	 * hold: the reactive layer pages what does not fit, and what is
	 * resident at a convolution is not the plan's curve.  Its rooms would
	 * be zero or near it where the pressure is, and a solver keeping the
	 * least room would give up the fast algorithms for nothing (kept
	 * `none` on the h100 model at 1/2: 629 -> 880 ms).  No rooms then
	 * (all stay UINT64_MAX): the budget beside the tensors is the limit. */
	for (int k = 0; k < p; k++)
		if (curve[k] > budget)
			goto out;
	for (int k = 0; k < p; k++) {
		const policy_op_t *op = &g->ops[k];

		if (op->kind != VMEM_OP_CONV_FWD && op->kind != VMEM_OP_CONV_BWD_DATA &&
		    op->kind != VMEM_OP_CONV_BWD_FILTER)
			continue;
		/* its outputs (written whole: dead before it) are in need[k] */
		room[k] = budget > need[k] ? budget - need[k] : 0;
	}
out:
	free(curve);
	free(need);
	return 0;
}

static bool fits(uint64_t bytes, uint64_t headroom, uint64_t budget)
{
	return bytes <= budget && headroom <= budget - bytes;
}

static uint64_t headroom_of(uint64_t budget, uint64_t headroom)
{
	return headroom == POLICY_HEADROOM_DEFAULT ? budget / 16 : headroom;
}

uint64_t policy_prefetch_limit(uint64_t budget, uint64_t headroom)
{
	uint64_t h = headroom_of(budget, headroom);

	return budget > h ? budget - h : 0;
}

const policy_offload_mode_t policy_dyn_order[POLICY_DYN_MODES] = {
	POLICY_OFFLOAD_NONE, POLICY_OFFLOAD_CONV, POLICY_OFFLOAD_ALL
};

bool policy_offloads_same(const policy_offloads_t *a, const policy_offloads_t *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++) {
		const policy_offload_t *x = &a->v[i], *y = &b->v[i];

		if (x->tensor != y->tensor || x->after_op != y->after_op ||
		    x->prefetch_op != y->prefetch_op || x->need_op != y->need_op)
			return false;
	}
	return true;
}

int policy_dyn_choose(const policy_graph_t *g, const policy_live_t *l,
		      const policy_dyn_config_t *c, policy_dyn_t *out, policy_offloads_t *chosen,
		      policy_offloads_t *others)
{
	const policy_offload_mode_t *order = policy_dyn_order;
	policy_offloads_t off[3];
	uint64_t peak[3], held;
	int pop[3], pick = -1;

	memset(out, 0, sizeof(*out));
	memset(off, 0, sizeof(off));
	if (chosen)
		memset(chosen, 0, sizeof(*chosen));
	if (unstable_bytes(g, &held) < 0)
		return -1;
	for (int m = 0; m < 3; m++) {
		if (policy_offload_choose(g, order[m], c->offload_min_bytes, &off[m]) < 0 ||
		    policy_prefetch_place(g, c->prefetch, &c->timing, &off[m]) < 0 ||
		    policy_prefetch_fit(g, l, !c->liveness, &off[m],
					policy_prefetch_limit(c->budget, c->headroom)) < 0 ||
		    (c->gaps && policy_gaps_fill(g, l, c->gaps, &off[m]) < 0)) {
			for (int i = 0; i <= m; i++)
				policy_offloads_free(&off[i]);
			return -1;
		}
		peak[m] = peak_resident(g, l, !c->liveness, held, &off[m], &pop[m]);
	}
	out->decided = 1;
	out->budget = c->budget;
	out->headroom = headroom_of(c->budget, c->headroom);
	out->peak_none = peak[0];
	out->peak_op_none = pop[0];
	out->peak_conv = peak[1];
	out->peak_op_conv = pop[1];
	out->peak_all = peak[2];
	out->peak_op_all = pop[2];
	for (int k = 0; k < g->nops; k++) {
		uint64_t b = policy_op_bytes(g, k);

		if (b > out->op_bytes) {
			out->op_bytes = b;
			out->op_bytes_op = k;
		}
	}
	if (c->budget == 0) {
		pick = 0;
	} else {
		for (int m = 0; m < 3 && pick < 0; m++)
			if (fits(peak[m], out->headroom, c->budget) &&
			    fits(out->op_bytes, out->headroom, c->budget)) {
				pick = m;
				out->fits = 1;
			}
		if (pick < 0)
			pick = 2;
	}
	out->chosen = (uint8_t)order[pick];
	for (int m = 0; m < 3; m++) {
		if (others)
			memset(&others[m], 0, sizeof(others[m]));
		if (m == pick && chosen)
			*chosen = off[m];
		else if (m != pick && others)
			others[m] = off[m];
		else
			policy_offloads_free(&off[m]);
	}
	return order[pick];
}

void policy_human_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (uint64_t)1 << 30)
		snprintf(buf, len, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
	else if (b >= (uint64_t)1 << 20)
		snprintf(buf, len, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
	else if (b >= (uint64_t)1 << 10)
		snprintf(buf, len, "%.1f KiB", (double)b / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64 " B", b);
}

size_t policy_dyn_format(const policy_dyn_t *d, char *buf, size_t len)
{
	char n[32], c[32], a[32], bu[32];
	int k;

	policy_human_bytes(d->peak_none, n, sizeof(n));
	policy_human_bytes(d->peak_conv, c, sizeof(c));
	policy_human_bytes(d->peak_all, a, sizeof(a));
	policy_human_bytes(d->budget, bu, sizeof(bu));
	k = snprintf(buf, len, "dyn: chose %s (peaks: none %s, conv %s, all %s; budget %s%s)",
		     policy_offload_name((policy_offload_mode_t)d->chosen), n, c, a,
		     d->budget ? bu : "unknown",
		     d->budget && !d->fits ? ", nothing fits" : "");
	return k < 0 ? 0 : (size_t)k;
}

void policy_dyn_dump(const policy_dyn_t *d, policy_print_fn out, void *ctx)
{
	char line[256];

	if (!d->decided)
		return;
	policy_dyn_format(d, line, sizeof(line));
	policy_printf(out, ctx, "%s", line);
	policy_printf(out, ctx, "  peak resident bytes: none %" PRIu64 " after #%d, conv %" PRIu64
		      " after #%d, all %" PRIu64 " after #%d; largest op #%d %" PRIu64
		      " bytes; budget %" PRIu64 " less headroom %" PRIu64,
		      d->peak_none, d->peak_op_none, d->peak_conv, d->peak_op_conv, d->peak_all,
		      d->peak_op_all, d->op_bytes_op, d->op_bytes, d->budget, d->headroom);
}
