/* interpose/host_slots.c - pinned host memory the device maps anywhere
 * (host_slots.h).
 *
 * The window is a bump range: the pool allocates host blocks and frees
 * them only when it is destroyed.  Each chunk of a block is its own
 * cuMemCreate handle (a host location: CU_MEM_LOCATION_TYPE_HOST where the
 * device supports it, else HOST_NUMA on node 0), kept by its index in the
 * window so that host_slots_handle finds the handle of a slot address.  The
 * device is granted read-write access to both mappings; the host never
 * touches slots itself (the pool's copies go through the device), so no
 * host access is asked for.
 */
#include "interpose/host_slots.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/hooks.h"
#include "interpose/log.h"
#include "pool/pool.h"

typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			      unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			   unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);
typedef cudaError_t (*memcpy_fn)(void *, const void *, size_t, enum cudaMemcpyKind);

static struct {
	attr_fn attr;
	reserve_fn reserve;
	create_fn create;
	release_fn release;
	map_fn map;
	unmap_fn unmap;
	access_fn access;
	gran_fn gran;
	addr_free_fn addr_free;
	memcpy_fn memcpy;            /* cudaMemcpy */
} D;

static struct {
	pthread_mutex_t lock;
	int device;
	CUmemAllocationProp prop;
	uint64_t chunk;
	uintptr_t base;
	uint64_t size, used;         /* bytes of the window, bytes handed out */
	CUmemGenericAllocationHandle *h;   /* per chunk of the window; 0: none */
	uint8_t *starts;             /* per chunk: 1 where a block begins */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

static CUresult grant(uintptr_t va, uint64_t size)
{
	CUmemAccessDesc d;

	memset(&d, 0, sizeof(d));
	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = S.device;
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return D.access((CUdeviceptr)va, size, &d, 1);
}

/* Tries the path once before trusting it (no card has run it for vmem
 * yet): one chunk of host memory mapped at two addresses, a pattern
 * copied in through one and back through the other.  False, with `why`,
 * when any step fails or the bytes differ. */
static bool probe(const char **why)
{
	enum { N = 4096 };
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	unsigned char *in = malloc(N), *out = malloc(N);
	bool ok = false;
	int stage = 0;

	if (!in || !out)
		goto done;
	for (int i = 0; i < N; i++)
		in[i] = (unsigned char)(i * 29 + 3);
	if (D.reserve(&va, 2 * S.chunk, S.chunk, 0, 0) != CUDA_SUCCESS)
		goto done;
	stage = 1;
	if (D.create(&h, S.chunk, &S.prop, 0) != CUDA_SUCCESS)
		goto done;
	stage = 2;
	if (D.map(va, S.chunk, 0, h, 0) != CUDA_SUCCESS)
		goto done;
	stage = 3;
	if (D.map(va + S.chunk, S.chunk, 0, h, 0) != CUDA_SUCCESS)
		goto done;
	stage = 4;
	if (grant((uintptr_t)va, 2 * S.chunk) != CUDA_SUCCESS ||
	    D.memcpy((void *)(uintptr_t)va, in, N, cudaMemcpyDefault) != cudaSuccess ||
	    D.memcpy(out, (const void *)(uintptr_t)(va + S.chunk), N, cudaMemcpyDefault) != cudaSuccess)
		goto done;
	ok = !memcmp(in, out, N);
done:
	if (stage >= 4)
		D.unmap(va + S.chunk, S.chunk);
	if (stage >= 3)
		D.unmap(va, S.chunk);
	if (stage >= 2)
		D.release(h);
	if (stage >= 1)
		D.addr_free(va, 2 * S.chunk);
	free(in);
	free(out);
	if (!ok)
		*why = "a chunk of host memory mapped at two addresses did not carry bytes from one "
		       "to the other (the start-up probe of cuMemCreate/cuMemMap/cudaMemcpy)";
	return ok;
}

int host_slots_init(int device, uint64_t chunk, uint64_t window, bool probe_it, const char **why)
{
	int host = 0, numa = 0;
	size_t gran = 0;

#define LOAD(f, name) \
	if (!(*(void **)&D.f = hook_real_load(name))) { \
		*why = name " is not in the driver"; \
		return 0; \
	}
	LOAD(attr, "cuDeviceGetAttribute");
	LOAD(reserve, "cuMemAddressReserve");
	LOAD(create, "cuMemCreate");
	LOAD(release, "cuMemRelease");
	LOAD(map, "cuMemMap");
	LOAD(unmap, "cuMemUnmap");
	LOAD(access, "cuMemSetAccess");
	LOAD(gran, "cuMemGetAllocationGranularity");
	LOAD(addr_free, "cuMemAddressFree");
	LOAD(memcpy, "cudaMemcpy");
#undef LOAD
	if (D.attr(&host, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) !=
	    CUDA_SUCCESS)
		host = 0;
	if (!host && D.attr(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			    device) != CUDA_SUCCESS)
		numa = 0;
	if (!host && !numa) {
		*why = "the device does not map host memory with cuMemCreate/cuMemMap "
		       "(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED and its "
		       "HOST_NUMA twin are 0)";
		return 0;
	}
	memset(&S.prop, 0, sizeof(S.prop));
	S.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	S.prop.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_HOST_NUMA;
	S.prop.location.id = 0;
	if (D.gran(&gran, &S.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !gran ||
	    chunk % gran) {
		*why = "host memory's allocation granularity does not divide vmem's chunk";
		return 0;
	}
	S.device = device;
	S.chunk = chunk;
	if (probe_it && !probe(why))
		return 0;
	window -= window % chunk;
	CUdeviceptr base = 0;
	if (!window || D.reserve(&base, window, chunk, 0, 0) != CUDA_SUCCESS) {
		*why = "no virtual range for the host slots' window (cuMemAddressReserve)";
		return -1;
	}
	S.h = calloc(window / chunk, sizeof(*S.h));
	S.starts = calloc(window / chunk, 1);
	if (!S.h || !S.starts) {
		*why = "no host memory for the host slots' table";
		return -1;
	}
	S.base = (uintptr_t)base;
	S.size = window;
	return 1;
}

/* Unmaps and releases the chunks [from, to) of the window. */
static void drop(uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		if (S.h[i]) {
			D.unmap((CUdeviceptr)(S.base + i * S.chunk), S.chunk);
			D.release(S.h[i]);
			S.h[i] = 0;
		}
}

int host_slots_alloc(void *ctx, uint64_t size, void **p)
{
	CUresult r = CUDA_SUCCESS;

	(void)ctx;
	if (!size || size % S.chunk)
		return POOL_EINVAL;
	pthread_mutex_lock(&S.lock);
	if (S.size - S.used < size) {
		pthread_mutex_unlock(&S.lock);
		vmem_error("the host slots' window (%" PRIu64 " MiB) is full: %" PRIu64 " MiB of host "
			   "memory hold offloaded data; set VMEM_HOST_LIMIT, or VMEM_HOST_MAP=0",
			   S.size >> 20, S.used >> 20);
		return POOL_ENOMEM;
	}
	uint64_t first = S.used / S.chunk, n = size / S.chunk, i;
	for (i = 0; i < n && r == CUDA_SUCCESS; i++) {
		uintptr_t va = S.base + (first + i) * S.chunk;

		r = D.create(&S.h[first + i], S.chunk, &S.prop, 0);
		if (r != CUDA_SUCCESS) {
			S.h[first + i] = 0;
			break;
		}
		if ((r = D.map((CUdeviceptr)va, S.chunk, 0, S.h[first + i], 0)) != CUDA_SUCCESS) {
			D.release(S.h[first + i]);
			S.h[first + i] = 0;
		}
	}
	if (r == CUDA_SUCCESS)
		r = grant(S.base + first * S.chunk, size);
	if (r != CUDA_SUCCESS) {
		drop(first, first + n);
		pthread_mutex_unlock(&S.lock);
		vmem_error("pinned host memory for slots of %" PRIu64 " MiB could not be made "
			   "(cuMemCreate/cuMemMap/cuMemSetAccess of host memory: CUDA error %d); "
			   "VMEM_HOST_MAP=0 uses cudaHostAlloc instead", size >> 20, (int)r);
		return POOL_ENOMEM;
	}
	S.starts[first] = 1;
	S.used += size;
	pthread_mutex_unlock(&S.lock);
	*p = (void *)(S.base + first * S.chunk);
	return 0;
}

void host_slots_free(void *ctx, void *p)
{
	uintptr_t a = (uintptr_t)p;

	(void)ctx;
	if (a < S.base || a >= S.base + S.size)
		return;
	pthread_mutex_lock(&S.lock);
	/* a block runs from its start to the next block's */
	uint64_t i = (a - S.base) / S.chunk, end = i + 1, n = S.used / S.chunk;
	while (end < n && !S.starts[end])
		end++;
	drop(i, end);
	S.starts[i] = 0;
	pthread_mutex_unlock(&S.lock);
}

uint64_t host_slots_handle(const void *slot)
{
	uintptr_t a = (uintptr_t)slot;
	uint64_t h = 0;

	pthread_mutex_lock(&S.lock);
	if (a >= S.base && a < S.base + S.used && !((a - S.base) % S.chunk))
		h = (uint64_t)S.h[(a - S.base) / S.chunk];
	pthread_mutex_unlock(&S.lock);
	return h;
}
