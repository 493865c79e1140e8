/* pool/pool.c - the device pool: virtual range, chunk cache, allocations,
 * residency and the LRU.  See pool.h for the model.
 *
 * Layout of the state (all guarded by pool.lock):
 *   - vmap[]: one entry per chunk-sized page of the reserved range, the
 *     allocation (or slab) that covers it; pointer lookup is one index.
 *   - vfree[]: free extents of the range (in pages), sorted, first-fit,
 *     coalesced (SuperNeurons §3.2.1's pool keeps the same two lists).
 *   - cache[]: physical chunks created and not mapped anywhere.
 *   - freed: allocations the application freed, still holding their
 *     virtual range and whatever chunks were mapped, FIFO.  A later
 *     allocation of the same page count reuses one once its free fence
 *     completed, with no driver call; under pressure they are reclaimed
 *     (unmapped, chunks to the cache, range back to vfree).
 *   - lru: resident, unlocked pages of live large allocations, most
 *     recently used first.  offloading: pages whose copy to host is in
 *     flight (explicit offload), oldest first.
 *   - classes[]: slabs (one chunk each) of the small-size sub-allocator.
 *   - host slots: chunk-sized pieces of pinned blocks, a free stack and a
 *     list of slots still read or written by a copy in flight.
 */
#include "pool/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { PG_RESIDENT, PG_OFFLOADING, PG_HOST, PG_RELEASED };
enum {
	PF_WRITTEN = 1u,     /* bytes are meaningful (written at least once) */
	PF_HOST_VALID = 2u,  /* the host slot holds the current bytes */
	PF_LISTED = 4u,      /* on the lru or offloading list */
	PF_MARK = 8u,        /* scratch: counted / copied by the current operation */
	PF_SEL = 16u,        /* scratch: selected by the current offload */
	PF_COPY = 32u,       /* scratch: copied back by the current fault-in */
};

struct fence {
	void *h;
	void *stream;
	uint32_t refs;
	bool done;
	bool all;
	struct fence *next;  /* free list */
};

struct alloc;

struct page {
	struct page *prev, *next;
	struct alloc *a;
	uint64_t chunk;      /* physical handle while mapped */
	void *host;          /* host slot, or NULL */
	struct fence *busy;  /* all queued work on this page is done after it */
	uint32_t idx;
	uint16_t locks;
	uint8_t state;
	uint8_t flags;
};

struct sblock {
	uint64_t id;         /* 0: free or free pending */
	uint32_t size;
};

enum { A_LARGE, A_SLAB };

struct alloc {
	struct alloc *prev, *next;   /* freed list, or slab class list */
	uintptr_t base;
	uint64_t size;               /* requested bytes (large) */
	uint64_t id;
	uint32_t npages;
	uint8_t kind;
	bool freed;
	struct fence *free_fence;
	struct page *pages;          /* large: npages entries */
	/* slab */
	uint64_t chunk;
	uint32_t cls, nblocks, nfree;
	uint64_t *bitmap;            /* 1 = taken (allocated or free pending) */
	struct sblock *blocks;
};

struct small_pending {
	struct small_pending *next;
	struct alloc *slab;
	uint32_t idx;
	struct fence *f;
};

struct slot_pending {
	struct slot_pending *next;
	void *p;
	struct fence *f;
};

struct vext {
	uint64_t start, len;         /* pages */
};

struct list {
	struct page *head, *tail;
};

#define NCLASS_MAX 64

struct pool {
	pthread_mutex_t lock;
	pool_config_t cfg;
	pool_ops_t ops;
	uintptr_t base;
	uint64_t npages_va;
	struct alloc **vmap;
	struct vext *vfree;
	uint32_t nvfree, capvfree;
	uint64_t *cache;
	uint32_t ncache, capcache;
	uint64_t held;
	uint64_t next_id;
	struct alloc *freed_head, *freed_tail;
	struct list lru, offl;
	/* small */
	uint32_t ncls;
	uint32_t cls_size[NCLASS_MAX];
	struct alloc *cls_slabs[NCLASS_MAX];
	struct small_pending *spend_head, *spend_tail;
	/* host */
	void **slots;
	uint32_t nslots, capslots, nslots_total;
	struct slot_pending *hpend_head, *hpend_tail;
	void **hblocks;
	uint32_t nhblocks, caphblocks;
	uint64_t host_allocated;
	struct fence *fence_free;
	pool_stats_t st;
	bool host_exhausted;         /* last eviction failed for lack of host memory */
	pool_status_t evict_err;     /* last eviction failed on a device operation */
};

/* ---------------------------------------------------------------- helpers */

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *n = realloc(*arr, (size_t)nc * elem);
	if (!n)
		return -1;
	*arr = n;
	*cap = nc;
	return 0;
}

static void stat_add(pool_stat_count_t *c, uint64_t v)
{
	c->cur += v;
	c->total += v;
	if (c->cur > c->peak)
		c->peak = c->cur;
}

static void stat_sub(pool_stat_count_t *c, uint64_t v)
{
	c->cur = c->cur >= v ? c->cur - v : 0;
}

static pool_status_t dev_status(int rc)
{
	if (rc == 0)
		return POOL_OK;
	return rc == POOL_ENOMEM ? POOL_ENOMEM : POOL_EDEVICE;
}

static uint64_t chunk_sz(const pool_t *p)
{
	return p->cfg.chunk_size;
}

static void emit(pool_t *p, pool_event_kind_t kind, const struct alloc *a,
		 uint64_t off, uint64_t bytes, uint64_t mapped, void *stream)
{
	if (!p->ops.record)
		return;
	pool_event_t ev = {
		.kind = kind, .alloc_id = a ? a->id : 0, .ptr = a ? a->base : 0,
		.offset = off, .bytes = bytes, .mapped = mapped, .stream = stream,
		.resident = p->st.resident.cur, .host = p->st.host.cur,
		.budget = p->cfg.budget,
	};
	p->ops.record(p->ops.ctx, &ev);
}

/* Bytes of page `idx` that belong to the allocation: copies move only these. */
static uint64_t page_bytes(const pool_t *p, const struct alloc *a, uint32_t idx)
{
	uint64_t off = (uint64_t)idx * chunk_sz(p);
	uint64_t n = a->size - off;
	return n < chunk_sz(p) ? n : chunk_sz(p);
}

static uintptr_t page_va(const pool_t *p, const struct page *pg)
{
	return pg->a->base + (uintptr_t)pg->idx * chunk_sz(p);
}

/* ----------------------------------------------------------------- fences */

static struct fence *fence_new(pool_t *p, void *stream, bool all, pool_status_t *st)
{
	struct fence *f = p->fence_free;
	if (f)
		p->fence_free = f->next;
	else if (!(f = malloc(sizeof(*f)))) {
		*st = POOL_ENOMEM;
		return NULL;
	}
	memset(f, 0, sizeof(*f));
	int rc = p->ops.fence_record(p->ops.ctx, stream, all, &f->h);
	if (rc) {
		f->next = p->fence_free;
		p->fence_free = f;
		*st = dev_status(rc);
		return NULL;
	}
	f->stream = stream;
	f->all = all;
	f->refs = 1;
	*st = POOL_OK;
	return f;
}

