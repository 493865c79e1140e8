/* pool/pool.h - vmem's device pool on virtual memory.
 *
 * Every device allocation the application makes is carved from one large
 * virtual range reserved at start-up.  Physical memory comes in chunks of
 * the device's allocation granularity (or a multiple), kept in a chunk
 * cache and mapped into allocations on demand.  Because an allocation's
 * virtual range never moves, its bytes can be offloaded to pinned host
 * memory (the chunks are unmapped and reused elsewhere) and brought back
 * (fresh chunks mapped at the same address): the application's pointers
 * stay valid.  This is the virtual addressing of "Out-of-core training
 * with virtual addressing" §4, used for a second reason: address
 * stability, which a transparent shim cannot do without.  With chunks that
 * combine in any order there is no external fragmentation; the only waste
 * is the rounding of each allocation up to a chunk (internal
 * fragmentation, reported in the stats).
 *
 * Residency is tracked per chunk-sized page of each large allocation, so a
 * framework that sub-allocates tensors from one big segment still gets the
 * touched sub-ranges made resident.  A page is resident (mapped), on host
 * (unmapped, its bytes in a host slot), or released (unmapped, its bytes
 * meaningless: never written).  Resident unlocked pages sit on an LRU list
 * (SuperNeurons §3.3.2, Alg. 2: the tensor cache): when mapping would
 * exceed the budget the least recently used ones are evicted to host.
 * Pages touched by a call in flight are locked and never evicted.
 *
 * Small allocations (below config.small_threshold) are packed together into
 * shared chunks (any size in any chunk, in 256-byte units); a small chunk
 * is one page for residency: evicted whole when it is the coldest.
 *
 * The pool is a pure core: it includes no CUDA header, reads no
 * environment and prints nothing.  Everything it needs from the device
 * goes through pool_ops_t, which interpose/runtime.c fills with CUDA
 * driver/runtime calls and the unit tests fill with fakes on host memory.
 *
 * Ordering without host synchronisation: every page carries a "busy"
 * fence (an event) after which all queued work touching it is done.  A use
 * on another stream first makes that stream wait on the fence; a copy
 * waits on it on the copy stream.  The fence is recorded only when
 * something waits for it (docs/pool.md).  The host waits only on the
 * reactive eviction path (before unmapping a chunk whose copy-out is in
 * flight) and when a freed range must be reclaimed before its free fence
 * fired, and then without holding the pool's mutex.
 *
 * Thread-safety: every pool_* function taking a pool_t locks the pool's
 * one mutex; the ops callbacks are called with it held and must not call
 * back into the pool - except fence_wait, which is called with the mutex
 * released (a host wait must not block other threads' calls), so it may
 * run while other threads call the other callbacks.
 */
#ifndef VMEM_POOL_POOL_H
#define VMEM_POOL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	POOL_OK = 0,
	POOL_ENOMEM,     /* the device budget cannot hold the request even after evicting */
	POOL_EHOST,      /* the pinned host memory limit is reached */
	POOL_EVA,        /* the reserved virtual range has no room left */
	POOL_EINVAL,     /* a pointer the pool did not hand out, or a bad argument */
	POOL_EDEVICE,    /* a device operation failed (the ops callback's error) */
	POOL_ECONFIG,    /* the configuration is inconsistent */
	POOL_ELOST,      /* a read of bytes dropped as dead (pool_discard): they are gone */
} pool_status_t;

/* A static English description, never NULL. */
const char *pool_strerror(pool_status_t st);

