/* tests/sim/interpose/copyprog.c - every copy and set vmem hooks, run on
 * tensors vmem has evicted, on the simulated GPU (LD_PRELOAD=libvmem.so,
 * VMEM_DEVICE_LIMIT=8M).  Linked against the real libcudart and libcuda
 * like an application.
 *
 *   copyprog list        prints the name of every case, one per line
 *   copyprog NAME        runs case NAME; prints "ok NAME"
 *
 * Each case copies or sets between a (2 MiB), b (2 MiB) and host memory,
 * with a host mirror of what a and b must hold.  An 8 MiB filler pushes a
 * and b out of the 8 MiB budget before the call (round 1: a call vmem
 * does not see touches unmapped memory, and the simulator stops with
 * "illegal address ... in <call>"), and again after it, so a write vmem
 * saw with the wrong access (or not at all) comes back from a stale host
 * copy (round 2 starts with a and b resident and clean: their host copies
 * are valid, so only a write vmem sees makes eviction copy them again).
 * Every byte of a and b and of the host destination is then compared with
 * the mirror.  "entry:NAME" cases call the driver function obtained by
 * cudaGetDriverEntryPointByVersion(NAME, 12000), as PyTorch does.
 * Exit 0 on success; every failure prints the first differing byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define CHECK(call)                                                                    \
	do {                                                                           \
		cudaError_t e_ = (call);                                               \
		if (e_ != cudaSuccess) {                                               \
			fprintf(stderr, "copyprog: %s failed: %s (%d), expected cudaSuccess\n", \
				#call, cudaGetErrorName(e_), (int)e_);                 \
			exit(1);                                                       \
		}                                                                      \
	} while (0)
#define CHECK_CU(call)                                                                 \
	do {                                                                           \
		CUresult r_ = (call);                                                  \
		if (r_ != CUDA_SUCCESS) {                                              \
			fprintf(stderr, "copyprog: %s failed: CUresult %d, expected CUDA_SUCCESS\n", \
				#call, (int)r_);                                       \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

/* The per-thread twins: declared by the headers only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, which would rename every call. */
cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemcpy2D_ptds(void *, size_t, const void *, size_t, size_t, size_t,
			      enum cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *, size_t, const void *, size_t, size_t, size_t,
				   enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemset_ptds(void *, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void *, int, size_t, cudaStream_t);
cudaError_t cudaMemset2D_ptds(void *, size_t, int, size_t, size_t);
cudaError_t cudaMemset2DAsync_ptsz(void *, size_t, int, size_t, size_t, cudaStream_t);
CUresult cuMemcpy_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyPeer_ptds(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
CUresult cuMemsetD8_v2_ptds(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD16_v2_ptds(CUdeviceptr, unsigned short, size_t);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr, unsigned int, size_t);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD16Async_ptsz(CUdeviceptr, unsigned short, size_t, CUstream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr, unsigned int, size_t, CUstream);
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr, size_t, unsigned char, size_t, size_t);
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr, size_t, unsigned short, size_t, size_t);
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr, size_t, unsigned int, size_t, size_t);
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);

enum {
	N = 2 << 20,              /* a and b */
	FILL = 8 << 20,           /* the filler: the whole budget */
	PITCH = 4096,             /* 2D cases: 512 rows of 4096 bytes ... */
	WIDTH = 3000,             /* ... of which 3000 are written */
	ROWS = N / PITCH,
	OFF = 4096,               /* 1D cases touch [OFF, OFF + LEN) */
	LEN = N - 3 * 4096,
};

static uint8_t *a, *b, *filler;   /* device */
static uint8_t ma[N], mb[N];      /* what a and b must hold */
static uint8_t hsrc[N], hdst[N], mh[N];   /* host source; host destination and its mirror */
static cudaStream_t strm;
static int round_;

static CUdeviceptr D(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* Pushes a and b out: the filler needs the whole budget. */
static void evict_all(void)
{
	CHECK(cudaMemset(filler, round_, FILL));
	CHECK(cudaDeviceSynchronize());
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

static void compare(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "copyprog: round %d: %s byte %zu is 0x%02x, expected 0x%02x\n",
				round_, what, i, got[i], want[i]);
			exit(1);
		}
}

/* ---- the effect of each shape on the mirrors ---- */

static void m_copy(uint8_t *dst, const uint8_t *src)
{
	memcpy(dst + OFF, src + OFF, LEN);
}

