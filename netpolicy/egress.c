/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's DNS stub, upstream resolver, TLS proxy and host-port
 * relay (see netpolicy.h). Everything that arrives from inside the sandbox is
 * hostile: queries and ClientHellos go through the bounded parsers of dns.c
 * and tls.c, every buffer is fixed-size, every waiting state has a deadline
 * and the number of connections is capped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "dns-internal.h"
#include "netpolicy.h"
#include "tls-internal.h"
#include "util.h"

#define RELAY_BUF         (64u << 10) /* per direction; >= HUTCH_TLS_HELLO_MAX */
#define HELLO_DEADLINE_MS 10000
#define CONNECT_DEADLINE  10000
#define QUERY_TIMEOUT_MS  2000
#define QUERY_TRIES       2
#define QUERIES_MAX       256
#define CACHE_MAX         64
#define CACHE_TTL_MAX     300 /* seconds */
#define STUB_TTL          30  /* TTL of the stub's own answers */
#define TICK_MS           250

enum ev_kind {
	EV_LISTENER = 1,
	EV_UPSTREAM,
	EV_TICK,
	EV_CLIENT, /* a proxied connection, sandbox side */
	EV_SERVER, /* the same, outside side */
};

struct ev {
	enum ev_kind kind;
	void *ptr;
};

struct listener {
	struct ev ev;
	int fd;
	enum hutch_net_listener_kind kind;
	uint16_t port;
};

enum conn_state {
	C_HELLO,      /* reading the ClientHello */
	C_RESOLVING,  /* waiting for the upstream resolver */
	C_CONNECTING, /* dialling out */
	C_RELAY,
	C_CLOSED,
};

/* Bytes read from one side, not yet written to the other. */
struct dir {
	uint8_t *buf;
	size_t len, off;
	bool eof; /* the reading side is done */
};

struct conn {
	struct hutch_egress *e;
	struct ev ev_c, ev_s;
	int cfd, sfd;
	uint32_t cmask, smask; /* current epoll interest (0 = not added) */
	enum conn_state state;
	bool hostport;
	struct sockaddr_in dst; /* what the client dialled (inside the sandbox) */
	uint16_t port;          /* port to dial outside */
	char sni[HUTCH_DNS_NAME_MAX + 1];
	int64_t deadline_ms;
	uint32_t addrs[HUTCH_DNS_ADDRS_MAX];
	size_t naddrs, next_addr;
	int last_connect_err;
	struct dir cs, sc; /* client->server (the ClientHello first), server->client */
	struct conn *next;
};

enum query_for {
	Q_FORWARD, /* all: relay the raw answer to a stub client */
	Q_STUB_A,  /* allow: answer a stub client with the A records */
	Q_CONN,    /* allow: addresses for a proxied connection */
};

struct query {
	bool used;
	enum query_for what;
	uint16_t id; /* upstream id */
	int tries;
	int64_t deadline_ms;
	char name[HUTCH_DNS_NAME_MAX + 1];
	uint16_t qtype;
	uint8_t *msg; /* as sent upstream, for a retry */
	size_t len;
	struct sockaddr_in client; /* Q_FORWARD, Q_STUB_A */
	struct hutch_dns_question q;
	struct conn *conn; /* Q_CONN */
};

struct cache_entry {
	char name[HUTCH_DNS_NAME_MAX + 1];
	uint32_t addrs[HUTCH_DNS_ADDRS_MAX];
	size_t naddrs;
	int64_t expires_ms;
};

struct refusal {
	int64_t at_ms; /* realtime */
	char what[8];
	char host[HUTCH_DNS_NAME_MAX + 1];
	char address[INET_ADDRSTRLEN + 8];
	char reason[112];
};

struct hutch_egress {
	const struct hutch_net_policy *policy;
	struct sockaddr_in resolver;
	int epfd, upfd, tickfd;
	struct ev ev_up, ev_tick;
	bool tick_armed;
	struct listener *listeners;
	size_t nlisteners;
	int dns_fd; /* the stub's socket (one of the listeners) */
	struct conn *conns, *dead;
	unsigned nconns;
	struct query queries[QUERIES_MAX];
	unsigned nqueries;
	struct cache_entry cache[CACHE_MAX];
	struct refusal refused[HUTCH_EGRESS_REFUSED_LOG];
	uint64_t nrefused;
	uint64_t dns_answered, dns_refused, conns_total;
};

/* ---- helpers ---- */

static void fmt_addr(const struct sockaddr_in *sa, char *buf, size_t size)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(buf, size, "%s:%u", ip, ntohs(sa->sin_port));
}

