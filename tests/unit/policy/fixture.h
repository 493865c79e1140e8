/* tests/unit/policy/fixture.h - replays an event file (fixtures/NAME.ev,
 * written by `vmem-trace events TRACE`; format in policy/replay.h) through
 * a policy, the way the runtime would call it.
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
