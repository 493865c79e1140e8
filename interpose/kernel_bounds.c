/* interpose/kernel_bounds.c - extents from a known kernel family's own
 * parameters (see kernel_bounds.h). */
#include "interpose/kernel_bounds.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* at::native::vectorized_elementwise_kernel<, and the end of its full
 * name: the template's and the name's closing E, then void (int, T0_,
 * T1_) - the three parameters (N, the functor, the pointer array). */
#define TORCH_VEC_PREFIX "_ZN2at6native29vectorized_elementwise_kernelILi"
#define TORCH_VEC_SUFFIX "EEviT0_T1_"
#define ELEM_MAX 16   /* c10::complex<double>, PyTorch's largest scalar */

/* at::native's typed functor wrappers whose leading template arguments
 * are the types of every operand of the kernel they run (Loops.cuh,
 * BinaryInternal.h, Fill.cu): how many of them to read. */
static const struct {
	const char *name;   /* <length><identifier>, as mangled */
	int ntypes;
} typed_functors[] = {
	{ "11FillFunctor", 1 },
	{ "15CUDAFunctor_add", 1 },
	{ "21CUDAFunctorOnSelf_add", 1 },
	{ "22CUDAFunctorOnOther_add", 1 },
	{ "13BinaryFunctor", 3 },
	{ "14AUnaryFunctor", 3 },
	{ "14BUnaryFunctor", 3 },
};

/* c10's scalar classes, as their first mention in a name spells them. */
static const struct {
	const char *code;
	int bytes;
} c10_scalars[] = {
	{ "N3c104HalfE", 2 },
	{ "N3c108BFloat16E", 2 },
	{ "N3c107complexIfEE", 8 },
	{ "N3c107complexIdEE", 16 },
	{ "N3c1013Float8_e4m3fnE", 1 },
	{ "N3c1011Float8_e5m2E", 1 },
};

static int builtin_bytes(char c)
{
	switch (c) {
	case 'b': case 'c': case 'a': case 'h':
		return 1;
	case 's': case 't':
		return 2;
	case 'i': case 'j': case 'f':
		return 4;
	case 'l': case 'm': case 'x': case 'y': case 'd':
		return 8;
	default:
		return 0;
	}
}

/* Past a substitution's sequence id (base 36: digits and capitals; empty
 * in S_), to its closing '_'. */
static const char *past_seq_id(const char *s)
{
	while ((*s >= '0' && *s <= '9') || (*s >= 'A' && *s <= 'Z'))
		s++;
	return s;
}

/* One template argument at *s that is a scalar type: its size, *s moved
 * past it.  A substitution (S_, S<seq>_) in an operand-type position can
 * only name a type already seen there, so it is at most `seen_max` (0 when
 * nothing was seen: unknown).  0 and *s unmoved when not a scalar. */
static int scalar_arg(const char **s, int seen_max)
{
	const char *p = *s;
	int b = builtin_bytes(*p);

	if (b) {
		*s = p + 1;
		return b;
	}
	for (size_t i = 0; i < sizeof(c10_scalars) / sizeof(c10_scalars[0]); i++) {
		size_t n = strlen(c10_scalars[i].code);

		if (strncmp(p, c10_scalars[i].code, n) == 0) {
			*s = p + n;
			return c10_scalars[i].bytes;
		}
	}
	if (p[0] == 'S' && seen_max > 0) {
		const char *q = past_seq_id(p + 1);

		if (*q == '_') {
			*s = q + 1;
			return seen_max;
		}
	}
	return 0;
}

/* The largest operand element size the functor's mangled type at `s`
 * states, or ELEM_MAX when it states none (a lambda, another functor). */
static int functor_elem_bytes(const char *s)
{
	if (strncmp(s, "NS0_", 4) != 0)   /* S0_ = at::native */
		return ELEM_MAX;
	s += 4;
	for (size_t i = 0; i < sizeof(typed_functors) / sizeof(typed_functors[0]); i++) {
		size_t n = strlen(typed_functors[i].name);
		int max = 0;

		if (strncmp(s, typed_functors[i].name, n) != 0 || s[n] != 'I')
			continue;
		s += n + 1;
		for (int k = 0; k < typed_functors[i].ntypes; k++) {
			int b = scalar_arg(&s, max);

			if (!b)
				return ELEM_MAX;
			if (b > max)
				max = b;
		}
		return max;
	}
	return ELEM_MAX;
}

