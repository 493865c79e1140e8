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

/* Ensures vmem is initialised (pthread_once); safe from any hook. */
void vmem_init(void);

/* The real (next) definition of `name`, cached; NULL when no loaded or
 * loadable library defines it.  Never returns vmem's own hook. */
void *hook_real(const char *name);

/* Thread-local re-entry guard: true while this thread is inside a hook, so
 * nested calls go straight to the real function. */
bool hook_guard_enter(void);   /* false when already inside: caller passes through */
void hook_guard_leave(void);

#endif
