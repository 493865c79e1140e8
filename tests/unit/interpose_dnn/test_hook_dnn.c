/* tests/unit/interpose_dnn/test_hook_dnn.c - the pure part of the cuDNN and
 * cuBLAS hooks (interpose/hook_dnn.c): descriptor and GEMM extents, and the
 * graph-API side table fed with synthetic descriptor calls (fake handles,
 * no cuDNN).
 */
#include <pthread.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <cudnn_graph.h>
#include <library_types.h>

#include "interpose/hook_dnn.h"

/* Loud equality on 64-bit values: what was expected and what was got. */
#define EXPECT_U64(what, want, got)                                                      \
	do {                                                                             \
		uint64_t w_ = (uint64_t)(want), g_ = (uint64_t)(got);                    \
		if (w_ != g_)                                                            \
			fail_msg("%s: expected %llu, got %llu", (what),                  \
				 (unsigned long long)w_, (unsigned long long)g_);        \
	} while (0)

/* ------------------------------------------------------------------ */
/* Extents                                                             */

static void test_packed_nchw_tensor_spans_all_elements(void **state)
{
	int64_t d[4] = { 2, 3, 4, 5 }, s[4] = { 60, 20, 5, 1 };

	(void)state;
	EXPECT_U64("2x3x4x5 float NCHW", 120 * 4, hook_strided_extent(4, d, s, 32));
}

static void test_padded_strides_span_to_last_element(void **state)
{
	/* last element at 1*100 + 2*30 + 3*6 + 4*1 = 182 */
	int64_t d[4] = { 2, 3, 4, 5 }, s[4] = { 100, 30, 6, 1 };

	(void)state;
	EXPECT_U64("padded float", 183 * 4, hook_strided_extent(4, d, s, 32));
}

static void test_nhwc_strides_span_like_packed(void **state)
{
	/* dims in NCHW order, NHWC strides: n=60, c=1, h=15, w=3 */
	int64_t d[4] = { 2, 3, 4, 5 }, s[4] = { 60, 1, 15, 3 };

	(void)state;
	EXPECT_U64("NHWC half", 120 * 2, hook_strided_extent(4, d, s, 16));
}

static void test_broadcast_stride_zero_is_allowed(void **state)
{
	int64_t d[2] = { 4, 3 }, s[2] = { 0, 1 };

	(void)state;
	EXPECT_U64("broadcast rows", 3 * 4, hook_strided_extent(2, d, s, 32));
}

static void test_bad_tensors_have_unknown_extent(void **state)
{
	int64_t d[4] = { 2, 3, 4, 5 }, s[4] = { 60, 20, 5, 1 };
	int64_t neg[4] = { 60, -20, 5, 1 }, zero[4] = { 2, 0, 4, 5 };
	int64_t big_d[2] = { INT64_MAX, 4 }, big_s[2] = { INT64_MAX, 1 };

	(void)state;
	EXPECT_U64("negative stride", 0, hook_strided_extent(4, d, neg, 32));
	EXPECT_U64("zero dimension", 0, hook_strided_extent(4, zero, s, 32));
	EXPECT_U64("0 dims", 0, hook_strided_extent(0, d, s, 32));
	EXPECT_U64("9 dims", 0, hook_strided_extent(9, d, s, 32));
	EXPECT_U64("unknown type", 0, hook_strided_extent(4, d, s, 0));
	EXPECT_U64("overflow", 0, hook_strided_extent(2, big_d, big_s, 32));
}

static void test_sub_byte_elements_round_up(void **state)
{
	int64_t d[1] = { 3 }, s[1] = { 1 };

	(void)state;
	EXPECT_U64("three 4-bit elements", 2, hook_strided_extent(1, d, s, 4));
	EXPECT_U64("three packed 4-bit", 2, hook_packed_extent(1, d, 4));
}

static void test_filter_extent_is_product_of_dims(void **state)
{
	int64_t d[4] = { 64, 3, 3, 3 };

	(void)state;
	EXPECT_U64("64x3x3x3 float filter", 1728 * 4, hook_packed_extent(4, d, 32));
	d[1] = 0;
	EXPECT_U64("empty filter", 0, hook_packed_extent(4, d, 32));
}

static void test_data_type_sizes(void **state)
{
	(void)state;
	EXPECT_U64("CUDNN_DATA_FLOAT", 32, hook_cudnn_dtype_bits(CUDNN_DATA_FLOAT));
	EXPECT_U64("CUDNN_DATA_DOUBLE", 64, hook_cudnn_dtype_bits(CUDNN_DATA_DOUBLE));
	EXPECT_U64("CUDNN_DATA_HALF", 16, hook_cudnn_dtype_bits(CUDNN_DATA_HALF));
	EXPECT_U64("CUDNN_DATA_BFLOAT16", 16, hook_cudnn_dtype_bits(CUDNN_DATA_BFLOAT16));
	EXPECT_U64("CUDNN_DATA_INT8", 8, hook_cudnn_dtype_bits(CUDNN_DATA_INT8));
	EXPECT_U64("unknown cuDNN type", 0, hook_cudnn_dtype_bits(9999));
	EXPECT_U64("CUDA_R_32F", 32, hook_cuda_dtype_bits(CUDA_R_32F));
	EXPECT_U64("CUDA_R_16BF", 16, hook_cuda_dtype_bits(CUDA_R_16BF));
	EXPECT_U64("CUDA_R_16F", 16, hook_cuda_dtype_bits(CUDA_R_16F));
	EXPECT_U64("CUDA_R_64F", 64, hook_cuda_dtype_bits(CUDA_R_64F));
	EXPECT_U64("CUDA_C_64F", 128, hook_cuda_dtype_bits(CUDA_C_64F));
	EXPECT_U64("CUDA_R_8F_E4M3", 8, hook_cuda_dtype_bits(CUDA_R_8F_E4M3));
	EXPECT_U64("unknown CUDA type", 0, hook_cuda_dtype_bits(9999));
}

/* m=3, n=4, k=5 in every transpose combination (column major):
 * op(A) 3x5, op(B) 5x4, C 3x4. */
