/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the sandbox options: defaults, the instance type table
 * (DESIGN §5), number and region syntax, the region rule, the network modes
 * this build implements, and the JSON form.
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

#include "config.h"
#include "options.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Set one option with a cleared err; returns hutch_config_set()'s result. */
static int set1(struct hutch_config *c, const char *key, const char *value, struct hutch_err *err)
{
	hutch_err_clear(err);
	return hutch_config_set(c, key, value, err);
}

static void test_defaults(void **state)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };

	(void)state;
	hutch_config_init(&c);
	assert_non_null(c.type);
	assert_string_equal(c.type->name, "medium");
	assert_int_equal(c.ttl_seconds, 86400);
	assert_int_equal(c.idle_timeout_seconds, 0);
	assert_string_equal(c.region, "nl-north-1");
	assert_string_equal(c.network_spec, "none");
	assert_int_equal(c.net.mode, HUTCH_NET_NONE);
	assert_int_equal(c.max_output_bytes, 4 * MiB);
	/* The defaults are a valid configuration. */
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	hutch_config_done(&c);
}

static void test_instance_types(void **state)
{
	static const struct {
		const char *name;
		uint64_t cpu_millis, memory, disk;
	} want[] = {
		{ "nano", 250, 256 * MiB, 2560 * MiB }, /* 2.5 GiB */
		{ "micro", 500, 512 * MiB, 5 * GiB },   { "small", 1000, 1 * GiB, 10 * GiB },
		{ "medium", 2000, 2 * GiB, 20 * GiB },  { "large", 4000, 4 * GiB, 40 * GiB },
		{ "xlarge", 8000, 8 * GiB, 80 * GiB },  { "2xlarge", 16000, 16 * GiB, 160 * GiB },
	};
	const struct hutch_instance_type *t;
	size_t n = 0;

	(void)state;
	t = hutch_instance_types(&n);
	assert_int_equal(n, 7);
	for (size_t i = 0; i < n; i++) {
		/* Table order is size order, and find() returns the table entry. */
		assert_string_equal(t[i].name, want[i].name);
		assert_int_equal(t[i].cpu_millis, want[i].cpu_millis);
		assert_int_equal(t[i].memory_bytes, want[i].memory);
		assert_int_equal(t[i].disk_bytes, want[i].disk);
		assert_true(t[i].pids_max >= 256);
		assert_ptr_equal(hutch_instance_type_find(want[i].name), &t[i]);
		/* Every type is listed in the error message's list. */
		assert_non_null(strstr(hutch_instance_type_names(), want[i].name));
	}
	assert_null(hutch_instance_type_find("huge"));
	assert_null(hutch_instance_type_find("Medium"));
	assert_null(hutch_instance_type_find(""));
	assert_null(hutch_instance_type_find(NULL));
}

static void test_instance_type_set(void **state)
{
	struct hutch_config c;
	struct hutch_err err;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "instance_type", "2xlarge", &err), 0);
	assert_string_equal(c.type->name, "2xlarge");
	assert_int_equal(set1(&c, "instance_type", "huge", &err), -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.msg, "unknown instance_type 'huge': valid types are nano, micro, "
	                             "small, medium, large, xlarge, 2xlarge");
	/* A refused value leaves the previous one. */
	assert_string_equal(c.type->name, "2xlarge");
	assert_int_equal(set1(&c, "instance_tpye", "small", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "instance_tpye"));
	hutch_config_done(&c);
}

