/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS proxy and the host-port relay (proxy-internal.h). Everything that
 * arrives from inside the sandbox is hostile: ClientHellos go through the
 * bounded parser of tls.c, every buffer is fixed-size, every waiting state
 * has a deadline and the number of connections is capped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter_ipv4.h>

#include "allow-internal.h"
#include "fdutil.h"
#include "mitm-internal.h"
#include "proxy-internal.h"
#include "relay.h"
#include "tls-internal.h"
#include "util.h"

#define HELLO_DEADLINE_MS 10000
#define CONNECT_DEADLINE  10000

/* Close with a reset: the client sees its connection fail at once. */
/* Never dial these, whatever the upstream resolver says or the list holds:
 * this machine, link-local (cloud metadata), multicast, reserved. A service
 * on the host is reached through --host-port. */
static bool addr_forbidden(uint32_t a_be)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = a_be };
	int fd, r;

	if (hutch_net_addr_is_reserved(a_be))
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

static int64_t now_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The egress log's record of c, at its end (proxy-internal.h). */
static void conn_record(struct conn *c)
{
	const struct hutch_egress_observer *o = c->p->observer;
	struct hutch_net_conn_record rec = {
		.at_ms = c->at_ms,
		.end_ms = now_real_ms(),
		.kind = c->hostport     ? "host_port"
		        : c->redirected ? "redirect"
		                        : "tls",
		.host = c->sni,
		.dst = &c->dst,
		.upstream = c->upstream.sin_family ? &c->upstream : NULL,
		.allowed = !c->v.refused,
		.rule = c->v.rule,
		.reason = c->v.refused ? c->v.reason : "",
		.bytes_up = c->bytes_up + c->cs.moved,
		.bytes_down = c->bytes_down + c->sc.moved,
		.owner = &c->owner,
	};

	if (!c->v.refused && !c->v.rule[0]) { /* ended by the client before a decision */
		rec.allowed = false;
		rec.rule = "abandoned";
		rec.reason = "closed before a decision (no complete ClientHello)";
	}
	if (o && o->record)
		o->record(o->ud, &rec);
}

/* A connection refused before it became one (limits at accept). */
static void record_early(struct proxy *p, const struct sockaddr_in *dst, const char *code,
                         const char *reason)
{
	static const struct sockaddr_in none = { .sin_family = AF_INET };
	struct hutch_net_conn_record rec = {
		.kind = "tls",
		.host = "",
		.dst = dst ? dst : &none,
		.rule = code,
		.reason = reason,
	};

	if (!p->observer || !p->observer->record)
		return;
	rec.at_ms = rec.end_ms = now_real_ms();
	p->observer->record(p->observer->ud, &rec);
}

