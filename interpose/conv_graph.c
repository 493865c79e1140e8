/* interpose/conv_graph.c - the cuDNN graph API's convolutions under the
 * budget and as µ-cuDNN micro-batches (see conv_exec.h).
 *
 * PyTorch's default path builds a convolution as backend descriptors and
 * runs an execution plan with cudnnBackendExecute.  Engine configurations
 * play the part of the legacy algorithms: each has a workspace size and a
 * time.  vmem does here what conv_exec.c does for the legacy calls, with
 * plans of its own built from the side table's copy of the operation
 * (hook_bdt_conv_geom: tensors, convolution descriptor, alpha, beta,
 * handle):
 *
 *   tensor x_b, y_b (N = b, same strides), w  -> operation (alpha, beta)
 *   -> operation graph -> engine (global index e) -> engine config
 *   -> execution plan;  executed with a variant pack of slice pointers.
 *
 * The benchmark times such plans for every micro-batch size and engine
 * with CUDA events (one run to warm up, the best of two), in scratch
 * buffers; WR/WD then choose as for the legacy API.  A conv plan's
 * workspace size is answered from the configuration (WD: 0); engine
 * heuristics results are reordered for VMEM_CONV_ALGO=mem|perf|fit; and a
 * plan whose workspace cannot sit beside its tensors in the budget is
 * replaced at Execute by a plan of the fastest engine that fits.
 *
 * Plans vmem built are kept per kernel (conv_kernel_t.gplans) for the
 * life of the process, under conv_lock.
 */
#include "interpose/conv_exec_int.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"

#define MiB ((uint64_t)1 << 20)

#define GRAPH_REALS(X)                                                                    \
	X(cudnnGetStream, cudnnStatus_t, (cudnnHandle_t h, cudaStream_t *s), (h, s))       \
	X(cudnnBackendCreateDescriptor, cudnnStatus_t,                                     \
	  (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d), (type, d))     \
	X(cudnnBackendDestroyDescriptor, cudnnStatus_t, (cudnnBackendDescriptor_t d), (d)) \
	X(cudnnBackendFinalize, cudnnStatus_t, (cudnnBackendDescriptor_t d), (d))          \
	X(cudnnBackendSetAttribute, cudnnStatus_t,                                         \
	  (cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,                   \
	   cudnnBackendAttributeType_t type, int64_t count, const void *elems),            \
	  (d, name, type, count, elems))                                                   \
	X(cudnnBackendGetAttribute, cudnnStatus_t,                                         \
	  (cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,             \
	   cudnnBackendAttributeType_t type, int64_t req, int64_t *count, void *elems),    \
	  (d, name, type, req, count, elems))                                              \
	X(cudnnBackendExecute, cudnnStatus_t,                                              \
	  (cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp),   \
	  (h, plan, vp))

#define GRAPH_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUDNN, name, ret, params, args)
GRAPH_REALS(GRAPH_REAL)

typedef cudnnBackendDescriptor_t bd_t;

/* ------------------------------------------------------------------ */
/* Building descriptors (real calls: vmem's own never pass its hooks)   */

static bool b_create(cudnnBackendDescriptorType_t t, bd_t *d)
{
	*d = NULL;
	return real_cudnnBackendCreateDescriptor() &&
	       real_cudnnBackendCreateDescriptor()(t, d) == CUDNN_STATUS_SUCCESS;
}

static void b_destroy(bd_t d)
{
	if (d && real_cudnnBackendDestroyDescriptor())
		real_cudnnBackendDestroyDescriptor()(d);
}

static bool b_set(bd_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
		  int64_t n, const void *v)
{
	return real_cudnnBackendSetAttribute() &&
	       real_cudnnBackendSetAttribute()(d, a, t, n, v) == CUDNN_STATUS_SUCCESS;
}

static bool b_get(bd_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
		  int64_t req, int64_t *n, void *v)
{
	return real_cudnnBackendGetAttribute() &&
	       real_cudnnBackendGetAttribute()(d, a, t, req, n, v) == CUDNN_STATUS_SUCCESS;
}

static bool b_fin(bd_t d)
{
	return real_cudnnBackendFinalize() && real_cudnnBackendFinalize()(d) == CUDNN_STATUS_SUCCESS;
}

/* The alignment a slice keeps: the tensor's own, at most CONV_ALIGN
 * (slices start at multiples of the quantum). */
static int64_t slice_align(const hook_conv_tensor_t *t)
{
	int64_t a = t->align > 0 ? t->align : CONV_ALIGN;

	return a > CONV_ALIGN ? CONV_ALIGN : a;
}

static bd_t b_tensor(const hook_conv_tensor_t *t, int64_t n)
{
	int64_t dims[HOOK_CONV_MAX_DIMS], align = slice_align(t);
	cudnnDataType_t dt = (cudnnDataType_t)t->dtype;
	bd_t d;

	memcpy(dims, t->dims, sizeof(dims));
	if (n > 0)
		dims[0] = n;
	if (!b_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d))
		return NULL;
	if (b_set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt) &&
	    b_set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t->nbdims, dims) &&
	    b_set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t->nbdims, t->strides) &&
	    b_set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t->uid) &&
	    b_set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) && b_fin(d))
		return d;
	b_destroy(d);
	return NULL;
}

