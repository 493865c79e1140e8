/* scripts/um/um_core.c - see um_core.h. */
#include "um_core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refusal messages printed before going quiet (a search for the largest
 * batch can be refused many times). */
#define UM_MAX_MESSAGES 5

int um_parse_size(const char *s, uint64_t *out)
{
	const char *p = s;
	char *end;
	unsigned long long whole;
	uint64_t frac = 0, frac_div = 1, mult = 1;
	int shift = 0;

	if (!s)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	whole = strtoull(p, &end, 10);
	if (errno == ERANGE)
		return -2;
	p = end;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (int digits = 0; *p >= '0' && *p <= '9'; p++) {
			if (digits++ < 18) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
			}
		}
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	mult = 1ull << shift;
	if (shift && (*p == 'i' || *p == 'I'))
		p++;
	if (*p == 'b' || *p == 'B')
		p++;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p)
		return -1;
	if (whole > UINT64_MAX / mult)
		return -2;
	*out = (uint64_t)whole * mult + (uint64_t)((double)frac / (double)frac_div * (double)mult);
	return 0;
}

int um_config_read(um_config_t *cfg, um_getenv_fn get, void *get_ctx, char *err, size_t errlen)
{
	const char *v;

	memset(cfg, 0, sizeof(*cfg));
	cfg->stats = true;
	v = get("VMEM_UM_BUDGET", get_ctx);
	if (v && *v) {
		int rc = um_parse_size(v, &cfg->budget);

		if (rc != 0 || cfg->budget == 0) {
			snprintf(err, errlen, "VMEM_UM_BUDGET=%s is %s; give the device bytes managed "
				 "memory may use, e.g. 3G or 3221225472", v,
				 rc == -2 ? "too large" : rc ? "not a size" : "zero");
			return -1;
		}
	}
	v = get("VMEM_UM_STATS", get_ctx);
	if (v && *v) {
		if (strcmp(v, "0") && strcmp(v, "1")) {
			snprintf(err, errlen, "VMEM_UM_STATS=%s is not 0 or 1", v);
			return -1;
		}
		cfg->stats = v[0] == '1';
	}
	return 0;
}

void um_init(um_state_t *st, const um_config_t *cfg, const um_ops_t *ops)
{
	memset(st, 0, sizeof(*st));
	st->cfg = *cfg;
	st->ops = ops;
}

