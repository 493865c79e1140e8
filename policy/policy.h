/* policy/policy.h - the proactive layer: events in, actions out.
 *
 * The runtime hands every hooked call to the policy twice: policy_before()
 * once the call's ranges are resolved (allocation id and offset) and before
 * it makes them resident, and policy_after() once the call was issued.
 * Both append actions for the runtime to carry out through the pool.  From
 * the calls alone the policy finds the training iteration (period.c),
 * builds its dataflow graph and liveness (graph.c, liveness.c), plans
 * drops, offloads and prefetches (plan.c) and then checks every later call
 * against the plan (match.c): DESIGN.md points 4-5.
 *
 *     learning --(period confirmed)--> planned --(a call differs)--> suspended
 *        ^                               ^                               |
 *        |                               +----(the plan's first op)------+
 *        +-----------(suspended longer than abandon_after periods)-------+
 *
 * While planned, each call is matched against the plan's next op on the
 * call's own (thread, stream) lane: PyTorch's backward thread interleaves
 * with the main thread, so only the order within a lane is fixed.  A call
 * that differs (an evaluation pass, a new batch size, a new layer, a
 * thread the plan never saw) suspends the plan for the rest of that
 * iteration: the reactive layer is in charge, every range marked dead and
 * not yet dropped is revived, and the plan resumes when its first op comes
 * again.  A new steady pattern (the detector keeps running while
 * suspended) replaces the plan.
 *
 * Data is never silently lost.  A DEAD action says a range will not be
 * read before the plan's op `until_op` rewrites it; the policy keeps the
 * set of ranges it declared dead and, when a call reads one of them
 * anyway, emits REVIVE with a full description (policy_loss_t): the
 * runtime asks the pool whether any of those bytes were dropped and, if
 * so, fails the call with policy_loss_format()'s line.
 *
 * Pure C: no CUDA, no environment, no printing except through the log
 * callback of the configuration.  Thread-safety: every function taking a
 * policy_t locks its one mutex; the log callback is called with it held
 * and must not call back into the policy.  The runtime must not hold the
 * pool's lock when it calls policy_before/after (the pool calls
 * policy_evict_order with its own lock held: lock order pool -> policy).
 */
#ifndef VMEM_POLICY_POLICY_H
#define VMEM_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/event.h"
#include "policy/program.h"

typedef enum {
	POLICY_LIVENESS_OFF = 0,   /* no DEAD actions */
	POLICY_LIVENESS_LAZY,      /* DEAD ranges are dropped when memory is needed (default) */
	POLICY_LIVENESS_EAGER,     /* ... as soon as they die */
} policy_liveness_t;

typedef struct {
	policy_liveness_t liveness;
	policy_offload_mode_t offload;     /* VMEM_POLICY=none|all|conv|dyn */
	uint64_t budget;                   /* device bytes vmem may map (DYN decides from it,
					      ALGO rooms are computed against it);
					      0 = unknown: DYN offloads nothing, no rooms */
	uint64_t dyn_headroom;             /* DYN: bytes kept free for workspaces and small
					      allocations; POLICY_HEADROOM_DEFAULT = budget / 16 */
	uint32_t dyn_trials;               /* DYN: planned iterations each mode runs, timed, before
					      the fastest is kept (trial.c); 0 = the computed
					      choice alone (dyn.c) */
	bool dyn_least;                    /* DYN: the passes also time each mode with every
					      convolution's least-workspace configuration
					      (vDNN's "(m)"; the runtime's conv hooks can run
					      them: actions' `least`) */
	policy_prefetch_mode_t prefetch;   /* VMEM_PREFETCH=vdnn|timed */
	uint64_t page_size;                /* the pool's chunk size (eviction keys) */
	uint64_t small_threshold;          /* the pool's: smaller allocations share pages; 0 =
					      the plan counts bytes, not pages */
	uint64_t h2d_bytes_per_s;          /* link bandwidth; 0 = measured (policy_link_sample) */
	uint64_t prefetch_budget;          /* bytes of prefetched data held at once; 0 = no cap */
	uint64_t offload_min_bytes;        /* smaller tensors are never offloaded */
	bool algo_steps;                   /* ALGO actions (the workspace room) before each
					      convolution */
	bool gaps;                         /* VMEM_GAPS: an offloading plan that does not fit
					      also moves idle intervals of other tensors
					      (gaps.c); default on */
	bool lookahead;                    /* VMEM_LOOKAHEAD: under all, conv and dyn, each
					      call's reads are prefetched before the call before
					      it, should they be away (plan.c); default on */
	bool host_map;                     /* the pool maps the guessed pages of a call beyond
					      the budget from the host (pool cfg.host_map):
					      the plan chooses which (hostpages.c); default off */
	/* iteration detection (period.c) */
	uint32_t min_period, max_period, reps, max_candidates, soft_permille;
	uint64_t history_events, history_ranges;   /* 0: (reps + 1) * max_period + 64, 8 per event */
	uint32_t abandon_after;            /* periods of calls suspended before the plan is dropped */
	/* VMEM_LOG=debug: every pass of a new plan is printed here; NULL = quiet */
	policy_print_fn log;
	void *log_ctx;
} policy_config_t;

