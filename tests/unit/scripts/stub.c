/* tests/unit/scripts/stub.c - a shared library that the script tests
 * preload in place of libvmem.so, so they can check the environment a
 * command sees without loading the real hooks.
 *
 * VMEM_STUB_UNIMPLEMENTED=all,conv,wd makes its constructor say what
 * libvmem.so says (interpose/init.c) when VMEM_POLICY or VMEM_WORKSPACE
 * names something it does not implement, so the harnesses' detection of
 * the policies a libvmem.so really has is tested against that message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vmem_run_test_stub;

static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);

		if (k == n && !strncmp(p, name, n))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

__attribute__((constructor)) static void stub_ctor(void)
{
	const char *un = getenv("VMEM_STUB_UNIMPLEMENTED");
	const char *pol = getenv("VMEM_POLICY"), *ws = getenv("VMEM_WORKSPACE");

	if (!un)
		return;
	if (pol && listed(un, pol))
		fprintf(stderr, "vmem: warning: VMEM_POLICY=%s: the vDNN policies are not implemented "
			"in this version; running the pool and the reactive layer only (as "
			"VMEM_POLICY=none)\n", pol);
	if (ws && listed(un, ws))
		fprintf(stderr, "vmem: warning: VMEM_WORKSPACE=%s: workspace division is not implemented "
			"in this version; convolutions run as the application asks (as "
			"VMEM_WORKSPACE=off)\n", ws);
}
