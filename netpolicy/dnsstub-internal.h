/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DNS stub: the server a sandbox's /etc/resolv.conf names (a UDP
 * listener init made in the sandbox's network namespace, served from the
 * host). all: every query is relayed to the upstream resolver. allow: A
 * queries for listed names are answered with what the upstream resolver
 * says, other types of listed names with no records, and every other name
 * NXDOMAIN without asking anyone (hutch_net_allow_dns()).
 */
#ifndef HUTCH_DNSSTUB_INTERNAL_H
#define HUTCH_DNSSTUB_INTERNAL_H

#include <stdint.h>

#include "netpolicy.h"
#include "refusals-internal.h"
#include "resolver-internal.h"

#define DNSSTUB_TTL   30 /* TTL of the stub's own answers */
#define DNSSTUB_NAMES 64 /* addresses answered last, with their names */

struct dnsstub {
	int fd; /* the listener (not owned), -1 until there is one */
	const struct hutch_net_policy *policy;
	struct resolver *resolver;
	struct refusals *refusals;
	/* The egress log's observer (the proxy's, egress.c), NULL: none.
	 * Told of every answer; the names answered last are kept for the
	 * NAT log's records (dnsstub_name_of()). */
	const struct hutch_egress_observer *const *observer;
	struct {
		uint32_t addr;
		char name[HUTCH_DNS_NAME_MAX + 1];
	} names[DNSSTUB_NAMES];
	unsigned nnames;
	uint64_t answered; /* answers with NOERROR */
};

/* Serve the queries waiting on the stub's socket (up to 64 at a time). */
void dnsstub_on_readable(struct dnsstub *s);
/* The name an answer gave addr (network byte order) for, the last one;
 * NULL: none of the last DNSSTUB_NAMES. */
const char *dnsstub_name_of(const struct dnsstub *s, uint32_t addr);

#endif
