/* tests/simgpu/core.h - libsimgpu's interface to the simulated cudart and
 * driver libraries (and to the unit tests of its pure pieces).
 *
 * simgpu.h is the contract every simulated library uses; this header adds
 * what only the runtime and driver layers need: device allocation, the VMM
 * calls, pinned host ranges, stream and event objects, copies, kernel
 * launches and the driver entry-point table.  Everything here is exported
 * from libsimgpu.so under the simgpu_ prefix, so libcudart.so.13 and
 * libcuda.so.1 share one state without calling each other's public CUDA
 * symbols (an LD_PRELOADed shim must see only the application's calls).
 *
 * Thread-safety: every function that touches shared state takes the core's
 * one mutex; none may be called from a signal handler.  The pure functions
 * (parse, model, clock) touch only their arguments.
 */
#ifndef SIMGPU_CORE_H
#define SIMGPU_CORE_H

#include "simgpu.h"

/* Status of the core calls; each layer maps it to its own error enum. */
typedef enum {
	SIMGPU_OK = 0,
	SIMGPU_ENOMEM,     /* physical capacity (SIMGPU_MEM) exhausted */
	SIMGPU_EINVAL,     /* bad size, alignment, range or flag */
	SIMGPU_EHANDLE,    /* not a handle the simulator handed out */
	SIMGPU_ENOTREADY,  /* event/stream work not finished in virtual time */
	SIMGPU_ENOTFOUND,  /* unknown kernel or symbol name */
	/* stream capture (CUDA's cudaErrorStreamCapture* family) */
	SIMGPU_ECAPTURE_UNSUPPORTED,  /* not permitted while capturing */
	SIMGPU_ECAPTURE_INVALIDATED,  /* the capture was invalidated earlier */
	SIMGPU_ECAPTURE_IMPLICIT,     /* would join the legacy stream with a capture */
	SIMGPU_ECAPTURE_ISOLATION,    /* a dependency across the capture boundary */
	SIMGPU_ECAPTURE_MERGE,        /* would merge two capture sequences */
	SIMGPU_ECAPTURE_UNMATCHED,    /* EndCapture on a stream that did not begin it */
	SIMGPU_ECAPTURE_WRONG_THREAD, /* EndCapture from another thread */
	SIMGPU_ECAPTURED_EVENT,       /* query/sync of an event recorded in a capture */
	SIMGPU_EILLEGAL_STATE,        /* e.g. EndCapture on a stream not capturing */
} simgpu_status_t;

/* VMM granularity reported by cuMemGetAllocationGranularity. */
#define SIMGPU_GRANULARITY ((size_t)2 << 20)

/* ---- pure pieces (core_parse.c), unit-tested without the library ---- */

/* Parses "<digits>[K|M|G|T]" (binary multiples, case-insensitive) into
 * bytes.  Returns 0, or -1 when `s` is empty, has other characters, or
 * overflows 64 bits. */
SIMGPU_API int simgpu_parse_size(const char *s, uint64_t *out);
/* Parses 0/1/yes/no/true/false/on/off (and "" as false). 0 or -1. */
SIMGPU_API int simgpu_parse_bool(const char *s, bool *out);
/* The driver's VMM calls the simulator charges host time for. */
typedef enum {
	SIMGPU_VMM_MAP, SIMGPU_VMM_ACCESS, SIMGPU_VMM_UNMAP,
	SIMGPU_VMM_CREATE, SIMGPU_VMM_RELEASE, SIMGPU_VMM_N
} simgpu_vmm_op_t;
/* Parses SIMGPU_VMM_COST into seconds per mapping for each op (a map,
 * create or release makes or ends one; an access grant or unmap is
 * charged once per mapping its range spans): "" or "h100" (the costs
 * measured on an H100), "off" or "0" (free), or five microsecond figures
 * "MAP,ACCESS,UNMAP,CREATE,RELEASE"; a "/call" suffix (*per_call) charges
 * each call once however many mappings it spans (a what-if: the H100
 * charges per mapping).  0 or -1. */
SIMGPU_API int simgpu_parse_vmm_cost(const char *s, double out_s[SIMGPU_VMM_N], bool *per_call);
/* The device model of that name, or NULL. */
SIMGPU_API const simgpu_model_t *simgpu_model_lookup(const char *name);
/* Streaming multiprocessors of a model (for the device properties). */
SIMGPU_API int simgpu_model_sm_count(const simgpu_model_t *m);
/* op and copy durations under model `m` (see simgpu_op_seconds). */
SIMGPU_API double simgpu_model_op_seconds(const simgpu_model_t *m,
					  double flops, double bytes);
