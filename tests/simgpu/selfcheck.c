/* tests/simgpu/selfcheck.c - simgpu-selfcheck: exercises the simulated GPU
 * the way a training job would and prints a short report.
 *
 * Linked against the real libcudart.so only; run it with
 * LD_LIBRARY_PATH=<build>/tests/simgpu.  The VMM calls come through
 * cudaGetDriverEntryPointByVersion, as PyTorch's expandable segments get
 * them.  Exit status 0 when every check held, 1 otherwise (each failure
 * printed with what was expected and what was got).
 */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define MIB ((size_t)1 << 20)

static int failures;

static void check(const char *what, int ok, const char *expected,
		  const char *got)
{
	if (!ok) {
		fprintf(stderr, "selfcheck: FAIL %s: expected %s, got %s\n",
			what, expected, got);
		failures++;
	}
}

static int cuda_ok(const char *what, cudaError_t e)
{
	check(what, e == cudaSuccess, "cudaSuccess", cudaGetErrorName(e));
	return e == cudaSuccess;
}

static int cu_ok(const char *what, CUresult r)
{
	char got[32];

	snprintf(got, sizeof(got), "CUresult %d", (int)r);
	check(what, r == CUDA_SUCCESS, "CUDA_SUCCESS", got);
	return r == CUDA_SUCCESS;
}

static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult st;

	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault,
					     &st) != cudaSuccess ||
	    st != cudaDriverEntryPointSuccess)
		fn = NULL;
	check(name, fn != NULL, "a driver entry point", "none");
	return fn;
}

static void memory(void)
{
	size_t free0, total, free1;
	void *p = NULL, *q = NULL;
	cudaError_t e;

	cuda_ok("cudaMemGetInfo", cudaMemGetInfo(&free0, &total));
	cuda_ok("cudaMalloc(64M)", cudaMalloc(&p, 64 * MIB));
	cudaMemGetInfo(&free1, &total);
	check("free memory drops by 64M", free0 - free1 == 64 * MIB,
	      "64M less", "a different amount");
	e = cudaMalloc(&q, total + MIB);
	check("cudaMalloc past the capacity", e == cudaErrorMemoryAllocation,
	      "cudaErrorMemoryAllocation", cudaGetErrorName(e));
	cudaGetLastError();
	cuda_ok("cudaFree", cudaFree(p));
	printf("memory:  %zu MiB device, cudaMalloc/cudaFree/OOM ok\n",
	       total / MIB);
}

static void vmm(void)
{
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
			    unsigned long long) = entry("cuMemAddressReserve");
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t,
			   const CUmemAllocationProp *, unsigned long long) =
		entry("cuMemCreate");
	CUresult (*map)(CUdeviceptr, size_t, size_t,
			CUmemGenericAllocationHandle, unsigned long long) =
		entry("cuMemMap");
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *,
			   size_t) = entry("cuMemSetAccess");
	CUresult (*unmap)(CUdeviceptr, size_t) = entry("cuMemUnmap");
	CUresult (*release)(CUmemGenericAllocationHandle) =
		entry("cuMemRelease");
	CUresult (*afree)(CUdeviceptr, size_t) = entry("cuMemAddressFree");
	CUmemAllocationProp prop;
	CUmemAccessDesc desc;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	char in[256] = "simgpu keeps bytes across unmap/map", out[256] = "";

	if (!reserve || !create || !map || !access || !unmap || !release ||
	    !afree)
		return;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	memset(&desc, 0, sizeof(desc));
	desc.location = prop.location;
	desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (!cu_ok("cuMemAddressReserve", reserve(&va, 8 * MIB, 0, 0, 0)) ||
	    !cu_ok("cuMemCreate", create(&h, 2 * MIB, &prop, 0)))
		return;
	cu_ok("cuMemMap", map(va, 2 * MIB, 0, h, 0));
	cu_ok("cuMemSetAccess", access(va, 2 * MIB, &desc, 1));
	cuda_ok("cudaMemcpy H2D", cudaMemcpy((void *)va, in, sizeof(in),
					     cudaMemcpyHostToDevice));
	cu_ok("cuMemUnmap", unmap(va, 2 * MIB));
	cu_ok("cuMemMap elsewhere", map(va + 4 * MIB, 2 * MIB, 0, h, 0));
	cu_ok("cuMemSetAccess", access(va + 4 * MIB, 2 * MIB, &desc, 1));
	cuda_ok("cudaMemcpy D2H", cudaMemcpy(out, (void *)(va + 4 * MIB),
					     sizeof(out),
					     cudaMemcpyDeviceToHost));
	check("bytes after remapping", !strcmp(in, out), in, out);
	cu_ok("cuMemUnmap", unmap(va + 4 * MIB, 2 * MIB));
	cu_ok("cuMemRelease", release(h));
	cu_ok("cuMemAddressFree", afree(va, 8 * MIB));
	printf("vmm:     reserve/create/map/access/unmap/remap ok\n");
}

