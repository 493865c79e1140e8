/* tests/simgpu/cublas.c - the simulated libcublas.so.13.
 *
 * The float subset a training program uses: handles, stream, workspace,
 * math and pointer modes, SGEMM (plain, GemmEx and strided-batched with
 * float data; TF32 compute types are computed in full fp32), SAXPY and
 * SSCAL.  The exported names are the ones CUDA 13's cublas_v2.h maps the
 * calls to (cublasSgemm -> cublasSgemm_v2, ...; cublasGemmEx and
 * cublasSetMathMode have no _v2 form).  Results come from ref.c: each C
 * element sums its k products in ascending order, then C = alpha*sum +
 * beta*C, with beta == 0 never reading C.  Every range is checked with
 * simgpu_check under the function's name; dry-run skips the arithmetic.
 *
 * Thread-safety: handles belong to their caller, as in cuBLAS.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "ref.h"
#include "simgpu.h"

#define API __attribute__((visibility("default")))
#define MAGIC_BLAS 0x73616c42u /* "Blas" */

struct cublasContext {
	uint32_t magic;
	cudaStream_t stream;
	void *workspace;
	size_t workspace_bytes;
	cublasPointerMode_t pointer_mode;
	cublasMath_t math;
};

static bool handle_ok(cublasHandle_t h)
{
	return h && h->magic == MAGIC_BLAS;
}

/* ---------------------------------------------------------------- admin */

API cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
	if (!handle)
		return CUBLAS_STATUS_INVALID_VALUE;
	simgpu_init();
	struct cublasContext *h = calloc(1, sizeof(*h));
	if (!h)
		return CUBLAS_STATUS_ALLOC_FAILED;
	h->magic = MAGIC_BLAS;
	h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
	h->math = CUBLAS_DEFAULT_MATH;
	*handle = h;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->magic = 0;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *version)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!version)
		return CUBLAS_STATUS_INVALID_VALUE;
	*version = CUBLAS_VERSION;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
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

API size_t cublasGetCudartVersion(void)
{
	return CUDART_VERSION;
}

API cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t stream)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *stream)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!stream)
		return CUBLAS_STATUS_INVALID_VALUE;
	*stream = h->stream;
	return CUBLAS_STATUS_SUCCESS;
}

/* The simulated kernels need no workspace; the range is checked so a bad
 * one is reported at the call that hands it over. */
API cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (bytes && !ws)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (bytes) {
		simgpu_op_begin("cublasSetWorkspace_v2");
		simgpu_check(ws, bytes, false);
		simgpu_op_end();
	}
	h->workspace = ws;
	h->workspace_bytes = bytes;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
		return CUBLAS_STATUS_INVALID_VALUE;
	h->pointer_mode = mode;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t *mode)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = h->pointer_mode;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->math = mode;
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = h->math;
	return CUBLAS_STATUS_SUCCESS;
}

API const char *cublasGetStatusName(cublasStatus_t st)
{
	switch (st) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}

API const char *cublasGetStatusString(cublasStatus_t st)
{
	switch (st) {
	case CUBLAS_STATUS_SUCCESS: return "success";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
	case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
	case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
	case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
	default: return "unknown error";
	}
}

/* ----------------------------------------------------------------- BLAS */

/* A scalar argument: a host pointer, or device memory in device pointer
 * mode (read directly: simulated device memory is host memory). */
static float scalar(cublasHandle_t h, const float *p)
{
	if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
		simgpu_check(p, sizeof(float), false);
		simgpu_access(p, sizeof(float), SIMGPU_ACC_R);
		if (simgpu_dryrun())
			return 1.0f;
	}
	return *p;
}

static void submit(cublasHandle_t h, double flops, double bytes)
{
	simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, simgpu_op_seconds(flops, bytes));
}

static bool op_ok(cublasOperation_t op, bool *trans)
{
	switch (op) {
	case CUBLAS_OP_N: *trans = false; return true;
	case CUBLAS_OP_T: case CUBLAS_OP_C: *trans = true; return true;
	default: return false;
	}
}

/* bytes spanned by a column-major rows x cols matrix with leading dim ld */
static size_t mat_bytes(int rows, int cols, int ld)
{
	if (rows <= 0 || cols <= 0)
		return 0;
	return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float);
}

