/* pool/residency.c - residency per chunk-sized page: the LRU and its
 * eviction (SuperNeurons Alg. 2), fault-in before a call (the reactive
 * layer), and the policies' explicit offload and prefetch (vDNN §III).
 * docs/pool.md has the page states and their transitions.
 *
 * Every page remembers the mark of its last use (fence.c): a call's
 * position on its stream, or the position of the copies that moved it.
 * Whatever must follow that use - a copy-out, a use on another stream,
 * an unmap - waits for the mark, which records a fence on the mark's
 * stream only then.
 */
#include "pool/pool_internal.h"

/* An offload (explicit) whose copy completed: unmap, keep the host copy. */
static void offload_finish(pool_t *p, struct page *pg)
{
	list_del(&p->offl, pg);
	pool_page_unmap(p, pg);
	stat_sub(&p->st.resident, chunk_sz(p));
	pg->state = (pg->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	pg->busy.tl = NULL;
}

bool pool_offl_reap(pool_t *p, bool wait_oldest)
{
	bool any = false;
	if (wait_oldest && p->offl.head) {
		struct page *pg = p->offl.head;
		struct alloc *a = pg->a;
		a->pins++;   /* the wait releases the lock */
		pool_status_t st = pool_mark_wait(p, pg->busy);
		a->pins--;
		if (st)
			return false;   /* a failed wait completes nothing */
	}
	for (struct page *pg = p->offl.head, *nx; pg; pg = nx) {
		nx = pg->next;
		if (pool_mark_done(p, pg->busy)) {
			offload_finish(p, pg);
			any = true;
		}
	}
	return any;
}

/* ------------------------------------------------------------- eviction */

/* Queues the copy of a resident page's bytes to its host slot on the D2H
 * stream, after its last use and after every write vmem did not see
 * (which may have written it: its bytes then count as written).  The
 * host copy is valid once the caller's mark after the copies completes. */
static pool_status_t copy_out(pool_t *p, struct page *pg)
{
	pool_status_t st;
	bool stale = pg->epoch != p->epoch;
	if (!pg->host && (st = pool_slot_get(p, &pg->host)))
		return st;
	if ((st = pool_stream_after(p, p->tl_d2h, p->ops.d2h_stream, pg->busy)) ||
	    (stale && (st = pool_d2h_after_unseen(p))))
		return st;
	int rc = p->ops.copy_d2h(p->ops.ctx, pg->host, page_va(p, pg), page_bytes(p, pg->a, pg->idx));
	if (rc) {
		if (!(pg->flags & PF_HOST_VALID)) {
			/* nothing was queued into the slot */
			pool_slot_release(p, pg->host, (struct mark){ 0 });
			pg->host = NULL;
		}
		pg->flags &= ~PF_HOST_VALID;
		return dev_status(rc);
	}
	if (stale) {
		p->st.stale_copies++;
		pg->flags |= PF_WRITTEN;
	}
	pg->flags |= PF_HOST_VALID;
	pg->epoch = p->epoch;
	return POOL_OK;
}

#define EVICT_BATCH 256

/* SuperNeurons Alg. 2, LRU.out: evicts unlocked least-recently-used
 * pages until `need` chunks were returned to the cache (at most
 * EVICT_BATCH per call).  Dirty pages are copied to host on the D2H
 * stream after their last use (a fence is recorded on the use's stream
 * now, which follows it); clean ones (a valid host copy, or never
 * written) are dropped without a copy.  The host then waits for the
 * copies before unmapping: unmapping a range a copy still reads would
 * fault.  It waits with the lock released: the victims are PG_EVICTING
 * (a use or a free meanwhile takes a victim back) and their allocations
 * pinned.  A wait the device refuses keeps the page mapped and resident.
 * Returns the number of pages evicted. */
uint32_t pool_evict_lru(pool_t *p, uint32_t need)
{
	struct page *vict[EVICT_BATCH];
	bool copied[EVICT_BATCH], failed[EVICT_BATCH];
	uint32_t n = 0, ncopy = 0;
	pool_status_t st;

	p->host_exhausted = false;
	p->evict_err = POOL_OK;
	if (need > EVICT_BATCH)
		need = EVICT_BATCH;
	for (struct page *pg = p->lru.tail, *pv; pg && n < need; pg = pv) {
		pv = pg->prev;
		copied[n] = false;
		failed[n] = false;
		if (!page_clean(p, pg)) {
			if ((st = copy_out(p, pg))) {
				if (st == POOL_EHOST) {
					/* host full: clean pages further up the list
					 * can still be dropped without a copy */
					p->host_exhausted = true;
					continue;
				}
				p->evict_err = st;
				break;
			}
			copied[n] = true;
			ncopy++;
		}
		list_del(&p->lru, pg);
		pg->state = PG_EVICTING;
		pg->a->pins++;
		vict[n++] = pg;
	}
	if (!n)
		return 0;
	/* the copies follow their pages' last uses: one mark covers both */
	struct mark m = ncopy ? pool_mark_now(p, p->tl_d2h) : (struct mark){ 0 };
	for (uint32_t i = 0; i < n; i++)
		if (copied[i])
			vict[i]->busy = m;
	pool_status_t wst = pool_mark_wait(p, m);
	for (uint32_t i = 0; i < n; i++) {
		struct page *pg = vict[i];
		if (!copied[i] && pg->state == PG_EVICTING && (st = pool_mark_wait(p, pg->busy))) {
			failed[i] = true;
			p->evict_err = st;
		}
	}
	uint32_t done = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct page *pg = vict[i];
		pg->a->pins--;
		if (pg->state != PG_EVICTING)
			continue;   /* taken back by a use or a free while we waited */
		if (copied[i] ? wst != POOL_OK : failed[i]) {
			/* The copy (or the last use) may still be queued: the page
			 * stays mapped and resident, ordered after it; a copy
			 * counts for nothing (its slot is kept, marked not valid). */
			if (copied[i])
				pg->flags &= ~PF_HOST_VALID;
			if (wst)
				p->evict_err = wst;
			pg->state = PG_RESIDENT;
			list_push_back(&p->lru, pg);
			continue;
		}
		done++;
		if (copied[i])
			p->st.bytes_evicted += page_bytes(p, pg->a, pg->idx);
		else
			p->st.evictions_clean++;
		pool_page_unmap(p, pg);
		stat_sub(&p->st.resident, chunk_sz(p));
		if (pg->flags & PF_WRITTEN) {
			pg->state = PG_HOST;
		} else {
			pg->state = PG_RELEASED;
			if (pg->host) {
				pool_slot_release(p, pg->host, (struct mark){ 0 });
				pg->host = NULL;
				pg->flags &= ~PF_HOST_VALID;
			}
		}
		pg->busy.tl = NULL;
		p->st.evictions++;
		pool_emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
			  page_bytes(p, pg->a, pg->idx),
			  (pg->flags & PF_WRITTEN) ? page_bytes(p, pg->a, pg->idx) : 0,
			  p->ops.d2h_stream);
	}
	return done;
}