static struct fence *fence_ref(struct fence *f)
{
	if (f)
		f->refs++;
	return f;
}

static void fence_put(pool_t *p, struct fence *f)
{
	if (!f || --f->refs)
		return;
	p->ops.fence_destroy(p->ops.ctx, f->h);
	f->next = p->fence_free;
	p->fence_free = f;
}

static bool fence_done(pool_t *p, struct fence *f)
{
	if (!f || f->done)
		return true;
	if (p->ops.fence_query(p->ops.ctx, f->h) == 1)
		f->done = true;
	return f->done;
}

/* A host wait: only on the reactive path and when reclaiming. */
static void fence_wait(pool_t *p, struct fence *f)
{
	if (fence_done(p, f))
		return;
	uint64_t t0 = p->ops.now_ns(p->ops.ctx);
	p->ops.fence_wait(p->ops.ctx, f->h);
	p->st.stalls++;
	p->st.stall_ns += p->ops.now_ns(p->ops.ctx) - t0;
	f->done = true;
}

/* Makes `stream` wait for `f` unless stream order already implies it. */
static void stream_after(pool_t *p, void *stream, struct fence *f)
{
	if (!f || f->done || (!f->all && f->stream == stream))
		return;
	p->ops.stream_wait(p->ops.ctx, stream, f->h);
}

static void page_set_busy(pool_t *p, struct page *pg, struct fence *f)
{
	fence_ref(f);
	fence_put(p, pg->busy);
	pg->busy = f;
}

/* ------------------------------------------------------------ page lists */

static void list_del(struct list *l, struct page *pg)
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

static void list_push_front(struct list *l, struct page *pg)
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

static void list_push_back(struct list *l, struct page *pg)
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
static void page_unlist(pool_t *p, struct page *pg)
{
	if (!(pg->flags & PF_LISTED))
		return;
	list_del(pg->state == PG_OFFLOADING ? &p->offl : &p->lru, pg);
}

/* --------------------------------------------------------- virtual range */

static int va_take(pool_t *p, uint64_t n, uint64_t *start)
{
	for (uint32_t i = 0; i < p->nvfree; i++) {
		struct vext *e = &p->vfree[i];
		if (e->len < n)
			continue;
		*start = e->start;
		e->start += n;
		e->len -= n;
		if (!e->len) {
			memmove(e, e + 1, (p->nvfree - i - 1) * sizeof(*e));
			p->nvfree--;
		}
		return 0;
	}
	return -1;
}

static void va_give(pool_t *p, uint64_t start, uint64_t n)
{
	uint32_t i = 0;
	while (i < p->nvfree && p->vfree[i].start < start)
		i++;
	bool prev = i > 0 && p->vfree[i - 1].start + p->vfree[i - 1].len == start;
	bool next = i < p->nvfree && start + n == p->vfree[i].start;
	if (prev && next) {
		p->vfree[i - 1].len += n + p->vfree[i].len;
		memmove(&p->vfree[i], &p->vfree[i + 1], (p->nvfree - i - 1) * sizeof(struct vext));
		p->nvfree--;
	} else if (prev) {
		p->vfree[i - 1].len += n;
	} else if (next) {
		p->vfree[i].start = start;
		p->vfree[i].len += n;
	} else {
		/* The list holds at most one entry per allocation + 1; growing can
		 * only fail when malloc does, and then the range leaks (counted
		 * nowhere, harmless: the VA is 4x the device). */
		if (grow((void **)&p->vfree, &p->capvfree, p->nvfree + 1, sizeof(struct vext)))
			return;
		memmove(&p->vfree[i + 1], &p->vfree[i], (p->nvfree - i) * sizeof(struct vext));
		p->vfree[i].start = start;
		p->vfree[i].len = n;
		p->nvfree++;
	}
}

static void vmap_set(pool_t *p, struct alloc *a, uint64_t npages, struct alloc *v)
{
	uint64_t first = (a->base - p->base) / chunk_sz(p);
	for (uint64_t i = 0; i < npages; i++)
		p->vmap[first + i] = v;
}

/* ------------------------------------------------------------ host slots */

static void slot_release(pool_t *p, void *slot, struct fence *f)
{
	stat_sub(&p->st.host, chunk_sz(p));
	if (f && !f->done) {
		struct slot_pending *s = malloc(sizeof(*s));
		if (s) {
			s->next = NULL;
			s->p = slot;
			s->f = fence_ref(f);
			if (p->hpend_tail)
				p->hpend_tail->next = s;
			else
				p->hpend_head = s;
			p->hpend_tail = s;
			return;
		}
		fence_wait(p, f);
	}
	p->slots[p->nslots++] = slot;   /* capacity covers every slot ever carved */
}

static void slot_reap(pool_t *p, bool wait_one)
{
	struct slot_pending **pp = &p->hpend_head, *last = NULL;
	while (*pp) {
		struct slot_pending *s = *pp;
		if (wait_one) {
			fence_wait(p, s->f);
			wait_one = false;
		}
		if (!fence_done(p, s->f)) {
			last = s;
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		p->slots[p->nslots++] = s->p;
		fence_put(p, s->f);
		free(s);
	}
	p->hpend_tail = last;
}

static pool_status_t slot_get(pool_t *p, void **out)
{
	uint64_t cs = chunk_sz(p);
	if (!p->nslots && p->hpend_head)
		slot_reap(p, false);
	if (!p->nslots) {
		uint64_t blk = p->cfg.host_block;
		if (p->cfg.host_limit) {
			uint64_t left = p->cfg.host_limit > p->host_allocated ?
				p->cfg.host_limit - p->host_allocated : 0;
			left -= left % cs;
			if (blk > left)
				blk = left;
		}
		if (blk >= cs) {
			uint32_t n = (uint32_t)(blk / cs);
			void *mem;
			if (grow((void **)&p->slots, &p->capslots, p->nslots_total + n, sizeof(void *)) ||
			    grow((void **)&p->hblocks, &p->caphblocks, p->nhblocks + 1, sizeof(void *)))
				return POOL_EHOST;
			int rc = p->ops.host_alloc(p->ops.ctx, blk, &mem);
			if (rc == 0) {
				p->hblocks[p->nhblocks++] = mem;
				p->host_allocated += blk;
				p->st.host_allocated = p->host_allocated;
				p->nslots_total += n;
				for (uint32_t i = n; i-- > 0;)
					p->slots[p->nslots++] = (char *)mem + (uint64_t)i * cs;
			}
		}
	}
	if (!p->nslots && p->hpend_head)
		slot_reap(p, true);
	if (!p->nslots)
		return POOL_EHOST;
	*out = p->slots[--p->nslots];
	stat_add(&p->st.host, cs);
	return POOL_OK;
}

/* ---------------------------------------------------------- chunk cache */

static void cache_push(pool_t *p, uint64_t h)
{
	/* capacity covers every chunk the budget allows (set at create) */
	p->cache[p->ncache++] = h;
}

static pool_status_t page_unmap(pool_t *p, struct page *pg)
{
	int rc = p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p));
	p->st.unmaps++;
	cache_push(p, pg->chunk);
	pg->chunk = 0;
	return dev_status(rc);
}

