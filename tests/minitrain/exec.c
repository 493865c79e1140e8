/* tests/minitrain/exec.c - forward, backward and SGD update, with the
 * memory behaviour of each allocation style.
 *
 * Schedule positions: node j's forward runs at position j, its backward at
 * 2N-1-j.  From the graph we know, for every output buffer, its last read
 * (liveness, SuperNeurons §3.2 style): per-tensor and caching free a feature
 * map right after it, and a gradient map right after its producer's
 * backward read it; weight gradients live from their layer's backward to
 * the update.  network allocates everything once (vDNN §II-C, Fig. 2):
 * one buffer per feature map, gradient maps sharing buffers whose lifetimes
 * do not overlap (dX/dY reuse: a chain needs two), one workspace sized to
 * the largest need.  The first consumer in backward order writes a
 * gradient (beta 0), later ones accumulate (beta 1).
 *
 * --threads 2 runs each backward pass on a second host thread while the
 * first waits, as PyTorch does (forward and the optimizer step on the
 * Python thread, backward on the autograd engine's device thread), on the
 * same stream and handles: the calls and their order are those of one
 * thread, only the calling thread changes.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

extern const char mt_ptx[];
extern const unsigned long mt_ptx_size;

#define BN_EPS 1e-5
#define BN_FACTOR 0.1

static struct {
	mt_net_t *net;
	const mt_opts_t *o;
	int N;
	cudnnHandle_t dnn;
	cublasHandle_t blas;
	cublasLtHandle_t lt;        /* --fc-api lt */
	void *lt_ws;                /* its workspace (PyTorch: 1 MiB) */
	cudaStream_t st;
	cudnnActivationDescriptor_t act;
	cudaLibrary_t lib;
	cudaKernel_t k_sgd, k_xent, k_copy, k_slice, k_foreach_add;
	int batch;                  /* descriptors are set for this batch */
	int plan_batch;             /* network style: allocated for (0: none) */
	/* liveness */
	int *last_tr, *last_ev;     /* per buffer owner */
	int *head_tr, *head_ev, *next_tr, *next_ev;
	int *first_writer;          /* per node: consumer writing its gradient first */
	/* network style */
	void *ws;
	size_t ws_size;
	void **gbuf;
	int ngbuf;
	/* per-iteration */
	int *labels;
	float *sample_loss, *dlogits_eval;
	float *h_in, *h_loss;
	int *h_labels;
	size_t h_in_cap;
	size_t live_base;           /* bytes held between passes (parameters) */
} X;

#define ND(j) (&X.net->nodes[(j)])
#define NETWORK (X.o->alloc == MT_ALLOC_NETWORK)

static int bwd_pos(int j)
{
	return 2 * X.N - 1 - j;
}

static size_t fmap_bytes(const mt_node_t *nd, int batch)
{
	return (size_t)batch * nd->c * nd->h * nd->w * sizeof(float);
}

/* ---- kernels */
/* kernels.cu's foreach add (--optim foreach), by its mangled name */
#define FOREACH_ADD_NAME "_ZN2at6native25multi_tensor_apply_kernelINS0_18TensorListMetadata" \
	"ILi2ELb0EEENS0_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEENSt9enable_if" \
	"IXntsrT0_20use_large_kernel_argEvE4typeET_S9_DpT1_"

static void load_kernels(void)
{
	CUDA_CHECK(cudaLibraryLoadData(&X.lib, mt_ptx, NULL, NULL, 0, NULL, NULL, 0));
	CUDA_CHECK(cudaLibraryGetKernel(&X.k_sgd, X.lib, "mt_sgd_momentum"));
	CUDA_CHECK(cudaLibraryGetKernel(&X.k_xent, X.lib, "mt_xent_grad"));
	CUDA_CHECK(cudaLibraryGetKernel(&X.k_copy, X.lib, "mt_channel_copy"));
	CUDA_CHECK(cudaLibraryGetKernel(&X.k_slice, X.lib, "mt_channel_slice"));
	if (X.o->optim == MT_OPTIM_FOREACH)
		CUDA_CHECK(cudaLibraryGetKernel(&X.k_foreach_add, X.lib, FOREACH_ADD_NAME));
}

/* ---- PyTorch's foreach SGD (--optim foreach).  kernels.cu's
 * at::native::multi_tensor_apply_kernel takes PyTorch's
 * TensorListMetadata<2> by value; the host side fills it as
 * MultiTensorApply.cuh's multi_tensor_apply does: tensors in slots (64 at
 * most), blocks of 65536 elements (320 at most), a launch whenever either
 * fills, the slot of a tensor split across launches carried over, the
 * other slots left as they were. */
enum { FE_TENSORS = 64, FE_BLOCKS = 320, FE_CHUNK = 65536 };
typedef struct {
	const void *addresses[2][FE_TENSORS];
	long long numel_for_tensor[FE_TENSORS];
	unsigned char block_to_tensor[FE_BLOCKS];
	int block_to_chunk[FE_BLOCKS];
	int start_tensor_this_launch;
} foreach_meta_t;   /* sizeof: 3144, as PyTorch's */

static void foreach_launch(foreach_meta_t *m, int nblocks, float alpha)
{
	unsigned char functor = 0, plus = 0;
	void *args[] = { m, &functor, &plus, &alpha };

	CUDA_CHECK(cudaLaunchKernel((const void *)X.k_foreach_add, (dim3){ (unsigned)nblocks, 1, 1 },
				    (dim3){ 512, 1, 1 }, args, 0, X.st));
}

/* a[k] += alpha * b[k] for every trainable parameter k; which(pa, 0/1)
 * names the tensors of the two lists. */
