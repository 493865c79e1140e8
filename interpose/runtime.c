/* interpose/runtime.c - the runtime behind the hooks: the device pool on
 * CUDA virtual memory, and the reactive layer (DESIGN.md points 1 and 3).
 *
 * This file is the pool's window on the world: it fills pool_ops_t with
 * the real CUDA calls (driver VMM: cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess, cuMemUnmap; runtime: pinned host memory,
 * copies on two copy streams of its own, events), turns the pool's memory
 * events into trace records and stats, and maps pool statuses to CUDA
 * errors.  Every real function is reached through hook_real(), so none of
 * vmem's own calls passes through its hooks.
 *
 * Fences.  A fence is one event, or for a synchronous cudaFree one event
 * per stream the application was seen using (plus the legacy default
 * stream), since cudaFree must not let memory be reused before any
 * stream's earlier work on it completed.  Events are pooled: creating one
 * per call would cost a driver call each.
 *
 * Locking: the pool's mutex covers every ops callback, and with it the
 * event and fence free lists here; the stream table has its own lock
 * because hooks record streams outside the pool.
 */
#include "interpose/runtime.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "interpose/config.h"
#include "interpose/hooks.h"
#include "interpose/host_slots.h"
#include "interpose/log.h"
#include "interpose/pool_ref.h"
#include "interpose/stats.h"
#include "interpose/trace.h"
#include "pool/pool.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* ---- real functions ---- */

typedef cudaError_t (*rt_free_fn)(void *);
typedef cudaError_t (*rt_get_device_fn)(int *);
typedef cudaError_t (*rt_meminfo_fn)(size_t *, size_t *);
typedef cudaError_t (*rt_stream_create_fn)(cudaStream_t *, unsigned int);
typedef cudaError_t (*rt_stream_destroy_fn)(cudaStream_t);
typedef cudaError_t (*rt_event_create_fn)(cudaEvent_t *, unsigned int);
typedef cudaError_t (*rt_event_fn)(cudaEvent_t);
typedef cudaError_t (*rt_event_record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*rt_stream_wait_fn)(cudaStream_t, cudaEvent_t, unsigned int);
typedef cudaError_t (*rt_host_alloc_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*rt_free_host_fn)(void *);
typedef cudaError_t (*rt_memcpy_async_fn)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
typedef cudaError_t (*rt_last_error_fn)(void);
typedef cudaError_t (*rt_is_capturing_fn)(cudaStream_t, enum cudaStreamCaptureStatus *);
typedef cudaError_t (*rt_capture_info_fn)(cudaStream_t, enum cudaStreamCaptureStatus *,
					  unsigned long long *, cudaGraph_t *,
					  const cudaGraphNode_t **, const cudaGraphEdgeData **,
					  size_t *);
typedef cudaError_t (*rt_exchange_mode_fn)(enum cudaStreamCaptureMode *);

typedef CUresult (*cu_reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*cu_addr_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*cu_create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*cu_release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*cu_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*cu_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*cu_set_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*cu_gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static struct {
	rt_free_fn free;
	rt_get_device_fn get_device;
	rt_meminfo_fn meminfo;
	rt_stream_create_fn stream_create;
	rt_stream_destroy_fn stream_destroy;
	rt_event_create_fn event_create;
	rt_event_fn event_destroy, event_query, event_sync;
	rt_event_record_fn event_record;
	rt_stream_wait_fn stream_wait;
	rt_host_alloc_fn host_alloc;
	rt_free_host_fn free_host;
	rt_memcpy_async_fn memcpy_async;
	rt_last_error_fn peek_error, get_error;   /* optional */
	rt_is_capturing_fn is_capturing;          /* optional: graphs */
	rt_capture_info_fn capture_info;
	rt_exchange_mode_fn exchange_mode;
	cu_reserve_fn reserve;
	cu_addr_free_fn addr_free;
	cu_create_fn create;
	cu_release_fn release;
	cu_map_fn map;
	cu_unmap_fn unmap;
	cu_set_access_fn set_access;
	cu_gran_fn gran;
} R;

/* ---- state ---- */

static pool_t *g_pool;
static uintptr_t g_base;
static uint64_t g_va_size;
static bool g_active;
static int g_device;
static cudaStream_t g_d2h, g_h2d;
static uint64_t g_budget;
static uint64_t g_chunk;

/* The API of the hooked call in progress on this thread, for the trace. */
static __thread const char *tl_api;

/* The CUDA error behind the last POOL_EDEVICE on this thread, so that a
 * hook answers with CUDA's own code: an illegal address (a sticky error)
 * must stay an illegal address, not become an out-of-memory that a
 * framework would try to recover from by freeing its cache. */
static __thread cudaError_t tl_dev_err;

/* The calling thread's last call that could not be made resident, until
 * the outermost hook returns (runtime_oom_report): a later successful
 * prepare in the same hook (a rescue, a slice) clears it. */
static __thread struct {
	bool set;
	const char *probed;   /* runtime_oom_explain's reason; NULL: a failed prepare */
	pool_oom_t why;
	char api[48];
	char kernel[80];
} tl_oom;

static int rt_fail(cudaError_t e)
{
	if (e == cudaErrorMemoryAllocation)
		return POOL_ENOMEM;
	tl_dev_err = e;
	return POOL_EDEVICE;
}

#define RT_STREAMS 32
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t g_streams[RT_STREAMS];
static int g_nstreams;

/* Remembers a stream the application uses (for whole-device fences). */
static void stream_seen(cudaStream_t s)
{
	if (!s || s == g_d2h || s == g_h2d)
		return;
	for (int i = 0; i < __atomic_load_n(&g_nstreams, __ATOMIC_ACQUIRE); i++)
		if (g_streams[i] == s)
			return;
	pthread_mutex_lock(&streams_lock);
	bool found = false;
	for (int i = 0; i < g_nstreams; i++)
		found |= g_streams[i] == s;
	if (!found) {
		if (g_nstreams == RT_STREAMS) {
			/* keep the newest: an old one is more likely destroyed */
			memmove(g_streams, g_streams + 1, (RT_STREAMS - 1) * sizeof(cudaStream_t));
			g_nstreams--;
		}
		g_streams[g_nstreams] = s;
		__atomic_store_n(&g_nstreams, g_nstreams + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&streams_lock);
}

static void stream_forget(cudaStream_t s)
{
	pthread_mutex_lock(&streams_lock);
	for (int i = 0; i < g_nstreams; i++)
		if (g_streams[i] == s) {
			memmove(&g_streams[i], &g_streams[i + 1], (g_nstreams - i - 1) * sizeof(cudaStream_t));
			g_nstreams--;
			break;
		}
	pthread_mutex_unlock(&streams_lock);
}

/* ---- capture awareness (the graph section below has the rest) ---- */

/* Guards the graph section's entries (at the end of this file). */
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

/* Captures vmem saw begin and not yet end: while non-zero, vmem's own
 * CUDA calls run in relaxed mode and its fences avoid capturing streams. */
static int g_captures;

static bool captures_active(void)
{
	return __atomic_load_n(&g_captures, __ATOMIC_ACQUIRE) > 0;
}

/* cudaStreamIsCapturing for vmem's own use: false when it fails (the
 * legacy stream while a blocking stream captures answers an error), and
 * an error it left as the thread's last error is cleared, unless the
 * application already had one pending (a query never hides or invents
 * the application's errors). */
static bool query_capturing(cudaStream_t s, bool *failed)
{
	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	cudaError_t before = R.peek_error ? R.peek_error() : cudaSuccess;
	cudaError_t e = R.is_capturing(s, &st);

	*failed = e != cudaSuccess;
	if (*failed && before == cudaSuccess && R.get_error)
		R.get_error();
	return !*failed && st != cudaStreamCaptureStatusNone;
}

/* True when a fence must not be recorded on `s` now: it captures, or it
 * is the legacy stream and recording there would join a capture (the
 * query answers an error then). */
static bool capture_skips(cudaStream_t s)
{
	bool failed;

	if (!captures_active() || !R.is_capturing)
		return false;
	return query_capturing(s, &failed) || failed;
}

/* vmem's own calls must not break the application's capture: in global
 * mode a capture forbids other threads (and its own) "potentially unsafe"
 * calls such as event queries.  Returns the mode to restore, or -1. */
static int relax_begin(void)
{
	enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;

	if (!captures_active() || !R.exchange_mode || R.exchange_mode(&m) != cudaSuccess)
		return -1;
	return (int)m;
}

static void relax_end(int old)
{
	enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)old;

	if (old >= 0)
		R.exchange_mode(&m);
}

int runtime_relax_begin(void)
{
	return relax_begin();
}

void runtime_relax_end(int mode)
{
	relax_end(mode);
}

static bool stream_capturing(cudaStream_t s)
{
	bool failed;

	return R.is_capturing && query_capturing(s, &failed);
}

static bool capture_defer_free(void *ptr, cudaStream_t stream);

/* ---- events and fences (under the pool lock) ---- */

typedef struct rt_fence {
	struct rt_fence *next;
	int n;
	cudaEvent_t ev[RT_STREAMS + 1];
} rt_fence_t;

static cudaEvent_t *g_events;
static int g_nevents, g_capevents;
static rt_fence_t *g_fence_free;

static int event_get(cudaEvent_t *ev)
{
	if (g_nevents) {
		*ev = g_events[--g_nevents];
		return 0;
	}
	cudaError_t e = R.event_create(ev, cudaEventDisableTiming);
	return e == cudaSuccess ? 0 : rt_fail(e);
}

static void event_put(cudaEvent_t ev)
{
	if (g_nevents == g_capevents) {
		int nc = g_capevents ? g_capevents * 2 : 64;
		cudaEvent_t *n = realloc(g_events, (size_t)nc * sizeof(*n));
		if (!n) {
			R.event_destroy(ev);
			return;
		}
		g_events = n;
		g_capevents = nc;
	}
	g_events[g_nevents++] = ev;
}

static void op_fence_destroy(void *ctx, void *fence)
{
	rt_fence_t *f = fence;
	(void)ctx;
	for (int i = 0; i < f->n; i++)
		event_put(f->ev[i]);
	f->next = g_fence_free;
	g_fence_free = f;
}

static int fence_add(rt_fence_t *f, cudaStream_t s)
{
	cudaEvent_t ev;
	cudaError_t e;
	int rc = event_get(&ev);
	if (rc)
		return rc;
	if ((e = R.event_record(ev, s)) != cudaSuccess) {
		event_put(ev);
		return rt_fail(e);
	}
	f->ev[f->n++] = ev;
	return 0;
}

static int op_fence_record(void *ctx, void *stream, bool all, void **out)
{
	rt_fence_t *f = g_fence_free;
	(void)ctx;
	if (f)
		g_fence_free = f->next;
	else if (!(f = malloc(sizeof(*f))))
		return POOL_ENOMEM;
	f->n = 0;
	if (!all) {
		int rc = fence_add(f, (cudaStream_t)stream);
		if (rc) {
			op_fence_destroy(NULL, f);
			return rc;
		}
		*out = f;
		return 0;
	}
	/* cudaFree: the legacy stream (which follows every blocking stream)
	 * and every stream seen; a stream destroyed since is dropped.  While
	 * a capture is active, a capturing stream is skipped (an event
	 * recorded there would become part of the graph, and querying it
	 * would invalidate the capture), and so is the legacy stream when a
	 * blocking stream captures (recording there would join them). */
	if (!capture_skips(NULL)) {
		int rc = fence_add(f, NULL);
		if (rc) {
			op_fence_destroy(NULL, f);
			return rc;
		}
	}
	cudaStream_t s[RT_STREAMS];
	pthread_mutex_lock(&streams_lock);
	int n = g_nstreams;
	memcpy(s, g_streams, (size_t)n * sizeof(cudaStream_t));
	pthread_mutex_unlock(&streams_lock);
	for (int i = 0; i < n; i++)
		if (!capture_skips(s[i]) && fence_add(f, s[i]))
			stream_forget(s[i]);
	*out = f;
	return 0;
}

/* cudaErrorNotReady is an answer, not a failure.  Some CUDA versions
 * also leave it as the thread's last error (PyTorch clears it after its
 * own queries), and frameworks call cudaGetLastError after every launch:
 * a NotReady left there by vmem would be reported as the failure of the
 * application's next kernel.  So it is cleared, and when the application
 * already has an error pending the query is not made at all (it would
 * overwrite that error): the fence counts as pending, which only delays
 * reuse, and a wait settles it when memory is short. */
static int op_fence_query(void *ctx, void *fence)
{
	rt_fence_t *f = fence;
	(void)ctx;
	if (R.peek_error && R.peek_error() != cudaSuccess)
		return 0;
	for (int i = 0; i < f->n; i++) {
		cudaError_t e = R.event_query(f->ev[i]);
		if (e == cudaErrorNotReady) {
			if (R.get_error)
				R.get_error();
			return 0;
		}
		if (e != cudaSuccess) {
			rt_fail(e);
			return -1;
		}
	}
	return 1;
}

static int op_fence_wait(void *ctx, void *fence)
{
	rt_fence_t *f = fence;
	uint64_t t0 = trace_now_ns();
	int rc = 0;
	(void)ctx;
	for (int i = 0; i < f->n; i++) {
		cudaError_t e = R.event_sync(f->ev[i]);
		if (e != cudaSuccess)
			rc = rt_fail(e);
	}
	stats_add(STATS_STALLS, 1);
	stats_add(STATS_STALL_NS, trace_now_ns() - t0);
	return rc;
}

static int op_stream_wait(void *ctx, void *stream, void *fence)
{
	rt_fence_t *f = fence;
	(void)ctx;
	for (int i = 0; i < f->n; i++) {
		cudaError_t e = R.stream_wait((cudaStream_t)stream, f->ev[i], 0);
		if (e != cudaSuccess)
			return rt_fail(e);
	}
	return 0;
}

/* ---- device memory ---- */

static CUmemAllocationProp chunk_prop(void)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = g_device;
	return p;
}

