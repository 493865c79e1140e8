/* tests/unit/scripts/fakecudart/fake_cudart.c - a stand-in libcudart.so.13
 * for testing scripts/um/libvmemum.so as a preload without a GPU.
 *
 * A device of FAKE_CUDA_TOTAL_MIB with FAKE_CUDA_FREE_MIB free (defaults
 * 81559 and 80000).  Memory is never touched: pointers are distinct
 * addresses from a counter.  Every call is logged on stderr as
 * "fake-cudart: <call> <bytes> -> <status>" so a test can check exactly
 * what the preload asked of CUDA.  A plain allocation takes free memory
 * and fails (cudaErrorMemoryAllocation, also the last error) beyond it; a
 * managed one takes none, as on a real device that pages managed memory
 * (it fails only beyond the total) -- so nothing here stops a preload
 * from oversubscribing: the preload must refuse by itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define MAXP 4096

static struct {
	int init;
	uint64_t free_b, total_b, next;
	cudaError_t last;
	struct { void *p; uint64_t n; int managed; } live[MAXP];
} d;

static void init(void)
{
	const char *f = getenv("FAKE_CUDA_FREE_MIB"), *t = getenv("FAKE_CUDA_TOTAL_MIB");

	if (d.init)
		return;
	d.init = 1;
	d.total_b = (t ? strtoull(t, NULL, 10) : 81559) << 20;
	d.free_b = (f ? strtoull(f, NULL, 10) : 80000) << 20;
	d.next = 1ull << 40;
}

static cudaError_t take(void **p, size_t n, int managed)
{
	init();
	if (n > (managed ? d.total_b : d.free_b)) {
		fprintf(stderr, "fake-cudart: %s %zu -> 2\n", managed ? "cudaMallocManaged" : "cudaMalloc", n);
		return d.last = cudaErrorMemoryAllocation;
	}
	for (int i = 0; i < MAXP; i++) {
		if (!d.live[i].p) {
			d.live[i].p = (void *)(uintptr_t)d.next;
			d.live[i].n = n;
			d.live[i].managed = managed;
			d.next += (n + 0xfffff) & ~(uint64_t)0xfffff;
			if (!managed)
				d.free_b -= n;
			*p = d.live[i].p;
			fprintf(stderr, "fake-cudart: %s %zu -> 0\n",
				managed ? "cudaMallocManaged" : "cudaMalloc", n);
			return cudaSuccess;
		}
	}
	return d.last = cudaErrorMemoryAllocation;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	return take(p, n, 0);
}

cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
	if (flags != cudaMemAttachGlobal)
		return d.last = cudaErrorInvalidValue;
	return take(p, n, 1);
}

cudaError_t cudaFree(void *p)
{
	init();
	if (!p)
		return cudaSuccess;
	for (int i = 0; i < MAXP; i++) {
		if (d.live[i].p == p) {
			if (!d.live[i].managed)
				d.free_b += d.live[i].n;
			fprintf(stderr, "fake-cudart: cudaFree %s %llu -> 0\n",
				d.live[i].managed ? "managed" : "device", (unsigned long long)d.live[i].n);
			d.live[i].p = NULL;
			return cudaSuccess;
		}
	}
	return d.last = cudaErrorInvalidValue;
}

cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
	init();
	*f = d.free_b;
	*t = d.total_b;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = d.last;

	d.last = cudaSuccess;
	return e;
}