static void foreach_add(float *(*which)(mt_param_t *, int), float alpha)
{
	static foreach_meta_t m;
	int slot = 0, blk = 0;

	memset(&m, 0, sizeof(m));
	for (int p = 0; p < X.net->nparams; p++) {
		mt_param_t *pa = &X.net->params[p];
		long long n = (long long)pa->count, chunks = (n + FE_CHUNK - 1) / FE_CHUNK;

		if (!pa->trainable || n == 0)
			continue;
		m.addresses[0][slot] = which(pa, 0);
		m.addresses[1][slot] = which(pa, 1);
		m.numel_for_tensor[slot] = n;
		slot++;
		for (long long c = 0; c < chunks; c++) {
			m.block_to_tensor[blk] = (unsigned char)(slot - 1);
			m.block_to_chunk[blk] = (int)c;
			blk++;
			if (!(slot == FE_TENSORS && c == chunks - 1) && blk != FE_BLOCKS)
				continue;
			foreach_launch(&m, blk, alpha);
			blk = 0;
			if (c == chunks - 1) {
				slot = 0;
			} else {
				m.numel_for_tensor[0] = m.numel_for_tensor[slot - 1];
				m.addresses[0][0] = m.addresses[0][slot - 1];
				m.addresses[1][0] = m.addresses[1][slot - 1];
				slot = 1;
			}
		}
	}
	if (blk)
		foreach_launch(&m, blk, alpha);
}

static float *grad_and_weight(mt_param_t *pa, int list) { return list ? pa->w : pa->dw; }
static float *momentum_twice(mt_param_t *pa, int list) { (void)list; return pa->v; }
static float *momentum_and_grad(mt_param_t *pa, int list) { return list ? pa->dw : pa->v; }
static float *weight_and_momentum(mt_param_t *pa, int list) { return list ? pa->v : pa->w; }

/* SGD with momentum and weight decay in _foreach_add_ steps: g += wd*w;
 * v += (m-1)*v (v = m*v, in an add's terms); v += g; w += -lr*v. */
static void sgd_foreach(float lr, float mom, float wd)
{
	if (wd != 0.0f)
		foreach_add(grad_and_weight, wd);
	foreach_add(momentum_twice, mom - 1.0f);
	foreach_add(momentum_and_grad, 1.0f);
	foreach_add(weight_and_momentum, -lr);
}

static void launch(cudaKernel_t k, size_t threads, void **args)
{
	size_t blocks = (threads + 255) / 256;
	dim3 grid, block;

	if (blocks == 0)
		blocks = 1;
	if (blocks > 65535u * 16)
		blocks = 65535u * 16;   /* grid-stride loops cover the rest */
	grid.x = (unsigned)blocks;
	grid.y = grid.z = 1;
	block.x = 256;
	block.y = block.z = 1;
	CUDA_CHECK(cudaLaunchKernel((const void *)k, grid, block, args, 0, X.st));
}

/* ---- liveness (batch independent) */
static void touch(int *last, int node, int pos)
{
	int o = ND(node)->buf;

	if (last[o] < pos)
		last[o] = pos;
}

static void liveness(void)
{
	int N = X.N;

	X.last_tr = malloc(N * sizeof(int));
	X.last_ev = malloc(N * sizeof(int));
	X.first_writer = malloc(N * sizeof(int));
	X.head_tr = malloc(2 * N * sizeof(int));
	X.head_ev = malloc(2 * N * sizeof(int));
	X.next_tr = malloc(N * sizeof(int));
	X.next_ev = malloc(N * sizeof(int));
	for (int j = 0; j < N; j++) {
		X.last_tr[j] = X.last_ev[j] = -1;
		X.first_writer[j] = -1;
	}
	for (int j = 0; j < N; j++) {
		const mt_node_t *nd = ND(j);

		touch(X.last_tr, j, j);
		touch(X.last_ev, j, j);
		for (int i = 0; i < nd->nin; i++) {
			touch(X.last_tr, nd->in[i], j);
			touch(X.last_ev, nd->in[i], j);
			if (X.first_writer[nd->in[i]] < j)
				X.first_writer[nd->in[i]] = j;
			if (ND(nd->in[i])->op == MT_INPUT && nd->op != MT_CONV)
				mt_die("internal: only convolutions may read the input (%s)", nd->name);
		}
		int b = bwd_pos(j);
		switch (nd->op) {
		case MT_CONV: case MT_FC: case MT_BN:
			touch(X.last_tr, nd->in[0], b);
			break;
		case MT_RELU:
			touch(X.last_tr, j, b);
			touch(X.last_tr, nd->in[0], b);
			break;
		case MT_MAXPOOL: case MT_AVGPOOL:
			touch(X.last_tr, j, b);
			touch(X.last_tr, nd->in[0], b);
			break;
		default:
			break;
		}
	}
	for (int p = 0; p < 2 * N; p++)
		X.head_tr[p] = X.head_ev[p] = -1;
	for (int j = 0; j < N; j++) {
		if (ND(j)->buf != j)
			continue;
		X.next_tr[j] = X.head_tr[X.last_tr[j]];
		X.head_tr[X.last_tr[j]] = j;
		X.next_ev[j] = X.head_ev[X.last_ev[j]];
		X.head_ev[X.last_ev[j]] = j;
	}
}

/* Gradient of node t lives from its first write to its producer's backward. */
static bool has_grad(int t)
{
	return ND(t)->op != MT_INPUT && ND(t)->op != MT_LOSS && X.first_writer[t] >= 0;
}

static int grad_start(int t)
{
	int w = X.first_writer[t];

	return ND(w)->op == MT_LOSS ? w : bwd_pos(w);
}

static float grad_beta(int t, int writer)
{
	return X.first_writer[t] == writer ? 0.0f : 1.0f;
}

/* ---- descriptors */
static void descriptors_create(void)
{
	for (int j = 0; j < X.N; j++) {
		mt_node_t *nd = ND(j);

		CUDNN_CHECK(cudnnCreateTensorDescriptor(&nd->ydesc));
		CUDNN_CHECK(cudnnCreateTensorDescriptor(&nd->pdesc));
		CUDNN_CHECK(cudnnSetTensor4dDescriptor(nd->pdesc, CUDNN_TENSOR_NCHW,
			CUDNN_DATA_FLOAT, 1, nd->c, 1, 1));
		if (nd->op == MT_CONV) {
			const mt_node_t *in = ND(nd->in[0]);

			CUDNN_CHECK(cudnnCreateFilterDescriptor(&nd->wdesc));
			CUDNN_CHECK(cudnnSetFilter4dDescriptor(nd->wdesc, CUDNN_DATA_FLOAT,
				CUDNN_TENSOR_NCHW, nd->c, in->c, nd->k, nd->k));
			CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&nd->convdesc));
			CUDNN_CHECK(cudnnSetConvolution2dDescriptor(nd->convdesc, nd->pad, nd->pad,
				nd->stride, nd->stride, 1, 1, CUDNN_CROSS_CORRELATION,
				CUDNN_DATA_FLOAT));
		}
		if (nd->op == MT_MAXPOOL || nd->op == MT_AVGPOOL) {
			CUDNN_CHECK(cudnnCreatePoolingDescriptor(&nd->pooldesc));
			CUDNN_CHECK(cudnnSetPooling2dDescriptor(nd->pooldesc,
				nd->op == MT_MAXPOOL ? CUDNN_POOLING_MAX :
				CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
				CUDNN_NOT_PROPAGATE_NAN, nd->k, nd->k, nd->pad, nd->pad,
				nd->stride, nd->stride));
		}
	}
	CUDNN_CHECK(cudnnCreateActivationDescriptor(&X.act));
	CUDNN_CHECK(cudnnSetActivationDescriptor(X.act, CUDNN_ACTIVATION_RELU,
		CUDNN_NOT_PROPAGATE_NAN, 0.0));
}

