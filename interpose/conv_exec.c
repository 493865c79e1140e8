/* interpose/conv_exec.c - convolutions under the budget and µ-cuDNN's
 * micro-batches: the kernel table, the benchmark of the legacy API, WR and
 * WD, the cache file, and the legacy calls' execution (see conv_exec.h;
 * the graph API is conv_graph.c; the pure parts are conv_plan.c and
 * solver/).
 *
 * A legacy convolution call goes through four questions:
 *
 *   1. Is there a µ-cuDNN configuration (VMEM_WORKSPACE=wr|wd)?  The
 *      kernel is benchmarked once (at its first query or call):
 *      cudnnFind*AlgorithmEx on micro-batch descriptors -- the same
 *      strides with N = b -- for every size the VMEM_MICROBATCH policy
 *      lists, in scratch buffers of vmem's own, under the workspace cap.
 *      WR solves it alone (§III-B); WD solves the integer program over
 *      every kernel seen so far (§III-C), again whenever a new kernel
 *      appears and once more when the first iteration ends (then each
 *      kernel is weighted by how often it ran in it).
 *   2. Does its workspace fit beside the call's tensors in the budget?
 *      If not, the fastest algorithm that does runs instead ("rescue"),
 *      with vmem's workspace, whatever the policy.
 *   3. Prepare: the runtime makes the tensors and the workspace resident.
 *      An out-of-memory here (memory that cannot be evicted) also rescues.
 *   4. Run: one cuDNN call, or one per micro-batch, along N:
 *
 *	x  |<- b0 ->|<- b0 ->|<- b1 ->|       pointer offsets of b images
 *	y  |<- b0 ->|<- b0 ->|<- b1 ->|       (same strides, N = b)
 *	forward, backward-data: each slice with the caller's alpha and beta
 *	backward-filter: dw = alpha*conv(x0,dy0) + beta*dw, then
 *	                 dw = alpha*conv(xi,dyi) + 1*dw for the next slices
 *
 * Locking: conv_lock guards the kernel table, the WD state and the cache;
 * it is held around a benchmark (rare) and around the WD segment's use
 * from lookup to the issued call (so a re-solve cannot move the buffer
 * under a call).  The pool's lock is taken inside it, never the reverse.
 */
#include "interpose/conv_exec_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interpose/hook_dnn.h"
#include "interpose/log.h"
#include "interpose/pool_ref.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"
#include "interpose/trace.h"

#define MiB ((uint64_t)1 << 20)

#define CONV_REALS(X)                                                                     \
	X(cudnnGetStream, cudnnStatus_t, (cudnnHandle_t h, cudaStream_t *s), (h, s))       \
	X(cudnnGetVersion, size_t, (void), ())                                             \
	X(cudnnGetTensorNdDescriptor, cudnnStatus_t,                                       \
	  (const cudnnTensorDescriptor_t d, int req, cudnnDataType_t *dt, int *nb,         \
	   int *dims, int *strides),                                                       \
	  (d, req, dt, nb, dims, strides))                                                 \
	X(cudnnGetFilterNdDescriptor, cudnnStatus_t,                                       \
	  (const cudnnFilterDescriptor_t d, int req, cudnnDataType_t *dt,                  \
	   cudnnTensorFormat_t *fmt, int *nb, int *dims),                                  \
	  (d, req, dt, fmt, nb, dims))                                                     \
	X(cudnnGetConvolutionNdDescriptor, cudnnStatus_t,                                  \
	  (const cudnnConvolutionDescriptor_t d, int req, int *n, int *pad, int *stride,  \
	   int *dil, cudnnConvolutionMode_t *mode, cudnnDataType_t *ct),                   \
	  (d, req, n, pad, stride, dil, mode, ct))                                         \
	X(cudnnGetConvolutionGroupCount, cudnnStatus_t,                                    \
	  (cudnnConvolutionDescriptor_t d, int *g), (d, g))                                \
	X(cudnnGetConvolutionMathType, cudnnStatus_t,                                      \
	  (cudnnConvolutionDescriptor_t d, cudnnMathType_t *m), (d, m))                    \
	X(cudnnCreateTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t *d), (d))   \
	X(cudnnDestroyTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t d), (d))   \
	X(cudnnSetTensorNdDescriptor, cudnnStatus_t,                                       \
	  (cudnnTensorDescriptor_t d, cudnnDataType_t dt, int nb, const int *dims,         \
	   const int *strides),                                                            \
	  (d, dt, nb, dims, strides))                                                      \
	X(cudnnGetConvolutionForwardAlgorithm_v7, cudnnStatus_t,                           \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd,                              \
	   const cudnnFilterDescriptor_t wd, const cudnnConvolutionDescriptor_t cd,        \
	   const cudnnTensorDescriptor_t yd, const int req, int *ret,                      \
	   cudnnConvolutionFwdAlgoPerf_t *perf),                                           \
	  (h, xd, wd, cd, yd, req, ret, perf))                                             \
	X(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnStatus_t,                      \
	  (cudnnHandle_t h, const cudnnFilterDescriptor_t wd,                              \
	   const cudnnTensorDescriptor_t dyd, const cudnnConvolutionDescriptor_t cd,       \
	   const cudnnTensorDescriptor_t dxd, const int req, int *ret,                     \
	   cudnnConvolutionBwdDataAlgoPerf_t *perf),                                       \
	  (h, wd, dyd, cd, dxd, req, ret, perf))                                           \
	X(cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnStatus_t,                    \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd,                              \
	   const cudnnTensorDescriptor_t dyd, const cudnnConvolutionDescriptor_t cd,       \
	   const cudnnFilterDescriptor_t dwd, const int req, int *ret,                     \
	   cudnnConvolutionBwdFilterAlgoPerf_t *perf),                                     \
	  (h, xd, dyd, cd, dwd, req, ret, perf))                                           \
	X(cudnnFindConvolutionForwardAlgorithmEx, cudnnStatus_t,                           \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,               \
	   const cudnnFilterDescriptor_t wd, const void *w,                                \
	   const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yd,        \
	   void *y, const int req, int *ret, cudnnConvolutionFwdAlgoPerf_t *perf,          \
	   void *ws, size_t wsb),                                                          \
	  (h, xd, x, wd, w, cd, yd, y, req, ret, perf, ws, wsb))                           \
	X(cudnnFindConvolutionBackwardDataAlgorithmEx, cudnnStatus_t,                      \
	  (cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const void *w,               \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dxd,       \
	   void *dx, const int req, int *ret, cudnnConvolutionBwdDataAlgoPerf_t *perf,     \
	   void *ws, size_t wsb),                                                          \
	  (h, wd, w, dyd, dy, cd, dxd, dx, req, ret, perf, ws, wsb))                       \
	X(cudnnFindConvolutionBackwardFilterAlgorithmEx, cudnnStatus_t,                    \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,               \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd,       \
	   void *dw, const int req, int *ret, cudnnConvolutionBwdFilterAlgoPerf_t *perf,   \
	   void *ws, size_t wsb),                                                          \
	  (h, xd, x, dyd, dy, cd, dwd, dw, req, ret, perf, ws, wsb))                       \
	X(cudnnConvolutionForward, cudnnStatus_t,                                          \
	  (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,           \
	   const void *x, const cudnnFilterDescriptor_t wd, const void *w,                 \
	   const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,          \
	   void *ws, size_t wsb, const void *beta, const cudnnTensorDescriptor_t yd,       \
	   void *y),                                                                       \
	  (h, alpha, xd, x, wd, w, cd, algo, ws, wsb, beta, yd, y))                        \
	X(cudnnConvolutionBackwardData, cudnnStatus_t,                                     \
	  (cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd,           \
	   const void *w, const cudnnTensorDescriptor_t dyd, const void *dy,               \
	   const cudnnConvolutionDescriptor_t cd, cudnnConvolutionBwdDataAlgo_t algo,      \
	   void *ws, size_t wsb, const void *beta, const cudnnTensorDescriptor_t dxd,      \
	   void *dx),                                                                      \
	  (h, alpha, wd, w, dyd, dy, cd, algo, ws, wsb, beta, dxd, dx))                    \
	X(cudnnConvolutionBackwardFilter, cudnnStatus_t,                                   \
	  (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,           \
	   const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,               \
	   const cudnnConvolutionDescriptor_t cd, cudnnConvolutionBwdFilterAlgo_t algo,    \
	   void *ws, size_t wsb, const void *beta, const cudnnFilterDescriptor_t dwd,      \
	   void *dw),                                                                      \
	  (h, alpha, xd, x, dyd, dy, cd, algo, ws, wsb, beta, dwd, dw))

#define CONV_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUDNN, name, ret, params, args)
CONV_REALS(CONV_REAL)

/* The three *AlgoPerf_t share one layout; one type stands for all. */
typedef cudnnConvolutionFwdAlgoPerf_t perf_t;
_Static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(cudnnConvolutionBwdDataAlgoPerf_t) &&
	       sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(cudnnConvolutionBwdFilterAlgoPerf_t),
	       "cuDNN's perf structs differ");

conv_mode_t conv_mode;
pthread_mutex_t conv_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t conv_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------ */
/* Settings, GLPK                                                       */

static solver_glpk_t g_glpk;

/* GLPK is dlopen'ed, never linked: a machine without it must still
 * preload libvmem.so for everything else (a missing DT_NEEDED makes the
 * dynamic loader skip the preload with a mere warning). */
static bool glpk_load(void)
{
	static const char *const sonames[] = { "libglpk.so.40", "libglpk.so.36" };
	static const char *const names[] = {
		"glp_create_prob", "glp_delete_prob", "glp_set_prob_name", "glp_set_obj_dir",
		"glp_add_rows", "glp_set_row_name", "glp_set_row_bnds", "glp_add_cols",
		"glp_set_col_name", "glp_set_col_kind", "glp_set_obj_coef", "glp_load_matrix",
		"glp_init_iocp", "glp_intopt", "glp_mip_status", "glp_mip_obj_val",
		"glp_mip_col_val", "glp_write_lp", "glp_term_out", "glp_error_hook",
		"glp_free_env",
	};
	void **slot = (void **)&g_glpk;
	const char *err = "not found";
	void *h = NULL;

	_Static_assert(sizeof(names) / sizeof(*names) == sizeof(solver_glpk_t) / sizeof(void *),
		       "solver_glpk_t and the names disagree");
	for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames) && !h; i++) {
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (!h && dlerror())
			err = "cannot be loaded";
	}
	if (!h) {
		vmem_warn("VMEM_WORKSPACE=wd needs GLPK, and libglpk.so.40 %s; install the "
			  "package libglpk40 (Debian, Ubuntu) or glpk (Fedora, conda-forge); "
			  "using VMEM_WORKSPACE=wr instead", err);
		return false;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		slot[i] = dlsym(h, names[i]);
		if (!slot[i]) {
			vmem_warn("VMEM_WORKSPACE=wd: the GLPK found has no %s; install GLPK 4.5x or "
				  "5.x (package libglpk40); using VMEM_WORKSPACE=wr instead", names[i]);
			return false;
		}
	}
	return true;
}

static solver_cache_t *g_cache;
static bool g_cache_foreign;   /* VMEM_CACHE holds someone else's file: never written */

static void cache_load(void);

