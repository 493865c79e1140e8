/* tests/unit/policy/test_dyn.c - vDNN-dyn's decision (policy/dyn.c):
 * the peak resident bytes under an offload set, checked by hand on a tiny
 * iteration; none, conv or all, the first that fits the budget (vDNN
 * §III-C's order), with the largest op and the headroom as margins; the
 * decision in the plan, its OFFLOAD actions, the stats line and the NOTE
 * MADE action. */
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

/* ---- a tiny iteration, computed by hand ----
 *
 *   #0 memcpy      host -> a1 (1000, the batch)
 *   #1 conv_fwd    x a1, w a9 (100) -> y a2 (2000)
 *   #2 act_fwd     a2 -> a3 (2000)
 *   #3 softmax_fwd a3 -> a4 (10)
 *   ---- boundary (#4: the first backward kind) ----
 *   #4 softmax_bwd a4 -> a5 (2000)
 *   #5 act_bwd     x a2, y a3, dy a5 -> dx a6 (2000)
 *   #6 conv_bwd_filter x a1, dy a6 -> dw a8 (100)
 *   #7 sgd kernel  a9, a8 (read-write)
 *
 * Every allocation is STABLE and written whole before it is read (a9 is
 * only read and updated in place: always live).  Live after each op:
 *   #0: a1 + a9                     = 1100
 *   #1: a1 + a2 + a9                = 3100
 *   #2: a1 + a2 + a3 + a9           = 5100
 *   #3: a1 + a2 + a3 + a4 + a9      = 5110
 *   #4: a1 + a2 + a3 + a5 + a9      = 7100   <- peak without offload
 *   #5: a1 + a6 + a9                = 3100
 *   #6: a8 + a9                     =  200
 *   #7: a9                          =  100
 * Tensors live across the boundary, over 100 bytes: a1 (last forward read
 * #1, first backward read #6), a2 (#2, #5), a3 (#3, #5). */

typedef struct {
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
} tiny_t;

static void tiny_build(tiny_t *x)
{
	const pop_t tiny[] = {
		{ VMEM_OP_MEMCPY, 0, 2, { RG(0, 0x1000, 1000, ACC_R, "src"), RG(1, 0, 1000, ACC_WW, "dst") } },
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 1000, ACC_R, "x"), RG(9, 0, 100, ACC_R, "w"),
					    RG(2, 0, 2000, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 2000, ACC_R, "x"), RG(3, 0, 2000, ACC_WW, "y") } },
		{ VMEM_OP_SOFTMAX_FWD, 0, 2, { RG(3, 0, 2000, ACC_R, "x"), RG(4, 0, 10, ACC_WW, "y") } },
		{ VMEM_OP_SOFTMAX_BWD, 0, 2, { RG(4, 0, 10, ACC_R, "y"), RG(5, 0, 2000, ACC_WW, "dx") } },
		{ VMEM_OP_ACT_BWD, 0, 4, { RG(2, 0, 2000, ACC_R, "x"), RG(3, 0, 2000, ACC_R, "y"),
					   RG(5, 0, 2000, ACC_R, "dy"), RG(6, 0, 2000, ACC_WW, "dx") } },
		{ VMEM_OP_CONV_BWD_FILTER, 0, 3, { RG(1, 0, 1000, ACC_R, "x"), RG(6, 0, 2000, ACC_R, "dy"),
						   RG(8, 0, 100, ACC_WW, "dw") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(9, 0, 100, ACC_RW, "arg0"), RG(8, 0, 100, ACC_RW, "arg1") } },
	};

	assert_int_equal(prog_graph(&x->h, &x->g, tiny, 8, 2, 0), 0);
	assert_int_equal(x->g.boundary, 4);
	assert_int_equal(policy_liveness(&x->g, &x->l), 0);
}

static void tiny_free(tiny_t *x)
{
	policy_live_free(&x->l);
	policy_graph_free(&x->g);
	policy_history_free(&x->h);
}

/* The offload of the tensor on allocation `a` (after_op checked). */
static policy_offload_t *off_of(const tiny_t *x, policy_offloads_t *o, uint64_t a, int after)
{
	for (int i = 0; i < o->n; i++)
		if (x->g.tensors[o->v[i].tensor].alloc_id == a) {
			assert_int_equal(o->v[i].after_op, after);
			return &o->v[i];
		}
	fail_msg("no offload of alloc %llu", (unsigned long long)a);
	return NULL;
}

