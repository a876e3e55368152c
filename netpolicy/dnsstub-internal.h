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

#define DNSSTUB_TTL 30 /* TTL of the stub's own answers */

struct dnsstub {
	int fd; /* the listener (not owned), -1 until there is one */
	const struct hutch_net_policy *policy;
	struct resolver *resolver;
	struct refusals *refusals;
	uint64_t answered; /* answers with NOERROR */
};

/* Serve the queries waiting on the stub's socket (up to 64 at a time). */
void dnsstub_on_readable(struct dnsstub *s);

#endif