/* Defaults: lazy liveness, no offload, no budget (headroom budget / 16,
 * one timed iteration per dyn mode), vDNN prefetch, 2 MiB pages, periods
 * of 4 .. 16384 significant calls confirmed by 3 repetitions with at most
 * 25% soft positions, abandon after 4 periods. */
void policy_config_default(policy_config_t *c);

typedef enum {
	POLICY_ACT_DEAD = 0,   /* the range's bytes will not be read again before they are
				  rewritten: drop its pages (whole pages only) when memory
				  is needed, or now when `eager` */
	POLICY_ACT_REVIVE,     /* the range is no longer dead; when reason is READ, the call
				  reads it (see `certain`): if the pool dropped any of it, fail
				  the call with `loss` */
	POLICY_ACT_OFFLOAD,    /* copy the range to host and release it from the device
				  (until_op reads it next) */
	POLICY_ACT_PREFETCH,   /* bring the range back without a host wait; hold it until
				  its first use by until_op */
	POLICY_ACT_ALGO,       /* the convolution about to be issued has `room` bytes for
				  its workspace beside what the plan holds resident then
				  (algo/workspace: the application's, when the plan was
				  learnt); the conv hooks' solver chooses within it */
	POLICY_ACT_NOTE,       /* a plan event for the trace and the stats */
	POLICY_ACT_SETTLE,     /* the call about to be issued is the range's last use before
				  its OFFLOAD: record now the point its last write completes
				  at, so the offload's copy may overlap this call (both
				  read) instead of waiting for it (vDNN §III-A) */
	POLICY_ACT_MARK,       /* planned iteration `iter` begins with the call about to be
				  issued: record the device's time here, on its stream; when
				  `prev_whole`, the iteration since the last MARK ran whole
				  under the plan: report its length (policy_iteration_time) */
} policy_act_kind_t;

typedef enum {
	POLICY_NOTE_MADE = 0,      /* a plan was made (period, plan_id, steady_seq) */
	POLICY_NOTE_SUSPENDED,     /* a call differed from expected_op */
	POLICY_NOTE_RESUMED,       /* the plan's first op came again */
	POLICY_NOTE_ABANDONED,     /* the plan was dropped (replaced, or suspended too long) */
	POLICY_NOTE_TRIAL,         /* DYN: the iteration beginning runs offload_mode as a timed
				      pass (trial: the passes so far) */
	POLICY_NOTE_KEPT,          /* DYN: the passes are over, offload_mode is kept (trial:
				      what each measured) */
} policy_note_t;

typedef enum { POLICY_REVIVE_READ = 0, POLICY_REVIVE_SUSPEND } policy_revive_reason_t;

