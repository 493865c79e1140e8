/* interpose/hook_cublas.c - cuBLAS and cuBLASLt: GEMMs, the level-1 calls
 * a framework uses, and the stream and workspace bindings.
 *
 * GEMM operands are column-major: op(A) is m x k, op(B) is k x n, C is
 * m x n, each stored with its leading dimension (hook_gemm_extents).  C is
 * written, and read too when beta != 0; beta lives on the host unless the
 * handle is in device pointer mode, where vmem cannot read it and assumes
 * it is not 0.  PyTorch sends float GEMMs to cublasSgemm, half/bf16 to
 * cublasGemmEx, batched matmuls to cublasSgemmStridedBatched (float) or
 * cublasGemmStridedBatchedEx (half/bf16) and Linear with bias to
 * cublasLtMatmul (DESIGN.md, Hazards; docs/pytorch-calls.md).
 *
 * cublasSetWorkspace_v2 hands cuBLAS a buffer that every later call on the
 * handle may use as scratch: vmem records it per handle and adds it to
 * each GEMM on that handle as a written "ws" ref.
 */
#include <pthread.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "interpose/hook_dnn.h"
#include "interpose/hooks.h"
#include "interpose/log.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define CUBLAS_REALS(X)                                                                   \
	X(cublasGetStream_v2, cublasStatus_t, (cublasHandle_t h, cudaStream_t *s), (h, s)) \
	X(cublasSetStream_v2, cublasStatus_t, (cublasHandle_t h, cudaStream_t s), (h, s))  \
	X(cublasGetPointerMode_v2, cublasStatus_t,                                         \
	  (cublasHandle_t h, cublasPointerMode_t *m), (h, m))                              \
	X(cublasSetWorkspace_v2, cublasStatus_t,                                           \
	  (cublasHandle_t h, void *ws, size_t bytes), (h, ws, bytes))                      \
	X(cublasSgemm_v2, cublasStatus_t,                                                  \
	  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,     \
	   int k, const float *alpha, const float *A, int lda, const float *B, int ldb,    \
	   const float *beta, float *C, int ldc),                                          \
	  (h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))                       \
	X(cublasGemmEx, cublasStatus_t,                                                    \
	  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,     \
	   int k, const void *alpha, const void *A, cudaDataType at, int lda,              \
	   const void *B, cudaDataType bt, int ldb, const void *beta, void *C,             \
	   cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo),     \
	  (h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp,      \
	   algo))                                                                          \
	X(cublasGemmStridedBatchedEx, cublasStatus_t,                                      \
	  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,     \
	   int k, const void *alpha, const void *A, cudaDataType at, int lda,              \
	   long long int sa, const void *B, cudaDataType bt, int ldb, long long int sb,    \
	   const void *beta, void *C, cudaDataType ct, int ldc, long long int sc,          \
	   int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo),                    \
	  (h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,    \
	   sc, batch, comp, algo))                                                         \
	X(cublasSgemmStridedBatched, cublasStatus_t,                                       \
	  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,     \
	   int k, const float *alpha, const float *A, int lda, long long int sa,           \
	   const float *B, int ldb, long long int sb, const float *beta, float *C,         \
	   int ldc, long long int sc, int batch),                                          \
	  (h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch))    \
	X(cublasSaxpy_v2, cublasStatus_t,                                                  \
	  (cublasHandle_t h, int n, const float *alpha, const float *x, int incx,          \
	   float *y, int incy),                                                            \
	  (h, n, alpha, x, incx, y, incy))                                                 \
	X(cublasSscal_v2, cublasStatus_t,                                                  \
	  (cublasHandle_t h, int n, const float *alpha, float *x, int incx),               \
	  (h, n, alpha, x, incx))

