/* tests/unit/pool/fake.h - a fake device for the pool's unit tests.
 *
 * Device memory is host memory the test controls: a physical chunk is a
 * malloc'd buffer, "mapping" records which buffer backs a page of the
 * fake virtual range, and test code reads and writes device addresses
 * through fake_read / fake_write, which fail loudly on an unmapped page.
 * Copies are queued on one FIFO in issue order; fences are positions in
 * it.  With hold set, nothing executes until a fence is waited on or the
 * test calls fake_drain, so a pool that unmaps a page while a copy of it
 * is queued, or reads a host slot before the copy into it ran, is caught.
 * Every violation is counted with a message; tests assert there are none.
 */
#ifndef VMEM_TEST_POOL_FAKE_H
#define VMEM_TEST_POOL_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "pool/pool.h"

typedef struct fake_op {
	struct fake_op *next;
	uint64_t seq;
	int dir;            /* 0: d2h, 1: h2d, 2: marker */
	uintptr_t va;
	void *host;
	uint64_t n;
} fake_op_t;

typedef struct {
	uint64_t chunk;
	uint64_t budget;
	uintptr_t va_base;
	uint64_t va_size;
	uint8_t **map;          /* per page: backing buffer or NULL */
	uint64_t created, peak_created, mapped, peak_mapped;
	uint64_t host_bytes, host_fail_after;  /* host_alloc fails past this (0 = never) */
	uint64_t issued, completed;
	fake_op_t *head, *tail;
	bool hold;
	uint64_t d2h_copies, h2d_copies, waits, unmaps;
	uint64_t fences;        /* fence_record calls so far */
	uint64_t fence_fail_at; /* that fence_record call (1-based) fails; 0 = never */
	uint64_t maps;          /* map calls so far */
	uint64_t map_fail_at;   /* that map call (1-based) fails like a dead context; 0 = never */
	uint64_t now;
	int errors;
	char last_error[256];
	uint64_t events[8];     /* per pool_event_kind_t */
} fake_t;

void fake_init(fake_t *f, uint64_t chunk, uint64_t budget, uint64_t va_size);
void fake_fini(fake_t *f);
pool_ops_t fake_ops(fake_t *f);
/* Executes every queued copy. */
void fake_drain(fake_t *f);
/* Device-side access (as a kernel would); returns false on an unmapped byte. */
bool fake_write(fake_t *f, uintptr_t va, const void *src, uint64_t n);
bool fake_read(fake_t *f, uintptr_t va, void *dst, uint64_t n);
bool fake_is_mapped(fake_t *f, uintptr_t va);

#endif
