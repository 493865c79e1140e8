/* solver/cache.c - measured tables by key, and their text form.
 *
 * µ-cuDNN §III-D keeps benchmark results in memory and in a file, so a
 * second run (or a second layer of the same shape) does not benchmark
 * again.  The key is built by interpose/ from everything a result
 * depends on: the kernel's shape, data type, math type, the GPU's name
 * and the cuDNN version; this file treats it as an opaque string.
 *
 * The text form, one record per entry:
 *
 *	vmem-solver-cache 1
 *	k <key> <cap> <batch> <quantum> <rows>
 *	<b> <algo> <time> <ws>          (rows lines)
 *	...
 *	sum <16 hex digits>             FNV-1a 64 of every byte before this line
 *
 * A file is read all or nothing and never trusted: a wrong first line is
 * someone else's file (SOLVER_EFOREIGN: not ours to overwrite); a bad
 * checksum, a syntax error, a count or value out of range or a duplicate
 * key is a damaged cache (SOLVER_ECORRUPT).  Numbers are parsed with
 * strtoull/strtod and an end-pointer check, never sscanf.
 */
#include "solver/solver.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "vmem-solver-cache 1\n"
#define MAX_ROWS 1000000
#define MAX_ENTRIES 100000
#define MAX_WS (1ull << 52)

typedef struct {
	char *key;
	uint64_t cap;
	int batch, quantum, n;
	solver_meas_t *m;
} entry_t;

struct solver_cache {
	int n, cap;
	entry_t *e;
};

solver_cache_t *solver_cache_new(void)
{
	return calloc(1, sizeof(solver_cache_t));
}

void solver_cache_free(solver_cache_t *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++) {
		free(c->e[i].key);
		free(c->e[i].m);
	}
	free(c->e);
	free(c);
}

int solver_cache_count(const solver_cache_t *c)
{
	return c ? c->n : 0;
}

static bool key_ok(const char *key)
{
	size_t n;

	if (!key)
		return false;
	n = strlen(key);
	if (n == 0 || n > SOLVER_CACHE_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] <= ' ' || (unsigned char)key[i] >= 0x7f)
			return false;
	return true;
}

static int find(const solver_cache_t *c, const char *key)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->e[i].key, key) == 0)
			return i;
	return -1;
}

solver_status_t solver_cache_put(solver_cache_t *c, const char *key, uint64_t cap,
				 const solver_kernel_t *k)
{
	entry_t e;
	int i;

	if (!c || !key_ok(key) || solver_kernel_check(k) || k->n > MAX_ROWS)
		return SOLVER_EINVAL;
	for (int r = 0; r < k->n; r++)
		if (k->m[r].ws > MAX_WS)
			return SOLVER_EINVAL;
	memset(&e, 0, sizeof(e));
	e.key = strdup(key);
	e.m = malloc(((size_t)k->n + 1) * sizeof(*e.m));
	if (!e.key || !e.m) {
		free(e.key);
		free(e.m);
		return SOLVER_ENOMEM;
	}
	if (k->n)
		memcpy(e.m, k->m, (size_t)k->n * sizeof(*e.m));
	e.cap = cap;
	e.batch = k->batch;
	e.quantum = k->quantum;
	e.n = k->n;
	i = find(c, key);
	if (i >= 0) {
		free(c->e[i].key);
		free(c->e[i].m);
		c->e[i] = e;
		return SOLVER_OK;
	}
	if (c->n == c->cap) {
		int nc = c->cap ? c->cap * 2 : 16;
		entry_t *ne = realloc(c->e, (size_t)nc * sizeof(*ne));

		if (!ne) {
			free(e.key);
			free(e.m);
			return SOLVER_ENOMEM;
		}
		c->e = ne;
		c->cap = nc;
	}
	c->e[c->n++] = e;
	return SOLVER_OK;
}

bool solver_cache_get(const solver_cache_t *c, const char *key, uint64_t cap,
		      solver_kernel_t *out)
{
	int i;

	if (!c || !key)
		return false;
	i = find(c, key);
	if (i < 0 || c->e[i].cap < cap)
		return false;
	out->batch = c->e[i].batch;
	out->quantum = c->e[i].quantum;
	out->n = c->e[i].n;
	out->m = c->e[i].m;
	return true;
}

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* A growing string. */
typedef struct {
	char *p;
	size_t n, cap;
	bool oom;
} sbuf_t;

