/* pool/pool.c - the device pool's front: creation and teardown, large
 * allocations and the freed ranges they are reused from, and the public
 * allocation entry points.  See pool.h for the model and
 * pool_internal.h for the parts the rest of the pool is split into.
 */
#include "pool/pool_internal.h"

/* ---------------------------------------------------------------- helpers */

int pool_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
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

void pool_emit(pool_t *p, pool_event_kind_t kind, const struct alloc *a,
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

/* ---------------------------------------------------------- freed ranges */

static void freed_unlink(pool_t *p, struct alloc *a)
{
	a->on_freed = false;
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
 * use (another stream's, a prefetch copy the app never consumed, an
 * offload's copy) have completed. */
bool pool_range_ready(pool_t *p, struct alloc *a, bool wait)
{
	if (wait && (pool_fence_wait(p, a->free_fence) || pool_mark_wait(p, a->free_mark)))
		return false;
	if (!pool_fence_done(p, a->free_fence) || !pool_mark_done(p, a->free_mark))
		return false;
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (!pg->busy.tl)
			continue;
		if (wait && pool_mark_wait(p, pg->busy))
			return false;
		if (!pool_mark_done(p, pg->busy))
			return false;
		pg->busy.tl = NULL;
	}
	/* pages handed off before the free: their uses are done, so their
	 * addresses can be unmapped (the range holds its own chunks only) */
	for (uint32_t i = 0; a->handoffs && i < a->npages; i++)
		if (a->pages[i].state == PG_HANDOFF && !pool_handoff_leave(p, &a->pages[i], false))
			return false;
	pool_fence_put(p, a->free_fence);
	a->free_fence = NULL;
	a->free_mark.tl = NULL;
	return true;
}

void pool_alloc_destroy(struct alloc *a)
{
	for (uint32_t i = 0; a->pages && i < a->npages; i++)
		free(a->pages[i].dead);
	free(a->pages);
	free(a->owner);
	free(a->blocks);
	free(a->fext);
	free(a);
}

/* Unmaps a ready freed range, chunks to the cache, range to vfree. */
void pool_range_reclaim(pool_t *p, struct alloc *a)
{
	freed_unlink(p, a);
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (pg->state == PG_RESIDENT)
			pool_page_unmap(p, pg);
	}
	pool_vmap_set(p, a, a->npages, NULL);
	if (a->fixed)
		pool_resv_drop(p, a);   /* its range is the application's reservation */
	else
		pool_va_give(p, page_of(p, a->base - p->base), a->npages);
	pool_alloc_destroy(a);
}

/* The smallest suffix of `a` that holds `want` mapped pages: its first
 * page (0 when the whole range is needed). */
static uint32_t suffix_for(const struct alloc *a, uint32_t want)
{
	uint32_t got = 0, i = a->npages;
	while (i > 0 && got < want)
		got += a->pages[--i].state == PG_RESIDENT;
	return got < want ? 0 : i;
}

/* Reclaims a ready freed range: with the best fit and `want` > 0, only
 * the smallest suffix that frees `want` chunks (the rest stays a freed
 * range, mapped, for an allocation to reuse in place). */
static void reclaim_some(pool_t *p, struct alloc *a, uint32_t want)
{
	uint32_t k = want && p->cfg.range_fit && !a->fixed ? suffix_for(a, want) : 0;
	if (k && pool_range_carve(p, a, k, a->npages - k) == 0)
		p->st.ranges_trimmed++;
	pool_range_reclaim(p, a);
}

/* Reclaims the oldest ready freed range (or the part of it that frees
 * `want` chunks, 0: all of it), or waits (unlocked) for the oldest one
 * when `wait`.  True when it made progress. */
bool pool_freed_reclaim_one(pool_t *p, bool wait, uint32_t want)
{
	for (struct alloc *a = p->freed_head; a; a = a->next) {
		if (a->pins)
			continue;   /* another thread waits for it */
		if (!wait) {
			if (pool_range_ready(p, a, false)) {
				reclaim_some(p, a, want);
				return true;
			}
			continue;
		}
		a->pins++;
		bool ready = pool_range_ready(p, a, true);
		a->pins--;
		if (ready && !a->pins && a->freed) {
			reclaim_some(p, a, want);
			return true;
		}
		return ready;
	}
	return false;
}

/* ------------------------------------------- best fit: split and merge */

/* Freed ranges are merged only when ready (no fence, no mark, no page
 * busy), carved when ready or when their free is pending (the pieces
 * share it), and either only when unpinned (no waiter points into them),
 * not the application's fixed mappings, and on the freed list (an
 * allocation being mapped is `freed` too, but not listed).  Their pages
 * are on no list and hold no host slot or dead bytes, so page entries
 * move freely between ranges, busy marks and all; only `a` and `idx`
 * follow. */
static bool range_movable(pool_t *p, struct alloc *a)
{
	return a->kind == A_LARGE && a->on_freed && !a->pins && !a->fixed &&
	       pool_range_ready(p, a, false);
}

/* Links b into the freed list after pos (NULL: at the head). */
static void freed_insert_after(pool_t *p, struct alloc *pos, struct alloc *b)
{
	struct alloc *next = pos ? pos->next : p->freed_head;

	b->freed = true;
	b->on_freed = true;
	b->prev = pos;
	b->next = next;
	if (next)
		next->prev = b;
	else
		p->freed_tail = b;
	if (pos)
		pos->next = b;
	else
		p->freed_head = b;
}

/* A new alloc for pages [s, s + n) of `a`, taking over their entries. */
static struct alloc *range_piece(pool_t *p, struct alloc *a, uint32_t s, uint32_t n)
{
	struct alloc *b = calloc(1, sizeof(*b));
	if (!b || !(b->pages = malloc((size_t)n * sizeof(struct page)))) {
		free(b);
		return NULL;
	}
	b->kind = A_LARGE;
	b->base = a->base + (uint64_t)s * chunk_sz(p);
	b->npages = n;
	b->free_fence = pool_fence_ref(a->free_fence);   /* a pending free covers every piece */
	b->free_mark = a->free_mark;
	memcpy(b->pages, a->pages + s, (size_t)n * sizeof(struct page));
	for (uint32_t i = 0; i < n; i++) {
		b->pages[i].a = b;
		b->pages[i].idx = i;
	}
	return b;
}

static void piece_destroy(pool_t *p, struct alloc *b)
{
	pool_fence_put(p, b->free_fence);
	free(b->pages);   /* its entries were moved, dead sets and all */
	free(b);
}

/* Makes the movable freed range `a` cover only its pages [s, s + n); the
 * pages before and after become freed ranges of their own, at a's place
 * in the FIFO.  -1 (nothing changed) when memory for them is short. */
int pool_range_carve(pool_t *p, struct alloc *a, uint32_t s, uint32_t n)
{
	uint32_t t = a->npages - s - n;
	struct alloc *head = s ? range_piece(p, a, 0, s) : NULL;
	struct alloc *tail = t ? range_piece(p, a, s + n, t) : NULL;

	if ((s && !head) || (t && !tail)) {
		if (head)
			piece_destroy(p, head);
		if (tail)
			piece_destroy(p, tail);
		return -1;
	}
	if (s)
		memmove(a->pages, a->pages + s, (size_t)n * sizeof(struct page));
	a->base += (uint64_t)s * chunk_sz(p);
	a->npages = n;
	for (uint32_t i = 0; i < n; i++)
		a->pages[i].idx = i;
	struct page *shrunk = realloc(a->pages, (size_t)n * sizeof(struct page));
	if (shrunk)
		a->pages = shrunk;
	if (tail) {
		pool_vmap_set(p, tail, t, tail);
		freed_insert_after(p, a, tail);
	}
	if (head) {
		pool_vmap_set(p, head, s, head);
		freed_insert_after(p, a, head);
	}
	p->st.ranges_split++;
	return 0;
}

/* The movable freed range right after `a` in the virtual range, if any. */
static struct alloc *range_after(pool_t *p, const struct alloc *a)
{
	uint64_t next = page_of(p, a->base - p->base) + a->npages;
	struct alloc *b = next < p->npages_va ? p->vmap[next] : NULL;
	if (!b || b->base != p->base + next * chunk_sz(p) || !range_movable(p, b))
		return NULL;
	return b;
}

/* Absorbs b, the freed range right after a, into a. */
static int range_absorb(pool_t *p, struct alloc *a, struct alloc *b)
{
	uint64_t n = (uint64_t)a->npages + b->npages;
	if (n > UINT32_MAX)
		return -1;
	struct page *pg = realloc(a->pages, n * sizeof(struct page));
	if (!pg)
		return -1;
	a->pages = pg;
	memcpy(pg + a->npages, b->pages, (size_t)b->npages * sizeof(struct page));
	for (uint32_t i = a->npages; i < n; i++) {
		pg[i].a = a;
		pg[i].idx = i;
	}
	pool_vmap_set(p, b, b->npages, a);
	a->npages = (uint32_t)n;
	freed_unlink(p, b);
	piece_destroy(p, b);
	p->st.ranges_merged++;
	return 0;
}

/* The window of n pages of `a` that holds the most mapped pages: its
 * first page, and the count in *mapped. */
static uint32_t best_window(const struct alloc *a, uint32_t n, uint32_t *mapped)
{
	uint32_t in = 0, best = 0, at = 0;
	for (uint32_t i = 0; i < a->npages; i++) {
		in += a->pages[i].state == PG_RESIDENT;
		if (i >= n)
			in -= a->pages[i - n].state == PG_RESIDENT;
		if (i + 1 >= n && in > best) {
			best = in;
			at = i + 1 - n;
		}
	}
	*mapped = best;
	return at;
}

/* --------------------------------------------------------- large sizes */

static struct alloc *exact_find(pool_t *p, uint32_t npages)
{
	for (struct alloc *a = p->freed_head; a; a = a->next)
		if (a->npages == npages && !a->pins && !a->fixed && pool_range_ready(p, a, false))
			return a;
	return NULL;
}

struct fit {
	struct alloc *a;
	uint32_t at, mapped;   /* the window's first page, its mapped pages */
	bool ready;
};

/* A range whose free is pending can be handed out when its pages' busy
 * marks stand for all the work queued on them before the free: when no
 * hooked call vmem could not see into (pool_note_unseen_write) may still
 * be running on any stream.  Then every later use on another stream, every
 * unmap and every copy out orders after those marks as for any page, with
 * no host wait for the free itself.  (A kernel launched through a path vmem
 * does not hook at all is beyond this, as it is beyond eviction's
 * protection: docs/pool.md.)  The same for every range: asked once a scan. */
static bool pending_ok(pool_t *p)
{
	if (!p->cfg.range_pending)
		return false;
	for (struct tl *tl = p->tls; tl; tl = tl->next)
		if (tl->unseen && !pool_mark_done(p, (struct mark){ tl, tl->unseen }))
			return false;
	return true;
}

/* One pass of the best fit over the freed list; false when nothing fits. */
static bool fit_scan(pool_t *p, uint32_t npages, struct fit *f)
{
	int pending = -1;   /* pending_ok, once a range needs it */

	*f = (struct fit){ 0 };
	for (struct alloc *a = p->freed_head; a; a = a->next) {
		uint32_t m, s;
		bool ready;

		if (a->pins || a->fixed || a->npages < npages)
			continue;
		ready = pool_range_ready(p, a, false);
		if (!ready && pending < 0)
			pending = pending_ok(p);
		if (!ready && (!pending || a->handoffs))
			continue;   /* a handed-off page's address is mapped until it leaves */
		s = best_window(a, npages, &m);
		if (!f->a || m > f->mapped || (m == f->mapped && ready > f->ready) ||
		    (m == f->mapped && ready == f->ready && a->npages < f->a->npages))
			*f = (struct fit){ a, s, m, ready };
		if (ready && m == npages && a->npages == npages)
			break;   /* nothing beats it */
	}
	return f->a != NULL;
}

/* Merges each ready freed range with the ready ones after it until it
 * spans npages; true when anything was merged. */
static bool merge_for(pool_t *p, uint32_t npages)
{
	bool merged = false;

	for (struct alloc *a = p->freed_head; a; a = a->next) {
		struct alloc *b;
		if (!range_movable(p, a))
			continue;
		while (a->npages < npages && (b = range_after(p, a)) && !range_absorb(p, a, b))
			merged = true;
	}
	return merged;
}

/* The freed range a new allocation of `npages` reuses, carved to that
 * size, or NULL.  Exact fit (cfg.range_fit off): the oldest ready range
 * of that many pages.  Best fit: the range, or window of one, that leaves
 * the fewest pages to map (then a ready one before one whose free is
 * still pending, then the smallest range, then the oldest); when none is
 * large enough, adjacent ready ranges are merged first.  A pending range
 * (cfg.range_pending) is taken without a host wait: its pages' busy marks
 * order the new uses, unmaps and copies (pending_ok).  Training frees and
 * allocates the same sizes every iteration, so exact fits are the rule
 * without pressure; under it, a freed range reused in place saves an unmap
 * and a map per chunk (docs/pool.md). */
static struct alloc *freed_find(pool_t *p, uint32_t npages)
{
	struct fit f;

	if (!p->cfg.range_fit)
		return exact_find(p, npages);
	if (!fit_scan(p, npages, &f) && !(merge_for(p, npages) && fit_scan(p, npages, &f)))
		return NULL;
	if (f.a->npages != npages && pool_range_carve(p, f.a, f.at, npages))
		return NULL;
	if (!f.ready) {
		/* its pages' busy marks order what follows (pending_ok) */
		pool_fence_put(p, f.a->free_fence);
		f.a->free_fence = NULL;
		f.a->free_mark.tl = NULL;
		p->st.ranges_pending++;
	}
	return f.a;
}

/* Leaving `need` pages to their first touch defers the evictions that
 * make room for them to that call, which must then not fail for want of
 * host memory where the allocation itself would have: with a host limit,
 * only while the host has room for that many evicted pages (else the
 * allocation maps everything now and fails cleanly if it cannot). */
static bool lazy_ok(const pool_t *p, uint32_t need)
{
	uint64_t want = (uint64_t)need * chunk_sz(p);
	return !p->cfg.host_limit ||
	       (p->st.host.cur < p->cfg.host_limit && p->cfg.host_limit - p->st.host.cur >= want);
}

static pool_status_t large_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	uint64_t cs = chunk_sz(p);
	uint64_t np = (bytes + cs - 1) / cs;
	struct alloc *a;
	pool_status_t st;
	uint32_t need = 0;

	/* larger than the budget: taken only with host_map (a call needing
	 * more of it than the budget holds maps the rest from the host,
	 * pool_acquire_flags) and lazy_map (only what fits is mapped now);
	 * otherwise refused here, where an application's caching allocator
	 * or batch-size search recovers, not at the first call over it */
	if (np > UINT32_MAX || (np * cs > p->cfg.budget && !(p->cfg.host_map && p->cfg.lazy_map)))
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
		if ((st = pool_va_alloc(p, np, &start))) {
			pool_alloc_destroy(a);
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
		pool_vmap_set(p, a, np, a);
		need = a->npages;
	}
	a->freed = true;   /* not live until mapped: never evicted meanwhile */
	if (p->cfg.lazy_map && lazy_ok(p, need)) {
		/* map what is free now, first pages first; the rest is mapped
		 * by the first call that touches it (a fresh map, no copy) */
		uint32_t got = pool_chunks_free(p, need), left = need;
		struct grant_run g = { 0 };
		st = POOL_OK;
		for (uint32_t i = 0; st == POOL_OK && got && i < a->npages; i++)
			if (a->pages[i].state != PG_RESIDENT) {
				st = pool_page_map_run(p, &a->pages[i], &g);
				got--;
				left--;
			}
		st = pool_run_finish(p, &g, st);
		if (st == POOL_OK && left) {
			p->st.lazy_allocs++;
			p->st.lazy_pages += left;
		}
	} else {
		struct grant_run g = { 0 };
		st = pool_ensure_chunks(p, need);
		for (uint32_t i = 0; st == POOL_OK && i < a->npages; i++)
			if (a->pages[i].state != PG_RESIDENT)
				st = pool_page_map_run(p, &a->pages[i], &g);
		st = pool_run_finish(p, &g, st);
	}
	if (st) {
		/* keep it as a ready freed range: reclaimable, nothing leaks */
		pool_freed_push(p, a);
		return st;
	}
	if (!need)
		p->st.ranges_reused++;
	pool_alloc_live(p, a, bytes);
	*addr = a->base;
	*id = a->id;
	return POOL_OK;
}

