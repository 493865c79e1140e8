/* interpose/hooks.c - symbol resolution, the re-entry guard and the
 * per-call record every hook fills (see hooks.h).
 *
 * Resolution is by exact name in the library that defines the symbol:
 * dlopen(soname, RTLD_NOLOAD) finds a library even when a framework loaded
 * it RTLD_LOCAL from inside a Python extension, where dlsym(RTLD_NEXT)
 * does not; RTLD_NEXT is the fallback (a statically linked or renamed
 * library).  Any address inside libvmem.so itself is refused, so a hook
 * can never resolve to itself and recurse.
 */
#include "interpose/hooks.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interpose/config.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"
#include "interpose/trace.h"

/* ---- libraries ---- */

static const char *const lib_sonames[HOOK_LIB_COUNT][8] = {
	[HOOK_LIB_CUDART] = { "libcudart.so.13" },
	[HOOK_LIB_CUDA] = { "libcuda.so.1" },
	/* cuDNN 9 splits its symbols: the graph/backend API and versions live
	 * in libcudnn_graph, legacy ops in _ops/_cnn/_adv; libcudnn.so.9 is
	 * the shim that forwards to them. */
	[HOOK_LIB_CUDNN] = { "libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9",
			     "libcudnn_cnn.so.9", "libcudnn_adv.so.9" },
	[HOOK_LIB_CUBLAS] = { "libcublas.so.13" },
	[HOOK_LIB_CUBLASLT] = { "libcublasLt.so.13", "libcublas.so.13" },
};

/* Handles of libraries found loaded; written once (a dlopen handle of a
 * loaded library stays valid: we hold a reference). */
static void *lib_handles[HOOK_LIB_COUNT][8];

static void *own_base;

static void own_base_init(void)
{
	Dl_info info;

	if (dladdr((void *)&own_base_init, &info) && info.dli_fbase)
		__atomic_store_n(&own_base, info.dli_fbase, __ATOMIC_RELEASE);
}

/* True when `fn` lies in libvmem.so (a hook, never a real function). */
static bool is_own(void *fn)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	Dl_info info;

	pthread_once(&once, own_base_init);
	if (!dladdr(fn, &info))
		return false;
	return info.dli_fbase == __atomic_load_n(&own_base, __ATOMIC_ACQUIRE);
}

