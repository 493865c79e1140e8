/* policy/history.c - the last significant events, in two rings.
 *
 * Events and their ranges are copied into power-of-two rings addressed by
 * absolute positions, so a pass can say "the event one period before this
 * one" as pos - p.  The rings start small and double up to their limits;
 * past them the oldest events are dropped (their ranges with them).
 * Nothing here is a pass: it is the input every pass reads.
 *
 * The weak signature (policy_event_hash) is what says "the same call"
 * across iterations (a launch's ranges without their bytes: a scanned
 * argument's extent is the rest of its allocation, not the call's).  It leaves out where the memory is -- allocation id
 * and offset -- because a per-tensor allocator hands out new allocations
 * every iteration, double buffering alternates two, and a caching allocator
 * moves small blocks; policy_range_ident judges those differences
 * separately (period.c counts them, graph.c classifies allocations by them).
 */
#include "policy/program.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void policy_printf(policy_print_fn out, void *ctx, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!out)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	out(ctx, buf);
}

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t c = 1;

	while (c < n && c < ((uint64_t)1 << 62))
		c <<= 1;
	return c;
}

int policy_history_init(policy_history_t *h, uint64_t max_events, uint64_t max_ranges)
{
	memset(h, 0, sizeof(*h));
	h->max_cap = pow2_at_least(max_events < 16 ? 16 : max_events);
	h->max_rcap = pow2_at_least(max_ranges < 64 ? 64 : max_ranges);
	h->cap = h->max_cap < 1024 ? h->max_cap : 1024;
	h->rcap = h->max_rcap < 4096 ? h->max_rcap : 4096;
	h->ev = calloc(h->cap, sizeof(*h->ev));
	h->rg = calloc(h->rcap, sizeof(*h->rg));
	if (!h->ev || !h->rg) {
		policy_history_free(h);
		return -1;
	}
	return 0;
}

void policy_history_free(policy_history_t *h)
{
	free(h->ev);
	free(h->rg);
	free(h->frees);
	memset(h, 0, sizeof(*h));
}

int policy_history_freed(policy_history_t *h, uint64_t alloc_id)
{
	if (h->capfrees - h->nfrees <= h->capfrees / 4) {
		/* three quarters full: prune the frees of events the ring
		 * dropped first (a long run frees millions of tensors) */
		size_t w = 0;

		for (size_t i = 0; i < h->nfrees; i++)
			if (h->frees[i].pos >= h->head)
				h->frees[w++] = h->frees[i];
		h->nfrees = w;
		/* still over half full: grow, so that the next prune is at
		 * least a quarter of the room away (amortised O(1) a free) */
		if (h->nfrees > h->capfrees / 2 || h->nfrees == h->capfrees) {
			size_t cap = h->capfrees ? 2 * h->capfrees : 256;
			policy_hfree_t *v = realloc(h->frees, cap * sizeof(*v));

			if (v) {
				h->frees = v;
				h->capfrees = cap;
			} else if (h->nfrees == h->capfrees) {
				return -1;
			}
		}
	}
	h->frees[h->nfrees++] = (policy_hfree_t){ alloc_id, h->tail };
	return 0;
}

/* Re-lays a ring of `n` held entries [from, to) into a new capacity. */
static void *regrow(void *old, uint64_t oldcap, uint64_t newcap, size_t size, uint64_t from,
		    uint64_t to)
{
	unsigned char *nb = calloc(newcap, size);

	if (!nb)
		return NULL;
	for (uint64_t p = from; p < to; p++)
		memcpy(nb + (p & (newcap - 1)) * size, (unsigned char *)old + (p & (oldcap - 1)) * size,
		       size);
	free(old);
	return nb;
}

static void drop_oldest(policy_history_t *h)
{
	if (h->head < h->tail) {
		policy_hev_t *e = &h->ev[h->head & (h->cap - 1)];

		h->rhead = e->range_pos + e->nranges;
		h->head++;
	}
	if (h->head == h->tail)
		h->rhead = h->rtail;
}

