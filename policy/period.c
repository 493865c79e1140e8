/* policy/period.c - finding the training iteration in the event stream.
 *
 * Training is periodic once warm: the same calls, on the same shapes, in
 * the same order, every iteration.  The first iterations differ (cuDNN's
 * algorithm search, optimizer state created lazily, a caching allocator
 * still growing), an evaluation pass or a new batch size breaks the
 * pattern, and a few calls may move (a caching allocator placing a small
 * block elsewhere, double-buffered inputs).  The detector sees only the
 * events, online, one at a time:
 *
 *      position:  ... i-2p ........ i-p ......... i
 *                      |  rep k-1    |   rep k    |
 *      run(p):   number of consecutive i with  event(i) ~ event(i - p)
 *
 *  - Candidate periods come from the data: when an event's weak signature
 *    was last seen d positions ago, d becomes a candidate (an op that runs
 *    once per iteration recurs at exactly the period); so does the distance
 *    back to each of the last 8 events that followed a host synchronisation
 *    (a training loop that reads its loss synchronises once per iteration,
 *    which finds the period even when every op repeats inside it).  At most
 *    max_candidates are tracked; a new one replaces the one with the
 *    shortest run.
 *  - For each candidate p the run of consecutive positions with equal weak
 *    signatures one period apart is counted.  Along the run, positions whose
 *    ranges moved (policy_range_ident says SOFT: a different old allocation
 *    or offset) are counted too -- unless the move is a caching allocator
 *    placing a fresh tensor elsewhere: a moved range that is only written,
 *    or that is read after this period wrote it (BatchNorm's saved mean,
 *    written in forward and read in backward, lands on another small block
 *    every iteration), carries nothing from before and does not count.
 *  - A candidate is confirmed when its run covers `reps` repetitions
 *    (run >= (reps - 1) * p: the pattern seen, seen again, and confirmed on
 *    the next occurrence) with at most soft_permille soft positions.  The
 *    soft count is what tells a training iteration from a stage of
 *    identical blocks inside one iteration (ResNet's bottlenecks, VGG's
 *    conv stacks): between two identical blocks every weight differs, so
 *    nearly every position is soft; between two iterations nearly none is
 *    (the weights are the same allocations, and fresh per-iteration tensors
 *    compare as YOUNG).
 *  - Among candidates confirmed by the same event the shortest period wins
 *    (a multiple of the period confirms later, never earlier) - unless
 *    its plans were abandoned twice in a row: then it is a stage inside
 *    the iteration that the soft count let through (identical blocks
 *    whose tensors are all fresh but for one weight read in six:
 *    DenseNet's dense layers under a per-tensor allocator), planned,
 *    left and planned again at every iteration, and the longer period
 *    wins (policy_period_abandoned).  A plan made keeps the longer
 *    candidates counting (policy_period_keep_longer), so the iteration's
 *    period is not started over at every plan of the stage.  A period
 *    without a single compute op (a framework's loop of small memsets while
 *    it initialises) is dropped, and so is one whose every call repeats the
 *    call fewer than min_period back: a loop of one kernel (DenseNet's
 *    channel slices, dozens in a row), which periods 6, 7 and 8 all match,
 *    planned, left and planned again in every iteration.
 *
 * Cost per event: one hash lookup and max_candidates comparisons of two
 * 64-bit hashes (ranges are compared only when the hashes agree).
 */
#include "policy/program.h"

#include <stdlib.h>
#include <string.h>

int policy_period_init(policy_period_t *d, const policy_period_config_t *cfg)
{
	uint64_t n = 1;

	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	if (d->cfg.min_period < 1)
		d->cfg.min_period = 1;
	if (d->cfg.max_period < d->cfg.min_period)
		d->cfg.max_period = d->cfg.min_period;
	if (d->cfg.reps < 2)
		d->cfg.reps = 2;
	if (d->cfg.max_candidates < 1)
		d->cfg.max_candidates = 1;
	while (n < 4 * (uint64_t)d->cfg.max_period && n < ((uint64_t)1 << 20))
		n <<= 1;
	d->cand = calloc(d->cfg.max_candidates, sizeof(*d->cand));
	d->last = calloc(n, sizeof(*d->last));
	d->wrote = calloc(n, sizeof(*d->wrote));
	if (!d->cand || !d->last || !d->wrote) {
		policy_period_free(d);
		return -1;
	}
	d->last_mask = n - 1;
	return 0;
}

