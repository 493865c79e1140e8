/* interpose/config.c - the table of VMEM_* variables and their parser
 * (see config.h).  docs/configuration.md mirrors this table: keep both in
 * step.
 *
 * Parsing is pure: values come through a lookup callback and problems go
 * out through an error callback, so unit tests drive every case without
 * touching the environment.  One bad value makes the whole configuration
 * invalid (cfg->enabled = false): a half-applied configuration would
 * silently run something the user did not ask for.
 */
#include "interpose/config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "interpose/log.h"

vmem_config_t vmem_cfg;

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)

typedef enum { CFG_BOOL, CFG_ENUM, CFG_SIZE, CFG_PATH } cfg_type_t;

typedef struct {
	const char *name;
	cfg_type_t type;
	const char *def;          /* default, as a user would write it */
	const char *const *names; /* CFG_ENUM: accepted values, index = enum value */
	uint64_t min, max;        /* CFG_SIZE: range of non-zero values */
	uint64_t multiple;        /* CFG_SIZE: non-zero values must be a multiple */
	bool zero_ok;             /* CFG_SIZE: 0 has a meaning (see help) */
	bool auto_ok;             /* CFG_SIZE: "auto" is accepted (VMEM_SIZE_AUTO) */
	size_t off;               /* field in vmem_config_t */
	const char *unit;
	const char *help;
} cfg_var_t;

static const char *const policy_names[] = { "none", "all", "conv", "dyn", NULL };
static const char *const liveness_names[] = { "lazy", "eager", "off", NULL };
static const char *const prefetch_names[] = { "vdnn", "timed", NULL };
static const char *const algo_names[] = { "default", "app", "mem", "perf", "fit", NULL };
static const char *const ws_names[] = { "default", "off", "wr", "wd", NULL };
static const char *const mb_names[] = { "all", "pow2", "undivided", NULL };
static const char *const map_names[] = { "lazy", "eager", NULL };
static const char *const fit_names[] = { "best", "exact", "pending", NULL };
static const char *const host_map_names[] = { "auto", "1", "0", NULL };
static const char *const log_names[] = { "error", "warn", "info", "debug", NULL };

const char *vmem_policy_name(vmem_policy_t p)
{
	return (unsigned)p < sizeof(policy_names) / sizeof(*policy_names) - 1 ?
		policy_names[p] : "?";
}

const char *vmem_workspace_name(vmem_ws_mode_t w)
{
	return (unsigned)w < sizeof(ws_names) / sizeof(*ws_names) - 1 ? ws_names[w] : "?";
}

vmem_ws_mode_t vmem_workspace_mode(const vmem_config_t *cfg)
{
	if (cfg->workspace != VMEM_WS_DEFAULT)
		return cfg->workspace;
	return cfg->policy == VMEM_POLICY_DYN ? VMEM_WS_WR : VMEM_WS_OFF;
}

#define F(field) offsetof(vmem_config_t, field)

