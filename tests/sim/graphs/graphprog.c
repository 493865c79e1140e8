/* tests/sim/graphs/graphprog.c - CUDA graphs under vmem, on the simulated
 * GPU with a small budget (meson runs it with LD_PRELOAD=libvmem.so and
 * VMEM_DEVICE_LIMIT; the race checker and poison are on).
 *
 * Usage: graphprog <case>; prints "ok" and exits 0 when every check
 * held, else prints what it expected and got and exits 1.
 *
 *   evict-replay   a graph captured over tensors that are evicted before it
 *                  is launched: each launch finds them resident with their
 *                  bytes, and what the graph wrote survives a later eviction
 *   free-in-capture  cudaFreeAsync of vmem memory inside the capture: the
 *                  capture stays valid, the memory is not handed out again
 *                  while the graph can be replayed, replays are right
 *   other-thread   a global-mode capture on one thread while another thread
 *                  issues launches and asynchronous copies (legal then) that
 *                  make vmem evict (copies, fences, waits): the capture
 *                  survives and both threads' data is right
 *   blocking-free  a capture on a blocking stream while another thread (in
 *                  relaxed mode, as PyTorch's allocator) frees memory: vmem's
 *                  fences stay off the legacy and the capturing streams
 *   read-then-zero  a graph that copies a tensor out and then zeroes it
 *                  (one range read, then rewritten whole: a gradient read
 *                  and then cleared): launched with the tensor evicted, it
 *                  comes back with its bytes - the read is first
 *   unseen-in-graph  (4 MiB budget) a graph holding a launch vmem cannot see
 *                  into (its kernel handle taken from libcudart itself),
 *                  replayed over a tensor whose page vmem mapped for a
 *                  memset of its middle, its rest kept on the host: the
 *                  launch may write any byte, so the rest comes back before
 *                  it and the page goes out whole after it
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define MIB ((size_t)1 << 20)

static int failures;

#define CK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "FAIL %s:%d %s: expected cudaSuccess, got %s\n", __FILE__, \
			__LINE__, #call, cudaGetErrorName(e_)); \
		exit(1); \
	} \
} while (0)

static cudaKernel_t k_fill, k_copy;

static void kernels(void)
{
	static const char image[] = "// any PTX: the simulator runs host code";
	cudaLibrary_t lib;

	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(cudaLibraryGetKernel(&k_fill, lib, "mt_fill"));
	CK(cudaLibraryGetKernel(&k_copy, lib, "mt_channel_copy"));
}

static dim3 d1(void)
{
	dim3 d = { 1, 1, 1 };

	return d;
}

static void fill(float *p, float v, size_t bytes, cudaStream_t s)
{
	unsigned long long n = bytes / sizeof(float);
	void *args[] = { &p, &v, &n };

	CK(cudaLaunchKernel((const void *)k_fill, d1(), d1(), args, 0, s));
}

/* dst[i] = src[i] for bytes/4 floats */
static void copy(float *dst, const float *src, size_t bytes, cudaStream_t s)
{
	int one = 1, zero = 0, hw = (int)(bytes / sizeof(float));
	void *args[] = { &dst, &src, &one, &one, &one, &zero, &hw, &zero };

	CK(cudaLaunchKernel((const void *)k_copy, d1(), d1(), args, 0, s));
}

static void expect_all(const char *what, const float *h, size_t bytes, float v)
{
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		if (h[i] != v) {
			fprintf(stderr, "FAIL %s: element %zu is %g, expected %g\n", what, i, h[i], v);
			failures++;
			return;
		}
}

/* Keeps `bytes` of other memory busy so the budget cannot hold the
 * graph's tensors too: everything else is evicted. */
static void crowd(float *big, size_t bytes, cudaStream_t s)
{
	fill(big, 7.0f, bytes, s);
	CK(cudaStreamSynchronize(s));
}

static int done(void)
{
	if (failures)
		return 1;
	printf("ok\n");
	return 0;
}