SIMGPU_API double simgpu_model_copy_seconds(const simgpu_model_t *m,
					    double bytes);

/* ---- pure pieces (core_clock.c): the virtual-clock rules ----
 * Engine clocks are "busy until" times: work on an engine starts after the
 * previous work on it ended (FIFO in submission order), after the stream's
 * previous work and after the host issued it (host clock).  With one copy
 * engine, H2D and D2H share a clock; D2D runs on the compute engine. */
enum { SIMGPU_CLK_COMPUTE, SIMGPU_CLK_H2D, SIMGPU_CLK_D2H, SIMGPU_CLK_N };
typedef struct {
	double host;                    /* host's virtual time */
	double engine[SIMGPU_CLK_N];    /* busy-until of each engine */
	int copy_engines;               /* 1 or 2 */
} simgpu_clock_t;

SIMGPU_API void simgpu_clock_init(simgpu_clock_t *c, int copy_engines);
/* Index into c->engine used by `e`. */
SIMGPU_API int simgpu_clock_engine(const simgpu_clock_t *c, simgpu_engine_t e);
/* Schedules `dur` seconds on engine `e` for a stream whose clock is
 * *stream_t, not before `floor` (e.g. the legacy stream's clock); moves the
 * stream and engine clocks to the end and returns it. */
SIMGPU_API double simgpu_clock_submit(simgpu_clock_t *c, double *stream_t,
				      double floor, simgpu_engine_t e,
				      double dur);
/* The host waits until `t` (synchronisation): host = max(host, t). */
SIMGPU_API void simgpu_clock_wait(simgpu_clock_t *c, double t);
/* The latest time anything ends: max(host, engines). */
SIMGPU_API double simgpu_clock_end(const simgpu_clock_t *c);

/* ---- race checker and poison (SIMGPU_RACECHECK, SIMGPU_POISON) ---- */
/* True when fresh memory is poisoned (0xff bytes). */
SIMGPU_API bool simgpu_poison(void);
/* The innermost op name of this thread ("host code" outside ops). */
SIMGPU_API const char *simgpu_op_current(void);
/* Call number of the last op (race reports name ops by it); a test
 * program reads it through dlsym to print the line it expects. */
SIMGPU_API uint64_t simgpu_calls(void);

/* ---- device memory (cudaMalloc / cuMemAlloc) ----
 * Each allocation is its own PROT_NONE reservation (plus a guard page) with
 * physical pages mapped read-write; accounted against SIMGPU_MEM in 512-byte
 * units.  ENOMEM past the capacity, EINVAL for a zero size. */
SIMGPU_API simgpu_status_t simgpu_mem_alloc(void **p, size_t size);
SIMGPU_API simgpu_status_t simgpu_mem_free(void *p);     /* EINVAL if unknown */
/* Stream-ordered allocation (cudaMallocAsync / cudaFreeAsync): a block
 * freed on stream s goes to a pool; work on s may reuse it at once, other
 * streams once ordered after the free (an event, a host
 * synchronisation).  A pooled block is unmapped from the program's view
 * (a touch is an illegal address) until reused; it keeps its bytes and
 * its race history, so a reuse that races with an access from before the
 * free is reported.  Pooled memory is released at the host's
 * synchronisations and when memory runs short. */
SIMGPU_API simgpu_status_t simgpu_mem_alloc_async(void **p, size_t size,
						  void *stream);
SIMGPU_API simgpu_status_t simgpu_mem_free_async(void *p, void *stream);
SIMGPU_API void simgpu_mem_info(size_t *free_bytes, size_t *total_bytes);
/* Base and size of the allocation or VMM mapping holding p. */
SIMGPU_API simgpu_status_t simgpu_mem_range(const void *p, void **base,
					    size_t *size);
/* True when p lies in any simulated device range, mapped or not. */
SIMGPU_API bool simgpu_in_device_space(const void *p);

/* ---- VMM (cuMemAddressReserve ... cuMemSetAccess).  Sizes and offsets
 * must be multiples of SIMGPU_GRANULARITY (EINVAL otherwise). */
SIMGPU_API simgpu_status_t simgpu_vmm_reserve(void **p, size_t size,
					      size_t align, void *hint);
SIMGPU_API simgpu_status_t simgpu_vmm_free(void *p, size_t size);
SIMGPU_API simgpu_status_t simgpu_vmm_create(uint64_t *handle, size_t size);
/* The same in host memory (a host location): not charged to the device;
 * mapped in a reservation, the device reaches it over the link. */
