/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The libnl boundary of netpolicy: libnl reports -NLE_* codes, which are
 * mapped to negative errnos here (keeping nl_geterror() text in messages),
 * and the few netlink operations both sides of clone() need. libnl is
 * dlopen()ed (libnl-internal.h): hutch_nl_open() loads it.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "hostnet-internal.h"

int hutch_nl_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_EXIST:
		return -EEXIST;
	case NLE_INVAL:
		return -EINVAL;
	case NLE_BUSY:
		return -EBUSY;
	case NLE_OPNOTSUPP:
		return -EOPNOTSUPP;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return -ENODEV;
	case NLE_NOADDR:
		return -EADDRNOTAVAIL;
	default:
		return -EIO;
	}
}

int hutch_nl_open(struct nl_sock **ret, struct hutch_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	int r;

	r = hutch_nl_load(err);
	if (r < 0)
		return r;
	sk = nl_socket_alloc();
	if (!sk)
		return hutch_err_set(err, -ENOMEM, "allocate netlink socket");
	/* nl_connect() opens the socket with SOCK_CLOEXEC (libnl >= 3.2.26). */
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "connect netlink: %s", nl_geterror(r));
	*ret = TAKE_PTR(sk);
	return 0;
}

int hutch_nl_link_up(struct nl_sock *sk, const char *name, struct hutch_err *err)
{
	_cleanup_rtnl_link_ struct rtnl_link *link = NULL, *change = NULL;
	int r;

	r = rtnl_link_get_kernel(sk, 0, name, &link);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "find link '%s': %s", name,
		                     nl_geterror(r));
	change = rtnl_link_alloc();
	if (!change)
		return hutch_err_set(err, -ENOMEM, "allocate link change");
	rtnl_link_set_flags(change, IFF_UP);
	r = rtnl_link_change(sk, link, change, 0);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "bring link '%s' up: %s", name,
		                     nl_geterror(r));
	return 0;
}

int hutch_nl_addr_add(struct nl_sock *sk, int ifindex, uint32_t addr, unsigned prefix,
                      struct hutch_err *err)
{
	_cleanup_rtnl_addr_ struct rtnl_addr *ra = NULL;
	_cleanup_nl_addr_ struct nl_addr *local = NULL;
	int r;

	ra = rtnl_addr_alloc();
	local = nl_addr_build(AF_INET, &addr, sizeof(addr));
	if (!ra || !local)
		return hutch_err_set(err, -ENOMEM, "allocate address");
	nl_addr_set_prefixlen(local, (int)prefix);
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, AF_INET);
	r = rtnl_addr_set_local(ra, local);
	if (r >= 0)
		r = rtnl_addr_add(sk, ra, NLM_F_CREATE | NLM_F_EXCL);
	if (r < 0) {
		char buf[64];

		return hutch_err_set(err, hutch_nl_errno(r), "add address %s: %s",
		                     nl_addr2str(local, buf, sizeof(buf)), nl_geterror(r));
	}
	return 0;
}

long hutch_net_link_slot(const char *name)
{
	size_t n = strlen(HUTCH_NET_LINK_PREFIX);
	const char *d = name + n;
	long slot = 0;

	if (strncmp(name, HUTCH_NET_LINK_PREFIX, n) != 0 || *d == '\0' || strlen(d) > 6)
		return -1;
	/* Canonical decimal only: "hutch07" is not ours. */
	if (d[0] == '0' && d[1] != '\0')
		return -1;
	for (; *d; d++) {
		if (*d < '0' || *d > '9')
			return -1;
		slot = slot * 10 + (*d - '0');
	}
	return slot;
}
