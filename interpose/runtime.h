/* interpose/runtime.h - what the hooks hand every call to.
 *
 * The runtime owns the device pool (pool/) and the reactive layer: it
 * serves the application's allocations from vmem's reserved virtual range,
 * and before a call runs it makes every range the call touches resident
 * (fault-in, evicting least-recently-used unlocked memory to pinned host
 * memory when the budget is reached) and locks it until the call has been
 * issued.  It writes the memory records of the trace (alloc, free,
 * fault_in, evict, offload, prefetch) itself.
 *
 * Hooks call these with vmem's re-entry guard set, so every CUDA call the
 * runtime makes goes to the real function.  All functions are thread-safe.
 * When vmem is disabled (bad configuration, VMEM_DISABLE) the hooks never
 * call the runtime.
 */
#ifndef VMEM_INTERPOSE_RUNTIME_H
#define VMEM_INTERPOSE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "interpose/trace.h"
#include "policy/event.h"

/* Called once from vmem_init after the configuration is read and the real
 * symbols are resolvable.  Returns 0, or -1 when the pool cannot be set up
 * (the reason has been logged; vmem then stays pass-through). */
int runtime_init(void);
/* Exit path: prints the pool's part of VMEM_STATS, releases what it holds. */
void runtime_shutdown(void);
bool runtime_active(void);

/* Allocation entry points with CUDA's contract: cudaErrorMemoryAllocation
 * when the request cannot be met even after evicting everything
 * evictable; nothing already allocated is lost.  `api` names the hooked
 * function for the trace. */
cudaError_t runtime_malloc(void **ptr, size_t bytes, cudaStream_t stream, const char *api);
/* CUDA allows freeing NULL. Returns cudaErrorInvalidValue for a pointer
 * vmem did not hand out. The memory is reused only after the work queued
 * on `stream` (or every stream, for a synchronous free) has completed. */
cudaError_t runtime_free(void *ptr, cudaStream_t stream, bool async, const char *api);
/* Budget as total, unmapped part of it as free. */
cudaError_t runtime_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* The application destroys `stream`: vmem stops recording whole-device
 * fences on it.  Call before the real cudaStreamDestroy. */
void runtime_stream_destroyed(cudaStream_t stream);

/* The device budget (the most vmem may map), the part of it not mapped
 * for live allocations right now, and the physical chunk size; all 0 when
 * not active.  For decisions that must fit beside a call's tensors (the
 * conv workspace choice, interpose/conv_exec.c).  Thread-safe. */
void runtime_budget_free(uint64_t *budget, uint64_t *free_bytes, uint64_t *chunk);
/* True once the budget has bound: the pool evicted or dropped
 * pages to make room (so memory a call takes is memory another gives up). */
bool runtime_budget_binds(void);
/* True when the pool maps pages from their host slots (VMEM_HOST_MAP on
 * and the device supports it): a call past the budget can still run. */
bool runtime_host_mapping(void);

/* A hooked call that vmem could not see into may have written device
 * memory (a launch whose parameter layout is unknown or that comes while
 * an error is pending).  Call it right after the call was issued on
 * `stream` (hook_call_finish does, for calls marked `unseen`).  From then
 * on no resident page counts as clean: evicting one copies it, after that
 * call (pool_note_unseen_write).  Counted in VMEM_STATS ("possible unseen
 * writes").  Thread-safe; only counts when vmem is not active. */
void runtime_unseen_write(cudaStream_t stream);
/* Before such a call is issued on `stream` (hook_call_prepare): pages the
 * pool mapped without the bytes a call did not rewrite get them back, as
 * the call may read any byte (pool_fill_rests).  A failure is returned
 * (the call is then refused). */
cudaError_t runtime_unseen_before(cudaStream_t stream);

/* The device whose memory vmem manages (the current device at start-up). */
int runtime_device(void);

/* Around vmem's own CUDA calls made outside the pool's entry points above
 * (the policy's actions and timing events): while an application capture
 * is active they run in relaxed capture mode, so they cannot invalidate
 * it.  Returns the mode to hand back to runtime_relax_end. */
int runtime_relax_begin(void);
void runtime_relax_end(int mode);

/* The reserved virtual range; *base = 0, *size = 0 when not active. */
void runtime_va(uintptr_t *base, uint64_t *size);

/* True when `p` lies in vmem's reserved range (one comparison). */
bool runtime_owns(uintptr_t p);

