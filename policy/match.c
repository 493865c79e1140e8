/* policy/match.c - checking every call of a planned iteration against the plan.
 *
 * DESIGN.md point 4: "each hooked call is checked against the plan's next
 * expected op".  Threads interleave (PyTorch runs backward on its autograd
 * thread, the optimizer on the main one), so the plan is split into lanes,
 * one per (thread, stream), and each lane has its own cursor; only the
 * order inside a lane must repeat:
 *
 *   plan:    #0 main  #1 main  #2 main | #3 bwd  #4 bwd | #5 main
 *   lanes:   main: #0 #1 #2 #5          bwd: #3 #4
 *   a call on the bwd thread is compared with bwd's cursor, whatever main did.
 *
 * A call matches when its weak signature is the op's (kind, api, typed
 * record, per range role/bytes/access).  Its actual ranges are recorded
 * per plan use: the plan's steps name ranges as "use u of op k", and are
 * resolved through what op k really touched in this iteration -- a
 * per-tensor allocator's fresh allocation, the other half of a double
 * buffer.  Where an allocation is not where the plan expects it (a STABLE
 * allocation at another offset, a YOUNG range that moved), the allocation
 * is marked unreliable for the rest of the iteration and no DEAD range is
 * resolved on it: deadness is only ever claimed where the plan's view of
 * the memory was confirmed by the calls themselves.
 */
#include "policy/match.h"

#include <stdlib.h>
#include <string.h>

static bool str_eq(const char *a, const char *b)
{
	if (a == b)
		return true;
	if (!a || !b)
		return false;
	return strcmp(a, b) == 0;
}

bool policy_match_same(const policy_plan_t *plan, int op, const vmem_event_t *ev, uint64_t hash)
{
	const policy_graph_t *g = &plan->g;
	const policy_op_t *o;

	if (op < 0 || op >= g->nops)
		return false;
	o = &g->ops[op];
	if (o->kind != ev->kind || !str_eq(o->api, ev->api) || o->hash != hash)
		return false;
	if (o->nuses != ev->nranges)
		return policy_ranges_vary(o->kind);   /* record() pairs them by place */
	for (int j = 0; j < o->nuses; j++) {
		const policy_use_t *u = &g->uses[o->use0 + j];
		const vmem_range_t *r = &ev->ranges[j];

		if ((u->bytes != r->bytes && !policy_range_bytes_vary(o->kind, u->role)) ||
		    u->access != r->access ||
		    (u->alloc_id == 0) != (r->alloc_id == 0) || !str_eq(u->role, r->role))
			return false;
	}
	return true;
}

int policy_match_lane(const policy_match_t *m, uint64_t thread, uintptr_t stream)
{
	const policy_graph_t *g = &m->plan->g;

	for (int l = 0; l < g->nlanes; l++)
		if (g->lanes[l].thread == thread && g->lanes[l].stream == stream)
			return l;
	return -1;
}

static void xl_put(policy_match_t *m, uint64_t cur, uint64_t plan)
{
	uint64_t i = (cur * 0x9e3779b97f4a7c15ull) & m->xl_mask;

	m->xl[i].cur = cur;
	m->xl[i].plan = plan;
}

uint64_t policy_match_translate(const policy_match_t *m, uint64_t cur_alloc)
{
	uint64_t i;

	if (!m->xl)
		return cur_alloc;
	i = (cur_alloc * 0x9e3779b97f4a7c15ull) & m->xl_mask;
	return m->xl[i].cur == cur_alloc && cur_alloc ? m->xl[i].plan : cur_alloc;
}

static bool is_bad(const policy_match_t *m, uint64_t alloc_id)
{
	if (m->all_bad)
		return true;
	for (int i = 0; i < m->nbad; i++)
		if (m->bad[i] == alloc_id)
			return true;
	return false;
}

static void mark_bad(policy_match_t *m, uint64_t alloc_id)
{
	if (is_bad(m, alloc_id))
		return;
	if (m->nbad == m->capbad) {
		int cap = m->capbad ? m->capbad * 2 : 16;
		uint64_t *nb = cap <= 4096 ? realloc(m->bad, (size_t)cap * sizeof(*nb)) : NULL;

		if (!nb) {
			m->all_bad = true;   /* cannot remember which: trust none */
			return;
		}
		m->bad = nb;
		m->capbad = cap;
	}
	m->bad[m->nbad++] = alloc_id;
}

static void new_iteration(policy_match_t *m, bool from_start)
{
	m->iter++;
	m->clean = from_start;
	m->nbad = 0;
	m->all_bad = false;
}

