/* tests/unit/policy/test_trial.c - vDNN-dyn's measured passes
 * (policy/trial.c) and their life in the policy: each candidate mode runs
 * whole planned iterations, a fake device reports their times through
 * policy_iteration_time, the fastest mode is kept and its offloads are
 * what later iterations do; an iteration cut short measures nothing; no
 * times at all end the passes with the computed choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "policy/program.h"
#include "synth.h"

static const uint8_t three[3] = { POLICY_OFFLOAD_CONV, POLICY_OFFLOAD_NONE, POLICY_OFFLOAD_ALL };

static void begin_is(policy_trial_t *t, uint64_t iter, bool whole, int want)
{
	int got = policy_trial_begin(t, iter, whole);

	if (got != want)
		fail_msg("iteration %llu (the one before %s): expected candidate %d (%s), got %d",
			 (unsigned long long)iter, whole ? "whole" : "cut short", want,
			 policy_offload_name((policy_offload_mode_t)t->mode[want]), got);
}

/* ---- trial.c alone ---- */

static void test_each_candidate_runs_then_the_fastest_is_kept(void **state)
{
	policy_trial_t t;
	char line[256];

	(void)state;
	policy_trial_init(&t, three, NULL, 3, 1);
	begin_is(&t, 1, false, 0);              /* the computed choice first */
	begin_is(&t, 2, true, 1);
	assert_int_equal(policy_trial_measured(&t, 1, 300000000), 1);
	begin_is(&t, 3, true, 2);
	assert_int_equal(policy_trial_measured(&t, 2, 200000000), 1);
	/* every pass run, the last time not in: the best so far runs */
	begin_is(&t, 4, true, 1);
	assert_int_equal(t.state, POLICY_TRIAL_RUNNING);
	assert_int_equal(policy_trial_measured(&t, 3, 250000000), 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(t.kept, 1);
	begin_is(&t, 5, true, 1);
	begin_is(&t, 6, false, 1);
	/* a time for an iteration that was no pass counts for nothing */
	assert_int_equal(policy_trial_measured(&t, 4, 1), 0);
	assert_int_equal(t.kept, 1);
	policy_trial_format(&t, line, sizeof(line));
	assert_string_equal(line, "dyn: measured conv 300.0 ms, none 200.0 ms, all 250.0 ms an "
				  "iteration: kept none");
}

/* A pass within POLICY_TRIAL_SLACK_PERMILLE of the fastest that missed
 * fewer pages is kept instead; one slower than that is not. */
static void test_a_pass_as_fast_that_misses_less_is_kept(void **state)
{
	static const uint64_t second[] = { 101000000, 110000000 };   /* 1 % and 10 % slower */
	static const int want[] = { 1, 0 };

	(void)state;
	for (int i = 0; i < 2; i++) {
		policy_trial_t t;
		char line[256];

		policy_trial_init(&t, three, NULL, 2, 1);
		begin_is(&t, 1, false, 0);
		begin_is(&t, 2, true, 1);
		policy_trial_misses(&t, 1, 40);
		assert_int_equal(policy_trial_measured(&t, 1, 100000000), 1);
		begin_is(&t, 3, true, 0);   /* the best so far while the last time comes */
		policy_trial_misses(&t, 2, 0);
		assert_int_equal(policy_trial_measured(&t, 2, second[i]), 1);
		policy_trial_format(&t, line, sizeof(line));
		if (t.state != POLICY_TRIAL_MEASURED || t.kept != want[i])
			fail_msg("the second pass %.0f %% slower without a miss: expected candidate %d "
				 "kept, got %d (%s)", (double)(second[i] - 100000000) / 1e6, want[i],
				 t.kept, line);
		if (!strstr(line, "conv 100.0 ms (40 pages missed), none "))
			fail_msg("expected the misses in the stats line, got '%s'", line);
	}
}

static void test_an_iteration_cut_short_is_run_again(void **state)
{
	policy_trial_t t;

	(void)state;
	policy_trial_init(&t, three, NULL, 3, 1);
	begin_is(&t, 1, false, 0);
	/* iteration 1 was suspended (an evaluation pass): no time will come */
	begin_is(&t, 2, false, 0);
	begin_is(&t, 3, true, 1);
	assert_int_equal(policy_trial_measured(&t, 1, 5), 0);   /* not a whole pass */
	assert_int_equal(policy_trial_measured(&t, 2, 7), 1);
	assert_int_equal(t.runs[0], 1);
	assert_int_equal(t.ns[0], 7);
}

static void test_no_times_keep_the_computed_choice(void **state)
{
	policy_trial_t t;
	char line[256];
	uint64_t i;

	(void)state;
	policy_trial_init(&t, three, NULL, 3, 1);
	for (i = 1; i <= t.max_iters; i++)
		policy_trial_begin(&t, i, true);
	assert_int_equal(t.state, POLICY_TRIAL_RUNNING);
	begin_is(&t, i, true, 0);
	assert_int_equal(t.state, POLICY_TRIAL_GAVE_UP);
	policy_trial_format(&t, line, sizeof(line));
	assert_string_equal(line, "dyn: measured conv -, none -, all - an iteration: kept conv "
				  "(not every pass was timed)");
}

static void test_times_lost_are_asked_again(void **state)
{
	policy_trial_t t;

	(void)state;
	policy_trial_init(&t, three, NULL, 2, 1);
	begin_is(&t, 1, false, 0);
	begin_is(&t, 2, true, 1);
	begin_is(&t, 3, true, 1);   /* both pending, none measured: the one running stays */
	begin_is(&t, 4, true, 0);   /* iteration 1's time is 3 late: lost, run again */
	assert_int_equal(policy_trial_measured(&t, 4, 10), 1);
	begin_is(&t, 5, true, 1);   /* iteration 2's time lost too */
	assert_int_equal(policy_trial_measured(&t, 5, 20), 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(t.kept, 0);
}

static void test_several_runs_keep_each_candidates_fastest(void **state)
{
	policy_trial_t t;
	uint64_t ns[] = { 50, 40, 10, 90 };   /* conv, conv, none, none */

	(void)state;
	policy_trial_init(&t, three, NULL, 2, 2);
	/* each time comes in the iteration after the one it measured */
	for (int i = 0; i < 4; i++) {
		begin_is(&t, (uint64_t)i + 1, i > 0, i < 2 ? 0 : 1);
		if (i > 0)
			assert_int_equal(policy_trial_measured(&t, (uint64_t)i, ns[i - 1]), 1);
	}
	assert_int_equal(policy_trial_measured(&t, 4, ns[3]), 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(t.ns[0], 40);
	assert_int_equal(t.ns[1], 10);
	assert_int_equal(t.kept, 1);
}

static void test_one_candidate_is_no_trial(void **state)
{
	policy_trial_t t;

	(void)state;
	policy_trial_init(&t, three, NULL, 1, 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	begin_is(&t, 1, false, 0);
}

/* A candidate whose convolutions alone (its floor) take longer than a
 * pass already measured cannot win: it is not run.  The GPU's case: the
 * memory-optimal algorithms 1.5 s an iteration, the fastest pass 0.26 s. */
static void test_a_pass_that_cannot_win_is_not_run(void **state)
{
	static const uint8_t modes[4] = { POLICY_OFFLOAD_NONE, POLICY_OFFLOAD_CONV,
					  POLICY_OFFLOAD_NONE, POLICY_OFFLOAD_CONV };
	static const uint8_t least[4] = { 0, 0, 1, 1 };
	policy_trial_t t;
	char line[320];

	(void)state;
	policy_trial_init(&t, modes, least, 4, 1);
	policy_trial_floor(&t, false, 50000000);
	policy_trial_floor(&t, true, 500000000);
	begin_is(&t, 1, false, 0);
	begin_is(&t, 2, true, 1);
	assert_int_equal(policy_trial_measured(&t, 1, 200000000), 1);
	/* 500 ms of least-workspace convolutions against a 200 ms pass: both
	 * "(m)" candidates out; the best so far runs while conv's time comes */
	begin_is(&t, 3, true, 0);
	if (!t.out[2] || !t.out[3])
		fail_msg("expected none(m) and conv(m) ruled out, got out %d %d", t.out[2], t.out[3]);
	assert_int_equal(t.state, POLICY_TRIAL_RUNNING);
	assert_int_equal(policy_trial_measured(&t, 2, 150000000), 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(t.kept, 1);
	begin_is(&t, 4, true, 1);
	policy_trial_format(&t, line, sizeof(line));
	assert_string_equal(line, "dyn: measured none 200.0 ms, conv 150.0 ms, none(m) not run (its "
				  "convolutions alone 500.0 ms), conv(m) not run (its convolutions "
				  "alone 500.0 ms) an iteration: kept conv");

	/* a floor within POLICY_TRIAL_FLOOR_PERMILLE of the best rules nothing
	 * out (200 ms less 10 % is below the 190 ms measured), nor an unknown
	 * one */
	for (int i = 0; i < 2; i++) {
		policy_trial_init(&t, modes, least, 4, 1);
		policy_trial_floor(&t, true, i ? 0 : 200000000);
		begin_is(&t, 1, false, 0);
		begin_is(&t, 2, true, 1);
		assert_int_equal(policy_trial_measured(&t, 1, 190000000), 1);
		begin_is(&t, 3, true, 2);
		assert_int_equal(policy_trial_measured(&t, 2, 190000000), 1);
		begin_is(&t, 4, true, 3);
		assert_int_equal(t.out[2] + t.out[3], 0);
	}
	/* every other pass measured when the floor comes: the state ends at
	 * the next iteration's start, the floor's candidates unrun */
	policy_trial_init(&t, modes, least, 4, 1);
	begin_is(&t, 1, false, 0);
	begin_is(&t, 2, true, 1);
	assert_int_equal(policy_trial_measured(&t, 1, 100000000), 1);
	begin_is(&t, 3, true, 2);
	assert_int_equal(policy_trial_measured(&t, 2, 120000000), 1);
	policy_trial_floor(&t, true, 400000000);
	begin_is(&t, 4, true, 0);   /* 2 is pending: only 3 is out, nothing else to run */
	assert_int_equal(t.out[3], 1);
	assert_int_equal(t.out[2], 0);
	assert_int_equal(policy_trial_measured(&t, 3, 450000000), 1);
	assert_int_equal(t.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(t.kept, 0);
}

/* ---- in the policy, with a fake device's clock ---- */

static drv_t d;
static net_t n;

/* What a whole iteration takes under each mode on the fake device, with
 * the convolutions chosen in the plan's room [0] or the least-workspace
 * ones [1]. */
static uint64_t dev_ns[4][2];
static int mark_seen;          /* d.acts scanned up to here */

static void device(uint64_t none, uint64_t conv, uint64_t all)
{
	for (int l = 0; l < 2; l++) {
		dev_ns[POLICY_OFFLOAD_NONE][l] = none;
		dev_ns[POLICY_OFFLOAD_CONV][l] = conv;
		dev_ns[POLICY_OFFLOAD_ALL][l] = all;
	}
}

static void device_least(uint64_t none, uint64_t conv, uint64_t all)
{
	dev_ns[POLICY_OFFLOAD_NONE][1] = none;
	dev_ns[POLICY_OFFLOAD_CONV][1] = conv;
	dev_ns[POLICY_OFFLOAD_ALL][1] = all;
}
static int prev_mode = -1;     /* the mode the last MARK's iteration ran */
static int prev_least;         /* and whether with the least-workspace convolutions */
static uint64_t prev_iter;
static uint32_t prev_plan;
static int passes[4];          /* iterations timed per mode */
static int least_passes;       /* of them, with the least-workspace convolutions */
static uint64_t least_misses;  /* pages an "(m)" iteration misses on the fake device */

/* The runtime's part: each MARK closes the iteration before it (when whole)
 * and the device's time for it is reported. */
static void device_reports(void)
{
	for (; mark_seen < d.nacts; mark_seen++) {
		const policy_action_t *a = &d.acts[mark_seen].a;

		if (a->kind != POLICY_ACT_MARK)
			continue;
		if (a->prev_whole && prev_mode >= 0) {
			policy_iteration_time(d.p, prev_plan, prev_iter, dev_ns[prev_mode][prev_least]);
			passes[prev_mode]++;
			least_passes += prev_least;
		}
		prev_mode = a->offload_mode;
		prev_least = a->least;
		/* the iteration this MARK began has run (train's): its misses */
		if (a->least && least_misses)
			policy_note_miss(d.p, least_misses);
		prev_iter = a->iter;
		prev_plan = a->plan_id;
	}
}

static void train(int iters)
{
	for (int i = 0; i < iters; i++) {
		net_train(&n, &d);
		device_reports();
	}
}

static bool algo_steps;
static bool dyn_least;   /* the runtime's conv hooks can run "(m)" passes */

static void start(uint64_t budget, uint32_t trials)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c;

	policy_config_default(&c);
	c.offload = POLICY_OFFLOAD_DYN;
	c.budget = budget;
	c.dyn_headroom = 0;
	c.offload_min_bytes = 1024;
	c.dyn_trials = trials;
	c.algo_steps = algo_steps;
	c.dyn_least = dyn_least;
	mark_seen = 0;
	prev_mode = -1;
	prev_least = 0;
	memset(passes, 0, sizeof(passes));
	least_passes = 0;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	train(3);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
}

static void stop(void)
{
	net_free(&n);
	drv_free(&d);
}

/* OFFLOAD actions of one more planned iteration. */
static int offloads_next_iteration(void)
{
	uint64_t seq0 = d.seq;
	int k = 0;

	train(1);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq0 && d.acts[i].a.kind == POLICY_ACT_OFFLOAD)
			k++;
	return k;
}

/* The budget just under none's peak: dyn computes conv. */
static uint64_t conv_budget(void)
{
	uint64_t b;

	start(UINT64_C(1) << 40, 0);
	b = policy_plan(d.p)->dyn.peak_none - 1;
	stop();
	return b;
}

static void test_the_fastest_mode_measured_is_kept(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;
	char line[256];
	int kept = 0;

	(void)state;
	device(100000000, 300000000, 200000000);
	start(b, 1);
	assert_int_equal(policy_plan(d.p)->offload, POLICY_OFFLOAD_CONV);
	train(6);
	policy_get_stats(d.p, &st);
	if (st.trial.state != POLICY_TRIAL_MEASURED || st.offload_mode != POLICY_OFFLOAD_NONE) {
		policy_trial_format(&st.trial, line, sizeof(line));
		fail_msg("expected none kept after its pass measured fastest, got mode %s (%s)",
			 policy_offload_name(st.offload_mode), line);
	}
	/* each mode ran one whole timed pass */
	assert_true(passes[POLICY_OFFLOAD_CONV] >= 1);
	assert_true(passes[POLICY_OFFLOAD_ALL] >= 1);
	assert_int_equal(st.trial.n, 3);
	assert_int_equal(st.trial.mode[0], POLICY_OFFLOAD_CONV);
	/* the kept mode is what the next iterations do: no offload at all */
	assert_int_equal(offloads_next_iteration(), 0);
	assert_int_equal(offloads_next_iteration(), 0);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].a.kind == POLICY_ACT_NOTE && d.acts[i].a.note == POLICY_NOTE_KEPT) {
			kept++;
			assert_int_equal(d.acts[i].a.offload_mode, POLICY_OFFLOAD_NONE);
			assert_int_equal(d.acts[i].a.trial.ns[1], 100000000);
		}
	assert_int_equal(kept, 1);
	assert_true(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_TRIAL) >= 3);
	/* the stats: the iterations timed and the passes */
	policy_get_stats(d.p, &st);
	assert_true(st.iters_timed >= 5);
	assert_int_equal(st.iter_best_ns, 100000000);
	policy_trial_format(&st.trial, line, sizeof(line));
	assert_string_equal(line, "dyn: measured conv 300.0 ms, none 100.0 ms, all 200.0 ms an "
				  "iteration: kept none");
	stop();
}

/* With cfg.dyn_least each mode runs again with the least-workspace
 * convolutions ("(m)"): MARK and NOTE actions say so from the iteration it
 * begins, and an "(m)" pass measured fastest is kept, for the conv hooks
 * to run from then on. */
static void test_least_workspace_passes_are_timed_and_kept(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;
	char line[512];
	int kept = 0, trial_least = 0;

	(void)state;
	device(300000000, 200000000, 250000000);
	device_least(350000000, 120000000, 260000000);
	dyn_least = true;
	start(b, 1);
	dyn_least = false;
	train(9);
	policy_get_stats(d.p, &st);
	policy_trial_format(&st.trial, line, sizeof(line));
	if (st.trial.n != 6 || st.trial.state != POLICY_TRIAL_MEASURED ||
	    st.offload_mode != POLICY_OFFLOAD_CONV || !st.trial.least[st.trial.kept])
		fail_msg("expected 6 passes measured and conv(m) kept, got %d (state %d, mode %s): %s",
			 st.trial.n, st.trial.state, policy_offload_name(st.offload_mode), line);
	assert_string_equal(line, "dyn: measured conv 200.0 ms, none 300.0 ms, all 250.0 ms, "
				  "conv(m) 120.0 ms, none(m) 350.0 ms, all(m) 260.0 ms an "
				  "iteration: kept conv(m)");
	assert_true(least_passes >= 3);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (a->kind != POLICY_ACT_NOTE)
			continue;
		if (a->note == POLICY_NOTE_KEPT) {
			kept++;
			assert_int_equal(a->least, 1);
			assert_int_equal(a->offload_mode, POLICY_OFFLOAD_CONV);
		} else if (a->note == POLICY_NOTE_TRIAL) {
			trial_least += a->least;
		} else if (a->note == POLICY_NOTE_MADE) {
			assert_int_equal(a->least, 0);   /* a new plan starts in the room */
		}
	}
	assert_int_equal(kept, 1);
	/* the three "(m)" passes, and the wait for the last time runs the
	 * fastest so far (conv(m)) */
	if (trial_least < 3)
		fail_msg("expected at least 3 TRIAL notes with least set, got %d", trial_least);
	/* the iterations after the decision run it: every MARK says least */
	uint64_t seq0 = d.seq;
	train(2);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq0 && d.acts[i].a.kind == POLICY_ACT_MARK)
			assert_int_equal(d.acts[i].a.least, 1);
	assert_int_equal(offloads_next_iteration(), 4);
	stop();
}

