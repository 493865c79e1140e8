/* tests/unit/policy/synth.h - synthetic training event streams for the
 * policy tests, and a driver that feeds them through policy_before/after.
 *
 * A "net" is a chain of conv layers trained like a framework would:
 *
 *   H2D copy of the batch -> per layer: conv_fwd (x, w -> y, ws), act_fwd
 *   (y -> x') -> loss (softmax fwd/bwd) -> per layer backwards: act_bwd,
 *   conv_bwd_data (w, dy -> dx), conv_bwd_filter (x, dy -> dw) -> per layer
 *   an SGD kernel (w, dw: read-write, as a scanned kernel is) -> D2H copy
 *   of the loss + a host sync.
 *
 * The batch is copied each iteration from one of three pinned host buffers
 * in turn (a DataLoader with pin_memory).  Three allocation styles, as in
 * minitrain: NETWORK (every buffer its own
 * allocation, made once), PER_TENSOR (activations and gradients allocated
 * anew every iteration and freed at its end: new ids, same sizes), CACHING
 * (every buffer a fixed offset inside one big segment).  Options add the
 * things that make real streams hard: warm-up (cuDNN algorithm queries and
 * a different workspace in the first iteration, optimizer state created
 * lazily in the first update), a caching allocator still growing (the
 * first iteration in another segment), backward on a second thread,
 * identical blocks, double-buffered inputs, an evaluation pass, a new batch
 * size, a stray call.
 */
#ifndef VMEM_TEST_POLICY_SYNTH_H
#define VMEM_TEST_POLICY_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

/* ---- the driver ---- */

typedef struct {
	uint64_t seq;
	int kind;          /* policy_act_kind_t */
	policy_action_t a;
} drv_act_t;

/* A recorded call (drv_t.record): the event and its ranges. */
typedef struct drv_rec {
	vmem_event_t ev;
	vmem_range_t r[8];
} drv_rec_t;

typedef struct {
	policy_t *p;
	uint64_t seq;
	uint64_t thread;
	uintptr_t stream;
	uint64_t dur_ns;      /* duration given to every op (0: none) */
	bool seq_late;        /* the seq is known only after the call (policy_before gets 0) */
	bool record;          /* keep the calls in rec[] instead of calling the policy */
	struct drv_rec *rec;
	int nrec, caprec;
	drv_act_t *acts;      /* every action seen, in order */
	int nacts, capacts;
	policy_actions_t buf;
} drv_t;

void drv_init(drv_t *d, const policy_config_t *cfg);
void drv_free(drv_t *d);
/* One call: policy_before, policy_after; actions appended to d->acts.
 * `info` may be NULL.  Returns the call's seq. */
uint64_t drv_op(drv_t *d, vmem_op_kind_t kind, const char *api, const vmem_op_info_t *info,
		int n, const vmem_range_t *r);
void drv_sync(drv_t *d);
/* Moves the actions in d->buf to d->acts, stamped with `seq`. */
void drv_keep(drv_t *d, uint64_t seq);
/* Count of actions of a kind (and for NOTE, of a note; -1 any). */
int drv_count(const drv_t *d, policy_act_kind_t kind, int note);
/* The range helper. */
vmem_range_t R(uint64_t alloc, uint64_t off, uint64_t bytes, uint8_t acc, const char *role);

/* ---- the synthetic net ---- */

typedef enum { NET_NETWORK = 0, NET_PER_TENSOR, NET_CACHING } net_style_t;

typedef struct {
	int layers;
	int batch;
	net_style_t style;
	bool bwd_thread;        /* backward on thread 2 */
	bool identical;         /* every layer the same shape (identical blocks) */
	bool double_buffer;     /* the input batch alternates between two buffers */
	bool warmup;            /* iteration 0: algo queries, other workspace, no optimizer state */
	bool growing;           /* caching: iteration 0 in a smaller, other segment */
} net_cfg_t;

typedef struct {
	net_cfg_t cfg;
	int iter;
	uint64_t next_id;       /* allocation ids */
	uint64_t seg, seg0;     /* caching: the segment (and the first iteration's) */
	uint64_t *x, *y, *w, *dw, *mom, *dx, *dy, *ws, in[2], loss;   /* NETWORK ids */
	uint64_t off_x, off_y, off_dx, off_dy, off_ws, off_in, off_loss; /* CACHING layout */
	int redecided_layer;    /* > 0: this layer's backward-data conv runs another
				   algorithm from now on (a solver decided it again) */
	int ran_small_layer;    /* > 0: this layer's backward-data conv runs in
				   micro-batches from now on (vmem's solver decided its
				   configuration again): the workspace range is a quarter
				   of the application's, whose size the record keeps */
} net_t;

void net_init(net_t *n, drv_t *d, const net_cfg_t *cfg);
void net_free(net_t *n);
/* One training iteration; returns the number of significant calls made. */
int net_train(net_t *n, drv_t *d);
/* A forward-only evaluation pass (bn-free: conv + act, inference). */
int net_eval(net_t *n, drv_t *d);
/* Significant calls of one steady training iteration. */
int net_period(const net_cfg_t *cfg);
/* Bytes of layer l's activation at the net's batch. */
uint64_t net_act_bytes(const net_t *n, int l);

/* ---- hand-written iterations for the pass tests ---- */

typedef struct {
	vmem_op_kind_t kind;
	uint64_t thread;
	int n;
	vmem_range_t r[8];
	uint64_t dur_ns;
	uint64_t free_after;   /* an allocation the program frees after this op (its id
				  before the repetition's shift); 0: none */
} pop_t;

/* Pushes `reps` repetitions of ops[0..n) into h (ranges' allocation ids
 * at or above young_from get +1000 per repetition: a per-tensor allocator's
 * fresh tensors; 0 = none) and builds the graph of the last one (rot 0).
 * Returns 0 or -1. */
int prog_graph(policy_history_t *h, policy_graph_t *g, const pop_t *ops, int n, int reps,
	       uint64_t young_from);
/* A range, shorter: alloc, offset, bytes, access, role. */
#define RG(a, o, b, acc, role) R(a, o, b, acc, role)
#define ACC_R VMEM_ACCESS_R
#define ACC_W VMEM_ACCESS_W
#define ACC_WW (VMEM_ACCESS_W | VMEM_ACCESS_WHOLE)
#define ACC_RW VMEM_ACCESS_RW

/* A print callback (policy_print_fn) that gathers the lines, each ended
 * by a newline, into s->text; what does not fit is left out. */
typedef struct {
	char text[1 << 16];
	size_t len;
} sink_t;

void sink(void *ctx, const char *line);

#endif
