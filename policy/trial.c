/* policy/trial.c - vDNN-dyn's profiling passes, judged by measured time.
 *
 * vDNN §III-C: "vDNN-dyn ... profiles each configuration ... for a single
 * training pass" and keeps one that does not run out of memory.  dyn.c
 * computes the modes' peaks from the plan, which is a prediction: it
 * misses the transients (workspaces, the pool's lazy maps, copies in
 * flight) and says nothing of time.  Under vmem no mode runs out of
 * memory (the reactive layer pages what a plan leaves over), so what
 * tells the modes apart is how fast each runs.  The passes here run each
 * candidate mode for real and keep the fastest:
 *
 *   iteration:   i        i+1      i+2      i+3       i+4 ...
 *   runs:        conv     none     all      (best)    kept
 *   time known:           conv     none     all
 *
 * The candidates are dyn's modes whose offload sets differ (two equal
 * sets would measure the same thing), the computed choice first: it is
 * also what runs when no time can be had.  Where the runtime can run
 * them (µ-cuDNN on: cfg.dyn_least), each mode is a candidate twice: with
 * the convolutions the conv hooks choose within the plan's room, and
 * with every convolution's least-workspace configuration (the paper's
 * "(m)", "conv(m)" here; policy.c passes it on in MARK and NOTE actions'
 * `least`).  The runtime times whole
 * iterations on the device, from one start of the plan's first op to the
 * next (a pair of events), so waits for copies, host stalls and the
 * reactive layer's fault-ins all count.  A time arrives once the device
 * has passed the next iteration's start; meanwhile the best candidate
 * measured so far runs.  An iteration cut short (an evaluation pass, a
 * new batch size: the plan was suspended) measures nothing, and its
 * candidate is run again.  If the times stop coming (a device without
 * events), the passes end after max_iters iterations with the best time
 * known, or the computed choice.
 *
 * A candidate that cannot win is not run: the runtime reports, each
 * iteration, the least time the iteration's convolutions take with the
 * plan's configurations and with the least-workspace ones (µ-cuDNN's
 * measured times, policy_trial_floor), and a candidate not yet begun
 * whose floor is no faster than a pass already measured is ruled out.  On
 * a real GPU the memory-optimal algorithms ran VGG-16's convolutions in
 * 1.5 s against a 0.26 s pass: three "(m)" passes cost 4 s to learn
 * nothing; on the simulator, where they win, their floors are below the
 * passes measured and they run.
 *
 * Pure bookkeeping: policy.c switches the plan's mode (policy_plan_use)
 * to whatever policy_trial_begin returns.
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void policy_trial_init(policy_trial_t *t, const uint8_t *modes, const uint8_t *least, int n,
		       int want)
{
	memset(t, 0, sizeof(*t));
	if (n > POLICY_TRIAL_MAX)
		n = POLICY_TRIAL_MAX;
	for (int i = 0; i < n; i++) {
		t->mode[i] = modes[i];
		t->least[i] = least && least[i];
	}
	t->n = (uint8_t)(n > 0 ? n : 0);
	t->want = (uint8_t)(want > 0 ? (want < 100 ? want : 100) : 1);
	t->cur = -1;
	t->kept = 0;
	/* every pass once, a late time for each, and as many cut short */
	t->max_iters = 2u * t->n * t->want + 4;
	t->state = t->n > 1 ? POLICY_TRIAL_RUNNING : POLICY_TRIAL_MEASURED;
}

/* Iterations of candidate c begun whose times may still come. */
static int pending(const policy_trial_t *t, int c)
{
	int k = 0;

	for (int i = 0; i < POLICY_TRIAL_RING; i++)
		if (t->ring[i].iter && t->ring[i].cand == c)
			k++;
	return k;
}

/* The fastest candidate measured, or -1 when none is yet. */
static int fastest(const policy_trial_t *t)
{
	int f = -1;

	for (int c = 0; c < t->n; c++)
		if (t->runs[c] && (f < 0 || t->ns[c] < t->ns[f]))
			f = c;
	return f;
}

/* The candidate to keep, or -1: of those measured within the slack of
 * the fastest, the one that missed fewest pages (the fastest such). */
static int best(const policy_trial_t *t)
{
	int f = fastest(t), b = -1;
	uint64_t most;

	if (f < 0)
		return -1;
	most = t->ns[f] + t->ns[f] / 1000 * POLICY_TRIAL_SLACK_PERMILLE;
	for (int c = 0; c < t->n; c++)
		if (t->runs[c] && t->ns[c] <= most &&
		    (b < 0 || t->misses[c] < t->misses[b] ||
		     (t->misses[c] == t->misses[b] && t->ns[c] < t->ns[b])))
			b = c;
	return b;
}

static void forget(policy_trial_t *t, uint64_t iter)
{
	for (int i = 0; i < POLICY_TRIAL_RING; i++)
		if (t->ring[i].iter == iter)
			t->ring[i].iter = 0;
}

static void remember(policy_trial_t *t, uint64_t iter, int c)
{
	int slot = 0;

	/* a free slot, else the oldest (its time is long overdue) */
	for (int i = 0; i < POLICY_TRIAL_RING; i++) {
		if (!t->ring[i].iter) {
			slot = i;
			break;
		}
		if (t->ring[i].iter < t->ring[slot].iter)
			slot = i;
	}
	t->ring[slot].iter = iter;
	t->ring[slot].cand = (int8_t)c;
	t->ring[slot].misses = 0;
}

void policy_trial_misses(policy_trial_t *t, uint64_t iter, uint64_t pages)
{
	for (int i = 0; i < POLICY_TRIAL_RING; i++)
		if (iter && t->ring[i].iter == iter)
			t->ring[i].misses = pages;
}

