/* interpose/dnn_split.c - per-image cuDNN calls too large for the budget,
 * run as slices of N, or of N x C planes (see dnn_split.h).
 *
 * Pooling and activation work on each image alone, so a call over N
 * images is the same as calls over consecutive groups of images, each
 * with the caller's alpha and beta:
 *
 *	x   |<- b ->|<- b ->|<- r ->|      pointer offsets of (images before)
 *	y   |<- b ->|<- b ->|<- r ->|      x N-stride; same strides, N = b
 *
 * They also work on each (image, channel) plane alone: in NCHW the planes
 * follow one another at the C-stride (plane n*C + c), so b planes from
 * plane u are a tensor of N = b, C = 1 at u x C-stride.  Slices of planes
 * are cut where the pages say (hook_slice_next), not in equal parts: when
 * every image of four same-shaped tensors straddles a page boundary at
 * the same place, planes can stop at it.
 *
 * Each slice is a call of its own through the runtime (prepare, the real
 * call, finish): the pool makes only that slice's pages resident, the
 * policy and the trace see one op per slice (args "slice":"i/k" and
 * "images" or "planes"), and the race checker sees each slice's ranges.
 * Whether and how a call is split depends only on its sizes, where its
 * tensors lie in their pages and the budget, so a steady iteration splits
 * the same calls the same way every time and its plan matches.
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

/* One tensor's layout as cuDNN describes it, and its units: images (0
 * bytes when they interleave) and planes (0 when its planes do not follow
 * one another at the C-stride). */
typedef struct {
	cudnnDataType_t dt;
	int nb;
	int dims[HOOK_DNN_MAX_DIMS], strides[HOOK_DNN_MAX_DIMS];
	uint64_t image_bytes;   /* N-stride in bytes: one image's offset */
	uint64_t image_span;    /* bytes one image spans (<= image_bytes) */
	uint64_t plane_bytes;   /* C-stride in bytes: one plane's offset */
	uint64_t plane_span;    /* bytes one plane spans (<= plane_bytes) */
} layout_t;

/* The bytes one unit spans: dims[0] (and dims[1] for a plane) taken as 1. */
static uint64_t unit_span(const layout_t *l, int from, unsigned bits)
{
	int64_t d64[HOOK_DNN_MAX_DIMS], s64[HOOK_DNN_MAX_DIMS];

	for (int i = 0; i < l->nb; i++) {
		d64[i] = i < from ? 1 : l->dims[i];
		s64[i] = l->strides[i];
	}
	return hook_strided_extent(l->nb, d64, s64, bits);
}

static bool read_layout(cudnnTensorDescriptor_t d, layout_t *l)
{
	real_cudnnGetTensorNdDescriptor_t get = real_cudnnGetTensorNdDescriptor();
	unsigned bits;

	memset(l, 0, sizeof(*l));
	if (!d || !get ||
	    get(d, HOOK_DNN_MAX_DIMS, &l->dt, &l->nb, l->dims, l->strides) != CUDNN_STATUS_SUCCESS ||
	    l->nb < 3 || l->nb > HOOK_DNN_MAX_DIMS || l->dims[0] < 1 || l->dims[1] < 1 ||
	    l->strides[0] <= 0 || l->strides[1] <= 0)
		return false;
	bits = hook_cudnn_dtype_bits((int)l->dt);
	if (!bits || bits % 8)
		return false;
	l->image_bytes = (uint64_t)l->strides[0] * (bits / 8);
	l->image_span = unit_span(l, 1, bits);
	/* images must not interleave: one image's span fits in its N-stride */
	if (!l->image_span || l->image_span > l->image_bytes)
		l->image_bytes = l->image_span = 0;
	l->plane_bytes = (uint64_t)l->strides[1] * (bits / 8);
	l->plane_span = unit_span(l, 2, bits);
	/* plane n*C + c at that times the C-stride: an N-stride of C of them */
	if (!l->plane_span || l->plane_span > l->plane_bytes ||
	    (l->dims[0] > 1 && (int64_t)l->strides[0] != (int64_t)l->dims[1] * l->strides[1]))
		l->plane_bytes = l->plane_span = 0;
	return true;
}

