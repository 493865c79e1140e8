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

/* An offload (explicit) whose copy completed: unmap, keep the host copy.
 * A page to drop as dead (PF_DROP) keeps nothing. */
static void offload_finish(pool_t *p, struct page *pg)
{
	list_del(&p->offl, pg);
	pool_page_unmap(p, pg);
	stat_sub(&p->st.resident, chunk_sz(p));
	if (pg->flags & PF_DROP) {
		if (pg->host) {
			pool_slot_release(p, pg->host, (struct mark){ 0 });
			pg->host = NULL;
		}
		pg->state = PG_RELEASED;
		pool_page_dropped(p, pg);
	} else {
		/* a page keeping its rest apart leaves clean (its copy, or a
		 * host copy of every byte): the slot holds all of it now */
		page_rest_forget(p, pg);
		pg->state = (pg->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	}
	pg->busy.tl = NULL;
	pg->out.tl = NULL;
}

pool_status_t pool_page_join_out(pool_t *p, struct page *pg)
{
	pool_status_t st;

	if (!pg->out.tl)
		return POOL_OK;
	if (!mark_known_done(pg->busy) && pg->busy.tl != p->tl_d2h) {
		if ((st = pool_stream_after(p, p->tl_d2h, p->ops.d2h_stream, pg->busy))) {
			/* the device refused the wait: after the copy at least
			 * (the same stream's reads precede any later call on it) */
			pg->busy = pg->out;
			pg->out.tl = NULL;
			return st;
		}
		pg->busy = pool_mark_now(p, p->tl_d2h);
	} else if (pg->busy.tl != p->tl_d2h || pg->busy.seq < pg->out.seq) {
		pg->busy = pg->out;
	}
	pg->out.tl = NULL;
	return POOL_OK;
}

/* An offloading page is done when its copy (`out`) and its last use
 * (busy) are. */
static bool offl_done(pool_t *p, struct page *pg)
{
	return pool_mark_done(p, pg->out) && pool_mark_done(p, pg->busy);
}

/* An offload taken back: the page stays resident. */
static void offl_keep(pool_t *p, struct page *pg)
{
	list_del(&p->offl, pg);
	pg->state = PG_RESIDENT;
	list_push_front(&p->lru, pg);
}

bool pool_offl_reap(pool_t *p, bool wait_oldest)
{
	bool any = false;
	if (wait_oldest && p->offl.head) {
		struct page *pg = p->offl.head;
		struct alloc *a = pg->a;
		a->pins++;   /* the wait releases the lock */
		pool_status_t st = pool_mark_wait(p, pg->out);
		if (st == POOL_OK && pg->state == PG_OFFLOADING)
			st = pool_mark_wait(p, pg->busy);
		a->pins--;
		if (st)
			return false;   /* a failed wait completes nothing */
	}
	/* positions of one timeline complete in order: once a mark is found
	 * not done, later marks of that timeline are not asked again in this
	 * pass (an offload of a large tensor holds many pages) */
	struct mark pending = { 0 };
	for (struct page *pg = p->offl.head, *nx; pg; pg = nx) {
		nx = pg->next;
		if ((pg->flags & PF_DROP) && !pool_page_all_dead(p, pg)) {
			/* a drop whose bytes may be live again (an unseen write
			 * since): nothing was copied, so the page stays */
			pg->flags &= ~PF_DROP;
			offl_keep(p, pg);
			continue;
		}
		if (!(pg->flags & PF_DROP) && pg->epoch != p->epoch) {
			/* a call vmem could not see into came after its copy
			 * was queued (copy_out set the epoch): it may have
			 * written the page after the copy read it, and may
			 * still run - the offload is taken back, the page
			 * stays, its host copy no longer trusted */
			(void)pool_page_join_out(p, pg);
			pg->flags &= ~PF_HOST_VALID;
			offl_keep(p, pg);
			p->st.offloads_kept++;
			continue;
		}
		struct mark cm = pg->out.tl ? pg->out : pg->busy;   /* the copy's, in order */
		if (pending.tl && cm.tl == pending.tl && cm.seq >= pending.seq)
			continue;
		if (offl_done(p, pg)) {
			offload_finish(p, pg);
			any = true;
		} else if (!pool_mark_done(p, cm) &&
			   (!pending.tl || (cm.tl == pending.tl && cm.seq < pending.seq))) {
			pending = cm;
		}
	}
	return any;
}

/* ------------------------------------------------------------- eviction */

/* The bytes copy_out moves: a page keeping its rest apart (PF_REST)
 * sends only what the device holds. */
static uint64_t out_bytes(const pool_t *p, const struct page *pg)
{
	return pg->flags & PF_REST ? pg->rhi - pg->rlo : page_bytes(p, pg->a, pg->idx);
}

/* Queues the copy of a resident page's bytes to its host slot on the D2H
 * stream, after its last use and after every write vmem did not see
 * (which may have written it: its bytes then count as written).  The
 * host copy is valid once the caller's mark after the copies completes. */
static pool_status_t copy_out(pool_t *p, struct page *pg, struct mark after)
{
	pool_status_t st;
	bool stale = pg->epoch != p->epoch;
	if (!pg->host && (st = pool_slot_get(p, &pg->host)))
		return st;
	if ((st = pool_stream_after(p, p->tl_d2h, p->ops.d2h_stream, after)) ||
	    (stale && (st = pool_d2h_after_unseen(p))))
		return st;
	/* a page keeping its rest apart: the slot holds the rest already */
	uint64_t lo = pg->flags & PF_REST ? pg->rlo : 0;
	int rc = p->ops.copy_d2h(p->ops.ctx, (char *)pg->host + lo, page_va(p, pg) + lo,
				 out_bytes(p, pg));
	if (rc) {
		if (!(pg->flags & (PF_HOST_VALID | PF_REST))) {
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

struct keyed {
	uint64_t key;
	uint64_t rank;
	struct page *pg;
};

/* The eviction order's key of a slab: the soonest next use of its live
 * blocks (the slab moves whole, so it is needed when any block is), of
 * those the order knows; POOL_ORDER_UNKNOWN when it knows none of them
 * (blocks the plan never saw are left to the least-recently-used rule
 * that orders unknown pages). */
static uint64_t slab_key(const pool_t *p, const struct alloc *s)
{
	uint64_t best = POOL_ORDER_UNKNOWN;

	for (uint32_t i = 0; i < s->nblocks; i++) {
		const struct sblock *b = &s->blocks[i];
		uint64_t k;

		if (!b->id || (k = p->order(p->order_ctx, b->id, 0, b->size)) == POOL_ORDER_UNKNOWN)
			continue;
		if (best == POOL_ORDER_UNKNOWN || k < best)
			best = k;
	}
	return best;
}

/* The eviction order's key of a range of allocation a (pool_set_order):
 * POOL_ORDER_UNKNOWN without an order. */
static uint64_t range_key(const pool_t *p, const struct alloc *a, uint64_t off, uint64_t bytes)
{
	if (!p->order)
		return POOL_ORDER_UNKNOWN;
	return a->kind == A_LARGE ? p->order(p->order_ctx, a->id, off, bytes) : slab_key(p, a);
}

static uint64_t page_key(const pool_t *p, const struct page *pg)
{
	return range_key(p, pg->a, (uint64_t)pg->idx * chunk_sz(p), page_bytes(p, pg->a, pg->idx));
}

static int cmp_keyed(const void *x, const void *y)
{
	const struct keyed *a = x, *b = y;
	/* known keys first, largest first; unknown ones after; ties (and the
	 * unknown ones) least recently used first */
	bool ua = a->key == POOL_ORDER_UNKNOWN, ub = b->key == POOL_ORDER_UNKNOWN;
	if (ua != ub)
		return ua ? 1 : -1;
	if (a->key != b->key)
		return a->key > b->key ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* The order eviction takes pages in (at most max): pages whose every byte
 * is dead (issue 11: dropped before anything live moves), then by the
 * plan's key when an order is set (Belady's MIN: the next use furthest
 * away), else least recently used first (SuperNeurons Alg. 2), and held
 * (prefetched, unused) pages only at the very end (`held`).  `floor`
 * (with an order; 0: none): only pages the plan knows with a next use
 * further away than floor, and pages it does not know (a prefetch must
 * not push out what is needed before the bytes it brings).  *nplanned:
 * how many came from the plan's order. */
static uint32_t evict_candidates(pool_t *p, struct page **cand, uint32_t max, uint32_t *nplanned,
				 uint64_t floor, bool held)
{
	uint32_t n = 0;
	*nplanned = 0;
	if (p->ndead_full)
		for (struct page *pg = p->lru.tail; pg && n < max; pg = pg->prev)
			if (pool_page_all_dead(p, pg)) {
				pg->flags |= PF_SEL;
				cand[n++] = pg;
			}
	struct keyed *k = NULL;
	uint64_t nk = 0;
	bool keyed = false;
	if (p->order) {
		uint64_t cap = 0;
		for (struct page *pg = p->lru.tail; pg; pg = pg->prev)
			cap++;
		if (p->order_window && cap > p->order_window)
			cap = p->order_window;
		k = cap ? malloc(cap * sizeof(*k)) : NULL;   /* no memory: LRU */
		keyed = k != NULL;
		for (struct page *pg = p->lru.tail; k && pg && nk < cap; pg = pg->prev) {
			if (pg->flags & PF_SEL)
				continue;
			uint64_t key = page_key(p, pg);
			if (floor && key != POOL_ORDER_UNKNOWN && key <= floor)
				continue;
			k[nk] = (struct keyed){ key, nk, pg };
			nk++;
		}
		if (k)
			qsort(k, nk, sizeof(*k), cmp_keyed);
		for (uint64_t i = 0; i < nk && n < max; i++) {
			k[i].pg->flags |= PF_SEL;
			cand[n++] = k[i].pg;
			if (k[i].key != POOL_ORDER_UNKNOWN)
				(*nplanned)++;
		}
		free(k);
	}
	/* past the order's window nothing is known about a page's next use:
	 * a floor takes none of them */
	for (struct page *pg = p->lru.tail; pg && n < max && !(floor && keyed); pg = pg->prev)
		if (!(pg->flags & PF_SEL)) {
			pg->flags |= PF_SEL;
			cand[n++] = pg;
		}
	for (struct page *pg = p->heldl.head; held && pg && n < max; pg = pg->next)
		cand[n++] = pg;
	for (uint32_t i = 0; i < n; i++)
		cand[i]->flags &= ~PF_SEL;
	return n;
}

/* An evicted page whose chunk is free now (its copy out, if it had one,
 * and its last use completed): unmapped; dropped when dead, on the host
 * when its bytes matter (written: the host copy is valid), else released
 * with its host slot. */
static void page_left(pool_t *p, struct page *pg, bool dead)
{
	pool_page_unmap(p, pg);
	stat_sub(&p->st.resident, chunk_sz(p));
	if (dead || !(pg->flags & PF_WRITTEN)) {
		if (pg->host) {
			pool_slot_release(p, pg->host, (struct mark){ 0 });
			pg->host = NULL;
			pg->flags &= ~PF_HOST_VALID;
		}
		pg->state = PG_RELEASED;
		if (dead)
			pool_page_dropped(p, pg);
	} else {
		page_rest_forget(p, pg);   /* left clean: the slot holds every byte */
		pg->state = PG_HOST;
	}
	pg->busy.tl = NULL;
	p->st.evictions++;
}

/* A page chosen to leave, taken off its list while the host waits with
 * the lock released: PG_EVICTING (a use or a free meanwhile takes it
 * back), its allocation pinned until the caller looks at it again. */
static struct page *victim_take(pool_t *p, struct page *pg)
{
	page_unlist(p, pg);
	pg->state = PG_EVICTING;
	pg->a->pins++;
	return pg;
}

/* SuperNeurons Alg. 2, LRU.out: evicts unlocked pages in the order of
 * evict_candidates until `need` chunks were returned to the cache (at most
 * EVICT_BATCH per call).  Dirty pages are copied to host on the D2H
 * stream after their last use (a fence is recorded on the use's stream
 * now, which follows it); clean ones (a valid host copy, or never
 * written) and dead ones are dropped without a copy.  The host then waits
 * for the copies before unmapping: unmapping a range a copy still reads
 * would fault.  It waits with the lock released: the victims are
 * PG_EVICTING (a use or a free meanwhile takes a victim back) and their
 * allocations pinned.  A wait the device refuses keeps the page mapped and
 * resident.  Returns the number of pages evicted. */
uint32_t pool_evict_lru(pool_t *p, uint32_t need)
{
	struct page *cand[EVICT_BATCH], *vict[EVICT_BATCH];
	bool copied[EVICT_BATCH], failed[EVICT_BATCH], dead[EVICT_BATCH], planned[EVICT_BATCH];
	uint64_t moved[EVICT_BATCH];
	uint32_t n = 0, ncopy = 0, nplanned, ncand;
	pool_status_t st;

	p->host_exhausted = false;
	p->evict_err = POOL_OK;
	p->evict_taken_back = 0;
	if (need > EVICT_BATCH)
		need = EVICT_BATCH;
	ncand = evict_candidates(p, cand, EVICT_BATCH, &nplanned, 0, true);
	uint32_t ndead = 0;
	for (uint32_t c = 0; c < ncand && pool_page_all_dead(p, cand[c]); c++)
		ndead++;
	for (uint32_t c = 0; c < ncand && n < need; c++) {
		struct page *pg = cand[c];
		copied[n] = false;
		failed[n] = false;
		dead[n] = c < ndead;
		planned[n] = c >= ndead && c < ndead + nplanned;
		moved[n] = 0;
		if (!dead[n] && !page_clean(p, pg)) {
			moved[n] = out_bytes(p, pg);
			if ((st = copy_out(p, pg, pg->busy))) {
				if (st == POOL_EHOST) {
					/* host full: clean pages further on can still
					 * be dropped without a copy */
					p->host_exhausted = true;
					continue;
				}
				p->evict_err = st;
				break;
			}
			copied[n] = true;
			ncopy++;
		}
		if (pg->flags & PF_HELD)
			p->st.held_evicted++;
		vict[n++] = victim_take(p, pg);
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
		if (pg->state != PG_EVICTING) {
			p->evict_taken_back++;   /* by a use or a free while we waited */
			continue;
		}
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
			p->st.bytes_evicted += moved[i];
		else
			p->st.evictions_clean++;
		if (planned[i])
			p->st.evictions_planned++;
		page_left(p, pg, dead[i] && pool_page_all_dead(p, pg));
		pool_emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
			  page_bytes(p, pg->a, pg->idx), copied[i] ? moved[i] : 0,
			  p->ops.d2h_stream);
	}
	return done;
}

/* Unmaps a dead page, or a clean one whose last use completed, without a
 * copy or a wait; `from`: the list it is taken off (the resident pages',
 * or the held ones' for a page prefetched for a later call; NULL: none,
 * a victim already taken off). */
static void drop_nowait(pool_t *p, struct page *pg, struct list *from, bool dead, bool planned)
{
	if (from)
		list_del(from, pg);
	page_left(p, pg, dead);
	p->st.evictions_clean++;
	if (planned)
		p->st.evictions_planned++;
	pool_emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
		  page_bytes(p, pg->a, pg->idx), 0, p->ops.d2h_stream);
}

/* Frees chunks without a host wait (pool.h, pool_prefetch): dead pages
 * and (`clean`) clean pages whose last use is known to have completed are
 * unmapped at once - the clean ones in evict_candidates' order above
 * `floor`; nothing is copied and no held page is taken. */
uint32_t pool_evict_nowait(pool_t *p, uint32_t need, bool clean, uint64_t floor)
{
	struct page *cand[EVICT_BATCH];
	uint32_t done = 0, nplanned, ncand, before;

	if (!clean) {
		for (struct page *pg = p->lru.tail, *pv; pg && done < need && p->ndead_full; pg = pv) {
			pv = pg->prev;
			if (pool_page_all_dead(p, pg) && pool_mark_done(p, pg->busy)) {
				drop_nowait(p, pg, &p->lru, true, false);
				done++;
			}
		}
		return done;
	}
	do {
		before = done;
		ncand = evict_candidates(p, cand, EVICT_BATCH, &nplanned, floor, false);
		uint32_t ndead = 0;
		while (ndead < ncand && pool_page_all_dead(p, cand[ndead]))
			ndead++;
		for (uint32_t c = 0; c < ncand && done < need; c++) {
			struct page *pg = cand[c];
			bool dead = c < ndead;
			if ((!dead && !page_clean(p, pg)) || !pool_mark_done(p, pg->busy))
				continue;
			drop_nowait(p, pg, &p->lru, dead, c >= ndead && c < ndead + nplanned);
			done++;
		}
	} while (done < need && done > before);
	return done;
}

/* ------------------------------------------------------ reactive layer */

/* The pages one ref covers in one allocation: of a large allocation, or
 * the one page of the slab a small block lives in.  lo/hi: the bytes, in
 * the allocation's page coordinates (a slab's block starts inside its
 * page).  A ref may cover several: the application's own mappings
 * (fixed.c) lie side by side, and a tensor may straddle two of them. */
struct rref {
	struct alloc *a;
	uint32_t first, last;
	uint64_t lo, hi;
	int ref;             /* the ref it comes from */
};

typedef struct {
	struct rref *rr;
	int n, cap;
	struct rref inline_rr[16];
} rrefs_t;

static bool rr_push(rrefs_t *v, struct rref r)
{
	if (v->n == v->cap) {
		int nc = v->cap * 2;
		struct rref *n = malloc((size_t)nc * sizeof(*n));
		if (!n)
			return false;
		memcpy(n, v->rr, (size_t)v->n * sizeof(*n));
		if (v->rr != v->inline_rr)
			free(v->rr);
		v->rr = n;
		v->cap = nc;
	}
	v->rr[v->n++] = r;
	return true;
}

static void rr_init(rrefs_t *v)
{
	v->rr = v->inline_rr;
	v->n = 0;
	v->cap = 16;
}

static void rr_free(rrefs_t *v)
{
	if (v->rr != v->inline_rr)
		free(v->rr);
}

static struct rref rr_make(const pool_t *p, struct alloc *a, uint64_t lo, uint64_t hi, int ref)
{
	return (struct rref){ a, (uint32_t)page_of(p, lo), (uint32_t)page_of(p, hi - 1), lo, hi, ref };
}

/* Resolves ref i to its span (allocation id, offset and extent, for the
 * caller and the trace) and appends the pages it covers to v.  False when
 * the host has no memory for the list. */
static bool resolve(pool_t *p, const pool_ref_t *r, int i, pool_span_t *out, rrefs_t *v)
{
	memset(out, 0, sizeof(*out));
	if (!pool_owns(p, r->ptr))
		return true;
	struct alloc *a = p->vmap[page_of(p, r->ptr - p->base)];
	if (!a)
		return true;
	if (a->kind == A_SLAB) {
		struct sblock *b = pool_slab_block(a, r->ptr);
		if (!b)
			return true;
		uint64_t in = r->ptr - a->base - (uint64_t)b->start * SMALL_UNIT;
		out->alloc_id = b->id;
		out->offset = in;
		out->bytes = r->bytes && r->bytes < b->size - in ? r->bytes : b->size - in;
		uint64_t lo = (uint64_t)b->start * SMALL_UNIT + in;
		return rr_push(v, rr_make(p, a, lo, lo + out->bytes, i));
	}
	if (a->freed)
		return true;
	uint64_t off = r->ptr - a->base;
	if (off >= a->size)
		return true;
	/* An unknown extent (a scanned kernel argument) is the rest of the
	 * allocation.  An extent stated at this address by an earlier call is
	 * not trusted: a caching allocator (PyTorch's) reuses a block for a
	 * larger tensor without vmem seeing it, and a call that stated the
	 * size of one slice of a concatenation buffer says nothing of a later
	 * kernel over the whole buffer. */
	uint64_t want = r->bytes ? r->bytes : UINT64_MAX;
	uint64_t n = want < a->size - off ? want : a->size - off;
	out->alloc_id = a->id;
	out->offset = off;
	out->bytes = n;
	if (!rr_push(v, rr_make(p, a, off, off + n, i)))
		return false;
	/* The application's own mappings (expandable segments) are one
	 * segment to it: a tensor, and an unknown extent, run on into the
	 * mappings that follow. */
	for (uint64_t left = want - n; a->fixed && left;) {
		uint64_t next = page_of(p, a->base - p->base) + a->npages;
		if (next >= p->npages_va)
			break;
		a = p->vmap[next];
		if (!a || !a->fixed || a->freed)
			break;
		uint64_t m = left < a->size ? left : a->size;
		if (!rr_push(v, rr_make(p, a, 0, m, i)))
			return false;
		out->bytes += m;
		left -= m;
	}
	return true;
}

static void lock_page(pool_t *p, struct page *pg)
{
	if (pg->state == PG_HOSTMAP || pg->state == PG_HANDOFF) {
		/* mapped from the host, or handed off: stays listed there
		 * (hostmap.c, handoff.c) */
	} else if (pg->state == PG_OFFLOADING || pg->state == PG_EVICTING) {
		/* used again before its offload or eviction finished: cancel
		 * it; the copy in flight stays valid as long as the page is not
		 * written, and the user's stream waits for it (its mark is the
		 * page's busy one).  An eager drop not done yet is cancelled too:
		 * the bytes are still there. */
		if (pg->state == PG_OFFLOADING) {
			list_del(&p->offl, pg);
			(void)pool_page_join_out(p, pg);
		}
		pg->state = PG_RESIDENT;
		pg->flags &= ~PF_DROP;
	} else if (pg->flags & PF_HELD) {
		/* the first use of a prefetched page: no longer held */
		list_del(&p->heldl, pg);
		pg->flags &= ~PF_HELD;
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
/* Whether a page coming back for a call needs its old bytes. */
typedef enum {
	OLD_NEEDED,        /* a ref of the call may read the page, or some byte is
			      neither rewritten by it nor dead */
	OLD_OVERWRITTEN,   /* one ref writes the whole page (its part of the
			      allocation) and no ref may read it: an in-place op
			      reads the same bytes through its input, and needs them */
	OLD_DEAD,          /* the call's whole writes cover one span of it and every
			      other byte was declared dead (the first planned
			      iteration's workspace, evicted with a copy in the
			      iteration before and then declared dead: ResNet's
			      network style at 1/2 copied back 2 MiB no call reads) */
	OLD_REST,          /* the call's whole writes cover one span [*wlo, *whi) of
			      it; the other bytes may matter: they stay in the host
			      slot until a call reaches them (PF_REST) - a
			      convolution's workspace ending inside its caching
			      segment's last page, whose rest the first iterations
			      wrote, came back with a copy at every planned call */
} page_old_t;

static page_old_t page_old_bytes(const pool_t *p, const pool_ref_t *refs, const struct rref *rr,
				 int n, const struct page *pg, uint32_t *wlo_out, uint32_t *whi_out)
{
	uint64_t lo = (uint64_t)pg->idx * chunk_sz(p), hi = lo + page_bytes(p, pg->a, pg->idx);
	uint64_t wlo = 0, whi = 0;
	bool covered = false, apart = false;

	if (!refs)
		return OLD_NEEDED;
	for (int i = 0; i < n; i++) {
		const pool_ref_t *r = &refs[rr[i].ref];
		uint64_t a, b;

		if (rr[i].a != pg->a || rr[i].hi <= lo || rr[i].lo >= hi)
			continue;
		if (!r->write || !r->whole)
			return OLD_NEEDED;   /* read (or written in part) by this very call */
		covered |= rr[i].lo <= lo && rr[i].hi >= hi;
		a = (rr[i].lo > lo ? rr[i].lo : lo) - lo;
		b = (rr[i].hi < hi ? rr[i].hi : hi) - lo;
		if (whi > wlo && (a > whi || b < wlo)) {
			apart = true;   /* two written parts apart: not worth the walk */
			continue;
		}
		if (whi == wlo || a < wlo)
			wlo = a;
		if (b > whi)
			whi = b;
	}
	if (covered)
		return OLD_OVERWRITTEN;
	/* what the call leaves of the page lies past every byte written
	 * since the allocation was made (a caching allocator's segment past
	 * the tensors it placed: a workspace ending inside the segment's last
	 * page) - nothing there to keep */
	uint64_t wend = pg->a->kind == A_LARGE && pg->a->wepoch == p->epoch ? pg->a->wend : UINT64_MAX;
	uint64_t used = wend < hi ? wend : hi;
	if (!apart && (used <= lo || (wlo == 0 && used <= lo + whi)))
		return OLD_OVERWRITTEN;
	if (apart || whi == wlo)
		return OLD_NEEDED;
	if (pg->dead && pool_page_dead_beside(p, pg, wlo, whi))
		return OLD_DEAD;
	if (pg->a->kind != A_LARGE)
		return OLD_NEEDED;   /* a slab's other blocks: used by any call */
	*wlo_out = (uint32_t)wlo;
	*whi_out = (uint32_t)whi;
	return OLD_REST;
}

/* Is the page mapped, by a chunk or from the host? */
static inline bool page_mapped(const struct page *pg)
{
	return pg->state == PG_RESIDENT || pg->state == PG_HOSTMAP;
}

/* refs: the call's refs (NULL for a prefetch, which never overwrites);
 * rr: the pages to bring, of the call's `all` (which decide whether a
 * page's old bytes are needed). */
static pool_status_t fault_in(pool_t *p, const pool_ref_t *refs, const struct rref *rr, int n,
			      const struct rref *all, int nall, pool_event_kind_t kind, uint32_t *nfault)
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
				} else if (!page_mapped(pg) && !(pg->flags & PF_MARK)) {
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
	/* map every page first (adjacent ones granted access in one call),
	 * then copy back those that hold bytes */
	struct grant_run g = { 0 };
	for (int i = 0; i < n; i++) {
		if (!rr[i].a)
			continue;
		for (uint32_t k = rr[i].first; k <= rr[i].last; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (st || page_mapped(pg))
				continue;
			if (!(st = pool_page_map_run(p, pg, &g)))
				pg->flags |= PF_MARK;
		}
	}
	st = pool_run_finish(p, &g, st);
	for (int i = 0; i < n; i++) {
		uint32_t f, l;
		if (!rr[i].a)
			continue;
		f = rr[i].first;
		l = rr[i].last;
		for (uint32_t k = f; k <= l; k++) {
			struct page *pg = &rr[i].a->pages[k];
			if (!(pg->flags & PF_MARK))
				continue;
			pg->flags &= ~PF_MARK;
			if (pg->state != PG_RESIDENT)
				continue;   /* its run's grant failed: unmapped again */
			uint32_t wlo = 0, whi = 0;
			page_old_t old = pg->flags & PF_HOST_VALID ?
					 page_old_bytes(p, refs, all, nall, pg, &wlo, &whi) : OLD_NEEDED;
			if (old == OLD_OVERWRITTEN || old == OLD_DEAD) {
				pool_slot_release(p, pg->host, pg->busy);
				pg->host = NULL;
			}
			if (old == OLD_REST) {
				/* the slot keeps the rest; the device holds what
				 * the call writes (the host's copy of that goes
				 * stale with the write) */
				pg->flags &= ~PF_HOST_VALID;
				pg->flags |= PF_REST;
				pg->rlo = wlo;
				pg->rhi = whi;
				p->nrest++;
				p->st.rests_kept++;
			} else if (old == OLD_OVERWRITTEN) {
				/* the call rewrites it all: its old bytes are not needed */
				pg->flags &= ~PF_HOST_VALID;
				p->st.overwrites_skipped++;
			} else if (old == OLD_DEAD) {
				/* dropped as it comes back: the bytes the call does
				 * not write stay dead, and a read of them is refused
				 * as for any dropped page */
				pool_page_dropped(p, pg);
				p->st.dead_copies_skipped++;
			}
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
				pg->wrote = m;
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

/* The bytes of rr within page k of its allocation (page-relative). */
static void ref_part(const pool_t *p, const struct rref *rr, uint32_t k, uint64_t *lo, uint64_t *hi)
{
	uint64_t ps = (uint64_t)k * chunk_sz(p), pe = ps + chunk_sz(p);
	*lo = (rr->lo > ps ? rr->lo : ps) - ps;
	*hi = (rr->hi < pe ? rr->hi : pe) - ps;
}

/* Brings back the rest of a page that kept it on the host (PF_REST): the
 * bytes outside [rlo, rhi), on the H2D stream after the page's queued work,
 * so that the copies' mark stands for all of it.  The slot goes once the
 * copies are done unless it holds every byte (a copy out since).  A use
 * that reaches the rest has it (kind FAULT_IN: a miss; PREFETCH: ahead of
 * it).  A copy the device refuses leaves the page as it was. */
static pool_status_t rest_fill(pool_t *p, struct page *pg, pool_event_kind_t kind)
{
	uint64_t nb = page_bytes(p, pg->a, pg->idx), moved = nb - (pg->rhi - pg->rlo);
	uintptr_t va = page_va(p, pg);
	const char *h = pg->host;
	pool_status_t st;
	int rc = 0;

	if (pg->busy.tl && (st = pool_stream_after(p, p->tl_h2d, p->ops.h2d_stream, pg->busy)))
		return st;
	if (pg->rlo)
		rc = p->ops.copy_h2d(p->ops.ctx, va, h, pg->rlo);
	if (!rc && pg->rhi < nb)
		rc = p->ops.copy_h2d(p->ops.ctx, va + pg->rhi, h + pg->rhi, nb - pg->rhi);
	struct mark m = pool_mark_now(p, p->tl_h2d);
	pg->busy = m;
	if (rc)
		return dev_status(rc);
	pg->wrote = m;
	if (!(pg->flags & PF_HOST_VALID)) {
		pool_slot_release(p, pg->host, m);
		pg->host = NULL;
	}
	page_rest_forget(p, pg);
	p->st.rests_filled++;
	p->st.bytes_rest_filled += moved;
	if (kind == POOL_EV_PREFETCH)
		p->st.bytes_prefetched += moved;
	else
		p->st.bytes_faulted_in += moved;
	pool_emit(p, kind, pg->a, (uint64_t)pg->idx * chunk_sz(p), nb, moved, p->ops.h2d_stream);
	return POOL_OK;
}

/* rest_fill for the resident pages of rr whose rest rr reaches (a
 * prefetch's range); *n counts them. */
static pool_status_t rest_fill_rref(pool_t *p, const struct rref *rr, pool_event_kind_t kind,
				    uint32_t *n)
{
	pool_status_t st = POOL_OK;

	for (uint32_t k = rr->first; k <= rr->last && !st; k++) {
		struct page *pg = &rr->a->pages[k];
		uint64_t lo, hi;

		ref_part(p, rr, k, &lo, &hi);
		if (pg->state != PG_RESIDENT || !(pg->flags & PF_REST) ||
		    (lo >= pg->rlo && hi <= pg->rhi))
			continue;
		if (!(st = rest_fill(p, pg, kind)))
			(*n)++;
	}
	return st;
}

/* A call's refs on a resident page that keeps its rest on the host
 * (PF_REST): nothing to do when they stay inside what the device holds;
 * whole writes that extend it in one span extend it (covering the page:
 * the rest is not needed any more); anything else brings the rest back
 * first (a miss: the plan did not bring it). */
static pool_status_t rest_for_page(pool_t *p, const pool_ref_t *refs, const struct rref *rr,
				   int n, struct page *pg, uint32_t *nfill)
{
	uint64_t ulo = pg->rlo, uhi = pg->rhi, nb = page_bytes(p, pg->a, pg->idx);
	bool fill = false;

	for (int i = 0; i < n && !fill; i++) {
		const pool_ref_t *r = &refs[rr[i].ref];
		uint64_t lo, hi;

		if (rr[i].a != pg->a || pg->idx < rr[i].first || pg->idx > rr[i].last)
			continue;
		ref_part(p, &rr[i], pg->idx, &lo, &hi);
		if (lo >= pg->rlo && hi <= pg->rhi)
			continue;
		if (!r->write || !r->whole || hi < ulo || lo > uhi)
			fill = true;   /* reads the rest, or writes it in part, or apart */
		else if (lo < ulo)
			ulo = lo;
		if (!fill && hi > uhi)
			uhi = hi;
	}
	if (fill) {
		pool_status_t st = rest_fill(p, pg, POOL_EV_FAULT_IN);

		if (!st)
			(*nfill)++;
		return st;
	}
	if (ulo == 0 && uhi >= nb) {
		/* rewritten whole by now: the slot's rest is not needed */
		pool_slot_release(p, pg->host, pg->busy);
		pg->host = NULL;
		pg->flags &= ~PF_HOST_VALID;
		page_rest_forget(p, pg);
	} else {
		pg->rlo = (uint32_t)ulo;
		pg->rhi = (uint32_t)uhi;
	}
	return POOL_OK;
}

static pool_status_t rest_for_call(pool_t *p, const pool_ref_t *refs, const struct rref *rr,
				   int n, uint32_t *nfill)
{
	pool_status_t st = POOL_OK;

	for (int j = 0; j < n && !st; j++)
		for (uint32_t k = rr[j].first; k <= rr[j].last && !st; k++) {
			struct page *pg = &rr[j].a->pages[k];

			if (pg->state == PG_RESIDENT && (pg->flags & PF_REST))
				st = rest_for_page(p, refs, rr, n, pg, nfill);
		}
	return st;
}

static bool refs_lost(pool_t *p, const pool_ref_t *refs, const struct rref *rr, int nrr,
		      pool_span_t *out)
{
	bool lost = false;
	for (int j = 0; j < nrr; j++) {
		int i = rr[j].ref;
		if ((refs[i].write && refs[i].whole) || out[i].lost)
			continue;
		for (uint32_t k = rr[j].first; k <= rr[j].last; k++) {
			uint64_t lo, hi;
			ref_part(p, &rr[j], k, &lo, &hi);
			if (pool_page_lost(&rr[j].a->pages[k], lo, hi)) {
				if (refs[i].maybe) {
					p->st.lost_maybe++;
					break;
				}
				out[i].lost = true;
				lost = true;
				p->st.lost_reads++;
				break;
			}
		}
	}
	return lost;
}

struct pages_iv {
	const struct alloc *a;
	uint32_t first, last;
};

static int pages_iv_cmp(const void *x, const void *y)
{
	const struct pages_iv *u = x, *v = y;

	if (u->a != v->a)
		return (uintptr_t)u->a < (uintptr_t)v->a ? -1 : 1;
	return u->first < v->first ? -1 : u->first > v->first;
}

/* Pages in the union of n intervals (sorted here). */
static uint32_t pages_union(struct pages_iv *v, int n)
{
	uint32_t total = 0;

	qsort(v, (size_t)n, sizeof(*v), pages_iv_cmp);
	for (int i = 0; i < n;) {
		const struct alloc *a = v[i].a;
		uint32_t lo = v[i].first, hi = v[i].last;

		for (i++; i < n && v[i].a == a && v[i].first <= hi + 1; i++)
			if (v[i].last > hi)
				hi = v[i].last;
		total += hi - lo + 1;
	}
	return total;
}

/* Resident pages locked by calls in flight (the caller's own unlocked):
 * the live large allocations (by id) and the slabs. */
static uint32_t pages_locked(const pool_t *p)
{
	uint32_t n = 0;

	for (uint64_t i = 0; i < p->capids; i++) {
		const struct alloc *a = p->ids[i].a;

		if (!p->ids[i].id || p->ids[i].block != UINT32_MAX || !a)
			continue;
		for (uint32_t k = 0; k < a->npages; k++)
			n += a->pages[k].locks > 0;
	}
	for (const struct alloc *a = p->slabs_head; a; a = a->next)
		n += a->pages[0].locks > 0;
	return n;
}

/* Counts what the call of rr needs against the budget (pool_oom_t); its
 * pages not locked by it.  False when there is no memory to count with. */
static bool why_count(const pool_t *p, const pool_ref_t *refs, const struct rref *rr, int nrr,
		      pool_oom_t *o)
{
	struct pages_iv *all = malloc(3 * (size_t)(nrr ? nrr : 1) * sizeof(*all)), *stated, *small;
	int ns = 0, nm = 0;

	if (!all)
		return false;
	stated = all + nrr;
	small = all + 2 * nrr;
	for (int j = 0; j < nrr; j++) {
		all[j] = (struct pages_iv){ rr[j].a, rr[j].first, rr[j].last };
		stated[ns] = all[j];
		if (refs[rr[j].ref].maybe)
			stated[ns].last = stated[ns].first;
		ns++;
		if (rr[j].a->kind == A_SLAB)
			small[nm++] = all[j];
	}
	*o = (pool_oom_t){
		.chunk = chunk_sz(p), .budget = p->cfg.budget,
		.pages = pages_union(all, nrr), .stated = pages_union(stated, ns),
		.small = pages_union(small, nm), .held = (uint32_t)(p->held / chunk_sz(p)),
	};
	/* what else held the budget matters only to a call within it (rescue
	 * attempts larger than the budget fail often: no walk for them) */
	if ((uint64_t)o->pages * chunk_sz(p) <= p->cfg.budget)
		o->locked_other = pages_locked(p);
	free(all);
	return true;
}

bool pool_oom_need(pool_t *p, const pool_ref_t *refs, int n, pool_oom_t *o)
{
	rrefs_t v;
	pool_span_t sp;
	bool ok = true;

	rr_init(&v);
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n && ok; i++)
		ok = resolve(p, &refs[i], i, &sp, &v);
	ok = ok && why_count(p, refs, v.rr, v.n, o);
	pthread_mutex_unlock(&p->lock);
	rr_free(&v);
	return ok;
}

/* ------------------------------ calls beyond the budget (cfg.host_map)
 *
 * A ref of unknown extent (bytes 0, a scanned kernel argument) states its
 * first page; the pages after it, to the end of the allocation and into
 * the application's mappings that follow, are a guess.  When the guess
 * takes a call past the budget, its pages that are not resident are
 * mapped from their host slots instead (hostmap.c). */

/* Is rr[j] a guess past its first page (j an unknown extent's)?  Then
 * `continued`: rr[j] carries the extent on into a following mapping, all
 * of it guessed. */
static bool rref_guess(const pool_ref_t *refs, const struct rref *rr, int j, bool *continued)
{
	*continued = j > 0 && rr[j - 1].ref == rr[j].ref;
	return !refs[rr[j].ref].bytes && rr[j].a->kind == A_LARGE;
}

/* The last page of rr[j] its ref states (first - 1 when none). */
static int64_t rref_stated_last(const pool_ref_t *refs, const struct rref *rr, int j)
{
	bool cont;

	if (!rref_guess(refs, rr, j, &cont))
		return rr[j].last;
	return cont ? (int64_t)rr[j].first - 1 : rr[j].first;
}

/* rr[j] cut to page k (a one-page rref of the same ref). */
static struct rref rref_page(const pool_t *p, const struct rref *r, uint32_t k)
{
	uint64_t lo = (uint64_t)k * chunk_sz(p), hi = lo + chunk_sz(p);
	struct rref o = *r;

	o.first = o.last = k;
	o.lo = r->lo > lo ? r->lo : lo;
	o.hi = r->hi < hi ? r->hi : hi;
	return o;
}

/* Pages of rr together, and of them those the refs state (*stated); false
 * when the host has no memory to count. */
static bool rref_pages(const pool_ref_t *refs, const struct rref *rr, int nrr, uint32_t *pages,
		       uint32_t *stated)
{
	struct pages_iv *iv = malloc(2 * (size_t)nrr * sizeof(*iv));
	int ns = 0;

	if (!iv)
		return false;
	for (int j = 0; j < nrr; j++) {
		int64_t sl = rref_stated_last(refs, rr, j);

		iv[j] = (struct pages_iv){ rr[j].a, rr[j].first, rr[j].last };
		if (sl >= rr[j].first)
			iv[nrr + ns++] = (struct pages_iv){ rr[j].a, rr[j].first, (uint32_t)sl };
	}
	*pages = pages_union(iv, nrr);
	*stated = pages_union(iv + nrr, ns);
	free(iv);
	return true;
}

/* Splits a call whose stated pages alone exceed the budget (bpages):
 * slabs' pages go to `lk`, then pages of large allocations while the
 * budget holds them - resident ones first, then stated ones, then guessed
 * ones, each in order; the rest go to `dv`, one rref a page.  A page two
 * refs name is counted twice (the budget is then not quite filled).
 * False when the slabs alone fill it or the host has no memory for the
 * lists. */
static bool stated_split(pool_t *p, const pool_ref_t *refs, const struct rref *rr, int nrr,
			 uint32_t bpages, rrefs_t *lk, rrefs_t *dv)
{
	rrefs_t later[2];   /* stated, guessed */
	struct pages_iv *iv = malloc((size_t)nrr * sizeof(*iv));
	uint32_t room = bpages, slabs;
	int ns = 0;
	bool ok = iv != NULL;

	for (int j = 0; ok && j < nrr; j++)
		if (rr[j].a->kind != A_LARGE) {
			iv[ns++] = (struct pages_iv){ rr[j].a, rr[j].first, rr[j].last };
			ok = rr_push(lk, rr[j]);
		}
	slabs = ok ? pages_union(iv, ns) : 0;
	free(iv);
	if (!ok || slabs > room)
		return false;
	room -= slabs;
	rr_init(&later[0]);
	rr_init(&later[1]);
	for (int j = 0; ok && j < nrr; j++) {
		int64_t sl = rref_stated_last(refs, rr, j);

		if (rr[j].a->kind != A_LARGE)
			continue;   /* a slab: in lk already */
		for (uint32_t k = rr[j].first; ok && k <= rr[j].last; k++) {
			bool on = page_has_chunk(&rr[j].a->pages[k]);

			ok = rr_push(on && room ? lk : &later[(int64_t)k > sl], rref_page(p, &rr[j], k));
			room -= on && room;
		}
	}
	for (int l = 0; l < 2; l++)
		for (int i = 0; ok && i < later[l].n; i++) {
			ok = rr_push(room ? lk : dv, later[l].rr[i]);
			room -= room > 0;
		}
	rr_free(&later[0]);
	rr_free(&later[1]);
	return ok;
}

/* Splits a call whose guessed pages take it past the budget: `lk` gets
 * what is locked and faulted in as usual - the stated pages, and guessed
 * ones already resident while the budget holds them with the stated ones
 * - and `dv` the other guessed pages, one rref each, which pool_acquire
 * maps from the host after the fault-in unless they came back meanwhile.
 * False (nothing split) when the call fits the budget or has no guess, or
 * the host has no memory for the lists.  A call whose stated pages alone
 * exceed the budget is split by stated_split when host_stated, else not. */
static bool tail_split(pool_t *p, const pool_ref_t *refs, const struct rref *rr, int nrr,
		       bool host_stated, rrefs_t *lk, rrefs_t *dv)
{
	uint32_t pages, stated, bpages = (uint32_t)(p->cfg.budget / chunk_sz(p));
	uint64_t most = 0;   /* pages counted per rref: the union is at most this */
	bool any = host_stated, cont;

	for (int j = 0; j < nrr; j++) {
		any |= rref_guess(refs, rr, j, &cont) && (cont || rr[j].last > rr[j].first);
		most += rr[j].last - rr[j].first + 1;
	}
	/* most calls fit: no list, no sort on every launch */
	if (!any || most <= bpages || !rref_pages(refs, rr, nrr, &pages, &stated) || pages <= bpages)
		return false;
	if (stated > bpages)
		return host_stated && stated_split(p, refs, rr, nrr, bpages, lk, dv);
	uint32_t room = bpages - stated;
	for (int j = 0; j < nrr; j++) {
		if (!rref_guess(refs, rr, j, &cont)) {
			if (!rr_push(lk, rr[j]))
				return false;
			continue;
		}
		uint32_t k = rr[j].first;
		if (!cont && !rr_push(lk, rref_page(p, &rr[j], k++)))
			return false;
		for (; k <= rr[j].last; k++) {
			bool on = page_has_chunk(&rr[j].a->pages[k]);

			if (!rr_push(on && room ? lk : dv, rref_page(p, &rr[j], k)))
				return false;
			room -= on && room;
		}
	}
	return true;
}

/* A stated page of the call mapped from the host by an earlier call comes
 * back to the device: the host waits for that call (lock released, the
 * call's allocations pinned).  False when one of them was freed meanwhile
 * (by another thread: the call is refused). */
static bool stated_leave_host(pool_t *p, const pool_ref_t *refs, const struct rref *rr, int nrr)
{
	bool freed = false;

	pool_hostmap_reap(p, false);
	if (!p->hmapl.head)
		return true;
	for (int j = 0; j < nrr; j++)
		rr[j].a->pins++;
	for (int j = 0; j < nrr; j++) {
		int64_t sl = rref_stated_last(refs, rr, j);

		for (int64_t k = rr[j].first; k <= sl; k++)
			if (!rr[j].a->freed)
				(void)pool_hostmap_leave(p, &rr[j].a->pages[k], true);
	}
	for (int j = 0; j < nrr; j++) {
		rr[j].a->pins--;
		freed |= rr[j].a->freed;
	}
	return !freed;
}

/* The call's pages that were handed off (their chunks went to a
 * prefetched page while their last use was queued: handoff.c) leave
 * first, once that use and their copy out completed - the host waits for
 * them (lock released, the call's allocations pinned) - and are then on
 * the host as any evicted page.  Until none is left: another thread may
 * hand one off while this one waits.  POOL_EINVAL when one of the
 * allocations was freed meanwhile (by another thread: the call is
 * refused), POOL_EDEVICE when the device refused a wait or an unmap. */
static pool_status_t handoff_settle(pool_t *p, const struct rref *rr, int nrr)
{
	pool_status_t st = POOL_OK;
	bool again = true;

	pool_handoff_reap(p, false);
	if (!p->handl.head)
		return POOL_OK;
	for (int j = 0; j < nrr; j++)
		rr[j].a->pins++;
	while (again && !st) {
		again = false;
		for (int j = 0; j < nrr && !st; j++)
			for (uint32_t k = rr[j].first; k <= rr[j].last && !st; k++) {
				if (rr[j].a->freed)
					st = POOL_EINVAL;
				else if (rr[j].a->pages[k].state == PG_HANDOFF)
					st = pool_handoff_leave(p, &rr[j].a->pages[k], true) ?
						     (again = true, POOL_OK) : POOL_EDEVICE;
			}
	}
	for (int j = 0; j < nrr; j++)
		rr[j].a->pins--;
	return st;
}

/* Maps the pages of dv that are not back on the device from the host, and
 * locks each; *nmapped counts those mapped.  On failure the first *nlocked
 * are locked. */
static pool_status_t tail_map(pool_t *p, const rrefs_t *dv, int *nlocked, uint32_t *nmapped)
{
	pool_status_t st = POOL_OK;

	*nlocked = 0;
	*nmapped = 0;
	for (int i = 0; i < dv->n; i++) {
		struct page *pg = &dv->rr[i].a->pages[dv->rr[i].first];

		if (pg->state == PG_HOST || pg->state == PG_RELEASED) {
			if ((st = pool_hostmap_page(p, pg)))
				return st;
			(*nmapped)++;
		}
		lock_page(p, pg);
		(*nlocked)++;
	}
	return st;
}

pool_status_t pool_acquire(pool_t *p, const pool_ref_t *refs, int n, void *stream, pool_span_t *out)
{
	return pool_acquire_flags(p, refs, n, stream, out, 0);
}

pool_status_t pool_acquire_flags(pool_t *p, const pool_ref_t *refs, int n, void *stream,
				 pool_span_t *out, unsigned flags)
{
	rrefs_t v, lv, dv;
	pool_status_t st = POOL_OK;
	uint32_t nfault;

	rr_init(&v);
	rr_init(&lv);
	rr_init(&dv);
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n && st == POOL_OK; i++)
		if (!resolve(p, &refs[i], i, &out[i], &v))
			st = POOL_ENOMEM;   /* no host memory to list the pages: refused */
	if (st || !v.n) {
		pthread_mutex_unlock(&p->lock);
		rr_free(&v);
		return st;
	}
	struct rref *rr = v.rr;
	int nrr = v.n;
	/* issue 11: a ref that may read bytes dropped as dead is refused -
	 * the call never runs on them (the caller fails it loudly) */
	if (p->ndropped && refs_lost(p, refs, rr, nrr, out)) {
		pthread_mutex_unlock(&p->lock);
		rr_free(&v);
		return POOL_ELOST;
	}
	if (p->hmapl.head && !stated_leave_host(p, refs, rr, nrr)) {
		pthread_mutex_unlock(&p->lock);
		rr_free(&v);
		return POOL_EINVAL;
	}
	if (p->handl.head && (st = handoff_settle(p, rr, nrr))) {
		pthread_mutex_unlock(&p->lock);
		rr_free(&v);
		return st;
	}
	/* lk: what is locked now and faulted in; the rest of a call beyond
	 * the budget (dv) is locked after, mapped from the host */
	struct rref *lk = rr;
	int nlk = nrr, ntail = 0;
	if (p->cfg.host_map) {
		if (tail_split(p, refs, rr, nrr, flags & POOL_ACQ_HOST_STATED, &lv, &dv)) {
			lk = lv.rr;
			nlk = lv.n;
		} else {
			lv.n = dv.n = 0;
		}
	}
	for (int j = 0; j < nlk; j++)
		for (uint32_t k = lk[j].first; k <= lk[j].last; k++)
			lock_page(p, &lk[j].a->pages[k]);
	/* a page whose rest is on the host, and the call reaches the rest */
	uint32_t nfill = 0, nmapped = 0;
	if (p->nrest)
		st = rest_for_call(p, refs, rr, nrr, &nfill);
	if (!st)
		st = fault_in(p, refs, lk, nlk, rr, nrr, POOL_EV_FAULT_IN, &nfault);
	else
		nfault = 0;
	p->st.misses += nfault + nfill;
	if (!st && dv.n) {
		st = tail_map(p, &dv, &ntail, &nmapped);
		p->st.host_map_calls += nmapped > 0;
	}
	/* Order the call after the copies and after earlier work on other
	 * streams (a prefetch, a cancelled offload, another stream's use).
	 * The same stream's earlier uses are ordered by the stream itself: in
	 * the common case nothing is recorded or waited.  A call that cannot
	 * be ordered does not run. */
	struct tl *tl = pool_tl(p, stream);
	struct mark last = { 0 };
	for (int j = 0; st == POOL_OK && j < nrr; j++)
		for (uint32_t k = rr[j].first; st == POOL_OK && k <= rr[j].last; k++) {
			struct page *pg = &rr[j].a->pages[k];
			if (pg->busy.tl && !mark_same(pg->busy, last)) {
				st = pool_stream_after(p, tl, stream, pg->busy);
				last = pg->busy;
			}
		}
	if (st) {
		unlock_spans(p, lk, nlk);
		unlock_spans(p, dv.rr, ntail);
		if (st == POOL_ENOMEM || st == POOL_EHOST) {
			/* a device failure is not an out-of-memory */
			p->st.oom++;
			pool_emit(p, POOL_EV_OOM, NULL, 0, 0, 0, stream);
		}
	}
	pthread_mutex_unlock(&p->lock);
	rr_free(&v);
	rr_free(&lv);
	rr_free(&dv);
	return st;
}

void pool_release(pool_t *p, const pool_ref_t *refs, const pool_span_t *spans, int n, void *stream)
{
	rrefs_t v;
	bool unordered = false;

	rr_init(&v);
	pthread_mutex_lock(&p->lock);
	/* The same pages acquire locked, unless the allocation went meanwhile
	 * (freed, or the address reused: its id differs).  The refs are
	 * resolved again with the extent acquire gave them. */
	for (int i = 0; i < n; i++) {
		pool_span_t now;
		if (!spans[i].alloc_id)
			continue;
		pool_ref_t r = refs[i];
		r.bytes = spans[i].bytes;
		int before = v.n;
		if (!resolve(p, &r, i, &now, &v)) {
			/* no host memory: the pages stay locked (never evicted),
			 * which is safe; nothing more can be done */
			v.n = before;
			continue;
		}
		if (now.alloc_id != spans[i].alloc_id)
			v.n = before;
	}
	if (!v.n) {
		pthread_mutex_unlock(&p->lock);
		rr_free(&v);
		return;
	}
	struct rref *rr = v.rr;
	int nrr = v.n;
	/* Two threads may use one page on two streams concurrently; the new
	 * use mark must dominate both, so this stream waits for the other's
	 * use (acquire already made it wait for what was there then). */
	struct tl *tl = pool_tl(p, stream);
	for (int j = 0; j < nrr; j++)
		for (uint32_t k = rr[j].first; k <= rr[j].last; k++) {
			struct mark b = rr[j].a->pages[k].busy;
			if (b.tl && b.tl != tl && !mark_known_done(b) &&
			    pool_stream_after(p, tl, stream, b))
				unordered = true;
		}
	/* The use is this stream's next position: no fence now (issue 14).
	 * If the stream could not be made to wait for the other use, the
	 * pages wait for every stream instead. */
	struct mark m = pool_mark_now(p, unordered ? p->tl_all : tl);
	for (int j = 0; j < nrr; j++) {
		const pool_ref_t *ref = &refs[rr[j].ref];
		if (ref->write && rr[j].hi > rr[j].a->wend)
			rr[j].a->wend = rr[j].hi;
		for (uint32_t k = rr[j].first; k <= rr[j].last; k++) {
			struct page *pg = &rr[j].a->pages[k];
			if (ref->write) {
				pg->wrote = m;
				pg->flags |= PF_WRITTEN;
				if (pg->state == PG_HOSTMAP) {
					/* written into its slot, which stays the
					 * page's bytes (hostmap.c) */
				} else if (pg->flags & PF_REST) {
					/* inside what the device holds (acquire
					 * brought the rest back otherwise): the slot
					 * keeps the rest */
					pg->flags &= ~PF_HOST_VALID;
				} else if (pg->host) {
					/* the host copy is stale; the slot may still be
					 * read by the fault-in copy, which m follows */
					pool_slot_release(p, pg->host, m);
					pg->host = NULL;
					pg->flags &= ~PF_HOST_VALID;
				}
				if (pg->dead) {
					/* written bytes are live again (issue 11) */
					uint64_t lo, hi;
					ref_part(p, &rr[j], k, &lo, &hi);
					pool_page_written(p, pg, lo, hi);
				}
			}
			pg->busy = m;
			unlock_page(p, pg);
		}
	}
	pthread_mutex_unlock(&p->lock);
	rr_free(&v);
}

void pool_resolve(pool_t *p, const pool_ref_t *refs, int n, pool_span_t *out)
{
	rrefs_t v;
	rr_init(&v);
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		v.n = 0;
		(void)resolve(p, &refs[i], i, &out[i], &v);
	}
	pthread_mutex_unlock(&p->lock);
	rr_free(&v);
}

/* ----------------------------------------------- the policies' operations */

/* The pages of a policy's range (pool.h): an allocation by id, offset and
 * bytes (0: the rest).  POOL_EINVAL for an id no longer live. */
static pool_status_t range_rref(pool_t *p, const pool_range_t *r, struct rref *rr, pool_span_t *sp)
{
	const struct idslot *s = pool_id_get(p, r->alloc_id);
	if (!s)
		return POOL_EINVAL;
	uint64_t size = s->block == UINT32_MAX ? s->a->size : s->a->blocks[s->block].size;
	if (r->offset >= size)
		return POOL_EINVAL;
	sp->alloc_id = r->alloc_id;
	sp->offset = r->offset;
	sp->bytes = r->bytes && r->bytes < size - r->offset ? r->bytes : size - r->offset;
	sp->lost = false;
	uint64_t base = s->block == UINT32_MAX ? 0 : (uint64_t)s->a->blocks[s->block].start * SMALL_UNIT;
	*rr = rr_make(p, s->a, base + sp->offset, base + sp->offset + sp->bytes, 0);
	return POOL_OK;
}

uint32_t pool_ranges_pages(pool_t *p, const pool_range_t *r, int n)
{
	struct pages_iv *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(*v));
	uint32_t pages;
	int m = 0;

	if (!v)
		return 0;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		struct rref rr;
		pool_span_t sp;

		if (r[i].alloc_id && range_rref(p, &r[i], &rr, &sp) == POOL_OK)
			v[m++] = (struct pages_iv){ rr.a, rr.first, rr.last };
	}
	pages = pages_union(v, m);
	pthread_mutex_unlock(&p->lock);
	free(v);
	return pages;
}

/* Pages copied out since `from` (PF_MARK) get one fence: the offload's
 * pages become free group by group (cfg.offload_fence bytes) as their
 * copies complete, so a reclaim waits for the first group, not for the
 * whole tensor. */
static void offload_fence(pool_t *p, struct alloc *a, uint32_t from, uint32_t to,
			  pool_status_t *st)
{
	pool_status_t fst;
	struct mark m = pool_mark_now(p, p->tl_d2h);

	if (!pool_mark_fence(p, m, &fst) && fst && *st == POOL_OK)
		*st = fst;
	for (uint32_t k = from; k <= to; k++) {
		struct page *pg = &a->pages[k];

		if (pg->flags & PF_MARK) {
			pg->flags &= ~PF_MARK;
			pg->out = m;
		}
	}
}

pool_status_t pool_settle(pool_t *p, const pool_range_t *r)
{
	pool_span_t s;
	struct rref rr;
	pool_status_t st;
	struct mark last = { 0 };

	pthread_mutex_lock(&p->lock);
	if ((st = range_rref(p, r, &rr, &s)) || rr.a->kind != A_LARGE) {
		pthread_mutex_unlock(&p->lock);
		return st ? st : POOL_EINVAL;
	}
	for (uint32_t k = rr.first; st == POOL_OK && k <= rr.last; k++) {
		struct page *pg = &rr.a->pages[k];
		if (pg->state != PG_RESIDENT || mark_known_done(pg->wrote) ||
		    (last.tl == pg->wrote.tl && last.seq >= pg->wrote.seq))
			continue;
		(void)pool_mark_fence(p, pg->wrote, &st);
		last = (struct mark){ pg->wrote.tl, pg->wrote.tl->seq };
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_status_t pool_offload(pool_t *p, const pool_range_t *r)
{
	pool_span_t s;
	struct rref rr;
	pool_status_t st;
	uint32_t ncopy = 0, nsel = 0, group, ingroup = 0, gfirst;
	uint64_t moved = 0;

	pthread_mutex_lock(&p->lock);
	if ((st = range_rref(p, r, &rr, &s)) || rr.a->kind != A_LARGE) {
		pthread_mutex_unlock(&p->lock);
		return st ? st : POOL_EINVAL;   /* small ones move with their chunk */
	}
	struct alloc *a = rr.a;
	/* the key of the range's whole pages is their least: none of them
	 * is the next call's unless it is 1 (one policy lookup, not one a
	 * page, for a tensor the next call does not touch) */
	uint64_t pages_end = (uint64_t)rr.last * chunk_sz(p) + page_bytes(p, a, rr.last);
	bool next_uses = p->order && range_key(p, a, (uint64_t)rr.first * chunk_sz(p),
					       pages_end - (uint64_t)rr.first * chunk_sz(p)) == 1;
	group = (uint32_t)(p->cfg.offload_fence / chunk_sz(p));
	if (!group)
		group = 1;
	gfirst = rr.first;
	/* vDNN §III-A: copy out after the last use, on the D2H stream.  The
	 * pages are unmapped once their copies (or, for clean pages, their
	 * last use) completed: pool_poll, or on demand.  Each group's fence is
	 * recorded as soon as its copies are queued so that the first poll
	 * after them can tell; if one cannot be, a later poll records it (the
	 * pages stay mapped). */
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		struct page *pg = &a->pages[k];
		if (pg->state != PG_RESIDENT || pg->locks)
			continue;
		if (next_uses && page_key(p, pg) == 1)
			continue;   /* the next call uses it: another tensor shares the page */
		if (!page_clean(p, pg) && !pool_page_all_dead(p, pg)) {
			/* after the last write only: the copy reads the page
			 * while the calls that still read it run (vDNN §III-A:
			 * layer n's X leaves while layer n computes) */
			if ((st = copy_out(p, pg, pg->wrote.tl ? pg->wrote : pg->busy)))
				break;
			pg->out = pg->busy;   /* until its group's fence */
			pg->flags |= PF_MARK;
			moved += out_bytes(p, pg);
			ncopy++;
			if (++ingroup == group) {
				offload_fence(p, a, gfirst, k, &st);
				gfirst = k + 1;
				ingroup = 0;
			}
		}
		pg->flags |= PF_SEL;
		nsel++;
	}
	if (ingroup)
		offload_fence(p, a, gfirst, rr.last, &st);
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		struct page *pg = &a->pages[k];
		if (!(pg->flags & PF_SEL))
			continue;
		pg->flags &= ~PF_SEL;
		if (pool_page_all_dead(p, pg))
			pg->flags |= PF_DROP;   /* nothing to keep */
		page_unlist(p, pg);
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

/* Fills the cache towards `want` chunks without a host wait: the budget's
 * room, then reclaims that need no wait, dead pages and (`clean`) clean
 * pages whose last use completed, above `floor` (evict_candidates).  Each
 * way of reclaiming makes progress but may yield no chunk (a freed range
 * whose pages were all evicted holds none), so it tries until the cache
 * holds `want` or nothing is left to try.  Returns the chunks in the
 * cache, at most `want`. */
static uint32_t fill_nowait(pool_t *p, uint32_t want, bool clean, uint64_t floor)
{
	while (p->ncache < want) {
		if (p->held + chunk_sz(p) <= p->cfg.budget && pool_chunk_create(p) == 0)
			continue;
		if (p->spend_head)
			pool_small_reap(p);
		if (!pool_freed_reclaim_one(p, false, want - p->ncache) && !pool_offl_reap(p, false) &&
		    !pool_slab_reclaim_empty(p) &&
		    !pool_evict_nowait(p, want - p->ncache, clean, floor))
			break;
	}
	return p->ncache < want ? p->ncache : want;
}

uint32_t pool_chunks_free(pool_t *p, uint32_t want)
{
	return fill_nowait(p, want, false, 0);
}

/* A prefetch for the next call that found no other room: dirty pages the
 * plan needs later than the range (`floor`, its own next use), the
 * furthest first, leave as offloads do - a copy on the D2H stream after
 * their last write, the chunk released once the copy and their last use
 * completed (pool_offl_reap) - instead of staying until the call faults
 * them out on its own path and its range in after them (Belady: of what
 * must go, what is needed last).  These are pages no plan step moves
 * (slabs, a caching allocator's moving blocks) or that the plan expected
 * gone: DenseNet and Inception at batch 8, 32x32, missed in every planned
 * iteration without it.  For the next call only: sending pages out for
 * prefetches further ahead took pages the plan's own frees would have
 * made room for in time (ResNet-50 (128) under dyn on the Titan X model,
 * its `none` pass 490 -> 661 ms).  Nothing waits for the copies here:
 * the prefetch is tried again with a wait once the call before its own
 * is queued (the runtime's retry), and finds them done or waits for them
 * while that call runs.  Returns the pages sent, and the dead ones to drop. */
static uint32_t offload_later(pool_t *p, uint32_t need, uint64_t floor)
{
	struct page *cand[EVICT_BATCH], *sent[EVICT_BATCH];
	uint32_t nplanned, ncand, ndead = 0, n = 0, ndrop = 0;

	ncand = evict_candidates(p, cand, EVICT_BATCH, &nplanned, floor, false);
	while (ndead < ncand && pool_page_all_dead(p, cand[ndead]))
		ndead++;
	/* dead pages whose last use is still queued (fill_nowait took the
	 * others) leave first, with no copy, once that use completes - what a
	 * dirty page's copy would wait for anyway (a fresh tensor dead from
	 * its last use to its free: random:147831307 per-tensor at 1/2, the
	 * next call's input came as a fault beside the call before) */
	for (uint32_t c = 0; c < ndead && ndrop < need; c++) {
		struct page *pg = cand[c];

		if (pg->locks || pool_mark_done(p, pg->busy))
			continue;
		pool_page_drop_later(p, pg);
		ndrop++;
	}
	need -= ndrop;
	p->st.prefetch_room += ndrop;
	for (uint32_t c = ndead; c < ncand && c < ndead + nplanned && n < need; c++) {
		struct page *pg = cand[c];

		if (page_clean(p, pg) || pool_page_all_dead(p, pg))
			continue;   /* fill_nowait takes it once its last use completed */
		if (copy_out(p, pg, pg->wrote.tl ? pg->wrote : pg->busy))
			break;
		sent[n++] = pg;
	}
	if (!n)
		return ndrop;
	pool_status_t fst;
	struct mark m = pool_mark_now(p, p->tl_d2h);
	(void)pool_mark_fence(p, m, &fst);   /* not recorded: a later reap waits on the mark */
	for (uint32_t i = 0; i < n; i++) {
		struct page *pg = sent[i];

		pg->out = m;
		page_unlist(p, pg);
		pg->state = PG_OFFLOADING;
		list_push_back(&p->offl, pg);
		p->st.evictions++;
		p->st.evictions_planned++;
		p->st.bytes_evicted += out_bytes(p, pg);   /* still PF_REST, if it was */
		pool_emit(p, POOL_EV_EVICT, pg->a, (uint64_t)pg->idx * chunk_sz(p),
			  page_bytes(p, pg->a, pg->idx), out_bytes(p, pg), p->ops.d2h_stream);
	}
	p->st.prefetch_room += n;
	return n + ndrop;
}

/* The furthest next use, above `floor`, of a dirty page the plan knows:
 * what offload_later would send out first (0: none). */
static uint64_t far_dirty_key(pool_t *p, uint64_t floor)
{
	uint64_t far = 0, seen = 0;

	for (struct page *pg = p->lru.tail; pg; pg = pg->prev) {
		uint64_t key;

		if (p->order_window && ++seen > p->order_window)
			break;
		if (page_clean(p, pg) || pool_page_all_dead(p, pg))
			continue;
		key = page_key(p, pg);
		if (key != POOL_ORDER_UNKNOWN && key > floor && key > far)
			far = key;
	}
	return far;
}

/* Pages prefetched for calls the plan needs later than `floor` (the next
 * call's range), whose copies in completed: given up without a copy, the
 * furthest first, for a prefetch for the next call - those needed after
 * every dirty page the plan needs later (Belady: of what must go, what is
 * needed last; a dirty page needed later still goes first, copied out by
 * offload_later).  Theirs is brought again before their own call, by its
 * lookahead.  Held pages were otherwise taken only as a fault's last
 * resort: a random net in the caching style at 1/2 held 26 of its 27
 * pages in prefetches for later calls while the next call's lookahead
 * found no chunk; taking them ahead of a dirty page needed later made
 * that net, per-tensor, fault in a page given up for the call after next
 * (0 -> 5 misses).  Returns the chunks freed. */
static uint32_t take_held_later(pool_t *p, uint32_t need, uint64_t floor)
{
	struct keyed k[EVICT_BATCH];
	uint32_t n = 0, done = 0;
	uint64_t far;

	if (floor == POOL_ORDER_UNKNOWN || !p->heldl.head)
		return 0;
	far = far_dirty_key(p, floor);
	for (struct page *pg = p->heldl.head; pg; pg = pg->next) {
		uint64_t key;

		if (pg->locks || !page_clean(p, pg) || !pool_mark_done(p, pg->busy))
			continue;
		key = page_key(p, pg);
		if (key == POOL_ORDER_UNKNOWN || key <= floor || key < far)
			continue;
		if (n < EVICT_BATCH) {
			k[n] = (struct keyed){ key, n, pg };
			n++;
		} else {
			uint32_t lo = 0;   /* keep the furthest EVICT_BATCH */
			for (uint32_t i = 1; i < n; i++)
				if (k[i].key < k[lo].key)
					lo = i;
			if (key > k[lo].key)
				k[lo] = (struct keyed){ key, lo, pg };
		}
	}
	qsort(k, n, sizeof(*k), cmp_keyed);
	for (uint32_t i = 0; i < n && done < need; i++) {
		struct page *pg = k[i].pg;

		pg->flags &= ~PF_HELD;
		p->st.held_evicted++;
		drop_nowait(p, pg, &p->heldl, false, true);
		done++;
	}
	return done;
}

/* Clean (or dead) pages the plan needs later than `floor`, whose last use
 * is queued still but covered by a fence recorded before the last call
 * was queued (the one pool_mark_done recorded when the prefetch first
 * looked at them, finding them busy): the host waits for that fence -
 * the work queued after it keeps the device busy - and drops them
 * without a copy.  For a prefetch for the next call, once the call before it is
 * queued (POOL_WAIT_USE): the call's own fault would wait for the same
 * pages after everything queued, with the device idle until its copy in
 * lands (random:2051145321's backward-data convolution, whose dx tail
 * page had to wait for the x the backward-filter call before it read;
 * calls in slices in 5-page budgets, the page one slice frees the next
 * slice's).  Pages used by the last call queued have no such fence and
 * are left to the fault.  Returns the chunks freed. */
static uint32_t take_clean_fenced(pool_t *p, uint32_t need, uint64_t floor)
{
	struct page *cand[EVICT_BATCH], *vict[EVICT_BATCH];
	bool dead[EVICT_BATCH], planned[EVICT_BATCH];
	uint32_t nplanned, ncand, ndead = 0, n = 0, done = 0;

	ncand = evict_candidates(p, cand, EVICT_BATCH, &nplanned, floor, false);
	while (ndead < ncand && pool_page_all_dead(p, cand[ndead]))
		ndead++;
	for (uint32_t c = 0; c < ncand && n < need; c++) {
		struct page *pg = cand[c];

		if (pg->locks || (c >= ndead && !page_clean(p, pg)) ||
		    !pool_mark_fenced(p, pg->busy))
			continue;
		dead[n] = c < ndead;
		planned[n] = c >= ndead && c < ndead + nplanned;
		vict[n++] = victim_take(p, pg);
	}
	if (!n)
		return 0;
	/* each wait releases the lock: a fence is looked up again after it
	 * (the ring may have let it go), and a page whose last use is known
	 * done needs none */
	for (uint32_t i = 0; i < n; i++) {
		struct fence *f = vict[i]->state == PG_EVICTING ? pool_mark_fenced(p, vict[i]->busy)
								: NULL;

		if (f && !pool_fence_done(p, f)) {
			(void)pool_fence_wait(p, f);   /* failed: the mark stays pending */
			p->st.prefetch_waits++;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		struct page *pg = vict[i];

		pg->a->pins--;
		if (pg->state != PG_EVICTING)
			continue;   /* taken back by a use or a free while we waited */
		if (!pool_mark_done(p, pg->busy)) {
			pg->state = PG_RESIDENT;   /* still in use: stays */
			list_push_back(&p->lru, pg);
			continue;
		}
		drop_nowait(p, pg, NULL, dead[i] && pool_page_all_dead(p, pg), planned[i]);
		done++;
	}
	return done;
}

/* A prefetch's floor (prefetch_fill's): 1 for the next call under an
 * eviction order (keys count from 1, the next call), else the range's own
 * key (0, unknown: no floor) - asked of the order only once a page or the
 * fill needs it: most prefetches find their range resident. */
typedef struct {
	const struct alloc *a;
	uint64_t off, bytes, v;
	bool known;
} pfloor_t;

static uint64_t pfloor(const pool_t *p, pfloor_t *f)
{
	if (!f->known) {
		f->v = range_key(p, f->a, f->off, f->bytes);
		f->known = true;
	}
	return f->v;
}

/* The pages of a prefetch's range it leaves out (pass_dead), one bit each
 * from the range's first page; v NULL: none can be (no dead page in the
 * pool, no order, a slab, or no host memory for the bits). */
typedef struct {
	uint64_t inl[4], *v;
	uint32_t n;   /* pages left out */
} passed_t;

static void passed_init(const pool_t *p, const struct rref *rr, passed_t *m)
{
	uint32_t n = rr->last - rr->first + 1;

	m->n = 0;
	m->v = NULL;
	if ((!p->ndead_full && !p->ndropped) || !p->order || rr->a->kind != A_LARGE)
		return;
	if (n > 64 * 4) {
		m->v = calloc((n + 63) / 64, sizeof(*m->v));
	} else {
		memset(m->inl, 0, sizeof(m->inl));
		m->v = m->inl;
	}
}

static inline bool passed(const passed_t *m, uint32_t i)
{
	return m->n && (m->v[i / 64] >> (i % 64)) & 1;
}

/* Leaves page i of a prefetch's range (pg) out when it is dead and the
 * call the range is for does not use it next (its key past the floor): a
 * range from a guessed extent reaches past its tensor.  Nothing reads it
 * before a write; brought, it would be held - out of every eviction's
 * reach until its next use, an iteration away - and locked meanwhile, not
 * room (random:842402907 caching at 1/2: a dead page held for a backward
 * filter that never touched it, and the channel slice after next, which
 * needs the whole budget, faulted its last page in every planned
 * iteration).  True when it is left out. */
static bool pass_dead(pool_t *p, passed_t *m, pfloor_t *f, uint32_t i, const struct page *pg)
{
	uint64_t fl;

	if (!m->v || !pool_page_all_dead(p, pg) || (fl = pfloor(p, f)) == POOL_ORDER_UNKNOWN ||
	    page_key(p, pg) <= fl)
		return false;
	m->v[i / 64] |= 1ull << (i % 64);
	m->n++;
	return true;
}

static void passed_free(passed_t *m)
{
	if (m->v != m->inl)
		free(m->v);
}

/* The pages of a prefetch for the next call that the cache cannot give a
 * chunk, once the call before it is queued (POOL_WAIT_USE): pages the plan
 * needs later than `floor` (or dead ones), whose last use may still be
 * queued - the call before's, typically - hand their chunks straight to
 * the range's pages that have none (pool_handoff), the first ones first
 * (the cache's chunks then map the next ones): what is short is the
 * range's last pages, as a call beyond the budget wants - its first
 * (stated) page must be on the device, its last ones are mapped from the
 * host (random:327752128 caching at 1/2: the one chunk handed went to
 * the last of a channel copy's ten pages, the first faulted in, a miss
 * every planned iteration).  The H2D stream waits on the device for that
 * use and for a dirty page's copy out, and the host waits for nothing.
 * Before the ways that wait: two calls in a row can need more pages than
 * the budget, and then the second one's last pages could only come once
 * the first ended, with a host wait (take_clean_fenced) or as the call's
 * own fault (the misses beside the call before, docs/pool.md).  Returns
 * the pages handed to. */
static uint32_t take_handoff(pool_t *p, struct alloc *a, uint32_t first, uint32_t last,
			     const passed_t *pass, uint32_t need, uint64_t floor)
{
	struct page *cand[EVICT_BATCH], *from[EVICT_BATCH];
	bool dead[EVICT_BATCH], copied[EVICT_BATCH];
	uint32_t nplanned, ncand, ndead = 0, n = 0, ncopy = 0, done = 0;

	ncand = evict_candidates(p, cand, EVICT_BATCH, &nplanned, floor, false);
	while (ndead < ncand && pool_page_all_dead(p, cand[ndead]))
		ndead++;
	for (uint32_t c = 0; c < ncand && c < ndead + nplanned && n < need; c++) {
		struct page *pg = cand[c];
		uint64_t key;

		/* not a slab: a block allocated in it meanwhile (the plan's
		 * next iteration makes its small tensors anew) would make the
		 * next call that uses it wait for the handoff */
		if (pg->locks || pg->state != PG_RESIDENT || (pg->flags & PF_REST) ||
		    pg->a->kind != A_LARGE || pg->a->fixed)
			continue;
		/* a dead page the next call writes: not worth a handoff */
		if (c < ndead && (key = page_key(p, pg)) != POOL_ORDER_UNKNOWN && key <= floor)
			continue;
		dead[n] = c < ndead;
		copied[n] = !dead[n] && !page_clean(p, pg);
		/* after its last use (reads too: the chunk is rewritten next) */
		if (copied[n]) {
			if (copy_out(p, pg, pg->busy))
				break;
			ncopy++;
		}
		from[n++] = pg;
	}
	if (!n)
		return 0;
	/* a copied page's busy mark becomes its copy's (which followed its
	 * last use): every later unmap or reuse of the chunk waits for it */
	if (ncopy) {
		struct mark out = pool_mark_now(p, p->tl_d2h);

		for (uint32_t i = 0; i < n; i++)
			if (copied[i])
				from[i]->busy = out;
	}
	/* the H2D stream follows each victim's busy mark, so the range's
	 * copies in go after them; a victim it cannot be made to follow is
	 * not handed off (it stays, clean if it was copied) */
	struct mark last_m = { 0 };
	uint32_t k = first;
	for (uint32_t i = 0; i < n; i++) {
		struct page *v = from[i], *to = NULL;

		if (v->busy.tl && !mark_same(v->busy, last_m)) {
			if (pool_stream_after(p, p->tl_h2d, p->ops.h2d_stream, v->busy))
				continue;
			last_m = v->busy;
		}
		for (; k <= last && !to; k++) {
			struct page *pg = &a->pages[k];

			if ((pg->state == PG_HOST || pg->state == PG_RELEASED) &&
			    !passed(pass, k - first))
				to = pg;
		}
		if (!to || pool_handoff(p, v, to, dead[i]))
			break;
		to->flags |= PF_MARK;
		done++;
		p->st.evictions++;
		p->st.evictions_planned += !dead[i];
		if (copied[i])
			p->st.bytes_evicted += page_bytes(p, v->a, v->idx);
		pool_emit(p, POOL_EV_EVICT, v->a, (uint64_t)v->idx * chunk_sz(p),
			  page_bytes(p, v->a, v->idx), copied[i] ? page_bytes(p, v->a, v->idx) : 0,
			  p->ops.d2h_stream);
	}
	return done;
}

/* Chunks for a prefetch of `need` pages of rr's allocation (those not
 * `pass`ed): first what needs neither a wait nor a copy; then, with
 * `wait`, the host waits for the frees and offloads already under way -
 * the memory the plan freed for this range (the call, soon, would wait
 * for the same copies with its own bytes still to come; here they follow
 * at once and overlap the calls before it; a range needed later does not
 * hold the host up: it is tried again after each call); then clean
 * pages, none the plan needs before `floor` (the range's own next use;
 * for the next call, 1); then, with `wait`, pages prefetched for calls
 * needed last (take_held_later); for the next call once the call before
 * it is queued, chunks handed from pages still in use to the range's
 * pages (take_handoff: those pages then need nothing from the cache); and
 * dirty pages needed later start to leave (offload_later): waited for
 * with POOL_WAIT_ALL, else for the prefetch tried again.  Lock held; the
 * waits release it (a is pinned meanwhile). */
static void prefetch_fill(pool_t *p, const struct rref *rr, const passed_t *pass, uint64_t floor,
			  uint32_t need, pool_wait_t wait)
{
	struct alloc *a = rr->a;

	a->pins++;
	while (fill_nowait(p, need, false, 0) < need && wait &&
	       (pool_freed_reclaim_one(p, true, need - p->ncache) || pool_offl_reap(p, true)))
		p->st.prefetch_waits++;
	if (p->ncache < need)
		fill_nowait(p, need, true, floor);
	if (wait && p->ncache < need)
		take_held_later(p, need - p->ncache, floor);
	if (p->cfg.handoff && wait == POOL_WAIT_USE && p->ncache < need &&
	    floor != POOL_ORDER_UNKNOWN)
		need -= take_handoff(p, a, rr->first, rr->last, pass, need - p->ncache, floor);
	if (wait == POOL_WAIT_USE && p->ncache < need && floor != POOL_ORDER_UNKNOWN &&
	    take_clean_fenced(p, need - p->ncache, floor))
		fill_nowait(p, need, false, 0);
	if (wait && p->ncache < need && floor != POOL_ORDER_UNKNOWN &&
	    offload_later(p, need - p->ncache, floor)) {
		while (fill_nowait(p, need, false, 0) < need && wait >= POOL_WAIT_ALL &&
		       pool_offl_reap(p, true))
			p->st.prefetch_waits++;
	}
	a->pins--;
}

/* A page mapped from the host for a call before the one just queued
 * (POOL_WAIT_USE), or handed off while such a call used it (its chunk
 * went to another page, handoff.c): its prefetch for the next call waits
 * on the host for a fence recorded before that call was queued (the one
 * its first try recorded, finding the page in use), with the device busy
 * meanwhile, and the page comes back to the device as an evicted one
 * would.  Left to the call, it would wait for the same use with nothing
 * queued after it (random:1997224889 per-tensor at 1/2: the second slice
 * of a convolution read a page a channel copy two calls back had written
 * from the host - a miss every planned iteration; random:147831307
 * per-tensor at 1/4: a channel slice's input, handed off to the call
 * before's, faulted back after it).  A page the call just queued uses is
 * not waited for. */
static bool use_fenced(pool_t *p, const struct page *pg, pool_wait_t wait)
{
	return wait == POOL_WAIT_USE && pool_mark_fenced(p, pg->busy);
}

pool_status_t pool_prefetch_for(pool_t *p, const pool_range_t *r, pool_wait_t wait, bool next_call)
{
	pool_span_t s;
	struct rref rr;
	pool_status_t st;
	uint32_t nfault = 0, ncopy = 0, skipped = 0, need = 0;

	pthread_mutex_lock(&p->lock);
	if ((st = range_rref(p, r, &rr, &s))) {
		pthread_mutex_unlock(&p->lock);
		return st;
	}
	struct alloc *a = rr.a;
	if (next_call && range_key(p, a, s.offset, s.bytes) == POOL_ORDER_UNKNOWN)
		wait = POOL_WAIT_NONE;   /* bytes no plan needs: not worth a wait */
	pfloor_t floor = { a, s.offset, s.bytes, 1, next_call && p->order };
	passed_t pass;
	passed_init(p, &rr, &pass);
	/* locked while chunks are found, so that finding them never takes
	 * one of the range's own pages */
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		if (pass_dead(p, &pass, &floor, k - rr.first, &a->pages[k]))
			continue;
		if (a->pages[k].state == PG_HOSTMAP)
			(void)pool_hostmap_leave(p, &a->pages[k], use_fenced(p, &a->pages[k], wait));
		else if (a->pages[k].state == PG_HANDOFF)
			(void)pool_handoff_leave(p, &a->pages[k], use_fenced(p, &a->pages[k], wait));
		lock_page(p, &a->pages[k]);
		need += !page_mapped(&a->pages[k]);
	}
	if (need)
		prefetch_fill(p, &rr, &pass, pfloor(p, &floor), need, wait);
	if (a->freed) {
		/* by another thread while this one waited: pool_free reset
		 * the pages, locks included; nothing to bring */
		pthread_mutex_unlock(&p->lock);
		passed_free(&pass);
		return POOL_EINVAL;
	}
	/* resident pages whose rest the range reaches: that comes back too */
	uint32_t nfill = 0;
	if (p->nrest)
		(void)rest_fill_rref(p, &rr, POOL_EV_PREFETCH, &nfill);
	/* map what the cache holds (adjacent pages granted in one call),
	 * then copy back the pages that hold bytes */
	struct grant_run g = { 0 };
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		struct page *pg = &a->pages[k];
		if (pg->state == PG_RESIDENT || passed(&pass, k - rr.first))
			continue;
		if (pg->state == PG_HOSTMAP || pg->state == PG_HANDOFF || !p->ncache ||
		    pool_page_map_run(p, pg, &g))
			skipped++;   /* mapped from the host, or its handoff not done:
					its call settles it */
		else
			pg->flags |= PF_MARK;
	}
	pool_run_grant(p, &g);   /* failed: its pages are unmapped again, skipped below */
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		struct page *pg = &a->pages[k];
		if (!(pg->flags & PF_MARK))
			continue;
		pg->flags &= ~PF_MARK;
		if (pg->state != PG_RESIDENT) {
			skipped++;
			continue;
		}
		uint64_t nb = page_bytes(p, a, k);
		if ((pg->flags & PF_HOST_VALID) && p->ops.copy_h2d(p->ops.ctx, page_va(p, pg), pg->host, nb)) {
			if (!pool_handoff_undo(p, pg)) {
				pool_page_unmap(p, pg);
				pg->state = PG_HOST;
			}
			skipped++;
			continue;
		}
		stat_add(&p->st.resident, chunk_sz(p));
		pg->epoch = p->epoch;
		nfault++;
		if (pg->flags & PF_HOST_VALID) {
			pg->flags |= PF_COPY;
			ncopy++;
			p->st.bytes_prefetched += nb;
		}
		pool_emit(p, POOL_EV_PREFETCH, a, (uint64_t)k * chunk_sz(p), nb,
			  (pg->flags & PF_HOST_VALID) ? nb : 0, p->ops.h2d_stream);
	}
	/* the first call that uses a copied page waits for this mark on the
	 * device; the host never does.  Its fence is recorded now: recorded
	 * when that call comes, it would also cover the copies of the
	 * prefetches for later calls issued meanwhile, and the call would
	 * wait for them (VGG-16 (256) caching `all(p)` on the h100 model at
	 * 1/2: a pooling backward waited 110 ms for a later call's 3 GB) */
	struct mark m = ncopy ? pool_mark_now(p, p->tl_h2d) : (struct mark){ 0 };
	if (ncopy) {
		pool_status_t fst;

		(void)pool_mark_fence(p, m, &fst);   /* none: a later wait records one */
	}
	for (uint32_t k = rr.first; k <= rr.last; k++) {
		struct page *pg = &a->pages[k];
		if (pg->flags & PF_COPY) {
			pg->flags &= ~PF_COPY;
			pg->busy = m;
			pg->wrote = m;
		}
		/* unlocked into the held list: not evicted before a call uses it */
		if (passed(&pass, k - rr.first))
			continue;
		if (--pg->locks == 0 && pg->state == PG_RESIDENT) {
			list_push_back(&p->heldl, pg);
			pg->flags |= PF_HELD;
		}
	}
	p->st.prefetches += nfault + nfill;
	p->st.prefetch_skipped += skipped;
	pthread_mutex_unlock(&p->lock);
	passed_free(&pass);
	return skipped ? POOL_ENOMEM : POOL_OK;
}

pool_status_t pool_prefetch(pool_t *p, const pool_range_t *r, pool_wait_t wait)
{
	return pool_prefetch_for(p, r, wait, false);
}

pool_status_t pool_census(pool_t *p, const pool_range_t *r, pool_census_t *out)
{
	pool_span_t s;
	struct rref rr;
	uint64_t floor;
	pool_status_t st;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->lock);
	if ((st = range_rref(p, r, &rr, &s))) {
		pthread_mutex_unlock(&p->lock);
		return st;
	}
	floor = range_key(p, rr.a, s.offset, s.bytes);
	for (struct page *pg = p->lru.tail; pg; pg = pg->prev) {
		uint64_t key = page_key(p, pg);

		if (pool_page_all_dead(p, pg))
			out->dead++;
		else if (key == POOL_ORDER_UNKNOWN || floor == POOL_ORDER_UNKNOWN)
			out->unknown++;
		else if (key <= floor)
			out->sooner++;
		else if (page_clean(p, pg))
			out->clean_later++;
		else
			out->dirty_later++;
	}
	for (struct page *pg = p->heldl.head; pg; pg = pg->next)
		out->held++;
	for (struct page *pg = p->offl.head; pg; pg = pg->next)
		out->offloading++;
	for (struct page *pg = p->handl.head; pg; pg = pg->next)
		out->offloading++;
	out->resident = (uint32_t)(p->st.resident.cur / chunk_sz(p));
	pthread_mutex_unlock(&p->lock);
	return POOL_OK;
}

