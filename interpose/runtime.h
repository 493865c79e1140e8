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

/* The reserved virtual range; *base = 0, *size = 0 when not active. */
void runtime_va(uintptr_t *base, uint64_t *size);

/* True when `p` lies in vmem's reserved range (one comparison). */
bool runtime_owns(uintptr_t p);

/* Before a call: resolve each ref to (allocation, offset, extent), make it
 * resident on `stream`'s timeline and lock it.  `out` (n entries) receives
 * the resolved refs for the trace; foreign pointers get alloc_id 0 and are
 * left alone.  Returns cudaSuccess, or cudaErrorMemoryAllocation when the
 * refs of this one call do not fit in the budget together. */
cudaError_t runtime_prepare(const vmem_ref_t *refs, int n, cudaStream_t stream, trace_ref_t *out);
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
/* Records a call's refs into the capture of `stream`. */
void runtime_capture_note(cudaStream_t stream, const vmem_ref_t *refs, int n);
/* The capture `id` ended: its ranges go to `graph` (NULL: discarded). */
void runtime_capture_end(uint64_t id, cudaGraph_t graph);
void runtime_graph_instantiate(cudaGraph_t graph, cudaGraphExec_t exec);
/* Calls fn for each range the instantiated graph touches. */
void runtime_graph_each_ref(cudaGraphExec_t exec,
			    void (*fn)(void *ctx, uintptr_t ptr, uint64_t bytes, uint8_t access),
			    void *ctx);
/* A graph or an instantiation is destroyed. */
void runtime_graph_forget(const void *handle);

#endif
