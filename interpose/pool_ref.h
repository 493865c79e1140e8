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

/* A scratch range the call was handed and does not use (conv_set_ws_ref:
 * a workspace vmem's configuration does not need): VMEM_ACCESS_UNUSED
 * with a whole overwrite, `bytes` the application's workspace size (0
 * when vmem added the range and knows none).  The runtime makes none of
 * it resident and reports it untouched (alloc_id 0) to the trace.  The
 * policy sees what the application declared: its `bytes` written whole
 * (scratch: what it held before is dead, as when the call used it, and
 * the plan sees the call it learnt) - or, with 0 bytes, nothing at all:
 * taken as an unknown extent it would be the rest of its allocation
 * written whole, in a caching segment tensors the allocator keeps after
 * the workspace, which the plan would then drop as dead. */
static inline bool vmem_ref_empty(uint8_t access)
{
	return (access & VMEM_ACCESS_UNUSED) && (access & VMEM_ACCESS_W) &&
	       (access & VMEM_ACCESS_WHOLE);
}

/* The access of one range that two calls make when their order is lost
 * (the calls a graph captured, made resident as one at its launch): a
 * write is whole only when nothing reads - the read may have come first,
 * and it needs the old bytes - and the workspace is unused only when both
 * calls leave it so. */
static inline uint8_t vmem_access_merge(uint8_t a, uint8_t b)
{
	uint8_t m = a | b;

	if (m & VMEM_ACCESS_R)
		m &= (uint8_t)~VMEM_ACCESS_WHOLE;
	if (!(a & b & VMEM_ACCESS_UNUSED) || !(m & VMEM_ACCESS_WHOLE))
		m &= (uint8_t)~VMEM_ACCESS_UNUSED;
	return m;
}

static inline pool_ref_t pool_ref_of(uintptr_t ptr, uint64_t bytes, uint8_t access)
{
	bool write = access & VMEM_ACCESS_W;

	/* WHOLE is only ever with W and without R (policy/event.h) */
	return (pool_ref_t){
		.ptr = ptr, .bytes = bytes, .write = write,
		.whole = write && (access & VMEM_ACCESS_WHOLE) && !(access & VMEM_ACCESS_R),
		.maybe = bytes == 0 || (access & VMEM_ACCESS_UPTO),
	};
}

#endif