static void proxy_conn_close(struct conn *c, bool reset)
{
	struct proxy *p = c->p;

	if (c->state == C_CLOSED)
		return;
	conn_record(c);
	c->state = C_CLOSED;
	if (c->cfd >= 0) {
		evloop_unwatch(p->loop, c->cfd);
		if (reset)
			hutch_close_reset(c->cfd);
		else
			close(c->cfd);
		c->cfd = -1;
	}
	if (c->sfd >= 0) {
		evloop_unwatch(p->loop, c->sfd);
		close(c->sfd);
		c->sfd = -1;
	}
	resolver_cancel(p->resolver, c);
	mitm_conn_free(c);
	/* Unlink now, free after the event batch (events may still name it). */
	for (struct conn **pp = &p->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->next = p->dead;
	p->dead = c;
	p->nconns--;
}

/* Refuse c with a reset, recorded (refusals_verdict()) as code. */
#define conn_refuse(c, code, ...)                                                              \
	do {                                                                                   \
		refusals_verdict((c)->p->refusals, &(c)->v, (c)->hostport ? "connect" : "tls", \
		                 (c)->sni, &(c)->dst, code, __VA_ARGS__);                      \
		proxy_conn_close(c, true);                                                     \
	} while (0)

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
		hutch_relay_events(&c->cs, &c->sc, &cw, &sw);
		break;
	case C_MITM:
	case C_CLOSED:
		return;
	}
	/* An fd with nothing to wait for stays registered with no events
	 * (EPOLLERR/HUP still report), which keeps the bookkeeping simple. */
	if (evloop_watch(c->p->loop, c->cfd, &c->ev_c, &c->cmask, cw ? cw : EPOLLERR) < 0 ||
	    (c->sfd >= 0 &&
	     evloop_watch(c->p->loop, c->sfd, &c->ev_s, &c->smask, sw ? sw : EPOLLERR) < 0))
		proxy_conn_close(c, true);
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
			c->upstream = sa;
			if (c->sfd >= 0) {
				evloop_unwatch(c->p->loop, c->sfd);
				close(c->sfd);
			}
			c->sfd = fd;
			c->smask = 0;
			c->state = C_CONNECTING;
			c->deadline_ms = hutch_now_mono_ms() + CONNECT_DEADLINE;
			evloop_tick(c->p->loop, true);
			conn_update(c);
			return;
		}
		c->last_connect_err = errno;
		close(fd);
	}
	conn_refuse(c, "connect_failed", "could not connect to %s port %u: %s",
	            c->sni[0] ? c->sni : "the address", c->port,
	            strerror(c->last_connect_err ? c->last_connect_err : EHOSTUNREACH));
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
		conn_refuse(c, naddrs ? "forbidden_address" : "unresolved",
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

static void on_resolved(void *ptr, struct resolver_query *q, uint8_t *msg, size_t len,
                        const struct hutch_dns_answer *a)
{
	(void)q;
	(void)msg;
	(void)len;
	conn_resolved(ptr, a ? a->addrs : NULL, a ? a->naddrs : 0);
}

/* A listed name: its addresses from the cache or the upstream resolver
 * (never the address the client dialled). */
static void conn_resolve(struct conn *c)
{
	const struct resolver_cached *ce = resolver_cache_find(c->p->resolver, c->sni);

	c->state = C_RESOLVING;
	c->deadline_ms =
	        hutch_now_mono_ms() + RESOLVER_QUERY_TIMEOUT_MS * RESOLVER_QUERY_TRIES + 500;
	conn_update(c);
	if (ce) {
		conn_resolved(c, ce->addrs, ce->naddrs);
		return;
	}
	if (!resolver_lookup(c->p->resolver, c->sni, on_resolved, c))
		conn_refuse(c, "resolver",
		            !resolver_has_upstream(c->p->resolver)
		                    ? "no upstream DNS resolver: set "
		                      "HUTCH_RESOLVER=IP on the host"
		                    : "too many DNS lookups at once");
}

/* Mode all, port 443 redirected to the proxy (header bindings): a bound
 * name is intercepted, anything else goes where the client dialled, as
 * it would through NAT (the same blocked ranges, and never this host). */
static void conn_decide_redirected(struct conn *c)
{
	char ip[INET_ADDRSTRLEN];

	c->port = ntohs(c->dst.sin_port);
	snprintf(c->v.rule, sizeof(c->v.rule), "all");
	if (c->sni[0] && hutch_net_bindings_has_host(mitm_bindings(c->p->mitm), c->sni)) {
		c->mitm = true;
		conn_resolve(c);
		return;
	}
	inet_ntop(AF_INET, &c->dst.sin_addr, ip, sizeof(ip));
	if (hutch_net_addr_is_blocked_all(c->dst.sin_addr.s_addr) ||
	    addr_forbidden(c->dst.sin_addr.s_addr)) {
		conn_refuse(c, "forbidden_address",
		            "%s is this machine, private, link-local or reserved", ip);
		return;
	}
	c->addrs[0] = c->dst.sin_addr.s_addr;
	c->naddrs = 1;
	c->next_addr = 0;
	conn_dial(c);
}

/* The ClientHello is complete: decide. */
static void conn_decide(struct conn *c)
{
	uint16_t dport = ntohs(c->dst.sin_port);
	char ip[INET_ADDRSTRLEN];

	if (c->redirected) {
		conn_decide_redirected(c);
		return;
	}
	inet_ntop(AF_INET, &c->dst.sin_addr, ip, sizeof(ip));
	c->port = dport;
	switch (hutch_net_allow_tls(c->p->policy, c->sni, ip, dport)) {
	case HUTCH_NET_TLS_RESOLVE:
		snprintf(c->v.rule, sizeof(c->v.rule), "%s:%u", c->sni, dport);
		c->mitm = c->p->mitm &&
		          hutch_net_bindings_has_host(mitm_bindings(c->p->mitm), c->sni);
		conn_resolve(c);
		return;
	case HUTCH_NET_TLS_DIAL:
		snprintf(c->v.rule, sizeof(c->v.rule), "%s:%u", ip, dport);
		if (addr_forbidden(c->dst.sin_addr.s_addr)) {
			conn_refuse(c, "forbidden_address",
			            "%s is this machine, link-local or reserved: use --host-port "
			            "for a service on the host",
			            ip);
			return;
		}
		c->addrs[0] = c->dst.sin_addr.s_addr;
		c->naddrs = 1;
		c->next_addr = 0;
		conn_dial(c);
		return;
	case HUTCH_NET_TLS_WRONG_PORT:
		conn_refuse(c, "wrong_port", "port %u is not allowed for %s", dport, c->sni);
		return;
	case HUTCH_NET_TLS_UNLISTED:
		conn_refuse(c, "unlisted", "%s is not in the allow list", c->sni);
		return;
	case HUTCH_NET_TLS_NO_SNI:
		conn_refuse(c, "no_sni", "no server name (SNI) and %s:%u is not in the allow list",
		            ip, dport);
		return;
	}
}

static void conn_on_hello(struct conn *c)
{
	size_t need = 0;
	ssize_t n = read(c->cfd, c->hello + c->hello_len, HUTCH_TLS_HELLO_MAX - c->hello_len);
	int r;

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			proxy_conn_close(c, true);
		return;
	}
	if (n == 0) {
		proxy_conn_close(c, false); /* gave up before saying hello */
		return;
	}
	c->hello_len += (size_t)n;
	r = hutch_tls_parse_client_hello(c->hello, c->hello_len, c->sni, sizeof(c->sni), &need);
	if (r == 0 && c->hello_len < HUTCH_TLS_HELLO_MAX)
		return;
	if (r <= 0 && c->redirected) {
		c->sni[0] = '\0'; /* not TLS (mode all allows any protocol): spliced */
		conn_decide(c);
		return;
	}
	if (r == -EPROTO) {
		const uint8_t *h = c->hello;
		bool http = c->hello_len >= 4 &&
		            (memcmp(h, "GET ", 4) == 0 || memcmp(h, "POST", 4) == 0 ||
		             memcmp(h, "HEAD", 4) == 0 || memcmp(h, "PUT ", 4) == 0 ||
		             memcmp(h, "CONN", 4) == 0);
		conn_refuse(c, http ? "plain_http" : "not_tls",
		            http ? "plain HTTP: only TLS is allowed" : "not a TLS connection");
		return;
	}
	if (r < 0 || r == 0) {
		c->sni[0] = '\0';
		conn_refuse(c, "bad_hello", "malformed or oversized TLS ClientHello");
		return;
	}
	conn_decide(c);
}

