/* SPDX-License-Identifier: Apache-2.0 */
/* -p specs and the "publish" option type; see portspec.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "portspec.h"
#include "util.h"

#define FORM "write it as [HOST_ADDR:]HOST_PORT:SANDBOX_PORT, e.g. 8080:80 or 127.0.0.1:8080:80"

static int invalid(const char *name, const char *s, const char *why, struct hutch_err *err)
{
	return hutch_err_set(err, -EINVAL, "invalid %s '%.64s': %s; %s", name, s, why, FORM);
}

/* A port number, digits only; min 0 or 1. */
static int port_parse(const char *s, size_t len, uint64_t min, uint16_t *ret)
{
	char buf[8];
	uint64_t v;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (hutch_parse_u64(buf, min, 65535, &v) < 0)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/* HOST_ADDR: IPv4, or IPv6 in brackets; stored in inet_ntop()'s form. */
static int addr_parse(const char *s, size_t len, struct hutch_port_spec *p)
{
	char buf[HUTCH_PORT_ADDR_MAX + 2];
	unsigned char bin[16];

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	if (s[0] == '[') {
		if (len < 3 || s[len - 1] != ']')
			return -EINVAL;
		memcpy(buf, s + 1, len - 2);
		buf[len - 2] = '\0';
		p->ipv6 = true;
	} else {
		memcpy(buf, s, len);
		buf[len] = '\0';
		p->ipv6 = false;
	}
	if (inet_pton(p->ipv6 ? AF_INET6 : AF_INET, buf, bin) != 1)
		return -EINVAL;
	return inet_ntop(p->ipv6 ? AF_INET6 : AF_INET, bin, p->host_addr, sizeof(p->host_addr))
	               ? 0
	               : -EINVAL;
}

int hutch_port_spec_parse_as(const char *name, const char *s, struct hutch_port_spec *ret,
                             struct hutch_err *err)
{
	struct hutch_port_spec p = { .host_addr = "127.0.0.1" };
	size_t len = strlen(s);
	const char *last, *mid, *slash;

	if (len == 0)
		return invalid(name, s, "empty", err);
	if (len > HUTCH_PORTSPEC_MAX)
		return invalid(name, s, "too long", err);
	slash = strchr(s, '/');
	if (slash) {
		if (strcmp(slash, "/tcp") != 0)
			return invalid(name, s, "only TCP ports can be published (/tcp or nothing)",
			               err);
		len = (size_t)(slash - s);
	}
	last = memrchr(s, ':', len);
	if (!last)
		return invalid(name, s,
		               "no host port: name the port on the host and in the sandbox", err);
	if (port_parse(last + 1, len - (size_t)(last + 1 - s), 1, &p.sandbox_port) < 0)
		return invalid(name, s, "the sandbox port is not a port number from 1 to 65535",
		               err);
	mid = last > s ? memrchr(s, ':', (size_t)(last - s)) : NULL;
	/* An IPv6 address without its port: its colons are not separators. */
	if (s[0] == '[' && (!mid || mid[-1] != ']'))
		return invalid(name, s,
		               "an IPv6 host address goes in brackets before the host port", err);
	if (port_parse(mid ? mid + 1 : s, (size_t)(last - (mid ? mid + 1 : s)), 0, &p.host_port) <
	    0)
		return invalid(name, s,
		               "the host port is not a port number from 0 (any free port) to 65535",
		               err);
	if (mid && addr_parse(s, (size_t)(mid - s), &p) < 0)
		return invalid(name, s, "the host address is not an IPv4 address or [IPv6] address",
		               err);
	*ret = p;
	return 0;
}

int hutch_port_spec_parse(const char *s, struct hutch_port_spec *ret, struct hutch_err *err)
{
	return hutch_port_spec_parse_as("publish", s, ret, err);
}

void hutch_port_spec_host(const struct hutch_port_spec *p, uint16_t port, char *buf, size_t size)
{
	snprintf(buf, size, p->ipv6 ? "[%s]:%u" : "%s:%u", p->host_addr,
	         port ? port : p->host_port);
}
