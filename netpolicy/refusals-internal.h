/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log of refused names and connections that /status shows: the last
 * HUTCH_EGRESS_REFUSED_LOG refusals in a ring, and the total count.
 */
#ifndef HUTCH_REFUSALS_INTERNAL_H
#define HUTCH_REFUSALS_INTERNAL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "netpolicy.h"

struct refusal {
	int64_t at_ms; /* realtime */
	char what[8];
	char host[HUTCH_NET_HOST_MAX + 1];
	char address[INET_ADDRSTRLEN + 8];
	char reason[112];
};

struct refusals {
	struct refusal ring[HUTCH_EGRESS_REFUSED_LOG];
	uint64_t n; /* ever recorded */
};

/* what: "dns", "tls" or "connect"; host and addr may be NULL. */
void refusals_add(struct refusals *log, const char *what, const char *host,
                  const struct sockaddr_in *addr, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* A connection's decision for the egress log (netpolicy.h): refused or
 * not, the rule (an allow-list entry, or a refusal's code: docs/api.md,
 * "The egress log") and a refusal's reason. */
struct refusal_verdict {
	bool refused;
	char rule[HUTCH_NET_HOST_MAX + 8];
	char reason[112];
};
/* Record a refused connection in the ring and in its verdict v. */
void refusals_verdict(struct refusals *log, struct refusal_verdict *v, const char *what,
                      const char *host, const struct sockaddr_in *addr, const char *code,
                      const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* "IP:PORT" of an IPv4 socket address. */
void refusals_fmt_addr(const struct sockaddr_in *sa, char *buf, size_t size);
/* Adds refused_total and refused (oldest first) to o. */
void refusals_to_json(const struct refusals *log, cJSON *o);

#endif
