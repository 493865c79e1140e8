/* tests/unit/policy/test_plan.c - plans and their verification
 * (policy/plan.c, match.c, deadset.c, policy.c): actions resolved against
 * the calls actually seen, matching per (thread, stream) lane, suspension
 * and its revivals, the description of lost bytes, and the switches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/match.h"
#include "policy/policy.h"
#include "synth.h"

static policy_config_t cfg(void)
{
	policy_config_t c;

	policy_config_default(&c);
	return c;
}

static int count_since(const drv_t *d, uint64_t seq, policy_act_kind_t kind, int sub)
{
	int n = 0;

	for (int i = 0; i < d->nacts; i++)
		if (d->acts[i].seq >= seq && d->acts[i].kind == (int)kind &&
		    (sub < 0 || (kind == POLICY_ACT_NOTE ? d->acts[i].a.note : d->acts[i].a.reason) == sub))
			n++;
	return n;
}

static void test_dead_actions_follow_current_allocations(void **state)
{
	/* per-tensor allocation: every iteration's activations are new
	 * allocations; the plan's DEAD ranges must name this iteration's */
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_PER_TENSOR };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	uint64_t first_seq, young_from;
	int young = 0, stable = 0;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 4; i++)
		net_train(&n, &d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	first_seq = d.seq;
	young_from = n.next_id;   /* this iteration's allocations come after */
	net_train(&n, &d);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq < first_seq || a->kind != POLICY_ACT_DEAD)
			continue;
		if (a->alloc_id >= young_from) {
			young++;
		} else if (a->alloc_id >= 10 && a->alloc_id < 10 + 3 * 4) {
			stable++;   /* gradients, dead from the update to their next write */
		} else {
			fail_msg("DEAD on alloc %llu: neither this iteration's (>= %llu) nor a weight's",
				 (unsigned long long)a->alloc_id, (unsigned long long)young_from);
		}
		assert_true(a->ptr == (uintptr_t)(0x100000000ull * a->alloc_id + a->offset));
	}
	if (young == 0 || stable == 0)
		fail_msg("expected DEAD ranges on this iteration's tensors and on gradients, got %d and %d",
			 young, stable);
	assert_int_equal(count_since(&d, first_seq, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED), 0);
	assert_int_equal(count_since(&d, first_seq, POLICY_ACT_REVIVE, -1), 0);
	net_free(&n);
	drv_free(&d);
}

/* A two-lane iteration: main thread ops a0 a1 a2, backward thread b0 b1. */
static void lane_op(drv_t *d, uint64_t thread, int which, uint64_t off)
{
	vmem_range_t r[2];
	vmem_op_info_t in = { .type = VMEM_INFO_LAUNCH };

	d->thread = thread;
	in.u.launch.func = 0x100 + (uintptr_t)which;
	r[0] = R(20 + (uint64_t)which, off, 256, VMEM_ACCESS_R, "arg0");
	r[1] = R(40 + (uint64_t)which, 0, 256, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 2, r);
	d->thread = 1;
}

static void two_lane_iter(drv_t *d, bool swapped)
{
	lane_op(d, 1, 0, 0);
	if (!swapped) {
		lane_op(d, 2, 10, 0);
		lane_op(d, 1, 1, 0);
	} else {
		lane_op(d, 1, 1, 0);
		lane_op(d, 2, 10, 0);
	}
	lane_op(d, 2, 11, 0);
	lane_op(d, 1, 2, 0);
	drv_sync(d);
}

static void test_lanes_tolerate_another_interleaving(void **state)
{
	policy_config_t c = cfg();
	policy_stats_t st;
	drv_t d;

	(void)state;
	drv_init(&d, &c);
	for (int i = 0; i < 3; i++)
		two_lane_iter(&d, false);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	assert_int_equal(policy_plan(d.p)->g.nlanes, 2);
	/* the backward thread's ops now come later relative to main's */
	two_lane_iter(&d, true);
	two_lane_iter(&d, false);
	two_lane_iter(&d, true);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.suspensions, 0);
	assert_int_equal(st.iterations_planned, 2);
	/* a different op on the backward lane is a mismatch */
	lane_op(&d, 1, 0, 0);
	lane_op(&d, 2, 12, 0);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.suspensions, 1);
	drv_free(&d);
}

static void test_deviation_suspends_and_revives_dead_ranges(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	vmem_range_t r;
	vmem_op_info_t li = { .type = VMEM_INFO_LAUNCH };
	policy_stats_t st;
	uint64_t seq;
	int outstanding;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 4; i++)
		net_train(&n, &d);
	/* ranges dead across the iteration boundary (gradients, the loss) are
	 * still declared dead */
	policy_get_stats(d.p, &st);
	assert_true(st.dead_actions > 0);
	seq = d.seq;
	li.u.launch.func = 0xbad;
	r = R(n.w[0], 0, 64, VMEM_ACCESS_R, "arg0");
	drv_op(&d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &li, 1, &r);
	assert_int_equal(policy_state(d.p), POLICY_SUSPENDED);
	assert_int_equal(count_since(&d, seq, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED), 1);
	outstanding = count_since(&d, seq, POLICY_ACT_REVIVE, POLICY_REVIVE_SUSPEND);
	if (outstanding < 4)
		fail_msg("expected the 4 gradients' dead ranges (and more) revived, got %d", outstanding);
	/* the NOTE says which op was expected: the plan's first op */
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_NOTE)
			assert_int_equal(d.acts[i].a.expected_op, 0);
	/* the next iteration resumes the plan; nothing stays dead meanwhile */
	net_train(&n, &d);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.resumes, 1);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	net_free(&n);
	drv_free(&d);
}

