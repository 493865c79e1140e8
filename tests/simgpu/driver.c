/* tests/simgpu/driver.c - the simulated libcuda.so.1 (driver API).
 *
 * SONAME libcuda.so.1 and, like the toolkit's stub, no symbol versions.
 * Functions are defined under the names cuda.h gives them, so cuMemAlloc
 * here is cuMemAlloc_v2, exactly what a program built with CUDA 13 headers
 * references.  The VMM calls map onto libsimgpu's address map with real
 * page protection; kernels come from the host registry.
 *
 * cuGetProcAddress answers from DRIVER_PROCS below (by the base name such
 * as "cuMemCreate", or the exact exported name such as "cuMemAlloc_v2");
 * the same table answers cudaGetDriverEntryPoint* in the simulated cudart,
 * registered with the core when this library loads.
 *
 * Thread-safety: as the core; the current context is thread-local.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "core.h"

#define API __attribute__((visibility("default")))
#define SIM_VERSION 13000

static CUresult from_status(simgpu_status_t st)
{
	switch (st) {
	case SIMGPU_OK:
		return CUDA_SUCCESS;
	case SIMGPU_ENOMEM:
		return CUDA_ERROR_OUT_OF_MEMORY;
	case SIMGPU_EHANDLE:
		return CUDA_ERROR_INVALID_HANDLE;
	case SIMGPU_ENOTREADY:
		return CUDA_ERROR_NOT_READY;
	case SIMGPU_ENOTFOUND:
		return CUDA_ERROR_NOT_FOUND;
	case SIMGPU_ECAPTURE_UNSUPPORTED:
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	case SIMGPU_ECAPTURE_INVALIDATED:
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	case SIMGPU_ECAPTURE_IMPLICIT:
		return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	case SIMGPU_ECAPTURE_ISOLATION:
		return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
	case SIMGPU_ECAPTURE_MERGE:
		return CUDA_ERROR_STREAM_CAPTURE_MERGE;
	case SIMGPU_ECAPTURE_UNMATCHED:
		return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	case SIMGPU_ECAPTURE_WRONG_THREAD:
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	case SIMGPU_ECAPTURED_EVENT:
		return CUDA_ERROR_CAPTURED_EVENT;
	case SIMGPU_EILLEGAL_STATE:
		return CUDA_ERROR_ILLEGAL_STATE;
	case SIMGPU_EINVAL:
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* ---- errors ---- */

#define DRIVER_ERRORS(X) \
	X(CUDA_SUCCESS, "no error") \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
	X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
	X(CUDA_ERROR_FILE_NOT_FOUND, "file not found") \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
	X(CUDA_ERROR_NOT_READY, "device not ready") \
	X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
	X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure") \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
	X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
	X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
	X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
	X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
	X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
	X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
	X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream") \
	X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream") \
	X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread") \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

API CUresult cuGetErrorString(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(code, text) case code: *str = text; return CUDA_SUCCESS;
	DRIVER_ERRORS(X)
#undef X
	default:
		*str = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}

API CUresult cuGetErrorName(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(code, text) case code: *str = #code; return CUDA_SUCCESS;
	DRIVER_ERRORS(X)
#undef X
	default:
		*str = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* ---- initialisation, device, context ---- */

/* The one device's primary context; its address is the CUcontext. */
static int primary_ctx;
static __thread CUcontext current_ctx = (CUcontext)&primary_ctx;

API CUresult cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	simgpu_init();
	return CUDA_SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = SIM_VERSION;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	const simgpu_model_t *m = simgpu_model();

	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, "Simulated GPU (", (size_t)len);
	name[len - 1] = '\0';
	strncat(name, m->name, (size_t)len - strlen(name) - 1);
	strncat(name, ")", (size_t)len - strlen(name) - 1);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = simgpu_model()->mem_bytes;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
	const simgpu_model_t *m = simgpu_model();

	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		*v = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		*v = 64;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		*v = 0x7fffffff;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		*v = 65535;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		*v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
		*v = 48 << 10;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*v = simgpu_model_sm_count(m);
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*v = m->cc_major;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*v = m->cc_minor;
		break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		*v = m->copy_engines;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
		*v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		*v = simgpu_host_vmm_supported();
		break;
	default:
		*v = 0;
		break;
	}
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*ctx = (CUcontext)&primary_ctx;
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags,
					int *active)
{
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = 0;
	*active = 1;
	return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	*ctx = current_ctx;
	return CUDA_SUCCESS;
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (ctx && ctx != (CUcontext)&primary_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	current_ctx = ctx;
	return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = 0;
	return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
	return from_status(simgpu_device_sync());
}

/* ---- memory ---- */

API CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	if (!free_bytes || !total_bytes)
		return CUDA_ERROR_INVALID_VALUE;
	simgpu_mem_info(free_bytes, total_bytes);
	return CUDA_SUCCESS;
}

API CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytes)
{
	void *p;
	simgpu_status_t st;

	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	st = simgpu_mem_alloc(&p, bytes);
	if (st == SIMGPU_OK)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return from_status(st);
}

API CUresult cuMemFree(CUdeviceptr dptr)
{
	return from_status(simgpu_mem_free((void *)(uintptr_t)dptr));
}

API CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size,
				  CUdeviceptr dptr)
{
	void *b;
	size_t s;
	simgpu_status_t st = simgpu_mem_range((void *)(uintptr_t)dptr, &b, &s);

	if (st != SIMGPU_OK)
		return CUDA_ERROR_NOT_FOUND;
	if (base)
		*base = (CUdeviceptr)(uintptr_t)b;
	if (size)
		*size = s;
	return CUDA_SUCCESS;
}

API CUresult cuMemAllocHost(void **pp, size_t bytes)
{
	if (!pp || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_host_alloc(pp, bytes));
}

API CUresult cuMemFreeHost(void *p)
{
	return from_status(simgpu_host_free(p));
}

API CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
	(void)flags;
	if (simgpu_host_register(p, bytes))
		return p && bytes ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED :
				    CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

API CUresult cuMemHostUnregister(void *p)
{
	if (simgpu_host_unregister(p))
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	return CUDA_SUCCESS;
}

#define DPTR(d) ((void *)(uintptr_t)(d))
#define PTDS ((CUstream)SIMGPU_STREAM_PER_THREAD)
/* _ptsz: a NULL stream is the calling thread's per-thread default stream */
#define PTSZ(s) ((s) ? (s) : PTDS)

/* Copies and sets.  The synchronous copies to or from host memory make
 * the host wait; device-to-device copies and the sets are asynchronous
 * with respect to the host, as CUDA documents ("API synchronization
 * behavior").  Each has its per-thread default stream form (_ptds, and
 * _ptsz for the asynchronous ones). */
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream s,
		     bool sync, const char *op)
{
	return from_status(simgpu_copy(DPTR(dst), src, n, SIMGPU_COPY_H2D,
				       s, sync, op));
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s,
		     bool sync, const char *op)
{
	return from_status(simgpu_copy(dst, DPTR(src), n, SIMGPU_COPY_D2H,
				       s, sync, op));
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s,
		     const char *op)
{
	return from_status(simgpu_copy(DPTR(dst), DPTR(src), n,
				       SIMGPU_COPY_D2D, s, false, op));
}

static CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n,
			CUstream s, bool sync, const char *op)
{
	return from_status(simgpu_copy(DPTR(dst), DPTR(src), n,
				       SIMGPU_COPY_DEFAULT, s, sync, op));
}

API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	return htod(dst, src, n, NULL, true, "cuMemcpyHtoD_v2");
}

API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	return htod(dst, src, n, PTDS, true, "cuMemcpyHtoD_v2_ptds");
}

API CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	return dtoh(dst, src, n, NULL, true, "cuMemcpyDtoH_v2");
}

API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return dtoh(dst, src, n, PTDS, true, "cuMemcpyDtoH_v2_ptds");
}

API CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return dtod(dst, src, n, NULL, "cuMemcpyDtoD_v2");
}

API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return dtod(dst, src, n, PTDS, "cuMemcpyDtoD_v2_ptds");
}

API CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n,
			       CUstream s)
{
	return htod(dst, src, n, s, false, "cuMemcpyHtoDAsync_v2");
}