/* Attribute names of the three tensors, the descriptor, alpha and beta of
 * an operation type. */
typedef struct {
	cudnnBackendAttributeName_t t[3], conv, alpha, beta;
} op_attrs_t;

static bool op_attrs(int optype, op_attrs_t *a)
{
	switch (optype) {
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
		*a = (op_attrs_t){ { CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y },
				   CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA };
		return true;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
		*a = (op_attrs_t){ { CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY },
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA };
		return true;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
		*a = (op_attrs_t){ { CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
				     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY },
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
				   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA };
		return true;
	default:
		return false;
	}
}

/* An operation graph of one convolution on b images with this beta. */
typedef struct vgraph {
	struct vgraph *next;
	int b;
	double beta;
	bd_t x, w, y, conv, op, graph;
	int64_t engines;     /* ENGINE_GLOBAL_COUNT */
	struct vplan {
		struct vplan *next;
		int64_t engine;
		bd_t eng, cfg, plan;   /* plan NULL: this engine does not finalize */
		uint64_t ws;
		bool deterministic;
	} *plans;
} vgraph_t;

typedef struct vplan vplan_t;

typedef struct {
	hook_conv_geom_t geom;
	vgraph_t *graphs;
} gstate_t;

static void vgraph_destroy(vgraph_t *g)
{
	for (vplan_t *p = g->plans, *n; p; p = n) {
		n = p->next;
		b_destroy(p->plan);
		b_destroy(p->cfg);
		b_destroy(p->eng);
		free(p);
	}
	b_destroy(g->graph);
	b_destroy(g->op);
	b_destroy(g->conv);
	b_destroy(g->x);
	b_destroy(g->w);
	b_destroy(g->y);
	free(g);
}

static vgraph_t *vgraph_build(const hook_conv_geom_t *gm, int b, double beta)
{
	vgraph_t *g = calloc(1, sizeof(*g));
	op_attrs_t a;
	cudnnDataType_t ct = (cudnnDataType_t)gm->comp_type;
	cudnnConvolutionMode_t mode = (cudnnConvolutionMode_t)gm->mode;
	int64_t nsp = gm->nsp;
	cudnnHandle_t h = (cudnnHandle_t)gm->handle;
	float af = (float)gm->alpha, bf = (float)beta;
	const void *alpha = gm->scale_type == CUDNN_TYPE_DOUBLE ? (const void *)&gm->alpha : &af;
	const void *betap = gm->scale_type == CUDNN_TYPE_DOUBLE ? (const void *)&beta : &bf;
	cudnnBackendAttributeType_t st = gm->scale_type == CUDNN_TYPE_DOUBLE ? CUDNN_TYPE_DOUBLE
									   : CUDNN_TYPE_FLOAT;
	int64_t count = 0;

	if (!g || !op_attrs(gm->optype, &a))
		goto fail;
	g->b = b;
	g->beta = beta;
	/* x side and y side are sliced; the filter is whole */
	if (!(g->x = b_tensor(&gm->t[0], b)) || !(g->w = b_tensor(&gm->t[1], 0)) ||
	    !(g->y = b_tensor(&gm->t[2], b)))
		goto fail;
	if (!b_create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &g->conv) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, gm->dil) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, gm->stride) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, gm->pre) ||
	    !b_set(g->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, gm->post) ||
	    !b_fin(g->conv))
		goto fail;
	if (!b_create((cudnnBackendDescriptorType_t)gm->optype, &g->op) ||
	    !b_set(g->op, a.t[0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->x) ||
	    !b_set(g->op, a.t[1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->w) ||
	    !b_set(g->op, a.t[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->y) ||
	    !b_set(g->op, a.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->conv) ||
	    !b_set(g->op, a.alpha, st, 1, alpha) || !b_set(g->op, a.beta, st, 1, betap) ||
	    !b_fin(g->op))
		goto fail;
	if (!b_create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph) ||
	    !b_set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->op) ||
	    !b_set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
	    !b_fin(g->graph))
		goto fail;
	if (!b_get(g->graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1,
		   &count, &g->engines))
		g->engines = 0;
	return g;
fail:
	if (g)
		vgraph_destroy(g);
	return NULL;
}

static bool engine_deterministic(bd_t eng)
{
	cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
	int64_t n = 0;

	if (!b_get(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
		   CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes))
		return true;
	for (int64_t i = 0; i < n; i++)
		if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
			return false;
	return true;
}

/* The plan of engine e on graph g (built once; plan NULL when the engine
 * does not support the graph). */
static vplan_t *vplan_get(vgraph_t *g, const hook_conv_geom_t *gm, int64_t e)
{
	cudnnHandle_t h = (cudnnHandle_t)gm->handle;
	vplan_t *p;
	int64_t n = 0, ws = 0;

	for (p = g->plans; p; p = p->next)
		if (p->engine == e)
			return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->engine = e;
	p->next = g->plans;
	g->plans = p;
	if (!b_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &p->eng) ||
	    !b_set(p->eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		   &g->graph) ||
	    !b_set(p->eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &e) || !b_fin(p->eng))
		goto unsupported;
	if (!b_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &p->cfg) ||
	    !b_set(p->cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->eng) ||
	    !b_fin(p->cfg))
		goto unsupported;
	if (!b_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p->plan) ||
	    !b_set(p->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
	    !b_set(p->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		   &p->cfg) ||
	    !b_fin(p->plan) ||
	    !b_get(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws) ||
	    ws < 0)
		goto unsupported;
	p->ws = (uint64_t)ws;
	p->deterministic = engine_deterministic(p->eng);
	return p;
