/* pool/pool_stats.c - status strings and the stats table of the pool. */
#include "pool/pool.h"

#include <inttypes.h>
#include <stdio.h>

const char *pool_strerror(pool_status_t st)
{
	switch (st) {
	case POOL_OK: return "success";
	case POOL_ENOMEM: return "device memory budget exhausted (nothing left to evict)";
	case POOL_EHOST: return "pinned host memory limit reached";
	case POOL_EVA: return "reserved virtual address range exhausted";
	case POOL_EINVAL: return "not an address the pool handed out";
	case POOL_EDEVICE: return "a device operation failed";
	case POOL_ECONFIG: return "inconsistent pool configuration";
	case POOL_ELOST: return "a read of bytes dropped as dead";
	}
	return "unknown pool status";
}

static void line3(pool_output_fn out, void *ctx, const char *name, const pool_stat_count_t *c)
{
	char buf[160];
	snprintf(buf, sizeof(buf), "  %-22s %14.1f %14.1f %14.1f MiB", name,
		 c->cur / 1048576.0, c->peak / 1048576.0, c->total / 1048576.0);
	out(buf, ctx);
}

static void line1(pool_output_fn out, void *ctx, const char *name, uint64_t v, const char *unit)
{
	char buf[160];
	if (unit)
		snprintf(buf, sizeof(buf), "  %-22s %14.1f %s", name, v / 1048576.0, unit);
	else
		snprintf(buf, sizeof(buf), "  %-22s %14" PRIu64, name, v);
	out(buf, ctx);
}

void pool_stats_print(const pool_stats_t *s, pool_output_fn out, void *ctx)
{
	char buf[160];
	snprintf(buf, sizeof(buf), "  %-22s %14s %14s %14s", "pool", "current", "peak", "total");
	out(buf, ctx);
	line3(out, ctx, "requested", &s->requested);
	line3(out, ctx, "reserved (rounded)", &s->reserved);
	line3(out, ctx, "resident", &s->resident);
	line3(out, ctx, "physical held", &s->held);
	line3(out, ctx, "host copies", &s->host);
	line3(out, ctx, "small slack", &s->small_slack);
	line3(out, ctx, "mapped from host", &s->host_mapped);
	uint64_t frag = s->reserved.peak > s->requested.peak ? s->reserved.peak - s->requested.peak : 0;
	line1(out, ctx, "internal frag. (peak)", frag, "MiB");
	line1(out, ctx, "pinned host obtained", s->host_allocated, "MiB");
	line1(out, ctx, "allocations", s->allocs, NULL);
	line1(out, ctx, "  of which small", s->small_allocs, NULL);
	line1(out, ctx, "frees", s->frees, NULL);
	line1(out, ctx, "misses (pages)", s->misses, NULL);
	line1(out, ctx, "faulted in", s->bytes_faulted_in, "MiB");
	line1(out, ctx, "  copies skipped (overwritten)", s->overwrites_skipped, NULL);
	line1(out, ctx, "  copies skipped (the rest dead)", s->dead_copies_skipped, NULL);
	line1(out, ctx, "  copies skipped (rest on host)", s->rests_kept, NULL);
	line1(out, ctx, "  rests brought back", s->rests_filled, NULL);
	line1(out, ctx, "  rests' bytes brought back", s->bytes_rest_filled, "MiB");
	line1(out, ctx, "  rests waited (unseen)", s->rest_waits, NULL);
	line1(out, ctx, "evictions (pages)", s->evictions, NULL);
	line1(out, ctx, "  of which clean", s->evictions_clean, NULL);
	line1(out, ctx, "evicted", s->bytes_evicted, "MiB");
	line1(out, ctx, "offloads (pages)", s->offloads, NULL);
	line1(out, ctx, "offloaded", s->bytes_offloaded, "MiB");
	line1(out, ctx, "prefetches (pages)", s->prefetches, NULL);
	line1(out, ctx, "prefetched", s->bytes_prefetched, "MiB");
	line1(out, ctx, "  pages skipped", s->prefetch_skipped, NULL);
	line1(out, ctx, "  waits for copies out", s->prefetch_waits, NULL);
	line1(out, ctx, "  copied out for room", s->prefetch_room, NULL);
	line1(out, ctx, "  evicted unused", s->held_evicted, NULL);
	line1(out, ctx, "discards", s->discards, NULL);
	line1(out, ctx, "dropped dead (pages)", s->pages_dropped, NULL);
	line1(out, ctx, "dropped dead", s->bytes_dropped, "MiB");
	line1(out, ctx, "reads of dropped bytes", s->lost_reads, NULL);
	line1(out, ctx, "  unknown extents over them", s->lost_maybe, NULL);
	line1(out, ctx, "evictions by the plan", s->evictions_planned, NULL);
	line1(out, ctx, "  handed to the next call", s->handoffs, NULL);
	line1(out, ctx, "  waits for a handoff", s->handoff_waits, NULL);
	line1(out, ctx, "host stalls", s->stalls, NULL);
	snprintf(buf, sizeof(buf), "  %-22s %14.3f ms", "stall time", s->stall_ns / 1e6);
	out(buf, ctx);
	line1(out, ctx, "out of memory", s->oom, NULL);
	line1(out, ctx, "calls run from host", s->host_map_calls, NULL);
	line1(out, ctx, "  waits to leave host", s->host_map_waits, NULL);
	line1(out, ctx, "chunks created", s->chunks_created, NULL);
	line1(out, ctx, "maps", s->maps, NULL);
	line1(out, ctx, "  unmaps", s->unmaps, NULL);
	line1(out, ctx, "  access grants", s->grants, NULL);
	line1(out, ctx, "ranges reused", s->ranges_reused, NULL);
	line1(out, ctx, "  split", s->ranges_split, NULL);
	line1(out, ctx, "  merged", s->ranges_merged, NULL);
	line1(out, ctx, "  reclaimed in part", s->ranges_trimmed, NULL);
	line1(out, ctx, "  before their free completed", s->ranges_pending, NULL);
	line1(out, ctx, "allocations mapped lazily", s->lazy_allocs, NULL);
	line1(out, ctx, "  pages left to first touch", s->lazy_pages, NULL);
	line1(out, ctx, "fences recorded", s->fences, NULL);
	line1(out, ctx, "unseen writes", s->unseen_writes, NULL);
	line1(out, ctx, "  copies they forced", s->stale_copies, NULL);
	line1(out, ctx, "  offloads they took back", s->offloads_kept, NULL);
}
