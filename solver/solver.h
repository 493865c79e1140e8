/* solver/solver.h - µ-cuDNN's workspace division (µ-cuDNN, IPDPS 2018, §III).
 *
 * A convolution kernel (one direction of one layer shape: forward,
 * backward-data or backward-filter) can be run as several cuDNN calls on
 * slices of its mini-batch ("micro-batches").  A faster algorithm whose
 * workspace does not fit a limit at the full batch often fits at a
 * smaller one: FFT on AlexNet's conv2 needs 213 MiB at batch 256 but
 * 49 MiB at 32 (§IV-A).  A *configuration* of a kernel is a list of
 * micro-configurations (algorithm, micro-batch size) whose sizes add up
 * to the batch; it runs in the time of the sum of its parts and needs the
 * largest of their workspaces, since the parts run one after another in
 * one buffer.
 *
 * This module chooses configurations from measured tables, and nothing
 * else: it never touches CUDA, the environment or the clock (interpose/
 * measures the tables with cudnnFind*AlgorithmEx on micro-batch
 * descriptors and executes what is chosen).  Its pieces:
 *
 *   - batch sizes   which micro-batch sizes to measure for a policy
 *                   (VMEM_MICROBATCH=all|pow2|undivided, §III-D);
 *   - WR            the dynamic program of §III-B: per kernel, the fastest
 *                   configuration whose workspace is at most a limit
 *                   (solver/wr.c);
 *   - fronts        the desirable configurations of §III-C: the Pareto
 *                   front of (time, workspace) over all configurations of
 *                   a kernel (solver/wr.c);
 *   - WD            the 0-1 integer program of §III-C, equations 1-4: one
 *                   configuration per kernel from its front, total
 *                   workspace at most a limit, least total time; solved
 *                   with GLPK reached through a table of function pointers
 *                   (solver/ilp.c), so libvmem.so can dlopen GLPK and the
 *                   tests can fake it;
 *   - cache         measured tables keyed by a string, written to and read
 *                   from text that is never trusted (solver/cache.c).
 *
 * Slice alignment.  A slice of a tensor starts at a pointer offset of
 * (images before it) x (bytes per image).  cuDNN's fast kernels want
 * 16-byte aligned pointers, so every micro-batch size but one must be a
 * multiple of a *quantum* q (1, 2, 4, 8 or 16, from the bytes per image);
 * the one that is not carries the remainder B mod q and runs last.  With
 * q = 1 this is the paper's formulation unchanged.
 *
 * Units: times in milliseconds (any unit works as long as it is the same
 * everywhere), workspaces in bytes.  Every function is reentrant and
 * thread-safe (no globals); none prints.
 */
#ifndef VMEM_SOLVER_SOLVER_H
#define VMEM_SOLVER_SOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	SOLVER_OK = 0,
	SOLVER_EINVAL,       /* a malformed table or argument */
	SOLVER_ENOMEM,       /* host memory */
	SOLVER_INFEASIBLE,   /* no configuration fits the limit */
	SOLVER_EGLPK,        /* GLPK failed or answered something impossible */
	SOLVER_ETOOMANY,     /* a configuration needs more than SOLVER_MAX_RUNS runs */
	SOLVER_EFOREIGN,     /* cache text that is not a vmem cache (wrong magic or version) */
	SOLVER_ECORRUPT,     /* cache text that is a vmem cache but damaged */
} solver_status_t;

/* A static English description, never NULL. */
const char *solver_strerror(solver_status_t st);

/* No limit. */
#define SOLVER_NO_LIMIT UINT64_MAX

/* ---- Measured tables ---- */

/* One benchmark result: algorithm `algo` ran micro-batch `b` in `time`
 * and needed `ws` bytes of workspace. */
typedef struct {
	int b;
	int algo;
	double time;
	uint64_t ws;
} solver_meas_t;

/* One kernel's table.  Rows in any order, several per size; 1 <= b <=
 * batch, algo >= 0, time finite and > 0.  `quantum` as explained above
 * (1..64). */
typedef struct {
	int batch;
	int quantum;
	int n;
	const solver_meas_t *m;
} solver_kernel_t;

/* Checks a table: SOLVER_OK or SOLVER_EINVAL. */
solver_status_t solver_kernel_check(const solver_kernel_t *k);

/* ---- Micro-batch sizes to measure (§III-D "batch size policy") ---- */

typedef enum {
	SOLVER_MB_ALL,        /* every size 1..B */
	SOLVER_MB_POW2,       /* 1, 2, 4, ... and B */
	SOLVER_MB_UNDIVIDED,  /* B only: the configuration cuDNN itself would pick */
} solver_mb_t;

