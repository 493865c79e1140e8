/* interpose/conv_plan.c - see conv_plan.h.  Pure: no CUDA call, no
 * environment, no output. */
#include "interpose/conv_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cudnn_graph.h>

const char *conv_dir_name(conv_dir_t d)
{
	switch (d) {
	case CONV_DIR_FWD: return "fwd";
	case CONV_DIR_BWD_DATA: return "bwd_data";
	case CONV_DIR_BWD_FILTER: return "bwd_filter";
	default: return "?";
	}
}

unsigned conv_dtype_bytes(int dt)
{
	switch (dt) {
	case CUDNN_DATA_FLOAT:
	case CUDNN_DATA_INT32:
		return 4;
	case CUDNN_DATA_DOUBLE:
	case CUDNN_DATA_INT64:
		return 8;
	case CUDNN_DATA_HALF:
	case CUDNN_DATA_BFLOAT16:
		return 2;
	case CUDNN_DATA_INT8:
	case CUDNN_DATA_UINT8:
	case CUDNN_DATA_FP8_E4M3:
	case CUDNN_DATA_FP8_E5M2:
		return 1;
	default:
		return 0;
	}
}

static bool tensor_ok(const conv_tensor_t *t)
{
	if (t->nbdims < 3 || t->nbdims > CONV_MAX_DIMS || !conv_dtype_bytes(t->dtype))
		return false;
	for (int i = 0; i < t->nbdims; i++)
		if (t->dims[i] <= 0 || t->strides[i] <= 0)
			return false;
	return true;
}

const char *conv_shape_unsplittable(const conv_shape_t *s)
{
	if (s->x.nbdims < 3 || s->x.nbdims > CONV_MAX_DIMS || s->y.nbdims != s->x.nbdims)
		return "tensors are not 3-, 4- or 5-dimensional";
	if (!conv_dtype_bytes(s->x.dtype) || !conv_dtype_bytes(s->y.dtype))
		return "unknown data type";
	if (!tensor_ok(&s->x) || !tensor_ok(&s->y))
		return "a dimension or stride is not positive";
	if (s->x.dims[0] != s->y.dims[0])
		return "x and y have different N";
	if (s->x.dims[0] > (1 << 20))
		return "batch too large";
	return NULL;
}

int conv_shape_batch(const conv_shape_t *s)
{
	return conv_shape_unsplittable(s) ? -1 : (int)s->x.dims[0];
}

uint64_t conv_image_bytes(const conv_tensor_t *t)
{
	if (t->nbdims < 1 || t->strides[0] <= 0)
		return 0;
	return (uint64_t)t->strides[0] * conv_dtype_bytes(t->dtype);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

int conv_shape_quantum(const conv_shape_t *s, unsigned align)
{
	uint64_t q = 1;
	const conv_tensor_t *t[2] = { &s->x, &s->y };

	if (align <= 1)
		return 1;
	for (int i = 0; i < 2; i++) {
		uint64_t ib = conv_image_bytes(t[i]);

		if (!ib)
			continue;
		/* q images span q * ib bytes: a multiple of align when q is a
		 * multiple of align / gcd(align, ib) */
		uint64_t need = align / gcd64(align, ib);

		q = q / gcd64(q, need) * need;
	}
	return (int)q;
}

uint64_t conv_extent(const conv_tensor_t *t, int b)
{
	uint64_t last = 0;
	unsigned e = conv_dtype_bytes(t->dtype);

	if (t->nbdims < 1 || !e)
		return 0;
	for (int i = 0; i < t->nbdims; i++) {
		int64_t d = i == 0 && b > 0 ? b : t->dims[i];
		int64_t st = t->strides[i];

		if (d <= 0)
			return 0;
		if (st <= 0) {
			/* a packed filter (no strides): product of dims */
			uint64_t n = 1;

			for (int j = 0; j < t->nbdims; j++)
				n *= (uint64_t)(j == 0 && b > 0 ? b : t->dims[j]);
			return n * e;
		}
		last += (uint64_t)(d - 1) * (uint64_t)st;
	}
	return (last + 1) * e;
}

static size_t put_dims(char *buf, size_t len, const char *name, const int64_t *v, int n)
{
	size_t k = (size_t)snprintf(buf, len, ";%s=", name);

	for (int i = 0; i < n && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, i ? "," : "", v[i]);
	return k;
}

size_t conv_shape_key(const conv_shape_t *s, const char *gpu, long cudnn, const char *mb,
		      char *buf, size_t len)
{
	size_t k;
	char g[128];
	size_t gi = 0;

	for (const char *p = gpu ? gpu : "unknown"; *p && gi < sizeof(g) - 1; p++)
		g[gi++] = (*p <= ' ' || *p >= 0x7f || *p == ';') ? '_' : *p;
	g[gi] = '\0';
	k = (size_t)snprintf(buf, len, "v1;%s;%s;dt=%d;math=%d;ct=%d;mode=%d;g=%d;wf=%d",
			     s->api ? "graph" : "legacy", conv_dir_name((conv_dir_t)s->dir),
			     s->x.dtype, s->math, s->ctype, s->mode, s->groups, s->wfmt);
	if (k < len) k += put_dims(buf + k, len - k, "x", s->x.dims, s->x.nbdims);
	if (k < len) k += put_dims(buf + k, len - k, "xs", s->x.strides, s->x.nbdims);
	if (k < len) k += put_dims(buf + k, len - k, "y", s->y.dims, s->y.nbdims);
	if (k < len) k += put_dims(buf + k, len - k, "ys", s->y.strides, s->y.nbdims);
	if (k < len) k += put_dims(buf + k, len - k, "w", s->w.dims, s->w.nbdims);
	if (k < len) k += put_dims(buf + k, len - k, "pad", s->pad, s->nsp);
	if (k < len) k += put_dims(buf + k, len - k, "post", s->post, s->nsp);
	if (k < len) k += put_dims(buf + k, len - k, "str", s->stride, s->nsp);
	if (k < len) k += put_dims(buf + k, len - k, "dil", s->dil, s->nsp);
	if (k < len)
		k += (size_t)snprintf(buf + k, len - k, ";mb=%s;gpu=%s;cudnn=%ld", mb ? mb : "?", g,
				      cudnn);
	if (k >= len) {
		if (len)
			buf[0] = '\0';
		return 0;
	}
	return k;
}

int conv_pick(const conv_cand_t *c, int n, conv_pick_t mode, uint64_t room)
{
	bool any_det = false;
	int best = -1;

	for (int i = 0; i < n; i++)
		any_det |= c[i].ok && c[i].deterministic;
#define USABLE(i) (c[i].ok && (c[i].deterministic || !any_det))
	if (mode == CONV_PICK_FIT) {
		for (int i = 0; i < n; i++)
			if (USABLE(i) && c[i].ws <= room)
				return i;
		for (int i = 0; i < n; i++)
			if (c[i].ok && c[i].ws <= room)
				return i;
	}
	if (mode == CONV_PICK_PERF) {
		for (int i = 0; i < n; i++)
			if (USABLE(i))
				return i;
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (USABLE(i) && (best < 0 || c[i].ws < c[best].ws))
			best = i;
#undef USABLE
	return best;
}

uint64_t conv_pages_bytes(uintptr_t ptr, uint64_t bytes, uint64_t chunk)
{
	uint64_t first, last;

	if (!bytes)
		return 0;
	if (!chunk)
		return bytes;
	first = ptr / chunk;
	last = (ptr + bytes - 1) / chunk;
	return (last - first + 1) * chunk;
}