static pool_status_t page_map(pool_t *p, struct page *pg)
{
	uint64_t h = p->cache[--p->ncache];
	int rc = p->ops.map(p->ops.ctx, page_va(p, pg), chunk_sz(p), h);
	p->st.maps++;
	if (rc) {
		cache_push(p, h);
		return dev_status(rc);
	}
	pg->chunk = h;
	pg->state = PG_RESIDENT;
	return POOL_OK;
}

/* An offload (explicit) whose fence completed: unmap, keep the host copy. */
static void offload_finish(pool_t *p, struct page *pg)
{
	list_del(&p->offl, pg);
	page_unmap(p, pg);
	stat_sub(&p->st.resident, chunk_sz(p));
	pg->state = (pg->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	page_set_busy(p, pg, NULL);
}

static bool offl_reap(pool_t *p, bool wait_oldest)
{
	bool any = false;
	if (wait_oldest && p->offl.head)
		fence_wait(p, p->offl.head->busy);
	for (struct page *pg = p->offl.head, *nx; pg; pg = nx) {
		nx = pg->next;
		if (fence_done(p, pg->busy)) {
			offload_finish(p, pg);
			any = true;
		}
	}
	return any;
}

/* ---------------------------------------------------------- freed ranges */

static void freed_unlink(pool_t *p, struct alloc *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		p->freed_head = a->next;
	if (a->next)
		a->next->prev = a->prev;
	else
		p->freed_tail = a->prev;
	a->prev = a->next = NULL;
}

/* A freed range is reusable when its free fence and every page's last
 * fence (a prefetch copy the app never consumed) have completed. */
static bool range_ready(pool_t *p, struct alloc *a, bool wait)
{
	if (wait)
		fence_wait(p, a->free_fence);
	if (!fence_done(p, a->free_fence))
		return false;
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (!pg->busy)
			continue;
		if (wait)
			fence_wait(p, pg->busy);
		if (!fence_done(p, pg->busy))
			return false;
		page_set_busy(p, pg, NULL);
	}
	fence_put(p, a->free_fence);
	a->free_fence = NULL;
	return true;
}

static void alloc_destroy(struct alloc *a)
{
	free(a->pages);
	free(a->bitmap);
	free(a->blocks);
	free(a);
}

/* Unmaps a ready freed range, chunks to the cache, range to vfree. */
static void range_reclaim(pool_t *p, struct alloc *a)
{
	freed_unlink(p, a);
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (pg->state == PG_RESIDENT)
			page_unmap(p, pg);
	}
	vmap_set(p, a, a->npages, NULL);
	va_give(p, (a->base - p->base) / chunk_sz(p), a->npages);
	alloc_destroy(a);
}

/* Reclaims the oldest ready freed range (waiting on it when `wait`). */
static bool freed_reclaim_one(pool_t *p, bool wait)
{
	for (struct alloc *a = p->freed_head; a; a = a->next) {
		if (range_ready(p, a, wait)) {
			range_reclaim(p, a);
			return true;
		}
		if (wait)
			break;
	}
	return false;
}

/* ------------------------------------------------------------- eviction */

/* SuperNeurons Alg. 2, LRU.out: evicts unlocked least-recently-used
 * pages until `need` chunks were returned to the cache.  Dirty pages are
 * copied to host on the D2H stream after their last use; clean ones (a
 * valid host copy, or never written) are dropped without a copy.  The
 * host then waits for the copies before unmapping: unmapping a range a
 * copy still reads would fault.  Returns the number of pages evicted. */
static uint32_t evict_lru(pool_t *p, uint32_t need)
{
	struct page *vict = NULL, **tail = &vict;
	uint32_t n = 0, ncopy = 0;
	pool_status_t st;

	p->host_exhausted = false;
	p->evict_err = POOL_OK;
	for (struct page *pg = p->lru.tail, *pv; pg && n < need; pg = pv) {
		pv = pg->prev;
		bool copy = (pg->flags & PF_WRITTEN) && !(pg->flags & PF_HOST_VALID);
		if (copy) {
			if (!pg->host && slot_get(p, &pg->host) != POOL_OK) {
				/* host full: clean pages further up the list can
				 * still be dropped without a copy */
				p->host_exhausted = true;
				continue;
			}
			stream_after(p, p->ops.d2h_stream, pg->busy);
			int rc = p->ops.copy_d2h(p->ops.ctx, pg->host, page_va(p, pg),
						 page_bytes(p, pg->a, pg->idx));
			if (rc) {
				slot_release(p, pg->host, NULL);
				pg->host = NULL;
				p->evict_err = dev_status(rc);
				break;
			}
			pg->flags |= PF_HOST_VALID | PF_MARK;
			ncopy++;
		}
		list_del(&p->lru, pg);
		pg->next = NULL;
		*tail = pg;
		tail = &pg->next;
		n++;
	}
	if (!n)
		return 0;
	struct fence *f = ncopy ? fence_new(p, p->ops.d2h_stream, false, &st) : NULL;
	if (ncopy && !f) {
		/* The copies are queued but nothing tells when they finish:
		 * unmapping now could pull the pages out from under them.  Keep
		 * every victim mapped and resident, back at the cold end of the
		 * LRU.  A copied page keeps its slot, marked not valid: a later
		 * copy into it is on the same D2H stream, so after this one. */
		p->evict_err = st;
		for (struct page *pg = vict, *nx; pg; pg = nx) {
			nx = pg->next;
			pg->next = NULL;
			if (pg->flags & PF_MARK)
				pg->flags &= ~(PF_MARK | PF_HOST_VALID);
			list_push_back(&p->lru, pg);
		}
		return 0;
	}
	if (f)
		fence_wait(p, f);
	for (struct page *pg = vict, *nx; pg; pg = nx) {
		nx = pg->next;
		pg->next = NULL;
		/* a copied page's fence f follows its last use; others wait */
		if (!f || !(pg->flags & PF_MARK))
			fence_wait(p, pg->busy);
		if (pg->flags & PF_MARK)
			p->st.bytes_evicted += page_bytes(p, pg->a, pg->idx);
		else
			p->st.evictions_clean++;
		pg->flags &= ~PF_MARK;
		page_unmap(p, pg);
		stat_sub(&p->st.resident, chunk_sz(p));
		if (pg->flags & PF_WRITTEN) {
			pg->state = PG_HOST;
		} else {
			pg->state = PG_RELEASED;
			if (pg->host) {
				slot_release(p, pg->host, NULL);
				pg->host = NULL;
				pg->flags &= ~PF_HOST_VALID;
			}
		}
		page_set_busy(p, pg, NULL);
		p->st.evictions++;
		emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
		     page_bytes(p, pg->a, pg->idx),
		     (pg->flags & PF_WRITTEN) ? page_bytes(p, pg->a, pg->idx) : 0,
		     p->ops.d2h_stream);
	}
	fence_put(p, f);
	return n;
}

