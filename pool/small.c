/* pool/small.c - the small-size sub-allocator: allocations below
 * config.small_threshold share one-chunk slabs.
 *
 * Every size is packed into the same slabs (issue 10: with a slab per size
 * class, fourteen classes took 16 of an 18 MiB budget for 855 KB of
 * allocations).  A slab is cut in units of 256 bytes, cudaMalloc's
 * alignment, so rounding wastes less than 256 bytes per allocation; its
 * free units are a sorted, coalescing extent list (the same first fit as
 * the virtual range, SuperNeurons §3.2.1), and slabs are tried oldest
 * first - mapped ones before evicted ones - so allocations gather in the
 * oldest slabs and the newest empty out.
 *
 *   slab (one chunk):  [a:3][b:1][ free:4 ][c:12][ free:... ]   units
 *   owner[unit]:        1 1 1 2  0 0 0 0   3 ...              block + 1
 *
 * A slab is a one-page allocation, and its page is a page like any other:
 * on the LRU while resident and unlocked, locked by the calls that use any
 * block in it, evicted whole (copied if dirty) when it is the coldest, and
 * faulted back whole when a block in it is used again.  Its waste on the
 * device - the chunk minus the bytes its live blocks requested, while it is
 * mapped - is the stats' small slack.
 *
 * A freed block keeps its units until its free fence completes; an empty
 * slab is unmapped (or its host copy dropped) when memory is needed.
 */
#include "pool/pool_internal.h"

static bool slab_mapped(const struct alloc *s)
{
	return page_has_chunk(&s->pages[0]);
}

static void slab_max_update(struct alloc *s)
{
	uint32_t m = 0;
	for (uint32_t i = 0; i < s->nfext; i++)
		if (s->fext[i].len > m)
			m = (uint32_t)s->fext[i].len;
	s->max_ext = m;
}

/* The requested bytes of a slab change: the small slack follows while it
 * is mapped. */
static void slab_req(pool_t *p, struct alloc *s, int64_t delta)
{
	uint64_t before = slab_slack(s);
	s->req = (uint64_t)((int64_t)s->req + delta);
	uint64_t after = slab_slack(s);
	if (!slab_mapped(s))
		return;
	if (after > before)
		slack_add(&p->st.small_slack, after - before);
	else
		stat_sub(&p->st.small_slack, before - after);
}

struct sblock *pool_slab_block(const struct alloc *s, uintptr_t ptr)
{
	uint64_t off = ptr - s->base;
	uint64_t u = off / SMALL_UNIT;
	if (u >= s->nunits || !s->owner[u])
		return NULL;
	struct sblock *b = &s->blocks[s->owner[u] - 1];
	if (!b->id || off - (uint64_t)b->start * SMALL_UNIT >= b->size)
		return NULL;
	return b;
}

static void slab_unlink(pool_t *p, struct alloc *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		p->slabs_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		p->slabs_tail = s->prev;
	s->prev = s->next = NULL;
}

/* Drops a slab whose blocks were all freed: unmapped, or its host copy
 * released, its range back to the virtual range. */
void pool_slab_reclaim(pool_t *p, struct alloc *s)
{
	struct page *pg = &s->pages[0];
	slab_unlink(p, s);
	page_unlist(p, pg);
	pool_page_forget(p, pg);
	if (pg->state == PG_OFFLOADING || pg->state == PG_EVICTING)
		pg->state = PG_RESIDENT;   /* teardown only: the callers wait first */
	if (pg->state == PG_RESIDENT) {
		pool_page_unmap(p, pg);
		stat_sub(&p->st.resident, chunk_sz(p));
	}
	if (pg->host) {
		pool_slot_release(p, pg->host, pg->busy);
		pg->host = NULL;
	}
	pool_vmap_set(p, s, 1, NULL);
	pool_va_give(p, page_of(p, s->base - p->base), 1);
	pool_alloc_destroy(s);
}

bool pool_slab_reclaim_empty(pool_t *p)
{
	for (struct alloc *s = p->slabs_head; s; s = s->next) {
		struct page *pg = &s->pages[0];
		if (s->units_used || s->pins || pg->locks || pg->state == PG_OFFLOADING ||
		    pg->state == PG_EVICTING)
			continue;
		if (pg->state == PG_RESIDENT && !pool_mark_done(p, pg->busy))
			continue;   /* a copy or a use may still touch it */
		pool_slab_reclaim(p, s);
		return true;
	}
	return false;
}

void pool_small_reap(pool_t *p)
{
	struct small_pending **pp = &p->spend_head, *last = NULL;
	while (*pp) {
		struct small_pending *sp = *pp;
		if (!pool_fence_done(p, sp->f) || !pool_mark_done(p, sp->m)) {
			last = sp;
			pp = &sp->next;
			continue;
		}
		*pp = sp->next;
		struct alloc *s = sp->slab;
		struct sblock *b = &s->blocks[sp->idx];
		/* a failed give loses the units until the slab is dropped:
		 * never a double use */
		if (pool_ext_give(&s->fext, &s->nfext, &s->capfext, b->start, b->units) == 0)
			for (uint32_t u = b->start; u < b->start + b->units; u++)
				s->owner[u] = 0;
		s->units_used -= b->units;
		b->next_free = s->free_block;
		s->free_block = sp->idx;
		slab_max_update(s);
		pool_fence_put(p, sp->f);
		free(sp);
	}
	p->spend_tail = last;
}

