/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlopen() into a table of function pointers (dl.h). The search path is
 * the one the dynamic loader used for the binary itself (ld.so.cache and
 * the system directories; LD_LIBRARY_PATH only as the loader honours it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "dl.h"

static void set_slot(void *table, size_t offset, void *p)
{
	/* POSIX guarantees object and function pointers convert. */
	memcpy((char *)table + offset, &p, sizeof(p));
}

int hutch_dl_load(const char *soname, const char *what, const char *names, const size_t *offsets,
                  size_t n, void *table, struct hutch_err *err)
{
	void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	const char *name = names;

	if (!lib) {
		const char *why = dlerror();
		return hutch_err_set(err, -ELIBACC, "load %s: %s", what, why ? why : soname);
	}
	for (size_t i = 0; i < n; i++, name += strlen(name) + 1) {
		void *p = dlsym(lib, name);

		if (!p) {
			while (i-- > 0) /* no half table */
				set_slot(table, offsets[i], NULL);
			(void)dlclose(lib);
			return hutch_err_set(err, -ELIBBAD, "%s has no '%s'", soname, name);
		}
		set_slot(table, offsets[i], p);
	}
	return 0;
}
