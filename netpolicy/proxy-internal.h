/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connections the supervisor carries for a sandbox: the transparent
 * TLS proxy of mode allow (read the ClientHello, decide with
 * hutch_net_allow_tls(), resolve the listed name itself, dial from the host
 * and splice the bytes both ways, or reset at once and log why) and the
 * host-port relay of modes all and allow (dial 127.0.0.1:PORT on the host
 * and splice). Both are one state machine: a host-port connection starts at
 * the dial. Every waiting state has a deadline; at most
 * HUTCH_EGRESS_CONNS_MAX connections at once.
 */
#ifndef HUTCH_PROXY_INTERNAL_H
#define HUTCH_PROXY_INTERNAL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "evloop-internal.h"
#include "netpolicy.h"
#include "refusals-internal.h"
#include "relay.h"
#include "resolver-internal.h"

struct mitm;
struct mitm_conn;

enum conn_state {
	C_HELLO,      /* reading the ClientHello */
	C_RESOLVING,  /* waiting for the upstream resolver */
	C_CONNECTING, /* dialling out */
	C_RELAY,
	C_MITM, /* a bound host: TLS terminated both ways (proxy-mitm.c) */
	C_CLOSED,
};

struct conn {
	struct proxy *p;
	struct evloop_ev ev_c, ev_s;
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
	uint8_t *hello; /* the ClientHello as read (HUTCH_TLS_HELLO_MAX) */
	size_t hello_len;
	/* client->server (the ClientHello first), server->client; base/relay.h */
	struct hutch_relay_dir cs, sc;
	bool mitm;           /* the SNI is a bound host: intercept */
	bool redirected;     /* mode all: 443 redirected here; dst is the original */
	struct mitm_conn *m; /* C_MITM: its state (proxy-mitm.c) */
	/* The egress log (netpolicy.h): accepted when (realtime), made by
	 * whom, the rule that allowed it or the code and words of its
	 * refusal, where it was dialled outside (sin_family 0: nowhere), and
	 * a bound connection's plaintext bytes (the relay counts the rest). */
	int64_t at_ms;
	struct hutch_net_owner owner;
	struct refusal_verdict v;
	struct sockaddr_in upstream;
	uint64_t bytes_up, bytes_down;
	struct conn *next;
};

struct proxy {
	const struct hutch_net_policy *policy;
	struct evloop *loop;
	struct resolver *resolver;
	struct refusals *refusals;
	struct mitm *mitm;         /* header bindings: NULL when none */
	struct conn *conns, *dead; /* dead: closed, freed after the event batch */
	unsigned nconns;
	uint64_t conns_total;
	int spare_fd; /* given up to accept (and reset) a connection when out of fds */
	const struct hutch_egress_observer *observer; /* the egress log, or NULL */
};

/* proxy-mitm.c's answer to proxy.c, which alone closes connections:
 * what a C_MITM connection needs next. */
enum mitm_verdict {
	MITM_GOING, /* still relaying, or waiting */
	MITM_CLOSE, /* done: close in order */
	MITM_RESET, /* failed or refused (recorded): close with a reset */
};
/* proxy-mitm.c: the connection to a bound host is dialled: start both
 * TLS handshakes (upstream first, verified), then relay HTTP/1.1 with the
 * bound headers set. */
enum mitm_verdict mitm_conn_start(struct conn *c);
/* An event on either side of a C_MITM connection. */
enum mitm_verdict mitm_conn_event(struct conn *c, bool server_side, uint32_t events);
/* Free the TLS state (from conn_close). */
void mitm_conn_free(struct conn *c);

/* The open connections of command cmd (netpolicy.h, hutch_egress_open_of()). */
void proxy_open_of(const struct proxy *p, uint64_t cmd, struct hutch_net_open *ret);
/* Accept what waits on listener fd (a TLS proxy or host-port listener). */
void proxy_accept(struct proxy *p, int fd, enum hutch_net_listener_kind kind, uint16_t port);
/* Act on the connections whose deadline has passed. */
void proxy_tick(struct proxy *p, int64_t now_ms);
/* Some connection waits for a deadline. */
bool proxy_is_busy(const struct proxy *p);
/* Free the connections closed during the last event batch. */
void proxy_free_dead(struct proxy *p);
/* Reset every connection and free them all. */
void proxy_done(struct proxy *p);

#endif
