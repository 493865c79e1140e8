/* tests/sim/simgpu/hazards.c - small programs that each make exactly one
 * ordering mistake, and their correct twins.
 *
 * Each mistake is silent corruption on a GPU and passes by luck on a
 * simulator that executes at submission; the race checker must stop it
 * with its one line.  A case named X makes the mistake: it prints the line
 * it expects ("expect-line: simgpu: race on ...", built from its own
 * addresses, stream handles and the simulator's call numbers) and then
 * makes it; tests/sim/simgpu/expect_stderr.py requires the abort and that
 * exact line.  The case X-ok does the same work with the right
 * synchronisation and must exit 0.  Linked against the real CUDA
 * libraries; LD_LIBRARY_PATH selects the simulated ones.
 *
 * Usage: sim-hazards <case>
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define MIB ((size_t)1 << 20)
#define GRAN (2 * MIB)

static int failures;

#define CK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "FAIL %s:%d %s: expected cudaSuccess, got %s\n", \
			__FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
		exit(1); \
	} \
} while (0)

#define CU(call) do { \
	CUresult r_ = (call); \
	if (r_ != CUDA_SUCCESS) { \
		fprintf(stderr, "FAIL %s:%d %s: expected CUDA_SUCCESS, got %d\n", \
			__FILE__, __LINE__, #call, (int)r_); \
		exit(1); \
	} \
} while (0)

/* ---- helpers ---- */

/* The simulator's call counter (libsimgpu.so's simgpu_calls). */
static uint64_t calls(void)
{
	static uint64_t (*fn)(void);

	if (!fn) {
		void *h = dlopen("libsimgpu.so", RTLD_NOW | RTLD_NOLOAD);

		if (h)
			*(void **)&fn = dlsym(h, "simgpu_calls");
		if (!fn) {
			fprintf(stderr, "FAIL: not running on the simulated GPU "
				"(libsimgpu.so's simgpu_calls not found)\n");
			exit(1);
		}
	}
	return fn();
}

static const char *const tail = ", with no event or synchronisation between them";

/* "simgpu: race on <addr> (<n> bytes): <who> <verb> what <prior> <pverb>" */
static void expect(const void *addr, size_t n, const char *who, uint64_t call,
		   const char *agent, const char *verb, const char *prior,
		   uint64_t pcall, const char *pagent, const char *pverb)
{
	char wc[48] = "", pc[48] = "";

	char on[96] = "";

	if (call)
		snprintf(wc, sizeof(wc), " (call %" PRIu64 ")", call);
	if (pcall)
		snprintf(pc, sizeof(pc), " (call %" PRIu64 ")", pcall);
	if (*agent)         /* host code's own loads and stores name no agent */
		snprintf(on, sizeof(on), " on %s", agent);
	fprintf(stderr, "expect-line: simgpu: race on %p (%zu bytes): %s%s%s "
		"%s what %s%s on %s %s%s\n", addr, n, who, wc, on, verb, prior,
		pc, pagent, pverb, tail);
	fflush(stderr);
}

static void stream_name(cudaStream_t s, char *buf, size_t n)
{
	snprintf(buf, n, "stream %p", (void *)s);
}

static cudaKernel_t kernel(const char *name)
{
	static const char image[] = "// any PTX: the simulator runs host code";
	cudaLibrary_t lib;
	cudaKernel_t k;

	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(cudaLibraryGetKernel(&k, lib, name));
	return k;
}

static dim3 d1(void)
{
	dim3 d = { 1, 1, 1 };

	return d;
}

/* mt_channel_copy(dst, src, n=1, c_src=1, c_dst=1, c_off=0, hw, acc=0):
 * reads hw floats at src, writes them at dst */
static void launch_copy(float *dst, const float *src, int hw, cudaStream_t s)
{
	static cudaKernel_t k;
	int one = 1, zero = 0;
	void *args[] = { &dst, &src, &one, &one, &one, &zero, &hw, &zero };

	if (!k)
		k = kernel("mt_channel_copy");
	CK(cudaLaunchKernel((const void *)k, d1(), d1(), args, 0, s));
}

