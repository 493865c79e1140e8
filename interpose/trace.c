/* interpose/trace.c - the VMEM_TRACE writer (see trace.h and
 * docs/trace-format.md).
 *
 * A record is formatted on the calling thread's stack, then copied into a
 * byte ring under a mutex held only for the memcpy.  A background thread
 * drains the ring to the file, so a hook never waits on disk.  When the
 * ring has no room the record is dropped and counted; the "end" record
 * reports the count, so a reader knows the trace is incomplete.
 */
#include "interpose/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/log.h"

#define TRACE_LINE_MAX 8192
#define TRACE_RING_DEFAULT (16u << 20)
#define TRACE_CHUNK (1u << 20)
#define TRACE_FLUSH_MS 50

/* Ring state, all guarded by ring_lock: [head, head + used) (mod size)
 * holds complete lines not yet written. */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;
static char *ring;
static size_t ring_size, ring_head, ring_used;
static bool ring_stop;
static uint64_t rec_accepted;   /* lines appended (under ring_lock) */

/* Read without the lock on the hot path; set before the writer starts and
 * cleared under ring_lock. */
static bool tr_on;
static int tr_fd = -1;
static bool tr_writer_running;
static pthread_t tr_writer;

static uint64_t tr_dropped;     /* atomic */
static uint64_t tr_written;     /* atomic: lines that reached the file */
static uint64_t tr_seq;         /* atomic */
static uint64_t tr_t0;          /* monotonic ns at start */

static __thread long tr_tid __attribute__((tls_model("initial-exec")));

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t trace_now_ns(void)
{
	uint64_t t0 = __atomic_load_n(&tr_t0, __ATOMIC_RELAXED);

	if (t0 == 0) {
		uint64_t zero = 0, now = mono_ns();

		__atomic_compare_exchange_n(&tr_t0, &zero, now, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
		t0 = __atomic_load_n(&tr_t0, __ATOMIC_RELAXED);
	}
	return mono_ns() - t0;
}

uint64_t trace_next_seq(void)
{
	return __atomic_add_fetch(&tr_seq, 1, __ATOMIC_RELAXED);
}

bool trace_enabled(void)
{
	return __atomic_load_n(&tr_on, __ATOMIC_RELAXED);
}

uint64_t trace_dropped(void)
{
	return __atomic_load_n(&tr_dropped, __ATOMIC_RELAXED);
}

uint64_t trace_written(void)
{
	return __atomic_load_n(&tr_written, __ATOMIC_RELAXED);
}

static long trace_tid(void)
{
	if (tr_tid == 0)
		tr_tid = (long)syscall(SYS_gettid);
	return tr_tid;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static size_t count_lines(const char *p, size_t n)
{
	size_t lines = 0;

	for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))) != NULL; q++)
		lines++;
	return lines;
}

/* Moves up to TRACE_CHUNK bytes out of the ring into `buf` (caller holds
 * ring_lock); returns the count.  Used at close, when no producer runs. */
static size_t ring_take(char *buf)
{
	size_t n = ring_used < TRACE_CHUNK ? ring_used : TRACE_CHUNK;
	size_t first = ring_size - ring_head;

	if (first > n)
		first = n;
	memcpy(buf, ring + ring_head, first);
	memcpy(buf + first, ring, n - first);
	ring_head = (ring_head + n) % ring_size;
	ring_used -= n;
	return n;
}

static void flush_out(const char *buf, size_t n)
{
	if (n == 0)
		return;
	if (tr_fd >= 0 && write_all(tr_fd, buf, n) == 0)
		__atomic_fetch_add(&tr_written, count_lines(buf, n), __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&tr_dropped, count_lines(buf, n), __ATOMIC_RELAXED);
}

/* The writer owns [ring_head, ring_head + ring_used): producers only ever
 * write past its end, and only the writer moves ring_head.  So it writes
 * the file straight from the ring without holding the lock, and a hook
 * waits at most for another hook's memcpy, never for the disk. */
