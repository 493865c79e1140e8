/* tests/sim/interpose/hookprog.c - drives libvmem.so's cudart hooks on
 * the simulated GPU (LD_PRELOAD=libvmem.so, LD_LIBRARY_PATH=simgpu_dir).
 * Linked against the real libcudart like an application.
 *
 *   hookprog basic     one allocation, a copy, a set, a launch; prints "ok"
 *   hookprog threads   two threads, each allocating, filling with mt_fill,
 *                      copying back and checking, many rounds; prints "ok"
 *                      and the number of allocations checked
 *   hookprog probe     one launch of mt_probe(a, x, b, y, z, c) with a and b
 *                      from cudaMalloc, c a host pointer; prints the four
 *                      word values so the runner can match the trace
 *   hookprog driver    cuMemAlloc/cuMemFree/cuMemGetInfo and
 *                      cuLaunchKernel obtained through
 *                      cudaGetDriverEntryPointByVersion; prints "ok"
 *   hookprog stub-launch  (run with an 8 MiB budget) mt_probe launched
 *                      as nvcc 13's <<<...>>> stubs launch (through
 *                      __cudaLaunchKernel with a kernel handle) on a 4 MiB
 *                      `a` that a 4 MiB filler and a 2 MiB `b` have pushed
 *                      out of the budget; checks a[0] and b[0], prints
 *                      the two pointers as "a=... b=..."
 *   hookprog many-args  (run with a 48 MiB budget) 20 tensors of 1.5 MiB,
 *                      pushed out by a 32 MiB filler, then filled by one
 *                      mt_list_fill launch that takes all 20 addresses in
 *                      one struct parameter (as PyTorch's foreach kernels
 *                      do); checks every tensor, prints "ok"
 *   hookprog launch-host-map  (run with an 8 MiB budget, VMEM_HOST_MAP on)
 *                      the launch of launch-oom runs: the pages past its
 *                      pointers' first mapped from the host; checks every
 *                      byte of both tensors after it, prints "ok"
 *   hookprog launch-oom  (run with a budget under 12 MiB) one mt_probe
 *                      launch whose two 6 MiB arguments cannot be resident
 *                      together, its return value ignored as a <<<>>>
 *                      launch does; prints the cudaGetLastError that
 *                      follows ("last=<name>") and "ok"
 *   hookprog unseen-write  launches of mt_fill and mt_probe through
 *                      kernel handles vmem never saw handed out (taken
 *                      from the simulated libcudart directly), so their
 *                      parameter layouts are unknown to vmem, the second
 *                      while an error of the application
 *                      (cudaSetDevice(7)) is pending; checks that the
 *                      error survives and both kernels ran; prints "ok"
 *   hookprog unseen-rest  (run with a 4 MiB budget) a 2 MiB tensor pushed
 *                      out, brought back for a memset of its middle (the
 *                      pool keeps the rest on the host), then filled
 *                      whole by an mt_fill launch vmem cannot see into,
 *                      pushed out and read back; checks every element,
 *                      prints "ok"
 *   hookprog ipc       (run with an 8 MiB budget) the IPC, handle and
 *                      pointer queries on a 4 MiB allocation pushed out
 *                      of the budget (and on pinned host memory); prints
 *                      one "call=result" line each, for the runner
 * Exit status 0 on success; every failure prints what was expected and got.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define CHECK_CU(call)                                                           \
	do {                                                                     \
		CUresult r_ = (call);                                            \
		if (r_ != CUDA_SUCCESS) {                                        \
			fprintf(stderr, "hookprog: %s failed: CUresult %d, expected CUDA_SUCCESS\n", \
				#call, (int)r_);                                 \
			exit(1);                                                 \
		}                                                                \
	} while (0)
#define CHECK(call)                                                              \
	do {                                                                     \
		cudaError_t e_ = (call);                                         \
		if (e_ != cudaSuccess) {                                         \
			fprintf(stderr, "hookprog: %s failed: %s (%d), expected cudaSuccess\n", \
				#call, cudaGetErrorName(e_), (int)e_);           \
			exit(1);                                                 \
		}                                                                \
	} while (0)

static const char image[] = "// simulated GPU: any image is accepted\n";
static cudaKernel_t k_fill, k_probe, k_list;

static void load_kernels(void)
{
	cudaLibrary_t lib;

	CHECK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(cudaLibraryGetKernel(&k_fill, lib, "mt_fill"));
	CHECK(cudaLibraryGetKernel(&k_probe, lib, "mt_probe"));
	CHECK(cudaLibraryGetKernel(&k_list, lib, "mt_list_fill"));
}

static void fill(float *p, float v, unsigned long long n, cudaStream_t s)
{
	void *args[] = { &p, &v, &n };

	CHECK(cudaLaunchKernel((const void *)k_fill, (dim3){ (unsigned)((n + 255) / 256), 1, 1 }, (dim3){ 256, 1, 1 }, args, 0, s));
}

static int basic(void)
{
	enum { N = 4096 };
	float *d, h[N];

	CHECK(cudaMalloc((void **)&d, N * sizeof(float)));
	CHECK(cudaMemset(d, 0, N * sizeof(float)));
	fill(d, 2.5f, N, NULL);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		if (h[i] != 2.5f) {
			fprintf(stderr, "hookprog: h[%d] = %g, expected 2.5\n", i, h[i]);
			return 1;
		}
	CHECK(cudaFree(d));
	printf("ok\n");
	return 0;
}

enum { ROUNDS = 200 };
static int thread_fail;

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	cudaStream_t s;
	static __thread float h[1 << 14];

	CHECK(cudaStreamCreate(&s));
	for (int r = 0; r < ROUNDS; r++) {
		unsigned long long n = 1024 + (unsigned long long)((r * 37 + id * 101) % 8192);
		float v = (float)(id * 1000 + r);
		float *d;

		CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
		fill(d, v, n, s);
		CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
		CHECK(cudaStreamSynchronize(s));
		for (unsigned long long i = 0; i < n; i++)
			if (h[i] != v) {
				fprintf(stderr, "hookprog: thread %d round %d: h[%llu] = %g, expected %g\n",
					id, r, i, h[i], v);
				__atomic_store_n(&thread_fail, 1, __ATOMIC_RELAXED);
				return NULL;
			}
		CHECK(cudaFree(d));
	}
	CHECK(cudaStreamDestroy(s));
	return NULL;
}

static int threads(void)
{
	pthread_t t[2];
	size_t free0, free1, total;

	CHECK(cudaMemGetInfo(&free0, &total));
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	if (thread_fail)
		return 1;
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemGetInfo(&free1, &total));
	/* A caching pool may keep freed chunks mapped, so free memory need
	 * not return to its start value; it must not grow past it.  Lost or
	 * overlapping allocations are checked from the trace by the runner. */
	if (free1 > free0) {
		fprintf(stderr, "hookprog: free memory %zu after the threads, expected at most %zu\n",
			free1, free0);
		return 1;
	}
	printf("ok %d allocations\n", 2 * ROUNDS);
	return 0;
}