void pool_freed_push(pool_t *p, struct alloc *a)
{
	freed_insert_after(p, p->freed_tail, a);
}

void pool_alloc_live(pool_t *p, struct alloc *a, uint64_t bytes)
{
	a->freed = false;
	a->size = bytes;
	a->wend = 0;
	a->wepoch = p->epoch;
	a->id = ++p->next_id;
	(void)pool_id_put(p, a->id, a, UINT32_MAX);   /* no memory: the policies cannot name it */
	uint32_t mapped = 0;
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		pg->flags = 0;
		pg->locks = 0;
		pg->epoch = p->epoch;
		if (pg->state == PG_RESIDENT) {   /* else mapped at first touch (lazy_map) */
			list_push_front(&p->lru, pg);
			mapped++;
		}
	}
	stat_add(&p->st.resident, (uint64_t)mapped * chunk_sz(p));
	stat_add(&p->st.reserved, (uint64_t)a->npages * chunk_sz(p));
}

/* ------------------------------------------------------------ public API */

uint64_t pool_chunk_auto(uint64_t budget, uint64_t granularity)
{
	const uint64_t most = 16ull << 20;
	uint64_t c = granularity;

	if (!granularity)
		return 0;
	while (c * 2 <= most && c * 2 <= budget / 128)
		c *= 2;
	return c;
}

