/* tests/sim/simgpu/sim_simgpu.c - behaviour of the simulated GPU as an
 * application sees it.
 *
 * Linked against the REAL CUDA 13 libcudart.so (and the toolkit's stub
 * libcuda.so); meson runs it with LD_LIBRARY_PATH pointing at the
 * simulated libraries, so each case also proves that the SONAMEs and the
 * libcudart.so.13 version node let a real binary bind to them.
 *
 * Usage: sim-simgpu <case>; each case prints what it expected and what it
 * got on failure and exits 1.  The fault cases end in abort() by design
 * and print the exact line they expect ("expect-line: ...") first, for
 * tests/sim/simgpu/expect_stderr.py to compare.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

static int failures;

static dim3 dim3_n(unsigned x)
{
	dim3 d = { x, 1, 1 };

	return d;
}

static dim3 dim3_1(void)
{
	return dim3_n(1);
}

#define EXPECT_EQ(what, expected, got) do { \
	long long e_ = (long long)(expected), g_ = (long long)(got); \
	if (e_ != g_) { \
		fprintf(stderr, "FAIL %s:%d %s: expected %lld, got %lld\n", \
			__FILE__, __LINE__, what, e_, g_); \
		failures++; \
	} \
} while (0)

#define EXPECT_NEAR(what, expected, got, rel) do { \
	double e_ = (expected), g_ = (got); \
	if (!(g_ >= e_ * (1 - (rel)) && g_ <= e_ * (1 + (rel)))) { \
		fprintf(stderr, "FAIL %s:%d %s: expected %.6f (+-%g%%), got %.6f\n", \
			__FILE__, __LINE__, what, e_, (rel) * 100, g_); \
		failures++; \
	} \
} while (0)

#define CK(call) EXPECT_EQ(#call, cudaSuccess, (call))
#define CU(call) EXPECT_EQ(#call, CUDA_SUCCESS, (call))

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define GRAN (2 * MIB)

/* TITAN X model figures (docs/simgpu.md), checked independently here */
#define TX_LINK 16.0e9
#define TX_MEMBW 336.0e9
#define TX_LAUNCH 5.0e-6

static CUmemAllocationProp dev_prop(void)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = 0;
	return p;
}

static void set_rw(CUdeviceptr p, size_t size)
{
	CUmemAccessDesc d;

	memset(&d, 0, sizeof(d));
	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = 0;
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemSetAccess(p, size, &d, 1));
}

/* SIMGPU_MEM=64M: cudaMalloc past the capacity fails like CUDA. */
static void case_oom(void)
{
	void *a = NULL, *b = NULL;
	size_t free_b = 0, total = 0;

	CK(cudaMalloc(&a, 32 * MIB));
	EXPECT_EQ("cudaMalloc(48M) with 32M of 64M used",
		  cudaErrorMemoryAllocation, cudaMalloc(&b, 48 * MIB));
	EXPECT_EQ("cudaGetLastError after the failure",
		  cudaErrorMemoryAllocation, cudaGetLastError());
	EXPECT_EQ("cudaGetLastError is reset", cudaSuccess, cudaGetLastError());
	CK(cudaMemGetInfo(&free_b, &total));
	EXPECT_EQ("total", 64 * MIB, total);
	EXPECT_EQ("free", 32 * MIB, free_b);
	CK(cudaFree(a));
	CK(cudaMalloc(&b, 48 * MIB));
	CK(cudaFree(b));
	EXPECT_EQ("cudaFree of a non-device pointer", cudaErrorInvalidValue,
		  cudaFree(&a));
	printf("oom: %s\n", cudaGetErrorString(cudaErrorMemoryAllocation));
}

/* Reserve, create, map, access, unmap, remap elsewhere: data stays in the
 * physical allocation. Also the VMM error codes. */
