/* tests/unit/policy/test_gaps.c - past vDNN (policy/gaps.c): when no
 * offload mode fits, idle intervals of weights, gradients and optimizer
 * state are planned too: the need curve checked by hand on a two-layer
 * iteration, whole pages only, YOUNG allocations never wrap, paged
 * allocations counted and moved by the page, ops past one that cannot fit
 * still relieved, the wrapped interval's prefetch resolved through the
 * iteration before, and the first planned iteration set where the plan
 * has it at op 0; what a move frees, its whole pages, weighed against the
 * minimum; versions of the same bytes counted once, and each move's step
 * taking what the plan counted. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "policy/program.h"
#include "synth.h"

/* ---- two layers, trained with momentum ----
 *
 *   #0 memcpy          host -> a1 (100, the batch)
 *   #1 conv_fwd        x a1, w a9  -> a2 (100)
 *   #2 conv_fwd        x a2, w a19 -> a3 (100)
 *   #3 softmax_fwd     a3 -> a4 (100)
 *   #4 softmax_bwd     a4 -> a5 (100)
 *   #5 conv_bwd_filter x a2, dy a5 -> dw2 a18 (1000)
 *   #6 conv_bwd_data   w a19, dy a5 -> dx a6 (100)
 *   #7 conv_bwd_filter x a1, dy a6 -> dw1 a8 (1000)
 *   #8 sgd             w2 a19, dw2 a18, m2 a20 (read-write)
 *   #9 sgd             w1 a9, dw1 a8, m1 a10 (read-write)
 *
 * Weights and momenta (a9, a19, a10, a20: 1000 each) are live all along;
 * while #8 runs the device holds them and both gradients: 6000 bytes and a
 * little.  #8 itself needs 3000 (its w2, dw2, m2); so does #9.  No vDNN
 * mode helps: nothing is written in forward and read in backward but the
 * 100-byte activations.  What idles while #8 runs: w1 (last read by #1,
 * next by #9), m1 (from #9 to #9 in the next iteration), dw1 (written by
 * #7, read by #9).  Every op lasts 1 us, the link moves 1000 bytes in 40 ns. */

#define W 1000
#define S 100

typedef struct {
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
} two_t;

/* page, small: the pool's page size and small-allocation threshold the
 * curves count whole pages by (0: bytes) */
static void two_build_paged(two_t *x, uint64_t young_from, uint64_t page, uint64_t small);

static void two_build(two_t *x, uint64_t young_from)
{
	two_build_paged(x, young_from, 0, 0);
}

static void two_build_paged(two_t *x, uint64_t young_from, uint64_t page, uint64_t small)
{
	const pop_t two[] = {
		{ VMEM_OP_MEMCPY, 0, 2, { RG(0, 0x1000, S, ACC_R, "src"), RG(1, 0, S, ACC_WW, "dst") }, 1000 },
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, S, ACC_R, "x"), RG(9, 0, W, ACC_R, "w"),
					    RG(2, 0, S, ACC_WW, "y") }, 1000 },
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(2, 0, S, ACC_R, "x"), RG(19, 0, W, ACC_R, "w"),
					    RG(3, 0, S, ACC_WW, "y") }, 1000 },
		{ VMEM_OP_SOFTMAX_FWD, 0, 2, { RG(3, 0, S, ACC_R, "x"), RG(4, 0, S, ACC_WW, "y") }, 1000 },
		{ VMEM_OP_SOFTMAX_BWD, 0, 2, { RG(4, 0, S, ACC_R, "y"), RG(5, 0, S, ACC_WW, "dx") }, 1000 },
		{ VMEM_OP_CONV_BWD_FILTER, 0, 3, { RG(2, 0, S, ACC_R, "x"), RG(5, 0, S, ACC_R, "dy"),
						   RG(18, 0, W, ACC_WW, "dw") }, 1000 },
		{ VMEM_OP_CONV_BWD_DATA, 0, 3, { RG(19, 0, W, ACC_R, "w"), RG(5, 0, S, ACC_R, "dy"),
						 RG(6, 0, S, ACC_WW, "dx") }, 1000 },
		{ VMEM_OP_CONV_BWD_FILTER, 0, 3, { RG(1, 0, S, ACC_R, "x"), RG(6, 0, S, ACC_R, "dy"),
						   RG(8, 0, W, ACC_WW, "dw") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 3, { RG(19, 0, W, ACC_RW, "arg0"), RG(18, 0, W, ACC_RW, "arg1"),
					  RG(20, 0, W, ACC_RW, "arg2") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 3, { RG(9, 0, W, ACC_RW, "arg0"), RG(8, 0, W, ACC_RW, "arg1"),
					  RG(10, 0, W, ACC_RW, "arg2") }, 1000 },
	};

	assert_int_equal(prog_graph(&x->h, &x->g, two, 10, 2, young_from), 0);
	policy_graph_set_pages(&x->g, page, small);
	assert_int_equal(policy_liveness(&x->g, &x->l), 0);
}

