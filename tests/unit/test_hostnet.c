/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the address pool of mode all: HUTCH_NET_POOL parsing
 * (messages that name the fix), the /30 of a slot, a slot past the pool's
 * end, and which link names count as hutch links. Pure: no netlink, no
 * nftables, no root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <linux/netfilter/nf_tables.h>

#include "hostnet-internal.h"
#include "netpolicy.h"

static void pool_ok(const char *cidr, const char *net, unsigned prefix)
{
	struct hutch_net_pool pool;
	struct hutch_err err = { 0 };
	char buf[32];

	if (hutch_net_pool_parse(cidr, &pool, &err) != 0)
		fail_msg("'%s' refused: %s", cidr, err.msg);
	assert_int_equal(pool.prefix, prefix);
	assert_non_null(inet_ntop(AF_INET, &pool.net, buf, sizeof(buf)));
	assert_string_equal(buf, net);
	hutch_net_pool_format(&pool, buf, sizeof(buf));
	assert_string_equal(buf, cidr);
}

static void pool_bad(const char *cidr, const char *why)
{
	struct hutch_net_pool pool = { 0 };
	struct hutch_err err = { 0 };

	if (hutch_net_pool_parse(cidr, &pool, &err) != -EINVAL)
		fail_msg("'%s' accepted", cidr);
	assert_int_equal(err.code, -EINVAL);
	if (!strstr(err.msg, why))
		fail_msg("message for '%s' lacks '%s': %s", cidr, why, err.msg);
}

static void test_pool_parse(void **state)
{
	(void)state;
	pool_ok(HUTCH_NET_POOL_DEFAULT, "10.200.0.0", 16);
	pool_ok("10.0.0.0/8", "10.0.0.0", 8);
	pool_ok("172.31.0.0/16", "172.31.0.0", 16);
	pool_bad("172.31.255.240/28", "from 8 to 16");
	pool_bad("10.201.8.0/24", "a /16 or larger");
	pool_bad("10.200.0.0", "expected A.B.C.D/N");
	pool_bad("/16", "expected A.B.C.D/N");
	pool_bad("", "expected A.B.C.D/N");
	pool_bad("10.200.0/16", "'10.200.0' is not an IPv4 address");
	pool_bad("fd00::/64", "is not an IPv4 address");
	pool_bad("10.200.0.0/7", "from 8 to 16");
	pool_bad("10.200.0.0/29", "from 8 to 16");
	pool_bad("10.200.0.0/", "from 8 to 16");
	pool_bad("10.200.0.0/16x", "from 8 to 16");
	pool_bad("10.200.0.0/+16", "from 8 to 16");
	pool_bad("10.200.1.0/16", "host bits are set (did you mean 10.200.0.0/16?)");
	pool_bad("10.200.0.1/30", "from 8 to 16");
}

static void addrs_ok(const char *cidr, unsigned slot, const char *gw, const char *sb,
                     const char *ifname)
{
	struct hutch_net_pool pool;
	struct hutch_net_addrs a;
	struct hutch_err err = { 0 };
	char buf[INET_ADDRSTRLEN];

	assert_int_equal(hutch_net_pool_parse(cidr, &pool, &err), 0);
	if (hutch_net_pool_addrs(&pool, slot, &a, &err) != 0)
		fail_msg("slot %u of %s refused: %s", slot, cidr, err.msg);
	assert_string_equal(inet_ntop(AF_INET, &a.gateway, buf, sizeof(buf)), gw);
	assert_string_equal(inet_ntop(AF_INET, &a.sandbox, buf, sizeof(buf)), sb);
	assert_string_equal(a.host_if, ifname);
	assert_int_equal(a.pool.net, pool.net);
	assert_int_equal(a.pool.prefix, pool.prefix);
}

static void test_pool_addrs(void **state)
{
	(void)state;
	addrs_ok("10.200.0.0/16", 0, "10.200.0.1", "10.200.0.2", "hutch0");
	addrs_ok("10.200.0.0/16", 1, "10.200.0.5", "10.200.0.6", "hutch1");
	addrs_ok("10.200.0.0/16", 64, "10.200.1.1", "10.200.1.2", "hutch64");
	addrs_ok("10.200.0.0/16", 16383, "10.200.255.253", "10.200.255.254", "hutch16383");
	addrs_ok("172.16.0.0/12", 3, "172.16.0.13", "172.16.0.14", "hutch3");
}

