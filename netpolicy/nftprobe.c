/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fast look at the table "inet hutch" over raw netfilter netlink (libnl
 * core, loaded for the host side's links anyway), so that the common case of network all, a table
 * that exists for the right pool, does not load libnftables (1.4 ms for the
 * dlopen, a context and one listing). Only a positive answer is trusted:
 * anything else (no table, another pool, a kernel that answers in another
 * shape, an error) sends the caller down the libnftables path, which
 * creates the table or says what is wrong.
 *
 * The set pool4 is an interval set; nft stores the pool a.b.0.0/16 as a
 * start element a.b.0.0 and an element at the first address past it flagged
 * NFT_SET_ELEM_INTERVAL_END (plus, before the first interval, an end element
 * at 0.0.0.0).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>

#include "cleanup.h"
#include "hostnet-internal.h"

struct elems {
	struct hutch_nft_elems e;
	int err;
};

int hutch_nft_parse_setelems(const void *attrs, size_t len, struct hutch_nft_elems *e)
{
	struct nlattr *tb[NFTA_SET_ELEM_LIST_MAX + 1];
	struct nlattr *elem;
	int rem;

	if (len > INT32_MAX ||
	    nla_parse(tb, NFTA_SET_ELEM_LIST_MAX, (struct nlattr *)attrs, (int)len, NULL) < 0)
		return -EBADMSG;
	if (!tb[NFTA_SET_ELEM_LIST_ELEMENTS])
		return 0;
	nla_for_each_nested(elem, tb[NFTA_SET_ELEM_LIST_ELEMENTS], rem)
	{
		struct nlattr *ea[NFTA_SET_ELEM_MAX + 1], *ka[NFTA_DATA_MAX + 1];
		uint32_t flags = 0, key;

		if (nla_type(elem) != NFTA_LIST_ELEM ||
		    nla_parse_nested(ea, NFTA_SET_ELEM_MAX, elem, NULL) < 0 ||
		    !ea[NFTA_SET_ELEM_KEY] ||
		    nla_parse_nested(ka, NFTA_DATA_MAX, ea[NFTA_SET_ELEM_KEY], NULL) < 0 ||
		    !ka[NFTA_DATA_VALUE] || nla_len(ka[NFTA_DATA_VALUE]) != 4)
			return -EBADMSG;
		if (ea[NFTA_SET_ELEM_FLAGS]) {
			if (nla_len(ea[NFTA_SET_ELEM_FLAGS]) != 4)
				return -EBADMSG;
			flags = ntohl(nla_get_u32(ea[NFTA_SET_ELEM_FLAGS]));
		}
		memcpy(&key, nla_data(ka[NFTA_DATA_VALUE]), 4);
		if (flags & NFT_SET_ELEM_INTERVAL_END) {
			if (key == 0)
				continue; /* the end before the first interval */
			if (e->nends >= HUTCH_NFT_ELEMS_MAX)
				return -E2BIG;
			e->ends[e->nends++] = key;
		} else {
			if (e->nstarts >= HUTCH_NFT_ELEMS_MAX)
				return -E2BIG;
			e->starts[e->nstarts++] = key;
		}
	}
	return 0;
}

bool hutch_nft_elems_are_pool(const struct hutch_nft_elems *e, const struct hutch_net_pool *pool)
{
	uint32_t size, end;

	if (pool->prefix == 0 || pool->prefix > 32)
		return false;
	size = pool->prefix == 32 ? 1 : 1u << (32 - pool->prefix);
	end = htonl(ntohl(pool->net) + size);
	return e->nstarts == 1 && e->starts[0] == pool->net && e->nends == 1 && e->ends[0] == end;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct elems *x = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	size_t hdr = NLMSG_ALIGN(sizeof(struct nfgenmsg));

	if (x->err < 0)
		return NL_SKIP;
	if (NFNL_MSG_TYPE(h->nlmsg_type) != NFT_MSG_NEWSETELEM || (size_t)nlmsg_datalen(h) < hdr) {
		x->err = -EBADMSG;
		return NL_SKIP;
	}
	x->err = hutch_nft_parse_setelems((const char *)nlmsg_data(h) + hdr,
	                                  (size_t)nlmsg_datalen(h) - hdr, &x->e);
	return NL_OK;
}

int hutch_nft_probe_pool(const struct hutch_net_pool *pool)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	struct nfgenmsg nfg = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
	struct elems x = { .err = 0 };
	struct hutch_err ignored = { 0 };
	struct nl_msg *msg;
	int r;

	if (hutch_nl_load(&ignored) < 0)
		return -ELIBACC; /* not conclusive: libnftables says what is wrong */
	sk = nl_socket_alloc();
	if (!sk || nl_connect(sk, NETLINK_NETFILTER) < 0)
		return -EIO;
	msg = nlmsg_alloc_simple((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETSETELEM,
	                         NLM_F_REQUEST | NLM_F_DUMP);
	if (!msg)
		return -ENOMEM;
	r = nlmsg_append(msg, &nfg, sizeof(nfg), NLMSG_ALIGNTO);
	if (r >= 0)
		r = nla_put_string(msg, NFTA_SET_ELEM_LIST_TABLE, "hutch");
	if (r >= 0)
		r = nla_put_string(msg, NFTA_SET_ELEM_LIST_SET, "pool4");
	if (r >= 0)
		r = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (r < 0)
		return -EIO;
	r = nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &x);
	if (r >= 0)
		r = nl_recvmsgs_default(sk);
	if (r < 0)
		return hutch_nl_errno(r); /* no such table or set: -ENODEV */
	if (x.err < 0)
		return x.err;
	return hutch_nft_elems_are_pool(&x.e, pool) ? 1 : 0;
}
