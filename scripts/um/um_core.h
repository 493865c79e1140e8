/* scripts/um/um_core.h - the unified-memory baseline's bookkeeping: a
 * budget enforced by a balloon, and a hard cap on managed memory.
 *
 * What it is for: issue 14 compares vmem with what a user has today, and
 * one of those is CUDA unified memory: allocate everything with
 * cudaMallocManaged and let the driver page it between host and device.
 * To compare at the same device budget as vmem, the device must look
 * smaller than it is.  The preload (um_preload.c) turns every cudaMalloc
 * of the application (PyTorch's caching allocator) into cudaMallocManaged
 * and, at the first one, takes a *balloon*: one plain cudaMalloc of
 * (free device memory - budget).  Plain device memory is never evicted, so
 * managed pages have at most `budget` bytes of device memory and spill to
 * the host beyond it, exactly as they would on a card of that size.
 *
 * The hard rule (the device machine's README): never ask for more managed
 * memory than the card has free, or the GPU can hang.  `limit` is the free
 * device memory seen before the balloon (never above the card's total);
 * an allocation that would take the managed total above it is refused
 * (cudaErrorMemoryAllocation, which PyTorch turns into a clean
 * OutOfMemoryError) and cudaMallocManaged is never called for it.
 *
 * This core is pure: CUDA is reached through um_ops_t (the preload fills
 * it with the real cudart calls, the unit test with fakes), messages go
 * through ops->message.  Not thread-safe by itself: the preload holds one
 * mutex around every call.
 */
#ifndef VMEM_UM_CORE_H
#define VMEM_UM_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CUDA status codes the core needs (cudaError_t values). */
#define UM_CUDA_SUCCESS 0
#define UM_CUDA_ERROR_MEMORY_ALLOCATION 2

/* Live managed allocations tracked at once (PyTorch's caching allocator
 * makes tens to a few thousand segments). */
#define UM_MAX_LIVE 65536

typedef struct {
	/* cudaMemGetInfo. */
	int (*mem_get_info)(void *ctx, size_t *free_b, size_t *total_b);
	/* Plain cudaMalloc (the balloon). */
	int (*malloc_device)(void *ctx, void **p, size_t n);
	/* cudaMallocManaged(p, n, cudaMemAttachGlobal). */
	int (*malloc_managed)(void *ctx, void **p, size_t n);
	/* cudaFree (managed or not). */
	int (*free)(void *ctx, void *p);
	/* Leaves cudaErrorMemoryAllocation as CUDA's last error, as a real
	 * failed cudaMalloc would (callers read cudaGetLastError). */
	void (*set_last_error_oom)(void *ctx);
	/* One line of text for the user (no newline). */
	void (*message)(void *ctx, const char *line);
	void *ctx;
} um_ops_t;

typedef struct {
	uint64_t budget;    /* device bytes managed pages may use; 0: no balloon */
	bool stats;         /* print the stats line at exit */
} um_config_t;

typedef enum {
	UM_OK = 0,
	UM_REFUSED,         /* would pass the managed-memory cap: not asked for */
	UM_CUDA_ERROR,      /* CUDA said no; its code is returned alongside */
	UM_NOT_STARTED,     /* start-up failed earlier: every allocation refused */
	UM_TABLE_FULL,      /* more than UM_MAX_LIVE live allocations */
} um_status_t;

typedef struct {
	void *ptr;
	uint64_t bytes;
} um_live_t;

typedef struct {
	um_config_t cfg;
	const um_ops_t *ops;
	bool started;       /* start-up ran (successfully or not) */
	bool failed;        /* start-up failed: refuse everything */
	uint64_t free_at_start;
	uint64_t total;
	uint64_t limit;     /* managed bytes never to be exceeded */
	uint64_t balloon;   /* bytes the balloon holds */
	void *balloon_ptr;
	uint64_t managed;   /* managed bytes live now */
	uint64_t managed_peak;
	uint64_t allocs, frees, refused, cuda_errors;
	uint64_t largest_refused;
	unsigned messages;  /* refusal messages printed (capped) */
	uint64_t live_count;
	um_live_t live[UM_MAX_LIVE];
} um_state_t;

/* Bytes of "123", "64K", "1.5G", "8GiB" (binary suffixes, as vmem-run and
 * VMEM_DEVICE_LIMIT); 0 on success, -1 when not a size, -2 on overflow. */
int um_parse_size(const char *s, uint64_t *out);

/* Reads VMEM_UM_BUDGET (a size; unset or empty: no balloon) and
 * VMEM_UM_STATS (0 or 1, default 1) through `get`.  Returns 0, or -1 after
 * writing what was wrong into err (size errlen). */
typedef const char *(*um_getenv_fn)(const char *name, void *ctx);
int um_config_read(um_config_t *cfg, um_getenv_fn get, void *get_ctx, char *err, size_t errlen);

/* Resets `st` (it is large: keep it static) with its configuration and
 * operations.  Nothing touches CUDA until the first um_alloc. */
void um_init(um_state_t *st, const um_config_t *cfg, const um_ops_t *ops);

/* Start-up, run by the first um_alloc: measures free memory, takes the
 * balloon, sets the cap.  Exposed for tests; idempotent. */
um_status_t um_start(um_state_t *st);

/* One allocation of n bytes (n > 0).  UM_OK: *p holds managed memory.
 * UM_REFUSED / UM_NOT_STARTED / UM_TABLE_FULL: nothing was asked of CUDA
 * except setting the last error; *cuda_status is
 * cudaErrorMemoryAllocation.  UM_CUDA_ERROR: cudaMallocManaged failed
 * with *cuda_status. */
um_status_t um_alloc(um_state_t *st, void **p, size_t n, int *cuda_status);

/* Forgets a managed allocation; returns true when `p` was one (the caller
 * then frees it with the real cudaFree either way). */
bool um_forget(um_state_t *st, void *p);

/* The stats as one JSON object (no newline) into buf. */
void um_stats_json(const um_state_t *st, char *buf, size_t len);

const char *um_strerror(um_status_t s);

#endif
