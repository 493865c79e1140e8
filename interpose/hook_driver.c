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
 */
#include <inttypes.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
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
		hook_launch_refs(&c, f, params, extra, HOOK_LAUNCH_DRIVER);                   \
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
		hook_launch_refs(&c, f, params, extra, HOOK_LAUNCH_DRIVER);                   \
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
