/* tests/simgpu/extra_driver.c - more of the simulated libcuda.so.1: the
 * driver copies and sets a framework reaches directly or through the
 * entry-point queries (cuMemcpy, the Async copies, cuMemsetD8/16/32 and
 * their 2D and Async forms, the peer copies), their per-thread twins
 * (_ptds / _ptsz), and the handle and pointer queries vmem refuses or
 * answers for its own memory (cuIpcGetMemHandle,
 * cuMemRetainAllocationHandle, cuPointerGetAttribute(s)).
 * driver.c has the calls the simulator's own tests needed first (cuMemcpy,
 * the HtoD/DtoH/DtoD Async copies, cuMemsetD8/D32 and their Async forms,
 * cuIpcGetMemHandle, cuMemRetainAllocationHandle, their twins); this file
 * the rest.  As in driver.c, functions carry the
 * names cuda.h gives them (cuMemsetD32 is cuMemsetD32_v2), every call is
 * a thin translation to libsimgpu, and a twin differs from its original
 * only by its name (the simulator's one default stream stands for the
 * legacy and the per-thread stream alike).  Calls to driver.c's functions
 * bind inside this library (-Bsymbolic), never through an LD_PRELOADed
 * shim.
 *
 * The entry-point table (cuGetProcAddress in driver.c) is static there;
 * this file registers a resolver with the core that answers its own names
 * first and asks driver.c's cuGetProcAddress for the rest, so
 * cudaGetDriverEntryPoint* (which asks the core) find these functions.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "core.h"

#define API __attribute__((visibility("default")))
#define DPTR(d) ((void *)(uintptr_t)(d))

static CUresult status(simgpu_status_t st)
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
	case SIMGPU_EINVAL:
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult copy(CUdeviceptr d, const void *s, size_t n, simgpu_copy_kind_t k, CUstream st,
		     bool sync, const char *op)
{
	return status(simgpu_copy(DPTR(d), s, n, k, st, sync, op));
}

/* n elements of `esz` bytes holding `elem`, written as the device would:
 * a one-byte value is a plain set; wider values are copied from a host
 * buffer holding the pattern (the copy checks and accounts the range). */
static CUresult fill(CUdeviceptr d, uint32_t elem, size_t esz, size_t n, CUstream st,
		     const char *op)
{
	enum { CHUNK = 1 << 20 };
	size_t bytes = n * esz, done = 0;
	uint8_t *buf;

	if (esz == 1)
		return status(simgpu_memset(DPTR(d), (int)(elem & 0xff), n, st, false, op));
	if (d % esz)
		return CUDA_ERROR_INVALID_VALUE;
	buf = malloc(bytes < CHUNK ? (bytes ? bytes : 1) : CHUNK);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i + esz <= (bytes < CHUNK ? bytes : CHUNK); i += esz)
		memcpy(buf + i, &elem, esz);
	while (done < bytes) {
		size_t m = bytes - done < CHUNK ? bytes - done : CHUNK;
		CUresult r = copy(d + done, buf, m, SIMGPU_COPY_H2D, st, false, op);

		if (r != CUDA_SUCCESS) {
			free(buf);
			return r;
		}
		done += m;
	}
	free(buf);
	return CUDA_SUCCESS;
}

static CUresult fill_2d(CUdeviceptr d, size_t pitch, uint32_t elem, size_t esz, size_t w,
			size_t h, CUstream st, const char *op)
{
	if (w * esz > pitch)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t r = 0; r < h; r++) {
		CUresult e = fill(d + r * pitch, elem, esz, w, st, op);

		if (e != CUDA_SUCCESS)
			return e;
	}
	return CUDA_SUCCESS;
}

/* One simulated device and one context: a peer copy is a copy on it. */
API CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
	(void)dc;
	(void)sc;
	return copy(d, DPTR(s), n, SIMGPU_COPY_D2D, NULL, false, "cuMemcpyPeer");
}

API CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
			       size_t n, CUstream st)
{
	(void)dc;
	(void)sc;
	return copy(d, DPTR(s), n, SIMGPU_COPY_D2D, st, false, "cuMemcpyPeerAsync");
}

/* ---- sets (D8, D32 and their Async forms are in driver.c) ---- */

API CUresult cuMemsetD16(CUdeviceptr d, unsigned short v, size_t n)
{
	return fill(d, v, 2, n, NULL, "cuMemsetD16");
}

API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream st)
{
	return fill(d, v, 2, n, st, "cuMemsetD16Async");
}

API CUresult cuMemsetD2D8(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
	return fill_2d(d, pitch, v, 1, w, h, NULL, "cuMemsetD2D8");
}

