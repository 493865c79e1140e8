/* tests/sim/interpose/planprog.c - a periodic program for the proactive
 * layer: vmem must learn its iteration, drop what is dead, and never lose
 * data when the program leaves the plan.  Run on the simulated GPU under
 * LD_PRELOAD=libvmem.so; linked against the real libcudart like an
 * application.
 *
 *   planprog steady  ITERS       the same iteration ITERS times
 *   planprog stray   ITERS AT    iteration AT does something else (an extra
 *                                copy of c), then the loop goes on
 *   planprog reread  ITERS AT    iteration AT synchronises and reads `a`
 *                                again after the point where it is dead in
 *                                every other iteration (with eager liveness
 *                                the plan dropped it by then)
 *
 * One iteration, on one stream, with a host synchronisation at its end
 * (as a training loop reading its loss):
 *
 *   memset a = i            a written whole
 *   copy   a -> b           a read for the last time: dead until the next memset
 *   copy   b -> host        b read
 *   memset c = 2i + 1       c written whole
 *   sscal  c *= 1.0         a compute op (cuBLAS): the detector wants one
 *   copy   c -> host        c read
 *   synchronize
 *
 * Every byte that reaches the host is checked against what the program
 * wrote; the last line is "checksum 0x..." over everything copied out.
 * Exit 0 when every check passed, 1 with the first difference (expected
 * and got) or the failing call's error otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define MiB (1u << 20)
#define N (4 * MiB)

static int check(cudaError_t e, const char *what, int iter)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "planprog: iteration %d: %s failed: %s (%d), expected cudaSuccess\n", iter,
		what, cudaGetErrorName(e), (int)e);
	return 1;
}

static int expect(const unsigned char *h, int value, const char *what, int iter)
{
	for (size_t k = 0; k < N; k++)
		if (h[k] != (unsigned char)value) {
			fprintf(stderr, "planprog: iteration %d: %s byte %zu: expected 0x%02x, got 0x%02x\n",
				iter, what, k, (unsigned char)value, h[k]);
			return 1;
		}
	return 0;
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t k = 0; k < n; k += 4096)
		h = (h ^ p[k]) * 1099511628211ull;
	return h;
}

int main(int argc, char **argv)
{
	unsigned char *a, *b, *c, *h;
	cudaStream_t s;
	cublasHandle_t blas;
	const float one = 1.0f;
	uint64_t sum = 1469598103934665603ull;
	const char *mode = argc > 1 ? argv[1] : "";
	int iters = argc > 2 ? atoi(argv[2]) : 0, at = argc > 3 ? atoi(argv[3]) : -1;
	int bad = 0;

	if ((strcmp(mode, "steady") && strcmp(mode, "stray") && strcmp(mode, "reread")) ||
	    iters <= 0) {
		fprintf(stderr, "usage: planprog steady|stray|reread ITERS [AT]\n");
		return 2;
	}
	if (check(cudaMalloc((void **)&a, N), "cudaMalloc a", -1) ||
	    check(cudaMalloc((void **)&b, N), "cudaMalloc b", -1) ||
	    check(cudaMalloc((void **)&c, N), "cudaMalloc c", -1) ||
	    check(cudaMallocHost((void **)&h, N), "cudaMallocHost", -1) ||
	    check(cudaStreamCreate(&s), "cudaStreamCreate", -1))
		return 1;
	if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, s) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "planprog: cublasCreate/cublasSetStream failed, expected success\n");
		return 1;
	}
	for (int i = 0; i < iters && !bad; i++) {
		/* below 0x80: every float of c is finite, so scaling by 1 keeps its bits */
		int va = i & 0xff, vc = (2 * i + 1) & 0x7f;

		bad |= check(cudaMemsetAsync(a, va, N, s), "memset a", i);
		bad |= check(cudaMemcpyAsync(b, a, N, cudaMemcpyDeviceToDevice, s), "copy a -> b", i);
		if (i == at && !strcmp(mode, "reread")) {
			/* a is dead here in every other iteration */
			bad |= check(cudaStreamSynchronize(s), "synchronize", i);
			bad |= check(cudaMemcpyAsync(h, a, N, cudaMemcpyDeviceToHost, s), "copy a -> host", i);
			if (!bad) {
				bad |= check(cudaStreamSynchronize(s), "synchronize", i);
				bad |= expect(h, va, "a", i);
			}
		}
		bad |= check(cudaMemcpyAsync(h, b, N, cudaMemcpyDeviceToHost, s), "copy b -> host", i);
		bad |= check(cudaStreamSynchronize(s), "synchronize", i);
		if (bad)
			break;
		bad |= expect(h, va, "b", i);
		sum = fnv(sum, h, N);
		bad |= check(cudaMemsetAsync(c, vc, N, s), "memset c", i);
		if (cublasSscal(blas, N / 4, &one, (float *)c, 1) != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "planprog: iteration %d: cublasSscal failed, expected success\n", i);
			return 1;
		}
		if (i == at && !strcmp(mode, "stray")) {
			/* a step the plan does not have: c goes to b and back */
			bad |= check(cudaMemcpyAsync(b, c, N, cudaMemcpyDeviceToDevice, s), "copy c -> b", i);
			bad |= check(cudaMemcpyAsync(c, b, N, cudaMemcpyDeviceToDevice, s), "copy b -> c", i);
		}
		bad |= check(cudaMemcpyAsync(h, c, N, cudaMemcpyDeviceToHost, s), "copy c -> host", i);
		bad |= check(cudaStreamSynchronize(s), "synchronize", i);
		if (bad)
			break;
		bad |= expect(h, vc, "c", i);
		sum = fnv(sum, h, N);
	}
	if (bad)
		return 1;
	printf("checksum 0x%016llx\n", (unsigned long long)sum);
	return 0;
}
