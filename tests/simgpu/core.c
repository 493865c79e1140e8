/* tests/simgpu/core.c - libsimgpu.so: memory, start-up and faults.
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
 * which the handler here turns into "simgpu: illegal address ... in <op>"
 * (or, on a pinned page protected while a copy of it is queued, into the
 * race checker's line: core_exec.c).
 *
 * Memory that holds no data is poisoned (SIMGPU_POISON, default on unless
 * dry-run): fresh cudaMalloc blocks, cuMemCreate chunks and pinned host
 * allocations are filled with 0xff bytes, a NaN in float, bf16 and half
 * and -1 as an integer, so a computation that reads bytes nobody wrote (a
 * shim that maps a fresh chunk without copying the data back, or drops
 * live data) changes its result instead of passing on zeros.
 *
 * Each physical object carries the race checker's shadow (core_race.h);
 * freeing, unmapping or releasing memory first checks that the host has
 * synchronised with every queued access to it (sg_host_hazard).
 *
 * Streams, events, ops and the checker are in core_exec.c; capture and
 * graphs in core_graph.c; locking is described in core_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "core_int.h"

#define ALLOC_UNIT 512u         /* cudaMalloc accounting granule */
#define PHYS_MAGIC 0x53475048u  /* "SGPH" */
#define OBJ_MAGIC 0x5347424fu   /* "SGBO": a cudaMalloc block's shadow */
#define OP_DEPTH 8
#define POISON_BYTE 0xff

/* ---- sorted arrays of ranges ---- */

void *sa_at(const struct sarr *s, size_t i)
{
	return s->a + i * s->esz;
}

static const struct range_head *sa_head(const struct sarr *s, size_t i)
{
	return (const struct range_head *)sa_at(s, i);
}

/* Number of elements whose base is <= addr. */
size_t sa_upper(const struct sarr *s, uintptr_t addr)
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
long sa_find(const struct sarr *s, uintptr_t addr)
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

pthread_mutex_t simgpu_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t simgpu_pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

simgpu_model_t sg_model;
bool sg_dryrun;
/* What a query that finds the work unfinished costs the host, in seconds;
 * negative: the host waits until the work ends (the model before
 * SIMGPU_POLL_COST existed). */
double sg_poll_cost = 2e-6;
/* What each VMM call costs the host per mapping it makes, covers or
 * removes, in seconds (SIMGPU_VMM_COST; set at init), and what was
 * spent. */
static double sg_vmm_cost[SIMGPU_VMM_N];
static bool sg_vmm_per_call;
static uint64_t sg_vmm_calls[SIMGPU_VMM_N];
static double sg_vmm_host_s;
bool sg_poison;
int sg_race_mode = 2;
size_t sg_page;
simgpu_clock_t sg_clk;
uint64_t sg_bytes_h2d, sg_bytes_d2h, sg_bytes_d2d, sg_n_compute;
bool sg_footprints;
static bool sg_host_vmm = true;      /* SIMGPU_HOST_VMM */
uint64_t sg_kernel_host_bytes;
unsigned sg_host_phys;

bool simgpu_host_vmm_supported(void)
{
	simgpu_init();
	return sg_host_vmm;
}

uint64_t sg_kernel_footprint;
const char *sg_kernel_footprint_name;

static char *report_path;
static int phys_fd = -1;
static uint64_t phys_next, phys_end;
static uint64_t mem_used, mem_peak;

struct sarr sg_resvs = { NULL, 0, 0, sizeof(struct resv) };
struct sarr sg_regions = { NULL, 0, 0, sizeof(struct region) };
struct sarr sg_hosts = { NULL, 0, 0, sizeof(struct host_range) };

static simgpu_driver_proc_fn driver_proc;

static __thread const char *op_stack[OP_DEPTH]
	__attribute__((tls_model("initial-exec")));
static __thread int op_depth __attribute__((tls_model("initial-exec")));