static void sb_printf(sbuf_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *s, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (s->oom)
		return;
	for (;;) {
		size_t room = s->cap - s->n;

		va_start(ap, fmt);
		k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? room : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			s->oom = true;
			return;
		}
		if (s->p && (size_t)k < room) {
			s->n += (size_t)k;
			return;
		}
		size_t nc = s->cap ? s->cap * 2 : 4096;

		while (nc < s->n + (size_t)k + 1)
			nc *= 2;
		char *np = realloc(s->p, nc);

		if (!np) {
			s->oom = true;
			return;
		}
		s->p = np;
		s->cap = nc;
	}
}

char *solver_cache_format(const solver_cache_t *c, size_t *len)
{
	sbuf_t s = { NULL, 0, 0, false };

	sb_printf(&s, "%s", MAGIC);
	for (int i = 0; c && i < c->n; i++) {
		const entry_t *e = &c->e[i];

		sb_printf(&s, "k %s %" PRIu64 " %d %d %d\n", e->key, e->cap, e->batch, e->quantum, e->n);
		for (int r = 0; r < e->n; r++)
			sb_printf(&s, "%d %d %.17g %" PRIu64 "\n", e->m[r].b, e->m[r].algo,
				  e->m[r].time, e->m[r].ws);
	}
	if (!s.oom)
		sb_printf(&s, "sum %016" PRIx64 "\n", fnv1a(s.p, s.n));
	if (s.oom) {
		free(s.p);
		return NULL;
	}
	if (len)
		*len = s.n;
	return s.p;
}

/* ---- parsing ---- */

typedef struct {
	const char *p, *end;
	char *why;
	size_t whylen;
} rd_t;

static solver_status_t bad(rd_t *r, solver_status_t st, const char *what)
{
	if (r->why && r->whylen)
		snprintf(r->why, r->whylen, "%s", what);
	return st;
}

/* The next space-separated token on the current line: [*s, *s + *n). */
static bool token(rd_t *r, const char **s, size_t *n)
{
	while (r->p < r->end && *r->p == ' ')
		r->p++;
	*s = r->p;
	while (r->p < r->end && *r->p != ' ' && *r->p != '\n')
		r->p++;
	*n = (size_t)(r->p - *s);
	return *n > 0;
}

static bool eol(rd_t *r)
{
	while (r->p < r->end && *r->p == ' ')
		r->p++;
	if (r->p < r->end && *r->p == '\n') {
		r->p++;
		return true;
	}
	return false;
}

static bool tok_u64(rd_t *r, uint64_t max, uint64_t *out)
{
	const char *s;
	size_t n;
	char buf[32], *e;
	unsigned long long v;

	if (!token(r, &s, &n) || n >= sizeof(buf) || *s < '0' || *s > '9')
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &e, 10);
	if (errno || *e || v > max)
		return false;
	*out = v;
	return true;
}

static bool tok_int(rd_t *r, int min, int max, int *out)
{
	uint64_t v;

	if (!tok_u64(r, (uint64_t)max, &v) || (int)v < min)
		return false;
	*out = (int)v;
	return true;
}

