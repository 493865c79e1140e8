/* tests/minitrain/alloc.c - the three allocation styles.
 *
 * per-tensor and network both take one cudaMalloc per tensor; they differ
 * in *when* exec.c asks (per-tensor: when a tensor is produced, freed after
 * its last use, like PYTORCH_NO_CUDA_MEMORY_CACHING=1; network: everything
 * once up front, vDNN's Torch baseline, vDNN §II-C Fig. 2).  caching is a
 * best-fit sub-allocator over large cudaMalloc segments with PyTorch's
 * block sizes: requests round up to 512 bytes; blocks up to 1 MiB come from
 * 2 MiB segments, up to 10 MiB from 20 MiB segments, larger ones get their
 * own segment rounded up to 2 MiB; free blocks are split and merged; when
 * cudaMalloc fails the wholly free segments are released and the request
 * retried once (PyTorch's empty-cache-and-retry).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define MT_ROUND 512
#define MT_SMALL_MAX MIB
#define MT_SMALL_SEG (2 * MIB)
#define MT_MID_MAX (10 * MIB)
#define MT_MID_SEG (20 * MIB)
#define MT_HASH 4096

/* ---- a pointer -> record hash, shared by the styles' bookkeeping */
typedef struct mt_blk mt_blk_t;
typedef struct mt_seg mt_seg_t;

struct mt_seg {
	char *base;
	size_t size;
	bool small;
	mt_seg_t *next;
};

struct mt_blk {
	char *ptr;
	size_t size;
	bool free, small;
	mt_seg_t *seg;
	mt_blk_t *prev, *next;     /* neighbours in the segment, address order */
	mt_blk_t *fprev, *fnext;   /* free list of its pool */
	mt_blk_t *hnext;           /* allocated-block hash chain */
};

/* What each block start last held: an address reused for a tensor of
 * another size is the case a shim's extent tracking must get right. */
typedef struct mt_last {
	char *ptr;
	size_t size;
	struct mt_last *next;
} mt_last_t;

struct mt_cache {
	mt_seg_alloc_fn seg_alloc;
	mt_seg_free_fn seg_free;
	void *ctx;
	mt_seg_t *segs;
	mt_blk_t *free_small, *free_large;
	mt_blk_t *hash[MT_HASH];
	size_t live;               /* bytes in allocated blocks */
	mt_last_t *last[MT_HASH];  /* block start -> size of its last tensor */
	mt_cache_reuse_t reuse;
};

static unsigned ptr_hash(const void *p)
{
	return (unsigned)(mt_mix((uintptr_t)p) & (MT_HASH - 1));
}

size_t mt_cache_round(size_t bytes)
{
	if (bytes == 0)
		bytes = 1;
	return (bytes + MT_ROUND - 1) / MT_ROUND * MT_ROUND;
}