#define CUBLASLT_REALS(X)                                                                 \
	X(cublasLtMatmul, cublasStatus_t,                                                  \
	  (cublasLtHandle_t h, cublasLtMatmulDesc_t md, const void *alpha, const void *A,  \
	   cublasLtMatrixLayout_t ad, const void *B, cublasLtMatrixLayout_t bd,            \
	   const void *beta, const void *C, cublasLtMatrixLayout_t cd, void *D,            \
	   cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo, void *ws,          \
	   size_t wsb, cudaStream_t s),                                                    \
	  (h, md, alpha, A, ad, B, bd, beta, C, cd, D, dd, algo, ws, wsb, s))              \
	X(cublasLtMatrixLayoutGetAttribute, cublasStatus_t,                                \
	  (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, void *buf,         \
	   size_t size, size_t *written),                                                  \
	  (l, a, buf, size, written))                                                      \
	X(cublasLtMatmulDescGetAttribute, cublasStatus_t,                                  \
	  (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, void *buf,            \
	   size_t size, size_t *written),                                                  \
	  (d, a, buf, size, written))

#define CUBLAS_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUBLAS, name, ret, params, args)
#define CUBLASLT_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUBLASLT, name, ret, params, args)
CUBLAS_REALS(CUBLAS_REAL)
CUBLASLT_REALS(CUBLASLT_REAL)

#define BLAS_MISSING(name) \
	((cublasStatus_t)hook_missing(name, CUBLAS_STATUS_NOT_INITIALIZED))

/* ------------------------------------------------------------------ */
/* Per-handle workspace (cublasSetWorkspace_v2).  A process has a handful
 * of handles (PyTorch: one per device and thread); a fixed table keeps the
 * hot path allocation-free.  `ws_lock` guards it. */

#define WS_SLOTS 256

static struct {
	const void *handle;
	const void *ptr;
	size_t bytes;
} ws_slot[WS_SLOTS];
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ws_fork_once = PTHREAD_ONCE_INIT;

/* fork (DataLoader workers): prepare waits for any table update to end,
 * so the child's copy is consistent; the child re-initialises the lock,
 * since the thread that held it does not exist there. */
static void ws_fork_prepare(void) { pthread_mutex_lock(&ws_lock); }
static void ws_fork_parent(void) { pthread_mutex_unlock(&ws_lock); }
static void ws_fork_child(void) { pthread_mutex_init(&ws_lock, NULL); }

static void ws_fork_register(void)
{
	pthread_atfork(ws_fork_prepare, ws_fork_parent, ws_fork_child);
}

/* Every use of ws_lock goes through here: the handlers are registered
 * (once) before the lock is first taken. */
static void ws_lock_take(void)
{
	pthread_once(&ws_fork_once, ws_fork_register);
	pthread_mutex_lock(&ws_lock);
}

