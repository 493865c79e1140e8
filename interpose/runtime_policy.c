/* interpose/runtime_policy.c - the proactive layer in the running shim.
 *
 * policy/ is pure: typed events in, actions out (policy/README.md).  This
 * file is the seam between it and the rest of the runtime:
 *
 *   hook_call_prepare --> runtime_policy_before: resolve the call's refs
 *                         (pool_resolve, no locking), policy_before, carry
 *                         out PREFETCH / REVIVE / NOTE
 *                     --> runtime_prepare (pool_acquire: the reactive layer)
 *   the real call
 *   hook_call_finish  --> runtime_complete (pool_release)
 *                     --> runtime_policy_after: policy_after, carry out
 *                         DEAD / OFFLOAD / NOTE
 *
 * Every action goes through the pool and none waits on the host: a
 * prefetch maps and copies on the H2D stream and the call that needs it
 * waits on the device; an offload copies on the D2H stream after the last
 * use; a dead range is dropped without a copy when memory is needed (or at
 * once with VMEM_LIVENESS=eager).  The pool asks the policy for the
 * eviction order (Belady's MIN from the plan: policy_evict_order).
 *
 * Data is never silently lost: a call that reads bytes the plan dropped is
 * refused with one line that names the tensor, the op that last read it
 * and the op that should have rewritten it (policy_loss_format), and
 * VMEM_LIVENESS=off as the way out.
 *
 * Durations: while the policy learns the iteration, each compute call is
 * bracketed by two CUDA events on its stream (after its fault-ins, around
 * the real call); when they complete, the elapsed time goes to the policy
 * (policy_duration), so the plan's prefetch timing and eviction distances
 * are in device time.  On the simulator the events give virtual time.
 * Once a plan runs, calls are no longer timed; only each planned iteration
 * is (two events at its first call, MARK), which is what dyn's passes need.
 *
 * Locks: the policy has its own mutex; it is never called with the pool's
 * lock held except through policy_evict_order, which the pool calls (lock
 * order pool -> policy), so nothing here holds the pool's lock while it
 * calls the policy.
 */
#include "interpose/runtime.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/conv_exec.h"
#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/pool_ref.h"
#include "interpose/trace.h"
#include "policy/policy.h"
#include "pool/pool.h"

static policy_t *g_pol;
static pool_t *g_rp_pool;
/* Eager drops and offloads finish once the device is past the range's
 * last use: the pool is polled after every call (a lock and a fence
 * query per page still waiting) when the policy issues them. */
static bool g_poll;
static bool g_warned_maybe;
/* Calls go to the policy: from the start under eager liveness or an
 * offloading policy, else from the first time the budget is reached (a
 * job that fits pays nothing for the proactive layer: lazy liveness and
 * the eviction order only matter once memory is short). */
static bool g_watching;

#define RETRY_MAX 32

typedef struct {
	pool_range_t r;
	bool soon;             /* for the next call: worth a host wait once the call before is queued */
	bool noroom;           /* found no room (else: brought, to be checked again) */
	int until_op;          /* the plan's op it is for */
} retry_t;

/* Per thread: the ranges of the call in flight (resolved before, reused
 * after), the actions list, the fault-ins counted by the pool's observer. */
typedef struct {
	vmem_range_t *ranges;
	pool_ref_t *refs;
	pool_span_t *spans;
	int cap;
	int n;                 /* ranges of the call between before and after */
	bool pending;          /* policy_before ran for the call in flight */
	policy_actions_t acts;
	uint64_t misses;       /* fault-ins of the call that copied bytes back */
	uint64_t maps;         /* ... that only mapped fresh pages */
	uint64_t room;         /* the call's ALGO room (UINT64_MAX none) */
	/* the previous call's ranges ([0, nprev)), and room for the current
	 * one's after them: what the two need together (miss_beside) */
	pool_range_t *pair;
	int nprev;
	const char *prev_api;  /* the previous call's API (a string literal of the hooks) */
	/* prefetches the pool could not finish (no chunk free without a
	 * wait: an offload's copy still draining), tried again after each
	 * call until the first call that uses the range comes */
	retry_t retry[RETRY_MAX];
	int nretry;
} tl_policy_t;

static __thread tl_policy_t *tl_pol;
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static void tl_destroy(void *arg)
{
	tl_policy_t *t = arg;

	if (!t)
		return;
	free(t->ranges);
	free(t->refs);
	free(t->spans);
	free(t->pair);
	policy_actions_free(&t->acts);
	free(t);
}

static void tl_key_make(void)
{
	pthread_key_create(&tl_key, tl_destroy);
}

static tl_policy_t *tl_get(void)
{
	if (tl_pol)
		return tl_pol;
	pthread_once(&tl_once, tl_key_make);
	tl_pol = calloc(1, sizeof(*tl_pol));
	if (!tl_pol)
		return NULL;
	policy_actions_init(&tl_pol->acts);
	pthread_setspecific(tl_key, tl_pol);
	return tl_pol;
}

static bool tl_reserve(tl_policy_t *t, int n)
{
	if (n <= t->cap)
		return true;
	int cap = t->cap ? t->cap : 16;
	while (cap < n)
		cap *= 2;
	vmem_range_t *r = realloc(t->ranges, (size_t)cap * sizeof(*r));
	if (r)
		t->ranges = r;
	pool_ref_t *f = realloc(t->refs, (size_t)cap * sizeof(*f));
	if (f)
		t->refs = f;
	pool_span_t *s = realloc(t->spans, (size_t)cap * sizeof(*s));
	if (s)
		t->spans = s;
	pool_range_t *pr = realloc(t->pair, 2 * (size_t)cap * sizeof(*pr));
	if (pr)
		t->pair = pr;
	if (!r || !f || !s || !pr)
		return false;
	t->cap = cap;
	return true;
}