/* A launch whose scan found another number of words than the plan's: each
 * plan use takes the call's range at the same place (its allocation, or
 * the one it stands for this iteration, and offset), or none.  A use left
 * without one is unseen this iteration: the steps on it do not resolve and
 * the reactive layer serves it; the call's other ranges are made resident
 * at the call like any (and checked against the dead set before it). */
static const vmem_range_t *same_place(const policy_match_t *m, const policy_use_t *u,
				      const vmem_event_t *ev)
{
	for (int k = 0; k < ev->nranges; k++) {
		const vmem_range_t *r = &ev->ranges[k];

		if (r->alloc_id && r->offset == u->offset && str_eq(r->role, u->role) &&
		    policy_match_translate(m, r->alloc_id) == u->alloc_id)
			return r;
	}
	return NULL;
}

/* Records the call's ranges for plan op `op` and checks their places. */
static void record(policy_match_t *m, int op, const vmem_event_t *ev)
{
	const policy_graph_t *g = &m->plan->g;
	const policy_op_t *o = &g->ops[op];
	bool paired = o->nuses == ev->nranges;

	m->op_seq[op] = ev->seq;
	for (int j = 0; j < o->nuses; j++) {
		const policy_use_t *u = &g->uses[o->use0 + j];
		const vmem_range_t *r = paired ? &ev->ranges[j] : same_place(m, u, ev);
		const policy_alloc_t *a = policy_graph_alloc(g, u->alloc_id);
		policy_cur_t *c = &m->cur[o->use0 + j];

		if (!r) {
			c->alloc_id = 0;   /* unseen this iteration: resolves to nothing */
			continue;
		}
		c->alloc_id = r->alloc_id;
		c->offset = r->offset;
		c->bytes = r->bytes;
		c->ptr = r->ptr;
		c->iter = m->iter;
		if (!a || r->alloc_id == 0)
			continue;
		switch (a->cls) {
		case POLICY_ALLOC_STABLE:
			if (r->alloc_id != u->alloc_id || r->offset != u->offset) {
				mark_bad(m, r->alloc_id);
				mark_bad(m, u->alloc_id);
			}
			break;
		case POLICY_ALLOC_YOUNG:
			if (r->offset != u->offset) {
				mark_bad(m, r->alloc_id);
			} else {
				uint64_t prev = policy_match_translate(m, r->alloc_id);

				if (prev != r->alloc_id && prev != u->alloc_id)
					mark_bad(m, r->alloc_id);   /* one allocation, two plan ones */
				xl_put(m, r->alloc_id, u->alloc_id);
			}
			break;
		default:
			break;
		}
	}
}

int policy_match_init(policy_match_t *m, const policy_plan_t *plan,
		      const policy_history_t *h, const policy_period_found_t *f)
{
	const policy_graph_t *g = &plan->g;
	uint32_t p = f->period;
	int last = (int)((p - 1 + p - f->rot % p) % p);
	uint64_t xcap = 64;

	memset(m, 0, sizeof(*m));
	m->plan = plan;
	while (xcap < 2 * (uint64_t)g->nuses && xcap < ((uint64_t)1 << 20))
		xcap <<= 1;
	m->cursor = calloc((size_t)(g->nlanes ? g->nlanes : 1), sizeof(int));
	m->pend_seq = calloc((size_t)(g->nlanes ? g->nlanes : 1), sizeof(uint64_t));
	m->pend_op = calloc((size_t)(g->nlanes ? g->nlanes : 1), sizeof(int));
	m->cur = calloc((size_t)(g->nuses ? g->nuses : 1), sizeof(*m->cur));
	m->op_seq = calloc((size_t)(g->nops ? g->nops : 1), sizeof(uint64_t));
	m->xl = calloc(xcap, sizeof(*m->xl));
	if (!m->cursor || !m->pend_seq || !m->pend_op || !m->cur || !m->op_seq || !m->xl) {
		policy_match_free(m);
		return -1;
	}
	m->xl_mask = xcap - 1;
	m->iter = 1;
	m->clean = false;   /* the plan starts mid-iteration */
	/* the window's calls up to op `last` belong to the current iteration,
	 * the rest to the previous one */
	for (int k = 0; k < g->nops; k++) {
		const policy_hev_t *e = policy_history_at(h, f->first + ((uint64_t)f->rot + k) % p);

		if (!e)
			continue;
		m->iter = k <= last ? 1 : 0;
		m->op_seq[k] = e->seq;
		for (uint32_t j = 0; j < e->nranges && (int)j < g->ops[k].nuses; j++) {
			const vmem_range_t *r = policy_history_range(h, e, j);
			policy_cur_t *c = &m->cur[g->ops[k].use0 + (int)j];
			const policy_alloc_t *a = policy_graph_alloc(g, r->alloc_id);

			c->alloc_id = r->alloc_id;
			c->offset = r->offset;
			c->bytes = r->bytes;
			c->ptr = r->ptr;
			c->iter = m->iter;
			if (a && a->cls == POLICY_ALLOC_YOUNG)
				xl_put(m, r->alloc_id, r->alloc_id);
		}
	}
	m->iter = 1;
	m->last_op = last;
	for (int l = 0; l < g->nlanes; l++) {
		const policy_lane_t *ln = &g->lanes[l];
		int c = 0;

		while (c < ln->nops && ln->ops[c] <= last)
			c++;
		m->cursor[l] = c < ln->nops ? c : 0;
		m->pend_seq[l] = 0;
		m->pend_op[l] = -1;
	}
	return 0;
}