/* Writes the sizes the policy measures for batch `batch` and quantum `q`
 * into out[0..cap), ascending, and returns how many there are (which may
 * exceed cap: then only cap were written).  Only sizes a configuration
 * can use are listed: multiples of q, and sizes congruent to batch mod q
 * (the remainder piece).  0 for a batch < 1 or q < 1. */
int solver_batch_sizes(solver_mb_t policy, int batch, int q, int *out, int cap);

/* ---- Configurations ---- */

/* `count` micro-batches of `b` images each, run with algorithm `algo`. */
typedef struct {
	int algo;
	int b;
	int count;
} solver_run_t;

/* Enough for any batch up to 2000 images: the runs of an optimal
 * configuration have distinct sizes (two runs of one size would use the
 * faster algorithm for both), and k distinct sizes add up to k(k+1)/2. */
#define SOLVER_MAX_RUNS 64

/* Runs execute in order along N, each slice right after the previous one;
 * the one run whose size is not a multiple of the quantum (if any) is
 * last and has count 1. */
typedef struct {
	double time;        /* sum of the parts' times */
	uint64_t ws;        /* largest part's workspace */
	int nruns;
	solver_run_t runs[SOLVER_MAX_RUNS];
} solver_config_t;

/* Number of micro-batches (calls) of a configuration. */
int solver_config_calls(const solver_config_t *c);

/* WR (§III-B): the fastest configuration of `k` whose every part needs
 * at most `limit` bytes (SOLVER_NO_LIMIT: any), with the least workspace
 * among equally fast ones.  SOLVER_INFEASIBLE when no configuration
 * fits (no part of a usable size fits the limit). */
solver_status_t solver_wr(const solver_kernel_t *k, uint64_t limit, solver_config_t *out);

/* WR under memory pressure: of the configurations within `slack` (a
 * fraction of time, >= 0) of the fastest under `limit`, the one with the
 * least workspace.  Under a budget every workspace byte is a byte of live
 * data pushed out and brought back, so a configuration 1% slower that
 * needs half the workspace is usually the faster iteration.  slack 0 (or
 * not finite) is solver_wr.  Same statuses as solver_wr. */
solver_status_t solver_wr_slack(const solver_kernel_t *k, uint64_t limit, double slack,
				solver_config_t *out);

/* WR with a price on workspace: of the configurations under `limit`, the
 * one with the least time + ms_per_byte x workspace (the least workspace
 * among equals), then solver_wr_slack's walk from it.  Under a full
 * budget a workspace's pages are mapped for each call and unmapped after
 * it (its bytes are dead between calls, other data needs the memory), so
 * each of its bytes costs the call the driver's remap time; ms_per_byte
 * 0 (or not finite) is solver_wr_slack.  Same statuses as solver_wr. */
solver_status_t solver_wr_priced(const solver_kernel_t *k, uint64_t limit, double slack,
				 double ms_per_byte, solver_config_t *out);

/* The least-workspace counterpart of configuration `c`: the same parts
 * (sizes and counts, so the same calls), each with the algorithm measured
 * at its size that needs the least workspace (the fastest such): vDNN's
 * "(m)" without changing how a call is divided.  SOLVER_INFEASIBLE when
 * a part's size has no measurement, SOLVER_EINVAL for a bad table or
 * configuration. */
solver_status_t solver_least_like(const solver_kernel_t *k, const solver_config_t *c,
				  solver_config_t *out);

/* ---- Desirable configurations (§III-C) ---- */

/* The desirable set D(C(B)) of a kernel: every configuration that no
 * other is at least as fast as with at most as much workspace, ordered by
 * workspace ascending (hence time descending).  `unpruned` is the number
 * of configurations before pruning (every sequence of micro-batch sizes
 * with every algorithm measured at each size, within the limit), a double
 * because it grows like |A|^B. */
typedef struct {
	int n;
	solver_config_t *c;
	double unpruned;
} solver_front_t;

/* Fills *out (free with solver_front_free) with the front of `k` among
 * configurations whose parts need at most `limit` bytes.  SOLVER_INFEASIBLE
 * when none fits.  Cost: one WR dynamic program per member of the front. */
solver_status_t solver_front(const solver_kernel_t *k, uint64_t limit, solver_front_t *out);
void solver_front_free(solver_front_t *f);

/* ---- WD: the 0-1 integer program (§III-C, equations 1-4) ---- */

/* The GLPK functions the ILP uses, with GLPK's own prototypes (glpk.h),
 * as void pointers so this header needs no glpk.h.  interpose/ fills the
 * table from dlopen("libglpk.so.40"); the unit tests from the linked
 * library or from fakes.  Every member is required. */
