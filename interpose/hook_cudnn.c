/* interpose/hook_cudnn.c - the legacy cuDNN calls: convolutions, their
 * algorithm and workspace queries, and the other ops that take tensors.
 *
 * Each hook reads the call's descriptors with the real cuDNN getters
 * (cudnnGetTensorNdDescriptor, cudnnGetFilterNdDescriptor), turns them
 * into byte extents (hook_dnn.c), and hands the call to the runtime with
 * one ref per tensor: inputs read, outputs written, and outputs read too
 * when beta != 0 (cuDNN blends y = alpha*op + beta*y; beta is a double for
 * double tensors and a float otherwise).  A workspace is a scratch ref
 * "ws" (written).  The stream is the handle's, from the real
 * cudnnGetStream.
 *
 * The three convolutions, their algorithm queries and their workspace
 * queries go through interpose/conv_exec.c, which decides what runs
 * (VMEM_CONV_ALGO, VMEM_WORKSPACE: the application's algorithm, one that
 * fits the budget, or µ-cuDNN micro-batches) and what the queries answer.
 */
#include <string.h>

#include <cudnn.h>

#include "interpose/conv_exec.h"
#include "interpose/dnn_split.h"
#include "interpose/hook_dnn.h"
#include "interpose/hooks.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define CUDNN_REALS(X)                                                                    \
	X(cudnnGetStream, cudnnStatus_t, (cudnnHandle_t h, cudaStream_t *s), (h, s))       \
	X(cudnnSetStream, cudnnStatus_t, (cudnnHandle_t h, cudaStream_t s), (h, s))        \
	X(cudnnGetTensorNdDescriptor, cudnnStatus_t,                                       \
	  (const cudnnTensorDescriptor_t d, int req, cudnnDataType_t *dt, int *nb,         \
	   int *dims, int *strides),                                                       \
	  (d, req, dt, nb, dims, strides))                                                 \
	X(cudnnGetFilterNdDescriptor, cudnnStatus_t,                                       \
	  (const cudnnFilterDescriptor_t d, int req, cudnnDataType_t *dt,                  \
	   cudnnTensorFormat_t *fmt, int *nb, int *dims),                                  \
	  (d, req, dt, fmt, nb, dims))                                                     \
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
	  (h, alpha, xd, x, dyd, dy, cd, algo, ws, wsb, beta, dwd, dw))                    \
	X(cudnnConvolutionBackwardBias, cudnnStatus_t,                                     \
	  (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t dyd,          \
	   const void *dy, const void *beta, const cudnnTensorDescriptor_t dbd, void *db), \
	  (h, alpha, dyd, dy, beta, dbd, db))                                              \
	X(cudnnConvolutionBiasActivationForward, cudnnStatus_t,                            \
	  (cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t xd,          \
	   const void *x, const cudnnFilterDescriptor_t wd, const void *w,                 \
	   const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,          \
	   void *ws, size_t wsb, const void *alpha2, const cudnnTensorDescriptor_t zd,     \
	   const void *z, const cudnnTensorDescriptor_t bd, const void *bias,              \
	   const cudnnActivationDescriptor_t ad, const cudnnTensorDescriptor_t yd,         \
	   void *y),                                                                       \
	  (h, alpha1, xd, x, wd, w, cd, algo, ws, wsb, alpha2, zd, z, bd, bias, ad, yd, y)) \
	X(cudnnAddTensor, cudnnStatus_t,                                                   \
	  (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad,           \
	   const void *A, const void *beta, const cudnnTensorDescriptor_t cd, void *C),    \
	  (h, alpha, ad, A, beta, cd, C))                                                  \
	X(cudnnOpTensor, cudnnStatus_t,                                                    \
	  (cudnnHandle_t h, const cudnnOpTensorDescriptor_t od, const void *alpha1,        \
	   const cudnnTensorDescriptor_t ad, const void *A, const void *alpha2,            \
	   const cudnnTensorDescriptor_t bd, const void *B, const void *beta,              \
	   const cudnnTensorDescriptor_t cd, void *C),                                     \
	  (h, od, alpha1, ad, A, alpha2, bd, B, beta, cd, C))                              \
	X(cudnnActivationForward, cudnnStatus_t,                                           \
	  (cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *alpha,             \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *beta,              \
	   const cudnnTensorDescriptor_t yd, void *y),                                     \
	  (h, ad, alpha, xd, x, beta, yd, y))                                              \
	X(cudnnActivationBackward, cudnnStatus_t,                                          \
	  (cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *alpha,             \
	   const cudnnTensorDescriptor_t yd, const void *y,                                \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *beta,              \
	   const cudnnTensorDescriptor_t dxd, void *dx),                                   \
	  (h, ad, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx))                            \
	X(cudnnPoolingForward, cudnnStatus_t,                                              \
	  (cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,          \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *beta,              \
	   const cudnnTensorDescriptor_t yd, void *y),                                     \
	  (h, pd, alpha, xd, x, beta, yd, y))                                              \
	X(cudnnPoolingBackward, cudnnStatus_t,                                             \
	  (cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,          \
	   const cudnnTensorDescriptor_t yd, const void *y,                                \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnTensorDescriptor_t xd, const void *x, const void *beta,              \
	   const cudnnTensorDescriptor_t dxd, void *dx),                                   \
	  (h, pd, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx))                            \
	X(cudnnSoftmaxForward, cudnnStatus_t,                                              \
	  (cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,         \
	   const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,             \
	   const void *beta, const cudnnTensorDescriptor_t yd, void *y),                   \
	  (h, algo, mode, alpha, xd, x, beta, yd, y))                                      \
	X(cudnnSoftmaxBackward, cudnnStatus_t,                                             \
	  (cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,         \
	   const void *alpha, const cudnnTensorDescriptor_t yd, const void *y,             \
	   const cudnnTensorDescriptor_t dyd, const void *dy, const void *beta,            \
	   const cudnnTensorDescriptor_t dxd, void *dx),                                   \
	  (h, algo, mode, alpha, yd, y, dyd, dy, beta, dxd, dx))                           \
	X(cudnnBatchNormalizationForwardTraining, cudnnStatus_t,                           \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha,                  \
	   const void *beta, const cudnnTensorDescriptor_t xd, const void *x,              \
	   const cudnnTensorDescriptor_t yd, void *y,                                      \
	   const cudnnTensorDescriptor_t sd, const void *scale, const void *bias,          \
	   double factor, void *rmean, void *rvar, double eps, void *smean,                \
	   void *sinvvar),                                                                 \
	  (h, mode, alpha, beta, xd, x, yd, y, sd, scale, bias, factor, rmean, rvar, eps,  \
	   smean, sinvvar))                                                                \
	X(cudnnBatchNormalizationForwardInference, cudnnStatus_t,                          \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha,                  \
	   const void *beta, const cudnnTensorDescriptor_t xd, const void *x,              \
	   const cudnnTensorDescriptor_t yd, void *y,                                      \
	   const cudnnTensorDescriptor_t sd, const void *scale, const void *bias,          \
	   const void *emean, const void *evar, double eps),                               \
	  (h, mode, alpha, beta, xd, x, yd, y, sd, scale, bias, emean, evar, eps))         \
	X(cudnnBatchNormalizationBackward, cudnnStatus_t,                                  \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha_d,                \
	   const void *beta_d, const void *alpha_p, const void *beta_p,                    \
	   const cudnnTensorDescriptor_t xd, const void *x,                                \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnTensorDescriptor_t dxd, void *dx,                                    \
	   const cudnnTensorDescriptor_t sd, const void *scale, void *dscale,              \
	   void *dbias, double eps, const void *smean, const void *sinvvar),               \
	  (h, mode, alpha_d, beta_d, alpha_p, beta_p, xd, x, dyd, dy, dxd, dx, sd, scale,  \
	   dscale, dbias, eps, smean, sinvvar))                                            \
	X(cudnnBatchNormalizationForwardTrainingEx, cudnnStatus_t,                         \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,            \
	   const void *alpha, const void *beta, const cudnnTensorDescriptor_t xd,          \
	   const void *x, const cudnnTensorDescriptor_t zd, const void *z,                 \
	   const cudnnTensorDescriptor_t yd, void *y, const cudnnTensorDescriptor_t sd,    \
	   const void *scale, const void *bias, double factor, void *rmean, void *rvar,    \
	   double eps, void *smean, void *sinvvar, cudnnActivationDescriptor_t ad,         \
	   void *ws, size_t wsb, void *rs, size_t rsb),                                    \
	  (h, mode, ops, alpha, beta, xd, x, zd, z, yd, y, sd, scale, bias, factor, rmean, \
	   rvar, eps, smean, sinvvar, ad, ws, wsb, rs, rsb))                               \
	X(cudnnBatchNormalizationBackwardEx, cudnnStatus_t,                                \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,            \
	   const void *alpha_d, const void *beta_d, const void *alpha_p,                   \
	   const void *beta_p, const cudnnTensorDescriptor_t xd, const void *x,            \
	   const cudnnTensorDescriptor_t yd, const void *y,                                \
	   const cudnnTensorDescriptor_t dyd, const void *dy,                              \
	   const cudnnTensorDescriptor_t dzd, void *dz, const cudnnTensorDescriptor_t dxd, \
	   void *dx, const cudnnTensorDescriptor_t sd, const void *scale,                  \
	   const void *bias, void *dscale, void *dbias, double eps, const void *smean,     \
	   const void *sinvvar, cudnnActivationDescriptor_t ad, void *ws, size_t wsb,      \
	   void *rs, size_t rsb),                                                          \
	  (h, mode, ops, alpha_d, beta_d, alpha_p, beta_p, xd, x, yd, y, dyd, dy, dzd, dz, \
	   dxd, dx, sd, scale, bias, dscale, dbias, eps, smean, sinvvar, ad, ws, wsb, rs,  \
	   rsb))                                                                           \
	X(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize, cudnnStatus_t,         \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,            \
	   const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t zd,             \
	   const cudnnTensorDescriptor_t yd, const cudnnTensorDescriptor_t sd,             \
	   const cudnnActivationDescriptor_t ad, size_t *sz),                              \
	  (h, mode, ops, xd, zd, yd, sd, ad, sz))                                          \
	X(cudnnGetBatchNormalizationBackwardExWorkspaceSize, cudnnStatus_t,                \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,            \
	   const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t yd,             \
	   const cudnnTensorDescriptor_t dyd, const cudnnTensorDescriptor_t dzd,           \
	   const cudnnTensorDescriptor_t dxd, const cudnnTensorDescriptor_t sd,            \
	   const cudnnActivationDescriptor_t ad, size_t *sz),                              \
	  (h, mode, ops, xd, yd, dyd, dzd, dxd, sd, ad, sz))                               \
	X(cudnnGetBatchNormalizationTrainingExReserveSpaceSize, cudnnStatus_t,             \
	  (cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,            \
	   const cudnnActivationDescriptor_t ad, const cudnnTensorDescriptor_t xd,         \
	   size_t *sz),                                                                    \
	  (h, mode, ops, ad, xd, sz))                                                      \
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
	X(cudnnFindConvolutionForwardAlgorithm, cudnnStatus_t,                             \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd,                              \
	   const cudnnFilterDescriptor_t wd, const cudnnConvolutionDescriptor_t cd,        \
	   const cudnnTensorDescriptor_t yd, const int req, int *ret,                      \
	   cudnnConvolutionFwdAlgoPerf_t *perf),                                           \
	  (h, xd, wd, cd, yd, req, ret, perf))                                             \
	X(cudnnFindConvolutionBackwardDataAlgorithm, cudnnStatus_t,                        \
	  (cudnnHandle_t h, const cudnnFilterDescriptor_t wd,                              \
	   const cudnnTensorDescriptor_t dyd, const cudnnConvolutionDescriptor_t cd,       \
	   const cudnnTensorDescriptor_t dxd, const int req, int *ret,                     \
	   cudnnConvolutionBwdDataAlgoPerf_t *perf),                                       \
	  (h, wd, dyd, cd, dxd, req, ret, perf))                                           \
	X(cudnnFindConvolutionBackwardFilterAlgorithm, cudnnStatus_t,                      \
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
	X(cudnnGetConvolutionForwardWorkspaceSize, cudnnStatus_t,                          \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd,                              \
	   const cudnnFilterDescriptor_t wd, const cudnnConvolutionDescriptor_t cd,        \
	   const cudnnTensorDescriptor_t yd, cudnnConvolutionFwdAlgo_t algo, size_t *sz),  \
	  (h, xd, wd, cd, yd, algo, sz))                                                   \
	X(cudnnGetConvolutionBackwardDataWorkspaceSize, cudnnStatus_t,                     \
	  (cudnnHandle_t h, const cudnnFilterDescriptor_t wd,                              \
	   const cudnnTensorDescriptor_t dyd, const cudnnConvolutionDescriptor_t cd,       \
	   const cudnnTensorDescriptor_t dxd, cudnnConvolutionBwdDataAlgo_t algo,          \
	   size_t *sz),                                                                    \
	  (h, wd, dyd, cd, dxd, algo, sz))                                                 \
	X(cudnnGetConvolutionBackwardFilterWorkspaceSize, cudnnStatus_t,                   \
	  (cudnnHandle_t h, const cudnnTensorDescriptor_t xd,                              \
	   const cudnnTensorDescriptor_t dyd, const cudnnConvolutionDescriptor_t cd,       \
	   const cudnnFilterDescriptor_t dwd, cudnnConvolutionBwdFilterAlgo_t algo,        \
	   size_t *sz),                                                                    \
	  (h, xd, dyd, cd, dwd, algo, sz))

