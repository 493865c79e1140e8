/* tests/unit/policy/test_evict.c - Belady's MIN from the plan
 * (policy/evict.c and policy_evict_order): the page used furthest in the
 * future goes first, distances wrap into the next iteration, measured
 * durations weigh them, and memory the plan does not know is left to LRU. */
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

/* #0 reads A, #1 reads B, #2 reads C, #3 reads A again and page 1 of D. */
#define OPS                                                                              \
	const pop_t ops[] = {                                                            \
		{ VMEM_OP_LAUNCH, 0, 1, { RG(1, 0, PG, ACC_R, "a") } },                  \
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, PG, ACC_R, "b") } },                  \
		{ VMEM_OP_LAUNCH, 0, 1, { RG(3, 0, PG, ACC_R, "c") } },                  \
		{ VMEM_OP_LAUNCH, 0, 2, { RG(1, 0, PG, ACC_R, "a"), RG(4, PG, PG, ACC_R, "d") } }, \
	}

static void test_furthest_next_use_is_evicted_first(void **state)
{
	OPS;
	policy_history_t h;
	policy_graph_t g;
	policy_evict_t e;
	uint64_t a, b, c;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 4, 2, 0), 0);
	assert_int_equal(policy_evict_build(&g, PG, NULL, &e), 0);
	/* after #0: B is next needed (#1), then C (#2), then A (#3) */
	a = policy_evict_key(&e, 1, 0, PG, 0);
	b = policy_evict_key(&e, 2, 0, PG, 0);
	c = policy_evict_key(&e, 3, 0, PG, 0);
	if (!(a > c && c > b))
		fail_msg("after #0 expected key A > C > B, got A %llu C %llu B %llu",
			 (unsigned long long)a, (unsigned long long)c, (unsigned long long)b);
	/* after #3 every next use is in the next iteration: A (#0) soonest */
	a = policy_evict_key(&e, 1, 0, PG, 3);
	b = policy_evict_key(&e, 2, 0, PG, 3);
	c = policy_evict_key(&e, 3, 0, PG, 3);
	if (!(c > b && b > a))
		fail_msg("after #3 expected key C > B > A, got C %llu B %llu A %llu",
			 (unsigned long long)c, (unsigned long long)b, (unsigned long long)a);
	/* LRU would pick the opposite: A was used last, and is needed first */
	policy_evict_free(&e);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_untouched_page_and_unknown_memory(void **state)
{
	OPS;
	policy_history_t h;
	policy_graph_t g;
	policy_evict_t e;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 4, 2, 0), 0);
	assert_int_equal(policy_evict_build(&g, PG, NULL, &e), 0);
	/* page 0 of D: D is in the plan, that page is never touched */
	assert_true(policy_evict_key(&e, 4, 0, PG, 1) == POLICY_KEY_UNUSED);
	assert_true(policy_evict_key(&e, 4, PG, PG, 1) < POLICY_KEY_UNUSED);
	/* a range spanning both pages is as urgent as its most urgent page */
	assert_int_equal(policy_evict_key(&e, 4, 0, 2 * PG, 1), policy_evict_key(&e, 4, PG, PG, 1));
	/* an allocation the plan never saw: the pool's LRU decides */
	assert_true(policy_evict_key(&e, 77, 0, PG, 1) == POLICY_KEY_UNKNOWN);
	assert_true(policy_evict_key(&e, 0, 0, PG, 1) == POLICY_KEY_UNKNOWN);
	policy_evict_free(&e);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_measured_durations_weigh_distances(void **state)
{
	/* #1 takes 100 us: C (needed after it) is further away than B and
	 * much further than by op count alone */
	OPS;
	pop_t t[4];
	policy_history_t h;
	policy_graph_t g;
	policy_evict_t e;

	(void)state;
	memcpy(t, ops, sizeof(t));
	t[0].dur_ns = 1000;
	t[1].dur_ns = 100000;
	t[2].dur_ns = 1000;
	t[3].dur_ns = 1000;
	assert_int_equal(prog_graph(&h, &g, t, 4, 2, 0), 0);
	assert_int_equal(policy_evict_build(&g, PG, NULL, &e), 0);
	/* after #0: B in 0 ns, C in 100000 ns, A in 101000 ns (keys are +1) */
	assert_int_equal(policy_evict_key(&e, 2, 0, PG, 0), 1);
	assert_int_equal(policy_evict_key(&e, 3, 0, PG, 0), 100001);
	assert_int_equal(policy_evict_key(&e, 1, 0, PG, 0), 101001);
	policy_evict_free(&e);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_policy_order_follows_the_plan_only_while_planned(void **state)
{
	net_cfg_t nc = { .layers = 3, .batch = 4, .style = NET_PER_TENSOR };
	policy_config_t c;
	drv_t d;
	net_t n;
	uint64_t k_w0, k_w2;

	(void)state;
	policy_config_default(&c);
	c.page_size = 4096;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	net_train(&n, &d);
	/* learning: no plan, LRU decides */
	assert_true(policy_evict_order(d.p, n.w[0], 0, 64) == POLICY_KEY_UNKNOWN);
	assert_int_equal(policy_op_distance(d.p, 0), -1);
	for (int i = 0; i < 3; i++)
		net_train(&n, &d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	/* the iteration just ended: layer 0's weight is needed first in the
	 * next forward, layer 2's last */
	k_w0 = policy_evict_order(d.p, n.w[0], 0, 64);
	k_w2 = policy_evict_order(d.p, n.w[2], 0, 64);
	assert_true(k_w0 != POLICY_KEY_UNKNOWN && k_w2 != POLICY_KEY_UNKNOWN);
	assert_true(k_w2 > k_w0);
	/* this iteration's fresh activation is ranked through its plan twin */
	{
		uint64_t k = policy_evict_order(d.p, n.y[0], 0, 64);

		assert_true(k != POLICY_KEY_UNKNOWN && k != POLICY_KEY_UNUSED);
	}
	net_free(&n);
	drv_free(&d);
}

/* Between policy_before and policy_after of a call (its before-steps run
 * there: a prefetch that needs room), the call has not run: its pages are
 * the ones needed next, not an iteration from now. */
static void test_a_call_not_yet_issued_is_the_next_use(void **state)
{
	policy_config_t c;
	policy_actions_t buf = { 0 };
	drv_t d;
	vmem_range_t r[5];

	(void)state;
	policy_config_default(&c);
	c.page_size = PG;
	drv_init(&d, &c);
	for (int i = 0; i < 5; i++)
		r[i] = R((uint64_t)i + 1, 0, PG, ACC_R, "x");
	vmem_op_info_t in[5];
	for (int k = 0; k < 5; k++)
		in[k] = (vmem_op_info_t){ .type = VMEM_INFO_LAUNCH, .u.launch.func = 0x100 + (uintptr_t)k };
	for (int it = 0; it < 6; it++) {
		for (int k = 0; k < 5; k++)
			drv_op(&d, VMEM_OP_LAUNCH, "k", &in[k], 1, &r[k]);
		drv_sync(&d);
	}
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	/* the next call reads A (alloc 1): matched, not issued */
	vmem_event_t ev = { .kind = VMEM_OP_LAUNCH, .api = "k", .thread = d.thread, .info = in[0],
			    .stream = d.stream, .seq = d.seq++, .nranges = 1, .ranges = &r[0] };
	ev.t_ns = ev.seq * 1000;
	policy_before(d.p, &ev, &buf);
	uint64_t a = policy_evict_order(d.p, 1, 0, PG), b = policy_evict_order(d.p, 2, 0, PG);
	if (!(a < b))
		fail_msg("A's call matched and not issued, B's next: expected key A < B, got A %llu "
			 "B %llu", (unsigned long long)a, (unsigned long long)b);
	/* the plan's op distances: A's call 0 (being issued), each other op
	 * once in 1..4; after A's call every one a call nearer, A's 4 */
	int dist[5], seen = 0;
	for (int op = 0; op < 5; op++) {
		dist[op] = policy_op_distance(d.p, op);
		if (dist[op] < 0 || dist[op] > 4)
			fail_msg("op %d: expected a distance in 0..4, got %d", op, dist[op]);
		seen |= 1 << dist[op];
	}
	assert_int_equal(seen, 0x1f);
	assert_int_equal(policy_op_distance(d.p, 5), -1);
	policy_after(d.p, &ev, &buf);
	for (int op = 0; op < 5; op++)
		if (policy_op_distance(d.p, op) != (dist[op] + 4) % 5)
			fail_msg("op %d after the call: expected distance %d, got %d", op,
				 (dist[op] + 4) % 5, policy_op_distance(d.p, op));
	a = policy_evict_order(d.p, 1, 0, PG);
	b = policy_evict_order(d.p, 2, 0, PG);
	if (!(a > b))
		fail_msg("after A's call: expected key A > B (A next in the next iteration), got A "
			 "%llu B %llu", (unsigned long long)a, (unsigned long long)b);
	policy_actions_free(&buf);
	drv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_furthest_next_use_is_evicted_first),
		cmocka_unit_test(test_untouched_page_and_unknown_memory),
		cmocka_unit_test(test_measured_durations_weigh_distances),
		cmocka_unit_test(test_policy_order_follows_the_plan_only_while_planned),
		cmocka_unit_test(test_a_call_not_yet_issued_is_the_next_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