static void two_free(two_t *x)
{
	policy_live_free(&x->l);
	policy_graph_free(&x->g);
	policy_history_free(&x->h);
}

static policy_gaps_config_t gcfg(uint64_t limit, uint64_t page, uint64_t min)
{
	policy_gaps_config_t c = { .limit = limit, .page_size = page, .min_bytes = min };

	c.timing.h2d_bytes_per_s = 25000000000ull;   /* 1000 bytes: 40 ns */
	c.timing.default_op_ns = 1000;
	return c;
}

/* The interval of the tensor on plan allocation `a` moved after op `after`. */
static const policy_offload_t *gap_of(const two_t *x, const policy_offloads_t *o, uint64_t a,
				      int after)
{
	for (int i = 0; i < o->n; i++)
		if (x->g.tensors[o->v[i].tensor].alloc_id == a && o->v[i].after_op == after) {
			assert_true(o->v[i].gap);
			return &o->v[i];
		}
	return NULL;
}

static uint64_t worst_need(const two_t *x, const policy_offloads_t *o)
{
	uint64_t need[10], w = 0;

	assert_int_equal(policy_need_curve(&x->g, &x->l, false, o, need), 0);
	for (int k = 0; k < 10; k++)
		if (need[k] > w)
			w = need[k];
	return w;
}

static void test_gaps_fit_weights_gradients_and_momentum(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3500, 100, 100);
	const policy_offload_t *m1, *w1, *dw1;

	(void)state;
	two_build(&x, 0);
	/* no vDNN mode moves anything over 100 bytes that matters here */
	assert_true(worst_need(&x, NULL) >= 6000);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	if (!o.gaps.fits || o.gaps.need_after > 3500)
		fail_msg("expected the intervals to bring every op within 3500 bytes, got %llu at #%d "
			 "after %d intervals", (unsigned long long)o.gaps.need_after, o.gaps.worst_op,
			 o.gaps.added);
	assert_true(o.gaps.need_before >= 6000);
	/* the curve the rest of the plan sees says the same */
	assert_true(worst_need(&x, &o) <= 3500);
	/* the momentum of layer 1 idles from its step to the next one: out
	 * after #9, back for #9 of the next iteration, but not while #8 runs */
	m1 = gap_of(&x, &o, 10, 9);
	assert_non_null(m1);
	assert_true(m1->wrap);
	assert_int_equal(m1->need_op, 9);
	assert_int_equal(m1->prefetch_op, 9);
	assert_int_equal(m1->offset, 0);
	assert_int_equal(m1->bytes, W);
	/* dw1 between its write and the step */
	dw1 = gap_of(&x, &o, 8, 7);
	assert_non_null(dw1);
	assert_false(dw1->wrap);
	assert_int_equal(dw1->need_op, 9);
	/* w1 between its forward read and its step */
	w1 = gap_of(&x, &o, 9, 1);
	assert_non_null(w1);
	assert_int_equal(w1->need_op, 9);
	assert_true(w1->prefetch_op > 8 && w1->prefetch_op <= 9);
	/* layer 2's step needs its own three: none of them is away at #8 */
	for (int i = 0; i < o.n; i++) {
		const policy_offload_t *y = &o.v[i];
		uint64_t a = x.g.tensors[y->tensor].alloc_id;

		if ((a == 18 || a == 19 || a == 20) && y->prefetch_op != 8 &&
		    (y->wrap ? (8 > y->after_op || 8 < y->prefetch_op)
			     : (8 > y->after_op && 8 < y->prefetch_op)))
			fail_msg("a%llu is away while #8 (which reads it) runs: out after #%d, back "
				 "before #%d", (unsigned long long)a, y->after_op, y->prefetch_op);
	}
	policy_offloads_free(&o);
	two_free(&x);
}