#define CUDNN_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUDNN, name, ret, params, args)
CUDNN_REALS(CUDNN_REAL)

/* A symbol no loaded cuDNN defines: the library is not (fully) there. */
#define DNN_MISSING(name) \
	((cudnnStatus_t)hook_missing(name, CUDNN_STATUS_NOT_INITIALIZED))

/* What vmem learned from one tensor or filter descriptor. */
typedef struct {
	uint64_t bytes;   /* extent; 0 = unknown */
	int dtype;        /* cudnnDataType_t; -1 = unknown */
	int nbdims;
	bool dense;       /* no gaps between elements (hook_strided_dense) */
	int dims[HOOK_DNN_MAX_DIMS];
} dnn_desc_t;

static void tensor_info(cudnnTensorDescriptor_t d, dnn_desc_t *o)
{
	real_cudnnGetTensorNdDescriptor_t get = real_cudnnGetTensorNdDescriptor();
	int strides[HOOK_DNN_MAX_DIMS];
	int64_t d64[HOOK_DNN_MAX_DIMS], s64[HOOK_DNN_MAX_DIMS];
	cudnnDataType_t dt;
	int nb = 0;

	memset(o, 0, sizeof(*o));
	o->dtype = -1;
	if (!d || !get ||
	    get(d, HOOK_DNN_MAX_DIMS, &dt, &nb, o->dims, strides) != CUDNN_STATUS_SUCCESS ||
	    nb < 1 || nb > HOOK_DNN_MAX_DIMS)
		return;
	for (int i = 0; i < nb; i++) {
		d64[i] = o->dims[i];
		s64[i] = strides[i];
	}
	o->dtype = (int)dt;
	o->nbdims = nb;
	o->bytes = hook_strided_extent(nb, d64, s64, hook_cudnn_dtype_bits((int)dt));
	o->dense = hook_strided_dense(nb, d64, s64);
}

/* A filter has no strides: it is packed (NCHW or NHWC alike). */
static void filter_info(cudnnFilterDescriptor_t d, dnn_desc_t *o)
{
	real_cudnnGetFilterNdDescriptor_t get = real_cudnnGetFilterNdDescriptor();
	int64_t d64[HOOK_DNN_MAX_DIMS];
	cudnnTensorFormat_t fmt;
	cudnnDataType_t dt;
	int nb = 0;

	memset(o, 0, sizeof(*o));
	o->dtype = -1;
	if (!d || !get ||
	    get(d, HOOK_DNN_MAX_DIMS, &dt, &fmt, &nb, o->dims) != CUDNN_STATUS_SUCCESS ||
	    nb < 1 || nb > HOOK_DNN_MAX_DIMS)
		return;
	for (int i = 0; i < nb; i++)
		d64[i] = o->dims[i];
	o->dtype = (int)dt;
	o->nbdims = nb;
	o->bytes = hook_packed_extent(nb, d64, hook_cudnn_dtype_bits((int)dt));
	o->dense = true;
}

/* cuDNN's scaling factors are host pointers to a double for double
 * tensors and to a float for every other type.  Unreadable (NULL) counts
 * as non-zero: reading an output that is not read costs time, the reverse
 * would lose data. */
static bool scale_nonzero(const void *s, int dtype)
{
	if (!s)
		return true;
	if (dtype == CUDNN_DATA_DOUBLE)
		return *(const double *)s != 0.0;
	return *(const float *)s != 0.0f;
}

/* An output: read too when beta != 0; a whole overwrite when beta is 0
 * and the tensor has no gaps (policy/event.h, VMEM_ACCESS_WHOLE). */
static uint8_t out_access(const void *beta, const dnn_desc_t *d)
{
	if (scale_nonzero(beta, d->dtype))
		return VMEM_ACCESS_RW;
	return d->dense ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W;
}

