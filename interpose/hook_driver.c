/* interpose/hook_driver.c - the CUDA driver calls vmem cares about, both
 * exported (an application linked against libcuda.so.1) and handed out
 * through the entry-point queries (cudaGetDriverEntryPoint,
 * cudaGetDriverEntryPointByVersion, cuGetProcAddress), which is how
 * PyTorch reaches cuMemCreate/cuMemMap for expandable segments.
 *
 * An entry-point query is answered by the real function; when the pointer
 * it returns is the real function of one of vmem's wrappers (or, for the
 * calls with a single ABI, when the name matches), vmem's wrapper is
 * returned instead.  The wrappers have the exact ABI of the function they
 * replace, so the caller cannot tell.
 *
 * cuMemAlloc/cuMemFree go to the pool like cudaMalloc/cudaFree.  The VMM
 * calls (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease, cuMemAddressFree) are served from the pool
 * while vmem is active (runtime_vmm_*: PyTorch's expandable segments,
 * issue 14), and recorded; what the pool does not serve (host memory,
 * sizes that are not whole chunks) passes through; see docs/pool.md.
 * Launches, copies and sets become calls with their touched ranges, like
 * the runtime's; IPC, handle and pointer queries on vmem's memory are
 * refused or answered by vmem (the sections below say which and why).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/scan.h"
#include "interpose/stats.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

/* Real names after cuda.h's version macros: cuMemAlloc is cuMemAlloc_v2. */
#define DRIVER_REALS(X)                                                                    \
	X(cuGetProcAddress_v2, CUresult,                                                   \
	  (const char *sym, void **pfn, int ver, cuuint64_t flags,                         \
	   CUdriverProcAddressQueryResult *st), (sym, pfn, ver, flags, st))                \
	X(cuMemAlloc_v2, CUresult, (CUdeviceptr *p, size_t n), (p, n))                     \
	X(cuMemAllocAsync, CUresult, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s))    \
	X(cuMemAllocPitch_v2, CUresult,                                                    \
	  (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e),             \
	  (p, pitch, w, h, e))                                                             \
	X(cuMemFree_v2, CUresult, (CUdeviceptr p), (p))                                    \
	X(cuMemFreeAsync, CUresult, (CUdeviceptr p, CUstream s), (p, s))                   \
	X(cuMemGetInfo_v2, CUresult, (size_t *f, size_t *t), (f, t))                       \
	X(cuMemCreate, CUresult,                                                           \
	  (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,     \
	   unsigned long long flags), (h, n, prop, flags))                                 \
	X(cuMemMap, CUresult,                                                              \
	  (CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,            \
	   unsigned long long flags), (p, n, off, h, flags))                               \
	X(cuMemUnmap, CUresult, (CUdeviceptr p, size_t n), (p, n))                         \
	X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle h), (h))                   \
	X(cuMemAddressReserve, CUresult,                                                   \
	  (CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr,                       \
	   unsigned long long flags), (p, n, align, addr, flags))                          \
	X(cuMemAddressFree, CUresult, (CUdeviceptr p, size_t n), (p, n))                   \
	X(cuMemSetAccess, CUresult,                                                        \
	  (CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t count),               \
	  (p, n, d, count))                                                                \
	X(cuMemExportToShareableHandle, CUresult,                                          \
	  (void *sh, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,          \
	   unsigned long long flags), (sh, h, t, flags))                                   \
	X(cuLaunchKernel, CUresult,                                                        \
	  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,  \
	   unsigned bz, unsigned sh, CUstream s, void **params, void **extra),             \
	  (f, gx, gy, gz, bx, by, bz, sh, s, params, extra))                               \
	X(cuLaunchKernel_ptsz, CUresult,                                                   \
	  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,  \
	   unsigned bz, unsigned sh, CUstream s, void **params, void **extra),             \
	  (f, gx, gy, gz, bx, by, bz, sh, s, params, extra))                               \
	X(cuLaunchKernelEx, CUresult,                                                      \
	  (const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra),          \
	  (cfg, f, params, extra))                                                         \
	X(cuLaunchKernelEx_ptsz, CUresult,                                                 \
	  (const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra),          \
	  (cfg, f, params, extra))                                                         \
	X(cuLibraryGetKernel, CUresult, (CUkernel *k, CUlibrary lib, const char *name),    \
	  (k, lib, name))                                                                  \
	X(cuLibraryEnumerateKernels, CUresult, (CUkernel *k, unsigned int n, CUlibrary lib), \
	  (k, n, lib))

#define DRIVER_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDA, name, ret, params, args)
DRIVER_REALS(DRIVER_REAL)

/* Handles and pointer queries (refused or answered for vmem's memory). */
#define DRV_QUERY_REALS(X)                                                                 \
	X(cuIpcGetMemHandle, CUresult, (CUipcMemHandle *h, CUdeviceptr p), (h, p))         \
	X(cuMemRetainAllocationHandle, CUresult, (CUmemGenericAllocationHandle *h, void *a), \
	  (h, a))                                                                          \
	X(cuMemGetAddressRange_v2, CUresult, (CUdeviceptr *b, size_t *s, CUdeviceptr p),   \
	  (b, s, p))                                                                       \
	X(cuPointerGetAttribute, CUresult, (void *d, CUpointer_attribute a, CUdeviceptr p), \
	  (d, a, p))                                                                       \
	X(cuPointerGetAttributes, CUresult,                                                \
	  (unsigned int n, CUpointer_attribute *a, void **d, CUdeviceptr p), (n, a, d, p))
DRV_QUERY_REALS(DRIVER_REAL)

#define RT_REALS(X)                                                                     \
	X(cudaGetDriverEntryPoint, cudaError_t,                                         \
	  (const char *sym, void **pfn, unsigned long long flags,                       \
	   enum cudaDriverEntryPointQueryResult *st), (sym, pfn, flags, st))            \
	X(cudaGetDriverEntryPointByVersion, cudaError_t,                                \
	  (const char *sym, void **pfn, unsigned int ver, unsigned long long flags,     \
	   enum cudaDriverEntryPointQueryResult *st), (sym, pfn, ver, flags, st))

