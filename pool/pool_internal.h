/* pool/pool_internal.h - the device pool's shared state, for its parts.
 *
 * pool.h is the model and the public API; this header is only for the
 * files of pool/, which split the pool along the parts pool.h describes:
 *
 *   fence.c      fences: events after queued work, reference counted
 *   vrange.c     the reserved virtual range: free extents, page -> allocation map
 *   chunks.c     the chunk cache and getting chunks under the budget
 *   host.c       pinned host slots that hold offloaded pages
 *   small.c      the small-size sub-allocator (slabs of one chunk, packed)
 *   residency.c  residency per page: the LRU, eviction, fault-in, offload,
 *                prefetch (the reactive layer and the policies' operations)
 *   hostmap.c    pages mapped from their host slots for calls whose
 *                unknown extents reach past the budget (cfg.host_map)
 *   pool.c       creation, large allocations, freed ranges, the public
 *                allocation entry points
 *
 * Layout of the state (all guarded by pool.lock):
 *   - vmap[]: one entry per chunk-sized page of the reserved range, the
 *     allocation (or slab) that covers it; pointer lookup is one index.
 *   - vfree[]: free extents of the range (in pages), sorted, first-fit,
 *     coalesced (SuperNeurons §3.2.1's pool keeps the same two lists).
 *   - cache[]: physical chunks created and not mapped anywhere.
 *   - freed: allocations the application freed, still holding their
 *     virtual range and whatever chunks were mapped, FIFO.  A later
 *     allocation reuses one in place once its free fence completed, with
 *     no driver call for the chunks it finds mapped: one of the same page
 *     count, or (cfg.range_fit) the part of a larger one, or of adjacent
 *     ones merged, that holds the most mapped chunks (cfg.range_pending:
 *     even before its free completed, ordered by its pages' busy marks);
 *     under pressure they are reclaimed (unmapped, chunks to the cache,
 *     range back to vfree), with range_fit only the pages that yield the
 *     chunks needed.
 *   - lru: resident, unlocked pages of live large allocations, most
 *     recently used first.  offloading: pages whose copy to host is in
 *     flight (explicit offload), oldest first.
 *   - slabs: one chunk each, of the small-size sub-allocator; each is a
 *     one-page allocation whose page is on the LRU like any other.
 *   - host slots: chunk-sized pieces of pinned blocks, a free stack and a
 *     list of slots still read or written by a copy in flight.
 *
 * Functions shared between the parts carry the pool_ prefix and are
 * declared here; every one of them expects pool.lock held.
 *
 * Host waits release the lock (issue 10: a thread waiting for the device
 * blocked every other thread's calls).  Only a few points wait: the
 * reclaim steps of pool_ensure_chunks (and so every caller of it, and of
 * pool_va_alloc), the wait phase of pool_evict_lru, pool_offl_reap with
 * wait_oldest, and pool_sync.  Across them a caller may hold no pointer
 * it has not protected: pages chosen for eviction are PG_EVICTING (a use
 * cancels that), an allocation a waiter points to is pinned (never
 * reclaimed or destroyed while pins > 0), and scratch page flags never
 * live across a wait.
 */
#ifndef VMEM_POOL_POOL_INTERNAL_H
#define VMEM_POOL_POOL_INTERNAL_H

#include "pool/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* PG_EVICTING: chosen by an eviction that waits (unlocked) for its copy or
 * last use; a use cancels it (the page is simply resident again).
 * PG_HOSTMAP: on the host, its slot mapped at its address for a call
 * beyond the budget (hostmap.c); the slot is the page's memory, no
 * device chunk, on the hmapl list until its uses complete.
 * PG_HANDOFF: left the device without a host wait (handoff.c): its chunk
 * now belongs to a page of the next call, which the copy streams fill
 * only after this page's last use and its copy out; its own address still
 * maps the chunk until then (on the handl list), and nothing may use it
 * before pool_handoff_leave unmapped it. */
