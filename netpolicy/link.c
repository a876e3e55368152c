/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Netlink wiring inside the sandbox's network namespace (child side: init,
 * root of the new user namespace that owns the netns, before it drops its
 * privileges), and the listening sockets the supervisor serves from inside.
 *
 * none: loopback only, up, so that local servers and tests work: one raw
 * rtnetlink message (lo_up()), no libnl, which is loaded only where a
 * network is made (libnl-internal.h).
 * all: eth0, moved in by the host (hutch_net_host_attach() before GO), gets
 * the sandbox's /30 and the default route via the gateway.
 * allow: no link out at all; a local route for 0.0.0.0/0 makes every IPv4
 * address local, so a connection to any address either reaches one of the
 * supervisor's listeners (which reads the dialled address back with
 * getsockname()) or is refused at once.
 * all and allow: host.hutch.internal (HUTCH_NET_HOST_INTERNAL) on lo, and
 * no IPv6, so that IPv6 connections fail at once instead of leaking past
 * the policy or timing out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/rtnetlink.h>

#include "cleanup.h"
#include "fdutil.h"
#include "hostnet-internal.h"
#include "natlog-internal.h"
#include "netpolicy.h"
#include "sockdiag-internal.h"

#define SANDBOX_IF "eth0"
#define BACKLOG    128
#define DNS_PORT   53
/* The kernel's LOOPBACK_IFINDEX (not in its uapi headers): lo is the first
 * device of every network namespace, made with the namespace. */
#define LO_IFINDEX 1

/* lo up: one RTM_NEWLINK setting IFF_UP on ifindex 1, and its ack. Written
 * by hand, not through libnl, because it is one fixed message that every
 * sandbox sends (network none included), and loading libnl for it would
 * cost every create what the CLI's start no longer pays (libnl-internal.h).
 * rtnetlink handles a request in the sender's send(), so its answer (the
 * ack, or the error it asked for with NLM_F_ACK) is queued when send()
 * returns: one recv() on a socket that has nothing else to read. */
static int lo_up(struct hutch_err *err)
{
	const struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)),
		       .nlmsg_type = RTM_NEWLINK,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
		       .nlmsg_seq = 1 },
		.i = { .ifi_family = AF_UNSPEC,
		       .ifi_index = LO_IFINDEX,
		       .ifi_flags = IFF_UP,
		       .ifi_change = IFF_UP },
	};
	union {
		struct nlmsghdr h;
		char buf[256]; /* an error echoes the request: 68 bytes */
	} ack;
	_cleanup_close_ int fd = -EBADF;
	ssize_t n;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0 || send(fd, &req, req.h.nlmsg_len, 0) < 0 ||
	    (n = recv(fd, &ack, sizeof(ack), 0)) < 0)
		return hutch_err_set_errno(err, -errno, "bring link 'lo' up: rtnetlink");
	if ((size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || ack.h.nlmsg_type != NLMSG_ERROR ||
	    ack.h.nlmsg_seq != req.h.nlmsg_seq)
		return hutch_err_set(err, -EPROTO,
		                     "bring link 'lo' up: rtnetlink answered no ack (type %u, "
		                     "%zd bytes)",
		                     (unsigned)ack.h.nlmsg_type, n);
	n = ((const struct nlmsgerr *)NLMSG_DATA(&ack.h))->error;
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "bring link 'lo' up");
	return 0;
}

static int link_index(struct nl_sock *sk, const char *name, int *ret, struct hutch_err *err)
{
	_cleanup_rtnl_link_ struct rtnl_link *link = NULL;
	int r;

	r = rtnl_link_get_kernel(sk, 0, name, &link);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "find link '%s': %s", name,
		                     nl_geterror(r));
	*ret = rtnl_link_get_ifindex(link);
	return 0;
}

/* An IPv4 route for 0.0.0.0/0: via gateway on ifindex (main table), or,
 * without a gateway, a local route on ifindex (local table). */
static int route_all_add(struct nl_sock *sk, int ifindex, uint32_t gateway, struct hutch_err *err)
{
	_cleanup_rtnl_route_ struct rtnl_route *route = NULL;
	_cleanup_nl_addr_ struct nl_addr *dst = NULL, *gw = NULL;
	struct rtnl_nexthop *nh = NULL;
	uint32_t any = 0;
	int r;

	route = rtnl_route_alloc();
	dst = nl_addr_build(AF_INET, &any, sizeof(any));
	nh = rtnl_route_nh_alloc();
	if (!route || !dst || !nh) {
		if (nh)
			rtnl_route_nh_free(nh);
		return hutch_err_set(err, -ENOMEM, "allocate route");
	}
	nl_addr_set_prefixlen(dst, 0);
	rtnl_route_set_family(route, AF_INET);
	rtnl_route_set_protocol(route, RTPROT_STATIC);
	r = rtnl_route_set_dst(route, dst);
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (gateway) {
		gw = nl_addr_build(AF_INET, &gateway, sizeof(gateway));
		if (!gw) {
			rtnl_route_nh_free(nh);
			return hutch_err_set(err, -ENOMEM, "allocate route");
		}
		rtnl_route_nh_set_gateway(nh, gw);
		rtnl_route_set_table(route, RT_TABLE_MAIN);
		rtnl_route_set_scope(route, RT_SCOPE_UNIVERSE);
		rtnl_route_set_type(route, RTN_UNICAST);
	} else {
		rtnl_route_set_table(route, RT_TABLE_LOCAL);
		rtnl_route_set_scope(route, RT_SCOPE_HOST);
		rtnl_route_set_type(route, RTN_LOCAL);
	}
	/* The route owns nh from here. */
	rtnl_route_add_nexthop(route, nh);
	if (r >= 0)
		r = rtnl_route_add(sk, route, NLM_F_CREATE | NLM_F_EXCL);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "add %s route: %s",
		                     gateway ? "default" : "local 0.0.0.0/0", nl_geterror(r));
	return 0;
}

