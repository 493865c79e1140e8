/* policy/graph.c - the layer dataflow graph of one steady iteration.
 *
 * Input: one repetition of the period (a window of the history) and the
 * repetition before it.  Output: the arrays of program.h.
 *
 *   ops      the calls in issue order, typed (kind, api, conv/GEMM/copy
 *            record, stream, thread, measured duration);
 *   uses     each op's ranges, allocation-relative, with their identity
 *            against the previous repetition (SAME / YOUNG / SOFT);
 *   tensors  versions of byte ranges: every write makes one, because a
 *            caching allocator reuses one block for many tensors in an
 *            iteration; a read sees, byte by byte, the last version written
 *            there (SuperNeurons §3.1's tensors, found from ranges instead
 *            of a framework's objects);
 *   edges    tensor -> reader op, with the bytes read;
 *   lanes    (thread, stream) pairs: PyTorch runs backward on its own thread;
 *   allocs   each allocation's behaviour across iterations.
 *
 * The iteration is cyclic: on an allocation that is the same every
 * iteration (STABLE), what the last writer of the iteration leaves is what
 * the next iteration's first readers see.  So the window is scanned twice:
 * the first scan only records the writers of STABLE allocations, the second
 * starts from that state and records edges.  A read before its producer
 * (in index order) is then an edge from the previous iteration:
 *
 *      #0 conv_fwd  x <- t7 (written by #45 sgd of the previous iteration)
 *      ...
 *      #45 launch sgd  w -> t7
 *
 * Fork and join counts are vDNN's Fig. 3 reference counts: a tensor's
 * refcnt is the number of distinct ops that read it (a fork when > 1), an
 * op's nin the number of distinct producer ops of what it reads (a join
 * when > 1).
 *
 * The forward/backward boundary is the first op on a thread other than the
 * iteration's first op's (PyTorch's autograd thread) when that comes no
 * later than the first backward kind (cuDNN's *_bwd); otherwise the op
 * after the last forward kind (conv/act/pool/softmax/bn forward) that
 * precedes the first backward kind; without either, there is none (nops).
 * Tensors written in forward and read again in backward are vDNN's offload
 * candidates (POLICY_T_CROSS).
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- an interval map: (key, [a, b)) -> value, disjoint per key ---- */

typedef struct {
	uint64_t key, a, b;
	int val;
} iv_t;

typedef struct {
	iv_t *v;
	int n, cap;
} imap_t;

