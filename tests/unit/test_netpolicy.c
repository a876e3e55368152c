/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the network option: none / all / allow:HOST,... and the
 * host entry rules (name, name:port, ip, ip:port, [v6]:port, bare v6; no
 * scheme, path or wildcard), with messages that name the refused entry.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netpolicy.h"

/* Parse one entry that must be accepted and check what it became. */
static void host_ok(const char *entry, const char *name, uint16_t port, bool is_ip)
{
	struct hutch_net_host h;
	struct hutch_err err = { 0 };

	memset(&h, 0xaa, sizeof(h));
	if (hutch_net_host_parse(entry, &h, &err) != 0)
		fail_msg("'%s' refused: %s", entry, err.msg);
	assert_string_equal(h.name, name);
	assert_int_equal(h.port, port);
	assert_int_equal(h.is_ip, is_ip);
}

/* Parse one entry that must be refused with a message naming it (its first
 * 128 bytes and "..." if longer, so that the reason still fits) and
 * containing why. */
static void host_bad(const char *entry, const char *why)
{
	struct hutch_net_host h = { 0 };
	struct hutch_err err = { 0 };
	char quoted[512];

	if (hutch_net_host_parse(entry, &h, &err) != -EINVAL)
		fail_msg("'%s' accepted as '%s'", entry, h.name);
	assert_int_equal(err.code, -EINVAL);
	snprintf(quoted, sizeof(quoted), "invalid host '%.128s%s': ", entry,
	         strlen(entry) > 128 ? "..." : "");
	if (strncmp(err.msg, quoted, strlen(quoted)) != 0)
		fail_msg("message for '%s' does not name it: %s", entry, err.msg);
	if (!strstr(err.msg, why))
		fail_msg("message for '%s' lacks '%s': %s", entry, why, err.msg);
}

/* A name of n characters: labels of 63 'a' separated by dots. */
static char *long_name(size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (i % 64 == 63) ? '.' : 'a';
	s[n] = '\0';
	return s;
}

static void test_host_accepted(void **state)
{
	char *name;

	(void)state;
	host_ok("pypi.org", "pypi.org", 0, false);
	host_ok("pypi.org:8443", "pypi.org", 8443, false);
	host_ok("localhost", "localhost", 0, false);
	host_ok("a-b.example.", "a-b.example.", 0, false);
	host_ok("_srv.x1.com", "_srv.x1.com", 0, false);
	host_ok("3com.com", "3com.com", 0, false);
	host_ok("10.0.0.1", "10.0.0.1", 0, true);
	host_ok("10.0.0.1:1", "10.0.0.1", 1, true);
	host_ok("10.0.0.1:65535", "10.0.0.1", 65535, true);
	host_ok("[2001:db8::1]:443", "2001:db8::1", 443, true);
	host_ok("[::1]", "::1", 0, true);
	host_ok("2001:db8::1", "2001:db8::1", 0, true);
	host_ok("::ffff:1.2.3.4", "::ffff:1.2.3.4", 0, true);
	/* Names and v6 literals are lowercased. */
	host_ok("PyPI.ORG:80", "pypi.org", 80, false);
	host_ok("[2001:DB8::A]:80", "2001:db8::a", 80, true);
	/* A label of 63 characters and a name of 253 are the limits. */
	name = long_name(253);
	host_ok(name, name, 0, false);
	free(name);
}