static void test_gaps_move_whole_pages_and_nothing_small(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3500, 256, 256);

	(void)state;
	two_build(&x, 0);
	/* 1000 bytes from offset 0 hold 3 whole pages of 256 */
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_true(o.gaps.added > 0);
	for (int i = 0; i < o.n; i++) {
		assert_int_equal(o.v[i].offset, 0);
		assert_int_equal(o.v[i].bytes, 768);
	}
	policy_offloads_free(&o);
	/* nothing is at least 1024 bytes: nothing moves, and it says so */
	c = gcfg(3500, 256, 1024);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_int_equal(o.n, 0);
	assert_true(o.gaps.tried);
	assert_false(o.gaps.fits);
	assert_true(o.gaps.need_after >= 6000);
	policy_offloads_free(&o);
	/* a plan that fits is left alone */
	c = gcfg(100000, 100, 100);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_int_equal(o.n, 0);
	assert_true(o.gaps.fits);
	policy_offloads_free(&o);
	two_free(&x);
}

static void test_gaps_never_wrap_a_young_allocation(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3500, 100, 100);
	int young = 0;

	(void)state;
	/* ids 8 and up are allocated anew each iteration: the gradients, and
	 * for this test the weights and momenta too (a per-tensor allocator
	 * would not do that to them; it shows YOUNG intervals stay inside) */
	two_build(&x, 8);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	for (int i = 0; i < o.n; i++) {
		const policy_alloc_t *a = policy_graph_alloc(&x.g, x.g.tensors[o.v[i].tensor].alloc_id);

		assert_non_null(a);
		if (a->cls != POLICY_ALLOC_YOUNG)
			continue;
		young++;
		if (o.v[i].wrap || o.v[i].need_op <= o.v[i].after_op)
			fail_msg("a YOUNG allocation's interval wraps: after #%d, needed by #%d",
				 o.v[i].after_op, o.v[i].need_op);
	}
	assert_true(young > 0);
	policy_offloads_free(&o);
	two_free(&x);
}

/* Pages of 256 bytes, allocations of 512 or more paged: the weights,
 * momenta and gradients (1000 bytes: 4 pages, 1024 held), not the
 * 100-byte activations (slab memory, by the byte). */
static void test_paged_allocations_count_whole_pages(void **state)
{
	two_t b, x;
	uint64_t lo, n, held;

	(void)state;
	two_build(&b, 0);
	two_build_paged(&x, 0, 256, 512);
	/* after #8 five 1000-byte tensors are live (w1, m1, w2, m2, dw1):
	 * 24 bytes more each, their last pages */
	if (x.l.live_after[8] != b.l.live_after[8] + 5 * 24)
		fail_msg("expected %llu bytes held after #8 (live %llu + 5 last pages' 24), got %llu",
			 (unsigned long long)(b.l.live_after[8] + 5 * 24),
			 (unsigned long long)b.l.live_after[8], (unsigned long long)x.l.live_after[8]);
	/* dw2 is dead after #8 (rewritten whole by #5 next time): its four
	 * pages, every byte of them the allocation's, drop whole (the dead
	 * activations beside it count by the byte in both) */
	assert_true(b.l.dead_after[8] >= W);
	if (x.l.dead_after[8] != b.l.dead_after[8] + 24)
		fail_msg("expected %llu dead bytes after #8 (dw2's 4 pages whole), got %llu",
			 (unsigned long long)(b.l.dead_after[8] + 24),
			 (unsigned long long)x.l.dead_after[8]);
	/* the tensor's own pages: all of it, its last page included (nothing
	 * of the iteration is past its extent) */
	assert_true(policy_own_pages(&x.g, 0, 9, 0, W, &lo, &n, &held));
	assert_int_equal(lo, 0);
	assert_int_equal(n, W);
	assert_int_equal(held, 1024);
	/* a part that starts inside a page leaves that page to its neighbour */
	assert_true(policy_own_pages(&x.g, 0, 9, 100, 500, &lo, &n, &held));
	assert_int_equal(lo, 256);
	assert_int_equal(n, 256);
	assert_int_equal(held, 256);
	/* a slab allocation: cut to whole pages of the page given, or by the
	 * byte with none */
	assert_false(policy_own_pages(&x.g, 256, 1, 0, S, &lo, &n, &held));
	assert_true(policy_own_pages(&x.g, 0, 1, 0, S, &lo, &n, &held));
	assert_int_equal(n, S);
	assert_int_equal(held, S);
	two_free(&b);
	two_free(&x);
}