/* The passes' misses come from the runtime (policy_note_miss): an "(m)"
 * pass 1 % faster that misses pages loses to the pass the plan covers. */
static void test_a_faster_pass_that_misses_is_not_kept(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;
	char line[512];

	(void)state;
	device(300000000, 200000000, 250000000);
	device_least(300000000, 198000000, 250000000);
	dyn_least = true;
	least_misses = 7;
	start(b, 1);
	dyn_least = false;
	train(9);
	least_misses = 0;
	policy_get_stats(d.p, &st);
	policy_trial_format(&st.trial, line, sizeof(line));
	if (st.trial.state != POLICY_TRIAL_MEASURED || st.offload_mode != POLICY_OFFLOAD_CONV ||
	    st.trial.least[st.trial.kept])
		fail_msg("expected conv kept over conv(m) (1 %% faster, 7 pages missed), got %s", line);
	if (!strstr(line, "conv(m) 198.0 ms (7 pages missed)"))
		fail_msg("expected conv(m)'s misses in the stats line, got '%s'", line);
	stop();
}

static void test_the_computed_choice_stays_when_it_is_fastest(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;

	(void)state;
	device(500000000, 100000000, 200000000);
	start(b, 1);
	train(6);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.trial.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_CONV);
	/* the batch and x1..x3: the inputs of the 4 forward convolutions */
	assert_int_equal(offloads_next_iteration(), 4);
	stop();
}

