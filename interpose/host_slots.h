/* interpose/host_slots.h - pinned host memory the device maps anywhere.
 *
 * The pool's host slots hold offloaded and evicted pages.  With
 * VMEM_HOST_MAP a slot may also be mapped at its page's own address for a
 * call whose guessed extents reach past the budget (pool/hostmap.c), so
 * every chunk-sized slot must be a physical allocation of its own in host
 * memory: cuMemCreate with a host location, mapped once into a window of
 * virtual addresses (where copies reach it) and again, when the pool asks,
 * at a page's address.  cudaHostAlloc blocks cannot be mapped at a chosen
 * address; these can, where the device says so.
 */
#ifndef VMEM_INTERPOSE_HOST_SLOTS_H
#define VMEM_INTERPOSE_HOST_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether device `device` can map host memory with the VMM calls, in
 * chunks of `chunk` bytes - with `probe`, also whether one such chunk
 * mapped at two addresses carries bytes from one to the other; if so
 * reserves a window of `window` bytes for the slots.  1: ready; 0: not
 * supported (`why` says what was missing or failed); -1: supported but
 * the window could not be reserved (`why` says). */
int host_slots_init(int device, uint64_t chunk, uint64_t window, bool probe, const char **why);
/* pool_ops_t.host_alloc and .host_free for such slots. */
int host_slots_alloc(void *ctx, uint64_t size, void **p);
void host_slots_free(void *ctx, void *p);
/* The physical handle of a chunk-sized slot (for pool_ops_t.map_slot:
 * mapped at a page's address like any chunk); 0 for an address that is
 * not one. */
uint64_t host_slots_handle(const void *slot);

#endif