unsupported:
	b_destroy(p->plan);
	p->plan = NULL;
	return p;
}

static gstate_t *gstate(conv_kernel_t *k, const hook_conv_geom_t *gm)
{
	gstate_t *s = k->gplans;

	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		k->gplans = s;
	}
	/* the latest handle and scales; shapes are the kernel's */
	s->geom = *gm;
	return s;
}

static vgraph_t *vgraph_get(conv_kernel_t *k, const hook_conv_geom_t *gm, int b, double beta)
{
	gstate_t *s = gstate(k, gm);
	vgraph_t *g;

	if (!s)
		return NULL;
	for (g = s->graphs; g; g = g->next)
		if (g->b == b && g->beta == beta)
			return g;
	g = vgraph_build(gm, b, beta);
	if (!g)
		return NULL;
	g->next = s->graphs;
	s->graphs = g;
	return g;
}

/* Executes plan p on slice pointers. */
static cudnnStatus_t vexec(cudnnHandle_t h, const hook_conv_geom_t *gm, const vplan_t *p,
			   void *x, void *w, void *y, void *ws)
{
	int64_t uids[3] = { gm->t[0].uid, gm->t[1].uid, gm->t[2].uid };
	void *ptrs[3] = { x, w, y };
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;
	bd_t vp;

	if (!p->plan || !real_cudnnBackendExecute())
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (!b_create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp))
		return st;
	if (b_set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids) &&
	    b_set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs) &&
	    b_set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws) && b_fin(vp))
		st = real_cudnnBackendExecute()(h, p->plan, vp);
	b_destroy(vp);
	return st;
}

/* ------------------------------------------------------------------ */
/* The kernel of a graph-API convolution                                */

static void graph_shape(const hook_conv_geom_t *g, conv_shape_t *s)
{
	const hook_conv_tensor_t *src[3] = { &g->t[0], &g->t[2], &g->t[1] };
	conv_tensor_t *dst[3] = { &s->x, &s->y, &s->w };

	memset(s, 0, sizeof(*s));
	s->api = 1;
	s->dir = g->optype == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ? CONV_DIR_FWD :
		 g->optype == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
			 ? CONV_DIR_BWD_DATA
			 : CONV_DIR_BWD_FILTER;
	for (int i = 0; i < 3; i++) {
		dst[i]->nbdims = src[i]->nbdims;
		dst[i]->dtype = src[i]->dtype;
		memcpy(dst[i]->dims, src[i]->dims, sizeof(dst[i]->dims));
		memcpy(dst[i]->strides, src[i]->strides, sizeof(dst[i]->strides));
	}
	s->ctype = g->comp_type;
	s->mode = g->mode;
	s->groups = 1;
	s->nsp = g->nsp;
	for (int i = 0; i < g->nsp && i < CONV_MAX_SP; i++) {
		s->pad[i] = g->pre[i];
		s->post[i] = g->post[i];
		s->stride[i] = g->stride[i];
		s->dil[i] = g->dil[i];
	}
}

static cudaStream_t handle_stream(uintptr_t h)
{
	cudaStream_t s = NULL;

	if (h && real_cudnnGetStream() &&
	    real_cudnnGetStream()((cudnnHandle_t)h, &s) != CUDNN_STATUS_SUCCESS)
		s = NULL;
	return s;
}

/* Engines of the full-batch graph with their workspace, in ascending
 * measured time when the benchmark has them, else in index order (for the
 * rescue and the answers). */
static void graph_list(conv_kernel_t *k, const hook_conv_geom_t *gm)
{
	vgraph_t *g;

	if (k->have_list)
		return;
	k->have_list = true;
	k->nlist = 0;
	g = vgraph_get(k, gm, (int)gm->t[0].dims[0], gm->beta);
	if (!g)
		return;
	for (int64_t e = 0; e < g->engines && k->nlist < CONV_MAX_CANDS; e++) {
		vplan_t *p = vplan_get(g, gm, e);
		double t = -1;

		if (!p || !p->plan)
			continue;
		for (int i = 0; i < k->nmeas; i++)
			if (k->meas[i].b == k->batch && k->meas[i].algo == (int)e)
				t = k->meas[i].time;
		k->list[k->nlist++] = (conv_cand_t){ (int)e, true, p->deterministic, p->ws, t };
	}
	/* fastest first where measured (insertion sort: a few entries) */
	for (int i = 1; i < k->nlist; i++)
		for (int j = i; j > 0; j--) {
			conv_cand_t *a = &k->list[j - 1], *b = &k->list[j];

			if (!(b->time >= 0 && (a->time < 0 || b->time < a->time)))
				break;
			conv_cand_t t = *a;

			*a = *b;
			*b = t;
		}
}