static void test_seconds(void **state)
{
	static const char *const bad[] = { " 5",
		                           "5 ",
		                           "5s",
		                           "-1",
		                           "+5",
		                           "",
		                           "0x10",
		                           "1e3",
		                           "18446744073709551616",
		                           "99999999999999999999999" };
	struct hutch_config c;
	struct hutch_err err;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "ttl_seconds", "1", &err), 0);
	assert_int_equal(c.ttl_seconds, 1);
	assert_int_equal(set1(&c, "ttl_seconds", "31622400", &err), 0); /* 366 days */
	assert_int_equal(c.ttl_seconds, 31622400);
	assert_int_equal(set1(&c, "ttl_seconds", "31622401", &err), -EINVAL);
	assert_string_equal(err.msg, "invalid ttl_seconds '31622401': expected a whole number of "
	                             "seconds from 1 to 31622400");
	assert_int_equal(set1(&c, "ttl_seconds", "0", &err), -EINVAL);
	assert_int_equal(c.ttl_seconds, 31622400);

	assert_int_equal(set1(&c, "idle_timeout_seconds", "0", &err), 0);
	assert_int_equal(c.idle_timeout_seconds, 0);
	assert_int_equal(set1(&c, "idle_timeout_seconds", "600", &err), 0);
	assert_int_equal(c.idle_timeout_seconds, 600);
	assert_int_equal(set1(&c, "idle_timeout_seconds", "31622401", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "from 0 to 31622400"));

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(set1(&c, "ttl_seconds", bad[i], &err), -EINVAL);
		assert_int_equal(set1(&c, "idle_timeout_seconds", bad[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "idle_timeout_seconds"));
	}
	assert_int_equal(c.ttl_seconds, 31622400);
	assert_int_equal(c.idle_timeout_seconds, 600);
	hutch_config_done(&c);
}

