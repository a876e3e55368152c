/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox options and instance types; see config.h. Sizes follow the public
 * instance table of the platform behind the cloud sandbox (DESIGN §5). The
 * pids limit is ours: 1024 per vCPU, at least 256.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static const struct hutch_instance_type types[] = {
	{ "nano", 250, 256 * MiB, 2560 * MiB, 256 },
	{ "micro", 500, 512 * MiB, 5 * GiB, 512 },
	{ "small", 1000, 1 * GiB, 10 * GiB, 1024 },
	{ "medium", 2000, 2 * GiB, 20 * GiB, 2048 },
	{ "large", 4000, 4 * GiB, 40 * GiB, 4096 },
	{ "xlarge", 8000, 8 * GiB, 80 * GiB, 8192 },
	{ "2xlarge", 16000, 16 * GiB, 160 * GiB, 16384 },
};

const struct hutch_instance_type *hutch_instance_types(size_t *ret_n)
{
	*ret_n = sizeof(types) / sizeof(types[0]);
	return types;
}

const struct hutch_instance_type *hutch_instance_type_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i].name, name))
			return &types[i];
	return NULL;
}

const char *hutch_instance_type_names(void)
{
	return "nano, micro, small, medium, large, xlarge, 2xlarge";
}

void hutch_config_init(struct hutch_config *c)
{
	memset(c, 0, sizeof(*c));
	c->type = hutch_instance_type_find(HUTCH_DEFAULT_INSTANCE_TYPE);
	c->ttl_seconds = HUTCH_DEFAULT_TTL;
	c->idle_timeout_seconds = 0;
	snprintf(c->region, sizeof(c->region), "%s", HUTCH_DEFAULT_REGION);
	snprintf(c->network_spec, sizeof(c->network_spec), "none");
	c->net.mode = HUTCH_NET_NONE;
	c->max_output_bytes = HUTCH_DEFAULT_MAX_OUTPUT;
	c->setup_script_timeout_seconds = HUTCH_DEFAULT_SETUP_TIMEOUT;
}

void hutch_config_done(struct hutch_config *c)
{
	hutch_net_policy_done(&c->net);
	free(c->setup_script);
	free(c->on_create);
	free(c->on_destroy);
	c->setup_script = c->on_create = c->on_destroy = NULL;
}

/* setup_script, on_create, on_destroy: shell text, bounded, never empty. */
static int set_text(const char *key, const char *value, size_t max, char **ret,
                    struct hutch_err *err)
{
	char *copy;

	if (strlen(value) > max)
		return hutch_err_set(err, -EINVAL, "invalid %s: longer than %zu bytes", key, max);
	if (!*value)
		return hutch_err_set(err, -EINVAL, "invalid %s: empty", key);
	copy = strdup(value);
	if (!copy)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	free(*ret);
	*ret = copy;
	return 0;
}

static bool region_is_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > HUTCH_REGION_MAX || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
			return false;
	return true;
}

static int set_seconds(const char *key, const char *value, uint64_t min, uint64_t max,
                       uint64_t *ret, struct hutch_err *err)
{
	int r = hutch_parse_u64(value, min, max, ret);

	if (r < 0)
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid %s '%s': expected a whole number of seconds from %llu "
		        "to %llu",
		        key, value, (unsigned long long)min, (unsigned long long)max);
	return 0;
}

static int add_host_port(struct hutch_config *c, const char *value, struct hutch_err *err)
{
	uint64_t port;

	if (hutch_parse_u64(value, 1, 65535, &port) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid host port '%.40s': give a TCP port number from 1 to "
		                     "65535, e.g. --host-port 8080",
		                     value);
	for (size_t i = 0; i < c->nhost_ports; i++)
		if (c->host_ports[i] == port)
			return 0;
	if (c->nhost_ports >= HUTCH_NET_HOST_PORTS_MAX)
		return hutch_err_set(err, -E2BIG, "too many host ports: at most %d",
		                     HUTCH_NET_HOST_PORTS_MAX);
	c->host_ports[c->nhost_ports++] = (uint16_t)port;
	return 0;
}

