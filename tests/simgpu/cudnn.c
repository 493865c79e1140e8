/* tests/simgpu/cudnn.c - the simulated libcudnn.so.9, legacy API.
 *
 * Implements, on host memory, the cuDNN 9 calls a framework makes for CNN
 * training in float32: handles, tensor/filter/convolution/activation/
 * pooling/op-tensor descriptors, convolution forward and backward with
 * several algorithms, bias, add/op tensor, activation, pooling, softmax and
 * batch normalisation.  Results come from ref.c (bit-identical across
 * algorithms and micro-batch splits, see ref.h); time is modelled and
 * queued on the handle's stream through libsimgpu.
 *
 * Convolution algorithms (the table is in docs/simgpu-dnn.md): each has a
 * workspace formula and a speed factor on the FLOP term, so larger
 * workspaces buy speed and µ-cuDNN-style micro-batching (IPDPS 2018, §III)
 * has real trade-offs.  Every algorithm writes its whole workspace, so an
 * undersized, unmapped or offloaded workspace faults.
 *
 * Every call that touches memory checks each range with simgpu_check()
 * (device memory only) under simgpu_op_begin(<cuDNN function name>), so a
 * stray or offloaded tensor aborts with "simgpu: illegal address ... in
 * cudnnConvolutionForward"; in dry-run mode nothing is computed.
 *
 * Thread-safety: no global mutable state except the last-error text
 * (thread-local); descriptors and handles belong to their caller as in
 * cuDNN.
 */
#include "cudnn_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu.h"

#define API __attribute__((visibility("default")))

#define MAGIC_TENSOR 0x646e6e54u
#define MAGIC_FILTER 0x646e6e46u
#define MAGIC_CONV   0x646e6e43u
#define MAGIC_ACT    0x646e6e41u
#define MAGIC_POOL   0x646e6e50u
#define MAGIC_OPT    0x646e6e4fu

#define MAX_DIMS CUDNN_DIM_MAX

struct cudnnTensorStruct {
	uint32_t magic;
	cudnnDataType_t dt;
	int nd;
	int dims[MAX_DIMS];
	int strides[MAX_DIMS];
};

struct cudnnFilterStruct {
	uint32_t magic;
	cudnnDataType_t dt;
	cudnnTensorFormat_t format;
	int nd;
	int dims[MAX_DIMS];
};

struct cudnnConvolutionStruct {
	uint32_t magic;
	int nsp;                        /* spatial dims, 0 until set */
	int pad[MAX_DIMS], stride[MAX_DIMS], dil[MAX_DIMS];
	cudnnConvolutionMode_t mode;
	cudnnDataType_t ctype;
	cudnnMathType_t math;
	int groups;
	int reorder;
};

struct cudnnActivationStruct {
	uint32_t magic;
	cudnnActivationMode_t mode;
	cudnnNanPropagation_t nan;
	double coef, swish_beta;
};

struct cudnnPoolingStruct {
	uint32_t magic;
	cudnnPoolingMode_t mode;
	cudnnNanPropagation_t nan;
	int nsp;
	int win[MAX_DIMS], pad[MAX_DIMS], stride[MAX_DIMS];
};

struct cudnnOpTensorStruct {
	uint32_t magic;
	cudnnOpTensorOp_t op;
	cudnnDataType_t ctype;
	cudnnNanPropagation_t nan;
};

static _Thread_local char last_error[256];

static cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, const char *what)
{
	snprintf(last_error, sizeof(last_error), fmt, what);
	return st;
}

#define BAD(what) fail(CUDNN_STATUS_BAD_PARAM, "simgpu cuDNN: bad parameter: %s", what)
#define UNSUPPORTED(what) fail(CUDNN_STATUS_NOT_SUPPORTED, "simgpu cuDNN: not supported: %s", what)
#define NO_MEMORY() fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "simgpu cuDNN: %s", "host scratch allocation failed")

/* Runs `call` (a cudnnStatus_t expression) with the fault name set.  On
 * a capturing stream the op is refused (and the capture invalidated): the
 * simulator captures convolutions only (dnn_conv_exec). */
#define OP(call)                                                        \
	do {                                                            \
		if (dnn_handle_ok(h) && simgpu_capture_refuse(h->stream, __func__)) \
			return UNSUPPORTED("this call in a stream capture (the simulated cuDNN captures convolutions only)"); \
		simgpu_op_begin(__func__);                              \
		cudnnStatus_t op_st_ = (call);                          \
		simgpu_op_end();                                        \
		return op_st_;                                          \
	} while (0)

/* ------------------------------------------------------- version, errors */

API size_t cudnnGetVersion(void) { return CUDNN_VERSION; }
API size_t cudnnGetMaxDeviceVersion(void) { return 1200; }
API size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }
API cudnnStatus_t cudnnGraphVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
API cudnnStatus_t cudnnOpsVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
API cudnnStatus_t cudnnCnnVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
API cudnnStatus_t cudnnAdvVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

API cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value)
{
	if (!value)
		return BAD("value is NULL");
	switch (type) {
	case MAJOR_VERSION: *value = CUDNN_MAJOR; break;
	case MINOR_VERSION: *value = CUDNN_MINOR; break;
	case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; break;
	default: return BAD("property type");
	}
	return CUDNN_STATUS_SUCCESS;
}

API const char *cudnnGetErrorString(cudnnStatus_t st)
{
	switch ((int)st) {
	case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
	case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
	case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
	case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
	case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
	case 2001: return "CUDNN_STATUS_INVALID_VALUE";
	case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
	case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
	case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
	case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
	case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
	case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
	case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
	case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES: return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
	case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
	case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
	case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
	case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
	case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
	case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
	case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
	case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
	case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
	case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
	case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
	default: return "CUDNN_STATUS_UNKNOWN";
	}
}

API void cudnnGetLastErrorString(char *message, size_t max_size)
{
	if (!message || !max_size)
		return;
	snprintf(message, max_size, "%s", last_error);
	last_error[0] = '\0';
}

/* ---------------------------------------------------------------- handle */

DNN_HIDDEN bool dnn_handle_ok(cudnnHandle_t h)
{
	return h && h->magic == DNN_MAGIC_HANDLE;
}

API cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
	if (!handle)
		return BAD("handle is NULL");
	simgpu_init();
	struct cudnnContext *h = calloc(1, sizeof(*h));
	if (!h)
		return NO_MEMORY();
	h->magic = DNN_MAGIC_HANDLE;
	*handle = h;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
	if (!dnn_handle_ok(h))
		return BAD("handle");
	h->magic = 0;
	free(h);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t stream)
{
	if (!dnn_handle_ok(h))
		return BAD("handle");
	h->stream = stream;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *stream)
{
	if (!dnn_handle_ok(h) || !stream)
		return BAD("handle or stream pointer");
	*stream = h->stream;
	return CUDNN_STATUS_SUCCESS;
}

/* -------------------------------------------------------- tensor layouts */

static size_t dt_size(cudnnDataType_t dt)
{
	switch (dt) {
	case CUDNN_DATA_DOUBLE: case CUDNN_DATA_INT64: return 8;
	case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16: return 2;
	case CUDNN_DATA_INT8: case CUDNN_DATA_UINT8: case CUDNN_DATA_BOOLEAN:
	case CUDNN_DATA_FP8_E4M3: case CUDNN_DATA_FP8_E5M2: return 1;
	default: return 4;
	}
}

static bool dt_known(cudnnDataType_t dt)
{
	return (int)dt >= CUDNN_DATA_FLOAT && (int)dt <= CUDNN_DATA_COMPLEX_FP64;
}

static size_t span4(const dnn_t4_t *l)
{
	size_t s = 1;
	for (int i = 0; i < 4; i++)
		s += (size_t)(l->dims[i] - 1) * (size_t)l->strides[i];
	return s;
}

static size_t count4(const dnn_t4_t *l)
{
	return (size_t)l->dims[0] * l->dims[1] * l->dims[2] * l->dims[3];
}

static bool packed4(const dnn_t4_t *l)
{
	int64_t s = 1;
	for (int i = 3; i >= 0; i--) {
		if (l->dims[i] > 1 && l->strides[i] != s)
			return false;
		s *= l->dims[i];
	}
	return true;
}

static bool same_dims(const dnn_t4_t *a, const dnn_t4_t *b)
{
	return memcmp(a->dims, b->dims, sizeof(a->dims)) == 0;
}

static void gather4(const dnn_t4_t *l, const float *src, float *dst)
{
	size_t o = 0;
	for (int n = 0; n < l->dims[0]; n++)
		for (int c = 0; c < l->dims[1]; c++)
			for (int h = 0; h < l->dims[2]; h++) {
				const float *s = src + n * l->strides[0] + c * l->strides[1] + h * l->strides[2];
				for (int w = 0; w < l->dims[3]; w++)
					dst[o++] = s[w * l->strides[3]];
			}
}

static void scatter4(const dnn_t4_t *l, const float *src, float *dst)
{
	size_t o = 0;
	for (int n = 0; n < l->dims[0]; n++)
		for (int c = 0; c < l->dims[1]; c++)
			for (int h = 0; h < l->dims[2]; h++) {
				float *d = dst + n * l->strides[0] + c * l->strides[1] + h * l->strides[2];
				for (int w = 0; w < l->dims[3]; w++)
					d[w * l->strides[3]] = src[o++];
			}
}

/* A packed host view of a tensor: the device memory itself when packed,
 * else a gathered copy written back by view_put(). */
typedef struct {
	float *p;
	float *dev;
	const dnn_t4_t *l;
	bool copy;
} view_t;

static bool view_get(view_t *v, const dnn_t4_t *l, const void *dev, bool load)
{
	v->dev = (float *)dev;
	v->l = l;
	v->copy = !packed4(l);
	if (!v->copy) {
		v->p = v->dev;
		return true;
	}
	v->p = malloc(sizeof(float) * count4(l));
	if (!v->p)
		return false;
	if (load)
		gather4(l, v->dev, v->p);
	return true;
}

static void view_put(view_t *v, bool store)
{
	if (v->copy && v->p) {
		if (store)
			scatter4(v->l, v->p, v->dev);
		free(v->p);
	}
	v->p = NULL;
}

static void check4(const void *p, const dnn_t4_t *l)
{
	simgpu_check(p, span4(l) * sizeof(float), false);
}

/* An output's access: read too when beta is not 0. */
#define OUT(beta) ((beta) != 0.0f ? SIMGPU_ACC_RW : SIMGPU_ACC_W)

/* Checks a tensor and declares its access to the race checker, exactly:
 * a strided view (a channel slice of a concatenation) is one range per
 * image, so a neighbouring slice another stream writes is not touched. */
static void acc4(const void *p, const dnn_t4_t *l, unsigned mode)
{
	size_t inner = 1;

	check4(p, l);
	for (int i = 1; i < 4; i++)
		inner += (size_t)(l->dims[i] - 1) * (size_t)l->strides[i];
	if (packed4(l) || l->dims[0] <= 1 || (size_t)l->strides[0] < inner) {
		simgpu_access(p, span4(l) * sizeof(float), mode);
		return;
	}
	for (int n = 0; n < l->dims[0]; n++)
		simgpu_access((const float *)p + (size_t)n * (size_t)l->strides[0],
			      inner * sizeof(float), mode);
}

static void submit(cudnnHandle_t h, double flops, double bytes)
{
	simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, simgpu_op_seconds(flops, bytes));
}

/* ---------------------------------------------------- tensor descriptors */

#define CREATE_DESC(fn, type, magic_value)                      \
	API cudnnStatus_t fn(type *d)                           \
	{                                                       \
		if (!d)                                         \
			return BAD("descriptor pointer is NULL");\
		*d = calloc(1, sizeof(**d));                    \
		if (!*d)                                        \
			return NO_MEMORY();                     \
		(*d)->magic = magic_value;                      \
		return CUDNN_STATUS_SUCCESS;                    \
	}
#define DESTROY_DESC(fn, type, magic_value)                     \
	API cudnnStatus_t fn(type d)                            \
	{                                                       \
		if (!d)                                         \
			return CUDNN_STATUS_SUCCESS;            \
		if (d->magic != magic_value)                    \
			return BAD("descriptor");               \
		d->magic = 0;                                   \
		free(d);                                        \
		return CUDNN_STATUS_SUCCESS;                    \
	}

CREATE_DESC(cudnnCreateTensorDescriptor, cudnnTensorDescriptor_t, MAGIC_TENSOR)
DESTROY_DESC(cudnnDestroyTensorDescriptor, cudnnTensorDescriptor_t, MAGIC_TENSOR)

