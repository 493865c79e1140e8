/* tests/sim/interpose/countshim.c - an independent call counter for the
 * "one op event per call" check.  Preloaded BEFORE libvmem.so
 * (LD_PRELOAD="countshim.so libvmem.so"), it sees exactly the calls the
 * application makes, counts them and forwards each to the next definition
 * (vmem's hook).  At exit it writes "<api> <count>" lines to
 * $COUNTSHIM_OUT.  Test-only; not part of libvmem.so.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#define COUNTED(X)                                                                               \
	X(cudnnConvolutionForward, cudnnStatus_t,                                                \
	  (cudnnHandle_t h, const void *a, const cudnnTensorDescriptor_t xd, const void *x,      \
	   const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd, \
	   cudnnConvolutionFwdAlgo_t al, void *ws, size_t wsb, const void *b,                    \
	   const cudnnTensorDescriptor_t yd, void *y), (h, a, xd, x, wd, w, cd, al, ws, wsb, b, yd, y)) \
	X(cudnnConvolutionBackwardData, cudnnStatus_t,                                           \
	  (cudnnHandle_t h, const void *a, const cudnnFilterDescriptor_t wd, const void *w,      \
	   const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd, \
	   cudnnConvolutionBwdDataAlgo_t al, void *ws, size_t wsb, const void *b,                \
	   const cudnnTensorDescriptor_t dxd, void *dx), (h, a, wd, w, dyd, dy, cd, al, ws, wsb, b, dxd, dx)) \
	X(cudnnConvolutionBackwardFilter, cudnnStatus_t,                                         \
	  (cudnnHandle_t h, const void *a, const cudnnTensorDescriptor_t xd, const void *x,      \
	   const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd, \
	   cudnnConvolutionBwdFilterAlgo_t al, void *ws, size_t wsb, const void *b,              \
	   const cudnnFilterDescriptor_t dwd, void *dw), (h, a, xd, x, dyd, dy, cd, al, ws, wsb, b, dwd, dw)) \
	X(cudnnConvolutionBackwardBias, cudnnStatus_t,                                           \
	  (cudnnHandle_t h, const void *a, const cudnnTensorDescriptor_t dyd, const void *dy,    \
	   const void *b, const cudnnTensorDescriptor_t dbd, void *db), (h, a, dyd, dy, b, dbd, db)) \
	X(cudnnAddTensor, cudnnStatus_t,                                                         \
	  (cudnnHandle_t h, const void *a, const cudnnTensorDescriptor_t ad, const void *A,      \
	   const void *b, const cudnnTensorDescriptor_t cd, void *C), (h, a, ad, A, b, cd, C))   \
	X(cudnnActivationForward, cudnnStatus_t,                                                 \
	  (cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *a,                       \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *b,                       \
	   const cudnnTensorDescriptor_t yd, void *y), (h, ad, a, xd, x, b, yd, y))              \
	X(cudnnActivationBackward, cudnnStatus_t,                                                \
	  (cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *a,                       \
	   const cudnnTensorDescriptor_t yd, const void *y, const cudnnTensorDescriptor_t dyd,   \
	   const void *dy, const cudnnTensorDescriptor_t xd, const void *x, const void *b,       \
	   const cudnnTensorDescriptor_t dxd, void *dx), (h, ad, a, yd, y, dyd, dy, xd, x, b, dxd, dx)) \
	X(cudnnPoolingForward, cudnnStatus_t,                                                    \
	  (cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *a,                    \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *b,                       \
	   const cudnnTensorDescriptor_t yd, void *y), (h, pd, a, xd, x, b, yd, y))              \
	X(cudnnPoolingBackward, cudnnStatus_t,                                                   \
	  (cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *a,                    \
	   const cudnnTensorDescriptor_t yd, const void *y, const cudnnTensorDescriptor_t dyd,   \
	   const void *dy, const cudnnTensorDescriptor_t xd, const void *x, const void *b,       \
	   const cudnnTensorDescriptor_t dxd, void *dx), (h, pd, a, yd, y, dyd, dy, xd, x, b, dxd, dx)) \
	X(cudnnSoftmaxForward, cudnnStatus_t,                                                    \
	  (cudnnHandle_t h, cudnnSoftmaxAlgorithm_t al, cudnnSoftmaxMode_t m, const void *a,     \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *b,                       \
	   const cudnnTensorDescriptor_t yd, void *y), (h, al, m, a, xd, x, b, yd, y))           \
	X(cudnnBackendExecute, cudnnStatus_t,                                                    \
	  (cudnnHandle_t h, cudnnBackendDescriptor_t p, cudnnBackendDescriptor_t v), (h, p, v))  \
	X(cublasSgemm_v2, cublasStatus_t,                                                        \
	  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,    \
	   const float *a, const float *A, int lda, const float *B, int ldb, const float *b,     \
	   float *C, int ldc), (h, ta, tb, m, n, k, a, A, lda, B, ldb, b, C, ldc))               \
	X(cudaLaunchKernel, cudaError_t,                                                         \
	  (const void *f, dim3 g, dim3 bl, void **ar, size_t sh, cudaStream_t s), (f, g, bl, ar, sh, s)) \
	X(cudaMemcpy, cudaError_t, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k)) \
	X(cudaMemcpyAsync, cudaError_t,                                                          \
	  (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st), (d, s, n, k, st)) \
	X(cudaMemsetAsync, cudaError_t, (void *p, int v, size_t n, cudaStream_t s), (p, v, n, s)) \
	X(cudaMemset, cudaError_t, (void *p, int v, size_t n), (p, v, n))

enum {
#define ENUM(name, ret, params, args) CNT_##name,
	COUNTED(ENUM)
#undef ENUM
	CNT_N
};

static const char *const names[CNT_N] = {
#define NAME(name, ret, params, args) #name,
	COUNTED(NAME)
#undef NAME
};

static unsigned long counts[CNT_N];

#define FORWARD(name, ret, params, args)                                                  \
	__attribute__((visibility("default"))) ret name params                            \
	{                                                                                 \
		static ret (*next) params;                                                \
		if (!next)                                                                \
			*(void **)&next = dlsym(RTLD_NEXT, #name);                        \
		__atomic_fetch_add(&counts[CNT_##name], 1, __ATOMIC_RELAXED);             \
		if (!next) {                                                              \
			fprintf(stderr, "countshim: %s not found\n", #name);              \
			abort();                                                          \
		}                                                                         \
		return next args;                                                         \
	}
COUNTED(FORWARD)

__attribute__((destructor)) static void countshim_dump(void)
{
	const char *out = getenv("COUNTSHIM_OUT");
	FILE *f;

	if (!out || !(f = fopen(out, "w")))
		return;
	for (int i = 0; i < CNT_N; i++)
		if (counts[i])
			fprintf(f, "%s %lu\n", names[i], counts[i]);
	fclose(f);
}