/* Driver and runtime error codes share their numbers for the errors a
 * VMM call can report (1 invalid value, 2 out of memory, 3 not
 * initialised, 700 illegal address, ...), so the code passes through. */
static int cu_status(CUresult r)
{
	if (r == CUDA_SUCCESS)
		return 0;
	return rt_fail((cudaError_t)r);
}

static int op_va_reserve(void *ctx, uint64_t size, uint64_t align, uintptr_t *base)
{
	CUdeviceptr p = 0;
	(void)ctx;
	CUresult r = R.reserve(&p, size, align, 0, 0);
	if (r != CUDA_SUCCESS)
		vmem_error("cuMemAddressReserve of %" PRIu64 " MiB failed with CUDA error %d; "
			   "set VMEM_VA_SIZE smaller", size / MiB, (int)r);
	*base = (uintptr_t)p;
	return cu_status(r);
}

static void op_va_release(void *ctx, uintptr_t base, uint64_t size)
{
	(void)ctx;
	R.addr_free((CUdeviceptr)base, size);
}

static int op_chunk_create(void *ctx, uint64_t size, uint64_t *h)
{
	CUmemAllocationProp prop = chunk_prop();
	CUmemGenericAllocationHandle hh;
	(void)ctx;
	CUresult r = R.create(&hh, size, &prop, 0);
	if (r == CUDA_SUCCESS)
		*h = (uint64_t)hh;
	else if (r != CUDA_ERROR_OUT_OF_MEMORY)
		vmem_error("cuMemCreate of %" PRIu64 " bytes failed with CUDA error %d", size, (int)r);
	return cu_status(r);
}

static void op_chunk_release(void *ctx, uint64_t h)
{
	(void)ctx;
	R.release((CUmemGenericAllocationHandle)h);
}

static CUresult set_rw(uintptr_t va, uint64_t size)
{
	CUmemAccessDesc d;
	memset(&d, 0, sizeof(d));
	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = g_device;
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return R.set_access((CUdeviceptr)va, size, &d, 1);
}

static int map_fail(uintptr_t va, uint64_t size, CUresult r)
{
	vmem_error("mapping %" PRIu64 " bytes at 0x%" PRIxPTR " failed with CUDA error %d",
		   size, va, (int)r);
	return cu_status(r);
}

static int op_map_only(void *ctx, uintptr_t va, uint64_t size, uint64_t h)
{
	(void)ctx;
	CUresult r = R.map((CUdeviceptr)va, size, 0, (CUmemGenericAllocationHandle)h, 0);
	return r == CUDA_SUCCESS ? 0 : map_fail(va, size, r);
}

static int op_map(void *ctx, uintptr_t va, uint64_t size, uint64_t h)
{
	int rc = op_map_only(ctx, va, size, h);
	if (rc)
		return rc;
	CUresult r = set_rw(va, size);
	if (r == CUDA_SUCCESS)
		return 0;
	R.unmap((CUdeviceptr)va, size);
	return map_fail(va, size, r);
}

/* Access over a run of chunks mapped with op_map_only. */
static int op_grant(void *ctx, uintptr_t va, uint64_t size)
{
	(void)ctx;
	CUresult r = set_rw(va, size);
	if (r == CUDA_SUCCESS)
		return 0;
	vmem_error("granting access to %" PRIu64 " bytes at 0x%" PRIxPTR " failed with CUDA error "
		   "%d; VMEM_GRANT_RUNS=0 grants each chunk on its own", size, va, (int)r);
	return cu_status(r);
}

static int op_unmap(void *ctx, uintptr_t va, uint64_t size)
{
	(void)ctx;
	CUresult r = R.unmap((CUdeviceptr)va, size);
	if (r != CUDA_SUCCESS)
		vmem_error("cuMemUnmap at 0x%" PRIxPTR " failed with CUDA error %d", va, (int)r);
	return cu_status(r);
}

