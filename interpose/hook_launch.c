/* interpose/hook_launch.c - kernel launches through the CUDA runtime
 * (cudaLaunchKernel, cudaLaunchKernelExC, their per-thread-stream
 * variants, and __cudaLaunchKernel: what nvcc 13's <<<...>>> stubs call,
 * hence every ATen kernel of a CUDA 13 PyTorch) and the parameter
 * scanning shared with the driver launches.
 *
 * The parameter layout comes from cudaFuncGetParamInfo for host stubs,
 * cuKernelGetParamInfo for kernel handles (cudaKernel_t / CUkernel: what
 * __cudaLaunchKernel takes, and what cudaLaunchKernel may be given in
 * place of a stub) and cuFuncGetParamInfo for CUfunction, asked once per
 * function (interpose/scan.c caches it).  On a real driver
 * cudaFuncGetParamInfo answers a kernel handle with cudaErrorInvalidValue,
 * the same answer as "past the last parameter", so handles are recognised
 * by having been seen handed out (the getters below record them), and a
 * "no parameters" answer for anything else is believed only when the
 * driver confirms it for the stub's CUfunction.
 *
 * Runtime queries leave CUDA's per-thread "last error" set when they step
 * past the last parameter; frameworks check cudaGetLastError after every
 * launch (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK), so the query is made
 * only when no error of the application is pending, and the error it
 * leaves is cleared.  See docs/launch-paths.md for what is and is not
 * seen.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
#include "interpose/kernel_bounds.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/scan.h"
#include "interpose/stats.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define LAUNCH_REALS(X)                                                               \
	X(cudaLaunchKernel, cudaError_t,                                              \
	  (const void *f, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s),       \
	  (f, g, b, a, sh, s))                                                        \
	X(cudaLaunchKernel_ptsz, cudaError_t,                                         \
	  (const void *f, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s),       \
	  (f, g, b, a, sh, s))                                                        \
	X(cudaLaunchKernelExC, cudaError_t,                                           \
	  (const cudaLaunchConfig_t *cfg, const void *f, void **a), (cfg, f, a))      \
	X(cudaLaunchKernelExC_ptsz, cudaError_t,                                      \
	  (const cudaLaunchConfig_t *cfg, const void *f, void **a), (cfg, f, a))      \
	X(cudaFuncGetParamInfo, cudaError_t,                                          \
	  (const void *f, size_t i, size_t *off, size_t *size), (f, i, off, size))    \
	X(cudaFuncGetName, cudaError_t, (const char **name, const void *f), (name, f)) \
	X(cudaPeekAtLastError, cudaError_t, (void), ())                               \
	X(cudaGetLastError, cudaError_t, (void), ())                                  \
	X(cudaGetFuncBySymbol, cudaError_t, (cudaFunction_t *cf, const void *f), (cf, f)) \
	X(__cudaLaunchKernel, cudaError_t,                                            \
	  (cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s),      \
	  (k, g, b, a, sh, s))                                                        \
	X(__cudaLaunchKernel_ptsz, cudaError_t,                                       \
	  (cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s),      \
	  (k, g, b, a, sh, s))                                                        \
	X(cudaLibraryGetKernel, cudaError_t,                                          \
	  (cudaKernel_t *k, cudaLibrary_t lib, const char *name), (k, lib, name))     \
	X(cudaLibraryEnumerateKernels, cudaError_t,                                   \
	  (cudaKernel_t *k, unsigned int n, cudaLibrary_t lib), (k, n, lib))          \
	X(cudaGetKernel, cudaError_t, (cudaKernel_t *k, const void *f), (k, f))

#define LAUNCH_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDART, name, ret, params, args)
LAUNCH_REALS(LAUNCH_REAL)

#define DRV_REALS(X)                                                                   \
	X(cuFuncGetParamInfo, CUresult, (CUfunction f, size_t i, size_t *off, size_t *size), \
	  (f, i, off, size))                                                           \
	X(cuFuncGetName, CUresult, (const char **name, CUfunction f), (name, f))          \
	X(cuKernelGetParamInfo, CUresult, (CUkernel k, size_t i, size_t *off, size_t *size), \
	  (k, i, off, size))                                                           \
	X(cuKernelGetName, CUresult, (const char **name, CUkernel k), (name, k))

#define DRV_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDA, name, ret, params, args)
DRV_REALS(DRV_REAL)

/* What the foreach launches say of PyTorch's kChunkSize (kernel_bounds.h). */
static kb_state_t g_kb_state;