static void say(um_state_t *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(um_state_t *st, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (st->ops->message)
		st->ops->message(st->ops->ctx, line);
}

static double mib(uint64_t b)
{
	return (double)b / (double)(1ull << 20);
}

um_status_t um_start(um_state_t *st)
{
	size_t free_b = 0, total_b = 0;
	int rc;

	if (st->started)
		return st->failed ? UM_NOT_STARTED : UM_OK;
	st->started = true;
	rc = st->ops->mem_get_info(st->ops->ctx, &free_b, &total_b);
	if (rc != UM_CUDA_SUCCESS) {
		st->failed = true;
		say(st, "error: cudaMemGetInfo failed (CUDA error %d): the free device memory is "
		    "unknown, so no managed memory is allocated (every cudaMalloc is refused)", rc);
		return UM_NOT_STARTED;
	}
	st->free_at_start = free_b;
	st->total = total_b;
	/* The README's rule: never more managed memory than the card has free. */
	st->limit = free_b < total_b ? free_b : total_b;
	if (st->cfg.budget == 0) {
		say(st, "no VMEM_UM_BUDGET: managed memory may use the whole device "
		    "(%.0f MiB free of %.0f MiB)", mib(free_b), mib(total_b));
		return UM_OK;
	}
	if (st->cfg.budget >= free_b) {
		say(st, "VMEM_UM_BUDGET=%" PRIu64 " is not below the free device memory (%.0f MiB): "
		    "no balloon, managed memory may use all of it", st->cfg.budget, mib(free_b));
		return UM_OK;
	}
	st->balloon = free_b - st->cfg.budget;
	rc = st->ops->malloc_device(st->ops->ctx, &st->balloon_ptr, st->balloon);
	if (rc != UM_CUDA_SUCCESS) {
		st->failed = true;
		say(st, "error: the balloon (a cudaMalloc of %.0f MiB = free %.0f MiB - budget %.0f MiB) "
		    "failed with CUDA error %d: the budget cannot be enforced, so every cudaMalloc "
		    "is refused", mib(st->balloon), mib(free_b), mib(st->cfg.budget), rc);
		st->balloon = 0;
		st->balloon_ptr = NULL;
		return UM_NOT_STARTED;
	}
	say(st, "budget %.0f MiB: balloon of %.0f MiB taken (free %.0f MiB of %.0f MiB); managed "
	    "memory capped at %.0f MiB", mib(st->cfg.budget), mib(st->balloon), mib(free_b),
	    mib(total_b), mib(st->limit));
	return UM_OK;
}

/* ---- live allocations: open addressing, linear probing ---- */

static uint64_t slot_of(const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h & (UM_MAX_LIVE - 1);
}

static bool live_add(um_state_t *st, void *p, uint64_t n)
{
	uint64_t i;

	/* Keep a quarter free so probes stay short. */
	if (st->live_count >= UM_MAX_LIVE - UM_MAX_LIVE / 4)
		return false;
	for (i = slot_of(p); st->live[i].ptr; i = (i + 1) & (UM_MAX_LIVE - 1))
		;
	st->live[i].ptr = p;
	st->live[i].bytes = n;
	st->live_count++;
	return true;
}

static bool live_remove(um_state_t *st, void *p, uint64_t *n)
{
	uint64_t i = slot_of(p), j;

	for (; st->live[i].ptr != p; i = (i + 1) & (UM_MAX_LIVE - 1))
		if (!st->live[i].ptr)
			return false;
	*n = st->live[i].bytes;
	st->live[i].ptr = NULL;
	st->live_count--;
	/* Backward-shift deletion: move later entries of the probe run up. */
	for (j = (i + 1) & (UM_MAX_LIVE - 1); st->live[j].ptr; j = (j + 1) & (UM_MAX_LIVE - 1)) {
		uint64_t home = slot_of(st->live[j].ptr);

		/* Entry j may move to i when its home is not in (i, j]. */
		if (((j - home) & (UM_MAX_LIVE - 1)) >= ((j - i) & (UM_MAX_LIVE - 1))) {
			st->live[i] = st->live[j];
			st->live[j].ptr = NULL;
			i = j;
		}
	}
	return true;
}

um_status_t um_alloc(um_state_t *st, void **p, size_t n, int *cuda_status)
{
	um_status_t s = um_start(st);
	int rc;

	*p = NULL;
	*cuda_status = UM_CUDA_ERROR_MEMORY_ALLOCATION;
	if (s == UM_OK && st->managed + n > st->limit) {
		s = UM_REFUSED;
		if (n > st->largest_refused)
			st->largest_refused = n;
		if (st->messages++ < UM_MAX_MESSAGES)
			say(st, "refused a cudaMalloc of %.1f MiB: managed memory would reach %.1f MiB, "
			    "more than the %.1f MiB the device had free at start (never ask for more "
			    "managed memory than the card has: it can hang the GPU); answered "
			    "cudaErrorMemoryAllocation - use a smaller batch%s", mib(n),
			    mib(st->managed + n), mib(st->limit),
			    st->messages == UM_MAX_MESSAGES ? " (further refusals are not printed)" : "");
	}
	if (s == UM_OK && st->live_count >= UM_MAX_LIVE - UM_MAX_LIVE / 4) {
		s = UM_TABLE_FULL;
		if (st->messages++ < UM_MAX_MESSAGES)
			say(st, "refused a cudaMalloc: %" PRIu64 " managed allocations are live, the most "
			    "this library tracks", st->live_count);
	}
	if (s != UM_OK) {
		st->refused++;
		if (st->ops->set_last_error_oom)
			st->ops->set_last_error_oom(st->ops->ctx);
		return s;
	}
	rc = st->ops->malloc_managed(st->ops->ctx, p, n);
	if (rc != UM_CUDA_SUCCESS) {
		*p = NULL;
		*cuda_status = rc;
		st->cuda_errors++;
		return UM_CUDA_ERROR;
	}
	live_add(st, *p, n);
	st->allocs++;
	st->managed += n;
	if (st->managed > st->managed_peak)
		st->managed_peak = st->managed;
	*cuda_status = UM_CUDA_SUCCESS;
	return UM_OK;
}

bool um_forget(um_state_t *st, void *p)
{
	uint64_t n;

	if (!p || !live_remove(st, p, &n))
		return false;
	st->managed -= n;
	st->frees++;
	return true;
}

void um_stats_json(const um_state_t *st, char *buf, size_t len)
{
	snprintf(buf, len,
		 "{\"budget\":%" PRIu64 ",\"balloon\":%" PRIu64 ",\"free_at_start\":%" PRIu64
		 ",\"total\":%" PRIu64 ",\"limit\":%" PRIu64 ",\"managed\":%" PRIu64
		 ",\"managed_peak\":%" PRIu64 ",\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
		 ",\"refused\":%" PRIu64 ",\"largest_refused\":%" PRIu64 ",\"cuda_errors\":%" PRIu64
		 ",\"started\":%s,\"failed\":%s}",
		 st->cfg.budget, st->balloon, st->free_at_start, st->total, st->limit, st->managed,
		 st->managed_peak, st->allocs, st->frees, st->refused, st->largest_refused,
		 st->cuda_errors, st->started ? "true" : "false", st->failed ? "true" : "false");
}

const char *um_strerror(um_status_t s)
{
	switch (s) {
	case UM_OK: return "ok";
	case UM_REFUSED: return "refused: would pass the managed-memory cap";
	case UM_CUDA_ERROR: return "CUDA error";
	case UM_NOT_STARTED: return "start-up failed";
	case UM_TABLE_FULL: return "too many live allocations";
	}
	return "?";
}
