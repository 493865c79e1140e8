/* tests/simgpu/cudnn_backend.c - the simulated cuDNN graph (backend) API,
 * the subset a convolution needs.
 *
 * PyTorch's default convolution path (through cudnn-frontend) and
 * minitrain's `--conv-api graph` build: tensor and convolution descriptors,
 * one convolution operation (forward, backward data or backward filter), an
 * operation graph, engine heuristics whose results are engine configs, an
 * execution plan, and per call a variant pack of data pointers by tensor
 * unique id plus a workspace pointer; cudnnBackendExecute runs the plan.
 *
 * Engines map one-to-one onto the legacy algorithms: for a graph of one
 * convolution of direction D, engine global index i is legacy algorithm i
 * of D (cudnnConvolutionFwdAlgo_t, ...), with the same workspace size and
 * modelled time (cudnn.c's table), and execution goes through the same
 * dnn_conv_exec(), so both APIs give the same bits.  The heuristics list
 * the supported engines fastest first (the order of
 * cudnnGetConvolution*Algorithm_v7); FALLBACK mode lists them smallest
 * workspace first.
 *
 * Descriptors hold values: setting a descriptor-valued attribute copies the
 * referenced (finalized) descriptor's content, so the application may
 * destroy descriptors in any order.  Descriptor-valued attributes that are
 * read back (heuristic results, a config's engine, ...) are copied into
 * descriptors the caller created, as cuDNN requires.  Bad input returns a
 * BAD_PARAM or NOT_SUPPORTED status (with cuDNN 9's sub-codes where they
 * say more), never a crash.
 *
 * Thread-safety: descriptors belong to their caller, as in cuDNN.
 */
#include "cudnn_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu.h"

#define API __attribute__((visibility("default")))
#define BK_MAGIC 0x646b6e42u
#define BK_MAX_DIMS CUDNN_DIM_MAX
#define BK_MAX_SP (CUDNN_DIM_MAX - 2)
#define BK_MAX_VP 16

typedef struct {
	cudnnDataType_t dt;
	int nd, nstr;
	int64_t dims[BK_MAX_DIMS], strides[BK_MAX_DIMS];
	int64_t uid, align;
	bool is_virtual, by_value, has_dt, has_uid;
} bk_tensor_t;

typedef struct {
	cudnnDataType_t ctype;
	cudnnConvolutionMode_t mode;
	int64_t nsp;
	int ndil, nstride, npre, npost;
	int64_t dil[BK_MAX_SP], stride[BK_MAX_SP], pre[BK_MAX_SP], post[BK_MAX_SP];
} bk_conv_t;

typedef struct {
	dnn_dir_t dir;
	bk_tensor_t x, w, y;    /* x/dx, w/dw, y/dy by direction */
	bk_conv_t conv;
	double alpha, beta;
	bool has_x, has_w, has_y, has_conv;
	dnn_conv_t geom;        /* set by finalize */
} bk_op_t;

typedef struct {
	cudnnHandle_t handle;
	bk_op_t op;
	int nops;
} bk_graph_t;

typedef struct {
	bk_graph_t graph;
	bool has_graph;
	cudnnBackendHeurMode_t mode;
} bk_heur_t;

typedef struct {
	bk_graph_t graph;
	bool has_graph;
	int64_t index;
	bool has_index;
} bk_engine_t;

typedef struct {
	bk_engine_t engine;
	bool has_engine;
	size_t ws;              /* set by finalize */
} bk_cfg_t;

typedef struct {
	cudnnHandle_t handle;
	bk_cfg_t cfg;
	bool has_cfg;
} bk_plan_t;

typedef struct {
	int nuid, nptr;
	int64_t uids[BK_MAX_VP];
	void *ptrs[BK_MAX_VP];
	void *ws;
} bk_vpack_t;

typedef struct {
	cudnnBackendKnobType_t type;
	int64_t value;
} bk_knob_t;

typedef struct {
	uint32_t magic;
	cudnnBackendDescriptorType_t type;
	bool finalized;
	union {
		bk_tensor_t tensor;
		bk_conv_t conv;
		bk_op_t op;
		bk_graph_t graph;
		bk_heur_t heur;
		bk_engine_t engine;
		bk_cfg_t cfg;
		bk_plan_t plan;
		bk_vpack_t vpack;
		bk_knob_t knob;
	} u;
} bk_desc_t;

#define ST_BAD CUDNN_STATUS_BAD_PARAM
#define ST_TYPE CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE
#define ST_NULL CUDNN_STATUS_BAD_PARAM_NULL_POINTER
#define ST_BOUND CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND
#define ST_NOTFIN CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED
#define ST_DTYPE CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE

static bk_desc_t *as_desc(cudnnBackendDescriptor_t d)
{
	bk_desc_t *p = d;
	return p && p->magic == BK_MAGIC ? p : NULL;
}

static bool is_conv_op(cudnnBackendDescriptorType_t t)
{
	return t == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
	       t == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
	       t == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}

/* --------------------------------------------------- create and destroy */

API cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
					       cudnnBackendDescriptor_t *desc)
{
	if (!desc)
		return ST_NULL;
	switch (type) {
	case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
	case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
	case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
	case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
	case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
	case CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR:
	case CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR:
	case CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR:
		break;
	default:
		*desc = NULL;
		return CUDNN_STATUS_NOT_SUPPORTED;
	}
	bk_desc_t *d = calloc(1, sizeof(*d));
	if (!d)
		return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
	simgpu_init();
	d->magic = BK_MAGIC;
	d->type = type;
	switch (type) {
	case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
		d->u.tensor.align = 16;
		break;
	case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
		d->u.conv.ctype = CUDNN_DATA_FLOAT;
		d->u.conv.mode = CUDNN_CROSS_CORRELATION;
		break;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
		d->u.op.dir = DNN_FWD;
		d->u.op.alpha = 1.0;
		break;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
		d->u.op.dir = DNN_BWD_DATA;
		d->u.op.alpha = 1.0;
		break;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
		d->u.op.dir = DNN_BWD_FILTER;
		d->u.op.alpha = 1.0;
		break;
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
		d->u.heur.mode = CUDNN_HEUR_MODE_INSTANT;
		break;
	default:
		break;
	}
	*desc = d;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t desc)
{
	bk_desc_t *d = as_desc(desc);

	if (!desc)
		return CUDNN_STATUS_SUCCESS;
	if (!d)
		return ST_BAD;
	d->magic = 0;
	free(d);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t desc)
{
	return as_desc(desc) ? CUDNN_STATUS_SUCCESS : ST_BAD;
}

/* ------------------------------------------------------- set attribute */

/* Reads `count` elements of the expected type into `out` (elem bytes each). */
static cudnnStatus_t take(cudnnBackendAttributeType_t got, cudnnBackendAttributeType_t want,
			  int64_t count, int64_t min, int64_t max, const void *src, void *out,
			  size_t elem)
{
	if (got != want)
		return ST_TYPE;
	if (count < min || count > max)
		return ST_BOUND;
	if (count && !src)
		return ST_NULL;
	memcpy(out, src, (size_t)count * elem);
	return CUDNN_STATUS_SUCCESS;
}

/* A descriptor-valued attribute: one finalized descriptor of type `want`. */
static cudnnStatus_t take_desc(cudnnBackendAttributeType_t got, int64_t count, const void *src,
			       cudnnBackendDescriptorType_t want, bool any_conv_op,
			       const bk_desc_t **out)
{
	if (got != CUDNN_TYPE_BACKEND_DESCRIPTOR)
		return ST_TYPE;
	if (count != 1)
		return ST_BOUND;
	if (!src)
		return ST_NULL;
	const bk_desc_t *d = as_desc(*(cudnnBackendDescriptor_t const *)src);
	if (!d)
		return ST_BAD;
	if (any_conv_op ? !is_conv_op(d->type) : d->type != want)
		return ST_DTYPE;
	if (!d->finalized)
		return ST_NOTFIN;
	*out = d;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_tensor(bk_tensor_t *t, cudnnBackendAttributeName_t name,
				cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
	cudnnStatus_t st;
	int64_t i64;
	bool b;
	cudnnBackendTensorReordering_t reorder;

	switch (name) {
	case CUDNN_ATTR_TENSOR_DATA_TYPE:
		st = take(type, CUDNN_TYPE_DATA_TYPE, n, 1, 1, v, &t->dt, sizeof(t->dt));
		t->has_dt = st == CUDNN_STATUS_SUCCESS;
		return st;
	case CUDNN_ATTR_TENSOR_DIMENSIONS:
		if ((st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_DIMS, v, t->dims, sizeof(int64_t))))
			return st;
		t->nd = (int)n;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_ATTR_TENSOR_STRIDES:
		if ((st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_DIMS, v, t->strides, sizeof(int64_t))))
			return st;
		t->nstr = (int)n;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_ATTR_TENSOR_UNIQUE_ID:
		st = take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &t->uid, sizeof(int64_t));
		t->has_uid = st == CUDNN_STATUS_SUCCESS;
		return st;
	case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
		if ((st = take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &i64, sizeof(i64))))
			return st;
		if (i64 <= 0)
			return ST_BAD;
		t->align = i64;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
		if ((st = take(type, CUDNN_TYPE_BOOLEAN, n, 1, 1, v, &b, sizeof(b))))
			return st;
		t->is_virtual = b;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_ATTR_TENSOR_IS_BY_VALUE:
		if ((st = take(type, CUDNN_TYPE_BOOLEAN, n, 1, 1, v, &b, sizeof(b))))
			return st;
		t->by_value = b;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_ATTR_TENSOR_VECTOR_COUNT:
		if ((st = take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &i64, sizeof(i64))))
			return st;
		return i64 == 1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
	case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION:
		return take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &i64, sizeof(i64));
	case CUDNN_ATTR_TENSOR_REORDERING_MODE:
		if ((st = take(type, CUDNN_TYPE_TENSOR_REORDERING_MODE, n, 1, 1, v, &reorder,
			       sizeof(reorder))))
			return st;
		return reorder == CUDNN_TENSOR_REORDERING_NONE ? CUDNN_STATUS_SUCCESS
							       : CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
	default:
		return ST_BAD;
	}
}

