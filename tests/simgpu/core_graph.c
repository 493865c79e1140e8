/* tests/simgpu/core_graph.c - stream capture and CUDA graphs.
 *
 * A stream in capture does not run what is issued to it: each op is
 * recorded as a node (its replay function and its arguments, by value)
 * into the capture's graph; cudaGraphLaunch replays the nodes, in capture
 * order, as ordinary ops on the launch stream, where the race checker
 * judges them like any other op.  A stream joins a capture by waiting on
 * an event recorded in it (a fork); all of a capture's streams leave it at
 * cudaStreamEndCapture.
 *
 * What is legal during a capture follows CUDA's rules as far as a shim
 * running beside the application can break them:
 *   - an op on the legacy default stream while a blocking stream captures
 *     would join the two: cudaErrorStreamCaptureImplicit, and the capture
 *     is invalidated;
 *   - synchronising or querying a capturing stream, or an event recorded
 *     in a capture: cudaErrorStreamCaptureUnsupported /
 *     cudaErrorCapturedEvent, invalidating it; cudaDeviceSynchronize while
 *     any stream captures likewise;
 *   - a capturing stream waiting on an event recorded outside the capture:
 *     cudaErrorStreamCaptureIsolation (the simulator's reading of "a
 *     dependency across the capture boundary"; real CUDA wants
 *     cudaEventWaitExternal for that);
 *   - "potentially unsafe" calls (cudaMalloc, cudaFree, cudaMallocHost,
 *     cudaFreeHost, cudaHostRegister/Unregister, and waits: stream and
 *     event synchronisation and queries, which PyTorch's allocator calls
 *     "illegal during CUDA graph capture"): refused with
 *     cudaErrorStreamCaptureUnsupported, invalidating the capture, when the
 *     calling thread's mode (cudaThreadExchangeStreamCaptureMode; global by
 *     default) and the captures in progress forbid them: a thread in
 *     relaxed mode never; in thread-local mode when it has a capture of its
 *     own not begun relaxed; in global mode also when another thread has a
 *     capture begun in global mode.
 * Nodes of one graph replay one after another on the launch stream: races
 * between branches of one graph are not seen.
 *
 * Locking: the core mutex (core_int.h) guards the capture list; graph and
 * exec objects belong to their caller, as in CUDA; a replay runs without
 * the lock (its nodes are ordinary ops that take it).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_int.h"

#define GRAPH_MAGIC 0x53474752u   /* "SGGR" */
#define EXEC_MAGIC 0x53474558u    /* "SGEX" */

enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

struct gnode {
	const char *op;
	simgpu_replay_fn fn;
	size_t size;
	unsigned char args[];
};

/* What a graph is: shared by the graph and its instantiations. */
struct gbody {
	int refs;
	struct gnode **nodes;
	size_t n, cap;
	void **owned;           /* cudaMallocAsync'd inside the capture */
	size_t nowned, capowned;
};

struct capture {
	uint64_t id;
	int mode;
	pid_t tid;
	struct stream *origin;
	bool invalidated;
	struct gbody *body;
	struct stream **members;
	size_t nmembers, capmembers;
	struct capture *next;
};

struct graph {
	uint32_t magic;
	struct gbody *body;
};

static struct capture *active;
static uint64_t next_id;
static __thread int tl_mode = MODE_GLOBAL;

static pid_t self_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* (lock held) */
static void body_put(struct gbody *b)
{
	size_t i;

	if (!b || --b->refs > 0)
		return;
	for (i = 0; i < b->n; i++)
		free(b->nodes[i]);
	for (i = 0; i < b->nowned; i++) {
		long k = sg_block_find(b->owned[i]);

		if (k >= 0) {
			const struct resv *rv = sa_at(&sg_resvs, (size_t)k);

			sg_host_hazard(b->owned[i], rv->map_len, "cudaGraphDestroy",
				       "frees");
			sg_block_destroy((size_t)k);
		}
	}
	free(b->nodes);
	free(b->owned);
	free(b);
}