static void test_max_output(void **state)
{
	struct hutch_config c;
	struct hutch_err err;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "max_output_bytes", "1", &err), 0);
	assert_int_equal(c.max_output_bytes, 1);
	assert_int_equal(set1(&c, "max_output_bytes", "268435456", &err), 0);
	assert_int_equal(c.max_output_bytes, 256 * MiB);
	assert_int_equal(set1(&c, "max_output_bytes", "268435457", &err), -EINVAL);
	assert_int_equal(set1(&c, "max_output_bytes", "0", &err), -EINVAL);
	assert_int_equal(set1(&c, "max_output_bytes", "1k", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'1k'"));
	assert_int_equal(c.max_output_bytes, 256 * MiB);
	hutch_config_done(&c);
}

static void test_region_syntax(void **state)
{
	static const char *const good[] = { "nl-north-1", "us-east-2", "a", "eu1" };
	static const char *const bad[] = { "",         "NL-north-1", "nl_north_1",
		                           "-nl",      "nl-",        "nl north",
		                           "nl.north", "nl/north",   "ñl-north-1" };
	char longest[HUTCH_REGION_MAX + 2];
	struct hutch_config c;
	struct hutch_err err;

	(void)state;
	hutch_config_init(&c);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(set1(&c, "region", good[i], &err), 0);
		assert_string_equal(c.region, good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(set1(&c, "region", bad[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "invalid region"));
	}
	assert_string_equal(c.region, "eu1");
	memset(longest, 'a', sizeof(longest));
	longest[HUTCH_REGION_MAX] = '\0';
	assert_int_equal(set1(&c, "region", longest, &err), 0);
	longest[HUTCH_REGION_MAX] = 'a';
	longest[HUTCH_REGION_MAX + 1] = '\0';
	assert_int_equal(set1(&c, "region", longest, &err), -EINVAL);
	hutch_config_done(&c);
}

static void test_region_rule(void **state)
{
	struct hutch_config c;
	struct hutch_err err;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "region", "us-east-1", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.msg, "only the default region, nl-north-1, can block traffic; in "
	                             "region us-east-1 the sandbox runs only with network all");
	/* An allow-list blocks traffic too. */
	assert_int_equal(set1(&c, "network", "allow:pypi.org", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "in region us-east-1"));
	/* network all satisfies the rule. */
	assert_int_equal(set1(&c, "network", "all", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	/* Back to the default region: none is fine. */
	assert_int_equal(set1(&c, "region", "nl-north-1", &err), 0);
	assert_int_equal(set1(&c, "network", "none", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	hutch_config_done(&c);
}

/* --host-port, HUTCH_RESOLVER, HUTCH_NET_POOL and the rules between them. */
static void test_network_options(void **state)
{
	struct hutch_config c;
	struct hutch_err err;
	struct sockaddr_in sa;
	char port[8];

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "host_ports", "8080", &err), 0);
	assert_int_equal(set1(&c, "host_ports", "8080", &err), 0); /* once */
	assert_int_equal(c.nhost_ports, 1);
	assert_int_equal(hutch_config_validate(&c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--host-port needs a network"));
	assert_int_equal(set1(&c, "network", "all", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	assert_int_equal(set1(&c, "host_ports", "0", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid host port '0'"));
	assert_int_equal(set1(&c, "host_ports", "65536", &err), -EINVAL);
	for (int i = 1; i < HUTCH_NET_HOST_PORTS_MAX; i++) {
		snprintf(port, sizeof(port), "%d", 9000 + i);
		assert_int_equal(set1(&c, "host_ports", port, &err), 0);
	}
	assert_int_equal(set1(&c, "host_ports", "9999", &err), -E2BIG);
	assert_string_equal(err.msg, "too many host ports: at most 16");
	/* allow: 53, 443 and listed ports belong to the stub and the proxy. */
	hutch_config_done(&c);
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "network", "allow:a.example:8443,b.example", &err), 0);
	assert_int_equal(set1(&c, "host_ports", "8443", &err), 0);
	assert_int_equal(hutch_config_validate(&c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--host-port 8443 clashes with the allow list"));
	c.host_ports[0] = 8444;
	assert_int_equal(hutch_config_validate(&c, &err), 0);

	assert_int_equal(set1(&c, "resolver", "192.0.2.53", &err), 0);
	assert_int_equal(hutch_config_parse_resolver(c.resolver, &sa), 0);
	assert_int_equal(ntohs(sa.sin_port), 53);
	assert_int_equal(set1(&c, "resolver", "192.0.2.53:5353", &err), 0);
	assert_int_equal(hutch_config_parse_resolver(c.resolver, &sa), 0);
	assert_int_equal(ntohs(sa.sin_port), 5353);
	assert_int_equal(set1(&c, "resolver", "dns.example", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid resolver 'dns.example' (HUTCH_RESOLVER)"));
	assert_int_equal(set1(&c, "resolver", "192.0.2.53:", &err), -EINVAL);
	assert_int_equal(set1(&c, "resolver", "192.0.2.53:99999", &err), -EINVAL);
	assert_int_equal(set1(&c, "resolver", ":53", &err), -EINVAL);
	assert_int_equal(set1(&c, "resolver", "::1", &err), -EINVAL);

	/* --executor-port: loopback unless an address is named */
	assert_string_equal(c.executor_listen, "");
	assert_int_equal(set1(&c, "executor_port", "8080", &err), 0);
	assert_string_equal(c.executor_listen, "127.0.0.1:8080");
	assert_int_equal(ntohl(c.executor_addr.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(c.executor_addr.sin_port), 8080);
	assert_int_equal(set1(&c, "executor_port", "0", &err), 0);
	assert_string_equal(c.executor_listen, "127.0.0.1:0");
	assert_int_equal(set1(&c, "executor_port", "192.0.2.7:65535", &err), 0);
	assert_string_equal(c.executor_listen, "192.0.2.7:65535");
	for (size_t i = 0; i < 7; i++) {
		static const char *const bad[] = { "65536", "x",  ":80",   "1.2.3:80",
			                           "-1",    " 1", "::1:80" };
		assert_int_equal(set1(&c, "executor_port", bad[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "invalid executor_port"));
		assert_string_equal(c.executor_listen, "192.0.2.7:65535"); /* unchanged */
	}

	assert_int_equal(set1(&c, "net_pool", "10.201.0.0/16", &err), 0);
	assert_string_equal(c.net_pool, "10.201.0.0/16");
	assert_int_equal(set1(&c, "net_pool", "10.201.8.0/24", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "a /16 or larger"));
	assert_int_equal(set1(&c, "net_pool", "10.201.0.0/16/16/16/16/16/16/16", &err), -EINVAL);
	assert_string_equal(c.net_pool, "10.201.0.0/16"); /* unchanged */
	hutch_config_done(&c);
}

static void test_network(void **state)
{
	struct hutch_config c;
	struct hutch_err err;
	char huge[4200];

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "network", "all", &err), 0);
	assert_int_equal(c.net.mode, HUTCH_NET_ALL);
	assert_string_equal(c.network_spec, "all");
	assert_int_equal(hutch_config_validate(&c, &err), 0);

	assert_int_equal(set1(&c, "network", "allow:pypi.org,api.github.com:443", &err), 0);
	assert_int_equal(c.net.mode, HUTCH_NET_ALLOW);
	assert_int_equal(c.net.nhosts, 2);
	assert_string_equal(c.network_spec, "allow:pypi.org,api.github.com:443");
	assert_int_equal(hutch_config_validate(&c, &err), 0);

	/* A refused spec keeps the previous policy (and frees nothing twice). */
	assert_int_equal(set1(&c, "network", "allow:https://pypi.org", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "https://pypi.org"));
	assert_int_equal(c.net.mode, HUTCH_NET_ALLOW);
	assert_int_equal(c.net.nhosts, 2);
	assert_int_equal(set1(&c, "network", "some", &err), -EINVAL);

	memset(huge, 'a', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	assert_int_equal(set1(&c, "network", huge, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "longer than 4095 bytes"));

	assert_int_equal(set1(&c, "network", "none", &err), 0);
	assert_int_equal(c.net.mode, HUTCH_NET_NONE);
	assert_int_equal(c.net.nhosts, 0);
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	hutch_config_done(&c);
}

static void test_to_json(void **state)
{
	struct hutch_config c;
	struct hutch_err err;
	const cJSON *lim;
	cJSON *j;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(set1(&c, "instance_type", "nano", &err), 0);
	assert_int_equal(set1(&c, "ttl_seconds", "3600", &err), 0);
	assert_int_equal(set1(&c, "idle_timeout_seconds", "60", &err), 0);
	assert_int_equal(set1(&c, "max_output_bytes", "1000", &err), 0);
	j = hutch_config_to_json(&c);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "instance_type")->valuestring,
	                    "nano");
	assert_true(cJSON_GetObjectItemCaseSensitive(j, "ttl_seconds")->valuedouble == 3600);
	assert_true(cJSON_GetObjectItemCaseSensitive(j, "idle_timeout_seconds")->valuedouble == 60);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "region")->valuestring,
	                    "nl-north-1");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "network")->valuestring, "none");
	assert_true(cJSON_GetObjectItemCaseSensitive(j, "max_output_bytes")->valuedouble == 1000);
	lim = cJSON_GetObjectItemCaseSensitive(j, "limits");
	assert_true(cJSON_IsObject(lim));
	assert_true(cJSON_GetObjectItemCaseSensitive(lim, "vcpu")->valuedouble == 0.25);
	assert_true(cJSON_GetObjectItemCaseSensitive(lim, "memory_bytes")->valuedouble ==
	            (double)(256 * MiB));
	assert_true(cJSON_GetObjectItemCaseSensitive(lim, "disk_bytes")->valuedouble ==
	            (double)(2560 * MiB));
	assert_true(cJSON_GetObjectItemCaseSensitive(lim, "pids")->valuedouble == 256);
	assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "host_ports")));
	{
		/* One field per shown option, the limits and no_limits. */
		size_t n, shown = 2;
		const struct hutch_option *o = hutch_options(&n);
		for (size_t i = 0; i < n; i++)
			shown += !(o[i].flags & HUTCH_OPT_HIDDEN);
		assert_int_equal(cJSON_GetArraySize(j), shown);
	}
	assert_int_equal(cJSON_GetArraySize(lim), 4);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "no_limits")));
	cJSON_Delete(j);
	hutch_config_done(&c);
}