static const cfg_var_t cfg_vars[] = {
	{ "VMEM_DISABLE", CFG_BOOL, "0", NULL, 0, 0, 0, false, false, F(enabled), "",
	  "1: vmem stays pass-through (every hook calls the real function only)" },
	{ "VMEM_POLICY", CFG_ENUM, "none", policy_names, 0, 0, 0, false, false, F(policy), "",
	  "memory policy: none (pool + reactive layer), all (vDNN-all), conv (vDNN-conv), dyn (vDNN-dyn)" },
	{ "VMEM_LIVENESS", CFG_ENUM, "lazy", liveness_names, 0, 0, 0, false, false, F(liveness), "",
	  "dead memory of a planned iteration: lazy (dropped without a copy when memory is needed), "
	  "eager (dropped as soon as it dies), off (kept)" },
	{ "VMEM_PREFETCH", CFG_ENUM, "vdnn", prefetch_names, 0, 0, 0, false, false, F(prefetch), "",
	  "prefetch of offloaded tensors: vdnn (at the next layer's backward, vDNN Fig. 10), "
	  "timed (from measured op and copy times)" },
	{ "VMEM_DEVICE_LIMIT", CFG_SIZE, "0", NULL, 1 * MiB, 1ull << 50, 0, true, false, F(device_limit), "bytes",
	  "device memory vmem may map; 0: free device memory minus VMEM_DEVICE_RESERVE" },
	{ "VMEM_DEVICE_RESERVE", CFG_SIZE, "auto", NULL, 0, 1ull << 50, 0, true, true, F(device_reserve), "bytes",
	  "device memory left to the CUDA context and libraries when VMEM_DEVICE_LIMIT is 0; "
	  "auto: 1/8 of the device's memory, at least 32 MiB, at most 1 GiB" },
	{ "VMEM_HOST_LIMIT", CFG_SIZE, "0", NULL, 1 * MiB, 1ull << 50, 0, true, false, F(host_limit), "bytes",
	  "pinned host memory for offloaded data; 0: unlimited" },
	{ "VMEM_MAP", CFG_ENUM, "lazy", map_names, 0, 0, 0, false, false, F(map), "",
	  "when the budget is full, a new allocation maps what is free and the rest at first touch "
	  "(lazy), or evicts live memory to map all of it at once (eager)" },
	{ "VMEM_RANGE_FIT", CFG_ENUM, "pending", fit_names, 0, 0, 0, false, false, F(range_fit), "",
	  "pending: a new allocation reuses a larger freed range in place (split, adjacent ones "
	  "merged), also one whose free has not completed yet (ordered by its pages' last uses), "
	  "and a reclaim unmaps only the chunks it needs; best: the same with ready ranges only; "
	  "exact: only a freed range of the same chunk count is reused" },
	{ "VMEM_GRANT_RUNS", CFG_BOOL, "1", NULL, 0, 0, 0, false, false, F(grant_runs), "",
	  "1: adjacent chunks mapped together (an allocation, a fault-in, a prefetch) get their "
	  "access in one cuMemSetAccess; 0: one call per chunk" },
	{ "VMEM_HANDOFF", CFG_BOOL, "1", NULL, 0, 0, 0, false, false, F(handoff), "",
	  "1: a prefetch for the next call that finds no free chunk takes the chunk of a page the "
	  "plan needs later while the call before still uses it - mapped at both addresses, the "
	  "copies ordered after that use on the device - instead of waiting on the host; "
	  "0: it waits, or leaves the page to the call's fault" },
	{ "VMEM_HOST_MAP", CFG_ENUM, "auto", host_map_names, 0, 0, 0, false, false, F(host_map), "",
	  "a kernel whose pointer arguments of unknown size reach past the budget runs with the "
	  "pages past their first mapped from their pinned host copies (read over the link if the "
	  "kernel touches them) instead of failing; likewise an allocation larger than the budget "
	  "is taken, and a call nothing else fits runs with its pages past the budget from the "
	  "host (slow, but it runs); auto: where the device maps host memory "
	  "(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) and a start-up probe carries "
	  "bytes through it; 1: on without the probe (vmem stays off where the device cannot); 0: off" },
	{ "VMEM_CHUNK_SIZE", CFG_SIZE, "0", NULL, 2 * MiB, 1 * GiB, 2 * MiB, true, false, F(chunk_size), "bytes",
	  "physical chunk size, a multiple of 2 MiB; 0: chosen from the budget (budget / 128 "
	  "rounded down to a power of two, 2 MiB to 16 MiB)" },
	{ "VMEM_SMALL_THRESHOLD", CFG_SIZE, "1M", NULL, 0, 1 * GiB, 0, true, false, F(small_threshold), "bytes",
	  "allocations below this share chunks and are never offloaded" },
	{ "VMEM_VA_SIZE", CFG_SIZE, "0", NULL, 1 * GiB, 1ull << 47, 2 * MiB, true, false, F(va_size), "bytes",
	  "virtual range reserved at start-up, a multiple of 2 MiB; 0: chosen from device and host memory" },
	{ "VMEM_CONV_ALGO", CFG_ENUM, "default", algo_names, 0, 0, 0, false, false, F(conv_algo), "",
	  "conv algorithm answers: app (the application's), mem (memory-optimal), perf (fastest), fit (fastest that fits the budget); default: fit under a policy, app under none" },
	{ "VMEM_WORKSPACE", CFG_ENUM, "default", ws_names, 0, 0, 0, false, false, F(workspace), "",
	  "conv workspace optimisation: off, wr (per-layer DP), wd (network-wide ILP); "
	  "default: wr under dyn, off otherwise" },
	{ "VMEM_WORKSPACE_LIMIT", CFG_SIZE, "auto", NULL, 1, 1ull << 50, 0, true, true, F(workspace_limit), "bytes",
	  "workspace limit per layer (wr) or in total (wd); 0: none; auto: 1/8 of the budget "
	  "per layer under wr, none under wd or without a budget" },
	{ "VMEM_MICROBATCH", CFG_ENUM, "pow2", mb_names, 0, 0, 0, false, false, F(microbatch), "",
	  "micro-batch sizes tried: all, pow2 (powers of two), undivided (whole batch only)" },
	{ "VMEM_WR_SLACK", CFG_SIZE, "1", NULL, 1, 100, 0, true, false, F(wr_slack), "percent",
	  "wr: of the configurations at most this much slower than the fastest under the limit, "
	  "the one with the least workspace; 0: the fastest" },
	{ "VMEM_REMAP_COST", CFG_SIZE, "0", NULL, 1, 1000000, 0, true, false, F(remap_cost), "us",
	  "wr: once the budget binds, each of the pool's chunks of a configuration's workspace "
	  "costs the call this much (the driver's unmap and map of it around the call: 61 us on an "
	  "H100, whatever the chunk size); "
	  "0 (default, until measured on a GPU): workspace is free, only VMEM_WR_SLACK trades "
	  "time for it" },
	{ "VMEM_DYN_TRIALS", CFG_SIZE, "1", NULL, 1, 100, 0, true, false, F(dyn_trials), "iterations",
	  "VMEM_POLICY=dyn: planned iterations each offload mode runs, timed on the device, before "
	  "the fastest is kept; 0: keep the mode computed from the plan's peaks" },
	{ "VMEM_DYN_LEAST", CFG_BOOL, "1", NULL, 0, 0, 0, false, false, F(dyn_least), "",
	  "VMEM_POLICY=dyn with µ-cuDNN on: the timed passes also run each offload mode with every "
	  "convolution's least-workspace configuration (vDNN's \"(m)\"), kept when faster; "
	  "0: the configurations chosen within the plan's room only" },
	{ "VMEM_GAPS", CFG_BOOL, "1", NULL, 0, 0, 0, false, false, F(gaps), "",
	  "1: an offloading plan (all, conv, dyn) that does not fit the budget also moves idle "
	  "intervals of other tensors (weights, gradients, optimizer state), planned; "
	  "0: the reactive layer pages what does not fit" },
	{ "VMEM_LOOKAHEAD", CFG_BOOL, "1", NULL, 0, 0, 0, false, false, F(lookahead), "",
	  "1: under all, conv and dyn, what each call reads is prefetched before the call before "
	  "it when it is away (evicted by the pool, not moved by the plan); 0: it faults in at "
	  "the call" },
	{ "VMEM_TRACE", CFG_PATH, "", NULL, 0, 0, 0, false, false, F(trace_path), "path",
	  "write the JSON Lines trace to this file; empty: off" },
	{ "VMEM_CACHE", CFG_PATH, "", NULL, 0, 0, 0, false, false, F(cache_path), "path",
	  "solver result cache file; empty: off" },
	{ "VMEM_LOG", CFG_ENUM, "warn", log_names, 0, 0, 0, false, false, F(log_level), "",
	  "message level: error, warn, info (prints every setting at start), debug" },
	{ "VMEM_STATS", CFG_BOOL, "0", NULL, 0, 0, 0, false, false, F(stats), "",
	  "1: print a summary table on stderr at exit" },
};

