/* tests/minitrain/conv.c - convolution algorithm choice and execution, the
 * way a framework does it.
 *
 * Legacy API: cudnnGetConvolution*Algorithm_v7 (--algo-mode get),
 * cudnnFindConvolution*Algorithm (find) or cudnnFindConvolution*AlgorithmEx
 * (find-ex: PyTorch's benchmark mode, on scratch buffers of the layer's
 * shape and the largest workspace that can be allocated, all freed again),
 * the first result whose status is success, then cudnnGet*WorkspaceSize; the caller allocates the workspace
 * in its allocation style and runs.  Graph API (--conv-api graph): backend
 * descriptors as PyTorch builds them (tensors with uids 'x', 'y', 'w' whose
 * roles follow the operation, a convolution descriptor, the operation, an
 * operation graph, engine heuristics, an engine config, an execution plan
 * with its workspace size), executed with a variant pack.  Choices and plans
 * are cached per layer shape (as PyTorch's benchmark cache and plan cache),
 * so identical layers share them.
 */
#include <stdlib.h>
#include <string.h>

#include "mt.h"

typedef struct {
	/* key */
	mt_conv_kind_t kind;
	int n, c, h, k, r, stride, pad, beta1;
	/* value */
	int algo;
	size_t ws;
	cudnnBackendDescriptor_t plan, keep[8];
	int nkeep;
} mt_conv_entry_t;

static cudnnHandle_t g_h;
static mt_conv_api_t g_api;
static mt_algo_mode_t g_mode;
static mt_conv_entry_t *g_cache;
static int g_n, g_cap;

void mt_conv_init(cudnnHandle_t h, mt_conv_api_t api, mt_algo_mode_t mode)
{
	g_h = h;
	g_api = api;
	g_mode = mode;
}

#define BK_SET(d, attr, type, count, ptr) \
	CUDNN_CHECK(cudnnBackendSetAttribute((d), (attr), (type), (count), (ptr)))

static cudnnBackendDescriptor_t bk_create(cudnnBackendDescriptorType_t t)
{
	cudnnBackendDescriptor_t d;

	CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d));
	return d;
}

static cudnnBackendDescriptor_t bk_tensor(int64_t uid, int n, int c, int h, int w)
{
	cudnnBackendDescriptor_t d = bk_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
	cudnnDataType_t dt = CUDNN_DATA_FLOAT;
	int64_t dims[4] = { n, c, h, w };
	int64_t str[4] = { (int64_t)c * h * w, (int64_t)h * w, w, 1 };
	int64_t align = 16;

	BK_SET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
	BK_SET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
	BK_SET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
	BK_SET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	BK_SET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	CUDNN_CHECK(cudnnBackendFinalize(d));
	return d;
}

/* Builds, finalizes and returns an execution plan for `e`; its helper
 * descriptors are kept in e->keep (a plan may refer to them). */
/* False when the engine of `cfg` carries the NONDETERMINISTIC numerical
 * note; true when it does not or the note cannot be read. */
static bool cfg_deterministic(cudnnBackendDescriptor_t cfg)
{
	cudnnBackendDescriptor_t eng = bk_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
	cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
	int64_t n = 0, one = 0;
	bool det = true;

	if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
				     1, &one, &eng) == CUDNN_STATUS_SUCCESS &&
	    cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
				     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
		for (int64_t i = 0; i < n; i++)
			det &= notes[i] != CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
	cudnnBackendDestroyDescriptor(eng);
	return det;
}

