/* pool/host.c - pinned host slots: chunk-sized pieces of pinned blocks
 * (ops.host_alloc, host_block bytes at a time, capped by host_limit)
 * that hold the bytes of offloaded and evicted pages.  A slot released
 * while a copy still reads or writes it waits on a pending list until the
 * copy's mark completes.
 */
#include "pool/pool_internal.h"

void pool_slot_release(pool_t *p, void *slot, struct mark m)
{
	stat_sub(&p->st.host, chunk_sz(p));
	if (!mark_known_done(m)) {
		struct slot_pending *s = malloc(sizeof(*s));
		if (s) {
			s->next = NULL;
			s->p = slot;
			s->m = m;
			if (p->hpend_tail)
				p->hpend_tail->next = s;
			else
				p->hpend_head = s;
			p->hpend_tail = s;
			return;
		}
		/* no memory to remember it: the slot is lost rather than
		 * reused under the copy (no wait here: callers are in the
		 * middle of changing a page) */
		return;
	}
	p->slots[p->nslots++] = slot;   /* capacity covers every slot ever carved */
}

void pool_slot_reap(pool_t *p, bool wait_one)
{
	if (wait_one && p->hpend_head) {
		struct mark m = p->hpend_head->m;   /* the entry may go while unlocked */
		(void)pool_mark_wait(p, m);          /* a failed wait leaves it pending */
	}
	struct slot_pending **pp = &p->hpend_head, *last = NULL;
	while (*pp) {
		struct slot_pending *s = *pp;
		if (!pool_mark_done(p, s->m)) {
			last = s;
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		p->slots[p->nslots++] = s->p;
		free(s);
	}
	p->hpend_tail = last;
}

pool_status_t pool_slot_get(pool_t *p, void **out)
{
	uint64_t cs = chunk_sz(p);
	if (!p->nslots && p->hpend_head)
		pool_slot_reap(p, false);
	if (!p->nslots) {
		uint64_t blk = p->cfg.host_block;
		if (p->cfg.host_limit) {
			uint64_t left = p->cfg.host_limit > p->host_allocated ?
				p->cfg.host_limit - p->host_allocated : 0;
			left -= left % cs;
			if (blk > left)
				blk = left;
		}
		if (blk >= cs) {
			uint32_t n = (uint32_t)(blk / cs);
			void *mem;
			if (pool_grow((void **)&p->slots, &p->capslots, p->nslots_total + n, sizeof(void *)) ||
			    pool_grow((void **)&p->hblocks, &p->caphblocks, p->nhblocks + 1, sizeof(void *)))
				return POOL_EHOST;
			int rc = p->ops.host_alloc(p->ops.ctx, blk, &mem);
			if (rc == 0) {
				p->hblocks[p->nhblocks++] = mem;
				p->host_allocated += blk;
				p->st.host_allocated = p->host_allocated;
				p->nslots_total += n;
				for (uint32_t i = n; i-- > 0;)
					p->slots[p->nslots++] = (char *)mem + (uint64_t)i * cs;
			}
		}
	}
	/* no wait here: pool_ensure_chunks waits for a pending slot */
	if (!p->nslots)
		return POOL_EHOST;
	*out = p->slots[--p->nslots];
	stat_add(&p->st.host, cs);
	return POOL_OK;
}
