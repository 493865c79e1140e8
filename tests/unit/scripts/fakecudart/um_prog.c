/* tests/unit/scripts/fakecudart/um_prog.c - an "application" for the
 * libvmemum.so preload test, linked against the fake libcudart.so.13.
 *
 *   um_prog +MiB ... -INDEX ...
 *
 * "+N" does cudaMalloc(N MiB) and prints "alloc N: status S, last error L";
 * "-I" frees the I-th allocation made so far and prints "free I: status S".
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

int main(int argc, char **argv)
{
	void *ptrs[256] = { 0 };
	int n = 0;

	for (int i = 1; i < argc; i++) {
		long v = strtol(argv[i] + 1, NULL, 10);

		if (argv[i][0] == '+' && n < 256) {
			cudaError_t s = cudaMalloc(&ptrs[n], (size_t)v << 20);

			printf("alloc %ld: status %d, last error %d\n", v, (int)s, (int)cudaGetLastError());
			n++;
		} else if (argv[i][0] == '-' && v >= 0 && v < n) {
			printf("free %ld: status %d\n", v, (int)cudaFree(ptrs[v]));
		} else {
			fprintf(stderr, "um_prog: bad argument %s\n", argv[i]);
			return 2;
		}
	}
	return 0;
}