static void m_copy_2d(uint8_t *dst, const uint8_t *src)
{
	for (int r = 0; r < ROWS; r++)
		memcpy(dst + (size_t)r * PITCH, src + (size_t)r * PITCH, WIDTH);
}

static void m_set(uint8_t *dst, uint32_t v, size_t esz)
{
	for (size_t i = 0; i < LEN; i += esz)
		memcpy(dst + OFF + i, &v, esz);
}

static void m_set_2d(uint8_t *dst, uint32_t v, size_t esz)
{
	for (int r = 0; r < ROWS; r++)
		for (size_t i = 0; i < WIDTH; i += esz)
			memcpy(dst + (size_t)r * PITCH + i, &v, esz);
}

/* The round's set value, for elements of `esz` bytes. */
static uint32_t val(size_t esz)
{
	uint32_t v = round_ == 1 ? 0x5aa5c33cu : 0x3cc3a55au;

	return esz == 1 ? (v & 0xff) : esz == 2 ? (v & 0xffff) : v;
}

/* ---- the cases: each makes its call and updates the mirrors ---- */

typedef void (*case_fn)(void);

#define H2D(expr) do { expr; m_copy(ma, hsrc); } while (0)
#define D2H(expr) do { expr; m_copy(mh, mb); } while (0)
#define D2D(expr) do { expr; m_copy(ma, mb); } while (0)
#define D2D2(expr) do { expr; m_copy_2d(ma, mb); } while (0)
#define SET(esz, expr) do { expr; m_set(ma, val(esz), esz); } while (0)
#define SET2(esz, expr) do { expr; m_set_2d(ma, val(esz), esz); } while (0)

static void c_memcpy_ptds_h2d(void) { H2D(CHECK(cudaMemcpy_ptds(a + OFF, hsrc + OFF, LEN, cudaMemcpyHostToDevice))); }
static void c_memcpy_ptds_d2h(void) { D2H(CHECK(cudaMemcpy_ptds(hdst + OFF, b + OFF, LEN, cudaMemcpyDeviceToHost))); }
static void c_memcpy_ptds_d2d(void) { D2D(CHECK(cudaMemcpy_ptds(a + OFF, b + OFF, LEN, cudaMemcpyDeviceToDevice))); }
static void c_memcpy_async_ptsz_h2d(void) { H2D(CHECK(cudaMemcpyAsync_ptsz(a + OFF, hsrc + OFF, LEN, cudaMemcpyHostToDevice, strm))); }
static void c_memcpy_async_ptsz_d2h(void) { D2H(CHECK(cudaMemcpyAsync_ptsz(hdst + OFF, b + OFF, LEN, cudaMemcpyDeviceToHost, strm))); }
static void c_memcpy_async_ptsz_d2d(void) { D2D(CHECK(cudaMemcpyAsync_ptsz(a + OFF, b + OFF, LEN, cudaMemcpyDefault, NULL))); }
static void c_memcpy2d_ptds(void) { D2D2(CHECK(cudaMemcpy2D_ptds(a, PITCH, b, PITCH, WIDTH, ROWS, cudaMemcpyDeviceToDevice))); }
static void c_memcpy2d_async_ptsz(void) { D2D2(CHECK(cudaMemcpy2DAsync_ptsz(a, PITCH, b, PITCH, WIDTH, ROWS, cudaMemcpyDeviceToDevice, strm))); }
static void c_memset_ptds(void) { SET(1, CHECK(cudaMemset_ptds(a + OFF, (int)val(1), LEN))); }
static void c_memset_async_ptsz(void) { SET(1, CHECK(cudaMemsetAsync_ptsz(a + OFF, (int)val(1), LEN, NULL))); }
static void c_memset2d(void) { SET2(1, CHECK(cudaMemset2D(a, PITCH, (int)val(1), WIDTH, ROWS))); }
static void c_memset2d_ptds(void) { SET2(1, CHECK(cudaMemset2D_ptds(a, PITCH, (int)val(1), WIDTH, ROWS))); }
static void c_memset2d_async(void) { SET2(1, CHECK(cudaMemset2DAsync(a, PITCH, (int)val(1), WIDTH, ROWS, strm))); }
static void c_memset2d_async_ptsz(void) { SET2(1, CHECK(cudaMemset2DAsync_ptsz(a, PITCH, (int)val(1), WIDTH, ROWS, strm))); }
static void c_memcpy_peer(void) { D2D(CHECK(cudaMemcpyPeer(a + OFF, 0, b + OFF, 0, LEN))); }
static void c_memcpy_peer_async(void) { D2D(CHECK(cudaMemcpyPeerAsync(a + OFF, 0, b + OFF, 0, LEN, strm))); }

