/* policy/plan.c - the actions of each op of the steady iteration.
 *
 * Runs the passes in order over the window the detector found and turns
 * their results into steps attached to ops, before or after them:
 *
 *   graph.c      ops, uses, tensors, boundary
 *   liveness.c   DEAD     after the last access, until the next whole write
 *   offload.c    OFFLOAD  after the last forward read (vDNN all / conv)
 *   dyn.c        dyn: none, conv or all, the first whose peak fits the budget
 *   prefetch.c   PREFETCH before the op prefetch.c chose
 *   dyn.c        ALGO     before each convolution: the workspace room there
 *   evict.c      the next-use index the pool ranks pages with
 *
 *      #12 conv_fwd      before: ALGO room 1.2 GiB
 *                        after:  DEAD a7+0x0/4 MiB until #30 (workspace)
 *                                OFFLOAD t9 (x of #12) until #41
 *      #38 conv_bwd_data before: PREFETCH t9 for #41
 *
 * A step names its range through a use (an argument of one op of the
 * iteration) and a sub-range of it, never through an address: the runtime
 * resolves it against the arguments that op actually had in the current
 * iteration, so a per-tensor allocator's new allocations and a double
 * buffer's other half are followed (match.c).
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	policy_step_t *v;
	int n, cap;
} svec_t;

static int spush(svec_t *s, const policy_step_t *x)
{
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 256;
		policy_step_t *nv = realloc(s->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return -1;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = *x;
	return 0;
}

static int cmp_step(const void *a, const void *b)
{
	const policy_step_t *x = a, *y = b;

	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	if (x->when != y->when)
		return x->when < y->when ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	/* copies issued at one op leave in the order they are needed */
	if (x->until_op != y->until_op)
		return x->until_op < y->until_op ? -1 : 1;
	if (x->use != y->use)
		return x->use < y->use ? -1 : 1;
	return x->delta < y->delta ? -1 : x->delta > y->delta;
}

/* The part of [off, off + bytes) of its allocation inside use u, as
 * (delta, bytes) of the use. */
static void range_in_use(const policy_graph_t *g, uint64_t off, uint64_t bytes, int u,
			 uint64_t *delta, uint64_t *n)
{
	const policy_use_t *U = &g->uses[u];
	uint64_t a = off > U->offset ? off : U->offset;
	uint64_t b = off + bytes < U->offset + U->bytes ? off + bytes : U->offset + U->bytes;

	*delta = a - U->offset;
	*n = b > a ? b - a : 0;
}

/* The latest use at or before op j, cyclically (the ops after j belong
 * to the iteration before), touching [off, off + bytes) of alloc_id: the
 * one a step placed before op j resolves the range through.  *prev: it is
 * in the iteration before (found past op 0).  -1 when none. */
static int ref_use(const policy_graph_t *g, uint64_t alloc_id, uint64_t off, uint64_t bytes,
		   int j, bool *prev)
{
	for (int n = 0, o = j; n < g->nops; n++, o = o ? o - 1 : g->nops - 1) {
		int i = policy_op_use_at(g, o, alloc_id, off, bytes);

		if (i >= 0) {
			*prev = o > j;
			return i;
		}
	}
	return -1;
}

/* Pushes the lookahead's PREFETCH before op j of [lo, lo + bytes) of use
 * x (op k's): resolved through the latest use of the allocation seen
 * before the step (a STABLE allocation's use in the iteration before,
 * too); where that use covers the range in part, a STABLE allocation's
 * through the call's own use in the iteration before, another's rest
 * through the latest uses that cover it (a call split in chunks other
 * than an earlier call's: VGG-16's first activation backward, in 159 MiB
 * chunks of a tensor its pooling read in 270 MiB ones, faulted in the
 * part of each chunk the latest pooling chunk did not cover - 25 pages
 * an iteration under `conv(m)` on the h100 model at 1/4). */
