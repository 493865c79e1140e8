/* tests/sim/simgpu/capture.c - stream capture and CUDA graphs on the
 * simulated GPU, as an application sees them.
 *
 * Linked against the real CUDA libraries (LD_LIBRARY_PATH selects the
 * simulated ones).  Each case prints what it expected and what it got on
 * failure and exits 1.
 *
 * Usage: sim-capture <case>
 *   replay     captured kernels, sets and copies with a fork/join do not
 *              run at capture; each launch replays them with the right bytes
 *   implicit   an op on the legacy stream while a blocking stream captures
 *   sync       synchronising a capturing stream, querying a captured event
 *   isolation  a capturing stream waiting on an event recorded outside
 *   modes      "potentially unsafe" calls under the global, thread-local and
 *              relaxed modes, from the capturing thread and another one
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

static int failures;

#define EXPECT_ERR(want, call) do { \
	cudaError_t e_ = (call); \
	if (e_ != (want)) { \
		fprintf(stderr, "FAIL %s:%d %s: expected %s, got %s\n", __FILE__, \
			__LINE__, #call, cudaGetErrorName(want), cudaGetErrorName(e_)); \
		failures++; \
	} \
} while (0)

#define CK(call) EXPECT_ERR(cudaSuccess, (call))

static cudaKernel_t kernel(const char *name)
{
	static const char image[] = "// any PTX: the simulator runs host code";
	cudaLibrary_t lib;
	cudaKernel_t k = NULL;

	CK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	CK(cudaLibraryGetKernel(&k, lib, name));
	return k;
}

static dim3 d1(void)
{
	dim3 d = { 1, 1, 1 };

	return d;
}

/* The end of a capture that an error invalidated: no graph. */
static void expect_invalidated(cudaStream_t s)
{
	cudaGraph_t g = (cudaGraph_t)1;

	EXPECT_ERR(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &g));
	if (g) {
		fprintf(stderr, "FAIL: an invalidated capture gave a graph\n");
		failures++;
	}
}

static void case_replay(void)
{
	const unsigned long long n = 1024;
	size_t bytes = n * sizeof(float);
	float *a, *b, *c, *h, v = 3.0f;
	cudaStream_t s, s2;
	cudaEvent_t fork, join;
	cudaGraph_t g;
	cudaGraphExec_t x;
	enum cudaStreamCaptureStatus st;
	size_t nodes = 0;
	cudaKernel_t fill = kernel("mt_fill");
	void *args[] = { &b, &v, (void *)&n };

	CK(cudaMalloc((void **)&a, bytes));
	CK(cudaMalloc((void **)&b, bytes));
	CK(cudaMalloc((void **)&c, bytes));
	CK(cudaMallocHost((void **)&h, bytes));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaMemset(b, 0, bytes));
	CK(cudaDeviceSynchronize());
	memset(h, 0, bytes);

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaStreamIsCapturing(s, &st));
	if (st != cudaStreamCaptureStatusActive)
		fprintf(stderr, "FAIL: capturing stream status %d, expected active\n", st), failures++;
	CK(cudaMemsetAsync(a, 0, bytes, s));
	CK(cudaLaunchKernel((const void *)fill, d1(), d1(), args, 0, s));
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(s2, fork, 0));          /* s2 joins the capture */
	CK(cudaStreamIsCapturing(s2, &st));
	if (st != cudaStreamCaptureStatusActive)
		fprintf(stderr, "FAIL: forked stream status %d, expected active\n", st), failures++;
	CK(cudaMemcpyAsync(c, b, bytes, cudaMemcpyDeviceToDevice, s2));
	CK(cudaEventRecord(join, s2));
	CK(cudaStreamWaitEvent(s, join, 0));
	CK(cudaMemcpyAsync(h, c, bytes, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaStreamIsCapturing(s2, &st));
	if (st != cudaStreamCaptureStatusNone)
		fprintf(stderr, "FAIL: after EndCapture s2 status %d, expected none\n", st), failures++;
	if (h[0] != 0.0f)
		fprintf(stderr, "FAIL: the capture ran: h[0] = %g, expected 0\n", h[0]), failures++;
	CK(cudaGraphGetNodes(g, NULL, &nodes));
	if (nodes != 4)
		fprintf(stderr, "FAIL: graph nodes: expected 4 (set, fill, copy, copy), got %zu\n",
			nodes), failures++;
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaGraphDestroy(g));         /* the exec keeps what it needs */
	for (int it = 0; it < 2; it++) {
		memset(h, 0, bytes);
		CK(cudaMemsetAsync(b, 0, bytes, s));
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		if (h[0] != 3.0f || h[n - 1] != 3.0f)
			fprintf(stderr, "FAIL: launch %d: h = %g .. %g, expected 3\n", it, h[0],
				h[n - 1]), failures++;
	}
	CK(cudaGraphExecDestroy(x));
}

