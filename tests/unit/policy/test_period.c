/* tests/unit/policy/test_period.c - iteration detection (policy/period.c)
 * on synthetic training streams: warm-up, the three allocation styles,
 * noise, identical blocks, double buffering, a second thread, an eval
 * pass and a batch-size change. */
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

/* Seq of the first NOTE of kind `note`, or 0. */
static uint64_t note_seq(const drv_t *d, int note, int nth)
{
	for (int i = 0; i < d->nacts; i++)
		if (d->acts[i].kind == POLICY_ACT_NOTE && d->acts[i].a.note == note && nth-- == 0)
			return d->acts[i].seq;
	return 0;
}

typedef struct {
	uint64_t first, last;   /* seqs of an iteration */
} span_t;

/* Trains `iters` iterations, recording each one's seq span. */
static void train(net_t *n, drv_t *d, int iters, span_t *spans)
{
	for (int i = 0; i < iters; i++) {
		uint64_t s = d->seq;

		net_train(n, d);
		if (spans) {
			spans[i].first = s;
			spans[i].last = d->seq - 1;
		}
	}
}

static int iteration_of(const span_t *s, int n, uint64_t seq)
{
	for (int i = 0; i < n; i++)
		if (seq >= s[i].first && seq <= s[i].last)
			return i;
	return -1;
}

static void check_period(const drv_t *d, const net_cfg_t *nc)
{
	const policy_plan_t *pl = policy_plan(d->p);

	assert_non_null(pl);
	if ((int)pl->period != net_period(nc))
		fail_msg("period: expected %d significant calls, got %u", net_period(nc), pl->period);
}

static void test_period_found_on_third_repetition(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 8, .style = NET_NETWORK };
	policy_config_t c = cfg();
	span_t sp[5];
	drv_t d;
	net_t n;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 5, sp);
	check_period(&d, &nc);
	/* seen, seen again, confirmed on the next occurrence: the third */
	if (iteration_of(sp, 5, note_seq(&d, POLICY_NOTE_MADE, 0)) != 2)
		fail_msg("plan made in iteration %d, expected 2 (the third)",
			 iteration_of(sp, 5, note_seq(&d, POLICY_NOTE_MADE, 0)));
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_MADE), 1);
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED), 0);
	/* the iteration starts after the host sync: op 0 is the batch copy */
	assert_int_equal(policy_plan(d.p)->g.ops[0].kind, VMEM_OP_MEMCPY);
	assert_int_equal(policy_plan(d.p)->steady_seq, sp[0].first);
	net_free(&n);
	drv_free(&d);
}

static void test_period_skips_warmup(void **state)
{
	/* iteration 0: algorithm search, another workspace, optimizer state
	 * created lazily, and (caching) a segment that is later replaced */
	net_cfg_t nc = { .layers = 4, .batch = 8, .style = NET_CACHING, .warmup = true,
			 .growing = true };
	policy_config_t c = cfg();
	span_t sp[6];
	drv_t d;
	net_t n;
	int made;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 6, sp);
	check_period(&d, &nc);
	made = iteration_of(sp, 6, note_seq(&d, POLICY_NOTE_MADE, 0));
	if (made != 3)
		fail_msg("plan made in iteration %d, expected 3 (steady from 1, confirmed by 3)", made);
	/* first steady iteration: 1 */
	assert_int_equal(policy_plan(d.p)->steady_seq, sp[1].first);
	net_free(&n);
	drv_free(&d);
}

static void test_period_per_tensor_allocations_are_young(void **state)
{
	net_cfg_t nc = { .layers = 5, .batch = 4, .style = NET_PER_TENSOR };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	const policy_plan_t *pl;
	int young = 0;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 4, NULL);
	check_period(&d, &nc);
	pl = policy_plan(d.p);
	for (int a = 0; a < pl->g.nallocs; a++) {
		young += pl->g.allocs[a].cls == POLICY_ALLOC_YOUNG;
		/* weights, gradients and momenta are the same every iteration */
		if (pl->g.allocs[a].alloc_id < 10 + 3 * 5 && pl->g.allocs[a].alloc_id >= 10)
			assert_int_equal(pl->g.allocs[a].cls, POLICY_ALLOC_STABLE);
	}
	if (young < 4 * 5)
		fail_msg("expected the activations to be YOUNG allocations, got %d young", young);
	net_free(&n);
	drv_free(&d);
}

