/* tests/simgpu/extra_cudart.c - more of the simulated libcudart.so.13:
 * the per-thread-default-stream twins of the copies and sets (_ptds for
 * the synchronous calls, _ptsz for the asynchronous ones), the 2D sets
 * the peer copies and legacy IPC's cudaIpcGetMemHandle, so vmem's hooks
 * for them can be tested.
 *
 * Added in a file of its own (issue 10, branch `reactive`) while the
 * simulator's own files were being extended on another branch; the lead
 * folds it into cudart.c at merge.  Each call is the original one: the
 * simulator has one default stream, which stands for the legacy and the
 * per-thread stream alike (core.h), so a twin differs from its original
 * only by its name.  The calls below reach the originals inside this
 * library: -Bsymbolic binds them here, never through an LD_PRELOADed
 * shim, which sees only the application's calls.  Errors are the
 * originals', last error included.
 */
#include <string.h>

#include <cuda_runtime_api.h>

#include "core.h"

#define API __attribute__((visibility("default")))

API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return cudaMemcpy(dst, src, n, kind);
}

API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
				     enum cudaMemcpyKind kind, cudaStream_t s)
{
	return cudaMemcpyAsync(dst, src, n, kind, s);
}

API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
				  size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}

API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
				       size_t width, size_t height, enum cudaMemcpyKind kind,
				       cudaStream_t s)
{
	return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, s);
}

API cudaError_t cudaMemset_ptds(void *p, int value, size_t n)
{
	return cudaMemset(p, value, n);
}

API cudaError_t cudaMemsetAsync_ptsz(void *p, int value, size_t n, cudaStream_t s)
{
	return cudaMemsetAsync(p, value, n, s);
}

/* A pitched set is one set per row, in order on the stream.  A width
 * above the pitch is cudaErrorInvalidPitchValue, made the last error by
 * the 2D copy's own check (which touches no memory). */
API cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height,
				  cudaStream_t s)
{
	if (width > pitch)
		return cudaMemcpy2DAsync(p, pitch, p, width, width, 1, cudaMemcpyDeviceToDevice, s);
	for (size_t r = 0; r < height; r++) {
		cudaError_t e = cudaMemsetAsync((char *)p + r * pitch, value, width, s);

		if (e != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

API cudaError_t cudaMemset2D(void *p, size_t pitch, int value, size_t width, size_t height)
{
	return cudaMemset2DAsync(p, pitch, value, width, height, NULL);
}

API cudaError_t cudaMemset2D_ptds(void *p, size_t pitch, int value, size_t width, size_t height)
{
	return cudaMemset2DAsync(p, pitch, value, width, height, NULL);
}

API cudaError_t cudaMemset2DAsync_ptsz(void *p, size_t pitch, int value, size_t width,
				       size_t height, cudaStream_t s)
{
	return cudaMemset2DAsync(p, pitch, value, width, height, s);
}

/* One simulated device: a peer copy is a device-to-device copy on it. */
API cudaError_t cudaMemcpyPeer(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
	if (dst_dev != 0 || src_dev != 0)
		return cudaSetDevice(dst_dev != 0 ? dst_dev : src_dev);
	return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}

API cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev,
				    size_t n, cudaStream_t s)
{
	if (dst_dev != 0 || src_dev != 0)
		return cudaSetDevice(dst_dev != 0 ? dst_dev : src_dev);
	return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}

/* Legacy IPC works on cudaMalloc memory only: memory mapped through the
 * VMM calls cannot be exported this way (as on a real driver), nor can an
 * address inside an allocation.  The handle carries the base (one
 * process: nothing to open).  A refusal is cudaErrorInvalidValue, made the
 * last error by cudaMalloc's own argument check. */
API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
	uint64_t vmm;
	void *base;
	size_t size;

	if (!h || simgpu_vmm_handle_at(p, &vmm) == SIMGPU_OK ||
	    simgpu_mem_range(p, &base, &size) != SIMGPU_OK || base != p)
		return cudaMalloc(NULL, 1);
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &base, sizeof(base));
	return cudaSuccess;
}