static void conv_init_once(void)
{
	vmem_conv_algo_t a = vmem_cfg.conv_algo;

	if (a == VMEM_ALGO_DEFAULT)
		a = vmem_cfg.policy != VMEM_POLICY_NONE ? VMEM_ALGO_FIT : VMEM_ALGO_APP;
	conv_mode.pick_app = a == VMEM_ALGO_APP;
	conv_mode.pick = a == VMEM_ALGO_MEM ? CONV_PICK_MEM :
			 a == VMEM_ALGO_PERF ? CONV_PICK_PERF : CONV_PICK_FIT;
	conv_mode.ws_on = vmem_workspace_mode(&vmem_cfg) != VMEM_WS_OFF;
	conv_mode.wd = vmem_workspace_mode(&vmem_cfg) == VMEM_WS_WD && glpk_load();
	switch (vmem_cfg.microbatch) {
	case VMEM_MB_POW2: conv_mode.mb = SOLVER_MB_POW2, conv_mode.mb_name = "pow2"; break;
	case VMEM_MB_UNDIVIDED: conv_mode.mb = SOLVER_MB_UNDIVIDED, conv_mode.mb_name = "undivided"; break;
	default: conv_mode.mb = SOLVER_MB_ALL, conv_mode.mb_name = "all"; break;
	}
	/* WD's limit is for all kernels together: auto is none there */
	conv_mode.limit = vmem_cfg.workspace_limit && vmem_cfg.workspace_limit != VMEM_SIZE_AUTO ?
			  vmem_cfg.workspace_limit : SOLVER_NO_LIMIT;
	g_cache = solver_cache_new();
	if (conv_mode.ws_on)
		cache_load();
}

void conv_init(void)
{
	pthread_once(&conv_once, conv_init_once);
}

/* ------------------------------------------------------------------ */
/* The kernel table                                                     */

#define NBUCKETS 256u
static conv_kernel_t *g_buckets[NBUCKETS];
static int g_nkernels;

static unsigned shape_hash(const conv_shape_t *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sizeof(*s); i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return (unsigned)(h >> 40) % NBUCKETS;
}

static uint64_t est_pages(uint64_t bytes, uint64_t chunk)
{
	if (!bytes)
		return 0;
	if (!chunk)
		return bytes;
	/* rounded up, plus one page: the range may straddle one more */
	return (bytes + chunk - 1) / chunk * chunk + chunk;
}

conv_kernel_t *conv_kernel_get(const conv_shape_t *s)
{
	unsigned b = shape_hash(s);
	conv_kernel_t *k;
	uint64_t chunk;

	for (k = g_buckets[b]; k; k = k->next)
		if (memcmp(&k->shape, s, sizeof(*s)) == 0)
			return k;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->shape = *s;
	k->id = g_nkernels++;
	snprintf(k->name, sizeof(k->name), "k%d_%s%s", k->id, conv_dir_name((conv_dir_t)s->dir),
		 s->api ? "_g" : "");
	k->unsplittable = conv_shape_unsplittable(s);
	k->batch = k->unsplittable ? -1 : conv_shape_batch(s);
	k->quantum = k->unsplittable ? 1 : conv_shape_quantum(s, CONV_ALIGN);
	runtime_budget_free(NULL, NULL, &chunk);
	k->tensor_bytes = est_pages(conv_extent(&s->x, 0), chunk) +
			  est_pages(conv_extent(&s->y, 0), chunk) +
			  est_pages(conv_extent(&s->w, 0), chunk);
	k->next = g_buckets[b];
	g_buckets[b] = k;
	return k;
}

void conv_note(conv_kernel_t *k, const char *what)
{
	if (k->noted)
		return;
	k->noted = true;
	vmem_debug("conv %s: %s", k->name, what);
}

uint64_t conv_room(uint64_t tensor_bytes)
{
	uint64_t budget;

	runtime_budget_free(&budget, NULL, NULL);
	if (!budget)
		return SOLVER_NO_LIMIT;
	return budget > tensor_bytes ? budget - tensor_bytes : 0;
}

uint64_t conv_call_tensor_pages(const hook_call_t *c)
{
	uint64_t chunk, sum = 0;

	runtime_budget_free(NULL, NULL, &chunk);
	for (int i = 0; i < c->nrefs; i++)
		if (strcmp(c->refs[i].role, "ws") != 0 && runtime_owns(c->refs[i].ptr))
			sum += conv_pages_bytes(c->refs[i].ptr, c->refs[i].bytes, chunk);
	return sum;
}

uint64_t conv_ws_pages(const void *p, uint64_t ws)
{
	uint64_t chunk;

	runtime_budget_free(NULL, NULL, &chunk);
	return p ? conv_pages_bytes((uintptr_t)p, ws, chunk) : est_pages(ws, chunk);
}

size_t conv_exec_find_ws(const hook_call_t *c, const void *ws, size_t bytes)
{
	uint64_t budget, chunk, tensors, off, most;

	runtime_budget_free(&budget, NULL, &chunk);
	if (!ws || !bytes || !budget || !chunk || !runtime_owns((uintptr_t)ws))
		return bytes;
	tensors = conv_call_tensor_pages(c);
	if (tensors + conv_pages_bytes((uintptr_t)ws, bytes, chunk) <= budget)
		return bytes;
	/* the most whole pages left, less the workspace's start in its first */
	off = (uintptr_t)ws % chunk;
	most = budget > tensors ? (budget - tensors) / chunk * chunk : 0;
	most = most > off ? most - off : 0;
	vmem_debug("%s: a workspace of %zu bytes cannot sit beside the call's %" PRIu64
		   " bytes of tensor pages in the budget of %" PRIu64 "; passed on as %" PRIu64
		   " bytes", c->api, bytes, tensors, budget, most);
	return (size_t)(most < bytes ? most : bytes);
}

static bool g_ws_lowered;             /* some kernel's ws_lowered is set */

uint64_t conv_ws_fitted(conv_kernel_t *k, uint64_t asked)
{
	/* the measure of VMEM_CONV_ALGO=fit's answers (conv_pick's room), so
	 * that what fit chose is never answered with less */
	uint64_t room = conv_room(k->tensor_bytes);
	int i;

	/* tensors that fill the budget run in slices, each beside a quarter
	 * of it: the application's algorithm when its workspace fits there
	 * (conv_exec_legacy's step 2), else the rescue's (rescue_sliced, the
	 * graph API's step 2) */
	if (!room && k->batch > 1) {
		uint64_t budget;

		runtime_budget_free(&budget, NULL, NULL);
		room = budget / 4;
	}
	if (asked <= room || !room || !k->have_list) {
		if (asked > room)
			vmem_debug("conv %s: the workspace asked about (%" PRIu64 " bytes) is "
				   "answered as cuDNN's: %s", k->name, asked,
				   room ? "no algorithm list" : "its tensors fill the budget "
				   "and it cannot run in slices");
		return asked;
	}
	i = conv_pick(k->list, k->nlist, CONV_PICK_FIT, room);
	if (i < 0 || k->list[i].ws >= asked || k->list[i].ws > room) {
		vmem_debug("conv %s: the workspace asked about (%" PRIu64 " bytes) is answered "
			   "as cuDNN's: room %" PRIu64 " beside %" PRIu64 " bytes of tensors, "
			   "%d algorithms listed, the fitting one %d (%" PRIu64 " bytes)", k->name,
			   asked, room, k->tensor_bytes, k->nlist, i < 0 ? -1 : k->list[i].algo,
			   i < 0 ? 0 : k->list[i].ws);
		return asked;
	}
	if (!k->ws_lowered)
		vmem_debug("conv %s: the workspace asked about (%" PRIu64 " bytes) cannot sit beside "
			   "its tensors in the budget; answered %" PRIu64 " bytes, the algorithm "
			   "its calls will run instead (%d)", k->name, asked, k->list[i].ws,
			   k->list[i].algo);
	k->ws_lowered = true;
	__atomic_store_n(&g_ws_lowered, true, __ATOMIC_RELAXED);
	return k->list[i].ws;
}

/* The per-kernel limit VMEM_WORKSPACE_LIMIT sets: the configured one, or
 * under WR with auto a share of the budget (vmem_wr_limit); under WD
 * auto is no limit (conv_mode.limit is for all kernels there). */
static uint64_t wr_limit(void)
{
	uint64_t budget, lim;

	if (vmem_cfg.workspace_limit != VMEM_SIZE_AUTO)
		return conv_mode.limit;
	if (conv_mode.wd)
		return SOLVER_NO_LIMIT;
	runtime_budget_free(&budget, NULL, NULL);
	lim = vmem_wr_limit(&vmem_cfg, budget);
	return lim ? lim : SOLVER_NO_LIMIT;
}

uint64_t conv_kernel_limit(const conv_kernel_t *k)
{
	uint64_t lim = wr_limit(), room = conv_room(k->tensor_bytes);

	if (room < lim)
		lim = room;
	if (k->have_plan_room && k->plan_room < lim)
		lim = k->plan_room;
	return lim;
}

uint64_t conv_measure_cap(const conv_kernel_t *k, uint64_t greediest)
{
	uint64_t cap = wr_limit(), room = conv_room(k->tensor_bytes);

	if (room < cap)
		cap = room;
	if (greediest < cap)
		cap = greediest;
	return cap;
}

void *conv_alloc(uint64_t bytes, cudaStream_t s)
{
	void *p = NULL;

	if (!bytes || runtime_malloc(&p, bytes, s, "vmem:conv") != cudaSuccess)
		return NULL;
	return p;
}

void conv_free(void *p, cudaStream_t s)
{
	if (p)
		runtime_free(p, s, true, "vmem:conv");
}

void conv_set_ws_ref(hook_call_t *c, const void *p, uint64_t bytes)
{
	for (int i = 0; i < c->nrefs; i++)
		if (strcmp(c->refs[i].role, "ws") == 0) {
			if (!p) {
				memmove(&c->refs[i], &c->refs[i + 1],
					(size_t)(c->nrefs - i - 1) * sizeof(c->refs[0]));
				c->nrefs--;
				return;
			}
			/* bytes 0: the configuration needs none of the
			 * application's workspace; the range stays in the call
			 * as the application declared it (its signature, and
			 * scratch for the policy) and nothing makes it resident */
			if (bytes || c->refs[i].ptr != (uintptr_t)p) {
				c->refs[i].ptr = (uintptr_t)p;
				c->refs[i].bytes = bytes;
			}
			c->refs[i].access = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE |
					    (bytes ? 0 : VMEM_ACCESS_UNUSED);
			return;
		}
	/* scratch: nothing reads what an earlier call left in it, so it is a
	 * whole overwrite (dead between convolutions, never copied back) */
	if (p && bytes)
		hook_call_ref(c, p, bytes, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "ws");
	else if (p)
		hook_call_ref_empty(c, p, 0, "ws");
}

void conv_cfg_str(const solver_config_t *cfg, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	/* "4x60*4,0x16" reads "algorithm 4 on 60 images, four times, then
	 * algorithm 0 on 16" */
	for (int i = 0; i < cfg->nruns && n < len; i++) {
		const solver_run_t *r = &cfg->runs[i];

		n += (size_t)snprintf(buf + n, len - n, "%s%dx%d", i ? "," : "", r->algo, r->b);
		if (r->count > 1 && n < len)
			n += (size_t)snprintf(buf + n, len - n, "*%d", r->count);
	}
}

/* ------------------------------------------------------------------ */
/* Cache file (VMEM_CACHE)                                              */

static char g_gpu[256];
static long g_cudnn;

/* GPU name and cuDNN version: part of every cache key. */
static void identity(void)
{
	typedef cudaError_t (*get_device_fn)(int *);
	typedef cudaError_t (*get_props_fn)(struct cudaDeviceProp *, int);
	get_device_fn gd;
	get_props_fn gp;
	real_cudnnGetVersion_t gv;
	struct cudaDeviceProp prop;
	int dev = 0;

	if (g_gpu[0])
		return;
	gd = (get_device_fn)hook_real_load("cudaGetDevice");
	gp = (get_props_fn)hook_real_load("cudaGetDeviceProperties");
	if (gp && (!gd || gd(&dev) == cudaSuccess) && gp(&prop, dev) == cudaSuccess) {
		prop.name[sizeof(prop.name) - 1] = '\0';
		snprintf(g_gpu, sizeof(g_gpu), "%s", prop.name);
	} else {
		snprintf(g_gpu, sizeof(g_gpu), "unknown-gpu");
	}
	gv = real_cudnnGetVersion();
	g_cudnn = gv ? (long)gv() : 0;
}