/* "IP" or "IP:PORT", IPv4: the supervisor's upstream DNS server. */
int hutch_config_parse_resolver(const char *value, struct sockaddr_in *ret)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = strchr(value, ':');
	size_t iplen = colon ? (size_t)(colon - value) : strlen(value);
	uint64_t port = 53;

	if (iplen == 0 || iplen >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, value, iplen);
	ip[iplen] = '\0';
	memset(ret, 0, sizeof(*ret));
	ret->sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &ret->sin_addr) != 1)
		return -EINVAL;
	if (colon && hutch_parse_u64(colon + 1, 1, 65535, &port) < 0)
		return -EINVAL;
	ret->sin_port = htons((uint16_t)port);
	return 0;
}

static int set_resolver(struct hutch_config *c, const char *value, struct hutch_err *err)
{
	struct sockaddr_in sa;

	if (strlen(value) >= sizeof(c->resolver) || hutch_config_parse_resolver(value, &sa) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid resolver '%.64s' (HUTCH_RESOLVER): give an IPv4 "
		                     "address with an optional port, e.g. 192.0.2.53 or "
		                     "192.0.2.53:5353",
		                     value);
	snprintf(c->resolver, sizeof(c->resolver), "%s", value);
	return 0;
}

int hutch_config_set(struct hutch_config *c, const char *key, const char *value,
                     struct hutch_err *err)
{
	if (!strcmp(key, "instance_type")) {
		const struct hutch_instance_type *t = hutch_instance_type_find(value);
		if (!t)
			return hutch_err_set(err, -EINVAL,
			                     "unknown instance_type '%s': valid types are %s",
			                     value, hutch_instance_type_names());
		c->type = t;
		return 0;
	}
	if (!strcmp(key, "ttl_seconds"))
		return set_seconds(key, value, 1, HUTCH_MAX_TTL, &c->ttl_seconds, err);
	if (!strcmp(key, "idle_timeout_seconds"))
		return set_seconds(key, value, 0, HUTCH_MAX_TTL, &c->idle_timeout_seconds, err);
	if (!strcmp(key, "setup_script_timeout_seconds"))
		return set_seconds(key, value, 1, HUTCH_MAX_TTL, &c->setup_script_timeout_seconds,
		                   err);
	if (!strcmp(key, "setup_script"))
		return set_text(key, value, HUTCH_SETUP_SCRIPT_MAX, &c->setup_script, err);
	if (!strcmp(key, "on_create"))
		return set_text(key, value, HUTCH_HOOK_CMD_MAX, &c->on_create, err);
	if (!strcmp(key, "on_destroy"))
		return set_text(key, value, HUTCH_HOOK_CMD_MAX, &c->on_destroy, err);
	if (!strcmp(key, "max_output_bytes")) {
		if (hutch_parse_u64(value, 1, HUTCH_MAX_MAX_OUTPUT, &c->max_output_bytes) < 0)
			return hutch_err_set(err, -EINVAL,
			                     "invalid max_output_bytes '%s': expected a number of "
			                     "bytes from 1 to %llu",
			                     value, HUTCH_MAX_MAX_OUTPUT);
		return 0;
	}
	if (!strcmp(key, "region")) {
		if (!region_is_valid(value))
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid region '%s': a region name is lowercase letters, "
			        "digits and dashes, e.g. %s",
			        value, HUTCH_DEFAULT_REGION);
		snprintf(c->region, sizeof(c->region), "%s", value);
		return 0;
	}
	if (!strcmp(key, "host_port"))
		return add_host_port(c, value, err);
	if (!strcmp(key, "resolver"))
		return set_resolver(c, value, err);
	if (!strcmp(key, "net_pool")) {
		struct hutch_net_pool pool;
		if (strlen(value) >= sizeof(c->net_pool))
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid address pool '%.40s...' (HUTCH_NET_POOL): write "
			        "it as A.B.C.D/N, e.g. %s",
			        value, HUTCH_NET_POOL_DEFAULT);
		if (hutch_net_pool_parse(value, &pool, err) < 0)
			return err->code;
		snprintf(c->net_pool, sizeof(c->net_pool), "%s", value);
		return 0;
	}
	if (!strcmp(key, "network")) {
		struct hutch_net_policy p;
		if (strlen(value) >= sizeof(c->network_spec))
			return hutch_err_set(err, -EINVAL, "invalid network: longer than %zu bytes",
			                     sizeof(c->network_spec) - 1);
		if (hutch_net_policy_parse(value, &p, err) < 0)
			return err->code;
		hutch_net_policy_done(&c->net);
		c->net = p;
		snprintf(c->network_spec, sizeof(c->network_spec), "%s", value);
		return 0;
	}
	return hutch_err_set(err, -EINVAL, "unknown option '%s'", key);
}