static bool push(void ***arr, size_t *n, size_t *cap, void *v)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		void **a = realloc(*arr, c * sizeof(*a));

		if (!a)
			return false;
		*arr = a;
		*cap = c;
	}
	(*arr)[(*n)++] = v;
	return true;
}

static bool has_blocking_member(const struct capture *c)
{
	size_t i;

	for (i = 0; i < c->nmembers; i++)
		if (!(c->members[i]->flags & SIMGPU_STREAM_NONBLOCKING))
			return true;
	return false;
}

void sg_capture_invalidate(struct capture *c)
{
	if (c)
		c->invalidated = true;
}

int sg_capture_check_op(struct stream *st)
{
	struct capture *c;
	bool bad = false;

	if (st->cap)
		return st->cap->invalidated ? -(int)SIMGPU_ECAPTURE_INVALIDATED : 1;
	if (st != &sg_legacy)
		return 0;
	for (c = active; c; c = c->next) {
		if (has_blocking_member(c)) {
			c->invalidated = true;
			bad = true;
		}
	}
	return bad ? -(int)SIMGPU_ECAPTURE_IMPLICIT : 0;
}

bool sg_capture_forbids_unsafe(void)
{
	struct capture *c;
	pid_t me;
	bool bad = false;

	if (!active || tl_mode == MODE_RELAXED)
		return false;
	me = self_tid();
	for (c = active; c; c = c->next) {
		bool own = c->tid == me && c->mode != MODE_RELAXED;
		bool other = tl_mode == MODE_GLOBAL && c->tid != me &&
			     c->mode == MODE_GLOBAL;

		if (own || other) {
			c->invalidated = true;
			bad = true;
		}
	}
	return bad;
}

bool sg_capture_forbids_device_sync(void)
{
	struct capture *c;

	for (c = active; c; c = c->next)
		c->invalidated = true;
	return active != NULL;
}

static struct capture *capture_by_id(uint64_t id)
{
	struct capture *c;

