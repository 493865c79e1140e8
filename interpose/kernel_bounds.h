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
 * PyTorch's foreach kernels (the _foreach_ ops; SGD's and Adam's steps
 * without fused=True)
 *   at::native::(anonymous)::multi_tensor_apply_kernel<
 *       TensorListMetadata<depth[, large]>, functor, args...>(meta, f, args...)
 * take their tensors in the metadata, by value: addresses[depth][M] and
 * numel_for_tensor[M], every list of one element type (the functor's
 * template arguments name it, and a copy's source type beside it).  A
 * pointer in slot k spans at most numel_for_tensor[k] of the largest of
 * those types; and block b of the launch works on slot block_to_tensor[b]
 * only, so a pointer that only slots no block names hold (an earlier
 * launch's, left in the reused metadata) is not touched at all.  Block b
 * works on chunk block_to_chunk[b] of its tensor, elements [c, c + 1) x
 * kChunkSize: a tensor split over launches (a 64 MiB weight holds 256
 * chunks, a launch runs 320 blocks) is touched by each launch in its own
 * chunks only.  kChunkSize is a constant of PyTorch's sources, not a
 * parameter, so the chunks bound nothing until the launches themselves
 * confirm it (kb_state_t): the metadata's size must be the one MultiTensorApply.cuh
 * gives that depth (the 4 KB layout, or the 32 KB one of CUDA >= 12.1):
 * a PyTorch whose layout differs gets no bound.  On VGG-16 (H200) these
 * kernels carried 195 GB of the 460 GB its launches made resident in ten
 * iterations, each of up to 214 pointers taken to the end of its segment.
 *
 * The rule is chosen once per function, from its full mangled name and its
 * parameter layout, and applied at each launch to the refs found where the
 * family keeps its tensors; a pointer that also appears in another
 * parameter (a functor that holds one) keeps its unknown extent.  A bound is never trusted beyond
 * the allocation: the pool still caps it there.  Pure (no CUDA). */
#ifndef VMEM_INTERPOSE_KERNEL_BOUNDS_H
#define VMEM_INTERPOSE_KERNEL_BOUNDS_H

#include "interpose/scan.h"

/* PyTorch's kChunkSize (MultiTensorApply.cuh: 65536 elements since 2020):
 * not a parameter, so it is checked against every foreach launch before
 * a chunk bounds anything (kb_state_t). */
#define KB_CHUNK 65536

/* What the foreach launches seen so far say of KB_CHUNK.  One per process
 * (the hooks keep it); zero-initialised it is KB_CHUNK_UNKNOWN. */
enum { KB_CHUNK_UNKNOWN = 0, KB_CHUNK_CONFIRMED = 1, KB_CHUNK_REFUTED = -1 };
typedef struct {
	_Atomic int chunk;
} kb_state_t;

/* scan_bound_t's families (scan.h keeps the rule in each cached layout). */
enum {
	KB_NONE = 0,
	KB_TORCH_VECTORIZED,   /* at::native::vectorized_elementwise_kernel */
	KB_TORCH_FOREACH,      /* at::native::multi_tensor_apply_kernel over a
				  TensorListMetadata (the _foreach_ ops, SGD's step) */
};

/* The rule for a kernel with this (full, mangled) name and parameter
 * layout; KB_NONE when no family matches or the layout is not the one the
 * family has.  `name` may be NULL. */
scan_bound_t kb_classify(const char *name, const scan_param_t *params, int nparams);

/* Sets refs[i].bytes to the rule's bound, and VMEM_ACCESS_UPTO in its
 * access (the call may touch only part of it: bytes dropped as dead there
 * are counted, not refused, as for an unknown extent), for each ref whose
 * pointer is where the family keeps its tensors and in no other parameter;
 * others keep theirs.  A foreach launch's refs that only slots no block
 * names hold are removed from refs (*n shrinks, *dropped counts them):
 * `blocks` is the launch's block count when its grid is 1-D, else 0
 * (every slot counts).  Once `st` has KB_CHUNK confirmed (NULL: never), a
 * foreach pointer spans only the chunks the launch's blocks name (its ref
 * then starts inside the tensor; *chunked counts those narrower than the
 * tensor).  args: CUDA's array of pointers to the parameter values.
 * Returns the number of refs bounded. */
int kb_apply(scan_bound_t rule, void *const *args, const scan_param_t *params, int nparams,
	     uint32_t blocks, kb_state_t *st, vmem_ref_t *refs, int *n, int *dropped,
	     int *chunked);

#endif