static void case_vmm(void)
{
	CUmemAllocationProp prop = dev_prop();
	CUmemGenericAllocationHandle h, big;
	CUdeviceptr va;
	size_t gran = 0, n = 4 * MIB, i, free_b, total;
	unsigned char *pat = malloc(n), *back = calloc(1, n);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t,
			   const CUmemAllocationProp *, unsigned long long);
	enum cudaDriverEntryPointQueryResult qr;

	CU(cuInit(0));
	CU(cuMemGetAllocationGranularity(&gran, &prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	EXPECT_EQ("granularity", GRAN, gran);
	CU(cuMemAddressReserve(&va, 16 * MIB, 0, 0, 0));
	EXPECT_EQ("reservation aligned to 2 MiB", 0, va % GRAN);

	/* the entry point a framework uses instead of the exported symbol */
	CK(cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&create,
					    12000, cudaEnableDefault, &qr));
	EXPECT_EQ("entry point status", cudaDriverEntryPointSuccess, qr);
	EXPECT_EQ("entry point found", 1, create != NULL);
	if (!create)
		return;
	CU(create(&h, n, &prop, 0));
	EXPECT_EQ("cuMemCreate misaligned size", CUDA_ERROR_INVALID_VALUE,
		  cuMemCreate(&big, 3 * MIB, &prop, 0));
	EXPECT_EQ("cuMemCreate past capacity (64M)", CUDA_ERROR_OUT_OF_MEMORY,
		  cuMemCreate(&big, 62 * MIB, &prop, 0));
	CU(cuMemGetInfo(&free_b, &total));
	EXPECT_EQ("free after 4M created", 60 * MIB, free_b);

	CU(cuMemMap(va, n, 0, h, 0));
	EXPECT_EQ("cuMemMap over a mapped range", CUDA_ERROR_INVALID_VALUE,
		  cuMemMap(va, n, 0, h, 0));
	set_rw(va, n);
	for (i = 0; i < n; i++)
		pat[i] = (unsigned char)(i * 131 + 7);
	CK(cudaMemcpy((void *)va, pat, n, cudaMemcpyHostToDevice));
	CU(cuMemUnmap(va, n));

	/* same physical memory at another address */
	CU(cuMemMap(va + 8 * MIB, n, 0, h, 0));
	set_rw(va + 8 * MIB, n);
	CK(cudaMemcpy(back, (void *)(va + 8 * MIB), n, cudaMemcpyDefault));
	EXPECT_EQ("bytes kept across unmap/remap", 0, memcmp(pat, back, n));

	/* release while mapped: memory stays until unmapped */
	CU(cuMemRelease(h));
	CU(cuMemGetInfo(&free_b, &total));
	EXPECT_EQ("free while released but mapped", 60 * MIB, free_b);
	EXPECT_EQ("cuMemAddressFree with a live mapping",
		  CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 16 * MIB));
	CU(cuMemUnmap(va + 8 * MIB, n));
	CU(cuMemGetInfo(&free_b, &total));
	EXPECT_EQ("free after unmap of a released handle", 64 * MIB, free_b);
	CU(cuMemAddressFree(va, 16 * MIB));
	free(pat);
	free(back);
	printf("vmm: round trip kept %zu bytes\n", n);
}

/* Leaves [va, va+2M) reserved, once mapped, now unmapped. */
static CUdeviceptr unmapped_range(void)
{
	CUmemAllocationProp prop = dev_prop();
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = 0;

	CU(cuMemAddressReserve(&va, 4 * MIB, 0, 0, 0));
	CU(cuMemCreate(&h, GRAN, &prop, 0));
	CU(cuMemMap(va, GRAN, 0, h, 0));
	set_rw(va, GRAN);
	((volatile char *)va)[100] = 1;     /* mapped: fine */
	CU(cuMemUnmap(va, GRAN));
	CU(cuMemRelease(h));
	return va;
}

static void expect_line(const char *op, uintptr_t addr)
{
	fprintf(stderr, "expect-line: simgpu: illegal address 0x%" PRIxPTR
		" in %s\n", addr, op);
	fflush(stderr);
}

/* Host code touching a reserved but unmapped range is caught. */
static void case_fault_host(void)
{
	CUdeviceptr va = unmapped_range();

	expect_line("host code", (uintptr_t)va + 100);
	((volatile char *)va)[100] = 2;
	fprintf(stderr, "FAIL: the store to an unmapped range went through\n");
	exit(1);
}

static void get_kernel(const char *name, cudaKernel_t *k)
{
	static const char image[] = "// any PTX: the simulator runs host code";
	cudaLibrary_t lib;

	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(cudaLibraryGetKernel(k, lib, name));
}

/* A kernel writing into an unmapped range is caught, naming the kernel. */
static void case_fault_kernel(void)
{
	CUdeviceptr va = unmapped_range();
	cudaKernel_t k;
	float *p = (float *)(va + 64), v = 1.0f;
	unsigned long long n = 16;
	void *args[] = { &p, &v, &n };

	get_kernel("mt_fill", &k);
	expect_line("mt_fill", (uintptr_t)p);
	cudaLaunchKernel((const void *)k, dim3_1(), dim3_1(), args, 0, NULL);
	fprintf(stderr, "FAIL: the kernel wrote to an unmapped range\n");
	exit(1);
}

/* In dry-run nothing is touched, yet a copy into an unmapped range is
 * still caught by the explicit check. */
static void case_fault_dryrun(void)
{
	CUdeviceptr va = unmapped_range();
	static char src[4096];

	expect_line("cudaMemcpy", (uintptr_t)va + 8);
	cudaMemcpy((void *)(va + 8), src, sizeof(src), cudaMemcpyHostToDevice);
	fprintf(stderr, "FAIL: the dry-run copy to an unmapped range passed\n");
	exit(1);
}