/* ---- op durations (CUDA events while learning) ---- */

typedef cudaError_t (*ev_create_fn)(cudaEvent_t *, unsigned int);
typedef cudaError_t (*ev_record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*ev_fn)(cudaEvent_t);
typedef cudaError_t (*ev_elapsed_fn)(float *, cudaEvent_t, cudaEvent_t);

static struct {
	ev_create_fn create;
	ev_record_fn record;
	ev_fn query, destroy;
	ev_elapsed_fn elapsed;
} E;

#define TIMED_MAX 4096   /* calls measured and not yet completed */

/* What a pair of events measures: a copy of the pool's (its
 * policy_link_t), a hooked call, or a planned iteration (MARK to MARK). */
#define TIMED_CALL (-1)
#define TIMED_ITER (-2)

typedef struct {
	uint64_t seq;          /* the call; an iteration: its number; 0 for a copy */
	int link;              /* a copy: policy_link_t; else TIMED_CALL or TIMED_ITER */
	uint64_t bytes;        /* a copy's */
	uint32_t plan;         /* an iteration's plan, */
	uint8_t mode;          /* the offload mode it ran, */
	bool least;            /* with the least-workspace convolutions */
	cudaEvent_t ev[2];
} timed_t;

static pthread_mutex_t timed_lock = PTHREAD_MUTEX_INITIALIZER;
static timed_t g_timed[TIMED_MAX];            /* a ring: oldest at g_thead */
static int g_thead, g_tn;
static cudaEvent_t g_evfree[2 * TIMED_MAX];   /* events to reuse */
static int g_nevfree;
static bool g_timing;                         /* the event functions were found */
static __thread cudaEvent_t tl_ev0;           /* the call in flight's start event */

static void timing_init(void)
{
	*(void **)&E.create = hook_real_load("cudaEventCreateWithFlags");
	*(void **)&E.record = hook_real_load("cudaEventRecord");
	*(void **)&E.query = hook_real_load("cudaEventQuery");
	*(void **)&E.destroy = hook_real_load("cudaEventDestroy");
	*(void **)&E.elapsed = hook_real_load("cudaEventElapsedTime");
	g_timing = E.create && E.record && E.query && E.destroy && E.elapsed;
}

/* An event to record, or NULL; timed_lock held. */
static cudaEvent_t ev_get(void)
{
	cudaEvent_t e = NULL;

	if (g_nevfree)
		return g_evfree[--g_nevfree];
	if (E.create(&e, cudaEventDefault) != cudaSuccess)
		return NULL;
	return e;
}

/* timed_lock held. */
static void ev_put(cudaEvent_t e)
{
	if (!e)
		return;
	if (g_nevfree < 2 * TIMED_MAX)
		g_evfree[g_nevfree++] = e;
	else
		E.destroy(e);
}

/* Queues a measurement for timing_poll; false when the ring is full.
 * timed_lock held. */
static bool timed_push(const timed_t *x)
{
	if (g_tn >= TIMED_MAX)
		return false;
	g_timed[(g_thead + g_tn) % TIMED_MAX] = *x;
	g_tn++;
	return true;
}

/* A planned iteration's length: to the policy, and a 'timed' plan record. */
static void iter_record(uint32_t plan, uint64_t iter, uint8_t mode, bool least, uint64_t ns)
{
	char line[256];
	int n;

	policy_iteration_time(g_pol, plan, iter, ns);
	if (!trace_enabled())
		return;
	n = snprintf(line, sizeof(line),
		     "{\"type\":\"plan\",\"seq\":%" PRIu64 ",\"t\":%" PRIu64
		     ",\"tid\":%ld,\"event\":\"timed\",\"plan\":%u,\"iter\":%" PRIu64
		     ",\"ns\":%" PRIu64 ",\"offload\":\"%s\",\"pass\":\"%s\"}\n",
		     trace_next_seq(), trace_now_ns(), (long)syscall(SYS_gettid), plan, iter, ns,
		     policy_offload_name((policy_offload_mode_t)mode),
		     policy_pass_name((policy_offload_mode_t)mode, least));
	if (n > 0 && (size_t)n < sizeof(line))
		trace_append(line, (size_t)n);
}

/* Hands the completed measurements to the policy, oldest first, and
 * stops at the first one still running (a stream runs in order; across
 * streams a later one waits for the next poll). */
static void timing_poll(void)
{
	int mode = runtime_relax_begin();

	pthread_mutex_lock(&timed_lock);
	while (g_tn) {
		timed_t *t = &g_timed[g_thead];
		float ms = 0;
		cudaError_t e = E.query(t->ev[1]);

		if (e == cudaErrorNotReady)
			break;
		if (e == cudaSuccess && E.elapsed(&ms, t->ev[0], t->ev[1]) == cudaSuccess && ms > 0) {
			uint64_t ns = (uint64_t)((double)ms * 1e6);

			if (t->link >= 0)
				policy_link_sample(g_pol, (policy_link_t)t->link, t->bytes, ns);
			else if (t->link == TIMED_ITER)
				iter_record(t->plan, t->seq, t->mode, t->least, ns);
			else
				policy_duration(g_pol, t->seq, ns);
		}
		ev_put(t->ev[0]);
		ev_put(t->ev[1]);
		g_thead = (g_thead + 1) % TIMED_MAX;
		g_tn--;
	}
	pthread_mutex_unlock(&timed_lock);
	runtime_relax_end(mode);
}

/* A fresh event recorded now on `stream`, or NULL: none to spare (with
 * `bounded`, while the ring of measurements is full) or the record
 * failed.  Recorded in relaxed capture mode (the caller's stream is not
 * capturing: the hooks ask only for calls with vmem memory). */