/* mt_fill(p, v, n): writes n floats */
static void launch_fill(float *p, float v, unsigned long long n, cudaStream_t s)
{
	static cudaKernel_t k;
	void *args[] = { &p, &v, &n };

	if (!k)
		k = kernel("mt_fill");
	CK(cudaLaunchKernel((const void *)k, d1(), d1(), args, 0, s));
}

static void done(const char *what)
{
	if (failures)
		exit(1);
	printf("%s: ok\n", what);
	exit(0);
}

static void not_caught(const char *what)
{
	fprintf(stderr, "FAIL: %s went unreported\n", what);
	exit(1);
}

/* ---- a kernel reading an async H2D copy's destination on another
 * stream without waiting for the copy ---- */
static void copy_then_kernel(bool ok)
{
	const int hw = 1024;
	size_t n = hw * sizeof(float);
	float *h, *d, *out;
	cudaStream_t s1, s2;
	cudaEvent_t e;
	char n1[64], n2[64];

	CK(cudaMallocHost((void **)&h, n));
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMalloc((void **)&out, n));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	for (int i = 0; i < hw; i++)
		h[i] = (float)i;
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s1));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaEventRecord(e, s1));
		CK(cudaStreamWaitEvent(s2, e, 0));
	} else {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect(d, n, "mt_channel_copy", calls() + 1, n2, "reads",
		       "cudaMemcpyAsync", copy, n1, "wrote");
	}
	launch_copy(out, d, hw, s2);
	if (!ok)
		not_caught("a kernel reading a copy's destination on another stream");
	CK(cudaStreamSynchronize(s2));
	done("copy-kernel-ok");
}

/* ---- an event recorded before the op it should follow ---- */
static void event_early(bool ok)
{
	const int hw = 256;
	size_t n = hw * sizeof(float);
	float *h, *d, *out;
	cudaStream_t s1, s2;
	cudaEvent_t e;
	char n1[64], n2[64];

	CK(cudaMallocHost((void **)&h, n));
	memset(h, 0, n);
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMalloc((void **)&out, n));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	if (!ok)
		CK(cudaEventRecord(e, s1));     /* the mistake: too early */
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s1));
	uint64_t copy = calls();
	if (ok)
		CK(cudaEventRecord(e, s1));
	CK(cudaStreamWaitEvent(s2, e, 0));
	if (!ok) {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect(d, n, "mt_channel_copy", calls() + 1, n2, "reads",
		       "cudaMemcpyAsync", copy, n1, "wrote");
	}
	launch_copy(out, d, hw, s2);
	if (!ok)
		not_caught("a wait on an event recorded before the copy");
	CK(cudaStreamSynchronize(s2));
	done("event-early-ok");
}

/* ---- VMM: one 2 MiB chunk mapped read-write at va (and at va2) ---- */
typedef struct {
	CUdeviceptr va, va2;
	CUmemGenericAllocationHandle h;
} chunk_t;

static void map_rw(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
	CUmemAccessDesc a;

	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = 0;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemMap(va, GRAN, 0, h, 0));
	CU(cuMemSetAccess(va, GRAN, &a, 1));
}

static void chunk_new(chunk_t *c, bool twice)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = 0;
	CK(cudaFree(NULL));
	CU(cuMemAddressReserve(&c->va, 2 * GRAN, 0, 0, 0));
	CU(cuMemCreate(&c->h, GRAN, &p, 0));
	map_rw(c->va, c->h);
	c->va2 = 0;
	if (twice) {
		c->va2 = c->va + GRAN;
		map_rw(c->va2, c->h);
	}
}

/* ---- cuMemUnmap while a D2H copy of the range is queued ---- */
static void unmap_queued(bool ok)
{
	chunk_t c;
	void *h;
	cudaStream_t s;
	char sn[64];

	chunk_new(&c, false);
	CK(cudaMallocHost(&h, GRAN));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMemsetAsync((void *)c.va, 7, GRAN, s));
	CK(cudaMemcpyAsync(h, (void *)c.va, GRAN, cudaMemcpyDeviceToHost, s));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaStreamSynchronize(s));
	} else {
		stream_name(s, sn, sizeof(sn));
		expect((void *)c.va, GRAN, "cuMemUnmap", calls() + 1, "the host",
		       "unmaps", "cudaMemcpyAsync", copy, sn, "reads");
	}
	CU(cuMemUnmap(c.va, GRAN));
	if (!ok)
		not_caught("an unmap under a queued copy");
	CU(cuMemRelease(c.h));
	if (((unsigned char *)h)[GRAN - 1] != 7)
		failures++, fprintf(stderr, "FAIL: copied byte: expected 7, got %d\n",
				    ((unsigned char *)h)[GRAN - 1]);
	done("unmap-queued-ok");
}

