/* tests/simgpu/cublaslt.c - the simulated libcublasLt.so.13.
 *
 * The subset PyTorch's Linear (addmm through gemm_and_bias) uses:
 * handles, matmul / matrix-layout / preference descriptors with their
 * Set/GetAttribute calls, cublasLtMatmulAlgoGetHeuristic and
 * cublasLtMatmul, for float32 and bfloat16 data with float32 compute and
 * scale, column- and row-major layouts, transposes, strided batches, the
 * bias, ReLU and GELU epilogues and the bias-gradient epilogues (BGRADA,
 * BGRADB).  Results come from ref.c's ref_sgemm on float copies of the
 * operands (bf16 is widened exactly and the result rounded to nearest
 * even), so they are bit-identical to cuBLAS's cublasSgemm in the
 * simulator for float data; the bias is added after alpha*AB + beta*C, as
 * cudnnAddTensor would add it, and a bias gradient sums over k in
 * ascending order, as cudnnConvolutionBackwardBias does.
 *
 * Two algorithms: 0 needs no workspace, 1 ("split-K") needs 8 bytes per
 * element of D and is modelled faster.  The heuristic lists those that fit
 * the preference's workspace limit, fastest first; cublasLtMatmul refuses
 * a workspace smaller than its algorithm needs and writes all of it, so an
 * undersized, unmapped or offloaded workspace faults.
 *
 * Every range is checked (simgpu_check) and declared to the race checker
 * (simgpu_access) under "cublasLtMatmul"; on a capturing stream the call
 * is recorded, with its descriptors by value.  Descriptor structs live in
 * the opaque storage the header gives them (cublasLt*Init works on the
 * caller's memory).  Thread-safety: descriptors belong to their caller.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "ref.h"
#include "simgpu.h"

#define API __attribute__((visibility("default")))
#define MAGIC_LT 0x544c4253u      /* handle */
#define MAGIC_MD 0x444d4c54u      /* matmul descriptor */
#define MAGIC_LAY 0x594c4c54u     /* matrix layout */
#define MAGIC_PREF 0x46504c54u    /* preference */
#define NALGO 2

typedef struct {
	uint32_t magic;
	uint32_t type;
	int32_t order;
	int32_t batch;
	uint64_t rows, cols;
	int64_t ld, boff;
} layout_t;

typedef struct {
	uint32_t magic;
	int32_t compute, scale, pmode, transa, transb, transc, fill;
	uint32_t epi;
	int32_t bias_type, sm_target, fast_accum;
	void *bias, *aux;
	int64_t bias_bstride, aux_ld, aux_bstride;
} mdesc_t;

typedef struct {
	uint32_t magic;
	uint32_t search, red_mask, pad;
	uint64_t max_ws;
	uint32_t align[4];
} pref_t;

_Static_assert(sizeof(layout_t) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits");
_Static_assert(sizeof(mdesc_t) <= sizeof(cublasLtMatmulDescOpaque_t), "desc fits");
_Static_assert(sizeof(pref_t) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref fits");

struct cublasLtContext {
	uint32_t magic;
};

static layout_t *lay(cublasLtMatrixLayout_t l)
{
	layout_t *p = (layout_t *)l;

	return p && p->magic == MAGIC_LAY ? p : NULL;
}

static mdesc_t *mdesc(cublasLtMatmulDesc_t d)
{
	mdesc_t *p = (mdesc_t *)d;

	return p && p->magic == MAGIC_MD ? p : NULL;
}

static pref_t *prefer(cublasLtMatmulPreference_t d)
{
	pref_t *p = (pref_t *)d;

	return p && p->magic == MAGIC_PREF ? p : NULL;
}

/* ---------------------------------------------------------------- admin */

API cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	struct cublasLtContext *c;

	if (!h)
		return CUBLAS_STATUS_INVALID_VALUE;
	simgpu_init();
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUBLAS_STATUS_ALLOC_FAILED;
	c->magic = MAGIC_LT;
	*h = c;
	return CUBLAS_STATUS_SUCCESS;
}

static bool handle_ok(cublasLtHandle_t h)
{
	return h && ((struct cublasLtContext *)h)->magic == MAGIC_LT;
}

API cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	((struct cublasLtContext *)h)->magic = 0;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

API size_t cublasLtGetVersion(void)
{
	return CUBLAS_VERSION;
}

API size_t cublasLtGetCudartVersion(void)
{
	return CUDART_VERSION;
}

API cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value)
{
	if (!value)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (type) {
	case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; break;
	case MINOR_VERSION: *value = CUBLAS_VER_MINOR; break;
	case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; break;
	default: return CUBLAS_STATUS_INVALID_VALUE;
	}
	return CUBLAS_STATUS_SUCCESS;
}

