/* solver/wr.c - µ-cuDNN's WR dynamic program and the desirable sets.
 *
 * WR (µ-cuDNN §III-B).  T(b), the least time of b images, is
 *
 *	T(0) = 0,   T(b) = min over sizes p <= b of  Tµ(p) + T(b - p)
 *
 * where Tµ(p) is the fastest algorithm measured at micro-batch p whose
 * workspace fits the limit.  The paper writes it as the better of "run b
 * undivided" and "split b in two"; both forms give the same T(B), this
 * one in O(B x |sizes|).  A configuration's workspace is the largest of
 * its parts' (they run one after another in one buffer), so the
 * recurrence minimises the pair (time, workspace) lexicographically:
 * among equally fast configurations it keeps the one needing least.  That
 * order decomposes like the time alone (max is monotone), so each T(b)
 * keeps only its best pair.
 *
 *	b:     0   1   2   3   4   ...   B
 *	       |<------ p ------>|
 *	T(4) = Tµ(p) + T(4 - p), best p remembered; c(B) is read back
 *	       by following the remembered p from B down to 0 (Fig. 5).
 *
 * With a slice-alignment quantum q > 1 (solver.h) two tables are kept:
 * T0 over multiples of q (every part a multiple of q) and T1 over sizes
 * congruent to r = B mod q (exactly one part congruent to r, the rest
 * multiples of q); with q = 1 they are the same table.
 *
 * Desirable sets (§III-C).  The paper builds C(b), the union over the
 * first part of {cµ} + C(b - p), and prunes it to its Pareto front D at
 * every b.  The front of C(B) is computed here directly from WR: its
 * member with the most workspace is WR(limit); the next one is
 * WR(w - 1), where w is that member's workspace, and so on down to a
 * member needing no workspace (or none fits).  Each WR(w) is the fastest
 * configuration within w, with the least workspace among the fastest, so
 * it is desirable, and no desirable configuration lies between two
 * consecutive thresholds; so the set is exactly D(C(B)) of the paper,
 * found in (front size) x O(B x |sizes|) instead of combining fronts at
 * every b.  The unit tests check it against exhaustive enumeration.
 */
#include "solver/solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *solver_strerror(solver_status_t st)
{
	switch (st) {
	case SOLVER_OK: return "success";
	case SOLVER_EINVAL: return "invalid argument or malformed table";
	case SOLVER_ENOMEM: return "out of host memory";
	case SOLVER_INFEASIBLE: return "no configuration fits the workspace limit";
	case SOLVER_EGLPK: return "GLPK failed";
	case SOLVER_ETOOMANY: return "configuration has too many runs";
	case SOLVER_EFOREIGN: return "not a vmem solver cache";
	case SOLVER_ECORRUPT: return "damaged solver cache";
	}
	return "unknown solver status";
}

#define MAX_BATCH (1 << 20)

solver_status_t solver_kernel_check(const solver_kernel_t *k)
{
	if (!k || k->batch < 1 || k->batch > MAX_BATCH || k->quantum < 1 || k->quantum > 64 ||
	    k->n < 0 || (k->n > 0 && !k->m))
		return SOLVER_EINVAL;
	for (int i = 0; i < k->n; i++) {
		const solver_meas_t *m = &k->m[i];

		if (m->b < 1 || m->b > k->batch || m->algo < 0 || !isfinite(m->time) ||
		    m->time <= 0)
			return SOLVER_EINVAL;
	}
	return SOLVER_OK;
}

int solver_batch_sizes(solver_mb_t policy, int batch, int q, int *out, int cap)
{
	int n = 0, r;

	if (batch < 1 || q < 1)
		return 0;
	r = batch % q;
#define PUT(v) do { if (n < cap) out[n] = (v); n++; } while (0)
	switch (policy) {
	case SOLVER_MB_ALL:
		for (int b = 1; b <= batch; b++)
			if (b % q == 0 || b % q == r)
				PUT(b);
		break;
	case SOLVER_MB_POW2: {
		bool have_r = r == 0, have_b = false;

		for (long p = 1; p <= batch; p *= 2) {
			int b = (int)p;

			if (!have_r && b > r) {
				PUT(r);
				have_r = true;
			}
			if ((b % q == 0 || b % q == r) && b != r)
				PUT(b);
			have_b |= b == batch;
		}
		if (!have_r)
			PUT(r);
		if (!have_b)
			PUT(batch);
		break;
	}
	case SOLVER_MB_UNDIVIDED:
		PUT(batch);
		break;
	}
#undef PUT
	return n;
}