static cudaEvent_t ev_record_on(cudaStream_t stream, bool bounded)
{
	cudaEvent_t e;
	int mode = runtime_relax_begin();

	pthread_mutex_lock(&timed_lock);
	e = !bounded || g_tn < TIMED_MAX ? ev_get() : NULL;
	pthread_mutex_unlock(&timed_lock);
	if (e && E.record(e, stream) != cudaSuccess) {
		pthread_mutex_lock(&timed_lock);
		ev_put(e);
		pthread_mutex_unlock(&timed_lock);
		e = NULL;
	}
	runtime_relax_end(mode);
	return e;
}

static bool timing_wanted(vmem_op_kind_t kind)
{
	return g_timing && vmem_op_is_compute(kind) && policy_state(g_pol) == POLICY_LEARNING;
}

void runtime_policy_started(const runtime_call_t *c)
{
	if (tl_ev0)
		return;   /* prepared again (the conv hooks retry): timed from the first */
	/* a call with no vmem memory may be on a capturing stream (the hooks
	 * ask only when a call has refs): an event there would join the graph */
	if (!g_pol || !c->nrefs || !timing_wanted(c->kind))
		return;
	tl_ev0 = ev_record_on((cudaStream_t)c->stream, true);
}

/* After the real call: the end event, queued for timing_poll. */
static void timing_end(const runtime_call_t *c)
{
	cudaEvent_t e0 = tl_ev0, e1;

	tl_ev0 = NULL;
	if (!e0)
		return;
	e1 = ev_record_on((cudaStream_t)c->stream, false);
	pthread_mutex_lock(&timed_lock);
	if (!e1 || !timed_push(&(timed_t){ .seq = c->seq, .link = TIMED_CALL, .ev = { e0, e1 } })) {
		ev_put(e0);
		ev_put(e1);
	}
	pthread_mutex_unlock(&timed_lock);
}

/* ---- planned iterations, timed (MARK actions) ----
 *
 * At each start of a planned iteration the policy asks for a MARK: two
 * events on the stream of the plan's first op, one closing the iteration
 * before (when it ran whole under the plan) and one opening this one.
 * The pair goes to the ring of measurements (TIMED_ITER); its elapsed
 * time is the iteration's length on the device, waits for copies and
 * host stalls included, and dyn's measured passes are judged by it
 * (policy/trial.c).  Two events per iteration. */

static struct {
	cudaEvent_t open;          /* the current iteration's start, or NULL */
	uint64_t iter;             /* its number, plan and mode */
	uint32_t plan;
	uint8_t mode;
	bool least;
} g_mark;   /* under timed_lock */

/* The plan's algorithm choice (MARK and NOTE actions' `least`): read by
 * the conv hooks of every thread before they prepare a call. */
static bool g_least;

static void mark(const policy_action_t *a, const vmem_event_t *ev)
{
	cudaEvent_t close = NULL, open;

	uint64_t floor_ns[2];

	/* the convolutions of the iteration that ends here, at their least
	 * (dyn's passes rule out candidates that cannot win) */
	conv_floor_take(floor_ns);
	if (a->prev_whole) {
		policy_pass_floor(g_pol, false, floor_ns[0]);
		policy_pass_floor(g_pol, true, floor_ns[1]);
	}
	if (!g_timing)
		return;
	if (a->prev_whole && g_mark.open)
		close = ev_record_on((cudaStream_t)ev->stream, false);
	open = ev_record_on((cudaStream_t)ev->stream, false);
	pthread_mutex_lock(&timed_lock);
	if (!close || !timed_push(&(timed_t){ .seq = g_mark.iter, .link = TIMED_ITER,
					      .plan = g_mark.plan, .mode = g_mark.mode,
					      .least = g_mark.least,
					      .ev = { g_mark.open, close } })) {
		ev_put(g_mark.open);
		ev_put(close);
	}
	g_mark.open = open;
	g_mark.iter = a->iter;
	g_mark.plan = a->plan_id;
	g_mark.mode = a->offload_mode;
	g_mark.least = a->least;
	pthread_mutex_unlock(&timed_lock);
}

/* ---- the link: the pool's first copies each way, timed ---- */

static unsigned g_link_timed[2];   /* copies queued for timing, per policy_link_t */

static policy_link_t link_dir(bool h2d)
{
	return h2d ? POLICY_LINK_H2D : POLICY_LINK_D2H;
}

/* Called with the pool's lock held (lock order pool -> timed_lock). */
void *runtime_policy_copy_begin(void *stream, bool h2d, uint64_t bytes)
{
	if (!g_pol || !g_timing || bytes < ((uint64_t)1 << 20) ||
	    __atomic_load_n(&g_link_timed[link_dir(h2d)], __ATOMIC_RELAXED) >= RUNTIME_LINK_TIMED)
		return NULL;
	return ev_record_on((cudaStream_t)stream, true);
}

void runtime_policy_copy_end(void *started, void *stream, bool h2d, uint64_t bytes, bool queued)
{
	cudaEvent_t e0 = started, e1 = NULL;
	policy_link_t d = link_dir(h2d);

	if (!e0)
		return;
	if (queued)
		e1 = ev_record_on((cudaStream_t)stream, false);
	pthread_mutex_lock(&timed_lock);
	if (e1 && g_link_timed[d] < RUNTIME_LINK_TIMED &&
	    timed_push(&(timed_t){ .link = (int)d, .bytes = bytes, .ev = { e0, e1 } }))
		g_link_timed[d]++;
	else {
		ev_put(e0);
		ev_put(e1);
	}
	pthread_mutex_unlock(&timed_lock);
}