static bool tensor_ok(const struct cudnnTensorStruct *d)
{
	return d && d->magic == MAGIC_TENSOR && d->nd > 0;
}

API cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t dt,
					       int n, int c, int h, int w,
					       int ns, int cs, int hs, int ws)
{
	if (!d || d->magic != MAGIC_TENSOR || !dt_known(dt))
		return BAD("tensor descriptor or data type");
	if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || ns <= 0 || cs <= 0 || hs <= 0 || ws <= 0)
		return BAD("tensor dimension or stride not positive");
	d->dt = dt;
	d->nd = 4;
	d->dims[0] = n, d->dims[1] = c, d->dims[2] = h, d->dims[3] = w;
	d->strides[0] = ns, d->strides[1] = cs, d->strides[2] = hs, d->strides[3] = ws;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
					     cudnnDataType_t dt, int n, int c, int h, int w)
{
	if (format == CUDNN_TENSOR_NCHW)
		return cudnnSetTensor4dDescriptorEx(d, dt, n, c, h, w, c * h * w, h * w, w, 1);
	if (format == CUDNN_TENSOR_NHWC)
		return cudnnSetTensor4dDescriptorEx(d, dt, n, c, h, w, h * w * c, 1, w * c, c);
	return UNSUPPORTED("tensor format");
}

API cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t *dt,
					     int *n, int *c, int *h, int *w,
					     int *ns, int *cs, int *hs, int *ws)
{
	if (!tensor_ok(d) || !dt || !n || !c || !h || !w || !ns || !cs || !hs || !ws)
		return BAD("tensor descriptor or output pointer");
	int dims[4] = { 1, 1, 1, 1 }, str[4] = { 1, 1, 1, 1 };
	for (int i = 0; i < 4 && i < d->nd; i++)
		dims[i] = d->dims[i], str[i] = d->strides[i];
	*dt = d->dt;
	*n = dims[0], *c = dims[1], *h = dims[2], *w = dims[3];
	*ns = str[0], *cs = str[1], *hs = str[2], *ws = str[3];
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t dt,
					     int nb, const int dimA[], const int strideA[])
{
	if (!d || d->magic != MAGIC_TENSOR || !dt_known(dt) || nb <= 0 || nb > MAX_DIMS || !dimA || !strideA)
		return BAD("tensor descriptor, data type or nbDims");
	for (int i = 0; i < nb; i++)
		if (dimA[i] <= 0 || strideA[i] <= 0)
			return BAD("tensor dimension or stride not positive");
	d->dt = dt;
	d->nd = nb;
	for (int i = 0; i < nb; i++)
		d->dims[i] = dimA[i], d->strides[i] = strideA[i];
	return CUDNN_STATUS_SUCCESS;
}

/* packed strides of a format: NCHW row-major; NHWC channels innermost */
static void format_strides(cudnnTensorFormat_t f, int nb, const int *dims, int *str)
{
	int s = 1;
	if (f == CUDNN_TENSOR_NHWC && nb >= 3) {
		str[1] = 1;
		s = dims[1];
		for (int i = nb - 1; i >= 2; i--)
			str[i] = s, s *= dims[i];
		str[0] = s;
		return;
	}
	for (int i = nb - 1; i >= 0; i--)
		str[i] = s, s *= dims[i];
}

API cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
					       cudnnDataType_t dt, int nb, const int dimA[])
{
	int str[MAX_DIMS];
	if (nb <= 0 || nb > MAX_DIMS || !dimA)
		return BAD("nbDims or dimA");
	if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
		return UNSUPPORTED("tensor format");
	format_strides(format, nb, dimA, str);
	return cudnnSetTensorNdDescriptor(d, dt, nb, dimA, str);
}

API cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int req,
					     cudnnDataType_t *dt, int *nb, int dimA[], int strideA[])
{
	if (!tensor_ok(d) || req < 0 || (req > 0 && (!dimA || !strideA)))
		return BAD("tensor descriptor or arrays");
	if (dt)
		*dt = d->dt;
	if (nb)
		*nb = d->nd;
	for (int i = 0; i < req && i < d->nd; i++)
		dimA[i] = d->dims[i], strideA[i] = d->strides[i];
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t d, size_t *size)
{
	if (!tensor_ok(d) || !size)
		return BAD("tensor descriptor or size pointer");
	size_t s = 1;
	for (int i = 0; i < d->nd; i++)
		s += (size_t)(d->dims[i] - 1) * d->strides[i];
	*size = s * dt_size(d->dt);
	return CUDNN_STATUS_SUCCESS;
}

/* The 4-D float view of a tensor descriptor: fewer dims are padded with
 * trailing 1s, a 5-D tensor with depth 1 drops it. */
static cudnnStatus_t tensor4(const struct cudnnTensorStruct *d, dnn_t4_t *l)
{
	if (!tensor_ok(d))
		return BAD("tensor descriptor");
	if (d->dt != CUDNN_DATA_FLOAT)
		return UNSUPPORTED("data type other than CUDNN_DATA_FLOAT");
	if (d->nd > 5 || (d->nd == 5 && d->dims[2] != 1))
		return UNSUPPORTED("tensor with more than 2 spatial dimensions");
	int j = 0;
	for (int i = 0; i < d->nd; i++) {
		if (d->nd == 5 && i == 2)
			continue;
		l->dims[j] = d->dims[i], l->strides[j] = d->strides[i];
		j++;
	}
	for (; j < 4; j++)
		l->dims[j] = 1, l->strides[j] = 1;
	return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------- filter descriptors */

CREATE_DESC(cudnnCreateFilterDescriptor, cudnnFilterDescriptor_t, MAGIC_FILTER)
DESTROY_DESC(cudnnDestroyFilterDescriptor, cudnnFilterDescriptor_t, MAGIC_FILTER)

API cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dt,
					     cudnnTensorFormat_t format, int nb, const int dims[])
{
	if (!d || d->magic != MAGIC_FILTER || !dt_known(dt) || nb < 3 || nb > MAX_DIMS || !dims)
		return BAD("filter descriptor, data type or nbDims");
	if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
		return UNSUPPORTED("filter format");
	for (int i = 0; i < nb; i++)
		if (dims[i] <= 0)
			return BAD("filter dimension not positive");
	d->dt = dt;
	d->format = format;
	d->nd = nb;
	memcpy(d->dims, dims, sizeof(int) * nb);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dt,
					     cudnnTensorFormat_t format, int k, int c, int h, int w)
{
	int dims[4] = { k, c, h, w };
	return cudnnSetFilterNdDescriptor(d, dt, format, 4, dims);
}

API cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t *dt,
					     cudnnTensorFormat_t *format, int *k, int *c, int *h, int *w)
{
	if (!d || d->magic != MAGIC_FILTER || d->nd == 0 || !dt || !format || !k || !c || !h || !w)
		return BAD("filter descriptor or output pointer");
	*dt = d->dt, *format = d->format;
	*k = d->dims[0], *c = d->dims[1];
	*h = d->nd > 2 ? d->dims[2] : 1;
	*w = d->nd > 3 ? d->dims[3] : 1;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t d, int req,
					     cudnnDataType_t *dt, cudnnTensorFormat_t *format,
					     int *nb, int dims[])
{
	if (!d || d->magic != MAGIC_FILTER || d->nd == 0 || req < 0 || (req > 0 && !dims))
		return BAD("filter descriptor or arrays");
	if (dt)
		*dt = d->dt;
	if (format)
		*format = d->format;
	if (nb)
		*nb = d->nd;
	for (int i = 0; i < req && i < d->nd; i++)
		dims[i] = d->dims[i];
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t d, size_t *size)
{
	if (!d || d->magic != MAGIC_FILTER || d->nd == 0 || !size)
		return BAD("filter descriptor or size pointer");
	size_t s = dt_size(d->dt);
	for (int i = 0; i < d->nd; i++)
		s *= (size_t)d->dims[i];
	*size = s;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t filter4(const struct cudnnFilterStruct *d, dnn_t4_t *l)
{
	int str[MAX_DIMS];

	if (!d || d->magic != MAGIC_FILTER || d->nd == 0)
		return BAD("filter descriptor");
	if (d->dt != CUDNN_DATA_FLOAT)
		return UNSUPPORTED("filter data type other than CUDNN_DATA_FLOAT");
	if (d->nd > 5 || (d->nd == 5 && d->dims[2] != 1))
		return UNSUPPORTED("filter with more than 2 spatial dimensions");
	format_strides(d->format, d->nd, d->dims, str);
	int j = 0;
	for (int i = 0; i < d->nd; i++) {
		if (d->nd == 5 && i == 2)
			continue;
		l->dims[j] = d->dims[i], l->strides[j] = str[i];
		j++;
	}
	for (; j < 4; j++)
		l->dims[j] = 1, l->strides[j] = 1;
	return CUDNN_STATUS_SUCCESS;
}

/* ----------------------------------------------- convolution descriptors */

API cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
	if (!d)
		return BAD("descriptor pointer is NULL");
	*d = calloc(1, sizeof(**d));
	if (!*d)
		return NO_MEMORY();
	(*d)->magic = MAGIC_CONV;
	(*d)->groups = 1;
	(*d)->mode = CUDNN_CROSS_CORRELATION;
	return CUDNN_STATUS_SUCCESS;
}

DESTROY_DESC(cudnnDestroyConvolutionDescriptor, cudnnConvolutionDescriptor_t, MAGIC_CONV)

static bool conv_ok(const struct cudnnConvolutionStruct *d)
{
	return d && d->magic == MAGIC_CONV;
}

API cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int len,
						  const int pad[], const int stride[],
						  const int dil[], cudnnConvolutionMode_t mode,
						  cudnnDataType_t ctype)
{
	if (!conv_ok(d) || len <= 0 || len > MAX_DIMS - 2 || !pad || !stride || !dil)
		return BAD("convolution descriptor or arrayLength");
	if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
		return BAD("convolution mode");
	if (!dt_known(ctype))
		return BAD("compute type");
	for (int i = 0; i < len; i++)
		if (pad[i] < 0 || stride[i] <= 0 || dil[i] <= 0)
			return BAD("padding, stride or dilation");
	d->nsp = len;
	for (int i = 0; i < len; i++)
		d->pad[i] = pad[i], d->stride[i] = stride[i], d->dil[i] = dil[i];
	d->mode = mode;
	d->ctype = ctype;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
						  int pad_w, int u, int v, int dh, int dw,
						  cudnnConvolutionMode_t mode, cudnnDataType_t ctype)
{
	int pad[2] = { pad_h, pad_w }, str[2] = { u, v }, dil[2] = { dh, dw };
	return cudnnSetConvolutionNdDescriptor(d, 2, pad, str, dil, mode, ctype);
}

API cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t d,
						  int *pad_h, int *pad_w, int *u, int *v,
						  int *dh, int *dw, cudnnConvolutionMode_t *mode,
						  cudnnDataType_t *ctype)
{
	if (!conv_ok(d) || d->nsp != 2 || !pad_h || !pad_w || !u || !v || !dh || !dw || !mode || !ctype)
		return BAD("convolution descriptor (not 2-D) or output pointer");
	*pad_h = d->pad[0], *pad_w = d->pad[1];
	*u = d->stride[0], *v = d->stride[1];
	*dh = d->dil[0], *dw = d->dil[1];
	*mode = d->mode, *ctype = d->ctype;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t d, int req,
						  int *len, int pad[], int stride[], int dil[],
						  cudnnConvolutionMode_t *mode, cudnnDataType_t *ctype)
{
	if (!conv_ok(d) || d->nsp == 0 || req < 0 || (req > 0 && (!pad || !stride || !dil)))
		return BAD("convolution descriptor or arrays");
	if (len)
		*len = d->nsp;
	for (int i = 0; i < req && i < d->nsp; i++)
		pad[i] = d->pad[i], stride[i] = d->stride[i], dil[i] = d->dil[i];
	if (mode)
		*mode = d->mode;
	if (ctype)
		*ctype = d->ctype;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
	if (!conv_ok(d) || (int)m < CUDNN_DEFAULT_MATH || (int)m > CUDNN_FMA_MATH)
		return BAD("convolution descriptor or math type");
	d->math = m;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t *m)
{
	if (!conv_ok(d) || !m)
		return BAD("convolution descriptor or pointer");
	*m = d->math;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups)
{
	if (!conv_ok(d) || groups <= 0)
		return BAD("convolution descriptor or group count");
	d->groups = groups;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int *groups)
{
	if (!conv_ok(d) || !groups)
		return BAD("convolution descriptor or pointer");
	*groups = d->groups;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolutionReorderType(cudnnConvolutionDescriptor_t d, cudnnReorderType_t r)
{
	if (!conv_ok(d))
		return BAD("convolution descriptor");
	d->reorder = (int)r;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionReorderType(cudnnConvolutionDescriptor_t d, cudnnReorderType_t *r)
{
	if (!conv_ok(d) || !r)
		return BAD("convolution descriptor or pointer");
	*r = (cudnnReorderType_t)d->reorder;
	return CUDNN_STATUS_SUCCESS;
}

/* Geometry of a legacy convolution.  `y` may be NULL (output-dim queries). */
static cudnnStatus_t legacy_conv(const struct cudnnConvolutionStruct *cd,
				 const struct cudnnTensorStruct *xd,
				 const struct cudnnFilterStruct *wd,
				 const struct cudnnTensorStruct *yd, dnn_conv_t *c)
{
	cudnnStatus_t st;

	if (!conv_ok(cd) || cd->nsp == 0)
		return BAD("convolution descriptor");
	if (cd->nsp > 2)
		return UNSUPPORTED("3-D convolution");
	memset(c, 0, sizeof(*c));
	if ((st = tensor4(xd, &c->x)) || (st = filter4(wd, &c->w)))
		return st;
	if (yd && (st = tensor4(yd, &c->y)))
		return st;
	ref_conv_t *cv = &c->cv;
	cv->n = c->x.dims[0], cv->c = c->x.dims[1], cv->h = c->x.dims[2], cv->w = c->x.dims[3];
	cv->k = c->w.dims[0], cv->r = c->w.dims[2], cv->s = c->w.dims[3];
	cv->pad_h = cd->pad[0], cv->stride_h = cd->stride[0], cv->dil_h = cd->dil[0];
	if (cd->nsp == 2)
		cv->pad_w = cd->pad[1], cv->stride_w = cd->stride[1], cv->dil_w = cd->dil[1];
	else
		cv->pad_w = 0, cv->stride_w = 1, cv->dil_w = 1;
	cv->groups = cd->groups;
	cv->flip = cd->mode == CUDNN_CONVOLUTION;
	if (c->w.dims[1] * cd->groups != cv->c)
		return BAD("filter channels x group count differ from input channels");
	if (!yd) {
		if (ref_conv_init(cv))
			return BAD("convolution geometry");
		return CUDNN_STATUS_SUCCESS;
	}
	return dnn_conv_check(c);
}

DNN_HIDDEN cudnnStatus_t dnn_conv_check(dnn_conv_t *c)
{
	ref_conv_t cv = c->cv;

	if (ref_conv_init(&cv))
		return BAD("convolution geometry (sizes, padding, groups)");
	if (c->w.dims[0] != cv.k || c->w.dims[1] * cv.groups != cv.c ||
	    c->w.dims[2] != cv.r || c->w.dims[3] != cv.s)
		return BAD("filter dims");
	if (c->y.dims[0] != cv.n || c->y.dims[1] != cv.k || c->y.dims[2] != cv.p ||
	    c->y.dims[3] != cv.q)
		return BAD("output tensor dims differ from the convolution's output");
	c->cv = cv;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
							const cudnnTensorDescriptor_t xd,
							const cudnnFilterDescriptor_t wd,
							int *n, int *c, int *h, int *w)
{
	dnn_conv_t cc;
	cudnnStatus_t st;
	if (!n || !c || !h || !w)
		return BAD("output pointer");
	if ((st = legacy_conv(cd, xd, wd, NULL, &cc)))
		return st;
	*n = cc.cv.n, *c = cc.cv.k, *h = cc.cv.p, *w = cc.cv.q;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
							const cudnnTensorDescriptor_t xd,
							const cudnnFilterDescriptor_t wd,
							int nb, int out[])
{
	dnn_conv_t cc;
	cudnnStatus_t st;
	if (!out || !tensor_ok(xd) || nb != xd->nd)
		return BAD("nbDims or output array");
	if ((st = legacy_conv(cd, xd, wd, NULL, &cc)))
		return st;
	out[0] = cc.cv.n, out[1] = cc.cv.k;
	if (nb == 3) {
		out[2] = cc.cv.p;
	} else if (nb == 4) {
		out[2] = cc.cv.p, out[3] = cc.cv.q;
	} else if (nb == 5) {
		out[2] = 1, out[3] = cc.cv.p, out[4] = cc.cv.q;
	} else {
		return BAD("nbDims");
	}
	return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------- convolution algorithms */

typedef enum { WS_NONE, WS_INDEX, WS_IM2COL, WS_FFT, WS_FFT_TILING, WS_WINOGRAD } ws_kind_t;

typedef struct {
	int algo;
	ws_kind_t ws;
	double factor;          /* multiplies the FLOP term of the time */
} algo_info_t;

static const algo_info_t fwd_algos[] = {
	{ CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, WS_NONE, 1.00 },
	{ CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, WS_INDEX, 0.80 },
	{ CUDNN_CONVOLUTION_FWD_ALGO_GEMM, WS_IM2COL, 0.65 },
	{ CUDNN_CONVOLUTION_FWD_ALGO_FFT, WS_FFT, 0.35 },
	{ CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, WS_FFT_TILING, 0.50 },
	{ CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, WS_WINOGRAD, 0.42 },
};
static const algo_info_t bwd_data_algos[] = {
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, WS_NONE, 1.00 },
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, WS_INDEX, 0.80 },
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, WS_FFT, 0.35 },
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, WS_FFT_TILING, 0.50 },
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, WS_WINOGRAD, 0.42 },
};
static const algo_info_t bwd_filter_algos[] = {
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, WS_NONE, 1.00 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, WS_INDEX, 0.80 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, WS_FFT, 0.35 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, WS_IM2COL, 0.65 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, WS_WINOGRAD, 0.42 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, WS_FFT_TILING, 0.50 },
};

static const algo_info_t *algo_info(dnn_dir_t dir, int algo)
{
	const algo_info_t *t;
	size_t n;

	switch (dir) {
	case DNN_FWD: t = fwd_algos, n = sizeof(fwd_algos) / sizeof(*t); break;
	case DNN_BWD_DATA: t = bwd_data_algos, n = sizeof(bwd_data_algos) / sizeof(*t); break;
	case DNN_BWD_FILTER: t = bwd_filter_algos, n = sizeof(bwd_filter_algos) / sizeof(*t); break;
	default: return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (t[i].algo == algo)
			return &t[i];
	return NULL;
}

DNN_HIDDEN int dnn_algo_count(dnn_dir_t dir)
{
	switch (dir) {
	case DNN_FWD: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
	case DNN_BWD_DATA: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
	case DNN_BWD_FILTER: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
	default: return 0;
	}
}

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

DNN_HIDDEN bool dnn_algo_ws(dnn_dir_t dir, int algo, const dnn_conv_t *c, size_t *bytes)
{
	const algo_info_t *ai = algo_info(dir, algo);
	const ref_conv_t *cv = &c->cv;
	uint64_t N = cv->n, C = cv->c, K = cv->k, Cg = cv->c / cv->groups;
	uint64_t R = cv->r, S = cv->s, P = cv->p, Q = cv->q;
	bool unit = cv->stride_h == 1 && cv->stride_w == 1 && cv->dil_h == 1 && cv->dil_w == 1;
	double b;

	if (!ai)
		return false;
	switch (ai->ws) {
	case WS_NONE:
		b = 0;
		break;
	case WS_INDEX: /* index tables: filter taps and output pixels */
		b = 8.0 * (double)(Cg * R * S + P * Q);
		break;
	case WS_IM2COL: /* the lowered input of the whole batch */
		b = 4.0 * (double)N * (double)(C * R * S) * (double)(P * Q);
		break;
	case WS_FFT: { /* complex spectra of inputs, outputs and filters */
		uint64_t hf = (uint64_t)cv->h + 2 * cv->pad_h, wf = (uint64_t)cv->w + 2 * cv->pad_w;
		if (!unit || hf > 256 || wf > 256)
			return false;
		b = 8.0 * (double)(hf * (wf / 2 + 1)) * (double)(N * C + N * K + K * Cg);
		break;
	}
	case WS_FFT_TILING: { /* 32x32 tiles */
		if (!unit || R > 32 || S > 32)
			return false;
		uint64_t tiles = cdiv(P, 33 - R) * cdiv(Q, 33 - S);
		b = 8.0 * 32 * 17 * (double)((N * C + N * K) * tiles + K * Cg);
		break;
	}
	case WS_WINOGRAD: { /* F(4x4,3x3) or F(2x2,5x5): 6x6 transformed tiles */
		if (!unit || R != S || (R != 3 && R != 5))
			return false;
		uint64_t m = R == 3 ? 4 : 2;
		uint64_t tiles = cdiv(P, m) * cdiv(Q, m);
		b = 4.0 * 36 * (double)((N * C + N * K) * tiles + K * Cg);
		break;
	}
	default:
		return false;
	}
	if (b > (double)SIZE_MAX / 2)
		return false;
	*bytes = (size_t)b;
	return true;
}

DNN_HIDDEN double dnn_algo_seconds(dnn_dir_t dir, int algo, const dnn_conv_t *c)
{
	const algo_info_t *ai = algo_info(dir, algo);
	const ref_conv_t *cv = &c->cv;
	double bytes = 4.0 * ((double)cv->n * cv->c * cv->h * cv->w +
			      (double)cv->k * (cv->c / cv->groups) * cv->r * cv->s +
			      (double)cv->n * cv->k * cv->p * cv->q);

	return simgpu_op_seconds(2.0 * ref_conv_macs(cv) * (ai ? ai->factor : 1.0), bytes);
}

/* One convolution call by value: what a CUDA graph replays. */
typedef struct {
	const char *op;
	dnn_dir_t dir;
	int algo;
	dnn_conv_t c;
	float alpha, beta;
	const void *a, *b;
	void *out, *ws;
	size_t need;
} conv_args_t;

static cudnnStatus_t conv_run(const conv_args_t *k, cudaStream_t stream)
{
	const dnn_t4_t *la, *lb, *lo;
	const dnn_conv_t *c = &k->c;
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;

	switch (k->dir) {
	case DNN_FWD: la = &c->x, lb = &c->w, lo = &c->y; break;
	case DNN_BWD_DATA: la = &c->w, lb = &c->y, lo = &c->x; break;
	default: la = &c->x, lb = &c->y, lo = &c->w; break;
	}
	simgpu_op_begin(k->op);
	acc4(k->a, la, SIMGPU_ACC_R);
	acc4(k->b, lb, SIMGPU_ACC_R);
	acc4(k->out, lo, OUT(k->beta));
	if (k->need) {
		simgpu_check(k->ws, k->need, false);
		simgpu_access(k->ws, k->need, SIMGPU_ACC_W);
		if (!simgpu_dryrun())
			memset(k->ws, 0x5a, k->need);
	}
	if (!simgpu_dryrun()) {
		view_t va, vb, vo;
		bool ok = view_get(&va, la, k->a, true);
		ok = view_get(&vb, lb, k->b, true) && ok;
		ok = view_get(&vo, lo, k->out, k->beta != 0.0f) && ok;
		int rc = -1;
		if (ok) {
			switch (k->dir) {
			case DNN_FWD: rc = ref_conv_fwd(&c->cv, k->alpha, va.p, vb.p, k->beta, vo.p); break;
			case DNN_BWD_DATA: rc = ref_conv_bwd_data(&c->cv, k->alpha, va.p, vb.p, k->beta, vo.p); break;
			default: rc = ref_conv_bwd_filter(&c->cv, k->alpha, va.p, vb.p, k->beta, vo.p); break;
			}
		}
		view_put(&va, false);
		view_put(&vb, false);
		view_put(&vo, rc == 0);
		if (rc)
			st = NO_MEMORY();
	}
	if (st == CUDNN_STATUS_SUCCESS)
		simgpu_submit(stream, SIMGPU_ENGINE_COMPUTE, dnn_algo_seconds(k->dir, k->algo, c));
	else
		simgpu_access_discard();
	simgpu_op_end();
	return st;
}

static void conv_replay(const void *args, void *stream)
{
	conv_run(args, stream);
}

DNN_HIDDEN cudnnStatus_t dnn_conv_exec(cudnnHandle_t h, const char *op, dnn_dir_t dir,
				       int algo, const dnn_conv_t *c, float alpha,
				       const void *a, const void *b, float beta, void *out,
				       void *ws, size_t ws_bytes)
{
	conv_args_t k;
	size_t need;

	if (!dnn_handle_ok(h))
		return BAD("handle");
	if (!a || !b || !out)
		return BAD("tensor pointer is NULL");
	if (!dnn_algo_ws(dir, algo, c, &need))
		return UNSUPPORTED("algorithm for this convolution");
	if (need > ws_bytes || (need && !ws))
		return BAD("workspace smaller than the algorithm needs");
	memset(&k, 0, sizeof(k));
	k.op = op;
	k.dir = dir;
	k.algo = algo;
	k.c = *c;
	k.alpha = alpha;
	k.beta = beta;
	k.a = a;
	k.b = b;
	k.out = out;
	k.ws = ws;
	k.need = need;
	switch (simgpu_capture(h->stream, op, conv_replay, &k, sizeof(k))) {
	case 1:
		return CUDNN_STATUS_SUCCESS;    /* recorded into the graph */
	case -1:
		return fail(CUDNN_STATUS_EXECUTION_FAILED, "simgpu cuDNN: %s",
			    "the stream capture is invalidated");
	default:
		return conv_run(&k, h->stream);
	}
}

/* One row of a *AlgoPerf_t answer, before it is copied to the typed struct
 * (the three perf structs share one layout). */
typedef struct {
	int algo;
	cudnnStatus_t status;
	float ms;
	size_t memory;
} perf_row_t;

static int perf_cmp(const void *pa, const void *pb)
{
	const perf_row_t *a = pa, *b = pb;
	int fa = a->status != CUDNN_STATUS_SUCCESS, fb = b->status != CUDNN_STATUS_SUCCESS;
	if (fa != fb)
		return fa - fb;
	if (!fa && a->ms != b->ms)
		return a->ms < b->ms ? -1 : 1;
	if (!fa && a->memory != b->memory)
		return a->memory < b->memory ? -1 : 1;
	return a->algo - b->algo;
}

/* All algorithm ids of `dir`, supported ones first, fastest first.  With
 * ws_limit != SIZE_MAX, algorithms that need more are marked as cuDNN's
 * Find*Ex marks them (allocation failed). */
static int perf_rows(dnn_dir_t dir, const dnn_conv_t *c, size_t ws_limit, perf_row_t *rows)
{
	int n = dnn_algo_count(dir);
	for (int a = 0; a < n; a++) {
		size_t need = 0;
		rows[a].algo = a;
		if (!dnn_algo_ws(dir, a, c, &need)) {
			rows[a].status = CUDNN_STATUS_NOT_SUPPORTED;
			rows[a].ms = -1.0f;
			rows[a].memory = 0;
		} else if (need > ws_limit) {
			rows[a].status = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
			rows[a].ms = -1.0f;
			rows[a].memory = need;
		} else {
			rows[a].status = CUDNN_STATUS_SUCCESS;
			rows[a].ms = (float)(dnn_algo_seconds(dir, a, c) * 1e3);
			rows[a].memory = need;
		}
	}
	qsort(rows, n, sizeof(*rows), perf_cmp);
	return n;
}

#define FILL_PERF(out, rows, n, req, ret, math, algo_type)                     \
	do {                                                                    \
		int k_ = (n) < (req) ? (n) : (req);                             \
		for (int i_ = 0; i_ < k_; i_++) {                               \
			memset(&(out)[i_], 0, sizeof((out)[i_]));               \
			(out)[i_].algo = (algo_type)(rows)[i_].algo;            \
			(out)[i_].status = (rows)[i_].status;                   \
			(out)[i_].time = (rows)[i_].ms;                         \
			(out)[i_].memory = (rows)[i_].memory;                   \
			(out)[i_].determinism = CUDNN_DETERMINISTIC;            \
			(out)[i_].mathType = (math);                            \
		}                                                               \
		*(ret) = k_;                                                    \
	} while (0)

/* Sum of the modelled times of the successful rows: what a Find call's
 * benchmarking costs on the stream. */
static double perf_bench_seconds(const perf_row_t *rows, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		if (rows[i].status == CUDNN_STATUS_SUCCESS)
			s += rows[i].ms * 1e-3;
	return s;
}

/* Forward */

static cudnnStatus_t fwd_query(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
			       const cudnnFilterDescriptor_t wd, const cudnnConvolutionDescriptor_t cd,
			       const cudnnTensorDescriptor_t yd, int req, int *ret,
			       cudnnConvolutionFwdAlgoPerf_t *perf, bool bench)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, xd, wd, yd, &c)))
		return st;
	int n = perf_rows(DNN_FWD, &c, SIZE_MAX, rows);
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionFwdAlgo_t);
	if (bench)
		simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, perf_bench_seconds(rows, n));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
	if (!dnn_handle_ok(h) || !count)
		return BAD("handle or count pointer");
	*count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
							 const cudnnFilterDescriptor_t wd,
							 const cudnnConvolutionDescriptor_t cd,
							 const cudnnTensorDescriptor_t yd, const int req,
							 int *ret, cudnnConvolutionFwdAlgoPerf_t *perf)
{
	return fwd_query(h, xd, wd, cd, yd, req, ret, perf, false);
}

API cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
						       const cudnnFilterDescriptor_t wd,
						       const cudnnConvolutionDescriptor_t cd,
						       const cudnnTensorDescriptor_t yd, const int req,
						       int *ret, cudnnConvolutionFwdAlgoPerf_t *perf)
{
	OP(fwd_query(h, xd, wd, cd, yd, req, ret, perf, true));
}

/* Find*Ex: every algorithm that fits the workspace "runs": it checks the
 * buffers and writes its workspace; the result is computed once (all
 * algorithms give the same bits) into the output, as cuDNN overwrites it. */
static cudnnStatus_t find_ex(cudnnHandle_t h, const char *op, dnn_dir_t dir, const dnn_conv_t *c,
			     const void *a, const void *b, void *out, void *ws, size_t ws_bytes,
			     perf_row_t *rows, int *n)
{
	if (simgpu_capture_refuse(h->stream, op))
		return UNSUPPORTED("cudnnFind*AlgorithmEx in a stream capture");
	if (!ws)
		ws_bytes = 0;
	*n = perf_rows(dir, c, ws_bytes, rows);
	if (rows[0].status != CUDNN_STATUS_SUCCESS)
		return CUDNN_STATUS_SUCCESS;
	/* the fastest runs for real, the others write their workspace */
	cudnnStatus_t st = dnn_conv_exec(h, op, dir, rows[0].algo, c, 1.0f, a, b, 0.0f, out, ws, ws_bytes);
	if (st)
		return st;
	simgpu_op_begin(op);
	for (int i = 1; i < *n; i++) {
		if (rows[i].status != CUDNN_STATUS_SUCCESS || !rows[i].memory)
			continue;
		simgpu_check(ws, rows[i].memory, false);
		simgpu_access(ws, rows[i].memory, SIMGPU_ACC_W);
		if (!simgpu_dryrun())
			memset(ws, 0x5a, rows[i].memory);
	}
	simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, perf_bench_seconds(rows + 1, *n - 1));
	simgpu_op_end();
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
							 const void *x, const cudnnFilterDescriptor_t wd,
							 const void *w, const cudnnConvolutionDescriptor_t cd,
							 const cudnnTensorDescriptor_t yd, void *y,
							 const int req, int *ret,
							 cudnnConvolutionFwdAlgoPerf_t *perf, void *ws,
							 size_t ws_bytes)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	cudnnStatus_t st;
	int n;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, xd, wd, yd, &c)))
		return st;
	if ((st = find_ex(h, __func__, DNN_FWD, &c, x, w, y, ws, ws_bytes, rows, &n)))
		return st;
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionFwdAlgo_t);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
							  const cudnnFilterDescriptor_t wd,
							  const cudnnConvolutionDescriptor_t cd,
							  const cudnnTensorDescriptor_t yd,
							  cudnnConvolutionFwdAlgo_t algo, size_t *size)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = legacy_conv(cd, xd, wd, yd, &c)))
		return st;
	if (!dnn_algo_ws(DNN_FWD, algo, &c, size))
		return UNSUPPORTED("algorithm for this convolution");
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
					  const cudnnTensorDescriptor_t xd, const void *x,
					  const cudnnFilterDescriptor_t wd, const void *w,
					  const cudnnConvolutionDescriptor_t cd,
					  cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
					  const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!alpha || !beta)
		return BAD("alpha or beta is NULL");
	if ((st = legacy_conv(cd, xd, wd, yd, &c)))
		return st;
	return dnn_conv_exec(h, __func__, DNN_FWD, algo, &c, *(const float *)alpha, x, w,
			     *(const float *)beta, y, ws, ws_bytes);
}

/* Backward data */

static cudnnStatus_t bwd_data_query(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
				    const cudnnTensorDescriptor_t dyd,
				    const cudnnConvolutionDescriptor_t cd,
				    const cudnnTensorDescriptor_t dxd, int req, int *ret,
				    cudnnConvolutionBwdDataAlgoPerf_t *perf, bool bench)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, dxd, wd, dyd, &c)))
		return st;
	int n = perf_rows(DNN_BWD_DATA, &c, SIZE_MAX, rows);
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionBwdDataAlgo_t);
	if (bench)
		simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, perf_bench_seconds(rows, n));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
	if (!dnn_handle_ok(h) || !count)
		return BAD("handle or count pointer");
	*count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h,
							      const cudnnFilterDescriptor_t wd,
							      const cudnnTensorDescriptor_t dyd,
							      const cudnnConvolutionDescriptor_t cd,
							      const cudnnTensorDescriptor_t dxd,
							      const int req, int *ret,
							      cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
	return bwd_data_query(h, wd, dyd, cd, dxd, req, ret, perf, false);
}

API cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h,
							    const cudnnFilterDescriptor_t wd,
							    const cudnnTensorDescriptor_t dyd,
							    const cudnnConvolutionDescriptor_t cd,
							    const cudnnTensorDescriptor_t dxd,
							    const int req, int *ret,
							    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
	OP(bwd_data_query(h, wd, dyd, cd, dxd, req, ret, perf, true));
}

API cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t h,
							      const cudnnFilterDescriptor_t wd,
							      const void *w,
							      const cudnnTensorDescriptor_t dyd,
							      const void *dy,
							      const cudnnConvolutionDescriptor_t cd,
							      const cudnnTensorDescriptor_t dxd,
							      void *dx, const int req, int *ret,
							      cudnnConvolutionBwdDataAlgoPerf_t *perf,
							      void *ws, size_t ws_bytes)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	cudnnStatus_t st;
	int n;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, dxd, wd, dyd, &c)))
		return st;
	if ((st = find_ex(h, __func__, DNN_BWD_DATA, &c, w, dy, dx, ws, ws_bytes, rows, &n)))
		return st;
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionBwdDataAlgo_t);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h,
							       const cudnnFilterDescriptor_t wd,
							       const cudnnTensorDescriptor_t dyd,
							       const cudnnConvolutionDescriptor_t cd,
							       const cudnnTensorDescriptor_t dxd,
							       cudnnConvolutionBwdDataAlgo_t algo,
							       size_t *size)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = legacy_conv(cd, dxd, wd, dyd, &c)))
		return st;
	if (!dnn_algo_ws(DNN_BWD_DATA, algo, &c, size))
		return UNSUPPORTED("algorithm for this convolution");
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
					       const cudnnFilterDescriptor_t wd, const void *w,
					       const cudnnTensorDescriptor_t dyd, const void *dy,
					       const cudnnConvolutionDescriptor_t cd,
					       cudnnConvolutionBwdDataAlgo_t algo, void *ws,
					       size_t ws_bytes, const void *beta,
					       const cudnnTensorDescriptor_t dxd, void *dx)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!alpha || !beta)
		return BAD("alpha or beta is NULL");
	if ((st = legacy_conv(cd, dxd, wd, dyd, &c)))
		return st;
	return dnn_conv_exec(h, __func__, DNN_BWD_DATA, algo, &c, *(const float *)alpha, w, dy,
			     *(const float *)beta, dx, ws, ws_bytes);
}

/* Backward filter */