static void descriptors_batch(int batch)
{
	for (int j = 0; j < X.N; j++) {
		mt_node_t *nd = ND(j);

		CUDNN_CHECK(cudnnSetTensor4dDescriptor(nd->ydesc, CUDNN_TENSOR_NCHW,
			CUDNN_DATA_FLOAT, batch, nd->c, nd->h, nd->w));
	}
	X.batch = batch;
}

static void descriptors_destroy(void)
{
	for (int j = 0; j < X.N; j++) {
		mt_node_t *nd = ND(j);

		cudnnDestroyTensorDescriptor(nd->ydesc);
		cudnnDestroyTensorDescriptor(nd->pdesc);
		if (nd->wdesc)
			cudnnDestroyFilterDescriptor(nd->wdesc);
		if (nd->convdesc)
			cudnnDestroyConvolutionDescriptor(nd->convdesc);
		if (nd->pooldesc)
			cudnnDestroyPoolingDescriptor(nd->pooldesc);
	}
	cudnnDestroyActivationDescriptor(X.act);
}

/* ---- workspace need per conv call (chooses algorithms / plans) */
static size_t conv_ws(int j, bool train, size_t *maxalgo)
{
	const mt_node_t *nd = ND(j);
	size_t ws = mt_conv_workspace(X.net, nd, MT_FWD, X.batch, 0.0f);

	if (maxalgo)
		*maxalgo = mt_conv_workspace_max(X.net, nd, MT_FWD, X.batch);
	if (!train)
		return ws;
	size_t f = mt_conv_workspace(X.net, nd, MT_BWD_FILTER, X.batch, 0.0f);
	if (f > ws)
		ws = f;
	if (maxalgo) {
		size_t m = mt_conv_workspace_max(X.net, nd, MT_BWD_FILTER, X.batch);
		if (m > *maxalgo)
			*maxalgo = m;
	}
	if (ND(nd->in[0])->op != MT_INPUT) {
		size_t d = mt_conv_workspace(X.net, nd, MT_BWD_DATA, X.batch,
					     grad_beta(nd->in[0], j));
		if (d > ws)
			ws = d;
		if (maxalgo) {
			size_t m = mt_conv_workspace_max(X.net, nd, MT_BWD_DATA, X.batch);
			if (m > *maxalgo)
				*maxalgo = m;
		}
	}
	return ws;
}

/* ---- the network-wide plan: sizes (report) and allocations (network style) */
typedef struct {
	size_t size;
	int busy_until;
} gb_t;

static void plan(bool alloc, mt_mem_report_t *rep)
{
	int N = X.N, batch = X.batch;
	mt_mem_report_t r;
	int *assign = malloc(N * sizeof(int)), *order = malloc(N * sizeof(int));
	gb_t *gb = calloc(N, sizeof(gb_t));
	int ngb = 0, no = 0;

	memset(&r, 0, sizeof(r));
	for (int p = 0; p < X.net->nparams; p++) {
		double b = (double)X.net->params[p].count * sizeof(float);

		r.weights += b;
		if (X.net->params[p].trainable) {
			r.wgrads += b;
			r.momentum += b;
		}
	}
	for (int j = 0; j < N; j++) {
		mt_node_t *nd = ND(j);

		if (nd->buf == j) {
			r.fmaps += fmap_bytes(nd, batch);
			if (alloc)
				nd->y = mt_malloc(fmap_bytes(nd, batch));
		}
		if (nd->op == MT_BN) {
			r.other += 2.0 * nd->c * sizeof(float);
			if (alloc) {
				nd->bn_mean = mt_malloc(nd->c * sizeof(float));
				nd->bn_invvar = mt_malloc(nd->c * sizeof(float));
			}
		}
		if (nd->op == MT_CONV) {
			size_t m = 0, w = conv_ws(j, true, rep ? &m : NULL);

			if (w > r.workspace)
				r.workspace = w;
			if (m > r.workspace_max)
				r.workspace_max = m;
		}
		if (has_grad(j))
			order[no++] = j;
	}
	/* gradient maps: greedy interval assignment by start position */
	for (int a = 1; a < no; a++)
		for (int b = a; b > 0 && grad_start(order[b]) < grad_start(order[b - 1]); b--) {
			int t = order[b];

			order[b] = order[b - 1];
			order[b - 1] = t;
		}
	for (int a = 0; a < no; a++) {
		int t = order[a], best = -1;
		size_t need = fmap_bytes(ND(t), batch);

		for (int g = 0; g < ngb; g++) {
			if (gb[g].busy_until >= grad_start(t))
				continue;
			if (best < 0)
				best = g;
			else if (gb[best].size < need ? gb[g].size > gb[best].size :
				 (gb[g].size >= need && gb[g].size < gb[best].size))
				best = g;
		}
		if (best < 0)
			best = ngb++;
		if (gb[best].size < need)
			gb[best].size = need;
		gb[best].busy_until = bwd_pos(t);
		assign[t] = best;
	}
	for (int g = 0; g < ngb; g++)
		r.gmaps += gb[g].size;
	r.other += (double)batch * (sizeof(int) + sizeof(float));
	if (alloc) {
		X.ngbuf = ngb;
		X.gbuf = calloc(ngb ? ngb : 1, sizeof(void *));
		for (int g = 0; g < ngb; g++)
			X.gbuf[g] = mt_malloc(gb[g].size);
		for (int a = 0; a < no; a++)
			ND(order[a])->dy = X.gbuf[assign[order[a]]];
		X.ws_size = (size_t)r.workspace;
		X.ws = X.ws_size ? mt_malloc(X.ws_size) : NULL;
		for (int p = 0; p < X.net->nparams; p++)
			if (X.net->params[p].trainable && !X.net->params[p].dw)
				X.net->params[p].dw = mt_malloc(X.net->params[p].count * sizeof(float));
		X.labels = mt_malloc(batch * sizeof(int));
		X.sample_loss = mt_malloc(batch * sizeof(float));
		X.plan_batch = batch;
	}
	if (rep)
		*rep = r;
	free(assign);
	free(order);
	free(gb);
}

