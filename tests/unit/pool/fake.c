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
	return access_range(f, va, (void *)src, n, true);
}

bool fake_read(fake_t *f, uintptr_t va, void *dst, uint64_t n)
{
	return access_range(f, va, dst, n, false);
}

bool fake_is_mapped(fake_t *f, uintptr_t va)
{
	uint8_t **s = page_slot(f, va);
	return s && *s;
}

static void run_one(fake_t *f, fake_op_t *op)
{
	if (op->dir == 0)
		access_range(f, op->va, op->host, op->n, false);
	else if (op->dir == 1)
		access_range(f, op->va, op->host, op->n, true);
	f->completed = op->seq;
}

static void run_until(fake_t *f, uint64_t seq)
{
	while (f->head && f->head->seq <= seq) {
		fake_op_t *op = f->head;
		f->head = op->next;
		if (!f->head)
			f->tail = NULL;
		run_one(f, op);
		free(op);
	}
	if (f->completed < seq)
		f->completed = seq;
}

void fake_drain(fake_t *f)
{
	run_until(f, f->issued);
}

static void enqueue(fake_t *f, int dir, uintptr_t va, void *host, uint64_t n)
{
	fake_op_t *op = calloc(1, sizeof(*op));
	op->seq = ++f->issued;
	op->dir = dir;
	op->va = va;
	op->host = host;
	op->n = n;
	if (f->tail)
		f->tail->next = op;
	else
		f->head = op;
	f->tail = op;
	if (!f->hold)
		run_until(f, op->seq);
}

static int f_va_reserve(void *ctx, uint64_t size, uint64_t align, uintptr_t *base)
{
	fake_t *f = ctx;
	(void)align;
	if (size != f->va_size)
		violation(f, "va_reserve of %lu, expected %lu", (unsigned long)size, (unsigned long)f->va_size);
	*base = f->va_base;
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
	if (size != f->chunk)
		violation(f, "chunk of %lu bytes, chunk size is %lu", (unsigned long)size, (unsigned long)f->chunk);
	if (f->created + size > f->budget) {
		violation(f, "physical memory %lu + %lu would exceed the budget %lu",
			  (unsigned long)f->created, (unsigned long)size, (unsigned long)f->budget);
		return POOL_ENOMEM;
	}
	uint8_t *b = malloc(size);
	memset(b, 0xee, size);
	f->created += size;
	if (f->created > f->peak_created)
		f->peak_created = f->created;
	*h = (uint64_t)(uintptr_t)b;
	return 0;
}

static void f_chunk_release(void *ctx, uint64_t h)
{
	fake_t *f = ctx;
	free((void *)(uintptr_t)h);
	f->created -= f->chunk;
}

static int f_map(void *ctx, uintptr_t va, uint64_t size, uint64_t h)
{
	fake_t *f = ctx;
	uint8_t **s = page_slot(f, va);
	if (!s || (va - f->va_base) % f->chunk || size != f->chunk) {
		violation(f, "map of a bad range 0x%lx+%lu", (unsigned long)va, (unsigned long)size);
		return POOL_EDEVICE;
	}
	if (++f->maps == f->map_fail_at)
		return POOL_EDEVICE;
	if (*s)
		violation(f, "map over a mapped page 0x%lx", (unsigned long)va);
	for (uint64_t i = 0; i < f->va_size / f->chunk; i++)
		if (f->map[i] == (uint8_t *)(uintptr_t)h)
			violation(f, "chunk mapped twice (at 0x%lx too)", (unsigned long)(f->va_base + i * f->chunk));
	*s = (uint8_t *)(uintptr_t)h;
	f->mapped += size;
	if (f->mapped > f->peak_mapped)
		f->peak_mapped = f->mapped;
	return 0;
}