/* Run with SIMGPU_MEM=abc: never gets here, the library stops at load. */
static void case_badenv(void)
{
	int n = 0;

	cudaGetDeviceCount(&n);
	fprintf(stderr, "FAIL: a bad SIMGPU_* setting was accepted\n");
	exit(1);
}

static float elapsed(cudaEvent_t a, cudaEvent_t b)
{
	float ms = -1.0f;

	CK(cudaEventElapsedTime(&ms, a, b));
	return ms;
}

/* Virtual time: copies on the two copy engines overlap; copy then compute
 * on one stream serialise; polling an event advances the host. */
static void case_streams(void)
{
	size_t n = 64 * MIB;
	void *h_in, *h_out, *d_a, *d_b;
	cudaStream_t s1, s2;
	cudaEvent_t e0, e1, e2, e3, e4;
	double copy_ms = (TX_LAUNCH + (double)n / TX_LINK) * 1e3;
	double fill_ms = (TX_LAUNCH + (double)n / TX_MEMBW) * 1e3;
	cudaKernel_t fill;
	unsigned long long nf = n / sizeof(float);
	float v = 0.5f;
	void *args[3];

	CK(cudaMallocHost(&h_in, n));
	CK(cudaMallocHost(&h_out, n));
	CK(cudaMalloc(&d_a, n));
	CK(cudaMalloc(&d_b, n));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventCreate(&e2));
	CK(cudaEventCreate(&e3));
	CK(cudaEventCreate(&e4));
	get_kernel("mt_fill", &fill);
	CK(cudaDeviceSynchronize());

	/* H2D on s1 and D2H on s2 start together: separate engines */
	CK(cudaEventRecord(e0, s1));
	CK(cudaStreamWaitEvent(s2, e0, 0));
	CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaMemcpyAsync(h_out, d_b, n, cudaMemcpyDeviceToHost, s2));
	CK(cudaEventRecord(e1, s1));
	CK(cudaEventRecord(e2, s2));
	CK(cudaDeviceSynchronize());
	EXPECT_NEAR("H2D alone (ms)", copy_ms, elapsed(e0, e1), 1e-3);
	EXPECT_NEAR("D2H beside it ends at the same time (ms)", copy_ms,
		    elapsed(e0, e2), 1e-3);

	/* two H2D copies share the H2D engine: they serialise */
	CK(cudaEventRecord(e0, s1));
	CK(cudaStreamWaitEvent(s2, e0, 0));
	CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaMemcpyAsync(d_b, h_in, n, cudaMemcpyHostToDevice, s2));
	CK(cudaEventRecord(e2, s2));
	CK(cudaDeviceSynchronize());
	EXPECT_NEAR("two H2D on one engine (ms)", 2 * copy_ms,
		    elapsed(e0, e2), 1e-3);

	/* copy then kernel on one stream: serial */
	args[0] = &d_a;
	args[1] = &v;
	args[2] = &nf;
	CK(cudaEventRecord(e3, s1));
	CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args, 0, s1));
	CK(cudaEventRecord(e4, s1));
	CK(cudaEventSynchronize(e4));
	EXPECT_NEAR("copy + kernel on one stream (ms)", copy_ms + fill_ms,
		    elapsed(e3, e4), 1e-3);

	/* copy on s1, kernel on s2: overlap */
	CK(cudaEventRecord(e0, s1));
	CK(cudaStreamWaitEvent(s2, e0, 0));
	CK(cudaMemcpyAsync(d_b, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args, 0, s2));
	CK(cudaEventRecord(e1, s1));
	CK(cudaEventRecord(e2, s2));
	CK(cudaDeviceSynchronize());
	EXPECT_NEAR("copy beside a kernel (ms)", copy_ms, elapsed(e0, e1), 1e-3);
	EXPECT_NEAR("kernel beside a copy (ms)", fill_ms, elapsed(e0, e2), 1e-3);

	/* polling: not ready until the host clock passes the copy's end; a
	 * query costs the host SIMGPU_POLL_COST (2 us), not the copy's time,
	 * so polls loop about copy time / 2 us before one succeeds */
	CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaEventRecord(e1, s1));
	EXPECT_EQ("first cudaEventQuery", cudaErrorNotReady, cudaEventQuery(e1));
	EXPECT_EQ("NotReady is not the last error", cudaSuccess,
		  cudaGetLastError());
	EXPECT_EQ("second cudaEventQuery (2 us later)", cudaErrorNotReady, cudaEventQuery(e1));
	{
		long polls = 2;

		while (cudaEventQuery(e1) == cudaErrorNotReady && polls < 100000000)
			polls++;
		EXPECT_NEAR("polls until the copy ended", copy_ms * 1e3 / 2.0, (double)polls, 0.05);
	}
	EXPECT_EQ("stream done too", cudaSuccess, cudaStreamQuery(s1));
	CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
	CK(cudaEventRecord(e1, s1));
	EXPECT_EQ("not ready again", cudaErrorNotReady, cudaEventQuery(e1));
	CK(cudaEventSynchronize(e1));
	EXPECT_EQ("ready after cudaEventSynchronize", cudaSuccess, cudaEventQuery(e1));

	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	CK(cudaFreeHost(h_in));
	CK(cudaFreeHost(h_out));
	CK(cudaFree(d_a));
	CK(cudaFree(d_b));
	printf("streams: copy %.4f ms, kernel %.4f ms\n", copy_ms, fill_ms);
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* SIMGPU_MEM=80G SIMGPU_DRYRUN=1: 64 GiB mapped on a small machine,
 * copies skipped, time and memory still accounted. */
