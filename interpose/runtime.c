/* interpose/runtime.c - the runtime behind the hooks (pass-through stage).
 *
 * This first version only forwards allocations to the real cudart so that
 * libvmem.so links while the pool (pool/) is written; the pool-backed
 * runtime replaces it (issue 5).
 */
#include "interpose/runtime.h"

#include "interpose/hooks.h"

typedef cudaError_t (*rt_malloc_fn)(void **, size_t);
typedef cudaError_t (*rt_free_fn)(void *);
typedef cudaError_t (*rt_meminfo_fn)(size_t *, size_t *);

int runtime_init(void)
{
	return 0;
}

void runtime_shutdown(void)
{
}

bool runtime_active(void)
{
	return false;
}

cudaError_t runtime_malloc(void **ptr, size_t bytes, cudaStream_t stream, const char *api)
{
	rt_malloc_fn real = (rt_malloc_fn)hook_real("cudaMalloc");

	(void)stream;
	(void)api;
	if (!real)
		return cudaErrorNotSupported;
	return real(ptr, bytes);
}

cudaError_t runtime_free(void *ptr, cudaStream_t stream, bool async, const char *api)
{
	rt_free_fn real = (rt_free_fn)hook_real("cudaFree");

	(void)stream;
	(void)async;
	(void)api;
	if (!real)
		return cudaErrorNotSupported;
	return real(ptr);
}

cudaError_t runtime_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	rt_meminfo_fn real = (rt_meminfo_fn)hook_real("cudaMemGetInfo");

	if (!real)
		return cudaErrorNotSupported;
	return real(free_bytes, total_bytes);
}

bool runtime_owns(uintptr_t p)
{
	(void)p;
	return false;
}

cudaError_t runtime_prepare(const vmem_ref_t *refs, int n, cudaStream_t stream, trace_ref_t *out)
{
	(void)stream;
	for (int i = 0; i < n; i++) {
		out[i].alloc_id = 0;
		out[i].offset = 0;
		out[i].bytes = refs[i].bytes;
		out[i].ptr = refs[i].ptr;
		out[i].access = refs[i].access;
		out[i].role = refs[i].role;
	}
	return cudaSuccess;
}

void runtime_complete(const trace_ref_t *refs, int n, cudaStream_t stream)
{
	(void)refs;
	(void)n;
	(void)stream;
}
