/* policy/program.h - the steady iteration as a plain program, and the
 * passes that read and annotate it.
 *
 * The proactive layer (DESIGN.md point 4) learns the training iteration
 * from the stream of hooked calls and plans memory actions ahead of it.
 * Following SQLite's VDBE and its planner (where.c), the iteration is kept
 * as arrays that refer to each other by integer index, and each analysis
 * is one pass in its own file that reads the arrays and writes its own
 * result array:
 *
 *   history.c   the last events seen (a ring), input of everything else
 *   period.c    iteration detection: period and first steady iteration
 *   graph.c     the layer dataflow graph of one steady iteration
 *               (ops, uses, tensor versions, forward/backward boundary)
 *   liveness.c  dead byte ranges over the cyclic iteration (SuperNeurons §3.2)
 *   evict.c     next-use index: Belady's MIN eviction order from the plan
 *   hostpages.c the pages a call beyond the budget maps from the host
 *   offload.c   vDNN's offload choice, all / conv (vDNN §III-C)
 *   gaps.c      past vDNN: idle intervals of any tensor, until a mode fits
 *   dyn.c       vDNN-dyn: none, conv or all, the first whose peak fits the budget
 *   trial.c     vDNN-dyn's profiling passes: each mode run and timed, the fastest kept
 *   prefetch.c  prefetch placement: vDNN Fig. 10, or from measured times
 *   plan.c      the actions at each op, from the passes above
 *   match.c     executing a plan: matching calls to it, per thread/stream
 *
 * policy/policy.h is the seam the runtime uses; this header is for the
 * passes and their tests.  Every pass has a dump function that prints it
 * through a line callback (STYLE.md: every pass can print itself).
 *
 * Nothing here locks: a policy_t (policy.c) serialises every use.
 */
#ifndef VMEM_POLICY_PROGRAM_H
#define VMEM_POLICY_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/event.h"

/* One line of a dump, without its newline. */
typedef void (*policy_print_fn)(void *ctx, const char *line);

/* "9.1 GiB", "512.0 MiB", "12.0 KiB", "100 B" (dyn.c). */
void policy_human_bytes(uint64_t b, char *buf, size_t len);