static int probe(void)
{
	float *a, *b, hv[2];
	unsigned long long x = 0x1234;
	int y = 7;
	double z = 3.5;
	static char host_buf[64];
	const void *c = host_buf;
	void *args[] = { &a, &x, &b, &y, &z, &c };

	CHECK(cudaMalloc((void **)&a, 1 << 20));
	CHECK(cudaMalloc((void **)&b, 1 << 20));
	CHECK(cudaLaunchKernel((const void *)k_probe, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args, 0, NULL));
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(&hv[0], a, sizeof(float), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(&hv[1], b, sizeof(float), cudaMemcpyDeviceToHost));
	if (hv[0] != 7.0f || hv[1] != 3.5f) {
		fprintf(stderr, "hookprog: probe wrote a[0]=%g b[0]=%g, expected 7 and 3.5\n", hv[0], hv[1]);
		return 1;
	}
	printf("a=%p b=%p x=0x%llx c=%p\n", (void *)a, (void *)b, x, c);
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	return 0;
}

typedef CUresult (*cu_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*cu_free_fn)(CUdeviceptr);
typedef CUresult (*cu_info_fn)(size_t *, size_t *);

static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;

	CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 13000, cudaEnableDefault, &q));
	if (!fn || q != cudaDriverEntryPointSuccess) {
		fprintf(stderr, "hookprog: no driver entry point for %s (result %d)\n", name, (int)q);
		exit(1);
	}
	return fn;
}

