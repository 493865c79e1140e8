/* tests/unit/policy/test_hostpages.c - the pages a call beyond the budget
 * maps from the host (policy/hostpages.c) and what the plan does with the
 * choice: the eviction order skips those uses (evict.c), the prefetches
 * for the call leave them out (plan.c).
 *
 * The iteration, in 4 KiB pages, a budget of 5 (GUESS: a scanned kernel
 * argument, its extent taken to the allocation's end; only its first
 * page is the call's own):
 *
 *   #0 copy in     C
 *   #1 k1          B [2, 4) GUESS, A [0, 4) GUESS     6 pages: 1 from the host
 *   #2 k2          B [1, 4) GUESS, A [0, 4) GUESS     7 pages: 2 from the host
 *   #3 k3          A [0, 4) read, C written            5 pages
 *   #4 k4          B [0, 4) read-write                 4 pages
 *   #5 copy out    C
 *
 * #2 leaves B's pages 2 and 3 (needed at #4) on the host, not A's (needed
 * at #3).  #1 by the plain order sees B's page 3 and A's pages needed
 * alike at #2; once #2 maps B's page 3 from the host, that page is needed
 * only at #4, so #1 leaves it too - B's id being the smaller, a tie would
 * have picked A's page 3 (the same tie as random:1619885934's two channel
 * kernels in a row).
 */
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

#define PG 4096
#define A 21
#define B 20
#define C 22
#define GUESS (VMEM_ACCESS_RW | VMEM_ACCESS_GUESS)