void policy_period_free(policy_period_t *d)
{
	free(d->cand);
	free(d->last);
	free(d->wrote);
	memset(d, 0, sizeof(*d));
}

void policy_period_reset(policy_period_t *d)
{
	d->ncand = 0;
}

void policy_period_abandoned(policy_period_t *d, uint32_t p)
{
	if (d->last_abandoned == p)
		d->abandoned = p;
	d->last_abandoned = p;
}

void policy_period_keep_longer(policy_period_t *d, uint32_t p)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < d->ncand; c++)
		if (d->cand[c].p > p)
			d->cand[n++] = d->cand[c];
	d->ncand = n;
}

static uint64_t wm_at(const policy_history_t *h, int64_t pos)
{
	const policy_hev_t *e;

	if (pos < 0)
		return 0;
	e = policy_history_at(h, (uint64_t)pos);
	if (e)
		return e->watermark;
	/* dropped: the oldest held is a later, higher watermark (stricter) */
	e = policy_history_at(h, h->head);
	return e ? e->watermark : 0;
}

static uint64_t range_slot(const policy_period_t *d, uint64_t alloc_id, uint64_t offset)
{
	return ((alloc_id * 0x9e3779b97f4a7c15ull) ^ (offset * 0xc2b2ae3d27d4eb4full)) >> 7 &
	       d->last_mask;
}

/* True when range r of the event at i was written within the last p
 * positions (a fresh tensor, wherever the allocator put it). */
static bool fresh(const policy_period_t *d, const vmem_range_t *r, uint64_t i, uint32_t p)
{
	uint64_t s;

	if (!(r->access & VMEM_ACCESS_R))
		return true;
	if (r->alloc_id == 0)
		return false;
	s = range_slot(d, r->alloc_id, r->offset);
	return d->wrote[s].alloc_id == r->alloc_id && d->wrote[s].offset == r->offset &&
	       d->wrote[s].pos + p > i && d->wrote[s].pos < i;
}

/* Of two periods confirmed on one event, is p the one to report rather
 * than q?  The shorter (a multiple of the period confirms with it), unless
 * it is the period of the plan last abandoned. */
static bool better_hit(const policy_period_t *d, uint32_t p, uint32_t q)
{
	if (d->abandoned && (p == d->abandoned) != (q == d->abandoned))
		return q == d->abandoned;
	return p < q;
}

/* 0: different; 1: equal; 2: equal with a soft identity. */
static int compare(const policy_period_t *d, const policy_history_t *h, uint64_t i, uint32_t p)
{
	const policy_hev_t *a = policy_history_at(h, i);
	const policy_hev_t *b = policy_history_at(h, i - p);
	uint64_t wm_a, wm_b;

	if (!a || !b || !policy_hev_weak_equal(h, a, b))
		return 0;
	if (a->nranges != b->nranges)
		return 2;   /* a launch whose scan found other words: moved ranges */
	wm_a = b->watermark;
	wm_b = wm_at(h, (int64_t)i - 2 * (int64_t)p);
	for (uint32_t j = 0; j < a->nranges; j++) {
		const vmem_range_t *r = policy_history_range(h, a, j);

		if (policy_range_ident(r, policy_history_range(h, b, j), wm_a, wm_b) ==
			    POLICY_ID_SOFT &&
		    !fresh(d, r, i, p))
			return 2;
	}
	return 1;
}