/* What the runtime needs to say when a read meets dropped bytes. */
typedef struct {
	uint64_t alloc_id, offset, bytes;   /* the range (current allocation) */
	uintptr_t ptr;                      /* its address */
	uint32_t plan_id;
	uint64_t iteration;                 /* planned iteration it was declared dead in */
	int last_read_op;                   /* plan op that last read it; -1: written, never read */
	vmem_op_kind_t last_read_kind;
	const char *last_read_api;
	uint64_t last_read_seq;             /* that op's seq in this run (0 unknown) */
	int after_op;                       /* dead after this plan op ... */
	uint64_t after_seq;
	vmem_op_kind_t after_kind;
	const char *after_api;
	int until_op;                       /* ... until this one rewrites it */
	vmem_op_kind_t until_kind;
	const char *until_api;
	bool freed;                         /* ... or until the application frees it
					       before until_op (a fresh tensor after
					       its last use) */
} policy_loss_t;

typedef struct {
	uint8_t kind;          /* policy_act_kind_t */
	uint8_t eager;         /* DEAD */
	uint8_t note;          /* NOTE: policy_note_t */
	uint8_t reason;        /* REVIVE: policy_revive_reason_t */
	uint8_t certain;       /* REVIVE READ: 1 when the call reads the range for sure (an
				  API-defined input); 0 for a scanned kernel argument, which
				  vmem must assume read-write but may only be written (a fill
				  kernel on a block a caching allocator handed out again) */
	uint64_t alloc_id, offset, bytes;
	uintptr_t ptr;
	int plan_op;           /* the plan op this action belongs to (-1 none) */
	int until_op;          /* DEAD: rewriter; PREFETCH: the op to hold it for; OFFLOAD:
				  its next reader */
	int32_t algo;          /* ALGO */
	uint64_t workspace;    /* ALGO */
	uint64_t room;         /* ALGO: budget - bytes resident while the conv runs (its outputs
				  and what comes back for it included, its workspace not);
				  UINT64_MAX when the budget is unknown */
	uint8_t in_trial;      /* ALGO: the iteration is one of dyn's timed passes: its room is
				  that pass's mode's, not to be taken as the plan's lasting
				  room (a solver that keeps the least room seen would keep the
				  tightest pass's) */
	uint8_t next;          /* PREFETCH: the lookahead's (what the lane's next call reads;
				  mostly resident already), not one of the plan's moves */
	uint8_t soon;          /* PREFETCH: for this call or the lane's next one (the
				  lookahead's always): a host wait for copies out is worth it */
	uint32_t plan_id;      /* NOTE */
	uint32_t period;       /* NOTE */
	int expected_op;       /* NOTE SUSPENDED: the op the call was compared with (-1: its
				  lane is not in the plan) */
	uint64_t steady_seq;   /* NOTE MADE: seq of the first op of the first steady iteration */
	uint8_t offload_mode;  /* NOTE MADE: policy_offload_mode_t the plan runs (NONE, ALL or
				  CONV; under DYN the one chosen) */
	policy_dyn_t dyn;      /* NOTE MADE: dyn.decided = 1 when DYN chose offload_mode; then
				  dyn.peak_none/conv/all, dyn.budget, dyn.headroom, dyn.fits,
				  dyn.op_bytes for the trace's plan record
				  (policy_dyn_format gives the log line) */
	policy_gaps_t gaps;    /* NOTE MADE / TRIAL / KEPT: what gaps.c added to the offload
				  set in effect (gaps.tried = 0: nothing to add) */
	uint64_t link_h2d, link_d2h;  /* NOTE MADE: the link's bandwidth the plan assumed
					 (bytes/s: measured, configured or the default) */
	uint64_t iter;         /* MARK, NOTE TRIAL / KEPT: the planned iteration beginning
				  (policy_iteration_time's) */
	uint8_t prev_whole;    /* MARK: the one before it ran whole under the plan */
	uint8_t least;         /* MARK, NOTE MADE / TRIAL / KEPT: from this call on, the conv
				  hooks run each convolution's least-workspace configuration
				  (a dyn pass or the kept candidate is "(m)"); 0: the one
				  chosen within the plan's room */
	policy_trial_t trial;  /* NOTE TRIAL / KEPT: dyn's measured passes */
	policy_loss_t loss;    /* REVIVE */
} policy_action_t;

/* A growable list the caller owns and reuses (no allocation once warm). */
typedef struct {
	policy_action_t *v;
	int n, cap;
	bool lost;             /* an action could not be appended (out of memory) */
} policy_actions_t;

