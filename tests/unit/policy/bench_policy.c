/* tests/unit/policy/bench_policy.c - what the policy costs per hooked call.
 *
 * Records the calls of 100 iterations of a synthetic net (synth.c, caching
 * style, LAYERS conv layers: 6 * LAYERS + 3 calls an iteration), replays
 * them through policy_before/policy_after the way the runtime will until
 * the history rings have reached their size (300000 calls at least), and
 * reports the mean time per call over one more replay: the steady state
 * of a training job, a plan running.
 *
 *   meson test -C build --benchmark policy-per-call   (or run it: bench_policy [LAYERS])
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "synth.h"

int main(int argc, char **argv)
{
	int layers = argc > 1 ? atoi(argv[1]) : 50;
	net_cfg_t nc = { .layers = layers, .batch = 8, .style = NET_CACHING };
	policy_config_t c;
	policy_actions_t acts;
	policy_stats_t st;
	struct timespec a = { 0 }, b;
	int reps;
	drv_t d;
	net_t n;
	double ns;

	policy_config_default(&c);
	drv_init(&d, &c);
	net_init(&n, &d, &nc);
	d.record = true;
	for (int i = 0; i < 100; i++)
		net_train(&n, &d);
	policy_actions_init(&acts);
	reps = 300000 / d.nrec + 2;
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < d.nrec; i++) {
			vmem_event_t ev = d.rec[i].ev;

			ev.ranges = d.rec[i].r;
			ev.seq += (uint64_t)r * 100000000u;
			if (r == reps - 1 && i == 0)
				clock_gettime(CLOCK_MONOTONIC, &a);
			policy_actions_clear(&acts);
			policy_before(d.p, &ev, &acts);
			policy_after(d.p, &ev, &acts);
		}
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	policy_get_stats(d.p, &st);
	printf("policy: %.0f ns per call (policy_before + policy_after), %d calls, %d layers; "
	       "state %s, period %u, %llu iterations planned, %llu dead ranges\n",
	       ns / d.nrec, d.nrec, layers, policy_state_name((policy_state_t)st.state), st.period,
	       (unsigned long long)st.iterations_planned, (unsigned long long)st.dead_actions);
	policy_actions_free(&acts);
	net_free(&n);
	drv_free(&d);
	return st.state == POLICY_PLANNED ? 0 : 1;
}