static cudnnStatus_t bwd_filter_query(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
				      const cudnnTensorDescriptor_t dyd,
				      const cudnnConvolutionDescriptor_t cd,
				      const cudnnFilterDescriptor_t dwd, int req, int *ret,
				      cudnnConvolutionBwdFilterAlgoPerf_t *perf, bool bench)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, xd, dwd, dyd, &c)))
		return st;
	int n = perf_rows(DNN_BWD_FILTER, &c, SIZE_MAX, rows);
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionBwdFilterAlgo_t);
	if (bench)
		simgpu_submit(h->stream, SIMGPU_ENGINE_COMPUTE, perf_bench_seconds(rows, n));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
	if (!dnn_handle_ok(h) || !count)
		return BAD("handle or count pointer");
	*count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h,
								const cudnnTensorDescriptor_t xd,
								const cudnnTensorDescriptor_t dyd,
								const cudnnConvolutionDescriptor_t cd,
								const cudnnFilterDescriptor_t dwd,
								const int req, int *ret,
								cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
	return bwd_filter_query(h, xd, dyd, cd, dwd, req, ret, perf, false);
}

API cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h,
							      const cudnnTensorDescriptor_t xd,
							      const cudnnTensorDescriptor_t dyd,
							      const cudnnConvolutionDescriptor_t cd,
							      const cudnnFilterDescriptor_t dwd,
							      const int req, int *ret,
							      cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
	OP(bwd_filter_query(h, xd, dyd, cd, dwd, req, ret, perf, true));
}

API cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t h,
								const cudnnTensorDescriptor_t xd,
								const void *x,
								const cudnnTensorDescriptor_t dyd,
								const void *dy,
								const cudnnConvolutionDescriptor_t cd,
								const cudnnFilterDescriptor_t dwd,
								void *dw, const int req, int *ret,
								cudnnConvolutionBwdFilterAlgoPerf_t *perf,
								void *ws, size_t ws_bytes)
{
	dnn_conv_t c;
	perf_row_t rows[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	cudnnStatus_t st;
	int n;

	if (!dnn_handle_ok(h) || !ret || !perf || req <= 0)
		return BAD("handle, requestedAlgoCount or result pointers");
	if ((st = legacy_conv(cd, xd, dwd, dyd, &c)))
		return st;
	if ((st = find_ex(h, __func__, DNN_BWD_FILTER, &c, x, dy, dw, ws, ws_bytes, rows, &n)))
		return st;
	FILL_PERF(perf, rows, n, req, ret, cd->math, cudnnConvolutionBwdFilterAlgo_t);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h,
								 const cudnnTensorDescriptor_t xd,
								 const cudnnTensorDescriptor_t dyd,
								 const cudnnConvolutionDescriptor_t cd,
								 const cudnnFilterDescriptor_t dwd,
								 cudnnConvolutionBwdFilterAlgo_t algo,
								 size_t *size)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = legacy_conv(cd, xd, dwd, dyd, &c)))
		return st;
	if (!dnn_algo_ws(DNN_BWD_FILTER, algo, &c, size))
		return UNSUPPORTED("algorithm for this convolution");
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
						 const cudnnTensorDescriptor_t xd, const void *x,
						 const cudnnTensorDescriptor_t dyd, const void *dy,
						 const cudnnConvolutionDescriptor_t cd,
						 cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
						 size_t ws_bytes, const void *beta,
						 const cudnnFilterDescriptor_t dwd, void *dw)
{
	dnn_conv_t c;
	cudnnStatus_t st;

	if (!alpha || !beta)
		return BAD("alpha or beta is NULL");
	if ((st = legacy_conv(cd, xd, dwd, dyd, &c)))
		return st;
	return dnn_conv_exec(h, __func__, DNN_BWD_FILTER, algo, &c, *(const float *)alpha, x, dy,
			     *(const float *)beta, dw, ws, ws_bytes);
}

/* -------------------------------------------------- bias, tensor algebra */

static bool broadcast_ok(const dnn_t4_t *src, const dnn_t4_t *dst)
{
	for (int i = 0; i < 4; i++)
		if (src->dims[i] != dst->dims[i] && src->dims[i] != 1)
			return false;
	return true;
}

static ref_dims_t rdims(const dnn_t4_t *l)
{
	ref_dims_t d = { l->dims[0], l->dims[1], l->dims[2], l->dims[3] };
	return d;
}

static cudnnStatus_t bias_bwd(cudnnHandle_t h, const float *alpha, const cudnnTensorDescriptor_t dyd,
			      const void *dy, const float *beta, const cudnnTensorDescriptor_t dbd,
			      void *db)
{
	dnn_t4_t ly, lb;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !dy || !db)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(dyd, &ly)) || (st = tensor4(dbd, &lb)))
		return st;
	if (lb.dims[0] != 1 || lb.dims[1] != ly.dims[1] || lb.dims[2] != 1 || lb.dims[3] != 1)
		return BAD("bias gradient must be 1 x C x 1 x 1");
	acc4(dy, &ly, SIMGPU_ACC_R);
	acc4(db, &lb, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vy, vb;
		bool ok = view_get(&vy, &ly, dy, true);
		ok = view_get(&vb, &lb, db, *beta != 0.0f) && ok;
		if (ok)
			ref_bias_bwd(ly.dims[0], ly.dims[1], (size_t)ly.dims[2] * ly.dims[3], *alpha,
				     vy.p, *beta, vb.p);
		view_put(&vy, false);
		view_put(&vb, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, (double)count4(&ly), 4.0 * (count4(&ly) + count4(&lb)));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha,
					       const cudnnTensorDescriptor_t dyd, const void *dy,
					       const void *beta, const cudnnTensorDescriptor_t dbd,
					       void *db)
{
	OP(bias_bwd(h, alpha, dyd, dy, beta, dbd, db));
}

static cudnnStatus_t add_tensor(cudnnHandle_t h, const float *alpha,
				const cudnnTensorDescriptor_t ad, const void *a,
				const float *beta, const cudnnTensorDescriptor_t cd, void *c)
{
	dnn_t4_t la, lc;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !a || !c)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(ad, &la)) || (st = tensor4(cd, &lc)))
		return st;
	if (!broadcast_ok(&la, &lc))
		return BAD("A's dims must equal C's or be 1");
	acc4(a, &la, SIMGPU_ACC_R);
	acc4(c, &lc, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t va, vc;
		bool ok = view_get(&va, &la, a, true);
		ok = view_get(&vc, &lc, c, *beta != 0.0f) && ok;
		if (ok)
			ref_add_tensor(rdims(&lc), *alpha, rdims(&la), va.p, *beta, vc.p);
		view_put(&va, false);
		view_put(&vc, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 2.0 * count4(&lc), 4.0 * (2 * count4(&lc) + count4(&la)));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad,
				 const void *a, const void *beta, const cudnnTensorDescriptor_t cd,
				 void *c)
{
	OP(add_tensor(h, alpha, ad, a, beta, cd, c));
}

/* y = alpha*x + beta*y between two layouts of the same dims */
static cudnnStatus_t transform(cudnnHandle_t h, const float *alpha, const cudnnTensorDescriptor_t xd,
			       const void *x, const float *beta, const cudnnTensorDescriptor_t yd,
			       void *y)
{
	dnn_t4_t lx, ly;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(xd, &lx)) || (st = tensor4(yd, &ly)))
		return st;
	if (!same_dims(&lx, &ly))
		return BAD("x and y dims differ");
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_add_tensor(rdims(&ly), *alpha, rdims(&lx), vx.p, *beta, vy.p);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, (double)count4(&ly), 8.0 * count4(&ly));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnTransformTensor(cudnnHandle_t h, const void *alpha,
				       const cudnnTensorDescriptor_t xd, const void *x,
				       const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
	OP(transform(h, alpha, xd, x, beta, yd, y));
}

static cudnnStatus_t set_scale(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void *y,
			       const float *v, bool scale)
{
	dnn_t4_t ly;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !y || !v)
		return BAD("handle, tensor or value pointer");
	if ((st = tensor4(yd, &ly)))
		return st;
	acc4(y, &ly, scale ? SIMGPU_ACC_RW : SIMGPU_ACC_W);
	if (!simgpu_dryrun()) {
		view_t vy;
		if (!view_get(&vy, &ly, y, scale))
			return NO_MEMORY();
		if (scale)
			ref_scale(count4(&ly), *v, vy.p);
		else
			ref_fill(count4(&ly), *v, vy.p);
		view_put(&vy, true);
	}
	submit(h, (double)count4(&ly), (scale ? 8.0 : 4.0) * count4(&ly));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void *y,
				 const void *value)
{
	OP(set_scale(h, yd, y, value, false));
}

API cudnnStatus_t cudnnScaleTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void *y,
				   const void *alpha)
{
	OP(set_scale(h, yd, y, alpha, true));
}

CREATE_DESC(cudnnCreateOpTensorDescriptor, cudnnOpTensorDescriptor_t, MAGIC_OPT)
DESTROY_DESC(cudnnDestroyOpTensorDescriptor, cudnnOpTensorDescriptor_t, MAGIC_OPT)