/* setup_script, its timeout and the hooks: stored, bounded, shown (the
 * script by its size only). */
static void test_lifecycle_options(void **state)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };
	cJSON *j;

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(c.setup_script_timeout_seconds, 600);
	assert_null(c.setup_script);
	assert_int_equal(set1(&c, "setup_script", "echo hi\n", &err), 0);
	assert_int_equal(set1(&c, "setup_script", "echo again\n", &err), 0);
	assert_string_equal(c.setup_script, "echo again\n");
	assert_int_equal(set1(&c, "setup_script", "", &err), -EINVAL);
	assert_int_equal(set1(&c, "setup_script_timeout_seconds", "0", &err), -EINVAL);
	assert_int_equal(set1(&c, "setup_script_timeout_seconds", "5", &err), 0);
	assert_int_equal(set1(&c, "on_create", "touch x", &err), 0);
	assert_int_equal(set1(&c, "on_destroy", "rm x", &err), 0);
	j = hutch_config_to_json(&c);
	assert_true(cJSON_GetObjectItemCaseSensitive(j, "setup_script_bytes")->valuedouble == 11);
	assert_true(
	        cJSON_GetObjectItemCaseSensitive(j, "setup_script_timeout_seconds")->valuedouble ==
	        5);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "on_create")->valuestring,
	                    "touch x");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "on_destroy")->valuestring, "rm x");
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "setup_script"));
	cJSON_Delete(j);
	hutch_config_done(&c);
	assert_null(c.setup_script);
	assert_null(c.on_create);
}

