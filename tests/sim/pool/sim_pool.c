/* tests/sim/pool/sim_pool.c - the device pool through the real hooks.
 *
 * Linked against the real libcudart like an application; run with
 * LD_LIBRARY_PATH=<build>/tests/simgpu and LD_PRELOAD=libvmem.so by
 * run_pool.py.  The simulated GPU maps device memory with real page
 * protection, so any access to an offloaded or unmapped page aborts with
 * "simgpu: illegal address"; this program checks the bytes.
 *
 *   sim-pool meminfo TOTAL     cudaMemGetInfo reports TOTAL bytes, free <= total
 *   sim-pool stress ROUNDS SEED
 *                              random allocations (1 B .. budget/4), whole and
 *                              partial writes on two streams, memsets, reads,
 *                              sync and async frees, the live set up to 3x the
 *                              budget; every byte read equals what was written
 *   sim-pool oom               a request over the budget fails with
 *                              cudaErrorMemoryAllocation; what was there survives
 *   sim-pool fork N DEVTOTAL   a thread allocates and frees in a loop while the
 *                              main thread forks N times (as DataLoader workers
 *                              do); each child must not hang and must not use
 *                              the parent's pool: its cudaMemGetInfo is the
 *                              device's own (DEVTOTAL), not vmem's budget
 *   sim-pool small             small allocations of 40 sizes (256 B .. 768 KiB),
 *                              a third of the budget, written, then large
 *                              tensors over the rest of the budget twice: the
 *                              cold small chunks must move out (issue 10) and
 *                              every small byte read back
 *   sim-pool expandable        what PyTorch's expandable segments do, through the
 *                              driver entry points: reserve a large range, grow
 *                              a segment by mapping 2 MiB and 20 MiB handles
 *                              (cuMemCreate, cuMemMap, cuMemSetAccess) to more
 *                              than the budget, write it (a tensor straddling
 *                              two handles too), shrink (cuMemUnmap,
 *                              cuMemRelease), grow again, read every byte back
 *   sim-pool hostlimit         8 MiB tensors are written until one fails because
 *                              the pinned host memory (VMEM_HOST_LIMIT) is full;
 *                              after freeing one, every other reads back intact
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlfcn.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "sim-pool: %s failed: %s (%d) at line %d\n", #x, \
		cudaGetErrorString(e_), (int)e_, __LINE__); exit(1); } } while (0)

static uint64_t rng = 1;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
	for (size_t i = 0; i < n; i++) {
		if (!(i & 7))
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)(x >> (8 * (i & 7)));
	}
}

typedef struct {
	void *d;
	uint8_t *shadow;
	size_t n;
} tensor_t;

static int compare(const tensor_t *t, const char *when)
{
	uint8_t *got = malloc(t->n);
	CK(cudaMemcpy(got, t->d, t->n, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < t->n; i++)
		if (got[i] != t->shadow[i]) {
			fprintf(stderr, "sim-pool: %s: byte %zu of %zu at %p: expected 0x%02x, got 0x%02x\n",
				when, i, t->n, t->d, t->shadow[i], got[i]);
			free(got);
			return 1;
		}
	free(got);
	return 0;
}

static int cmd_meminfo(uint64_t want)
{
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	printf("total %zu free %zu\n", tot, fr);
	if (tot != want) {
		fprintf(stderr, "sim-pool: cudaMemGetInfo total: expected %" PRIu64 ", got %zu\n", want, tot);
		return 1;
	}
	if (fr > tot) {
		fprintf(stderr, "sim-pool: cudaMemGetInfo free %zu is more than total %zu\n", fr, tot);
		return 1;
	}
	void *p;
	CK(cudaMalloc(&p, 100 << 20));
	size_t fr2;
	CK(cudaMemGetInfo(&fr2, &tot));
	if (fr2 + (100 << 20) > fr) {
		fprintf(stderr, "sim-pool: free after allocating 100 MiB: expected at most %zu, got %zu\n",
			fr - (100 << 20), fr2);
		return 1;
	}
	CK(cudaFree(p));
	printf("ok\n");
	return 0;
}

#define MAXT 256

static int cmd_stress(int rounds, uint64_t seed)
{
	size_t fr, budget;
	tensor_t t[MAXT];
	int nt = 0, bad = 0;
	size_t live = 0, nalloc = 0, nfree = 0, nread = 0, noom = 0;
	cudaStream_t s2;

	rng = seed * 2654435761u + 1;
	CK(cudaMemGetInfo(&fr, &budget));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	for (int r = 0; r < rounds && !bad; r++) {
		int op = (int)(rnd() % 10);
		if (nt == 0 || (op < 3 && nt < MAXT && live < 3 * budget)) {
			size_t n = rnd() % 3 == 0 ? 1 + rnd() % 4096 : 1 + rnd() % (budget / 4);
			tensor_t x = { NULL, malloc(n), n };
			cudaError_t e = cudaMalloc(&x.d, n);
			if (e == cudaErrorMemoryAllocation) {
				noom++;
				free(x.shadow);
				continue;
			}
			CK(e);
			fill(x.shadow, n, rnd());
			CK(cudaMemcpy(x.d, x.shadow, n, cudaMemcpyHostToDevice));
			t[nt++] = x;
			live += n;
			nalloc++;
		} else if (op < 5) {
			int i = (int)(rnd() % (uint64_t)nt);
			bad |= compare(&t[i], "before free");
			if (rnd() & 1) {
				CK(cudaFree(t[i].d));
			} else {
				CK(cudaFreeAsync(t[i].d, s2));
			}
			live -= t[i].n;
			free(t[i].shadow);
			t[i] = t[--nt];
			nfree++;
		} else if (op < 7) {
			int i = (int)(rnd() % (uint64_t)nt);
			bad |= compare(&t[i], "read");
			nread++;
		} else if (op < 8) {
			/* partial write of a sub-range on another stream */
			int i = (int)(rnd() % (uint64_t)nt);
			size_t off = rnd() % t[i].n, n = 1 + rnd() % (t[i].n - off);
			fill(t[i].shadow + off, n, rnd());
			CK(cudaMemcpyAsync((char *)t[i].d + off, t[i].shadow + off, n,
					   cudaMemcpyHostToDevice, s2));
			CK(cudaStreamSynchronize(s2));
		} else if (op < 9) {
			int i = (int)(rnd() % (uint64_t)nt);
			size_t off = rnd() % t[i].n, n = 1 + rnd() % (t[i].n - off);
			int v = (int)(rnd() & 0xff);
			memset(t[i].shadow + off, v, n);
			CK(cudaMemset((char *)t[i].d + off, v, n));
		} else {
			CK(cudaDeviceSynchronize());
		}
	}
	for (int i = 0; i < nt && !bad; i++)
		bad |= compare(&t[i], "final");
	for (int i = 0; i < nt; i++) {
		CK(cudaFree(t[i].d));
		free(t[i].shadow);
	}
	CK(cudaStreamDestroy(s2));
	printf("rounds %d allocs %zu frees %zu reads %zu oom %zu budget %zu\n",
	       rounds, nalloc, nfree, nread, noom, budget);
	if (bad)
		return 1;
	printf("ok\n");
	return 0;
}