/* ---- logging and the trace ---- */

/* The policy's VMEM_LOG=debug lines (set only at that level): a plan's
 * dump is hundreds of lines of one format, which vmem_log's per-format
 * cap would cut after ten. */
static void log_line(void *ctx, const char *line)
{
	(void)ctx;
	vmem_log_uncapped(VMEM_LOG_DEBUG, "policy: %s", line);
}

static void stats_line(void *ctx, const char *line)
{
	(void)ctx;
	vmem_log_raw(line);
}

static uint64_t evict_order(void *ctx, uint64_t alloc_id, uint64_t offset, uint64_t bytes)
{
	return policy_evict_order(ctx, alloc_id, offset, bytes);
}

static long tid(void)
{
	return (long)syscall(SYS_gettid);
}

/* Appends `,"key":{"pass":value,...}` to buf at k, a value per candidate
 * of t (0 for one not measured yet); returns the new length (< len). */
static size_t trial_obj(char *buf, size_t len, size_t k, const char *key,
			const policy_trial_t *t, const uint64_t *value)
{
	if (k < len)
		k += (size_t)snprintf(buf + k, len - k, ",\"%s\":{", key);
	for (int i = 0; i < t->n && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s\"%s\":%" PRIu64, i ? "," : "",
				      policy_trial_name(t, i), t->runs[i] ? value[i] : 0);
	if (k < len)
		k += (size_t)snprintf(buf + k, len - k, "}");
	return k < len ? k : len - 1;
}

static void note(const policy_action_t *a)
{
	const char *ev = policy_note_name((policy_note_t)a->note);

	char dyn[256] = "";

	if (a->note == POLICY_NOTE_MADE && a->dyn.decided) {
		char d[200];

		policy_dyn_format(&a->dyn, d, sizeof(d));
		snprintf(dyn, sizeof(dyn), "; %s", d);
	}
	if (a->note == POLICY_NOTE_MADE) {
		char gaps[256] = "";

		if (a->gaps.tried) {
			gaps[0] = ';';
			gaps[1] = ' ';
			policy_gaps_format(&a->gaps, gaps + 2, sizeof(gaps) - 2);
		}
		vmem_info("plan %u made: %u calls per iteration, first steady call %" PRIu64
			  ", offload %s%s%s", a->plan_id, a->period, a->steady_seq,
			  policy_offload_name(a->offload_mode), dyn, gaps);
	}
	else if (a->note == POLICY_NOTE_ABANDONED)
		vmem_info("plan %u abandoned", a->plan_id);
	else if (a->note == POLICY_NOTE_TRIAL || a->note == POLICY_NOTE_KEPT) {
		char t[256];

		policy_trial_format(&a->trial, t, sizeof(t));
		if (a->note == POLICY_NOTE_KEPT)
			vmem_info("plan %u: %s", a->plan_id, t);
		else
			vmem_debug("plan %u: timed pass %s (%s)", a->plan_id,
				   policy_pass_name((policy_offload_mode_t)a->offload_mode, a->least),
				   t);
	} else
		vmem_debug("plan %u %s (expected op %d)", a->plan_id, ev, a->expected_op);
	if (trace_enabled()) {
		char line[1536], extra[1024] = "";
		int n;

		if (a->note == POLICY_NOTE_MADE)
			snprintf(extra, sizeof(extra),
				 ",\"link\":{\"h2d\":%" PRIu64 ",\"d2h\":%" PRIu64 "}",
				 a->link_h2d, a->link_d2h);
		if (a->note == POLICY_NOTE_TRIAL || a->note == POLICY_NOTE_KEPT) {
			size_t k = strlen(extra);
			int any = 0;

			k += (size_t)snprintf(extra + k, sizeof(extra) - k, ",\"iter\":%" PRIu64, a->iter);
			k = trial_obj(extra, sizeof(extra), k, "trial", &a->trial, a->trial.ns);
			k = trial_obj(extra, sizeof(extra), k, "misses", &a->trial, a->trial.misses);
			/* the passes ruled out unrun, each with the floor that did it */
			for (int i = 0; i < a->trial.n && k < sizeof(extra); i++)
				if (a->trial.out[i])
					k += (size_t)snprintf(extra + k, sizeof(extra) - k,
							      "%s\"%s\":%" PRIu64,
							      any++ ? "," : ",\"not_run\":{",
							      policy_trial_name(&a->trial, i),
							      a->trial.floor_ns[a->trial.least[i] ? 1 : 0]);
			if (any && k < sizeof(extra))
				snprintf(extra + k, sizeof(extra) - k, "}");
		}
		if (a->gaps.tried && (a->note == POLICY_NOTE_MADE || a->note == POLICY_NOTE_TRIAL ||
				      a->note == POLICY_NOTE_KEPT))
			snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
				 ",\"gaps\":{\"added\":%d,\"wraps\":%d,\"hidden\":%d,\"late\":%d"
				 ",\"bytes\":%" PRIu64 ",\"need_before\":%" PRIu64 ",\"need_after\":%"
				 PRIu64 ",\"fits\":%s}", a->gaps.added, a->gaps.wraps, a->gaps.hidden,
				 a->gaps.late, a->gaps.bytes, a->gaps.need_before, a->gaps.need_after,
				 a->gaps.fits ? "true" : "false");
		if (a->note == POLICY_NOTE_MADE && a->dyn.decided)
			snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
				 ",\"dyn\":{\"budget\":%" PRIu64 ",\"headroom\":%" PRIu64
				 ",\"fits\":%s,\"peak_none\":%" PRIu64 ",\"peak_conv\":%" PRIu64
				 ",\"peak_all\":%" PRIu64 ",\"op_bytes\":%" PRIu64 "}",
				 a->dyn.budget, a->dyn.headroom, a->dyn.fits ? "true" : "false",
				 a->dyn.peak_none, a->dyn.peak_conv, a->dyn.peak_all,
				 a->dyn.op_bytes);
		n = snprintf(line, sizeof(line),
			     "{\"type\":\"plan\",\"seq\":%" PRIu64 ",\"t\":%" PRIu64
			     ",\"tid\":%ld,\"event\":\"%s\",\"plan\":%u,\"period\":%u"
			     ",\"steady_seq\":%" PRIu64 ",\"expected_op\":%d,\"offload\":\"%s\""
			     ",\"pass\":\"%s\"%s}\n",
			     trace_next_seq(), trace_now_ns(), tid(), ev, a->plan_id, a->period,
			     a->steady_seq, a->expected_op, policy_offload_name(a->offload_mode),
			     policy_pass_name((policy_offload_mode_t)a->offload_mode, a->least), extra);
		if (n > 0 && (size_t)n < sizeof(line))
			trace_append(line, (size_t)n);
	}
}

