/* tests/unit/policy/test_vdnn.c - the vDNN passes (policy/offload.c,
 * prefetch.c) and their actions: all vs conv (vDNN §III-C), Fig. 10's
 * prefetch window, the time-aware placement, and OFFLOAD/PREFETCH actions
 * resolved in planned iterations. */
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

static drv_t d;
static net_t n;

static const policy_plan_t *planned(policy_offload_mode_t mode, policy_prefetch_mode_t pf,
				    uint64_t bw, uint64_t budget, uint64_t dur)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c;

	policy_config_default(&c);
	c.offload = mode;
	c.prefetch = pf;
	c.offload_min_bytes = 1024;
	c.h2d_bytes_per_s = bw;
	c.prefetch_budget = budget;
	drv_init(&d, &c);
	d.dur_ns = dur;
	net_init(&n, &d, &nc);
	for (int i = 0; i < 3; i++)
		net_train(&n, &d);
	assert_int_equal(policy_state(d.p), POLICY_PLANNED);
	return policy_plan(d.p);
}

static void done(void)
{
	net_free(&n);
	drv_free(&d);
}

static void test_all_offloads_every_tensor_live_across_the_boundary(void **state)
{
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_ALL, POLICY_PREFETCH_VDNN, 0, 0, 0);
	const policy_graph_t *g = &pl->g;

	(void)state;
	/* the batch, x1..x4 and y0..y3 (the loss is under offload_min_bytes) */
	assert_int_equal(pl->off.n, 9);
	for (int i = 0; i < pl->off.n; i++) {
		const policy_offload_t *o = &pl->off.v[i];
		const policy_tensor_t *t = &g->tensors[o->tensor];

		assert_true(t->flags & POLICY_T_CROSS);
		/* right after its last forward use (vDNN: the last consumer) */
		assert_int_equal(o->after_op, t->last_fwd_read >= 0 ? t->last_fwd_read : t->producer);
		assert_true(o->after_op < g->boundary);
		assert_int_equal(o->need_op, t->first_bwd_read);
	}
	done();
}

static void test_conv_offloads_only_convolution_inputs(void **state)
{
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_CONV, POLICY_PREFETCH_VDNN, 0, 0, 0);

	(void)state;
	/* the batch and x1..x3: the inputs of the 4 forward convolutions */
	assert_int_equal(pl->off.n, 4);
	for (int i = 0; i < pl->off.n; i++) {
		const policy_offload_t *o = &pl->off.v[i];

		assert_true(pl->g.tensors[o->tensor].flags & POLICY_T_CONV_IN);
		assert_int_equal(pl->g.ops[o->after_op].kind, VMEM_OP_CONV_FWD);
	}
	done();
}

static bool conv_bwd(vmem_op_kind_t k)
{
	return k == VMEM_OP_CONV_BWD_DATA || k == VMEM_OP_CONV_BWD_FILTER;
}

static void test_vdnn_prefetch_window_stops_at_next_convolution(void **state)
{
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_ALL, POLICY_PREFETCH_VDNN, 0, 0, 0);
	const policy_graph_t *g = &pl->g;
	int at_op[256] = { 0 };

	(void)state;
	for (int i = 0; i < pl->off.n; i++) {
		const policy_offload_t *o = &pl->off.v[i];

		assert_true(o->prefetch_op > o->after_op);
		assert_true(o->prefetch_op < o->need_op);
		/* Fig. 10: never prefetched from beyond the next conv layer */
		for (int k = o->prefetch_op + 1; k < o->need_op; k++)
			if (conv_bwd(g->ops[k].kind))
				fail_msg("t%d prefetched before #%d, a conv (#%d) sits before its use #%d",
					 o->tensor, o->prefetch_op, k, o->need_op);
		if (!o->fallback)
			at_op[o->prefetch_op]++;
		else
			assert_int_equal(o->prefetch_op, o->need_op - 1);
	}
	/* the search places one layer per backward op */
	for (int k = 0; k < g->nops; k++)
		assert_true(at_op[k] <= 1);
	done();
}

