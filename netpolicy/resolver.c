/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The upstream resolver's client and its cache (resolver-internal.h), and
 * the default upstream: the host's /etc/resolv.conf.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "netpolicy.h"
#include "resolver-internal.h"
#include "util.h"

/* ---- the cache ---- */

const struct resolver_cached *resolver_cache_find(struct resolver *r, const char *name)
{
	int64_t now = hutch_now_mono_ms();

	for (size_t i = 0; i < RESOLVER_CACHE_MAX; i++)
		if (r->cache[i].name[0] && r->cache[i].expires_ms > now &&
		    strcmp(r->cache[i].name, name) == 0)
			return &r->cache[i];
	return NULL;
}

static void cache_put(struct resolver *r, const char *name, const struct hutch_dns_answer *a)
{
	struct resolver_cached *victim = &r->cache[0];
	uint32_t ttl = a->ttl > RESOLVER_CACHE_TTL_MAX ? RESOLVER_CACHE_TTL_MAX : a->ttl;

	if (a->rcode != HUTCH_DNS_RCODE_NOERROR || a->naddrs == 0 || ttl == 0)
		return;
	for (size_t i = 0; i < RESOLVER_CACHE_MAX; i++) {
		if (strcmp(r->cache[i].name, name) == 0) {
			victim = &r->cache[i];
			break;
		}
		if (r->cache[i].expires_ms < victim->expires_ms)
			victim = &r->cache[i];
	}
	snprintf(victim->name, sizeof(victim->name), "%s", name);
	memcpy(victim->addrs, a->addrs, a->naddrs * sizeof(a->addrs[0]));
	victim->naddrs = a->naddrs;
	victim->expires_ms = hutch_now_mono_ms() + (int64_t)ttl * 1000;
}

/* ---- queries ---- */

static struct resolver_query *query_alloc(struct resolver *r)
{
	if (r->nqueries >= RESOLVER_QUERIES_MAX)
		return NULL;
	for (size_t i = 0; i < RESOLVER_QUERIES_MAX; i++)
		if (!r->queries[i].used) {
			struct resolver_query *q = &r->queries[i];
			memset(q, 0, sizeof(*q));
			q->used = true;
			r->nqueries++;
			return q;
		}
	return NULL;
}

static void query_free(struct resolver *r, struct resolver_query *q)
{
	free(q->msg);
	q->msg = NULL;
	q->used = false;
	r->nqueries--;
}

static uint16_t new_query_id(struct resolver *r)
{
	for (;;) {
		uint16_t id;
		bool clash = false;
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint16_t)(hutch_now_mono_ms() * 2654435761u >> 7);
		for (size_t i = 0; i < RESOLVER_QUERIES_MAX; i++)
			clash = clash || (r->queries[i].used && r->queries[i].id == id);
		if (!clash)
			return id;
	}
}

static int query_send(struct resolver *r, struct resolver_query *q)
{
	ssize_t n = sendto(r->fd, q->msg, q->len, MSG_NOSIGNAL,
	                   (const struct sockaddr *)&r->upstream, sizeof(r->upstream));

	q->tries++;
	q->deadline_ms = hutch_now_mono_ms() + RESOLVER_QUERY_TIMEOUT_MS;
	evloop_tick(r->loop, true);
	return n == (ssize_t)q->len ? 0 : -EIO;
}

/* Start an upstream query. msg (NULL: build one for name/qtype) becomes
 * the query's own copy with a fresh id. */
static struct resolver_query *query_start(struct resolver *r, const char *name, uint16_t qtype,
                                          const uint8_t *msg, size_t len, resolver_done_fn *done,
                                          void *ptr)
{
	struct resolver_query *q;

	if (!resolver_has_upstream(r))
		return NULL; /* the caller answers SERVFAIL */
	q = query_alloc(r);
	if (!q)
		return NULL;
	q->id = new_query_id(r);
	q->qtype = qtype;
	q->done = done;
	q->ptr = ptr;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->msg = malloc(msg ? len : 512);
	if (!q->msg) {
		query_free(r, q);
		return NULL;
	}
	if (msg) {
		memcpy(q->msg, msg, len);
		q->msg[0] = (uint8_t)(q->id >> 8);
		q->msg[1] = (uint8_t)q->id;
		q->len = len;
	} else {
		q->cache_answer = true;
		q->len = hutch_dns_build_query(q->id, name, qtype, q->msg, 512);
		if (q->len == 0) {
			query_free(r, q);
			return NULL;
		}
	}
	(void)query_send(r, q); /* a lost datagram is retried on the tick */
	return q;
}

struct resolver_query *resolver_lookup(struct resolver *r, const char *name, resolver_done_fn *done,
                                       void *ptr)
{
	return query_start(r, name, HUTCH_DNS_TYPE_A, NULL, 0, done, ptr);
}

struct resolver_query *resolver_forward(struct resolver *r, const uint8_t *msg, size_t len,
                                        const char *name, uint16_t qtype, resolver_done_fn *done,
                                        void *ptr)
{
	return query_start(r, name, qtype, msg, len, done, ptr);
}

