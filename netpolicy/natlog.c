/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress log of mode all's NAT path (natlog-internal.h): init's side
 * (the namespace's settings and the two netlink sockets) and the egress's
 * (reading them into records). The messages are built and parsed with
 * libnl's message and attribute helpers (dlopen()ed: libnl-internal.h; the
 * plan loaded it before init's clone, nf_socket() in any case); the protocols are the kernel's
 * nfnetlink_log and ctnetlink (the kernel headers of linux/netfilter).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include "allow-internal.h"
#include "cleanup.h"
#include "fdutil.h"
#include "libnl-internal.h"
#include "natlog-internal.h"

#define COPY_RANGE 80 /* an IPv4 header (at most 60) and the ports */

/* ---- init's side ---- */

/* In the sandbox's netns (its user namespace owns the files): conntrack
 * counts bytes, and ends a flow soon after its close (TIME_WAIT, a reset,
 * an idle UDP flow), so that its record is not held for minutes. Only this
 * namespace's conntrack is changed, which decides nothing here (NAT and
 * the policy's state are the host's, or pasta's). Its timestamps give a
 * flow's start and end to the record (a kernel without them: the times
 * the log and the end were read). */
static const struct {
	/* in the row: no pointers for the loader to relocate at every start
	 * of every hutch process (issue 31: RELRO pages) */
	char name[sizeof("nf_conntrack_tcp_timeout_time_wait")], value[2];
	bool optional;
} SYSCTLS[] = {
	{ "nf_conntrack_acct", "1", false },
	{ "nf_conntrack_events", "1", false },
	{ "nf_conntrack_timestamp", "1", true },
	{ "nf_conntrack_tcp_timeout_time_wait", "1", false },
	{ "nf_conntrack_tcp_timeout_close", "1", false },
	{ "nf_conntrack_udp_timeout", "2", false },
	{ "nf_conntrack_udp_timeout_stream", "2", false },
};

/* The table first: its rule's "ct state" and "log group" have the kernel
 * load what the log needs (nf_conntrack, nfnetlink_log: autoloaded for a
 * rule from any user namespace), and conntrack's settings exist only once
 * nf_conntrack is loaded. Written first, they failed (ENOENT) wherever
 * nothing had loaded it before: an ordinary user's sandbox (pasta's NAT is
 * not the kernel's) on a fresh Debian 12 (the v2 VM), the log silently
 * off. The table is in place before anything of the sandbox runs, so no
 * flow starts before the settings. */
int hutch_natlog_child_setup(bool skip_tls, struct hutch_err *err)
{
	/* tests: a directory where they cannot be written (the kernel's
	 * refusal, as where nf_conntrack cannot be loaded) */
	const char *dir = getenv("HUTCH_TEST_NATLOG_SYSCTLS");
	char path[128];
	int r;

	if ((r = hutch_nft_netlog_child(skip_tls, err)) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(SYSCTLS); i++) {
		/* the precision: GCC cannot tell that the name ends in its row */
		(void)snprintf(path, sizeof(path), "%.64s/%.*s",
		               dir && *dir ? dir : "/proc/sys/net/netfilter",
		               (int)sizeof(SYSCTLS[i].name), SYSCTLS[i].name);
		r = hutch_write_knob_at(AT_FDCWD, path, SYSCTLS[i].value);
		if (r == -ENOENT && SYSCTLS[i].optional)
			continue;
		if (r < 0)
			return hutch_err_set_errno(err, r, "egress log: write '%s'", path);
	}
	return 0;
}

static int nf_socket(int *ret, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int size = 1 << 20;
	int r = hutch_nl_load(err); /* its messages are libnl's */

	if (r < 0)
		return hutch_err_prefix(err, "egress log");
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return hutch_err_set_errno(err, -errno, "egress log: netfilter netlink socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)); /* capped: fine */
	*ret = TAKE_FD(fd);
	return 0;
}

/* One NFULNL_MSG_CONFIG request for group, with one attribute, acked. */
static int nflog_config(int fd, int attr, const void *data, size_t len, struct hutch_err *err)
{
	struct nfgenmsg g = { .nfgen_family = AF_UNSPEC,
		              .version = NFNETLINK_V0,
		              .res_id = htons(HUTCH_NATLOG_GROUP) };
	struct nl_msg *msg = nlmsg_alloc_simple((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG,
	                                        NLM_F_REQUEST | NLM_F_ACK);
	union {
		struct nlmsghdr h;
		char buf[512];
	} ack;
	ssize_t n;
	int r = -ENOMEM;

	if (msg && nlmsg_append(msg, &g, sizeof(g), NLMSG_ALIGNTO) == 0 &&
	    nla_put(msg, attr, (int)len, data) == 0) {
		struct nlmsghdr *h = nlmsg_hdr(msg);

		r = send(fd, h, h->nlmsg_len, 0) < 0 ? -errno : 0;
	}
	nlmsg_free(msg);
	if (r == 0) {
		n = recv(fd, &ack, sizeof(ack), 0);
		r = n < 0 ? -errno
		    : (size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) ||
		                    ack.h.nlmsg_type != NLMSG_ERROR
		            ? -EPROTO
		            : ((struct nlmsgerr *)NLMSG_DATA(&ack.h))->error;
	}
	return r < 0 ? hutch_err_set_errno(err, r, "egress log: configure the netlink log group")
	             : 0;
}

int hutch_natlog_child_sockets(int *ret_nflog, int *ret_ct, struct hutch_err *err)
{
	_cleanup_close_ int lg = -EBADF, ct = -EBADF;
	struct nfulnl_msg_config_cmd bind = { .command = NFULNL_CFG_CMD_BIND };
	struct nfulnl_msg_config_mode mode = { .copy_range = htonl(COPY_RANGE),
		                               .copy_mode = NFULNL_COPY_PACKET };
	uint32_t one = htonl(1);
	int group = NFNLGRP_CONNTRACK_DESTROY;

	if (nf_socket(&lg, err) < 0 || nf_socket(&ct, err) < 0)
		return err->code;
	/* Each packet sent to the socket at once (the default batches up to
	 * a second in the kernel, where no read reaches it): whether it is
	 * read at once is the egress's choice (natlog-internal.h). */
	if (nflog_config(lg, NFULA_CFG_CMD, &bind, sizeof(bind), err) < 0 ||
	    nflog_config(lg, NFULA_CFG_MODE, &mode, sizeof(mode), err) < 0 ||
	    nflog_config(lg, NFULA_CFG_QTHRESH, &one, sizeof(one), err) < 0)
		return err->code;
	if (setsockopt(ct, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0)
		return hutch_err_set_errno(err, -errno, "egress log: conntrack events");
	if (fcntl(lg, F_SETFL, O_NONBLOCK) < 0 || fcntl(ct, F_SETFL, O_NONBLOCK) < 0)
		return hutch_err_set_errno(err, -errno, "egress log: non-blocking sockets");
	*ret_nflog = TAKE_FD(lg);
	*ret_ct = TAKE_FD(ct);
	return 0;
}

/* ---- the egress's side ---- */

static int64_t now_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An address of this machine (the host's input chain refuses it): bind()
 * to it succeeds only if it is local. */
static bool is_local_address(uint32_t a)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = a };

	return fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

static bool in_egress(const struct hutch_net_policy *p, uint32_t a)
{
	for (size_t i = 0; i < p->negress; i++) {
		const struct hutch_net_cidr *c = &p->egress[i];
		uint32_t net, mask;

		if (c->family != AF_INET)
			continue;
		memcpy(&net, c->addr, 4);
		mask = c->prefix ? htonl(~0u << (32 - c->prefix)) : 0;
		if ((a & mask) == (net & mask))
			return true;
	}
	return false;
}

const char *natlog_classify(const struct natlog *n, uint8_t proto, uint32_t daddr, uint16_t dport,
                            char *reason, size_t size)
{
	char ip[INET_ADDRSTRLEN];

	(void)inet_ntop(AF_INET, &daddr, ip, sizeof(ip));
	/* In the order the rules run: egress= in the sandbox, the bindings'
	 * QUIC rule, then the host's table. */
	if (n->policy->egress_set && !in_egress(n->policy, daddr)) {
		(void)snprintf(reason, size, "%s is not in egress=", ip);
		return "egress";
	}
	if (n->tls_redirected && proto == IPPROTO_UDP && ntohs(dport) == 443) {
		(void)snprintf(reason, size,
		               "UDP to port 443 is refused with header bindings (TCP goes "
		               "through the proxy)");
		return "quic";
	}
	if (hutch_net_addr_is_blocked_all(daddr)) {
		(void)snprintf(reason, size,
		               "%s is private, loopback, link-local or reserved: network all "
		               "never reaches it",
		               ip);
		return "forbidden_address";
	}
	if (is_local_address(daddr)) {
		(void)snprintf(reason, size, "%s is an address of this machine", ip);
		return "forbidden_address";
	}
	return NULL;
}

static void emit(struct natlog *n, const struct natlog_flow *f, bool allowed, const char *rule,
                 const char *reason, const uint64_t bytes[2], int64_t end_ms)
{
	const struct hutch_egress_observer *o = *n->observer;
	const char *name = n->stub ? dnsstub_name_of(n->stub, f->daddr) : NULL;
	struct sockaddr_in dst = { .sin_family = AF_INET,
		                   .sin_port = f->dport,
		                   .sin_addr.s_addr = f->daddr };
	struct hutch_net_conn_record rec = {
		.at_ms = f->at_ms,
		.end_ms = end_ms,
		.kind = "nat",
		.proto = f->proto == IPPROTO_TCP ? "tcp" : "udp",
		.host = name ? name : "",
		.dst = &dst,
		.allowed = allowed,
		.rule = rule,
		.reason = reason,
		.bytes_up = bytes ? bytes[0] : 0,
		.bytes_down = bytes ? bytes[1] : 0,
		.bytes_unknown = !bytes,
		.owner = &f->owner,
	};

	if (o && o->record)
		o->record(o->ud, &rec);
}

/* A flow slot: a free one, else the oldest, recorded now without bytes. */
static struct natlog_flow *flow_slot(struct natlog *n)
{
	struct natlog_flow *old = &n->flows[0];

	for (size_t i = 0; i < NATLOG_FLOWS; i++) {
		if (!n->flows[i].proto)
			return &n->flows[i];
		if (n->flows[i].at_ms < old->at_ms)
			old = &n->flows[i];
	}
	emit(n, old, true, "all", "", NULL, now_real_ms());
	n->nflows--;
	return old;
}

/* One logged first packet (an IPv4 header, then the ports). */
static void on_packet(struct natlog *n, const uint8_t *p, size_t len)
{
	const struct hutch_egress_observer *o = *n->observer;
	struct natlog_flow f = { 0 };
	struct sockaddr_in client = { .sin_family = AF_INET }, server = client;
	const char *code;
	char reason[160];
	size_t ihl;

	if (len < 20 || (p[0] >> 4) != 4)
		return;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	if (ihl < 20 || len < ihl + 4 || (p[9] != IPPROTO_TCP && p[9] != IPPROTO_UDP))
		return;
	f.proto = p[9];
	memcpy(&f.saddr, p + 12, 4);
	memcpy(&f.daddr, p + 16, 4);
	memcpy(&f.sport, p + ihl, 2);
	memcpy(&f.dport, p + ihl + 2, 2);
	f.at_ms = now_real_ms();
	n->attempts++;
	client.sin_addr.s_addr = f.saddr;
	client.sin_port = f.sport;
	server.sin_addr.s_addr = f.daddr;
	server.sin_port = f.dport;
	/* The exact look-up finds a TCP socket: a UDP flow goes by time. */
	if (o && o->attribute)
		o->attribute(o->ud, f.proto == IPPROTO_TCP ? &client : NULL,
		             f.proto == IPPROTO_TCP ? &server : NULL, &f.owner);
	n->running = f.owner.running;
	n->logged_since_tick = true;
	code = natlog_classify(n, f.proto, f.daddr, f.dport, reason, sizeof(reason));
	if (code) {
		emit(n, &f, false, code, reason, (const uint64_t[2]){ 0, 0 }, f.at_ms);
		return;
	}
	*flow_slot(n) = f;
	n->nflows++;
	evloop_tick(n->loop, true);
}

/* recv() every message of fd, calling fn on each; ENOBUFS counts. */
static void drain(struct natlog *n, int fd, void (*fn)(struct natlog *, struct nlmsghdr *))
{
	union {
		struct nlmsghdr h;
		char buf[16384];
	} u;

	for (int round = 0; round < 64; round++) {
		ssize_t len = recv(fd, &u, sizeof(u), MSG_DONTWAIT);
		int left;

		if (len < 0 && errno == ENOBUFS) {
			n->lost++;
			continue;
		}
		if (len <= 0)
			return;
		left = (int)len;
		for (struct nlmsghdr *h = &u.h; nlmsg_ok(h, left); h = nlmsg_next(h, &left))
			fn(n, h);
	}
}

static void on_log_msg(struct natlog *n, struct nlmsghdr *h)
{
	struct nlattr *tb[NFULA_MAX + 1];

	if (NFNL_SUBSYS_ID(h->nlmsg_type) != NFNL_SUBSYS_ULOG ||
	    NFNL_MSG_TYPE(h->nlmsg_type) != NFULNL_MSG_PACKET ||
	    nlmsg_parse(h, sizeof(struct nfgenmsg), tb, NFULA_MAX, NULL) < 0 || !tb[NFULA_PAYLOAD])
		return;
	on_packet(n, nla_data(tb[NFULA_PAYLOAD]), (size_t)nla_len(tb[NFULA_PAYLOAD]));
}

/* The log is read at once (EPOLLIN) or at the egress's tick, its runs
 * and a command's start (natlog-internal.h). */
static void read_at_once(struct natlog *n, bool at_once)
{
	if (at_once == (n->nflog_mask != 0))
		return;
	if (!at_once) {
		evloop_unwatch(n->loop, n->nflog_fd);
		n->nflog_mask = 0;
		n->logged_since_tick = true; /* at least one tick before it is watched again */
	} else if (evloop_watch(n->loop, n->nflog_fd, &n->nflog_ev, &n->nflog_mask, EPOLLIN) == 0) {
		return;
	}
	evloop_tick(n->loop, true); /* read at the tick (also when watching failed) */
}

void natlog_on_nflog(struct natlog *n)
{
	drain(n, n->nflog_fd, on_log_msg);
	/* Several commands run: the exact look-up wants the client's socket,
	 * which a late read may no longer find. */
	if (n->running > 1)
		read_at_once(n, true);
}

/* The log's socket is readable (it is watched). One command (or none):
 * attribution by time, the next packets are read at the tick. */
static void on_nflog_ready(void *ptr, uint32_t events)
{
	struct natlog *n = ptr;

	(void)events;
	natlog_on_nflog(n);
	if (n->running <= 1)
		read_at_once(n, false);
}

int natlog_watch(struct natlog *n)
{
	n->nflog_ev = (struct evloop_ev){ on_nflog_ready, n };
	n->nflog_mask = 0;
	return evloop_watch(n->loop, n->nflog_fd, &n->nflog_ev, &n->nflog_mask, EPOLLIN);
}

void natlog_run(struct natlog *n)
{
	if (n->nflog_fd >= 0 && !n->nflog_mask)
		natlog_on_nflog(n);
}

void natlog_command_starts(struct natlog *n)
{
	if (n->nflog_fd < 0)
		return;
	natlog_run(n);
	read_at_once(n, true);
}

/* A conntrack tuple's addresses, ports and protocol. */
static int parse_tuple(struct nlattr *a, struct natlog_flow *f)
{
	struct nlattr *t[CTA_TUPLE_MAX + 1], *ip[CTA_IP_MAX + 1], *pr[CTA_PROTO_MAX + 1];

	if (nla_parse_nested(t, CTA_TUPLE_MAX, a, NULL) < 0 || !t[CTA_TUPLE_IP] ||
	    !t[CTA_TUPLE_PROTO] || nla_parse_nested(ip, CTA_IP_MAX, t[CTA_TUPLE_IP], NULL) < 0 ||
	    nla_parse_nested(pr, CTA_PROTO_MAX, t[CTA_TUPLE_PROTO], NULL) < 0 ||
	    !ip[CTA_IP_V4_SRC] || !ip[CTA_IP_V4_DST] || !pr[CTA_PROTO_NUM] ||
	    !pr[CTA_PROTO_SRC_PORT] || !pr[CTA_PROTO_DST_PORT] || nla_len(ip[CTA_IP_V4_SRC]) < 4 ||
	    nla_len(ip[CTA_IP_V4_DST]) < 4 || nla_len(pr[CTA_PROTO_SRC_PORT]) < 2 ||
	    nla_len(pr[CTA_PROTO_DST_PORT]) < 2)
		return -EINVAL;
	memcpy(&f->saddr, nla_data(ip[CTA_IP_V4_SRC]), 4);
	memcpy(&f->daddr, nla_data(ip[CTA_IP_V4_DST]), 4);
	memcpy(&f->sport, nla_data(pr[CTA_PROTO_SRC_PORT]), 2);
	memcpy(&f->dport, nla_data(pr[CTA_PROTO_DST_PORT]), 2);
	f->proto = nla_get_u8(pr[CTA_PROTO_NUM]);
	return 0;
}

static uint64_t counter_bytes(struct nlattr *a)
{
	struct nlattr *c[CTA_COUNTERS_MAX + 1];
	uint64_t v;

	if (!a || nla_parse_nested(c, CTA_COUNTERS_MAX, a, NULL) < 0 || !c[CTA_COUNTERS_BYTES] ||
	    nla_len(c[CTA_COUNTERS_BYTES]) < 8)
		return 0;
	memcpy(&v, nla_data(c[CTA_COUNTERS_BYTES]), 8);
	return be64toh(v);
}

/* conntrack's start and stop of a flow (CLOCK_REALTIME ns; the stop is
 * when the entry expired), each left as it is when absent. */
static void ct_times(struct nlattr *a, int64_t *start_ms, int64_t *stop_ms)
{
	struct nlattr *t[CTA_TIMESTAMP_MAX + 1];
	uint64_t v;

	if (!a || nla_parse_nested(t, CTA_TIMESTAMP_MAX, a, NULL) < 0)
		return;
	if (t[CTA_TIMESTAMP_START] && nla_len(t[CTA_TIMESTAMP_START]) >= 8 &&
	    (v = be64toh(nla_get_u64(t[CTA_TIMESTAMP_START]))) > 0)
		*start_ms = (int64_t)(v / 1000000);
	if (t[CTA_TIMESTAMP_STOP] && nla_len(t[CTA_TIMESTAMP_STOP]) >= 8 &&
	    (v = be64toh(nla_get_u64(t[CTA_TIMESTAMP_STOP]))) > 0)
		*stop_ms = (int64_t)(v / 1000000);
}

/* A flow's end (DELETE: its record, with its bytes) or, in a look-up's
 * answer (NEW: the events asked for are DESTROY only), its counters so far. */
static void on_ct_msg(struct natlog *n, struct nlmsghdr *h)
{
	struct nlattr *tb[CTA_MAX + 1];
	struct natlog_flow k = { 0 };
	uint64_t bytes[2];
	int64_t end_ms = now_real_ms();
	int type = NFNL_MSG_TYPE(h->nlmsg_type);

	if (NFNL_SUBSYS_ID(h->nlmsg_type) != NFNL_SUBSYS_CTNETLINK ||
	    (type != IPCTNL_MSG_CT_DELETE && type != IPCTNL_MSG_CT_NEW) ||
	    nlmsg_parse(h, sizeof(struct nfgenmsg), tb, CTA_MAX, NULL) < 0 || !tb[CTA_TUPLE_ORIG] ||
	    parse_tuple(tb[CTA_TUPLE_ORIG], &k) < 0)
		return;
	for (size_t i = 0; i < NATLOG_FLOWS; i++) {
		struct natlog_flow *f = &n->flows[i];

		if (f->proto != k.proto || f->sport != k.sport || f->dport != k.dport ||
		    f->daddr != k.daddr || f->saddr != k.saddr)
			continue;
		bytes[0] = counter_bytes(tb[CTA_COUNTERS_ORIG]);
		bytes[1] = counter_bytes(tb[CTA_COUNTERS_REPLY]);
		ct_times(tb[CTA_TIMESTAMP], &f->at_ms, &end_ms);
		if (type == IPCTNL_MSG_CT_NEW) {
			f->bytes[0] = bytes[0];
			f->bytes[1] = bytes[1];
			return;
		}
		emit(n, f, true, "all", "", bytes, end_ms < f->at_ms ? f->at_ms : end_ms);
		f->proto = 0;
		n->nflows--;
		return;
	}
}

void natlog_on_ct(struct natlog *n)
{
	drain(n, n->ct_fd, on_ct_msg);
}

/* One IPCTNL_MSG_CT_GET of f's original tuple appended to buf (at most
 * ASK_MSG bytes): its length, 0 when it did not fit. */
#define ASK_MSG   128
#define ASK_CHUNK 64 /* look-ups per send(): their answers fit the socket's buffer */
static size_t put_get(char *buf, const struct natlog_flow *f)
{
	struct nfgenmsg g = { .nfgen_family = AF_INET, .version = NFNETLINK_V0 };
	struct nl_msg *msg =
	        nlmsg_alloc_simple((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET, NLM_F_REQUEST);
	struct nlattr *tuple, *ip, *proto;
	size_t len = 0;

	if (msg && nlmsg_append(msg, &g, sizeof(g), NLMSG_ALIGNTO) == 0 &&
	    (tuple = nla_nest_start(msg, CTA_TUPLE_ORIG)) &&
	    (ip = nla_nest_start(msg, CTA_TUPLE_IP)) &&
	    nla_put(msg, CTA_IP_V4_SRC, 4, &f->saddr) == 0 &&
	    nla_put(msg, CTA_IP_V4_DST, 4, &f->daddr) == 0 && nla_nest_end(msg, ip) == 0 &&
	    (proto = nla_nest_start(msg, CTA_TUPLE_PROTO)) &&
	    nla_put_u8(msg, CTA_PROTO_NUM, f->proto) == 0 &&
	    nla_put(msg, CTA_PROTO_SRC_PORT, 2, &f->sport) == 0 &&
	    nla_put(msg, CTA_PROTO_DST_PORT, 2, &f->dport) == 0 && nla_nest_end(msg, proto) == 0 &&
	    nla_nest_end(msg, tuple) == 0 && nlmsg_hdr(msg)->nlmsg_len <= ASK_MSG) {
		len = nlmsg_hdr(msg)->nlmsg_len;
		memcpy(buf, nlmsg_hdr(msg), len);
	}
	nlmsg_free(msg);
	return len;
}

/* Ask conntrack for each waiting flow (of command cmd only, unless it is
 * 0), by its tuple: the kernel's look-up removes an entry that has
 * expired, which announces its end (its garbage collector passes every
 * few seconds to a minute), and an answer carries the counters so far.
 * ASK_CHUNK look-ups go in one send(); their answers (queued in it) are
 * read before the next. A dump of the table did this before, but walks
 * every bucket of the machine's conntrack hash (262,144 here: 2 ms of CPU
 * per dump, every second while a flow waits). */
static void ask_flows(struct natlog *n, uint64_t cmd)
{
	char buf[ASK_CHUNK * ASK_MSG];
	size_t len = 0, k = 0;

	for (size_t i = 0; i < NATLOG_FLOWS; i++) {
		const struct natlog_flow *f = &n->flows[i];
		size_t m;

		if (!f->proto || (cmd && !hutch_net_owner_has(&f->owner, cmd)))
			continue;
		m = put_get(buf + len, f);
		len += m;
		k += m > 0;
		if (k == ASK_CHUNK) {
			(void)send(n->ct_fd, buf, len, MSG_DONTWAIT);
			natlog_on_ct(n);
			len = k = 0;
		}
	}
	if (len) {
		(void)send(n->ct_fd, buf, len, MSG_DONTWAIT);
		natlog_on_ct(n);
	}
}

bool natlog_tick(struct natlog *n, int64_t now)
{
	bool waiting = n->nflows && n->ct_fd >= 0;

	/* Read at the tick: after a tick with nothing logged, the next first
	 * packet is read at once again (and the tick may stop). */
	if (n->nflog_fd >= 0 && !n->nflog_mask) {
		natlog_on_nflog(n);
		if (!n->logged_since_tick)
			read_at_once(n, true);
		n->logged_since_tick = false;
	}
	if (waiting && now - n->asked_ms >= NATLOG_ASK_MS) {
		n->asked_ms = now;
		ask_flows(n, 0);
	}
	return waiting || (n->nflog_fd >= 0 && !n->nflog_mask);
}

void natlog_open_of(struct natlog *n, uint64_t cmd, struct hutch_net_open *ret)
{
	bool any = false;

	for (size_t i = 0; i < NATLOG_FLOWS && !any; i++)
		any = n->flows[i].proto && hutch_net_owner_has(&n->flows[i].owner, cmd);
	/* The counters so far: its flows asked for, answered in the send.
	 * What is queued first (events) is read before. */
	if (any && n->ct_fd >= 0) {
		natlog_on_ct(n);
		ask_flows(n, cmd);
	}
	for (size_t i = 0; i < NATLOG_FLOWS; i++) {
		const struct natlog_flow *f = &n->flows[i];

		if (!f->proto || !hutch_net_owner_has(&f->owner, cmd))
			continue;
		ret->n++;
		ret->allowed++;
		ret->bytes_up += f->bytes[0];
		ret->bytes_down += f->bytes[1];
	}
}

void natlog_done(struct natlog *n)
{
	int64_t now = now_real_ms();

	if (n->nflog_fd >= 0)
		drain(n, n->nflog_fd, on_log_msg);
	if (n->ct_fd >= 0)
		natlog_on_ct(n);
	for (size_t i = 0; i < NATLOG_FLOWS; i++)
		if (n->flows[i].proto) {
			emit(n, &n->flows[i], true, "all", "", NULL, now);
			n->flows[i].proto = 0;
			n->nflows--;
		}
}
