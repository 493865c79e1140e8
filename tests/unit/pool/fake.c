/* tests/unit/pool/fake.c - see fake.h. */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void violation(fake_t *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->last_error, sizeof(f->last_error), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fake device: %s\n", f->last_error);
	f->errors++;
}

static uint8_t **page_slot(fake_t *f, uintptr_t va)
{
	if (va < f->va_base || va - f->va_base >= f->va_size)
		return NULL;
	return &f->map[(va - f->va_base) / f->chunk];
}

static bool access_range(fake_t *f, uintptr_t va, void *buf, uint64_t n, bool write)
{
	while (n) {
		uint8_t **s = page_slot(f, va);
		if (!s || !*s) {
			violation(f, "%s of unmapped device address 0x%lx", write ? "write" : "read",
				  (unsigned long)va);
			return false;
		}
		if (f->noaccess[s - f->map]) {
			violation(f, "%s of device address 0x%lx mapped without access granted",
				  write ? "write" : "read", (unsigned long)va);
			return false;
		}
		uint64_t in = (va - f->va_base) % f->chunk, k = f->chunk - in;
		if (k > n)
			k = n;
		if (write)
			memcpy(*s + in, buf, k);
		else
			memcpy(buf, *s + in, k);
		va += k;
		buf = (uint8_t *)buf + k;
		n -= k;
	}
	return true;
}

bool fake_write(fake_t *f, uintptr_t va, const void *src, uint64_t n)
{
	pthread_mutex_lock(&f->lock);
	bool ok = access_range(f, va, (void *)src, n, true);
	pthread_mutex_unlock(&f->lock);
	return ok;
}

bool fake_read(fake_t *f, uintptr_t va, void *dst, uint64_t n)
{
	pthread_mutex_lock(&f->lock);
	bool ok = access_range(f, va, dst, n, false);
	pthread_mutex_unlock(&f->lock);
	return ok;
}

