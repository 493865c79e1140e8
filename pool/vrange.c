/* pool/vrange.c - the reserved virtual range: free extents in pages
 * (sorted, first-fit, coalescing: SuperNeurons §3.2.1) and the map from
 * each page of the range to the allocation or slab that covers it.
 */
#include "pool/pool_internal.h"

/* First fit in a sorted extent list: takes `want` from the first extent
 * that holds it.  0, or -1 when none does. */
int pool_ext_take(struct vext *e, uint32_t *n, uint64_t want, uint64_t *start)
{
	for (uint32_t i = 0; i < *n; i++) {
		if (e[i].len < want)
			continue;
		*start = e[i].start;
		e[i].start += want;
		e[i].len -= want;
		if (!e[i].len) {
			memmove(&e[i], &e[i + 1], (*n - i - 1) * sizeof(*e));
			(*n)--;
		}
		return 0;
	}
	return -1;
}

/* Gives an extent back, coalescing with its neighbours.  -1 when the list
 * had to grow and could not (the extent is then lost). */
int pool_ext_give(struct vext **arr, uint32_t *n, uint32_t *cap, uint64_t start, uint64_t len)
{
	struct vext *e = *arr;
	uint32_t i = 0;
	while (i < *n && e[i].start < start)
		i++;
	bool prev = i > 0 && e[i - 1].start + e[i - 1].len == start;
	bool next = i < *n && start + len == e[i].start;
	if (prev && next) {
		e[i - 1].len += len + e[i].len;
		memmove(&e[i], &e[i + 1], (*n - i - 1) * sizeof(*e));
		(*n)--;
	} else if (prev) {
		e[i - 1].len += len;
	} else if (next) {
		e[i].start = start;
		e[i].len += len;
	} else {
		if (pool_grow((void **)arr, cap, *n + 1, sizeof(*e)))
			return -1;
		e = *arr;
		memmove(&e[i + 1], &e[i], (*n - i) * sizeof(*e));
		e[i].start = start;
		e[i].len = len;
		(*n)++;
	}
	return 0;
}

static int va_take(pool_t *p, uint64_t n, uint64_t *start)
{
	return pool_ext_take(p->vfree, &p->nvfree, n, start);
}

void pool_va_give(pool_t *p, uint64_t start, uint64_t n)
{
	/* The list holds at most one entry per allocation + 1; growing can
	 * only fail when malloc does, and then the range leaks (counted
	 * nowhere, harmless: the VA is 4x the device). */
	(void)pool_ext_give(&p->vfree, &p->nvfree, &p->capvfree, start, n);
}

void pool_vmap_set(pool_t *p, struct alloc *a, uint64_t npages, struct alloc *v)
{
	uint64_t first = page_of(p, a->base - p->base);
	for (uint64_t i = 0; i < npages; i++)
		p->vmap[first + i] = v;
}

pool_status_t pool_va_alloc(pool_t *p, uint64_t npages, uint64_t *start)
{
	while (va_take(p, npages, start)) {
		if (!pool_freed_reclaim_one(p, false, 0) && !pool_freed_reclaim_one(p, true, 0) &&
		    !pool_slab_reclaim_empty(p))
			return POOL_EVA;
	}
	return POOL_OK;
}