typedef cudaError_t (*ev_create_fn)(cudaEvent_t *);
typedef cudaError_t (*ev_record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*ev_sync_fn)(cudaEvent_t);
typedef cudaError_t (*ev_elapsed_fn)(float *, cudaEvent_t, cudaEvent_t);
typedef cudaError_t (*ev_destroy_fn)(cudaEvent_t);

/* Benchmarks k: for every size, every engine that finalizes, is
 * deterministic and fits the cap is timed with events in scratch
 * buffers.  Caller holds conv_lock. */
static void measure_graph(conv_kernel_t *k, const hook_conv_geom_t *gm)
{
	ev_create_fn ecreate = (ev_create_fn)hook_real_load("cudaEventCreate");
	ev_record_fn erecord = (ev_record_fn)hook_real_load("cudaEventRecord");
	ev_sync_fn esync = (ev_sync_fn)hook_real_load("cudaEventSynchronize");
	ev_elapsed_fn elapsed = (ev_elapsed_fn)hook_real_load("cudaEventElapsedTime");
	ev_destroy_fn edestroy = (ev_destroy_fn)hook_real_load("cudaEventDestroy");
	cudaStream_t stream = handle_stream(gm->handle);
	cudnnHandle_t h = (cudnnHandle_t)gm->handle;
	int sizes[4096], ns, bmax, n = 0, cap_rows;
	uint64_t greediest = 0, cap, wsb = 0;
	void *x = NULL, *y = NULL, *w = NULL, *ws = NULL;
	vmem_ref_t refs[4];
	trace_ref_t res[4];
	cudaEvent_t e0 = NULL, e1 = NULL;
	solver_meas_t *m = NULL;
	bool locked = false;

	graph_list(k, gm);
	for (int i = 0; i < k->nlist; i++)
		if (k->list[i].ws > greediest)
			greediest = k->list[i].ws;
	cap = conv_measure_cap(k, greediest);
	if (conv_cache_lookup(k, cap))
		return;
	ns = solver_batch_sizes(conv_mode.mb, k->batch, k->quantum, sizes, 4096);
	if (ns < 1 || ns > 4096 || !ecreate || !erecord || !esync || !elapsed || !edestroy ||
	    ecreate(&e0) != cudaSuccess || ecreate(&e1) != cudaSuccess)
		goto fail;
	/* scratch: as conv_exec.c's, shrinking the workspace, then the size */
	for (bmax = ns - 1; bmax >= 0 && !locked; bmax--) {
		for (wsb = cap;; wsb = wsb > 4 * MiB ? wsb / 2 : 0) {
			x = conv_alloc(conv_extent(&k->shape.x, sizes[bmax]), stream);
			y = conv_alloc(conv_extent(&k->shape.y, sizes[bmax]), stream);
			w = conv_alloc(conv_extent(&k->shape.w, 0), stream);
			ws = wsb ? conv_alloc(wsb, stream) : NULL;
			if (x && y && w && (ws || !wsb)) {
				refs[0] = (vmem_ref_t){ (uintptr_t)x, conv_extent(&k->shape.x, sizes[bmax]),
							VMEM_ACCESS_RW, "x" };
				refs[1] = (vmem_ref_t){ (uintptr_t)y, conv_extent(&k->shape.y, sizes[bmax]),
							VMEM_ACCESS_RW, "y" };
				refs[2] = (vmem_ref_t){ (uintptr_t)w, conv_extent(&k->shape.w, 0),
							VMEM_ACCESS_RW, "w" };
				refs[3] = (vmem_ref_t){ (uintptr_t)ws, wsb,
							VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "ws" };
				if (runtime_prepare(refs, ws ? 4 : 3, stream, res, false) == cudaSuccess) {
					if (!ws)
						memset(&res[3], 0, sizeof(res[3]));
					locked = true;
					break;
				}
			}
			conv_free(x, stream);
			conv_free(y, stream);
			conv_free(w, stream);
			conv_free(ws, stream);
			x = y = w = ws = NULL;
			if (!wsb)
				break;
		}
	}
	if (!locked)
		goto fail;
	bmax++;
	cap_rows = (bmax + 1) * CONV_MAX_CANDS;
	if (!(m = malloc((size_t)cap_rows * sizeof(*m))))
		goto fail;
	for (int i = 0; i <= bmax; i++) {
		vgraph_t *g = vgraph_get(k, gm, sizes[i], gm->beta);

		for (int64_t e = 0; g && e < g->engines && e < CONV_MAX_CANDS; e++) {
			vplan_t *p = vplan_get(g, gm, e);
			float best = -1, ms;

			if (!p || !p->plan || !p->deterministic || p->ws > wsb)
				continue;
			/* one run to warm up, then the best of two */
			if (vexec(h, gm, p, x, w, y, ws) != CUDNN_STATUS_SUCCESS)
				continue;
			for (int r = 0; r < 2; r++) {
				if (erecord(e0, stream) != cudaSuccess ||
				    vexec(h, gm, p, x, w, y, ws) != CUDNN_STATUS_SUCCESS ||
				    erecord(e1, stream) != cudaSuccess || esync(e1) != cudaSuccess ||
				    elapsed(&ms, e0, e1) != cudaSuccess)
					break;
				if (best < 0 || ms < best)
					best = ms;
			}
			if (best > 0 && n < cap_rows)
				m[n++] = (solver_meas_t){ sizes[i], (int)e, best, p->ws };
		}
	}
	runtime_complete(res, 4, stream);
	conv_free(x, stream);
	conv_free(y, stream);
	conv_free(w, stream);
	conv_free(ws, stream);
	edestroy(e0);
	edestroy(e1);
	vmem_debug("conv %s: timed graph-API plans of %d micro-batch sizes up to %d (of %d) "
		   "under %" PRIu64 " MiB: %d results", k->name, bmax + 1, sizes[bmax], k->batch,
		   wsb / MiB, n);
	conv_measured(k, m, n, wsb < cap ? wsb : cap);
	/* the rescue list gains the measured times */
	k->have_list = false;
	graph_list(k, gm);
	return;
fail:
	if (e0)
		edestroy(e0);
	if (e1)
		edestroy(e1);
	free(m);
	conv_note(k, "could not be benchmarked; it runs as the application's plan");
	conv_measured(k, NULL, 0, 0);
}