static int op_host_alloc(void *ctx, uint64_t size, void **p)
{
	(void)ctx;
	cudaError_t e = R.host_alloc(p, size, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		vmem_error("pinned host allocation of %" PRIu64 " MiB failed (CUDA error %d)", size / MiB, (int)e);
		return POOL_ENOMEM;
	}
	return 0;
}

static void op_host_free(void *ctx, void *p)
{
	(void)ctx;
	R.free_host(p);
}

/* Host slots made with cuMemCreate (VMEM_HOST_MAP) live at device
 * addresses: their copies name no direction (the driver infers it). */
static bool g_slots_mapped;

/* A host slot's own chunk mapped at va, as any chunk is (VMEM_HOST_MAP). */
static int op_map_slot(void *ctx, uintptr_t va, uint64_t size, void *slot)
{
	uint64_t h = host_slots_handle(slot);

	return h ? op_map(ctx, va, size, h) : POOL_EINVAL;
}

/* The first copies each way are timed for the policy (the link's
 * bandwidth: runtime_policy_copy_begin). */
static int op_copy_d2h(void *ctx, void *dst, uintptr_t src, uint64_t n)
{
	(void)ctx;
	void *t = runtime_policy_copy_begin(g_d2h, false, n);
	cudaError_t e = R.memcpy_async(dst, (const void *)src, n,
				       g_slots_mapped ? cudaMemcpyDefault : cudaMemcpyDeviceToHost, g_d2h);
	runtime_policy_copy_end(t, g_d2h, false, n, e == cudaSuccess);
	return e == cudaSuccess ? 0 : rt_fail(e);
}

static int op_copy_h2d(void *ctx, uintptr_t dst, const void *src, uint64_t n)
{
	(void)ctx;
	void *t = runtime_policy_copy_begin(g_h2d, true, n);
	cudaError_t e = R.memcpy_async((void *)dst, src, n,
				       g_slots_mapped ? cudaMemcpyDefault : cudaMemcpyHostToDevice, g_h2d);
	runtime_policy_copy_end(t, g_h2d, true, n, e == cudaSuccess);
	return e == cudaSuccess ? 0 : rt_fail(e);
}

static uint64_t op_now(void *ctx)
{
	(void)ctx;
	return trace_now_ns();
}

/* Memory events become trace records and stats. */
static void op_record(void *ctx, const pool_event_t *ev)
{
	static const trace_mem_kind_t kinds[] = {
		[POOL_EV_ALLOC] = TRACE_MEM_ALLOC, [POOL_EV_FREE] = TRACE_MEM_FREE,
		[POOL_EV_OFFLOAD] = TRACE_MEM_OFFLOAD, [POOL_EV_PREFETCH] = TRACE_MEM_PREFETCH,
		[POOL_EV_FAULT_IN] = TRACE_MEM_FAULT_IN, [POOL_EV_EVICT] = TRACE_MEM_EVICT,
		[POOL_EV_OOM] = TRACE_MEM_OOM, [POOL_EV_DROP] = TRACE_MEM_DROP,
		[POOL_EV_HOST_MAP] = TRACE_MEM_HOST_MAP,
	};
	(void)ctx;
	switch (ev->kind) {
	case POOL_EV_ALLOC:
		stats_gauge_add(STATS_ALLOCATED, (int64_t)ev->bytes);
		break;
	case POOL_EV_FREE:
		stats_gauge_add(STATS_ALLOCATED, -(int64_t)ev->bytes);
		break;
	case POOL_EV_FAULT_IN:
		runtime_policy_note_fault(ev->mapped > 0);
		stats_add(STATS_MISSES, 1);
		stats_add(STATS_BYTES_FAULTED_IN, ev->mapped);
		break;
	case POOL_EV_EVICT:
		runtime_policy_note_pressure();
		stats_add(STATS_EVICTIONS, 1);
		stats_add(STATS_BYTES_EVICTED, ev->mapped);
		break;
	case POOL_EV_OFFLOAD:
		stats_add(STATS_OFFLOADS, 1);
		stats_add(STATS_BYTES_OFFLOADED, ev->mapped);
		break;
	case POOL_EV_PREFETCH:
		stats_add(STATS_PREFETCHES, 1);
		stats_add(STATS_BYTES_PREFETCHED, ev->mapped);
		break;
	case POOL_EV_OOM:
		runtime_policy_note_pressure();
		stats_add(STATS_OOM, 1);
		break;
	case POOL_EV_DROP:
		break;   /* counted by the pool ("pages dropped as dead") */
	case POOL_EV_HOST_MAP:
		break;   /* counted by the pool ("mapped from host") */
	}
	stats_gauge_set(STATS_RESIDENT, ev->resident);
	stats_gauge_set(STATS_MAPPED, ev->resident);
	stats_gauge_set(STATS_HOST, ev->host);
	if (trace_enabled())
		trace_mem(kinds[ev->kind], ev->alloc_id, ev->ptr, ev->offset, ev->bytes, ev->mapped,
			  ev->stream, ev->resident, ev->host, ev->budget, tl_api);
}

/* ---- start-up ---- */

/* The host's memory: the most host slots there can be. */
static uint64_t host_ram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 64 * GiB;
}

#define RESOLVE(field, name) do { \
	*(void **)&R.field = hook_real_load(name); \
	if (!R.field) { \
		vmem_error("%s not found in the CUDA libraries; the pool needs it", name); \
		return -1; \
	} } while (0)

static int resolve_all(void)
{
	RESOLVE(free, "cudaFree");
	RESOLVE(get_device, "cudaGetDevice");
	RESOLVE(meminfo, "cudaMemGetInfo");
	RESOLVE(stream_create, "cudaStreamCreateWithFlags");
	RESOLVE(stream_destroy, "cudaStreamDestroy");
	RESOLVE(event_create, "cudaEventCreateWithFlags");
	RESOLVE(event_destroy, "cudaEventDestroy");
	RESOLVE(event_query, "cudaEventQuery");
	RESOLVE(event_sync, "cudaEventSynchronize");
	RESOLVE(event_record, "cudaEventRecord");
	RESOLVE(stream_wait, "cudaStreamWaitEvent");
	RESOLVE(host_alloc, "cudaHostAlloc");
	RESOLVE(free_host, "cudaFreeHost");
	RESOLVE(memcpy_async, "cudaMemcpyAsync");
	*(void **)&R.peek_error = hook_real_load("cudaPeekAtLastError");
	*(void **)&R.get_error = hook_real_load("cudaGetLastError");
	*(void **)&R.is_capturing = hook_real_load("cudaStreamIsCapturing");
	*(void **)&R.capture_info = hook_real_load("cudaStreamGetCaptureInfo");
	*(void **)&R.exchange_mode = hook_real_load("cudaThreadExchangeStreamCaptureMode");
	return 0;
}

/* The driver functions: libcuda.so.1 is loaded by cudart's first call. */
static int resolve_driver(void)
{
	RESOLVE(reserve, "cuMemAddressReserve");
	RESOLVE(addr_free, "cuMemAddressFree");
	RESOLVE(create, "cuMemCreate");
	RESOLVE(release, "cuMemRelease");
	RESOLVE(map, "cuMemMap");
	RESOLVE(unmap, "cuMemUnmap");
	RESOLVE(set_access, "cuMemSetAccess");
	RESOLVE(gran, "cuMemGetAllocationGranularity");
	return 0;
}

/* fork (DataLoader workers): the child cannot use the parent's CUDA
 * context, so vmem goes pass-through there and CUDA answers the child as
 * it would without vmem.  The child therefore never touches the pool,
 * and the parent does not lock the pool around fork: taking it in a
 * prepare handler would deadlock against the trace's handler (registered
 * later, so run first, it takes the trace lock, which a thread inside
 * the pool takes while it holds the pool lock), and would make fork wait
 * out a host wait on the eviction path. */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;

static void atfork_child(void)
{
	__atomic_store_n(&g_active, false, __ATOMIC_RELEASE);
	/* a thread that no longer exists may have held them */
	pthread_mutex_init(&streams_lock, NULL);
	pthread_mutex_init(&graph_lock, NULL);
	pthread_mutex_init(&vmm_lock, NULL);
}