/* IPv6 off in this namespace. Without IPv6 in the kernel there is nothing
 * to turn off. */
static int ipv6_off(bool with_eth0, struct hutch_err *err)
{
	static const char *const confs[] = { "all", "default", "lo", SANDBOX_IF };
	size_t n = ELEMENTSOF(confs) - (with_eth0 ? 0 : 1);
	char path[80];
	int r;

	if (access("/proc/sys/net/ipv6", F_OK) < 0 && errno == ENOENT)
		return 0;
	for (size_t i = 0; i < n; i++) {
		(void)snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6",
		               confs[i]);
		r = hutch_write_knob_at(AT_FDCWD, path, "1");
		if (r < 0)
			return hutch_err_set_errno(err, r, "turn IPv6 off ('%s')", path);
	}
	return 0;
}

static int setup_all(struct nl_sock *sk, const struct hutch_net_child *c, struct hutch_err *err)
{
	int eth0 = 0, r;

	if (!c || !c->addr || !c->gateway)
		return hutch_err_set(err, -EINVAL, "mode all without addresses");
	r = link_index(sk, SANDBOX_IF, &eth0, err);
	if (r < 0)
		return r;
	r = hutch_nl_addr_add(sk, eth0, c->addr, 30, err);
	if (r < 0)
		return hutch_err_prefix(err, "link '%s'", SANDBOX_IF);
	r = hutch_nl_link_up(sk, SANDBOX_IF, err);
	if (r < 0)
		return r;
	return route_all_add(sk, eth0, c->gateway, err);
}

int hutch_net_setup_child(const struct hutch_net_plan *plan, struct hutch_err *err)
{
	const struct hutch_net_policy *p = plan->policy;
	const struct hutch_net_child *c = &plan->child;
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	enum hutch_net_mode mode = hutch_net_policy_wired_mode(p);
	struct in_addr internal;
	int r;

	r = lo_up(err);
	if (r < 0 || mode == HUTCH_NET_NONE)
		return r;
	r = hutch_nl_open(&sk, err);
	if (r < 0)
		return r;
	(void)inet_pton(AF_INET, HUTCH_NET_HOST_INTERNAL, &internal);
	r = hutch_nl_addr_add(sk, LO_IFINDEX, internal.s_addr, 32, err);
	if (r < 0)
		return hutch_err_prefix(err, "link 'lo'");
	if (mode == HUTCH_NET_ALL && c->usernet)
		r = hutch_nft_usernet_child(c->usernet_block, err); /* pasta made eth0 */
	else if (mode == HUTCH_NET_ALL)
		r = setup_all(sk, c, err);
	else
		r = route_all_add(sk, LO_IFINDEX, 0, err);
	if (r >= 0 && mode == HUTCH_NET_ALL && c->redirect_tls)
		r = hutch_nft_redirect_child(err);
	if (r >= 0 && p->egress_set)
		r = hutch_nft_egress_child(p, err);
	if (r < 0)
		return r;
	return ipv6_off(mode == HUTCH_NET_ALL, err);
}

/* One listening socket: SOCK_STREAM (listen) or SOCK_DGRAM on addr:port. */
static int listen_on(int type, const char *addr, uint16_t port, int *ret, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	(void)inet_pton(AF_INET, addr, &sa.sin_addr);
	fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "create socket for %s:%u", addr,
		                           (unsigned)port);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return hutch_err_set_errno(err, -errno, "bind %s %s:%u",
		                           type == SOCK_STREAM ? "tcp" : "udp", addr,
		                           (unsigned)port);
	if (type == SOCK_STREAM && listen(fd, BACKLOG) < 0)
		return hutch_err_set_errno(err, -errno, "listen on %s:%u", addr, (unsigned)port);
	*ret = TAKE_FD(fd);
	return 0;
}

struct listeners {
	struct hutch_net_listener *ls;
	size_t n, max;
};

static int add_listener(struct listeners *l, int type, const char *addr, uint16_t port,
                        enum hutch_net_listener_kind kind, struct hutch_err *err)
{
	int fd = -EBADF, r;

