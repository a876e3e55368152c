/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS side of header bindings (netpolicy.h), with OpenSSL: a CA made
 * for one sandbox (its key exists only in the supervisor's memory, and
 * its name constraints permit only the bound hosts), a certificate per
 * bound host issued on first use and kept for the sandbox's life, the
 * server context that presents it to the sandbox's client, and the client
 * context that verifies the real upstream against the host's trust store
 * (or the CA file the user named, HUTCH_UPSTREAM_CA). Both offer only
 * http/1.1 by ALPN. OpenSSL is loaded by mitm_new() (ssl-internal.h).
 */
#ifndef HUTCH_MITM_INTERNAL_H
#define HUTCH_MITM_INTERNAL_H

#include "netpolicy.h"
#include "ssl-internal.h"

struct mitm;

/* A CA for the bindings' hosts. upstream_ca: a PEM file of trusted CAs
 * for the upstream servers, or NULL/"" for the host's default store. */
int mitm_new(const struct hutch_net_bindings *b, const char *upstream_ca, struct mitm **ret,
             struct hutch_err *err);
/* The CA certificate, PEM, NUL terminated (the sandbox's trust store). */
const char *mitm_ca_pem(const struct mitm *m);
/* The server context presenting host's certificate (made once per host). */
SSL_CTX *mitm_server_ctx(struct mitm *m, const char *host);
/* The client context towards the upstream servers. */
SSL_CTX *mitm_client_ctx(struct mitm *m);
const struct hutch_net_bindings *mitm_bindings(const struct mitm *m);
void mitm_free(struct mitm *m);

#endif
