/* tests/minitrain/test_minitrain.c - unit tests of minitrain's pure parts:
 * the caching allocator core (PyTorch-like block sizes, best fit, split,
 * merge, release-and-retry) and the network builders' shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mt.h"

/* alloc.c's device side calls CUDA; the unit test never reaches it, but the
 * symbols must link: fakes that fail loudly. */
cudaError_t cudaMalloc(void **p, size_t n) { (void)p; (void)n; fail_msg("cudaMalloc called"); return cudaErrorUnknown; }
cudaError_t cudaFree(void *p) { (void)p; fail_msg("cudaFree called"); return cudaErrorUnknown; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "fake"; }
const char *cudaGetErrorName(cudaError_t e) { (void)e; return "fake"; }
const char *cudnnGetErrorString(cudnnStatus_t s) { (void)s; return "fake"; }
const char *cublasGetStatusString(cublasStatus_t s) { (void)s; return "fake"; }
const char *cublasGetStatusName(cublasStatus_t s) { (void)s; return "fake"; }

#define MIB ((size_t)1 << 20)

/* a fake segment allocator over malloc with a capacity */
typedef struct {
	size_t cap, used, nalloc, nfree, last;
} fake_t;

static void *fake_alloc(size_t n, void *ctx)
{
	fake_t *f = ctx;

	f->last = n;
	if (f->used + n > f->cap)
		return NULL;
	f->used += n;
	f->nalloc++;
	return malloc(n);
}

static void fake_free(void *p, size_t n, void *ctx)
{
	fake_t *f = ctx;

	f->used -= n;
	f->nfree++;
	free(p);
}

static void test_cache_segment_sizes_follow_pytorch(void **state)
{
	(void)state;
	assert_int_equal(mt_cache_round(1), 512);
	assert_int_equal(mt_cache_round(513), 1024);
	assert_int_equal(mt_cache_segment_size(512), 2 * MIB);
	assert_int_equal(mt_cache_segment_size(MIB), 2 * MIB);
	assert_int_equal(mt_cache_segment_size(MIB + 512), 20 * MIB);
	assert_int_equal(mt_cache_segment_size(10 * MIB - 512), 20 * MIB);
	assert_int_equal(mt_cache_segment_size(10 * MIB), 10 * MIB);
	assert_int_equal(mt_cache_segment_size(11 * MIB + 512), 12 * MIB);
}

static void test_cache_small_blocks_share_a_segment(void **state)
{
	fake_t f = { .cap = 100 * MIB };
	mt_cache_t *c = mt_cache_new(fake_alloc, fake_free, &f);
	char *a, *b;

	(void)state;
	a = mt_cache_alloc(c, 1000, NULL);
	b = mt_cache_alloc(c, 1000, NULL);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(f.nalloc, 1);
	assert_int_equal(f.used, 2 * MIB);
	assert_int_equal(b - a, 1024);   /* split, best fit from the front */
	assert_int_equal(mt_cache_live(c), 2048);
	mt_cache_destroy(c);
	assert_int_equal(f.used, 0);
}

static void test_cache_free_block_is_reused_and_merged(void **state)
{
	fake_t f = { .cap = 100 * MIB };
	mt_cache_t *c = mt_cache_new(fake_alloc, fake_free, &f);

	(void)state;
	void *a = mt_cache_alloc(c, 3 * MIB, NULL);
	void *b = mt_cache_alloc(c, 3 * MIB, NULL);
	assert_int_equal(f.nalloc, 1);            /* both in one 20 MiB segment */
	mt_cache_free(c, a);
	mt_cache_free(c, b);
	void *d = mt_cache_alloc(c, 15 * MIB, NULL);  /* needs the merged block */
	assert_ptr_equal(d, a);
	assert_int_equal(f.nalloc, 1);
	mt_cache_free(c, d);
	mt_cache_release(c);
	assert_int_equal(f.used, 0);
	mt_cache_destroy(c);
}

/* A block start reused for a larger tensor (after its neighbour merged
 * into it), a smaller one and an equal one is counted as such: the case
 * a shim must not answer with the extent it learned there before. */
static void test_cache_counts_reuse_at_larger_and_smaller_sizes(void **state)
{
	fake_t f = { .cap = 100 * MIB };
	mt_cache_t *c = mt_cache_new(fake_alloc, fake_free, &f);
	mt_cache_reuse_t r;

	(void)state;
	void *a = mt_cache_alloc(c, 3 * MIB, NULL);
	void *b = mt_cache_alloc(c, 3 * MIB, NULL);
	mt_cache_free(c, a);
	mt_cache_free(c, b);
	void *d = mt_cache_alloc(c, 5 * MIB, NULL);   /* grows into b's old place */
	assert_ptr_equal(d, a);
	mt_cache_free(c, d);
	void *e = mt_cache_alloc(c, 2 * MIB, NULL);
	assert_ptr_equal(e, a);
	mt_cache_free(c, e);
	void *g = mt_cache_alloc(c, 2 * MIB, NULL);
	assert_ptr_equal(g, a);
	r = mt_cache_reuse(c);
	if (r.larger != 1 || r.smaller != 1 || r.same != 1)
		fail_msg("reuse counts: expected 1 larger, 1 smaller, 1 same, got %zu, %zu, %zu",
			 r.larger, r.smaller, r.same);
	mt_cache_free(c, g);
	mt_cache_destroy(c);
}