static void refuse_log(struct hutch_egress *e, const char *what, const char *host,
                       const struct sockaddr_in *addr, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

static void refuse_log(struct hutch_egress *e, const char *what, const char *host,
                       const struct sockaddr_in *addr, const char *fmt, ...)
{
	struct refusal *r = &e->refused[e->nrefused % HUTCH_EGRESS_REFUSED_LOG];
	va_list ap;

	memset(r, 0, sizeof(*r));
	{
		struct timespec ts;
		if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
			r->at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	snprintf(r->what, sizeof(r->what), "%s", what);
	snprintf(r->host, sizeof(r->host), "%s", host ? host : "");
	if (addr)
		fmt_addr(addr, r->address, sizeof(r->address));
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	e->nrefused++;
}

/* Close with a reset: the client sees its connection fail at once. */
static void close_reset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void tick_arm(struct hutch_egress *e, bool on)
{
	struct itimerspec its = { 0 };

	if (e->tick_armed == on)
		return;
	if (on) {
		its.it_value.tv_nsec = TICK_MS * 1000000L;
		its.it_interval.tv_nsec = TICK_MS * 1000000L;
	}
	if (timerfd_settime(e->tickfd, 0, &its, NULL) == 0)
		e->tick_armed = on;
}

static bool name_listed(const struct hutch_net_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nhosts; i++)
		if (!p->hosts[i].is_ip && strcasecmp(p->hosts[i].name, name) == 0)
			return true;
	return false;
}

static uint16_t entry_port(const struct hutch_net_host *h)
{
	return h->port ? h->port : 443;
}

/* Never dial these, whatever the upstream resolver says or the list holds:
 * this machine, link-local (cloud metadata), multicast, reserved. A service
 * on the host is reached through --host-port. */
static bool addr_forbidden(uint32_t a_be)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = a_be };
	uint32_t a = ntohl(a_be);
	int fd, r;

	if ((a >> 24) == 0 || (a >> 24) == 127 || (a >> 16) == 0xa9fe || (a >> 28) == 0xe ||
	    (a >> 28) == 0xf)
		return true;
	/* An address of this host (any interface): bind() to it succeeds.
	 * The supervisor lives in the host's network namespace. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: do not dial */
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return r == 0 || errno != EADDRNOTAVAIL;
}

/* ---- the upstream resolver and its cache ---- */

static const struct cache_entry *cache_find(struct hutch_egress *e, const char *name)
{
	int64_t now = hutch_now_mono_ms();

	for (size_t i = 0; i < CACHE_MAX; i++)
		if (e->cache[i].name[0] && e->cache[i].expires_ms > now &&
		    strcmp(e->cache[i].name, name) == 0)
			return &e->cache[i];
	return NULL;
}

static void cache_put(struct hutch_egress *e, const char *name, const struct hutch_dns_answer *a)
{
	struct cache_entry *victim = &e->cache[0];
	uint32_t ttl = a->ttl > CACHE_TTL_MAX ? CACHE_TTL_MAX : a->ttl;

	if (a->rcode != HUTCH_DNS_RCODE_NOERROR || a->naddrs == 0 || ttl == 0)
		return;
	for (size_t i = 0; i < CACHE_MAX; i++) {
		if (strcmp(e->cache[i].name, name) == 0) {
			victim = &e->cache[i];
			break;
		}
		if (e->cache[i].expires_ms < victim->expires_ms)
			victim = &e->cache[i];
	}
	snprintf(victim->name, sizeof(victim->name), "%s", name);
	memcpy(victim->addrs, a->addrs, a->naddrs * sizeof(a->addrs[0]));
	victim->naddrs = a->naddrs;
	victim->expires_ms = hutch_now_mono_ms() + (int64_t)ttl * 1000;
}

static struct query *query_alloc(struct hutch_egress *e)
{
	if (e->nqueries >= QUERIES_MAX)
		return NULL;
	for (size_t i = 0; i < QUERIES_MAX; i++)
		if (!e->queries[i].used) {
			struct query *q = &e->queries[i];
			memset(q, 0, sizeof(*q));
			q->used = true;
			e->nqueries++;
			return q;
		}
	return NULL;
}

static void query_free(struct hutch_egress *e, struct query *q)
{
	free(q->msg);
	q->msg = NULL;
	q->used = false;
	e->nqueries--;
}

static uint16_t new_query_id(struct hutch_egress *e)
{
	for (;;) {
		uint16_t id;
		bool clash = false;
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint16_t)(hutch_now_mono_ms() * 2654435761u >> 7);
		for (size_t i = 0; i < QUERIES_MAX; i++)
			clash = clash || (e->queries[i].used && e->queries[i].id == id);
		if (!clash)
			return id;
	}
}

