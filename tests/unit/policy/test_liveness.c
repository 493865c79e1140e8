/* tests/unit/policy/test_liveness.c - dead byte ranges (policy/liveness.c):
 * from the last read to the next whole overwrite, wrapping around the
 * iteration on stable allocations only; read-write and partial writes
 * never start one; byte ranges, not pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/program.h"
#include "synth.h"

typedef struct {
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
} lv_t;

static void build(lv_t *x, const pop_t *ops, int n, int reps, uint64_t young_from)
{
	assert_int_equal(prog_graph(&x->h, &x->g, ops, n, reps, young_from), 0);
	assert_int_equal(policy_liveness(&x->g, &x->l), 0);
}

static void done(lv_t *x)
{
	policy_live_free(&x->l);
	policy_graph_free(&x->g);
	policy_history_free(&x->h);
}

/* The dead ranges of alloc a, as "off/bytes after-until[w] lr" strings. */
static void dead_of(const lv_t *x, uint64_t a, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < x->l.ndead; i++) {
		const policy_dead_t *d = &x->l.dead[i];
		int k;

		if (d->alloc_id != a)
			continue;
		k = snprintf(buf + at, len - at, "%s%llu/%llu %d-%d%s r%d%s", at ? " " : "",
			     (unsigned long long)d->offset, (unsigned long long)d->bytes, d->after_op,
			     d->until_op, d->wraps ? "w" : "", d->last_read, d->freed ? " f" : "");
		if (k > 0 && at + (size_t)k < len)
			at += (size_t)k;
	}
}

#define EXPECT_DEAD(x, a, want)                                                   \
	do {                                                                      \
		char got_[512];                                                   \
		dead_of(x, a, got_, sizeof(got_));                                \
		if (strcmp(got_, want) != 0)                                      \
			fail_msg("alloc %d dead: expected \"%s\", got \"%s\"", (int)(a), \
				 want, got_);                                     \
	} while (0)

static void test_dead_from_last_read_to_whole_write(void **state)
{
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 4096, ACC_R, "x"), RG(3, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(3, 0, 4096, ACC_R, "x"), RG(4, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(4, 0, 64, ACC_R, "x"), RG(2, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 4096, ACC_R, "x"), RG(5, 0, 64, ACC_WW, "y") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 5, 2, 0);
	/* alloc 2: dead after #1 until #3 rewrites it, and after #4 until #0
	 * of the next iteration */
	EXPECT_DEAD(&x, 2, "0/4096 1-3 r1 0/4096 4-0w r4");
	/* alloc 3: written #1, read #2, next written #1 of the next iteration */
	EXPECT_DEAD(&x, 3, "0/4096 2-1w r2");
	/* alloc 1 is only read: never dead */
	EXPECT_DEAD(&x, 1, "");
	done(&x);
}

static void test_gradient_dead_across_iteration_boundary(void **state)
{
	/* dw is written in backward, read by the update (a scanned kernel:
	 * read-write), and dead through the next forward */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(9, 0, 256, ACC_R, "w"),
					    RG(2, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 64, ACC_R, "x"), RG(3, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_BWD_FILTER, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(3, 0, 64, ACC_R, "dy"),
						   RG(8, 0, 256, ACC_WW, "dw") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(9, 0, 256, ACC_RW, "arg0"), RG(8, 0, 256, ACC_RW, "arg1") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 4, 2, 0);
	EXPECT_DEAD(&x, 8, "0/256 3-2w r3");
	/* the weight is read-write in the update: never dead */
	EXPECT_DEAD(&x, 9, "");
	done(&x);
}

static void test_read_write_never_starts_a_dead_range(void **state)
{
	/* a scanned kernel argument (rw) is the only writer of alloc 2 */
	const pop_t ops[] = {
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, 64, ACC_RW, "arg0") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(2, 0, 64, ACC_R, "arg0"), RG(3, 0, 64, ACC_WW, "arg1") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, 64, ACC_RW, "arg0") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(3, 0, 64, ACC_R, "arg0") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 4, 2, 0);
	EXPECT_DEAD(&x, 2, "");
	EXPECT_DEAD(&x, 3, "0/64 3-1w r3");
	done(&x);
}

