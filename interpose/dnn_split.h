/* interpose/dnn_split.h - a per-image cuDNN call (pooling, activation)
 * whose tensors do not fit the budget runs as slices of its batch (or of
 * its planes), each a call of its own through the runtime (dnn_split.c).
 *
 *	dnn_split_tensor_t t[] = { { xd, x, VMEM_ACCESS_R, "x" }, ... };
 *	(hook_call_ref each one on c as usual)
 *	dnn_split_t s;
 *	if (dnn_split_plan(&c, t, n, true, &s))
 *		st = dnn_split_run(&c, &s, t, n, issue_one_slice, &args);
 *	else if (prepare(&c)) ...
 */
#ifndef VMEM_INTERPOSE_DNN_SPLIT_H
#define VMEM_INTERPOSE_DNN_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include <cudnn.h>

#include "interpose/hooks.h"

#define DNN_SPLIT_MAX 4

/* One tensor of the call: its descriptor and pointer (NULL: none) and the
 * access and role its hook_call_ref had (a slice of an output written
 * whole is written whole). */
typedef struct {
	cudnnTensorDescriptor_t d;
	const void *p;
	uint8_t access;
	const char *role;
} dnn_split_tensor_t;

/* Issues the real call on one slice: d[i] and p[i] are the slice's (the
 * order of the table given to dnn_split_run). */
typedef cudnnStatus_t (*dnn_split_fn)(void *ctx, const cudnnTensorDescriptor_t *d,
				      void *const *p);

/* How a call runs in slices.  Images first: b images a slice, the last
 * maybe fewer (hook_split_images, the rule convolutions share).  When no
 * slicing of images fits - one image of each tensor straddles a page
 * boundary at the same place (random:185167115's activation backward at
 * 1/2: 8 pages of 7 in every slicing), or N is 1 - and the call cannot
 * run whole (its pages exceed the budget), a call that works on each
 * (image, channel) plane alone (pooling, activation) runs in slices of
 * planes instead, if every tensor is laid out plane after plane (NCHW:
 * the N-stride is C times the C-stride): plane u = n*C + c at u times the
 * C-stride, each slice as many planes as fit (hook_slice_next). */
typedef struct {
	int units;    /* images, or N x C planes */
	int b;        /* images: units a slice; planes: 0 (each slice its own) */
	int slices;
	bool planes;
} dnn_split_t;

/* Fills *s and returns true when call `c` (refs filled) is to run in
 * slices; false to run it whole: no budget, its pages need at most 3/4 of
 * it, tensors of different N (or C, for planes), images that interleave,
 * or no slicing whose every slice fits - 3/4 of the budget in whole pages,
 * the whole budget when the call needs more than that.  `planes`: the
 * call works on each plane alone, slices of planes may be tried. */
bool dnn_split_plan(const hook_call_t *c, const dnn_split_tensor_t *t, int nt, bool planes,
		    dnn_split_t *s);

/* Runs the call in the slices `s` says (each prepared, issued with fn and
 * finished as a call of its own), then drops `c` unprepared.  The first
 * failing slice's status ends it (CUDNN_STATUS_ALLOC_FAILED when its pages
 * cannot be made resident).  Caller holds the hook guard and releases it. */
cudnnStatus_t dnn_split_run(hook_call_t *c, const dnn_split_t *s, const dnn_split_tensor_t *t,
			    int nt, dnn_split_fn fn, void *ctx);

#endif
