/* interpose/kernel_bounds.h - what a known kernel family's own parameters
 * say of the extent of its pointer arguments.
 *
 * A scanned kernel argument has no extent vmem can see, so the pool makes
 * the rest of its allocation resident (pool/residency.c).  Under a caching
 * allocator that is the rest of a segment: PyTorch keeps the workspace a
 * convolution once asked for (1.5 GB under dyn's micro-batches on
 * VGG-16) as a segment and hands out its head to a 205 MB activation; an
 * elementwise kernel over three such tensors then needs more than a third
 * of VGG-16's peak resident and fails with out-of-memory (H200, 2026-11-26),
 * and at 1/2 of the peak every such kernel pulls in pages nobody touches.
 *
 * Some kernel families say their extents in their parameters.  PyTorch's
 *   at::native::vectorized_elementwise_kernel<vec, func_t, array_t>
 *       (int N, func_t f, std::array<char *, K> data)
 * runs only over contiguous operands (gpu_kernel_impl takes it only then),
 * element i of operand k at data[k] + i * sizeof(T_k), i < N: each operand
 * spans at most N times the largest element type it could have.  The
 * element type comes from the functor when it is one of at::native's typed
 * wrappers (FillFunctor<T>, CUDAFunctor_add<T>, BinaryFunctor<A, B, R, op>,
 * ...), whose template arguments are the operands' types; a lambda's
 * return type is not in its mangled name, so any other functor gets 16
 * bytes, the largest scalar PyTorch has (complex<double>).
 *
 * The rule is chosen once per function, from its full mangled name and its
 * parameter layout (three parameters, the first a 4-byte int, the last an
 * array of pointers), and applied at each launch to the refs found in the
 * array; a pointer that also appears in another parameter (a functor that
 * holds one) keeps its unknown extent.  A bound is never trusted beyond
 * the allocation: the pool still caps it there.  Pure (no CUDA). */
#ifndef VMEM_INTERPOSE_KERNEL_BOUNDS_H
#define VMEM_INTERPOSE_KERNEL_BOUNDS_H

#include "interpose/scan.h"

/* scan_bound_t's families (scan.h keeps the rule in each cached layout). */
enum {
	KB_NONE = 0,
	KB_TORCH_VECTORIZED,   /* at::native::vectorized_elementwise_kernel */
};

/* The rule for a kernel with this (full, mangled) name and parameter
 * layout; KB_NONE when no family matches or the layout is not the one the
 * family has.  `name` may be NULL. */
scan_bound_t kb_classify(const char *name, const scan_param_t *params, int nparams);

/* Sets refs[i].bytes to the rule's bound, and VMEM_ACCESS_UPTO in its
 * access (the call may touch only part of it: bytes dropped as dead there
 * are counted, not refused, as for an unknown extent), for each ref whose
 * pointer is a word of the family's pointer parameter and of no other;
 * others keep theirs.  args: CUDA's array of pointers to the parameter values.
 * Returns the number of refs bounded. */
int kb_apply(scan_bound_t rule, void *const *args, const scan_param_t *params, int nparams,
	     vmem_ref_t *refs, int n);

#endif
