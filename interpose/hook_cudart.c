/* interpose/hook_cudart.c - CUDA runtime hooks: allocation, memory
 * queries, copies, sets, streams, events and synchronisation.
 *
 * Allocations go to the runtime (vmem's pool) when it is active; every
 * other call becomes one trace event with the ranges it touches.  Copies
 * and sets know their extents exactly (source read, destination written);
 * synchronisation and events touch no memory but order the trace.
 */
#include <inttypes.h>

#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
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
	X(cudaStreamSynchronize, cudaError_t, (cudaStream_t s), (s))                 \
	X(cudaStreamDestroy, cudaError_t, (cudaStream_t s), (s))                     \
	X(cudaDeviceSynchronize, cudaError_t, (void), ())                            \
	X(cudaEventRecord, cudaError_t, (cudaEvent_t e, cudaStream_t s), (e, s))     \
	X(cudaStreamWaitEvent, cudaError_t, (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f)) \
	X(cudaEventSynchronize, cudaError_t, (cudaEvent_t e), (e))                   \
	X(cudaStreamIsCapturing, cudaError_t,                                        \
	  (cudaStream_t s, enum cudaStreamCaptureStatus *st), (s, st))

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

/* ---- copies and sets ---- */

/* `whole`: the destination span is written entirely (a 1-D copy, or a 2-D
 * one whose pitch is its width): VMEM_ACCESS_WHOLE, policy/event.h. */
static void copy_refs(hook_call_t *c, void *d, const void *s, size_t dbytes, size_t sbytes,
		      enum cudaMemcpyKind k, bool whole)
{
	hook_call_ref(c, s, sbytes, VMEM_ACCESS_R, "src");
	hook_call_ref(c, d, dbytes, whole ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W, "dst");
	hook_call_args(c, "\"bytes\":%zu,\"kind\":%d", dbytes, (int)k);
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

HOOK_EXPORT cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
	real_cudaMemcpy_t real = real_cudaMemcpy();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemcpy);
	if (!hook_begin())
		return real(d, s, n, k);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cudaMemcpy", NULL);
	copy_refs(&c, d, s, n, n, k, true);
	RUN_CALL(&c, real(d, s, n, k));
	return st;
}

HOOK_EXPORT cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
					cudaStream_t strm)
{
	real_cudaMemcpyAsync_t real = real_cudaMemcpyAsync();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemcpyAsync);
	if (!hook_begin())
		return real(d, s, n, k, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cudaMemcpyAsync", strm);
	copy_refs(&c, d, s, n, n, k, true);
	RUN_CALL(&c, real(d, s, n, k, strm));
	return st;
}

HOOK_EXPORT cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w,
				     size_t h, enum cudaMemcpyKind k)
{
	real_cudaMemcpy2D_t real = real_cudaMemcpy2D();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemcpy2D);
	if (!hook_begin())
		return real(d, dp, s, sp, w, h, k);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cudaMemcpy2D", NULL);
	copy_refs(&c, d, s, span2d(dp, w, h), span2d(sp, w, h), k, dp == w);
	RUN_CALL(&c, real(d, dp, s, sp, w, h, k));
	return st;
}

HOOK_EXPORT cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w,
					  size_t h, enum cudaMemcpyKind k, cudaStream_t strm)
{
	real_cudaMemcpy2DAsync_t real = real_cudaMemcpy2DAsync();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemcpy2DAsync);
	if (!hook_begin())
		return real(d, dp, s, sp, w, h, k, strm);
	hook_call_init(&c, VMEM_OP_MEMCPY, "cudaMemcpy2DAsync", strm);
	copy_refs(&c, d, s, span2d(dp, w, h), span2d(sp, w, h), k, dp == w);
	RUN_CALL(&c, real(d, dp, s, sp, w, h, k, strm));
	return st;
}

HOOK_EXPORT cudaError_t cudaMemset(void *p, int v, size_t n)
{
	real_cudaMemset_t real = real_cudaMemset();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemset);
	if (!hook_begin())
		return real(p, v, n);
	hook_call_init(&c, VMEM_OP_MEMSET, "cudaMemset", NULL);
	set_ref(&c, p, n, v);
	RUN_CALL(&c, real(p, v, n));
	return st;
}

HOOK_EXPORT cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t strm)
{
	real_cudaMemsetAsync_t real = real_cudaMemsetAsync();
	hook_call_t c;
	cudaError_t st;

	if (!real)
		return MISSING(cudaMemsetAsync);
	if (!hook_begin())
		return real(p, v, n, strm);
	hook_call_init(&c, VMEM_OP_MEMSET, "cudaMemsetAsync", strm);
	set_ref(&c, p, n, v);
	RUN_CALL(&c, real(p, v, n, strm));
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
