/* tests/unit/solver/test_solver.c - µ-cuDNN's WR dynamic program, the
 * desirable sets, the WD integer program and the cache, on hand-made
 * tables with known optima.  No CUDA.  GLPK is the real library, linked
 * into this test and handed to the solver through solver_glpk_t as
 * libvmem.so does after dlopen; a fake table checks that nothing GLPK
 * answers is trusted.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glpk.h>

#include "solver/solver.h"

#define MiB (1ull << 20)

static solver_glpk_t real_glpk(void)
{
	solver_glpk_t g = {
		.create_prob = (void *)glp_create_prob, .delete_prob = (void *)glp_delete_prob,
		.set_prob_name = (void *)glp_set_prob_name, .set_obj_dir = (void *)glp_set_obj_dir,
		.add_rows = (void *)glp_add_rows, .set_row_name = (void *)glp_set_row_name,
		.set_row_bnds = (void *)glp_set_row_bnds, .add_cols = (void *)glp_add_cols,
		.set_col_name = (void *)glp_set_col_name, .set_col_kind = (void *)glp_set_col_kind,
		.set_obj_coef = (void *)glp_set_obj_coef, .load_matrix = (void *)glp_load_matrix,
		.init_iocp = (void *)glp_init_iocp, .intopt = (void *)glp_intopt,
		.mip_status = (void *)glp_mip_status, .mip_obj_val = (void *)glp_mip_obj_val,
		.mip_col_val = (void *)glp_mip_col_val, .write_lp = (void *)glp_write_lp,
		.term_out = (void *)glp_term_out, .error_hook = (void *)glp_error_hook,
		.free_env = (void *)glp_free_env,
	};
	return g;
}

/* A growing table. */
typedef struct {
	solver_meas_t m[4096];
	int n;
} table_t;

static void add(table_t *t, int b, int algo, double time, uint64_t ws)
{
	assert_true(t->n < 4096);
	t->m[t->n++] = (solver_meas_t){ b, algo, time, ws };
}

static void expect_status(solver_status_t got, solver_status_t want, const char *what)
{
	if (got != want)
		fail_msg("%s: expected %s, got %s", what, solver_strerror(want), solver_strerror(got));
}

/* ------------------------------------------------------------ batch sizes */

static void check_sizes(solver_mb_t pol, int B, int q, const int *want, int nwant)
{
	int got[512];
	int n = solver_batch_sizes(pol, B, q, got, 512);
	char gs[2048] = "", ws[2048] = "";

	for (int i = 0; i < n; i++)
		snprintf(gs + strlen(gs), sizeof(gs) - strlen(gs), "%d ", got[i]);
	for (int i = 0; i < nwant; i++)
		snprintf(ws + strlen(ws), sizeof(ws) - strlen(ws), "%d ", want[i]);
	if (n != nwant || memcmp(got, want, (size_t)n * sizeof(int)) != 0)
		fail_msg("sizes(policy %d, B=%d, q=%d): expected [%s], got [%s]", (int)pol, B, q, ws, gs);
}

static void test_batch_sizes_follow_the_policy(void **state)
{
	(void)state;
	check_sizes(SOLVER_MB_UNDIVIDED, 256, 1, (int[]){ 256 }, 1);
	check_sizes(SOLVER_MB_POW2, 256, 1, (int[]){ 1, 2, 4, 8, 16, 32, 64, 128, 256 }, 9);
	check_sizes(SOLVER_MB_POW2, 100, 1, (int[]){ 1, 2, 4, 8, 16, 32, 64, 100 }, 8);
	check_sizes(SOLVER_MB_ALL, 5, 1, (int[]){ 1, 2, 3, 4, 5 }, 5);
	/* quantum 4, B = 10: multiples of 4, and sizes = 2 mod 4 */
	check_sizes(SOLVER_MB_ALL, 10, 4, (int[]){ 2, 4, 6, 8, 10 }, 5);
	check_sizes(SOLVER_MB_POW2, 10, 4, (int[]){ 2, 4, 8, 10 }, 4);
	/* a quantum above the batch leaves only the batch */
	check_sizes(SOLVER_MB_ALL, 3, 4, (int[]){ 3 }, 1);
	int big[300];
	assert_int_equal(solver_batch_sizes(SOLVER_MB_ALL, 300, 1, big, 10), 300);
	assert_int_equal(solver_batch_sizes(SOLVER_MB_ALL, 0, 1, big, 300), 0);
}

/* ------------------------------------------------------------------- WR */

/* µ-cuDNN Fig. 5: algorithm 4 is efficient only at 60 images, algorithm 0
 * runs any size without workspace.  B = 256 under the limit: four
 * micro-batches of 60 with algorithm 4 and one of 16 with algorithm 0. */
static void fig5_table(table_t *t)
{
	for (int b = 1; b <= 256; b++)
		add(t, b, 0, 0.1 + 1.0 * b, 0);
	add(t, 60, 4, 0.1 + 0.5 * 60, 50 * MiB);
	add(t, 256, 4, 0.1 + 0.5 * 256, 213 * MiB);
}

static void test_wr_finds_papers_fig5_configuration(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c;
	(void)state;

	fig5_table(&t);
	solver_kernel_t k = { 256, 1, t.n, t.m };
	expect_status(solver_wr(&k, 64 * MiB, &c), SOLVER_OK, "solver_wr");
	if (c.nruns != 2 || c.runs[0].algo != 4 || c.runs[0].b != 60 || c.runs[0].count != 4 ||
	    c.runs[1].algo != 0 || c.runs[1].b != 16 || c.runs[1].count != 1)
		fail_msg("expected {(4,60)x4, (0,16)x1}, got %d runs: (%d,%d)x%d (%d,%d)x%d", c.nruns,
			 c.runs[0].algo, c.runs[0].b, c.runs[0].count, c.runs[1].algo, c.runs[1].b,
			 c.runs[1].count);
	assert_true(c.time > 136.49 && c.time < 136.51);
	assert_int_equal(c.ws, 50 * MiB);
	assert_int_equal(solver_config_calls(&c), 5);

	/* with room for the whole batch, algorithm 4 undivided */
	expect_status(solver_wr(&k, 512 * MiB, &c), SOLVER_OK, "solver_wr 512M");
	assert_int_equal(c.nruns, 1);
	assert_int_equal(c.runs[0].algo, 4);
	assert_int_equal(c.runs[0].b, 256);
	/* with no workspace at all, algorithm 0 undivided (fewest launches) */
	expect_status(solver_wr(&k, 0, &c), SOLVER_OK, "solver_wr 0");
	assert_int_equal(c.nruns, 1);
	assert_int_equal(c.runs[0].algo, 0);
	assert_int_equal(c.runs[0].b, 256);
	assert_int_equal(c.ws, 0);
}