/* ---- a physical chunk mapped a second time elsewhere and written
 * there while a copy still reads it through the first address ---- */
static void remap_write(bool ok)
{
	chunk_t c;
	void *h;
	cudaStream_t s1, s2;
	cudaEvent_t e;
	char n1[64], n2[64];
	const unsigned long long nf = 4096;

	chunk_new(&c, true);
	CK(cudaMallocHost(&h, GRAN));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	CK(cudaMemsetAsync((void *)c.va, 1, GRAN, s1));
	CK(cudaMemcpyAsync(h, (void *)c.va, GRAN, cudaMemcpyDeviceToHost, s1));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaEventRecord(e, s1));
		CK(cudaStreamWaitEvent(s2, e, 0));
	} else {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect((void *)c.va2, nf * sizeof(float), "mt_fill", calls() + 1, n2,
		       "writes", "cudaMemcpyAsync", copy, n1, "reads");
	}
	launch_fill((float *)c.va2, 2.0f, nf, s2);
	if (!ok)
		not_caught("a write through a second mapping under a queued copy");
	CK(cudaDeviceSynchronize());
	if (((float *)c.va)[0] != 2.0f)
		failures++, fprintf(stderr, "FAIL: second mapping: expected 2, got %g\n",
				    ((float *)c.va)[0]);
	done("remap-write-ok");
}

/* ---- a chunk mapped at two addresses (vmem's handoff, docs/pool.md):
 * the first unmapped while a copy through it is still queued.  The twin
 * waits for that copy, and unmaps the first address while a copy through
 * the second one is queued: the chunk lives on there, and that copy is
 * not the unmap's business ---- */
static void unmap_alias(bool ok)
{
	chunk_t c;
	void *h;
	cudaStream_t s1, s2;
	char n1[64];

	chunk_new(&c, true);
	CK(cudaMallocHost(&h, GRAN));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaMemsetAsync((void *)c.va, 5, GRAN, s1));
	CK(cudaMemcpyAsync(h, (void *)c.va, GRAN, cudaMemcpyDeviceToHost, s1));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaStreamSynchronize(s1));
		CK(cudaMemsetAsync((void *)c.va2, 6, GRAN, s2));
		CK(cudaMemcpyAsync(h, (void *)c.va2, GRAN, cudaMemcpyDeviceToHost, s2));
	} else {
		stream_name(s1, n1, sizeof(n1));
		expect((void *)c.va, GRAN, "cuMemUnmap", calls() + 1, "the host",
		       "unmaps", "cudaMemcpyAsync", copy, n1, "reads");
	}
	CU(cuMemUnmap(c.va, GRAN));
	if (!ok)
		not_caught("an unmap of one of two mappings under a copy through it");
	CK(cudaStreamSynchronize(s2));
	CU(cuMemUnmap(c.va2, GRAN));
	CU(cuMemRelease(c.h));
	if (((unsigned char *)h)[GRAN - 1] != 6)
		failures++, fprintf(stderr, "FAIL: copied byte: expected 6, got %d\n",
				    ((unsigned char *)h)[GRAN - 1]);
	done("unmap-alias-ok");
}

/* ---- host code reading a pinned buffer before synchronising with the
 * copy into it ---- */
