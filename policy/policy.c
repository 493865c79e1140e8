/* policy/policy.c - the seam: events in, actions out (see policy.h).
 *
 * Holds the history, the detector, the current plan and its matcher, and
 * the dead set, and moves between learning, planned and suspended:
 *
 *   every call     fold syncs into the next significant call; check reads
 *                  and writes against the dead set (REVIVE on a read)
 *   learning       history <- call; detector step; confirmed -> make a plan
 *   planned        match the call on its lane; before-steps now,
 *                  after-steps in policy_after; a mismatch -> suspended
 *   suspended      detector step (a new pattern replaces the plan); the
 *                  plan's first op resumes it; too long -> abandoned
 */
#include "policy/policy.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/match.h"

struct policy {
	pthread_mutex_t lock;
	policy_config_t cfg;
	policy_history_t h;
	policy_period_t det;
	uint32_t pending_flags;
	uint64_t watermark;
	policy_state_t state;
	bool have_plan;
	policy_plan_t plan;
	policy_match_t m;
	policy_deadset_t dead;
	uint64_t suspended_at;
	uint32_t failed_resumes;   /* resumes suspended again before an iteration completed */
	uint32_t next_id;
	policy_trial_t trial;      /* DYN's measured passes of the current plan */
	bool kept_noted;           /* their end was told (NOTE KEPT) */
	bool least;                /* the candidate running (or kept) is "(m)": the conv hooks
				      run least-workspace configurations */
	uint64_t misses_at_mark;   /* st.misses_planned when the current iteration began */
	bool iter_begun;           /* op 0 came since the plan was made: the calls are a
				      planned iteration's (not the tail of the one that
				      made it, whose calls no step prepared) */
	policy_stats_t st;
	/* the history position of each thread's call between before and after
	 * (the runtime may know the call's seq only after issuing it) */
	struct { uint64_t thread; uint64_t pos; bool live; } inflight[64];
	/* a call's ranges without its stray words (planned_view) */
	vmem_range_t *view;
	int cap_view;
};

void policy_config_default(policy_config_t *c)
{
	memset(c, 0, sizeof(*c));
	c->liveness = POLICY_LIVENESS_LAZY;
	c->offload = POLICY_OFFLOAD_NONE;
	c->budget = 0;
	c->dyn_headroom = POLICY_HEADROOM_DEFAULT;
	c->dyn_trials = 1;
	c->prefetch = POLICY_PREFETCH_VDNN;
	c->page_size = (uint64_t)2 << 20;
	c->offload_min_bytes = (uint64_t)1 << 20;
	c->gaps = true;
	c->lookahead = true;
	c->min_period = 4;
	c->max_period = 16384;
	c->reps = 3;
	c->max_candidates = 32;
	c->soft_permille = 250;
	c->history_events = 0;   /* (reps + 1) * max_period + 64 */
	c->history_ranges = 0;   /* 8 per event */
	c->abandon_after = 4;
}

/* ---- actions ---- */

void policy_actions_init(policy_actions_t *a)
{
	memset(a, 0, sizeof(*a));
}

void policy_actions_clear(policy_actions_t *a)
{
	a->n = 0;
	a->lost = false;
}

void policy_actions_free(policy_actions_t *a)
{
	free(a->v);
	memset(a, 0, sizeof(*a));
}

policy_action_t *policy_actions_push(policy_actions_t *a)
{
	if (a->n == a->cap) {
		int cap = a->cap ? a->cap * 2 : 32;
		policy_action_t *nv = realloc(a->v, (size_t)cap * sizeof(*nv));

		if (!nv) {
			a->lost = true;
			return NULL;
		}
		a->v = nv;
		a->cap = cap;
	}
	memset(&a->v[a->n], 0, sizeof(a->v[0]));
	return &a->v[a->n++];
}

static void note(policy_t *p, policy_actions_t *out, policy_note_t n, int expected)
{
	policy_action_t *x = policy_actions_push(out);

	if (!x)
		return;
	x->kind = POLICY_ACT_NOTE;
	x->note = (uint8_t)n;
	x->plan_id = p->plan.id;
	x->period = p->plan.period;
	x->plan_op = -1;
	x->until_op = -1;
	x->expected_op = expected;
	x->steady_seq = p->plan.steady_seq;
	x->offload_mode = p->plan.offload;
	x->least = p->least;
	x->gaps = p->plan.off.gaps;
	if (n == POLICY_NOTE_MADE) {
		x->dyn = p->plan.dyn;
		x->link_h2d = p->st.plan_h2d;
		x->link_d2h = p->st.plan_d2h;
	}
	if (n == POLICY_NOTE_TRIAL || n == POLICY_NOTE_KEPT) {
		x->trial = p->trial;
		x->iter = p->m.iter;
	}
}

/* ---- creation ---- */

