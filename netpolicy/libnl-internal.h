/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libnl (libnl-route-3 and its libnl-3), loaded with dlopen() where a
 * network is made: the host side of mode all (veth, addresses, the pool's
 * route check, gc of links), init's wiring of eth0, routes and addresses
 * in modes all and allow, the nftables probe and the egress log's
 * netfilter messages. Linked statically, its relocated data cost every
 * start of every hutch command 555 relative relocations and 7,656 bytes
 * of RELRO (two pages written at start, issue 31: CLI start); a sandbox
 * of network none needs none of it (link.c brings lo up with one raw
 * rtnetlink message).
 *
 * Include this header after the libnl headers a file uses: as
 * ssl-internal.h does for OpenSSL, it turns each libnl function the
 * netpolicy sources call (directly or through libnl's macros, e.g.
 * nla_for_each_nested()) into a call through the table hutch_nl,
 * declared with the library's own prototypes, so the compiler checks
 * every call. A function not in the list fails to link (libnl is not
 * linked). hutch_nl is written once, by hutch_nl_load() before any use:
 * hutch_net_plan_make() loads it in the supervisor before init's clone
 * (init inherits it), hutch_nl_open() and the netfilter sockets in any
 * other process (gc, doctor).
 */
#ifndef HUTCH_LIBNL_INTERNAL_H
#define HUTCH_LIBNL_INTERNAL_H

#include <netlink/attr.h>
#include <netlink/cache.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "error.h"

/* Every libnl function hutch (and its unit test) calls, by its exported
 * name. */
#define HUTCH_NL_SYMBOLS(X)          \
	X(nl_addr2str)               \
	X(nl_addr_build)             \
	X(nl_addr_get_binary_addr)   \
	X(nl_addr_get_family)        \
	X(nl_addr_get_len)           \
	X(nl_addr_get_prefixlen)     \
	X(nl_addr_put)               \
	X(nl_addr_set_prefixlen)     \
	X(nl_cache_foreach)          \
	X(nl_cache_free)             \
	X(nl_cache_get_first)        \
	X(nl_cache_get_next)         \
	X(nl_connect)                \
	X(nl_geterror)               \
	X(nl_recvmsgs_default)       \
	X(nl_send_auto)              \
	X(nl_socket_alloc)           \
	X(nl_socket_free)            \
	X(nl_socket_modify_cb)       \
	X(nla_data)                  \
	X(nla_get_u32)               \
	X(nla_get_u64)               \
	X(nla_get_u8)                \
	X(nla_len)                   \
	X(nla_nest_end)              \
	X(nla_nest_start)            \
	X(nla_next)                  \
	X(nla_ok)                    \
	X(nla_parse)                 \
	X(nla_parse_nested)          \
	X(nla_put)                   \
	X(nla_put_string)            \
	X(nla_put_u32)               \
	X(nla_put_u8)                \
	X(nla_type)                  \
	X(nlmsg_alloc)               \
	X(nlmsg_alloc_simple)        \
	X(nlmsg_append)              \
	X(nlmsg_data)                \
	X(nlmsg_datalen)             \
	X(nlmsg_free)                \
	X(nlmsg_hdr)                 \
	X(nlmsg_next)                \
	X(nlmsg_ok)                  \
	X(nlmsg_parse)               \
	X(rtnl_addr_add)             \
	X(rtnl_addr_alloc)           \
	X(rtnl_addr_put)             \
	X(rtnl_addr_set_family)      \
	X(rtnl_addr_set_ifindex)     \
	X(rtnl_addr_set_local)       \
	X(rtnl_link_add)             \
	X(rtnl_link_alloc)           \
	X(rtnl_link_alloc_cache)     \
	X(rtnl_link_change)          \
	X(rtnl_link_delete)          \
	X(rtnl_link_get_ifindex)     \
	X(rtnl_link_get_kernel)      \
	X(rtnl_link_get_name)        \
	X(rtnl_link_i2name)          \
	X(rtnl_link_put)             \
	X(rtnl_link_set_flags)       \
	X(rtnl_link_set_name)        \
	X(rtnl_link_set_ns_pid)      \
	X(rtnl_link_veth_alloc)      \
	X(rtnl_link_veth_get_peer)   \
	X(rtnl_link_veth_release)    \
	X(rtnl_route_add)            \
	X(rtnl_route_add_nexthop)    \
	X(rtnl_route_alloc)          \
	X(rtnl_route_alloc_cache)    \
	X(rtnl_route_get_dst)        \
	X(rtnl_route_get_nnexthops)  \
	X(rtnl_route_get_table)      \
	X(rtnl_route_nexthop_n)      \
	X(rtnl_route_nh_alloc)       \
	X(rtnl_route_nh_free)        \
	X(rtnl_route_nh_get_ifindex) \
	X(rtnl_route_nh_set_gateway) \
	X(rtnl_route_nh_set_ifindex) \
	X(rtnl_route_put)            \
	X(rtnl_route_set_dst)        \
	X(rtnl_route_set_family)     \
	X(rtnl_route_set_protocol)   \
	X(rtnl_route_set_scope)      \
	X(rtnl_route_set_table)      \
	X(rtnl_route_set_type)