/* An iteration that keeps tensor T (alloc 30): written by #2, read by #3,
 * dead from #3 until #2 of the next iteration. */
static void keep_iter(drv_t *d, uint64_t b_off)
{
	vmem_range_t r[2];
	vmem_op_info_t in = { .type = VMEM_INFO_COPY };

	in.u.copy.bytes = 4096;
	in.u.copy.kind = 1;
	r[0] = R(0, 0x10, 4096, VMEM_ACCESS_R, "src");
	r[1] = R(31, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", &in, 2, r);
	r[0] = R(31, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(32, b_off, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	r[0] = R(32, b_off, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(30, 0, 8192, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	r[0] = R(30, 0, 8192, VMEM_ACCESS_R, "x");
	r[1] = R(33, 0, 64, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_SOFTMAX_FWD, "cudnnSoftmaxForward", NULL, 2, r);
	drv_sync(d);
}

static void test_read_of_dead_range_names_last_reader_and_reader(void **state)
{
	policy_config_t c = cfg();
	policy_stats_t st;
	policy_loss_t loss;
	const policy_action_t *rv = NULL;
	vmem_range_t r;
	vmem_op_info_t li = { .type = VMEM_INFO_LAUNCH };
	char line[1024];
	drv_t d;
	uint64_t seq, rseq;

	(void)state;
	drv_init(&d, &c);
	for (int i = 0; i < 5; i++)
		keep_iter(&d, 0);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.revives_read, 0);   /* the plan never reads a dead range */
	/* the application reads T once in a while: it deviates */
	seq = d.seq;
	li.u.launch.func = 0x5eed;
	r = R(30, 4096, 16, VMEM_ACCESS_R, "arg0");
	rseq = drv_op(&d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &li, 1, &r);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_REVIVE &&
		    d.acts[i].a.reason == POLICY_REVIVE_READ)
			rv = &d.acts[i].a;
	assert_non_null(rv);
	/* the revived piece is what the call reads, described fully */
	assert_int_equal(rv->certain, 1);
	assert_int_equal(rv->alloc_id, 30);
	assert_int_equal(rv->offset, 4096);
	assert_int_equal(rv->bytes, 16);
	assert_int_equal(rv->loss.last_read_op, 3);
	assert_int_equal(rv->loss.last_read_kind, VMEM_OP_SOFTMAX_FWD);
	assert_int_equal(rv->loss.until_op, 2);
	{
		vmem_event_t now = { .kind = VMEM_OP_LAUNCH, .api = "cudaLaunchKernel", .seq = rseq };

		policy_loss_format(&rv->loss, &now, line, sizeof(line));
	}
	if (!strstr(line, "launch (cudaLaunchKernel, seq") ||
	    !strstr(line, "alloc 30 bytes [4096, 4112)") ||
	    !strstr(line, "last read by plan op #3 softmax_fwd (cudnnSoftmaxForward") ||
	    !strstr(line, "rewritten whole by plan op #2 act_fwd") ||
	    !strstr(line, "VMEM_LIVENESS=off"))
		fail_msg("loss line: %s", line);
	/* after the call the plan is suspended: the rest of T is revived too,
	 * and a later report (the pool found dropped bytes) is still described */
	assert_int_equal(policy_state(d.p), POLICY_SUSPENDED);
	assert_int_equal(policy_find_loss(d.p, 30, 0, 16, &loss), 0);
	assert_int_equal(loss.last_read_op, 3);
	assert_int_equal(policy_find_loss(d.p, 99, 0, 16, &loss), -1);
	drv_free(&d);
}

static void test_seq_known_only_after_the_call(void **state)
{
	/* the runtime reserves the trace seq after making the call's memory
	 * resident: policy_before gets 0, policy_after the seq */
	policy_config_t c = cfg();
	vmem_op_info_t li = { .type = VMEM_INFO_LAUNCH };
	const policy_action_t *rv = NULL;
	vmem_range_t r;
	uint64_t softmax_seq = 0;
	drv_t d;

	(void)state;
	drv_init(&d, &c);
	d.seq_late = true;
	for (int i = 0; i < 5; i++) {
		keep_iter(&d, 0);
		softmax_seq = d.seq - 2;   /* the softmax, before the sync */
	}
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	assert_true(drv_count(&d, POLICY_ACT_DEAD, -1) > 0);
	assert_int_equal(policy_plan(d.p)->steady_seq, 1);
	li.u.launch.func = 0x5eed;
	r = R(30, 0, 16, VMEM_ACCESS_R, "arg0");
	drv_op(&d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &li, 1, &r);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].kind == POLICY_ACT_REVIVE && d.acts[i].a.reason == POLICY_REVIVE_READ)
			rv = &d.acts[i].a;
	assert_non_null(rv);
	/* the descriptions name calls by their real seq */
	assert_int_equal(rv->loss.last_read_seq, softmax_seq);
	assert_int_equal(rv->loss.after_seq, softmax_seq);
	drv_free(&d);
}

static void test_scanned_argument_read_is_not_certain(void **state)
{
	/* a fill kernel on a block the caching allocator handed out again:
	 * vmem sees a read-write argument, the kernel may only write */
	policy_config_t c = cfg();
	vmem_op_info_t li = { .type = VMEM_INFO_LAUNCH };
	vmem_range_t r;
	drv_t d;
	int n = 0;

	(void)state;
	drv_init(&d, &c);
	for (int i = 0; i < 5; i++)
		keep_iter(&d, 0);
	li.u.launch.func = 0xf111;
	r = R(30, 0, 64, VMEM_ACCESS_RW, "arg2");
	drv_op(&d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &li, 1, &r);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].kind == POLICY_ACT_REVIVE && d.acts[i].a.reason == POLICY_REVIVE_READ) {
			assert_int_equal(d.acts[i].a.certain, 0);
			n++;
		}
	assert_int_equal(n, 1);
	drv_free(&d);
}