static void cache_load(void)
{
	const char *path = vmem_cfg.cache_path;
	char why[160] = "", *buf = NULL;
	struct stat st;
	ssize_t got = 0;
	int fd;

	if (!path[0])
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			vmem_warn("VMEM_CACHE=%s: cannot be read (%s); benchmarking afresh", path,
				  strerror(errno));
		return;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (64 << 20) &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL) {
		while (got < st.st_size) {
			ssize_t r = read(fd, buf + got, (size_t)(st.st_size - got));

			if (r <= 0)
				break;
			got += r;
		}
	}
	close(fd);
	if (!buf || got != st.st_size) {
		vmem_warn("VMEM_CACHE=%s: not a regular file of a sane size, or unreadable; "
			  "ignored, and not written", path);
		g_cache_foreign = true;
		free(buf);
		return;
	}
	switch (solver_cache_parse(g_cache, buf, (size_t)got, why, sizeof(why))) {
	case SOLVER_OK:
		vmem_info("VMEM_CACHE=%s: %d benchmarked kernels loaded", path,
			  solver_cache_count(g_cache));
		break;
	case SOLVER_EFOREIGN:
		vmem_warn("VMEM_CACHE=%s: not a vmem solver cache (%s); ignored, and left as it is "
			  "(results are kept in memory only); point VMEM_CACHE at a new file", path,
			  why);
		g_cache_foreign = true;
		break;
	default:
		vmem_warn("VMEM_CACHE=%s: damaged vmem solver cache (%s); ignored, benchmarking "
			  "afresh and rewriting it", path, why);
		break;
	}
	free(buf);
}

/* Writes the whole cache: to a temporary file, then rename, so a reader
 * (another process of a job) never sees half a file. */
static void cache_save(void)
{
	const char *path = vmem_cfg.cache_path;
	char tmp[4200];
	size_t len = 0, off = 0;
	char *text;
	int fd;

	if (!path[0] || g_cache_foreign)
		return;
	text = solver_cache_format(g_cache, &len);
	if (!text)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		while (off < len) {
			ssize_t w = write(fd, text + off, len - off);

			if (w <= 0)
				break;
			off += (size_t)w;
		}
		if (close(fd) == 0 && off == len && rename(tmp, path) == 0) {
			free(text);
			return;
		}
		unlink(tmp);
	}
	vmem_warn("VMEM_CACHE=%s: cannot be written (%s); results are kept in memory only", path,
		  strerror(errno));
	g_cache_foreign = true;
	free(text);
}

static bool cache_key(const conv_kernel_t *k, char *buf, size_t len)
{
	identity();
	return conv_shape_key(&k->shape, g_gpu, g_cudnn, conv_mode.mb_name, buf, len) > 0;
}

bool conv_cache_lookup(conv_kernel_t *k, uint64_t cap)
{
	char key[SOLVER_CACHE_KEY_MAX + 1];
	solver_kernel_t t;

	if (!cache_key(k, key, sizeof(key)) || !solver_cache_get(g_cache, key, cap, &t) ||
	    t.batch != k->batch || t.quantum != k->quantum || t.n < 1)
		return false;
	k->meas = malloc((size_t)t.n * sizeof(*k->meas));
	if (!k->meas)
		return false;
	memcpy(k->meas, t.m, (size_t)t.n * sizeof(*k->meas));
	k->nmeas = t.n;
	k->cap = cap;
	k->meas_state = 1;
	stats_add(STATS_CONV_CACHED, 1);
	return true;
}

void conv_measured(conv_kernel_t *k, solver_meas_t *m, int n, uint64_t cap)
{
	char key[SOLVER_CACHE_KEY_MAX + 1];

	free(k->meas);
	k->meas = m;
	k->nmeas = n;
	k->cap = cap;
	k->meas_state = n > 0 ? 1 : -1;
	stats_add(STATS_CONV_MEASURED, 1);
	if (n > 0 && cache_key(k, key, sizeof(key)) &&
	    solver_cache_put(g_cache, key, cap,
			     &(solver_kernel_t){ k->batch, k->quantum, n, m }) == SOLVER_OK)
		cache_save();
}

/* ------------------------------------------------------------------ */
/* Decisions: WR per kernel, WD over all                                */

static bool g_said_infeasible_wr, g_said_infeasible_wd, g_said_glpk_failed;

/* Fastest measured at the full batch within `limit`: what cuDNN with that
 * workspace limit would run (µ-cuDNN's "undivided"). */
static double undivided_ms(const conv_kernel_t *k, uint64_t limit)
{
	double best = 0;

	for (int i = 0; i < k->nmeas; i++)
		if (k->meas[i].b == k->batch && k->meas[i].ws <= limit &&
		    (best == 0 || k->meas[i].time < best))
			best = k->meas[i].time;
	return best;
}

static void trace_line(const char *line)
{
	char buf[8192 + 256];
	int n;

	if (!trace_enabled())
		return;
	n = snprintf(buf, sizeof(buf), "{\"type\":\"solver\",\"seq\":%" PRIu64 ",\"t\":%" PRIu64 ",%s}\n",
		     trace_next_seq(), trace_now_ns(), line);
	if (n > 0 && (size_t)n < sizeof(buf))
		trace_append(buf, (size_t)n);
}

static bool cache_key(const conv_kernel_t *k, char *buf, size_t len);

static void trace_wr(const conv_kernel_t *k, uint64_t limit, const char *how)
{
	char cfg[512], line[4096], key[SOLVER_CACHE_KEY_MAX + 1];

	if (!trace_enabled())
		return;
	if (!cache_key(k, key, sizeof(key)))
		key[0] = '\0';
	conv_cfg_str(&k->cfg, cfg, sizeof(cfg));
	snprintf(line, sizeof(line),
		 "\"mode\":\"wr\",\"kernel\":\"%s\",\"key\":\"%s\",\"batch\":%d,\"quantum\":%d,\"limit\":%" PRIu64
		 ",\"status\":\"%s\",\"cfg\":\"%s\",\"calls\":%d,\"time_ms\":%.6f,\"ws\":%" PRIu64
		 ",\"undivided_ms\":%.6f,\"measured\":%d,\"plan_room\":%" PRId64 ",\"slack_pct\":%" PRIu64,
		 k->name, key, k->batch, k->quantum, limit == SOLVER_NO_LIMIT ? 0 : limit, how, cfg,
		 solver_config_calls(&k->cfg), k->cfg.time, k->cfg.ws, k->undivided_ms, k->nmeas,
		 k->have_plan_room ? (int64_t)k->plan_room : (int64_t)-1, vmem_cfg.wr_slack);
	trace_line(line);
}

/* The memory-optimal configuration of k: the least workspace measured,
 * the fastest such (the desirable set's first). */
static bool least_ws_config(const conv_kernel_t *k, solver_config_t *out)
{
	solver_front_t f;
	solver_kernel_t t = { k->batch, k->quantum, k->nmeas, k->meas };

	if (solver_front(&t, SOLVER_NO_LIMIT, &f) != SOLVER_OK)
		return false;
	*out = f.c[0];
	solver_front_free(&f);
	return true;
}

void *conv_cfg_ws(conv_kernel_t *k, const solver_config_t *cfg, bool least, void *ws,
		  uint64_t wsb)
{
	if (k->cfg_wd && !least)
		return conv_wd_segment(k);
	return ws && wsb >= cfg->ws ? ws : NULL;
}

const solver_config_t *conv_run_cfg(conv_kernel_t *k, bool *least)
{
	solver_kernel_t t = { k->batch, k->quantum, k->nmeas, k->meas };

	*least = false;
	if (k->meas_state != 1 || !runtime_policy_conv_least() ||
	    solver_least_like(&t, &k->cfg, &k->least) != SOLVER_OK)
		return &k->cfg;
	*least = true;
	return &k->least;
}

static bool g_priced;                 /* the budget binds: WR prices workspace (VMEM_REMAP_COST) */

static void decide_wr(conv_kernel_t *k)
{
	uint64_t room = conv_room(k->tensor_bytes);
	uint64_t limit = conv_kernel_limit(k);
	solver_kernel_t t = { k->batch, k->quantum, k->nmeas, k->meas };
	/* once the budget binds, a workspace is unmapped after its call and
	 * mapped again for the next: each of the pool's chunks of it costs a
	 * remap (the driver charges per mapping, whatever its size) */
	uint64_t chunk = 0;
	runtime_budget_free(NULL, NULL, &chunk);
	double price = g_priced && chunk ?
		(double)vmem_cfg.remap_cost * 1e-3 / (double)chunk : 0.0;
	solver_status_t st = solver_wr_priced(&t, limit, (double)vmem_cfg.wr_slack / 100.0, price,
					      &k->cfg);
	const char *how = "ok";

	k->cfg_wd = false;
	k->undivided_ms = undivided_ms(k, limit);
	if (st == SOLVER_INFEASIBLE) {
		if (!g_said_infeasible_wr) {
			g_said_infeasible_wr = true;
			char plan[64] = "";

			if (k->have_plan_room)
				snprintf(plan, sizeof(plan), ", %" PRIu64 " MiB beside what the plan "
					 "holds then", k->plan_room / MiB);
			uint64_t lim = wr_limit();

			vmem_warn("VMEM_WORKSPACE_LIMIT=%" PRIu64 " bytes%s: no configuration of conv %s "
				  "(and maybe others) needs so little workspace beside its tensors "
				  "(budget room %" PRIu64 " MiB%s); running the memory-optimal "
				  "algorithms there", lim == SOLVER_NO_LIMIT ? 0 : lim,
				  vmem_cfg.workspace_limit == VMEM_SIZE_AUTO ? " (auto)" : "",
				  k->name, room == SOLVER_NO_LIMIT ? 0 : room / MiB, plan);
		}
		how = "infeasible";
		if (!least_ws_config(k, &k->cfg)) {
			k->have_cfg = false;
			return;
		}
	} else if (st) {
		vmem_debug("conv %s: WR failed (%s); running as the application asks", k->name,
			   solver_strerror(st));
		k->have_cfg = false;
		return;
	}
	k->have_cfg = true;
	trace_wr(k, limit, how);
}

/* ---- WD ---- */

static void *g_wd_buf;
static uint64_t g_wd_size;
static int g_wd_generation;
static int g_first_kernel = -1;       /* the first kernel run: its second run ends iteration 1 */
static bool g_period_done;
static bool g_redo;                   /* a plan's room lowered a limit: decide again */

static void lp_path(char *buf, size_t len)
{
	if (vmem_cfg.trace_path[0])
		snprintf(buf, len, "%s.wd%d.lp", vmem_cfg.trace_path, g_wd_generation);
	else
		snprintf(buf, len, "/tmp/vmem-wd-%d-%d.lp", (int)getpid(), g_wd_generation);
}

