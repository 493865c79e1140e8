/* tests/simgpu/core_exec.c - streams, events, the submission of every op,
 * and the happens-before race checker around them.
 *
 * Execution.  Every op executes at once, on the calling thread, when it
 * is submitted (a valid serialisation of CUDA's stream order); its
 * modelled duration goes on virtual clocks (core_clock.c).
 *
 * Ordering.  Beside the virtual clocks, every agent (the host, each
 * stream) carries a vector clock (core_race.h).  The rules are CUDA's:
 *   - an op on a stream first joins the host's clock (everything the host
 *     did or learned before issuing it happens before it), then the
 *     legacy default stream's rules: an op on the legacy stream joins
 *     every blocking stream, an op on a blocking stream joins the legacy
 *     stream (cudaStreamNonBlocking streams do neither); then it ticks;
 *   - cudaEventRecord snapshots the stream's clock, cudaStreamWaitEvent
 *     joins it;
 *   - the host joins a stream's or an event's clock when it synchronises
 *     with it: cudaStreamSynchronize, cudaEventSynchronize,
 *     cudaDeviceSynchronize (every stream), a cudaEventQuery or
 *     cudaStreamQuery that answers success, a synchronous copy to or from
 *     host memory, a copy to pageable memory (the host waits for it) and,
 *     before it, a copy from pageable memory (CUDA synchronises the
 *     stream first);
 *   - every op's declared accesses (simgpu_access, copies' and memsets'
 *     own ranges) are checked against the shadow of the physical memory
 *     they touch and recorded; host-side hazards (freeing, unmapping) are
 *     checked against the host's clock.
 * A conflict is reported on one line:
 *
 *   simgpu: race on 0x7f..40 (4096 bytes): cudnnConvolutionForward (call 12)
 *   on stream 0x55..a0 reads what cudaMemcpyAsync (call 9) on stream
 *   0x55..c0 wrote, with no event or synchronisation between them
 *
 * then abort() (SIMGPU_RACECHECK=abort, the default) or carries on (warn).
 *
 * Pinned host memory.  The host's own loads and stores are not calls the
 * simulator sees, so a pinned range with a queued copy is protected until
 * the host synchronises with the copy: no access while a copy writes it
 * (device to host), no writes while a copy reads it (host to device).  A
 * touch faults and the handler reports the race with the same kind of
 * line.  Protection is per page: only pages wholly inside the pinned
 * range are protected, and a fault on a protected page outside the
 * copy's exact bytes opens the page instead (never a false report).
 *
 * Locking: see core_int.h.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"

#define STREAM_MAGIC 0x53475354u
#define STREAM_DEAD 0x44454144u   /* destroyed: kept so a later use is caught */
#define EVENT_MAGIC 0x53474556u
#define MAX_RACE_LINES 200

struct stream sg_legacy = { STREAM_MAGIC, 0, 0, 0.0, NULL, AGENT_LEGACY,
			    { 0, 0, NULL }, false, false, 0, NULL };
struct stream *sg_streams;      /* created streams, newest first */
simgpu_vc_t sg_host_vc;

/* agents: what a report calls them */
enum { AG_HOST, AG_LEGACY, AG_STREAM, AG_PTDS };
struct agent {
	const void *handle;
	int kind;
	pid_t tid;
};
static struct agent *agents;
static uint32_t nagents, capagents;

static uint64_t seq;            /* call numbers */
static unsigned race_lines;     /* reports printed (warn mode) */

static __thread struct stream *tl_ptds;

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

static double dmin(double a, double b)
{
	return a < b ? a : b;
}

uint64_t sg_next_seq(void)
{
	return ++seq;
}

uint64_t simgpu_calls(void)
{
	uint64_t n;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	n = seq;
	pthread_mutex_unlock(&simgpu_lock);
	return n;
}

static _Noreturn void out_of_memory(void)
{
	static const char msg[] = "simgpu: out of host memory in the race checker\n";

	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		abort();
	abort();
}

static void vc_join(simgpu_vc_t *d, const simgpu_vc_t *s)
{
	if (simgpu_vc_join(d, s))
		out_of_memory();
}

/* (lock held) A new agent id. */
static uint32_t agent_new(const void *handle, int kind, pid_t tid)
{
	if (nagents == capagents) {
		uint32_t cap = capagents ? 2 * capagents : 16;
		struct agent *a = realloc(agents, cap * sizeof(*a));

		if (!a)
			out_of_memory();
		agents = a;
		capagents = cap;
	}
	if (nagents == 0) {
		agents[0] = (struct agent){ NULL, AG_HOST, 0 };
		agents[1] = (struct agent){ NULL, AG_LEGACY, 0 };
		nagents = 2;
	}
	agents[nagents] = (struct agent){ handle, kind, tid };
	return nagents++;
}

/* "stream 0x55...a0", "the legacy default stream", "the host", ... */
static void agent_name(uint32_t a, char *buf, size_t n)
{
	if (a == AGENT_HOST)
		snprintf(buf, n, "the host");
	else if (a == AGENT_LEGACY || a >= nagents)
		snprintf(buf, n, "the legacy default stream");
	else if (agents[a].kind == AG_PTDS)
		snprintf(buf, n, "the per-thread default stream of thread %d",
			 (int)agents[a].tid);
	else
		snprintf(buf, n, "stream %p", agents[a].handle);
}

/* ---- reports ---- */

