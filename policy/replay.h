/* policy/replay.h - events as text, for replaying a trace through the policy.
 *
 * `vmem-trace events TRACE` writes a trace's calls in this format; the
 * policy's unit tests (tests/unit/policy/fixtures) and the dry-run tool
 * (policy/vmem_plan.c, `vmem-trace plan`) read it back.  One record a line:
 *
 *   # ...                        a comment
 *   A <alloc> <bytes>            an allocation
 *   F <alloc>                    a free
 *   E <seq> <tid> <stream hex> <op> <api> <dur_ns> <info> [| <range> ...]
 *      op:    a vmem_op_name ("conv_fwd", "sync", ...)
 *      info:  -  |  conv:dir:n:c:h:w:k:r:s:algo:ws:dtype  |  gemm:m:n:k:ta:tb:batch
 *             |  copy:bytes:kind  |  launch:func:grid_x:block_x
 *      range: <alloc>:<offset hex>:<bytes>:<acc>:<role>   acc r, w, w!, rw
 *             (a foreign range, alloc 0, carries its address as offset)
 *
 * Pure: parses strings, allocates only the interned strings (api and role
 * names live as long as the replay, as the policy keeps their pointers).
 */
#ifndef VMEM_POLICY_REPLAY_H
#define VMEM_POLICY_REPLAY_H

#include <stdint.h>

#include "policy/event.h"

typedef enum {
	POLICY_REC_NONE = 0,   /* blank or comment */
	POLICY_REC_ALLOC,
	POLICY_REC_FREE,
	POLICY_REC_EVENT,
	POLICY_REC_BAD,
} policy_rec_t;

typedef struct {
	char **str;               /* interned strings */
	int nstr, capstr;
	vmem_range_t *rg;         /* the last event's ranges */
	int caprg;
} policy_replay_t;

void policy_replay_init(policy_replay_t *r);
void policy_replay_free(policy_replay_t *r);
/* Parses one line (modified in place).  For EVENT, *ev is filled (its
 * ranges valid until the next call); for ALLOC/FREE, *alloc_id and *bytes. */
policy_rec_t policy_replay_line(policy_replay_t *r, char *line, vmem_event_t *ev,
				uint64_t *alloc_id, uint64_t *bytes);

#endif