int runtime_init(void)
{
	size_t free_b = 0, total_b = 0, gran = 0;
	cudaError_t e;

	if (resolve_all())
		return -1;
	/* cudaFree(NULL) creates the primary context, as frameworks do */
	if ((e = R.free(NULL)) != cudaSuccess || (e = R.get_device(&g_device)) != cudaSuccess) {
		vmem_error("the CUDA context could not be created (CUDA error %d)", (int)e);
		return -1;
	}
	if (resolve_driver())
		return -1;
	CUmemAllocationProp prop = chunk_prop();
	CUresult r = R.gran(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS || !gran) {
		vmem_error("device %d does not support virtual memory management "
			   "(cuMemGetAllocationGranularity: CUDA error %d); vmem needs it", g_device, (int)r);
		return -1;
	}
	if ((e = R.meminfo(&free_b, &total_b)) != cudaSuccess) {
		vmem_error("cudaMemGetInfo failed (CUDA error %d)", (int)e);
		return -1;
	}

	pool_config_t c;
	memset(&c, 0, sizeof(c));
	c.granularity = gran;
	if (vmem_cfg.chunk_size % gran) {
		vmem_error("VMEM_CHUNK_SIZE=%" PRIu64 ": not a multiple of the device granularity %zu; "
			   "use a multiple of it", vmem_cfg.chunk_size, gran);
		return -1;
	}
	uint64_t budget, reserve = vmem_device_reserve(&vmem_cfg, total_b);
	if (vmem_cfg.device_limit) {
		budget = vmem_cfg.device_limit;
		if (budget > free_b) {
			vmem_warn("VMEM_DEVICE_LIMIT=%" PRIu64 " MiB is more than the free device memory, "
				  "%zu MiB; using the free memory", budget / MiB, free_b / MiB);
			budget = free_b;
		}
	} else {
		budget = free_b > reserve ? free_b - reserve : 0;
	}
	/* 0: chosen from the budget (pool_chunk_auto) */
	c.chunk_size = vmem_cfg.chunk_size ? vmem_cfg.chunk_size : pool_chunk_auto(budget, gran);
	budget -= budget % c.chunk_size;
	if (budget < c.chunk_size) {
		vmem_error("device budget %" PRIu64 " bytes is below one chunk (%" PRIu64 " bytes): "
			   "free device memory %zu MiB of %zu MiB, VMEM_DEVICE_RESERVE %" PRIu64 " MiB%s; "
			   "lower VMEM_DEVICE_RESERVE or set VMEM_DEVICE_LIMIT",
			   budget, c.chunk_size, free_b / MiB, total_b / MiB, reserve / MiB,
			   vmem_cfg.device_reserve == VMEM_SIZE_AUTO ?
			   " (auto: 1/8 of the device, 32 MiB to 1 GiB)" : "");
		return -1;
	}
	c.budget = budget;
	c.lazy_map = vmem_cfg.map == VMEM_MAP_LAZY;
	c.grant_runs = vmem_cfg.grant_runs;
	c.handoff = vmem_cfg.handoff;
	c.range_fit = vmem_cfg.range_fit != VMEM_FIT_EXACT;
	c.range_pending = vmem_cfg.range_fit == VMEM_FIT_PENDING;
	c.host_limit = vmem_cfg.host_limit;
	c.small_threshold = vmem_cfg.small_threshold < c.chunk_size / 2 ?
		vmem_cfg.small_threshold : c.chunk_size / 2;
	uint64_t va = vmem_cfg.va_size;
	if (!va) {
		/* room for the whole device sixteen times over: ranges are
		 * never reused before their free fence, freed ranges are
		 * cached, and PyTorch's expandable segments reserve 1.125x the
		 * device each (one per stream and pool) from it */
		va = 16 * (uint64_t)total_b;
		if (va < 64 * GiB)
			va = 64 * GiB;
	}
	va += c.chunk_size - 1;
	va -= va % c.chunk_size;
	c.va_size = va;

	if (R.stream_create(&g_d2h, cudaStreamNonBlocking) != cudaSuccess ||
	    R.stream_create(&g_h2d, cudaStreamNonBlocking) != cudaSuccess) {
		vmem_error("could not create the copy streams");
		return -1;
	}
	pool_ops_t ops = {
		.ctx = NULL, .d2h_stream = g_d2h, .h2d_stream = g_h2d,
		.va_reserve = op_va_reserve, .va_release = op_va_release,
		.chunk_create = op_chunk_create, .chunk_release = op_chunk_release,
		.map = op_map, .unmap = op_unmap,
		.map_only = op_map_only, .grant = op_grant,
		.host_alloc = op_host_alloc, .host_free = op_host_free,
		.copy_d2h = op_copy_d2h, .copy_h2d = op_copy_h2d,
		.fence_record = op_fence_record, .fence_query = op_fence_query,
		.fence_wait = op_fence_wait, .fence_destroy = op_fence_destroy,
		.stream_wait = op_stream_wait, .now_ns = op_now, .record = op_record,
	};
	/* VMEM_HOST_MAP: slots the device can map at a page's address */
	if (vmem_cfg.host_map != VMEM_HOST_MAP_OFF) {
		const char *why = "";
		uint64_t window = c.host_limit ? c.host_limit : host_ram();
		/* auto trusts the path once a probe carried bytes through it;
		 * 1 is the user's word (the simulator's dry-run moves no bytes) */
		int hs = host_slots_init(g_device, c.chunk_size, window,
					 vmem_cfg.host_map == VMEM_HOST_MAP_AUTO, &why);

		if (hs > 0) {
			c.host_map = true;
			g_slots_mapped = true;
			ops.host_alloc = host_slots_alloc;
			ops.host_free = host_slots_free;
			ops.map_slot = op_map_slot;
		} else if (vmem_cfg.host_map == VMEM_HOST_MAP_ON || hs < 0) {
			vmem_error("VMEM_HOST_MAP%s: host memory cannot be mapped for the device: %s; "
				   "set VMEM_HOST_MAP=0", vmem_cfg.host_map == VMEM_HOST_MAP_ON ? "=1" :
				   " (auto)", why);
			if (vmem_cfg.host_map == VMEM_HOST_MAP_ON)
				return -1;
		} else {
			vmem_debug("VMEM_HOST_MAP (auto) off: %s", why);
		}
	}
	pool_status_t st = pool_create(&c, &ops, &g_pool);
	if (st != POOL_OK) {
		vmem_error("the device pool could not be created: %s", pool_strerror(st));
		return -1;
	}
	g_base = pool_base(g_pool);
	g_va_size = c.va_size;
	g_budget = c.budget;
	g_chunk = c.chunk_size;
	pthread_atfork(NULL, NULL, atfork_child);
	runtime_policy_init(g_pool, c.budget, c.chunk_size);
	vmem_info("pool: budget %" PRIu64 " MiB of %zu MiB free (%zu MiB total, reserve %" PRIu64
		  " MiB), chunk %" PRIu64 " KiB, small below %" PRIu64 " KiB, virtual range %" PRIu64
		  " GiB at 0x%" PRIxPTR ", host limit %s%" PRIu64 " MiB, host mapping %s",
		  c.budget / MiB, free_b / MiB, total_b / MiB,
		  vmem_cfg.device_limit ? 0 : reserve / MiB, c.chunk_size / 1024,
		  c.small_threshold / 1024, c.va_size / GiB, g_base,
		  c.host_limit ? "" : "unlimited/", c.host_limit / MiB, c.host_map ? "on" : "off");
	__atomic_store_n(&g_active, true, __ATOMIC_RELEASE);
	return 0;
}

static void print_line(const char *line, void *ctx)
{
	(void)ctx;
	vmem_log_raw(line);
}

void runtime_shutdown(void)
{
	if (!__atomic_exchange_n(&g_active, false, __ATOMIC_ACQ_REL))
		return;
	if (vmem_cfg.stats) {
		pool_stats_t s;
		pool_get_stats(g_pool, &s);
		pool_stats_print(&s, print_line, NULL);
	}
	runtime_policy_shutdown();
	/* The application's memory stays mapped: CUDA tears the context down
	 * after this, and a late cudaFree from another atexit handler must
	 * not touch an unmapped range. */
}

bool runtime_active(void)
{
	return __atomic_load_n(&g_active, __ATOMIC_ACQUIRE);
}

/* ---- the hooks' entry points ---- */

/* The CUDA answer to a failed pool request.  Out of device memory, of
 * host memory or of virtual range is cudaErrorMemoryAllocation, as CUDA
 * answers when it runs out; a failed device operation is CUDA's own
 * error code (tl_dev_err), so a sticky error surfaces as itself. */
static cudaError_t pool_error(pool_status_t st, uint64_t bytes, const char *what)
{
	if (st == POOL_EINVAL)
		return cudaErrorInvalidValue;
	if (st == POOL_EDEVICE) {
		cudaError_t e = tl_dev_err != cudaSuccess ? tl_dev_err : cudaErrorUnknown;
		vmem_error("a device operation failed while %s (%" PRIu64 " bytes): CUDA error %d",
			   what, bytes, (int)e);
		return e;
	}
	if (st == POOL_EHOST) {
		pool_stats_t s;
		pool_get_stats(g_pool, &s);
		vmem_error("pinned host memory exhausted while %s (%" PRIu64 " bytes): %" PRIu64
			   " MiB of host memory hold offloaded data, VMEM_HOST_LIMIT=%" PRIu64
			   " MiB (0 = unlimited); raise VMEM_HOST_LIMIT or lower the batch size",
			   what, bytes, s.host.cur / MiB, vmem_cfg.host_limit / MiB);
	} else if (st == POOL_EVA) {
		vmem_error("vmem's virtual range (%" PRIu64 " GiB) is exhausted while %s (%" PRIu64
			   " bytes); raise VMEM_VA_SIZE", g_va_size / GiB, what, bytes);
	} else {
		vmem_debug("out of device memory while %s (%" PRIu64 " bytes, budget %" PRIu64 " MiB)",
			   what, bytes, g_budget / MiB);
	}
	return cudaErrorMemoryAllocation;
}

