/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlopen() of libnl where a network is made; see libnl-internal.h for why.
 * libnl-route-3 is named by its SONAME, found at build time
 * (CMakeLists.txt), so the ABI is the one the headers describe; libnl-3
 * comes with it as its dependency, and dlsym() on libnl-route-3's handle
 * finds libnl-3's functions too (the handle's scope is the library and its
 * dependencies). The loader runs libnl's constructors (the cache and link
 * types' registrations) at the dlopen(), not at every hutch start.
 */
#include <stddef.h>

#include "cleanup.h"
#include "dl.h"
#include "netpolicy.h"

#define HUTCH_NL_NO_REDIRECT
#include "libnl-internal.h"

#ifndef HUTCH_NL_SONAME
#error "HUTCH_NL_SONAME must name libnl-route-3's SONAME (set by CMakeLists.txt)"
#endif
#ifndef HUTCH_NL_PACKAGES
#error "HUTCH_NL_PACKAGES must name the packages of libnl-route-3 and libnl-3 (CMakeLists.txt)"
#endif

struct hutch_nl hutch_nl;

/* The names as one string pool and the slots' offsets (dl.h) */
#define X(fn) #fn "\0"
static const char names[] = HUTCH_NL_SYMBOLS(X);
#undef X
static const size_t offsets[] = {
#define X(fn) offsetof(struct hutch_nl, fn),
	HUTCH_NL_SYMBOLS(X)
#undef X
};

int hutch_nl_load(struct hutch_err *err)
{
	int r;

	if (hutch_nl.rtnl_route_set_type) /* the last slot: a whole table */
		return 0;
	r = hutch_dl_load(HUTCH_NL_SONAME, "libnl", names, offsets, ELEMENTSOF(offsets), &hutch_nl,
	                  err);
	if (r < 0)
		return hutch_err_prefix(err, "a sandbox's network needs libnl (Debian: apt-get "
		                             "install " HUTCH_NL_PACKAGES ")");
	return 0;
}

int hutch_net_libnl_check(struct hutch_err *err)
{
	return hutch_nl_load(err);
}
