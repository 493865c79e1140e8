/* interpose/hook_cudart.c - CUDA runtime hooks: allocation, memory
 * queries, copies, sets, streams, events and synchronisation.
 *
 * Allocations go to the runtime (vmem's pool) when it is active; every
 * other call becomes one trace event with the ranges it touches.  Copies
 * and sets know their extents exactly (source read, destination written);
 * synchronisation and events touch no memory but order the trace.  Legacy
 * IPC of vmem's memory is refused and its pointer attributes answered by
 * vmem (see the section below).
 */
#include <inttypes.h>

#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define CUDART_REALS(X)                                                              \
	X(cudaMalloc, cudaError_t, (void **p, size_t n), (p, n))                     \
	X(cudaFree, cudaError_t, (void *p), (p))                                     \
	X(cudaMallocAsync, cudaError_t, (void **p, size_t n, cudaStream_t s), (p, n, s)) \
	X(cudaFreeAsync, cudaError_t, (void *p, cudaStream_t s), (p, s))             \
	X(cudaMemGetInfo, cudaError_t, (size_t *f, size_t *t), (f, t))               \
	X(cudaMemcpy, cudaError_t,                                                   \
	  (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))  \
	X(cudaMemcpyAsync, cudaError_t,                                              \
	  (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st), \
	  (d, s, n, k, st))                                                          \
	X(cudaMemcpy2D, cudaError_t,                                                 \
	  (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,         \
	   enum cudaMemcpyKind k), (d, dp, s, sp, w, h, k))                          \
	X(cudaMemcpy2DAsync, cudaError_t,                                            \
	  (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,         \
	   enum cudaMemcpyKind k, cudaStream_t st), (d, dp, s, sp, w, h, k, st))     \
	X(cudaMemset, cudaError_t, (void *p, int v, size_t n), (p, v, n))            \
	X(cudaMemsetAsync, cudaError_t, (void *p, int v, size_t n, cudaStream_t s), (p, v, n, s)) \
	X(cudaMemset2D, cudaError_t, (void *p, size_t pitch, int v, size_t w, size_t h), \
	  (p, pitch, v, w, h))                                                       \
	X(cudaMemset2DAsync, cudaError_t,                                            \
	  (void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s),        \
	  (p, pitch, v, w, h, s))                                                    \
	X(cudaMemcpyPeer, cudaError_t, (void *d, int dd, const void *s, int sd, size_t n), \
	  (d, dd, s, sd, n))                                                         \
	X(cudaMemcpyPeerAsync, cudaError_t,                                          \
	  (void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st),       \
	  (d, dd, s, sd, n, st))                                                     \
	/* the per-thread-default-stream twins, same ABI as the originals */        \
	X(cudaMemcpy_ptds, cudaError_t,                                              \
	  (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))  \
	X(cudaMemcpyAsync_ptsz, cudaError_t,                                         \
	  (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st), \
	  (d, s, n, k, st))                                                          \
	X(cudaMemcpy2D_ptds, cudaError_t,                                            \
	  (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,         \
	   enum cudaMemcpyKind k), (d, dp, s, sp, w, h, k))                          \
	X(cudaMemcpy2DAsync_ptsz, cudaError_t,                                       \
	  (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,         \
	   enum cudaMemcpyKind k, cudaStream_t st), (d, dp, s, sp, w, h, k, st))     \
	X(cudaMemset_ptds, cudaError_t, (void *p, int v, size_t n), (p, v, n))       \
	X(cudaMemsetAsync_ptsz, cudaError_t, (void *p, int v, size_t n, cudaStream_t s), \
	  (p, v, n, s))                                                              \
	X(cudaMemset2D_ptds, cudaError_t, (void *p, size_t pitch, int v, size_t w, size_t h), \
	  (p, pitch, v, w, h))                                                       \
	X(cudaMemset2DAsync_ptsz, cudaError_t,                                       \
	  (void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s),        \
	  (p, pitch, v, w, h, s))                                                    \
	X(cudaStreamSynchronize, cudaError_t, (cudaStream_t s), (s))                 \
	X(cudaStreamDestroy, cudaError_t, (cudaStream_t s), (s))                     \
	X(cudaDeviceSynchronize, cudaError_t, (void), ())                            \
	X(cudaEventRecord, cudaError_t, (cudaEvent_t e, cudaStream_t s), (e, s))     \
	X(cudaStreamWaitEvent, cudaError_t, (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f)) \
	X(cudaEventSynchronize, cudaError_t, (cudaEvent_t e), (e))                   \
	X(cudaStreamIsCapturing, cudaError_t,                                        \
	  (cudaStream_t s, enum cudaStreamCaptureStatus *st), (s, st))                \
	X(cudaIpcGetMemHandle, cudaError_t, (cudaIpcMemHandle_t *h, void *p), (h, p)) \
	X(cudaPointerGetAttributes, cudaError_t,                                     \
	  (struct cudaPointerAttributes *a, const void *p), (a, p))