static int ahead(const policy_graph_t *g, svec_t *s, int j, int k, int x, uint64_t lo,
		 uint64_t bytes)
{
	const policy_use_t *u = &g->uses[x];
	const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);
	policy_step_t st = { 0 };
	bool prev;
	int r;

	if ((r = ref_use(g, u->alloc_id, lo, bytes, j, &prev)) < 0 ||
	    (prev && a->cls != POLICY_ALLOC_STABLE))
		return 0;
	range_in_use(g, lo, bytes, r, &st.delta, &st.bytes);
	if (st.bytes < bytes && a->cls == POLICY_ALLOC_STABLE) {
		/* the latest use covers part of the range only (a scanned
		 * kernel argument reaches to its segment's end, over tensors
		 * other calls use apart): the call's own use in the iteration
		 * before names all of it */
		r = x;
		prev = true;
		st.delta = lo - u->offset;
		st.bytes = bytes;
	}
	st.kind = POLICY_STEP_PREFETCH;
	st.when = POLICY_BEFORE;
	st.op = j;
	st.use = r;
	st.until_op = k;
	st.ref = u->tensor;
	st.prev = prev;
	st.next = true;
	if (!st.bytes)
		return 0;
	if (spush(s, &st) < 0)
		return -1;
	if (st.bytes < bytes) {
		uint64_t a0 = g->uses[r].offset + st.delta, b0 = a0 + st.bytes;

		if (a0 > lo && ahead(g, s, j, k, x, lo, a0 - lo) < 0)
			return -1;
		if (b0 >= lo + bytes)
			return 0;
		if (lo + bytes < a->extent)
			return ahead(g, s, j, k, x, b0, lo + bytes - b0);
		/* the rest runs to the allocation's end (a scanned kernel
		 * argument over a caching segment, whose blocks move between
		 * iterations): no use of this iteration before the step names
		 * it, and the one of the iteration before is no guide on such
		 * an allocation, so it is resolved from the use that names its
		 * head, to the end (random:1720388722 in the caching style at
		 * 1/2: a channel kernel's live tail pages, faulted in at every
		 * planned iteration under all and conv) */
		st.delta += st.bytes;
		st.bytes = lo + bytes - b0;
		st.to_end = true;
		if (spush(s, &st) < 0)
			return -1;
	}
	return 0;
}

/* Lookahead: before each op, bring back what the next op on its lane
 * reads, should it be away (a PREFETCH with `next`).  The offload passes
 * plan what they move; this covers what they did not foresee - pages the
 * pool evicted (the iteration before the plan took over, a call that
 * found the device fuller than the plan counts it) - one call ahead
 * instead of at the call, where it would be a miss with the copy in the
 * call's way.  A range already resident costs the pool a lookup.  A
 * range the call overwrites whole needs nothing back, except a small
 * allocation (below the pool's threshold: its page, the pool's slab, holds
 * other allocations, whose bytes come back with it) and on a paged
 * allocation the pages it covers in part where other calls of the
 * iteration touch the rest: the pool moves whole pages, and their other
 * bytes come back with them (a convolution's workspace ending inside a
 * page of its caching segment, whose end a scanned kernel argument
 * reaches: VGG-16's faulted that page in at every planned forward
 * convolution).  Past what the iteration touches the page's rest is
 * taken for empty (an allocation's end: a copy back for nothing, which
 * cost Inception in the network style 14 misses a run). */