static void test_gaps_move_the_last_page_of_a_paged_allocation(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3700, 256, 256);

	(void)state;
	two_build_paged(&x, 0, 256, 512);
	assert_true(worst_need(&x, NULL) >= 6 * 1024);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_true(o.gaps.added > 0);
	/* whole tensors move, and the curve counts their pages */
	for (int i = 0; i < o.n; i++) {
		assert_int_equal(o.v[i].offset, 0);
		assert_int_equal(o.v[i].bytes, W);
		assert_int_equal(o.v[i].held, 1024);
	}
	if (!o.gaps.fits)
		fail_msg("expected the paged plan to fit 3700 bytes (#8 holds its own 3 x 1024 "
			 "and the activations), got %llu at #%d", (unsigned long long)o.gaps.need_after,
			 o.gaps.worst_op);
	assert_true(worst_need(&x, &o) <= 3700);
	policy_offloads_free(&o);
	two_free(&x);
}

/* What a move frees is the tensor's pages, whole: a 1000-byte tensor alone
 * in its four 256-byte pages frees 1024 bytes, so a minimum of 1024 (the
 * runtime sets a chunk) takes it.  It used to be compared with the
 * tensor's 1000 bytes, and Inception's 1.8 MB tensors, each alone in a 2
 * MiB page, never moved. */
static void test_gaps_count_what_a_move_frees_against_the_minimum(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3700, 256, 1024);

	(void)state;
	two_build_paged(&x, 0, 256, 512);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	if (o.n == 0 || !o.gaps.fits)
		fail_msg("expected 1000-byte tensors holding 1024 bytes of pages to move under a "
			 "1024-byte minimum and the plan to fit 3700, got %d intervals, %llu at #%d",
			 o.n, (unsigned long long)o.gaps.need_after, o.gaps.worst_op);
	for (int i = 0; i < o.n; i++)
		assert_int_equal(o.v[i].held, 1024);
	policy_offloads_free(&o);
	/* one page more than they hold: nothing */
	c = gcfg(3700, 256, 1025);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_int_equal(o.n, 0);
	policy_offloads_free(&o);
	two_free(&x);
	/* pages of 4096: each 1000-byte tensor alone in one frees 4096, but
	 * fills less than half of it - a small tensor at a caching segment's
	 * tail page, whose moves cost VGG-16 under dyn 30% on the h100
	 * model when they were taken: nothing */
	two_build_paged(&x, 0, 4096, 512);
	c = gcfg(3700, 4096, 1024);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	for (int i = 0; i < o.n; i++)
		if (o.v[i].bytes * 2 < o.v[i].held)
			fail_msg("expected no move of a tensor filling less than half its pages, got "
				 "%llu bytes of %llu after #%d", (unsigned long long)o.v[i].bytes,
				 (unsigned long long)o.v[i].held, o.v[i].after_op);
	assert_int_equal(o.n, 0);
	policy_offloads_free(&o);
	two_free(&x);
}