/* Says once when the launches confirmed or refuted the chunk size. */
static void kb_state_note(int was)
{
	static atomic_int said;
	int now = atomic_load(&g_kb_state.chunk), none = 0;

	if (now == KB_CHUNK_CONFIRMED && atomic_compare_exchange_strong(&said, &none, now))
		vmem_info("foreach launches confirm PyTorch's chunk of %d elements: their arguments "
			  "are bounded by the chunks each launch names", KB_CHUNK);
	else if (now == KB_CHUNK_REFUTED && atomic_exchange(&said, now) != now)
		vmem_log(was == KB_CHUNK_CONFIRMED ? VMEM_LOG_ERROR : VMEM_LOG_INFO,
			 "a foreach launch names chunks that do not fit %d elements a chunk%s: "
			 "its arguments are bounded by whole tensors from now on (docs/launch-paths.md)",
			 KB_CHUNK, was == KB_CHUNK_CONFIRMED ?
			 " after earlier launches confirmed it (launches bounded by chunks before "
			 "may have touched more than vmem made resident)" : "");
}

/* cudaFuncGetParamInfo said "invalid value" for parameter 0: a stub of a
 * kernel without parameters, or a kernel handle vmem did not see handed
 * out.  1 (no parameters) only when the stub's CUfunction says so too;
 * -1 (unknown) otherwise. */
static int rt_confirm_no_params(const void *func)
{
	real_cudaGetFuncBySymbol_t by_symbol = real_cudaGetFuncBySymbol();
	real_cuFuncGetParamInfo_t q = real_cuFuncGetParamInfo();
	cudaFunction_t cf = NULL;
	size_t off, size;

	if (!by_symbol || !q || by_symbol(&cf, func) != cudaSuccess || !cf)
		return -1;
	return q((CUfunction)cf, 0, &off, &size) == CUDA_ERROR_INVALID_VALUE ? 1 : -1;
}

static int rt_query(const void *func, int i, size_t *off, size_t *size)
{
	real_cudaFuncGetParamInfo_t q = real_cudaFuncGetParamInfo();
	cudaError_t st;

	if (!q)
		return -1;
	st = q(func, (size_t)i, off, size);
	if (st == cudaSuccess)
		return 0;
	/* Past the last parameter. */
	if (st == cudaErrorInvalidValue && i > 0)
		return 1;
	if (st == cudaErrorInvalidValue && i == 0)
		return rt_confirm_no_params(func);
	return -1;
}

static int rt_name(const void *func, char *buf, size_t len)
{
	real_cudaFuncGetName_t q = real_cudaFuncGetName();
	const char *name = NULL;

	if (!q || q(&name, func) != cudaSuccess || !name)
		return -1;
	snprintf(buf, len, "%s", name);
	return 0;
}

static int drv_query(const void *func, int i, size_t *off, size_t *size)
{
	real_cuFuncGetParamInfo_t q = real_cuFuncGetParamInfo();
	CUresult st;

	if (!q)
		return -1;
	st = q((CUfunction)func, (size_t)i, off, size);
	if (st == CUDA_SUCCESS)
		return 0;
	if (st == CUDA_ERROR_INVALID_VALUE)
		return 1;
	return -1;
}