static int lookahead(const policy_graph_t *g, svec_t *s)
{
	for (int l = 0; l < g->nlanes; l++) {
		const policy_lane_t *ln = &g->lanes[l];

		/* the lane's first op is the next one after its last: the
		 * next iteration's (the batch's copy onto its page) */
		for (int i = 1; ln->nops > 1 && i <= ln->nops; i++) {
			int j = ln->ops[i - 1], k = ln->ops[i % ln->nops];
			const policy_op_t *op = &g->ops[k];

			for (int x = op->use0; x < op->use0 + op->nuses; x++) {
				const policy_use_t *u = &g->uses[x];
				const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);
				uint64_t page = policy_graph_page(g, u->alloc_id);
				uint64_t lo = u->offset, hi = u->offset + u->bytes;

				if (!a || a->cls == POLICY_ALLOC_FOREIGN || !u->bytes)
					continue;
				/* read, written in part, or a small allocation
				 * (its page, the pool's slab, holds others, whose
				 * bytes come back with it): the whole range */
				if ((u->access & VMEM_ACCESS_R) || !(u->access & VMEM_ACCESS_WHOLE) ||
				    (!page && g->page_size)) {
					if (ahead(g, s, j, k, x, lo, u->bytes) < 0)
						return -1;
					continue;
				}
				if (!page)
					continue;
				/* its first and last pages, where covered in part */
				uint64_t head_end = (lo / page + 1) * page;
				uint64_t tail_lo = (hi - 1) / page * page;
				bool head = lo % page != 0, tail = hi % page != 0 && hi < a->extent;

				if (head && ahead(g, s, j, k, x, lo, (head_end < hi ? head_end : hi) - lo) < 0)
					return -1;
				if (tail_lo < lo)
					tail_lo = lo;   /* one page: the head's, when there is one */
				if (tail && !(head && tail_lo < head_end) &&
				    ahead(g, s, j, k, x, tail_lo, hi - tail_lo) < 0)
					return -1;
			}
		}
	}
	return 0;
}

/* A PREFETCH for a call beyond the budget leaves out the pages the call
 * maps from the host (hostpages.c): brought and held for the call, such a
 * page would keep from the device a page the call or the next one needs
 * there, and the pool would map that one from the host instead.  The
 * step is cut around them, each piece resolved as the whole was. */
static int clip_host(const policy_graph_t *g, const policy_hostpages_t *h, svec_t *s)
{
	int n = s->n, w = 0;

	if (!h->n || !g->page_size)
		return 0;
	for (int i = 0; i < n; i++) {
		policy_step_t x = s->v[i];
		const policy_use_t *u;
		uint64_t ps = g->page_size, lo, hi, at;

		if (x.kind != POLICY_STEP_PREFETCH || x.use < 0 || !x.bytes)
			continue;
		u = &g->uses[x.use];
		lo = u->offset + x.delta;
		hi = lo + x.bytes;
		at = lo;
		for (uint64_t p = lo / ps; p * ps < hi; p++) {
			policy_step_t y = x;

			if (!policy_host_page(h, x.until_op, u->alloc_id, p))
				continue;
			if (p * ps > at) {
				y.delta = at - u->offset;
				y.bytes = p * ps - at;
				if (spush(s, &y) < 0)
					return -1;
			}
			at = (p + 1) * ps;
			s->v[i].bytes = 0;   /* replaced by its pieces */
		}
		if (s->v[i].bytes || at >= hi)
			continue;
		x.delta = at - u->offset;
		x.bytes = hi - at;
		if (spush(s, &x) < 0)
			return -1;
	}
	for (int i = 0; i < s->n; i++)
		if (s->v[i].bytes || s->v[i].kind != POLICY_STEP_PREFETCH)
			s->v[w++] = s->v[i];
	s->n = w;
	return 0;
}

/* A PREFETCH is `soon` when it is for its own op or the lane's next one:
 * it may hold the host up for the copies out that make its room
 * (pool_prefetch's wait), which the call would wait for anyway.  Waiting
 * at one whose use is further away keeps the host from queueing the calls
 * that hide the copy; one that is placed earlier retries without waiting
 * and the lookahead before its call waits if it must.  (Also marking soon
 * the prefetches with less compute before their use than their copy
 * takes was measured: slower on 17 of 80 benchmark rows, faster on 13.) */