static void test_gemm_nn_tight_leading_dimensions(void **state)
{
	hook_gemm_extents_t e = hook_gemm_extents(0, 0, 3, 4, 5, 3, 5, 3, 32, 32, 32);

	(void)state;
	EXPECT_U64("A 3x5 ld 3", 15 * 4, e.a);
	EXPECT_U64("B 5x4 ld 5", 20 * 4, e.b);
	EXPECT_U64("C 3x4 ld 3", 12 * 4, e.c);
}

static void test_gemm_tn_stores_a_as_k_by_m(void **state)
{
	/* A stored 5x3 with lda 5: (3-1)*5 + 5 = 15 */
	hook_gemm_extents_t e = hook_gemm_extents(1, 0, 3, 4, 5, 5, 5, 3, 32, 32, 32);

	(void)state;
	EXPECT_U64("A^T stored 5x3 ld 5", 15 * 4, e.a);
	EXPECT_U64("B 5x4 ld 5", 20 * 4, e.b);
}

static void test_gemm_nt_stores_b_as_n_by_k(void **state)
{
	/* B stored 4x5 with ldb 4: (5-1)*4 + 4 = 20 */
	hook_gemm_extents_t e = hook_gemm_extents(0, 1, 3, 4, 5, 3, 4, 3, 32, 32, 32);

	(void)state;
	EXPECT_U64("A 3x5 ld 3", 15 * 4, e.a);
	EXPECT_U64("B^T stored 4x5 ld 4", 20 * 4, e.b);
}

static void test_gemm_tt_with_leading_dimensions_larger_than_rows(void **state)
{
	/* A stored 5x3 ld 8: 2*8+5 = 21; B stored 4x5 ld 6: 4*6+4 = 28;
	 * C 3x4 ld 7: 3*7+3 = 24 */
	hook_gemm_extents_t e = hook_gemm_extents(1, 1, 3, 4, 5, 8, 6, 7, 16, 16, 32);

	(void)state;
	EXPECT_U64("A^T half ld 8", 21 * 2, e.a);
	EXPECT_U64("B^T half ld 6", 28 * 2, e.b);
	EXPECT_U64("C float ld 7", 24 * 4, e.c);
}

static void test_gemm_conjugate_transpose_counts_as_transposed(void **state)
{
	hook_gemm_extents_t e = hook_gemm_extents(2, 2, 3, 4, 5, 5, 4, 3, 32, 32, 32);

	(void)state;
	EXPECT_U64("A^H stored 5x3", 15 * 4, e.a);
	EXPECT_U64("B^H stored 4x5", 20 * 4, e.b);
}

static void test_gemm_leading_dimension_below_rows_is_unknown(void **state)
{
	hook_gemm_extents_t e = hook_gemm_extents(0, 0, 3, 4, 5, 2, 5, 3, 32, 32, 32);

	(void)state;
	EXPECT_U64("lda 2 < m 3", 0, e.a);
	EXPECT_U64("B still known", 20 * 4, e.b);
}

static void test_strided_batch_adds_batch_minus_one_strides(void **state)
{
	(void)state;
	EXPECT_U64("3 batches, stride 12 floats", 2 * 12 * 4 + 48,
		   hook_batched_extent(48, 12, 3, 32));
	EXPECT_U64("stride 0 shares one matrix", 48, hook_batched_extent(48, 0, 3, 32));
	EXPECT_U64("one batch", 48, hook_batched_extent(48, 12, 1, 32));
	EXPECT_U64("unknown matrix", 0, hook_batched_extent(0, 12, 3, 32));
}

/* ------------------------------------------------------------------ */
/* Graph-API side table                                                */

/* Fake handles: never dereferenced by the table. */
#define H(i) ((uintptr_t)0x10000 + (uintptr_t)(i) * 0x40)

static void set_i64(hook_bdt_t *t, uintptr_t d, int attr, int64_t n, const int64_t *v)
{
	hook_bdt_set(t, d, attr, CUDNN_TYPE_INT64, n, v);
}