/* Under conv_lock: the kernel of a graph-API convolution, benchmarked and
 * decided when VMEM_WORKSPACE asks for it. */
static conv_kernel_t *graph_kernel(const hook_conv_geom_t *gm)
{
	conv_shape_t s;
	conv_kernel_t *k;

	graph_shape(gm, &s);
	if (!(k = conv_kernel_get(&s)))
		return NULL;
	if (!conv_mode.ws_on)
		return k;
	if (k->unsplittable) {
		conv_note(k, k->unsplittable);
		return k;
	}
	if (k->meas_state == 0) {
		measure_graph(k, gm);
		conv_decide(k);
	}
	return k;
}

/* ------------------------------------------------------------------ */
/* Hooks' entry points                                                  */

void conv_exec_graph_finalized(hook_bdt_t *t, cudnnBackendDescriptor_t plan)
{
	hook_conv_geom_t gm;

	conv_init();
	if (!conv_mode.ws_on || !hook_bdt_conv_geom(t, (uintptr_t)plan, &gm))
		return;
	pthread_mutex_lock(&conv_lock);
	graph_kernel(&gm);
	pthread_mutex_unlock(&conv_lock);
}

void conv_exec_graph_get(hook_bdt_t *t, cudnnBackendDescriptor_t desc, int attr, int type,
			 int64_t n, void *elems)
{
	hook_conv_geom_t gm;
	conv_kernel_t *k;
	uint64_t budget;

	conv_init();
	if (n < 1 || !elems)
		return;
	runtime_budget_free(&budget, NULL, NULL);
	if (attr == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 &&
	    *(int64_t *)elems >= 0 && (conv_mode.ws_on || budget) &&
	    hook_bdt_conv_geom(t, (uintptr_t)desc, &gm)) {
		uint64_t asked = (uint64_t)*(int64_t *)elems, fitted;

		pthread_mutex_lock(&conv_lock);
		k = graph_kernel(&gm);
		if (k && conv_mode.ws_on && k->have_cfg) {
			/* the application allocates what the configuration needs
			 * of it: WR its largest part's workspace, WD none (vmem's
			 * buffer) */
			*(int64_t *)elems = k->cfg_wd || k->cfg_first ? 0 : (int64_t)k->cfg.ws;
			stats_add(STATS_CONV_ANSWERED, 1);
		} else if (k) {
			/* the plan's workspace cannot sit beside its tensors: the
			 * rescue's plan will run, in what the application makes
			 * of this answer (conv_ws_fitted) */
			if (asked > conv_room(k->tensor_bytes))
				graph_list(k, &gm);
			if ((fitted = conv_ws_fitted(k, asked)) != asked) {
				*(int64_t *)elems = (int64_t)fitted;
				stats_add(STATS_CONV_ANSWERED, 1);
			}
		}
		pthread_mutex_unlock(&conv_lock);
		return;
	}
	if (attr == CUDNN_ATTR_ENGINEHEUR_RESULTS && type == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
	    !conv_mode.ws_on && !conv_mode.pick_app && hook_bdt_conv_geom(t, (uintptr_t)desc, &gm)) {
		/* VMEM_CONV_ALGO over the engine configs the heuristics returned,
		 * in their order (fastest first): the chosen one goes first */
		bd_t *cfgs = elems;
		conv_cand_t cand[CONV_MAX_CANDS];
		conv_shape_t s;
		int m = n < CONV_MAX_CANDS ? (int)n : CONV_MAX_CANDS, pick;
		uint64_t room;

		for (int i = 0; i < m; i++) {
			int64_t ws = 0, cnt = 0;
			bd_t eng = NULL;

			cand[i] = (conv_cand_t){ i, false, true, 0, -1 };
			if (b_get(cfgs[i], CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
				  &cnt, &ws) && ws >= 0) {
				cand[i].ok = true;
				cand[i].ws = (uint64_t)ws;
			}
			if (b_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng)) {
				if (b_get(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
					  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng))
					cand[i].deterministic = engine_deterministic(eng);
				b_destroy(eng);
			}
		}
		graph_shape(&gm, &s);
		pthread_mutex_lock(&conv_lock);
		k = conv_kernel_get(&s);
		room = conv_room(k ? k->tensor_bytes : 0);
		pthread_mutex_unlock(&conv_lock);
		pick = conv_pick(cand, m, conv_mode.pick, room);
		if (pick > 0) {
			bd_t chosen = cfgs[pick];

			memmove(&cfgs[1], &cfgs[0], (size_t)pick * sizeof(*cfgs));
			cfgs[0] = chosen;
		}
		if (pick >= 0)
			stats_add(STATS_CONV_ANSWERED, 1);
	}
}

