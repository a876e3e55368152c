/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The static libraries' constructors at first use (libinit.h). Each runs
 * in every process that links it: nettle's and liblzma's ask the CPU
 * (cpuid) which code to use. With libnl's nine (which register its cache
 * and link types, fill its name tables and read NLCB and NLDBG; libnl is
 * dlopen()ed since, netpolicy/libnl-internal.h) they were 3-5 page faults
 * and ~5 % of `hutch version`'s CPU time at its start, for libraries only
 * the network, image and journal paths call.
 */
#include <stdbool.h>

#include "libinit.h"

typedef void (*ctor_fn)(void);

/* Bounds of the table base/libinit.ld makes in the hutch executable; weak:
 * other executables (unit tests, fuzzers) have none, and both are NULL. */
extern const ctor_fn hutch_libinit_start[] __attribute__((weak, visibility("hidden")));
extern const ctor_fn hutch_libinit_end[] __attribute__((weak, visibility("hidden")));

void hutch_libinit_run(void)
{
	/* Process state by nature (what the constructors set up is libraries'
	 * globals); the runtime is single-threaded (STYLE.md 5). */
	static bool done;

	if (done)
		return;
	done = true;
	for (const ctor_fn *f = hutch_libinit_start; f && f < hutch_libinit_end; f++)
		(*f)();
}