uint64_t policy_history_push(policy_history_t *h, const vmem_event_t *ev, uint32_t flags,
			     uint64_t watermark)
{
	uint64_t nr = ev->nranges > 0 ? (uint64_t)ev->nranges : 0;
	policy_hev_t *e;

	if (nr > h->max_rcap)
		nr = h->max_rcap;   /* a call with more ranges than the whole ring: keep the first */
	/* room for one event */
	if (h->tail - h->head == h->cap) {
		if (h->cap < h->max_cap) {
			void *nb = regrow(h->ev, h->cap, h->cap * 2, sizeof(*h->ev), h->head, h->tail);
			if (!nb)
				return UINT64_MAX;
			h->ev = nb;
			h->cap *= 2;
		} else {
			drop_oldest(h);
		}
	}
	/* room for its ranges */
	while (h->rtail - h->rhead + nr > h->rcap) {
		if (h->rcap < h->max_rcap) {
			void *nb = regrow(h->rg, h->rcap, h->rcap * 2, sizeof(*h->rg), h->rhead,
					  h->rtail);
			if (!nb)
				return UINT64_MAX;
			h->rg = nb;
			h->rcap *= 2;
		} else if (h->head < h->tail) {
			drop_oldest(h);
		} else {
			break;
		}
	}
	e = &h->ev[h->tail & (h->cap - 1)];
	memset(e, 0, sizeof(*e));
	e->hash = policy_event_hash(ev);
	e->seq = ev->seq;
	e->thread = ev->thread;
	e->stream = ev->stream;
	e->api = ev->api;
	e->kind = ev->kind;
	e->info = ev->info;
	e->t_ns = ev->t_ns;
	e->dur_ns = ev->dur_ns;
	e->range_pos = h->rtail;
	e->nranges = (uint32_t)nr;
	e->flags = flags;
	e->watermark = watermark;
	for (uint64_t j = 0; j < nr; j++)
		h->rg[(h->rtail + j) & (h->rcap - 1)] = ev->ranges[j];
	h->rtail += nr;
	return h->tail++;
}

policy_hev_t *policy_history_at(const policy_history_t *h, uint64_t pos)
{
	if (pos < h->head || pos >= h->tail)
		return NULL;
	return &h->ev[pos & (h->cap - 1)];
}

const vmem_range_t *policy_history_range(const policy_history_t *h, const policy_hev_t *e,
					 uint32_t j)
{
	return &h->rg[(e->range_pos + j) & (h->rcap - 1)];
}

int policy_event_significant(vmem_op_kind_t kind)
{
	return vmem_op_is_compute(kind) || kind == VMEM_OP_MEMCPY || kind == VMEM_OP_MEMSET;
}

/* ---- the weak signature ---- */

#define FNV_OFF 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* One 64-bit word into the hash (a multiply-xorshift step: a word at a
 * time, this runs for every hooked call). */
static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= FNV_PRIME;
	return h ^ (h >> 29);
}

/* Hooks name apis and roles with static strings, so a string's hash is
 * cached by its address (per thread: no lock); the content decides. */
static uint64_t str_hash(const char *s)
{
	static _Thread_local struct { const char *p; uint64_t h; } cache[64];
	unsigned i = (unsigned)(((uintptr_t)s >> 3) * 0x9e3779b97f4a7c15ull >> 58);
	uint64_t h = FNV_OFF;

	if (cache[i].p == s && s)
		return cache[i].h;
	for (const char *c = s; c && *c; c++) {
		h ^= (unsigned char)*c;
		h *= FNV_PRIME;
	}
	cache[i].p = s;
	cache[i].h = h;
	return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return mix(h, s ? str_hash(s) : 0);
}

static uint64_t mix_info(uint64_t h, const vmem_op_info_t *in)
{
	h = mix(h, in->type);
	switch (in->type) {
	case VMEM_INFO_CONV: {
		const vmem_conv_info_t *c = &in->u.conv;
		int32_t f[] = { c->n, c->c, c->h, c->w, c->k, c->r, c->s, c->stride[0],
				c->stride[1], c->pad[0], c->pad[1], c->dilation[0],
				c->dilation[1], c->groups, c->algo, c->dir, c->dtype };
		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
			h = mix(h, (uint64_t)(uint32_t)f[i]);
		h = mix(h, c->workspace);
		break;
	}
	case VMEM_INFO_GEMM: {
		const vmem_gemm_info_t *g = &in->u.gemm;
		h = mix(h, (uint64_t)g->m);
		h = mix(h, (uint64_t)g->n);
		h = mix(h, (uint64_t)g->k);
		h = mix(h, (uint64_t)g->batch);
		h = mix(h, g->transa | (uint64_t)g->transb << 8 | (uint64_t)g->atype << 16 |
			       (uint64_t)g->ctype << 24);
		break;
	}
	case VMEM_INFO_COPY:
		h = mix(h, in->u.copy.bytes);
		h = mix(h, in->u.copy.kind);
		break;
	case VMEM_INFO_LAUNCH: {
		const vmem_launch_info_t *l = &in->u.launch;
		h = mix(h, l->func);
		for (int i = 0; i < 3; i++)
			h = mix(h, (uint64_t)l->grid[i] << 32 | l->block[i]);
		h = mix(h, l->shmem);
		break;
	}
	default:
		break;
	}
	return h;
}

/* A kernel argument found by scanning has no extent of its own: the
 * runtime gives it the rest of its allocation, which changes with where a
 * caching allocator placed it.  Nor is the number of them fixed: a scan
 * takes every argument word that falls inside the pool's addresses, and
 * a word that is a pointer in one iteration (a reduction's scratch buffer
 * from a caching allocator) may be one outside the pool, or null, in the
 * next (PyTorch's reduce_kernel on an H200).  So a launch's signature is
 * its kernel and launch shape alone -- what it computes -- and its ranges
 * are compared only where both calls have as many, without their bytes. */
