/* tests/simgpu/core_race.c - vector clocks and shadow memory for the
 * happens-before race checker (see core_race.h for the model).
 *
 * A shadow is a sorted array of disjoint byte segments, each with the last
 * write's epoch and the reads since.  An access first splits the segments
 * at its two ends, so every segment is wholly inside or outside it; it then
 * checks the segments inside against the accessor's vector clock and
 * records itself: a write replaces them all with one segment (nothing
 * before it matters any more to a later access ordered after it), a read
 * is added to each, with segments made for the bytes never accessed, and
 * neighbours left identical are merged again.  A shadow belongs to one
 * memory object (a physical allocation, a pinned range), so arrays stay
 * as short as the number of tensors in it.
 */
#include "core_race.h"

#include <stdlib.h>
#include <string.h>

/* ---- vector clocks ---- */

uint32_t simgpu_vc_get(const simgpu_vc_t *v, uint32_t agent)
{
	return agent < v->n ? v->c[agent] : 0;
}

static int vc_reserve(simgpu_vc_t *v, uint32_t n)
{
	uint32_t cap;
	uint32_t *c;

	if (n <= v->n)
		return 0;
	if (n > v->cap) {
		cap = v->cap ? v->cap : 8;
		while (cap < n)
			cap *= 2;
		c = realloc(v->c, cap * sizeof(*c));
		if (!c)
			return -1;
		v->c = c;
		v->cap = cap;
	}
	memset(v->c + v->n, 0, (n - v->n) * sizeof(*v->c));
	v->n = n;
	return 0;
}

int simgpu_vc_tick(simgpu_vc_t *v, uint32_t agent)
{
	if (vc_reserve(v, agent + 1))
		return -1;
	v->c[agent]++;
	return 0;
}

int simgpu_vc_join(simgpu_vc_t *d, const simgpu_vc_t *s)
{
	uint32_t i;

	if (vc_reserve(d, s->n))
		return -1;
	for (i = 0; i < s->n; i++)
		if (s->c[i] > d->c[i])
			d->c[i] = s->c[i];
	return 0;
}

int simgpu_vc_copy(simgpu_vc_t *d, const simgpu_vc_t *s)
{
	if (vc_reserve(d, s->n))
		return -1;
	memcpy(d->c, s->c, s->n * sizeof(*s->c));
	if (d->n > s->n)
		memset(d->c + s->n, 0, (d->n - s->n) * sizeof(*d->c));
	return 0;
}

void simgpu_vc_free(simgpu_vc_t *v)
{
	free(v->c);
	v->c = NULL;
	v->n = v->cap = 0;
}

bool simgpu_epoch_ordered(const simgpu_epoch_t *e, const simgpu_vc_t *vc,
			  uint32_t self)
{
	if (!e->op || e->agent == self)
		return true;
	return simgpu_vc_get(vc, e->agent) >= e->clock;
}

/* ---- segments ---- */

static int seg_reserve(simgpu_shadow_t *s, size_t more)
{
	size_t cap;
	simgpu_shadow_seg_t *a;

	if (s->n + more <= s->cap)
		return 0;
	cap = s->cap ? s->cap : 8;
	while (cap < s->n + more)
		cap *= 2;
	a = realloc(s->a, cap * sizeof(*a));
	if (!a)
		return -1;
	s->a = a;
	s->cap = cap;
	return 0;
}

/* First index whose segment ends after x (lower bound on ends). */
static size_t seg_lower(const simgpu_shadow_t *s, uint64_t x)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->a[mid].base + s->a[mid].size <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Splits the segment containing x (strictly inside) in two.  Capacity for
 * one more segment must be reserved. */
static void seg_split(simgpu_shadow_t *s, uint64_t x)
{
	size_t i = seg_lower(s, x);
	simgpu_shadow_seg_t *g;

	if (i == s->n || s->a[i].base >= x)
		return;
	g = &s->a[i];
	memmove(g + 1, g, (s->n - i) * sizeof(*g));
	s->n++;
	g[1].base = x;
	g[1].size = g[0].base + g[0].size - x;
	g[0].size = x - g[0].base;
}

static bool epoch_same(const simgpu_epoch_t *a, const simgpu_epoch_t *b)
{
	return a->op == b->op && a->seq == b->seq && a->agent == b->agent &&
	       a->clock == b->clock;
}