static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ring_lock);
	for (;;) {
		size_t head, n;

		if (ring_used == 0) {
			struct timespec ts;

			if (ring_stop)
				break;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += TRACE_FLUSH_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&ring_cond, &ring_lock, &ts);
			continue;
		}
		head = ring_head;
		n = ring_size - head;   /* contiguous part only; the rest next round */
		if (n > ring_used)
			n = ring_used;
		pthread_mutex_unlock(&ring_lock);
		flush_out(ring + head, n);
		pthread_mutex_lock(&ring_lock);
		ring_head = (head + n) % ring_size;
		ring_used -= n;
	}
	pthread_mutex_unlock(&ring_lock);
	return NULL;
}

int trace_append(const char *line, size_t len)
{
	size_t tail, first;

	if (!trace_enabled())
		return -1;
	pthread_mutex_lock(&ring_lock);
	if (!tr_on || ring_size - ring_used < len) {
		pthread_mutex_unlock(&ring_lock);
		__atomic_fetch_add(&tr_dropped, 1, __ATOMIC_RELAXED);
		return -1;
	}
	tail = (ring_head + ring_used) % ring_size;
	first = ring_size - tail;
	if (first > len)
		first = len;
	memcpy(ring + tail, line, first);
	memcpy(ring, line + first, len - first);
	ring_used += len;
	rec_accepted++;
	/* Wake the writer early only when the ring fills up; otherwise its
	 * timed wait picks the data up, and a hook pays no futex call. */
	if (ring_used > ring_size / 4 && ring_used - len <= ring_size / 4)
		pthread_cond_signal(&ring_cond);
	pthread_mutex_unlock(&ring_lock);
	return 0;
}

/* ---- formatting ---- */

typedef struct {
	char *buf;
	size_t len, cap;
	bool overflow;
} fmt_t;