static void test_peak_resident_by_hand(void **state)
{
	tiny_t x;
	policy_offloads_t o;
	int at = -1;

	(void)state;
	tiny_build(&x);
	/* no offload: liveness's curve, 7100 after #4 */
	assert_int_equal(policy_peak_resident(&x.g, &x.l, NULL, &at), 7100);
	assert_int_equal(at, 4);
	assert_int_equal(x.l.peak_live, 7100);

	assert_int_equal(policy_offload_choose(&x.g, POLICY_OFFLOAD_ALL, 100, &o), 0);
	assert_int_equal(o.n, 3);
	/* each prefetched before the op before its first backward read:
	 *   a1 (1000) away after #1..#4 (back before #5)
	 *   a2 (2000) away after #2..#3 (back before #4)
	 *   a3 (2000) away after #3     (back before #4)
	 * resident: #0 1100, #1 3100-1000 = 2100, #2 5100-3000 = 2100,
	 * #3 5110-5000 = 110, #4 7100-1000 = 6100, #5 3100, #6 200, #7 100 */
	off_of(&x, &o, 1, 1)->prefetch_op = 5;
	assert_int_equal(off_of(&x, &o, 1, 1)->need_op, 6);
	off_of(&x, &o, 2, 2)->prefetch_op = 4;
	assert_int_equal(off_of(&x, &o, 2, 2)->need_op, 5);
	off_of(&x, &o, 3, 3)->prefetch_op = 4;
	assert_int_equal(off_of(&x, &o, 3, 3)->need_op, 5);
	assert_int_equal(policy_peak_resident(&x.g, &x.l, &o, &at), 6100);
	assert_int_equal(at, 4);
	/* no prefetch placed: away until the first backward read
	 *   a1 after #1..#5, a2 and a3 after #2..#4 and #3..#4
	 * resident: #0 1100, #1 2100, #2 2100, #3 110, #4 7100-5000 = 2100,
	 * #5 3100-1000 = 2100, #6 200, #7 100: 2100, first after #1 */
	for (int i = 0; i < o.n; i++)
		o.v[i].prefetch_op = -1;
	assert_int_equal(policy_peak_resident(&x.g, &x.l, &o, &at), 2100);
	assert_int_equal(at, 1);
	policy_offloads_free(&o);
	tiny_free(&x);
}

static void test_op_bytes_are_its_vmem_arguments(void **state)
{
	tiny_t x;

	(void)state;
	tiny_build(&x);
	/* the copy's host source is not vmem memory */
	assert_int_equal(policy_op_bytes(&x.g, 0), 1000);
	assert_int_equal(policy_op_bytes(&x.g, 1), 1000 + 100 + 2000);
	/* act_bwd holds x, y, dy and dx at once: 8000, more than any peak after an op */
	assert_int_equal(policy_op_bytes(&x.g, 5), 8000);
	tiny_free(&x);
}

static void test_largest_op_must_fit_too(void **state)
{
	tiny_t x;
	policy_dyn_config_t c = { .budget = 7500, .headroom = 0, .liveness = true,
				  .offload_min_bytes = 100 };
	policy_dyn_t d;
	policy_offloads_t o;

	(void)state;
	tiny_build(&x);
	/* none's peak (7100) fits in 7500, but act_bwd's 8000 bytes do not:
	 * nothing fits, dyn takes the most memory-saving set */
	assert_int_equal(policy_dyn_choose(&x.g, &x.l, &c, &d, &o, NULL), POLICY_OFFLOAD_ALL);
	assert_int_equal(d.chosen, POLICY_OFFLOAD_ALL);
	assert_int_equal(d.fits, 0);
	assert_int_equal(d.op_bytes, 8000);
	assert_int_equal(d.op_bytes_op, 5);
	assert_int_equal(d.peak_none, 7100);
	assert_int_equal(o.n, 3);
	policy_offloads_free(&o);
	/* with room for act_bwd, none fits */
	c.budget = 8000;
	assert_int_equal(policy_dyn_choose(&x.g, &x.l, &c, &d, &o, NULL), POLICY_OFFLOAD_NONE);
	assert_int_equal(d.fits, 1);
	assert_int_equal(o.n, 0);
	policy_offloads_free(&o);
	tiny_free(&x);
}