API const char *cublasLtGetStatusName(cublasStatus_t st)
{
	switch (st) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}

API const char *cublasLtGetStatusString(cublasStatus_t st)
{
	return cublasLtGetStatusName(st);
}

/* ------------------------------------------------------- attribute tables */

/* One settable attribute: its offset and size in the descriptor. */
typedef struct {
	int attr;
	size_t off, size;
} attr_t;

#define A(name, field) { name, offsetof(STRUCT, field), sizeof(((STRUCT *)0)->field) }

#define STRUCT layout_t
static const attr_t layout_attrs[] = {
	A(CUBLASLT_MATRIX_LAYOUT_TYPE, type),
	A(CUBLASLT_MATRIX_LAYOUT_ORDER, order),
	A(CUBLASLT_MATRIX_LAYOUT_ROWS, rows),
	A(CUBLASLT_MATRIX_LAYOUT_COLS, cols),
	A(CUBLASLT_MATRIX_LAYOUT_LD, ld),
	A(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch),
	A(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, boff),
};
#undef STRUCT

#define STRUCT mdesc_t
static const attr_t desc_attrs[] = {
	A(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute),
	A(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale),
	A(CUBLASLT_MATMUL_DESC_POINTER_MODE, pmode),
	A(CUBLASLT_MATMUL_DESC_TRANSA, transa),
	A(CUBLASLT_MATMUL_DESC_TRANSB, transb),
	A(CUBLASLT_MATMUL_DESC_TRANSC, transc),
	A(CUBLASLT_MATMUL_DESC_FILL_MODE, fill),
	A(CUBLASLT_MATMUL_DESC_EPILOGUE, epi),
	A(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias),
	A(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_bstride),
	A(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux),
	A(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld),
	A(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, aux_bstride),
	A(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, sm_target),
	A(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum),
	A(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type),
};
#undef STRUCT

#define STRUCT pref_t
static const attr_t pref_attrs[] = {
	A(CUBLASLT_MATMUL_PREF_SEARCH_MODE, search),
	A(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_ws),
	A(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, red_mask),
	A(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]),
	A(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]),
	A(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]),
	A(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[3]),
};
#undef STRUCT
#undef A

static const attr_t *find_attr(const attr_t *t, size_t n, int attr)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].attr == attr)
			return &t[i];
	return NULL;
}

/* cuBLASLt's rules: Set wants exactly the attribute's size; Get with
 * size 0 answers the size in *written; a smaller buffer is refused. */