static void test_timed_prefetch_arrives_before_use(void **state)
{
	/* 1 us per op; each tensor's copy takes about 2.5 ops */
	const uint64_t op_ns = 1000;
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_ALL, POLICY_PREFETCH_TIMED, 0, 0, op_ns);
	const policy_graph_t *g = &pl->g;
	double bw;
	int order[64], m;
	double link = 0;

	(void)state;
	policy_offloads_free((policy_offloads_t *)&pl->off);
	/* re-place with a known bandwidth: the smallest tensor copies in 2.5 us */
	{
		uint64_t small = UINT64_MAX;
		policy_timing_t t = { 0 };
		policy_offloads_t o;

		assert_int_equal(policy_offload_choose(g, POLICY_OFFLOAD_ALL, 1024, &o), 0);
		for (int i = 0; i < o.n; i++)
			if (o.v[i].bytes < small)
				small = o.v[i].bytes;
		bw = (double)small / 2.5e-6;
		t.h2d_bytes_per_s = (uint64_t)bw;
		assert_int_equal(policy_prefetch_place(g, POLICY_PREFETCH_TIMED, &t, &o), 0);
		*(policy_offloads_t *)&pl->off = o;
	}
	/* replay the H2D link: copies issued in op order, one at a time */
	m = pl->off.n;
	for (int i = 0; i < m; i++)
		order[i] = i;
	/* (the plan issues copies at one op in the order they are needed) */
	for (int i = 0; i < m; i++)
		for (int j = i + 1; j < m; j++)
			if (pl->off.v[order[j]].prefetch_op < pl->off.v[order[i]].prefetch_op ||
			    (pl->off.v[order[j]].prefetch_op == pl->off.v[order[i]].prefetch_op &&
			     pl->off.v[order[j]].need_op < pl->off.v[order[i]].need_op)) {
				int x = order[i];
				order[i] = order[j];
				order[j] = x;
			}
	for (int i = 0; i < m; i++) {
		const policy_offload_t *o = &pl->off.v[order[i]];
		double issue = (double)o->prefetch_op * op_ns;
		double start = issue > link ? issue : link;
		double end = start + (double)o->bytes / bw * 1e9;

		assert_true(g->ops[o->prefetch_op].dur_ns == op_ns);
		if (end > (double)o->need_op * op_ns + 1e-6)
			fail_msg("t%d: prefetch before #%d ends at %.0f ns, after its use #%d at %.0f ns",
				 o->tensor, o->prefetch_op, end, o->need_op, (double)o->need_op * op_ns);
		assert_true(o->prefetch_op >= o->after_op + 1);
		link = end;
	}
	/* tensors needed again too soon to make the round trip are not
	 * offloaded: here the last activations before the loss */
	if (pl->off.dropped < 1 || pl->off.n + pl->off.dropped != 9)
		fail_msg("expected some of the 9 offloads dropped, got %d kept %d dropped",
			 pl->off.n, pl->off.dropped);
	done();
}

static void test_timed_prefetch_respects_budget(void **state)
{
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_ALL, POLICY_PREFETCH_TIMED, 1000000,
					  0, 1000);
	const policy_graph_t *g = &pl->g;
	policy_timing_t t = { .h2d_bytes_per_s = 1000000 };   /* slow link: everything early */
	policy_offloads_t o;
	uint64_t biggest = 0;

	(void)state;
	assert_int_equal(policy_offload_choose(g, POLICY_OFFLOAD_ALL, 1024, &o), 0);
	for (int i = 0; i < o.n; i++)
		if (o.v[i].bytes > biggest)
			biggest = o.v[i].bytes;
	t.budget = 2 * biggest;
	assert_int_equal(policy_prefetch_place(g, POLICY_PREFETCH_TIMED, &t, &o), 0);
	for (int k = 0; k < g->nops; k++) {
		uint64_t held = 0;

		for (int i = 0; i < o.n; i++)
			if (o.v[i].prefetch_op <= k && k < o.v[i].need_op)
				held += o.v[i].bytes;
		/* at most what the budget allows, unless a copy is as late as it can be */
		if (held > t.budget) {
			for (int i = 0; i < o.n; i++)
				if (o.v[i].prefetch_op <= k && k < o.v[i].need_op)
					assert_true(o.v[i].prefetch_op >= o.v[i].need_op - 1 ||
						    o.v[i].prefetch_op == k);
		}
	}
	policy_offloads_free(&o);
	done();
}