static int query_send(struct hutch_egress *e, struct query *q)
{
	ssize_t n = sendto(e->upfd, q->msg, q->len, MSG_NOSIGNAL,
	                   (const struct sockaddr *)&e->resolver, sizeof(e->resolver));

	q->tries++;
	q->deadline_ms = hutch_now_mono_ms() + QUERY_TIMEOUT_MS;
	tick_arm(e, true);
	return n == (ssize_t)q->len ? 0 : -EIO;
}

/* Start an upstream query. msg (NULL: build one for name/qtype) becomes
 * the query's own copy with a fresh id. */
static struct query *query_start(struct hutch_egress *e, enum query_for what, const char *name,
                                 uint16_t qtype, const uint8_t *msg, size_t len)
{
	struct query *q;

	if (e->resolver.sin_family != AF_INET)
		return NULL; /* no upstream resolver: the caller answers SERVFAIL */
	q = query_alloc(e);
	if (!q)
		return NULL;
	q->what = what;
	q->id = new_query_id(e);
	q->qtype = qtype;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->msg = malloc(msg ? len : 512);
	if (!q->msg) {
		query_free(e, q);
		return NULL;
	}
	if (msg) {
		memcpy(q->msg, msg, len);
		q->msg[0] = (uint8_t)(q->id >> 8);
		q->msg[1] = (uint8_t)q->id;
		q->len = len;
	} else {
		q->len = hutch_dns_build_query(q->id, name, qtype, q->msg, 512);
		if (q->len == 0) {
			query_free(e, q);
			return NULL;
		}
	}
	(void)query_send(e, q); /* a lost datagram is retried on the tick */
	return q;
}

static bool e_no_resolver(const struct hutch_egress *e)
{
	return e->resolver.sin_family != AF_INET;
}

/* ---- DNS stub ---- */

static void stub_send(struct hutch_egress *e, const struct sockaddr_in *to, const uint8_t *msg,
                      size_t len)
{
	if (len > 0)
		(void)sendto(e->dns_fd, msg, len, MSG_NOSIGNAL, (const struct sockaddr *)to,
		             sizeof(*to));
}

static void stub_reply(struct hutch_egress *e, const struct sockaddr_in *to,
                       const struct hutch_dns_question *q, int rcode, const uint32_t *addrs,
                       size_t naddrs)
{
	uint8_t out[1024];
	size_t n = hutch_dns_build_reply(q, rcode, addrs, naddrs, STUB_TTL, out, sizeof(out));

	stub_send(e, to, out, n);
	if (rcode == HUTCH_DNS_RCODE_NOERROR)
		e->dns_answered++;
}

static void conn_resolved(struct conn *c, const uint32_t *addrs, size_t naddrs);

