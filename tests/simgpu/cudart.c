/* tests/simgpu/cudart.c - the simulated libcudart.so.13.
 *
 * Same SONAME and symbol version node (libcudart.so.13) as the real
 * runtime, so a program linked against /usr/local/cuda/lib64/libcudart.so
 * runs on it through LD_LIBRARY_PATH.  Each call is a thin translation to
 * libsimgpu (core.h); none calls another public CUDA symbol, so an
 * LD_PRELOADed shim sees only the application's calls.  Functions not
 * defined here do not exist (cudart.map exports what is defined), so a
 * program that needs more fails at load time instead of misbehaving.
 *
 * Thread-safety: as the core; the last error is thread-local, as in CUDA.
 */
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "core.h"

#define API __attribute__((visibility("default")))
#define SIM_VERSION 13000

static __thread cudaError_t last_error;

/* Records a failure as the thread's last error and returns it. */
static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess)
		last_error = e;
	return e;
}

static cudaError_t from_status(simgpu_status_t st)
{
	switch (st) {
	case SIMGPU_OK:
		return cudaSuccess;
	case SIMGPU_ENOMEM:
		return ret(cudaErrorMemoryAllocation);
	case SIMGPU_EHANDLE:
		return ret(cudaErrorInvalidResourceHandle);
	case SIMGPU_ENOTREADY:
		/* not an error: CUDA does not make it the last error */
		return cudaErrorNotReady;
	case SIMGPU_ENOTFOUND:
		return ret(cudaErrorSymbolNotFound);
	case SIMGPU_ECAPTURE_UNSUPPORTED:
		return ret(cudaErrorStreamCaptureUnsupported);
	case SIMGPU_ECAPTURE_INVALIDATED:
		return ret(cudaErrorStreamCaptureInvalidated);
	case SIMGPU_ECAPTURE_IMPLICIT:
		return ret(cudaErrorStreamCaptureImplicit);
	case SIMGPU_ECAPTURE_ISOLATION:
		return ret(cudaErrorStreamCaptureIsolation);
	case SIMGPU_ECAPTURE_MERGE:
		return ret(cudaErrorStreamCaptureMerge);
	case SIMGPU_ECAPTURE_UNMATCHED:
		return ret(cudaErrorStreamCaptureUnmatched);
	case SIMGPU_ECAPTURE_WRONG_THREAD:
		return ret(cudaErrorStreamCaptureWrongThread);
	case SIMGPU_ECAPTURED_EVENT:
		return ret(cudaErrorCapturedEvent);
	case SIMGPU_EILLEGAL_STATE:
		return ret(cudaErrorIllegalState);
	case SIMGPU_EINVAL:
	default:
		return ret(cudaErrorInvalidValue);
	}
}

/* ---- errors ---- */

#define CUDART_ERRORS(X) \
	X(cudaSuccess, "no error") \
	X(cudaErrorInvalidValue, "invalid argument") \
	X(cudaErrorMemoryAllocation, "out of memory") \
	X(cudaErrorInitializationError, "initialization error") \
	X(cudaErrorInvalidConfiguration, "invalid configuration argument") \
	X(cudaErrorInvalidPitchValue, "invalid pitch argument") \
	X(cudaErrorInvalidSymbol, "invalid device symbol") \
	X(cudaErrorInvalidDevicePointer, "invalid device pointer") \
	X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy") \
	X(cudaErrorNoDevice, "no CUDA-capable device is detected") \
	X(cudaErrorInvalidDevice, "invalid device ordinal") \
	X(cudaErrorInvalidDeviceFunction, "invalid device function") \
	X(cudaErrorFileNotFound, "file not found") \
	X(cudaErrorInvalidResourceHandle, "invalid resource handle") \
	X(cudaErrorSymbolNotFound, "named symbol not found") \
	X(cudaErrorNotReady, "device not ready") \
	X(cudaErrorIllegalAddress, "an illegal memory access was encountered") \
	X(cudaErrorLaunchFailure, "unspecified launch failure") \
	X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
	X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
	X(cudaErrorNotSupported, "operation not supported") \
	X(cudaErrorIllegalState, "the operation cannot be performed in the present state") \
	X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
	X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
	X(cudaErrorStreamCaptureMerge, "operation would result in a merge of separate capture sequences") \
	X(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began") \
	X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream") \
	X(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream") \
	X(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream") \
	X(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another thread") \
	X(cudaErrorUnknown, "unknown error")

API const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
#define X(code, text) case code: return text;
	CUDART_ERRORS(X)
#undef X
	default:
		return "unrecognized error code";
	}
}