/* An algorithm whose speed does not depend on the micro-batch (time
 * linear in b, a 0.1 launch cost per call) with workspace linear in b:
 * the fastest is one call, 256 MiB; within 1% of it (258.66), 16 images
 * a call (16 calls, 257.6; 32 calls would be 259.2) need 16 MiB; within
 * 0.01%, no split at all;
 * slack 0 is solver_wr; the limit still binds. */
static void test_wr_slack_takes_least_workspace_near_the_fastest(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c, fast;
	(void)state;

	for (int b = 1; b <= 256; b *= 2)
		add(&t, b, 1, 0.1 + 1.0 * b, (uint64_t)b * MiB);
	solver_kernel_t k = { 256, 1, t.n, t.m };

	expect_status(solver_wr(&k, SOLVER_NO_LIMIT, &fast), SOLVER_OK, "solver_wr");
	expect_status(solver_wr_slack(&k, SOLVER_NO_LIMIT, 0.0, &c), SOLVER_OK, "slack 0");
	if (c.ws != fast.ws || c.nruns != fast.nruns || c.runs[0].b != 256)
		fail_msg("slack 0: expected solver_wr's one call of 256 (%" PRIu64 " B), got %d "
			 "calls of %d (%" PRIu64 " B)", fast.ws, c.runs[0].count, c.runs[0].b, c.ws);
	expect_status(solver_wr_slack(&k, SOLVER_NO_LIMIT, 0.01, &c), SOLVER_OK, "slack 1%");
	if (c.nruns != 1 || c.runs[0].b != 16 || c.runs[0].count != 16 || c.ws != 16 * MiB)
		fail_msg("slack 1%%: expected 16 calls of 16 with 16 MiB, got %d runs, first %d "
			 "calls of %d, %" PRIu64 " MiB", c.nruns, c.runs[0].count, c.runs[0].b, c.ws / MiB);
	if (c.time > fast.time * 1.01)
		fail_msg("slack 1%%: %.3f is more than 1%% over the fastest %.3f", c.time, fast.time);
	expect_status(solver_wr_slack(&k, SOLVER_NO_LIMIT, 0.0001, &c), SOLVER_OK, "slack 0.01%");
	if (c.runs[0].b != 256)
		fail_msg("slack 0.01%%: expected no split (one call of 256), got %d calls of %d",
			 c.runs[0].count, c.runs[0].b);
	expect_status(solver_wr_slack(&k, 8 * MiB, 0.01, &c), SOLVER_OK, "slack 1%, 8 MiB");
	if (c.ws > 8 * MiB)
		fail_msg("limit 8 MiB: expected at most 8 MiB of workspace, got %" PRIu64, c.ws);
	expect_status(solver_wr_slack(&k, 0, 0.01, &c), SOLVER_INFEASIBLE, "slack 1%, limit 0");
}

/* A fast algorithm whose workspace grows with the micro-batch (1 MiB per
 * image, 0.05 ms per image + 0.2 per call) beside a memory-optimal one
 * (0.1 ms per image, none), batch 64: the fastest is the fast one whole
 * (3.4 ms, 64 MiB).  Priced at the H100's remap (61 us per 2 MiB) a MiB
 * costs 0.03 ms: the choice is the front's least time + price x
 * workspace, a split with less workspace (4 calls of 16: 4.0 + 0.5 ms);
 * at a tenth of the price more workspace, at a high price none; price 0
 * is solver_wr_slack. */
static double priced(const solver_config_t *c, double price)
{
	return c->time + price * (double)c->ws;
}

static void expect_least_priced(const solver_kernel_t *k, double price, const solver_config_t *c,
				const char *what)
{
	solver_front_t f;

	expect_status(solver_front(k, SOLVER_NO_LIMIT, &f), SOLVER_OK, "front");
	for (int i = 0; i < f.n; i++)
		if (priced(&f.c[i], price) < priced(c, price) - 1e-12)
			fail_msg("%s: %" PRIu64 " MiB in %.3f ms costs %.4f; the front has %" PRIu64
				 " MiB in %.3f ms at %.4f", what, c->ws / MiB, c->time, priced(c, price),
				 f.c[i].ws / MiB, f.c[i].time, priced(&f.c[i], price));
	solver_front_free(&f);
}

static void test_wr_priced_trades_time_for_workspace(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c, slack, tenth;
	const double remap = 0.061 / (2.0 * MiB);
	(void)state;

	for (int b = 1; b <= 64; b *= 2) {
		add(&t, b, 1, 0.2 + 0.05 * b, (uint64_t)b * MiB);
		add(&t, b, 0, 0.1 * b, 0);
	}
	solver_kernel_t k = { 64, 1, t.n, t.m };

	expect_status(solver_wr_priced(&k, SOLVER_NO_LIMIT, 0.0, 0.0, &c), SOLVER_OK, "price 0");
	expect_status(solver_wr_slack(&k, SOLVER_NO_LIMIT, 0.0, &slack), SOLVER_OK, "slack");
	if (c.ws != slack.ws || c.time != slack.time || c.ws != 64 * MiB)
		fail_msg("price 0: expected solver_wr_slack's fast algorithm whole (64 MiB in %.3f "
			 "ms), got %" PRIu64 " MiB in %.3f ms", slack.time, c.ws / MiB, c.time);
	expect_status(solver_wr_priced(&k, SOLVER_NO_LIMIT, 0.0, remap, &c), SOLVER_OK, "remap");
	if (c.ws == 0 || c.ws >= 64 * MiB)
		fail_msg("priced at a remap: expected a split with less workspace than 64 MiB, got "
			 "%" PRIu64 " MiB in %.3f ms", c.ws / MiB, c.time);
	expect_least_priced(&k, remap, &c, "priced at a remap");
	expect_status(solver_wr_priced(&k, SOLVER_NO_LIMIT, 0.0, remap / 10, &tenth), SOLVER_OK,
		      "a tenth");
	if (tenth.ws <= c.ws)
		fail_msg("a tenth of the price: expected more workspace than %" PRIu64 " MiB, got %"
			 PRIu64 " MiB", c.ws / MiB, tenth.ws / MiB);
	expect_least_priced(&k, remap / 10, &tenth, "a tenth of the price");
	expect_status(solver_wr_priced(&k, SOLVER_NO_LIMIT, 0.0, remap * 100, &c), SOLVER_OK, "x100");
	if (c.ws != 0 || c.runs[0].algo != 0)
		fail_msg("priced high: expected the memory-optimal algorithm (no workspace), got "
			 "algorithm %d with %" PRIu64 " MiB", c.runs[0].algo, c.ws / MiB);
	/* the limit still binds; slack walks on from the priced choice */
	expect_status(solver_wr_priced(&k, 2 * MiB, 0.0, remap / 10, &c), SOLVER_OK, "2 MiB");
	if (c.ws > 2 * MiB)
		fail_msg("limit 2 MiB: expected at most 2 MiB, got %" PRIu64, c.ws);
	expect_status(solver_wr_priced(&k, SOLVER_NO_LIMIT, 0.5, remap / 10, &c), SOLVER_OK,
		      "slack 50%");
	if (c.ws > tenth.ws || c.time > tenth.time * 1.5)
		fail_msg("slack 50%%: expected at most %" PRIu64 " MiB within 1.5x of %.3f ms, got %"
			 PRIu64 " MiB in %.3f ms", tenth.ws / MiB, tenth.time, c.ws / MiB, c.time);
	expect_status(solver_wr_priced(&k, 0, 0.0, remap, &c), SOLVER_OK, "limit 0");
	assert_int_equal(c.ws, 0);
}