static void ws_record(const void *handle, const void *ptr, size_t bytes)
{
	int free_slot = -1;

	ws_lock_take();
	for (int i = 0; i < WS_SLOTS; i++) {
		if (ws_slot[i].handle == handle) {
			free_slot = i;
			break;
		}
		if (!ws_slot[i].handle && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		/* a NULL workspace gives the handle back to cuBLAS' own pool */
		ws_slot[free_slot].handle = ptr ? handle : NULL;
		ws_slot[free_slot].ptr = ptr;
		ws_slot[free_slot].bytes = bytes;
	} else {
		vmem_warn("cublasSetWorkspace_v2: more than %d handles with a workspace, "
			  "handle %p not followed; its GEMMs do not list the workspace",
			  WS_SLOTS, handle);
	}
	pthread_mutex_unlock(&ws_lock);
}

static void ws_ref(hook_call_t *c, const void *handle)
{
	const void *ptr = NULL;
	size_t bytes = 0;

	ws_lock_take();
	for (int i = 0; i < WS_SLOTS; i++) {
		if (ws_slot[i].handle == handle) {
			ptr = ws_slot[i].ptr;
			bytes = ws_slot[i].bytes;
			break;
		}
	}
	pthread_mutex_unlock(&ws_lock);
	hook_call_ref(c, ptr, bytes, VMEM_ACCESS_W, "ws");
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

static cudaStream_t blas_stream(cublasHandle_t h)
{
	real_cublasGetStream_v2_t get = real_cublasGetStream_v2();
	cudaStream_t s = NULL;

	if (h && get && get(h, &s) != CUBLAS_STATUS_SUCCESS)
		s = NULL;
	return s;
}

/* True when beta may be non-zero.  `bits` is the scalar's width: 16
 * (half or bf16: any bit but the sign makes it non-zero), 32 float or
 * int, 64 double.  A scalar in device memory or of unknown type counts as
 * non-zero: reading C needlessly costs time, skipping it loses data. */
static bool beta_nonzero(const void *beta, bool on_host, unsigned bits, bool is_int)
{
	if (!beta || !on_host)
		return true;
	switch (bits) {
	case 16:
		return (*(const uint16_t *)beta & 0x7fffu) != 0;
	case 32:
		if (is_int)
			return *(const int32_t *)beta != 0;
		return *(const float *)beta != 0.0f;
	case 64:
		return *(const double *)beta != 0.0;
	default:
		return true;
	}
}

static bool host_pointer_mode(cublasHandle_t h)
{
	real_cublasGetPointerMode_v2_t get = real_cublasGetPointerMode_v2();
	cublasPointerMode_t m = CUBLAS_POINTER_MODE_HOST;

	if (!get || get(h, &m) != CUBLAS_STATUS_SUCCESS)
		return false;
	return m == CUBLAS_POINTER_MODE_HOST;
}

/* Width of alpha/beta for a cublasGemmEx compute type. */
static unsigned compute_scalar_bits(cublasComputeType_t ct, bool *is_int)
{
	*is_int = false;
	switch (ct) {
	case CUBLAS_COMPUTE_16F:
	case CUBLAS_COMPUTE_16F_PEDANTIC:
		return 16;
	case CUBLAS_COMPUTE_64F:
	case CUBLAS_COMPUTE_64F_PEDANTIC:
	case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
		return 64;
	case CUBLAS_COMPUTE_32I:
	case CUBLAS_COMPUTE_32I_PEDANTIC:
		*is_int = true;
		return 32;
	case CUBLAS_COMPUTE_32F:
	case CUBLAS_COMPUTE_32F_PEDANTIC:
	case CUBLAS_COMPUTE_32F_FAST_16F:
	case CUBLAS_COMPUTE_32F_FAST_16BF:
	case CUBLAS_COMPUTE_32F_FAST_TF32:
	case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
		return 32;
	default:
		return 0;
	}
}

/* Width of a scale of cudaDataType `t` (cuBLASLt's scale type). */
static unsigned scale_type_bits(int t, bool *is_int)
{
	*is_int = t == CUDA_R_32I;
	switch (t) {
	case CUDA_R_16F:
	case CUDA_R_16BF:
		return 16;
	case CUDA_R_32F:
	case CUDA_R_32I:
		return 32;
	case CUDA_R_64F:
		return 64;
	default:
		return 0;
	}
}

static bool blas_prepare(hook_call_t *c)
{
	return hook_call_prepare(c) == cudaSuccess;
}

static cublasStatus_t blas_done(hook_call_t *c, cublasStatus_t st)
{
	hook_call_finish(c);
	hook_end();
	return st;
}

/* Refs and args of a (possibly strided-batched) GEMM. */
static void gemm_refs(hook_call_t *c, cublasHandle_t handle, int ta, int tb, int m, int n,
		      int k, const void *A, int lda, long long sa, unsigned abits,
		      const void *B, int ldb, long long sb, unsigned bbits, void *C, int ldc,
		      long long sc, unsigned cbits, int batch, bool c_read)
{
	hook_gemm_extents_t e = hook_gemm_extents(ta, tb, m, n, k, lda, ldb, ldc, abits, bbits,
						  cbits);

	if (batch != 1) {
		e.a = hook_batched_extent(e.a, sa, batch, abits);
		e.b = hook_batched_extent(e.b, sb, batch, bbits);
		e.c = hook_batched_extent(e.c, sc, batch, cbits);
	}
	hook_call_ref(c, A, e.a, VMEM_ACCESS_R, "a");
	hook_call_ref(c, B, e.b, VMEM_ACCESS_R, "b");
	/* with beta = 0, C is overwritten whole when its columns (and its
	 * batches) follow each other without a gap */
	hook_call_ref(c, C, e.c,
		      c_read ? VMEM_ACCESS_RW :
		      ldc == m && (batch == 1 || sc == (long long)ldc * n) ?
			       VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W,
		      "c");
	ws_ref(c, handle);
	c->info.type = VMEM_INFO_GEMM;
	c->info.u.gemm.m = m;
	c->info.u.gemm.n = n;
	c->info.u.gemm.k = k;
	c->info.u.gemm.batch = batch;
	c->info.u.gemm.transa = (uint8_t)ta;
	c->info.u.gemm.transb = (uint8_t)tb;
	hook_call_args(c, "\"m\":%d,\"n\":%d,\"k\":%d,\"ta\":%d,\"tb\":%d", m, n, k, ta, tb);
	if (batch != 1)
		hook_call_args(c, "\"batch\":%d", batch);
}

/* ------------------------------------------------------------------ */
/* cuBLAS                                                              */

HOOK_EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
				       cublasOperation_t transb, int m, int n, int k,
				       const float *alpha, const float *A, int lda,
				       const float *B, int ldb, const float *beta, float *C,
				       int ldc)
{
	real_cublasSgemm_v2_t real = real_cublasSgemm_v2();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSgemm_v2");
	if (!hook_begin())
		return real(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
	hook_call_init(&c, VMEM_OP_GEMM, "cublasSgemm_v2", blas_stream(handle));
	gemm_refs(&c, handle, transa, transb, m, n, k, A, lda, 0, 32, B, ldb, 0, 32, C, ldc, 0,
		  32, 1, beta_nonzero(beta, host_pointer_mode(handle), 32, false));
	if (blas_prepare(&c))
		st = real(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
	return blas_done(&c, st);
}

HOOK_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
				     cublasOperation_t transb, int m, int n, int k,
				     const void *alpha, const void *A, cudaDataType Atype, int lda,
				     const void *B, cudaDataType Btype, int ldb, const void *beta,
				     void *C, cudaDataType Ctype, int ldc,
				     cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
	real_cublasGemmEx_t real = real_cublasGemmEx();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;
	unsigned sbits;
	bool is_int;

	if (!real)
		return BLAS_MISSING("cublasGemmEx");
	if (!hook_begin())
		return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
			    beta, C, Ctype, ldc, computeType, algo);
	hook_call_init(&c, VMEM_OP_GEMM, "cublasGemmEx", blas_stream(handle));
	sbits = compute_scalar_bits(computeType, &is_int);
	gemm_refs(&c, handle, transa, transb, m, n, k, A, lda, 0, hook_cuda_dtype_bits(Atype), B,
		  ldb, 0, hook_cuda_dtype_bits(Btype), C, ldc, 0, hook_cuda_dtype_bits(Ctype), 1,
		  beta_nonzero(beta, host_pointer_mode(handle), sbits, is_int));
	hook_call_args(&c, "\"atype\":%d,\"ctype\":%d,\"compute\":%d", (int)Atype, (int)Ctype,
		       (int)computeType);
	c.info.u.gemm.atype = (uint8_t)hook_cuda_dtype((int)Atype);
	c.info.u.gemm.ctype = (uint8_t)hook_cuda_dtype((int)Ctype);
	if (blas_prepare(&c))
		st = real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
			  beta, C, Ctype, ldc, computeType, algo);
	return blas_done(&c, st);
}

