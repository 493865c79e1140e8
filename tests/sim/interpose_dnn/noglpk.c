/* tests/sim/interpose_dnn/noglpk.c - a machine without GLPK, for one process.
 *
 * Preloaded in front of libvmem.so, it answers every dlopen of a GLPK
 * library with NULL, as the dynamic loader does when the package is not
 * installed, and passes every other dlopen on.  run_solver.py's noglpk
 * check uses it to see that VMEM_WORKSPACE=wd says so once and runs wr.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

__attribute__((visibility("default"))) void *dlopen(const char *file, int flags)
{
	static void *(*real)(const char *, int);

	if (file && strstr(file, "libglpk"))
		return NULL;
	if (!real)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	return real ? real(file, flags) : NULL;
}