static int case_evict_replay(void)
{
	const size_t n = 4 * MIB;
	float *a, *b, *big, *h;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&a, n));
	CK(cudaMalloc((void **)&b, n));
	CK(cudaMalloc((void **)&big, 12 * MIB));
	CK(cudaMallocHost((void **)&h, n));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	fill(a, 1.0f, n, s);
	copy(b, a, n, s);
	CK(cudaMemcpyAsync(h, b, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	for (int it = 0; it < 3; it++) {
		crowd(big, 12 * MIB, s);        /* a and b leave the device */
		memset(h, 0, n);
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		expect_all("graph output after an eviction", h, n, 1.0f);
	}
	/* what the graph wrote must be copied out when evicted */
	crowd(big, 12 * MIB, s);
	memset(h, 0, n);
	CK(cudaMemcpy(h, b, n, cudaMemcpyDeviceToHost));
	expect_all("bytes the graph wrote, after an eviction", h, n, 1.0f);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	return done();
}

static int case_free_in_capture(void)
{
	const size_t n = 2 * MIB;
	float *t, *b, *other, *h;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&t, n));
	CK(cudaMalloc((void **)&b, n));
	CK(cudaMallocHost((void **)&h, n));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	fill(t, 3.0f, n, s);
	copy(b, t, n, s);
	CK(cudaFreeAsync(t, s));        /* in CUDA: freed at replay */
	CK(cudaMemcpyAsync(h, b, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaGraphDestroy(g));        /* the instantiation keeps it */
	CK(cudaMalloc((void **)&other, n));
	if (other == t) {
		fprintf(stderr, "FAIL: memory freed inside a capture was handed out again "
			"(%p) while the graph can still be replayed\n", (void *)t);
		failures++;
	}
	fill(other, 9.0f, n, s);
	for (int it = 0; it < 2; it++) {
		memset(h, 0, n);
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		expect_all("graph output", h, n, 3.0f);
	}
	CK(cudaGraphExecDestroy(x));
	CK(cudaFree(other));
	CK(cudaFree(b));
	return done();
}

static int case_read_then_zero(void)
{
	const size_t n = 4 * MIB;
	float *a, *big, *h;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&a, n));
	CK(cudaMalloc((void **)&big, 12 * MIB));
	CK(cudaMallocHost((void **)&h, n));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaMemcpyAsync(h, a, n, cudaMemcpyDeviceToHost, s));
	CK(cudaMemsetAsync(a, 0, n, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	for (int it = 0; it < 3; it++) {
		fill(a, 5.0f + (float)it, n, s);
		crowd(big, 12 * MIB, s);        /* a leaves the device */
		memset(h, 0, n);
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		expect_all("bytes a graph copied out before zeroing them", h, n, 5.0f + (float)it);
	}
	CK(cudaMemcpy(h, a, n, cudaMemcpyDeviceToHost));
	expect_all("the tensor the graph zeroed", h, n, 0.0f);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	return done();
}

/* ---- two threads ---- */
static struct {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int step;
	cudaStream_t cs;
	bool blocking;
} sh = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, false };

static void set_step(int v)
{
	pthread_mutex_lock(&sh.m);
	sh.step = v;
	pthread_cond_broadcast(&sh.cv);
	pthread_mutex_unlock(&sh.m);
}

static void wait_step(int v)
{
	pthread_mutex_lock(&sh.m);
	while (sh.step < v)
		pthread_cond_wait(&sh.cv, &sh.m);
	pthread_mutex_unlock(&sh.m);
}

/* The other thread: in other-thread, evictions (plain global mode, as
 * an application thread would be); in blocking-free, a free in relaxed
 * mode (PyTorch's allocator's CUDAStreamCaptureModeGuard). */
static void *worker(void *arg)
{
	const size_t n = 6 * MIB;
	float *p, *q, *h;
	cudaStream_t s;

	(void)arg;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&p, n));
	CK(cudaMalloc((void **)&q, n));
	CK(cudaMallocHost((void **)&h, n));
	fill(p, 5.0f, n, s);
	CK(cudaStreamSynchronize(s));
	set_step(1);                    /* ready: the capture may begin */
	wait_step(2);                   /* the other thread is capturing */
	if (sh.blocking) {
		enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;

		CK(cudaThreadExchangeStreamCaptureMode(&m));
		CK(cudaFree(q));
		/* vmem's own queries (is the legacy stream capturing?) must
		 * not leave their error as the application's last error */
		CK(cudaGetLastError());
		CK(cudaThreadExchangeStreamCaptureMode(&m));
	} else {
		/* only calls legal during another thread's global capture:
		 * launches and asynchronous copies (a wait would not be) */
		for (int i = 0; i < 3; i++) {
			fill(q, 6.0f, n, s);            /* p is evicted */
			CK(cudaMemcpyAsync(h, p, n, cudaMemcpyDeviceToHost, s));
		}
	}
	set_step(3);
	wait_step(4);                   /* the capture has ended */
	CK(cudaStreamSynchronize(s));
	if (!sh.blocking)
		expect_all("the other thread's data", h, n, 5.0f);
	return NULL;
}