/* The least-workspace counterpart keeps the calls: same sizes and
 * counts, the least workspace measured at each size (the fastest such). */
static void test_least_like_keeps_the_parts_and_takes_the_least_workspace(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c, m;
	(void)state;

	add(&t, 32, 1, 1.0, 64 * MiB);   /* fast, greedy */
	add(&t, 32, 2, 3.0, 0);          /* slow, no workspace */
	add(&t, 32, 0, 2.0, 0);          /* as little, faster: this one */
	add(&t, 16, 1, 0.6, 32 * MiB);
	add(&t, 16, 3, 0.9, 4 * MiB);    /* the least there */
	solver_kernel_t k = { 96, 16, t.n, t.m };

	c = (solver_config_t){ 0.0, 64 * MiB, 2, { { 1, 32, 2 }, { 1, 16, 2 } } };
	expect_status(solver_least_like(&k, &c, &m), SOLVER_OK, "least like 2x32 + 2x16");
	if (m.nruns != 2 || m.runs[0].b != 32 || m.runs[0].count != 2 || m.runs[0].algo != 0 ||
	    m.runs[1].b != 16 || m.runs[1].count != 2 || m.runs[1].algo != 3)
		fail_msg("expected 2 x 32 images with algorithm 0 and 2 x 16 with algorithm 3, got "
			 "%d runs: %d x %d (algorithm %d), %d x %d (algorithm %d)", m.nruns,
			 m.runs[0].count, m.runs[0].b, m.runs[0].algo, m.runs[1].count, m.runs[1].b,
			 m.runs[1].algo);
	if (m.ws != 4 * MiB || m.time < 2 * 2.0 + 2 * 0.9 - 1e-9 || m.time > 2 * 2.0 + 2 * 0.9 + 1e-9)
		fail_msg("expected 4 MiB of workspace and %.1f ms, got %" PRIu64 " bytes and %.3f ms",
			 2 * 2.0 + 2 * 0.9, m.ws, m.time);
	c.runs[1].b = 8;   /* not measured */
	expect_status(solver_least_like(&k, &c, &m), SOLVER_INFEASIBLE, "a size not measured");
	c.nruns = 0;
	expect_status(solver_least_like(&k, &c, &m), SOLVER_EINVAL, "no parts");
}

static void test_wr_reports_infeasible_when_nothing_fits(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c;
	(void)state;

	add(&t, 4, 1, 1.0, 10);
	add(&t, 2, 1, 0.6, 5);
	solver_kernel_t k = { 4, 1, t.n, t.m };
	expect_status(solver_wr(&k, 4, &c), SOLVER_INFEASIBLE, "limit below every workspace");
	/* size 1 not measured and 2 fits: 2 + 2 */
	expect_status(solver_wr(&k, 5, &c), SOLVER_OK, "limit 5");
	assert_int_equal(c.nruns, 1);
	assert_int_equal(c.runs[0].b, 2);
	assert_int_equal(c.runs[0].count, 2);
}

static void test_wr_rejects_malformed_tables(void **state)
{
	solver_config_t c;
	solver_meas_t bad[] = { { 0, 0, 1.0, 0 } };
	solver_meas_t nan[] = { { 1, 0, 0.0 / 0.0, 0 } };
	(void)state;

	expect_status(solver_wr(&(solver_kernel_t){ 4, 1, 1, bad }, 10, &c), SOLVER_EINVAL, "b = 0");
	expect_status(solver_wr(&(solver_kernel_t){ 4, 1, 1, nan }, 10, &c), SOLVER_EINVAL, "NaN time");
	expect_status(solver_wr(&(solver_kernel_t){ 0, 1, 0, NULL }, 10, &c), SOLVER_EINVAL, "batch 0");
	expect_status(solver_wr(&(solver_kernel_t){ 4, 0, 1, bad }, 10, &c), SOLVER_EINVAL, "quantum 0");
	expect_status(solver_wr(NULL, 10, &c), SOLVER_EINVAL, "NULL");
}

/* ---- exhaustive reference: every sequence of parts and algorithms */

typedef struct {
	double t;
	uint64_t w;
} pt_t;

typedef struct {
	const solver_kernel_t *k;
	uint64_t limit;
	pt_t *all;
	int n, cap;
} enum_t;

/* parts: multiples of q, plus at most one part = B mod q (when nonzero) */
static void enum_rec(enum_t *e, int left, double t, uint64_t w, bool rem_used)
{
	const solver_kernel_t *k = e->k;
	int q = k->quantum, r = k->batch % q;

	if (left == 0) {
		if (r && !rem_used)
			return;
		if (e->n == e->cap) {
			e->cap = e->cap ? e->cap * 2 : 1024;
			e->all = realloc(e->all, (size_t)e->cap * sizeof(pt_t));
			assert_non_null(e->all);
		}
		e->all[e->n++] = (pt_t){ t, w };
		return;
	}
	for (int i = 0; i < k->n; i++) {
		const solver_meas_t *m = &k->m[i];
		bool is_rem = m->b % q != 0;

		if (m->b > left || m->ws > e->limit)
			continue;
		if (is_rem && (rem_used || m->b % q != r))
			continue;
		enum_rec(e, left - m->b, t + m->time, w > m->ws ? w : m->ws, rem_used || is_rem);
	}
}