#define CUDART_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDART, name, ret, params, args)
CUDART_REALS(CUDART_REAL)

#define MISSING(name) ((cudaError_t)hook_missing(#name, cudaErrorSymbolNotFound))

/* DESIGN "CUDA graphs": inside a capture vmem must not change mappings, so
 * allocation on a capturing stream goes to CUDA (it becomes a graph
 * memory node).  A query failure counts as "not capturing". */
static bool capturing(cudaStream_t s)
{
	real_cudaStreamIsCapturing_t real = real_cudaStreamIsCapturing();
	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;

	if (!real || real(s, &st) != cudaSuccess)
		return false;
	return st != cudaStreamCaptureStatusNone;
}

static void stats_alloc_call(int cls, uint64_t t0)
{
	stats_call(cls, hook_clock_ns() - t0, 0);
}

HOOK_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
	real_cudaMalloc_t real = real_cudaMalloc();
	uint64_t t0;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMalloc);
	if (!hook_begin())
		return real(p, n);
	t0 = hook_clock_ns();
	st = runtime_active() ? runtime_malloc(p, n, NULL, "cudaMalloc") : real(p, n);
	stats_alloc_call(STATS_CALL_MALLOC, t0);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaFree(void *p)
{
	real_cudaFree_t real = real_cudaFree();
	uint64_t t0;
	cudaError_t st;

	if (!real)
		return MISSING(cudaFree);
	if (!hook_begin())
		return real(p);
	t0 = hook_clock_ns();
	/* A pointer vmem did not hand out (made before vmem started, or in a
	 * capture) belongs to CUDA. */
	if (runtime_active() && (p == NULL || runtime_owns((uintptr_t)p)))
		st = runtime_free(p, NULL, false, "cudaFree");
	else
		st = real(p);
	stats_alloc_call(STATS_CALL_FREE, t0);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
	real_cudaMallocAsync_t real = real_cudaMallocAsync();
	uint64_t t0;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMallocAsync);
	if (!hook_begin())
		return real(p, n, s);
	t0 = hook_clock_ns();
	if (runtime_active() && !capturing(s)) {
		st = runtime_malloc(p, n, s, "cudaMallocAsync");
	} else {
		if (runtime_active())
			stats_add(STATS_CAPTURE_PASSTHROUGH, 1);
		st = real(p, n, s);
	}
	stats_alloc_call(STATS_CALL_MALLOC, t0);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
	real_cudaFreeAsync_t real = real_cudaFreeAsync();
	uint64_t t0;
	cudaError_t st;

	if (!real)
		return MISSING(cudaFreeAsync);
	if (!hook_begin())
		return real(p, s);
	t0 = hook_clock_ns();
	if (runtime_active() && (p == NULL || runtime_owns((uintptr_t)p)))
		st = runtime_free(p, s, true, "cudaFreeAsync");
	else
		st = real(p, s);
	stats_alloc_call(STATS_CALL_FREE, t0);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
	real_cudaMemGetInfo_t real = real_cudaMemGetInfo();
	uint64_t t0;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemGetInfo);
	if (!hook_begin())
		return real(f, t);
	t0 = hook_clock_ns();
	st = runtime_active() ? runtime_mem_get_info(f, t) : real(f, t);
	stats_alloc_call(STATS_CALL_MEMINFO, t0);
	hook_end();
	return st;
}