static int cmd_oom(void)
{
	size_t fr, budget;
	CK(cudaMemGetInfo(&fr, &budget));
	void *big;
	cudaError_t e = cudaMalloc(&big, budget + 1);
	if (e != cudaErrorMemoryAllocation) {
		fprintf(stderr, "sim-pool: cudaMalloc of budget + 1 bytes: expected cudaErrorMemoryAllocation, got %d\n",
			(int)e);
		return 1;
	}
	(void)cudaGetLastError();
	tensor_t t[3];
	for (int i = 0; i < 3; i++) {
		t[i].n = budget / 2;
		t[i].shadow = malloc(t[i].n);
		fill(t[i].shadow, t[i].n, (uint64_t)i + 5);
		CK(cudaMalloc(&t[i].d, t[i].n));
		CK(cudaMemcpy(t[i].d, t[i].shadow, t[i].n, cudaMemcpyHostToDevice));
	}
	/* one call touching two half-budget tensors at once fits (just) */
	CK(cudaMemcpy(t[0].d, t[1].d, budget / 4, cudaMemcpyDeviceToDevice));
	memcpy(t[0].shadow, t[1].shadow, budget / 4);
	/* one that would need 3/4 of the budget of each of two tensors at
	 * once cannot run: refused (vmem's error line says why), data kept */
	void *u[2];
	CK(cudaMalloc(&u[0], budget / 4 * 3));
	CK(cudaMalloc(&u[1], budget / 4 * 3));
	e = cudaMemcpy(u[1], u[0], budget / 4 * 3, cudaMemcpyDeviceToDevice);
	if (e != cudaErrorMemoryAllocation) {
		fprintf(stderr, "sim-pool: a copy of 3/4 of the budget between two tensors: expected "
			"cudaErrorMemoryAllocation, got %d\n", (int)e);
		return 1;
	}
	(void)cudaGetLastError();
	CK(cudaFree(u[0]));
	CK(cudaFree(u[1]));
	int bad = 0;
	for (int i = 0; i < 3; i++)
		bad |= compare(&t[i], "after eviction");
	for (int i = 0; i < 3; i++) {
		CK(cudaFree(t[i].d));
		free(t[i].shadow);
	}
	if (!bad)
		printf("ok\n");
	return bad;
}