static void slab_reclaim(pool_t *p, struct alloc *s);
static void small_reap(pool_t *p);

static bool slab_reclaim_empty(pool_t *p)
{
	for (uint32_t c = 0; c < p->ncls; c++)
		for (struct alloc *s = p->cls_slabs[c]; s; s = s->next)
			if (s->nfree == s->nblocks) {
				slab_reclaim(p, s);
				return true;
			}
	return false;
}

/* Makes the cache hold at least `need` chunks without exceeding the
 * budget: create while under it, else reclaim in order of cost (ready
 * freed ranges, finished offloads, empty slabs, then waiting on pending
 * frees and offloads, and last evicting live pages). */
static pool_status_t ensure_chunks(pool_t *p, uint32_t need)
{
	uint64_t cs = chunk_sz(p);
	bool device_full = false;

	while (p->ncache < need) {
		if (!device_full && p->held + cs <= p->cfg.budget) {
			uint64_t h;
			int rc = p->ops.chunk_create(p->ops.ctx, cs, &h);
			if (rc == 0) {
				p->held += cs;
				stat_add(&p->st.held, cs);
				p->st.chunks_created++;
				cache_push(p, h);
				continue;
			}
			if (rc != POOL_ENOMEM)
				return POOL_EDEVICE;
			/* The device holds less than the budget said (other
			 * processes, libraries): treat as full, reclaim. */
			device_full = true;
			continue;
		}
		if (p->spend_head)
			small_reap(p);
		if (freed_reclaim_one(p, false) || offl_reap(p, false) ||
		    slab_reclaim_empty(p) || freed_reclaim_one(p, true) ||
		    offl_reap(p, true))
			continue;
		if (evict_lru(p, need - p->ncache))
			continue;
		if (p->evict_err)
			return p->evict_err;
		return p->host_exhausted ? POOL_EHOST : POOL_ENOMEM;
	}
	return POOL_OK;
}

/* ----------------------------------------------------------- small sizes */

static int class_of(const pool_t *p, uint64_t bytes)
{
	for (uint32_t c = 0; c < p->ncls; c++)
		if (bytes <= p->cls_size[c])
			return (int)c;
	return -1;
}

static void slab_reclaim(pool_t *p, struct alloc *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		p->cls_slabs[s->cls] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	p->ops.unmap(p->ops.ctx, s->base, chunk_sz(p));
	p->st.unmaps++;
	cache_push(p, s->chunk);
	stat_sub(&p->st.resident, chunk_sz(p));
	vmap_set(p, s, 1, NULL);
	va_give(p, (s->base - p->base) / chunk_sz(p), 1);
	alloc_destroy(s);
}

static void small_reap(pool_t *p)
{
	struct small_pending **pp = &p->spend_head, *last = NULL;
	while (*pp) {
		struct small_pending *sp = *pp;
		if (!fence_done(p, sp->f)) {
			last = sp;
			pp = &sp->next;
			continue;
		}
		*pp = sp->next;
		sp->slab->bitmap[sp->idx / 64] &= ~(1ull << (sp->idx % 64));
		sp->slab->nfree++;
		fence_put(p, sp->f);
		free(sp);
	}
	p->spend_tail = last;
}

static pool_status_t va_alloc(pool_t *p, uint64_t npages, uint64_t *start)
{
	while (va_take(p, npages, start)) {
		if (!freed_reclaim_one(p, false) && !freed_reclaim_one(p, true) &&
		    !slab_reclaim_empty(p))
			return POOL_EVA;
	}
	return POOL_OK;
}

static pool_status_t slab_new(pool_t *p, uint32_t c, struct alloc **out)
{
	uint64_t cs = chunk_sz(p), start;
	pool_status_t st = ensure_chunks(p, 1);
	if (st)
		return st;
	struct alloc *s = calloc(1, sizeof(*s));
	uint32_t nb = (uint32_t)(cs / p->cls_size[c]);
	if (!s || !(s->bitmap = calloc((nb + 63) / 64, 8)) ||
	    !(s->blocks = calloc(nb, sizeof(struct sblock)))) {
		if (s)
			alloc_destroy(s);
		return POOL_ENOMEM;
	}
	if ((st = va_alloc(p, 1, &start))) {
		alloc_destroy(s);
		return st;
	}
	s->kind = A_SLAB;
	s->base = p->base + start * cs;
	s->npages = 1;
	s->cls = c;
	s->nblocks = s->nfree = nb;
	s->chunk = p->cache[--p->ncache];
	int rc = p->ops.map(p->ops.ctx, s->base, cs, s->chunk);
	p->st.maps++;
	if (rc) {
		cache_push(p, s->chunk);
		va_give(p, start, 1);
		alloc_destroy(s);
		return dev_status(rc);
	}
	stat_add(&p->st.resident, cs);
	vmap_set(p, s, 1, s);
	s->next = p->cls_slabs[c];
	if (s->next)
		s->next->prev = s;
	p->cls_slabs[c] = s;
	*out = s;
	return POOL_OK;
}

static pool_status_t small_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	int c = class_of(p, bytes);
	struct alloc *s;
	pool_status_t st;

	for (int pass = 0;; pass++) {
		for (s = p->cls_slabs[c]; s; s = s->next)
			if (s->nfree)
				break;
		if (s)
			break;
		if (pass == 0 && p->spend_head) {
			small_reap(p);
			continue;
		}
		if ((st = slab_new(p, (uint32_t)c, &s)))
			return st;
		break;
	}
	uint32_t i = 0;
	for (uint32_t w = 0; w < (s->nblocks + 63) / 64; w++) {
		if (~s->bitmap[w]) {
			i = w * 64 + (uint32_t)__builtin_ctzll(~s->bitmap[w]);
			break;
		}
	}
	s->bitmap[i / 64] |= 1ull << (i % 64);
	s->nfree--;
	s->blocks[i].id = ++p->next_id;
	s->blocks[i].size = (uint32_t)bytes;
	*addr = s->base + (uintptr_t)i * p->cls_size[c];
	*id = s->blocks[i].id;
	p->st.small_allocs++;
	stat_add(&p->st.reserved, p->cls_size[c]);
	return POOL_OK;
}

/* --------------------------------------------------------- large sizes */