typedef struct {
	uint64_t budget;          /* most physical bytes the pool may hold */
	uint64_t host_limit;      /* most pinned host bytes; 0 = unlimited */
	uint64_t chunk_size;      /* physical chunk, a multiple of granularity */
	uint64_t granularity;     /* the device's allocation granularity */
	uint64_t small_threshold; /* below it: packed into shared chunks; <= chunk_size / 2 */
	uint64_t va_size;         /* virtual range reserved, a multiple of chunk_size */
	uint64_t host_block;      /* pinned host memory is allocated in blocks of this; 0 = 32 chunks */
	uint64_t offload_fence;   /* an offload records a fence after each this many bytes of
				     copies, so its pages free up group by group; 0 = 64 MiB */
	bool grant_runs;          /* one access grant per run of adjacent pages mapped
				     together (needs ops.map_only and ops.grant) */
	bool range_fit;           /* best fit over freed ranges: a new large allocation
				     reuses a larger freed range in place (split), merges
				     adjacent ones, and a reclaim unmaps only the chunks it
				     needs; false: only a freed range of the same page count */
	bool range_pending;       /* with range_fit: also a range whose free is still pending
				     (its pages' busy marks order what follows; not while an
				     unseen call may run).  Off by default: docs/pool.md */
	bool lazy_map;            /* a large allocation maps only what is free without a wait
				     or a copy (first pages first); the rest is mapped by the
				     first call that touches it, instead of evicting live
				     pages for memory nobody touched yet */
	bool host_map;            /* a call whose pointers of unknown extent reach more pages
				     than the budget holds runs with the pages past their
				     first mapped from their host slots (ops.map_slot): the
				     kernel reaches them over the link if it touches them at
				     all (pool_acquire); with lazy_map an allocation larger
				     than the budget is taken, and pool_acquire_flags runs a
				     call whose stated pages exceed it likewise */
	bool handoff;             /* a prefetch for the next call, once the call before it
				     is queued (POOL_WAIT_USE), takes the chunks of pages
				     the plan needs later whose last use is still queued:
				     mapped at once at the new page too, written by the copy
				     streams after that use (pool/handoff.c), no host wait */
} pool_config_t;

struct pool_event;

/* Device operations.  Every function returns 0 on success, or a
 * pool_status_t (POOL_ENOMEM when the device is out of memory, otherwise
 * POOL_EDEVICE).  Streams and fences are opaque handles; NULL is a valid
 * stream (the legacy default stream).  Copies go on the two streams the
 * ops own (d2h_stream, h2d_stream) so they overlap with compute. */
typedef struct {
	void *ctx;
	void *d2h_stream;
	void *h2d_stream;

	int (*va_reserve)(void *ctx, uint64_t size, uint64_t align, uintptr_t *base);
	void (*va_release)(void *ctx, uintptr_t base, uint64_t size);
	int (*chunk_create)(void *ctx, uint64_t size, uint64_t *handle);
	void (*chunk_release)(void *ctx, uint64_t handle);
	/* map the chunk at va and make it readable and writable */
	int (*map)(void *ctx, uintptr_t va, uint64_t size, uint64_t handle);
	/* Optional, both or neither (used when cfg.grant_runs): map the chunk
	 * at va with no access yet, and make [va, va+size) readable and
	 * writable, a range that may span several chunks map_only mapped.
	 * The pool then grants the adjacent pages it maps together in one
	 * call (cuMemSetAccess is most of a remap's cost on an H100). */
	int (*map_only)(void *ctx, uintptr_t va, uint64_t size, uint64_t handle);
	int (*grant)(void *ctx, uintptr_t va, uint64_t size);
	int (*unmap)(void *ctx, uintptr_t va, uint64_t size);
	/* Pinned host memory for slots.  With cfg.host_map each chunk-sized,
	 * chunk-aligned piece of a block must be mappable on its own by
	 * map_slot, and the copies must accept its address. */
	int (*host_alloc)(void *ctx, uint64_t size, void **p);
	void (*host_free)(void *ctx, void *p);
	/* Optional (needed by cfg.host_map): maps the host memory of a slot
	 * (a chunk-sized piece host_alloc gave) at va, readable and writable
	 * by the device; unmap undoes it. */
	int (*map_slot)(void *ctx, uintptr_t va, uint64_t size, void *slot);
	int (*copy_d2h)(void *ctx, void *dst, uintptr_t src, uint64_t n);       /* on d2h_stream */
	int (*copy_h2d)(void *ctx, uintptr_t dst, const void *src, uint64_t n); /* on h2d_stream */
	/* Records a fence after the work queued so far on `stream`, or on every
	 * stream the application uses when `all_streams`. */
	int (*fence_record)(void *ctx, void *stream, bool all_streams, void **fence);
	int (*fence_query)(void *ctx, void *fence);   /* 1 done, 0 pending, <0 error */
	int (*fence_wait)(void *ctx, void *fence);
	void (*fence_destroy)(void *ctx, void *fence);
	int (*stream_wait)(void *ctx, void *stream, void *fence);
	uint64_t (*now_ns)(void *ctx);
	/* Optional observer of memory events (the trace); may be NULL. */
	void (*record)(void *ctx, const struct pool_event *ev);
} pool_ops_t;

