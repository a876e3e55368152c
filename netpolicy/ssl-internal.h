/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenSSL (libssl and its libcrypto), loaded with dlopen() on first use:
 * only a supervisor whose sandbox has header bindings terminates TLS
 * (mitm.c, proxy-mitm.c). Linked, the two libraries were mapped and
 * relocated at every start of every hutch command and in every
 * supervisor and init (21,288 relative relocations, ~200 page faults of
 * `hutch version`'s 247), for code almost no process runs.
 *
 * Include this header last, after the OpenSSL headers a file uses: it
 * turns each OpenSSL function the netpolicy sources call (directly or
 * through OpenSSL's macros, e.g. SSL_CTX_set_read_ahead() is a call of
 * SSL_CTX_ctrl()) into a call through the table hutch_ssl, declared with
 * the library's own prototypes, so the compiler checks every call as
 * before. A function not in the list fails to link (libssl is not
 * linked), so the list cannot silently fall behind the code. Like the
 * libmicrohttpd table (supervisor/mhd.h), hutch_ssl is a global written
 * once, by hutch_ssl_load() before any use, and only read after that.
 */
#ifndef HUTCH_SSL_INTERNAL_H
#define HUTCH_SSL_INTERNAL_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "error.h"

/* Every OpenSSL function hutch calls, by its exported name. */
#define HUTCH_SSL_SYMBOLS(X)                   \
	X(BIO_ctrl)                            \
	X(BIO_ctrl_pending)                    \
	X(BIO_free)                            \
	X(BIO_new)                             \
	X(BIO_new_socket)                      \
	X(BIO_s_mem)                           \
	X(BIO_write)                           \
	X(BN_bin2bn)                           \
	X(BN_free)                             \
	X(BN_to_ASN1_INTEGER)                  \
	X(CRYPTO_clear_free)                   \
	X(CRYPTO_free)                         \
	X(CRYPTO_malloc)                       \
	X(CRYPTO_zalloc)                       \
	X(ERR_clear_error)                     \
	X(ERR_error_string_n)                  \
	X(ERR_get_error)                       \
	X(ERR_peek_last_error)                 \
	X(EVP_PKEY_Q_keygen)                   \
	X(EVP_PKEY_free)                       \
	X(EVP_sha256)                          \
	X(PEM_write_bio_X509)                  \
	X(RAND_bytes)                          \
	X(SSL_CTX_ctrl)                        \
	X(SSL_CTX_free)                        \
	X(SSL_CTX_load_verify_locations)       \
	X(SSL_CTX_new)                         \
	X(SSL_CTX_set_alpn_protos)             \
	X(SSL_CTX_set_alpn_select_cb)          \
	X(SSL_CTX_set_ciphersuites)            \
	X(SSL_CTX_set_default_read_buffer_len) \
	X(SSL_CTX_set_default_verify_paths)    \
	X(SSL_CTX_set_options)                 \
	X(SSL_CTX_set_verify)                  \
	X(SSL_CTX_use_PrivateKey)              \
	X(SSL_CTX_use_certificate)             \
	X(SSL_ctrl)                            \
	X(SSL_do_handshake)                    \
	X(SSL_free)                            \
	X(SSL_get_error)                       \
	X(SSL_get_verify_result)               \
	X(SSL_new)                             \
	X(SSL_read)                            \
	X(SSL_set0_rbio)                       \
	X(SSL_set1_host)                       \
	X(SSL_set_accept_state)                \
	X(SSL_set_bio)                         \
	X(SSL_set_connect_state)               \
	X(SSL_set_fd)                          \
	X(SSL_shutdown)                        \
	X(SSL_write)                           \
	X(TLS_client_method)                   \
	X(TLS_server_method)                   \
	X(X509V3_EXT_conf_nid)                 \
	X(X509V3_set_ctx)                      \
	X(X509_EXTENSION_free)                 \
	X(X509_NAME_add_entry_by_txt)          \
	X(X509_add_ext)                        \
	X(X509_free)                           \
	X(X509_get_serialNumber)               \
	X(X509_get_subject_name)               \
	X(X509_getm_notAfter)                  \
	X(X509_getm_notBefore)                 \
	X(X509_gmtime_adj)                     \
	X(X509_new)                            \
	X(X509_set_issuer_name)                \
	X(X509_set_pubkey)                     \
	X(X509_set_version)                    \
	X(X509_sign)                           \
	X(X509_verify_cert_error_string)

struct hutch_ssl {
#define X(fn) __typeof__(fn) *fn;
	HUTCH_SSL_SYMBOLS(X)
#undef X
};

/* All NULL until hutch_ssl_load() has succeeded. */
extern struct hutch_ssl hutch_ssl;

/* Load libssl (and with it libcrypto) and fill hutch_ssl; idempotent.
 * Returns 0 or a negative errno with err filled (dlerror()'s text). */
int hutch_ssl_load(struct hutch_err *err);

/* ssl.c itself names the real functions (dlsym's strings, offsetof). */
#ifndef HUTCH_SSL_NO_REDIRECT
#define BIO_ctrl                            (*hutch_ssl.BIO_ctrl)
#define BIO_ctrl_pending                    (*hutch_ssl.BIO_ctrl_pending)
#define BIO_free                            (*hutch_ssl.BIO_free)
#define BIO_new                             (*hutch_ssl.BIO_new)
#define BIO_new_socket                      (*hutch_ssl.BIO_new_socket)
#define BIO_s_mem                           (*hutch_ssl.BIO_s_mem)
#define BIO_write                           (*hutch_ssl.BIO_write)
#define BN_bin2bn                           (*hutch_ssl.BN_bin2bn)
#define BN_free                             (*hutch_ssl.BN_free)
#define BN_to_ASN1_INTEGER                  (*hutch_ssl.BN_to_ASN1_INTEGER)
#define CRYPTO_clear_free                   (*hutch_ssl.CRYPTO_clear_free)
#define CRYPTO_free                         (*hutch_ssl.CRYPTO_free)
#define CRYPTO_malloc                       (*hutch_ssl.CRYPTO_malloc)
#define CRYPTO_zalloc                       (*hutch_ssl.CRYPTO_zalloc)
#define ERR_clear_error                     (*hutch_ssl.ERR_clear_error)
#define ERR_error_string_n                  (*hutch_ssl.ERR_error_string_n)
#define ERR_get_error                       (*hutch_ssl.ERR_get_error)
#define ERR_peek_last_error                 (*hutch_ssl.ERR_peek_last_error)
#define EVP_PKEY_Q_keygen                   (*hutch_ssl.EVP_PKEY_Q_keygen)
#define EVP_PKEY_free                       (*hutch_ssl.EVP_PKEY_free)
#define EVP_sha256                          (*hutch_ssl.EVP_sha256)
#define PEM_write_bio_X509                  (*hutch_ssl.PEM_write_bio_X509)
#define RAND_bytes                          (*hutch_ssl.RAND_bytes)
#define SSL_CTX_ctrl                        (*hutch_ssl.SSL_CTX_ctrl)
#define SSL_CTX_free                        (*hutch_ssl.SSL_CTX_free)
#define SSL_CTX_load_verify_locations       (*hutch_ssl.SSL_CTX_load_verify_locations)
#define SSL_CTX_new                         (*hutch_ssl.SSL_CTX_new)
#define SSL_CTX_set_alpn_protos             (*hutch_ssl.SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_alpn_select_cb          (*hutch_ssl.SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_ciphersuites            (*hutch_ssl.SSL_CTX_set_ciphersuites)
#define SSL_CTX_set_default_read_buffer_len (*hutch_ssl.SSL_CTX_set_default_read_buffer_len)
#define SSL_CTX_set_default_verify_paths    (*hutch_ssl.SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_options                 (*hutch_ssl.SSL_CTX_set_options)
#define SSL_CTX_set_verify                  (*hutch_ssl.SSL_CTX_set_verify)
#define SSL_CTX_use_PrivateKey              (*hutch_ssl.SSL_CTX_use_PrivateKey)
#define SSL_CTX_use_certificate             (*hutch_ssl.SSL_CTX_use_certificate)
#define SSL_ctrl                            (*hutch_ssl.SSL_ctrl)
#define SSL_do_handshake                    (*hutch_ssl.SSL_do_handshake)
#define SSL_free                            (*hutch_ssl.SSL_free)
#define SSL_get_error                       (*hutch_ssl.SSL_get_error)
#define SSL_get_verify_result               (*hutch_ssl.SSL_get_verify_result)
#define SSL_new                             (*hutch_ssl.SSL_new)
#define SSL_read                            (*hutch_ssl.SSL_read)
#define SSL_set0_rbio                       (*hutch_ssl.SSL_set0_rbio)
#define SSL_set1_host                       (*hutch_ssl.SSL_set1_host)
#define SSL_set_accept_state                (*hutch_ssl.SSL_set_accept_state)
#define SSL_set_bio                         (*hutch_ssl.SSL_set_bio)
#define SSL_set_connect_state               (*hutch_ssl.SSL_set_connect_state)
#define SSL_set_fd                          (*hutch_ssl.SSL_set_fd)
#define SSL_shutdown                        (*hutch_ssl.SSL_shutdown)
#define SSL_write                           (*hutch_ssl.SSL_write)
#define TLS_client_method                   (*hutch_ssl.TLS_client_method)
#define TLS_server_method                   (*hutch_ssl.TLS_server_method)
#define X509V3_EXT_conf_nid                 (*hutch_ssl.X509V3_EXT_conf_nid)
#define X509V3_set_ctx                      (*hutch_ssl.X509V3_set_ctx)
#define X509_EXTENSION_free                 (*hutch_ssl.X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt          (*hutch_ssl.X509_NAME_add_entry_by_txt)
#define X509_add_ext                        (*hutch_ssl.X509_add_ext)
#define X509_free                           (*hutch_ssl.X509_free)
#define X509_get_serialNumber               (*hutch_ssl.X509_get_serialNumber)
#define X509_get_subject_name               (*hutch_ssl.X509_get_subject_name)
#define X509_getm_notAfter                  (*hutch_ssl.X509_getm_notAfter)
#define X509_getm_notBefore                 (*hutch_ssl.X509_getm_notBefore)
#define X509_gmtime_adj                     (*hutch_ssl.X509_gmtime_adj)
#define X509_new                            (*hutch_ssl.X509_new)
#define X509_set_issuer_name                (*hutch_ssl.X509_set_issuer_name)
#define X509_set_pubkey                     (*hutch_ssl.X509_set_pubkey)
#define X509_set_version                    (*hutch_ssl.X509_set_version)
#define X509_sign                           (*hutch_ssl.X509_sign)
#define X509_verify_cert_error_string       (*hutch_ssl.X509_verify_cert_error_string)
#endif

#endif