static int driver(void)
{
	cu_alloc_fn alloc = (cu_alloc_fn)entry("cuMemAlloc");
	cu_free_fn dfree = (cu_free_fn)entry("cuMemFree");
	cu_info_fn info = (cu_info_fn)entry("cuMemGetInfo");
	CUdeviceptr p;
	size_t f, t;
	float h[256];

	if (alloc(&p, sizeof(h)) != CUDA_SUCCESS || info(&f, &t) != CUDA_SUCCESS) {
		fprintf(stderr, "hookprog: cuMemAlloc/cuMemGetInfo through entry points failed\n");
		return 1;
	}
	fill((float *)(uintptr_t)p, 1.5f, 256, NULL);
	CHECK(cudaMemcpy(h, (void *)(uintptr_t)p, sizeof(h), cudaMemcpyDeviceToHost));
	if (h[255] != 1.5f) {
		fprintf(stderr, "hookprog: h[255] = %g after mt_fill, expected 1.5\n", h[255]);
		return 1;
	}
	if (dfree(p) != CUDA_SUCCESS) {
		fprintf(stderr, "hookprog: cuMemFree through the entry point failed\n");
		return 1;
	}
	printf("ok\n");
	return 0;
}

extern cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t sh,
				      cudaStream_t s);

static int stub_launch(void)
{
	float *a, *b, *filler, hv[2];
	unsigned long long x = 0;
	int y = 7;
	double z = 3.5;
	const void *c = NULL;
	void *args[] = { &a, &x, &b, &y, &z, &c };

	CHECK(cudaMalloc((void **)&a, 4 << 20));
	CHECK(cudaMalloc((void **)&filler, 4 << 20));
	CHECK(cudaMemset(a, 0, 4 << 20));
	CHECK(cudaMemset(filler, 0, 4 << 20));
	CHECK(cudaMalloc((void **)&b, 2 << 20));   /* evicts the oldest: a */
	CHECK(cudaMemset(b, 0, 2 << 20));
	CHECK(__cudaLaunchKernel(k_probe, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args, 0, NULL));
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(&hv[0], a, sizeof(float), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(&hv[1], b, sizeof(float), cudaMemcpyDeviceToHost));
	if (hv[0] != 7.0f || hv[1] != 3.5f) {
		fprintf(stderr, "hookprog: probe through __cudaLaunchKernel wrote a[0]=%g b[0]=%g, "
			"expected 7 and 3.5\n", hv[0], hv[1]);
		return 1;
	}
	printf("a=%p b=%p\n", (void *)a, (void *)b);
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(filler));
	return 0;
}

/* More tensors in one launch than a call holds inline (VMEM_INLINE_REFS):
 * every one must be made resident, none dropped. */
static int many_args(void)
{
	enum { N = 20, BYTES = 3 << 19 };
	struct { float *p[48]; } list;
	int n = N;
	unsigned long long count = BYTES / sizeof(float);
	float v = 4.25f, *filler, h[2];
	void *args[] = { &list, &n, &count, &v };

	memset(&list, 0, sizeof(list));
	for (int i = 0; i < N; i++) {
		CHECK(cudaMalloc((void **)&list.p[i], BYTES));
		CHECK(cudaMemset(list.p[i], 0, BYTES));
	}
	CHECK(cudaMalloc((void **)&filler, 32 << 20));   /* evicts most of the list */
	CHECK(cudaMemset(filler, 0, 32 << 20));
	CHECK(cudaLaunchKernel((const void *)k_list, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args, 0,
			       NULL));
	CHECK(cudaDeviceSynchronize());
	for (int i = 0; i < N; i++) {
		CHECK(cudaMemcpy(&h[0], list.p[i], sizeof(float), cudaMemcpyDeviceToHost));
		CHECK(cudaMemcpy(&h[1], (char *)list.p[i] + BYTES - sizeof(float), sizeof(float),
				 cudaMemcpyDeviceToHost));
		if (h[0] != v || h[1] != v) {
			fprintf(stderr, "hookprog: tensor %d of the list holds %g ... %g after "
				"mt_list_fill, expected %g\n", i, h[0], h[1], v);
			return 1;
		}
	}
	for (int i = 0; i < N; i++)
		CHECK(cudaFree(list.p[i]));
	CHECK(cudaFree(filler));
	printf("ok\n");
	return 0;
}

/* What nvcc's <<<...>>> stub does: launch, drop the status; the
 * framework then asks cudaGetLastError (C10_CUDA_KERNEL_LAUNCH_CHECK). */