static void case_dryrun(void)
{
	CUmemAllocationProp prop = dev_prop();
	CUmemGenericAllocationHandle h[32];
	CUdeviceptr va;
	size_t chunk = 2 * GIB, i, free_b, total;
	long rss0 = rss_kib();
	char *host, *back;
	void *d = NULL, *d2 = NULL;
	cudaEvent_t a, b;
	cudaKernel_t fill;
	float *fp, v = 1.0f;
	unsigned long long nf = 16 * GIB / sizeof(float);
	void *args[] = { &fp, &v, &nf };

	CU(cuMemAddressReserve(&va, 32 * chunk, 0, 0, 0));
	for (i = 0; i < 32; i++) {
		CU(cuMemCreate(&h[i], chunk, &prop, 0));
		CU(cuMemMap(va + i * chunk, chunk, 0, h[i], 0));
	}
	set_rw(va, 32 * chunk);
	CK(cudaMalloc(&d, 8 * GIB));
	CK(cudaMemGetInfo(&free_b, &total));
	EXPECT_EQ("total", 80 * GIB, total);
	EXPECT_EQ("free after 72 GiB", 8 * GIB, free_b);
	EXPECT_EQ("cudaMalloc(10G) past the capacity",
		  cudaErrorMemoryAllocation, cudaMalloc(&d2, 10 * GIB));

	CK(cudaMallocHost((void **)&host, GIB));
	back = calloc(1, 4096);
	memset(host, 0x5a, 4096);
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a, NULL));
	CK(cudaMemcpy((void *)(va + 63 * GIB), host, GIB,
		      cudaMemcpyHostToDevice));
	CK(cudaMemcpy(back, (void *)(va + 63 * GIB), 4096,
		      cudaMemcpyDeviceToHost));
	CK(cudaEventRecord(b, NULL));
	CK(cudaEventSynchronize(b));
	EXPECT_EQ("dry-run copy left the host buffer alone", 0, back[0]);
	EXPECT_NEAR("1 GiB copy still takes its time (ms)",
		    (TX_LAUNCH + (double)GIB / TX_LINK) * 1e3 +
		    (TX_LAUNCH + 4096 / TX_LINK) * 1e3, elapsed(a, b), 1e-3);

	fp = (float *)va;
	get_kernel("mt_fill", &fill);
	CK(cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args, 0, NULL));
	CK(cudaDeviceSynchronize());
	EXPECT_EQ("RSS grew less than 256 MiB", 1,
		  rss_kib() - rss0 < 256 * 1024);

	CU(cuMemUnmap(va, 32 * chunk));
	for (i = 0; i < 32; i++)
		CU(cuMemRelease(h[i]));
	CU(cuMemAddressFree(va, 32 * chunk));
	CK(cudaFree(d));
	CK(cudaFreeHost(host));
	free(back);
	printf("dryrun: 72 GiB mapped, RSS grew %ld KiB\n", rss_kib() - rss0);
}

/* SIMGPU_REPORT: a child does known work and exits; its report says so. */
/* Forks the child whose calls a report case checks; the child writes the
 * report (SIMGPU_REPORT) at its exit, the parent reads it. */
static pid_t report_fork(const char *path)
{
	if (!path) {
		fprintf(stderr, "FAIL: SIMGPU_REPORT not set\n");
		exit(1);
	}
	unlink(path);
	return fork();
}

/* Waits for the child that ran the case's calls and opens the report it
 * wrote at exit (the case fails when either is missing). */
static FILE *child_report(pid_t pid, const char *path)
{
	int status = 0;
	FILE *f;

	waitpid(pid, &status, 0);
	EXPECT_EQ("child exit", 0, status);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "FAIL: no report at %s\n", path);
		exit(1);
	}
	return f;
}