static int pt_cmp(const void *a, const void *b)
{
	const pt_t *x = a, *y = b;

	if (x->w != y->w)
		return x->w < y->w ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* The Pareto front of the enumeration, workspace ascending. */
static int brute_front(const solver_kernel_t *k, uint64_t limit, pt_t *out, int cap)
{
	enum_t e = { k, limit, NULL, 0, 0 };
	int n = 0;
	double best = 1e300;

	enum_rec(&e, k->batch, 0.0, 0, false);
	qsort(e.all, (size_t)e.n, sizeof(pt_t), pt_cmp);
	for (int i = 0; i < e.n; i++)
		if (e.all[i].t < best - 1e-9) {
			best = e.all[i].t;
			assert_true(n < cap);
			out[n++] = e.all[i];
		}
	free(e.all);
	return n;
}

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A random table shaped like a real one: per algorithm a launch cost, a
 * per-image cost and a workspace per image; each size measured with
 * probability 3/4 per algorithm. */
static void random_table(table_t *t, int B, int nalgo)
{
	t->n = 0;
	for (int a = 0; a < nalgo; a++) {
		double launch = 0.05 + (double)(rnd() % 100) / 200.0;
		double per = 0.2 + (double)(rnd() % 100) / 100.0;
		uint64_t wsper = a == 0 ? 0 : 1 + rnd() % 40;
		uint64_t wsfix = a == 0 ? 0 : rnd() % 30;

		for (int b = 1; b <= B; b++)
			if (a == 0 || rnd() % 4)
				add(t, b, a, launch + per * b, wsfix + wsper * (uint64_t)b);
	}
}

static void check_front_vs_brute(const solver_kernel_t *k, uint64_t limit, const char *what)
{
	pt_t want[4096];
	int nw = brute_front(k, limit, want, 4096);
	solver_front_t f;
	solver_status_t st = solver_front(k, limit, &f);

	if (nw == 0) {
		expect_status(st, SOLVER_INFEASIBLE, what);
		return;
	}
	expect_status(st, SOLVER_OK, what);
	if (f.n != nw) {
		fail_msg("%s: front size expected %d (exhaustive), got %d", what, nw, f.n);
	}
	for (int i = 0; i < nw; i++) {
		int sum = 0;

		if (f.c[i].ws != want[i].w || f.c[i].time < want[i].t - 1e-9 ||
		    f.c[i].time > want[i].t + 1e-9)
			fail_msg("%s: member %d expected (t %.6f, ws %llu), got (t %.6f, ws %llu)", what,
				 i, want[i].t, (unsigned long long)want[i].w, f.c[i].time,
				 (unsigned long long)f.c[i].ws);
		/* the configuration is what it claims: sizes add up, times add up */
		double t = 0;
		uint64_t w = 0;
		for (int j = 0; j < f.c[i].nruns; j++) {
			const solver_run_t *r = &f.c[i].runs[j];
			bool found = false;

			sum += r->b * r->count;
			for (int m = 0; m < k->n; m++)
				if (k->m[m].b == r->b && k->m[m].algo == r->algo) {
					t += k->m[m].time * r->count;
					if (k->m[m].ws > w)
						w = k->m[m].ws;
					found = true;
				}
			if (!found)
				fail_msg("%s: run (%d,%d) was never measured", what, r->algo, r->b);
			if (r->b % k->quantum && j != f.c[i].nruns - 1)
				fail_msg("%s: remainder run (%d,%d) is not last", what, r->algo, r->b);
		}
		if (sum != k->batch || w != f.c[i].ws || t < f.c[i].time - 1e-9 ||
		    t > f.c[i].time + 1e-9)
			fail_msg("%s: member %d adds up to %d images, %.6f, ws %llu; claims %d, %.6f, %llu",
				 what, i, sum, t, (unsigned long long)w, k->batch, f.c[i].time,
				 (unsigned long long)f.c[i].ws);
	}
	/* WR is the front's fastest member */
	solver_config_t c;
	expect_status(solver_wr(k, limit, &c), SOLVER_OK, what);
	if (c.time != f.c[f.n - 1].time || c.ws != f.c[f.n - 1].ws)
		fail_msg("%s: WR expected the front's fastest (%.6f, %llu), got (%.6f, %llu)", what,
			 f.c[f.n - 1].time, (unsigned long long)f.c[f.n - 1].ws, c.time,
			 (unsigned long long)c.ws);
	assert_true(f.unpruned >= f.n);
	solver_front_free(&f);
}

static void test_front_equals_exhaustive_pareto_front(void **state)
{
	table_t t;
	char what[128];
	(void)state;

	for (int iter = 0; iter < 60; iter++) {
		int B = 1 + (int)(rnd() % 7), nalgo = 1 + (int)(rnd() % 3);
		uint64_t limits[] = { SOLVER_NO_LIMIT, 0, 20, 60, 150 };

		random_table(&t, B, nalgo);
		for (int q = 1; q <= 4; q *= 2)
			for (size_t l = 0; l < sizeof(limits) / sizeof(*limits); l++) {
				solver_kernel_t k = { B, q, t.n, t.m };

				snprintf(what, sizeof(what), "table %d (B=%d, %d algos, q=%d, limit %llu)",
					 iter, B, nalgo, q, (unsigned long long)limits[l]);
				check_front_vs_brute(&k, limits[l], what);
			}
	}
}

/* The desirable set holds no dominated configuration (§III-C). */
static void test_front_holds_no_dominated_configuration(void **state)
{
	table_t t = { .n = 0 };
	solver_front_t f;
	(void)state;

	fig5_table(&t);
	/* a slow, greedy algorithm that every other dominates at every size */
	for (int b = 1; b <= 256; b++)
		add(&t, b, 9, 10.0 + 2.0 * b, 300 * MiB);
	solver_kernel_t k = { 256, 1, t.n, t.m };
	expect_status(solver_front(&k, SOLVER_NO_LIMIT, &f), SOLVER_OK, "front");
	for (int i = 0; i < f.n; i++) {
		for (int j = 0; j < f.n; j++)
			if (i != j && f.c[j].time <= f.c[i].time && f.c[j].ws <= f.c[i].ws)
				fail_msg("member %d (%.3f, %llu) is dominated by member %d (%.3f, %llu)", i,
					 f.c[i].time, (unsigned long long)f.c[i].ws, j, f.c[j].time,
					 (unsigned long long)f.c[j].ws);
		for (int r = 0; r < f.c[i].nruns; r++)
			if (f.c[i].runs[r].algo == 9)
				fail_msg("member %d uses the dominated algorithm 9", i);
	}
	/* ascending workspace, descending time */
	for (int i = 1; i < f.n; i++)
		assert_true(f.c[i].ws > f.c[i - 1].ws && f.c[i].time < f.c[i - 1].time);
	assert_true(f.unpruned > 1e20);
	solver_front_free(&f);
}

static void test_wr_with_quantum_keeps_slices_aligned(void **state)
{
	table_t t = { .n = 0 };
	solver_config_t c;
	(void)state;

	/* B = 10, q = 4: one 2-image part and multiples of 4 */
	for (int b = 1; b <= 10; b++) {
		add(&t, b, 0, 1.0 + b, 0);
		add(&t, b, 1, 0.2 + 0.5 * b, 10 * (uint64_t)b);
	}
	solver_kernel_t k = { 10, 4, t.n, t.m };
	expect_status(solver_wr(&k, 45, &c), SOLVER_OK, "q=4");
	int off = 0;
	for (int i = 0; i < c.nruns; i++)
		for (int j = 0; j < c.runs[i].count; j++) {
			if (off % 4)
				fail_msg("slice at image %d is not 4-aligned (run %d)", off, i);
			off += c.runs[i].b;
		}
	assert_int_equal(off, 10);
	/* the fastest: 4 + 4 + 2 with algorithm 1 (ws 40) */
	assert_int_equal(c.runs[0].algo, 1);
	assert_int_equal(c.runs[0].b, 4);
	assert_int_equal(c.runs[0].count, 2);
	assert_int_equal(c.runs[1].b, 2);
	assert_int_equal(c.ws, 40);
}

/* ------------------------------------------------------------------- WD */

static solver_front_t front_of(const double *t, const uint64_t *w, int n)
{
	solver_front_t f = { n, calloc((size_t)n, sizeof(solver_config_t)), (double)n };

	for (int i = 0; i < n; i++) {
		f.c[i].time = t[i];
		f.c[i].ws = w[i];
		f.c[i].nruns = 1;
		f.c[i].runs[0] = (solver_run_t){ i, 1, 1 };
	}
	return f;
}

static void test_wd_solves_a_known_knapsack(void **state)
{
	solver_glpk_t g = real_glpk();
	/* three kernels; kernel 1 gains most per byte */
	solver_front_t f[3] = {
		front_of((double[]){ 10, 6, 5 }, (uint64_t[]){ 0, 40, 100 }, 3),
		front_of((double[]){ 20, 8 }, (uint64_t[]){ 0, 60 }, 2),
		front_of((double[]){ 7, 4 }, (uint64_t[]){ 0, 50 }, 2),
	};
	int choice[3];
	solver_wd_result_t res;
	(void)state;

	/* limit 100: options: k1 fast (60) + k0 mid (40) = 100 -> 6 + 8 + 7 = 21 */
	solver_wd_t p = { 3, f, NULL, NULL, 100, NULL, 0, 0 };
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "solver_wd");
	if (choice[0] != 1 || choice[1] != 1 || choice[2] != 0)
		fail_msg("expected choice (1,1,0), got (%d,%d,%d)", choice[0], choice[1], choice[2]);
	assert_true(res.objective > 20.999 && res.objective < 21.001);
	assert_int_equal(res.ws, 100);
	assert_int_equal(res.nvars, 7);
	assert_true(res.optimal);

	/* weights: kernel 2 runs 5 times an iteration, so its 50 bytes pay more */
	double wgt[3] = { 1, 1, 5 };
	p.weight = wgt;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "weighted");
	/* candidates within 100: (1,1,0): 6+8+35=49; (0,1,0)... k2 fast (50) + k0 mid (40) -> 6+20+20=46 */
	if (choice[0] != 1 || choice[1] != 0 || choice[2] != 1)
		fail_msg("weighted: expected choice (1,0,1), got (%d,%d,%d)", choice[0], choice[1],
			 choice[2]);
	assert_true(res.objective > 45.999 && res.objective < 46.001);

	/* no limit: everything fastest */
	p.weight = NULL;
	p.limit = SOLVER_NO_LIMIT;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "no limit");
	assert_int_equal(choice[0], 2);
	assert_int_equal(choice[1], 1);
	assert_int_equal(choice[2], 1);
	for (int i = 0; i < 3; i++)
		solver_front_free(&f[i]);
}

