/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress log of mode all's NAT path (issue 29; docs/history.md
 * "Egress per command"). What leaves the sandbox through its eth0 crosses
 * no proxy of hutch's, so the kernel tells: in the sandbox's netns a rule
 * (nft.c, hutch_nft_netlog_child()) logs every new TCP or UDP flow to a
 * netlink log group, and conntrack, with its accounting on, announces each
 * flow's end with its byte counts. init opens both netlink sockets there
 * (hutch_natlog_child_sockets()) and passes them up with the listeners;
 * the egress reads them:
 *
 *   - a logged first packet is an attempt: its verdict is decided here the
 *     way the rules that follow it decide (egress=, the ranges mode all
 *     never reaches, this machine's own addresses, QUIC with bindings), it
 *     is attributed (the observer's attribute(), while the client's socket
 *     most likely still exists), and a refused one is recorded at once;
 *   - an allowed one waits, as a flow, for conntrack's end of it (bytes
 *     each way, IP headers included) and is recorded then; one that
 *     outlives the sandbox is recorded at the end without bytes. An
 *     expired conntrack entry is only removed (and its end announced) when
 *     the kernel's garbage collector comes by, up to a minute later, or
 *     when a look-up meets it: while flows wait, the egress's tick asks
 *     conntrack for each of them every NATLOG_ASK_MS. conntrack's timestamps
 *     give the flow's start and end (when the kernel has them).
 *
 * When the log is read matters more than what reading costs: a wake-up of
 * the supervisor per first packet, in the client's connect() (the log is
 * sent with the packet), takes the client's CPU from it on a loaded
 * machine (docs/network.md, "The egress log's NAT path"). So the log's
 * socket is read at once only when the attribution needs it: the first
 * packet after a quiet tick, and while several commands run (the exact
 * look-up wants the client's socket still there). Otherwise it is read at
 * the egress's tick (the kernel queues every message in the socket at the
 * packet: none waits in the kernel), at a command's start and before a
 * command's exit is taken (hutch_egress_run()), so what a command sent is
 * still attributed among the commands that ran when it was sent.
 *
 * Nothing here sees a payload beyond the first packet's IP and port
 * headers (the log's copy range).
 */
#ifndef HUTCH_NATLOG_INTERNAL_H
#define HUTCH_NATLOG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dnsstub-internal.h"
#include "evloop-internal.h"
#include "netpolicy.h"

#define NATLOG_FLOWS  512  /* allowed flows waiting for their end */
#define NATLOG_ASK_MS 1000 /* the waiting flows asked for this often */

struct natlog_flow {
	uint32_t saddr, daddr; /* network byte order */
	uint16_t sport, dport; /* network byte order */
	uint8_t proto;         /* IPPROTO_TCP, IPPROTO_UDP; 0: free */
	int64_t at_ms;
	uint64_t bytes[2]; /* conntrack's counters as last asked (up, down) */
	struct hutch_net_owner owner;
};

struct natlog {
	const struct hutch_net_policy *policy;
	/* The proxy's observer (egress.c sets it), NULL: nobody listens. */
	const struct hutch_egress_observer *const *observer;
	const struct dnsstub *stub; /* the names its answers gave (NULL: none) */
	bool tls_redirected;        /* header bindings: UDP 443 refused inside */
	struct evloop *loop;        /* its tick runs while flows wait */
	int nflog_fd, ct_fd;        /* -1: none */
	struct evloop_ev nflog_ev;  /* the log's socket, watched at once ... */
	uint32_t nflog_mask;        /* ... (EPOLLIN) or read at the tick (0) */
	unsigned running;           /* commands running at the last packet's attribution */
	bool logged_since_tick;     /* read at the tick: a packet since the last one */
	int64_t asked_ms;           /* monotonic: the flows last asked for */
	size_t nflows;              /* flows[] in use */
	struct natlog_flow flows[NATLOG_FLOWS];
	uint64_t attempts, lost; /* logged; lost to a full socket buffer */
};

/* init, in the sandbox's netns, while it holds its capabilities
 * (hutch_net_child_listeners()): the table, then the conntrack settings,
 * then the two sockets, non-blocking and close-on-exec. */
int hutch_natlog_child_setup(bool skip_tls, struct hutch_err *err);
int hutch_natlog_child_sockets(int *ret_nflog, int *ret_ct, struct hutch_err *err);

/* The decision the rules after the log make for a new flow to daddr:port
 * (network byte order): NULL (allowed, rule "all"), or the refusal's code
 * with its words in reason. Pure but for the look-up of this machine's
 * own addresses (a bind() test). */
const char *natlog_classify(const struct natlog *n, uint8_t proto, uint32_t daddr, uint16_t dport,
                            char *reason, size_t size);
/* The log's socket is watched (at once) from now on; its events call
 * natlog_on_nflog(). */
int natlog_watch(struct natlog *n);
/* Read the log's socket (what it holds: non-blocking) and the conntrack
 * socket (readable). */
void natlog_on_nflog(struct natlog *n);
void natlog_on_ct(struct natlog *n);
/* The egress runs (hutch_egress_run(): before a command's exit too): the
 * log's socket is read if it is not watched. */
void natlog_run(struct natlog *n);
/* A command starts: what was logged before it is read (attributed among
 * the commands that ran), then the log is read at once again until its
 * next packet shows whether one command runs. */
void natlog_command_starts(struct natlog *n);
/* The egress's tick (now: monotonic ms): the log read if not watched, a
 * look-up of the waiting flows when it is time. True while flows wait or
 * the log is read at the tick (the tick must go on). */
bool natlog_tick(struct natlog *n, int64_t now);
/* The waiting flows of command cmd, with their counters as conntrack
 * gives them now (netpolicy.h, hutch_egress_open_of()). */
void natlog_open_of(struct natlog *n, uint64_t cmd, struct hutch_net_open *ret);
/* The end: the flows still open are recorded without bytes. */
void natlog_done(struct natlog *n);

#endif