/* The iteration above with B's tensors `sh` bytes further on. */
static void iteration_at(drv_t *d, uint64_t sh)
{
	vmem_range_t r[2];

	r[0] = R(0, 0x1000, PG, VMEM_ACCESS_R, "src");
	r[1] = R(C, 0, PG, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	r[0] = R(B, 2 * PG + sh, 2 * PG, GUESS, "arg0");
	r[1] = R(A, 0, 4 * PG, GUESS, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "k1", NULL, 2, r);
	r[0] = R(B, PG + sh, 3 * PG, GUESS, "arg0");
	r[1] = R(A, 0, 4 * PG, GUESS, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "k2", NULL, 2, r);
	r[0] = R(A, 0, 4 * PG, VMEM_ACCESS_R, "x");
	r[1] = R(C, 0, PG, VMEM_ACCESS_W, "y");
	drv_op(d, VMEM_OP_LAUNCH, "k3", NULL, 2, r);
	r[0] = R(B, sh, 4 * PG, VMEM_ACCESS_RW, "x");
	drv_op(d, VMEM_OP_LAUNCH, "k4", NULL, 1, r);
	r[0] = R(C, 0, 4, VMEM_ACCESS_R, "src");
	r[1] = R(0, 0x2000, 4, VMEM_ACCESS_W, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	drv_sync(d);
}

static void one_iteration(drv_t *d)
{
	iteration_at(d, 0);
}

/* Another, A of 2 pages: #1's own page of B (the first of its guess) is
 * the one needed last after it, and is not the pool's to send away.
 *
 *   #0 copy in     C
 *   #1 k1          B [1, 4) GUESS, A [0, 2) GUESS     5 pages
 *   #2 k2          B [2, 4) read, A [0, 2) read        4 pages
 *   #3 k3          B [1, 2) read-write, C written      2 pages
 *   #4 copy out    C                                               */
static void own_iteration(drv_t *d)
{
	vmem_range_t r[2];

	r[0] = R(0, 0x1000, PG, VMEM_ACCESS_R, "src");
	r[1] = R(C, 0, PG, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	r[0] = R(B, PG, 3 * PG, GUESS, "arg0");
	r[1] = R(A, 0, 2 * PG, GUESS, "arg1");
	drv_op(d, VMEM_OP_LAUNCH, "k1", NULL, 2, r);
	r[0] = R(B, 2 * PG, 2 * PG, VMEM_ACCESS_R, "x");
	r[1] = R(A, 0, 2 * PG, VMEM_ACCESS_R, "w");
	drv_op(d, VMEM_OP_LAUNCH, "k2", NULL, 2, r);
	r[0] = R(B, PG, PG, VMEM_ACCESS_RW, "x");
	r[1] = R(C, 0, PG, VMEM_ACCESS_W, "y");
	drv_op(d, VMEM_OP_LAUNCH, "k3", NULL, 2, r);
	r[0] = R(C, 0, 4, VMEM_ACCESS_R, "src");
	r[1] = R(0, 0x2000, 4, VMEM_ACCESS_W, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", NULL, 2, r);
	drv_sync(d);
}

/* one_iteration with B's tensors a page further on every other
 * iteration (B of 5 pages): a caching allocator laying its segment out
 * anew, B UNSTABLE to the plan. */
static void moving_iteration(drv_t *d)
{
	static int n;

	iteration_at(d, (uint64_t)(n++ % 2) * PG);
}

/* A driver under `all` planned from `iter`, with a budget of `pages`
 * pages and the pool's host mapping as `host_map` says. */
static void planned_by(drv_t *d, void (*iter)(drv_t *), uint64_t pages, bool host_map)
{
	policy_config_t c;

	policy_config_default(&c);
	c.offload = POLICY_OFFLOAD_ALL;
	c.page_size = PG;
	c.small_threshold = 1024;
	c.offload_min_bytes = PG;
	c.budget = pages * PG;
	c.host_map = host_map;
	c.soft_permille = 1000;   /* moving_iteration: half its calls move */
	drv_init(d, &c);
	policy_allocated(d->p, A, 4 * PG);
	policy_allocated(d->p, B, 5 * PG);
	policy_allocated(d->p, C, PG);
	for (int i = 0; i < 5; i++)
		iter(d);
	assert_int_equal(policy_state(d->p), POLICY_PLANNED);
}

static void planned(drv_t *d, uint64_t pages, bool host_map)
{
	planned_by(d, one_iteration, pages, host_map);
}

/* The plan's op index of the call named `api`. */
static int op_of(const policy_graph_t *g, const char *api)
{
	for (int k = 0; k < g->nops; k++)
		if (!strcmp(g->ops[k].api, api))
			return k;
	fail_msg("no op %s in the plan", api);
	return -1;
}

/* The host pages of op k as "a<id>p<page> ..." into buf. */
static const char *host_of(const policy_hostpages_t *h, int k, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < h->n && n < len; i++)
		if (h->v[i].op == k)
			n += (size_t)snprintf(buf + n, len - n, "%sa%llup%llu", n ? " " : "",
					      (unsigned long long)h->v[i].alloc_id,
					      (unsigned long long)h->v[i].page);
	return buf;
}

static void expect_host(const policy_plan_t *pl, const char *api, const char *want)
{
	char got[256];

	host_of(&pl->host, op_of(&pl->g, api), got, sizeof(got));
	if (strcmp(got, want))
		fail_msg("%s: expected the pages \"%s\" mapped from the host, got \"%s\"", api, want,
			 got);
}

static void test_a_call_beyond_the_budget_leaves_the_pages_needed_last(void **state)
{
	drv_t d;

	(void)state;
	planned(&d, 5, true);
	const policy_plan_t *pl = policy_plan(d.p);

	expect_host(pl, "k2", "a20p2 a20p3");
	/* by the plain order a tie with A's page 3; after #2's choice, B's
	 * page 3 is needed last */
	expect_host(pl, "k1", "a20p3");
	expect_host(pl, "k3", "");   /* fits */
	expect_host(pl, "k4", "");
	drv_free(&d);
}

/* The eviction order skips the uses from the host: after the copy in
 * (#0), B's page 3 is needed next by #4, A's page 3 by #1. */
static void test_the_order_skips_the_uses_from_the_host(void **state)
{
	drv_t d;

	(void)state;
	planned(&d, 5, true);
	const policy_plan_t *pl = policy_plan(d.p);
	int k0 = op_of(&pl->g, "cudaMemcpyAsync"), k1 = op_of(&pl->g, "k1");
	int k4 = op_of(&pl->g, "k4");
	uint64_t b3 = policy_evict_key(&pl->evict, B, 3 * PG, PG, k0);
	uint64_t a3 = policy_evict_key(&pl->evict, A, 3 * PG, PG, k0);
	uint64_t b2 = policy_evict_key(&pl->evict, B, 2 * PG, PG, k0);
	uint64_t want_b3 = policy_evict_key(&pl->evict, B, 0, PG, k0);   /* next: #4 */

	if (!(b3 > a3) || b3 != want_b3)
		fail_msg("after #%d: expected B's page 3 needed at #%d (key %llu, after A's page 3 "
			 "at #%d: %llu), got %llu", k0, k4, (unsigned long long)want_b3, k1,
			 (unsigned long long)a3, (unsigned long long)b3);
	/* B's page 2 is #1's own (stated): needed at #1 */
	if (b2 != a3)
		fail_msg("expected B's page 2 (stated by #1) needed as soon as A's page 3, got %llu "
			 "and %llu", (unsigned long long)b2, (unsigned long long)a3);
	drv_free(&d);
}

/* Does a PREFETCH step for op k cover page p of alloc? */
static bool fetches(const policy_plan_t *pl, int k, uint64_t alloc, uint64_t p)
{
	for (int i = 0; i < pl->nsteps; i++) {
		const policy_step_t *s = &pl->steps[i];
		const policy_use_t *u;
		uint64_t lo;

		if (s->kind != POLICY_STEP_PREFETCH || s->until_op != k || s->use < 0)
			continue;
		u = &pl->g.uses[s->use];
		lo = u->offset + s->delta;
		if (u->alloc_id == alloc && lo < (p + 1) * PG && p * PG < lo + s->bytes)
			return true;
	}
	return false;
}

static void test_prefetches_for_the_call_leave_them_out(void **state)
{
	drv_t d;
	uint64_t seq;
	int bad = 0;

	(void)state;
	planned(&d, 5, true);
	const policy_plan_t *pl = policy_plan(d.p);
	int k1 = op_of(&pl->g, "k1"), k2 = op_of(&pl->g, "k2");

	if (fetches(pl, k1, B, 3) || fetches(pl, k2, B, 2) || fetches(pl, k2, B, 3))
		fail_msg("expected no PREFETCH of B's pages 3 for #%d and 2, 3 for #%d (mapped from "
			 "the host), got %d %d %d", k1, k2, fetches(pl, k1, B, 3),
			 fetches(pl, k2, B, 2), fetches(pl, k2, B, 3));
	/* the rest of the calls' ranges still come */
	for (uint64_t p = 0; p < 4; p++)
		if (!fetches(pl, k1, A, p) || !fetches(pl, k2, A, p))
			fail_msg("expected the lookahead to bring A's page %llu for #%d and #%d",
				 (unsigned long long)p, k1, k2);
	if (!fetches(pl, k1, B, 2) || !fetches(pl, k2, B, 1))
		fail_msg("expected the lookahead to bring the stated pages of B (2 for #%d, 1 for #%d)",
			 k1, k2);
	/* and a planned iteration's actions agree */
	seq = d.seq;
	one_iteration(&d);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq < seq || d.acts[i].kind != POLICY_ACT_PREFETCH || a->alloc_id != B)
			continue;
		if ((a->until_op == k1 && a->offset + a->bytes > 3 * PG) ||
		    (a->until_op == k2 && a->offset + a->bytes > 2 * PG))
			bad++;
	}
	if (bad)
		fail_msg("a planned iteration: expected no PREFETCH of B's host pages, got %d", bad);
	drv_free(&d);
}

/* The first page of a guessed extent is the call's own: the pool keeps
 * it on the device whatever the order says, so it is never chosen; and
 * a call whose own pages alone exceed the budget is the pool's to split
 * (resident pages first: pool_acquire_flags' POOL_ACQ_HOST_STATED). */
static void test_the_calls_own_pages_stay(void **state)
{
	drv_t d;

	(void)state;
	planned_by(&d, own_iteration, 4, true);
	/* B's page 1 is needed last (#3), but #1 states it */
	expect_host(policy_plan(d.p), "k1", "a21p1");
	drv_free(&d);
	planned_by(&d, own_iteration, 1, true);
	expect_host(policy_plan(d.p), "k1", "");
	drv_free(&d);
}

/* A call over an allocation whose blocks move between iterations: the
 * pages it needs next time are not the ones learned, and the choice is
 * the pool's, as without the pass. */
static void test_none_over_a_moving_layout(void **state)
{
	drv_t d;
	const policy_alloc_t *b;

	(void)state;
	planned_by(&d, moving_iteration, 5, true);
	b = policy_graph_alloc(&policy_plan(d.p)->g, B);
	if (!b || b->cls != POLICY_ALLOC_UNSTABLE)
		fail_msg("expected B unstable to the plan, got class %d", b ? b->cls : -1);
	expect_host(policy_plan(d.p), "k1", "");
	expect_host(policy_plan(d.p), "k2", "");
	drv_free(&d);
}

/* Nothing to choose: every call fits, or the pool maps nothing from the
 * host, and the steps are as without the pass. */
static void test_none_when_it_fits_or_without_host_mapping(void **state)
{
	drv_t d;

	(void)state;
	planned(&d, 7, true);
	if (policy_plan(d.p)->host.n)
		fail_msg("a budget of 7 pages: expected no page from the host, got %d",
			 policy_plan(d.p)->host.n);
	if (!fetches(policy_plan(d.p), op_of(&policy_plan(d.p)->g, "k2"), B, 3))
		fail_msg("a budget of 7 pages: expected the lookahead to bring B's page 3 for k2");
	drv_free(&d);
	planned(&d, 5, false);
	if (policy_plan(d.p)->host.n)
		fail_msg("no host mapping: expected no page from the host, got %d",
			 policy_plan(d.p)->host.n);
	drv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_call_beyond_the_budget_leaves_the_pages_needed_last),
		cmocka_unit_test(test_the_order_skips_the_uses_from_the_host),
		cmocka_unit_test(test_prefetches_for_the_call_leave_them_out),
		cmocka_unit_test(test_the_calls_own_pages_stay),
		cmocka_unit_test(test_none_over_a_moving_layout),
		cmocka_unit_test(test_none_when_it_fits_or_without_host_mapping),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