static void test_wd_matches_exhaustive_search(void **state)
{
	solver_glpk_t g = real_glpk();
	(void)state;

	for (int iter = 0; iter < 40; iter++) {
		int nk = 2 + (int)(rnd() % 3);
		solver_front_t f[4];
		int choice[4], best[4] = { 0 };
		double bestobj = 1e300;
		solver_wd_result_t res;
		uint64_t limit = rnd() % 200;

		for (int k = 0; k < nk; k++) {
			int n = 1 + (int)(rnd() % 4);
			double t[4];
			uint64_t w[4];

			t[0] = 50 + (double)(rnd() % 50);
			w[0] = rnd() % 20;
			for (int i = 1; i < n; i++) {
				w[i] = w[i - 1] + 1 + rnd() % 60;
				t[i] = t[i - 1] - 1 - (double)(rnd() % 10);
			}
			f[k] = front_of(t, w, n);
		}
		/* exhaustive */
		int idx[4] = { 0 };
		for (;;) {
			uint64_t ws = 0;
			double obj = 0;

			for (int k = 0; k < nk; k++) {
				ws += f[k].c[idx[k]].ws;
				obj += f[k].c[idx[k]].time;
			}
			if (ws <= limit && obj < bestobj) {
				bestobj = obj;
				memcpy(best, idx, sizeof(best));
			}
			int k = 0;
			while (k < nk && ++idx[k] == f[k].n)
				idx[k++] = 0;
			if (k == nk)
				break;
		}
		solver_wd_t p = { nk, f, NULL, NULL, limit, NULL, 0, 0 };
		solver_status_t st = solver_wd(&g, &p, choice, &res);

		if (bestobj == 1e300) {
			expect_status(st, SOLVER_INFEASIBLE, "exhaustive found nothing");
		} else {
			expect_status(st, SOLVER_OK, "solver_wd");
			if (res.objective < bestobj - 1e-6 || res.objective > bestobj + 1e-6)
				fail_msg("instance %d (limit %llu): expected objective %.3f, got %.3f", iter,
					 (unsigned long long)limit, bestobj, res.objective);
			assert_true(res.ws <= limit);
		}
		for (int k = 0; k < nk; k++)
			solver_front_free(&f[k]);
	}
}