static void test_period_identical_blocks_are_not_the_iteration(void **state)
{
	/* 8 identical layers: inside one iteration the same calls repeat with
	 * period 2 (conv, act) and 5 (backward), only the weights differ */
	net_cfg_t nc = { .layers = 8, .batch = 4, .style = NET_NETWORK, .identical = true };
	policy_config_t c = cfg();
	span_t sp[4];
	drv_t d;
	net_t n;

	(void)state;
	c.min_period = 2;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 4, sp);
	check_period(&d, &nc);
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_MADE), 1);
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_ABANDONED), 0);
	net_free(&n);
	drv_free(&d);
}

/* DenseNet's backward under a per-tensor allocator, reduced: a stage of
 * identical 6-call blocks whose tensors are all fresh (YOUNG: they compare
 * equal one block apart) but for one read of the block's own weight.  One
 * soft position in six is within the tolerance, so the stage is found as
 * a period, planned, and left at the stage's end; the simulator's DenseNet
 * made and abandoned such a plan every iteration and never planned the
 * iteration (the detector started over at each).  The iteration's period
 * must keep counting through them and win. */
/* a forward longer than abandon_after stage periods; the iteration (78
 * calls) a multiple of the stage's */
enum { ST_FWD = 30, ST_BLOCKS = 8 };

static void stage_iteration(drv_t *d, uint64_t *next_id)
{
	uint64_t ids[ST_FWD + 6 * ST_BLOCKS];
	int k = 0;

	for (int i = 0; i < ST_FWD + 6 * ST_BLOCKS; i++) {
		ids[i] = (*next_id)++;
		policy_allocated(d->p, ids[i], 4096);
	}
	for (int i = 0; i < ST_FWD; i++, k++) {
		vmem_op_info_t in = { .type = VMEM_INFO_LAUNCH };
		vmem_range_t r = R(ids[k], 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "arg0");

		in.u.launch.func = 0x100 + (uintptr_t)i;
		drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 1, &r);
	}
	for (int b = 0; b < ST_BLOCKS; b++)
		for (int i = 0; i < 6; i++, k++) {
			vmem_op_info_t in = { .type = VMEM_INFO_LAUNCH };
			vmem_range_t r[2] = {
				R(ids[k], 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "arg0"),
				R(i == 3 ? 1 + (uint64_t)b : ids[k - 1], 0, 4096, VMEM_ACCESS_R, "arg1"),
			};

			in.u.launch.func = 0x200 + (uintptr_t)i;
			drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 2, r);
		}
	drv_sync(d);
	for (int i = 0; i < ST_FWD + 6 * ST_BLOCKS; i++)
		policy_freed(d->p, ids[i]);
}

static void test_period_a_stage_planned_does_not_hide_the_iteration(void **state)
{
	policy_config_t c = cfg();
	uint64_t next_id = 100;
	const policy_plan_t *pl;
	drv_t d;

	(void)state;
	drv_init(&d, &c);
	for (int b = 0; b < ST_BLOCKS; b++)
		policy_allocated(d.p, 1 + (uint64_t)b, 4096);   /* the weights */
	for (int it = 0; it < 8; it++)
		stage_iteration(&d, &next_id);
	pl = policy_plan(d.p);
	if (!pl || pl->period != ST_FWD + 6 * ST_BLOCKS)
		fail_msg("expected the iteration (%d calls) planned after 8 iterations, got %s%u "
			 "(%d plans made)", ST_FWD + 6 * ST_BLOCKS, pl ? "a period of " : "no plan ",
			 pl ? pl->period : 0, drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_MADE));
	drv_free(&d);
}

/* DenseNet's backward, as the simulator's minitrain runs it: a kernel
 * launched once per channel slice, 24 times in a row, each on a fresh
 * output and the same source.  Every period from min_period up matches
 * inside such a run (a 6-period, a 7-, an 8-), so each was planned and
 * abandoned at the loop's end, in every iteration, and the iteration's
 * misses were counted against the stage's plans. */
enum { SL_FWD = 20, SL_SLICES = 24 };