static void test_dead_bytes_count_without_liveness(void **state)
{
	tiny_t x;
	policy_dyn_config_t c = { .budget = 1 << 20, .headroom = 0, .liveness = false,
				  .offload_min_bytes = 100 };
	policy_dyn_t d;

	(void)state;
	tiny_build(&x);
	/* nothing is dropped: every touched byte stays, 1000 + 2000 * 4 + 10 +
	 * 100 + 100 = 9210 after every op */
	assert_int_equal(policy_dyn_choose(&x.g, &x.l, &c, &d, NULL, NULL), POLICY_OFFLOAD_NONE);
	assert_int_equal(d.peak_none, 9210);
	tiny_free(&x);
}

/* A prefetch into a budget with no room for it is moved after the last op
 * where, back on the device, the tensor would be over the limit.  tiny
 * under ALL, prefetches placed by hand: a1 before #2, a2 and a3 before #4.
 * Resident after each op: #0 1100, #1 2100, #2 3100, #3 1110, #4 7100,
 * #5 3100, #6 200, #7 100; while each op runs (before it, plus what it
 * writes whole): #0 1100, #1 3100, #2 2100 + 2000 = 4100, #3 3110, #4 7100,
 * #5 7100 + 2000 = 9100, #6 3200, #7 200. */
static void test_prefetch_fit_moves_what_has_no_room(void **state)
{
	tiny_t x;
	policy_offloads_t o;

	(void)state;
	tiny_build(&x);
	assert_int_equal(policy_offload_choose(&x.g, POLICY_OFFLOAD_ALL, 100, &o), 0);
	off_of(&x, &o, 1, 1)->prefetch_op = 2;
	off_of(&x, &o, 2, 2)->prefetch_op = 4;
	off_of(&x, &o, 3, 3)->prefetch_op = 4;
	/* everything fits under 10000 (9100 at most), and 9500: a1 is over
	 * nowhere between #2 and its use #6 */
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 10000), 0);
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 9500), 0);
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 0), 0);
	assert_int_equal(off_of(&x, &o, 1, 1)->prefetch_op, 2);
	/* under 4000: a2 and a3 (needed first, by #5) are over at #4 (7100,
	 * then 5100): both come back right before #5; a1 is over at #2 (4100)
	 * and #5 (9100): it comes back before its use #6 */
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 4000), 3);
	assert_int_equal(off_of(&x, &o, 2, 2)->prefetch_op, 5);
	assert_int_equal(off_of(&x, &o, 3, 3)->prefetch_op, 5);
	assert_int_equal(off_of(&x, &o, 1, 1)->prefetch_op, 6);
	/* under 5000 from the start: a2 and a3 move (7100, then 5100 at #4),
	 * after which #4 holds 3100 and #2 4100: a1 is over only at #5
	 * (9100), so it comes back after it: before #6 */
	off_of(&x, &o, 1, 1)->prefetch_op = 2;
	off_of(&x, &o, 2, 2)->prefetch_op = 4;
	off_of(&x, &o, 3, 3)->prefetch_op = 4;
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 5000), 3);
	assert_int_equal(off_of(&x, &o, 1, 1)->prefetch_op, 6);
	/* under 6000: a2 moves (7100 at #4), after which #4 holds 5100 and
	 * a3 stays; a1 is over at #5 (9100): before #6 */
	off_of(&x, &o, 1, 1)->prefetch_op = 2;
	off_of(&x, &o, 2, 2)->prefetch_op = 4;
	off_of(&x, &o, 3, 3)->prefetch_op = 4;
	assert_int_equal(policy_prefetch_fit(&x.g, &x.l, false, &o, 6000), 2);
	assert_int_equal(off_of(&x, &o, 2, 2)->prefetch_op, 5);
	assert_int_equal(off_of(&x, &o, 3, 3)->prefetch_op, 4);
	assert_int_equal(off_of(&x, &o, 1, 1)->prefetch_op, 6);
	policy_offloads_free(&o);
	tiny_free(&x);
}

/* ---- the workspace room at each convolution ---- */