/* ---- copies and sets ----
 *
 * Each copy reads its source and writes its destination, each set writes
 * its destination, with the exact extent of the call (a pitched region
 * spans every row but the last at full pitch).  Pointers that are not
 * vmem's (host memory, another device's) are left alone by the runtime.
 *
 * Every call has a per-thread-default-stream twin (_ptds for synchronous
 * calls, _ptsz for asynchronous ones): what a program compiled with
 * --default-stream per-thread (or CUDA_API_PER_THREAD_DEFAULT_STREAM)
 * calls.  The twins are hooked like the originals; vmem orders its
 * fault-ins on the per-thread stream (cudaStreamPerThread) where the call
 * names the default stream. */

/* `whole`: the destination span is written entirely (a 1-D copy, or a 2-D
 * one whose pitch is its width): VMEM_ACCESS_WHOLE, policy/event.h. */
static void copy_refs(hook_call_t *c, void *d, const void *s, size_t dbytes, size_t sbytes,
		      int k, bool whole)
{
	hook_call_ref(c, s, sbytes, VMEM_ACCESS_R, "src");
	hook_call_ref(c, d, dbytes, whole ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W, "dst");
	hook_call_args(c, "\"bytes\":%zu,\"kind\":%d", dbytes, k);
	c->info.type = VMEM_INFO_COPY;
	c->info.u.copy.bytes = dbytes;
	c->info.u.copy.kind = (uint8_t)k;
}

static void set_ref(hook_call_t *c, void *p, size_t n, int v)
{
	hook_call_ref(c, p, n, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "dst");
	hook_call_args(c, "\"bytes\":%zu,\"value\":%d", n, v);
	c->info.type = VMEM_INFO_COPY;
	c->info.u.copy.bytes = n;
	c->info.u.copy.kind = VMEM_COPY_SET;
}

/* Bytes a pitched 2D region spans: every row but the last at full pitch. */
static size_t span2d(size_t pitch, size_t width, size_t height)
{
	return height ? pitch * (height - 1) + width : 0;
}

/* The stream vmem orders a call on: a _ptsz/_ptds call on the default
 * stream (0) runs on the calling thread's per-thread stream. */
static cudaStream_t vstream(cudaStream_t s, bool per_thread)
{
	return per_thread && s == NULL ? cudaStreamPerThread : s;
}

#define RUN_CALL(c, call)                                  \
	do {                                               \
		st = hook_call_prepare(c);                 \
		if (st == cudaSuccess)                     \
			st = (call);                       \
		else                                       \
			hook_set_last_error_oom();         \
		hook_call_finish(c);                       \
		hook_end();                                \
	} while (0)

/* One definition per shape; each exported name below is a line. */

static cudaError_t do_memcpy(real_cudaMemcpy_t real, const char *api, bool pt, void *d,
			     const void *s, size_t n, enum cudaMemcpyKind k)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, vstream(NULL, pt));
	copy_refs(&c, d, s, n, n, (int)k, true);
	RUN_CALL(&c, real(d, s, n, k));
	return st;
}

static cudaError_t do_memcpy_async(real_cudaMemcpyAsync_t real, const char *api, bool pt, void *d,
				   const void *s, size_t n, enum cudaMemcpyKind k,
				   cudaStream_t strm)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, vstream(strm, pt));
	copy_refs(&c, d, s, n, n, (int)k, true);
	RUN_CALL(&c, real(d, s, n, k, strm));
	return st;
}

static cudaError_t do_memcpy_2d(real_cudaMemcpy2D_t real, const char *api, bool pt, void *d,
				size_t dp, const void *s, size_t sp, size_t w, size_t h,
				enum cudaMemcpyKind k)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, vstream(NULL, pt));
	copy_refs(&c, d, s, span2d(dp, w, h), span2d(sp, w, h), (int)k, dp == w);
	RUN_CALL(&c, real(d, dp, s, sp, w, h, k));
	return st;
}

static cudaError_t do_memcpy_2d_async(real_cudaMemcpy2DAsync_t real, const char *api, bool pt,
				      void *d, size_t dp, const void *s, size_t sp, size_t w,
				      size_t h, enum cudaMemcpyKind k, cudaStream_t strm)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, vstream(strm, pt));
	copy_refs(&c, d, s, span2d(dp, w, h), span2d(sp, w, h), (int)k, dp == w);
	RUN_CALL(&c, real(d, dp, s, sp, w, h, k, strm));
	return st;
}