static void unplan(void)
{
	for (int j = 0; j < X.N; j++) {
		mt_node_t *nd = ND(j);

		if (nd->buf == j)
			mt_free(nd->y);
		nd->y = nd->dy = NULL;
		mt_free(nd->bn_mean);
		mt_free(nd->bn_invvar);
		nd->bn_mean = nd->bn_invvar = NULL;
	}
	for (int g = 0; g < X.ngbuf; g++)
		mt_free(X.gbuf[g]);
	free(X.gbuf);
	X.gbuf = NULL;
	X.ngbuf = 0;
	mt_free(X.ws);
	X.ws = NULL;
	mt_free(X.labels);
	mt_free(X.sample_loss);
	X.labels = NULL;
	X.sample_loss = NULL;
	X.plan_batch = 0;
}

/* ---- per-tensor / caching acquisition (no-ops under network) */
static void act_get(int j)
{
	mt_node_t *nd = ND(j);

	if (nd->buf != j)
		nd->y = ND(nd->buf)->y;
	else if (!NETWORK)
		nd->y = mt_malloc(fmap_bytes(nd, X.batch));
}

static void release_acts(const int *head, const int *next, int pos)
{
	if (NETWORK)
		return;
	for (int o = head[pos]; o >= 0; o = next[o]) {
		mt_free(ND(o)->y);
		ND(o)->y = NULL;
	}
}

static float grad_begin(int t, int writer)
{
	float beta = grad_beta(t, writer);

	if (beta == 0.0f && !NETWORK)
		ND(t)->dy = mt_malloc(fmap_bytes(ND(t), X.batch));
	return beta;
}

static void grad_release(int t)
{
	if (!NETWORK && has_grad(t)) {
		mt_free(ND(t)->dy);
		ND(t)->dy = NULL;
	}
}

static float *param_grad(int p)
{
	mt_param_t *pa = &X.net->params[p];

	if (!pa->dw)
		pa->dw = mt_malloc(pa->count * sizeof(float));
	return pa->dw;
}

static void *ws_get(size_t bytes)
{
	if (!bytes)
		return NULL;
	if (NETWORK) {
		if (bytes > X.ws_size)
			mt_die("internal: workspace %zu bytes over the planned %zu", bytes, X.ws_size);
		return X.ws;
	}
	return mt_malloc(bytes);
}

static void ws_put(void *p)
{
	if (!NETWORK)
		mt_free(p);
}

/* ---- forward / backward of one node */
static const float ONE = 1.0f, ZERO = 0.0f;

#define LT_WORKSPACE ((size_t)1 << 20)

/* D (m x n, ld ldd) = op(A) op(B) + beta D with an epilogue, through
 * cuBLASLt as PyTorch's gemm_and_bias does it: descriptors made per call,
 * the heuristic's best algorithm within the workspace. */
static void lt_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		    const float *a, int lda, const float *b, int ldb, float beta, float *d,
		    int ldd, cublasLtEpilogue_t epi, void *bias)
{
	cublasLtMatmulDesc_t md;
	cublasLtMatrixLayout_t la, lb, ld_;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res;
	uint64_t wsmax = LT_WORKSPACE;
	int got = 0;

	CUBLAS_CHECK(cublasLtMatmulDescCreate(&md, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	if (bias)
		CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
							    &bias, sizeof(bias)));
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k,
						ta == CUBLAS_OP_N ? k : m, lda));
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb == CUBLAS_OP_N ? k : n,
						tb == CUBLAS_OP_N ? n : k, ldb));
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld_, CUDA_R_32F, m, n, ldd));
	CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
	CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref,
		CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof(wsmax)));
	CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(X.lt, md, la, lb, ld_, ld_, pref, 1, &res,
						    &got));
	if (got < 1)
		mt_die("cublasLtMatmulAlgoGetHeuristic found no algorithm for %dx%dx%d", m, n, k);
	CUBLAS_CHECK(cublasLtMatmul(X.lt, md, &ONE, a, la, b, lb, &beta, d, ld_, d, ld_,
				    &res.algo, X.lt_ws, LT_WORKSPACE, X.st));
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(ld_);
	cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(la);
	cublasLtMatmulDescDestroy(md);
}