int solver_config_calls(const solver_config_t *c)
{
	int n = 0;

	for (int i = 0; i < c->nruns; i++)
		n += c->runs[i].count;
	return n;
}

/* The best micro-configuration of each size within the limit. */
typedef struct {
	double t;
	uint64_t w;
	int algo;    /* -1: none fits */
	int count;   /* algorithms measured at this size within the limit */
} best_t;

/* One DP state: the best (time, workspace) of b images and its first part. */
typedef struct {
	double t;
	uint64_t w;
	int p;       /* first part; 0 for b = 0; -1 unreachable */
} state_t;

typedef struct {
	const solver_kernel_t *k;
	int B, q, r;
	best_t *best;     /* [B + 1] */
	int *sizes;       /* usable sizes, descending */
	int nsizes;
	state_t *t0, *t1; /* [B + 1]; t1 == t0 when r == 0 */
} dp_t;

/* Times within a relative 1e-12 are equal: two configurations of the same
 * real time summed in different orders differ in their last bits, and the
 * one needing less workspace must win (else the front would keep a point
 * that is dominated up to rounding). */
static int tcmp(double a, double b)
{
	double e = 1e-12 * (fabs(a) > fabs(b) ? fabs(a) : fabs(b));

	return a < b - e ? -1 : a > b + e ? 1 : 0;
}

static bool better(double t, uint64_t w, const state_t *s)
{
	int c;

	if (s->p < 0)
		return true;
	c = tcmp(t, s->t);
	return c < 0 || (c == 0 && w < s->w);
}

static void dp_free(dp_t *d)
{
	free(d->best);
	free(d->sizes);
	if (d->t1 != d->t0)
		free(d->t1);
	free(d->t0);
}

static solver_status_t dp_init(dp_t *d, const solver_kernel_t *k, uint64_t limit)
{
	solver_status_t st = solver_kernel_check(k);

	memset(d, 0, sizeof(*d));
	if (st)
		return st;
	d->k = k;
	d->B = k->batch;
	d->q = k->quantum;
	d->r = d->B % d->q;
	d->best = calloc((size_t)d->B + 1, sizeof(*d->best));
	d->sizes = calloc((size_t)d->B + 1, sizeof(*d->sizes));
	d->t0 = calloc((size_t)d->B + 1, sizeof(*d->t0));
	d->t1 = d->r ? calloc((size_t)d->B + 1, sizeof(*d->t1)) : d->t0;
	if (!d->best || !d->sizes || !d->t0 || !d->t1) {
		dp_free(d);
		return SOLVER_ENOMEM;
	}
	for (int b = 0; b <= d->B; b++)
		d->best[b].algo = -1;
	for (int i = 0; i < k->n; i++) {
		const solver_meas_t *m = &k->m[i];
		best_t *bt = &d->best[m->b];

		if (m->ws > limit)
			continue;
		bt->count++;
		int c = bt->algo < 0 ? -1 : tcmp(m->time, bt->t);

		if (c < 0 || (c == 0 && m->ws < bt->w) ||
		    (c == 0 && m->ws == bt->w && m->algo < bt->algo)) {
			bt->t = m->time;
			bt->w = m->ws;
			bt->algo = m->algo;
		}
	}
	for (int b = d->B; b >= 1; b--)
		if (d->best[b].algo >= 0 && (b % d->q == 0 || (d->r && b % d->q == d->r)))
			d->sizes[d->nsizes++] = b;
	return SOLVER_OK;
}

/* Fills t0 (and t1).  Parts are tried largest first and replace only when
 * strictly better, so ties go to fewer, larger micro-batches. */