static bool seg_same_state(const simgpu_shadow_seg_t *a,
			   const simgpu_shadow_seg_t *b)
{
	uint32_t i;

	if (!epoch_same(&a->w, &b->w) || a->nr != b->nr)
		return false;
	for (i = 0; i < a->nr; i++)
		if (!epoch_same(&a->r[i], &b->r[i]))
			return false;
	return true;
}

/* The conflict of one segment with an access, or RACE_NONE.  A read
 * conflicts with an unordered last write; a write with that too, and with
 * unordered reads since: then the latest of them is named (the one the
 * program most likely meant to wait for). */
static simgpu_race_kind_t seg_conflict(const simgpu_shadow_seg_t *g,
				       unsigned mode, const simgpu_vc_t *vc,
				       uint32_t self, simgpu_epoch_t *prior)
{
	simgpu_race_kind_t k = SIMGPU_RACE_NONE;
	uint32_t i;

	if (g->w.op && !simgpu_epoch_ordered(&g->w, vc, self)) {
		*prior = g->w;
		if (mode & SIMGPU_ACC_R)
			return SIMGPU_RACE_RAW;
		k = SIMGPU_RACE_WAW;
	}
	if (!(mode & SIMGPU_ACC_W))
		return k;
	for (i = 0; i < g->nr; i++) {
		if (simgpu_epoch_ordered(&g->r[i], vc, self))
			continue;
		if (k == SIMGPU_RACE_NONE || g->r[i].seq > prior->seq) {
			*prior = g->r[i];
			k = SIMGPU_RACE_WAR;
		}
	}
	return k;
}

/* Finds the first conflict among segments [i0, i1) and widens it over the
 * following contiguous segments that conflict with the same earlier op. */
static bool find_conflict(const simgpu_shadow_t *s, size_t i0, size_t i1,
			  unsigned mode, const simgpu_vc_t *vc, uint32_t self,
			  simgpu_race_t *race)
{
	size_t i;

	for (i = i0; i < i1; i++) {
		simgpu_epoch_t prior;
		simgpu_race_kind_t k = seg_conflict(&s->a[i], mode, vc, self, &prior);

		if (k == SIMGPU_RACE_NONE)
			continue;
		race->kind = k;
		race->prior = prior;
		race->base = s->a[i].base;
		race->size = s->a[i].size;
		for (i++; i < i1; i++) {
			simgpu_epoch_t p2;

			if (s->a[i].base != race->base + race->size ||
			    seg_conflict(&s->a[i], mode, vc, self, &p2) != k ||
			    !epoch_same(&p2, &prior))
				break;
			race->size += s->a[i].size;
		}
		return true;
	}
	return false;
}

/* Adds a read by `who`: reads it dominates are dropped (a later access
 * ordered after this read is ordered after them too: clocks are joined
 * whole); with no room left the oldest read is forgotten. */
static void seg_add_read(simgpu_shadow_seg_t *g, const simgpu_epoch_t *who,
			 const simgpu_vc_t *vc)
{
	uint32_t i, k = 0, old = 0;

	for (i = 0; i < g->nr; i++)
		if (!simgpu_epoch_ordered(&g->r[i], vc, who->agent))
			g->r[k++] = g->r[i];
	g->nr = k;
	if (g->nr == SIMGPU_SHADOW_READS) {
		for (i = 1; i < g->nr; i++)
			if (g->r[i].seq < g->r[old].seq)
				old = i;
		memmove(&g->r[old], &g->r[old + 1],
			(g->nr - old - 1) * sizeof(g->r[0]));
		g->nr--;
	}
	g->r[g->nr++] = *who;
}

/* Merges equal neighbours among [lo, hi) (indices clamped). */
static void seg_merge(simgpu_shadow_t *s, size_t lo, size_t hi)
{
	size_t i, k;

	if (hi > s->n)
		hi = s->n;
	if (lo >= hi)
		return;
	k = lo;
	for (i = lo + 1; i < hi; i++) {
		simgpu_shadow_seg_t *a = &s->a[k], *b = &s->a[i];

		if (a->base + a->size == b->base && seg_same_state(a, b))
			a->size += b->size;
		else
			s->a[++k] = *b;
	}
	k++;
	memmove(&s->a[k], &s->a[hi], (s->n - hi) * sizeof(s->a[0]));
	s->n -= hi - k;
}