/* ---- start and end ---- */

static policy_offload_mode_t offload_mode(vmem_policy_t p)
{
	switch (p) {
	case VMEM_POLICY_ALL:
		return POLICY_OFFLOAD_ALL;
	case VMEM_POLICY_CONV:
		return POLICY_OFFLOAD_CONV;
	case VMEM_POLICY_DYN:
		return POLICY_OFFLOAD_DYN;
	default:
		return POLICY_OFFLOAD_NONE;
	}
}

int runtime_policy_init(pool_t *pool, uint64_t budget, uint64_t chunk)
{
	policy_config_t c;

	if (vmem_cfg.liveness == VMEM_LIVENESS_OFF && vmem_cfg.policy == VMEM_POLICY_NONE)
		return 0;   /* the reactive layer alone: nothing to plan */
	policy_config_default(&c);
	c.liveness = vmem_cfg.liveness == VMEM_LIVENESS_OFF ? POLICY_LIVENESS_OFF :
		     vmem_cfg.liveness == VMEM_LIVENESS_EAGER ? POLICY_LIVENESS_EAGER :
		     POLICY_LIVENESS_LAZY;
	c.offload = offload_mode(vmem_cfg.policy);
	c.prefetch = vmem_cfg.prefetch == VMEM_PREFETCH_TIMED ? POLICY_PREFETCH_TIMED :
		     POLICY_PREFETCH_VDNN;
	c.gaps = vmem_cfg.gaps;
	c.lookahead = vmem_cfg.lookahead;
	/* dyn's passes are judged by device time: none without events */
	timing_init();
	c.dyn_trials = g_timing ? (uint32_t)vmem_cfg.dyn_trials : 0;
	c.page_size = chunk;
	c.small_threshold = pool_config(pool)->small_threshold;   /* the plan counts pages */
	c.host_map = pool_config(pool)->host_map;
	c.offload_min_bytes = chunk;   /* smaller tensors share pages: never worth a copy */
	c.budget = budget;
	/* the µ-cuDNN solver chooses each convolution's workspace within
	 * what the plan leaves free there */
	c.algo_steps = vmem_workspace_mode(&vmem_cfg) != VMEM_WS_OFF && budget;
	/* dyn's "(m)" passes: the conv hooks run µ-cuDNN's least-workspace
	 * configurations (conv_exec.c), which needs µ-cuDNN on */
	c.dyn_least = c.algo_steps && vmem_cfg.dyn_least;
	if (vmem_log_enabled(VMEM_LOG_DEBUG))
		c.log = log_line;
	if (policy_create(&c, &g_pol)) {
		vmem_error("the policy could not be created (out of host memory); "
			   "running with the reactive layer only");
		g_pol = NULL;
		return -1;
	}
	g_rp_pool = pool;
	g_watching = c.liveness == POLICY_LIVENESS_EAGER || c.offload != POLICY_OFFLOAD_NONE;
	g_poll = c.liveness == POLICY_LIVENESS_EAGER || c.offload != POLICY_OFFLOAD_NONE;
	pool_set_order(pool, evict_order, g_pol, 1024);
	return 0;
}

void runtime_policy_shutdown(void)
{
	if (!g_pol)
		return;
	if (vmem_cfg.stats) {
		policy_stats_t s;

		policy_get_stats(g_pol, &s);
		policy_stats_print(&s, stats_line, NULL);
	}
	/* the pool may still ask for the order (late frees): keep the policy */
}

bool runtime_policy_on(void)
{
	return g_pol != NULL && __atomic_load_n(&g_watching, __ATOMIC_RELAXED);
}

void runtime_policy_note_pressure(void)
{
	if (g_pol && !__atomic_load_n(&g_watching, __ATOMIC_RELAXED)) {
		__atomic_store_n(&g_watching, true, __ATOMIC_RELAXED);
		vmem_debug("policy: the budget is reached; learning the iteration from now on");
	}
}

void runtime_policy_allocated(uint64_t alloc_id, uint64_t bytes)
{
	if (g_pol)
		policy_allocated(g_pol, alloc_id, bytes);
}

void runtime_policy_freed(uint64_t alloc_id)
{
	if (g_pol && alloc_id)
		policy_freed(g_pol, alloc_id);
}

void runtime_policy_freed_ptr(uintptr_t ptr)
{
	pool_ref_t r = { .ptr = ptr, .bytes = 1 };
	pool_span_t sp;

	if (!g_pol)
		return;
	pool_resolve(g_rp_pool, &r, 1, &sp);
	if (sp.offset == 0)
		runtime_policy_freed(sp.alloc_id);
}