static cudaError_t do_memset(real_cudaMemset_t real, const char *api, bool pt, void *p, int v,
			     size_t n)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMSET, api, vstream(NULL, pt));
	set_ref(&c, p, n, v);
	RUN_CALL(&c, real(p, v, n));
	return st;
}

static cudaError_t do_memset_async(real_cudaMemsetAsync_t real, const char *api, bool pt, void *p,
				   int v, size_t n, cudaStream_t strm)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMSET, api, vstream(strm, pt));
	set_ref(&c, p, n, v);
	RUN_CALL(&c, real(p, v, n, strm));
	return st;
}

static cudaError_t do_memset_2d(real_cudaMemset2D_t real, const char *api, bool pt, void *p,
				size_t pitch, int v, size_t w, size_t h)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMSET, api, vstream(NULL, pt));
	hook_call_ref(&c, p, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu,\"value\":%d", span2d(pitch, w, h), v);
	RUN_CALL(&c, real(p, pitch, v, w, h));
	return st;
}

static cudaError_t do_memset_2d_async(real_cudaMemset2DAsync_t real, const char *api, bool pt,
				      void *p, size_t pitch, int v, size_t w, size_t h,
				      cudaStream_t strm)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMSET, api, vstream(strm, pt));
	hook_call_ref(&c, p, span2d(pitch, w, h), VMEM_ACCESS_W, "dst");
	hook_call_args(&c, "\"bytes\":%zu,\"value\":%d", span2d(pitch, w, h), v);
	RUN_CALL(&c, real(p, pitch, v, w, h, strm));
	return st;
}

/* A peer copy between devices: vmem manages one device's memory, so at
 * most one side is vmem's; the device numbers do not matter to it. */
static cudaError_t do_memcpy_peer(real_cudaMemcpyPeer_t real, const char *api, void *d, int dd,
				  const void *s, int sd, size_t n)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, NULL);
	copy_refs(&c, d, s, n, n, (int)cudaMemcpyDeviceToDevice, true);
	RUN_CALL(&c, real(d, dd, s, sd, n));
	return st;
}

static cudaError_t do_memcpy_peer_async(real_cudaMemcpyPeerAsync_t real, const char *api, void *d,
					int dd, const void *s, int sd, size_t n, cudaStream_t strm)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_MEMCPY, api, strm);
	copy_refs(&c, d, s, n, n, (int)cudaMemcpyDeviceToDevice, true);
	RUN_CALL(&c, real(d, dd, s, sd, n, strm));
	return st;
}

/* The exported hooks, one line each: resolve, pass through when
 * re-entrant or disabled, otherwise the shape's helper.  A twin has the
 * ABI of its original. */
#define HOOK_BEGIN(NAME, ARGS)                                  \
	real_##NAME##_t real = real_##NAME();                   \
	if (!real)                                              \
		return MISSING(NAME);                           \
	if (!hook_begin())                                      \
		return real ARGS

