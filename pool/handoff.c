/* pool/handoff.c - a chunk handed from a page whose last use is still
 * queued to a page of the next call, with no host wait (cfg.handoff).
 *
 * When two calls in a row need more pages than the budget holds, the
 * second one's last pages can only come once the first is done with some
 * of its own.  Evicting one of those takes a host wait for the first
 * call (the chunk must be unmapped before it is mapped elsewhere), and the
 * second call's fault then copies its page in with the device idle: a
 * miss "beside the call before" (docs/pool.md).  A physical chunk can be
 * mapped at two addresses, though.  The chunk is mapped at the new page's
 * address at once; the copy streams write it only after the old page's
 * last use and, when the old page is dirty, after its copy out (ordered
 * on the device by events); the old page keeps its own mapping - which
 * no call may use any more - until those complete, and is unmapped then,
 * at a poll or an acquire, never waited for on the hot path.
 *
 * The old page is PG_HANDOFF meanwhile, on the handl list: not resident,
 * its chunk counted as the new page's.  Anything that needs it settles it
 * first (pool_handoff_leave with a wait): a call that uses it (acquire), a
 * launch vmem cannot see into (pool_fill_rests: it could write through
 * the old address into the new page's bytes), a free's reuse of its range
 * (pool_range_ready), pool_sync and teardown.
 */
#include "pool/pool_internal.h"

pool_status_t pool_handoff(pool_t *p, struct page *from, struct page *to, bool dead)
{
	uint64_t cs = chunk_sz(p);
	int rc = p->ops.map(p->ops.ctx, page_va(p, to), cs, from->chunk);

	p->st.maps++;
	p->st.grants++;
	if (rc)
		return dev_status(rc);
	to->chunk = from->chunk;
	to->state = PG_RESIDENT;
	to->busy = from->busy;
	page_unlist(p, from);
	stat_sub(&p->st.resident, cs);
	/* from->chunk stays: mapped at its address still */
	from->state = PG_HANDOFF;
	if (dead) {
		/* nothing to keep: its bytes are gone once the new page's
		 * land; its slot may still be read by its own copy in */
		if (from->host) {
			pool_slot_release(p, from->host, from->busy);
			from->host = NULL;
		}
		pool_page_dropped(p, from);
		from->flags |= PF_DROP;
	}
	list_push_back(&p->handl, from);
	from->a->handoffs++;
	p->st.handoffs++;
	return POOL_OK;
}

static bool handoff_done(pool_t *p, const struct page *pg)
{
	return pool_mark_done(p, pg->busy);
}

bool pool_handoff_leave(pool_t *p, struct page *pg, bool wait)
{
	while (pg->state == PG_HANDOFF && !handoff_done(p, pg)) {
		struct mark m = pg->busy;
		struct alloc *a = pg->a;

		if (!wait)
			return false;
		a->pins++;
		p->st.handoff_waits++;
		pool_status_t st = pool_mark_wait(p, m);
		a->pins--;
		if (st)
			return false;
		/* the lock was released: another thread may have settled it */
	}
	if (pg->state != PG_HANDOFF)
		return true;
	if (p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p)))
		return false;   /* the device refused: still mapped, and listed */
	p->st.unmaps++;
	list_del(&p->handl, pg);
	pg->a->handoffs--;
	pg->chunk = 0;
	pg->busy.tl = NULL;
	if ((pg->flags & PF_DROP) || !(pg->flags & PF_WRITTEN)) {
		/* dropped, never written, or freed (pool_free_large cleared
		 * its flags): nothing to keep */
		if (pg->host) {
			pool_slot_release(p, pg->host, (struct mark){ 0 });
			pg->host = NULL;
		}
		pg->flags &= ~(PF_HOST_VALID | PF_DROP);
		pg->state = PG_RELEASED;
	} else {
		/* clean when handed off, or copied out since: the slot holds it */
		pg->state = PG_HOST;
	}
	return true;
}

bool pool_handoff_undo(pool_t *p, struct page *to)
{
	struct page *from = p->handl.head;

	while (from && from->chunk != to->chunk)
		from = from->next;
	if (!from || p->ops.unmap(p->ops.ctx, page_va(p, to), chunk_sz(p)))
		return false;
	p->st.unmaps++;
	to->chunk = 0;
	to->state = (to->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	list_del(&p->handl, from);
	from->a->handoffs--;
	/* nothing was written into the chunk: its bytes are from's still
	 * (a dead page stays dropped - a read of it fails loudly) */
	from->flags &= ~PF_DROP;
	from->state = PG_RESIDENT;
	list_push_front(&p->lru, from);
	stat_add(&p->st.resident, chunk_sz(p));
	return true;
}

bool pool_handoff_reap(pool_t *p, bool wait)
{
	for (struct page *pg = p->handl.head, *next; pg; pg = next) {
		next = pg->next;
		if (!wait || handoff_done(p, pg)) {
			(void)pool_handoff_leave(p, pg, false);
			continue;
		}
		/* a wait releases the lock: start over from the head after it */
		if (!pool_handoff_leave(p, pg, true))
			return false;   /* the device failed: leave the rest */
		next = p->handl.head;
	}
	return !wait || !p->handl.head;
}