/* The variant pack's pointers by role. */
static void *ref_of(const hook_bdt_exec_t *ex, const char *a, const char *b)
{
	for (int i = 0; i < ex->nrefs; i++)
		if (strcmp(ex->refs[i].role, a) == 0 || (b && strcmp(ex->refs[i].role, b) == 0))
			return (void *)ex->refs[i].ptr;
	return NULL;
}

/* One slice of a graph-API convolution on vmem's plans (conv_slice_fn). */
typedef struct {
	conv_kernel_t *k;
	const hook_conv_geom_t *gm;
	void *x, *w, *y, *ws;
	uint64_t wsb;
} graph_slice_t;

/* The plan of engine e over b images; beta 1 for a backward-filter slice
 * after the first (it accumulates onto them).  NULL when cuDNN has none. */
static const vplan_t *slice_plan(conv_kernel_t *k, const hook_conv_geom_t *gm, int64_t e,
				 int64_t off, int b)
{
	double beta = k->shape.dir == CONV_DIR_BWD_FILTER && off > 0 ? 1.0 : gm->beta;
	vgraph_t *g = vgraph_get(k, gm, b, beta);
	vplan_t *p = g ? vplan_get(g, gm, e) : NULL;

	return p && p->plan ? p : NULL;
}

static cudnnStatus_t graph_slice(void *ctx, int algo, int64_t off, int b)
{
	const graph_slice_t *a = ctx;
	uint64_t xib = conv_image_bytes(&a->k->shape.x), yib = conv_image_bytes(&a->k->shape.y);
	const vplan_t *p = slice_plan(a->k, a->gm, algo, off, b);

	if (!p || (p->ws && (!a->ws || p->ws > a->wsb)))
		return CUDNN_STATUS_NOT_SUPPORTED;
	return vexec((cudnnHandle_t)a->gm->handle, a->gm, p, (char *)a->x + (uint64_t)off * xib,
		     a->w, (char *)a->y + (uint64_t)off * yib, a->ws);
}

/* Runs cfg along N with vmem's plans, under the call's one preparation.
 * Caller holds conv_lock. */
static cudnnStatus_t graph_run_config(conv_kernel_t *k, const hook_conv_geom_t *gm,
				      const solver_config_t *cfg, void *x, void *w, void *y,
				      void *ws, int *ncalls)
{
	return conv_each_slice(cfg, INT_MAX, graph_slice,
			       &(graph_slice_t){ k, gm, x, w, y, ws, cfg->ws }, ncalls);
}

/* conv_each_slice's check, before a slice runs, that every slice has a
 * plan whose workspace the call's holds (graph_slice's context). */
static cudnnStatus_t plan_fits(void *ctx, int algo, int64_t off, int b)
{
	const graph_slice_t *a = ctx;
	const vplan_t *p = slice_plan(a->k, a->gm, algo, off, b);

	return p && (!p->ws || (a->ws && p->ws <= a->wsb)) ? CUDNN_STATUS_SUCCESS
							    : CUDNN_STATUS_NOT_SUPPORTED;
}

/* A call whose tensors cannot be resident at once, in slices of N with
 * engine list[i] (conv_run_sliced), in vmem's workspace of the size the
 * engine needs for all N; every slice's plan is checked before the first
 * runs, so that nothing fails half way.  Returns false (nothing ran,
 * *own freed) when the engine has no such plan at a slice's size or the
 * slicing or the workspace cannot be had.  Caller holds conv_lock. */
static bool graph_sliced(hook_call_t *c, conv_kernel_t *k, const hook_conv_geom_t *gm, int i,
			 void *x, void *w, void *y, uint64_t budget, uint64_t tensors, void **own,
			 cudnnStatus_t *st, int *ncalls)
{
	cudaStream_t stream = (cudaStream_t)c->stream;
	uint64_t ws = k->list[i].ws;
	solver_config_t whole = { 0.0, ws, 1, { { k->list[i].algo, k->batch, 1 } } };
	graph_slice_t a;
	int most;

	*own = ws ? conv_alloc(ws, stream) : NULL;
	if (ws && !*own)
		return false;
	a = (graph_slice_t){ k, gm, x, w, y, *own, ws };
	most = conv_slice_images(k, c, x, y, *own, ws, tensors + conv_ws_pages(*own, ws), budget);
	if (most <= 0 || conv_each_slice(&whole, most, plan_fits, &a, NULL) != CUDNN_STATUS_SUCCESS) {
		conv_free(*own, stream);
		*own = NULL;
		return false;
	}
	conv_set_ws_ref(c, *own, ws);
	*st = conv_run_sliced(c, k, &whole, most, x, w, y, graph_slice, &a, ncalls);
	return true;
}