enum { PG_RESIDENT, PG_OFFLOADING, PG_HOST, PG_RELEASED, PG_EVICTING, PG_HOSTMAP, PG_HANDOFF };
enum {
	PF_WRITTEN = 1u,     /* bytes are meaningful (written at least once) */
	PF_HOST_VALID = 2u,  /* the host slot holds the current bytes */
	PF_LISTED = 4u,      /* on the lru or offloading list */
	PF_MARK = 8u,        /* scratch: counted / copied by the current operation */
	PF_SEL = 16u,        /* scratch: selected by the current offload */
	PF_COPY = 32u,       /* scratch: copied back by the current fault-in */
	PF_HELD = 64u,       /* prefetched, on the held list until its first use */
	PF_DROPPED = 128u,   /* its dead bytes were dropped: a read of them is a loss */
	PF_DROP = 256u,      /* on the offloading list to be dropped, not copied; PG_HANDOFF:
				its bytes were dropped (dead), nothing kept */
	PF_REST = 512u,      /* mapped without its copy for a call that rewrote [rlo, rhi)
				of it: the host slot holds the other bytes, the device's
				are garbage until rest_fill (residency.c) */
};

/* Bytes of a page the policy declared dead (dead.c): sorted, disjoint
 * [lo, hi) intervals relative to the page. */
struct deadset {
	uint64_t epoch;      /* p->epoch of the last pool_discard that added to it */
	uint32_t n, cap;
	struct {
		uint32_t lo, hi;
	} iv[];
};

struct tl;

/* A recorded fence (ops.fence_record): done once seen complete. */
struct fence {
	void *h;
	void *stream;
	struct tl *tl;       /* the timeline it covers a prefix of; NULL for a free's fence */
	uint64_t seq;        /* covers positions <= seq of tl */
	uint32_t refs;
	bool done;
	bool all;
	struct fence *next;  /* free list */
};

/* A stream as the pool sees it (fence.c): a timeline of positions.  A
 * position is handed out after the work it stands for was issued (a
 * call's use of its pages, a batch of copies, a free), so a fence
 * recorded on the stream at any later time covers it.  Fences are
 * recorded only when something must wait for a position, never per call
 * (issue 14: an event per hooked call cost ~1-2 us). */
#define TL_RING 64   /* an offload records one fence per OFFLOAD_FENCE_BYTES */
#define TL_WAITED 4
struct tl {
	struct tl *next;     /* every timeline, p->tls */
	void *stream;
	uint64_t seq;        /* the last position handed out */
	uint64_t done;       /* every position <= done has completed */
	struct fence *ring[TL_RING];  /* recorded, oldest first, seq ascending */
	uint32_t nring;
	bool all;            /* p->tl_all: fences are recorded on every stream */
	bool dead;           /* the stream was destroyed: nothing more can be recorded */
	struct {             /* this stream already waits for tl's positions <= seq */
		struct tl *tl;
		uint64_t seq;
	} waited[TL_WAITED];
	uint32_t waited_next;
	uint64_t unseen;     /* position of the last write vmem did not see (0: none) */
};

/* A position on a timeline: the work queued there up to it.  tl NULL:
 * nothing pending. */
struct mark {
	struct tl *tl;
	uint64_t seq;
};

struct alloc;

struct page {
	struct page *prev, *next;
	struct alloc *a;
	uint64_t chunk;      /* physical handle while mapped */
	void *host;          /* host slot, or NULL */
	struct mark busy;    /* all queued work on this page is done after it, except
				an offload's copy (`out`) */
	struct mark wrote;   /* every write queued on it is done after this one (a
				call that writes it, a copy in); {0}: none since mapped */
	struct mark out;     /* PG_OFFLOADING: its copy to host is done after this
				one (D2H); the copy waited only for `wrote`, so it
				overlaps the calls still reading the page */
	uint64_t epoch;      /* p->epoch when its clean state was last established */
	struct deadset *dead; /* NULL: no byte declared dead */
	uint32_t idx;
	uint32_t rlo, rhi;   /* PF_REST: the bytes the device holds (page-relative) */
	uint16_t locks;
	uint8_t state;
	uint16_t flags;
};

/* One small allocation in a slab: units of 256 bytes (cudaMalloc's
 * alignment) from `start`.  id 0: freed, its units pending their free
 * fence, or an unused entry (chained through next_free). */
struct sblock {
	uint64_t id;
	uint32_t size;
	uint32_t start, units;
	uint32_t next_free;
};

#define SMALL_UNIT 256u

struct vext {
	uint64_t start, len;         /* pages, or a slab's units */
};

enum { A_LARGE, A_SLAB };

