/* tests/minitrain/util.c - error reporting, seeded random numbers, hashing. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "mt.h"

void mt_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("minitrain: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void mt_oom(const char *call, size_t bytes)
{
	fflush(stdout);
	fprintf(stderr, "out of memory: %s requested %zu bytes (minitrain held %zu bytes, peak %zu)\n",
		call, bytes, mt_alloc_current(), mt_alloc_peak());
	exit(3);
}

void mt_fail_cuda(cudaError_t e, const char *call, const char *file, int line)
{
	if (e == cudaErrorMemoryAllocation)
		mt_oom(call, 0);
	mt_die("%s failed at %s:%d: %s (%s)", call, file, line,
	       cudaGetErrorString(e), cudaGetErrorName(e));
}

void mt_fail_cudnn(cudnnStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUDNN_STATUS_ALLOC_FAILED)
		mt_oom(call, 0);
	mt_die("%s failed at %s:%d: %s", call, file, line, cudnnGetErrorString(s));
}

void mt_fail_cublas(cublasStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUBLAS_STATUS_ALLOC_FAILED)
		mt_oom(call, 0);
	mt_die("%s failed at %s:%d: %s (%s)", call, file, line,
	       cublasGetStatusString(s), cublasGetStatusName(s));
}

uint64_t mt_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t mt_rng_next(mt_rng_t *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return mt_mix(r->s);
}

double mt_rng_uniform(mt_rng_t *r)
{
	return (double)(mt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t mt_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