static void set_desc(hook_bdt_t *t, uintptr_t d, int attr, uintptr_t v)
{
	hook_bdt_set(t, d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}

/* A packed NCHW float tensor with uid `uid`. */
static void make_tensor(hook_bdt_t *t, uintptr_t d, int64_t uid, int64_t n, int64_t c,
			int64_t h, int64_t w)
{
	int64_t dims[4] = { n, c, h, w }, str[4] = { c * h * w, h * w, w, 1 };
	int dt = CUDNN_DATA_FLOAT;

	assert_true(hook_bdt_create(t, d, CUDNN_BACKEND_TENSOR_DESCRIPTOR));
	hook_bdt_set(t, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
	set_i64(t, d, CUDNN_ATTR_TENSOR_DIMENSIONS, 4, dims);
	set_i64(t, d, CUDNN_ATTR_TENSOR_STRIDES, 4, str);
	set_i64(t, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, &uid);
}

enum { FWD, BWD_DATA, BWD_FILTER };

/* Handles used by build_conv_plan. */
enum { TX = 1, TY, TW, CONVD, OP, GRAPH, HEUR, CFG, PLAN, VP, ENGINE };

/* Builds what PyTorch builds for one convolution (uids 'x', 'y', 'w';
 * x 2x3x8x8, w 4x3x3x3, y 2x4x6x6), through heuristics and GetAttribute
 * results, then a variant pack with pointers px, py, pw and a workspace. */
static void build_conv_plan(hook_bdt_t *t, int dir, float beta)
{
	static const int optype[] = {
		CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
		CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
		CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
	};
	/* attribute receiving the 'x', 'w', 'y' tensors, and beta */
	static const int attrs[3][4] = {
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA },
	};
	int64_t uids[3] = { 'x', 'y', 'w' }, ws = 4096;
	uintptr_t ptrs[3] = { 0xa000, 0xb000, 0xc000 }, wsp = 0xd000, cfg = H(CFG);

	make_tensor(t, H(TX), 'x', 2, 3, 8, 8);
	make_tensor(t, H(TY), 'y', 2, 4, 6, 6);
	make_tensor(t, H(TW), 'w', 4, 3, 3, 3);
	assert_true(hook_bdt_create(t, H(CONVD), CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
	assert_true(hook_bdt_create(t, H(OP), optype[dir]));
	set_desc(t, H(OP), attrs[dir][0], H(TX));
	set_desc(t, H(OP), attrs[dir][1], H(TW));
	set_desc(t, H(OP), attrs[dir][2], H(TY));
	hook_bdt_set(t, H(OP), attrs[dir][3], CUDNN_TYPE_FLOAT, 1, &beta);
	assert_true(hook_bdt_create(t, H(GRAPH), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
	set_desc(t, H(GRAPH), CUDNN_ATTR_OPERATIONGRAPH_OPS, H(OP));
	assert_true(hook_bdt_create(t, H(HEUR), CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
	set_desc(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, H(GRAPH));
	assert_true(hook_bdt_create(t, H(CFG), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
	hook_bdt_get(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		     &cfg);
	assert_true(hook_bdt_create(t, H(PLAN), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
	set_desc(t, H(PLAN), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, H(CFG));
	hook_bdt_get(t, H(PLAN), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
		     &ws);
	assert_true(hook_bdt_create(t, H(VP), CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
	set_i64(t, H(VP), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, 3, uids);
	hook_bdt_set(t, H(VP), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
	hook_bdt_set(t, H(VP), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
}

static const vmem_ref_t *ref_at(const hook_bdt_exec_t *ex, uintptr_t ptr)
{
	for (int i = 0; i < ex->nrefs; i++)
		if (ex->refs[i].ptr == ptr)
			return &ex->refs[i];
	fail_msg("expected a ref for pointer %#lx among %d refs, found none",
		 (unsigned long)ptr, ex->nrefs);
	return NULL;
}

static void expect_ref(const hook_bdt_exec_t *ex, uintptr_t ptr, const char *role,
		       uint8_t access, uint64_t bytes)
{
	const vmem_ref_t *r = ref_at(ex, ptr);

	if (strcmp(r->role, role) != 0)
		fail_msg("pointer %#lx: expected role %s, got %s", (unsigned long)ptr, role,
			 r->role);
	if (r->access != access)
		fail_msg("pointer %#lx (%s): expected access %u, got %u", (unsigned long)ptr,
			 role, access, r->access);
	if (r->bytes != bytes)
		fail_msg("pointer %#lx (%s): expected %llu bytes, got %llu", (unsigned long)ptr,
			 role, (unsigned long long)bytes, (unsigned long long)r->bytes);
}

static void expect_kind(const hook_bdt_exec_t *ex, vmem_op_kind_t kind)
{
	if (ex->kind != kind)
		fail_msg("expected op kind %s, got %s", vmem_op_name(kind), vmem_op_name(ex->kind));
}

#define XB (2 * 3 * 8 * 8 * 4)
#define YB (2 * 4 * 6 * 6 * 4)
#define WB (4 * 3 * 3 * 3 * 4)

static void test_forward_conv_reads_x_w_writes_y(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;
	static const int64_t conv[7] = { 2, 3, 8, 8, 4, 3, 3 };

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_CONV_FWD);
	assert_true(ex.known_plan);
	EXPECT_U64("refs (x, y, w, ws)", 4, ex.nrefs);
	expect_ref(&ex, 0xa000, "x", VMEM_ACCESS_R, XB);
	/* a packed output with beta 0 and a sized workspace: whole overwrites */
	expect_ref(&ex, 0xb000, "y", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, YB);
	expect_ref(&ex, 0xc000, "w", VMEM_ACCESS_R, WB);
	expect_ref(&ex, 0xd000, "ws", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, 4096);
	assert_true(ex.have_conv);
	for (int i = 0; i < 7; i++)
		EXPECT_U64("conv n,c,h,w,k,r,s", conv[i], ex.conv[i]);
	hook_bdt_free(t);
}

static void test_backward_data_x_uid_is_grad_input_written(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;

	(void)state;
	build_conv_plan(t, BWD_DATA, 0.0f);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_CONV_BWD_DATA);
	expect_ref(&ex, 0xa000, "dx", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, XB);
	expect_ref(&ex, 0xb000, "dy", VMEM_ACCESS_R, YB);
	expect_ref(&ex, 0xc000, "w", VMEM_ACCESS_R, WB);
	EXPECT_U64("n from dx", 2, ex.conv[0]);
	EXPECT_U64("k from w", 4, ex.conv[4]);
	hook_bdt_free(t);
}

static void test_backward_filter_w_uid_is_grad_weight_written(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;

	(void)state;
	build_conv_plan(t, BWD_FILTER, 0.0f);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_CONV_BWD_FILTER);
	expect_ref(&ex, 0xa000, "x", VMEM_ACCESS_R, XB);
	expect_ref(&ex, 0xb000, "dy", VMEM_ACCESS_R, YB);
	expect_ref(&ex, 0xc000, "dw", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, WB);
	hook_bdt_free(t);
}

static void test_nonzero_beta_makes_output_read_write(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;
	double one = 1.0;

	(void)state;
	build_conv_plan(t, BWD_FILTER, 1.0f);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_ref(&ex, 0xc000, "dw", VMEM_ACCESS_RW, WB);
	expect_ref(&ex, 0xa000, "x", VMEM_ACCESS_R, XB);
	hook_bdt_free(t);

	/* beta given as a double, after the plan: not seen by this plan */
	t = hook_bdt_new(64);
	build_conv_plan(t, FWD, 0.0f);
	hook_bdt_set(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_DOUBLE,
		     1, &one);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_ref(&ex, 0xb000, "y", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, YB);
	hook_bdt_free(t);
}

static void test_plan_survives_destroyed_graph(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;
	hook_bdt_stats_t st;

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	/* PyTorch keeps only the plan: everything it was built from goes */
	for (int i = TX; i <= CFG; i++)
		hook_bdt_destroy(t, H(i));
	hook_bdt_stats(t, &st);
	EXPECT_U64("tracked after destroys (plan, variant pack)", 2, st.tracked);
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_CONV_FWD);
	expect_ref(&ex, 0xa000, "x", VMEM_ACCESS_R, XB);
	expect_ref(&ex, 0xb000, "y", VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, YB);
	hook_bdt_free(t);
}

static void test_engine_built_from_graph_leads_to_conv(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	/* a second plan through ENGINE_OPERATION_GRAPH and ENGINECFG_ENGINE,
	 * as cudnn-frontend's fallback list builds it */
	assert_true(hook_bdt_create(t, H(ENGINE), CUDNN_BACKEND_ENGINE_DESCRIPTOR));
	set_desc(t, H(ENGINE), CUDNN_ATTR_ENGINE_OPERATION_GRAPH, H(GRAPH));
	assert_true(hook_bdt_create(t, H(20), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
	set_desc(t, H(20), CUDNN_ATTR_ENGINECFG_ENGINE, H(ENGINE));
	assert_true(hook_bdt_create(t, H(21), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
	set_desc(t, H(21), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, H(20));
	hook_bdt_execute(t, H(21), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_CONV_FWD);
	expect_ref(&ex, 0xc000, "w", VMEM_ACCESS_R, WB);
	/* the plan's workspace size was not asked for: unknown */
	expect_ref(&ex, 0xd000, "ws", VMEM_ACCESS_W, 0);
	hook_bdt_free(t);
}

static void test_output_with_gaps_is_not_a_whole_overwrite(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;
	/* y is a channel slice of a 2x8x6x6 tensor (a concatenation's part):
	 * its span holds the other channels too */
	int64_t dims[4] = { 2, 4, 6, 6 }, str[4] = { 8 * 36, 36, 6, 1 };

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	set_i64(t, H(TY), CUDNN_ATTR_TENSOR_DIMENSIONS, 4, dims);
	set_i64(t, H(TY), CUDNN_ATTR_TENSOR_STRIDES, 4, str);
	set_desc(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, H(TY));
	set_desc(t, H(GRAPH), CUDNN_ATTR_OPERATIONGRAPH_OPS, H(OP));
	set_desc(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, H(GRAPH));
	{
		uintptr_t cfg = H(CFG);

		hook_bdt_get(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
			     1, &cfg);
	}
	set_desc(t, H(PLAN), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, H(CFG));
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_ref(&ex, 0xb000, "y", VMEM_ACCESS_W, (uint64_t)((1 * 8 * 36 + 3 * 36 + 5 * 6 + 5 + 1) * 4));
	hook_bdt_free(t);
}

/* dnn_split.c: a per-image call is split only when its tensors need more
 * than 3/4 of the budget, into the fewest slices of at most 1/4 each,
 * never more than one image a slice. */
static void test_split_slices_only_past_three_quarters(void **state)
{
	static const struct {
		uint64_t pages, budget;
		int n, want;
	} cases[] = {
		{ 68, 62, 8, 5 },      /* the fuzz's cudnnPoolingBackward: 68 MiB in 62 */
		{ 47, 62, 8, 1 },      /* 62 - 62/4 = 47: whole */
		{ 48, 62, 8, 4 },      /* over 3/4: quarters of 15 -> ceil(48/15) */
		{ 100, 0, 8, 1 },      /* no budget */
		{ 100, 62, 1, 1 },     /* one image cannot be split */
		{ 1000, 62, 8, 8 },    /* at most one image a slice */
		{ 10, 3, 4, 4 },       /* a quarter of 0 bytes: one image a slice */
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = hook_split_slices(cases[i].pages, cases[i].budget, cases[i].n);

		if (got != cases[i].want)
			fail_msg("hook_split_slices(%" PRIu64 ", %" PRIu64 ", %d): expected %d, got %d",
				 cases[i].pages, cases[i].budget, cases[i].n, cases[i].want, got);
	}
}

/* Slices in whole pages: a slice that straddles a page boundary needs a
 * page more per tensor, so the slice size is chosen on pages, not bytes;
 * a whole tensor (image 0) counts in every slice. */
static void test_slice_images_count_whole_pages(void **state)
{
	const uint64_t C = 2 << 20;   /* 2 MiB pages */
	/* 16 images of 240 KiB in four tensors, as random:86575498's pooling */
	hook_slice_t t[4] = { { 0 * C, 245760, 245760 }, { 4 * C, 245760, 245760 },
			      { 8 * C, 245760, 245760 }, { 12 * C, 245760, 245760 } };
	hook_slice_t w[2] = { { 0, 1 << 20, 1 << 20 }, { 8 * C, 0, 3 * C } };
	(void)state;

	/* images 8..10 span 1920..2640 KiB: across the first page boundary */
	assert_int_equal(hook_slice_pages(t, 4, 8, 3, C), 4 * 2 * C);
	assert_int_equal(hook_slice_pages(t, 4, 0, 3, C), 4 * C);
	/* every slicing of 16 has a slice across 2048 KiB: 16 MiB of pages
	 * (the fuzz's OOM at 12 MiB stays one), and fits in 16 */
	assert_int_equal(hook_slice_images(t, 4, 16, 6, 7 * C, 0, C), 0);
	assert_int_equal(hook_slice_images(t, 4, 16, 6, 8 * C, 0, C), 3);
	/* from k0 = 2 the first fit in 16 MiB is 8 a slice, in 8 MiB none */
	assert_int_equal(hook_slice_images(t, 4, 16, 2, 8 * C, 0, C), 8);
	assert_int_equal(hook_slice_images(t, 4, 16, 2, 4 * C, 0, C), 0);
	/* a whole 6 MiB tensor in every slice: 1 MiB images, 2 a slice */
	assert_int_equal(hook_slice_pages(w, 2, 0, 2, C), C + 3 * C);
	assert_int_equal(hook_slice_images(w, 2, 8, 2, 4 * C, 0, C), 2);
	assert_int_equal(hook_slice_images(w, 2, 8, 2, 3 * C, 0, C), 0);
	/* nothing to slice */
	assert_int_equal(hook_slice_images(t, 4, 0, 1, 8 * C, 0, C), 0);
	/* the whole rule: 16 MiB of pages in 20 MiB runs whole; in 12 none
	 * of the slicings fits 9 MiB; 25 MiB in 32 (over its 24) wants
	 * quarters of 8 MiB, 4 slices of 4 images, each within 24 in pages */
	assert_int_equal(hook_split_images(t, 4, 16, 16 * C / 2, 20 << 20, C), 0);
	assert_int_equal(hook_split_images(t, 4, 16, 8 * C, 12 << 20, C), 0);
	assert_int_equal(hook_split_images(t, 4, 16, 25 << 20, 32 << 20, C), 4);
	assert_int_equal(hook_split_images(t, 4, 16, 8 * C, 0, C), 0);
	/* random:1619885934's pooling backward at 1/2 (14 MiB): x and dx of
	 * 16 images of 385024 bytes, y and dy 376 bytes an image in two
	 * slabs - 8 pages whole; every slicing has a slice across a page
	 * boundary (6 pages, over 3/4 of the budget), and 4 slices of 4 fit
	 * the whole budget, but two of them in a row (images 4..11) need 8
	 * pages of its 7; slices of 3 fit it two at a time: taken, since
	 * whole the call cannot run at all */
	hook_slice_t p[4] = { { 0, 385024, 385024 }, { 4 * C, 385024, 385024 },
			      { 8 * C + 4096, 376, 376 }, { 9 * C + 4096, 376, 376 } };
	assert_int_equal(hook_slice_images(p, 4, 16, 5, 14 << 20, 0, C), 4);
	assert_int_equal(hook_slice_pages(p, 4, 4, 8, C), 8 * C);
	assert_int_equal(hook_slice_images(p, 4, 16, 5, 14 << 20, 14 << 20, C), 3);
	assert_int_equal(hook_slice_images(p, 4, 16, 5, (14 << 20) - (14 << 20) / 4, 0, C), 0);
	assert_int_equal(hook_split_images(p, 4, 16, 8 * C, 14 << 20, C), 3);
	/* in 16 MiB a slice leaves a quarter free (the first rule), two in
	 * a row fit 16 MiB; in 22 it runs whole, in 10 no slicing fits */
	assert_int_equal(hook_split_images(p, 4, 16, 8 * C, 16 << 20, C), 4);
	assert_int_equal(hook_split_images(p, 4, 16, 8 * C, 22 << 20, C), 0);
	assert_int_equal(hook_split_images(p, 4, 16, 8 * C, 10 << 20, C), 0);
}

/* Slices whose every two in a row fit the budget: random:1851711389's
 * backward-filter convolution at 1/2 (10 MiB, 5 pages).  x of 16 images
 * of 442368 bytes and dy of 147456 in their own allocations, dw in a
 * slab.  Slices of 3 each fit the budget, but images 9..11 and 12..14
 * share only 3 of the 5 pages the second needs, so its last page waited
 * for the first to end (a miss in every planned iteration); slices of 2
 * need at most 5 pages two at a time. */
static void test_slices_two_in_a_row_fit_the_budget(void **state)
{
	const uint64_t C = 2 << 20, budget = 10 << 20;
	hook_slice_t t[3] = { { 16 * C, 442368, 442368 }, { 24 * C, 147456, 147456 },
			      { 30 * C + 8192, 0, 972 } };
	(void)state;

	assert_int_equal(hook_split_slices(7 * C, budget, 16), 6);
	/* the rule before: the first candidate of 3 fits the budget alone */
	assert_int_equal(hook_slice_images(t, 3, 16, 6, budget, 0, C), 3);
	assert_int_equal(hook_slice_pages(t, 3, 12, 3, C), 5 * C);
	assert_int_equal(hook_slice_pages(t, 3, 9, 6, C), 6 * C);
	/* no slicing leaves a quarter free; 2 a slice fit two at a time */
	assert_int_equal(hook_slice_images(t, 3, 16, 6, budget - budget / 4, 0, C), 0);
	assert_int_equal(hook_slice_images(t, 3, 16, 6, budget, budget, C), 2);
	for (int first = 0; first < 16; first += 2) {
		uint64_t two = hook_slice_pages(t, 3, first, first + 4 <= 16 ? 4 : 16 - first, C);

		if (two > budget)
			fail_msg("slices at %d and %d: expected at most %" PRIu64 " bytes of pages, got %" PRIu64,
				 first, first + 2, budget, two);
	}
	assert_int_equal(hook_split_images(t, 3, 16, 7 * C, budget, C), 2);
	/* in a budget of many pages the first candidate fits both ways */
	assert_int_equal(hook_split_images(t, 3, 16, 7 * C, 8 * C, C), 4);
}

/* Slices cut where the pages say (slices of planes, dnn_split.c):
 * random:185167115's activation backward at 1/2 (14 MiB): y, dy, x and
 * dx of 3.75 MiB each, page-aligned, 240 planes of 16 KiB.  Every slicing
 * of its 16 images has a slice whose four tensors all straddle 2 MiB (8
 * pages of 7); planes stop at the boundary: 128, then 112, 4 pages each. */
static void check_next(const hook_slice_t *t, int nt, int n, int first, uint64_t budget,
		       uint64_t chunk, int want, const char *what)
{
	int got = hook_slice_next(t, nt, n, first, budget, chunk);

	if (got != want)
		fail_msg("hook_slice_next(%s, first %d of %d, budget %" PRIu64 " KiB): expected %d "
			 "units, got %d", what, first, n, budget >> 10, want, got);
}

static void test_slice_next_stops_at_page_boundaries(void **state)
{
	const uint64_t C = 2 << 20, plane = 64 * 64 * 4;
	hook_slice_t img[4], pl[4];

	(void)state;
	for (int i = 0; i < 4; i++) {
		img[i] = (hook_slice_t){ (uint64_t)(2 * i + 1) * C, 15 * plane, 15 * plane };
		pl[i] = (hook_slice_t){ (uint64_t)(2 * i + 1) * C, plane, plane };
	}
	assert_int_equal(hook_split_images(img, 4, 16, 8 * C, 14 << 20, C), 0);
	/* a plane of each is 4 pages: over a quarter (3.5 MiB), within 3/4 */
	check_next(pl, 4, 240, 0, 14 << 20, C, 128, "planes from 0");
	check_next(pl, 4, 240, 128, 14 << 20, C, 112, "planes from 128");
	check_next(pl, 4, 240, 100, 14 << 20, C, 28, "planes from 100");
	/* images: the one across the boundary needs 8 pages, over 14 MiB */
	check_next(img, 4, 16, 8, 14 << 20, C, 0, "image 8");
	/* in 16 MiB it fits the whole budget, and so do the rest with it */
	check_next(img, 4, 16, 8, 16 << 20, C, 8, "images from 8 in the whole 16 MiB");
	/* small units in a large budget: slices of about a quarter of it
	 * (64 MiB: 8 pages, 2 a tensor - all 240 planes) */
	check_next(pl, 4, 240, 0, 64 << 20, C, 240, "planes in 64 MiB");
	check_next(pl, 4, 240, 0, 32 << 20, C, 128, "planes in 32 MiB (a quarter: 4 pages)");
	/* nothing left, no budget */
	check_next(pl, 4, 240, 240, 14 << 20, C, 0, "past the end");
	check_next(pl, 4, 240, 0, 0, C, 0, "no budget");
}

static void test_dense_strides_and_dtypes(void **state)
{
	int64_t d[4] = { 2, 3, 4, 5 };
	int64_t nchw[4] = { 60, 20, 5, 1 }, nhwc[4] = { 60, 1, 15, 3 };
	int64_t slice[4] = { 120, 20, 5, 1 }, bcast[4] = { 0, 20, 5, 1 };

	(void)state;
	assert_true(hook_strided_dense(4, d, nchw));
	assert_true(hook_strided_dense(4, d, nhwc));
	assert_false(hook_strided_dense(4, d, slice));
	assert_false(hook_strided_dense(4, d, bcast));
	assert_false(hook_strided_dense(0, d, nchw));
	assert_int_equal(hook_cudnn_dtype(CUDNN_DATA_BFLOAT16), VMEM_DTYPE_BF16);
	assert_int_equal(hook_cudnn_dtype(CUDNN_DATA_FLOAT), VMEM_DTYPE_F32);
	assert_int_equal(hook_cudnn_dtype(-1), VMEM_DTYPE_UNKNOWN);
	assert_int_equal(hook_cuda_dtype(CUDA_R_16F), VMEM_DTYPE_F16);
	assert_int_equal(hook_cuda_dtype(CUDA_R_32F), VMEM_DTYPE_F32);
}

static void test_unknown_plan_is_other_with_every_pointer_rw(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	hook_bdt_execute(t, H(99), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_OTHER);
	assert_false(ex.known_plan);
	EXPECT_U64("refs", 4, ex.nrefs);
	expect_ref(&ex, 0xa000, "t", VMEM_ACCESS_RW, 0);
	expect_ref(&ex, 0xb000, "t", VMEM_ACCESS_RW, 0);
	expect_ref(&ex, 0xd000, "ws", VMEM_ACCESS_W, 0);

	/* unknown variant pack: nothing known, nothing crashes */
	hook_bdt_execute(t, H(PLAN), H(98), &ex);
	expect_kind(&ex, VMEM_OP_CONV_FWD);
	EXPECT_U64("refs of an unknown variant pack", 0, ex.nrefs);
	hook_bdt_execute(t, 0, 0, &ex);
	expect_kind(&ex, VMEM_OP_OTHER);
	hook_bdt_execute(NULL, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_OTHER);
	hook_bdt_free(t);
}

static void test_fused_graph_is_other_with_every_pointer_rw(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;
	uintptr_t ops[2] = { H(OP), H(30) }, cfg = H(33);
	int64_t uids[4] = { 'x', 'y', 'w', 'b' };
	uintptr_t ptrs[4] = { 0xa000, 0xb000, 0xc000, 0xe000 };
	bool virt = true;

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	/* conv output made virtual, then y = conv + b (pointwise) */
	make_tensor(t, H(31), 'C', 2, 4, 6, 6);
	hook_bdt_set(t, H(31), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
	make_tensor(t, H(32), 'b', 1, 4, 1, 1);
	assert_true(hook_bdt_create(t, H(30), CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
	set_desc(t, H(30), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, H(31));
	set_desc(t, H(30), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, H(32));
	set_desc(t, H(30), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, H(TY));
	assert_true(hook_bdt_create(t, H(34), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
	hook_bdt_set(t, H(34), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops);
	assert_true(hook_bdt_create(t, H(35), CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
	set_desc(t, H(35), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, H(34));
	assert_true(hook_bdt_create(t, cfg, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
	hook_bdt_get(t, H(35), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		     &cfg);
	assert_true(hook_bdt_create(t, H(36), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
	set_desc(t, H(36), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
	set_i64(t, H(VP), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, 4, uids);
	hook_bdt_set(t, H(VP), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 4, ptrs);
	hook_bdt_execute(t, H(36), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_OTHER);
	assert_true(ex.known_plan);
	expect_ref(&ex, 0xa000, "x", VMEM_ACCESS_RW, XB);
	expect_ref(&ex, 0xb000, "y", VMEM_ACCESS_RW, YB);
	expect_ref(&ex, 0xc000, "w", VMEM_ACCESS_RW, WB);
	expect_ref(&ex, 0xe000, "b", VMEM_ACCESS_RW, 4 * 4);
	assert_true(ex.have_conv);
	hook_bdt_free(t);
}

static void test_reused_handle_forgets_what_it_was(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_bdt_exec_t ex;

	(void)state;
	build_conv_plan(t, FWD, 0.0f);
	/* cuDNN hands the plan's handle out again for a new plan, destroy
	 * unseen: the new plan leads nowhere yet */
	assert_true(hook_bdt_create(t, H(PLAN), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
	hook_bdt_execute(t, H(PLAN), H(VP), &ex);
	expect_kind(&ex, VMEM_OP_OTHER);
	assert_false(ex.known_plan);
	EXPECT_U64("type of the reused handle", CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
		   hook_bdt_type(t, H(PLAN)));
	/* convolution descriptors are followed (their pads, strides and
	 * dilations build vmem's micro-batch plans); knob choices are not */
	EXPECT_U64("convolution descriptor", CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
		   (uint64_t)hook_bdt_type(t, H(CONVD)));
	assert_true(hook_bdt_create(t, 0x7777, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
	EXPECT_U64("untracked type", (uint64_t)-1, (uint64_t)hook_bdt_type(t, 0x7777));
	hook_bdt_free(t);
}

/* vmem builds its own plans for slices of a graph-API convolution: the
 * table must carry everything the operation was built from, through the
 * graph, heuristics, engine config and plan, after the building blocks
 * are destroyed (PyTorch destroys them before executing). */
static void test_conv_geometry_follows_the_chain_to_the_plan(void **state)
{
	hook_bdt_t *t = hook_bdt_new(64);
	hook_conv_geom_t g;
	int64_t two = 2, pad[2] = { 1, 2 }, str[2] = { 1, 2 }, dil[2] = { 1, 3 };
	int comp = CUDNN_DATA_FLOAT, mode = CUDNN_CROSS_CORRELATION;
	uintptr_t conv = H(CONVD), handle = 0xbeef;
	double alpha = 0.5;
	int64_t align = 16;

	(void)state;
	build_conv_plan(t, BWD_FILTER, 1.0f);
	/* before the convolution descriptor is attached: not enough */
	assert_false(hook_bdt_conv_geom(t, H(PLAN), &g));
	hook_bdt_set(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
	hook_bdt_set(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
		     &mode);
	set_i64(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 1, &two);
	set_i64(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 2, pad);
	set_i64(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, 2, pad);
	set_i64(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 2, str);
	set_i64(t, H(CONVD), CUDNN_ATTR_CONVOLUTION_DILATIONS, 2, dil);
	set_i64(t, H(TX), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, &align);
	/* rebuild the operation and its chain with the descriptor attached */
	assert_true(hook_bdt_create(t, H(OP), CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR));
	set_desc(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, H(TX));
	set_desc(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, H(TW));
	set_desc(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, H(TY));
	hook_bdt_set(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
		     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
	hook_bdt_set(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_DOUBLE,
		     1, &alpha);
	double one = 1.0;
	hook_bdt_set(t, H(OP), CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_DOUBLE,
		     1, &one);
	assert_true(hook_bdt_create(t, H(GRAPH), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
	hook_bdt_set(t, H(GRAPH), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
	set_desc(t, H(GRAPH), CUDNN_ATTR_OPERATIONGRAPH_OPS, H(OP));
	assert_true(hook_bdt_create(t, H(CFG), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
	uintptr_t cfg = H(CFG);
	assert_true(hook_bdt_create(t, H(HEUR), CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
	set_desc(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, H(GRAPH));
	hook_bdt_get(t, H(HEUR), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		     &cfg);
	assert_true(hook_bdt_create(t, H(PLAN), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
	set_desc(t, H(PLAN), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, H(CFG));
	/* the building blocks go away */
	for (int d = TX; d <= HEUR; d++)
		hook_bdt_destroy(t, H(d));
	hook_bdt_destroy(t, H(CFG));
	if (!hook_bdt_conv_geom(t, H(PLAN), &g))
		fail_msg("expected the plan to lead to a full convolution geometry, got none");
	EXPECT_U64("op type", CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
		   (uint64_t)g.optype);
	EXPECT_U64("x uid", 'x', (uint64_t)g.t[0].uid);
	EXPECT_U64("w (dw) uid", 'w', (uint64_t)g.t[1].uid);
	EXPECT_U64("y (dy) uid", 'y', (uint64_t)g.t[2].uid);
	EXPECT_U64("x N", 2, (uint64_t)g.t[0].dims[0]);
	EXPECT_U64("y C", 4, (uint64_t)g.t[2].dims[1]);
	EXPECT_U64("x alignment", 16, (uint64_t)g.t[0].align);
	EXPECT_U64("spatial dims", 2, (uint64_t)g.nsp);
	EXPECT_U64("pad w", 2, (uint64_t)g.pre[1]);
	EXPECT_U64("stride w", 2, (uint64_t)g.stride[1]);
	EXPECT_U64("dilation w", 3, (uint64_t)g.dil[1]);
	EXPECT_U64("mode", CUDNN_CROSS_CORRELATION, (uint64_t)g.mode);
	EXPECT_U64("scale type", CUDNN_TYPE_DOUBLE, (uint64_t)g.scale_type);
	assert_true(g.alpha == 0.5 && g.beta == 1.0);
	EXPECT_U64("handle", 0xbeef, (uint64_t)g.handle);
	hook_bdt_free(t);
}

static void test_table_memory_is_bounded(void **state)
{
	hook_bdt_t *t = hook_bdt_new(4);
	hook_bdt_stats_t st;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_true(hook_bdt_create(t, H(i + 1), CUDNN_BACKEND_TENSOR_DESCRIPTOR));
	assert_false(hook_bdt_create(t, H(5), CUDNN_BACKEND_TENSOR_DESCRIPTOR));
	hook_bdt_stats(t, &st);
	EXPECT_U64("tracked", 4, st.tracked);
	EXPECT_U64("untracked", 1, st.untracked);
	hook_bdt_destroy(t, H(2));
	assert_true(hook_bdt_create(t, H(5), CUDNN_BACKEND_TENSOR_DESCRIPTOR));
	hook_bdt_stats(t, &st);
	EXPECT_U64("peak", 4, st.peak);
	/* a set on an untracked descriptor is ignored */
	hook_bdt_set(t, H(77), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		     &(uintptr_t){ H(1) });
	hook_bdt_free(t);
}

static void test_variant_pack_beyond_limit_refuses_the_execution(void **state)
{
	hook_bdt_t *t = hook_bdt_new(8);
	int64_t uids[HOOK_BDT_MAX_VP + 3];
	uintptr_t ptrs[HOOK_BDT_MAX_VP + 3];
	hook_bdt_exec_t ex;
	hook_bdt_stats_t st;

	(void)state;
	for (int i = 0; i < HOOK_BDT_MAX_VP + 3; i++) {
		uids[i] = i;
		ptrs[i] = 0x100000 + (uintptr_t)i * 0x1000;
	}
	assert_true(hook_bdt_create(t, H(1), CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
	set_i64(t, H(1), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HOOK_BDT_MAX_VP + 3, uids);
	hook_bdt_set(t, H(1), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
		     HOOK_BDT_MAX_VP + 3, ptrs);
	hook_bdt_execute(t, H(2), H(1), &ex);
	EXPECT_U64("refs kept", HOOK_BDT_MAX_VP, ex.nrefs);
	/* The pointers past the limit are not known: running the plan would
	 * touch memory vmem did not make resident, so the hook refuses it. */
	if (!ex.refs_lost)
		fail_msg("expected refs_lost for a variant pack of %d pointers (limit %d), got false",
			 HOOK_BDT_MAX_VP + 3, HOOK_BDT_MAX_VP);
	hook_bdt_stats(t, &st);
	EXPECT_U64("dropped pairs (uids + pointers)", 6, st.dropped);
	hook_bdt_free(t);
}

/* Two threads build and run their own plans at once on one table. */
struct thr_arg {
	hook_bdt_t *t;
	uintptr_t base;
	int bad;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	int64_t uid = 'x', dims[4] = { 1, 1, 2, 2 }, str[4] = { 4, 4, 2, 1 };
	int dt = CUDNN_DATA_FLOAT;
	uintptr_t b = a->base;

	for (int it = 0; it < 2000; it++) {
		uintptr_t x = b + 1, w = b + 2, y = b + 3, op = b + 4, g = b + 5, plan = b + 6,
			  vp = b + 7, ptr = 0x5000 + b;
		hook_bdt_exec_t ex;
		int64_t uids[1] = { 'x' };

		hook_bdt_create(a->t, x, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
		hook_bdt_set(a->t, x, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
		hook_bdt_set(a->t, x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
		hook_bdt_set(a->t, x, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
		hook_bdt_set(a->t, x, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
		hook_bdt_create(a->t, op, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
		hook_bdt_set(a->t, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
			     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
		hook_bdt_create(a->t, g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
		hook_bdt_set(a->t, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
			     1, &op);
		hook_bdt_create(a->t, plan, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
		hook_bdt_set(a->t, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
			     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
		hook_bdt_create(a->t, vp, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
		hook_bdt_set(a->t, vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 1, uids);
		hook_bdt_set(a->t, vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 1,
			     &ptr);
		hook_bdt_execute(a->t, plan, vp, &ex);
		if (ex.kind != VMEM_OP_CONV_FWD || ex.nrefs != 1 || ex.refs[0].ptr != ptr ||
		    ex.refs[0].bytes != 16 || strcmp(ex.refs[0].role, "x") != 0)
			a->bad++;
		(void)w;
		(void)y;
		for (uintptr_t d = b + 1; d <= b + 7; d++)
			hook_bdt_destroy(a->t, d);
	}
	return NULL;
}

static void test_two_threads_use_the_table_at_once(void **state)
{
	hook_bdt_t *t = hook_bdt_new(1024);
	struct thr_arg a[2] = { { t, 0x100000, 0 }, { t, 0x200000, 0 } };
	pthread_t th[2];
	hook_bdt_stats_t st;

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &a[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	EXPECT_U64("thread 1 executes with a wrong event", 0, a[0].bad);
	EXPECT_U64("thread 2 executes with a wrong event", 0, a[1].bad);
	hook_bdt_stats(t, &st);
	EXPECT_U64("tracked after both threads destroyed everything", 0, st.tracked);
	hook_bdt_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packed_nchw_tensor_spans_all_elements),
		cmocka_unit_test(test_padded_strides_span_to_last_element),
		cmocka_unit_test(test_nhwc_strides_span_like_packed),
		cmocka_unit_test(test_broadcast_stride_zero_is_allowed),
		cmocka_unit_test(test_bad_tensors_have_unknown_extent),
		cmocka_unit_test(test_sub_byte_elements_round_up),
		cmocka_unit_test(test_filter_extent_is_product_of_dims),
		cmocka_unit_test(test_data_type_sizes),
		cmocka_unit_test(test_gemm_nn_tight_leading_dimensions),
		cmocka_unit_test(test_gemm_tn_stores_a_as_k_by_m),
		cmocka_unit_test(test_gemm_nt_stores_b_as_n_by_k),
		cmocka_unit_test(test_gemm_tt_with_leading_dimensions_larger_than_rows),
		cmocka_unit_test(test_gemm_conjugate_transpose_counts_as_transposed),
		cmocka_unit_test(test_gemm_leading_dimension_below_rows_is_unknown),
		cmocka_unit_test(test_strided_batch_adds_batch_minus_one_strides),
		cmocka_unit_test(test_forward_conv_reads_x_w_writes_y),
		cmocka_unit_test(test_backward_data_x_uid_is_grad_input_written),
		cmocka_unit_test(test_backward_filter_w_uid_is_grad_weight_written),
		cmocka_unit_test(test_nonzero_beta_makes_output_read_write),
		cmocka_unit_test(test_plan_survives_destroyed_graph),
		cmocka_unit_test(test_engine_built_from_graph_leads_to_conv),
		cmocka_unit_test(test_output_with_gaps_is_not_a_whole_overwrite),
		cmocka_unit_test(test_dense_strides_and_dtypes),
		cmocka_unit_test(test_unknown_plan_is_other_with_every_pointer_rw),
		cmocka_unit_test(test_fused_graph_is_other_with_every_pointer_rw),
		cmocka_unit_test(test_reused_handle_forgets_what_it_was),
		cmocka_unit_test(test_conv_geometry_follows_the_chain_to_the_plan),
		cmocka_unit_test(test_table_memory_is_bounded),
		cmocka_unit_test(test_split_slices_only_past_three_quarters),
		cmocka_unit_test(test_slice_images_count_whole_pages),
		cmocka_unit_test(test_slices_two_in_a_row_fit_the_budget),
		cmocka_unit_test(test_slice_next_stops_at_page_boundaries),
		cmocka_unit_test(test_variant_pack_beyond_limit_refuses_the_execution),
		cmocka_unit_test(test_two_threads_use_the_table_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