static void on_stub_query(struct hutch_egress *e, const uint8_t *msg, size_t len,
                          const struct sockaddr_in *from)
{
	struct hutch_dns_question q;
	const struct cache_entry *ce;
	int r = hutch_dns_parse_query(msg, len, &q);

	if (r == -EBADMSG)
		return; /* not even a header to answer to */
	if (r < 0) {
		stub_reply(e, from, &q, HUTCH_DNS_RCODE_NOTIMP, NULL, 0);
		return;
	}
	if (e->policy->mode == HUTCH_NET_ALL) {
		struct query *uq = query_start(e, Q_FORWARD, q.name, q.qtype, msg, len);
		if (!uq) {
			stub_reply(e, from, &q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
			return;
		}
		uq->client = *from;
		uq->q = q;
		return;
	}
	/* allow: listed names only, and nothing is forwarded for the rest. */
	if (q.qclass != HUTCH_DNS_CLASS_IN || !name_listed(e->policy, q.name)) {
		e->dns_refused++;
		refuse_log(e, "dns", q.name, NULL, "name not in the allow list: NXDOMAIN");
		stub_reply(e, from, &q, HUTCH_DNS_RCODE_NXDOMAIN, NULL, 0);
		return;
	}
	if (q.qtype != HUTCH_DNS_TYPE_A) {
		/* IPv6 and other types: the name exists, no records. */
		stub_reply(e, from, &q, HUTCH_DNS_RCODE_NOERROR, NULL, 0);
		return;
	}
	ce = cache_find(e, q.name);
	if (ce) {
		stub_reply(e, from, &q, HUTCH_DNS_RCODE_NOERROR, ce->addrs, ce->naddrs);
		return;
	}
	{
		struct query *uq = query_start(e, Q_STUB_A, q.name, HUTCH_DNS_TYPE_A, NULL, 0);
		if (!uq) {
			stub_reply(e, from, &q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
			return;
		}
		uq->client = *from;
		uq->q = q;
	}
}

static void on_stub_readable(struct hutch_egress *e)
{
	uint8_t msg[HUTCH_DNS_MSG_MAX];

	for (int i = 0; i < 64; i++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(e->dns_fd, msg, sizeof(msg), MSG_TRUNC,
		                     (struct sockaddr *)&from, &flen);
		if (n < 0)
			return;
		if ((size_t)n > sizeof(msg) || flen != sizeof(from) || from.sin_family != AF_INET)
			continue;
		on_stub_query(e, msg, (size_t)n, &from);
	}
}

/* A query failed or timed out: tell whoever waits. */
static void query_fail(struct hutch_egress *e, struct query *q)
{
	switch (q->what) {
	case Q_FORWARD:
	case Q_STUB_A:
		stub_reply(e, &q->client, &q->q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
		break;
	case Q_CONN:
		if (q->conn)
			conn_resolved(q->conn, NULL, 0);
		break;
	}
	query_free(e, q);
}

static void on_upstream_readable(struct hutch_egress *e)
{
	uint8_t msg[HUTCH_DNS_MSG_MAX];

	for (int i = 0; i < 64; i++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct hutch_dns_answer a;
		struct query *q = NULL;
		ssize_t n = recvfrom(e->upfd, msg, sizeof(msg), MSG_TRUNC, (struct sockaddr *)&from,
		                     &flen);
		uint16_t id;

		if (n < 0)
			return;
		if ((size_t)n > sizeof(msg) || n < 12 || flen != sizeof(from) ||
		    from.sin_addr.s_addr != e->resolver.sin_addr.s_addr ||
		    from.sin_port != e->resolver.sin_port)
			continue;
		id = (uint16_t)(msg[0] << 8 | msg[1]);
		for (size_t k = 0; k < QUERIES_MAX && !q; k++)
			if (e->queries[k].used && e->queries[k].id == id)
				q = &e->queries[k];
		if (!q || hutch_dns_parse_response(msg, (size_t)n, id, q->name, q->qtype, &a) < 0)
			continue;
		switch (q->what) {
		case Q_FORWARD:
			msg[0] = (uint8_t)(q->q.id >> 8);
			msg[1] = (uint8_t)q->q.id;
			stub_send(e, &q->client, msg, (size_t)n);
			e->dns_answered++;
			break;
		case Q_STUB_A:
			cache_put(e, q->name, &a);
			stub_reply(e, &q->client, &q->q,
			           a.rcode == HUTCH_DNS_RCODE_NOERROR    ? HUTCH_DNS_RCODE_NOERROR
			           : a.rcode == HUTCH_DNS_RCODE_NXDOMAIN ? HUTCH_DNS_RCODE_NXDOMAIN
			                                                 : HUTCH_DNS_RCODE_SERVFAIL,
			           a.addrs, a.naddrs);
			break;
		case Q_CONN:
			cache_put(e, q->name, &a);
			if (q->conn)
				conn_resolved(q->conn, a.addrs, a.naddrs);
			break;
		}
		query_free(e, q);
	}
}

/* ---- proxied connections ---- */

static void conn_close(struct conn *c, bool reset)
{
	struct hutch_egress *e = c->e;

	if (c->state == C_CLOSED)
		return;
	c->state = C_CLOSED;
	if (c->cfd >= 0) {
		(void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
		if (reset)
			close_reset(c->cfd);
		else
			close(c->cfd);
		c->cfd = -1;
	}
	if (c->sfd >= 0) {
		(void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->sfd, NULL);
		close(c->sfd);
		c->sfd = -1;
	}
	for (size_t i = 0; i < QUERIES_MAX; i++)
		if (e->queries[i].used && e->queries[i].conn == c)
			e->queries[i].conn = NULL;
	/* Unlink now, free after the event batch (events may still name it). */
	for (struct conn **pp = &e->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->next = e->dead;
	e->dead = c;
	e->nconns--;
}

static void conn_refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void conn_refuse(struct conn *c, const char *fmt, ...)
{
	char reason[112];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	refuse_log(c->e, c->hostport ? "connect" : "tls", c->sni, &c->dst, "%s", reason);
	conn_close(c, true);
}

static int watch_set(struct hutch_egress *e, int fd, struct ev *ev, uint32_t *cur, uint32_t want)
{
	struct epoll_event ee = { .events = want, .data.ptr = ev };

	if (*cur == want)
		return 0;
	if (epoll_ctl(e->epfd, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ee) < 0)
		return -errno;
	*cur = want;
	return 0;
}

/* Recompute what each side waits for. EPOLLRDHUP-less level triggering:
 * read from a side only when the buffer towards the other side is empty. */
static void conn_update(struct conn *c)
{
	uint32_t cw = 0, sw = 0;

	switch (c->state) {
	case C_HELLO:
		cw = EPOLLIN;
		break;
	case C_RESOLVING:
		cw = 0;
		break;
	case C_CONNECTING:
		sw = EPOLLOUT;
		break;
	case C_RELAY:
		if (c->cs.len == 0 && !c->cs.eof)
			cw |= EPOLLIN;
		if (c->sc.off < c->sc.len)
			cw |= EPOLLOUT;
		if (c->sc.len == 0 && !c->sc.eof)
			sw |= EPOLLIN;
		if (c->cs.off < c->cs.len)
			sw |= EPOLLOUT;
		break;
	case C_CLOSED:
		return;
	}
	/* An fd with nothing to wait for stays registered with no events
	 * (EPOLLERR/HUP still report), which keeps the bookkeeping simple. */
	if (watch_set(c->e, c->cfd, &c->ev_c, &c->cmask, cw ? cw : EPOLLERR) < 0 ||
	    (c->sfd >= 0 && watch_set(c->e, c->sfd, &c->ev_s, &c->smask, sw ? sw : EPOLLERR) < 0))
		conn_close(c, true);
}

static void conn_dial(struct conn *c)
{
	while (c->next_addr < c->naddrs) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(c->port) };
		int fd, r;

		sa.sin_addr.s_addr = c->addrs[c->next_addr++];
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			c->last_connect_err = errno;
			break;
		}
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (r == 0 || errno == EINPROGRESS) {
			if (c->sfd >= 0) {
				(void)epoll_ctl(c->e->epfd, EPOLL_CTL_DEL, c->sfd, NULL);
				close(c->sfd);
			}
			c->sfd = fd;
			c->smask = 0;
			c->state = C_CONNECTING;
			c->deadline_ms = hutch_now_mono_ms() + CONNECT_DEADLINE;
			tick_arm(c->e, true);
			conn_update(c);
			return;
		}
		c->last_connect_err = errno;
		close(fd);
	}
	conn_refuse(c, "could not connect to %s port %u: %s", c->sni[0] ? c->sni : "the address",
	            c->port, strerror(c->last_connect_err ? c->last_connect_err : EHOSTUNREACH));
}

static void conn_resolved(struct conn *c, const uint32_t *addrs, size_t naddrs)
{
	size_t n = 0;

	if (c->state != C_RESOLVING)
		return;
	for (size_t i = 0; i < naddrs && n < HUTCH_DNS_ADDRS_MAX; i++)
		if (!addr_forbidden(addrs[i]))
			c->addrs[n++] = addrs[i];
	if (n == 0) {
		conn_refuse(c,
		            naddrs ? "%s resolves only to addresses of this machine, "
		                     "link-local or reserved ranges"
		                   : "%s does not resolve (upstream resolver)",
		            c->sni);
		return;
	}
	c->naddrs = n;
	c->next_addr = 0;
	conn_dial(c);
}

/* The ClientHello is complete: decide. */
static void conn_decide(struct conn *c)
{
	const struct hutch_net_policy *p = c->e->policy;
	uint16_t dport = ntohs(c->dst.sin_port);
	bool name_ok = false, name_wrong_port = false, ip_ok = false;
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &c->dst.sin_addr, ip, sizeof(ip));
	for (size_t i = 0; i < p->nhosts; i++) {
		const struct hutch_net_host *h = &p->hosts[i];
		bool port_ok = entry_port(h) == dport;
		if (h->is_ip && strcmp(h->name, ip) == 0 && port_ok)
			ip_ok = true;
		if (!h->is_ip && c->sni[0] && strcasecmp(h->name, c->sni) == 0) {
			name_ok = name_ok || port_ok;
			name_wrong_port = name_wrong_port || !port_ok;
		}
	}
	c->port = dport;
	if (name_ok) {
		const struct cache_entry *ce = cache_find(c->e, c->sni);
		c->state = C_RESOLVING;
		c->deadline_ms = hutch_now_mono_ms() + QUERY_TIMEOUT_MS * QUERY_TRIES + 500;
		conn_update(c);
		if (ce) {
			conn_resolved(c, ce->addrs, ce->naddrs);
			return;
		}
		{
			struct query *q =
			        query_start(c->e, Q_CONN, c->sni, HUTCH_DNS_TYPE_A, NULL, 0);
			if (!q) {
				conn_refuse(c, e_no_resolver(c->e)
				                       ? "no upstream DNS resolver: set "
				                         "HUTCH_RESOLVER=IP on the host"
				                       : "too many DNS lookups at once");
				return;
			}
			q->conn = c;
		}
		return;
	}
	if (ip_ok && addr_forbidden(c->dst.sin_addr.s_addr)) {
		conn_refuse(c,
		            "%s is this machine, link-local or reserved: use --host-port for a "
		            "service on the host",
		            ip);
		return;
	}
	if (ip_ok) {
		c->addrs[0] = c->dst.sin_addr.s_addr;
		c->naddrs = 1;
		c->next_addr = 0;
		conn_dial(c);
		return;
	}
	if (name_wrong_port)
		conn_refuse(c, "port %u is not allowed for %s", dport, c->sni);
	else if (c->sni[0])
		conn_refuse(c, "%s is not in the allow list", c->sni);
	else
		conn_refuse(c, "no server name (SNI) and %s:%u is not in the allow list", ip,
		            dport);
}

static void conn_on_hello(struct conn *c)
{
	size_t need = 0;
	ssize_t n = read(c->cfd, c->cs.buf + c->cs.len, HUTCH_TLS_HELLO_MAX - c->cs.len);
	int r;

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c, true);
		return;
	}
	if (n == 0) {
		conn_close(c, false); /* gave up before saying hello */
		return;
	}
	c->cs.len += (size_t)n;
	r = hutch_tls_parse_client_hello(c->cs.buf, c->cs.len, c->sni, sizeof(c->sni), &need);
	if (r == 0 && c->cs.len < HUTCH_TLS_HELLO_MAX)
		return;
	if (r == -EPROTO) {
		bool http =
		        c->cs.len >= 4 &&
		        (memcmp(c->cs.buf, "GET ", 4) == 0 || memcmp(c->cs.buf, "POST", 4) == 0 ||
		         memcmp(c->cs.buf, "HEAD", 4) == 0 || memcmp(c->cs.buf, "PUT ", 4) == 0 ||
		         memcmp(c->cs.buf, "CONN", 4) == 0);
		conn_refuse(c, http ? "plain HTTP: only TLS is allowed" : "not a TLS connection");
		return;
	}
	if (r < 0 || r == 0) {
		c->sni[0] = '\0';
		conn_refuse(c, "malformed or oversized TLS ClientHello");
		return;
	}
	conn_decide(c);
}