/* Before a call: resolve each ref to (allocation, offset, extent), make it
 * resident on `stream`'s timeline and lock it.  `out` (n entries) receives
 * the resolved refs for the trace; foreign pointers get alloc_id 0 and are
 * left alone.  Returns cudaSuccess, or cudaErrorMemoryAllocation when the
 * refs of this one call do not fit in the budget together - unless
 * `last_resort` (the caller has no other way to run the call) and host
 * mapping is on: then the pages past the budget are mapped from the host
 * (pool_acquire_flags, POOL_ACQ_HOST_STATED). */
cudaError_t runtime_prepare(const vmem_ref_t *refs, int n, cudaStream_t stream, trace_ref_t *out,
			    bool last_resort);
/* After runtime_prepare answered cudaErrorMemoryAllocation: names the call
 * (its API, and the kernel of a launch, or NULL) for the error line. */
void runtime_oom_name(const char *api, const char *kernel);
/* A call answered out of memory without a failed runtime_prepare (its
 * hook saw it could not fit and tried none): counts its refs as
 * runtime_prepare's failure would, for runtime_oom_report, with `reason`
 * (a static string) saying why a call within the budget could not run;
 * nothing when one is pending already. */
void runtime_oom_explain(const vmem_ref_t *refs, int n, const char *reason);
/* When the outermost hook returns: if the thread's last call that could
 * not be made resident was not made resident since (a rescue or its
 * slices), one error line says what it needed, against what budget, what
 * else held the budget, and what to do (the first few such calls). */
void runtime_oom_report(void);
/* After the call has been issued: unlock, mark written ranges dirty and
 * record on `stream` the use that eviction must wait for. */
void runtime_complete(const trace_ref_t *refs, int n, cudaStream_t stream);

/* ---- CUDA graphs (stream capture).  A call on a capturing stream runs
 * nothing: vmem records the ranges it touches into the capture (no fault-in,
 * no fence: nothing may be issued on the capturing stream).  The ranges
 * follow the capture into its graph and the graph's instantiations; each
 * cudaGraphLaunch is then prepared like one call that touches all of them:
 * made resident and locked for the launch, the launch stream waits for
 * the copies, and the use is fenced on it.  Between launches the pages may
 * move: their addresses, which the graph holds, never change.
 * cudaFreeAsync on a capturing stream frees at replay in CUDA; vmem keeps
 * the memory until the graph and all its instantiations are destroyed.
 * While a capture is active, vmem's own CUDA calls run in relaxed capture
 * mode (they must not invalidate the application's capture), and its
 * whole-device fences skip capturing streams.  All thread-safe. */
void runtime_capture_begin(cudaStream_t stream);
/* The capture id of `stream` (0 when it does not capture). */
uint64_t runtime_capture_id(cudaStream_t stream);
/* Records a call's refs into the capture of `stream`; `unseen`: the call
 * may touch vmem memory it does not name (hooks.h), and so may every
 * launch of the graph. */
void runtime_capture_note(cudaStream_t stream, const vmem_ref_t *refs, int n, bool unseen);
/* The capture `id` ended: its ranges go to `graph` (NULL: discarded). */
void runtime_capture_end(uint64_t id, cudaGraph_t graph);
void runtime_graph_instantiate(cudaGraph_t graph, cudaGraphExec_t exec);
/* True when a call captured into the instantiated graph may touch vmem
 * memory it does not name: each launch is then such a call. */
bool runtime_graph_unseen(cudaGraphExec_t exec);
/* Calls fn for each range the instantiated graph touches. */
void runtime_graph_each_ref(cudaGraphExec_t exec,
			    void (*fn)(void *ctx, uintptr_t ptr, uint64_t bytes, uint8_t access),
			    void *ctx);
/* A graph or an instantiation is destroyed. */
void runtime_graph_forget(const void *handle);

/* The application's own virtual memory (issue 14: PyTorch's expandable
 * segments reach cuMemAddressReserve/cuMemCreate/cuMemMap through the
 * driver entry points).  While vmem is active these are served from the
 * pool: a reservation is a sub-range of vmem's range, a handle vmem
 * creates (device memory of vmem's device, a multiple of the chunk) is
 * only a size until it is mapped, and a map is an allocation at that
 * address in the budget, evicted and faulted in like any other; an unmap
 * frees it after every stream.  Each answers true when it handled the
 * call (*res is the answer), false when the call is not vmem's to
 * handle: pass it through.  A real handle mapped into vmem's range, a
 * partial, aliased or offset map, peer access and the export of vmem's
 * handles are refused (CUDA_ERROR_NOT_SUPPORTED, one line saying why and
 * naming VMEM_DISABLE=1).  Thread-safe. */