typedef enum {
	POOL_EV_ALLOC, POOL_EV_FREE, POOL_EV_OFFLOAD, POOL_EV_PREFETCH,
	POOL_EV_FAULT_IN, POOL_EV_EVICT, POOL_EV_OOM,
	POOL_EV_DROP,       /* a page whose every byte was dead, dropped without a copy */
	POOL_EV_HOST_MAP,   /* a page mapped from its host slot for a call past the budget */
} pool_event_kind_t;

/* One memory event; totals are after the event. */
typedef struct pool_event {
	pool_event_kind_t kind;
	uint64_t alloc_id;
	uintptr_t ptr;      /* start of the allocation */
	uint64_t offset;    /* of the affected range inside it */
	uint64_t bytes;     /* of the affected range (requested size for alloc/free) */
	uint64_t mapped;    /* physical bytes mapped (alloc) or moved (copies) */
	void *stream;
	uint64_t resident;  /* device bytes mapped for live allocations */
	uint64_t host;      /* pinned host bytes holding data */
	uint64_t budget;
} pool_event_t;

/* Counters in mimalloc's style: current, peak and total of increments. */
typedef struct {
	uint64_t cur, peak, total;
} pool_stat_count_t;

typedef struct {
	pool_stat_count_t requested;  /* bytes the application holds */
	pool_stat_count_t reserved;   /* virtual bytes given to live allocations (requested rounded up) */
	pool_stat_count_t resident;   /* device bytes mapped for live allocations */
	pool_stat_count_t held;       /* physical bytes created (mapped, cached, pending) */
	pool_stat_count_t host;       /* host slot bytes holding data */
	pool_stat_count_t host_mapped;/* bytes of pages mapped from their host slots for calls
	                                 beyond the budget (cfg.host_map); counted in host too */
	pool_stat_count_t small_slack;/* bytes of mapped small-allocation chunks that no live
	                                 allocation requested (free space, rounding; empty
	                                 chunks not counted); peak taken at allocations */
	uint64_t host_allocated;      /* pinned host bytes obtained */
	uint64_t allocs, frees, small_allocs;
	uint64_t misses;              /* pages faulted in */
	uint64_t bytes_faulted_in;    /* bytes copied back by fault-ins */
	uint64_t dead_copies_skipped; /* pages faulted in without their copy: the call
					 rewrites part and the rest was declared dead */
	uint64_t overwrites_skipped;  /* pages faulted in without their copy: the call
	                                 rewrites them whole */
	uint64_t rests_kept;          /* pages faulted in without their copy: the call
	                                 rewrites one span, the rest stays on the host */
	uint64_t rests_filled;        /* of those, rests brought back for a later use */
	uint64_t bytes_rest_filled;   /* bytes those copies moved */
	uint64_t rest_waits;          /* waits of a call vmem cannot see into for another
					 thread's eviction of such a page (pool_fill_rests) */
	uint64_t evictions;           /* pages evicted by the LRU */
	uint64_t evictions_clean;     /* of which dropped without a copy */
	uint64_t bytes_evicted;       /* bytes copied out by evictions */
	uint64_t offloads, bytes_offloaded;     /* explicit offloads (pages) */
	uint64_t prefetches, bytes_prefetched;  /* explicit prefetches (pages) */
	uint64_t prefetch_skipped;    /* pages a prefetch could not bring */
	uint64_t prefetch_waits;      /* host waits of prefetches for copies out under way */
	uint64_t prefetch_room;       /* dirty pages needed later sent to host for a prefetch's room */
	uint64_t held_evicted;        /* prefetched pages evicted before their first use */
	uint64_t discards;            /* pool_discard calls */
	uint64_t pages_dropped;       /* pages dropped as dead (no copy) */
	uint64_t bytes_dropped;       /* their bytes */
	uint64_t lost_reads;          /* refs refused with POOL_ELOST (and pool_undead's) */
	uint64_t lost_maybe;          /* refs with `maybe` over dropped bytes, let through */
	uint64_t evictions_planned;   /* evictions chosen by the plan's order */
	uint64_t stalls, stall_ns;    /* host waits on fences */
	uint64_t oom;                 /* requests refused for lack of device memory */
	uint64_t host_map_calls;      /* calls run with pages mapped from the host (host_map) */
	uint64_t host_map_waits;      /* host waits for such a page's use before it left the
	                                 host (a later call needed it on the device) */
	uint64_t handoffs;            /* pages whose chunk went to a prefetched page while their
	                                 last use was queued (cfg.handoff) */
	uint64_t handoff_waits;       /* host waits for such a page's last use or copy (a call
	                                 needed it again, a free, an unseen launch) */
	uint64_t chunks_created, chunks_released, maps, unmaps;
	uint64_t grants;              /* access grants (cuMemSetAccess calls) */
	uint64_t ranges_reused;       /* allocations served from a freed range without mapping */
	uint64_t ranges_split;        /* freed ranges carved (reused in part, reclaimed in part) */
	uint64_t ranges_merged;       /* freed ranges merged into the one before them */
	uint64_t ranges_trimmed;      /* reclaims that unmapped only part of a freed range */
	uint64_t ranges_pending;      /* reused before their free completed (ordered on the device) */
	uint64_t lazy_allocs;         /* allocations left partly unmapped (lazy_map) */
	uint64_t lazy_pages;          /* their pages mapped later, at first touch */
	uint64_t fences;              /* fences (events) the pool recorded */
	uint64_t unseen_writes;       /* pool_note_unseen_write calls */
	uint64_t stale_copies;        /* pages copied out because an unseen write may have changed them */
	uint64_t offloads_kept;       /* offloads taken back: an unseen write came after their copy */
} pool_stats_t;

