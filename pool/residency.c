/* pool/residency.c - residency per chunk-sized page: the LRU and its
 * eviction (SuperNeurons Alg. 2), fault-in before a call (the reactive
 * layer), and the policies' explicit offload and prefetch (vDNN §III).
 * docs/pool.md has the page states and their transitions.
 */
#include "pool/pool_internal.h"

/* An offload (explicit) whose fence completed: unmap, keep the host copy. */
static void offload_finish(pool_t *p, struct page *pg)
{
	list_del(&p->offl, pg);
	pool_page_unmap(p, pg);
	stat_sub(&p->st.resident, chunk_sz(p));
	pg->state = (pg->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	pool_page_set_busy(p, pg, NULL);
}

bool pool_offl_reap(pool_t *p, bool wait_oldest)
{
	bool any = false;
	if (wait_oldest && p->offl.head && pool_fence_wait(p, p->offl.head->busy))
		return false;   /* a failed wait completes nothing */
	for (struct page *pg = p->offl.head, *nx; pg; pg = nx) {
		nx = pg->next;
		if (pool_fence_done(p, pg->busy)) {
			offload_finish(p, pg);
			any = true;
		}
	}
	return any;
}

/* ------------------------------------------------------------- eviction */

/* SuperNeurons Alg. 2, LRU.out: evicts unlocked least-recently-used
 * pages until `need` chunks were returned to the cache.  Dirty pages are
 * copied to host on the D2H stream after their last use; clean ones (a
 * valid host copy, or never written) are dropped without a copy.  The
 * host then waits for the copies before unmapping: unmapping a range a
 * copy still reads would fault.  Returns the number of pages evicted. */
uint32_t pool_evict_lru(pool_t *p, uint32_t need)
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
			if (!pg->host && pool_slot_get(p, &pg->host) != POOL_OK) {
				/* host full: clean pages further up the list can
				 * still be dropped without a copy */
				p->host_exhausted = true;
				continue;
			}
			/* the copy must follow the page's last use */
			pool_status_t wst = pool_stream_after(p, p->ops.d2h_stream, pg->busy);
			int rc = wst ? (int)wst : p->ops.copy_d2h(p->ops.ctx, pg->host, page_va(p, pg),
							       page_bytes(p, pg->a, pg->idx));
			if (rc) {
				pool_slot_release(p, pg->host, NULL);
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
	struct fence *f = ncopy ? pool_fence_new(p, p->ops.d2h_stream, false, &st) : NULL;
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
	pool_status_t wst = f ? pool_fence_wait(p, f) : POOL_OK;
	uint32_t done = 0;
	for (struct page *pg = vict, *nx; pg; pg = nx) {
		nx = pg->next;
		pg->next = NULL;
		/* a copied page's fence f follows its last use; others wait */
		if (pg->flags & PF_MARK) {
			if (wst) {
				/* The copy may still be queued: the page stays mapped
				 * and resident, ordered after the copy, which counts
				 * for nothing (its slot is kept, marked not valid). */
				pg->flags &= ~(PF_MARK | PF_HOST_VALID);
				pool_page_set_busy(p, pg, f);
				list_push_back(&p->lru, pg);
				p->evict_err = wst;
				continue;
			}
		} else if ((st = pool_fence_wait(p, pg->busy))) {
			list_push_back(&p->lru, pg);
			p->evict_err = st;
			continue;
		}
		done++;
		if (pg->flags & PF_MARK)
			p->st.bytes_evicted += page_bytes(p, pg->a, pg->idx);
		else
			p->st.evictions_clean++;
		pg->flags &= ~PF_MARK;
		pool_page_unmap(p, pg);
		stat_sub(&p->st.resident, chunk_sz(p));
		if (pg->flags & PF_WRITTEN) {
			pg->state = PG_HOST;
		} else {
			pg->state = PG_RELEASED;
			if (pg->host) {
				pool_slot_release(p, pg->host, NULL);
				pg->host = NULL;
				pg->flags &= ~PF_HOST_VALID;
			}
		}
		pool_page_set_busy(p, pg, NULL);
		p->st.evictions++;
		pool_emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
		     page_bytes(p, pg->a, pg->idx),
		     (pg->flags & PF_WRITTEN) ? page_bytes(p, pg->a, pg->idx) : 0,
		     p->ops.d2h_stream);
	}
	pool_fence_put(p, f);
	return done;
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
		 * user's stream waits for it (pool_stream_after in acquire) */
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
	st = pool_ensure_chunks(p, need);
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
			if ((st = pool_page_map(p, pg)))
				continue;
			uint64_t nb = page_bytes(p, pg->a, pg->idx), moved = 0;
			int rc = 0;
			if ((pg->flags & PF_HOST_VALID) &&
			    (rc = p->ops.copy_h2d(p->ops.ctx, page_va(p, pg), pg->host, nb))) {
				/* The page would hold a recycled chunk's bytes: unmap
				 * it again (nothing is queued on it), its bytes stay
				 * in the host slot. */
				pool_page_unmap(p, pg);
				pg->state = PG_HOST;
				st = dev_status(rc);
				continue;
			}
			stat_add(&p->st.resident, chunk_sz(p));
			(*nfault)++;
			if (pg->flags & PF_HOST_VALID) {
				pg->flags |= PF_COPY;
				ncopy++;
				moved = nb;
				if (kind == POOL_EV_PREFETCH)
					p->st.bytes_prefetched += nb;
				else
					p->st.bytes_faulted_in += nb;
			}
			pool_emit(p, kind, pg->a, (uint64_t)pg->idx * chunk_sz(p), nb, moved,
			     p->ops.h2d_stream);
		}
	}
	/* A failed map or copy above keeps its status: the pages mapped
	 * before it stay resident, with their copies fenced. */
	pool_status_t fst = POOL_OK;
	struct fence *f = NULL;
	if (ncopy)
		f = pool_fence_new(p, p->ops.h2d_stream, false, &fst);
	if (st == POOL_OK)
		st = fst;
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
			pool_page_set_busy(p, pg, f);
		}
	}
	*fout = f;
	return st;
}

