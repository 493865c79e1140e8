/* interpose/hook_dnn.h - the pure part of the cuDNN and cuBLAS hooks.
 *
 * A hooked cuDNN or cuBLAS call names its tensors by pointer and
 * describes them with descriptors or GEMM shapes.  To make a tensor
 * resident before the call (DESIGN.md point 3) vmem needs the byte range
 * the call may touch, and for the dataflow graph each tensor's role and
 * access.  This module computes both without calling CUDA:
 *
 *  - extents: the bytes a strided tensor spans, a column-major GEMM
 *    operand spans, a strided batch spans; element sizes of cuDNN and CUDA
 *    data types;
 *  - the cuDNN graph-API side table: cuDNN's backend descriptors are
 *    opaque, and PyTorch destroys a convolution's operation graph long
 *    before it executes the cached plan.  So the table follows the
 *    SetAttribute/GetAttribute calls as they happen and copies, by value,
 *    what each descriptor leads to (tensor -> operation -> operation graph
 *    -> heuristics / engine -> engine config -> execution plan).  At
 *    cudnnBackendExecute it turns (plan, variant pack) into an op kind and
 *    one ref per variant-pack pointer.  docs/cudnn-graph.md describes the
 *    chain PyTorch builds.
 *
 * The hook files (hook_cudnn.c, hook_cudnn_backend.c, hook_cublas.c) read
 * descriptors with the real cuDNN/cuBLAS getters and feed this module;
 * the unit tests (tests/unit/interpose_dnn) feed it synthetic values.
 * Constants are cuDNN's and CUDA's own enums (headers only, nothing is
 * linked).
 */
#ifndef VMEM_INTERPOSE_HOOK_DNN_H
#define VMEM_INTERPOSE_HOOK_DNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/event.h"

/* ---- Extents.  All return 0 for "unknown or empty": the runtime then
 * decides the extent from the allocation (policy/event.h).  Overflow is
 * "unknown", never a wrapped small number.  Pure and thread-safe. */

/* Bits per element of a cudnnDataType_t / cudaDataType_t; 0 when unknown. */
unsigned hook_cudnn_dtype_bits(int cudnn_dtype);
unsigned hook_cuda_dtype_bits(int cuda_dtype);

/* Bytes spanned by a strided tensor: (max over dims of (dim-1)*stride) + 1
 * elements, rounded up to whole bytes.  Stride 0 (broadcast) is allowed;
 * a negative stride or dimension, or nbdims outside 1..HOOK_DNN_MAX_DIMS,
 * gives 0.  A zero dimension (empty tensor) gives 0. */
#define HOOK_DNN_MAX_DIMS 8
uint64_t hook_strided_extent(int nbdims, const int64_t *dims,
			     const int64_t *strides, unsigned elem_bits);
/* Bytes of a fully packed tensor (a cuDNN filter): product of dims. */
uint64_t hook_packed_extent(int nbdims, const int64_t *dims, unsigned elem_bits);
/* True when the strides leave no gap and no overlap: the span of the
 * strided tensor is its element count (any dimension order).  A write to
 * such a tensor with beta = 0 overwrites its whole extent
 * (VMEM_ACCESS_WHOLE, policy/event.h); a slice of a larger tensor or a
 * broadcast is not dense. */
bool hook_strided_dense(int nbdims, const int64_t *dims, const int64_t *strides);

/* ---- Per-image calls too large for the budget (dnn_split.c). */

/* Slices along N for a per-image cuDNN call (pooling, activation) whose
 * tensors span `pages` bytes of whole pages, under a budget of `budget`
 * bytes (0: none) with batch `n`: 1 (run it whole) when it needs at most
 * 3/4 of the budget, else the fewest slices whose share is at most 1/4
 * of it, never more than n (one image each).  Pure. */
int hook_split_slices(uint64_t pages, uint64_t budget, int n);

/* One tensor of a call to be sliced: at `ptr`, image i at ptr + i*image,
 * each image spanning `span` bytes; image 0 means a tensor every slice
 * needs whole (a filter, a workspace: `span` bytes at ptr). */
typedef struct {
	uint64_t ptr, image, span;
} hook_slice_t;

/* Bytes of whole `chunk`-sized pages the slice of images [first,
 * first+b) touches, over every tensor (a page two tensors share counts
 * once per tensor: an upper bound).  Pure. */
uint64_t hook_slice_pages(const hook_slice_t *t, int nt, int first, int b, uint64_t chunk);

/* Images per slice for a call of n images: the largest b = ceil(n/k),
 * k from `k0` up, whose every slice fits `room` bytes of pages (slices
 * that straddle a page boundary need one page more per tensor) and,
 * unless `pair` is 0, every two slices in a row fit `pair` together; 0
 * when none of the first 64 candidates does.  Pure. */
