/* SPDX-License-Identifier: Apache-2.0 */
/*
 * egress: the supervisor's side of the network modes all and allow. It
 * serves, from the host, the listening sockets init made inside the
 * sandbox's network namespace (hostnet.h):
 *
 *   - the DNS stub (UDP). all: every query is relayed to the upstream
 *     resolver. allow: A queries for listed names are answered with what the
 *     upstream resolver says, any other name gets NXDOMAIN and goes nowhere.
 *   - the transparent TLS proxy (allow). It reads the ClientHello, checks the
 *     server name (or the dialled address) and the port against the list,
 *     resolves the name itself, dials from the host and splices the bytes.
 *     Anything else is reset at once and logged.
 *   - host ports (all, allow): relayed to 127.0.0.1:PORT on the host.
 *
 * Single-threaded and non-blocking, with its own epoll fd that the
 * supervisor's loop watches (the way libmicrohttpd is driven).
 */
#ifndef HUTCH_EGRESS_H
#define HUTCH_EGRESS_H

#include <netinet/in.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "hostnet.h"
#include "netpolicy.h"

#define HUTCH_EGRESS_CONNS_MAX   256 /* proxied connections at once */
#define HUTCH_EGRESS_REFUSED_LOG 64  /* refusals kept for /status */

struct hutch_egress;

/* p must outlive the egress. */
int hutch_egress_new(const struct hutch_net_policy *p, const struct sockaddr_in *resolver,
                     struct hutch_egress **ret, struct hutch_err *err);
/* Takes ownership of the listeners' fds, also on failure. */
int hutch_egress_add_listeners(struct hutch_egress *e, const struct hutch_net_listener *ls,
                               size_t n, struct hutch_err *err);
/* Watch for EPOLLIN; then call hutch_egress_run(). */
int hutch_egress_fd(const struct hutch_egress *e);
/* Handle whatever is ready; never blocks. */
void hutch_egress_run(struct hutch_egress *e);
/* Resolver, counters and the log of refused connections and names. */
cJSON *hutch_egress_status(const struct hutch_egress *e);
/* Closes every socket (listeners included). NULL is fine. */
void hutch_egress_free(struct hutch_egress *e);

/* The first IPv4 "nameserver" of /etc/resolv.conf, port 53. */
int hutch_net_default_resolver(struct sockaddr_in *ret, struct hutch_err *err);

#endif