static void forward(int j, bool train)
{
	mt_node_t *nd = ND(j);
	mt_node_t *in = nd->nin ? ND(nd->in[0]) : NULL;
	float *P = NULL;
	int n = X.batch;

	if (nd->np)
		P = X.net->params[nd->p0].w;
	switch (nd->op) {
	case MT_INPUT:
		break;
	case MT_CONV: {
		size_t wb = mt_conv_workspace(X.net, nd, MT_FWD, n, 0.0f);
		void *ws = ws_get(wb);

		act_get(j);
		mt_conv_run(X.net, nd, MT_FWD, n, 0.0f, in->y, P, nd->y, ws, wb);
		ws_put(ws);
		if (nd->np == 2)
			CUDNN_CHECK(cudnnAddTensor(X.dnn, &ONE, nd->pdesc,
				X.net->params[nd->p0 + 1].w, &ONE, nd->ydesc, nd->y));
		break;
	}
	case MT_RELU:
		act_get(j);
		CUDNN_CHECK(cudnnActivationForward(X.dnn, X.act, &ONE, in->ydesc, in->y,
						   &ZERO, nd->ydesc, nd->y));
		break;
	case MT_MAXPOOL: case MT_AVGPOOL:
		act_get(j);
		CUDNN_CHECK(cudnnPoolingForward(X.dnn, nd->pooldesc, &ONE, in->ydesc, in->y,
						&ZERO, nd->ydesc, nd->y));
		break;
	case MT_BN: {
		mt_param_t *pp = &X.net->params[nd->p0];

		act_get(j);
		if (!train) {
			CUDNN_CHECK(cudnnBatchNormalizationForwardInference(X.dnn,
				CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, in->ydesc, in->y,
				nd->ydesc, nd->y, nd->pdesc, pp[0].w, pp[1].w, pp[2].w,
				pp[3].w, BN_EPS));
			break;
		}
		if (!NETWORK) {
			nd->bn_mean = mt_malloc(nd->c * sizeof(float));
			nd->bn_invvar = mt_malloc(nd->c * sizeof(float));
		}
		CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(X.dnn,
			CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, in->ydesc, in->y,
			nd->ydesc, nd->y, nd->pdesc, pp[0].w, pp[1].w, BN_FACTOR,
			pp[2].w, pp[3].w, BN_EPS, nd->bn_mean, nd->bn_invvar));
		break;
	}
	case MT_FC: {
		int inf = in->c * in->h * in->w, out = nd->c;

		act_get(j);
		/* row-major Y[n][out] = X[n][in] * W[out][in]^T, in cuBLAS's
		 * column-major terms Y^T = W * X^T with W stored (in x out). */
		if (X.o->fc_api == MT_FC_LT) {
			/* one call with the bias epilogue, as PyTorch's Linear */
			lt_gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, n, inf, P, inf, in->y, inf,
				0.0f, nd->y, out, CUBLASLT_EPILOGUE_BIAS,
				X.net->params[nd->p0 + 1].w);
			break;
		}
		CUBLAS_CHECK(cublasSgemm(X.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, inf,
			&ONE, P, inf, in->y, inf, &ZERO, nd->y, out));
		CUDNN_CHECK(cudnnAddTensor(X.dnn, &ONE, nd->pdesc,
			X.net->params[nd->p0 + 1].w, &ONE, nd->ydesc, nd->y));
		break;
	}
	case MT_ADD: {
		const mt_node_t *b = ND(nd->in[1]);

		act_get(j);
		if (nd->y != in->y)
			CUDA_CHECK(cudaMemcpyAsync(nd->y, in->y, fmap_bytes(nd, n),
						   cudaMemcpyDeviceToDevice, X.st));
		CUDNN_CHECK(cudnnAddTensor(X.dnn, &ONE, b->ydesc, b->y, &ONE,
					   nd->ydesc, nd->y));
		break;
	}
	case MT_CONCAT: {
		int off = 0, hw = nd->h * nd->w, acc = 0;

		act_get(j);
		for (int i = 0; i < nd->nin; i++) {
			mt_node_t *s = ND(nd->in[i]);
			int cs = s->c;
			void *args[] = { &nd->y, &s->y, &n, &cs, &nd->c, &off, &hw, &acc };

			launch(X.k_copy, (size_t)n * cs * hw, args);
			off += cs;
		}
		break;
	}
	case MT_LOSS: {
		float *dl, scale = 1.0f / n;
		int classes = nd->c;

		act_get(j);
		CUDNN_CHECK(cudnnSoftmaxForward(X.dnn, CUDNN_SOFTMAX_ACCURATE,
			CUDNN_SOFTMAX_MODE_INSTANCE, &ONE, in->ydesc, in->y, &ZERO,
			nd->ydesc, nd->y));
		if (train) {
			grad_begin(nd->in[0], j);
			dl = in->dy;
		} else {
			dl = NETWORK ? in->dy : mt_malloc(fmap_bytes(nd, n));
		}
		void *args[] = { &nd->y, &X.labels, &dl, &X.sample_loss, &n, &classes, &scale };
		launch(X.k_xent, (size_t)n * classes, args);
		if (!train && !NETWORK)
			mt_free(dl);
		break;
	}
	}
}

