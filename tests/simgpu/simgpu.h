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
 * SIMGPU_REPORT, SIMGPU_RACECHECK, SIMGPU_POISON.  See docs/simgpu.md.
 *
 * How a library op is written (cuDNN, cuBLAS, a kernel): inside
 * simgpu_op_begin(name) it declares every range it reads or writes with
 * simgpu_access, computes, and queues its time with simgpu_submit on its
 * stream.  simgpu_submit is also where the race checker judges the
 * declared accesses against CUDA's ordering (core_race.h).  An op that can
 * be captured into a CUDA graph first offers itself to simgpu_capture.
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

/* ---- the race checker: what the op being built touches.  Modes are
 * SIMGPU_ACC_R, SIMGPU_ACC_W and SIMGPU_ACC_RW (read-modify-write). */
enum { SIMGPU_ACC_R = 1u, SIMGPU_ACC_W = 2u, SIMGPU_ACC_RW = 3u };
/* Declares an access of [p, p+n) by the op this thread is building; the
 * next simgpu_submit on this thread checks and records it (device memory
 * by physical memory, pinned host memory by address; other host memory is
 * not tracked).  Cheap; thread-safe (thread-local list). */
SIMGPU_API void simgpu_access(const void *p, size_t n, unsigned mode);
/* Drops the accesses declared since the last submit (an op that failed
 * before it ran). */
SIMGPU_API void simgpu_access_discard(void);

/* ---- streams and events.  A stream handle is the application's
 * cudaStream_t (NULL = legacy default stream); engines are the compute
 * engine and the copy engines. */
typedef enum { SIMGPU_ENGINE_COMPUTE, SIMGPU_ENGINE_H2D, SIMGPU_ENGINE_D2H, SIMGPU_ENGINE_D2D } simgpu_engine_t;
/* Queues `seconds` of work on `stream` using `engine`; the work starts when
 * the stream, the engine and the host clock all allow, and the stream's
 * clock moves to its end.  Returns the virtual completion time. */
SIMGPU_API double simgpu_submit(void *stream, simgpu_engine_t engine, double seconds);
/* Stream capture (CUDA graphs).  A library op on a capturing stream must
 * not run: simgpu_capture records it instead, with a copy of `args`
 * (`size` bytes, by value: pointers in it must stay valid until the graph
 * is destroyed), to be replayed by `fn(args, launch_stream)` at each
 * cudaGraphLaunch.  Returns 0 when `stream` is not capturing (run the op
 * now), 1 when the op was recorded, -1 when it cannot be (the capture is
 * invalidated; the op must fail without running). */
typedef void (*simgpu_replay_fn)(const void *args, void *stream);
SIMGPU_API int simgpu_capture(void *stream, const char *op,
			      simgpu_replay_fn fn, const void *args,
			      size_t size);
/* For an op the simulator cannot capture: when `stream` is capturing,
 * invalidates the capture and returns true (the op must fail). */
SIMGPU_API bool simgpu_capture_refuse(void *stream, const char *op);
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