pool_status_t pool_create(const pool_config_t *cfg, const pool_ops_t *ops, pool_t **out)
{
	pool_config_t c = *cfg;
	if (!c.granularity || !c.chunk_size || c.chunk_size % c.granularity ||
	    c.budget < c.chunk_size || !c.va_size || c.va_size % c.chunk_size ||
	    c.small_threshold > c.chunk_size / 2 || c.va_size / c.chunk_size > UINT32_MAX ||
	    (c.host_map && !ops->map_slot))
		return POOL_ECONFIG;
	if (!c.host_block)
		c.host_block = 32 * c.chunk_size;
	if (!c.offload_fence)
		c.offload_fence = 64ull << 20;
	c.host_block -= c.host_block % c.chunk_size;
	if (!c.host_block)
		c.host_block = c.chunk_size;
	pool_t *p = calloc(1, sizeof(*p));
	if (!p)
		return POOL_ENOMEM;
	p->cfg = c;
	p->ops = *ops;
	p->npages_va = c.va_size / c.chunk_size;
	if (!(c.chunk_size & (c.chunk_size - 1)))
		p->chunk_shift = (unsigned)__builtin_ctzll(c.chunk_size);
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
	if (pool_tl_init(p)) {
		pool_tl_fini(p);
		p->ops.va_release(p->ops.ctx, p->base, c.va_size);
		free(p->vmap);
		free(p->cache);
		free(p->vfree);
		free(p);
		return POOL_ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	*out = p;
	return POOL_OK;
}

void pool_destroy(pool_t *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	pool_offl_reap(p, false);
	while (p->offl.head && pool_offl_reap(p, true))
		;
	/* teardown: waits that failed (a dead device) are not retried */
	(void)pool_handoff_reap(p, true);
	while (p->handl.head) {
		struct page *pg = p->handl.head;
		(void)p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p));
		list_del(&p->handl, pg);
		pg->a->handoffs--;
		pg->chunk = 0;
		pg->state = PG_RELEASED;
	}
	while (p->offl.head) {
		struct page *pg = p->offl.head;
		list_del(&p->offl, pg);
		pg->state = PG_RESIDENT;
	}
	while (p->freed_head) {
		(void)pool_range_ready(p, p->freed_head, true);
		pool_range_reclaim(p, p->freed_head);
	}
	/* live allocations: unmap their pages */
	for (uint64_t i = 0; i < p->npages_va; i++) {
		struct alloc *a = p->vmap[i];
		if (!a)
			continue;
		if (a->kind == A_SLAB) {
			(void)pool_mark_wait(p, a->pages[0].busy);
			pool_slab_reclaim(p, a);
			continue;
		}
		for (uint32_t k = 0; k < a->npages; k++) {
			struct page *pg = &a->pages[k];
			(void)pool_mark_wait(p, pg->busy);   /* teardown: nothing to report to */
			(void)pool_mark_wait(p, pg->out);
			pg->busy.tl = NULL;
			pg->out.tl = NULL;
			page_unlist(p, pg);
			if (pg->state == PG_RESIDENT)
				pool_page_unmap(p, pg);
			else if (pg->state == PG_HOSTMAP)
				(void)p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p));
		}
		pool_vmap_set(p, a, a->npages, NULL);
		pool_alloc_destroy(a);
	}
	while (p->spend_head) {
		struct small_pending *sp = p->spend_head;
		p->spend_head = sp->next;
		(void)pool_fence_wait(p, sp->f);
		(void)pool_mark_wait(p, sp->m);
		pool_fence_put(p, sp->f);
		free(sp);
	}
	while (p->hpend_head) {
		struct slot_pending *s = p->hpend_head;
		p->hpend_head = s->next;
		(void)pool_mark_wait(p, s->m);
		free(s);
	}
	pool_tl_fini(p);
	pool_id_fini(p);
	free(p->resv);
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
	pthread_cond_destroy(&p->cv);
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
	pthread_cond_init(&p->cv, NULL);
}