static struct alloc *freed_find(pool_t *p, uint32_t npages)
{
	for (struct alloc *a = p->freed_head; a; a = a->next)
		if (a->npages == npages && range_ready(p, a, false))
			return a;
	return NULL;
}

static pool_status_t large_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	uint64_t cs = chunk_sz(p);
	uint64_t np = (bytes + cs - 1) / cs;
	struct alloc *a;
	pool_status_t st;
	uint32_t need = 0;

	if (np * cs > p->cfg.budget || np > UINT32_MAX)
		return POOL_ENOMEM;
	a = freed_find(p, (uint32_t)np);
	if (a) {
		freed_unlink(p, a);
		for (uint32_t i = 0; i < a->npages; i++)
			need += a->pages[i].state != PG_RESIDENT;
	} else {
		uint64_t start;
		a = calloc(1, sizeof(*a));
		if (!a || !(a->pages = calloc(np, sizeof(struct page)))) {
			free(a);
			return POOL_ENOMEM;
		}
		if ((st = va_alloc(p, np, &start))) {
			alloc_destroy(a);
			return st;
		}
		a->kind = A_LARGE;
		a->base = p->base + start * cs;
		a->npages = (uint32_t)np;
		for (uint32_t i = 0; i < a->npages; i++) {
			a->pages[i].a = a;
			a->pages[i].idx = i;
			a->pages[i].state = PG_RELEASED;
		}
		vmap_set(p, a, np, a);
		need = a->npages;
	}
	a->freed = true;   /* not live until fully mapped: never evicted meanwhile */
	st = ensure_chunks(p, need);
	for (uint32_t i = 0; st == POOL_OK && i < a->npages; i++)
		if (a->pages[i].state != PG_RESIDENT)
			st = page_map(p, &a->pages[i]);
	if (st) {
		/* keep it as a ready freed range: reclaimable, nothing leaks */
		a->prev = p->freed_tail;
		a->next = NULL;
		if (p->freed_tail)
			p->freed_tail->next = a;
		else
			p->freed_head = a;
		p->freed_tail = a;
		return st;
	}
	if (!need)
		p->st.ranges_reused++;
	a->freed = false;
	a->size = bytes;
	a->id = ++p->next_id;
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		pg->flags = 0;
		pg->locks = 0;
		list_push_front(&p->lru, pg);
	}
	stat_add(&p->st.resident, (uint64_t)a->npages * cs);
	stat_add(&p->st.reserved, (uint64_t)a->npages * cs);
	*addr = a->base;
	*id = a->id;
	return POOL_OK;
}

/* ------------------------------------------------------------ public API */

