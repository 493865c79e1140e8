/* interpose/conv_plan.h - the pure part of vmem's convolution decisions.
 *
 * The conv hooks (hook_cudnn.c, hook_cudnn_backend.c) hand every
 * convolution to interpose/conv_exec.c, which decides what runs: the
 * application's algorithm, a faster one that fits the budget, or a
 * µ-cuDNN configuration of micro-batches (solver/).  What those decisions
 * need that does not touch CUDA lives here, so tests/unit/interpose_dnn
 * pins it without a GPU:
 *
 *  - conv_shape_t: everything a convolution kernel's speed and workspace
 *    depend on, read from the legacy descriptors or the graph-API side
 *    table; the kernel table and the cache are keyed by it;
 *  - whether and how a kernel splits along N: the batch, the bytes per
 *    image of each side, the slice-alignment quantum of solver.h;
 *  - the algorithm choice of VMEM_CONV_ALGO (vDNN §III-C's "(m)" and
 *    "(p)", and "fit": the fastest whose workspace fits beside the
 *    layer's tensors in the budget) over a list of candidates in the
 *    order cuDNN gives them (fastest first);
 *  - the device bytes a set of ranges occupies, rounded to the pool's
 *    physical chunks.
 *
 * Constants are cuDNN's own enums (headers only).  Pure and thread-safe.
 */
#ifndef VMEM_INTERPOSE_CONV_PLAN_H
#define VMEM_INTERPOSE_CONV_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { CONV_DIR_FWD, CONV_DIR_BWD_DATA, CONV_DIR_BWD_FILTER, CONV_DIR_COUNT } conv_dir_t;

/* "fwd", "bwd_data", "bwd_filter" */
const char *conv_dir_name(conv_dir_t d);

#define CONV_MAX_DIMS 5   /* NCHW or NCDHW */
#define CONV_MAX_SP 3

typedef struct {
	int32_t nbdims;
	int32_t dtype;                   /* cudnnDataType_t */
	int64_t dims[CONV_MAX_DIMS];
	int64_t strides[CONV_MAX_DIMS];  /* in elements */
} conv_tensor_t;

/* A convolution kernel.  Always built from a memset-zeroed struct, so two
 * shapes compare (and hash) with memcmp.  "x" is the data side (the input
 * of forward and backward-filter, the written dx of backward-data), "y"
 * the output side (y of forward, dy of the backward directions). */
typedef struct {
	uint8_t api;          /* 0 legacy calls, 1 graph API */
	uint8_t dir;          /* conv_dir_t */
	int32_t math;         /* legacy: cudnnMathType_t; graph: 0 */
	int32_t ctype;        /* compute type (legacy conv descriptor, graph conv's COMP_TYPE) */
	int32_t mode;         /* CUDNN_CONVOLUTION or CUDNN_CROSS_CORRELATION */
	int32_t groups;       /* legacy group count; graph: 1 (groups are in the filter) */
	int32_t wfmt;         /* legacy filter format; graph: 0 */
	int32_t nsp;          /* spatial dims */
	int64_t pad[CONV_MAX_SP], post[CONV_MAX_SP], stride[CONV_MAX_SP], dil[CONV_MAX_SP];
	conv_tensor_t x, y, w;   /* w: strides 0 for a legacy filter (packed) */
} conv_shape_t;

/* Element size in bytes of a cudnnDataType_t; 0 when unknown or sub-byte. */
unsigned conv_dtype_bytes(int dtype);

/* The mini-batch N, or -1 when the shape cannot be split along N: x and y
 * disagree on N, a dimension or stride is not positive, or the type is
 * unknown. */
int conv_shape_batch(const conv_shape_t *s);

/* NULL when the kernel can run as micro-batches; otherwise a short reason
 * ("x and y have different N", "unknown data type", ...) for a debug
 * note.  Grouped, dilated, strided and non-NCHW convolutions can: a slice
 * is a pointer offset with the same strides. */
const char *conv_shape_unsplittable(const conv_shape_t *s);

/* Bytes from one image to the next on each side (stride of N x element). */
uint64_t conv_image_bytes(const conv_tensor_t *t);

/* The least q such that q images of both sides span a multiple of
 * `align` bytes (a power of two, e.g. 16), so that slices starting at
 * multiples of q keep the base pointers' alignment.  1 when align <= 1. */
int conv_shape_quantum(const conv_shape_t *s, unsigned align);

/* The extent in bytes of the x side, the y side and the filter at batch
 * `b` (b <= N): what a slice of b images spans. */
uint64_t conv_extent(const conv_tensor_t *t, int b);

/* Writes the cache key of `s` for GPU `gpu` (spaces are replaced) and
 * cuDNN version `cudnn`, micro-batch policy `mb` ("all", "pow2",
 * "undivided") into buf; returns its length, 0 when it does not fit.
 * The key has no white space (solver_cache's rule). */
size_t conv_shape_key(const conv_shape_t *s, const char *gpu, long cudnn, const char *mb,
		      char *buf, size_t len);

/* ---- Algorithm choice (VMEM_CONV_ALGO) ---- */

typedef enum {
	CONV_PICK_MEM,    /* least workspace (vDNN's "(m)") */
	CONV_PICK_PERF,   /* fastest ("(p)") */
	CONV_PICK_FIT,    /* fastest whose workspace is at most `room`; else least workspace */
} conv_pick_t;

/* One algorithm as cuDNN listed it (fastest first). */
typedef struct {
	int algo;
	bool ok;             /* status success */
	bool deterministic;
	uint64_t ws;
	double time;         /* ms; < 0 when unknown */
} conv_cand_t;

/* Index into c[0..n) of the choice, or -1 when none is ok.  Only
 * deterministic candidates are considered when there is one (vmem never
 * swaps the application's reproducibility for speed), except by FIT when
 * no deterministic one fits the room and a nondeterministic one does: an
 * algorithm that runs beats one that cannot (on the H100 a random net's
 * backward convolution had only FFT-class deterministic algorithms, each
 * larger than the budget).  Ties go to the earlier (cuDNN's order). */
int conv_pick(const conv_cand_t *c, int n, conv_pick_t mode, uint64_t room);

/* ---- Device bytes ---- */

/* Physical bytes that [ptr, ptr + bytes) occupies when memory is mapped in
 * `chunk`-sized pages aligned to `chunk`: the pages it touches. */
uint64_t conv_pages_bytes(uintptr_t ptr, uint64_t bytes, uint64_t chunk);

#endif