HOOK_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
	cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
	int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA,
	const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta,
	void *C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
	cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
	real_cublasGemmStridedBatchedEx_t real = real_cublasGemmStridedBatchedEx();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;
	unsigned sbits;
	bool is_int;

	if (!real)
		return BLAS_MISSING("cublasGemmStridedBatchedEx");
	if (!hook_begin())
		return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B,
			    Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
			    computeType, algo);
	hook_call_init(&c, VMEM_OP_GEMM, "cublasGemmStridedBatchedEx", blas_stream(handle));
	sbits = compute_scalar_bits(computeType, &is_int);
	gemm_refs(&c, handle, transa, transb, m, n, k, A, lda, strideA,
		  hook_cuda_dtype_bits(Atype), B, ldb, strideB, hook_cuda_dtype_bits(Btype), C,
		  ldc, strideC, hook_cuda_dtype_bits(Ctype), batchCount,
		  beta_nonzero(beta, host_pointer_mode(handle), sbits, is_int));
	if (blas_prepare(&c))
		st = real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
			  ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType,
			  algo);
	return blas_done(&c, st);
}

/* PyTorch's float bmm/baddbmm (attention scores in float32, any batched
 * matmul) when cuBLAS is the preferred BLAS library, the default. */
HOOK_EXPORT cublasStatus_t cublasSgemmStridedBatched(
	cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
	int k, const float *alpha, const float *A, int lda, long long int strideA, const float *B,
	int ldb, long long int strideB, const float *beta, float *C, int ldc,
	long long int strideC, int batchCount)
{
	real_cublasSgemmStridedBatched_t real = real_cublasSgemmStridedBatched();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSgemmStridedBatched");
	if (!hook_begin())
		return real(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
			    strideB, beta, C, ldc, strideC, batchCount);
	hook_call_init(&c, VMEM_OP_GEMM, "cublasSgemmStridedBatched", blas_stream(handle));
	gemm_refs(&c, handle, transa, transb, m, n, k, A, lda, strideA, 32, B, ldb, strideB, 32,
		  C, ldc, strideC, 32, batchCount,
		  beta_nonzero(beta, host_pointer_mode(handle), 32, false));
	if (blas_prepare(&c))
		st = real(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB,
			  beta, C, ldc, strideC, batchCount);
	return blas_done(&c, st);
}