static float ms_between(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0.0f;

	cuda_ok("cudaEventElapsedTime", cudaEventElapsedTime(&ms, a, b));
	return ms;
}

static void streams_and_kernel(void)
{
	size_t n = 32 * MIB;
	void *h = NULL, *h2 = NULL, *d1 = NULL, *d2 = NULL;
	cudaStream_t s1, s2;
	cudaEvent_t e0, e1, e2;
	cudaLibrary_t lib;
	cudaKernel_t fill;
	float one_ms, both_ms, v = 1.5f, back = 0.0f;
	unsigned long long nf = n / sizeof(float);
	void *args[] = { &d1, &v, &nf };
	dim3 grid = { 1024, 1, 1 }, block = { 256, 1, 1 };

	cuda_ok("cudaMallocHost", cudaMallocHost(&h, n));
	/* the overlapping copies must not share a host buffer: one would
	 * write what the other reads (the race checker stops that) */
	cuda_ok("cudaMallocHost", cudaMallocHost(&h2, n));
	cuda_ok("cudaMalloc", cudaMalloc(&d1, n));
	cuda_ok("cudaMalloc", cudaMalloc(&d2, n));
	cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	cudaEventCreate(&e2);

	cudaDeviceSynchronize();
	cudaEventRecord(e0, s1);
	cudaMemcpyAsync(d1, h, n, cudaMemcpyHostToDevice, s1);
	cudaEventRecord(e1, s1);
	cudaEventSynchronize(e1);
	one_ms = ms_between(e0, e1);

	cudaDeviceSynchronize();
	cudaEventRecord(e0, s1);
	cudaStreamWaitEvent(s2, e0, 0);
	cudaMemcpyAsync(d1, h, n, cudaMemcpyHostToDevice, s1);
	cudaMemcpyAsync(h2, d2, n, cudaMemcpyDeviceToHost, s2);
	cudaEventRecord(e2, s2);
	cudaStreamWaitEvent(s1, e2, 0);
	cudaEventRecord(e1, s1);
	cudaDeviceSynchronize();
	both_ms = ms_between(e0, e1);
	check("H2D and D2H overlap", both_ms < 1.5f * one_ms,
	      "less than 1.5x one copy", "serialised copies");
	printf("streams: one 32 MiB copy %.3f ms, H2D+D2H together %.3f ms\n",
	       one_ms, both_ms);

	if (cuda_ok("cudaLibraryLoadData",
		    cudaLibraryLoadData(&lib, "ptx", NULL, NULL, 0, NULL,
					NULL, 0)) &&
	    cuda_ok("cudaLibraryGetKernel",
		    cudaLibraryGetKernel(&fill, lib, "mt_fill"))) {
		cuda_ok("cudaLaunchKernel(mt_fill)",
			cudaLaunchKernel((const void *)fill, grid, block, args,
					 0, s1));
		cudaMemcpyAsync(&back, (char *)d1 + n - sizeof(float),
				sizeof(float), cudaMemcpyDeviceToHost, s1);
		cudaStreamSynchronize(s1);
		check("mt_fill wrote the last element", back == 1.5f, "1.5",
		      "another value");
		printf("kernel:  mt_fill over %llu floats ok\n", nf);
	}
	cudaStreamDestroy(s1);
	cudaStreamDestroy(s2);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaEventDestroy(e2);
	cudaFree(d1);
	cudaFree(d2);
	cudaFreeHost(h);
	cudaFreeHost(h2);
}

int main(void)
{
	struct cudaDeviceProp prop;
	int rt = 0;

	if (!cuda_ok("cudaGetDeviceProperties",
		     cudaGetDeviceProperties(&prop, 0)))
		return 1;
	cudaRuntimeGetVersion(&rt);
	printf("device:  %s, cc %d.%d, %d SMs, runtime %d\n", prop.name,
	       prop.major, prop.minor, prop.multiProcessorCount, rt);
	memory();
	vmm();
	streams_and_kernel();
	printf("selfcheck: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