/* driver: the exported functions (cuda.h's names are the _v2 ones) */
#define CU_D2D(F) D2D(CHECK_CU(F(D(a + OFF), D(b + OFF), LEN)))
#define CU_D2DA(F) D2D(CHECK_CU(F(D(a + OFF), D(b + OFF), LEN, strm)))
static void c_cuMemcpy(void) { CU_D2D(cuMemcpy); }
static void c_cuMemcpy_ptds(void) { CU_D2D(cuMemcpy_ptds); }
static void c_cuMemcpyAsync(void) { CU_D2DA(cuMemcpyAsync); }
static void c_cuMemcpyAsync_ptsz(void) { CU_D2DA(cuMemcpyAsync_ptsz); }
static void c_cuMemcpyHtoD_v2(void) { H2D(CHECK_CU(cuMemcpyHtoD(D(a + OFF), hsrc + OFF, LEN))); }
static void c_cuMemcpyHtoD_v2_ptds(void) { H2D(CHECK_CU(cuMemcpyHtoD_v2_ptds(D(a + OFF), hsrc + OFF, LEN))); }
static void c_cuMemcpyDtoH_v2(void) { D2H(CHECK_CU(cuMemcpyDtoH(hdst + OFF, D(b + OFF), LEN))); }
static void c_cuMemcpyDtoH_v2_ptds(void) { D2H(CHECK_CU(cuMemcpyDtoH_v2_ptds(hdst + OFF, D(b + OFF), LEN))); }
static void c_cuMemcpyDtoD_v2(void) { CU_D2D(cuMemcpyDtoD); }
static void c_cuMemcpyDtoD_v2_ptds(void) { CU_D2D(cuMemcpyDtoD_v2_ptds); }
static void c_cuMemcpyHtoDAsync_v2(void) { H2D(CHECK_CU(cuMemcpyHtoDAsync(D(a + OFF), hsrc + OFF, LEN, strm))); }
static void c_cuMemcpyHtoDAsync_v2_ptsz(void) { H2D(CHECK_CU(cuMemcpyHtoDAsync_v2_ptsz(D(a + OFF), hsrc + OFF, LEN, NULL))); }
static void c_cuMemcpyDtoHAsync_v2(void) { D2H(CHECK_CU(cuMemcpyDtoHAsync(hdst + OFF, D(b + OFF), LEN, strm))); }
static void c_cuMemcpyDtoHAsync_v2_ptsz(void) { D2H(CHECK_CU(cuMemcpyDtoHAsync_v2_ptsz(hdst + OFF, D(b + OFF), LEN, strm))); }
static void c_cuMemcpyDtoDAsync_v2(void) { CU_D2DA(cuMemcpyDtoDAsync); }
static void c_cuMemcpyDtoDAsync_v2_ptsz(void) { CU_D2DA(cuMemcpyDtoDAsync_v2_ptsz); }
static void c_cuMemcpyPeer(void) { D2D(CHECK_CU(cuMemcpyPeer(D(a + OFF), NULL, D(b + OFF), NULL, LEN))); }
static void c_cuMemcpyPeer_ptds(void) { D2D(CHECK_CU(cuMemcpyPeer_ptds(D(a + OFF), NULL, D(b + OFF), NULL, LEN))); }
static void c_cuMemcpyPeerAsync(void) { D2D(CHECK_CU(cuMemcpyPeerAsync(D(a + OFF), NULL, D(b + OFF), NULL, LEN, strm))); }
static void c_cuMemcpyPeerAsync_ptsz(void) { D2D(CHECK_CU(cuMemcpyPeerAsync_ptsz(D(a + OFF), NULL, D(b + OFF), NULL, LEN, strm))); }

