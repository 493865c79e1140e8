/* policy/deadset.c - the ranges the plan declared dead, until rewritten.
 *
 * The runtime drops a dead range's pages when memory is needed (or at
 * once, VMEM_LIVENESS=eager).  If the application then reads the range
 * before rewriting it -- it deviated from the iteration the plan was made
 * from -- the bytes are gone and the call must fail loudly, never compute
 * on garbage.  This set is how the policy notices: every DEAD action adds
 * its range; a write removes the bytes it covers (they are live again); a
 * read of a range still in the set leaves the set as a REVIVE action that
 * carries the description of what happened (policy_loss_t).  When a plan
 * is suspended every range left is revived at once (what was not dropped
 * yet is kept), and the last POLICY_GRAVE revived ranges are remembered so
 * a later read of bytes the pool did drop can still be described.
 *
 * Every call's ranges are checked here, so the set is built for that: a
 * hash table by allocation, each allocation's pieces in a small sorted
 * array (a split or an insert moves only that allocation's pieces), and
 * the descriptions in a ring the pieces point into (a dead range lives
 * less than an iteration; a description overwritten by then leaves the
 * range without its names, never without its report).
 */
#include "policy/match.h"

#include <stdlib.h>
#include <string.h>

int policy_deadset_init(policy_deadset_t *d)
{
	memset(d, 0, sizeof(*d));
	d->nbk = 64;
	d->bk = calloc(d->nbk, sizeof(*d->bk));
	d->info = calloc(POLICY_DEAD_INFOS, sizeof(*d->info));
	d->grave = calloc(POLICY_GRAVE, sizeof(*d->grave));
	if (!d->bk || !d->info || !d->grave) {
		policy_deadset_free(d);
		return -1;
	}
	return 0;
}

void policy_deadset_free(policy_deadset_t *d)
{
	for (uint32_t i = 0; d->bk && i < d->nbk; i++)
		free(d->bk[i].v);
	free(d->bk);
	free(d->info);
	free(d->grave);
	memset(d, 0, sizeof(*d));
}

static uint32_t slot_of(const policy_deadset_t *d, uint64_t alloc_id)
{
	return (uint32_t)((alloc_id * 0x9e3779b97f4a7c15ull) >> 32) & (d->nbk - 1);
}

static policy_deadbucket_t *find(const policy_deadset_t *d, uint64_t alloc_id)
{
	for (uint32_t i = slot_of(d, alloc_id), k = 0; k < d->nbk; k++, i = (i + 1) & (d->nbk - 1)) {
		if (d->bk[i].alloc_id == alloc_id)
			return &d->bk[i];
		if (d->bk[i].alloc_id == 0)
			return NULL;
	}
	return NULL;
}

/* Rebuilds the table with the allocations that still have pieces (an
 * allocation's slot is never emptied in place: probing would break). */
static int rehash(policy_deadset_t *d, uint32_t nbk)
{
	policy_deadbucket_t *old = d->bk;
	uint32_t oldn = d->nbk;

	d->bk = calloc(nbk, sizeof(*d->bk));
	if (!d->bk) {
		d->bk = old;
		return -1;
	}
	d->nbk = nbk;
	d->used = 0;
	for (uint32_t i = 0; i < oldn; i++) {
		if (old[i].alloc_id == 0)
			continue;
		if (old[i].n == 0) {
			free(old[i].v);
			continue;
		}
		{
			uint32_t j = slot_of(d, old[i].alloc_id);

			while (d->bk[j].alloc_id)
				j = (j + 1) & (d->nbk - 1);
			d->bk[j] = old[i];
			d->used++;
		}
	}
	free(old);
	return 0;
}

static policy_deadbucket_t *get(policy_deadset_t *d, uint64_t alloc_id)
{
	policy_deadbucket_t *b = find(d, alloc_id);
	uint32_t i;

	if (b)
		return b;
	if (2 * (d->used + 1) > d->nbk) {
		uint32_t live = 0;

		for (uint32_t k = 0; k < d->nbk; k++)
			live += d->bk[k].alloc_id && d->bk[k].n;
		if (rehash(d, 4 * (live + 1) > d->nbk ? d->nbk * 2 : d->nbk) < 0)
			return NULL;
	}
	i = slot_of(d, alloc_id);
	while (d->bk[i].alloc_id)
		i = (i + 1) & (d->nbk - 1);
	d->bk[i].alloc_id = alloc_id;
	d->used++;
	return &d->bk[i];
}

