/* tests/unit/interpose_dnn/test_conv_plan.c - the pure part of vmem's
 * convolution decisions (interpose/conv_plan.c): which kernels split along
 * N and how slices stay aligned, the cache key, VMEM_CONV_ALGO's choice
 * over cuDNN's list, and device bytes in whole chunks.  No CUDA.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <cudnn_graph.h>

#include "interpose/conv_plan.h"

static void set_t(conv_tensor_t *t, int n, int c, int h, int w, int nhwc)
{
	memset(t, 0, sizeof(*t));
	t->nbdims = 4;
	t->dtype = CUDNN_DATA_FLOAT;
	t->dims[0] = n, t->dims[1] = c, t->dims[2] = h, t->dims[3] = w;
	if (nhwc) {
		t->strides[0] = (int64_t)h * w * c, t->strides[1] = 1;
		t->strides[2] = (int64_t)w * c, t->strides[3] = c;
	} else {
		t->strides[0] = (int64_t)c * h * w, t->strides[1] = (int64_t)h * w;
		t->strides[2] = w, t->strides[3] = 1;
	}
}

/* AlexNet's conv1 at 227x227: 3 x 227 x 227 floats per image */
static conv_shape_t alexnet_conv1(int n)
{
	conv_shape_t s;

	memset(&s, 0, sizeof(s));
	s.dir = CONV_DIR_FWD;
	s.mode = CUDNN_CROSS_CORRELATION;
	s.groups = 1;
	s.nsp = 2;
	s.pad[0] = s.pad[1] = 0;
	s.stride[0] = s.stride[1] = 4;
	s.dil[0] = s.dil[1] = 1;
	set_t(&s.x, n, 3, 227, 227, 0);
	set_t(&s.y, n, 96, 55, 55, 0);
	s.w.nbdims = 4;
	s.w.dtype = CUDNN_DATA_FLOAT;
	s.w.dims[0] = 96, s.w.dims[1] = 3, s.w.dims[2] = 11, s.w.dims[3] = 11;
	return s;
}

static void test_slices_are_pointer_offsets_in_any_layout(void **state)
{
	conv_shape_t s = alexnet_conv1(8);
	(void)state;

	assert_null(conv_shape_unsplittable(&s));
	assert_int_equal(conv_shape_batch(&s), 8);
	assert_int_equal(conv_image_bytes(&s.x), 3 * 227 * 227 * 4);
	/* NHWC: N is still the outermost stride */
	set_t(&s.x, 8, 3, 227, 227, 1);
	assert_null(conv_shape_unsplittable(&s));
	assert_int_equal(conv_image_bytes(&s.x), 3 * 227 * 227 * 4);
	/* a slice of 2 images spans exactly 2 images (strides unchanged) */
	assert_int_equal(conv_extent(&s.x, 2), 2 * 3 * 227 * 227 * 4);
	assert_int_equal(conv_extent(&s.x, 0), 8 * 3 * 227 * 227 * 4);
	/* a packed filter has no strides: product of its dims */
	assert_int_equal(conv_extent(&s.w, 0), 96 * 3 * 11 * 11 * 4);
}

static void test_unsplittable_kernels_say_why(void **state)
{
	conv_shape_t s = alexnet_conv1(8);
	(void)state;

	s.y.dims[0] = 4;
	assert_string_equal(conv_shape_unsplittable(&s), "x and y have different N");
	assert_int_equal(conv_shape_batch(&s), -1);
	s = alexnet_conv1(8);
	s.x.dtype = 999;
	assert_string_equal(conv_shape_unsplittable(&s), "unknown data type");
	s = alexnet_conv1(8);
	s.x.strides[2] = 0;
	assert_string_equal(conv_shape_unsplittable(&s), "a dimension or stride is not positive");
	s = alexnet_conv1(8);
	s.y.nbdims = 5;
	assert_non_null(conv_shape_unsplittable(&s));
}

static void test_quantum_keeps_16_byte_alignment(void **state)
{
	conv_shape_t s = alexnet_conv1(256);
	(void)state;

	/* 3*227*227*4 = 618348 bytes: 4 images span a multiple of 16 */
	assert_int_equal(conv_shape_quantum(&s, 16), 4);
	for (int q = 1; q < 4; q++)
		assert_true((uint64_t)q * conv_image_bytes(&s.x) % 16 != 0);
	assert_int_equal(4 * conv_image_bytes(&s.x) % 16, 0);
	/* 224x224: every image is a multiple of 16 bytes */
	set_t(&s.x, 256, 3, 224, 224, 0);
	assert_int_equal(conv_shape_quantum(&s, 16), 1);
	/* both sides count: an odd y image needs q = 16 / gcd */
	set_t(&s.y, 256, 1, 1, 1, 0);   /* 4 bytes per image */
	assert_int_equal(conv_shape_quantum(&s, 16), 4);
	assert_int_equal(conv_shape_quantum(&s, 1), 1);
}