/* The paper's proof (§III-C): an optimal solution never holds an
 * undesirable configuration.  Here the ILP is given kernel 0's
 * configurations unpruned, with u dominated by v (T(v) <= T(u), M(v) <=
 * M(u)): whatever the limit, u is never chosen. */
static void test_wd_never_chooses_a_dominated_configuration(void **state)
{
	solver_glpk_t g = real_glpk();
	(void)state;

	for (uint64_t limit = 0; limit <= 120; limit += 5) {
		/* c0 (10, 0), u = c1 (9, 60), v = c2 (8, 50): u dominated by v */
		solver_front_t f[2] = {
			front_of((double[]){ 10, 9, 8 }, (uint64_t[]){ 0, 60, 50 }, 3),
			front_of((double[]){ 12, 5 }, (uint64_t[]){ 0, 30 }, 2),
		};
		int choice[2];
		solver_wd_result_t res;
		solver_wd_t p = { 2, f, NULL, NULL, limit, NULL, 0, 0 };

		expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "solver_wd");
		if (choice[0] == 1)
			fail_msg("limit %llu: the dominated configuration u was chosen (choice %d,%d)",
				 (unsigned long long)limit, choice[0], choice[1]);
		solver_front_free(&f[0]);
		solver_front_free(&f[1]);
	}
}

/* ---- a fake GLPK: records calls, answers what the test sets */

static struct {
	int calls_intopt;
	int rc, status;
	double colval[16];
	int ncols;
	bool crash;                 /* intopt stops on an "internal error" */
	void (*hook)(void *);       /* what glp_error_hook installed */
	void *hook_info;
	int free_env_calls;
} fake;

static glp_prob *fake_create(void) { return (glp_prob *)&fake; }
static void fake_delete(glp_prob *p) { (void)p; }
static void fake_name(glp_prob *p, const char *s) { (void)p; (void)s; }
static void fake_dir(glp_prob *p, int d) { (void)p; (void)d; }
static int fake_add_cols(glp_prob *p, int n) { (void)p; fake.ncols = n; return 1; }
static int fake_add_rows(glp_prob *p, int n) { (void)p; (void)n; return 1; }
static void fake_setname(glp_prob *p, int i, const char *s) { (void)p; (void)i; (void)s; }
static void fake_bnds(glp_prob *p, int i, int t, double lb, double ub)
{ (void)p; (void)i; (void)t; (void)lb; (void)ub; }
static void fake_kind(glp_prob *p, int i, int k) { (void)p; (void)i; (void)k; }
static void fake_coef(glp_prob *p, int i, double c) { (void)p; (void)i; (void)c; }
static void fake_load(glp_prob *p, int n, const int *ia, const int *ja, const double *ar)
{ (void)p; (void)n; (void)ia; (void)ja; (void)ar; }
static void fake_init(glp_iocp *c) { memset(c, 0, sizeof(*c)); }
static int fake_intopt(glp_prob *p, const glp_iocp *c)
{
	(void)p;
	(void)c;
	fake.calls_intopt++;
	/* GLPK's glp_error: the hook, then abort() if the hook returns */
	if (fake.crash) {
		if (fake.hook)
			fake.hook(fake.hook_info);
		fail_msg("GLPK's internal error reached abort(): no error hook jumped out");
	}
	return fake.rc;
}
static int fake_status(glp_prob *p) { (void)p; return fake.status; }
static double fake_obj(glp_prob *p) { (void)p; return 0; }
static double fake_col(glp_prob *p, int j) { (void)p; return fake.colval[j]; }
static int fake_write(glp_prob *p, const void *parm, const char *f) { (void)p; (void)parm; (void)f; return 0; }
static int fake_term(int on) { (void)on; return 1; }
static void fake_error_hook(void (*f)(void *), void *info) { fake.hook = f; fake.hook_info = info; }
static int fake_free_env(void) { fake.free_env_calls++; return 0; }

static solver_glpk_t fake_glpk(void)
{
	solver_glpk_t g = {
		(void *)fake_create, (void *)fake_delete, (void *)fake_name, (void *)fake_dir,
		(void *)fake_add_rows, (void *)fake_setname, (void *)fake_bnds,
		(void *)fake_add_cols, (void *)fake_setname, (void *)fake_kind, (void *)fake_coef,
		(void *)fake_load, (void *)fake_init, (void *)fake_intopt, (void *)fake_status,
		(void *)fake_obj, (void *)fake_col, (void *)fake_write, (void *)fake_term,
		(void *)fake_error_hook, (void *)fake_free_env,
	};
	return g;
}

static void test_wd_infeasible_limit_is_found_before_glpk(void **state)
{
	solver_glpk_t g = fake_glpk();
	solver_front_t f[2] = {
		front_of((double[]){ 10, 5 }, (uint64_t[]){ 30, 60 }, 2),
		front_of((double[]){ 12 }, (uint64_t[]){ 40 }, 1),
	};
	int choice[2] = { 7, 7 };
	solver_wd_result_t res;
	(void)state;

	memset(&fake, 0, sizeof(fake));
	solver_wd_t p = { 2, f, NULL, NULL, 69, NULL, 0, 0 };
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_INFEASIBLE, "limit 69 < 30 + 40");
	assert_int_equal(fake.calls_intopt, 0);
	/* the fallback the caller uses: the least-workspace configurations */
	assert_int_equal(choice[0], 0);
	assert_int_equal(choice[1], 0);
	solver_front_free(&f[0]);
	solver_front_free(&f[1]);
}

