/* interpose/dnn_split.c - per-image cuDNN calls too large for the budget,
 * run as slices of N (see dnn_split.h).
 *
 * Pooling and activation work on each image alone, so a call over N
 * images is the same as calls over consecutive groups of images, each
 * with the caller's alpha and beta:
 *
 *	x   |<- b ->|<- b ->|<- r ->|      pointer offsets of (images before)
 *	y   |<- b ->|<- b ->|<- r ->|      x N-stride; same strides, N = b
 *
 * Each slice is a call of its own through the runtime (prepare, the real
 * call, finish): the pool makes only that slice's pages resident, the
 * policy and the trace see one op per slice (args "slice":"i/k"), and the
 * race checker sees each slice's ranges.  Whether a call is split depends
 * only on its sizes and the budget, so a steady iteration splits the same
 * calls the same way every time and its plan matches.
 */
#include "interpose/dnn_split.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "interpose/conv_exec_int.h"
#include "interpose/hook_dnn.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"

#define MiB ((uint64_t)1 << 20)

#define SPLIT_REALS(X)                                                                    \
	X(cudnnGetTensorNdDescriptor, cudnnStatus_t,                                       \
	  (const cudnnTensorDescriptor_t d, int req, cudnnDataType_t *dt, int *nb,         \
	   int *dims, int *strides),                                                       \
	  (d, req, dt, nb, dims, strides))                                                 \
	X(cudnnCreateTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t *d), (d))   \
	X(cudnnDestroyTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t d), (d))   \
	X(cudnnSetTensorNdDescriptor, cudnnStatus_t,                                       \
	  (cudnnTensorDescriptor_t d, cudnnDataType_t dt, int nb, const int *dims,         \
	   const int *strides),                                                            \
	  (d, dt, nb, dims, strides))

#define SPLIT_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUDNN, name, ret, params, args)
SPLIT_REALS(SPLIT_REAL)

/* One tensor's layout as cuDNN describes it. */
typedef struct {
	cudnnDataType_t dt;
	int nb;
	int dims[HOOK_DNN_MAX_DIMS], strides[HOOK_DNN_MAX_DIMS];
	uint64_t image_bytes;   /* N-stride in bytes: one image's offset */
	uint64_t image_span;    /* bytes one image spans (<= image_bytes) */
} layout_t;

static bool read_layout(cudnnTensorDescriptor_t d, layout_t *l)
{
	real_cudnnGetTensorNdDescriptor_t get = real_cudnnGetTensorNdDescriptor();
	int64_t d64[HOOK_DNN_MAX_DIMS], s64[HOOK_DNN_MAX_DIMS];
	unsigned bits;

	if (!d || !get ||
	    get(d, HOOK_DNN_MAX_DIMS, &l->dt, &l->nb, l->dims, l->strides) != CUDNN_STATUS_SUCCESS ||
	    l->nb < 3 || l->nb > HOOK_DNN_MAX_DIMS || l->dims[0] < 2 || l->strides[0] <= 0)
		return false;
	bits = hook_cudnn_dtype_bits((int)l->dt);
	if (!bits || bits % 8)
		return false;
	for (int i = 0; i < l->nb; i++) {
		d64[i] = l->dims[i];
		s64[i] = l->strides[i];
	}
	d64[0] = 1;
	l->image_bytes = (uint64_t)l->strides[0] * (bits / 8);
	/* images must not interleave: one image's span fits in its N-stride */
	l->image_span = hook_strided_extent(l->nb, d64, s64, bits);
	return l->image_span && l->image_span <= l->image_bytes;
}

int dnn_split_images(const hook_call_t *c, const dnn_split_tensor_t *t, int nt)
{
	uint64_t budget, chunk, pages;
	hook_slice_t sl[DNN_SPLIT_MAX];
	layout_t l;
	int n = -1, m = 0;

	if (!runtime_active() || nt < 1 || nt > DNN_SPLIT_MAX || c->refs_lost)
		return 0;
	runtime_budget_free(&budget, NULL, &chunk);
	if (!budget)
		return 0;
	pages = conv_call_tensor_pages(c);
	if (hook_split_slices(pages, budget, 2) < 2)
		return 0;   /* the common case: no descriptor is read */
	for (int i = 0; i < nt; i++) {
		if (!t[i].p)
			continue;
		if (!read_layout(t[i].d, &l) || (n >= 0 && l.dims[0] != n))
			return 0;
		n = l.dims[0];
		sl[m++] = (hook_slice_t){ (uintptr_t)t[i].p, l.image_bytes, l.image_span };
	}
	return hook_split_images(sl, m, n, pages, budget, chunk);
}