static void test_key_is_one_word_and_tells_shapes_apart(void **state)
{
	conv_shape_t a = alexnet_conv1(8), b = alexnet_conv1(16);
	char ka[1024], kb[1024], small[16];
	(void)state;

	assert_true(conv_shape_key(&a, "NVIDIA H100 80GB HBM3", 91900, "pow2", ka, sizeof(ka)) > 0);
	assert_true(conv_shape_key(&b, "NVIDIA H100 80GB HBM3", 91900, "pow2", kb, sizeof(kb)) > 0);
	if (strchr(ka, ' ') || strchr(ka, '\n'))
		fail_msg("expected a key without white space, got \"%s\"", ka);
	assert_non_null(strstr(ka, "gpu=NVIDIA_H100_80GB_HBM3"));
	assert_non_null(strstr(ka, "cudnn=91900"));
	assert_non_null(strstr(ka, "mb=pow2"));
	assert_string_not_equal(ka, kb);
	/* another GPU, cuDNN or policy is another key */
	conv_shape_key(&a, "Tesla P100", 91900, "pow2", kb, sizeof(kb));
	assert_string_not_equal(ka, kb);
	conv_shape_key(&a, "NVIDIA H100 80GB HBM3", 90100, "pow2", kb, sizeof(kb));
	assert_string_not_equal(ka, kb);
	conv_shape_key(&a, "NVIDIA H100 80GB HBM3", 91900, "all", kb, sizeof(kb));
	assert_string_not_equal(ka, kb);
	/* too small a buffer: 0, never a cut key that could match another */
	assert_int_equal(conv_shape_key(&a, "x", 1, "all", small, sizeof(small)), 0);
	assert_string_equal(small, "");
}

static void test_pick_follows_vmem_conv_algo(void **state)
{
	/* cuDNN's order: fastest first */
	conv_cand_t c[] = {
		{ 4, true, true, 200, 1.0 },    /* FFT */
		{ 7, true, true, 60, 1.2 },     /* Winograd */
		{ 1, true, true, 8, 2.3 },      /* precomp GEMM */
		{ 0, true, true, 0, 2.9 },      /* implicit GEMM */
		{ 3, false, true, 0, -1 },      /* not supported */
	};
	(void)state;

	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_PERF, 0)].algo, 4);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_MEM, 0)].algo, 0);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 100)].algo, 7);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 60)].algo, 7);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 59)].algo, 1);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, UINT64_MAX)].algo, 4);
	/* nothing fits: the least workspace */
	c[3].ok = false;
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 1)].algo, 1);
	/* a nondeterministic algorithm is never chosen over a deterministic one */
	c[0].deterministic = false;
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_PERF, 0)].algo, 7);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 8)].algo, 1);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 7)].algo, 1);   /* least */
	/* ... unless no deterministic one fits the room and it does */
	c[0].ws = 0;
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 7)].algo, 4);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_FIT, 8)].algo, 1);
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_MEM, 0)].algo, 1);
	/* ... or there is no deterministic one */
	for (int i = 0; i < 5; i++)
		c[i].deterministic = false;
	assert_int_equal(c[conv_pick(c, 5, CONV_PICK_PERF, 0)].algo, 4);
	for (int i = 0; i < 5; i++)
		c[i].ok = false;
	assert_int_equal(conv_pick(c, 5, CONV_PICK_MEM, 0), -1);
	assert_int_equal(conv_pick(c, 0, CONV_PICK_PERF, 0), -1);
}

static void test_pages_are_whole_chunks(void **state)
{
	const uint64_t ch = 2 << 20;
	(void)state;

	assert_int_equal(conv_pages_bytes(0, 0, ch), 0);
	assert_int_equal(conv_pages_bytes(0, 1, ch), ch);
	assert_int_equal(conv_pages_bytes(ch - 1, 2, ch), 2 * ch);   /* straddles */
	assert_int_equal(conv_pages_bytes(ch, ch, ch), ch);
	assert_int_equal(conv_pages_bytes(ch + 5, ch, ch), 2 * ch);
	assert_int_equal(conv_pages_bytes(123, 456, 0), 456);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slices_are_pointer_offsets_in_any_layout),
		cmocka_unit_test(test_unsplittable_kernels_say_why),
		cmocka_unit_test(test_quantum_keeps_16_byte_alignment),
		cmocka_unit_test(test_key_is_one_word_and_tells_shapes_apart),
		cmocka_unit_test(test_pick_follows_vmem_conv_algo),
		cmocka_unit_test(test_pages_are_whole_chunks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