bool policy_ranges_vary(vmem_op_kind_t kind)
{
	return kind == VMEM_OP_LAUNCH;
}

bool policy_role_is_ws(const char *role)
{
	return role && strcmp(role, "ws") == 0;
}

bool policy_range_bytes_vary(vmem_op_kind_t kind, const char *role)
{
	return policy_ranges_vary(kind) || policy_role_is_ws(role);
}

static uint64_t mix_range(uint64_t h, vmem_op_kind_t kind, const vmem_range_t *r)
{
	h = mix_str(h, r->role);
	if (!policy_range_bytes_vary(kind, r->role))
		h = mix(h, r->bytes);
	h = mix(h, r->access | (uint64_t)(r->alloc_id == 0) << 8);
	return h;
}

uint64_t policy_event_hash(const vmem_event_t *ev)
{
	uint64_t h = FNV_OFF;

	h = mix(h, (uint64_t)ev->kind);
	h = mix_str(h, ev->api);
	h = mix_info(h, &ev->info);
	if (policy_ranges_vary(ev->kind))
		return h;
	h = mix(h, (uint64_t)ev->nranges);
	for (int j = 0; j < ev->nranges; j++)
		h = mix_range(h, ev->kind, &ev->ranges[j]);
	return h;
}

static bool str_eq(const char *a, const char *b)
{
	if (a == b)
		return true;
	if (!a || !b)
		return false;
	return strcmp(a, b) == 0;
}

static bool info_eq(const vmem_op_info_t *a, const vmem_op_info_t *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case VMEM_INFO_CONV: {
		const vmem_conv_info_t *x = &a->u.conv, *y = &b->u.conv;
		return x->n == y->n && x->c == y->c && x->h == y->h && x->w == y->w &&
		       x->k == y->k && x->r == y->r && x->s == y->s &&
		       x->stride[0] == y->stride[0] && x->stride[1] == y->stride[1] &&
		       x->pad[0] == y->pad[0] && x->pad[1] == y->pad[1] &&
		       x->dilation[0] == y->dilation[0] && x->dilation[1] == y->dilation[1] &&
		       x->groups == y->groups && x->algo == y->algo &&
		       x->workspace == y->workspace && x->dir == y->dir && x->dtype == y->dtype;
	}
	case VMEM_INFO_GEMM: {
		const vmem_gemm_info_t *x = &a->u.gemm, *y = &b->u.gemm;
		return x->m == y->m && x->n == y->n && x->k == y->k && x->batch == y->batch &&
		       x->transa == y->transa && x->transb == y->transb && x->atype == y->atype &&
		       x->ctype == y->ctype;
	}
	case VMEM_INFO_COPY:
		return a->u.copy.bytes == b->u.copy.bytes && a->u.copy.kind == b->u.copy.kind;
	case VMEM_INFO_LAUNCH: {
		const vmem_launch_info_t *x = &a->u.launch, *y = &b->u.launch;
		return x->func == y->func && x->shmem == y->shmem &&
		       memcmp(x->grid, y->grid, sizeof(x->grid)) == 0 &&
		       memcmp(x->block, y->block, sizeof(x->block)) == 0;
	}
	default:
		return true;
	}
}

bool policy_hev_weak_equal(const policy_history_t *h, const policy_hev_t *a,
			   const policy_hev_t *b)
{
	if (a->hash != b->hash || a->kind != b->kind || !str_eq(a->api, b->api) ||
	    !info_eq(&a->info, &b->info))
		return false;
	if (a->nranges != b->nranges)
		return policy_ranges_vary(a->kind);
	for (uint32_t j = 0; j < a->nranges; j++) {
		const vmem_range_t *x = policy_history_range(h, a, j);
		const vmem_range_t *y = policy_history_range(h, b, j);

		if ((x->bytes != y->bytes && !policy_range_bytes_vary(a->kind, x->role)) ||
		    x->access != y->access ||
		    (x->alloc_id == 0) != (y->alloc_id == 0) || !str_eq(x->role, y->role))
			return false;
	}
	return true;
}

policy_ident_t policy_range_ident(const vmem_range_t *now, const vmem_range_t *then,
				  uint64_t wm_now_period, uint64_t wm_then_period)
{
	if (now->alloc_id == 0 || then->alloc_id == 0)
		return now->alloc_id == then->alloc_id && now->ptr == then->ptr ? POLICY_ID_SAME
										 : POLICY_ID_SOFT;
	if (now->alloc_id == then->alloc_id)
		return now->offset == then->offset ? POLICY_ID_SAME : POLICY_ID_SOFT;
	if (now->alloc_id > wm_now_period && then->alloc_id > wm_then_period &&
	    now->offset == then->offset)
		return POLICY_ID_YOUNG;
	return POLICY_ID_SOFT;
}