static void test_offload_and_prefetch_actions_in_planned_iterations(void **state)
{
	const policy_plan_t *pl = planned(POLICY_OFFLOAD_CONV, POLICY_PREFETCH_VDNN, 0, 0, 0);
	uint64_t seq0 = d.seq;
	int off = 0, pre = 0;

	(void)state;
	(void)pl;
	net_train(&n, &d);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].seq < seq0)
			continue;
		if (a->kind == POLICY_ACT_OFFLOAD) {
			off++;
			/* a conv input: the batch or an activation x1..x3 */
			assert_true(a->alloc_id == n.in[0] || a->alloc_id == n.x[1] ||
				    a->alloc_id == n.x[2] || a->alloc_id == n.x[3]);
			assert_int_equal(a->offset, 0);
			assert_int_equal(a->bytes, net_act_bytes(&n, a->alloc_id == n.in[0] ? 0 :
							  a->alloc_id == n.x[1] ? 1 :
							  a->alloc_id == n.x[2] ? 2 : 3));
			/* settled before the same call was issued: the copy may
			 * overlap that last read */
			bool settled = false;
			for (int j = 0; j < i; j++) {
				const policy_action_t *b = &d.acts[j].a;

				if (d.acts[j].seq == d.acts[i].seq && b->kind == POLICY_ACT_SETTLE &&
				    b->alloc_id == a->alloc_id && b->offset == a->offset &&
				    b->bytes == a->bytes)
					settled = true;
			}
			if (!settled)
				fail_msg("offload of alloc %llu after call seq %llu: expected a SETTLE of the same "
					 "range before that call, found none", (unsigned long long)a->alloc_id,
					 (unsigned long long)d.acts[i].seq);
		}
		if (a->kind == POLICY_ACT_PREFETCH && !a->next) {   /* the plan's, not the lookahead's */
			pre++;
			assert_true(a->until_op > a->plan_op);
		}
	}
	assert_int_equal(off, 4);
	assert_int_equal(pre, 4);
	{
		policy_stats_t st;

		policy_get_stats(d.p, &st);
		assert_int_equal(st.offloads, 4);
		assert_int_equal(st.prefetches, 4);
	}
	done();
}

/* Collects the VMEM_STATS lines. */
static void collect(void *ctx, const char *line)
{
	char *buf = ctx;
	size_t n = strlen(buf);

	snprintf(buf + n, 4096 - n, "%s\n", line);
}

/* The link's bandwidth comes from the runtime's timed copies
 * (policy_link_sample): not before enough bytes were measured, each
 * direction apart (D2H as H2D until measured), a configured value first;
 * a plan made afterwards places its prefetches with it. */