static void host_read(bool ok)
{
	const size_t n = 2 * 4096;
	unsigned char *h, *d;
	cudaStream_t s;
	char sn[64];

	CK(cudaMallocHost((void **)&h, n));
	CK(cudaMalloc((void **)&d, n));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMemsetAsync(d, 9, n, s));
	CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaStreamSynchronize(s));
	} else {
		stream_name(s, sn, sizeof(sn));
		/* the report names the page touched */
		expect(h, 4096, "host code", 0, "", "reads", "cudaMemcpyAsync", copy,
		       sn, "writes");
	}
	volatile unsigned char v = h[10];
	if (!ok)
		not_caught("a host read of a pinned buffer a copy still writes");
	if (v != 9)
		failures++, fprintf(stderr, "FAIL: host read: expected 9, got %d\n", v);
	done("host-read-ok");
}

/* ---- poison: a computation that reads memory nothing wrote (here the
 * momentum buffer an optimiser forgot to zero) ---- */
static void poison(bool ok)
{
	const unsigned long long n = 64;
	float *w, *v, *dw, hw[64], lr = 0.1f, mom = 0.9f, wd = 0.0f;
	cudaKernel_t k = kernel("mt_sgd_momentum");
	void *args[] = { &w, &v, &dw, &lr, &mom, &wd, (void *)&n };

	for (unsigned i = 0; i < n; i++)
		hw[i] = 1.0f;
	CK(cudaMalloc((void **)&w, n * sizeof(float)));
	CK(cudaMalloc((void **)&v, n * sizeof(float)));
	CK(cudaMalloc((void **)&dw, n * sizeof(float)));
	CK(cudaMemcpy(w, hw, sizeof(hw), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dw, hw, sizeof(hw), cudaMemcpyHostToDevice));
	if (ok)
		CK(cudaMemset(v, 0, n * sizeof(float)));
	CK(cudaLaunchKernel((const void *)k, d1(), d1(), args, 0, NULL));
	CK(cudaMemcpy(hw, w, sizeof(hw), cudaMemcpyDeviceToHost));
	printf("w[0] after one step: %g\n", hw[0]);
	if (!isfinite(hw[0]) || hw[0] != 0.9f) {
		fprintf(stderr, "poison: w[0] is not 0.9: the step read memory "
			"nothing wrote\n");
		exit(3);
	}
	done("poison-ok");
}

/* ---- the stream-ordered allocator: memory freed on s1 while s2 still
 * reads it, reused on s1 at once and written ---- */
static void async_reuse(bool ok)
{
	const int hw = 512;
	size_t n = hw * sizeof(float);
	float *a, *b, *out;
	cudaStream_t s1, s2;
	cudaEvent_t e1, e2;
	char n1[64], n2[64];

	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
	CK(cudaMalloc((void **)&out, n));
	CK(cudaMallocAsync((void **)&a, n, s1));
	CK(cudaMemsetAsync(a, 0, n, s1));
	CK(cudaEventRecord(e1, s1));
	CK(cudaStreamWaitEvent(s2, e1, 0));
	launch_copy(out, a, hw, s2);            /* s2 reads a */
	uint64_t read = calls();
	if (ok) {
		/* what PyTorch's recordStream arranges: the free waits for s2 */
		CK(cudaEventRecord(e2, s2));
		CK(cudaStreamWaitEvent(s1, e2, 0));
	}
	CK(cudaFreeAsync(a, s1));
	CK(cudaMallocAsync((void **)&b, n, s1));
	if (b != a) {
		fprintf(stderr, "FAIL: cudaMallocAsync on the freeing stream: expected "
			"the freed block %p back, got %p\n", (void *)a, (void *)b);
		exit(1);
	}
	if (!ok) {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect(b, n, "cudaMemsetAsync", calls() + 1, n1, "writes",
		       "mt_channel_copy", read, n2, "reads");
	}
	CK(cudaMemsetAsync(b, 1, n, s1));
	if (!ok)
		not_caught("a reuse of stream-ordered memory another stream still reads");
	CK(cudaDeviceSynchronize());
	CK(cudaFreeAsync(b, s1));
	CK(cudaStreamSynchronize(s1));
	done("async-reuse-ok");
}

/* ---- cudaFree of stream-ordered memory a kernel still writes (CUDA
 * does not synchronise for it) ---- */
