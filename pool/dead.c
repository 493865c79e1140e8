/* pool/dead.c - liveness in the pool: which bytes of each page are dead,
 * dropping pages whose every byte is, and telling a read of dropped bytes.
 *
 * The policy's liveness (SuperNeurons §3.2) says when a range is dead: not
 * read again before it is rewritten.  Under a caching allocator one page
 * holds several tensors, so the pool keeps, per page, the set of dead
 * bytes (sorted disjoint intervals, made only when a range is declared
 * dead) and drops the page - no copy, its chunk back to the cache or its
 * host copy released - only when the set covers every byte of the page
 * that belongs to the allocation:
 *
 *   page:   [ t1 dead ][ t2 live ][ t3 dead ]   kept (t2)
 *           [ t1 dead ][ t2 dead ][ t3 dead ]   droppable
 *
 * A write to dead bytes makes them live again (pool_release); a write vmem
 * did not see (pool_note_unseen_write) may have, so a page is dropped only
 * if none came since its bytes were declared dead.  A dropped
 * page keeps its dead set as the set of bytes that are gone: a call that
 * may read any of them before a write covered them is refused
 * (POOL_ELOST), never computed on.  Data is never silently lost: at worst
 * a page whose bytes were all declared dead keeps them (a lazy drop that
 * never came), or a plan that was wrong fails loudly.
 */
#include "pool/pool_internal.h"

#include <limits.h>

static uint64_t dead_bytes(const struct deadset *d)
{
	uint64_t n = 0;
	for (uint32_t i = 0; d && i < d->n; i++)
		n += d->iv[i].hi - d->iv[i].lo;
	return n;
}

/* The dead set covers every byte of the page that belongs to the
 * allocation (the counters' notion). */
static bool covers(const pool_t *p, const struct page *pg)
{
	const struct deadset *d = pg->dead;
	return d && d->n == 1 && d->iv[0].lo == 0 &&
	       d->iv[0].hi >= page_bytes(p, pg->a, pg->idx);
}

/* Droppable: covered, and no write vmem did not see came since the bytes
 * were declared dead (such a write may have made them live: the policy
 * cannot know, so the pool keeps them). */
bool pool_page_all_dead(const pool_t *p, const struct page *pg)
{
	return covers(p, pg) && pg->dead->epoch == p->epoch;
}

bool pool_page_dead_beside(const pool_t *p, const struct page *pg, uint64_t lo, uint64_t hi)
{
	const struct deadset *d = pg->dead;
	uint64_t at = 0, end = page_bytes(p, pg->a, pg->idx);

	if (!d || d->epoch != p->epoch)
		return false;
	/* walk [0, end) over the dead intervals and [lo, hi), all sorted */
	for (uint32_t i = 0; at < end; ) {
		if (lo < hi && lo <= at && at < hi) {
			at = hi;
			continue;
		}
		while (i < d->n && d->iv[i].hi <= at)
			i++;
		if (i == d->n || d->iv[i].lo > at)
			return false;
		at = d->iv[i].hi;
	}
	return true;
}

bool pool_page_lost(const struct page *pg, uint64_t lo, uint64_t hi)
{
	const struct deadset *d = pg->dead;
	if (!(pg->flags & PF_DROPPED) || !d)
		return false;
	for (uint32_t i = 0; i < d->n; i++)
		if (d->iv[i].lo < hi && lo < d->iv[i].hi)
			return true;
	return false;
}

/* Keeps the two counters that let the hot path skip all this. */
static void dead_account(pool_t *p, const struct page *pg, bool was_full, bool was_dropped)
{
	bool full = covers(p, pg) && !(pg->flags & PF_DROPPED);
	bool dropped = pg->flags & PF_DROPPED;
	if (was_full != full) {
		if (full)
			p->ndead_full++;
		else
			p->ndead_full--;
	}
	if (was_dropped != dropped) {
		if (dropped)
			p->ndropped++;
		else
			p->ndropped--;
	}
}

static bool page_full(const pool_t *p, const struct page *pg)
{
	return covers(p, pg) && !(pg->flags & PF_DROPPED);
}

/* Adds [lo, hi) to the page's dead set.  -1 when the host has no memory
 * for it (the bytes then stay live: safe). */
