/* tests/simgpu/cudnn_sim.h - internals shared by the simulated cuDNN's
 * legacy API (cudnn.c) and its graph/backend API (cudnn_backend.c).
 *
 * Both APIs run convolutions through dnn_conv_exec() with one algorithm
 * table, so an engine of the backend API (global index = legacy algorithm
 * number) has exactly the workspace size and speed of the legacy algorithm.
 * Nothing here is exported from libcudnn.so.9 (hidden visibility, and the
 * version script cudnn.map exports cudnn* only).
 */
#ifndef SIMGPU_CUDNN_SIM_H
#define SIMGPU_CUDNN_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cudnn.h>

#include "ref.h"

#define DNN_HIDDEN __attribute__((visibility("hidden")))

#define DNN_MAGIC_HANDLE 0x646e6e48u /* "Hnnd" */

struct cudnnContext {
	uint32_t magic;
	cudaStream_t stream;
};

/* A 4-D view of device memory: dims n, c, h, w (k, c, r, s for filters)
 * and element strides.  Everything the simulator computes is gathered into
 * packed NCHW first, so any positive strides work. */
typedef struct {
	int dims[4];
	int64_t strides[4];
} dnn_t4_t;

typedef enum { DNN_FWD, DNN_BWD_DATA, DNN_BWD_FILTER, DNN_DIRS } dnn_dir_t;

/* One convolution: geometry plus the layouts of x, w and y (for backward
 * data, x is dx and y is dy; for backward filter, w is dw). */
typedef struct {
	ref_conv_t cv;
	dnn_t4_t x, w, y;
} dnn_conv_t;

DNN_HIDDEN bool dnn_handle_ok(cudnnHandle_t h);
/* Number of algorithm ids of a direction (cuDNN's *_ALGO_COUNT). */
DNN_HIDDEN int dnn_algo_count(dnn_dir_t dir);
/* True when `algo` runs this convolution; *bytes is then its workspace. */
DNN_HIDDEN bool dnn_algo_ws(dnn_dir_t dir, int algo, const dnn_conv_t *c,
			    size_t *bytes);
/* Modelled device time of `algo` (seconds; only for supported algos). */
DNN_HIDDEN double dnn_algo_seconds(dnn_dir_t dir, int algo, const dnn_conv_t *c);
/* Runs one convolution on the handle's stream, checking every range
 * (faults name `op`), writing the algorithm's whole workspace, computing
 * with ref.c unless in dry-run, and submitting the modelled time.
 *   DNN_FWD:        a = x,  b = w,  out = y
 *   DNN_BWD_DATA:   a = w,  b = dy, out = dx
 *   DNN_BWD_FILTER: a = x,  b = dy, out = dw
 * Returns CUDNN_STATUS_NOT_SUPPORTED for an algorithm that cannot run this
 * convolution, CUDNN_STATUS_BAD_PARAM when the workspace is smaller than
 * the algorithm needs (or NULL while it needs some), an allocation error
 * when host scratch memory ran out. */
DNN_HIDDEN cudnnStatus_t dnn_conv_exec(cudnnHandle_t h, const char *op,
				       dnn_dir_t dir, int algo,
				       const dnn_conv_t *c, float alpha,
				       const void *a, const void *b, float beta,
				       void *out, void *ws, size_t ws_bytes);
/* Sets cv.p/q from the geometry and checks that y's dims match; returns
 * CUDNN_STATUS_BAD_PARAM with nothing else changed when they do not. */
DNN_HIDDEN cudnnStatus_t dnn_conv_check(dnn_conv_t *c);

#endif
