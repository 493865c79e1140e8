/* pool/vrange.c - the reserved virtual range: free extents in pages
 * (sorted, first-fit, coalescing: SuperNeurons §3.2.1) and the map from
 * each page of the range to the allocation or slab that covers it.
 */
#include "pool/pool_internal.h"

static int va_take(pool_t *p, uint64_t n, uint64_t *start)
{
	for (uint32_t i = 0; i < p->nvfree; i++) {
		struct vext *e = &p->vfree[i];
		if (e->len < n)
			continue;
		*start = e->start;
		e->start += n;
		e->len -= n;
		if (!e->len) {
			memmove(e, e + 1, (p->nvfree - i - 1) * sizeof(*e));
			p->nvfree--;
		}
		return 0;
	}
	return -1;
}

void pool_va_give(pool_t *p, uint64_t start, uint64_t n)
{
	uint32_t i = 0;
	while (i < p->nvfree && p->vfree[i].start < start)
		i++;
	bool prev = i > 0 && p->vfree[i - 1].start + p->vfree[i - 1].len == start;
	bool next = i < p->nvfree && start + n == p->vfree[i].start;
	if (prev && next) {
		p->vfree[i - 1].len += n + p->vfree[i].len;
		memmove(&p->vfree[i], &p->vfree[i + 1], (p->nvfree - i - 1) * sizeof(struct vext));
		p->nvfree--;
	} else if (prev) {
		p->vfree[i - 1].len += n;
	} else if (next) {
		p->vfree[i].start = start;
		p->vfree[i].len += n;
	} else {
		/* The list holds at most one entry per allocation + 1; growing can
		 * only fail when malloc does, and then the range leaks (counted
		 * nowhere, harmless: the VA is 4x the device). */
		if (pool_grow((void **)&p->vfree, &p->capvfree, p->nvfree + 1, sizeof(struct vext)))
			return;
		memmove(&p->vfree[i + 1], &p->vfree[i], (p->nvfree - i) * sizeof(struct vext));
		p->vfree[i].start = start;
		p->vfree[i].len = n;
		p->nvfree++;
	}
}

void pool_vmap_set(pool_t *p, struct alloc *a, uint64_t npages, struct alloc *v)
{
	uint64_t first = (a->base - p->base) / chunk_sz(p);
	for (uint64_t i = 0; i < npages; i++)
		p->vmap[first + i] = v;
}

pool_status_t pool_va_alloc(pool_t *p, uint64_t npages, uint64_t *start)
{
	while (va_take(p, npages, start)) {
		if (!pool_freed_reclaim_one(p, false) && !pool_freed_reclaim_one(p, true) &&
		    !pool_slab_reclaim_empty(p))
			return POOL_EVA;
	}
	return POOL_OK;
}
