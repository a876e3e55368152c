/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private helpers shared by the netpolicy sources: the libnl boundary
 * (error mapping, socket set-up, cleanup attributes; libnl itself is
 * dlopen()ed, libnl-internal.h) and the nftables table of mode all. Not
 * part of the module's public interface.
 */
#ifndef HUTCH_HOSTNET_INTERNAL_H
#define HUTCH_HOSTNET_INTERNAL_H

#include <stdbool.h>

#include "error.h"
#include "libnl-internal.h"
#include "netpolicy.h"

/* A cleanup function that drops one reference of a libnl object. */
#define HUTCH_NL_CLEANUP(name, type, put) \
	static inline void name(type **p) \
	{                                 \
		if (*p)                   \
			put(*p);          \
	}
HUTCH_NL_CLEANUP(nl_sockp, struct nl_sock, nl_socket_free)
HUTCH_NL_CLEANUP(nl_cachep, struct nl_cache, nl_cache_free)
HUTCH_NL_CLEANUP(rtnl_linkp, struct rtnl_link, rtnl_link_put)
HUTCH_NL_CLEANUP(rtnl_addrp, struct rtnl_addr, rtnl_addr_put)
HUTCH_NL_CLEANUP(rtnl_routep, struct rtnl_route, rtnl_route_put)
HUTCH_NL_CLEANUP(nl_addrp, struct nl_addr, nl_addr_put)

#define _cleanup_nl_sock_    __attribute__((cleanup(nl_sockp)))
#define _cleanup_nl_cache_   __attribute__((cleanup(nl_cachep)))
#define _cleanup_rtnl_link_  __attribute__((cleanup(rtnl_linkp)))
#define _cleanup_rtnl_addr_  __attribute__((cleanup(rtnl_addrp)))
#define _cleanup_rtnl_route_ __attribute__((cleanup(rtnl_routep)))
#define _cleanup_nl_addr_    __attribute__((cleanup(nl_addrp)))

/* libnl returns -NLE_* codes, not errno: map them to a negative errno. */
int hutch_nl_errno(int nlerr);
/* A NETLINK_ROUTE socket, connected (close-on-exec: libnl sets it);
 * libnl loaded first (hutch_nl_load()). */
int hutch_nl_open(struct nl_sock **ret, struct hutch_err *err);
/* Set IFF_UP on the link named name. */
int hutch_nl_link_up(struct nl_sock *sk, const char *name, struct hutch_err *err);
/* Add addr/prefix (IPv4, network byte order) to the link with ifindex. */
int hutch_nl_addr_add(struct nl_sock *sk, int ifindex, uint32_t addr, unsigned prefix,
                      struct hutch_err *err);
/* The slot of a link named hutch<digits>, or -1 for any other name. */
long hutch_net_link_slot(const char *name);

/* nftables table "inet hutch" (nft.c). ensure: create it for the pool if
 * absent (atomically; a concurrent creator is fine), or check that the
 * existing one was made for the same pool. remove: delete it if present. */
int hutch_nft_ensure(const struct hutch_net_pool *pool, struct hutch_err *err);
int hutch_nft_remove(struct hutch_err *err);
/* Rootless mode all, in the sandbox's netns (init): the table "inet
 * hutch_usernet" refusing the blocked ranges, host_block (set elements,
 * "" or NULL for none) and IPv6 on the way out. */
int hutch_nft_usernet_child(const char *host_block, struct hutch_err *err);

/* User-mode networking (usernet.c). host_block: every IPv4 address of the
 * host (/32) and the /30 of each root-mode host link, as set elements
 * (malloc'ed). */
int hutch_net_usernet_host_block(char **ret, struct hutch_err *err);

/* What pasta is started on (not owned): init's user and network
 * namespaces, and the sandbox's cgroup (v2) it joins, or -1. */
struct hutch_net_usernet_fds {
	int userns_fd, netns_fd, cgroup_fd;
};
/* A started pasta: its pid (0: none), pidfd, the read ends of its pid
 * file pipe (readable once it is ready; EOF if it ended first) and of its
 * stderr. The fds are the caller's. */
struct hutch_net_usernet_proc {
	pid_t pid;
	int pidfd, ready_fd, err_fd;
};
/* spawn: fork pasta at path serving a tap "eth0" in in's namespaces,
 * configured with a's addresses, and return at once; ret->pid is set as
 * soon as it is forked (stop() kills and reaps it, also after a failed
 * spawn), the fds of ret that are not -1 are the caller's to close.
 * wait_ready: block until it is ready (0), or ended or timed out (the
 * error with what pasta said). complaint: what it wrote to stderr, one
 * line, without blocking. stop: kill and reap it; its wait status. */
int hutch_net_usernet_spawn(const char *path, const struct hutch_net_addrs *a,
                            const struct hutch_net_usernet_fds *in,
                            struct hutch_net_usernet_proc *ret, struct hutch_err *err);
int hutch_net_usernet_wait_ready(pid_t pid, int ready_r, int err_r, struct hutch_err *err);
void hutch_net_usernet_complaint(int err_r, char *buf, size_t size);
int hutch_net_usernet_stop(pid_t pid);
/* The plan's pasta (usernet-plan.c): its members of /status's network
 * object (its stop: netpolicy.h). */
void hutch_net_plan_helper_status(const struct hutch_net_plan *plan, cJSON *o);

/* A fast look at the table over raw netlink (nftprobe.c). probe: 1 when
 * the set pool4 of table inet hutch holds exactly pool; 0 when it holds
 * something else; negative when there is no such set (-ENODEV) or on any
 * error. Only 1 is conclusive: for the rest, ask libnftables. */
#define HUTCH_NFT_ELEMS_MAX 16
struct hutch_nft_elems {
	uint32_t starts[HUTCH_NFT_ELEMS_MAX], ends[HUTCH_NFT_ELEMS_MAX]; /* network order */
	size_t nstarts, nends;
};
int hutch_nft_probe_pool(const struct hutch_net_pool *pool);
/* Pure parts, for the unit test: the attributes of one NFT_MSG_NEWSETELEM
 * (after its nfgenmsg) appended to e; does e describe exactly pool. */
int hutch_nft_parse_setelems(const void *attrs, size_t len, struct hutch_nft_elems *e);
bool hutch_nft_elems_are_pool(const struct hutch_nft_elems *e, const struct hutch_net_pool *pool);

/* "A.B.C.D/N" of a pool, into buf (at least 19 bytes). */
void hutch_net_pool_format(const struct hutch_net_pool *pool, char *buf, size_t size);

#endif