void policy_actions_init(policy_actions_t *a);
void policy_actions_clear(policy_actions_t *a);
void policy_actions_free(policy_actions_t *a);

typedef enum { POLICY_LEARNING = 0, POLICY_PLANNED, POLICY_SUSPENDED } policy_state_t;

typedef struct {
	uint64_t events, significant;
	uint64_t plans_made, plans_abandoned, suspensions, resumes;
	uint64_t iterations_planned;     /* planned iterations run start to end, unsuspended */
	uint64_t ops_matched;
	uint64_t dead_actions, dead_bytes;
	uint64_t revives_read, revives_suspend;
	uint64_t offloads, offload_bytes, prefetches, prefetch_bytes;
	uint64_t lookaheads;             /* PREFETCH actions of the lookahead (plan.c): ranges the
					    next call reads, brought if away (most are resident) */
	uint64_t entry_steps;            /* DEAD and OFFLOAD actions due before op 0 of an
					    iteration the plan did not run from its start
					    (policy.c, entry_steps) */
	uint64_t misses_planned, misses_other;   /* reported by the runtime: fault-ins that
						    brought bytes back */
	uint64_t misses_planned_beside;  /* of misses_planned, those of calls whose pages and
					    the call's before them on the thread exceed the
					    budget together (policy_note_miss_beside) */
	uint64_t maps_planned, maps_other;       /* fault-ins that only mapped fresh pages
						    (a whole overwrite, a first touch) */
	uint32_t period;                 /* of the current plan, 0 none */
	uint8_t state;                   /* policy_state_t */
	uint8_t offload_mode;            /* policy_offload_mode_t of the current plan (NONE when none) */
	uint64_t dyn_decisions;          /* plans whose offload mode DYN chose */
	uint8_t dyn_mode;                /* the last DYN decision: mode chosen, */
	uint8_t dyn_fits;                /* whether it fit, */
	uint64_t peak_none, peak_conv, peak_all;   /* peak resident bytes under each, */
	uint64_t dyn_budget;             /* and the budget it was judged against */
	policy_gaps_t gaps;              /* gaps.c's intervals in the offload set in effect */
	/* the link, from the runtime's timed copies (policy_link_sample),
	   [POLICY_LINK_H2D] and [POLICY_LINK_D2H] */
	uint64_t link_copies[2], link_bytes[2], link_ns[2];
	uint64_t plan_h2d, plan_d2h;     /* bytes/s the current plan assumed (0: none made) */
	/* planned iterations timed on the device (MARK pairs) */
	uint64_t iters_timed, iter_last_ns, iter_best_ns;
	policy_trial_t trial;            /* DYN's measured passes of the current plan (n 0: none) */
} policy_stats_t;

typedef struct policy policy_t;

/* 0 and *out, or -1 (out of memory). */
int policy_create(const policy_config_t *cfg, policy_t **out);
void policy_destroy(policy_t *p);

/* A hooked call, every kind (syncs and queries included: they are folded
 * into the next significant call).  ev->ranges resolved (alloc_id 0 for
 * foreign memory).  ev->seq may be 0 when the runtime learns the call's
 * trace seq only after issuing it.  Appends PREFETCH, ALGO, REVIVE and NOTE
 * actions.  Returns the number appended. */
int policy_before(policy_t *p, const vmem_event_t *ev, policy_actions_t *out);
/* The same call once issued, on the same thread, before that thread's
 * next policy_before (ev->seq: the trace seq, which the loss messages and
 * policy_duration use; dur_ns if known).  Appends DEAD and OFFLOAD actions
 * of the op it matched.  Returns the number appended. */
int policy_after(policy_t *p, const vmem_event_t *ev, policy_actions_t *out);
/* Allocation bookkeeping (ids increase; never reused). */
void policy_allocated(policy_t *p, uint64_t alloc_id, uint64_t bytes);
void policy_freed(policy_t *p, uint64_t alloc_id);
/* A device duration measured later (CUDA events on a GPU). */
void policy_duration(policy_t *p, uint64_t seq, uint64_t dur_ns);
/* Planned iteration `iter` of plan `plan_id` (a MARK's) took `ns` on the
 * device, from its MARK to the next one's.  Counted in the stats; under
 * DYN's passes it is that pass's time (a time of an earlier plan's
 * iteration, arriving late, is only counted). */
