/* tests/sim/interpose/failshim.c - fault injection for libvmem.so's own
 * host allocations, preloaded before it (LD_PRELOAD="failshim.so
 * libvmem.so").  A malloc of exactly FAILSHIM_SIZE bytes called from
 * libvmem.so returns NULL; every other malloc is glibc's.  Used to make a
 * hooked call unable to hold its refs (interpose-refs-not-held). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t n);

static size_t fail_size;
static int ready;

void *malloc(size_t n)
{
	Dl_info di;

	if (!ready) {
		const char *v = getenv("FAILSHIM_SIZE");

		fail_size = v ? strtoul(v, NULL, 10) : 0;
		ready = 1;
	}
	if (fail_size && n == fail_size && dladdr(__builtin_return_address(0), &di) &&
	    di.dli_fname && strstr(di.dli_fname, "libvmem"))
		return NULL;
	return __libc_malloc(n);
}