#undef F

#define NVARS (sizeof(cfg_vars) / sizeof(cfg_vars[0]))

int vmem_parse_size(const char *s, uint64_t *out)
{
	const char *p = s;
	char *end;
	unsigned long long whole;
	uint64_t frac = 0, frac_div = 1, mult = 1;
	int frac_digits = 0;

	if (!s)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	/* strtoull would accept "-1" (and wrap) and leading "+". */
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
		while (*p >= '0' && *p <= '9') {
			/* Digits past 18 cannot change a byte count. */
			if (frac_digits < 18) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
				frac_digits++;
			}
			p++;
		}
	}
	switch (*p) {
	case 'k': case 'K': mult = KiB; p++; break;
	case 'm': case 'M': mult = MiB; p++; break;
	case 'g': case 'G': mult = GiB; p++; break;
	case 't': case 'T': mult = TiB; p++; break;
	default: break;
	}
	if (mult > 1 && (*p == 'i' || *p == 'I')) {
		p++;
		if (*p != 'b' && *p != 'B')
			return -1;
	}
	if (*p == 'b' || *p == 'B')
		p++;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\0')
		return -1;
	if (whole > UINT64_MAX / mult)
		return -2;
	whole *= mult;
	if (frac) {
		/* frac / frac_div < 1 and mult <= 2^40: frac * mult may exceed
		 * 64 bits, so scale in 128-bit arithmetic. */
		unsigned __int128 f = (unsigned __int128)frac * mult;

		if (f % frac_div != 0 && mult == 1)
			return -1;   /* a fraction of a byte */
		f /= frac_div;
		if (whole > UINT64_MAX - (uint64_t)f)
			return -2;
		whole += (uint64_t)f;
	}
	*out = whole;
	return 0;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off", "" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	return -1;
}