pool_status_t pool_unhold(pool_t *p, const pool_range_t *r)
{
	pool_span_t s;
	struct rref rr;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = range_rref(p, r, &rr, &s);
	for (uint32_t k = rr.first; st == POOL_OK && k <= rr.last; k++) {
		struct page *pg = &rr.a->pages[k];
		if (pg->flags & PF_HELD) {
			list_del(&p->heldl, pg);
			pg->flags &= ~PF_HELD;
			list_push_front(&p->lru, pg);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

void pool_set_order(pool_t *p, pool_order_fn fn, void *ctx, uint32_t window)
{
	pthread_mutex_lock(&p->lock);
	p->order = fn;
	p->order_ctx = ctx;
	p->order_window = window;
	pthread_mutex_unlock(&p->lock);
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
			[PG_EVICTING] = POOL_PAGE_OFFLOADING, [PG_HOSTMAP] = POOL_PAGE_HOST_MAPPED,
			[PG_HANDOFF] = POOL_PAGE_OFFLOADING,
		};
		r = map[a->pages[page_of(p, addr - a->base)].state];
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

pool_status_t pool_fill_rests(pool_t *p, void *stream)
{
	pool_status_t st = POOL_OK;
	uint32_t n = 0;

	pthread_mutex_lock(&p->lock);
	/* a handed-off page's address maps the chunk of another page until
	 * it leaves: a write through it would land in that page's bytes */
	if (!pool_handoff_reap(p, true))
		st = POOL_EDEVICE;
	for (;;) {
		uint32_t evicting = 0;

		for (uint64_t i = 0; p->nrest && i < p->capids && !st; i++) {
			struct alloc *a = p->ids[i].a;

			if (!p->ids[i].id || p->ids[i].block != UINT32_MAX || a->kind != A_LARGE)
				continue;
			for (uint32_t k = 0; k < a->npages && !st; k++) {
				struct page *pg = &a->pages[k];

				if (!(pg->flags & PF_REST))
					continue;
				/* resident or leaving with a copy: mapped, the rest garbage */
				if ((pg->state == PG_RESIDENT || pg->state == PG_OFFLOADING) &&
				    !(st = rest_fill(p, pg, POOL_EV_FAULT_IN)))
					n++;
				else if (pg->state == PG_EVICTING)
					evicting++;
			}
		}
		if (st || !evicting)
			break;
		/* Another thread evicts such a page, waiting for its copy with
		 * the lock released.  A use could take it back before the
		 * launch runs, with the rest still on the host and garbage
		 * beside the span on the device: wait for those evictions to
		 * end (every such wait ends with a broadcast; the timeout only
		 * bounds a missed one), then look again. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		p->st.rest_waits++;
		pthread_cond_timedwait(&p->cv, &p->lock, &ts);
	}
	/* the launch also waits for the copies in still under way (a
	 * prefetch's, whose page it may read) */
	if (!st && (n || !mark_known_done((struct mark){ p->tl_h2d, p->tl_h2d->seq })))
		st = pool_stream_after(p, pool_tl(p, stream), stream,
				       n ? pool_mark_now(p, p->tl_h2d) :
					   (struct mark){ p->tl_h2d, p->tl_h2d->seq });
	p->st.misses += n;
	pthread_mutex_unlock(&p->lock);
	return st;
}