#define RT_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDART, name, ret, params, args)
RT_REALS(RT_REAL)

#define MISSING(name) ((CUresult)hook_missing(#name, CUDA_ERROR_NOT_FOUND))

static CUresult cu_status(cudaError_t st)
{
	switch (st) {
	case cudaSuccess: return CUDA_SUCCESS;
	case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
	case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
	case cudaErrorInvalidDevicePointer: return CUDA_ERROR_INVALID_VALUE;
	default: return CUDA_ERROR_UNKNOWN;
	}
}

/* ---- allocation ---- */

HOOK_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	real_cuMemAlloc_v2_t real = real_cuMemAlloc_v2();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemAlloc_v2);
	if (!hook_begin())
		return real(p, n);
	t0 = hook_clock_ns();
	if (runtime_active()) {
		void *ptr = NULL;

		st = cu_status(runtime_malloc(&ptr, n, NULL, "cuMemAlloc"));
		if (st == CUDA_SUCCESS)
			*p = (CUdeviceptr)(uintptr_t)ptr;
	} else {
		st = real(p, n);
	}
	stats_call(STATS_CALL_MALLOC, hook_clock_ns() - t0, 0);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
	real_cuMemAllocAsync_t real = real_cuMemAllocAsync();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemAllocAsync);
	if (!hook_begin())
		return real(p, n, s);
	t0 = hook_clock_ns();
	if (runtime_active()) {
		void *ptr = NULL;

		st = cu_status(runtime_malloc(&ptr, n, (cudaStream_t)s, "cuMemAllocAsync"));
		if (st == CUDA_SUCCESS)
			*p = (CUdeviceptr)(uintptr_t)ptr;
	} else {
		st = real(p, n, s);
	}
	stats_call(STATS_CALL_MALLOC, hook_clock_ns() - t0, 0);
	hook_end();
	return st;
}

/* Pitched allocations are rare in training code: CUDA chooses the pitch,
 * so they stay CUDA's (foreign to vmem, always resident). */
HOOK_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h,
					unsigned int e)
{
	real_cuMemAllocPitch_v2_t real = real_cuMemAllocPitch_v2();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemAllocPitch_v2);
	if (!hook_begin())
		return real(p, pitch, w, h, e);
	t0 = hook_clock_ns();
	st = real(p, pitch, w, h, e);
	stats_call(STATS_CALL_MALLOC, 0, hook_clock_ns() - t0);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	real_cuMemFree_v2_t real = real_cuMemFree_v2();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemFree_v2);
	if (!hook_begin())
		return real(p);
	t0 = hook_clock_ns();
	if (runtime_active() && runtime_owns((uintptr_t)p))
		st = cu_status(runtime_free((void *)(uintptr_t)p, NULL, false, "cuMemFree"));
	else
		st = real(p);
	stats_call(STATS_CALL_FREE, hook_clock_ns() - t0, 0);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	real_cuMemFreeAsync_t real = real_cuMemFreeAsync();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemFreeAsync);
	if (!hook_begin())
		return real(p, s);
	t0 = hook_clock_ns();
	if (runtime_active() && runtime_owns((uintptr_t)p))
		st = cu_status(runtime_free((void *)(uintptr_t)p, (cudaStream_t)s, true, "cuMemFreeAsync"));
	else
		st = real(p, s);
	stats_call(STATS_CALL_FREE, hook_clock_ns() - t0, 0);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t)
{
	real_cuMemGetInfo_v2_t real = real_cuMemGetInfo_v2();
	uint64_t t0;
	CUresult st;

	if (!real)
		return MISSING(cuMemGetInfo_v2);
	if (!hook_begin())
		return real(f, t);
	t0 = hook_clock_ns();
	st = runtime_active() ? cu_status(runtime_mem_get_info(f, t)) : real(f, t);
	stats_call(STATS_CALL_MEMINFO, hook_clock_ns() - t0, 0);
	hook_end();
	return st;
}

/* ---- virtual memory management: served from the pool, recorded ---- */

/* `serve` answers whether the runtime handled the call (st set); if not,
 * the real function runs.  A missing real function is only an error when
 * the call has to go to it. */
#define VMM_CALL(name, serve, params_call, fmt, ...)                            \
	do {                                                                    \
		hook_call_t c_;                                                 \
		hook_call_init(&c_, VMEM_OP_OTHER, #name, NULL);                \
		hook_call_args(&c_, fmt, __VA_ARGS__);                          \
		(void)hook_call_prepare(&c_);                                   \
		if (!(serve))                                                   \
			st = real ? real params_call : MISSING(name);           \
		hook_call_finish(&c_);                                          \
		hook_end();                                                     \
	} while (0)

#define VMM_PASS(name, params_call)                                             \
	do {                                                                    \
		if (!hook_begin())                                              \
			return real ? real params_call : MISSING(name);         \
	} while (0)

HOOK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n,
				 const CUmemAllocationProp *prop, unsigned long long flags)
{
	real_cuMemCreate_t real = real_cuMemCreate();
	CUresult st;

	VMM_PASS(cuMemCreate, (h, n, prop, flags));
	VMM_CALL(cuMemCreate, runtime_vmm_create(h, n, prop, flags, &st), (h, n, prop, flags),
		 "\"bytes\":%zu", n);
	return st;
}

HOOK_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,
			      unsigned long long flags)
{
	real_cuMemMap_t real = real_cuMemMap();
	CUresult st;

	VMM_PASS(cuMemMap, (p, n, off, h, flags));
	VMM_CALL(cuMemMap, runtime_vmm_map(p, n, off, h, flags, &st), (p, n, off, h, flags),
		 "\"ptr\":\"0x%llx\",\"bytes\":%zu", (unsigned long long)p, n);
	return st;
}

HOOK_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
	real_cuMemUnmap_t real = real_cuMemUnmap();
	CUresult st;

	VMM_PASS(cuMemUnmap, (p, n));
	VMM_CALL(cuMemUnmap, runtime_vmm_unmap(p, n, &st), (p, n), "\"ptr\":\"0x%llx\",\"bytes\":%zu",
		 (unsigned long long)p, n);
	return st;
}