void resolver_cancel(struct resolver *r, const void *ptr)
{
	for (size_t i = 0; i < RESOLVER_QUERIES_MAX; i++)
		if (r->queries[i].used && r->queries[i].ptr == ptr)
			r->queries[i].ptr = NULL;
}

/* Hand the answer (a NULL: a failure) to whoever waits, then free q. */
static void query_finish(struct resolver *r, struct resolver_query *q, uint8_t *msg, size_t len,
                         const struct hutch_dns_answer *a)
{
	if (a && q->cache_answer)
		cache_put(r, q->name, a);
	if (q->ptr)
		q->done(q->ptr, q, msg, len, a);
	query_free(r, q);
}

static void on_readable(void *ptr, uint32_t events)
{
	struct resolver *r = ptr;
	uint8_t msg[HUTCH_DNS_MSG_MAX];

	(void)events;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct hutch_dns_answer a;
		struct resolver_query *q = NULL;
		ssize_t n = recvfrom(r->fd, msg, sizeof(msg), MSG_TRUNC, (struct sockaddr *)&from,
		                     &flen);
		uint16_t id;

		if (n < 0)
			return;
		if ((size_t)n > sizeof(msg) || n < 12 || flen != sizeof(from) ||
		    from.sin_addr.s_addr != r->upstream.sin_addr.s_addr ||
		    from.sin_port != r->upstream.sin_port)
			continue;
		id = (uint16_t)(msg[0] << 8 | msg[1]);
		for (size_t k = 0; k < RESOLVER_QUERIES_MAX && !q; k++)
			if (r->queries[k].used && r->queries[k].id == id)
				q = &r->queries[k];
		if (!q || hutch_dns_parse_response(msg, (size_t)n, id, q->name, q->qtype, &a) < 0)
			continue;
		query_finish(r, q, msg, (size_t)n, &a);
	}
}

void resolver_tick(struct resolver *r, int64_t now_ms)
{
	for (size_t i = 0; i < RESOLVER_QUERIES_MAX; i++) {
		struct resolver_query *q = &r->queries[i];
		if (!q->used || q->deadline_ms > now_ms)
			continue;
		if (q->tries < RESOLVER_QUERY_TRIES)
			(void)query_send(r, q);
		else
			query_finish(r, q, NULL, 0, NULL);
	}
}

bool resolver_is_busy(const struct resolver *r)
{
	return r->nqueries > 0;
}

bool resolver_has_upstream(const struct resolver *r)
{
	return r->upstream.sin_family == AF_INET;
}

void resolver_format(const struct resolver *r, char *buf, size_t size)
{
	char ip[INET_ADDRSTRLEN];

	if (!resolver_has_upstream(r)) {
		snprintf(buf, size, "none");
		return;
	}
	inet_ntop(AF_INET, &r->upstream.sin_addr, ip, sizeof(ip));
	snprintf(buf, size, "%s:%u", ip, ntohs(r->upstream.sin_port));
}

/* ---- set-up ---- */

int resolver_init(struct resolver *r, struct evloop *loop, const struct sockaddr_in *upstream,
                  struct hutch_err *err)
{
	int ret;

	r->upstream = *upstream;
	r->loop = loop;
	r->ev = (struct evloop_ev){ on_readable, r };
	r->mask = 0;
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return hutch_err_set_errno(err, -errno, "create the network proxy's sockets");
	ret = evloop_watch(loop, r->fd, &r->ev, &r->mask, EPOLLIN);
	if (ret < 0)
		return hutch_err_set_errno(err, ret, "watch the network proxy's sockets");
	return 0;
}

void resolver_done(struct resolver *r)
{
	for (size_t i = 0; i < RESOLVER_QUERIES_MAX; i++) {
		free(r->queries[i].msg);
		r->queries[i].msg = NULL;
	}
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

int hutch_net_default_resolver(struct sockaddr_in *ret, struct hutch_err *err)
{
	_cleanup_fclose_ FILE *f = fopen("/etc/resolv.conf", "re");
	char line[512];

	if (!f)
		return hutch_err_set_errno(err, -errno,
		                           "read /etc/resolv.conf for a DNS server (or set "
		                           "HUTCH_RESOLVER=IP)");
	while (fgets(line, sizeof(line), f)) {
		char ip[64];
		memset(ret, 0, sizeof(*ret));
		if (sscanf(line, " nameserver %63s", ip) == 1 &&
		    inet_pton(AF_INET, ip, &ret->sin_addr) == 1) {
			ret->sin_family = AF_INET;
			ret->sin_port = htons(53);
			return 0;
		}
	}
	return hutch_err_set(err, -ENOENT,
	                     "/etc/resolv.conf names no IPv4 nameserver: set HUTCH_RESOLVER=IP "
	                     "to the DNS server the sandboxes' DNS stub should ask");
}