/* One float GEMM by value: what a CUDA graph replays.  Scalars are read
 * at the call in host pointer mode (as cuBLAS does when it is captured)
 * and at execution from device memory in device pointer mode. */
typedef struct {
	const char *op;
	bool tra, trb;
	int m, n, k, lda, ldb, ldc;
	float al, be;
	const float *alpha_dev, *beta_dev;   /* device pointer mode */
	const float *a, *b;
	float *c;
	size_t ab, bb, cb;
} gemm_args_t;

static cublasStatus_t gemm_run(const gemm_args_t *g, cudaStream_t stream)
{
	float al = g->al, be = g->be;

	simgpu_op_begin(g->op);
	if (g->alpha_dev) {
		simgpu_check(g->alpha_dev, sizeof(float), false);
		simgpu_check(g->beta_dev, sizeof(float), false);
		simgpu_access(g->alpha_dev, sizeof(float), SIMGPU_ACC_R);
		simgpu_access(g->beta_dev, sizeof(float), SIMGPU_ACC_R);
		if (!simgpu_dryrun())
			al = *g->alpha_dev, be = *g->beta_dev;
	}
	if (g->ab) {
		simgpu_check(g->a, g->ab, false);
		simgpu_access(g->a, g->ab, SIMGPU_ACC_R);
	}
	if (g->bb) {
		simgpu_check(g->b, g->bb, false);
		simgpu_access(g->b, g->bb, SIMGPU_ACC_R);
	}
	simgpu_check(g->c, g->cb, false);
	/* beta == 0 never reads C (cuBLAS's rule: NaN or poison in C stays out) */
	simgpu_access(g->c, g->cb, g->alpha_dev || be != 0.0f ? SIMGPU_ACC_RW : SIMGPU_ACC_W);
	if (!simgpu_dryrun() &&
	    ref_sgemm(g->tra, g->trb, g->m, g->n, g->k, al, g->a, g->lda, g->b, g->ldb, be,
		      g->c, g->ldc)) {
		simgpu_access_discard();
		simgpu_op_end();
		return CUBLAS_STATUS_ALLOC_FAILED;
	}
	simgpu_submit(stream, SIMGPU_ENGINE_COMPUTE,
		      simgpu_op_seconds(2.0 * g->m * g->n * g->k,
					(double)g->ab + g->bb + 2.0 * g->cb));
	simgpu_op_end();
	return CUBLAS_STATUS_SUCCESS;
}

static void gemm_replay(const void *args, void *stream)
{
	gemm_run(args, stream);
}

