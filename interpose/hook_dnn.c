/* interpose/hook_dnn.c - extents and the cuDNN graph-API side table.
 *
 * Pure: no CUDA call, no environment, no output.  See hook_dnn.h for the
 * contracts and docs/cudnn-graph.md for the descriptor chain the table
 * follows.
 */
#include "interpose/hook_dnn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn_graph.h>
#include <library_types.h>

/* ------------------------------------------------------------------ */
/* Element sizes                                                       */

unsigned hook_cudnn_dtype_bits(int dt)
{
	switch (dt) {
	case CUDNN_DATA_FLOAT:
	case CUDNN_DATA_INT32:
	case CUDNN_DATA_UINT32:
		return 32;
	case CUDNN_DATA_DOUBLE:
	case CUDNN_DATA_INT64:
	case CUDNN_DATA_COMPLEX_FP32:
		return 64;
	case CUDNN_DATA_COMPLEX_FP64:
		return 128;
	case CUDNN_DATA_HALF:
	case CUDNN_DATA_BFLOAT16:
		return 16;
	case CUDNN_DATA_INT8:
	case CUDNN_DATA_UINT8:
	case CUDNN_DATA_BOOLEAN:
	case CUDNN_DATA_FP8_E4M3:
	case CUDNN_DATA_FP8_E5M2:
	case CUDNN_DATA_FAST_FLOAT_FOR_FP8:
	case CUDNN_DATA_FP8_E8M0:
		return 8;
	case CUDNN_DATA_FP4_E2M1:
	case CUDNN_DATA_INT4:
	case CUDNN_DATA_UINT4:
		return 4;
	default:
		return 0;
	}
}