void policy_trial_floor(policy_trial_t *t, bool least, uint64_t ns)
{
	t->floor_ns[least ? 1 : 0] = ns;
}

/* Rules out every candidate not yet begun whose floor is no faster than
 * the fastest pass measured. */
static void rule_out(policy_trial_t *t)
{
	int f = fastest(t);

	if (f < 0)
		return;
	for (int c = 0; c < t->n; c++) {
		uint64_t fl = t->floor_ns[t->least[c] ? 1 : 0];

		if (!t->runs[c] && !t->out[c] && !pending(t, c) && fl &&
		    fl / 1000 * (1000 - POLICY_TRIAL_FLOOR_PERMILLE) >= t->ns[f])
			t->out[c] = 1;
	}
}

/* Every candidate measured as often as wanted or ruled out. */
static bool all_done(const policy_trial_t *t)
{
	for (int c = 0; c < t->n; c++)
		if (t->runs[c] < t->want && !t->out[c])
			return false;
	return true;
}

static void finish(policy_trial_t *t, policy_trial_state_t how)
{
	int b = best(t);

	t->state = (uint8_t)how;
	t->kept = (int8_t)(b >= 0 ? b : 0);
	memset(t->ring, 0, sizeof(t->ring));
}

int policy_trial_begin(policy_trial_t *t, uint64_t iter, bool prev_whole)
{
	int c, b;

	if (t->state != POLICY_TRIAL_RUNNING)
		return t->kept;
	/* the iteration that ends here was cut short: no time will come */
	if (!prev_whole && iter > 0)
		forget(t, iter - 1);
	/* times more than two iterations late will not come (the runtime
	 * lost them): run those candidates again */
	for (int i = 0; i < POLICY_TRIAL_RING; i++)
		if (t->ring[i].iter && t->ring[i].iter + 2 < iter)
			t->ring[i].iter = 0;
	if (++t->iters > t->max_iters) {
		finish(t, POLICY_TRIAL_GAVE_UP);
		return t->kept;
	}
	rule_out(t);
	if (all_done(t)) {
		finish(t, POLICY_TRIAL_MEASURED);
		return t->kept;
	}
	for (c = 0; c < t->n; c++)
		if (!t->out[c] && t->runs[c] + pending(t, c) < t->want)
			break;
	if (c == t->n) {
		/* every pass run: wait for the last times with the best so far */
		b = best(t);
		c = b >= 0 ? b : (t->cur >= 0 ? t->cur : 0);
		t->cur = (int8_t)c;
		return c;
	}
	remember(t, iter, c);
	t->cur = (int8_t)c;
	return c;
}

int policy_trial_measured(policy_trial_t *t, uint64_t iter, uint64_t ns)
{
	uint64_t misses = 0;
	int c = -1;

	if (t->state != POLICY_TRIAL_RUNNING || !iter || !ns)
		return 0;
	for (int i = 0; i < POLICY_TRIAL_RING; i++)
		if (t->ring[i].iter == iter) {
			c = t->ring[i].cand;
			misses = t->ring[i].misses;
			t->ring[i].iter = 0;
			break;
		}
	if (c < 0)
		return 0;
	if (!t->runs[c] || ns < t->ns[c]) {
		t->ns[c] = ns;
		t->misses[c] = misses;
	}
	t->runs[c]++;
	rule_out(t);
	if (all_done(t))
		finish(t, POLICY_TRIAL_MEASURED);
	return 1;
}

const char *policy_pass_name(policy_offload_mode_t mode, bool least)
{
	if (!least)
		return policy_offload_name(mode);
	switch (mode) {
	case POLICY_OFFLOAD_NONE: return "none(m)";
	case POLICY_OFFLOAD_ALL: return "all(m)";
	case POLICY_OFFLOAD_CONV: return "conv(m)";
	case POLICY_OFFLOAD_DYN: return "dyn(m)";
	}
	return "?";
}

const char *policy_trial_name(const policy_trial_t *t, int c)
{
	return policy_pass_name((policy_offload_mode_t)t->mode[c], t->least[c]);
}

/* Appends to buf[*k ..) what fits; *k stays below len. */
static void append(char *buf, size_t len, size_t *k, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*k + 1 >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *k, len - *k, fmt, ap);
	va_end(ap);
	if (n > 0)
		*k = *k + (size_t)n < len ? *k + (size_t)n : len - 1;
}

size_t policy_trial_format(const policy_trial_t *t, char *buf, size_t len)
{
	size_t k = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	append(buf, len, &k, "dyn: measured");
	for (int c = 0; c < t->n; c++) {
		const char *name = policy_trial_name(t, c);

		if (t->runs[c] && t->misses[c])
			append(buf, len, &k, "%s %s %.1f ms (%" PRIu64 " pages missed)", c ? "," : "",
			       name, (double)t->ns[c] / 1e6, t->misses[c]);
		else if (t->runs[c])
			append(buf, len, &k, "%s %s %.1f ms", c ? "," : "", name, (double)t->ns[c] / 1e6);
		else if (t->out[c])
			append(buf, len, &k, "%s %s not run (its convolutions alone %.1f ms)",
			       c ? "," : "", name,
			       (double)t->floor_ns[t->least[c] ? 1 : 0] / 1e6);
		else
			append(buf, len, &k, "%s %s -", c ? "," : "", name);
	}
	if (t->state == POLICY_TRIAL_RUNNING)
		append(buf, len, &k, " an iteration: trying");
	else
		append(buf, len, &k, " an iteration: kept %s%s", policy_trial_name(t, t->kept),
		       t->state == POLICY_TRIAL_GAVE_UP ? " (not every pass was timed)" : "");
	return k;
}