static scan_bound_t classify_vectorized(const char *name, const scan_param_t *params,
					int nparams)
{
	scan_bound_t none = { KB_NONE, 0, 0, 0, 0 };
	size_t len = strlen(name), plen = strlen(TORCH_VEC_PREFIX), slen = strlen(TORCH_VEC_SUFFIX);
	const char *s;

	if (nparams != 3 || len < plen + slen || strncmp(name, TORCH_VEC_PREFIX, plen) != 0 ||
	    strcmp(name + len - slen, TORCH_VEC_SUFFIX) != 0)
		return none;
	/* N is a 4-byte int at offset 0; the last parameter an 8-aligned
	 * array of pointers. */
	if (params[0].offset != 0 || params[0].size != 4 || params[2].size == 0 ||
	    params[2].size % 8 != 0 || params[2].offset % 8 != 0)
		return none;
	/* Past the vector size (Li<digits>E) to the functor's type. */
	s = name + plen;
	while (*s >= '0' && *s <= '9')
		s++;
	if (*s != 'E')
		return none;
	return (scan_bound_t){ KB_TORCH_VECTORIZED, (uint8_t)functor_elem_bytes(s + 1), 0, 0, 0 };
}

/* TensorListMetadata<depth, large> (MultiTensorApply.cuh): per depth, the
 * most tensors one launch lists, and the blocks it runs; the 32 KB layout
 * (CUDA >= 12.1 with a driver that takes large parameters) holds seven
 * times as many and indexes blocks with 16 bits instead of 8. */
static const int foreach_tensors[2][5] = { { 110, 64, 48, 36, 30 }, { 770, 448, 336, 252, 210 } };
static const int foreach_blocks[2] = { 320, 2240 };

/* Where TensorListMetadata<depth, large> keeps its arrays, in order:
 * addresses[depth][m], numel_for_tensor[m] (int64), block_to_tensor[nb]
 * (u8 or u16), block_to_chunk[nb] (int, 4-aligned),
 * start_tensor_this_launch (int); its size 8-aligned. */
typedef struct {
	int m;            /* tensors a list holds */
	uint32_t nb;      /* blocks */
	size_t numel, b2t, b2c, size;
} fe_layout_t;

static fe_layout_t foreach_layout(int depth, int large)
{
	fe_layout_t l;

	l.m = foreach_tensors[large][depth - 1];
	l.nb = (uint32_t)foreach_blocks[large];
	l.numel = (size_t)depth * (size_t)l.m * 8;
	l.b2t = l.numel + (size_t)l.m * 8;
	l.b2c = (l.b2t + l.nb * (large ? 2u : 1u) + 3u) & ~(size_t)3u;
	l.size = (l.b2c + l.nb * 4u + 4u + 7u) & ~(size_t)7u;
	return l;
}

/* The largest and smallest operand element sizes the foreach functor's
 * mangled type at `s` states: every scalar type among its template
 * arguments (the lists' types: T, and a copy's source type), integer
 * literals skipped; ELEM_MAX and 1 when an argument is neither. */
static int foreach_functor_elem_bytes(const char *s, int *min)
{
	int max = 0, lo = ELEM_MAX;

	*min = 1;

	/* N S<seq>_ <length><name> I : a functor in the file's anonymous
	 * namespace (or at::native's) */
	if (*s++ != 'N' || *s++ != 'S')
		return ELEM_MAX;
	s = past_seq_id(s);
	if (*s++ != '_' || !(*s >= '1' && *s <= '9'))
		return ELEM_MAX;
	{
		char *end;
		unsigned long n = strtoul(s, &end, 10);

		if (strlen(end) < n + 1)
			return ELEM_MAX;
		s = end + n;
	}
	if (*s++ != 'I')
		return ELEM_MAX;
	while (*s && *s != 'E') {
		int b;

		if (s[0] == 'L' && (s[1] == 'i' || s[1] == 'b' || s[1] == 'j' || s[1] == 'l')) {
			s += 2;
			if (*s == 'n')   /* a negative literal */
				s++;
			while (*s >= '0' && *s <= '9')
				s++;
			if (*s++ != 'E')
				return ELEM_MAX;
			continue;
		}
		b = scalar_arg(&s, max);
		if (!b)
			return ELEM_MAX;
		if (b > max)
			max = b;
		if (b < lo)
			lo = b;
	}
	if (*s != 'E' || !max)
		return ELEM_MAX;
	*min = lo;
	return max;
}