#define HOOK_MEMCPY(NAME, PT)                                                          \
	HOOK_EXPORT cudaError_t NAME(void *d, const void *s, size_t n, enum cudaMemcpyKind k) \
	{                                                                              \
		HOOK_BEGIN(NAME, (d, s, n, k));                                        \
		return do_memcpy(real, #NAME, PT, d, s, n, k);                         \
	}
#define HOOK_MEMCPY_ASYNC(NAME, PT)                                                    \
	HOOK_EXPORT cudaError_t NAME(void *d, const void *s, size_t n, enum cudaMemcpyKind k, \
				     cudaStream_t strm)                                \
	{                                                                              \
		HOOK_BEGIN(NAME, (d, s, n, k, strm));                                  \
		return do_memcpy_async(real, #NAME, PT, d, s, n, k, strm);             \
	}
#define HOOK_MEMCPY_2D(NAME, PT)                                                       \
	HOOK_EXPORT cudaError_t NAME(void *d, size_t dp, const void *s, size_t sp, size_t w, \
				     size_t h, enum cudaMemcpyKind k)                  \
	{                                                                              \
		HOOK_BEGIN(NAME, (d, dp, s, sp, w, h, k));                             \
		return do_memcpy_2d(real, #NAME, PT, d, dp, s, sp, w, h, k);           \
	}
#define HOOK_MEMCPY_2D_ASYNC(NAME, PT)                                                 \
	HOOK_EXPORT cudaError_t NAME(void *d, size_t dp, const void *s, size_t sp, size_t w, \
				     size_t h, enum cudaMemcpyKind k, cudaStream_t strm) \
	{                                                                              \
		HOOK_BEGIN(NAME, (d, dp, s, sp, w, h, k, strm));                       \
		return do_memcpy_2d_async(real, #NAME, PT, d, dp, s, sp, w, h, k, strm); \
	}
#define HOOK_MEMSET(NAME, PT)                                                          \
	HOOK_EXPORT cudaError_t NAME(void *p, int v, size_t n)                         \
	{                                                                              \
		HOOK_BEGIN(NAME, (p, v, n));                                           \
		return do_memset(real, #NAME, PT, p, v, n);                            \
	}
#define HOOK_MEMSET_ASYNC(NAME, PT)                                                    \
	HOOK_EXPORT cudaError_t NAME(void *p, int v, size_t n, cudaStream_t strm)      \
	{                                                                              \
		HOOK_BEGIN(NAME, (p, v, n, strm));                                     \
		return do_memset_async(real, #NAME, PT, p, v, n, strm);                \
	}
#define HOOK_MEMSET_2D(NAME, PT)                                                       \
	HOOK_EXPORT cudaError_t NAME(void *p, size_t pitch, int v, size_t w, size_t h) \
	{                                                                              \
		HOOK_BEGIN(NAME, (p, pitch, v, w, h));                                 \
		return do_memset_2d(real, #NAME, PT, p, pitch, v, w, h);               \
	}
#define HOOK_MEMSET_2D_ASYNC(NAME, PT)                                                 \
	HOOK_EXPORT cudaError_t NAME(void *p, size_t pitch, int v, size_t w, size_t h, \
				     cudaStream_t strm)                                \
	{                                                                              \
		HOOK_BEGIN(NAME, (p, pitch, v, w, h, strm));                           \
		return do_memset_2d_async(real, #NAME, PT, p, pitch, v, w, h, strm);   \
	}

HOOK_MEMCPY(cudaMemcpy, false)
HOOK_MEMCPY(cudaMemcpy_ptds, true)
HOOK_MEMCPY_ASYNC(cudaMemcpyAsync, false)
HOOK_MEMCPY_ASYNC(cudaMemcpyAsync_ptsz, true)
HOOK_MEMCPY_2D(cudaMemcpy2D, false)
HOOK_MEMCPY_2D(cudaMemcpy2D_ptds, true)
HOOK_MEMCPY_2D_ASYNC(cudaMemcpy2DAsync, false)
HOOK_MEMCPY_2D_ASYNC(cudaMemcpy2DAsync_ptsz, true)
HOOK_MEMSET(cudaMemset, false)
HOOK_MEMSET(cudaMemset_ptds, true)
HOOK_MEMSET_ASYNC(cudaMemsetAsync, false)
HOOK_MEMSET_ASYNC(cudaMemsetAsync_ptsz, true)
HOOK_MEMSET_2D(cudaMemset2D, false)
HOOK_MEMSET_2D(cudaMemset2D_ptds, true)
HOOK_MEMSET_2D_ASYNC(cudaMemset2DAsync, false)
HOOK_MEMSET_2D_ASYNC(cudaMemset2DAsync_ptsz, true)

HOOK_EXPORT cudaError_t cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n)
{
	HOOK_BEGIN(cudaMemcpyPeer, (d, dd, s, sd, n));
	return do_memcpy_peer(real, "cudaMemcpyPeer", d, dd, s, sd, n);
}

HOOK_EXPORT cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
					    cudaStream_t strm)
{
	HOOK_BEGIN(cudaMemcpyPeerAsync, (d, dd, s, sd, n, strm));
	return do_memcpy_peer_async(real, "cudaMemcpyPeerAsync", d, dd, s, sd, n, strm);
}

/* ---- legacy IPC and pointer queries on vmem's memory (see the same
 * section of hook_driver.c): an IPC handle would let another process map
 * chunks vmem moves away, so it is refused, naming VMEM_DISABLE=1;
 * cudaPointerGetAttributes answers as for a cudaMalloc allocation (the
 * real query on a range vmem has evicted would not). ---- */

HOOK_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
	real_cudaIpcGetMemHandle_t real = real_cudaIpcGetMemHandle();
	cudaError_t st;

	if (!hook_begin())
		return real ? real(h, p) : MISSING(cudaIpcGetMemHandle);
	if (runtime_active() && runtime_owns((uintptr_t)p)) {
		vmem_error("cudaIpcGetMemHandle(%p): refused: this memory is managed by vmem, which "
			   "moves it between device and host, so it cannot be shared with another "
			   "process. Run this process with VMEM_DISABLE=1 (vmem off) to use "
			   "cudaIpcGetMemHandle", p);
		st = cudaErrorNotSupported;
	} else {
		st = real ? real(h, p) : MISSING(cudaIpcGetMemHandle);
	}
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	real_cudaPointerGetAttributes_t real = real_cudaPointerGetAttributes();
	cudaError_t st;

	if (!hook_begin())
		return real ? real(a, p) : MISSING(cudaPointerGetAttributes);
	if (runtime_active() && runtime_owns((uintptr_t)p) && a) {
		a->type = cudaMemoryTypeDevice;
		a->device = runtime_device();
		a->devicePointer = (void *)p;
		a->hostPointer = NULL;
		st = cudaSuccess;
	} else {
		st = real ? real(a, p) : MISSING(cudaPointerGetAttributes);
	}
	hook_end();
	return st;
}

/* ---- streams, events, synchronisation: no memory, but they order the
 * trace (the policy places offloads and prefetches between them). */

HOOK_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t strm)
{
	real_cudaStreamSynchronize_t real = real_cudaStreamSynchronize();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaStreamSynchronize);
	if (!hook_begin())
		return real(strm);
	hook_call_init(&c, VMEM_OP_SYNC, "cudaStreamSynchronize", strm);
	RUN_CALL(&c, real(strm));
	return st;
}

/* A destroyed stream must leave the runtime's table first: a later cudaFree
 * records its whole-device fence on every stream in it, and recording on
 * a destroyed handle is undefined behaviour on a real GPU. */
HOOK_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t strm)
{
	real_cudaStreamDestroy_t real = real_cudaStreamDestroy();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaStreamDestroy);
	if (!hook_begin())
		return real(strm);
	if (runtime_active())
		runtime_stream_destroyed(strm);
	hook_call_init(&c, VMEM_OP_STREAM, "cudaStreamDestroy", strm);
	RUN_CALL(&c, real(strm));
	return st;
}

HOOK_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	real_cudaDeviceSynchronize_t real = real_cudaDeviceSynchronize();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaDeviceSynchronize);
	if (!hook_begin())
		return real();
	hook_call_init(&c, VMEM_OP_SYNC, "cudaDeviceSynchronize", NULL);
	RUN_CALL(&c, real());
	return st;
}

