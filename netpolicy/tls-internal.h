/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded parser for the first bytes a client sends on a TLS connection:
 * the ClientHello, possibly spread over several handshake records. Input is
 * hostile (it comes from inside a sandbox); the parser only reads within
 * [buf, buf + len) and depends on libc alone (the fuzz target links it).
 */
#ifndef HUTCH_TLS_INTERNAL_H
#define HUTCH_TLS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The largest ClientHello we wait for (records included); more is -E2BIG. */
#define HUTCH_TLS_HELLO_MAX (16u * 1024u + 5u * 4u)

/* Looks at the bytes received so far. Returns:
 *   1        a complete ClientHello; sni holds the server_name (host_name
 *            type) lowercased with no trailing dot, or "" if there is none;
 *   0        not enough bytes yet: *need is a lower bound for the total
 *            length to wait for (always > len and <= HUTCH_TLS_HELLO_MAX);
 *   -EPROTO  not a TLS handshake (e.g. plain HTTP), or not a ClientHello;
 *   -EBADMSG malformed (lengths that disagree, a bad server_name, ...);
 *   -E2BIG   the hello would be larger than HUTCH_TLS_HELLO_MAX.
 * sni_size must be at least 254 (else -EINVAL). sni is written only on 1,
 * *need only on 0; need may be NULL.
 * Details: a later record that is not a handshake record, or a zero-length
 * or over-2^14 record, is -EBADMSG; bytes after the ClientHello in its last
 * record are ignored; a hello without extensions gives ""; two
 * server_name extensions or two host_name entries are -EBADMSG; name types
 * other than host_name are skipped. The name check is syntax only: an IP
 * literal such as "192.0.2.1" passes it (RFC 6066 forbids it, the caller
 * decides). */
int hutch_tls_parse_client_hello(const uint8_t *buf, size_t len, char *sni, size_t sni_size,
                                 size_t *need);

#endif