typedef struct pool pool_t;

/* The chunk size for a budget when none is asked for: the largest
 * power-of-two multiple of `granularity` not above budget / 128, within
 * [granularity, 16 MiB] (never below the granularity).  The driver
 * charges a map, grant or unmap per mapping, whatever its size (an
 * H100: ~60 us to unmap and map back a chunk), so larger chunks move the
 * same bytes for fewer calls; each large allocation wastes up to a chunk,
 * so the chunk stays a small part of the budget (docs/pool.md, "Chunk
 * size"). */
uint64_t pool_chunk_auto(uint64_t budget, uint64_t granularity);

/* Reserves the virtual range.  Returns POOL_OK and *out, or POOL_ECONFIG
 * (inconsistent config), or the va_reserve error. */
pool_status_t pool_create(const pool_config_t *cfg, const pool_ops_t *ops, pool_t **out);
/* Waits for outstanding work, unmaps and releases everything. */
void pool_destroy(pool_t *p);
/* Re-initialises the mutex in a forked child (pthread_atfork child
 * handler); the parent handlers lock and unlock. */
void pool_atfork_prepare(pool_t *p);
void pool_atfork_parent(pool_t *p);
void pool_atfork_child(pool_t *p);

/* Allocates `bytes` (> 0), maps it eagerly (evicting as needed) and
 * returns its address (256-byte aligned; chunk aligned when large) and id.
 * POOL_ENOMEM when it cannot fit even after evicting everything
 * evictable (an allocation larger than the budget always fails); nothing
 * already allocated is lost.  POOL_EHOST when evicting needed host
 * memory beyond host_limit.  A small allocation placed in a slab whose
 * bytes are on the host (its other blocks') brings the slab back at once
 * when an eviction order is set (pool_set_order: a plan runs), as a
 * prefetch without a wait, so that the call that uses it does not fault
 * it in. */
pool_status_t pool_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id);
/* Frees an address pool_malloc returned.  Its memory is reused only after
 * a fence recorded now on `stream` (every stream when all_streams) has
 * completed.  POOL_EINVAL for an address the pool did not hand out. */