static int launch_oom(void)
{
	enum { MB6 = 6 << 20 };
	float *a, *b;
	unsigned long long x = 0;
	int y = 7;
	double z = 3.5;
	const void *c = NULL;
	void *args[] = { &a, &x, &b, &y, &z, &c };
	cudaError_t last;

	CHECK(cudaMalloc((void **)&a, MB6));
	CHECK(cudaMalloc((void **)&b, MB6));
	CHECK(cudaMemset(a, 0, MB6));
	CHECK(cudaMemset(b, 0, MB6));
	(void)cudaGetLastError();
	(void)cudaLaunchKernel((const void *)k_probe, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args, 0, NULL);
	last = cudaGetLastError();
	printf("last=%s\n", cudaGetErrorName(last));
	if (last != cudaErrorMemoryAllocation) {
		fprintf(stderr, "hookprog: cudaGetLastError after a launch that cannot fit the budget "
			"returned %s (%d), expected cudaErrorMemoryAllocation\n",
			cudaGetErrorName(last), (int)last);
		return 1;
	}
	if (cudaGetLastError() != cudaSuccess) {
		fprintf(stderr, "hookprog: the out-of-memory error should be cleared by the first "
			"cudaGetLastError, a second one returned an error\n");
		return 1;
	}
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	printf("ok\n");
	return 0;
}

/* The launch of launch_oom where vmem maps what the budget cannot hold
 * from the host: it succeeds, writes its two floats, and every other byte
 * of both tensors (written before, partly evicted to the host) is kept. */
static int launch_host_map(void)
{
	enum { MB6 = 6 << 20, N = MB6 / sizeof(float) };
	float *a, *b, *h = malloc(MB6);
	unsigned long long x = 0;
	int y = 7;
	double z = 3.5;
	const void *c = NULL;
	void *args[] = { &a, &x, &b, &y, &z, &c };

	if (!h)
		return 1;
	CHECK(cudaMalloc((void **)&a, MB6));
	CHECK(cudaMalloc((void **)&b, MB6));
	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; i < N; i++)
			h[i] = (float)(t * 1000000 + (int)i);
		CHECK(cudaMemcpy(t ? b : a, h, MB6, cudaMemcpyHostToDevice));
	}
	CHECK(cudaLaunchKernel((const void *)k_probe, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, args, 0, NULL));
	CHECK(cudaDeviceSynchronize());
	for (int t = 0; t < 2; t++) {
		CHECK(cudaMemcpy(h, t ? b : a, MB6, cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < N; i++) {
			float want = i ? (float)(t * 1000000 + (int)i) : (t ? 3.5f : 7.0f);

			if (h[i] != want) {
				fprintf(stderr, "hookprog: %s[%zu] = %g after the launch, expected %g\n",
					t ? "b" : "a", i, h[i], want);
				return 1;
			}
		}
	}
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	free(h);
	printf("ok\n");
	return 0;
}

/* PyTorch's vectorized fill and foreach add (the simulator has both under
 * their mangled names) over 4 MiB tensors at the heads of 20 MiB segments,
 * as a caching allocator hands them out, under a budget
 * (VMEM_DEVICE_LIMIT=24M) that cannot hold the rest of two segments: the
 * foreach add runs only if vmem bounds its scanned pointers by the
 * kernel's own counts (interpose/kernel_bounds.h).  The foreach metadata
 * also keeps a slot an earlier launch left (a third segment's head), as
 * PyTorch's does: no block names it, and vmem leaves it alone. */
