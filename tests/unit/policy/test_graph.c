/* tests/unit/policy/test_graph.c - the dataflow graph (policy/graph.c):
 * tensor versions of reused byte ranges, producers and consumers, fork and
 * join counts, edges from the previous iteration, the forward/backward
 * boundary, allocation classes, and the dump. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/program.h"
#include "synth.h"

#define SEG 7   /* a caching allocator's segment */

/* The version use `u` reads at byte offset `off` (from the edges), or -1. */
static int read_tensor(const policy_graph_t *g, int op, int ref)
{
	int u = g->ops[op].use0 + ref;

	for (int e = 0; e < g->nedges; e++)
		if (g->edges[e].op == op && g->edges[e].use == u)
			return g->edges[e].tensor;
	return -1;
}

static int writes(const policy_graph_t *g, int op, int ref)
{
	return g->uses[g->ops[op].use0 + ref].tensor;
}

static void test_graph_rewritten_block_is_a_new_tensor(void **state)
{
	/* one block of a segment holds two tensors in one iteration */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 512, ACC_R, "x"), RG(SEG, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(SEG, 0, 4096, ACC_R, "x"), RG(SEG, 4096, 4096, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(SEG, 4096, 4096, ACC_R, "x"), RG(SEG, 0, 4096, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(SEG, 0, 4096, ACC_R, "x"), RG(2, 0, 512, ACC_WW, "y") } },
	};
	policy_history_t h;
	policy_graph_t g;
	int t0, t2;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 4, 2, 0), 0);
	t0 = writes(&g, 0, 1);
	t2 = writes(&g, 2, 1);
	assert_true(t0 >= 0 && t2 >= 0 && t0 != t2);
	assert_int_equal(read_tensor(&g, 1, 0), t0);
	assert_int_equal(read_tensor(&g, 3, 0), t2);
	assert_int_equal(g.tensors[t0].producer, 0);
	assert_int_equal(g.tensors[t0].refcnt, 1);
	assert_int_equal(g.tensors[t0].last_read, 1);
	assert_int_equal(g.tensors[t2].producer, 2);
	assert_int_equal(g.tensors[t2].last_read, 3);
	/* alloc 1 is only read: a live-in version */
	assert_int_equal(g.tensors[read_tensor(&g, 0, 0)].producer, -1);
	assert_true(g.tensors[read_tensor(&g, 0, 0)].flags & POLICY_T_LIVE_IN);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_fork_and_join_counts(void **state)
{
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(2, 0, 64, ACC_R, "x"), RG(3, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(2, 0, 64, ACC_R, "x"), RG(4, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_OP_TENSOR, 0, 3, { RG(3, 0, 64, ACC_R, "a"), RG(4, 0, 64, ACC_R, "b"),
					     RG(5, 0, 64, ACC_WW, "c") } },
	};
	policy_history_t h;
	policy_graph_t g;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 4, 2, 0), 0);
	/* vDNN Fig. 3: the fork's output has Refcnt 2, the join reads 2 producers */
	assert_int_equal(g.tensors[writes(&g, 0, 1)].refcnt, 2);
	assert_int_equal(g.ops[3].nin, 2);
	assert_int_equal(g.ops[1].nin, 1);
	assert_int_equal(g.tensors[writes(&g, 0, 1)].first_read, 1);
	assert_int_equal(g.tensors[writes(&g, 0, 1)].last_read, 2);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_weights_come_from_previous_iteration(void **state)
{
	/* the update writes the weight the next iteration's forward reads */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(9, 0, 256, ACC_R, "w"),
					    RG(2, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_BWD_FILTER, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_R, "dy"),
						   RG(8, 0, 256, ACC_WW, "dw") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(9, 0, 256, ACC_RW, "arg0"), RG(8, 0, 256, ACC_RW, "arg1") } },
	};
	policy_history_t h;
	policy_graph_t g;
	int tw;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 3, 2, 0), 0);
	tw = writes(&g, 2, 0);
	assert_int_equal(read_tensor(&g, 0, 1), tw);   /* back edge */
	assert_int_equal(g.tensors[tw].producer, 2);
	assert_int_equal(g.tensors[tw].last_read, 2);   /* the next update reads it too */
	assert_true(g.tensors[tw].last_read_next);
	assert_int_equal(g.tensors[tw].first_read, 0);
	assert_int_equal(policy_graph_alloc(&g, 9)->cls, POLICY_ALLOC_STABLE);
	/* the boundary is the first backward op; the conv input is live across it */
	assert_int_equal(g.boundary, 1);
	assert_int_equal(g.ops[0].phase, POLICY_PHASE_FWD);
	assert_int_equal(g.ops[2].phase, POLICY_PHASE_BWD);
	assert_true(g.tensors[writes(&g, 0, 2)].flags & POLICY_T_CROSS);
	assert_int_equal(g.tensors[writes(&g, 0, 2)].last_fwd_read, -1);
	assert_int_equal(g.tensors[writes(&g, 0, 2)].first_bwd_read, 1);
	assert_true(g.tensors[read_tensor(&g, 0, 0)].flags & POLICY_T_CONV_IN);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_boundary_from_backward_thread(void **state)
{
	/* GEMMs only (no backward kind): backward is the first op on another thread */
	const pop_t ops[] = {
		{ VMEM_OP_GEMM, 1, 2, { RG(1, 0, 64, ACC_R, "A"), RG(2, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_GEMM, 1, 2, { RG(2, 0, 64, ACC_R, "A"), RG(3, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_GEMM, 2, 2, { RG(3, 0, 64, ACC_R, "A"), RG(4, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_GEMM, 2, 2, { RG(2, 0, 64, ACC_R, "A"), RG(5, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_LAUNCH, 1, 1, { RG(6, 0, 64, ACC_RW, "arg0") } },
	};
	policy_history_t h;
	policy_graph_t g;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 5, 2, 0), 0);
	assert_int_equal(g.boundary, 2);
	assert_int_equal(g.nlanes, 2);
	assert_int_equal(g.lanes[0].nops, 3);
	assert_int_equal(g.lanes[1].nops, 2);
	assert_int_equal(g.lanes[1].ops[0], 2);
	/* tensor of op 0 is read in forward (#1) and in backward (#3): cross */
	assert_int_equal(g.tensors[writes(&g, 0, 1)].last_fwd_read, 1);
	assert_int_equal(g.tensors[writes(&g, 0, 1)].first_bwd_read, 3);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_boundary_after_last_forward_kind(void **state)
{
	/* one thread: the loss kernel and the classifier's backward GEMM come
	 * before the first cuDNN backward op, and are backward already */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_GEMM, 0, 2, { RG(2, 0, 64, ACC_R, "B"), RG(3, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_SOFTMAX_FWD, 0, 2, { RG(3, 0, 64, ACC_R, "x"), RG(4, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_LAUNCH, 0, 2, { RG(4, 0, 64, ACC_R, "arg0"), RG(5, 0, 64, ACC_WW, "arg1") } },
		{ VMEM_OP_GEMM, 0, 2, { RG(5, 0, 64, ACC_R, "A"), RG(6, 0, 64, ACC_WW, "C") } },
		{ VMEM_OP_CONV_BWD_DATA, 0, 2, { RG(6, 0, 64, ACC_R, "dy"), RG(7, 0, 64, ACC_WW, "dx") } },
	};
	policy_history_t h;
	policy_graph_t g;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 6, 2, 0), 0);
	assert_int_equal(g.boundary, 3);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_read_across_two_versions_and_a_gap(void **state)
{
	/* a read that spans two writers' ranges and bytes nobody wrote */
	const pop_t ops[] = {
		{ VMEM_OP_MEMSET, 0, 1, { RG(SEG, 0, 100, ACC_WW, "dst") } },
		{ VMEM_OP_MEMSET, 0, 1, { RG(SEG, 100, 100, ACC_WW, "dst") } },
		{ VMEM_OP_LAUNCH, 0, 1, { RG(SEG, 50, 250, ACC_R, "arg0") } },
	};
	policy_history_t h;
	policy_graph_t g;
	uint64_t bytes[3] = { 0 };
	int producers[3] = { 0 };
	int n = 0;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 3, 2, 0), 0);
	for (int e = 0; e < g.nedges; e++)
		if (g.edges[e].op == 2 && n < 3) {
			producers[n] = g.tensors[g.edges[e].tensor].producer;
			bytes[n++] = g.edges[e].bytes;
		}
	assert_int_equal(n, 3);
	/* [50,100) from #0, [100,200) from #1, [200,300) live-in */
	for (int i = 0; i < 3; i++) {
		if (producers[i] == 0)
			assert_int_equal(bytes[i], 50);
		else if (producers[i] == 1)
			assert_int_equal(bytes[i], 100);
		else
			assert_int_equal(bytes[i], 100);
	}
	assert_int_equal(g.ops[2].nin, 2);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_young_and_unstable_allocations(void **state)
{
	/* alloc 50+ are fresh every iteration; alloc 3 moves its offset */
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 3, { RG(1, 0, 64, ACC_R, "x"), RG(9, 0, 64, ACC_R, "w"),
					    RG(50, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_ACT_FWD, 0, 2, { RG(50, 0, 64, ACC_R, "x"), RG(51, 0, 64, ACC_WW, "y") } },
	};
	policy_history_t h;
	policy_graph_t g;

	(void)state;
	assert_int_equal(prog_graph(&h, &g, ops, 2, 3, 50), 0);
	assert_int_equal(policy_graph_alloc(&g, 2050)->cls, POLICY_ALLOC_YOUNG);
	assert_int_equal(policy_graph_alloc(&g, 2051)->cls, POLICY_ALLOC_YOUNG);
	assert_int_equal(policy_graph_alloc(&g, 9)->cls, POLICY_ALLOC_STABLE);
	assert_int_equal(g.uses[g.ops[0].use0 + 2].ident, POLICY_ID_YOUNG);
	policy_graph_free(&g);
	policy_history_free(&h);
}

static void test_graph_dump_names_ops_and_tensors(void **state)
{
	const pop_t ops[] = {
		{ VMEM_OP_CONV_FWD, 0, 2, { RG(1, 0, 64, ACC_R, "x"), RG(2, 0, 64, ACC_WW, "y") } },
		{ VMEM_OP_CONV_BWD_DATA, 0, 2, { RG(2, 0, 64, ACC_R, "dy"), RG(3, 0, 64, ACC_WW, "dx") } },
	};
	policy_history_t h;
	policy_graph_t g;
	static sink_t s;

	(void)state;
	s.len = 0;
	assert_int_equal(prog_graph(&h, &g, ops, 2, 2, 0), 0);
	policy_graph_dump(&g, sink, &s);
	if (!strstr(s.text, "graph: 2 ops, 4 uses") || !strstr(s.text, "op #0 fwd conv_fwd") ||
	    !strstr(s.text, "op #1 bwd conv_bwd_data") || !strstr(s.text, "y a2+0x0/64 w! same -> t0") ||
	    !strstr(s.text, "tensor t0 a2+0x0/64 by #0: reads 1 refcnt 1 first #1 last #1"))
		fail_msg("dump:\n%s", s.text);
	policy_graph_free(&g);
	policy_history_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_graph_rewritten_block_is_a_new_tensor),
		cmocka_unit_test(test_graph_fork_and_join_counts),
		cmocka_unit_test(test_graph_weights_come_from_previous_iteration),
		cmocka_unit_test(test_graph_boundary_from_backward_thread),
		cmocka_unit_test(test_graph_boundary_after_last_forward_kind),
		cmocka_unit_test(test_graph_read_across_two_versions_and_a_gap),
		cmocka_unit_test(test_graph_young_and_unstable_allocations),
		cmocka_unit_test(test_graph_dump_names_ops_and_tensors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
