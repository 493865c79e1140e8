/* interpose/dnn_split.h - a per-image cuDNN call (pooling, activation)
 * whose tensors do not fit the budget runs as slices of its batch, each
 * a call of its own through the runtime (dnn_split.c).
 *
 *	dnn_split_tensor_t t[] = { { xd, x, VMEM_ACCESS_R, "x" }, ... };
 *	(hook_call_ref each one on c as usual)
 *	int b = dnn_split_images(&c, t, n);
 *	if (b > 0)
 *		st = dnn_split_run(&c, b, t, n, issue_one_slice, &args);
 *	else if (prepare(&c)) ...
 */
#ifndef VMEM_INTERPOSE_DNN_SPLIT_H
#define VMEM_INTERPOSE_DNN_SPLIT_H

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

/* Images per slice for call `c` (refs filled), or 0 to run it whole: no
 * budget, its pages need at most 3/4 of it, tensors of different N,
 * images that interleave, an N of 1, or no slicing whose every slice
 * fits 3/4 of the budget in whole pages - the whole budget when the call
 * needs more than that (hook_split_images). */
int dnn_split_images(const hook_call_t *c, const dnn_split_tensor_t *t, int nt);

/* Runs the call in slices of b images (each prepared, issued with fn and
 * finished as a call of its own; the last may be smaller), then drops `c`
 * unprepared.  The first failing slice's status ends it
 * (CUDNN_STATUS_ALLOC_FAILED when its pages cannot be made resident).
 * Caller holds the hook guard and releases it. */
cudnnStatus_t dnn_split_run(hook_call_t *c, int b, const dnn_split_tensor_t *t, int nt,
			    dnn_split_fn fn, void *ctx);

#endif