static void test_pool_out_of_room(void **state)
{
	struct hutch_net_pool pool;
	struct hutch_net_addrs a;
	struct hutch_err err = { 0 };

	(void)state;
	assert_int_equal(hutch_net_pool_parse("10.200.0.0/16", &pool, &err), 0);
	memset(&a, 0xaa, sizeof(a));
	assert_int_equal(hutch_net_pool_addrs(&pool, 16384, &a, &err), -ENOSPC);
	assert_string_equal(err.msg, "address pool 10.200.0.0/16 has room for 16384 sandboxes, "
	                             "not for slot 16384; choose a larger range with "
	                             "HUTCH_NET_POOL=CIDR");
	/* Nothing written on failure. */
	assert_int_equal(a.gateway, 0xaaaaaaaa);
	/* Built by hand: parse refuses pools smaller than a /16. */
	pool.prefix = 28;
	assert_int_equal(hutch_net_pool_addrs(&pool, 3, &a, &err), 0);
	assert_int_equal(hutch_net_pool_addrs(&pool, 4, &a, &err), -ENOSPC);
	pool.prefix = 29;
	assert_int_equal(hutch_net_pool_addrs(&pool, 0, &a, &err), -EINVAL);
}

static void test_link_slot(void **state)
{
	(void)state;
	assert_int_equal(hutch_net_link_slot("hutch0"), 0);
	assert_int_equal(hutch_net_link_slot("hutch16383"), 16383);
	assert_int_equal(hutch_net_link_slot("hutch999999"), 999999);
	assert_int_equal(hutch_net_link_slot("hutch"), -1);
	assert_int_equal(hutch_net_link_slot("hutch07"), -1);
	assert_int_equal(hutch_net_link_slot("hutch1a"), -1);
	assert_int_equal(hutch_net_link_slot("hutch-br"), -1);
	assert_int_equal(hutch_net_link_slot("hutch1234567"), -1);
	assert_int_equal(hutch_net_link_slot("eth0"), -1);
	assert_int_equal(hutch_net_link_slot(""), -1);
}

/* One set element as the kernel dumps it: LIST_ELEM { KEY { VALUE }, FLAGS }.
 * keylen 0: no key; flagslen 0: no flags, 4: u32 (the kernel's), 1: u8. */
static void put_elem(struct nl_msg *m, const char *addr, uint32_t flags, int keylen, int flagslen)
{
	struct nlattr *el, *key;
	unsigned char v[16] = { 0 };

	assert_int_equal(inet_pton(AF_INET, addr, v), 1);
	el = nla_nest_start(m, NFTA_LIST_ELEM);
	if (keylen) {
		key = nla_nest_start(m, NFTA_SET_ELEM_KEY);
		assert_int_equal(nla_put(m, NFTA_DATA_VALUE, keylen, v), 0);
		nla_nest_end(m, key);
	}
	if (flagslen == 4)
		assert_int_equal(nla_put_u32(m, NFTA_SET_ELEM_FLAGS, htonl(flags)), 0);
	else if (flagslen == 1)
		assert_int_equal(nla_put_u8(m, NFTA_SET_ELEM_FLAGS, (uint8_t)flags), 0);
	nla_nest_end(m, el);
}

#define ELEM(a)     a, 0, 4, 0
#define ELEM_END(a) a, NFT_SET_ELEM_INTERVAL_END, 4, 4

static struct nl_msg *elems_begin(struct nlattr **list)
{
	struct nl_msg *m = nlmsg_alloc();

	assert_non_null(m);
	*list = nla_nest_start(m, NFTA_SET_ELEM_LIST_ELEMENTS);
	return m;
}

/* Close the list, parse it (cut bytes short of its end), free it. */
static int elems_parse(struct nl_msg *m, struct nlattr *list, size_t cut, struct hutch_nft_elems *e)
{
	struct nlmsghdr *h;
	int r;

	nla_nest_end(m, list);
	h = nlmsg_hdr(m);
	memset(e, 0, sizeof(*e));
	r = hutch_nft_parse_setelems(nlmsg_data(h), (size_t)nlmsg_datalen(h) - cut, e);
	nlmsg_free(m);
	return r;
}