void policy_iteration_time(policy_t *p, uint32_t plan_id, uint64_t iter, uint64_t ns);

/* One planned iteration's convolutions need at least `ns` on the device
 * with the least-workspace configurations (least) or the plan's (not
 * least), by µ-cuDNN's measured times: DYN's passes do not run a
 * candidate that cannot beat a pass already measured
 * (policy_trial_floor).  0: unknown. */
void policy_pass_floor(policy_t *p, bool least, uint64_t ns);

typedef enum { POLICY_LINK_H2D = 0, POLICY_LINK_D2H = 1 } policy_link_t;
/* Copies over the link measured below this many bytes are not trusted:
 * plans assume POLICY_LINK_DEFAULT until then. */
#define POLICY_LINK_MIN_BYTES ((uint64_t)32 << 20)
/* One of the runtime's own copies, timed on the device (two events on the
 * copy's stream around it): `bytes` moved in `ns`.  Plans made afterwards
 * take the link's bandwidth in that direction as the sums' ratio (for
 * timed prefetch and the rooms) unless the configuration sets one. */
void policy_link_sample(policy_t *p, policy_link_t dir, uint64_t bytes, uint64_t ns);
/* The bandwidth a plan made now would assume (bytes/s): configured,
 * measured, or POLICY_LINK_DEFAULT. */
uint64_t policy_link_bandwidth(policy_t *p, policy_link_t dir);
/* Eviction rank of a range of the *current* allocation alloc_id: larger
 * is evicted first (evict.c's keys: POLICY_KEY_UNKNOWN without a plan or
 * for memory the plan does not know, then distance to the next use,
 * POLICY_KEY_UNUSED for memory the iteration never touches). */
uint64_t policy_evict_order(policy_t *p, uint64_t alloc_id, uint64_t offset, uint64_t bytes);
/* How many calls of the plan come before op `op` from now (0: it is the
 * next call to be issued, or the one being issued), cyclically; -1
 * without a plan running. */
int policy_op_distance(policy_t *p, int op);
/* The runtime faulted `n` ranges in with their bytes copied back: counted
 * as planned misses while planned.  A fault-in that only maps fresh pages
 * (nothing to bring back: a call that overwrites them whole, a first
 * touch) is not a miss: policy_note_map counts those apart. */
void policy_note_miss(policy_t *p, uint64_t n);
/* Of the misses just noted, n of a call that needs, with the call before
 * it on its thread, more pages than the budget holds: while that call
 * runs its pages stay, and what the two need beyond the budget can only
 * come once it is done - a plan that brings data ahead cannot hide those
 * copies, only choose which pages they are.  Counted while planned. */
void policy_note_miss_beside(policy_t *p, uint64_t n);
void policy_note_map(policy_t *p, uint64_t n);
policy_state_t policy_state(policy_t *p);
/* The description of dropped bytes overlapping the range (the pool found
 * them lost), from the dead set or the recently revived ranges.  0 when
 * found, -1 otherwise. */
int policy_find_loss(policy_t *p, uint64_t alloc_id, uint64_t offset, uint64_t bytes,
		     policy_loss_t *out);
/* One line (no "vmem: error:" prefix, no newline) for a call that reads
 * lost bytes.  `now` may be NULL. */
size_t policy_loss_format(const policy_loss_t *l, const vmem_event_t *now, char *buf,
			  size_t len);

void policy_get_stats(policy_t *p, policy_stats_t *s);
/* The VMEM_STATS lines of the policy. */
void policy_stats_print(const policy_stats_t *s, policy_print_fn out, void *ctx);
/* The state, the detector and the whole current plan (every pass). */
void policy_dump(policy_t *p, policy_print_fn out, void *ctx);

/* For tests: the current plan (NULL when none).  Valid until the next call
 * into the policy; not locked. */
const policy_plan_t *policy_plan(const policy_t *p);
const char *policy_state_name(policy_state_t s);
const char *policy_act_name(policy_act_kind_t k);
const char *policy_note_name(policy_note_t n);

#endif
