/* tests/sim/simgpu/shim.c - a minimal LD_PRELOAD shim, built the way
 * libvmem resolves an RTLD_LOCAL-loaded runtime: dlopen("libcudart.so.13",
 * RTLD_NOLOAD) in its constructor and dlsym on that handle.  The
 * "preload" case checks that the simulated cudart loads under it and that
 * the application's cudaMalloc reaches the shim first. */
#include <dlfcn.h>
#include <stddef.h>

#define API __attribute__((visibility("default")))

typedef int (*cuda_malloc_fn)(void **, size_t);

static cuda_malloc_fn real_malloc;
static int calls;

__attribute__((constructor)) static void shim_init(void)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);

	if (h)
		real_malloc = (cuda_malloc_fn)dlsym(h, "cudaMalloc");
}

API int cudaMalloc(void **p, size_t n)
{
	calls++;
	/* 2 is cudaErrorMemoryAllocation: no runtime found */
	return real_malloc ? real_malloc(p, n) : 2;
}

API int simgpu_test_shim_calls(void)
{
	return calls;
}