static size_t round_up(size_t v, size_t unit)
{
	return (v + unit - 1) / unit * unit;
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

/* The innermost op name of this thread, or "host code". */
const char *simgpu_op_current(void)
{
	int d = op_depth;

	if (d <= 0)
		return "host code";
	return op_stack[(d > OP_DEPTH ? OP_DEPTH : d) - 1];
}

/* Async-signal-safe: only write(2) and abort(). */
_Noreturn void simgpu_fault(const void *addr)
{
	char buf[256];
	const char *op = simgpu_op_current();
	size_t n = 0, len;

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

/* Whether the faulting access wrote: the page-fault error code's bit 1
 * on x86-64; -1 where the architecture does not say. */
static int fault_is_write(void *uc)
{
#if defined(__x86_64__) && defined(REG_ERR)
	return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
	(void)uc;
	return -1;
#endif
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	if (sig == SIGSEGV && sg_pin_fault((uintptr_t)si->si_addr,
					   fault_is_write(uc)))
		return;         /* warn mode: the page is open again, retry */
	simgpu_fault(si->si_addr);
}

void simgpu_op_begin(const char *op)
{
	if (op_depth == 0)
		sg_access_reset();
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
	pthread_mutex_lock(&simgpu_lock);
	end = simgpu_clock_end(&sg_clk);
	fprintf(f, "model: %s\n", sg_model.name);
	fprintf(f, "dryrun: %d\n", sg_dryrun ? 1 : 0);
	fprintf(f, "capacity_bytes: %llu\n", (unsigned long long)sg_model.mem_bytes);
	fprintf(f, "virtual_time_s: %.9f\n", end);
	fprintf(f, "peak_device_bytes: %llu\n", (unsigned long long)mem_peak);
	fprintf(f, "bytes_h2d: %llu\n", (unsigned long long)sg_bytes_h2d);
	fprintf(f, "bytes_d2h: %llu\n", (unsigned long long)sg_bytes_d2h);
	fprintf(f, "bytes_d2d: %llu\n", (unsigned long long)sg_bytes_d2d);
	fprintf(f, "kernels: %llu\n", (unsigned long long)sg_n_compute);
	fprintf(f, "vmm_calls: map %llu access %llu unmap %llu create %llu release %llu\n",
		(unsigned long long)sg_vmm_calls[SIMGPU_VMM_MAP],
		(unsigned long long)sg_vmm_calls[SIMGPU_VMM_ACCESS],
		(unsigned long long)sg_vmm_calls[SIMGPU_VMM_UNMAP],
		(unsigned long long)sg_vmm_calls[SIMGPU_VMM_CREATE],
		(unsigned long long)sg_vmm_calls[SIMGPU_VMM_RELEASE]);
	fprintf(f, "vmm_host_s: %.9f\n", sg_vmm_host_s);
	fprintf(f, "kernel_host_bytes: %llu\n", (unsigned long long)sg_kernel_host_bytes);
	if (sg_race_mode)
		fprintf(f, "largest_kernel_bytes: %llu %s\n",
			(unsigned long long)sg_kernel_footprint,
			sg_kernel_footprint_name ? sg_kernel_footprint_name : "-");
	pthread_mutex_unlock(&simgpu_lock);
	fclose(f);
}

static void init_once(void)
{
	const char *v;
	const simgpu_model_t *m;
	struct sigaction sa;

	sg_page = (size_t)sysconf(_SC_PAGESIZE);

	v = getenv("SIMGPU_MODEL");
	m = simgpu_model_lookup(v && *v ? v : "titanx");
	if (!m)
		bad_env("SIMGPU_MODEL", v, "unknown device model; use titanx, v100 or h100");
	sg_model = *m;

	v = getenv("SIMGPU_MEM");
	if (v) {
		uint64_t bytes;

		if (simgpu_parse_size(v, &bytes) || bytes == 0)
			bad_env("SIMGPU_MEM", v, "not a size; use bytes with an optional K/M/G suffix, e.g. 2G");
		sg_model.mem_bytes = bytes;
	}

	v = getenv("SIMGPU_DRYRUN");
	if (v && simgpu_parse_bool(v, &sg_dryrun))
		bad_env("SIMGPU_DRYRUN", v, "not a boolean; use 1 or 0");

	sg_poison = !sg_dryrun;
	v = getenv("SIMGPU_POISON");
	if (v && simgpu_parse_bool(v, &sg_poison))
		bad_env("SIMGPU_POISON", v, "not a boolean; use 1 or 0");

	v = getenv("SIMGPU_HOST_VMM");
	if (v && simgpu_parse_bool(v, &sg_host_vmm))
		bad_env("SIMGPU_HOST_VMM", v, "not a boolean; use 1 or 0");

	v = getenv("SIMGPU_POLL_COST");
	if (v && *v) {
		char *end;
		double us = strtod(v, &end);

		if (!strcasecmp(v, "end"))
			sg_poll_cost = -1;
		else if (end == v || *end || !(us >= 0) || us > 1e9)
			bad_env("SIMGPU_POLL_COST", v, "not a time; use microseconds (e.g. 2) or 'end'");
		else
			sg_poll_cost = us * 1e-6;
	}

	v = getenv("SIMGPU_VMM_COST");
	if (simgpu_parse_vmm_cost(v ? v : "", sg_vmm_cost, &sg_vmm_per_call))
		bad_env("SIMGPU_VMM_COST", v, "not VMM costs; use h100, off, or five "
			"microsecond figures per mapping MAP,ACCESS,UNMAP,CREATE,RELEASE (e.g. 4,37,24,17,17), "
			"optionally followed by /call");

	v = getenv("SIMGPU_RACECHECK");
	if (v) {
		if (!strcasecmp(v, "abort"))
			sg_race_mode = 2;
		else if (!strcasecmp(v, "warn"))
			sg_race_mode = 1;
		else if (!strcasecmp(v, "off"))
			sg_race_mode = 0;
		else
			bad_env("SIMGPU_RACECHECK", v, "unknown mode; use abort, warn or off");
	}

	v = getenv("SIMGPU_REPORT");
	if (v && *v) {
		report_path = strdup(v);
		sg_footprints = true;
		atexit(write_report);
	}

	phys_fd = memfd_create("simgpu-device", MFD_CLOEXEC);
	phys_end = (uint64_t)1 << 46;
	if (phys_fd < 0 || ftruncate(phys_fd, (off_t)phys_end)) {
		fprintf(stderr, "simgpu: cannot create the device memory file: %s\n",
			strerror(errno));
		exit(2);
	}

	simgpu_clock_init(&sg_clk, sg_model.copy_engines);

	/* No SA_RESETHAND: in warn mode a race on a protected pinned page
	 * is reported and the access retried, and a later one must be
	 * caught too.  A real fault aborts from the handler. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
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
	return &sg_model;
}

bool simgpu_dryrun(void)
{
	simgpu_init();
	return sg_dryrun;
}

bool simgpu_poison(void)
{
	simgpu_init();
	return sg_poison;
}

/* ---- physical memory (lock held) ---- */

static simgpu_status_t charge(size_t bytes)
{
	if (bytes > sg_model.mem_bytes - mem_used)
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

/* madvise(2) advice of Linux 5.14 (the C library's headers may predate it) */
#ifdef MADV_POPULATE_READ
#define SG_MADV_POPULATE_READ MADV_POPULATE_READ
#define SG_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define SG_MADV_POPULATE_READ 22
#define SG_MADV_POPULATE_WRITE 23
#endif

/* Returns the pages to the system; the offsets are never reused. */
static void phys_drop(uint64_t off, size_t size)
{
	if (size)
		fallocate(phys_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)off, (off_t)round_up(size, sg_page));
}

/* Fills a physical range with the poison pattern through a temporary
 * mapping (it is not mapped anywhere yet). */
static void phys_poison(uint64_t off, size_t size)
{
	void *m;

	if (!sg_poison || !size)
		return;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, phys_fd,
		 (off_t)off);
	if (m == MAP_FAILED)
		return;
	memset(m, POISON_BYTE, size);
	munmap(m, size);
}

static void phys_destroy(struct phys *ph)
{
	sg_phys_hazard(ph, "cuMemRelease", "releases");
	phys_drop(ph->off, ph->size);
	if (!ph->host)
		uncharge(ph->size);
	else
		sg_host_phys--;
	simgpu_shadow_free(&ph->sh);
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

/* (lock held) A new block of `size` bytes; ENOMEM past the capacity. */
simgpu_status_t sg_block_new(void **p, size_t size)
{
	struct resv rv = { 0 };
	struct region rg = { 0 };
	struct phys *obj;
	size_t map_len, total;
	uint64_t off;
	char *base;

	map_len = round_up(size, sg_page);
	total = map_len + sg_page;    /* a PROT_NONE guard page */
	obj = calloc(1, sizeof(*obj));
	if (!obj)
		return SIMGPU_ENOMEM;
	if (charge(round_up(size, ALLOC_UNIT))) {
		free(obj);
		return SIMGPU_ENOMEM;
	}
	if (phys_take(map_len, &off))
		goto fail;
	base = mmap(NULL, total, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		goto fail;
	if (mmap(base, map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_NORESERVE | (sg_poison ? MAP_POPULATE : 0), phys_fd,
		 (off_t)off) == MAP_FAILED) {
		munmap(base, total);
		goto fail;
	}
	obj->magic = OBJ_MAGIC;
	obj->off = off;
	obj->size = map_len;
	rv.base = (uintptr_t)base;
	rv.size = total;
	rv.kind = RESV_ALLOC;
	rv.charged = round_up(size, ALLOC_UNIT);
	rv.off = off;
	rv.map_len = map_len;
	rv.obj = obj;
	rg.base = (uintptr_t)base;
	rg.size = size;
	rg.prot = 3;
	rg.obj = obj;
	if (sa_insert(&sg_resvs, &rv)) {
		munmap(base, total);
		goto fail;
	}
	if (sa_insert(&sg_regions, &rg)) {
		sa_remove(&sg_resvs, (size_t)sa_find(&sg_resvs, rv.base));
		munmap(base, total);
		goto fail;
	}
	if (sg_poison)
		memset(base, POISON_BYTE, map_len);
	*p = base;
	return SIMGPU_OK;
fail:
	free(obj);
	uncharge(round_up(size, ALLOC_UNIT));
	return SIMGPU_ENOMEM;
}

simgpu_status_t simgpu_mem_alloc(void **p, size_t size)
{
	simgpu_status_t st;

	simgpu_init();
	if (!p)
		return SIMGPU_EINVAL;
	*p = NULL;
	if (size == 0)
		return SIMGPU_OK;
	if (size > sg_model.mem_bytes)
		return SIMGPU_ENOMEM;
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	st = sg_block_new(p, size);
	if (st == SIMGPU_ENOMEM && sg_pool_release(true)) /* cached frees */
		st = sg_block_new(p, size);
	pthread_mutex_unlock(&simgpu_lock);
	return st;
}

int sg_region_insert(const struct region *rg)
{
	return sa_insert(&sg_regions, rg);
}

void sa_remove_region(size_t i)
{
	sa_remove(&sg_regions, i);
}

/* (lock held) Unmaps and returns block resvs[i] (live or pooled). */
void sg_block_destroy(size_t i)
{
	struct resv rv = *(struct resv *)sa_at(&sg_resvs, i);
	long j;

	sa_remove(&sg_resvs, i);
	j = sa_find(&sg_regions, rv.base);
	if (j >= 0 && ((struct region *)sa_at(&sg_regions, (size_t)j))->base == rv.base)
		sa_remove(&sg_regions, (size_t)j);
	munmap((void *)rv.base, rv.size);
	phys_drop(rv.off, rv.map_len);
	uncharge(rv.charged);
	if (rv.obj) {
		simgpu_shadow_free(&rv.obj->sh);
		rv.obj->magic = 0;
		free(rv.obj);
	}
}

/* (lock held) Index of the live cudaMalloc block starting at p, or -1. */
long sg_block_find(const void *p)
{
	long i = sa_find(&sg_resvs, (uintptr_t)p);
	const struct resv *rv;

	if (i < 0)
		return -1;
	rv = sa_at(&sg_resvs, (size_t)i);
	if (rv->base != (uintptr_t)p || rv->kind != RESV_ALLOC || rv->pooled)
		return -1;
	return i;
}

simgpu_status_t simgpu_mem_free(void *p)
{
	long i;
	const struct resv *rv;

	simgpu_init();
	if (!p)
		return SIMGPU_OK;
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	i = sg_block_find(p);
	if (i < 0) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	rv = sa_at(&sg_resvs, (size_t)i);
	if (rv->async_alloc) {
		/* CUDA: no implicit synchronisation for stream-ordered memory;
		 * "callers must ensure that all accesses ... have completed" */
		sg_host_hazard(p, rv->map_len, "cudaFree", "frees");
	} else {
		/* cudaMalloc memory: CUDA "may perform implicit
		 * synchronization", and drivers do (frameworks without a
		 * cache rely on it): the host waits for the whole device */
		sg_host_syncs_device();
	}
	sg_block_destroy((size_t)i);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

void simgpu_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	if (free_bytes)
		*free_bytes = sg_model.mem_bytes - mem_used;
	if (total_bytes)
		*total_bytes = sg_model.mem_bytes;
	pthread_mutex_unlock(&simgpu_lock);
}

simgpu_status_t simgpu_mem_range(const void *p, void **base, size_t *size)
{
	long i;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	i = sa_find(&sg_regions, (uintptr_t)p);
	if (i >= 0) {
		const struct range_head *h = sa_head(&sg_regions, (size_t)i);

		if (base)
			*base = (void *)h->base;
		if (size)
			*size = h->size;
		st = SIMGPU_OK;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return st;
}

bool simgpu_in_device_space(const void *p)
{
	bool in;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	in = sa_find(&sg_resvs, (uintptr_t)p) >= 0;
	pthread_mutex_unlock(&simgpu_lock);
	return in;
}

/* ---- checks ---- */

void simgpu_check(const void *p, size_t n, bool host_ok)
{
	uintptr_t a = (uintptr_t)p, end = a + n;

	simgpu_init();
	if (n == 0)
		return;
	pthread_mutex_lock(&simgpu_lock);
	while (a < end) {
		long i = sa_find(&sg_regions, a);

		if (i >= 0 && ((struct region *)sa_at(&sg_regions, (size_t)i))->prot) {
			const struct range_head *h = sa_head(&sg_regions, (size_t)i);

			a = h->base + h->size;
			continue;
		}
		if (i < 0 && host_ok && sa_find(&sg_resvs, a) < 0)
			break;  /* host memory the simulator does not own */
		pthread_mutex_unlock(&simgpu_lock);
		simgpu_fault((const void *)a);
	}
	pthread_mutex_unlock(&simgpu_lock);
}

bool simgpu_is_device(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, end = a + (n ? n : 1);
	bool ok = true;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	while (a < end) {
		long i = sa_find(&sg_regions, a);

		if (i < 0) {
			ok = false;
			break;
		}
		a = sa_head(&sg_regions, (size_t)i)->base +
		    sa_head(&sg_regions, (size_t)i)->size;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return ok;
}

/* ---- VMM ---- */

static bool granular(size_t v)
{
	return v % SIMGPU_GRANULARITY == 0;
}

/* A VMM call that succeeded costs the host its time (SIMGPU_VMM_COST,
 * per mapping: a create, release or map counts one, an access grant or
 * unmap one per mapping its range spans, whatever their sizes - as
 * measured on an H100, where 16 adjacent 2 MiB mappings cost 16 times
 * one and a 32 MiB mapping what a 2 MiB one costs; once per call with
 * /call): the driver updates the page tables on the calling thread, so
 * work submitted after it starts no earlier.  A host that is ahead of the
 * device hides it.  (lock held) */
static void vmm_spend(simgpu_vmm_op_t op, size_t mappings)
{
	double s = sg_vmm_cost[op] * (sg_vmm_per_call ? 1.0 : (double)mappings);

	sg_vmm_calls[op]++;
	sg_vmm_host_s += s;
	simgpu_clock_wait(&sg_clk, sg_clk.host + s);
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
	pthread_mutex_lock(&simgpu_lock);
	if (sa_insert(&sg_resvs, &rv)) {
		pthread_mutex_unlock(&simgpu_lock);
		munmap(base, size);
		return SIMGPU_ENOMEM;
	}
	pthread_mutex_unlock(&simgpu_lock);
	*p = base;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_free(void *p, size_t size)
{
	long i;
	struct resv *rv;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	i = sa_find(&sg_resvs, (uintptr_t)p);
	rv = i >= 0 ? sa_at(&sg_resvs, (size_t)i) : NULL;
	if (!rv || rv->kind != RESV_VMM || rv->base != (uintptr_t)p ||
	    rv->size != size || sa_overlaps(&sg_regions, rv->base, rv->size)) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	sa_remove(&sg_resvs, (size_t)i);
	munmap(p, size);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

static simgpu_status_t vmm_create(uint64_t *handle, size_t size, bool host)
{
	struct phys *ph;

	simgpu_init();
	if (!handle || size == 0 || !granular(size))
		return SIMGPU_EINVAL;
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return SIMGPU_ENOMEM;
	ph->host = host;
	pthread_mutex_lock(&simgpu_lock);
	if (!host && charge(size)) {
		/* memory cached by the stream-ordered pool comes first */
		if (!sg_pool_release(true) || charge(size)) {
			pthread_mutex_unlock(&simgpu_lock);
			free(ph);
			return SIMGPU_ENOMEM;
		}
	}
	if (phys_take(size, &ph->off)) {
		if (!host)
			uncharge(size);
		pthread_mutex_unlock(&simgpu_lock);
		free(ph);
		return SIMGPU_ENOMEM;
	}
	ph->magic = PHYS_MAGIC;
	ph->size = size;
	sg_host_phys += host;
	vmm_spend(SIMGPU_VMM_CREATE, 1);
	pthread_mutex_unlock(&simgpu_lock);
	phys_poison(ph->off, size);
	*handle = (uint64_t)(uintptr_t)ph;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_create(uint64_t *handle, size_t size)
{
	return vmm_create(handle, size, false);
}

simgpu_status_t simgpu_vmm_create_host(uint64_t *handle, size_t size)
{
	return vmm_create(handle, size, true);
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
	pthread_mutex_lock(&simgpu_lock);
	ph = phys_of(handle);
	if (!ph || ph->released) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	if (ph->retains > 0) {
		/* one of the references cuMemRetainAllocationHandle gave */
		ph->retains--;
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_OK;
	}
	ph->released = true;
	vmm_spend(SIMGPU_VMM_RELEASE, 1);
	if (ph->maps == 0)
		phys_destroy(ph);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_retain(const void *p, uint64_t *handle)
{
	long i;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	if (!handle)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&simgpu_lock);
	i = sa_find(&sg_regions, (uintptr_t)p);
	if (i >= 0) {
		struct region *r = sa_at(&sg_regions, (size_t)i);

		/* CUDA: the handle of the allocation mapped at p, with one
		 * more reference (each retain needs its own cuMemRelease);
		 * the simulator counts it as one more mapping */
		if (r->phys && !r->phys->released) {
			r->phys->retains++;
			*handle = (uint64_t)(uintptr_t)r->phys;
			st = SIMGPU_OK;
		}
	}
	pthread_mutex_unlock(&simgpu_lock);
	return st;
}

/* Inside a VMM reservation as a whole? (lock held) */
static bool in_vmm_resv(uintptr_t base, size_t size)
{
	long i = sa_find(&sg_resvs, base);
	const struct resv *rv;

	if (i < 0)
		return false;
	rv = sa_at(&sg_resvs, (size_t)i);
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
	pthread_mutex_lock(&simgpu_lock);
	ph = phys_of(handle);
	if (!ph || ph->released || offset > ph->size ||
	    size > ph->size - offset || !in_vmm_resv(a, size) ||
	    sa_overlaps(&sg_regions, a, size))
		goto inval;
	if (mmap(p, size, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
		 phys_fd, (off_t)(ph->off + offset)) == MAP_FAILED)
		goto inval;
	rg.base = a;
	rg.size = size;
	rg.prot = 0;    /* no access until cuMemSetAccess, as on a GPU */
	rg.phys = ph;
	rg.phys_off = offset;
	rg.obj = ph;
	rg.obj_off = offset;
	if (sa_insert(&sg_regions, &rg)) {
		reprotect_none(p, size);
		goto inval;
	}
	ph->maps++;
	vmm_spend(SIMGPU_VMM_MAP, 1);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
inval:
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_EINVAL;
}

/* Splits the VMM mapping containing addr so that a region starts at addr.
 * (lock held) 0, or -1 when out of memory. */
static int split_at(uintptr_t addr)
{
	long i = sa_find(&sg_regions, addr);
	struct region *r, tail;

	if (i < 0)
		return 0;
	r = sa_at(&sg_regions, (size_t)i);
	if (r->base == addr || !r->phys)
		return 0;
	tail = *r;
	tail.base = addr;
	tail.size = r->base + r->size - addr;
	tail.phys_off = r->phys_off + (addr - r->base);
	tail.obj_off = r->obj_off + (addr - r->base);
	if (sa_insert(&sg_regions, &tail))
		return -1;
	r = sa_at(&sg_regions, (size_t)i);    /* the array may have moved */
	r->size = addr - r->base;
	r->phys->maps++;
	return 0;
}

/* True when [a, a+size) is covered by contiguous VMM mappings that start
 * at a and end at a+size.  (lock held, after split_at on both ends) */
static bool covered_by_maps(uintptr_t a, size_t size, size_t *first)
{
	uintptr_t end = a + size;
	long i = sa_find(&sg_regions, a);
	size_t k;

	if (i < 0 || sa_head(&sg_regions, (size_t)i)->base != a)
		return false;
	*first = (size_t)i;
	for (k = (size_t)i; a < end; k++) {
		const struct region *r;

		if (k >= sg_regions.n)
			return false;
		r = sa_at(&sg_regions, k);
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
	pthread_mutex_lock(&simgpu_lock);
	if (split_at(a) || split_at(end) || !covered_by_maps(a, size, &first)) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	/* the op that still uses it would fault on a GPU */
	sg_host_hazard(p, size, "cuMemUnmap", "unmaps");
	if (reprotect_none(p, size)) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ENOMEM;
	}
	size_t spanned = 0;
	while (first < sg_regions.n && sa_head(&sg_regions, first)->base < end) {
		struct phys *ph = ((struct region *)sa_at(&sg_regions, first))->phys;

		sa_remove(&sg_regions, first);
		spanned++;
		if (--ph->maps == 0 && ph->released)
			phys_destroy(ph);
	}
	vmm_spend(SIMGPU_VMM_UNMAP, spanned);
	pthread_mutex_unlock(&simgpu_lock);
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
	pthread_mutex_lock(&simgpu_lock);
	if (split_at(a) || split_at(end) || !covered_by_maps(a, size, &first) ||
	    mprotect(p, size, mp)) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	/* the pages in one call, not one fault per 4 KiB page at first touch
	 * (page faults were a third of a run's time in a virtual machine);
	 * only where poison has already filled them: without it (dry-run)
	 * this would materialise pages nothing touches.  An older kernel
	 * without the advice faults them in as before */
	if (mp != PROT_NONE && sg_poison)
		madvise(p, size, mp & PROT_WRITE ? SG_MADV_POPULATE_WRITE : SG_MADV_POPULATE_READ);
	for (k = first; k < sg_regions.n && sa_head(&sg_regions, k)->base < end; k++)
		((struct region *)sa_at(&sg_regions, k))->prot = prot;
	vmm_spend(SIMGPU_VMM_ACCESS, k - first);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_vmm_handle_at(const void *p, uint64_t *handle)
{
	long i;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	i = sa_find(&sg_regions, (uintptr_t)p);
	if (i >= 0 && ((struct region *)sa_at(&sg_regions, (size_t)i))->phys) {
		*handle = (uint64_t)(uintptr_t)
			((struct region *)sa_at(&sg_regions, (size_t)i))->phys;
		st = SIMGPU_OK;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return st;
}

simgpu_status_t simgpu_vmm_export(uint64_t handle, int *fd)
{
	struct phys *ph;
	simgpu_status_t st = SIMGPU_EINVAL;

	simgpu_init();
	if (!fd)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&simgpu_lock);
	ph = phys_of(handle);
	if (ph && !ph->released) {
		/* a POSIX file descriptor onto the chunk's pages, as CUDA's
		 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR export gives */
		*fd = dup(phys_fd);
		st = *fd >= 0 ? SIMGPU_OK : SIMGPU_ENOMEM;
	}
	pthread_mutex_unlock(&simgpu_lock);
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
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	pthread_mutex_unlock(&simgpu_lock);
	m = mmap(NULL, round_up(size, sg_page), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return SIMGPU_ENOMEM;
	h.base = (uintptr_t)m;
	h.size = round_up(size, sg_page);
	h.kind = HOST_ALLOC;
	h.sh = calloc(1, sizeof(*h.sh));
	if (!h.sh) {
		munmap(m, h.size);
		return SIMGPU_ENOMEM;
	}
	if (sg_poison)
		memset(m, POISON_BYTE, h.size);
	pthread_mutex_lock(&simgpu_lock);
	if (sa_insert(&sg_hosts, &h)) {
		pthread_mutex_unlock(&simgpu_lock);
		free(h.sh);
		munmap(m, h.size);
		return SIMGPU_ENOMEM;
	}
	pthread_mutex_unlock(&simgpu_lock);
	*p = m;
	return SIMGPU_OK;
}

static simgpu_status_t host_remove(void *p, int kind)
{
	long i;
	struct host_range h;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	i = sa_find(&sg_hosts, (uintptr_t)p);
	if (i < 0 || sa_head(&sg_hosts, (size_t)i)->base != (uintptr_t)p ||
	    ((struct host_range *)sa_at(&sg_hosts, (size_t)i))->kind != kind) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EINVAL;
	}
	h = *(struct host_range *)sa_at(&sg_hosts, (size_t)i);
	if (kind == HOST_ALLOC)
		sg_host_hazard(p, h.size, "cudaFreeHost", "frees");
	else
		sg_host_hazard(p, h.size, "cudaHostUnregister", "unregisters");
	sg_pins_drop(h.base, h.size);
	sa_remove(&sg_hosts, (size_t)i);
	pthread_mutex_unlock(&simgpu_lock);
	simgpu_shadow_free(h.sh);
	free(h.sh);
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
	struct host_range h = { (uintptr_t)p, size, HOST_REGISTERED, NULL };
	simgpu_status_t st = SIMGPU_OK;

	simgpu_init();
	if (!p || size == 0)
		return SIMGPU_EINVAL;
	h.sh = calloc(1, sizeof(*h.sh));
	if (!h.sh)
		return SIMGPU_ENOMEM;
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe())
		st = SIMGPU_ECAPTURE_UNSUPPORTED;
	else if (sa_overlaps(&sg_hosts, h.base, size) || sa_find(&sg_resvs, h.base) >= 0)
		st = SIMGPU_EINVAL;
	else if (sa_insert(&sg_hosts, &h))
		st = SIMGPU_ENOMEM;
	pthread_mutex_unlock(&simgpu_lock);
	if (st != SIMGPU_OK)
		free(h.sh);
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
	pthread_mutex_lock(&simgpu_lock);
	i = sa_find(&sg_hosts, (uintptr_t)p);
	if (i >= 0) {
		const struct range_head *h = sa_head(&sg_hosts, (size_t)i);

		ok = (uintptr_t)p - h->base + n <= h->size;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return ok;
}

/* ---- report counters ---- */

void simgpu_count_copy(simgpu_engine_t engine, size_t bytes)
{
	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	if (engine == SIMGPU_ENGINE_H2D)
		sg_bytes_h2d += bytes;
	else if (engine == SIMGPU_ENGINE_D2H)
		sg_bytes_d2h += bytes;
	else if (engine == SIMGPU_ENGINE_D2D)
		sg_bytes_d2d += bytes;
	pthread_mutex_unlock(&simgpu_lock);
}

/* ---- driver entry points ---- */

void simgpu_set_driver_proc(simgpu_driver_proc_fn fn)
{
	pthread_mutex_lock(&simgpu_lock);
	driver_proc = fn;
	pthread_mutex_unlock(&simgpu_lock);
}

simgpu_driver_proc_fn simgpu_get_driver_proc(void)
{
	simgpu_driver_proc_fn fn;

	pthread_mutex_lock(&simgpu_lock);
	fn = driver_proc;
	pthread_mutex_unlock(&simgpu_lock);
	return fn;
}