pool_status_t pool_free(pool_t *p, uintptr_t addr, void *stream, bool all_streams);

/* The application is about to destroy `stream`: the pool records one
 * fence there covering every use it has not fenced yet (it records fences
 * only when something waits, and cannot on a destroyed stream).  Call
 * before the real destroy. */
void pool_stream_destroyed(pool_t *p, void *stream);

/* A call vmem could not see into may have written device memory: a launch
 * whose parameter layout is unknown or that came while an error was
 * pending, an unhooked copy or set.  Call it after that call was issued
 * on `stream`.  From then on no resident page counts as clean: a page
 * whose host copy was valid, or that was never written, is copied out
 * again when evicted or offloaded, after that call (issue 10).  Pages not
 * mapped at the time are not affected (a write there would have faulted).
 * The price: every eviction after it copies. */
void pool_note_unseen_write(pool_t *p, void *stream);
/* Before such a call is issued on `stream` (after its own refs were
 * acquired): every mapped page that keeps its rest on the host (a call
 * rewrote one span of it, residency.c) gets the rest back, and `stream`
 * waits for those copies and for any copy in still under way (a
 * prefetched page's) - the call may read any byte.  No cost when no page
 * keeps a rest and no copy in is pending. */
pool_status_t pool_fill_rests(pool_t *p, void *stream);

/* True when `a` is inside the reserved range (no lock: the range is fixed). */
bool pool_owns(const pool_t *p, uintptr_t a);

/* One range a call touches. bytes == 0: unknown extent (see pool_acquire).
 * whole (with write): the call overwrites every byte of the range and reads
 * none (a cuDNN output with beta = 0, a memset, a copy's destination);
 * otherwise a ref may read what it touches. */
typedef struct {
	uintptr_t ptr;
	uint64_t bytes;
	bool write;
	bool whole;
	bool maybe;     /* the call may touch only part of the range (an unknown
			   extent taken to the end of the allocation): dropped bytes
			   in it are not refused, only counted (lost_maybe) */
} pool_ref_t;

/* A resolved range: alloc_id 0 when not pool memory (left alone). */
typedef struct {
	uint64_t alloc_id;
	uint64_t offset;    /* inside the allocation */
	uint64_t bytes;     /* resolved extent */
	bool lost;          /* pool_acquire answered POOL_ELOST for this ref */
} pool_span_t;

/* Resolves refs as pool_acquire would, without making anything resident
 * or locking (the policies see a call's ranges before it runs).  The
 * answer may be out of date by the time the call is acquired. */
void pool_resolve(pool_t *p, const pool_ref_t *refs, int n, pool_span_t *out);

/* The reactive layer, before a call on `stream`: resolves every ref,
 * makes the pages it covers resident (fault-in: map + copy back on the
 * H2D stream, `stream` waits on the copy, counted as a miss), and locks
 * them.  A ref that may read bytes a pool_discard dropped is refused:
 * POOL_ELOST, with that ref's out[i].lost set and nothing locked - the
 * caller fails the call loudly (never computes on them).  An unknown extent (bytes 0) is the rest of the allocation from
 * ptr (never an extent learned from an earlier call: a caching allocator
 * reuses addresses for larger tensors unseen).  With cfg.host_map, when
 * those unknown extents take the call past the budget, its stated pages
 * (an unknown extent's first) are made resident as usual, resident pages
 * past them stay while the budget holds them, and the others are mapped
 * from their host slots (hostmap.c: correct if the kernel touches them,
 * over the link).  Returns POOL_OK, or POOL_ENOMEM / POOL_EHOST when
 * the refs do not fit together, in which case nothing stays locked and
 * nothing is lost.  Every successful acquire must be followed by one
 * pool_release with the same spans. */
pool_status_t pool_acquire(pool_t *p, const pool_ref_t *refs, int n, void *stream, pool_span_t *out);
/* pool_acquire with flags: POOL_ACQ_HOST_STATED lets a call whose stated
 * pages (of large allocations) alone exceed the budget run as well, with
 * cfg.host_map: its resident pages stay while the budget holds them, then
 * the others in order, and the rest are mapped from their host slots.
 * For a call the caller cannot run any other way (no slices, no other
 * algorithm): such a kernel reads and writes those pages over the link.
 * Slabs of small allocations always stay on the device. */