static void graph_plan(mt_conv_entry_t *e, const mt_node_t *nd)
{
	int ho = nd->h;
	cudnnBackendDescriptor_t x, y, w, cv, op, g, heur;
	cudnnDataType_t ct = CUDNN_DATA_FLOAT;
	cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
	int64_t sd = 2, dil[2] = { 1, 1 }, st[2] = { e->stride, e->stride };
	int64_t pad[2] = { e->pad, e->pad };
	float alpha = 1.0f, beta = e->beta1 ? 1.0f : 0.0f;
	cudnnBackendDescriptorType_t optype;
	cudnnBackendAttributeName_t ax, aw, ay, aconv, aalpha, abeta;

	/* PyTorch's uids: 'x' the input side, 'y' the output side, 'w' the
	 * filter side, whatever the direction (DESIGN.md). */
	x = bk_tensor('x', e->n, e->c, e->h, e->h);
	y = bk_tensor('y', e->n, e->k, ho, ho);
	w = bk_tensor('w', e->k, e->c, e->r, e->r);
	cv = bk_create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, st);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
	BK_SET(cv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
	CUDNN_CHECK(cudnnBackendFinalize(cv));

	switch (e->kind) {
	case MT_FWD:
		optype = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
		ax = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
		aw = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
		ay = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
		aconv = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
		aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA;
		abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
		break;
	case MT_BWD_DATA:
		optype = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
		ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
		aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
		ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
		aconv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
		aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
		abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
		break;
	default:
		optype = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
		ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
		aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
		ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
		aconv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
		aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
		abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
		break;
	}
	op = bk_create(optype);
	BK_SET(op, ax, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	BK_SET(op, aw, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
	BK_SET(op, ay, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	BK_SET(op, aconv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cv);
	BK_SET(op, aalpha, CUDNN_TYPE_FLOAT, 1, &alpha);
	BK_SET(op, abeta, CUDNN_TYPE_FLOAT, 1, &beta);
	CUDNN_CHECK(cudnnBackendFinalize(op));

	g = bk_create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
	BK_SET(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
	BK_SET(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_h);
	CUDNN_CHECK(cudnnBackendFinalize(g));

	heur = bk_create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
	cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_INSTANT;
	BK_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
	BK_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
	CUDNN_CHECK(cudnnBackendFinalize(heur));

	int64_t count = 0;
	CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
					     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
	if (count <= 0)
		mt_die("cuDNN engine heuristics returned no engine config for conv %s", nd->name);
	cudnnBackendDescriptor_t *cfg = calloc(count, sizeof(*cfg));
	for (int64_t i = 0; i < count; i++)
		cfg[i] = bk_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
	int64_t got = 0;
	CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
					     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfg));
	e->plan = NULL;
	int chosen = -1;
	/* Two passes: deterministic engines first (a real GPU's atomics make
	 * the others differ run to run, and minitrain is an oracle), then any. */
	for (int64_t k = 0; k < 2 * got && !e->plan; k++) {
		int64_t i = k % got;

		if ((k < got) != cfg_deterministic(cfg[i]))
			continue;
		cudnnBackendDescriptor_t p = bk_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);

		BK_SET(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_h);
		BK_SET(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
		if (cudnnBackendFinalize(p) == CUDNN_STATUS_SUCCESS) {
			e->plan = p;
			chosen = (int)i;
		} else {
			cudnnBackendDestroyDescriptor(p);
		}
	}
	if (!e->plan)
		mt_die("no cuDNN execution plan finalizes for conv %s (%d engine configs tried)",
		       nd->name, (int)got);
	int64_t ws = 0, one = 0;
	CUDNN_CHECK(cudnnBackendGetAttribute(e->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
					     CUDNN_TYPE_INT64, 1, &one, &ws));
	e->ws = (size_t)ws;
	e->algo = chosen;
	for (int64_t i = 0; i < count; i++)
		if (i != chosen)
			cudnnBackendDestroyDescriptor(cfg[i]);
	cudnnBackendDescriptor_t keep[] = { x, y, w, cv, op, g, heur, cfg[chosen] };
	memcpy(e->keep, keep, sizeof(keep));
	e->nkeep = 8;
	free(cfg);
}

static const mt_node_t *input_of(const mt_net_t *net, const mt_node_t *nd)
{
	return &net->nodes[nd->in[0]];
}

/* The first algorithm that works, preferring deterministic ones (as
 * PyTorch's cudnn.deterministic): on a real GPU the others use atomics and
 * two identical runs would not give the same weights. */
#define PICK_FIRST(perf, n, out_algo) do { \
	int i_, any_ = -1; \
	for (i_ = 0; i_ < (n); i_++) { \
		if ((perf)[i_].status != CUDNN_STATUS_SUCCESS) \
			continue; \
		if (any_ < 0) \
			any_ = i_; \
		if ((perf)[i_].determinism == CUDNN_DETERMINISTIC) \
			break; \
	} \
	if (i_ == (n)) \
		i_ = any_; \
	if (i_ < 0) \
		mt_die("no convolution algorithm succeeds for layer %s", nd->name); \
	(out_algo) = (int)(perf)[i_].algo; \
} while (0)

/* find-ex: scratch tensors of the layer's shape (their contents do not
 * matter: every algorithm overwrites the output) and a workspace as large
 * as the largest algorithm wants, or none when that cannot be had. */
typedef struct {
	void *x, *w, *y, *ws;
	size_t ws_bytes;
} find_ex_bufs_t;

static void find_ex_get(find_ex_bufs_t *f, const mt_node_t *in, const mt_node_t *nd,
			int batch, size_t ws_max)
{
	size_t xs = (size_t)in->c * in->h * in->w, ys = (size_t)nd->c * nd->h * nd->w;

	f->x = mt_malloc(xs * (size_t)batch * sizeof(float));
	f->w = mt_malloc((size_t)nd->c * in->c * nd->k * nd->k * sizeof(float));
	f->y = mt_malloc(ys * (size_t)batch * sizeof(float));
	f->ws = ws_max ? mt_try_malloc(ws_max) : NULL;
	f->ws_bytes = f->ws ? ws_max : 0;
}

static void find_ex_put(find_ex_bufs_t *f)
{
	mt_free(f->ws);
	mt_free(f->y);
	mt_free(f->w);
	mt_free(f->x);
}

static void legacy_choose(mt_conv_entry_t *e, const mt_net_t *net, const mt_node_t *nd)
{
	const mt_node_t *in = input_of(net, nd);
	int n = 0, got = 0;
	size_t ws = 0;
	find_ex_bufs_t f = { 0 };

	if (g_mode == MT_ALGO_FIND_EX)
		find_ex_get(&f, in, nd, e->n, mt_conv_workspace_max(net, nd, e->kind, e->n));
	switch (e->kind) {
	case MT_FWD: {
		CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionFwdAlgoPerf_t perf[n];
		if (g_mode == MT_ALGO_GET)
			CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g_h, in->ydesc, nd->wdesc,
				nd->convdesc, nd->ydesc, n, &got, perf));
		else if (g_mode == MT_ALGO_FIND)
			CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g_h, in->ydesc, nd->wdesc,
				nd->convdesc, nd->ydesc, n, &got, perf));
		else
			CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(g_h, in->ydesc, f.x,
				nd->wdesc, f.w, nd->convdesc, nd->ydesc, f.y, n, &got, perf,
				f.ws, f.ws_bytes));
		PICK_FIRST(perf, got, e->algo);
		CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(g_h, in->ydesc, nd->wdesc,
			nd->convdesc, nd->ydesc, (cudnnConvolutionFwdAlgo_t)e->algo, &ws));
		break;
	}
	case MT_BWD_DATA: {
		CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionBwdDataAlgoPerf_t perf[n];
		if (g_mode == MT_ALGO_GET)
			CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g_h, nd->wdesc, nd->ydesc,
				nd->convdesc, in->ydesc, n, &got, perf));
		else if (g_mode == MT_ALGO_FIND)
			CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(g_h, nd->wdesc, nd->ydesc,
				nd->convdesc, in->ydesc, n, &got, perf));
		else
			CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(g_h, nd->wdesc, f.w,
				nd->ydesc, f.y, nd->convdesc, in->ydesc, f.x, n, &got, perf,
				f.ws, f.ws_bytes));
		PICK_FIRST(perf, got, e->algo);
		CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(g_h, nd->wdesc, nd->ydesc,
			nd->convdesc, in->ydesc, (cudnnConvolutionBwdDataAlgo_t)e->algo, &ws));
		break;
	}
	default: {
		CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionBwdFilterAlgoPerf_t perf[n];
		if (g_mode == MT_ALGO_GET)
			CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g_h, in->ydesc, nd->ydesc,
				nd->convdesc, nd->wdesc, n, &got, perf));
		else if (g_mode == MT_ALGO_FIND)
			CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(g_h, in->ydesc, nd->ydesc,
				nd->convdesc, nd->wdesc, n, &got, perf));
		else
			CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(g_h, in->ydesc, f.x,
				nd->ydesc, f.y, nd->convdesc, nd->wdesc, f.w, n, &got, perf,
				f.ws, f.ws_bytes));
		PICK_FIRST(perf, got, e->algo);
		CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(g_h, in->ydesc, nd->ydesc,
			nd->convdesc, nd->wdesc, (cudnnConvolutionBwdFilterAlgo_t)e->algo, &ws));
		break;
	}
	}
	if (g_mode == MT_ALGO_FIND_EX)
		find_ex_put(&f);
	e->ws = ws;
}