static void test_wd_does_not_trust_glpk(void **state)
{
	solver_glpk_t g = fake_glpk();
	solver_front_t f[2] = {
		front_of((double[]){ 10, 5 }, (uint64_t[]){ 0, 60 }, 2),
		front_of((double[]){ 12, 3 }, (uint64_t[]){ 0, 50 }, 2),
	};
	int choice[2];
	solver_wd_result_t res;
	solver_wd_t p = { 2, f, NULL, NULL, 100, NULL, 0, 0 };
	(void)state;

	/* claims optimal, but picks both configurations of kernel 0 */
	memset(&fake, 0, sizeof(fake));
	fake.status = GLP_OPT;
	fake.colval[1] = 1, fake.colval[2] = 1, fake.colval[3] = 1;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EGLPK, "two for one kernel");
	/* claims optimal, but exceeds the limit: 60 + 50 > 100 */
	memset(fake.colval, 0, sizeof(fake.colval));
	fake.colval[2] = 1, fake.colval[4] = 1;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EGLPK, "over the limit");
	/* leaves a kernel out */
	memset(fake.colval, 0, sizeof(fake.colval));
	fake.colval[2] = 1;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EGLPK, "kernel left out");
	/* GLPK's own verdicts map to ours */
	fake.status = GLP_NOFEAS;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_INFEASIBLE, "GLP_NOFEAS");
	fake.status = GLP_UNDEF;
	fake.rc = GLP_EFAIL;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EGLPK, "GLP_EFAIL");
	assert_int_equal(res.glpk_rc, GLP_EFAIL);
	/* a valid answer is taken */
	fake.rc = 0;
	fake.status = GLP_OPT;
	memset(fake.colval, 0, sizeof(fake.colval));
	fake.colval[2] = 1, fake.colval[3] = 1;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "valid");
	assert_int_equal(choice[0], 1);
	assert_int_equal(choice[1], 0);
	/* an incomplete table is refused, never called through */
	g.intopt = NULL;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EINVAL, "incomplete table");
	solver_front_free(&f[0]);
	solver_front_free(&f[1]);
}

/* GLPK calls abort() on an internal error unless its error hook jumps
 * out: the application must survive, told nothing worse than "GLPK
 * failed", with GLPK's environment freed and the hook removed. */
static void test_wd_survives_a_glpk_internal_error(void **state)
{
	solver_glpk_t g = fake_glpk();
	solver_front_t f[2] = {
		front_of((double[]){ 10, 5 }, (uint64_t[]){ 0, 60 }, 2),
		front_of((double[]){ 12, 3 }, (uint64_t[]){ 0, 50 }, 2),
	};
	int choice[2] = { 7, 7 };
	solver_wd_result_t res;
	solver_wd_t p = { 2, f, NULL, NULL, 100, NULL, 0, 0 };
	(void)state;

	memset(&fake, 0, sizeof(fake));
	fake.crash = true;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_EGLPK, "internal error");
	assert_int_equal(fake.calls_intopt, 1);
	assert_int_equal(fake.free_env_calls, 1);
	assert_null(fake.hook);
	/* the fallback choice: the least workspace */
	assert_int_equal(choice[0], 0);
	assert_int_equal(choice[1], 0);
	/* and the next solve works */
	fake.crash = false;
	fake.status = GLP_OPT;
	fake.colval[2] = 1, fake.colval[3] = 1;
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "after the error");
	assert_int_equal(choice[0], 1);
	solver_front_free(&f[0]);
	solver_front_free(&f[1]);
}

static void test_wd_writes_the_model_by_name(void **state)
{
	solver_glpk_t g = real_glpk();
	solver_front_t f[2] = {
		front_of((double[]){ 10, 5 }, (uint64_t[]){ 0, 60 }, 2),
		front_of((double[]){ 12, 3 }, (uint64_t[]){ 0, 50 }, 2),
	};
	const char *names[2] = { "conv1_fwd", "conv2_bwd_data" };
	int choice[2];
	solver_wd_result_t res;
	char path[] = "/tmp/vmem-test-wd-XXXXXX";
	int fd = mkstemp(path);
	char buf[4096] = "";
	(void)state;

	assert_true(fd >= 0);
	close(fd);
	solver_wd_t p = { 2, f, NULL, names, 100, path, 0, 0 };
	expect_status(solver_wd(&g, &p, choice, &res), SOLVER_OK, "solver_wd");
	assert_true(res.lp_written);
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	unlink(path);
	const char *want[] = { "ws:", "one_conv1_fwd", "x_conv2_bwd_data_1", "Generals", "<= 100" };
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		if (!strstr(buf, want[i]))
			fail_msg("model file: expected to contain \"%s\", got:\n%s", want[i], buf);
	solver_front_free(&f[0]);
	solver_front_free(&f[1]);
}

/* ---------------------------------------------------------------- cache */

static solver_cache_t *sample_cache(void)
{
	solver_cache_t *c = solver_cache_new();
	solver_meas_t m1[] = { { 1, 0, 0.125, 0 }, { 2, 1, 0.2, 4096 }, { 2, 0, 0.25, 0 } };
	solver_meas_t m2[] = { { 8, 5, 1.0 / 3.0, 123456789 } };

	assert_non_null(c);
	expect_status(solver_cache_put(c, "fwd;x=2,3,8,8;gpu=NVIDIA_H100;cudnn=91900", 1 << 20,
				       &(solver_kernel_t){ 2, 1, 3, m1 }), SOLVER_OK, "put 1");
	expect_status(solver_cache_put(c, "bwd_filter;x=8,3,8,8", SOLVER_NO_LIMIT,
				       &(solver_kernel_t){ 8, 4, 1, m2 }), SOLVER_OK, "put 2");
	return c;
}

static void test_cache_round_trips_exactly(void **state)
{
	solver_cache_t *c = sample_cache(), *d = solver_cache_new();
	size_t len;
	char *text = solver_cache_format(c, &len), why[128] = "";
	solver_kernel_t k;
	(void)state;

	assert_non_null(text);
	expect_status(solver_cache_parse(d, text, len, why, sizeof(why)), SOLVER_OK, why);
	assert_int_equal(solver_cache_count(d), 2);
	assert_true(solver_cache_get(d, "bwd_filter;x=8,3,8,8", 1ull << 40, &k));
	assert_int_equal(k.batch, 8);
	assert_int_equal(k.quantum, 4);
	assert_int_equal(k.n, 1);
	assert_true(k.m[0].time == 1.0 / 3.0);   /* bit for bit */
	assert_int_equal(k.m[0].ws, 123456789);
	/* measured under a 1 MiB cap: no good for a 2 MiB limit */
	assert_true(solver_cache_get(d, "fwd;x=2,3,8,8;gpu=NVIDIA_H100;cudnn=91900", 1 << 20, &k));
	assert_false(solver_cache_get(d, "fwd;x=2,3,8,8;gpu=NVIDIA_H100;cudnn=91900", 2 << 20, &k));
	assert_false(solver_cache_get(d, "fwd;x=2,3,8,8;gpu=OTHER;cudnn=91900", 0, &k));
	/* the text of the copy is the same text */
	size_t len2;
	char *text2 = solver_cache_format(d, &len2);
	assert_int_equal(len, len2);
	assert_memory_equal(text, text2, len);
	free(text);
	free(text2);
	solver_cache_free(c);
	solver_cache_free(d);
}