void runtime_oom_name(const char *api, const char *kernel)
{
	if (!tl_oom.set)
		return;
	snprintf(tl_oom.api, sizeof(tl_oom.api), "%s", api ? api : "a call");
	snprintf(tl_oom.kernel, sizeof(tl_oom.kernel), "%s", kernel ? kernel : "");
}

/* "34 MiB", "12.06 GiB" */
static const char *size_text(char *buf, size_t n, uint64_t b)
{
	if (b >= GiB)
		snprintf(buf, n, "%.2f GiB", (double)b / (double)GiB);
	else
		snprintf(buf, n, "%.0f MiB", (double)b / (double)MiB);
	return buf;
}

/* At most this many out-of-memory answers are explained (an application
 * that probes for the largest batch that fits meets many); the stats
 * count every one.  True for the ones to explain. */
#define OOM_EXPLAINED 8

static bool oom_explain_next(void)
{
	static unsigned explained;
	unsigned k = __atomic_fetch_add(&explained, 1, __ATOMIC_RELAXED);

	if (k == OOM_EXPLAINED)
		vmem_error("further out-of-memory answers are not explained (VMEM_STATS=1 counts "
			   "them: \"out-of-memory answers\")");
	return k < OOM_EXPLAINED;
}

void runtime_oom_report(void)
{
	const pool_oom_t *o = &tl_oom.why;
	char what[160], need[24], budget[24], stated[24], extra[400] = "";
	uint32_t bpages;

	if (!tl_oom.set)
		return;
	tl_oom.set = false;
	if (!oom_explain_next())
		return;
	bpages = (uint32_t)(o->budget / o->chunk);
	snprintf(what, sizeof(what), "%s%s%s%s", tl_oom.api[0] ? tl_oom.api : "a call",
		 tl_oom.kernel[0] ? " (kernel " : "", tl_oom.kernel, tl_oom.kernel[0] ? ")" : "");
	size_text(need, sizeof(need), (uint64_t)o->pages * o->chunk);
	size_text(budget, sizeof(budget), o->budget);
	size_text(stated, sizeof(stated), (uint64_t)o->stated * o->chunk);
	if (o->stated < o->pages)
		snprintf(extra, sizeof(extra), "; %u of those pages only because pointer arguments "
			 "of unknown size are taken to the end of their allocations (%s with the "
			 "stated sizes alone%s; docs/launch-paths.md)", o->pages - o->stated, stated,
			 o->stated <= bpages ? ", which would fit" : "");
	if (o->small)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "; %u of them slabs "
			 "of small allocations", o->small);
	if (o->pages > bpages) {
		vmem_error("%s is answered out of memory: it needs %u pages of %" PRIu64 " MiB "
			   "resident at once (%s), more than the budget of %s (%u pages)%s.  Raise "
			   "the budget (VMEM_DEVICE_LIMIT, or a smaller VMEM_DEVICE_RESERVE) or "
			   "lower the batch size", what, o->pages, o->chunk / MiB, need, budget,
			   bpages, extra);
	} else if (tl_oom.probed) {
		vmem_error("%s is answered out of memory: its memory needs %u pages (%s) of the "
			   "budget's %u (%s), but %s%s.  Raise the budget (VMEM_DEVICE_LIMIT, or a "
			   "smaller VMEM_DEVICE_RESERVE) or lower the batch size", what, o->pages, need,
			   bpages, budget, tl_oom.probed, extra);
	} else if (o->held < bpages) {
		char held[24];

		vmem_error("%s is answered out of memory: it needs %u pages (%s) resident at "
			   "once, within the budget of %s, but the device gave vmem only %s (%u "
			   "pages)%s: other processes or libraries use the rest.  Set "
			   "VMEM_DEVICE_LIMIT below what the device has free", what, o->pages, need,
			   budget, size_text(held, sizeof(held), (uint64_t)o->held * o->chunk),
			   o->held, extra);
	} else if (o->locked_other) {
		vmem_error("%s is answered out of memory: it needs %u pages (%s) resident at "
			   "once, within the budget of %s (%u pages), but %u of the budget's pages "
			   "were locked by calls in flight on other threads%s.  Raise the budget "
			   "(VMEM_DEVICE_LIMIT) or lower the batch size", what, o->pages, need,
			   budget, bpages, o->locked_other, extra);
	} else {
		vmem_error("%s is answered out of memory: it needs %u pages (%s) resident at "
			   "once, within the budget of %s (%u pages), and nothing else was locked, "
			   "yet vmem could not free the room%s - please report it with the "
			   "output of VMEM_LOG=debug and a VMEM_TRACE file", what, o->pages, need,
			   budget, bpages, extra);
	}
}

cudaError_t runtime_malloc(void **ptr, size_t bytes, cudaStream_t stream, const char *api)
{
	uintptr_t a;
	uint64_t id;

	if (!ptr)
		return cudaErrorInvalidValue;
	if (!bytes) {
		*ptr = NULL;
		return cudaSuccess;
	}
	stream_seen(stream);
	tl_api = api;
	tl_dev_err = cudaSuccess;
	int mode = relax_begin();
	pool_status_t st = pool_malloc(g_pool, bytes, &a, &id);
	relax_end(mode);
	tl_api = NULL;
	if (st != POOL_OK) {
		static uint64_t said;   /* the size last explained: a caching
					   allocator retries it after emptying its cache */
		uint64_t whole = g_chunk ? (bytes + g_chunk - 1) / g_chunk * g_chunk : bytes;

		/* the application's own allocation that no budget state could
		 * hold (vmem's own fall back when theirs fail: no line) */
		if (st == POOL_ENOMEM && whole > g_budget && strncmp(api, "vmem:", 5) != 0 &&
		    __atomic_exchange_n(&said, (uint64_t)bytes, __ATOMIC_RELAXED) != bytes &&
		    oom_explain_next()) {
			char b[24], n[24];

			vmem_error("%s of %s is answered out of memory: an allocation larger than the "
				   "budget (%s) cannot be resident, and vmem takes one only with host "
				   "mapping (VMEM_HOST_MAP, where the device maps host memory, and "
				   "VMEM_MAP=lazy).  Raise the "
				   "budget (VMEM_DEVICE_LIMIT, or a smaller VMEM_DEVICE_RESERVE) or lower "
				   "the batch size", api, size_text(n, sizeof(n), bytes),
				   size_text(b, sizeof(b), g_budget));
		}
		return pool_error(st, bytes, "allocating");
	}
	runtime_policy_allocated(id, bytes);
	*ptr = (void *)a;
	return cudaSuccess;
}

cudaError_t runtime_free(void *ptr, cudaStream_t stream, bool async, const char *api)
{
	if (!ptr)
		return cudaSuccess;
	/* CUDA frees at the graph's replay: vmem keeps the memory as long as
	 * the graph can be replayed (no fence may go on a capturing stream) */
	if (async && captures_active() && stream_capturing(stream) &&
	    capture_defer_free(ptr, stream))
		return cudaSuccess;
	runtime_policy_freed_ptr((uintptr_t)ptr);
	stream_seen(stream);
	tl_api = api;
	tl_dev_err = cudaSuccess;
	int mode = relax_begin();
	pool_status_t st = pool_free(g_pool, (uintptr_t)ptr, stream, !async);
	relax_end(mode);
	tl_api = NULL;
	if (st == POOL_OK)
		return cudaSuccess;
	return st == POOL_EINVAL ? cudaErrorInvalidValue : pool_error(st, 0, "freeing");
}

cudaError_t runtime_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	uint64_t fr, budget;
	size_t rf = 0, rt = 0;
	pool_stats_t s;

	if (!free_bytes || !total_bytes)
		return cudaErrorInvalidValue;
	pool_mem_info(g_pool, &fr, &budget);
	pool_get_stats(g_pool, &s);
	/* never more than the device could really give: what is free there
	 * plus what the pool holds without using it.  When the device cannot
	 * say (a sticky error), its error is the answer, as without vmem. */
	cudaError_t e = R.meminfo(&rf, &rt);
	if (e != cudaSuccess)
		return e;
	uint64_t spare = s.held.cur > s.resident.cur ? s.held.cur - s.resident.cur : 0;
	if (fr > rf + spare)
		fr = rf + spare;
	*free_bytes = fr;
	*total_bytes = budget;
	return cudaSuccess;
}

