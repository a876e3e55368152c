/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the allow decision (netpolicy/allow.c): what the DNS stub
 * does with a question and what the TLS proxy does with a connection,
 * for every rule of docs/network.md (listed names and addresses, the
 * default port 443, a name listed with another port, an address listed
 * with a name that is not, no SNI), and the ranges never dialled.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "allow-internal.h"
#include "dns-internal.h"
#include "natlog-internal.h"
#include "netpolicy.h"

#define LIST                                                                           \
	"allow:pypi.org,Api.GitHub.com:8443,files.example.com,files.example.com:9443," \
	"10.0.0.5,10.0.0.6:8443,[2001:db8::1]:443"

static struct hutch_net_policy policy(const char *spec)
{
	struct hutch_net_policy p;
	struct hutch_err err = { 0 };

	if (hutch_net_policy_parse(spec, &p, &err) != 0)
		fail_msg("'%s' refused: %s", spec, err.msg);
	return p;
}

static enum hutch_net_dns_verdict dns(const struct hutch_net_policy *p, const char *name,
                                      uint16_t qtype)
{
	return hutch_net_allow_dns(p, name, qtype, HUTCH_DNS_CLASS_IN);
}

static void test_dns_all(void **state)
{
	struct hutch_net_policy p = policy("all");

	(void)state;
	/* Everything is relayed: the upstream resolver decides. */
	assert_int_equal(dns(&p, "pypi.org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_FORWARD);
	assert_int_equal(dns(&p, "evil.example", HUTCH_DNS_TYPE_AAAA), HUTCH_NET_DNS_FORWARD);
	assert_int_equal(hutch_net_allow_dns(&p, "x", 16, 3), HUTCH_NET_DNS_FORWARD);
	hutch_net_policy_done(&p);
}

static void test_dns_allow(void **state)
{
	struct hutch_net_policy p = policy(LIST);

	(void)state;
	assert_int_equal(dns(&p, "pypi.org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_RESOLVE);
	/* A port in the list does not matter to DNS; names compare without case. */
	assert_int_equal(dns(&p, "api.github.com", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_RESOLVE);
	assert_int_equal(dns(&p, "PyPI.Org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_RESOLVE);
	/* Listed, but not A: the name exists, with no records (no IPv6). */
	assert_int_equal(dns(&p, "pypi.org", HUTCH_DNS_TYPE_AAAA), HUTCH_NET_DNS_NODATA);
	assert_int_equal(dns(&p, "pypi.org", 16), HUTCH_NET_DNS_NODATA);
	/* Not listed: answered NXDOMAIN here, never forwarded. Subdomains and
	 * parents are other names; IP entries are not names. */
	assert_int_equal(dns(&p, "evil.example", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
	assert_int_equal(dns(&p, "www.pypi.org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
	assert_int_equal(dns(&p, "org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
	assert_int_equal(dns(&p, "10.0.0.5", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
	assert_int_equal(dns(&p, "", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
	/* Another class, even for a listed name (CHAOS: 3). */
	assert_int_equal(hutch_net_allow_dns(&p, "pypi.org", HUTCH_DNS_TYPE_A, 3),
	                 HUTCH_NET_DNS_NXDOMAIN);
	hutch_net_policy_done(&p);
}

static void test_dns_none(void **state)
{
	struct hutch_net_policy p = policy("none");

	(void)state;
	assert_int_equal(dns(&p, "pypi.org", HUTCH_DNS_TYPE_A), HUTCH_NET_DNS_NXDOMAIN);
}

static enum hutch_net_tls_verdict tls(const struct hutch_net_policy *p, const char *sni,
                                      const char *ip, uint16_t port)
{
	return hutch_net_allow_tls(p, sni, ip, port);
}

/* One TLS connection's case: its SNI, the address dialled, its port and
 * what the proxy decides. */
struct tls_case {
	const char *sni, *ip;
	uint16_t port;
	enum hutch_net_tls_verdict want;
};

static void check_tls(const struct tls_case *c, size_t n)
{
	struct hutch_net_policy p = policy(LIST);

	for (size_t i = 0; i < n; i++)
		if (tls(&p, c[i].sni, c[i].ip, c[i].port) != c[i].want)
			fail_msg("sni '%s' to %s:%u: want %d", c[i].sni, c[i].ip, c[i].port,
			         c[i].want);
	hutch_net_policy_done(&p);
}

static void test_tls_names(void **state)
{
	static const struct tls_case cases[] = {
		/* A listed name is resolved by the proxy, whatever address was dialled. */
		{ "pypi.org", "203.0.113.9", 443, HUTCH_NET_TLS_RESOLVE },
		{ "PYPI.ORG", "203.0.113.9", 443, HUTCH_NET_TLS_RESOLVE },
		/* Without a port, a name means 443 only. */
		{ "pypi.org", "203.0.113.9", 8443, HUTCH_NET_TLS_WRONG_PORT },
		/* With a port, only that port. */
		{ "api.github.com", "203.0.113.9", 8443, HUTCH_NET_TLS_RESOLVE },
		{ "api.github.com", "203.0.113.9", 443, HUTCH_NET_TLS_WRONG_PORT },
		/* A name listed twice: either port. */
		{ "files.example.com", "203.0.113.9", 443, HUTCH_NET_TLS_RESOLVE },
		{ "files.example.com", "203.0.113.9", 9443, HUTCH_NET_TLS_RESOLVE },
		{ "files.example.com", "203.0.113.9", 80, HUTCH_NET_TLS_WRONG_PORT },
		/* Unlisted names, subdomains, and an address sent as a name. */
		{ "evil.example", "203.0.113.9", 443, HUTCH_NET_TLS_UNLISTED },
		{ "www.pypi.org", "203.0.113.9", 443, HUTCH_NET_TLS_UNLISTED },
		{ "10.0.0.5", "203.0.113.9", 443, HUTCH_NET_TLS_UNLISTED },
	};

	(void)state;
	check_tls(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_tls_addresses(void **state)
{
	static const struct tls_case cases[] = {
		/* A listed address is dialled as it is, with or without a name. */
		{ "", "10.0.0.5", 443, HUTCH_NET_TLS_DIAL },
		{ "whatever.example", "10.0.0.5", 443, HUTCH_NET_TLS_DIAL },
		{ "", "10.0.0.6", 8443, HUTCH_NET_TLS_DIAL },
		/* ...even when the name is listed for another port. */
		{ "pypi.org", "10.0.0.5", 443, HUTCH_NET_TLS_RESOLVE },
		{ "api.github.com", "10.0.0.5", 443, HUTCH_NET_TLS_DIAL },
		/* Wrong port, or an address that is not listed. */
		{ "", "10.0.0.5", 8443, HUTCH_NET_TLS_NO_SNI },
		{ "", "10.0.0.6", 443, HUTCH_NET_TLS_NO_SNI },
		{ "", "10.0.0.7", 443, HUTCH_NET_TLS_NO_SNI },
		{ "evil.example", "10.0.0.6", 443, HUTCH_NET_TLS_UNLISTED },
		/* Text, not a prefix: 10.0.0.50 is not 10.0.0.5. */
		{ "", "10.0.0.50", 443, HUTCH_NET_TLS_NO_SNI },
	};

	(void)state;
	check_tls(cases, sizeof(cases) / sizeof(cases[0]));
}

static uint32_t ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static void test_reserved(void **state)
{
	static const char *const never[] = {
		"0.0.0.0",     "0.1.2.3",         "127.0.0.1", "127.255.255.255",
		"169.254.0.1", "169.254.169.254", "224.0.0.1", "239.255.255.255",
		"240.0.0.1",   "255.255.255.255",
	};
	static const char *const fine[] = {
		"1.0.0.0",         "8.8.8.8",     "10.0.0.5",    "126.255.255.255", "128.0.0.1",
		"169.253.255.255", "169.255.0.1", "192.168.1.1", "223.255.255.255",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (!hutch_net_addr_is_reserved(ip(never[i])))
			fail_msg("%s should be reserved", never[i]);
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		if (hutch_net_addr_is_reserved(ip(fine[i])))
			fail_msg("%s should not be reserved", fine[i]);
}

/* The nftables sets of both wirings are written from the one list the
 * proxy checks: the text, and each range's edges against the C check. */
static void test_blocked4_format(void **state)
{
	char buf[256], small[16];
	char *save = NULL;

	(void)state;
	assert_true(hutch_net_blocked4_format(buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, "
	                         "169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, "
	                         "198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4");
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		char *slash = strchr(t, '/');
		unsigned bits = (unsigned)atoi(slash + 1);
		uint32_t first, last;

		*slash = '\0';
		first = ntohl(ip(t));
		last = first | (bits == 32 ? 0 : (0xffffffffu >> bits));
		assert_true(hutch_net_addr_is_blocked_all(htonl(first)));
		assert_true(hutch_net_addr_is_blocked_all(htonl(last)));
	}
	assert_false(hutch_net_addr_is_blocked_all(ip("198.51.100.10")));
	assert_false(hutch_net_addr_is_blocked_all(ip("192.0.2.2")));
	assert_int_equal(hutch_net_blocked4_format(small, sizeof(small)), -ENOSPC);
}

/* Mode all's NAT log decides each flow the way the rules after its log
 * rule do: egress= first, QUIC with bindings, then the host's ranges. A
 * case: the log's state (TLS redirected: bindings; an egress= range), the
 * flow, and its refusal (NULL: allowed) and the reason's words. */
static void test_nat_classify(void **state)
{
	static const struct {
		bool redirected;
		const char *egress;
		int proto;
		const char *dst;
		uint16_t port;
		const char *want, *why;
	} cases[] = {
		{ false, NULL, IPPROTO_TCP, "198.51.100.10", 80, NULL, NULL },
		{ false, NULL, IPPROTO_TCP, "169.254.169.254", 80, "forbidden_address",
		  "169.254.169.254" },
		{ false, NULL, IPPROTO_UDP, "127.0.0.1", 53, "forbidden_address", NULL },
		{ false, NULL, IPPROTO_UDP, "198.51.100.10", 443, NULL, NULL },
		{ true, NULL, IPPROTO_UDP, "198.51.100.10", 443, "quic", NULL },
		{ true, NULL, IPPROTO_TCP, "198.51.100.10", 443, NULL, NULL },
		{ true, "198.51.100.0/28", IPPROTO_TCP, "198.51.100.10", 80, NULL, NULL },
		{ true, "198.51.100.0/28", IPPROTO_TCP, "198.51.100.20", 80, "egress",
		  "198.51.100.20 is not in egress=" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hutch_net_policy p = { .mode = HUTCH_NET_ALL };
		struct natlog n = { .policy = &p, .tls_redirected = cases[i].redirected };
		struct hutch_err err = { 0 };
		char why[160] = "";
		const char *got;

		if (cases[i].egress) {
			p.egress_set = true;
			p.negress = 1;
			assert_int_equal(hutch_net_cidr_parse(cases[i].egress, &p.egress[0], &err),
			                 0);
		}
		got = natlog_classify(&n, cases[i].proto, ip(cases[i].dst), htons(cases[i].port),
		                      why, sizeof(why));
		if (!cases[i].want)
			assert_null(got);
		else
			assert_string_equal(got, cases[i].want);
		if (cases[i].why && !strstr(why, cases[i].why))
			fail_msg("case %zu: reason '%s' lacks '%s'", i, why, cases[i].why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dns_all),         cmocka_unit_test(test_dns_allow),
		cmocka_unit_test(test_dns_none),        cmocka_unit_test(test_tls_names),
		cmocka_unit_test(test_tls_addresses),   cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_blocked4_format), cmocka_unit_test(test_nat_classify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