static int mark_soon(const policy_graph_t *g, svec_t *s)
{
	int *succ = malloc(((size_t)g->nops + 1) * sizeof(*succ));

	if (!succ)
		return -1;
	for (int k = 0; k < g->nops; k++)
		succ[k] = -1;
	for (int l = 0; l < g->nlanes; l++)
		for (int i = 0; i < g->lanes[l].nops; i++)
			succ[g->lanes[l].ops[i]] = g->lanes[l].ops[(i + 1) % g->lanes[l].nops];
	for (int i = 0; i < s->n; i++) {
		policy_step_t *x = &s->v[i];

		if (x->kind == POLICY_STEP_PREFETCH)
			x->soon = x->until_op == x->op || x->until_op == succ[x->op];
	}
	free(succ);
	return 0;
}

/* True when interval o is away while op 0 runs: it wraps (out in one
 * iteration, needed in the next) and its copy back starts after op 0 of
 * the next (or is not placed at all: the call faults it in). */
static bool away_at_start(const policy_offload_t *o)
{
	if (!o->wrap || o->need_op == 0)
		return false;
	return o->prefetch_op < 0 || (o->prefetch_op > 0 && o->prefetch_op <= o->after_op);
}

static int assemble(policy_plan_t *plan, const policy_plan_config_t *cfg, const uint64_t *room)
{
	const policy_graph_t *g = &plan->g;
	svec_t s = { 0 };

	for (int i = 0; i < plan->live.ndead; i++) {
		const policy_dead_t *d = &plan->live.dead[i];
		policy_step_t x = { 0 };

		x.kind = POLICY_STEP_DEAD;
		x.when = POLICY_AFTER;
		x.op = d->after_op;
		x.use = d->use;
		x.delta = d->offset - g->uses[d->use].offset;
		x.bytes = d->bytes;
		x.until_op = d->until_op;
		x.ref = i;
		x.entry = d->wraps && d->until_op > 0;
		if (spush(&s, &x) < 0)
			goto fail;
	}
	for (int i = 0; i < plan->off.n; i++) {
		const policy_offload_t *o = &plan->off.v[i];
		policy_step_t x = { 0 };
		bool prev = false;
		int u;

		x.kind = POLICY_STEP_OFFLOAD;
		x.when = POLICY_AFTER;
		x.op = o->after_op;
		x.use = o->use;
		range_in_use(g, o->offset, o->bytes, o->use, &x.delta, &x.bytes);
		if (x.bytes < o->bytes &&
		    (u = policy_cover_use(g, o->use, o->offset, o->bytes, o->after_op, &prev)) >= 0) {
			/* the call it leaves after names a part of it: the range
			 * resolves through a use that names all of it, as the
			 * planner counted it (policy_move_pages) */
			x.use = u;
			x.delta = o->offset - g->uses[u].offset;
			x.bytes = o->bytes;
			x.prev = prev;
		}
		x.until_op = o->need_op;
		x.ref = o->tensor;
		x.entry = away_at_start(o);
		if (x.bytes == 0)
			continue;
		if (spush(&s, &x) < 0)
			goto fail;
		x.entry = false;
		x.kind = POLICY_STEP_SETTLE;
		x.when = POLICY_BEFORE;
		if (spush(&s, &x) < 0)
			goto fail;
		if (o->prefetch_op >= 0) {
			x.kind = POLICY_STEP_PREFETCH;
			x.when = POLICY_BEFORE;
			x.op = o->prefetch_op;
			x.prev = prev || (o->wrap && o->prefetch_op <= o->after_op);
			if (spush(&s, &x) < 0)
				goto fail;
		}
	}
	if (cfg->lookahead && cfg->offload != POLICY_OFFLOAD_NONE && lookahead(g, &s) < 0)
		goto fail;
	if (cfg->algo_steps)
		for (int k = 0; k < g->nops; k++) {
			const policy_op_t *o = &g->ops[k];
			policy_step_t x = { 0 };

			if (o->info.type != VMEM_INFO_CONV)
				continue;
			x.kind = POLICY_STEP_ALGO;
			x.when = POLICY_BEFORE;
			x.op = k;
			x.use = -1;
			x.until_op = k;
			x.ref = -1;
			x.algo = o->info.u.conv.algo;
			x.workspace = o->info.u.conv.workspace;
			x.room = room ? room[k] : UINT64_MAX;
			if (spush(&s, &x) < 0)
				goto fail;
		}
	if (clip_host(g, &plan->host, &s) < 0 || mark_soon(g, &s) < 0)
		goto fail;
	if (s.n > 1)
		qsort(s.v, (size_t)s.n, sizeof(*s.v), cmp_step);
	plan->step_at = calloc(2 * (size_t)g->nops + 1, sizeof(int));
	if (!plan->step_at)
		goto fail;
	{
		int i = 0;

		for (int slot = 0; slot < 2 * g->nops; slot++) {
			plan->step_at[slot] = i;
			while (i < s.n && 2 * s.v[i].op + s.v[i].when == slot)
				i++;
		}
		plan->step_at[2 * g->nops] = s.n;
	}
	plan->steps = s.v;
	plan->nsteps = s.n;
	return 0;
fail:
	free(s.v);
	return -1;
}