API const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
#define X(code, text) case code: return #code;
	CUDART_ERRORS(X)
#undef X
	default:
		return "cudaErrorUnknown";
	}
}

API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

API cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

/* ---- versions and device ---- */

API cudaError_t cudaDriverGetVersion(int *v)
{
	if (!v)
		return ret(cudaErrorInvalidValue);
	*v = SIM_VERSION;
	return cudaSuccess;
}

API cudaError_t cudaRuntimeGetVersion(int *v)
{
	if (!v)
		return ret(cudaErrorInvalidValue);
	*v = SIM_VERSION;
	return cudaSuccess;
}

API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	simgpu_init();
	*count = 1;
	return cudaSuccess;
}

API cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return ret(cudaErrorInvalidValue);
	*device = 0;
	return cudaSuccess;
}

API cudaError_t cudaSetDevice(int device)
{
	simgpu_init();
	return device == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice);
}

API cudaError_t cudaInitDevice(int device, unsigned int dflags,
			       unsigned int flags)
{
	(void)dflags;
	(void)flags;
	return cudaSetDevice(device);
}

API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	(void)flags;
	return cudaSuccess;
}

API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	if (!flags)
		return ret(cudaErrorInvalidValue);
	*flags = 0;
	return cudaSuccess;
}

API cudaError_t cudaDeviceSynchronize(void)
{
	return from_status(simgpu_device_sync());
}

static void device_name(char *buf, size_t n, const simgpu_model_t *m)
{
	const char *name = "Simulated GPU";

	if (!strcmp(m->name, "titanx"))
		name = "Simulated NVIDIA GeForce GTX TITAN X";
	else if (!strcmp(m->name, "v100"))
		name = "Simulated Tesla V100-SXM2-16GB";
	else if (!strcmp(m->name, "h100"))
		name = "Simulated NVIDIA H100 80GB HBM3";
	strncpy(buf, name, n - 1);
	buf[n - 1] = '\0';
}

/* L2 size of each model (bytes), for properties and attributes. */
static int l2_bytes(const simgpu_model_t *m)
{
	if (!strcmp(m->name, "v100"))
		return 6 << 20;
	if (!strcmp(m->name, "h100"))
		return 50 << 20;
	return 3 << 20;
}

API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
	const simgpu_model_t *m = simgpu_model();

	if (!p)
		return ret(cudaErrorInvalidValue);
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	memset(p, 0, sizeof(*p));
	device_name(p->name, sizeof(p->name), m);
	memcpy(p->uuid.bytes, "simgpu-device-00", 16);
	p->totalGlobalMem = m->mem_bytes;
	p->sharedMemPerBlock = 48 << 10;
	p->regsPerBlock = 65536;
	p->warpSize = 32;
	p->memPitch = (size_t)1 << 31;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = 1024;
	p->maxThreadsDim[1] = 1024;
	p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 0x7fffffff;
	p->maxGridSize[1] = 65535;
	p->maxGridSize[2] = 65535;
	p->totalConstMem = 64 << 10;
	p->major = m->cc_major;
	p->minor = m->cc_minor;
	p->textureAlignment = 512;
	p->texturePitchAlignment = 32;
	p->multiProcessorCount = simgpu_model_sm_count(m);
	p->canMapHostMemory = 1;
	p->concurrentKernels = 1;
	p->asyncEngineCount = m->copy_engines;
	p->unifiedAddressing = 1;
	p->memoryBusWidth = 384;
	p->l2CacheSize = l2_bytes(m);
	p->maxThreadsPerMultiProcessor = 2048;
	p->streamPrioritiesSupported = 1;
	p->sharedMemPerMultiprocessor = 96 << 10;
	p->regsPerMultiprocessor = 65536;
	p->sharedMemPerBlockOptin = 48 << 10;
	p->maxBlocksPerMultiProcessor = 32;
	p->hostRegisterSupported = 1;
	p->memoryPoolsSupported = 1;
	return cudaSuccess;
}