static void expect_rejected(const char *text, size_t len, solver_status_t want, const char *what)
{
	solver_cache_t *d = solver_cache_new();
	char why[128] = "";
	solver_status_t st = solver_cache_parse(d, text, len, why, sizeof(why));

	if (st != want)
		fail_msg("%s: expected %s, got %s (%s)", what, solver_strerror(want),
			 solver_strerror(st), why);
	if (solver_cache_count(d) != 0)
		fail_msg("%s: a rejected file added %d entries", what, solver_cache_count(d));
	if (!why[0])
		fail_msg("%s: no reason given", what);
	solver_cache_free(d);
}

/* Signs hand-written record text (appends the checksum line), so only
 * what the text says is wrong, not its checksum. */
static char *resign(const char *text)
{
	size_t n = strlen(text);
	uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a 64, as the cache computes it */
	char *out = malloc(n + 32);

	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3ull;
	}
	memcpy(out, text, n);
	sprintf(out + n, "sum %016llx\n", (unsigned long long)h);
	return out;
}

static void test_cache_rejects_foreign_and_damaged_text(void **state)
{
	solver_cache_t *c = sample_cache();
	size_t len;
	char *text = solver_cache_format(c, &len);
	char *t;
	(void)state;

	expect_rejected("{\"json\": true}\n", 15, SOLVER_EFOREIGN, "a JSON file");
	expect_rejected("vmem-solver-cache 2\nsum 0\n", 26, SOLVER_EFOREIGN, "a later version");
	expect_rejected("", 0, SOLVER_EFOREIGN, "an empty file");
	/* truncated anywhere */
	for (size_t cut = 21; cut < len; cut += 7)
		expect_rejected(text, cut, SOLVER_ECORRUPT, "truncated");
	/* one byte flipped anywhere after the magic */
	for (size_t i = 20; i < len; i += 5) {
		t = strdup(text);
		t[i] ^= 0x01;
		expect_rejected(t, len, SOLVER_ECORRUPT, "a flipped byte");
		free(t);
	}
	/* well signed but impossible values */
	const char *bad[] = {
		"vmem-solver-cache 1\nk key 0 4 1 1\n5 0 1.0 0\n",          /* b > batch */
		"vmem-solver-cache 1\nk key 0 4 1 1\n1 0 -1.0 0\n",         /* negative time */
		"vmem-solver-cache 1\nk key 0 4 1 1\n1 0 nan 0\n",          /* NaN */
		"vmem-solver-cache 1\nk key 0 4 1 2\n1 0 1.0 0\n",          /* fewer rows than said */
		"vmem-solver-cache 1\nk key 0 4 1 1\n1 0 1.0 0 extra\n",    /* trailing junk */
		"vmem-solver-cache 1\nk key 0 4 1 0\nk key 0 4 1 0\n",      /* duplicate key */
		"vmem-solver-cache 1\nk key 0 4 99 0\n",                    /* quantum out of range */
		"vmem-solver-cache 1\nk key 0 4 1 1\n1 0 1.0 99999999999999999999\n", /* overflow */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char what[64];

		t = resign(bad[i]);
		snprintf(what, sizeof(what), "impossible value %zu", i);
		expect_rejected(t, strlen(t), SOLVER_ECORRUPT, what);
		free(t);
	}
	/* and a well-signed good one is accepted: the resign helper is right */
	t = resign("vmem-solver-cache 1\nk key 0 4 1 1\n1 0 1.0 0\n");
	solver_cache_t *d = solver_cache_new();
	expect_status(solver_cache_parse(d, t, strlen(t), NULL, 0), SOLVER_OK, "resigned good");
	assert_int_equal(solver_cache_count(d), 1);
	solver_cache_free(d);
	free(t);
	free(text);
	solver_cache_free(c);
}

static void test_cache_refuses_bad_keys(void **state)
{
	solver_cache_t *c = solver_cache_new();
	solver_meas_t m[] = { { 1, 0, 1.0, 0 } };
	solver_kernel_t k = { 1, 1, 1, m };
	char big[SOLVER_CACHE_KEY_MAX + 2];
	(void)state;

	expect_status(solver_cache_put(c, "has space", 0, &k), SOLVER_EINVAL, "space");
	expect_status(solver_cache_put(c, "new\nline", 0, &k), SOLVER_EINVAL, "newline");
	expect_status(solver_cache_put(c, "", 0, &k), SOLVER_EINVAL, "empty");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_status(solver_cache_put(c, big, 0, &k), SOLVER_EINVAL, "too long");
	assert_int_equal(solver_cache_count(c), 0);
	/* replacing keeps one entry */
	expect_status(solver_cache_put(c, "k", 0, &k), SOLVER_OK, "put");
	expect_status(solver_cache_put(c, "k", 5, &k), SOLVER_OK, "replace");
	assert_int_equal(solver_cache_count(c), 1);
	solver_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_sizes_follow_the_policy),
		cmocka_unit_test(test_least_like_keeps_the_parts_and_takes_the_least_workspace),
		cmocka_unit_test(test_wr_finds_papers_fig5_configuration),
		cmocka_unit_test(test_wr_slack_takes_least_workspace_near_the_fastest),
		cmocka_unit_test(test_wr_priced_trades_time_for_workspace),
		cmocka_unit_test(test_wr_reports_infeasible_when_nothing_fits),
		cmocka_unit_test(test_wr_rejects_malformed_tables),
		cmocka_unit_test(test_front_equals_exhaustive_pareto_front),
		cmocka_unit_test(test_front_holds_no_dominated_configuration),
		cmocka_unit_test(test_wr_with_quantum_keeps_slices_aligned),
		cmocka_unit_test(test_wd_solves_a_known_knapsack),
		cmocka_unit_test(test_wd_matches_exhaustive_search),
		cmocka_unit_test(test_wd_never_chooses_a_dominated_configuration),
		cmocka_unit_test(test_wd_infeasible_limit_is_found_before_glpk),
		cmocka_unit_test(test_wd_does_not_trust_glpk),
		cmocka_unit_test(test_wd_survives_a_glpk_internal_error),
		cmocka_unit_test(test_wd_writes_the_model_by_name),
		cmocka_unit_test(test_cache_round_trips_exactly),
		cmocka_unit_test(test_cache_rejects_foreign_and_damaged_text),
		cmocka_unit_test(test_cache_refuses_bad_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