static int cmd_hostlimit(void)
{
	tensor_t t[MAXT];
	int nt = 0, bad = 0;
	cudaError_t e = cudaSuccess;

	while (nt < MAXT) {
		t[nt].n = 8u << 20;
		t[nt].shadow = malloc(t[nt].n);
		fill(t[nt].shadow, t[nt].n, (uint64_t)nt + 100);
		e = cudaMalloc(&t[nt].d, t[nt].n);
		if (e != cudaSuccess) {
			free(t[nt].shadow);
			break;
		}
		CK(cudaMemcpy(t[nt].d, t[nt].shadow, t[nt].n, cudaMemcpyHostToDevice));
		nt++;
	}
	if (e != cudaErrorMemoryAllocation) {
		fprintf(stderr, "sim-pool: expected cudaErrorMemoryAllocation once host memory is full, got %d after %d tensors\n",
			(int)e, nt);
		return 1;
	}
	(void)cudaGetLastError();
	printf("tensors before the host limit: %d\n", nt);
	CK(cudaFree(t[nt - 1].d));
	free(t[--nt].shadow);
	for (int i = 0; i < nt; i++)
		bad |= compare(&t[i], "after host exhaustion");
	for (int i = 0; i < nt; i++) {
		CK(cudaFree(t[i].d));
		free(t[i].shadow);
	}
	if (!bad)
		printf("ok\n");
	return bad;
}

static volatile int fork_stop;

static void *fork_churn(void *arg)
{
	(void)arg;
	while (!fork_stop) {
		void *p;
		CK(cudaMalloc(&p, 3u << 20));
		CK(cudaMemsetAsync(p, 1, 3u << 20, NULL));
		CK(cudaFree(p));
	}
	return NULL;
}

static int fork_child_check(uint64_t devtotal, int i)
{
	pid_t pid = fork();
	if (pid == 0) {
		alarm(10);   /* a deadlocked child dies loudly */
		if (devtotal) {
			size_t cf = 0, ct = 0;
			cudaError_t e = cudaMemGetInfo(&cf, &ct);
			if (e != cudaSuccess || ct != devtotal) {
				fprintf(stderr, "sim-pool: child %d: cudaMemGetInfo: expected the device's "
					"own total %" PRIu64 " (vmem off in the child), got %zu (error %d)\n",
					i, devtotal, ct, (int)e);
				_exit(2);
			}
		}
		_exit(0);
	}
	int ws;
	if (pid < 0 || waitpid(pid, &ws, 0) != pid) {
		fprintf(stderr, "sim-pool: fork/wait failed at child %d\n", i);
		return 1;
	}
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		fprintf(stderr, "sim-pool: child %d: expected exit 0, got %s %d\n", i,
			WIFSIGNALED(ws) ? "signal" : "exit",
			WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
		return 1;
	}
	return 0;
}

/* Forks while a thread is inside vmem (the parent must not deadlock in
 * fork's handlers); the children exit at once, because the simulator's
 * own lock may be held by the other thread at fork time (real CUDA is
 * not usable in a forked child either).  Then, with no other thread in
 * CUDA, one child checks that vmem is off there. */
static int cmd_fork(int n, uint64_t devtotal)
{
	pthread_t t;
	int bad = 0;
	size_t fr, tot;

	CK(cudaMemGetInfo(&fr, &tot));
	if (tot == devtotal) {
		fprintf(stderr, "sim-pool: the parent must see vmem's budget, got the device's %zu\n", tot);
		return 1;
	}
	pthread_create(&t, NULL, fork_churn, NULL);
	alarm(120);   /* a parent deadlocked in fork dies loudly */
	for (int i = 0; i < n && !bad; i++)
		bad = fork_child_check(0, i);
	fork_stop = 1;
	pthread_join(t, NULL);
	alarm(0);
	if (bad || fork_child_check(devtotal, n))
		return 1;
	printf("ok\n");
	return 0;
}

static void fill_tensor(tensor_t *t, uint64_t seed)
{
	fill(t->shadow, t->n, seed);
	CK(cudaMemcpy(t->d, t->shadow, t->n, cudaMemcpyHostToDevice));
}