/* ---- versions of the same bytes ----
 *
 * A scanned kernel argument's extent runs to its allocation's end, so the
 * versions successive launches write overlap (minitrain's SGD kernels in
 * the caching style: each pointer "to the segment's end"):
 *
 *   #0 memcpy          host -> a1 (100)
 *   #1 launch          a30 [0, 2000)    read-write: version v1
 *   #2 launch          a30 [500, 2000)  read-write: version v2, over v1's bytes
 *   #3 launch          a50 [0, 3000)    read-write: the op that must fit
 *   #4 softmax_fwd     a1 -> a2
 *   #5 conv_fwd        x a2, w a40 [0, 1500) -> a3
 *   #6 softmax_bwd     a3 -> a4
 *   #7 launch          a40, a4 read
 *
 * While #3 runs the device holds a30 (2000), a40 (1500), a50 (3000) and
 * the small ones; at a limit of 3700 bytes both a30's last 1500 bytes and
 * a40 must be away.  After #2 a30 [500, 2000) idles until #1 of the next
 * iteration under two versions - v1's part and v2 - the longest idle
 * intervals there are.  Counting each version's pages, the plan "fitted"
 * with the two of them (1500 bytes freed twice) and left a40 on the
 * device: the runtime then found no room for #3. */
/* Is y away while op k runs: out after its op, back before its prefetch's
 * (its need's when none), wrapping into the next iteration? */
static bool away_during_op(const policy_offload_t *y, int k)
{
	int a = y->after_op, b = y->prefetch_op >= 0 ? y->prefetch_op : y->need_op;

	if (k == a || k == b)
		return false;
	if (b > a)
		return k > a && k < b;
	return y->wrap && (k > a || k < b);
}

static void test_gaps_count_overlapping_versions_once(void **state)
{
	const pop_t ops[] = {
		{ VMEM_OP_MEMCPY, 0, 2, { RG(0, 0x1000, S, ACC_R, "src"), RG(1, 0, S, ACC_WW, "dst") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(30, 0, 2000, ACC_RW, "arg0") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(30, 500, 1500, ACC_RW, "arg0") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(50, 0, 3000, ACC_RW, "arg0") }, 1000 },
		{ VMEM_OP_SOFTMAX_FWD, 0, 2, { RG(1, 0, S, ACC_R, "x"), RG(2, 0, S, ACC_WW, "y") }, 1000 },
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(2, 0, S, ACC_R, "x"), RG(40, 0, 1500, ACC_R, "w"),
					    RG(3, 0, S, ACC_WW, "y") }, 1000 },
		{ VMEM_OP_SOFTMAX_BWD, 0, 2, { RG(3, 0, S, ACC_R, "y"), RG(4, 0, S, ACC_WW, "dx") }, 1000 },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(40, 0, 1500, ACC_R, "arg0"), RG(4, 0, S, ACC_R, "arg1") }, 1000 },
	};
	/* what #3 holds with nothing away: a1, a30, a40, a50 (a2..a4 are
	 * written after it, dead before) */
	const uint64_t ids[] = { 1, 30, 40, 50 };
	uint64_t held = 0;
	two_t x;
	policy_plan_t pl;
	policy_plan_config_t pc = { .liveness = true, .offload = POLICY_OFFLOAD_ALL,
				    .offload_min_bytes = 1000, .budget = 3700, .headroom = 0,
				    .gaps = true };
	policy_period_found_t f = { .period = 8, .rot = 0, .reps = 2 };
	const policy_offloads_t *o;

	(void)state;
	pc.timing.h2d_bytes_per_s = 25000000000ull;
	pc.timing.default_op_ns = 1000;
	assert_int_equal(prog_graph(&x.h, &x.g, ops, 8, 2, 0), 0);
	assert_int_equal(policy_liveness(&x.g, &x.l), 0);
	f.first = x.h.tail - 8;
	assert_int_equal(policy_plan_build(&pl, &x.h, &f, &pc), 0);
	o = &pl.off;
	for (int i = 0; i < o->n; i++) {
		/* the runtime moves what the step resolves through a call's
		 * arguments: the plan must count that, no more */
		const policy_offload_t *y = &o->v[i];
		const policy_step_t *st = NULL;

		for (int k = 0; k < pl.nsteps && !st; k++)
			if (pl.steps[k].kind == POLICY_STEP_OFFLOAD && pl.steps[k].ref == y->tensor &&
			    pl.steps[k].op == y->after_op)
				st = &pl.steps[k];
		assert_non_null(st);
		if (st->bytes != y->bytes)
			fail_msg("expected t%d's move after #%d to take the %llu bytes the plan "
				 "counts, got a step of %llu", y->tensor, y->after_op,
				 (unsigned long long)y->bytes, (unsigned long long)st->bytes);
	}
	/* #3's bytes counted here, each byte once however many moves have it away */
	for (size_t a = 0; a < sizeof(ids) / sizeof(ids[0]); a++) {
		const policy_alloc_t *al = policy_graph_alloc(&x.g, ids[a]);

		assert_non_null(al);
		for (uint64_t b = 0; b < al->extent; b++) {
			bool away = false;

			for (int i = 0; i < o->n && !away; i++)
				away = pl.g.tensors[o->v[i].tensor].alloc_id == ids[a] &&
				       b >= o->v[i].offset && b < o->v[i].offset + o->v[i].bytes &&
				       away_during_op(&o->v[i], 3);
			held += !away;
		}
	}
	if (!o->gaps.fits || held > 3700)
		fail_msg("expected #3 to hold at most 3700 bytes as the plan claims (%llu at #%d, "
			 "%s), got %llu bytes on the device counted byte by byte under its %d moves",
			 (unsigned long long)o->gaps.need_after, o->gaps.worst_op,
			 o->gaps.fits ? "fits" : "does not fit", (unsigned long long)held, o->n);
	policy_plan_free(&pl);
	two_free(&x);
}

