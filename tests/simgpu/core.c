/* tests/simgpu/core.c - libsimgpu.so: the state every simulated library
 * shares.
 *
 * Device memory is host memory with real page protection.  Physical
 * memory is one sparse memfd ("simgpu-device"): each physical allocation
 * (cudaMalloc, cuMemCreate) is a range of file offsets handed out by a bump
 * counter and returned with a hole punch, so untouched pages cost nothing
 * (dry-run maps tens of GB on a small machine) and no file descriptor is
 * spent per allocation.  Virtual ranges are anonymous PROT_NONE mappings;
 * mapping puts the memfd range there with MAP_FIXED|MAP_SHARED, so the same
 * physical pages keep their bytes across unmap/map at another address, as
 * on a GPU.  A touch of anything not mapped with access raises SIGSEGV,
 * which the handler here turns into "simgpu: illegal address ... in <op>".
 *
 * Time is virtual (core_clock.c): every op executes at once on the calling
 * thread and its modelled duration is queued on its stream and engine.
 *
 * Locking: one mutex (`lock`) guards all shared state below; it is never
 * held while user data is copied or a kernel runs, and never taken in the
 * signal handler.  The op-name stack is thread-local.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"

#define ALLOC_UNIT 512u         /* cudaMalloc accounting granule */
#define PHYS_MAGIC 0x53475048u  /* "SGPH" */
#define STREAM_MAGIC 0x53475354u
#define STREAM_DEAD 0x44454144u   /* destroyed: kept so a later use is caught */
#define EVENT_MAGIC 0x53474556u
#define OP_DEPTH 8

/* ---- sorted arrays of ranges: every element starts with
 * { uintptr_t base; size_t size; } ---- */
struct sarr {
	char *a;
	size_t n, cap, esz;
};

struct range_head {
	uintptr_t base;
	size_t size;
};

static void *sa_at(const struct sarr *s, size_t i)
{
	return s->a + i * s->esz;
}

static const struct range_head *sa_head(const struct sarr *s, size_t i)
{
	return (const struct range_head *)sa_at(s, i);
}

/* Number of elements whose base is <= addr. */
static size_t sa_upper(const struct sarr *s, uintptr_t addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sa_head(s, mid)->base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the element containing addr, or -1. */
static long sa_find(const struct sarr *s, uintptr_t addr)
{
	size_t i = sa_upper(s, addr);
	const struct range_head *h;

	if (i == 0)
		return -1;
	h = sa_head(s, i - 1);
	return addr - h->base < h->size ? (long)(i - 1) : -1;
}

/* True when [base, base+size) overlaps an element. */
static bool sa_overlaps(const struct sarr *s, uintptr_t base, size_t size)
{
	size_t i = sa_upper(s, base + size - 1);
	const struct range_head *h;

	if (i == 0)
		return false;
	h = sa_head(s, i - 1);
	return h->base + h->size > base;
}

static int sa_insert(struct sarr *s, const void *e)
{
	size_t i = sa_upper(s, ((const struct range_head *)e)->base);

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		char *a = realloc(s->a, cap * s->esz);

		if (!a)
			return -1;
		s->a = a;
		s->cap = cap;
	}
	memmove(sa_at(s, i + 1), sa_at(s, i), (s->n - i) * s->esz);
	memcpy(sa_at(s, i), e, s->esz);
	s->n++;
	return 0;
}

static void sa_remove(struct sarr *s, size_t i)
{
	memmove(sa_at(s, i), sa_at(s, i + 1), (s->n - i - 1) * s->esz);
	s->n--;
}

/* ---- state ---- */

struct phys {
	uint32_t magic;
	int maps;               /* live mappings of this allocation */
	bool released;          /* cuMemRelease called */
	uint64_t off;           /* file offset in the memfd */
	size_t size;
};

/* A virtual reservation: a VMM range, or one cudaMalloc (with guard). */
enum { RESV_VMM, RESV_ALLOC };
struct resv {
	uintptr_t base;
	size_t size;
	int kind;
	size_t charged;         /* RESV_ALLOC: bytes accounted */
	uint64_t off;           /* RESV_ALLOC: memfd offset */
	size_t map_len;         /* RESV_ALLOC: bytes mapped */
};

/* Accessible device memory: a cudaMalloc'd block (exact size) or a VMM
 * mapping.  prot: 0 none, 1 read, 3 read-write. */
struct region {
	uintptr_t base;
	size_t size;
	int prot;
	struct phys *phys;      /* NULL for cudaMalloc blocks */
	size_t phys_off;        /* offset inside phys */
};

enum { HOST_ALLOC, HOST_REGISTERED };
struct host_range {
	uintptr_t base;
	size_t size;
	int kind;
};

struct stream {
	uint32_t magic;
	unsigned flags;
	int priority;
	double t;               /* virtual time its queued work ends */
	struct stream *next;
};