/* A workspace is scratch handed over to the call: nothing in it survives. */
#define WS_ACCESS (VMEM_ACCESS_W | VMEM_ACCESS_WHOLE)

/* Batch normalisation's saved mean and inverse variance: outputs the
 * forward pass writes whole (one value per channel), read by the backward
 * pass - a whole overwrite when the descriptor has no gaps. */
static uint8_t save_access(const dnn_desc_t *d)
{
	return d->dense ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W;
}

static cudaStream_t dnn_stream(cudnnHandle_t h)
{
	real_cudnnGetStream_t get = real_cudnnGetStream();
	cudaStream_t s = NULL;

	if (h && get && get(h, &s) != CUDNN_STATUS_SUCCESS)
		s = NULL;
	return s;
}

static void ref_t(hook_call_t *c, cudnnTensorDescriptor_t d, const void *p, uint8_t acc,
		  const char *role, dnn_desc_t *info)
{
	dnn_desc_t tmp;

	if (!info)
		info = &tmp;
	tensor_info(d, info);
	hook_call_ref(c, p, info->bytes, acc, role);
}

static void ref_out(hook_call_t *c, cudnnTensorDescriptor_t d, void *p, const void *beta,
		    const char *role)
{
	dnn_desc_t info;

	tensor_info(d, &info);
	hook_call_ref(c, p, info.bytes, out_access(beta, &info), role);
}

/* Trace args of a convolution: algorithm, workspace and the shape (the
 * data-side tensor n,c,h,w and the filter k,r,s); the same in the call's
 * typed record (stride, pad and dilation are not read: 0). */
static void conv_args(hook_call_t *c, int algo, size_t ws, const dnn_desc_t *x,
		      const dnn_desc_t *w)
{
	vmem_conv_info_t *ci = &c->info.u.conv;

	c->info.type = VMEM_INFO_CONV;
	ci->dir = c->kind == VMEM_OP_CONV_BWD_DATA ? VMEM_CONV_DIR_BWD_DATA :
		  c->kind == VMEM_OP_CONV_BWD_FILTER ? VMEM_CONV_DIR_BWD_FILTER : VMEM_CONV_DIR_FWD;
	ci->algo = algo;
	ci->workspace = ws;
	ci->dtype = (uint8_t)hook_cudnn_dtype(x->dtype);
	if (x->nbdims >= 4) {
		ci->n = x->dims[0];
		ci->c = x->dims[1];
		ci->h = x->dims[2];
		ci->w = x->dims[3];
	}
	if (w->nbdims >= 4) {
		ci->k = w->dims[0];
		ci->r = w->dims[2];
		ci->s = w->dims[3];
	}
	if (algo >= 0)
		hook_call_args(c, "\"algo\":%d", algo);
	hook_call_args(c, "\"ws\":%zu", ws);
	if (x->nbdims >= 4)
		hook_call_args(c, "\"n\":%d,\"c\":%d,\"h\":%d,\"w\":%d", x->dims[0], x->dims[1],
			       x->dims[2], x->dims[3]);
	if (w->nbdims >= 4)
		hook_call_args(c, "\"k\":%d,\"r\":%d,\"s\":%d", w->dims[0], w->dims[2],
			       w->dims[3]);
}

/* The call may run when its tensors are resident; otherwise cuDNN's own
 * out-of-memory status goes back to the application. */
static bool dnn_prepare(hook_call_t *c)
{
	return hook_call_prepare(c) == cudaSuccess;
}

static cudnnStatus_t dnn_done(hook_call_t *c, cudnnStatus_t st)
{
	hook_call_finish(c);
	hook_end();
	return st;
}

/* A ref of a per-image call that dnn_split.c may run in slices: the ref
 * on c, and the same tensor in the table the slices are made from (an
 * output's access from beta, as ref_out). */
static void sref(hook_call_t *c, dnn_split_tensor_t *t, cudnnTensorDescriptor_t d,
		 const void *p, bool out, const void *beta, const char *role)
{
	dnn_desc_t info;
	uint8_t acc;

	tensor_info(d, &info);
	acc = out ? out_access(beta, &info) : VMEM_ACCESS_R;
	*t = (dnn_split_tensor_t){ d, p, acc, role };
	hook_call_ref(c, p, info.bytes, acc, role);
}

/* What a slice of a pooling or activation call needs besides its tensors. */
typedef struct {
	void *real;
	cudnnHandle_t h;
	const void *desc;   /* the pooling or activation descriptor */
	const void *alpha, *beta;
} split_ctx_t;

static cudnnStatus_t act_fwd_slice(void *v, const cudnnTensorDescriptor_t *d, void *const *p)
{
	const split_ctx_t *a = v;

	return ((real_cudnnActivationForward_t)a->real)(
		a->h, (cudnnActivationDescriptor_t)a->desc, a->alpha, d[0], p[0], a->beta, d[1], p[1]);
}

static cudnnStatus_t act_bwd_slice(void *v, const cudnnTensorDescriptor_t *d, void *const *p)
{
	const split_ctx_t *a = v;

	return ((real_cudnnActivationBackward_t)a->real)(
		a->h, (cudnnActivationDescriptor_t)a->desc, a->alpha, d[0], p[0], d[1], p[1], d[2],
		p[2], a->beta, d[3], p[3]);
}

static cudnnStatus_t pool_fwd_slice(void *v, const cudnnTensorDescriptor_t *d, void *const *p)
{
	const split_ctx_t *a = v;

	return ((real_cudnnPoolingForward_t)a->real)(
		a->h, (cudnnPoolingDescriptor_t)a->desc, a->alpha, d[0], p[0], a->beta, d[1], p[1]);
}

static cudnnStatus_t pool_bwd_slice(void *v, const cudnnTensorDescriptor_t *d, void *const *p)
{
	const split_ctx_t *a = v;

	return ((real_cudnnPoolingBackward_t)a->real)(
		a->h, (cudnnPoolingDescriptor_t)a->desc, a->alpha, d[0], p[0], d[1], p[1], d[2], p[2],
		a->beta, d[3], p[3]);
}

/* Runs a per-image call whole (the same `slice` function with the
 * caller's descriptors), or in slices when its tensors do not fit the
 * budget (dnn_split.h). */
static cudnnStatus_t run_per_image(hook_call_t *c, const dnn_split_tensor_t *t, int nt,
				   dnn_split_fn slice, split_ctx_t *ctx)
{
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;
	dnn_split_t s;

	/* pooling and activation work on each (image, channel) plane alone */
	if (dnn_split_plan(c, t, nt, true, &s)) {
		st = dnn_split_run(c, &s, t, nt, slice, ctx);
		hook_end();
		return st;
	}
	if (dnn_prepare(c)) {
		cudnnTensorDescriptor_t d[DNN_SPLIT_MAX];
		void *p[DNN_SPLIT_MAX];

		for (int i = 0; i < nt; i++) {
			d[i] = t[i].d;
			p[i] = (void *)t[i].p;
		}
		st = slice(ctx, d, p);
	}
	return dnn_done(c, st);
}

/* ------------------------------------------------------------------ */
/* Convolutions                                                        */