struct alloc {
	struct alloc *prev, *next;   /* freed list, or the slab list */
	uintptr_t base;
	uint64_t size;               /* requested bytes (large); the chunk (slab) */
	uint64_t id;
	uint32_t npages;
	uint32_t pins;               /* threads waiting (unlocked) with a pointer to it: never destroyed meanwhile */
	uint32_t handoffs;           /* its pages in PG_HANDOFF (handoff.c) */
	uint8_t kind;
	bool freed;
	bool fixed;                  /* mapped by the application at its own address (fixed.c) */
	bool on_freed;               /* on the freed list (`freed` alone also marks one being mapped) */
	struct fence *free_fence;    /* cudaFree: recorded on every stream at free time */
	struct mark free_mark;       /* cudaFreeAsync: the position of the free on its stream */
	struct page *pages;          /* npages entries (one for a slab) */
	/* slab (small.c): allocations of any size below the threshold,
	 * packed first-fit in units; the slab's one page moves as a whole */
	uint32_t nunits, units_used; /* units_used counts frees still pending */
	uint32_t *owner;             /* per unit: block index + 1, 0 = free */
	struct sblock *blocks;
	uint32_t nblocks, capblocks, free_block;
	struct vext *fext;           /* free units, sorted, coalesced */
	uint32_t nfext, capfext;
	uint32_t max_ext;            /* the largest free extent, in units */
	uint64_t req;                /* bytes requested by its live blocks */
	/* large: the end of the bytes any call has written since it was
	 * allocated, valid while the pool's epoch is still `wepoch` (no
	 * write vmem did not see since); past it the bytes were never
	 * written and hold nothing to keep */
	uint64_t wend, wepoch;
};

struct small_pending {
	struct small_pending *next;
	struct alloc *slab;
	uint32_t idx;
	struct fence *f;             /* a free on every stream */
	struct mark m;               /* a free on one stream */
};

struct slot_pending {
	struct slot_pending *next;
	void *p;
	struct mark m;
};

struct list {
	struct page *head, *tail;
};

struct pool {
	pthread_mutex_t lock;
	/* Host waits happen with the lock released (pool_fence_wait);
	 * `waiting` counts them and `cv` is broadcast after each, so that a
	 * thread that found nothing to evict while other threads' evictions
	 * are in flight waits for them instead of failing. */
	pthread_cond_t cv;
	uint32_t waiting;
	pool_config_t cfg;
	pool_ops_t ops;
	uintptr_t base;
	uint64_t npages_va;
	unsigned chunk_shift;        /* log2 of the chunk when a power of two, else 0 */
	struct alloc **vmap;
	struct vext *vfree;
	uint32_t nvfree, capvfree;
	uint64_t *cache;
	uint32_t ncache, capcache;
	uint64_t held;
	uint64_t next_id;
	struct alloc *freed_head, *freed_tail;
	struct list lru, offl;
	struct list heldl;           /* prefetched pages not used yet (PF_HELD) */
	struct list hmapl;           /* PG_HOSTMAP pages, mapped first first */
	struct list handl;           /* PG_HANDOFF pages, handed off first first */
	/* allocation ids (idmap.c): id -> allocation, and block for small ones */
	struct idslot *ids;
	uint64_t nids, capids;
	/* liveness (dead.c) */
	uint64_t ndead_full;         /* pages whose every byte is dead, not dropped */
	uint64_t ndropped;           /* pages holding dropped bytes (PF_DROPPED) */
	uint64_t nrest;              /* pages mapped with their rest on the host (PF_REST) */
	/* the application's own reservations (fixed.c) */
	struct resv *resv;
	uint32_t nresv, capresv;
	/* eviction order from a plan (pool_set_order) */
	pool_order_fn order;
	void *order_ctx;
	uint32_t order_window;
	/* small: slabs in creation order (first-fit packs the oldest) */
	struct alloc *slabs_head, *slabs_tail;
	struct small_pending *spend_head, *spend_tail;
	/* host */
	void **slots;
	uint32_t nslots, capslots, nslots_total;
	struct slot_pending *hpend_head, *hpend_tail;
	void **hblocks;
	uint32_t nhblocks, caphblocks;
	uint64_t host_allocated;
	struct fence *fence_free;
	/* timelines (fence.c) */
	struct tl *tls;
	struct tl *tl_last;          /* the one found last: most calls use one stream */
	struct tl *tl_d2h, *tl_h2d;  /* the pool's copy streams */
	struct tl *tl_all;           /* every stream: the fallback */
	uint64_t epoch;              /* bumped by every write vmem did not see */
	pool_stats_t st;
	bool host_exhausted;         /* last eviction failed for lack of host memory */
	pool_status_t evict_err;     /* last eviction failed on a device operation */
	uint32_t evict_taken_back;   /* last eviction's victims a use or a free took back
					while it waited (lock released): worth another try */
};