API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src,
				       size_t n, CUstream s)
{
	return htod(dst, src, n, PTSZ(s), false, "cuMemcpyHtoDAsync_v2_ptsz");
}

API CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n,
			       CUstream s)
{
	return dtoh(dst, src, n, s, false, "cuMemcpyDtoHAsync_v2");
}

API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n,
				       CUstream s)
{
	return dtoh(dst, src, n, PTSZ(s), false, "cuMemcpyDtoHAsync_v2_ptsz");
}

API CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
			       CUstream s)
{
	return dtod(dst, src, n, s, "cuMemcpyDtoDAsync_v2");
}

API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src,
				       size_t n, CUstream s)
{
	return dtod(dst, src, n, PTSZ(s), "cuMemcpyDtoDAsync_v2_ptsz");
}

/* Unified addressing: the direction comes from where the pointers live. */
API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return unified(dst, src, n, NULL, true, "cuMemcpy");
}

API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return unified(dst, src, n, PTDS, true, "cuMemcpy_ptds");
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
			   CUstream s)
{
	return unified(dst, src, n, s, false, "cuMemcpyAsync");
}

API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
				CUstream s)
{
	return unified(dst, src, n, PTSZ(s), false, "cuMemcpyAsync_ptsz");
}

API CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
	return from_status(simgpu_memset(DPTR(dst), v, n, NULL, false,
					 "cuMemsetD8_v2"));
}

API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n)
{
	return from_status(simgpu_memset(DPTR(dst), v, n, PTDS, false,
					 "cuMemsetD8_v2_ptds"));
}

API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n,
			     CUstream s)
{
	return from_status(simgpu_memset(DPTR(dst), v, n, s, false,
					 "cuMemsetD8Async"));
}

API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n,
				  CUstream s)
{
	return from_status(simgpu_memset(DPTR(dst), v, n, PTSZ(s), false,
					 "cuMemsetD8Async_ptsz"));
}

API CUresult cuMemsetD32(CUdeviceptr dst, unsigned int v, size_t n)
{
	return from_status(simgpu_memset32(DPTR(dst), v, n, NULL,
					   "cuMemsetD32_v2"));
}

API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n)
{
	return from_status(simgpu_memset32(DPTR(dst), v, n, PTDS,
					   "cuMemsetD32_v2_ptds"));
}

API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n,
			      CUstream s)
{
	return from_status(simgpu_memset32(DPTR(dst), v, n, s,
					   "cuMemsetD32Async"));
}

API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n,
				   CUstream s)
{
	return from_status(simgpu_memset32(DPTR(dst), v, n, PTSZ(s),
					   "cuMemsetD32Async_ptsz"));
}

/* IPC: a cudaMalloc-style block of this process has a handle (the same
 * as the runtime's: magic, pid, address); VMM memory has none. */
API CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr dptr)
{
	struct {
		uint32_t magic;
		int32_t pid;
		uint64_t base, size;
	} v;
	void *base;
	size_t size;
	uint64_t vmm;

	if (!h || !dptr)
		return CUDA_ERROR_INVALID_VALUE;
	if (simgpu_mem_range(DPTR(dptr), &base, &size) != SIMGPU_OK ||
	    simgpu_vmm_handle_at(DPTR(dptr), &vmm) == SIMGPU_OK)
		return CUDA_ERROR_INVALID_VALUE;
	memset(h, 0, sizeof(*h));
	v.magic = 0x53474950u;
	v.pid = (int32_t)getpid();
	v.base = (uint64_t)(uintptr_t)base;
	v.size = size;
	memcpy(h->reserved, &v, sizeof(v));
	return CUDA_SUCCESS;
}

/* ---- virtual memory management ---- */

/* The device (ordinal 0), or host memory where the device can map it
 * (HOST: id ignored; HOST_NUMA: node 0, the simulator's only). */
static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	switch (prop->location.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return prop->location.id != 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		if (!simgpu_host_vmm_supported())
			return CUDA_ERROR_NOT_SUPPORTED;
		if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && prop->location.id != 0)
			return CUDA_ERROR_INVALID_VALUE;
		return prop->requestedHandleTypes ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

