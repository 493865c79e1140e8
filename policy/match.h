/* policy/match.h - executing a plan: matching calls against it, and the set
 * of ranges declared dead.  Internal to policy/ (policy.c drives it; the
 * unit tests drive it directly).  Not locked: policy.c serialises.
 */
#ifndef VMEM_POLICY_MATCH_H
#define VMEM_POLICY_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"
#include "policy/program.h"

/* ---- match.c ---- */

/* A plan use's range as the current run saw it. */
typedef struct {
	uint64_t alloc_id, offset, bytes;
	uintptr_t ptr;
	uint64_t iter;           /* planned iteration it was seen in; 0 never */
} policy_cur_t;

typedef struct {
	const policy_plan_t *plan;
	int *cursor;             /* per lane: next position in lane.ops */
	uint64_t *pend_seq;      /* per lane: seq of the call matched last */
	int *pend_op;            /* per lane: its plan op */
	policy_cur_t *cur;       /* per plan use */
	uint64_t *op_seq;        /* per plan op: seq in the current run */
	uint64_t iter;           /* planned iteration counter (1 = the first) */
	int last_op;             /* the plan op matched last (the "now" of eviction keys) */
	bool clean;              /* the iteration started at op 0 and was never suspended */
	bool iter_resumed;       /* a resume started it, no iteration completed since */
	struct { uint64_t cur, plan; } *xl;   /* YOUNG allocations: current id -> plan id */
	uint64_t xl_mask;
	uint64_t *bad;           /* allocations seen elsewhere than planned this iteration */
	int nbad, capbad;
	bool all_bad;
} policy_match_t;

/* Sets up matching as if the window's last call (plan op `last_op`) had
 * just been matched: cursors after it, current ranges from the window. */
int policy_match_init(policy_match_t *m, const policy_plan_t *plan,
		      const policy_history_t *h, const policy_period_found_t *f);
void policy_match_free(policy_match_t *m);
/* The plan's first op came again: every lane restarts; a new iteration. */
void policy_match_restart(policy_match_t *m);
/* The lane of (thread, stream), or -1. */
int policy_match_lane(const policy_match_t *m, uint64_t thread, uintptr_t stream);
/* True when `ev` (whose policy_event_hash is `hash`) has the weak
 * signature of plan op `op`. */
bool policy_match_same(const policy_plan_t *plan, int op, const vmem_event_t *ev, uint64_t hash);
/* Matches `ev` against its lane's next op.  Returns the plan op, or -1
 * with *expected the op it was compared with (-1 when its lane is not in
 * the plan).  A match records the call's ranges and identities. */
int policy_match_event(policy_match_t *m, const vmem_event_t *ev, uint64_t hash, int *expected);
/* The current range of [delta, delta + bytes) of plan use `use`, when that
 * use was seen in the current iteration and its allocation behaved as
 * planned.  With `prev`, for a step placed before its use's op in the
 * next iteration (a wrapped interval's prefetch): through what the use
 * touched in the iteration just before, on a STABLE allocation that was
 * where the plan has it then and was not seen elsewhere since; a use
 * already seen in this iteration (the step is at the use's own op: a
 * momentum back right before its next step) resolves as without `prev`.
 * With `to_end` (a step's to_end, never with `prev`), [delta, delta +
 * bytes) runs past the use's range to where its allocation ended when the
 * plan was learned: the range is from the use's current place plus delta
 * to that end.  With `fetch` (the range is for a PREFETCH, which never
 * loses bytes, only copies them), `prev` takes the use's place in any
 * earlier iteration: one the application left unfinished (an evaluation
 * pass) may lie between.  0 and *out, or -1. */
enum {
	POLICY_RESOLVE_PREV = 1,     /* through the iteration before (`prev`) */
	POLICY_RESOLVE_TO_END = 2,   /* to where the allocation ended (`to_end`) */
	POLICY_RESOLVE_FETCH = 4,    /* for a PREFETCH (`fetch`) */
};
int policy_match_resolve(const policy_match_t *m, int use, uint64_t delta, uint64_t bytes,
			 unsigned how, policy_cur_t *out);
/* Plan allocation id for a current one (YOUNG translation, else itself). */
uint64_t policy_match_translate(const policy_match_t *m, uint64_t cur_alloc);

/* ---- deadset.c ---- */

typedef struct {
	uint64_t alloc_id, a, b;     /* [a, b) of the current allocation */
	policy_loss_t loss;
} policy_deadent_t;

/* One dead piece: [a, b) and its description (an index into the info ring). */
typedef struct {
	uint64_t a, b;
	uint64_t info;
} policy_deadpiece_t;

/* The pieces of one allocation, sorted by a, disjoint. */
typedef struct {
	uint64_t alloc_id;           /* 0: free slot */
	policy_deadpiece_t *v;
	int n, cap;
} policy_deadbucket_t;

#define POLICY_GRAVE 1024
#define POLICY_DEAD_INFOS 16384
typedef struct {
	policy_deadbucket_t *bk;     /* open addressing by allocation id */
	uint32_t nbk, used;          /* slots (a power of two), slots taken */
	int n;                       /* pieces in the set */
	policy_loss_t *info;         /* ring of POLICY_DEAD_INFOS descriptions */
	uint64_t ninfo;              /* descriptions ever added */
	policy_deadent_t *grave;     /* ring of the last POLICY_GRAVE ranges revived */
	uint32_t ngrave;
} policy_deadset_t;

int policy_deadset_init(policy_deadset_t *d);
void policy_deadset_free(policy_deadset_t *d);
/* Marks [a, b) dead (replacing what overlapped). 0 or -1. */
int policy_deadset_add(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
		       const policy_loss_t *loss);
/* A call reads [a, b): each dead piece it overlaps leaves the set and is
 * appended as a REVIVE (reason READ, `certain` as given) to `out`.
 * Returns the count. */
int policy_deadset_read(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			bool certain, policy_actions_t *out);
/* A call writes [a, b): those bytes are no longer dead (no action). */
void policy_deadset_write(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b);
/* Every piece leaves the set as a REVIVE (reason SUSPEND).  Returns the count. */
int policy_deadset_drain(policy_deadset_t *d, policy_actions_t *out);
/* The description of [a, b): the live set first, then the revived ranges,
 * newest first.  0 or -1. */
int policy_deadset_find(const policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			policy_loss_t *out);

/* policy.c: appends one action (sets out->lost when it cannot). */
policy_action_t *policy_actions_push(policy_actions_t *a);

#endif
