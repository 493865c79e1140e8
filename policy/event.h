/* policy/event.h - what one hooked call did to device memory.
 *
 * Every hooked CUDA/cuDNN/cuBLAS call becomes one event: an op kind, the
 * list of device ranges it touches, each with the access the API defines
 * (conv forward reads x and w, writes y, and reads y too when beta != 0; a
 * scanned kernel argument is read-write because vmem cannot know better),
 * and a typed record of what the call computes (a convolution's shape and
 * algorithm, a GEMM's sizes, a copy's bytes and direction).
 *
 * This is the vocabulary shared by interpose/ (which fills events from call
 * arguments), the runtime (which makes the ranges resident before the call),
 * the trace, and the proactive layer (policy/policy.h), which learns the
 * training iteration from a stream of these events.  It is plain data: no
 * CUDA types, no allocation.
 *
 * What a hook must fill (the contract the policy relies on)
 * ----------------------------------------------------------
 *  kind, api      always; api is a static string (the hooked function's name)
 *  stream         the stream the work is queued on (0 = legacy default)
 *  thread         the calling OS thread (gettid()); the runtime fills it
 *  seq            the trace sequence number of the op; the runtime fills it
 *  ranges         one per pointer argument that may touch device memory, in
 *                 the order of the API's parameters, resolved by the runtime
 *                 to (alloc_id, offset, bytes) before the policy sees them;
 *                 `access` as below
 *  info           the typed record for conv, GEMM, copy/set and launch calls
 *                 (VMEM_INFO_NONE otherwise); every field the hook cannot
 *                 learn cheaply stays 0 (or -1 where said), never a guess
 *  dur_ns         the measured device duration when known at the time the
 *                 event is handed over (the simulator's virtual clock), else
 *                 0; a later measurement goes to policy_duration()
 *
 * Access bits.  VMEM_ACCESS_R: the call may read the range.  VMEM_ACCESS_W:
 * it may write it.  VMEM_ACCESS_WHOLE (only with W and without R): the call
 * does not read the range and leaves none of its previous contents for
 * anyone to read -- every byte of the extent is overwritten (a packed cuDNN
 * output with beta = 0, a GEMM C with ldc == m and beta = 0, a memset, a 1-D
 * copy destination) or handed over as scratch (a workspace).  It is what
 * liveness needs to start a dead interval (SuperNeurons §3.2), so a hook sets
 * it only when it is certain: a strided output with gaps between its
 * elements, a 2-D copy with a pitch, an output whose scale factor could not
 * be read, a scanned kernel argument -- all stay without it.  Without the
 * bit a write is "partial": it ends a dead interval and never starts one.
 */
#ifndef VMEM_POLICY_EVENT_H
#define VMEM_POLICY_EVENT_H

#include <stddef.h>
#include <stdint.h>

/* X(enum, trace name, is_compute) - is_compute marks layer-like ops that
 * become nodes in the dataflow graph. */
#define VMEM_OP_KINDS(X)                         \
	X(OP_OTHER, "other", 0)                  \
	X(OP_MEMCPY, "memcpy", 0)                \
	X(OP_MEMSET, "memset", 0)                \
	X(OP_LAUNCH, "launch", 1)                \
	X(OP_CONV_FWD, "conv_fwd", 1)            \
	X(OP_CONV_BWD_DATA, "conv_bwd_data", 1)  \
	X(OP_CONV_BWD_FILTER, "conv_bwd_filter", 1) \
	X(OP_CONV_BWD_BIAS, "conv_bwd_bias", 1)  \
	X(OP_ADD_TENSOR, "add_tensor", 1)        \
	X(OP_OP_TENSOR, "op_tensor", 1)          \
	X(OP_ACT_FWD, "act_fwd", 1)              \
	X(OP_ACT_BWD, "act_bwd", 1)              \
	X(OP_POOL_FWD, "pool_fwd", 1)            \
	X(OP_POOL_BWD, "pool_bwd", 1)            \
	X(OP_SOFTMAX_FWD, "softmax_fwd", 1)      \
	X(OP_SOFTMAX_BWD, "softmax_bwd", 1)      \
	X(OP_BN_FWD_TRAIN, "bn_fwd_train", 1)    \
	X(OP_BN_FWD_INFER, "bn_fwd_infer", 1)    \
	X(OP_BN_BWD, "bn_bwd", 1)                \
	X(OP_GEMM, "gemm", 1)                    \
	X(OP_BLAS1, "blas1", 1)                  \
	X(OP_ALGO_QUERY, "algo_query", 0)        \
	X(OP_WS_QUERY, "ws_query", 0)            \
	X(OP_SYNC, "sync", 0)                    \
	X(OP_STREAM, "stream", 0)                \
	X(OP_EVENT, "event", 0)