void runtime_budget_free(uint64_t *budget, uint64_t *free_bytes, uint64_t *chunk)
{
	uint64_t fr = 0, b = 0;

	if (runtime_active())
		pool_mem_info(g_pool, &fr, &b);
	if (budget)
		*budget = b;
	if (free_bytes)
		*free_bytes = fr;
	if (chunk)
		*chunk = runtime_active() ? pool_config(g_pool)->chunk_size : 0;
}

bool runtime_host_mapping(void)
{
	return runtime_active() && g_slots_mapped;
}

bool runtime_budget_binds(void)
{
	pool_stats_t s;

	if (!runtime_active())
		return false;
	pool_get_stats(g_pool, &s);
	return s.evictions || s.pages_dropped;
}

int runtime_device(void)
{
	return g_device;
}

void runtime_stream_destroyed(cudaStream_t stream)
{
	stream_forget(stream);
	/* the pool fences a stream's uses only when something waits for
	 * them, which it cannot do once the stream is gone */
	if (runtime_active())
		pool_stream_destroyed(g_pool, stream);
}

cudaError_t runtime_unseen_before(cudaStream_t stream)
{
	pool_status_t st;

	if (!runtime_active() || !(st = pool_fill_rests(g_pool, stream)))
		return cudaSuccess;
	vmem_error("a launch whose parameters vmem cannot see may touch any byte, but bringing "
		   "back the bytes vmem kept on the host failed (%s); the launch is refused - the "
		   "device reported an error (see above), or set VMEM_DISABLE=1 to run without vmem",
		   pool_strerror(st));
	return cudaErrorMemoryAllocation;
}

void runtime_unseen_write(cudaStream_t stream)
{
	stats_add(STATS_UNSEEN_WRITES, 1);
	if (runtime_active())
		pool_note_unseen_write(g_pool, stream);
}

void runtime_va(uintptr_t *base, uint64_t *size)
{
	*base = g_va_size ? g_base : 0;
	*size = g_va_size;
}

bool runtime_owns(uintptr_t p)
{
	return g_va_size && p - g_base < g_va_size;
}

/* The pool's view of a call's refs: on the stack for the common case, on
 * the heap for calls with many (a foreach kernel); NULL when the heap
 * cannot hold them. */
typedef struct {
	pool_ref_t *pr;
	pool_span_t *sp;
	pool_ref_t pr_inline[VMEM_INLINE_REFS];
	pool_span_t sp_inline[VMEM_INLINE_REFS];
} ref_buf_t;

static bool ref_buf_init(ref_buf_t *b, int n)
{
	b->pr = b->pr_inline;
	b->sp = b->sp_inline;
	if (n <= VMEM_INLINE_REFS)
		return true;
	b->pr = malloc((size_t)n * sizeof(*b->pr));
	b->sp = malloc((size_t)n * sizeof(*b->sp));
	if (b->pr && b->sp)
		return true;
	free(b->pr);
	free(b->sp);
	b->pr = NULL;
	b->sp = NULL;
	return false;
}

static void ref_buf_free(ref_buf_t *b)
{
	if (b->pr != b->pr_inline) {
		free(b->pr);
		free(b->sp);
	}
}

/* The pool's view of the hooks' refs (an unused workspace: no range). */
static void pool_refs_of(const vmem_ref_t *refs, int n, pool_ref_t *pr)
{
	for (int i = 0; i < n; i++) {
		bool empty = vmem_ref_empty(refs[i].access);

		pr[i] = pool_ref_of(empty ? 0 : refs[i].ptr, refs[i].bytes, refs[i].access);
	}
}

/* Counts a call that could not be made resident for runtime_oom_report:
 * `reason` NULL after a failed acquire, else why the hook tried none. */
static void oom_note(const pool_ref_t *pr, int n, const char *reason)
{
	if (!pool_oom_need(g_pool, pr, n, &tl_oom.why))
		return;
	tl_oom.set = true;
	tl_oom.probed = reason;
	tl_oom.api[0] = tl_oom.kernel[0] = '\0';
}

void runtime_oom_explain(const vmem_ref_t *refs, int n, const char *reason)
{
	ref_buf_t b;

	if (tl_oom.set || !g_pool || !ref_buf_init(&b, n))
		return;
	pool_refs_of(refs, n, b.pr);
	oom_note(b.pr, n, reason);
	ref_buf_free(&b);
}

cudaError_t runtime_prepare(const vmem_ref_t *refs, int n, cudaStream_t stream, trace_ref_t *out,
			    bool last_resort)
{
	ref_buf_t b;
	pool_ref_t *pr;
	pool_span_t *sp;
	bool any = false;

	for (int i = 0; i < n; i++) {
		out[i].alloc_id = 0;
		out[i].offset = 0;
		/* an unused workspace: untouched, no bytes (vmem_ref_empty) */
		out[i].bytes = vmem_ref_empty(refs[i].access) ? 0 : refs[i].bytes;
		out[i].ptr = refs[i].ptr;
		out[i].access = refs[i].access;
		out[i].role = refs[i].role;
		any |= runtime_owns(refs[i].ptr);
	}
	if (!any)
		return cudaSuccess;
	if (!ref_buf_init(&b, n)) {
		vmem_error("a call with %d tensors: no host memory to track them; refused", n);
		return cudaErrorMemoryAllocation;
	}
	pr = b.pr;
	sp = b.sp;
	pool_refs_of(refs, n, pr);
	stream_seen(stream);
	tl_dev_err = cudaSuccess;
	int mode = relax_begin();
	pool_status_t st = pool_acquire_flags(g_pool, pr, n, stream, sp,
					      last_resort ? POOL_ACQ_HOST_STATED : 0);
	relax_end(mode);
	if (st == POOL_ELOST) {
		/* issue 11: never compute on bytes a liveness plan dropped */
		for (int i = 0; i < n; i++) {
			char why[768];

			if (!sp[i].lost)
				continue;
			if (runtime_policy_explain_loss(sp[i].alloc_id, sp[i].offset, sp[i].bytes,
							why, sizeof(why)))
				vmem_error("%s (the call's '%s' reads %" PRIu64 " bytes at offset %"
					   PRIu64 ")", why, refs[i].role ? refs[i].role : "?",
					   sp[i].bytes, sp[i].offset);
			else
				vmem_error("a call reads bytes that vmem dropped as dead: allocation %" PRIu64
					   ", offset %" PRIu64 ", %" PRIu64 " bytes (at %p); the liveness "
					   "plan was wrong for this program - set VMEM_LIVENESS=off",
					   sp[i].alloc_id, sp[i].offset, sp[i].bytes, (void *)refs[i].ptr);
		}
		ref_buf_free(&b);
		return cudaErrorIllegalAddress;
	}
	if (st != POOL_OK) {
		uint64_t total = 0;
		for (int i = 0; i < n; i++)
			total += refs[i].bytes;
		if (st == POOL_ENOMEM)
			oom_note(pr, n, NULL);
		ref_buf_free(&b);
		return pool_error(st, total, "making a call's memory resident");
	}
	tl_oom.set = false;
	for (int i = 0; i < n; i++) {
		if (!sp[i].alloc_id)
			continue;
		out[i].alloc_id = sp[i].alloc_id;
		out[i].offset = sp[i].offset;
		out[i].bytes = sp[i].bytes;
	}
	ref_buf_free(&b);
	return cudaSuccess;
}

void runtime_complete(const trace_ref_t *refs, int n, cudaStream_t stream)
{
	ref_buf_t b;
	pool_ref_t *pr;
	pool_span_t *sp;
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= refs[i].alloc_id != 0;
	if (!any)
		return;
	/* The pages stay locked until released: if the host cannot hold the
	 * list, release them one at a time from a stack copy. */
	if (!ref_buf_init(&b, n)) {
		for (int i = 0; i < n; i++)
			runtime_complete(&refs[i], 1, stream);
		return;
	}
	pr = b.pr;
	sp = b.sp;
	for (int i = 0; i < n; i++) {
		pr[i] = pool_ref_of(refs[i].ptr, refs[i].bytes, refs[i].access);
		sp[i].alloc_id = refs[i].alloc_id;
		sp[i].offset = refs[i].offset;
		sp[i].bytes = refs[i].bytes;
	}
	int mode = relax_begin();
	pool_release(g_pool, pr, sp, n, stream);
	relax_end(mode);
	ref_buf_free(&b);
}

/* ---- CUDA graphs (see runtime.h) ----
 *
 * A set of ranges is shared by a capture, the graph it became and that
 * graph's instantiations (users counts them).  Entries map a capture id,
 * a cudaGraph_t or a cudaGraphExec_t to their set.  When the last user
 * goes, the memory the capture freed with cudaFreeAsync is freed for
 * real, with a fence on every stream (the graph may have been replayed
 * anywhere).  One lock, never held while calling into the pool except for
 * those deferred frees (the pool never calls back). */

