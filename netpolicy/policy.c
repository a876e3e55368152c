/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing and validation of the network option. The rules mirror the cloud
 * sandbox's: "none", "all", or an allow-list of hosts where each entry is a
 * name, name:port, ip or ip:port; a scheme, a path or a wildcard is refused
 * at construction, naming the entry.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"
#include "util.h"

/* Quote at most QUOTE_MAX bytes of a refused entry or spec ("%.*s%s"), so
 * that the reason after it still fits in the message. */
#define QUOTE_MAX 128
#define QUOTE(s)                                                   \
	(int)(strlen(s) > QUOTE_MAX ? QUOTE_MAX : strlen(s)), (s), \
	        (strlen(s) > QUOTE_MAX ? "..." : "")

const char *hutch_net_mode_name(enum hutch_net_mode mode)
{
	switch (mode) {
	case HUTCH_NET_NONE:
		return "none";
	case HUTCH_NET_ALL:
		return "all";
	case HUTCH_NET_ALLOW:
		return "allow";
	}
	return "unknown";
}

bool hutch_net_mode_is_implemented(enum hutch_net_mode mode)
{
	return mode == HUTCH_NET_NONE || mode == HUTCH_NET_ALL || mode == HUTCH_NET_ALLOW;
}

static bool is_dns_name(const char *s)
{
	size_t label = 0, total = strlen(s);
	bool alpha = false;

	if (total == 0 || total > HUTCH_NET_HOST_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			if (label == 0 || p[-1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			return false;
		if (isalpha((unsigned char)*p))
			alpha = true;
		if (*p == '-' && label == 0)
			return false;
		if (++label > 63)
			return false;
	}
	/* A trailing dot is allowed (absolute name), a trailing dash is not;
	 * an all-digit name is not a name but a malformed address. */
	return alpha && s[total - 1] != '-';
}

static int parse_port(const char *s, const char *entry, uint16_t *ret, struct hutch_err *err)
{
	uint64_t v;

	if (hutch_parse_u64(s, 1, 65535, &v) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid host '%.*s%s': port must be a number from 1 to 65535",
		                     QUOTE(entry));
	*ret = (uint16_t)v;
	return 0;
}

int hutch_net_host_parse(const char *entry, struct hutch_net_host *ret, struct hutch_err *err)
{
	struct hutch_net_host h = { 0 };
	char buf[HUTCH_NET_HOST_MAX + 16];
	unsigned char addr[16];
	char *host = buf, *port = NULL;
	size_t len = entry ? strlen(entry) : 0;

	if (len == 0)
		return hutch_err_set(err, -EINVAL, "invalid host '': an empty entry is not a host");
	if (len >= sizeof(buf))
		return hutch_err_set(err, -EINVAL,
		                     "invalid host '%.*s%s': longer than %d characters",
		                     QUOTE(entry), HUTCH_NET_HOST_MAX);
	if (strstr(entry, "://"))
		return hutch_err_set(err, -EINVAL,
		                     "invalid host '%.*s%s': give a host name, not a URL (drop the "
		                     "scheme)",
		                     QUOTE(entry));
	if (strchr(entry, '/'))
		return hutch_err_set(err, -EINVAL,
		                     "invalid host '%.*s%s': a path is not allowed, give only the "
		                     "host",
		                     QUOTE(entry));
	if (strchr(entry, '*'))
		return hutch_err_set(err, -EINVAL,
		                     "invalid host '%.*s%s': wildcards are not allowed, list each "
		                     "host",
		                     QUOTE(entry));
	memcpy(buf, entry, len + 1);
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close)
			return hutch_err_set(err, -EINVAL, "invalid host '%.*s%s': missing ']'",
			                     QUOTE(entry));
		*close = '\0';
		host = buf + 1;
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
			return hutch_err_set(err, -EINVAL, "invalid host '%.*s%s': junk after ']'",
			                     QUOTE(entry));
		if (inet_pton(AF_INET6, host, addr) != 1)
			return hutch_err_set(err, -EINVAL,
			                     "invalid host '%.*s%s': not an IPv6 address",
			                     QUOTE(entry));
		h.is_ip = true;
	} else if (strchr(buf, ':') != strrchr(buf, ':')) {
		/* Several colons: a bare IPv6 address, no port. */
		if (inet_pton(AF_INET6, buf, addr) != 1)
			return hutch_err_set(err, -EINVAL,
			                     "invalid host '%.*s%s': not an IPv6 address (write "
			                     "[addr]:port for a port)",
			                     QUOTE(entry));
		h.is_ip = true;
	} else {
		port = strchr(buf, ':');
		if (port)
			*port++ = '\0';
		if (inet_pton(AF_INET, host, addr) == 1)
			h.is_ip = true;
		else if (!is_dns_name(host))
			return hutch_err_set(err, -EINVAL,
			                     "invalid host '%.*s%s': not a host name or IP address",
			                     QUOTE(entry));
	}
	if (port && parse_port(port, entry, &h.port, err) < 0)
		return err->code;
	if (strlen(host) > HUTCH_NET_HOST_MAX)
		return hutch_err_set(err, -EINVAL, "invalid host '%.*s%s': name too long",
		                     QUOTE(entry));
	memcpy(h.name, host, strlen(host) + 1);
	for (char *p = h.name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	*ret = h;
	return 0;
}

int hutch_net_policy_parse(const char *spec, struct hutch_net_policy *ret, struct hutch_err *err)
{
	struct hutch_net_policy p = { 0 };
	const char *list;
	char *copy, *rest, *tok;

	if (!spec || !strcmp(spec, "none")) {
		p.mode = HUTCH_NET_NONE;
	} else if (!strcmp(spec, "all")) {
		p.mode = HUTCH_NET_ALL;
	} else if (!strncmp(spec, "allow:", 6)) {
		list = spec + 6;
		if (!*list)
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid network 'allow:': list at least one host, e.g. "
			        "allow:pypi.org,api.github.com");
		copy = strdup(list);
		if (!copy)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		p.mode = HUTCH_NET_ALLOW;
		/* strsep, not strtok: an empty entry ("a,,b", "a,") is refused,
		 * not skipped. */
		rest = copy;
		while ((tok = strsep(&rest, ","))) {
			struct hutch_net_host *n;
			while (*tok == ' ')
				tok++;
			if (p.nhosts >= HUTCH_NET_HOSTS_MAX) {
				free(copy);
				hutch_net_policy_done(&p);
				return hutch_err_set(err, -E2BIG,
				                     "invalid network: more than %d hosts",
				                     HUTCH_NET_HOSTS_MAX);
			}
			n = realloc(p.hosts, (p.nhosts + 1) * sizeof(*n));
			if (!n) {
				free(copy);
				hutch_net_policy_done(&p);
				return hutch_err_set(err, -ENOMEM, "out of memory");
			}
			p.hosts = n;
			if (hutch_net_host_parse(tok, &p.hosts[p.nhosts], err) < 0) {
				free(copy);
				hutch_net_policy_done(&p);
				return err->code;
			}
			p.nhosts++;
		}
		free(copy);
		if (p.nhosts == 0)
			return hutch_err_set(err, -EINVAL,
			                     "invalid network '%.*s%s': no host listed",
			                     QUOTE(spec));
	} else {
		return hutch_err_set(err, -EINVAL,
		                     "invalid network '%.*s%s': use none, all, or "
		                     "allow:HOST[,HOST...]",
		                     QUOTE(spec));
	}
	*ret = p;
	return 0;
}