typedef enum {
#define VMEM_OP_ENUM(e, name, compute) VMEM_##e,
	VMEM_OP_KINDS(VMEM_OP_ENUM)
#undef VMEM_OP_ENUM
	VMEM_OP_COUNT
} vmem_op_kind_t;

/* Access bits of one touched range (see the header comment). */
enum {
	VMEM_ACCESS_R = 1u,
	VMEM_ACCESS_W = 2u,
	VMEM_ACCESS_RW = 3u,
	VMEM_ACCESS_WHOLE = 4u,   /* with W only: a whole overwrite, nothing read */
	VMEM_ACCESS_UPTO = 8u,    /* `bytes` is an upper bound, not the extent: the
				     call may touch only part of it (a scanned kernel
				     argument its family's parameters bound,
				     interpose/kernel_bounds.h) */
	VMEM_ACCESS_UNUSED = 16u, /* with W and WHOLE: scratch the application handed
				     the call (its workspace) that the call as vmem
				     runs it does not use: the pool maps none of it;
				     the policy sees the range without this bit, a
				     whole overwrite (interpose/pool_ref.h) */
	VMEM_ACCESS_GUESS = 32u,  /* the policy's view only: the call named no extent
				     (bytes 0, a scanned kernel argument) and the
				     runtime resolved it to the allocation's end - the
				     pool counts only its first page as the call's own,
				     the rest it may map from the host when the call
				     needs more than the budget (policy/hostpages.c) */
};

/* One device range a call touches, as a hook names it.  `ptr` is the
 * address the application passed; `bytes` is the extent the API implies
 * (from descriptors, GEMM shapes or copy sizes), or 0 when unknown (a
 * scanned kernel argument): the runtime then decides the extent from what
 * it knows of the allocation.  `role` is a short static string ("x", "w",
 * "y", "dx", "ws", "arg3", ...) used by the trace and the graph; it is never
 * freed. */
typedef struct {
	uintptr_t ptr;
	size_t bytes;
	uint8_t access;
	const char *role;
} vmem_ref_t;

/* A touched range once the runtime resolved it: which allocation and where
 * inside it.  interpose/trace.h's trace_ref_t has the same fields. */
typedef struct {
	uint64_t alloc_id;   /* 0 = not vmem memory (a foreign pointer) */
	uint64_t offset;     /* of ptr inside the allocation */
	uint64_t bytes;      /* resolved extent */
	uintptr_t ptr;       /* the address the application passed */
	uint8_t access;      /* VMEM_ACCESS_* */
	const char *role;
} vmem_range_t;

/* Refs a call holds without allocating (a conv with bias and workspace
 * has 5).  There is no upper bound: a call with more (a foreach optimizer
 * kernel passes over a hundred tensors) spills to the heap, and a call
 * whose refs cannot be held is refused rather than run with ranges vmem
 * did not make resident. */
#define VMEM_INLINE_REFS 16

/* Element types, independent of cuDNN's and CUDA's enums (the hooks map
 * theirs; policy/ includes no CUDA header). */
typedef enum {
	VMEM_DTYPE_UNKNOWN = 0,
	VMEM_DTYPE_F32, VMEM_DTYPE_F64, VMEM_DTYPE_F16, VMEM_DTYPE_BF16,
	VMEM_DTYPE_TF32, VMEM_DTYPE_FP8_E4M3, VMEM_DTYPE_FP8_E5M2,
	VMEM_DTYPE_I8, VMEM_DTYPE_U8, VMEM_DTYPE_I32, VMEM_DTYPE_I64,
	VMEM_DTYPE_OTHER,
	VMEM_DTYPE_COUNT
} vmem_dtype_t;

typedef enum {
	VMEM_CONV_DIR_FWD = 0,       /* y = conv(x, w) */
	VMEM_CONV_DIR_BWD_DATA,      /* dx = conv^T(dy, w) */
	VMEM_CONV_DIR_BWD_FILTER,    /* dw = corr(x, dy) */
} vmem_conv_dir_t;