HOOK_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	real_cuMemRelease_t real = real_cuMemRelease();
	CUresult st;

	VMM_PASS(cuMemRelease, (h));
	VMM_CALL(cuMemRelease, runtime_vmm_release(h, &st), (h), "\"handle\":%llu",
		 (unsigned long long)h);
	return st;
}

HOOK_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr,
					 unsigned long long flags)
{
	real_cuMemAddressReserve_t real = real_cuMemAddressReserve();
	CUresult st;

	VMM_PASS(cuMemAddressReserve, (p, n, align, addr, flags));
	VMM_CALL(cuMemAddressReserve, runtime_vmm_reserve(p, n, align, addr, flags, &st),
		 (p, n, align, addr, flags), "\"bytes\":%zu", n);
	return st;
}

HOOK_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
	real_cuMemAddressFree_t real = real_cuMemAddressFree();
	CUresult st;

	VMM_PASS(cuMemAddressFree, (p, n));
	VMM_CALL(cuMemAddressFree, runtime_vmm_address_free(p, n, &st), (p, n),
		 "\"ptr\":\"0x%llx\",\"bytes\":%zu", (unsigned long long)p, n);
	return st;
}

HOOK_EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t count)
{
	real_cuMemSetAccess_t real = real_cuMemSetAccess();
	CUresult st;

	VMM_PASS(cuMemSetAccess, (p, n, d, count));
	VMM_CALL(cuMemSetAccess, runtime_vmm_set_access(p, n, d, count, &st), (p, n, d, count),
		 "\"ptr\":\"0x%llx\",\"bytes\":%zu", (unsigned long long)p, n);
	return st;
}

HOOK_EXPORT CUresult cuMemExportToShareableHandle(void *sh, CUmemGenericAllocationHandle h,
						  CUmemAllocationHandleType t, unsigned long long flags)
{
	real_cuMemExportToShareableHandle_t real = real_cuMemExportToShareableHandle();
	CUresult st;

	VMM_PASS(cuMemExportToShareableHandle, (sh, h, t, flags));
	VMM_CALL(cuMemExportToShareableHandle, runtime_vmm_export(h, &st), (sh, h, t, flags),
		 "\"handle\":%llu", (unsigned long long)h);
	return st;
}

/* ---- launches ---- */

static void drv_launch_args(hook_call_t *c, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			    unsigned by, unsigned bz, unsigned sh)
{
	hook_call_args(c, "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%u",
		       gx, gy, gz, bx, by, bz, sh);
}