static int torch_bounds(void)
{
	enum { SEG = 20 << 20, N = 1 << 20, M = 64, BLOCKS = 320, CHUNK = 65536 };
	static const char fill_name[] =
		"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
		"St5arrayIPcLm1EEEEviT0_T1_";
	static const char add_name[] =
		"_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_"
		"tensor_apply_kernelINS1_18TensorListMetadataILi2ELb0EEENS1_24BinaryOpListAlpha"
		"FunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEENSt9enable_ifIXntsrT0_20use_large_kernel_"
		"argEvE4typeET_SA_DpT1_";
	static uint64_t meta[3144 / 8];
	static float h[N];
	unsigned char *bt = (unsigned char *)meta + 2 * M * 8 + M * 8;
	int *bc = (int *)(bt + BLOCKS);
	cudaLibrary_t lib;
	cudaKernel_t k_tfill, k_tadd;
	float *a, *b, *c, alpha = 0.5f;
	unsigned char functor = 0, plus = 0;
	int n = N, chunks = N / CHUNK;

	CHECK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(cudaLibraryGetKernel(&k_tfill, lib, fill_name));
	CHECK(cudaLibraryGetKernel(&k_tadd, lib, add_name));
	CHECK(cudaMalloc((void **)&a, SEG));
	CHECK(cudaMalloc((void **)&b, SEG));
	CHECK(cudaMalloc((void **)&c, SEG));
	for (int k = 0; k < 3; k++) {
		float v = k == 0 ? 1.0f : k == 1 ? 2.0f : 3.0f;
		float *p = k == 0 ? a : k == 1 ? b : c;
		void *args[] = { &n, &v, &p };

		CHECK(cudaLaunchKernel((const void *)k_tfill, (dim3){ N / 512, 1, 1 },
				       (dim3){ 128, 1, 1 }, args, 0, NULL));
	}
	/* slot 0: a += 0.5 * b over N; slot 3: c's head, 1000 elements, left
	 * by "an earlier launch" (no block of this one reads it) */
	meta[0] = (uintptr_t)a, meta[M] = (uintptr_t)b, meta[2 * M] = N;
	meta[3] = (uintptr_t)c, meta[M + 3] = (uintptr_t)c, meta[2 * M + 3] = 1000;
	for (int k = 0; k < chunks; k++)
		bt[k] = 0, bc[k] = k;
	{
		void *args[] = { meta, &functor, &plus, &alpha };

		CHECK(cudaLaunchKernel((const void *)k_tadd, (dim3){ (unsigned)chunks, 1, 1 },
				       (dim3){ 512, 1, 1 }, args, 0, NULL));
	}
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(h, a, sizeof(h), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		if (h[i] != 2.0f) {
			fprintf(stderr, "hookprog: a[%d] = %g after a += 0.5 * b, expected 2\n", i, h[i]);
			return 1;
		}
	CHECK(cudaMemcpy(h, c, sizeof(h), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		if (h[i] != 3.0f) {
			fprintf(stderr, "hookprog: c[%d] = %g, expected 3 (the fill's)\n", i, h[i]);
			return 1;
		}
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(c));
	printf("ok\n");
	return 0;
}

/* Streams used, destroyed, then a cudaFree: vmem records its whole-device
 * fence on the streams it has seen, and must have forgotten destroyed ones
 * (the simulator aborts on any use of a destroyed stream). */
static int destroyed_streams(void)
{
	enum { NS = 8, N = 1 << 16 };
	cudaStream_t s[NS];
	float *d[NS], *keep;

	CHECK(cudaMalloc((void **)&keep, N));
	for (int i = 0; i < NS; i++) {
		CHECK(cudaStreamCreate(&s[i]));
		CHECK(cudaMalloc((void **)&d[i], N));
		CHECK(cudaMemsetAsync(d[i], 0, N, s[i]));
		CHECK(cudaStreamSynchronize(s[i]));
		CHECK(cudaStreamDestroy(s[i]));
	}
	for (int i = 0; i < NS; i++)
		CHECK(cudaFree(d[i]));
	CHECK(cudaFree(keep));
	printf("ok\n");
	return 0;
}

/* A launch vmem cannot read the parameters of may write vmem memory
 * unseen: the runner checks that vmem counted both (VMEM_STATS). */
static int unseen_write(void)
{
	typedef cudaError_t (*get_kernel_fn)(cudaKernel_t *, cudaLibrary_t, const char *);
	void *rt = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
	get_kernel_fn get = rt ? (get_kernel_fn)dlsym(rt, "cudaLibraryGetKernel") : NULL;
	unsigned long long n = 1024, x = 0;
	float *d, *e, v = 6.5f, h[1024];
	int y = 7;
	double z = 3.5;
	const void *c = NULL;
	void *fill_args[] = { &d, &v, &n };
	void *probe_args[] = { &d, &x, &e, &y, &z, &c };
	cudaLibrary_t lib;
	cudaKernel_t kfill, kprobe;
	cudaError_t last;

	if (!get) {
		fprintf(stderr, "hookprog: cudaLibraryGetKernel not found in libcudart.so.13\n");
		return 1;
	}
	CHECK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(get(&kfill, lib, "mt_fill"));
	CHECK(get(&kprobe, lib, "mt_probe"));
	CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&e, n * sizeof(float)));
	/* 1: a layout vmem cannot learn */
	CHECK(cudaLaunchKernel((const void *)kfill, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, fill_args,
			       0, NULL));
	(void)cudaGetLastError();
	/* 2: another kernel, while an error of the application is pending */
	if (cudaSetDevice(7) == cudaSuccess) {
		fprintf(stderr, "hookprog: cudaSetDevice(7) succeeded on a one-device simulator\n");
		return 1;
	}
	CHECK(cudaLaunchKernel((const void *)kprobe, (dim3){ 1, 1, 1 }, (dim3){ 1, 1, 1 }, probe_args,
			       0, NULL));
	last = cudaGetLastError();
	if (last != cudaErrorInvalidDevice) {
		fprintf(stderr, "hookprog: cudaGetLastError after the launch returned %s, expected the "
			"application's cudaErrorInvalidDevice\n", cudaGetErrorName(last));
		return 1;
	}
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	if (h[0] != 7.0f || h[1] != 6.5f || h[1023] != 6.5f) {
		fprintf(stderr, "hookprog: d holds %g %g ... %g, expected 7 (mt_probe) 6.5 ... 6.5 "
			"(mt_fill)\n", h[0], h[1], h[1023]);
		return 1;
	}
	CHECK(cudaMemcpy(h, e, sizeof(float), cudaMemcpyDeviceToHost));
	if (h[0] != 3.5f) {
		fprintf(stderr, "hookprog: e[0] = %g after mt_probe, expected 3.5\n", h[0]);
		return 1;
	}
	CHECK(cudaFree(d));
	CHECK(cudaFree(e));
	printf("ok\n");
	return 0;
}

