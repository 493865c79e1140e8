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

/* A hooked call that vmem could not see into may have written device
 * memory (a launch whose parameter layout is unknown or that comes while
 * an error is pending).  Call it right after the call was issued on
 * `stream` (hook_call_finish does, for calls marked `unseen`).  From then
 * on no resident page counts as clean: evicting one copies it, after that
 * call (pool_note_unseen_write).  Counted in VMEM_STATS ("possible unseen
 * writes").  Thread-safe; only counts when vmem is not active. */
void runtime_unseen_write(cudaStream_t stream);

/* The device whose memory vmem manages (the current device at start-up). */
int runtime_device(void);

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

#endif