enum { POOL_ACQ_HOST_STATED = 1u << 0 };
pool_status_t pool_acquire_flags(pool_t *p, const pool_ref_t *refs, int n, void *stream,
				 pool_span_t *out, unsigned flags);
/* What a call of these refs needs against the budget, counted now under
 * the lock (after a pool_acquire of them answered POOL_ENOMEM, or for refs
 * no acquire was tried on: a convolution whose rescue found nothing to
 * run); nothing is made resident or locked.  The distinct pages the call
 * needs (`pages`), of them those within its stated extents (`stated`: an
 * unknown or bounded extent - pool_ref_t.maybe - counts its first page
 * only; the rest are taken to the end of the allocation) and those of
 * slabs of small allocations (`small`); the resident pages other calls
 * hold locked (in flight on other threads: `locked_other`, counted only
 * when `pages` is within the budget); and the chunks the pool holds
 * (`held`: after a failed acquire, fewer than the budget's when the device
 * refused more - other processes or libraries use it).  The runtime turns
 * it into the user's error line.  False when there is no host memory to
 * count with. */
typedef struct {
	uint64_t chunk;           /* bytes a page */
	uint64_t budget;          /* bytes */
	uint32_t pages, stated, small;
	uint32_t locked_other;
	uint32_t held;
} pool_oom_t;

bool pool_oom_need(pool_t *p, const pool_ref_t *refs, int n, pool_oom_t *o);

/* After the call was issued on `stream`: marks written pages dirty (their
 * host copy is dropped), records the use that eviction must wait for,
 * unlocks and moves the pages to the front of the LRU. */
void pool_release(pool_t *p, const pool_ref_t *refs, const pool_span_t *spans, int n, void *stream);

/* ------------------------------------------------- the policies' operations
 *
 * What the proactive layer's actions need (issue 11).  A range names an
 * allocation by its id (pool_span_t.alloc_id, a large allocation or a
 * small one), an offset inside it and a byte count; bytes 0 is the rest of
 * the allocation.  A range of an allocation freed since answers POOL_EINVAL
 * and is left alone: ids are never reused, so an action planned for one
 * tensor never touches a later one at the same address.  None of these
 * waits on the host. */
typedef struct {
	uint64_t alloc_id;
	uint64_t offset;
	uint64_t bytes;
} pool_range_t;

/* The range's bytes are dead: the application will not read them before
 * it rewrites them.  The pool keeps, per page, which bytes are dead; a
 * page is dropped (unmapped, or its host copy released, without a copy)
 * only when every byte of it is dead - a caching allocator packs several
 * tensors in one page.  Lazily (eager false) a whole-dead page is dropped
 * when memory is needed, before anything live is evicted; eagerly, at once
 * (pages still in use are unmapped by pool_poll after their last use; a
 * page locked by a call in flight is left to the lazy way).  A dropped
 * page reads as released: a later ref that may read its dropped bytes
 * makes pool_acquire answer POOL_ELOST.  A write to dead bytes (any call
 * that writes them, pool_release) makes them live again. */
pool_status_t pool_discard(pool_t *p, const pool_range_t *r, bool eager);
/* The range's bytes are live again (the plan was wrong, or suspended).
 * POOL_ELOST when any of them was already dropped (they stay marked: a
 * read of them keeps failing); POOL_OK otherwise. */