static void slice_iteration(drv_t *d, uint64_t *next_id)
{
	uint64_t ids[SL_FWD + SL_SLICES];
	int k = 0;

	for (int i = 0; i < SL_FWD; i++, k++) {
		vmem_op_info_t in = { .type = VMEM_INFO_LAUNCH };
		vmem_range_t r[2];

		ids[k] = (*next_id)++;   /* a per-tensor allocator: each output fresh */
		policy_allocated(d->p, ids[k], 4096);
		r[0] = R(ids[k], 0, 4096, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "arg0");
		r[1] = R(1 + (uint64_t)(i % 4), 0, 4096, VMEM_ACCESS_R, "arg1");

		/* six kernels in turn over four weights: the detector hears of
		 * a period of 6 (soft throughout, never confirmed here) */
		in.u.launch.func = 0x100 + (uintptr_t)(i % 6);
		drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 2, r);
	}
	for (int i = 0; i < SL_SLICES; i++, k++) {
		vmem_op_info_t in = { .type = VMEM_INFO_LAUNCH };
		vmem_range_t r[2];

		ids[k] = (*next_id)++;
		policy_allocated(d->p, ids[k], 4096);
		r[0] = R(ids[k], 0, 4096, VMEM_ACCESS_R | VMEM_ACCESS_W, "arg0");
		r[1] = R(ids[SL_FWD - 1], 0, 4096, VMEM_ACCESS_R | VMEM_ACCESS_W, "arg1");

		in.u.launch.func = 0x300;
		drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 2, r);
	}
	drv_sync(d);
	for (int i = 0; i < SL_FWD + SL_SLICES; i++)
		policy_freed(d->p, ids[i]);
}

static void test_period_a_loop_of_one_kernel_is_not_planned(void **state)
{
	policy_config_t c = cfg();
	uint64_t next_id = 100;
	const policy_plan_t *pl;
	int made, abandoned;
	drv_t d;

	(void)state;
	drv_init(&d, &c);
	for (int b = 0; b < 4; b++)
		policy_allocated(d.p, 1 + (uint64_t)b, 4096);   /* the weights */
	for (int it = 0; it < 6; it++)
		slice_iteration(&d, &next_id);
	pl = policy_plan(d.p);
	made = drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_MADE);
	abandoned = drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_ABANDONED);
	if (!pl || pl->period != SL_FWD + SL_SLICES || made != 1 || abandoned != 0)
		fail_msg("expected one plan, of the iteration (%d calls), none abandoned; got %s%u, "
			 "%d plans made, %d abandoned", SL_FWD + SL_SLICES,
			 pl ? "a period of " : "no plan ", pl ? pl->period : 0, made, abandoned);
	drv_free(&d);
}

static void test_period_tolerates_double_buffered_input(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK, .double_buffer = true };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	const policy_plan_t *pl;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 4, NULL);
	check_period(&d, &nc);
	pl = policy_plan(d.p);
	/* the two input buffers alternate: UNSTABLE, never declared dead */
	{
		const policy_alloc_t *a0 = policy_graph_alloc(&pl->g, n.in[0]);
		const policy_alloc_t *a1 = policy_graph_alloc(&pl->g, n.in[1]);

		assert_true(a0 || a1);
		assert_int_equal((a0 ? a0 : a1)->cls, POLICY_ALLOC_UNSTABLE);
	}
	for (int i = 0; i < pl->live.ndead; i++)
		assert_true(pl->live.dead[i].alloc_id != n.in[0] && pl->live.dead[i].alloc_id != n.in[1]);
	net_free(&n);
	drv_free(&d);
}

static void test_period_stray_call_delays_detection(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	span_t sp[6];
	drv_t d;
	net_t n;
	vmem_range_t r;
	vmem_op_info_t li = { .type = VMEM_INFO_LAUNCH };
	int made;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 1, sp);
	/* a stray kernel (a logging .item(), say) at the end of iteration 1 */
	sp[1].first = d.seq;
	net_train(&n, &d);
	r = R(n.loss, 0, 4, VMEM_ACCESS_R, "arg0");
	li.u.launch.func = 0xdead;
	drv_op(&d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &li, 1, &r);
	sp[1].last = d.seq - 1;
	train(&n, &d, 4, sp + 2);
	check_period(&d, &nc);
	made = iteration_of(sp, 6, note_seq(&d, POLICY_NOTE_MADE, 0));
	/* without the stray call: iteration 2; with it, the run restarts at
	 * iteration 3 (the first compared with an unshifted one) */
	if (made != 4)
		fail_msg("plan made in iteration %d, expected 4", made);
	assert_int_equal(policy_plan(d.p)->steady_seq, sp[2].first);
	net_free(&n);
	drv_free(&d);
}

