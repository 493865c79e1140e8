/* interpose/hooks.h - symbol resolution and the re-entry guard shared by
 * every hook file and by the runtime.
 *
 * Real functions are found lazily: first in the library that defines them
 * (dlopen(soname, RTLD_NOLOAD), so libraries a framework loaded RTLD_LOCAL
 * are found), then dlsym(RTLD_NEXT).  Names are matched exactly.  A symbol
 * that cannot be found yields NULL, and the hook returns a defined error
 * instead of calling through it.
 */
#ifndef VMEM_INTERPOSE_HOOKS_H
#define VMEM_INTERPOSE_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "interpose/trace.h"
#include "policy/event.h"

/* Ensures vmem is initialised (pthread_once); safe from any hook. */
void vmem_init(void);

/* The real (next) definition of `name`, cached; NULL when no loaded or
 * loadable library defines it.  Never returns vmem's own hook. */
void *hook_real(const char *name);

/* Thread-local re-entry guard: true while this thread is inside a hook, so
 * nested calls go straight to the real function. */
bool hook_guard_enter(void);   /* false when already inside: caller passes through */
void hook_guard_leave(void);

/* One call in flight through a hook.  A hook fills it, prepares (the
 * runtime makes every ref resident and locks it), calls the real function,
 * then finishes (unlock, trace record, stats).  Lives on the hook's stack:
 * no allocation on the hot path.
 *
 *	hook_call_t c;
 *	hook_call_init(&c, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", stream);
 *	hook_call_ref(&c, x, xbytes, VMEM_ACCESS_R, "x");
 *	...
 *	if (hook_call_prepare(&c) != cudaSuccess) { finish; return the API's OOM status; }
 *	st = real(...);
 *	hook_call_finish(&c);
 */
typedef struct {
	vmem_op_kind_t kind;
	const char *api;
	const void *stream;
	int nrefs, cap;
	bool refs_lost;           /* a ref could not be held: the call is refused */
	bool unseen;              /* may write vmem memory it does not name
				     (hook_call_finish tells the pool) */
	bool captured;            /* recorded into a stream capture: runs at
				     cudaGraphLaunch, not now */
	bool policy_seen;         /* the policy saw the call (prepare may run
				     more than once: the conv hooks retry) */
	bool no_host_stated;      /* the hook has other ways to run the call
				     (another algorithm, slices): its stated
				     pages are never mapped from the host
				     (runtime_prepare's last_resort) */
	const char *kernel;       /* a launch's kernel name when known (error lines) */
	vmem_ref_t *refs;         /* refs_inline, or a heap array past VMEM_INLINE_REFS */
	trace_ref_t *resolved;    /* likewise */
	vmem_ref_t refs_inline[VMEM_INLINE_REFS];
	trace_ref_t resolved_inline[VMEM_INLINE_REFS];
	uint64_t seq;
	uint64_t t_start;
	vmem_op_info_t info;      /* the typed record (policy/event.h); zeroed by init */
	size_t args_len;
	char args[320];   /* JSON object body without braces; "" when none */
} hook_call_t;

void hook_call_init(hook_call_t *c, vmem_op_kind_t kind, const char *api, const void *stream);
/* Adds a touched range; NULL pointers are ignored.  VMEM_ACCESS_WHOLE is
 * dropped when bytes is 0 or with VMEM_ACCESS_UPTO (an unknown extent, or
 * an upper bound, is never a whole overwrite).
 * Any number of refs:
 * past VMEM_INLINE_REFS they move to the heap (freed by finish).  When
 * that allocation fails the call is marked and hook_call_prepare refuses
 * it, since running it would touch a range vmem did not make resident. */
void hook_call_ref(hook_call_t *c, const void *ptr, size_t bytes, uint8_t access, const char *role);
/* Appends a scratch range of `bytes` (0: size unknown) handed to the call
 * that it does not use (vmem_ref_empty, interpose/pool_ref.h): nothing of
 * it is made resident; the policy sees `bytes` written whole (with 0, no
 * range at all). */