static void test_no_trials_when_switched_off(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;

	(void)state;
	device(1, 100, 100);
	start(b, 0);
	train(6);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.trial.n, 0);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_CONV);
	assert_int_equal(drv_count(&d, POLICY_ACT_NOTE, POLICY_NOTE_TRIAL), 0);
	/* iterations are still timed */
	assert_true(st.iters_timed >= 5);
	assert_int_equal(offloads_next_iteration(), 4);
	stop();
}

/* A static policy has nothing to try. */
static void test_static_modes_have_no_trials(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c;
	policy_stats_t st;

	(void)state;
	policy_config_default(&c);
	c.offload = POLICY_OFFLOAD_ALL;
	c.budget = 1000;
	c.offload_min_bytes = 1024;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 8; i++)
		net_train(&n, &d);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.trial.n, 0);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_ALL);
	assert_true(drv_count(&d, POLICY_ACT_MARK, -1) >= 4);
	stop();
}

/* An evaluation pass between training iterations suspends the plan: the
 * pass it cut short is run again, and the decision is the same. */
static void test_an_eval_pass_does_not_decide(void **state)
{
	uint64_t b = conv_budget();
	policy_stats_t st;

	(void)state;
	device(300000000, 200000000, 100000000);
	start(b, 1);
	for (int i = 0; i < 12; i++) {
		if (i % 2 == 1)
			net_eval(&n, &d);
		train(1);
	}
	policy_get_stats(d.p, &st);
	assert_true(st.suspensions >= 1);
	assert_int_equal(st.trial.state, POLICY_TRIAL_MEASURED);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_ALL);
	stop();
}