API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
				       int device)
{
	const simgpu_model_t *m = simgpu_model();

	if (!value)
		return ret(cudaErrorInvalidValue);
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	switch (attr) {
	case cudaDevAttrMaxThreadsPerBlock:
	case cudaDevAttrMaxBlockDimX:
	case cudaDevAttrMaxBlockDimY:
		*value = 1024;
		break;
	case cudaDevAttrMaxBlockDimZ:
		*value = 64;
		break;
	case cudaDevAttrMaxGridDimX:
		*value = 0x7fffffff;
		break;
	case cudaDevAttrMaxGridDimY:
	case cudaDevAttrMaxGridDimZ:
		*value = 65535;
		break;
	case cudaDevAttrWarpSize:
		*value = 32;
		break;
	case cudaDevAttrMaxSharedMemoryPerBlock:
	case cudaDevAttrMaxSharedMemoryPerBlockOptin:
		*value = 48 << 10;
		break;
	case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
		*value = 96 << 10;
		break;
	case cudaDevAttrMultiProcessorCount:
		*value = simgpu_model_sm_count(m);
		break;
	case cudaDevAttrComputeCapabilityMajor:
		*value = m->cc_major;
		break;
	case cudaDevAttrComputeCapabilityMinor:
		*value = m->cc_minor;
		break;
	case cudaDevAttrL2CacheSize:
		*value = l2_bytes(m);
		break;
	case cudaDevAttrAsyncEngineCount:
		*value = m->copy_engines;
		break;
	case cudaDevAttrMaxThreadsPerMultiProcessor:
		*value = 2048;
		break;
	case cudaDevAttrUnifiedAddressing:
	case cudaDevAttrConcurrentKernels:
	case cudaDevAttrCanMapHostMemory:
	case cudaDevAttrHostRegisterSupported:
	case cudaDevAttrMemoryPoolsSupported:
		*value = 1;
		break;
	default:
		/* features the simulator does not have */
		*value = 0;
		break;
	}
	return cudaSuccess;
}

/* ---- device memory ---- */

API cudaError_t cudaMalloc(void **p, size_t size)
{
	if (!p)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_mem_alloc(p, size));
}

API cudaError_t cudaFree(void *p)
{
	return from_status(simgpu_mem_free(p));
}

/* Stream-ordered allocation (simgpu_mem_alloc_async in core.h): a block
 * freed on a stream is reused by later work on that stream at once, by
 * other streams once ordered after the free. */
API cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t stream)
{
	if (!p)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_mem_alloc_async(p, size, stream));
}

API cudaError_t cudaFreeAsync(void *p, cudaStream_t stream)
{
	return from_status(simgpu_mem_free_async(p, stream));
}

/* _ptsz: a NULL stream is the calling thread's per-thread default stream */
#define PTSZ(s) ((s) ? (s) : (cudaStream_t)SIMGPU_STREAM_PER_THREAD)

API cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t stream)
{
	return cudaMallocAsync(p, size, PTSZ(stream));
}

API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t stream)
{
	return cudaFreeAsync(p, PTSZ(stream));
}

/* ---- IPC: handles exist so a shim can be seen refusing them.  A handle
 * names a cudaMalloc block of this process (magic, pid, address); memory
 * mapped with the VMM calls has none (cudaErrorInvalidValue), as in
 * CUDA.  Opening is only possible in another process, which the
 * simulator does not support: cudaErrorNotSupported there, and
 * cudaErrorInvalidResourceHandle in the process that made the handle. */
#define IPC_MAGIC 0x53474950u   /* "SGIP" */

struct ipc_handle {
	uint32_t magic;
	int32_t pid;
	uint64_t base;
	uint64_t size;
};

API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *dev)
{
	struct ipc_handle h;
	void *base;
	size_t size;
	uint64_t vmm;

	if (!handle || !dev)
		return ret(cudaErrorInvalidValue);
	if (simgpu_mem_range(dev, &base, &size) != SIMGPU_OK)
		return ret(cudaErrorInvalidValue);
	if (simgpu_vmm_handle_at(dev, &vmm) == SIMGPU_OK)
		return ret(cudaErrorInvalidValue);  /* not cudaMalloc memory */
	memset(handle, 0, sizeof(*handle));
	h.magic = IPC_MAGIC;
	h.pid = (int32_t)getpid();
	h.base = (uint64_t)(uintptr_t)base;
	h.size = size;
	memcpy(handle->reserved, &h, sizeof(h));
	return cudaSuccess;
}