/* The workspace room at each convolution under the plan's offloads (l:
 * the live curve, see policy_plan_build). */
static int rooms(const policy_plan_t *plan, const policy_plan_config_t *cfg,
		 const policy_live_t *l, uint64_t **out)
{
	*out = malloc(((size_t)plan->g.nops + 1) * sizeof(**out));
	if (!*out)
		return -1;
	return policy_conv_room(&plan->g, l, !cfg->liveness, &plan->off, cfg->budget, *out);
}

/* The steps of the offload set in plan->off (rooms included), replacing
 * any there were.  l: the live curve.  0 or -1 (the old steps kept). */
static int plan_steps(policy_plan_t *plan, const policy_live_t *l)
{
	const policy_plan_config_t *cfg = &plan->cfg;
	policy_step_t *steps = plan->steps;
	int *step_at = plan->step_at, nsteps = plan->nsteps;
	uint64_t *room = NULL;

	if (cfg->algo_steps && rooms(plan, cfg, l, &room) < 0) {
		free(room);
		return -1;
	}
	if (assemble(plan, cfg, room) < 0) {
		free(room);
		plan->steps = steps;
		plan->step_at = step_at;
		plan->nsteps = nsteps;
		return -1;
	}
	free(room);
	free(steps);
	free(step_at);
	return 0;
}

/* The live curve the passes use: the plan's own, or with liveness off (no
 * DEAD steps, the dead bytes stay) one computed apart into *tmp for the
 * peaks, the prefetch fit and the rooms.  NULL when out of memory. */
static const policy_live_t *live_curve(const policy_plan_t *plan, policy_live_t *tmp)
{
	if (plan->cfg.liveness)
		return &plan->live;
	if (policy_liveness(&plan->g, tmp) < 0)
		return NULL;
	return tmp;
}

static bool host_same(const policy_hostpages_t *a, const policy_hostpages_t *b)
{
	return a->n == b->n && (!a->n || !memcmp(a->v, b->v, (size_t)a->n * sizeof(*a->v)));
}

/* The pages calls beyond the budget map from the host (hostpages.c), and
 * the eviction order without those uses.  Each call's choice looks at the
 * next uses after it, which the other calls' choices change: two channel
 * kernels in a row over the same segments, the second mapping a page from
 * the host that the first, by the plain order, would keep on the device
 * for it.  So the choice is made again on the order without the last
 * choice's uses, until it holds (three rounds at most).  0 or -1. */