cudnnStatus_t conv_exec_graph(hook_call_t *c, hook_bdt_t *t, cudnnHandle_t h,
			      cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vpack,
			      const hook_bdt_exec_t *ex)
{
	cudaStream_t stream = (cudaStream_t)c->stream;
	hook_conv_geom_t gm;
	conv_kernel_t *k = NULL;
	uint64_t budget, tensors, app_ws = 0;
	void *x, *w, *y, *ws, *own = NULL;
	const char *how = "app";
	int ncalls = 1, ran = -1;
	bool have_geom, app_ok = true, done = false, sliced = false;
	cudnnStatus_t st = CONV_OOM;

	conv_init();
	have_geom = ex->kind != VMEM_OP_OTHER && ex->known_plan &&
		    hook_bdt_conv_geom(t, (uintptr_t)plan, &gm);
	if (!have_geom) {
		if (hook_call_prepare(c) == cudaSuccess && real_cudnnBackendExecute())
			st = real_cudnnBackendExecute()(h, plan, vpack);
		hook_call_finish(c);
		return st;
	}
	gm.handle = (uintptr_t)h;   /* plans vmem builds run on the caller's handle */
	c->no_host_stated = true;   /* other engines and slices come before the host's memory */
	x = ref_of(ex, "x", "dx");
	w = ref_of(ex, "w", "dw");
	y = ref_of(ex, "y", "dy");
	ws = ref_of(ex, "ws", NULL);
	runtime_budget_free(&budget, NULL, NULL);
	tensors = conv_call_tensor_pages(c);
	/* the plan's real workspace (the side table holds what was answered) */
	{
		int64_t v = 0, cnt = 0;

		if (b_get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt,
			  &v) && v > 0)
			app_ws = (uint64_t)v;
	}

	/* 1. a µ-cuDNN configuration */
	pthread_mutex_lock(&conv_lock);
	k = graph_kernel(&gm);
	if (k && conv_mode.ws_on) {
		conv_note_call(k);
		app_ok = k->meas_state != 1 || ex->ws_bytes >= app_ws;
		if (k->have_cfg && x && w && y) {
			bool least;
			const solver_config_t *cfg = conv_run_cfg(k, &least);
			void *use = conv_cfg_ws(k, cfg, least, ws, ex->ws_bytes);
			graph_slice_t a;
			int most;

			if (!use && cfg->ws)
				use = own = conv_alloc(cfg->ws, stream);
			a = (graph_slice_t){ k, &gm, x, w, y, use, cfg->ws };
			most = conv_slice_images(k, c, x, y, use, cfg->ws,
						 tensors + conv_ws_pages(use, cfg->ws), budget);
			/* on this API only a call that cannot run whole: the
			 * graph API's slices are vmem's own plans (measured:
			 * slicing calls that fit made dyn runs slower) */
			if ((use || !cfg->ws) && most > 0 &&
			    tensors + conv_ws_pages(use, cfg->ws) > budget &&
			    conv_each_slice(cfg, most, plan_fits, &a, NULL) == CUDNN_STATUS_SUCCESS) {
				/* its tensors cannot be resident at once: slice by slice */
				conv_set_ws_ref(c, use, cfg->ws);
				done = sliced = true;
				how = "sliced";
				ran = cfg->runs[0].algo;
				st = conv_run_sliced(c, k, cfg, most, x, w, y, graph_slice, &a, &ncalls);
			} else if ((use || !cfg->ws) &&
			    (!budget || tensors + conv_ws_pages(use, cfg->ws) <= budget)) {
				conv_set_ws_ref(c, use, cfg->ws);
				if (hook_call_prepare(c) == cudaSuccess) {
					done = true;
					how = least ? "least" : k->cfg_wd ? "wd" :
					      k->cfg_first ? "wd-first" : "wr";
					ran = cfg->runs[0].algo;
					st = graph_run_config(k, &gm, cfg, x, w, y, use, &ncalls);
					if (st == CUDNN_STATUS_SUCCESS) {
						stats_add(STATS_CONV_MICRO, 1);
						stats_add(STATS_CONV_MICRO_CALLS, (uint64_t)ncalls);
						stats_add(STATS_CONV_MODEL_NS, (uint64_t)(cfg->time * 1e6));
					} else if (ncalls == 0) {
						vmem_warn("conv %s: a micro-batch plan failed (cuDNN status "
							  "%d); running the application's plans from now on",
							  k->name, (int)st);
						k->have_cfg = false;
						/* prepared (with vmem's workspace, not the
						 * application's): the application's plan runs
						 * only when it needs no workspace, and the call
						 * is not prepared again below */
						done = true;
						if (!app_ws) {
							st = real_cudnnBackendExecute()(h, plan, vpack);
							how = "app";
						} else {
							how = "failed";
							vmem_error("conv %s: the micro-batch plan failed (cuDNN "
								   "status %d) and the application's plan needs "
								   "its workspace, which this call did not make "
								   "resident; the call fails - later calls run "
								   "the application's plans", k->name, (int)st);
						}
					}
				}
			}
			if (!done) {
				conv_free(own, stream);
				own = NULL;
			}
		}
	}
	/* vmem told the application a smaller workspace than its plan needs
	 * (conv_ws_fitted): the plan cannot run in what it allocated */
	if (k && k->ws_lowered && ex->ws_bytes < app_ws)
		app_ok = false;
	pthread_mutex_unlock(&conv_lock);
	if (done)
		goto out;
	/* 2. slice by slice when the tensors alone fill the budget: the
	 *    application's plan is for all N, so vmem's plans of the fastest
	 *    engine whose workspace leaves 3/4 of the budget (the legacy
	 *    hook runs the application's algorithm so, conv_exec.c, from
	 *    3/4 of the budget on; here a call that fits runs whole) */
	if (budget && k && x && w && y && k->batch > 1 && tensors >= budget &&
	    hook_split_slices(tensors + conv_ws_pages(ws, app_ws), budget, 2) > 1) {
		pthread_mutex_lock(&conv_lock);
		graph_list(k, &gm);
		for (int attempt = 0; attempt < 2 && !sliced; attempt++) {
			int i = conv_pick(k->list, k->nlist, attempt ? CONV_PICK_MEM : CONV_PICK_FIT,
					  budget / 4);

			if (i >= 0 && graph_sliced(c, k, &gm, i, x, w, y, budget, tensors, &own, &st,
						   &ncalls)) {
				sliced = true;
				how = "sliced";
				ran = k->list[i].algo;
			}
		}
		pthread_mutex_unlock(&conv_lock);
		if (sliced)
			goto out;
	}
	/* 3. the application's plan, when its workspace fits beside the tensors */
	if (app_ok && !(budget && app_ws && tensors + conv_ws_pages(ws, app_ws) > budget)) {
		if (hook_call_prepare(c) == cudaSuccess) {
			st = real_cudnnBackendExecute()(h, plan, vpack);
			goto out;
		}
		if (!app_ws)
			goto out;
	}
	/* 4. a plan of the fastest engine whose workspace fits, in vmem's memory */
	how = "rescue";
	if (!k || !x || !w || !y)
		goto out;
	pthread_mutex_lock(&conv_lock);
	graph_list(k, &gm);
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t room = conv_room(tensors);
		int i;
		vgraph_t *g;
		vplan_t *p;
		void *use;

		/* within what the application was told (conv_ws_fitted) */
		if (k->ws_lowered && ex->ws_bytes < room)
			room = ex->ws_bytes;
		i = conv_pick(k->list, k->nlist, attempt ? CONV_PICK_MEM : CONV_PICK_FIT, room);

		if (i < 0 || (attempt && k->list[i].ws))
			break;
		g = vgraph_get(k, &gm, k->batch, gm.beta);
		p = g ? vplan_get(g, &gm, k->list[i].algo) : NULL;
		if (!p || !p->plan)
			break;
		if (p->ws && ws && ex->ws_bytes >= p->ws)
			use = ws;   /* the application's holds it (sized for it where vmem
				       answered the size query: conv_ws_fitted) */
		else
			use = own = p->ws ? conv_alloc(p->ws, stream) : NULL;
		if (p->ws && !use)
			continue;
		conv_set_ws_ref(c, use, p->ws);
		if (hook_call_prepare(c) == cudaSuccess) {
			ran = (int)p->engine;
			st = vexec(h, &gm, p, x, w, y, use);
			stats_add(STATS_CONV_RESCUED, 1);
			break;
		}
		conv_free(own, stream);
		own = NULL;
		if (!p->ws)
			break;
	}
	pthread_mutex_unlock(&conv_lock);