static void test_moved_stable_range_is_not_declared_dead(void **state)
{
	policy_config_t c = cfg();
	drv_t d;
	uint64_t seq;

	(void)state;
	drv_init(&d, &c);
	for (int i = 0; i < 4; i++)
		keep_iter(&d, 0);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	/* alloc 32 comes at another offset this time: same call, but the
	 * plan's picture of alloc 32 is wrong for this iteration */
	seq = d.seq;
	keep_iter(&d, 4096);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_DEAD)
			assert_true(d.acts[i].a.alloc_id != 32);
	assert_int_equal(count_since(&d, seq, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED), 0);
	/* the next iteration, back in place, declares it dead again */
	seq = d.seq;
	keep_iter(&d, 0);
	{
		int n = 0;

		for (int i = 0; i < d.nacts; i++)
			n += d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_DEAD &&
			     d.acts[i].a.alloc_id == 32;
		assert_int_equal(n, 1);
	}
	drv_free(&d);
}

static void test_liveness_switches(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;

	(void)state;
	c.liveness = POLICY_LIVENESS_OFF;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 6; i++)
		net_train(&n, &d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	assert_int_equal(drv_count(&d, POLICY_ACT_DEAD, -1), 0);
	net_free(&n);
	drv_free(&d);

	c.liveness = POLICY_LIVENESS_EAGER;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 6; i++)
		net_train(&n, &d);
	assert_true(drv_count(&d, POLICY_ACT_DEAD, -1) > 0);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].kind == POLICY_ACT_DEAD)
			assert_int_equal(d.acts[i].a.eager, 1);
	net_free(&n);
	drv_free(&d);
}

static void test_misses_counted_by_state(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	policy_stats_t st;
	drv_t d;
	net_t n;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	policy_note_miss(d.p, 3);
	policy_note_miss_beside(d.p, 3);   /* not planned: not counted */
	policy_note_map(d.p, 7);
	for (int i = 0; i < 4; i++)
		net_train(&n, &d);
	policy_note_miss(d.p, 5);
	policy_note_miss_beside(d.p, 4);
	policy_note_map(d.p, 11);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.misses_other, 3);
	assert_int_equal(st.misses_planned, 5);
	if (st.misses_planned_beside != 4)
		fail_msg("misses beside the call before: expected 4 (the planned ones only), got %llu",
			 (unsigned long long)st.misses_planned_beside);
	/* fresh maps are not misses: counted apart, by the same state */
	assert_int_equal(st.maps_other, 7);
	assert_int_equal(st.maps_planned, 11);
	net_free(&n);
	drv_free(&d);

	/* between the call that makes the plan and the plan's op 0 the calls
	 * are the tail of the iteration that made it, which no step
	 * prepared: not a planned iteration's */
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 8 && policy_state(d.p) != POLICY_PLANNED; i++)
		net_train(&n, &d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	policy_note_miss(d.p, 2);
	net_train(&n, &d);
	policy_note_miss(d.p, 5);
	policy_get_stats(d.p, &st);
	if (st.misses_other != 2 || st.misses_planned != 5)
		fail_msg("a miss after the plan was made, before its op 0, then one in its first "
			 "iteration: expected 2 other, 5 planned, got %llu and %llu",
			 (unsigned long long)st.misses_other, (unsigned long long)st.misses_planned);
	net_free(&n);
	drv_free(&d);
}

/* Trains nc under c until planned, then one more iteration; returns that
 * iteration's first seq. */
static uint64_t planned_iteration(drv_t *d, net_t *n, const policy_config_t *c,
				  const net_cfg_t *nc)
{
	uint64_t seq;

	drv_init(d, c);
	net_init(n, d, nc);
	for (int i = 0; i < 4; i++)
		net_train(n, d);
	seq = d->seq;
	net_train(n, d);
	return seq;
}

static void test_algo_steps_before_each_convolution(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	uint64_t seq, lo = UINT64_MAX, hi = 0;

	(void)state;
	c.algo_steps = true;
	seq = planned_iteration(&d, &n, &c, &nc);
	/* 3 forward, 2 backward-data, 3 backward-filter convolutions */
	assert_int_equal(count_since(&d, seq, POLICY_ACT_ALGO, -1), 8);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_ALGO) {
			assert_int_equal(d.acts[i].a.algo, 1);   /* the application's own */
			assert_int_equal(d.acts[i].a.room, UINT64_MAX);   /* no budget known */
		}
	net_free(&n);
	drv_free(&d);

	/* with a budget, each room is the budget less what is resident while
	 * that convolution runs: less than the budget, and not the same at
	 * every layer */
	c.budget = UINT64_C(1) << 30;
	seq = planned_iteration(&d, &n, &c, &nc);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq < seq || a->kind != POLICY_ACT_ALGO)
			continue;
		if (a->room >= c.budget)
			fail_msg("ALGO room %llu: expected less than the budget %llu",
				 (unsigned long long)a->room, (unsigned long long)c.budget);
		lo = a->room < lo ? a->room : lo;
		hi = a->room > hi ? a->room : hi;
	}
	if (!(lo < hi))
		fail_msg("expected rooms that differ between layers, got %llu .. %llu",
			 (unsigned long long)lo, (unsigned long long)hi);
	net_free(&n);
	drv_free(&d);
}