static void case_report(void)
{
	const char *path = getenv("SIMGPU_REPORT");
	pid_t pid;
	char line[256];
	unsigned long long h2d = 0, d2h = 0, kernels = 0, peak = 0;
	double t = 0;
	FILE *f;

	pid = report_fork(path);
	if (pid == 0) {
		void *host, *dev;
		cudaKernel_t fill;
		float v = 2.0f;
		unsigned long long nf = 1024;
		void *args[] = { &dev, &v, &nf };

		cudaMallocHost(&host, 2 * MIB);
		cudaMalloc(&dev, 3 * MIB);
		cudaMemcpy(dev, host, MIB, cudaMemcpyHostToDevice);
		cudaMemcpy(host, dev, 2 * MIB, cudaMemcpyDeviceToHost);
		get_kernel("mt_fill", &fill);
		cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args,
				 0, NULL);
		exit(0);
	}
	f = child_report(pid, path);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "bytes_h2d: %llu", &h2d);
		sscanf(line, "bytes_d2h: %llu", &d2h);
		sscanf(line, "kernels: %llu", &kernels);
		sscanf(line, "peak_device_bytes: %llu", &peak);
		sscanf(line, "virtual_time_s: %lf", &t);
	}
	fclose(f);
	EXPECT_EQ("bytes_h2d", MIB, h2d);
	EXPECT_EQ("bytes_d2h", 2 * MIB, d2h);
	EXPECT_EQ("kernels", 1, kernels);
	EXPECT_EQ("peak_device_bytes", 3 * MIB, peak);
	/* two synchronous copies, then the kernel */
	EXPECT_NEAR("virtual_time_s", 2 * TX_LAUNCH + 3.0 * MIB / TX_LINK +
		    TX_LAUNCH + 4096 / TX_MEMBW, t, 1e-3);
	printf("report: %s\n", path);
	/* keep the child's report: this process would write its own at exit */
	fflush(NULL);
	_exit(failures ? 1 : 0);
}

/* Host-located VMM memory (cuMemCreate with a host location): not charged
 * to the device (64 MiB of it past a 64M capacity), mapped like device
 * memory, its copies over the link (bytes_d2h) and a kernel's accesses to
 * it counted (kernel_host_bytes); the bytes survive. */
static void case_host_vmm(void)
{
	const char *path = getenv("SIMGPU_REPORT");
	unsigned long long d2h = 0, hb = 0, big = 0;
	char line[256];
	pid_t pid;
	FILE *f;

	pid = report_fork(path);
	if (pid == 0) {
		CUmemAllocationProp prop = dev_prop();
		CUmemGenericAllocationHandle h, large;
		CUdeviceptr va;
		cudaKernel_t fill;
		float *dev, v = 2.5f, back[1024];
		unsigned long long n = 1024;
		void *args[] = { &va, &v, &n };
		int attr = 0;

		CU(cuInit(0));
		CU(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
					0));
		EXPECT_EQ("host VMM supported", 1, attr);
		prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
		CU(cuMemCreate(&large, 64 * MIB, &prop, 0));   /* past the capacity: host memory */
		CU(cuMemCreate(&h, GRAN, &prop, 0));
		CU(cuMemAddressReserve(&va, GRAN, 0, 0, 0));
		CU(cuMemMap(va, GRAN, 0, h, 0));
		set_rw(va, GRAN);
		CK(cudaMalloc((void **)&dev, GRAN));
		CK(cudaMemset(dev, 0, GRAN));
		CK(cudaMemcpy((void *)va, dev, GRAN, cudaMemcpyDefault));   /* to the host */
		get_kernel("mt_fill", &fill);
		CK(cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args, 0, NULL));
		CK(cudaMemcpy(back, (void *)va, sizeof(back), cudaMemcpyDefault));
		for (int i = 0; i < 1024; i++)
			if (back[i] != 2.5f) {
				EXPECT_EQ("the kernel's write through the host mapping", 1, 0);
				break;
			}
		CK(cudaDeviceSynchronize());
		exit(failures ? 1 : 0);
	}
	f = child_report(pid, path);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "bytes_d2h: %llu", &d2h);
		sscanf(line, "kernel_host_bytes: %llu", &hb);
		sscanf(line, "peak_device_bytes: %llu", &big);
	}
	fclose(f);
	/* 2 MiB device -> host memory, then 4 KiB host memory -> pageable */
	EXPECT_EQ("bytes_d2h", 2 * MIB + 4096, d2h);
	EXPECT_EQ("kernel_host_bytes", 4096, hb);
	EXPECT_EQ("peak_device_bytes (host memory not counted)", 2 * MIB, big);
	printf("host-vmm: %llu bytes to host memory, %llu reached by the kernel\n", d2h, hb);
	fflush(NULL);
	_exit(failures ? 1 : 0);
}

/* largest_kernel_bytes: the distinct device bytes of the launch that
 * touched the most; a strided copy counts only the blocks it moves, bytes
 * two arguments share once, and pinned host memory not at all. */