static void backward(int j)
{
	mt_node_t *nd = ND(j);
	mt_node_t *in = nd->nin ? ND(nd->in[0]) : NULL;
	int n = X.batch;
	float beta;

	switch (nd->op) {
	case MT_INPUT: case MT_LOSS:
		break;
	case MT_CONV: {
		mt_param_t *pw = &X.net->params[nd->p0];
		size_t wb = mt_conv_workspace(X.net, nd, MT_BWD_FILTER, n, 0.0f);
		void *ws = ws_get(wb);

		mt_conv_run(X.net, nd, MT_BWD_FILTER, n, 0.0f, in->y, nd->dy,
			    param_grad(nd->p0), ws, wb);
		ws_put(ws);
		if (nd->np == 2)
			CUDNN_CHECK(cudnnConvolutionBackwardBias(X.dnn, &ONE, nd->ydesc, nd->dy,
				&ZERO, nd->pdesc, param_grad(nd->p0 + 1)));
		if (in->op == MT_INPUT)
			break;
		beta = grad_begin(nd->in[0], j);
		wb = mt_conv_workspace(X.net, nd, MT_BWD_DATA, n, beta);
		ws = ws_get(wb);
		mt_conv_run(X.net, nd, MT_BWD_DATA, n, beta, pw->w, nd->dy, in->dy, ws, wb);
		ws_put(ws);
		break;
	}
	case MT_RELU:
		beta = grad_begin(nd->in[0], j);
		/* in place: y stands for x (relu'(x) = relu'(y)) */
		CUDNN_CHECK(cudnnActivationBackward(X.dnn, X.act, &ONE, nd->ydesc, nd->y,
			nd->ydesc, nd->dy, in->ydesc, nd->buf == in->buf ? nd->y : in->y,
			&beta, in->ydesc, in->dy));
		break;
	case MT_MAXPOOL: case MT_AVGPOOL:
		beta = grad_begin(nd->in[0], j);
		CUDNN_CHECK(cudnnPoolingBackward(X.dnn, nd->pooldesc, &ONE, nd->ydesc, nd->y,
			nd->ydesc, nd->dy, in->ydesc, in->y, &beta, in->ydesc, in->dy));
		break;
	case MT_BN: {
		mt_param_t *pp = &X.net->params[nd->p0];
		float *ds = param_grad(nd->p0), *db = param_grad(nd->p0 + 1);

		beta = grad_begin(nd->in[0], j);
		CUDNN_CHECK(cudnnBatchNormalizationBackward(X.dnn, CUDNN_BATCHNORM_SPATIAL,
			&ONE, &beta, &ONE, &ZERO, in->ydesc, in->y, nd->ydesc, nd->dy,
			in->ydesc, in->dy, nd->pdesc, pp[0].w, ds, db, BN_EPS,
			nd->bn_mean, nd->bn_invvar));
		if (!NETWORK) {
			mt_free(nd->bn_mean);
			mt_free(nd->bn_invvar);
			nd->bn_mean = nd->bn_invvar = NULL;
		}
		break;
	}
	case MT_FC: {
		int inf = in->c * in->h * in->w, out = nd->c;
		float *W = X.net->params[nd->p0].w;

		/* dW (in x out, column-major) = X^T * dY */
		if (X.o->fc_api == MT_FC_LT) {
			/* the bias gradient (sum of dY over the batch) from the
			 * same call: the BGRADB epilogue writes it */
			lt_gemm(CUBLAS_OP_N, CUBLAS_OP_T, inf, out, n, in->y, inf, nd->dy,
				out, 0.0f, param_grad(nd->p0), inf, CUBLASLT_EPILOGUE_BGRADB,
				param_grad(nd->p0 + 1));
		} else {
			CUBLAS_CHECK(cublasSgemm(X.blas, CUBLAS_OP_N, CUBLAS_OP_T, inf, out, n,
				&ONE, in->y, inf, nd->dy, out, &ZERO, param_grad(nd->p0), inf));
			CUDNN_CHECK(cudnnConvolutionBackwardBias(X.dnn, &ONE, nd->ydesc, nd->dy,
				&ZERO, nd->pdesc, param_grad(nd->p0 + 1)));
		}
		if (in->op == MT_INPUT)
			break;
		beta = grad_begin(nd->in[0], j);
		if (X.o->fc_api == MT_FC_LT)
			lt_gemm(CUBLAS_OP_N, CUBLAS_OP_N, inf, n, out, W, inf, nd->dy, out,
				beta, in->dy, inf, CUBLASLT_EPILOGUE_DEFAULT, NULL);
		else
			CUBLAS_CHECK(cublasSgemm(X.blas, CUBLAS_OP_N, CUBLAS_OP_N, inf, n, out,
				&ONE, W, inf, nd->dy, out, &beta, in->dy, inf));
		break;
	}
	case MT_ADD:
		for (int i = 0; i < nd->nin; i++) {
			mt_node_t *s = ND(nd->in[i]);

			beta = grad_begin(nd->in[i], j);
			if (beta == 0.0f)
				CUDA_CHECK(cudaMemcpyAsync(s->dy, nd->dy, fmap_bytes(nd, n),
							   cudaMemcpyDeviceToDevice, X.st));
			else
				CUDNN_CHECK(cudnnAddTensor(X.dnn, &ONE, nd->ydesc, nd->dy, &ONE,
							   s->ydesc, s->dy));
		}
		break;
	case MT_CONCAT: {
		int off = 0, hw = nd->h * nd->w;

		for (int i = 0; i < nd->nin; i++) {
			mt_node_t *s = ND(nd->in[i]);
			int cs = s->c, acc;

			acc = grad_begin(nd->in[i], j) != 0.0f;
			void *args[] = { &s->dy, &nd->dy, &n, &cs, &nd->c, &off, &hw, &acc };
			launch(X.k_slice, (size_t)n * cs * hw, args);
			off += cs;
		}
		break;
	}
	}
}

/* ---- synthetic data: a fixed data set of `dataset` samples; sample s has
 * label hash(seed, s) % classes and pixels = 0.5 * class pattern (8x8-pixel
 * blocks of +-1 chosen by hash(label, channel, block)) + 0.5 * noise, so the
 * label is learnable from the input and runs are reproducible. */
static void make_batch(int iter_base, int batch, int dataset)
{
	const mt_node_t *in = ND(0);
	size_t per = (size_t)in->c * in->h * in->w, total = per * batch;
	uint64_t seed = X.o->seed;

	if (total > X.h_in_cap) {
		free(X.h_in);
		X.h_in = malloc(total * sizeof(float));
		X.h_in_cap = total;
	}
	X.h_labels = realloc(X.h_labels, batch * sizeof(int));
	X.h_loss = realloc(X.h_loss, batch * sizeof(float));
	if (!X.h_in || !X.h_labels || !X.h_loss)
		mt_die("host out of memory for the input batch");
	for (int b = 0; b < batch; b++) {
		uint64_t s = (uint64_t)(iter_base + b) % (uint64_t)dataset;
		int label = (int)(mt_mix(seed * 0x100000001b3ull + s) % (uint64_t)X.net->classes);
		float *px = X.h_in + (size_t)b * per;

		X.h_labels[b] = label;
		for (int c = 0; c < in->c; c++)
			for (int y = 0; y < in->h; y++) {
				mt_rng_t r = { mt_mix(seed ^ (s << 20) ^ ((uint64_t)c << 16) ^ (uint64_t)y) };

				for (int x = 0; x < in->w; x++) {
					uint64_t t = mt_mix(seed + ((uint64_t)label << 32) +
							    ((uint64_t)c << 24) +
							    ((uint64_t)(y / 8) << 12) + (uint64_t)(x / 8));
					float pat = (t & 1) ? 1.0f : -1.0f;
					float noise = (float)(2.0 * mt_rng_uniform(&r) - 1.0);

					*px++ = 0.5f * pat + 0.5f * noise;
				}
			}
	}
}

/* ---- one pass */
static void setup_batch(int batch)
{
	if (batch != X.batch)
		descriptors_batch(batch);
	if (NETWORK && X.plan_batch != batch) {
		if (X.plan_batch)
			unplan();
		plan(true, NULL);
	}
}

/* ---- the backward thread (--threads 2): one job at a time, the caller
 * waits for it, so the passes stay in the order one thread would run them */