static void room_is(const uint64_t *room, int k, uint64_t want)
{
	if (room[k] != want)
		fail_msg("room at #%d: expected %llu, got %llu", k, (unsigned long long)want,
			 (unsigned long long)room[k]);
}

static void test_conv_room_by_hand(void **state)
{
	tiny_t x;
	policy_offloads_t o;
	uint64_t room[8];

	(void)state;
	tiny_build(&x);
	/* #1 conv_fwd runs beside what is resident after #0 (a1 + a9 = 1100)
	 * and its output a2 (2000); #6 conv_bwd_filter beside what is
	 * resident after #5 (a1 + a6 + a9 = 3100) and its output a8 (100) */
	assert_int_equal(policy_conv_room(&x.g, &x.l, false, NULL, 10000, room), 0);
	room_is(room, 1, 10000 - 3100);
	room_is(room, 6, 10000 - 3200);
	for (int k = 0; k < 8; k++)
		if (k != 1 && k != 6)
			room_is(room, k, UINT64_MAX);
	/* offloaded until its backward use (no prefetch placed), a1 is away
	 * after #5 but back while #6 runs: the room is the same */
	assert_int_equal(policy_offload_choose(&x.g, POLICY_OFFLOAD_ALL, 100, &o), 0);
	for (int i = 0; i < o.n; i++)
		o.v[i].prefetch_op = -1;
	assert_int_equal(policy_conv_room(&x.g, &x.l, false, &o, 10000, room), 0);
	room_is(room, 1, 10000 - 3100);
	room_is(room, 6, 10000 - 3200);
	/* prefetched before #5 instead, a1 is resident after #5 already:
	 * counted once, the same room */
	off_of(&x, &o, 1, 1)->prefetch_op = 5;
	assert_int_equal(policy_conv_room(&x.g, &x.l, false, &o, 10000, room), 0);
	room_is(room, 6, 10000 - 3200);
	policy_offloads_free(&o);
	/* a budget below what the plan keeps resident (3100 after #5): the
	 * plan does not hold there, and no room is known anywhere (not the
	 * zero a solver would take for good); none known: no limit */
	assert_int_equal(policy_conv_room(&x.g, &x.l, false, NULL, 3000, room), 0);
	room_is(room, 1, UINT64_MAX);
	room_is(room, 6, UINT64_MAX);
	/* a budget the curve just fits (its peak): rooms as before */
	uint64_t pk = policy_peak_resident(&x.g, &x.l, NULL, NULL);

	assert_int_equal(policy_conv_room(&x.g, &x.l, false, NULL, pk, room), 0);
	room_is(room, 1, pk > 3100 ? pk - 3100 : 0);
	room_is(room, 6, pk > 3200 ? pk - 3200 : 0);
	assert_int_equal(policy_conv_room(&x.g, &x.l, false, NULL, 0, room), 0);
	room_is(room, 1, UINT64_MAX);
	/* liveness off: every touched byte stays (9210, see above) */
	assert_int_equal(policy_conv_room(&x.g, &x.l, true, NULL, 20000, room), 0);
	room_is(room, 1, 20000 - 9210 - 2000);
	tiny_free(&x);
}