static int dead_add(const pool_t *p, struct page *pg, uint32_t lo, uint32_t hi)
{
	struct deadset *d = pg->dead;
	if (!d || d->n == d->cap) {
		uint32_t cap = d ? d->cap * 2 : 4;
		struct deadset *n = realloc(d, sizeof(*d) + (size_t)cap * sizeof(d->iv[0]));
		if (!n)
			return -1;
		if (!d)
			n->n = 0;
		n->cap = cap;
		pg->dead = d = n;
	}
	uint32_t i = 0;
	while (i < d->n && d->iv[i].hi < lo)
		i++;
	/* merge every interval that touches [lo, hi) */
	uint32_t j = i;
	while (j < d->n && d->iv[j].lo <= hi) {
		if (d->iv[j].lo < lo)
			lo = d->iv[j].lo;
		if (d->iv[j].hi > hi)
			hi = d->iv[j].hi;
		j++;
	}
	memmove(&d->iv[i + 1], &d->iv[j], (d->n - j) * sizeof(d->iv[0]));
	d->n = d->n - (j - i) + 1;
	d->iv[i].lo = lo;
	d->iv[i].hi = hi;
	d->epoch = p->epoch;
	return 0;
}

/* Removes [lo, hi).  When splitting an interval needs memory the host does
 * not have, the whole interval is made live instead, which is safe. */
static void dead_sub(struct page *pg, uint32_t lo, uint32_t hi)
{
	struct deadset *d = pg->dead;
	if (!d)
		return;
	for (uint32_t i = 0; i < d->n;) {
		uint32_t a = d->iv[i].lo, b = d->iv[i].hi;
		if (b <= lo || hi <= a) {
			i++;
			continue;
		}
		if (a < lo && hi < b) {
			/* split */
			if (d->n == d->cap) {
				struct deadset *n = realloc(d, sizeof(*d) + (size_t)d->cap * 2 * sizeof(d->iv[0]));
				if (!n) {
					memmove(&d->iv[i], &d->iv[i + 1], (d->n - i - 1) * sizeof(d->iv[0]));
					d->n--;
					continue;
				}
				n->cap *= 2;
				pg->dead = d = n;
			}
			memmove(&d->iv[i + 2], &d->iv[i + 1], (d->n - i - 1) * sizeof(d->iv[0]));
			d->n++;
			d->iv[i].hi = lo;
			d->iv[i + 1].lo = hi;
			d->iv[i + 1].hi = b;
			return;
		}
		if (a < lo) {
			d->iv[i].hi = lo;
			i++;
		} else if (hi < b) {
			d->iv[i].lo = hi;
			i++;
		} else {
			memmove(&d->iv[i], &d->iv[i + 1], (d->n - i - 1) * sizeof(d->iv[0]));
			d->n--;
		}
	}
	if (!d->n) {
		free(d);
		pg->dead = NULL;
	}
}

void pool_page_written(pool_t *p, struct page *pg, uint64_t lo, uint64_t hi)
{
	if (!pg->dead)
		return;
	bool was_full = page_full(p, pg), was_dropped = pg->flags & PF_DROPPED;
	dead_sub(pg, (uint32_t)lo, (uint32_t)hi);
	if (!pg->dead)
		pg->flags &= ~PF_DROPPED;   /* every dropped byte rewritten */
	dead_account(p, pg, was_full, was_dropped);
}

void pool_page_dropped(pool_t *p, struct page *pg)
{
	bool was_full = page_full(p, pg), was_dropped = pg->flags & PF_DROPPED;
	p->st.pages_dropped++;
	p->st.bytes_dropped += dead_bytes(pg->dead);
	pool_emit(p, POOL_EV_DROP, pg->a, (uint64_t)pg->idx * chunk_sz(p),
		  page_bytes(p, pg->a, pg->idx), 0, NULL);
	page_rest_forget(p, pg);
	pg->flags |= PF_DROPPED;
	pg->flags &= ~(PF_WRITTEN | PF_HOST_VALID | PF_DROP);
	dead_account(p, pg, was_full, was_dropped);
}

void pool_page_forget(pool_t *p, struct page *pg)
{
	bool was_full = page_full(p, pg), was_dropped = pg->flags & PF_DROPPED;
	free(pg->dead);
	pg->dead = NULL;
	pg->flags &= ~(PF_DROPPED | PF_DROP);
	dead_account(p, pg, was_full, was_dropped);
}

/* ----------------------------------------------------------- the ranges */

/* The pages of a range: the allocation, the page span and, per page, the
 * bytes of the range relative to the page. */
typedef struct {
	struct alloc *a;
	uint64_t off, end;      /* in the allocation's pages' coordinates */
	uint32_t first, last;
} prange_t;

