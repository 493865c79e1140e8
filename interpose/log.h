/* interpose/log.h - vmem's messages on stderr.
 *
 * Every line starts with "vmem: <level>: ".  Lines are formatted into a
 * fixed buffer and written with one write(2): no malloc, safe inside hooks.
 * A message id caps repetitions (the 10th repeat says "further messages
 * suppressed").  Thread-safe.
 */
#ifndef VMEM_INTERPOSE_LOG_H
#define VMEM_INTERPOSE_LOG_H

#include "interpose/config.h"

void vmem_log(vmem_log_level_t level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* vmem_log without the cap on repeats: for a listing whose lines share
 * one format (the policy's plan dump at VMEM_LOG=debug), each a different
 * line, not a repeat. */
void vmem_log_uncapped(vmem_log_level_t level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define vmem_error(...) vmem_log(VMEM_LOG_ERROR, __VA_ARGS__)
#define vmem_warn(...) vmem_log(VMEM_LOG_WARN, __VA_ARGS__)
#define vmem_info(...) vmem_log(VMEM_LOG_INFO, __VA_ARGS__)
#define vmem_debug(...) vmem_log(VMEM_LOG_DEBUG, __VA_ARGS__)

/* ---- Additions (interpose/log.c). */
#include <stdbool.h>
#include <stddef.h>

/* Sets the level in force (from VMEM_LOG, at init; default warn). */
void vmem_log_set_level(vmem_log_level_t level);
/* True when a message of `level` would be printed: guard costly
 * formatting on warm paths with it. */
bool vmem_log_enabled(vmem_log_level_t level);
/* Redirects every line (including its trailing newline) to `fn` instead of
 * stderr; NULL restores stderr.  For tests; not thread-safe against
 * concurrent logging. */
typedef void (*log_output_fn)(const char *line, size_t len, void *ctx);
void vmem_log_set_output(log_output_fn fn, void *ctx);
/* Writes `line` plus a newline as it is (no prefix, no level filter, no
 * cap): for the multi-line VMEM_STATS table and VMEM_LOG=info listings. */
void vmem_log_raw(const char *line);

#endif
