/* policy/offload.c - which tensors to offload (vDNN §III-A/B/C, static policies).
 *
 * vDNN offloads a layer's input feature map X to host memory once forward
 * no longer needs it, and brings it back for the layer's backward pass:
 * X's reuse distance spans the whole rest of forward and the backward of
 * every later layer (vDNN Fig. 6).  Offloading may start only when the op
 * being issued is the last forward consumer of X (the Refcnt of Fig. 3);
 * here that is the tensor's last read before the forward/backward boundary.
 *
 *   vDNN-all   every tensor written in forward and read again in backward
 *              (POLICY_T_CROSS): the most memory-efficient choice;
 *   vDNN-conv  only those read as x by a forward convolution: conv layers
 *              run long enough to hide the copy (§III-C "Static vDNN").
 *
 *      forward:   #3 conv_fwd x=t2 ... (last forward read of t2)
 *                        \__ offload t2 after #3
 *      backward:  #40 conv_bwd_filter x=t2 (first backward read)
 *                        prefetch t2 before #38 (prefetch.c)
 *
 * Tensors of UNSTABLE or foreign allocations, and tensors whose move would
 * free fewer than min_bytes of device memory (biases, norms, scalars: a
 * copy costs more than it saves) are never chosen: what a move frees is
 * its own pages, whole - a 1.8 MB tensor alone in its 2 MiB page frees
 * the page - and a tensor that fills less than half of them is not
 * chosen either (a small tensor at a caching segment's tail page: the
 * plan would count a whole chunk for a sliver of data).  On a paged allocation only the tensor's own pages
 * move (policy_own_pages): a page it shares with a neighbour stays, since
 * the pool moves whole pages and the neighbour may be read meanwhile.
 * Whether an offload actually moves bytes is the runtime's call
 * (SuperNeurons' tensor cache: not while the budget holds).
 */
#include "policy/program.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int policy_offload_cmp(const void *a, const void *b)
{
	const policy_offload_t *x = a, *y = b;

	if (x->after_op != y->after_op)
		return x->after_op < y->after_op ? -1 : 1;
	return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* The read use of `op` that reads tensor t (edges are sorted by tensor). */
static int read_use(const policy_graph_t *g, int t, int op)
{
	int lo = 0, hi = g->nedges;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const policy_edge_t *e = &g->edges[mid];

		if (e->tensor < t || (e->tensor == t && e->op < op))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < g->nedges && g->edges[lo].tensor == t && g->edges[lo].op == op)
		return g->edges[lo].use;
	return -1;
}

int policy_offload_choose(const policy_graph_t *g, policy_offload_mode_t mode,
			  uint64_t min_bytes, policy_offloads_t *out)
{
	memset(out, 0, sizeof(*out));
	/* NONE, and DYN (dyn.c resolves it to a static mode first) */
	if ((mode != POLICY_OFFLOAD_ALL && mode != POLICY_OFFLOAD_CONV) || g->boundary >= g->nops)
		return 0;
	out->v = calloc((size_t)(g->ntensors ? g->ntensors : 1), sizeof(*out->v));
	if (!out->v)
		return -1;
	for (int t = 0; t < g->ntensors; t++) {
		const policy_tensor_t *T = &g->tensors[t];
		const policy_alloc_t *a = policy_graph_alloc(g, T->alloc_id);
		policy_offload_t *o;
		uint64_t lo, n, held;
		int after, use;

		if (!(T->flags & POLICY_T_CROSS) || !a ||
		    (a->cls != POLICY_ALLOC_STABLE && a->cls != POLICY_ALLOC_YOUNG))
			continue;
		if (mode == POLICY_OFFLOAD_CONV && !(T->flags & POLICY_T_CONV_IN))
			continue;
		after = T->last_fwd_read >= 0 ? T->last_fwd_read : T->producer;
		use = after == T->producer && T->last_fwd_read < 0 ? T->use : read_use(g, t, after);
		if (use < 0 || T->first_bwd_read <= after ||
		    !policy_move_pages(g, 0, t, use, after, &lo, &n, &held) || held < min_bytes ||
		    2 * n < held)
			continue;
		o = &out->v[out->n++];
		o->tensor = t;
		o->after_op = after;
		o->use = use;
		o->need_op = T->first_bwd_read;
		o->prefetch_op = -1;
		o->offset = lo;
		o->bytes = n;
		o->held = held;
	}
	if (out->n > 1)
		qsort(out->v, (size_t)out->n, sizeof(*out->v), policy_offload_cmp);
	return 0;
}

const char *policy_offload_name(policy_offload_mode_t m)
{
	switch (m) {
	case POLICY_OFFLOAD_NONE: return "none";
	case POLICY_OFFLOAD_ALL: return "all";
	case POLICY_OFFLOAD_CONV: return "conv";
	case POLICY_OFFLOAD_DYN: return "dyn";
	}
	return "?";
}

void policy_offloads_free(policy_offloads_t *o)
{
	free(o->v);
	memset(o, 0, sizeof(*o));
}

void policy_offloads_dump(const policy_graph_t *g, const policy_offloads_t *o,
			  policy_print_fn out, void *ctx)
{
	uint64_t total = 0;

	for (int i = 0; i < o->n; i++)
		total += o->v[i].bytes;
	policy_printf(out, ctx, "offload: %d tensors, %" PRIu64 " bytes (%d dropped: no time to come back)",
		      o->n, total, o->dropped);
	if (o->gaps.tried) {
		char line[256];

		policy_gaps_format(&o->gaps, line, sizeof(line));
		policy_printf(out, ctx, "%s (its own bytes %" PRIu64 ")", line, o->gaps.worst_own);
		if (!o->gaps.fits)
			policy_gaps_explain(g, o, o->gaps.worst_op, 8, out, ctx);
	}
	for (int i = 0; i < o->n; i++) {
		const policy_offload_t *x = &o->v[i];
		const policy_tensor_t *T = &g->tensors[x->tensor];

		policy_printf(out, ctx, "  t%d a%" PRIu64 "+0x%" PRIx64 "/%" PRIu64
			      " offload after #%d, prefetch before #%d%s%s, needed by #%d%s",
			      x->tensor, T->alloc_id, x->offset, x->bytes, x->after_op,
			      x->prefetch_op, x->fallback ? " (fallback)" : "",
			      x->wrap && x->prefetch_op <= x->after_op ? " (next iteration)" : "",
			      x->need_op, x->gap ? (x->wrap ? " (gap, next iteration)" : " (gap)") : "");
	}
}