static void dp_run(dp_t *d)
{
	int q = d->q, r = d->r;

	for (int b = 0; b <= d->B; b++) {
		d->t0[b].p = -1;
		d->t1[b].p = -1;
	}
	d->t0[0] = (state_t){ 0.0, 0, 0 };
	for (int b = q; b <= d->B; b += q) {
		state_t *s = &d->t0[b];

		for (int i = 0; i < d->nsizes; i++) {
			int p = d->sizes[i];
			const state_t *sub;

			if (p > b || p % q)
				continue;
			sub = &d->t0[b - p];
			if (sub->p < 0)
				continue;
			double t = d->best[p].t + sub->t;
			uint64_t w = d->best[p].w > sub->w ? d->best[p].w : sub->w;

			if (better(t, w, s))
				*s = (state_t){ t, w, p };
		}
	}
	if (!r)
		return;
	for (int b = r; b <= d->B; b += q) {
		state_t *s = &d->t1[b];

		for (int i = 0; i < d->nsizes; i++) {
			int p = d->sizes[i];
			const state_t *sub;

			if (p > b)
				continue;
			/* a multiple of q leaves a remainder state; the remainder
			 * part leaves a state of multiples of q */
			sub = p % q ? &d->t0[b - p] : &d->t1[b - p];
			if (sub->p < 0 || (p % q == 0 && p == b))
				continue;
			double t = d->best[p].t + sub->t;
			uint64_t w = d->best[p].w > sub->w ? d->best[p].w : sub->w;

			if (better(t, w, s))
				*s = (state_t){ t, w, p };
		}
	}
}

static int run_cmp(const void *a, const void *b)
{
	const solver_run_t *x = a, *y = b;

	if (x->b != y->b)
		return y->b - x->b;
	return x->algo - y->algo;
}

/* Reads c(B) back from the remembered first parts. */
static solver_status_t dp_config(const dp_t *d, solver_config_t *out)
{
	const state_t *top = d->r ? &d->t1[d->B] : &d->t0[d->B];
	solver_run_t rem = { -1, 0, 0 };
	int b = d->B;
	bool in_t1 = d->r != 0;

	memset(out, 0, sizeof(*out));
	if (top->p < 0)
		return SOLVER_INFEASIBLE;
	out->time = top->t;
	out->ws = top->w;
	while (b > 0) {
		const state_t *s = in_t1 ? &d->t1[b] : &d->t0[b];
		int p = s->p, a = d->best[p].algo, i;

		if (p % d->q) {
			rem = (solver_run_t){ a, p, 1 };
			in_t1 = false;
		} else {
			for (i = 0; i < out->nruns; i++)
				if (out->runs[i].b == p && out->runs[i].algo == a)
					break;
			if (i == out->nruns) {
				if (out->nruns == SOLVER_MAX_RUNS - 1)
					return SOLVER_ETOOMANY;
				out->runs[out->nruns++] = (solver_run_t){ a, p, 0 };
			}
			out->runs[i].count++;
		}
		b -= p;
	}
	qsort(out->runs, (size_t)out->nruns, sizeof(out->runs[0]), run_cmp);
	if (rem.count)
		out->runs[out->nruns++] = rem;
	return SOLVER_OK;
}

solver_status_t solver_wr(const solver_kernel_t *k, uint64_t limit, solver_config_t *out)
{
	dp_t d;
	solver_status_t st = dp_init(&d, k, limit);

	if (st) {
		memset(out, 0, sizeof(*out));
		return st;
	}
	dp_run(&d);
	st = dp_config(&d, out);
	dp_free(&d);
	return st;
}

solver_status_t solver_wr_slack(const solver_kernel_t *k, uint64_t limit, double slack,
				solver_config_t *out)
{
	solver_status_t st = solver_wr(k, limit, out);
	double most;

	if (st || !(slack > 0) || !isfinite(slack))
		return st;
	most = out->time * (1.0 + slack);
	/* down the desirable set: each step strictly less workspace and
	 * strictly slower, so the first one over `most` ends the walk */
	while (out->ws > 0) {
		solver_config_t c;

		if (solver_wr(k, out->ws - 1, &c) != SOLVER_OK || c.time > most)
			break;
		*out = c;
	}
	return SOLVER_OK;
}

solver_status_t solver_wr_priced(const solver_kernel_t *k, uint64_t limit, double slack,
				 double ms_per_byte, solver_config_t *out)
{
	solver_front_t f;
	solver_status_t st;
	int best = -1;

	if (!(ms_per_byte > 0) || !isfinite(ms_per_byte))
		return solver_wr_slack(k, limit, slack, out);
	if ((st = solver_front(k, limit, &f)) != SOLVER_OK) {
		memset(out, 0, sizeof(*out));
		return st;
	}
	/* the front is ordered by workspace ascending: a strict < keeps the
	 * least workspace among equal costs */
	for (int i = 0; i < f.n; i++)
		if (best < 0 || f.c[i].time + ms_per_byte * (double)f.c[i].ws <
				f.c[best].time + ms_per_byte * (double)f.c[best].ws)
			best = i;
	*out = f.c[best];
	if (slack > 0 && isfinite(slack)) {
		double most = out->time * (1.0 + slack);

		for (int i = best - 1; i >= 0 && f.c[i].time <= most; i--)
			*out = f.c[i];
	}
	solver_front_free(&f);
	return SOLVER_OK;
}

