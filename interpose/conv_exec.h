/* interpose/conv_exec.h - what a hooked convolution runs, and what the
 * hooked algorithm and workspace queries answer.
 *
 * Two features meet here, both about a convolution's workspace:
 *
 *  - Algorithm choice under the budget (issue 12, vDNN §III-C):
 *    VMEM_CONV_ALGO=mem|perf|fit answers cudnnGetConvolution*Algorithm_v7,
 *    cudnnFind*Algorithm(Ex) and the graph API's engine heuristics with
 *    the memory-optimal, the fastest, or the fastest algorithm whose
 *    workspace fits beside the layer's tensors in the budget; and under
 *    every setting, a call whose workspace cannot sit beside its tensors
 *    in the budget runs with the fastest algorithm that fits, in a
 *    workspace of vmem's own, instead of failing with out-of-memory.
 *
 *  - µ-cuDNN (issue 13): VMEM_WORKSPACE=wr|wd runs each convolution as the
 *    configuration of micro-batches solver/ chose from benchmarks made
 *    with cudnnFind*AlgorithmEx (or timed graph-API plans) on micro-batch
 *    descriptors; the queries answer with that configuration (WD: zero
 *    workspace, since vmem owns one shared buffer with a segment per
 *    kernel).
 *
 * The hooks stay thin: a conv hook describes its call (hook_call_t with
 * the x, w, y refs and the application's workspace as role "ws") and
 * hands it over; conv_exec prepares it (the runtime makes the refs
 * resident), issues the real cuDNN call or calls, finishes it (unlock,
 * trace record with what ran in "args") and frees what it allocated.
 * docs/solver.md describes the whole; conv_plan.h holds the pure part.
 *
 * Every function is called inside a hook (re-entry guard held) and is
 * thread-safe; the kernel table has one mutex.
 */
#ifndef VMEM_INTERPOSE_CONV_EXEC_H
#define VMEM_INTERPOSE_CONV_EXEC_H

#include <stdint.h>

#include <cudnn.h>

#include "interpose/conv_plan.h"
#include "interpose/hook_dnn.h"
#include "interpose/hooks.h"

/* A legacy convolution call, in direction-neutral roles: x is the data
 * side (x, or dx for backward-data), w the filter (w, or dw for
 * backward-filter), y the output side (y, or dy for the backward
 * directions).  `c` holds the call's refs; conv_exec prepares, runs and
 * finishes it: the hook then only calls hook_end().  Returns cuDNN's
 * status, CUDNN_STATUS_ALLOC_FAILED when even the smallest workspace
 * cannot sit beside the tensors. */
cudnnStatus_t conv_exec_legacy(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
			       const void *alpha, cudnnTensorDescriptor_t xd, const void *x,
			       cudnnFilterDescriptor_t wd, const void *w,
			       cudnnTensorDescriptor_t yd, const void *y,
			       cudnnConvolutionDescriptor_t cd, int algo, void *ws, size_t wsb,
			       const void *beta);

/* After a real algorithm query (Get*_v7, Find*, Find*Ex) returned `st`:
 * rewrites perf[0..*ret) (any of the three *AlgoPerf_t arrays, which share
 * one layout) so that the first entry is what vmem will run, with the
 * workspace the application should allocate for it.  No-op under
 * VMEM_CONV_ALGO=app with VMEM_WORKSPACE=off, or when `st` is an error. */
void conv_exec_answer(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
		      cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
		      cudnnTensorDescriptor_t yd, cudnnConvolutionDescriptor_t cd,
		      cudnnStatus_t st, int req, int *ret, void *perf);

/* The workspace a cudnnFind*AlgorithmEx call c (its tensors referenced,
 * not yet its workspace) is passed on with: `bytes`, or less when the
 * workspace's pages beside the tensors' would not fit the budget - cuDNN
 * then tries only the algorithms whose workspace fits, those vmem could
 * run the layer with.  An application sizes this buffer by the largest
 * algorithm's need (PyTorch, minitrain --algo-mode find-ex), which under
 * host mapping vmem grants even past the budget. */
size_t conv_exec_find_ws(const hook_call_t *c, const void *ws, size_t bytes);

/* After a real cudnnGet*WorkspaceSize: under VMEM_WORKSPACE=wr the
 * configuration's workspace, under wd 0, otherwise cuDNN's answer - or,
 * under a budget where the algorithm asked about cannot have its
 * workspace beside the layer's tensors, the workspace of the algorithm
 * the call will be rescued with (conv_ws_fitted). */
void conv_exec_ws_answer(hook_call_t *c, conv_dir_t dir, cudnnHandle_t h,
			 cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
			 cudnnTensorDescriptor_t yd, cudnnConvolutionDescriptor_t cd,
			 cudnnStatus_t st, size_t *size);

/* The least device time, in ns, that the convolutions hooked since the
 * last take need with the µ-cuDNN configurations they run (ns[0]) and
 * with their least-workspace counterparts (ns[1]), by the benchmark's
 * measured times; resets both.  0 when none was measured.  Safe from any
 * thread, with or without conv_lock held. */
void conv_floor_take(uint64_t ns[2]);

/* ---- Graph API (interpose/conv_graph.c) ---- */

/* cudnnBackendExecute of `plan` with `vpack` (ex: what the side table
 * says about them): prepares, runs (the application's plan, a plan vmem
 * built with an engine that fits, or a micro-batch configuration) and
 * finishes `c`.  The hook then only calls hook_end(). */
cudnnStatus_t conv_exec_graph(hook_call_t *c, hook_bdt_t *t, cudnnHandle_t h,
			      cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vpack,
			      const hook_bdt_exec_t *ex);

/* An execution plan was finalized: under wr/wd, benchmark and solve its
 * convolution now, so that its workspace size is known when asked. */
void conv_exec_graph_finalized(hook_bdt_t *t, cudnnBackendDescriptor_t plan);

/* After a successful real cudnnBackendGetAttribute(desc, attr, ...) that
 * returned `n` elements: reorders engine-heuristics results per
 * VMEM_CONV_ALGO, and answers a conv plan's workspace size under wr/wd.
 * Call before the side table records the answer. */
void conv_exec_graph_get(hook_bdt_t *t, cudnnBackendDescriptor_t desc, int attr, int type,
			 int64_t n, void *elems);

#endif