/* True when the window of p events ending at pos repeats with a period
 * under min_period: one call (or two, or three) in a loop - a kernel
 * launched once per channel slice, a framework zeroing a list of
 * buffers - that every period from min_period up matches.  Such a loop
 * is a stage inside the iteration, never the iteration. */
static bool short_loop(const policy_period_t *d, const policy_history_t *h, uint64_t pos,
		       uint32_t p)
{
	for (uint32_t q = 1; q < d->cfg.min_period && q < p; q++) {
		uint64_t x;

		for (x = pos + 1 - p; x <= pos; x++) {
			const policy_hev_t *a = policy_history_at(h, x);
			const policy_hev_t *b = x >= q ? policy_history_at(h, x - q) : NULL;

			if (!a || !b || a->hash != b->hash)
				break;
		}
		if (x > pos)
			return true;
	}
	return false;
}

static void add_candidate(policy_period_t *d, uint32_t p, uint64_t pos)
{
	uint32_t victim = 0;

	for (uint32_t c = 0; c < d->ncand; c++)
		if (d->cand[c].p == p)
			return;
	if (d->ncand < d->cfg.max_candidates) {
		victim = d->ncand++;
	} else {
		for (uint32_t c = 1; c < d->ncand; c++) {
			const policy_cand_t *x = &d->cand[c], *v = &d->cand[victim];
			if (x->run < v->run || (x->run == v->run && x->born < v->born))
				victim = c;
		}
	}
	memset(&d->cand[victim], 0, sizeof(d->cand[victim]));
	d->cand[victim].p = p;
	d->cand[victim].born = pos;
}

int policy_period_step(policy_period_t *d, const policy_history_t *h, uint64_t pos, bool quick,
		       policy_period_found_t *found)
{
	const policy_hev_t *e = policy_history_at(h, pos);
	uint64_t slot;
	int hit = -1;

	if (!e)
		return 0;
	d->steps++;
	slot = e->hash & d->last_mask;
	if (d->last[slot].hash == e->hash && d->last[slot].pos < pos &&
	    d->last[slot].pos >= h->head) {
		uint64_t dist = pos - d->last[slot].pos;

		if (dist >= d->cfg.min_period && dist <= d->cfg.max_period)
			add_candidate(d, (uint32_t)dist, pos);
	}
	d->last[slot].hash = e->hash;
	d->last[slot].pos = pos;
	if (e->flags & POLICY_HEV_SYNC_BEFORE) {
		uint32_t n = d->nsyncs < 8 ? d->nsyncs : 8;

		for (uint32_t s = 0; s < n; s++) {
			uint64_t dist = pos - d->syncs[(d->nsyncs - 1 - s) % 8];

			if (dist >= d->cfg.min_period && dist <= d->cfg.max_period)
				add_candidate(d, (uint32_t)dist, pos);
		}
		d->syncs[d->nsyncs % 8] = pos;
		d->nsyncs++;
	}

	for (uint32_t c = 0; c < d->ncand; c++) {
		policy_cand_t *k = &d->cand[c];
		int r;

		if (pos < k->p || pos - k->p < h->head) {
			k->run = 0;
			k->soft = 0;
			continue;
		}
		if (quick) {
			const policy_hev_t *b = policy_history_at(h, pos - k->p);

			r = b && b->hash == e->hash;
		} else {
			r = compare(d, h, pos, k->p);
		}
		if (r == 0) {
			k->run = 0;
			k->soft = 0;
			continue;
		}
		if (k->run == 0)
			k->run_start = pos;
		k->run++;
		if (r == 2)
			k->soft++;
		/* confirmed when the run reaches reps - 1 periods, and again at
		 * every further period (a caller that ignored it then -- a plan
		 * was running -- hears of it once more per period, at O(1)
		 * amortised cost) */
		if (k->run >= (uint64_t)(d->cfg.reps - 1) * k->p && k->run % k->p == 0 &&
		    (uint64_t)k->soft * 1000 <= (uint64_t)d->cfg.soft_permille * k->run &&
		    (hit < 0 || better_hit(d, k->p, d->cand[hit].p)))
			hit = (int)c;
	}
	for (uint32_t j = 0; j < e->nranges; j++) {
		const vmem_range_t *r = policy_history_range(h, e, j);

		if ((r->access & VMEM_ACCESS_W) && r->alloc_id) {
			uint64_t s = range_slot(d, r->alloc_id, r->offset);

			d->wrote[s].alloc_id = r->alloc_id;
			d->wrote[s].offset = r->offset;
			d->wrote[s].pos = pos;
		}
	}
	if (hit >= 0) {
		/* a training iteration computes: a loop of copies and sets
		 * alone (a framework initialising counters) is not one; nor is
		 * a loop of fewer than min_period calls that a multiple of its
		 * period matched */
		const policy_cand_t *k = &d->cand[hit];
		bool compute = false;

		for (uint64_t q = pos + 1 - k->p; q <= pos && !compute; q++) {
			const policy_hev_t *x = policy_history_at(h, q);
			compute = x && vmem_op_is_compute(x->kind);
		}
		if (!compute || short_loop(d, h, pos, k->p)) {
			memset(&d->cand[hit], 0, sizeof(d->cand[hit]));
			d->cand[hit] = d->cand[--d->ncand];
			hit = -1;
		}
	}
	if (hit < 0)
		return 0;
	{
		const policy_cand_t *k = &d->cand[hit];

		memset(found, 0, sizeof(*found));
		found->period = k->p;
		found->first = pos + 1 - k->p;
		found->rot = policy_period_rotation(h, found->first, k->p);
		/* the steady region starts one period before the run; its first
		 * iteration is the first position there at window index rot */
		found->steady_start = k->run_start - k->p;
		{
			uint64_t idx = (k->p - (found->first - found->steady_start) % k->p) % k->p;

			found->steady_start += (found->rot + (uint64_t)k->p - idx) % k->p;
		}
		found->reps = k->run / k->p + 1;
		found->soft = k->soft;
	}
	return 1;
}

