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

#include <stdbool.h>
#include <stdint.h>

#include "evloop-internal.h"
#include "netpolicy.h"
#include "refusals-internal.h"
#include "resolver-internal.h"

struct conn;

struct proxy {
	const struct hutch_net_policy *policy;
	struct evloop *loop;
	struct resolver *resolver;
	struct refusals *refusals;
	struct conn *conns, *dead; /* dead: closed, freed after the event batch */
	unsigned nconns;
	uint64_t conns_total;
};

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