static void test_measured_link_bandwidth_places_prefetches(void **state)
{
	const uint64_t mib = (uint64_t)1 << 20, op_ns = 1000;
	int fast_dropped, slow_dropped, fast_first = 1 << 30, slow_first = 1 << 30;
	policy_stats_t st;
	char text[4096] = "";

	(void)state;
	/* no samples: the default; the plan assumes it */
	planned(POLICY_OFFLOAD_ALL, POLICY_PREFETCH_TIMED, 0, 0, op_ns);
	assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_H2D), POLICY_LINK_DEFAULT);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.plan_h2d, POLICY_LINK_DEFAULT);
	fast_dropped = policy_plan(d.p)->off.dropped;
	for (int i = 0; i < policy_plan(d.p)->off.n; i++)
		if (policy_plan(d.p)->off.v[i].prefetch_op < fast_first)
			fast_first = policy_plan(d.p)->off.v[i].prefetch_op;
	done();

	/* a slow link measured before the plan: 1 byte per ns (1 GB/s) */
	{
		policy_config_t c;
		net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };

		policy_config_default(&c);
		c.offload = POLICY_OFFLOAD_ALL;
		c.prefetch = POLICY_PREFETCH_TIMED;
		c.offload_min_bytes = 1024;
		drv_init(&d, &c);
		d.dur_ns = op_ns;
		/* below POLICY_LINK_MIN_BYTES: not trusted yet */
		policy_link_sample(d.p, POLICY_LINK_H2D, 16 * mib, 16 * mib);
		assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_H2D), POLICY_LINK_DEFAULT);
		policy_link_sample(d.p, POLICY_LINK_H2D, 48 * mib, 48 * mib);
		policy_link_sample(d.p, POLICY_LINK_H2D, 0, 5);   /* ignored */
		assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_H2D), 1000000000);
		assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_D2H), 1000000000);
		policy_link_sample(d.p, POLICY_LINK_D2H, 64 * mib, 32 * mib);
		assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_D2H), 2000000000);
		net_init(&n, &d, &nc);
		for (int i = 0; i < 3; i++)
			net_train(&n, &d);
		assert_int_equal(policy_state(d.p), POLICY_PLANNED);
		policy_get_stats(d.p, &st);
		if (st.plan_h2d != 1000000000 || st.plan_d2h != 2000000000)
			fail_msg("expected the plan to assume the measured 1 and 2 GB/s, got %llu and %llu",
				 (unsigned long long)st.plan_h2d, (unsigned long long)st.plan_d2h);
		slow_dropped = policy_plan(d.p)->off.dropped;
		for (int i = 0; i < policy_plan(d.p)->off.n; i++)
			if (policy_plan(d.p)->off.v[i].prefetch_op < slow_first)
				slow_first = policy_plan(d.p)->off.v[i].prefetch_op;
		/* a slower link: round trips that no longer fit are not made, and
		 * the copies that remain start earlier */
		if (!(slow_dropped > fast_dropped || slow_first < fast_first))
			fail_msg("expected the 1 GB/s plan to drop more offloads or prefetch earlier than "
				 "the 25 GB/s one: dropped %d vs %d, first prefetch at #%d vs #%d",
				 slow_dropped, fast_dropped, slow_first, fast_first);
		policy_stats_print(&st, collect, text);
		if (!strstr(text, "policy: link h2d measured   1.00 GB/s over      2 copies (64 MiB)") ||
		    !strstr(text, "policy: link the plan assumed  h2d   1.00 GB/s  d2h   2.00 GB/s"))
			fail_msg("expected the link lines in the stats, got:\n%s", text);
		done();
	}

	/* a configured bandwidth wins over a measured one */
	{
		policy_config_t c;

		policy_config_default(&c);
		c.h2d_bytes_per_s = 5000000000;
		drv_init(&d, &c);
		policy_link_sample(d.p, POLICY_LINK_H2D, 64 * mib, 64 * mib);
		assert_int_equal(policy_link_bandwidth(d.p, POLICY_LINK_H2D), 5000000000);
		drv_free(&d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_offloads_every_tensor_live_across_the_boundary),
		cmocka_unit_test(test_conv_offloads_only_convolution_inputs),
		cmocka_unit_test(test_vdnn_prefetch_window_stops_at_next_convolution),
		cmocka_unit_test(test_timed_prefetch_arrives_before_use),
		cmocka_unit_test(test_timed_prefetch_respects_budget),
		cmocka_unit_test(test_measured_link_bandwidth_places_prefetches),
		cmocka_unit_test(test_offload_and_prefetch_actions_in_planned_iterations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