/* (lock held) Prints a finished line; aborts in abort mode. */
static void race_emit(const char *line)
{
	if (sg_race_mode == 2) {
		if (write(STDERR_FILENO, line, strlen(line)) < 0)
			abort();
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	if (race_lines < MAX_RACE_LINES) {
		if (write(STDERR_FILENO, line, strlen(line)) < 0)
			race_lines = MAX_RACE_LINES;
	} else if (race_lines == MAX_RACE_LINES) {
		static const char more[] =
			"simgpu: more races follow; not shown (SIMGPU_RACECHECK=warn)\n";

		if (write(STDERR_FILENO, more, sizeof(more) - 1) < 0)
			race_lines++;
	}
	race_lines++;
}

static const char *const tail = ", with no event or synchronisation between them\n";

/* (lock held) An op's access conflicts with an earlier op's. */
static void report_op_race(const simgpu_epoch_t *e, uintptr_t va,
			   const simgpu_race_t *r)
{
	char who[96], prior[96], line[640];
	const char *verb, *pverb;

	agent_name(e->agent, who, sizeof(who));
	agent_name(r->prior.agent, prior, sizeof(prior));
	switch (r->kind) {
	case SIMGPU_RACE_RAW:
		verb = "reads", pverb = "wrote";
		break;
	case SIMGPU_RACE_WAW:
		verb = "overwrites", pverb = "wrote";
		break;
	default:
		verb = "writes", pverb = "reads";
		break;
	}
	snprintf(line, sizeof(line),
		 "simgpu: race on %p (%llu bytes): %s (call %llu) on %s %s what "
		 "%s (call %llu) on %s %s%s",
		 (void *)va, (unsigned long long)r->size, e->op,
		 (unsigned long long)e->seq, who, verb, r->prior.op,
		 (unsigned long long)r->prior.seq, prior, pverb, tail);
	race_emit(line);
}

/* (lock held) The host ends the life of memory an op still uses. */
static void report_host_race(const char *what, uint64_t call, const char *verb,
			     uintptr_t va, const simgpu_race_t *r)
{
	char prior[96], line[640];

	agent_name(r->prior.agent, prior, sizeof(prior));
	snprintf(line, sizeof(line),
		 "simgpu: race on %p (%llu bytes): %s (call %llu) on the host %s "
		 "what %s (call %llu) on %s %s%s",
		 (void *)va, (unsigned long long)r->size, what,
		 (unsigned long long)call, verb, r->prior.op,
		 (unsigned long long)r->prior.seq, prior,
		 r->kind == SIMGPU_RACE_WAR ? "reads" : "writes", tail);
	race_emit(line);
}

/* ---- memory pieces: what shadow a virtual range falls in ---- */

struct piece {
	simgpu_shadow_t *sh;
	uint64_t off, len;      /* inside the shadowed object */
	uintptr_t va;
	struct host_range *host;
	bool sysmem;            /* a mapping of host-located memory */
	struct region *rg;      /* the mapping it is reached through; NULL: none */
};

typedef void (*piece_fn)(const struct piece *pc, void *ctx);

/* (lock held) Calls fn for each part of [p, p+n) that is simulated device
 * memory or pinned host memory; other bytes are not tracked. */
static void for_pieces(uintptr_t p, size_t n, piece_fn fn, void *ctx)
{
	uintptr_t a = p, end = p + n;

	while (a < end) {
		long i = sa_find(&sg_regions, a);
		struct piece pc;

		if (i >= 0) {
			struct region *r = sa_at(&sg_regions, (size_t)i);
			uintptr_t e = r->base + r->size < end ? r->base + r->size : end;

			pc.sh = &r->obj->sh;
			pc.off = r->obj_off + (a - r->base);
			pc.len = e - a;
			pc.va = a;
			pc.rg = r;
			pc.host = NULL;
			pc.sysmem = r->phys && r->phys->host;
			fn(&pc, ctx);
			a = e;
			continue;
		}
		i = sa_find(&sg_hosts, a);
		if (i >= 0) {
			struct host_range *h = sa_at(&sg_hosts, (size_t)i);
			uintptr_t e = h->base + h->size < end ? h->base + h->size : end;

			pc.sh = h->sh;
			pc.off = a - h->base;
			pc.len = e - a;
			pc.va = a;
			pc.rg = NULL;
			pc.host = h;
			pc.sysmem = false;
			fn(&pc, ctx);
			a = e;
			continue;
		}
		/* untracked: skip to the next region or pinned range */
		{
			size_t ri = sa_upper(&sg_regions, a), hi = sa_upper(&sg_hosts, a);
			uintptr_t next = end;

			if (ri < sg_regions.n &&
			    ((struct range_head *)sa_at(&sg_regions, ri))->base < next)
				next = ((struct range_head *)sa_at(&sg_regions, ri))->base;
			if (hi < sg_hosts.n &&
			    ((struct range_head *)sa_at(&sg_hosts, hi))->base < next)
				next = ((struct range_head *)sa_at(&sg_hosts, hi))->base;
			a = next;
		}
	}
}

struct access_ctx {
	const simgpu_epoch_t *e;
	const simgpu_vc_t *vc;
	unsigned mode;
};

/* Remembers an access through a VMM mapping: the agent's latest one. */
static void thru_note(struct region *rg, const simgpu_epoch_t *e, bool write)
{
	for (uint8_t i = 0; i < rg->nthru; i++)
		if (rg->thru[i].e.agent == e->agent) {
			if (e->clock >= rg->thru[i].e.clock)
				rg->thru[i] = (struct thru){ *e, write };
			return;
		}
	if (rg->nthru == REGION_THRU)
		rg->thru_full = true;
	else
		rg->thru[rg->nthru++] = (struct thru){ *e, write };
}

static void access_piece(const struct piece *pc, void *ctx)
{
	struct access_ctx *c = ctx;
	simgpu_race_t r;
	int rc = simgpu_shadow_access(pc->sh, pc->off, pc->len, c->mode, c->e,
				      c->vc, &r);

	if (rc < 0)
		out_of_memory();
	if (rc > 0)
		report_op_race(c->e, pc->va + (uintptr_t)(r.base - pc->off), &r);
	if (pc->rg && pc->rg->phys)
		thru_note(pc->rg, c->e, c->mode != SIMGPU_ACC_R);
}

/* (lock held) Checks and records one access of the op with epoch e. */
static void check_access(const simgpu_epoch_t *e, const simgpu_vc_t *vc,
			 const void *p, size_t n, unsigned mode)
{
	struct access_ctx c = { e, vc, mode };

	if (sg_race_mode == 0 || !p || !n)
		return;
	for_pieces((uintptr_t)p, n, access_piece, &c);
}

struct hazard_ctx {
	const char *what, *verb;
	uint64_t call;
};

static void hazard_piece(const struct piece *pc, void *ctx)
{
	struct hazard_ctx *c = ctx;
	simgpu_race_t r;
	uint64_t off = pc->off, end = pc->off + pc->len;

	if (pc->rg && pc->rg->phys && pc->rg->phys->maps > 1 && !pc->rg->thru_full) {
		/* mapped elsewhere too (vmem hands a chunk to another page
		 * while the old one's last use runs): the bytes live on, and
		 * what must be done before this address goes is what went
		 * through it */
		for (uint8_t i = 0; i < pc->rg->nthru; i++) {
			const struct thru *t = &pc->rg->thru[i];

			if (simgpu_epoch_ordered(&t->e, &sg_host_vc, AGENT_HOST))
				continue;
			r = (simgpu_race_t){ t->write ? SIMGPU_RACE_WAW : SIMGPU_RACE_WAR,
					     pc->off, pc->len, t->e };
			report_host_race(c->what, c->call, c->verb, pc->va, &r);
		}
		return;
	}

	/* every conflict, lowest address first */
	while (off < end &&
	       simgpu_shadow_check(pc->sh, off, end - off, &sg_host_vc, AGENT_HOST, &r)) {
		report_host_race(c->what, c->call, c->verb,
				 pc->va + (uintptr_t)(r.base - pc->off), &r);
		/* warn mode: each conflict once, then the memory is gone */
		simgpu_shadow_clear(pc->sh, r.base, r.size);
		off = r.base + r.size;
	}
}

void sg_host_hazard(const void *p, size_t n, const char *what, const char *verb)
{
	struct hazard_ctx c = { what, verb, 0 };

	if (sg_race_mode == 0 || !n)
		return;
	c.call = sg_next_seq();
	for_pieces((uintptr_t)p, n, hazard_piece, &c);
}

void sg_phys_hazard(struct phys *ph, const char *what, const char *verb)
{
	struct hazard_ctx c = { what, verb, 0 };
	struct piece pc = { &ph->sh, 0, ph->size, 0, NULL, ph->host, NULL };

	if (sg_race_mode == 0 || !ph->sh.n)
		return;
	c.call = sg_next_seq();
	/* not mapped anywhere any more: name it by its first bytes' offset
	 * in the device memory file, as the only address it still has */
	pc.va = (uintptr_t)ph->off;
	hazard_piece(&pc, &c);
}

/* ---- pinned pages protected while a copy of them is queued ---- */

struct pin {
	uintptr_t lo, hi;       /* protected pages */
	uintptr_t base, size;   /* the copy's exact bytes */
	int prot;               /* PROT_NONE (a copy writes it) or PROT_READ */
	simgpu_epoch_t e;
};
static struct pin *pins;
static size_t npins, cappins;

/* (lock held) Re-applies protection over [lo, hi): open, then the read-
 * only pins, then the no-access ones (the strictest wins). */
static void pins_apply(uintptr_t lo, uintptr_t hi)
{
	size_t i;
	int pass;

	if (lo >= hi)
		return;
	mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
	for (pass = 0; pass < 2; pass++) {
		int want = pass == 0 ? PROT_READ : PROT_NONE;

		for (i = 0; i < npins; i++) {
			uintptr_t a, b;

			if (pins[i].prot != want || pins[i].hi <= lo || pins[i].lo >= hi)
				continue;
			a = pins[i].lo > lo ? pins[i].lo : lo;
			b = pins[i].hi < hi ? pins[i].hi : hi;
			mprotect((void *)a, b - a, want);
		}
	}
}

/* (lock held) Protects the pages of [base, base+size) that lie wholly in
 * pinned range h until the host follows epoch e. */
static void pin_add(const struct host_range *h, uintptr_t base, size_t size,
		    int prot, const simgpu_epoch_t *e)
{
	uintptr_t lo = base / sg_page * sg_page;
	uintptr_t hi = (base + size + sg_page - 1) / sg_page * sg_page;

	if (lo < h->base)
		lo += sg_page;
	if (hi > h->base + h->size)
		hi -= sg_page;
	if (sg_race_mode == 0 || sg_dryrun || lo >= hi)
		return;
	if (npins == cappins) {
		size_t cap = cappins ? 2 * cappins : 64;
		struct pin *a = realloc(pins, cap * sizeof(*a));

		if (!a)
			return;     /* not protected: a race may go unseen */
		pins = a;
		cappins = cap;
	}
	pins[npins++] = (struct pin){ lo, hi, base, size, prot, *e };
	pins_apply(lo, hi);
}

/* (lock held) Removes pins matching `drop` and reopens their pages, one
 * pin at a time: pinned blocks are separate mappings, and one mprotect
 * over a span with a hole in it stops at the hole. */
static void pins_remove(bool (*drop)(const struct pin *, void *), void *ctx)
{
	size_t i, k = 0, n = npins;

	for (i = 0; i < n; i++) {
		if (!drop(&pins[i], ctx)) {
			struct pin t = pins[k];

			pins[k++] = pins[i];
			pins[i] = t;
		}
	}
	npins = k;      /* the dropped ones now sit at [k, n) */
	for (i = k; i < n; i++)
		pins_apply(pins[i].lo, pins[i].hi);
}

static bool pin_ordered(const struct pin *p, void *ctx)
{
	(void)ctx;
	return simgpu_epoch_ordered(&p->e, &sg_host_vc, AGENT_HOST);
}

struct span {
	uintptr_t lo, hi;
};

static bool pin_in_span(const struct pin *p, void *ctx)
{
	const struct span *s = ctx;

	return p->lo < s->hi && p->hi > s->lo;
}

void sg_pins_drop(uintptr_t base, size_t size)
{
	struct span s = { base, base + size };

	if (npins)
		pins_remove(pin_in_span, &s);
}

bool sg_pin_fault(uintptr_t addr, int is_write)
{
	struct timespec t0, now;
	uintptr_t page = addr / (sg_page ? sg_page : 4096) * sg_page;
	struct span s = { page, page + sg_page };
	const struct pin *hit = NULL, *near = NULL;
	size_t i;

	if (!sg_page)
		return false;
	/* the faulting thread may be the simulator itself, holding the
	 * lock (a bug): give up after a while and report a plain fault */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (pthread_mutex_trylock(&simgpu_lock)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 1)
			return false;
		sched_yield();
	}
	for (i = 0; i < npins; i++) {
		if (addr < pins[i].lo || addr >= pins[i].hi)
			continue;
		near = &pins[i];
		if (addr < pins[i].base || addr >= pins[i].base + pins[i].size)
			continue;
		/* reading what a host-to-device copy reads is no race */
		if (pins[i].prot == PROT_READ && is_write == 0)
			continue;
		hit = &pins[i];
		break;
	}
	if (!near) {
		pthread_mutex_unlock(&simgpu_lock);
		return false;
	}
	if (hit) {
		char prior[96], line[640];
		uintptr_t a = hit->base > page ? hit->base : page;
		uintptr_t b = hit->base + hit->size < page + sg_page ?
			hit->base + hit->size : page + sg_page;
		const char *verb = is_write == 1 ? "writes" :
				   is_write == 0 ? "reads" : "accesses";

		agent_name(hit->e.agent, prior, sizeof(prior));
		snprintf(line, sizeof(line),
			 "simgpu: race on %p (%llu bytes): host code %s what %s "
			 "(call %llu) on %s %s%s",
			 (void *)a, (unsigned long long)(b - a), verb, hit->e.op,
			 (unsigned long long)hit->e.seq, prior,
			 hit->prot == PROT_NONE ? "writes" : "reads", tail);
		race_emit(line);        /* aborts in abort mode */
	}
	/* warn mode, or a protected page touched outside the copy's bytes:
	 * open the page for good and let the access run */
	pins_remove(pin_in_span, &s);
	pthread_mutex_unlock(&simgpu_lock);
	return true;
}