void hutch_net_policy_done(struct hutch_net_policy *p)
{
	free(p->hosts);
	p->hosts = NULL;
	p->nhosts = 0;
}

int hutch_net_policy_validate(const struct hutch_net_policy *p, const uint16_t *host_ports,
                              size_t nhost_ports, struct hutch_err *err)
{
	if (!hutch_net_mode_is_implemented(p->mode))
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "network %s is not implemented yet in this version of hutch; "
		                     "use --network none",
		                     hutch_net_mode_name(p->mode));
	/* The cloud's MistralSandbox takes none or all; hutch's allow has no
	 * route out of the sandbox but its proxy. */
	if (p->egress_set && p->mode == HUTCH_NET_ALLOW)
		return hutch_err_set(err, -EINVAL,
		                     "egress with network allow: allow reaches only its hosts "
		                     "through the TLS proxy; list the addresses there "
		                     "(allow:IP[:PORT]) or use network none or all with egress");
	if (nhost_ports > 0 && hutch_net_policy_wired_mode(p) == HUTCH_NET_NONE)
		return hutch_err_set(
		        err, -EINVAL,
		        "--host-port needs a network: with network none nothing "
		        "leaves the sandbox; use --network all or --network allow:HOST");
	/* allow: the sandbox's ports 53, 443 and the listed ones are the
	 * stub's and the proxy's listeners; a host port is another listener
	 * on the same namespace (hutch_net_child_listeners()). */
	for (size_t i = 0; p->mode == HUTCH_NET_ALLOW && i < nhost_ports; i++) {
		unsigned port = host_ports[i];
		bool clash = port == 53 || port == HUTCH_NET_TLS_PORT;
		for (size_t h = 0; h < p->nhosts; h++)
			clash = clash || p->hosts[h].port == port;
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

/* ---- egress= (the cloud's outbound allow list) ---- */

static int egress_invalid(const char *entry, bool scoped, struct hutch_err *err)
{
	return hutch_err_set(
	        err, -EINVAL, "invalid egress entry '%.*s%s': expected an IP address or CIDR%s",
	        QUOTE(entry), scoped ? " (scoped/zone-ID addresses are not allowed)" : "");
}

static int leading_ones(uint32_t v)
{
	int n = 0;

	while (n < 32 && (v & (0x80000000u >> n)))
		n++;
	return (n == 32 || (v << n) == 0) ? n : -1;
}

/* An IPv4 netmask ("255.255.0.0") or host mask ("0.0.255.255") as a
 * prefix length, as Python's ipaddress takes them; -1 if neither. */
static int netmask_prefix(const char *s)
{
	struct in_addr m;
	int n;

	if (inet_pton(AF_INET, s, &m) != 1)
		return -1;
	n = leading_ones(ntohl(m.s_addr));
	return n >= 0 ? n : leading_ones(~ntohl(m.s_addr));
}

int hutch_net_cidr_parse(const char *entry, struct hutch_net_cidr *ret, struct hutch_err *err)
{
	struct hutch_net_cidr c = { 0 };
	char buf[128], *slash;
	size_t n, len;
	int max;

	/* Python's str.strip(): the ASCII white space around it */
	while (*entry && isspace((unsigned char)*entry))
		entry++;
	len = strlen(entry);
	while (len > 0 && isspace((unsigned char)entry[len - 1]))
		len--;
	if (len == 0 || len >= sizeof(buf))
		return egress_invalid(entry, false, err);
	memcpy(buf, entry, len);
	buf[len] = '\0';
	if (strchr(buf, '%'))
		return egress_invalid(buf, true, err);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, c.addr) == 1)
		c.family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c.addr) == 1)
		c.family = AF_INET6;
	else {
		if (slash)
			slash[-1] = '/';
		return egress_invalid(buf, false, err);
	}
	max = c.family == AF_INET ? 32 : 128;
	c.prefix = (uint8_t)max;
	if (slash) {
		uint64_t v;
		int m = -1;

		if (hutch_parse_u64(slash, 0, (uint64_t)max, &v) == 0 &&
		    isdigit((unsigned char)*slash))
			m = (int)v;
		else if (c.family == AF_INET && strchr(slash, '.'))
			m = netmask_prefix(slash);
		if (m < 0) {
			slash[-1] = '/';
			return egress_invalid(buf, false, err);
		}
		c.prefix = (uint8_t)m;
	}
	/* strict=False: the host bits are cleared */
	for (n = 0; n < (size_t)max / 8; n++) {
		int keep = (int)c.prefix - (int)n * 8;
		c.addr[n] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
	}
	*ret = c;
	return 0;
}

void hutch_net_cidr_format(const struct hutch_net_cidr *c, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN] = "?";

	(void)inet_ntop(c->family, c->addr, a, sizeof(a));
	(void)snprintf(buf, size, "%s/%u", a, (unsigned)c->prefix);
}

enum hutch_net_mode hutch_net_policy_wired_mode(const struct hutch_net_policy *p)
{
	if (!p->egress_set || p->mode == HUTCH_NET_ALLOW)
		return p->mode;
	return p->negress ? HUTCH_NET_ALL : HUTCH_NET_NONE;
}
