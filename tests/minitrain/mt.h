/* tests/minitrain/mt.h - minitrain, a framework-like training program.
 *
 * minitrain is the workload vmem is tested and benchmarked against.  It
 * drives cudart, cuDNN and cuBLAS directly, the way a framework does:
 * a layer graph (AlexNet, VGG, ResNet, Inception, DenseNet, a random DAG),
 * per-tensor / network-wide / caching allocation styles, legacy or graph
 * (backend) cuDNN convolutions, conv algorithm choice by heuristics or by
 * benchmarking, SGD with momentum through cudaLaunchKernel.  It is linked
 * against the real CUDA libraries and runs unchanged on a real GPU or on the
 * simulated one (LD_LIBRARY_PATH=<build>/tests/simgpu).  See
 * docs/minitrain.md.
 *
 * Modules (prefix mt_): net.c builds layer graphs, alloc.c owns device
 * memory (the three allocation styles), conv.c chooses and runs
 * convolutions, exec.c runs forward / backward / update, main.c parses the
 * command line and prints the results.  Single-threaded, except that
 * --threads 2 runs each backward pass on a second thread (exec.c).
 */
#ifndef MT_H
#define MT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>
#include <cublasLt.h>

/* ---- errors.  Every CUDA/cuDNN/cuBLAS call goes through one of these:
 * a failure prints the call, file:line and the library's error string and
 * exits 1; an out-of-memory exits 3 (see mt_oom). */