static cudnnStatus_t set_conv(bk_conv_t *c, cudnnBackendAttributeName_t name,
			      cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
	cudnnStatus_t st;

	switch (name) {
	case CUDNN_ATTR_CONVOLUTION_COMP_TYPE:
		return take(type, CUDNN_TYPE_DATA_TYPE, n, 1, 1, v, &c->ctype, sizeof(c->ctype));
	case CUDNN_ATTR_CONVOLUTION_CONV_MODE:
		if ((st = take(type, CUDNN_TYPE_CONVOLUTION_MODE, n, 1, 1, v, &c->mode, sizeof(c->mode))))
			return st;
		return c->mode == CUDNN_CONVOLUTION || c->mode == CUDNN_CROSS_CORRELATION ? CUDNN_STATUS_SUCCESS
											  : ST_BAD;
	case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
		if ((st = take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &c->nsp, sizeof(c->nsp))))
			return st;
		return c->nsp >= 1 && c->nsp <= BK_MAX_SP ? CUDNN_STATUS_SUCCESS : ST_BOUND;
	case CUDNN_ATTR_CONVOLUTION_DILATIONS:
		st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_SP, v, c->dil, sizeof(int64_t));
		c->ndil = st ? c->ndil : (int)n;
		return st;
	case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES:
		st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_SP, v, c->stride, sizeof(int64_t));
		c->nstride = st ? c->nstride : (int)n;
		return st;
	case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS:
		st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_SP, v, c->pre, sizeof(int64_t));
		c->npre = st ? c->npre : (int)n;
		return st;
	case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS:
		st = take(type, CUDNN_TYPE_INT64, n, 1, BK_MAX_SP, v, c->post, sizeof(int64_t));
		c->npost = st ? c->npost : (int)n;
		return st;
	default:
		return ST_BAD;
	}
}

/* alpha/beta come as float or double */
static cudnnStatus_t take_scalar(cudnnBackendAttributeType_t type, int64_t n, const void *v,
				 double *out)
{
	if (n != 1)
		return ST_BOUND;
	if (!v)
		return ST_NULL;
	if (type == CUDNN_TYPE_FLOAT)
		*out = *(const float *)v;
	else if (type == CUDNN_TYPE_DOUBLE)
		*out = *(const double *)v;
	else
		return ST_TYPE;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_op(bk_op_t *o, cudnnBackendAttributeName_t name,
			    cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
	/* attribute ids per direction: alpha, beta, conv, w, x-role, y-role */
	static const cudnnBackendAttributeName_t ids[DNN_DIRS][6] = {
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY },
	};
	const cudnnBackendAttributeName_t *id = ids[o->dir];
	const bk_desc_t *d;
	cudnnStatus_t st;

	if (name == id[0])
		return take_scalar(type, n, v, &o->alpha);
	if (name == id[1])
		return take_scalar(type, n, v, &o->beta);
	if (name == id[2]) {
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, false, &d)))
			return st;
		o->conv = d->u.conv;
		o->has_conv = true;
		return CUDNN_STATUS_SUCCESS;
	}
	for (int i = 3; i < 6; i++) {
		if (name != id[i])
			continue;
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_TENSOR_DESCRIPTOR, false, &d)))
			return st;
		if (i == 3)
			o->w = d->u.tensor, o->has_w = true;
		else if (i == 4)
			o->x = d->u.tensor, o->has_x = true;
		else
			o->y = d->u.tensor, o->has_y = true;
		return CUDNN_STATUS_SUCCESS;
	}
	return ST_BAD;
}

