/* tests/unit/pool/fake.h - a fake device for the pool's unit tests.
 *
 * Device memory is host memory the test controls: a physical chunk is a
 * malloc'd buffer, "mapping" records which buffer backs a page of the
 * fake virtual range, and test code reads and writes device addresses
 * through fake_read / fake_write, which fail loudly on an unmapped page.
 *
 * Streams are modelled: every stream (the pool's two copy streams and any
 * the test names) is a FIFO of operations - copies, fence markers,
 * stream-waits-fence and kernels the test queues with fake_kernel.  An
 * operation runs when it is at the head of its stream and, for a wait,
 * when the fence it waits for has completed.  With hold unset every
 * operation runs as soon as it can (a synchronous device).  With hold set
 * nothing runs until a fence is waited on or the test calls fake_drain,
 * and then the streams are interleaved in issue order, at random with
 * `shuffle` set, or newest first with `newest_first` (the adversary of a
 * missing wait): a pool that unmaps a page while an operation on it is
 * queued, copies before the write it should follow, or orders nothing
 * between two streams is caught.  Every violation is counted with a
 * message; tests assert there are none.
 *
 * A page mapped with map_only has no access until a grant covers it: a
 * read, write or copy of it before is a violation, as on a GPU.
 *
 * Faults can be injected: a map, a grant, a copy or a fence record that fails on
 * its n-th call, fence waits and queries that fail, and a hook called at
 * the start of every fence wait (outside the fake's lock) with which a
 * test stalls one thread in a wait.
 *
 * Thread-safety: every callback and helper takes the fake's own mutex,
 * so the pool may call fence_wait without its lock while other threads
 * call into the fake.
 */
#ifndef VMEM_TEST_POOL_FAKE_H
#define VMEM_TEST_POOL_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool/pool.h"

enum { FAKE_D2H, FAKE_H2D, FAKE_MARK, FAKE_WAIT, FAKE_KERNEL };

struct fake_fence;

typedef struct fake_op {
	struct fake_op *next;
	uint64_t seq;              /* issue order, over all streams */
	int kind;
	uintptr_t va;
	void *host;                /* copies: the host side; kernels: data written / read into */
	uint64_t n;
	bool write;                /* kernel: writes va (else reads it) */
	struct fake_fence *fence;  /* MARK: the fence it completes a part of; WAIT: waited for */
} fake_op_t;

typedef struct {
	void *id;
	fake_op_t *head, *tail;
} fake_stream_t;

typedef struct fake_fence {
	struct fake_fence *all_next;  /* every fence, freed at fake_fini */
	int pending;                  /* markers not yet run */
	uint64_t seq;                 /* issue order of its last marker */
	bool destroyed;
} fake_fence_t;

#define FAKE_STREAMS 16

typedef struct {
	pthread_mutex_t lock;
	uint64_t chunk;
	uint64_t budget;
	uintptr_t va_base;
	uint64_t va_size;
	uint8_t **map;          /* per page: backing buffer or NULL */
	uint8_t *noaccess;      /* per page: mapped by map_only, not granted yet */
	uint8_t *slotmap;       /* per page: mapped from a host slot (map_slot) */
	uint64_t slot_maps;     /* map_slot calls so far */
	uint64_t slot_mapped;   /* pages mapped from host slots now */
	uint64_t created, peak_created, mapped, peak_mapped;
	uint64_t host_bytes, host_fail_after;  /* host_alloc fails past this (0 = never) */
	uint64_t issued;
	fake_stream_t streams[FAKE_STREAMS];
	int nstreams;
	fake_fence_t *fences_all;
	bool hold;
	bool shuffle;           /* with hold: interleave streams at random */
	bool newest_first;      /* with hold: run the most recently issued head first */
	uint64_t rng;
	uint64_t d2h_copies, h2d_copies, waits, unmaps, stream_waits, kernels;
	uint64_t fences;        /* fence_record calls so far */
	uint64_t fence_fail_at; /* that fence_record call (1-based) fails; 0 = never */
	uint64_t maps;          /* map and map_only calls so far */
	uint64_t grants;        /* grant calls so far (a full map grants too, not counted) */
	uint64_t grant_fail_at; /* that grant call (1-based) fails; 0 = never */
	uint64_t map_fail_at;   /* that map call (1-based) fails like a dead context; 0 = never */
	uint64_t h2d_fail_at, d2h_fail_at;  /* that copy call (1-based, per direction) fails */
	bool alias_ok;          /* a chunk may be mapped at two addresses (cfg.handoff);
				   else that is a violation */
	bool wait_fails;        /* fence_wait answers an error (and waits for nothing) */
	bool query_fails;       /* fence_query answers an error */
	void (*on_wait)(void *arg);  /* called at the start of each fence_wait, unlocked */
	void *on_wait_arg;
	uint64_t now;
	int errors;
	char last_error[256];
	uint64_t events[16];    /* per pool_event_kind_t */
} fake_t;

void fake_init(fake_t *f, uint64_t chunk, uint64_t budget, uint64_t va_size);
void fake_fini(fake_t *f);
pool_ops_t fake_ops(fake_t *f);
/* Executes every queued operation (a deadlock is a violation). */
void fake_drain(fake_t *f);
/* Runs at most n queued operations (oldest runnable first); returns how many ran. */
int fake_step(fake_t *f, int n);
/* Device-side access at once (as a kernel the test runs synchronously);
 * returns false on an unmapped byte. */
bool fake_write(fake_t *f, uintptr_t va, const void *src, uint64_t n);
bool fake_read(fake_t *f, uintptr_t va, void *dst, uint64_t n);
bool fake_is_mapped(fake_t *f, uintptr_t va);
/* Queues a kernel on `stream` that writes n bytes of src (copied now) to
 * va, or reads va into dst when it runs (dst must outlive the drain). */
void fake_kernel_write(fake_t *f, void *stream, uintptr_t va, const void *src, uint64_t n);
void fake_kernel_read(fake_t *f, void *stream, uintptr_t va, void *dst, uint64_t n);
/* The application orders its own streams: `to` waits for the work queued
 * on `from` so far (an event the application records and waits on; not
 * counted in the pool's fences). */
void fake_app_order(fake_t *f, void *from, void *to);
/* Operations still queued on every stream together. */
int fake_queued(fake_t *f);

#endif