static int cmd_small(void)
{
	size_t fr, budget;
	static tensor_t t[4096];
	int nt = 0;
	size_t small = 0;

	CK(cudaMemGetInfo(&fr, &budget));
	rng = 12345;
	size_t sizes[40];
	for (int i = 0; i < 40; i++)
		sizes[i] = (256u << (rnd() % 11)) + rnd() % 4096;   /* 256 B .. 260 KiB */
	sizes[0] = 768 << 10;
	while (small < budget / 3 && nt < 4096) {
		tensor_t *x = &t[nt];
		x->n = sizes[nt % 40];
		x->shadow = malloc(x->n);
		CK(cudaMalloc(&x->d, x->n));
		fill_tensor(x, (uint64_t)nt + 1);
		small += x->n;
		nt++;
	}
	/* large tensors over the rest of the budget and beyond: the small
	 * chunks are the coldest pages */
	for (int round = 0; round < 2; round++) {
		tensor_t big[4];
		for (int i = 0; i < 4; i++) {
			big[i].n = budget / 4;
			big[i].shadow = malloc(big[i].n);
			cudaError_t e = cudaMalloc(&big[i].d, big[i].n);
			if (e != cudaSuccess) {
				fprintf(stderr, "sim-pool: a %zu-byte tensor beside %zu bytes of small "
					"allocations (budget %zu): expected success, got %s\n",
					big[i].n, small, budget, cudaGetErrorString(e));
				return 1;
			}
			fill_tensor(&big[i], 100000u + (uint64_t)i);
		}
		for (int i = 0; i < 4; i++) {
			if (compare(&big[i], "large tensor"))
				return 1;
			CK(cudaFree(big[i].d));
			free(big[i].shadow);
		}
	}
	for (int i = 0; i < nt; i++)
		if (compare(&t[i], "small allocation after the large ones"))
			return 1;
	for (int i = 0; i < nt; i++) {
		CK(cudaFree(t[i].d));
		free(t[i].shadow);
	}
	printf("small allocations: %d, %zu bytes, budget %zu\n", nt, small, budget);
	printf("ok\n");
	return 0;
}

/* ---- expandable segments (issue 14) ---- */

typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			      unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*export_fn)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
			      unsigned long long);

#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, "sim-pool: %s failed: CUDA error %d at line %d\n", #x, (int)r_, __LINE__); \
	exit(1); } } while (0)

static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;
	/* as PyTorch does (c10/cuda/driver_api.cpp) */
	CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
	if (!fn || q != cudaDriverEntryPointSuccess) {
		fprintf(stderr, "sim-pool: driver entry point %s not found\n", name);
		exit(1);
	}
	return fn;
}

#define NSEG 48

/* The segment is larger than the budget: written and read in windows of
 * 12 MiB + 4 KiB, which straddle the handles' boundaries. */
#define WIN ((size_t)12 * 1048576 + 4096)

static void seg_write(CUdeviceptr seg, const uint8_t *shadow, size_t from, size_t to)
{
	for (size_t o = from; o < to; o += WIN) {
		size_t n = to - o < WIN ? to - o : WIN;
		CK(cudaMemcpy((void *)(uintptr_t)(seg + o), shadow + o, n, cudaMemcpyHostToDevice));
	}
}

static int seg_check(CUdeviceptr seg, const uint8_t *shadow, size_t from, size_t to, const char *when)
{
	for (size_t o = from; o < to; o += WIN) {
		tensor_t t = { (void *)(uintptr_t)(seg + o), (uint8_t *)shadow + o,
			       to - o < WIN ? to - o : WIN };
		if (compare(&t, when))
			return 1;
	}
	return 0;
}