/* One side is ready: read into d (from rfd) and write out (to rfd) what
 * the other direction holds; wfd is the other side. False when the
 * connection is finished. */
static bool relay_side(struct conn *c, int rfd, int wfd, struct dir *d, struct dir *out,
                       uint32_t events)
{
	ssize_t n;

	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && d->len == 0 && !d->eof) {
		n = read(rfd, d->buf, RELAY_BUF);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			conn_close(c, true);
			return false;
		}
		if (n > 0)
			d->len = (size_t)n;
		if (n == 0) {
			d->eof = true;
			(void)shutdown(wfd, SHUT_WR);
		}
	}
	if ((events & EPOLLOUT) && out->off < out->len) {
		n = send(rfd, out->buf + out->off, out->len - out->off, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			conn_close(c, true);
			return false;
		}
		if (n > 0)
			out->off += (size_t)n;
		if (out->off == out->len) {
			out->off = out->len = 0;
			if (out->eof)
				(void)shutdown(rfd, SHUT_WR);
		}
	}
	return true;
}

static void conn_on_event(struct conn *c, bool server_side, uint32_t events)
{
	if (c->state == C_CLOSED)
		return;
	if (!server_side && c->state == C_HELLO) {
		if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			conn_on_hello(c);
		if (c->state == C_HELLO)
			conn_update(c);
		return;
	}
	if (server_side && c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			c->last_connect_err = err;
			conn_dial(c); /* the next address, or refused */
			return;
		}
		c->state = C_RELAY;
		c->deadline_ms = 0;
		if (!c->sc.buf) {
			c->sc.buf = malloc(RELAY_BUF);
			if (!c->sc.buf) {
				conn_close(c, true);
				return;
			}
		}
		conn_update(c);
		return;
	}
	if (c->state != C_RELAY)
		return;
	if (!(server_side ? relay_side(c, c->sfd, c->cfd, &c->sc, &c->cs, events)
	                  : relay_side(c, c->cfd, c->sfd, &c->cs, &c->sc, events)))
		return;
	if (c->cs.eof && c->sc.eof && c->cs.len == 0 && c->sc.len == 0) {
		conn_close(c, false);
		return;
	}
	conn_update(c);
}