API cudaError_t cudaIpcOpenMemHandle(void **dev, cudaIpcMemHandle_t handle,
				     unsigned int flags)
{
	struct ipc_handle h;

	(void)flags;
	if (!dev)
		return ret(cudaErrorInvalidValue);
	memcpy(&h, handle.reserved, sizeof(h));
	if (h.magic != IPC_MAGIC)
		return ret(cudaErrorInvalidValue);
	if (h.pid == (int32_t)getpid())
		return ret(cudaErrorInvalidResourceHandle);
	return ret(cudaErrorNotSupported);
}

API cudaError_t cudaIpcCloseMemHandle(void *dev)
{
	(void)dev;
	return ret(cudaErrorInvalidValue);  /* nothing can have been opened */
}

API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	if (!free_bytes || !total_bytes)
		return ret(cudaErrorInvalidValue);
	simgpu_mem_info(free_bytes, total_bytes);
	return cudaSuccess;
}

API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a,
					 const void *ptr)
{
	if (!a)
		return ret(cudaErrorInvalidValue);
	memset(a, 0, sizeof(*a));
	a->device = 0;
	if (simgpu_in_device_space(ptr)) {
		a->type = cudaMemoryTypeDevice;
		a->devicePointer = (void *)ptr;
	} else if (simgpu_is_pinned(ptr, 1)) {
		a->type = cudaMemoryTypeHost;
		a->devicePointer = (void *)ptr;
		a->hostPointer = (void *)ptr;
	} else {
		a->type = cudaMemoryTypeUnregistered;
	}
	return cudaSuccess;
}

/* ---- host memory ---- */

API cudaError_t cudaMallocHost(void **p, size_t size)
{
	if (!p)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_host_alloc(p, size));
}

API cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	(void)flags;
	return cudaMallocHost(p, size);
}

API cudaError_t cudaFreeHost(void *p)
{
	return from_status(simgpu_host_free(p));
}

API cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	(void)flags;
	if (!p || !size)
		return ret(cudaErrorInvalidValue);
	switch (simgpu_host_register(p, size)) {
	case SIMGPU_OK:
		return cudaSuccess;
	case SIMGPU_EINVAL:
		return ret(cudaErrorHostMemoryAlreadyRegistered);
	case SIMGPU_ECAPTURE_UNSUPPORTED:
		return ret(cudaErrorStreamCaptureUnsupported);
	default:
		return ret(cudaErrorMemoryAllocation);
	}
}

API cudaError_t cudaHostUnregister(void *p)
{
	switch (simgpu_host_unregister(p)) {
	case SIMGPU_OK:
		return cudaSuccess;
	case SIMGPU_ECAPTURE_UNSUPPORTED:
		return ret(cudaErrorStreamCaptureUnsupported);
	default:
		return ret(cudaErrorHostMemoryNotRegistered);
	}
}

API cudaError_t cudaHostGetDevicePointer(void **pdev, void *phost,
					 unsigned int flags)
{
	if (!pdev || flags || !simgpu_is_pinned(phost, 1))
		return ret(cudaErrorInvalidValue);
	*pdev = phost;
	return cudaSuccess;
}

/* ---- copies and sets ---- */

static int copy_kind(enum cudaMemcpyKind kind, simgpu_copy_kind_t *k)
{
	switch (kind) {
	case cudaMemcpyHostToHost:
		*k = SIMGPU_COPY_H2H;
		return 0;
	case cudaMemcpyHostToDevice:
		*k = SIMGPU_COPY_H2D;
		return 0;
	case cudaMemcpyDeviceToHost:
		*k = SIMGPU_COPY_D2H;
		return 0;
	case cudaMemcpyDeviceToDevice:
		*k = SIMGPU_COPY_D2D;
		return 0;
	case cudaMemcpyDefault:
		*k = SIMGPU_COPY_DEFAULT;
		return 0;
	default:
		return -1;
	}
}