static cudnnStatus_t take_handle(cudnnBackendAttributeType_t type, int64_t n, const void *v,
				 cudnnHandle_t *out)
{
	if (type != CUDNN_TYPE_HANDLE)
		return ST_TYPE;
	if (n != 1)
		return ST_BOUND;
	if (!v)
		return ST_NULL;
	cudnnHandle_t h = *(const cudnnHandle_t *)v;
	if (!dnn_handle_ok(h))
		return ST_BAD;
	*out = h;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t desc,
					   cudnnBackendAttributeName_t name,
					   cudnnBackendAttributeType_t type, int64_t n,
					   const void *v)
{
	bk_desc_t *d = as_desc(desc);
	const bk_desc_t *r;
	cudnnStatus_t st;
	bool b;
	int32_t i32;

	if (!d)
		return ST_BAD;
	if (d->finalized)
		return ST_BAD;
	if (n < 0)
		return ST_BOUND;
	switch (d->type) {
	case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
		return set_tensor(&d->u.tensor, name, type, n, v);
	case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
		return set_conv(&d->u.conv, name, type, n, v);
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
		return set_op(&d->u.op, name, type, n, v);
	case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
		if (name == CUDNN_ATTR_OPERATIONGRAPH_HANDLE)
			return take_handle(type, n, v, &d->u.graph.handle);
		if (name == CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED) {
			if ((st = take(type, CUDNN_TYPE_BOOLEAN, n, 1, 1, v, &b, sizeof(b))))
				return st;
			return b ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS;
		}
		if (name != CUDNN_ATTR_OPERATIONGRAPH_OPS)
			return ST_BAD;
		if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
			return ST_TYPE;
		if (n != 1) /* one convolution per graph: fusions are not simulated */
			return n < 1 ? ST_BOUND : CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
		if ((st = take_desc(type, n, v, 0, true, &r)))
			return st;
		d->u.graph.op = r->u.op;
		d->u.graph.nops = 1;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
		if (name == CUDNN_ATTR_ENGINEHEUR_MODE) {
			if ((st = take(type, CUDNN_TYPE_HEUR_MODE, n, 1, 1, v, &d->u.heur.mode,
				       sizeof(d->u.heur.mode))))
				return st;
			return (int)d->u.heur.mode >= 0 && d->u.heur.mode < CUDNN_HEUR_MODES_COUNT
				       ? CUDNN_STATUS_SUCCESS : ST_BAD;
		}
		if (name == CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET)
			return take(type, CUDNN_TYPE_INT32, n, 1, 1, v, &i32, sizeof(i32));
		if (name != CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
			return ST_BAD;
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, false, &r)))
			return st;
		d->u.heur.graph = r->u.graph;
		d->u.heur.has_graph = true;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
		if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX) {
			st = take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &d->u.engine.index, sizeof(int64_t));
			d->u.engine.has_index = st == CUDNN_STATUS_SUCCESS;
			return st;
		}
		if (name == CUDNN_ATTR_ENGINE_SM_COUNT_TARGET)
			return take(type, CUDNN_TYPE_INT32, n, 1, 1, v, &i32, sizeof(i32));
		if (name != CUDNN_ATTR_ENGINE_OPERATION_GRAPH)
			return ST_BAD;
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, false, &r)))
			return st;
		d->u.engine.graph = r->u.graph;
		d->u.engine.has_graph = true;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
		if (name == CUDNN_ATTR_ENGINECFG_KNOB_CHOICES) {
			/* knobs tune real kernels; the simulator accepts and ignores them */
			if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
				return ST_TYPE;
			for (int64_t i = 0; i < n; i++) {
				const bk_desc_t *k = v ? as_desc(((cudnnBackendDescriptor_t const *)v)[i]) : NULL;
				if (!k || k->type != CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
					return ST_BAD;
			}
			return CUDNN_STATUS_SUCCESS;
		}
		if (name != CUDNN_ATTR_ENGINECFG_ENGINE)
			return ST_BAD;
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_ENGINE_DESCRIPTOR, false, &r)))
			return st;
		d->u.cfg.engine = r->u.engine;
		d->u.cfg.has_engine = true;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
		if (name == CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
			return take_handle(type, n, v, &d->u.plan.handle);
		if (name != CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
			return ST_BAD;
		if ((st = take_desc(type, n, v, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, false, &r)))
			return st;
		d->u.plan.cfg = r->u.cfg;
		d->u.plan.has_cfg = true;
		return CUDNN_STATUS_SUCCESS;
	case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
		switch (name) {
		case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
			st = take(type, CUDNN_TYPE_INT64, n, 0, BK_MAX_VP, v, d->u.vpack.uids, sizeof(int64_t));
			d->u.vpack.nuid = st ? d->u.vpack.nuid : (int)n;
			return st;
		case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
			st = take(type, CUDNN_TYPE_VOID_PTR, n, 0, BK_MAX_VP, v, d->u.vpack.ptrs, sizeof(void *));
			d->u.vpack.nptr = st ? d->u.vpack.nptr : (int)n;
			return st;
		case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
			return take(type, CUDNN_TYPE_VOID_PTR, n, 1, 1, v, &d->u.vpack.ws, sizeof(void *));
		case CUDNN_ATTR_VARIANT_PACK_INTERMEDIATES:
			return type == CUDNN_TYPE_VOID_PTR ? CUDNN_STATUS_SUCCESS : ST_TYPE;
		default:
			return ST_BAD;
		}
	case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
		if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
			return take(type, CUDNN_TYPE_KNOB_TYPE, n, 1, 1, v, &d->u.knob.type, sizeof(d->u.knob.type));
		if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
			return take(type, CUDNN_TYPE_INT64, n, 1, 1, v, &d->u.knob.value, sizeof(int64_t));
		return ST_BAD;
	default:
		return ST_BAD;
	}
}

/* ------------------------------------------------------------- finalize */