static pool_status_t slab_new(pool_t *p, struct alloc **out)
{
	uint64_t cs = chunk_sz(p), start;
	pool_status_t st;
	struct alloc *s = calloc(1, sizeof(*s));
	uint32_t nu = (uint32_t)(cs / SMALL_UNIT);
	if (!s || !(s->pages = calloc(1, sizeof(struct page))) ||
	    !(s->owner = calloc(nu, sizeof(uint32_t))) ||
	    !(s->fext = malloc(4 * sizeof(struct vext)))) {
		if (s)
			pool_alloc_destroy(s);
		return POOL_ENOMEM;
	}
	s->capfext = 4;
	/* the range first: both may wait with the lock released, and the
	 * chunk must be taken from the cache right after it is there */
	if ((st = pool_va_alloc(p, 1, &start))) {
		pool_alloc_destroy(s);
		return st;
	}
	if ((st = pool_ensure_chunks(p, 1))) {
		pool_va_give(p, start, 1);
		pool_alloc_destroy(s);
		return st;
	}
	s->kind = A_SLAB;
	s->base = p->base + start * cs;
	s->size = cs;
	s->npages = 1;
	s->nunits = nu;
	s->fext[0].start = 0;
	s->fext[0].len = nu;
	s->nfext = 1;
	s->max_ext = nu;
	s->free_block = UINT32_MAX;
	struct page *pg = &s->pages[0];
	pg->a = s;
	pg->state = PG_RELEASED;
	if ((st = pool_page_map(p, pg))) {
		pool_va_give(p, start, 1);
		pool_alloc_destroy(s);
		return st;
	}
	pg->epoch = p->epoch;
	stat_add(&p->st.resident, cs);
	pool_vmap_set(p, s, 1, s);
	list_push_front(&p->lru, pg);
	s->prev = p->slabs_tail;
	if (p->slabs_tail)
		p->slabs_tail->next = s;
	else
		p->slabs_head = s;
	p->slabs_tail = s;
	*out = s;
	return POOL_OK;
}

/* The oldest slab with `units` free in one extent: mapped slabs first
 * (no fault-in needed), then evicted ones (their page comes back at the
 * first use, as any page). */
static struct alloc *slab_find(pool_t *p, uint32_t units)
{
	for (int mapped = 1; mapped >= 0; mapped--)
		for (struct alloc *s = p->slabs_head; s; s = s->next)
			if (s->max_ext >= units && slab_mapped(s) == mapped)
				return s;
	return NULL;
}

pool_status_t pool_small_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
{
	uint32_t units = (uint32_t)((bytes + SMALL_UNIT - 1) / SMALL_UNIT);
	struct alloc *s = slab_find(p, units);
	pool_status_t st;

	if (!s && p->spend_head) {
		pool_small_reap(p);
		s = slab_find(p, units);
	}
	if (!s && (st = slab_new(p, &s)))
		return st;
	uint32_t bi = s->free_block;
	if (bi != UINT32_MAX) {
		s->free_block = s->blocks[bi].next_free;
	} else {
		if (pool_grow((void **)&s->blocks, &s->capblocks, s->nblocks + 1, sizeof(struct sblock)))
			return POOL_ENOMEM;
		bi = s->nblocks++;
	}
	uint64_t start;
	(void)pool_ext_take(s->fext, &s->nfext, units, &start);   /* max_ext >= units */
	slab_max_update(s);
	struct sblock *b = &s->blocks[bi];
	b->id = ++p->next_id;
	b->size = (uint32_t)bytes;
	b->start = (uint32_t)start;
	b->units = units;
	for (uint32_t u = b->start; u < b->start + units; u++)
		s->owner[u] = bi + 1;
	s->units_used += units;
	slab_req(p, s, (int64_t)bytes);
	*addr = s->base + (uintptr_t)start * SMALL_UNIT;
	*id = b->id;
	(void)pool_id_put(p, b->id, s, bi);
	if (p->st.small_slack.cur > p->st.small_slack.peak)
		p->st.small_slack.peak = p->st.small_slack.cur;
	p->st.small_allocs++;
	stat_add(&p->st.reserved, (uint64_t)units * SMALL_UNIT);
	return POOL_OK;
}

pool_status_t pool_small_free(pool_t *p, struct alloc *s, uintptr_t addr, void *stream, bool all)
{
	uint64_t off = addr - s->base;
	struct sblock *b = pool_slab_block(s, addr);
	if (!b || off != (uint64_t)b->start * SMALL_UNIT)
		return POOL_EINVAL;
	pool_status_t st;
	struct small_pending *sp = malloc(sizeof(*sp));
	if (!sp)
		return POOL_ENOMEM;
	sp->f = NULL;
	sp->m = (struct mark){ 0 };
	if (!all)
		sp->m = pool_mark_now(p, pool_tl(p, stream));
	else if (!(sp->f = pool_fence_new(p, stream, true, &st))) {
		free(sp);
		return st;
	}
	sp->slab = s;
	sp->idx = (uint32_t)(b - s->blocks);
	sp->next = NULL;
	if (p->spend_tail)
		p->spend_tail->next = sp;
	else
		p->spend_head = sp;
	p->spend_tail = sp;
	struct alloc tmp = { .base = addr, .id = b->id };
	stat_sub(&p->st.requested, b->size);
	stat_sub(&p->st.reserved, (uint64_t)b->units * SMALL_UNIT);
	slab_req(p, s, -(int64_t)b->size);
	pool_emit(p, POOL_EV_FREE, &tmp, 0, b->size, 0, stream);
	pool_id_del(p, b->id);
	b->id = 0;
	return POOL_OK;
}