static int host_pages(policy_plan_t *plan)
{
	const policy_plan_config_t *cfg = &plan->cfg;
	policy_hostpages_t h;

	if (!cfg->budget || !plan->g.page_size)
		return 0;
	for (int round = 0; round < 3; round++) {
		if (policy_host_pages(&plan->g, &plan->evict, cfg->budget, &h) < 0)
			return -1;
		if (host_same(&h, &plan->host)) {
			policy_host_pages_free(&h);
			return 0;   /* the order was built without these */
		}
		policy_host_pages_free(&plan->host);
		plan->host = h;
		policy_evict_free(&plan->evict);
		if (policy_evict_build(&plan->g, cfg->page_size, &plan->host, &plan->evict) < 0)
			return -1;
	}
	return 0;
}

int policy_plan_build(policy_plan_t *plan, const policy_history_t *h,
		      const policy_period_found_t *found, const policy_plan_config_t *cfg)
{
	const policy_hev_t *st;
	policy_live_t tmp = { 0 };
	const policy_live_t *l;
	/* gaps.c's limit is the one the prefetches fit under */
	const policy_gaps_config_t gc = {
		.limit = policy_prefetch_limit(cfg->budget, cfg->headroom),
		.page_size = cfg->page_size, .min_bytes = cfg->offload_min_bytes,
		.with_dead = !cfg->liveness, .timing = cfg->timing };

	memset(plan, 0, sizeof(*plan));
	plan->cfg = *cfg;
	if (policy_graph_build(&plan->g, h, found->first, found->period, found->rot) < 0)
		return -1;
	policy_graph_set_pages(&plan->g, cfg->page_size, cfg->small_threshold);
	if (cfg->liveness && policy_liveness(&plan->g, &plan->live) < 0)
		goto fail;
	if (!(l = live_curve(plan, &tmp)))
		goto fail;
	if (cfg->offload == POLICY_OFFLOAD_DYN) {
		policy_dyn_config_t dc = { 0 };
		int mode;

		dc.budget = cfg->budget;
		dc.headroom = cfg->headroom;
		dc.liveness = cfg->liveness;
		dc.offload_min_bytes = cfg->offload_min_bytes;
		dc.prefetch = cfg->prefetch;
		dc.timing = cfg->timing;
		dc.gaps = cfg->gaps ? &gc : NULL;
		mode = policy_dyn_choose(&plan->g, l, &dc, &plan->dyn, &plan->off, plan->alt);
		if (mode < 0)
			goto fail;
		plan->offload = (uint8_t)mode;
	} else {
		/* ALL / CONV: no prefetch into a budget that has no room for it
		 * (DYN does the same for each mode it weighs) */
		plan->offload = (uint8_t)cfg->offload;
		if (policy_offload_choose(&plan->g, cfg->offload, cfg->offload_min_bytes,
					  &plan->off) < 0 ||
		    policy_prefetch_place(&plan->g, cfg->prefetch, &cfg->timing, &plan->off) < 0 ||
		    policy_prefetch_fit(&plan->g, l, !cfg->liveness, &plan->off, gc.limit) < 0 ||
		    (cfg->gaps && cfg->offload != POLICY_OFFLOAD_NONE &&
		     policy_gaps_fill(&plan->g, l, &gc, &plan->off) < 0))
			goto fail;
	}
	if (policy_evict_build(&plan->g, cfg->page_size, NULL, &plan->evict) < 0 ||
	    (cfg->host_map && host_pages(plan) < 0))
		goto fail;
	if (plan_steps(plan, l) < 0)
		goto fail;
	policy_live_free(&tmp);
	plan->period = found->period;
	st = policy_history_at(h, found->steady_start);
	plan->steady_seq = st ? st->seq : 0;
	return 0;
fail:
	policy_live_free(&tmp);
	policy_plan_free(plan);
	return -1;
}

static int dyn_index(policy_offload_mode_t mode)
{
	for (int i = 0; i < POLICY_DYN_MODES; i++)
		if (policy_dyn_order[i] == mode)
			return i;
	return -1;
}

