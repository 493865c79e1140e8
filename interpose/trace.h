/* interpose/trace.h - the VMEM_TRACE JSON Lines writer.
 *
 * One JSON object per line; the format is specified in docs/trace-format.md.
 * Records are formatted into a per-thread buffer and appended to a ring that
 * a background thread drains to the file, so a hook never waits on disk.
 * When the ring is full the record is dropped and counted (the closing
 * "end" record says how many).  An unwritable path is one warning and
 * tracing off.  All functions are no-ops when tracing is off, and are
 * thread-safe.
 */
#ifndef VMEM_INTERPOSE_TRACE_H
#define VMEM_INTERPOSE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/event.h"

/* Opens the trace and writes the header; called once from vmem_init. */
void trace_open(const char *path);
/* Flushes, writes the "end" record and closes (exit path). */
void trace_close(void);
bool trace_enabled(void);

/* Monotonic nanoseconds since vmem started (the trace's time base). */
uint64_t trace_now_ns(void);
/* Next event sequence number (shared by op and memory records). */
uint64_t trace_next_seq(void);

/* A resolved touched range: which allocation and where inside it. */
typedef struct {
	uint64_t alloc_id;   /* 0 = not vmem memory (foreign pointer) */
	uint64_t offset;
	uint64_t bytes;
	uintptr_t ptr;
	uint8_t access;      /* VMEM_ACCESS_* */
	const char *role;
} trace_ref_t;

/* One hooked call.  `api` is the function name ("cudnnConvolutionForward"),
 * `args_json` an optional preformatted JSON object body for op-specific
 * arguments (e.g. "\"algo\":1,\"ws\":1048576") or NULL. */
void trace_op(uint64_t seq, uint64_t t_ns, uint64_t dur_ns, vmem_op_kind_t kind,
	      const char *api, const void *stream, const trace_ref_t *refs,
	      int nrefs, const char *args_json);

/* Memory record kinds written by the runtime. */
typedef enum {
	TRACE_MEM_ALLOC, TRACE_MEM_FREE, TRACE_MEM_OFFLOAD, TRACE_MEM_PREFETCH,
	TRACE_MEM_FAULT_IN, TRACE_MEM_EVICT, TRACE_MEM_OOM,
} trace_mem_kind_t;

/* One memory event.  `resident`, `host`, `budget` are the totals after the
 * event (bytes mapped on the device, bytes held in pinned host memory, the
 * device budget), so a plot needs no replay. */
void trace_mem(trace_mem_kind_t kind, uint64_t alloc_id, uintptr_t ptr,
	       uint64_t offset, uint64_t bytes, uint64_t mapped,
	       const void *stream, uint64_t resident, uint64_t host,
	       uint64_t budget, const char *api);

#endif