static void test_conv_room_leaves_out_the_workspace(void **state)
{
	/* two convolutions sharing one workspace a7 (5000, written whole by
	 * each): the workspace is what the room is for, never counted in it
	 *   #0 memcpy host -> a1 (1000)
	 *   #1 conv_fwd x a1, w a9 (100) -> y a2 (2000), ws a7
	 *   #2 conv_bwd_data w a9, dy a2 -> dx a3 (1500), ws a7
	 *   #3 memcpy a3 -> host */
	const pop_t prog[] = {
		{ VMEM_OP_MEMCPY, 0, 2, { RG(0, 0x1000, 1000, ACC_R, "src"), RG(1, 0, 1000, ACC_WW, "dst") } },
		{ VMEM_OP_CONV_FWD, 0, 4, { RG(1, 0, 1000, ACC_R, "x"), RG(9, 0, 100, ACC_R, "w"),
					    RG(2, 0, 2000, ACC_WW, "y"), RG(7, 0, 5000, ACC_WW, "ws") } },
		{ VMEM_OP_CONV_BWD_DATA, 0, 4, { RG(9, 0, 100, ACC_R, "w"), RG(2, 0, 2000, ACC_R, "dy"),
						 RG(3, 0, 1500, ACC_WW, "dx"), RG(7, 0, 5000, ACC_WW, "ws") } },
		{ VMEM_OP_MEMCPY, 0, 2, { RG(3, 0, 1500, ACC_R, "src"), RG(0, 0x2000, 1500, ACC_WW, "dst") } },
	};
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
	uint64_t room[4];

	(void)state;
	assert_int_equal(prog_graph(&h, &g, prog, 4, 2, 0), 0);
	assert_int_equal(policy_liveness(&g, &l), 0);
	assert_int_equal(policy_conv_room(&g, &l, false, NULL, 10000, room), 0);
	/* #1: after #0 a1 + a9 = 1100, plus y 2000; #2: after #1 a2 + a9 =
	 * 2100 (a1 read last by #1), plus dx 1500 */
	room_is(room, 1, 10000 - 3100);
	room_is(room, 2, 10000 - 3600);
	policy_live_free(&l);
	policy_graph_free(&g);
	policy_history_free(&h);
}

/* ---- the synthetic net, through the policy ---- */

static drv_t d;
static net_t n;

static const policy_plan_t *planned(uint64_t budget, uint64_t headroom)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c;

	policy_config_default(&c);
	c.offload = POLICY_OFFLOAD_DYN;
	c.budget = budget;
	c.dyn_headroom = headroom;
	c.offload_min_bytes = 1024;
	drv_init(&d, &c);
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

/* The three peaks of the 4-layer net (from a plan with room to spare). */
static policy_dyn_t peaks(void)
{
	policy_dyn_t x = planned(UINT64_C(1) << 40, 0)->dyn;

	done();
	/* each offload set holds less than the one before it */
	if (!(x.peak_none > x.peak_conv && x.peak_conv > x.peak_all && x.peak_all > 0))
		fail_msg("expected peaks none > conv > all > 0, got %llu %llu %llu",
			 (unsigned long long)x.peak_none, (unsigned long long)x.peak_conv,
			 (unsigned long long)x.peak_all);
	return x;
}

/* OFFLOAD actions of one more planned iteration. */
static int offloads_next_iteration(uint64_t *ids, int max)
{
	uint64_t seq0 = d.seq;
	int k = 0;

	net_train(&n, &d);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].seq >= seq0 && d.acts[i].a.kind == POLICY_ACT_OFFLOAD) {
			if (k < max)
				ids[k] = d.acts[i].a.alloc_id;
			k++;
		}
	return k;
}

static void test_peak_that_fits_offloads_nothing(void **state)
{
	const policy_plan_t *pl = planned(UINT64_C(1) << 40, POLICY_HEADROOM_DEFAULT);
	uint64_t ids[16];
	policy_stats_t st;

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_NONE);
	assert_int_equal(pl->dyn.decided, 1);
	assert_int_equal(pl->dyn.chosen, POLICY_OFFLOAD_NONE);
	assert_int_equal(pl->dyn.fits, 1);
	/* no offload at all: the peak is liveness's */
	assert_int_equal(pl->dyn.peak_none, pl->live.peak_live);
	assert_int_equal(pl->off.n, 0);
	assert_int_equal(offloads_next_iteration(ids, 16), 0);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].kind == POLICY_ACT_PREFETCH && !d.acts[i].a.next)
			fail_msg("dyn chose none: expected no prefetch but the lookahead's, got one of "
				 "a%llu", (unsigned long long)d.acts[i].a.alloc_id);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_NONE);
	assert_int_equal(st.dyn_decisions, 1);
	assert_int_equal(st.peak_none, pl->dyn.peak_none);
	done();
}

static void test_budget_between_conv_and_none_offloads_conv_inputs(void **state)
{
	policy_dyn_t x = peaks();
	const policy_plan_t *pl = planned(x.peak_none - 1, 0);
	uint64_t ids[16];
	int k;

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_CONV);
	assert_int_equal(pl->dyn.fits, 1);
	k = offloads_next_iteration(ids, 16);
	/* the batch and x1..x3: the inputs of the 4 forward convolutions */
	assert_int_equal(k, 4);
	for (int i = 0; i < k; i++)
		if (ids[i] != n.in[0] && ids[i] != n.x[1] && ids[i] != n.x[2] && ids[i] != n.x[3])
			fail_msg("OFFLOAD of alloc %llu, not a convolution's input",
				 (unsigned long long)ids[i]);
	done();
}