/* printf into a fixed buffer and out(); for the dump functions. */
void policy_printf(policy_print_fn out, void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ====================================================================
 * history.c - the events seen last, oldest dropped first.
 *
 * Only "significant" events enter: the ones that make up the iteration's
 * program (compute ops, copies and sets; see policy_event_significant).
 * Each gets an absolute position (0, 1, 2, ...).  Host synchronisations
 * and allocations seen between two significant events are folded into
 * the next one (flags, allocation watermark).  Ranges are copied; `api`
 * and `role` strings are kept by pointer (static strings).
 * ==================================================================== */

/* The event was preceded by a host synchronisation (cudaStreamSynchronize,
 * cudaDeviceSynchronize, cudaEventSynchronize). */
#define POLICY_HEV_SYNC_BEFORE 1u

typedef struct {
	uint64_t hash;          /* weak signature (policy_event_hash) */
	uint64_t seq;
	uint64_t thread;
	uintptr_t stream;
	const char *api;
	vmem_op_kind_t kind;
	vmem_op_info_t info;
	uint64_t t_ns, dur_ns;
	uint64_t range_pos;     /* first range in the range ring */
	uint32_t nranges;
	uint32_t flags;         /* POLICY_HEV_* */
	uint64_t watermark;     /* highest allocation id known before the event */
} policy_hev_t;

/* An allocation freed between two significant events: before the event
 * at `pos` (the history's tail when it was freed). */
typedef struct {
	uint64_t alloc_id, pos;
} policy_hfree_t;

typedef struct {
	policy_hev_t *ev;
	vmem_range_t *rg;
	uint64_t cap, rcap;         /* ring capacities (powers of two) */
	uint64_t max_cap, max_rcap; /* growth limits */
	uint64_t head, tail;        /* positions [head, tail) are held */
	uint64_t rhead, rtail;
	policy_hfree_t *frees;      /* in the order freed (pos ascending); those
				       before `head` are pruned as the array fills */
	size_t nfrees, capfrees;
} policy_history_t;

/* Capacities are rounded up to powers of two; the rings start small and
 * grow to `max_events` events and `max_ranges` ranges, then drop the oldest.
 * Returns 0, or -1 when out of memory. */
int policy_history_init(policy_history_t *h, uint64_t max_events, uint64_t max_ranges);
void policy_history_free(policy_history_t *h);
/* Appends; returns the event's position, or UINT64_MAX when out of memory
 * (nothing appended). */
uint64_t policy_history_push(policy_history_t *h, const vmem_event_t *ev, uint32_t flags,
			     uint64_t watermark);
/* Notes that allocation `alloc_id` was freed now (before the next event
 * pushed).  Returns 0, or -1 when out of memory (the free is not kept:
 * the graph then sees none, the safe side). */
int policy_history_freed(policy_history_t *h, uint64_t alloc_id);
/* The event at `pos`, or NULL when it was dropped or not yet seen. */
policy_hev_t *policy_history_at(const policy_history_t *h, uint64_t pos);
/* Range j of an event held in the history. */
const vmem_range_t *policy_history_range(const policy_history_t *h, const policy_hev_t *e,
					 uint32_t j);

/* 1 for events that belong to the iteration's program: compute ops,
 * memcpy and memset.  Queries, stream/event bookkeeping, syncs and driver
 * VMM calls ("other") are not matched against a plan. */
int policy_event_significant(vmem_op_kind_t kind);
/* The weak signature: kind, api, the typed record and, per range, role,
 * bytes, access and whether it is foreign -- not the allocation or the
 * offset, which a caching allocator, a per-tensor allocator or double
 * buffering may change between iterations, nor a workspace's bytes
 * (policy_range_bytes_vary).  A launch's is its kernel and launch shape
 * alone (policy_ranges_vary). */
uint64_t policy_event_hash(const vmem_event_t *ev);
/* True for calls whose ranges are found by scanning their arguments (a
 * launch): how many there are may change from one iteration to the next,
 * and their extents are the rest of an allocation, so two such calls are
 * the same call whatever their ranges, which are compared one by one (not
 * their bytes) only where both have as many. */
bool policy_ranges_vary(vmem_op_kind_t kind);
/* A workspace range (role "ws": a convolution's, a GEMM handle's). */
bool policy_role_is_ws(const char *role);
/* True when range r's bytes are not part of its call's signature: a
 * launch's (policy_ranges_vary), and a workspace's, whose bytes are what
 * ran - a convolution's is vmem's own workspace when it runs the call in
 * micro-batches, decided again when the room a plan leaves changes -
 * while the application's workspace size is in the typed record. */
bool policy_range_bytes_vary(vmem_op_kind_t kind, const char *role);
/* Same weak signature, field by field (no hash collision). */
bool policy_hev_weak_equal(const policy_history_t *h, const policy_hev_t *a,
			   const policy_hev_t *b);

/* How a range of the event at position i relates to the same range one
 * period earlier (i - p). */
typedef enum {
	POLICY_ID_SAME = 0,   /* same allocation and offset (or same foreign pointer) */
	POLICY_ID_YOUNG,      /* both allocated within their period, same offset:
				 a per-tensor allocator's fresh tensor */
	POLICY_ID_SOFT,       /* anything else: double buffering, a caching
				 allocator placing a small block elsewhere */
} policy_ident_t;

/* Compares range j of the events at positions i and i - p (weak signatures
 * equal).  `wm_then` is the watermark one period before i - p. */
policy_ident_t policy_range_ident(const vmem_range_t *now, const vmem_range_t *then,
				  uint64_t wm_now_period, uint64_t wm_then_period);

/* ====================================================================
 * period.c - iteration detection.
 * ==================================================================== */

typedef struct {
	uint32_t min_period;      /* shortest iteration, in significant events */
	uint32_t max_period;      /* longest */
	uint32_t reps;            /* consecutive equal repetitions that confirm (>= 2) */
	uint32_t max_candidates;  /* periods tracked at once */
	uint32_t soft_permille;   /* positions with a soft identity tolerated, per mille */
} policy_period_config_t;

typedef struct {
	uint32_t p;
	uint32_t run;         /* consecutive positions i with event(i) ~ event(i - p) */
	uint32_t soft;        /* of which with a soft identity */
	uint64_t run_start;   /* first position of the run */
	uint64_t born;        /* position the candidate was added at */
} policy_cand_t;

typedef struct {
	policy_period_config_t cfg;
	policy_cand_t *cand;
	uint32_t ncand;
	struct { uint64_t hash, pos; } *last;   /* direct-mapped: hash -> last position */
	uint64_t last_mask;
	struct { uint64_t alloc_id, offset, pos; } *wrote;   /* direct-mapped: last write of a range */
	uint64_t syncs[8];       /* positions of the last events after a host sync */
	uint32_t nsyncs;
	uint64_t steps;
	uint32_t last_abandoned; /* the period of the last plan abandoned (0: none) */
	uint32_t abandoned;      /* a period whose plans were abandoned twice in a row */
} policy_period_t;

/* What the detector found: the period, the window of the last complete
 * repetition [first, first + period) in history positions, where its
 * iteration starts (rot: window index of the first op of an iteration),
 * and the first position of the steady region (its first iteration). */
typedef struct {
	uint32_t period;
	uint64_t first;           /* window start (position) */
	uint32_t rot;
	uint64_t steady_start;    /* first position of the first steady repetition */
	uint32_t reps;            /* complete repetitions seen */
	uint32_t soft;            /* positions with a soft identity in the run */
} policy_period_found_t;

int policy_period_init(policy_period_t *d, const policy_period_config_t *cfg);
void policy_period_free(policy_period_t *d);
/* Forgets every candidate (a plan was made, or abandoned). */
void policy_period_reset(policy_period_t *d);
/* Forgets the candidates a plan of period p makes moot (p itself and
 * shorter ones) and keeps counting the longer ones: when p is a stage of
 * identical blocks inside the iteration (DenseNet's dense layers under a
 * per-tensor allocator), the iteration's own period - a multiple of p or
 * not - goes on towards its confirmation instead of starting over at every
 * plan of the stage.  A longer one that confirms while the plan runs is
 * the plan's own pattern repeated and is ignored, as before. */
void policy_period_keep_longer(policy_period_t *d, uint32_t p);
/* A plan of period p was abandoned.  The second time in a row, p is a
 * stage inside the iteration rather than the iteration (a new batch size
 * abandons a plan once): when p and a longer period confirm on the same
 * event the longer one wins from now on (a stage of identical blocks
 * confirms at every block boundary, the iteration - a multiple of the
 * block, as often as not - only at the same boundary; the shorter winning
 * there would plan the stage again every iteration), and the policy
 * replaces a running plan of period p by the longer one. */
void policy_period_abandoned(policy_period_t *d, uint32_t p);
/* Feeds the event just pushed at `pos`.  Returns 1 and fills *found when
 * a period is confirmed (reps equal consecutive repetitions, with at most
 * soft_permille soft positions), else 0.  `quick` compares weak signatures
 * by hash alone and counts no soft positions: while a plan runs the
 * detector only keeps its runs alive (a few ns a candidate). */
int policy_period_step(policy_period_t *d, const policy_history_t *h, uint64_t pos, bool quick,
		       policy_period_found_t *found);
/* Where an iteration starts inside the window [first, first + p): just
 * after the host synchronisation followed by the longest host pause, else
 * at the first host-to-device copy, else 0. */
uint32_t policy_period_rotation(const policy_history_t *h, uint64_t first, uint32_t p);
void policy_period_dump(const policy_period_t *d, policy_print_fn out, void *ctx);

/* ====================================================================
 * graph.c - the dataflow graph of one steady iteration.
 * ==================================================================== */

typedef enum { POLICY_PHASE_FWD = 0, POLICY_PHASE_BWD = 1 } policy_phase_t;

/* How an allocation behaves across iterations (from its uses' identities). */
typedef enum {
	POLICY_ALLOC_STABLE = 0,  /* same allocation, same offsets every iteration */
	POLICY_ALLOC_YOUNG,       /* allocated anew each iteration (per-tensor style) */
	POLICY_ALLOC_UNSTABLE,    /* changes place between iterations: no dead ranges */
	POLICY_ALLOC_FOREIGN,     /* not vmem memory (alloc id 0): never acted on */
} policy_alloc_class_t;

typedef struct {
	vmem_op_kind_t kind;
	const char *api;
	uintptr_t stream;
	uint64_t thread;
	int lane;                /* index in graph.lanes */
	vmem_op_info_t info;
	uint64_t seq;            /* the event's seq in the repetition the graph was built from */
	uint64_t hash;           /* weak signature */
	uint64_t dur_ns;         /* measured; 0 unknown */
	int use0, nuses;         /* uses[use0 .. use0 + nuses), in ref order */
	int nin;                 /* distinct producer ops of what it reads (a join when > 1) */
	uint8_t phase;           /* policy_phase_t */
	uint8_t sync_before;
} policy_op_t;

typedef struct {
	int op, ref;
	uint64_t alloc_id, offset, bytes;
	uintptr_t ptr;
	uint8_t access;
	const char *role;
	uint8_t ident;           /* policy_ident_t against the previous repetition */
	int tensor;              /* the version this use writes, or -1 */
} policy_use_t;

/* A tensor is a version of a byte range: each write creates one (a caching
 * allocator reuses one block for many tensors in an iteration); a read of
 * bytes nobody in the window wrote is a live-in version (producer -1).  On
 * a STABLE allocation the version the last writer of the iteration leaves
 * is what the next iteration's first readers see: those reads are edges
 * "from the previous iteration" (reader index before the producer's). */
#define POLICY_T_LIVE_IN 1u   /* no producer in the iteration */
#define POLICY_T_CROSS 2u     /* written in forward, read in backward (vDNN's X) */
#define POLICY_T_CONV_IN 4u   /* read as x by a forward convolution */
typedef struct {
	int producer;            /* op index, -1 for a live-in version */
	int use;                 /* the write use, -1 for a live-in version */
	uint64_t alloc_id, offset, bytes;
	int nreads;              /* read edges */
	int refcnt;              /* distinct reader ops (vDNN Fig. 3 Refcnt) */
	int first_read, last_read;   /* op indices in the iteration's cyclic order after the
					producer; -1 when never read */
	bool last_read_next;     /* last_read is in the next iteration (wrapped) */
	int last_fwd_read;       /* last read before the boundary, -1 none */
	int first_bwd_read;      /* first read at or after the boundary, -1 none */
	int first_bwd_use;       /* the read use of first_bwd_read */
	uint32_t flags;          /* POLICY_T_* */
} policy_tensor_t;

typedef struct {
	int tensor;
	int op;                  /* reader */
	int use;                 /* its read use */
	uint64_t bytes;          /* overlap */
} policy_edge_t;

typedef struct {
	uint64_t thread;
	uintptr_t stream;
	int nops;
	int *ops;                /* op indices of the lane, in order */
} policy_lane_t;

typedef struct {
	uint64_t alloc_id;
	uint64_t extent;         /* highest offset + bytes touched */
	uint8_t cls;             /* policy_alloc_class_t */
	bool paged;              /* holds whole pages of its own from offset 0 (the pool's large
				    allocations: policy_graph_set_pages) */
	int free_op;             /* a YOUNG allocation the application freed inside the
				    iteration after all its uses: freed before op free_op
				    (nops: after the last op); -1 otherwise */
} policy_alloc_t;

typedef struct {
	int nops;
	policy_op_t *ops;
	int nuses;
	policy_use_t *uses;
	int ntensors;
	policy_tensor_t *tensors;
	int nedges;
	policy_edge_t *edges;    /* sorted by tensor, then op */
	int nlanes;
	policy_lane_t *lanes;
	int nallocs;
	policy_alloc_t *allocs;  /* sorted by alloc_id */
	int boundary;            /* first backward op; nops when none was found */
	uint64_t iter_ns;        /* sum of measured op durations (0 unknown) */
	uint64_t page_size;      /* the pool's page, when allocations are `paged` (0: bytes) */
} policy_graph_t;

/* Builds the graph of the window [first, first + p) of `h`, starting the
 * iteration at window index `rot`; the repetition before the window (at
 * first - p) must still be in the history (identities are taken against
 * it).  Returns 0, or -1 (out of memory, or the window is not held). */
int policy_graph_build(policy_graph_t *g, const policy_history_t *h, uint64_t first,
		       uint32_t p, uint32_t rot);
void policy_graph_free(policy_graph_t *g);
/* The allocation entry of `alloc_id`, or NULL. */
const policy_alloc_t *policy_graph_alloc(const policy_graph_t *g, uint64_t alloc_id);
/* The first use of op `op` touching [off, off + bytes) of alloc_id, or -1. */
int policy_op_use_at(const policy_graph_t *g, int op, uint64_t alloc_id, uint64_t off,
		     uint64_t bytes);
/* The pool's units.  An allocation the pool gives pages of its own (at
 * least `small_threshold` bytes: the plan sees its extent, never more than
 * its size, so an extent that large proves it) is resident in whole pages:
 * a page holds memory while any byte on it is live.  Smaller ones share
 * slabs and count by the byte.  page_size or small_threshold 0: bytes
 * everywhere (the plan's curves as the liveness computes them). */
void policy_graph_set_pages(policy_graph_t *g, uint64_t page_size, uint64_t small_threshold);
/* The page size of alloc_id's pages when it is paged, else 0. */
uint64_t policy_graph_page(const policy_graph_t *g, uint64_t alloc_id);
/* [*lo, *hi) widened to the pages it touches when alloc_id is paged (what
 * the pool holds for it), unchanged otherwise. */
void policy_held_span(const policy_graph_t *g, uint64_t alloc_id, uint64_t *lo, uint64_t *hi);
/* The part of [off, off + bytes) of alloc_id that can leave the device
 * without taking a neighbour's bytes with it: whole pages only (another
 * tensor may share a page at either end), except that on a paged
 * allocation a range reaching its extent takes its last page too (no op
 * of the iteration touches the rest of it).  *held: the device bytes its
 * absence frees.  `page`: the page size to cut to when the graph has
 * none.  false when nothing is left. */
bool policy_own_pages(const policy_graph_t *g, uint64_t page, uint64_t alloc_id, uint64_t off,
		      uint64_t bytes, uint64_t *lo, uint64_t *n, uint64_t *held);
/* The use a move of [off, off + bytes) of use u's allocation, issued
 * around op j, resolves its range through at run time (a plan step names
 * a range inside a use of a call the runtime has seen): u itself when it
 * covers the range, else the latest use at or before j covering all of
 * it - cyclically on a STABLE allocation, *prev then set when it is in the
 * iteration before (the same place every iteration).  -1 when none: a
 * move after j takes only what u names (a version written by a scanned
 * argument running to its segment's end, read by a call naming a part of
 * it, on an allocation made anew each iteration). */
int policy_cover_use(const policy_graph_t *g, int u, uint64_t off, uint64_t bytes, int j,
		     bool *prev);
/* The pages a move of tensor t after op j (through use u of j) frees:
 * policy_own_pages of the tensor, or of the part u names when no use
 * covers the whole (policy_cover_use). */
bool policy_move_pages(const policy_graph_t *g, uint64_t page, int t, int u, int j, uint64_t *lo,
		       uint64_t *n, uint64_t *held);
/* Human name of an op for dumps and messages: "#12 conv_fwd (cudnnConvolutionForward)". */
void policy_op_label(const policy_graph_t *g, int op, char *buf, size_t len);
void policy_graph_dump(const policy_graph_t *g, policy_print_fn out, void *ctx);

/* ====================================================================
 * liveness.c - dead byte ranges.
 * ==================================================================== */

typedef struct {
	uint64_t alloc_id, offset, bytes;
	int after_op;            /* dead once this op (its last access) is done */
	int until_op;            /* ... until this op overwrites it whole */
	bool wraps;              /* until_op is in the next iteration */
	int last_read;           /* op that last read it; -1: written and never read */
	int use;                 /* use of after_op covering it (resolves it at run time) */
	bool freed;              /* a YOUNG allocation's bytes after its last use, until
				    the application frees it before until_op (nops:
				    until_op 0, wraps); the curves count them idle */
} policy_dead_t;

typedef struct {
	int ndead;
	policy_dead_t *dead;     /* sorted by after_op, alloc, offset */
	uint64_t peak_live;      /* most bytes live at once after an op: bytes of STABLE and
				    YOUNG allocations the iteration touches, less the dead
				    ones, less a YOUNG allocation's bytes before its first
				    and after its last access (for dumps and benchmarks) */
	int peak_op;
	uint64_t *live_after;    /* nops: the bytes live after op k (peak_live is the most);
				    with the graph's pages set, what the pool holds for them:
				    whole pages of paged allocations */
	uint64_t *dead_after;    /* nops: the bytes of `dead` ranges after op k: what the DEAD
				    steps free (live_after + dead_after without them) */
} policy_live_t;

int policy_liveness(const policy_graph_t *g, policy_live_t *out);
void policy_live_free(policy_live_t *l);
void policy_live_dump(const policy_graph_t *g, const policy_live_t *l, policy_print_fn out,
		      void *ctx);

/* ====================================================================
 * evict.c - the next use of every page: Belady's MIN from the plan.
 * ==================================================================== */

/* Keys: larger is evicted first. */
#define POLICY_KEY_UNKNOWN 0u            /* not in the plan: the pool's LRU decides */
#define POLICY_KEY_UNUSED (UINT64_MAX - 1) /* in the plan, never touched in the iteration */

typedef struct {
	uint64_t alloc_id;
	uint64_t page;           /* page index inside the allocation */
	uint32_t n;              /* uses */
	uint32_t first;          /* into pos[] */
} policy_page_uses_t;

typedef struct {
	uint64_t page_size;
	int nops;
	uint64_t *t_at;          /* nops + 1 cumulative distances: op k starts at t_at[k] */
	int npages;
	policy_page_uses_t *pages;   /* sorted by (alloc_id, page) */
	uint32_t *pos;           /* op indices, ascending per page */
} policy_evict_t;

typedef struct policy_hostpages policy_hostpages_t;

/* The index of every use of g, except the (op, page) pairs of `skip`
 * (NULL: none) - a use a call beyond the budget makes from the host
 * (hostpages.c) is not one the page must be on the device for. */
int policy_evict_build(const policy_graph_t *g, uint64_t page_size,
		       const policy_hostpages_t *skip, policy_evict_t *out);
void policy_evict_free(policy_evict_t *e);
/* Belady key of [offset, offset + bytes) of plan allocation alloc_id when
 * op `now` is the last op issued: the distance (measured time when the
 * plan has durations, else ops) to the next op that touches it;
 * POLICY_KEY_UNUSED when no op of the iteration touches it;
 * POLICY_KEY_UNKNOWN when the allocation is not in the plan. */
uint64_t policy_evict_key(const policy_evict_t *e, uint64_t alloc_id, uint64_t offset,
			  uint64_t bytes, int now);
/* Prints the eviction order at op `now`: the `top` pages to evict first. */
void policy_evict_dump(const policy_evict_t *e, int now, int top, policy_print_fn out,
		       void *ctx);

/* ====================================================================
 * hostpages.c - the pages a call beyond the budget maps from the host.
 * ==================================================================== */

/* A call whose pages exceed the budget runs with some of its guessed pages
 * (VMEM_ACCESS_GUESS: past the first page of an extent it did not state)
 * mapped from the host (pool/hostmap.c); the pool keeps the resident ones.
 * The plan chooses which leave - of the guessed pages, as many as the
 * call needs beyond the budget, those needed last after it - and the
 * other passes act on it: the eviction order skips the call's use of
 * them (evict.c) and prefetches for the call leave them out (plan.c). */
typedef struct {
	uint64_t alloc_id, page;
	int op;
} policy_hpage_t;

struct policy_hostpages {
	int n;
	policy_hpage_t *v;   /* sorted by (op, alloc_id, page) */
};

/* The choice for every op of g, its next uses from e and `budget` bytes
 * of g->page_size pages (plan.c builds e again without the choice's uses
 * and chooses again, until the choice holds).  0, or -1 (out of memory:
 * *out empty). */
int policy_host_pages(const policy_graph_t *g, const policy_evict_t *e, uint64_t budget,
		      policy_hostpages_t *out);
/* Does op `op` map page `page` of alloc_id from the host?  (h may be NULL.) */
bool policy_host_page(const policy_hostpages_t *h, int op, uint64_t alloc_id, uint64_t page);
void policy_host_pages_free(policy_hostpages_t *h);
void policy_host_pages_dump(const policy_hostpages_t *h, const policy_graph_t *g,
			    policy_print_fn out, void *ctx);

/* ====================================================================
 * offload.c and prefetch.c - the vDNN policies (issue 12).
 * ==================================================================== */

typedef enum {
	POLICY_OFFLOAD_NONE = 0,
	POLICY_OFFLOAD_ALL,      /* vDNN-all: every tensor live across the boundary */
	POLICY_OFFLOAD_CONV,     /* vDNN-conv: only the inputs of forward convolutions */
	POLICY_OFFLOAD_DYN,      /* vDNN-dyn: NONE, CONV or ALL, the first whose peak resident
				    bytes fit the budget (dyn.c); a plan never holds DYN itself */
} policy_offload_mode_t;

/* "none", "all", "conv", "dyn". */
const char *policy_offload_name(policy_offload_mode_t m);

typedef enum {
	POLICY_PREFETCH_VDNN = 0,  /* vDNN Fig. 10: at the backward op of the next layer,
				      no further back than the next convolution */
	POLICY_PREFETCH_TIMED,     /* from measured op and copy times */
} policy_prefetch_mode_t;

/* One offloaded tensor: copied out after its last forward read, brought
 * back before its first backward read.  gaps.c adds idle intervals of any
 * tensor (`gap`): out after one access, back before the next, which may
 * be in the next iteration (`wrap`: need_op <= after_op, and prefetch_op
 * too when the copy starts there). */
typedef struct {
	int tensor;
	int after_op;            /* offload issued after this op (its last forward read) */
	int use;                 /* resolves the range at run time (a use of after_op) */
	int need_op;             /* first backward read */
	int prefetch_op;         /* prefetch issued before this op; -1 = none placed */
	bool fallback;           /* vDNN: no backward op in its window was free: fetched
				    right before the op before its use */
	bool gap;                /* an idle interval chosen by gaps.c */
	bool wrap;               /* need_op is in the next iteration */
	uint64_t offset;         /* the range moved: [offset, offset + bytes) of the tensor's
				    allocation (its own pages only: policy_own_pages) */
	uint64_t bytes;
	uint64_t held;           /* device bytes its absence frees (whole pages); 0: bytes */
} policy_offload_t;

static inline uint64_t policy_offload_held(const policy_offload_t *x)
{
	return x->held ? x->held : x->bytes;
}

/* What gaps.c added to a set, for the dumps and the trace. */
typedef struct {
	int added;                  /* intervals added to the set */
	int wraps;                  /* of which wrap into the next iteration */
	int hidden;                 /* of which whose round trip fits in the interval */
	int late;                   /* copies back moved after an op they crowded out */
	uint64_t bytes;             /* bytes they move each way */
	uint64_t need_before, need_after;   /* the most bytes held while an op runs */
	int worst_op;               /* where need_after is reached */
	uint64_t worst_own;         /* that op's own bytes (policy_op_bytes) */
	bool tried;                 /* the pass ran (the set did not fit) */
	bool fits;                  /* need_after <= its limit */
} policy_gaps_t;

typedef struct {
	int n;
	policy_offload_t *v;     /* in order of after_op */
	int dropped;             /* timed: offloads that could not come back in time */
	uint64_t dropped_bytes;
	policy_gaps_t gaps;      /* what gaps.c added */
} policy_offloads_t;

/* vDNN §III-B/C: chooses the tensors to offload.  Only tensors of STABLE or
 * YOUNG allocations, at least min_bytes long, written in forward and read
 * again in backward qualify; conv mode keeps those read as x by a forward
 * convolution. */
int policy_offload_choose(const policy_graph_t *g, policy_offload_mode_t mode,
			  uint64_t min_bytes, policy_offloads_t *out);
void policy_offloads_free(policy_offloads_t *o);
/* qsort order of a set: by after_op, then tensor (offload.c). */
int policy_offload_cmp(const void *a, const void *b);

/* The link's bandwidth a plan assumes when nothing was measured or set
 * (bytes/s: PCIe 4.0 x16, roughly). */
#define POLICY_LINK_DEFAULT ((uint64_t)25000000000)

typedef struct {
	uint64_t h2d_bytes_per_s;   /* measured or configured link bandwidth; 0 = POLICY_LINK_DEFAULT */
	uint64_t d2h_bytes_per_s;   /* 0 = as h2d */
	uint64_t budget;            /* device bytes the plan may hold (timed mode); 0 = no limit */
	uint64_t default_op_ns;     /* assumed duration of an op never measured */
} policy_timing_t;

/* When each op starts on the plan's timeline: nops + 1 entries (the last
 * is the iteration's length), from measured durations, t->default_op_ns
 * (10 us when 0) for an op never measured.  malloc'd; NULL when out of
 * memory (prefetch.c). */
uint64_t *policy_op_starts(const policy_graph_t *g, const policy_timing_t *t);
/* Nanoseconds to move `bytes` at `bytes_per_s` (0: POLICY_LINK_DEFAULT). */
double policy_copy_ns(uint64_t bytes, uint64_t bytes_per_s);

/* Places each offload's prefetch (fills prefetch_op).  Timed mode also
 * drops the offloads whose round trip cannot fit between their last
 * forward and first backward use (counted in o->dropped): keeping such a
 * tensor resident costs nothing the copy would have saved.  Returns 0, or
 * -1 when out of memory. */
int policy_prefetch_place(const policy_graph_t *g, policy_prefetch_mode_t mode,
			  const policy_timing_t *t, policy_offloads_t *o);
void policy_offloads_dump(const policy_graph_t *g, const policy_offloads_t *o,
			  policy_print_fn out, void *ctx);

/* ====================================================================
 * gaps.c - past vDNN: offload idle intervals of any tensor until the plan
 * fits (weights, gradients, optimizer state, activations a mode leaves).
 * ==================================================================== */

typedef struct {
	uint64_t limit;             /* bytes the plan may hold while an op runs (budget less
				       headroom); 0: nothing added */
	uint64_t page_size;         /* ranges are cut to whole pages of their allocation */
	uint64_t min_bytes;         /* ranges that free fewer device bytes (whole pages), or
				       fill less than half of them, are never chosen */
	bool with_dead;             /* liveness off: dead ranges stay resident */
	policy_timing_t timing;     /* the link and op times the copies are placed by */
} policy_gaps_config_t;

/* The most bytes held while each op runs, into need[0 .. nops): what was
 * resident after the op before it (the iteration wraps), the offloads
 * that come back for it, and what it writes whole (workspaces aside: the
 * solver sizes them to the room).  0, or -1 when out of memory. */
int policy_need_curve(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
		      const policy_offloads_t *o, uint64_t *need);
/* Adds to `o` (a mode's set, prefetches placed) idle intervals of tensors
 * it does not move, until every op's need (policy_need_curve) is within
 * c->limit or no interval over the worst op is left.  An interval runs
 * from an access of a tensor version (its write, or a read) to its next
 * read; on a STABLE allocation the last read wraps to the next
 * iteration's first; YOUNG allocations' intervals stay inside the
 * iteration; UNSTABLE and foreign ones are never moved.  Intervals whose
 * round trip (out at the D2H bandwidth, back at the H2D one) fits between
 * its ends are taken first, longest first; the copy back is placed to end
 * as the next access starts.  o->gaps says what was done.  0, or -1 when
 * out of memory (o as it was). */
int policy_gaps_fill(const policy_graph_t *g, const policy_live_t *l,
		     const policy_gaps_config_t *c, policy_offloads_t *o);
/* One line: "gaps: 22 intervals (19 into the next iteration, 21 hidden,
 * 2 back late), 306.0 MiB each way; most held while an op runs 393.2 MiB
 * -> 208.8 MiB at #151 (fits)"; "" when the pass did not run. */
size_t policy_gaps_format(const policy_gaps_t *s, char *buf, size_t len);
/* Why op `op` holds what it holds under the set o: the largest tensor
 * versions live while it runs and not away, each with the reason no
 * interval took it (read by the op itself; an allocation whose place
 * moves; no page of its own; no interval away at that op), at most
 * `most` lines.  For dumps (vmem-plan -d, VMEM_LOG=debug). */
void policy_gaps_explain(const policy_graph_t *g, const policy_offloads_t *o, int op, int most,
			 policy_print_fn out, void *ctx);

/* ====================================================================
 * dyn.c - vDNN-dyn's choice among none, conv and all (vDNN §III-C).
 * ==================================================================== */

/* The headroom default: budget / 16, kept free for workspaces and the
 * small allocations the plan does not see. */
#define POLICY_HEADROOM_DEFAULT UINT64_MAX

typedef struct {
	uint64_t budget;            /* device bytes vmem may map; 0 = unknown: NONE */
	uint64_t headroom;          /* bytes kept free; POLICY_HEADROOM_DEFAULT = budget / 16 */
	bool liveness;              /* dead ranges are dropped (else they stay resident) */
	uint64_t offload_min_bytes; /* as policy_offload_choose */
	policy_prefetch_mode_t prefetch;
	policy_timing_t timing;     /* as policy_prefetch_place */
	const policy_gaps_config_t *gaps;   /* a mode that does not fit gets gaps.c's
					       intervals under these; NULL: none */
} policy_dyn_config_t;

/* One decision, for the dump, the stats and the trace's plan record. */
typedef struct {
	uint8_t decided;            /* 1: dyn chose `chosen` (0: a static mode, nothing below set) */
	uint8_t chosen;             /* policy_offload_mode_t: NONE, CONV or ALL */
	uint8_t fits;               /* the chosen mode fits (0: nothing fits and ALL was taken,
				       or the budget is unknown) */
	uint64_t budget, headroom;  /* headroom resolved (budget / 16 by default) */
	uint64_t peak_none, peak_conv, peak_all;   /* peak resident bytes under each */
	int peak_op_none, peak_op_conv, peak_op_all;
	uint64_t op_bytes;          /* the largest single op's own bytes (what one call holds) */
	int op_bytes_op;
} policy_dyn_t;

/* A byte range of one allocation. */
typedef struct {
	uint64_t alloc_id, lo, hi;
} policy_ival_t;

/* The bytes of the union of v's ranges, per allocation (sorts v). */
uint64_t policy_ival_union(policy_ival_t *v, int n);
/* The bytes of x that the union of v's ranges covers (overwrites v). */
uint64_t policy_ival_covered(policy_ival_t x, policy_ival_t *v, int n);

/* The pages offload x moves, as a range of its tensor's allocation. */
policy_ival_t policy_offload_ival(const policy_graph_t *g, const policy_offload_t *x);
/* The ranges (policy_offload_ival) of o's offloads but `skip` (may be
 * NULL) that overlap x and are away after op k (`during` false) or while
 * op k runs (true: away after the op before, not brought back for k) into
 * out (o->n entries); returns how many. */
int policy_offloads_over(const policy_graph_t *g, const policy_offloads_t *o,
			 const policy_offload_t *skip, policy_ival_t x, int k, bool during,
			 policy_ival_t *out);

/* Bytes op `op` touches in vmem memory (its uses' union per allocation;
 * foreign memory not counted): what must be resident while it runs. */
uint64_t policy_op_bytes(const policy_graph_t *g, int op);
/* The most bytes resident after any op under the offload set `o` (NULL:
 * none): liveness's live bytes after each op (l->live_after), plus the
 * bytes UNSTABLE allocations touch (no dead range applies to them: held
 * all iteration), less each offloaded tensor's bytes from its offload
 * (after op o->after_op) until its prefetch (before o->prefetch_op, or
 * o->need_op when none was placed).  *peak_op (may be NULL): the first op
 * after which it is reached. */
uint64_t policy_peak_resident(const policy_graph_t *g, const policy_live_t *l,
			      const policy_offloads_t *o, int *peak_op);
/* The workspace room of each convolution in the plan: budget less what is
 * resident while op k runs (room[k]; UINT64_MAX for other ops, and for
 * every op when the budget is 0).  While k runs the device holds what was
 * resident after op k - 1 (the curve of policy_peak_resident, wrapping
 * around), the offloaded tensors that come back for k, and k's outputs
 * (written whole, so not live before it); its workspace ("ws" uses) is
 * what the room is for.  with_dead: DEAD ranges stay resident (liveness
 * off).  A plan whose curve exceeds the budget after some op does not
 * hold (the reactive layer pages the rest): every room is UINT64_MAX
 * then, unknown.  0, or -1 when out of memory. */
int policy_conv_room(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
		     const policy_offloads_t *o, uint64_t budget, uint64_t *room);
/* Moves prefetches later where the tensor, back on the device from its
 * prefetch op on, would put the plan's resident bytes (the curve of
 * policy_peak_resident, offloads as placed) over `limit` before its use:
 * it then comes back after the last op where that happens (at its use
 * when there is no such room: what the fault-in would do, issued ahead).
 * A prefetch into a full budget evicts live data the ops before its use
 * still need; the copies of that eviction wait on the host and the data
 * faults back.  Tensors needed first keep their places first.  Returns
 * the number moved, or -1 when out of memory; limit 0: none moved. */
int policy_prefetch_fit(const policy_graph_t *g, const policy_live_t *l, bool with_dead,
			policy_offloads_t *o, uint64_t limit);
/* The limit policy_prefetch_fit takes: budget less the headroom
 * (POLICY_HEADROOM_DEFAULT = budget / 16); 0 when the budget is. */
uint64_t policy_prefetch_limit(uint64_t budget, uint64_t headroom);
/* The modes dyn weighs, in the order it weighs them (its index into
 * policy_dyn_choose's `others`). */
#define POLICY_DYN_MODES 3
extern const policy_offload_mode_t policy_dyn_order[POLICY_DYN_MODES];
/* vDNN-dyn: tries NONE, CONV, ALL in that order (least offload traffic
 * first) and takes the first whose peak resident bytes and largest op
 * each fit in budget - headroom; ALL when none fits; NONE when the budget
 * is 0.  `l` must come from policy_liveness (with c->liveness false its
 * dead ranges count as resident).  Fills *out, and *chosen (may be NULL)
 * with the chosen mode's offloads, prefetches placed; `others` (may be
 * NULL: freed) receives the other modes' sets by policy_dyn_order index
 * (the chosen one's slot left empty), for the measured passes of trial.c.
 * Returns the mode, or -1 when out of memory. */
int policy_dyn_choose(const policy_graph_t *g, const policy_live_t *l,
		      const policy_dyn_config_t *c, policy_dyn_t *out, policy_offloads_t *chosen,
		      policy_offloads_t *others);
/* True when two offload sets offload the same tensors after the same ops
 * and bring them back at the same ops (one pass would measure both). */
bool policy_offloads_same(const policy_offloads_t *a, const policy_offloads_t *b);
/* One line: "dyn: chose conv (peaks: none 9.1 GiB, conv 5.2 GiB, all 3.9 GiB; budget 6.0 GiB)". */
size_t policy_dyn_format(const policy_dyn_t *d, char *buf, size_t len);
void policy_dyn_dump(const policy_dyn_t *d, policy_print_fn out, void *ctx);

/* ====================================================================
 * trial.c - vDNN-dyn's profiling passes, measured (vDNN §III-C).
 *
 * dyn.c computes each mode's peak; the paper instead runs one training
 * pass per configuration and keeps the one that works.  Under vmem every
 * mode works (the reactive layer pages what a plan leaves over), so the
 * passes are judged by their measured iteration time: each candidate mode
 * runs `want` whole planned iterations, the runtime times each iteration
 * on the device (an event at each start of the plan's first op), and the
 * fastest candidate is kept for the rest of the plan's life.
 *
 *   iteration:   i        i+1      i+2      i+3       i+4 ...
 *   runs:        conv     none     all      (best)    kept
 *   measured:             conv     none     all
 *
 * A time arrives an iteration or so late (when the device has passed the
 * next iteration's start); meanwhile the best candidate measured so far
 * runs.  An iteration cut short (an evaluation pass suspended the plan)
 * measures nothing and its candidate is tried again.  If no time arrives
 * (no events on this device), the trials stop after a bounded number of
 * iterations and keep the computed choice (candidate 0).
 *
 * A candidate is a mode and an algorithm choice: the convolutions' as the
 * conv hooks choose them within the plan's room (the fastest that fits,
 * the paper's "(p)" where the room allows), or each convolution's
 * least-workspace configuration (`least`, the paper's "(m)", named
 * "conv(m)").  The plan's room is a prediction; where the budget is
 * short of the iteration's need, every workspace byte is a byte of live
 * data out and back, and the memory-optimal algorithms run the faster
 * iteration (ResNet-50 at 1/4 of its peak on the h100 model, 2026-11-27).
 * ==================================================================== */

#define POLICY_TRIAL_MAX (2 * POLICY_DYN_MODES)
#define POLICY_TRIAL_RING 8

typedef enum {
	POLICY_TRIAL_RUNNING = 0,   /* passes still to run or to be measured */
	POLICY_TRIAL_MEASURED,      /* every candidate measured: the fastest kept */
	POLICY_TRIAL_GAVE_UP,       /* no (or not every) time came: the best known kept */
} policy_trial_state_t;

typedef struct {
	uint8_t n;                          /* candidates; 0: no trials */
	uint8_t mode[POLICY_TRIAL_MAX];     /* their policy_offload_mode_t, in trial order
					       (the computed choice first) */
	uint8_t least[POLICY_TRIAL_MAX];    /* 1: with the least-workspace convolutions */
	uint64_t ns[POLICY_TRIAL_MAX];      /* fastest measured iteration; 0 not yet */
	uint8_t runs[POLICY_TRIAL_MAX];     /* iterations measured */
	uint64_t misses[POLICY_TRIAL_MAX];  /* pages missed in the iteration of ns[] */
	uint8_t out[POLICY_TRIAL_MAX];      /* 1: ruled out unrun, its floor no faster than
					       a pass measured */
	uint64_t floor_ns[2];               /* the least time an iteration's convolutions
					       take with the plan's configurations [0] and
					       the least-workspace ones [1]; 0 unknown
					       (policy_trial_floor) */
	uint8_t want;                       /* iterations to measure each */
	uint8_t state;                      /* policy_trial_state_t */
	int8_t kept;                        /* the candidate kept (state != RUNNING) */
	int8_t cur;                         /* the candidate running now (-1 none yet) */
	uint32_t iters;                     /* iterations begun since the trials began */
	uint32_t max_iters;                 /* give up after this many */
	struct {
		uint64_t iter;              /* planned iteration (0: free slot) */
		int8_t cand;
		uint64_t misses;            /* pages it missed (policy_trial_misses) */
	} ring[POLICY_TRIAL_RING];          /* which candidate ran the iterations not yet
					       measured */
} policy_trial_t;

/* Candidates `modes[0 .. n)` (n <= POLICY_TRIAL_MAX), with `least[i]`
 * (NULL: none least), each measured over `want` iterations (>= 1). */
void policy_trial_init(policy_trial_t *t, const uint8_t *modes, const uint8_t *least, int n,
		       int want);
/* The convolutions of one planned iteration need at least `ns` on the
 * device with the least-workspace configurations (least) or the plan's
 * (not least): µ-cuDNN's measured times, summed over the calls the
 * runtime saw in the iteration before.  A candidate not yet run whose
 * floor is within POLICY_TRIAL_FLOOR_PERMILLE of a pass already measured
 * cannot win and is not run (on a real GPU the memory-optimal
 * algorithms can take five times the fastest: an "(m)" pass would cost a
 * second per iteration to learn nothing).  ns 0: unknown. */
void policy_trial_floor(policy_trial_t *t, bool least, uint64_t ns);
/* A floor rules a candidate out when floor x (1000 - this) / 1000 is at
 * least the fastest measured pass (the benchmark's times are taken in
 * isolation; this leaves them room to be off). */
#define POLICY_TRIAL_FLOOR_PERMILLE 100
/* A pass's name: "conv", or "conv(m)" when least. */
const char *policy_pass_name(policy_offload_mode_t mode, bool least);
/* Candidate c's: policy_pass_name of its mode and least. */
const char *policy_trial_name(const policy_trial_t *t, int c);
/* Planned iteration `iter` begins; `prev_whole` says the iteration before
 * it ran start to end under the plan (its time will come).  Returns the
 * candidate to run it. */
int policy_trial_begin(policy_trial_t *t, uint64_t iter, bool prev_whole);
/* Iteration `iter` took `ns` on the device.  Returns 1 when it was a
 * trial pass (counted), 0 otherwise. */
int policy_trial_measured(policy_trial_t *t, uint64_t iter, uint64_t ns);
/* Iteration `iter`, which ran whole, missed `pages` (fault-ins that
 * brought bytes back); told before its time comes.  The candidate kept is
 * the one that missed fewest among those within POLICY_TRIAL_SLACK_PERMILLE
 * of the fastest (the fastest among those): a pass the plan covers, as
 * fast as one iteration's measurement can tell. */
void policy_trial_misses(policy_trial_t *t, uint64_t iter, uint64_t pages);
#define POLICY_TRIAL_SLACK_PERMILLE 20
/* "dyn: measured conv 2765.0 ms, none 3230.1 ms, all 3162.2 ms, conv(m) 2650.3 ms an
 * iteration: kept conv(m)". */
size_t policy_trial_format(const policy_trial_t *t, char *buf, size_t len);

/* ====================================================================
 * plan.c - the actions of each op.
 * ==================================================================== */

typedef enum {
	POLICY_STEP_DEAD = 0,    /* the range is dead until until_op rewrites it */
	POLICY_STEP_OFFLOAD,     /* copy the range to host, drop it from the device */
	POLICY_STEP_PREFETCH,    /* bring the range back for until_op */
	POLICY_STEP_ALGO,        /* the conv's workspace room (the solver chooses within it) */
	POLICY_STEP_SETTLE,      /* before the op an OFFLOAD follows: its range's last write
				    gets its fence now, so the copy need not wait for the op */
} policy_step_kind_t;

typedef enum { POLICY_BEFORE = 0, POLICY_AFTER = 1 } policy_when_t;

typedef struct {
	uint8_t kind;            /* policy_step_kind_t */
	uint8_t when;            /* policy_when_t */
	int op;                  /* the op it is attached to */
	int use;                 /* the use whose current range resolves it */
	uint64_t delta, bytes;   /* [delta, delta + bytes) of that use's range */
	int until_op;            /* DEAD: rewriter; PREFETCH: the op it is for; OFFLOAD: first
				    backward reader */
	int ref;                 /* DEAD: index in live.dead; OFFLOAD/PREFETCH: tensor */
	int32_t algo;            /* ALGO: the application's algorithm and workspace */
	uint64_t workspace;
	uint64_t room;           /* ALGO: policy_conv_room's bytes for this op */
	bool prev;               /* PREFETCH of a wrapped interval, placed at or before its
				    offload's op: resolved through what that use touched in
				    the iteration before (a STABLE allocation's place) */
	bool next;               /* PREFETCH: the lookahead's, for the lane's next op (plan.c) */
	bool soon;               /* PREFETCH for this op or the lane's next one: worth a host
				    wait for copies out (pool_prefetch, plan.c) */
	bool to_end;             /* PREFETCH (the lookahead's) of the rest of a range that
				    runs to its allocation's end - a scanned kernel argument
				    over a caching segment - past the tensor `use` names:
				    resolved from that use's current place to where the
				    allocation ended in the iteration learned (plan.c) */
	bool entry;              /* DEAD or OFFLOAD of an interval that spans the iteration's
				    start (dead, or away, while op 0 runs): also due before
				    op 0 of an iteration that follows one the plan did not
				    run whole - the first, or one after a suspension - so
				    that the device starts where the plan's curve does */
} policy_step_t;

typedef struct {
	bool liveness;           /* DEAD steps */
	policy_offload_mode_t offload;   /* DYN: chosen by dyn.c (plan.dyn) */
	policy_prefetch_mode_t prefetch;
	policy_timing_t timing;
	uint64_t offload_min_bytes;
	uint64_t budget;         /* DYN: device bytes vmem may map (0 unknown) */
	uint64_t headroom;       /* DYN: POLICY_HEADROOM_DEFAULT = budget / 16 */
	uint64_t page_size;
	uint64_t small_threshold;   /* the pool's: smaller allocations share pages (0: the
				       curves count bytes, policy_graph_set_pages) */
	bool algo_steps;         /* ALGO steps at every convolution: the workspace room
				    the plan leaves there (the conv hooks' solver uses it) */
	bool gaps;               /* a set that does not fit gets gaps.c's intervals */
	bool lookahead;          /* under all, conv and dyn (whatever mode dyn runs, none
				    too): PREFETCH steps of each op's reads before the op
				    before it (plan.c) */
	bool host_map;           /* the pool maps a call's guessed pages beyond the budget
				    from the host: the plan chooses which (hostpages.c) */
} policy_plan_config_t;

typedef struct {
	policy_graph_t g;
	policy_live_t live;
	policy_offloads_t off;
	uint8_t offload;         /* policy_offload_mode_t in effect: NONE, ALL or CONV */
	policy_dyn_t dyn;        /* the decision when the plan was asked for DYN */
	/* DYN: the modes not in effect, by policy_dyn_order index (the one in
	 * effect lives in `off`, its slot here empty), for policy_plan_use */
	policy_offloads_t alt[POLICY_DYN_MODES];
	policy_plan_config_t cfg;   /* what the plan was built with (policy_plan_use) */
	policy_evict_t evict;
	policy_hostpages_t host; /* pages calls beyond the budget map from the host */
	int nsteps;
	policy_step_t *steps;    /* sorted by (op, when) */
	int *step_at;            /* 2 * nops + 1: steps of (op, when) are
				    [step_at[2op+when], step_at[2op+when+1]) */
	uint32_t period;
	uint64_t steady_seq;     /* seq of the first op of the first steady iteration */
	uint32_t id;             /* 1, 2, ... per policy */
} policy_plan_t;

/* Runs every pass over the window and assembles the steps.  Returns 0 or
 * -1 (out of memory; *plan is left empty). */
int policy_plan_build(policy_plan_t *plan, const policy_history_t *h,
		      const policy_period_found_t *found, const policy_plan_config_t *cfg);
void policy_plan_free(policy_plan_t *plan);
/* DYN: makes `mode` (NONE, CONV or ALL) the one in effect: its offload
 * set, its workspace rooms and its steps.  The graph, liveness and the
 * eviction index are the same for every mode.  Switch only between
 * iterations (before the plan's first op): every offload of a mode comes
 * back within the iteration it left in.  0, or -1 (not a DYN plan, or out
 * of memory: the mode in effect is kept). */
int policy_plan_use(policy_plan_t *plan, policy_offload_mode_t mode);
void policy_plan_dump(const policy_plan_t *plan, policy_print_fn out, void *ctx);

#endif