enum { RT_G_CAPTURE, RT_G_GRAPH, RT_G_EXEC };

typedef struct {
	uintptr_t ptr;
	uint64_t bytes;
	uint8_t access;
} rt_gref_t;

typedef struct {
	int users;
	int n, cap;
	rt_gref_t *refs;
	int nfree, capfree;
	void **frees;
	bool unseen;           /* a captured call vmem could not see into */
} rt_gset_t;

typedef struct rt_gentry {
	uint64_t key;
	int kind;
	bool counted;          /* a capture vmem saw begin (counted in g_captures) */
	rt_gset_t *set;
	struct rt_gentry *next;
} rt_gentry_t;

static rt_gentry_t *g_gentries;

/* (graph_lock) */
static rt_gentry_t *gentry_find(int kind, uint64_t key)
{
	for (rt_gentry_t *e = g_gentries; e; e = e->next)
		if (e->kind == kind && e->key == key)
			return e;
	return NULL;
}

/* (graph_lock) A new entry with a new set, or NULL. */
static rt_gentry_t *gentry_new(int kind, uint64_t key, rt_gset_t *set)
{
	rt_gentry_t *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (!set && !(set = calloc(1, sizeof(*set)))) {
		free(e);
		return NULL;
	}
	set->users++;
	e->kind = kind;
	e->key = key;
	e->set = set;
	e->next = g_gentries;
	g_gentries = e;
	return e;
}

/* (graph_lock) Unlinks e; returns its set when e was its last user (the
 * caller frees it outside the lock), else NULL. */
static rt_gset_t *gentry_drop(rt_gentry_t *e)
{
	rt_gentry_t **pp;
	rt_gset_t *set = e->set;

	for (pp = &g_gentries; *pp && *pp != e; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = e->next;
	if (e->counted)
		__atomic_sub_fetch(&g_captures, 1, __ATOMIC_ACQ_REL);
	free(e);
	return --set->users == 0 ? set : NULL;
}

static void gset_free(rt_gset_t *set)
{
	if (!set)
		return;
	for (int i = 0; i < set->nfree; i++) {
		vmem_debug("graph destroyed: freeing %p, freed inside its capture", set->frees[i]);
		runtime_free(set->frees[i], NULL, false, "cudaFreeAsync (captured)");
	}
	free(set->refs);
	free(set->frees);
	free(set);
}

uint64_t runtime_capture_id(cudaStream_t stream)
{
	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	unsigned long long id = 0;
	cudaError_t before, e;

	if (!R.capture_info)
		return 0;
	before = R.peek_error ? R.peek_error() : cudaSuccess;
	e = R.capture_info(stream, &st, &id, NULL, NULL, NULL, NULL);
	if (e != cudaSuccess) {
		if (before == cudaSuccess && R.get_error)
			R.get_error();     /* vmem's query must not become the app's error */
		return 0;
	}
	return st == cudaStreamCaptureStatusNone ? 0 : id;
}

void runtime_capture_begin(cudaStream_t stream)
{
	uint64_t id = runtime_capture_id(stream);
	rt_gentry_t *e;

	if (!id)
		return;
	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_CAPTURE, id);
	if (!e)
		e = gentry_new(RT_G_CAPTURE, id, NULL);
	if (e && !e->counted) {
		e->counted = true;
		__atomic_add_fetch(&g_captures, 1, __ATOMIC_ACQ_REL);
	}
	pthread_mutex_unlock(&graph_lock);
	if (!e)
		vmem_error("no host memory to track a stream capture; the graph's memory will "
			   "not be made resident when it is launched");
}

/* (graph_lock) The entry of the capture `stream` is in, made if needed. */
static rt_gentry_t *capture_entry(cudaStream_t stream)
{
	uint64_t id = runtime_capture_id(stream);
	rt_gentry_t *e;

	if (!id)
		return NULL;
	e = gentry_find(RT_G_CAPTURE, id);
	return e ? e : gentry_new(RT_G_CAPTURE, id, NULL);
}

void runtime_capture_note(cudaStream_t stream, const vmem_ref_t *refs, int n, bool unseen)
{
	rt_gentry_t *e;
	bool lost = false;

	pthread_mutex_lock(&graph_lock);
	e = capture_entry(stream);
	if (e && unseen)
		e->set->unseen = true;
	for (int i = 0; e && i < n; i++) {
		rt_gset_t *set = e->set;
		int k;

		if (!runtime_owns(refs[i].ptr))
			continue;
		for (k = 0; k < set->n; k++)
			if (set->refs[k].ptr == refs[i].ptr && set->refs[k].bytes == refs[i].bytes)
				break;
		if (k < set->n) {
			set->refs[k].access = vmem_access_merge(set->refs[k].access,
								refs[i].access);
			continue;
		}
		if (set->n == set->cap) {
			int cap = set->cap ? 2 * set->cap : 32;
			rt_gref_t *r = realloc(set->refs, (size_t)cap * sizeof(*r));

			if (!r) {
				lost = true;
				break;
			}
			set->refs = r;
			set->cap = cap;
		}
		set->refs[set->n++] = (rt_gref_t){ refs[i].ptr, refs[i].bytes, refs[i].access };
	}
	pthread_mutex_unlock(&graph_lock);
	if (!e || lost)
		vmem_error("no host memory to record a captured call's tensors; the graph may "
			   "run on memory that is not resident");
}

static bool capture_defer_free(void *ptr, cudaStream_t stream)
{
	rt_gentry_t *e;
	bool ok = false;

	pthread_mutex_lock(&graph_lock);
	e = capture_entry(stream);
	if (e) {
		rt_gset_t *set = e->set;

		if (set->nfree == set->capfree) {
			int cap = set->capfree ? 2 * set->capfree : 8;
			void **f = realloc(set->frees, (size_t)cap * sizeof(*f));

			if (f) {
				set->frees = f;
				set->capfree = cap;
			}
		}
		if (set->nfree < set->capfree) {
			set->frees[set->nfree++] = ptr;
			ok = true;
		}
	}
	pthread_mutex_unlock(&graph_lock);
	return ok;
}

void runtime_capture_end(uint64_t id, cudaGraph_t graph)
{
	rt_gentry_t *e;
	rt_gset_t *gone = NULL;

	if (!id)
		return;
	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_CAPTURE, id);
	if (e) {
		rt_gset_t *set = e->set;

		if (graph)
			gentry_new(RT_G_GRAPH, (uint64_t)(uintptr_t)graph, set);
		gone = gentry_drop(e);
	}
	pthread_mutex_unlock(&graph_lock);
	gset_free(gone);
}

void runtime_graph_instantiate(cudaGraph_t graph, cudaGraphExec_t exec)
{
	rt_gentry_t *e;

	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_GRAPH, (uint64_t)(uintptr_t)graph);
	if (e && !gentry_new(RT_G_EXEC, (uint64_t)(uintptr_t)exec, e->set))
		vmem_error("no host memory to track an instantiated graph; its memory will "
			   "not be made resident when it is launched");
	pthread_mutex_unlock(&graph_lock);
}

bool runtime_graph_unseen(cudaGraphExec_t exec)
{
	rt_gentry_t *e;
	bool unseen;

	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_EXEC, (uint64_t)(uintptr_t)exec);
	unseen = e && e->set->unseen;
	pthread_mutex_unlock(&graph_lock);
	return unseen;
}

void runtime_graph_each_ref(cudaGraphExec_t exec,
			    void (*fn)(void *ctx, uintptr_t ptr, uint64_t bytes, uint8_t access),
			    void *ctx)
{
	rt_gentry_t *e;

	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_EXEC, (uint64_t)(uintptr_t)exec);
	for (int i = 0; e && i < e->set->n; i++)
		fn(ctx, e->set->refs[i].ptr, e->set->refs[i].bytes, e->set->refs[i].access);
	pthread_mutex_unlock(&graph_lock);
}

void runtime_graph_forget(const void *handle)
{
	rt_gentry_t *e;
	rt_gset_t *gone = NULL;

	pthread_mutex_lock(&graph_lock);
	e = gentry_find(RT_G_EXEC, (uint64_t)(uintptr_t)handle);
	if (!e)
		e = gentry_find(RT_G_GRAPH, (uint64_t)(uintptr_t)handle);
	if (e)
		gone = gentry_drop(e);
	pthread_mutex_unlock(&graph_lock);
	gset_free(gone);
}

/* ---- the application's own virtual memory (expandable segments) ----
 *
 * A handle vmem creates is a record here: its size, and where it is
 * mapped.  Its value has the top bit set, which no driver handle (a
 * user-space pointer) has, so the two never meet.  Contents live in the
 * pool's allocation while mapped; an unmapped handle holds nothing, so
 * mapping it again is refused (CUDA would give back its bytes). */