static void test_gaps_go_on_past_an_op_that_cannot_fit(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(2000, 100, 100);
	uint64_t need[10];
	const int others[] = { 1, 6, 7 };

	(void)state;
	two_build(&x, 0);
	/* the steps (#8, #9) read 3000 bytes each: over 2000 whatever moves.
	 * Relieving the first of them reaches the ops between its intervals'
	 * ends, not #1, #6 and #7 (1200 to 1300 of their own each, 2200 and
	 * more held): they fit only if the pass goes on once a step is found
	 * not to (it used to stop there) */
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	assert_false(o.gaps.fits);
	assert_int_equal(policy_need_curve(&x.g, &x.l, false, &o, need), 0);
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		if (need[others[i]] > 2000)
			fail_msg("expected #%d to fit 2000 bytes once the steps were found not to, "
				 "got %llu", others[i], (unsigned long long)need[others[i]]);
	assert_true(need[8] >= 3000 && need[9] >= 3000);
	policy_offloads_free(&o);
	two_free(&x);
}

static void test_gaps_explain_what_an_op_holds(void **state)
{
	two_t x;
	static sink_t l;

	(void)state;
	two_build(&x, 0);
	/* with nothing moved, #8 (layer 2's step) holds its own three and
	 * layer 1's weight, momentum and gradient, which idle there */
	l.len = 0;
	policy_gaps_explain(&x.g, NULL, 8, 8, sink, &l);
	if (!strstr(l.text, "held while #8 runs") || !strstr(l.text, "a19+0x0/1000") ||
	    !strstr(l.text, "a10+0x0/1000") || !strstr(l.text, "the op's own") ||
	    !strstr(l.text, "no interval away at this op"))
		fail_msg("expected #8's own a19 and layer 1's idle a10 explained, got:\n%s", l.text);
	/* the op's own tensors are marked so, the others are not */
	for (char *line = strtok(l.text, "\n"); line; line = strtok(NULL, "\n")) {
		bool own = strstr(line, "the op's own") != NULL;

		if ((strstr(line, " a19+") || strstr(line, " a18+") || strstr(line, " a20+")) && !own)
			fail_msg("expected #8's own tensor marked as such: %s", line);
		if ((strstr(line, " a9+") || strstr(line, " a10+")) && own)
			fail_msg("expected layer 1's tensor not marked as #8's own: %s", line);
	}
	two_free(&x);
}