static int two_threads(bool blocking)
{
	const size_t n = 2 * MIB;
	float *a, *h;
	cudaGraph_t g = NULL;
	cudaGraphExec_t x;
	pthread_t t;
	cudaError_t e;

	sh.blocking = blocking;
	if (blocking)
		CK(cudaStreamCreate(&sh.cs));
	else
		CK(cudaStreamCreateWithFlags(&sh.cs, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&a, n));
	CK(cudaMallocHost((void **)&h, n));
	pthread_create(&t, NULL, worker, NULL);
	wait_step(1);
	CK(cudaStreamBeginCapture(sh.cs, cudaStreamCaptureModeGlobal));
	fill(a, 2.0f, n, sh.cs);
	CK(cudaMemcpyAsync(h, a, n, cudaMemcpyDeviceToHost, sh.cs));
	set_step(2);
	wait_step(3);
	e = cudaStreamEndCapture(sh.cs, &g);
	set_step(4);
	pthread_join(t, NULL);
	if (e != cudaSuccess || !g) {
		fprintf(stderr, "FAIL: the capture did not survive vmem's work on another "
			"thread: cudaStreamEndCapture answered %s\n", cudaGetErrorName(e));
		return 1;
	}
	CK(cudaGraphInstantiate(&x, g, 0));
	memset(h, 0, n);
	CK(cudaGraphLaunch(x, sh.cs));
	CK(cudaStreamSynchronize(sh.cs));
	expect_all("graph output", h, n, 2.0f);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	return done();
}

/* A kernel handle vmem never saw handed out (from the simulated libcudart
 * itself): vmem cannot read its launches' parameters. */
static cudaKernel_t unseen_kernel(const char *name)
{
	typedef cudaError_t (*get_fn)(cudaKernel_t *, cudaLibrary_t, const char *);
	static const char image[] = "// any PTX: the simulator runs host code";
	void *rt = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
	get_fn get = rt ? (get_fn)dlsym(rt, "cudaLibraryGetKernel") : NULL;
	cudaLibrary_t lib;
	cudaKernel_t k;

	if (!get) {
		fprintf(stderr, "FAIL: cudaLibraryGetKernel not found in libcudart.so.13\n");
		exit(1);
	}
	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(get(&k, lib, name));
	return k;
}

static int case_unseen_in_graph(void)
{
	const size_t n = 2 * MIB;
	unsigned long long cnt = n / sizeof(float);
	cudaKernel_t kfill = unseen_kernel("mt_fill");
	float *d, *h, v = 6.5f;
	void *big, *args[] = { &d, &v, &cnt };
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMalloc(&big, 2 * n));
	CK(cudaMallocHost((void **)&h, n));
	for (size_t i = 0; i < cnt; i++)
		h[i] = (float)i;
	CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaLaunchKernel((const void *)kfill, d1(), d1(), args, 0, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaMemset(big, 1, 2 * n));                      /* d out */
	CK(cudaMemset((char *)d + n / 8, 0, n / 4));        /* d back, its rest on the host */
	CK(cudaDeviceSynchronize());                        /* s is non-blocking */
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaMemset(big, 2, 2 * n));                      /* d out again */
	CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
	expect_all("a tensor the unseen launch in the graph filled, after an eviction", h, n, v);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	return done();
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s evict-replay|read-then-zero|free-in-capture|other-thread|blocking-free|"
			"unseen-in-graph\n",
			argv[0]);
		return 2;
	}
	/* before vmem sees any kernel handle handed out */
	if (!strcmp(argv[1], "unseen-in-graph"))
		return case_unseen_in_graph();
	kernels();
	if (!strcmp(argv[1], "evict-replay"))
		return case_evict_replay();
	if (!strcmp(argv[1], "read-then-zero"))
		return case_read_then_zero();
	if (!strcmp(argv[1], "free-in-capture"))
		return case_free_in_capture();
	if (!strcmp(argv[1], "other-thread"))
		return two_threads(false);
	if (!strcmp(argv[1], "blocking-free"))
		return two_threads(true);
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
