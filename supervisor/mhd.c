/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlopen() of libmicrohttpd for the supervisor; see mhd.h for why. The
 * library is named by its SONAME, found at build time (CMakeLists.txt), so
 * the ABI is the one microhttpd.h describes (base/dl.h).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cleanup.h"
#include "dl.h"
#include "fdutil.h"
#include "log.h"

#include "mhd.h"

#ifndef HUTCH_MHD_SONAME
#error "HUTCH_MHD_SONAME must name libmicrohttpd's SONAME (set by CMakeLists.txt)"
#endif

struct hutch_mhd hutch_mhd;

#define MHD_SYMBOLS(X)                   \
	X(start_daemon_va)               \
	X(stop_daemon)                   \
	X(run)                           \
	X(get_timeout)                   \
	X(get_daemon_info)               \
	X(get_connection_info)           \
	X(get_connection_values)         \
	X(get_connection_values_n)       \
	X(lookup_connection_value)       \
	X(suspend_connection)            \
	X(resume_connection)             \
	X(create_response_from_buffer)   \
	X(create_response_from_callback) \
	X(add_response_header)           \
	X(queue_response)                \
	X(destroy_response)              \
	X(create_response_for_upgrade)   \
	X(upgrade_action)
/* The names as one string pool and the slots' offsets (base/dl.h) */
#define X(fn) "MHD_" #fn "\0"
static const char names[] = MHD_SYMBOLS(X);
#undef X
static const size_t offsets[] = {
#define X(fn) offsetof(struct hutch_mhd, fn),
	MHD_SYMBOLS(X)
#undef X
};
#undef SYM

bool hutch_mhd_is_loaded(void)
{
	return hutch_mhd.upgrade_action != NULL;
}

/*
 * libmicrohttpd's constructor calls gnutls_global_init() for its HTTPS
 * support, and gnutls's own constructor initialises the library too: ASN.1
 * trees, priority strings, the random generator — ~120 KiB of heap in every
 * supervisor (1000 sandboxes: 120 MiB) for TLS that hutch never serves (no
 * MHD_USE_TLS; the egress proxy only reads a ClientHello's SNI, by hand).
 * The executable exports this no-op under that name (CMakeLists.txt:
 * --export-dynamic-symbol), and the executable comes first in the lookup
 * scope, so the constructor binds to it (an unversioned definition
 * satisfies the versioned reference, glibc's check_match()); gnutls's own
 * constructor is skipped through GNUTLS_NO_IMPLICIT_INIT, set only around
 * the dlopen(). Were TLS ever wanted, this goes. Measured with a dlopen()
 * test program: heap in use 145 -> 27 KiB, Pss_Anon -140 KiB.
 */
int gnutls_global_init(void);
int gnutls_global_init(void)
{
	return 0;
}

#ifdef HUTCH_NOTLS_SO
/*
 * supervisor/notls/gnutls.c, built by CMakeLists.txt: a library named
 * libgnutls.so.30 (gnutls's SONAME) that defines the gnutls symbols
 * libmicrohttpd imports, as no-ops and traps. Loaded before
 * libmicrohttpd, it is what the dynamic loader takes for the library's
 * dependency (a needed name that matches a loaded object's SONAME is that
 * object), so gnutls, p11-kit, idn2, unistring, tasn1, nettle, hogweed,
 * gmp and ffi are never mapped: `hutch run -- true` -75 syscalls, -70
 * page faults (docs/performance.md). It is 5 KiB, embedded here and
 * loaded from a memfd (no file to install, none to go stale).
 */
__asm__(".pushsection .rodata\n"
        ".balign 64\n"
        ".globl hutch_notls_so\n"
        ".hidden hutch_notls_so\n"
        "hutch_notls_so:\n"
        ".incbin \"" HUTCH_NOTLS_SO "\"\n"
        ".globl hutch_notls_so_end\n"
        ".hidden hutch_notls_so_end\n"
        "hutch_notls_so_end:\n"
        ".popsection\n");
extern const unsigned char hutch_notls_so[], hutch_notls_so_end[];

/* The stand-in's handle, or NULL (nothing loaded: libmicrohttpd then loads
 * the real gnutls). The memfd can go once the object is mapped. */
static void *load_notls(void)
{
	_cleanup_close_ int fd = memfd_create("hutch-notls", MFD_CLOEXEC);
	char path[sizeof("/proc/self/fd/") + 12];
	void *lib;

	if (fd < 0 ||
	    hutch_write_all(fd, hutch_notls_so, (size_t)(hutch_notls_so_end - hutch_notls_so)) < 0)
		return NULL;
	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		hutch_log(HUTCH_LOG_DEBUG, "load the gnutls stand-in: %s, ignoring", dlerror());
	return lib;
}
#else
static void *load_notls(void)
{
	return NULL;
}
#endif

int hutch_mhd_load(struct hutch_err *err)
{
	void *notls;
	int r;

	if (hutch_mhd_is_loaded())
		return 0;
	notls = load_notls();
	(void)setenv("GNUTLS_NO_IMPLICIT_INIT", "1", 1);
	r = hutch_dl_load(HUTCH_MHD_SONAME, "the HTTP server library", names, offsets,
	                  ELEMENTSOF(offsets), &hutch_mhd, err);
	if (r < 0 && notls) {
		/* A libmicrohttpd that imports more of gnutls than the
		 * stand-in has (not the one hutch was built with): the real
		 * gnutls, as before. The failed dlopen() unloaded what it
		 * mapped; this unloads the stand-in. */
		hutch_log(HUTCH_LOG_DEBUG, "%s, loading the real gnutls", err->msg);
		(void)dlclose(notls);
		r = hutch_dl_load(HUTCH_MHD_SONAME, "the HTTP server library", names, offsets,
		                  ELEMENTSOF(offsets), &hutch_mhd, err);
	}
	(void)unsetenv("GNUTLS_NO_IMPLICIT_INIT");
	return r;
}

struct MHD_Daemon *hutch_mhd_start_daemon(unsigned int flags, uint16_t port,
                                          MHD_AcceptPolicyCallback apc, void *apc_cls,
                                          MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	va_start(ap, dh_cls);
	d = hutch_mhd.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}