static void test_host_refused(void **state)
{
	char label64[80], *name;

	(void)state;
	host_bad("https://pypi.org", "not a URL");
	host_bad("pypi.org/simple", "a path is not allowed");
	host_bad("*.github.com", "wildcards are not allowed");
	host_bad("", "empty");
	host_bad("pypi.org:0", "port must be a number from 1 to 65535");
	host_bad("pypi.org:65536", "port must be a number");
	host_bad("pypi.org:abc", "port must be a number");
	host_bad("pypi.org:", "port must be a number");
	host_bad("pypi.org:-1", "port must be a number");
	host_bad("pypi.org: 80", "port must be a number");
	host_bad("[::1]:0", "port must be a number");
	host_bad("-a.com", "not a host name");
	host_bad("a-.com", "not a host name");
	host_bad("a.com-", "not a host name");
	host_bad("a..b", "not a host name");
	host_bad(".a.com", "not a host name");
	host_bad("a.com..", "not a host name");
	host_bad("a b.com", "not a host name");
	host_bad("a.com ", "not a host name");
	host_bad("ex\xc3\xa4mple.com", "not a host name");
	host_bad("123", "not a host name");
	host_bad("1.2.3", "not a host name");
	host_bad("1.2.3.256", "not a host name");
	host_bad("10.0.0.1.", "not a host name");
	host_bad("[::1", "missing ']'");
	host_bad("[::1]x", "junk after ']'");
	host_bad("[pypi.org]:80", "not an IPv6 address");
	host_bad("[1.2.3.4]", "not an IPv6 address");
	host_bad("2001:db8::g", "not an IPv6 address");
	host_bad("fe80::1%eth0", "not an IPv6 address");
	memset(label64, 'a', 64);
	strcpy(label64 + 64, ".com");
	host_bad(label64, "not a host name");
	name = long_name(254);
	host_bad(name, "not a host name");
	free(name);
	name = long_name(400);
	host_bad(name, "longer than 253 characters");
	free(name);
}

