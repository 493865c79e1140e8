/* tests/unit/policy/fixture.h - replays an event file (fixtures/NAME.ev,
 * written by `vmem-trace events TRACE`) through a policy.
 *
 * Format, one record per line (# comments):
 *   A <alloc> <bytes>          an allocation
 *   F <alloc>                  a free
 *   E <seq> <tid> <stream> <op> <api> <dur_ns> <info> [| <range> ...]
 *      info:  -  |  conv:<dir>:n:c:h:w:k:r:s:algo:ws  |  gemm:m:n:k:ta:tb:batch
 *             |  copy:<bytes>:<kind>  |  launch:<func>:<gx>:<bx>
 *      range: <alloc>:<off hex>:<bytes>:<acc>:<role>   acc r, w, w!, rw
 */
#ifndef VMEM_TEST_POLICY_FIXTURE_H
#define VMEM_TEST_POLICY_FIXTURE_H

#include "synth.h"

typedef struct {
	int events, significant;
	uint64_t first_seq, last_seq;
} fixture_stats_t;

/* Replays $VMEM_POLICY_FIXTURES/<name> through d.  Returns 0, or -1 with a
 * message on stderr (file missing, bad line). */
int fixture_replay(drv_t *d, const char *name, fixture_stats_t *st);

#endif