int hook_slice_images(const hook_slice_t *t, int nt, int n, int k0, uint64_t room, uint64_t pair,
		      uint64_t chunk);

/* The rule for a call of n images whose tensors span `pages` bytes of
 * pages in `budget` (0: none): images per slice (0 < b < n) when it needs
 * more than 3/4 of the budget and a slicing of about 1/4 each fits 3/4
 * in whole pages - or, when it needs more than the whole budget and none
 * does, a slicing that fits the whole budget; 0 to run it whole (it
 * fits, or no slicing does).  At each of the two levels a slicing whose
 * every two slices in a row fit the budget together comes first (the
 * next slice's pages come in while one runs).  The one rule dnn_split.c
 * and conv_exec.c both apply.  Pure. */
int hook_split_images(const hook_slice_t *t, int nt, int n, uint64_t pages, uint64_t budget,
		      uint64_t chunk);
/* The slice of a call's units (images, or (image, channel) planes) that
 * starts at unit `first` of n: the most units whose pages
 * (hook_slice_pages) fit a quarter of the budget, else 3/4 of it, else
 * the whole of it - the first of those levels one unit fits, so that
 * slices stay about a quarter of the budget when units are small; 0 when
 * one unit needs more than the budget.  Slices so cut start where the
 * last ended, and may differ in size.  Pure. */
int hook_slice_next(const hook_slice_t *t, int nt, int n, int first, uint64_t budget,
		    uint64_t chunk);

/* cudnnDataType_t / cudaDataType_t as policy/event.h's vmem_dtype_t. */
vmem_dtype_t hook_cudnn_dtype(int cudnn_dtype);
vmem_dtype_t hook_cuda_dtype(int cuda_dtype);

/* Bytes spanned by a column-major rows x cols matrix with leading
 * dimension ld (ld >= rows): (cols-1)*ld + rows elements.  ld < rows is
 * invalid (0). */
uint64_t hook_matrix_extent(int64_t rows, int64_t cols, int64_t ld, unsigned elem_bits);
/* Adds (batch-1) strides to one matrix's extent (strided batched GEMM);
 * stride in elements, may be 0 (every batch reads the same matrix). */
uint64_t hook_batched_extent(uint64_t one, int64_t stride_elems, int64_t batch,
			     unsigned elem_bits);

/* The three operands of cuBLAS' C = alpha*op(A)*op(B) + beta*C (column
 * major): op(A) is m x k, op(B) is k x n, C is m x n.  `trans*` is a
 * cublasOperation_t: anything but CUBLAS_OP_N (0) stores the operand
 * transposed.  Element sizes in bits. */
typedef struct {
	uint64_t a, b, c;
} hook_gemm_extents_t;
hook_gemm_extents_t hook_gemm_extents(int transa, int transb, int64_t m, int64_t n,
				      int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
				      unsigned abits, unsigned bbits, unsigned cbits);

/* ---- The graph-API side table (cudnnBackend* descriptors). */

/* Most tensors remembered per operation / graph (more are dropped and
 * counted in hook_bdt_stats_t), and uid/pointer pairs per variant pack: a
 * pack with more cannot be described, and its execution is refused
 * (refs_lost) rather than run on memory vmem did not make resident. */
#define HOOK_BDT_MAX_TENSORS 12
#define HOOK_BDT_MAX_VP 64

/* What a lone graph-API convolution is, in full, so vmem can build its
 * own execution plans for slices of the batch (interpose/conv_graph.c):
 * its three tensors in the roles of the operation, the convolution
 * descriptor, alpha and beta, and the operation graph's handle. */
#define HOOK_CONV_MAX_DIMS 5
typedef struct {
	bool set;
	bool is_virtual;
	int dtype;
	int nbdims;
	int64_t uid;
	int64_t align;     /* CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT; 0 when not set */
	int64_t dims[HOOK_CONV_MAX_DIMS];
	int64_t strides[HOOK_CONV_MAX_DIMS];
} hook_conv_tensor_t;

typedef struct {
	int optype;              /* cudnnBackendDescriptorType_t of the operation */
	hook_conv_tensor_t t[3]; /* [0] X / DX, [1] W / DW, [2] Y / DY */
	bool have_conv;
	int comp_type, mode, nsp;
	int64_t pre[3], post[3], stride[3], dil[3];
	int scale_type;          /* CUDNN_TYPE_FLOAT or CUDNN_TYPE_DOUBLE; 0: alpha/beta unset */
	double alpha, beta;      /* cuDNN's defaults 1 and 0 when unset */
	uintptr_t handle;        /* CUDNN_ATTR_OPERATIONGRAPH_HANDLE */
} hook_conv_geom_t;

/* What one cudnnBackendExecute does: the op kind found from the plan, and
 * one ref per variant-pack pointer (plus the workspace).  `conv` holds
 * n, c, h, w, k, r, s when `have_conv` (from the conv's data-side tensor
 * and its filter). */
