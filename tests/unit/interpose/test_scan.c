/* tests/unit/interpose/test_scan.c - kernel-parameter scanning: a buffer
 * whose words are vmem pointers, foreign pointers and integers, with a
 * fake owns() range; the per-function layout cache; and the extents a
 * known kernel family's parameters bound (kernel_bounds.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "interpose/kernel_bounds.h"
#include "interpose/pool_ref.h"
#include "interpose/scan.h"
#include "interpose/trace.h"

void trace_header_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }
void trace_end_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }

/* The fake reserved range: [0x7f0000000000, +1 TiB). */
#define VA_BASE 0x7f0000000000ull
#define VA_SIZE (1ull << 40)

static bool fake_owns(uintptr_t p)
{
	return p - VA_BASE < VA_SIZE;
}

static void test_scan_finds_only_vmem_pointers(void **state)
{
	/* mt_probe(float *a, u64 x, float *b, int y, double z, const void *c) */
	uintptr_t a = VA_BASE + 0x200000, b = VA_BASE + 0x400000;
	uint64_t x = 42;
	int y = 7;
	double z = 3.5;
	static char host[16];
	const void *c = host;
	void *args[] = { &a, &x, &b, &y, &z, &c };
	const scan_param_t params[] = { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 }, { 32, 8 }, { 40, 8 } };
	vmem_ref_t refs[VMEM_INLINE_REFS];
	int missed = -1;
	int n;

	(void)state;
	n = scan_args(args, params, 6, fake_owns, refs, VMEM_INLINE_REFS, &missed);
	assert_int_equal(n, 2);
	assert_int_equal(missed, 0);
	assert_int_equal(refs[0].ptr, a);
	assert_string_equal(refs[0].role, "arg0");
	assert_int_equal(refs[1].ptr, b);
	assert_string_equal(refs[1].role, "arg2");
	for (int i = 0; i < n; i++) {
		assert_int_equal(refs[i].access, VMEM_ACCESS_RW);
		assert_int_equal(refs[i].bytes, 0);
	}
}