static int drv_name(const void *func, char *buf, size_t len)
{
	real_cuFuncGetName_t q = real_cuFuncGetName();
	const char *name = NULL;

	if (!q || q(&name, (CUfunction)func) != CUDA_SUCCESS || !name)
		return -1;
	snprintf(buf, len, "%s", name);
	return 0;
}

static int kern_query(const void *func, int i, size_t *off, size_t *size)
{
	real_cuKernelGetParamInfo_t q = real_cuKernelGetParamInfo();
	CUresult st;

	if (!q)
		return -1;
	st = q((CUkernel)func, (size_t)i, off, size);
	if (st == CUDA_SUCCESS)
		return 0;
	if (st == CUDA_ERROR_INVALID_VALUE)
		return 1;
	return -1;
}

static int kern_name(const void *func, char *buf, size_t len)
{
	real_cuKernelGetName_t q = real_cuKernelGetName();
	const char *name = NULL;

	if (!q || q(&name, (CUkernel)func) != CUDA_SUCCESS || !name)
		return -1;
	snprintf(buf, len, "%s", name);
	return 0;
}

static const scan_layout_t *layout_of(const void *func, hook_launch_from_t from,
				      scan_layout_t *tmpl, scan_param_t *tmp)
{
	const scan_layout_t *l = scan_layout_find(func);
	real_cudaPeekAtLastError_t peek;
	real_cudaGetLastError_t clear;

	if (l)
		return l;
	/* Driver queries leave no runtime error behind. */
	if (from == HOOK_LAUNCH_KERNEL || scan_handle_known(func))
		return scan_layout(func, kern_query, kern_name, tmpl, tmp);
	if (from == HOOK_LAUNCH_DRIVER)
		return scan_layout(func, drv_query, drv_name, tmpl, tmp);
	peek = real_cudaPeekAtLastError();
	clear = real_cudaGetLastError();
	if (peek && peek() != cudaSuccess)
		return NULL;   /* the application's error must survive: ask later */
	l = scan_layout(func, rt_query, rt_name, tmpl, tmp);
	if (clear)
		clear();
	return l;
}

static bool owns(uintptr_t p)
{
	return runtime_owns(p);
}

void hook_launch_refs(hook_call_t *c, const void *func, void **args, void **extra,
		      hook_launch_from_t from, uint32_t blocks)
{
	scan_param_t tmp[SCAN_MAX_PARAMS];
	scan_layout_t tmpl;
	const scan_layout_t *l = layout_of(func, from, &tmpl, tmp);
	vmem_ref_t inline_refs[64], *refs = inline_refs;
	int n = 0, missed = 0, max = 64;

	c->kernel = l ? l->name : NULL;
	if (l && l->name)
		hook_call_args(c, "\"kernel\":\"%s\"", l->name);
	else
		hook_call_args(c, "\"kernel\":\"0x%" PRIxPTR "\"", (uintptr_t)func);
	/* Scan into the stack; a launch with more vmem pointers (a foreach
	 * kernel's tensor lists) is scanned again into a heap array that fits
	 * them all: every pointer must be made resident, none dropped. */
	for (int pass = 0; pass < 2; pass++) {
		if (args && l && l->nparams >= 0) {
			n = scan_args(args, l->params, l->nparams, owns, refs, max, &missed);
		} else if (!args && extra) {
			const void *buf = NULL;
			size_t size = 0;

			for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2) {
				if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
					buf = extra[i + 1];
				else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
					size = *(const size_t *)extra[i + 1];
			}
			n = scan_buffer(buf, size, owns, refs, max, &missed);
		} else if (args) {
			/* Unknown layout, or not asked because an error of the
			 * application is pending: the kernel may write vmem
			 * memory that is neither made resident nor marked. */
			stats_add(STATS_UNKNOWN_PARAMS, 1);
			c->unseen = true;
			vmem_warn("kernel %p: parameter layout unknown; its pointer arguments are not seen (see docs/launch-paths.md)",
				  func);
		}
		if (!missed || pass == 1)
			break;
		max = n + missed;
		refs = malloc((size_t)max * sizeof(*refs));
		if (!refs) {
			/* Cannot list them: mark the call so that it is refused. */
			refs = inline_refs;
			c->refs_lost = true;
			break;
		}
	}
	/* A known family states its arguments' extents (kernel_bounds.h);
	 * the rest stay unknown (0): the rest of their allocation. */
	if (args && l && l->bound.family) {
		int dropped = 0, chunked = 0, was = atomic_load(&g_kb_state.chunk);
		int b = kb_apply(l->bound, args, l->params, l->nparams, blocks, &g_kb_state, refs, &n,
				 &dropped, &chunked);

		if (b)
			stats_add(STATS_ARGS_BOUNDED, (uint64_t)b);
		if (dropped)
			stats_add(STATS_ARGS_UNTOUCHED, (uint64_t)dropped);
		if (chunked)
			stats_add(STATS_ARGS_CHUNKED, (uint64_t)chunked);
		if (atomic_load(&g_kb_state.chunk) != was)
			kb_state_note(was);
	}
	for (int i = 0; i < n; i++)
		hook_call_ref(c, (const void *)refs[i].ptr, refs[i].bytes, refs[i].access,
			      refs[i].role);
	if (missed && c->refs_lost)
		stats_add(STATS_REFS_DROPPED, (uint64_t)missed);
	if (refs != inline_refs)
		free(refs);
}