/* ---- host synchronisation ---- */

void sg_host_join(const simgpu_vc_t *vc)
{
	if (sg_race_mode == 0)
		return;
	vc_join(&sg_host_vc, vc);
	if (npins)
		pins_remove(pin_ordered, NULL);
}

/* ---- streams ---- */

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* (lock held) The calling thread's per-thread default stream. */
static struct stream *ptds_get(void)
{
	struct stream *st = tl_ptds;

	if (st)
		return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return &sg_legacy;
	st->magic = STREAM_MAGIC;
	st->ptds = true;
	st->tid = gettid_();
	st->t = sg_clk.host;
	st->agent = agent_new(SIMGPU_STREAM_PER_THREAD, AG_PTDS, st->tid);
	st->next = sg_streams;
	sg_streams = st;
	tl_ptds = st;
	return st;
}

struct stream *sg_stream_of(void *s)
{
	struct stream *st = s;

	if ((uintptr_t)s <= 1)
		return &sg_legacy;
	if (s == SIMGPU_STREAM_PER_THREAD)
		return ptds_get();
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

	if (st != &sg_legacy)
		return st->flags & SIMGPU_STREAM_NONBLOCKING ? 0.0 : sg_legacy.t;
	for (o = sg_streams; o; o = o->next) {
		if (!o->dead && !(o->flags & SIMGPU_STREAM_NONBLOCKING))
			t = dmax(t, o->t);
	}
	return t;
}

/* (lock held) When all work queued so far on st ends. */
static double stream_end(const struct stream *st)
{
	return dmax(st->t, stream_floor(st));
}