static pool_status_t range_pages(pool_t *p, const pool_range_t *r, prange_t *out)
{
	const struct idslot *s = pool_id_get(p, r->alloc_id);
	if (!s)
		return POOL_EINVAL;
	struct alloc *a = s->a;
	uint64_t base = 0, size = a->size;
	if (s->block != UINT32_MAX) {
		/* a small allocation: its bytes inside the slab's one page */
		const struct sblock *b = &a->blocks[s->block];
		base = (uint64_t)b->start * SMALL_UNIT;
		size = b->size;
	}
	if (r->offset >= size)
		return POOL_EINVAL;
	uint64_t n = r->bytes && r->bytes < size - r->offset ? r->bytes : size - r->offset;
	out->a = a;
	out->off = base + r->offset;
	out->end = out->off + n;
	out->first = (uint32_t)page_of(p, out->off);
	out->last = (uint32_t)page_of(p, out->end - 1);
	return POOL_OK;
}

static void page_part(const pool_t *p, const prange_t *pr, uint32_t k, uint32_t *lo, uint32_t *hi)
{
	uint64_t ps = (uint64_t)k * chunk_sz(p), pe = ps + chunk_sz(p);
	*lo = (uint32_t)((pr->off > ps ? pr->off : ps) - ps);
	*hi = (uint32_t)((pr->end < pe ? pr->end : pe) - ps);
}

void pool_page_drop_later(pool_t *p, struct page *pg)
{
	page_unlist(p, pg);
	pg->state = PG_OFFLOADING;
	pg->flags |= PF_DROP;
	list_push_back(&p->offl, pg);
}

/* A whole-dead page is dropped now: a host copy at once, a resident page
 * after its last use (the offloading list, finished by pool_poll). */
static void drop_now(pool_t *p, struct page *pg)
{
	switch (pg->state) {
	case PG_HOST:
		if (pg->host) {
			pool_slot_release(p, pg->host, pg->busy);
			pg->host = NULL;
		}
		pg->state = PG_RELEASED;
		pool_page_dropped(p, pg);
		break;
	case PG_RELEASED:
		pool_page_dropped(p, pg);
		break;
	case PG_RESIDENT:
		if (pg->locks)
			break;   /* in use by a call: dropped lazily */
		pool_page_drop_later(p, pg);
		break;
	case PG_OFFLOADING:
		pg->flags |= PF_DROP;   /* its copy is wasted: drop it when done */
		break;
	default:
		break;   /* evicting: the eviction finishes first */
	}
}

pool_status_t pool_discard(pool_t *p, const pool_range_t *r, bool eager)
{
	prange_t pr;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = range_pages(p, r, &pr);
	if (st == POOL_OK) {
		p->st.discards++;
		for (uint32_t k = pr.first; k <= pr.last; k++) {
			struct page *pg = &pr.a->pages[k];
			uint32_t lo, hi;
			bool was_full = page_full(p, pg), was_dropped = pg->flags & PF_DROPPED;
			page_part(p, &pr, k, &lo, &hi);
			if (pr.a->kind == A_LARGE && hi >= page_bytes(p, pr.a, k))
				hi = (uint32_t)chunk_sz(p);   /* the tail past the allocation is dead too */
			if (dead_add(p, pg, lo, hi))
				continue;
			dead_account(p, pg, was_full, was_dropped);
			if (eager && page_full(p, pg) && pool_page_all_dead(p, pg))
				drop_now(p, pg);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

pool_status_t pool_undead(pool_t *p, const pool_range_t *r)
{
	prange_t pr;
	bool lost = false;
	pthread_mutex_lock(&p->lock);
	pool_status_t st = range_pages(p, r, &pr);
	for (uint32_t k = pr.first; st == POOL_OK && k <= pr.last; k++) {
		struct page *pg = &pr.a->pages[k];
		uint32_t lo, hi;
		page_part(p, &pr, k, &lo, &hi);
		if (pool_page_lost(pg, lo, hi)) {
			lost = true;   /* gone: they stay marked, a read of them still fails */
			continue;
		}
		if (pg->dead) {
			bool was_full = page_full(p, pg), was_dropped = pg->flags & PF_DROPPED;
			dead_sub(pg, lo, hi);
			if (pg->state == PG_OFFLOADING && (pg->flags & PF_DROP) && !pool_page_all_dead(p, pg)) {
				/* an eager drop not finished: cancel it */
				pg->flags &= ~PF_DROP;
				list_del(&p->offl, pg);
				pg->state = PG_RESIDENT;
				list_push_front(&p->lru, pg);
			}
			dead_account(p, pg, was_full, was_dropped);
		}
	}
	if (lost) {
		p->st.lost_reads++;
		st = POOL_ELOST;
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}
