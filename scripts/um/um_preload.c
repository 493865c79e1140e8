/* scripts/um/um_preload.c - libvmemum.so: the unified-memory baseline of
 * issue 14's comparison, as an LD_PRELOAD library.
 *
 *   LD_PRELOAD=libvmemum.so VMEM_UM_BUDGET=3G python3 train.py
 *
 * Every cudaMalloc of the application becomes cudaMallocManaged, so
 * PyTorch keeps its own caching allocator (its statistics, its handling of
 * out-of-memory) and only the memory under it changes: pages migrate on
 * demand between host and device, the driver evicting beyond what the
 * device holds.  The first cudaMalloc takes the balloon that makes the
 * device look VMEM_UM_BUDGET bytes large, and managed memory is capped at
 * the free device memory seen then (um_core.h says why; the device
 * machine's README forbids asking for more).  cudaFree of a managed block
 * is accounted and passed on (cudaFree frees managed memory too).
 *
 * At exit (VMEM_UM_STATS=1, the default) one line on stderr:
 *   vmem-um: stats {"budget":...,"balloon":...,"managed_peak":...,...}
 * which scripts/gpu-compare reads.  Messages start with "vmem-um: ".
 *
 * The real cudart is found the way libvmem.so finds it (interpose/hooks.c):
 * dlopen("libcudart.so.13", RTLD_NOLOAD) sees a library a framework loaded
 * RTLD_LOCAL; dlsym(RTLD_NEXT) is the fallback.  Nothing here runs at load
 * time but reading the environment: a process that never calls cudaMalloc
 * (a shell, nvidia-smi) is untouched.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "um_core.h"

#define UM_EXPORT __attribute__((visibility("default")))

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*malloc_managed_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*free_fn)(void *);
typedef cudaError_t (*mem_get_info_fn)(size_t *, size_t *);

static struct {
	malloc_fn malloc;
	malloc_managed_fn malloc_managed;
	free_fn free;
	mem_get_info_fn mem_get_info;
} real;

static um_state_t um;
static pthread_mutex_t um_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static char config_error[512];

static void message(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "vmem-um: %s\n", line);
}

static bool is_own(void *fn)
{
	Dl_info mine, theirs;

	return dladdr((void *)&is_own, &mine) && dladdr(fn, &theirs) &&
	       mine.dli_fbase == theirs.dli_fbase;
}

static void *find(const char *name)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
	void *fn = NULL;

	if (h) {
		fn = dlsym(h, name);
		dlclose(h);   /* a NOLOAD handle only adds a reference */
	}
	if (!fn || is_own(fn))
		fn = dlsym(RTLD_NEXT, name);
	return fn && !is_own(fn) ? fn : NULL;
}

static void resolve(void)
{
	real.malloc = (malloc_fn)find("cudaMalloc");
	real.malloc_managed = (malloc_managed_fn)find("cudaMallocManaged");
	real.free = (free_fn)find("cudaFree");
	real.mem_get_info = (mem_get_info_fn)find("cudaMemGetInfo");
}

static int op_mem_get_info(void *ctx, size_t *f, size_t *t)
{
	(void)ctx;
	return real.mem_get_info ? (int)real.mem_get_info(f, t) : (int)cudaErrorInitializationError;
}

static int op_malloc_device(void *ctx, void **p, size_t n)
{
	(void)ctx;
	return real.malloc ? (int)real.malloc(p, n) : (int)cudaErrorInitializationError;
}

static int op_malloc_managed(void *ctx, void **p, size_t n)
{
	(void)ctx;
	return real.malloc_managed ? (int)real.malloc_managed(p, n, cudaMemAttachGlobal)
				   : (int)cudaErrorInitializationError;
}

static int op_free(void *ctx, void *p)
{
	(void)ctx;
	return real.free ? (int)real.free(p) : (int)cudaErrorInitializationError;
}

static void op_set_last_error_oom(void *ctx)
{
	/* 2^62 bytes: more than any device, so CUDA itself answers
	 * cudaErrorMemoryAllocation and records it as the last error. */
	void *p = NULL;

	(void)ctx;
	if (real.malloc && real.malloc(&p, (size_t)1 << 62) == cudaSuccess && p && real.free)
		real.free(p);
}

static const um_ops_t um_ops = {
	.mem_get_info = op_mem_get_info,
	.malloc_device = op_malloc_device,
	.malloc_managed = op_malloc_managed,
	.free = op_free,
	.set_last_error_oom = op_set_last_error_oom,
	.message = message,
};

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

__attribute__((constructor)) static void um_ctor(void)
{
	um_config_t cfg;

	if (um_config_read(&cfg, env_get, NULL, config_error, sizeof(config_error)) != 0) {
		fprintf(stderr, "vmem-um: error: %s; every cudaMalloc will be refused\n", config_error);
		um_init(&um, &cfg, &um_ops);
		um.started = true;
		um.failed = true;
		return;
	}
	um_init(&um, &cfg, &um_ops);
}

__attribute__((destructor)) static void um_dtor(void)
{
	char buf[1024];

	pthread_mutex_lock(&um_lock);
	if (um.cfg.stats && (um.allocs || um.refused || um.started)) {
		um_stats_json(&um, buf, sizeof(buf));
		fprintf(stderr, "vmem-um: stats %s\n", buf);
	}
	pthread_mutex_unlock(&um_lock);
}

UM_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
	um_status_t s;
	int status;

	pthread_once(&resolve_once, resolve);
	if (!p)
		return real.malloc ? real.malloc(p, n) : cudaErrorInvalidValue;
	if (n == 0)
		return real.malloc ? real.malloc(p, n) : cudaErrorInitializationError;
	pthread_mutex_lock(&um_lock);
	if (!um.started && (!real.malloc_managed || !real.malloc || !real.free || !real.mem_get_info)) {
		um.started = true;
		um.failed = true;
		message(NULL, "error: cudaMallocManaged, cudaMalloc, cudaFree or cudaMemGetInfo not "
			"found in libcudart.so.13 (is this the CUDA runtime?); every cudaMalloc is refused");
	}
	s = um_alloc(&um, p, n, &status);
	pthread_mutex_unlock(&um_lock);
	(void)s;
	return (cudaError_t)status;
}

UM_EXPORT cudaError_t cudaFree(void *p)
{
	pthread_once(&resolve_once, resolve);
	if (p) {
		pthread_mutex_lock(&um_lock);
		um_forget(&um, p);
		pthread_mutex_unlock(&um_lock);
	}
	return real.free ? real.free(p) : cudaErrorInitializationError;
}