/* (lock held) The joins any command issued on st implies. */
static void stream_pre(struct stream *st)
{
	struct stream *o;

	if (sg_race_mode == 0)
		return;
	vc_join(&st->vc, &sg_host_vc);
	if (st == &sg_legacy) {
		for (o = sg_streams; o; o = o->next)
			if (!(o->flags & SIMGPU_STREAM_NONBLOCKING))
				vc_join(&st->vc, &o->vc);
	} else if (!(st->flags & SIMGPU_STREAM_NONBLOCKING)) {
		vc_join(&st->vc, &sg_legacy.vc);
	}
}

void sg_op_epoch(struct stream *st, const char *op, simgpu_epoch_t *e)
{
	e->agent = st->agent;
	e->op = op;
	e->seq = sg_next_seq();
	e->clock = 0;
	if (sg_race_mode == 0)
		return;
	stream_pre(st);
	if (simgpu_vc_tick(&st->vc, st->agent))
		out_of_memory();
	e->clock = simgpu_vc_get(&st->vc, st->agent);
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
	pthread_mutex_lock(&simgpu_lock);
	st->t = sg_clk.host;       /* a new stream has nothing queued */
	st->agent = agent_new(st, AG_STREAM, 0);
	/* what the host knows is ordered before anything issued on it */
	vc_join(&st->vc, &sg_host_vc);
	st->next = sg_streams;
	sg_streams = st;
	pthread_mutex_unlock(&simgpu_lock);
	*s = st;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_stream_destroy(void *s)
{
	struct stream *st;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	if (!st || st == &sg_legacy || st->ptds) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	/* Never freed nor unlinked: a handle used after destruction must
	 * find the dead mark, not reused memory, and its work still orders
	 * (a few bytes per stream). */
	st->magic = STREAM_DEAD;
	st->dead = true;
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_stream_check(void *s)
{
	simgpu_status_t st;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s) ? SIMGPU_OK : SIMGPU_EHANDLE;
	pthread_mutex_unlock(&simgpu_lock);
	return st;
}

simgpu_status_t simgpu_stream_info(void *s, unsigned *flags, int *priority)
{
	struct stream *st;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	if (st) {
		if (flags)
			*flags = st->flags;
		if (priority)
			*priority = st->priority;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return st ? SIMGPU_OK : SIMGPU_EHANDLE;
}

/* (lock held) The host has waited for everything queued on st. */
static void host_syncs_stream(struct stream *st)
{
	stream_pre(st);         /* a legacy sync covers the blocking streams */
	sg_host_join(&st->vc);
	simgpu_clock_wait(&sg_clk, stream_end(st));
}

simgpu_status_t simgpu_stream_sync(void *s)
{
	struct stream *st;
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	if (!st) {
		r = SIMGPU_EHANDLE;
	} else if (st->cap) {
		/* a capturing stream has nothing to wait for: CUDA refuses */
		sg_capture_invalidate(st->cap);
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	} else if (st == &sg_legacy && sg_capture_check_op(st) < 0) {
		r = SIMGPU_ECAPTURE_IMPLICIT;
	} else if (sg_capture_forbids_unsafe()) {
		r = SIMGPU_ECAPTURE_UNSUPPORTED;        /* a wait during a capture */
	} else {
		host_syncs_stream(st);
		sg_pool_release(false);
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

/* Polling: done when the work ended by the host's time; otherwise the
 * query costs the host SIMGPU_POLL_COST (a real cudaEventQuery returns at
 * once), so a loop of polls reaches the end, and a pool that polls after
 * every call does not wait for its copies.  SIMGPU_POLL_COST=end: the
 * host spends the time until the work ends (the next poll succeeds). */
static simgpu_status_t poll_until(double t)
{
	if (t <= sg_clk.host)
		return SIMGPU_OK;
	simgpu_clock_wait(&sg_clk, sg_poll_cost < 0 ? t : dmin(t, sg_clk.host + sg_poll_cost));
	return SIMGPU_ENOTREADY;
}

simgpu_status_t simgpu_stream_query(void *s)
{
	struct stream *st;
	simgpu_status_t r = SIMGPU_EHANDLE;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	if (st && st->cap) {
		sg_capture_invalidate(st->cap);
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	} else if (st && sg_capture_forbids_unsafe()) {
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	} else if (st) {
		r = poll_until(stream_end(st));
		if (r == SIMGPU_OK) {
			stream_pre(st);
			sg_host_join(&st->vc);
		}
	}
	pthread_mutex_unlock(&simgpu_lock);
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
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	ev = event_of(e);
	if (!st || !ev) {
		r = SIMGPU_EHANDLE;
	} else if (sg_event_capture(ev) || st->cap) {
		/* a fork or join inside a capture, or one across its edge */
		r = sg_capture_wait_event(st, ev);
	} else if (st == &sg_legacy && sg_capture_check_op(st) < 0) {
		r = SIMGPU_ECAPTURE_IMPLICIT;
	} else if (ev->recorded) {
		stream_pre(st);
		vc_join(&st->vc, &ev->vc);
		st->t = dmax(st->t, ev->t);
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
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
	pthread_mutex_lock(&simgpu_lock);
	ev = event_of(e);
	if (ev)
		ev->magic = 0;
	pthread_mutex_unlock(&simgpu_lock);
	if (!ev)
		return SIMGPU_EHANDLE;
	simgpu_vc_free(&ev->vc);
	free(ev);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_event_record(void *e, void *s)
{
	struct stream *st;
	struct event *ev;
	simgpu_status_t r = SIMGPU_OK;
	int cap;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(s);
	ev = event_of(e);
	if (!st || !ev) {
		r = SIMGPU_EHANDLE;
	} else if ((cap = sg_capture_check_op(st)) < 0) {
		r = (simgpu_status_t)-cap;
	} else if (cap == 1) {
		sg_capture_event_recorded(ev, st);
	} else {
		stream_pre(st);
		if (sg_race_mode && simgpu_vc_copy(&ev->vc, &st->vc))
			out_of_memory();
		/* the stream reaches the event no earlier than the host
		 * issued it */
		ev->t = dmax(stream_end(st), sg_clk.host);
		ev->recorded = true;
		ev->cap_id = 0;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

simgpu_status_t simgpu_event_query(void *e)
{
	struct event *ev;
	simgpu_status_t r = SIMGPU_EHANDLE;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	ev = event_of(e);
	if (ev && sg_event_capture(ev)) {
		sg_capture_invalidate(sg_event_capture(ev));
		r = SIMGPU_ECAPTURED_EVENT;
	} else if (ev && sg_capture_forbids_unsafe()) {
		/* PyTorch: "cudaEventQuery ... illegal during CUDA graph capture" */
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	} else if (ev) {
		r = ev->recorded ? poll_until(ev->t) : SIMGPU_OK;
		if (r == SIMGPU_OK && ev->recorded)
			sg_host_join(&ev->vc);
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

simgpu_status_t simgpu_event_sync(void *e)
{
	struct event *ev;
	simgpu_status_t r = SIMGPU_EHANDLE;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	ev = event_of(e);
	if (ev && sg_event_capture(ev)) {
		sg_capture_invalidate(sg_event_capture(ev));
		r = SIMGPU_ECAPTURED_EVENT;
	} else if (ev && sg_capture_forbids_unsafe()) {
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	} else if (ev) {
		r = SIMGPU_OK;
		if (ev->recorded) {
			simgpu_clock_wait(&sg_clk, ev->t);
			sg_host_join(&ev->vc);
			sg_pool_release(false);
		}
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

simgpu_status_t simgpu_event_elapsed(float *ms, void *start, void *end)
{
	struct event *a, *b;
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	if (!ms)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&simgpu_lock);
	a = event_of(start);
	b = event_of(end);
	if (!a || !b || !a->recorded || !b->recorded ||
	    (a->flags & SIMGPU_EVENT_DISABLE_TIMING) ||
	    (b->flags & SIMGPU_EVENT_DISABLE_TIMING))
		r = SIMGPU_EHANDLE;
	else if (a->t > sg_clk.host || b->t > sg_clk.host)
		r = SIMGPU_ENOTREADY;   /* as CUDA: not complete yet */
	else
		*ms = (float)((b->t - a->t) * 1e3);
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

void sg_host_syncs_device(void)
{
	struct stream *o;

	simgpu_clock_wait(&sg_clk, simgpu_clock_end(&sg_clk));
	if (sg_race_mode) {
		vc_join(&sg_host_vc, &sg_legacy.vc);
		for (o = sg_streams; o; o = o->next)
			vc_join(&sg_host_vc, &o->vc);
		sg_host_join(&sg_host_vc);
	}
}

simgpu_status_t simgpu_device_sync(void)
{
	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_device_sync()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	sg_host_syncs_device();
	sg_pool_release(false);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

double simgpu_host_now(void)
{
	double t;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	t = sg_clk.host;
	pthread_mutex_unlock(&simgpu_lock);
	return t;
}

/* ---- declared accesses of the op being built (thread-local) ---- */

struct acc {
	const void *p;
	size_t n;
	unsigned mode;
};
static __thread struct {
	struct acc *a;
	size_t n, cap;
} pend;

void simgpu_access(const void *p, size_t n, unsigned mode)
{
	if (!p || !n || !(mode & SIMGPU_ACC_RW) || (sg_race_mode == 0 && !sg_host_phys))
		return;
	if (pend.n == pend.cap) {
		size_t cap = pend.cap ? 2 * pend.cap : 32;
		struct acc *a = realloc(pend.a, cap * sizeof(*a));

		if (!a)
			out_of_memory();
		pend.a = a;
		pend.cap = cap;
	}
	pend.a[pend.n++] = (struct acc){ p, n, mode };
}

void simgpu_access_discard(void)
{
	pend.n = 0;
}

void sg_access_reset(void)
{
	pend.n = 0;
}

/* (lock held) Checks and records the declared accesses; clears them. */
static void pending_check(struct stream *st, const simgpu_epoch_t *e)
{
	size_t i;

	for (i = 0; i < pend.n; i++)
		check_access(e, &st->vc, pend.a[i].p, pend.a[i].n, pend.a[i].mode);
	pend.n = 0;
}

/* ---- the device bytes one kernel launch touches (SIMGPU_REPORT) ---- */

struct span_list {
	struct { uintptr_t lo, hi; } *v;
	size_t n, cap;
};

static void device_span(const struct piece *pc, void *ctx)
{
	struct span_list *l = ctx;

	if (pc->host || pc->sysmem)
		return;         /* host memory is not the device's */
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v)
			out_of_memory();
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].lo = pc->va;
	l->v[l->n].hi = pc->va + pc->len;
	l->n++;
}

static int span_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void sysmem_bytes(const struct piece *pc, void *ctx)
{
	if (pc->sysmem)
		*(uint64_t *)ctx += pc->len;
}

/* Is p in a mapping of host-located memory? */
static bool in_sysmem(const void *p)
{
	uint64_t n = 0;

	pthread_mutex_lock(&simgpu_lock);
	for_pieces((uintptr_t)p, 1, sysmem_bytes, &n);
	pthread_mutex_unlock(&simgpu_lock);
	return n > 0;
}

/* (lock held) Bytes of host-located memory among the declared accesses
 * (before pending_check clears them): the kernel reaches them over the
 * link. */
static uint64_t kernel_sysmem(void)
{
	uint64_t n = 0;

	for (size_t i = 0; sg_host_phys && i < pend.n; i++)
		for_pieces((uintptr_t)pend.a[i].p, pend.a[i].n, sysmem_bytes, &n);
	return n;
}

/* (lock held) Counts the distinct device bytes of the declared accesses
 * of kernel `name` (before pending_check clears them) and keeps the
 * largest launch's: a kernel is opaque to an interposer, which can only
 * run it whole, so no budget below it can run the program. */
static void kernel_footprint(const char *name)
{
	static struct span_list l;
	uint64_t bytes = 0;
	uintptr_t end = 0;
	size_t i;

	if (!sg_footprints)
		return;
	l.n = 0;
	for (i = 0; i < pend.n; i++)
		for_pieces((uintptr_t)pend.a[i].p, pend.a[i].n, device_span, &l);
	qsort(l.v, l.n, sizeof(*l.v), span_cmp);
	for (i = 0; i < l.n; i++) {
		uintptr_t lo = l.v[i].lo > end ? l.v[i].lo : end;

		if (l.v[i].hi > lo)
			bytes += l.v[i].hi - lo;
		if (l.v[i].hi > end)
			end = l.v[i].hi;
	}
	if (bytes > sg_kernel_footprint) {
		sg_kernel_footprint = bytes;
		sg_kernel_footprint_name = name;
	}
}

/* SIMGPU_TIMELINE=file: one line per op put on the virtual clocks, for
 * finding where an engine waits (what it waited for: the host, its
 * stream, the engine).  Columns: start end engine stream op host_at_issue
 * stream_ready engine_free (seconds of virtual time).  (lock held) */
static FILE *sg_timeline;
static bool sg_timeline_checked;

static double clock_submit(struct stream *st, simgpu_engine_t e, double dur)
{
	static const char *const names[] = { "compute", "h2d", "d2h", "d2d" };
	double host = sg_clk.host, ready = st->t, floor = stream_floor(st);
	double free_at = sg_clk.engine[simgpu_clock_engine(&sg_clk, e)];
	double end = simgpu_clock_submit(&sg_clk, &st->t, floor, e, dur);

	if (!sg_timeline_checked) {
		const char *path = getenv("SIMGPU_TIMELINE");

		sg_timeline_checked = true;
		if (path && *path && !(sg_timeline = fopen(path, "w")))
			fprintf(stderr, "simgpu: SIMGPU_TIMELINE=%s: cannot write\n", path);
	}
	if (sg_timeline) {
		const char *op = simgpu_op_current();

		fprintf(sg_timeline, "%.9f %.9f %s %p %s %.9f %.9f %.9f\n", end - (dur > 0 ? dur : 0),
			end, (unsigned)e < 4 ? names[e] : "?", (void *)st, op ? op : "?", host,
			ready > floor ? ready : floor, free_at);
	}
	return end;
}

/* (lock held) */
static double submit_locked(struct stream *st, simgpu_engine_t e, double s)
{
	if (e == SIMGPU_ENGINE_COMPUTE)
		sg_n_compute++;
	return clock_submit(st, e, s);
}

double simgpu_submit(void *stream, simgpu_engine_t engine, double seconds)
{
	struct stream *st;
	simgpu_epoch_t e;
	double end;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st)
		st = &sg_legacy;
	if (st->cap) {
		/* the op ran instead of being recorded: the graph would miss it */
		sg_capture_invalidate(st->cap);
	}
	sg_op_epoch(st, simgpu_op_current(), &e);
	pending_check(st, &e);
	end = submit_locked(st, engine, seconds);
	pthread_mutex_unlock(&simgpu_lock);
	return end;
}

double simgpu_op_seconds(double flops, double bytes)
{
	simgpu_init();
	return simgpu_model_op_seconds(&sg_model, flops, bytes);
}

double simgpu_copy_seconds(size_t bytes)
{
	simgpu_init();
	return simgpu_model_copy_seconds(&sg_model, (double)bytes);
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

/* One copy, 1-D (height 1) or 2-D, by value: what a graph replays. */
struct copy_args {
	void *dst;
	const void *src;
	size_t dpitch, spitch, width, height;
	simgpu_copy_kind_t kind;
	const char *op;
};

static simgpu_status_t copy_run(const struct copy_args *c, void *stream,
				bool sync);

static void copy_replay(const void *args, void *stream)
{
	copy_run(args, stream, false);
}

/* (lock held) The pinned range holding [p, p+n) entirely, or NULL. */
static struct host_range *pinned_range(const void *p, size_t n)
{
	long i = sa_find(&sg_hosts, (uintptr_t)p);
	struct host_range *h;

	if (i < 0)
		return NULL;
	h = sa_at(&sg_hosts, (size_t)i);
	return (uintptr_t)p - h->base + n <= h->size ? h : NULL;
}

/* (lock held) Opens the pages of [p, p+n) for the simulator's own copy. */
static void pins_open(const void *p, size_t n)
{
	uintptr_t lo = (uintptr_t)p / sg_page * sg_page;
	uintptr_t hi = ((uintptr_t)p + n + sg_page - 1) / sg_page * sg_page;
	size_t i;

	for (i = 0; i < npins; i++) {
		if (pins[i].lo < hi && pins[i].hi > lo) {
			uintptr_t a = pins[i].lo > lo ? pins[i].lo : lo;
			uintptr_t b = pins[i].hi < hi ? pins[i].hi : hi;

			mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
		}
	}
}

static simgpu_status_t copy_run(const struct copy_args *c, void *stream,
				bool sync)
{
	struct stream *st;
	simgpu_engine_t e;
	simgpu_copy_kind_t kind = c->kind;
	const void *host = NULL;
	size_t dn = c->dpitch * (c->height - 1) + c->width;
	size_t sn = c->spitch * (c->height - 1) + c->width;
	size_t bytes = c->width * c->height, hn = 0, i;
	struct host_range *pin = NULL;
	bool pinned_lock = false, presync = false;
	simgpu_epoch_t ep;
	double end, dur;
	int cap;

	if (kind == SIMGPU_COPY_DEFAULT)
		kind = infer_kind(c->dst, c->src);
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap != 0) {
		simgpu_status_t r = SIMGPU_OK;

		if (cap < 0)
			r = (simgpu_status_t)-cap;
		else if (sync && kind != SIMGPU_COPY_D2D)
			r = SIMGPU_ECAPTURE_UNSUPPORTED;   /* the host cannot wait */
		else
			r = sg_capture_add(st, c->op, copy_replay, c, sizeof(*c));
		if (r != SIMGPU_OK && st->cap)
			sg_capture_invalidate(st->cap);
		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	pthread_mutex_unlock(&simgpu_lock);

	simgpu_op_begin(c->op);
	switch (kind) {
	case SIMGPU_COPY_H2D:
		simgpu_check(c->dst, dn, false);
		simgpu_check(c->src, sn, true);
		e = SIMGPU_ENGINE_H2D;
		host = c->src;
		hn = sn;
		break;
	case SIMGPU_COPY_D2H:
		simgpu_check(c->src, sn, false);
		simgpu_check(c->dst, dn, true);
		e = SIMGPU_ENGINE_D2H;
		host = c->dst;
		hn = dn;
		break;
	case SIMGPU_COPY_D2D:
		simgpu_check(c->src, sn, false);
		simgpu_check(c->dst, dn, false);
		e = SIMGPU_ENGINE_D2D;
		if (sg_host_phys) {
			/* a side in host-located memory: a copy over the link */
			bool ds = in_sysmem(c->dst), ss = in_sysmem(c->src);

			if (ds || ss)
				e = ss ? SIMGPU_ENGINE_H2D : SIMGPU_ENGINE_D2H;
		}
		break;
	case SIMGPU_COPY_H2H:
		/* the host copies, synchronously */
		simgpu_check(c->src, sn, true);
		simgpu_check(c->dst, dn, true);
		if (!sg_dryrun)
			for (i = 0; i < c->height; i++)
				memmove((char *)c->dst + i * c->dpitch,
					(const char *)c->src + i * c->spitch, c->width);
		simgpu_op_end();
		return SIMGPU_OK;
	default:
		simgpu_op_end();
		return SIMGPU_EINVAL;
	}

	if (host) {
		pthread_mutex_lock(&simgpu_pin_lock);
		pinned_lock = true;
		pthread_mutex_lock(&simgpu_lock);
		pin = pinned_range(host, hn);
		if (pin && npins)
			pins_open(host, hn);
		pthread_mutex_unlock(&simgpu_lock);
		if (!pin) {
			/* pageable memory is staged: the host waits for the
			 * copy to it, and synchronises the stream before one
			 * from it (CUDA's documented behaviour) */
			if (kind == SIMGPU_COPY_D2H)
				sync = true;
			else
				presync = true;
		}
	} else {
		/* CUDA: a device-to-device cudaMemcpy does not make the host
		 * wait */
		sync = false;
	}
	if (!sg_dryrun)
		for (i = 0; i < c->height; i++)
			memmove((char *)c->dst + i * c->dpitch,
				(const char *)c->src + i * c->spitch, c->width);

	dur = e == SIMGPU_ENGINE_D2D ?
		simgpu_model_op_seconds(&sg_model, 0.0, 2.0 * (double)bytes) :
		simgpu_model_copy_seconds(&sg_model, (double)bytes);
	pthread_mutex_lock(&simgpu_lock);
	if (presync)
		host_syncs_stream(st);
	sg_op_epoch(st, c->op, &ep);
	pending_check(st, &ep);         /* nothing declared; clears */
	check_access(&ep, &st->vc, c->src, sn, SIMGPU_ACC_R);
	check_access(&ep, &st->vc, c->dst, dn, SIMGPU_ACC_W);
	end = clock_submit(st, e, dur);
	if (pin) {
		pin_add(pin, (uintptr_t)host, hn,
			kind == SIMGPU_COPY_D2H ? PROT_NONE : PROT_READ, &ep);
		pins_apply((uintptr_t)host / sg_page * sg_page,
			   ((uintptr_t)host + hn + sg_page - 1) / sg_page * sg_page);
	}
	if (sync) {
		simgpu_clock_wait(&sg_clk, end);
		sg_host_join(&st->vc);
	}
	if (e == SIMGPU_ENGINE_H2D)
		sg_bytes_h2d += bytes;
	else if (e == SIMGPU_ENGINE_D2H)
		sg_bytes_d2h += bytes;
	else
		sg_bytes_d2d += bytes;
	pthread_mutex_unlock(&simgpu_lock);
	if (pinned_lock)
		pthread_mutex_unlock(&simgpu_pin_lock);
	simgpu_op_end();
	return SIMGPU_OK;
}

simgpu_status_t simgpu_copy(void *dst, const void *src, size_t n,
			    simgpu_copy_kind_t kind, void *stream, bool sync,
			    const char *op)
{
	struct copy_args c = { dst, src, n, n, n, 1, kind, op };

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (n == 0)
		return SIMGPU_OK;
	return copy_run(&c, stream, sync);
}

simgpu_status_t simgpu_copy_2d(void *dst, size_t dpitch, const void *src,
			       size_t spitch, size_t width, size_t height,
			       simgpu_copy_kind_t kind, void *stream, bool sync,
			       const char *op)
{
	struct copy_args c = { dst, src, dpitch, spitch, width, height, kind, op };

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (width > dpitch || width > spitch)
		return SIMGPU_EINVAL;
	if (width == 0 || height == 0)
		return SIMGPU_OK;
	return copy_run(&c, stream, sync);
}

/* A memset of n units of `unit` bytes (1 or 4) of `value`. */
struct set_args {
	void *p;
	uint32_t value;
	size_t n;
	unsigned unit;
	const char *op;
};

static simgpu_status_t set_run(const struct set_args *a, void *stream,
			       bool sync);

static void set_replay(const void *args, void *stream)
{
	set_run(args, stream, false);
}

static simgpu_status_t set_run(const struct set_args *a, void *stream,
			       bool sync)
{
	struct stream *st;
	simgpu_epoch_t ep;
	size_t bytes = a->n * a->unit, i;
	double end;
	int cap;

	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap != 0) {
		simgpu_status_t r = cap < 0 ? (simgpu_status_t)-cap :
			sg_capture_add(st, a->op, set_replay, a, sizeof(*a));

		if (r != SIMGPU_OK && st->cap)
			sg_capture_invalidate(st->cap);
		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	pthread_mutex_unlock(&simgpu_lock);
	simgpu_op_begin(a->op);
	simgpu_check(a->p, bytes, false);
	if (!sg_dryrun) {
		if (a->unit == 1) {
			memset(a->p, (int)(a->value & 0xff), bytes);
		} else {
			uint32_t *w = a->p;

			for (i = 0; i < a->n; i++)
				w[i] = a->value;
		}
	}
	pthread_mutex_lock(&simgpu_lock);
	sg_op_epoch(st, a->op, &ep);
	pending_check(st, &ep);
	check_access(&ep, &st->vc, a->p, bytes, SIMGPU_ACC_W);
	end = submit_locked(st, SIMGPU_ENGINE_COMPUTE,
			    simgpu_model_op_seconds(&sg_model, 0.0, (double)bytes));
	if (sync) {
		simgpu_clock_wait(&sg_clk, end);
		sg_host_join(&st->vc);
	}
	pthread_mutex_unlock(&simgpu_lock);
	simgpu_op_end();
	return SIMGPU_OK;
}

simgpu_status_t simgpu_memset(void *p, int value, size_t n, void *stream,
			      bool sync, const char *op)
{
	struct set_args a = { p, (uint32_t)(value & 0xff), n, 1, op };

	simgpu_init();
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (n == 0)
		return SIMGPU_OK;
	return set_run(&a, stream, sync);
}

simgpu_status_t simgpu_memset32(void *p, uint32_t value, size_t n,
				void *stream, const char *op)
{
	struct set_args a = { p, value, n, 4, op };

	simgpu_init();
	if ((uintptr_t)p % 4)
		return SIMGPU_EINVAL;
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	if (n == 0)
		return SIMGPU_OK;
	return set_run(&a, stream, false);
}

/* A kernel launch by value: the kernel, the thread count and the
 * parameter values packed at their natural offsets. */
struct launch_args {
	const simgpu_kernel_t *k;
	uint64_t threads;
	size_t nbuf;
	unsigned char buf[];
};

static simgpu_status_t launch_run(const simgpu_kernel_t *k, void **args,
				  uint64_t threads, void *stream);

static void launch_replay(const void *blob, void *stream)
{
	const struct launch_args *la = blob;
	void *argv[64];
	size_t off, sz;
	int i;

	for (i = 0; i < la->k->nparams && i < 64; i++) {
		simgpu_kernel_param(la->k, (size_t)i, &off, &sz);
		argv[i] = (void *)(la->buf + off);
	}
	launch_run(la->k, argv, la->threads, stream);
}

static simgpu_status_t launch_capture(struct stream *st,
				      const simgpu_kernel_t *k, void **args,
				      uint64_t threads)
{
	size_t off = 0, sz = 0, end = 0;
	struct launch_args *la;
	simgpu_status_t r;
	int i;

	if (k->nparams > 64)
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	for (i = 0; i < k->nparams; i++) {
		simgpu_kernel_param(k, (size_t)i, &off, &sz);
		if (off + sz > end)
			end = off + sz;
	}
	la = calloc(1, sizeof(*la) + end);
	if (!la)
		return SIMGPU_ENOMEM;
	la->k = k;
	la->threads = threads;
	la->nbuf = end;
	for (i = 0; i < k->nparams; i++) {
		simgpu_kernel_param(k, (size_t)i, &off, &sz);
		memcpy(la->buf + off, args[i], sz);
	}
	r = sg_capture_add(st, k->name, launch_replay, la, sizeof(*la) + end);
	free(la);
	return r;
}

static simgpu_status_t launch_run(const simgpu_kernel_t *k, void **args,
				  uint64_t threads, void *stream)
{
	double flops = 0.0, bytes = 0.0;
	struct stream *st;
	simgpu_epoch_t ep;
	int cap;

	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap != 0) {
		simgpu_status_t r = cap < 0 ? (simgpu_status_t)-cap :
			launch_capture(st, k, args, threads);

		if (r != SIMGPU_OK && st->cap)
			sg_capture_invalidate(st->cap);
		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	pthread_mutex_unlock(&simgpu_lock);
	simgpu_op_begin(k->name);
	k->run(args, threads > UINT32_MAX ? UINT32_MAX : (unsigned)threads);
	if (k->cost)
		k->cost(args, &flops, &bytes);
	pthread_mutex_lock(&simgpu_lock);
	sg_op_epoch(st, k->name, &ep);
	kernel_footprint(k->name);
	uint64_t sys = kernel_sysmem();
	pending_check(st, &ep);
	/* what it reaches in host memory crosses the link at the copy rate */
	sg_kernel_host_bytes += sys;
	submit_locked(st, SIMGPU_ENGINE_COMPUTE,
		      simgpu_model_op_seconds(&sg_model, flops, bytes) +
		      (sys ? simgpu_model_copy_seconds(&sg_model, (double)sys) : 0.0));
	pthread_mutex_unlock(&simgpu_lock);
	simgpu_op_end();
	return SIMGPU_OK;
}

simgpu_status_t simgpu_launch(const simgpu_kernel_t *k, void **args,
			      uint64_t threads, void *stream)
{
	simgpu_init();
	if (!k)
		return SIMGPU_ENOTFOUND;
	if (!args && k->nparams)
		return SIMGPU_EINVAL;
	if (simgpu_stream_check(stream))
		return SIMGPU_EHANDLE;
	return launch_run(k, args, threads, stream);
}

/* ---- host functions ---- */

struct hostfn_args {
	void (*fn)(void *);
	void *data;
};

static simgpu_status_t hostfn_run(const struct hostfn_args *a, void *stream);

static void hostfn_replay(const void *args, void *stream)
{
	hostfn_run(args, stream);
}

/* The function runs once the stream's earlier work is done: while it
 * runs, the host is ordered after that work (its reads of the stream's
 * results are no race), and afterwards the calling thread knows only what
 * it knew before (the function ran on CUDA's thread, not a sync). */
static simgpu_status_t hostfn_run(const struct hostfn_args *a, void *stream)
{
	struct stream *st;
	simgpu_vc_t saved = { 0, 0, NULL };
	simgpu_epoch_t ep;
	int cap;

	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap != 0) {
		simgpu_status_t r = cap < 0 ? (simgpu_status_t)-cap :
			sg_capture_add(st, "cudaLaunchHostFunc", hostfn_replay,
				       a, sizeof(*a));

		if (r != SIMGPU_OK && st->cap)
			sg_capture_invalidate(st->cap);
		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	sg_op_epoch(st, "cudaLaunchHostFunc", &ep);
	if (sg_race_mode) {
		if (simgpu_vc_copy(&saved, &sg_host_vc))
			out_of_memory();
		sg_host_join(&st->vc);
	}
	pthread_mutex_unlock(&simgpu_lock);
	a->fn(a->data);
	pthread_mutex_lock(&simgpu_lock);
	if (sg_race_mode) {
		simgpu_vc_copy(&sg_host_vc, &saved);
		simgpu_vc_free(&saved);
	}
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_host_func(void *stream, void (*fn)(void *), void *data)
{
	struct hostfn_args a = { fn, data };

	simgpu_init();
	if (!fn)
		return SIMGPU_EINVAL;
	return hostfn_run(&a, stream);
}

/* ---- the stream-ordered allocator's pool ---- */

/* (lock held) A pooled block of the same page-rounded size whose free
 * the op with clock vc on agent `self` follows; -1 when none. */
static long pool_find(size_t size, const simgpu_vc_t *vc, uint32_t self)
{
	size_t i, len = (size + sg_page - 1) / sg_page * sg_page;

	for (i = 0; i < sg_resvs.n; i++) {
		const struct resv *rv = sa_at(&sg_resvs, i);
		simgpu_epoch_t fe = { rv->free_agent, rv->free_clock, 1, "" };

		if (rv->kind != RESV_ALLOC || !rv->pooled || rv->map_len != len)
			continue;
		if (rv->free_agent == self || sg_race_mode == 0 ||
		    simgpu_epoch_ordered(&fe, vc, self))
			return (long)i;
	}
	return -1;
}

bool sg_pool_release(bool all)
{
	bool any = false;
	size_t i = 0;

	while (i < sg_resvs.n) {
		struct resv *rv = sa_at(&sg_resvs, i);
		simgpu_epoch_t fe = { rv->free_agent, rv->free_clock, 1, "" };

		if (rv->kind != RESV_ALLOC || !rv->pooled ||
		    (!all && sg_race_mode &&
		     !simgpu_epoch_ordered(&fe, &sg_host_vc, AGENT_HOST))) {
			i++;
			continue;
		}
		if (all && sg_race_mode) {
			/* the driver waits for the freeing stream first */
			uint32_t a = rv->free_agent;
			struct stream *o;

			if (a == AGENT_LEGACY)
				sg_host_join(&sg_legacy.vc);
			for (o = sg_streams; o; o = o->next)
				if (o->agent == a)
					sg_host_join(&o->vc);
		}
		/* memory other streams used without ordering before the free
		 * is now really gone */
		{
			struct hazard_ctx c = { "cudaFreeAsync (release)", "releases", 0 };
			struct piece pc = { &rv->obj->sh, 0, rv->map_len, rv->base, NULL, false, NULL };

			if (sg_race_mode && rv->obj->sh.n) {
				c.call = sg_next_seq();
				hazard_piece(&pc, &c);
			}
		}
		sg_block_destroy(i);
		any = true;
	}
	return any;
}

simgpu_status_t simgpu_mem_alloc_async(void **p, size_t size, void *stream)
{
	struct stream *st;
	simgpu_epoch_t ep;
	simgpu_status_t r;
	long i;
	int cap;

	simgpu_init();
	if (!p)
		return SIMGPU_EINVAL;
	*p = NULL;
	if (size == 0)
		return SIMGPU_OK;
	if (size > sg_model.mem_bytes)
		return SIMGPU_ENOMEM;
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap < 0) {
		pthread_mutex_unlock(&simgpu_lock);
		return (simgpu_status_t)-cap;
	}
	sg_op_epoch(st, "cudaMallocAsync", &ep);
	i = pool_find(size, &st->vc, st->agent);
	if (i >= 0) {
		struct resv *rv = sa_at(&sg_resvs, (size_t)i);
		struct region rg = { .base = rv->base, .size = size, .prot = 3, .obj = rv->obj };

		if (mprotect((void *)rv->base, rv->map_len, PROT_READ | PROT_WRITE) == 0 &&
		    sg_region_insert(&rg) == 0) {
			rv->pooled = false;
			*p = (void *)rv->base;
			pthread_mutex_unlock(&simgpu_lock);
			return SIMGPU_OK;
		}
	}
	r = sg_block_new(p, size);
	if (r == SIMGPU_ENOMEM && sg_pool_release(false))
		r = sg_block_new(p, size);
	if (r == SIMGPU_ENOMEM && sg_pool_release(true))
		r = sg_block_new(p, size);
	if (r == SIMGPU_OK) {
		i = sg_block_find(*p);
		((struct resv *)sa_at(&sg_resvs, (size_t)i))->async_alloc = true;
		if (cap == 1)
			sg_capture_own(st, *p);
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

simgpu_status_t simgpu_mem_free_async(void *p, void *stream)
{
	struct stream *st;
	struct resv *rv;
	simgpu_epoch_t ep;
	long i, j;
	int cap;

	simgpu_init();
	if (!p)
		return SIMGPU_OK;
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	i = sg_block_find(p);
	if (!st || i < 0) {
		pthread_mutex_unlock(&simgpu_lock);
		return st ? SIMGPU_EINVAL : SIMGPU_EHANDLE;
	}
	cap = sg_capture_check_op(st);
	if (cap < 0) {
		pthread_mutex_unlock(&simgpu_lock);
		return (simgpu_status_t)-cap;
	}
	if (cap == 1) {
		/* only memory the same capture allocated: it is freed with
		 * the graph */
		simgpu_status_t r = sg_capture_free(st, p);

		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	sg_op_epoch(st, "cudaFreeAsync", &ep);
	rv = sa_at(&sg_resvs, (size_t)i);
	rv->pooled = true;
	rv->free_agent = ep.agent;
	rv->free_clock = ep.clock;
	j = sa_find(&sg_regions, rv->base);
	if (j >= 0)
		sa_remove_region((size_t)j);
	mprotect((void *)rv->base, rv->map_len, PROT_NONE);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}