HOOK_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t strm)
{
	real_cudaEventRecord_t real = real_cudaEventRecord();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaEventRecord);
	if (!hook_begin())
		return real(e, strm);
	hook_call_init(&c, VMEM_OP_EVENT, "cudaEventRecord", strm);
	hook_call_args(&c, "\"event\":\"0x%" PRIxPTR "\"", (uintptr_t)e);
	RUN_CALL(&c, real(e, strm));
	return st;
}

HOOK_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t strm, cudaEvent_t e, unsigned int f)
{
	real_cudaStreamWaitEvent_t real = real_cudaStreamWaitEvent();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaStreamWaitEvent);
	if (!hook_begin())
		return real(strm, e, f);
	hook_call_init(&c, VMEM_OP_EVENT, "cudaStreamWaitEvent", strm);
	hook_call_args(&c, "\"event\":\"0x%" PRIxPTR "\"", (uintptr_t)e);
	RUN_CALL(&c, real(strm, e, f));
	return st;
}

HOOK_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	real_cudaEventSynchronize_t real = real_cudaEventSynchronize();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaEventSynchronize);
	if (!hook_begin())
		return real(e);
	hook_call_init(&c, VMEM_OP_SYNC, "cudaEventSynchronize", NULL);
	hook_call_args(&c, "\"event\":\"0x%" PRIxPTR "\"", (uintptr_t)e);
	RUN_CALL(&c, real(e));
	return st;
}