/* The pool maps a page that a call rewrites in part without its other
 * bytes, which stay in its host slot until a call reaches them.  A launch
 * vmem cannot see into may write any byte: those bytes must be back
 * before it runs (pool_fill_rests), or the pool, evicting the page, would
 * copy out only the part it knew of and its writes around it would be
 * lost. */
static int unseen_rest(void)
{
	typedef cudaError_t (*get_kernel_fn)(cudaKernel_t *, cudaLibrary_t, const char *);
	void *rt = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
	get_kernel_fn get = rt ? (get_kernel_fn)dlsym(rt, "cudaLibraryGetKernel") : NULL;
	const size_t MB = 1u << 20;
	unsigned long long n = 2 * MB / sizeof(float);
	float *d, v = 6.5f, *h = malloc(2 * MB);
	void *big, *fill_args[] = { &d, &v, &n };
	cudaLibrary_t lib;
	cudaKernel_t kfill;

	if (!get || !h) {
		fprintf(stderr, "hookprog: cudaLibraryGetKernel not found in libcudart.so.13\n");
		return 1;
	}
	CHECK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(get(&kfill, lib, "mt_fill"));
	CHECK(cudaMalloc((void **)&d, 2 * MB));
	CHECK(cudaMalloc(&big, 4 * MB));
	for (unsigned long long i = 0; i < n; i++)
		h[i] = (float)i;
	CHECK(cudaMemcpy(d, h, 2 * MB, cudaMemcpyHostToDevice));
	CHECK(cudaMemset(big, 1, 4 * MB));                         /* d out */
	CHECK(cudaMemset((char *)d + MB / 4, 0, MB / 2));           /* d back, its rest on the host */
	CHECK(cudaLaunchKernel((const void *)kfill, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, fill_args,
			       0, NULL));
	CHECK(cudaMemset(big, 2, 4 * MB));                         /* d out again */
	CHECK(cudaMemcpy(h, d, 2 * MB, cudaMemcpyDeviceToHost));
	for (unsigned long long i = 0; i < n; i++)
		if (h[i] != 6.5f) {
			fprintf(stderr, "hookprog: d[%llu] = %g after mt_fill wrote 6.5 everywhere "
				"(the bytes around the memset's span lost)\n", i, h[i]);
			return 1;
		}
	CHECK(cudaFree(d));
	CHECK(cudaFree(big));
	free(h);
	printf("ok\n");
	return 0;
}

static const char *cu_name(CUresult r)
{
	const char *n = NULL;

	return cuGetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
}