static scan_bound_t classify_foreach(const char *name, const scan_param_t *params, int nparams)
{
	static const char kernel[] = "25multi_tensor_apply_kernelINS";
	static const char meta[] = "18TensorListMetadataILi";
	scan_bound_t none = { KB_NONE, 0, 0, 0, 0 };
	const char *s;
	int depth, large = 0, max, min;

	/* at::native::(anonymous)::multi_tensor_apply_kernel<
	 * at::native::(anonymous)::TensorListMetadata<depth[, large]>, the
	 * metadata's namespace a substitution (S1_ in PyTorch 2.x) */
	if (nparams < 2 || strncmp(name, "_ZN2at6native", 13) != 0 ||
	    !(s = strstr(name, kernel)))
		return none;
	s = past_seq_id(s + strlen(kernel));
	if (*s++ != '_' || strncmp(s, meta, strlen(meta)) != 0)
		return none;
	s += strlen(meta);
	if (*s < '1' || *s > '5' || s[1] != 'E')
		return none;
	depth = *s - '0';
	s += 2;
	if (s[0] == 'L' && s[1] == 'b' && (s[2] == '0' || s[2] == '1') && s[3] == 'E') {
		large = s[2] == '1';
		s += 4;
	}
	if (s[0] != 'E' || s[1] != 'E')   /* its template arguments, its nested name */
		return none;
	s += 2;
	/* the metadata, passed by value, is the first parameter: its size
	 * says the layout is the one this rule reads */
	if (params[0].offset != 0 || params[0].size != foreach_layout(depth, large).size)
		return none;
	max = foreach_functor_elem_bytes(s, &min);
	return (scan_bound_t){ KB_TORCH_FOREACH, (uint8_t)max, (uint8_t)depth, (uint8_t)large,
			       (uint8_t)min };
}

scan_bound_t kb_classify(const char *name, const scan_param_t *params, int nparams)
{
	scan_bound_t b = { KB_NONE, 0, 0, 0, 0 };

	if (!name || !params)
		return b;
	b = classify_vectorized(name, params, nparams);
	if (b.family == KB_NONE)
		b = classify_foreach(name, params, nparams);
	return b;
}

/* Whether `w` is a word of any parameter from `first` on. */
static bool params_hold(void *const *args, const scan_param_t *params, int first, int nparams,
			uintptr_t w)
{
	for (int i = first; i < nparams; i++)
		if (scan_param_holds(args[i], params[i], w))
			return true;
	return false;
}

static int apply_vectorized(scan_bound_t rule, void *const *args, const scan_param_t *params,
			    vmem_ref_t *refs, int n)
{
	int32_t count;
	int bounded = 0;

	if (!args[0])
		return 0;
	memcpy(&count, args[0], sizeof(count));
	if (count <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		uintptr_t p = refs[i].ptr;

		if (scan_param_holds(args[2], params[2], p) && !scan_param_holds(args[1], params[1], p)) {
			refs[i].bytes = (size_t)count * rule.elem_bytes;
			refs[i].access |= VMEM_ACCESS_UPTO;
			bounded++;
		}
	}
	return bounded;
}

/* Most slots one foreach metadata holds: depth x tensors, largest for
 * depth 5 of the 32 KB layout (5 x 210 = 1050). */
#define FOREACH_MAX_SLOTS 1050
#define FOREACH_MAX_TENSORS 770   /* depth 1, 32 KB layout */

/* The slots a foreach launch's blocks name, and the chunks they name of
 * each: block b works on chunk block_to_chunk[b] of the tensor in slot
 * block_to_tensor[b] (multi_tensor_apply's contract with its functors),
 * so with a 1-D grid of `blocks` blocks the other slots are untouched -
 * they keep what an earlier launch of the same call wrote there (PyTorch
 * reuses the metadata).  cmin/cmax[k]: the chunks of slot k.  False
 * (every slot counts, whole) when the grid is unknown or a block names no
 * slot. */