/* A strided vector of n floats: (n-1)*|inc| + 1 elements (a negative
 * increment walks the same range backwards). */
static uint64_t vec_bytes(int n, int inc)
{
	int64_t d = n, s = inc < 0 ? -(int64_t)inc : inc;

	return hook_strided_extent(1, &d, &s, 32);
}

HOOK_EXPORT cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float *alpha,
				       const float *x, int incx, float *y, int incy)
{
	real_cublasSaxpy_v2_t real = real_cublasSaxpy_v2();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSaxpy_v2");
	if (!hook_begin())
		return real(handle, n, alpha, x, incx, y, incy);
	hook_call_init(&c, VMEM_OP_BLAS1, "cublasSaxpy_v2", blas_stream(handle));
	hook_call_ref(&c, x, vec_bytes(n, incx), VMEM_ACCESS_R, "x");
	hook_call_ref(&c, y, vec_bytes(n, incy), VMEM_ACCESS_RW, "y");
	hook_call_args(&c, "\"n\":%d", n);
	if (blas_prepare(&c))
		st = real(handle, n, alpha, x, incx, y, incy);
	return blas_done(&c, st);
}

HOOK_EXPORT cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float *alpha,
				       float *x, int incx)
{
	real_cublasSscal_v2_t real = real_cublasSscal_v2();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSscal_v2");
	if (!hook_begin())
		return real(handle, n, alpha, x, incx);
	hook_call_init(&c, VMEM_OP_BLAS1, "cublasSscal_v2", blas_stream(handle));
	hook_call_ref(&c, x, vec_bytes(n, incx), VMEM_ACCESS_RW, "x");
	hook_call_args(&c, "\"n\":%d", n);
	if (blas_prepare(&c))
		st = real(handle, n, alpha, x, incx);
	return blas_done(&c, st);
}

HOOK_EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
	real_cublasSetStream_v2_t real = real_cublasSetStream_v2();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSetStream_v2");
	if (!hook_begin())
		return real(handle, streamId);
	hook_call_init(&c, VMEM_OP_STREAM, "cublasSetStream_v2", streamId);
	if (blas_prepare(&c))
		st = real(handle, streamId);
	return blas_done(&c, st);
}

HOOK_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
					      size_t workspaceSizeInBytes)
{
	real_cublasSetWorkspace_v2_t real = real_cublasSetWorkspace_v2();
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasSetWorkspace_v2");
	if (!hook_begin())
		return real(handle, workspace, workspaceSizeInBytes);
	/* binds memory, touches none: an event without refs */
	hook_call_init(&c, VMEM_OP_OTHER, "cublasSetWorkspace_v2", blas_stream(handle));
	hook_call_args(&c, "\"ws\":%zu,\"ptr\":\"%p\"", workspaceSizeInBytes, workspace);
	if (blas_prepare(&c)) {
		st = real(handle, workspace, workspaceSizeInBytes);
		if (st == CUBLAS_STATUS_SUCCESS)
			ws_record(handle, workspace, workspaceSizeInBytes);
	}
	return blas_done(&c, st);
}