/* ---------------------------------------------------------------- helpers */

static inline void stat_add(pool_stat_count_t *c, uint64_t v)
{
	c->cur += v;
	c->total += v;
	if (c->cur > c->peak)
		c->peak = c->cur;
}

/* The small slack's peak is taken at allocations only (small.c): a free
 * opens holes that the next allocations fill first, and a mass free at
 * the end of a run is not waste. */
static inline void slack_add(pool_stat_count_t *c, uint64_t v)
{
	c->cur += v;
	c->total += v;
}

static inline void stat_sub(pool_stat_count_t *c, uint64_t v)
{
	c->cur = c->cur >= v ? c->cur - v : 0;
}

static inline pool_status_t dev_status(int rc)
{
	if (rc == 0)
		return POOL_OK;
	return rc == POOL_ENOMEM ? POOL_ENOMEM : POOL_EDEVICE;
}

static inline uint64_t chunk_sz(const pool_t *p)
{
	return p->cfg.chunk_size;
}

/* Page index of a byte offset: a shift when the chunk is a power of two
 * (it always is unless VMEM_CHUNK_SIZE says otherwise), a division when
 * not - the hot path resolves every ref of every call with it. */
static inline uint64_t page_of(const pool_t *p, uint64_t off)
{
	return p->chunk_shift ? off >> p->chunk_shift : off / p->cfg.chunk_size;
}

/* Bytes of page `idx` that belong to the allocation: copies move only these. */
static inline uint64_t page_bytes(const pool_t *p, const struct alloc *a, uint32_t idx)
{
	uint64_t off = (uint64_t)idx * chunk_sz(p);
	uint64_t n = a->size - off;
	return n < chunk_sz(p) ? n : chunk_sz(p);
}

static inline uintptr_t page_va(const pool_t *p, const struct page *pg)
{
	return pg->a->base + (uintptr_t)pg->idx * chunk_sz(p);
}

/* The page holds a device chunk (mapped, or leaving with a copy or its
 * last use still to come). */
static inline bool page_has_chunk(const struct page *pg)
{
	return pg->state == PG_RESIDENT || pg->state == PG_OFFLOADING || pg->state == PG_EVICTING;
}

/* ------------------------------------------------------------ page lists */

/* True when the page's bytes need no copy to be dropped: a valid host
 * copy, or never written - and no write vmem did not see came since that
 * was established (issue 10: such a write would otherwise be thrown away
 * by the next eviction and the old bytes brought back by the next
 * fault-in). */
static inline bool page_clean(const pool_t *p, const struct page *pg)
{
	if (pg->flags & PF_REST)
		return pg->epoch == p->epoch && (pg->flags & PF_HOST_VALID);
	return pg->epoch == p->epoch &&
	       (!(pg->flags & PF_WRITTEN) || (pg->flags & PF_HOST_VALID));
}

/* The page no longer keeps its rest apart (it left the device, was
 * dropped or freed, or its rest came back). */
static inline void page_rest_forget(pool_t *p, struct page *pg)
{
	if (pg->flags & PF_REST) {
		pg->flags &= ~PF_REST;
		p->nrest--;
	}
}

static inline void list_del(struct list *l, struct page *pg)
{
	if (pg->prev)
		pg->prev->next = pg->next;
	else
		l->head = pg->next;
	if (pg->next)
		pg->next->prev = pg->prev;
	else
		l->tail = pg->prev;
	pg->prev = pg->next = NULL;
	pg->flags &= ~PF_LISTED;
}

static inline void list_push_front(struct list *l, struct page *pg)
{
	pg->prev = NULL;
	pg->next = l->head;
	if (l->head)
		l->head->prev = pg;
	else
		l->tail = pg;
	l->head = pg;
	pg->flags |= PF_LISTED;
}

static inline void list_push_back(struct list *l, struct page *pg)
{
	pg->next = NULL;
	pg->prev = l->tail;
	if (l->tail)
		l->tail->next = pg;
	else
		l->head = pg;
	l->tail = pg;
	pg->flags |= PF_LISTED;
}