typedef struct {
	void *create_prob, *delete_prob, *set_prob_name, *set_obj_dir;
	void *add_rows, *set_row_name, *set_row_bnds;
	void *add_cols, *set_col_name, *set_col_kind, *set_obj_coef;
	void *load_matrix, *init_iocp, *intopt, *mip_status, *mip_obj_val, *mip_col_val;
	void *write_lp;
	void *term_out;   /* GLPK prints to stdout by default: switched off around every call */
	void *error_hook; /* GLPK aborts the process on an internal error: the hook returns here */
	void *free_env;   /* ... and the environment is freed after such an error */
} solver_glpk_t;

typedef struct {
	int nkernels;
	const solver_front_t *fronts;   /* one per kernel; each n >= 1 */
	const double *weight;           /* per kernel (> 0): how often it runs per iteration; NULL = 1 */
	const char *const *names;       /* per kernel, used in row and column names; NULL = "k<i>" */
	uint64_t limit;                 /* total workspace (M of eq. 2); SOLVER_NO_LIMIT: none */
	const char *lp_path;            /* when not NULL, the model is written there (glp_write_lp) */
	double time_limit_s;            /* GLPK's search time limit; 0 = 10 s */
	double mip_gap;                 /* stop within this relative gap of the optimum; 0: prove it */
} solver_wd_t;

typedef struct {
	double objective;       /* sum of weight * time of the chosen configurations */
	uint64_t ws;            /* sum of their workspaces */
	int nvars;              /* 0-1 variables after pruning (sum of the fronts' sizes) */
	double unpruned;        /* configurations before pruning (sum of the kernels') */
	int glpk_rc;            /* glp_intopt's return code (0 = solved) */
	int glpk_status;        /* glp_mip_status (GLP_OPT = 5, GLP_FEAS = 2, GLP_NOFEAS = 4) */
	bool optimal;           /* GLPK proved the solution optimal (within mip_gap) */
	bool lp_written;        /* glp_write_lp succeeded */
} solver_wd_result_t;

/* Chooses choice[k] (an index into fronts[k]) for every kernel.
 * SOLVER_INFEASIBLE when even the smallest configurations exceed the
 * limit together (detected before GLPK is called, or answered by GLPK);
 * SOLVER_EGLPK when GLPK fails, stops on an internal error (which would
 * abort the process: glp_error_hook brings control back, and GLPK's
 * environment is freed, so no GLPK object may be alive in the calling
 * thread across this call) or returns a solution that does not
 * satisfy the constraints (never trusted); SOLVER_EINVAL for a bad
 * problem or an incomplete table.  *res is filled in every case (as far
 * as known). */
solver_status_t solver_wd(const solver_glpk_t *glp, const solver_wd_t *p, int *choice,
			  solver_wd_result_t *res);

/* ---- Cache of measured tables ---- */

/* An in-memory map from a key (a string without white space, at most
 * SOLVER_CACHE_KEY_MAX bytes) to a measured table with the workspace cap
 * it was measured under (algorithms needing more were not measured) and
 * the batch size.  Not thread-safe: the caller locks. */
#define SOLVER_CACHE_KEY_MAX 1024
typedef struct solver_cache solver_cache_t;

solver_cache_t *solver_cache_new(void);
void solver_cache_free(solver_cache_t *c);
/* Stores (replacing any entry of `key`) a copy of rows m[0..n).
 * SOLVER_EINVAL for a bad key or table, SOLVER_ENOMEM. */
solver_status_t solver_cache_put(solver_cache_t *c, const char *key, uint64_t cap,
				 const solver_kernel_t *k);
/* True and *out (pointing into the cache, valid until the next put or
 * free) when `key` is cached with a cap of at least `cap`. */
bool solver_cache_get(const solver_cache_t *c, const char *key, uint64_t cap,
		      solver_kernel_t *out);
int solver_cache_count(const solver_cache_t *c);

/* The cache as text (malloc'ed, NUL-terminated; *len its length without
 * the NUL), ending with a checksum line.  NULL when out of memory. */
char *solver_cache_format(const solver_cache_t *c, size_t *len);
/* Adds the entries of `text` to `c`.  All or nothing: on any error
 * nothing is added and `why` (when not NULL) says what was wrong in one
 * short phrase.  SOLVER_EFOREIGN: not a vmem cache (do not overwrite the
 * file: it is someone else's); SOLVER_ECORRUPT: a vmem cache that is
 * truncated, edited or damaged (checksum, syntax, a value out of range). */
solver_status_t solver_cache_parse(solver_cache_t *c, const char *text, size_t len,
				   char *why, size_t whylen);

#endif