uint32_t policy_period_rotation(const policy_history_t *h, uint64_t first, uint32_t p)
{
	int64_t best = -1;
	uint64_t best_gap = 0;
	uint64_t prev_t = 0;

	for (uint32_t k = 0; k < p; k++) {
		const policy_hev_t *e = policy_history_at(h, first + k);
		const policy_hev_t *pe = policy_history_at(h, first + k - 1);
		uint64_t gap;

		if (!e)
			continue;
		if (!(e->flags & POLICY_HEV_SYNC_BEFORE))
			continue;
		prev_t = pe ? pe->t_ns + pe->dur_ns : 0;
		gap = e->t_ns > prev_t ? e->t_ns - prev_t : 0;
		if (best < 0 || gap > best_gap || (gap == best_gap && gap == 0)) {
			best = k;
			best_gap = gap;
		}
	}
	if (best >= 0)
		return (uint32_t)best;
	for (uint32_t k = 0; k < p; k++) {
		const policy_hev_t *e = policy_history_at(h, first + k);

		if (e && e->kind == VMEM_OP_MEMCPY && e->info.type == VMEM_INFO_COPY &&
		    e->info.u.copy.kind == 1)
			return k;
	}
	return 0;
}

void policy_period_dump(const policy_period_t *d, policy_print_fn out, void *ctx)
{
	policy_printf(out, ctx, "period: %u candidate(s) after %llu events (reps %u, soft <= %u/1000)",
		      d->ncand, (unsigned long long)d->steps, d->cfg.reps, d->cfg.soft_permille);
	for (uint32_t c = 0; c < d->ncand; c++) {
		const policy_cand_t *k = &d->cand[c];

		policy_printf(out, ctx, "  p=%u run=%u soft=%u run_start=%llu born=%llu", k->p,
			      k->run, k->soft, (unsigned long long)k->run_start,
			      (unsigned long long)k->born);
	}
}