static cudnnStatus_t tensor_to4(const bk_tensor_t *t, dnn_t4_t *l)
{
	if (t->dt != CUDNN_DATA_FLOAT)
		return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
	if (t->is_virtual || t->by_value)
		return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
	if (t->nd < 3 || t->nd > 5 || (t->nd == 5 && t->dims[2] != 1))
		return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
	int j = 0;
	for (int i = 0; i < t->nd; i++) {
		if (t->nd == 5 && i == 2)
			continue;
		if (t->dims[i] > INT32_MAX)
			return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
		l->dims[j] = (int)t->dims[i];
		l->strides[j] = t->strides[i];
		j++;
	}
	for (; j < 4; j++)
		l->dims[j] = 1, l->strides[j] = 1;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_op(bk_op_t *o)
{
	const bk_conv_t *c = &o->conv;
	dnn_conv_t *g = &o->geom;
	cudnnStatus_t st;

	if (!o->has_x || !o->has_w || !o->has_y || !o->has_conv)
		return ST_BAD;
	memset(g, 0, sizeof(*g));
	if ((st = tensor_to4(&o->x, &g->x)) || (st = tensor_to4(&o->w, &g->w)) ||
	    (st = tensor_to4(&o->y, &g->y)))
		return st;
	if (c->nsp > 2)
		return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
	if (o->x.uid == o->w.uid || o->x.uid == o->y.uid || o->w.uid == o->y.uid)
		return CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES;
	for (int i = 0; i < c->nsp; i++)
		if (c->post[i] != c->pre[i])
			return CUDNN_STATUS_NOT_SUPPORTED_PADDING;
	ref_conv_t *cv = &g->cv;
	cv->n = g->x.dims[0], cv->c = g->x.dims[1], cv->h = g->x.dims[2], cv->w = g->x.dims[3];
	cv->k = g->w.dims[0], cv->r = g->w.dims[2], cv->s = g->w.dims[3];
	cv->pad_h = (int)c->pre[0], cv->stride_h = (int)c->stride[0], cv->dil_h = (int)c->dil[0];
	if (c->nsp == 2)
		cv->pad_w = (int)c->pre[1], cv->stride_w = (int)c->stride[1], cv->dil_w = (int)c->dil[1];
	else
		cv->pad_w = 0, cv->stride_w = 1, cv->dil_w = 1;
	if (g->w.dims[1] <= 0 || cv->c % g->w.dims[1])
		return ST_BAD;
	cv->groups = cv->c / g->w.dims[1];
	cv->flip = c->mode == CUDNN_CONVOLUTION;
	return dnn_conv_check(g);
}

static cudnnStatus_t finalize_conv(bk_conv_t *c)
{
	if (!c->nsp)
		c->nsp = c->npre ? c->npre : c->nstride;
	if (c->nsp < 1 || c->ndil != c->nsp || c->nstride != c->nsp || c->npre != c->nsp)
		return ST_BAD;
	if (!c->npost) {
		memcpy(c->post, c->pre, sizeof(c->pre));
		c->npost = c->npre;
	}
	if (c->npost != c->nsp)
		return ST_BAD;
	for (int i = 0; i < c->nsp; i++)
		if (c->dil[i] <= 0 || c->stride[i] <= 0 || c->pre[i] < 0 || c->post[i] < 0 ||
		    c->dil[i] > INT32_MAX || c->stride[i] > INT32_MAX || c->pre[i] > INT32_MAX)
			return ST_BAD;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_engine(bk_engine_t *e)
{
	size_t ws;

	if (!e->has_graph || !e->has_index)
		return ST_BAD;
	if (e->index < 0 || e->index >= dnn_algo_count(e->graph.op.dir))
		return ST_BOUND;
	if (!dnn_algo_ws(e->graph.op.dir, (int)e->index, &e->graph.op.geom, &ws))
		return CUDNN_STATUS_NOT_SUPPORTED;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_cfg(bk_cfg_t *c)
{
	if (!c->has_engine)
		return ST_BAD;
	if (!dnn_algo_ws(c->engine.graph.op.dir, (int)c->engine.index, &c->engine.graph.op.geom, &c->ws))
		return CUDNN_STATUS_NOT_SUPPORTED;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t desc)
{
	bk_desc_t *d = as_desc(desc);
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;

	if (!d)
		return ST_BAD;
	if (d->finalized)
		return ST_BAD;
	switch (d->type) {
	case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
		bk_tensor_t *t = &d->u.tensor;
		if (!t->has_dt || !t->has_uid || t->nd == 0 || t->nstr != t->nd)
			return ST_BAD;
		for (int i = 0; i < t->nd; i++)
			if (t->dims[i] <= 0 || t->strides[i] <= 0)
				return ST_BAD;
		break;
	}
	case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
		st = finalize_conv(&d->u.conv);
		break;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
		st = finalize_op(&d->u.op);
		break;
	case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
		if (!d->u.graph.handle || d->u.graph.nops != 1)
			return ST_BAD;
		break;
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
		if (!d->u.heur.has_graph)
			return ST_BAD;
		break;
	case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
		st = finalize_engine(&d->u.engine);
		break;
	case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
		st = finalize_cfg(&d->u.cfg);
		break;
	case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
		if (!d->u.plan.has_cfg)
			return ST_BAD;
		if (!dnn_handle_ok(d->u.plan.handle))
			return ST_BAD;
		break;
	case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
		if (d->u.vpack.nuid != d->u.vpack.nptr)
			return ST_BAD;
		break;
	default:
		break;
	}
	if (st == CUDNN_STATUS_SUCCESS)
		d->finalized = true;
	return st;
}

/* ------------------------------------------------------- get attribute */

static cudnnStatus_t give(cudnnBackendAttributeType_t got, cudnnBackendAttributeType_t want,
			  int64_t req, int64_t *count, void *dst, const void *src, int64_t n,
			  size_t elem)
{
	if (got != want)
		return ST_TYPE;
	if (req < 0)
		return ST_BOUND;
	if (req > 0 && !dst)
		return ST_NULL;
	int64_t k = n < req ? n : req;
	if (k > 0 && src)
		memcpy(dst, src, (size_t)k * elem);
	if (count)
		*count = req == 0 ? n : k;
	return CUDNN_STATUS_SUCCESS;
}

/* Copies a value into a caller-created descriptor of type `want`. */
static cudnnStatus_t give_desc(cudnnBackendAttributeType_t got, int64_t req, int64_t *count,
			       void *dst, cudnnBackendDescriptorType_t want, const void *val,
			       size_t size)
{
	if (got != CUDNN_TYPE_BACKEND_DESCRIPTOR)
		return ST_TYPE;
	if (req < 0)
		return ST_BOUND;
	if (count)
		*count = 1;
	if (req == 0)
		return CUDNN_STATUS_SUCCESS;
	if (!dst)
		return ST_NULL;
	bk_desc_t *o = as_desc(*(cudnnBackendDescriptor_t *)dst);
	if (!o)
		return ST_BAD;
	if (o->type != want)
		return ST_DTYPE;
	memset(&o->u, 0, sizeof(o->u));
	memcpy(&o->u, val, size);
	o->finalized = true;
	return CUDNN_STATUS_SUCCESS;
}

/* Supported engines of a graph, in heuristic order. */
static int heur_list(const bk_graph_t *g, cudnnBackendHeurMode_t mode, int *algos)
{
	int n = 0, total = dnn_algo_count(g->op.dir);
	size_t ws[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 1];
	double t[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 1];

	for (int a = 0; a < total; a++) {
		size_t w;
		if (!dnn_algo_ws(g->op.dir, a, &g->op.geom, &w))
			continue;
		algos[n] = a;
		ws[n] = w;
		t[n] = dnn_algo_seconds(g->op.dir, a, &g->op.geom);
		n++;
	}
	/* insertion sort: few entries; ties keep the lower id first */
	for (int i = 1; i < n; i++) {
		for (int j = i; j > 0; j--) {
			bool swap = mode == CUDNN_HEUR_MODE_FALLBACK
					    ? ws[j] < ws[j - 1]
					    : (t[j] < t[j - 1] || (t[j] == t[j - 1] && ws[j] < ws[j - 1]));
			if (!swap)
				break;
			int ta = algos[j]; algos[j] = algos[j - 1]; algos[j - 1] = ta;
			size_t tw = ws[j]; ws[j] = ws[j - 1]; ws[j - 1] = tw;
			double tt = t[j]; t[j] = t[j - 1]; t[j - 1] = tt;
		}
	}
	return n;
}

static cudnnStatus_t get_heur_results(const bk_heur_t *hr, cudnnBackendAttributeType_t type,
				      int64_t req, int64_t *count, void *dst)
{
	int algos[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 1];
	int n = heur_list(&hr->graph, hr->mode, algos);

	if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
		return ST_TYPE;
	if (req < 0)
		return ST_BOUND;
	if (req == 0) {
		if (count)
			*count = n;
		return CUDNN_STATUS_SUCCESS;
	}
	if (!dst)
		return ST_NULL;
	int64_t k = n < req ? n : req;
	cudnnBackendDescriptor_t *out = dst;
	bk_desc_t *cfgs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 1];
	for (int64_t i = 0; i < k; i++) {
		cfgs[i] = as_desc(out[i]);
		if (!cfgs[i])
			return ST_BAD;
		if (cfgs[i]->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
			return ST_DTYPE;
	}
	for (int64_t i = 0; i < k; i++) {
		bk_desc_t *o = cfgs[i];
		memset(&o->u.cfg, 0, sizeof(o->u.cfg));
		o->u.cfg.engine.graph = hr->graph;
		o->u.cfg.engine.has_graph = true;
		o->u.cfg.engine.index = algos[i];
		o->u.cfg.engine.has_index = true;
		o->u.cfg.has_engine = true;
		finalize_cfg(&o->u.cfg);
		o->finalized = true;
	}
	if (count)
		*count = k;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t get_engine(const bk_engine_t *e, cudnnBackendAttributeName_t name,
				cudnnBackendAttributeType_t type, int64_t req, int64_t *count,
				void *dst)
{
	cudnnBackendNumericalNote_t notes[1] = { CUDNN_NUMERICAL_NOTE_FFT };
	int nnotes = 0;
	int32_t zero = 0;

	switch (name) {
	case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
		return give(type, CUDNN_TYPE_INT64, req, count, dst, &e->index, 1, sizeof(int64_t));
	case CUDNN_ATTR_ENGINE_OPERATION_GRAPH:
		return give_desc(type, req, count, dst, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
				 &e->graph, sizeof(e->graph));
	case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: {
		/* every simulated engine is deterministic fp32; FFT and Winograd
		 * carry their notes so filters on them behave as on a GPU */
		bool fft, wino;
		switch (e->graph.op.dir) {
		case DNN_FWD:
			fft = e->index == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
			      e->index == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING;
			wino = e->index == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
			break;
		case DNN_BWD_DATA:
			fft = e->index == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
			      e->index == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING;
			wino = e->index == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
			break;
		default:
			fft = e->index == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
			      e->index == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
			wino = e->index == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
			break;
		}
		if (fft)
			notes[nnotes++] = CUDNN_NUMERICAL_NOTE_FFT;
		else if (wino)
			notes[nnotes++] = CUDNN_NUMERICAL_NOTE_WINOGRAD;
		return give(type, CUDNN_TYPE_NUMERICAL_NOTE, req, count, dst, notes, nnotes,
			    sizeof(notes[0]));
	}
	case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
		return give(type, CUDNN_TYPE_BEHAVIOR_NOTE, req, count, dst, NULL, 0,
			    sizeof(cudnnBackendBehaviorNote_t));
	case CUDNN_ATTR_ENGINE_KNOB_INFO:
	case CUDNN_ATTR_ENGINE_LAYOUT_INFO:
		return give(type, CUDNN_TYPE_BACKEND_DESCRIPTOR, req, count, dst, NULL, 0,
			    sizeof(cudnnBackendDescriptor_t));
	case CUDNN_ATTR_ENGINE_SM_COUNT_TARGET:
		return give(type, CUDNN_TYPE_INT32, req, count, dst, &zero, 1, sizeof(zero));
	default:
		return ST_BAD;
	}
}

API cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const desc,
					   cudnnBackendAttributeName_t name,
					   cudnnBackendAttributeType_t type, int64_t req,
					   int64_t *count, void *dst)
{
	const bk_desc_t *d = as_desc(desc);
	int64_t i64;

	if (!d)
		return ST_BAD;
	if (!d->finalized && d->type != CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
		return ST_NOTFIN;
	switch (d->type) {
	case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
		const bk_tensor_t *t = &d->u.tensor;
		switch (name) {
		case CUDNN_ATTR_TENSOR_DATA_TYPE:
			return give(type, CUDNN_TYPE_DATA_TYPE, req, count, dst, &t->dt, 1, sizeof(t->dt));
		case CUDNN_ATTR_TENSOR_DIMENSIONS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, t->dims, t->nd, sizeof(int64_t));
		case CUDNN_ATTR_TENSOR_STRIDES:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, t->strides, t->nd, sizeof(int64_t));
		case CUDNN_ATTR_TENSOR_UNIQUE_ID:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &t->uid, 1, sizeof(int64_t));
		case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &t->align, 1, sizeof(int64_t));
		case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
			return give(type, CUDNN_TYPE_BOOLEAN, req, count, dst, &t->is_virtual, 1, sizeof(bool));
		case CUDNN_ATTR_TENSOR_IS_BY_VALUE:
			return give(type, CUDNN_TYPE_BOOLEAN, req, count, dst, &t->by_value, 1, sizeof(bool));
		default:
			return ST_BAD;
		}
	}
	case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
		const bk_conv_t *c = &d->u.conv;
		switch (name) {
		case CUDNN_ATTR_CONVOLUTION_COMP_TYPE:
			return give(type, CUDNN_TYPE_DATA_TYPE, req, count, dst, &c->ctype, 1, sizeof(c->ctype));
		case CUDNN_ATTR_CONVOLUTION_CONV_MODE:
			return give(type, CUDNN_TYPE_CONVOLUTION_MODE, req, count, dst, &c->mode, 1, sizeof(c->mode));
		case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &c->nsp, 1, sizeof(int64_t));
		case CUDNN_ATTR_CONVOLUTION_DILATIONS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, c->dil, c->nsp, sizeof(int64_t));
		case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, c->stride, c->nsp, sizeof(int64_t));
		case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, c->pre, c->nsp, sizeof(int64_t));
		case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, c->post, c->nsp, sizeof(int64_t));
		default:
			return ST_BAD;
		}
	}
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: {
		const bk_op_t *o = &d->u.op;
		const bk_tensor_t *t = NULL;
		switch (name) {
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X:
			t = &o->x;
			break;
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW:
			t = &o->w;
			break;
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY:
			t = &o->y;
			break;
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC:
			return give_desc(type, req, count, dst, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
					 &o->conv, sizeof(o->conv));
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA:
		case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA: {
			bool is_alpha = name == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA ||
					name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA ||
					name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
			double v = is_alpha ? o->alpha : o->beta;
			float f = (float)v;
			if (type == CUDNN_TYPE_FLOAT)
				return give(type, CUDNN_TYPE_FLOAT, req, count, dst, &f, 1, sizeof(f));
			return give(type, CUDNN_TYPE_DOUBLE, req, count, dst, &v, 1, sizeof(v));
		}
		default:
			return ST_BAD;
		}
		return give_desc(type, req, count, dst, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t, sizeof(*t));
	}
	case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
		switch (name) {
		case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
			i64 = dnn_algo_count(d->u.graph.op.dir);
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &i64, 1, sizeof(i64));
		case CUDNN_ATTR_OPERATIONGRAPH_HANDLE:
			return give(type, CUDNN_TYPE_HANDLE, req, count, dst, &d->u.graph.handle, 1,
				    sizeof(cudnnHandle_t));
		default:
			return ST_BAD;
		}
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
		if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS)
			return get_heur_results(&d->u.heur, type, req, count, dst);
		if (name == CUDNN_ATTR_ENGINEHEUR_MODE)
			return give(type, CUDNN_TYPE_HEUR_MODE, req, count, dst, &d->u.heur.mode, 1,
				    sizeof(d->u.heur.mode));
		if (name == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
			return give_desc(type, req, count, dst, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
					 &d->u.heur.graph, sizeof(d->u.heur.graph));
		return ST_BAD;
	case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
		return get_engine(&d->u.engine, name, type, req, count, dst);
	case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
		switch (name) {
		case CUDNN_ATTR_ENGINECFG_ENGINE:
			return give_desc(type, req, count, dst, CUDNN_BACKEND_ENGINE_DESCRIPTOR,
					 &d->u.cfg.engine, sizeof(d->u.cfg.engine));
		case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
			i64 = (int64_t)d->u.cfg.ws;
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &i64, 1, sizeof(i64));
		case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES:
		case CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO:
			return give(type, CUDNN_TYPE_BACKEND_DESCRIPTOR, req, count, dst, NULL, 0,
				    sizeof(cudnnBackendDescriptor_t));
		case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:
			i64 = 0;
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &i64, 1, sizeof(i64));
		default:
			return ST_BAD;
		}
	case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
		switch (name) {
		case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
			i64 = (int64_t)d->u.plan.cfg.ws;
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &i64, 1, sizeof(i64));
		case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
			return give_desc(type, req, count, dst, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
					 &d->u.plan.cfg, sizeof(d->u.plan.cfg));
		case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
			return give(type, CUDNN_TYPE_HANDLE, req, count, dst, &d->u.plan.handle, 1,
				    sizeof(cudnnHandle_t));
		case CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS:
		case CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, NULL, 0, sizeof(int64_t));
		case CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: {
			char json[160];
			const bk_cfg_t *c = &d->u.plan.cfg;
			int len = snprintf(json, sizeof(json),
					   "{\"simgpu\":true,\"direction\":%d,\"engine\":%lld,\"workspace\":%zu}",
					   (int)c->engine.graph.op.dir, (long long)c->engine.index, c->ws);
			return give(type, CUDNN_TYPE_CHAR, req, count, dst, json, len + 1, 1);
		}
		default:
			return ST_BAD;
		}
	case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
		switch (name) {
		case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
			return give(type, CUDNN_TYPE_INT64, req, count, dst, d->u.vpack.uids,
				    d->u.vpack.nuid, sizeof(int64_t));
		case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
			return give(type, CUDNN_TYPE_VOID_PTR, req, count, dst, d->u.vpack.ptrs,
				    d->u.vpack.nptr, sizeof(void *));
		case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
			return give(type, CUDNN_TYPE_VOID_PTR, req, count, dst, &d->u.vpack.ws, 1,
				    sizeof(void *));
		default:
			return ST_BAD;
		}
	case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
		if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
			return give(type, CUDNN_TYPE_KNOB_TYPE, req, count, dst, &d->u.knob.type, 1,
				    sizeof(d->u.knob.type));
		if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
			return give(type, CUDNN_TYPE_INT64, req, count, dst, &d->u.knob.value, 1,
				    sizeof(int64_t));
		return ST_BAD;
	default:
		return ST_BAD;
	}
}