static void trace_wd(conv_kernel_t **ks, int n, const solver_wd_result_t *r, uint64_t limit,
		     const char *status, uint64_t ns)
{
	size_t cap = 1024 + (size_t)n * 256, len;
	char *line = malloc(cap), cfg[256];

	if (!line)
		return;
	len = (size_t)snprintf(line, cap,
			       "\"mode\":\"wd\",\"generation\":%d,\"kernels\":%d,\"limit\":%" PRIu64
			       ",\"status\":\"%s\",\"vars\":%d,\"unpruned\":%.6g,\"objective_ms\":%.6f"
			       ",\"ws\":%" PRIu64 ",\"solve_ns\":%" PRIu64 ",\"choices\":[",
			       g_wd_generation, n, limit == SOLVER_NO_LIMIT ? 0 : limit, status,
			       r->nvars, r->unpruned, r->objective, r->ws, ns);
	for (int i = 0; i < n && len < cap; i++) {
		conv_cfg_str(&ks[i]->cfg, cfg, sizeof(cfg));
		len += (size_t)snprintf(line + len, cap - len,
					"%s{\"kernel\":\"%s\",\"weight\":%" PRIu64 ",\"cfg\":\"%s\","
					"\"time_ms\":%.6f,\"ws\":%" PRIu64 ",\"offset\":%" PRIu64
					",\"front\":%d,\"plan_room\":%" PRId64 "}",
					i ? "," : "", ks[i]->name, ks[i]->weight ? ks[i]->weight : 1,
					cfg, ks[i]->cfg.time, ks[i]->cfg.ws, ks[i]->wd_off,
					ks[i]->front.n,
					ks[i]->have_plan_room ? (int64_t)ks[i]->plan_room : (int64_t)-1);
	}
	if (len + 2 < cap) {
		line[len++] = ']';
		line[len] = '\0';
		if (trace_enabled()) {
			size_t full = len + 128;
			char *buf = malloc(full);

			if (buf) {
				int k = snprintf(buf, full, "{\"type\":\"solver\",\"seq\":%" PRIu64
						 ",\"t\":%" PRIu64 ",%s}\n", trace_next_seq(),
						 trace_now_ns(), line);
				if (k > 0 && (size_t)k < full)
					trace_append(buf, (size_t)k);
				free(buf);
			}
		}
	}
	free(line);
}

/* Solves the integer program over every measured kernel and lays their
 * segments out in one shared buffer (µ-cuDNN Fig. 4). */
static void solve_wd(void)
{
	conv_kernel_t **ks = NULL;
	solver_front_t *fronts = NULL;
	double *weights = NULL;
	const char **names = NULL;
	int *choice = NULL, n = 0;
	solver_wd_result_t res;
	solver_status_t st;
	char lp[4300];
	const char *status;
	uint64_t t0, ns, total = 0;

	for (unsigned b = 0; b < NBUCKETS; b++)
		for (conv_kernel_t *k = g_buckets[b]; k; k = k->next)
			n += k->meas_state == 1;
	if (!n)
		return;
	ks = calloc((size_t)n, sizeof(*ks));
	fronts = calloc((size_t)n, sizeof(*fronts));
	weights = calloc((size_t)n, sizeof(*weights));
	names = calloc((size_t)n, sizeof(*names));
	choice = calloc((size_t)n, sizeof(*choice));
	if (!ks || !fronts || !weights || !names || !choice)
		goto out;
	n = 0;
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (conv_kernel_t *k = g_buckets[b]; k; k = k->next) {
			if (k->meas_state != 1)
				continue;
			/* each kernel's configurations must also fit beside its own
			 * tensors, and beside what the plan holds when it runs */
			uint64_t lim = conv_kernel_limit(k);
			solver_kernel_t t = { k->batch, k->quantum, k->nmeas, k->meas };

			/* a kernel's front is computed once: every solve reuses it;
			 * when nothing fits, its least-workspace member stands alone */
			if (!k->have_front) {
				if (solver_front(&t, lim, &k->front) != SOLVER_OK) {
					solver_front_t all;

					if (solver_front(&t, SOLVER_NO_LIMIT, &all) != SOLVER_OK)
						continue;
					k->front.c = malloc(sizeof(*k->front.c));
					if (!k->front.c) {
						solver_front_free(&all);
						continue;
					}
					k->front.c[0] = all.c[0];
					k->front.n = 1;
					k->front.unpruned = all.unpruned;
					solver_front_free(&all);
				}
				k->have_front = true;
			}
			k->undivided_ms = undivided_ms(k, lim);
			ks[n] = k;
			fronts[n] = k->front;
			weights[n] = k->weight ? (double)k->weight : 1.0;
			names[n] = k->name;
			n++;
		}
	if (!n)
		goto out;
	lp[0] = '\0';
	if (vmem_log_enabled(VMEM_LOG_DEBUG))
		lp_path(lp, sizeof(lp));
	t0 = hook_clock_ns();
	/* a relative gap of 1e-4 (0.01% of the conv time) ends the search
	 * long before proving the last microsecond (ResNet-50, 1861 variables:
	 * 10 s without it) */
	st = solver_wd(&g_glpk, &(solver_wd_t){ n, fronts, weights, names, conv_mode.limit,
						lp[0] ? lp : NULL, 0, 1e-4 },
		       choice, &res);
	ns = hook_clock_ns() - t0;
	if (lp[0] && res.lp_written)
		vmem_debug("WD model (%d kernels) written to %s", n, lp);
	g_wd_generation++;
	stats_add(STATS_WD_SOLVES, 1);
	stats_add(STATS_WD_SOLVE_NS, ns);
	stats_set(STATS_WD_VARS, (uint64_t)res.nvars);
	stats_set(STATS_WD_UNPRUNED, res.unpruned >= 1.8e19 ? UINT64_MAX : (uint64_t)res.unpruned);
	if (st == SOLVER_OK) {
		status = res.optimal ? "optimal" : "feasible";
		stats_set(STATS_WD_OBJECTIVE_NS, (uint64_t)(res.objective * 1e6));
	} else if (st == SOLVER_INFEASIBLE) {
		status = "infeasible";
		if (!g_said_infeasible_wd) {
			g_said_infeasible_wd = true;
			uint64_t least = 0;

			for (int i = 0; i < n; i++)
				least += fronts[i].c[0].ws;
			vmem_warn("VMEM_WORKSPACE_LIMIT=%" PRIu64 " bytes: the convolution kernels "
				  "(%d so far) cannot all fit it even with their smallest workspaces "
				  "(%" PRIu64 " bytes together); running the memory-optimal algorithms",
				  conv_mode.limit, n, least);
		}
	} else {
		status = "error";
		if (!g_said_glpk_failed) {
			g_said_glpk_failed = true;
			vmem_warn("VMEM_WORKSPACE=wd: GLPK could not solve the workspace program (%s, "
				  "glp_intopt %d, status %d); running the memory-optimal algorithms",
				  solver_strerror(st), res.glpk_rc, res.glpk_status);
		}
	}
	/* choice[] is the solution, or all 0 (the least workspace) on failure */
	for (int i = 0; i < n; i++) {
		conv_kernel_t *k = ks[i];

		k->cfg = k->front.c[choice[i]];
		k->cfg_wd = true;
		k->cfg_first = false;
		k->have_cfg = true;
		k->wd_off = total;
		total += (k->cfg.ws + 255) / 256 * 256;
	}
	if (st != SOLVER_OK) {
		res.ws = total;
		res.objective = 0;
		for (int i = 0; i < n; i++)
			res.objective += weights[i] * ks[i]->cfg.time;
	}
	trace_wd(ks, n, &res, conv_mode.limit, status, ns);
	vmem_info("WD solve %d: %d kernels, %d variables (%.3g configurations before pruning), "
		  "objective %.3f ms, workspace %" PRIu64 " MiB, %s in %.2f ms",
		  g_wd_generation, n, res.nvars, res.unpruned, res.objective, total / MiB, status,
		  ns / 1e6);
	/* the shared buffer: reallocated when the layout grows; the old one
	 * is reused by the pool only after every stream's work on it */
	if (total > g_wd_size || (g_wd_buf && total < g_wd_size / 2)) {
		if (g_wd_buf)
			runtime_free(g_wd_buf, NULL, false, "vmem:wd");
		g_wd_buf = NULL;
		g_wd_size = 0;
		if (total && runtime_malloc(&g_wd_buf, total, NULL, "vmem:wd") == cudaSuccess)
			g_wd_size = total;
		else if (total)
			vmem_warn("VMEM_WORKSPACE=wd: the shared workspace of %" PRIu64 " MiB does not fit "
				  "the budget now; convolutions allocate their segments one at a time",
				  total / MiB);
	}
out:
	free(ks);
	free(fronts);
	free(weights);
	free(names);
	free(choice);
}

void conv_decide(conv_kernel_t *k)
{
	if (k->meas_state != 1) {
		k->have_cfg = false;
		return;
	}
	if (!conv_mode.wd) {
		decide_wr(k);
		return;
	}
	if (!g_period_done) {
		/* WD needs every kernel: until the first iteration has shown
		 * them all (conv_note_call), a kernel runs memory-optimal, in a
		 * workspace of vmem's, and the program is solved once then,
		 * rather than again at each new kernel */
		k->cfg_wd = false;
		k->cfg_first = k->have_cfg = least_ws_config(k, &k->cfg);
		return;
	}
	solve_wd();
}

void *conv_wd_segment(conv_kernel_t *k)
{
	if (!k->cfg_wd || !g_wd_buf || k->wd_off + k->cfg.ws > g_wd_size)
		return NULL;
	return (char *)g_wd_buf + k->wd_off;
}

/* The plan's rooms lowered some limits: every kernel concerned is decided
 * again at once, between two iterations, so that the plan sees one
 * change of the iteration's calls rather than one per layer (each
 * different call suspends it). */
static void redecide_all(void)
{
	g_redo = false;
	if (conv_mode.wd) {
		for (unsigned b = 0; b < NBUCKETS; b++)
			for (conv_kernel_t *q = g_buckets[b]; q; q = q->next)
				q->redecide = false;
		solve_wd();
		return;
	}
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (conv_kernel_t *q = g_buckets[b]; q; q = q->next)
			if (q->redecide) {
				q->redecide = false;
				decide_wr(q);
			}
}

/* The convolutions' least device time since conv_floor_take, in ns, with
 * the configurations that run [0] and their least-workspace counterparts
 * [1] (µ-cuDNN's measured times; kernels without one are left out, so
 * each stays a lower bound).  Atomics: mark() takes them while a conv
 * hook may hold conv_lock. */
static uint64_t g_floor_ns[2];

void conv_floor_take(uint64_t ns[2])
{
	ns[0] = __atomic_exchange_n(&g_floor_ns[0], 0, __ATOMIC_RELAXED);
	ns[1] = __atomic_exchange_n(&g_floor_ns[1], 0, __ATOMIC_RELAXED);
}

static void floor_add(const conv_kernel_t *k)
{
	solver_kernel_t t = { k->batch, k->quantum, k->nmeas, k->meas };
	solver_config_t l;

	if (!k->have_cfg || k->meas_state != 1)
		return;
	__atomic_fetch_add(&g_floor_ns[0], (uint64_t)(k->cfg.time * 1e6), __ATOMIC_RELAXED);
	if (solver_least_like(&t, &k->cfg, &l) == SOLVER_OK)
		__atomic_fetch_add(&g_floor_ns[1], (uint64_t)(l.time * 1e6), __ATOMIC_RELAXED);
}

void conv_note_call(conv_kernel_t *k)
{
	k->calls++;
	floor_add(k);
	if (g_first_kernel < 0) {
		g_first_kernel = k->id;
		return;
	}
	if (k->id != g_first_kernel)
		return;
	/* the first kernel runs again: an iteration has passed */
	if (!g_priced && !conv_mode.wd && vmem_cfg.remap_cost && runtime_budget_binds()) {
		/* the budget binds: every configuration with a workspace is
		 * decided again with its remaps priced */
		int n = 0;

		g_priced = true;
		for (unsigned b = 0; b < NBUCKETS; b++)
			for (conv_kernel_t *q = g_buckets[b]; q; q = q->next)
				if (q->have_cfg && q->cfg.ws && q->meas_state == 1) {
					q->redecide = true;
					n++;
				}
		if (n) {
			g_redo = true;
			vmem_info("conv: the budget binds; %d configurations with a workspace decided "
				  "again, each 2 MiB of workspace priced at %" PRIu64 " us (VMEM_REMAP_COST)",
				  n, vmem_cfg.remap_cost);
		}
	}
	if (g_redo && (!conv_mode.wd || g_period_done)) {
		redecide_all();
		return;
	}
	if (!conv_mode.wd || g_period_done)
		return;
	/* WD's first iteration is over.  Weigh every kernel by its runs in
	 * it (identical layers share a kernel) and solve once more. */
	g_period_done = true;
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (conv_kernel_t *q = g_buckets[b]; q; q = q->next)
			q->weight = q->calls - (q == k ? 1 : 0);
	solve_wd();
}