/* ------------------------------------------------------ reactive layer */

/* The pages one ref covers: of a large allocation, or the one page of the
 * slab a small block lives in.  a NULL: not pool memory (left alone). */
struct rref {
	struct alloc *a;
	uint32_t first, last;
};

/* Resolves a ref to its span (allocation id, offset and extent, for the
 * caller and the trace) and the pages it covers. */
static void resolve(pool_t *p, const pool_ref_t *r, pool_span_t *out, struct rref *rr)
{
	memset(out, 0, sizeof(*out));
	rr->a = NULL;
	if (!pool_owns(p, r->ptr))
		return;
	struct alloc *a = p->vmap[page_of(p, r->ptr - p->base)];
	if (!a)
		return;
	if (a->kind == A_SLAB) {
		struct sblock *b = pool_slab_block(a, r->ptr);
		if (!b)
			return;
		uint64_t in = r->ptr - a->base - (uint64_t)b->start * SMALL_UNIT;
		out->alloc_id = b->id;
		out->offset = in;
		out->bytes = r->bytes && r->bytes < b->size - in ? r->bytes : b->size - in;
		*rr = (struct rref){ a, 0, 0 };
		return;
	}
	if (a->freed)
		return;
	uint64_t off = r->ptr - a->base;
	if (off >= a->size)
		return;
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
	*rr = (struct rref){ a, (uint32_t)(page_of(p, off)),
			     (uint32_t)(page_of(p, off + n - 1)) };
}

