/* interpose/stats.c - VMEM_STATS counters and the exit table (see stats.h).
 *
 * Relaxed atomics everywhere: the table is read once at exit, and a hook
 * must not pay for ordering it does not need.
 */
#include "interpose/stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "interpose/trace.h"

typedef struct {
	uint64_t calls;
	uint64_t vmem_ns;
	uint64_t real_ns;
} stats_class_t;

typedef struct {
	int64_t current;
	int64_t peak;
	uint64_t total;
} stats_gauge_val_t;

static stats_class_t st_calls[STATS_CALL_COUNT];
static uint64_t st_counters[STATS_COUNTER_COUNT];
static stats_gauge_val_t st_gauges[STATS_GAUGE_COUNT];

static const char *const counter_names[STATS_COUNTER_COUNT] = {
	[STATS_MISSES] = "misses (fault-ins)",
	[STATS_EVICTIONS] = "evictions",
	[STATS_BYTES_FAULTED_IN] = "bytes faulted in",
	[STATS_BYTES_EVICTED] = "bytes evicted",
	[STATS_OFFLOADS] = "offloads",
	[STATS_BYTES_OFFLOADED] = "bytes offloaded",
	[STATS_PREFETCHES] = "prefetches",
	[STATS_BYTES_PREFETCHED] = "bytes prefetched",
	[STATS_STALLS] = "stalls",
	[STATS_STALL_NS] = "stall time (ns)",
	[STATS_OOM] = "out-of-memory answers",
	[STATS_REFS_DROPPED] = "refs not held (calls refused)",
	[STATS_CAPTURE_PASSTHROUGH] = "calls passed through (capture)",
	[STATS_UNKNOWN_PARAMS] = "launches with unknown params",
	[STATS_ARGS_BOUNDED] = "kernel arguments bounded",
	[STATS_ARGS_UNTOUCHED] = "kernel arguments untouched",
	[STATS_ARGS_CHUNKED] = "  of which to the launch's chunks",
	[STATS_CONV_MICRO] = "convs run as micro-batches",
	[STATS_CONV_MICRO_CALLS] = "cuDNN calls of those",
	[STATS_CONV_RESCUED] = "convs rescued (ws did not fit)",
	[STATS_CONV_ANSWERED] = "conv queries answered by vmem",
	[STATS_DNN_SPLIT] = "calls run in slices of N",
	[STATS_DNN_SLICES] = "slices they ran as",
	[STATS_CONV_MEASURED] = "conv kernels benchmarked",
	[STATS_CONV_CACHED] = "conv kernels from VMEM_CACHE",
	[STATS_CONV_MODEL_NS] = "conv time measured (ns)",
	[STATS_WD_SOLVES] = "WD solves",
	[STATS_CONV_PLAN_ROOMS] = "conv limits lowered by the plan",
	[STATS_WD_SOLVE_NS] = "WD solver time (ns)",
	[STATS_WD_VARS] = "WD variables after pruning",
	[STATS_WD_UNPRUNED] = "WD configs before pruning",
	[STATS_WD_OBJECTIVE_NS] = "WD objective (ns/iteration)",
	[STATS_UNSEEN_WRITES] = "possible unseen writes",
};

static const char *const gauge_names[STATS_GAUGE_COUNT] = {
	[STATS_ALLOCATED] = "allocated",
	[STATS_MAPPED] = "mapped",
	[STATS_RESIDENT] = "resident",
	[STATS_HOST] = "host (pinned)",
};

static const char *class_name(int cls)
{
	switch (cls) {
	case STATS_CALL_MALLOC: return "malloc";
	case STATS_CALL_FREE: return "free";
	case STATS_CALL_MEMINFO: return "meminfo";
	case STATS_CALL_VMM: return "vmm";
	default: return vmem_op_name((vmem_op_kind_t)cls);
	}
}

void stats_call(int cls, uint64_t vmem_ns, uint64_t real_ns)
{
	if (cls < 0 || cls >= STATS_CALL_COUNT)
		return;
	__atomic_fetch_add(&st_calls[cls].calls, 1, __ATOMIC_RELAXED);
	/* Times are 0 when nobody reads them (hook_set_timing): skip the
	 * contended adds. */
	if (vmem_ns)
		__atomic_fetch_add(&st_calls[cls].vmem_ns, vmem_ns, __ATOMIC_RELAXED);
	if (real_ns)
		__atomic_fetch_add(&st_calls[cls].real_ns, real_ns, __ATOMIC_RELAXED);
}

void stats_add(stats_counter_t c, uint64_t value)
{
	if ((unsigned)c < STATS_COUNTER_COUNT)
		__atomic_fetch_add(&st_counters[c], value, __ATOMIC_RELAXED);
}

void stats_set(stats_counter_t c, uint64_t value)
{
	if ((unsigned)c < STATS_COUNTER_COUNT)
		__atomic_store_n(&st_counters[c], value, __ATOMIC_RELAXED);
}