/* -p specs (runtime/portspec.c): the forms docker takes, the refusals. */
static void test_publish(void **state)
{
	struct hutch_config c;
	struct hutch_port_spec p;
	struct hutch_err err = { 0 };
	cJSON *j, *arr;

	(void)state;
	assert_int_equal(hutch_port_spec_parse("8080:80", &p, &err), 0);
	assert_string_equal(p.host_addr, "127.0.0.1");
	assert_int_equal(p.host_port, 8080);
	assert_int_equal(p.sandbox_port, 80);
	assert_int_equal(hutch_port_spec_parse("0.0.0.0:0:80/tcp", &p, &err), 0);
	assert_string_equal(p.host_addr, "0.0.0.0");
	assert_int_equal(p.host_port, 0);
	assert_int_equal(hutch_port_spec_parse("[0:0::1]:9:1", &p, &err), 0);
	assert_true(p.ipv6);
	assert_string_equal(p.host_addr, "::1");
	assert_int_equal(hutch_port_spec_parse("80", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no host port"));
	assert_int_equal(hutch_port_spec_parse("1:2:3:4", &p, &err), -EINVAL);
	assert_int_equal(hutch_port_spec_parse("8080:80/udp", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "only TCP"));
	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "publish", "8080:80", &err), 0);
	assert_int_equal(hutch_config_set(&c, "publish", "8080:81", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "given twice"));
	assert_int_equal(hutch_config_set(&c, "publish", "0:81", &err), 0);
	assert_int_equal(hutch_config_set(&c, "publish", "0:81", &err), 0); /* 0: no clash */
	j = hutch_config_to_json(&c);
	arr = cJSON_GetObjectItemCaseSensitive(j, "publish");
	assert_int_equal(cJSON_GetArraySize(arr), 3);
	assert_string_equal(cJSON_GetArrayItem(arr, 0)->valuestring, "127.0.0.1:8080:80");
	cJSON_Delete(j);
	hutch_config_done(&c);
}