pool_status_t pool_create(const pool_config_t *cfg, const pool_ops_t *ops, pool_t **out)
{
	pool_config_t c = *cfg;
	if (!c.granularity || !c.chunk_size || c.chunk_size % c.granularity ||
	    c.budget < c.chunk_size || !c.va_size || c.va_size % c.chunk_size ||
	    c.small_threshold > c.chunk_size / 2 || c.va_size / c.chunk_size > UINT32_MAX)
		return POOL_ECONFIG;
	if (!c.host_block)
		c.host_block = 32 * c.chunk_size;
	c.host_block -= c.host_block % c.chunk_size;
	if (!c.host_block)
		c.host_block = c.chunk_size;
	pool_t *p = calloc(1, sizeof(*p));
	if (!p)
		return POOL_ENOMEM;
	p->cfg = c;
	p->ops = *ops;
	p->npages_va = c.va_size / c.chunk_size;
	uint64_t maxchunks = c.budget / c.chunk_size + 1;
	p->capcache = (uint32_t)maxchunks;
	p->vmap = calloc(p->npages_va, sizeof(*p->vmap));
	p->cache = calloc(maxchunks, sizeof(uint64_t));
	p->vfree = calloc(16, sizeof(struct vext));
	p->capvfree = 16;
	if (!p->vmap || !p->cache || !p->vfree) {
		free(p->vmap);
		free(p->cache);
		free(p->vfree);
		free(p);
		return POOL_ENOMEM;
	}
	int rc = ops->va_reserve(ops->ctx, c.va_size, c.chunk_size, &p->base);
	if (rc) {
		free(p->vmap);
		free(p->cache);
		free(p->vfree);
		free(p);
		return dev_status(rc);
	}
	p->vfree[0].start = 0;
	p->vfree[0].len = p->npages_va;
	p->nvfree = 1;
	/* Size classes: multiples of 256 bytes (cudaMalloc's alignment), four
	 * per doubling above 1 KiB so rounding wastes at most 25%; the last
	 * one covers every size below the threshold. */
	uint64_t top = (c.small_threshold + 255) & ~(uint64_t)255;
	for (uint64_t sz = 256; c.small_threshold && p->ncls < NCLASS_MAX;) {
		p->cls_size[p->ncls++] = (uint32_t)(sz < top ? sz : top);
		if (sz >= top)
			break;
		uint64_t pw = 1;
		while (pw * 2 <= sz)
			pw *= 2;
		sz += pw / 4 > 256 ? pw / 4 : 256;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return POOL_OK;
}

void pool_destroy(pool_t *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	offl_reap(p, false);
	while (p->offl.head)
		offl_reap(p, true);
	while (p->freed_head) {
		range_ready(p, p->freed_head, true);
		range_reclaim(p, p->freed_head);
	}
	/* live allocations: unmap their pages */
	for (uint64_t i = 0; i < p->npages_va; i++) {
		struct alloc *a = p->vmap[i];
		if (!a)
			continue;
		if (a->kind == A_SLAB) {
			slab_reclaim(p, a);
			continue;
		}
		for (uint32_t k = 0; k < a->npages; k++) {
			struct page *pg = &a->pages[k];
			fence_wait(p, pg->busy);
			page_set_busy(p, pg, NULL);
			if (pg->state == PG_RESIDENT)
				page_unmap(p, pg);
		}
		vmap_set(p, a, a->npages, NULL);
		alloc_destroy(a);
	}
	while (p->spend_head) {
		struct small_pending *sp = p->spend_head;
		p->spend_head = sp->next;
		fence_wait(p, sp->f);
		fence_put(p, sp->f);
		free(sp);
	}
	while (p->hpend_head) {
		struct slot_pending *s = p->hpend_head;
		p->hpend_head = s->next;
		fence_wait(p, s->f);
		fence_put(p, s->f);
		free(s);
	}
	for (uint32_t i = 0; i < p->ncache; i++)
		p->ops.chunk_release(p->ops.ctx, p->cache[i]);
	for (uint32_t i = 0; i < p->nhblocks; i++)
		p->ops.host_free(p->ops.ctx, p->hblocks[i]);
	p->ops.va_release(p->ops.ctx, p->base, p->cfg.va_size);
	while (p->fence_free) {
		struct fence *f = p->fence_free;
		p->fence_free = f->next;
		free(f);
	}
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_destroy(&p->lock);
	free(p->vmap);
	free(p->vfree);
	free(p->cache);
	free(p->slots);
	free(p->hblocks);
	free(p);
}

void pool_atfork_prepare(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
}

void pool_atfork_parent(pool_t *p)
{
	pthread_mutex_unlock(&p->lock);
}

void pool_atfork_child(pool_t *p)
{
	/* The child cannot use the parent's CUDA context; it only needs a lock
	 * that is not held by a thread that does not exist there. */
	pthread_mutex_init(&p->lock, NULL);
}

bool pool_owns(const pool_t *p, uintptr_t a)
{
	return a - p->base < p->cfg.va_size;
}

pool_status_t pool_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	pool_status_t st;
	if (!bytes)
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	if (bytes < p->cfg.small_threshold)
		st = small_malloc(p, bytes, addr, id);
	else
		st = large_malloc(p, bytes, addr, id);
	if (st == POOL_OK) {
		p->st.allocs++;
		stat_add(&p->st.requested, bytes);
		struct alloc *a = p->vmap[(*addr - p->base) / chunk_sz(p)];
		pool_event_t ev = {
			.kind = POOL_EV_ALLOC, .alloc_id = *id, .ptr = *addr,
			.bytes = bytes,
			.mapped = a->kind == A_SLAB ? p->cls_size[a->cls] :
				  (uint64_t)a->npages * chunk_sz(p),
			.resident = p->st.resident.cur, .host = p->st.host.cur,
			.budget = p->cfg.budget,
		};
		if (p->ops.record)
			p->ops.record(p->ops.ctx, &ev);
	} else {
		if (st == POOL_ENOMEM || st == POOL_EHOST)
			p->st.oom++;
		pool_event_t ev = {
			.kind = POOL_EV_OOM, .bytes = bytes,
			.resident = p->st.resident.cur, .host = p->st.host.cur,
			.budget = p->cfg.budget,
		};
		if (p->ops.record)
			p->ops.record(p->ops.ctx, &ev);
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

static pool_status_t small_free(pool_t *p, struct alloc *s, uintptr_t addr, void *stream, bool all)
{
	uint64_t off = addr - s->base, csz = p->cls_size[s->cls];
	uint32_t i = (uint32_t)(off / csz);
	if (off % csz || i >= s->nblocks || !s->blocks[i].id)
		return POOL_EINVAL;
	pool_status_t st;
	struct small_pending *sp = malloc(sizeof(*sp));
	if (!sp)
		return POOL_ENOMEM;
	sp->f = fence_new(p, stream, all, &st);
	if (!sp->f) {
		free(sp);
		return st;
	}
	sp->slab = s;
	sp->idx = i;
	sp->next = NULL;
	if (p->spend_tail)
		p->spend_tail->next = sp;
	else
		p->spend_head = sp;
	p->spend_tail = sp;
	struct alloc tmp = { .base = addr, .id = s->blocks[i].id };
	stat_sub(&p->st.requested, s->blocks[i].size);
	stat_sub(&p->st.reserved, csz);
	emit(p, POOL_EV_FREE, &tmp, 0, s->blocks[i].size, 0, stream);
	s->blocks[i].id = 0;
	return POOL_OK;
}

pool_status_t pool_free(pool_t *p, uintptr_t addr, void *stream, bool all_streams)
{
	if (!pool_owns(p, addr))
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = POOL_EINVAL;
	struct alloc *a = p->vmap[(addr - p->base) / chunk_sz(p)];
	if (!a)
		goto out;
	if (a->kind == A_SLAB) {
		st = small_free(p, a, addr, stream, all_streams);
		goto out;
	}
	if (a->freed || a->base != addr)
		goto out;
	struct fence *f = fence_new(p, stream, all_streams, &st);
	if (!f)
		goto out;
	uint64_t resident = 0;
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (pg->state == PG_OFFLOADING) {
			/* rare: the app frees what a policy is offloading */
			list_del(&p->offl, pg);
			fence_wait(p, pg->busy);
			pg->state = PG_RESIDENT;
		} else {
			page_unlist(p, pg);
		}
		if (pg->state == PG_RESIDENT)
			resident += chunk_sz(p);
		if (pg->host) {
			slot_release(p, pg->host, pg->busy);
			pg->host = NULL;
		}
		if (pg->state == PG_HOST)
			pg->state = PG_RELEASED;
		pg->flags = 0;
		pg->locks = 0;
	}
	a->freed = true;
	a->free_fence = f;
	a->prev = p->freed_tail;
	a->next = NULL;
	if (p->freed_tail)
		p->freed_tail->next = a;
	else
		p->freed_head = a;
	p->freed_tail = a;
	p->st.frees++;
	stat_sub(&p->st.resident, resident);
	stat_sub(&p->st.requested, a->size);
	stat_sub(&p->st.reserved, (uint64_t)a->npages * chunk_sz(p));
	emit(p, POOL_EV_FREE, a, 0, a->size, resident, stream);
	st = POOL_OK;
out:
	if (st == POOL_OK && a && a->kind == A_SLAB)
		p->st.frees++;
	pthread_mutex_unlock(&p->lock);
	return st;
}

/* ------------------------------------------------------ reactive layer */

/* Resolves a ref; returns the live large allocation it falls in (NULL for
 * small or foreign memory, which need no residency work). */
static struct alloc *resolve(pool_t *p, const pool_ref_t *r, pool_span_t *out)
{
	memset(out, 0, sizeof(*out));
	if (!pool_owns(p, r->ptr))
		return NULL;
	struct alloc *a = p->vmap[(r->ptr - p->base) / chunk_sz(p)];
	if (!a)
		return NULL;
	if (a->kind == A_SLAB) {
		uint64_t csz = p->cls_size[a->cls], off = r->ptr - a->base;
		uint32_t i = (uint32_t)(off / csz);
		if (i >= a->nblocks || !a->blocks[i].id)
			return NULL;
		uint64_t in = off - (uint64_t)i * csz, size = a->blocks[i].size;
		if (in >= size)
			return NULL;
		out->alloc_id = a->blocks[i].id;
		out->offset = in;
		out->bytes = r->bytes && r->bytes < size - in ? r->bytes : size - in;
		return NULL;
	}
	if (a->freed)
		return NULL;
	uint64_t off = r->ptr - a->base;
	if (off >= a->size)
		return NULL;
	/* An unknown extent (a scanned kernel argument) is the rest of the
	 * allocation.  An extent stated at this address by an earlier call is
	 * not trusted: a caching allocator (PyTorch's) reuses a block for a
	 * larger tensor without vmem seeing it, and a call that stated the
	 * size of one slice of a concatenation buffer says nothing of a later
	 * kernel over the whole buffer. */
	uint64_t n = r->bytes;
	if (!n || n > a->size - off)
		n = a->size - off;
	out->alloc_id = a->id;
	out->offset = off;
	out->bytes = n;
	return a;
}

static void lock_page(pool_t *p, struct page *pg)
{
	if (pg->state == PG_OFFLOADING) {
		/* used again before its offload finished: cancel it; the copy in
		 * flight stays valid as long as the page is not written, and the
		 * user's stream waits for it (stream_after in acquire) */
		list_del(&p->offl, pg);
		pg->state = PG_RESIDENT;
	} else if (pg->flags & PF_LISTED) {
		list_del(&p->lru, pg);
	}
	pg->locks++;
}

static void unlock_page(pool_t *p, struct page *pg)
{
	if (pg->locks && --pg->locks == 0 && pg->state == PG_RESIDENT)
		list_push_front(&p->lru, pg);
}

static void span_pages(const pool_t *p, const pool_span_t *s, uint32_t *first, uint32_t *last)
{
	*first = (uint32_t)(s->offset / chunk_sz(p));
	*last = (uint32_t)((s->offset + s->bytes - 1) / chunk_sz(p));
}

/* Maps every non-resident page among the locked ones and copies back the
 * bytes of those that have them, on the H2D stream; returns the fence of
 * the copies (NULL when none) with *nfault pages faulted. */
static pool_status_t fault_in(pool_t *p, struct alloc **as, const pool_span_t *spans, int n,
			      pool_event_kind_t kind, struct fence **fout, uint32_t *nfault)
{
	uint32_t need = 0, ncopy = 0;
	pool_status_t st;

	*fout = NULL;
	*nfault = 0;
	for (int i = 0; i < n; i++) {
		uint32_t f, l;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &f, &l);
		for (uint32_t k = f; k <= l; k++) {
			struct page *pg = &as[i]->pages[k];
			if (pg->state != PG_RESIDENT && !(pg->flags & PF_MARK)) {
				pg->flags |= PF_MARK;
				need++;
			}
		}
	}
	st = ensure_chunks(p, need);
	for (int i = 0; i < n; i++) {
		uint32_t f, l;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &f, &l);
		for (uint32_t k = f; k <= l; k++) {
			struct page *pg = &as[i]->pages[k];
			if (!(pg->flags & PF_MARK))
				continue;
			pg->flags &= ~PF_MARK;
			if (st)
				continue;
			if ((st = page_map(p, pg)))
				continue;
			stat_add(&p->st.resident, chunk_sz(p));
			(*nfault)++;
			uint64_t nb = page_bytes(p, pg->a, pg->idx), moved = 0;
			if ((pg->flags & PF_HOST_VALID) &&
			    p->ops.copy_h2d(p->ops.ctx, page_va(p, pg), pg->host, nb) == 0) {
				pg->flags |= PF_COPY;
				ncopy++;
				moved = nb;
				if (kind == POOL_EV_PREFETCH)
					p->st.bytes_prefetched += nb;
				else
					p->st.bytes_faulted_in += nb;
			}
			emit(p, kind, pg->a, (uint64_t)pg->idx * chunk_sz(p), nb, moved,
			     p->ops.h2d_stream);
		}
	}
	struct fence *f = NULL;
	if (ncopy)
		f = fence_new(p, p->ops.h2d_stream, false, &st);
	for (int i = 0; ncopy && i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++) {
			struct page *pg = &as[i]->pages[k];
			if (!(pg->flags & PF_COPY))
				continue;
			pg->flags &= ~PF_COPY;
			page_set_busy(p, pg, f);
		}
	}
	*fout = f;
	return st;
}