static void test_period_backward_thread_lanes(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_CACHING, .bwd_thread = true };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	const policy_plan_t *pl;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 5, NULL);
	check_period(&d, &nc);
	pl = policy_plan(d.p);
	assert_int_equal(pl->g.nlanes, 2);
	/* the first backward op is the boundary */
	assert_int_equal(pl->g.ops[pl->g.boundary].kind, VMEM_OP_SOFTMAX_BWD);
	assert_int_equal(pl->g.lanes[pl->g.ops[pl->g.boundary].lane].thread, 2);
	/* two more planned iterations ran clean */
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED), 0);
	{
		policy_stats_t st;

		policy_get_stats(d.p, &st);
		assert_int_equal(st.iterations_planned, 1);   /* 3 started mid-way, 4 ran whole */
		assert_int_equal(st.state, POLICY_PLANNED);
	}
	net_free(&n);
	drv_free(&d);
}

static void test_eval_pass_suspends_then_resumes(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	policy_stats_t st;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 12; i++) {
		net_train(&n, &d);
		if (i % 4 == 3 && i < 11)   /* --eval-every 4 */
			net_eval(&n, &d);
	}
	policy_get_stats(d.p, &st);
	assert_int_equal(st.plans_made, 1);
	assert_int_equal(st.plans_abandoned, 0);
	/* each eval pass suspends the plan once; the next iteration resumes it */
	assert_int_equal(st.suspensions, 2);
	assert_int_equal(st.resumes, 2);
	assert_int_equal(st.state, POLICY_PLANNED);
	/* iterations 3..10 ran whole (11 has no successor to close it; the
	 * plan was made at the end of 2; the eval passes are not counted) */
	assert_int_equal(st.iterations_planned, 8);
	net_free(&n);
	drv_free(&d);
}

static void test_a_kernel_decided_again_replans_without_waiting(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	policy_stats_t st;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 5, NULL);
	/* from iteration 5 on one backward convolution runs another
	 * algorithm: every iteration leaves the plan at that call.  Three
	 * iterations of the new pattern confirm it on the very call that
	 * leaves the plan: the new plan is made there, in iteration 7, not
	 * after four failed resumes */
	n.redecided_layer = 2;
	train(&n, &d, 3, NULL);
	policy_get_stats(d.p, &st);
	if (st.plans_made != 2 || st.plans_abandoned != 1)
		fail_msg("expected the new pattern planned within 3 iterations of the change (2 plans "
			 "made, 1 abandoned), got %llu made, %llu abandoned, %llu suspensions, %llu "
			 "resumes", (unsigned long long)st.plans_made,
			 (unsigned long long)st.plans_abandoned, (unsigned long long)st.suspensions,
			 (unsigned long long)st.resumes);
	assert_int_equal(st.state, POLICY_PLANNED);
	train(&n, &d, 2, NULL);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.plans_made, 2);
	assert_int_equal(st.state, POLICY_PLANNED);
	net_free(&n);
	drv_free(&d);
}

/* vmem's own solver decides a convolution's configuration again when the
 * room a plan leaves changes (dyn keeping another mode: VGG-16 (256) in
 * the caching style at 8.7 GiB on the h100 model): the call then runs in
 * micro-batches on a smaller workspace of its own, and reports that
 * range.  It is the same call - the application's algorithm and
 * workspace size are in its record - and the plan goes on; it used to be
 * suspended there every iteration (701 -> 1102 ms an iteration). */
