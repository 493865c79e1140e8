/* tests/simgpu/extra_cudart.c - more of the simulated libcudart.so.13:
 * the 2D sets (and their per-thread-stream twins) and the peer copies, so
 * vmem's hooks for them can be tested.  Each is built from calls of
 * cudart.c.  The calls below reach the originals inside this
 * library: -Bsymbolic binds them here, never through an LD_PRELOADed
 * shim, which sees only the application's calls.  Errors are the
 * originals', last error included.
 */
#include <string.h>

#include <cuda_runtime_api.h>

#include "core.h"

#define API __attribute__((visibility("default")))

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