SIMGPU_API simgpu_status_t simgpu_vmm_create_host(uint64_t *handle, size_t size);
/* Whether the device can map host-located memory (SIMGPU_HOST_VMM, on by
 * default: CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED). */
SIMGPU_API bool simgpu_host_vmm_supported(void);
/* Physical memory is returned when the handle is released and unmapped. */
SIMGPU_API simgpu_status_t simgpu_vmm_release(uint64_t handle);
SIMGPU_API simgpu_status_t simgpu_vmm_map(void *p, size_t size, size_t offset,
					  uint64_t handle);
SIMGPU_API simgpu_status_t simgpu_vmm_unmap(void *p, size_t size);
/* prot: 0 none, 1 read, 3 read-write (CUmemAccess_flags values). */
SIMGPU_API simgpu_status_t simgpu_vmm_set_access(void *p, size_t size, int prot);
/* The handle mapped at p, EINVAL if none. */
SIMGPU_API simgpu_status_t simgpu_vmm_handle_at(const void *p, uint64_t *handle);
/* cuMemRetainAllocationHandle: the handle mapped at p with one more
 * reference (released by one more simgpu_vmm_release). */
SIMGPU_API simgpu_status_t simgpu_vmm_retain(const void *p, uint64_t *handle);
/* cuMemExportToShareableHandle (POSIX file descriptor): a new descriptor
 * of the device memory file; EINVAL for a released or unknown handle. */
SIMGPU_API simgpu_status_t simgpu_vmm_export(uint64_t handle, int *fd);

/* ---- host memory the simulator knows (pinned: copies are asynchronous) */
SIMGPU_API simgpu_status_t simgpu_host_alloc(void **p, size_t size);
SIMGPU_API simgpu_status_t simgpu_host_free(void *p);
SIMGPU_API simgpu_status_t simgpu_host_register(void *p, size_t size);
SIMGPU_API simgpu_status_t simgpu_host_unregister(void *p);
SIMGPU_API bool simgpu_is_pinned(const void *p, size_t n);

/* ---- streams and events (handles are the application's cudaStream_t /
 * cudaEvent_t; NULL and 0x1 (cudaStreamLegacy) are the legacy default
 * stream, 0x2 (cudaStreamPerThread) the calling thread's per-thread
 * default stream, which orders with the legacy stream like any blocking
 * stream).  Flag values are CUDA's. */
#define SIMGPU_STREAM_PER_THREAD ((void *)(uintptr_t)2)
#define SIMGPU_STREAM_NONBLOCKING 0x1u
#define SIMGPU_EVENT_DISABLE_TIMING 0x2u
SIMGPU_API simgpu_status_t simgpu_stream_create(void **s, unsigned flags,
						int priority);
SIMGPU_API simgpu_status_t simgpu_stream_destroy(void *s);
SIMGPU_API simgpu_status_t simgpu_stream_check(void *s);  /* EHANDLE if bad */
SIMGPU_API simgpu_status_t simgpu_stream_info(void *s, unsigned *flags,
					      int *priority);
SIMGPU_API simgpu_status_t simgpu_stream_sync(void *s);
/* OK when done; ENOTREADY otherwise, and the host clock moves to the
 * stream's end (polling costs virtual time). */
SIMGPU_API simgpu_status_t simgpu_stream_query(void *s);
SIMGPU_API simgpu_status_t simgpu_stream_wait_event(void *s, void *ev);
SIMGPU_API simgpu_status_t simgpu_event_create(void **ev, unsigned flags);
SIMGPU_API simgpu_status_t simgpu_event_destroy(void *ev);
SIMGPU_API simgpu_status_t simgpu_event_record(void *ev, void *s);
SIMGPU_API simgpu_status_t simgpu_event_query(void *ev); /* as stream_query */
SIMGPU_API simgpu_status_t simgpu_event_sync(void *ev);
/* Virtual milliseconds between two recorded events. EHANDLE when either
 * was never recorded or has timing disabled. */
SIMGPU_API simgpu_status_t simgpu_event_elapsed(float *ms, void *start,
						void *end);
SIMGPU_API simgpu_status_t simgpu_device_sync(void);
/* Host virtual time now, in seconds. */
SIMGPU_API double simgpu_host_now(void);