/* A convolution, whatever API issued it (legacy cudnnConvolution*, the
 * fused bias-activation forward, or cudnnBackendExecute).
 *   n, c, h, w   the data-side tensor: x (forward, backward filter) or dx
 *                (backward data); 0 when unknown
 *   k, r, s      the filter: output channels, height, width; 0 when unknown
 *   stride, pad, dilation  per spatial dimension (height, width); 0 when
 *                the hook did not read the convolution descriptor
 *   groups       1 for an ordinary convolution; 0 when unknown
 *   algo         the cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t the
 *                application passed, or -1 (the graph API has engines, not
 *                algorithms)
 *   workspace    bytes of workspace the call was given
 *   dtype        element type of the data-side tensor */
typedef struct {
	int32_t n, c, h, w;
	int32_t k, r, s;
	int32_t stride[2], pad[2], dilation[2];
	int32_t groups;
	int32_t algo;
	uint64_t workspace;
	uint8_t dir;        /* vmem_conv_dir_t */
	uint8_t dtype;      /* vmem_dtype_t */
} vmem_conv_info_t;

/* A GEMM in cuBLAS' column-major terms: C = op(A) op(B), op(A) m x k,
 * op(B) k x n, `batch` matrices (1 when not batched).  trans: 0 N, 1 T,
 * 2 C (cublasOperation_t values).  cuBLASLt calls fill what their layouts
 * say; an unknown size is 0. */
typedef struct {
	int64_t m, n, k;
	int64_t batch;
	uint8_t transa, transb;
	uint8_t atype, ctype;   /* vmem_dtype_t */
} vmem_gemm_info_t;

/* A copy or a set: `bytes` moved or set; `kind` is cudaMemcpyKind's value
 * for copies (0 host to host, 1 H2D, 2 D2H, 3 D2D, 4 default) and
 * VMEM_COPY_SET for memsets. */
#define VMEM_COPY_SET 255
typedef struct {
	uint64_t bytes;
	uint8_t kind;
} vmem_copy_info_t;

/* A kernel launch: the function handle (stable for the process's life) and
 * its launch shape. */
typedef struct {
	uintptr_t func;
	uint32_t grid[3], block[3];
	uint32_t shmem;
} vmem_launch_info_t;

typedef enum {
	VMEM_INFO_NONE = 0,
	VMEM_INFO_CONV,
	VMEM_INFO_GEMM,
	VMEM_INFO_COPY,
	VMEM_INFO_LAUNCH,
} vmem_info_type_t;

typedef struct {
	uint8_t type;   /* vmem_info_type_t: which member is valid */
	union {
		vmem_conv_info_t conv;
		vmem_gemm_info_t gemm;
		vmem_copy_info_t copy;
		vmem_launch_info_t launch;
	} u;
} vmem_op_info_t;

/* One hooked call as the proactive layer sees it (see the header comment
 * for who fills what).  `ranges` is borrowed for the duration of the call
 * that receives the event. */
typedef struct {
	vmem_op_kind_t kind;
	const char *api;
	uintptr_t stream;
	uint64_t thread;
	uint64_t seq;
	int nranges;
	const vmem_range_t *ranges;
	vmem_op_info_t info;
	uint64_t t_ns;     /* host time the call was entered (trace time base) */
	uint64_t dur_ns;   /* measured device time; 0 = not measured (yet) */
} vmem_event_t;

/* Name of an op kind for traces and stats ("conv_fwd"). Never NULL. */
const char *vmem_op_name(vmem_op_kind_t kind);
/* 1 when the op is a layer-like compute op (a dataflow-graph node). */
int vmem_op_is_compute(vmem_op_kind_t kind);
/* 1 for the backward kinds of cuDNN (conv_bwd_*, act/pool/softmax/bn _bwd). */
int vmem_op_is_backward(vmem_op_kind_t kind);
/* The op kind named `name` ("conv_fwd"), or VMEM_OP_COUNT when none is. */
vmem_op_kind_t vmem_op_from_name(const char *name);
/* Name of an element type ("f32", "bf16", ...). Never NULL. */
const char *vmem_dtype_name(vmem_dtype_t t);
/* "r", "w", "rw", "w!" (a whole overwrite) or "" -- the short form the
 * dumps use. */
const char *vmem_access_name(uint8_t access);

#endif
