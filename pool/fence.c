/* pool/fence.c - fences: the pool's handle on "the work queued so far on
 * a stream is done" (pool.h, ordering without host synchronisation).
 * A fence wraps one ops.fence_record handle, is reference counted (pages,
 * freed ranges and pending slots share one), and remembers once it was
 * seen complete so it is queried at most until then.
 */
#include "pool/pool_internal.h"

struct fence *pool_fence_new(pool_t *p, void *stream, bool all, pool_status_t *st)
{
	struct fence *f = p->fence_free;
	if (f)
		p->fence_free = f->next;
	else if (!(f = malloc(sizeof(*f)))) {
		*st = POOL_ENOMEM;
		return NULL;
	}
	memset(f, 0, sizeof(*f));
	int rc = p->ops.fence_record(p->ops.ctx, stream, all, &f->h);
	if (rc) {
		f->next = p->fence_free;
		p->fence_free = f;
		*st = dev_status(rc);
		return NULL;
	}
	f->stream = stream;
	f->all = all;
	f->refs = 1;
	*st = POOL_OK;
	return f;
}

struct fence *pool_fence_ref(struct fence *f)
{
	if (f)
		f->refs++;
	return f;
}

void pool_fence_put(pool_t *p, struct fence *f)
{
	if (!f || --f->refs)
		return;
	p->ops.fence_destroy(p->ops.ctx, f->h);
	f->next = p->fence_free;
	p->fence_free = f;
}

bool pool_fence_done(pool_t *p, struct fence *f)
{
	if (!f || f->done)
		return true;
	if (p->ops.fence_query(p->ops.ctx, f->h) == 1)
		f->done = true;
	return f->done;
}

/* A host wait: only on the reactive path and when reclaiming.  A wait
 * the device answers with an error (a sticky error) leaves the fence
 * pending: nothing it guards may be unmapped or reused on its strength. */
pool_status_t pool_fence_wait(pool_t *p, struct fence *f)
{
	if (pool_fence_done(p, f))
		return POOL_OK;
	uint64_t t0 = p->ops.now_ns(p->ops.ctx);
	int rc = p->ops.fence_wait(p->ops.ctx, f->h);
	p->st.stalls++;
	p->st.stall_ns += p->ops.now_ns(p->ops.ctx) - t0;
	if (rc)
		return dev_status(rc);
	f->done = true;
	return POOL_OK;
}

/* Makes `stream` wait for `f` unless stream order already implies it. */
pool_status_t pool_stream_after(pool_t *p, void *stream, struct fence *f)
{
	if (!f || f->done || (!f->all && f->stream == stream))
		return POOL_OK;
	return dev_status(p->ops.stream_wait(p->ops.ctx, stream, f->h));
}

void pool_page_set_busy(pool_t *p, struct page *pg, struct fence *f)
{
	pool_fence_ref(f);
	pool_fence_put(p, pg->busy);
	pg->busy = f;
}
