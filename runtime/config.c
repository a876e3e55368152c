/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Instance types and the rules between options; see config.h (the
 * options themselves, their parsing and JSON form: options.c). Sizes follow the public
 * instance table of the platform behind the cloud sandbox (DESIGN §5). The
 * pids limit is ours: 1024 per vCPU, at least 256.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

int hutch_config_parse_listen(const char *value, struct sockaddr_in *ret, char *canon, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const char *colon = strrchr(value, ':'), *port = colon ? colon + 1 : value;
	char ip[INET_ADDRSTRLEN];
	uint64_t n;

	if (!*value) { /* off */
		snprintf(canon, size, "%s", "");
		return 0;
	}
	if (colon) {
		if ((size_t)(colon - value) >= sizeof(ip))
			return -EINVAL;
		snprintf(ip, sizeof(ip), "%.*s", (int)(colon - value), value);
		if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
			return -EINVAL;
	}
	if (hutch_parse_u64(port, 0, 65535, &n) < 0)
		return -EINVAL;
	sa.sin_port = htons((uint16_t)n);
	inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	snprintf(canon, size, "%s:%u", ip, (unsigned)n);
	*ret = sa;
	return 0;
}

/* Header bindings need a network, and in allow each bound host in its
 * list (in all, port 443 is redirected to the proxy: netpolicy.h). */
static int bindings_validate(const struct hutch_config *c, struct hutch_err *err)
{
	const struct hutch_net_bindings *b = c->header_bindings;

	if (!b || b->n == 0)
		return 0;
	/* the proxy dials from the host: it would reach past the list */
	if (c->net.egress_set)
		return hutch_err_set(err, -EINVAL,
		                     "header bindings with egress: the proxy that sets the "
		                     "headers dials from this machine, past the egress list; "
		                     "drop one of them");
	if (c->net.mode == HUTCH_NET_NONE)
		return hutch_err_set(err, -EINVAL,
		                     "header bindings need a network: with network none nothing "
		                     "leaves the sandbox; use --network all or allow:HOST,...");
	for (size_t i = 0; c->net.mode == HUTCH_NET_ALLOW && i < b->n; i++) {
		bool listed = false;
		for (size_t j = 0; j < c->net.nhosts; j++)
			listed = listed || (!c->net.hosts[j].is_ip &&
			                    !strcasecmp(c->net.hosts[j].name, b->b[i].host));
		if (!listed)
			return hutch_err_set(
			        err, -EINVAL,
			        "header binding '%.128s:%.64s': %.128s is not in the allow "
			        "list; add it to --network allow:...",
			        b->b[i].host, b->b[i].header, b->b[i].host);
	}
	return 0;
}

bool hutch_config_has_image(const struct hutch_config *c)
{
	return c->image[0] && strcmp(c->image, HUTCH_IMAGE_HOST) != 0;
}

int hutch_config_validate(const struct hutch_config *c, struct hutch_err *err)
{
	if (strcmp(c->region, HUTCH_DEFAULT_REGION) != 0 &&
	    (c->net.mode != HUTCH_NET_ALL || c->net.egress_set))
		return hutch_err_set(err, -EINVAL,
		                     "only the default region, %s, can block traffic; in region %s "
		                     "the sandbox runs only with network all%s",
		                     HUTCH_DEFAULT_REGION, c->region,
		                     c->net.egress_set ? " and no egress" : "");
	if (c->no_limits && c->idle_timeout_seconds > 0)
		return hutch_err_set(err, -EINVAL,
		                     "idle sleep freezes the sandbox's cgroup, which --no-limits "
		                     "leaves out: drop --idle-timeout or --no-limits");
	if (bindings_validate(c, err) < 0)
		return err->code;
	return hutch_net_policy_validate(&c->net, c->host_ports, c->nhost_ports, err);
}
