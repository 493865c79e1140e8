/* interpose/kernel_bounds.c - extents from a known kernel family's own
 * parameters (see kernel_bounds.h). */
#include "interpose/kernel_bounds.h"

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
		const char *q = p + 1;

		while ((*q >= '0' && *q <= '9') || (*q >= 'A' && *q <= 'Z'))
			q++;
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

scan_bound_t kb_classify(const char *name, const scan_param_t *params, int nparams)
{
	scan_bound_t none = { KB_NONE, 0 };
	size_t len, plen = strlen(TORCH_VEC_PREFIX), slen = strlen(TORCH_VEC_SUFFIX);
	const char *s;

	if (!name || !params || nparams != 3)
		return none;
	len = strlen(name);
	if (len < plen + slen || strncmp(name, TORCH_VEC_PREFIX, plen) != 0 ||
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
	return (scan_bound_t){ KB_TORCH_VECTORIZED, (uint8_t)functor_elem_bytes(s + 1) };
}

/* Whether the 8-aligned words of parameter `p` (value at `val`) hold `w`,
 * as scan_args reads them. */
static bool param_holds(const void *val, scan_param_t p, uintptr_t w)
{
	const unsigned char *v = val;
	uint32_t end = p.offset + p.size;

	if (!v)
		return false;
	for (uint32_t at = (p.offset + 7u) & ~7u; at + 8 <= end; at += 8) {
		uintptr_t word;

		memcpy(&word, v + (at - p.offset), sizeof(word));
		if (word == w)
			return true;
	}
	return false;
}

int kb_apply(scan_bound_t rule, void *const *args, const scan_param_t *params, int nparams,
	     vmem_ref_t *refs, int n)
{
	int32_t count;
	int bounded = 0;

	if (rule.family != KB_TORCH_VECTORIZED || nparams != 3 || !args || !args[0] ||
	    !rule.elem_bytes)
		return 0;
	memcpy(&count, args[0], sizeof(count));
	if (count <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		uintptr_t p = refs[i].ptr;

		if (param_holds(args[2], params[2], p) && !param_holds(args[1], params[1], p)) {
			refs[i].bytes = (size_t)count * rule.elem_bytes;
			refs[i].access |= VMEM_ACCESS_UPTO;
			bounded++;
		}
	}
	return bounded;
}