pool_status_t pool_acquire(pool_t *p, const pool_ref_t *refs, int n, void *stream, pool_span_t *out)
{
	struct alloc *as[n > 0 ? n : 1];
	pool_status_t st;
	struct fence *f;
	uint32_t nfault;
	bool any = false;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		as[i] = resolve(p, &refs[i], &out[i]);
		any |= as[i] != NULL;
	}
	if (!any) {
		pthread_mutex_unlock(&p->lock);
		return POOL_OK;
	}
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &out[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++)
			lock_page(p, &as[i]->pages[k]);
	}
	st = fault_in(p, as, out, n, POOL_EV_FAULT_IN, &f, &nfault);
	if (st) {
		for (int i = 0; i < n; i++) {
			uint32_t fi, la;
			if (!as[i])
				continue;
			span_pages(p, &out[i], &fi, &la);
			for (uint32_t k = fi; k <= la; k++)
				unlock_page(p, &as[i]->pages[k]);
		}
		if (st == POOL_ENOMEM || st == POOL_EHOST) {
			/* a device failure is not an out-of-memory */
			p->st.oom++;
			emit(p, POOL_EV_OOM, NULL, 0, 0, 0, stream);
		}
		pthread_mutex_unlock(&p->lock);
		return st;
	}
	p->st.misses += nfault;
	/* order the call after the copies and after earlier work on other
	 * streams (a prefetch, a cancelled offload, another stream's use) */
	struct fence *last = NULL;
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &out[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++) {
			struct page *pg = &as[i]->pages[k];
			if (pg->busy && pg->busy != last) {
				stream_after(p, stream, pg->busy);
				last = pg->busy;
			}
		}
	}
	if (f) {
		stream_after(p, stream, f);
		fence_put(p, f);
	}
	pthread_mutex_unlock(&p->lock);
	return POOL_OK;
}

void pool_release(pool_t *p, const pool_ref_t *refs, const pool_span_t *spans, int n, void *stream)
{
	struct alloc *as[n > 0 ? n : 1];
	bool any = false;
	pool_status_t st;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		as[i] = NULL;
		if (!spans[i].alloc_id || !pool_owns(p, refs[i].ptr))
			continue;
		struct alloc *a = p->vmap[(refs[i].ptr - p->base) / chunk_sz(p)];
		if (a && a->kind == A_LARGE && !a->freed && a->id == spans[i].alloc_id) {
			as[i] = a;
			any = true;
		}
	}
	if (!any) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	/* Two threads may use one page on two streams concurrently; the new
	 * use fence must dominate both, so this stream waits for the other's. */
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++) {
			struct fence *b = as[i]->pages[k].busy;
			if (b && !b->all && b->stream != stream && !fence_done(p, b))
				stream_after(p, stream, b);
		}
	}
	struct fence *f = fence_new(p, stream, false, &st);
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++) {
			struct page *pg = &as[i]->pages[k];
			if (refs[i].write) {
				pg->flags |= PF_WRITTEN;
				if (pg->host) {
					/* the host copy is stale; the slot may still be
					 * read by the fault-in copy, which f follows */
					slot_release(p, pg->host, f ? f : pg->busy);
					pg->host = NULL;
					pg->flags &= ~PF_HOST_VALID;
				}
			}
			if (f)
				page_set_busy(p, pg, f);
			unlock_page(p, pg);
		}
	}
	fence_put(p, f);
	pthread_mutex_unlock(&p->lock);
}