	for (c = active; id && c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

struct capture *sg_event_capture(struct event *ev)
{
	struct capture *c = capture_by_id(ev->cap_id);

	if (!c)
		ev->cap_id = 0;     /* that capture ended */
	return c;
}

simgpu_status_t sg_capture_add(struct stream *st, const char *op,
			       simgpu_replay_fn fn, const void *args,
			       size_t size)
{
	struct gbody *b = st->cap->body;
	struct gnode *n = malloc(sizeof(*n) + size);

	if (!n || !push((void ***)&b->nodes, &b->n, &b->cap, n)) {
		free(n);
		return SIMGPU_ENOMEM;
	}
	n->op = op;
	n->fn = fn;
	n->size = size;
	memcpy(n->args, args, size);
	return SIMGPU_OK;
}

void sg_capture_event_recorded(struct event *ev, struct stream *st)
{
	ev->cap_id = st->cap->id;
	ev->recorded = true;
}

simgpu_status_t sg_capture_wait_event(struct stream *st, struct event *ev)
{
	struct capture *c = sg_event_capture(ev);

	if (!c) {
		/* a capturing stream waiting on work outside the capture */
		sg_capture_invalidate(st->cap);
		return SIMGPU_ECAPTURE_ISOLATION;
	}
	if (st->cap == c)
		return SIMGPU_OK;       /* replay order already holds it */
	if (st->cap) {
		sg_capture_invalidate(st->cap);
		sg_capture_invalidate(c);
		return SIMGPU_ECAPTURE_MERGE;
	}
	if (st == &sg_legacy) {
		sg_capture_invalidate(c);
		return SIMGPU_ECAPTURE_IMPLICIT;
	}
	if (!push((void ***)&c->members, &c->nmembers, &c->capmembers, st))
		return SIMGPU_ENOMEM;
	st->cap = c;                    /* a fork: st now captures into c */
	return SIMGPU_OK;
}

void sg_capture_own(struct stream *st, void *p)
{
	struct gbody *b = st->cap->body;

	if (!push(&b->owned, &b->nowned, &b->capowned, p))
		sg_capture_invalidate(st->cap);
}

simgpu_status_t sg_capture_free(struct stream *st, void *p)
{
	struct gbody *b = st->cap->body;
	size_t i;

	for (i = 0; i < b->nowned; i++)
		if (b->owned[i] == p)
			return SIMGPU_OK;   /* freed with the graph */
	sg_capture_invalidate(st->cap);
	return SIMGPU_ECAPTURE_UNSUPPORTED;
}

/* ---- public: capture ---- */

int simgpu_capture(void *stream, const char *op, simgpu_replay_fn fn,
		   const void *args, size_t size)
{
	struct stream *st;
	int r;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	r = st ? sg_capture_check_op(st) : 0;
	if (r == 1 && sg_capture_add(st, op, fn, args, size) != SIMGPU_OK) {
		sg_capture_invalidate(st->cap);
		r = -1;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r < 0 ? -1 : r;
}

bool simgpu_capture_refuse(void *stream, const char *op)
{
	struct stream *st;
	bool refused = false;

	(void)op;
	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (st && sg_capture_check_op(st) != 0) {
		sg_capture_invalidate(st->cap);
		refused = true;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return refused;
}

simgpu_status_t simgpu_capture_begin(void *stream, int mode)
{
	struct stream *st;
	struct capture *c;

	simgpu_init();
	if (mode < MODE_GLOBAL || mode > MODE_RELAXED)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	if (st == &sg_legacy) {
		/* the legacy stream cannot be captured */
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNSUPPORTED;
	}
	if (st->cap) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EILLEGAL_STATE;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->body = calloc(1, sizeof(*c->body));
	if (!c || !c->body ||
	    !push((void ***)&c->members, &c->nmembers, &c->capmembers, st)) {
		if (c)
			free(c->body);
		free(c);
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ENOMEM;
	}
	c->id = ++next_id;
	c->mode = mode;
	c->tid = self_tid();
	c->origin = st;
	c->body->refs = 1;
	c->next = active;
	active = c;
	st->cap = c;
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_capture_end(void *stream, void **graph)
{
	struct stream *st;
	struct capture *c, **pp;
	struct graph *g = NULL;
	simgpu_status_t r = SIMGPU_OK;
	size_t i;

	simgpu_init();
	if (!graph)
		return SIMGPU_EINVAL;
	*graph = NULL;
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	c = st->cap;
	if (!c) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EILLEGAL_STATE;
	}
	if (c->origin != st) {
		sg_capture_invalidate(c);
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_UNMATCHED;
	}
	if (c->mode != MODE_RELAXED && c->tid != self_tid()) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ECAPTURE_WRONG_THREAD;
	}
	for (pp = &active; *pp && *pp != c; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = c->next;
	for (i = 0; i < c->nmembers; i++)
		c->members[i]->cap = NULL;
	if (c->invalidated) {
		r = SIMGPU_ECAPTURE_INVALIDATED;
		body_put(c->body);
	} else {
		g = calloc(1, sizeof(*g));
		if (!g) {
			body_put(c->body);
			r = SIMGPU_ENOMEM;
		} else {
			g->magic = GRAPH_MAGIC;
			g->body = c->body;
		}
	}
	free(c->members);
	free(c);
	pthread_mutex_unlock(&simgpu_lock);
	*graph = g;
	return r;
}

simgpu_status_t simgpu_capture_info(void *stream, int *status, uint64_t *id)
{
	struct stream *st;
	struct capture *c;
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	st = sg_stream_of(stream);
	if (!st) {
		r = SIMGPU_EHANDLE;
	} else if (st->cap) {
		*status = st->cap->invalidated ? 2 : 1;
		if (id)
			*id = st->cap->id;
	} else {
		*status = 0;
		if (id)
			*id = 0;
		if (st == &sg_legacy)
			for (c = active; c; c = c->next)
				if (has_blocking_member(c))
					r = SIMGPU_ECAPTURE_IMPLICIT;
	}
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

simgpu_status_t simgpu_capture_exchange_mode(int *mode)
{
	int old;

	if (!mode || *mode < MODE_GLOBAL || *mode > MODE_RELAXED)
		return SIMGPU_EINVAL;
	old = tl_mode;
	tl_mode = *mode;
	*mode = old;
	return SIMGPU_OK;
}

simgpu_status_t simgpu_capture_unsafe(void)
{
	simgpu_status_t r = SIMGPU_OK;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	if (sg_capture_forbids_unsafe())
		r = SIMGPU_ECAPTURE_UNSUPPORTED;
	pthread_mutex_unlock(&simgpu_lock);
	return r;
}

/* ---- public: graphs ---- */

static struct graph *graph_of(void *g, uint32_t magic)
{
	struct graph *gr = g;

	return gr && gr->magic == magic ? gr : NULL;
}

simgpu_status_t simgpu_graph_instantiate(void **exec, void *graph)
{
	struct graph *g, *x;

	simgpu_init();
	if (!exec)
		return SIMGPU_EINVAL;
	pthread_mutex_lock(&simgpu_lock);
	g = graph_of(graph, GRAPH_MAGIC);
	if (!g) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_ENOMEM;
	}
	x->magic = EXEC_MAGIC;
	x->body = g->body;
	x->body->refs++;
	pthread_mutex_unlock(&simgpu_lock);
	*exec = x;
	return SIMGPU_OK;
}

static void body_replay(struct gbody *b, void *stream)
{
	size_t i;

	for (i = 0; i < b->n; i++)
		b->nodes[i]->fn(b->nodes[i]->args, stream);
}

/* A graph launched inside a capture: the child graph is a node. */
static void child_replay(const void *args, void *stream)
{
	struct gbody *b = *(struct gbody *const *)args;

	body_replay(b, stream);
}

simgpu_status_t simgpu_graph_launch(void *exec, void *stream)
{
	struct graph *x;
	struct stream *st;
	struct gbody *b;
	int cap;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	x = graph_of(exec, EXEC_MAGIC);
	st = sg_stream_of(stream);
	if (!x || !st) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	b = x->body;
	cap = sg_capture_check_op(st);
	if (cap < 0) {
		pthread_mutex_unlock(&simgpu_lock);
		return (simgpu_status_t)-cap;
	}
	b->refs++;      /* held by the replay, or for good by the node */
	if (cap == 1) {
		simgpu_status_t r = sg_capture_add(st, "cudaGraphLaunch",
						   child_replay, &b, sizeof(b));

		pthread_mutex_unlock(&simgpu_lock);
		return r;
	}
	pthread_mutex_unlock(&simgpu_lock);
	body_replay(b, stream);
	pthread_mutex_lock(&simgpu_lock);
	body_put(b);
	pthread_mutex_unlock(&simgpu_lock);
	return SIMGPU_OK;
}

static simgpu_status_t destroy(void *h, uint32_t magic)
{
	struct graph *g;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	g = graph_of(h, magic);
	if (!g) {
		pthread_mutex_unlock(&simgpu_lock);
		return SIMGPU_EHANDLE;
	}
	g->magic = 0;
	body_put(g->body);
	pthread_mutex_unlock(&simgpu_lock);
	free(g);
	return SIMGPU_OK;
}

simgpu_status_t simgpu_graph_exec_destroy(void *exec)
{
	return destroy(exec, EXEC_MAGIC);
}

simgpu_status_t simgpu_graph_destroy(void *graph)
{
	return destroy(graph, GRAPH_MAGIC);
}

simgpu_status_t simgpu_graph_node_count(void *graph, size_t *n)
{
	struct graph *g;

	simgpu_init();
	pthread_mutex_lock(&simgpu_lock);
	g = graph_of(graph, GRAPH_MAGIC);
	if (g && n)
		*n = g->body->n;
	pthread_mutex_unlock(&simgpu_lock);
	return g ? SIMGPU_OK : SIMGPU_EHANDLE;
}
