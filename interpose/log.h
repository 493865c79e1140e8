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

#define vmem_error(...) vmem_log(VMEM_LOG_ERROR, __VA_ARGS__)
#define vmem_warn(...) vmem_log(VMEM_LOG_WARN, __VA_ARGS__)
#define vmem_info(...) vmem_log(VMEM_LOG_INFO, __VA_ARGS__)
#define vmem_debug(...) vmem_log(VMEM_LOG_DEBUG, __VA_ARGS__)

#endif