#define CU_SET(F, esz, T) SET(esz, CHECK_CU(F(D(a + OFF), (T)val(esz), LEN / esz)))
#define CU_SETA(F, esz, T) SET(esz, CHECK_CU(F(D(a + OFF), (T)val(esz), LEN / esz, strm)))
#define CU_SET2(F, esz, T) SET2(esz, CHECK_CU(F(D(a), PITCH, (T)val(esz), WIDTH / esz, ROWS)))
#define CU_SET2A(F, esz, T) SET2(esz, CHECK_CU(F(D(a), PITCH, (T)val(esz), WIDTH / esz, ROWS, strm)))
static void c_cuMemsetD8_v2(void) { CU_SET(cuMemsetD8, 1, unsigned char); }
static void c_cuMemsetD8_v2_ptds(void) { CU_SET(cuMemsetD8_v2_ptds, 1, unsigned char); }
static void c_cuMemsetD16_v2(void) { CU_SET(cuMemsetD16, 2, unsigned short); }
static void c_cuMemsetD16_v2_ptds(void) { CU_SET(cuMemsetD16_v2_ptds, 2, unsigned short); }
static void c_cuMemsetD32_v2(void) { CU_SET(cuMemsetD32, 4, unsigned int); }
static void c_cuMemsetD32_v2_ptds(void) { CU_SET(cuMemsetD32_v2_ptds, 4, unsigned int); }
static void c_cuMemsetD8Async(void) { CU_SETA(cuMemsetD8Async, 1, unsigned char); }
static void c_cuMemsetD8Async_ptsz(void) { CU_SETA(cuMemsetD8Async_ptsz, 1, unsigned char); }
static void c_cuMemsetD16Async(void) { CU_SETA(cuMemsetD16Async, 2, unsigned short); }
static void c_cuMemsetD16Async_ptsz(void) { CU_SETA(cuMemsetD16Async_ptsz, 2, unsigned short); }
static void c_cuMemsetD32Async(void) { CU_SETA(cuMemsetD32Async, 4, unsigned int); }
static void c_cuMemsetD32Async_ptsz(void) { CU_SETA(cuMemsetD32Async_ptsz, 4, unsigned int); }
static void c_cuMemsetD2D8_v2(void) { CU_SET2(cuMemsetD2D8, 1, unsigned char); }
static void c_cuMemsetD2D8_v2_ptds(void) { CU_SET2(cuMemsetD2D8_v2_ptds, 1, unsigned char); }
static void c_cuMemsetD2D16_v2(void) { CU_SET2(cuMemsetD2D16, 2, unsigned short); }
static void c_cuMemsetD2D16_v2_ptds(void) { CU_SET2(cuMemsetD2D16_v2_ptds, 2, unsigned short); }
static void c_cuMemsetD2D32_v2(void) { CU_SET2(cuMemsetD2D32, 4, unsigned int); }
static void c_cuMemsetD2D32_v2_ptds(void) { CU_SET2(cuMemsetD2D32_v2_ptds, 4, unsigned int); }
static void c_cuMemsetD2D8Async(void) { CU_SET2A(cuMemsetD2D8Async, 1, unsigned char); }
static void c_cuMemsetD2D8Async_ptsz(void) { CU_SET2A(cuMemsetD2D8Async_ptsz, 1, unsigned char); }
static void c_cuMemsetD2D16Async(void) { CU_SET2A(cuMemsetD2D16Async, 2, unsigned short); }
static void c_cuMemsetD2D16Async_ptsz(void) { CU_SET2A(cuMemsetD2D16Async_ptsz, 2, unsigned short); }
static void c_cuMemsetD2D32Async(void) { CU_SET2A(cuMemsetD2D32Async, 4, unsigned int); }
static void c_cuMemsetD2D32Async_ptsz(void) { CU_SET2A(cuMemsetD2D32Async_ptsz, 4, unsigned int); }

/* driver functions obtained as PyTorch obtains them */
static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;

	CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
	if (!fn || q != cudaDriverEntryPointSuccess) {
		fprintf(stderr, "copyprog: no driver entry point for %s (result %d)\n", name, (int)q);
		exit(1);
	}
	return fn;
}

typedef CUresult (*cp_async_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_async_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*set8a_fn)(CUdeviceptr, unsigned char, size_t, CUstream);
typedef CUresult (*set16a_fn)(CUdeviceptr, unsigned short, size_t, CUstream);
typedef CUresult (*set32a_fn)(CUdeviceptr, unsigned int, size_t, CUstream);
typedef CUresult (*set32_fn)(CUdeviceptr, unsigned int, size_t);