static cudaError_t copy(void *dst, const void *src, size_t n,
			enum cudaMemcpyKind kind, cudaStream_t s, bool sync,
			const char *op)
{
	simgpu_copy_kind_t k;

	if (copy_kind(kind, &k))
		return ret(cudaErrorInvalidMemcpyDirection);
	return from_status(simgpu_copy(dst, src, n, k, s, sync, op));
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
			   enum cudaMemcpyKind kind)
{
	return copy(dst, src, n, kind, NULL, true, "cudaMemcpy");
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
				enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy(dst, src, n, kind, s, false, "cudaMemcpyAsync");
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src,
			   size_t spitch, size_t width, size_t height,
			   enum cudaMemcpyKind kind, cudaStream_t s, bool sync,
			   const char *op)
{
	simgpu_copy_kind_t k;

	if (copy_kind(kind, &k))
		return ret(cudaErrorInvalidMemcpyDirection);
	if (width > dpitch || width > spitch)
		return ret(cudaErrorInvalidPitchValue);
	return from_status(simgpu_copy_2d(dst, dpitch, src, spitch, width,
					  height, k, s, sync, op));
}

API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src,
			     size_t spitch, size_t width, size_t height,
			     enum cudaMemcpyKind kind)
{
	return copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL,
		       true, "cudaMemcpy2D");
}

API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
				  size_t spitch, size_t width, size_t height,
				  enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy_2d(dst, dpitch, src, spitch, width, height, kind, s,
		       false, "cudaMemcpy2DAsync");
}

API cudaError_t cudaMemset(void *p, int value, size_t n)
{
	return from_status(simgpu_memset(p, value, n, NULL, false,
					 "cudaMemset"));
}

API cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
	return from_status(simgpu_memset(p, value, n, s, false,
					 "cudaMemsetAsync"));
}

/* The per-thread default stream forms (nvcc --default-stream per-thread
 * and CUDA_API_PER_THREAD_DEFAULT_STREAM compile the calls to these):
 * _ptds on that stream, _ptsz with a NULL stream meaning it. */
API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n,
				enum cudaMemcpyKind kind)
{
	return copy(dst, src, n, kind, (cudaStream_t)SIMGPU_STREAM_PER_THREAD,
		    true, "cudaMemcpy_ptds");
}

API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
				     enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy(dst, src, n, kind, PTSZ(s), false, "cudaMemcpyAsync_ptsz");
}

API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src,
				  size_t spitch, size_t width, size_t height,
				  enum cudaMemcpyKind kind)
{
	return copy_2d(dst, dpitch, src, spitch, width, height, kind,
		       (cudaStream_t)SIMGPU_STREAM_PER_THREAD, true,
		       "cudaMemcpy2D_ptds");
}

API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch,
				       const void *src, size_t spitch,
				       size_t width, size_t height,
				       enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy_2d(dst, dpitch, src, spitch, width, height, kind, PTSZ(s),
		       false, "cudaMemcpy2DAsync_ptsz");
}

API cudaError_t cudaMemset_ptds(void *p, int value, size_t n)
{
	return from_status(simgpu_memset(p, value, n,
					 SIMGPU_STREAM_PER_THREAD, false,
					 "cudaMemset_ptds"));
}

API cudaError_t cudaMemsetAsync_ptsz(void *p, int value, size_t n,
				     cudaStream_t s)
{
	return from_status(simgpu_memset(p, value, n, PTSZ(s), false,
					 "cudaMemsetAsync_ptsz"));
}

/* ---- streams ---- */

API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s,
					     unsigned int flags, int priority)
{
	if (!s)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_stream_create((void **)s, flags, priority));
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	return cudaStreamCreateWithPriority(s, flags, 0);
}

API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	return cudaStreamCreateWithPriority(s, 0, 0);
}

API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	return from_status(simgpu_stream_destroy(s));
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return from_status(simgpu_stream_sync(s));
}

API cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return from_status(simgpu_stream_query(s));
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e,
				    unsigned int flags)
{
	(void)flags;
	return from_status(simgpu_stream_wait_event(s, e));
}

API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	return cudaStreamSynchronize(PTSZ(s));
}

API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s)
{
	return cudaStreamQuery(PTSZ(s));
}

API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e,
					 unsigned int flags)
{
	return cudaStreamWaitEvent(PTSZ(s), e, flags);
}

API cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
	if (!flags)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_stream_info(s, flags, NULL));
}

API cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
	if (!priority)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_stream_info(s, NULL, priority));
}

API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return cudaSuccess;
}

/* ---- stream capture and graphs (core_graph.c): ops issued to a
 * capturing stream are recorded and replayed by cudaGraphLaunch. */

API cudaError_t cudaStreamBeginCapture(cudaStream_t s,
				       enum cudaStreamCaptureMode mode)
{
	return from_status(simgpu_capture_begin(s, (int)mode));
}

API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s,
					    enum cudaStreamCaptureMode mode)
{
	return cudaStreamBeginCapture(PTSZ(s), mode);
}

API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
	if (!graph)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_capture_end(s, (void **)graph));
}

API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *graph)
{
	return cudaStreamEndCapture(PTSZ(s), graph);
}

API cudaError_t cudaStreamIsCapturing(cudaStream_t s,
				      enum cudaStreamCaptureStatus *status)
{
	int st = 0;
	simgpu_status_t r;

	if (!status)
		return ret(cudaErrorInvalidValue);
	if (simgpu_stream_check(s))
		return ret(cudaErrorInvalidResourceHandle);
	r = simgpu_capture_info(s, &st, NULL);
	*status = (enum cudaStreamCaptureStatus)st;
	return from_status(r);
}

API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s,
					   enum cudaStreamCaptureStatus *status)
{
	return cudaStreamIsCapturing(PTSZ(s), status);
}

/* Dependencies are not reported: the simulator replays a graph's nodes
 * in capture order, so it keeps no edges. */
API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s,
					 enum cudaStreamCaptureStatus *status,
					 unsigned long long *id,
					 cudaGraph_t *graph,
					 const cudaGraphNode_t **deps,
					 const cudaGraphEdgeData **edges,
					 size_t *ndeps)
{
	int st = 0;
	uint64_t cid = 0;
	simgpu_status_t r;

	if (!status)
		return ret(cudaErrorInvalidValue);
	if (simgpu_stream_check(s))
		return ret(cudaErrorInvalidResourceHandle);
	r = simgpu_capture_info(s, &st, &cid);
	*status = (enum cudaStreamCaptureStatus)st;
	if (id)
		*id = cid;
	if (graph)
		*graph = NULL;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return from_status(r);
}

API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s,
					      enum cudaStreamCaptureStatus *status,
					      unsigned long long *id,
					      cudaGraph_t *graph,
					      const cudaGraphNode_t **deps,
					      const cudaGraphEdgeData **edges,
					      size_t *ndeps)
{
	return cudaStreamGetCaptureInfo(PTSZ(s), status, id, graph, deps,
					edges, ndeps);
}

API cudaError_t cudaThreadExchangeStreamCaptureMode(
	enum cudaStreamCaptureMode *mode)
{
	int m;

	if (!mode)
		return ret(cudaErrorInvalidValue);
	m = (int)*mode;
	if (simgpu_capture_exchange_mode(&m))
		return ret(cudaErrorInvalidValue);
	*mode = (enum cudaStreamCaptureMode)m;
	return cudaSuccess;
}

API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
				     unsigned long long flags)
{
	(void)flags;
	if (!exec)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_graph_instantiate((void **)exec, graph));
}

API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec,
					      cudaGraph_t graph,
					      unsigned long long flags)
{
	return cudaGraphInstantiate(exec, graph, flags);
}

API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
	return from_status(simgpu_graph_launch(exec, s));
}

API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s)
{
	return cudaGraphLaunch(exec, PTSZ(s));
}

API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
	return from_status(simgpu_graph_exec_destroy(exec));
}

API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	return from_status(simgpu_graph_destroy(graph));
}

/* The node count only (nodes are not handed out). */
API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes,
				  size_t *n)
{
	size_t k = 0;
	simgpu_status_t r;

	if (!n || nodes)
		return ret(cudaErrorInvalidValue);
	r = simgpu_graph_node_count(graph, &k);
	*n = k;
	return from_status(r);
}

/* Runs once the stream's earlier work is done: at once here, or recorded
 * when the stream captures. */
API cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
	if (!fn)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_host_func(s, fn, data));
}