HOOK_EXPORT cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
					       const cudnnTensorDescriptor_t xDesc, const void *x,
					       const cudnnFilterDescriptor_t wDesc, const void *w,
					       const cudnnConvolutionDescriptor_t convDesc,
					       cudnnConvolutionFwdAlgo_t algo, void *workSpace,
					       size_t workSpaceSizeInBytes, const void *beta,
					       const cudnnTensorDescriptor_t yDesc, void *y)
{
	real_cudnnConvolutionForward_t real = real_cudnnConvolutionForward();
	dnn_desc_t xi, wi, yi;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnConvolutionForward");
	if (!hook_begin())
		return real(handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace,
			    workSpaceSizeInBytes, beta, yDesc, y);
	hook_call_init(&c, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", dnn_stream(handle));
	tensor_info(xDesc, &xi);
	filter_info(wDesc, &wi);
	tensor_info(yDesc, &yi);
	hook_call_ref(&c, x, xi.bytes, VMEM_ACCESS_R, "x");
	hook_call_ref(&c, w, wi.bytes, VMEM_ACCESS_R, "w");
	hook_call_ref(&c, y, yi.bytes, out_access(beta, &yi), "y");
	hook_call_ref(&c, workSpace, workSpaceSizeInBytes, WS_ACCESS, "ws");
	conv_args(&c, (int)algo, workSpaceSizeInBytes, &xi, &wi);
	/* prepares, runs (maybe as micro-batches, maybe another algorithm) and finishes */
	st = conv_exec_legacy(&c, CONV_DIR_FWD, handle, alpha, xDesc, x, wDesc, w, yDesc, y,
			      convDesc, (int)algo, workSpace, workSpaceSizeInBytes, beta);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
						    const cudnnFilterDescriptor_t wDesc,
						    const void *w,
						    const cudnnTensorDescriptor_t dyDesc,
						    const void *dy,
						    const cudnnConvolutionDescriptor_t convDesc,
						    cudnnConvolutionBwdDataAlgo_t algo,
						    void *workSpace, size_t workSpaceSizeInBytes,
						    const void *beta,
						    const cudnnTensorDescriptor_t dxDesc, void *dx)
{
	real_cudnnConvolutionBackwardData_t real = real_cudnnConvolutionBackwardData();
	dnn_desc_t wi, dyi, dxi;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnConvolutionBackwardData");
	if (!hook_begin())
		return real(handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace,
			    workSpaceSizeInBytes, beta, dxDesc, dx);
	hook_call_init(&c, VMEM_OP_CONV_BWD_DATA, "cudnnConvolutionBackwardData",
		       dnn_stream(handle));
	filter_info(wDesc, &wi);
	tensor_info(dyDesc, &dyi);
	tensor_info(dxDesc, &dxi);
	hook_call_ref(&c, w, wi.bytes, VMEM_ACCESS_R, "w");
	hook_call_ref(&c, dy, dyi.bytes, VMEM_ACCESS_R, "dy");
	hook_call_ref(&c, dx, dxi.bytes, out_access(beta, &dxi), "dx");
	hook_call_ref(&c, workSpace, workSpaceSizeInBytes, WS_ACCESS, "ws");
	conv_args(&c, (int)algo, workSpaceSizeInBytes, &dxi, &wi);
	st = conv_exec_legacy(&c, CONV_DIR_BWD_DATA, handle, alpha, dxDesc, dx, wDesc, w, dyDesc,
			      dy, convDesc, (int)algo, workSpace, workSpaceSizeInBytes, beta);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
						      const cudnnTensorDescriptor_t xDesc,
						      const void *x,
						      const cudnnTensorDescriptor_t dyDesc,
						      const void *dy,
						      const cudnnConvolutionDescriptor_t convDesc,
						      cudnnConvolutionBwdFilterAlgo_t algo,
						      void *workSpace, size_t workSpaceSizeInBytes,
						      const void *beta,
						      const cudnnFilterDescriptor_t dwDesc, void *dw)
{
	real_cudnnConvolutionBackwardFilter_t real = real_cudnnConvolutionBackwardFilter();
	dnn_desc_t xi, dyi, dwi;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnConvolutionBackwardFilter");
	if (!hook_begin())
		return real(handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace,
			    workSpaceSizeInBytes, beta, dwDesc, dw);
	hook_call_init(&c, VMEM_OP_CONV_BWD_FILTER, "cudnnConvolutionBackwardFilter",
		       dnn_stream(handle));
	tensor_info(xDesc, &xi);
	tensor_info(dyDesc, &dyi);
	filter_info(dwDesc, &dwi);
	hook_call_ref(&c, x, xi.bytes, VMEM_ACCESS_R, "x");
	hook_call_ref(&c, dy, dyi.bytes, VMEM_ACCESS_R, "dy");
	hook_call_ref(&c, dw, dwi.bytes, out_access(beta, &dwi), "dw");
	hook_call_ref(&c, workSpace, workSpaceSizeInBytes, WS_ACCESS, "ws");
	conv_args(&c, (int)algo, workSpaceSizeInBytes, &xi, &dwi);
	st = conv_exec_legacy(&c, CONV_DIR_BWD_FILTER, handle, alpha, xDesc, x, dwDesc, dw, dyDesc,
			      dy, convDesc, (int)algo, workSpace, workSpaceSizeInBytes, beta);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
						    const cudnnTensorDescriptor_t dyDesc,
						    const void *dy, const void *beta,
						    const cudnnTensorDescriptor_t dbDesc, void *db)
{
	real_cudnnConvolutionBackwardBias_t real = real_cudnnConvolutionBackwardBias();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnConvolutionBackwardBias");
	if (!hook_begin())
		return real(handle, alpha, dyDesc, dy, beta, dbDesc, db);
	hook_call_init(&c, VMEM_OP_CONV_BWD_BIAS, "cudnnConvolutionBackwardBias",
		       dnn_stream(handle));
	ref_t(&c, dyDesc, dy, VMEM_ACCESS_R, "dy", NULL);
	ref_out(&c, dbDesc, db, beta, "db");
	if (dnn_prepare(&c))
		st = real(handle, alpha, dyDesc, dy, beta, dbDesc, db);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
	cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc,
	const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
	const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
	void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
	const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc,
	const void *bias, const cudnnActivationDescriptor_t activationDesc,
	const cudnnTensorDescriptor_t yDesc, void *y)
{
	real_cudnnConvolutionBiasActivationForward_t real =
		real_cudnnConvolutionBiasActivationForward();
	dnn_desc_t xi, wi, yi;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnConvolutionBiasActivationForward");
	if (!hook_begin())
		return real(handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace,
			    workSpaceSizeInBytes, alpha2, zDesc, z, biasDesc, bias,
			    activationDesc, yDesc, y);
	hook_call_init(&c, VMEM_OP_CONV_FWD, "cudnnConvolutionBiasActivationForward",
		       dnn_stream(handle));
	tensor_info(xDesc, &xi);
	filter_info(wDesc, &wi);
	tensor_info(yDesc, &yi);
	hook_call_ref(&c, x, xi.bytes, VMEM_ACCESS_R, "x");
	hook_call_ref(&c, w, wi.bytes, VMEM_ACCESS_R, "w");
	/* y = act(alpha1*conv(x,w) + alpha2*z + bias): z is read when
	 * alpha2 != 0 (it may be y itself), y is only written */
	if (z && scale_nonzero(alpha2, yi.dtype))
		ref_t(&c, zDesc, z, VMEM_ACCESS_R, "z", NULL);
	ref_t(&c, biasDesc, bias, VMEM_ACCESS_R, "b", NULL);
	hook_call_ref(&c, y, yi.bytes, yi.dense ? VMEM_ACCESS_W | VMEM_ACCESS_WHOLE : VMEM_ACCESS_W,
		      "y");
	hook_call_ref(&c, workSpace, workSpaceSizeInBytes, WS_ACCESS, "ws");
	conv_args(&c, (int)algo, workSpaceSizeInBytes, &xi, &wi);
	if (dnn_prepare(&c))
		st = real(handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace,
			  workSpaceSizeInBytes, alpha2, zDesc, z, biasDesc, bias,
			  activationDesc, yDesc, y);
	return dnn_done(&c, st);
}

/* ------------------------------------------------------------------ */
/* Other tensor ops                                                    */

HOOK_EXPORT cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
				      const cudnnTensorDescriptor_t aDesc, const void *A,
				      const void *beta, const cudnnTensorDescriptor_t cDesc,
				      void *C)
{
	real_cudnnAddTensor_t real = real_cudnnAddTensor();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnAddTensor");
	if (!hook_begin())
		return real(handle, alpha, aDesc, A, beta, cDesc, C);
	hook_call_init(&c, VMEM_OP_ADD_TENSOR, "cudnnAddTensor", dnn_stream(handle));
	ref_t(&c, aDesc, A, VMEM_ACCESS_R, "a", NULL);
	ref_out(&c, cDesc, C, beta, "c");
	if (dnn_prepare(&c))
		st = real(handle, alpha, aDesc, A, beta, cDesc, C);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnOpTensor(cudnnHandle_t handle,
				     const cudnnOpTensorDescriptor_t opTensorDesc,
				     const void *alpha1, const cudnnTensorDescriptor_t aDesc,
				     const void *A, const void *alpha2,
				     const cudnnTensorDescriptor_t bDesc, const void *B,
				     const void *beta, const cudnnTensorDescriptor_t cDesc,
				     void *C)
{
	real_cudnnOpTensor_t real = real_cudnnOpTensor();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnOpTensor");
	if (!hook_begin())
		return real(handle, opTensorDesc, alpha1, aDesc, A, alpha2, bDesc, B, beta,
			    cDesc, C);
	hook_call_init(&c, VMEM_OP_OP_TENSOR, "cudnnOpTensor", dnn_stream(handle));
	ref_t(&c, aDesc, A, VMEM_ACCESS_R, "a", NULL);
	ref_t(&c, bDesc, B, VMEM_ACCESS_R, "b", NULL);
	ref_out(&c, cDesc, C, beta, "c");
	if (dnn_prepare(&c))
		st = real(handle, opTensorDesc, alpha1, aDesc, A, alpha2, bDesc, B, beta,
			  cDesc, C);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle,
					      cudnnActivationDescriptor_t activationDesc,
					      const void *alpha,
					      const cudnnTensorDescriptor_t xDesc, const void *x,
					      const void *beta,
					      const cudnnTensorDescriptor_t yDesc, void *y)
{
	real_cudnnActivationForward_t real = real_cudnnActivationForward();
	dnn_split_tensor_t t[2];
	hook_call_t c;

	if (!real)
		return DNN_MISSING("cudnnActivationForward");
	if (!hook_begin())
		return real(handle, activationDesc, alpha, xDesc, x, beta, yDesc, y);
	hook_call_init(&c, VMEM_OP_ACT_FWD, "cudnnActivationForward", dnn_stream(handle));
	sref(&c, &t[0], xDesc, x, false, NULL, "x");
	sref(&c, &t[1], yDesc, y, true, beta, "y");
	return run_per_image(&c, t, 2, act_fwd_slice,
			     &(split_ctx_t){ (void *)real, handle, activationDesc, alpha, beta });
}

HOOK_EXPORT cudnnStatus_t cudnnActivationBackward(cudnnHandle_t handle,
					       cudnnActivationDescriptor_t activationDesc,
					       const void *alpha,
					       const cudnnTensorDescriptor_t yDesc, const void *y,
					       const cudnnTensorDescriptor_t dyDesc,
					       const void *dy,
					       const cudnnTensorDescriptor_t xDesc, const void *x,
					       const void *beta,
					       const cudnnTensorDescriptor_t dxDesc, void *dx)
{
	real_cudnnActivationBackward_t real = real_cudnnActivationBackward();
	dnn_split_tensor_t t[4];
	hook_call_t c;

	if (!real)
		return DNN_MISSING("cudnnActivationBackward");
	if (!hook_begin())
		return real(handle, activationDesc, alpha, yDesc, y, dyDesc, dy, xDesc, x,
			    beta, dxDesc, dx);
	hook_call_init(&c, VMEM_OP_ACT_BWD, "cudnnActivationBackward", dnn_stream(handle));
	sref(&c, &t[0], yDesc, y, false, NULL, "y");
	sref(&c, &t[1], dyDesc, dy, false, NULL, "dy");
	sref(&c, &t[2], xDesc, x, false, NULL, "x");
	sref(&c, &t[3], dxDesc, dx, true, beta, "dx");
	return run_per_image(&c, t, 4, act_bwd_slice,
			     &(split_ctx_t){ (void *)real, handle, activationDesc, alpha, beta });
}

HOOK_EXPORT cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle,
					   const cudnnPoolingDescriptor_t poolingDesc,
					   const void *alpha, const cudnnTensorDescriptor_t xDesc,
					   const void *x, const void *beta,
					   const cudnnTensorDescriptor_t yDesc, void *y)
{
	real_cudnnPoolingForward_t real = real_cudnnPoolingForward();
	dnn_split_tensor_t t[2];
	hook_call_t c;

	if (!real)
		return DNN_MISSING("cudnnPoolingForward");
	if (!hook_begin())
		return real(handle, poolingDesc, alpha, xDesc, x, beta, yDesc, y);
	hook_call_init(&c, VMEM_OP_POOL_FWD, "cudnnPoolingForward", dnn_stream(handle));
	sref(&c, &t[0], xDesc, x, false, NULL, "x");
	sref(&c, &t[1], yDesc, y, true, beta, "y");
	return run_per_image(&c, t, 2, pool_fwd_slice,
			     &(split_ctx_t){ (void *)real, handle, poolingDesc, alpha, beta });
}