static void case_report_footprint(void)
{
	const char *path = getenv("SIMGPU_REPORT");
	unsigned long long bytes = 0;
	char line[256], name[64] = "";
	pid_t pid;
	FILE *f;

	pid = report_fork(path);
	if (pid == 0) {
		float *host, *dev, *src;
		cudaKernel_t fill, copy, slice;
		float v = 1.0f;
		unsigned long long nh = MIB / 4, nd = 1024;
		/* copy: 2 images of 1 channel of 1024 floats into 2-channel
		 * images at channel 0: 8 KiB read, 2 x 4 KiB written 8 KiB apart */
		int n = 2, c_src = 1, c_dst = 2, c_off = 0, hw = 1024, accum = 0;
		void *hargs[] = { &host, &v, &nh }, *dargs[] = { &dev, &v, &nd };
		void *cargs[] = { &dev, &src, &n, &c_src, &c_dst, &c_off, &hw, &accum };
		/* slice in place: the same 12 KiB read and written (24 KiB if
		 * counted twice) */
		int hw2 = 1536;
		void *sargs[] = { &dev, &dev, &n, &c_src, &c_src, &c_off, &hw2, &accum };

		cudaMallocHost((void **)&host, MIB);
		cudaMalloc((void **)&dev, 2 * MIB);
		src = dev + MIB / 4;
		get_kernel("mt_fill", &fill);
		get_kernel("mt_channel_copy", &copy);
		get_kernel("mt_channel_slice", &slice);
		cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), hargs, 0, NULL);
		cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), dargs, 0, NULL);
		cudaLaunchKernel((const void *)copy, dim3_1(), dim3_1(), cargs, 0, NULL);
		cudaLaunchKernel((const void *)slice, dim3_1(), dim3_1(), sargs, 0, NULL);
		cudaDeviceSynchronize();
		exit(0);
	}
	f = child_report(pid, path);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "largest_kernel_bytes: %llu %63s", &bytes, name);
	fclose(f);
	EXPECT_EQ("largest_kernel_bytes", 16384, bytes);
	EXPECT_EQ("its kernel is mt_channel_copy", 0, strcmp(name, "mt_channel_copy"));
	printf("report-footprint: %llu bytes, %s\n", bytes, name);
	fflush(NULL);
	_exit(failures ? 1 : 0);
}

/* SIMGPU_VMM_COST=1,2,3,4,5 (us per mapping of map, access, unmap,
 * create, release; with /call once per call): each call costs the host its
 * time, and a kernel launched after them starts no earlier.  A 4 MiB
 * mapping costs what a 2 MiB one does; a grant or unmap spanning two
 * mappings costs two. */
static void case_vmm_cost(void)
{
	const char *path = getenv("SIMGPU_REPORT"), *cost = getenv("SIMGPU_VMM_COST");
	/* per mapping: create 3x4 + map 3x1 + access (1 + 2)x2 + unmap
	 * (1 + 1 + 2)x3 + release 3x5 = 48; per call: 12 + 3 + 2x2 + 3x3 + 15
	 * = 43 (the old model, per 2 MiB of each call: 60) */
	double want = cost && strstr(cost, "/call") ? 43e-6 : 48e-6;
	unsigned long long map = 0, access = 0, unmap = 0, create = 0, release = 0;
	double t = 0, host = 0;
	char line[256];
	pid_t pid;
	FILE *f;

	pid = report_fork(path);
	if (pid == 0) {
		CUmemAllocationProp prop = dev_prop();
		CUmemGenericAllocationHandle h;
		CUdeviceptr va;
		cudaKernel_t fill;
		void *dev;
		float v = 1.0f;
		unsigned long long nf = 1;
		void *args[] = { &dev, &v, &nf };

		cuInit(0);
		cuMemAddressReserve(&va, 8 * MIB, 0, 0, 0);
		cuMemCreate(&h, 4 * MIB, &prop, 0);     /* one mapping of 4 MiB: 4 us */
		cuMemMap(va, 4 * MIB, 0, h, 0);         /*                       1 us */
		set_rw(va, 4 * MIB);                    /*                       2 us */
		cuMemUnmap(va, 2 * MIB);                /* half of it:           3 us */
		cuMemUnmap(va + 2 * MIB, 2 * MIB);      /* the other half:       3 us */
		cuMemRelease(h);                        /*                       5 us */
		/* two adjacent 2 MiB mappings, one grant and one unmap over both */
		CUmemGenericAllocationHandle h1, h2;
		cuMemCreate(&h1, 2 * MIB, &prop, 0);    /* 4 us */
		cuMemCreate(&h2, 2 * MIB, &prop, 0);    /* 4 us */
		cuMemMap(va, 2 * MIB, 0, h1, 0);        /* 1 us */
		cuMemMap(va + 2 * MIB, 2 * MIB, 0, h2, 0);  /* 1 us */
		set_rw(va, 4 * MIB);                    /* 2 mappings: 4 us (/call 2) */
		cuMemUnmap(va, 4 * MIB);                /* 2 mappings: 6 us (/call 3) */
		cuMemRelease(h1);                       /* 5 us */
		cuMemRelease(h2);                       /* 5 us */
		dev = NULL;
		cudaMalloc(&dev, GRAN);
		get_kernel("mt_fill", &fill);
		cudaLaunchKernel((const void *)fill, dim3_1(), dim3_1(), args, 0, NULL);
		cudaDeviceSynchronize();
		exit(0);
	}
	f = child_report(pid, path);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "vmm_calls: map %llu access %llu unmap %llu create %llu release %llu",
		       &map, &access, &unmap, &create, &release);
		sscanf(line, "vmm_host_s: %lf", &host);
		sscanf(line, "virtual_time_s: %lf", &t);
	}
	fclose(f);
	EXPECT_EQ("vmm_calls map", 3, map);
	EXPECT_EQ("vmm_calls access", 2, access);
	EXPECT_EQ("vmm_calls unmap", 3, unmap);
	EXPECT_EQ("vmm_calls create", 3, create);
	EXPECT_EQ("vmm_calls release", 3, release);
	EXPECT_NEAR("vmm_host_s", want, host, 1e-6);
	/* the kernel starts after the host's time in VMM calls */
	EXPECT_NEAR("virtual_time_s", want + TX_LAUNCH + 4.0 / TX_MEMBW, t, 1e-3);
	printf("vmm-cost: %.1f us of host time in VMM calls, kernel ends at %.1f us\n",
	       host * 1e6, t * 1e6);
	fflush(NULL);
	_exit(failures ? 1 : 0);
}