int policy_create(const policy_config_t *cfg, policy_t **out)
{
	policy_t *p = calloc(1, sizeof(*p));
	policy_period_config_t pc;

	*out = NULL;
	if (!p)
		return -1;
	p->cfg = *cfg;
	pc.min_period = cfg->min_period;
	pc.max_period = cfg->max_period;
	pc.reps = cfg->reps;
	pc.max_candidates = cfg->max_candidates;
	pc.soft_permille = cfg->soft_permille;
	/* the detector looks back reps periods and one more for identities;
	 * the graph needs the window, the repetition before it and one more */
	{
		uint64_t need = ((uint64_t)(cfg->reps > 2 ? cfg->reps : 2) + 1) * cfg->max_period + 64;

		if (p->cfg.history_events < need)
			p->cfg.history_events = need;
		if (p->cfg.history_ranges < p->cfg.history_events)
			p->cfg.history_ranges = 8 * p->cfg.history_events;
	}
	if (policy_history_init(&p->h, p->cfg.history_events, p->cfg.history_ranges) < 0 ||
	    policy_period_init(&p->det, &pc) < 0 || policy_deadset_init(&p->dead) < 0) {
		policy_history_free(&p->h);
		policy_period_free(&p->det);
		policy_deadset_free(&p->dead);
		free(p);
		return -1;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

static void drop_plan(policy_t *p)
{
	if (!p->have_plan)
		return;
	policy_match_free(&p->m);
	policy_plan_free(&p->plan);
	p->have_plan = false;
}

void policy_destroy(policy_t *p)
{
	if (!p)
		return;
	drop_plan(p);
	policy_history_free(&p->h);
	policy_period_free(&p->det);
	policy_deadset_free(&p->dead);
	pthread_mutex_destroy(&p->lock);
	free(p->view);
	free(p);
}

/* ---- state changes ---- */

static void log_line(void *ctx, const char *line)
{
	policy_t *p = ctx;

	p->cfg.log(p->cfg.log_ctx, line);
}

static void dump_plan(policy_t *p, policy_print_fn out, void *ctx)
{
	policy_plan_dump(&p->plan, out, ctx);
	policy_graph_dump(&p->plan.g, out, ctx);
	policy_live_dump(&p->plan.g, &p->plan.live, out, ctx);
	policy_offloads_dump(&p->plan.g, &p->plan.off, out, ctx);
	policy_evict_dump(&p->plan.evict, p->m.last_op, 16, out, ctx);
}

static void abandon(policy_t *p, policy_actions_t *out)
{
	if (!p->have_plan)
		return;
	note(p, out, POLICY_NOTE_ABANDONED, -1);
	policy_period_abandoned(&p->det, p->plan.period);
	p->st.revives_suspend += (uint64_t)policy_deadset_drain(&p->dead, out);
	drop_plan(p);
	memset(&p->trial, 0, sizeof(p->trial));
	p->least = false;
	p->st.trial = p->trial;
	p->st.plans_abandoned++;
	p->st.period = 0;
	p->st.offload_mode = POLICY_OFFLOAD_NONE;
	p->state = POLICY_LEARNING;
}

/* lock held */
static uint64_t link_bw(const policy_t *p, policy_link_t d)
{
	if (d == POLICY_LINK_H2D && p->cfg.h2d_bytes_per_s)
		return p->cfg.h2d_bytes_per_s;
	if (p->st.link_bytes[d] < POLICY_LINK_MIN_BYTES || p->st.link_ns[d] == 0)
		return d == POLICY_LINK_D2H ? link_bw(p, POLICY_LINK_H2D) : POLICY_LINK_DEFAULT;
	return (uint64_t)((double)p->st.link_bytes[d] * 1e9 / (double)p->st.link_ns[d]);
}

/* DYN's measured passes (trial.c) over the modes whose offload sets
 * differ, the computed choice first, then (cfg.dyn_least) each of them
 * again with the least-workspace convolutions; none when there is one
 * candidate, no budget, or cfg.dyn_trials is 0. */
static void trials_setup(policy_t *p)
{
	const policy_plan_t *pl = &p->plan;
	const policy_offloads_t *set[POLICY_DYN_MODES];
	uint8_t modes[POLICY_TRIAL_MAX], least[POLICY_TRIAL_MAX] = { 0 };
	int n = 0;

	memset(&p->trial, 0, sizeof(p->trial));
	p->kept_noted = false;
	p->least = false;
	if (!pl->dyn.decided || !p->cfg.dyn_trials || !p->cfg.budget)
		goto out;
	modes[n] = pl->offload;
	set[n++] = &pl->off;
	for (int i = 0; i < POLICY_DYN_MODES; i++) {
		bool dup = false;

		if (policy_dyn_order[i] == pl->offload)
			continue;
		for (int j = 0; j < n && !dup; j++)
			dup = policy_offloads_same(&pl->alt[i], set[j]);
		if (dup)
			continue;
		modes[n] = (uint8_t)policy_dyn_order[i];
		set[n++] = &pl->alt[i];
	}
	if (p->cfg.dyn_least)
		for (int i = 0, m = n; i < m; i++) {
			modes[n] = modes[i];
			least[n++] = 1;
		}
	if (n > 1)
		policy_trial_init(&p->trial, modes, least, n, (int)p->cfg.dyn_trials);
out:
	p->st.trial = p->trial;
}

static void steps(policy_t *p, int op, policy_when_t when, bool next_only,
		  const vmem_event_t *ev, policy_actions_t *out);

static void make_plan(policy_t *p, const policy_period_found_t *f, const vmem_event_t *ev,
		      policy_actions_t *out)
{
	policy_plan_config_t pc = { 0 };
	policy_plan_t plan;
	int lane;

	pc.liveness = p->cfg.liveness != POLICY_LIVENESS_OFF;
	pc.offload = p->cfg.offload;
	pc.prefetch = p->cfg.prefetch;
	pc.timing.h2d_bytes_per_s = link_bw(p, POLICY_LINK_H2D);
	pc.timing.d2h_bytes_per_s = link_bw(p, POLICY_LINK_D2H);
	pc.timing.budget = p->cfg.prefetch_budget;
	pc.offload_min_bytes = p->cfg.offload_min_bytes;
	pc.budget = p->cfg.budget;
	pc.headroom = p->cfg.dyn_headroom;
	pc.page_size = p->cfg.page_size;
	pc.small_threshold = p->cfg.small_threshold;
	pc.algo_steps = p->cfg.algo_steps;
	pc.gaps = p->cfg.gaps;
	pc.lookahead = p->cfg.lookahead;
	pc.host_map = p->cfg.host_map;
	policy_period_keep_longer(&p->det, f->period);
	if (policy_plan_build(&plan, &p->h, f, &pc) < 0)
		return;   /* out of memory: stay as we are, try again on the next pattern */
	abandon(p, out);
	p->failed_resumes = 0;
	p->plan = plan;
	p->plan.id = ++p->next_id;
	if (policy_match_init(&p->m, &p->plan, &p->h, f) < 0) {
		policy_plan_free(&p->plan);
		return;
	}
	p->have_plan = true;
	p->st.plan_h2d = pc.timing.h2d_bytes_per_s;
	p->st.plan_d2h = pc.timing.d2h_bytes_per_s;
	p->state = POLICY_PLANNED;
	p->st.plans_made++;
	p->st.period = f->period;
	p->st.offload_mode = p->plan.offload;
	p->st.gaps = p->plan.off.gaps;
	if (p->plan.dyn.decided) {
		p->st.dyn_decisions++;
		p->st.dyn_mode = p->plan.dyn.chosen;
		p->st.dyn_fits = p->plan.dyn.fits;
		p->st.peak_none = p->plan.dyn.peak_none;
		p->st.peak_conv = p->plan.dyn.peak_conv;
		p->st.peak_all = p->plan.dyn.peak_all;
		p->st.dyn_budget = p->plan.dyn.budget;
	}
	trials_setup(p);
	p->iter_begun = false;
	note(p, out, POLICY_NOTE_MADE, -1);
	/* the call that confirmed the period is the window's last op: its
	 * after-steps are due in policy_after */
	lane = policy_match_lane(&p->m, ev->thread, ev->stream);
	if (lane >= 0) {
		p->m.pend_seq[lane] = ev->seq;
		p->m.pend_op[lane] = p->m.last_op;
		/* nor did its before-steps run; its lookahead is the next
		 * call's - op 0 when it is the lane's last, whose ranges (the
		 * batch's copy onto a small allocation's evicted slab) were the
		 * first planned iteration's first miss */
		if (p->m.last_op >= 0 && p->m.last_op < p->plan.g.nops)
			steps(p, p->m.last_op, POLICY_BEFORE, true, ev, out);
	}
	if (p->cfg.log)
		dump_plan(p, log_line, p);
}

static void suspend(policy_t *p, int expected, uint64_t pos, policy_actions_t *out)
{
	if (p->st.resumes && p->m.iter_resumed)
		p->failed_resumes++;
	p->state = POLICY_SUSPENDED;
	p->st.suspensions++;
	p->m.clean = false;
	for (int l = 0; l < p->plan.g.nlanes; l++)
		p->m.pend_op[l] = -1;
	note(p, out, POLICY_NOTE_SUSPENDED, expected);
	p->st.revives_suspend += (uint64_t)policy_deadset_drain(&p->dead, out);
	p->suspended_at = pos;
}

/* ---- per call ---- */

/* A range with no allocation and no extent is a word of a kernel's
 * arguments that fell inside the pool's address range without naming any
 * allocation: two packed 32-bit integers (a reduction's sizes, 0x200 and
 * 0x200, read as 0x20000000200), an end pointer.  It holds nothing to plan,
 * and its value changes from call to call, so in the weak signature it
 * would make one iteration differ from the next (PyTorch's VGG-16 on an
 * H200: a plan suspended in every iteration).  The policy sees the call
 * without such words, in before and after alike.  Returns `ev` itself when
 * there are none (or when host memory ran out: the call is then seen with
 * them, as before this filter), else `tmp` over p->view. */
static bool stray(const vmem_range_t *r)
{
	return r->alloc_id == 0 && r->bytes == 0;
}

static const vmem_event_t *planned_view(policy_t *p, const vmem_event_t *ev, vmem_event_t *tmp)
{
	int n = 0, k = 0;

	for (int j = 0; j < ev->nranges; j++)
		n += !stray(&ev->ranges[j]);
	if (n == ev->nranges)
		return ev;
	if (n > p->cap_view) {
		int cap = n < 16 ? 16 : n;
		vmem_range_t *v = realloc(p->view, (size_t)cap * sizeof(*v));

		if (!v)
			return ev;
		p->view = v;
		p->cap_view = cap;
	}
	for (int j = 0; j < ev->nranges; j++)
		if (!stray(&ev->ranges[j]))
			p->view[k++] = ev->ranges[j];
	*tmp = *ev;
	tmp->ranges = p->view;
	tmp->nranges = n;
	return tmp;
}

static void dead_checks(policy_t *p, const vmem_event_t *ev, policy_actions_t *out)
{
	if (p->dead.n == 0)
		return;
	for (int j = 0; j < ev->nranges; j++) {
		const vmem_range_t *r = &ev->ranges[j];

		if (r->alloc_id == 0 || r->bytes == 0)
			continue;
		/* a scanned kernel argument is read-write by assumption only */
		if (r->access & VMEM_ACCESS_R)
			p->st.revives_read += (uint64_t)policy_deadset_read(
				&p->dead, r->alloc_id, r->offset, r->offset + r->bytes,
				!(ev->kind == VMEM_OP_LAUNCH && (r->access & VMEM_ACCESS_W)), out);
		else if (r->access & VMEM_ACCESS_W)
			policy_deadset_write(&p->dead, r->alloc_id, r->offset, r->offset + r->bytes);
	}
}

/* The action of step s, attached to op `op` (whose call has trace seq
 * `seq`), its range resolved as step `prev` says.  False when out of
 * memory (the list is full). */
static bool step_act(policy_t *p, const policy_step_t *s, int op, uint64_t seq, bool prev,
		     policy_actions_t *out)
{
	const policy_plan_t *pl = &p->plan;
	const policy_graph_t *g = &pl->g;
	policy_cur_t c;
	policy_action_t *x;

	if (s->kind == POLICY_STEP_ALGO) {
		if (!(x = policy_actions_push(out)))
			return false;
		x->kind = POLICY_ACT_ALGO;
		x->plan_op = op;
		x->until_op = op;
		x->algo = s->algo;
		x->workspace = s->workspace;
		x->room = s->room;
		x->in_trial = p->trial.n > 1 && !p->kept_noted;
		return true;
	}
	if (policy_match_resolve(&p->m, s->use, s->delta, s->bytes,
				 (prev ? POLICY_RESOLVE_PREV : 0u) |
				 (s->to_end ? POLICY_RESOLVE_TO_END : 0u) |
				 (s->kind == POLICY_STEP_PREFETCH ? POLICY_RESOLVE_FETCH : 0u), &c) < 0)
		return true;
	if (!(x = policy_actions_push(out)))
		return false;
	x->alloc_id = c.alloc_id;
	x->offset = c.offset;
	x->bytes = c.bytes;
	x->ptr = c.ptr;
	x->plan_op = op;
	x->until_op = s->until_op;
	x->plan_id = pl->id;
	switch (s->kind) {
	case POLICY_STEP_DEAD: {
		const policy_dead_t *d = &pl->live.dead[s->ref];
		policy_loss_t *l = &x->loss;

		x->kind = POLICY_ACT_DEAD;
		x->eager = p->cfg.liveness == POLICY_LIVENESS_EAGER;
		l->alloc_id = c.alloc_id;
		l->offset = c.offset;
		l->bytes = c.bytes;
		l->ptr = c.ptr;
		l->plan_id = pl->id;
		l->iteration = p->m.iter;
		l->last_read_op = d->last_read;
		if (d->last_read >= 0) {
			l->last_read_kind = g->ops[d->last_read].kind;
			l->last_read_api = g->ops[d->last_read].api;
			l->last_read_seq = p->m.op_seq[d->last_read];
		}
		l->after_op = op;
		l->after_seq = seq;
		l->after_kind = g->ops[op].kind;
		l->after_api = g->ops[op].api;
		l->until_op = d->until_op;
		l->until_kind = g->ops[d->until_op].kind;
		l->until_api = g->ops[d->until_op].api;
		l->freed = d->freed;
		if (policy_deadset_add(&p->dead, c.alloc_id, c.offset, c.offset + c.bytes, l) < 0) {
			out->n--;   /* cannot watch it: do not declare it dead */
			return true;
		}
		p->st.dead_actions++;
		p->st.dead_bytes += c.bytes;
		break;
	}
	case POLICY_STEP_OFFLOAD:
		x->kind = POLICY_ACT_OFFLOAD;
		p->st.offloads++;
		p->st.offload_bytes += c.bytes;
		break;
	case POLICY_STEP_SETTLE:
		x->kind = POLICY_ACT_SETTLE;
		break;
	case POLICY_STEP_PREFETCH:
		x->kind = POLICY_ACT_PREFETCH;
		x->next = s->next;
		x->soon = s->soon;
		if (s->next) {
			p->st.lookaheads++;
			break;
		}
		p->st.prefetches++;
		p->st.prefetch_bytes += c.bytes;
		break;
	default:
		out->n--;
		break;
	}
	return true;
}

/* Op's steps at `when` (with `next_only`, its lookahead's alone). */
static void steps(policy_t *p, int op, policy_when_t when, bool next_only,
		  const vmem_event_t *ev, policy_actions_t *out)
{
	const policy_plan_t *pl = &p->plan;

	for (int i = pl->step_at[2 * op + when]; i < pl->step_at[2 * op + when + 1]; i++)
		if ((!next_only || pl->steps[i].next) &&
		    !step_act(p, &pl->steps[i], op, ev->seq, pl->steps[i].prev, out))
			return;
}

/* Before op 0 of an iteration the plan did not follow from its start to
 * here (the first planned one, or one after a suspension): what the plan
 * has dead or away while op 0 runs - the wrapped intervals declared or
 * offloaded late in the iteration before, when no plan ran them - is
 * declared and moved now, so that the device starts the iteration where
 * the plan's curve does.  Without it the first planned iteration finds
 * last iteration's optimizer state and gradients resident, dirty, with
 * their next use an iteration away: a prefetch takes no dirty page, and
 * the calls fault (ResNet in the network style at 1/2 of its peak).  The
 * ranges resolve through the iteration before (STABLE allocations where
 * the plan has them); one that does not is left alone. */
static void entry_steps(policy_t *p, policy_actions_t *out)
{
	const policy_plan_t *pl = &p->plan;

	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		int n0 = out->n;

		if (!s->entry)
			continue;
		if (!step_act(p, s, s->op, p->m.op_seq[s->op], true, out))
			return;
		p->st.entry_steps += (uint64_t)(out->n - n0);
	}
}

/* The plan's first op: a MARK for the device's clock, and under DYN's
 * passes the mode this iteration runs (switched before any of its steps). */
static void iteration_begins(policy_t *p, bool prev_whole, policy_actions_t *out)
{
	policy_action_t *x;
	int c;

	p->iter_begun = true;
	if (p->trial.n > 1 && !p->kept_noted) {
		bool running = p->trial.state == POLICY_TRIAL_RUNNING;

		/* what the iteration that ends here missed, before its time */
		if (prev_whole && p->m.iter > 0)
			policy_trial_misses(&p->trial, p->m.iter - 1,
					    p->st.misses_planned - p->misses_at_mark);
		c = policy_trial_begin(&p->trial, p->m.iter, prev_whole);
		p->least = p->trial.least[c];
		if (p->trial.mode[c] != p->plan.offload &&
		    policy_plan_use(&p->plan, (policy_offload_mode_t)p->trial.mode[c]) == 0) {
			p->st.offload_mode = p->plan.offload;
			p->st.gaps = p->plan.off.gaps;
		}
		p->st.trial = p->trial;
		if (p->trial.state != POLICY_TRIAL_RUNNING) {
			note(p, out, POLICY_NOTE_KEPT, -1);
			p->kept_noted = true;
		} else if (running) {
			note(p, out, POLICY_NOTE_TRIAL, -1);
		}
	}
	p->misses_at_mark = p->st.misses_planned;
	if (!(x = policy_actions_push(out)))
		return;
	x->kind = POLICY_ACT_MARK;
	x->plan_op = 0;
	x->until_op = -1;
	x->plan_id = p->plan.id;
	x->iter = p->m.iter;
	x->prev_whole = prev_whole;
	x->offload_mode = p->plan.offload;
	x->least = p->least;
}

static void planned_call(policy_t *p, const vmem_event_t *ev, uint64_t pos,
			 policy_actions_t *out)
{
	bool was_clean = p->m.clean;
	const policy_hev_t *e = policy_history_at(&p->h, pos);
	int expected, op = policy_match_event(&p->m, ev, e->hash, &expected);

	if (op < 0) {
		suspend(p, expected, pos, out);
		return;
	}
	bool entry = op == 0 && (!was_clean || p->m.iter_resumed);

	if (op == 0 && was_clean) {
		p->st.iterations_planned++;
		p->failed_resumes = 0;
		p->m.iter_resumed = false;
	}
	if (op == 0)
		iteration_begins(p, was_clean, out);
	if (entry)
		entry_steps(p, out);
	p->st.ops_matched++;
	steps(p, op, POLICY_BEFORE, false, ev, out);
}

int policy_before(policy_t *p, const vmem_event_t *call, policy_actions_t *out)
{
	int n0 = out->n;
	uint64_t pos, wm;
	policy_period_found_t f;
	vmem_event_t tmp;
	const vmem_event_t *ev;
	int found;

	pthread_mutex_lock(&p->lock);
	ev = planned_view(p, call, &tmp);
	p->st.events++;
	if (ev->kind == VMEM_OP_SYNC) {
		p->pending_flags |= POLICY_HEV_SYNC_BEFORE;
		goto done;
	}
	dead_checks(p, ev, out);
	if (!policy_event_significant(ev->kind))
		goto done;
	p->st.significant++;
	wm = p->watermark;
	for (int j = 0; j < ev->nranges; j++)
		if (ev->ranges[j].alloc_id > p->watermark)
			p->watermark = ev->ranges[j].alloc_id;
	pos = policy_history_push(&p->h, ev, p->pending_flags, wm);
	p->pending_flags = 0;
	if (pos == UINT64_MAX)
		goto done;   /* out of host memory: learn nothing from this call */
	{
		unsigned slot = (unsigned)(ev->thread * 0x9e3779b97f4a7c15ull >> 58);

		p->inflight[slot].thread = ev->thread;
		p->inflight[slot].pos = pos;
		p->inflight[slot].live = true;
	}
	/* the detector runs in every state, so a new steady pattern is found
	 * while a plan is suspended (a confirmation while planned is the
	 * plan's own pattern, or one it matches: ignored) */
	found = policy_period_step(&p->det, &p->h, pos, p->state == POLICY_PLANNED, &f);
	switch (p->state) {
	case POLICY_LEARNING:
		if (found)
			make_plan(p, &f, ev, out);
		break;
	case POLICY_PLANNED:
		planned_call(p, ev, pos, out);
		/* the call that confirms a new pattern is the one that leaves
		 * the plan (a kernel decided again at the same op every
		 * iteration since): the new pattern's plan, now, not after the
		 * old one was resumed and abandoned four times */
		if (found && p->state == POLICY_SUSPENDED)
			make_plan(p, &f, ev, out);
		/* a longer pattern while a plan of a period abandoned before
		 * runs: that plan is a stage inside the iteration, made again
		 * at each of its starts, and the longer one is the iteration */
		else if (found && f.period > p->plan.period && p->det.abandoned == p->plan.period)
			make_plan(p, &f, ev, out);
		break;
	case POLICY_SUSPENDED:
		if (found) {
			make_plan(p, &f, ev, out);
			break;
		}
		if (policy_match_same(&p->plan, 0, ev, policy_history_at(&p->h, pos)->hash) &&
		    policy_match_lane(&p->m, ev->thread, ev->stream) == p->plan.g.ops[0].lane) {
			p->state = POLICY_PLANNED;
			p->st.resumes++;
			policy_match_restart(&p->m);
			note(p, out, POLICY_NOTE_RESUMED, 0);
			p->m.iter_resumed = true;
			planned_call(p, ev, pos, out);
			break;
		}
		if (pos - p->suspended_at > (uint64_t)p->cfg.abandon_after * p->plan.period ||
		    p->failed_resumes > p->cfg.abandon_after)
			abandon(p, out);
		break;
	}
done:
	pthread_mutex_unlock(&p->lock);
	return out->n - n0;
}

static void set_duration(policy_t *p, uint64_t seq, uint64_t dur_ns)
{
	uint64_t lo = p->h.head, n = 0;

	for (uint64_t pos = p->h.tail; pos > lo && n < 65536; pos--, n++) {
		policy_hev_t *e = policy_history_at(&p->h, pos - 1);

		if (e && e->seq == seq) {
			e->dur_ns = dur_ns;
			break;
		}
	}
	if (p->have_plan)
		for (int k = 0; k < p->plan.g.nops; k++)
			if (p->m.op_seq[k] == seq) {
				p->plan.g.ops[k].dur_ns = dur_ns;
				break;
			}
}

int policy_after(policy_t *p, const vmem_event_t *call, policy_actions_t *out)
{
	int n0 = out->n;
	vmem_event_t tmp;
	const vmem_event_t *ev;

	pthread_mutex_lock(&p->lock);
	ev = planned_view(p, call, &tmp);
	if (policy_event_significant(ev->kind)) {
		unsigned slot = (unsigned)(ev->thread * 0x9e3779b97f4a7c15ull >> 58);
		policy_hev_t *e = NULL;

		if (p->inflight[slot].live && p->inflight[slot].thread == ev->thread) {
			e = policy_history_at(&p->h, p->inflight[slot].pos);
			p->inflight[slot].live = false;
		}
		/* the seq (and duration) known only now */
		if (e && (e->seq == ev->seq || e->seq == 0)) {
			e->seq = ev->seq;
			if (ev->dur_ns)
				e->dur_ns = ev->dur_ns;
		} else if (ev->dur_ns) {
			set_duration(p, ev->seq, ev->dur_ns);
		}
	}
	if (p->state == POLICY_PLANNED && policy_event_significant(ev->kind)) {
		int l = policy_match_lane(&p->m, ev->thread, ev->stream);

		/* the call policy_before matched last on this lane (calls on one
		 * thread and stream are issued one at a time) */
		if (l >= 0 && p->m.pend_op[l] >= 0 &&
		    (p->m.pend_seq[l] == ev->seq || p->m.pend_seq[l] == 0 || ev->seq == 0)) {
			int op = p->m.pend_op[l];

			p->m.pend_op[l] = -1;
			if (ev->seq)
				p->m.op_seq[op] = ev->seq;
			steps(p, op, POLICY_AFTER, false, ev, out);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return out->n - n0;
}

void policy_allocated(policy_t *p, uint64_t alloc_id, uint64_t bytes)
{
	(void)bytes;
	pthread_mutex_lock(&p->lock);
	if (alloc_id > p->watermark)
		p->watermark = alloc_id;
	pthread_mutex_unlock(&p->lock);
}

void policy_freed(policy_t *p, uint64_t alloc_id)
{
	/* A freed allocation's dead marks are meaningless: its id is never
	 * reused, and the pool reclaims the memory itself. */
	pthread_mutex_lock(&p->lock);
	if (p->dead.n)
		policy_deadset_write(&p->dead, alloc_id, 0, UINT64_MAX);
	/* where it was freed, for the next graph (policy_alloc_t.free_op); a
	 * free the history cannot hold is one the graph does not use */
	(void)policy_history_freed(&p->h, alloc_id);
	pthread_mutex_unlock(&p->lock);
}

void policy_duration(policy_t *p, uint64_t seq, uint64_t dur_ns)
{
	pthread_mutex_lock(&p->lock);
	set_duration(p, seq, dur_ns);
	pthread_mutex_unlock(&p->lock);
}

void policy_iteration_time(policy_t *p, uint32_t plan_id, uint64_t iter, uint64_t ns)
{
	if (!ns)
		return;
	pthread_mutex_lock(&p->lock);
	p->st.iters_timed++;
	p->st.iter_last_ns = ns;
	if (!p->st.iter_best_ns || ns < p->st.iter_best_ns)
		p->st.iter_best_ns = ns;
	if (p->have_plan && p->plan.id == plan_id && p->trial.n > 1 &&
	    policy_trial_measured(&p->trial, iter, ns))
		p->st.trial = p->trial;
	pthread_mutex_unlock(&p->lock);
}

void policy_pass_floor(policy_t *p, bool least, uint64_t ns)
{
	pthread_mutex_lock(&p->lock);
	if (p->have_plan && p->trial.n > 1 && p->trial.state == POLICY_TRIAL_RUNNING)
		policy_trial_floor(&p->trial, least, ns);
	pthread_mutex_unlock(&p->lock);
}

void policy_link_sample(policy_t *p, policy_link_t dir, uint64_t bytes, uint64_t ns)
{
	if ((unsigned)dir > POLICY_LINK_D2H || !bytes || !ns)
		return;
	pthread_mutex_lock(&p->lock);
	p->st.link_copies[dir]++;
	p->st.link_bytes[dir] += bytes;
	p->st.link_ns[dir] += ns;
	pthread_mutex_unlock(&p->lock);
}

uint64_t policy_link_bandwidth(policy_t *p, policy_link_t dir)
{
	uint64_t bw;

	pthread_mutex_lock(&p->lock);
	bw = link_bw(p, dir);
	pthread_mutex_unlock(&p->lock);
	return bw;
}

/* (lock held, planned) The op the plan counts from: the one matched last,
 * or the one before it between policy_before and policy_after of that op
 * (its before-steps: a prefetch) - it has not run, so its own pages are
 * needed next, not an iteration from now. */
static int plan_now(const policy_t *p)
{
	int now = p->m.last_op;

	for (int l = 0; l < p->plan.g.nlanes; l++)
		if (p->m.pend_op[l] == now)
			return now - 1;
	return now;
}

uint64_t policy_evict_order(policy_t *p, uint64_t alloc_id, uint64_t offset, uint64_t bytes)
{
	uint64_t key = POLICY_KEY_UNKNOWN;

	pthread_mutex_lock(&p->lock);
	if (p->state == POLICY_PLANNED)
		key = policy_evict_key(&p->plan.evict, policy_match_translate(&p->m, alloc_id), offset,
				       bytes, plan_now(p));
	pthread_mutex_unlock(&p->lock);
	return key;
}

int policy_op_distance(policy_t *p, int op)
{
	int d = -1;

	pthread_mutex_lock(&p->lock);
	if (p->state == POLICY_PLANNED && op >= 0 && op < p->plan.g.nops) {
		int n = p->plan.g.nops;

		d = ((op - plan_now(p) - 1) % n + n) % n;
	}
	pthread_mutex_unlock(&p->lock);
	return d;
}

/* Adds n to *planned in a planned iteration, else to *other. */
static void count_by_state(policy_t *p, uint64_t *planned, uint64_t *other, uint64_t n)
{
	pthread_mutex_lock(&p->lock);
	*(p->state == POLICY_PLANNED && p->iter_begun ? planned : other) += n;
	pthread_mutex_unlock(&p->lock);
}

void policy_note_miss(policy_t *p, uint64_t n)
{
	count_by_state(p, &p->st.misses_planned, &p->st.misses_other, n);
}

void policy_note_miss_beside(policy_t *p, uint64_t n)
{
	uint64_t ignored = 0;

	count_by_state(p, &p->st.misses_planned_beside, &ignored, n);
}

void policy_note_map(policy_t *p, uint64_t n)
{
	count_by_state(p, &p->st.maps_planned, &p->st.maps_other, n);
}

policy_state_t policy_state(policy_t *p)
{
	policy_state_t s;

	pthread_mutex_lock(&p->lock);
	s = p->state;
	pthread_mutex_unlock(&p->lock);
	return s;
}

int policy_find_loss(policy_t *p, uint64_t alloc_id, uint64_t offset, uint64_t bytes,
		     policy_loss_t *out)
{
	int rc;

	pthread_mutex_lock(&p->lock);
	rc = policy_deadset_find(&p->dead, alloc_id, offset, offset + (bytes ? bytes : 1), out);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

size_t policy_loss_format(const policy_loss_t *l, const vmem_event_t *now, char *buf,
			  size_t len)
{
	char reader[160], who[160];
	int n;

	if (l->last_read_op >= 0)
		snprintf(reader, sizeof(reader), "last read by plan op #%d %s (%s, seq %" PRIu64 ")",
			 l->last_read_op, vmem_op_name(l->last_read_kind),
			 l->last_read_api ? l->last_read_api : "?", l->last_read_seq);
	else
		snprintf(reader, sizeof(reader), "written by plan op #%d %s (%s, seq %" PRIu64
			 ") and never read", l->after_op, vmem_op_name(l->after_kind),
			 l->after_api ? l->after_api : "?", l->after_seq);
	if (now && now->seq)
		snprintf(who, sizeof(who), "%s (%s, seq %" PRIu64 ")", vmem_op_name(now->kind),
			 now->api ? now->api : "?", now->seq);
	else if (now)   /* before it is issued, a call has no seq yet */
		snprintf(who, sizeof(who), "%s (%s)", vmem_op_name(now->kind),
			 now->api ? now->api : "?");
	else
		snprintf(who, sizeof(who), "a call");
	n = snprintf(buf, len,
		     "%s reads alloc %" PRIu64 " bytes [%" PRIu64 ", %" PRIu64 ") (0x%" PRIxPTR
		     "), which vmem dropped as dead in planned iteration %" PRIu64 " of plan %u: %s, "
		     "then expected to be %s plan op #%d %s (%s) before any read; "
		     "the application left the steady iteration and these bytes are lost; "
		     "run with VMEM_LIVENESS=off to keep every byte",
		     who, l->alloc_id, l->offset, l->offset + l->bytes, l->ptr, l->iteration,
		     l->plan_id, reader, l->freed ? "freed by the application before" : "rewritten whole by",
		     l->until_op, vmem_op_name(l->until_kind), l->until_api ? l->until_api : "?");
	return n < 0 ? 0 : (size_t)n;
}

void policy_get_stats(policy_t *p, policy_stats_t *s)
{
	pthread_mutex_lock(&p->lock);
	*s = p->st;
	s->state = (uint8_t)p->state;
	pthread_mutex_unlock(&p->lock);
}

void policy_stats_print(const policy_stats_t *s, policy_print_fn out, void *ctx)
{
	policy_printf(out, ctx, "policy: %-9s plan period %6u ops  made %6" PRIu64
		      "  abandoned %6" PRIu64, policy_state_name((policy_state_t)s->state),
		      s->period, s->plans_made, s->plans_abandoned);
	policy_printf(out, ctx, "policy: iterations planned %8" PRIu64 "  suspended %6" PRIu64
		      "  resumed %6" PRIu64 "  ops matched %10" PRIu64,
		      s->iterations_planned, s->suspensions, s->resumes, s->ops_matched);
	policy_printf(out, ctx, "policy: dead %8" PRIu64 " (%14" PRIu64 " B)  revived by a read %6"
		      PRIu64 "  on suspension %6" PRIu64,
		      s->dead_actions, s->dead_bytes, s->revives_read, s->revives_suspend);
	policy_printf(out, ctx, "policy: offload %8" PRIu64 " (%14" PRIu64 " B)  prefetch %8" PRIu64
		      " (%14" PRIu64 " B)  lookahead %8" PRIu64, s->offloads, s->offload_bytes,
		      s->prefetches, s->prefetch_bytes, s->lookaheads);
	if (s->entry_steps)
		policy_printf(out, ctx, "policy: set at an iteration's start %6" PRIu64
			      "  (dead and offloaded ranges the plan has away at op 0)",
			      s->entry_steps);
	policy_printf(out, ctx, "policy: misses in planned iterations %10" PRIu64 "  elsewhere %10"
		      PRIu64, s->misses_planned, s->misses_other);
	if (s->misses_planned_beside)
		policy_printf(out, ctx, "policy:   of them beside the call before %8" PRIu64
			      "  (the two calls need more pages than the budget together)",
			      s->misses_planned_beside);
	policy_printf(out, ctx, "policy: fresh maps in planned iterations %6" PRIu64 "  elsewhere %10"
		      PRIu64, s->maps_planned, s->maps_other);
	for (int d = POLICY_LINK_H2D; d <= POLICY_LINK_D2H; d++)
		if (s->link_copies[d])
			policy_printf(out, ctx, "policy: link %s measured %6.2f GB/s over %6" PRIu64
				      " copies (%" PRIu64 " MiB)%s", d == POLICY_LINK_H2D ? "h2d" : "d2h",
				      (double)s->link_bytes[d] / (double)s->link_ns[d], s->link_copies[d],
				      s->link_bytes[d] >> 20,
				      s->link_bytes[d] < POLICY_LINK_MIN_BYTES ? "  (too few: not used)" : "");
	if (s->plan_h2d)
		policy_printf(out, ctx, "policy: link the plan assumed  h2d %6.2f GB/s  d2h %6.2f GB/s",
			      (double)s->plan_h2d / 1e9, (double)s->plan_d2h / 1e9);
	if (s->iters_timed)
		policy_printf(out, ctx, "policy: planned iterations timed %6" PRIu64
			      "  last %10.1f ms  fastest %10.1f ms", s->iters_timed,
			      (double)s->iter_last_ns / 1e6, (double)s->iter_best_ns / 1e6);
	if (s->trial.n > 1) {
		char line[256];

		policy_trial_format(&s->trial, line, sizeof(line));
		policy_printf(out, ctx, "policy: %s", line);
	}
	if (s->dyn_decisions) {
		policy_dyn_t d = { 0 };
		char line[256];

		d.decided = 1;
		d.chosen = s->dyn_mode;
		d.fits = s->dyn_fits;
		d.peak_none = s->peak_none;
		d.peak_conv = s->peak_conv;
		d.peak_all = s->peak_all;
		d.budget = s->dyn_budget;
		policy_dyn_format(&d, line, sizeof(line));
		policy_printf(out, ctx, "policy: %s", line);
	}
	if (s->gaps.tried) {
		char line[256];

		policy_gaps_format(&s->gaps, line, sizeof(line));
		policy_printf(out, ctx, "policy: %s", line);
	}
}

void policy_dump(policy_t *p, policy_print_fn out, void *ctx)
{
	pthread_mutex_lock(&p->lock);
	policy_printf(out, ctx, "policy: %s, %" PRIu64 " events (%" PRIu64 " significant), history %"
		      PRIu64 "..%" PRIu64, policy_state_name(p->state), p->st.events,
		      p->st.significant, p->h.head, p->h.tail);
	policy_period_dump(&p->det, out, ctx);
	if (p->have_plan)
		dump_plan(p, out, ctx);
	pthread_mutex_unlock(&p->lock);
}

const policy_plan_t *policy_plan(const policy_t *p)
{
	return p->have_plan ? &p->plan : NULL;
}

const char *policy_state_name(policy_state_t s)
{
	switch (s) {
	case POLICY_LEARNING: return "learning";
	case POLICY_PLANNED: return "planned";
	case POLICY_SUSPENDED: return "suspended";
	}
	return "?";
}

const char *policy_act_name(policy_act_kind_t k)
{
	static const char *const n[] = { "dead", "revive", "offload", "prefetch", "algo", "note",
					 "settle", "mark" };

	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

const char *policy_note_name(policy_note_t k)
{
	static const char *const n[] = { "made", "suspended", "resumed", "abandoned", "trial",
					 "kept" };

	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}