pool_status_t pool_undead(pool_t *p, const pool_range_t *r);
/* Brings the range's pages back: maps them and copies their bytes on the
 * H2D stream; the first call that uses them waits on the copy on the
 * device.  The range's pages are then held - not evicted before a call
 * uses them (the call they were fetched for), except as the very last
 * resort.  Chunks come, in this order, from what needs neither a wait nor
 * a copy (the cache, the budget, completed frees and offloads, dead
 * pages); then, with `wait` (the range is for the next call), from the
 * frees and offloads still under way, the host waiting for them
 * (prefetch_waits: memory the plan freed); then from clean pages whose last use completed - with an
 * eviction order set (pool_set_order), only those needed later than the
 * range itself.  With an order and `wait`, if that is not enough, pages
 * held for calls needed after the range and after every dirty page
 * needed later are given up without a copy (held_evicted), then dirty
 * pages needed later than the range are sent to the host as offloads are
 * (prefetch_room):
 * with POOL_WAIT_UNDERWAY without a wait (the prefetch tried again waits
 * for those copies), with POOL_WAIT_ALL (or POOL_WAIT_USE) the host waits for them at once
 * (the runtime asks so once the call before the range's is queued and
 * keeps the device busy meanwhile; before that, a second prefetch for
 * the same call took the pages sent for the first, and the call faulted).
 * POOL_ENOMEM when some pages could not be brought (those that could
 * were), POOL_EHOST never. */
typedef enum {
	POOL_WAIT_NONE = 0,   /* for a later call: no host wait */
	POOL_WAIT_UNDERWAY,   /* for the next call: waits for copies under way */
	POOL_WAIT_ALL,        /* and for the room copies it starts itself */
	POOL_WAIT_USE,        /* and, for the call right after the one just queued,
				 for the last use of clean pages needed later, when a
				 fence before that call covers it; before that (with
				 cfg.handoff) it takes the chunks of pages needed later
				 whose last use is still queued, the copies ordered
				 after it on the device (pool/handoff.c) */
} pool_wait_t;

pool_status_t pool_prefetch(pool_t *p, const pool_range_t *r, pool_wait_t wait);
/* Releases held pages of the range that no call used (a plan suspended):
 * they are ordinary resident pages again. */
pool_status_t pool_unhold(pool_t *p, const pool_range_t *r);

/* The distinct pages n policy ranges (by allocation id; bytes 0: the rest
 * of it) span together, a small allocation counting its slab's page;
 * ranges of allocations no longer live count nothing.  0 when there is no
 * host memory to count with.  What a call and the one before it need
 * together (runtime_policy.c: a miss beside a call whose pages and its
 * own exceed the budget). */
uint32_t pool_ranges_pages(pool_t *p, const pool_range_t *r, int n);
/* What holds the device when a prefetch of range r finds no chunk: the
 * resident pages counted by what a prefetch may do with them - relative
 * to the range's own next use in the eviction order (pool_set_order;
 * without one every page is `unknown`).  For VMEM_LOG=debug: it walks
 * every resident page. */
typedef struct {
	uint32_t dead;          /* every byte dead: dropped first */
	uint32_t clean_later;   /* clean, needed after the range: a prefetch takes them */
	uint32_t dirty_later;   /* dirty, needed after it: a prefetch for the next call copies
				   them out, else the call's fault */
	uint32_t sooner;        /* needed before the range: kept */
	uint32_t unknown;       /* not in the order (memory the plan never saw) */
	uint32_t held;          /* prefetched, not used yet */
	uint32_t offloading;    /* offloaded, their copy out not reaped yet */
	uint32_t resident;      /* every page mapped (the rest of them: in use by a call now,
				   or being evicted) */
} pool_census_t;
pool_status_t pool_census(pool_t *p, const pool_range_t *r, pool_census_t *out);
/* Starts copying the range's resident, unlocked pages to host after their
 * last write (on the D2H stream, ordered by an event on the writer's
 * stream), so the copy overlaps calls that still read them, and releases
 * their chunks once the copy and their last use completed (pool_poll, or
 * when memory is needed); clean pages are released without a copy.  No
 * host wait: a page with no free host slot is left resident (POOL_EHOST).
 * A page the eviction order says the next call uses (key 1) stays: it
 * holds another tensor's bytes too, and moved, the call would fault it
 * straight back. */
pool_status_t pool_offload(pool_t *p, const pool_range_t *r);
/* Called before issuing the range's last reader, which pool_offload
 * follows: fences each page's last write now, so that the offload's copy
 * can start when that write completes, not when the reader does (an
 * event is recorded on demand, after everything queued so far; without
 * this one the reader would be queued first).  Records at most one event
 * per stream. */
