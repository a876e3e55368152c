/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libmicrohttpd, loaded with dlopen() by the supervisor only. The HTTP
 * server library pulls in gnutls, nettle, hogweed, gmp, p11-kit, tasn1,
 * idn2 and unistring; linking it made the dynamic loader of every CLI call
 * (hutch exec, rm, ls, version ...) map and relocate all of them, about
 * 5 ms and 3.8 million instructions of the ~10 ms a CLI call took, for a
 * server that only the supervisor runs. init, forked from the supervisor
 * before the library is loaded, never maps it either.
 *
 * Callers use the function table hutch_mhd (hutch_mhd.run(d) for
 * MHD_run(d)), declared with the library's own prototypes, so the compiler
 * checks every call against microhttpd.h as before. It is the one mutable
 * global besides the log sink (docs/architecture.md): the equivalent of the
 * dynamic linker's relocation table, written once by hutch_mhd_load() in
 * the supervisor before any use and only read after that.
 */
#ifndef HUTCH_MHD_H
#define HUTCH_MHD_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "error.h"

#define HUTCH_MHD_FN(name) __typeof__(MHD_##name) *name

struct hutch_mhd {
	HUTCH_MHD_FN(start_daemon_va);
	HUTCH_MHD_FN(stop_daemon);
	HUTCH_MHD_FN(run);
	HUTCH_MHD_FN(get_timeout);
	HUTCH_MHD_FN(get_daemon_info);
	HUTCH_MHD_FN(get_connection_info);
	HUTCH_MHD_FN(get_connection_values);
	HUTCH_MHD_FN(get_connection_values_n);
	HUTCH_MHD_FN(lookup_connection_value);
	HUTCH_MHD_FN(suspend_connection);
	HUTCH_MHD_FN(resume_connection);
	HUTCH_MHD_FN(create_response_from_buffer);
	HUTCH_MHD_FN(create_response_from_callback);
	HUTCH_MHD_FN(add_response_header);
	HUTCH_MHD_FN(queue_response);
	HUTCH_MHD_FN(destroy_response);
	HUTCH_MHD_FN(create_response_for_upgrade);
	HUTCH_MHD_FN(upgrade_action);
};

/* All NULL until hutch_mhd_load() has succeeded. */
extern struct hutch_mhd hutch_mhd;

/* Load the library and fill hutch_mhd; idempotent (a later call after
 * success returns 0 at once). Returns 0 or a negative errno with err
 * filled (dlerror()'s text). */
int hutch_mhd_load(struct hutch_err *err);
bool hutch_mhd_is_loaded(void);

/* MHD_start_daemon() through the table (the variadic original cannot be
 * called through a pointer with forwarded arguments; this calls
 * MHD_start_daemon_va). */
struct MHD_Daemon *hutch_mhd_start_daemon(unsigned int flags, uint16_t port,
                                          MHD_AcceptPolicyCallback apc, void *apc_cls,
                                          MHD_AccessHandlerCallback dh, void *dh_cls, ...);

#endif