static void test_gaps_bring_back_late_what_a_slow_link_fetched_early(void **state)
{
	two_t x;
	policy_offloads_t o = { 0 };
	policy_gaps_config_t c = gcfg(3500, 100, 100);

	(void)state;
	/* a link of 0.5 GB/s: a 1000-byte copy takes two ops' time, so the
	 * copies back of layer 1's momentum and weight are placed to start
	 * before #8 - beside the step that needs every byte.  They leave
	 * anyway and come back after #8 (late: the device may wait for them
	 * at #9), where they used to stay resident and #8 held 5000 bytes */
	c.timing.h2d_bytes_per_s = 500000000ull;
	two_build(&x, 0);
	assert_int_equal(policy_gaps_fill(&x.g, &x.l, &c, &o), 0);
	if (!o.gaps.fits || o.gaps.late == 0)
		fail_msg("expected the plan to fit 3500 bytes with intervals back late, got %llu at "
			 "#%d, %d late of %d", (unsigned long long)o.gaps.need_after, o.gaps.worst_op,
			 o.gaps.late, o.gaps.added);
	assert_true(worst_need(&x, &o) <= 3500);
	for (int i = 0; i < o.n; i++)
		if (o.v[i].prefetch_op == 8 && o.v[i].need_op != 8)
			fail_msg("t%d comes back before #8, which it does not read (needed by #%d)",
				 o.v[i].tensor, o.v[i].need_op);
	policy_offloads_free(&o);
	two_free(&x);
}

/* ---- the running policy: wrapped prefetches come out ---- */

/* The four-layer NETWORK net trained under dyn at a third of its peak
 * (measured first with no budget to fit), until planned: even vDNN-all
 * does not fit (weights, gradients and momenta alone are more), so the
 * plan moves their idle intervals.  *peak: the net's peak. */
static void third_of_peak(drv_t *d, net_t *n, policy_config_t *c, uint64_t *peak)
{
	net_cfg_t nc = { .layers = 4, .batch = 4, .style = NET_NETWORK };

	policy_config_default(c);
	c->offload = POLICY_OFFLOAD_DYN;
	c->offload_min_bytes = 1024;
	c->page_size = 1024;
	c->budget = (uint64_t)1 << 40;
	c->dyn_trials = 0;
	drv_init(d, c);
	net_init(n, d, &nc);
	for (int i = 0; i < 3; i++)
		net_train(n, d);
	assert_int_equal(policy_state(d->p), POLICY_PLANNED);
	*peak = policy_plan(d->p)->dyn.peak_none;
	net_free(n);
	drv_free(d);

	c->budget = *peak / 3;
	drv_init(d, c);
	net_init(n, d, &nc);
	for (int i = 0; i < 3; i++)
		net_train(n, d);
	assert_int_equal(policy_state(d->p), POLICY_PLANNED);
}

static void test_wrapped_prefetch_resolves_through_the_iteration_before(void **state)
{
	policy_config_t c;
	drv_t d;
	net_t n;
	const policy_plan_t *pl;
	uint64_t peak;
	int wrapped = -1, seen = 0;

	(void)state;
	third_of_peak(&d, &n, &c, &peak);
	pl = policy_plan(d.p);
	if (pl->off.gaps.added == 0)
		fail_msg("expected idle intervals in the plan at a third of the peak (%llu bytes), "
			 "got none (most held while an op runs: %llu)", (unsigned long long)peak,
			 (unsigned long long)pl->off.gaps.need_before);
	for (int i = 0; i < pl->off.n; i++)
		if (pl->off.v[i].wrap && pl->off.v[i].prefetch_op <= pl->off.v[i].after_op)
			wrapped = i;
	assert_true(wrapped >= 0);
	const policy_offload_t *x = &pl->off.v[wrapped];
	const policy_tensor_t *t = &pl->g.tensors[x->tensor];

	/* the first planned iteration has no iteration before it under the
	 * plan; the next ones bring the range back at its prefetch op */
	d.nacts = 0;
	for (int i = 0; i < 3; i++)
		net_train(&n, &d);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;

		if (d.acts[i].kind == POLICY_ACT_PREFETCH && !a->next && a->alloc_id == t->alloc_id &&
		    a->offset == x->offset && a->plan_op == x->prefetch_op)
			seen++;
	}
	if (seen < 2)
		fail_msg("expected the wrapped prefetch of a%llu (out after #%d, back before #%d, "
			 "needed by #%d) in 2 or more of 3 planned iterations, got %d",
			 (unsigned long long)t->alloc_id, x->after_op, x->prefetch_op, x->need_op,
			 seen);
	net_free(&n);
	drv_free(&d);
}