pool_status_t pool_settle(pool_t *p, const pool_range_t *r);

/* Eviction order from a plan.  With an order set, eviction takes dead pages
 * first, then the candidates by key, largest first (the policy's distance
 * to the page's next use: Belady's MIN), then the pages whose key is
 * POOL_ORDER_UNKNOWN (not in the plan) least recently used first.  `fn` is
 * called for the `window` least recently used resident pages (0: all of
 * them) with the page's range (alloc_id and offset of the page in the
 * allocation, its bytes) - for a slab, once per live block (its id, 0,
 * its bytes), the slab's key the smallest known (the slab moves whole),
 * POOL_ORDER_UNKNOWN when none is - with the pool's lock held: it must not
 * call back into the pool.  fn NULL: LRU. */
#define POOL_ORDER_UNKNOWN 0u
typedef uint64_t (*pool_order_fn)(void *ctx, uint64_t alloc_id, uint64_t offset, uint64_t bytes);
void pool_set_order(pool_t *p, pool_order_fn fn, void *ctx, uint32_t window);

/* ----------------------- virtual memory the application manages (fixed.c)
 *
 * issue 14: PyTorch's expandable segments reserve their own range and map
 * physical handles into it.  The runtime serves them from the pool so that
 * they are in the budget and move like any other memory. */

/* Reserves `size` bytes (rounded up to chunks) of vmem's range for the
 * application, aligned to `align` (0, or a power of two).  POOL_EVA when
 * the range has no room. */
pool_status_t pool_va_reserve(pool_t *p, uint64_t size, uint64_t align, uintptr_t *addr);
/* Gives a reservation back (addr and size as reserved); mappings still in
 * it are unmapped first (after every stream).  POOL_EINVAL when it is not
 * a reservation. */
pool_status_t pool_va_unreserve(pool_t *p, uintptr_t addr, uint64_t size);
/* An allocation at a fixed address of a reservation (chunk aligned, size a
 * multiple of the chunk), mapped eagerly like pool_malloc's and then
 * resident, evicted and faulted in like any other; *id its id.
 * POOL_EINVAL when the address is not in a reservation or already mapped;
 * POOL_ENOMEM / POOL_EHOST as pool_malloc. */
pool_status_t pool_map_fixed(pool_t *p, uintptr_t addr, uint64_t size, uint64_t *id);
/* Unmaps (frees, with pool_free's fences) every fixed allocation in
 * [addr, addr + size), which must begin at one and cover each entirely.
 * pool_free refuses fixed allocations. */
pool_status_t pool_unmap_fixed(pool_t *p, uintptr_t addr, uint64_t size, void *stream, bool all_streams);

/* Finishes completed offloads and frees (no waiting). */
void pool_poll(pool_t *p);
/* Waits until every offload and free issued so far is complete. */
pool_status_t pool_sync(pool_t *p);
/* Releases cached chunks back to the device (keeps mapped ones). */
void pool_trim(pool_t *p);

/* Page residency of one address, for tests and the trace. */
typedef enum { POOL_PAGE_RESIDENT, POOL_PAGE_OFFLOADING, POOL_PAGE_HOST, POOL_PAGE_RELEASED,
	       POOL_PAGE_SMALL, POOL_PAGE_NONE,
	       POOL_PAGE_HOST_MAPPED   /* on the host, its slot mapped at its address (host_map) */
} pool_page_state_t;
pool_page_state_t pool_page_state(pool_t *p, uintptr_t addr);

/* Device memory as the application should see it: the budget, and the
 * part of it not mapped for live allocations. */
void pool_mem_info(pool_t *p, uint64_t *free_bytes, uint64_t *budget);
void pool_get_stats(pool_t *p, pool_stats_t *out);
const pool_config_t *pool_config(const pool_t *p);
uintptr_t pool_base(const pool_t *p);

/* Writes the stats as a fixed-width table, one line per call of `out`. */
typedef void (*pool_output_fn)(const char *line, void *ctx);
void pool_stats_print(const pool_stats_t *s, pool_output_fn out, void *ctx);

#endif