static void test_volumes(void **state)
{
	struct hutch_err err = { 0 };
	char spec[HUTCH_VOLUME_SPEC_MAX];
	struct hutch_volume v;
	struct hutch_config c;
	cJSON *j, *arr, *body;

	(void)state;
	assert_int_equal(hutch_volume_parse_as("volumes", "/srv//data/:/data", &v, &err), 0);
	assert_string_equal(v.src, "/srv/data");
	assert_string_equal(v.dst, "/data");
	assert_false(v.rw);
	assert_false(v.named);
	assert_int_equal(hutch_volume_parse_as("volumes", "work:/workspace/:rw", &v, &err), 0);
	assert_true(v.named);
	assert_true(v.rw);
	assert_string_equal(v.dst, "/workspace");
	assert_int_equal(hutch_volume_parse_as("-v", "/a/./b:/x", &v, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'..' part"));
	assert_int_equal(hutch_volume_parse_as("-v", "/a:/x/..", &v, &err), -EINVAL);
	assert_int_equal(hutch_volume_parse_as("-v", "/a:/proc", &v, &err), -EINVAL);
	assert_int_equal(hutch_volume_parse_as("-v", "/a:/devices", &v, &err), 0); /* not /dev */
	assert_int_equal(hutch_volume_parse_as("-v", "/a://", &v, &err), -EINVAL);
	assert_int_equal(hutch_volume_parse_as("-v", "a b:/x", &v, &err), -EINVAL);
	assert_int_equal(hutch_volume_parse_as("-v", ".hidden:/x", &v, &err), -EINVAL);
	assert_int_equal(hutch_volume_parse_as("-v", "/a:/x:RW", &v, &err), -EINVAL);
	assert_int_equal(
	        hutch_volume_from_mount("type=bind,src=/a,dst=/b", spec, sizeof(spec), &err), 0);
	assert_string_equal(spec, "/a:/b:ro");
	assert_int_equal(hutch_volume_from_mount("source=v,target=/b,readonly=false", spec,
	                                         sizeof(spec), &err),
	                 0);
	assert_string_equal(spec, "v:/b:rw");
	assert_int_equal(hutch_volume_from_mount("src=/a,dst=/b,ro", spec, sizeof(spec), &err), 0);
	assert_string_equal(spec, "/a:/b:ro");
	assert_int_equal(hutch_volume_from_mount("type=tmpfs,dst=/b", spec, sizeof(spec), &err),
	                 -EINVAL);
	assert_int_equal(hutch_volume_from_mount("src=/a", spec, sizeof(spec), &err), -EINVAL);
	assert_int_equal(hutch_volume_from_mount("src=/a,dst=/b,z=1", spec, sizeof(spec), &err),
	                 -EINVAL);
	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "volumes", "/a:/x", &err), 0);
	assert_int_equal(hutch_config_set(&c, "volumes", "/b:/x/y", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "one inside the other"));
	assert_int_equal(hutch_config_set(&c, "volumes", "/b:/xy:rw", &err), 0);
	j = hutch_config_to_json(&c);
	arr = cJSON_GetObjectItemCaseSensitive(j, "volumes");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	assert_string_equal(cJSON_GetArrayItem(arr, 0)->valuestring, "/a:/x:ro");
	assert_string_equal(cJSON_GetArrayItem(arr, 1)->valuestring, "/b:/xy:rw");
	cJSON_Delete(j);
	/* JSON: an array of specs replaces the set; a bad one changes nothing */
	body = cJSON_Parse("{\"volumes\": [\"v1:/d:rw\"]}");
	assert_int_equal(hutch_options_from_json(&c, body, 0, &err), 0);
	assert_int_equal(c.volumes->n, 1);
	assert_string_equal(c.volumes->v[0].src, "v1");
	cJSON_Delete(body);
	body = cJSON_Parse("{\"volumes\": [\"v2:/e\", 3]}");
	assert_int_equal(hutch_options_from_json(&c, body, 0, &err), -EINVAL);
	assert_int_equal(c.volumes->n, 1);
	cJSON_Delete(body);
	hutch_config_done(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),          cmocka_unit_test(test_instance_types),
		cmocka_unit_test(test_instance_type_set), cmocka_unit_test(test_seconds),
		cmocka_unit_test(test_max_output),        cmocka_unit_test(test_region_syntax),
		cmocka_unit_test(test_region_rule),       cmocka_unit_test(test_network),
		cmocka_unit_test(test_network_options),   cmocka_unit_test(test_to_json),
		cmocka_unit_test(test_lifecycle_options), cmocka_unit_test(test_publish),
		cmocka_unit_test(test_volumes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
