/* interpose/scan.c - kernel-parameter scanning and the per-function
 * layout cache (see scan.h). */
#include "interpose/scan.h"

#include <string.h>

#include "interpose/config.h"
#include "interpose/kernel_bounds.h"

static const char *const roles[] = {
	"arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7",
	"arg8", "arg9", "arg10", "arg11", "arg12", "arg13", "arg14", "arg15",
	"arg16", "arg17", "arg18", "arg19", "arg20", "arg21", "arg22", "arg23",
	"arg24", "arg25", "arg26", "arg27", "arg28", "arg29", "arg30", "arg31",
	"arg32", "arg33", "arg34", "arg35", "arg36", "arg37", "arg38", "arg39",
	"arg40", "arg41", "arg42", "arg43", "arg44", "arg45", "arg46", "arg47",
	"arg48", "arg49", "arg50", "arg51", "arg52", "arg53", "arg54", "arg55",
	"arg56", "arg57", "arg58", "arg59", "arg60", "arg61", "arg62", "arg63",
};

const char *scan_role(int param)
{
	if (param >= 0 && param < (int)(sizeof(roles) / sizeof(roles[0])))
		return roles[param];
	return "arg";
}

static bool seen(const vmem_ref_t *out, int n, uintptr_t p)
{
	for (int i = 0; i < n; i++)
		if (out[i].ptr == p)
			return true;
	return false;
}

static int add(vmem_ref_t *out, int n, int max, int *missed, uintptr_t p, const char *role)
{
	if (seen(out, n, p))
		return n;
	if (n >= max) {
		(*missed)++;
		return n;
	}
	out[n].ptr = p;
	out[n].bytes = 0;
	out[n].access = VMEM_ACCESS_RW;
	out[n].role = role;
	return n + 1;
}

/* Word k of parameter p (value at val) as every reader here takes them:
 * the k-th 8-aligned offset of the parameter buffer that p spans whole.
 * False past the last. */
static bool param_word(const unsigned char *val, scan_param_t p, uint32_t k, uintptr_t *word)
{
	uint32_t w = ((p.offset + 7u) & ~7u) + 8u * k;

	if (w + 8 > p.offset + p.size)
		return false;
	memcpy(word, val + (w - p.offset), sizeof(*word));
	return true;
}

int scan_args(void *const *args, const scan_param_t *params, int nparams,
	      scan_owns_fn owns, vmem_ref_t *out, int max, int *missed)
{
	int n = 0, miss = 0;

	for (int i = 0; i < nparams; i++) {
		uintptr_t word;

		if (!args[i])
			continue;
		for (uint32_t k = 0; param_word(args[i], params[i], k, &word); k++)
			if (owns(word))
				n = add(out, n, max, &miss, word, scan_role(i));
	}
	if (missed)
		*missed = miss;
	return n;
}

bool scan_param_holds(const void *val, scan_param_t p, uintptr_t w)
{
	uintptr_t word;

	if (!val)
		return false;
	for (uint32_t k = 0; param_word(val, p, k, &word); k++)
		if (word == w)
			return true;
	return false;
}

int scan_buffer(const void *buf, size_t size, scan_owns_fn owns, vmem_ref_t *out,
		int max, int *missed)
{
	const unsigned char *b = buf;
	int n = 0, miss = 0;

	/* The buffer starts 8-aligned in the kernel's parameter space. */
	for (size_t w = 0; b && w + 8 <= size; w += 8) {
		uintptr_t word;

		memcpy(&word, b + w, sizeof(word));
		if (owns(word))
			n = add(out, n, max, &miss, word, "buf");
	}
	if (missed)
		*missed = miss;
	return n;
}

/* ---- layout cache ----
 * Open addressing on the function address.  A slot is claimed by CAS on
 * `key`, filled, then published by storing `ready` (release); readers
 * that find a claimed slot not yet ready query themselves into `tmp`.
 * Parameter arrays come from a bump arena, never freed. */

#define CACHE_SLOTS 8192
#define ARENA_PARAMS (1u << 18)
#define NAME_MAX_LEN 96

typedef struct {
	const void *key;          /* atomic */
	int ready;                /* atomic */
	scan_layout_t layout;
	char name[NAME_MAX_LEN];
} cache_slot_t;

static cache_slot_t cache[CACHE_SLOTS];
static scan_param_t arena[ARENA_PARAMS];
static uint32_t arena_used;   /* atomic */

#define HANDLE_SLOTS 16384

static const void *handles[HANDLE_SLOTS];   /* atomic; NULL = free */

static unsigned handle_slot(const void *h)
{
	uintptr_t k = (uintptr_t)h;

	k ^= k >> 21;
	k *= 0xff51afd7ed558ccdull;
	return (unsigned)(k >> 40) % HANDLE_SLOTS;
}