/* The lookahead (VMEM_LOOKAHEAD): under an offload mode, every read of a
 * call that is not its lane's first has a PREFETCH step before the call
 * before it (the first's: test_lookahead_brings_the_page_a_whole_write_
 * covers_in_part), and in a planned iteration each resolves to the range the
 * call reads in that iteration (a per-tensor allocator's new tensors
 * included); without an offload mode, or switched off, there are none. */
static int lookahead_steps(const policy_plan_t *pl)
{
	int n = 0;

	for (int i = 0; i < pl->nsteps; i++)
		n += pl->steps[i].next;
	return n;
}

static void test_lookahead_prefetches_the_next_calls_reads(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_PER_TENSOR };
	policy_config_t c = cfg();
	policy_stats_t st0, st1;
	drv_t d;
	net_t n;

	(void)state;
	c.offload = POLICY_OFFLOAD_ALL;
	planned_iteration(&d, &n, &c, &nc);
	const policy_plan_t *pl = policy_plan(d.p);
	const policy_graph_t *g = &pl->g;
	int want = 0;

	for (int l = 0; l < g->nlanes; l++)
		for (int i = 1; i < g->lanes[l].nops; i++) {
			int j = g->lanes[l].ops[i - 1], k = g->lanes[l].ops[i];
			const policy_op_t *op = &g->ops[k];

			for (int u = op->use0; u < op->use0 + op->nuses; u++) {
				const policy_use_t *U = &g->uses[u];
				bool found = false;

				if (!(U->access & VMEM_ACCESS_R) || !U->alloc_id)
					continue;
				want++;
				for (int x = 0; x < pl->nsteps && !found; x++) {
					const policy_step_t *s = &pl->steps[x];
					const policy_use_t *R0 = &g->uses[s->use];

					found = s->next && s->soon && s->op == j && s->until_op == k &&
						s->when == POLICY_BEFORE && R0->alloc_id == U->alloc_id &&
						R0->offset + s->delta <= U->offset &&
						U->offset + U->bytes <= R0->offset + s->delta + s->bytes;
				}
				if (!found) {
					char lab[96];

					policy_op_label(g, k, lab, sizeof(lab));
					fail_msg("expected a PREFETCH(next) before #%d for use %d (a%llu) of %s, "
						 "found none", j, u, (unsigned long long)U->alloc_id, lab);
				}
			}
		}
	assert_true(want > 0);
	/* a planned iteration resolves every one of them: the stats count the
	 * actions, the plan its steps */
	policy_get_stats(d.p, &st0);
	uint64_t seq = d.seq;
	net_train(&n, &d);
	policy_get_stats(d.p, &st1);
	int nstep = lookahead_steps(policy_plan(d.p));
	if (st1.lookaheads - st0.lookaheads != (uint64_t)nstep)
		fail_msg("one planned iteration: expected %d lookahead prefetches (one per step), got %llu",
			 nstep, (unsigned long long)(st1.lookaheads - st0.lookaheads));
	/* each names a range of this iteration: per-tensor, the activations are
	 * allocations made in it (ids above every id of the iteration before) */
	uint64_t young = 0;

	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_PREFETCH &&
		    d.acts[i].a.alloc_id >= n.next_id - 64)
			young++;
	assert_true(young > 0);
	net_free(&n);
	drv_free(&d);

	c.lookahead = false;
	planned_iteration(&d, &n, &c, &nc);
	assert_int_equal(lookahead_steps(policy_plan(d.p)), 0);
	net_free(&n);
	drv_free(&d);
	c.lookahead = true;
	c.offload = POLICY_OFFLOAD_NONE;
	planned_iteration(&d, &n, &c, &nc);
	assert_int_equal(lookahead_steps(policy_plan(d.p)), 0);
	net_free(&n);
	drv_free(&d);
}

/* The plan is made in the before-phase of the call that confirmed the
 * period, the window's last op, whose before-steps no match ran: its
 * lookahead (the next call's ranges: op 0's when it is the lane's last) is
 * issued then, with the NOTE that the plan was made - else the first
 * planned iteration's first call faulted its ranges in (the batch's copy
 * onto an evicted slab: ResNet in the network style, one miss a run). */
