/* tests/sim/interpose/forkprog.c - fork safety of libvmem.so's locks, as
 * a PyTorch DataLoader forks its workers while the training thread keeps
 * calling CUDA.  Linked against the real libcudart, libcudnn and libcublas
 * like an application.
 *
 *   forkprog [forks]
 *	A second thread calls hooked functions in a loop: one cudaMemcpy
 *	(the pool and, under VMEM_TRACE, the trace ring), then 64 times
 *	cudnnSetStream, cublasSetStream_v2, cublasSetWorkspace_v2 (the
 *	per-handle workspace table) and cudnnBackendCreate/DestroyDescriptor
 *	(the graph-API side table).  Meanwhile the main thread forks `forks` times (default 50).
 *	Each child calls the hooks that take vmem's locks but need no CUDA
 *	context (the simulated cuDNN/cuBLAS do these on the host, like the
 *	real ones), then _exit(0)s.  A lock the fork copied in its locked
 *	state hangs the child: the parent gives each child 10 s and reports
 *	one that does not exit, or exits non-zero, then prints "ok N forks".
 * Exit status 0 on success; every failure prints what was expected and got.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#define CHILD_TIMEOUT_MS 10000

static cudnnHandle_t dnn;
static cublasHandle_t blas;
static void *dev_buf, *ws_buf;
static atomic_bool stop;
static atomic_ulong rounds;

static void die(const char *what, int code)
{
	fprintf(stderr, "forkprog: %s returned %d, expected 0 (success)\n", what, code);
	exit(1);
}

/* The hooked calls that take vmem's own locks; none needs the device. */
static int lock_takers(cudaStream_t s, void *ws, size_t ws_bytes)
{
	cudnnBackendDescriptor_t d;
	int st;

	if ((st = cudnnSetStream(dnn, s)))
		return 100 + st;
	if ((st = cublasSetStream_v2(blas, s)))
		return 200 + st;
	if ((st = cublasSetWorkspace_v2(blas, ws, ws_bytes)))
		return 300 + st;
	if ((st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d)))
		return 400 + st;
	if ((st = cudnnBackendDestroyDescriptor(d)))
		return 500 + st;
	return 0;
}

static void *hammer(void *arg)
{
	char host[256];
	int st;

	(void)arg;
	memset(host, 1, sizeof(host));
	while (!atomic_load(&stop)) {
		cudaError_t e = cudaMemcpy(dev_buf, host, sizeof(host), cudaMemcpyHostToDevice);

		if (e != cudaSuccess)
			die("cudaMemcpy in the hammer thread", (int)e);
		/* mostly the lock takers: the more of its time the thread
		 * spends holding a lock, the likelier a fork copies it held */
		for (int k = 0; k < 64; k++)
			if ((st = lock_takers(NULL, ws_buf, 4096)))
				die("a hooked call in the hammer thread (100s: cudnnSetStream, "
				    "200s: cublasSetStream_v2, 300s: cublasSetWorkspace_v2, "
				    "400s/500s: cudnnBackendCreate/DestroyDescriptor)", st);
		atomic_fetch_add(&rounds, 1);
	}
	return NULL;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* 0 when `pid` exited 0 within the timeout; prints why not otherwise. */
static int reap(pid_t pid, int i)
{
	long deadline = now_ms() + CHILD_TIMEOUT_MS;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "forkprog: waitpid(child %d of fork %d): %s\n", (int)pid, i,
				strerror(errno));
			return 1;
		}
		if (now_ms() > deadline) {
			fprintf(stderr, "forkprog: child of fork %d (pid %d) did not exit within %d ms: "
				"expected exit 0 at once; a lock was copied held (deadlock)\n", i,
				(int)pid, CHILD_TIMEOUT_MS);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return 1;
		}
		usleep(1000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forkprog: child of fork %d (pid %d): expected exit 0, got %s %d\n", i,
			(int)pid, WIFEXITED(status) ? "exit" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 50;
	pthread_t t;
	int st, bad = 0;

	if (forks <= 0) {
		fprintf(stderr, "forkprog: fork count '%s': expected a positive number\n", argv[1]);
		return 2;
	}
	if ((st = cudaMalloc(&dev_buf, 1 << 20)))
		die("cudaMalloc", st);
	if ((st = cudaMalloc(&ws_buf, 4096)))
		die("cudaMalloc", st);
	if ((st = cudnnCreate(&dnn)))
		die("cudnnCreate", st);
	if ((st = cublasCreate(&blas)))
		die("cublasCreate", st);
	if ((st = pthread_create(&t, NULL, hammer, NULL)))
		die("pthread_create", st);
	while (atomic_load(&rounds) < 10)
		usleep(100);
	for (int i = 0; i < forks && !bad; i++) {
		unsigned long before = atomic_load(&rounds);
		pid_t pid;

		/* fork while the hammer thread is inside the hooks */
		while (atomic_load(&rounds) == before)
			;
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "forkprog: fork %d failed: %s\n", i, strerror(errno));
			bad = 1;
			break;
		}
		if (pid == 0)
			_exit(lock_takers(NULL, NULL, 0) ? 3 : 0);
		bad = reap(pid, i);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	if (bad)
		return 1;
	cublasDestroy(blas);
	cudnnDestroy(dnn);
	cudaFree(ws_buf);
	cudaFree(dev_buf);
	printf("ok %d forks, %lu hammer rounds\n", forks, atomic_load(&rounds));
	return 0;
}
