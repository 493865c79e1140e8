/* policy/vmem_plan.c - `vmem-plan`: the planner's dry run over a trace.
 *
 * Reads calls in the text format of policy/replay.h (what `vmem-trace
 * events TRACE` writes; `vmem-trace plan TRACE` pipes one into the other),
 * feeds them to a policy as the runtime would (policy_before, then
 * policy_after with the call's measured duration), and prints what the
 * policy decided: every plan made, suspended, resumed or abandoned, the
 * actions (-a), the whole plan with every pass (-d), and the stats.  No
 * GPU, no simulator: the planner alone, on a real run's calls.
 *
 * This file is a tool, not part of libvmem.so: it prints and reads files.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "policy/replay.h"

static void print_line(void *ctx, const char *line)
{
	fprintf((FILE *)ctx, "%s\n", line);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: vmem-plan [-a] [-d] [--offload none|all|conv|dyn] [--prefetch vdnn|timed]\n"
		   "                 [--liveness off|lazy|eager] [--page BYTES] [--small BYTES]\n"
		   "                 [--h2d BYTES_PER_S]\n"
		   "                 [--offload-min BYTES] [--reps N] [--budget BYTES] [--headroom BYTES]\n"
		   "                 [FILE]\n"
		   "Replays calls (vmem-trace events FILE) through the planner; FILE or stdin.\n"
		   "  -a  print every action    -d  print the final plan (every pass)\n"
		   "  --small: the pool's small-allocation threshold (VMEM_SMALL_THRESHOLD): larger\n"
		   "  allocations count in whole pages; 0 (default) counts bytes\n");
}

static int pick(const char *v, const char *const *names, int n, const char *opt)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	fprintf(stderr, "vmem-plan: %s: unknown value '%s'\n", opt, v);
	exit(2);
}

static void print_action(const policy_action_t *a, uint64_t seq)
{
	if (a->kind == POLICY_ACT_NOTE) {
		printf("seq %" PRIu64 ": plan %u %s (period %u, first steady seq %" PRIu64 ")", seq,
		       a->plan_id, policy_note_name((policy_note_t)a->note), a->period, a->steady_seq);
		if (a->note == POLICY_NOTE_SUSPENDED)
			printf(", expected plan op #%d", a->expected_op);
		if (a->note == POLICY_NOTE_MADE && a->dyn.decided) {
			char d[256];

			policy_dyn_format(&a->dyn, d, sizeof(d));
			printf(", %s", d);
		} else if (a->note == POLICY_NOTE_MADE && a->offload_mode != POLICY_OFFLOAD_NONE) {
			printf(", offload %s", policy_offload_name((policy_offload_mode_t)a->offload_mode));
		}
		printf("\n");
		return;
	}
	printf("seq %" PRIu64 ": %s a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64 " plan op #%d until #%d%s\n",
	       seq, policy_act_name((policy_act_kind_t)a->kind), a->alloc_id, a->offset, a->bytes,
	       a->plan_op, a->until_op,
	       a->kind == POLICY_ACT_REVIVE ?
		       (a->reason == POLICY_REVIVE_READ ? (a->certain ? " (read)" : " (read? a kernel argument)")
							: " (suspend)")
					    : "");
}

int main(int argc, char **argv)
{
	static const char *const offl[] = { "none", "all", "conv", "dyn" };
	static const char *const pref[] = { "vdnn", "timed" };
	static const char *const live[] = { "off", "lazy", "eager" };
	policy_config_t cfg;
	policy_replay_t rp;
	policy_actions_t acts;
	policy_stats_t st;
	policy_t *p;
	const char *path = NULL;
	bool all = false, dump = false;
	FILE *f = stdin;
	char *line = NULL;
	size_t cap = 0;
	long lineno = 0;

	policy_config_default(&cfg);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-a") == 0) {
			all = true;
		} else if (strcmp(a, "-d") == 0) {
			dump = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (i + 1 < argc && strcmp(a, "--offload") == 0) {
			cfg.offload = (policy_offload_mode_t)pick(argv[++i], offl, 4, a);
		} else if (i + 1 < argc && strcmp(a, "--prefetch") == 0) {
			cfg.prefetch = (policy_prefetch_mode_t)pick(argv[++i], pref, 2, a);
		} else if (i + 1 < argc && strcmp(a, "--liveness") == 0) {
			cfg.liveness = (policy_liveness_t)pick(argv[++i], live, 3, a);
		} else if (i + 1 < argc && strcmp(a, "--page") == 0) {
			cfg.page_size = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--small") == 0) {
			cfg.small_threshold = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--reps") == 0) {
			cfg.reps = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--offload-min") == 0) {
			cfg.offload_min_bytes = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--budget") == 0) {
			cfg.budget = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--headroom") == 0) {
			cfg.dyn_headroom = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(a, "--h2d") == 0) {
			cfg.h2d_bytes_per_s = strtoull(argv[++i], NULL, 0);
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "vmem-plan: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else {
			path = a;
		}
	}
	if (path && strcmp(path, "-") != 0 && !(f = fopen(path, "r"))) {
		fprintf(stderr, "vmem-plan: %s: cannot read: %s\n", path, strerror(errno));
		return 2;
	}
	if (policy_create(&cfg, &p) != 0) {
		fprintf(stderr, "vmem-plan: out of memory\n");
		return 2;
	}
	policy_replay_init(&rp);
	policy_actions_init(&acts);
	while (getline(&line, &cap, f) > 0) {
		vmem_event_t ev;
		uint64_t id, bytes, dur;

		lineno++;
		switch (policy_replay_line(&rp, line, &ev, &id, &bytes)) {
		case POLICY_REC_NONE:
			continue;
		case POLICY_REC_ALLOC:
			policy_allocated(p, id, bytes);
			continue;
		case POLICY_REC_FREE:
			policy_freed(p, id);
			continue;
		case POLICY_REC_EVENT:
			break;
		default:
			fprintf(stderr, "vmem-plan: %s:%ld: not an event line; expected the output of "
					"'vmem-trace events'\n", path ? path : "stdin", lineno);
			return 2;
		}
		dur = ev.dur_ns;
		ev.dur_ns = 0;
		policy_actions_clear(&acts);
		policy_before(p, &ev, &acts);
		ev.dur_ns = dur;
		policy_after(p, &ev, &acts);
		for (int i = 0; i < acts.n; i++)
			if (all || acts.v[i].kind == POLICY_ACT_NOTE)
				print_action(&acts.v[i], ev.seq);
	}
	policy_get_stats(p, &st);
	policy_stats_print(&st, print_line, stdout);
	if (dump)
		policy_dump(p, print_line, stdout);
	free(line);
	policy_actions_free(&acts);
	policy_replay_free(&rp);
	policy_destroy(p);
	if (f != stdin)
		fclose(f);
	return 0;
}
