/* interpose/stats.h - the VMEM_STATS=1 summary printed at exit.
 *
 * Counters are process-wide atomics, cheap enough for every hook: calls
 * and time per call class (the op kinds of policy/event.h plus the
 * allocation calls), gauges with current / peak / total (mimalloc's
 * mi_stat_count_t), and plain counters the runtime feeds (misses,
 * evictions, bytes moved).  The table is printed through an output
 * callback so tests can capture it.  All functions are thread-safe and
 * never allocate.
 */
#ifndef VMEM_INTERPOSE_STATS_H
#define VMEM_INTERPOSE_STATS_H

#include <stdint.h>

#include "policy/event.h"

/* Call classes: op kinds first, then the calls that are memory records
 * rather than ops. */
enum {
	STATS_CALL_MALLOC = VMEM_OP_COUNT,   /* cudaMalloc, cudaMallocAsync, cuMemAlloc* */
	STATS_CALL_FREE,                     /* cudaFree, cudaFreeAsync, cuMemFree* */
	STATS_CALL_MEMINFO,                  /* cudaMemGetInfo, cuMemGetInfo */
	STATS_CALL_VMM,                      /* cuMemCreate/Map/Unmap/Release/AddressReserve/Free */
	STATS_CALL_COUNT
};

/* Plain counters (monotonic totals). */
typedef enum {
	STATS_MISSES,             /* fault-ins: a touched range was not resident */
	STATS_EVICTIONS,          /* ranges evicted to host by the LRU */
	STATS_BYTES_FAULTED_IN,   /* bytes copied back by fault-ins */
	STATS_BYTES_EVICTED,      /* bytes copied out by evictions */
	STATS_OFFLOADS,           /* planned offloads issued */
	STATS_BYTES_OFFLOADED,
	STATS_PREFETCHES,         /* planned prefetches issued */
	STATS_BYTES_PREFETCHED,
	STATS_STALLS,             /* a call waited for a transfer on the host */
	STATS_STALL_NS,
	STATS_OOM,                /* allocations answered with cudaErrorMemoryAllocation */
	STATS_REFS_DROPPED,       /* refs a call could not hold (the call was refused) */
	STATS_CAPTURE_PASSTHROUGH,/* calls passed through because a stream was capturing */
	STATS_UNKNOWN_PARAMS,     /* launches whose parameter layout was unknown */
	STATS_ARGS_BOUNDED,       /* scanned kernel arguments whose extent the kernel's own
				     parameters bound (interpose/kernel_bounds.h) */
	STATS_ARGS_UNTOUCHED,     /* scanned words the kernel's parameters say it does not
				     touch (a foreach launch's leftover slots) */
	STATS_ARGS_CHUNKED,       /* of the bounded, foreach pointers bounded to the chunks
				     the launch's blocks name (narrower than the tensor) */
	/* convolutions (interpose/conv_exec.c) */
	STATS_CONV_MICRO,         /* convolutions run as µ-cuDNN configurations (WR/WD) */
	STATS_CONV_MICRO_CALLS,   /* cuDNN calls those made */
	STATS_CONV_RESCUED,       /* run with another algorithm: the chosen workspace did not fit */
	STATS_CONV_ANSWERED,      /* algorithm / workspace queries answered by vmem */
	STATS_CONV_MEASURED,      /* kernels benchmarked (micro-batch sizes x algorithms) */
	STATS_CONV_CACHED,        /* kernels whose benchmark came from VMEM_CACHE */
	STATS_CONV_MODEL_NS,      /* sum of the measured times of what the convolutions ran */
	STATS_WD_SOLVES,          /* WD integer programs solved */
	STATS_CONV_PLAN_ROOMS,    /* conv kernels whose limit the plan's room lowered */
	STATS_WD_SOLVE_NS,        /* time in the solver (all solves) */
	STATS_WD_VARS,            /* 0-1 variables after pruning (last solve) */
	STATS_WD_UNPRUNED,        /* configurations before pruning (last solve; saturates) */
	STATS_WD_OBJECTIVE_NS,    /* objective of the last solve: conv time per iteration */
	STATS_DNN_SPLIT,          /* per-image cuDNN calls run in slices of N (dnn_split.c) */
	STATS_DNN_SLICES,         /* the slices they ran as */
	STATS_UNSEEN_WRITES,      /* calls that may have written vmem memory unseen
				     (runtime_unseen_write) */
	STATS_COUNTER_COUNT
} stats_counter_t;

/* Gauges: current value with peak and total of increments. */
typedef enum {
	STATS_ALLOCATED,   /* bytes the application holds (requested sizes) */
	STATS_MAPPED,      /* physical bytes vmem has mapped for allocations */
	STATS_RESIDENT,    /* device bytes resident (mapped) */
	STATS_HOST,        /* pinned host bytes holding offloaded data */
	STATS_GAUGE_COUNT
} stats_gauge_t;

/* One call of class `cls` spent `vmem_ns` inside vmem (hook time minus
 * the real call) and `real_ns` in the real function. */
void stats_call(int cls, uint64_t vmem_ns, uint64_t real_ns);
void stats_add(stats_counter_t c, uint64_t value);
/* Sets a counter that holds a last value rather than a total. */
void stats_set(stats_counter_t c, uint64_t value);
/* Adds `delta` (may be negative) to a gauge; positive deltas add to its
 * total; the peak follows the current value. */
void stats_gauge_add(stats_gauge_t g, int64_t delta);
/* Sets a gauge's current value (for values the runtime tracks itself). */
void stats_gauge_set(stats_gauge_t g, uint64_t value);

uint64_t stats_counter(stats_counter_t c);
uint64_t stats_gauge_current(stats_gauge_t g);
uint64_t stats_gauge_peak(stats_gauge_t g);
uint64_t stats_calls(int cls);

/* Prints the table, one line per call, through `out` (a line without its
 * newline).  Classes with no calls and counters that are zero are left
 * out.  The trace's dropped-record count is included when tracing. */
typedef void (*stats_output_fn)(const char *line, void *ctx);
void stats_print(stats_output_fn out, void *ctx);
/* Zeroes everything (tests). */
void stats_reset(void);

#endif