/* Removes a page from whichever list holds it. */
static inline void page_unlist(pool_t *p, struct page *pg)
{
	if (!(pg->flags & PF_LISTED))
		return;
	if (pg->flags & PF_HELD) {
		list_del(&p->heldl, pg);
		pg->flags &= ~PF_HELD;
	} else if (pg->state == PG_HOSTMAP) {
		list_del(&p->hmapl, pg);
	} else if (pg->state == PG_HANDOFF) {
		list_del(&p->handl, pg);
	} else {
		list_del(pg->state == PG_OFFLOADING ? &p->offl : &p->lru, pg);
	}
}

/* ------------------------------------------------------ shared functions */

/* pool.c */
int pool_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem);
void pool_freed_push(pool_t *p, struct alloc *a);
void pool_alloc_live(pool_t *p, struct alloc *a, uint64_t bytes);
pool_status_t pool_free_large(pool_t *p, struct alloc *a, void *stream, bool all_streams);
bool pool_range_ready(pool_t *p, struct alloc *a, bool wait);
void pool_range_reclaim(pool_t *p, struct alloc *a);
void pool_emit(pool_t *p, pool_event_kind_t kind, const struct alloc *a,
	       uint64_t off, uint64_t bytes, uint64_t mapped, void *stream);
void pool_alloc_destroy(struct alloc *a);
bool pool_freed_reclaim_one(pool_t *p, bool wait, uint32_t want);
int pool_range_carve(pool_t *p, struct alloc *a, uint32_t s, uint32_t n);

/* fence.c: fences, timelines and marks */
struct fence *pool_fence_new(pool_t *p, void *stream, bool all, pool_status_t *st);
struct fence *pool_fence_ref(struct fence *f);
void pool_fence_put(pool_t *p, struct fence *f);
bool pool_fence_done(pool_t *p, struct fence *f);
pool_status_t pool_fence_wait(pool_t *p, struct fence *f);
/* Sets up the copy streams' and the all-streams timelines; frees them all. */
pool_status_t pool_tl_init(pool_t *p);
void pool_tl_fini(pool_t *p);
/* The timeline of `stream`, created on first use (never NULL: tl_all
 * when the host has no memory for one). */
struct tl *pool_tl(pool_t *p, void *stream);
/* A new position on tl: everything issued on its stream until now. */
struct mark pool_mark_now(pool_t *p, struct tl *tl);
/* True when m has completed (known, or learned by querying a fence,
 * recording one if none covers m yet; a failed record answers false). */
bool pool_mark_done(pool_t *p, struct mark m);
static inline bool mark_known_done(struct mark m)
{
	return !m.tl || m.seq <= m.tl->done;
}
/* A fence that covers m (the ring's, or recorded now); NULL when m is
 * done, or on failure with *st set.  Borrowed: the ring holds it. */
struct fence *pool_mark_fence(pool_t *p, struct mark m, pool_status_t *st);
/* Host wait for m. */
pool_status_t pool_mark_wait(pool_t *p, struct mark m);
/* A fence already recorded that covers m and not everything queued on
 * m's stream since (work after it keeps the device busy while the host
 * waits for it); NULL when m is done or there is none.  Records nothing. */
struct fence *pool_mark_fenced(pool_t *p, struct mark m);
/* Makes `stream` (timeline me, as pool_tl answered for it) wait for m
 * unless stream order or an earlier wait already implies it. */
pool_status_t pool_stream_after(pool_t *p, struct tl *me, void *stream, struct mark m);
/* An offloading page's two marks as one (its busy): the D2H stream waits
 * for the last use, and busy becomes a D2H position after it and the
 * copy.  For every path that orders or releases by busy alone (a call
 * that cancels the offload, a free, teardown). */
pool_status_t pool_page_join_out(pool_t *p, struct page *pg);
/* Makes the D2H stream wait for every write vmem did not see so far. */
pool_status_t pool_d2h_after_unseen(pool_t *p);
static inline bool mark_same(struct mark a, struct mark b)
{
	return a.tl == b.tl && a.seq == b.seq;
}