static void test_partial_write_ends_but_never_starts(void **state)
{
	/* #2 writes alloc 2 without covering it whole (a strided output):
	 * bytes between #1 and #2 are not dead, bytes between #3 and #4 are */
	const pop_t ops[] = {
		{ VMEM_OP_MEMSET, 0, 1, { RG(2, 0, 128, ACC_WW, "dst") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, 128, ACC_R, "arg0") } },
		{ VMEM_OP_ADD_TENSOR, 0, 1, { RG(2, 0, 128, ACC_W, "C") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, 128, ACC_R, "arg0") } },
		{ VMEM_OP_CONV_FWD, 0, 1, { RG(2, 0, 128, ACC_WW, "y") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(2, 0, 128, ACC_R, "arg0") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 6, 2, 0);
	EXPECT_DEAD(&x, 2, "0/128 3-4 r3 0/128 5-0w r5");
	done(&x);
}

static void test_partial_page_gives_byte_ranges(void **state)
{
	/* two tensors share a page; only one of them is dead between #1 and
	 * #2: the range is that tensor's bytes, not the page */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(7, 0, 1000, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(7, 0, 1000, ACC_R, "x"), RG(7, 1024, 1000, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(7, 1024, 1000, ACC_R, "x"), RG(7, 0, 1000, ACC_WW, "y") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(7, 0, 2024, ACC_R, "arg0") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 4, 2, 0);
	/* [0,1000): dead #1..#2 and #3..#0; [1024,2024): dead #3..#1 (wraps);
	 * [1000,1024) is touched only by #3's read: never dead */
	EXPECT_DEAD(&x, 7, "0/1000 1-2 r1 0/1000 3-0w r3 1024/1000 3-1w r3");
	done(&x);
}

static void test_young_allocation_does_not_wrap(void **state)
{
	/* alloc 50 is a fresh tensor each iteration: after its last read it is
	 * freed, not rewritten by the next iteration */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w"),
					    RG(50, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(50, 0, 64, ACC_R, "x"), RG(51, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(51, 0, 64, ACC_R, "x"), RG(50, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(50, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_WW, "y") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 4, 3, 50);
	/* inside the iteration a whole rewrite still ends a dead range */
	EXPECT_DEAD(&x, 2050, "0/64 1-2 r1");
	EXPECT_DEAD(&x, 2051, "");
	/* a stable one wraps */
	EXPECT_DEAD(&x, 2, "0/64 3-3w r-1");
	done(&x);
}

static void test_young_allocation_dead_until_its_free(void **state)
{
	/* fresh tensors the program frees: 50 after #1, 51 after the last op;
	 * 52 is never freed.  The bytes are dead from their last use to the
	 * free ("f"), and the curves are those of the same program without
	 * the frees (they counted the bytes idle already) */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w"),
					    RG(50, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(50, 0, 64, ACC_R, "x"), RG(51, 0, 64, ACC_WW, "y") },
		  0, 50 },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(51, 0, 64, ACC_R, "x"), RG(52, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(52, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_WW, "y") },
		  0, 51 },
	};
	pop_t kept[4];
	lv_t x, y;

	(void)state;
	build(&x, ops, 4, 3, 50);
	EXPECT_DEAD(&x, 2050, "0/64 1-2 r1 f");
	EXPECT_DEAD(&x, 2051, "0/64 2-0w r2 f");
	EXPECT_DEAD(&x, 2052, "");
	EXPECT_DEAD(&x, 2, "0/64 3-3w r-1");
	memcpy(kept, ops, sizeof(kept));
	for (int k = 0; k < 4; k++)
		kept[k].free_after = 0;
	build(&y, kept, 4, 3, 50);
	EXPECT_DEAD(&y, 2050, "");
	EXPECT_DEAD(&y, 2051, "");
	assert_int_equal(x.l.peak_live, y.l.peak_live);
	for (int k = 0; k < 4; k++)
		if (x.l.live_after[k] != y.l.live_after[k] || x.l.dead_after[k] != y.l.dead_after[k])
			fail_msg("after #%d: live %llu dead %llu with the frees, %llu and %llu without",
				 k, (unsigned long long)x.l.live_after[k],
				 (unsigned long long)x.l.dead_after[k],
				 (unsigned long long)y.l.live_after[k],
				 (unsigned long long)y.l.dead_after[k]);
	done(&x);
	done(&y);
}