	if (l->n >= l->max)
		return hutch_err_set(err, -ENOSPC, "more than %zu listening sockets", l->max);
	r = listen_on(type, addr, port, &fd, err);
	if (r < 0)
		return r;
	l->ls[l->n++] = (struct hutch_net_listener){ .fd = fd, .kind = kind, .port = port };
	return 0;
}

/* The proxy's ports: 443 and each distinct other port of the list. */
static int add_proxy_listeners(struct listeners *l, const struct hutch_net_policy *p,
                               struct hutch_err *err)
{
	int r;

	r = add_listener(l, SOCK_STREAM, "0.0.0.0", HUTCH_NET_TLS_PORT, HUTCH_NET_L_PROXY, err);
	for (size_t i = 0; r >= 0 && i < p->nhosts; i++) {
		uint16_t port = hutch_net_host_port(&p->hosts[i]);
		bool seen = false;

		for (size_t j = 0; j < l->n; j++)
			seen |= l->ls[j].kind == HUTCH_NET_L_PROXY && l->ls[j].port == port;
		if (!seen)
			r = add_listener(l, SOCK_STREAM, "0.0.0.0", port, HUTCH_NET_L_PROXY, err);
	}
	return r;
}

/* The egress log's settings and two netlink sockets (natlog.c), as
 * listeners of port 0. A kernel without what it needs (the netfilter log,
 * conntrack's events) costs the log, not the sandbox: no sockets go up,
 * the log's answer says it is not complete, and warn says why (the
 * supervisor's events log: the user asked for the log). */
static int add_natlog(struct listeners *l, bool skip_tls, struct hutch_err *warn,
                      struct hutch_err *err)
{
	struct hutch_err why = { 0 };
	int lg, ct;

	if (l->n + 2 > l->max)
		return hutch_err_set(err, -ENOSPC, "too many network listeners");
	if (hutch_natlog_child_setup(skip_tls, &why) < 0 ||
	    hutch_natlog_child_sockets(&lg, &ct, &why) < 0) {
		(void)hutch_err_set(warn, why.code,
		                    "--nat-log on, but the NAT path is not logged: %s (the host's "
		                    "kernel needs nf_conntrack and nfnetlink_log: modprobe them)",
		                    why.msg);
		return 0;
	}
	l->ls[l->n++] = (struct hutch_net_listener){ .fd = lg, .kind = HUTCH_NET_L_NFLOG };
	l->ls[l->n++] = (struct hutch_net_listener){ .fd = ct, .kind = HUTCH_NET_L_CTEVENTS };
	return 0;
}

/* The egress log's exact owner: a sock_diag socket of this netns. One that
 * cannot be made costs the log's exactness ("owner": "time"), not the
 * sandbox. */
static int add_sockdiag(struct listeners *l, struct hutch_err *err)
{
	struct hutch_err ignored = { 0 };
	int fd;

	if (l->n >= l->max)
		return hutch_err_set(err, -ENOSPC, "too many network listeners");
	if (sockdiag_open(&fd, &ignored) == 0)
		l->ls[l->n++] =
		        (struct hutch_net_listener){ .fd = fd, .kind = HUTCH_NET_L_SOCKDIAG };
	return 0;
}

int hutch_net_child_listeners(const struct hutch_net_plan *plan, struct hutch_net_listener *ls,
                              size_t max, struct hutch_err *warn, struct hutch_err *err)
{
	const struct hutch_net_policy *p = plan->policy;
	const struct hutch_net_child *c = &plan->child;
	struct listeners l = { .ls = ls, .n = 0, .max = max };
	bool allow = p->mode == HUTCH_NET_ALLOW;
	int r;

	if (hutch_net_policy_wired_mode(p) == HUTCH_NET_NONE)
		return 0;
	r = add_listener(&l, SOCK_DGRAM, allow ? "0.0.0.0" : "127.0.0.1", DNS_PORT, HUTCH_NET_L_DNS,
	                 err);
	if (r >= 0 && allow)
		r = add_proxy_listeners(&l, p, err);
	if (r >= 0 && !allow && c && c->redirect_tls)
		r = add_listener(&l, SOCK_STREAM, "127.0.0.1", HUTCH_NET_REDIRECT_PORT,
		                 HUTCH_NET_L_REDIRECT, err);
	for (size_t i = 0; r >= 0 && c && i < c->nhost_ports; i++)
		r = add_listener(&l, SOCK_STREAM, HUTCH_NET_HOST_INTERNAL, c->host_ports[i],
		                 HUTCH_NET_L_HOSTPORT, err);
	if (r >= 0 && !allow && c && c->log_nat)
		r = add_natlog(&l, c->redirect_tls, warn, err);
	if (r >= 0 && c && c->log_owner)
		r = add_sockdiag(&l, err);
	if (r < 0) {
		for (size_t i = 0; i < l.n; i++) {
			(void)close(ls[i].fd);
			ls[i].fd = -EBADF;
		}
		return r;
	}
	return (int)l.n;
}
