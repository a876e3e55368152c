/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A shared library that answers for gnutls inside the supervisor (built
 * apart from hutch, -nostdlib, and embedded in it: supervisor/mhd.c).
 * libmicrohttpd needs libgnutls.so.30 for its HTTPS support, which hutch
 * never uses (no MHD_USE_TLS is ever passed); loading the real one maps
 * and relocates gnutls, p11-kit, idn2, unistring, tasn1, nettle, hogweed,
 * gmp and ffi in every supervisor: ~75 syscalls and ~70 page faults of
 * each `hutch run` (docs/performance.md). This object carries gnutls's
 * SONAME, so once it is loaded the dynamic loader takes it for
 * libmicrohttpd's dependency (glibc matches a needed name against the
 * SONAMEs of the objects already loaded), and the nine are never opened.
 *
 * It defines exactly the symbols and versions libmicrohttpd 0.9.75 imports
 * (nm -D --undefined-only libmicrohttpd.so.12; gnutls.map). The library's
 * constructor and destructor call gnutls_global_init() and
 * gnutls_global_deinit(): no-ops. Every other function is reached only
 * through MHD_USE_TLS or a TLS connection's info, which hutch never asks
 * for: each traps, so a TLS use that ever appears fails loudly, never
 * silently without TLS. A libmicrohttpd that imports more than this fails
 * to load with it, and supervisor/mhd.c then loads the real gnutls.
 */

/* libmicrohttpd's constructor (the executable's own no-op comes first in
 * the lookup scope, supervisor/mhd.c; this one is for a caller without). */
int gnutls_global_init(void);
int gnutls_global_init(void)
{
	return 0;
}

/* libmicrohttpd's destructor, at the supervisor's exit. */
void gnutls_global_deinit(void);
void gnutls_global_deinit(void)
{
}

/* gnutls's allocator, a variable (gnutls_alloc_function gnutls_malloc). */
void *gnutls_malloc;

#define TRAP(name)                \
	void name(void);          \
	void name(void)           \
	{                         \
		__builtin_trap(); \
	}

TRAP(gnutls_alpn_set_protocols)
TRAP(gnutls_bye)
TRAP(gnutls_certificate_allocate_credentials)
TRAP(gnutls_certificate_free_credentials)
TRAP(gnutls_certificate_server_set_request)
TRAP(gnutls_certificate_set_dh_params)
TRAP(gnutls_certificate_set_retrieve_function2)
TRAP(gnutls_certificate_set_retrieve_function3)
TRAP(gnutls_certificate_set_x509_key_mem)
TRAP(gnutls_certificate_set_x509_key_mem2)
TRAP(gnutls_certificate_set_x509_trust_mem)
TRAP(gnutls_cipher_get)
TRAP(gnutls_credentials_set)
TRAP(gnutls_deinit)
TRAP(gnutls_dh_params_deinit)
TRAP(gnutls_dh_params_import_pkcs3)
TRAP(gnutls_dh_params_init)
TRAP(gnutls_handshake)
TRAP(gnutls_init)
TRAP(gnutls_priority_deinit)
TRAP(gnutls_priority_init)
TRAP(gnutls_priority_set)
TRAP(gnutls_protocol_get_version)
TRAP(gnutls_psk_allocate_server_credentials)
TRAP(gnutls_psk_free_server_credentials)
TRAP(gnutls_psk_set_server_credentials_function)
TRAP(gnutls_record_check_pending)
TRAP(gnutls_record_get_direction)
TRAP(gnutls_record_recv)
TRAP(gnutls_record_send)
TRAP(gnutls_session_get_ptr)
TRAP(gnutls_session_set_ptr)
TRAP(gnutls_strerror)
TRAP(gnutls_transport_set_int2)
