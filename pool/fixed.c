/* pool/fixed.c - virtual memory the application manages itself: its own
 * reservations, and allocations at the addresses it maps (issue 14,
 * PyTorch's expandable segments).
 *
 * With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PyTorch reserves
 * a large virtual range per segment (cuMemAddressReserve) and grows it by
 * creating physical handles (cuMemCreate, 2 MiB or 20 MiB) and mapping
 * them at the segment's end (cuMemMap + cuMemSetAccess); it shrinks by
 * unmapping and releasing them.  Passed through, that memory would be
 * outside the budget and never move.  So the runtime serves it from the
 * pool: a reservation is a sub-range of vmem's range (pool_va_reserve), a
 * handle is only a size until it is mapped, and a map is an allocation at
 * that fixed address (pool_map_fixed): in the budget, evicted and faulted
 * in like any other.  An unmap frees it (pool_unmap_fixed) with the usual
 * fences; its address range stays the application's until it frees the
 * reservation (pool_va_unreserve).
 *
 *   vmem's range:  [ cudaMalloc'd ... | reservation R (the app's)          | ... ]
 *   R:             [ map h1 (fixed) ][ map h2 (fixed) ][ reserved, unmapped ]
 *
 * A fixed allocation is a large allocation with `fixed` set: freed ones are
 * never reused for another request (their range is the application's), and
 * reclaiming one does not give its range back to vmem - the reservation
 * does, once released and empty.
 */
#include "pool/pool_internal.h"

static struct resv *resv_of(pool_t *p, uint64_t page)
{
	for (uint32_t i = 0; i < p->nresv; i++)
		if (page - p->resv[i].start < p->resv[i].npages)
			return &p->resv[i];
	return NULL;
}

static void resv_remove(pool_t *p, struct resv *r)
{
	pool_va_give(p, r->start, r->npages);
	*r = p->resv[--p->nresv];
}

void pool_resv_drop(pool_t *p, struct alloc *a)
{
	struct resv *r = resv_of(p, page_of(p, a->base - p->base));
	if (!r)
		return;
	r->nallocs--;
	if (r->released && !r->nallocs)
		resv_remove(p, r);
}

pool_status_t pool_va_reserve(pool_t *p, uint64_t size, uint64_t align, uintptr_t *addr)
{
	uint64_t cs = chunk_sz(p), np = (size + cs - 1) / cs, start;
	uint64_t extra = align > cs ? (align + cs - 1) / cs - 1 : 0;
	pool_status_t st;

	if (!size || (align & (align - 1)))
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	if (pool_grow((void **)&p->resv, &p->capresv, p->nresv + 1, sizeof(struct resv))) {
		pthread_mutex_unlock(&p->lock);
		return POOL_ENOMEM;
	}
	if ((st = pool_va_alloc(p, np + extra, &start))) {
		pthread_mutex_unlock(&p->lock);
		return st;
	}
	/* an alignment above the chunk: the aligned part, the rest back */
	uint64_t first = start;
	while (((p->base + first * cs) & (align > cs ? align - 1 : 0)) && first < start + extra)
		first++;
	if (first > start)
		pool_va_give(p, start, first - start);
	if (start + np + extra > first + np)
		pool_va_give(p, first + np, start + np + extra - (first + np));
	p->resv[p->nresv++] = (struct resv){ first, np, 0, false };
	*addr = p->base + first * cs;
	pthread_mutex_unlock(&p->lock);
	return POOL_OK;
}

/* Frees every live fixed allocation in pages [first, first + n). */
static pool_status_t unmap_range(pool_t *p, uint64_t first, uint64_t n, void *stream, bool all)
{
	for (uint64_t k = first; k < first + n;) {
		struct alloc *a = p->vmap[k];
		if (!a || a->freed) {
			k++;
			continue;
		}
		pool_status_t st = pool_free_large(p, a, stream, all);
		if (st)
			return st;
		k = page_of(p, a->base - p->base) + a->npages;
	}
	return POOL_OK;
}

