/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the network plan (netpolicy/plan.c) where no netlink is
 * needed: what the sandbox's /etc says in each mode, the host ports and
 * resolver it carries, the listeners it accepts from init (hostile input),
 * and its /status object. Mode all's addresses need the host's routes and
 * are covered by tests/integration/test_network.py.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "netpolicy.h"

static void test_none(void **state)
{
	struct hutch_net_policy p = { 0 };
	struct hutch_net_plan_params in = { .policy = &p };
	struct hutch_net_plan plan;
	struct hutch_err err = { 0 };
	struct hutch_net_listener l = { .fd = -1, .kind = HUTCH_NET_L_DNS, .port = 53 };
	char *text;
	cJSON *st;

	(void)state;
	memset(&plan, 0xaa, sizeof(plan));
	assert_int_equal(hutch_net_plan_make(&plan, &in, &err), 0);
	assert_string_equal(plan.resolv_conf, "# hutch: network none, no DNS\n");
	assert_null(plan.extra_hosts);
	assert_int_equal(plan.resolver.sin_family, 0);
	assert_false(hutch_net_policy_has_host_side(&p));
	assert_int_equal(hutch_net_plan_attach(&plan, 1, &err), 0);
	assert_false(plan.attached);
	/* none has no listeners: any from init is a protocol error. */
	assert_int_equal(hutch_net_plan_take_listeners(&plan, &l, 1, &err), -EPROTO);
	assert_int_equal(hutch_net_plan_serve(&plan, &err), 0);
	assert_int_equal(hutch_net_plan_fd(&plan), -1);
	st = hutch_net_plan_status(&plan);
	text = cJSON_PrintUnformatted(st);
	assert_string_equal(text, "{\"mode\":\"none\",\"hosts\":[],\"host_ports\":[]}");
	free(text);
	cJSON_Delete(st);
	assert_int_equal(hutch_net_plan_done(&plan, &err), 0);
}

static void make_allow(struct hutch_net_policy *p, struct hutch_net_plan *plan)
{
	static const uint16_t ports[] = { 8080 };
	struct sockaddr_in resolver = { .sin_family = AF_INET, .sin_port = htons(5353) };
	struct hutch_net_plan_params in = {
		.policy = p, .host_ports = ports, .nhost_ports = 1, .resolver = &resolver
	};
	struct hutch_err err = { 0 };

	inet_pton(AF_INET, "192.0.2.53", &resolver.sin_addr);
	assert_int_equal(hutch_net_policy_parse("allow:pypi.org,10.0.0.5:8443", p, &err), 0);
	assert_int_equal(hutch_net_plan_make(plan, &in, &err), 0);
}

static void test_allow(void **state)
{
	struct hutch_net_policy p;
	struct hutch_net_plan plan;
	struct hutch_err err = { 0 };
	char *text;
	cJSON *st;

	(void)state;
	make_allow(&p, &plan);
	assert_non_null(strstr(plan.resolv_conf, "nameserver 127.0.0.1\n"));
	assert_string_equal(plan.extra_hosts, HUTCH_NET_HOST_INTERNAL "\thost.hutch.internal\n");
	assert_int_equal(plan.child.nhost_ports, 1);
	assert_int_equal(plan.child.host_ports[0], 8080);
	assert_int_equal(plan.child.addr, 0); /* no link out */
	assert_int_equal(ntohs(plan.resolver.sin_port), 5353);
	assert_int_equal(plan.warning.code, 0);
	assert_int_equal(hutch_net_plan_attach(&plan, 1, &err), 0);
	assert_false(plan.attached);
	st = hutch_net_plan_status(&plan);
	text = cJSON_PrintUnformatted(st);
	assert_string_equal(text, "{\"mode\":\"allow\",\"hosts\":[\"pypi.org:443\","
	                          "\"10.0.0.5:8443\"],\"host_ports\":[8080]}");
	free(text);
	cJSON_Delete(st);
	assert_int_equal(hutch_net_plan_done(&plan, &err), 0);
	hutch_net_policy_done(&p);
}

/* What init sends is checked, and the fds are taken on failure too. */
static void test_listeners(void **state)
{
	struct hutch_net_policy p;
	struct hutch_net_plan plan;
	struct hutch_err err = { 0 };
	struct hutch_net_listener bad[][1] = {
		{ { .kind = 0, .port = 53 } },
		{ { .kind = 4, .port = 53 } },
		{ { .kind = HUTCH_NET_L_PROXY, .port = 0 } },
	};
	struct hutch_net_listener good[2] = {
		{ .kind = HUTCH_NET_L_DNS, .port = 53 },
		{ .kind = HUTCH_NET_L_PROXY, .port = 443 },
	};

	(void)state;
	make_allow(&p, &plan);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		bad[i][0].fd = fd;
		assert_int_equal(hutch_net_plan_take_listeners(&plan, bad[i], 1, &err), -EPROTO);
		assert_int_equal(fcntl(fd, F_GETFD), -1); /* closed */
	}
	for (size_t i = 0; i < 2; i++)
		good[i].fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_int_equal(hutch_net_plan_take_listeners(&plan, good, 2, &err), 0);
	assert_int_equal(plan.nlisteners, 2);
	/* Only once. */
	good[0].fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_int_equal(hutch_net_plan_take_listeners(&plan, good, 1, &err), -EPROTO);
	assert_int_equal(hutch_net_plan_done(&plan, &err), 0);
	assert_int_equal(plan.nlisteners, 0);
	hutch_net_policy_done(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_allow),
		cmocka_unit_test(test_listeners),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
