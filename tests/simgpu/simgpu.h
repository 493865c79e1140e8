/* tests/simgpu/simgpu.h - the simulated GPU's shared core.
 *
 * libsimgpu.so holds the state every simulated library shares: the device
 * model, physical memory accounting, the VMM address map with real page
 * protection, streams and events on virtual clocks, the kernel registry and
 * the fault handler.  libcudart.so.13, libcuda.so.1, libcudnn.so.9 and
 * libcublas.so.13 (the simulated ones, with the real SONAMEs and symbol
 * versions) are thin layers over it.  None of them calls another one's
 * public CUDA symbols: they call these functions, so an LD_PRELOADed shim
 * sees only the application's calls, as with the real libraries.
 *
 * Environment (read once, bad values stop with one line naming the
 * variable and value): SIMGPU_MEM, SIMGPU_MODEL, SIMGPU_DRYRUN,
 * SIMGPU_REPORT.  See docs/simgpu.md.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIMGPU_API __attribute__((visibility("default")))

typedef struct {
	const char *name;        /* "titanx", "v100", "h100" */
	uint64_t mem_bytes;      /* physical capacity (SIMGPU_MEM overrides) */
	double flops;            /* FP32 FLOP/s */
	double mem_bw;           /* device memory bytes/s */
	double link_bw;          /* host<->device bytes/s, each direction */
	int copy_engines;        /* 1: H2D and D2H share one engine; 2: one each */
	double launch_s;         /* fixed cost of one kernel/op in seconds */
	int cc_major, cc_minor;  /* compute capability reported */
} simgpu_model_t;

SIMGPU_API void simgpu_init(void);                 /* idempotent, thread-safe */
SIMGPU_API const simgpu_model_t *simgpu_model(void);
SIMGPU_API bool simgpu_dryrun(void);

/* ---- faults: the op name printed by "simgpu: illegal address <addr> in <op>" */
SIMGPU_API void simgpu_op_begin(const char *op);  /* thread-local, nests */
SIMGPU_API void simgpu_op_end(void);
/* Aborts with the illegal-address line when any byte of [p, p+n) is not
 * mapped device memory or host memory the simulator knows (pinned or
 * plain malloc'd host memory is allowed only where `host_ok`).  Used in
 * dry-run mode, where memory is never touched, so faults are still caught. */
SIMGPU_API void simgpu_check(const void *p, size_t n, bool host_ok);
/* True when [p, p+n) lies entirely in mapped simulated device memory. */
SIMGPU_API bool simgpu_is_device(const void *p, size_t n);

/* ---- streams and events.  A stream handle is the application's
 * cudaStream_t (NULL = legacy default stream); engines are the compute
 * engine and the copy engines. */
typedef enum { SIMGPU_ENGINE_COMPUTE, SIMGPU_ENGINE_H2D, SIMGPU_ENGINE_D2H, SIMGPU_ENGINE_D2D } simgpu_engine_t;
/* Queues `seconds` of work on `stream` using `engine`; the work starts when
 * the stream, the engine and the host clock all allow, and the stream's
 * clock moves to its end.  Returns the virtual completion time. */
SIMGPU_API double simgpu_submit(void *stream, simgpu_engine_t engine, double seconds);
/* Duration of a compute op of `flops` FLOPs touching `bytes` bytes:
 * launch cost + max(flops / flops_rate, bytes / mem_bw). */
SIMGPU_API double simgpu_op_seconds(double flops, double bytes);
/* Duration of a host<->device copy of `bytes`. */
SIMGPU_API double simgpu_copy_seconds(size_t bytes);

/* ---- kernels launched with cudaLaunchKernel / cuLaunchKernel.  The
 * simulator cannot run PTX; it runs host implementations registered by
 * kernel name (see kernels.c).  `args` is CUDA's array of pointers to
 * argument values. */
typedef struct {
	const char *name;                 /* extern "C" kernel name */
	int nparams;
	const uint16_t *param_size;       /* bytes of each parameter */
	void (*run)(void **args, unsigned grid_threads);
	/* cost model: flops and bytes for the given args */
	void (*cost)(void **args, double *flops, double *bytes);
} simgpu_kernel_t;
SIMGPU_API const simgpu_kernel_t *simgpu_kernel_find(const char *name);
/* Non-NULL when `func` is a handle the simulator handed out. */
SIMGPU_API const simgpu_kernel_t *simgpu_kernel_from_handle(const void *func);

/* ---- report (SIMGPU_REPORT=file at exit): virtual time, peak device use,
 * bytes moved per direction. */
SIMGPU_API void simgpu_count_copy(simgpu_engine_t engine, size_t bytes);

#endif