/* Pushes one op of test_free_across_the_rotation_point (ranges r[0..n),
 * the watermark the highest id any earlier op named). */
static void push_op(policy_history_t *h, vmem_op_kind_t kind, uint64_t *seq, vmem_range_t *r,
		    int n, uint64_t *wm)
{
	vmem_event_t ev = { 0 };

	ev.kind = kind;
	ev.api = "op";
	ev.thread = 1;
	ev.seq = (*seq)++;
	ev.nranges = n;
	ev.ranges = r;
	assert_true(policy_history_push(h, &ev, 0, *wm) != UINT64_MAX);
	for (int j = 0; j < n; j++)
		if (r[j].alloc_id > *wm)
			*wm = r[j].alloc_id;
}

static void test_free_across_the_rotation_point(void **state)
{
	/* Per repetition r: #0 reads A(r-1) and writes B(r), then A(r-1) is
	 * freed; #1 reads B(r), then B(r) is freed; #2 writes A(r); #3 reads
	 * it.  A(r) lives across the repetition's end.  The graph starts at
	 * #2 (rotation 2): its ops are #2 #3 of the last repetition, then #0
	 * #1 standing for the next one's, whose events name A and B of the
	 * repetition before.  A(last - 1) is dead from #0 to its free (graph
	 * ops 2-3), B(last) from #1 to the end; A(last) is freed only in the
	 * repetition after the window - even where the history holds that
	 * free - and gets no range: at run time the next iteration's #0 still
	 * reads it. */
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
	uint64_t seq = 1, wm = 0, first = 0;
	lv_t x;

	(void)state;
	assert_int_equal(policy_history_init(&h, 4096, 65536), 0);
	for (uint64_t r = 1; r <= 4; r++) {
		uint64_t a_prev = 200 + 1000 * (r - 1), b = 100 + 1000 * r, a = 200 + 1000 * r;
		vmem_range_t op0[] = { RG(a_prev, 0, 64, ACC_R, "x"), RG(b, 0, 64, ACC_WW, "y") };
		vmem_range_t op1[] = { RG(b, 0, 64, ACC_R, "x"), RG(3, 0, 64, ACC_WW, "y") };
		vmem_range_t op2[] = { RG(3, 0, 64, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w"),
				       RG(a, 0, 64, ACC_WW, "y") };
		vmem_range_t op3[] = { RG(a, 0, 64, ACC_R, "x"), RG(4, 0, 64, ACC_WW, "y") };

		if (r == 3)
			first = h.tail;
		push_op(&h, VMEM_OP_ACT_FWD, &seq, op0, 2, &wm);
		assert_int_equal(policy_history_freed(&h, a_prev), 0);
		if (r == 4)
			break;   /* the next repetition's first op and its free */
		push_op(&h, VMEM_OP_ACT_FWD, &seq, op1, 2, &wm);
		assert_int_equal(policy_history_freed(&h, b), 0);
		push_op(&h, VMEM_OP_CONV_FWD, &seq, op2, 3, &wm);
		push_op(&h, VMEM_OP_ACT_FWD, &seq, op3, 2, &wm);
	}
	assert_int_equal(policy_graph_build(&g, &h, first, 4, 2), 0);
	assert_int_equal(policy_liveness(&g, &l), 0);
	x.h = h;
	x.g = g;
	x.l = l;
	EXPECT_DEAD(&x, 2200, "0/64 2-3 r2 f");   /* A(2), read by the last #0 */
	EXPECT_DEAD(&x, 3100, "0/64 3-0w r3 f");  /* B(3) */
	EXPECT_DEAD(&x, 3200, "");                /* A(3): freed after the window */
	done(&x);
}

static void test_history_keeps_only_the_frees_it_can_use(void **state)
{
	/* a long run frees a tensor per call: the frees of events the ring
	 * dropped go, so what the history holds stays bounded */
	policy_history_t h;
	vmem_range_t r[] = { RG(1, 0, 64, ACC_R, "x") };
	vmem_event_t ev = { 0 };

	(void)state;
	assert_int_equal(policy_history_init(&h, 64, 1024), 0);
	ev.kind = VMEM_OP_ACT_FWD;
	ev.api = "op";
	ev.thread = 1;
	ev.nranges = 1;
	ev.ranges = r;
	for (uint64_t i = 1; i <= 100000; i++) {
		ev.seq = i;
		assert_true(policy_history_push(&h, &ev, 0, 0) != UINT64_MAX);
		assert_int_equal(policy_history_freed(&h, 1000 + i), 0);
	}
	if (h.capfrees > 1024)
		fail_msg("100000 frees, a 64-event history: expected at most 1024 kept, got room "
			 "for %zu (%zu held)", h.capfrees, h.nfrees);
	policy_history_free(&h);
}

static void test_peak_live_counts_fresh_tensors_only_while_used(void **state)
{
	/* two fresh 4 KiB tensors one after the other, and a 64-byte weight:
	 * never more than one tensor and the weight at once */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(9, 0, 64, ACC_R, "w"), RG(50, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(50, 0, 4096, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(9, 0, 64, ACC_R, "w"), RG(51, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(51, 0, 4096, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 4, 3, 50);
	assert_int_equal(x.l.peak_live, 4096 + 64);
	done(&x);
}

static void test_live_and_dead_bytes_after_each_op(void **state)
{
	/* the graph of test_dead_from_last_read_to_whole_write, all STABLE:
	 * touched a1 64 + a2 4096 + a3 4096 + a4 64 + a5 64 = 8384.  Dead:
	 * a2 after #1..#2 and after #4 (4-0w), a3 after #2,#3,#4,#0 (2-1w),
	 * a4 after #3,#4,#0,#1 (3-2w), a5 (written, never read) after every op.
	 *   after #0: a1 + a2(y)     = 64 + 4096 = 4160 live, dead a3+a4+a5 = 4224
	 *   after #1: a1 + a3        = 4160,                dead a2+a4+a5 = 4224
	 *   after #2: a1 + a4        =  128,                dead a2+a3+a5 = 8256
	 *   after #3: a1 + a2        = 4160,                dead a3+a4+a5 = 4224
	 *   after #4: a1             =   64,             dead a2+a3+a4+a5 = 8320 */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 4096, ACC_R, "x"), RG(3, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(3, 0, 4096, ACC_R, "x"), RG(4, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(4, 0, 64, ACC_R, "x"), RG(2, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(2, 0, 4096, ACC_R, "x"), RG(5, 0, 64, ACC_WW, "y") } },
	};
	static const uint64_t live[] = { 4160, 4160, 128, 4160, 64 };
	static const uint64_t dead[] = { 4224, 4224, 8256, 4224, 8320 };
	lv_t x;

	(void)state;
	build(&x, ops, 5, 2, 0);
	assert_non_null(x.l.live_after);
	assert_non_null(x.l.dead_after);
	for (int k = 0; k < 5; k++) {
		if (x.l.live_after[k] != live[k] || x.l.dead_after[k] != dead[k])
			fail_msg("after #%d: expected live %llu dead %llu, got live %llu dead %llu", k,
				 (unsigned long long)live[k], (unsigned long long)dead[k],
				 (unsigned long long)x.l.live_after[k],
				 (unsigned long long)x.l.dead_after[k]);
	}
	assert_int_equal(x.l.peak_live, 4160);
	assert_int_equal(x.l.peak_op, 0);
	done(&x);
}

static void test_moving_allocation_gets_no_dead_range(void **state)
{
	/* the caching allocator puts this iteration's tensor elsewhere in
	 * alloc 6 each time: the plan's offsets are not this iteration's */
	pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(6, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(6, 0, 64, ACC_R, "x"), RG(3, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(3, 0, 64, ACC_R, "x"), RG(6, 0, 64, ACC_WW, "y") } },
	};
	policy_history_t h;
	policy_graph_t g;
	policy_live_t l;
	uint64_t seq = 1;
	int first = 0;

	(void)state;
	assert_int_equal(policy_history_init(&h, 256, 1024), 0);
	for (int rep = 0; rep < 2; rep++) {
		if (rep == 1)
			first = (int)h.tail;
		for (int k = 0; k < 3; k++) {
			vmem_event_t ev = { 0 };
			vmem_range_t r[2] = { ops[k].r[0], ops[k].r[1] };

			for (int j = 0; j < 2; j++)
				if (r[j].alloc_id == 6)
					r[j].offset += 256 * (uint64_t)rep;
			ev.kind = ops[k].kind;
			ev.api = "x";
			ev.seq = seq++;
			ev.nranges = 2;
			ev.ranges = r;
			ev.thread = 1;
			policy_history_push(&h, &ev, 0, 9);
		}
	}
	assert_int_equal(policy_graph_build(&g, &h, (uint64_t)first, 3, 0), 0);
	assert_int_equal(policy_graph_alloc(&g, 6)->cls, POLICY_ALLOC_UNSTABLE);
	assert_int_equal(policy_liveness(&g, &l), 0);
	for (int i = 0; i < l.ndead; i++)
		assert_true(l.dead[i].alloc_id != 6);
	policy_live_free(&l);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_dead_range_resolves_through_last_access(void **state)
{
	/* the dead range lies inside the use of after_op that covers it */
	const pop_t ops[] = {
		{ VMEM_OP_MEMSET, 0, 1, { RG(2, 0, 4096, ACC_WW, "dst") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(2, 0, 1024, ACC_R, "arg0"), RG(2, 1024, 3072, ACC_R, "arg1") } },
	};
	lv_t x;

	(void)state;
	build(&x, ops, 2, 2, 0);
	assert_int_equal(x.l.ndead, 2);
	for (int i = 0; i < x.l.ndead; i++) {
		const policy_dead_t *d = &x.l.dead[i];
		const policy_use_t *u = &x.g.uses[d->use];

		assert_int_equal(u->op, d->after_op);
		assert_true(u->offset <= d->offset && d->offset + d->bytes <= u->offset + u->bytes);
	}
	done(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dead_from_last_read_to_whole_write),
		cmocka_unit_test(test_gradient_dead_across_iteration_boundary),
		cmocka_unit_test(test_read_write_never_starts_a_dead_range),
		cmocka_unit_test(test_partial_write_ends_but_never_starts),
		cmocka_unit_test(test_partial_page_gives_byte_ranges),
		cmocka_unit_test(test_young_allocation_does_not_wrap),
		cmocka_unit_test(test_young_allocation_dead_until_its_free),
		cmocka_unit_test(test_free_across_the_rotation_point),
		cmocka_unit_test(test_history_keeps_only_the_frees_it_can_use),
		cmocka_unit_test(test_peak_live_counts_fresh_tensors_only_while_used),
		cmocka_unit_test(test_live_and_dead_bytes_after_each_op),
		cmocka_unit_test(test_moving_allocation_gets_no_dead_range),
		cmocka_unit_test(test_dead_range_resolves_through_last_access),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
