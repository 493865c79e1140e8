/* pool/hostmap.c - pages mapped from their host slots (cfg.host_map).
 *
 * A kernel argument vmem found by scanning has no extent: the call gets
 * the rest of the allocation from the pointer (residency.c, resolve).
 * Under a caching allocator that is the rest of a segment, and a call
 * over two segments can need more pages than the budget holds although
 * the kernel touches a few.  Rather than refuse the call, pool_acquire
 * keeps its stated pages on the device and maps the pages past them from
 * where their bytes already are: the page's host slot, mapped at the
 * page's own address.  A kernel that touches one reads and writes the
 * slot over the link; one that does not costs a map.  No copy is made:
 * the slot is the page's memory while it is mapped so (PG_HOSTMAP), and
 * stays its valid host copy after.
 *
 * Such a page holds no device chunk and is on no LRU.  It leaves the
 * device's view (unmapped, back to PG_HOST) once its uses completed: at
 * pool_poll, at the next acquire, or - waiting for them - when a call
 * needs it on the device, when it is freed and at teardown.
 */
#include "pool/pool_internal.h"

pool_status_t pool_hostmap_page(pool_t *p, struct page *pg)
{
	uint64_t cs = chunk_sz(p);
	bool fresh = false;
	pool_status_t st;

	if (pg->state == PG_RELEASED) {
		if ((st = pool_slot_get(p, &pg->host)))
			return st;
		/* meaningless bytes, like a fresh chunk's; a write makes them
		 * the page's (pool_release keeps the slot of such a page) */
		pg->flags |= PF_HOST_VALID;
		fresh = true;
	}
	int rc = p->ops.map_slot(p->ops.ctx, page_va(p, pg), cs, pg->host);
	if (rc) {
		if (fresh) {
			pool_slot_release(p, pg->host, (struct mark){ 0 });
			pg->host = NULL;
			pg->flags &= ~PF_HOST_VALID;
		}
		return dev_status(rc);
	}
	pg->state = PG_HOSTMAP;
	pg->epoch = p->epoch;
	list_push_back(&p->hmapl, pg);
	p->st.maps++;
	stat_add(&p->st.host_mapped, cs);
	pool_emit(p, POOL_EV_HOST_MAP, pg->a, (uint64_t)pg->idx * cs, page_bytes(p, pg->a, pg->idx),
		  0, NULL);
	return POOL_OK;
}

bool pool_hostmap_leave(pool_t *p, struct page *pg, bool wait)
{
	if (pg->state != PG_HOSTMAP)
		return true;
	if (pg->locks)
		return false;
	while (!pool_mark_done(p, pg->busy)) {
		struct mark m = pg->busy;
		struct alloc *a = pg->a;

		if (!wait)
			return false;
		a->pins++;
		p->st.host_map_waits++;
		pool_status_t st = pool_mark_wait(p, m);
		a->pins--;
		if (st)
			return false;
		/* the lock was released: another thread may have used it */
		if (pg->state != PG_HOSTMAP)
			return true;
		if (pg->locks)
			return false;
	}
	if (p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p)))
		return false;   /* the device refused: it stays mapped, and listed */
	list_del(&p->hmapl, pg);
	p->st.unmaps++;
	stat_sub(&p->st.host_mapped, chunk_sz(p));
	pg->state = PG_HOST;
	if (!(pg->flags & PF_WRITTEN)) {
		/* a fresh slot no call wrote: nothing to keep */
		pool_slot_release(p, pg->host, (struct mark){ 0 });
		pg->host = NULL;
		pg->flags &= ~PF_HOST_VALID;
		pg->state = PG_RELEASED;
	}
	return true;
}

void pool_hostmap_reap(pool_t *p, bool wait)
{
	/* a wait releases the lock: start over from the head after one */
	for (struct page *pg = p->hmapl.head, *next; pg; pg = next) {
		next = pg->next;
		if (pg->locks)
			continue;
		if (wait && !mark_known_done(pg->busy)) {
			if (!pool_hostmap_leave(p, pg, true))
				return;   /* the device failed: leave the rest */
			next = p->hmapl.head;
			continue;
		}
		(void)pool_hostmap_leave(p, pg, false);
	}
}