static void test_plan_made_runs_the_confirming_calls_lookahead(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	uint64_t made = 0;
	int ahead = 0;

	(void)state;
	c.offload = POLICY_OFFLOAD_ALL;
	/* pages as the pool's: the batch is small, so op 0's whole write of
	 * it has a lookahead (its slab's other bytes), before the lane's last
	 * op - the one that confirms the period here */
	c.page_size = 1 << 20;
	c.small_threshold = 1 << 19;
	planned_iteration(&d, &n, &c, &nc);
	for (int i = 0; i < d.nacts && !made; i++)
		if (d.acts[i].kind == POLICY_ACT_NOTE && d.acts[i].a.note == POLICY_NOTE_MADE)
			made = d.acts[i].seq;
	assert_true(made > 0);
	const policy_plan_t *pl = policy_plan(d.p);
	int until = -1, op = -1, want = 0;

	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq == made && d.acts[i].kind == POLICY_ACT_PREFETCH &&
		    d.acts[i].a.next) {
			ahead++;
			until = d.acts[i].a.until_op;
		}
	/* the confirming op: the one whose lookahead is for `until` */
	for (int i = 0; i < pl->nsteps && until >= 0; i++)
		if (pl->steps[i].next && pl->steps[i].until_op == until)
			op = pl->steps[i].op;
	for (int i = 0; i < pl->nsteps && op >= 0; i++)
		want += pl->steps[i].next && pl->steps[i].op == op;
	if (ahead == 0 || ahead != want)
		fail_msg("the call that made the plan (seq %llu): expected the lookahead of its op "
			 "(#%d, %d prefetches for #%d) then, got %d", (unsigned long long)made, op, want,
			 until, ahead);
	net_free(&n);
	drv_free(&d);
}

/* A kernel whose scanned argument reaches over several tensors of one
 * segment (a caching allocator's: the scan cannot tell where the tensor
 * ends) reads more than any earlier call touched: the lookahead before it
 * brings the whole range, named through the kernel's own use in the
 * iteration before, not the part the latest call read. */