API cudnnStatus_t cudnnSetOpTensorDescriptor(cudnnOpTensorDescriptor_t d, cudnnOpTensorOp_t op,
					     cudnnDataType_t ctype, cudnnNanPropagation_t nan)
{
	if (!d || d->magic != MAGIC_OPT || (int)op < CUDNN_OP_TENSOR_ADD || (int)op > CUDNN_OP_TENSOR_NOT ||
	    !dt_known(ctype))
		return BAD("op-tensor descriptor, op or compute type");
	d->op = op, d->ctype = ctype, d->nan = nan;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetOpTensorDescriptor(const cudnnOpTensorDescriptor_t d, cudnnOpTensorOp_t *op,
					     cudnnDataType_t *ctype, cudnnNanPropagation_t *nan)
{
	if (!d || d->magic != MAGIC_OPT || !op || !ctype || !nan)
		return BAD("op-tensor descriptor or pointer");
	*op = d->op, *ctype = d->ctype, *nan = d->nan;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t op_tensor(cudnnHandle_t h, const struct cudnnOpTensorStruct *od,
			       const float *alpha1, const cudnnTensorDescriptor_t ad, const void *a,
			       const float *alpha2, const cudnnTensorDescriptor_t bd, const void *b,
			       const float *beta, const cudnnTensorDescriptor_t cd, void *c)
{
	dnn_t4_t la, lb, lc;
	cudnnStatus_t st;
	ref_op_t op;

	if (!dnn_handle_ok(h) || !od || od->magic != MAGIC_OPT || !alpha1 || !beta || !a || !c)
		return BAD("handle, descriptor, scaling factor or tensor pointer");
	switch (od->op) {
	case CUDNN_OP_TENSOR_ADD: op = REF_OP_ADD; break;
	case CUDNN_OP_TENSOR_MUL: op = REF_OP_MUL; break;
	case CUDNN_OP_TENSOR_MIN: op = REF_OP_MIN; break;
	case CUDNN_OP_TENSOR_MAX: op = REF_OP_MAX; break;
	case CUDNN_OP_TENSOR_SQRT: op = REF_OP_SQRT; break;
	default: return UNSUPPORTED("op-tensor op");
	}
	if ((st = tensor4(ad, &la)) || (st = tensor4(cd, &lc)))
		return st;
	if (op != REF_OP_SQRT) {
		if (!alpha2 || !b)
			return BAD("alpha2 or B is NULL");
		if ((st = tensor4(bd, &lb)))
			return st;
		if (!broadcast_ok(&lb, &lc))
			return BAD("B's dims must equal C's or be 1");
	} else {
		lb = lc;
	}
	if (!same_dims(&la, &lc))
		return BAD("A's dims differ from C's");
	acc4(a, &la, SIMGPU_ACC_R);
	if (op != REF_OP_SQRT)
		acc4(b, &lb, SIMGPU_ACC_R);
	acc4(c, &lc, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t va, vb = { 0 }, vc;
		bool ok = view_get(&va, &la, a, true);
		if (op != REF_OP_SQRT)
			ok = view_get(&vb, &lb, b, true) && ok;
		ok = view_get(&vc, &lc, c, *beta != 0.0f) && ok;
		if (ok)
			ref_op_tensor(op, rdims(&lc), *alpha1, va.p, alpha2 ? *alpha2 : 0.0f,
				      rdims(&lb), vb.p, *beta, vc.p);
		view_put(&va, false);
		if (op != REF_OP_SQRT)
			view_put(&vb, false);
		view_put(&vc, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 3.0 * count4(&lc), 4.0 * (3 * count4(&lc)));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnOpTensor(cudnnHandle_t h, const cudnnOpTensorDescriptor_t od,
				const void *alpha1, const cudnnTensorDescriptor_t ad, const void *a,
				const void *alpha2, const cudnnTensorDescriptor_t bd, const void *b,
				const void *beta, const cudnnTensorDescriptor_t cd, void *c)
{
	OP(op_tensor(h, od, alpha1, ad, a, alpha2, bd, b, beta, cd, c));
}

/* ------------------------------------------------------------ activation */

CREATE_DESC(cudnnCreateActivationDescriptor, cudnnActivationDescriptor_t, MAGIC_ACT)
DESTROY_DESC(cudnnDestroyActivationDescriptor, cudnnActivationDescriptor_t, MAGIC_ACT)

API cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
					       cudnnNanPropagation_t nan, double coef)
{
	if (!d || d->magic != MAGIC_ACT || (int)mode < CUDNN_ACTIVATION_SIGMOID ||
	    (int)mode > CUDNN_ACTIVATION_SWISH)
		return BAD("activation descriptor or mode");
	d->mode = mode, d->nan = nan, d->coef = coef;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetActivationDescriptor(const cudnnActivationDescriptor_t d,
					       cudnnActivationMode_t *mode,
					       cudnnNanPropagation_t *nan, double *coef)
{
	if (!d || d->magic != MAGIC_ACT || !mode || !nan || !coef)
		return BAD("activation descriptor or pointer");
	*mode = d->mode, *nan = d->nan, *coef = d->coef;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double b)
{
	if (!d || d->magic != MAGIC_ACT)
		return BAD("activation descriptor");
	d->swish_beta = b;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double *b)
{
	if (!d || d->magic != MAGIC_ACT || !b)
		return BAD("activation descriptor or pointer");
	*b = d->swish_beta;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t act_mode(const struct cudnnActivationStruct *d, ref_act_t *m)
{
	if (!d || d->magic != MAGIC_ACT)
		return BAD("activation descriptor");
	switch (d->mode) {
	case CUDNN_ACTIVATION_SIGMOID: *m = REF_ACT_SIGMOID; break;
	case CUDNN_ACTIVATION_RELU: *m = REF_ACT_RELU; break;
	case CUDNN_ACTIVATION_TANH: *m = REF_ACT_TANH; break;
	case CUDNN_ACTIVATION_CLIPPED_RELU: *m = REF_ACT_CLIPPED_RELU; break;
	case CUDNN_ACTIVATION_ELU: *m = REF_ACT_ELU; break;
	case CUDNN_ACTIVATION_IDENTITY: *m = REF_ACT_IDENTITY; break;
	default: return UNSUPPORTED("activation mode");
	}
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t act_fwd(cudnnHandle_t h, const struct cudnnActivationStruct *ad,
			     const float *alpha, const cudnnTensorDescriptor_t xd, const void *x,
			     const float *beta, const cudnnTensorDescriptor_t yd, void *y)
{
	dnn_t4_t lx, ly;
	ref_act_t m;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = act_mode(ad, &m)) || (st = tensor4(xd, &lx)) || (st = tensor4(yd, &ly)))
		return st;
	if (!same_dims(&lx, &ly))
		return BAD("x and y dims differ");
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_act_fwd(m, ad->coef, count4(&ly), *alpha, vx.p, *beta, vy.p);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 4.0 * count4(&ly), 8.0 * count4(&ly));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t ad,
					 const void *alpha, const cudnnTensorDescriptor_t xd,
					 const void *x, const void *beta,
					 const cudnnTensorDescriptor_t yd, void *y)
{
	OP(act_fwd(h, ad, alpha, xd, x, beta, yd, y));
}

static cudnnStatus_t act_bwd(cudnnHandle_t h, const struct cudnnActivationStruct *ad,
			     const float *alpha, const cudnnTensorDescriptor_t yd, const void *y,
			     const cudnnTensorDescriptor_t dyd, const void *dy,
			     const cudnnTensorDescriptor_t xd, const void *x, const float *beta,
			     const cudnnTensorDescriptor_t dxd, void *dx)
{
	dnn_t4_t ly, ldy, lx, ldx;
	ref_act_t m;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !y || !dy || !dx)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = act_mode(ad, &m)) || (st = tensor4(yd, &ly)) || (st = tensor4(dyd, &ldy)) ||
	    (st = tensor4(dxd, &ldx)))
		return st;
	if (x && (st = tensor4(xd, &lx)))
		return st;
	if (!same_dims(&ly, &ldy) || !same_dims(&ly, &ldx) || (x && !same_dims(&ly, &lx)))
		return BAD("y, dy, x and dx dims differ");
	acc4(y, &ly, SIMGPU_ACC_R);
	acc4(dy, &ldy, SIMGPU_ACC_R);
	if (x)
		acc4(x, &lx, SIMGPU_ACC_R);
	acc4(dx, &ldx, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vy, vdy, vx = { 0 }, vdx;
		bool ok = view_get(&vy, &ly, y, true);
		ok = view_get(&vdy, &ldy, dy, true) && ok;
		if (x)
			ok = view_get(&vx, &lx, x, true) && ok;
		ok = view_get(&vdx, &ldx, dx, *beta != 0.0f) && ok;
		if (ok)
			ref_act_bwd(m, ad->coef, count4(&ly), *alpha, vy.p, vdy.p, x ? vx.p : NULL,
				    *beta, vdx.p);
		view_put(&vy, false);
		view_put(&vdy, false);
		if (x)
			view_put(&vx, false);
		view_put(&vdx, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 4.0 * count4(&ly), 16.0 * count4(&ly));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnActivationBackward(cudnnHandle_t h, cudnnActivationDescriptor_t ad,
					  const void *alpha, const cudnnTensorDescriptor_t yd,
					  const void *y, const cudnnTensorDescriptor_t dyd,
					  const void *dy, const cudnnTensorDescriptor_t xd,
					  const void *x, const void *beta,
					  const cudnnTensorDescriptor_t dxd, void *dx)
{
	OP(act_bwd(h, ad, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx));
}

/* --------------------------------------------------------------- pooling */

CREATE_DESC(cudnnCreatePoolingDescriptor, cudnnPoolingDescriptor_t, MAGIC_POOL)
DESTROY_DESC(cudnnDestroyPoolingDescriptor, cudnnPoolingDescriptor_t, MAGIC_POOL)

API cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t d, const cudnnPoolingMode_t mode,
					      const cudnnNanPropagation_t nan, int nb,
					      const int win[], const int pad[], const int stride[])
{
	if (!d || d->magic != MAGIC_POOL || nb <= 0 || nb > MAX_DIMS - 2 || !win || !pad || !stride ||
	    (int)mode < CUDNN_POOLING_MAX || (int)mode > CUDNN_POOLING_MAX_DETERMINISTIC)
		return BAD("pooling descriptor, mode or nbDims");
	for (int i = 0; i < nb; i++)
		if (win[i] <= 0 || pad[i] < 0 || stride[i] <= 0)
			return BAD("pooling window, padding or stride");
	d->mode = mode, d->nan = nan, d->nsp = nb;
	for (int i = 0; i < nb; i++)
		d->win[i] = win[i], d->pad[i] = pad[i], d->stride[i] = stride[i];
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
					      cudnnNanPropagation_t nan, int wh, int ww, int ph,
					      int pw, int sh, int sw)
{
	int win[2] = { wh, ww }, pad[2] = { ph, pw }, str[2] = { sh, sw };
	return cudnnSetPoolingNdDescriptor(d, mode, nan, 2, win, pad, str);
}

API cudnnStatus_t cudnnGetPooling2dDescriptor(const cudnnPoolingDescriptor_t d, cudnnPoolingMode_t *mode,
					      cudnnNanPropagation_t *nan, int *wh, int *ww,
					      int *ph, int *pw, int *sh, int *sw)
{
	if (!d || d->magic != MAGIC_POOL || d->nsp != 2 || !mode || !nan || !wh || !ww || !ph ||
	    !pw || !sh || !sw)
		return BAD("pooling descriptor (not 2-D) or pointer");
	*mode = d->mode, *nan = d->nan;
	*wh = d->win[0], *ww = d->win[1], *ph = d->pad[0], *pw = d->pad[1];
	*sh = d->stride[0], *sw = d->stride[1];
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetPoolingNdDescriptor(const cudnnPoolingDescriptor_t d, int req,
					      cudnnPoolingMode_t *mode, cudnnNanPropagation_t *nan,
					      int *nb, int win[], int pad[], int stride[])
{
	if (!d || d->magic != MAGIC_POOL || d->nsp == 0 || req < 0 ||
	    (req > 0 && (!win || !pad || !stride)))
		return BAD("pooling descriptor or arrays");
	if (mode)
		*mode = d->mode;
	if (nan)
		*nan = d->nan;
	if (nb)
		*nb = d->nsp;
	for (int i = 0; i < req && i < d->nsp; i++)
		win[i] = d->win[i], pad[i] = d->pad[i], stride[i] = d->stride[i];
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t pool_geom(const struct cudnnPoolingStruct *pd, const dnn_t4_t *lx, ref_pool_t *pl)
{
	if (!pd || pd->magic != MAGIC_POOL || pd->nsp == 0)
		return BAD("pooling descriptor");
	if (pd->nsp > 2)
		return UNSUPPORTED("3-D pooling");
	memset(pl, 0, sizeof(*pl));
	switch (pd->mode) {
	case CUDNN_POOLING_MAX: case CUDNN_POOLING_MAX_DETERMINISTIC: pl->mode = REF_POOL_MAX; break;
	case CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING: pl->mode = REF_POOL_AVG_INCLUDE_PAD; break;
	default: pl->mode = REF_POOL_AVG_EXCLUDE_PAD; break;
	}
	pl->n = lx->dims[0], pl->c = lx->dims[1], pl->h = lx->dims[2], pl->w = lx->dims[3];
	pl->win_h = pd->win[0], pl->pad_h = pd->pad[0], pl->stride_h = pd->stride[0];
	if (pd->nsp == 2)
		pl->win_w = pd->win[1], pl->pad_w = pd->pad[1], pl->stride_w = pd->stride[1];
	else
		pl->win_w = 1, pl->pad_w = 0, pl->stride_w = 1;
	if (ref_pool_init(pl))
		return BAD("pooling geometry");
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t pd,
						    const cudnnTensorDescriptor_t xd,
						    int *n, int *c, int *h, int *w)
{
	dnn_t4_t lx;
	ref_pool_t pl;
	cudnnStatus_t st;

	if (!n || !c || !h || !w)
		return BAD("output pointer");
	if ((st = tensor4(xd, &lx)) || (st = pool_geom(pd, &lx, &pl)))
		return st;
	*n = pl.n, *c = pl.c, *h = pl.p, *w = pl.q;
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetPoolingNdForwardOutputDim(const cudnnPoolingDescriptor_t pd,
						    const cudnnTensorDescriptor_t xd, int nb,
						    int out[])
{
	int n, c, h, w;
	cudnnStatus_t st;

	if (!out || nb != 4)
		return nb != 4 ? UNSUPPORTED("pooling output dims other than 4") : BAD("output array");
	if ((st = cudnnGetPooling2dForwardOutputDim(pd, xd, &n, &c, &h, &w)))
		return st;
	out[0] = n, out[1] = c, out[2] = h, out[3] = w;
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t pool_fwd(cudnnHandle_t h, const struct cudnnPoolingStruct *pd,
			      const float *alpha, const cudnnTensorDescriptor_t xd, const void *x,
			      const float *beta, const cudnnTensorDescriptor_t yd, void *y)
{
	dnn_t4_t lx, ly;
	ref_pool_t pl;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(xd, &lx)) || (st = tensor4(yd, &ly)) || (st = pool_geom(pd, &lx, &pl)))
		return st;
	if (ly.dims[0] != pl.n || ly.dims[1] != pl.c || ly.dims[2] != pl.p || ly.dims[3] != pl.q)
		return BAD("y dims differ from the pooling output");
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_pool_fwd(&pl, *alpha, vx.p, *beta, vy.p);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, (double)count4(&ly) * pl.win_h * pl.win_w, 4.0 * (count4(&lx) + count4(&ly)));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd,
				      const void *alpha, const cudnnTensorDescriptor_t xd,
				      const void *x, const void *beta,
				      const cudnnTensorDescriptor_t yd, void *y)
{
	OP(pool_fwd(h, pd, alpha, xd, x, beta, yd, y));
}

static cudnnStatus_t pool_bwd(cudnnHandle_t h, const struct cudnnPoolingStruct *pd,
			      const float *alpha, const cudnnTensorDescriptor_t yd, const void *y,
			      const cudnnTensorDescriptor_t dyd, const void *dy,
			      const cudnnTensorDescriptor_t xd, const void *x, const float *beta,
			      const cudnnTensorDescriptor_t dxd, void *dx)
{
	dnn_t4_t ly, ldy, lx, ldx;
	ref_pool_t pl;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !dy || !x || !dx)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(dyd, &ldy)) || (st = tensor4(xd, &lx)) || (st = tensor4(dxd, &ldx)) ||
	    (st = pool_geom(pd, &lx, &pl)))
		return st;
	if (ldy.dims[0] != pl.n || ldy.dims[1] != pl.c || ldy.dims[2] != pl.p || ldy.dims[3] != pl.q ||
	    !same_dims(&lx, &ldx))
		return BAD("dy or dx dims differ from the pooling geometry");
	if (y) {
		if ((st = tensor4(yd, &ly)))
			return st;
		/* read by cuDNN; the reference recomputes argmax from x */
		acc4(y, &ly, SIMGPU_ACC_R);
	}
	acc4(dy, &ldy, SIMGPU_ACC_R);
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(dx, &ldx, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vdy, vx, vdx;
		bool ok = view_get(&vdy, &ldy, dy, true);
		ok = view_get(&vx, &lx, x, true) && ok;
		ok = view_get(&vdx, &ldx, dx, *beta != 0.0f) && ok;
		if (ok)
			ok = ref_pool_bwd(&pl, *alpha, vdy.p, vx.p, *beta, vdx.p) == 0;
		view_put(&vdy, false);
		view_put(&vx, false);
		view_put(&vdx, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, (double)count4(&ldy) * pl.win_h * pl.win_w,
	       4.0 * (2 * count4(&lx) + 2 * count4(&ldy)));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd,
				       const void *alpha, const cudnnTensorDescriptor_t yd,
				       const void *y, const cudnnTensorDescriptor_t dyd,
				       const void *dy, const cudnnTensorDescriptor_t xd,
				       const void *x, const void *beta,
				       const cudnnTensorDescriptor_t dxd, void *dx)
{
	OP(pool_bwd(h, pd, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx));
}