API CUresult cuMemsetD2D16(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{
	return fill_2d(d, pitch, v, 2, w, h, NULL, "cuMemsetD2D16");
}

API CUresult cuMemsetD2D32(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h)
{
	return fill_2d(d, pitch, v, 4, w, h, NULL, "cuMemsetD2D32");
}

API CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h,
			       CUstream st)
{
	return fill_2d(d, pitch, v, 1, w, h, st, "cuMemsetD2D8Async");
}

API CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
				size_t h, CUstream st)
{
	return fill_2d(d, pitch, v, 2, w, h, st, "cuMemsetD2D16Async");
}

API CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h,
				CUstream st)
{
	return fill_2d(d, pitch, v, 4, w, h, st, "cuMemsetD2D32Async");
}

/* ---- the per-thread twins: the originals under another name ---- */

#define TWIN(NAME, BASE, PARAMS, ARGS) \
	API CUresult NAME PARAMS { return BASE ARGS; }

TWIN(cuMemcpyPeer_ptds, cuMemcpyPeer,
     (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n))
TWIN(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync,
     (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),
     (d, dc, s, sc, n, st))
TWIN(cuMemsetD16_v2_ptds, cuMemsetD16, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))
TWIN(cuMemsetD16Async_ptsz, cuMemsetD16Async,
     (CUdeviceptr d, unsigned short v, size_t n, CUstream st), (d, v, n, st))
TWIN(cuMemsetD2D8_v2_ptds, cuMemsetD2D8,
     (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h), (d, p, v, w, h))
TWIN(cuMemsetD2D16_v2_ptds, cuMemsetD2D16,
     (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h), (d, p, v, w, h))
TWIN(cuMemsetD2D32_v2_ptds, cuMemsetD2D32,
     (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h), (d, p, v, w, h))
TWIN(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async,
     (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream st),
     (d, p, v, w, h, st))
TWIN(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async,
     (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream st),
     (d, p, v, w, h, st))
TWIN(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async,
     (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream st),
     (d, p, v, w, h, st))

/* ---- handles and pointer queries ---- */

/* The attributes a framework asks of device memory.  The range is the
 * allocation, or for VMM memory the mapping holding the address (what a
 * real driver answers: vmem's chunk, not the application's tensor). */
API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr d)
{
	void *base;
	size_t size;

	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (simgpu_mem_range(DPTR(d), &base, &size) != SIMGPU_OK)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = d;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)base;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = size;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* As cuPointerGetAttribute, one attribute at a time; a pointer the
 * simulator does not know leaves every attribute zero (CUDA's rule). */
API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
				    CUdeviceptr d)
{
	void *base;
	size_t size;

	if (!attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	if (simgpu_mem_range(DPTR(d), &base, &size) != SIMGPU_OK) {
		for (unsigned int i = 0; i < n; i++)
			if (data[i])
				memset(data[i], 0, sizeof(uint32_t));
		return CUDA_SUCCESS;
	}
	for (unsigned int i = 0; i < n; i++) {
		CUresult r = cuPointerGetAttribute(data[i], attrs[i], d);

		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* ---- entry points ---- */

#define STR(x) #x
#define XSTR(x) STR(x)
#define P(fn) { #fn, XSTR(fn), (void *)fn }

static const struct {
	const char *name, *symbol;
	void *fn;
} extra_procs[] = {
	P(cuMemcpy), P(cuMemcpyHtoDAsync), P(cuMemcpyDtoHAsync), P(cuMemcpyDtoDAsync),
	P(cuMemcpyPeer), P(cuMemcpyPeerAsync), P(cuMemsetD16), P(cuMemsetD32),
	P(cuMemsetD8Async), P(cuMemsetD16Async), P(cuMemsetD32Async), P(cuMemsetD2D8),
	P(cuMemsetD2D16), P(cuMemsetD2D32), P(cuMemsetD2D8Async), P(cuMemsetD2D16Async),
	P(cuMemsetD2D32Async), P(cuIpcGetMemHandle), P(cuMemRetainAllocationHandle),
	P(cuPointerGetAttribute), P(cuPointerGetAttributes),
};

static void *extra_lookup(const char *name, int version)
{
	void *fn = NULL;

	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(extra_procs) / sizeof(extra_procs[0]); i++)
		if (!strcmp(name, extra_procs[i].name) || !strcmp(name, extra_procs[i].symbol))
			return extra_procs[i].fn;
	if (cuGetProcAddress(name, &fn, version, 0, NULL) != CUDA_SUCCESS)
		return NULL;
	return fn;
}

/* Runs after driver.c's constructor (it comes later in the link, and the
 * dynamic linker runs a library's constructors in link order), so this
 * resolver replaces driver.c's in the core; it falls back to driver.c. */
__attribute__((constructor)) static void extra_driver_ctor(void)
{
	simgpu_set_driver_proc(extra_lookup);
}