static void gauge_peak(stats_gauge_val_t *g, int64_t cur)
{
	int64_t peak = __atomic_load_n(&g->peak, __ATOMIC_RELAXED);

	while (cur > peak && !__atomic_compare_exchange_n(&g->peak, &peak, cur, true,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void stats_gauge_add(stats_gauge_t g, int64_t delta)
{
	stats_gauge_val_t *v;
	int64_t cur;

	if ((unsigned)g >= STATS_GAUGE_COUNT)
		return;
	v = &st_gauges[g];
	cur = __atomic_add_fetch(&v->current, delta, __ATOMIC_RELAXED);
	if (delta > 0) {
		__atomic_fetch_add(&v->total, (uint64_t)delta, __ATOMIC_RELAXED);
		gauge_peak(v, cur);
	}
}

void stats_gauge_set(stats_gauge_t g, uint64_t value)
{
	if ((unsigned)g >= STATS_GAUGE_COUNT)
		return;
	__atomic_store_n(&st_gauges[g].current, (int64_t)value, __ATOMIC_RELAXED);
	gauge_peak(&st_gauges[g], (int64_t)value);
}

uint64_t stats_counter(stats_counter_t c)
{
	return (unsigned)c < STATS_COUNTER_COUNT ? __atomic_load_n(&st_counters[c], __ATOMIC_RELAXED) : 0;
}

uint64_t stats_gauge_current(stats_gauge_t g)
{
	int64_t v = (unsigned)g < STATS_GAUGE_COUNT ? __atomic_load_n(&st_gauges[g].current, __ATOMIC_RELAXED) : 0;

	return v > 0 ? (uint64_t)v : 0;
}

uint64_t stats_gauge_peak(stats_gauge_t g)
{
	int64_t v = (unsigned)g < STATS_GAUGE_COUNT ? __atomic_load_n(&st_gauges[g].peak, __ATOMIC_RELAXED) : 0;

	return v > 0 ? (uint64_t)v : 0;
}

uint64_t stats_calls(int cls)
{
	if (cls < 0 || cls >= STATS_CALL_COUNT)
		return 0;
	return __atomic_load_n(&st_calls[cls].calls, __ATOMIC_RELAXED);
}

void stats_reset(void)
{
	memset(st_calls, 0, sizeof(st_calls));
	memset(st_counters, 0, sizeof(st_counters));
	memset(st_gauges, 0, sizeof(st_gauges));
}

void stats_print(stats_output_fn out, void *ctx)
{
	char line[256];

	out("vmem: stats ----------------------------------------------------------", ctx);
	snprintf(line, sizeof(line), "vmem: %-16s %12s %14s %12s %14s", "call kind", "calls",
		 "in vmem (us)", "per call(ns)", "in CUDA (us)");
	out(line, ctx);
	for (int i = 0; i < STATS_CALL_COUNT; i++) {
		stats_class_t c;

		c.calls = __atomic_load_n(&st_calls[i].calls, __ATOMIC_RELAXED);
		if (c.calls == 0)
			continue;
		c.vmem_ns = __atomic_load_n(&st_calls[i].vmem_ns, __ATOMIC_RELAXED);
		c.real_ns = __atomic_load_n(&st_calls[i].real_ns, __ATOMIC_RELAXED);
		snprintf(line, sizeof(line), "vmem: %-16s %12" PRIu64 " %14.1f %12" PRIu64 " %14.1f",
			 class_name(i), c.calls, c.vmem_ns / 1e3, c.vmem_ns / c.calls,
			 c.real_ns / 1e3);
		out(line, ctx);
	}
	snprintf(line, sizeof(line), "vmem: %-16s %16s %16s %16s", "bytes", "current", "peak", "total");
	out(line, ctx);
	for (int g = 0; g < STATS_GAUGE_COUNT; g++) {
		uint64_t total = __atomic_load_n(&st_gauges[g].total, __ATOMIC_RELAXED);

		if (total == 0 && stats_gauge_peak((stats_gauge_t)g) == 0)
			continue;
		snprintf(line, sizeof(line), "vmem: %-16s %16" PRIu64 " %16" PRIu64 " %16" PRIu64,
			 gauge_names[g], stats_gauge_current((stats_gauge_t)g),
			 stats_gauge_peak((stats_gauge_t)g), total);
		out(line, ctx);
	}
	for (int c = 0; c < STATS_COUNTER_COUNT; c++) {
		uint64_t v = stats_counter((stats_counter_t)c);

		if (v == 0)
			continue;
		snprintf(line, sizeof(line), "vmem: %-32s %16" PRIu64, counter_names[c], v);
		out(line, ctx);
	}
	if (trace_enabled() || trace_dropped() > 0) {
		snprintf(line, sizeof(line), "vmem: %-32s %16" PRIu64, "trace records written", trace_written());
		out(line, ctx);
		snprintf(line, sizeof(line), "vmem: %-32s %16" PRIu64, "trace records dropped", trace_dropped());
		out(line, ctx);
	}
}