static mt_conv_entry_t *lookup(const mt_net_t *net, const mt_node_t *nd,
			       mt_conv_kind_t kind, int batch, float beta)
{
	const mt_node_t *in = input_of(net, nd);
	mt_conv_entry_t key = {
		.kind = kind, .n = batch, .c = in->c, .h = in->h, .k = nd->c,
		.r = nd->k, .stride = nd->stride, .pad = nd->pad,
		/* beta is an attribute of a graph operation, not of a legacy call */
		.beta1 = g_api == MT_CONV_GRAPH && beta != 0.0f,
	};

	for (int i = 0; i < g_n; i++) {
		mt_conv_entry_t *e = &g_cache[i];

		if (e->kind == key.kind && e->n == key.n && e->c == key.c &&
		    e->h == key.h && e->k == key.k && e->r == key.r &&
		    e->stride == key.stride && e->pad == key.pad && e->beta1 == key.beta1)
			return e;
	}
	if (g_n == g_cap) {
		g_cap = g_cap ? 2 * g_cap : 64;
		g_cache = realloc(g_cache, g_cap * sizeof(*g_cache));
		if (!g_cache)
			mt_die("host out of memory");
	}
	mt_conv_entry_t *e = &g_cache[g_n];
	*e = key;
	if (g_api == MT_CONV_GRAPH)
		graph_plan(e, nd);
	else
		legacy_choose(e, net, nd);
	g_n++;
	return e;
}