static void on_accept(struct hutch_egress *e, struct listener *l)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in dst;
		socklen_t dlen = sizeof(dst);
		struct conn *c;
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (e->nconns >= HUTCH_EGRESS_CONNS_MAX ||
		    getsockname(fd, (struct sockaddr *)&dst, &dlen) < 0 ||
		    dst.sin_family != AF_INET) {
			refuse_log(e, "connect", NULL, NULL, "too many connections at once (%d)",
			           HUTCH_EGRESS_CONNS_MAX);
			close_reset(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c)
			c->cs.buf = malloc(RELAY_BUF); /* > HUTCH_TLS_HELLO_MAX */
		if (!c || !c->cs.buf) {
			if (c)
				free(c);
			close_reset(fd);
			continue;
		}
		c->e = e;
		c->cfd = fd;
		c->sfd = -1;
		c->dst = dst;
		c->ev_c = (struct ev){ EV_CLIENT, c };
		c->ev_s = (struct ev){ EV_SERVER, c };
		c->next = e->conns;
		e->conns = c;
		e->nconns++;
		e->conns_total++;
		if (l->kind == HUTCH_NET_L_HOSTPORT) {
			c->hostport = true;
			snprintf(c->sni, sizeof(c->sni), "host.hutch.internal");
			c->port = l->port;
			c->addrs[0] = htonl(INADDR_LOOPBACK);
			c->naddrs = 1;
			conn_dial(c);
			continue;
		}
		c->state = C_HELLO;
		c->deadline_ms = hutch_now_mono_ms() + HELLO_DEADLINE_MS;
		tick_arm(e, true);
		conn_update(c);
	}
}