bool runtime_vmm_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
			 unsigned long long flags, CUresult *res);
bool runtime_vmm_address_free(CUdeviceptr p, size_t size, CUresult *res);
bool runtime_vmm_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
			unsigned long long flags, CUresult *res);
bool runtime_vmm_release(CUmemGenericAllocationHandle h, CUresult *res);
bool runtime_vmm_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		     unsigned long long flags, CUresult *res);
bool runtime_vmm_unmap(CUdeviceptr p, size_t size, CUresult *res);
bool runtime_vmm_set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count,
			    CUresult *res);
bool runtime_vmm_export(CUmemGenericAllocationHandle h, CUresult *res);

/* ---- the proactive layer (interpose/runtime_policy.c, policy/README.md) ----
 *
 * A hooked call as the policy sees it.  The hooks fill it (hooks.c); refs
 * are the call's touched ranges before resolution. */
typedef struct {
	vmem_op_kind_t kind;
	const char *api;
	const void *stream;
	const vmem_ref_t *refs;
	int nrefs;
	const vmem_op_info_t *info;   /* the typed record, or NULL */
	uint64_t seq;                 /* the trace seq; 0 before the call is issued */
	uint64_t t_ns;                /* host time the call was entered */
	uint64_t dur_ns;              /* measured device time; 0 = unknown */
} runtime_call_t;

/* Creates the policy beside the pool (from runtime_init): none when
 * VMEM_POLICY=none and VMEM_LIVENESS=off.  0, or -1 (the reactive layer
 * alone then). */
struct pool;
int runtime_policy_init(struct pool *pool, uint64_t budget, uint64_t chunk);
/* Prints the policy's VMEM_STATS lines. */
void runtime_policy_shutdown(void);
bool runtime_policy_on(void);
void runtime_policy_allocated(uint64_t alloc_id, uint64_t bytes);
void runtime_policy_freed(uint64_t alloc_id);
/* The application frees the allocation at `ptr` (before the pool does). */
void runtime_policy_freed_ptr(uintptr_t ptr);
/* The budget was reached (an eviction, an out-of-memory): under lazy
 * liveness and VMEM_POLICY=none, calls go to the policy from now on. */
void runtime_policy_note_pressure(void);
/* The pool faulted a range in for the calling thread's call; copied: it
 * brought bytes back (a miss), else it only mapped fresh pages. */
void runtime_policy_note_fault(bool copied);
/* Before the call is made resident: resolves its ranges, asks the policy,
 * carries out prefetches and revivals.  cudaSuccess, or the error that
 * refuses the call (it would read bytes the plan dropped: one line said
 * why).  Once per call, on the calling thread. */
cudaError_t runtime_policy_before(const runtime_call_t *c);
/* The call's memory is resident and the real call comes next: while the
 * policy learns, a compute call's start event is recorded here. */
void runtime_policy_started(const runtime_call_t *c);
/* After the call was issued (or refused): drops and offloads. */
void runtime_policy_after(const runtime_call_t *c);
/* Around one of the pool's own copies on its D2H (h2d false) or H2D
 * stream: the first RUNTIME_LINK_TIMED copies of at least a MiB each way
 * are timed with two events, and the policy learns the link's bandwidth
 * from them (policy_link_sample).  begin returns the start event or NULL;
 * end takes it back, with whether the copy was queued. */
#define RUNTIME_LINK_TIMED 256
void *runtime_policy_copy_begin(void *stream, bool h2d, uint64_t bytes);
void runtime_policy_copy_end(void *started, void *stream, bool h2d, uint64_t bytes, bool queued);
/* The workspace room the plan leaves at the convolution the calling
 * thread is issuing (its ALGO action in runtime_policy_before: budget less
 * what the plan holds resident while it runs), or UINT64_MAX when there is
 * no plan, no budget, or VMEM_WORKSPACE is off. */
uint64_t runtime_policy_conv_room(void);
/* True while the plan runs a "(m)" candidate of dyn's passes (or kept
 * one): the conv hooks run each convolution's least-workspace
 * configuration instead of the one chosen within the plan's room. */
bool runtime_policy_conv_least(void);
/* The plan's description of dropped bytes in this range, for the line that
 * refuses a call pool_acquire found reading them.  False when unknown. */
bool runtime_policy_explain_loss(uint64_t alloc_id, uint64_t offset, uint64_t bytes, char *buf,
				 size_t len);

#endif