static int cmd_expandable(size_t grow_to)
{
	reserve_fn reserve = (reserve_fn)entry("cuMemAddressReserve");
	addr_free_fn addr_free = (addr_free_fn)entry("cuMemAddressFree");
	create_fn create = (create_fn)entry("cuMemCreate");
	release_fn release = (release_fn)entry("cuMemRelease");
	map_fn map = (map_fn)entry("cuMemMap");
	unmap_fn unmap = (unmap_fn)entry("cuMemUnmap");
	access_fn access = (access_fn)entry("cuMemSetAccess");
	gran_fn gran = (gran_fn)entry("cuMemGetAllocationGranularity");
	int dev;
	size_t g;

	CK(cudaFree(NULL));
	CK(cudaGetDevice(&dev));
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;   /* as PyTorch asks */
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CU(gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CUmemAccessDesc desc;
	memset(&desc, 0, sizeof(desc));
	desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	desc.location.id = dev;
	desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

	/* PyTorch reserves 1.125 x the device per segment; 1 GiB here */
	size_t vsize = (size_t)1 << 30;
	CUdeviceptr seg;
	CU(reserve(&seg, vsize, 0, 0, 0));
	CUmemGenericAllocationHandle h[NSEG];
	size_t hsz[NSEG], mapped = 0;
	int nh = 0;
	/* grow: 2 MiB handles (the small pool) and 20 MiB ones (the large) */
	while (mapped < grow_to && nh < NSEG) {
		hsz[nh] = (nh % 3 == 2 ? 20 : 2) * g;
		CU(create(&h[nh], hsz[nh], &prop, 0));
		CU(map(seg + mapped, hsz[nh], 0, h[nh], 0));
		CU(access(seg + mapped, hsz[nh], &desc, 1));
		mapped += hsz[nh];
		nh++;
	}
	/* the whole segment written and read back in windows that straddle
	 * the handles, more than the budget in all */
	uint8_t *shadow = malloc(mapped);
	fill(shadow, mapped, 7);
	seg_write(seg, shadow, 0, mapped);
	if (seg_check(seg, shadow, 0, mapped, "segment after growing"))
		return 1;
	/* a tensor across one boundary, written alone */
	tensor_t mid = { (void *)(uintptr_t)(seg + hsz[0] + hsz[1] - 4096), malloc(8192), 8192 };
	fill_tensor(&mid, 8);
	memcpy(shadow + hsz[0] + hsz[1] - 4096, mid.shadow, 8192);
	/* shrink: the last third of the handles go */
	int keep = nh - nh / 3;
	size_t kept = 0;
	for (int i = 0; i < keep; i++)
		kept += hsz[i];
	CK(cudaDeviceSynchronize());   /* as PyTorch does before unmapping */
	for (int i = nh - 1, off = 0; i >= keep; i--) {
		size_t at = kept;
		for (int j = keep; j < i; j++)
			at += hsz[j];
		CU(unmap(seg + at, hsz[i]));
		CU(release(h[i]));
		(void)off;
	}
	if (seg_check(seg, shadow, 0, kept, "segment after shrinking"))
		return 1;
	/* grow again over the same addresses */
	size_t regrown = kept;
	for (int i = keep; i < nh; i++) {
		CU(create(&h[i], hsz[i], &prop, 0));
		CU(map(seg + regrown, hsz[i], 0, h[i], 0));
		CU(access(seg + regrown, hsz[i], &desc, 1));
		regrown += hsz[i];
	}
	fill(shadow + kept, regrown - kept, 9);
	seg_write(seg, shadow, kept, regrown);
	if (seg_check(seg, shadow, 0, regrown, "segment after growing again"))
		return 1;
	/* vmem's handles cannot leave the process */
	export_fn exp = (export_fn)dlsym(RTLD_DEFAULT, "cuMemExportToShareableHandle");
	if (exp && getenv("LD_PRELOAD")) {
		int fd = -1;
		CUresult r = exp(&fd, h[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
		if (r != CUDA_ERROR_NOT_SUPPORTED) {
			fprintf(stderr, "sim-pool: exporting a handle vmem serves: expected "
				"CUDA_ERROR_NOT_SUPPORTED, got %d\n", (int)r);
			return 1;
		}
	}
	CK(cudaDeviceSynchronize());
	size_t at = 0;
	for (int i = 0; i < nh; i++) {
		CU(unmap(seg + at, hsz[i]));
		CU(release(h[i]));
		at += hsz[i];
	}
	CU(addr_free(seg, vsize));
	printf("expandable segment: %d handles, %zu MiB mapped, shrunk to %zu MiB, grown back\n",
	       nh, mapped >> 20, kept >> 20);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "meminfo"))
		return cmd_meminfo(strtoull(argv[2], NULL, 0));
	if (argc >= 4 && !strcmp(argv[1], "stress"))
		return cmd_stress(atoi(argv[2]), strtoull(argv[3], NULL, 0));
	if (argc >= 2 && !strcmp(argv[1], "oom"))
		return cmd_oom();
	if (argc >= 4 && !strcmp(argv[1], "fork"))
		return cmd_fork(atoi(argv[2]), strtoull(argv[3], NULL, 0));
	if (argc >= 2 && !strcmp(argv[1], "hostlimit"))
		return cmd_hostlimit();
	if (argc >= 2 && !strcmp(argv[1], "small"))
		return cmd_small();
	if (argc >= 3 && !strcmp(argv[1], "expandable"))
		return cmd_expandable(strtoull(argv[2], NULL, 0));
	fprintf(stderr, "usage: sim-pool meminfo TOTAL | stress ROUNDS SEED | oom | fork N DEVTOTAL | hostlimit | small | expandable BYTES\n");
	return 2;
}