int policy_plan_use(policy_plan_t *plan, policy_offload_mode_t mode)
{
	int from = dyn_index((policy_offload_mode_t)plan->offload), to = dyn_index(mode);
	policy_live_t tmp = { 0 };
	const policy_live_t *l;
	policy_offloads_t x;
	int rc = 0;

	if (!plan->dyn.decided || from < 0 || to < 0)
		return -1;
	if (from == to)
		return 0;
	if (!(l = live_curve(plan, &tmp)))
		return -1;
	/* the set in effect goes back to its slot, the new one comes out */
	x = plan->off;
	plan->off = plan->alt[to];
	memset(&plan->alt[to], 0, sizeof(plan->alt[to]));
	plan->alt[from] = x;
	plan->offload = (uint8_t)mode;
	if (plan_steps(plan, l) < 0) {
		plan->alt[to] = plan->off;
		plan->off = plan->alt[from];
		memset(&plan->alt[from], 0, sizeof(plan->alt[from]));
		plan->offload = (uint8_t)policy_dyn_order[from];
		rc = -1;
	}
	policy_live_free(&tmp);
	return rc;
}

void policy_plan_free(policy_plan_t *plan)
{
	policy_graph_free(&plan->g);
	policy_live_free(&plan->live);
	policy_offloads_free(&plan->off);
	for (int i = 0; i < POLICY_DYN_MODES; i++)
		policy_offloads_free(&plan->alt[i]);
	policy_evict_free(&plan->evict);
	policy_host_pages_free(&plan->host);
	free(plan->steps);
	free(plan->step_at);
	memset(plan, 0, sizeof(*plan));
}

static const char *const step_name[] = { "DEAD", "OFFLOAD", "PREFETCH", "ALGO", "SETTLE" };

void policy_plan_dump(const policy_plan_t *plan, policy_print_fn out, void *ctx)
{
	const policy_graph_t *g = &plan->g;
	int counts[5] = { 0 }, next = 0;

	for (int i = 0; i < plan->nsteps; i++) {
		counts[plan->steps[i].kind]++;
		next += plan->steps[i].next;
	}
	policy_printf(out, ctx,
		      "plan %u: period %u ops, first steady op seq %" PRIu64
		      ", %d steps (%d dead, %d offload, %d prefetch + %d lookahead, %d algo), offload %s",
		      plan->id, plan->period, plan->steady_seq, plan->nsteps, counts[0], counts[1],
		      counts[2] - next, next, counts[3],
		      policy_offload_name((policy_offload_mode_t)plan->offload));
	policy_dyn_dump(&plan->dyn, out, ctx);
	policy_host_pages_dump(&plan->host, g, out, ctx);
	for (int i = 0; i < plan->nsteps; i++) {
		const policy_step_t *x = &plan->steps[i];
		char lab[96];

		policy_op_label(g, x->op, lab, sizeof(lab));
		if (x->kind == POLICY_STEP_ALGO)
			policy_printf(out, ctx, "step %s %s: ALGO algo %d ws %" PRIu64 " room %" PRIu64,
				      lab, x->when == POLICY_BEFORE ? "before" : "after", x->algo,
				      x->workspace, x->room == UINT64_MAX ? 0 : x->room);
		else
			policy_printf(out, ctx, "step %s %s: %s use %d (%s a%" PRIu64 ") +0x%" PRIx64
				      "/%" PRIu64 " until #%d ref %d%s%s",
				      lab, x->when == POLICY_BEFORE ? "before" : "after",
				      x->next ? "PREFETCH(next)" : step_name[x->kind], x->use,
				      g->uses[x->use].role ? g->uses[x->use].role : "?",
				      g->uses[x->use].alloc_id, x->delta, x->bytes, x->until_op, x->ref,
				      x->entry ? " entry" : "", x->to_end ? " to-end" : "");
	}
}
