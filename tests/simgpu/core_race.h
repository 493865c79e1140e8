/* tests/simgpu/core_race.h - the happens-before race checker's pure core:
 * vector clocks and per-object shadow memory.
 *
 * The simulated GPU executes every op at once, on the calling thread, when
 * it is submitted.  That is one valid serialisation of CUDA's stream
 * order, so a program that forgets a cudaStreamWaitEvent, or unmaps memory
 * a copy still reads, still gets the right bytes here, while on a GPU it
 * reads garbage.  This checker makes such programs fail: it judges every
 * access by the order CUDA guarantees, not by the order the simulator
 * happened to execute in.  It is the vector-clock algorithm of data-race
 * detectors (FastTrack, PLDI 2009; ThreadSanitizer v2), with streams and
 * the host as the threads, as PyTorch's CUDA sanitizer (torch.cuda.
 * _sanitizer) applies it to streams:
 *
 *   - every agent (the host, each stream) has a vector clock; an op on a
 *     stream ticks that stream's own entry, and its accesses carry the
 *     epoch (stream, clock);
 *   - synchronisation joins clocks: cudaEventRecord snapshots the stream's
 *     clock into the event, cudaStreamWaitEvent joins the event's into the
 *     stream, a host synchronisation joins a stream's or an event's into
 *     the host's, and every op joins the host's clock when it is
 *     submitted (what the host did before issuing an op happens before it);
 *   - memory carries a shadow: per byte range, the last write's epoch and
 *     the reads since (one per agent: a later read of the same agent
 *     dominates an earlier one);
 *   - an access races with an earlier one from another agent unless the
 *     earlier epoch is covered by the accessor's clock (clock[agent] >=
 *     epoch.clock): a read against the last write, a write against the
 *     last write and every read since.
 *
 * This file is pure (no locks, no I/O, no CUDA): core.c owns the agents,
 * the translation of addresses to physical objects and the reports, and
 * calls these under its mutex.  Shadow ranges are byte-exact, so two
 * tensors side by side in one allocation are never confused.
 */
#ifndef SIMGPU_CORE_RACE_H
#define SIMGPU_CORE_RACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "simgpu.h"    /* SIMGPU_API and the access modes SIMGPU_ACC_* */

/* ---- vector clocks: entry i is what the owner knows of agent i ---- */
typedef struct {
	uint32_t n, cap;
	uint32_t *c;
} simgpu_vc_t;

SIMGPU_API uint32_t simgpu_vc_get(const simgpu_vc_t *v, uint32_t agent);
/* v[agent]++; 0, or -1 when out of memory (v unchanged). */
SIMGPU_API int simgpu_vc_tick(simgpu_vc_t *v, uint32_t agent);
/* d = max(d, s) entry by entry; 0 or -1 (out of memory). */
SIMGPU_API int simgpu_vc_join(simgpu_vc_t *d, const simgpu_vc_t *s);
/* d = s; 0 or -1. */
SIMGPU_API int simgpu_vc_copy(simgpu_vc_t *d, const simgpu_vc_t *s);
SIMGPU_API void simgpu_vc_free(simgpu_vc_t *v);

/* ---- who accessed: an agent at a clock, with the op's name and its
 * call number (a global sequence the simulator counts) for reports. */
typedef struct {
	uint32_t agent;
	uint32_t clock;
	uint64_t seq;
	const char *op;         /* static string; NULL: none recorded */
} simgpu_epoch_t;

/* True when `e` happens before an agent whose clock is `vc` (or is that
 * agent's own earlier access). */
SIMGPU_API bool simgpu_epoch_ordered(const simgpu_epoch_t *e,
				     const simgpu_vc_t *vc, uint32_t self);

typedef enum {
	SIMGPU_RACE_NONE,
	SIMGPU_RACE_RAW,        /* reads what another agent wrote */
	SIMGPU_RACE_WAW,        /* overwrites what another agent wrote */
	SIMGPU_RACE_WAR,        /* writes what another agent still reads */
} simgpu_race_kind_t;

/* The first conflict of an access: the key range (inside the shadowed
 * object) where it holds, and the earlier access. */
typedef struct {
	simgpu_race_kind_t kind;
	uint64_t base, size;
	simgpu_epoch_t prior;
} simgpu_race_t;

/* Reads remembered per byte range: one per agent; past this many
 * concurrent readers the oldest is forgotten (a race with it may then go
 * unreported; never a false one). */
#define SIMGPU_SHADOW_READS 6

typedef struct simgpu_shadow_seg {
	uint64_t base, size;
	simgpu_epoch_t w;       /* w.op == NULL: no write recorded */
	uint32_t nr;
	simgpu_epoch_t r[SIMGPU_SHADOW_READS];
} simgpu_shadow_seg_t;

/* The shadow of one memory object (a physical allocation, a pinned host
 * range): disjoint segments sorted by base, in the object's own offsets.
 * Bytes never accessed have no segment.  Zero-initialise to create. */
typedef struct {
	simgpu_shadow_seg_t *a;
	size_t n, cap;
} simgpu_shadow_t;

/* Checks an access of [base, base+size) in mode R, W or RW by `who`,
 * whose vector clock is `vc`, then records it.  Returns 1 and fills
 * *race with the first conflict (lowest address; the contiguous bytes
 * that conflict with that same earlier op), 0 when ordered, -1 when out
 * of memory (nothing recorded). */
SIMGPU_API int simgpu_shadow_access(simgpu_shadow_t *s, uint64_t base,
				    uint64_t size, unsigned mode,
				    const simgpu_epoch_t *who,
				    const simgpu_vc_t *vc, simgpu_race_t *race);
/* A host-side hazard check (unmap, free): true and *race (kind WAW or
 * WAR, as if the host wrote) when some access to [base, base+size) is
 * not ordered before an agent `self` with clock `vc`.  Records nothing. */
SIMGPU_API bool simgpu_shadow_check(const simgpu_shadow_t *s, uint64_t base,
				    uint64_t size, const simgpu_vc_t *vc,
				    uint32_t self, simgpu_race_t *race);
/* Forgets [base, base+size) (memory freed, or its race reported). */
SIMGPU_API void simgpu_shadow_clear(simgpu_shadow_t *s, uint64_t base,
				    uint64_t size);
SIMGPU_API void simgpu_shadow_free(simgpu_shadow_t *s);

#endif