size_t mt_conv_workspace(const mt_net_t *net, const mt_node_t *nd,
			 mt_conv_kind_t kind, int batch, float beta)
{
	return lookup(net, nd, kind, batch, beta)->ws;
}

size_t mt_conv_workspace_max(const mt_net_t *net, const mt_node_t *nd,
			     mt_conv_kind_t kind, int batch)
{
	const mt_node_t *in = input_of(net, nd);
	size_t best = 0;
	int n = 0, got = 0;

	(void)batch;
	switch (kind) {
	case MT_FWD: {
		CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionFwdAlgoPerf_t perf[n];
		CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g_h, in->ydesc, nd->wdesc,
			nd->convdesc, nd->ydesc, n, &got, perf));
		for (int i = 0; i < got; i++)
			if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory > best)
				best = perf[i].memory;
		break;
	}
	case MT_BWD_DATA: {
		CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionBwdDataAlgoPerf_t perf[n];
		CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g_h, nd->wdesc, nd->ydesc,
			nd->convdesc, in->ydesc, n, &got, perf));
		for (int i = 0; i < got; i++)
			if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory > best)
				best = perf[i].memory;
		break;
	}
	default: {
		CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(g_h, &n));
		cudnnConvolutionBwdFilterAlgoPerf_t perf[n];
		CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g_h, in->ydesc, nd->ydesc,
			nd->convdesc, nd->wdesc, n, &got, perf));
		for (int i = 0; i < got; i++)
			if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory > best)
				best = perf[i].memory;
		break;
	}
	}
	return best;
}

void mt_conv_run(const mt_net_t *net, const mt_node_t *nd, mt_conv_kind_t kind,
		 int batch, float beta, const void *a, const void *b, void *out,
		 void *ws, size_t ws_bytes)
{
	const mt_node_t *in = input_of(net, nd);
	mt_conv_entry_t *e = lookup(net, nd, kind, batch, beta);
	const float one = 1.0f, zero = 0.0f;

	if (g_api == MT_CONV_GRAPH) {
		/* variant pack: data pointers by uid x, y, w (DESIGN.md roles) */
		int64_t uids[3] = { 'x', 'y', 'w' };
		void *ptrs[3];
		cudnnBackendDescriptor_t vp = bk_create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);

		if (kind == MT_FWD) {          /* a=x b=w out=y */
			ptrs[0] = (void *)a; ptrs[1] = out; ptrs[2] = (void *)b;
		} else if (kind == MT_BWD_DATA) { /* a=w b=dy out=dx */
			ptrs[0] = out; ptrs[1] = (void *)b; ptrs[2] = (void *)a;
		} else {                        /* a=x b=dy out=dw */
			ptrs[0] = (void *)a; ptrs[1] = (void *)b; ptrs[2] = out;
		}
		BK_SET(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
		BK_SET(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
		BK_SET(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
		CUDNN_CHECK(cudnnBackendFinalize(vp));
		CUDNN_CHECK(cudnnBackendExecute(g_h, e->plan, vp));
		CUDNN_CHECK(cudnnBackendDestroyDescriptor(vp));
		return;
	}
	switch (kind) {
	case MT_FWD:
		CUDNN_CHECK(cudnnConvolutionForward(g_h, &one, in->ydesc, a, nd->wdesc, b,
			nd->convdesc, (cudnnConvolutionFwdAlgo_t)e->algo, ws, ws_bytes,
			&zero, nd->ydesc, out));
		break;
	case MT_BWD_DATA:
		CUDNN_CHECK(cudnnConvolutionBackwardData(g_h, &one, nd->wdesc, a, nd->ydesc, b,
			nd->convdesc, (cudnnConvolutionBwdDataAlgo_t)e->algo, ws, ws_bytes,
			&beta, in->ydesc, out));
		break;
	default:
		CUDNN_CHECK(cudnnConvolutionBackwardFilter(g_h, &one, in->ydesc, a, nd->ydesc, b,
			nd->convdesc, (cudnnConvolutionBwdFilterAlgo_t)e->algo, ws, ws_bytes,
			&zero, nd->wdesc, out));
		break;
	}
}

void mt_conv_fini(void)
{
	for (int i = 0; i < g_n; i++) {
		if (g_cache[i].plan)
			cudnnBackendDestroyDescriptor(g_cache[i].plan);
		for (int k = g_cache[i].nkeep - 1; k >= 0; k--)
			cudnnBackendDestroyDescriptor(g_cache[i].keep[k]);
	}
	free(g_cache);
	g_cache = NULL;
	g_n = g_cap = 0;
}
