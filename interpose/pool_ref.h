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

static inline pool_ref_t pool_ref_of(uintptr_t ptr, uint64_t bytes, uint8_t access)
{
	bool write = access & VMEM_ACCESS_W;

	return (pool_ref_t){
		.ptr = ptr, .bytes = bytes, .write = write,
		.whole = write && (access & VMEM_ACCESS_WHOLE), .maybe = bytes == 0 || (access & VMEM_ACCESS_UPTO),
	};
}

#endif