API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn,
					void *data)
{
	return cudaLaunchHostFunc(PTSZ(s), fn, data);
}

API cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb,
				      void *data, unsigned int flags)
{
	if (!cb || flags)
		return ret(cudaErrorInvalidValue);
	if (simgpu_stream_check(s))
		return ret(cudaErrorInvalidResourceHandle);
	/* not capturable in CUDA (cudaLaunchHostFunc is) */
	if (simgpu_capture_refuse(s, "cudaStreamAddCallback"))
		return ret(cudaErrorStreamCaptureUnsupported);
	cb(s, cudaSuccess, data);
	return cudaSuccess;
}

/* ---- events ---- */

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	if (!e)
		return ret(cudaErrorInvalidValue);
	return from_status(simgpu_event_create((void **)e, flags));
}

API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	return cudaEventCreateWithFlags(e, 0);
}

API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	return from_status(simgpu_event_record(e, s));
}

API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s,
					 unsigned int flags)
{
	(void)flags;
	return from_status(simgpu_event_record(e, s));
}

API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s)
{
	return cudaEventRecord(e, PTSZ(s));
}

API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s,
					      unsigned int flags)
{
	return cudaEventRecordWithFlags(e, PTSZ(s), flags);
}

API cudaError_t cudaEventQuery(cudaEvent_t e)
{
	return from_status(simgpu_event_query(e));
}

API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	return from_status(simgpu_event_sync(e));
}

API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	return from_status(simgpu_event_elapsed(ms, a, b));
}

API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	return from_status(simgpu_event_destroy(e));
}

/* ---- driver entry points ---- */

static simgpu_driver_proc_fn driver_proc(void)
{
	simgpu_driver_proc_fn fn = simgpu_get_driver_proc();

	if (!fn) {
		/* the simulated libcuda.so.1 registers itself when loaded;
		 * RUNPATH $ORIGIN finds it next to this library */
		dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		fn = simgpu_get_driver_proc();
	}
	return fn;
}

static cudaError_t entry_point(const char *symbol, void **fp, int version,
			       enum cudaDriverEntryPointQueryResult *status)
{
	simgpu_driver_proc_fn fn;

	if (!symbol || !fp)
		return ret(cudaErrorInvalidValue);
	fn = driver_proc();
	if (!fn)
		return ret(cudaErrorNotSupported);
	*fp = fn(symbol, version);
	if (status)
		*status = *fp ? cudaDriverEntryPointSuccess :
				cudaDriverEntryPointSymbolNotFound;
	return *fp || status ? cudaSuccess : ret(cudaErrorSymbolNotFound);
}

API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fp,
					unsigned long long flags,
					enum cudaDriverEntryPointQueryResult *st)
{
	(void)flags;
	return entry_point(symbol, fp, SIM_VERSION, st);
}

API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fp,
		unsigned int version, unsigned long long flags,
		enum cudaDriverEntryPointQueryResult *st)
{
	(void)flags;
	return entry_point(symbol, fp, (int)version, st);
}

/* ---- libraries and kernels: any image loads; kernels are looked up by
 * name in the host registry (kernels.c). ---- */

#define LIB_MAGIC 0x53474c42u
static const uint32_t lib_token = LIB_MAGIC;

API cudaError_t cudaLibraryLoadData(cudaLibrary_t *lib, const void *code,
				    enum cudaJitOption *jo, void **jv,
				    unsigned int njo,
				    enum cudaLibraryOption *lo, void **lv,
				    unsigned int nlo)
{
	(void)jo;
	(void)jv;
	(void)njo;
	(void)lo;
	(void)lv;
	(void)nlo;
	if (!lib || !code)
		return ret(cudaErrorInvalidValue);
	simgpu_init();
	*lib = (cudaLibrary_t)&lib_token;
	return cudaSuccess;
}

API cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *lib, const char *file,
					enum cudaJitOption *jo, void **jv,
					unsigned int njo,
					enum cudaLibraryOption *lo, void **lv,
					unsigned int nlo)
{
	if (!lib || !file)
		return ret(cudaErrorInvalidValue);
	if (access(file, R_OK))
		return ret(cudaErrorFileNotFound);
	return cudaLibraryLoadData(lib, file, jo, jv, njo, lo, lv, nlo);
}