struct event {
	uint32_t magic;
	unsigned flags;
	bool recorded;
	double t;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static simgpu_model_t model;
static bool dryrun;
static char *report_path;
static size_t page_size;

static int phys_fd = -1;
static uint64_t phys_next, phys_end;
static uint64_t mem_used, mem_peak;
static uint64_t bytes_h2d, bytes_d2h, bytes_d2d, n_compute;

static struct sarr resvs = { NULL, 0, 0, sizeof(struct resv) };
static struct sarr regions = { NULL, 0, 0, sizeof(struct region) };
static struct sarr hosts = { NULL, 0, 0, sizeof(struct host_range) };

static simgpu_clock_t clk;
static struct stream legacy = { STREAM_MAGIC, 0, 0, 0.0, NULL };
static struct stream *streams;  /* created streams, for the legacy floor */

static simgpu_driver_proc_fn driver_proc;

static __thread const char *op_stack[OP_DEPTH]
	__attribute__((tls_model("initial-exec")));
static __thread int op_depth __attribute__((tls_model("initial-exec")));

static size_t round_up(size_t v, size_t unit)
{
	return (v + unit - 1) / unit * unit;
}

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* ---- faults ---- */

static size_t fmt_hex(char *buf, uintptr_t v)
{
	char tmp[2 * sizeof(v)];
	size_t n = 0, i;

	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

/* Async-signal-safe: only write(2) and abort(). */
_Noreturn void simgpu_fault(const void *addr)
{
	char buf[256];
	const char *op = "host code";
	size_t n = 0, len;
	int d = op_depth;

	if (d > 0)
		op = op_stack[(d > OP_DEPTH ? OP_DEPTH : d) - 1];
	memcpy(buf, "simgpu: illegal address 0x", 26);
	n = 26;
	n += fmt_hex(buf + n, (uintptr_t)addr);
	memcpy(buf + n, " in ", 4);
	n += 4;
	len = strlen(op);
	if (len > sizeof(buf) - n - 1)
		len = sizeof(buf) - n - 1;
	memcpy(buf + n, op, len);
	n += len;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0)
		n = 0;
	signal(SIGABRT, SIG_DFL);
	abort();
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	simgpu_fault(si->si_addr);
}

void simgpu_op_begin(const char *op)
{
	if (op_depth < OP_DEPTH)
		op_stack[op_depth] = op;
	op_depth++;
}

void simgpu_op_end(void)
{
	if (op_depth > 0)
		op_depth--;
}

/* ---- start-up ---- */

static _Noreturn void bad_env(const char *name, const char *value,
			      const char *what)
{
	fprintf(stderr, "simgpu: %s=%s: %s\n", name, value, what);
	exit(2);
}

static void write_report(void)
{
	FILE *f;
	double end;

	if (!report_path)
		return;
	f = fopen(report_path, "w");
	if (!f) {
		fprintf(stderr, "simgpu: SIMGPU_REPORT=%s: cannot write: %s\n",
			report_path, strerror(errno));
		return;
	}
	pthread_mutex_lock(&lock);
	end = simgpu_clock_end(&clk);
	fprintf(f, "model: %s\n", model.name);
	fprintf(f, "dryrun: %d\n", dryrun ? 1 : 0);
	fprintf(f, "capacity_bytes: %llu\n", (unsigned long long)model.mem_bytes);
	fprintf(f, "virtual_time_s: %.9f\n", end);
	fprintf(f, "peak_device_bytes: %llu\n", (unsigned long long)mem_peak);
	fprintf(f, "bytes_h2d: %llu\n", (unsigned long long)bytes_h2d);
	fprintf(f, "bytes_d2h: %llu\n", (unsigned long long)bytes_d2h);
	fprintf(f, "bytes_d2d: %llu\n", (unsigned long long)bytes_d2d);
	fprintf(f, "kernels: %llu\n", (unsigned long long)n_compute);
	pthread_mutex_unlock(&lock);
	fclose(f);
}

static void init_once(void)
{
	const char *v;
	const simgpu_model_t *m;
	struct sigaction sa;

	page_size = (size_t)sysconf(_SC_PAGESIZE);

	v = getenv("SIMGPU_MODEL");
	m = simgpu_model_lookup(v && *v ? v : "titanx");
	if (!m)
		bad_env("SIMGPU_MODEL", v, "unknown device model; use titanx, v100 or h100");
	model = *m;

	v = getenv("SIMGPU_MEM");
	if (v) {
		uint64_t bytes;

		if (simgpu_parse_size(v, &bytes) || bytes == 0)
			bad_env("SIMGPU_MEM", v, "not a size; use bytes with an optional K/M/G suffix, e.g. 2G");
		model.mem_bytes = bytes;
	}

	v = getenv("SIMGPU_DRYRUN");
	if (v && simgpu_parse_bool(v, &dryrun))
		bad_env("SIMGPU_DRYRUN", v, "not a boolean; use 1 or 0");

	v = getenv("SIMGPU_REPORT");
	if (v && *v) {
		report_path = strdup(v);
		atexit(write_report);
	}

	phys_fd = memfd_create("simgpu-device", MFD_CLOEXEC);
	phys_end = (uint64_t)1 << 46;
	if (phys_fd < 0 || ftruncate(phys_fd, (off_t)phys_end)) {
		fprintf(stderr, "simgpu: cannot create the device memory file: %s\n",
			strerror(errno));
		exit(2);
	}

	simgpu_clock_init(&clk, model.copy_engines);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

void simgpu_init(void)
{
	pthread_once(&once, init_once);
}

/* Bad settings stop the program when the library loads, before main. */
__attribute__((constructor)) static void simgpu_ctor(void)
{
	simgpu_init();
}

const simgpu_model_t *simgpu_model(void)
{
	simgpu_init();
	return &model;
}

bool simgpu_dryrun(void)
{
	simgpu_init();
	return dryrun;
}

/* ---- physical memory (lock held) ---- */

static simgpu_status_t charge(size_t bytes)
{
	if (bytes > model.mem_bytes - mem_used)
		return SIMGPU_ENOMEM;
	mem_used += bytes;
	if (mem_used > mem_peak)
		mem_peak = mem_used;
	return SIMGPU_OK;
}

static void uncharge(size_t bytes)
{
	mem_used -= bytes < mem_used ? bytes : mem_used;
}

static int phys_take(size_t size, uint64_t *off)
{
	size_t len = round_up(size, SIMGPU_GRANULARITY);

	if (phys_next + len > phys_end) {
		uint64_t end = 2 * (phys_next + len);

		if (ftruncate(phys_fd, (off_t)end))
			return -1;
		phys_end = end;
	}
	*off = phys_next;
	phys_next += len;
	return 0;
}

/* Returns the pages to the system; the offsets are never reused. */
static void phys_drop(uint64_t off, size_t size)
{
	if (size)
		fallocate(phys_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)off, (off_t)round_up(size, page_size));
}

static void phys_destroy(struct phys *ph)
{
	phys_drop(ph->off, ph->size);
	uncharge(ph->size);
	ph->magic = 0;
	free(ph);
}

/* Puts PROT_NONE anonymous memory back over [p, p+len). */
static int reprotect_none(void *p, size_t len)
{
	void *r = mmap(p, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		       -1, 0);

	return r == MAP_FAILED ? -1 : 0;
}

/* ---- cudaMalloc-style device memory ---- */

simgpu_status_t simgpu_mem_alloc(void **p, size_t size)
{
	struct resv rv = { 0 };
	struct region rg = { 0 };
	size_t map_len, total;
	uint64_t off;
	char *base;

	simgpu_init();
	if (!p)
		return SIMGPU_EINVAL;
	*p = NULL;
	if (size == 0)
		return SIMGPU_OK;
	if (size > model.mem_bytes)
		return SIMGPU_ENOMEM;
	map_len = round_up(size, page_size);
	total = map_len + page_size;    /* a PROT_NONE guard page */

	pthread_mutex_lock(&lock);
	if (charge(round_up(size, ALLOC_UNIT))) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_ENOMEM;
	}
	if (phys_take(map_len, &off))
		goto fail;
	base = mmap(NULL, total, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		goto fail;
	if (mmap(base, map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_NORESERVE, phys_fd,
		 (off_t)off) == MAP_FAILED) {
		munmap(base, total);
		goto fail;
	}
	rv.base = (uintptr_t)base;
	rv.size = total;
	rv.kind = RESV_ALLOC;
	rv.charged = round_up(size, ALLOC_UNIT);
	rv.off = off;
	rv.map_len = map_len;
	rg.base = (uintptr_t)base;
	rg.size = size;
	rg.prot = 3;
	if (sa_insert(&resvs, &rv)) {
		munmap(base, total);
		goto fail;
	}
	if (sa_insert(&regions, &rg)) {
		sa_remove(&resvs, (size_t)sa_find(&resvs, rv.base));
		munmap(base, total);
		goto fail;
	}
	pthread_mutex_unlock(&lock);
	*p = base;
	return SIMGPU_OK;
fail:
	uncharge(round_up(size, ALLOC_UNIT));
	pthread_mutex_unlock(&lock);
	return SIMGPU_ENOMEM;
}

simgpu_status_t simgpu_mem_free(void *p)
{
	struct resv rv;
	long i, j;

	simgpu_init();
	if (!p)
		return SIMGPU_OK;
	pthread_mutex_lock(&lock);
	i = sa_find(&resvs, (uintptr_t)p);
	if (i < 0 || sa_head(&resvs, (size_t)i)->base != (uintptr_t)p ||
	    ((struct resv *)sa_at(&resvs, (size_t)i))->kind != RESV_ALLOC) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	rv = *(struct resv *)sa_at(&resvs, (size_t)i);
	sa_remove(&resvs, (size_t)i);
	j = sa_find(&regions, rv.base);
	if (j >= 0)
		sa_remove(&regions, (size_t)j);
	munmap((void *)rv.base, rv.size);
	phys_drop(rv.off, rv.map_len);
	uncharge(rv.charged);
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

void simgpu_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	simgpu_init();
	pthread_mutex_lock(&lock);
	if (free_bytes)
		*free_bytes = model.mem_bytes - mem_used;
	if (total_bytes)
		*total_bytes = model.mem_bytes;
	pthread_mutex_unlock(&lock);
}

simgpu_status_t simgpu_mem_range(const void *p, void **base, size_t *size)
{
	long i;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	pthread_mutex_lock(&lock);
	i = sa_find(&regions, (uintptr_t)p);
	if (i >= 0) {
		const struct range_head *h = sa_head(&regions, (size_t)i);

		if (base)
			*base = (void *)h->base;
		if (size)
			*size = h->size;
		st = SIMGPU_OK;
	}
	pthread_mutex_unlock(&lock);
	return st;
}

bool simgpu_in_device_space(const void *p)
{
	bool in;

	simgpu_init();
	pthread_mutex_lock(&lock);
	in = sa_find(&resvs, (uintptr_t)p) >= 0;
	pthread_mutex_unlock(&lock);
	return in;
}

/* ---- checks ---- */

void simgpu_check(const void *p, size_t n, bool host_ok)
{
	uintptr_t a = (uintptr_t)p, end = a + n;

	simgpu_init();
	if (n == 0)
		return;
	pthread_mutex_lock(&lock);
	while (a < end) {
		long i = sa_find(&regions, a);

		if (i >= 0 && ((struct region *)sa_at(&regions, (size_t)i))->prot) {
			const struct range_head *h = sa_head(&regions, (size_t)i);

			a = h->base + h->size;
			continue;
		}
		if (i < 0 && host_ok && sa_find(&resvs, a) < 0)
			break;  /* host memory the simulator does not own */
		pthread_mutex_unlock(&lock);
		simgpu_fault((const void *)a);
	}
	pthread_mutex_unlock(&lock);
}

bool simgpu_is_device(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, end = a + (n ? n : 1);
	bool ok = true;

	simgpu_init();
	pthread_mutex_lock(&lock);
	while (a < end) {
		long i = sa_find(&regions, a);

		if (i < 0) {
			ok = false;
			break;
		}
		a = sa_head(&regions, (size_t)i)->base +
		    sa_head(&regions, (size_t)i)->size;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

/* ---- VMM ---- */

static bool granular(size_t v)
{
	return v % SIMGPU_GRANULARITY == 0;
}

simgpu_status_t simgpu_vmm_reserve(void **p, size_t size, size_t align,
				   void *hint)
{
	struct resv rv = { 0 };
	char *raw = MAP_FAILED, *base;
	size_t len;
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

	simgpu_init();
	if (!p || size == 0 || !granular(size))
		return SIMGPU_EINVAL;
	if (align == 0 || align < SIMGPU_GRANULARITY)
		align = SIMGPU_GRANULARITY;
	if (align & (align - 1))
		return SIMGPU_EINVAL;
	if (hint && (uintptr_t)hint % align == 0) {
		raw = mmap(hint, size, PROT_NONE, fl | MAP_FIXED_NOREPLACE, -1, 0);
		if (raw != MAP_FAILED && raw != hint) {
			munmap(raw, size);
			raw = MAP_FAILED;
		}
	}
	if (raw != MAP_FAILED) {
		base = raw;
	} else {
		len = size + align;
		raw = mmap(NULL, len, PROT_NONE, fl, -1, 0);
		if (raw == MAP_FAILED)
			return SIMGPU_ENOMEM;
		base = (char *)round_up((uintptr_t)raw, align);
		if (base > raw)
			munmap(raw, (size_t)(base - raw));
		if (raw + len > base + size)
			munmap(base + size, (size_t)(raw + len - (base + size)));
	}
	rv.base = (uintptr_t)base;
	rv.size = size;
	rv.kind = RESV_VMM;
	pthread_mutex_lock(&lock);
	if (sa_insert(&resvs, &rv)) {
		pthread_mutex_unlock(&lock);
		munmap(base, size);
		return SIMGPU_ENOMEM;
	}
	pthread_mutex_unlock(&lock);
	*p = base;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_free(void *p, size_t size)
{
	long i;
	struct resv *rv;

	simgpu_init();
	pthread_mutex_lock(&lock);
	i = sa_find(&resvs, (uintptr_t)p);
	rv = i >= 0 ? sa_at(&resvs, (size_t)i) : NULL;
	if (!rv || rv->kind != RESV_VMM || rv->base != (uintptr_t)p ||
	    rv->size != size || sa_overlaps(&regions, rv->base, rv->size)) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	sa_remove(&resvs, (size_t)i);
	munmap(p, size);
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_create(uint64_t *handle, size_t size)
{
	struct phys *ph;

	simgpu_init();
	if (!handle || size == 0 || !granular(size))
		return SIMGPU_EINVAL;
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return SIMGPU_ENOMEM;
	pthread_mutex_lock(&lock);
	if (charge(size) || phys_take(size, &ph->off)) {
		pthread_mutex_unlock(&lock);
		free(ph);
		return SIMGPU_ENOMEM;
	}
	ph->magic = PHYS_MAGIC;
	ph->size = size;
	pthread_mutex_unlock(&lock);
	*handle = (uint64_t)(uintptr_t)ph;
	return SIMGPU_OK;
}

static struct phys *phys_of(uint64_t handle)
{
	struct phys *ph = (struct phys *)(uintptr_t)handle;

	return ph && ph->magic == PHYS_MAGIC ? ph : NULL;
}

simgpu_status_t simgpu_vmm_release(uint64_t handle)
{
	struct phys *ph;

	simgpu_init();
	pthread_mutex_lock(&lock);
	ph = phys_of(handle);
	if (!ph || ph->released) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	ph->released = true;
	if (ph->maps == 0)
		phys_destroy(ph);
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

/* Inside a VMM reservation as a whole? (lock held) */
static bool in_vmm_resv(uintptr_t base, size_t size)
{
	long i = sa_find(&resvs, base);
	const struct resv *rv;

	if (i < 0)
		return false;
	rv = sa_at(&resvs, (size_t)i);
	return rv->kind == RESV_VMM && base + size <= rv->base + rv->size;
}

simgpu_status_t simgpu_vmm_map(void *p, size_t size, size_t offset,
			       uint64_t handle)
{
	struct region rg = { 0 };
	struct phys *ph;
	uintptr_t a = (uintptr_t)p;

	simgpu_init();
	if (!p || size == 0 || !granular(size) || !granular(offset) ||
	    a % SIMGPU_GRANULARITY)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&lock);
	ph = phys_of(handle);
	if (!ph || ph->released || offset > ph->size ||
	    size > ph->size - offset || !in_vmm_resv(a, size) ||
	    sa_overlaps(&regions, a, size))
		goto inval;
	if (mmap(p, size, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
		 phys_fd, (off_t)(ph->off + offset)) == MAP_FAILED)
		goto inval;
	rg.base = a;
	rg.size = size;
	rg.prot = 0;    /* no access until cuMemSetAccess, as on a GPU */
	rg.phys = ph;
	rg.phys_off = offset;
	if (sa_insert(&regions, &rg)) {
		reprotect_none(p, size);
		goto inval;
	}
	ph->maps++;
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
inval:
	pthread_mutex_unlock(&lock);
	return SIMGPU_EINVAL;
}

/* Splits the VMM mapping containing addr so that a region starts at addr.
 * (lock held) 0, or -1 when out of memory. */
static int split_at(uintptr_t addr)
{
	long i = sa_find(&regions, addr);
	struct region *r, tail;

	if (i < 0)
		return 0;
	r = sa_at(&regions, (size_t)i);
	if (r->base == addr || !r->phys)
		return 0;
	tail = *r;
	tail.base = addr;
	tail.size = r->base + r->size - addr;
	tail.phys_off = r->phys_off + (addr - r->base);
	if (sa_insert(&regions, &tail))
		return -1;
	r = sa_at(&regions, (size_t)i);    /* the array may have moved */
	r->size = addr - r->base;
	r->phys->maps++;
	return 0;
}

/* True when [a, a+size) is covered by contiguous VMM mappings that start
 * at a and end at a+size.  (lock held, after split_at on both ends) */
static bool covered_by_maps(uintptr_t a, size_t size, size_t *first)
{
	uintptr_t end = a + size;
	long i = sa_find(&regions, a);
	size_t k;

	if (i < 0 || sa_head(&regions, (size_t)i)->base != a)
		return false;
	*first = (size_t)i;
	for (k = (size_t)i; a < end; k++) {
		const struct region *r;

		if (k >= regions.n)
			return false;
		r = sa_at(&regions, k);
		if (r->base != a || !r->phys)
			return false;
		a += r->size;
	}
	return a == end;
}

simgpu_status_t simgpu_vmm_unmap(void *p, size_t size)
{
	uintptr_t a = (uintptr_t)p, end = a + size;
	size_t first;

	simgpu_init();
	if (!p || size == 0 || !granular(size) || a % SIMGPU_GRANULARITY)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&lock);
	if (split_at(a) || split_at(end) || !covered_by_maps(a, size, &first)) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	if (reprotect_none(p, size)) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_ENOMEM;
	}
	while (first < regions.n && sa_head(&regions, first)->base < end) {
		struct phys *ph = ((struct region *)sa_at(&regions, first))->phys;

		sa_remove(&regions, first);
		if (--ph->maps == 0 && ph->released)
			phys_destroy(ph);
	}
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_set_access(void *p, size_t size, int prot)
{
	uintptr_t a = (uintptr_t)p, end = a + size;
	size_t first, k;
	int mp;

	simgpu_init();
	if (!p || size == 0 || !granular(size) || a % SIMGPU_GRANULARITY)
		return SIMGPU_EINVAL;
	switch (prot) {
	case 0:
		mp = PROT_NONE;
		break;
	case 1:
		mp = PROT_READ;
		break;
	case 3:
		mp = PROT_READ | PROT_WRITE;
		break;
	default:
		return SIMGPU_EINVAL;
	}
	pthread_mutex_lock(&lock);
	if (split_at(a) || split_at(end) || !covered_by_maps(a, size, &first) ||
	    mprotect(p, size, mp)) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	for (k = first; k < regions.n && sa_head(&regions, k)->base < end; k++)
		((struct region *)sa_at(&regions, k))->prot = prot;
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_handle_at(const void *p, uint64_t *handle)
{
	long i;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	pthread_mutex_lock(&lock);
	i = sa_find(&regions, (uintptr_t)p);
	if (i >= 0 && ((struct region *)sa_at(&regions, (size_t)i))->phys) {
		*handle = (uint64_t)(uintptr_t)
			((struct region *)sa_at(&regions, (size_t)i))->phys;
		st = SIMGPU_OK;
	}
	pthread_mutex_unlock(&lock);
	return st;
}

/* ---- host memory ---- */

simgpu_status_t simgpu_host_alloc(void **p, size_t size)
{
	struct host_range h;
	void *m;

	simgpu_init();
	if (!p)
		return SIMGPU_EINVAL;
	*p = NULL;
	if (size == 0)
		return SIMGPU_OK;
	m = mmap(NULL, round_up(size, page_size), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return SIMGPU_ENOMEM;
	h.base = (uintptr_t)m;
	h.size = round_up(size, page_size);
	h.kind = HOST_ALLOC;
	pthread_mutex_lock(&lock);
	if (sa_insert(&hosts, &h)) {
		pthread_mutex_unlock(&lock);
		munmap(m, h.size);
		return SIMGPU_ENOMEM;
	}
	pthread_mutex_unlock(&lock);
	*p = m;
	return SIMGPU_OK;
}

static simgpu_status_t host_remove(void *p, int kind)
{
	long i;
	struct host_range h;

	simgpu_init();
	pthread_mutex_lock(&lock);
	i = sa_find(&hosts, (uintptr_t)p);
	if (i < 0 || sa_head(&hosts, (size_t)i)->base != (uintptr_t)p ||
	    ((struct host_range *)sa_at(&hosts, (size_t)i))->kind != kind) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EINVAL;
	}
	h = *(struct host_range *)sa_at(&hosts, (size_t)i);
	sa_remove(&hosts, (size_t)i);
	pthread_mutex_unlock(&lock);
	if (kind == HOST_ALLOC)
		munmap(p, h.size);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_host_free(void *p)
{
	return p ? host_remove(p, HOST_ALLOC) : SIMGPU_OK;
}

simgpu_status_t simgpu_host_register(void *p, size_t size)
{
	struct host_range h = { (uintptr_t)p, size, HOST_REGISTERED };
	simgpu_status_t st = SIMGPU_OK;

	simgpu_init();
	if (!p || size == 0)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&lock);
	if (sa_overlaps(&hosts, h.base, size) || sa_find(&resvs, h.base) >= 0)
		st = SIMGPU_EINVAL;
	else if (sa_insert(&hosts, &h))
		st = SIMGPU_ENOMEM;
	pthread_mutex_unlock(&lock);
	return st;
}

simgpu_status_t simgpu_host_unregister(void *p)
{
	return host_remove(p, HOST_REGISTERED);
}

bool simgpu_is_pinned(const void *p, size_t n)
{
	long i;
	bool ok = false;

	simgpu_init();
	pthread_mutex_lock(&lock);
	i = sa_find(&hosts, (uintptr_t)p);
	if (i >= 0) {
		const struct range_head *h = sa_head(&hosts, (size_t)i);

		ok = (uintptr_t)p - h->base + n <= h->size;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

/* ---- streams and events ---- */

/* (lock held) The stream object for a handle, NULL when not one. */
static struct stream *stream_of(void *s)
{
	struct stream *st = s;

	if ((uintptr_t)s <= 2)
		return &legacy;
	if (st->magic == STREAM_DEAD) {
		/* Undefined behaviour on a real GPU: fail loudly, never guess. */
		fprintf(stderr, "simgpu: use of destroyed stream %p\n", s);
		abort();
	}
	return st->magic == STREAM_MAGIC ? st : NULL;
}

/* (lock held) The legacy default stream orders with every blocking
 * stream: its work starts after theirs, theirs after its. */
static double stream_floor(const struct stream *st)
{
	const struct stream *o;
	double t = 0.0;

	if (st != &legacy)
		return st->flags & SIMGPU_STREAM_NONBLOCKING ? 0.0 : legacy.t;
	for (o = streams; o; o = o->next) {
		if (!(o->flags & SIMGPU_STREAM_NONBLOCKING))
			t = dmax(t, o->t);
	}
	return t;
}

/* (lock held) When all work queued so far on st ends. */
static double stream_end(const struct stream *st)
{
	return dmax(st->t, stream_floor(st));
}

simgpu_status_t simgpu_stream_create(void **s, unsigned flags, int priority)
{
	struct stream *st;

	simgpu_init();
	if (!s || (flags & ~SIMGPU_STREAM_NONBLOCKING))
		return SIMGPU_EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return SIMGPU_ENOMEM;
	st->magic = STREAM_MAGIC;
	st->flags = flags;
	st->priority = priority;
	pthread_mutex_lock(&lock);
	st->t = clk.host;       /* a new stream has nothing queued */
	st->next = streams;
	streams = st;
	pthread_mutex_unlock(&lock);
	*s = st;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_stream_destroy(void *s)
{
	struct stream **pp, *st;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	if (!st || st == &legacy) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EHANDLE;
	}
	for (pp = &streams; *pp && *pp != st; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = st->next;
	/* Never freed: a handle used after destruction must find the dead
	 * mark, not reused memory (a few bytes per stream). */
	st->magic = STREAM_DEAD;
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_stream_check(void *s)
{
	simgpu_status_t st;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s) ? SIMGPU_OK : SIMGPU_EHANDLE;
	pthread_mutex_unlock(&lock);
	return st;
}

simgpu_status_t simgpu_stream_info(void *s, unsigned *flags, int *priority)
{
	struct stream *st;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	if (st) {
		if (flags)
			*flags = st->flags;
		if (priority)
			*priority = st->priority;
	}
	pthread_mutex_unlock(&lock);
	return st ? SIMGPU_OK : SIMGPU_EHANDLE;
}

simgpu_status_t simgpu_stream_sync(void *s)
{
	struct stream *st;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	if (st)
		simgpu_clock_wait(&clk, stream_end(st));
	pthread_mutex_unlock(&lock);
	return st ? SIMGPU_OK : SIMGPU_EHANDLE;
}

/* Polling: done when the work ended by the host's time; otherwise the
 * host spends the time until it ends (the next poll succeeds). */
static simgpu_status_t poll_until(double t)
{
	if (t <= clk.host)
		return SIMGPU_OK;
	simgpu_clock_wait(&clk, t);
	return SIMGPU_ENOTREADY;
}

simgpu_status_t simgpu_stream_query(void *s)
{
	struct stream *st;
	simgpu_status_t r = SIMGPU_EHANDLE;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	if (st)
		r = poll_until(stream_end(st));
	pthread_mutex_unlock(&lock);
	return r;
}

static struct event *event_of(void *e)
{
	struct event *ev = e;

	return ev && ev->magic == EVENT_MAGIC ? ev : NULL;
}

simgpu_status_t simgpu_stream_wait_event(void *s, void *e)
{
	struct stream *st;
	struct event *ev;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	ev = event_of(e);
	if (st && ev && ev->recorded)
		st->t = dmax(st->t, ev->t);
	pthread_mutex_unlock(&lock);
	return st && ev ? SIMGPU_OK : SIMGPU_EHANDLE;
}

simgpu_status_t simgpu_event_create(void **e, unsigned flags)
{
	struct event *ev;

	simgpu_init();
	if (!e)
		return SIMGPU_EINVAL;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return SIMGPU_ENOMEM;
	ev->magic = EVENT_MAGIC;
	ev->flags = flags;
	*e = ev;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_event_destroy(void *e)
{
	struct event *ev;

	simgpu_init();
	pthread_mutex_lock(&lock);
	ev = event_of(e);
	if (ev)
		ev->magic = 0;
	pthread_mutex_unlock(&lock);
	if (!ev)
		return SIMGPU_EHANDLE;
	free(ev);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_event_record(void *e, void *s)
{
	struct stream *st;
	struct event *ev;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(s);
	ev = event_of(e);
	if (st && ev) {
		/* the stream reaches the event no earlier than the host
		 * issued it */
		ev->t = dmax(stream_end(st), clk.host);
		ev->recorded = true;
	}
	pthread_mutex_unlock(&lock);
	return st && ev ? SIMGPU_OK : SIMGPU_EHANDLE;
}

simgpu_status_t simgpu_event_query(void *e)
{
	struct event *ev;
	simgpu_status_t r = SIMGPU_EHANDLE;

	simgpu_init();
	pthread_mutex_lock(&lock);
	ev = event_of(e);
	if (ev)
		r = ev->recorded ? poll_until(ev->t) : SIMGPU_OK;
	pthread_mutex_unlock(&lock);
	return r;
}

simgpu_status_t simgpu_event_sync(void *e)
{
	struct event *ev;

	simgpu_init();
	pthread_mutex_lock(&lock);
	ev = event_of(e);
	if (ev && ev->recorded)
		simgpu_clock_wait(&clk, ev->t);
	pthread_mutex_unlock(&lock);
	return ev ? SIMGPU_OK : SIMGPU_EHANDLE;
}

simgpu_status_t simgpu_event_elapsed(float *ms, void *start, void *end)
{
	struct event *a, *b;
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	if (!ms)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&lock);
	a = event_of(start);
	b = event_of(end);
	if (!a || !b || !a->recorded || !b->recorded ||
	    (a->flags & SIMGPU_EVENT_DISABLE_TIMING) ||
	    (b->flags & SIMGPU_EVENT_DISABLE_TIMING))
		r = SIMGPU_EHANDLE;
	else if (a->t > clk.host || b->t > clk.host)
		r = SIMGPU_ENOTREADY;   /* as CUDA: not complete yet */
	else
		*ms = (float)((b->t - a->t) * 1e3);
	pthread_mutex_unlock(&lock);
	return r;
}

void simgpu_device_sync(void)
{
	simgpu_init();
	pthread_mutex_lock(&lock);
	simgpu_clock_wait(&clk, simgpu_clock_end(&clk));
	pthread_mutex_unlock(&lock);
}

double simgpu_host_now(void)
{
	double t;

	simgpu_init();
	pthread_mutex_lock(&lock);
	t = clk.host;
	pthread_mutex_unlock(&lock);
	return t;
}

/* (lock held) */
static double submit_locked(struct stream *st, simgpu_engine_t e, double s)
{
	if (e == SIMGPU_ENGINE_COMPUTE)
		n_compute++;
	return simgpu_clock_submit(&clk, &st->t, stream_floor(st), e, s);
}

double simgpu_submit(void *stream, simgpu_engine_t engine, double seconds)
{
	struct stream *st;
	double end;

	simgpu_init();
	pthread_mutex_lock(&lock);
	st = stream_of(stream);
	end = submit_locked(st ? st : &legacy, engine, seconds);
	pthread_mutex_unlock(&lock);
	return end;
}

double simgpu_op_seconds(double flops, double bytes)
{
	simgpu_init();
	return simgpu_model_op_seconds(&model, flops, bytes);
}

double simgpu_copy_seconds(size_t bytes)
{
	simgpu_init();
	return simgpu_model_copy_seconds(&model, (double)bytes);
}

void simgpu_count_copy(simgpu_engine_t engine, size_t bytes)
{
	simgpu_init();
	pthread_mutex_lock(&lock);
	if (engine == SIMGPU_ENGINE_H2D)
		bytes_h2d += bytes;
	else if (engine == SIMGPU_ENGINE_D2H)
		bytes_d2h += bytes;
	else if (engine == SIMGPU_ENGINE_D2D)
		bytes_d2d += bytes;
	pthread_mutex_unlock(&lock);
}

/* ---- copies, sets, launches ---- */

/* Resolves cudaMemcpyDefault from where the pointers live. */
static simgpu_copy_kind_t infer_kind(void *dst, const void *src)
{
	bool dd = simgpu_in_device_space(dst), sd = simgpu_in_device_space(src);

	if (dd)
		return sd ? SIMGPU_COPY_D2D : SIMGPU_COPY_H2D;
	return sd ? SIMGPU_COPY_D2H : SIMGPU_COPY_H2H;
}

/* Checks both ranges and queues the copy's time; the caller moves data. */
static simgpu_status_t copy_account(void *dst, size_t dn, const void *src,
				    size_t sn, size_t bytes,
				    simgpu_copy_kind_t kind, void *stream,
				    bool sync)
{
	struct stream *st;
	simgpu_engine_t e;
	const void *host = NULL;
	double end, dur;

	switch (kind) {
	case SIMGPU_COPY_H2D:
		simgpu_check(dst, dn, false);
		simgpu_check(src, sn, true);
		e = SIMGPU_ENGINE_H2D;
		host = src;
		break;
	case SIMGPU_COPY_D2H:
		simgpu_check(src, sn, false);
		simgpu_check(dst, dn, true);
		e = SIMGPU_ENGINE_D2H;
		host = dst;
		break;
	case SIMGPU_COPY_D2D:
		simgpu_check(src, sn, false);
		simgpu_check(dst, dn, false);
		e = SIMGPU_ENGINE_D2D;
		break;
	case SIMGPU_COPY_H2H:
		simgpu_check(src, sn, true);
		simgpu_check(dst, dn, true);
		return SIMGPU_OK;
	default:
		return SIMGPU_EINVAL;
	}
	/* pageable host memory: the copy is staged, the host waits */
	if (host && !simgpu_is_pinned(host, host == src ? sn : dn))
		sync = true;
	dur = e == SIMGPU_ENGINE_D2D ?
		simgpu_model_op_seconds(&model, 0.0, 2.0 * (double)bytes) :
		simgpu_model_copy_seconds(&model, (double)bytes);
	pthread_mutex_lock(&lock);
	st = stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&lock);
		return SIMGPU_EHANDLE;
	}
	end = simgpu_clock_submit(&clk, &st->t, stream_floor(st), e, dur);
	if (sync)
		simgpu_clock_wait(&clk, end);
	if (e == SIMGPU_ENGINE_H2D)
		bytes_h2d += bytes;
	else if (e == SIMGPU_ENGINE_D2H)
		bytes_d2h += bytes;
	else
		bytes_d2d += bytes;
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_copy(void *dst, const void *src, size_t n,
			    simgpu_copy_kind_t kind, void *stream, bool sync,
			    const char *op)
{
	simgpu_status_t r;

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (n == 0)
		return SIMGPU_OK;
	if (kind == SIMGPU_COPY_DEFAULT)
		kind = infer_kind(dst, src);
	simgpu_op_begin(op);
	r = copy_account(dst, n, src, n, n, kind, stream, sync);
	if (r == SIMGPU_OK && !dryrun)
		memmove(dst, src, n);
	simgpu_op_end();
	return r;
}

simgpu_status_t simgpu_copy_2d(void *dst, size_t dpitch, const void *src,
			       size_t spitch, size_t width, size_t height,
			       simgpu_copy_kind_t kind, void *stream, bool sync,
			       const char *op)
{
	simgpu_status_t r;
	size_t i;

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (width > dpitch || width > spitch)
		return SIMGPU_EINVAL;
	if (width == 0 || height == 0)
		return SIMGPU_OK;
	if (kind == SIMGPU_COPY_DEFAULT)
		kind = infer_kind(dst, src);
	simgpu_op_begin(op);
	r = copy_account(dst, dpitch * (height - 1) + width, src,
			 spitch * (height - 1) + width, width * height, kind,
			 stream, sync);
	if (r == SIMGPU_OK && !dryrun) {
		for (i = 0; i < height; i++)
			memmove((char *)dst + i * dpitch,
				(const char *)src + i * spitch, width);
	}
	simgpu_op_end();
	return r;
}

simgpu_status_t simgpu_memset(void *p, int value, size_t n, void *stream,
			      bool sync, const char *op)
{
	struct stream *st;
	double end;

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (n == 0)
		return SIMGPU_OK;
	simgpu_op_begin(op);
	simgpu_check(p, n, false);
	if (!dryrun)
		memset(p, value, n);
	simgpu_op_end();
	pthread_mutex_lock(&lock);
	st = stream_of(stream);
	end = submit_locked(st, SIMGPU_ENGINE_COMPUTE,
			    simgpu_model_op_seconds(&model, 0.0, (double)n));
	if (sync)
		simgpu_clock_wait(&clk, end);
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_launch(const simgpu_kernel_t *k, void **args,
			      uint64_t threads, void *stream)
{
	double flops = 0.0, bytes = 0.0;
	struct stream *st;

	simgpu_init();
	if (!k)
		return SIMGPU_ENOTFOUND;
	if (!args && k->nparams)
		return SIMGPU_EINVAL;
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	simgpu_op_begin(k->name);
	k->run(args, threads > UINT32_MAX ? UINT32_MAX : (unsigned)threads);
	simgpu_op_end();
	if (k->cost)
		k->cost(args, &flops, &bytes);
	pthread_mutex_lock(&lock);
	st = stream_of(stream);
	submit_locked(st, SIMGPU_ENGINE_COMPUTE,
		      simgpu_model_op_seconds(&model, flops, bytes));
	pthread_mutex_unlock(&lock);
	return SIMGPU_OK;
}

/* ---- driver entry points ---- */

void simgpu_set_driver_proc(simgpu_driver_proc_fn fn)
{
	pthread_mutex_lock(&lock);
	driver_proc = fn;
	pthread_mutex_unlock(&lock);
}

simgpu_driver_proc_fn simgpu_get_driver_proc(void)
{
	simgpu_driver_proc_fn fn;

	pthread_mutex_lock(&lock);
	fn = driver_proc;
	pthread_mutex_unlock(&lock);
	return fn;
}
