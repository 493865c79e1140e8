/* pool/small.c - the small-size sub-allocator: allocations below
 * config.small_threshold share one-chunk slabs per size class, and are
 * never offloaded (pool.h).  A freed block is reused once its free fence
 * completed; an empty slab is unmapped when memory is needed.
 */
#include "pool/pool_internal.h"

void pool_small_init(pool_t *p)
{
	/* Size classes: multiples of 256 bytes (cudaMalloc's alignment), four
	 * per doubling above 1 KiB so rounding wastes at most 25%; the last
	 * one covers every size below the threshold. */
	uint64_t top = (p->cfg.small_threshold + 255) & ~(uint64_t)255;
	for (uint64_t sz = 256; p->cfg.small_threshold && p->ncls < NCLASS_MAX;) {
		p->cls_size[p->ncls++] = (uint32_t)(sz < top ? sz : top);
		if (sz >= top)
			break;
		uint64_t pw = 1;
		while (pw * 2 <= sz)
			pw *= 2;
		sz += pw / 4 > 256 ? pw / 4 : 256;
	}
}

bool pool_slab_reclaim_empty(pool_t *p)
{
	for (uint32_t c = 0; c < p->ncls; c++)
		for (struct alloc *s = p->cls_slabs[c]; s; s = s->next)
			if (s->nfree == s->nblocks) {
				pool_slab_reclaim(p, s);
				return true;
			}
	return false;
}

static int class_of(const pool_t *p, uint64_t bytes)
{
	for (uint32_t c = 0; c < p->ncls; c++)
		if (bytes <= p->cls_size[c])
			return (int)c;
	return -1;
}

void pool_slab_reclaim(pool_t *p, struct alloc *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		p->cls_slabs[s->cls] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	p->ops.unmap(p->ops.ctx, s->base, chunk_sz(p));
	p->st.unmaps++;
	pool_cache_push(p, s->chunk);
	stat_sub(&p->st.resident, chunk_sz(p));
	pool_vmap_set(p, s, 1, NULL);
	pool_va_give(p, (s->base - p->base) / chunk_sz(p), 1);
	pool_alloc_destroy(s);
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
		sp->slab->bitmap[sp->idx / 64] &= ~(1ull << (sp->idx % 64));
		sp->slab->nfree++;
		pool_fence_put(p, sp->f);
		free(sp);
	}
	p->spend_tail = last;
}

static pool_status_t slab_new(pool_t *p, uint32_t c, struct alloc **out)
{
	uint64_t cs = chunk_sz(p), start;
	pool_status_t st;
	struct alloc *s = calloc(1, sizeof(*s));
	uint32_t nb = (uint32_t)(cs / p->cls_size[c]);
	if (!s || !(s->bitmap = calloc((nb + 63) / 64, 8)) ||
	    !(s->blocks = calloc(nb, sizeof(struct sblock)))) {
		if (s)
			pool_alloc_destroy(s);
		return POOL_ENOMEM;
	}
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
	s->npages = 1;
	s->cls = c;
	s->nblocks = s->nfree = nb;
	s->chunk = p->cache[--p->ncache];
	int rc = p->ops.map(p->ops.ctx, s->base, cs, s->chunk);
	p->st.maps++;
	if (rc) {
		pool_cache_push(p, s->chunk);
		pool_va_give(p, start, 1);
		pool_alloc_destroy(s);
		return dev_status(rc);
	}
	stat_add(&p->st.resident, cs);
	pool_vmap_set(p, s, 1, s);
	s->next = p->cls_slabs[c];
	if (s->next)
		s->next->prev = s;
	p->cls_slabs[c] = s;
	*out = s;
	return POOL_OK;
}

pool_status_t pool_small_malloc(pool_t *p, uint64_t bytes, uintptr_t *addr, uint64_t *id)
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
			pool_small_reap(p);
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

pool_status_t pool_small_free(pool_t *p, struct alloc *s, uintptr_t addr, void *stream, bool all)
{
	uint64_t off = addr - s->base, csz = p->cls_size[s->cls];
	uint32_t i = (uint32_t)(off / csz);
	if (off % csz || i >= s->nblocks || !s->blocks[i].id)
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
	pool_emit(p, POOL_EV_FREE, &tmp, 0, s->blocks[i].size, 0, stream);
	s->blocks[i].id = 0;
	return POOL_OK;
}
