/* tests/simgpu/core_parse.c - the simulator's pure pieces: size and boolean
 * parsing for the SIMGPU_* variables, and the device-model table.
 *
 * Kept free of global state so tests/unit/simgpu can compile it alone.
 * Figures are the vendors' published peak numbers (docs/simgpu.md lists
 * the sources); link bandwidths are practical PCIe rates per direction.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

#define GIB ((uint64_t)1 << 30)

static const simgpu_model_t models[] = {
	/* GeForce GTX TITAN X (Maxwell GM200), the vDNN paper's GPU */
	{ "titanx", 12 * GIB, 7.0e12, 336.0e9, 16.0e9, 2, 5.0e-6, 5, 2 },
	/* Tesla V100 SXM2 16 GB */
	{ "v100", 16 * GIB, 15.7e12, 900.0e9, 16.0e9, 2, 4.0e-6, 7, 0 },
	/* H100 SXM5 80 GB (FP32 non-tensor peak), PCIe 5 x16 */
	{ "h100", 80 * GIB, 67.0e12, 3.35e12, 55.0e9, 2, 3.0e-6, 9, 0 },
};

static const int model_sms[] = { 24, 80, 132 };

int simgpu_parse_size(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t v = 0;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	switch (*p) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		p++;
		break;
	case 'm': case 'M':
		shift = 20;
		p++;
		break;
	case 'g': case 'G':
		shift = 30;
		p++;
		break;
	case 't': case 'T':
		shift = 40;
		p++;
		break;
	default:
		return -1;
	}
	if (*p != '\0')
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int simgpu_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "", "0", "no", "false", "off" };
	size_t i;

	if (!s)
		return -1;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* The host cost of the driver's VMM calls, microseconds per mapping, in
 * simgpu_vmm_op_t order: measured on an H100 with CUDA 13 (median of
 * one-chunk calls on 2 MiB chunks, docs/real-gpu.md "Link and virtual
 * memory"; 32 MiB mappings and calls spanning 16 mappings cost the same
 * per mapping within 8%, docs/benchmarks.md, 2026-11-26 H100 run). */
static const double vmm_cost_h100_us[SIMGPU_VMM_N] = { 4.2, 36.7, 23.9, 16.5, 16.9 };

int simgpu_parse_vmm_cost(const char *s, double out_s[SIMGPU_VMM_N], bool *per_call)
{
	char buf[128];
	const char *p = buf;
	size_t n;
	int i;

	if (!s || (n = strlen(s)) >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	*per_call = n >= 5 && !strcasecmp(buf + n - 5, "/call");
	if (*per_call)
		buf[n - 5] = '\0';
	s = buf;
	if (!*s && *per_call)
		return -1;
	if (!*s || !strcasecmp(s, "h100")) {
		for (i = 0; i < SIMGPU_VMM_N; i++)
			out_s[i] = vmm_cost_h100_us[i] * 1e-6;
		return 0;
	}
	if (!strcasecmp(s, "off") || !strcmp(s, "0")) {
		for (i = 0; i < SIMGPU_VMM_N; i++)
			out_s[i] = 0.0;
		return 0;
	}
	for (i = 0; i < SIMGPU_VMM_N; i++) {
		char *end;
		double us;

		if (!isdigit((unsigned char)*p))
			return -1;   /* also refuses signs, spaces, "nan" */
		us = strtod(p, &end);
		if (end == p || !(us >= 0.0) || us > 1e6)
			return -1;
		out_s[i] = us * 1e-6;
		p = end;
		if (i + 1 < SIMGPU_VMM_N) {
			if (*p != ',')
				return -1;
			p++;
		}
	}
	return *p ? -1 : 0;
}

const simgpu_model_t *simgpu_model_lookup(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(models) / sizeof(models[0]); i++) {
		if (!strcasecmp(name, models[i].name))
			return &models[i];
	}
	return NULL;
}

int simgpu_model_sm_count(const simgpu_model_t *m)
{
	size_t i;

	for (i = 0; m && i < sizeof(models) / sizeof(models[0]); i++) {
		if (!strcmp(m->name, models[i].name))
			return model_sms[i];
	}
	return 1;
}

double simgpu_model_op_seconds(const simgpu_model_t *m, double flops,
			       double bytes)
{
	double tf = flops / m->flops, tb = bytes / m->mem_bw;

	return m->launch_s + (tf > tb ? tf : tb);
}

/* A copy pays a fixed latency (DMA setup, of the order of a launch) plus
 * the bytes at link speed. */
double simgpu_model_copy_seconds(const simgpu_model_t *m, double bytes)
{
	return m->launch_s + bytes / m->link_bw;
}
