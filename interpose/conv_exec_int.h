/* interpose/conv_exec_int.h - what conv_exec.c (legacy calls, the kernel
 * table, the solver) shares with conv_graph.c (the graph API).  Internal
 * to those two files.
 *
 * A *kernel* is one convolution shape in one direction on one API
 * (conv_shape_t): identical layers share it, its benchmark, its
 * configuration and, under WD, its workspace segment.  Kernels live for
 * the whole process in a hash table under conv_lock; every field below
 * is read and written under conv_lock unless marked otherwise.
 */
#ifndef VMEM_INTERPOSE_CONV_EXEC_INT_H
#define VMEM_INTERPOSE_CONV_EXEC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cudnn.h>

#include "interpose/config.h"
#include "interpose/conv_exec.h"
#include "interpose/conv_plan.h"
#include "solver/solver.h"

#define CONV_MAX_CANDS 24
#define CONV_ALIGN 16     /* bytes: slices keep the 16-byte alignment of the base */

typedef struct conv_kernel {
	struct conv_kernel *next;
	conv_shape_t shape;
	int id;
	char name[32];            /* "k3_fwd": rows and columns of the ILP, the trace */
	int batch, quantum;       /* batch -1: cannot be split (see unsplittable) */
	const char *unsplittable;
	bool noted;               /* the debug note about it was printed */
	uint64_t tensor_bytes;    /* x + w + y at full batch, rounded to chunks (estimate) */

	/* cuDNN's own list at full batch, fastest first (rescue, mem/perf/fit) */
	bool have_list;
	int nlist;
	conv_cand_t list[CONV_MAX_CANDS];

	/* the benchmark of micro-batch sizes x algorithms */
	int meas_state;           /* 0 not yet, 1 done, -1 failed (runs as the application asks) */
	int nmeas;
	solver_meas_t *meas;
	uint64_t cap;             /* workspace cap it was measured under */

	/* what runs: a configuration (WR, or the WD choice) */
	bool have_cfg;
	bool cfg_wd;              /* cfg is this kernel's WD choice (runs in its segment) */
	bool cfg_first;           /* WD before its first solve: the memory-optimal config */
	solver_config_t cfg;
	/* dyn's "(m)" passes run this instead (conv_run_cfg): cfg's parts
	 * with the least-workspace algorithms (solver_least_like) */
	solver_config_t least;
	double undivided_ms;      /* fastest measured at the full batch within the limit; 0 unknown */
	uint64_t wd_off;          /* segment offset in the WD buffer */
	bool have_front;
	solver_front_t front;
	uint64_t calls;           /* executions */
	/* under a plan: the least workspace room it leaves at this kernel's
	 * calls (runtime_policy_conv_room), which bounds its limit */
	bool have_plan_room;
	uint64_t plan_room;
	bool redecide;            /* the room fell below its configuration's workspace */
	/* a workspace-size query about the application's algorithm was
	 * answered with less (conv_ws_fitted): its workspace cannot sit
	 * beside the tensors, and the call will be rescued in what the
	 * application allocated */
	bool ws_lowered;
	uint64_t weight;          /* executions per iteration (WD objective), 0 = unknown */

	/* micro-batch descriptors of the legacy API, by size */
	int nmdesc;
	struct {
		int b;
		cudnnTensorDescriptor_t xd, yd;
	} mdesc[SOLVER_MAX_RUNS];

	/* graph API: plans vmem built (conv_graph.c) */
	void *gplans;
} conv_kernel_t;

typedef struct {
	bool ws_on;               /* VMEM_WORKSPACE=wr|wd */
	bool wd;                  /* wd, and GLPK is there */
	bool pick_app;            /* answers left to the application */
	conv_pick_t pick;         /* otherwise this choice */
	solver_mb_t mb;
	const char *mb_name;
	uint64_t limit;           /* VMEM_WORKSPACE_LIMIT; SOLVER_NO_LIMIT for 0 */
} conv_mode_t;

extern conv_mode_t conv_mode;
extern pthread_mutex_t conv_lock;

/* Reads the settings once (pthread_once); cheap after. */
void conv_init(void);

/* The kernel of `s`, created on first sight; NULL when out of host
 * memory.  Caller holds conv_lock. */
conv_kernel_t *conv_kernel_get(const conv_shape_t *s);

/* Budget left beside `tensor_bytes` (SOLVER_NO_LIMIT when vmem has no
 * pool); 0 when the tensors alone exceed it. */
uint64_t conv_room(uint64_t tensor_bytes);
/* Device bytes of the call's refs other than "ws", in whole chunks. */
uint64_t conv_call_tensor_pages(const hook_call_t *c);
/* What a workspace-size query about an algorithm vmem did not choose is
 * answered (caller holds conv_lock, k's list known): `asked`, cuDNN's
 * size for it, while that fits beside k's tensors in the budget; past
 * that the call will be rescued (the fastest algorithm that fits runs
 * instead), so the application is told the rescue's workspace - an
 * allocation it cannot use, or one larger than the whole budget, would
 * fail before the call came - and k->ws_lowered is set.  Where the
 * tensors alone fill the budget the call runs in slices, each beside a
 * quarter of the budget, and that quarter is the room: a workspace that
 * fits it stands (the application's algorithm runs slice by slice), a
 * larger one is answered with the sliced rescue's (rescue_sliced, the
 * graph API's step 2).  cuDNN's answer stands for a call that cannot be
 * split along N. */
uint64_t conv_ws_fitted(conv_kernel_t *k, uint64_t asked);
/* Bytes `ws` occupies in whole chunks at pointer p (estimate when p == NULL). */
uint64_t conv_ws_pages(const void *p, uint64_t ws);