static bool foreach_used(scan_bound_t rule, const fe_layout_t *l, const unsigned char *meta,
			 uint32_t blocks, bool *used, int32_t *cmin, int32_t *cmax)
{
	if (blocks == 0 || blocks > l->nb)
		return false;
	memset(used, 0, (size_t)l->m * sizeof(*used));
	for (uint32_t b = 0; b < blocks; b++) {
		unsigned t;
		int32_t c;

		if (rule.large) {
			uint16_t t16;

			memcpy(&t16, meta + l->b2t + 2 * (size_t)b, sizeof(t16));
			t = t16;
		} else {
			t = meta[l->b2t + b];
		}
		memcpy(&c, meta + l->b2c + 4 * (size_t)b, sizeof(c));
		if (t >= (unsigned)l->m)
			return false;
		if (!used[t] || c < cmin[t])
			cmin[t] = c;
		if (!used[t] || c > cmax[t])
			cmax[t] = c;
		used[t] = true;
	}
	return true;
}

/* Checks this launch against PyTorch's kChunkSize (KB_CHUNK elements, a
 * power of two): every chunk a block names lies inside its tensor, and a
 * tensor the launch finished (a later slot is named: multi_tensor_apply
 * moves on only after a tensor's last chunk) ends at chunk ceil(numel /
 * KB_CHUNK) - 1.  A finished tensor of more than KB_CHUNK elements tells
 * a chunk size of KB_CHUNK from any other power of two; one such launch
 * confirms it, any launch that contradicts it refutes it for good. */
static void foreach_check_chunks(kb_state_t *st, int m, const bool *used, const int32_t *cmin,
				 const int32_t *cmax, const int64_t *numel)
{
	bool confirm = false;

	for (int k = 0; k < m; k++) {
		int64_t chunks;

		if (!used[k])
			continue;
		if (numel[k] <= 0 || cmin[k] < 0)
			goto refute;
		chunks = (numel[k] + KB_CHUNK - 1) / KB_CHUNK;
		if (cmax[k] >= chunks)
			goto refute;
		if (k + 1 < m && used[k + 1]) {
			if (cmax[k] != chunks - 1)
				goto refute;
			confirm |= numel[k] > KB_CHUNK;
		}
	}
	if (confirm) {
		int unknown = KB_CHUNK_UNKNOWN;   /* a refutation, from any thread, stays */

		atomic_compare_exchange_strong(&st->chunk, &unknown, KB_CHUNK_CONFIRMED);
	}
	return;
refute:
	atomic_store(&st->chunk, KB_CHUNK_REFUTED);
}

/* One filled slot of the metadata: its address, its tensor's count, its
 * index, and whether a block of the launch names it. */
typedef struct {
	uintptr_t a;
	int64_t numel;
	int k;
	bool used;
} fe_slot_t;

static int cmp_slot(const void *x, const void *y)
{
	uintptr_t a = ((const fe_slot_t *)x)->a, b = ((const fe_slot_t *)y)->a;

	return a < b ? -1 : a > b;
}

/* A foreach kernel's tensors: slot k of list d is addresses[d][k] with
 * numel_for_tensor[k] elements.  A pointer in several slots gets the
 * largest extent; one only in slots no block names is not touched at all
 * and leaves the call (*dropped).  Once the chunk size is confirmed, a
 * pointer spans only the chunks the launch's blocks name: from the first
 * chunk's start at the smallest element size to the last one's end at the
 * largest (the lists of a copy differ in type) - one launch of a 64 MiB
 * weight split over two holds half of it, not all.  The slots are sorted
 * by address once per launch, so each ref is a binary search (a 32 KB
 * metadata has up to 1050 slots, and a launch as many refs). */