/* The dial succeeded: from now on bytes go through the pipes of
 * base/relay.h, the ClientHello first. */
static int relay_start(struct conn *c)
{
	int r = hutch_relay_dir_init(&c->cs);

	if (r == 0)
		r = hutch_relay_dir_init(&c->sc);
	if (r == 0 && c->hello_len)
		r = hutch_relay_dir_put(&c->cs, c->hello, c->hello_len);
	free(c->hello);
	c->hello = NULL;
	return r;
}

static void conn_on_event(struct conn *c, bool server_side, uint32_t events)
{
	int r;

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
		if (c->mitm) {
			enum mitm_verdict v = mitm_conn_start(c);

			if (v != MITM_GOING)
				proxy_conn_close(c, v == MITM_RESET);
			return;
		}
		c->state = C_RELAY;
		c->deadline_ms = 0;
		if (relay_start(c) < 0) {
			proxy_conn_close(c, true);
			return;
		}
		conn_update(c);
		return;
	}
	if (c->state == C_MITM) {
		enum mitm_verdict v = mitm_conn_event(c, server_side, events);

		if (v != MITM_GOING)
			proxy_conn_close(c, v == MITM_RESET);
		return;
	}
	if (c->state != C_RELAY)
		return;
	r = (events & EPOLLERR) ? -EIO : hutch_relay_pump2(&c->cs, &c->sc, c->cfd, c->sfd);
	if (r != 0) {
		proxy_conn_close(c, r < 0); /* a reset, or both ends done */
		return;
	}
	conn_update(c);
}

static void on_client(void *ptr, uint32_t events)
{
	conn_on_event(ptr, false, events);
}

static void on_server(void *ptr, uint32_t events)
{
	conn_on_event(ptr, true, events);
}

/* A new connection, or NULL (out of memory). */
static struct conn *conn_new(struct proxy *p, int fd, const struct sockaddr_in *dst)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c)
		c->hello = malloc(HUTCH_TLS_HELLO_MAX);
	if (!c || !c->hello) {
		free(c);
		return NULL;
	}
	c->p = p;
	c->cs = c->sc = (struct hutch_relay_dir)HUTCH_RELAY_DIR_INIT;
	c->cfd = fd;
	c->sfd = -1;
	c->dst = *dst;
	c->ev_c = (struct evloop_ev){ on_client, c };
	c->ev_s = (struct evloop_ev){ on_server, c };
	c->next = p->conns;
	p->conns = c;
	p->nconns++;
	p->conns_total++;
	c->at_ms = now_real_ms();
	if (p->observer && p->observer->attribute) {
		struct sockaddr_in client;
		socklen_t len = sizeof(client);

		if (getpeername(fd, (struct sockaddr *)&client, &len) == 0 &&
		    client.sin_family == AF_INET)
			p->observer->attribute(p->observer->ud, &client, &c->dst, &c->owner);
	}
	return c;
}