/* Caller holds conv_lock. */
static void note_room_locked(conv_kernel_t *k, uint64_t room)
{
	if (k->meas_state != 1 || (k->have_plan_room && room >= k->plan_room))
		return;
	/* the least room over the kernel's calls: identical layers share a
	 * kernel, and the tightest moment decides */
	k->have_plan_room = true;
	k->plan_room = room;
	if (!k->have_cfg || k->cfg.ws <= conv_kernel_limit(k))
		return;
	stats_add(STATS_CONV_PLAN_ROOMS, 1);
	vmem_debug("conv %s: the plan leaves %" PRIu64 " MiB beside its tensors, its "
		   "configuration needs %" PRIu64 " MiB: deciding again", k->name, room / MiB,
		   k->cfg.ws / MiB);
	k->redecide = true;
	g_redo = true;
	if (conv_mode.wd && k->cfg_wd) {
		/* its front was cut at the old limit */
		solver_front_free(&k->front);
		k->have_front = false;
	}
}

void conv_note_room(conv_kernel_t *k)
{
	uint64_t room;

	/* every convolution call passes here: without a room (no plan, or
	 * µ-cuDNN off) it takes no lock */
	if (!k || !conv_mode.ws_on || (room = runtime_policy_conv_room()) == UINT64_MAX)
		return;
	pthread_mutex_lock(&conv_lock);
	note_room_locked(k, room);
	pthread_mutex_unlock(&conv_lock);
}

/* ------------------------------------------------------------------ */
/* Legacy API: shapes, cuDNN's list, the benchmark                      */

static bool read_tensor(cudnnTensorDescriptor_t d, conv_tensor_t *t)
{
	real_cudnnGetTensorNdDescriptor_t get = real_cudnnGetTensorNdDescriptor();
	int dims[8], str[8], nb = 0;
	cudnnDataType_t dt;

	if (!d || !get || get(d, 8, &dt, &nb, dims, str) != CUDNN_STATUS_SUCCESS || nb < 3 ||
	    nb > CONV_MAX_DIMS)
		return false;
	t->nbdims = nb;
	t->dtype = (int)dt;
	for (int i = 0; i < nb; i++) {
		t->dims[i] = dims[i];
		t->strides[i] = str[i];
	}
	return true;
}

static bool legacy_shape(conv_dir_t dir, cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
			 cudnnTensorDescriptor_t yd, cudnnConvolutionDescriptor_t cd,
			 conv_shape_t *s)
{
	real_cudnnGetFilterNdDescriptor_t getf = real_cudnnGetFilterNdDescriptor();
	real_cudnnGetConvolutionNdDescriptor_t getc = real_cudnnGetConvolutionNdDescriptor();
	real_cudnnGetConvolutionGroupCount_t getg = real_cudnnGetConvolutionGroupCount();
	real_cudnnGetConvolutionMathType_t getm = real_cudnnGetConvolutionMathType();
	int dims[8], pad[3], str[3], dil[3], nb = 0, nsp = 0, groups = 1;
	cudnnDataType_t dt, ct;
	cudnnTensorFormat_t fmt;
	cudnnConvolutionMode_t mode;
	cudnnMathType_t math = CUDNN_DEFAULT_MATH;

	memset(s, 0, sizeof(*s));
	s->api = 0;
	s->dir = (uint8_t)dir;
	if (!read_tensor(xd, &s->x) || !read_tensor(yd, &s->y))
		return false;
	if (!wd || !getf || getf(wd, 8, &dt, &fmt, &nb, dims) != CUDNN_STATUS_SUCCESS ||
	    nb < 3 || nb > CONV_MAX_DIMS)
		return false;
	s->w.nbdims = nb;
	s->w.dtype = (int)dt;
	for (int i = 0; i < nb; i++)
		s->w.dims[i] = dims[i];
	s->wfmt = (int)fmt;
	if (!cd || !getc || getc(cd, 3, &nsp, pad, str, dil, &mode, &ct) != CUDNN_STATUS_SUCCESS ||
	    nsp < 1 || nsp > CONV_MAX_SP)
		return false;
	s->nsp = nsp;
	for (int i = 0; i < nsp; i++) {
		s->pad[i] = pad[i];
		s->post[i] = pad[i];
		s->stride[i] = str[i];
		s->dil[i] = dil[i];
	}
	s->mode = (int)mode;
	s->ctype = (int)ct;
	if (getg && getg(cd, &groups) == CUDNN_STATUS_SUCCESS)
		s->groups = groups;
	if (getm && getm(cd, &math) == CUDNN_STATUS_SUCCESS)
		s->math = (int)math;
	return true;
}

/* cuDNN's _v7 list at full batch, fastest first, for the rescue and the
 * mem/perf/fit answers.  Caller holds conv_lock. */