/* ------------------------------------------------------------------ */
/* cuBLASLt                                                            */

typedef struct {
	uint64_t bytes;
	uint64_t rows, cols;
} lt_layout_t;

static bool lt_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, void *buf,
		    size_t size)
{
	real_cublasLtMatrixLayoutGetAttribute_t get = real_cublasLtMatrixLayoutGetAttribute();
	size_t written = 0;

	return get && l && get(l, a, buf, size, &written) == CUBLAS_STATUS_SUCCESS &&
	       written == size;
}

/* A layout's extent: column order spans (cols-1)*ld + rows elements, row
 * order (rows-1)*ld + cols; a strided batch adds (batch-1) offsets.  The
 * tiled orders (COL32, ...) are left unknown (0). */
static void lt_layout(cublasLtMatrixLayout_t l, lt_layout_t *o)
{
	uint32_t type = 0;
	int32_t order = CUBLASLT_ORDER_COL, batch = 1;
	int64_t ld = 0, boff = 0;
	unsigned bits;
	uint64_t one;

	memset(o, 0, sizeof(*o));
	if (!lt_attr(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof(type)) ||
	    !lt_attr(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &o->rows, sizeof(o->rows)) ||
	    !lt_attr(l, CUBLASLT_MATRIX_LAYOUT_COLS, &o->cols, sizeof(o->cols)) ||
	    !lt_attr(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld)))
		return;
	lt_attr(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order));
	lt_attr(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
	lt_attr(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &boff, sizeof(boff));
	bits = hook_cuda_dtype_bits((int)type);
	if (o->rows > INT64_MAX || o->cols > INT64_MAX)
		return;
	if (order == CUBLASLT_ORDER_COL)
		one = hook_matrix_extent((int64_t)o->rows, (int64_t)o->cols, ld, bits);
	else if (order == CUBLASLT_ORDER_ROW)
		one = hook_matrix_extent((int64_t)o->cols, (int64_t)o->rows, ld, bits);
	else
		one = 0;
	o->bytes = batch > 1 ? hook_batched_extent(one, boff, batch, bits) : one;
}

static bool lt_desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, void *buf,
			 size_t size)
{
	real_cublasLtMatmulDescGetAttribute_t get = real_cublasLtMatmulDescGetAttribute();
	size_t written = 0;

	return get && d && get(d, a, buf, size, &written) == CUBLAS_STATUS_SUCCESS &&
	       written == size;
}

/* Epilogue bits (cublasLtEpilogue_t): 4 adds a bias vector; 16, 256, 512
 * write a bias gradient instead (BGRADB reduces over n, the others over
 * m); 128 uses the aux buffer, written by forward epilogues and read by
 * the DRELU/DGELU ones (8, 64). */
#define LT_EPI_BIAS 4u
#define LT_EPI_DACT (8u | 64u)
#define LT_EPI_BGRAD (16u | 256u)
#define LT_EPI_BGRADB 512u
#define LT_EPI_AUX 128u

