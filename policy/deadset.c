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
 * A sorted array of disjoint [a, b) pieces keyed by allocation: an insert
 * or a split is a memmove, and the set holds one iteration's dead ranges
 * at most.
 */
#include "policy/match.h"

#include <stdlib.h>
#include <string.h>

int policy_deadset_init(policy_deadset_t *d)
{
	memset(d, 0, sizeof(*d));
	d->grave = calloc(POLICY_GRAVE, sizeof(*d->grave));
	return d->grave ? 0 : -1;
}

void policy_deadset_free(policy_deadset_t *d)
{
	free(d->v);
	free(d->grave);
	memset(d, 0, sizeof(*d));
}

static int lower(const policy_deadset_t *d, uint64_t alloc_id, uint64_t a)
{
	int lo = 0, hi = d->n;

	/* first piece with (alloc, b) > (alloc_id, a) */
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const policy_deadent_t *e = &d->v[mid];

		if (e->alloc_id < alloc_id || (e->alloc_id == alloc_id && e->b <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int reserve(policy_deadset_t *d, int extra)
{
	if (d->n + extra <= d->cap)
		return 0;
	{
		int cap = d->cap ? d->cap * 2 : 64;
		policy_deadent_t *nv;

		while (cap < d->n + extra)
			cap *= 2;
		nv = realloc(d->v, (size_t)cap * sizeof(*nv));
		if (!nv)
			return -1;
		d->v = nv;
		d->cap = cap;
	}
	return 0;
}

static void bury(policy_deadset_t *d, const policy_deadent_t *e)
{
	d->grave[d->ngrave % POLICY_GRAVE] = *e;
	d->ngrave++;
}

/* Removes [a, b) of alloc_id; each removed piece goes to fn (may be NULL). */
static int cut(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
	       void (*fn)(void *, const policy_deadent_t *), void *ctx)
{
	int lo = lower(d, alloc_id, a), hi = lo;
	policy_deadent_t keep[2];
	int nk = 0;

	while (hi < d->n && d->v[hi].alloc_id == alloc_id && d->v[hi].a < b)
		hi++;
	if (lo == hi)
		return 0;
	for (int i = lo; i < hi; i++) {
		policy_deadent_t piece = d->v[i];

		if (piece.a < a)
			piece.a = a;
		if (piece.b > b)
			piece.b = b;
		if (fn)
			fn(ctx, &piece);
	}
	if (d->v[lo].a < a) {
		keep[nk] = d->v[lo];
		keep[nk].b = a;
		nk++;
	}
	if (d->v[hi - 1].b > b) {
		keep[nk] = d->v[hi - 1];
		keep[nk].a = b;
		nk++;
	}
	if (nk > hi - lo && reserve(d, nk - (hi - lo)) < 0)
		return -1;
	memmove(&d->v[lo + nk], &d->v[hi], (size_t)(d->n - hi) * sizeof(*d->v));
	memcpy(&d->v[lo], keep, (size_t)nk * sizeof(*d->v));
	d->n += nk - (hi - lo);
	return hi - lo;
}

int policy_deadset_add(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
		       const policy_loss_t *loss)
{
	int at;

	if (a >= b)
		return 0;
	if (cut(d, alloc_id, a, b, NULL, NULL) < 0 || reserve(d, 1) < 0)
		return -1;
	at = lower(d, alloc_id, a);
	memmove(&d->v[at + 1], &d->v[at], (size_t)(d->n - at) * sizeof(*d->v));
	d->v[at].alloc_id = alloc_id;
	d->v[at].a = a;
	d->v[at].b = b;
	d->v[at].loss = *loss;
	d->n++;
	return 0;
}

typedef struct {
	policy_deadset_t *d;
	policy_actions_t *out;
	uint8_t reason;
	int n;
} revive_ctx_t;

static void revive(void *vc, const policy_deadent_t *e)
{
	revive_ctx_t *c = vc;
	policy_action_t *x = policy_actions_push(c->out);
	policy_deadent_t piece = *e;

	piece.loss.ptr += piece.a - piece.loss.offset;
	piece.loss.offset = piece.a;
	piece.loss.bytes = piece.b - piece.a;
	bury(c->d, &piece);
	c->n++;
	if (!x)
		return;
	memset(x, 0, sizeof(*x));
	x->kind = POLICY_ACT_REVIVE;
	x->reason = c->reason;
	x->alloc_id = piece.alloc_id;
	x->offset = piece.a;
	x->bytes = piece.b - piece.a;
	x->ptr = piece.loss.ptr;
	x->plan_op = piece.loss.after_op;
	x->until_op = piece.loss.until_op;
	x->plan_id = piece.loss.plan_id;
	x->loss = piece.loss;
}

int policy_deadset_read(policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			policy_actions_t *out)
{
	revive_ctx_t c = { d, out, POLICY_REVIVE_READ, 0 };

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
	revive_ctx_t c = { d, out, POLICY_REVIVE_SUSPEND, 0 };

	for (int i = 0; i < d->n; i++)
		revive(&c, &d->v[i]);
	d->n = 0;
	return c.n;
}

int policy_deadset_find(const policy_deadset_t *d, uint64_t alloc_id, uint64_t a, uint64_t b,
			policy_loss_t *out)
{
	int i = lower(d, alloc_id, a);
	uint32_t n = d->ngrave < POLICY_GRAVE ? d->ngrave : POLICY_GRAVE;

	if (i < d->n && d->v[i].alloc_id == alloc_id && d->v[i].a < b) {
		*out = d->v[i].loss;
		return 0;
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