static void unlock_spans(pool_t *p, struct alloc **as, const pool_span_t *spans, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &spans[i], &fi, &la);
		for (uint32_t k = fi; k <= la; k++)
			unlock_page(p, &as[i]->pages[k]);
	}
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
	p->st.misses += nfault;
	/* order the call after the copies and after earlier work on other
	 * streams (a prefetch, a cancelled offload, another stream's use);
	 * a call that cannot be ordered does not run */
	struct fence *last = NULL;
	for (int i = 0; st == POOL_OK && i < n; i++) {
		uint32_t fi, la;
		if (!as[i])
			continue;
		span_pages(p, &out[i], &fi, &la);
		for (uint32_t k = fi; st == POOL_OK && k <= la; k++) {
			struct page *pg = &as[i]->pages[k];
			if (pg->busy && pg->busy != last) {
				st = pool_stream_after(p, stream, pg->busy);
				last = pg->busy;
			}
		}
	}
	if (f && st == POOL_OK)
		st = pool_stream_after(p, stream, f);
	pool_fence_put(p, f);
	if (st) {
		unlock_spans(p, as, out, n);
		if (st == POOL_ENOMEM || st == POOL_EHOST) {
			/* a device failure is not an out-of-memory */
			p->st.oom++;
			pool_emit(p, POOL_EV_OOM, NULL, 0, 0, 0, stream);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return st;
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
			if (b && !b->all && b->stream != stream && !pool_fence_done(p, b))
				(void)pool_stream_after(p, stream, b);
		}
	}
	struct fence *f = pool_fence_new(p, stream, false, &st);
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
					pool_slot_release(p, pg->host, f ? f : pg->busy);
					pg->host = NULL;
					pg->flags &= ~PF_HOST_VALID;
				}
			}
			if (f)
				pool_page_set_busy(p, pg, f);
			unlock_page(p, pg);
		}
	}
	pool_fence_put(p, f);
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
			if (!pg->host && (st = pool_slot_get(p, &pg->host)))
				break;
			uint64_t nb = page_bytes(p, a, k);
			if ((st = pool_stream_after(p, p->ops.d2h_stream, pg->busy)))
				break;
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
		f = pool_fence_new(p, p->ops.d2h_stream, false, &fst);
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
			pool_page_set_busy(p, pg, f);
		}
		list_del(&p->lru, pg);
		pg->state = PG_OFFLOADING;
		list_push_back(&p->offl, pg);
		p->st.offloads++;
	}
	pool_fence_put(p, f);
	p->st.bytes_offloaded += moved;
	if (nsel)
		pool_emit(p, POOL_EV_OFFLOAD, a, s.offset, s.bytes, moved, p->ops.d2h_stream);
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
	pool_fence_put(p, f);
	pthread_mutex_unlock(&p->lock);
	return st;
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