static void test_cache_releases_free_segments_and_retries(void **state)
{
	fake_t f = { .cap = 40 * MIB };
	mt_cache_t *c = mt_cache_new(fake_alloc, fake_free, &f);
	size_t req = 0;

	(void)state;
	void *a = mt_cache_alloc(c, 30 * MIB, NULL);
	assert_non_null(a);
	mt_cache_free(c, a);              /* cached, still holds 30 MiB */
	void *b = mt_cache_alloc(c, 36 * MIB, &req);
	assert_non_null(b);               /* worked only after the release */
	assert_int_equal(f.nfree, 1);
	void *d = mt_cache_alloc(c, 8 * MIB, &req);
	assert_null(d);                   /* 20 MiB segment does not fit */
	assert_int_equal(req, 20 * MIB);
	mt_cache_destroy(c);
}

static void test_vgg16_small_image_ends_at_1x1(void **state)
{
	mt_net_t net;
	char err[256];
	int convs = 0, fcs = 0;

	(void)state;
	assert_int_equal(mt_net_build(&net, "vgg16", 32, 10, err, sizeof(err)), 0);
	for (int j = 0; j < net.n; j++) {
		convs += net.nodes[j].op == MT_CONV;
		fcs += net.nodes[j].op == MT_FC;
	}
	assert_int_equal(convs, 13);
	assert_int_equal(fcs, 3);
	/* first FC reads 512 x 1 x 1 */
	for (int j = 0; j < net.n; j++)
		if (net.nodes[j].op == MT_FC) {
			const mt_node_t *in = &net.nodes[net.nodes[j].in[0]];

			assert_int_equal(in->c * in->h * in->w, 512);
			break;
		}
	mt_net_free(&net);
}

static void test_vgg416_has_416_convs(void **state)
{
	mt_net_t net;
	char err[256];
	int convs = 0;

	(void)state;
	assert_int_equal(mt_net_build(&net, "vgg416", 32, 10, err, sizeof(err)), 0);
	for (int j = 0; j < net.n; j++)
		convs += net.nodes[j].op == MT_CONV;
	assert_int_equal(convs, 416);
	mt_net_free(&net);
}

static void test_relu_after_conv_runs_in_place(void **state)
{
	mt_net_t net;
	char err[256];

	(void)state;
	assert_int_equal(mt_net_build(&net, "vgg19", 32, 10, err, sizeof(err)), 0);
	assert_int_equal(net.nodes[1].op, MT_CONV);
	assert_int_equal(net.nodes[2].op, MT_RELU);
	assert_int_equal(net.nodes[2].buf, 1);
	mt_net_free(&net);
}

static void test_unknown_net_and_tiny_image_are_rejected(void **state)
{
	mt_net_t net;
	char err[256];

	(void)state;
	assert_int_equal(mt_net_build(&net, "vgg17", 32, 10, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "vgg17"));
	assert_int_equal(mt_net_build(&net, "alexnet", 4, 10, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too small"));
	mt_net_free(&net);
}

static void test_random_dags_are_valid_for_many_seeds(void **state)
{
	(void)state;
	for (int s = 0; s < 200; s++) {
		mt_net_t net;
		char err[256], name[32];

		snprintf(name, sizeof(name), "random:%d", s);
		assert_int_equal(mt_net_build(&net, name, 16, 10, err, sizeof(err)), 0);
		for (int j = 1; j < net.n - 1; j++)
			if (net.nodes[j].nconsumers == 0)
				fail_msg("%s: node %d has no consumer", name, j);
		assert_int_equal(net.nodes[net.n - 1].op, MT_LOSS);
		mt_net_free(&net);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_segment_sizes_follow_pytorch),
		cmocka_unit_test(test_cache_small_blocks_share_a_segment),
		cmocka_unit_test(test_cache_free_block_is_reused_and_merged),
		cmocka_unit_test(test_cache_counts_reuse_at_larger_and_smaller_sizes),
		cmocka_unit_test(test_cache_releases_free_segments_and_retries),
		cmocka_unit_test(test_vgg16_small_image_ends_at_1x1),
		cmocka_unit_test(test_vgg416_has_416_convs),
		cmocka_unit_test(test_relu_after_conv_runs_in_place),
		cmocka_unit_test(test_unknown_net_and_tiny_image_are_rejected),
		cmocka_unit_test(test_random_dags_are_valid_for_many_seeds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
