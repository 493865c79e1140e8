/* interpose/config.h - every VMEM_* setting, parsed once at start-up.
 *
 * The table of variables (name, default, range, unit, help) lives in
 * config.c and is mirrored in docs/configuration.md.  Parsing is pure: it
 * takes a lookup callback, so unit tests feed it values without touching
 * the environment.  A bad value makes the whole configuration invalid:
 * vmem then prints one line per problem and stays pass-through.
 */
#ifndef VMEM_INTERPOSE_CONFIG_H
#define VMEM_INTERPOSE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { VMEM_POLICY_NONE, VMEM_POLICY_ALL, VMEM_POLICY_CONV, VMEM_POLICY_DYN } vmem_policy_t;
/* VMEM_CONV_ALGO: default = fit under a vDNN policy (all, conv, dyn), app
 * under none; app = the application's own choice; mem = memory-optimal;
 * perf = fastest; fit = fastest whose workspace fits beside the layer's
 * tensors in the budget (interpose/conv_exec.c). */
typedef enum { VMEM_ALGO_DEFAULT, VMEM_ALGO_APP, VMEM_ALGO_MEM, VMEM_ALGO_PERF, VMEM_ALGO_FIT } vmem_conv_algo_t;
/* VMEM_WORKSPACE: default = wr under dyn (its algorithm choice under the
 * budget), off otherwise; vmem_workspace_mode() resolves it. */
typedef enum { VMEM_WS_DEFAULT, VMEM_WS_OFF, VMEM_WS_WR, VMEM_WS_WD } vmem_ws_mode_t;
typedef enum { VMEM_MB_ALL, VMEM_MB_POW2, VMEM_MB_UNDIVIDED } vmem_microbatch_t;
/* VMEM_LIVENESS: dead memory is dropped without a copy when memory is
 * needed (lazy), as soon as it dies (eager), or never (off). */
typedef enum { VMEM_LIVENESS_LAZY, VMEM_LIVENESS_EAGER, VMEM_LIVENESS_OFF } vmem_liveness_t;
/* VMEM_PREFETCH: where an offloaded tensor's prefetch goes: vDNN's rule
 * (vdnn) or from measured op and copy times (timed). */
typedef enum { VMEM_PREFETCH_VDNN, VMEM_PREFETCH_TIMED } vmem_prefetch_t;
/* VMEM_MAP: a new allocation under a full budget maps only what is free
 * and the rest at first touch (lazy), or everything at once (eager). */
typedef enum { VMEM_MAP_LAZY, VMEM_MAP_EAGER } vmem_map_t;
typedef enum { VMEM_HOST_MAP_AUTO, VMEM_HOST_MAP_ON, VMEM_HOST_MAP_OFF } vmem_host_map_t;
typedef enum { VMEM_FIT_BEST, VMEM_FIT_EXACT, VMEM_FIT_PENDING } vmem_fit_t;
typedef enum { VMEM_LOG_ERROR, VMEM_LOG_WARN, VMEM_LOG_INFO, VMEM_LOG_DEBUG } vmem_log_level_t;

typedef struct {
	bool enabled;              /* false: pass-through (VMEM_DISABLE=1 or a bad value) */
	vmem_policy_t policy;      /* VMEM_POLICY */
	vmem_liveness_t liveness;  /* VMEM_LIVENESS */
	vmem_prefetch_t prefetch;  /* VMEM_PREFETCH */
	bool gaps;                 /* VMEM_GAPS: plans move idle intervals of any tensor to fit */
	bool lookahead;            /* VMEM_LOOKAHEAD: each call's reads prefetched one call ahead */
	uint64_t dyn_trials;       /* VMEM_DYN_TRIALS: timed iterations per dyn mode; 0 = none */
	bool dyn_least;            /* VMEM_DYN_LEAST: dyn's passes also time "(m)" candidates */
	uint64_t device_limit;     /* VMEM_DEVICE_LIMIT bytes; 0 = default (free - reserve) */
	uint64_t device_reserve;   /* VMEM_DEVICE_RESERVE bytes kept for context/libraries;
				      VMEM_SIZE_AUTO = vmem_default_reserve(device total) */
	uint64_t host_limit;       /* VMEM_HOST_LIMIT bytes of pinned host memory; 0 = unlimited */
	vmem_map_t map;            /* VMEM_MAP */
	vmem_fit_t range_fit;      /* VMEM_RANGE_FIT: how a freed range is reused */
	bool grant_runs;           /* VMEM_GRANT_RUNS: one access grant per run of adjacent chunks */
	bool handoff;              /* VMEM_HANDOFF: chunks handed to the next call's pages, no host wait */
	vmem_host_map_t host_map;  /* VMEM_HOST_MAP: guessed extents past the budget mapped from host */
	uint64_t chunk_size;       /* VMEM_CHUNK_SIZE: physical chunk, multiple of the granularity; 0 = granularity */
	uint64_t small_threshold;  /* VMEM_SMALL_THRESHOLD: below it, allocations share chunks and stay resident */
	uint64_t va_size;          /* VMEM_VA_SIZE: virtual range reserved at start-up */
	vmem_conv_algo_t conv_algo;      /* VMEM_CONV_ALGO */
	vmem_ws_mode_t workspace;        /* VMEM_WORKSPACE */
	uint64_t workspace_limit;        /* VMEM_WORKSPACE_LIMIT bytes; 0 = none;
					    VMEM_SIZE_AUTO = vmem_wr_limit */
	vmem_microbatch_t microbatch;    /* VMEM_MICROBATCH */
	uint64_t wr_slack;               /* VMEM_WR_SLACK: percent of time WR gives for less workspace */
	uint64_t remap_cost;             /* VMEM_REMAP_COST: us per 2 MiB, WR's price of workspace */
	char trace_path[4096];           /* VMEM_TRACE; "" = off */
	char cache_path[4096];           /* VMEM_CACHE; "" = off */
	vmem_log_level_t log_level;      /* VMEM_LOG */
	bool stats;                      /* VMEM_STATS */
} vmem_config_t;

