/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The private address pool of mode all: parsing HUTCH_NET_POOL, the /30 of
 * each uid slot, and the check that no host route already uses the range
 * (a sandbox address would shadow a real network the host reaches).
 * Unrelated to the warm pool of ready sandboxes (cli/pool.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/rtnetlink.h>

#include "cleanup.h"
#include "hostnet-internal.h"
#include "util.h"

void hutch_net_pool_format(const struct hutch_net_pool *pool, char *buf, size_t size)
{
	char a[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &pool->net, a, sizeof(a)))
		a[0] = '\0';
	(void)snprintf(buf, size, "%s/%u", a, (unsigned)pool->prefix);
}

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix == 0 ? 0 : UINT32_MAX << (32 - prefix);
}

int hutch_net_pool_parse(const char *cidr, struct hutch_net_pool *ret, struct hutch_err *err)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(cidr, '/');
	struct in_addr in;
	uint64_t prefix;
	uint32_t host;
	size_t len;

	len = slash ? (size_t)(slash - cidr) : 0;
	if (!slash || len == 0 || len >= sizeof(addr))
		return hutch_err_set(err, -EINVAL,
		                     "invalid address pool '%.64s': expected A.B.C.D/N, e.g. %s",
		                     cidr, HUTCH_NET_POOL_DEFAULT);
	memcpy(addr, cidr, len);
	addr[len] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1)
		return hutch_err_set(err, -EINVAL,
		                     "invalid address pool '%.64s': '%s' is not an IPv4 address",
		                     cidr, addr);
	/* A /30 for each uid slot: every slot must fit, whatever slot a
	 * sandbox draws. */
	if (hutch_parse_u64(slash + 1, 8, 16, &prefix) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid address pool '%.64s': the prefix length must be "
		                     "a number from 8 to 16 (a /30 for each of the %u sandboxes "
		                     "a host can run needs a /16 or larger)",
		                     cidr, 16384u);
	host = ntohl(in.s_addr);
	if (host & ~prefix_mask((unsigned)prefix)) {
		struct in_addr fixed = { htonl(host & prefix_mask((unsigned)prefix)) };

		(void)inet_ntop(AF_INET, &fixed, addr, sizeof(addr));
		return hutch_err_set(err, -EINVAL,
		                     "invalid address pool '%.64s': host bits are set (did you "
		                     "mean %s/%u?)",
		                     cidr, addr, (unsigned)prefix);
	}
	ret->net = in.s_addr;
	ret->prefix = (uint8_t)prefix;
	return 0;
}

int hutch_net_pool_addrs(const struct hutch_net_pool *pool, unsigned slot,
                         struct hutch_net_addrs *ret, struct hutch_err *err)
{
	uint64_t nslots;
	uint32_t base;
	char p[32];

	if (pool->prefix < 8 || pool->prefix > 28)
		return hutch_err_set(err, -EINVAL, "invalid address pool prefix /%u",
		                     (unsigned)pool->prefix);
	nslots = (UINT64_C(1) << (32 - pool->prefix)) / 4;
	if (slot >= nslots) {
		hutch_net_pool_format(pool, p, sizeof(p));
		return hutch_err_set(err, -ENOSPC,
		                     "address pool %s has room for %llu sandboxes, not for slot "
		                     "%u; choose a larger range with HUTCH_NET_POOL=CIDR",
		                     p, (unsigned long long)nslots, slot);
	}
	base = ntohl(pool->net) + 4 * (uint32_t)slot;
	ret->gateway = htonl(base + 1);
	ret->sandbox = htonl(base + 2);
	ret->pool = *pool;
	(void)snprintf(ret->host_if, sizeof(ret->host_if), HUTCH_NET_LINK_PREFIX "%u", slot);
	return 0;
}

/* Does route dst/len overlap the pool? Two prefixes overlap when they agree
 * on the shorter one's bits. */
static bool overlaps(const struct hutch_net_pool *pool, uint32_t dst, unsigned len)
{
	unsigned shorter = len < pool->prefix ? len : pool->prefix;
	uint32_t m = prefix_mask(shorter);

	return (ntohl(dst) & m) == (ntohl(pool->net) & m);
}

struct clash_ctx {
	const struct hutch_net_pool *pool;
	struct nl_cache *links;
	struct hutch_err *err;
	int r;
};

static void check_route(struct nl_object *obj, void *arg)
{
	struct clash_ctx *ctx = arg;
	struct rtnl_route *route = (struct rtnl_route *)obj;
	struct nl_addr *dst = rtnl_route_get_dst(route);
	struct rtnl_nexthop *nh;
	char dev[IFNAMSIZ] = "", pool[32], rt[64];
	uint32_t d = 0;
	unsigned len;

	if (ctx->r < 0 || rtnl_route_get_table(route) != RT_TABLE_MAIN || !dst ||
	    nl_addr_get_family(dst) != AF_INET)
		return;
	/* The default route covers every address without claiming any. */
	len = nl_addr_get_prefixlen(dst);
	if (len == 0)
		return;
	if (nl_addr_get_len(dst) == sizeof(d))
		memcpy(&d, nl_addr_get_binary_addr(dst), sizeof(d));
	if (!overlaps(ctx->pool, d, len))
		return;
	nh = rtnl_route_get_nnexthops(route) > 0 ? rtnl_route_nexthop_n(route, 0) : NULL;
	if (nh)
		(void)rtnl_link_i2name(ctx->links, rtnl_route_nh_get_ifindex(nh), dev, sizeof(dev));
	if (hutch_net_link_slot(dev) >= 0)
		return;
	hutch_net_pool_format(ctx->pool, pool, sizeof(pool));
	(void)nl_addr2str(dst, rt, sizeof(rt));
	ctx->r = hutch_err_set(ctx->err, -EADDRINUSE,
	                       "address pool %s overlaps the host route %s%s%s; choose a free "
	                       "range with HUTCH_NET_POOL=CIDR",
	                       pool, rt, dev[0] ? " dev " : "", dev);
}

int hutch_net_pool_check_clash(const struct hutch_net_pool *pool, struct hutch_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	_cleanup_nl_cache_ struct nl_cache *links = NULL, *routes = NULL;
	struct clash_ctx ctx = { .pool = pool, .err = err, .r = 0 };
	int r;

	r = hutch_nl_open(&sk, err);
	if (r < 0)
		return r;
	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links);
	if (r >= 0)
		r = rtnl_route_alloc_cache(sk, AF_INET, 0, &routes);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "list host routes: %s",
		                     nl_geterror(r));
	ctx.links = links;
	nl_cache_foreach(routes, check_route, &ctx);
	return ctx.r;
}