void scan_handle_add(const void *h)
{
	unsigned s = handle_slot(h);

	if (!h)
		return;
	for (unsigned probe = 0; probe < 128; probe++) {
		const void **slot = &handles[(s + probe) % HANDLE_SLOTS];
		const void *expected = NULL;

		if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == h)
			return;
		if (__atomic_compare_exchange_n(slot, &expected, h, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE) || expected == h)
			return;
	}
}

bool scan_handle_known(const void *h)
{
	unsigned s = handle_slot(h);

	if (!h)
		return false;
	for (unsigned probe = 0; probe < 128; probe++) {
		const void *k = __atomic_load_n(&handles[(s + probe) % HANDLE_SLOTS], __ATOMIC_ACQUIRE);

		if (k == h)
			return true;
		if (!k)
			return false;
	}
	return false;
}

void scan_cache_reset(void)
{
	memset(cache, 0, sizeof(cache));
	memset(handles, 0, sizeof(handles));
	arena_used = 0;
}

static void query_into(const void *func, scan_query_fn query, scan_name_fn namefn,
		       scan_layout_t *l, scan_param_t *params, int cap, char *name, size_t nlen)
{
	int i;

	l->func = func;
	l->params = params;
	l->name = NULL;
	l->nparams = -1;
	l->bound = (scan_bound_t){ KB_NONE, 0, 0, 0, 0 };
	for (i = 0; i < cap; i++) {
		size_t off, size;
		int rc = query(func, i, &off, &size);

		if (rc == 1)
			break;
		if (rc != 0 || off > UINT32_MAX || size > UINT32_MAX)
			return;
		params[i].offset = (uint32_t)off;
		params[i].size = (uint32_t)size;
	}
	if (i == cap) {
		size_t off, size;

		if (query(func, i, &off, &size) != 1)
			return;   /* more than SCAN_MAX_PARAMS: unknown (cached so; see launch-paths.md) */
	}
	l->nparams = i;
	if (namefn) {
		/* The whole name (template arguments run long) decides the
		 * bound; the trace keeps its head. */
		char raw[2048];

		if (namefn(func, raw, sizeof(raw)) != 0)
			return;
		l->bound = kb_classify(raw, params, i);
		if (name) {
			size_t n = vmem_json_escape(raw, name, nlen);

			/* Drop the quotes: the launch hook adds its own. */
			if (n >= 2) {
				memmove(name, name + 1, n - 2);
				name[n - 2] = '\0';
				l->name = name;
			}
		}
	}
}

static unsigned slot_of(const void *func)
{
	uintptr_t k = (uintptr_t)func;

	k ^= k >> 17;
	k *= 0x9e3779b97f4a7c15ull;
	return (unsigned)(k >> 40) % CACHE_SLOTS;
}

const scan_layout_t *scan_layout_find(const void *func)
{
	unsigned h = slot_of(func);

	for (unsigned probe = 0; probe < 64; probe++) {
		cache_slot_t *s = &cache[(h + probe) % CACHE_SLOTS];
		const void *key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (key == func)
			return __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE) ? &s->layout : NULL;
		if (key == NULL)
			return NULL;
	}
	return NULL;
}

const scan_layout_t *scan_layout(const void *func, scan_query_fn query, scan_name_fn name,
				 scan_layout_t *tmp_layout, scan_param_t *tmp)
{
	unsigned h = slot_of(func);

	for (unsigned probe = 0; probe < 64; probe++) {
		cache_slot_t *s = &cache[(h + probe) % CACHE_SLOTS];
		const void *key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (key == func) {
			if (__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE))
				return &s->layout;
			break;   /* another thread is filling it */
		}
		if (key != NULL)
			continue;
		const void *expected = NULL;

		if (!__atomic_compare_exchange_n(&s->key, &expected, func, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (expected == func)
				break;
			continue;
		}
		/* Claimed: query into a scratch, then copy into the arena. */
		query_into(func, query, name, tmp_layout, tmp, SCAN_MAX_PARAMS,
			   s->name, sizeof(s->name));
		s->layout = *tmp_layout;
		if (tmp_layout->nparams > 0) {
			uint32_t n = (uint32_t)tmp_layout->nparams;
			uint32_t at = __atomic_fetch_add(&arena_used, n, __ATOMIC_RELAXED);

			if (at + n > ARENA_PARAMS)
				return tmp_layout;   /* arena full: the slot stays unready */
			memcpy(&arena[at], tmp, n * sizeof(*tmp));
			s->layout.params = &arena[at];
		}
		/* An unknown layout (-1) is cached too: asking again on every
		 * launch would not change the answer. */
		__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
		return &s->layout;
	}
	/* Cache full, or being filled by another thread: a fresh query. */
	query_into(func, query, name, tmp_layout, tmp, SCAN_MAX_PARAMS, NULL, 0);
	return tmp_layout;
}