static void test_a_workspace_vmem_sized_again_stays_in_the_plan(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n;
	policy_stats_t st;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 5, NULL);
	n.ran_small_layer = 2;
	train(&n, &d, 3, NULL);
	policy_get_stats(d.p, &st);
	if (st.plans_made != 1 || st.suspensions != 0 || st.state != POLICY_PLANNED)
		fail_msg("expected the plan to go on over a workspace vmem sized again (1 plan, no "
			 "suspension), got %llu made, %llu suspensions, state %d",
			 (unsigned long long)st.plans_made, (unsigned long long)st.suspensions,
			 (int)st.state);
	net_free(&n);
	drv_free(&d);
}

static void test_batch_change_replans(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c = cfg();
	drv_t d;
	net_t n, n2;
	policy_stats_t st;

	(void)state;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(&n, &d, 5, NULL);
	/* --batch-change: same layers, a new batch size, new activation buffers */
	nc.batch = 6;
	net_init(&n2, &d, &nc);
	train(&n2, &d, 5, NULL);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.plans_made, 2);
	assert_int_equal(st.plans_abandoned, 1);
	assert_int_equal(st.suspensions, 1);
	assert_int_equal(st.resumes, 0);
	assert_int_equal(policy_plan(d.p)->g.ops[1].info.u.conv.n, 6);
	net_free(&n);
	net_free(&n2);
	drv_free(&d);
}

static void test_detector_alone_reports_window_and_rotation(void **state)
{
	/* the pure detector, fed a hand-made stream: A B C D (sync) repeated */
	policy_history_t h;
	policy_period_t det;
	policy_period_config_t pc = { .min_period = 2, .max_period = 64, .reps = 3,
				      .max_candidates = 8, .soft_permille = 250 };
	policy_period_found_t f;
	int hit = -1;
	static const char *const api[] = { "a", "b", "c", "d" };

	(void)state;
	assert_int_equal(policy_history_init(&h, 256, 1024), 0);
	assert_int_equal(policy_period_init(&det, &pc), 0);
	/* warm-up noise first: 3 calls that never repeat */
	for (int i = 0; i < 3 + 4 * 4 && hit < 0; i++) {
		vmem_event_t ev = { 0 };
		vmem_range_t r = R(5, 0, 64 + (i < 3 ? 1000 + i : 0), VMEM_ACCESS_R, "x");
		uint64_t pos;

		ev.kind = VMEM_OP_LAUNCH;
		ev.api = i < 3 ? "warm" : api[(i - 3) % 4];
		ev.seq = (uint64_t)i + 1;
		ev.nranges = 1;
		ev.ranges = &r;
		pos = policy_history_push(&h, &ev, (i >= 3 && (i - 3) % 4 == 2) ? POLICY_HEV_SYNC_BEFORE : 0,
					  5);
		if (policy_period_step(&det, &h, pos, false, &f))
			hit = i;
	}
	/* steady from position 3; run(4) reaches 8 at position 3 + 4 + 7 = 14 */
	assert_int_equal(hit, 14);
	assert_int_equal(f.period, 4);
	assert_int_equal(f.first, 11);
	/* the steady region starts at 3; its first iteration at the first
	 * "c" (which follows the sync) in it, 5 */
	assert_int_equal(f.steady_start, 5);
	/* the window starts at 11 ("a"); "c" follows the sync: rot 2 */
	assert_int_equal(f.rot, 2);
	policy_period_free(&det);
	policy_history_free(&h);
}

/* One iteration of a framework's loop whose kernels are scanned the way
 * libvmem scans them on a real GPU: every argument word inside the pool's
 * addresses is a range.  PyTorch's reduce_kernel (H200, VGG-16) carries
 * packed 32-bit integers that fall there without naming an allocation
 * (alloc 0, no extent), and a scratch pointer from the caching allocator
 * that is inside the pool in one iteration and not in the next.  The
 * iteration is the same program every time: the plan is made on the third
 * repetition and never suspended. */