static cublasStatus_t set_attr(void *obj, const attr_t *t, size_t n, int attr,
			       const void *buf, size_t size)
{
	const attr_t *a = find_attr(t, n, attr);

	if (!a || !buf || size != a->size)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy((char *)obj + a->off, buf, size);
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t get_attr(const void *obj, const attr_t *t, size_t n, int attr,
			       void *buf, size_t size, size_t *written)
{
	const attr_t *a = find_attr(t, n, attr);

	if (!a)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (size == 0 && written) {
		*written = a->size;
		return CUBLAS_STATUS_SUCCESS;
	}
	if (!buf || size < a->size)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(buf, (const char *)obj + a->off, a->size);
	if (written)
		*written = a->size;
	return CUBLAS_STATUS_SUCCESS;
}

#define NATTR(t) (sizeof(t) / sizeof((t)[0]))

/* ------------------------------------------------------------ layouts */

static bool type_ok(uint32_t t)
{
	return t == CUDA_R_32F || t == CUDA_R_16BF;
}

static size_t type_size(uint32_t t)
{
	return t == CUDA_R_16BF ? 2 : 4;
}

API cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t l, size_t size,
						     cudaDataType type, uint64_t rows,
						     uint64_t cols, int64_t ld)
{
	layout_t *p = (layout_t *)l;

	if (!l || size < sizeof(layout_t))
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(l, 0, size);
	p->magic = MAGIC_LAY;
	p->type = (uint32_t)type;
	p->order = CUBLASLT_ORDER_COL;
	p->batch = 1;
	p->rows = rows;
	p->cols = cols;
	p->ld = ld;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
					      uint64_t rows, uint64_t cols, int64_t ld)
{
	cublasLtMatrixLayout_t p;

	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUBLAS_STATUS_ALLOC_FAILED;
	cublasLtMatrixLayoutInit_internal(p, sizeof(*p), type, rows, cols, ld);
	*l = p;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t l)
{
	if (!l)
		return CUBLAS_STATUS_SUCCESS;
	if (!lay(l))
		return CUBLAS_STATUS_INVALID_VALUE;
	((layout_t *)l)->magic = 0;
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
						    cublasLtMatrixLayoutAttribute_t attr,
						    const void *buf, size_t size)
{
	if (!lay(l))
		return CUBLAS_STATUS_INVALID_VALUE;
	return set_attr(lay(l), layout_attrs, NATTR(layout_attrs), (int)attr, buf, size);
}

API cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l,
						    cublasLtMatrixLayoutAttribute_t attr,
						    void *buf, size_t size, size_t *written)
{
	if (!lay(l))
		return CUBLAS_STATUS_INVALID_VALUE;
	return get_attr(lay(l), layout_attrs, NATTR(layout_attrs), (int)attr, buf, size,
			written);
}

/* ------------------------------------------------------ matmul descriptor */

API cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t d, size_t size,
						   cublasComputeType_t compute,
						   cudaDataType_t scale)
{
	mdesc_t *p = (mdesc_t *)d;

	if (!d || size < sizeof(mdesc_t))
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(d, 0, size);
	p->magic = MAGIC_MD;
	p->compute = (int32_t)compute;
	p->scale = (int32_t)scale;
	p->pmode = CUBLASLT_POINTER_MODE_HOST;
	p->transa = p->transb = p->transc = CUBLAS_OP_N;
	p->epi = CUBLASLT_EPILOGUE_DEFAULT;
	p->bias_type = -1;      /* unset: the type of D */
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
					    cudaDataType_t scale)
{
	cublasLtMatmulDesc_t p;

	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUBLAS_STATUS_ALLOC_FAILED;
	cublasLtMatmulDescInit_internal(p, sizeof(*p), compute, scale);
	*d = p;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulDescDestroy(const cublasLtMatmulDesc_t d)
{
	if (!d)
		return CUBLAS_STATUS_SUCCESS;
	if (!mdesc(d))
		return CUBLAS_STATUS_INVALID_VALUE;
	((mdesc_t *)d)->magic = 0;
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
						  cublasLtMatmulDescAttributes_t attr,
						  const void *buf, size_t size)
{
	if (!mdesc(d))
		return CUBLAS_STATUS_INVALID_VALUE;
	return set_attr(mdesc(d), desc_attrs, NATTR(desc_attrs), (int)attr, buf, size);
}

API cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d,
						  cublasLtMatmulDescAttributes_t attr,
						  void *buf, size_t size, size_t *written)
{
	if (!mdesc(d))
		return CUBLAS_STATUS_INVALID_VALUE;
	return get_attr(mdesc(d), desc_attrs, NATTR(desc_attrs), (int)attr, buf, size,
			written);
}

/* ----------------------------------------------------------- preference */

API cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pr,
							 size_t size)
{
	pref_t *p = (pref_t *)pr;

	if (!pr || size < sizeof(pref_t))
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(pr, 0, size);
	p->magic = MAGIC_PREF;
	p->red_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pr)
{
	cublasLtMatmulPreference_t p;

	if (!pr)
		return CUBLAS_STATUS_INVALID_VALUE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUBLAS_STATUS_ALLOC_FAILED;
	cublasLtMatmulPreferenceInit_internal(p, sizeof(*p));
	*pr = p;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulPreferenceDestroy(const cublasLtMatmulPreference_t pr)
{
	if (!pr)
		return CUBLAS_STATUS_SUCCESS;
	if (!prefer(pr))
		return CUBLAS_STATUS_INVALID_VALUE;
	((pref_t *)pr)->magic = 0;
	free(pr);
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pr,
							cublasLtMatmulPreferenceAttributes_t attr,
							const void *buf, size_t size)
{
	if (!prefer(pr))
		return CUBLAS_STATUS_INVALID_VALUE;
	return set_attr(prefer(pr), pref_attrs, NATTR(pref_attrs), (int)attr, buf, size);
}

API cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pr,
							cublasLtMatmulPreferenceAttributes_t attr,
							void *buf, size_t size, size_t *written)
{
	if (!prefer(pr))
		return CUBLAS_STATUS_INVALID_VALUE;
	return get_attr(prefer(pr), pref_attrs, NATTR(pref_attrs), (int)attr, buf, size,
			written);
}

/* --------------------------------------------------------------- matmul */

/* A validated problem: m x n output, k inner, per-batch element offsets. */
typedef struct {
	uint64_t m, n, k;
	int batch;
	bool ta, tb;
	uint32_t epi;
	uint32_t bias_type;
} problem_t;

static bool epi_supported(uint32_t e)
{
	switch (e) {
	case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU:
	case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_RELU_BIAS:
	case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS:
	case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB:
		return true;
	default:
		return false;
	}
}

static bool compute_ok(int32_t c)
{
	switch (c) {
	case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_PEDANTIC:
	case CUBLAS_COMPUTE_32F_FAST_TF32: case CUBLAS_COMPUTE_32F_FAST_16BF:
	case CUBLAS_COMPUTE_32F_FAST_16F:
		return true;
	default:
		return false;
	}
}

static bool op_of(int32_t t, bool *trans)
{
	if (t == CUBLAS_OP_N) {
		*trans = false;
		return true;
	}
	if (t == CUBLAS_OP_T || t == CUBLAS_OP_C) {
		*trans = true;
		return true;
	}
	return false;
}

static bool layout_ok(const layout_t *l)
{
	if (!type_ok(l->type) || l->batch < 1 || l->rows > INT32_MAX || l->cols > INT32_MAX)
		return false;
	if (l->order == CUBLASLT_ORDER_COL)
		return l->ld >= (int64_t)(l->rows ? l->rows : 1);
	if (l->order == CUBLASLT_ORDER_ROW)
		return l->ld >= (int64_t)(l->cols ? l->cols : 1);
	return false;
}

/* Bytes a layout spans (every batch). */
static size_t layout_bytes(const layout_t *l)
{
	uint64_t one;

	if (!l->rows || !l->cols)
		return 0;
	one = l->order == CUBLASLT_ORDER_COL ?
		(l->cols - 1) * (uint64_t)l->ld + l->rows :
		(l->rows - 1) * (uint64_t)l->ld + l->cols;
	return (size_t)((one + (uint64_t)(l->batch - 1) * (uint64_t)l->boff) * type_size(l->type));
}

static cublasStatus_t problem(const mdesc_t *d, const layout_t *a, const layout_t *b,
			      const layout_t *c, const layout_t *o, problem_t *p)
{
	uint64_t ar, ac, br, bc;

	if (!compute_ok(d->compute) || d->scale != CUDA_R_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!op_of(d->transa, &p->ta) || !op_of(d->transb, &p->tb) || d->transc != CUBLAS_OP_N)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!layout_ok(a) || !layout_ok(b) || !layout_ok(c) || !layout_ok(o))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (a->type != b->type || c->type != o->type ||
	    (d->pmode != CUBLASLT_POINTER_MODE_HOST && d->pmode != CUBLASLT_POINTER_MODE_DEVICE))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!epi_supported(d->epi))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	ar = p->ta ? a->cols : a->rows, ac = p->ta ? a->rows : a->cols;
	br = p->tb ? b->cols : b->rows, bc = p->tb ? b->rows : b->cols;
	p->m = o->rows, p->n = o->cols, p->k = ac;
	if (ar != p->m || br != p->k || bc != p->n || c->rows != o->rows || c->cols != o->cols)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (a->batch != o->batch || b->batch != o->batch || c->batch != o->batch)
		return CUBLAS_STATUS_INVALID_VALUE;
	p->batch = o->batch;
	p->epi = d->epi;
	p->bias_type = d->bias_type < 0 ? o->type : (uint32_t)d->bias_type;
	if (!type_ok(p->bias_type))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if ((p->epi & (CUBLASLT_EPILOGUE_BIAS | CUBLASLT_EPILOGUE_BGRADA |
		       CUBLASLT_EPILOGUE_BGRADB)) && !d->bias)
		return CUBLAS_STATUS_INVALID_VALUE;
	return CUBLAS_STATUS_SUCCESS;
}