static void test_integer_inside_range_counts_and_foreign_does_not(void **state)
{
	/* An integer equal to a vmem address is indistinguishable from a
	 * pointer (a false positive, costing a fault-in); a pointer one past
	 * the range is foreign. */
	uint64_t looks_like_ptr = VA_BASE + 8;
	uint64_t just_outside = VA_BASE + VA_SIZE;
	uint64_t just_below = VA_BASE - 1;
	void *args[] = { &looks_like_ptr, &just_outside, &just_below };
	const scan_param_t params[] = { { 0, 8 }, { 8, 8 }, { 16, 8 } };
	vmem_ref_t refs[4];
	int n;

	(void)state;
	n = scan_args(args, params, 3, fake_owns, refs, 4, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(refs[0].ptr, looks_like_ptr);
}

static void test_struct_parameter_is_scanned_word_by_word(void **state)
{
	/* A 40-byte struct param at offset 8 holding {int n; ptr p0; ptr p1;
	 * double d; ptr foreign}, as TensorIterator-style kernels pass. */
	struct {
		int n;
		uintptr_t p0, p1;
		double d;
		uintptr_t foreign;
	} s;
	int first = 1;
	void *args[] = { &first, &s };
	const scan_param_t params[] = { { 0, 4 }, { 8, sizeof(s) } };
	vmem_ref_t refs[8];
	int n;

	(void)state;
	/* Zero the padding after `n`: garbage there (say, half a stack
	 * address) would be scanned like any other word. */
	memset(&s, 0, sizeof(s));
	s.n = 3;
	s.p0 = VA_BASE + 0x1000;
	s.p1 = VA_BASE + 0x2000;
	s.d = 1.0;
	s.foreign = 0x1000;
	n = scan_args(args, params, 2, fake_owns, refs, 8, NULL);
	assert_int_equal(n, 2);
	assert_int_equal(refs[0].ptr, s.p0);
	assert_int_equal(refs[1].ptr, s.p1);
	assert_string_equal(refs[1].role, "arg1");
}

static void test_unaligned_words_are_not_read(void **state)
{
	/* A 12-byte param at offset 4: its only 8-aligned word is [8, 16),
	 * bytes 4..11 of the value. */
	unsigned char val[12];
	uintptr_t p = VA_BASE + 0x3000;
	void *args[] = { val };
	const scan_param_t params[] = { { 4, 12 } };
	vmem_ref_t refs[2];

	(void)state;
	memset(val, 0, sizeof(val));
	memcpy(val, &p, 4);   /* bytes 0..3 (offsets 4..7): never a word */
	assert_int_equal(scan_args(args, params, 1, fake_owns, refs, 2, NULL), 0);
	memset(val, 0, sizeof(val));
	memcpy(val + 4, &p, 8);   /* offsets 8..15 */
	assert_int_equal(scan_args(args, params, 1, fake_owns, refs, 2, NULL), 1);
	assert_int_equal(refs[0].ptr, p);
}

static void test_repeated_pointer_is_one_ref_and_overflow_is_counted(void **state)
{
	uintptr_t v[20];
	void *args[20];
	scan_param_t params[20];
	vmem_ref_t refs[VMEM_INLINE_REFS];
	int missed = 0, n;

	(void)state;
	for (int i = 0; i < 20; i++) {
		v[i] = VA_BASE + 0x10000ull * (uintptr_t)(i < 2 ? 0 : i);   /* 0 and 1 repeat */
		args[i] = &v[i];
		params[i].offset = (uint32_t)(8 * i);
		params[i].size = 8;
	}
	n = scan_args(args, params, 20, fake_owns, refs, VMEM_INLINE_REFS, &missed);
	assert_int_equal(n, VMEM_INLINE_REFS);
	assert_int_equal(missed, 19 - VMEM_INLINE_REFS);
}

static void test_packed_buffer_scan(void **state)
{
	uint64_t buf[4] = { 5, VA_BASE + 64, 0xdeadbeef, VA_BASE + 128 };
	vmem_ref_t refs[4];

	(void)state;
	assert_int_equal(scan_buffer(buf, sizeof(buf), fake_owns, refs, 4, NULL), 2);
	assert_int_equal(refs[0].ptr, VA_BASE + 64);
	assert_string_equal(refs[1].role, "buf");
	assert_int_equal(scan_buffer(buf, 12, fake_owns, refs, 4, NULL), 0);
}

/* ---- layout cache ---- */

static int queries;

static int fake_query(const void *func, int i, size_t *off, size_t *size)
{
	int nparams = (int)(uintptr_t)func & 0xff;

	queries++;
	if ((uintptr_t)func & 0x100)
		return -1;
	if (i >= nparams)
		return 1;
	*off = (size_t)(8 * i);
	*size = 8;
	return 0;
}

static int fake_name(const void *func, char *buf, size_t len)
{
	(void)func;
	strncpy(buf, "k\"1", len);
	return 0;
}

static void test_layout_is_queried_once_per_function(void **state)
{
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tl;
	const scan_layout_t *l;
	const void *f = (const void *)(uintptr_t)0x10006;

	(void)state;
	scan_cache_reset();
	queries = 0;
	assert_null(scan_layout_find(f));
	l = scan_layout(f, fake_query, fake_name, &tl, tmp);
	assert_int_equal(l->nparams, 6);
	assert_int_equal(l->params[5].offset, 40);
	assert_string_equal(l->name, "k\\\"1");
	assert_int_equal(queries, 7);
	assert_ptr_equal(scan_layout_find(f), l);
	l = scan_layout(f, fake_query, fake_name, &tl, tmp);
	assert_int_equal(queries, 7);
	assert_int_equal(l->nparams, 6);
}

static void test_unknown_layout_is_cached_as_unknown(void **state)
{
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tl;
	const void *f = (const void *)(uintptr_t)0x20103;

	(void)state;
	scan_cache_reset();
	queries = 0;
	assert_int_equal(scan_layout(f, fake_query, NULL, &tl, tmp)->nparams, -1);
	assert_int_equal(scan_layout(f, fake_query, NULL, &tl, tmp)->nparams, -1);
	assert_int_equal(queries, 1);
}

static void test_many_functions_stay_distinct(void **state)
{
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tl;

	(void)state;
	scan_cache_reset();
	for (uintptr_t i = 1; i <= 3000; i++) {
		const void *f = (const void *)((i << 12) | (i % 7));

		assert_int_equal(scan_layout(f, fake_query, NULL, &tl, tmp)->nparams, (int)(i % 7));
	}
	for (uintptr_t i = 1; i <= 3000; i++) {
		const void *f = (const void *)((i << 12) | (i % 7));
		const scan_layout_t *l = scan_layout_find(f);

		if (!l || l->func != f || l->nparams != (int)(i % 7))
			fail_msg("function %p: expected a cached layout with %d params, got %p (%d)", f,
				 (int)(i % 7), (const void *)l, l ? l->nparams : -2);
	}
}

static void test_kernel_handles_are_remembered(void **state)
{
	(void)state;
	scan_cache_reset();
	assert_false(scan_handle_known(NULL));
	scan_handle_add(NULL);
	assert_false(scan_handle_known(NULL));
	for (uintptr_t i = 1; i <= 5000; i++)
		scan_handle_add((const void *)(i << 8));
	scan_handle_add((const void *)(uintptr_t)(7 << 8));   /* twice: still one */
	for (uintptr_t i = 1; i <= 5000; i++)
		if (!scan_handle_known((const void *)(i << 8)))
			fail_msg("handle %#lx added but not known", (unsigned long)(i << 8));
	for (uintptr_t i = 1; i <= 5000; i++)
		if (scan_handle_known((const void *)((i << 8) | 1)))
			fail_msg("handle %#lx never added but known", (unsigned long)((i << 8) | 1));
	scan_cache_reset();
	assert_false(scan_handle_known((const void *)(uintptr_t)(7 << 8)));
}

/* PyTorch's vectorized elementwise kernel, as cudaFuncGetName spells some
 * of its instantiations (the lambda's enclosing names shortened). */
#define VEC "_ZN2at6native29vectorized_elementwise_kernelILi4E"
#define VEC_END "EEviT0_T1_"
static const char *const fill_f = VEC "NS0_11FillFunctorIfEESt5arrayIPcLm1EE" VEC_END;
static const char *const add_d = VEC "NS0_15CUDAFunctor_addIdEESt5arrayIPcLm3EE" VEC_END;
static const char *const relu_bwd_f =
	VEC "NS0_13BinaryFunctorIfffZZZNS0_21threshold_kernel_implERNS_18TensorIterator"
	"BaseEN3c106ScalarES5_ENKUlvE_clEvENKUlvE6_clEvEUlffE_EESt5arrayIPcLm3EE" VEC_END;
static const char *const mul_h =
	VEC "NS0_13BinaryFunctorIN3c104HalfES4_S4_NS0_10MulFunctorIfEEEESt5arrayIPcLm3EE" VEC_END;
static const char *const cmp_bool_d =
	VEC "NS0_13BinaryFunctorIddbNS0_12CompareEqOpIdEEEESt5arrayIPcLm3EE" VEC_END;
static const char *const clamp_lambda =
	VEC "ZZZNS0_49_GLOBAL__N__d2ba64fb_16_TensorCompare_cu_71e06f4e19launch_clamp_scalar"
	"ERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKU"
	"lvE5_clEvEUlfE_St5arrayIPcLm2EE" VEC_END;
/* (int N, an empty functor, 3 pointers); N int64 in the wrong one */
static const scan_param_t vec3[] = { { 0, 4 }, { 4, 1 }, { 8, 24 } };
static const scan_param_t vec3_n64[] = { { 0, 8 }, { 8, 1 }, { 16, 24 } };

static void test_torch_vectorized_kernels_are_classified_by_name_and_layout(void **state)
{
	static const struct {
		const char *name;
		const scan_param_t *params;
		int nparams, family, elem;
	} cases[] = {
		{ fill_f, vec3, 3, KB_TORCH_VECTORIZED, 4 },
		{ add_d, vec3, 3, KB_TORCH_VECTORIZED, 8 },
		{ relu_bwd_f, vec3, 3, KB_TORCH_VECTORIZED, 4 },
		/* c10::Half, then two substitutions for it */
		{ mul_h, vec3, 3, KB_TORCH_VECTORIZED, 2 },
		/* a bool result beside double operands: the largest counts */
		{ cmp_bool_d, vec3, 3, KB_TORCH_VECTORIZED, 8 },
		/* a lambda's return type is not in its name: the largest scalar */
		{ clamp_lambda, vec3, 3, KB_TORCH_VECTORIZED, 16 },
		/* not the layout the family has */
		{ fill_f, vec3_n64, 3, KB_NONE, 0 },
		{ fill_f, vec3, 2, KB_NONE, 0 },
		/* a name cut short (the trace's head of it), another family */
		{ VEC "NS0_11FillFunctorIfEESt5arrayIPcLm1EE", vec3, 3, KB_NONE, 0 },
		{ "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cuda"
		  "EviT0_T1_", vec3, 3, KB_NONE, 0 },
		{ NULL, vec3, 3, KB_NONE, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		scan_bound_t b = kb_classify(cases[i].name, cases[i].params, cases[i].nparams);

		if (b.family != cases[i].family || b.elem_bytes != cases[i].elem)
			fail_msg("case %zu (%.60s...): expected family %d, %d-byte elements; got "
				 "family %d, %d", i, cases[i].name ? cases[i].name : "(null)",
				 cases[i].family, cases[i].elem, b.family, b.elem_bytes);
	}
}

static void test_bound_covers_the_array_but_not_a_pointer_the_functor_holds(void **state)
{
	/* BinaryFunctor<float, float, float>(N = 1000): out, a, b in the
	 * array; b also held by the functor (a captured pointer: any extent). */
	uintptr_t out = VA_BASE + 0x200000, a = VA_BASE + 0x400000, b = VA_BASE + 0x600000;
	int32_t n = 1000;
	uintptr_t functor = b;
	uintptr_t data[3] = { out, a, b };
	void *args[] = { &n, &functor, data };
	const scan_param_t params[] = { { 0, 4 }, { 8, 8 }, { 16, 24 } };
	scan_bound_t rule = kb_classify(relu_bwd_f, params, 3);
	vmem_ref_t refs[8];
	int k = scan_args(args, params, 3, fake_owns, refs, 8, NULL), dropped = -1, chunked = -1;

	(void)state;
	assert_int_equal(k, 3);
	assert_int_equal(kb_apply(rule, args, params, 3, 0, NULL, refs, &k, &dropped, &chunked), 2);
	assert_int_equal(dropped, 0);
	for (int i = 0; i < k; i++) {
		size_t want = refs[i].ptr == b ? 0 : 4000;
		pool_ref_t pr = pool_ref_of(refs[i].ptr, refs[i].bytes, refs[i].access);

		if (refs[i].bytes != want)
			fail_msg("ref %#lx: expected extent %zu, got %zu", (unsigned long)refs[i].ptr,
				 want, refs[i].bytes);
		/* a bound is not the extent: the kernel may touch only part of
		 * it, so the pool lets dropped bytes there through (H200: a
		 * float-to-double copy's input bounded at 16 bytes an element
		 * ran into bytes the plan had dropped, and was refused) */
		if (want && !(refs[i].access & VMEM_ACCESS_UPTO))
			fail_msg("ref %#lx: expected VMEM_ACCESS_UPTO in access %#x",
				 (unsigned long)refs[i].ptr, refs[i].access);
		assert_true(pr.maybe);
		assert_false(pr.whole);
	}
	/* N = 0 (or negative) bounds nothing: the extents stay unknown */
	n = 0;
	k = scan_args(args, params, 3, fake_owns, refs, 8, NULL);
	assert_int_equal(kb_apply(rule, args, params, 3, 0, NULL, refs, &k, &dropped, &chunked), 0);
	for (int i = 0; i < k; i++)
		assert_int_equal(refs[i].bytes, 0);
	/* another kernel's rule bounds nothing */
	n = 1000;
	assert_int_equal(kb_apply((scan_bound_t){ KB_NONE, 0, 0, 0, 0 }, args, params, 3, 0, NULL,
				  refs, &k, &dropped, &chunked), 0);
}

static const char *long_name;

static int long_name_fn(const void *func, char *buf, size_t len)
{
	(void)func;
	snprintf(buf, len, "%s", long_name);
	return 0;
}

static int vec3_query(const void *func, int i, size_t *off, size_t *size)
{
	(void)func;
	if (i >= 3)
		return 1;
	*off = vec3[i].offset;
	*size = vec3[i].size;
	return 0;
}

static void test_layout_keeps_the_bound_of_a_name_longer_than_it_stores(void **state)
{
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tl;
	const scan_layout_t *l;

	(void)state;
	scan_cache_reset();
	long_name = relu_bwd_f;
	assert_true(strlen(long_name) > 200);
	l = scan_layout((const void *)(uintptr_t)0x30005, vec3_query, long_name_fn, &tl, tmp);
	assert_int_equal(l->nparams, 3);
	assert_int_equal(l->bound.family, KB_TORCH_VECTORIZED);
	assert_int_equal(l->bound.elem_bytes, 4);
	/* the name kept for the trace is the head of it */
	assert_true(strlen(l->name) < strlen(long_name));
	assert_memory_equal(l->name, long_name, strlen(l->name));
}

/* PyTorch's foreach kernels (SGD's step is _foreach_add_(params, grads)):
 * multi_tensor_apply_kernel<TensorListMetadata<depth, large>, functor,
 * args...>, the metadata by value first; the names as g++ mangles a mock
 * of MultiTensorApply.cuh's templates (the same ABI as nvcc's), with
 * nvcc's name for the file's anonymous namespace. */
#define FOREACH_HEAD "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec43" \
	"25multi_tensor_apply_kernelINS1_18TensorListMetadataILi2ELb"
#define FOREACH_TAIL "JSt4plusIfEfEEENSt9enable_ifIXntsrT0_20use_large_kernel_argEvE4typeET_SA_DpT1_"
static const char *const foreach_add_f =
	FOREACH_HEAD "0EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEE" FOREACH_TAIL;
static const char *const foreach_add_f_large =
	FOREACH_HEAD "1EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEE" FOREACH_TAIL;
static const char *const foreach_add_h =
	FOREACH_HEAD "0EEENS1_24BinaryOpListAlphaFunctorIN3c104HalfELi2ELi2ELi0EEE" FOREACH_TAIL;
static const char *const foreach_copy_fd =
	FOREACH_HEAD "0EEENS1_11CopyFunctorIfdLi2ELi1ELi1EEE" FOREACH_TAIL;
static const char *const foreach_lambda =
	FOREACH_HEAD "0EEEZNS0_8some_opEvEUlfE_" FOREACH_TAIL;
/* sizeof(TensorListMetadata<2, false>) and <2, true> in PyTorch 2.x:
 * 2*64*8 + 64*8 + 320 + 320*4 + 4 -> 3144; 2*448*8 + 448*8 + 2240*2 +
 * 2240*4 + 4 -> 24200 */
static const scan_param_t fe_small[] = { { 0, 3144 }, { 3144, 1 }, { 3148, 4 } };
static const scan_param_t fe_large[] = { { 0, 24200 }, { 24200, 1 }, { 24204, 4 } };

static void test_torch_foreach_kernels_are_classified_by_name_and_layout(void **state)
{
	static const struct {
		const char *name;
		const scan_param_t *params;
		int family, elem, depth, large;
	} cases[] = {
		{ foreach_add_f, fe_small, KB_TORCH_FOREACH, 4, 2, 0 },
		{ foreach_add_f_large, fe_large, KB_TORCH_FOREACH, 4, 2, 1 },
		{ foreach_add_h, fe_small, KB_TORCH_FOREACH, 2, 2, 0 },
		/* a copy's lists have two types: the larger counts */
		{ foreach_copy_fd, fe_small, KB_TORCH_FOREACH, 8, 2, 0 },
		/* a functor that is no named class: the largest scalar */
		{ foreach_lambda, fe_small, KB_TORCH_FOREACH, 16, 2, 0 },
		/* PyTorch before the 32 KB layout: no bool argument */
		{ "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_"
		  "tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctor"
		  "IfLi2ELi2ELi0EEEJSt4plusIfEfEEEvT_T0_DpT1_", fe_small, KB_TORCH_FOREACH, 4, 2, 0 },
		/* another metadata (a scalar list beside the tensors) */
		{ "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_"
		  "tensor_apply_kernelINS1_28TensorListScalarListMetadataIfLi2ELb0EEE", fe_small,
		  KB_NONE, 0, 0, 0 },
		/* the metadata's size is not the one the name says */
		{ foreach_add_f, fe_large, KB_NONE, 0, 0, 0 },
		{ foreach_add_f_large, fe_small, KB_NONE, 0, 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		scan_bound_t b = kb_classify(cases[i].name, cases[i].params, 3);

		if (b.family != cases[i].family || b.elem_bytes != cases[i].elem ||
		    b.depth != cases[i].depth || b.large != cases[i].large)
			fail_msg("case %zu: expected family %d, %d-byte elements, depth %d, large %d; "
				 "got %d, %d, %d, %d", i, cases[i].family, cases[i].elem,
				 cases[i].depth, cases[i].large, b.family, b.elem_bytes, b.depth,
				 b.large);
	}
}

static void expect_foreach_extents(const vmem_ref_t *refs, int k, uintptr_t p0, uintptr_t p1,
				   uintptr_t g0, uintptr_t g1, uintptr_t stale, size_t stale_bytes)
{
	for (int i = 0; i < k; i++) {
		uintptr_t p = refs[i].ptr;
		size_t want = p == p0 || p == g0 ? 4000 : p == p1 || p == g1 ? 200 :
			      p == stale ? stale_bytes : 0;

		if (refs[i].bytes != want)
			fail_msg("ref %#lx: expected extent %zu, got %zu", (unsigned long)p, want,
				 refs[i].bytes);
		if (!!want != !!(refs[i].access & VMEM_ACCESS_UPTO))
			fail_msg("ref %#lx: VMEM_ACCESS_UPTO expected %s, access %#x",
				 (unsigned long)p, want ? "set" : "clear", refs[i].access);
	}
}

static void test_foreach_bounds_each_listed_tensor_by_its_count(void **state)
{
	/* _foreach_add_(params, grads): lists 0 and 1, tensors 0 and 1 of
	 * this launch; slot 5 left by an earlier launch of the same call; a
	 * pointer that the kernel's trailing argument also holds. */
	enum { M = 64 };
	static uint64_t meta[3144 / 8];
	uintptr_t p0 = VA_BASE + 0x200000, p1 = VA_BASE + 0x400000;
	uintptr_t g0 = VA_BASE + 0x600000, g1 = VA_BASE + 0x800000;
	uintptr_t stale = VA_BASE + 0xa00000, shared = VA_BASE + 0xc00000;
	unsigned char functor = 0;
	uintptr_t extra = shared;
	void *args[] = { meta, &functor, &extra };
	const scan_param_t params[] = { { 0, 3144 }, { 3144, 1 }, { 3152, 8 } };
	scan_bound_t rule = kb_classify(foreach_add_f, fe_small, 3);
	unsigned char *bt = (unsigned char *)meta + 2 * M * 8 + M * 8;
	vmem_ref_t refs[16];
	int k, dropped = -1, chunked = -1;

	(void)state;
	memset(meta, 0, sizeof(meta));
	meta[0] = p0, meta[1] = p1, meta[5] = stale, meta[6] = shared;   /* list 0 */
	meta[M + 0] = g0, meta[M + 1] = g1, meta[M + 5] = stale;          /* list 1 */
	meta[2 * M + 0] = 1000, meta[2 * M + 1] = 50, meta[2 * M + 5] = 7, meta[2 * M + 6] = 9;
	/* the grid unknown (0): every slot counts */
	k = scan_args(args, params, 3, fake_owns, refs, 16, NULL);
	assert_int_equal(k, 6);
	assert_int_equal(kb_apply(rule, args, params, 3, 0, NULL, refs, &k, &dropped, &chunked), 5);
	assert_int_equal(dropped, 0);
	assert_int_equal(k, 6);
	expect_foreach_extents(refs, k, p0, p1, g0, g1, stale, 28);
	/* two blocks, over tensors 0 and 1: slot 5 is an earlier launch's,
	 * untouched, and its pointer leaves the call; the one the trailing
	 * argument holds stays, its extent unknown */
	bt[0] = 0, bt[1] = 1;
	k = scan_args(args, params, 3, fake_owns, refs, 16, NULL);
	assert_int_equal(kb_apply(rule, args, params, 3, 2, NULL, refs, &k, &dropped, &chunked), 4);
	assert_int_equal(dropped, 1);
	assert_int_equal(k, 5);
	expect_foreach_extents(refs, k, p0, p1, g0, g1, stale, 0);
	for (int i = 0; i < k; i++)
		assert_int_not_equal(refs[i].ptr, stale);
	/* a block naming a slot past the metadata's: every slot counts */
	bt[1] = 200;
	k = scan_args(args, params, 3, fake_owns, refs, 16, NULL);
	assert_int_equal(kb_apply(rule, args, params, 3, 2, NULL, refs, &k, &dropped, &chunked), 5);
	assert_int_equal(dropped, 0);
}

static void test_foreach_pointer_in_several_slots_gets_the_largest_count(void **state)
{
	/* slot 0 (3 elements): x in list 0, y in list 1; slot 1 (9): y in
	 * list 0, x in list 1.  Every slot counting, each spans 9 floats;
	 * with one block naming slot 0 only, each keeps slot 0's 3. */
	enum { M = 64 };
	static uint64_t meta[3144 / 8];
	uintptr_t x = VA_BASE + 0x200000, y = VA_BASE + 0x400000;
	unsigned char functor = 0, *bt = (unsigned char *)meta + 2 * M * 8 + M * 8;
	float alpha = 1.0f;
	void *args[] = { meta, &functor, &alpha };
	const scan_param_t params[] = { { 0, 3144 }, { 3144, 1 }, { 3148, 4 } };
	scan_bound_t rule = kb_classify(foreach_add_f, fe_small, 3);
	vmem_ref_t refs[4];
	int k, dropped, chunked;

	(void)state;
	memset(meta, 0, sizeof(meta));
	meta[0] = x, meta[1] = y, meta[M] = y, meta[M + 1] = x;
	meta[2 * M] = 3, meta[2 * M + 1] = 9;
	for (uint32_t blocks = 0; blocks <= 1; blocks++) {
		k = scan_args(args, params, 3, fake_owns, refs, 4, NULL);
		assert_int_equal(k, 2);
		bt[0] = 0;
		assert_int_equal(kb_apply(rule, args, params, 3, blocks, NULL, refs, &k, &dropped, &chunked), 2);
		for (int i = 0; i < k; i++) {
			size_t want = blocks == 0 ? 36 : 12;

			if (refs[i].bytes != want)
				fail_msg("%u blocks, ref %#lx: expected %zu bytes, got %zu", blocks,
					 (unsigned long)refs[i].ptr, want, refs[i].bytes);
		}
	}
}

/* One foreach launch of _foreach_add_ (depth 2, the 4 KB layout): tensor
 * t0 (200000 floats: chunks 0-3) carried over from an earlier launch in
 * slot 0, its chunks 2 and 3 here, then t1 (100 floats, chunk 0) in slot
 * 1.  `last`: the chunk the launch names last for t0. */
static void fe_chunk_launch(uint64_t *meta, uintptr_t t0, uintptr_t g0, uintptr_t t1, uintptr_t g1,
			    int last)
{
	enum { M = 64, B = 320 };
	unsigned char *bt = (unsigned char *)meta + 2 * M * 8 + M * 8;
	int32_t chunk[3] = { 2, last, 0 };

	memset(meta, 0, 3144);
	meta[0] = t0, meta[1] = t1, meta[M] = g0, meta[M + 1] = g1;
	meta[2 * M] = 200000, meta[2 * M + 1] = 100;
	bt[0] = 0, bt[1] = 0, bt[2] = 1;
	memcpy((unsigned char *)meta + ((2 * M * 8 + M * 8 + B + 3) & ~3), chunk, sizeof(chunk));
}

static size_t ref_at(const vmem_ref_t *refs, int k, uintptr_t lo, uintptr_t hi, uintptr_t *ptr)
{
	for (int i = 0; i < k; i++)
		if (refs[i].ptr >= lo && refs[i].ptr < hi) {
			*ptr = refs[i].ptr;
			return refs[i].bytes;
		}
	fail_msg("no ref in [%#lx, %#lx)", (unsigned long)lo, (unsigned long)hi);
	return 0;
}

/* PyTorch's kChunkSize is not a parameter: the launches must confirm it
 * (a tensor they finish ends at the chunk the size says) before a pointer
 * is bounded by the chunks its launch names; one launch that contradicts
 * it turns the chunks off for good. */
static void test_foreach_bounds_by_chunks_once_the_launches_confirm_them(void **state)
{
	static uint64_t meta[3144 / 8];
	uintptr_t t0 = VA_BASE + 0x200000, g0 = VA_BASE + 0x400000;
	uintptr_t t1 = VA_BASE + 0x600000, g1 = VA_BASE + 0x800000, at;
	unsigned char functor = 0, plus = 0;
	float alpha = 1.0f;
	void *args[] = { meta, &functor, &plus, &alpha };
	const scan_param_t params[] = { { 0, 3144 }, { 3144, 1 }, { 3145, 1 }, { 3148, 4 } };
	scan_bound_t rule = kb_classify(foreach_add_f, fe_small, 3);
	kb_state_t st = { 0 };
	vmem_ref_t refs[8];
	int k, dropped, chunked;
	size_t b;

	(void)state;
	assert_int_equal(rule.family, KB_TORCH_FOREACH);
	assert_int_equal(rule.elem_min, 4);
	/* no state: whole tensors, as before */
	fe_chunk_launch(meta, t0, g0, t1, g1, 3);
	k = scan_args(args, params, 4, fake_owns, refs, 8, NULL);
	assert_int_equal(kb_apply(rule, args, params, 4, 3, NULL, refs, &k, &dropped, &chunked), 4);
	assert_int_equal(chunked, 0);
	assert_int_equal(ref_at(refs, k, t0, t0 + 0x200000, &at), 800000);
	/* a launch that only holds part of t0 (slot 0 alone) proves nothing */
	fe_chunk_launch(meta, t0, g0, 0, 0, 3);
	meta[2 * 64 + 1] = 0;
	k = scan_args(args, params, 4, fake_owns, refs, 8, NULL);
	assert_int_equal(kb_apply(rule, args, params, 4, 2, &st, refs, &k, &dropped, &chunked), 2);
	assert_int_equal(atomic_load(&st.chunk), KB_CHUNK_UNKNOWN);
	assert_int_equal(ref_at(refs, k, t0, t0 + 0x200000, &at), 800000);
	/* t0 finished at chunk 3 = ceil(200000 / 65536) - 1: confirmed, and
	 * this launch holds t0's chunks 2 and 3 only, from element 131072 */
	fe_chunk_launch(meta, t0, g0, t1, g1, 3);
	k = scan_args(args, params, 4, fake_owns, refs, 8, NULL);
	assert_int_equal(kb_apply(rule, args, params, 4, 3, &st, refs, &k, &dropped, &chunked), 4);
	assert_int_equal(atomic_load(&st.chunk), KB_CHUNK_CONFIRMED);
	assert_int_equal(chunked, 2);
	b = ref_at(refs, k, t0, t0 + 0x200000, &at);
	if (at != t0 + 131072 * 4 || b != (200000 - 131072) * 4)
		fail_msg("t0 in this launch: expected [%#lx, +%d), got [%#lx, +%zu)",
			 (unsigned long)(t0 + 131072 * 4), (200000 - 131072) * 4, (unsigned long)at, b);
	b = ref_at(refs, k, g0, g0 + 0x200000, &at);
	assert_int_equal(at, g0 + 131072 * 4);
	assert_int_equal(ref_at(refs, k, t1, t1 + 0x200000, &at), 400);
	assert_int_equal(at, t1);
	/* a launch whose finished tensor ends elsewhere (chunk 2: a chunk
	 * size that is not 65536): whole tensors from then on */
	fe_chunk_launch(meta, t0, g0, t1, g1, 2);
	k = scan_args(args, params, 4, fake_owns, refs, 8, NULL);
	assert_int_equal(kb_apply(rule, args, params, 4, 3, &st, refs, &k, &dropped, &chunked), 4);
	assert_int_equal(atomic_load(&st.chunk), KB_CHUNK_REFUTED);
	assert_int_equal(chunked, 0);
	assert_int_equal(ref_at(refs, k, t0, t0 + 0x200000, &at), 800000);
	assert_int_equal(at, t0);
	fe_chunk_launch(meta, t0, g0, t1, g1, 3);
	k = scan_args(args, params, 4, fake_owns, refs, 8, NULL);
	(void)kb_apply(rule, args, params, 4, 3, &st, refs, &k, &dropped, &chunked);
	assert_int_equal(atomic_load(&st.chunk), KB_CHUNK_REFUTED);
	assert_int_equal(chunked, 0);
}

/* The calls a graph captured are made resident as one at its launch,
 * their order lost: a range one reads and another rewrites whole (a
 * gradient read by the optimizer, then zeroed) must come back with its
 * bytes - the read may be first.  A whole write stays whole only when no
 * read is merged in; an unused workspace only when both leave it so. */
static void test_merged_accesses_keep_a_read(void **state)
{
	const uint8_t R = VMEM_ACCESS_R, W = VMEM_ACCESS_W, WH = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE,
		      UN = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE | VMEM_ACCESS_UNUSED;
	const struct { uint8_t a, b, want; } cases[] = {
		{ R, WH, VMEM_ACCESS_RW }, { WH, R, VMEM_ACCESS_RW }, { WH, W, WH },
		{ WH, WH, WH }, { UN, UN, UN }, { UN, WH, WH }, { R, UN, VMEM_ACCESS_RW },
		{ R | VMEM_ACCESS_UPTO, WH, VMEM_ACCESS_RW | VMEM_ACCESS_UPTO },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t got = vmem_access_merge(cases[i].a, cases[i].b);

		if (got != cases[i].want)
			fail_msg("vmem_access_merge(%#x, %#x): expected %#x, got %#x", cases[i].a,
				 cases[i].b, cases[i].want, got);
	}
	/* the pool never reads a whole write into a range that is read */
	assert_false(pool_ref_of(0x1000, 4096, R | WH).whole);
	assert_true(pool_ref_of(0x1000, 4096, WH).whole);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan_finds_only_vmem_pointers),
		cmocka_unit_test(test_integer_inside_range_counts_and_foreign_does_not),
		cmocka_unit_test(test_struct_parameter_is_scanned_word_by_word),
		cmocka_unit_test(test_unaligned_words_are_not_read),
		cmocka_unit_test(test_repeated_pointer_is_one_ref_and_overflow_is_counted),
		cmocka_unit_test(test_packed_buffer_scan),
		cmocka_unit_test(test_layout_is_queried_once_per_function),
		cmocka_unit_test(test_unknown_layout_is_cached_as_unknown),
		cmocka_unit_test(test_many_functions_stay_distinct),
		cmocka_unit_test(test_kernel_handles_are_remembered),
		cmocka_unit_test(test_torch_vectorized_kernels_are_classified_by_name_and_layout),
		cmocka_unit_test(test_bound_covers_the_array_but_not_a_pointer_the_functor_holds),
		cmocka_unit_test(test_layout_keeps_the_bound_of_a_name_longer_than_it_stores),
		cmocka_unit_test(test_torch_foreach_kernels_are_classified_by_name_and_layout),
		cmocka_unit_test(test_foreach_bounds_each_listed_tensor_by_its_count),
		cmocka_unit_test(test_foreach_pointer_in_several_slots_gets_the_largest_count),
		cmocka_unit_test(test_foreach_bounds_by_chunks_once_the_launches_confirm_them),
		cmocka_unit_test(test_merged_accesses_keep_a_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
