/* policy/event.h - what one hooked call did to device memory.
 *
 * Every hooked CUDA/cuDNN/cuBLAS call becomes one event: an op kind and the
 * list of device ranges it touches, each with the access the API defines
 * (conv forward reads x and w, writes y, and reads y too when beta != 0; a
 * scanned kernel argument is read-write because vmem cannot know better).
 *
 * This is the vocabulary shared by interpose/ (which fills events from call
 * arguments), the runtime (which makes the ranges resident before the call)
 * and the trace.  It is plain data: no CUDA types, no allocation.
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

/* Access bits of one touched range. */
enum {
	VMEM_ACCESS_R = 1u,
	VMEM_ACCESS_W = 2u,
	VMEM_ACCESS_RW = 3u,
};

/* One device range a call touches.  `ptr` is the address the application
 * passed; `bytes` is the extent the API implies (from descriptors, GEMM
 * shapes or copy sizes), or 0 when unknown (a scanned kernel argument): the
 * runtime then decides the extent from what it knows of the allocation.
 * `role` is a short static string ("x", "w", "y", "dx", "ws", "arg3", ...)
 * used by the trace and the graph; it is never freed. */
typedef struct {
	uintptr_t ptr;
	size_t bytes;
	uint8_t access;
	const char *role;
} vmem_ref_t;

/* Refs a call holds without allocating (a conv with bias and workspace
 * has 5).  There is no upper bound: a call with more (a foreach optimizer
 * kernel passes over a hundred tensors) spills to the heap, and a call
 * whose refs cannot be held is refused rather than run with ranges vmem
 * did not make resident. */
#define VMEM_INLINE_REFS 16

/* Name of an op kind for traces and stats ("conv_fwd"). Never NULL. */
const char *vmem_op_name(vmem_op_kind_t kind);
/* 1 when the op is a layer-like compute op (a dataflow-graph node). */
int vmem_op_is_compute(vmem_op_kind_t kind);

#endif