unsigned hook_cuda_dtype_bits(int dt)
{
	switch (dt) {
	case CUDA_R_4I:
	case CUDA_R_4U:
	case CUDA_R_4F_E2M1:
		return 4;
	case CUDA_R_6F_E2M3:
	case CUDA_R_6F_E3M2:
		return 6;
	case CUDA_C_4I:
	case CUDA_C_4U:
	case CUDA_R_8I:
	case CUDA_R_8U:
	case CUDA_R_8F_E4M3:
	case CUDA_R_8F_E5M2:
	case CUDA_R_8F_UE8M0:
		return 8;
	case CUDA_C_8I:
	case CUDA_C_8U:
	case CUDA_R_16F:
	case CUDA_R_16BF:
	case CUDA_R_16I:
	case CUDA_R_16U:
		return 16;
	case CUDA_C_16F:
	case CUDA_C_16BF:
	case CUDA_C_16I:
	case CUDA_C_16U:
	case CUDA_R_32F:
	case CUDA_R_32I:
	case CUDA_R_32U:
		return 32;
	case CUDA_C_32F:
	case CUDA_C_32I:
	case CUDA_C_32U:
	case CUDA_R_64F:
	case CUDA_R_64I:
	case CUDA_R_64U:
		return 64;
	case CUDA_C_64F:
	case CUDA_C_64I:
	case CUDA_C_64U:
		return 128;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Extents                                                             */

/* elements * bits rounded up to bytes; 0 on overflow */
static uint64_t elems_to_bytes(uint64_t elems, unsigned bits)
{
	uint64_t b;

	if (__builtin_mul_overflow(elems, (uint64_t)bits, &b))
		return 0;
	if (b > UINT64_MAX - 7)
		return 0;
	return (b + 7) / 8;
}

uint64_t hook_strided_extent(int nbdims, const int64_t *dims,
			     const int64_t *strides, unsigned elem_bits)
{
	uint64_t last = 0;   /* offset (elements) of the last element */
	uint64_t term;

	if (nbdims < 1 || nbdims > HOOK_DNN_MAX_DIMS || !dims || !strides || !elem_bits)
		return 0;
	for (int i = 0; i < nbdims; i++) {
		if (dims[i] <= 0 || strides[i] < 0)
			return 0;
		if (__builtin_mul_overflow((uint64_t)(dims[i] - 1), (uint64_t)strides[i], &term) ||
		    __builtin_add_overflow(last, term, &last))
			return 0;
	}
	/* the farthest element is reached with every index at its maximum,
	 * since no stride is negative: the sum of (dim-1)*stride */
	if (last == UINT64_MAX)
		return 0;
	return elems_to_bytes(last + 1, elem_bits);
}

uint64_t hook_packed_extent(int nbdims, const int64_t *dims, unsigned elem_bits)
{
	uint64_t n = 1;

	if (nbdims < 1 || nbdims > HOOK_DNN_MAX_DIMS || !dims || !elem_bits)
		return 0;
	for (int i = 0; i < nbdims; i++) {
		if (dims[i] <= 0 || __builtin_mul_overflow(n, (uint64_t)dims[i], &n))
			return 0;
	}
	return elems_to_bytes(n, elem_bits);
}

bool hook_strided_dense(int nbdims, const int64_t *dims, const int64_t *strides)
{
	uint64_t span = hook_strided_extent(nbdims, dims, strides, 8);

	return span != 0 && span == hook_packed_extent(nbdims, dims, 8);
}

int hook_split_slices(uint64_t pages, uint64_t budget, int n)
{
	uint64_t quarter = budget / 4, k;

	if (!budget || n < 2 || pages <= budget - quarter)
		return 1;
	if (!quarter)
		return n;
	k = pages / quarter + (pages % quarter != 0);
	return k < (uint64_t)n ? (int)k : n;
}

uint64_t hook_slice_pages(const hook_slice_t *t, int nt, int first, int b, uint64_t chunk)
{
	uint64_t sum = 0;

	if (!chunk || b < 1)
		return UINT64_MAX;
	for (int i = 0; i < nt; i++) {
		uint64_t lo = t[i].ptr + (t[i].image ? (uint64_t)first * t[i].image : 0);
		uint64_t len = t[i].image ? (uint64_t)(b - 1) * t[i].image + t[i].span : t[i].span;

		if (!len)
			continue;
		sum += ((lo + len - 1) / chunk - lo / chunk + 1) * chunk;
	}
	return sum;
}

int hook_slice_images(const hook_slice_t *t, int nt, int n, int k0, uint64_t room, uint64_t pair,
		      uint64_t chunk)
{
	int last = 0;

	if (n < 1 || k0 < 1)
		return 0;
	for (int k = k0, tried = 0; k <= n && tried < 64; k++) {
		int b = (n + k - 1) / k;
		bool fits = true;

		if (b == last)
			continue;   /* the same slices as the k before */
		last = b;
		tried++;
		for (int first = 0; first < n && fits; first += b) {
			int two = n - first < 2 * b ? n - first : 2 * b;

			fits = hook_slice_pages(t, nt, first, n - first < b ? n - first : b, chunk) <= room &&
			       (!pair || hook_slice_pages(t, nt, first, two, chunk) <= pair);
		}
		if (fits)
			return b;
	}
	return 0;
}

int hook_split_images(const hook_slice_t *t, int nt, int n, uint64_t pages, uint64_t budget,
		      uint64_t chunk)
{
	uint64_t most = budget - budget / 4;
	int b, k0 = hook_split_slices(pages, budget, n);

	if (k0 < 2)
		return 0;
	/* First slices whose every two in a row fit the budget together,
	 * so that the next slice's pages can come in while one runs: in a
	 * 5-page budget, slices of 3 of random:1851711389's 16 images had
	 * a slice of all 5 pages after one of 4 that shared only 3 of
	 * them, and the fifth page waited for that slice to end - a miss
	 * in every planned iteration; slices of 2 never need more than 5
	 * pages for two.  In budgets of many pages the first candidate
	 * does: pairs of quarter-budget slices. */
	b = hook_slice_images(t, nt, n, k0, most, budget, chunk);
	if (!b)
		b = hook_slice_images(t, nt, n, k0, most, 0, chunk);
	if (!b && pages > budget) {
		/* no slicing leaves a quarter free and the call cannot run
		 * whole: slices that may take every page of the budget, all
		 * else leaving for each (random:1619885934's pooling backward
		 * at 1/2: 12 MiB of pages a slice, 16 whole, in 14) */
		b = hook_slice_images(t, nt, n, k0, budget, budget, chunk);
		if (!b)
			b = hook_slice_images(t, nt, n, k0, budget, 0, chunk);
	}
	return b < n ? b : 0;
}

int hook_slice_next(const hook_slice_t *t, int nt, int n, int first, uint64_t budget,
		    uint64_t chunk)
{
	const uint64_t room[3] = { budget / 4, budget - budget / 4, budget };

	if (first < 0 || first >= n || !budget)
		return 0;
	for (int i = 0; i < 3; i++) {
		int lo = 1, hi = n - first;

		if (hook_slice_pages(t, nt, first, 1, chunk) > room[i])
			continue;
		/* pages grow with the slice: the largest that fits */
		while (lo < hi) {
			int mid = lo + (hi - lo + 1) / 2;

			if (hook_slice_pages(t, nt, first, mid, chunk) <= room[i])
				lo = mid;
			else
				hi = mid - 1;
		}
		return lo;
	}
	return 0;
}

vmem_dtype_t hook_cudnn_dtype(int dt)
{
	switch (dt) {
	case CUDNN_DATA_FLOAT: return VMEM_DTYPE_F32;
	case CUDNN_DATA_DOUBLE: return VMEM_DTYPE_F64;
	case CUDNN_DATA_HALF: return VMEM_DTYPE_F16;
	case CUDNN_DATA_BFLOAT16: return VMEM_DTYPE_BF16;
	case CUDNN_DATA_FP8_E4M3: return VMEM_DTYPE_FP8_E4M3;
	case CUDNN_DATA_FP8_E5M2: return VMEM_DTYPE_FP8_E5M2;
	case CUDNN_DATA_INT8: return VMEM_DTYPE_I8;
	case CUDNN_DATA_UINT8: return VMEM_DTYPE_U8;
	case CUDNN_DATA_INT32: return VMEM_DTYPE_I32;
	case CUDNN_DATA_INT64: return VMEM_DTYPE_I64;
	default: return dt < 0 ? VMEM_DTYPE_UNKNOWN : VMEM_DTYPE_OTHER;
	}
}

vmem_dtype_t hook_cuda_dtype(int dt)
{
	switch (dt) {
	case CUDA_R_32F: return VMEM_DTYPE_F32;
	case CUDA_R_64F: return VMEM_DTYPE_F64;
	case CUDA_R_16F: return VMEM_DTYPE_F16;
	case CUDA_R_16BF: return VMEM_DTYPE_BF16;
	case CUDA_R_8F_E4M3: return VMEM_DTYPE_FP8_E4M3;
	case CUDA_R_8F_E5M2: return VMEM_DTYPE_FP8_E5M2;
	case CUDA_R_8I: return VMEM_DTYPE_I8;
	case CUDA_R_8U: return VMEM_DTYPE_U8;
	case CUDA_R_32I: return VMEM_DTYPE_I32;
	case CUDA_R_64I: return VMEM_DTYPE_I64;
	default: return dt < 0 ? VMEM_DTYPE_UNKNOWN : VMEM_DTYPE_OTHER;
	}
}

uint64_t hook_matrix_extent(int64_t rows, int64_t cols, int64_t ld, unsigned elem_bits)
{
	uint64_t e;

	if (rows <= 0 || cols <= 0 || ld < rows || !elem_bits)
		return 0;
	if (__builtin_mul_overflow((uint64_t)(cols - 1), (uint64_t)ld, &e) ||
	    __builtin_add_overflow(e, (uint64_t)rows, &e))
		return 0;
	return elems_to_bytes(e, elem_bits);
}

uint64_t hook_batched_extent(uint64_t one, int64_t stride_elems, int64_t batch,
			     unsigned elem_bits)
{
	uint64_t step, total;

	if (!one || batch <= 0 || stride_elems < 0 || !elem_bits)
		return 0;
	if (batch == 1)
		return one;
	if (__builtin_mul_overflow((uint64_t)(batch - 1), (uint64_t)stride_elems, &step))
		return 0;
	step = elems_to_bytes(step, elem_bits);
	if (!step && stride_elems)
		return 0;
	if (__builtin_add_overflow(step, one, &total))
		return 0;
	return total;
}

hook_gemm_extents_t hook_gemm_extents(int transa, int transb, int64_t m, int64_t n,
				      int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
				      unsigned abits, unsigned bbits, unsigned cbits)
{
	hook_gemm_extents_t e;

	/* op(A) is m x k: stored m x k when not transposed, k x m otherwise */
	e.a = transa == 0 ? hook_matrix_extent(m, k, lda, abits)
			  : hook_matrix_extent(k, m, lda, abits);
	e.b = transb == 0 ? hook_matrix_extent(k, n, ldb, bbits)
			  : hook_matrix_extent(n, k, ldb, bbits);
	e.c = hook_matrix_extent(m, n, ldc, cbits);
	return e;
}

/* ------------------------------------------------------------------ */
/* Graph-API side table                                                */

typedef struct {
	int64_t uid;
	uint64_t bytes;
	const char *role;   /* static string */
	uint8_t access;
	bool dense;         /* strides leave no gap (a whole overwrite is possible) */
} bdt_tensor_t;

/* What an operation, a graph, or anything leading to one (heuristics,
 * engine, engine config, plan) stands for.  Copied by value along the
 * chain, so destroying the graph does not lose it. */
typedef struct {
	vmem_op_kind_t kind;   /* conv kind for a lone conv, else OTHER */
	int nops;              /* 0: leads to nothing known yet */
	bool beta_nonzero;     /* the written tensor is also read */
	bool have_x, have_w;   /* halves of conv[] filled */
	int ntensors;
	bdt_tensor_t t[HOOK_BDT_MAX_TENSORS];
	int64_t conv[7];       /* n c h w k r s */
	int conv_dtype;        /* of the data-side tensor */
	hook_conv_geom_t geom; /* a lone convolution in full (conv_graph.c) */
} bdt_summary_t;

/* A CONVOLUTION descriptor's parameters, copied into the operation that
 * names it. */
typedef struct {
	int comp_type, mode, nsp;
	int npre, npost, nstride, ndil;
	int64_t pre[3], post[3], stride[3], dil[3];
} bdt_convdesc_t;

typedef struct {
	int64_t uid;
	int64_t align;
	int dtype;
	int nbdims;
	int nbstrides;
	bool is_virtual;
	bool has_uid;
	int64_t dims[HOOK_DNN_MAX_DIMS];
	int64_t strides[HOOK_DNN_MAX_DIMS];
} bdt_tensordesc_t;

typedef struct {
	int nuids, nptrs;
	bool overflow;            /* more pairs were set than fit */
	int64_t uids[HOOK_BDT_MAX_VP];
	uintptr_t ptrs[HOOK_BDT_MAX_VP];
	uintptr_t ws;
} bdt_vpack_t;

typedef struct bdt_entry {
	struct bdt_entry *next;
	uintptr_t desc;
	int type;
	uint64_t ws_bytes;
	union {
		bdt_tensordesc_t tensor;
		bdt_summary_t sum;
		bdt_vpack_t vp;
		bdt_convdesc_t conv;
	} u;
} bdt_entry_t;

#define BDT_BUCKETS 4096u

struct hook_bdt {
	pthread_mutex_t lock;   /* guards everything below */
	size_t max_entries;
	hook_bdt_stats_t st;
	bdt_entry_t *bucket[BDT_BUCKETS];
};

static bool type_is_operation(int type)
{
	switch (type) {
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_CONTRACT_BAND_MATRIX_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR:
	case CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR:
		return true;
	default:
		return false;
	}
}

/* Descriptors that lead to an operation graph and so carry a summary. */
static bool type_has_summary(int type)
{
	switch (type) {
	case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
	case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
	case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
		return true;
	default:
		return type_is_operation(type);
	}
}

static bool type_tracked(int type)
{
	return type == CUDNN_BACKEND_TENSOR_DESCRIPTOR ||
	       type == CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR ||
	       type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR ||
	       type_has_summary(type);
}

static unsigned bdt_hash(uintptr_t d)
{
	uint64_t h = (uint64_t)d * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 52) & (BDT_BUCKETS - 1);
}

static bdt_entry_t *bdt_find(hook_bdt_t *t, uintptr_t d)
{
	bdt_entry_t *e;

	if (!d)
		return NULL;
	for (e = t->bucket[bdt_hash(d)]; e; e = e->next)
		if (e->desc == d)
			return e;
	return NULL;
}

static void bdt_unlink(hook_bdt_t *t, uintptr_t d)
{
	bdt_entry_t **pp = &t->bucket[bdt_hash(d)];

	while (*pp) {
		if ((*pp)->desc == d) {
			bdt_entry_t *e = *pp;

			*pp = e->next;
			free(e);
			t->st.tracked--;
			return;
		}
		pp = &(*pp)->next;
	}
}

hook_bdt_t *hook_bdt_new(size_t max_entries)
{
	hook_bdt_t *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->max_entries = max_entries;
	return t;
}

void hook_bdt_free(hook_bdt_t *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < BDT_BUCKETS; i++) {
		bdt_entry_t *e = t->bucket[i];

		while (e) {
			bdt_entry_t *n = e->next;

			free(e);
			e = n;
		}
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static vmem_op_kind_t op_kind_of_type(int type)
{
	switch (type) {
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
		return VMEM_OP_CONV_FWD;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
		return VMEM_OP_CONV_BWD_DATA;
	case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
		return VMEM_OP_CONV_BWD_FILTER;
	default:
		return VMEM_OP_OTHER;
	}
}

bool hook_bdt_create(hook_bdt_t *t, uintptr_t desc, int type)
{
	bdt_entry_t *e;
	bool ok = true;

	if (!t || !desc)
		return false;
	pthread_mutex_lock(&t->lock);
	/* a handle cuDNN hands out again after a destroy we did not see */
	bdt_unlink(t, desc);
	if (!type_tracked(type))
		goto out;
	if (t->st.tracked >= t->max_entries || !(e = calloc(1, sizeof(*e)))) {
		t->st.untracked++;
		ok = false;
		goto out;
	}
	e->desc = desc;
	e->type = type;
	if (type_is_operation(type)) {
		e->u.sum.kind = op_kind_of_type(type);
		e->u.sum.nops = 1;
		e->u.sum.geom.optype = type;
		e->u.sum.geom.alpha = 1.0;
	}
	e->next = t->bucket[bdt_hash(desc)];
	t->bucket[bdt_hash(desc)] = e;
	if (++t->st.tracked > t->st.peak)
		t->st.peak = t->st.tracked;
out:
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void hook_bdt_destroy(hook_bdt_t *t, uintptr_t desc)
{
	if (!t || !desc)
		return;
	pthread_mutex_lock(&t->lock);
	bdt_unlink(t, desc);
	pthread_mutex_unlock(&t->lock);
}

/* ---- tensors */

static void tensor_set(hook_bdt_t *t, bdt_tensordesc_t *td, int attr, int attr_type,
		       int64_t count, const void *elems)
{
	(void)t;
	switch (attr) {
	case CUDNN_ATTR_TENSOR_UNIQUE_ID:
		if (attr_type == CUDNN_TYPE_INT64 && count >= 1) {
			td->uid = *(const int64_t *)elems;
			td->has_uid = true;
		}
		break;
	case CUDNN_ATTR_TENSOR_DATA_TYPE:
		if (attr_type == CUDNN_TYPE_DATA_TYPE && count >= 1)
			td->dtype = *(const int *)elems;
		break;
	case CUDNN_ATTR_TENSOR_DIMENSIONS:
	case CUDNN_ATTR_TENSOR_STRIDES:
		if (attr_type == CUDNN_TYPE_INT64 && count >= 1 && count <= HOOK_DNN_MAX_DIMS) {
			bool dims = attr == CUDNN_ATTR_TENSOR_DIMENSIONS;

			memcpy(dims ? td->dims : td->strides, elems, (size_t)count * sizeof(int64_t));
			*(dims ? &td->nbdims : &td->nbstrides) = (int)count;
		}
		break;
	case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
		if (attr_type == CUDNN_TYPE_BOOLEAN && count >= 1)
			td->is_virtual = *(const bool *)elems;
		break;
	case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
		if (attr_type == CUDNN_TYPE_INT64 && count >= 1)
			td->align = *(const int64_t *)elems;
		break;
	default:
		break;
	}
}

static uint64_t tensor_bytes(const bdt_tensordesc_t *td)
{
	if (td->nbdims != td->nbstrides)
		return 0;
	return hook_strided_extent(td->nbdims, td->dims, td->strides,
				   hook_cudnn_dtype_bits(td->dtype));
}

/* ---- convolution descriptors */

static void convdesc_set(bdt_convdesc_t *c, int attr, int attr_type, int64_t count,
			 const void *elems)
{
	int64_t *dst = NULL;
	int *n = NULL;

	switch (attr) {
	case CUDNN_ATTR_CONVOLUTION_COMP_TYPE:
		if (attr_type == CUDNN_TYPE_DATA_TYPE && count >= 1)
			c->comp_type = *(const int *)elems;
		return;
	case CUDNN_ATTR_CONVOLUTION_CONV_MODE:
		if (attr_type == CUDNN_TYPE_CONVOLUTION_MODE && count >= 1)
			c->mode = *(const int *)elems;
		return;
	case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
		if (attr_type == CUDNN_TYPE_INT64 && count >= 1)
			c->nsp = (int)*(const int64_t *)elems;
		return;
	case CUDNN_ATTR_CONVOLUTION_DILATIONS: dst = c->dil, n = &c->ndil; break;
	case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: dst = c->stride, n = &c->nstride; break;
	case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: dst = c->pre, n = &c->npre; break;
	case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: dst = c->post, n = &c->npost; break;
	default: return;
	}
	if (attr_type != CUDNN_TYPE_INT64 || count < 1 || count > 3)
		return;
	memcpy(dst, elems, (size_t)count * sizeof(int64_t));
	*n = (int)count;
}

/* Copies a convolution descriptor into an operation's geometry. */
static void geom_take_conv(hook_conv_geom_t *g, const bdt_convdesc_t *c)
{
	int nsp = c->nsp ? c->nsp : c->npre;

	if (nsp < 1 || nsp > 3 || c->npre != nsp || c->nstride != nsp || c->ndil != nsp ||
	    (c->npost && c->npost != nsp))
		return;
	g->have_conv = true;
	g->comp_type = c->comp_type;
	g->mode = c->mode;
	g->nsp = nsp;
	memcpy(g->pre, c->pre, sizeof(g->pre));
	memcpy(g->post, c->npost ? c->post : c->pre, sizeof(g->post));
	memcpy(g->stride, c->stride, sizeof(g->stride));
	memcpy(g->dil, c->dil, sizeof(g->dil));
}

/* Copies a tensor descriptor into an operation's geometry slot. */
static void geom_take_tensor(hook_conv_tensor_t *gt, const bdt_tensordesc_t *td)
{
	memset(gt, 0, sizeof(*gt));
	if (td->nbdims < 1 || td->nbdims > HOOK_CONV_MAX_DIMS || td->nbstrides != td->nbdims ||
	    !td->has_uid)
		return;
	gt->set = true;
	gt->is_virtual = td->is_virtual;
	gt->dtype = td->dtype;
	gt->nbdims = td->nbdims;
	gt->uid = td->uid;
	gt->align = td->align;
	memcpy(gt->dims, td->dims, (size_t)td->nbdims * sizeof(int64_t));
	memcpy(gt->strides, td->strides, (size_t)td->nbdims * sizeof(int64_t));
}

/* ---- operations */

typedef struct {
	const char *role;
	uint8_t access;
	int conv_side;   /* 1: data-side tensor (n,c,h,w), 2: filter (k,c,r,s) */
	int slot;        /* hook_conv_geom_t.t index: 0 X/DX, 1 W/DW, 2 Y/DY; -1 none */
} attr_role_t;

static attr_role_t role_of_attr(int op_type, int attr)
{
	attr_role_t r = { "t", VMEM_ACCESS_RW, 0, -1 };

	switch (attr) {
	/* forward: x = input, w = weight, y = output */
	case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X:
		return (attr_role_t){ "x", VMEM_ACCESS_R, 1, 0 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W:
		return (attr_role_t){ "w", VMEM_ACCESS_R, 2, 1 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y:
		return (attr_role_t){ "y", VMEM_ACCESS_W, 0, 2 };
	/* backward data: dx = grad input (written), dy = grad output */
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W:
		return (attr_role_t){ "w", VMEM_ACCESS_R, 2, 1 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX:
		return (attr_role_t){ "dx", VMEM_ACCESS_W, 1, 0 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY:
		return (attr_role_t){ "dy", VMEM_ACCESS_R, 0, 2 };
	/* backward filter: dw = grad weight (written) */
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X:
		return (attr_role_t){ "x", VMEM_ACCESS_R, 1, 0 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY:
		return (attr_role_t){ "dy", VMEM_ACCESS_R, 0, 2 };
	case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW:
		return (attr_role_t){ "dw", VMEM_ACCESS_W, 2, 1 };
	default:
		break;
	}
	/* other operations: every pointer is rw (the graph is "other");
	 * the role only names the slot for the trace reader */
	if (op_type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
		if (attr == CUDNN_ATTR_OPERATION_POINTWISE_XDESC)
			r.role = "x";
		else if (attr == CUDNN_ATTR_OPERATION_POINTWISE_BDESC)
			r.role = "b";
		else if (attr == CUDNN_ATTR_OPERATION_POINTWISE_YDESC)
			r.role = "y";
	} else if (op_type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
		if (attr == CUDNN_ATTR_OPERATION_MATMUL_ADESC)
			r.role = "a";
		else if (attr == CUDNN_ATTR_OPERATION_MATMUL_BDESC)
			r.role = "b";
		else if (attr == CUDNN_ATTR_OPERATION_MATMUL_CDESC)
			r.role = "c";
	}
	return r;
}

/* Adds (or replaces, by uid) one tensor of a summary. */
static void sum_add_tensor(hook_bdt_t *t, bdt_summary_t *s, int64_t uid, uint64_t bytes,
			   const char *role, uint8_t access, bool dense, bool merge)
{
	for (int i = 0; i < s->ntensors; i++) {
		if (s->t[i].uid != uid)
			continue;
		if (merge) {
			/* the same tensor in two operations of one graph */
			s->t[i].access |= access;
			s->t[i].dense = s->t[i].dense && dense;
			if (!s->t[i].bytes)
				s->t[i].bytes = bytes;
		} else {
			s->t[i] = (bdt_tensor_t){ uid, bytes, role, access, dense };
		}
		return;
	}
	if (s->ntensors >= HOOK_BDT_MAX_TENSORS) {
		t->st.dropped++;
		return;
	}
	s->t[s->ntensors++] = (bdt_tensor_t){ uid, bytes, role, access, dense };
}

static bool beta_is_nonzero(int attr_type, int64_t count, const void *elems)
{
	if (count < 1 || !elems)
		return true;   /* unreadable: assume the output is read */
	if (attr_type == CUDNN_TYPE_FLOAT)
		return *(const float *)elems != 0.0f;
	if (attr_type == CUDNN_TYPE_DOUBLE)
		return *(const double *)elems != 0.0;
	return true;
}

/* alpha and beta are FLOAT or DOUBLE; the operation's type is the last
 * one set. */
static void scale_take(hook_conv_geom_t *g, double *dst, int attr_type, int64_t count,
		       const void *elems)
{
	if (!elems || count < 1)
		return;
	if (attr_type == CUDNN_TYPE_FLOAT)
		*dst = *(const float *)elems;
	else if (attr_type == CUDNN_TYPE_DOUBLE)
		*dst = *(const double *)elems;
	else
		return;
	g->scale_type = attr_type;
}

static void op_set(hook_bdt_t *t, bdt_entry_t *e, int attr, int attr_type,
		   int64_t count, const void *elems)
{
	bdt_summary_t *s = &e->u.sum;

	if (attr == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA ||
	    attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA ||
	    attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA) {
		s->beta_nonzero = beta_is_nonzero(attr_type, count, elems);
		scale_take(&s->geom, &s->geom.beta, attr_type, count, elems);
		return;
	}
	if (attr == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA ||
	    attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA ||
	    attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA) {
		scale_take(&s->geom, &s->geom.alpha, attr_type, count, elems);
		return;
	}
	if ((attr == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC ||
	     attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC ||
	     attr == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC) &&
	    attr_type == CUDNN_TYPE_BACKEND_DESCRIPTOR && elems && count >= 1) {
		bdt_entry_t *ce = bdt_find(t, *(const uintptr_t *)elems);

		if (ce && ce->type == CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)
			geom_take_conv(&s->geom, &ce->u.conv);
		return;
	}
	if (attr_type != CUDNN_TYPE_BACKEND_DESCRIPTOR || !elems)
		return;
	for (int64_t i = 0; i < count; i++) {
		bdt_entry_t *te = bdt_find(t, ((const uintptr_t *)elems)[i]);
		const bdt_tensordesc_t *td;
		attr_role_t r;

		if (!te || te->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR)
			continue;
		td = &te->u.tensor;
		r = role_of_attr(e->type, (int)attr);
		if (r.slot >= 0)
			geom_take_tensor(&s->geom.t[r.slot], td);
		if (r.conv_side == 1 && td->nbdims >= 4) {
			s->conv[0] = td->dims[0];
			s->conv[1] = td->dims[1];
			s->conv[2] = td->dims[2];
			s->conv[3] = td->dims[3];
			s->conv_dtype = td->dtype;
			s->have_x = true;
		} else if (r.conv_side == 2 && td->nbdims >= 4) {
			s->conv[4] = td->dims[0];
			s->conv[5] = td->dims[2];
			s->conv[6] = td->dims[3];
			s->have_w = true;
		}
		/* a virtual tensor never has a pointer in a variant pack */
		if (!td->is_virtual && td->has_uid)
			sum_add_tensor(t, s, td->uid, tensor_bytes(td), r.role, r.access,
				       td->nbdims == td->nbstrides &&
					       hook_strided_dense(td->nbdims, td->dims, td->strides),
				       false);
	}
}

/* ---- graphs and what leads to them */

static void graph_set_ops(hook_bdt_t *t, bdt_entry_t *g, int64_t count, const void *elems)
{
	bdt_summary_t *s = &g->u.sum;

	memset(s, 0, sizeof(*s));
	for (int64_t i = 0; i < count; i++) {
		bdt_entry_t *oe = bdt_find(t, ((const uintptr_t *)elems)[i]);
		const bdt_summary_t *os;

		if (!oe || !type_is_operation(oe->type)) {
			/* an operation vmem does not track: the graph is "other" */
			s->nops++;
			continue;
		}
		os = &oe->u.sum;
		if (s->nops == 0 && count == 1) {
			*s = *os;
			continue;
		}
		s->nops++;
		if (os->have_x && os->have_w && !(s->have_x && s->have_w)) {
			memcpy(s->conv, os->conv, sizeof(s->conv));
			s->have_x = s->have_w = true;
		}
		for (int j = 0; j < os->ntensors; j++)
			sum_add_tensor(t, s, os->t[j].uid, os->t[j].bytes, os->t[j].role,
				       os->t[j].access, os->t[j].dense, true);
	}
	if (count != 1)
		s->kind = VMEM_OP_OTHER;
}

/* `to` now leads where `from` leads. */
static void inherit(bdt_entry_t *to, const bdt_entry_t *from)
{
	to->u.sum = from->u.sum;
	if (from->ws_bytes && to->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
		to->ws_bytes = from->ws_bytes;
}

static bool leads_somewhere(const bdt_entry_t *e)
{
	return e && type_has_summary(e->type) && e->u.sum.nops > 0;
}

void hook_bdt_set(hook_bdt_t *t, uintptr_t desc, int attr, int attr_type,
		  int64_t count, const void *elems)
{
	bdt_entry_t *e;

	if (!t || !elems || count <= 0)
		return;
	pthread_mutex_lock(&t->lock);
	e = bdt_find(t, desc);
	if (!e)
		goto out;
	if (e->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
		tensor_set(t, &e->u.tensor, attr, attr_type, count, elems);
	} else if (e->type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) {
		bdt_vpack_t *vp = &e->u.vp;
		int64_t n = count;

		if (n > HOOK_BDT_MAX_VP) {
			t->st.dropped += (uint64_t)(n - HOOK_BDT_MAX_VP);
			n = HOOK_BDT_MAX_VP;
			vp->overflow = true;
		}
		if (attr == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS && attr_type == CUDNN_TYPE_INT64) {
			memcpy(vp->uids, elems, (size_t)n * sizeof(int64_t));
			vp->nuids = (int)n;
		} else if (attr == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
			   attr_type == CUDNN_TYPE_VOID_PTR) {
			memcpy(vp->ptrs, elems, (size_t)n * sizeof(uintptr_t));
			vp->nptrs = (int)n;
		} else if (attr == CUDNN_ATTR_VARIANT_PACK_WORKSPACE &&
			   attr_type == CUDNN_TYPE_VOID_PTR) {
			vp->ws = *(const uintptr_t *)elems;
		}
	} else if (type_is_operation(e->type)) {
		op_set(t, e, attr, attr_type, count, elems);
	} else if (e->type == CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR) {
		convdesc_set(&e->u.conv, attr, attr_type, count, elems);
	} else if (e->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) {
		if (attr == CUDNN_ATTR_OPERATIONGRAPH_OPS &&
		    attr_type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
			uintptr_t handle = e->u.sum.geom.handle;

			graph_set_ops(t, e, count, elems);
			if (!e->u.sum.geom.handle)
				e->u.sum.geom.handle = handle;
		} else if (attr == CUDNN_ATTR_OPERATIONGRAPH_HANDLE &&
			   attr_type == CUDNN_TYPE_HANDLE) {
			e->u.sum.geom.handle = *(const uintptr_t *)elems;
		}
	} else if (attr_type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
		/* heuristics <- graph, engine <- graph, config <- engine,
		 * plan <- config: the first element that leads somewhere */
		for (int64_t i = 0; i < count; i++) {
			bdt_entry_t *src = bdt_find(t, ((const uintptr_t *)elems)[i]);

			if (leads_somewhere(src) && src != e) {
				inherit(e, src);
				break;
			}
		}
	}
out:
	pthread_mutex_unlock(&t->lock);
}

void hook_bdt_get(hook_bdt_t *t, uintptr_t desc, int attr, int attr_type,
		  int64_t count, const void *elems)
{
	bdt_entry_t *e;

	if (!t || !elems || count <= 0)
		return;
	pthread_mutex_lock(&t->lock);
	e = bdt_find(t, desc);
	if (!e)
		goto out;
	if (attr_type == CUDNN_TYPE_INT64 &&
	    (attr == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE ||
	     attr == CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE)) {
		int64_t v = *(const int64_t *)elems;

		if (v >= 0)
			e->ws_bytes = (uint64_t)v;
	} else if (attr_type == CUDNN_TYPE_BACKEND_DESCRIPTOR && leads_somewhere(e)) {
		/* heuristics results (engine configs), a config's engine, an
		 * engine's graph: filled by cuDNN, seen by vmem only here */
		for (int64_t i = 0; i < count; i++) {
			bdt_entry_t *dst = bdt_find(t, ((const uintptr_t *)elems)[i]);

			if (dst && dst != e && type_has_summary(dst->type) &&
			    !type_is_operation(dst->type))
				inherit(dst, e);
		}
	}
out:
	pthread_mutex_unlock(&t->lock);
}

bool hook_bdt_conv_geom(hook_bdt_t *t, uintptr_t desc, hook_conv_geom_t *out)
{
	bdt_entry_t *e;
	bool ok = false;

	if (!t)
		return false;
	pthread_mutex_lock(&t->lock);
	e = bdt_find(t, desc);
	if (leads_somewhere(e) && e->u.sum.nops == 1 && e->u.sum.kind != VMEM_OP_OTHER) {
		const hook_conv_geom_t *g = &e->u.sum.geom;

		ok = g->have_conv;
		for (int i = 0; i < 3; i++)
			ok &= g->t[i].set && !g->t[i].is_virtual;
		if (ok)
			*out = *g;
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

int hook_bdt_type(hook_bdt_t *t, uintptr_t desc)
{
	bdt_entry_t *e;
	int type = -1;

	if (!t)
		return -1;
	pthread_mutex_lock(&t->lock);
	e = bdt_find(t, desc);
	if (e)
		type = e->type;
	pthread_mutex_unlock(&t->lock);
	return type;
}

void hook_bdt_set_ws(hook_bdt_t *t, uintptr_t plan, uint64_t bytes)
{
	bdt_entry_t *e;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	e = bdt_find(t, plan);
	if (e)
		e->ws_bytes = bytes;
	pthread_mutex_unlock(&t->lock);
}

void hook_bdt_execute(hook_bdt_t *t, uintptr_t plan, uintptr_t vpack,
		      hook_bdt_exec_t *out)
{
	const bdt_summary_t *s = NULL;
	bdt_entry_t *pe, *ve;

	memset(out, 0, sizeof(*out));
	out->kind = VMEM_OP_OTHER;
	out->conv_dtype = -1;
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	pe = bdt_find(t, plan);
	ve = bdt_find(t, vpack);
	if (leads_somewhere(pe)) {
		s = &pe->u.sum;
		out->kind = s->kind;
		out->known_plan = true;
		if (s->have_x && s->have_w) {
			out->have_conv = true;
			memcpy(out->conv, s->conv, sizeof(out->conv));
			out->conv_dtype = s->conv_dtype;
		}
	}
	if (pe)
		out->ws_bytes = pe->ws_bytes;
	if (ve && ve->type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) {
		const bdt_vpack_t *vp = &ve->u.vp;
		int n = vp->nuids < vp->nptrs ? vp->nuids : vp->nptrs;

		out->refs_lost = vp->overflow;
		for (int i = 0; i < n; i++) {
			vmem_ref_t *r = &out->refs[out->nrefs];

			if (!vp->ptrs[i])
				continue;
			r->ptr = vp->ptrs[i];
			r->bytes = 0;
			r->access = VMEM_ACCESS_RW;
			r->role = "t";
			for (int j = 0; s && j < s->ntensors; j++) {
				if (s->t[j].uid != vp->uids[i])
					continue;
				r->bytes = s->t[j].bytes;
				r->role = s->t[j].role;
				if (out->kind != VMEM_OP_OTHER) {
					r->access = s->t[j].access;
					if ((r->access & VMEM_ACCESS_W) && s->beta_nonzero)
						r->access = VMEM_ACCESS_RW;
					else if (r->access == VMEM_ACCESS_W && s->t[j].dense &&
						 r->bytes)
						r->access |= VMEM_ACCESS_WHOLE;
				}
				break;
			}
			out->nrefs++;
		}
		if (vp->ws)
			out->refs[out->nrefs++] = (vmem_ref_t){
				vp->ws, out->ws_bytes,
				out->ws_bytes ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W, "ws" };
	}
	pthread_mutex_unlock(&t->lock);
}

void hook_bdt_atfork_prepare(hook_bdt_t *t)
{
	if (t)
		pthread_mutex_lock(&t->lock);
}

void hook_bdt_atfork_parent(hook_bdt_t *t)
{
	if (t)
		pthread_mutex_unlock(&t->lock);
}

void hook_bdt_atfork_child(hook_bdt_t *t)
{
	if (t)
		pthread_mutex_init(&t->lock, NULL);
}

void hook_bdt_stats(hook_bdt_t *t, hook_bdt_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	pthread_mutex_unlock(&t->lock);
}