/* -------------------------------------------------------------- execute */

static const void *vp_lookup(const bk_vpack_t *vp, int64_t uid)
{
	for (int i = 0; i < vp->nuid; i++)
		if (vp->uids[i] == uid)
			return vp->ptrs[i];
	return NULL;
}

API cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
				      cudnnBackendDescriptor_t vpack)
{
	const bk_desc_t *p = as_desc(plan), *v = as_desc(vpack);

	if (!dnn_handle_ok(handle) || !p || !v)
		return ST_BAD;
	if (p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
	    v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
		return ST_DTYPE;
	if (!p->finalized || !v->finalized)
		return ST_NOTFIN;
	const bk_cfg_t *cfg = &p->u.plan.cfg;
	const bk_op_t *o = &cfg->engine.graph.op;
	const void *x = vp_lookup(&v->u.vpack, o->x.uid);
	const void *w = vp_lookup(&v->u.vpack, o->w.uid);
	const void *y = vp_lookup(&v->u.vpack, o->y.uid);
	if (!x || !w || !y)
		return ST_NULL;
	const void *a, *b;
	void *out;
	switch (o->dir) {
	case DNN_FWD: a = x, b = w, out = (void *)y; break;
	case DNN_BWD_DATA: a = w, b = y, out = (void *)x; break;
	default: a = x, b = y, out = (void *)w; break;
	}
	return dnn_conv_exec(handle, "cudnnBackendExecute", o->dir, (int)cfg->engine.index,
			     &o->geom, (float)o->alpha, a, b, (float)o->beta, out,
			     v->u.vpack.ws, cfg->ws);
}

API cudnnStatus_t cudnnBackendPopulateCudaGraph(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
						cudnnBackendDescriptor_t vpack, cudaGraph_t graph)
{
	(void)handle, (void)plan, (void)vpack, (void)graph;
	return CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API;
}

API cudnnStatus_t cudnnBackendUpdateCudaGraph(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
					      cudnnBackendDescriptor_t vpack, cudaGraph_t graph)
{
	(void)handle, (void)plan, (void)vpack, (void)graph;
	return CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API;
}