/* The first planned iteration follows one no plan ran: what the plan has
 * away or dead while op 0 runs (a wrapped interval offloaded, a range
 * declared dead, late in the iteration before) is set before op 0, so the
 * device starts where the plan's curve does; an iteration that follows a
 * whole planned one does not repeat it. */
static void test_first_planned_iteration_starts_where_the_plan_does(void **state)
{
	policy_config_t c;
	policy_stats_t st;
	drv_t d;
	net_t n;
	const policy_plan_t *pl;
	uint64_t peak, mark[2] = { 0, 0 };
	int away = -1, nmark = 0, off[2] = { 0, 0 }, dead[2] = { 0, 0 };

	(void)state;
	third_of_peak(&d, &n, &c, &peak);
	pl = policy_plan(d.p);
	for (int i = 0; i < pl->off.n; i++) {
		const policy_offload_t *x = &pl->off.v[i];

		if (x->wrap && x->need_op > 0 && x->prefetch_op > 0 && x->prefetch_op <= x->after_op)
			away = i;
	}
	if (away < 0)
		fail_msg("expected an interval away while op 0 runs in the plan at a third of the "
			 "peak (%llu bytes), got none of %d", (unsigned long long)peak, pl->off.n);
	const policy_offload_t *x = &pl->off.v[away];
	const policy_tensor_t *t = &pl->g.tensors[x->tensor];

	d.nacts = 0;
	for (int i = 0; i < 2; i++)
		net_train(&n, &d);
	for (int i = 0; i < d.nacts && nmark < 2; i++)
		if (d.acts[i].kind == POLICY_ACT_MARK)
			mark[nmark++] = d.acts[i].seq;
	assert_int_equal(nmark, 2);
	for (int i = 0; i < d.nacts; i++) {
		const policy_action_t *a = &d.acts[i].a;
		int it = d.acts[i].seq == mark[0] ? 0 : d.acts[i].seq == mark[1] ? 1 : -1;

		if (it < 0 || a->plan_op == 0)
			continue;   /* not before op 0, or op 0's own */
		if (d.acts[i].kind == POLICY_ACT_OFFLOAD && a->alloc_id == t->alloc_id &&
		    a->plan_op == x->after_op)
			off[it]++;
		if (d.acts[i].kind == POLICY_ACT_DEAD)
			dead[it]++;
	}
	if (off[0] != 1 || off[1] != 0)
		fail_msg("expected a%llu (out after #%d, back before #%d) offloaded before op 0 of the "
			 "first planned iteration and not of the second, got %d and %d",
			 (unsigned long long)t->alloc_id, x->after_op, x->prefetch_op, off[0], off[1]);
	if (dead[0] == 0 || dead[1] != 0)
		fail_msg("expected wrapped dead ranges declared before op 0 of the first planned "
			 "iteration only, got %d and %d", dead[0], dead[1]);
	policy_get_stats(d.p, &st);
	assert_true(st.entry_steps >= 2);
	net_free(&n);
	drv_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gaps_fit_weights_gradients_and_momentum),
		cmocka_unit_test(test_gaps_move_whole_pages_and_nothing_small),
		cmocka_unit_test(test_gaps_never_wrap_a_young_allocation),
		cmocka_unit_test(test_paged_allocations_count_whole_pages),
		cmocka_unit_test(test_gaps_move_the_last_page_of_a_paged_allocation),
		cmocka_unit_test(test_gaps_count_what_a_move_frees_against_the_minimum),
		cmocka_unit_test(test_gaps_count_overlapping_versions_once),
		cmocka_unit_test(test_gaps_go_on_past_an_op_that_cannot_fit),
		cmocka_unit_test(test_gaps_explain_what_an_op_holds),
		cmocka_unit_test(test_gaps_bring_back_late_what_a_slow_link_fetched_early),
		cmocka_unit_test(test_wrapped_prefetch_resolves_through_the_iteration_before),
		cmocka_unit_test(test_first_planned_iteration_starts_where_the_plan_does),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