/* Kernels by name: launch, parameter layout, bad handles; the same
 * kernels through the driver API. */
static void case_kernel(void)
{
	cudaKernel_t fill, probe, nope;
	cudaLibrary_t lib;
	size_t off, size, i;
	static const size_t want_off[] = { 0, 8, 16, 24, 32, 40 };
	static const size_t want_size[] = { 8, 8, 8, 4, 8, 8 };
	float *d, host[1000], v = 3.5f;
	unsigned long long n = 1000, x = 7;
	int y = 42, bad = 0;
	double z = 2.25;
	void *c = (void *)0x1234;
	float *a_ptr, *b_ptr;
	void *fargs[] = { &d, &v, &n };
	void *pargs[] = { &a_ptr, &x, &b_ptr, &y, &z, &c };
	CUfunction f;
	char buf[48];
	size_t bufsize = sizeof(buf);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
			  CU_LAUNCH_PARAM_BUFFER_SIZE, &bufsize,
			  CU_LAUNCH_PARAM_END };

	get_kernel("mt_fill", &fill);
	get_kernel("mt_probe", &probe);
	CK(cudaMalloc((void **)&d, 1000 * sizeof(float)));
	CK(cudaLaunchKernel((const void *)fill, dim3_n(4), dim3_n(256), fargs,
			    0, NULL));
	CK(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost));
	for (i = 0; i < 1000; i++)
		bad += host[i] != 3.5f;
	EXPECT_EQ("elements mt_fill left wrong", 0, bad);

	for (i = 0; i < 6; i++) {
		CU(cuKernelGetParamInfo((CUkernel)probe, i, &off, &size));
		EXPECT_EQ("mt_probe param offset", want_off[i], off);
		EXPECT_EQ("mt_probe param size", want_size[i], size);
	}
	EXPECT_EQ("param index past the end", CUDA_ERROR_INVALID_VALUE,
		  cuKernelGetParamInfo((CUkernel)probe, 6, &off, &size));
	/* As a real driver answers for a kernel handle (H100, driver 580). */
	EXPECT_EQ("cudaFuncGetParamInfo of a kernel handle", cudaErrorInvalidValue,
		  cudaFuncGetParamInfo((const void *)probe, 0, &off, &size));
	cudaGetLastError();
	EXPECT_EQ("param info of an unknown handle",
		  cudaErrorInvalidDeviceFunction,
		  cudaFuncGetParamInfo((const void *)&bad, 0, &off, &size));
	EXPECT_EQ("launch of an unknown handle", cudaErrorInvalidDeviceFunction,
		  cudaLaunchKernel((const void *)&bad, dim3_1(), dim3_1(),
				   fargs, 0, NULL));
	CK(cudaLibraryLoadData(&lib, "x", NULL, NULL, 0, NULL, NULL, 0));
	EXPECT_EQ("unknown kernel name", cudaErrorSymbolNotFound,
		  cudaLibraryGetKernel(&nope, lib, "mt_nonexistent"));

	a_ptr = d;
	b_ptr = d + 1;
	CK(cudaLaunchKernel((const void *)probe, dim3_1(), dim3_1(), pargs, 0,
			    NULL));
	CK(cudaMemcpy(host, d, 2 * sizeof(float), cudaMemcpyDeviceToHost));
	EXPECT_EQ("mt_probe a[0] = y", 42, (long long)host[0]);
	EXPECT_NEAR("mt_probe b[0] = z", 2.25, host[1], 1e-6);

	/* driver API: kernel -> function, packed parameter buffer */
	CU(cuKernelGetFunction(&f, (CUkernel)probe));
	CU(cuFuncGetParamInfo(f, 4, &off, &size));
	EXPECT_EQ("cuFuncGetParamInfo offset of z", 32, off);
	y = 7;
	z = 0.5;
	memset(buf, 0, sizeof(buf));
	memcpy(buf + 0, &a_ptr, 8);
	memcpy(buf + 8, &x, 8);
	memcpy(buf + 16, &b_ptr, 8);
	memcpy(buf + 24, &y, 4);
	memcpy(buf + 32, &z, 8);
	memcpy(buf + 40, &c, 8);
	CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
	CK(cudaMemcpy(host, d, 2 * sizeof(float), cudaMemcpyDeviceToHost));
	EXPECT_EQ("packed launch a[0] = y", 7, (long long)host[0]);
	EXPECT_NEAR("packed launch b[0] = z", 0.5, host[1], 1e-6);
	CK(cudaFree(d));
	printf("kernel: mt_fill and mt_probe ran\n");
}