API CUresult cuMemGetAllocationGranularity(size_t *gran,
					   const CUmemAllocationProp *prop,
					   CUmemAllocationGranularity_flags opt)
{
	CUresult r = check_prop(prop);

	(void)opt;
	if (!gran)
		return CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		return r;
	*gran = SIMGPU_GRANULARITY;
	return CUDA_SUCCESS;
}

API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
				 CUdeviceptr addr, unsigned long long flags)
{
	void *p;
	simgpu_status_t st;

	if (!ptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	st = simgpu_vmm_reserve(&p, size, align, DPTR(addr));
	if (st == SIMGPU_OK)
		*ptr = (CUdeviceptr)(uintptr_t)p;
	return from_status(st);
}

API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	return from_status(simgpu_vmm_free(DPTR(ptr), size));
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			 const CUmemAllocationProp *prop,
			 unsigned long long flags)
{
	CUresult r = check_prop(prop);
	uint64_t h;
	simgpu_status_t st;

	if (!handle || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		return r;
	st = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? simgpu_vmm_create(&h, size) :
	     simgpu_vmm_create_host(&h, size);
	if (st == SIMGPU_OK)
		*handle = h;
	return from_status(st);
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	return from_status(simgpu_vmm_release(handle));
}

/* The handle of the allocation mapped at addr, with a reference that
 * needs its own cuMemRelease. */
API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
					 void *addr)
{
	uint64_t h;
	simgpu_status_t st;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	st = simgpu_vmm_retain(addr, &h);
	if (st == SIMGPU_OK)
		*handle = h;
	return from_status(st);
}

/* A POSIX file descriptor onto the chunk (the only handle type the
 * simulator has; a Linux GPU's default).  Others: not supported. */
API CUresult cuMemExportToShareableHandle(void *shareable,
					  CUmemGenericAllocationHandle handle,
					  CUmemAllocationHandleType type,
					  unsigned long long flags)
{
	int fd;
	simgpu_status_t st;

	if (!shareable || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	st = simgpu_vmm_export(handle, &fd);
	if (st == SIMGPU_OK)
		*(int *)shareable = fd;
	return from_status(st);
}

API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		      CUmemGenericAllocationHandle handle,
		      unsigned long long flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_vmm_map(DPTR(ptr), size, offset, handle));
}

API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	return from_status(simgpu_vmm_unmap(DPTR(ptr), size));
}

API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
			    const CUmemAccessDesc *desc, size_t count)
{
	int prot = -1;
	size_t i;

	if (!desc || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].location.id != 0)
			return CUDA_ERROR_INVALID_DEVICE;
		switch (desc[i].flags) {
		case CU_MEM_ACCESS_FLAGS_PROT_NONE:
			prot = 0;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READ:
			prot = 1;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
			prot = 3;
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return from_status(simgpu_vmm_set_access(DPTR(ptr), size, prot));
}

/* ---- streams and events ---- */

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_stream_create((void **)s, flags, 0));
}

API CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags,
					int priority)
{
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_stream_create((void **)s, flags, priority));
}

API CUresult cuStreamDestroy(CUstream s)
{
	return from_status(simgpu_stream_destroy(s));
}

API CUresult cuStreamSynchronize(CUstream s)
{
	return from_status(simgpu_stream_sync(s));
}

API CUresult cuStreamQuery(CUstream s)
{
	return from_status(simgpu_stream_query(s));
}

API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	(void)flags;
	return from_status(simgpu_stream_wait_event(s, e));
}

API CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_event_create((void **)e, flags));
}

API CUresult cuEventRecord(CUevent e, CUstream s)
{
	return from_status(simgpu_event_record(e, s));
}

API CUresult cuEventQuery(CUevent e)
{
	return from_status(simgpu_event_query(e));
}

API CUresult cuEventSynchronize(CUevent e)
{
	return from_status(simgpu_event_sync(e));
}

API CUresult cuEventDestroy(CUevent e)
{
	return from_status(simgpu_event_destroy(e));
}

API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
	(void)flags;
	return from_status(simgpu_event_record(e, s));
}

/* ---- stream capture and graphs (core_graph.c) ---- */

API CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
	return from_status(simgpu_capture_begin(s, (int)mode));
}

API CUresult cuStreamEndCapture(CUstream s, CUgraph *graph)
{
	if (!graph)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_capture_end(s, (void **)graph));
}

API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
	int st = 0;
	simgpu_status_t r;

	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	r = simgpu_capture_info(s, &st, NULL);
	*status = (CUstreamCaptureStatus)st;
	return from_status(r);
}

API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	int m;

	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	m = (int)*mode;
	if (simgpu_capture_exchange_mode(&m))
		return CUDA_ERROR_INVALID_VALUE;
	*mode = (CUstreamCaptureMode)m;
	return CUDA_SUCCESS;
}

API CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph,
				unsigned long long flags)
{
	(void)flags;
	if (!exec)
		return CUDA_ERROR_INVALID_VALUE;
	return from_status(simgpu_graph_instantiate((void **)exec, graph));
}

API CUresult cuGraphLaunch(CUgraphExec exec, CUstream s)
{
	return from_status(simgpu_graph_launch(exec, s));
}

API CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	return from_status(simgpu_graph_exec_destroy(exec));
}

API CUresult cuGraphDestroy(CUgraph graph)
{
	return from_status(simgpu_graph_destroy(graph));
}

/* ---- libraries, modules and kernels: any image loads; kernels come
 * from the registry by name.  CUkernel and CUfunction handles are both
 * the registry entry, so cudart's cudaKernel_t works here too. ---- */

static const uint32_t image_token = 0x53474c42u;

API CUresult cuLibraryLoadData(CUlibrary *lib, const void *code,
			       CUjit_option *jo, void **jv, unsigned int njo,
			       CUlibraryOption *lo, void **lv, unsigned int nlo)
{
	(void)jo;
	(void)jv;
	(void)njo;
	(void)lo;
	(void)lv;
	(void)nlo;
	if (!lib || !code)
		return CUDA_ERROR_INVALID_VALUE;
	*lib = (CUlibrary)&image_token;
	return CUDA_SUCCESS;
}

API CUresult cuLibraryUnload(CUlibrary lib)
{
	return (const void *)lib == &image_token ? CUDA_SUCCESS :
						   CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
	const simgpu_kernel_t *kern;

	if (!k || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((const void *)lib != &image_token)
		return CUDA_ERROR_INVALID_HANDLE;
	kern = simgpu_kernel_find(name);
	if (!kern)
		return CUDA_ERROR_NOT_FOUND;
	*k = (CUkernel)kern;
	return CUDA_SUCCESS;
}

API CUresult cuKernelGetFunction(CUfunction *f, CUkernel k)
{
	if (!f)
		return CUDA_ERROR_INVALID_VALUE;
	if (!simgpu_kernel_from_handle(k))
		return CUDA_ERROR_INVALID_HANDLE;
	*f = (CUfunction)k;
	return CUDA_SUCCESS;
}

API CUresult cuModuleLoadData(CUmodule *mod, const void *image)
{
	if (!mod || !image)
		return CUDA_ERROR_INVALID_VALUE;
	*mod = (CUmodule)&image_token;
	return CUDA_SUCCESS;
}

API CUresult cuModuleUnload(CUmodule mod)
{
	return (const void *)mod == &image_token ? CUDA_SUCCESS :
						   CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
	return cuLibraryGetKernel((CUkernel *)f, (CUlibrary)mod, name);
}

API CUresult cuFuncGetName(const char **name, CUfunction f)
{
	const simgpu_kernel_t *k = simgpu_kernel_from_handle(f);

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = k->name;
	return CUDA_SUCCESS;
}

API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset,
				size_t *size)
{
	const simgpu_kernel_t *k = simgpu_kernel_from_handle(f);
	size_t off, sz;

	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (simgpu_kernel_param(k, index, &off, &sz))
		return CUDA_ERROR_INVALID_VALUE;
	if (offset)
		*offset = off;
	if (size)
		*size = sz;
	return CUDA_SUCCESS;
}

API CUresult cuKernelGetParamInfo(CUkernel kern, size_t index, size_t *offset,
				  size_t *size)
{
	return cuFuncGetParamInfo((CUfunction)kern, index, offset, size);
}