/* A size variable set to "auto" (VMEM_DEVICE_RESERVE, VMEM_WORKSPACE_LIMIT). */
#define VMEM_SIZE_AUTO UINT64_MAX

/* The default device reserve: what the CUDA context, cuDNN and cuBLAS
 * need outside vmem's pool grows with the device (per-SM local memory,
 * lazily loaded kernels), and a fixed 512 MiB left no budget at all on a
 * device with less free memory.  So the reserve is 1/8 of the device's
 * total memory, at least VMEM_RESERVE_FLOOR and at most VMEM_RESERVE_CAP
 * (a real H100 PyTorch process used about 500 MiB outside the pool:
 * context, cuDNN and cuBLAS handles; the cap leaves twice that).  Pure. */
#define VMEM_RESERVE_FLOOR (32ull << 20)
#define VMEM_RESERVE_CAP (1ull << 30)
uint64_t vmem_default_reserve(uint64_t total);
/* The reserve in effect for a device of `total` bytes: the configured
 * one, or vmem_default_reserve(total) when VMEM_DEVICE_RESERVE is auto. */
uint64_t vmem_device_reserve(const vmem_config_t *cfg, uint64_t total);

/* µ-cuDNN's per-layer workspace limit (WR) under a budget of `budget`
 * bytes (0: none): the configured VMEM_WORKSPACE_LIMIT, or when it is
 * auto 1/VMEM_WR_LIMIT_SHARE of the budget (0 without one: no limit).
 * The room beside a layer's tensors alone let WR give one layer most of
 * the budget (1.47 GB of a 2.9 GB budget on PyTorch's VGG-16, H100), so
 * that everything else had to leave around it every iteration; on the
 * h100 model 1/8 ran VGG-16 (64) under dyn at 1/2 in 0.69 of the time and
 * left the Titan X headline as it was (1/16 cost it 9%: docs/benchmarks.md,
 * 2026-11-28).  Pure. */
#define VMEM_WR_LIMIT_SHARE 8
uint64_t vmem_wr_limit(const vmem_config_t *cfg, uint64_t budget);

/* Returns the value of a variable or NULL when unset (getenv in production). */
typedef const char *(*vmem_getenv_fn)(const char *name, void *ctx);
/* Receives one complete error line (without trailing newline). */
typedef void (*vmem_config_err_fn)(const char *line, void *ctx);

/* Fills *cfg with defaults, then applies every variable found by `get`.
 * Returns the number of bad values (each reported once through `err` as
 * "VMEM_X=<value>: <what is wrong>; <what is accepted>"); on any error
 * cfg->enabled is false.  Thread-safe (no globals). */
int vmem_config_parse(vmem_config_t *cfg, vmem_getenv_fn get, void *get_ctx,
		      vmem_config_err_fn err, void *err_ctx);

/* Parses a size "123", "64K", "1.5G", "8GiB", "2T"; suffixes are binary
 * (K = 1024).  Returns 0 and *out on success, -1 on syntax error, -2 on
 * overflow. */
int vmem_parse_size(const char *s, uint64_t *out);

/* The process-wide configuration, valid after vmem_init(); read-only. */
extern vmem_config_t vmem_cfg;

/* The accepted spelling of a policy / workspace mode ("dyn", "wd"), from
 * the same tables the parser reads; "?" for a value out of range. */
const char *vmem_policy_name(vmem_policy_t p);
const char *vmem_workspace_name(vmem_ws_mode_t w);

/* VMEM_WORKSPACE as it applies: `default` resolved (wr under dyn, off
 * otherwise); never VMEM_WS_DEFAULT. */
vmem_ws_mode_t vmem_workspace_mode(const vmem_config_t *cfg);

/* Prints every effective value through the logger (VMEM_LOG=info). */
void vmem_config_print(const vmem_config_t *cfg);

/* ---- Additions (interpose/config.c). */

/* The i-th variable of the table: its name and the effective value in
 * `cfg` as a user would write it ("8G", "none").  Returns 0, or -1 past
 * the end of the table (iterate from 0). */
int vmem_config_value(const vmem_config_t *cfg, int i, const char **name,
		      char *buf, size_t len);
/* The i-th variable's help text (NULL past the end), default and unit. */
const char *vmem_config_help(int i, const char **def, const char **unit);
/* Writes every setting as a JSON object body ("policy":"none",
 * "device_limit":0,...) for the trace header; returns its length, 0 when
 * `len` is too small. */
size_t vmem_config_json(const vmem_config_t *cfg, char *buf, size_t len);
/* Writes `s` as a quoted JSON string (escaping quotes, backslashes and
 * control characters) into buf; returns the length written (0 when len <
 * 3).  Output that does not fit is cut at a character boundary, still
 * quoted.  Pure, thread-safe. */
size_t vmem_json_escape(const char *s, char *buf, size_t len);

#endif