size_t mt_cache_segment_size(size_t rounded)
{
	if (rounded <= MT_SMALL_MAX)
		return MT_SMALL_SEG;
	if (rounded < MT_MID_MAX)
		return MT_MID_SEG;
	return (rounded + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
}

mt_cache_t *mt_cache_new(mt_seg_alloc_fn a, mt_seg_free_fn f, void *ctx)
{
	mt_cache_t *c = calloc(1, sizeof(*c));

	if (!c)
		mt_die("host out of memory for the caching allocator");
	c->seg_alloc = a;
	c->seg_free = f;
	c->ctx = ctx;
	return c;
}

static mt_blk_t **free_list(mt_cache_t *c, bool small)
{
	return small ? &c->free_small : &c->free_large;
}

static void free_insert(mt_cache_t *c, mt_blk_t *b)
{
	mt_blk_t **l = free_list(c, b->small);

	b->free = true;
	b->fprev = NULL;
	b->fnext = *l;
	if (*l)
		(*l)->fprev = b;
	*l = b;
}

static void free_remove(mt_cache_t *c, mt_blk_t *b)
{
	if (b->fprev)
		b->fprev->fnext = b->fnext;
	else
		*free_list(c, b->small) = b->fnext;
	if (b->fnext)
		b->fnext->fprev = b->fprev;
	b->fprev = b->fnext = NULL;
	b->free = false;
}

void mt_cache_release(mt_cache_t *c)
{
	mt_seg_t **sp = &c->segs;

	while (*sp) {
		mt_seg_t *s = *sp;
		mt_blk_t *b = NULL;

		/* A wholly free segment is one free block spanning it. */
		for (mt_blk_t *f = *free_list(c, s->small); f; f = f->fnext)
			if (f->seg == s && f->size == s->size) {
				b = f;
				break;
			}
		if (!b) {
			sp = &s->next;
			continue;
		}
		free_remove(c, b);
		free(b);
		*sp = s->next;
		c->seg_free(s->base, s->size, c->ctx);
		free(s);
	}
}

/* Counts a tensor of `bytes` at `p` against what p held before. */
static void note_reuse(mt_cache_t *c, char *p, size_t bytes)
{
	mt_last_t **lp = &c->last[ptr_hash(p)];

	while (*lp && (*lp)->ptr != p)
		lp = &(*lp)->next;
	if (!*lp) {
		mt_last_t *l = malloc(sizeof(*l));

		if (!l)
			mt_die("host out of memory for the caching allocator");
		l->ptr = p;
		l->next = NULL;
		*lp = l;
	} else if (bytes > (*lp)->size) {
		c->reuse.larger++;
	} else if (bytes < (*lp)->size) {
		c->reuse.smaller++;
	} else {
		c->reuse.same++;
	}
	(*lp)->size = bytes;
}

mt_cache_reuse_t mt_cache_reuse(const mt_cache_t *c)
{
	return c->reuse;
}

void *mt_cache_alloc(mt_cache_t *c, size_t bytes, size_t *seg_request)
{
	size_t need = mt_cache_round(bytes);
	bool small = need <= MT_SMALL_MAX;
	mt_blk_t *best = NULL;

	for (mt_blk_t *f = *free_list(c, small); f; f = f->fnext)
		if (f->size >= need && (!best || f->size < best->size ||
		    (f->size == best->size && f->ptr < best->ptr)))
			best = f;
	if (!best) {
		size_t ss = mt_cache_segment_size(need);
		char *p = c->seg_alloc(ss, c->ctx);

		if (!p) {
			mt_cache_release(c);
			p = c->seg_alloc(ss, c->ctx);
		}
		if (!p) {
			if (seg_request)
				*seg_request = ss;
			return NULL;
		}
		mt_seg_t *s = calloc(1, sizeof(*s));
		best = calloc(1, sizeof(*best));
		if (!s || !best)
			mt_die("host out of memory for the caching allocator");
		s->base = p;
		s->size = ss;
		s->small = small;
		s->next = c->segs;
		c->segs = s;
		best->ptr = p;
		best->size = ss;
		best->small = small;
		best->seg = s;
		free_insert(c, best);
	}
	free_remove(c, best);
	size_t rest = best->size - need;
	if (small ? rest >= MT_ROUND : rest > MT_SMALL_MAX) {
		mt_blk_t *r = calloc(1, sizeof(*r));

		if (!r)
			mt_die("host out of memory for the caching allocator");
		r->ptr = best->ptr + need;
		r->size = rest;
		r->small = best->small;
		r->seg = best->seg;
		r->prev = best;
		r->next = best->next;
		if (best->next)
			best->next->prev = r;
		best->next = r;
		best->size = need;
		free_insert(c, r);
	}
	note_reuse(c, best->ptr, bytes);
	unsigned h = ptr_hash(best->ptr);
	c->live += best->size;
	best->hnext = c->hash[h];
	c->hash[h] = best;
	return best->ptr;
}

void mt_cache_free(mt_cache_t *c, void *p)
{
	mt_blk_t **bp = &c->hash[ptr_hash(p)];

	while (*bp && (*bp)->ptr != p)
		bp = &(*bp)->hnext;
	if (!*bp)
		mt_die("caching allocator: free of unknown pointer %p", p);
	mt_blk_t *b = *bp;
	*bp = b->hnext;
	b->hnext = NULL;
	c->live -= b->size;
	/* merge with free neighbours in the same segment */
	if (b->next && b->next->free) {
		mt_blk_t *n = b->next;

		free_remove(c, n);
		b->size += n->size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		free(n);
	}
	if (b->prev && b->prev->free) {
		mt_blk_t *pv = b->prev;

		free_remove(c, pv);
		pv->size += b->size;
		pv->next = b->next;
		if (b->next)
			b->next->prev = pv;
		free(b);
		b = pv;
	}
	free_insert(c, b);
}

size_t mt_cache_live(const mt_cache_t *c)
{
	return c->live;
}

void mt_cache_destroy(mt_cache_t *c)
{
	if (!c)
		return;
	for (int i = 0; i < MT_HASH; i++)
		while (c->hash[i]) {
			mt_blk_t *b = c->hash[i];

			c->hash[i] = b->hnext;
			b->hnext = NULL;
			free_insert(c, b);
		}
	/* every block is free now; merge them back and release */
	for (mt_seg_t *s = c->segs; s; s = s->next) {
		for (mt_blk_t *f = *free_list(c, s->small), *nx; f; f = nx) {
			nx = f->fnext;
			if (f->seg != s)
				continue;
			free_remove(c, f);
			free(f);
		}
	}
	while (c->segs) {
		mt_seg_t *s = c->segs;

		c->segs = s->next;
		c->seg_free(s->base, s->size, c->ctx);
		free(s);
	}
	for (int i = 0; i < MT_HASH; i++)
		while (c->last[i]) {
			mt_last_t *l = c->last[i];

			c->last[i] = l->next;
			free(l);
		}
	free(c);
}

/* ---- the process-wide device allocator used by exec.c */
typedef struct mt_rec {
	void *p;
	size_t size;
	struct mt_rec *next;
} mt_rec_t;

static mt_alloc_style_t g_style;
static mt_cache_t *g_cache;
static mt_rec_t *g_recs[MT_HASH];
static size_t g_cur, g_peak;

static void *dev_alloc(size_t bytes, void *ctx)
{
	void *p = NULL;
	cudaError_t e;

	(void)ctx;
	e = cudaMalloc(&p, bytes);
	if (e == cudaErrorMemoryAllocation) {
		cudaGetLastError();   /* clear the sticky-free error state */
		return NULL;
	}
	if (e != cudaSuccess)
		mt_fail_cuda(e, "cudaMalloc", __FILE__, __LINE__);
	mt_rec_t *r = malloc(sizeof(*r));
	if (!r)
		mt_die("host out of memory");
	r->p = p;
	r->size = bytes;
	r->next = g_recs[ptr_hash(p)];
	g_recs[ptr_hash(p)] = r;
	g_cur += bytes;
	if (g_cur > g_peak)
		g_peak = g_cur;
	return p;
}

static void dev_free(void *p, size_t bytes, void *ctx)
{
	mt_rec_t **rp = &g_recs[ptr_hash(p)];

	(void)bytes;
	(void)ctx;
	while (*rp && (*rp)->p != p)
		rp = &(*rp)->next;
	if (!*rp)
		mt_die("cudaFree of a pointer minitrain did not allocate: %p", p);
	mt_rec_t *r = *rp;
	*rp = r->next;
	g_cur -= r->size;
	free(r);
	CUDA_CHECK(cudaFree(p));
}

void mt_alloc_init(mt_alloc_style_t style)
{
	g_style = style;
	if (style == MT_ALLOC_CACHING)
		g_cache = mt_cache_new(dev_alloc, dev_free, NULL);
}

void *mt_malloc(size_t bytes)
{
	void *p;
	size_t seg = 0;

	if (bytes == 0)
		bytes = 1;
	if (g_style == MT_ALLOC_CACHING) {
		p = mt_cache_alloc(g_cache, bytes, &seg);
		if (!p)
			mt_oom("cudaMalloc", seg);
		return p;
	}
	p = dev_alloc(bytes, NULL);
	if (!p)
		mt_oom("cudaMalloc", bytes);
	return p;
}

void *mt_try_malloc(size_t bytes)
{
	size_t seg = 0;

	if (bytes == 0)
		bytes = 1;
	if (g_style == MT_ALLOC_CACHING)
		return mt_cache_alloc(g_cache, bytes, &seg);
	return dev_alloc(bytes, NULL);
}

void mt_free(void *p)
{
	if (!p)
		return;
	if (g_style == MT_ALLOC_CACHING)
		mt_cache_free(g_cache, p);
	else
		dev_free(p, 0, NULL);
}

void mt_alloc_empty_cache(void)
{
	if (g_cache)
		mt_cache_release(g_cache);
}

size_t mt_alloc_current(void)
{
	return g_cur;
}

size_t mt_alloc_live(void)
{
	return g_cache ? mt_cache_live(g_cache) : g_cur;
}

size_t mt_alloc_peak(void)
{
	return g_peak;
}

mt_cache_reuse_t mt_alloc_reuse(void)
{
	mt_cache_reuse_t none = { 0, 0, 0 };

	return g_cache ? mt_cache_reuse(g_cache) : none;
}