API CUresult cuKernelGetName(const char **name, CUkernel kern)
{
	return cuFuncGetName(name, (CUfunction)kern);
}

#define MAX_PARAMS 32

API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
			    unsigned int gz, unsigned int bx, unsigned int by,
			    unsigned int bz, unsigned int shmem, CUstream s,
			    void **params, void **extra)
{
	const simgpu_kernel_t *k = simgpu_kernel_from_handle(f);
	void *packed[MAX_PARAMS];
	uint64_t threads = (uint64_t)gx * gy * gz * ((uint64_t)bx * by * bz);

	(void)shmem;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (threads == 0 || (uint64_t)bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (!params && extra) {
		/* a packed parameter buffer: point into it at each offset */
		char *buf = NULL;
		size_t bufsize = 0, i, off, sz;

		for (i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				bufsize = *(size_t *)extra[i + 1];
			else
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (!buf || k->nparams > MAX_PARAMS)
			return CUDA_ERROR_INVALID_VALUE;
		for (i = 0; i < (size_t)k->nparams; i++) {
			simgpu_kernel_param(k, i, &off, &sz);
			if (off + sz > bufsize)
				return CUDA_ERROR_INVALID_VALUE;
			packed[i] = buf + off;
		}
		params = packed;
	}
	return from_status(simgpu_launch(k, params, threads, s));
}

/* ---- entry points ---- */

#define STR(x) #x
#define XSTR(x) STR(x)
/* base name (as asked for by cuGetProcAddress) and exported name */
#define P(fn) { #fn, XSTR(fn), (void *)fn }

CUresult cuGetProcAddress_v1(const char *symbol, void **pfn, int version,
			     cuuint64_t flags) __asm__("cuGetProcAddress");

static const struct {
	const char *name, *symbol;
	void *fn;
} procs[] = {
	/* per-thread default stream forms, by their exported names */
	{ "cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD_v2_ptds", (void *)cuMemcpyHtoD_v2_ptds },
	{ "cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoH_v2_ptds", (void *)cuMemcpyDtoH_v2_ptds },
	{ "cuMemcpyDtoD_v2_ptds", "cuMemcpyDtoD_v2_ptds", (void *)cuMemcpyDtoD_v2_ptds },
	{ "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync_v2_ptsz", (void *)cuMemcpyHtoDAsync_v2_ptsz },
	{ "cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoHAsync_v2_ptsz", (void *)cuMemcpyDtoHAsync_v2_ptsz },
	{ "cuMemcpyDtoDAsync_v2_ptsz", "cuMemcpyDtoDAsync_v2_ptsz", (void *)cuMemcpyDtoDAsync_v2_ptsz },
	{ "cuMemcpy_ptds", "cuMemcpy_ptds", (void *)cuMemcpy_ptds },
	{ "cuMemcpyAsync_ptsz", "cuMemcpyAsync_ptsz", (void *)cuMemcpyAsync_ptsz },
	{ "cuMemsetD8_v2_ptds", "cuMemsetD8_v2_ptds", (void *)cuMemsetD8_v2_ptds },
	{ "cuMemsetD32_v2_ptds", "cuMemsetD32_v2_ptds", (void *)cuMemsetD32_v2_ptds },
	{ "cuMemsetD8Async_ptsz", "cuMemsetD8Async_ptsz", (void *)cuMemsetD8Async_ptsz },
	{ "cuMemsetD32Async_ptsz", "cuMemsetD32Async_ptsz", (void *)cuMemsetD32Async_ptsz },
	P(cuGetErrorString), P(cuGetErrorName), P(cuInit),
	P(cuDriverGetVersion), P(cuDeviceGet), P(cuDeviceGetCount),
	P(cuDeviceGetName), P(cuDeviceTotalMem), P(cuDeviceGetAttribute),
	P(cuDevicePrimaryCtxRetain), P(cuDevicePrimaryCtxRelease),
	P(cuDevicePrimaryCtxGetState), P(cuCtxGetCurrent), P(cuCtxSetCurrent),
	P(cuCtxGetDevice), P(cuCtxSynchronize), P(cuMemGetInfo),
	P(cuMemAlloc), P(cuMemFree), P(cuMemGetAddressRange),
	P(cuMemAllocHost), P(cuMemFreeHost), P(cuMemHostRegister),
	P(cuMemHostUnregister), P(cuMemcpyHtoD), P(cuMemcpyDtoH),
	P(cuMemcpyDtoD), P(cuMemcpyAsync), P(cuMemsetD8),
	P(cuMemcpyHtoDAsync), P(cuMemcpyDtoHAsync), P(cuMemcpyDtoDAsync),
	P(cuMemcpy), P(cuMemsetD32), P(cuMemsetD8Async), P(cuMemsetD32Async),
	P(cuIpcGetMemHandle), P(cuMemRetainAllocationHandle),
	P(cuMemExportToShareableHandle), P(cuStreamCreateWithPriority),
	P(cuEventRecordWithFlags), P(cuStreamBeginCapture),
	P(cuStreamEndCapture), P(cuStreamIsCapturing),
	P(cuThreadExchangeStreamCaptureMode), P(cuGraphInstantiate),
	P(cuGraphLaunch), P(cuGraphExecDestroy), P(cuGraphDestroy),
	P(cuMemGetAllocationGranularity), P(cuMemAddressReserve),
	P(cuMemAddressFree), P(cuMemCreate), P(cuMemRelease), P(cuMemMap),
	P(cuMemUnmap), P(cuMemSetAccess), P(cuStreamCreate),
	P(cuStreamDestroy), P(cuStreamSynchronize), P(cuStreamQuery),
	P(cuStreamWaitEvent), P(cuEventCreate), P(cuEventRecord),
	P(cuEventQuery), P(cuEventSynchronize), P(cuEventDestroy),
	P(cuLibraryLoadData), P(cuLibraryUnload), P(cuLibraryGetKernel),
	P(cuKernelGetFunction), P(cuModuleLoadData), P(cuModuleUnload),
	P(cuModuleGetFunction), P(cuFuncGetParamInfo), P(cuFuncGetName),
	P(cuKernelGetParamInfo), P(cuKernelGetName), P(cuLaunchKernel),
	{ "cuGetProcAddress", "cuGetProcAddress_v2", (void *)cuGetProcAddress },
};

/* The function for a name: the base name gives the current version
 * (cuMemAlloc -> cuMemAlloc_v2, as a CUDA 13 driver does; cuGetProcAddress
 * before 12.0 gives the old four-argument one), the exported name itself.
 * Names are matched exactly. */
static void *proc_lookup(const char *name, int version)
{
	size_t i;

	if (!name)
		return NULL;
	if (!strcmp(name, "cuGetProcAddress") && version < 12000)
		return (void *)cuGetProcAddress_v1;
	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (!strcmp(name, procs[i].name) ||
		    !strcmp(name, procs[i].symbol))
			return procs[i].fn;
	}
	return NULL;
}

/* With CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the per-thread
 * default stream form of the call when it has one (the exported name
 * plus _ptds or _ptsz), as the driver answers. */
static void *proc_lookup_flags(const char *name, int version, cuuint64_t flags)
{
	size_t i;

	if (name && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
		for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
			char pt[128];
			void *fn;

			if (strcmp(name, procs[i].name) && strcmp(name, procs[i].symbol))
				continue;
			snprintf(pt, sizeof(pt), "%s_ptds", procs[i].symbol);
			if ((fn = proc_lookup(pt, version)))
				return fn;
			snprintf(pt, sizeof(pt), "%s_ptsz", procs[i].symbol);
			if ((fn = proc_lookup(pt, version)))
				return fn;
			break;
		}
	}
	return proc_lookup(name, version);
}

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
			      cuuint64_t flags,
			      CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = proc_lookup_flags(symbol, version, flags);
	if (status)
		*status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS :
				 CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

API CUresult cuGetProcAddress_v1(const char *symbol, void **pfn, int version,
				 cuuint64_t flags)
{
	return cuGetProcAddress(symbol, pfn, version, flags, NULL);
}

__attribute__((constructor)) static void driver_ctor(void)
{
	simgpu_set_driver_proc(proc_lookup);
}