static void one_scanned_iteration(drv_t *d)
{
	vmem_range_t r[3];
	vmem_op_info_t in;

	memset(&in, 0, sizeof(in));
	r[0] = R(0, 0x1000, 4096, VMEM_ACCESS_R, "src");
	r[1] = R(11, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	/* the weight: the first 64 KiB of segment 10 */
	r[0] = R(11, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(10, 0, 65536, VMEM_ACCESS_R, "w");
	r[2] = R(12, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", NULL, 3, r);
	r[0] = R(12, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(13, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	/* the update kernel: its pointer is the weight's, its scanned extent
	 * the segment's end (weight, gradient, momentum side by side) */
	r[0] = R(10, 0, 196608, VMEM_ACCESS_RW, "arg0");
	r[1] = R(13, 0, 4096, VMEM_ACCESS_RW, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", NULL, 2, r);
	r[0] = R(13, 0, 4, VMEM_ACCESS_R, "src");
	r[1] = R(0, 0x2000, 4, VMEM_ACCESS_W, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	drv_sync(d);
}

/* A driver under `all` whose plan was made from one_scanned_iteration. */
static void scanned_planned(drv_t *d)
{
	policy_config_t c = cfg();

	c.offload = POLICY_OFFLOAD_ALL;
	drv_init(d, &c);
	policy_allocated(d->p, 10, 196608);
	for (uint64_t a = 11; a <= 13; a++)
		policy_allocated(d->p, a, 4096);
	for (int i = 0; i < 5; i++)
		one_scanned_iteration(d);
	assert_int_equal(policy_state(d->p), POLICY_PLANNED);
}

/* The lookahead PREFETCHes before the kernel since action `seq`: 1 for
 * each of a10 [0, +196608), 100 for each of another range of a10. */
static int kernel_lookaheads(const drv_t *d, uint64_t seq)
{
	const policy_graph_t *g = &policy_plan(d->p)->g;
	int acts = 0;

	for (int i = 0; i < d->nacts; i++) {
		const policy_action_t *a = &d->acts[i].a;

		if (d->acts[i].seq >= seq && d->acts[i].kind == POLICY_ACT_PREFETCH && a->next &&
		    a->alloc_id == 10 && g->ops[a->until_op].kind == VMEM_OP_LAUNCH)
			acts += a->offset == 0 && a->bytes == 196608 ? 1 : 100;
	}
	return acts;
}

static void test_lookahead_brings_a_scanned_argument_whole(void **state)
{
	drv_t d;
	int steps = 0, acts;
	uint64_t seq;

	(void)state;
	scanned_planned(&d);
	const policy_plan_t *pl = policy_plan(d.p);
	const policy_graph_t *g = &pl->g;

	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		const policy_use_t *u = &g->uses[s->use];

		if (!s->next || u->alloc_id != 10 || g->ops[s->until_op].kind != VMEM_OP_LAUNCH)
			continue;
		steps++;
		if (s->delta != 0 || s->bytes != 196608 || u->offset != 0 || u->bytes != 196608)
			fail_msg("expected the lookahead before the kernel to name all of its 196608 "
				 "bytes of a10, got [%llu, +%llu) of a use of %llu bytes at %llu",
				 (unsigned long long)s->delta, (unsigned long long)s->bytes,
				 (unsigned long long)u->bytes, (unsigned long long)u->offset);
	}
	assert_int_equal(steps, 1);
	/* a planned iteration resolves it: one PREFETCH of the whole range */
	seq = d.seq;
	one_scanned_iteration(&d);
	acts = kernel_lookaheads(&d, seq);
	if (acts != 1)
		fail_msg("expected one lookahead PREFETCH of a10 [0, +196608) in a planned iteration, "
			 "got %d (100 per one of another range)", acts);
	drv_free(&d);
}

/* The same lookahead after an iteration the application left unfinished
 * (an evaluation pass: the forward's first calls, then others): the
 * kernel was last seen two iterations before, and the range still
 * resolves through it, its STABLE allocation where the plan has it.  A
 * prefetch never loses bytes, so an older place will do; without it
 * VGG-16 in the caching style with an evaluation every 4 iterations
 * faulted its SGD kernels' weight pages in at each resumed iteration (41
 * misses each at 1/2 under all). */
static void test_lookahead_after_an_unfinished_iteration(void **state)
{
	vmem_range_t r[2];
	drv_t d;
	int acts;
	uint64_t seq;

	(void)state;
	scanned_planned(&d);
	/* the unfinished one: the batch's copy, then a call the plan does
	 * not have (the evaluation's own) */
	r[0] = R(0, 0x1000, 4096, VMEM_ACCESS_R, "src");
	r[1] = R(11, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(&d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	r[0] = R(11, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(12, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(&d, VMEM_OP_SOFTMAX_FWD, "cudnnSoftmaxForward", NULL, 2, r);
	drv_sync(&d);
	assert_int_equal(policy_state(d.p), POLICY_SUSPENDED);
	seq = d.seq;
	one_scanned_iteration(&d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	acts = kernel_lookaheads(&d, seq);
	if (acts != 1)
		fail_msg("expected one lookahead PREFETCH of a10 [0, +196608) in the iteration after an "
			 "unfinished one, got %d (100 per one of another range)", acts);
	drv_free(&d);
}

/* A call split in chunks other than an earlier call's over one tensor
 * made anew each iteration: the lookahead before a chunk resolves its
 * range through the latest uses that cover it - two of the earlier
 * call's chunks where one covers it in part.  (vmem splits VGG-16's
 * first pooling backward in 270 MiB chunks and the activation backward
 * after it in 159 MiB ones; the part of each activation chunk the latest
 * pooling chunk did not cover was faulted in: 25 pages an iteration.) */
enum { CK = 4096 };

static void chunked_iteration(drv_t *d, uint64_t id)
{
	static const uint64_t a_lo[] = { 0, 66 * CK }, a_n[] = { 66 * CK, 66 * CK };
	static const uint64_t b_lo[] = { 0, 40 * CK, 80 * CK }, b_n[] = { 40 * CK, 40 * CK, 52 * CK };
	vmem_range_t r[2];

	policy_allocated(d->p, id, 132 * CK);
	r[0] = R(20, 0, 132 * CK, VMEM_ACCESS_R, "x");
	r[1] = R(id, 0, 132 * CK, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	for (int i = 0; i < 2; i++) {
		r[0] = R(id, a_lo[i], a_n[i], VMEM_ACCESS_R, "x");
		r[1] = R(21, a_lo[i], a_n[i], VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dx");
		drv_op(d, VMEM_OP_POOL_BWD, "cudnnPoolingBackward", NULL, 2, r);
	}
	for (int i = 0; i < 3; i++) {
		r[0] = R(id, b_lo[i], b_n[i], VMEM_ACCESS_R, "x");
		r[1] = R(22, b_lo[i], b_n[i], VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dx");
		drv_op(d, VMEM_OP_ACT_BWD, "cudnnActivationBackward", NULL, 2, r);
	}
	drv_sync(d);
	policy_freed(d->p, id);
}

static void test_lookahead_covers_a_chunk_across_earlier_chunks(void **state)
{
	policy_config_t c = cfg();
	uint64_t id = 100, covered = 0, lo = UINT64_MAX, hi = 0, seq;
	int b2 = -1, nb = 0, steps = 0;
	drv_t d;

	(void)state;
	c.offload = POLICY_OFFLOAD_ALL;
	drv_init(&d, &c);
	for (uint64_t a = 20; a <= 22; a++)
		policy_allocated(d.p, a, 132 * CK);
	for (int i = 0; i < 5; i++)
		chunked_iteration(&d, id++);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	const policy_plan_t *pl = policy_plan(d.p);
	const policy_graph_t *g = &pl->g;

	for (int o = 0; o < g->nops && b2 < 0; o++)
		if (g->ops[o].kind == VMEM_OP_ACT_BWD && nb++ == 1)
			b2 = o;
	assert_true(b2 >= 0);
	uint64_t x = g->uses[g->ops[b2].use0].alloc_id;
	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		const policy_use_t *u = &g->uses[s->use];

		if (!s->next || s->until_op != b2 || u->alloc_id != x)
			continue;
		steps++;
		covered += s->bytes;
		if (u->offset + s->delta < lo)
			lo = u->offset + s->delta;
		if (u->offset + s->delta + s->bytes > hi)
			hi = u->offset + s->delta + s->bytes;
	}
	if (steps != 2 || covered != 40 * CK || lo != 40 * CK || hi != 80 * CK)
		fail_msg("expected the lookahead before the second chunk [%d, %d) to cover it whole "
			 "in 2 steps (through both earlier chunks), got %d steps, %llu bytes over "
			 "[%llu, %llu)", 40 * CK, 80 * CK, steps, (unsigned long long)covered,
			 (unsigned long long)lo, (unsigned long long)hi);
	/* a planned iteration asks for all of it */
	seq = d.seq;
	chunked_iteration(&d, id++);
	covered = 0;
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_PREFETCH && a->next &&
		    a->until_op == b2 && a->alloc_id == id - 1)
			covered += a->offset >= 40 * CK && a->offset + a->bytes <= 80 * CK ? a->bytes : 0;
	}
	if (covered != 40 * CK)
		fail_msg("expected lookahead PREFETCHes of [%d, %d) of the new tensor in a planned "
			 "iteration, got %llu bytes inside it", 40 * CK, 80 * CK,
			 (unsigned long long)covered);
	drv_free(&d);
}

/* A call that overwrites a range whole needs nothing of it back - but the
 * pool moves whole pages, and a page the range covers in part keeps its
 * other bytes: a convolution's workspace ending inside a page of a
 * caching segment whose rest a scanned kernel argument reaches.  The
 * lookahead brings that page (VGG-16 in the caching style faulted it in
 * at every planned forward convolution: 15 misses in two planned
 * iterations, 3 with it), and for the lane's first call (the batch's copy
 * onto a page of its segment) before the lane's last. */
static void one_workspace_iteration(drv_t *d)
{
	vmem_range_t r[4];

	/* the batch, copied onto the segment's last page: the lane's first
	 * call, whose lookahead comes before the iteration's last call */
	r[0] = R(0, 0x1000, 4096, VMEM_ACCESS_R, "src");
	r[1] = R(10, 233472, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	r[0] = R(10, 233472, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(12, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	/* the workspace: 3.5 pages of a 4-page segment, overwritten whole */
	r[0] = R(12, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(13, 0, 4096, VMEM_ACCESS_R, "w");
	r[2] = R(11, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	r[3] = R(10, 0, 7 * 32768, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "ws");
	drv_op(d, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", NULL, 4, r);
	/* a kernel whose scanned argument runs to the segment's end */
	r[0] = R(10, 7 * 32768, 32768, VMEM_ACCESS_RW, "arg0");
	r[1] = R(11, 0, 4096, VMEM_ACCESS_RW, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", NULL, 2, r);
	r[0] = R(11, 0, 4, VMEM_ACCESS_R, "src");
	r[1] = R(0, 0x2000, 4, VMEM_ACCESS_W, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	drv_sync(d);
}

/* A driver under `all` with 64 KiB pages: a10 a 4-page segment, a11-a13
 * small tensors (one slab). */
static void paged_init(drv_t *d)
{
	policy_config_t c = cfg();

	c.offload = POLICY_OFFLOAD_ALL;
	c.page_size = 65536;
	c.small_threshold = 65536;
	drv_init(d, &c);
	policy_allocated(d->p, 10, 4 * 65536);
	for (uint64_t a = 11; a <= 13; a++)
		policy_allocated(d->p, a, 4096);
}

static void test_lookahead_brings_the_page_a_whole_write_covers_in_part(void **state)
{
	drv_t d;
	int tail = 0, other = 0;

	(void)state;
	paged_init(&d);
	for (int i = 0; i < 5; i++)
		one_workspace_iteration(&d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	const policy_plan_t *pl = policy_plan(d.p);
	const policy_graph_t *g = &pl->g;

	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		const policy_use_t *u;

		if (!s->next || s->use < 0)
			continue;
		u = &g->uses[s->use];
		if (u->alloc_id != 10 || g->ops[s->until_op].kind != VMEM_OP_CONV_FWD)
			continue;
		/* [196608, 229376): the part of the workspace in its last page */
		if (u->offset + s->delta == 3 * 65536 && s->bytes == 32768)
			tail++;
		else
			other++;
	}
	if (tail != 1 || other != 0)
		fail_msg("expected one lookahead for the convolution of its workspace's last page, "
			 "[196608, +32768) of a10, and none of the pages it covers whole, got %d "
			 "and %d others", tail, other);
	/* y (a11), 4096 bytes under the small threshold, which the
	 * convolution writes whole: its page is a slab it shares with other
	 * small allocations (a12, a13), whose bytes come back with it */
	int small = 0;

	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];

		if (s->next && s->use >= 0 && g->ops[s->until_op].kind == VMEM_OP_CONV_FWD &&
		    g->uses[s->use].alloc_id == 11 && s->bytes == 4096)
			small++;
	}
	if (small != 1)
		fail_msg("expected one lookahead of a11 (small, written whole by the convolution) "
			 "before it, got %d", small);
	/* and the batch's page, before the iteration's last call */
	tail = 0;
	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];

		if (s->next && s->use >= 0 && s->until_op == 0 && g->uses[s->use].alloc_id == 10 &&
		    s->op == g->lanes[0].ops[g->lanes[0].nops - 1] &&
		    g->uses[s->use].offset + s->delta == 233472 && s->bytes == 4096)
			tail++;
	}
	if (tail != 1)
		fail_msg("expected one lookahead of [233472, +4096) of a10 for the lane's first call "
			 "(#0), before its last (#%d), got %d", g->lanes[0].ops[g->lanes[0].nops - 1],
			 tail);
	drv_free(&d);
}

/* A scanned kernel argument over a caching segment whose blocks move
 * between iterations (an UNSTABLE allocation): the argument's head is a
 * tensor a call of this iteration wrote, its tail the segment's rest,
 * written the iteration before at a place that changes.  The lookahead
 * before the kernel brings the head through the writer's use and the tail
 * from there to where the segment ended (a to-end step): the iteration
 * before is no guide on such an allocation, and without it the kernel
 * faulted its tail pages in at every planned iteration (random:1720388722
 * in the caching style at 1/2: 19 misses a run under all and conv). */
static void one_tail_iteration(drv_t *d, int it)
{
	vmem_range_t r[3];

	r[0] = R(0, 0x1000, 4096, VMEM_ACCESS_R, "src");
	r[1] = R(11, 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	/* the head: the segment's first page, written whole */
	r[0] = R(11, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(13, 0, 4096, VMEM_ACCESS_R, "w");
	r[2] = R(10, 0, 65536, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", NULL, 3, r);
	/* the kernel: from the head's pointer to the segment's end */
	r[0] = R(10, 0, 4 * 65536, VMEM_ACCESS_RW, "arg0");
	r[1] = R(12, 0, 4096, VMEM_ACCESS_RW, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", NULL, 2, r);
	/* a block of the segment's rest, where the allocator puts it this time */
	r[0] = R(12, 0, 4096, VMEM_ACCESS_R, "x");
	r[1] = R(10, (uint64_t)(2 + it % 2) * 65536, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "y");
	drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	r[0] = R(12, 0, 4, VMEM_ACCESS_R, "src");
	r[1] = R(0, 0x2000, 4, VMEM_ACCESS_W, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	drv_sync(d);
}

static void test_lookahead_brings_a_scanned_tail_to_the_segments_end(void **state)
{
	int it = 0, head = 0, tail = 0, other = 0;
	uint64_t seq, got = 0;
	drv_t d;

	(void)state;
	paged_init(&d);
	for (; it < 6; it++)
		one_tail_iteration(&d, it);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	const policy_plan_t *pl = policy_plan(d.p);
	const policy_graph_t *g = &pl->g;

	assert_int_equal(policy_graph_alloc(g, 10)->cls, POLICY_ALLOC_UNSTABLE);
	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		const policy_use_t *u = &g->uses[s->use];

		if (!s->next || u->alloc_id != 10 || g->ops[s->until_op].kind != VMEM_OP_LAUNCH)
			continue;
		if (!s->to_end && u->offset + s->delta == 0 && s->bytes == 65536)
			head++;
		else if (s->to_end && u->offset + s->delta == 65536 && s->bytes == 3 * 65536)
			tail++;
		else
			other++;
	}
	if (head != 1 || tail != 1 || other != 0)
		fail_msg("expected the lookahead before the kernel to bring a10's head [0, +65536) "
			 "and its tail [65536, +196608) to the end, got %d head, %d tail, %d other "
			 "steps", head, tail, other);
	/* a planned iteration asks for the whole argument */
	seq = d.seq;
	one_tail_iteration(&d, it);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq >= seq && d.acts[i].kind == POLICY_ACT_PREFETCH && a->next &&
		    a->alloc_id == 10 && g->ops[a->until_op].kind == VMEM_OP_LAUNCH)
			got |= a->offset == 65536 && a->bytes == 3 * 65536 ? 2 : a->offset == 0 &&
			       a->bytes == 65536 ? 1 : 4;
	}
	if (got != 3)
		fail_msg("expected lookahead PREFETCHes of a10 [0, +65536) and [65536, +196608) in "
			 "a planned iteration, got mask %llu (1 head, 2 tail, 4 another range)",
			 (unsigned long long)got);
	drv_free(&d);
}

static void test_debug_log_prints_every_pass_of_a_new_plan(void **state)
{
	policy_config_t c = cfg();
	static sink_t s;
	policy_stats_t st;
	drv_t d;

	(void)state;
	s.len = 0;
	c.log = sink;
	c.log_ctx = &s;
	drv_init(&d, &c);
	for (int i = 0; i < 3; i++)
		keep_iter(&d, 0);
	if (!strstr(s.text, "plan 1: period 4 ops") || !strstr(s.text, "graph: 4 ops") ||
	    !strstr(s.text, "liveness: ") || !strstr(s.text, "offload: 0 tensors") ||
	    !strstr(s.text, "evict: ") ||
	    !strstr(s.text, "step #3 softmax_fwd (cudnnSoftmaxForward) after: DEAD use 6 (x a30)"))
		fail_msg("log:\n%s", s.text);
	s.len = 0;
	policy_get_stats(d.p, &st);
	policy_stats_print(&st, sink, &s);
	if (!strstr(s.text, "policy: planned") || !strstr(s.text, "made      1"))
		fail_msg("stats:\n%s", s.text);
	drv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dead_actions_follow_current_allocations),
		cmocka_unit_test(test_lanes_tolerate_another_interleaving),
		cmocka_unit_test(test_deviation_suspends_and_revives_dead_ranges),
		cmocka_unit_test(test_read_of_dead_range_names_last_reader_and_reader),
		cmocka_unit_test(test_seq_known_only_after_the_call),
		cmocka_unit_test(test_scanned_argument_read_is_not_certain),
		cmocka_unit_test(test_moved_stable_range_is_not_declared_dead),
		cmocka_unit_test(test_liveness_switches),
		cmocka_unit_test(test_misses_counted_by_state),
		cmocka_unit_test(test_algo_steps_before_each_convolution),
		cmocka_unit_test(test_lookahead_prefetches_the_next_calls_reads),
		cmocka_unit_test(test_plan_made_runs_the_confirming_calls_lookahead),
		cmocka_unit_test(test_lookahead_brings_a_scanned_argument_whole),
		cmocka_unit_test(test_lookahead_after_an_unfinished_iteration),
		cmocka_unit_test(test_lookahead_covers_a_chunk_across_earlier_chunks),
		cmocka_unit_test(test_lookahead_brings_the_page_a_whole_write_covers_in_part),
		cmocka_unit_test(test_lookahead_brings_a_scanned_tail_to_the_segments_end),
		cmocka_unit_test(test_debug_log_prints_every_pass_of_a_new_plan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