typedef struct {
	vmem_op_kind_t kind;
	bool known_plan;          /* the plan was followed back to a graph */
	int nrefs;
	vmem_ref_t refs[HOOK_BDT_MAX_VP + 1];
	bool refs_lost;           /* the variant pack held more than HOOK_BDT_MAX_VP */
	bool have_conv;
	int64_t conv[7];
	int conv_dtype;           /* cudnnDataType_t of the data-side tensor, -1 unknown */
	uint64_t ws_bytes;        /* plan's workspace size when known, else 0 */
} hook_bdt_exec_t;

typedef struct {
	uint64_t tracked;         /* descriptors in the table now */
	uint64_t peak;
	uint64_t untracked;       /* creations refused because the table was full */
	uint64_t dropped;         /* tensors / pairs beyond the per-entry limits */
} hook_bdt_stats_t;

typedef struct hook_bdt hook_bdt_t;

/* A table that tracks at most `max_entries` descriptors at a time (memory
 * is bounded by max_entries * sizeof an entry, under 500 bytes).  NULL
 * when out of memory.  Every function below is thread-safe (one mutex
 * per table); descriptors are plain handles (uintptr_t) never
 * dereferenced, so fake handles work in tests. */
hook_bdt_t *hook_bdt_new(size_t max_entries);
void hook_bdt_free(hook_bdt_t *t);

/* cudnnBackendCreateDescriptor succeeded: starts tracking `desc` (a
 * cudnnBackendDescriptorType_t `type`), forgetting any stale entry of a
 * reused handle.  Returns false when the table is full. */
bool hook_bdt_create(hook_bdt_t *t, uintptr_t desc, int type);
/* cudnnBackendDestroyDescriptor: forgets `desc` (unknown: no-op). */
void hook_bdt_destroy(hook_bdt_t *t, uintptr_t desc);
/* cudnnBackendSetAttribute succeeded with these arguments.  Descriptor
 * elements (CUDNN_TYPE_BACKEND_DESCRIPTOR) are read as handles and looked
 * up in the table; what they lead to is copied into `desc`'s entry. */
void hook_bdt_set(hook_bdt_t *t, uintptr_t desc, int attr, int attr_type,
		  int64_t count, const void *elems);
/* cudnnBackendGetAttribute succeeded and returned `count` elements in
 * `elems`: descriptor outputs (heuristics results, a config's engine)
 * inherit what `desc` leads to; a plan's workspace size is remembered. */
void hook_bdt_get(hook_bdt_t *t, uintptr_t desc, int attr, int attr_type,
		  int64_t count, const void *elems);
/* The cudnnBackendDescriptorType_t `desc` was created with, or -1 when
 * the table does not track it. */
int hook_bdt_type(hook_bdt_t *t, uintptr_t desc);
/* Records the workspace size of an execution plan (the hook reads it
 * after Finalize). */
void hook_bdt_set_ws(hook_bdt_t *t, uintptr_t plan, uint64_t bytes);

/* Fills *out for cudnnBackendExecute(handle, plan, vpack).  Never fails:
 * an unknown plan gives kind "other" with every known pointer rw; an
 * unknown variant pack gives no refs.  Forward conv: x r, w r, y w;
 * backward data: w r, dy r, dx w; backward filter: x r, dy r, dw w; the
 * written tensor is rw when the operation's beta is not 0, and a whole
 * overwrite (w | VMEM_ACCESS_WHOLE) when beta is 0 and its strides are
 * dense; the workspace is "ws" w (whole when its size is known).  Any
 * other graph: kind "other", every pointer rw. */
void hook_bdt_execute(hook_bdt_t *t, uintptr_t plan, uintptr_t vpack,
		      hook_bdt_exec_t *out);

void hook_bdt_stats(hook_bdt_t *t, hook_bdt_stats_t *out);

/* Copies into *out what `desc` (an operation, graph, heuristics, engine,
 * engine config or plan) leads to, when it leads to exactly one
 * convolution whose three tensors (not virtual) and convolution
 * descriptor were all seen.  False otherwise. */
bool hook_bdt_conv_geom(hook_bdt_t *t, uintptr_t desc, hook_conv_geom_t *out);

/* fork (DataLoader workers fork while other threads build descriptors):
 * the owner of a table registers these with pthread_atfork.  prepare
 * takes the table's lock, so no update is half done when the process is
 * copied; parent releases it; child re-initialises it, since the thread
 * that would unlock it does not exist there.  The child keeps a
 * consistent copy of the table.  NULL is accepted (no table). */
void hook_bdt_atfork_prepare(hook_bdt_t *t);
void hook_bdt_atfork_parent(hook_bdt_t *t);
void hook_bdt_atfork_child(hook_bdt_t *t);

#endif