bool pool_owns(const pool_t *p, uintptr_t a)
{
	return a - p->base < p->cfg.va_size;
}

static uint64_t resident_pages(const struct alloc *a)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < a->npages; i++)
		n += a->pages[i].state == PG_RESIDENT;
	return n;
}

pool_status_t pool_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	pool_status_t st;
	bool cold = false;
	if (!bytes)
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	if (bytes < p->cfg.small_threshold)
		st = pool_small_malloc(p, bytes, addr, id);
	else
		st = large_malloc(p, bytes, addr, id);
	if (st == POOL_OK) {
		p->st.allocs++;
		stat_add(&p->st.requested, bytes);
		struct alloc *a = p->vmap[page_of(p, *addr - p->base)];
		cold = a->kind == A_SLAB && a->pages[0].state == PG_HOST && p->order;
		pool_event_t ev = {
			.kind = POOL_EV_ALLOC, .alloc_id = *id, .ptr = *addr,
			.bytes = bytes,
			.mapped = a->kind == A_SLAB ?
				  (bytes + SMALL_UNIT - 1) / SMALL_UNIT * SMALL_UNIT :
				  resident_pages(a) * chunk_sz(p),
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
	if (cold) {
		/* placed in a slab whose bytes are on the host: the call that
		 * uses the new block (the next, as a rule) would fault the slab
		 * in, its other blocks' bytes copied in the call's way; under a
		 * plan (an eviction order) they start back now, as a prefetch
		 * for the next call once the call before is queued (the host
		 * waits for the copies out that make room, the device works) */
		pool_range_t r = { .alloc_id = *id, .offset = 0, .bytes = bytes };
		(void)pool_prefetch_for(p, &r, POOL_WAIT_ALL, true);
	}
	return st;
}

/* Frees a live large allocation (the lock held): its memory is reused
 * after its free fence or mark. */
pool_status_t pool_free_large(pool_t *p, struct alloc *a, void *stream, bool all_streams)
{
	pool_status_t st;
	/* cudaFree orders after every stream: a fence now.  cudaFreeAsync
	 * after its own stream: a position on it, fenced when reuse needs to
	 * know. */
	struct fence *f = NULL;
	struct mark fm = { 0 };
	if (all_streams) {
		if (!(f = pool_fence_new(p, stream, true, &st)))
			return st;
	} else {
		fm = pool_mark_now(p, pool_tl(p, stream));
	}
	uint64_t resident = 0;
	for (uint32_t i = 0; i < a->npages; i++) {
		/* mapped from the host: unmapped once its uses completed (the
		 * host waits), so that the range holds chunks only */
		if (a->pages[i].state == PG_HOSTMAP && !pool_hostmap_leave(p, &a->pages[i], true))
			return POOL_EDEVICE;
	}
	for (uint32_t i = 0; i < a->npages; i++) {
		struct page *pg = &a->pages[i];
		if (pg->state == PG_HANDOFF) {
			/* its address stays mapped until its busy mark (last
			 * use, copy out) completed: pool_range_ready unmaps it */
		} else if (pg->state == PG_OFFLOADING || pg->state == PG_EVICTING) {
			/* rare: the app frees what a policy is offloading or
			 * another thread evicting.  The copy may still read the
			 * page: its mark stays the page's busy one, which the
			 * range waits for before it is reused or unmapped. */
			if (pg->state == PG_OFFLOADING) {
				list_del(&p->offl, pg);
				(void)pool_page_join_out(p, pg);
			}
			pg->state = PG_RESIDENT;
		} else {
			page_unlist(p, pg);
		}
		if (pg->state == PG_RESIDENT)
			resident += chunk_sz(p);
		if (pg->host) {
			pool_slot_release(p, pg->host, pg->busy);
			pg->host = NULL;
		}
		if (pg->state == PG_HOST)
			pg->state = PG_RELEASED;
		pool_page_forget(p, pg);
		page_rest_forget(p, pg);
		pg->flags &= PG_HANDOFF == pg->state ? PF_LISTED : 0;   /* still on handl */
		pg->locks = 0;
	}
	pool_id_del(p, a->id);
	a->free_fence = f;
	a->free_mark = fm;
	pool_freed_push(p, a);
	p->st.frees++;
	stat_sub(&p->st.resident, resident);
	stat_sub(&p->st.requested, a->size);
	stat_sub(&p->st.reserved, (uint64_t)a->npages * chunk_sz(p));
	pool_emit(p, POOL_EV_FREE, a, 0, a->size, resident, stream);
	return POOL_OK;
}

pool_status_t pool_free(pool_t *p, uintptr_t addr, void *stream, bool all_streams)
{
	if (!pool_owns(p, addr))
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = POOL_EINVAL;
	struct alloc *a = p->vmap[page_of(p, addr - p->base)];
	if (!a)
		goto out;
	if (a->kind == A_SLAB) {
		st = pool_small_free(p, a, addr, stream, all_streams);
		goto out;
	}
	if (a->freed || a->base != addr || a->fixed)
		goto out;   /* a fixed mapping is unmapped, not freed (pool_unmap_fixed) */
	st = pool_free_large(p, a, stream, all_streams);
out:
	if (st == POOL_OK && a && a->kind == A_SLAB)
		p->st.frees++;
	pthread_mutex_unlock(&p->lock);
	return st;
}

void pool_poll(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
	pool_offl_reap(p, false);
	pool_small_reap(p);
	pool_hostmap_reap(p, false);
	(void)pool_handoff_reap(p, false);
	pool_slot_reap(p, false);
	pthread_mutex_unlock(&p->lock);
}

pool_status_t pool_sync(pool_t *p)
{
	pool_status_t st = POOL_OK, w;
	pthread_mutex_lock(&p->lock);
	while (p->offl.head && st == POOL_OK)
		if (!pool_offl_reap(p, true) && p->offl.head)
			st = POOL_EDEVICE;   /* the oldest one's wait failed */
	/* Every wait releases the lock: lists are walked again after each. */
	for (bool again = true; again && st == POOL_OK;) {
		again = false;
		for (struct alloc *a = p->freed_head; a; a = a->next) {
			if (pool_range_ready(p, a, false))
				continue;
			a->pins++;
			if (!pool_range_ready(p, a, true))
				st = POOL_EDEVICE;
			a->pins--;
			again = true;
			break;
		}
	}
	while (st == POOL_OK && p->spend_head) {
		struct fence *f = pool_fence_ref(p->spend_head->f);
		struct mark m = p->spend_head->m;
		if ((w = pool_fence_wait(p, f)) || (w = pool_mark_wait(p, m)))
			st = w;
		pool_fence_put(p, f);
		pool_small_reap(p);
	}
	if (st == POOL_OK)
		pool_hostmap_reap(p, true);
	if (st == POOL_OK && !pool_handoff_reap(p, true))
		st = POOL_EDEVICE;
	while (st == POOL_OK && p->hpend_head) {
		struct mark m = p->hpend_head->m;
		if ((w = pool_mark_wait(p, m)))
			st = w;
		pool_slot_reap(p, false);
	}
	pthread_mutex_unlock(&p->lock);
	return st;
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