HOOK_EXPORT cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle,
					    const cudnnPoolingDescriptor_t poolingDesc,
					    const void *alpha,
					    const cudnnTensorDescriptor_t yDesc, const void *y,
					    const cudnnTensorDescriptor_t dyDesc, const void *dy,
					    const cudnnTensorDescriptor_t xDesc, const void *x,
					    const void *beta,
					    const cudnnTensorDescriptor_t dxDesc, void *dx)
{
	real_cudnnPoolingBackward_t real = real_cudnnPoolingBackward();
	dnn_split_tensor_t t[4];
	hook_call_t c;

	if (!real)
		return DNN_MISSING("cudnnPoolingBackward");
	if (!hook_begin())
		return real(handle, poolingDesc, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta,
			    dxDesc, dx);
	hook_call_init(&c, VMEM_OP_POOL_BWD, "cudnnPoolingBackward", dnn_stream(handle));
	sref(&c, &t[0], yDesc, y, false, NULL, "y");
	sref(&c, &t[1], dyDesc, dy, false, NULL, "dy");
	sref(&c, &t[2], xDesc, x, false, NULL, "x");
	sref(&c, &t[3], dxDesc, dx, true, beta, "dx");
	return run_per_image(&c, t, 4, pool_bwd_slice,
			     &(split_ctx_t){ (void *)real, handle, poolingDesc, alpha, beta });
}

