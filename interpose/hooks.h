/* interpose/hooks.h - symbol resolution and the re-entry guard shared by
 * every hook file and by the runtime.
 *
 * Real functions are found lazily: first in the library that defines them
 * (dlopen(soname, RTLD_NOLOAD), so libraries a framework loaded RTLD_LOCAL
 * are found), then dlsym(RTLD_NEXT).  Names are matched exactly.  A symbol
 * that cannot be found yields NULL, and the hook returns a defined error
 * instead of calling through it.
 */
#ifndef VMEM_INTERPOSE_HOOKS_H
#define VMEM_INTERPOSE_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "interpose/trace.h"
#include "policy/event.h"

/* Ensures vmem is initialised (pthread_once); safe from any hook. */
void vmem_init(void);

/* The real (next) definition of `name`, cached; NULL when no loaded or
 * loadable library defines it.  Never returns vmem's own hook. */
void *hook_real(const char *name);

/* Thread-local re-entry guard: true while this thread is inside a hook, so
 * nested calls go straight to the real function. */
bool hook_guard_enter(void);   /* false when already inside: caller passes through */
void hook_guard_leave(void);

/* One call in flight through a hook.  A hook fills it, prepares (the
 * runtime makes every ref resident and locks it), calls the real function,
 * then finishes (unlock, trace record, stats).  Lives on the hook's stack:
 * no allocation on the hot path.
 *
 *	hook_call_t c;
 *	hook_call_init(&c, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", stream);
 *	hook_call_ref(&c, x, xbytes, VMEM_ACCESS_R, "x");
 *	...
 *	if (hook_call_prepare(&c) != cudaSuccess) { finish; return the API's OOM status; }
 *	st = real(...);
 *	hook_call_finish(&c);
 */
typedef struct {
	vmem_op_kind_t kind;
	const char *api;
	const void *stream;
	int nrefs;
	vmem_ref_t refs[VMEM_MAX_REFS];
	trace_ref_t resolved[VMEM_MAX_REFS];
	uint64_t seq;
	uint64_t t_start;
	size_t args_len;
	char args[320];   /* JSON object body without braces; "" when none */
} hook_call_t;

void hook_call_init(hook_call_t *c, vmem_op_kind_t kind, const char *api, const void *stream);
/* Adds a touched range; NULL pointers and refs past VMEM_MAX_REFS are
 * ignored (the latter counted in the stats). */
void hook_call_ref(hook_call_t *c, const void *ptr, size_t bytes, uint8_t access, const char *role);
/* Appends `"key":value` pairs (printf-style body) to the args object. */
void hook_call_args(hook_call_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cudaSuccess, or cudaErrorMemoryAllocation when the call's refs cannot be
 * made resident together within the budget. */
cudaError_t hook_call_prepare(hook_call_t *c);
void hook_call_finish(hook_call_t *c);

#endif