void policy_match_free(policy_match_t *m)
{
	free(m->cursor);
	free(m->pend_seq);
	free(m->pend_op);
	free(m->cur);
	free(m->op_seq);
	free(m->xl);
	free(m->bad);
	memset(m, 0, sizeof(*m));
}

void policy_match_restart(policy_match_t *m)
{
	const policy_graph_t *g = &m->plan->g;

	for (int l = 0; l < g->nlanes; l++)
		m->cursor[l] = 0;
}

int policy_match_event(policy_match_t *m, const vmem_event_t *ev, uint64_t hash, int *expected)
{
	const policy_graph_t *g = &m->plan->g;
	int l = policy_match_lane(m, ev->thread, ev->stream);
	const policy_lane_t *ln;
	int op;

	*expected = -1;
	if (l < 0)
		return -1;
	ln = &g->lanes[l];
	op = ln->ops[m->cursor[l]];
	*expected = op;
	if (!policy_match_same(m->plan, op, ev, hash))
		return -1;
	if (op == 0)
		new_iteration(m, true);
	record(m, op, ev);
	m->cursor[l] = m->cursor[l] + 1 < ln->nops ? m->cursor[l] + 1 : 0;
	m->pend_seq[l] = ev->seq;
	m->pend_op[l] = op;
	m->last_op = op;
	return op;
}

int policy_match_resolve(const policy_match_t *m, int use, uint64_t delta, uint64_t bytes,
			 unsigned how, policy_cur_t *out)
{
	const policy_graph_t *g = &m->plan->g;
	const policy_alloc_t *a;
	const policy_cur_t *c;
	const policy_use_t *u;
	bool prev = how & POLICY_RESOLVE_PREV, to_end = how & POLICY_RESOLVE_TO_END;

	if (use < 0 || use >= g->nuses)
		return -1;
	c = &m->cur[use];
	u = &g->uses[use];
	if (c->alloc_id == 0 || c->bytes != u->bytes || is_bad(m, c->alloc_id) ||
	    (to_end ? delta > c->bytes : delta + bytes > c->bytes))
		return -1;
	if (to_end) {
		/* to where the allocation ended when the plan was learned,
		 * from the use's place now (its block may have moved) */
		uint64_t end = u->offset + delta + bytes, at = c->offset + delta;

		if (prev || end <= at)
			return -1;
		bytes = end - at;
	}
	if (c->iter == m->iter)
		prev = false;   /* seen in this iteration already: its op came (a wrapped
				   prefetch placed at its own offload's op resolves here) */
	if (!prev && (c->iter != m->iter || is_bad(m, u->alloc_id)))
		return -1;
	if (prev) {
		/* a STABLE allocation where the plan has it, seen in the
		 * iteration just before this one (for a prefetch, in any
		 * earlier one: an iteration left unfinished may lie between),
		 * and not seen elsewhere in this one */
		a = policy_graph_alloc(g, u->alloc_id);
		if (!a || a->cls != POLICY_ALLOC_STABLE ||
		    ((how & POLICY_RESOLVE_FETCH) ? c->iter >= m->iter : c->iter + 1 != m->iter) ||
		    c->alloc_id != u->alloc_id || c->offset != u->offset)
			return -1;
	}
	out->alloc_id = c->alloc_id;
	out->offset = c->offset + delta;
	out->bytes = bytes;
	out->ptr = c->ptr + delta;
	out->iter = c->iter;
	return 0;
}