#define DRV_LAUNCH(NAME)                                                                    \
	HOOK_EXPORT CUresult NAME(CUfunction f, unsigned gx, unsigned gy, unsigned gz,         \
				  unsigned bx, unsigned by, unsigned bz, unsigned sh, CUstream s, \
				  void **params, void **extra)                                  \
	{                                                                                     \
		real_##NAME##_t real = real_##NAME();                                         \
		hook_call_t c;                                                                \
		CUresult st;                                                                  \
		if (!real)                                                                    \
			return MISSING(NAME);                                                 \
		if (!hook_begin())                                                            \
			return real(f, gx, gy, gz, bx, by, bz, sh, s, params, extra);         \
		hook_call_init(&c, VMEM_OP_LAUNCH, #NAME, s);                                 \
		hook_launch_refs(&c, f, params, extra, HOOK_LAUNCH_DRIVER,                    \
				 hook_grid_blocks(gx, gy, gz));                               \
		drv_launch_args(&c, gx, gy, gz, bx, by, bz, sh);                              \
		if (hook_call_prepare(&c) == cudaSuccess)                                     \
			st = real(f, gx, gy, gz, bx, by, bz, sh, s, params, extra);           \
		else                                                                          \
			st = CUDA_ERROR_OUT_OF_MEMORY;                                        \
		hook_call_finish(&c);                                                         \
		hook_end();                                                                   \
		return st;                                                                    \
	}

DRV_LAUNCH(cuLaunchKernel)
DRV_LAUNCH(cuLaunchKernel_ptsz)

#define DRV_LAUNCH_EX(NAME)                                                                 \
	HOOK_EXPORT CUresult NAME(const CUlaunchConfig *cfg, CUfunction f, void **params,      \
				  void **extra)                                                 \
	{                                                                                     \
		real_##NAME##_t real = real_##NAME();                                         \
		hook_call_t c;                                                                \
		CUresult st;                                                                  \
		if (!real)                                                                    \
			return MISSING(NAME);                                                 \
		if (!hook_begin())                                                            \
			return real(cfg, f, params, extra);                                   \
		hook_call_init(&c, VMEM_OP_LAUNCH, #NAME, cfg ? cfg->hStream : NULL);         \
		hook_launch_refs(&c, f, params, extra, HOOK_LAUNCH_DRIVER,                    \
				 cfg ? hook_grid_blocks(cfg->gridDimX, cfg->gridDimY,         \
							cfg->gridDimZ) : 0);                  \
		if (cfg)                                                                      \
			drv_launch_args(&c, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ,      \
					cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,       \
					cfg->sharedMemBytes);                                 \
		if (hook_call_prepare(&c) == cudaSuccess)                                     \
			st = real(cfg, f, params, extra);                                     \
		else                                                                          \
			st = CUDA_ERROR_OUT_OF_MEMORY;                                        \
		hook_call_finish(&c);                                                         \
		hook_end();                                                                   \
		return st;                                                                    \
	}

DRV_LAUNCH_EX(cuLaunchKernelEx)
DRV_LAUNCH_EX(cuLaunchKernelEx_ptsz)

/* ---- copies and sets: each with its exact access (a copy reads its
 * source and writes its destination, a set writes), exported and handed
 * out through the entry-point queries (PyTorch asks for cuMemsetD32Async
 * at version 12000).  cuMemcpy/cuMemcpyAsync take unified addresses:
 * either side may be host memory, which the runtime leaves alone.  The
 * _ptds/_ptsz twins are what a per-thread-default-stream program gets;
 * vmem orders their fault-ins on CU_STREAM_PER_THREAD where they name
 * the default stream.  The D2D sets' extent is every row but the last at
 * full pitch.  cuMemcpy2D/3D (descriptor structs) and the array copies
 * are not hooked: see docs/launch-paths.md. ---- */

static size_t span2d(size_t pitch, size_t width, size_t height)
{
	return height ? pitch * (height - 1) + width : 0;
}

static const void *drv_stream(CUstream s, bool per_thread)
{
	return per_thread && s == NULL ? (const void *)CU_STREAM_PER_THREAD : (const void *)s;
}

#define DRV_COPY_REALS(X)                                                            \
	X(cuMemcpy, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpy_ptds, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpyAsync, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyAsync_ptsz, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr d, const void *s, size_t n), (d, s, n)) \
	X(cuMemcpyHtoD_v2_ptds, CUresult, (CUdeviceptr d, const void *s, size_t n), (d, s, n)) \
	X(cuMemcpyDtoH_v2, CUresult, (void *d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpyDtoH_v2_ptds, CUresult, (void *d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpyDtoD_v2, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpyDtoD_v2_ptds, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n)) \
	X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr d, const void *s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyHtoDAsync_v2_ptsz, CUresult, (CUdeviceptr d, const void *s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyDtoHAsync_v2, CUresult, (void *d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyDtoHAsync_v2_ptsz, CUresult, (void *d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyDtoDAsync_v2_ptsz, CUresult, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm), (d, s, n, strm)) \
	X(cuMemcpyPeer, CUresult, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n)) \
	X(cuMemcpyPeer_ptds, CUresult, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n)) \
	X(cuMemcpyPeerAsync, CUresult, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream strm), (d, dc, s, sc, n, strm)) \
	X(cuMemcpyPeerAsync_ptsz, CUresult, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream strm), (d, dc, s, sc, n, strm)) \
	X(cuMemsetD8_v2, CUresult, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n)) \
	X(cuMemsetD8_v2_ptds, CUresult, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n)) \
	X(cuMemsetD8Async, CUresult, (CUdeviceptr d, unsigned char v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD8Async_ptsz, CUresult, (CUdeviceptr d, unsigned char v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD2D8_v2, CUresult, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D8_v2_ptds, CUresult, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D8Async, CUresult, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \
	X(cuMemsetD2D8Async_ptsz, CUresult, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \
	X(cuMemsetD16_v2, CUresult, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n)) \
	X(cuMemsetD16_v2_ptds, CUresult, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n)) \
	X(cuMemsetD16Async, CUresult, (CUdeviceptr d, unsigned short v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD16Async_ptsz, CUresult, (CUdeviceptr d, unsigned short v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD2D16_v2, CUresult, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D16_v2_ptds, CUresult, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D16Async, CUresult, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \
	X(cuMemsetD2D16Async_ptsz, CUresult, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \
	X(cuMemsetD32_v2, CUresult, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n)) \
	X(cuMemsetD32_v2_ptds, CUresult, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n)) \
	X(cuMemsetD32Async, CUresult, (CUdeviceptr d, unsigned int v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD32Async_ptsz, CUresult, (CUdeviceptr d, unsigned int v, size_t n, CUstream strm), (d, v, n, strm)) \
	X(cuMemsetD2D32_v2, CUresult, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D32_v2_ptds, CUresult, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h), (d, pitch, v, w, h)) \
	X(cuMemsetD2D32Async, CUresult, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \
	X(cuMemsetD2D32Async_ptsz, CUresult, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream strm), (d, pitch, v, w, h, strm)) \

#define DRV_COPY_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDA, name, ret, params, args)
DRV_COPY_REALS(DRV_COPY_REAL)

HOOK_EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	real_cuMemcpy_t real = real_cuMemcpy();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpy);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpy", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	real_cuMemcpy_ptds_t real = real_cuMemcpy_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpy_ptds);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpy_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyAsync_t real = real_cuMemcpyAsync();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyAsync);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyAsync", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyAsync_ptsz_t real = real_cuMemcpyAsync_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyAsync_ptsz);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyAsync_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
	real_cuMemcpyHtoD_v2_t real = real_cuMemcpyHtoD_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyHtoD_v2);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyHtoD_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{
	real_cuMemcpyHtoD_v2_ptds_t real = real_cuMemcpyHtoD_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyHtoD_v2_ptds);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyHtoD_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
	real_cuMemcpyDtoH_v2_t real = real_cuMemcpyDtoH_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoH_v2);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoH_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{
	real_cuMemcpyDtoH_v2_ptds_t real = real_cuMemcpyDtoH_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoH_v2_ptds);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoH_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	real_cuMemcpyDtoD_v2_t real = real_cuMemcpyDtoD_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoD_v2);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoD_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	real_cuMemcpyDtoD_v2_ptds_t real = real_cuMemcpyDtoD_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoD_v2_ptds);
	if (!hook_begin())
		return real(d, s, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoD_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream strm)
{
	real_cuMemcpyHtoDAsync_v2_t real = real_cuMemcpyHtoDAsync_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyHtoDAsync_v2);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyHtoDAsync_v2", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream strm)
{
	real_cuMemcpyHtoDAsync_v2_ptsz_t real = real_cuMemcpyHtoDAsync_v2_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyHtoDAsync_v2_ptsz);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyHtoDAsync_v2_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyDtoHAsync_v2_t real = real_cuMemcpyDtoHAsync_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoHAsync_v2);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoHAsync_v2", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyDtoHAsync_v2_ptsz_t real = real_cuMemcpyDtoHAsync_v2_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoHAsync_v2_ptsz);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoHAsync_v2_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyDtoDAsync_v2_t real = real_cuMemcpyDtoDAsync_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoDAsync_v2);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoDAsync_v2", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream strm)
{
	real_cuMemcpyDtoDAsync_v2_ptsz_t real = real_cuMemcpyDtoDAsync_v2_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyDtoDAsync_v2_ptsz);
	if (!hook_begin())
		return real(d, s, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyDtoDAsync_v2_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, s, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
	real_cuMemcpyPeer_t real = real_cuMemcpyPeer();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyPeer);
	if (!hook_begin())
		return real(d, dc, s, sc, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyPeer", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, dc, s, sc, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
	real_cuMemcpyPeer_ptds_t real = real_cuMemcpyPeer_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyPeer_ptds);
	if (!hook_begin())
		return real(d, dc, s, sc, n);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyPeer_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, dc, s, sc, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream strm)
{
	real_cuMemcpyPeerAsync_t real = real_cuMemcpyPeerAsync();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyPeerAsync);
	if (!hook_begin())
		return real(d, dc, s, sc, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyPeerAsync", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, dc, s, sc, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream strm)
{
	real_cuMemcpyPeerAsync_ptsz_t real = real_cuMemcpyPeerAsync_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemcpyPeerAsync_ptsz);
	if (!hook_begin())
		return real(d, dc, s, sc, n, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cuMemcpyPeerAsync_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)s, n, VMEM_ACCESS_R, "src");
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, dc, s, sc, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
	real_cuMemsetD8_v2_t real = real_cuMemsetD8_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD8_v2);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD8_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n)
{
	real_cuMemsetD8_v2_ptds_t real = real_cuMemsetD8_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD8_v2_ptds);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD8_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream strm)
{
	real_cuMemsetD8Async_t real = real_cuMemsetD8Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD8Async);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD8Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream strm)
{
	real_cuMemsetD8Async_ptsz_t real = real_cuMemsetD8Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD8Async_ptsz);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD8Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
	real_cuMemsetD2D8_v2_t real = real_cuMemsetD2D8_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D8_v2);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D8_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
	real_cuMemsetD2D8_v2_ptds_t real = real_cuMemsetD2D8_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D8_v2_ptds);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D8_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D8Async_t real = real_cuMemsetD2D8Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D8Async);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D8Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D8Async_ptsz_t real = real_cuMemsetD2D8Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D8Async_ptsz);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D8Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{
	real_cuMemsetD16_v2_t real = real_cuMemsetD16_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD16_v2);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD16_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 2 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(2 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n)
{
	real_cuMemsetD16_v2_ptds_t real = real_cuMemsetD16_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD16_v2_ptds);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD16_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 2 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(2 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream strm)
{
	real_cuMemsetD16Async_t real = real_cuMemsetD16Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD16Async);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD16Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 2 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(2 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream strm)
{
	real_cuMemsetD16Async_ptsz_t real = real_cuMemsetD16Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD16Async_ptsz);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD16Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 2 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(2 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{
	real_cuMemsetD2D16_v2_t real = real_cuMemsetD2D16_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D16_v2);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D16_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 2 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 2 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{
	real_cuMemsetD2D16_v2_ptds_t real = real_cuMemsetD2D16_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D16_v2_ptds);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D16_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 2 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 2 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D16Async_t real = real_cuMemsetD2D16Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D16Async);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D16Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 2 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 2 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D16Async_ptsz_t real = real_cuMemsetD2D16Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D16Async_ptsz);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D16Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 2 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 2 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{
	real_cuMemsetD32_v2_t real = real_cuMemsetD32_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD32_v2);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD32_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 4 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(4 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n)
{
	real_cuMemsetD32_v2_ptds_t real = real_cuMemsetD32_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD32_v2_ptds);
	if (!hook_begin())
		return real(d, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD32_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 4 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(4 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream strm)
{
	real_cuMemsetD32Async_t real = real_cuMemsetD32Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD32Async);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD32Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 4 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(4 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream strm)
{
	real_cuMemsetD32Async_ptsz_t real = real_cuMemsetD32Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD32Async_ptsz);
	if (!hook_begin())
		return real(d, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD32Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, 4 * n, VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(4 * n));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, v, n, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h)
{
	real_cuMemsetD2D32_v2_t real = real_cuMemsetD2D32_v2();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D32_v2);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D32_v2", drv_stream(NULL, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 4 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 4 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h)
{
	real_cuMemsetD2D32_v2_ptds_t real = real_cuMemsetD2D32_v2_ptds();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D32_v2_ptds);
	if (!hook_begin())
		return real(d, pitch, v, w, h);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D32_v2_ptds", drv_stream(NULL, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 4 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 4 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D32Async_t real = real_cuMemsetD2D32Async();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D32Async);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D32Async", drv_stream(strm, false));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 4 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 4 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream strm)
{
	real_cuMemsetD2D32Async_ptsz_t real = real_cuMemsetD2D32Async_ptsz();
	hook_call_t c;
	CUresult st;

	if (!real)
		return MISSING(cuMemsetD2D32Async_ptsz);
	if (!hook_begin())
		return real(d, pitch, v, w, h, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cuMemsetD2D32Async_ptsz", drv_stream(strm, true));
	hook_call_ref(&c, (const void *)(uintptr_t)d, span2d(pitch, 4 * w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu", (size_t)(span2d(pitch, 4 * w, h)));
	st = hook_call_prepare(&c) == cudaSuccess ? real(d, pitch, v, w, h, strm) : CUDA_ERROR_OUT_OF_MEMORY;
	hook_call_finish(&c);
	hook_end();
	return st;
}

/* ---- handles and pointer queries on vmem's memory ----
 *
 * vmem's memory is a virtual range whose physical chunks vmem maps,
 * unmaps and recycles behind the application's back.  A handle that lets
 * another process (or another mapping) reach those chunks would see
 * bytes vmem later moves away, and a query that answers with the chunk
 * a byte happens to sit in would expose vmem's internals.  So, for
 * memory inside vmem's range:
 *   - cuIpcGetMemHandle, cuMemRetainAllocationHandle and
 *     cuMemGetAddressRange are refused with CUDA_ERROR_NOT_SUPPORTED and
 *     one line naming VMEM_DISABLE=1 (cuMemExportToShareableHandle needs
 *     a handle, which only cuMemRetainAllocationHandle could give);
 *   - cuPointerGetAttribute(s) answer what holds for a cudaMalloc
 *     allocation (device memory, its address, vmem's device, mapped, not
 *     managed, not IPC capable, no shareable handle types, read-write) and
 *     refuse the rest (the range, the context, the mapping, ids).
 * Memory outside the range passes through.  See docs/launch-paths.md. */

static bool vmem_ptr(CUdeviceptr p)
{
	return runtime_active() && runtime_owns((uintptr_t)p);
}

static CUresult refuse(const char *api, CUdeviceptr p, const char *what)
{
	vmem_error("%s(0x%llx): refused: this memory is managed by vmem, which moves it between "
		   "device and host, so %s. Run this process with VMEM_DISABLE=1 (vmem off) to use "
		   "%s", api, (unsigned long long)p, what, api);
	return CUDA_ERROR_NOT_SUPPORTED;
}

HOOK_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	real_cuIpcGetMemHandle_t real = real_cuIpcGetMemHandle();
	CUresult st;

	if (!hook_begin())
		return real ? real(h, p) : MISSING(cuIpcGetMemHandle);
	if (vmem_ptr(p))
		st = refuse("cuIpcGetMemHandle", p, "it cannot be shared with another process");
	else
		st = real ? real(h, p) : MISSING(cuIpcGetMemHandle);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	real_cuMemRetainAllocationHandle_t real = real_cuMemRetainAllocationHandle();
	CUresult st;

	if (!hook_begin())
		return real ? real(h, addr) : MISSING(cuMemRetainAllocationHandle);
	if (vmem_ptr((CUdeviceptr)(uintptr_t)addr))
		st = refuse("cuMemRetainAllocationHandle", (CUdeviceptr)(uintptr_t)addr,
			    "the physical memory behind it cannot be handed out (to export, "
			    "share or map)");
	else
		st = real ? real(h, addr) : MISSING(cuMemRetainAllocationHandle);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	real_cuMemGetAddressRange_v2_t real = real_cuMemGetAddressRange_v2();
	CUresult st;

	if (!hook_begin())
		return real ? real(base, size, p) : MISSING(cuMemGetAddressRange_v2);
	if (vmem_ptr(p))
		st = refuse("cuMemGetAddressRange", p,
			    "the driver's answer would describe vmem's chunk, not the allocation");
	else
		st = real ? real(base, size, p) : MISSING(cuMemGetAddressRange_v2);
	hook_end();
	return st;
}

/* One attribute of vmem memory: CUDA_SUCCESS with *data set, or the
 * refusal for an attribute that would describe vmem's chunks. */
static CUresult vmem_attr(void *data, CUpointer_attribute attr, CUdeviceptr p, const char *api)
{
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		return CUDA_ERROR_INVALID_VALUE;   /* as for any device allocation */
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = runtime_device();
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;   /* always usable: vmem maps it before any seen use */
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = CU_MEM_HANDLE_TYPE_NONE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned long long *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		return CUDA_SUCCESS;
	default: {
		char what[96];

		snprintf(what, sizeof(what), "attribute %d would describe vmem's chunk, not the "
			 "allocation", (int)attr);
		return refuse(api, p, what);
	}
	}
}

HOOK_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
	real_cuPointerGetAttribute_t real = real_cuPointerGetAttribute();
	CUresult st;

	if (!hook_begin())
		return real ? real(data, attr, p) : MISSING(cuPointerGetAttribute);
	if (vmem_ptr(p))
		st = vmem_attr(data, attr, p, "cuPointerGetAttribute");
	else
		st = real ? real(data, attr, p) : MISSING(cuPointerGetAttribute);
	hook_end();
	return st;
}