static size_t algo_ws(int algo, const problem_t *p)
{
	return algo == 1 ? (size_t)(8 * p->m * p->n) : 0;
}

static double algo_seconds(int algo, const problem_t *p, size_t bytes)
{
	double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k * p->batch;

	return simgpu_op_seconds(algo == 1 ? 0.8 * flops : flops, (double)bytes);
}

static bool bias_len(const problem_t *p, uint64_t *len)
{
	if (p->epi == CUBLASLT_EPILOGUE_BGRADB)
		*len = p->n;
	else if (p->epi & (CUBLASLT_EPILOGUE_BIAS | CUBLASLT_EPILOGUE_BGRADA))
		*len = p->m;
	else
		return false;
	return true;
}

/* ---- element access with type conversion ---- */

static float bf16_to_f(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint16_t f_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);   /* quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1u);        /* round to nearest even */
	return (uint16_t)(u >> 16);
}

static float load(const void *p, uint32_t type, size_t i)
{
	return type == CUDA_R_16BF ? bf16_to_f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void store(void *p, uint32_t type, size_t i, float v)
{
	if (type == CUDA_R_16BF)
		((uint16_t *)p)[i] = f_to_bf16(v);
	else
		((float *)p)[i] = v;
}

/* Element index of (r, c) in batch `bt` of a layout. */
static size_t at(const layout_t *l, uint64_t r, uint64_t c, int bt)
{
	size_t i = l->order == CUBLASLT_ORDER_COL ? r + c * (uint64_t)l->ld :
						    r * (uint64_t)l->ld + c;
	return i + (size_t)bt * (size_t)l->boff;
}

/* packed column-major float copy of op(X) (rows x cols of op) */
static void gather(const layout_t *l, const void *p, bool trans, uint64_t rows,
		   uint64_t cols, int bt, float *out)
{
	for (uint64_t c = 0; c < cols; c++)
		for (uint64_t r = 0; r < rows; r++)
			out[r + c * rows] = load(p, l->type,
						 trans ? at(l, c, r, bt) : at(l, r, c, bt));
}

static float gelu(float x)
{
	/* the tanh approximation cuBLASLt documents for its GELU epilogue */
	return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* One matmul by value: what a CUDA graph replays. */
typedef struct {
	mdesc_t d;
	layout_t a, b, c, o;
	problem_t p;
	int algo;
	float alpha, beta;              /* host pointer mode */
	const float *alpha_dev, *beta_dev;
	const void *A, *B, *C;
	void *D, *ws;
	size_t need;
} lt_call_t;

static cublasStatus_t lt_run(const lt_call_t *k, cudaStream_t stream)
{
	const problem_t *p = &k->p;
	size_t ab = layout_bytes(&k->a), bb = layout_bytes(&k->b);
	size_t cb = layout_bytes(&k->c), db = layout_bytes(&k->o);
	float alpha = k->alpha, beta = k->beta;
	uint64_t blen = 0;
	bool has_bias = bias_len(p, &blen);
	size_t bias_bytes = (size_t)blen * type_size(p->bias_type);
	bool bgrad = p->epi == CUBLASLT_EPILOGUE_BGRADA || p->epi == CUBLASLT_EPILOGUE_BGRADB;
	bool in_place = k->C == k->D;
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;

	simgpu_op_begin("cublasLtMatmul");
	if (k->alpha_dev) {
		simgpu_check(k->alpha_dev, sizeof(float), false);
		simgpu_check(k->beta_dev, sizeof(float), false);
		simgpu_access(k->alpha_dev, sizeof(float), SIMGPU_ACC_R);
		simgpu_access(k->beta_dev, sizeof(float), SIMGPU_ACC_R);
		if (!simgpu_dryrun())
			alpha = *k->alpha_dev, beta = *k->beta_dev;
	}
	if (p->k) {
		simgpu_check(k->A, ab, false);
		simgpu_check(k->B, bb, false);
		simgpu_access(k->A, ab, SIMGPU_ACC_R);
		simgpu_access(k->B, bb, SIMGPU_ACC_R);
	}
	/* beta == 0: C is not read (NaN or poison in it stays out) */
	bool c_read = k->alpha_dev || beta != 0.0f;
	if (c_read && !in_place) {
		simgpu_check(k->C, cb, false);
		simgpu_access(k->C, cb, SIMGPU_ACC_R);
	}
	simgpu_check(k->D, db, false);
	simgpu_access(k->D, db, in_place && c_read ? SIMGPU_ACC_RW : SIMGPU_ACC_W);
	if (has_bias) {
		size_t span = bias_bytes + (size_t)(p->batch - 1) * (size_t)k->d.bias_bstride *
			      type_size(p->bias_type);

		simgpu_check(k->d.bias, span, false);
		simgpu_access(k->d.bias, span, bgrad ? SIMGPU_ACC_W : SIMGPU_ACC_R);
	}
	if (k->need) {
		simgpu_check(k->ws, k->need, false);
		simgpu_access(k->ws, k->need, SIMGPU_ACC_W);
		if (!simgpu_dryrun())
			memset(k->ws, 0x5a, k->need);
	}
	if (!simgpu_dryrun() && p->m && p->n) {
		size_t mk = (size_t)(p->m * p->k), kn = (size_t)(p->k * p->n),
		       mn = (size_t)(p->m * p->n);
		float *af = malloc(sizeof(float) * (mk ? mk : 1));
		float *bf = malloc(sizeof(float) * (kn ? kn : 1));
		float *df = malloc(sizeof(float) * mn);

		if (!af || !bf || !df) {
			st = CUBLAS_STATUS_ALLOC_FAILED;
		} else {
			for (int bt = 0; bt < p->batch && !st; bt++) {
				gather(&k->a, k->A, p->ta, p->m, p->k, bt, af);
				gather(&k->b, k->B, p->tb, p->k, p->n, bt, bf);
				if (c_read)
					gather(&k->c, k->C, false, p->m, p->n, bt, df);
				if (ref_sgemm(false, false, (int)p->m, (int)p->n, (int)p->k, alpha,
					      af, (int)p->m, bf, (int)(p->k ? p->k : 1),
					      c_read ? beta : 0.0f, df, (int)p->m)) {
					st = CUBLAS_STATUS_ALLOC_FAILED;
					break;
				}
				/* epilogue, in float, before rounding to D's type */
				const char *bias = k->d.bias ? (const char *)k->d.bias +
					(size_t)bt * (size_t)k->d.bias_bstride *
					type_size(p->bias_type) : NULL;
				if (p->epi == CUBLASLT_EPILOGUE_BGRADA) {
					for (uint64_t i = 0; i < p->m; i++) {
						float acc = 0.0f;

						for (uint64_t l = 0; l < p->k; l++)
							acc += af[i + l * p->m];
						store((void *)bias, p->bias_type, i, acc);
					}
				} else if (p->epi == CUBLASLT_EPILOGUE_BGRADB) {
					for (uint64_t j = 0; j < p->n; j++) {
						float acc = 0.0f;

						for (uint64_t l = 0; l < p->k; l++)
							acc += bf[l + j * p->k];
						store((void *)bias, p->bias_type, j, acc);
					}
				}
				for (uint64_t j = 0; j < p->n; j++)
					for (uint64_t i = 0; i < p->m; i++) {
						float v = df[i + j * p->m];

						if (p->epi & CUBLASLT_EPILOGUE_BIAS)
							v += load(bias, p->bias_type, i);
						if ((p->epi & CUBLASLT_EPILOGUE_RELU) && !bgrad)
							v = v > 0.0f ? v : 0.0f;
						if ((p->epi & CUBLASLT_EPILOGUE_GELU) && !bgrad)
							v = gelu(v);
						store(k->D, k->o.type, at(&k->o, i, j, bt), v);
					}
			}
		}
		free(af);
		free(bf);
		free(df);
	}
	if (st == CUBLAS_STATUS_SUCCESS)
		simgpu_submit(stream, SIMGPU_ENGINE_COMPUTE,
			      algo_seconds(k->algo, p, ab + bb + cb + db));
	else
		simgpu_access_discard();
	simgpu_op_end();
	return st;
}

static void lt_replay(const void *args, void *stream)
{
	lt_run(args, stream);
}

/* The algorithms that run this problem within `max_ws`, fastest first. */
static int algo_list(const problem_t *p, size_t max_ws, int *ids)
{
	int n = 0;

	for (int a = NALGO - 1; a >= 0; a--)
		if (algo_ws(a, p) <= max_ws)
			ids[n++] = a;
	return n;
}

API cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
						  cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
						  cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t o,
						  cublasLtMatmulPreference_t pr, int req,
						  cublasLtMatmulHeuristicResult_t res[], int *ret)
{
	problem_t p;
	cublasStatus_t st;
	int ids[NALGO], n;

	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mdesc(d) || !lay(a) || !lay(b) || !lay(c) || !lay(o) || !prefer(pr) || req <= 0 ||
	    !res || !ret)
		return CUBLAS_STATUS_INVALID_VALUE;
	if ((st = problem(mdesc(d), lay(a), lay(b), lay(c), lay(o), &p)))
		return st;
	n = algo_list(&p, (size_t)prefer(pr)->max_ws, ids);
	if (n == 0)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (n > req)
		n = req;
	for (int i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].algo.data[0] = 0x53474c54u;     /* marks the simulator's algos */
		res[i].algo.data[1] = (uint64_t)ids[i];
		res[i].workspaceSize = algo_ws(ids[i], &p);
		res[i].state = CUBLAS_STATUS_SUCCESS;
		res[i].wavesCount = 1.0f;
	}
	*ret = n;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
				  const void *A, cublasLtMatrixLayout_t ad, const void *B,
				  cublasLtMatrixLayout_t bd, const void *beta, const void *C,
				  cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t od,
				  const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
				  cudaStream_t stream)
{
	lt_call_t k;
	cublasStatus_t st;

	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mdesc(d) || !lay(ad) || !lay(bd) || !lay(cd) || !lay(od) || !alpha || !beta || !D)
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(&k, 0, sizeof(k));
	k.d = *mdesc(d);
	k.a = *lay(ad), k.b = *lay(bd), k.c = *lay(cd), k.o = *lay(od);
	if ((st = problem(&k.d, &k.a, &k.b, &k.c, &k.o, &k.p)))
		return st;
	if (k.p.k && (!A || !B))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (algo) {
		if (algo->data[0] != 0x53474c54u || algo->data[1] >= NALGO)
			return CUBLAS_STATUS_INVALID_VALUE;
		k.algo = (int)algo->data[1];
	} else {
		int ids[NALGO];

		if (!algo_list(&k.p, ws ? ws_bytes : 0, ids))
			return CUBLAS_STATUS_NOT_SUPPORTED;
		k.algo = ids[0];
	}
	k.need = algo_ws(k.algo, &k.p);
	if (k.need > ws_bytes || (k.need && !ws))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (k.d.pmode == CUBLASLT_POINTER_MODE_DEVICE) {
		k.alpha_dev = alpha;
		k.beta_dev = beta;
	} else {
		k.alpha = *(const float *)alpha;
		k.beta = *(const float *)beta;
	}
	if (!C)
		C = D;
	k.A = A, k.B = B, k.C = C, k.D = D, k.ws = ws;
	switch (simgpu_capture(stream, "cublasLtMatmul", lt_replay, &k, sizeof(k))) {
	case 1:
		return CUBLAS_STATUS_SUCCESS;
	case -1:
		return CUBLAS_STATUS_EXECUTION_FAILED;
	default:
		return lt_run(&k, stream);
	}
}