static bool tok_time(rd_t *r, double *out)
{
	const char *s;
	size_t n;
	char buf[64], *e;
	double v;

	if (!token(r, &s, &n) || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtod(buf, &e);
	if (errno || *e || !isfinite(v) || !(v > 0) || v > 1e12)
		return false;
	*out = v;
	return true;
}

solver_status_t solver_cache_parse(solver_cache_t *c, const char *text, size_t len,
				   char *why, size_t whylen)
{
	rd_t r = { text, text + len, why, whylen };
	const char *sum_at = NULL;
	solver_cache_t *tmp;
	solver_status_t st = SOLVER_OK;
	size_t ml = strlen(MAGIC);

	if (!c || (!text && len))
		return bad(&r, SOLVER_EINVAL, "no cache");
	if (len < ml || memcmp(text, MAGIC, ml) != 0)
		return bad(&r, SOLVER_EFOREIGN, "does not start with \"vmem-solver-cache 1\"");
	if (memchr(text, '\0', len))
		return bad(&r, SOLVER_ECORRUPT, "contains a NUL byte");
	/* the checksum line is the last line */
	{
		const char *q = text + len;

		if (len < ml + 21 || q[-1] != '\n')
			return bad(&r, SOLVER_ECORRUPT, "truncated (no final checksum line)");
		q -= 1;
		while (q > text && q[-1] != '\n')
			q--;
		sum_at = q;
		if ((size_t)(text + len - sum_at) != 21 || memcmp(sum_at, "sum ", 4) != 0)
			return bad(&r, SOLVER_ECORRUPT, "truncated (no final checksum line)");
		char hex[17], *e;

		memcpy(hex, sum_at + 4, 16);
		hex[16] = '\0';
		errno = 0;
		uint64_t want = strtoull(hex, &e, 16);

		if (errno || *e || want != fnv1a(text, (size_t)(sum_at - text)))
			return bad(&r, SOLVER_ECORRUPT, "checksum mismatch (edited or damaged)");
	}
	tmp = solver_cache_new();
	if (!tmp)
		return bad(&r, SOLVER_ENOMEM, "out of memory");
	r.p = text + ml;
	r.end = sum_at;
	while (r.p < r.end) {
		const char *s;
		size_t n;
		char key[SOLVER_CACHE_KEY_MAX + 1];
		uint64_t cap;
		int batch, quantum, rows;
		solver_meas_t *m;
		solver_kernel_t k;

		if (!token(&r, &s, &n) || n != 1 || *s != 'k') {
			st = bad(&r, SOLVER_ECORRUPT, "expected a record line \"k ...\"");
			break;
		}
		if (!token(&r, &s, &n) || n > SOLVER_CACHE_KEY_MAX) {
			st = bad(&r, SOLVER_ECORRUPT, "bad key");
			break;
		}
		memcpy(key, s, n);
		key[n] = '\0';
		if (!key_ok(key) || find(tmp, key) >= 0) {
			st = bad(&r, SOLVER_ECORRUPT, "bad or duplicate key");
			break;
		}
		if (!tok_u64(&r, UINT64_MAX, &cap) || !tok_int(&r, 1, 1 << 20, &batch) ||
		    !tok_int(&r, 1, 64, &quantum) || !tok_int(&r, 0, MAX_ROWS, &rows) || !eol(&r)) {
			st = bad(&r, SOLVER_ECORRUPT, "bad record header");
			break;
		}
		if (tmp->n >= MAX_ENTRIES) {
			st = bad(&r, SOLVER_ECORRUPT, "too many records");
			break;
		}
		m = malloc(((size_t)rows + 1) * sizeof(*m));
		if (!m) {
			st = bad(&r, SOLVER_ENOMEM, "out of memory");
			break;
		}
		for (int i = 0; i < rows; i++) {
			uint64_t ws;

			if (!tok_int(&r, 1, batch, &m[i].b) || !tok_int(&r, 0, 1 << 20, &m[i].algo) ||
			    !tok_time(&r, &m[i].time) || !tok_u64(&r, MAX_WS, &ws) || !eol(&r)) {
				st = bad(&r, SOLVER_ECORRUPT, "bad measurement line");
				break;
			}
			m[i].ws = ws;
		}
		if (st == SOLVER_OK) {
			k = (solver_kernel_t){ batch, quantum, rows, m };
			st = solver_cache_put(tmp, key, cap, &k);
			if (st == SOLVER_EINVAL)
				st = bad(&r, SOLVER_ECORRUPT, "inconsistent record");
			else if (st)
				bad(&r, st, "out of memory");
		}
		free(m);
		if (st)
			break;
	}
	if (st == SOLVER_OK)
		for (int i = 0; i < tmp->n && st == SOLVER_OK; i++) {
			solver_kernel_t k = { tmp->e[i].batch, tmp->e[i].quantum, tmp->e[i].n, tmp->e[i].m };

			st = solver_cache_put(c, tmp->e[i].key, tmp->e[i].cap, &k);
		}
	solver_cache_free(tmp);
	return st;
}