static void on_tick(struct hutch_egress *e)
{
	int64_t now = hutch_now_mono_ms();
	uint64_t expirations;
	bool pending = false;

	(void)!read(e->tickfd, &expirations, sizeof(expirations));
	for (size_t i = 0; i < QUERIES_MAX; i++) {
		struct query *q = &e->queries[i];
		if (!q->used || q->deadline_ms > now)
			continue;
		if (q->tries < QUERY_TRIES)
			(void)query_send(e, q);
		else
			query_fail(e, q);
	}
	for (struct conn *c = e->conns, *next; c; c = next) {
		next = c->next;
		if (c->deadline_ms && c->deadline_ms <= now) {
			if (c->state == C_HELLO)
				conn_refuse(c, "no TLS ClientHello within %d s",
				            HELLO_DEADLINE_MS / 1000);
			else if (c->state == C_CONNECTING) {
				c->last_connect_err = ETIMEDOUT;
				conn_dial(c);
			} else
				conn_refuse(c, "timed out resolving %s", c->sni);
		}
	}
	pending = e->nqueries > 0;
	for (struct conn *c = e->conns; c && !pending; c = c->next)
		pending = c->deadline_ms != 0;
	if (!pending)
		tick_arm(e, false);
}

static void free_dead(struct hutch_egress *e)
{
	while (e->dead) {
		struct conn *c = e->dead;
		e->dead = c->next;
		free(c->cs.buf);
		free(c->sc.buf);
		free(c);
	}
}

void hutch_egress_run(struct hutch_egress *e)
{
	struct epoll_event evs[64];
	int n;

	if (!e)
		return;
	n = epoll_wait(e->epfd, evs, (int)ELEMENTSOF(evs), 0);
	for (int i = 0; i < n; i++) {
		struct ev *ev = evs[i].data.ptr;
		switch (ev->kind) {
		case EV_LISTENER: {
			struct listener *l = ev->ptr;
			if (l->kind == HUTCH_NET_L_DNS)
				on_stub_readable(e);
			else
				on_accept(e, l);
			break;
		}
		case EV_UPSTREAM:
			on_upstream_readable(e);
			break;
		case EV_TICK:
			on_tick(e);
			break;
		case EV_CLIENT:
		case EV_SERVER:
			conn_on_event(ev->ptr, ev->kind == EV_SERVER, evs[i].events);
			break;
		}
	}
	free_dead(e);
}

/* ---- setup, status ---- */

int hutch_egress_new(const struct hutch_net_policy *p, const struct sockaddr_in *resolver,
                     struct hutch_egress **ret, struct hutch_err *err)
{
	struct hutch_egress *e = calloc(1, sizeof(*e));