static struct hutch_net_pool pool_of(const char *cidr)
{
	struct hutch_net_pool p;
	struct hutch_err err = { 0 };

	assert_int_equal(hutch_net_pool_parse(cidr, &p, &err), 0);
	return p;
}

static void test_nft_setelems(void **state)
{
	struct hutch_net_pool pool = pool_of("10.200.0.0/16");
	struct hutch_nft_elems e;
	struct nlattr *list;
	struct nl_msg *m;

	(void)state;
	/* What nft stores for "elements = { 10.200.0.0/16 }". */
	m = elems_begin(&list);
	put_elem(m, ELEM_END("0.0.0.0"));
	put_elem(m, ELEM_END("10.201.0.0"));
	put_elem(m, ELEM("10.200.0.0"));
	assert_int_equal(elems_parse(m, list, 0, &e), 0);
	assert_int_equal(e.nstarts, 1);
	assert_int_equal(e.nends, 1);
	assert_true(hutch_nft_elems_are_pool(&e, &pool));
	pool = pool_of("10.201.0.0/16");
	assert_false(hutch_nft_elems_are_pool(&e, &pool));
	pool = pool_of("10.200.0.0/15");
	assert_false(hutch_nft_elems_are_pool(&e, &pool));

	/* Two intervals: not our pool, whatever the first one is. */
	pool = pool_of("10.200.0.0/16");
	m = elems_begin(&list);
	put_elem(m, ELEM("10.200.0.0"));
	put_elem(m, ELEM_END("10.201.0.0"));
	put_elem(m, ELEM("10.9.0.0"));
	put_elem(m, ELEM_END("10.10.0.0"));
	assert_int_equal(elems_parse(m, list, 0, &e), 0);
	assert_false(hutch_nft_elems_are_pool(&e, &pool));

	/* No elements at all: parsed, not the pool. */
	m = elems_begin(&list);
	assert_int_equal(elems_parse(m, list, 0, &e), 0);
	assert_false(hutch_nft_elems_are_pool(&e, &pool));
}

static void test_nft_setelems_malformed(void **state)
{
	struct hutch_net_pool pool = pool_of("10.200.0.0/16");
	struct hutch_nft_elems e;
	struct nlattr *list;
	struct nl_msg *m;

	(void)state;
	m = elems_begin(&list); /* an IPv6-sized key */
	put_elem(m, "10.200.0.0", 0, 16, 0);
	assert_int_equal(elems_parse(m, list, 0, &e), -EBADMSG);
	m = elems_begin(&list); /* no key */
	put_elem(m, "10.200.0.0", 0, 0, 4);
	assert_int_equal(elems_parse(m, list, 0, &e), -EBADMSG);
	m = elems_begin(&list); /* flags of the wrong size */
	put_elem(m, "10.200.0.0", 1, 4, 1);
	assert_int_equal(elems_parse(m, list, 0, &e), -EBADMSG);
	m = elems_begin(&list); /* more elements than a pool set holds */
	for (int i = 0; i < HUTCH_NFT_ELEMS_MAX + 1; i++)
		put_elem(m, ELEM("10.200.0.0"));
	assert_int_equal(elems_parse(m, list, 0, &e), -E2BIG);
	/* A truncated message loses its last attribute: never a match. */
	m = elems_begin(&list);
	put_elem(m, ELEM("10.200.0.0"));
	put_elem(m, ELEM_END("10.201.0.0"));
	assert_true(elems_parse(m, list, 8, &e) <= 0);
	assert_false(hutch_nft_elems_are_pool(&e, &pool));
}

/* libnl is dlopen()ed (libnl-internal.h): the messages below are built with it. */
static int load_libnl(void **state)
{
	struct hutch_err err = { 0 };

	if (hutch_nl_load(&err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_parse),
		cmocka_unit_test(test_pool_addrs),
		cmocka_unit_test(test_pool_out_of_room),
		cmocka_unit_test(test_link_slot),
		cmocka_unit_test(test_nft_setelems),
		cmocka_unit_test(test_nft_setelems_malformed),
	};

	return cmocka_run_group_tests(tests, load_libnl, NULL);
}