/* The calls that would hand out or describe vmem's physical chunks. */
static int ipc(void)
{
	char *p, *filler, *host;
	cudaIpcMemHandle_t rh;
	CUipcMemHandle dh;
	CUmemGenericAllocationHandle gh;
	CUdeviceptr base = 0, dp;
	size_t size = 0;
	unsigned int mtype = 0;
	int ordinal = -1, mapped = -1, managed = -1;
	void *hostp = (void *)1;
	CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					CU_POINTER_ATTRIBUTE_HOST_POINTER,
					CU_POINTER_ATTRIBUTE_IS_MANAGED };
	void *data[] = { &mtype, &hostp, &managed };
	struct cudaPointerAttributes pa;

	CHECK(cudaMalloc((void **)&p, 4 << 20));
	CHECK(cudaMemset(p, 1, 4 << 20));
	CHECK(cudaMalloc((void **)&filler, 8 << 20));
	CHECK(cudaMemset(filler, 2, 8 << 20));   /* pushes p out of the budget */
	dp = (CUdeviceptr)(uintptr_t)(p + 100);
	printf("cudaIpcGetMemHandle=%s\n", cudaGetErrorName(cudaIpcGetMemHandle(&rh, p)));
	printf("cuIpcGetMemHandle=%s\n", cu_name(cuIpcGetMemHandle(&dh, (CUdeviceptr)(uintptr_t)p)));
	printf("cuMemRetainAllocationHandle=%s\n", cu_name(cuMemRetainAllocationHandle(&gh, p + 100)));
	printf("cuMemGetAddressRange=%s\n", cu_name(cuMemGetAddressRange(&base, &size, dp)));
	printf("cuPointerGetAttribute(RANGE_START_ADDR)=%s\n",
	       cu_name(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp)));
	CHECK_CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp));
	CHECK_CU(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, dp));
	CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dp));
	CHECK_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, dp));
	printf("cuPointerGetAttribute=type %u ptr_ok %d device %d mapped %d\n", mtype,
	       base == dp, ordinal, mapped);
	mtype = 0;
	CHECK_CU(cuPointerGetAttributes(3, attrs, data, dp));
	printf("cuPointerGetAttributes=type %u host %p managed %d\n", mtype, hostp, managed);
	CHECK(cudaPointerGetAttributes(&pa, p + 100));
	printf("cudaPointerGetAttributes=type %d ptr_ok %d device %d\n", (int)pa.type,
	       pa.devicePointer == p + 100, pa.device);
	/* memory that is not vmem's is the driver's business */
	CHECK(cudaHostAlloc((void **)&host, 4096, 0));
	CHECK(cudaPointerGetAttributes(&pa, host));
	printf("cudaPointerGetAttributes(host)=type %d\n", (int)pa.type);
	CHECK(cudaFreeHost(host));
	/* the data survived all of it */
	CHECK(cudaMemcpy(&mtype, p + 100, 1, cudaMemcpyDeviceToHost));
	printf("byte=%u\n", mtype & 0xff);
	CHECK(cudaFree(p));
	CHECK(cudaFree(filler));
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "basic";

	/* before vmem sees any kernel handle handed out */
	if (strcmp(mode, "unseen-write") == 0)
		return unseen_write();
	if (strcmp(mode, "unseen-rest") == 0)
		return unseen_rest();
	load_kernels();
	if (strcmp(mode, "basic") == 0)
		return basic();
	if (strcmp(mode, "threads") == 0)
		return threads();
	if (strcmp(mode, "probe") == 0)
		return probe();
	if (strcmp(mode, "driver") == 0)
		return driver();
	if (strcmp(mode, "many-args") == 0)
		return many_args();
	if (strcmp(mode, "stub-launch") == 0)
		return stub_launch();
	if (strcmp(mode, "launch-oom") == 0)
		return launch_oom();
	if (strcmp(mode, "launch-host-map") == 0)
		return launch_host_map();
	if (strcmp(mode, "torch-bounds") == 0)
		return torch_bounds();
	if (strcmp(mode, "destroyed-streams") == 0)
		return destroyed_streams();
	if (strcmp(mode, "ipc") == 0)
		return ipc();

	fprintf(stderr, "hookprog: unknown mode '%s'; expected basic, threads, probe, driver, "
		"stub-launch, many-args, launch-oom, launch-host-map, destroyed-streams, unseen-write, unseen-rest "
		"or ipc\n", mode);
	return 2;
}