struct hutch_nl {
#define X(fn) __typeof__(fn) *fn;
	HUTCH_NL_SYMBOLS(X)
#undef X
};

/* All NULL until hutch_nl_load() has succeeded. */
extern struct hutch_nl hutch_nl;

/* Load libnl-route-3 (and with it libnl-3) and fill hutch_nl; idempotent.
 * Returns 0 or a negative errno with err filled: dlerror()'s text and the
 * Debian packages that hold the libraries. */
int hutch_nl_load(struct hutch_err *err);

/* libnl.c itself names the real functions (dlsym's strings, offsetof). */
#ifndef HUTCH_NL_NO_REDIRECT
#define nl_addr2str               (*hutch_nl.nl_addr2str)
#define nl_addr_build             (*hutch_nl.nl_addr_build)
#define nl_addr_get_binary_addr   (*hutch_nl.nl_addr_get_binary_addr)
#define nl_addr_get_family        (*hutch_nl.nl_addr_get_family)
#define nl_addr_get_len           (*hutch_nl.nl_addr_get_len)
#define nl_addr_get_prefixlen     (*hutch_nl.nl_addr_get_prefixlen)
#define nl_addr_put               (*hutch_nl.nl_addr_put)
#define nl_addr_set_prefixlen     (*hutch_nl.nl_addr_set_prefixlen)
#define nl_cache_foreach          (*hutch_nl.nl_cache_foreach)
#define nl_cache_free             (*hutch_nl.nl_cache_free)
#define nl_cache_get_first        (*hutch_nl.nl_cache_get_first)
#define nl_cache_get_next         (*hutch_nl.nl_cache_get_next)
#define nl_connect                (*hutch_nl.nl_connect)
#define nl_geterror               (*hutch_nl.nl_geterror)
#define nl_recvmsgs_default       (*hutch_nl.nl_recvmsgs_default)
#define nl_send_auto              (*hutch_nl.nl_send_auto)
#define nl_socket_alloc           (*hutch_nl.nl_socket_alloc)
#define nl_socket_free            (*hutch_nl.nl_socket_free)
#define nl_socket_modify_cb       (*hutch_nl.nl_socket_modify_cb)
#define nla_data                  (*hutch_nl.nla_data)
#define nla_get_u32               (*hutch_nl.nla_get_u32)
#define nla_get_u64               (*hutch_nl.nla_get_u64)
#define nla_get_u8                (*hutch_nl.nla_get_u8)
#define nla_len                   (*hutch_nl.nla_len)
#define nla_nest_end              (*hutch_nl.nla_nest_end)
#define nla_nest_start            (*hutch_nl.nla_nest_start)
#define nla_next                  (*hutch_nl.nla_next)
#define nla_ok                    (*hutch_nl.nla_ok)
#define nla_parse                 (*hutch_nl.nla_parse)
#define nla_parse_nested          (*hutch_nl.nla_parse_nested)
#define nla_put                   (*hutch_nl.nla_put)
#define nla_put_string            (*hutch_nl.nla_put_string)
#define nla_put_u32               (*hutch_nl.nla_put_u32)
#define nla_put_u8                (*hutch_nl.nla_put_u8)
#define nla_type                  (*hutch_nl.nla_type)
#define nlmsg_alloc               (*hutch_nl.nlmsg_alloc)
#define nlmsg_alloc_simple        (*hutch_nl.nlmsg_alloc_simple)
#define nlmsg_append              (*hutch_nl.nlmsg_append)
#define nlmsg_data                (*hutch_nl.nlmsg_data)
#define nlmsg_datalen             (*hutch_nl.nlmsg_datalen)
#define nlmsg_free                (*hutch_nl.nlmsg_free)
#define nlmsg_hdr                 (*hutch_nl.nlmsg_hdr)
#define nlmsg_next                (*hutch_nl.nlmsg_next)
#define nlmsg_ok                  (*hutch_nl.nlmsg_ok)
#define nlmsg_parse               (*hutch_nl.nlmsg_parse)
#define rtnl_addr_add             (*hutch_nl.rtnl_addr_add)
#define rtnl_addr_alloc           (*hutch_nl.rtnl_addr_alloc)
#define rtnl_addr_put             (*hutch_nl.rtnl_addr_put)
#define rtnl_addr_set_family      (*hutch_nl.rtnl_addr_set_family)
#define rtnl_addr_set_ifindex     (*hutch_nl.rtnl_addr_set_ifindex)
#define rtnl_addr_set_local       (*hutch_nl.rtnl_addr_set_local)
#define rtnl_link_add             (*hutch_nl.rtnl_link_add)
#define rtnl_link_alloc           (*hutch_nl.rtnl_link_alloc)
#define rtnl_link_alloc_cache     (*hutch_nl.rtnl_link_alloc_cache)
#define rtnl_link_change          (*hutch_nl.rtnl_link_change)
#define rtnl_link_delete          (*hutch_nl.rtnl_link_delete)
#define rtnl_link_get_ifindex     (*hutch_nl.rtnl_link_get_ifindex)
#define rtnl_link_get_kernel      (*hutch_nl.rtnl_link_get_kernel)
#define rtnl_link_get_name        (*hutch_nl.rtnl_link_get_name)
#define rtnl_link_i2name          (*hutch_nl.rtnl_link_i2name)
#define rtnl_link_put             (*hutch_nl.rtnl_link_put)
#define rtnl_link_set_flags       (*hutch_nl.rtnl_link_set_flags)
#define rtnl_link_set_name        (*hutch_nl.rtnl_link_set_name)
#define rtnl_link_set_ns_pid      (*hutch_nl.rtnl_link_set_ns_pid)
#define rtnl_link_veth_alloc      (*hutch_nl.rtnl_link_veth_alloc)
#define rtnl_link_veth_get_peer   (*hutch_nl.rtnl_link_veth_get_peer)
#define rtnl_link_veth_release    (*hutch_nl.rtnl_link_veth_release)
#define rtnl_route_add            (*hutch_nl.rtnl_route_add)
#define rtnl_route_add_nexthop    (*hutch_nl.rtnl_route_add_nexthop)
#define rtnl_route_alloc          (*hutch_nl.rtnl_route_alloc)
#define rtnl_route_alloc_cache    (*hutch_nl.rtnl_route_alloc_cache)
#define rtnl_route_get_dst        (*hutch_nl.rtnl_route_get_dst)
#define rtnl_route_get_nnexthops  (*hutch_nl.rtnl_route_get_nnexthops)
#define rtnl_route_get_table      (*hutch_nl.rtnl_route_get_table)
#define rtnl_route_nexthop_n      (*hutch_nl.rtnl_route_nexthop_n)
#define rtnl_route_nh_alloc       (*hutch_nl.rtnl_route_nh_alloc)
#define rtnl_route_nh_free        (*hutch_nl.rtnl_route_nh_free)
#define rtnl_route_nh_get_ifindex (*hutch_nl.rtnl_route_nh_get_ifindex)
#define rtnl_route_nh_set_gateway (*hutch_nl.rtnl_route_nh_set_gateway)
#define rtnl_route_nh_set_ifindex (*hutch_nl.rtnl_route_nh_set_ifindex)
#define rtnl_route_put            (*hutch_nl.rtnl_route_put)
#define rtnl_route_set_dst        (*hutch_nl.rtnl_route_set_dst)
#define rtnl_route_set_family     (*hutch_nl.rtnl_route_set_family)
#define rtnl_route_set_protocol   (*hutch_nl.rtnl_route_set_protocol)
#define rtnl_route_set_scope      (*hutch_nl.rtnl_route_set_scope)
#define rtnl_route_set_table      (*hutch_nl.rtnl_route_set_table)
#define rtnl_route_set_type       (*hutch_nl.rtnl_route_set_type)
#endif

#endif