/* ---- copies and sets (executed at once, accounted on the engine) ---- */
typedef enum {
	SIMGPU_COPY_H2H, SIMGPU_COPY_H2D, SIMGPU_COPY_D2H, SIMGPU_COPY_D2D,
	SIMGPU_COPY_DEFAULT,
} simgpu_copy_kind_t;
/* Checks both ranges (aborting with the illegal-address line on a bad
 * one), copies unless dry-run, and queues the time on the right engine.
 * `sync`: the host waits for the copy (synchronous cudaMemcpy; also
 * implied for pageable host memory). `op` names the call for faults. */
SIMGPU_API simgpu_status_t simgpu_copy(void *dst, const void *src, size_t n,
				       simgpu_copy_kind_t kind, void *stream,
				       bool sync, const char *op);
SIMGPU_API simgpu_status_t simgpu_copy_2d(void *dst, size_t dpitch,
					  const void *src, size_t spitch,
					  size_t width, size_t height,
					  simgpu_copy_kind_t kind, void *stream,
					  bool sync, const char *op);
SIMGPU_API simgpu_status_t simgpu_memset(void *p, int value, size_t n,
					 void *stream, bool sync,
					 const char *op);
/* cuMemsetD32-style: n 32-bit words of `value`. */
SIMGPU_API simgpu_status_t simgpu_memset32(void *p, uint32_t value, size_t n,
					   void *stream, const char *op);
/* cudaLaunchHostFunc: runs fn(data) once the stream's earlier work is
 * done (at once here), or records it when the stream captures. */
SIMGPU_API simgpu_status_t simgpu_host_func(void *stream,
					    void (*fn)(void *), void *data);

/* ---- kernels ---- */
/* Offset and size of parameter i (natural alignment, as nvcc lays out a
 * kernel's parameter buffer).  EINVAL when i is out of range. */
SIMGPU_API simgpu_status_t simgpu_kernel_param(const simgpu_kernel_t *k,
					       size_t i, size_t *offset,
					       size_t *size);
/* Runs k on the calling thread (inside simgpu_op_begin(k->name)) and
 * queues its modelled time on `stream`'s compute engine. */
SIMGPU_API simgpu_status_t simgpu_launch(const simgpu_kernel_t *k,
					 void **args, uint64_t threads,
					 void *stream);
/* The registry as an array (for handles and tests). */
SIMGPU_API const simgpu_kernel_t *simgpu_kernel_table(size_t *count);

/* ---- stream capture and graphs (core_graph.c).  Modes are CUDA's
 * cudaStreamCaptureMode values (0 global, 1 thread-local, 2 relaxed). */
SIMGPU_API simgpu_status_t simgpu_capture_begin(void *stream, int mode);
/* Ends the capture begun on `stream`; *graph is the new graph, or NULL
 * when the capture was invalidated (SIMGPU_ECAPTURE_INVALIDATED). */
SIMGPU_API simgpu_status_t simgpu_capture_end(void *stream, void **graph);
/* status: 0 none, 1 active, 2 invalidated (cudaStreamCaptureStatus). */
SIMGPU_API simgpu_status_t simgpu_capture_info(void *stream, int *status,
					       uint64_t *id);
/* cudaThreadExchangeStreamCaptureMode: swaps the calling thread's mode. */
SIMGPU_API simgpu_status_t simgpu_capture_exchange_mode(int *mode);
/* A call that may not run while a capture forbids "potentially unsafe"
 * calls to this thread: SIMGPU_ECAPTURE_UNSUPPORTED (the capture is
 * invalidated), else SIMGPU_OK. */
SIMGPU_API simgpu_status_t simgpu_capture_unsafe(void);
SIMGPU_API simgpu_status_t simgpu_graph_instantiate(void **exec, void *graph);
SIMGPU_API simgpu_status_t simgpu_graph_launch(void *exec, void *stream);
SIMGPU_API simgpu_status_t simgpu_graph_exec_destroy(void *exec);
SIMGPU_API simgpu_status_t simgpu_graph_destroy(void *graph);
/* Nodes of a graph (cudaGraphGetNodes' count). */
SIMGPU_API simgpu_status_t simgpu_graph_node_count(void *graph, size_t *n);

/* ---- faults ---- */
/* Prints "simgpu: illegal address 0x<addr> in <op>" and aborts. */
SIMGPU_API _Noreturn void simgpu_fault(const void *addr);

/* ---- driver entry points: libcuda.so.1 registers its resolver at load;
 * cudaGetDriverEntryPoint* asks it (loading libcuda.so.1 if needed). */
typedef void *(*simgpu_driver_proc_fn)(const char *name, int version);
SIMGPU_API void simgpu_set_driver_proc(simgpu_driver_proc_fn fn);
SIMGPU_API simgpu_driver_proc_fn simgpu_get_driver_proc(void);

#endif