static void case_implicit(void)
{
	cudaStream_t s;
	void *d;

	CK(cudaMalloc(&d, 4096));
	CK(cudaStreamCreate(&s));                 /* blocking */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaMemsetAsync(d, 1, 4096, s));
	EXPECT_ERR(cudaErrorStreamCaptureImplicit, cudaMemsetAsync(d, 2, 4096, NULL));
	expect_invalidated(s);
	/* a non-blocking capture leaves the legacy stream free */
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaMemsetAsync(d, 1, 4096, s));
	CK(cudaMemsetAsync(d, 2, 4096, NULL));
	cudaGraph_t g;
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphDestroy(g));
	EXPECT_ERR(cudaErrorStreamCaptureUnsupported, cudaStreamBeginCapture(NULL,
		   cudaStreamCaptureModeGlobal));
}

static void case_sync(void)
{
	cudaStream_t s;
	cudaEvent_t e;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	EXPECT_ERR(cudaErrorStreamCaptureUnsupported, cudaStreamSynchronize(s));
	expect_invalidated(s);
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	CK(cudaEventRecord(e, s));
	EXPECT_ERR(cudaErrorCapturedEvent, cudaEventQuery(e));
	expect_invalidated(s);
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	EXPECT_ERR(cudaErrorStreamCaptureUnsupported, cudaDeviceSynchronize());
	expect_invalidated(s);
}

static void case_isolation(void)
{
	cudaStream_t s, o;
	cudaEvent_t e;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&o, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e));
	CK(cudaEventRecord(e, o));               /* outside the capture */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	EXPECT_ERR(cudaErrorStreamCaptureIsolation, cudaStreamWaitEvent(s, e, 0));
	expect_invalidated(s);
}

/* ---- modes: thread A captures, thread B calls cudaMalloc ---- */
static struct {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int step;
	enum cudaStreamCaptureMode b_mode;
	cudaError_t b_got;
} sh = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, cudaSuccess };

static void wait_step(int s)
{
	pthread_mutex_lock(&sh.m);
	while (sh.step < s)
		pthread_cond_wait(&sh.cv, &sh.m);
	pthread_mutex_unlock(&sh.m);
}

static void set_step(int s)
{
	pthread_mutex_lock(&sh.m);
	sh.step = s;
	pthread_cond_broadcast(&sh.cv);
	pthread_mutex_unlock(&sh.m);
}

static void *thread_b(void *arg)
{
	enum cudaStreamCaptureMode m = sh.b_mode;
	void *p = NULL;

	(void)arg;
	wait_step(1);
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	sh.b_got = cudaMalloc(&p, 4096);
	if (sh.b_got == cudaSuccess)
		sh.b_got = cudaFree(p);
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	set_step(2);
	return NULL;
}

/* Thread A captures in mode `am`; thread B calls cudaMalloc in mode `bm`;
 * expects B's answer and whether A's capture survives. */
static void modes_one(enum cudaStreamCaptureMode am, enum cudaStreamCaptureMode bm,
		      cudaError_t want_b, bool survives)
{
	cudaStream_t s;
	pthread_t t;
	cudaGraph_t g = NULL;

	sh.step = 0;
	sh.b_mode = bm;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	pthread_create(&t, NULL, thread_b, NULL);
	CK(cudaStreamBeginCapture(s, am));
	set_step(1);
	wait_step(2);
	pthread_join(t, NULL);
	if (sh.b_got != want_b) {
		fprintf(stderr, "FAIL: capture mode %d, other thread in mode %d: cudaMalloc "
			"expected %s, got %s\n", am, bm, cudaGetErrorName(want_b),
			cudaGetErrorName(sh.b_got));
		failures++;
	}
	if (survives) {
		CK(cudaStreamEndCapture(s, &g));
		if (g)
			CK(cudaGraphDestroy(g));
	} else {
		expect_invalidated(s);
	}
}

static void case_modes(void)
{
	void *p;
	cudaStream_t s;

	/* another thread's capture in global mode forbids unsafe calls to a
	 * thread in global mode, not to one in relaxed mode */
	modes_one(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeGlobal,
		  cudaErrorStreamCaptureUnsupported, false);
	modes_one(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed,
		  cudaSuccess, true);
	/* a thread-local capture does not concern other threads */
	modes_one(cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal,
		  cudaSuccess, true);
	/* ... but forbids them to its own thread, unless relaxed */
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	EXPECT_ERR(cudaErrorStreamCaptureUnsupported, cudaMalloc(&p, 4096));
	expect_invalidated(s);
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	CK(cudaMalloc(&p, 4096));
	cudaGraph_t g;
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphDestroy(g));
	CK(cudaFree(p));
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "replay", case_replay },
	{ "implicit", case_implicit },
	{ "sync", case_sync },
	{ "isolation", case_isolation },
	{ "modes", case_modes },
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			if (failures)
				fprintf(stderr, "%s: %d failure(s)\n", argv[1], failures);
			else
				printf("%s: ok\n", argv[1]);
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "usage: %s replay|implicit|sync|isolation|modes\n", argv[0]);
	return 2;
}