static void enum_list(const cfg_var_t *v, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; v->names[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", v->names[i]);
}

/* Writes a size the way a user would (exact binary suffix when one fits). */
static void size_str(uint64_t b, char *buf, size_t len)
{
	static const char sfx[] = "TGMK";
	static const uint64_t mul[] = { TiB, GiB, MiB, KiB };

	for (int i = 0; i < 4; i++)
		if (b >= mul[i] && b % mul[i] == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", b / mul[i], sfx[i]);
			return;
		}
	snprintf(buf, len, "%" PRIu64, b);
}

typedef struct {
	vmem_config_err_fn err;
	void *ctx;
	int bad;
} cfg_errs_t;

static void cfg_bad(cfg_errs_t *e, const cfg_var_t *v, const char *value,
		    const char *what, const char *accepted)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s=%s: %s; %s", v->name, value, what, accepted);
	e->bad++;
	if (e->err)
		e->err(line, e->ctx);
}

static void apply(vmem_config_t *cfg, const cfg_var_t *v, const char *value, cfg_errs_t *e)
{
	char *field = (char *)cfg + v->off;
	char accepted[512], a[32], b[32];
	uint64_t size;
	bool flag;
	int rc;

	switch (v->type) {
	case CFG_BOOL:
		if (parse_bool(value, &flag) != 0) {
			cfg_bad(e, v, value, "not a boolean",
				"accepted: 1, 0, yes, no, true, false, on, off");
			return;
		}
		if (strcmp(v->name, "VMEM_DISABLE") == 0)
			flag = !flag;   /* stored as `enabled` */
		*(bool *)field = flag;
		return;
	case CFG_ENUM:
		for (int i = 0; v->names[i]; i++)
			if (strcasecmp(value, v->names[i]) == 0) {
				*(int *)field = i;
				return;
			}
		{
			char list[256];

			enum_list(v, list, sizeof(list));
			snprintf(accepted, sizeof(accepted), "accepted: %s", list);
		}
		cfg_bad(e, v, value, "unknown value", accepted);
		return;
	case CFG_SIZE:
		if (v->auto_ok && strcasecmp(value, "auto") == 0) {
			*(uint64_t *)field = VMEM_SIZE_AUTO;
			return;
		}
		rc = vmem_parse_size(value, &size);
		if (rc == -1) {
			cfg_bad(e, v, value, "not a size",
				v->auto_ok ?
				"accepted: auto, or bytes with an optional binary suffix K, M, G, T (KiB, MB, ...), e.g. 8G, 1.5G, 512MiB" :
				"accepted: bytes with an optional binary suffix K, M, G, T (KiB, MB, ...), e.g. 8G, 1.5G, 512MiB");
			return;
		}
		if (rc == -2) {
			cfg_bad(e, v, value, "too large (overflows 64 bits)",
				"accepted: sizes up to 16E");
			return;
		}
		size_str(v->min, a, sizeof(a));
		size_str(v->max, b, sizeof(b));
		if (size == 0 && !v->zero_ok) {
			snprintf(accepted, sizeof(accepted), "accepted: %s to %s", a, b);
			cfg_bad(e, v, value, "must not be 0", accepted);
			return;
		}
		if (size != 0 && (size < v->min || size > v->max)) {
			snprintf(accepted, sizeof(accepted), "accepted: %s%s to %s",
				 v->zero_ok ? "0 or " : "", a, b);
			cfg_bad(e, v, value, "out of range", accepted);
			return;
		}
		if (size != 0 && v->multiple && size % v->multiple != 0) {
			size_str(v->multiple, a, sizeof(a));
			snprintf(accepted, sizeof(accepted), "accepted: %sa multiple of %s",
				 v->zero_ok ? "0 or " : "", a);
			cfg_bad(e, v, value, "not a multiple of the chunk granularity", accepted);
			return;
		}
		*(uint64_t *)field = size;
		return;
	case CFG_PATH:
		if (strlen(value) >= sizeof(cfg->trace_path)) {
			cfg_bad(e, v, "<...>", "path too long",
				"accepted: paths shorter than 4096 bytes");
			return;
		}
		strcpy(field, value);
		return;
	}
}