static void lock_page(pool_t *p, struct page *pg)
{
	if (pg->state == PG_OFFLOADING || pg->state == PG_EVICTING) {
		/* used again before its offload or eviction finished: cancel
		 * it; the copy in flight stays valid as long as the page is not
		 * written, and the user's stream waits for it (its mark is the
		 * page's busy one) */
		if (pg->state == PG_OFFLOADING)
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

/* Maps every non-resident page among the locked ones and copies back the
 * bytes of those that have them, on the H2D stream; the copied pages'
 * busy mark becomes the copies' position on the H2D stream.  *nfault:
 * pages faulted.  A failed map or copy is returned; pages mapped before
 * it stay resident, and a page whose copy failed goes back to host. */
static pool_status_t fault_in(pool_t *p, const struct rref *rr, int n,
			      pool_event_kind_t kind, uint32_t *nfault)
{
	uint32_t need = 0, ncopy = 0;
	pool_status_t st;

	*nfault = 0;
	/* count each page once (refs overlap); the scratch mark is cleared
	 * before getting chunks, which may release the lock */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			uint32_t f, l;
			if (!rr[i].a)
				continue;
			f = rr[i].first;
			l = rr[i].last;
			for (uint32_t k = f; k <= l; k++) {
				struct page *pg = &rr[i].a->pages[k];
				if (pass) {
					pg->flags &= ~PF_MARK;
				} else if (pg->state != PG_RESIDENT && !(pg->flags & PF_MARK)) {
					pg->flags |= PF_MARK;
					need++;
				}
			}
		}
	if (!need)
		return POOL_OK;
	/* The pages are locked, so nothing evicts them while chunks are
	 * found; another thread may fault some in meanwhile (they are skipped
	 * below), and the allocations stay (pinned) even if freed. */
	for (int i = 0; i < n; i++)
		if (rr[i].a)
			rr[i].a->pins++;
	st = pool_ensure_chunks(p, need);
	for (int i = 0; i < n; i++)
		if (rr[i].a) {
			rr[i].a->pins--;
			if (rr[i].a->freed && st == POOL_OK)
				st = POOL_EINVAL;   /* freed by another thread while in use */
		}
	for (int i = 0; i < n; i++) {
		uint32_t f, l;
		if (!rr[i].a)
			continue;
		f = rr[i].first;
		l = rr[i].last;
		for (uint32_t k = f; k <= l; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (st || pg->state == PG_RESIDENT)
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
			pg->epoch = p->epoch;   /* mapped now: no unseen write reached it */
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
	if (!ncopy)
		return st;
	struct mark m = pool_mark_now(p, p->tl_h2d);
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; k <= la; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (pg->flags & PF_COPY) {
				pg->flags &= ~PF_COPY;
				pg->busy = m;
			}
		}
	}
	return st;
}

static void unlock_spans(pool_t *p, const struct rref *rr, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; k <= la; k++)
			unlock_page(p, &rr[i].a->pages[k]);
	}
}