static struct {
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool started, job, quit;
} BT = { .m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void backward_pass(void)
{
	for (int j = X.N - 1; j >= 0; j--) {
		backward(j);
		grad_release(j);
		release_acts(X.head_tr, X.next_tr, bwd_pos(j));
	}
}

static void *backward_thread(void *arg)
{
	(void)arg;
	CUDA_CHECK(cudaSetDevice(0));
	pthread_mutex_lock(&BT.m);
	for (;;) {
		while (!BT.job && !BT.quit)
			pthread_cond_wait(&BT.cv, &BT.m);
		if (BT.quit)
			break;
		pthread_mutex_unlock(&BT.m);
		backward_pass();
		pthread_mutex_lock(&BT.m);
		BT.job = false;
		pthread_cond_broadcast(&BT.cv);
	}
	pthread_mutex_unlock(&BT.m);
	return NULL;
}

static void run_backward(void)
{
	if (X.o->threads < 2) {
		backward_pass();
		return;
	}
	pthread_mutex_lock(&BT.m);
	if (!BT.started) {
		if (pthread_create(&BT.t, NULL, backward_thread, NULL))
			mt_die("cannot start the backward thread");
		BT.started = true;
	}
	BT.job = true;
	pthread_cond_broadcast(&BT.cv);
	while (BT.job)
		pthread_cond_wait(&BT.cv, &BT.m);
	pthread_mutex_unlock(&BT.m);
}

static void stop_backward_thread(void)
{
	if (!BT.started)
		return;
	pthread_mutex_lock(&BT.m);
	BT.quit = true;
	pthread_cond_broadcast(&BT.cv);
	pthread_mutex_unlock(&BT.m);
	pthread_join(BT.t, NULL);
	BT.started = false;
	BT.quit = false;
}

static double run_pass(bool train, int iter_base, int dataset, float *ms)
{
	int n = X.batch, N = X.N;
	cudaEvent_t e0, e1;

	make_batch(iter_base, n, dataset);
	CUDA_CHECK(cudaEventCreate(&e0));
	CUDA_CHECK(cudaEventCreate(&e1));
	CUDA_CHECK(cudaEventRecord(e0, X.st));
	if (!NETWORK) {
		X.labels = mt_malloc(n * sizeof(int));
		X.sample_loss = mt_malloc(n * sizeof(float));
	}
	act_get(0);
	CUDA_CHECK(cudaMemcpyAsync(ND(0)->y, X.h_in, fmap_bytes(ND(0), n),
				   cudaMemcpyHostToDevice, X.st));
	CUDA_CHECK(cudaMemcpyAsync(X.labels, X.h_labels, n * sizeof(int),
				   cudaMemcpyHostToDevice, X.st));
	for (int j = 0; j < N; j++) {
		forward(j, train);
		release_acts(train ? X.head_tr : X.head_ev, train ? X.next_tr : X.next_ev, j);
	}
	if (train) {
		run_backward();
		float lr = X.o->lr, mom = X.o->momentum, wd = X.o->weight_decay;

		if (X.o->optim == MT_OPTIM_FOREACH)
			sgd_foreach(lr, mom, wd);
		for (int p = 0; p < X.net->nparams; p++) {
			mt_param_t *pa = &X.net->params[p];
			unsigned long long cnt = pa->count;

			if (!pa->trainable)
				continue;
			if (X.o->optim == MT_OPTIM_FUSED) {
				void *args[] = { &pa->w, &pa->v, &pa->dw, &lr, &mom, &wd, &cnt };

				launch(X.k_sgd, pa->count, args);
			}
			if (!NETWORK) {
				mt_free(pa->dw);
				pa->dw = NULL;
			}
		}
	}
	/* under SIMGPU_DRYRUN the copy copies nothing: print zeros */
	memset(X.h_loss, 0, n * sizeof(float));
	CUDA_CHECK(cudaMemcpyAsync(X.h_loss, X.sample_loss, n * sizeof(float),
				   cudaMemcpyDeviceToHost, X.st));
	CUDA_CHECK(cudaEventRecord(e1, X.st));
	CUDA_CHECK(cudaEventSynchronize(e1));
	CUDA_CHECK(cudaEventElapsedTime(ms, e0, e1));
	CUDA_CHECK(cudaEventDestroy(e0));
	CUDA_CHECK(cudaEventDestroy(e1));
	if (!NETWORK) {
		mt_free(X.labels);
		mt_free(X.sample_loss);
		X.labels = NULL;
		X.sample_loss = NULL;
	}
	/* per-tensor / caching: every tensor of the pass has been freed */
	if (!NETWORK && X.live_base != mt_alloc_live())
		mt_die("internal: %zu bytes still held after a pass (expected %zu)",
		       mt_alloc_live(), X.live_base);
	/* deterministic host reduction in sample order */
	double sum = 0;
	for (int b = 0; b < n; b++)
		sum += X.h_loss[b];
	return sum / n;
}

/* ---- parameters */
static void init_params(void)
{
	for (int p = 0; p < X.net->nparams; p++) {
		mt_param_t *pa = &X.net->params[p];
		float *h = malloc(pa->count * sizeof(float));
		mt_rng_t r = { mt_mix(X.o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)p) };

		if (!h)
			mt_die("host out of memory for weights (%zu floats)", pa->count);
		if (pa->fan_in) {
			/* He (Kaiming) uniform, PyTorch's default family:
			 * U(-b, b), b = sqrt(6 / fan_in), variance 2 / fan_in.
			 * Uniform, not normal: VGG-416 has 430 M weights. */
			double b = sqrt(6.0 / pa->fan_in);

			for (size_t i = 0; i < pa->count; i++)
				h[i] = (float)(b * (2.0 * mt_rng_uniform(&r) - 1.0));
		} else {
			for (size_t i = 0; i < pa->count; i++)
				h[i] = pa->init;
		}
		pa->w = mt_malloc(pa->count * sizeof(float));
		CUDA_CHECK(cudaMemcpy(pa->w, h, pa->count * sizeof(float), cudaMemcpyHostToDevice));
		if (pa->trainable) {
			pa->v = mt_malloc(pa->count * sizeof(float));
			CUDA_CHECK(cudaMemsetAsync(pa->v, 0, pa->count * sizeof(float), X.st));
		}
		free(h);
	}
}

static uint64_t checksum(void)
{
	uint64_t h = MT_FNV_INIT;

	CUDA_CHECK(cudaStreamSynchronize(X.st));
	for (int p = 0; p < X.net->nparams; p++) {
		mt_param_t *pa = &X.net->params[p];
		float *buf = calloc(pa->count, sizeof(float));

		if (!buf)
			mt_die("host out of memory for the checksum");
		CUDA_CHECK(cudaMemcpy(buf, pa->w, pa->count * sizeof(float), cudaMemcpyDeviceToHost));
		h = mt_fnv1a(h, buf, pa->count * sizeof(float));
		free(buf);
	}
	return h;
}