void runtime_policy_note_fault(bool copied)
{
	tl_policy_t *t = tl_pol;

	if (t && copied)
		t->misses++;
	else if (t)
		t->maps++;
}

/* ---- the calls ---- */

static pool_range_t prange(const policy_action_t *a)
{
	return (pool_range_t){ .alloc_id = a->alloc_id, .offset = a->offset, .bytes = a->bytes };
}

/* ---- prefetches that found no room yet ---- */

static void retry_add(const pool_range_t *r, bool soon, bool noroom, int until_op)
{
	tl_policy_t *t = tl_pol;

	if (!t)
		return;
	if (t->nretry == RETRY_MAX) {   /* the oldest gives way */
		memmove(t->retry, t->retry + 1, (RETRY_MAX - 1) * sizeof(*t->retry));
		t->nretry--;
	}
	t->retry[t->nretry++] = (retry_t){ *r, soon, noroom, until_op };
}

/* The call about to be issued uses these spans: a prefetch still waiting
 * for room was for it (or an earlier use), and the call brings back what
 * is missing itself; one kept waiting would hold its pages to the next
 * use.  (Keeping one the call covers only in part, as for a later call,
 * was measured: no miss fewer, VGG-16 (128) dyn on the h100 model at 1/2
 * 346.9 -> 353.1 ms.) */
static void retry_used(tl_policy_t *t, const pool_span_t *sp, int n)
{
	int w = 0;

	for (int i = 0; i < t->nretry; i++) {
		const pool_range_t *r = &t->retry[i].r;
		bool used = false;

		for (int j = 0; j < n && !used; j++)
			used = sp[j].alloc_id == r->alloc_id && sp[j].offset < r->offset + r->bytes &&
			       r->offset < sp[j].offset + sp[j].bytes;
		if (!used)
			t->retry[w++] = t->retry[i];
	}
	t->nretry = w;
}

/* Tries the waiting prefetches for the next call (`next`) or the others,
 * those still kept; *got: one came in.  Whether one for the next call is
 * still without room. */
static bool retry_some(tl_policy_t *t, bool *keep, bool next, bool *got)
{
	bool noroom = false;

	*got = false;
	for (int i = 0; i < t->nretry; i++) {
		retry_t *e = &t->retry[i];

		if (!keep[i] || (e->soon && policy_op_distance(g_pol, e->until_op) == 0) != next)
			continue;
		keep[i] = pool_prefetch(g_rp_pool, &e->r,
					!e->soon ? POOL_WAIT_NONE :
					next ? POOL_WAIT_USE : POOL_WAIT_ALL) == POOL_ENOMEM;
		e->noroom = keep[i];
		*got |= !keep[i];
		noroom |= keep[i] && next;
	}
	return noroom;
}

/* After a call: what a finished copy or use freed may take the waiting
 * prefetches now.  One for the next call (`soon`: the lookahead) waits
 * for the copies out that make its room - those under way, and if they
 * are not enough, those it starts (POOL_WAIT_ALL: another prefetch for
 * the same call may have taken the pages sent out for this one) - now
 * that the call before it is queued and runs meanwhile: waiting before
 * that call left the device without work (VGG-16 (128) under `conv(m)`
 * on the h100 model at 1/2: 345 -> 372 ms), and not at all left the next
 * call to fault the range in. */
static void retry_run(tl_policy_t *t)
{
	bool keep[RETRY_MAX], got = true, blocked = false;
	int w = 0;

	/* Belady: the next call's first, and none for a later call while one
	 * of those finds no room (as blocked_by_nearer).  The next call's are
	 * tried again (three rounds at most) while one came in after another
	 * had failed: the failed one's wait let the call before finish, and
	 * its dead pages came free (random:561805009's batch-normalization
	 * backward). */
	for (int i = 0; i < t->nretry; i++)
		keep[i] = true;
	for (int round = 0; round < 3 && got && (round == 0 || blocked); round++)
		blocked = retry_some(t, keep, true, &got);
	if (!blocked)
		(void)retry_some(t, keep, false, &got);
	for (int i = 0; i < t->nretry; i++)
		if (keep[i])
			t->retry[w++] = t->retry[i];
	t->nretry = w;
}

/* A prefetch for a later call while one for the next call still waits
 * for room: Belady's order says the next call's range comes first - a
 * chunk given to the later one now is one the next call's fault-in then
 * takes back (random:561805009 in the network style under `dyn`, a
 * batch-normalization backward whose four slab pages are the whole
 * budget: the lookahead for the call after it took the chunk its own
 * last page needed, and was evicted again by that page's fault). */
static bool blocked_by_nearer(int until_op)
{
	tl_policy_t *t = tl_pol;
	int d = -2;   /* until_op's distance, asked once a candidate is seen */

	for (int i = 0; t && i < t->nretry; i++) {
		const retry_t *e = &t->retry[i];

		if (!e->soon || !e->noroom || e->until_op == until_op)
			continue;
		if (d == -2 && (d = policy_op_distance(g_pol, until_op)) <= 0)
			return false;
		if (policy_op_distance(g_pol, e->until_op) < d)
			return true;
	}
	return false;
}

/* Carries out one action.  cudaSuccess, or the error that refuses the
 * call (a read of bytes the plan dropped). */
/* VMEM_LOG=debug: a prefetch found no chunk it may take - what holds the
 * device, by what a prefetch may do with it (pool_census), so that a
 * miss in a planned iteration can be traced to its cause: pages the plan
 * counts away but still dirty, prefetched ranges waiting for their
 * calls, memory the plan does not know. */