static void scanned_iteration(drv_t *d, int it)
{
	vmem_op_info_t conv = { .type = VMEM_INFO_CONV };
	vmem_op_info_t red = { .type = VMEM_INFO_LAUNCH }, sgd = { .type = VMEM_INFO_LAUNCH };
	vmem_op_info_t cp = { .type = VMEM_INFO_COPY };
	vmem_range_t r[8];
	int n = 0;

	conv.u.conv.n = 8, conv.u.conv.c = 16, conv.u.conv.h = conv.u.conv.w = 32;
	conv.u.conv.k = 16, conv.u.conv.r = conv.u.conv.s = 3, conv.u.conv.groups = 1;
	conv.u.conv.dir = VMEM_CONV_DIR_FWD;
	r[0] = RG(1, 0, 1 << 20, ACC_R, "x");
	r[1] = RG(2, 0, 1 << 16, ACC_R, "w");
	r[2] = RG(3, 0, 1 << 20, ACC_WW, "y");
	drv_op(d, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", &conv, 3, r);
	red.u.launch.func = 0x61920763d8c;
	red.u.launch.grid[0] = 512, red.u.launch.block[0] = 32;
	/* the stray words: how many there are, and their values, vary */
	for (int k = 0; k < 2 + it % 3; k++) {
		r[n] = RG(0, 0, 0, ACC_RW, "arg0");
		r[n++].ptr = 0x20000000000ull + ((uint64_t)(it + k) << 4);
	}
	r[n++] = RG(3, 0, 0, ACC_RW, "arg0");
	if (it % 2)
		r[n++] = RG(4, 0x100, 0, ACC_RW, "arg0");   /* scratch, this time in the pool */
	r[n++] = RG(5, 0, 0, ACC_RW, "arg0");
	drv_op(d, VMEM_OP_LAUNCH, "__cudaLaunchKernel", &red, n, r);
	sgd.u.launch.func = 0x5a9329e47098;
	sgd.u.launch.grid[0] = 64, sgd.u.launch.block[0] = 128;
	r[0] = RG(2, 0, 0, ACC_RW, "arg0");
	r[1] = RG(5, 0, 0, ACC_RW, "arg0");
	drv_op(d, VMEM_OP_LAUNCH, "__cudaLaunchKernel", &sgd, 2, r);
	cp.u.copy.bytes = 4, cp.u.copy.kind = 2;
	r[0] = RG(5, 0, 4, ACC_R, "src");
	r[1] = RG(0, 0x7f0000000000, 4, ACC_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", &cp, 2, r);
	drv_sync(d);
}

static void test_scanned_words_that_vary_do_not_leave_the_plan(void **state)
{
	policy_config_t c = cfg();
	span_t sp[8];
	drv_t d;
	int made;

	(void)state;
	drv_init(&d, &c);
	for (int it = 0; it < 8; it++) {
		sp[it].first = d.seq;
		scanned_iteration(&d, it);
		sp[it].last = d.seq - 1;
	}
	made = iteration_of(sp, 8, note_seq(&d, POLICY_NOTE_MADE, 0));
	if (made < 0 || made > 3)
		fail_msg("plan made in iteration %d, expected by iteration 3 (the third repetition)", made);
	if (policy_plan(d.p)->period != 4)
		fail_msg("period: expected 4 significant calls, got %u", policy_plan(d.p)->period);
	if (drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED) != 0)
		fail_msg("plan suspended %d times (first at seq %llu), expected never",
			 drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_SUSPENDED),
			 (unsigned long long)note_seq(&d, POLICY_NOTE_SUSPENDED, 0));
	drv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_period_found_on_third_repetition),
		cmocka_unit_test(test_period_skips_warmup),
		cmocka_unit_test(test_period_per_tensor_allocations_are_young),
		cmocka_unit_test(test_period_identical_blocks_are_not_the_iteration),
		cmocka_unit_test(test_period_a_stage_planned_does_not_hide_the_iteration),
		cmocka_unit_test(test_period_a_loop_of_one_kernel_is_not_planned),
		cmocka_unit_test(test_period_tolerates_double_buffered_input),
		cmocka_unit_test(test_period_stray_call_delays_detection),
		cmocka_unit_test(test_period_backward_thread_lanes),
		cmocka_unit_test(test_eval_pass_suspends_then_resumes),
		cmocka_unit_test(test_a_workspace_vmem_sized_again_stays_in_the_plan),
		cmocka_unit_test(test_batch_change_replans),
		cmocka_unit_test(test_a_kernel_decided_again_replans_without_waiting),
		cmocka_unit_test(test_detector_alone_reports_window_and_rotation),
		cmocka_unit_test(test_scanned_words_that_vary_do_not_leave_the_plan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