/* The units of tensor i: its images, or its planes. */
static hook_slice_t unit_of(const dnn_split_tensor_t *t, const layout_t *l, bool planes)
{
	return (hook_slice_t){ (uintptr_t)t->p, planes ? l->plane_bytes : l->image_bytes,
			       planes ? l->plane_span : l->image_span };
}

/* Reads the layouts of the tensors given; false when one cannot be read or
 * they differ in N, or in C when `planes`, or lack the units asked for. */
static bool read_units(const dnn_split_tensor_t *t, int nt, bool planes, layout_t *l,
		       hook_slice_t *sl, int *m, int *units)
{
	int n = -1, ch = -1;

	*m = 0;
	for (int i = 0; i < nt; i++) {
		if (!t[i].p)
			continue;
		if (!read_layout(t[i].d, &l[i]) || (n >= 0 && l[i].dims[0] != n) ||
		    (planes ? !l[i].plane_bytes || (ch >= 0 && l[i].dims[1] != ch)
			    : !l[i].image_bytes))
			return false;
		n = l[i].dims[0];
		ch = l[i].dims[1];
		sl[(*m)++] = unit_of(&t[i], &l[i], planes);
	}
	*units = planes ? n * ch : n;
	return *m > 0 && *units >= 2;
}

/* Slices of planes, each as many as fit (hook_slice_next); 0 when one
 * plane does not fit the budget or the call would run whole. */
static int plane_slices(const hook_slice_t *sl, int m, int units, uint64_t budget,
			uint64_t chunk)
{
	int k = 0;

	for (int first = 0, b; first < units; first += b, k++)
		if (!(b = hook_slice_next(sl, m, units, first, budget, chunk)))
			return 0;
	return k > 1 ? k : 0;
}

bool dnn_split_plan(const hook_call_t *c, const dnn_split_tensor_t *t, int nt, bool planes,
		    dnn_split_t *s)
{
	uint64_t budget, chunk, pages;
	hook_slice_t sl[DNN_SPLIT_MAX];
	layout_t l[DNN_SPLIT_MAX];
	int m, units, b;

	if (!runtime_active() || nt < 1 || nt > DNN_SPLIT_MAX || c->refs_lost)
		return false;
	runtime_budget_free(&budget, NULL, &chunk);
	if (!budget)
		return false;
	pages = conv_call_tensor_pages(c);
	if (hook_split_slices(pages, budget, 2) < 2)
		return false;   /* the common case: no descriptor is read */
	if (read_units(t, nt, false, l, sl, &m, &units) &&
	    (b = hook_split_images(sl, m, units, pages, budget, chunk)) > 0) {
		*s = (dnn_split_t){ units, b, (units + b - 1) / b, false };
		return true;
	}
	/* planes only where the call cannot run whole: one that fits the
	 * budget keeps running as it did */
	if (planes && pages > budget && read_units(t, nt, true, l, sl, &m, &units) &&
	    (b = plane_slices(sl, m, units, budget, chunk)) > 0) {
		*s = (dnn_split_t){ units, 0, b, true };
		return true;
	}
	return false;
}

/* A descriptor for `b` units of `l`: N = b images, or b planes as N = b,
 * C = 1 at the C-stride; NULL when cuDNN refuses it. */
static cudnnTensorDescriptor_t micro(const layout_t *l, int b, bool planes)
{
	real_cudnnCreateTensorDescriptor_t create = real_cudnnCreateTensorDescriptor();
	real_cudnnSetTensorNdDescriptor_t set = real_cudnnSetTensorNdDescriptor();
	real_cudnnDestroyTensorDescriptor_t destroy = real_cudnnDestroyTensorDescriptor();
	cudnnTensorDescriptor_t d = NULL;
	int dims[HOOK_DNN_MAX_DIMS], strides[HOOK_DNN_MAX_DIMS];

	if (!create || !set || !destroy || create(&d) != CUDNN_STATUS_SUCCESS)
		return NULL;
	memcpy(dims, l->dims, sizeof(dims));
	memcpy(strides, l->strides, sizeof(strides));
	dims[0] = b;
	if (planes) {
		dims[1] = 1;
		strides[0] = l->strides[1];
	}
	if (set(d, l->dt, l->nb, dims, strides) != CUDNN_STATUS_SUCCESS) {
		destroy(d);
		return NULL;
	}
	return d;
}