static void log_prefetch_short(const pool_range_t *r, int until_op, bool next)
{
	pool_census_t c;

	if (pool_census(g_rp_pool, r, &c) != POOL_OK)
		return;
	vmem_debug("prefetch of allocation %llu [+%llu, %llu bytes) for plan op #%d%s found no "
		   "chunk; resident %u pages: dead %u, clean needed later %u, dirty needed later "
		   "%u (the call's fault copies them out), needed sooner %u, outside the plan %u, "
		   "prefetched not used %u, offloading %u",
		   (unsigned long long)r->alloc_id, (unsigned long long)r->offset,
		   (unsigned long long)r->bytes, until_op, next ? " (lookahead)" : "",
		   c.resident, c.dead, c.clean_later, c.dirty_later, c.sooner, c.unknown, c.held,
		   c.offloading);
}

/* One of the plan's prefetches: a range for this call or the next is worth
 * a host wait for the copies out that make its room; one for a call
 * further ahead is tried again after each call meanwhile.  The next
 * call's (the lookahead's), brought, is checked again once this call is
 * queued: this call's own fault-ins, which come after it, may have taken
 * it back (a pooling backward's fresh output crowding out the block the
 * channel-slice kernel after it reads: random:1826307923 caching at 1/2,
 * 10 misses a run under conv).  Issuing the other calls' prefetches after
 * this call's fault-ins instead was measured and not kept: the fault-ins
 * then made their room by Belady's order alone, copying out dirty pages
 * where the prefetches had dropped clean ones (VGG-16 (64) conv(p) on
 * the h100 model at 1/2: 258 -> 279 ms). */
static void prefetch(const pool_range_t *r, int until_op, bool soon, bool next, bool own)
{
	pool_status_t st;

	if (blocked_by_nearer(until_op)) {
		if (!own)
			retry_add(r, soon, true, until_op);
		return;
	}
	st = pool_prefetch(g_rp_pool, r, soon ? POOL_WAIT_UNDERWAY : POOL_WAIT_NONE);
	if (st == POOL_ENOMEM) {
		if (vmem_log_enabled(VMEM_LOG_DEBUG))
			log_prefetch_short(r, until_op, next);
		if (!own)
			retry_add(r, soon, true, until_op);
	} else if (st == POOL_OK && soon && next) {
		retry_add(r, true, false, until_op);
	}
}

static cudaError_t act(const policy_action_t *a, const vmem_event_t *ev, bool before)
{
	pool_range_t r = prange(a);
	pool_status_t st;

	switch (a->kind) {
	case POLICY_ACT_DEAD:
		pool_discard(g_rp_pool, &r, a->eager);
		break;
	case POLICY_ACT_REVIVE:
		st = pool_undead(g_rp_pool, &r);
		if (st == POOL_ELOST && a->reason == POLICY_REVIVE_READ) {
			char line[768];

			policy_loss_format(&a->loss, ev, line, sizeof(line));
			if (!a->certain) {
				/* a scanned kernel argument: vmem knows neither its
				 * extent nor whether it reads (a fill kernel on a block
				 * a caching allocator handed out again only writes) */
				if (!__atomic_exchange_n(&g_warned_maybe, true, __ATOMIC_RELAXED))
					vmem_warn("%s; the call is a kernel whose argument's extent and "
						  "access vmem cannot see, so it runs, assuming it only "
						  "writes there (said once; counted as 'unknown extents "
						  "over them')", line);
				break;
			}
			vmem_error("%s", line);
			return cudaErrorIllegalAddress;
		}
		break;
	case POLICY_ACT_OFFLOAD:
		pool_offload(g_rp_pool, &r);
		break;
	case POLICY_ACT_PREFETCH:
		/* one for the call about to be issued that found no room:
		 * the call brings the rest itself (as retry_used); kept
		 * waiting, it would come in after its call, held for the
		 * range's next use, an iteration away or as good as
		 * (random:2051145321 in the network style at 1/4: a backward
		 * filter's x, back after it ran, crowded out the backward
		 * data's dx two calls later - 2 misses an iteration) */
		prefetch(&r, a->until_op, a->soon, a->next, before && a->until_op == a->plan_op);
		break;
	case POLICY_ACT_SETTLE:
		pool_settle(g_rp_pool, &r);
		break;
	case POLICY_ACT_NOTE:
		__atomic_store_n(&g_least, a->note != POLICY_NOTE_ABANDONED && a->least,
				 __ATOMIC_RELAXED);
		note(a);
		break;
	case POLICY_ACT_MARK:
		__atomic_store_n(&g_least, a->least, __ATOMIC_RELAXED);
		mark(a, ev);
		timing_poll();
		break;
	case POLICY_ACT_ALGO:
	default:
		break;   /* the room: read by the conv hooks (runtime_policy_conv_room) */
	}
	return cudaSuccess;
}

static cudaError_t run_actions(tl_policy_t *t, const vmem_event_t *ev, bool before)
{
	cudaError_t err = cudaSuccess;
	int mode = t->acts.n ? runtime_relax_begin() : -1;

	for (int i = 0; i < t->acts.n; i++) {
		cudaError_t e = act(&t->acts.v[i], ev, before);

		/* the µ-cuDNN solver keeps the least room it sees: a room of one
		 * of dyn's passes is not the plan's lasting one */
		if (t->acts.v[i].kind == POLICY_ACT_ALGO && !t->acts.v[i].in_trial)
			t->room = t->acts.v[i].room;

		if (e != cudaSuccess && err == cudaSuccess)
			err = e;
	}
	if (mode >= 0)
		runtime_relax_end(mode);
	if (t->acts.lost)
		vmem_warn("policy: actions lost (out of host memory); the reactive layer covers them");
	policy_actions_clear(&t->acts);
	return err;
}