static void mem_report(void)
{
	mt_mem_report_t r;
	const double MiB = 1024.0 * 1024.0;

	plan(false, &r);
	double total = r.weights + r.wgrads + r.momentum + r.fmaps + r.gmaps +
		       r.workspace + r.other;
	printf("memory report: %s batch %d image %d (network-wide allocation, %s conv API, algo %s)\n",
	       X.net->name, X.batch, X.net->image,
	       X.o->conv_api == MT_CONV_GRAPH ? "graph" : "legacy",
	       X.o->algo_mode == MT_ALGO_FIND_EX ? "find-ex" :
	       X.o->algo_mode == MT_ALGO_FIND ? "find" : "get");
	printf("  %-34s %12.1f MiB\n", "feature maps (X/Y, in-place relu)", r.fmaps / MiB);
	printf("  %-34s %12.1f MiB\n", "gradient maps (dX/dY reuse)", r.gmaps / MiB);
	printf("  %-34s %12.1f MiB\n", "weights (incl. bn statistics)", r.weights / MiB);
	printf("  %-34s %12.1f MiB\n", "weight gradients", r.wgrads / MiB);
	printf("  %-34s %12.1f MiB\n", "momentum", r.momentum / MiB);
	printf("  %-34s %12.1f MiB\n", "workspace (chosen algorithms)", r.workspace / MiB);
	printf("  %-34s %12.1f MiB\n", "other (labels, loss, bn saved)", r.other / MiB);
	printf("  %-34s %12.1f MiB\n", "total", total / MiB);
	printf("  %-34s %12.1f MiB\n", "workspace (largest algorithm)", r.workspace_max / MiB);
	printf("  %-34s %12.1f MiB\n", "total with largest workspace",
	       (total - r.workspace + r.workspace_max) / MiB);
}

/* ---- the training run */
int mt_train(mt_net_t *net, const mt_opts_t *o)
{
	int iters = o->iters, dataset = o->batch;
	float *losses = calloc(iters + 1, sizeof(float)), *times = calloc(iters + 1, sizeof(float));

	memset(&X, 0, sizeof(X));
	X.net = net;
	X.o = o;
	X.N = net->n;
	mt_alloc_init(o->alloc);
	CUDA_CHECK(cudaSetDevice(0));
	CUDA_CHECK(cudaStreamCreate(&X.st));
	CUDNN_CHECK(cudnnCreate(&X.dnn));
	CUDNN_CHECK(cudnnSetStream(X.dnn, X.st));
	CUBLAS_CHECK(cublasCreate(&X.blas));
	CUBLAS_CHECK(cublasSetStream(X.blas, X.st));
	if (o->fc_api == MT_FC_LT) {
		CUBLAS_CHECK(cublasLtCreate(&X.lt));
		X.lt_ws = mt_malloc(LT_WORKSPACE);
	}
	mt_conv_init(X.dnn, o->conv_api, o->algo_mode);
	load_kernels();
	liveness();
	descriptors_create();
	descriptors_batch(o->batch);
	init_params();
	X.live_base = mt_alloc_live();
	if (o->mem_report)
		mem_report();

	for (int it = 0; it < iters; it++) {
		int batch = (o->change_iter >= 0 && it >= o->change_iter) ? o->change_batch : o->batch;
		float ms = 0;

		setup_batch(batch);
		losses[it] = (float)run_pass(true, it * batch, dataset, &ms);
		times[it] = ms;
		printf("iter %d loss %.6f time %.3f ms\n", it, losses[it], ms);
		fflush(stdout);
		if (o->eval_every > 0 && (it + 1) % o->eval_every == 0) {
			double l = run_pass(false, it * batch, dataset, &ms);

			printf("eval %d loss %.6f time %.3f ms\n", it, l, ms);
			fflush(stdout);
		}
	}
	uint64_t sum = checksum();
	size_t peak = mt_alloc_peak();
	printf("checksum: 0x%016llx\n", (unsigned long long)sum);
	printf("peak: %zu MiB\n", (peak + (1u << 20) - 1) >> 20);
	if (o->alloc == MT_ALLOC_CACHING) {
		mt_cache_reuse_t r = mt_alloc_reuse();

		printf("cache reuse: %zu larger, %zu smaller, %zu same size\n", r.larger, r.smaller,
		       r.same);
	}
	if (o->json) {
		static const char *const an[] = { "per-tensor", "network", "caching" };

		printf("{\"net\":\"%s\",\"batch\":%d,\"image\":%d,\"iters\":%d,\"alloc\":\"%s\","
		       "\"conv_api\":\"%s\",\"losses\":[", net->name, o->batch, o->image, iters,
		       an[o->alloc], o->conv_api == MT_CONV_GRAPH ? "graph" : "legacy");
		for (int i = 0; i < iters; i++)
			printf(i ? ",%.6f" : "%.6f", isfinite(losses[i]) ? losses[i] : -1.0);
		printf("],\"checksum\":\"0x%016llx\",\"peak_bytes\":%zu,\"iter_ms\":[",
		       (unsigned long long)sum, peak);
		for (int i = 0; i < iters; i++)
			printf(i ? ",%.3f" : "%.3f", times[i]);
		printf("]}\n");
	}
	fflush(stdout);

	/* orderly teardown */
	stop_backward_thread();
	if (NETWORK && X.plan_batch)
		unplan();
	for (int p = 0; p < net->nparams; p++) {
		mt_free(net->params[p].w);
		mt_free(net->params[p].v);
		net->params[p].w = net->params[p].v = NULL;
	}
	for (int p = 0; p < net->nparams; p++) {
		mt_free(net->params[p].dw);
		net->params[p].dw = NULL;
	}
	if (X.lt) {
		mt_free(X.lt_ws);
		cublasLtDestroy(X.lt);
	}
	mt_alloc_empty_cache();
	mt_conv_fini();
	descriptors_destroy();
	cublasDestroy(X.blas);
	cudnnDestroy(X.dnn);
	cudaLibraryUnload(X.lib);
	cudaStreamDestroy(X.st);
	free(X.last_tr); free(X.last_ev); free(X.first_writer);
	free(X.head_tr); free(X.head_ev); free(X.next_tr); free(X.next_ev);
	free(X.h_in); free(X.h_labels); free(X.h_loss);
	free(losses);
	free(times);
	return 0;
}