void mt_fail_cuda(cudaError_t e, const char *call, const char *file, int line);
void mt_fail_cudnn(cudnnStatus_t s, const char *call, const char *file, int line);
void mt_fail_cublas(cublasStatus_t s, const char *call, const char *file, int line);
/* Prints "out of memory: <call> requested <bytes> bytes" and exits 3. */
void mt_oom(const char *call, size_t bytes) __attribute__((noreturn));
void mt_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define CUDA_CHECK(x) do { cudaError_t e_ = (x); \
	if (e_ != cudaSuccess) mt_fail_cuda(e_, #x, __FILE__, __LINE__); } while (0)
#define CUDNN_CHECK(x) do { cudnnStatus_t s_ = (x); \
	if (s_ != CUDNN_STATUS_SUCCESS) mt_fail_cudnn(s_, #x, __FILE__, __LINE__); } while (0)
#define CUBLAS_CHECK(x) do { cublasStatus_t s_ = (x); \
	if (s_ != CUBLAS_STATUS_SUCCESS) mt_fail_cublas(s_, #x, __FILE__, __LINE__); } while (0)

/* ---- deterministic random numbers (splitmix64), so runs compare bit for bit */
uint64_t mt_mix(uint64_t x);                      /* splitmix64 finaliser */
typedef struct { uint64_t s; } mt_rng_t;
uint64_t mt_rng_next(mt_rng_t *r);
double mt_rng_uniform(mt_rng_t *r);               /* [0, 1) */
uint64_t mt_fnv1a(uint64_t h, const void *p, size_t n);
#define MT_FNV_INIT 0xcbf29ce484222325ull

/* ---- the layer graph */
typedef enum {
	MT_INPUT, MT_CONV, MT_RELU, MT_MAXPOOL, MT_AVGPOOL, MT_BN, MT_FC,
	MT_ADD, MT_CONCAT, MT_LOSS,
} mt_op_t;

/* One parameter tensor (weights, bias, bn scale/shift, bn running stats). */
typedef struct {
	size_t count;            /* floats */
	int fan_in;              /* He init: N(0, 2/fan_in); 0: constant init */
	float init;              /* constant init value when fan_in == 0 */
	bool trainable;          /* false: bn running statistics */
	float *w, *dw, *v;       /* device: value, gradient, momentum */
} mt_param_t;

typedef struct {
	mt_op_t op;
	char name[32];
	int *in, nin;            /* input node ids (earlier nodes) */
	int c, h, w;             /* output shape per sample (square maps: h == w) */
	int k, stride, pad;      /* conv / pool */
	int p0, np;              /* its parameters: params[p0 .. p0+np) */
	int buf;                 /* node owning the output storage (in-place relu/add alias) */
	int nconsumers;
	/* liveness (schedule positions, see exec.c) */
	int last_fwd;            /* last forward read of this node's output buffer owner (eval) */
	int last_train;          /* last read in a training iteration */
	/* runtime */
	void *y, *dy;            /* output and its gradient */
	bool dy_written;         /* gradient holds a value this iteration */
	void *bn_mean, *bn_invvar;
	cudnnTensorDescriptor_t ydesc, pdesc;   /* output; per-channel params (bias, bn) */
	cudnnFilterDescriptor_t wdesc;
	cudnnConvolutionDescriptor_t convdesc;
	cudnnPoolingDescriptor_t pooldesc;
} mt_node_t;

typedef struct {
	char name[64];
	int image, classes;
	mt_node_t *nodes;
	int n, cap;
	mt_param_t *params;
	int nparams, pcap;
} mt_net_t;

/* Builds network `name` for square images of `image` pixels and `classes`
 * classes.  Returns 0, or -1 with a one-line reason in `err` (unknown name,
 * image too small). */
int mt_net_build(mt_net_t *net, const char *name, int image, int classes,
		 char *err, size_t errlen);
void mt_net_free(mt_net_t *net);
/* Prints the layer table (one line per node) to stdout. */
void mt_net_print(const mt_net_t *net);
extern const char *const mt_net_names_help;

/* ---- allocation styles (alloc.c) */
typedef enum { MT_ALLOC_PER_TENSOR, MT_ALLOC_NETWORK, MT_ALLOC_CACHING } mt_alloc_style_t;

void mt_alloc_init(mt_alloc_style_t style);
/* Device memory for the framework's tensors.  Per-tensor and network:
 * one cudaMalloc per call; caching: a block of the caching allocator.
 * Never returns NULL for bytes > 0 (out of memory exits 3). */
void *mt_malloc(size_t bytes);
/* The same, NULL instead of exiting when memory is short. */
void *mt_try_malloc(size_t bytes);
void mt_free(void *p);
/* Returns cached free segments to the device (caching style only). */
void mt_alloc_empty_cache(void);
/* Bytes currently / at most obtained from cudaMalloc by minitrain. */
size_t mt_alloc_current(void);
/* Bytes in tensors minitrain holds now (caching: allocated blocks). */
size_t mt_alloc_live(void);
size_t mt_alloc_peak(void);

/* Pure caching allocator core, also unit-tested: a best-fit sub-allocator
 * over segments obtained from `seg_alloc` (PyTorch's block sizes). */
typedef struct mt_cache mt_cache_t;
typedef void *(*mt_seg_alloc_fn)(size_t bytes, void *ctx);   /* NULL: out of memory */
typedef void (*mt_seg_free_fn)(void *p, size_t bytes, void *ctx);
mt_cache_t *mt_cache_new(mt_seg_alloc_fn a, mt_seg_free_fn f, void *ctx);
void mt_cache_destroy(mt_cache_t *c);     /* frees every segment */
/* NULL when the segment allocator fails even after releasing free segments;
 * *seg_request then holds the size of the failing segment request. */
void *mt_cache_alloc(mt_cache_t *c, size_t bytes, size_t *seg_request);
void mt_cache_free(mt_cache_t *c, void *p);
void mt_cache_release(mt_cache_t *c);     /* frees segments that are wholly free */
size_t mt_cache_live(const mt_cache_t *c); /* bytes in allocated blocks */
size_t mt_cache_round(size_t bytes);      /* block size a request rounds to */
/* Blocks handed out at an address that held a tensor before, by how the
 * new tensor's size compares with the previous one's there. */
typedef struct { size_t larger, smaller, same; } mt_cache_reuse_t;
mt_cache_reuse_t mt_cache_reuse(const mt_cache_t *c);
/* The process-wide caching allocator's reuse counts (zero in the other
 * styles). */
mt_cache_reuse_t mt_alloc_reuse(void);
size_t mt_cache_segment_size(size_t rounded);

/* ---- run configuration */
typedef enum { MT_CONV_LEGACY, MT_CONV_GRAPH } mt_conv_api_t;
/* get: cudnnGet*Algorithm_v7; find: cudnnFind*Algorithm; find-ex:
 * cudnnFind*AlgorithmEx on scratch buffers of the layer's shape with the
 * largest workspace that can be allocated (PyTorch's benchmark mode) */
typedef enum { MT_ALGO_GET, MT_ALGO_FIND, MT_ALGO_FIND_EX } mt_algo_mode_t;
/* fully connected layers: cublasSgemm (+ cudnnAddTensor and
 * cudnnConvolutionBackwardBias for the bias), or cublasLtMatmul with the
 * bias and bias-gradient epilogues, as PyTorch's Linear */
typedef enum { MT_FC_GEMM, MT_FC_LT } mt_fc_api_t;

/* the SGD step: one fused kernel per parameter (mt_sgd_momentum), or
 * PyTorch's foreach form, _foreach_add_ over every parameter's tensor
 * lists (its optimizers' default without fused=True) */
typedef enum { MT_OPTIM_FUSED, MT_OPTIM_FOREACH } mt_optim_t;

typedef struct {
	const char *net;
	int batch, image, iters, classes;
	uint64_t seed;
	mt_alloc_style_t alloc;
	mt_conv_api_t conv_api;
	mt_algo_mode_t algo_mode;
	mt_fc_api_t fc_api;
	mt_optim_t optim;
	int change_iter, change_batch;   /* --batch-change K:N (K < 0: none) */
	int eval_every;                  /* 0: never */
	int threads;                     /* 2: backward on a second host thread */
	float lr, momentum, weight_decay;
	bool json, mem_report, print_net;
} mt_opts_t;

/* ---- convolutions (conv.c) */
typedef enum { MT_FWD, MT_BWD_DATA, MT_BWD_FILTER } mt_conv_kind_t;
void mt_conv_init(cudnnHandle_t h, mt_conv_api_t api, mt_algo_mode_t mode);
/* Workspace bytes conv `kind` of node `nd` (input node `in`) needs at batch
 * `batch` with the chosen algorithm/plan (chosen and cached on first use). */
size_t mt_conv_workspace(const mt_net_t *net, const mt_node_t *nd,
			 mt_conv_kind_t kind, int batch, float beta);
/* Largest workspace any algorithm the library offers would need (for the
 * memory report: vDNN's performance-optimal baseline). */
size_t mt_conv_workspace_max(const mt_net_t *net, const mt_node_t *nd,
			     mt_conv_kind_t kind, int batch);
/* Runs it: FWD y = conv(x, w); BWD_DATA dx = beta*dx + conv_bd(w, dy);
 * BWD_FILTER dw = conv_bf(x, dy). */
void mt_conv_run(const mt_net_t *net, const mt_node_t *nd, mt_conv_kind_t kind,
		 int batch, float beta, const void *a, const void *b, void *out,
		 void *ws, size_t ws_bytes);
void mt_conv_fini(void);

/* ---- training (exec.c) */
typedef struct {
	double weights, wgrads, momentum, fmaps, gmaps, workspace, workspace_max,
	       other;
} mt_mem_report_t;

int mt_train(mt_net_t *net, const mt_opts_t *o);

#endif