HOOK_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
					    CUdeviceptr p)
{
	real_cuPointerGetAttributes_t real = real_cuPointerGetAttributes();
	CUresult st = CUDA_SUCCESS;

	if (!hook_begin())
		return real ? real(n, attrs, data, p) : MISSING(cuPointerGetAttributes);
	if (!vmem_ptr(p)) {
		st = real ? real(n, attrs, data, p) : MISSING(cuPointerGetAttributes);
	} else if (!attrs || !data) {
		st = CUDA_ERROR_INVALID_VALUE;
	} else {
		for (unsigned int i = 0; i < n && st == CUDA_SUCCESS; i++) {
			if (attrs[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
				/* the plural call answers NULL rather than failing */
				if (data[i])
					*(void **)data[i] = NULL;
				continue;
			}
			st = vmem_attr(data[i], attrs[i], p, "cuPointerGetAttributes");
		}
	}
	hook_end();
	return st;
}

/* ---- kernel handles: recorded so that a CUkernel launched as a
 * CUfunction is scanned with the kernel's layout (interpose/scan.h) ---- */

HOOK_EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
	real_cuLibraryGetKernel_t real = real_cuLibraryGetKernel();
	CUresult st;

	if (!real)
		return MISSING(cuLibraryGetKernel);
	st = real(k, lib, name);
	if (st == CUDA_SUCCESS && k)
		scan_handle_add(*k);
	return st;
}