/* One float GEMM, arguments already validated except the matrices. */
static cublasStatus_t sgemm(cublasHandle_t h, const char *op, cublasOperation_t ta,
			    cublasOperation_t tb, int m, int n, int k, const float *alpha,
			    const float *a, int lda, const float *b, int ldb, const float *beta,
			    float *c, int ldc)
{
	gemm_args_t g;

	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	memset(&g, 0, sizeof(g));
	if (!op_ok(ta, &g.tra) || !op_ok(tb, &g.trb) || m < 0 || n < 0 || k < 0 || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (lda < (g.tra ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) ||
	    ldb < (g.trb ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	g.op = op;
	g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
	if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
		g.alpha_dev = alpha;
		g.beta_dev = beta;
	} else {
		g.al = *alpha;
		g.be = *beta;
	}
	g.ab = k ? mat_bytes(g.tra ? k : m, g.tra ? m : k, lda) : 0;
	g.bb = k ? mat_bytes(g.trb ? n : k, g.trb ? k : n, ldb) : 0;
	g.cb = mat_bytes(m, n, ldc);
	g.a = a, g.b = b, g.c = c;
	if ((g.ab && !a) || (g.bb && !b) || !c)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (simgpu_capture(h->stream, op, gemm_replay, &g, sizeof(g))) {
	case 1:
		return CUBLAS_STATUS_SUCCESS;   /* recorded into the graph */
	case -1:
		return CUBLAS_STATUS_EXECUTION_FAILED;
	default:
		return gemm_run(&g, h->stream);
	}
}

API cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
				  int m, int n, int k, const float *alpha, const float *a, int lda,
				  const float *b, int ldb, const float *beta, float *c, int ldc)
{
	return sgemm(h, __func__, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* float in, float out; fp32 and TF32 compute types are all computed in
 * fp32, so the result does not depend on the math mode. */
static bool gemm_ex_types(cudaDataType at, cudaDataType bt, cudaDataType ct,
			  cublasComputeType_t comp)
{
	if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F)
		return false;
	switch (comp) {
	case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_PEDANTIC:
	case CUBLAS_COMPUTE_32F_FAST_TF32: case CUBLAS_COMPUTE_32F_FAST_16F:
	case CUBLAS_COMPUTE_32F_FAST_16BF:
		return true;
	default:
		/* cudaDataType passed as compute type by old code */
		return (int)comp == (int)CUDA_R_32F;
	}
}

API cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
				int m, int n, int k, const void *alpha, const void *a,
				cudaDataType at, int lda, const void *b, cudaDataType bt, int ldb,
				const void *beta, void *c, cudaDataType ct, int ldc,
				cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
	(void)algo;
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!gemm_ex_types(at, bt, ct, comp))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return sgemm(h, __func__, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static cublasStatus_t sgemm_batched(cublasHandle_t h, const char *op, cublasOperation_t ta,
				    cublasOperation_t tb,
				    int m, int n, int k, const float *alpha, const float *a, int lda,
				    long long sa, const float *b, int ldb, long long sb,
				    const float *beta, float *c, int ldc, long long sc, int count)
{
	if (count < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	for (int i = 0; i < count; i++) {
		cublasStatus_t st = sgemm(h, op, ta, tb, m, n, k, alpha, a ? a + i * sa : NULL, lda,
					  b ? b + i * sb : NULL, ldb, beta, c ? c + i * sc : NULL, ldc);
		if (st)
			return st;
	}
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
					     cublasOperation_t tb, int m, int n, int k,
					     const float *alpha, const float *a, int lda,
					     long long sa, const float *b, int ldb, long long sb,
					     const float *beta, float *c, int ldc, long long sc,
					     int count)
{
	return sgemm_batched(h, __func__, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta,
			     c, ldc, sc, count);
}

API cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
					      cublasOperation_t tb, int m, int n, int k,
					      const void *alpha, const void *a, cudaDataType at,
					      int lda, long long sa, const void *b, cudaDataType bt,
					      int ldb, long long sb, const void *beta, void *c,
					      cudaDataType ct, int ldc, long long sc, int count,
					      cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
	(void)algo;
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!gemm_ex_types(at, bt, ct, comp))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return sgemm_batched(h, __func__, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta,
			     c, ldc, sc, count);
}

/* bytes spanned by n elements with increment inc */
static size_t vec_bytes(int n, int inc)
{
	size_t ainc = (size_t)(inc < 0 ? -(long)inc : inc);
	return ((size_t)(n - 1) * ainc + 1) * sizeof(float);
}

API cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha, const float *x,
				  int incx, float *y, int incy)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!alpha || incx == 0 || incy == 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (n <= 0)
		return CUBLAS_STATUS_SUCCESS;
	if (!x || !y)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (simgpu_capture_refuse(h->stream, __func__))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	simgpu_op_begin(__func__);
	float al = scalar(h, alpha);
	simgpu_check(x, vec_bytes(n, incx), false);
	simgpu_check(y, vec_bytes(n, incy), false);
	simgpu_access(x, vec_bytes(n, incx), SIMGPU_ACC_R);
	simgpu_access(y, vec_bytes(n, incy), SIMGPU_ACC_RW);
	if (!simgpu_dryrun())
		ref_saxpy(n, al, x, incx, y, incy);
	submit(h, 2.0 * n, 12.0 * n);
	simgpu_op_end();
	return CUBLAS_STATUS_SUCCESS;
}

API cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float *alpha, float *x, int incx)
{
	if (!handle_ok(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!alpha)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (n <= 0 || incx <= 0)
		return CUBLAS_STATUS_SUCCESS;
	if (!x)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (simgpu_capture_refuse(h->stream, __func__))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	simgpu_op_begin(__func__);
	float al = scalar(h, alpha);
	simgpu_check(x, vec_bytes(n, incx), false);
	simgpu_access(x, vec_bytes(n, incx), SIMGPU_ACC_RW);
	if (!simgpu_dryrun())
		ref_sscal(n, al, x, incx);
	submit(h, (double)n, 8.0 * n);
	simgpu_op_end();
	return CUBLAS_STATUS_SUCCESS;
}