bool fake_is_mapped(fake_t *f, uintptr_t va)
{
	pthread_mutex_lock(&f->lock);
	uint8_t **s = page_slot(f, va);
	bool ok = s && *s;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

/* ---------------------------------------------------------------- streams */

static fake_stream_t *stream_of(fake_t *f, void *id)
{
	for (int i = 0; i < f->nstreams; i++)
		if (f->streams[i].id == id)
			return &f->streams[i];
	if (f->nstreams == FAKE_STREAMS) {
		violation(f, "more than %d streams", FAKE_STREAMS);
		return &f->streams[0];
	}
	fake_stream_t *s = &f->streams[f->nstreams++];
	s->id = id;
	s->head = s->tail = NULL;
	return s;
}

static bool runnable(const fake_op_t *op)
{
	return op->kind != FAKE_WAIT || op->fence->pending == 0;
}

/* A copy into host memory that a copy issued before it has still to read
 * (a host slot given to another page too early): that copy would read the
 * new bytes. */
static void check_slot_overwrite(fake_t *f, const fake_op_t *op)
{
	for (int i = 0; i < f->nstreams; i++)
		for (const fake_op_t *o = f->streams[i].head; o; o = o->next)
			if (o->kind == FAKE_H2D && o->seq < op->seq &&
			    (uint8_t *)o->host < (uint8_t *)op->host + op->n &&
			    (uint8_t *)op->host < (uint8_t *)o->host + o->n)
				violation(f, "a copy out overwrote host memory %p that a copy in issued "
					  "before it had still to read", op->host);
}

static void run_one(fake_t *f, fake_op_t *op)
{
	switch (op->kind) {
	case FAKE_D2H:
		check_slot_overwrite(f, op);
		access_range(f, op->va, op->host, op->n, false);
		break;
	case FAKE_H2D:
		access_range(f, op->va, op->host, op->n, true);
		break;
	case FAKE_KERNEL:
		access_range(f, op->va, op->host, op->n, op->write);
		if (op->write)
			free(op->host);
		break;
	case FAKE_MARK:
		op->fence->pending--;
		break;
	}
}

static uint64_t rnd(fake_t *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

/* Runs one operation: the oldest runnable head, or a random one. */
static bool step(fake_t *f)
{
	fake_stream_t *cand[FAKE_STREAMS];
	int n = 0;
	for (int i = 0; i < f->nstreams; i++)
		if (f->streams[i].head && runnable(f->streams[i].head))
			cand[n++] = &f->streams[i];
	if (!n)
		return false;
	fake_stream_t *s = cand[0];
	if (f->shuffle && f->hold) {
		s = cand[rnd(f) % (uint64_t)n];
	} else if (f->newest_first && f->hold) {
		for (int i = 1; i < n; i++)
			if (cand[i]->head->seq > s->head->seq)
				s = cand[i];
	} else {
		for (int i = 1; i < n; i++)
			if (cand[i]->head->seq < s->head->seq)
				s = cand[i];
	}
	fake_op_t *op = s->head;
	s->head = op->next;
	if (!s->head)
		s->tail = NULL;
	run_one(f, op);
	free(op);
	return true;
}

static bool queue_empty(fake_t *f)
{
	for (int i = 0; i < f->nstreams; i++)
		if (f->streams[i].head)
			return false;
	return true;
}

static void drain_locked(fake_t *f)
{
	while (step(f))
		;
	if (!queue_empty(f))
		violation(f, "deadlock: operations queued behind waits that never complete");
}

void fake_drain(fake_t *f)
{
	pthread_mutex_lock(&f->lock);
	drain_locked(f);
	pthread_mutex_unlock(&f->lock);
}

int fake_step(fake_t *f, int n)
{
	int k = 0;
	pthread_mutex_lock(&f->lock);
	while (k < n && step(f))
		k++;
	pthread_mutex_unlock(&f->lock);
	return k;
}

int fake_queued(fake_t *f)
{
	int n = 0;
	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < f->nstreams; i++)
		for (fake_op_t *op = f->streams[i].head; op; op = op->next)
			n++;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static fake_op_t *enqueue(fake_t *f, void *stream, int kind, uintptr_t va, void *host, uint64_t n)
{
	fake_stream_t *s = stream_of(f, stream);
	fake_op_t *op = calloc(1, sizeof(*op));
	op->seq = ++f->issued;
	op->kind = kind;
	op->va = va;
	op->host = host;
	op->n = n;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	return op;
}

static void settle(fake_t *f)
{
	if (!f->hold)
		while (step(f))
			;
}

void fake_kernel_write(fake_t *f, void *stream, uintptr_t va, const void *src, uint64_t n)
{
	pthread_mutex_lock(&f->lock);
	void *copy = malloc(n);
	memcpy(copy, src, n);
	fake_op_t *op = enqueue(f, stream, FAKE_KERNEL, va, copy, n);
	op->write = true;
	f->kernels++;
	settle(f);
	pthread_mutex_unlock(&f->lock);
}

void fake_kernel_read(fake_t *f, void *stream, uintptr_t va, void *dst, uint64_t n)
{
	pthread_mutex_lock(&f->lock);
	enqueue(f, stream, FAKE_KERNEL, va, dst, n);
	f->kernels++;
	settle(f);
	pthread_mutex_unlock(&f->lock);
}

void fake_app_order(fake_t *f, void *from, void *to)
{
	if (from == to)
		return;
	pthread_mutex_lock(&f->lock);
	fake_fence_t *ff = calloc(1, sizeof(*ff));
	ff->all_next = f->fences_all;
	f->fences_all = ff;
	enqueue(f, from, FAKE_MARK, 0, NULL, 0)->fence = ff;
	ff->pending = 1;
	enqueue(f, to, FAKE_WAIT, 0, NULL, 0)->fence = ff;
	settle(f);
	pthread_mutex_unlock(&f->lock);
}

/* ------------------------------------------------------------------- ops */

static int f_va_reserve(void *ctx, uint64_t size, uint64_t align, uintptr_t *base)
{
	fake_t *f = ctx;
	(void)align;
	pthread_mutex_lock(&f->lock);
	if (size != f->va_size)
		violation(f, "va_reserve of %lu, expected %lu", (unsigned long)size, (unsigned long)f->va_size);
	*base = f->va_base;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void f_va_release(void *ctx, uintptr_t base, uint64_t size)
{
	(void)ctx;
	(void)base;
	(void)size;
}

static int f_chunk_create(void *ctx, uint64_t size, uint64_t *h)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (size != f->chunk)
		violation(f, "chunk of %lu bytes, chunk size is %lu", (unsigned long)size, (unsigned long)f->chunk);
	if (f->created + size > f->budget) {
		violation(f, "physical memory %lu + %lu would exceed the budget %lu",
			  (unsigned long)f->created, (unsigned long)size, (unsigned long)f->budget);
		rc = POOL_ENOMEM;
	} else {
		uint8_t *b = malloc(size);
		memset(b, 0xee, size);
		f->created += size;
		if (f->created > f->peak_created)
			f->peak_created = f->created;
		*h = (uint64_t)(uintptr_t)b;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void f_chunk_release(void *ctx, uint64_t h)
{
	fake_t *f = ctx;
	pthread_mutex_lock(&f->lock);
	free((void *)(uintptr_t)h);
	f->created -= f->chunk;
	pthread_mutex_unlock(&f->lock);
}

static int map_chunk(fake_t *f, uintptr_t va, uint64_t size, uint64_t h, bool access)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	uint8_t **s = page_slot(f, va);
	if (!s || (va - f->va_base) % f->chunk || size != f->chunk) {
		violation(f, "map of a bad range 0x%lx+%lu", (unsigned long)va, (unsigned long)size);
		rc = POOL_EDEVICE;
	} else if (++f->maps == f->map_fail_at) {
		rc = POOL_EDEVICE;
	} else {
		if (*s)
			violation(f, "map over a mapped page 0x%lx", (unsigned long)va);
		for (uint64_t i = 0; i < f->va_size / f->chunk && !f->alias_ok; i++)
			if (f->map[i] == (uint8_t *)(uintptr_t)h)
				violation(f, "chunk mapped twice (at 0x%lx too)",
					  (unsigned long)(f->va_base + i * f->chunk));
		*s = (uint8_t *)(uintptr_t)h;
		f->noaccess[s - f->map] = !access;
		f->mapped += size;
		if (f->mapped > f->peak_mapped)
			f->peak_mapped = f->mapped;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int f_map(void *ctx, uintptr_t va, uint64_t size, uint64_t h)
{
	return map_chunk(ctx, va, size, h, true);
}

static int f_map_only(void *ctx, uintptr_t va, uint64_t size, uint64_t h)
{
	return map_chunk(ctx, va, size, h, false);
}

/* The host memory of a slot mapped at va, as cuMemMap of a host-located
 * chunk: the page reads and writes the slot itself.  Not device memory:
 * not counted in `mapped`. */
static int f_map_slot(void *ctx, uintptr_t va, uint64_t size, void *slot)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	uint8_t **s = page_slot(f, va);
	if (!s || (va - f->va_base) % f->chunk || size != f->chunk || !slot) {
		violation(f, "slot map of a bad range 0x%lx+%lu", (unsigned long)va, (unsigned long)size);
		rc = POOL_EDEVICE;
	} else {
		if (*s)
			violation(f, "slot map over a mapped page 0x%lx", (unsigned long)va);
		for (uint64_t i = 0; i < f->va_size / f->chunk; i++)
			if (f->map[i] == slot)
				violation(f, "slot mapped twice (at 0x%lx too)",
					  (unsigned long)(f->va_base + i * f->chunk));
		*s = slot;
		f->noaccess[s - f->map] = 0;
		f->slotmap[s - f->map] = 1;
		f->slot_maps++;
		f->slot_mapped++;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* Access over [va, va+size): every page of it must be mapped. */
static int f_grant(void *ctx, uintptr_t va, uint64_t size)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if ((va - f->va_base) % f->chunk || !size || size % f->chunk) {
		violation(f, "grant of a bad range 0x%lx+%lu", (unsigned long)va, (unsigned long)size);
		rc = POOL_EDEVICE;
	} else if (++f->grants == f->grant_fail_at) {
		rc = POOL_EDEVICE;
	} else {
		for (uint64_t o = 0; o < size; o += f->chunk) {
			uint8_t **s = page_slot(f, va + o);
			if (!s || !*s) {
				violation(f, "grant over an unmapped page 0x%lx", (unsigned long)(va + o));
				rc = POOL_EDEVICE;
				break;
			}
		}
		for (uint64_t o = 0; !rc && o < size; o += f->chunk)
			f->noaccess[page_slot(f, va + o) - f->map] = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int f_unmap(void *ctx, uintptr_t va, uint64_t size)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	uint8_t **s = page_slot(f, va);
	if (!s || !*s) {
		violation(f, "unmap of an unmapped page 0x%lx", (unsigned long)va);
		rc = POOL_EDEVICE;
	} else {
		for (int i = 0; i < f->nstreams; i++)
			for (fake_op_t *op = f->streams[i].head; op; op = op->next)
				if ((op->kind == FAKE_D2H || op->kind == FAKE_H2D || op->kind == FAKE_KERNEL) &&
				    op->va < va + size && va < op->va + op->n)
					violation(f, "unmap of 0x%lx while %s on it is still queued",
						  (unsigned long)va, op->kind == FAKE_KERNEL ? "a kernel" : "a copy");
		*s = NULL;
		f->noaccess[s - f->map] = 0;
		if (f->slotmap[s - f->map]) {
			f->slotmap[s - f->map] = 0;
			f->slot_mapped--;
		} else {
			f->mapped -= size;
		}
		f->unmaps++;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int f_host_alloc(void *ctx, uint64_t size, void **p)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (f->host_fail_after && f->host_bytes + size > f->host_fail_after) {
		rc = POOL_ENOMEM;
	} else {
		*p = malloc(size);
		memset(*p, 0xdd, size);
		f->host_bytes += size;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void f_host_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void *g_d2h_id, *g_h2d_id;

static int f_copy_d2h(void *ctx, void *dst, uintptr_t src, uint64_t n)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (++f->d2h_copies == f->d2h_fail_at) {
		rc = POOL_EDEVICE;
	} else {
		enqueue(f, g_d2h_id, FAKE_D2H, src, dst, n);
		settle(f);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int f_copy_h2d(void *ctx, uintptr_t dst, const void *src, uint64_t n)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (++f->h2d_copies == f->h2d_fail_at) {
		rc = POOL_EDEVICE;
	} else {
		enqueue(f, g_h2d_id, FAKE_H2D, dst, (void *)src, n);
		settle(f);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* A fence on `stream`, or on every stream seen so far (and the legacy
 * stream NULL) when `all`: a marker on each. */
static int f_fence_record(void *ctx, void *stream, bool all, void **fence)
{
	fake_t *f = ctx;
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (++f->fences == f->fence_fail_at) {
		rc = POOL_EDEVICE;   /* an event record the device refused */
	} else {
		fake_fence_t *ff = calloc(1, sizeof(*ff));
		ff->all_next = f->fences_all;
		f->fences_all = ff;
		if (all) {
			stream_of(f, NULL);
			for (int i = 0; i < f->nstreams; i++) {
				void *id = f->streams[i].id;
				if (id == g_d2h_id || id == g_h2d_id)
					continue;
				enqueue(f, id, FAKE_MARK, 0, NULL, 0)->fence = ff;
				ff->pending++;
			}
		} else {
			enqueue(f, stream, FAKE_MARK, 0, NULL, 0)->fence = ff;
			ff->pending++;
		}
		ff->seq = f->issued;
		*fence = ff;
		settle(f);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int f_fence_query(void *ctx, void *fence)
{
	fake_t *f = ctx;
	fake_fence_t *ff = fence;
	pthread_mutex_lock(&f->lock);
	if (ff->destroyed)
		violation(f, "query of a destroyed fence");
	int r = f->query_fails ? -1 : ff->pending == 0;
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int f_fence_wait(void *ctx, void *fence)
{
	fake_t *f = ctx;
	fake_fence_t *ff = fence;
	if (f->on_wait)
		f->on_wait(f->on_wait_arg);
	pthread_mutex_lock(&f->lock);
	f->waits++;
	if (ff->destroyed)
		violation(f, "wait on a destroyed fence");
	int rc = 0;
	if (f->wait_fails) {
		rc = POOL_EDEVICE;
	} else {
		while (ff->pending && step(f))
			;
		if (ff->pending)
			violation(f, "wait on a fence that can never complete (deadlock)");
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void f_fence_destroy(void *ctx, void *fence)
{
	fake_t *f = ctx;
	fake_fence_t *ff = fence;
	pthread_mutex_lock(&f->lock);
	if (ff->destroyed)
		violation(f, "fence destroyed twice");
	ff->destroyed = true;
	pthread_mutex_unlock(&f->lock);
}

static int f_stream_wait(void *ctx, void *stream, void *fence)
{
	fake_t *f = ctx;
	pthread_mutex_lock(&f->lock);
	if (((fake_fence_t *)fence)->destroyed)
		violation(f, "stream wait on a destroyed fence");
	enqueue(f, stream, FAKE_WAIT, 0, NULL, 0)->fence = fence;
	f->stream_waits++;
	settle(f);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static uint64_t f_now(void *ctx)
{
	fake_t *f = ctx;
	return __atomic_add_fetch(&f->now, 1000, __ATOMIC_RELAXED);
}

static void f_record(void *ctx, const pool_event_t *ev)
{
	fake_t *f = ctx;
	pthread_mutex_lock(&f->lock);
	if ((unsigned)ev->kind < sizeof(f->events) / sizeof(f->events[0]))
		f->events[ev->kind]++;
	if (ev->resident > f->budget)
		violation(f, "event reports %lu resident bytes over the budget %lu",
			  (unsigned long)ev->resident, (unsigned long)f->budget);
	pthread_mutex_unlock(&f->lock);
}

void fake_init(fake_t *f, uint64_t chunk, uint64_t budget, uint64_t va_size)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	f->chunk = chunk;
	f->budget = budget;
	f->va_base = 0x200000000000ull;
	f->va_size = va_size;
	f->map = calloc(va_size / chunk, sizeof(*f->map));
	f->noaccess = calloc(va_size / chunk, 1);
	f->slotmap = calloc(va_size / chunk, 1);
	f->rng = 0x9e3779b97f4a7c15ull;
}

void fake_fini(fake_t *f)
{
	fake_drain(f);
	while (f->fences_all) {
		fake_fence_t *ff = f->fences_all;
		f->fences_all = ff->all_next;
		free(ff);
	}
	free(f->map);
	free(f->noaccess);
	free(f->slotmap);
	pthread_mutex_destroy(&f->lock);
}

pool_ops_t fake_ops(fake_t *f)
{
	static int d2h, h2d;
	g_d2h_id = &d2h;
	g_h2d_id = &h2d;
	return (pool_ops_t){
		.ctx = f, .d2h_stream = &d2h, .h2d_stream = &h2d,
		.va_reserve = f_va_reserve, .va_release = f_va_release,
		.chunk_create = f_chunk_create, .chunk_release = f_chunk_release,
		.map = f_map, .unmap = f_unmap,
		.map_only = f_map_only, .grant = f_grant, .map_slot = f_map_slot,
		.host_alloc = f_host_alloc, .host_free = f_host_free,
		.copy_d2h = f_copy_d2h, .copy_h2d = f_copy_h2d,
		.fence_record = f_fence_record, .fence_query = f_fence_query,
		.fence_wait = f_fence_wait, .fence_destroy = f_fence_destroy,
		.stream_wait = f_stream_wait, .now_ns = f_now, .record = f_record,
	};
}