uint64_t vmem_default_reserve(uint64_t total)
{
	uint64_t r = total / 8;

	if (r < VMEM_RESERVE_FLOOR)
		r = VMEM_RESERVE_FLOOR;
	if (r > VMEM_RESERVE_CAP)
		r = VMEM_RESERVE_CAP;
	return r;
}

uint64_t vmem_wr_limit(const vmem_config_t *cfg, uint64_t budget)
{
	if (cfg->workspace_limit != VMEM_SIZE_AUTO)
		return cfg->workspace_limit;
	return budget / VMEM_WR_LIMIT_SHARE;
}

uint64_t vmem_device_reserve(const vmem_config_t *cfg, uint64_t total)
{
	return cfg->device_reserve == VMEM_SIZE_AUTO ? vmem_default_reserve(total) :
		cfg->device_reserve;
}

static const char *null_get(const char *name, void *ctx)
{
	(void)name;
	(void)ctx;
	return NULL;
}

int vmem_config_parse(vmem_config_t *cfg, vmem_getenv_fn get, void *get_ctx,
		      vmem_config_err_fn err, void *err_ctx)
{
	cfg_errs_t e = { err, err_ctx, 0 };

	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = true;
	/* Defaults come from the table itself, so the table, --help and the
	 * docs cannot disagree with the code. */
	for (size_t i = 0; i < NVARS; i++)
		apply(cfg, &cfg_vars[i], cfg_vars[i].def, &e);
	if (!get)
		get = null_get;
	for (size_t i = 0; i < NVARS; i++) {
		const char *v = get(cfg_vars[i].name, get_ctx);

		if (v)
			apply(cfg, &cfg_vars[i], v, &e);
	}
	if (e.bad)
		cfg->enabled = false;
	return e.bad;
}

int vmem_config_value(const vmem_config_t *cfg, int i, const char **name,
		      char *buf, size_t len)
{
	const cfg_var_t *v;
	const char *field;

	if (i < 0 || (size_t)i >= NVARS)
		return -1;
	v = &cfg_vars[i];
	field = (const char *)cfg + v->off;
	*name = v->name;
	switch (v->type) {
	case CFG_BOOL: {
		bool b = *(const bool *)field;

		if (strcmp(v->name, "VMEM_DISABLE") == 0)
			b = !b;
		snprintf(buf, len, "%d", b ? 1 : 0);
		break;
	}
	case CFG_ENUM:
		snprintf(buf, len, "%s", v->names[*(const int *)field]);
		break;
	case CFG_SIZE:
		if (*(const uint64_t *)field == VMEM_SIZE_AUTO)
			snprintf(buf, len, "auto");
		else
			size_str(*(const uint64_t *)field, buf, len);
		break;
	case CFG_PATH:
		snprintf(buf, len, "%s", field);
		break;
	}
	return 0;
}