HOOK_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *k, unsigned int n, CUlibrary lib)
{
	real_cuLibraryEnumerateKernels_t real = real_cuLibraryEnumerateKernels();
	CUresult st;

	if (!real)
		return MISSING(cuLibraryEnumerateKernels);
	st = real(k, n, lib);
	for (unsigned int i = 0; st == CUDA_SUCCESS && k && i < n; i++)
		scan_handle_add(k[i]);
	return st;
}

/* ---- entry points ---- */

/* One wrapper vmem hands out: the name asked for, the real function it
 * replaces, and how to recognise the request when pointers differ. */
typedef struct {
	const char *symbol;       /* base name as requested ("cuMemAlloc") */
	void *wrapper;
	hook_sym_t *real;
	int min_version;          /* name match: only from this CUDA version */
	int stream_mode;          /* name match: 0 any, 1 legacy/default only, 2 per-thread only */
} drv_wrap_t;

static const drv_wrap_t drv_wraps[] = {
	{ "cuMemAlloc", (void *)cuMemAlloc_v2, &hook_sym_cuMemAlloc_v2, 3020, 0 },
	{ "cuMemAllocAsync", (void *)cuMemAllocAsync, &hook_sym_cuMemAllocAsync, 11020, 1 },
	{ "cuMemAllocPitch", (void *)cuMemAllocPitch_v2, &hook_sym_cuMemAllocPitch_v2, 3020, 0 },
	{ "cuMemFree", (void *)cuMemFree_v2, &hook_sym_cuMemFree_v2, 3020, 0 },
	{ "cuMemFreeAsync", (void *)cuMemFreeAsync, &hook_sym_cuMemFreeAsync, 11020, 1 },
	{ "cuMemGetInfo", (void *)cuMemGetInfo_v2, &hook_sym_cuMemGetInfo_v2, 3020, 0 },
	{ "cuMemCreate", (void *)cuMemCreate, &hook_sym_cuMemCreate, 10020, 0 },
	{ "cuMemMap", (void *)cuMemMap, &hook_sym_cuMemMap, 10020, 0 },
	{ "cuMemUnmap", (void *)cuMemUnmap, &hook_sym_cuMemUnmap, 10020, 0 },
	{ "cuMemRelease", (void *)cuMemRelease, &hook_sym_cuMemRelease, 10020, 0 },
	{ "cuMemAddressReserve", (void *)cuMemAddressReserve, &hook_sym_cuMemAddressReserve, 10020, 0 },
	{ "cuMemAddressFree", (void *)cuMemAddressFree, &hook_sym_cuMemAddressFree, 10020, 0 },
	{ "cuMemSetAccess", (void *)cuMemSetAccess, &hook_sym_cuMemSetAccess, 10020, 0 },
	{ "cuMemExportToShareableHandle", (void *)cuMemExportToShareableHandle,
	  &hook_sym_cuMemExportToShareableHandle, 10020, 0 },
	{ "cuLaunchKernel", (void *)cuLaunchKernel, &hook_sym_cuLaunchKernel, 4000, 1 },
	{ "cuLaunchKernel", (void *)cuLaunchKernel_ptsz, &hook_sym_cuLaunchKernel_ptsz, 7000, 2 },
	{ "cuLaunchKernelEx", (void *)cuLaunchKernelEx, &hook_sym_cuLaunchKernelEx, 11060, 1 },
	{ "cuLaunchKernelEx", (void *)cuLaunchKernelEx_ptsz, &hook_sym_cuLaunchKernelEx_ptsz, 11060, 2 },
	{ "cuLibraryGetKernel", (void *)cuLibraryGetKernel, &hook_sym_cuLibraryGetKernel, 12000, 0 },
	{ "cuLibraryEnumerateKernels", (void *)cuLibraryEnumerateKernels,
	  &hook_sym_cuLibraryEnumerateKernels, 12040, 0 },
	{ "cuIpcGetMemHandle", (void *)cuIpcGetMemHandle, &hook_sym_cuIpcGetMemHandle, 4010, 0 },
	{ "cuMemRetainAllocationHandle", (void *)cuMemRetainAllocationHandle,
	  &hook_sym_cuMemRetainAllocationHandle, 11000, 0 },
	{ "cuMemGetAddressRange", (void *)cuMemGetAddressRange_v2,
	  &hook_sym_cuMemGetAddressRange_v2, 3020, 0 },
	{ "cuPointerGetAttribute", (void *)cuPointerGetAttribute, &hook_sym_cuPointerGetAttribute,
	  4000, 0 },
	{ "cuPointerGetAttributes", (void *)cuPointerGetAttributes,
	  &hook_sym_cuPointerGetAttributes, 7000, 0 },
	/* copies and sets: the legacy-stream call, then its per-thread twin */
	{ "cuMemcpy", (void *)cuMemcpy, &hook_sym_cuMemcpy, 4000, 1 },
	{ "cuMemcpy", (void *)cuMemcpy_ptds, &hook_sym_cuMemcpy_ptds, 7000, 2 },
	{ "cuMemcpyAsync", (void *)cuMemcpyAsync, &hook_sym_cuMemcpyAsync, 4000, 1 },
	{ "cuMemcpyAsync", (void *)cuMemcpyAsync_ptsz, &hook_sym_cuMemcpyAsync_ptsz, 7000, 2 },
	{ "cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2, &hook_sym_cuMemcpyHtoD_v2, 3020, 1 },
	{ "cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2_ptds, &hook_sym_cuMemcpyHtoD_v2_ptds, 7000, 2 },
	{ "cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2, &hook_sym_cuMemcpyDtoH_v2, 3020, 1 },
	{ "cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2_ptds, &hook_sym_cuMemcpyDtoH_v2_ptds, 7000, 2 },
	{ "cuMemcpyDtoD", (void *)cuMemcpyDtoD_v2, &hook_sym_cuMemcpyDtoD_v2, 3020, 1 },
	{ "cuMemcpyDtoD", (void *)cuMemcpyDtoD_v2_ptds, &hook_sym_cuMemcpyDtoD_v2_ptds, 7000, 2 },
	{ "cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync_v2, &hook_sym_cuMemcpyHtoDAsync_v2, 3020, 1 },
	{ "cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync_v2_ptsz, &hook_sym_cuMemcpyHtoDAsync_v2_ptsz, 7000, 2 },
	{ "cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync_v2, &hook_sym_cuMemcpyDtoHAsync_v2, 3020, 1 },
	{ "cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync_v2_ptsz, &hook_sym_cuMemcpyDtoHAsync_v2_ptsz, 7000, 2 },
	{ "cuMemcpyDtoDAsync", (void *)cuMemcpyDtoDAsync_v2, &hook_sym_cuMemcpyDtoDAsync_v2, 3020, 1 },
	{ "cuMemcpyDtoDAsync", (void *)cuMemcpyDtoDAsync_v2_ptsz, &hook_sym_cuMemcpyDtoDAsync_v2_ptsz, 7000, 2 },
	{ "cuMemcpyPeer", (void *)cuMemcpyPeer, &hook_sym_cuMemcpyPeer, 4000, 1 },
	{ "cuMemcpyPeer", (void *)cuMemcpyPeer_ptds, &hook_sym_cuMemcpyPeer_ptds, 7000, 2 },
	{ "cuMemcpyPeerAsync", (void *)cuMemcpyPeerAsync, &hook_sym_cuMemcpyPeerAsync, 4000, 1 },
	{ "cuMemcpyPeerAsync", (void *)cuMemcpyPeerAsync_ptsz, &hook_sym_cuMemcpyPeerAsync_ptsz, 7000, 2 },
	{ "cuMemsetD8", (void *)cuMemsetD8_v2, &hook_sym_cuMemsetD8_v2, 3020, 1 },
	{ "cuMemsetD8", (void *)cuMemsetD8_v2_ptds, &hook_sym_cuMemsetD8_v2_ptds, 7000, 2 },
	{ "cuMemsetD8Async", (void *)cuMemsetD8Async, &hook_sym_cuMemsetD8Async, 3020, 1 },
	{ "cuMemsetD8Async", (void *)cuMemsetD8Async_ptsz, &hook_sym_cuMemsetD8Async_ptsz, 7000, 2 },
	{ "cuMemsetD2D8", (void *)cuMemsetD2D8_v2, &hook_sym_cuMemsetD2D8_v2, 3020, 1 },
	{ "cuMemsetD2D8", (void *)cuMemsetD2D8_v2_ptds, &hook_sym_cuMemsetD2D8_v2_ptds, 7000, 2 },
	{ "cuMemsetD2D8Async", (void *)cuMemsetD2D8Async, &hook_sym_cuMemsetD2D8Async, 3020, 1 },
	{ "cuMemsetD2D8Async", (void *)cuMemsetD2D8Async_ptsz, &hook_sym_cuMemsetD2D8Async_ptsz, 7000, 2 },
	{ "cuMemsetD16", (void *)cuMemsetD16_v2, &hook_sym_cuMemsetD16_v2, 3020, 1 },
	{ "cuMemsetD16", (void *)cuMemsetD16_v2_ptds, &hook_sym_cuMemsetD16_v2_ptds, 7000, 2 },
	{ "cuMemsetD16Async", (void *)cuMemsetD16Async, &hook_sym_cuMemsetD16Async, 3020, 1 },
	{ "cuMemsetD16Async", (void *)cuMemsetD16Async_ptsz, &hook_sym_cuMemsetD16Async_ptsz, 7000, 2 },
	{ "cuMemsetD2D16", (void *)cuMemsetD2D16_v2, &hook_sym_cuMemsetD2D16_v2, 3020, 1 },
	{ "cuMemsetD2D16", (void *)cuMemsetD2D16_v2_ptds, &hook_sym_cuMemsetD2D16_v2_ptds, 7000, 2 },
	{ "cuMemsetD2D16Async", (void *)cuMemsetD2D16Async, &hook_sym_cuMemsetD2D16Async, 3020, 1 },
	{ "cuMemsetD2D16Async", (void *)cuMemsetD2D16Async_ptsz, &hook_sym_cuMemsetD2D16Async_ptsz, 7000, 2 },
	{ "cuMemsetD32", (void *)cuMemsetD32_v2, &hook_sym_cuMemsetD32_v2, 3020, 1 },
	{ "cuMemsetD32", (void *)cuMemsetD32_v2_ptds, &hook_sym_cuMemsetD32_v2_ptds, 7000, 2 },
	{ "cuMemsetD32Async", (void *)cuMemsetD32Async, &hook_sym_cuMemsetD32Async, 3020, 1 },
	{ "cuMemsetD32Async", (void *)cuMemsetD32Async_ptsz, &hook_sym_cuMemsetD32Async_ptsz, 7000, 2 },
	{ "cuMemsetD2D32", (void *)cuMemsetD2D32_v2, &hook_sym_cuMemsetD2D32_v2, 3020, 1 },
	{ "cuMemsetD2D32", (void *)cuMemsetD2D32_v2_ptds, &hook_sym_cuMemsetD2D32_v2_ptds, 7000, 2 },
	{ "cuMemsetD2D32Async", (void *)cuMemsetD2D32Async, &hook_sym_cuMemsetD2D32Async, 3020, 1 },
	{ "cuMemsetD2D32Async", (void *)cuMemsetD2D32Async_ptsz, &hook_sym_cuMemsetD2D32Async_ptsz, 7000, 2 },
};

/* `flags`: CU_GET_PROC_ADDRESS_* (cudaEnable* has the same values). */
static void *drv_wrap(const char *symbol, void *fn, int version, unsigned long long flags)
{
	int mode = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 2 : 1;
	const drv_wrap_t *by_name = NULL;

	if (!symbol || !fn)
		return fn;
	for (size_t i = 0; i < sizeof(drv_wraps) / sizeof(drv_wraps[0]); i++) {
		const drv_wrap_t *w = &drv_wraps[i];

		if (strcmp(symbol, w->symbol) != 0)
			continue;
		if (hook_resolve(w->real) == fn)
			return w->wrapper;
		if (version >= w->min_version && (w->stream_mode == 0 || w->stream_mode == mode))
			by_name = w;
	}
	/* The driver may hand out an internal alias of the exported
	 * function; for these the name, version and stream mode pin the ABI. */
	if (by_name && hook_resolve(by_name->real))
		return by_name->wrapper;
	return fn;
}

HOOK_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *qst)
{
	real_cuGetProcAddress_v2_t real = real_cuGetProcAddress_v2();
	CUresult st;

	if (!real)
		return MISSING(cuGetProcAddress_v2);
	st = real(sym, pfn, ver, flags, qst);
	/* Entry points are handed out even while vmem is disabled: the
	 * wrappers themselves pass through then. */
	if (st == CUDA_SUCCESS && pfn)
		*pfn = drv_wrap(sym, *pfn, ver, flags);
	return st;
}

HOOK_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *sym, void **pfn, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *qst)
{
	real_cudaGetDriverEntryPoint_t real = real_cudaGetDriverEntryPoint();
	cudaError_t st;

	if (!real)
		return (cudaError_t)hook_missing("cudaGetDriverEntryPoint", cudaErrorSymbolNotFound);
	st = real(sym, pfn, flags, qst);
	if (st == cudaSuccess && pfn)
		*pfn = drv_wrap(sym, *pfn, CUDA_VERSION, flags);
	return st;
}

HOOK_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **pfn,
							 unsigned int ver, unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *qst)
{
	real_cudaGetDriverEntryPointByVersion_t real = real_cudaGetDriverEntryPointByVersion();
	cudaError_t st;

	if (!real)
		return (cudaError_t)hook_missing("cudaGetDriverEntryPointByVersion", cudaErrorSymbolNotFound);
	st = real(sym, pfn, ver, flags, qst);
	if (st == cudaSuccess && pfn)
		*pfn = drv_wrap(sym, *pfn, (int)ver, flags);
	return st;
}