static cudaError_t launch(real_cudaLaunchKernel_t real, const char *api, const void *f, dim3 g,
			  dim3 b, void **a, size_t sh, cudaStream_t s)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_LAUNCH, api, s);
	hook_launch_refs(&c, f, a, NULL, HOOK_LAUNCH_RUNTIME, hook_grid_blocks(g.x, g.y, g.z));
	hook_call_args(&c, "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%zu",
		       g.x, g.y, g.z, b.x, b.y, b.z, sh);
	st = hook_call_prepare(&c);
	if (st == cudaSuccess)
		st = real(f, g, b, a, sh, s);
	else
		hook_set_last_error_oom();   /* <<<>>> launches read only the last error */
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sh,
					 cudaStream_t s)
{
	real_cudaLaunchKernel_t real = real_cudaLaunchKernel();

	if (!real)
		return (cudaError_t)hook_missing("cudaLaunchKernel", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(f, g, b, a, sh, s);
	return launch(real, "cudaLaunchKernel", f, g, b, a, sh, s);
}

HOOK_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sh,
					      cudaStream_t s)
{
	real_cudaLaunchKernel_ptsz_t real = real_cudaLaunchKernel_ptsz();

	if (!real)
		return (cudaError_t)hook_missing("cudaLaunchKernel_ptsz", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(f, g, b, a, sh, s);
	return launch(real, "cudaLaunchKernel_ptsz", f, g, b, a, sh, s);
}

static cudaError_t launch_ex(real_cudaLaunchKernelExC_t real, const char *api,
			     const cudaLaunchConfig_t *cfg, const void *f, void **a)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_LAUNCH, api, cfg ? cfg->stream : NULL);
	hook_launch_refs(&c, f, a, NULL, HOOK_LAUNCH_RUNTIME,
			 cfg ? hook_grid_blocks(cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z) : 0);
	if (cfg)
		hook_call_args(&c, "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%zu",
			       cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z, cfg->blockDim.x,
			       cfg->blockDim.y, cfg->blockDim.z, cfg->dynamicSmemBytes);
	st = hook_call_prepare(&c);
	if (st == cudaSuccess)
		st = real(cfg, f, a);
	else
		hook_set_last_error_oom();
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *f, void **a)
{
	real_cudaLaunchKernelExC_t real = real_cudaLaunchKernelExC();

	if (!real)
		return (cudaError_t)hook_missing("cudaLaunchKernelExC", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(cfg, f, a);
	return launch_ex(real, "cudaLaunchKernelExC", cfg, f, a);
}

HOOK_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *cfg, const void *f,
						 void **a)
{
	real_cudaLaunchKernelExC_ptsz_t real = real_cudaLaunchKernelExC_ptsz();

	if (!real)
		return (cudaError_t)hook_missing("cudaLaunchKernelExC_ptsz", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(cfg, f, a);
	return launch_ex(real, "cudaLaunchKernelExC_ptsz", cfg, f, a);
}

/* ---- what nvcc 13's launch stubs call: a kernel handle from
 * __cudaGetKernel, never a stub pointer ---- */

static cudaError_t launch_handle(real___cudaLaunchKernel_t real, const char *api, cudaKernel_t k,
				 dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s)
{
	hook_call_t c;
	cudaError_t st;

	hook_call_init(&c, VMEM_OP_LAUNCH, api, s);
	hook_launch_refs(&c, (const void *)k, a, NULL, HOOK_LAUNCH_KERNEL,
			 hook_grid_blocks(g.x, g.y, g.z));
	hook_call_args(&c, "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%zu",
		       g.x, g.y, g.z, b.x, b.y, b.z, sh);
	st = hook_call_prepare(&c);
	if (st == cudaSuccess)
		st = real(k, g, b, a, sh, s);
	else
		hook_set_last_error_oom();
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sh,
					   cudaStream_t s)
{
	real___cudaLaunchKernel_t real = real___cudaLaunchKernel();

	if (!real)
		return (cudaError_t)hook_missing("__cudaLaunchKernel", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(k, g, b, a, sh, s);
	return launch_handle(real, "__cudaLaunchKernel", k, g, b, a, sh, s);
}

HOOK_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **a,
						size_t sh, cudaStream_t s)
{
	real___cudaLaunchKernel_ptsz_t real = real___cudaLaunchKernel_ptsz();

	if (!real)
		return (cudaError_t)hook_missing("__cudaLaunchKernel_ptsz", cudaErrorSymbolNotFound);
	if (!hook_begin())
		return real(k, g, b, a, sh, s);
	return launch_handle(real, "__cudaLaunchKernel_ptsz", k, g, b, a, sh, s);
}

/* ---- where kernel handles come from: recorded so that a launch of one
 * through cudaLaunchKernel is scanned with the kernel's layout.  Recorded
 * even while vmem is disabled (it costs one table insert). ---- */

HOOK_EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t lib, const char *name)
{
	real_cudaLibraryGetKernel_t real = real_cudaLibraryGetKernel();
	cudaError_t st;

	if (!real)
		return (cudaError_t)hook_missing("cudaLibraryGetKernel", cudaErrorSymbolNotFound);
	st = real(k, lib, name);
	if (st == cudaSuccess && k)
		scan_handle_add(*k);
	return st;
}

HOOK_EXPORT cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *k, unsigned int n,
						    cudaLibrary_t lib)
{
	real_cudaLibraryEnumerateKernels_t real = real_cudaLibraryEnumerateKernels();
	cudaError_t st;

	if (!real)
		return (cudaError_t)hook_missing("cudaLibraryEnumerateKernels", cudaErrorSymbolNotFound);
	st = real(k, n, lib);
	for (unsigned int i = 0; st == cudaSuccess && k && i < n; i++)
		scan_handle_add(k[i]);
	return st;
}

HOOK_EXPORT cudaError_t cudaGetKernel(cudaKernel_t *k, const void *f)
{
	real_cudaGetKernel_t real = real_cudaGetKernel();
	cudaError_t st;

	if (!real)
		return (cudaError_t)hook_missing("cudaGetKernel", cudaErrorSymbolNotFound);
	st = real(k, f);
	if (st == cudaSuccess && k)
		scan_handle_add(*k);
	return st;
}