void hook_call_ref_empty(hook_call_t *c, const void *ptr, size_t bytes, const char *role);
/* Appends `"key":value` pairs (printf-style body) to the args object. */
void hook_call_args(hook_call_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cudaSuccess, or cudaErrorMemoryAllocation when the call's refs cannot be
 * made resident together within the budget (or could not all be held). */
cudaError_t hook_call_prepare(hook_call_t *c);
void hook_call_finish(hook_call_t *c);
/* True while this thread's call in flight is prepared (a successful
 * hook_call_prepare not yet finished): preparing it again would lose the
 * first acquire's locks. */
bool hook_call_is_prepared(void);
/* Forgets a call that was never prepared and will not run as such (it ran
 * as other calls: dnn_split.c): no trace record, no stats. */
void hook_call_drop(hook_call_t *c);

/* Makes cudaErrorMemoryAllocation the calling thread's CUDA "last error",
 * as CUDA itself does for any failed runtime call.  A cudart hook that
 * does not call the real function because hook_call_prepare failed must
 * call it: code compiled from <<<...>>> (every ATen kernel) discards
 * cudaLaunchKernel's return value and learns of a failed launch only from
 * cudaGetLastError (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK); without it
 * the kernel would be skipped silently.  Done with one real cudaMalloc of
 * an impossible size, which fails at once with that error.  Call with the
 * re-entry guard held (inside hook_begin/hook_end).  Thread-safe. */
void hook_set_last_error_oom(void);

/* ====================================================================
 * Additions (interpose/hooks.c): how a hook family is written.
 *
 * 1. One X-macro list per family file names every real function the file
 *    calls: X(name, return type, (parameter list), (argument list)).
 *
 *	#define CUDART_REALS(X)                                            \
 *		X(cudaMalloc, cudaError_t, (void **p, size_t n), (p, n))  \
 *		X(cudaFree, cudaError_t, (void *p), (p))
 *	#define CUDART_REAL(name, ret, params, args) \
 *		HOOK_DEFINE_REAL(HOOK_LIB_CUDART, name, ret, params, args)
 *	CUDART_REALS(CUDART_REAL)
 *
 *    HOOK_DEFINE_REAL makes, per name, the typed pointer type
 *    real_<name>_t, a resolver slot and `real_<name>()`, which returns the
 *    real function (resolved lazily, exact name, from the family's
 *    library, cached in an atomic) or NULL when no library defines it.
 *    A name that cuda.h / cublas_v2.h turns into a versioned one by macro
 *    (cuMemAlloc -> cuMemAlloc_v2, cublasSgemm -> cublasSgemm_v2) must be
 *    listed under its real exported name.
 *
 * 2. Each hook is thin (STYLE.md "Thin hooks"):
 *
 *	cudaError_t cudaMemset(void *p, int v, size_t n)
 *	{
 *		real_cudaMemset_t real = real_cudaMemset();
 *		hook_call_t c;
 *		cudaError_t st;
 *
 *		if (!real)
 *			return hook_missing("cudaMemset", cudaErrorSymbolNotFound);
 *		if (!hook_begin())
 *			return real(p, v, n);        // re-entrant or vmem disabled
 *		hook_call_init(&c, VMEM_OP_MEMSET, "cudaMemset", NULL);
 *		hook_call_ref(&c, p, n, VMEM_ACCESS_W, "dst");
 *		st = hook_call_prepare(&c);
 *		if (st == cudaSuccess)
 *			st = real(p, v, n);
 *		hook_call_finish(&c);
 *		hook_end();
 *		return st;
 *	}
 *
 *    When hook_call_prepare fails (the call's tensors do not fit the
 *    budget together) the hook returns the API's own out-of-memory status
 *    (CUDNN_STATUS_ALLOC_FAILED, CUBLAS_STATUS_ALLOC_FAILED, ...) after
 *    hook_call_finish.
 *
 * 3. Add the exported names to interpose/vmem.map (the file says how), and
 *    the .c file to `vmem_hook_sources` in interpose/meson.build.
 * ==================================================================== */

/* Libraries a hooked function can come from.  Each is looked up by
 * soname with dlopen(RTLD_NOLOAD) first, so a library the application
 * loaded RTLD_LOCAL (a Python extension) is found. */
typedef enum {
	HOOK_LIB_CUDART,    /* libcudart.so.13 (loaded by vmem when needed) */
	HOOK_LIB_CUDA,      /* libcuda.so.1 (loaded by vmem when needed) */
	HOOK_LIB_CUDNN,     /* libcudnn.so.9, then libcudnn_graph/_ops/_cnn/_adv.so.9 */
	HOOK_LIB_CUBLAS,    /* libcublas.so.13 */
	HOOK_LIB_CUBLASLT,  /* libcublasLt.so.13 */
	HOOK_LIB_COUNT
} hook_lib_t;

/* A resolver slot: one per real function, static in the family file.
 * `fn` is published with release order once found and never changes
 * afterwards; `logged` makes the "not found" message appear once. */
typedef struct {
	const char *name;
	hook_lib_t lib;
	void *fn;     /* accessed with __atomic builtins only */
	int logged;   /* accessed with __atomic builtins only */
} hook_sym_t;

/* The real function of slot `s`, or NULL when none of the family's
 * libraries (nor RTLD_NEXT) defines it; a NULL result is not cached (the
 * library may be loaded later).  Never returns a symbol of libvmem.so
 * itself.  Thread-safe, lock-free after the first success. */
void *hook_resolve(hook_sym_t *s);

#define HOOK_DEFINE_REAL(lib_, name, ret, params, args)                       \
	typedef ret (*real_##name##_t) params;                                \
	static hook_sym_t hook_sym_##name = { #name, lib_, NULL, 0 };         \
	static inline real_##name##_t real_##name(void)                       \
	{                                                                     \
		void *f_ = __atomic_load_n(&hook_sym_##name.fn,               \
					   __ATOMIC_ACQUIRE);                 \
		if (__builtin_expect(f_ != NULL, 1))                          \
			return (real_##name##_t)f_;                           \
		return (real_##name##_t)hook_resolve(&hook_sym_##name);      \
	}

/* Logs once per name "vmem: error: <name>: not found in any loaded CUDA
 * library; returning <err>" and returns `err` (an int status code of the
 * hook's API) so a hook can `return hook_missing("cudnnX", ...)`. */
int hook_missing(const char *name, int err);

/* Entry of every hook: true when the hook should do vmem's work (sets the
 * re-entry guard and makes sure vmem is initialised); false when this
 * thread is already inside vmem or vmem is disabled (bad configuration,
 * VMEM_DISABLE=1): the hook then only calls the real function.  A true
 * return must be paired with hook_end(). */
bool hook_begin(void);
void hook_end(void);

/* True when vmem is initialised and enabled (configuration valid). */
bool vmem_enabled(void);

/* hook_real() for the runtime's own CUDA calls: like hook_real, and when
 * the library is libcudart.so.13 or libcuda.so.1 and is not loaded yet,
 * loads it (RTLD_LAZY | RTLD_LOCAL). */
void *hook_real_load(const char *name);

/* Monotonic clock in ns (CLOCK_MONOTONIC), the base of every timing. */
uint64_t hook_clock_ns(void);
/* hook_call_* time each call only when on (set at start-up when tracing
 * or VMEM_STATS is on); otherwise t_start and durations are 0. */
void hook_set_timing(bool on);

/* Kernel launches (interpose/hook_launch.c), shared by the runtime and
 * driver launch hooks: adds to `c` one read-write ref per vmem pointer
 * found in the parameters (see interpose/scan.h) and the "kernel" arg
 * (name, or the function's address).  `args` is CUDA's array of pointers
 * to parameter values; for driver launches `extra` may instead carry a
 * packed buffer (CU_LAUNCH_PARAM_BUFFER_POINTER).  `from` says what kind
 * of function `func` is, which selects the layout query. */
typedef enum {
	HOOK_LAUNCH_RUNTIME,   /* cudaLaunchKernel*: a host stub or a kernel handle */
	HOOK_LAUNCH_DRIVER,    /* cuLaunchKernel*: a CUfunction (or a CUkernel cast to one) */
	HOOK_LAUNCH_KERNEL,    /* __cudaLaunchKernel: always a kernel handle */
} hook_launch_from_t;
/* `blocks`: the launch's block count when its grid is 1-D (gy = gz = 1),
 * else 0; a known kernel family may use it (interpose/kernel_bounds.h). */
void hook_launch_refs(hook_call_t *c, const void *func, void **args, void **extra,
		      hook_launch_from_t from, uint32_t blocks);
/* hook_launch_refs' `blocks` for a grid gx x gy x gz. */
static inline uint32_t hook_grid_blocks(unsigned gx, unsigned gy, unsigned gz)
{
	return gy == 1 && gz == 1 ? gx : 0;
}

/* Start-up and exit of the whole shim (interpose/init.c).  vmem_init runs
 * vmem_startup exactly once (pthread_once) with the re-entry guard set, so
 * every CUDA call made while starting goes to the real function. */
void vmem_startup(void);
void vmem_shutdown(void);
/* Set by vmem_startup: configuration valid and VMEM_DISABLE unset. */
void vmem_set_enabled(bool on);

#endif