API cudaError_t cudaLibraryUnload(cudaLibrary_t lib)
{
	if ((const void *)lib != &lib_token)
		return ret(cudaErrorInvalidResourceHandle);
	return cudaSuccess;
}

API cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t lib,
				     const char *name)
{
	const simgpu_kernel_t *kern;

	if (!k || !name)
		return ret(cudaErrorInvalidValue);
	if ((const void *)lib != &lib_token)
		return ret(cudaErrorInvalidResourceHandle);
	kern = simgpu_kernel_find(name);
	if (!kern)
		return ret(cudaErrorSymbolNotFound);
	*k = (cudaKernel_t)kern;
	return cudaSuccess;
}

static cudaError_t launch(const void *func, dim3 grid, dim3 block,
			  void **args, cudaStream_t s)
{
	const simgpu_kernel_t *k = simgpu_kernel_from_handle(func);
	uint64_t threads;

	if (!k)
		return ret(cudaErrorInvalidDeviceFunction);
	threads = (uint64_t)grid.x * grid.y * grid.z *
		  ((uint64_t)block.x * block.y * block.z);
	if (threads == 0 || (uint64_t)block.x * block.y * block.z > 1024)
		return ret(cudaErrorInvalidConfiguration);
	return from_status(simgpu_launch(k, args, threads, s));
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
				 void **args, size_t shmem, cudaStream_t s)
{
	(void)shmem;
	return launch(func, grid, block, args, s);
}

API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config,
				    const void *func, void **args)
{
	if (!config)
		return ret(cudaErrorInvalidValue);
	return launch(func, config->gridDim, config->blockDim, args,
		      config->stream);
}

API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block,
				      void **args, size_t shmem, cudaStream_t s)
{
	(void)shmem;
	return launch(func, grid, block, args, PTSZ(s));
}

API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config,
					 const void *func, void **args)
{
	if (!config)
		return ret(cudaErrorInvalidValue);
	return launch(func, config->gridDim, config->blockDim, args,
		      PTSZ(config->stream));
}

/* Kernel names let vmem's trace name launches ("mt_sgd_momentum"). */
API cudaError_t cudaFuncGetName(const char **name, const void *func)
{
	const simgpu_kernel_t *k = simgpu_kernel_from_handle(func);

	if (!name)
		return ret(cudaErrorInvalidValue);
	if (!k)
		return ret(cudaErrorInvalidDeviceFunction);
	*name = k->name;
	return cudaSuccess;
}

/* Every simulated kernel is a library kernel handle (there are no host
 * stubs: nothing is compiled with <<<...>>>), and a real CUDA 13 driver
 * answers cudaFuncGetParamInfo on a kernel handle with
 * cudaErrorInvalidValue (seen on an H100, driver 580) -- the same answer
 * as "past the last parameter".  The simulator does the same, so a shim
 * that reads it as "no parameters" is caught here too; the layout of a
 * handle comes from cuKernelGetParamInfo. */
API cudaError_t cudaFuncGetParamInfo(const void *func, size_t index,
				     size_t *offset, size_t *size)
{
	(void)index;
	(void)offset;
	(void)size;
	if (!simgpu_kernel_from_handle(func))
		return ret(cudaErrorInvalidDeviceFunction);
	return ret(cudaErrorInvalidValue);
}

/* No host stubs are registered in the simulator. */
API cudaError_t cudaGetFuncBySymbol(cudaFunction_t *f, const void *symbol)
{
	(void)symbol;
	if (!f)
		return ret(cudaErrorInvalidValue);
	return ret(cudaErrorInvalidDeviceFunction);
}

API cudaError_t cudaGetKernel(cudaKernel_t *k, const void *symbol)
{
	(void)symbol;
	if (!k)
		return ret(cudaErrorInvalidValue);
	return ret(cudaErrorInvalidDeviceFunction);
}

/* What nvcc 13's <<<...>>> stubs call, with the handle __cudaGetKernel
 * gave them (a test program passes a library kernel handle). */
API cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block,
				   void **args, size_t shmem, cudaStream_t s)
{
	(void)shmem;
	return launch((const void *)k, grid, block, args, s);
}

API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block,
					void **args, size_t shmem, cudaStream_t s)
{
	(void)shmem;
	return launch((const void *)k, grid, block, args, PTSZ(s));
}