pool_status_t pool_acquire(pool_t *p, const pool_ref_t *refs, int n, void *stream, pool_span_t *out)
{
	struct rref rr[n > 0 ? n : 1];
	pool_status_t st;
	uint32_t nfault;
	bool any = false;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		resolve(p, &refs[i], &out[i], &rr[i]);
		any |= rr[i].a != NULL;
	}
	if (!any) {
		pthread_mutex_unlock(&p->lock);
		return POOL_OK;
	}
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; k <= la; k++)
			lock_page(p, &rr[i].a->pages[k]);
	}
	st = fault_in(p, rr, n, POOL_EV_FAULT_IN, &nfault);
	p->st.misses += nfault;
	/* Order the call after the copies and after earlier work on other
	 * streams (a prefetch, a cancelled offload, another stream's use).
	 * The same stream's earlier uses are ordered by the stream itself: in
	 * the common case nothing is recorded or waited.  A call that cannot
	 * be ordered does not run. */
	struct tl *tl = pool_tl(p, stream);
	struct mark last = { 0 };
	for (int i = 0; st == POOL_OK && i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; st == POOL_OK && k <= la; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (pg->busy.tl && !mark_same(pg->busy, last)) {
				st = pool_stream_after(p, tl, stream, pg->busy);
				last = pg->busy;
			}
		}
	}
	if (st) {
		unlock_spans(p, rr, n);
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
	struct rref rr[n > 0 ? n : 1];
	bool any = false, unordered = false;

	pthread_mutex_lock(&p->lock);
	/* the same pages acquire locked, unless the allocation went meanwhile
	 * (freed, or the address reused: its id differs) */
	for (int i = 0; i < n; i++) {
		pool_span_t now;
		rr[i].a = NULL;
		if (!spans[i].alloc_id)
			continue;
		resolve(p, &refs[i], &now, &rr[i]);
		if (rr[i].a && now.alloc_id != spans[i].alloc_id)
			rr[i].a = NULL;
		else if (rr[i].a && rr[i].a->kind == A_LARGE)
			rr[i].last = (uint32_t)(page_of(p, spans[i].offset + spans[i].bytes - 1));
		any |= rr[i].a != NULL;
	}
	if (!any) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	/* Two threads may use one page on two streams concurrently; the new
	 * use mark must dominate both, so this stream waits for the other's
	 * use (acquire already made it wait for what was there then). */
	struct tl *tl = pool_tl(p, stream);
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; k <= la; k++) {
			struct mark b = rr[i].a->pages[k].busy;
			if (b.tl && b.tl != tl && !mark_known_done(b) &&
			    pool_stream_after(p, tl, stream, b))
				unordered = true;
		}
	}
	/* The use is this stream's next position: no fence now (issue 14).
	 * If the stream could not be made to wait for the other use, the
	 * pages wait for every stream instead. */
	struct mark m = pool_mark_now(p, unordered ? p->tl_all : tl);
	for (int i = 0; i < n; i++) {
		uint32_t fi, la;
		if (!rr[i].a)
			continue;
		fi = rr[i].first;
		la = rr[i].last;
		for (uint32_t k = fi; k <= la; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (refs[i].write) {
				pg->flags |= PF_WRITTEN;
				if (pg->host) {
					/* the host copy is stale; the slot may still be
					 * read by the fault-in copy, which m follows */
					pool_slot_release(p, pg->host, m);
					pg->host = NULL;
					pg->flags &= ~PF_HOST_VALID;
				}
			}
			pg->busy = m;
			unlock_page(p, pg);
		}
	}
	pthread_mutex_unlock(&p->lock);
}

/* Collects the large allocation pages covering [addr, addr+bytes). */
static struct alloc *range_alloc(pool_t *p, uintptr_t addr, uint64_t bytes, pool_span_t *s)
{
	if (!pool_owns(p, addr))
		return NULL;
	struct alloc *a = p->vmap[page_of(p, addr - p->base)];
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
	pool_status_t st = POOL_OK;
	uint32_t fi, la, ncopy = 0, nsel = 0;
	uint64_t moved = 0;

