/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allow decision (allow-internal.h): the policy's rules for DNS
 * questions and TLS connections, kept apart from the sockets that carry
 * them so that each rule is unit-tested without a sandbox.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "allow-internal.h"
#include "dns-internal.h"

static bool name_listed(const struct hutch_net_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nhosts; i++)
		if (!p->hosts[i].is_ip && strcasecmp(p->hosts[i].name, name) == 0)
			return true;
	return false;
}

enum hutch_net_dns_verdict hutch_net_allow_dns(const struct hutch_net_policy *p, const char *name,
                                               uint16_t qtype, uint16_t qclass)
{
	if (p->mode == HUTCH_NET_ALL)
		return HUTCH_NET_DNS_FORWARD;
	/* allow: listed names only, and nothing is forwarded for the rest. */
	if (qclass != HUTCH_DNS_CLASS_IN || !name_listed(p, name))
		return HUTCH_NET_DNS_NXDOMAIN;
	/* IPv6 and other types: the name exists, no records. */
	if (qtype != HUTCH_DNS_TYPE_A)
		return HUTCH_NET_DNS_NODATA;
	return HUTCH_NET_DNS_RESOLVE;
}

enum hutch_net_tls_verdict hutch_net_allow_tls(const struct hutch_net_policy *p, const char *sni,
                                               const char *ip, uint16_t port)
{
	bool name_ok = false, name_wrong_port = false, ip_ok = false;

	for (size_t i = 0; i < p->nhosts; i++) {
		const struct hutch_net_host *h = &p->hosts[i];
		bool port_ok = hutch_net_host_port(h) == port;
		if (h->is_ip && strcmp(h->name, ip) == 0 && port_ok)
			ip_ok = true;
		if (!h->is_ip && sni[0] && strcasecmp(h->name, sni) == 0) {
			name_ok = name_ok || port_ok;
			name_wrong_port = name_wrong_port || !port_ok;
		}
	}
	if (name_ok)
		return HUTCH_NET_TLS_RESOLVE;
	if (ip_ok)
		return HUTCH_NET_TLS_DIAL;
	if (name_wrong_port)
		return HUTCH_NET_TLS_WRONG_PORT;
	return sni[0] ? HUTCH_NET_TLS_UNLISTED : HUTCH_NET_TLS_NO_SNI;
}

/* What a sandbox of mode all may never reach, as (prefix, bits): this
 * network, private (RFC 1918), CGNAT, loopback, link-local (cloud
 * metadata), IETF protocol assignments, benchmarking, multicast and
 * reserved. The one copy: the nftables sets of both wirings (nft.c) are
 * written from it (hutch_net_blocked4_format()), and the proxy checks it. */
static const struct {
	uint32_t net;
	unsigned bits;
} blocked4[] = {
	{ 0x00000000, 8 },  { 0x0a000000, 8 },  { 0x64400000, 10 }, { 0x7f000000, 8 },
	{ 0xa9fe0000, 16 }, { 0xac100000, 12 }, { 0xc0000000, 24 }, { 0xc0a80000, 16 },
	{ 0xc6120000, 15 }, { 0xe0000000, 4 },  { 0xf0000000, 4 },
};

bool hutch_net_addr_is_blocked_all(uint32_t a_be)
{
	uint32_t a = ntohl(a_be);

	for (size_t i = 0; i < sizeof(blocked4) / sizeof(blocked4[0]); i++)
		if ((a >> (32 - blocked4[i].bits)) == (blocked4[i].net >> (32 - blocked4[i].bits)))
			return true;
	return false;
}

int hutch_net_blocked4_format(char *buf, size_t size)
{
	size_t used = 0;

	for (size_t i = 0; i < sizeof(blocked4) / sizeof(blocked4[0]); i++) {
		uint32_t n = blocked4[i].net;
		int w = snprintf(buf + used, size - used, "%s%u.%u.%u.%u/%u", i ? ", " : "",
		                 n >> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff,
		                 blocked4[i].bits);

		if (w < 0 || (size_t)w >= size - used)
			return -ENOSPC;
		used += (size_t)w;
	}
	return (int)used;
}

bool hutch_net_addr_is_reserved(uint32_t a_be)
{
	uint32_t a = ntohl(a_be);

	return (a >> 24) == 0 || (a >> 24) == 127 || (a >> 16) == 0xa9fe || (a >> 28) == 0xe ||
	       (a >> 28) == 0xf;
}