static void test_modes(void **state)
{
	struct hutch_net_policy p;
	struct hutch_err err = { 0 };
	char big[301];

	(void)state;
	assert_int_equal(hutch_net_policy_parse("none", &p, &err), 0);
	assert_int_equal(p.mode, HUTCH_NET_NONE);
	assert_int_equal(p.nhosts, 0);
	assert_int_equal(hutch_net_policy_parse(NULL, &p, &err), 0);
	assert_int_equal(p.mode, HUTCH_NET_NONE);
	assert_int_equal(hutch_net_policy_parse("all", &p, &err), 0);
	assert_int_equal(p.mode, HUTCH_NET_ALL);
	assert_int_equal(hutch_net_policy_parse("All", &p, &err), -EINVAL);
	assert_string_equal(err.msg,
	                    "invalid network 'All': use none, all, or allow:HOST[,HOST...]");
	assert_int_equal(hutch_net_policy_parse("", &p, &err), -EINVAL);
	assert_int_equal(hutch_net_policy_parse("allow", &p, &err), -EINVAL);
	/* A long spec is cut so that the reason stays in the message. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(hutch_net_policy_parse(big, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "xxx...': use none, all, or allow:HOST[,HOST...]"));

	assert_string_equal(hutch_net_mode_name(HUTCH_NET_NONE), "none");
	assert_string_equal(hutch_net_mode_name(HUTCH_NET_ALL), "all");
	assert_string_equal(hutch_net_mode_name(HUTCH_NET_ALLOW), "allow");
	assert_true(hutch_net_mode_is_implemented(HUTCH_NET_NONE));
	assert_true(hutch_net_mode_is_implemented(HUTCH_NET_ALL));
	assert_true(hutch_net_mode_is_implemented(HUTCH_NET_ALLOW));
}

static void test_allow_list(void **state)
{
	struct hutch_net_policy p;
	struct hutch_err err = { 0 };

	(void)state;
	assert_int_equal(hutch_net_policy_parse("allow:PyPI.org, 10.0.0.1:8080,[::1]:53", &p, &err),
	                 0);
	assert_int_equal(p.mode, HUTCH_NET_ALLOW);
	assert_int_equal(p.nhosts, 3);
	assert_string_equal(p.hosts[0].name, "pypi.org");
	assert_false(p.hosts[0].is_ip);
	assert_string_equal(p.hosts[1].name, "10.0.0.1");
	assert_int_equal(p.hosts[1].port, 8080);
	assert_string_equal(p.hosts[2].name, "::1");
	assert_int_equal(p.hosts[2].port, 53);
	hutch_net_policy_done(&p);
	assert_null(p.hosts);
	assert_int_equal(p.nhosts, 0);
	hutch_net_policy_done(&p); /* idempotent */

	assert_int_equal(hutch_net_policy_parse("allow:", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "list at least one host"));
	/* An empty entry anywhere in the list is refused, not skipped. */
	assert_int_equal(hutch_net_policy_parse("allow:,", &p, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid host '': an empty entry is not a host");
	assert_int_equal(hutch_net_policy_parse("allow:a.com,,b.com", &p, &err), -EINVAL);
	assert_int_equal(hutch_net_policy_parse("allow:a.com,", &p, &err), -EINVAL);
	assert_int_equal(hutch_net_policy_parse("allow: ", &p, &err), -EINVAL);
	/* The bad entry is named even after good ones (and nothing leaks). */
	assert_int_equal(hutch_net_policy_parse("allow:a.com,b.com,*.c.com", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'*.c.com'"));
	assert_int_equal(hutch_net_policy_parse("allow:a.com,https://b.com/x", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'https://b.com/x'"));
}

static void test_allow_many(void **state)
{
	struct hutch_net_policy p;
	struct hutch_err err = { 0 };
	char *spec = malloc(16 * 300), *w;

	(void)state;
	assert_non_null(spec);
	w = spec + sprintf(spec, "allow:");
	for (int i = 0; i < 256; i++)
		w += sprintf(w, "%sh%d.com", i ? "," : "", i);
	assert_int_equal(hutch_net_policy_parse(spec, &p, &err), 0);
	assert_int_equal(p.nhosts, 256);
	assert_string_equal(p.hosts[255].name, "h255.com");
	hutch_net_policy_done(&p);
	sprintf(w, ",h256.com");
	assert_int_equal(hutch_net_policy_parse(spec, &p, &err), -E2BIG);
	assert_string_equal(err.msg, "invalid network: more than 256 hosts");
	free(spec);
}

/* The network option with --host-port (hutch_config_validate() asks this). */
static void test_validate_host_ports(void **state)
{
	struct hutch_net_policy p = { 0 };
	struct hutch_err err = { 0 };
	const uint16_t ok[] = { 8080, 5432 };

	(void)state;
	/* none: no host port at all, none needed. */
	assert_int_equal(hutch_net_policy_validate(&p, NULL, 0, &err), 0);
	assert_int_equal(hutch_net_policy_validate(&p, ok, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--host-port needs a network"));
	/* all: any port. */
	assert_int_equal(hutch_net_policy_parse("all", &p, &err), 0);
	assert_int_equal(hutch_net_policy_validate(&p, (const uint16_t[]){ 53, 443 }, 2, &err), 0);
	/* allow: not 53, 443 or a listed port. */
	assert_int_equal(hutch_net_policy_parse("allow:pypi.org,files.example.com:8443", &p, &err),
	                 0);
	assert_int_equal(hutch_net_policy_validate(&p, ok, 2, &err), 0);
	for (size_t i = 0; i < 3; i++) {
		const uint16_t bad[] = { 8080, (uint16_t[]){ 53, 443, 8443 }[i] };
		char want[32];

		memset(&err, 0, sizeof(err));
		assert_int_equal(hutch_net_policy_validate(&p, bad, 2, &err), -EINVAL);
		snprintf(want, sizeof(want), "--host-port %u clashes", bad[1]);
		assert_non_null(strstr(err.msg, want));
	}
	hutch_net_policy_done(&p);
}

/* egress= entries: normalized as the cloud's client does (koyeb's
 * _normalize_destination, Python's ipaddress, strict=False); the expected
 * texts are what Python 3.11 printed for the same entries. */
static void test_egress_entries(void **state)
{
	static const char *const ok[][2] = {
		{ "1.2.3.4", "1.2.3.4/32" },
		{ " 10.0.0.1/8 ", "10.0.0.0/8" },
		{ "\t1.2.3.4\n", "1.2.3.4/32" },
		{ "2001:db8::1", "2001:db8::1/128" },
		{ "2001:DB8:0:0:0:0:0:1/64", "2001:db8::/64" },
		{ "2001:0db8:0000:0000:0001:0000:0000:0001", "2001:db8::1:0:0:1/128" },
		{ "10.0.0.1/255.0.0.0", "10.0.0.0/8" },
		{ "1.2.3.4/0.0.0.255", "1.2.3.0/24" },
		{ "10.0.0.1/08", "10.0.0.0/8" },
		{ "0.0.0.0/0", "0.0.0.0/0" },
		{ "::/0", "::/0" },
		{ "198.51.100.10/31", "198.51.100.10/31" },
	};
	static const char *const bad[] = { "",
		                           "  ",
		                           "10.0.0.1/+8",
		                           "010.0.0.1",
		                           "1.2.3",
		                           "10.0.0.1/ 8",
		                           "a.com",
		                           "1.2.3.4/",
		                           "1.2.3.4/33",
		                           "2001:db8::1/129",
		                           "1.2.3.4/255.0.255.0" };
	struct hutch_err err = { 0 };
	struct hutch_net_cidr c;
	char buf[HUTCH_NET_CIDR_TEXT];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (hutch_net_cidr_parse(ok[i][0], &c, &err) != 0)
			fail_msg("'%s' refused: %s", ok[i][0], err.msg);
		hutch_net_cidr_format(&c, buf, sizeof(buf));
		assert_string_equal(buf, ok[i][1]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (hutch_net_cidr_parse(bad[i], &c, &err) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(strstr(err.msg, "invalid egress entry '"));
		assert_non_null(strstr(err.msg, "': expected an IP address or CIDR"));
		assert_null(strstr(err.msg, "zone-ID"));
	}
	assert_int_equal(hutch_net_cidr_parse("fe80::1%eth0", &c, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid egress entry 'fe80::1%eth0': expected an IP address "
	                             "or CIDR (scoped/zone-ID addresses are not allowed)");
}

/* With egress, none and all are wired as all (a list) or none (empty);
 * allow with egress is refused. */
static void test_egress_modes(void **state)
{
	struct hutch_net_policy p = { .mode = HUTCH_NET_NONE };
	struct hutch_err err = { 0 };

	(void)state;
	assert_int_equal(hutch_net_policy_wired_mode(&p), HUTCH_NET_NONE);
	p.egress_set = true;
	assert_int_equal(hutch_net_policy_wired_mode(&p), HUTCH_NET_NONE);
	assert_int_equal(hutch_net_policy_validate(&p, (const uint16_t[]){ 80 }, 1, &err), -EINVAL);
	p.mode = HUTCH_NET_ALL;
	assert_int_equal(hutch_net_policy_wired_mode(&p), HUTCH_NET_NONE);
	p.negress = 1;
	assert_int_equal(hutch_net_policy_wired_mode(&p), HUTCH_NET_ALL);
	p.mode = HUTCH_NET_NONE;
	assert_int_equal(hutch_net_policy_wired_mode(&p), HUTCH_NET_ALL);
	assert_int_equal(hutch_net_policy_validate(&p, (const uint16_t[]){ 80 }, 1, &err), 0);
	p.mode = HUTCH_NET_ALLOW;
	assert_int_equal(hutch_net_policy_validate(&p, NULL, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "egress with network allow"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_accepted),  cmocka_unit_test(test_host_refused),
		cmocka_unit_test(test_modes),          cmocka_unit_test(test_allow_list),
		cmocka_unit_test(test_allow_many),     cmocka_unit_test(test_validate_host_ports),
		cmocka_unit_test(test_egress_entries), cmocka_unit_test(test_egress_modes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
