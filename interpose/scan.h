/* interpose/scan.h - finding the tensors a kernel launch touches.
 *
 * A launch passes its parameters as opaque bytes.  vmem knows their
 * layout (offset and size of each parameter, from cudaFuncGetParamInfo /
 * cuFuncGetParamInfo) and one fact about its own memory: a pointer belongs
 * to vmem exactly when it falls in the reserved range (DESIGN.md point 1).
 * So every 8-byte-aligned word of the parameter buffer is tested with one
 * range check; a hit is a touched tensor, read-write because vmem cannot
 * know better.  Integers that happen to fall in the range are false
 * positives: they cost a fault-in, never correctness.  Pointers inside
 * struct parameters (arrays of pointers, TensorIterator-style offsets) are
 * found too, since whole parameters are scanned.
 *
 * The layout is queried once per function and kept in a lock-free hash.
 * This module is pure (no CUDA): the query is a callback, so unit tests
 * drive it with fakes.
 */
#ifndef VMEM_INTERPOSE_SCAN_H
#define VMEM_INTERPOSE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/event.h"

/* Most parameters a cached layout holds; longer kernels are scanned from
 * a fresh query on every launch (slow, correct). */
#define SCAN_MAX_PARAMS 256

typedef struct {
	uint32_t offset;   /* byte offset in the parameter buffer */
	uint32_t size;     /* bytes */
} scan_param_t;

/* What a known kernel family's parameters say of its pointer arguments'
 * extents (interpose/kernel_bounds.h): a family (KB_*, 0 = none) and the
 * largest element size of its operands. */
typedef struct {
	uint8_t family;
	uint8_t elem_bytes;
	uint8_t depth;   /* KB_TORCH_FOREACH: tensor lists in the metadata */
	uint8_t large;   /* KB_TORCH_FOREACH: the 32 KB parameter layout */
	uint8_t elem_min;   /* KB_TORCH_FOREACH: the smallest element size (1 unknown) */
} scan_bound_t;

/* The layout of one function's parameters. */
typedef struct {
	const void *func;
	int nparams;              /* -1: unknown (the query failed) */
	const scan_param_t *params;
	const char *name;         /* JSON-escaped kernel name without quotes, or NULL */
	scan_bound_t bound;       /* from the full name and the layout */
} scan_layout_t;

typedef bool (*scan_owns_fn)(uintptr_t p);

/* Static role names "arg0".."arg63" ("arg" past that): refs keep the
 * pointer, so roles must be static. */
const char *scan_role(int param);

/* Scans the parameters given as CUDA's array of pointers to values
 * (`args[i]` points to parameter i, `params[i].size` bytes).  Each 8-byte
 * word whose offset in the parameter buffer is a multiple of 8 and for
 * which owns() is true becomes a ref (bytes 0, VMEM_ACCESS_RW, role
 * "arg<i>"); a pointer already found is not repeated.  Returns the number
 * of refs written to `out` (at most `max`); *missed (may be NULL) receives
 * the owned words that did not fit.  Pure, thread-safe. */
int scan_args(void *const *args, const scan_param_t *params, int nparams,
	      scan_owns_fn owns, vmem_ref_t *out, int max, int *missed);

/* Whether `w` is one of the words scan_args reads in parameter `p` (its
 * value at `val`; NULL: false).  Pure, thread-safe. */
bool scan_param_holds(const void *val, scan_param_t p, uintptr_t w);

/* The same over a packed parameter buffer (cuLaunchKernel's `extra`
 * CU_LAUNCH_PARAM_BUFFER_POINTER form): every 8-byte-aligned word of the
 * `size` bytes at `buf` is tested; roles are "buf". */
int scan_buffer(const void *buf, size_t size, scan_owns_fn owns, vmem_ref_t *out,
		int max, int *missed);

/* Queries parameter `i` of `func`: 0 and fills offset and size, 1 when `i` is past
 * the last parameter, -1 when the layout cannot be known. */
typedef int (*scan_query_fn)(const void *func, int i, size_t *offset, size_t *size);
/* Writes the kernel's name (NUL-terminated) into buf; 0, or -1 unknown. */
typedef int (*scan_name_fn)(const void *func, char *buf, size_t len);

/* The cached layout of `func`, querying it on first sight.  The returned
 * layout stays valid for the life of the process (entries are never
 * removed; a module unloaded and a new function at the same address is
 * the one case this misses: see docs/launch-paths.md).  When the cache is
 * full, `tmp` (caller's storage, SCAN_MAX_PARAMS entries) holds a fresh
 * query.  Thread-safe, lock-free for cached functions. */
const scan_layout_t *scan_layout(const void *func, scan_query_fn query, scan_name_fn name,
				 scan_layout_t *tmp_layout, scan_param_t *tmp);

/* The cached layout of `func`, or NULL when it has not been queried yet
 * (lets a caller prepare for a query, e.g. save CUDA's last error). */
const scan_layout_t *scan_layout_find(const void *func);

/* Kernel handles (cudaKernel_t / CUkernel) vmem has seen handed out
 * (cudaLibraryGetKernel, cudaGetKernel, cuLibraryGetKernel, ...).
 * cudaLaunchKernel takes a host stub or such a handle under the same
 * `const void *`, but only stubs answer cudaFuncGetParamInfo (on a handle
 * a real driver reports cudaErrorInvalidValue, which reads as "no
 * parameters"), so a launch asks the kernel's layout the driver's way
 * (cuKernelGetParamInfo) when its function is a known handle.  Lock-free;
 * a full table drops new handles (their launches then say "layout
 * unknown"). */
void scan_handle_add(const void *handle);
bool scan_handle_known(const void *handle);

/* Forgets every cached layout and handle (tests only; not thread-safe). */
void scan_cache_reset(void);

#endif
