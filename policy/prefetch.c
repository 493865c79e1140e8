/* policy/prefetch.c - where to start bringing offloaded tensors back.
 *
 * vDNN (mode POLICY_PREFETCH_VDNN, §III-B, Fig. 10).  When the backward
 * computation of layer m starts, vDNN looks back through the layers before
 * m for the closest one whose X was offloaded and not yet prefetched, and
 * prefetches it so the copy overlaps layer m's backward work; the search
 * stops at the next CONV layer, so a prefetched X never waits long in
 * device memory.  On the op sequence of one iteration, backward runs the
 * layers in reverse, so "the layers before m, up to the next CONV" are the
 * backward ops after the current one, up to and including the next
 * convolution's backward op:
 *
 *     backward ops:   k (current)   k+1  k+2   k+3 conv_bwd   k+4 ...
 *                     \____________ search window ___________/
 *     at k: prefetch the offloaded tensor with the earliest first backward
 *     read inside the window (one per op, as vDNN's one per layer).
 *
 * A tensor the search never reaches (needed by the first backward ops, or
 * crowded out: one prefetch per op) is fetched just before the op before
 * its use (fallback).
 *
 * Timed (mode POLICY_PREFETCH_TIMED).  From measured op durations and the
 * link's bandwidth, each copy is started so that it ends just before its
 * first backward read.  Copies share one host-to-device stream, so they are
 * scheduled backwards from the last use: each ends at the earlier of its
 * need and the start of the copy after it, and is issued before the last
 * op that starts no later than the copy must:
 *
 *     ops:     | #30 | #31 |  #32  | #33 | #34 (needs t9) |
 *     link:          [------- copy t9 -------]
 *                    ^ issue before #31       ^ ends as #34 starts
 *
 * A copy may not start before its tensor was offloaded and copied out.  A
 * tensor whose round trip does not fit is not offloaded at all (dropped):
 * it would come back late, on the demand path, for nothing.  With a budget
 * for data in flight, a copy that would hold too many prefetched bytes at
 * once is started later.
 */
#include "policy/program.h"

#include <stdlib.h>
#include <string.h>

static bool is_conv_bwd(vmem_op_kind_t k)
{
	return k == VMEM_OP_CONV_BWD_DATA || k == VMEM_OP_CONV_BWD_FILTER;
}

static void place_vdnn(const policy_graph_t *g, policy_offloads_t *o)
{
	for (int k = g->boundary; k < g->nops; k++) {
		int win_end = g->nops - 1, best = -1;

		if (!vmem_op_is_compute(g->ops[k].kind))
			continue;
		for (int j = k + 1; j < g->nops; j++)
			if (is_conv_bwd(g->ops[j].kind)) {
				win_end = j;
				break;
			}
		for (int i = 0; i < o->n; i++) {
			const policy_offload_t *x = &o->v[i];

			if (x->prefetch_op >= 0 || x->need_op <= k || x->need_op > win_end ||
			    x->after_op >= k)
				continue;
			if (best < 0 || x->need_op < o->v[best].need_op)
				best = i;
		}
		if (best >= 0)
			o->v[best].prefetch_op = k;
	}
	for (int i = 0; i < o->n; i++) {
		policy_offload_t *x = &o->v[i];

		if (x->prefetch_op < 0) {
			int at = x->need_op - 1;

			x->prefetch_op = at > x->after_op ? at : x->need_op;
			x->fallback = true;
		}
	}
}

static int cmp_need_desc(const void *a, const void *b)
{
	const policy_offload_t *x = a, *y = b;

	if (x->need_op != y->need_op)
		return x->need_op > y->need_op ? -1 : 1;
	return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

uint64_t *policy_op_starts(const policy_graph_t *g, const policy_timing_t *t)
{
	uint64_t *at = malloc(((size_t)g->nops + 1) * sizeof(*at));
	uint64_t dflt = t->default_op_ns ? t->default_op_ns : 10000;

	if (!at)
		return NULL;
	at[0] = 0;
	for (int k = 0; k < g->nops; k++)
		at[k + 1] = at[k] + (g->ops[k].dur_ns ? g->ops[k].dur_ns : dflt);
	return at;
}

double policy_copy_ns(uint64_t bytes, uint64_t bytes_per_s)
{
	return (double)bytes / (double)(bytes_per_s ? bytes_per_s : POLICY_LINK_DEFAULT) * 1e9;
}

static int place_timed(const policy_graph_t *g, const policy_timing_t *t, policy_offloads_t *o)
{
	uint64_t *at = policy_op_starts(g, t);
	uint64_t d2h = t->d2h_bytes_per_s ? t->d2h_bytes_per_s : t->h2d_bytes_per_s;
	double link_free;
	int w = 0;

	if (!at)
		return -1;
	qsort(o->v, (size_t)o->n, sizeof(*o->v), cmp_need_desc);
	link_free = (double)at[g->nops];
	for (int i = 0; i < o->n; i++) {
		policy_offload_t *x = &o->v[i];
		/* the pool copies whole pages (policy_offload_held) */
		double copy = policy_copy_ns(policy_offload_held(x), t->h2d_bytes_per_s);
		double earliest = (double)at[x->after_op + 1] +
				  policy_copy_ns(policy_offload_held(x), d2h);
		double end = (double)at[x->need_op] < link_free ? (double)at[x->need_op] : link_free;
		double start = end - copy;
		int s = x->need_op;

		if (start < earliest) {
			o->dropped++;
			o->dropped_bytes += x->bytes;
			continue;
		}
		/* the last op that starts at or before `start`, after the offload */
		while (s > x->after_op + 1 && (double)at[s] > start)
			s--;
		x->prefetch_op = s;
		link_free = start;
		o->v[w++] = *x;
	}
	o->n = w;
	/* a budget for prefetched bytes held before their use */
	if (t->budget > 0) {
		for (int i = o->n - 1; i >= 0; i--) {   /* ascending need */
			policy_offload_t *x = &o->v[i];

			for (;;) {
				bool over = false;

				for (int k = x->prefetch_op; k < x->need_op && !over; k++) {
					uint64_t held = 0;

					for (int j = 0; j < o->n; j++)
						if (o->v[j].prefetch_op <= k && k < o->v[j].need_op)
							held += o->v[j].bytes;
					over = held > t->budget;
				}
				if (!over || x->prefetch_op >= x->need_op - 1)
					break;
				x->prefetch_op++;
			}
		}
	}
	qsort(o->v, (size_t)o->n, sizeof(*o->v), policy_offload_cmp);
	free(at);
	return 0;
}

int policy_prefetch_place(const policy_graph_t *g, policy_prefetch_mode_t mode,
			  const policy_timing_t *t, policy_offloads_t *o)
{
	static const policy_timing_t none = { 0 };

	for (int i = 0; i < o->n; i++) {
		o->v[i].prefetch_op = -1;
		o->v[i].fallback = false;
	}
	if (o->n == 0)
		return 0;
	if (mode == POLICY_PREFETCH_TIMED)
		return place_timed(g, t ? t : &none, o);
	place_vdnn(g, o);
	return 0;
}