static void e_cuMemcpyAsync(void) { CU_D2DA(((cp_async_fn)entry("cuMemcpyAsync"))); }
static void e_cuMemcpyDtoDAsync(void) { CU_D2DA(((cp_async_fn)entry("cuMemcpyDtoDAsync"))); }
static void e_cuMemcpyHtoDAsync(void) { H2D(CHECK_CU(((htod_async_fn)entry("cuMemcpyHtoDAsync"))(D(a + OFF), hsrc + OFF, LEN, strm))); }
static void e_cuMemcpyDtoHAsync(void) { D2H(CHECK_CU(((dtoh_async_fn)entry("cuMemcpyDtoHAsync"))(hdst + OFF, D(b + OFF), LEN, strm))); }
static void e_cuMemsetD8Async(void) { CU_SETA(((set8a_fn)entry("cuMemsetD8Async")), 1, unsigned char); }
static void e_cuMemsetD16Async(void) { CU_SETA(((set16a_fn)entry("cuMemsetD16Async")), 2, unsigned short); }
static void e_cuMemsetD32Async(void) { CU_SETA(((set32a_fn)entry("cuMemsetD32Async")), 4, unsigned int); }
static void e_cuMemsetD32(void) { CU_SET(((set32_fn)entry("cuMemsetD32")), 4, unsigned int); }

static const struct {
	const char *name;
	case_fn fn;
} cases[] = {
	{ "cudaMemcpy_ptds:h2d", c_memcpy_ptds_h2d },
	{ "cudaMemcpy_ptds:d2h", c_memcpy_ptds_d2h },
	{ "cudaMemcpy_ptds:d2d", c_memcpy_ptds_d2d },
	{ "cudaMemcpyAsync_ptsz:h2d", c_memcpy_async_ptsz_h2d },
	{ "cudaMemcpyAsync_ptsz:d2h", c_memcpy_async_ptsz_d2h },
	{ "cudaMemcpyAsync_ptsz:d2d", c_memcpy_async_ptsz_d2d },
	{ "cudaMemcpy2D_ptds", c_memcpy2d_ptds },
	{ "cudaMemcpy2DAsync_ptsz", c_memcpy2d_async_ptsz },
	{ "cudaMemset_ptds", c_memset_ptds },
	{ "cudaMemsetAsync_ptsz", c_memset_async_ptsz },
	{ "cudaMemset2D", c_memset2d },
	{ "cudaMemset2D_ptds", c_memset2d_ptds },
	{ "cudaMemset2DAsync", c_memset2d_async },
	{ "cudaMemset2DAsync_ptsz", c_memset2d_async_ptsz },
	{ "cudaMemcpyPeer", c_memcpy_peer },
	{ "cudaMemcpyPeerAsync", c_memcpy_peer_async },
	{ "cuMemcpy", c_cuMemcpy },
	{ "cuMemcpy_ptds", c_cuMemcpy_ptds },
	{ "cuMemcpyAsync", c_cuMemcpyAsync },
	{ "cuMemcpyAsync_ptsz", c_cuMemcpyAsync_ptsz },
	{ "cuMemcpyHtoD_v2", c_cuMemcpyHtoD_v2 },
	{ "cuMemcpyHtoD_v2_ptds", c_cuMemcpyHtoD_v2_ptds },
	{ "cuMemcpyDtoH_v2", c_cuMemcpyDtoH_v2 },
	{ "cuMemcpyDtoH_v2_ptds", c_cuMemcpyDtoH_v2_ptds },
	{ "cuMemcpyDtoD_v2", c_cuMemcpyDtoD_v2 },
	{ "cuMemcpyDtoD_v2_ptds", c_cuMemcpyDtoD_v2_ptds },
	{ "cuMemcpyHtoDAsync_v2", c_cuMemcpyHtoDAsync_v2 },
	{ "cuMemcpyHtoDAsync_v2_ptsz", c_cuMemcpyHtoDAsync_v2_ptsz },
	{ "cuMemcpyDtoHAsync_v2", c_cuMemcpyDtoHAsync_v2 },
	{ "cuMemcpyDtoHAsync_v2_ptsz", c_cuMemcpyDtoHAsync_v2_ptsz },
	{ "cuMemcpyDtoDAsync_v2", c_cuMemcpyDtoDAsync_v2 },
	{ "cuMemcpyDtoDAsync_v2_ptsz", c_cuMemcpyDtoDAsync_v2_ptsz },
	{ "cuMemcpyPeer", c_cuMemcpyPeer },
	{ "cuMemcpyPeer_ptds", c_cuMemcpyPeer_ptds },
	{ "cuMemcpyPeerAsync", c_cuMemcpyPeerAsync },
	{ "cuMemcpyPeerAsync_ptsz", c_cuMemcpyPeerAsync_ptsz },
	{ "cuMemsetD8_v2", c_cuMemsetD8_v2 },
	{ "cuMemsetD8_v2_ptds", c_cuMemsetD8_v2_ptds },
	{ "cuMemsetD16_v2", c_cuMemsetD16_v2 },
	{ "cuMemsetD16_v2_ptds", c_cuMemsetD16_v2_ptds },
	{ "cuMemsetD32_v2", c_cuMemsetD32_v2 },
	{ "cuMemsetD32_v2_ptds", c_cuMemsetD32_v2_ptds },
	{ "cuMemsetD8Async", c_cuMemsetD8Async },
	{ "cuMemsetD8Async_ptsz", c_cuMemsetD8Async_ptsz },
	{ "cuMemsetD16Async", c_cuMemsetD16Async },
	{ "cuMemsetD16Async_ptsz", c_cuMemsetD16Async_ptsz },
	{ "cuMemsetD32Async", c_cuMemsetD32Async },
	{ "cuMemsetD32Async_ptsz", c_cuMemsetD32Async_ptsz },
	{ "cuMemsetD2D8_v2", c_cuMemsetD2D8_v2 },
	{ "cuMemsetD2D8_v2_ptds", c_cuMemsetD2D8_v2_ptds },
	{ "cuMemsetD2D16_v2", c_cuMemsetD2D16_v2 },
	{ "cuMemsetD2D16_v2_ptds", c_cuMemsetD2D16_v2_ptds },
	{ "cuMemsetD2D32_v2", c_cuMemsetD2D32_v2 },
	{ "cuMemsetD2D32_v2_ptds", c_cuMemsetD2D32_v2_ptds },
	{ "cuMemsetD2D8Async", c_cuMemsetD2D8Async },
	{ "cuMemsetD2D8Async_ptsz", c_cuMemsetD2D8Async_ptsz },
	{ "cuMemsetD2D16Async", c_cuMemsetD2D16Async },
	{ "cuMemsetD2D16Async_ptsz", c_cuMemsetD2D16Async_ptsz },
	{ "cuMemsetD2D32Async", c_cuMemsetD2D32Async },
	{ "cuMemsetD2D32Async_ptsz", c_cuMemsetD2D32Async_ptsz },
	{ "entry:cuMemcpyAsync", e_cuMemcpyAsync },
	{ "entry:cuMemcpyDtoDAsync", e_cuMemcpyDtoDAsync },
	{ "entry:cuMemcpyHtoDAsync", e_cuMemcpyHtoDAsync },
	{ "entry:cuMemcpyDtoHAsync", e_cuMemcpyDtoHAsync },
	{ "entry:cuMemsetD8Async", e_cuMemsetD8Async },
	{ "entry:cuMemsetD16Async", e_cuMemsetD16Async },
	{ "entry:cuMemsetD32Async", e_cuMemsetD32Async },
	{ "entry:cuMemsetD32", e_cuMemsetD32 },
};