/* The largest workspace worth measuring under: the limit, the room beside
 * the tensors, and what the greediest algorithm needs. */
uint64_t conv_measure_cap(const conv_kernel_t *k, uint64_t greediest);
/* The measured table is cached in VMEM_CACHE: true when `k` was filled
 * from it (for a cap of at least `cap`). */
bool conv_cache_lookup(conv_kernel_t *k, uint64_t cap);
/* Stores a fresh benchmark in k (takes `m`, malloc'ed), in the cache and
 * its file. */
void conv_measured(conv_kernel_t *k, solver_meas_t *m, int n, uint64_t cap);
/* Chooses what k runs (WR now; WD by solving the whole program again). */
void conv_decide(conv_kernel_t *k);
/* k's WD segment, or NULL when k has none or the shared buffer could not
 * be allocated. */
void *conv_wd_segment(conv_kernel_t *k);
/* What a call of k (have_cfg) runs: k->cfg, or while the plan runs one of
 * dyn's "(m)" candidates (runtime_policy_conv_least) k->cfg's parts with
 * the least-workspace algorithms measured at their sizes (the same calls,
 * so the same slices), *least then true: in the application's workspace
 * when it is big enough, else vmem's, never the WD segment.  Caller
 * holds conv_lock. */
const solver_config_t *conv_run_cfg(conv_kernel_t *k, bool *least);
/* The workspace a call of k runs cfg in: k's WD segment (WD, not a
 * `least` run; NULL when it has none), else the application's `ws` when
 * its `wsb` bytes hold cfg's workspace, else NULL (vmem allocates one). */
void *conv_cfg_ws(conv_kernel_t *k, const solver_config_t *cfg, bool least, void *ws,
		  uint64_t wsb);
/* One execution of k (counts, the first iteration's weights).  When the
 * first kernel comes again, the kernels whose limit a plan's room lowered
 * are decided again, all at once (WR per kernel, WD one solve). */
void conv_note_call(conv_kernel_t *k);
/* The call of k (may be NULL) was prepared: takes the workspace room the
 * plan leaves there.  When it is below what k's configuration needs, k is
 * decided again between two iterations (conv_note_call).  Takes conv_lock
 * only when there is a room; the caller must not hold it. */
void conv_note_room(conv_kernel_t *k);
/* What k's workspace may be: VMEM_WORKSPACE_LIMIT, the budget beside its
 * tensors and the plan's room, the least of them. */
uint64_t conv_kernel_limit(const conv_kernel_t *k);

/* vmem's own device memory for a workspace (from the pool); freed after
 * the work queued on `s` so far.  NULL on failure. */
void *conv_alloc(uint64_t bytes, cudaStream_t s);
void conv_free(void *p, cudaStream_t s);

/* The call's "ws" ref: replaced by (p, bytes), added when absent,
 * removed when p is NULL. */
void conv_set_ws_ref(hook_call_t *c, const void *p, uint64_t bytes);

/* ---- Convolutions larger than the budget, in slices of N (conv_exec.c,
 * for both APIs). */

/* Issues one slice of a convolution: images [off, off + b) with algorithm
 * (legacy) or engine (graph API) `algo`.  Caller holds conv_lock. */
typedef cudnnStatus_t (*conv_slice_fn)(void *ctx, int algo, int64_t off, int b);

/* Images a slice of convolution call `c` (x and y its sliced tensors, the
 * rest whole, the workspace `ws` of `wsb` bytes beside them) may hold by
 * hook_split_images' rule (for the graph API rounded down to k's
 * quantum, its slices' alignment); 0 to run it whole. */
int conv_slice_images(const conv_kernel_t *k, const hook_call_t *c, const void *x,
		      const void *y, const void *ws, uint64_t wsb, uint64_t tensors,
		      uint64_t budget);

/* Calls fn for each slice of cfg along N - its runs' micro-batches, none
 * larger than `most` images (INT_MAX: the runs as they are) - in order,
 * until one does not succeed; returns that status, or success.  *ran
 * (NULL: not counted) is the number that succeeded. */
cudnnStatus_t conv_each_slice(const solver_config_t *cfg, int most, conv_slice_fn fn, void *ctx,
			      int *ran);

/* Runs cfg along N, each slice a call of its own through the runtime,
 * prepared alone with only its images of x and y (w and the workspace
 * whole), none larger than `most` images; fn issues each.  The policy and
 * the trace see one op per slice.  `c` is the whole call, never prepared;
 * the caller drops it.  Caller holds conv_lock. */
cudnnStatus_t conv_run_sliced(hook_call_t *c, conv_kernel_t *k, const solver_config_t *cfg,
			      int most, const void *x, const void *w, const void *y,
			      conv_slice_fn fn, void *ctx, int *ncalls);

/* The end of a hooked convolution: the plan's room noted (conv_note_room),
 * then a call that ran as its slices dropped (their records are its), any
 * other finished with "ran" and `ran_key` in its args unless the
 * application's choice ran; vmem's workspace `own` freed after the
 * call's stream.  Returns st. */
cudnnStatus_t conv_call_done(hook_call_t *c, conv_kernel_t *k, bool sliced, const char *how,
			     const char *ran_key, int ran, int ncalls, void *own, cudnnStatus_t st);

/* "4x60,0x16" style description of a configuration into buf. */
void conv_cfg_str(const solver_config_t *cfg, char *buf, size_t len);
/* Says once per process (vmem_info) what a kernel could not do. */
void conv_note(conv_kernel_t *k, const char *what);

/* The cuDNN status of a failed prepare. */
#define CONV_OOM CUDNN_STATUS_ALLOC_FAILED

#endif