/* Where a connection redirected by nftables was going (conntrack of the
 * sandbox's netns, which the socket belongs to). */
static int original_dst(int fd, struct sockaddr_in *ret)
{
	socklen_t len = sizeof(*ret);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, ret, &len) < 0)
		return -errno;
	return ret->sin_family == AF_INET ? 0 : -EAFNOSUPPORT;
}

void proxy_accept(struct proxy *p, int lfd, enum hutch_net_listener_kind kind, uint16_t port)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in dst;
		socklen_t dlen = sizeof(dst);
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			refusals_add(p->refusals, "connect", NULL, NULL,
			             "out of file descriptors: the connection was reset");
			record_early(p, NULL, "limit", "out of file descriptors");
			hutch_accept_shed(lfd, &p->spare_fd);
			continue;
		}
		if (fd < 0)
			return;
		if (p->nconns >= HUTCH_EGRESS_CONNS_MAX ||
		    getsockname(fd, (struct sockaddr *)&dst, &dlen) < 0 ||
		    dst.sin_family != AF_INET) {
			refusals_add(p->refusals, "connect", NULL, NULL,
			             "too many connections at once (%d)", HUTCH_EGRESS_CONNS_MAX);
			record_early(p, NULL, "limit", "too many connections at once");
			hutch_close_reset(fd);
			continue;
		}
		if (kind == HUTCH_NET_L_REDIRECT && (!p->mitm || original_dst(fd, &dst) < 0)) {
			refusals_add(p->refusals, "connect", NULL, NULL,
			             "no original destination of a redirected connection");
			record_early(p, NULL, "internal",
			             "no original destination of a redirected connection");
			hutch_close_reset(fd);
			continue;
		}
		c = conn_new(p, fd, &dst);
		if (!c) {
			hutch_close_reset(fd);
			continue;
		}
		c->redirected = kind == HUTCH_NET_L_REDIRECT;
		if (kind == HUTCH_NET_L_HOSTPORT) {
			c->hostport = true;
			snprintf(c->v.rule, sizeof(c->v.rule), "host_port %u", port);
			snprintf(c->sni, sizeof(c->sni), "host.hutch.internal");
			c->port = port;
			c->addrs[0] = htonl(INADDR_LOOPBACK);
			c->naddrs = 1;
			conn_dial(c);
			continue;
		}
		c->state = C_HELLO;
		c->deadline_ms = hutch_now_mono_ms() + HELLO_DEADLINE_MS;
		evloop_tick(p->loop, true);
		conn_update(c);
	}
}

void proxy_tick(struct proxy *p, int64_t now_ms)
{
	for (struct conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		if (c->deadline_ms && c->deadline_ms <= now_ms) {
			if (c->state == C_HELLO && c->redirected) {
				c->sni[0] = '\0'; /* a server-first protocol: spliced */
				conn_decide(c);
			} else if (c->state == C_HELLO)
				conn_refuse(c, "timeout", "no TLS ClientHello within %d s",
				            HELLO_DEADLINE_MS / 1000);
			else if (c->state == C_CONNECTING) {
				c->last_connect_err = ETIMEDOUT;
				conn_dial(c);
			} else if (c->state == C_MITM)
				conn_refuse(c, "timeout",
				            "TLS handshakes with %s or the client timed out",
				            c->sni);
			else
				conn_refuse(c, "timeout", "timed out resolving %s", c->sni);
		}
	}
}

void proxy_open_of(const struct proxy *p, uint64_t cmd, struct hutch_net_open *ret)
{
	for (const struct conn *c = p->conns; c; c = c->next) {
		if (c->state == C_CLOSED || !hutch_net_owner_has(&c->owner, cmd))
			continue;
		ret->n++;
		if (c->v.rule[0] && !c->v.refused)
			ret->allowed++;
		ret->bytes_up += c->bytes_up + c->cs.moved;
		ret->bytes_down += c->bytes_down + c->sc.moved;
	}
}

bool proxy_is_busy(const struct proxy *p)
{
	for (const struct conn *c = p->conns; c; c = c->next)
		if (c->deadline_ms != 0)
			return true;
	return false;
}

void proxy_free_dead(struct proxy *p)
{
	while (p->dead) {
		struct conn *c = p->dead;
		p->dead = c->next;
		hutch_relay_dir_done(&c->cs);
		hutch_relay_dir_done(&c->sc);
		free(c->hello);
		free(c);
	}
}

void proxy_done(struct proxy *p)
{
	p->observer = NULL; /* torn down: the log may be gone already */
	while (p->conns)
		proxy_conn_close(p->conns, true);
	proxy_free_dead(p);
	if (p->spare_fd >= 0)
		close(p->spare_fd);
	p->spare_fd = -EBADF;
}