solver_status_t solver_least_like(const solver_kernel_t *k, const solver_config_t *c,
				  solver_config_t *out)
{
	solver_status_t st = solver_kernel_check(k);

	memset(out, 0, sizeof(*out));
	if (st)
		return st;
	if (c->nruns < 1 || c->nruns > SOLVER_MAX_RUNS)
		return SOLVER_EINVAL;
	out->nruns = c->nruns;
	for (int r = 0; r < c->nruns; r++) {
		const solver_meas_t *best = NULL;

		for (int i = 0; i < k->n; i++) {
			const solver_meas_t *m = &k->m[i];

			if (m->b == c->runs[r].b &&
			    (!best || m->ws < best->ws || (m->ws == best->ws && m->time < best->time)))
				best = m;
		}
		if (!best) {
			memset(out, 0, sizeof(*out));
			return SOLVER_INFEASIBLE;
		}
		out->runs[r] = (solver_run_t){ best->algo, c->runs[r].b, c->runs[r].count };
		out->time += best->time * c->runs[r].count;
		if (best->ws > out->ws)
			out->ws = best->ws;
	}
	return SOLVER_OK;
}

/* Configurations before pruning: sequences of parts with any algorithm
 * measured at each part's size, within the limit (same two tables). */
static double dp_count(const dp_t *d)
{
	double *n0 = calloc((size_t)d->B + 1, sizeof(double));
	double *n1 = d->r ? calloc((size_t)d->B + 1, sizeof(double)) : n0;
	double total;
	int q = d->q, r = d->r;

	if (!n0 || !n1) {
		free(n0);
		if (n1 != n0)
			free(n1);
		return NAN;
	}
	n0[0] = 1.0;
	for (int b = q; b <= d->B; b += q)
		for (int i = 0; i < d->nsizes; i++) {
			int p = d->sizes[i];

			if (p <= b && p % q == 0)
				n0[b] += d->best[p].count * n0[b - p];
		}
	if (r)
		for (int b = r; b <= d->B; b += q)
			for (int i = 0; i < d->nsizes; i++) {
				int p = d->sizes[i];

				if (p > b)
					continue;
				if (p % q)
					n1[b] += d->best[p].count * n0[b - p];
				else if (p < b)
					n1[b] += d->best[p].count * n1[b - p];
			}
	total = r ? n1[d->B] : n0[d->B];
	free(n0);
	if (n1 != n0)
		free(n1);
	return total;
}

void solver_front_free(solver_front_t *f)
{
	if (!f)
		return;
	free(f->c);
	memset(f, 0, sizeof(*f));
}

solver_status_t solver_front(const solver_kernel_t *k, uint64_t limit, solver_front_t *out)
{
	dp_t d;
	solver_status_t st;
	int cap = 16;

	memset(out, 0, sizeof(*out));
	if ((st = dp_init(&d, k, limit)))
		return st;
	out->unpruned = dp_count(&d);
	dp_free(&d);
	out->c = malloc((size_t)cap * sizeof(*out->c));
	if (!out->c)
		return SOLVER_ENOMEM;
	for (uint64_t w = limit;;) {
		solver_config_t c;

		if ((st = solver_wr(k, w, &c)) == SOLVER_INFEASIBLE)
			break;
		if (st) {
			solver_front_free(out);
			return st;
		}
		if (out->n == cap) {
			solver_config_t *n = realloc(out->c, (size_t)cap * 2 * sizeof(*n));

			if (!n) {
				solver_front_free(out);
				return SOLVER_ENOMEM;
			}
			out->c = n;
			cap *= 2;
		}
		out->c[out->n++] = c;
		if (c.ws == 0)
			break;
		w = c.ws - 1;   /* strictly less workspace: strictly slower (see top) */
	}
	if (out->n == 0) {
		solver_front_free(out);
		return SOLVER_INFEASIBLE;
	}
	/* found by workspace descending; the contract is ascending */
	for (int i = 0, j = out->n - 1; i < j; i++, j--) {
		solver_config_t t = out->c[i];

		out->c[i] = out->c[j];
		out->c[j] = t;
	}
	return SOLVER_OK;
}