/* First piece with b > a. */
static int lower(const policy_deadbucket_t *b, uint64_t a)
{
	int lo = 0, hi = b->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (b->v[mid].b <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int reserve(policy_deadbucket_t *b, int extra)
{
	if (b->n + extra <= b->cap)
		return 0;
	{
		int cap = b->cap ? b->cap * 2 : 8;
		policy_deadpiece_t *nv;

		while (cap < b->n + extra)
			cap *= 2;
		nv = realloc(b->v, (size_t)cap * sizeof(*nv));
		if (!nv)
			return -1;
		b->v = nv;
		b->cap = cap;
	}
	return 0;
}

/* The description of a piece (fields past the ring's reach are left 0). */
static void describe(const policy_deadset_t *d, uint64_t alloc_id, const policy_deadpiece_t *p,
		     policy_loss_t *out)
{
	if (d->ninfo - p->info <= POLICY_DEAD_INFOS && p->info < d->ninfo) {
		*out = d->info[p->info % POLICY_DEAD_INFOS];
		out->ptr += p->a - out->offset;
	} else {
		memset(out, 0, sizeof(*out));
		out->last_read_op = out->after_op = out->until_op = -1;
	}
	out->alloc_id = alloc_id;
	out->offset = p->a;
	out->bytes = p->b - p->a;
}

static void bury(policy_deadset_t *d, uint64_t alloc_id, const policy_deadpiece_t *p)
{
	policy_deadent_t *g = &d->grave[d->ngrave % POLICY_GRAVE];

	g->alloc_id = alloc_id;
	g->a = p->a;
	g->b = p->b;
	describe(d, alloc_id, p, &g->loss);
	d->ngrave++;
}

typedef void (*piece_fn)(void *ctx, uint64_t alloc_id, const policy_deadpiece_t *p);

/* Removes [a, b) of one allocation; each removed piece goes to fn. */
static int cut(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b, piece_fn fn,
	       void *ctx)
{
	policy_deadbucket_t *bk = find(d, alloc_id);
	policy_deadpiece_t keep[2];
	int lo, hi, nk = 0;

	if (!bk || bk->n == 0)
		return 0;
	lo = lower(bk, a);
	hi = lo;
	while (hi < bk->n && bk->v[hi].a < b)
		hi++;
	if (lo == hi)
		return 0;
	for (int i = lo; fn && i < hi; i++) {
		policy_deadpiece_t piece = bk->v[i];

		if (piece.a < a)
			piece.a = a;
		if (piece.b > b)
			piece.b = b;
		fn(ctx, alloc_id, &piece);
	}
	if (bk->v[lo].a < a) {
		keep[nk] = bk->v[lo];
		keep[nk].b = a;
		nk++;
	}
	if (bk->v[hi - 1].b > b) {
		keep[nk] = bk->v[hi - 1];
		keep[nk].a = b;
		nk++;
	}
	if (nk > hi - lo && reserve(bk, nk - (hi - lo)) < 0)
		return -1;
	memmove(&bk->v[lo + nk], &bk->v[hi], (size_t)(bk->n - hi) * sizeof(*bk->v));
	memcpy(&bk->v[lo], keep, (size_t)nk * sizeof(*bk->v));
	bk->n += nk - (hi - lo);
	d->n += nk - (hi - lo);
	return hi - lo;
}

int policy_deadset_add(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
		       const policy_loss_t *loss)
{
	policy_deadbucket_t *bk;
	int at;

	if (a >= b)
		return 0;
	if (cut(d, alloc_id, a, b, NULL, NULL) < 0 || !(bk = get(d, alloc_id)) ||
	    reserve(bk, 1) < 0)
		return -1;
	at = lower(bk, a);
	memmove(&bk->v[at + 1], &bk->v[at], (size_t)(bk->n - at) * sizeof(*bk->v));
	bk->v[at].a = a;
	bk->v[at].b = b;
	bk->v[at].info = d->ninfo;
	d->info[d->ninfo % POLICY_DEAD_INFOS] = *loss;
	d->info[d->ninfo % POLICY_DEAD_INFOS].offset = a;
	d->ninfo++;
	bk->n++;
	d->n++;
	return 0;
}

typedef struct {
	policy_deadset_t *d;
	policy_actions_t *out;
	uint8_t reason;
	uint8_t certain;
	int n;
} revive_ctx_t;

static void revive(void *vc, uint64_t alloc_id, const policy_deadpiece_t *p)
{
	revive_ctx_t *c = vc;
	policy_action_t *x;

	bury(c->d, alloc_id, p);
	c->n++;
	if (!(x = policy_actions_push(c->out)))
		return;
	memset(x, 0, sizeof(*x));
	x->kind = POLICY_ACT_REVIVE;
	x->reason = c->reason;
	x->certain = c->certain;
	describe(c->d, alloc_id, p, &x->loss);
	x->alloc_id = alloc_id;
	x->offset = p->a;
	x->bytes = p->b - p->a;
	x->ptr = x->loss.ptr;
	x->plan_op = x->loss.after_op;
	x->until_op = x->loss.until_op;
	x->plan_id = x->loss.plan_id;
}

int policy_deadset_read(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			bool certain, policy_actions_t *out)
{
	revive_ctx_t c = { d, out, POLICY_REVIVE_READ, certain, 0 };

	if (a >= b || d->n == 0)
		return 0;
	cut(d, alloc_id, a, b, revive, &c);
	return c.n;
}

void policy_deadset_write(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b)
{
	if (a < b && d->n)
		cut(d, alloc_id, a, b, NULL, NULL);
}

int policy_deadset_drain(policy_deadset_t *d, policy_actions_t *out)
{
	revive_ctx_t c = { d, out, POLICY_REVIVE_SUSPEND, 0, 0 };

	for (uint32_t i = 0; i < d->nbk; i++) {
		policy_deadbucket_t *bk = &d->bk[i];

		for (int k = 0; k < bk->n; k++)
			revive(&c, bk->alloc_id, &bk->v[k]);
		bk->n = 0;
	}
	d->n = 0;
	rehash(d, d->nbk);
	return c.n;
}

int policy_deadset_find(const policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			policy_loss_t *out)
{
	const policy_deadbucket_t *bk = find(d, alloc_id);
	uint32_t n = d->ngrave < POLICY_GRAVE ? d->ngrave : POLICY_GRAVE;

	if (bk) {
		int i = lower(bk, a);

		if (i < bk->n && bk->v[i].a < b) {
			describe(d, alloc_id, &bk->v[i], out);
			return 0;
		}
	}
	for (uint32_t k = 0; k < n; k++) {
		const policy_deadent_t *e = &d->grave[(d->ngrave - 1 - k) % POLICY_GRAVE];

		if (e->alloc_id == alloc_id && e->a < b && a < e->b) {
			*out = e->loss;
			return 0;
		}
	}
	return -1;
}