static void lt_epilogue_refs(hook_call_t *c, cublasLtMatmulDesc_t md, const lt_layout_t *d,
			     int dtype_bits)
{
	uint32_t epi = 0;
	int32_t btype = -1;
	void *bias = NULL, *aux = NULL;
	unsigned bbits;
	int64_t len;

	if (!lt_desc_attr(md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)) ||
	    epi <= CUBLASLT_EPILOGUE_DEFAULT)
		return;
	hook_call_args(c, "\"epilogue\":%u", epi);
	lt_desc_attr(md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
	lt_desc_attr(md, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &btype, sizeof(btype));
	bbits = btype >= 0 ? hook_cuda_dtype_bits(btype) : (unsigned)dtype_bits;
	if (epi & (LT_EPI_BGRAD | LT_EPI_BGRADB)) {
		len = (epi & LT_EPI_BGRADB) ? (int64_t)d->cols : (int64_t)d->rows;
		hook_call_ref(c, bias, hook_packed_extent(1, &len, bbits), VMEM_ACCESS_W, "db");
	} else if (epi & LT_EPI_BIAS) {
		len = (int64_t)d->rows;
		hook_call_ref(c, bias, hook_packed_extent(1, &len, bbits), VMEM_ACCESS_R, "bias");
	}
	if (epi & LT_EPI_AUX) {
		lt_desc_attr(md, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
		/* extent left to the runtime (the aux layout has its own ld) */
		hook_call_ref(c, aux, 0, (epi & LT_EPI_DACT) ? VMEM_ACCESS_R : VMEM_ACCESS_W,
			      "aux");
	}
}

HOOK_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle,
				       cublasLtMatmulDesc_t computeDesc, const void *alpha,
				       const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
				       cublasLtMatrixLayout_t Bdesc, const void *beta,
				       const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
				       cublasLtMatrixLayout_t Ddesc,
				       const cublasLtMatmulAlgo_t *algo, void *workspace,
				       size_t workspaceSizeInBytes, cudaStream_t stream)
{
	real_cublasLtMatmul_t real = real_cublasLtMatmul();
	lt_layout_t a, b, cl, d;
	int32_t ta = CUBLAS_OP_N, scale = CUDA_R_32F, pmode = CUBLASLT_POINTER_MODE_HOST;
	uint32_t dtype = 0;
	unsigned sbits;
	bool is_int, c_read, on_host;
	hook_call_t c;
	cublasStatus_t st = CUBLAS_STATUS_ALLOC_FAILED;

	if (!real)
		return BLAS_MISSING("cublasLtMatmul");
	if (!hook_begin())
		return real(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D,
			    Ddesc, algo, workspace, workspaceSizeInBytes, stream);
	hook_call_init(&c, VMEM_OP_GEMM, "cublasLtMatmul", stream);
	lt_layout(Adesc, &a);
	lt_layout(Bdesc, &b);
	lt_layout(Cdesc, &cl);
	lt_layout(Ddesc, &d);
	lt_desc_attr(computeDesc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
	lt_desc_attr(computeDesc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale, sizeof(scale));
	lt_desc_attr(computeDesc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pmode, sizeof(pmode));
	on_host = pmode == CUBLASLT_POINTER_MODE_HOST ||
		  pmode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
	sbits = scale_type_bits(scale, &is_int);
	c_read = pmode != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO &&
		 beta_nonzero(beta, on_host, sbits, is_int);
	hook_call_ref(&c, A, a.bytes, VMEM_ACCESS_R, "a");
	hook_call_ref(&c, B, b.bytes, VMEM_ACCESS_R, "b");
	if (C == D) {
		hook_call_ref(&c, D, d.bytes, c_read ? VMEM_ACCESS_RW : VMEM_ACCESS_W, "c");
	} else {
		if (c_read)
			hook_call_ref(&c, C, cl.bytes, VMEM_ACCESS_R, "c");
		hook_call_ref(&c, D, d.bytes, VMEM_ACCESS_W, "d");
	}
	/* per-call scratch: a whole overwrite (nothing reads an earlier call's) */
	hook_call_ref(&c, workspace, workspaceSizeInBytes, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE, "ws");
	if (!lt_attr(Ddesc, CUBLASLT_MATRIX_LAYOUT_TYPE, &dtype, sizeof(dtype)))
		dtype = 0;
	lt_epilogue_refs(&c, computeDesc, &d, (int)hook_cuda_dtype_bits((int)dtype));
	hook_call_args(&c, "\"m\":%llu,\"n\":%llu,\"k\":%llu", (unsigned long long)d.rows,
		       (unsigned long long)d.cols,
		       (unsigned long long)(ta == CUBLAS_OP_N ? a.cols : a.rows));
	c.info.type = VMEM_INFO_GEMM;
	c.info.u.gemm.m = (int64_t)d.rows;
	c.info.u.gemm.n = (int64_t)d.cols;
	c.info.u.gemm.k = (int64_t)(ta == CUBLAS_OP_N ? a.cols : a.rows);
	c.info.u.gemm.batch = 1;
	c.info.u.gemm.transa = (uint8_t)ta;
	c.info.u.gemm.ctype = (uint8_t)hook_cuda_dtype((int)dtype);
	if (blas_prepare(&c))
		st = real(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D,
			  Ddesc, algo, workspace, workspaceSizeInBytes, stream);
	return blas_done(&c, st);
}