/* vrange.c; the extent lists serve the slabs' units too */
int pool_ext_take(struct vext *e, uint32_t *n, uint64_t want, uint64_t *start);
int pool_ext_give(struct vext **e, uint32_t *n, uint32_t *cap, uint64_t start, uint64_t len);
void pool_va_give(pool_t *p, uint64_t start, uint64_t n);
void pool_vmap_set(pool_t *p, struct alloc *a, uint64_t npages, struct alloc *v);
pool_status_t pool_va_alloc(pool_t *p, uint64_t npages, uint64_t *start);

/* host.c */
void pool_slot_release(pool_t *p, void *slot, struct mark m);
void pool_slot_reap(pool_t *p, bool wait_one);
pool_status_t pool_slot_get(pool_t *p, void **out);

/* chunks.c */
void pool_cache_push(pool_t *p, uint64_t h);
pool_status_t pool_page_unmap(pool_t *p, struct page *pg);
pool_status_t pool_page_map(pool_t *p, struct page *pg);

/* Pages mapped together whose access is granted in one call: a run of
 * adjacent pages of one allocation (chunks.c).  pool_page_map_run maps a
 * page into the run (granting the run before when the page does not
 * extend it); pool_run_grant grants what is pending, and must be called
 * before the pages are used or the lock is released.  When the grant
 * fails the run's pages are unmapped again (back to PG_HOST when their
 * host copy is valid, else PG_RELEASED) and the device's error returned.
 * Without cfg.grant_runs both behave as pool_page_map. */
struct grant_run {
	struct alloc *a;
	uint32_t first, n;
};
pool_status_t pool_page_map_run(pool_t *p, struct page *pg, struct grant_run *g);
pool_status_t pool_run_grant(pool_t *p, struct grant_run *g);
/* pool_run_grant at the end of a map loop that ended with `st`: the
 * loop's error if it had one, else the grant's. */
pool_status_t pool_run_finish(pool_t *p, struct grant_run *g, pool_status_t st);
pool_status_t pool_ensure_chunks(pool_t *p, uint32_t need);

/* small.c */
bool pool_slab_reclaim_empty(pool_t *p);
void pool_slab_reclaim(pool_t *p, struct alloc *s);
void pool_small_reap(pool_t *p);
/* pool_prefetch; `next_call`: the range is for the call about to be
 * issued (a block just placed in a slab on the host), so the room may
 * come from any page the plan needs later than that call - the range's
 * own key says nothing (a new block is in no plan yet). */
pool_status_t pool_prefetch_for(pool_t *p, const pool_range_t *r, pool_wait_t wait, bool next_call);
pool_status_t pool_small_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id);
pool_status_t pool_small_free(pool_t *p, struct alloc *s, uintptr_t addr, void *stream, bool all);
/* The live block of slab s that contains ptr, or NULL. */
struct sblock *pool_slab_block(const struct alloc *s, uintptr_t ptr);
/* Bytes of a mapped slab that no live block requested (small.c keeps the
 * stats' small slack as the sum over mapped slabs).  An empty slab counts
 * nothing: it is reclaimed as soon as memory is needed, like a cached
 * chunk. */
static inline uint64_t slab_slack(const struct alloc *s)
{
	return s->req ? s->size - s->req : 0;
}

/* residency.c */
bool pool_offl_reap(pool_t *p, bool wait_oldest);
uint32_t pool_evict_lru(pool_t *p, uint32_t need);
/* Frees chunks into the cache without any host wait (for the policies'
 * prefetch): dead pages and (`clean`) clean pages whose last use
 * completed, never a held one; with a plan's order, only pages it needs
 * later than `floor` (0: any) or does not know.  Returns how many it
 * freed. */
uint32_t pool_evict_nowait(pool_t *p, uint32_t need, bool clean, uint64_t floor);
/* Fills the chunk cache towards `want` with what needs neither a host wait
 * nor a copy: the budget's room, completed frees and offloads, empty
 * slabs, dead pages (never a live page, not even a clean one).  Returns
 * the chunks in the cache, at most `want`. */
uint32_t pool_chunks_free(pool_t *p, uint32_t want);
/* chunks.c: one new physical chunk into the cache (the caller checked the
 * budget): 0, or the device's status (POOL_ENOMEM: the device is full). */
int pool_chunk_create(pool_t *p);

/* idmap.c: live allocation ids (large ones, and small blocks with
 * their slab) */