	if (!e)
		return hutch_err_set(err, -ENOMEM, "allocate the network proxy");
	e->policy = p;
	e->resolver = *resolver;
	e->dns_fd = -1;
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	e->upfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	e->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (e->epfd < 0 || e->upfd < 0 || e->tickfd < 0) {
		int r = -errno;
		hutch_egress_free(e);
		return hutch_err_set_errno(err, r, "create the network proxy's sockets");
	}
	e->ev_up = (struct ev){ EV_UPSTREAM, e };
	e->ev_tick = (struct ev){ EV_TICK, e };
	{
		struct epoll_event up = { .events = EPOLLIN, .data.ptr = &e->ev_up };
		struct epoll_event tk = { .events = EPOLLIN, .data.ptr = &e->ev_tick };
		if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->upfd, &up) < 0 ||
		    epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->tickfd, &tk) < 0) {
			int r = -errno;
			hutch_egress_free(e);
			return hutch_err_set_errno(err, r, "watch the network proxy's sockets");
		}
	}
	*ret = e;
	return 0;
}

int hutch_egress_add_listeners(struct hutch_egress *e, const struct hutch_net_listener *ls,
                               size_t n, struct hutch_err *err)
{
	struct listener *arr = calloc(n ? n : 1, sizeof(*arr));
	int r = 0;

	if (!arr) {
		for (size_t i = 0; i < n; i++)
			close(ls[i].fd);
		return hutch_err_set(err, -ENOMEM, "allocate listeners");
	}
	for (size_t i = 0; i < n; i++) {
		struct epoll_event ee = { .events = EPOLLIN };
		arr[i].fd = ls[i].fd;
		arr[i].kind = ls[i].kind;
		arr[i].port = ls[i].port;
		arr[i].ev = (struct ev){ EV_LISTENER, &arr[i] };
		ee.data.ptr = &arr[i].ev;
		if (ls[i].kind == HUTCH_NET_L_DNS)
			e->dns_fd = ls[i].fd;
		if (r == 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, ls[i].fd, &ee) < 0)
			r = hutch_err_set_errno(err, -errno, "watch a network listener");
	}
	free(e->listeners); /* called once; keeps ownership simple */
	e->listeners = arr;
	e->nlisteners = n;
	return r;
}

int hutch_egress_fd(const struct hutch_egress *e)
{
	return e->epfd;
}

cJSON *hutch_egress_status(const struct hutch_egress *e)
{
	cJSON *o = cJSON_CreateObject(), *arr;
	char addr[INET_ADDRSTRLEN + 8];
	uint64_t first;

	if (!o)
		return NULL;
	if (e_no_resolver(e))
		snprintf(addr, sizeof(addr), "none");
	else
		fmt_addr(&e->resolver, addr, sizeof(addr));
	cJSON_AddStringToObject(o, "resolver", addr);
	cJSON_AddNumberToObject(o, "connections", e->nconns);
	cJSON_AddNumberToObject(o, "connections_total", (double)e->conns_total);
	cJSON_AddNumberToObject(o, "dns_answered", (double)e->dns_answered);
	cJSON_AddNumberToObject(o, "refused_total", (double)e->nrefused);
	arr = cJSON_AddArrayToObject(o, "refused");
	first = e->nrefused > HUTCH_EGRESS_REFUSED_LOG ? e->nrefused - HUTCH_EGRESS_REFUSED_LOG : 0;
	for (uint64_t i = first; arr && i < e->nrefused; i++) {
		const struct refusal *r = &e->refused[i % HUTCH_EGRESS_REFUSED_LOG];
		cJSON *item = cJSON_CreateObject();
		if (!item)
			break;
		cJSON_AddNumberToObject(item, "at", (double)r->at_ms / 1000.0);
		cJSON_AddStringToObject(item, "what", r->what);
		cJSON_AddStringToObject(item, "host", r->host);
		cJSON_AddStringToObject(item, "address", r->address);
		cJSON_AddStringToObject(item, "reason", r->reason);
		cJSON_AddItemToArray(arr, item);
	}
	return o;
}

void hutch_egress_free(struct hutch_egress *e)
{
	if (!e)
		return;
	while (e->conns)
		conn_close(e->conns, true);
	free_dead(e);
	for (size_t i = 0; i < QUERIES_MAX; i++)
		free(e->queries[i].msg);
	for (size_t i = 0; i < e->nlisteners; i++)
		close(e->listeners[i].fd);
	free(e->listeners);
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->upfd >= 0)
		close(e->upfd);
	if (e->tickfd >= 0)
		close(e->tickfd);
	free(e);
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