static void test_budget_exactly_the_peak_fits(void **state)
{
	policy_dyn_t x = peaks();
	const policy_plan_t *pl = planned(x.peak_none, 0);

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_NONE);
	assert_int_equal(pl->dyn.fits, 1);
	done();
}

static void test_budget_below_conv_offloads_all(void **state)
{
	policy_dyn_t x = peaks();
	const policy_plan_t *pl = planned(x.peak_conv - 1, 0);
	uint64_t ids[16];

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_ALL);
	assert_int_equal(pl->dyn.fits, 1);
	/* the batch, x1..x4 and y0..y3 */
	assert_int_equal(offloads_next_iteration(ids, 16), 9);
	done();
}

static void test_tight_budget_offloads_all(void **state)
{
	policy_dyn_t x = peaks();
	const policy_plan_t *pl = planned(x.peak_all / 4, 0);
	uint64_t ids[16];

	(void)state;
	/* nothing fits: the most memory-saving set, the pool pages the rest */
	assert_int_equal(pl->offload, POLICY_OFFLOAD_ALL);
	assert_int_equal(pl->dyn.fits, 0);
	assert_int_equal(offloads_next_iteration(ids, 16), 9);
	done();
}

/* Just under ALL's peak with vDNN's prefetch places: prefetches that have
 * no room move later (policy_prefetch_fit), and ALL fits after all. */
static void test_prefetches_with_no_room_move_and_all_fits(void **state)
{
	policy_dyn_t x = peaks();
	const policy_plan_t *pl = planned(x.peak_all - 1, 0);

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_ALL);
	if (!pl->dyn.fits || pl->dyn.peak_all >= x.peak_all)
		fail_msg("budget %llu: expected ALL to fit with its prefetches moved (peak below %llu), "
			 "got fits %d, peak %llu", (unsigned long long)(x.peak_all - 1),
			 (unsigned long long)x.peak_all, pl->dyn.fits,
			 (unsigned long long)pl->dyn.peak_all);
	done();
}

static void test_unknown_budget_offloads_nothing(void **state)
{
	const policy_plan_t *pl = planned(0, POLICY_HEADROOM_DEFAULT);
	uint64_t ids[16];

	(void)state;
	assert_int_equal(pl->offload, POLICY_OFFLOAD_NONE);
	assert_int_equal(pl->dyn.decided, 1);
	assert_int_equal(pl->dyn.fits, 0);
	assert_int_equal(offloads_next_iteration(ids, 16), 0);
	done();
}

static void test_default_headroom_is_a_sixteenth_of_the_budget(void **state)
{
	policy_dyn_t x = peaks();
	/* none's peak is the whole budget: no room left for the headroom */
	const policy_plan_t *pl = planned(x.peak_none, POLICY_HEADROOM_DEFAULT);

	(void)state;
	assert_int_equal(pl->dyn.headroom, x.peak_none / 16);
	assert_true(x.peak_conv + x.peak_none / 16 <= x.peak_none);
	assert_int_equal(pl->offload, POLICY_OFFLOAD_CONV);
	done();
}

static void test_static_modes_are_not_decided(void **state)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };
	policy_config_t c;
	policy_stats_t st;

	(void)state;
	policy_config_default(&c);
	c.offload = POLICY_OFFLOAD_CONV;
	c.budget = 1;   /* ignored: not dyn */
	c.offload_min_bytes = 1024;
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	for (int i = 0; i < 3; i++)
		net_train(&n, &d);
	assert_int_equal(policy_plan(d.p)->offload, POLICY_OFFLOAD_CONV);
	assert_int_equal(policy_plan(d.p)->dyn.decided, 0);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_CONV);
	assert_int_equal(st.dyn_decisions, 0);
	done();
}