/* First entry with (key, b) > (k, a): the first that can overlap [a, ...). */
static int imap_lower(const imap_t *m, uint64_t k, uint64_t a)
{
	int lo = 0, hi = m->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const iv_t *e = &m->v[mid];

		if (e->key < k || (e->key == k && e->b <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int imap_assign(imap_t *m, uint64_t k, uint64_t a, uint64_t b, int val)
{
	int lo = imap_lower(m, k, a), hi = lo;
	iv_t repl[3];
	int nr = 0;

	if (a >= b)
		return 0;
	while (hi < m->n && m->v[hi].key == k && m->v[hi].a < b)
		hi++;
	if (lo < hi && m->v[lo].a < a)
		repl[nr++] = (iv_t){ k, m->v[lo].a, a, m->v[lo].val };
	repl[nr++] = (iv_t){ k, a, b, val };
	if (lo < hi && m->v[hi - 1].b > b)
		repl[nr++] = (iv_t){ k, b, m->v[hi - 1].b, m->v[hi - 1].val };
	if (m->n - (hi - lo) + nr > m->cap) {
		int cap = m->cap ? m->cap * 2 : 64;
		iv_t *nv;

		while (cap < m->n - (hi - lo) + nr)
			cap *= 2;
		nv = realloc(m->v, (size_t)cap * sizeof(*nv));
		if (!nv)
			return -1;
		m->v = nv;
		m->cap = cap;
	}
	memmove(&m->v[lo + nr], &m->v[hi], (size_t)(m->n - hi) * sizeof(iv_t));
	memcpy(&m->v[lo], repl, (size_t)nr * sizeof(iv_t));
	m->n += nr - (hi - lo);
	return 0;
}

/* ---- building ---- */

typedef struct {
	policy_edge_t *v;
	int n, cap;
} edges_t;

static int edge_add(edges_t *e, int tensor, int op, int use, uint64_t bytes)
{
	/* an op reading one tensor through several ranges: one edge */
	for (int i = e->n - 1; i >= 0 && e->v[i].op == op; i--)
		if (e->v[i].tensor == tensor) {
			e->v[i].bytes += bytes;
			return 0;
		}
	if (e->n == e->cap) {
		int cap = e->cap ? e->cap * 2 : 256;
		policy_edge_t *nv = realloc(e->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return -1;
		e->v = nv;
		e->cap = cap;
	}
	e->v[e->n++] = (policy_edge_t){ tensor, op, use, bytes };
	return 0;
}

static int tensor_add(policy_graph_t *g, int *cap, const policy_tensor_t *t)
{
	if (g->ntensors == *cap) {
		int nc = *cap ? *cap * 2 : 256;
		policy_tensor_t *nv = realloc(g->tensors, (size_t)nc * sizeof(*nv));

		if (!nv)
			return -1;
		g->tensors = nv;
		*cap = nc;
	}
	g->tensors[g->ntensors] = *t;
	return g->ntensors++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_edge(const void *a, const void *b)
{
	const policy_edge_t *x = a, *y = b;

	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

const policy_alloc_t *policy_graph_alloc(const policy_graph_t *g, uint64_t alloc_id)
{
	int lo = 0, hi = g->nallocs;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (g->allocs[mid].alloc_id < alloc_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < g->nallocs && g->allocs[lo].alloc_id == alloc_id)
		return &g->allocs[lo];
	return NULL;
}

int policy_op_use_at(const policy_graph_t *g, int op, uint64_t alloc_id, uint64_t off,
		     uint64_t bytes)
{
	const policy_op_t *o = &g->ops[op];

	for (int i = o->use0; i < o->use0 + o->nuses; i++) {
		const policy_use_t *u = &g->uses[i];

		if (u->alloc_id == alloc_id && u->offset < off + bytes && off < u->offset + u->bytes)
			return i;
	}
	return -1;
}

void policy_graph_set_pages(policy_graph_t *g, uint64_t page_size, uint64_t small_threshold)
{
	bool on = page_size && small_threshold;

	g->page_size = on ? page_size : 0;
	for (int i = 0; i < g->nallocs; i++) {
		policy_alloc_t *a = &g->allocs[i];

		a->paged = on && a->alloc_id != 0 && a->cls != POLICY_ALLOC_FOREIGN &&
			   a->extent >= small_threshold;
	}
}

uint64_t policy_graph_page(const policy_graph_t *g, uint64_t alloc_id)
{
	const policy_alloc_t *a;

	if (!g->page_size || !(a = policy_graph_alloc(g, alloc_id)) || !a->paged)
		return 0;
	return g->page_size;
}

void policy_held_span(const policy_graph_t *g, uint64_t alloc_id, uint64_t *lo, uint64_t *hi)
{
	uint64_t page = policy_graph_page(g, alloc_id);

	if (!page || *hi <= *lo)
		return;
	*lo = *lo / page * page;
	*hi = (*hi + page - 1) / page * page;
}

bool policy_own_pages(const policy_graph_t *g, uint64_t page, uint64_t alloc_id, uint64_t off,
		      uint64_t bytes, uint64_t *lo, uint64_t *n, uint64_t *held)
{
	const policy_alloc_t *al = policy_graph_alloc(g, alloc_id);
	uint64_t own = policy_graph_page(g, alloc_id), a, b, end = off + bytes;

	if (own)
		page = own;
	if (!page) {
		*lo = off;
		*n = *held = bytes;
		return bytes > 0;
	}
	a = (off + page - 1) / page * page;
	b = own && al && end >= al->extent ? end : end / page * page;
	if (b <= a)
		return false;
	*lo = a;
	*n = b - a;
	*held = (b + page - 1) / page * page - a;
	return true;
}

static bool covers_range(const policy_use_t *u, uint64_t alloc_id, uint64_t off, uint64_t bytes)
{
	return u->alloc_id == alloc_id && u->offset <= off && off + bytes <= u->offset + u->bytes;
}

int policy_cover_use(const policy_graph_t *g, int u, uint64_t off, uint64_t bytes, int j,
		     bool *prev)
{
	const policy_use_t *U = &g->uses[u];
	const policy_alloc_t *a = policy_graph_alloc(g, U->alloc_id);
	bool stable = a && a->cls == POLICY_ALLOC_STABLE;

	*prev = false;
	if (covers_range(U, U->alloc_id, off, bytes))
		return u;
	for (int n = 0, o = j; n < g->nops && (stable || o <= j); n++, o = o ? o - 1 : g->nops - 1) {
		const policy_op_t *op = &g->ops[o];

		for (int i = op->use0; i < op->use0 + op->nuses; i++)
			if (covers_range(&g->uses[i], U->alloc_id, off, bytes)) {
				*prev = o > j;
				return i;
			}
	}
	return -1;
}

bool policy_move_pages(const policy_graph_t *g, uint64_t page, int t, int u, int j, uint64_t *lo,
		       uint64_t *n, uint64_t *held)
{
	const policy_tensor_t *T = &g->tensors[t];
	const policy_use_t *U = &g->uses[u];
	uint64_t a, b;
	bool prev;

	if (U->alloc_id != T->alloc_id)
		return false;
	if (policy_own_pages(g, page, T->alloc_id, T->offset, T->bytes, lo, n, held) &&
	    policy_cover_use(g, u, *lo, *n, j, &prev) >= 0)
		return true;
	a = T->offset > U->offset ? T->offset : U->offset;
	b = T->offset + T->bytes < U->offset + U->bytes ? T->offset + T->bytes : U->offset + U->bytes;
	return b > a && policy_own_pages(g, page, T->alloc_id, a, b - a, lo, n, held);
}

/* Where a use lives in the interval map: foreign ranges by address. */
static void use_key(const policy_use_t *u, uint64_t *k, uint64_t *a, uint64_t *b)
{
	*k = u->alloc_id;
	*a = u->alloc_id ? u->offset : (uint64_t)u->ptr;
	*b = *a + u->bytes;
}

static int build_ops(policy_graph_t *g, const policy_history_t *h, uint64_t first, uint32_t p,
		     uint32_t rot)
{
	int nuses = 0;

	for (uint32_t k = 0; k < p; k++) {
		const policy_hev_t *e = policy_history_at(h, first + (rot + k) % p);

		if (!e || !policy_history_at(h, first + (rot + k) % p - p))
			return -1;
		nuses += (int)e->nranges;
	}
	g->nops = (int)p;
	g->ops = calloc(p, sizeof(*g->ops));
	g->uses = calloc(nuses ? (size_t)nuses : 1, sizeof(*g->uses));
	if (!g->ops || !g->uses)
		return -1;
	for (uint32_t k = 0; k < p; k++) {
		uint64_t pos = first + (rot + k) % p;
		const policy_hev_t *e = policy_history_at(h, pos);
		const policy_hev_t *then = policy_history_at(h, pos - p);
		const policy_hev_t *before = pos >= 2 * (uint64_t)p ?
			policy_history_at(h, pos - 2 * (uint64_t)p) : NULL;
		uint64_t wm_then = before ? before->watermark :
			(pos >= 2 * (uint64_t)p ? UINT64_MAX : 0);
		policy_op_t *o = &g->ops[k];

		if (!before && pos >= 2 * (uint64_t)p) {
			const policy_hev_t *oldest = policy_history_at(h, h->head);
			wm_then = oldest ? oldest->watermark : UINT64_MAX;
		}
		o->kind = e->kind;
		o->api = e->api;
		o->stream = e->stream;
		o->thread = e->thread;
		o->info = e->info;
		o->seq = e->seq;
		o->hash = e->hash;
		o->dur_ns = e->dur_ns ? e->dur_ns : then->dur_ns;
		o->sync_before = (e->flags & POLICY_HEV_SYNC_BEFORE) != 0;
		o->use0 = g->nuses;
		o->nuses = (int)e->nranges;
		for (uint32_t j = 0; j < e->nranges; j++) {
			const vmem_range_t *r = policy_history_range(h, e, j);
			policy_use_t *u = &g->uses[g->nuses++];

			u->op = (int)k;
			u->ref = (int)j;
			u->alloc_id = r->alloc_id;
			u->offset = r->offset;
			u->bytes = r->bytes;
			u->ptr = r->ptr;
			u->access = r->access;
			u->role = r->role;
			u->tensor = -1;
			u->ident = j < then->nranges ?
				(uint8_t)policy_range_ident(r, policy_history_range(h, then, j),
							    then->watermark, wm_then) :
				POLICY_ID_SOFT;
		}
	}
	return 0;
}

static int build_lanes(policy_graph_t *g)
{
	g->lanes = calloc((size_t)g->nops, sizeof(*g->lanes));
	if (!g->lanes && g->nops)
		return -1;
	for (int k = 0; k < g->nops; k++) {
		policy_op_t *o = &g->ops[k];
		int l;

		for (l = 0; l < g->nlanes; l++)
			if (g->lanes[l].thread == o->thread && g->lanes[l].stream == o->stream)
				break;
		if (l == g->nlanes) {
			g->lanes[l].thread = o->thread;
			g->lanes[l].stream = o->stream;
			g->nlanes++;
		}
		o->lane = l;
		g->lanes[l].nops++;
	}
	for (int l = 0; l < g->nlanes; l++) {
		g->lanes[l].ops = malloc((size_t)g->lanes[l].nops * sizeof(int));
		if (!g->lanes[l].ops)
			return -1;
		g->lanes[l].nops = 0;
	}
	for (int k = 0; k < g->nops; k++) {
		policy_lane_t *ln = &g->lanes[g->ops[k].lane];
		ln->ops[ln->nops++] = k;
	}
	return 0;
}

static int build_allocs(policy_graph_t *g)
{
	uint64_t *ids = malloc((size_t)(g->nuses ? g->nuses : 1) * sizeof(*ids));
	uint8_t *seen;
	int n = 0;

	if (!ids)
		return -1;
	for (int i = 0; i < g->nuses; i++)
		ids[i] = g->uses[i].alloc_id;
	if (g->nuses > 1)
		qsort(ids, (size_t)g->nuses, sizeof(*ids), cmp_u64);
	for (int i = 0; i < g->nuses; i++)
		if (i == 0 || ids[i] != ids[i - 1])
			ids[n++] = ids[i];
	g->allocs = calloc(n ? (size_t)n : 1, sizeof(*g->allocs));
	seen = calloc(n ? (size_t)n : 1, 1);
	if (!g->allocs || !seen) {
		free(ids);
		free(seen);
		return -1;
	}
	g->nallocs = n;
	for (int i = 0; i < n; i++)
		g->allocs[i].alloc_id = ids[i];
	free(ids);
	for (int i = 0; i < g->nuses; i++) {
		const policy_use_t *u = &g->uses[i];
		policy_alloc_t *a = (policy_alloc_t *)policy_graph_alloc(g, u->alloc_id);
		int ai = (int)(a - g->allocs);

		seen[ai] |= (uint8_t)(1u << u->ident);
		if (u->offset + u->bytes > a->extent)
			a->extent = u->offset + u->bytes;
	}
	for (int i = 0; i < n; i++) {
		policy_alloc_t *a = &g->allocs[i];
		uint8_t s = seen[i];

		if (a->alloc_id == 0)
			a->cls = POLICY_ALLOC_FOREIGN;
		else if (s & (1u << POLICY_ID_SOFT))
			a->cls = POLICY_ALLOC_UNSTABLE;
		else if ((s & (1u << POLICY_ID_YOUNG)) && (s & (1u << POLICY_ID_SAME)))
			a->cls = POLICY_ALLOC_UNSTABLE;
		else if (s & (1u << POLICY_ID_YOUNG))
			a->cls = POLICY_ALLOC_YOUNG;
		else
			a->cls = POLICY_ALLOC_STABLE;
	}
	free(seen);
	return 0;
}

static int cmp_hfree(const void *x, const void *y)
{
	const policy_hfree_t *a = x, *b = y;

	return a->alloc_id < b->alloc_id ? -1 : a->alloc_id > b->alloc_id;
}

/* Where alloc_id was freed, from frees sorted by id; UINT64_MAX: not. */
static uint64_t free_pos(const policy_hfree_t *v, size_t n, uint64_t alloc_id)
{
	policy_hfree_t key = { alloc_id, 0 };
	const policy_hfree_t *f = n ? bsearch(&key, v, n, sizeof(*v), cmp_hfree) : NULL;

	return f ? f->pos : UINT64_MAX;
}

/* Where each YOUNG allocation was freed, in op positions.  The graph's
 * op k is the event at history position first + (rot + k) % p: ops from
 * p - rot on stand for the iteration's last calls with the events one
 * period before them, whose allocations are the previous iteration's.  A
 * free counts only inside the window the events came from, (first,
 * first + p], and only after every use the graph gives the allocation,
 * both in history order and in op order: an allocation that lives across
 * the rotation point (the same memory under two graph ids) is left
 * without one, the safe side. */
static void find_frees(policy_graph_t *g, const policy_history_t *h, uint64_t first, uint32_t p,
		       uint32_t rot)
{
	uint64_t *fpos = malloc((size_t)(g->nallocs ? g->nallocs : 1) * sizeof(*fpos));
	policy_hfree_t *byid = malloc((h->nfrees ? h->nfrees : 1) * sizeof(*byid));

	if (!byid) {
		free(fpos);
		fpos = NULL;   /* no memory: no frees, the safe side */
	} else if (h->nfrees) {
		memcpy(byid, h->frees, h->nfrees * sizeof(*byid));
		qsort(byid, h->nfrees, sizeof(*byid), cmp_hfree);   /* ids are never reused */
	}
	for (int i = 0; i < g->nallocs; i++) {
		policy_alloc_t *a = &g->allocs[i];
		uint64_t f = fpos && a->cls == POLICY_ALLOC_YOUNG ?
			free_pos(byid, h->nfrees, a->alloc_id) : UINT64_MAX;
		int64_t c = (int64_t)(f - first) - (int64_t)rot;

		a->free_op = -1;
		if (fpos)
			fpos[i] = f;
		if (f == UINT64_MAX || f <= first || f > first + p)
			continue;
		a->free_op = (int)(c <= 0 ? c + (int64_t)p : c);
	}
	for (int i = 0; fpos && i < g->nuses; i++) {
		const policy_use_t *u = &g->uses[i];
		policy_alloc_t *a = (policy_alloc_t *)policy_graph_alloc(g, u->alloc_id);
		uint64_t pos = first + (rot + (uint32_t)u->op) % p;

		if (a && a->free_op >= 0 && (u->op >= a->free_op || pos >= fpos[a - g->allocs]))
			a->free_op = -1;
	}
	free(fpos);
	free(byid);
}

static bool stable(const policy_graph_t *g, uint64_t alloc_id)
{
	const policy_alloc_t *a = policy_graph_alloc(g, alloc_id);

	return a && a->cls == POLICY_ALLOC_STABLE;
}

static int build_tensors(policy_graph_t *g)
{
	imap_t m = { 0 };
	edges_t ed = { 0 };
	int cap = 0, rc = -1;

	/* one version per write use, in issue order */
	for (int i = 0; i < g->nuses; i++) {
		policy_use_t *u = &g->uses[i];
		policy_tensor_t t = { 0 };

		if (!(u->access & VMEM_ACCESS_W))
			continue;
		t.producer = u->op;
		t.use = i;
		t.alloc_id = u->alloc_id;
		t.offset = u->alloc_id ? u->offset : (uint64_t)u->ptr;
		t.bytes = u->bytes;
		t.first_read = t.last_read = t.last_fwd_read = t.first_bwd_read = -1;
		t.first_bwd_use = -1;
		if ((u->tensor = tensor_add(g, &cap, &t)) < 0)
			goto out;
	}
	/* scan 1: the state the previous iteration leaves on STABLE allocations */
	for (int i = 0; i < g->nuses; i++) {
		const policy_use_t *u = &g->uses[i];
		uint64_t k, a, b;

		if (u->tensor < 0 || !stable(g, u->alloc_id))
			continue;
		use_key(u, &k, &a, &b);
		if (imap_assign(&m, k, a, b, u->tensor) < 0)
			goto out;
	}
	/* scan 2: reads see the last version; each op's reads before its writes */
	for (int op = 0; op < g->nops; op++) {
		const policy_op_t *o = &g->ops[op];

		for (int i = o->use0; i < o->use0 + o->nuses; i++) {
			const policy_use_t *u = &g->uses[i];
			uint64_t k, a, b, at;
			int x;

			if (!(u->access & VMEM_ACCESS_R) || u->bytes == 0)
				continue;
			use_key(u, &k, &a, &b);
			at = a;
			x = imap_lower(&m, k, a);
			while (at < b) {
				const iv_t *e = x < m.n ? &m.v[x] : NULL;
				uint64_t gap_end = (e && e->key == k && e->a < b) ? e->a : b;

				if (at < gap_end) {
					/* bytes nobody wrote: a live-in version */
					policy_tensor_t t = { 0 };
					int id;

					t.producer = -1;
					t.use = -1;
					t.alloc_id = k;
					t.offset = at;
					t.bytes = gap_end - at;
					t.flags = POLICY_T_LIVE_IN;
					t.first_read = t.last_read = t.last_fwd_read = -1;
					t.first_bwd_read = t.first_bwd_use = -1;
					if ((id = tensor_add(g, &cap, &t)) < 0 ||
					    imap_assign(&m, k, at, gap_end, id) < 0 ||
					    edge_add(&ed, id, op, i, gap_end - at) < 0)
						goto out;
					at = gap_end;
					x = imap_lower(&m, k, at);
					continue;
				}
				{
					uint64_t end = e->b < b ? e->b : b;

					if (edge_add(&ed, e->val, op, i, end - at) < 0)
						goto out;
					at = end;
					x++;
				}
			}
		}
		for (int i = o->use0; i < o->use0 + o->nuses; i++) {
			const policy_use_t *u = &g->uses[i];
			uint64_t k, a, b;

			if (u->tensor < 0)
				continue;
			use_key(u, &k, &a, &b);
			if (imap_assign(&m, k, a, b, u->tensor) < 0)
				goto out;
		}
	}
	if (ed.n > 1)
		qsort(ed.v, (size_t)ed.n, sizeof(*ed.v), cmp_edge);
	g->edges = ed.v;
	g->nedges = ed.n;
	ed.v = NULL;
	rc = 0;
out:
	free(m.v);
	free(ed.v);
	return rc;
}

static bool forward_kind(vmem_op_kind_t k)
{
	return k == VMEM_OP_CONV_FWD || k == VMEM_OP_ACT_FWD || k == VMEM_OP_POOL_FWD ||
	       k == VMEM_OP_SOFTMAX_FWD || k == VMEM_OP_BN_FWD_TRAIN || k == VMEM_OP_BN_FWD_INFER;
}

/* The thread switch says it when backward has its own thread (PyTorch's
 * autograd engine) and it comes no later than the first backward kind;
 * otherwise backward starts after the last forward-kind op that precedes
 * the first backward kind (a loss kernel or a classifier's GEMMs between
 * them are backward already). */
static void find_boundary(policy_graph_t *g)
{
	int kb = -1, tb = -1;

	g->boundary = g->nops;
	for (int k = 0; k < g->nops; k++)
		if (vmem_op_is_backward(g->ops[k].kind)) {
			kb = k;
			break;
		}
	for (int k = 1; k < g->nops; k++)
		if (g->ops[k].thread != g->ops[0].thread) {
			tb = k;
			break;
		}
	if (tb >= 0 && (kb < 0 || tb <= kb)) {
		g->boundary = tb;
	} else if (kb >= 0) {
		g->boundary = kb;
		for (int k = kb - 1; k >= 0; k--)
			if (forward_kind(g->ops[k].kind)) {
				g->boundary = k + 1;
				break;
			}
	}
	for (int k = 0; k < g->nops; k++)
		g->ops[k].phase = k < g->boundary ? POLICY_PHASE_FWD : POLICY_PHASE_BWD;
}

static int cmp_pair(const void *a, const void *b)
{
	const int *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

static int tensor_stats(policy_graph_t *g)
{
	int p = g->nops;
	int *pairs;
	int n = 0;

	for (int e = 0; e < g->nedges;) {
		int t = g->edges[e].tensor;
		policy_tensor_t *T = &g->tensors[t];
		int P = T->producer;
		int best_first = -1, best_last = -1;

		for (; e < g->nedges && g->edges[e].tensor == t; e++) {
			const policy_edge_t *ed = &g->edges[e];
			/* cyclic order after the producer: a read at or before it is
			 * the next iteration's read of this version */
			int key = P < 0 ? ed->op + 1 : (ed->op > P ? ed->op - P : ed->op + p - P);
			bool same_iter = P < 0 || ed->op > P;

			T->nreads++;
			T->refcnt++;   /* edges are per (tensor, op) */
			if (best_first < 0 || key < best_first) {
				best_first = key;
				T->first_read = ed->op;
			}
			if (best_last < 0 || key > best_last) {
				best_last = key;
				T->last_read = ed->op;
				T->last_read_next = !same_iter;
			}
			if (same_iter && ed->op < g->boundary &&
			    (T->last_fwd_read < 0 || ed->op > T->last_fwd_read))
				T->last_fwd_read = ed->op;
			if (same_iter && ed->op >= g->boundary &&
			    (T->first_bwd_read < 0 || ed->op < T->first_bwd_read)) {
				T->first_bwd_read = ed->op;
				T->first_bwd_use = ed->use;
			}
			if (g->ops[ed->op].kind == VMEM_OP_CONV_FWD) {
				const char *role = g->uses[ed->use].role;
				if (role && strcmp(role, "x") == 0)
					T->flags |= POLICY_T_CONV_IN;
			}
		}
		if (P >= 0 && P < g->boundary && T->first_bwd_read >= 0)
			T->flags |= POLICY_T_CROSS;
	}
	/* joins: distinct producer ops of what each op reads */
	pairs = malloc((size_t)(g->nedges > 0 ? g->nedges : 1) * 2 * sizeof(int));
	if (!pairs)
		return -1;
	for (int e = 0; e < g->nedges; e++) {
		int P = g->tensors[g->edges[e].tensor].producer;

		if (P < 0 || P == g->edges[e].op)
			continue;
		pairs[2 * n] = g->edges[e].op;
		pairs[2 * n + 1] = P;
		n++;
	}
	if (n > 1)
		qsort(pairs, (size_t)n, 2 * sizeof(int), cmp_pair);
	for (int i = 0; i < n; i++)
		if (i == 0 || pairs[2 * i] != pairs[2 * i - 2] || pairs[2 * i + 1] != pairs[2 * i - 1])
			g->ops[pairs[2 * i]].nin++;
	free(pairs);
	return 0;
}

int policy_graph_build(policy_graph_t *g, const policy_history_t *h, uint64_t first,
		       uint32_t p, uint32_t rot)
{
	memset(g, 0, sizeof(*g));
	if (p == 0 || first < p || build_ops(g, h, first, p, rot % p) < 0 || build_lanes(g) < 0 ||
	    build_allocs(g) < 0 || build_tensors(g) < 0) {
		policy_graph_free(g);
		return -1;
	}
	find_frees(g, h, first, p, rot % p);
	find_boundary(g);
	if (tensor_stats(g) < 0) {
		policy_graph_free(g);
		return -1;
	}
	for (int k = 0; k < g->nops; k++)
		g->iter_ns += g->ops[k].dur_ns;
	return 0;
}

void policy_graph_free(policy_graph_t *g)
{
	free(g->ops);
	free(g->uses);
	free(g->tensors);
	free(g->edges);
	for (int l = 0; l < g->nlanes; l++)
		free(g->lanes[l].ops);
	free(g->lanes);
	free(g->allocs);
	memset(g, 0, sizeof(*g));
}

/* ---- printing ---- */

void policy_op_label(const policy_graph_t *g, int op, char *buf, size_t len)
{
	if (op < 0 || op >= g->nops) {
		snprintf(buf, len, "#%d (none)", op);
		return;
	}
	snprintf(buf, len, "#%d %s (%s)", op, vmem_op_name(g->ops[op].kind),
		 g->ops[op].api ? g->ops[op].api : "?");
}

static const char *const alloc_cls_name[] = { "stable", "young", "unstable", "foreign" };
static const char *const ident_name[] = { "same", "young", "soft" };

static void info_text(const vmem_op_info_t *in, char *buf, size_t len)
{
	buf[0] = '\0';
	switch (in->type) {
	case VMEM_INFO_CONV: {
		const vmem_conv_info_t *c = &in->u.conv;
		snprintf(buf, len,
			 " n=%d c=%d h=%d w=%d k=%d r=%d s=%d stride=%d,%d pad=%d,%d dil=%d,%d g=%d algo=%d ws=%" PRIu64 " %s",
			 c->n, c->c, c->h, c->w, c->k, c->r, c->s, c->stride[0], c->stride[1],
			 c->pad[0], c->pad[1], c->dilation[0], c->dilation[1], c->groups, c->algo,
			 c->workspace, vmem_dtype_name((vmem_dtype_t)c->dtype));
		break;
	}
	case VMEM_INFO_GEMM: {
		const vmem_gemm_info_t *m = &in->u.gemm;
		snprintf(buf, len, " m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " batch=%" PRId64
			 " t=%u%u %s",
			 m->m, m->n, m->k, m->batch, m->transa, m->transb,
			 vmem_dtype_name((vmem_dtype_t)m->atype));
		break;
	}
	case VMEM_INFO_COPY:
		if (in->u.copy.kind == VMEM_COPY_SET)
			snprintf(buf, len, " bytes=%" PRIu64 " set", in->u.copy.bytes);
		else
			snprintf(buf, len, " bytes=%" PRIu64 " kind=%u", in->u.copy.bytes,
				 in->u.copy.kind);
		break;
	case VMEM_INFO_LAUNCH:
		snprintf(buf, len, " func=0x%" PRIxPTR " grid=%u,%u,%u block=%u,%u,%u",
			 in->u.launch.func, in->u.launch.grid[0], in->u.launch.grid[1],
			 in->u.launch.grid[2], in->u.launch.block[0], in->u.launch.block[1],
			 in->u.launch.block[2]);
		break;
	default:
		break;
	}
}

void policy_graph_dump(const policy_graph_t *g, policy_print_fn out, void *ctx)
{
	int live_in = 0, cross = 0;
	char info[256];

	for (int t = 0; t < g->ntensors; t++) {
		live_in += (g->tensors[t].flags & POLICY_T_LIVE_IN) != 0;
		cross += (g->tensors[t].flags & POLICY_T_CROSS) != 0;
	}
	policy_printf(out, ctx,
		      "graph: %d ops, %d uses, %d tensors (%d live-in, %d cross fwd/bwd), %d edges, %d lanes; boundary #%d",
		      g->nops, g->nuses, g->ntensors, live_in, cross, g->nedges, g->nlanes,
		      g->boundary);
	for (int l = 0; l < g->nlanes; l++)
		policy_printf(out, ctx, "lane %d: thread %" PRIu64 " stream 0x%" PRIxPTR ", %d ops", l,
			      g->lanes[l].thread, g->lanes[l].stream, g->lanes[l].nops);
	for (int a = 0; a < g->nallocs; a++)
		policy_printf(out, ctx, "alloc %" PRIu64 ": %s, extent %" PRIu64, g->allocs[a].alloc_id,
			      alloc_cls_name[g->allocs[a].cls], g->allocs[a].extent);
	for (int k = 0; k < g->nops; k++) {
		const policy_op_t *o = &g->ops[k];

		info_text(&o->info, info, sizeof(info));
		policy_printf(out, ctx, "op #%d %s %s %s%s lane %d nin %d dur %" PRIu64, k,
			      o->phase == POLICY_PHASE_FWD ? "fwd" : "bwd", vmem_op_name(o->kind),
			      o->api ? o->api : "?", info, o->lane, o->nin, o->dur_ns);
		for (int i = o->use0; i < o->use0 + o->nuses; i++) {
			const policy_use_t *u = &g->uses[i];

			if (u->tensor >= 0)
				policy_printf(out, ctx, "  %s a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64 " %s %s -> t%d",
					      u->role ? u->role : "?", u->alloc_id, u->offset, u->bytes,
					      vmem_access_name(u->access), ident_name[u->ident], u->tensor);
			else
				policy_printf(out, ctx, "  %s a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64 " %s %s",
					      u->role ? u->role : "?", u->alloc_id, u->offset, u->bytes,
					      vmem_access_name(u->access), ident_name[u->ident]);
		}
	}
	for (int t = 0; t < g->ntensors; t++) {
		const policy_tensor_t *T = &g->tensors[t];
		char prod[32];

		if (T->producer >= 0)
			snprintf(prod, sizeof(prod), "#%d", T->producer);
		else
			snprintf(prod, sizeof(prod), "live-in");
		policy_printf(out, ctx,
			      "tensor t%d a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64 " by %s: reads %d refcnt %d first #%d last #%d%s fwd-last #%d bwd-first #%d%s%s",
			      t, T->alloc_id, T->offset, T->bytes, prod, T->nreads, T->refcnt,
			      T->first_read, T->last_read, T->last_read_next ? " (next iter)" : "",
			      T->last_fwd_read, T->first_bwd_read,
			      (T->flags & POLICY_T_CROSS) ? " cross" : "",
			      (T->flags & POLICY_T_CONV_IN) ? " conv-in" : "");
	}
}