/* The workspace rooms of a pass are that pass's mode's: the ALGO actions
 * say so while the passes run (the µ-cuDNN solver must not keep the
 * tightest pass's room as the plan's), and not once a mode is kept. */
static void test_rooms_of_a_pass_are_marked(void **state)
{
	uint64_t b = conv_budget();
	int during = 0, after = 0, kept_at = -1;

	(void)state;
	device(300000000, 200000000, 100000000);
	algo_steps = true;
	start(b, 1);
	algo_steps = false;
	train(8);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (a->kind == POLICY_ACT_NOTE && a->note == POLICY_NOTE_KEPT)
			kept_at = i;
		if (a->kind != POLICY_ACT_ALGO)
			continue;
		if (kept_at < 0 && a->in_trial)
			during++;
		else if (kept_at >= 0 && a->in_trial)
			fail_msg("an ALGO action after the kept mode still says it is a pass's room");
		else if (kept_at >= 0)
			after++;
	}
	if (kept_at < 0 || during == 0 || after == 0)
		fail_msg("expected ALGO actions marked in_trial during the passes and unmarked after "
			 "the decision, got %d marked, %d after, kept %s", during, after,
			 kept_at < 0 ? "never" : "yes");
	stop();
}

/* A time that arrives late for an earlier plan's iteration is no pass of
 * the current plan's (iterations are numbered per plan). */