static void test_decision_in_note_stats_and_dump(void **state)
{
	/* budgets in GiB so the line reads as the runtime's will */
	policy_dyn_t x = { .decided = 1, .chosen = POLICY_OFFLOAD_CONV, .fits = 1,
			   .budget = UINT64_C(6) << 30 };
	policy_dyn_t y = peaks();
	const policy_plan_t *pl = planned(y.peak_none - 1, 0);
	static sink_t s;
	char line[256];
	policy_stats_t st;
	int made = 0;

	(void)state;
	x.peak_none = (uint64_t)(9.1 * (double)(UINT64_C(1) << 30));
	x.peak_conv = (uint64_t)(5.2 * (double)(UINT64_C(1) << 30));
	x.peak_all = (uint64_t)(3.9 * (double)(UINT64_C(1) << 30));
	policy_dyn_format(&x, line, sizeof(line));
	assert_string_equal(line,
			    "dyn: chose conv (peaks: none 9.1 GiB, conv 5.2 GiB, all 3.9 GiB; budget 6.0 GiB)");
	x.fits = 0;
	x.chosen = POLICY_OFFLOAD_ALL;
	policy_dyn_format(&x, line, sizeof(line));
	assert_string_equal(line, "dyn: chose all (peaks: none 9.1 GiB, conv 5.2 GiB, all 3.9 GiB; "
				  "budget 6.0 GiB, nothing fits)");

	/* the NOTE MADE action carries the decision for the trace */
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (a->kind != POLICY_ACT_NOTE || a->note != POLICY_NOTE_MADE)
			continue;
		made++;
		assert_int_equal(a->offload_mode, POLICY_OFFLOAD_CONV);
		assert_int_equal(a->dyn.decided, 1);
		assert_int_equal(a->dyn.chosen, POLICY_OFFLOAD_CONV);
		assert_int_equal(a->dyn.budget, y.peak_none - 1);
		assert_int_equal(a->dyn.peak_none, y.peak_none);
		assert_int_equal(a->dyn.peak_conv, y.peak_conv);
		assert_int_equal(a->dyn.peak_all, y.peak_all);
	}
	assert_int_equal(made, 1);

	/* the stats: the mode in effect and one dyn line */
	policy_get_stats(d.p, &st);
	assert_int_equal(st.offload_mode, POLICY_OFFLOAD_CONV);
	assert_int_equal(st.peak_none, y.peak_none);
	assert_int_equal(st.peak_conv, y.peak_conv);
	assert_int_equal(st.peak_all, y.peak_all);
	s.len = 0;
	policy_stats_print(&st, sink, &s);
	if (!strstr(s.text, "policy: dyn: chose conv (peaks: none ") || !strstr(s.text, "; budget "))
		fail_msg("expected a \"policy: dyn: chose conv (peaks: ...; budget ...)\" line, got:\n%s",
			 s.text);

	/* the dump: the plan's mode and the decision */
	s.len = 0;
	policy_dump(d.p, sink, &s);
	if (!strstr(s.text, "offload conv") || !strstr(s.text, "dyn: chose conv") ||
	    !strstr(s.text, "peak resident bytes: none "))
		fail_msg("expected the dyn decision in the dump, got:\n%s", s.text);
	(void)pl;
	done();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peak_resident_by_hand),
		cmocka_unit_test(test_op_bytes_are_its_vmem_arguments),
		cmocka_unit_test(test_largest_op_must_fit_too),
		cmocka_unit_test(test_dead_bytes_count_without_liveness),
		cmocka_unit_test(test_prefetch_fit_moves_what_has_no_room),
		cmocka_unit_test(test_conv_room_by_hand),
		cmocka_unit_test(test_conv_room_leaves_out_the_workspace),
		cmocka_unit_test(test_peak_that_fits_offloads_nothing),
		cmocka_unit_test(test_budget_between_conv_and_none_offloads_conv_inputs),
		cmocka_unit_test(test_budget_exactly_the_peak_fits),
		cmocka_unit_test(test_budget_below_conv_offloads_all),
		cmocka_unit_test(test_tight_budget_offloads_all),
		cmocka_unit_test(test_prefetches_with_no_room_move_and_all_fits),
		cmocka_unit_test(test_unknown_budget_offloads_nothing),
		cmocka_unit_test(test_default_headroom_is_a_sixteenth_of_the_budget),
		cmocka_unit_test(test_static_modes_are_not_decided),
		cmocka_unit_test(test_decision_in_note_stats_and_dump),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