static void fill_event(vmem_event_t *ev, const runtime_call_t *c, const tl_policy_t *t)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = c->kind;
	ev->api = c->api;
	ev->stream = (uintptr_t)c->stream;
	ev->thread = (uint64_t)tid();
	ev->seq = c->seq;
	ev->nranges = t->n;
	ev->ranges = t->ranges;
	if (c->info)
		ev->info = *c->info;
	ev->t_ns = c->t_ns;
	ev->dur_ns = c->dur_ns;
}

cudaError_t runtime_policy_before(const runtime_call_t *c)
{
	tl_policy_t *t;
	vmem_event_t ev;

	if (!g_pol || !(t = tl_get()))
		return cudaSuccess;
	t->pending = false;
	t->room = UINT64_MAX;
	if (!tl_reserve(t, c->nrefs))
		return cudaSuccess;   /* unseen by the policy: it suspends its plan */
	for (int i = 0; i < c->nrefs; i++) {
		/* a workspace the call does not use: the bytes the application
		 * declared, written whole; of no declared size, nothing - as
		 * an unknown extent it would be the rest of its caching segment
		 * written whole, tensors after it declared dead */
		bool none = vmem_ref_empty(c->refs[i].access) && !c->refs[i].bytes;

		t->refs[i] = pool_ref_of(none ? 0 : c->refs[i].ptr, c->refs[i].bytes,
					 c->refs[i].access);
	}
	if (c->nrefs)
		pool_resolve(g_rp_pool, t->refs, c->nrefs, t->spans);
	if (t->nretry)
		retry_used(t, t->spans, c->nrefs);
	for (int i = 0; i < c->nrefs; i++) {
		vmem_range_t *r = &t->ranges[i];

		r->alloc_id = t->spans[i].alloc_id;
		r->offset = t->spans[i].offset;
		r->bytes = r->alloc_id ? t->spans[i].bytes : c->refs[i].bytes;
		r->ptr = c->refs[i].ptr;
		r->access = c->refs[i].access & (uint8_t)~VMEM_ACCESS_UNUSED;
		if (r->alloc_id && !c->refs[i].bytes)
			r->access |= VMEM_ACCESS_GUESS;
		r->role = c->refs[i].role;
	}
	t->n = c->nrefs;
	t->misses = 0;
	t->maps = 0;
	fill_event(&ev, c, t);
	policy_before(g_pol, &ev, &t->acts);
	t->pending = true;
	return run_actions(t, &ev, true);
}

/* The call in flight's ranges as the pool's, into t->pair from `at`;
 * returns the end. */
static int pair_put(tl_policy_t *t, int at)
{
	for (int i = 0; i < t->n; i++)
		t->pair[at++] = (pool_range_t){ t->ranges[i].alloc_id, t->ranges[i].offset,
						t->ranges[i].bytes };
	return at;
}

/* True when the call in flight and the one before it on this thread need
 * more pages together than the budget holds (policy_note_miss_beside);
 * VMEM_LOG=debug names the two.  Counted only for a call that missed: one
 * lock and a sort of its ranges. */
static bool miss_beside(tl_policy_t *t, const runtime_call_t *c)
{
	uint64_t budget, chunk;
	uint32_t together;
	int m;

	if (!t->nprev)
		return false;
	m = pair_put(t, t->nprev);
	runtime_budget_free(&budget, NULL, &chunk);
	if (!chunk || (together = pool_ranges_pages(g_rp_pool, t->pair, m)) <= budget / chunk)
		return false;
	if (policy_state(g_pol) == POLICY_PLANNED)
		vmem_debug("%s missed %llu page%s beside the call before it (%s): the two need %u "
			   "pages together, the budget holds %llu", c->api,
			   (unsigned long long)t->misses, t->misses == 1 ? "" : "s",
			   t->prev_api ? t->prev_api : "?", together,
			   (unsigned long long)(budget / chunk));
	return true;
}

/* The call's ranges, kept for the next call's miss_beside. */
static void keep_as_prev(tl_policy_t *t, const runtime_call_t *c)
{
	t->nprev = pair_put(t, 0);
	t->prev_api = c->api;
}

void runtime_policy_after(const runtime_call_t *c)
{
	tl_policy_t *t = tl_pol;
	vmem_event_t ev;

	if (!g_pol || !t || !t->pending)
		return;
	t->pending = false;
	if (t->misses) {
		policy_note_miss(g_pol, t->misses);
		if (miss_beside(t, c))
			policy_note_miss_beside(g_pol, t->misses);
		t->misses = 0;
	}
	keep_as_prev(t, c);
	if (t->maps) {
		policy_note_map(g_pol, t->maps);
		t->maps = 0;
	}
	timing_end(c);
	if (__atomic_load_n(&g_tn, __ATOMIC_RELAXED))
		timing_poll();
	fill_event(&ev, c, t);
	policy_after(g_pol, &ev, &t->acts);
	run_actions(t, &ev, false);
	if (g_poll || t->nretry) {
		int mode = runtime_relax_begin();

		pool_poll(g_rp_pool);
		if (t->nretry)
			retry_run(t);
		runtime_relax_end(mode);
	}
}

bool runtime_policy_conv_least(void)
{
	return g_pol && __atomic_load_n(&g_least, __ATOMIC_RELAXED);
}

uint64_t runtime_policy_conv_room(void)
{
	tl_policy_t *t = tl_pol;

	return g_pol && t && t->pending ? t->room : UINT64_MAX;
}

bool runtime_policy_explain_loss(uint64_t alloc_id, uint64_t offset, uint64_t bytes, char *buf,
				 size_t len)
{
	policy_loss_t l;

	if (!g_pol || policy_find_loss(g_pol, alloc_id, offset, bytes, &l))
		return false;
	policy_loss_format(&l, NULL, buf, len);
	return true;
}