	pthread_mutex_lock(&p->lock);
	struct alloc *a = range_alloc(p, addr, bytes, &s);
	if (!a) {
		pthread_mutex_unlock(&p->lock);
		return POOL_EINVAL;
	}
	fi = (uint32_t)(page_of(p, s.offset));
	la = (uint32_t)(page_of(p, s.offset + s.bytes - 1));
	/* vDNN §III-A: copy out after the last use, on the D2H stream */
	for (uint32_t k = fi; k <= la; k++) {
		struct page *pg = &a->pages[k];
		if (pg->state != PG_RESIDENT || pg->locks)
			continue;
		if (!page_clean(p, pg)) {
			if ((st = copy_out(p, pg)))
				break;
			pg->flags |= PF_MARK;
			moved += page_bytes(p, a, k);
			ncopy++;
		}
		pg->flags |= PF_SEL;
		nsel++;
	}
	/* The pages are unmapped once the copies (or, for clean pages, their
	 * last use) completed: pool_poll, or on demand.  The copies' fence is
	 * recorded now so that the first poll after them can tell; if it
	 * cannot be, a later poll records it (the pages stay mapped). */
	struct mark m = { 0 };
	if (ncopy) {
		pool_status_t fst;
		m = pool_mark_now(p, p->tl_d2h);
		if (!pool_mark_fence(p, m, &fst) && fst && st == POOL_OK)
			st = fst;
	}
	for (uint32_t k = fi; k <= la; k++) {
		struct page *pg = &a->pages[k];
		if (!(pg->flags & PF_SEL))
			continue;
		pg->flags &= ~PF_SEL;
		if (pg->flags & PF_MARK) {
			pg->flags &= ~PF_MARK;
			pg->busy = m;
		}
		list_del(&p->lru, pg);
		pg->state = PG_OFFLOADING;
		list_push_back(&p->offl, pg);
		p->st.offloads++;
	}
	p->st.bytes_offloaded += moved;
	if (nsel)
		pool_emit(p, POOL_EV_OFFLOAD, a, s.offset, s.bytes, moved, p->ops.d2h_stream);
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_status_t pool_prefetch(pool_t *p, uintptr_t addr, uint64_t bytes)
{
	pool_span_t s;
	uint32_t fi, la, nfault;

	pthread_mutex_lock(&p->lock);
	struct alloc *a = range_alloc(p, addr, bytes, &s);
	if (!a) {
		pthread_mutex_unlock(&p->lock);
		return POOL_EINVAL;
	}
	fi = (uint32_t)(page_of(p, s.offset));
	la = (uint32_t)(page_of(p, s.offset + s.bytes - 1));
	for (uint32_t k = fi; k <= la; k++)
		lock_page(p, &a->pages[k]);
	struct rref rr = { a, fi, la };
	pool_status_t st = fault_in(p, &rr, 1, POOL_EV_PREFETCH, &nfault);
	for (uint32_t k = fi; k <= la; k++)
		unlock_page(p, &a->pages[k]);
	p->st.prefetches += nfault;
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_page_state_t pool_page_state(pool_t *p, uintptr_t addr)
{
	pool_page_state_t r = POOL_PAGE_NONE;
	if (!pool_owns(p, addr))
		return r;
	pthread_mutex_lock(&p->lock);
	struct alloc *a = p->vmap[page_of(p, addr - p->base)];
	if (a && a->kind == A_SLAB && a->pages[0].state != PG_HOST &&
	    a->pages[0].state != PG_RELEASED) {
		r = POOL_PAGE_SMALL;   /* its chunk is mapped */
	} else if (a && a->kind == A_SLAB) {
		r = a->pages[0].state == PG_HOST ? POOL_PAGE_HOST : POOL_PAGE_RELEASED;
	} else if (a && !a->freed) {
		static const pool_page_state_t map[] = {
			[PG_RESIDENT] = POOL_PAGE_RESIDENT, [PG_OFFLOADING] = POOL_PAGE_OFFLOADING,
			[PG_HOST] = POOL_PAGE_HOST, [PG_RELEASED] = POOL_PAGE_RELEASED,
			[PG_EVICTING] = POOL_PAGE_OFFLOADING,
		};
		r = map[a->pages[page_of(p, addr - a->base)].state];
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}
