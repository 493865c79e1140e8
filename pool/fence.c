/* pool/fence.c - fences and timelines: the pool's handle on "the work
 * queued so far on a stream is done" (pool.h, ordering without host
 * synchronisation).
 *
 * A fence wraps one ops.fence_record handle, is reference counted, and
 * remembers once it was seen complete so it is queried at most until then.
 *
 * A timeline (struct tl) is one stream as the pool sees it.  The pool
 * hands out positions on it after the work they stand for was issued -
 * a call's use of its pages (pool_release), a batch of copies on the
 * pool's own streams - and a page remembers the position of its last use
 * as a mark (timeline, position).  Nothing is recorded on the device for
 * that.  Only when something must wait for a mark - a copy-out that must
 * follow the use, a use on another stream, an unmap, a reuse - is a fence
 * recorded on the mark's stream; since it follows everything issued there
 * so far, it covers the mark, and every later mark up to the position it
 * was recorded at, so one fence serves every page used before it.  A
 * ring of the last TL_RING fences per timeline is kept for that, and the
 * highest position known complete.  A stream also remembers, per other
 * timeline, the position it already waits for, so a use on one stream of
 * pages last used on another waits once, not once per page or call.
 *
 *   stream S:  use(p1)#1  use(p2)#2  use(p1)#3 ......... [fence @3]
 *   D2H:                                    evict p1: wait [fence @3], copy
 *
 * This is what issue 14 asked of the hot path: a hooked call with its
 * pages resident makes no device call at all.
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
	p->st.fences++;
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

static void tl_learn(struct tl *tl, uint64_t seq)
{
	if (seq > tl->done)
		tl->done = seq;
}

/* Drops the ring's fences that cover only completed positions. */
static void ring_prune(pool_t *p, struct tl *tl)
{
	uint32_t k = 0;
	while (k < tl->nring && tl->ring[k]->seq <= tl->done)
		pool_fence_put(p, tl->ring[k++]);
	if (k) {
		memmove(tl->ring, tl->ring + k, (tl->nring - k) * sizeof(tl->ring[0]));
		tl->nring -= k;
	}
}

bool pool_fence_done(pool_t *p, struct fence *f)
{
	if (!f || f->done)
		return true;
	if (p->ops.fence_query(p->ops.ctx, f->h) == 1) {
		f->done = true;
		if (f->tl)
			tl_learn(f->tl, f->seq);
	}
	return f->done;
}

/* A host wait: only on the reactive path and when reclaiming.  The pool's
 * lock is released meanwhile (issue 10: one thread waiting for the
 * device blocked every other thread's calls, cudaMalloc and
 * cudaMemGetInfo included); the fence is held by a reference, and the
 * caller protects what it points to (pool_internal.h).  A wait the
 * device answers with an error (a sticky error) leaves the fence pending:
 * nothing it guards may be unmapped or reused on its strength. */
pool_status_t pool_fence_wait(pool_t *p, struct fence *f)
{
	if (pool_fence_done(p, f))
		return POOL_OK;
	pool_fence_ref(f);
	p->waiting++;
	pthread_mutex_unlock(&p->lock);
	uint64_t t0 = p->ops.now_ns(p->ops.ctx);
	int rc = p->ops.fence_wait(p->ops.ctx, f->h);
	uint64_t t1 = p->ops.now_ns(p->ops.ctx);
	pthread_mutex_lock(&p->lock);
	p->waiting--;
	pthread_cond_broadcast(&p->cv);
	p->st.stalls++;
	p->st.stall_ns += t1 - t0;
	if (!rc) {
		f->done = true;
		if (f->tl)
			tl_learn(f->tl, f->seq);
	}
	pool_fence_put(p, f);
	return rc ? dev_status(rc) : POOL_OK;
}

/* -------------------------------------------------------------- timelines */

static struct tl *tl_new(pool_t *p, void *stream, bool all)
{
	struct tl *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return NULL;
	tl->stream = stream;
	tl->all = all;
	tl->next = p->tls;
	p->tls = tl;
	return tl;
}

pool_status_t pool_tl_init(pool_t *p)
{
	p->tl_d2h = tl_new(p, p->ops.d2h_stream, false);
	p->tl_h2d = tl_new(p, p->ops.h2d_stream, false);
	p->tl_all = tl_new(p, NULL, true);
	return p->tl_d2h && p->tl_h2d && p->tl_all ? POOL_OK : POOL_ENOMEM;
}

void pool_tl_fini(pool_t *p)
{
	while (p->tls) {
		struct tl *tl = p->tls;
		p->tls = tl->next;
		for (uint32_t i = 0; i < tl->nring; i++)
			pool_fence_put(p, tl->ring[i]);
		free(tl);
	}
}

struct tl *pool_tl(pool_t *p, void *stream)
{
	struct tl *tl = p->tl_last, *reuse = NULL;
	if (tl && tl->stream == stream && !tl->dead && !tl->all)
		return tl;
	for (tl = p->tls; tl; tl = tl->next) {
		if (tl->all)
			continue;
		if (!tl->dead && tl->stream == stream)
			break;
		/* a destroyed stream's timeline whose work all completed can
		 * serve a new stream: positions keep growing, so old marks on
		 * it still read as complete */
		if (tl->dead && !reuse && tl->done >= tl->seq)
			reuse = tl;
	}
	if (!tl && reuse) {
		tl = reuse;
		tl->stream = stream;
		tl->dead = false;
		memset(tl->waited, 0, sizeof(tl->waited));
	}
	if (!tl && !(tl = tl_new(p, stream, false)))
		return p->tl_all;
	p->tl_last = tl;
	return tl;
}