/* Under an LD_PRELOADed shim that resolves cudaMalloc through
 * dlopen("libcudart.so.13", RTLD_NOLOAD): the shim sees the call. */
static void case_preload(void)
{
	int (*calls)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
						  "simgpu_test_shim_calls");
	void *p = NULL;

	if (!calls) {
		fprintf(stderr, "FAIL: the test shim is not preloaded\n");
		exit(1);
	}
	CK(cudaMalloc(&p, MIB));
	CK(cudaFree(p));
	EXPECT_EQ("cudaMalloc calls the shim saw", 1, calls());
	EXPECT_EQ("simulated cudart under the shim", 1, p != NULL);
	printf("preload: shim saw %d call(s)\n", calls());
}

/* Several threads allocating, copying and synchronising at once (PyTorch
 * runs backward on its own thread): no lost accounting, no crash. */
static void *thread_body(void *arg)
{
	cudaStream_t s;
	cudaEvent_t e;
	char host[4096];
	void *d;
	int i, bad = 0;

	memset(host, (int)(uintptr_t)arg, sizeof(host));
	cudaStreamCreate(&s);
	cudaEventCreate(&e);
	for (i = 0; i < 500; i++) {
		bad += cudaMalloc(&d, 3 * 4096) != cudaSuccess;
		bad += cudaMemcpyAsync(d, host, sizeof(host),
				       cudaMemcpyHostToDevice, s) != cudaSuccess;
		bad += cudaEventRecord(e, s) != cudaSuccess;
		bad += cudaEventSynchronize(e) != cudaSuccess;
		bad += cudaFree(d) != cudaSuccess;
	}
	cudaEventDestroy(e);
	cudaStreamDestroy(s);
	return (void *)(intptr_t)bad;
}

static void case_threads(void)
{
	pthread_t t[4];
	size_t free0, free1, total;
	void *bad;
	int i;

	CK(cudaMemGetInfo(&free0, &total));
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread_body, (void *)(intptr_t)(i + 1));
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		EXPECT_EQ("failed calls in a thread", 0, (intptr_t)bad);
	}
	CK(cudaMemGetInfo(&free1, &total));
	EXPECT_EQ("free memory after all threads freed", free0, free1);
	printf("threads: 4 x 500 malloc/copy/sync/free\n");
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "oom", case_oom },
	{ "vmm", case_vmm },
	{ "fault-host", case_fault_host },
	{ "fault-kernel", case_fault_kernel },
	{ "fault-dryrun", case_fault_dryrun },
	{ "badenv", case_badenv },
	{ "badenv-vmm-cost", case_badenv },
	{ "streams", case_streams },
	{ "dryrun", case_dryrun },
	{ "report", case_report },
	{ "report-footprint", case_report_footprint },
	{ "host-vmm", case_host_vmm },
	{ "vmm-cost", case_vmm_cost },
	{ "vmm-cost-per-call", case_vmm_cost },
	{ "kernel", case_kernel },
	{ "preload", case_preload },
	{ "threads", case_threads },
};

int main(int argc, char **argv)
{
	size_t i;

	for (i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			if (failures)
				fprintf(stderr, "%s: %d failure(s)\n", argv[1],
					failures);
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "usage: %s <case>\n", argv[0]);
	return 2;
}