typedef struct {
	uint64_t handle;
	uint64_t size;
	uintptr_t at;        /* where it is mapped, 0 when not */
	bool was_mapped;     /* unmapped since: its contents are gone */
	bool released;       /* cuMemRelease came while mapped */
	uint64_t policy_id;  /* the pool's allocation id while mapped */
} vmm_handle_t;

static vmm_handle_t *g_vh;
static int g_nvh, g_capvh;
static uint64_t g_vh_next;

#define VMM_HANDLE_TAG (1ull << 63)

static vmm_handle_t *vh_find(uint64_t h)
{
	if (!(h & VMM_HANDLE_TAG))
		return NULL;
	for (int i = 0; i < g_nvh; i++)
		if (g_vh[i].handle == h)
			return &g_vh[i];
	return NULL;
}

static void vh_remove(vmm_handle_t *v)
{
	*v = g_vh[--g_nvh];
}

static CUresult vmm_refuse(const char *api, const char *why)
{
	vmem_error("%s: refused: %s. vmem serves this process's device memory (it moves it between "
		   "device and host); run with VMEM_DISABLE=1 to use %s this way", api, why, api);
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult vmm_status(pool_status_t st)
{
	switch (st) {
	case POOL_OK: return CUDA_SUCCESS;
	case POOL_ENOMEM: case POOL_EHOST: case POOL_EVA: return CUDA_ERROR_OUT_OF_MEMORY;
	case POOL_EINVAL: return CUDA_ERROR_INVALID_VALUE;
	case POOL_EDEVICE:
		return tl_dev_err != cudaSuccess ? (CUresult)tl_dev_err : CUDA_ERROR_UNKNOWN;
	default: return CUDA_ERROR_UNKNOWN;
	}
}

static bool vmm_ours(CUdeviceptr p)
{
	return runtime_active() && runtime_owns((uintptr_t)p);
}

bool runtime_vmm_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
			 unsigned long long flags, CUresult *res)
{
	uintptr_t a;
	(void)addr;   /* a hint CUDA may ignore too */
	if (!runtime_active() || flags)
		return false;
	if (!p || !size) {
		*res = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	tl_dev_err = cudaSuccess;
	pool_status_t st = pool_va_reserve(g_pool, size, align, &a);
	if (st == POOL_EVA)
		vmem_error("cuMemAddressReserve of %zu MiB: vmem's virtual range (%" PRIu64 " GiB) has no "
			   "room left; raise VMEM_VA_SIZE", size >> 20, g_va_size / GiB);
	*res = vmm_status(st);
	if (st == POOL_OK)
		*p = (CUdeviceptr)a;
	return true;
}

bool runtime_vmm_address_free(CUdeviceptr p, size_t size, CUresult *res)
{
	if (!vmm_ours(p))
		return false;
	tl_api = "cuMemAddressFree";
	tl_dev_err = cudaSuccess;
	pthread_mutex_lock(&vmm_lock);
	pool_status_t st = pool_va_unreserve(g_pool, (uintptr_t)p, size);
	if (st == POOL_OK)
		for (int i = 0; i < g_nvh; i++) {
			vmm_handle_t *v = &g_vh[i];
			if (v->at && v->at - (uintptr_t)p < size) {
				v->at = 0;
				v->was_mapped = true;
				if (v->released)
					vh_remove(v), i--;
			}
		}
	pthread_mutex_unlock(&vmm_lock);
	tl_api = NULL;
	*res = vmm_status(st);
	return true;
}

bool runtime_vmm_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
			unsigned long long flags, CUresult *res)
{
	const pool_config_t *c;
	if (!runtime_active() || !h || !prop || flags)
		return false;
	c = pool_config(g_pool);
	/* device memory of vmem's device in whole chunks; anything else (host
	 * or NUMA locations, compressible memory, odd sizes) stays CUDA's */
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != g_device ||
	    prop->allocFlags.compressionType || !size || size % c->chunk_size)
		return false;
	pthread_mutex_lock(&vmm_lock);
	if (g_nvh == g_capvh) {
		int nc = g_capvh ? g_capvh * 2 : 64;
		vmm_handle_t *n = realloc(g_vh, (size_t)nc * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&vmm_lock);
			*res = CUDA_ERROR_OUT_OF_MEMORY;
			return true;
		}
		g_vh = n;
		g_capvh = nc;
	}
	vmm_handle_t *v = &g_vh[g_nvh++];
	memset(v, 0, sizeof(*v));
	v->handle = VMM_HANDLE_TAG | ++g_vh_next;
	v->size = size;
	*h = (CUmemGenericAllocationHandle)v->handle;
	pthread_mutex_unlock(&vmm_lock);
	*res = CUDA_SUCCESS;
	return true;
}

bool runtime_vmm_release(CUmemGenericAllocationHandle h, CUresult *res)
{
	if (!runtime_active())
		return false;
	pthread_mutex_lock(&vmm_lock);
	vmm_handle_t *v = vh_find((uint64_t)h);
	if (v) {
		/* CUDA frees the memory at the last unmap: so does vmem */
		if (v->at)
			v->released = true;
		else
			vh_remove(v);
		*res = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&vmm_lock);
	return v != NULL;
}

bool runtime_vmm_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		     unsigned long long flags, CUresult *res)
{
	uint64_t id;
	if (!runtime_active())
		return false;
	pthread_mutex_lock(&vmm_lock);
	vmm_handle_t *v = vh_find((uint64_t)h);
	if (!v) {
		pthread_mutex_unlock(&vmm_lock);
		if (!vmm_ours(p))
			return false;
		*res = vmm_refuse("cuMemMap", "a handle vmem did not create cannot be mapped into "
				  "vmem's virtual range");
		return true;
	}
	if (!vmm_ours(p)) {
		*res = vmm_refuse("cuMemMap", "a handle vmem created can only be mapped in a range "
				  "reserved while vmem is active");
	} else if (offset || size != v->size || flags) {
		*res = vmm_refuse("cuMemMap", "vmem maps whole handles only (offset 0, the handle's "
				  "size, no flags)");
	} else if (v->at || v->was_mapped) {
		*res = vmm_refuse("cuMemMap", v->at ? "a handle mapped twice would alias memory vmem "
				  "moves" : "a handle unmapped before keeps no contents under vmem");
	} else {
		tl_api = "cuMemMap";
		tl_dev_err = cudaSuccess;
		pool_status_t st = pool_map_fixed(g_pool, (uintptr_t)p, size, &id);
		tl_api = NULL;
		if (st == POOL_OK) {
			v->at = (uintptr_t)p;
			v->policy_id = id;
			runtime_policy_allocated(id, size);
		} else if (st == POOL_EINVAL)
			vmem_error("cuMemMap of %zu bytes at 0x%llx: not in a reservation, or over a "
				   "mapping", size, (unsigned long long)p);
		*res = vmm_status(st);
	}
	pthread_mutex_unlock(&vmm_lock);
	return true;
}

bool runtime_vmm_unmap(CUdeviceptr p, size_t size, CUresult *res)
{
	if (!vmm_ours(p))
		return false;
	tl_api = "cuMemUnmap";
	tl_dev_err = cudaSuccess;
	pthread_mutex_lock(&vmm_lock);
	/* cuMemUnmap does not order itself after queued work (PyTorch
	 * synchronizes first): vmem's free fence covers every stream anyway */
	pool_status_t st = pool_unmap_fixed(g_pool, (uintptr_t)p, size, NULL, true);
	if (st == POOL_OK)
		for (int i = 0; i < g_nvh; i++) {
			vmm_handle_t *v = &g_vh[i];
			if (v->at && v->at - (uintptr_t)p < size) {
				runtime_policy_freed(v->policy_id);
				v->at = 0;
				v->was_mapped = true;
				if (v->released)
					vh_remove(v), i--;
			}
		}
	pthread_mutex_unlock(&vmm_lock);
	tl_api = NULL;
	*res = vmm_status(st);
	return true;
}

bool runtime_vmm_set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count,
			    CUresult *res)
{
	(void)size;
	if (!vmm_ours(p))
		return false;
	if (!desc || !count) {
		*res = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	/* vmem maps every chunk read-write for its device when it maps it */
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    desc[i].location.id != g_device) {
			*res = vmm_refuse("cuMemSetAccess", "access from another device (peer access) to "
					  "memory vmem moves is not supported");
			return true;
		}
		if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
		    desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ) {
			*res = vmm_refuse("cuMemSetAccess", "vmem's memory stays readable and writable "
					  "by its device");
			return true;
		}
	}
	*res = CUDA_SUCCESS;
	return true;
}

bool runtime_vmm_export(CUmemGenericAllocationHandle h, CUresult *res)
{
	if (!runtime_active())
		return false;
	pthread_mutex_lock(&vmm_lock);
	bool ours = vh_find((uint64_t)h) != NULL;
	pthread_mutex_unlock(&vmm_lock);
	if (ours)
		*res = vmm_refuse("cuMemExportToShareableHandle", "a handle vmem created has no "
				  "physical memory of its own to share with another process");
	return ours;
}