HOOK_EXPORT cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
					   cudnnSoftmaxMode_t mode, const void *alpha,
					   const cudnnTensorDescriptor_t xDesc, const void *x,
					   const void *beta, const cudnnTensorDescriptor_t yDesc,
					   void *y)
{
	real_cudnnSoftmaxForward_t real = real_cudnnSoftmaxForward();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnSoftmaxForward");
	if (!hook_begin())
		return real(handle, algo, mode, alpha, xDesc, x, beta, yDesc, y);
	hook_call_init(&c, VMEM_OP_SOFTMAX_FWD, "cudnnSoftmaxForward", dnn_stream(handle));
	ref_t(&c, xDesc, x, VMEM_ACCESS_R, "x", NULL);
	ref_out(&c, yDesc, y, beta, "y");
	if (dnn_prepare(&c))
		st = real(handle, algo, mode, alpha, xDesc, x, beta, yDesc, y);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnSoftmaxBackward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
					    cudnnSoftmaxMode_t mode, const void *alpha,
					    const cudnnTensorDescriptor_t yDesc, const void *y,
					    const cudnnTensorDescriptor_t dyDesc, const void *dy,
					    const void *beta,
					    const cudnnTensorDescriptor_t dxDesc, void *dx)
{
	real_cudnnSoftmaxBackward_t real = real_cudnnSoftmaxBackward();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnSoftmaxBackward");
	if (!hook_begin())
		return real(handle, algo, mode, alpha, yDesc, y, dyDesc, dy, beta, dxDesc, dx);
	hook_call_init(&c, VMEM_OP_SOFTMAX_BWD, "cudnnSoftmaxBackward", dnn_stream(handle));
	ref_t(&c, yDesc, y, VMEM_ACCESS_R, "y", NULL);
	ref_t(&c, dyDesc, dy, VMEM_ACCESS_R, "dy", NULL);
	ref_out(&c, dxDesc, dx, beta, "dx");
	if (dnn_prepare(&c))
		st = real(handle, algo, mode, alpha, yDesc, y, dyDesc, dy, beta, dxDesc, dx);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardTraining(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
	const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
	void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
	const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
	void *resultRunningVariance, double epsilon, void *resultSaveMean,
	void *resultSaveInvVariance)
{
	real_cudnnBatchNormalizationForwardTraining_t real =
		real_cudnnBatchNormalizationForwardTraining();
	dnn_desc_t si;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBatchNormalizationForwardTraining");
	if (!hook_begin())
		return real(handle, mode, alpha, beta, xDesc, x, yDesc, y,
			    bnScaleBiasMeanVarDesc, bnScale, bnBias, exponentialAverageFactor,
			    resultRunningMean, resultRunningVariance, epsilon, resultSaveMean,
			    resultSaveInvVariance);
	hook_call_init(&c, VMEM_OP_BN_FWD_TRAIN, "cudnnBatchNormalizationForwardTraining",
		       dnn_stream(handle));
	ref_t(&c, xDesc, x, VMEM_ACCESS_R, "x", NULL);
	ref_out(&c, yDesc, y, beta, "y");
	tensor_info(bnScaleBiasMeanVarDesc, &si);
	hook_call_ref(&c, bnScale, si.bytes, VMEM_ACCESS_R, "scale");
	hook_call_ref(&c, bnBias, si.bytes, VMEM_ACCESS_R, "bias");
	/* running = new*factor + running*(1-factor): read and written */
	hook_call_ref(&c, resultRunningMean, si.bytes, VMEM_ACCESS_RW, "rmean");
	hook_call_ref(&c, resultRunningVariance, si.bytes, VMEM_ACCESS_RW, "rvar");
	/* the batch's statistics, one per channel: every byte written */
	hook_call_ref(&c, resultSaveMean, si.bytes, save_access(&si), "smean");
	hook_call_ref(&c, resultSaveInvVariance, si.bytes, save_access(&si), "sinvvar");
	hook_call_args(&c, "\"mode\":%d", (int)mode);
	if (dnn_prepare(&c))
		st = real(handle, mode, alpha, beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc,
			  bnScale, bnBias, exponentialAverageFactor, resultRunningMean,
			  resultRunningVariance, epsilon, resultSaveMean, resultSaveInvVariance);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardInference(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
	const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
	void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
	const void *bnBias, const void *estimatedMean, const void *estimatedVariance,
	double epsilon)
{
	real_cudnnBatchNormalizationForwardInference_t real =
		real_cudnnBatchNormalizationForwardInference();
	dnn_desc_t si;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBatchNormalizationForwardInference");
	if (!hook_begin())
		return real(handle, mode, alpha, beta, xDesc, x, yDesc, y,
			    bnScaleBiasMeanVarDesc, bnScale, bnBias, estimatedMean,
			    estimatedVariance, epsilon);
	hook_call_init(&c, VMEM_OP_BN_FWD_INFER, "cudnnBatchNormalizationForwardInference",
		       dnn_stream(handle));
	ref_t(&c, xDesc, x, VMEM_ACCESS_R, "x", NULL);
	ref_out(&c, yDesc, y, beta, "y");
	tensor_info(bnScaleBiasMeanVarDesc, &si);
	hook_call_ref(&c, bnScale, si.bytes, VMEM_ACCESS_R, "scale");
	hook_call_ref(&c, bnBias, si.bytes, VMEM_ACCESS_R, "bias");
	hook_call_ref(&c, estimatedMean, si.bytes, VMEM_ACCESS_R, "mean");
	hook_call_ref(&c, estimatedVariance, si.bytes, VMEM_ACCESS_R, "var");
	hook_call_args(&c, "\"mode\":%d", (int)mode);
	if (dnn_prepare(&c))
		st = real(handle, mode, alpha, beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc,
			  bnScale, bnBias, estimatedMean, estimatedVariance, epsilon);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnBatchNormalizationBackward(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alphaDataDiff,
	const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff,
	const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t dyDesc,
	const void *dy, const cudnnTensorDescriptor_t dxDesc, void *dx,
	const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScale,
	void *dBnScaleResult, void *dBnBiasResult, double epsilon, const void *savedMean,
	const void *savedInvVariance)
{
	real_cudnnBatchNormalizationBackward_t real = real_cudnnBatchNormalizationBackward();
	dnn_desc_t si;
	uint8_t pacc;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBatchNormalizationBackward");
	if (!hook_begin())
		return real(handle, mode, alphaDataDiff, betaDataDiff, alphaParamDiff,
			    betaParamDiff, xDesc, x, dyDesc, dy, dxDesc, dx, dBnScaleBiasDesc,
			    bnScale, dBnScaleResult, dBnBiasResult, epsilon, savedMean,
			    savedInvVariance);
	hook_call_init(&c, VMEM_OP_BN_BWD, "cudnnBatchNormalizationBackward", dnn_stream(handle));
	ref_t(&c, xDesc, x, VMEM_ACCESS_R, "x", NULL);
	ref_t(&c, dyDesc, dy, VMEM_ACCESS_R, "dy", NULL);
	ref_out(&c, dxDesc, dx, betaDataDiff, "dx");
	tensor_info(dBnScaleBiasDesc, &si);
	pacc = out_access(betaParamDiff, &si);
	hook_call_ref(&c, bnScale, si.bytes, VMEM_ACCESS_R, "scale");
	hook_call_ref(&c, dBnScaleResult, si.bytes, pacc, "dscale");
	hook_call_ref(&c, dBnBiasResult, si.bytes, pacc, "dbias");
	hook_call_ref(&c, savedMean, si.bytes, VMEM_ACCESS_R, "smean");
	hook_call_ref(&c, savedInvVariance, si.bytes, VMEM_ACCESS_R, "sinvvar");
	hook_call_args(&c, "\"mode\":%d", (int)mode);
	if (dnn_prepare(&c))
		st = real(handle, mode, alphaDataDiff, betaDataDiff, alphaParamDiff,
			  betaParamDiff, xDesc, x, dyDesc, dy, dxDesc, dx, dBnScaleBiasDesc,
			  bnScale, dBnScaleResult, dBnBiasResult, epsilon, savedMean,
			  savedInvVariance);
	return dnn_done(&c, st);
}

/* The Ex batch-norm calls: PyTorch's cudnn_batch_norm uses these, not the
 * plain ones (docs/pytorch-calls.md).  Besides the plain call's tensors
 * they take z (added before the activation of the fused ops), a
 * workspace (scratch, "ws") and a reserve space that forward writes and
 * backward reads, so it must survive in between like a saved tensor.
 * y, z, dz and the bias in backward matter only for the fused ops
 * (CUDNN_BATCHNORM_OPS_BN_ACTIVATION / _ADD_ACTIVATION); they are listed
 * whenever given, since vmem cannot tell which ones cuDNN will touch. */

HOOK_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
	const void *alpha, const void *beta, const cudnnTensorDescriptor_t xDesc,
	const void *xData, const cudnnTensorDescriptor_t zDesc, const void *zData,
	const cudnnTensorDescriptor_t yDesc, void *yData,
	const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
	const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
	void *resultRunningVariance, double epsilon, void *resultSaveMean,
	void *resultSaveInvVariance, cudnnActivationDescriptor_t activationDesc, void *workspace,
	size_t workSpaceSizeInBytes, void *reserveSpace, size_t reserveSpaceSizeInBytes)
{
	real_cudnnBatchNormalizationForwardTrainingEx_t real =
		real_cudnnBatchNormalizationForwardTrainingEx();
	dnn_desc_t si;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBatchNormalizationForwardTrainingEx");
	if (!hook_begin())
		return real(handle, mode, bnOps, alpha, beta, xDesc, xData, zDesc, zData, yDesc,
			    yData, bnScaleBiasMeanVarDesc, bnScale, bnBias,
			    exponentialAverageFactor, resultRunningMean, resultRunningVariance,
			    epsilon, resultSaveMean, resultSaveInvVariance, activationDesc,
			    workspace, workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes);
	hook_call_init(&c, VMEM_OP_BN_FWD_TRAIN, "cudnnBatchNormalizationForwardTrainingEx",
		       dnn_stream(handle));
	ref_t(&c, xDesc, xData, VMEM_ACCESS_R, "x", NULL);
	if (zData)
		ref_t(&c, zDesc, zData, VMEM_ACCESS_R, "z", NULL);
	ref_out(&c, yDesc, yData, beta, "y");
	tensor_info(bnScaleBiasMeanVarDesc, &si);
	hook_call_ref(&c, bnScale, si.bytes, VMEM_ACCESS_R, "scale");
	hook_call_ref(&c, bnBias, si.bytes, VMEM_ACCESS_R, "bias");
	hook_call_ref(&c, resultRunningMean, si.bytes, VMEM_ACCESS_RW, "rmean");
	hook_call_ref(&c, resultRunningVariance, si.bytes, VMEM_ACCESS_RW, "rvar");
	/* the batch's statistics, one per channel: every byte written */
	hook_call_ref(&c, resultSaveMean, si.bytes, save_access(&si), "smean");
	hook_call_ref(&c, resultSaveInvVariance, si.bytes, save_access(&si), "sinvvar");
	hook_call_ref(&c, workspace, workSpaceSizeInBytes, WS_ACCESS, "ws");
	hook_call_ref(&c, reserveSpace, reserveSpaceSizeInBytes, VMEM_ACCESS_W, "reserve");
	hook_call_args(&c, "\"mode\":%d,\"ops\":%d,\"ws\":%zu,\"reserve\":%zu", (int)mode,
		       (int)bnOps, workSpaceSizeInBytes, reserveSpaceSizeInBytes);
	if (dnn_prepare(&c))
		st = real(handle, mode, bnOps, alpha, beta, xDesc, xData, zDesc, zData, yDesc,
			  yData, bnScaleBiasMeanVarDesc, bnScale, bnBias, exponentialAverageFactor,
			  resultRunningMean, resultRunningVariance, epsilon, resultSaveMean,
			  resultSaveInvVariance, activationDesc, workspace, workSpaceSizeInBytes,
			  reserveSpace, reserveSpaceSizeInBytes);
	return dnn_done(&c, st);
}

HOOK_EXPORT cudnnStatus_t cudnnBatchNormalizationBackwardEx(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
	const void *alphaDataDiff, const void *betaDataDiff, const void *alphaParamDiff,
	const void *betaParamDiff, const cudnnTensorDescriptor_t xDesc, const void *xData,
	const cudnnTensorDescriptor_t yDesc, const void *yData,
	const cudnnTensorDescriptor_t dyDesc, const void *dyData,
	const cudnnTensorDescriptor_t dzDesc, void *dzData, const cudnnTensorDescriptor_t dxDesc,
	void *dxData, const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScaleData,
	const void *bnBiasData, void *dBnScaleData, void *dBnBiasData, double epsilon,
	const void *savedMean, const void *savedInvVariance,
	cudnnActivationDescriptor_t activationDesc, void *workSpace, size_t workSpaceSizeInBytes,
	void *reserveSpace, size_t reserveSpaceSizeInBytes)
{
	real_cudnnBatchNormalizationBackwardEx_t real = real_cudnnBatchNormalizationBackwardEx();
	dnn_desc_t si;
	uint8_t pacc;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBatchNormalizationBackwardEx");
	if (!hook_begin())
		return real(handle, mode, bnOps, alphaDataDiff, betaDataDiff, alphaParamDiff,
			    betaParamDiff, xDesc, xData, yDesc, yData, dyDesc, dyData, dzDesc,
			    dzData, dxDesc, dxData, dBnScaleBiasDesc, bnScaleData, bnBiasData,
			    dBnScaleData, dBnBiasData, epsilon, savedMean, savedInvVariance,
			    activationDesc, workSpace, workSpaceSizeInBytes, reserveSpace,
			    reserveSpaceSizeInBytes);
	hook_call_init(&c, VMEM_OP_BN_BWD, "cudnnBatchNormalizationBackwardEx", dnn_stream(handle));
	ref_t(&c, xDesc, xData, VMEM_ACCESS_R, "x", NULL);
	if (yData)
		ref_t(&c, yDesc, yData, VMEM_ACCESS_R, "y", NULL);
	ref_t(&c, dyDesc, dyData, VMEM_ACCESS_R, "dy", NULL);
	if (dzData)
		ref_t(&c, dzDesc, dzData, VMEM_ACCESS_W, "dz", NULL);
	ref_out(&c, dxDesc, dxData, betaDataDiff, "dx");
	tensor_info(dBnScaleBiasDesc, &si);
	pacc = out_access(betaParamDiff, &si);
	hook_call_ref(&c, bnScaleData, si.bytes, VMEM_ACCESS_R, "scale");
	hook_call_ref(&c, bnBiasData, si.bytes, VMEM_ACCESS_R, "bias");
	hook_call_ref(&c, dBnScaleData, si.bytes, pacc, "dscale");
	hook_call_ref(&c, dBnBiasData, si.bytes, pacc, "dbias");
	hook_call_ref(&c, savedMean, si.bytes, VMEM_ACCESS_R, "smean");
	hook_call_ref(&c, savedInvVariance, si.bytes, VMEM_ACCESS_R, "sinvvar");
	hook_call_ref(&c, workSpace, workSpaceSizeInBytes, VMEM_ACCESS_W, "ws");
	hook_call_ref(&c, reserveSpace, reserveSpaceSizeInBytes, VMEM_ACCESS_R, "reserve");
	hook_call_args(&c, "\"mode\":%d,\"ops\":%d,\"ws\":%zu,\"reserve\":%zu", (int)mode,
		       (int)bnOps, workSpaceSizeInBytes, reserveSpaceSizeInBytes);
	if (dnn_prepare(&c))
		st = real(handle, mode, bnOps, alphaDataDiff, betaDataDiff, alphaParamDiff,
			  betaParamDiff, xDesc, xData, yDesc, yData, dyDesc, dyData, dzDesc, dzData,
			  dxDesc, dxData, dBnScaleBiasDesc, bnScaleData, bnBiasData, dBnScaleData,
			  dBnBiasData, epsilon, savedMean, savedInvVariance, activationDesc,
			  workSpace, workSpaceSizeInBytes, reserveSpace, reserveSpaceSizeInBytes);
	return dnn_done(&c, st);
}

/* Their size queries touch no device memory; traced as ws_query with the
 * mode, the ops and the size cuDNN answered ("ws" or "reserve"). */
#define BN_SIZE_QUERY(name, key, call)                                                    \
	do {                                                                              \
		real_##name##_t real = real_##name();                                     \
		dnn_desc_t xi;                                                            \
		hook_call_t c;                                                            \
		cudnnStatus_t st;                                                         \
		if (!real)                                                                \
			return DNN_MISSING(#name);                                        \
		if (!hook_begin())                                                        \
			return real call;                                                 \
		hook_call_init(&c, VMEM_OP_WS_QUERY, #name, dnn_stream(handle));          \
		tensor_info(xDesc, &xi);                                                  \
		st = dnn_prepare(&c) ? real call : CUDNN_STATUS_ALLOC_FAILED;             \
		hook_call_args(&c, "\"mode\":%d,\"ops\":%d,\"" key "\":%zu", (int)mode,   \
			       (int)bnOps,                                                \
			       (st == CUDNN_STATUS_SUCCESS && sizeInBytes) ? *sizeInBytes : 0); \
		if (xi.nbdims >= 4)                                                       \
			hook_call_args(&c, "\"n\":%d,\"c\":%d,\"h\":%d,\"w\":%d",         \
				       xi.dims[0], xi.dims[1], xi.dims[2], xi.dims[3]);   \
		return dnn_done(&c, st);                                                  \
	} while (0)

HOOK_EXPORT cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
	const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t zDesc,
	const cudnnTensorDescriptor_t yDesc, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
	const cudnnActivationDescriptor_t activationDesc, size_t *sizeInBytes)
{
	BN_SIZE_QUERY(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize, "ws",
		      (handle, mode, bnOps, xDesc, zDesc, yDesc, bnScaleBiasMeanVarDesc,
		       activationDesc, sizeInBytes));
}

HOOK_EXPORT cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
	const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t yDesc,
	const cudnnTensorDescriptor_t dyDesc, const cudnnTensorDescriptor_t dzDesc,
	const cudnnTensorDescriptor_t dxDesc, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
	const cudnnActivationDescriptor_t activationDesc, size_t *sizeInBytes)
{
	BN_SIZE_QUERY(cudnnGetBatchNormalizationBackwardExWorkspaceSize, "ws",
		      (handle, mode, bnOps, xDesc, yDesc, dyDesc, dzDesc, dxDesc,
		       dBnScaleBiasDesc, activationDesc, sizeInBytes));
}

HOOK_EXPORT cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
	cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
	const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t xDesc,
	size_t *sizeInBytes)
{
	BN_SIZE_QUERY(cudnnGetBatchNormalizationTrainingExReserveSpaceSize, "reserve",
		      (handle, mode, bnOps, activationDesc, xDesc, sizeInBytes));
}

/* ------------------------------------------------------------------ */
/* Algorithm queries.  No device memory is touched (Find without Ex
 * allocates its own buffers through cudaMalloc, which is hooked).  The
 * answer is what vmem will run (conv_exec_answer: VMEM_CONV_ALGO, the
 * µ-cuDNN configuration); the trace records that first answer: its
 * algorithm and workspace. */

#define ALGO_QUERY(name, kind_args, call, xdesc_info, wdesc_info, answer)                 \
	do {                                                                              \
		real_##name##_t real = real_##name();                                     \
		dnn_desc_t xi, wi;                                                        \
		hook_call_t c;                                                            \
		cudnnStatus_t st;                                                         \
		if (!real)                                                                \
			return DNN_MISSING(#name);                                        \
		if (!hook_begin())                                                        \
			return real call;                                                 \
		hook_call_init(&c, VMEM_OP_ALGO_QUERY, #name, dnn_stream(handle));        \
		xdesc_info;                                                               \
		wdesc_info;                                                               \
		kind_args;                                                                \
		st = dnn_prepare(&c) ? real call : CUDNN_STATUS_ALLOC_FAILED;             \
		answer;                                                                   \
		algo_result(&c, st, requestedAlgoCount, returnedAlgoCount,                \
			    perfResults ? (int)perfResults[0].algo : -1,                  \
			    perfResults ? perfResults[0].memory : 0, &xi, &wi);           \
		return dnn_done(&c, st);                                                  \
	} while (0)

static void algo_result(hook_call_t *c, cudnnStatus_t st, int req, const int *ret, int algo,
			size_t mem, const dnn_desc_t *x, const dnn_desc_t *w)
{
	int n = (st == CUDNN_STATUS_SUCCESS && ret) ? *ret : 0;

	hook_call_args(c, "\"requested\":%d,\"returned\":%d", req, n);
	conv_args(c, n > 0 ? algo : -1, n > 0 ? mem : 0, x, w);
}

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
	const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnGetConvolutionForwardAlgorithm_v7, (void)0,
		   (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(srcDesc, &xi), filter_info(filterDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_FWD, handle, srcDesc, filterDesc, destDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
	cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
	const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnGetConvolutionBackwardDataAlgorithm_v7, (void)0,
		   (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(gradDesc, &xi), filter_info(filterDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_DATA, handle, gradDesc, filterDesc, diffDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
	const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnGetConvolutionBackwardFilterAlgorithm_v7, (void)0,
		   (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(srcDesc, &xi), filter_info(gradDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_FILTER, handle, srcDesc, gradDesc, diffDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
	const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnFindConvolutionForwardAlgorithm, (void)0,
		   (handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(xDesc, &xi), filter_info(wDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_FWD, handle, xDesc, wDesc, yDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
	cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
	const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnFindConvolutionBackwardDataAlgorithm, (void)0,
		   (handle, wDesc, dyDesc, convDesc, dxDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(dxDesc, &xi), filter_info(wDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_DATA, handle, dxDesc, wDesc, dyDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
	const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount,
	int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
	ALGO_QUERY(cudnnFindConvolutionBackwardFilterAlgorithm, (void)0,
		   (handle, xDesc, dyDesc, convDesc, dwDesc, requestedAlgoCount,
		    returnedAlgoCount, perfResults),
		   tensor_info(xDesc, &xi), filter_info(dwDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_FILTER, handle, xDesc, dwDesc, dyDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

/* The Ex variants run every candidate on the caller's buffers: x and w
 * are read, the output is overwritten, the workspace is scratch. */
HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x,
	const cudnnFilterDescriptor_t wDesc, const void *w,
	const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, void *y,
	const int requestedAlgoCount, int *returnedAlgoCount,
	cudnnConvolutionFwdAlgoPerf_t *perfResults, void *workSpace, size_t workSpaceSizeInBytes)
{
	size_t wsb = workSpaceSizeInBytes;

	ALGO_QUERY(cudnnFindConvolutionForwardAlgorithmEx,
		   (hook_call_ref(&c, x, xi.bytes, VMEM_ACCESS_R, "x"),
		    hook_call_ref(&c, w, wi.bytes, VMEM_ACCESS_R, "w"),
		    ref_t(&c, yDesc, y, VMEM_ACCESS_W, "y", NULL),
		    wsb = conv_exec_find_ws(&c, workSpace, workSpaceSizeInBytes),
		    hook_call_ref(&c, wsb ? workSpace : NULL, wsb, VMEM_ACCESS_W, "ws")),
		   (handle, xDesc, x, wDesc, w, convDesc, yDesc, y, requestedAlgoCount,
		    returnedAlgoCount, perfResults, workSpace, wsb),
		   tensor_info(xDesc, &xi), filter_info(wDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_FWD, handle, xDesc, wDesc, yDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
	cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void *w,
	const cudnnTensorDescriptor_t dyDesc, const void *dy,
	const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
	void *dx, const int requestedAlgoCount, int *returnedAlgoCount,
	cudnnConvolutionBwdDataAlgoPerf_t *perfResults, void *workSpace,
	size_t workSpaceSizeInBytes)
{
	size_t wsb = workSpaceSizeInBytes;

	ALGO_QUERY(cudnnFindConvolutionBackwardDataAlgorithmEx,
		   (hook_call_ref(&c, w, wi.bytes, VMEM_ACCESS_R, "w"),
		    ref_t(&c, dyDesc, dy, VMEM_ACCESS_R, "dy", NULL),
		    hook_call_ref(&c, dx, xi.bytes, VMEM_ACCESS_W, "dx"),
		    wsb = conv_exec_find_ws(&c, workSpace, workSpaceSizeInBytes),
		    hook_call_ref(&c, wsb ? workSpace : NULL, wsb, VMEM_ACCESS_W, "ws")),
		   (handle, wDesc, w, dyDesc, dy, convDesc, dxDesc, dx, requestedAlgoCount,
		    returnedAlgoCount, perfResults, workSpace, wsb),
		   tensor_info(dxDesc, &xi), filter_info(wDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_DATA, handle, dxDesc, wDesc, dyDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

HOOK_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x,
	const cudnnTensorDescriptor_t dyDesc, const void *y,
	const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc,
	void *dw, const int requestedAlgoCount, int *returnedAlgoCount,
	cudnnConvolutionBwdFilterAlgoPerf_t *perfResults, void *workSpace,
	size_t workSpaceSizeInBytes)
{
	size_t wsb = workSpaceSizeInBytes;

	ALGO_QUERY(cudnnFindConvolutionBackwardFilterAlgorithmEx,
		   (hook_call_ref(&c, x, xi.bytes, VMEM_ACCESS_R, "x"),
		    ref_t(&c, dyDesc, y, VMEM_ACCESS_R, "dy", NULL),
		    hook_call_ref(&c, dw, wi.bytes, VMEM_ACCESS_W, "dw"),
		    wsb = conv_exec_find_ws(&c, workSpace, workSpaceSizeInBytes),
		    hook_call_ref(&c, wsb ? workSpace : NULL, wsb, VMEM_ACCESS_W, "ws")),
		   (handle, xDesc, x, dyDesc, y, convDesc, dwDesc, dw, requestedAlgoCount,
		    returnedAlgoCount, perfResults, workSpace, wsb),
		   tensor_info(xDesc, &xi), filter_info(dwDesc, &wi),
		   conv_exec_answer(&c, CONV_DIR_BWD_FILTER, handle, xDesc, dwDesc, dyDesc, convDesc, st,
				    requestedAlgoCount, returnedAlgoCount, perfResults));
}

/* ------------------------------------------------------------------ */
/* Workspace-size queries: traced with the algorithm asked about and the
 * size answered, which under VMEM_WORKSPACE=wr|wd is the configuration's
 * (wd: 0, since vmem owns the workspace; conv_exec_ws_answer). */

#define WS_QUERY(name, call, xdesc_info, wdesc_info, answer)                              \
	do {                                                                              \
		real_##name##_t real = real_##name();                                     \
		dnn_desc_t xi, wi;                                                        \
		hook_call_t c;                                                            \
		cudnnStatus_t st;                                                         \
		if (!real)                                                                \
			return DNN_MISSING(#name);                                        \
		if (!hook_begin())                                                        \
			return real call;                                                 \
		hook_call_init(&c, VMEM_OP_WS_QUERY, #name, dnn_stream(handle));          \
		xdesc_info;                                                               \
		wdesc_info;                                                               \
		st = dnn_prepare(&c) ? real call : CUDNN_STATUS_ALLOC_FAILED;             \
		answer;                                                                   \
		conv_args(&c, (int)algo,                                                  \
			  (st == CUDNN_STATUS_SUCCESS && sizeInBytes) ? *sizeInBytes : 0, \
			  &xi, &wi);                                                      \
		return dnn_done(&c, st);                                                  \
	} while (0)

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
	const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)
{
	WS_QUERY(cudnnGetConvolutionForwardWorkspaceSize,
		 (handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes),
		 tensor_info(xDesc, &xi), filter_info(wDesc, &wi),
		 conv_exec_ws_answer(&c, CONV_DIR_FWD, handle, xDesc, wDesc, yDesc, convDesc, st,
				     sizeInBytes));
}

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
	cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
	const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
	size_t *sizeInBytes)
{
	WS_QUERY(cudnnGetConvolutionBackwardDataWorkspaceSize,
		 (handle, wDesc, dyDesc, convDesc, dxDesc, algo, sizeInBytes),
		 tensor_info(dxDesc, &xi), filter_info(wDesc, &wi),
		 conv_exec_ws_answer(&c, CONV_DIR_BWD_DATA, handle, dxDesc, wDesc, dyDesc, convDesc, st,
				     sizeInBytes));
}

HOOK_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
	cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
	const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
	const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
	size_t *sizeInBytes)
{
	WS_QUERY(cudnnGetConvolutionBackwardFilterWorkspaceSize,
		 (handle, xDesc, dyDesc, convDesc, gradDesc, algo, sizeInBytes),
		 tensor_info(xDesc, &xi), filter_info(gradDesc, &wi),
		 conv_exec_ws_answer(&c, CONV_DIR_BWD_FILTER, handle, xDesc, gradDesc, dyDesc, convDesc, st,
				     sizeInBytes));
}

/* ------------------------------------------------------------------ */
/* Stream binding: later calls on the handle run on `streamId`.  Traced so
 * the reader sees which stream the following events belong to. */

HOOK_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
	real_cudnnSetStream_t real = real_cudnnSetStream();
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnSetStream");
	if (!hook_begin())
		return real(handle, streamId);
	hook_call_init(&c, VMEM_OP_STREAM, "cudnnSetStream", streamId);
	if (dnn_prepare(&c))
		st = real(handle, streamId);
	return dnn_done(&c, st);
}