static void legacy_list(conv_kernel_t *k, cudnnHandle_t h, cudnnTensorDescriptor_t xd,
			cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd,
			cudnnConvolutionDescriptor_t cd)
{
	perf_t perf[CONV_MAX_CANDS];
	int got = 0;
	cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;

	if (k->have_list)
		return;
	switch ((conv_dir_t)k->shape.dir) {
	case CONV_DIR_FWD:
		if (real_cudnnGetConvolutionForwardAlgorithm_v7())
			st = real_cudnnGetConvolutionForwardAlgorithm_v7()(h, xd, wd, cd, yd,
									     CONV_MAX_CANDS, &got, perf);
		break;
	case CONV_DIR_BWD_DATA:
		if (real_cudnnGetConvolutionBackwardDataAlgorithm_v7())
			st = real_cudnnGetConvolutionBackwardDataAlgorithm_v7()(
				h, wd, yd, cd, xd, CONV_MAX_CANDS, &got,
				(cudnnConvolutionBwdDataAlgoPerf_t *)perf);
		break;
	default:
		if (real_cudnnGetConvolutionBackwardFilterAlgorithm_v7())
			st = real_cudnnGetConvolutionBackwardFilterAlgorithm_v7()(
				h, xd, yd, cd, wd, CONV_MAX_CANDS, &got,
				(cudnnConvolutionBwdFilterAlgoPerf_t *)perf);
		break;
	}
	if (st != CUDNN_STATUS_SUCCESS)
		got = 0;
	k->nlist = 0;
	for (int i = 0; i < got && i < CONV_MAX_CANDS; i++)
		k->list[k->nlist++] = (conv_cand_t){
			(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS,
			perf[i].determinism == CUDNN_DETERMINISTIC, perf[i].memory, perf[i].time,
		};
	k->have_list = true;
}

static void *offset(const void *p, uint64_t bytes)
{
	return (char *)p + bytes;
}

/* Micro-batch descriptors of size b (the caller's for the full batch). */
static bool mdesc(conv_kernel_t *k, int b, cudnnTensorDescriptor_t xd0,
		  cudnnTensorDescriptor_t yd0, cudnnTensorDescriptor_t *xd,
		  cudnnTensorDescriptor_t *yd)
{
	real_cudnnCreateTensorDescriptor_t create = real_cudnnCreateTensorDescriptor();
	real_cudnnSetTensorNdDescriptor_t set = real_cudnnSetTensorNdDescriptor();
	real_cudnnDestroyTensorDescriptor_t destroy = real_cudnnDestroyTensorDescriptor();
	cudnnTensorDescriptor_t nx = NULL, ny = NULL;
	const conv_tensor_t *t[2] = { &k->shape.x, &k->shape.y };
	cudnnTensorDescriptor_t *out[2] = { &nx, &ny };

	if (b == k->batch && xd0 && yd0) {
		*xd = xd0;
		*yd = yd0;
		return true;
	}
	for (int i = 0; i < k->nmdesc; i++)
		if (k->mdesc[i].b == b) {
			*xd = k->mdesc[i].xd;
			*yd = k->mdesc[i].yd;
			return true;
		}
	if (!create || !set || !destroy || k->nmdesc == SOLVER_MAX_RUNS)
		return false;
	for (int s = 0; s < 2; s++) {
		int dims[CONV_MAX_DIMS], str[CONV_MAX_DIMS];

		for (int i = 0; i < t[s]->nbdims; i++) {
			dims[i] = (int)t[s]->dims[i];
			str[i] = (int)t[s]->strides[i];
		}
		dims[0] = b;
		if (create(out[s]) != CUDNN_STATUS_SUCCESS ||
		    set(*out[s], (cudnnDataType_t)t[s]->dtype, t[s]->nbdims, dims, str) !=
			    CUDNN_STATUS_SUCCESS) {
			if (nx)
				destroy(nx);
			if (ny)
				destroy(ny);
			return false;
		}
	}
	k->mdesc[k->nmdesc].b = b;
	k->mdesc[k->nmdesc].xd = nx;
	k->mdesc[k->nmdesc].yd = ny;
	k->nmdesc++;
	*xd = nx;
	*yd = ny;
	return true;
}

/* Scratch for a benchmark: x and y slices of `bmax` images, the filter and
 * a workspace, resident and locked.  Shrinks the workspace, then the
 * largest size, when the budget is short. */
typedef struct {
	void *x, *y, *w, *ws;
	uint64_t xb, yb, wb, wsb;
	trace_ref_t res[4];
	bool locked;
	cudaStream_t stream;
} scratch_t;

static void scratch_free(scratch_t *s)
{
	if (s->locked)
		runtime_complete(s->res, 4, s->stream);
	s->locked = false;
	conv_free(s->x, s->stream);
	conv_free(s->y, s->stream);
	conv_free(s->w, s->stream);
	conv_free(s->ws, s->stream);
	memset(s, 0, sizeof(*s));
}

static bool scratch_get(scratch_t *s, const conv_kernel_t *k, int bmax, uint64_t ws,
			cudaStream_t stream)
{
	vmem_ref_t refs[4];

	memset(s, 0, sizeof(*s));
	s->stream = stream;
	s->xb = conv_extent(&k->shape.x, bmax);
	s->yb = conv_extent(&k->shape.y, bmax);
	s->wb = conv_extent(&k->shape.w, 0);
	s->wsb = ws;
	s->x = conv_alloc(s->xb, stream);
	s->y = conv_alloc(s->yb, stream);
	s->w = conv_alloc(s->wb, stream);
	s->ws = ws ? conv_alloc(ws, stream) : NULL;
	if (!s->x || !s->y || !s->w || (ws && !s->ws)) {
		scratch_free(s);
		return false;
	}
	refs[0] = (vmem_ref_t){ (uintptr_t)s->x, s->xb, VMEM_ACCESS_RW, "x" };
	refs[1] = (vmem_ref_t){ (uintptr_t)s->y, s->yb, VMEM_ACCESS_RW, "y" };
	refs[2] = (vmem_ref_t){ (uintptr_t)s->w, s->wb, VMEM_ACCESS_RW, "w" };
	refs[3] = (vmem_ref_t){ (uintptr_t)s->ws, s->wsb, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "ws" };
	if (runtime_prepare(refs, s->ws ? 4 : 3, stream, s->res, false) != cudaSuccess) {
		scratch_free(s);
		return false;
	}
	if (!s->ws)
		memset(&s->res[3], 0, sizeof(s->res[3]));
	s->locked = true;
	return true;
}

/* Benchmarks k with cudnnFind*AlgorithmEx on micro-batch descriptors.
 * Caller holds conv_lock. */
static void measure_legacy(conv_kernel_t *k, cudnnHandle_t h, cudnnTensorDescriptor_t xd0,
			   cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd0,
			   cudnnConvolutionDescriptor_t cd, cudaStream_t stream)
{
	int sizes[4096], ns, bmax;
	uint64_t greediest = 0, cap;
	solver_meas_t *m;
	int n = 0, cap_rows;
	scratch_t sc;

	legacy_list(k, h, xd0, wd, yd0, cd);
	for (int i = 0; i < k->nlist; i++)
		if (k->list[i].ok && k->list[i].ws > greediest)
			greediest = k->list[i].ws;
	cap = conv_measure_cap(k, greediest);
	if (conv_cache_lookup(k, cap))
		return;
	ns = solver_batch_sizes(conv_mode.mb, k->batch, k->quantum, sizes, 4096);
	if (ns < 1 || ns > 4096) {
		conv_measured(k, NULL, 0, 0);
		return;
	}
	/* the largest size and workspace the budget lets us measure with */
	for (bmax = ns - 1; bmax >= 0; bmax--) {
		uint64_t ws = cap;

		for (;;) {
			if (scratch_get(&sc, k, sizes[bmax], ws, stream))
				break;
			if (!ws)
				break;
			ws = ws > 4 * MiB ? ws / 2 : 0;
		}
		if (sc.locked)
			break;
	}
	if (bmax < 0) {
		conv_note(k, "no room to benchmark it; it runs as the application asks");
		conv_measured(k, NULL, 0, 0);
		return;
	}
	cap = sc.wsb < cap ? sc.wsb : cap;
	cap_rows = (bmax + 1) * CONV_MAX_CANDS;
	m = malloc((size_t)cap_rows * sizeof(*m));
	if (!m) {
		scratch_free(&sc);
		conv_measured(k, NULL, 0, 0);
		return;
	}
	for (int i = 0; i <= bmax; i++) {
		int b = sizes[i], got = 0;
		cudnnTensorDescriptor_t xd, yd;
		perf_t perf[CONV_MAX_CANDS];
		cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;

		if (!mdesc(k, b, xd0, yd0, &xd, &yd))
			continue;
		switch ((conv_dir_t)k->shape.dir) {
		case CONV_DIR_FWD:
			if (real_cudnnFindConvolutionForwardAlgorithmEx())
				st = real_cudnnFindConvolutionForwardAlgorithmEx()(
					h, xd, sc.x, wd, sc.w, cd, yd, sc.y, CONV_MAX_CANDS, &got, perf,
					sc.ws, sc.wsb);
			break;
		case CONV_DIR_BWD_DATA:
			if (real_cudnnFindConvolutionBackwardDataAlgorithmEx())
				st = real_cudnnFindConvolutionBackwardDataAlgorithmEx()(
					h, wd, sc.w, yd, sc.y, cd, xd, sc.x, CONV_MAX_CANDS, &got,
					(cudnnConvolutionBwdDataAlgoPerf_t *)perf, sc.ws, sc.wsb);
			break;
		default:
			if (real_cudnnFindConvolutionBackwardFilterAlgorithmEx())
				st = real_cudnnFindConvolutionBackwardFilterAlgorithmEx()(
					h, xd, sc.x, yd, sc.y, cd, wd, sc.w, CONV_MAX_CANDS, &got,
					(cudnnConvolutionBwdFilterAlgoPerf_t *)perf, sc.ws, sc.wsb);
			break;
		}
		if (st != CUDNN_STATUS_SUCCESS)
			continue;
		for (int j = 0; j < got && j < CONV_MAX_CANDS; j++)
			if (perf[j].status == CUDNN_STATUS_SUCCESS &&
			    perf[j].determinism == CUDNN_DETERMINISTIC && perf[j].time > 0 &&
			    perf[j].memory <= cap && n < cap_rows)
				m[n++] = (solver_meas_t){ b, (int)perf[j].algo, perf[j].time,
							  perf[j].memory };
	}
	scratch_free(&sc);
	vmem_debug("conv %s: benchmarked %d micro-batch sizes up to %d (of %d) under %" PRIu64
		   " MiB: %d results", k->name, bmax + 1, sizes[bmax], k->batch, cap / MiB, n);
	conv_measured(k, m, n, cap);
	if (!n)
		conv_note(k, "no algorithm succeeded in the benchmark; it runs as the application asks");
}

/* Under conv_lock: the kernel of a legacy call with its benchmark and
 * decision made when VMEM_WORKSPACE asks for them. */
/* k when the caller has it, else the kernel of the call's shape (created
 * on first sight; NULL when the shape is not one vmem handles).  Caller
 * holds conv_lock. */
static conv_kernel_t *legacy_find(conv_kernel_t *k, conv_dir_t dir, cudnnTensorDescriptor_t xd,
				  cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd,
				  cudnnConvolutionDescriptor_t cd)
{
	conv_shape_t s;

	if (k || !legacy_shape(dir, xd, wd, yd, cd, &s))
		return k;
	return conv_kernel_get(&s);
}

static conv_kernel_t *legacy_kernel(conv_dir_t dir, cudnnHandle_t h, cudnnTensorDescriptor_t xd,
				    cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd,
				    cudnnConvolutionDescriptor_t cd, cudaStream_t stream)
{
	conv_kernel_t *k = legacy_find(NULL, dir, xd, wd, yd, cd);

	if (!k)
		return NULL;
	legacy_list(k, h, xd, wd, yd, cd);
	if (!conv_mode.ws_on)
		return k;
	if (k->unsplittable) {
		conv_note(k, k->unsplittable);
		return k;
	}
	if (k->meas_state == 0) {
		measure_legacy(k, h, xd, wd, yd, cd, stream);
		conv_decide(k);
	}
	return k;
}

static cudaStream_t handle_stream(cudnnHandle_t h)
{
	real_cudnnGetStream_t get = real_cudnnGetStream();
	cudaStream_t s = NULL;

	if (h && get && get(h, &s) != CUDNN_STATUS_SUCCESS)
		s = NULL;
	return s;
}

/* ------------------------------------------------------------------ */
/* Legacy API: answers                                                  */

void conv_exec_answer(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
		      cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
		      cudnnTensorDescriptor_t yd, cudnnConvolutionDescriptor_t cd,
		      cudnnStatus_t st, int req, int *ret, void *perfv)
{
	perf_t *perf = perfv, first;
	conv_kernel_t *k;
	int n, pick = -1;

	conv_init();
	if (st != CUDNN_STATUS_SUCCESS || !ret || !perf || req < 1 ||
	    (!conv_mode.ws_on && conv_mode.pick_app))
		return;
	n = *ret;
	pthread_mutex_lock(&conv_lock);
	k = legacy_kernel(dir, h, xd, wd, yd, cd, handle_stream(h));
	if (!k) {
		pthread_mutex_unlock(&conv_lock);
		return;
	}
	memset(&first, 0, sizeof(first));
	if (conv_mode.ws_on && k->have_cfg) {
		/* the configuration vmem will run, with the workspace the
		 * application must provide: WR its largest part's, WD none */
		first.algo = (cudnnConvolutionFwdAlgo_t)k->cfg.runs[0].algo;
		first.status = CUDNN_STATUS_SUCCESS;
		first.time = (float)k->cfg.time;
		first.memory = k->cfg_wd || k->cfg_first ? 0 : k->cfg.ws;
		first.determinism = CUDNN_DETERMINISTIC;
		first.mathType = (cudnnMathType_t)k->shape.math;
	} else if (!conv_mode.pick_app) {
		conv_cand_t cand[CONV_MAX_CANDS];
		int m = n < CONV_MAX_CANDS ? n : CONV_MAX_CANDS;

		for (int i = 0; i < m; i++)
			cand[i] = (conv_cand_t){ (int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS,
						 perf[i].determinism == CUDNN_DETERMINISTIC,
						 perf[i].memory, perf[i].time };
		pick = conv_pick(cand, m, conv_mode.pick, conv_room(k->tensor_bytes));
		if (pick < 0) {
			pthread_mutex_unlock(&conv_lock);
			return;
		}
		first = perf[pick];
	} else {
		pthread_mutex_unlock(&conv_lock);
		return;
	}
	pthread_mutex_unlock(&conv_lock);
	/* first entry = vmem's; the rest in cuDNN's order without it */
	int at = pick;

	if (at < 0)
		for (int i = 0; i < n; i++)
			if ((int)perf[i].algo == (int)first.algo) {
				at = i;
				break;
			}
	if (at < 0) {
		at = n < req ? n : req - 1;
		if (n < req)
			n++;
	}
	memmove(&perf[1], &perf[0], (size_t)at * sizeof(*perf));
	perf[0] = first;
	*ret = n;
	stats_add(STATS_CONV_ANSWERED, 1);
	hook_call_args(c, "\"vmem_algo\":%d,\"vmem_ws\":%zu", (int)first.algo, first.memory);
}

void conv_exec_ws_answer(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
			 cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
			 cudnnTensorDescriptor_t yd, cudnnConvolutionDescriptor_t cd,
			 cudnnStatus_t st, size_t *size)
{
	conv_kernel_t *k;

	uint64_t fitted;

	conv_init();
	if (st != CUDNN_STATUS_SUCCESS || !size)
		return;
	if (!conv_mode.ws_on) {
		uint64_t budget;

		runtime_budget_free(&budget, NULL, NULL);
		if (!budget)
			return;   /* every workspace fits: cuDNN's answer stands */
	}
	pthread_mutex_lock(&conv_lock);
	k = legacy_kernel(dir, h, xd, wd, yd, cd, handle_stream(h));
	if (k && conv_mode.ws_on && k->have_cfg) {
		/* whatever algorithm is asked about: vmem runs its configuration */
		*size = k->cfg_wd || k->cfg_first ? 0 : k->cfg.ws;
		stats_add(STATS_CONV_ANSWERED, 1);
		hook_call_args(c, "\"vmem_ws\":%zu", *size);
	} else if (k && (fitted = conv_ws_fitted(k, *size)) != *size) {
		*size = fitted;
		stats_add(STATS_CONV_ANSWERED, 1);
		hook_call_args(c, "\"vmem_ws\":%zu", *size);
	}
	pthread_mutex_unlock(&conv_lock);
}

/* True when the call's workspace is smaller than its algorithm needs
 * because vmem answered the size query with less (conv_ws_fitted): the
 * application's algorithm cannot run in it. */
static bool app_ws_short(conv_kernel_t *k, int algo, size_t wsb)
{
	if (!k || !k->ws_lowered)
		return false;
	for (int i = 0; i < k->nlist; i++)
		if (k->list[i].algo == algo)
			return k->list[i].ws > wsb;
	return false;
}

/* ------------------------------------------------------------------ */
/* Legacy API: execution                                                */

static cudnnStatus_t legacy_call(conv_dir_t dir, cudnnHandle_t h, const void *alpha,
				 cudnnTensorDescriptor_t xd, const void *x,
				 cudnnFilterDescriptor_t wd, const void *w,
				 cudnnTensorDescriptor_t yd, const void *y,
				 cudnnConvolutionDescriptor_t cd, int algo, void *ws, size_t wsb,
				 const void *beta)
{
	switch (dir) {
	case CONV_DIR_FWD:
		if (!real_cudnnConvolutionForward())
			return CUDNN_STATUS_NOT_INITIALIZED;
		return real_cudnnConvolutionForward()(h, alpha, xd, x, wd, w, cd,
						      (cudnnConvolutionFwdAlgo_t)algo, ws, wsb, beta,
						      yd, (void *)y);
	case CONV_DIR_BWD_DATA:
		if (!real_cudnnConvolutionBackwardData())
			return CUDNN_STATUS_NOT_INITIALIZED;
		return real_cudnnConvolutionBackwardData()(h, alpha, wd, w, yd, y, cd,
							   (cudnnConvolutionBwdDataAlgo_t)algo, ws,
							   wsb, beta, xd, (void *)x);
	default:
		if (!real_cudnnConvolutionBackwardFilter())
			return CUDNN_STATUS_NOT_INITIALIZED;
		return real_cudnnConvolutionBackwardFilter()(h, alpha, xd, x, yd, y, cd,
							     (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
							     wsb, beta, wd, (void *)w);
	}
}

/* One legacy call's arguments, the caller's (full batch). */
typedef struct {
	cudnnHandle_t h;
	const void *alpha, *beta;
	cudnnTensorDescriptor_t xd, yd;
	const void *x, *w, *y;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	void *ws;
	size_t wsb;
} conv_call_t;

/* One cuDNN call over images [off, off + b) with `algo`: micro-batch
 * descriptors, pointers offset along N, and backward-filter accumulating
 * onto the slices before it (beta 1 past the first).  Caller holds
 * conv_lock (the descriptors cached in k). */
static cudnnStatus_t call_slice(conv_kernel_t *k, const conv_call_t *a, int algo, int64_t off,
				int b)
{
	static const float onef = 1.0f;
	static const double oned = 1.0;
	const void *one = k->shape.x.dtype == CUDNN_DATA_DOUBLE ? (const void *)&oned : &onef;
	uint64_t xib = conv_image_bytes(&k->shape.x), yib = conv_image_bytes(&k->shape.y);
	conv_dir_t dir = (conv_dir_t)k->shape.dir;
	cudnnTensorDescriptor_t xd, yd;

	if (!mdesc(k, b, a->xd, a->yd, &xd, &yd))
		return CUDNN_STATUS_ALLOC_FAILED;
	return legacy_call(dir, a->h, a->alpha, xd, offset(a->x, (uint64_t)off * xib), a->wd, a->w,
			   yd, offset(a->y, (uint64_t)off * yib), a->cd, algo, a->ws, a->wsb,
			   dir == CONV_DIR_BWD_FILTER && off > 0 ? one : a->beta);
}

/* Runs cfg along N.  Caller holds conv_lock (descriptors, the WD segment). */
/* A legacy slice: call_slice with the call's arguments. */
typedef struct {
	conv_kernel_t *k;
	const conv_call_t *a;
} legacy_slice_t;

static cudnnStatus_t legacy_slice(void *ctx, int algo, int64_t off, int b)
{
	const legacy_slice_t *s = ctx;

	return call_slice(s->k, s->a, algo, off, b);
}

static cudnnStatus_t run_config(conv_kernel_t *k, const solver_config_t *cfg,
				const conv_call_t *a, int *ncalls)
{
	return conv_each_slice(cfg, INT_MAX, legacy_slice, &(legacy_slice_t){ k, a }, ncalls);
}

cudnnStatus_t conv_each_slice(const solver_config_t *cfg, int most, conv_slice_fn fn, void *ctx,
			      int *ran)
{
	int64_t off = 0;

	if (ran)
		*ran = 0;
	for (int r = 0; r < cfg->nruns; r++) {
		const solver_run_t *run = &cfg->runs[r];

		for (int left = run->b * run->count; left > 0;) {
			int b = left < run->b ? left : run->b;
			cudnnStatus_t st;

			b = b < most ? b : most;
			if ((st = fn(ctx, run->algo, off, b)) != CUDNN_STATUS_SUCCESS)
				return st;
			if (ran)
				(*ran)++;
			off += b;
			left -= b;
		}
	}
	return CUDNN_STATUS_SUCCESS;
}

/* conv_run_sliced's state. */
typedef struct {
	hook_call_t *c;
	const conv_kernel_t *k;
	const void *x, *w, *y;
	conv_slice_fn fn;
	void *ctx;
} sliced_t;

/* One slice as a call of its own: its refs (its images of x and y, the
 * rest whole), prepared, issued, finished. */
static cudnnStatus_t issue_slice(void *v, int algo, int64_t off, int b)
{
	const sliced_t *a = v;
	const hook_call_t *c = a->c;
	uint64_t xib = conv_image_bytes(&a->k->shape.x), yib = conv_image_bytes(&a->k->shape.y);
	bool filter = a->k->shape.dir == CONV_DIR_BWD_FILTER;
	cudnnStatus_t st;
	hook_call_t sc;

	hook_call_init(&sc, c->kind, c->api, c->stream);
	sc.no_host_stated = c->no_host_stated;
	sc.info = c->info;
	for (int i = 0; i < c->nrefs; i++) {
		const vmem_ref_t *ref = &c->refs[i];
		uint64_t ib = ref->ptr == (uintptr_t)a->x ? xib : ref->ptr == (uintptr_t)a->y ? yib : 0;
		uint8_t acc = ref->access;

		if (ref->ptr == (uintptr_t)a->w && filter && off > 0)
			acc = VMEM_ACCESS_RW;   /* accumulates onto the slices before */
		if (vmem_ref_empty(acc)) {
			/* a workspace this configuration does not use */
			hook_call_ref_empty(&sc, (const void *)ref->ptr, ref->bytes, ref->role);
			continue;
		}
		if (!ib) {
			hook_call_ref(&sc, (const void *)ref->ptr, ref->bytes, acc, ref->role);
			continue;
		}
		uint64_t at = (uint64_t)off * ib, n = (uint64_t)b * ib;

		if (ref->bytes && at + n > ref->bytes)
			n = ref->bytes > at ? ref->bytes - at : 0;
		hook_call_ref(&sc, offset((const void *)ref->ptr, at), n, acc, ref->role);
	}
	hook_call_args(&sc, "\"slice_images\":\"%" PRId64 "+%d of %d\"", off, b, a->k->batch);
	if (hook_call_prepare(&sc) != cudaSuccess) {
		hook_call_finish(&sc);
		return CUDNN_STATUS_ALLOC_FAILED;
	}
	st = a->fn(a->ctx, algo, off, b);
	hook_call_finish(&sc);
	return st;
}

/* Like run_config, but each cuDNN call a call of its own through the
 * runtime, for a convolution whose tensors need more than 3/4 of the
 * budget (interpose/dnn_split.c's rule), which could not be made resident
 * at once. */
cudnnStatus_t conv_run_sliced(hook_call_t *c, conv_kernel_t *k, const solver_config_t *cfg,
			      int most, const void *x, const void *w, const void *y,
			      conv_slice_fn fn, void *ctx, int *ncalls)
{
	return conv_each_slice(cfg, most, issue_slice, &(sliced_t){ c, k, x, w, y, fn, ctx },
			       ncalls);
}

static cudnnStatus_t run_sliced(hook_call_t *c, conv_kernel_t *k, const solver_config_t *cfg,
				int most, const conv_call_t *a, int *ncalls)
{
	return conv_run_sliced(c, k, cfg, most, a->x, a->w, a->y, legacy_slice,
			       &(legacy_slice_t){ k, a }, ncalls);
}

int conv_slice_images(const conv_kernel_t *k, const hook_call_t *c, const void *x,
		      const void *y, const void *ws, uint64_t wsb, uint64_t tensors,
		      uint64_t budget)
{
	uint64_t chunk, xib = conv_image_bytes(&k->shape.x), yib = conv_image_bytes(&k->shape.y);
	hook_slice_t t[8];
	int m = 0, b;

	runtime_budget_free(NULL, NULL, &chunk);
	if (hook_split_slices(tensors, budget, 2) < 2)
		return 0;   /* the common case: no slice table */
	for (int i = 0; i < c->nrefs && m < 7; i++) {
		const vmem_ref_t *r = &c->refs[i];

		if (!runtime_owns(r->ptr) || strcmp(r->role, "ws") == 0)
			continue;
		t[m++] = r->ptr == (uintptr_t)x ? (hook_slice_t){ r->ptr, xib, xib } :
			 r->ptr == (uintptr_t)y ? (hook_slice_t){ r->ptr, yib, yib } :
						  (hook_slice_t){ r->ptr, 0, r->bytes };
	}
	if (ws && wsb && runtime_owns((uintptr_t)ws))
		t[m++] = (hook_slice_t){ (uintptr_t)ws, 0, wsb };
	b = hook_split_images(t, m, k->batch, tensors, budget, chunk);
	/* a graph-API slice starts at a multiple of the quantum: its
	 * tensors declare an alignment (conv_graph.c) */
	return k->shape.api && k->quantum > 1 ? b / k->quantum * k->quantum : b;
}

/* The rescue: the fastest algorithm of cuDNN's list whose workspace fits
 * beside the call's tensors; *ws is vmem's (allocated here), NULL when
 * the algorithm needs none.  -1 when nothing fits. */
static int rescue_pick(conv_kernel_t *k, uint64_t tensor_pages, bool zero_only, void *app_ws,
		       size_t app_wsb, void **ws, uint64_t *wsb, bool *own, cudaStream_t stream)
{
	uint64_t room = conv_room(tensor_pages);
	int i;

	/* the application sized its workspace from what vmem answered: the
	 * rescue stays within it (the room at the call differs from the
	 * estimate the answer came from by the pages' rounding) */
	if (k->ws_lowered && app_wsb < room)
		room = app_wsb;
	*ws = NULL;
	*wsb = 0;
	*own = false;
	for (;;) {
		i = conv_pick(k->list, k->nlist, zero_only ? CONV_PICK_MEM : CONV_PICK_FIT, room);
		if (i < 0)
			return -1;
		if (!k->list[i].ws)
			return k->list[i].algo;
		if (zero_only && k->list[i].ws)
			return -1;
		if (app_ws && app_wsb >= k->list[i].ws) {
			/* the application's holds it (sized for it where
			 * vmem answered the size query: conv_ws_fitted) */
			*ws = app_ws;
			*wsb = k->list[i].ws;
			return k->list[i].algo;
		}
		*own = true;
		*ws = conv_alloc(k->list[i].ws, stream);
		if (*ws) {
			*wsb = k->list[i].ws;
			return k->list[i].algo;
		}
		/* the pool could not give it: only what needs nothing is left */
		*own = false;
		zero_only = true;
	}
}

/* Runs the call with the fastest algorithm whose workspace fits beside
 * its tensors, in the application's workspace when it is large enough,
 * else in vmem's (*own, freed by the caller), or none.  The call is not
 * prepared yet. */
static cudnnStatus_t rescue(hook_call_t *c, conv_kernel_t *k, conv_dir_t dir, cudnnHandle_t h,
			    const void *alpha, cudnnTensorDescriptor_t xd, const void *x,
			    cudnnFilterDescriptor_t wd, const void *w, cudnnTensorDescriptor_t yd,
			    const void *y, cudnnConvolutionDescriptor_t cd, const void *beta,
			    void *app_ws, size_t app_wsb, uint64_t tensors, void **own, int *ran)
{
	cudaStream_t stream = (cudaStream_t)c->stream;
	uint64_t use_b = 0;
	void *use = NULL;
	bool mine = false;

	*ran = -1;
	if (!k || !k->have_list)
		return CONV_OOM;
	for (int attempt = 0; attempt < 2; attempt++) {
		int a = rescue_pick(k, tensors, attempt > 0, app_ws, app_wsb, &use, &use_b, &mine,
				    stream);

		if (a < 0)
			break;
		if (mine)
			*own = use;
		conv_set_ws_ref(c, use, use_b);
		if (hook_call_prepare(c) == cudaSuccess) {
			*ran = a;
			stats_add(STATS_CONV_RESCUED, 1);
			return legacy_call(dir, h, alpha, xd, x, wd, w, yd, y, cd, a, use, use_b, beta);
		}
		if (mine) {
			conv_free(*own, stream);
			*own = NULL;
		}
		if (!use_b)
			break;   /* not even without a workspace */
	}
	return CONV_OOM;
}

/* The rescue of a call whose tensors cannot be resident at once: slices
 * of N with the fastest algorithm whose workspace leaves 3/4 of the
 * budget to a slice (then the least-workspace one), in the application's
 * workspace when it is large enough, else in vmem's (*own, freed by the
 * caller).  The graph API's step 2 does the same with its plans
 * (conv_graph.c).  False when nothing ran.  Caller holds conv_lock. */
static bool rescue_sliced(hook_call_t *c, conv_kernel_t *k, const conv_call_t *call,
			  uint64_t budget, uint64_t tensors, void **own, int *ran, int *ncalls,
			  cudnnStatus_t *st)
{
	cudaStream_t stream = (cudaStream_t)c->stream;

	if (!k || !k->have_list || k->batch < 2 || hook_split_slices(tensors, budget, 2) < 2)
		return false;
	for (int attempt = 0; attempt < 2; attempt++) {
		int i = conv_pick(k->list, k->nlist, attempt ? CONV_PICK_MEM : CONV_PICK_FIT,
				  budget / 4);
		conv_call_t a = *call;
		int most;

		if (i < 0)
			return false;
		a.wsb = k->list[i].ws;
		if (!a.wsb)
			a.ws = NULL;
		else if (!a.ws || call->wsb < a.wsb)
			a.ws = *own = conv_alloc(a.wsb, stream);
		if (a.wsb && !a.ws)
			continue;
		most = conv_slice_images(k, c, a.x, a.y, a.ws, a.wsb,
					 tensors + conv_ws_pages(a.ws, a.wsb), budget);
		if (most <= 0) {
			conv_free(*own, stream);
			*own = NULL;
			continue;
		}
		conv_set_ws_ref(c, a.ws, a.wsb);
		*ran = k->list[i].algo;
		*st = run_sliced(c, k, &(solver_config_t){ 0.0, a.wsb, 1, { { *ran, k->batch, 1 } } },
				 most, &a, ncalls);
		stats_add(STATS_CONV_RESCUED, 1);
		return true;
	}
	return false;
}

cudnnStatus_t conv_exec_legacy(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
			       const void *alpha, cudnnTensorDescriptor_t xd, const void *x,
			       cudnnFilterDescriptor_t wd, const void *w,
			       cudnnTensorDescriptor_t yd, const void *y,
			       cudnnConvolutionDescriptor_t cd, int algo, void *ws, size_t wsb,
			       const void *beta)
{
	cudaStream_t stream = (cudaStream_t)c->stream;
	uint64_t budget, tensors;
	conv_kernel_t *k = NULL;
	void *own = NULL;
	const char *how = "app";
	int ncalls = 1, ran = algo;
	bool micro = false, app_ok = true, sliced = false;
	cudnnStatus_t st = CONV_OOM;

	conv_init();
	runtime_budget_free(&budget, NULL, NULL);
	tensors = conv_call_tensor_pages(c);
	/* other algorithms and slices come before the host's memory */
	c->no_host_stated = true;

	/* 1. a µ-cuDNN configuration (conv_lock is held until it is issued:
	 *    a WD re-solve must not move the shared buffer under it) */
	if (conv_mode.ws_on) {
		pthread_mutex_lock(&conv_lock);
		k = legacy_kernel(dir, h, xd, wd, yd, cd, stream);
		if (k)
			conv_note_call(k);
		/* once vmem answered with a configuration, the application's
		 * algorithm and workspace are not a pair cuDNN can run */
		app_ok = !k || k->meas_state != 1;
		if (k && k->have_cfg) {
			bool least;
			const solver_config_t *lc = conv_run_cfg(k, &least), *cfg = &k->cfg;
			void *use = conv_cfg_ws(k, cfg, false, ws, wsb);
			int most = conv_slice_images(k, c, x, y, use, cfg->ws,
						tensors + conv_ws_pages(use, cfg->ws), budget);

			/* dyn's "(m)" pass: the least-workspace algorithms in the
			 * same parts, in the same slices (the plan learnt each
			 * slice as a call of its own) */
			if (least) {
				cfg = lc;
				use = conv_cfg_ws(k, cfg, true, ws, wsb);
			}
			if (!use && cfg->ws) {
				use = own = conv_alloc(cfg->ws, stream);
				if (!least)
					most = conv_slice_images(k, c, x, y, use, cfg->ws,
							    tensors + conv_ws_pages(use, cfg->ws),
							    budget);
			}

			if ((use || !cfg->ws) && most > 0) {
				/* its tensors cannot be resident at once: slice by slice */
				conv_set_ws_ref(c, use, cfg->ws);
				micro = sliced = true;
				how = "sliced";
				ran = cfg->runs[0].algo;
				st = run_sliced(c, k, cfg, most,
						&(conv_call_t){ h, alpha, beta, xd, yd, x, w, y, wd, cd,
								use, cfg->ws },
						&ncalls);
			} else if ((use || !cfg->ws) &&
			    (!budget || tensors + conv_ws_pages(use, cfg->ws) <= budget)) {
				conv_set_ws_ref(c, use, cfg->ws);
				if (hook_call_prepare(c) == cudaSuccess) {
					micro = true;
					how = least ? "least" : k->cfg_wd ? "wd" :
					      k->cfg_first ? "wd-first" : "wr";
					ran = cfg->runs[0].algo;
					st = run_config(k, cfg,
							&(conv_call_t){ h, alpha, beta, xd, yd, x, w, y,
									wd, cd, use, cfg->ws },
							&ncalls);
					if (st != CUDNN_STATUS_SUCCESS && ncalls == 0) {
						/* nothing written: run it whole, without a workspace */
						int i = conv_pick(k->list, k->nlist, CONV_PICK_MEM, 0);

						vmem_warn("conv %s: a micro-batch call failed (cuDNN status "
							  "%d); running it undivided from now on", k->name,
							  (int)st);
						k->have_cfg = false;
						if (i >= 0 && !k->list[i].ws) {
							how = "rescue";
							ran = k->list[i].algo;
							st = legacy_call(dir, h, alpha, xd, x, wd, w, yd, y, cd,
									 ran, NULL, 0, beta);
						}
					} else if (st == CUDNN_STATUS_SUCCESS) {
						stats_add(STATS_CONV_MICRO, 1);
						stats_add(STATS_CONV_MICRO_CALLS, (uint64_t)ncalls);
						stats_add(STATS_CONV_MODEL_NS, (uint64_t)(cfg->time * 1e6));
					}
				}
			}
			if (!micro) {
				conv_free(own, stream);
				own = NULL;
			}
		}
		pthread_mutex_unlock(&conv_lock);
		if (micro)
			goto done;
	}
	/* the application's algorithm cannot run in a workspace vmem told it
	 * to size for the rescue (conv_ws_fitted): 2 and 3 are not for it */
	if (app_ok && budget && __atomic_load_n(&g_ws_lowered, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&conv_lock);
		k = legacy_find(k, dir, xd, wd, yd, cd);
		app_ok = !app_ws_short(k, algo, wsb);
		pthread_mutex_unlock(&conv_lock);
	}
	/* 2. the application's choice, slice by slice when its tensors cannot
	 *    be resident at once (its workspace serves every slice) */
	if (app_ok && budget && conv_ws_pages(ws, wsb) <= budget / 4 &&
	    hook_split_slices(tensors + conv_ws_pages(ws, wsb), budget, 2) > 1) {
		pthread_mutex_lock(&conv_lock);
		k = legacy_find(k, dir, xd, wd, yd, cd);
		if (k) {
			int most = conv_slice_images(k, c, x, y, ws, wsb, tensors + conv_ws_pages(ws, wsb),
						budget);
			solver_config_t whole = { 0.0, wsb, 1, { { algo, k->batch, 1 } } };

			if (most > 0) {
				sliced = true;
				how = "sliced";
				st = run_sliced(c, k, &whole, most,
						&(conv_call_t){ h, alpha, beta, xd, yd, x, w, y, wd, cd,
								ws, wsb },
						&ncalls);
			}
		}
		pthread_mutex_unlock(&conv_lock);
		if (sliced)
			goto done;
	}
	/* 3. the application's choice, when its workspace fits beside the tensors */
	if (app_ok && !(budget && ws && tensors + conv_ws_pages(ws, wsb) > budget)) {
		if (hook_call_prepare(c) == cudaSuccess) {
			st = legacy_call(dir, h, alpha, xd, x, wd, w, yd, y, cd, algo, ws, wsb, beta);
			goto done;
		}
		if (!ws)
			goto done;   /* the tensors alone do not fit */
	}
	/* 4. the fastest algorithm whose workspace fits, in vmem's memory */
	how = "rescue";
	if (!k) {
		pthread_mutex_lock(&conv_lock);
		if ((k = legacy_find(NULL, dir, xd, wd, yd, cd)))
			legacy_list(k, h, xd, wd, yd, cd);
		pthread_mutex_unlock(&conv_lock);
	}
	/* tensors that fill the budget cannot be resident whole with any
	 * algorithm: straight to the slices */
	ran = -1;
	if (!budget || tensors < budget)
		st = rescue(c, k, dir, h, alpha, xd, x, wd, w, yd, y, cd, beta, ws, wsb, tensors,
			    &own, &ran);
	if (ran < 0 && budget) {
		pthread_mutex_lock(&conv_lock);
		sliced = rescue_sliced(c, k,
				       &(conv_call_t){ h, alpha, beta, xd, yd, x, w, y, wd, cd, ws,
						       wsb },
				       budget, tensors, &own, &ran, &ncalls, &st);
		pthread_mutex_unlock(&conv_lock);
		if (sliced)
			how = "sliced";
	}
done:
	/* 5. nothing ran and nothing fits: the application's choice whole (or,
	 *    when vmem's answers made it no pair cuDNN runs, the least-workspace
	 *    algorithm within its workspace), its pages past the budget mapped
	 *    from the host */
	if (st == CONV_OOM && ((!micro && !sliced) || !ncalls) && !hook_call_is_prepared() &&
	    runtime_host_mapping()) {
		int i = -1;
		size_t use_b = wsb;

		if (!app_ok && k) {
			pthread_mutex_lock(&conv_lock);
			if (k->have_list && (i = conv_pick(k->list, k->nlist, CONV_PICK_MEM,
							   ws ? wsb : 0)) >= 0) {
				use_b = (size_t)k->list[i].ws;
				algo = k->list[i].algo;
			}
			pthread_mutex_unlock(&conv_lock);
		}
		conv_free(own, stream);
		own = NULL;
		if (app_ok || i >= 0) {
			sliced = false;
			ncalls = 1;
			ran = algo;
			conv_set_ws_ref(c, use_b ? ws : NULL, use_b);
			c->no_host_stated = false;
			how = "host";
			if (hook_call_prepare(c) == cudaSuccess)
				st = legacy_call(dir, h, alpha, xd, x, wd, w, yd, y, cd, ran,
						 use_b ? ws : NULL, use_b, beta);
		}
	}
	return conv_call_done(c, k, sliced, how, "ran_algo", ran, ncalls, own, st);
}

cudnnStatus_t conv_call_done(hook_call_t *c, conv_kernel_t *k, bool sliced, const char *how,
			     const char *ran_key, int ran, int ncalls, void *own, cudnnStatus_t st)
{
	cudaStream_t stream = (cudaStream_t)c->stream;

	conv_note_room(k);
	if (st == CONV_OOM && runtime_active()) {
		/* say why, also when no prepare was tried (runtime_oom_report) */
		runtime_oom_explain(c->refs, c->nrefs, "no algorithm vmem could run it with has a "
				    "workspace that fits beside its tensors, whole or in slices of "
				    "its batch");
		runtime_oom_name(c->api, NULL);
	}
	if (sliced) {
		/* it ran as its slices, each traced and seen as a call */
		stats_add(STATS_DNN_SPLIT, 1);
		stats_add(STATS_DNN_SLICES, (uint64_t)ncalls);
		hook_call_drop(c);
	} else {
		if (strcmp(how, "app") != 0)
			hook_call_args(c, "\"ran\":\"%s\",\"%s\":%d,\"calls\":%d", how, ran_key, ran,
				       ncalls);
		hook_call_finish(c);
	}
	conv_free(own, stream);
	return st;
}