/* Collects the large allocation pages covering [addr, addr+bytes). */
static struct alloc *range_alloc(pool_t *p, uintptr_t addr, uint64_t bytes, pool_span_t *s)
{
	if (!pool_owns(p, addr))
		return NULL;
	struct alloc *a = p->vmap[(addr - p->base) / chunk_sz(p)];
	if (!a || a->kind != A_LARGE || a->freed)
		return NULL;
	uint64_t off = addr - a->base;
	if (off >= a->size)
		return NULL;
	s->alloc_id = a->id;
	s->offset = off;
	s->bytes = bytes && bytes < a->size - off ? bytes : a->size - off;
	return a;
}

pool_status_t pool_offload(pool_t *p, uintptr_t addr, uint64_t bytes)
{
	pool_span_t s;
	pool_status_t st = POOL_OK, fst = POOL_OK;
	uint32_t fi, la, ncopy = 0, nsel = 0;
	uint64_t moved = 0;
	struct fence *f = NULL;

	pthread_mutex_lock(&p->lock);
	struct alloc *a = range_alloc(p, addr, bytes, &s);
	if (!a) {
		pthread_mutex_unlock(&p->lock);
		return POOL_EINVAL;
	}
	span_pages(p, &s, &fi, &la);
	/* vDNN §III-A: copy out after the last use, on the D2H stream */
	for (uint32_t k = fi; k <= la; k++) {
		struct page *pg = &a->pages[k];
		if (pg->state != PG_RESIDENT || pg->locks)
			continue;
		if ((pg->flags & PF_WRITTEN) && !(pg->flags & PF_HOST_VALID)) {
			if (!pg->host && (st = slot_get(p, &pg->host)))
				break;
			stream_after(p, p->ops.d2h_stream, pg->busy);
			uint64_t nb = page_bytes(p, a, k);
			if (p->ops.copy_d2h(p->ops.ctx, pg->host, page_va(p, pg), nb)) {
				st = POOL_EDEVICE;
				break;
			}
			pg->flags |= PF_HOST_VALID | PF_MARK;
			moved += nb;
			ncopy++;
		}
		pg->flags |= PF_SEL;
		nsel++;
	}
	if (ncopy)
		f = fence_new(p, p->ops.d2h_stream, false, &fst);
	for (uint32_t k = fi; k <= la; k++) {
		struct page *pg = &a->pages[k];
		if (!(pg->flags & PF_SEL))
			continue;
		pg->flags &= ~PF_SEL;
		if (pg->flags & PF_MARK) {
			pg->flags &= ~PF_MARK;
			if (!f) {
				/* The copy is queued but no fence tells when it
				 * ends: the page must stay mapped.  It stays
				 * resident with its slot marked not valid (a later
				 * copy into the slot is on the same D2H stream). */
				pg->flags &= ~PF_HOST_VALID;
				moved -= page_bytes(p, a, k);
				continue;
			}
			page_set_busy(p, pg, f);
		}
		list_del(&p->lru, pg);
		pg->state = PG_OFFLOADING;
		list_push_back(&p->offl, pg);
		p->st.offloads++;
	}
	fence_put(p, f);
	p->st.bytes_offloaded += moved;
	if (nsel)
		emit(p, POOL_EV_OFFLOAD, a, s.offset, s.bytes, moved, p->ops.d2h_stream);
	pthread_mutex_unlock(&p->lock);
	return st ? st : fst;
}

pool_status_t pool_prefetch(pool_t *p, uintptr_t addr, uint64_t bytes)
{
	pool_span_t s;
	uint32_t fi, la, nfault;
	struct fence *f;

	pthread_mutex_lock(&p->lock);
	struct alloc *a = range_alloc(p, addr, bytes, &s);
	if (!a) {
		pthread_mutex_unlock(&p->lock);
		return POOL_EINVAL;
	}
	span_pages(p, &s, &fi, &la);
	for (uint32_t k = fi; k <= la; k++)
		lock_page(p, &a->pages[k]);
	pool_status_t st = fault_in(p, &a, &s, 1, POOL_EV_PREFETCH, &f, &nfault);
	for (uint32_t k = fi; k <= la; k++) {
		unlock_page(p, &a->pages[k]);
	}
	if (st == POOL_OK)
		p->st.prefetches += nfault;
	fence_put(p, f);
	pthread_mutex_unlock(&p->lock);
	return st;
}

void pool_poll(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
	offl_reap(p, false);
	small_reap(p);
	slot_reap(p, false);
	pthread_mutex_unlock(&p->lock);
}

pool_status_t pool_sync(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->offl.head)
		offl_reap(p, true);
	for (struct alloc *a = p->freed_head; a; a = a->next)
		range_ready(p, a, true);
	for (struct small_pending *sp = p->spend_head; sp; sp = sp->next)
		fence_wait(p, sp->f);
	small_reap(p);
	for (struct slot_pending *s = p->hpend_head; s; s = s->next)
		fence_wait(p, s->f);
	slot_reap(p, false);
	pthread_mutex_unlock(&p->lock);
	return POOL_OK;
}

void pool_trim(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->ncache) {
		p->ops.chunk_release(p->ops.ctx, p->cache[--p->ncache]);
		p->held -= chunk_sz(p);
		stat_sub(&p->st.held, chunk_sz(p));
		p->st.chunks_released++;
	}
	pthread_mutex_unlock(&p->lock);
}

pool_page_state_t pool_page_state(pool_t *p, uintptr_t addr)
{
	pool_page_state_t r = POOL_PAGE_NONE;
	if (!pool_owns(p, addr))
		return r;
	pthread_mutex_lock(&p->lock);
	struct alloc *a = p->vmap[(addr - p->base) / chunk_sz(p)];
	if (a && a->kind == A_SLAB) {
		r = POOL_PAGE_SMALL;
	} else if (a && !a->freed) {
		static const pool_page_state_t map[] = {
			[PG_RESIDENT] = POOL_PAGE_RESIDENT, [PG_OFFLOADING] = POOL_PAGE_OFFLOADING,
			[PG_HOST] = POOL_PAGE_HOST, [PG_RELEASED] = POOL_PAGE_RELEASED,
		};
		r = map[a->pages[(addr - a->base) / chunk_sz(p)].state];
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

void pool_mem_info(pool_t *p, uint64_t *free_bytes, uint64_t *budget)
{
	pthread_mutex_lock(&p->lock);
	*budget = p->cfg.budget;
	*free_bytes = p->cfg.budget > p->st.resident.cur ? p->cfg.budget - p->st.resident.cur : 0;
	pthread_mutex_unlock(&p->lock);
}

void pool_get_stats(pool_t *p, pool_stats_t *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
}

const pool_config_t *pool_config(const pool_t *p)
{
	return &p->cfg;
}

uintptr_t pool_base(const pool_t *p)
{
	return p->base;
}