out:
	/* 5. nothing ran and nothing fits: the application's plan whole (or,
	 *    when vmem's answers left it short of its workspace, vmem's plan of
	 *    the least-workspace engine that needs none), its pages past the
	 *    budget mapped from the host */
	if (st == CONV_OOM && (!done || (sliced && !ncalls)) && !hook_call_is_prepared() &&
	    runtime_host_mapping()) {
		vplan_t *p = NULL;

		conv_free(own, stream);
		own = NULL;
		/* vmem's plan is held under conv_lock, as step 4 runs it; the
		 * application's runs without it, as step 3 does (p set: the
		 * lock is held) */
		if (!app_ok && k && x && w && y) {
			pthread_mutex_lock(&conv_lock);
			graph_list(k, &gm);
			int i = conv_pick(k->list, k->nlist, CONV_PICK_MEM, 0);
			vgraph_t *g = i >= 0 && !k->list[i].ws ? vgraph_get(k, &gm, k->batch, gm.beta)
							      : NULL;
			p = g ? vplan_get(g, &gm, k->list[i].algo) : NULL;
			if (!p || !p->plan || p->ws) {
				pthread_mutex_unlock(&conv_lock);
				p = NULL;
			}
		}
		if (app_ok || p) {
			sliced = false;
			ncalls = 1;
			conv_set_ws_ref(c, app_ok ? ws : NULL, app_ok ? app_ws : 0);
			c->no_host_stated = false;
			how = "host";
			ran = app_ok ? -1 : (int)p->engine;
			if (hook_call_prepare(c) == cudaSuccess)
				st = app_ok ? real_cudnnBackendExecute()(h, plan, vpack)
					    : vexec(h, &gm, p, x, w, y, NULL);
			if (p)
				pthread_mutex_unlock(&conv_lock);
		}
	}
	return conv_call_done(c, k, sliced, how, "ran_engine", ran, ncalls, own, st);
}