const char *vmem_config_help(int i, const char **def, const char **unit)
{
	if (i < 0 || (size_t)i >= NVARS)
		return NULL;
	if (def)
		*def = cfg_vars[i].def;
	if (unit)
		*unit = cfg_vars[i].unit;
	return cfg_vars[i].help;
}

size_t vmem_config_json(const vmem_config_t *cfg, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NVARS && n < len; i++) {
		const cfg_var_t *v = &cfg_vars[i];
		const char *field = (const char *)cfg + v->off;
		char key[64];
		size_t k = 0;

		/* "VMEM_DEVICE_LIMIT" -> "device_limit" */
		for (const char *p = v->name + 5; *p && k < sizeof(key) - 1; p++)
			key[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		key[k] = '\0';
		n += (size_t)snprintf(buf + n, len - n, "%s\"%s\":", i ? "," : "", key);
		if (n >= len)
			break;
		switch (v->type) {
		case CFG_BOOL: {
			bool b = *(const bool *)field;

			if (strcmp(v->name, "VMEM_DISABLE") == 0)
				b = !b;
			n += (size_t)snprintf(buf + n, len - n, "%s", b ? "true" : "false");
			break;
		}
		case CFG_ENUM:
			n += (size_t)snprintf(buf + n, len - n, "\"%s\"", v->names[*(const int *)field]);
			break;
		case CFG_SIZE:
			if (*(const uint64_t *)field == VMEM_SIZE_AUTO)
				n += (size_t)snprintf(buf + n, len - n, "\"auto\"");
			else
				n += (size_t)snprintf(buf + n, len - n, "%" PRIu64,
						      *(const uint64_t *)field);
			break;
		case CFG_PATH:
			n += vmem_json_escape(field, buf + n, len - n);
			break;
		}
	}
	if (n >= len) {
		buf[0] = '\0';
		return 0;
	}
	return n;
}

size_t vmem_json_escape(const char *s, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (len < 3)
		return 0;
	buf[n++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc = 0;

		switch (*p) {
		case '"': esc = '"'; break;
		case '\\': esc = '\\'; break;
		case '\n': esc = 'n'; break;
		case '\r': esc = 'r'; break;
		case '\t': esc = 't'; break;
		case '\b': esc = 'b'; break;
		case '\f': esc = 'f'; break;
		default: break;
		}
		if (esc) {
			if (n + 3 >= len)
				break;
			buf[n++] = '\\';
			buf[n++] = esc;
		} else if (*p < 0x20) {
			if (n + 7 >= len)
				break;
			buf[n++] = '\\';
			buf[n++] = 'u';
			buf[n++] = '0';
			buf[n++] = '0';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 15];
		} else {
			if (n + 2 >= len)
				break;
			buf[n++] = (char)*p;
		}
	}
	buf[n++] = '"';
	buf[n] = '\0';
	return n;
}

void vmem_config_print(const vmem_config_t *cfg)
{
	char val[4200], line[4400];
	const char *name;

	if (!vmem_log_enabled(VMEM_LOG_INFO))
		return;
#ifndef VMEM_VERSION
#define VMEM_VERSION "unknown"
#endif
	snprintf(line, sizeof(line), "vmem: info: vmem %s, %s", VMEM_VERSION,
		 cfg->enabled ? "enabled" : "pass-through");
	vmem_log_raw(line);
	/* vmem_log_raw, not vmem_info: the repetition cap would cut the list. */
	for (int i = 0; vmem_config_value(cfg, i, &name, val, sizeof(val)) == 0; i++) {
		const char *def = "";
		uint64_t d, cur;

		vmem_config_help(i, &def, NULL);
		bool is_def = strcmp(val, def) == 0 ||
			(vmem_parse_size(def, &d) == 0 && vmem_parse_size(val, &cur) == 0 && d == cur);
		snprintf(line, sizeof(line), "vmem: info: %s=%s%s", name, val,
			 is_def ? " (default)" : "");
		vmem_log_raw(line);
	}
}