pool_status_t pool_va_unreserve(pool_t *p, uintptr_t addr, uint64_t size)
{
	uint64_t cs = chunk_sz(p);
	if (!pool_owns(p, addr) || (addr - p->base) % cs)
		return POOL_EINVAL;
	pthread_mutex_lock(&p->lock);
	uint64_t first = page_of(p, addr - p->base);
	struct resv *r = resv_of(p, first);
	pool_status_t st = POOL_EINVAL;
	if (r && r->start == first && r->npages == (size + cs - 1) / cs && !r->released) {
		/* mappings left in it are unmapped first, after every stream */
		st = unmap_range(p, r->start, r->npages, NULL, true);
		if (st == POOL_OK) {
			r->released = true;
			if (!r->nallocs)
				resv_remove(p, r);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_status_t pool_map_fixed(pool_t *p, uintptr_t addr, uint64_t size, uint64_t *id)
{
	uint64_t cs = chunk_sz(p);
	if (!pool_owns(p, addr) || (addr - p->base) % cs || !size || size % cs)
		return POOL_EINVAL;
	uint64_t first = page_of(p, addr - p->base), np = size / cs;
	if (np * cs > p->cfg.budget || np > UINT32_MAX)
		return POOL_ENOMEM;
	pthread_mutex_lock(&p->lock);
	struct resv *r = resv_of(p, first);
	pool_status_t st = POOL_EINVAL;
	if (!r || r->released || first + np > r->start + r->npages)
		goto out;
	/* The range must be unmapped.  A mapping freed there (an unmap, the
	 * segment shrinking) may still hold its pages until its free fence:
	 * reclaim it first (PyTorch synchronizes before unmapping, so this
	 * rarely waits). */
	for (uint64_t k = first; k < first + np; k++) {
		struct alloc *a = p->vmap[k];
		if (!a)
			continue;
		if (!a->freed || !a->fixed || a->pins)
			goto out;   /* mapped: CUDA refuses a map over a mapping */
		a->pins++;
		bool ready = pool_range_ready(p, a, true);
		a->pins--;
		if (!ready) {
			st = POOL_EDEVICE;
			goto out;
		}
		if (p->vmap[k] == a && !a->pins) {
			/* unlink from the freed list and reclaim */
			pool_range_reclaim(p, a);
		}
		k = first - 1;   /* the map may have changed while waiting: look again */
		r = resv_of(p, first);
		if (!r || r->released)
			goto out;
	}
	struct alloc *a = calloc(1, sizeof(*a));
	if (!a || !(a->pages = calloc(np, sizeof(struct page)))) {
		free(a);
		st = POOL_ENOMEM;
		goto out;
	}
	a->kind = A_LARGE;
	a->fixed = true;
	a->base = addr;
	a->npages = (uint32_t)np;
	for (uint32_t i = 0; i < a->npages; i++) {
		a->pages[i].a = a;
		a->pages[i].idx = i;
		a->pages[i].state = PG_RELEASED;
	}
	pool_vmap_set(p, a, np, a);
	r->nallocs++;
	a->freed = true;   /* not live until fully mapped: never evicted meanwhile */
	st = pool_ensure_chunks(p, a->npages);
	struct grant_run g = { 0 };
	for (uint32_t i = 0; st == POOL_OK && i < a->npages; i++)
		st = pool_page_map_run(p, &a->pages[i], &g);
	st = pool_run_finish(p, &g, st);
	if (st) {
		pool_freed_push(p, a);   /* reclaimable, nothing leaks */
		goto out;
	}
	pool_alloc_live(p, a, size);
	a->wend = UINT64_MAX;   /* the application's own mapping: bytes may be there already */
	p->st.allocs++;
	stat_add(&p->st.requested, size);
	pool_emit(p, POOL_EV_ALLOC, a, 0, size, size, NULL);
	*id = a->id;
out:
	if ((st == POOL_ENOMEM || st == POOL_EHOST)) {
		p->st.oom++;
		pool_emit(p, POOL_EV_OOM, NULL, 0, size, 0, NULL);
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_status_t pool_unmap_fixed(pool_t *p, uintptr_t addr, uint64_t size, void *stream, bool all)
{
	uint64_t cs = chunk_sz(p);
	if (!pool_owns(p, addr) || (addr - p->base) % cs || !size)
		return POOL_EINVAL;
	uint64_t first = page_of(p, addr - p->base), np = (size + cs - 1) / cs;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = POOL_OK;
	/* CUDA unmaps whole mappings only: every mapping in the range must lie
	 * in it entirely, and the range must start at one */
	for (uint64_t k = first; k < first + np && st == POOL_OK; k++) {
		struct alloc *a = p->vmap[k];
		if (!a || a->freed)
			continue;
		uint64_t af = page_of(p, a->base - p->base);
		if (!a->fixed || af < first || af + a->npages > first + np)
			st = POOL_EINVAL;
	}
	if (st == POOL_OK && (!p->vmap[first] || p->vmap[first]->freed))
		st = POOL_EINVAL;
	if (st == POOL_OK)
		st = unmap_range(p, first, np, stream, all);
	pthread_mutex_unlock(&p->lock);
	return st;
}
