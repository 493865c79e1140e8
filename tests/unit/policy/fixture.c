/* tests/unit/policy/fixture.c - see fixture.h. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/replay.h"

int fixture_replay(drv_t *d, const char *name, fixture_stats_t *st)
{
	static policy_replay_t rp;   /* strings outlive the policy */
	const char *dir = getenv("VMEM_POLICY_FIXTURES");
	char path[1024], line[1 << 16];
	FILE *f;
	int lineno = 0;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "fixtures", name);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fixture %s: cannot open (set VMEM_POLICY_FIXTURES)\n", path);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		vmem_event_t ev;
		uint64_t id, bytes, dur;

		lineno++;
		switch (policy_replay_line(&rp, line, &ev, &id, &bytes)) {
		case POLICY_REC_NONE:
			continue;
		case POLICY_REC_ALLOC:
			policy_allocated(d->p, id, bytes);
			continue;
		case POLICY_REC_FREE:
			policy_freed(d->p, id);
			continue;
		case POLICY_REC_EVENT:
			break;
		default:
			fprintf(stderr, "fixture %s:%d: bad line\n", path, lineno);
			fclose(f);
			return -1;
		}
		dur = ev.dur_ns;
		ev.dur_ns = 0;
		ev.t_ns = ev.seq * 1000;
		policy_before(d->p, &ev, &d->buf);
		drv_keep(d, ev.seq);
		ev.dur_ns = dur;
		policy_after(d->p, &ev, &d->buf);
		drv_keep(d, ev.seq);
		d->seq = ev.seq + 1;
		st->events++;
		st->significant += policy_event_significant(ev.kind);
		if (!st->first_seq)
			st->first_seq = ev.seq;
		st->last_seq = ev.seq;
	}
	fclose(f);
	return 0;
}
