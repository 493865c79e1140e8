/* tests/bench/bench_hooks.c - per-call cost of vmem's hooks.
 *
 * Times single calls (clock_gettime around each) of a cudaLaunchKernel of
 * mt_fill on a small buffer and of a tiny cudnnConvolutionForward, and
 * prints the median and 99th percentile in ns.  scripts/bench-hooks runs
 * it with and without LD_PRELOAD=libvmem.so and subtracts.  The `scan`
 * mode times interpose/scan.c's parameter scan alone (no CUDA).
 *
 *   bench_hooks launch|conv [N]     prints "<what> median_ns p99_ns"
 *   bench_hooks scan [N]            prints "scan<k> ns_per_launch" lines
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "interpose/scan.h"

#define CK(call)                                                                \
	do {                                                                    \
		int e_ = (int)(call);                                           \
		if (e_ != 0) {                                                  \
			fprintf(stderr, "bench_hooks: %s failed with %d\n", #call, e_); \
			exit(1);                                                \
		}                                                               \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	printf("%s %llu %llu\n", what, (unsigned long long)t[n / 2],
	       (unsigned long long)t[(int)(n * 0.99)]);
}

static int bench_launch(int n)
{
	static const char image[] = "// any image: the simulator runs registered kernels\n";
	uint64_t *t = calloc((size_t)n, sizeof(*t));
	cudaLibrary_t lib;
	cudaKernel_t k;
	float *p;
	float v = 1.0f;
	unsigned long long cnt = 64;
	void *args[] = { &p, &v, &cnt };

	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(cudaLibraryGetKernel(&k, lib, "mt_fill"));
	CK(cudaMalloc((void **)&p, cnt * sizeof(float)));
	for (int i = 0; i < n / 10 + 100; i++)
		CK(cudaLaunchKernel((const void *)k, (dim3){ 1, 1, 1 }, (dim3){ 64, 1, 1 }, args, 0, NULL));
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();

		cudaLaunchKernel((const void *)k, (dim3){ 1, 1, 1 }, (dim3){ 64, 1, 1 }, args, 0, NULL);
		t[i] = now_ns() - t0;
	}
	CK(cudaDeviceSynchronize());
	report("launch", t, n);
	CK(cudaFree(p));
	free(t);
	return 0;
}

static int bench_conv(int n)
{
	uint64_t *t = calloc((size_t)n, sizeof(*t));
	cudnnHandle_t h;
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	float *x, *w, *y;
	float one = 1.0f, zero = 0.0f;

	CK(cudnnCreate(&h));
	CK(cudnnCreateTensorDescriptor(&xd));
	CK(cudnnCreateTensorDescriptor(&yd));
	CK(cudnnCreateFilterDescriptor(&wd));
	CK(cudnnCreateConvolutionDescriptor(&cd));
	/* 1x1x4x4 input, one 3x3 filter, pad 1: a 4x4 output. */
	CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 4));
	CK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, 3, 3));
	CK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
					   CUDNN_DATA_FLOAT));
	CK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 4));
	CK(cudaMalloc((void **)&x, 16 * sizeof(float)));
	CK(cudaMalloc((void **)&w, 9 * sizeof(float)));
	CK(cudaMalloc((void **)&y, 16 * sizeof(float)));
	CK(cudaMemset(x, 0, 16 * sizeof(float)));
	CK(cudaMemset(w, 0, 9 * sizeof(float)));
	for (int i = 0; i < n / 10 + 100; i++)
		CK(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd,
					   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0,
					   &zero, yd, y));
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();

		cudnnConvolutionForward(h, &one, xd, x, wd, w, cd,
					CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, yd, y);
		t[i] = now_ns() - t0;
	}
	CK(cudaDeviceSynchronize());
	report("conv", t, n);
	free(t);
	return 0;
}

/* ---- scan alone ---- */

#define VA_BASE 0x7f0000000000ull
static bool owns(uintptr_t p)
{
	return p - VA_BASE < (1ull << 40);
}

static int fake_query(const void *f, int i, size_t *off, size_t *size)
{
	int n = (int)(uintptr_t)f & 0xff;

	if (i >= n)
		return 1;
	*off = (size_t)(8 * i);
	*size = 8;
	return 0;
}

static void bench_scan_k(int k, int n)
{
	uint64_t vals[64];
	void *args[64];
	vmem_ref_t refs[VMEM_INLINE_REFS];
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tl;
	const void *func = (const void *)(uintptr_t)(0x5000 + k);
	volatile int sink = 0;
	uint64_t t0;

	for (int i = 0; i < k; i++) {
		/* a mix: pointers of vmem every third word, integers, doubles */
		vals[i] = i % 3 == 0 ? VA_BASE + 0x200000ull * (uint64_t)i : (uint64_t)i * 7;
		args[i] = &vals[i];
	}
	scan_layout(func, fake_query, NULL, &tl, tmp);
	t0 = now_ns();
	for (int r = 0; r < n; r++) {
		const scan_layout_t *l = scan_layout(func, fake_query, NULL, &tl, tmp);

		sink += scan_args(args, l->params, l->nparams, owns, refs, VMEM_INLINE_REFS, NULL);
	}
	printf("scan%d %.1f\n", k, (double)(now_ns() - t0) / n);
	(void)sink;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "launch";
	int n = argc > 2 ? atoi(argv[2]) : 20000;

	if (n < 100)
		n = 100;
	if (strcmp(mode, "launch") == 0)
		return bench_launch(n);
	if (strcmp(mode, "conv") == 0)
		return bench_conv(n);
	if (strcmp(mode, "scan") == 0) {
		int ks[] = { 3, 6, 16, 32 };

		for (int i = 0; i < 4; i++)
			bench_scan_k(ks[i], n * 10);
		return 0;
	}
	fprintf(stderr, "bench_hooks: unknown mode '%s'; expected launch, conv or scan\n", mode);
	return 2;
}