static void *lib_handle(hook_lib_t lib, int i, bool load)
{
	void *h = __atomic_load_n(&lib_handles[lib][i], __ATOMIC_ACQUIRE);
	void *expected = NULL;

	if (h)
		return h;
	h = dlopen(lib_sonames[lib][i], RTLD_NOLOAD | RTLD_LAZY);
	if (!h && load)
		h = dlopen(lib_sonames[lib][i], RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return NULL;
	if (!__atomic_compare_exchange_n(&lib_handles[lib][i], &expected, h, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		dlclose(h);   /* another thread stored the same library first */
	return __atomic_load_n(&lib_handles[lib][i], __ATOMIC_ACQUIRE);
}

static void *lookup(const char *name, int lib, bool load)
{
	void *fn;

	if (lib >= 0) {
		for (int i = 0; i < 8 && lib_sonames[lib][i]; i++) {
			void *h = lib_handle(lib, i, load && i == 0);

			if (!h)
				continue;
			fn = dlsym(h, name);
			if (fn && !is_own(fn))
				return fn;
		}
	}
	fn = dlsym(RTLD_NEXT, name);
	if (fn && !is_own(fn))
		return fn;
	return NULL;
}

void *hook_resolve(hook_sym_t *s)
{
	void *fn = __atomic_load_n(&s->fn, __ATOMIC_ACQUIRE);

	if (fn)
		return fn;
	fn = lookup(s->name, (int)s->lib, false);
	if (fn)
		__atomic_store_n(&s->fn, fn, __ATOMIC_RELEASE);
	return fn;
}

int hook_missing(const char *name, int err)
{
	vmem_error("%s: not found in any loaded CUDA library; returning error %d", name, err);
	return err;
}

/* Which library an arbitrary name is looked up in first (hook_real):
 * exact family naming, longest prefix first.  This only orders the
 * search; it never decides what is intercepted. */
static int lib_of(const char *name)
{
	if (strncmp(name, "cudnn", 5) == 0)
		return HOOK_LIB_CUDNN;
	if (strncmp(name, "cublasLt", 8) == 0)
		return HOOK_LIB_CUBLASLT;
	if (strncmp(name, "cublas", 6) == 0)
		return HOOK_LIB_CUBLAS;
	if (strncmp(name, "cuda", 4) == 0)
		return HOOK_LIB_CUDART;
	if (name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z')
		return HOOK_LIB_CUDA;
	return -1;
}

/* hook_real's cache: an append-only table, published by `real_count`
 * (release), so readers scan it without a lock; writers take real_lock. */
#define REAL_CACHE 256
#define REAL_NAME_MAX 64
static struct {
	char name[REAL_NAME_MAX];
	void *fn;
} real_cache[REAL_CACHE];
static unsigned real_count;
static pthread_mutex_t real_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork (DataLoader workers): prepare waits for an append in progress, so
 * the child's copy of the cache is whole; the child re-initialises the
 * lock, since the thread that held it does not exist there.  Registered
 * once, from vmem_init, before the first hooked call does anything. */
static void real_fork_prepare(void) { pthread_mutex_lock(&real_lock); }
static void real_fork_parent(void) { pthread_mutex_unlock(&real_lock); }
static void real_fork_child(void) { pthread_mutex_init(&real_lock, NULL); }

static void *real_cached(const char *name)
{
	unsigned n = __atomic_load_n(&real_count, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (strcmp(real_cache[i].name, name) == 0)
			return real_cache[i].fn;
	return NULL;
}

static void *real_get(const char *name, bool load)
{
	void *fn = real_cached(name);
	int lib;

	if (fn)
		return fn;
	lib = lib_of(name);
	fn = lookup(name, lib, load && (lib == HOOK_LIB_CUDART || lib == HOOK_LIB_CUDA));
	if (!fn)
		return NULL;
	if (strlen(name) < REAL_NAME_MAX) {
		pthread_mutex_lock(&real_lock);
		if (!real_cached(name) && real_count < REAL_CACHE) {
			unsigned n = real_count;

			strcpy(real_cache[n].name, name);
			real_cache[n].fn = fn;
			__atomic_store_n(&real_count, n + 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&real_lock);
	}
	return fn;
}

void *hook_real(const char *name)
{
	return real_get(name, false);
}

void *hook_real_load(const char *name)
{
	return real_get(name, true);
}

/* ---- guard and init ---- */

/* initial-exec: libvmem.so is loaded at start-up (LD_PRELOAD), so its TLS
 * is static and reaching it never calls into the loader (which may
 * allocate) from inside a hook. */
static __thread int guard_depth __attribute__((tls_model("initial-exec")));
/* Start of the real call of this thread's hook in flight (stats). */
static __thread uint64_t guard_real_start __attribute__((tls_model("initial-exec")));
/* True between a successful runtime_prepare and its runtime_complete. */
static __thread bool call_prepared __attribute__((tls_model("initial-exec")));

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool enabled;
/* Per-call timing is read only by the trace and VMEM_STATS: a clock read
 * costs 20-40 ns (more in a VM), so hooks skip it otherwise. */
static bool timing;

void hook_set_timing(bool on)
{
	__atomic_store_n(&timing, on, __ATOMIC_RELAXED);
}

static inline uint64_t call_clock(void)
{
	/* The trace's time base: ns since vmem started. */
	return __atomic_load_n(&timing, __ATOMIC_RELAXED) ? trace_now_ns() : 0;
}

bool hook_guard_enter(void)
{
	if (guard_depth > 0)
		return false;
	guard_depth++;
	return true;
}

void hook_guard_leave(void)
{
	guard_depth--;
}

static void init_run(void)
{
	pthread_atfork(real_fork_prepare, real_fork_parent, real_fork_child);
	guard_depth++;
	vmem_startup();
	guard_depth--;
}

void vmem_init(void)
{
	pthread_once(&init_once, init_run);
}

void vmem_set_enabled(bool on)
{
	__atomic_store_n(&enabled, on, __ATOMIC_RELEASE);
}

bool vmem_enabled(void)
{
	return __atomic_load_n(&enabled, __ATOMIC_ACQUIRE);
}

bool hook_begin(void)
{
	if (guard_depth > 0)
		return false;
	guard_depth++;
	vmem_init();
	if (!vmem_enabled()) {
		guard_depth--;
		return false;
	}
	return true;
}

void hook_end(void)
{
	if (--guard_depth == 0)
		runtime_oom_report();
}

uint64_t hook_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the per-call record ---- */

void hook_call_init(hook_call_t *c, vmem_op_kind_t kind, const char *api, const void *stream)
{
	c->kind = kind;
	c->api = api;
	c->stream = stream;
	c->nrefs = 0;
	c->cap = VMEM_INLINE_REFS;
	c->refs_lost = false;
	c->unseen = false;
	c->captured = false;
	c->policy_seen = false;
	c->no_host_stated = false;
	c->kernel = NULL;
	c->refs = c->refs_inline;
	c->resolved = c->resolved_inline;
	c->seq = 0;
	c->t_start = call_clock();
	memset(&c->info, 0, sizeof(c->info));
	c->args_len = 0;
	c->args[0] = '\0';
}

/* Doubles the ref arrays, moving them to the heap; false when out of host
 * memory (the arrays are left as they were). */
static bool grow_refs(hook_call_t *c)
{
	int cap = c->cap * 2;
	vmem_ref_t *r = malloc((size_t)cap * sizeof(*r));
	trace_ref_t *t = malloc((size_t)cap * sizeof(*t));

	if (!r || !t) {
		free(r);
		free(t);
		return false;
	}
	memcpy(r, c->refs, (size_t)c->nrefs * sizeof(*r));
	if (c->refs != c->refs_inline) {
		free(c->refs);
		free(c->resolved);
	}
	c->refs = r;
	c->resolved = t;
	c->cap = cap;
	return true;
}

static void free_refs(hook_call_t *c)
{
	if (c->refs != c->refs_inline) {
		free(c->refs);
		free(c->resolved);
	}
	c->refs = c->refs_inline;
	c->resolved = c->resolved_inline;
	c->cap = VMEM_INLINE_REFS;
}

static void push_ref(hook_call_t *c, const void *ptr, size_t bytes, uint8_t access, const char *role)
{
	if (!ptr)
		return;
	if (c->nrefs == c->cap && !grow_refs(c)) {
		c->refs_lost = true;
		stats_add(STATS_REFS_DROPPED, 1);
		return;
	}
	c->refs[c->nrefs].ptr = (uintptr_t)ptr;
	c->refs[c->nrefs].bytes = bytes;
	c->refs[c->nrefs].access = access;
	c->refs[c->nrefs].role = role;
	c->nrefs++;
}

void hook_call_ref(hook_call_t *c, const void *ptr, size_t bytes, uint8_t access, const char *role)
{
	/* an unknown extent, or an upper bound, is never a whole overwrite */
	push_ref(c, ptr, bytes, bytes && !(access & VMEM_ACCESS_UPTO) ?
		 access : (uint8_t)(access & ~VMEM_ACCESS_WHOLE), role);
}

void hook_call_ref_empty(hook_call_t *c, const void *ptr, size_t bytes, const char *role)
{
	push_ref(c, ptr, bytes, VMEM_ACCESS_W | VMEM_ACCESS_WHOLE | VMEM_ACCESS_UNUSED, role);
}

void hook_call_drop(hook_call_t *c)
{
	free_refs(c);
	c->nrefs = 0;
}

void hook_call_args(hook_call_t *c, const char *fmt, ...)
{
	size_t room = sizeof(c->args) - c->args_len;
	va_list ap;
	int n;

	/* Only the trace reads args: formatting them costs more than the
	 * rest of a launch hook, so skip it when nobody will read them. */
	if (room <= 1 || !trace_enabled())
		return;
	if (c->args_len > 0) {
		c->args[c->args_len++] = ',';
		c->args[c->args_len] = '\0';
		room--;
	}
	va_start(ap, fmt);
	n = vsnprintf(c->args + c->args_len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		/* Truncated: drop the partial pair, keeping the JSON valid. */
		while (c->args_len > 0 && c->args[c->args_len - 1] == ',')
			c->args_len--;
		c->args[c->args_len] = '\0';
		return;
	}
	c->args_len += (size_t)n;
}

HOOK_DEFINE_REAL(HOOK_LIB_CUDART, cudaStreamIsCapturing, cudaError_t,
		 (cudaStream_t s, enum cudaStreamCaptureStatus *st), (s, st))
HOOK_DEFINE_REAL(HOOK_LIB_CUDART, cudaMalloc, cudaError_t, (void **p, size_t n), (p, n))
HOOK_DEFINE_REAL(HOOK_LIB_CUDART, cudaFree, cudaError_t, (void *p), (p))

void hook_set_last_error_oom(void)
{
	/* 2^62 bytes: larger than any device, small enough that no rounding
	 * inside CUDA can wrap it to a small request. */
	const size_t impossible = (size_t)1 << 62;
	real_cudaMalloc_t real = real_cudaMalloc();
	real_cudaFree_t rfree = real_cudaFree();
	void *p = NULL;

	if (real && real(&p, impossible) == cudaSuccess && p) {
		vmem_warn("a %zu-byte cudaMalloc succeeded, so a call that did not fit in "
			  "the budget could not be reported through cudaGetLastError", impossible);
		if (rfree)
			rfree(p);
	}
}

static bool capturing(const void *stream)
{
	real_cudaStreamIsCapturing_t real = real_cudaStreamIsCapturing();
	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;

	if (!real || real((cudaStream_t)stream, &st) != cudaSuccess)
		return false;
	return st != cudaStreamCaptureStatusNone;
}

/* The call as the policy sees it. */
static runtime_call_t policy_call(const hook_call_t *c)
{
	return (runtime_call_t){
		.kind = c->kind, .api = c->api, .stream = c->stream, .refs = c->refs,
		.nrefs = c->nrefs, .info = &c->info, .seq = c->seq, .t_ns = c->t_start,
	};
}

/* The trace's view of refs vmem did not resolve: as the hook stated them. */
static void resolve_as_stated(hook_call_t *c)
{
	for (int i = 0; i < c->nrefs; i++) {
		c->resolved[i].alloc_id = 0;
		c->resolved[i].offset = 0;
		c->resolved[i].bytes = c->refs[i].bytes;
		c->resolved[i].ptr = c->refs[i].ptr;
		c->resolved[i].access = c->refs[i].access;
		c->resolved[i].role = c->refs[i].role;
	}
}

cudaError_t hook_call_prepare(hook_call_t *c)
{
	cudaError_t st = cudaSuccess;

	call_prepared = false;
	if (c->refs_lost && runtime_active()) {
		vmem_error("%s: %d tensors seen and more that vmem could not hold (host memory "
			   "exhausted); the call is refused rather than run on memory that may "
			   "not be resident", c->api, c->nrefs);
		st = cudaErrorMemoryAllocation;
	} else if (runtime_active() && (c->nrefs > 0 || c->unseen) && capturing(c->stream)) {
		/* DESIGN "CUDA graphs": nothing runs now, and nothing may be
		 * issued on the capturing stream (an event recorded there would
		 * join the graph): the ranges are recorded into the capture and
		 * made resident at each cudaGraphLaunch (runtime.h), which is
		 * an unseen call itself when this one is. */
		runtime_capture_note((cudaStream_t)c->stream, c->refs, c->nrefs, c->unseen);
		c->captured = true;
		stats_add(STATS_CAPTURE_PASSTHROUGH, 1);
	} else if (runtime_active()) {
		if (!c->policy_seen && runtime_policy_on()) {
			runtime_call_t rc = policy_call(c);

			c->policy_seen = true;
			st = runtime_policy_before(&rc);
		}
		if (st == cudaSuccess) {
			st = runtime_prepare(c->refs, c->nrefs, (cudaStream_t)c->stream, c->resolved,
					     !c->no_host_stated);
			call_prepared = st == cudaSuccess;
			if (st == cudaErrorMemoryAllocation)
				runtime_oom_name(c->api, c->kernel);
		}
		/* after the call's own fault-ins: a graph launch's whole writes
		 * may have left a page's rest on the host, which the kernel vmem
		 * cannot see into may read */
		if (call_prepared && c->unseen &&
		    (st = runtime_unseen_before((cudaStream_t)c->stream)) != cudaSuccess) {
			runtime_complete(c->resolved, c->nrefs, (cudaStream_t)c->stream);
			call_prepared = false;
		}
		if (call_prepared && c->policy_seen) {
			runtime_call_t rc = policy_call(c);

			runtime_policy_started(&rc);
		}
	}
	if (!call_prepared)
		resolve_as_stated(c);
	/* The op's seq is taken after the fault-ins and evictions of prepare,
	 * so a reader sorting by seq sees them before the op that needed them. */
	c->seq = trace_next_seq();
	guard_real_start = call_clock();
	return st;
}

bool hook_call_is_prepared(void)
{
	return call_prepared;
}

void hook_call_finish(hook_call_t *c)
{
	uint64_t t_end = call_clock();
	uint64_t real_ns = guard_real_start ? t_end - guard_real_start : 0;
	uint64_t vmem_ns;

	if (call_prepared)
		runtime_complete(c->resolved, c->nrefs, (cudaStream_t)c->stream);
	call_prepared = false;
	if (c->unseen && !c->captured)   /* a captured one: at each graph launch */
		runtime_unseen_write((cudaStream_t)c->stream);
	if (c->seq == 0) {
		/* no prepare ran (a convolution whose rescue found nothing to
		 * run): resolved[] was never filled, and the op takes its seq
		 * now (prepare takes both) */
		resolve_as_stated(c);
		c->seq = trace_next_seq();
	}
	if (c->policy_seen) {
		runtime_call_t rc = policy_call(c);

		runtime_policy_after(&rc);
	}
	if (trace_enabled())
		trace_op(c->seq, c->t_start, t_end - c->t_start, c->kind, c->api, c->stream,
			 c->resolved, c->nrefs, c->args_len ? c->args : NULL);
	guard_real_start = 0;
	t_end = call_clock();
	vmem_ns = t_end - c->t_start;
	vmem_ns = vmem_ns > real_ns ? vmem_ns - real_ns : 0;
	stats_call((int)c->kind, vmem_ns, real_ns);
	free_refs(c);
}
