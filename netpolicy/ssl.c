/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlopen() of OpenSSL for header bindings; see ssl-internal.h for why.
 * libssl is named by its SONAME, found at build time (CMakeLists.txt), so
 * the ABI is the one the headers describe; its libcrypto comes with it as
 * its dependency, and dlsym() on libssl's handle finds libcrypto's
 * functions too (the handle's scope is the library and its dependencies).
 */
#include <stddef.h>

#include "cleanup.h"
#include "dl.h"

#define HUTCH_SSL_NO_REDIRECT
#include "ssl-internal.h"

#ifndef HUTCH_SSL_SONAME
#error "HUTCH_SSL_SONAME must name libssl's SONAME (set by CMakeLists.txt)"
#endif

struct hutch_ssl hutch_ssl;

/* The names as one string pool and the slots' offsets (dl.h) */
#define X(fn) #fn "\0"
static const char names[] = HUTCH_SSL_SYMBOLS(X);
#undef X
static const size_t offsets[] = {
#define X(fn) offsetof(struct hutch_ssl, fn),
	HUTCH_SSL_SYMBOLS(X)
#undef X
};

int hutch_ssl_load(struct hutch_err *err)
{
	if (hutch_ssl.X509_verify_cert_error_string)
		return 0;
	return hutch_dl_load(HUTCH_SSL_SONAME, "OpenSSL", names, offsets, ELEMENTSOF(offsets),
	                     &hutch_ssl, err);
}
