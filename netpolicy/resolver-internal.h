/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's client of the upstream DNS resolver (HUTCH_RESOLVER, or
 * the host's first IPv4 nameserver): queries over UDP with a fresh random
 * id each, retried on the egress tick, answers checked against the query
 * (dns.c) and A answers cached (up to RESOLVER_CACHE_TTL_MAX s). It knows
 * nothing of who asks: each query carries the callback that takes its
 * answer, for the DNS stub or a proxied connection.
 */
#ifndef HUTCH_RESOLVER_INTERNAL_H
#define HUTCH_RESOLVER_INTERNAL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns-internal.h"
#include "error.h"
#include "evloop-internal.h"

#define RESOLVER_QUERY_TIMEOUT_MS 2000
#define RESOLVER_QUERY_TRIES      2
#define RESOLVER_QUERIES_MAX      256
#define RESOLVER_CACHE_MAX        64
#define RESOLVER_CACHE_TTL_MAX    300 /* seconds */

struct resolver_query;

/* The answer to q: a parsed, msg/len the message as received (its id may
 * be rewritten in place); a is NULL when the query failed (no answer
 * within its tries). q is freed after the call. */
typedef void resolver_done_fn(void *ptr, struct resolver_query *q, uint8_t *msg, size_t len,
                              const struct hutch_dns_answer *a);

struct resolver_query {
	bool used;
	bool cache_answer; /* an A lookup of our own: its answer is cached */
	uint16_t id;       /* upstream id */
	int tries;
	int64_t deadline_ms;
	char name[HUTCH_DNS_NAME_MAX + 1];
	uint16_t qtype;
	uint8_t *msg; /* as sent upstream, for a retry */
	size_t len;
	resolver_done_fn *done;
	void *ptr; /* NULL once cancelled: done is not called */
	/* The asker's own: a stub client, its question, when it came and
	 * who asked (the egress log). */
	struct sockaddr_in client;
	struct hutch_dns_question q;
	int64_t at_ms;
	struct hutch_net_owner owner;
};

struct resolver_cached {
	char name[HUTCH_DNS_NAME_MAX + 1];
	uint32_t addrs[HUTCH_DNS_ADDRS_MAX];
	size_t naddrs;
	int64_t expires_ms;
};

struct resolver {
	struct sockaddr_in upstream; /* sin_family 0: there is none */
	int fd;
	uint32_t mask;
	struct evloop *loop;
	struct evloop_ev ev;
	struct resolver_query queries[RESOLVER_QUERIES_MAX];
	unsigned nqueries;
	struct resolver_cached cache[RESOLVER_CACHE_MAX];
};

/* Opens the upstream socket and watches it on loop. */
int resolver_init(struct resolver *r, struct evloop *loop, const struct sockaddr_in *upstream,
                  struct hutch_err *err);
/* Frees the queries (without calling back) and closes the socket. */
void resolver_done(struct resolver *r);
bool resolver_has_upstream(const struct resolver *r);
/* A live cache entry for name (lowercase), or NULL. */
const struct resolver_cached *resolver_cache_find(struct resolver *r, const char *name);
/* Ask upstream for name's A records; the answer is cached. NULL if there
 * is no upstream resolver, too many queries wait, or name is invalid. */
struct resolver_query *resolver_lookup(struct resolver *r, const char *name, resolver_done_fn *done,
                                       void *ptr);
/* Relay a stub client's query msg (for name/qtype) upstream as it is,
 * under a fresh id; the answer is not cached. NULL as for lookup. */
struct resolver_query *resolver_forward(struct resolver *r, const uint8_t *msg, size_t len,
                                        const char *name, uint16_t qtype, resolver_done_fn *done,
                                        void *ptr);
/* The queries of ptr will not call back. */
void resolver_cancel(struct resolver *r, const void *ptr);
/* Retry or fail the queries whose deadline has passed. */
void resolver_tick(struct resolver *r, int64_t now_ms);
bool resolver_is_busy(const struct resolver *r);
/* "IP:PORT" of the upstream resolver, or "none". */
void resolver_format(const struct resolver *r, char *buf, size_t size);

#endif
