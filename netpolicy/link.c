/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Netlink wiring inside the sandbox's network namespace (child side). For
 * network none the namespace holds only loopback, which we bring up so that
 * local servers and tests inside the sandbox work.
 */
#include <errno.h>
#include <net/if.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "hostnet.h"
#include "netpolicy.h"

/* libnl returns -NLE_* codes, not errno: map the ones we can meet. */
static int nl_to_errno(int nlerr)
{
	switch (-nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return -ENODEV;
	default:
		return -EIO;
	}
}

int hutch_net_setup_child(const struct hutch_net_policy *p, const struct hutch_net_child *c,
                          struct hutch_err *err)
{
	struct nl_sock *sk = NULL;
	struct rtnl_link *lo = NULL, *change = NULL;
	int r;

	(void)p;
	(void)c;
	sk = nl_socket_alloc();
	if (!sk)
		return hutch_err_set(err, -ENOMEM, "allocate netlink socket");
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		hutch_err_set(err, nl_to_errno(r), "connect netlink: %s", nl_geterror(r));
		goto out;
	}
	r = rtnl_link_get_kernel(sk, 0, "lo", &lo);
	if (r < 0) {
		hutch_err_set(err, nl_to_errno(r), "find loopback: %s", nl_geterror(r));
		goto out;
	}
	change = rtnl_link_alloc();
	if (!change) {
		r = hutch_err_set(err, -ENOMEM, "allocate link change");
		goto out;
	}
	rtnl_link_set_flags(change, IFF_UP);
	r = rtnl_link_change(sk, lo, change, 0);
	if (r < 0)
		hutch_err_set(err, nl_to_errno(r), "bring loopback up: %s", nl_geterror(r));
out:
	if (change)
		rtnl_link_put(change);
	if (lo)
		rtnl_link_put(lo);
	nl_socket_free(sk);
	return r < 0 ? err->code : 0;
}