int hutch_config_validate(const struct hutch_config *c, struct hutch_err *err)
{
	if (strcmp(c->region, HUTCH_DEFAULT_REGION) != 0 && c->net.mode != HUTCH_NET_ALL)
		return hutch_err_set(err, -EINVAL,
		                     "only the default region, %s, can block traffic; in region %s "
		                     "the sandbox runs only with network all",
		                     HUTCH_DEFAULT_REGION, c->region);
	if (!hutch_net_mode_is_implemented(c->net.mode))
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "network %s is not implemented yet in this version of hutch; "
		                     "use --network none",
		                     hutch_net_mode_name(c->net.mode));
	if (c->nhost_ports > 0 && c->net.mode == HUTCH_NET_NONE)
		return hutch_err_set(
		        err, -EINVAL,
		        "--host-port needs a network: with network none nothing "
		        "leaves the sandbox; use --network all or --network allow:HOST");
	for (size_t i = 0; c->net.mode == HUTCH_NET_ALLOW && i < c->nhost_ports; i++) {
		unsigned port = c->host_ports[i];
		bool clash = port == 53 || port == 443;
		for (size_t h = 0; h < c->net.nhosts; h++)
			clash = clash || c->net.hosts[h].port == port;
		if (clash)
			return hutch_err_set(
			        err, -EINVAL,
			        "--host-port %u clashes with the allow list: ports 53, "
			        "443 and the listed ports are served by the sandbox's "
			        "DNS stub and TLS proxy; run the host service on "
			        "another port",
			        port);
	}
	return 0;
}

cJSON *hutch_config_to_json(const struct hutch_config *c)
{
	cJSON *o = cJSON_CreateObject(), *lim;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "instance_type", c->type->name);
	cJSON_AddNumberToObject(o, "ttl_seconds", (double)c->ttl_seconds);
	cJSON_AddNumberToObject(o, "idle_timeout_seconds", (double)c->idle_timeout_seconds);
	cJSON_AddStringToObject(o, "region", c->region);
	cJSON_AddStringToObject(o, "network", c->network_spec);
	{
		cJSON *ports = cJSON_AddArrayToObject(o, "host_ports");
		for (size_t i = 0; ports && i < c->nhost_ports; i++)
			cJSON_AddItemToArray(ports, cJSON_CreateNumber(c->host_ports[i]));
	}
	cJSON_AddNumberToObject(o, "max_output_bytes", (double)c->max_output_bytes);
	/* The script itself may be long: its size only. */
	cJSON_AddNumberToObject(o, "setup_script_bytes",
	                        c->setup_script ? (double)strlen(c->setup_script) : 0);
	cJSON_AddNumberToObject(o, "setup_script_timeout_seconds",
	                        (double)c->setup_script_timeout_seconds);
	if (c->on_create)
		cJSON_AddStringToObject(o, "on_create", c->on_create);
	else
		cJSON_AddNullToObject(o, "on_create");
	if (c->on_destroy)
		cJSON_AddStringToObject(o, "on_destroy", c->on_destroy);
	else
		cJSON_AddNullToObject(o, "on_destroy");
	lim = cJSON_AddObjectToObject(o, "limits");
	if (lim) {
		cJSON_AddNumberToObject(lim, "vcpu", (double)c->type->cpu_millis / 1000.0);
		cJSON_AddNumberToObject(lim, "memory_bytes", (double)c->type->memory_bytes);
		cJSON_AddNumberToObject(lim, "disk_bytes", (double)c->type->disk_bytes);
		cJSON_AddNumberToObject(lim, "pids", (double)c->type->pids_max);
	}
	return o;
}
