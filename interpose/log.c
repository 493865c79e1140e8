/* interpose/log.c - vmem's messages on stderr (see log.h).
 *
 * A hook may log, so nothing here allocates: a line is formatted into a
 * stack buffer and written with one write(2), which keeps lines from
 * different threads whole.  Repetitions are capped per format string (the
 * format's address is its message id): after LOG_REPEAT_CAP lines of one
 * kind, one "further messages suppressed" line, then silence.
 */
#include "interpose/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024
#define LOG_REPEAT_CAP 10
#define LOG_IDS 64

/* Level in force; written once by vmem_log_set_level before hooks run,
 * read racily afterwards (a stale read only shows or hides one line). */
static _Atomic int log_level = VMEM_LOG_WARN;

/* Per-format repetition counters: open addressing on the format's address,
 * slots claimed with compare-and-swap.  When the table is full the message
 * is simply not capped. */
static _Atomic(uintptr_t) log_ids[LOG_IDS];
static _Atomic(unsigned) log_counts[LOG_IDS];

static log_output_fn log_out;
static void *log_out_ctx;

static const char *const log_names[] = {
	[VMEM_LOG_ERROR] = "error",
	[VMEM_LOG_WARN] = "warning",
	[VMEM_LOG_INFO] = "info",
	[VMEM_LOG_DEBUG] = "debug",
};

void vmem_log_set_level(vmem_log_level_t level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

bool vmem_log_enabled(vmem_log_level_t level)
{
	return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void vmem_log_set_output(log_output_fn fn, void *ctx)
{
	log_out = fn;
	log_out_ctx = ctx;
}

/* Returns how many times this format has been logged before (0 first). */
static unsigned log_seen(const char *fmt)
{
	uintptr_t id = (uintptr_t)fmt;
	unsigned h = (unsigned)((id >> 3) * 2654435761u) % LOG_IDS;

	for (unsigned i = 0; i < LOG_IDS; i++) {
		unsigned s = (h + i) % LOG_IDS;
		uintptr_t cur = atomic_load_explicit(&log_ids[s], memory_order_acquire);

		if (cur == 0) {
			uintptr_t zero = 0;

			if (atomic_compare_exchange_strong(&log_ids[s], &zero, id) || zero == id)
				return atomic_fetch_add(&log_counts[s], 1);
			continue;
		}
		if (cur == id)
			return atomic_fetch_add(&log_counts[s], 1);
	}
	return 0;
}

static void log_write(const char *buf, size_t len)
{
	if (log_out) {
		log_out(buf, len, log_out_ctx);
		return;
	}
	while (len > 0) {
		ssize_t n = write(STDERR_FILENO, buf, len);

		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* One line of `level`; `seen`: how many of its format came before (0
 * for a message that is not capped). */
static void log_emit(vmem_log_level_t level, unsigned seen, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	int n;

	if (seen > LOG_REPEAT_CAP)
		return;
	n = snprintf(line, sizeof(line), "vmem: %s: ", log_names[level]);
	if (seen == LOG_REPEAT_CAP) {
		n += snprintf(line + n, sizeof(line) - (size_t)n,
			      "further messages like this one are suppressed\n");
		log_write(line, (size_t)n);
		return;
	}
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (n >= (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_write(line, (size_t)n);
}

void vmem_log(vmem_log_level_t level, const char *fmt, ...)
{
	va_list ap;

	if (!vmem_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_emit(level, log_seen(fmt), fmt, ap);
	va_end(ap);
}

void vmem_log_uncapped(vmem_log_level_t level, const char *fmt, ...)
{
	va_list ap;

	if (!vmem_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_emit(level, 0, fmt, ap);
	va_end(ap);
}

void vmem_log_raw(const char *line)
{
	char buf[LOG_LINE_MAX];
	size_t len = strlen(line);

	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	memcpy(buf, line, len);
	buf[len++] = '\n';
	log_write(buf, len);
}