static void say_once(const hook_call_t *c, const dnn_split_t *s)
{
	static atomic_bool said[2];
	uint64_t budget;

	if (atomic_exchange(&said[s->planes], true))
		return;
	runtime_budget_free(&budget, NULL, NULL);
	vmem_info("%s: its tensors (%" PRIu64 " MiB) need more than 3/4 of the budget (%" PRIu64
		  " MiB): running it in %d slices of its %d %s (and likewise for other "
		  "per-image calls; VMEM_STATS counts them)", c->api,
		  conv_call_tensor_pages(c) / MiB, budget / MiB, s->slices, s->units,
		  s->planes ? "planes (images x channels: no slicing of its images fits)"
			    : "images");
}

/* Issues slice [first, first + b) of the units as a call of its own. */
static cudnnStatus_t run_slice(const hook_call_t *c, const dnn_split_t *s, int k, int first,
			       int b, const dnn_split_tensor_t *t, const layout_t *l, int nt,
			       dnn_split_fn fn, void *ctx)
{
	real_cudnnDestroyTensorDescriptor_t destroy = real_cudnnDestroyTensorDescriptor();
	cudnnTensorDescriptor_t d[DNN_SPLIT_MAX], own[DNN_SPLIT_MAX] = { 0 };
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
	void *p[DNN_SPLIT_MAX];
	hook_call_t sc;

	hook_call_init(&sc, c->kind, c->api, c->stream);
	for (int i = 0; i < nt; i++) {
		hook_slice_t u;

		d[i] = t[i].d;
		p[i] = NULL;
		if (!t[i].p)
			continue;
		u = unit_of(&t[i], &l[i], s->planes);
		d[i] = own[i] = micro(&l[i], b, s->planes);
		p[i] = (char *)t[i].p + (uint64_t)first * u.image;
		hook_call_ref(&sc, p[i], (uint64_t)(b - 1) * u.image + u.span, t[i].access,
			      t[i].role);
		if (!own[i])
			st = CUDNN_STATUS_ALLOC_FAILED;
	}
	hook_call_args(&sc, "\"slice\":\"%d/%d\",\"%s\":%d", k + 1, s->slices,
		       s->planes ? "planes" : "images", b);
	if (st == CUDNN_STATUS_SUCCESS) {
		st = hook_call_prepare(&sc) == cudaSuccess ? fn(ctx, d, p)
							   : CUDNN_STATUS_ALLOC_FAILED;
		hook_call_finish(&sc);
	} else {
		hook_call_drop(&sc);
	}
	for (int i = 0; i < nt; i++)
		if (own[i] && destroy)
			destroy(own[i]);
	stats_add(STATS_DNN_SLICES, 1);
	return st;
}

cudnnStatus_t dnn_split_run(hook_call_t *c, const dnn_split_t *s, const dnn_split_tensor_t *t,
			    int nt, dnn_split_fn fn, void *ctx)
{
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
	uint64_t budget, chunk;
	hook_slice_t sl[DNN_SPLIT_MAX];
	layout_t l[DNN_SPLIT_MAX];
	int m, units;

	/* dnn_split_plan read them, and the budget it cut by */
	if (!read_units(t, nt, s->planes, l, sl, &m, &units) || units != s->units)
		return CUDNN_STATUS_NOT_SUPPORTED;
	runtime_budget_free(&budget, NULL, &chunk);
	say_once(c, s);
	for (int k = 0, first = 0, b; first < units && st == CUDNN_STATUS_SUCCESS; k++, first += b) {
		b = s->planes ? hook_slice_next(sl, m, units, first, budget, chunk)
			      : (units - first < s->b ? units - first : s->b);
		st = b > 0 ? run_slice(c, s, k, first, b, t, l, nt, fn, ctx)
			   : CUDNN_STATUS_ALLOC_FAILED;
	}
	stats_add(STATS_DNN_SPLIT, 1);
	hook_call_drop(c);
	return st;
}