/* --------------------------------------------------------------- softmax */

static cudnnStatus_t softmax_args(cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
				  const dnn_t4_t *l, ref_softmax_t *ra, int *c, size_t *hw)
{
	if ((int)algo < CUDNN_SOFTMAX_FAST || (int)algo > CUDNN_SOFTMAX_LOG)
		return BAD("softmax algorithm");
	/* FAST is computed like ACCURATE: same bits for any choice */
	*ra = algo == CUDNN_SOFTMAX_LOG ? REF_SOFTMAX_LOG : REF_SOFTMAX_ACCURATE;
	if (mode == CUDNN_SOFTMAX_MODE_CHANNEL) {
		*c = l->dims[1];
		*hw = (size_t)l->dims[2] * l->dims[3];
	} else if (mode == CUDNN_SOFTMAX_MODE_INSTANCE) {
		*c = l->dims[1] * l->dims[2] * l->dims[3];
		*hw = 1;
	} else {
		return BAD("softmax mode");
	}
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t softmax_fwd(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo,
				 cudnnSoftmaxMode_t mode, const float *alpha,
				 const cudnnTensorDescriptor_t xd, const void *x, const float *beta,
				 const cudnnTensorDescriptor_t yd, void *y)
{
	dnn_t4_t lx, ly;
	ref_softmax_t ra;
	int c;
	size_t hw;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(xd, &lx)) || (st = tensor4(yd, &ly)) ||
	    (st = softmax_args(algo, mode, &lx, &ra, &c, &hw)))
		return st;
	if (!same_dims(&lx, &ly))
		return BAD("x and y dims differ");
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_softmax_fwd(ra, lx.dims[0], c, hw, *alpha, vx.p, *beta, vy.p);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 5.0 * count4(&lx), 8.0 * count4(&lx));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo,
				      cudnnSoftmaxMode_t mode, const void *alpha,
				      const cudnnTensorDescriptor_t xd, const void *x,
				      const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
	OP(softmax_fwd(h, algo, mode, alpha, xd, x, beta, yd, y));
}

static cudnnStatus_t softmax_bwd(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo,
				 cudnnSoftmaxMode_t mode, const float *alpha,
				 const cudnnTensorDescriptor_t yd, const void *y,
				 const cudnnTensorDescriptor_t dyd, const void *dy,
				 const float *beta, const cudnnTensorDescriptor_t dxd, void *dx)
{
	dnn_t4_t ly, ldy, ldx;
	ref_softmax_t ra;
	int c;
	size_t hw;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !y || !dy || !dx)
		return BAD("handle, scaling factor or tensor pointer");
	if ((st = tensor4(yd, &ly)) || (st = tensor4(dyd, &ldy)) || (st = tensor4(dxd, &ldx)) ||
	    (st = softmax_args(algo, mode, &ly, &ra, &c, &hw)))
		return st;
	if (!same_dims(&ly, &ldy) || !same_dims(&ly, &ldx))
		return BAD("y, dy and dx dims differ");
	acc4(y, &ly, SIMGPU_ACC_R);
	acc4(dy, &ldy, SIMGPU_ACC_R);
	acc4(dx, &ldx, OUT(*beta));
	if (!simgpu_dryrun()) {
		view_t vy, vdy, vdx;
		bool ok = view_get(&vy, &ly, y, true);
		ok = view_get(&vdy, &ldy, dy, true) && ok;
		ok = view_get(&vdx, &ldx, dx, *beta != 0.0f) && ok;
		if (ok)
			ref_softmax_bwd(ra, ly.dims[0], c, hw, *alpha, vy.p, vdy.p, *beta, vdx.p);
		view_put(&vy, false);
		view_put(&vdy, false);
		view_put(&vdx, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 4.0 * count4(&ly), 12.0 * count4(&ly));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSoftmaxBackward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo,
				       cudnnSoftmaxMode_t mode, const void *alpha,
				       const cudnnTensorDescriptor_t yd, const void *y,
				       const cudnnTensorDescriptor_t dyd, const void *dy,
				       const void *beta, const cudnnTensorDescriptor_t dxd, void *dx)
{
	OP(softmax_bwd(h, algo, mode, alpha, yd, y, dyd, dy, beta, dxd, dx));
}

/* ----------------------------------------------------------- batch norm */

API cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t dd,
						const cudnnTensorDescriptor_t xd,
						cudnnBatchNormMode_t mode)
{
	if (!tensor_ok(xd) || !dd || dd->magic != MAGIC_TENSOR)
		return BAD("tensor descriptor");
	int dims[MAX_DIMS], str[MAX_DIMS];
	for (int i = 0; i < xd->nd; i++)
		dims[i] = (i == 1 || (mode == CUDNN_BATCHNORM_PER_ACTIVATION && i > 1)) ? xd->dims[i] : 1;
	format_strides(CUDNN_TENSOR_NCHW, xd->nd, dims, str);
	return cudnnSetTensorNdDescriptor(dd, xd->dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT,
					  xd->nd, dims, str);
}

/* Checks shared by the three batch-norm calls: x/y layouts, the parameter
 * count (C or C*H*W, packed) and the mode. */
static cudnnStatus_t bn_setup(cudnnBatchNormMode_t mode, const cudnnTensorDescriptor_t xd,
			      const cudnnTensorDescriptor_t yd, const cudnnTensorDescriptor_t pd,
			      dnn_t4_t *lx, dnn_t4_t *ly, ref_bn_mode_t *rm, size_t *nparam)
{
	dnn_t4_t lp;
	cudnnStatus_t st;

	if ((st = tensor4(xd, lx)) || (st = tensor4(yd, ly)) || (st = tensor4(pd, &lp)))
		return st;
	if (!same_dims(lx, ly))
		return BAD("x and y dims differ");
	if (mode == CUDNN_BATCHNORM_PER_ACTIVATION) {
		*rm = REF_BN_PER_ACTIVATION;
		*nparam = (size_t)lx->dims[1] * lx->dims[2] * lx->dims[3];
	} else if (mode == CUDNN_BATCHNORM_SPATIAL || mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
		*rm = REF_BN_SPATIAL;
		*nparam = (size_t)lx->dims[1];
	} else {
		return BAD("batch-norm mode");
	}
	if (count4(&lp) != *nparam || !packed4(&lp))
		return BAD("scale/bias/mean/variance descriptor does not match the mode");
	return CUDNN_STATUS_SUCCESS;
}

/* A batch-norm parameter array of n floats, if given. */
static void pacc(const void *p, size_t n, unsigned mode)
{
	if (!p)
		return;
	simgpu_check(p, n * sizeof(float), false);
	simgpu_access(p, n * sizeof(float), mode);
}

static cudnnStatus_t bn_train(cudnnHandle_t h, cudnnBatchNormMode_t mode, const float *alpha,
			      const float *beta, const cudnnTensorDescriptor_t xd, const void *x,
			      const cudnnTensorDescriptor_t yd, void *y,
			      const cudnnTensorDescriptor_t pd, const void *scale,
			      const void *bias, double factor, void *rmean, void *rvar,
			      double eps, void *smean, void *sinv)
{
	dnn_t4_t lx, ly;
	ref_bn_mode_t rm;
	size_t np;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y || !scale || !bias)
		return BAD("handle, scaling factor or tensor pointer");
	if ((rmean == NULL) != (rvar == NULL) || (smean == NULL) != (sinv == NULL))
		return BAD("running or saved mean/variance given alone");
	if (eps < CUDNN_BN_MIN_EPSILON)
		return BAD("epsilon below CUDNN_BN_MIN_EPSILON");
	if ((st = bn_setup(mode, xd, yd, pd, &lx, &ly, &rm, &np)))
		return st;
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	pacc(scale, np, SIMGPU_ACC_R), pacc(bias, np, SIMGPU_ACC_R);
	pacc(rmean, np, SIMGPU_ACC_RW), pacc(rvar, np, SIMGPU_ACC_RW);
	pacc(smean, np, SIMGPU_ACC_W), pacc(sinv, np, SIMGPU_ACC_W);
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_bn_fwd_train(rm, rdims(&lx), *alpha, *beta, vx.p, vy.p, scale, bias,
					 factor, rmean, rvar, eps, smean, sinv);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 8.0 * count4(&lx), 4.0 * 3 * count4(&lx));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t h, cudnnBatchNormMode_t mode,
							 const void *alpha, const void *beta,
							 const cudnnTensorDescriptor_t xd, const void *x,
							 const cudnnTensorDescriptor_t yd, void *y,
							 const cudnnTensorDescriptor_t pd,
							 const void *scale, const void *bias,
							 double factor, void *rmean, void *rvar,
							 double eps, void *smean, void *sinv)
{
	OP(bn_train(h, mode, alpha, beta, xd, x, yd, y, pd, scale, bias, factor, rmean, rvar, eps,
		    smean, sinv));
}

static cudnnStatus_t bn_infer(cudnnHandle_t h, cudnnBatchNormMode_t mode, const float *alpha,
			      const float *beta, const cudnnTensorDescriptor_t xd, const void *x,
			      const cudnnTensorDescriptor_t yd, void *y,
			      const cudnnTensorDescriptor_t pd, const void *scale,
			      const void *bias, const void *mean, const void *var, double eps)
{
	dnn_t4_t lx, ly;
	ref_bn_mode_t rm;
	size_t np;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !alpha || !beta || !x || !y || !scale || !bias || !mean || !var)
		return BAD("handle, scaling factor or tensor pointer");
	if (eps < CUDNN_BN_MIN_EPSILON)
		return BAD("epsilon below CUDNN_BN_MIN_EPSILON");
	if ((st = bn_setup(mode, xd, yd, pd, &lx, &ly, &rm, &np)))
		return st;
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(y, &ly, OUT(*beta));
	pacc(scale, np, SIMGPU_ACC_R), pacc(bias, np, SIMGPU_ACC_R);
	pacc(mean, np, SIMGPU_ACC_R), pacc(var, np, SIMGPU_ACC_R);
	if (!simgpu_dryrun()) {
		view_t vx, vy;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vy, &ly, y, *beta != 0.0f) && ok;
		if (ok)
			ref_bn_fwd_infer(rm, rdims(&lx), *alpha, *beta, vx.p, vy.p, scale, bias,
					 mean, var, eps);
		view_put(&vx, false);
		view_put(&vy, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 4.0 * count4(&lx), 4.0 * 2 * count4(&lx));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode,
							  const void *alpha, const void *beta,
							  const cudnnTensorDescriptor_t xd,
							  const void *x,
							  const cudnnTensorDescriptor_t yd, void *y,
							  const cudnnTensorDescriptor_t pd,
							  const void *scale, const void *bias,
							  const void *mean, const void *var,
							  double eps)
{
	OP(bn_infer(h, mode, alpha, beta, xd, x, yd, y, pd, scale, bias, mean, var, eps));
}