struct idslot {
	uint64_t id;                 /* 0: empty */
	struct alloc *a;
	uint32_t block;              /* small: index in the slab; large: UINT32_MAX */
};
int pool_id_put(pool_t *p, uint64_t id, struct alloc *a, uint32_t block);
void pool_id_del(pool_t *p, uint64_t id);
const struct idslot *pool_id_get(const pool_t *p, uint64_t id);
void pool_id_fini(pool_t *p);

/* fixed.c: the application's reservations and fixed mappings */
struct resv {
	uint64_t start, npages;      /* pages of the reserved range */
	uint32_t nallocs;            /* fixed allocations in it, live or freed */
	bool released;               /* cuMemAddressFree came: give the range back when empty */
};
/* A fixed allocation's range is gone (reclaimed): the reservation gives
 * its pages back to the virtual range once released and empty. */
void pool_resv_drop(pool_t *p, struct alloc *a);

/* hostmap.c */
/* Maps the page's host slot at its address (a released page gets a fresh
 * slot, its bytes meaningless as a fresh chunk's): PG_HOST or PG_RELEASED
 * -> PG_HOSTMAP.  The caller orders the use after pg->busy. */
pool_status_t pool_hostmap_page(pool_t *p, struct page *pg);
/* An unlocked PG_HOSTMAP page whose uses completed leaves the device's
 * view: unmapped, PG_HOST (PG_RELEASED when never written).  With `wait`
 * the host waits for the uses (the lock released, the allocation
 * pinned).  True when the page is not mapped from the host any more. */
bool pool_hostmap_leave(pool_t *p, struct page *pg, bool wait);
/* pool_hostmap_leave without a wait for every such page (`wait`: with). */
void pool_hostmap_reap(pool_t *p, bool wait);

/* handoff.c */
/* Gives the chunk of `from`, an unlocked resident page of a large
 * allocation (a slab gets new blocks meanwhile) whose last use -
 * and copy out, when it has one: the caller makes that its busy mark - may
 * still be queued, to `to`, a page that is not mapped: `to` maps it at once
 * (RESIDENT, its busy mark from's, which the copy streams must follow
 * before they write the chunk); `from` becomes PG_HANDOFF (dropped when
 * `dead`).  The caller fills `to` (a copy in on the H2D stream after
 * to->busy) or leaves it to its call, which orders after to->busy.  A
 * failed map changes nothing. */
pool_status_t pool_handoff(pool_t *p, struct page *from, struct page *to, bool dead);
/* A PG_HANDOFF page whose busy mark (last use, copy out) completed: its address
 * unmapped, PG_HOST (PG_RELEASED when nothing is kept).  With `wait` the
 * host waits for them (the lock released, the allocation pinned).  True
 * when the page is no longer PG_HANDOFF. */
bool pool_handoff_leave(pool_t *p, struct page *pg, bool wait);
/* A page handed to (`to`, mapped, nothing queued into it yet) gives the
 * chunk back to the page it came from, resident again; false when `to` was
 * not handed to, or the device refused to unmap it. */
bool pool_handoff_undo(pool_t *p, struct page *to);
/* pool_handoff_leave for every such page (`wait`: waiting for each; false
 * when one is left, the device having refused a wait or an unmap). */
bool pool_handoff_reap(pool_t *p, bool wait);

/* dead.c */
/* Every byte of the page dead (of its bytes that belong to the allocation). */
bool pool_page_all_dead(const pool_t *p, const struct page *pg);
/* Every byte of the page outside [lo, hi) (page-relative) dead, and
 * droppable as pool_page_all_dead says. */
bool pool_page_dead_beside(const pool_t *p, const struct page *pg, uint64_t lo, uint64_t hi);
/* True when [lo, hi) (page-relative) meets dropped bytes of the page. */
bool pool_page_lost(const struct page *pg, uint64_t lo, uint64_t hi);
/* A write to [lo, hi) of the page makes those bytes live again. */
void pool_page_written(pool_t *p, struct page *pg, uint64_t lo, uint64_t hi);
/* The page's dead bytes are gone (dropped without a copy). */
void pool_page_dropped(pool_t *p, struct page *pg);
/* A resident, unlocked, whole-dead page leaves without a copy once its
 * last use completed: on the offloading list with PF_DROP
 * (pool_offl_reap finishes it). */
void pool_page_drop_later(pool_t *p, struct page *pg);
/* The page leaves the allocation's life (free): no dead bytes any more. */
void pool_page_forget(pool_t *p, struct page *pg);

#endif
