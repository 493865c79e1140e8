/* pool/chunks.c - the chunk cache: physical chunks created and not
 * mapped anywhere, mapping and unmapping a page, and getting chunks under
 * the budget (create while under it, else reclaim in order of cost, and
 * last evict).
 */
#include "pool/pool_internal.h"

void pool_cache_push(pool_t *p, uint64_t h)
{
	/* capacity covers every chunk the budget allows (set at create) */
	p->cache[p->ncache++] = h;
}

pool_status_t pool_page_unmap(pool_t *p, struct page *pg)
{
	int rc = p->ops.unmap(p->ops.ctx, page_va(p, pg), chunk_sz(p));
	p->st.unmaps++;
	if (pg->a->kind == A_SLAB)
		stat_sub(&p->st.small_slack, slab_slack(pg->a));
	pool_cache_push(p, pg->chunk);
	pg->chunk = 0;
	return dev_status(rc);
}

/* Maps a chunk from the cache at the page, with access (`grant`) or
 * without it (granted later with the page's run). */
static pool_status_t page_map(pool_t *p, struct page *pg, bool grant)
{
	uint64_t h = p->cache[--p->ncache];
	int rc = grant ? p->ops.map(p->ops.ctx, page_va(p, pg), chunk_sz(p), h)
		       : p->ops.map_only(p->ops.ctx, page_va(p, pg), chunk_sz(p), h);
	p->st.maps++;
	if (grant)
		p->st.grants++;
	if (rc) {
		pool_cache_push(p, h);
		return dev_status(rc);
	}
	pg->chunk = h;
	pg->state = PG_RESIDENT;
	if (pg->a->kind == A_SLAB)
		slack_add(&p->st.small_slack, slab_slack(pg->a));
	return POOL_OK;
}

pool_status_t pool_page_map(pool_t *p, struct page *pg)
{
	return page_map(p, pg, true);
}

static bool runs_on(const pool_t *p)
{
	return p->cfg.grant_runs && p->ops.map_only && p->ops.grant;
}

pool_status_t pool_run_grant(pool_t *p, struct grant_run *g)
{
	if (!g->n)
		return POOL_OK;
	struct alloc *a = g->a;
	uint32_t first = g->first, n = g->n;
	g->n = 0;
	int rc = p->ops.grant(p->ops.ctx, page_va(p, &a->pages[first]), (uint64_t)n * chunk_sz(p));
	p->st.grants++;
	if (!rc)
		return POOL_OK;
	/* nothing is queued on them yet: unmapped, they are as before */
	for (uint32_t k = first; k < first + n; k++) {
		struct page *pg = &a->pages[k];
		pool_page_unmap(p, pg);
		pg->state = (pg->flags & PF_HOST_VALID) ? PG_HOST : PG_RELEASED;
	}
	return dev_status(rc);
}

pool_status_t pool_run_finish(pool_t *p, struct grant_run *g, pool_status_t st)
{
	pool_status_t gst = pool_run_grant(p, g);
	return st ? st : gst;
}

pool_status_t pool_page_map_run(pool_t *p, struct page *pg, struct grant_run *g)
{
	if (!runs_on(p))
		return pool_page_map(p, pg);
	if (g->n && (g->a != pg->a || pg->idx != g->first + g->n)) {
		pool_status_t st = pool_run_grant(p, g);
		if (st)
			return st;
	}
	pool_status_t st = page_map(p, pg, false);
	if (st)
		return st;
	if (!g->n) {
		g->a = pg->a;
		g->first = pg->idx;
	}
	g->n++;
	return POOL_OK;
}

int pool_chunk_create(pool_t *p)
{
	uint64_t h, cs = chunk_sz(p);
	int rc = p->ops.chunk_create(p->ops.ctx, cs, &h);

	if (rc)
		return rc;
	p->held += cs;
	stat_add(&p->st.held, cs);
	p->st.chunks_created++;
	pool_cache_push(p, h);
	return 0;
}

/* Makes the cache hold at least `need` chunks without exceeding the
 * budget: create while under it, else reclaim in order of cost (ready
 * freed ranges, finished offloads, empty slabs, then waiting on pending
 * frees and offloads, and last evicting live pages). */
pool_status_t pool_ensure_chunks(pool_t *p, uint32_t need)
{
	uint64_t cs = chunk_sz(p);
	bool device_full = false;
	int retries = 0;

	while (p->ncache < need) {
		if (!device_full && p->held + cs <= p->cfg.budget) {
			int rc = pool_chunk_create(p);
			if (rc == 0)
				continue;
			if (rc != POOL_ENOMEM)
				return POOL_EDEVICE;
			/* The device holds less than the budget said (other
			 * processes, libraries): treat as full, reclaim. */
			device_full = true;
			continue;
		}
		if (p->spend_head)
			pool_small_reap(p);
		if (pool_freed_reclaim_one(p, false, need - p->ncache) || pool_offl_reap(p, false) ||
		    pool_slab_reclaim_empty(p) || pool_freed_reclaim_one(p, true, need - p->ncache) ||
		    pool_offl_reap(p, true))
			continue;
		if (pool_evict_lru(p, need - p->ncache))
			continue;
		if (p->evict_taken_back && retries++ < 64)
			continue;   /* its victims were used meanwhile: choose others */
		if (p->evict_err)
			return p->evict_err;
		if (p->host_exhausted && p->hpend_head) {
			/* slots still read by copies in flight: wait for one */
			pool_slot_reap(p, true);
			if (p->nslots)
				continue;
		}
		if (p->waiting && retries++ < 64) {
			/* other threads wait for evictions or reclaims that will
			 * free chunks (their pages are not on the LRU meanwhile):
			 * wait for them rather than fail */
			pthread_cond_wait(&p->cv, &p->lock);
			continue;
		}
		return p->host_exhausted ? POOL_EHOST : POOL_ENOMEM;
	}
	return POOL_OK;
}

void pool_trim(pool_t *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->ncache) {
		p->ops.chunk_release(p->ops.ctx, p->cache[--p->ncache]);
		p->held -= chunk_sz(p);
		stat_sub(&p->st.held, chunk_sz(p));
		p->st.chunks_released++;
	}
	pthread_mutex_unlock(&p->lock);
}