static int f_unmap(void *ctx, uintptr_t va, uint64_t size)
{
	fake_t *f = ctx;
	uint8_t **s = page_slot(f, va);
	if (!s || !*s) {
		violation(f, "unmap of an unmapped page 0x%lx", (unsigned long)va);
		return POOL_EDEVICE;
	}
	for (fake_op_t *op = f->head; op; op = op->next)
		if (op->dir != 2 && op->va < va + size && va < op->va + op->n)
			violation(f, "unmap of 0x%lx while a copy of it is still queued", (unsigned long)va);
	*s = NULL;
	f->mapped -= size;
	f->unmaps++;
	return 0;
}

static int f_host_alloc(void *ctx, uint64_t size, void **p)
{
	fake_t *f = ctx;
	if (f->host_fail_after && f->host_bytes + size > f->host_fail_after)
		return POOL_ENOMEM;
	*p = malloc(size);
	memset(*p, 0xdd, size);
	f->host_bytes += size;
	return 0;
}

static void f_host_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int f_copy_d2h(void *ctx, void *dst, uintptr_t src, uint64_t n)
{
	fake_t *f = ctx;
	f->d2h_copies++;
	enqueue(f, 0, src, dst, n);
	return 0;
}

static int f_copy_h2d(void *ctx, uintptr_t dst, const void *src, uint64_t n)
{
	fake_t *f = ctx;
	f->h2d_copies++;
	enqueue(f, 1, dst, (void *)src, n);
	return 0;
}

static int f_fence_record(void *ctx, void *stream, bool all, void **fence)
{
	fake_t *f = ctx;
	(void)stream;
	(void)all;
	if (++f->fences == f->fence_fail_at)
		return POOL_EDEVICE;   /* an event record the device refused */
	enqueue(f, 2, 0, NULL, 0);
	*fence = (void *)(uintptr_t)f->issued;
	return 0;
}

static int f_fence_query(void *ctx, void *fence)
{
	fake_t *f = ctx;
	return f->completed >= (uint64_t)(uintptr_t)fence;
}

static int f_fence_wait(void *ctx, void *fence)
{
	fake_t *f = ctx;
	f->waits++;
	run_until(f, (uint64_t)(uintptr_t)fence);
	return 0;
}

static void f_fence_destroy(void *ctx, void *fence)
{
	(void)ctx;
	(void)fence;
}

static int f_stream_wait(void *ctx, void *stream, void *fence)
{
	(void)ctx;
	(void)stream;
	(void)fence;
	return 0;   /* one FIFO: every stream is already ordered */
}

static uint64_t f_now(void *ctx)
{
	fake_t *f = ctx;
	return f->now += 1000;
}

static void f_record(void *ctx, const pool_event_t *ev)
{
	fake_t *f = ctx;
	if ((unsigned)ev->kind < 8)
		f->events[ev->kind]++;
	if (ev->resident > f->budget)
		violation(f, "event reports %lu resident bytes over the budget %lu",
			  (unsigned long)ev->resident, (unsigned long)f->budget);
}

void fake_init(fake_t *f, uint64_t chunk, uint64_t budget, uint64_t va_size)
{
	memset(f, 0, sizeof(*f));
	f->chunk = chunk;
	f->budget = budget;
	f->va_base = 0x200000000000ull;
	f->va_size = va_size;
	f->map = calloc(va_size / chunk, sizeof(*f->map));
}

void fake_fini(fake_t *f)
{
	fake_drain(f);
	free(f->map);
}

pool_ops_t fake_ops(fake_t *f)
{
	static int d2h, h2d;
	return (pool_ops_t){
		.ctx = f, .d2h_stream = &d2h, .h2d_stream = &h2d,
		.va_reserve = f_va_reserve, .va_release = f_va_release,
		.chunk_create = f_chunk_create, .chunk_release = f_chunk_release,
		.map = f_map, .unmap = f_unmap,
		.host_alloc = f_host_alloc, .host_free = f_host_free,
		.copy_d2h = f_copy_d2h, .copy_h2d = f_copy_h2d,
		.fence_record = f_fence_record, .fence_query = f_fence_query,
		.fence_wait = f_fence_wait, .fence_destroy = f_fence_destroy,
		.stream_wait = f_stream_wait, .now_ns = f_now, .record = f_record,
	};
}
