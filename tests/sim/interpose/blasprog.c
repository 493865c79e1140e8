/* tests/sim/interpose/blasprog.c - drives libvmem.so's cuBLAS hooks on the
 * simulated GPU the way PyTorch's float bmm does (cublasSgemmStridedBatched).
 * Linked against the real libcudart and libcublas like an application.
 *
 *   blasprog sgemm-batched   C[b] = A[b] * B[b] for 3 batches of 4x5 * 5x6
 *                            (column major, lda 4, ldb 5, ldc 4, strides
 *                            m*k, k*n, m*n), checks C on the host, prints
 *                            the three device pointers and "ok"
 * Exit status 0 on success; every failure prints what was expected and got.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define CHECK(call)                                                                  \
	do {                                                                         \
		cudaError_t e_ = (call);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "blasprog: %s failed: %s (%d), expected cudaSuccess\n", \
				#call, cudaGetErrorName(e_), (int)e_);               \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

enum { M = 4, N = 6, K = 5, BATCH = 3 };

static int sgemm_batched(void)
{
	float ha[M * K * BATCH], hb[K * N * BATCH], hc[M * N * BATCH], want;
	float *a, *b, *c, alpha = 1.0f, beta = 0.0f;
	cublasHandle_t h;
	cublasStatus_t st;

	for (int i = 0; i < M * K * BATCH; i++)
		ha[i] = (float)(i % 7) - 3.0f;
	for (int i = 0; i < K * N * BATCH; i++)
		hb[i] = (float)(i % 5) * 0.5f;
	CHECK(cudaMalloc((void **)&a, sizeof(ha)));
	CHECK(cudaMalloc((void **)&b, sizeof(hb)));
	CHECK(cudaMalloc((void **)&c, sizeof(hc)));
	CHECK(cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice));
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "blasprog: cublasCreate failed\n");
		return 1;
	}
	st = cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, a, M,
				       (long long)M * K, b, K, (long long)K * N, &beta, c, M,
				       (long long)M * N, BATCH);
	if (st != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "blasprog: cublasSgemmStridedBatched returned %d, expected 0\n", (int)st);
		return 1;
	}
	CHECK(cudaMemcpy(hc, c, sizeof(hc), cudaMemcpyDeviceToHost));
	for (int q = 0; q < BATCH; q++)
		for (int j = 0; j < N; j++)
			for (int i = 0; i < M; i++) {
				want = 0.0f;
				for (int l = 0; l < K; l++)
					want += ha[q * M * K + l * M + i] * hb[q * K * N + j * K + l];
				if (hc[q * M * N + j * M + i] != want) {
					fprintf(stderr, "blasprog: C[%d](%d,%d) = %g, expected %g\n", q,
						i, j, hc[q * M * N + j * M + i], want);
					return 1;
				}
			}
	printf("a=%p b=%p c=%p\n", (void *)a, (void *)b, (void *)c);
	cublasDestroy(h);
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(c));
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sgemm-batched";

	if (strcmp(mode, "sgemm-batched") == 0)
		return sgemm_batched();
	fprintf(stderr, "blasprog: unknown mode '%s'; expected sgemm-batched\n", mode);
	return 2;
}