static void test_a_late_time_of_another_plan_is_no_pass(void **state)
{
	uint64_t b = conv_budget();
	const policy_plan_t *pl;
	policy_stats_t st;
	uint64_t iter = 0;

	(void)state;
	device(1, 1, 1);
	start(b, 1);
	pl = policy_plan(d.p);
	net_train(&n, &d);   /* the first pass begins; no time reported */
	net_train(&n, &d);   /* ... and ends */
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].a.kind == POLICY_ACT_MARK && d.acts[i].a.prev_whole)
			iter = d.acts[i].a.iter - 1;   /* the first whole iteration */
	assert_true(iter > 0);
	policy_iteration_time(d.p, pl->id + 1, iter, 5);
	policy_iteration_time(d.p, pl->id - 1, iter, 5);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.trial.runs[0], 0);
	assert_int_equal(st.iters_timed, 2);   /* counted all the same */
	policy_iteration_time(d.p, pl->id, iter, 5);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.trial.runs[0], 1);
	stop();
}

/* policy_plan_use swaps the offload set and its steps, and back. */
static void test_plan_use_switches_and_restores(void **state)
{
	uint64_t b = conv_budget();
	policy_plan_t *pl;
	int nsteps, noff;

	(void)state;
	start(b, 0);
	pl = (policy_plan_t *)policy_plan(d.p);
	nsteps = pl->nsteps;
	noff = pl->off.n;
	assert_int_equal(policy_plan_use(pl, POLICY_OFFLOAD_ALL), 0);
	assert_int_equal(pl->offload, POLICY_OFFLOAD_ALL);
	assert_true(pl->off.n > noff);
	assert_true(pl->nsteps > nsteps);
	assert_int_equal(pl->alt[2].n, 0);   /* ALL's slot: in effect now */
	assert_int_equal(pl->alt[1].n, noff);   /* CONV's: back in its slot */
	assert_int_equal(policy_plan_use(pl, POLICY_OFFLOAD_NONE), 0);
	assert_int_equal(pl->off.n, 0);
	assert_int_equal(policy_plan_use(pl, POLICY_OFFLOAD_CONV), 0);
	assert_int_equal(pl->off.n, noff);
	assert_int_equal(pl->nsteps, nsteps);
	/* DYN is no mode a plan can run */
	assert_int_equal(policy_plan_use(pl, POLICY_OFFLOAD_DYN), -1);
	stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_candidate_runs_then_the_fastest_is_kept),
		cmocka_unit_test(test_a_pass_as_fast_that_misses_less_is_kept),
		cmocka_unit_test(test_an_iteration_cut_short_is_run_again),
		cmocka_unit_test(test_no_times_keep_the_computed_choice),
		cmocka_unit_test(test_times_lost_are_asked_again),
		cmocka_unit_test(test_several_runs_keep_each_candidates_fastest),
		cmocka_unit_test(test_one_candidate_is_no_trial),
		cmocka_unit_test(test_a_pass_that_cannot_win_is_not_run),
		cmocka_unit_test(test_the_fastest_mode_measured_is_kept),
		cmocka_unit_test(test_least_workspace_passes_are_timed_and_kept),
		cmocka_unit_test(test_a_faster_pass_that_misses_is_not_kept),
		cmocka_unit_test(test_the_computed_choice_stays_when_it_is_fastest),
		cmocka_unit_test(test_no_trials_when_switched_off),
		cmocka_unit_test(test_static_modes_have_no_trials),
		cmocka_unit_test(test_an_eval_pass_does_not_decide),
		cmocka_unit_test(test_plan_use_switches_and_restores),
		cmocka_unit_test(test_rooms_of_a_pass_are_marked),
		cmocka_unit_test(test_a_late_time_of_another_plan_is_no_pass),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