static void free_queued(bool ok)
{
	const unsigned long long nf = 1024;
	float *a;
	cudaStream_t s;
	char sn[64];

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMallocAsync((void **)&a, nf * sizeof(float), s));
	launch_fill(a, 1.0f, nf, s);
	uint64_t fill = calls();
	if (ok) {
		CK(cudaStreamSynchronize(s));
	} else {
		stream_name(s, sn, sizeof(sn));
		expect(a, nf * sizeof(float), "cudaFree", calls() + 1, "the host",
		       "frees", "mt_fill", fill, sn, "writes");
	}
	CK(cudaFree(a));
	if (!ok)
		not_caught("a cudaFree of stream-ordered memory in use");
	done("free-queued-ok");
}

/* ---- the legacy default stream orders blocking streams (no report),
 * and not non-blocking ones ---- */
static void legacy(bool ok)
{
	const int hw = 256;
	size_t n = hw * sizeof(float);
	float *h, *d, *out, *other;
	cudaStream_t s1, s2;
	char n1[64], n2[64];
	unsigned fl = ok ? cudaStreamDefault : cudaStreamNonBlocking;

	CK(cudaMallocHost((void **)&h, n));
	memset(h, 0, n);
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMalloc((void **)&out, n));
	CK(cudaMalloc((void **)&other, n));
	CK(cudaStreamCreateWithFlags(&s1, fl));
	CK(cudaStreamCreateWithFlags(&s2, fl));
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s1));
	uint64_t copy = calls();
	CK(cudaMemsetAsync(other, 0, n, NULL));    /* an op on the legacy stream */
	if (!ok) {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect(d, n, "mt_channel_copy", calls() + 1, n2, "reads",
		       "cudaMemcpyAsync", copy, n1, "wrote");
	}
	launch_copy(out, d, hw, s2);
	if (!ok)
		not_caught("non-blocking streams ordered only by the legacy stream");
	CK(cudaDeviceSynchronize());
	done("legacy-ok");
}

/* ---- a graph replayed on a stream that did not wait for the copy
 * filling what the graph reads: replays are judged like any op ---- */
static void graph_replay(bool ok)
{
	const int hw = 512;
	size_t n = hw * sizeof(float);
	float *h, *d, *out;
	cudaStream_t s, s1, s2;
	cudaEvent_t e;
	cudaGraph_t g;
	cudaGraphExec_t x;
	char n1[64], n2[64];

	CK(cudaMallocHost((void **)&h, n));
	memset(h, 0, n);
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMalloc((void **)&out, n));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	launch_copy(out, d, hw, s);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s1));
	uint64_t copy = calls();
	if (ok) {
		CK(cudaEventRecord(e, s1));
		CK(cudaStreamWaitEvent(s2, e, 0));
	} else {
		stream_name(s1, n1, sizeof(n1));
		stream_name(s2, n2, sizeof(n2));
		expect(d, n, "mt_channel_copy", calls() + 1, n2, "reads",
		       "cudaMemcpyAsync", copy, n1, "wrote");
	}
	CK(cudaGraphLaunch(x, s2));
	if (!ok)
		not_caught("a graph replayed without waiting for its input");
	CK(cudaStreamSynchronize(s2));
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	done("graph-replay-ok");
}

static const struct {
	const char *name;
	void (*fn)(bool ok);
} cases[] = {
	{ "copy-kernel", copy_then_kernel },
	{ "event-early", event_early },
	{ "unmap-queued", unmap_queued },
	{ "remap-write", remap_write },
	{ "unmap-alias", unmap_alias },
	{ "host-read", host_read },
	{ "poison", poison },
	{ "async-reuse", async_reuse },
	{ "free-queued", free_queued },
	{ "legacy", legacy },
	{ "graph-replay", graph_replay },
};

int main(int argc, char **argv)
{
	size_t i;

	if (argc == 2) {
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			size_t len = strlen(cases[i].name);

			if (strncmp(argv[1], cases[i].name, len))
				continue;
			if (argv[1][len] == '\0')
				cases[i].fn(false);
			else if (!strcmp(argv[1] + len, "-ok"))
				cases[i].fn(true);
			else
				continue;
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "usage: %s <case>[-ok]; cases:", argv[0]);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, " %s", cases[i].name);
	fprintf(stderr, "\n");
	return 2;
}