static cudnnStatus_t bn_bwd(cudnnHandle_t h, cudnnBatchNormMode_t mode, const float *ad,
			    const float *bd, const float *ap, const float *bp,
			    const cudnnTensorDescriptor_t xd, const void *x,
			    const cudnnTensorDescriptor_t dyd, const void *dy,
			    const cudnnTensorDescriptor_t dxd, void *dx,
			    const cudnnTensorDescriptor_t pd, const void *scale, void *dscale,
			    void *dbias, double eps, const void *smean, const void *sinv)
{
	dnn_t4_t lx, ldy, ldx;
	ref_bn_mode_t rm;
	size_t np;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h) || !ad || !bd || !ap || !bp || !x || !dy || !dx || !scale ||
	    !dscale || !dbias)
		return BAD("handle, scaling factor or tensor pointer");
	if ((smean == NULL) != (sinv == NULL))
		return BAD("saved mean and inverse variance must be given together");
	if (eps < CUDNN_BN_MIN_EPSILON)
		return BAD("epsilon below CUDNN_BN_MIN_EPSILON");
	if ((st = bn_setup(mode, xd, dxd, pd, &lx, &ldx, &rm, &np)) || (st = tensor4(dyd, &ldy)))
		return st;
	if (!same_dims(&lx, &ldy))
		return BAD("x and dy dims differ");
	acc4(x, &lx, SIMGPU_ACC_R);
	acc4(dy, &ldy, SIMGPU_ACC_R);
	acc4(dx, &ldx, OUT(*bd));
	pacc(scale, np, SIMGPU_ACC_R);
	pacc(dscale, np, OUT(*bp)), pacc(dbias, np, OUT(*bp));
	pacc(smean, np, SIMGPU_ACC_R), pacc(sinv, np, SIMGPU_ACC_R);
	if (!simgpu_dryrun()) {
		view_t vx, vdy, vdx;
		bool ok = view_get(&vx, &lx, x, true);
		ok = view_get(&vdy, &ldy, dy, true) && ok;
		ok = view_get(&vdx, &ldx, dx, *bd != 0.0f) && ok;
		if (ok)
			ref_bn_bwd(rm, rdims(&lx), *ad, *bd, *ap, *bp, vx.p, vdy.p, vdx.p, scale,
				   dscale, dbias, eps, smean, sinv);
		view_put(&vx, false);
		view_put(&vdy, false);
		view_put(&vdx, ok);
		if (!ok)
			return NO_MEMORY();
	}
	submit(h, 10.0 * count4(&lx), 4.0 * 4 * count4(&lx));
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode,
						  const void *alphaDataDiff, const void *betaDataDiff,
						  const void *alphaParamDiff, const void *betaParamDiff,
						  const cudnnTensorDescriptor_t xd, const void *x,
						  const cudnnTensorDescriptor_t dyd, const void *dy,
						  const cudnnTensorDescriptor_t dxd, void *dx,
						  const cudnnTensorDescriptor_t pd, const void *scale,
						  void *dscale, void *dbias, double eps,
						  const void *smean, const void *sinv)
{
	OP(bn_bwd(h, mode, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xd, x, dyd,
		  dy, dxd, dx, pd, scale, dscale, dbias, eps, smean, sinv));
}

/* The Ex calls (what PyTorch's cudnn_batch_norm uses) with bnOps =
 * CUDNN_BATCHNORM_OPS_BN: the same kernels as the plain calls, so results
 * are bit-identical to them, plus a workspace and a reserve space.  Their
 * sizes are small and never zero (two floats per parameter of workspace,
 * one of reserve space) and each call writes its whole workspace, so an
 * undersized, unmapped or offloaded buffer faults as a convolution's does.
 * The forward call fills the reserve space with a pattern and the
 * backward call reads it back: a reserve space that did not survive from
 * forward to backward (lost while offloaded) is reported as a bad
 * parameter instead of going unnoticed.  z, dz, y, the bias in backward
 * and the activation descriptor belong to the fused ops
 * (BN_ACTIVATION, BN_ADD_ACTIVATION), which are not simulated. */

#define BN_EX_RESERVE_BYTE 0xb5

/* Parameter count of `xd` under `mode` (C or C*H*W). */
static cudnnStatus_t bn_ex_params(cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
				  const cudnnTensorDescriptor_t xd, size_t *np)
{
	dnn_t4_t lx;
	cudnnStatus_t st;

	if (ops != CUDNN_BATCHNORM_OPS_BN)
		return UNSUPPORTED("batch-norm ops other than CUDNN_BATCHNORM_OPS_BN");
	if ((st = tensor4(xd, &lx)))
		return st;
	if (mode == CUDNN_BATCHNORM_PER_ACTIVATION)
		*np = (size_t)lx.dims[1] * lx.dims[2] * lx.dims[3];
	else if (mode == CUDNN_BATCHNORM_SPATIAL || mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
		*np = (size_t)lx.dims[1];
	else
		return BAD("batch-norm mode");
	return CUDNN_STATUS_SUCCESS;
}

static size_t bn_ex_ws_bytes(size_t np) { return 2 * np * sizeof(float); }
static size_t bn_ex_reserve_bytes(size_t np) { return np * sizeof(float); }

API cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
	cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
	const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t zd,
	const cudnnTensorDescriptor_t yd, const cudnnTensorDescriptor_t pd,
	const cudnnActivationDescriptor_t ad, size_t *size)
{
	size_t np;
	cudnnStatus_t st;

	(void)zd, (void)yd, (void)pd, (void)ad;
	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = bn_ex_params(mode, ops, xd, &np)))
		return st;
	*size = bn_ex_ws_bytes(np);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
	cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
	const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t yd,
	const cudnnTensorDescriptor_t dyd, const cudnnTensorDescriptor_t dzd,
	const cudnnTensorDescriptor_t dxd, const cudnnTensorDescriptor_t pd,
	const cudnnActivationDescriptor_t ad, size_t *size)
{
	size_t np;
	cudnnStatus_t st;

	(void)yd, (void)dyd, (void)dzd, (void)dxd, (void)pd, (void)ad;
	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = bn_ex_params(mode, ops, xd, &np)))
		return st;
	*size = bn_ex_ws_bytes(np);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
	cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
	const cudnnActivationDescriptor_t ad, const cudnnTensorDescriptor_t xd, size_t *size)
{
	size_t np;
	cudnnStatus_t st;

	(void)ad;
	if (!dnn_handle_ok(h) || !size)
		return BAD("handle or size pointer");
	if ((st = bn_ex_params(mode, ops, xd, &np)))
		return st;
	*size = bn_ex_reserve_bytes(np);
	return CUDNN_STATUS_SUCCESS;
}

/* Checks an Ex call's workspace and reserve space against what the
 * queries answer (both must be mapped device memory) and writes the whole
 * workspace; *rs_need is the reserve space the call uses. */
static cudnnStatus_t bn_ex_buffers(cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
				   const cudnnTensorDescriptor_t xd, void *ws, size_t ws_bytes,
				   const void *rs, size_t rs_bytes, size_t *rs_need,
				   unsigned rs_mode)
{
	size_t np;
	cudnnStatus_t st;

	if ((st = bn_ex_params(mode, ops, xd, &np)))
		return st;
	if (ws_bytes < bn_ex_ws_bytes(np) || !ws)
		return BAD("workspace smaller than cudnnGetBatchNormalization*ExWorkspaceSize answers");
	*rs_need = bn_ex_reserve_bytes(np);
	if (rs_bytes < *rs_need || !rs)
		return BAD("reserve space smaller than cudnnGetBatchNormalizationTrainingExReserveSpaceSize answers");
	simgpu_check(ws, bn_ex_ws_bytes(np), false);
	simgpu_check(rs, *rs_need, false);
	simgpu_access(ws, bn_ex_ws_bytes(np), SIMGPU_ACC_W);
	simgpu_access(rs, *rs_need, rs_mode);
	if (!simgpu_dryrun())
		memset(ws, 0x5a, bn_ex_ws_bytes(np));
	return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t bn_train_ex(cudnnHandle_t h, cudnnBatchNormMode_t mode,
				 cudnnBatchNormOps_t ops, const float *alpha, const float *beta,
				 const cudnnTensorDescriptor_t xd, const void *x,
				 const cudnnTensorDescriptor_t yd, void *y,
				 const cudnnTensorDescriptor_t pd, const void *scale,
				 const void *bias, double factor, void *rmean, void *rvar,
				 double eps, void *smean, void *sinv, void *ws, size_t ws_bytes,
				 void *rs, size_t rs_bytes)
{
	size_t rs_need;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h))
		return BAD("handle");
	if ((st = bn_ex_buffers(mode, ops, xd, ws, ws_bytes, rs, rs_bytes, &rs_need,
				 SIMGPU_ACC_W)))
		return st;
	if ((st = bn_train(h, mode, alpha, beta, xd, x, yd, y, pd, scale, bias, factor, rmean,
			   rvar, eps, smean, sinv)))
		return st;
	if (!simgpu_dryrun())
		memset(rs, BN_EX_RESERVE_BYTE, rs_need);
	return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
	cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void *alpha,
	const void *beta, const cudnnTensorDescriptor_t xd, const void *x,
	const cudnnTensorDescriptor_t zd, const void *z, const cudnnTensorDescriptor_t yd, void *y,
	const cudnnTensorDescriptor_t pd, const void *scale, const void *bias, double factor,
	void *rmean, void *rvar, double eps, void *smean, void *sinv,
	cudnnActivationDescriptor_t ad, void *ws, size_t ws_bytes, void *rs, size_t rs_bytes)
{
	(void)zd, (void)z, (void)ad;
	OP(bn_train_ex(h, mode, ops, alpha, beta, xd, x, yd, y, pd, scale, bias, factor, rmean,
		       rvar, eps, smean, sinv, ws, ws_bytes, rs, rs_bytes));
}

static cudnnStatus_t bn_bwd_ex(cudnnHandle_t h, cudnnBatchNormMode_t mode,
			       cudnnBatchNormOps_t ops, const float *ad, const float *bd,
			       const float *ap, const float *bp, const cudnnTensorDescriptor_t xd,
			       const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
			       const cudnnTensorDescriptor_t dxd, void *dx,
			       const cudnnTensorDescriptor_t pd, const void *scale, void *dscale,
			       void *dbias, double eps, const void *smean, const void *sinv,
			       void *ws, size_t ws_bytes, const void *rs, size_t rs_bytes)
{
	size_t rs_need;
	cudnnStatus_t st;

	if (!dnn_handle_ok(h))
		return BAD("handle");
	if ((st = bn_ex_buffers(mode, ops, xd, ws, ws_bytes, rs, rs_bytes, &rs_need,
				 SIMGPU_ACC_R)))
		return st;
	if (!simgpu_dryrun()) {
		const unsigned char *r = rs;

		for (size_t i = 0; i < rs_need; i++)
			if (r[i] != BN_EX_RESERVE_BYTE)
				return BAD("reserve space does not hold what "
					   "cudnnBatchNormalizationForwardTrainingEx wrote");
	}
	return bn_bwd(h, mode, ad, bd, ap, bp, xd, x, dyd, dy, dxd, dx, pd, scale, dscale, dbias,
		      eps, smean, sinv);
}

API cudnnStatus_t cudnnBatchNormalizationBackwardEx(
	cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
	const void *alphaDataDiff, const void *betaDataDiff, const void *alphaParamDiff,
	const void *betaParamDiff, const cudnnTensorDescriptor_t xd, const void *x,
	const cudnnTensorDescriptor_t yd, const void *y, const cudnnTensorDescriptor_t dyd,
	const void *dy, const cudnnTensorDescriptor_t dzd, void *dz,
	const cudnnTensorDescriptor_t dxd, void *dx, const cudnnTensorDescriptor_t pd,
	const void *scale, const void *bias, void *dscale, void *dbias, double eps,
	const void *smean, const void *sinv, cudnnActivationDescriptor_t ad, void *ws,
	size_t ws_bytes, void *rs, size_t rs_bytes)
{
	(void)yd, (void)y, (void)dzd, (void)dz, (void)bias, (void)ad;
	OP(bn_bwd_ex(h, mode, ops, alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xd,
		     x, dyd, dy, dxd, dx, pd, scale, dscale, dbias, eps, smean, sinv, ws, ws_bytes,
		     rs, rs_bytes));
}