/* A descriptor like `l` with N = b; NULL when cuDNN refuses it. */
static cudnnTensorDescriptor_t micro(const layout_t *l, int b)
{
	real_cudnnCreateTensorDescriptor_t create = real_cudnnCreateTensorDescriptor();
	real_cudnnSetTensorNdDescriptor_t set = real_cudnnSetTensorNdDescriptor();
	real_cudnnDestroyTensorDescriptor_t destroy = real_cudnnDestroyTensorDescriptor();
	cudnnTensorDescriptor_t d = NULL;
	int dims[HOOK_DNN_MAX_DIMS];

	if (!create || !set || !destroy || create(&d) != CUDNN_STATUS_SUCCESS)
		return NULL;
	memcpy(dims, l->dims, sizeof(dims));
	dims[0] = b;
	if (set(d, l->dt, l->nb, dims, l->strides) != CUDNN_STATUS_SUCCESS) {
		destroy(d);
		return NULL;
	}
	return d;
}

static void say_once(const hook_call_t *c, int slices, int n)
{
	static atomic_bool said;
	uint64_t budget;

	if (atomic_exchange(&said, true))
		return;
	runtime_budget_free(&budget, NULL, NULL);
	vmem_info("%s: its tensors (%" PRIu64 " MiB) need more than 3/4 of the budget (%" PRIu64
		  " MiB): running it in %d slices of its %d images (and likewise for other "
		  "per-image calls; VMEM_STATS counts them)", c->api,
		  conv_call_tensor_pages(c) / MiB, budget / MiB, slices, n);
}

cudnnStatus_t dnn_split_run(hook_call_t *c, int b, const dnn_split_tensor_t *t, int nt,
			    dnn_split_fn fn, void *ctx)
{
	real_cudnnDestroyTensorDescriptor_t destroy = real_cudnnDestroyTensorDescriptor();
	cudnnTensorDescriptor_t full[DNN_SPLIT_MAX] = { 0 }, rest[DNN_SPLIT_MAX] = { 0 };
	layout_t l[DNN_SPLIT_MAX];
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
	int n = 0, r, slices;

	for (int i = 0; i < nt; i++)
		if (t[i].p) {
			if (!read_layout(t[i].d, &l[i]))
				return CUDNN_STATUS_NOT_SUPPORTED;   /* dnn_split_count read it */
			n = l[i].dims[0];
		}
	if (b < 1 || b >= n)
		return CUDNN_STATUS_NOT_SUPPORTED;
	slices = (n + b - 1) / b;
	r = n - (slices - 1) * b;
	for (int i = 0; i < nt && st == CUDNN_STATUS_SUCCESS; i++) {
		if (!t[i].p)
			continue;
		full[i] = micro(&l[i], b);
		rest[i] = r == b ? full[i] : micro(&l[i], r);
		if (!full[i] || !rest[i])
			st = CUDNN_STATUS_ALLOC_FAILED;
	}
	say_once(c, slices, n);
	for (int s = 0; s < slices && st == CUDNN_STATUS_SUCCESS; s++) {
		int images = s == slices - 1 ? r : b;
		cudnnTensorDescriptor_t d[DNN_SPLIT_MAX];
		void *p[DNN_SPLIT_MAX];
		hook_call_t sc;

		hook_call_init(&sc, c->kind, c->api, c->stream);
		for (int i = 0; i < nt; i++) {
			uint64_t off = (uint64_t)s * b * (t[i].p ? l[i].image_bytes : 0);

			d[i] = t[i].p ? (images == b ? full[i] : rest[i]) : t[i].d;
			p[i] = t[i].p ? (char *)t[i].p + off : NULL;
			if (t[i].p)
				hook_call_ref(&sc, p[i], (uint64_t)(images - 1) * l[i].image_bytes +
					      l[i].image_span, t[i].access, t[i].role);
		}
		hook_call_args(&sc, "\"slice\":\"%d/%d\",\"images\":%d", s + 1, slices, images);
		if (hook_call_prepare(&sc) == cudaSuccess)
			st = fn(ctx, d, p);
		else
			st = CUDNN_STATUS_ALLOC_FAILED;
		hook_call_finish(&sc);
		stats_add(STATS_DNN_SLICES, 1);
	}
	stats_add(STATS_DNN_SPLIT, 1);
	for (int i = 0; i < nt; i++) {
		if (rest[i] && rest[i] != full[i] && destroy)
			destroy(rest[i]);
		if (full[i] && destroy)
			destroy(full[i]);
	}
	hook_call_drop(c);
	return st;
}
