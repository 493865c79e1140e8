/* interpose/pool_ref.h - a hooked call's touched range as the pool sees it.
 *
 * One rule for every place that hands a call's ranges to the pool (the
 * runtime's acquire and release, the policy's resolution): written when
 * the access says so; a whole overwrite only when also written; an
 * unknown extent (bytes 0), and an upper bound (VMEM_ACCESS_UPTO), may
 * touch only part of what it resolves to.
 */
#ifndef VMEM_INTERPOSE_POOL_REF_H
#define VMEM_INTERPOSE_POOL_REF_H

#include <stdint.h>

#include "policy/event.h"
#include "pool/pool.h"

/* A scratch range the call was handed and does not use: bytes 0 with a
 * whole overwrite (conv_set_ws_ref, for a workspace vmem's configuration
 * does not need; hook_call_ref never makes one, an unknown extent is
 * never a whole overwrite).  The policy resolves it as the rest of its
 * allocation, written whole, like the workspace the plan learnt; the
 * runtime makes none of it resident and reports it untouched (alloc_id
 * 0): nothing was written there. */
static inline bool vmem_ref_empty(uint64_t bytes, uint8_t access)
{
	return bytes == 0 && (access & VMEM_ACCESS_W) && (access & VMEM_ACCESS_WHOLE);
}

static inline pool_ref_t pool_ref_of(uintptr_t ptr, uint64_t bytes, uint8_t access)
{
	bool write = access & VMEM_ACCESS_W;

	return (pool_ref_t){
		.ptr = ptr, .bytes = bytes, .write = write,
		.whole = write && (access & VMEM_ACCESS_WHOLE), .maybe = bytes == 0 || (access & VMEM_ACCESS_UPTO),
	};
}

#endif