struct mark pool_mark_now(pool_t *p, struct tl *tl)
{
	(void)p;
	return (struct mark){ tl, ++tl->seq };
}

/* The oldest fence of m's ring that covers m (pending m), or NULL. */
static struct fence *ring_cover(pool_t *p, struct mark m)
{
	struct tl *tl = m.tl;
	ring_prune(p, tl);
	for (uint32_t i = 0; i < tl->nring; i++)
		if (tl->ring[i]->seq >= m.seq)
			return tl->ring[i];
	return NULL;
}

struct fence *pool_mark_fence(pool_t *p, struct mark m, pool_status_t *st)
{
	struct tl *tl = m.tl;
	struct fence *f;
	*st = POOL_OK;
	if (mark_known_done(m))
		return NULL;
	if ((f = ring_cover(p, m)))
		return f;
	if (tl->dead) {
		/* destroyed, and its last fence could not be recorded */
		*st = POOL_EDEVICE;
		return NULL;
	}
	f = pool_fence_new(p, tl->stream, tl->all, st);
	if (!f)
		return NULL;
	f->tl = tl;
	f->seq = tl->seq;
	if (tl->nring == TL_RING) {
		/* the oldest is covered by the newer ones, only later */
		pool_fence_put(p, tl->ring[0]);
		memmove(tl->ring, tl->ring + 1, (TL_RING - 1) * sizeof(tl->ring[0]));
		tl->nring--;
	}
	tl->ring[tl->nring++] = f;
	return f;
}

struct fence *pool_mark_fenced(pool_t *p, struct mark m)
{
	struct fence *f = mark_known_done(m) ? NULL : ring_cover(p, m);

	return f && f->seq < m.tl->seq ? f : NULL;
}

bool pool_mark_done(pool_t *p, struct mark m)
{
	pool_status_t st;
	if (mark_known_done(m))
		return true;
	struct fence *f = pool_mark_fence(p, m, &st);
	if (!f)
		return st == POOL_OK;
	return pool_fence_done(p, f) && mark_known_done(m);
}

pool_status_t pool_mark_wait(pool_t *p, struct mark m)
{
	pool_status_t st;
	struct fence *f = pool_mark_fence(p, m, &st);
	if (!f)
		return st;
	return pool_fence_wait(p, f);
}

static uint64_t waited_get(const struct tl *me, const struct tl *other)
{
	for (uint32_t i = 0; i < TL_WAITED; i++)
		if (me->waited[i].tl == other)
			return me->waited[i].seq;
	return 0;
}

static void waited_set(struct tl *me, struct tl *other, uint64_t seq)
{
	for (uint32_t i = 0; i < TL_WAITED; i++)
		if (me->waited[i].tl == other) {
			if (seq > me->waited[i].seq)
				me->waited[i].seq = seq;
			return;
		}
	me->waited[me->waited_next].tl = other;
	me->waited[me->waited_next].seq = seq;
	me->waited_next = (me->waited_next + 1) % TL_WAITED;
}

pool_status_t pool_stream_after(pool_t *p, struct tl *me, void *stream, struct mark m)
{
	pool_status_t st;
	if (mark_known_done(m) || (m.tl == me && !me->all))
		return POOL_OK;
	if (!me->all && waited_get(me, m.tl) >= m.seq)
		return POOL_OK;
	struct fence *f = pool_mark_fence(p, m, &st);
	if (!f || f->done)
		return st;
	int rc = p->ops.stream_wait(p->ops.ctx, stream, f->h);
	if (rc)
		return dev_status(rc);
	if (!me->all)
		waited_set(me, m.tl, f->seq);
	return POOL_OK;
}

void pool_stream_destroyed(pool_t *p, void *stream)
{
	pool_status_t st;
	pthread_mutex_lock(&p->lock);
	for (struct tl *tl = p->tls; tl; tl = tl->next) {
		if (tl->all || tl->dead || tl->stream != stream || tl == p->tl_d2h || tl == p->tl_h2d)
			continue;
		/* Positions not yet fenced can only be fenced while the stream
		 * lives: record one fence that covers them all.  If that fails,
		 * waits on them fail later (POOL_EDEVICE), never succeed. */
		(void)pool_mark_fence(p, (struct mark){ tl, tl->seq }, &st);
		tl->dead = true;
		if (p->tl_last == tl)
			p->tl_last = NULL;
	}
	pthread_mutex_unlock(&p->lock);
}

pool_status_t pool_d2h_after_unseen(pool_t *p)
{
	for (struct tl *tl = p->tls; tl; tl = tl->next) {
		if (!tl->unseen)
			continue;
		pool_status_t st = pool_stream_after(p, p->tl_d2h, p->ops.d2h_stream,
						     (struct mark){ tl, tl->unseen });
		if (st)
			return st;
		if (tl->unseen <= tl->done)
			tl->unseen = 0;
	}
	return POOL_OK;
}

void pool_note_unseen_write(pool_t *p, void *stream)
{
	pthread_mutex_lock(&p->lock);
	p->epoch++;
	struct tl *tl = pool_tl(p, stream);
	tl->unseen = pool_mark_now(p, tl).seq;
	p->st.unseen_writes++;
	pthread_mutex_unlock(&p->lock);
}