static void put(fmt_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(fmt_t *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (f->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(f->buf + f->len, f->cap - f->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= f->cap - f->len) {
		f->overflow = true;
		return;
	}
	f->len += (size_t)n;
}

/* Hand-rolled appenders: an op record has a dozen numbers, and
 * snprintf for each costs more than the rest of the hook together. */
static void put_lit(fmt_t *f, const char *s, size_t n)
{
	if (f->overflow || f->cap - f->len <= n) {
		f->overflow = true;
		return;
	}
	memcpy(f->buf + f->len, s, n);
	f->len += n;
}

#define PUT_LIT(f, s) put_lit((f), (s), sizeof(s) - 1)

static void put_u64(fmt_t *f, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_lit(f, tmp + i, sizeof(tmp) - (size_t)i);
}

static void put_i64(fmt_t *f, int64_t v)
{
	if (v < 0) {
		PUT_LIT(f, "-");
		put_u64(f, (uint64_t)0 - (uint64_t)v);
		return;
	}
	put_u64(f, (uint64_t)v);
}

/* "0x..." in quotes, lower-case hex. */
static void put_ptr(fmt_t *f, uintptr_t v)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[24];
	int i = sizeof(tmp);

	tmp[--i] = '"';
	do {
		tmp[--i] = hex[v & 15];
		v >>= 4;
	} while (v);
	tmp[--i] = 'x';
	tmp[--i] = '0';
	tmp[--i] = '"';
	put_lit(f, tmp + i, sizeof(tmp) - (size_t)i);
}

static void put_str(fmt_t *f, const char *s)
{
	size_t n;

	if (f->overflow)
		return;
	if (!s) {
		PUT_LIT(f, "null");
		return;
	}
	n = vmem_json_escape(s, f->buf + f->len, f->cap - f->len);
	/* vmem_json_escape cuts a string that does not fit, within 8 bytes
	 * of the room it had: treat coming that close as an overflow. */
	if (n == 0 || n + 8 >= f->cap - f->len) {
		f->overflow = true;
		return;
	}
	f->len += n;
}

static const char *acc_name(uint8_t a)
{
	switch (a & VMEM_ACCESS_RW) {
	case VMEM_ACCESS_R: return "r";
	case VMEM_ACCESS_W: return "w";
	case VMEM_ACCESS_RW: return "rw";
	default: return "";
	}
}

size_t trace_format_op(char *buf, size_t cap, uint64_t seq, uint64_t t_ns, uint64_t dur_ns,
		       long tid, vmem_op_kind_t kind, const char *api, const void *stream,
		       const trace_ref_t *refs, int nrefs, const char *args_json)
{
	fmt_t f = { buf, 0, cap, false };

	PUT_LIT(&f, "{\"type\":\"op\",\"seq\":");
	put_u64(&f, seq);
	PUT_LIT(&f, ",\"t\":");
	put_u64(&f, t_ns);
	PUT_LIT(&f, ",\"dur\":");
	put_u64(&f, dur_ns);
	PUT_LIT(&f, ",\"tid\":");
	put_i64(&f, tid);
	PUT_LIT(&f, ",\"stream\":");
	put_ptr(&f, (uintptr_t)stream);
	PUT_LIT(&f, ",\"op\":");
	put_str(&f, vmem_op_name(kind));
	PUT_LIT(&f, ",\"api\":");
	put_str(&f, api);
	PUT_LIT(&f, ",\"args\":{");
	if (args_json)
		put_lit(&f, args_json, strlen(args_json));
	PUT_LIT(&f, "},\"tensors\":[");
	for (int i = 0; i < nrefs; i++) {
		if (i)
			PUT_LIT(&f, ",");
		PUT_LIT(&f, "{\"alloc\":");
		put_u64(&f, refs[i].alloc_id);
		PUT_LIT(&f, ",\"off\":");
		put_u64(&f, refs[i].offset);
		PUT_LIT(&f, ",\"bytes\":");
		put_u64(&f, refs[i].bytes);
		PUT_LIT(&f, ",\"ptr\":");
		put_ptr(&f, refs[i].ptr);
		PUT_LIT(&f, ",\"acc\":\"");
		put_lit(&f, acc_name(refs[i].access), strlen(acc_name(refs[i].access)));
		PUT_LIT(&f, "\",\"role\":");
		put_str(&f, refs[i].role ? refs[i].role : "");
		PUT_LIT(&f, "}");
	}
	PUT_LIT(&f, "]}\n");
	if (f.overflow)
		return 0;
	return f.len;
}

void trace_op(uint64_t seq, uint64_t t_ns, uint64_t dur_ns, vmem_op_kind_t kind,
	      const char *api, const void *stream, const trace_ref_t *refs,
	      int nrefs, const char *args_json)
{
	char line[TRACE_LINE_MAX];
	size_t n;

	if (!trace_enabled())
		return;
	n = trace_format_op(line, sizeof(line), seq, t_ns, dur_ns, trace_tid(), kind, api,
			    stream, refs, nrefs, args_json);
	if (n == 0) {
		/* A call with hundreds of tensors: format it on the heap. */
		size_t cap = sizeof(line) + (size_t)nrefs * 192;
		char *big = malloc(cap);

		if (big) {
			n = trace_format_op(big, cap, seq, t_ns, dur_ns, trace_tid(), kind, api,
					    stream, refs, nrefs, args_json);
			if (n)
				trace_append(big, n);
			free(big);
			if (n)
				return;
		}
		/* Count it rather than write a broken line. */
		__atomic_fetch_add(&tr_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	trace_append(line, n);
}

static const char *const mem_names[] = {
	[TRACE_MEM_ALLOC] = "alloc", [TRACE_MEM_FREE] = "free",
	[TRACE_MEM_OFFLOAD] = "offload", [TRACE_MEM_PREFETCH] = "prefetch",
	[TRACE_MEM_FAULT_IN] = "fault_in", [TRACE_MEM_EVICT] = "evict",
	[TRACE_MEM_OOM] = "oom", [TRACE_MEM_DROP] = "drop", [TRACE_MEM_HOST_MAP] = "host_map",
};

void trace_mem(trace_mem_kind_t kind, uint64_t alloc_id, uintptr_t ptr,
	       uint64_t offset, uint64_t bytes, uint64_t mapped,
	       const void *stream, uint64_t resident, uint64_t host,
	       uint64_t budget, const char *api)
{
	char line[1024];
	fmt_t f = { line, 0, sizeof(line), false };

	if (!trace_enabled() || (unsigned)kind > TRACE_MEM_HOST_MAP)
		return;
	PUT_LIT(&f, "{\"type\":\"");
	put_lit(&f, mem_names[kind], strlen(mem_names[kind]));
	PUT_LIT(&f, "\",\"seq\":");
	put_u64(&f, trace_next_seq());
	PUT_LIT(&f, ",\"t\":");
	put_u64(&f, trace_now_ns());
	PUT_LIT(&f, ",\"tid\":");
	put_i64(&f, trace_tid());
	PUT_LIT(&f, ",\"alloc\":");
	put_u64(&f, alloc_id);
	PUT_LIT(&f, ",\"ptr\":");
	put_ptr(&f, ptr);
	PUT_LIT(&f, ",\"off\":");
	put_u64(&f, offset);
	PUT_LIT(&f, ",\"bytes\":");
	put_u64(&f, bytes);
	PUT_LIT(&f, ",\"mapped\":");
	put_u64(&f, mapped);
	PUT_LIT(&f, ",\"stream\":");
	put_ptr(&f, (uintptr_t)stream);
	PUT_LIT(&f, ",\"api\":");
	put_str(&f, api ? api : "");
	PUT_LIT(&f, ",\"resident\":");
	put_u64(&f, resident);
	PUT_LIT(&f, ",\"host\":");
	put_u64(&f, host);
	PUT_LIT(&f, ",\"budget\":");
	put_u64(&f, budget);
	PUT_LIT(&f, "}\n");
	if (f.overflow) {
		__atomic_fetch_add(&tr_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	trace_append(line, f.len);
}

/* ---- open / close ---- */

static uintptr_t tr_va_base;
static uint64_t tr_va_size, tr_budget;
static bool tr_va_set;

void trace_set_va(uintptr_t base, uint64_t size, uint64_t budget)
{
	if (size) {
		tr_va_base = base;
		tr_va_size = size;
	}
	if (budget)
		tr_budget = budget;
	tr_va_set = true;
}

static void write_header(const char *path)
{
	char line[TRACE_LINE_MAX], settings[6000];
	char dev[1024];
	fmt_t f = { line, 0, sizeof(line), false };
	struct timespec rt;

	(void)path;
	clock_gettime(CLOCK_REALTIME, &rt);
	dev[0] = '\0';
	trace_header_fields(dev, sizeof(dev));
	if (vmem_config_json(&vmem_cfg, settings, sizeof(settings)) == 0)
		settings[0] = '\0';
#ifndef VMEM_VERSION
#define VMEM_VERSION "unknown"
#endif
	put(&f, "{\"type\":\"header\",\"format\":%d,\"vmem\":\"%s\",\"pid\":%ld,\"start_unix_ns\":%" PRIu64,
	    TRACE_FORMAT_VERSION, VMEM_VERSION, (long)getpid(),
	    (uint64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec));
	if (dev[0])
		put(&f, ",%s", dev);
	put(&f, ",\"settings\":{%s}", settings);
	if (tr_va_set && tr_va_size)
		put(&f, ",\"va\":{\"base\":\"0x%" PRIxPTR "\",\"size\":%" PRIu64 "}",
		    tr_va_base, tr_va_size);
	else
		put(&f, ",\"va\":null");
	if (tr_va_set && tr_budget)
		put(&f, ",\"budget\":%" PRIu64, tr_budget);
	else
		put(&f, ",\"budget\":null");
	put(&f, "}\n");
	if (!f.overflow)
		trace_append(line, f.len);
}

/* fork.  The child of a traced process does not trace: the writer thread
 * does not exist there, and two processes appending to one file would
 * interleave their records and both end it.  A DataLoader worker's own
 * calls touch no device memory of the parent's anyway.  prepare takes
 * ring_lock, so no record is half copied (the writer, when it holds the
 * lock, only waits on ring_cond, which releases it); the child drops the
 * ring's contents (the parent writes them), closes its copy of the file
 * descriptor, and re-initialises the lock and the condition, whose
 * holder and waiter (the writer) do not exist in the child.  From then
 * on trace_enabled() is false in the child and every trace call is a
 * no-op; trace_close() there does nothing, so the parent's file gets no
 * second "end" record. */
static void trace_atfork_prepare(void)
{
	pthread_mutex_lock(&ring_lock);
}

static void trace_atfork_parent(void)
{
	pthread_mutex_unlock(&ring_lock);
}

static void trace_atfork_child(void)
{
	tr_tid = 0;
	tr_on = false;
	tr_writer_running = false;
	ring_used = 0;
	if (tr_fd >= 0) {
		close(tr_fd);
		tr_fd = -1;
	}
	pthread_cond_init(&ring_cond, NULL);
	pthread_mutex_init(&ring_lock, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void trace_atfork_register(void)
{
	pthread_atfork(trace_atfork_prepare, trace_atfork_parent, trace_atfork_child);
}

int trace_open_ring(const char *path, size_t ring_bytes, bool start_writer)
{
	int fd;

	if (!path || !path[0] || trace_enabled())
		return -1;
	trace_now_ns();   /* fixes t0 */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		vmem_warn("VMEM_TRACE=%s: cannot open for writing (%s); tracing is off",
			  path, strerror(errno));
		return -1;
	}
	ring = malloc(ring_bytes);
	if (!ring) {
		vmem_warn("VMEM_TRACE=%s: no memory for a %zu-byte trace buffer; tracing is off",
			  path, ring_bytes);
		close(fd);
		return -1;
	}
	ring_size = ring_bytes;
	ring_head = ring_used = 0;
	ring_stop = false;
	rec_accepted = 0;
	__atomic_store_n(&tr_dropped, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&tr_written, 0, __ATOMIC_RELAXED);
	tr_fd = fd;
	__atomic_store_n(&tr_on, true, __ATOMIC_RELEASE);
	write_header(path);
	pthread_once(&atfork_once, trace_atfork_register);
	if (start_writer) {
		if (pthread_create(&tr_writer, NULL, writer_main, NULL) == 0)
			tr_writer_running = true;
		else
			vmem_warn("VMEM_TRACE=%s: cannot start the writer thread; records are written at exit",
				  path);
	}
	return 0;
}

void trace_open(const char *path)
{
	trace_open_ring(path, TRACE_RING_DEFAULT, true);
}

void trace_close(void)
{
	static char buf[TRACE_CHUNK];
	char line[512];
	fmt_t f = { line, 0, sizeof(line), false };
	char extra[256];

	if (!trace_enabled())
		return;
	pthread_mutex_lock(&ring_lock);
	ring_stop = true;
	pthread_cond_signal(&ring_cond);
	pthread_mutex_unlock(&ring_lock);
	if (tr_writer_running) {
		pthread_join(tr_writer, NULL);
		tr_writer_running = false;
	}
	/* No writer now: drain what is left, then close the ring to appends. */
	pthread_mutex_lock(&ring_lock);
	while (ring_used > 0) {
		size_t n = ring_take(buf);

		flush_out(buf, n);
	}
	tr_on = false;
	pthread_mutex_unlock(&ring_lock);

	extra[0] = '\0';
	trace_end_fields(extra, sizeof(extra));
	put(&f, "{\"type\":\"end\",\"seq\":%" PRIu64 ",\"t\":%" PRIu64 ",\"records\":%" PRIu64
		",\"dropped\":%" PRIu64 "%s%s}\n",
	    trace_next_seq(), trace_now_ns(), trace_written(), trace_dropped(),
	    extra[0] ? "," : "", extra);
	if (!f.overflow)
		write_all(tr_fd, line, f.len);
	close(tr_fd);
	tr_fd = -1;
	free(ring);
	ring = NULL;
	ring_size = 0;
}