static int apply_foreach(scan_bound_t rule, void *const *args, const scan_param_t *params,
			 int nparams, uint32_t blocks, kb_state_t *st, vmem_ref_t *refs, int *n,
			 int *dropped, int *chunked)
{
	const unsigned char *meta = args[0];
	const fe_layout_t l = foreach_layout(rule.depth, rule.large);
	int m = l.m;
	bool used[FOREACH_MAX_TENSORS];
	int32_t cmin[FOREACH_MAX_TENSORS], cmax[FOREACH_MAX_TENSORS];
	int64_t numel[FOREACH_MAX_TENSORS];
	fe_slot_t slots[FOREACH_MAX_SLOTS];
	bool known, by_chunk;
	int bounded = 0, kept = 0, ns = 0;
	uint64_t emin = rule.elem_min ? rule.elem_min : 1;

	if (!meta)
		return 0;
	known = foreach_used(rule, &l, meta, blocks, used, cmin, cmax);
	memcpy(numel, meta + l.numel, (size_t)m * sizeof(*numel));
	if (known && st)
		foreach_check_chunks(st, m, used, cmin, cmax, numel);
	by_chunk = known && st && atomic_load(&st->chunk) == KB_CHUNK_CONFIRMED;
	for (int d = 0; d < rule.depth; d++)
		for (int k = 0; k < m; k++) {
			fe_slot_t *sl = &slots[ns];

			memcpy(&sl->a, meta + ((size_t)d * m + k) * 8, sizeof(sl->a));
			if (!sl->a)   /* never a ref: scan_args' owns() refuses 0 */
				continue;
			sl->numel = numel[k];
			sl->k = k;
			sl->used = !known || used[k];
			ns++;
		}
	qsort(slots, (size_t)ns, sizeof(*slots), cmp_slot);
	for (int i = 0; i < *n; i++) {
		uintptr_t p = refs[i].ptr;
		uint64_t lo = UINT64_MAX, hi = 0, whole = 0;
		int lo_i = 0, hi_i = ns;
		bool any = false;

		while (lo_i < hi_i) {   /* the first slot at p or above */
			int mid = lo_i + (hi_i - lo_i) / 2;

			if (slots[mid].a < p)
				lo_i = mid + 1;
			else
				hi_i = mid;
		}
		for (int j = lo_i; j < ns && slots[j].a == p; j++) {
			const fe_slot_t *sl = &slots[j];
			uint64_t a = 0, b;

			if (!sl->used || sl->numel <= 0 || (uint64_t)sl->numel > UINT64_MAX / 16)
				continue;
			b = (uint64_t)sl->numel * rule.elem_bytes;
			whole = b > whole ? b : whole;
			if (by_chunk) {
				uint64_t end = ((uint64_t)cmax[sl->k] + 1) * KB_CHUNK;

				a = (uint64_t)cmin[sl->k] * KB_CHUNK * emin;
				if (end < (uint64_t)sl->numel)
					b = end * rule.elem_bytes;
			}
			any = true;
			lo = a < lo ? a : lo;
			hi = b > hi ? b : hi;
		}
		refs[kept] = refs[i];
		/* held by the functor or the arguments too: any extent */
		if (lo_i == ns || slots[lo_i].a != p || params_hold(args, params, 1, nparams, p)) {
			kept++;
			continue;
		}
		if (!any && known) {   /* listed, in no slot a block names */
			(*dropped)++;
			continue;
		}
		if (any && hi > lo) {
			refs[kept].ptr = p + lo;
			refs[kept].bytes = hi - lo;
			refs[kept].access |= VMEM_ACCESS_UPTO;
			bounded++;
			*chunked += lo > 0 || hi < whole;
		}
		kept++;
	}
	*n = kept;
	return bounded;
}

int kb_apply(scan_bound_t rule, void *const *args, const scan_param_t *params, int nparams,
	     uint32_t blocks, kb_state_t *st, vmem_ref_t *refs, int *n, int *dropped, int *chunked)
{
	*dropped = 0;
	*chunked = 0;
	if (!args || !params || !rule.elem_bytes)
		return 0;
	if (rule.family == KB_TORCH_VECTORIZED && nparams == 3)
		return apply_vectorized(rule, args, params, refs, *n);
	if (rule.family == KB_TORCH_FOREACH && nparams >= 2 && rule.depth >= 1 && rule.depth <= 5 &&
	    params[0].size == foreach_layout(rule.depth, rule.large).size)
		return apply_foreach(rule, args, params, nparams, blocks, st, refs, n, dropped,
				     chunked);
	return 0;
}