int simgpu_shadow_access(simgpu_shadow_t *s, uint64_t base, uint64_t size,
			 unsigned mode, const simgpu_epoch_t *who,
			 const simgpu_vc_t *vc, simgpu_race_t *race)
{
	uint64_t end = base + size, x;
	size_t i0, i1, i, ngap = 0;
	int found;

	if (size == 0 || !(mode & SIMGPU_ACC_RW))
		return 0;
	if (seg_reserve(s, 2))
		return -1;
	seg_split(s, base);
	seg_split(s, end);
	i0 = seg_lower(s, base);
	for (i1 = i0; i1 < s->n && s->a[i1].base < end; i1++)
		;
	found = find_conflict(s, i0, i1, mode, vc, who->agent, race) ? 1 : 0;

	if (mode & SIMGPU_ACC_W) {
		simgpu_shadow_seg_t g;

		memset(&g, 0, sizeof(g));
		g.base = base;
		g.size = size;
		g.w = *who;
		if (i1 == i0) {
			if (seg_reserve(s, 1))
				return -1;
			memmove(&s->a[i0 + 1], &s->a[i0], (s->n - i0) * sizeof(g));
			s->n++;
		} else if (i1 > i0 + 1) {
			memmove(&s->a[i0 + 1], &s->a[i1], (s->n - i1) * sizeof(g));
			s->n -= i1 - i0 - 1;
		}
		s->a[i0] = g;
		return found;
	}

	/* a read: fill the gaps, then add the read everywhere */
	x = base;
	for (i = i0; i < i1; i++) {
		if (s->a[i].base > x)
			ngap++;
		x = s->a[i].base + s->a[i].size;
	}
	if (x < end)
		ngap++;
	if (seg_reserve(s, ngap))
		return -1;
	x = base;
	for (i = i0; i <= i1 && x < end; i++) {
		uint64_t next = i < i1 ? s->a[i].base : end;

		if (next > x) {
			simgpu_shadow_seg_t *g = &s->a[i];

			memmove(g + 1, g, (s->n - i) * sizeof(*g));
			s->n++;
			i1++;
			memset(g, 0, sizeof(*g));
			g->base = x;
			g->size = next - x;
			x = next;
			continue;   /* i now indexes the gap; the loop moves on */
		}
		if (i < i1)
			x = s->a[i].base + s->a[i].size;
	}
	for (i = i0; i < i1; i++)
		seg_add_read(&s->a[i], who, vc);
	seg_merge(s, i0 > 0 ? i0 - 1 : 0, i1 + 1);
	return found;
}

bool simgpu_shadow_check(const simgpu_shadow_t *s, uint64_t base,
			 uint64_t size, const simgpu_vc_t *vc, uint32_t self,
			 simgpu_race_t *race)
{
	uint64_t end = base + size;
	size_t i;

	for (i = seg_lower(s, base); i < s->n && s->a[i].base < end; i++) {
		simgpu_epoch_t prior;
		simgpu_race_kind_t k = seg_conflict(&s->a[i], SIMGPU_ACC_W, vc,
						    self, &prior);
		uint64_t lo, hi;

		if (k == SIMGPU_RACE_NONE)
			continue;
		lo = s->a[i].base > base ? s->a[i].base : base;
		hi = s->a[i].base + s->a[i].size < end ?
			s->a[i].base + s->a[i].size : end;
		race->kind = k;
		race->prior = prior;
		race->base = lo;
		race->size = hi - lo;
		return true;
	}
	return false;
}

void simgpu_shadow_clear(simgpu_shadow_t *s, uint64_t base, uint64_t size)
{
	uint64_t end = base + size;
	size_t i0, i1;

	if (!size || !s->n)
		return;
	if (seg_reserve(s, 2)) {
		/* cannot split: forget every segment that overlaps */
		i0 = seg_lower(s, base);
		for (i1 = i0; i1 < s->n && s->a[i1].base < end; i1++)
			;
	} else {
		seg_split(s, base);
		seg_split(s, end);
		i0 = seg_lower(s, base);
		for (i1 = i0; i1 < s->n && s->a[i1].base < end; i1++)
			;
	}
	memmove(&s->a[i0], &s->a[i1], (s->n - i1) * sizeof(s->a[0]));
	s->n -= i1 - i0;
}

void simgpu_shadow_free(simgpu_shadow_t *s)
{
	free(s->a);
	s->a = NULL;
	s->n = s->cap = 0;
}
