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
	TRACE_MEM_FAULT_IN, TRACE_MEM_EVICT, TRACE_MEM_OOM, TRACE_MEM_DROP,
	TRACE_MEM_HOST_MAP,
} trace_mem_kind_t;

/* One memory event.  `resident`, `host`, `budget` are the totals after the
 * event (bytes mapped on the device, bytes held in pinned host memory, the
 * device budget), so a plot needs no replay. */
void trace_mem(trace_mem_kind_t kind, uint64_t alloc_id, uintptr_t ptr,
	       uint64_t offset, uint64_t bytes, uint64_t mapped,
	       const void *stream, uint64_t resident, uint64_t host,
	       uint64_t budget, const char *api);

/* ---- Additions (interpose/trace.c). */

#define TRACE_FORMAT_VERSION 1

/* Records dropped because the ring was full (or the file failed), and
 * lines that reached the file. */
uint64_t trace_dropped(void);
uint64_t trace_written(void);

/* The runtime calls this from runtime_init with its reserved range and
 * device budget, before the trace is opened, so the header carries them
 * (vmem_startup opens the trace after runtime_init).  A zero size or
 * budget leaves that value as it was (null in the header when never set;
 * vmem_startup fills the budget from runtime_mem_get_info). */
void trace_set_va(uintptr_t base, uint64_t size, uint64_t budget);

/* trace_open with a ring of `ring_bytes`; without the writer thread when
 * `start_writer` is false (everything stays in the ring until
 * trace_close: tests fill the ring deterministically).  Returns 0, or -1
 * when the trace could not be opened (one warning logged). */
int trace_open_ring(const char *path, size_t ring_bytes, bool start_writer);

/* Appends one complete line (with its newline) to the ring.  Returns 0,
 * or -1 when tracing is off or the ring has no room (counted as dropped). */
int trace_append(const char *line, size_t len);

/* Formats one op record (with its newline) into buf; returns its length,
 * 0 when it does not fit.  Pure: exposed for tests and the benchmark. */
size_t trace_format_op(char *buf, size_t cap, uint64_t seq, uint64_t t_ns, uint64_t dur_ns,
		       long tid, vmem_op_kind_t kind, const char *api, const void *stream,
		       const trace_ref_t *refs, int nrefs, const char *args_json);

/* Provided by the shim (interpose/init.c; unit tests provide fakes):
 * JSON members (without braces, no leading comma) for the header --
 * "device", "cudnn", "cublas", "cudart" -- and for the "end" record
 * ("cudnn"/"cublas" versions once those libraries are loaded).  Called
 * from trace_open/trace_close with vmem's re-entry guard set. */
void trace_header_fields(char *buf, size_t len);
void trace_end_fields(char *buf, size_t len);

#endif