static void run(case_fn fn)
{
	uint8_t probe[16];

	CHECK(cudaMalloc((void **)&a, N));
	CHECK(cudaMalloc((void **)&b, N));
	CHECK(cudaMalloc((void **)&filler, FILL));
	pattern(ma, N, 1);
	pattern(mb, N, 2);
	pattern(hsrc, N, 3);
	pattern(hdst, N, 4);
	memcpy(mh, hdst, N);
	CHECK(cudaMemcpy(a, ma, N, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(b, mb, N, cudaMemcpyHostToDevice));
	CHECK(cudaStreamCreate(&strm));
	for (round_ = 1; round_ <= 2; round_++) {
		evict_all();
		if (round_ == 2) {
			/* resident and clean: their host copies stay valid */
			CHECK(cudaMemcpy(probe, a, sizeof(probe), cudaMemcpyDeviceToHost));
			CHECK(cudaMemcpy(probe, b, sizeof(probe), cudaMemcpyDeviceToHost));
		}
		pattern(hsrc, N, 10 + (unsigned)round_);
		fn();
		CHECK(cudaDeviceSynchronize());
		compare("host destination", hdst, mh, N);
		evict_all();
		uint8_t *got = malloc(N);

		CHECK(cudaMemcpy(got, a, N, cudaMemcpyDeviceToHost));
		compare("a", got, ma, N);
		CHECK(cudaMemcpy(got, b, N, cudaMemcpyDeviceToHost));
		compare("b", got, mb, N);
		free(got);
	}
	CHECK(cudaStreamDestroy(strm));
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(filler));
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name)) {
			run(cases[i].fn);
			printf("ok %s\n", cases[i].name);
			return 0;
		}
	fprintf(stderr, "copyprog: unknown case '%s'; 'copyprog list' names them\n",
		argc > 1 ? argv[1] : "");
	return 2;
}
