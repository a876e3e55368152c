/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allow decision of the network modes, as pure functions: given the
 * policy and what a sandbox asked for (a DNS question, or a TLS connection's
 * server name, dialled address and port), what the supervisor does with it.
 * No I/O: the DNS stub and the TLS proxy act on the verdicts, and the unit
 * tests (tests/unit/test_allow.c) check every rule here.
 */
#ifndef HUTCH_ALLOW_INTERNAL_H
#define HUTCH_ALLOW_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "netpolicy.h"

/* What the DNS stub does with a well-formed query. */
enum hutch_net_dns_verdict {
	HUTCH_NET_DNS_FORWARD,  /* all: relay the query upstream as it is */
	HUTCH_NET_DNS_NXDOMAIN, /* allow: not a listed name (or not class IN);
	                         * answered at once, forwarded nowhere */
	HUTCH_NET_DNS_NODATA,   /* allow: a listed name, a type other than A */
	HUTCH_NET_DNS_RESOLVE,  /* allow: a listed name, type A: ask upstream */
};

/* Mode all forwards everything; any other mode answers only A queries of
 * class IN for names of the list (compared case-insensitively). */
enum hutch_net_dns_verdict hutch_net_allow_dns(const struct hutch_net_policy *p, const char *name,
                                               uint16_t qtype, uint16_t qclass);

/* What the TLS proxy does with a connection whose ClientHello is read. */
enum hutch_net_tls_verdict {
	HUTCH_NET_TLS_RESOLVE,    /* the SNI is listed with this port: resolve it
	                           * (never dial the address the client chose) */
	HUTCH_NET_TLS_DIAL,       /* the dialled address is listed with this port */
	HUTCH_NET_TLS_WRONG_PORT, /* the SNI is listed, but not with this port */
	HUTCH_NET_TLS_UNLISTED,   /* the SNI is not listed (nor the address) */
	HUTCH_NET_TLS_NO_SNI,     /* no SNI, and the address is not listed */
};

/* sni: lowercase, "" when the hello has none; ip: the dialled IPv4
 * address in dotted-quad text (as inet_ntop writes it); port: the dialled
 * port. A list entry without a port means 443. A listed name wins over a
 * listed address; RESOLVE and DIAL still leave the caller to refuse
 * addresses of this machine (hutch_net_addr_is_reserved() and a local
 * check). */
enum hutch_net_tls_verdict hutch_net_allow_tls(const struct hutch_net_policy *p, const char *sni,
                                               const char *ip, uint16_t port);

/* Never dialled, whatever the list or the upstream resolver says: 0/8,
 * 127/8 (this machine), 169.254/16 (link-local: cloud metadata), 224/4
 * (multicast) and 240/4 (reserved). a_be in network byte order. Addresses
 * of the host's own interfaces need a look at the host (proxy.c). */
bool hutch_net_addr_is_reserved(uint32_t a_be);

/* What mode all never reaches (the forward chain's set blocked4): 0/8,
 * 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.168/16,
 * 198.18/15, 224/4, 240/4. For connections the proxy dials on a sandbox's
 * behalf in mode all (header bindings redirect its port 443). */
bool hutch_net_addr_is_blocked_all(uint32_t a_be);
/* The same ranges as nftables set elements ("0.0.0.0/8, 10.0.0.0/8, ...")
 * into buf: the length, or -ENOSPC. */
int hutch_net_blocked4_format(char *buf, size_t size);

#endif
