/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox option table and its types; see options.h. Each type parses
 * its values once, from a string or from typed JSON, and keeps the error
 * messages of the cloud sandbox's options (DESIGN §1). Rows are in the
 * order hutch_config_to_json() shows them. lint-layout: long because the
 * table is one table by design (options.h); new types go in files of their
 * own (portspec.c, publish.c, options-image.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "options-field.h"
#include "options.h"
#include "util.h"

#define MiB (1ull << 20)

#define AT(f) \
	.offset = offsetof(struct hutch_config, f), .size = sizeof(((struct hutch_config *)0)->f)

/* The rows' types: an index in the row (TYPE()), not a pointer. */
#define OPTION_TYPES(X)    \
	X(access)          \
	X(bytes)           \
	X(egress)          \
	X(header_bindings) \
	X(host_ports)      \
	X(image)           \
	X(image_store)     \
	X(instance_type)   \
	X(listen)          \
	X(net_pool)        \
	X(network)         \
	X(publish)         \
	X(region)          \
	X(resolver)        \
	X(script)          \
	X(seconds)         \
	X(secrets)         \
	X(snapshot)        \
	X(switch)          \
	X(text)            \
	X(volumes)         \
	X(workspace)
#define TYPE_ID(t)  OPT_TYPE_##t,
#define TYPE_PTR(t) [OPT_TYPE_##t] = &hutch_opt_##t,
enum {
	OPTION_TYPES(TYPE_ID) OPT_TYPE_N
};
static const struct hutch_option_type *const types[OPT_TYPE_N] = { OPTION_TYPES(TYPE_PTR) };
#define TYPE(t) .type = OPT_TYPE_##t

/* ---- numbers: seconds and bytes ---- */

static void u64_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, uint64_t) = o->def;
}

/* tail: more words for the message ("" or ", as a JSON number"). */
static int u64_invalid(const struct hutch_option *o, const char *value, const char *tail,
                       struct hutch_err *err)
{
	return hutch_err_set(
	        err, -EINVAL, "invalid %s '%.40s': expected a %s from %llu to %llu%s", o->name,
	        value, o->type == OPT_TYPE_seconds ? "whole number of seconds" : "number of bytes",
	        (unsigned long long)o->min, (unsigned long long)o->max, tail);
}

static int u64_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                     struct hutch_err *err)
{
	if (hutch_parse_u64(s, o->min, o->max, FIELD(o, c, uint64_t)) < 0)
		return u64_invalid(o, s, "", err);
	return 0;
}

static int u64_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                         struct hutch_err *err)
{
	char shown[32];
	double d;

	/* Typed: a number in a string is refused too. */
	if (cJSON_IsString(v))
		return u64_invalid(o, v->valuestring, ", as a JSON number", err);
	if (!cJSON_IsNumber(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected a number", o->name);
	d = v->valuedouble;
	if (d != hutch_round(d) || d < (double)o->min || d > (double)o->max) {
		snprintf(shown, sizeof(shown), "%g", d);
		return u64_invalid(o, shown, "", err);
	}
	*FIELD(o, c, uint64_t) = (uint64_t)d;
	return 0;
}

static void u64_to_json(const struct hutch_option *o, const struct hutch_config *c,
                        struct hutch_jw *w)
{
	hutch_jw_num(w, o->name, (double)*CFIELD(o, c, uint64_t));
}

static void u64_text(const struct hutch_option *o, const struct hutch_config *c,
                     void (*emit)(void *ud, const char *s), void *ud)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)*CFIELD(o, c, uint64_t));
	emit(ud, buf);
}

const struct hutch_option_type hutch_opt_seconds = {
	.init = u64_init,
	.parse = u64_parse,
	.from_json = u64_from_json,
	.to_json = u64_to_json,
	.text = u64_text,
};
const struct hutch_option_type hutch_opt_bytes = {
	.init = u64_init,
	.parse = u64_parse,
	.from_json = u64_from_json,
	.to_json = u64_to_json,
	.text = u64_text,
};

/* ---- text: malloc'ed shell text, bounded, never empty; NULL = unset ---- */

static void text_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, char *) = NULL;
}

static int text_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                      struct hutch_err *err)
{
	char **field = FIELD(o, c, char *);
	char *copy;

	if (strlen(s) > o->max)
		return hutch_err_set(err, -EINVAL, "invalid %s: longer than %llu bytes", o->name,
		                     (unsigned long long)o->max);
	if (!*s)
		return hutch_err_set(err, -EINVAL, "invalid %s: empty", o->name);
	copy = strdup(s);
	if (!copy)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	free(*field);
	*field = copy;
	return 0;
}

/* A string sets it, null unsets it. */
static int text_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                          struct hutch_err *err)
{
	char **field = FIELD(o, c, char *);

	if (cJSON_IsString(v))
		return text_parse(o, c, v->valuestring, err);
	if (!cJSON_IsNull(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected a string or null",
		                     o->name);
	free(*field);
	*field = NULL;
	return 0;
}

static void text_to_json(const struct hutch_option *o, const struct hutch_config *c,
                         struct hutch_jw *w)
{
	const char *v = *CFIELD(o, c, char *);

	if (v)
		hutch_jw_str(w, o->name, v);
	else
		hutch_jw_null(w, o->name);
}

/* A script may be long: shown by its size only, as NAME_bytes. */
static void script_to_json(const struct hutch_option *o, const struct hutch_config *c,
                           struct hutch_jw *w)
{
	const char *v = *CFIELD(o, c, char *);
	char name[64];

	snprintf(name, sizeof(name), "%s_bytes", o->name);
	hutch_jw_num(w, name, v ? (double)strlen(v) : 0);
}

static void text_text(const struct hutch_option *o, const struct hutch_config *c,
                      void (*emit)(void *ud, const char *s), void *ud)
{
	const char *v = *CFIELD(o, c, char *);

	if (v)
		emit(ud, v);
}

static void text_done(const struct hutch_option *o, struct hutch_config *c)
{
	char **field = FIELD(o, c, char *);

	free(*field);
	*field = NULL;
}

const struct hutch_option_type hutch_opt_text = {
	.init = text_init,
	.parse = text_parse,
	.from_json = text_from_json,
	.to_json = text_to_json,
	.text = text_text,
	.done = text_done,
};
const struct hutch_option_type hutch_opt_script = {
	.init = text_init,
	.parse = text_parse,
	.from_json = text_from_json,
	.to_json = script_to_json,
	.text = text_text,
	.done = text_done,
};

/* ---- strings in a char array: region, resolver, address pool ---- */

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

static int region_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	if (!region_is_valid(s))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%s': a region name is lowercase letters, "
		                     "digits and dashes, e.g. %s",
		                     o->name, s, HUTCH_DEFAULT_REGION);
	hutch_opt_chars_set(o, c, s);
	return 0;
}

const struct hutch_option_type hutch_opt_region = {
	.init = hutch_opt_chars_init,
	.parse = region_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};

/* "IP" or "IP:PORT", IPv4: the supervisor's upstream DNS server. */
static int resolver_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                          struct hutch_err *err)
{
	struct sockaddr_in sa;

	if (strlen(s) >= o->size || hutch_config_parse_resolver(s, &sa) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.64s' (HUTCH_RESOLVER): give an IPv4 "
		                     "address with an optional port, e.g. 192.0.2.53 or "
		                     "192.0.2.53:5353",
		                     o->name, s);
	hutch_opt_chars_set(o, c, s);
	c->resolver_addr = sa;
	return 0;
}

const struct hutch_option_type hutch_opt_resolver = {
	.init = hutch_opt_chars_init,
	.parse = resolver_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};

static int net_pool_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                          struct hutch_err *err)
{
	struct hutch_net_pool pool;

	if (strlen(s) >= o->size)
		return hutch_err_set(err, -EINVAL,
		                     "invalid address pool '%.40s...' (HUTCH_NET_POOL): write "
		                     "it as A.B.C.D/N, e.g. %s",
		                     s, HUTCH_NET_POOL_DEFAULT);
	if (hutch_net_pool_parse(s, &pool, err) < 0)
		return err->code;
	hutch_opt_chars_set(o, c, s);
	c->net_pool_value = pool;
	return 0;
}

const struct hutch_option_type hutch_opt_net_pool = {
	.init = hutch_opt_chars_init,
	.parse = net_pool_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};

/* ---- the executor's TCP listener: "[ADDR:]PORT" ---- */

static int listen_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	if (hutch_config_parse_listen(s, &c->executor_addr, FIELD(o, c, char), o->size) < 0)
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid %s '%.64s': give a TCP port (0: any free one), served "
		        "on 127.0.0.1, or ADDR:PORT with an IPv4 address",
		        o->name, s);
	return 0;
}

static int listen_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                            struct hutch_err *err)
{
	char buf[32];

	if (cJSON_IsNull(v))
		return listen_parse(o, c, "", err);
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 65535 &&
	    v->valuedouble == (double)(unsigned)v->valuedouble) {
		snprintf(buf, sizeof(buf), "%u", (unsigned)v->valuedouble);
		return listen_parse(o, c, buf, err);
	}
	if (cJSON_IsString(v))
		return listen_parse(o, c, v->valuestring, err);
	return hutch_err_set(err, -EINVAL, "'%s' must be a port number or \"ADDR:PORT\"", o->name);
}

static void listen_to_json(const struct hutch_option *o, const struct hutch_config *c,
                           struct hutch_jw *w)
{
	const char *v = CFIELD(o, c, char);

	if (*v)
		hutch_jw_str(w, o->name, v);
	else
		hutch_jw_null(w, o->name);
}

static void listen_text(const struct hutch_option *o, const struct hutch_config *c,
                        void (*emit)(void *ud, const char *s), void *ud)
{
	if (*CFIELD(o, c, char))
		emit(ud, CFIELD(o, c, char));
}

const struct hutch_option_type hutch_opt_listen = {
	.init = hutch_opt_chars_init,
	.parse = listen_parse,
	.from_json = listen_from_json,
	.to_json = listen_to_json,
	.text = listen_text,
};

/* ---- the instance type: a row of the instance type table ---- */

static int type_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                      struct hutch_err *err)
{
	const struct hutch_instance_type *t = hutch_instance_type_find(s);

	if (!t)
		return hutch_err_set(err, -EINVAL, "unknown %s '%s': valid types are %s", o->name,
		                     s, hutch_instance_type_names());
	*FIELD(o, c, const struct hutch_instance_type *) = t;
	return 0;
}

static void type_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, const struct hutch_instance_type *) = hutch_instance_type_find(o->def_str);
}

static void type_to_json(const struct hutch_option *o, const struct hutch_config *c,
                         struct hutch_jw *w)
{
	hutch_jw_str(w, o->name, (*CFIELD(o, c, struct hutch_instance_type *))->name);
}

static void type_text(const struct hutch_option *o, const struct hutch_config *c,
                      void (*emit)(void *ud, const char *s), void *ud)
{
	emit(ud, (*CFIELD(o, c, struct hutch_instance_type *))->name);
}

const struct hutch_option_type hutch_opt_instance_type = {
	.init = type_init,
	.parse = type_parse,
	.to_json = type_to_json,
	.text = type_text,
};

/* ---- the network: the spec as given (the field) and its parsed policy ---- */

static int network_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                         struct hutch_err *err)
{
	struct hutch_net_policy p;

	if (strlen(s) >= o->size)
		return hutch_err_set(err, -EINVAL, "invalid %s: longer than %zu bytes", o->name,
		                     (size_t)o->size - 1);
	if (hutch_net_policy_parse(s, &p, err) < 0)
		return err->code;
	/* egress is an option of its own, given before or after this one */
	p.egress_set = c->net.egress_set;
	p.negress = c->net.negress;
	memcpy(p.egress, c->net.egress, c->net.negress * sizeof(p.egress[0]));
	hutch_net_policy_done(&c->net);
	c->net = p;
	hutch_opt_chars_set(o, c, s);
	return 0;
}

static void network_init(const struct hutch_option *o, struct hutch_config *c)
{
	struct hutch_err err = { 0 };

	c->net = (struct hutch_net_policy){ .mode = HUTCH_NET_NONE };
	hutch_opt_chars_set(o, c, "none");
	(void)network_parse(o, c, o->def_str, &err); /* a constant: unit-tested */
}

static void network_done(const struct hutch_option *o, struct hutch_config *c)
{
	(void)o;
	hutch_net_policy_done(&c->net);
}

const struct hutch_option_type hutch_opt_network = {
	.init = network_init,
	.parse = network_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
	.done = network_done,
};

/* ---- the table ---- */

/* --help's text of each row, by the row's name: a pool (HUTCH_STRPOOL,
 * base/util.h), so that the table holds offsets, not pointers. A row's
 * NAMED(n) is its name and its text's offset, so the two cannot part. */
#define OPTION_HELP(X)                                                                             \
	X(instance_type, "size preset: nano, micro, small, medium, large, xlarge, 2xlarge")        \
	X(workspace, "where /workspace, /home/appuser, /tmp and an image's writes go: disk (an "   \
	             "ext4 of the instance's disk size of the sandbox's own: ENOSPC at the "       \
	             "size, "                                                                      \
	             "never memory; root only, an ordinary user gets tmpfs) or tmpfs (memory, "    \
	             "charged to the memory limit)")                                               \
	X(ttl_seconds, "delete the sandbox S seconds after creation")                              \
	X(idle_timeout_seconds,                                                                    \
	  "freeze the sandbox after S seconds without requests; the next request "                 \
	  "wakes it; 0 = never")                                                                   \
	X(region, "other regions than the default allow only --network all")                       \
	X(network, "none (no network), all (any address beyond this machine), or "                 \
	           "allow:HOST[,HOST...] (only TLS to the listed names/IPs; HOST is name, "        \
	           "name:port, ip or ip:port)")                                                    \
	X(egress, "the cloud's egress=: an IP address or CIDR the sandbox may reach "              \
	          "(repeatable); with it the sandbox reaches these and nothing else, "             \
	          "with network none or all (never this machine, private or "                      \
	          "link-local ranges); '' alone blocks everything")                                \
	X(host_ports, "let the sandbox reach 127.0.0.1:PORT on the host as "                       \
	              "host.hutch.internal:PORT (TCP; repeatable; all or allow)")                  \
	X(publish, HUTCH_PUBLISH_HELP)                                                             \
	X(volumes, HUTCH_VOLUME_HELP)                                                              \
	X(header_bindings,                                                                         \
	  "set HEADER on every HTTPS request to HOST at the egress proxy, the secret "             \
	  "never entering the sandbox; VALUE is @env:NAME, @file:PATH, @fd:N (a "                  \
	  "literal is visible in ps), optionally after a template such as 'Bearer "                \
	  "{secret}' (repeatable; all or allow)")                                                  \
	X(image, "the root file system: an image of the store ('hutch image pull' / "              \
	         "'import'), stacked read-only under the sandbox's own writable layer; "           \
	         "not yet there, a path (/abs, ./rel, oci:PATH, docker-archive:PATH) is "          \
	         "imported and a whole registry reference pulled, once; 'host' is the "            \
	         "host-derived root; without it, hutch-default once 'hutch image "                 \
	         "build-default' made it, else host")                                              \
	X(snapshot, "start from a filesystem snapshot of the store ('hutch snapshot ID NAME'): "   \
	            "--image NAME, refused unless NAME is there (nothing is pulled); the "         \
	            "snapshot's /workspace, /home/appuser and /tmp are in its layers; a full "     \
	            "one ('snapshot --full') is restored: its processes carry on in a new "        \
	            "plain sandbox of network none")                                               \
	X(max_output_bytes, "bytes of stdout/stderr kept per command")                             \
	X(journal_max_bytes,                                                                       \
	  "the session journal's bound on disk (hutch journal; 4 MiB, two files, "                 \
	  "oldest lines dropped); 0: no journal")                                                  \
	X(change_lists, "each command's result lists the files it created, modified and deleted "  \
	                "in /workspace, /home/appuser and /tmp (Linux 6.8+); off: init keeps no "  \
	                "index of those trees nor fanotify group")                                 \
	X(net_log, "network allow (all: host ports, bindings): the egress log of every "           \
	           "connection, its rule, bytes and command (hutch net-log); off: none kept")      \
	X(nat_log, "network all: the egress log also records every TCP and UDP flow through "      \
	           "NAT (the kernel's log of first packets, conntrack's bytes); off (the "         \
	           "default): host ports', bindings' and DNS records only. On costs a create "     \
	           "~30 ms and ~15% of the connection rate (docs/network.md)")                     \
	X(access, "what the session may do: all; files (read and write files, run no "             \
	          "commands: 403 access_denied); none (neither); hooks and the setup "             \
	          "script still run")                                                              \
	X(secrets, "the cloud's secrets=: NAME in every command's environment (setup "             \
	           "script and hooks too), the value never shown (inspect, status and "            \
	           "ls list names); VALUE is @env:VAR, @file:PATH, @fd:N (a literal is "           \
	           "visible in ps) (repeatable)")                                                  \
	X(executor_max_output_bytes,                                                               \
	  "bytes of stdout and of stderr the cloud executor's /run answers whole "                 \
	  "(64 MiB); more is a 500 error naming this option, the command killed")                  \
	X(executor_port, "also serve the cloud executor's API on TCP 127.0.0.1:PORT (0: any free " \
	                 "port; ADDR:PORT for another address), behind a bearer secret that "      \
	                 "create --json prints once")                                              \
	X(setup_script, "run FILE (a shell script) once as appuser in /workspace before create "   \
	                "returns; failure or timeout deletes the sandbox (exit 71)")               \
	X(setup_script_timeout_seconds, "time limit of the setup script and of --on-create")       \
	X(on_create, "shell command run after the setup script, before create returns")            \
	X(on_destroy, "shell command run at rm / DELETE and at TTL expiry, before the processes "  \
	              "are killed (at most 30 s)")                                                 \
	X(description, "a note for people (what the sandbox is for, who made it), shown by "       \
	               "inspect, ls --json and GET /status; at most 1024 bytes")                   \
	X(resolver, "the DNS server the sandbox's DNS stub asks, IP[:PORT] (default: the "         \
	            "host's first IPv4 nameserver)")                                               \
	X(upstream_ca, "a PEM file of CAs that header bindings' upstream servers are verified "    \
	               "against (default: the host's trust store)")                                \
	X(net_pool,                                                                                \
	  "the addresses of --network all, as a CIDR (default " HUTCH_NET_POOL_DEFAULT ")")        \
	X(image_store, "the image store of --image (default /var/lib/hutch; an ordinary "          \
	               "user's $XDG_DATA_HOME/hutch or ~/.local/share/hutch)")
HUTCH_STRPOOL(option_help, option_helps, OPTION_HELP);
#define NAMED(n) .name = #n, .help = HUTCH_STRPOOL_AT(option_help, n)

static const struct hutch_option options[] = {
	{
	        NAMED(instance_type),
	        .cli = "instance-type",
	        .metavar = "T",
	        TYPE(instance_type),
	        AT(type),
	        .def_str = HUTCH_DEFAULT_INSTANCE_TYPE,
	        .flags = HUTCH_OPT_POOL_KEY,
	},
	{
	        NAMED(workspace),
	        .cli = "workspace",
	        .metavar = "disk|tmpfs",
	        TYPE(workspace),
	        AT(workspace),
	        /* in the pool's key as no_limits is (poolkey.c) */
	        .def_str = "disk",
	},
	{
	        NAMED(ttl_seconds),
	        .cli = "ttl",
	        .metavar = "S",
	        TYPE(seconds),
	        AT(ttl_seconds),
	        .min = 1,
	        .max = HUTCH_MAX_TTL,
	        .def = HUTCH_DEFAULT_TTL,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(idle_timeout_seconds),
	        .cli = "idle-timeout",
	        .metavar = "S",
	        TYPE(seconds),
	        AT(idle_timeout_seconds),
	        .min = 0,
	        .max = HUTCH_MAX_TTL,
	        .def = 0,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(region),
	        .cli = "region",
	        .metavar = "R",
	        TYPE(region),
	        AT(region),
	        .def_str = HUTCH_DEFAULT_REGION,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(network),
	        .cli = "network",
	        .metavar = "N",
	        TYPE(network),
	        AT(network_spec),
	        .def_str = "none",
	        .flags = HUTCH_OPT_POOL_KEY,
	},
	{
	        NAMED(egress),
	        .cli = "egress",
	        .metavar = "CIDR",
	        TYPE(egress),
	        AT(net),
	        .flags = HUTCH_OPT_POOL_KEY,
	},
	{
	        NAMED(host_ports),
	        .cli = "host-port",
	        .metavar = "PORT",
	        TYPE(host_ports),
	        AT(host_ports),
	        .flags = HUTCH_OPT_POOL_KEY,
	},
	{
	        NAMED(publish),
	        .cli = "publish",
	        .cli_short = 'p',
	        .metavar = "SPEC",
	        TYPE(publish),
	        AT(publish),
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(volumes),
	        .cli = "volume",
	        .cli_short = 'v',
	        .metavar = "SRC:PATH[:rw]",
	        TYPE(volumes),
	        AT(volumes),
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(header_bindings),
	        .cli = "header-binding",
	        .metavar = "HOST:HEADER=VALUE",
	        TYPE(header_bindings),
	        AT(header_bindings),
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(image),
	        .cli = "image",
	        .metavar = "REF",
	        TYPE(image),
	        AT(image),
	        .def_str = "",
	        .flags = HUTCH_OPT_POOL_KEY,
	},
	{
	        NAMED(snapshot), .cli = "snapshot", .metavar = "NAME", TYPE(snapshot), AT(image),
	        .def_str = "", .flags = HUTCH_OPT_HIDDEN, /* shown, and keyed, as image */
	},
	{
	        NAMED(max_output_bytes),
	        .cli = "max-output",
	        .metavar = "B",
	        TYPE(bytes),
	        AT(max_output_bytes),
	        .min = 1,
	        .max = HUTCH_MAX_MAX_OUTPUT,
	        .def = HUTCH_DEFAULT_MAX_OUTPUT,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(journal_max_bytes),
	        .cli = "journal-max",
	        .metavar = "B",
	        TYPE(bytes),
	        AT(journal_max_bytes),
	        .max = HUTCH_MAX_JOURNAL_MAX,
	        .def = HUTCH_DEFAULT_JOURNAL_MAX,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(change_lists), .cli = "change-lists", .metavar = "on|off", TYPE(switch),
	        AT(change_lists),
	        .def = 1, /* in the pool key when off (poolkey.c), like --no-limits */
	},
	{
	        NAMED(net_log), .cli = "net-log", .metavar = "on|off", TYPE(switch), AT(net_log),
	        .def = 1, /* in the pool key when off (poolkey.c) */
	},
	{
	        NAMED(nat_log), .cli = "nat-log", .metavar = "on|off", TYPE(switch), AT(nat_log),
	        .def = 0, /* in the pool key when on (poolkey.c) */
	},
	{
	        NAMED(access),
	        .cli = "access",
	        .metavar = "all|files|none",
	        TYPE(access),
	        AT(access),
	        .def_str = "all",
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(secrets),
	        .cli = "secret",
	        .metavar = "NAME=VALUE",
	        TYPE(secrets),
	        AT(secrets),
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(executor_max_output_bytes),
	        .cli = "executor-max-output",
	        .metavar = "B",
	        TYPE(bytes),
	        AT(executor_max_output_bytes),
	        .min = 1,
	        .max = HUTCH_MAX_EXEC_MAX_OUTPUT,
	        .def = HUTCH_DEFAULT_EXEC_MAX_OUTPUT,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(executor_port),
	        .cli = "executor-port",
	        .metavar = "[ADDR:]PORT",
	        TYPE(listen),
	        AT(executor_listen),
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(setup_script),
	        .cli = "setup-script",
	        .metavar = "FILE",
	        TYPE(script),
	        AT(setup_script),
	        .max = HUTCH_SETUP_SCRIPT_MAX,
	        .flags = HUTCH_OPT_NO_POOL | HUTCH_OPT_CLI_FILE,
	},
	{
	        NAMED(setup_script_timeout_seconds),
	        .cli = "setup-timeout",
	        .metavar = "S",
	        TYPE(seconds),
	        AT(setup_script_timeout_seconds),
	        .min = 1,
	        .max = HUTCH_MAX_TTL,
	        .def = HUTCH_DEFAULT_SETUP_TIMEOUT,
	},
	{
	        NAMED(on_create),
	        .cli = "on-create",
	        .metavar = "CMD",
	        TYPE(text),
	        AT(on_create),
	        .max = HUTCH_HOOK_CMD_MAX,
	        .flags = HUTCH_OPT_NO_POOL,
	},
	{
	        NAMED(on_destroy),
	        .cli = "on-destroy",
	        .metavar = "CMD",
	        TYPE(text),
	        AT(on_destroy),
	        .max = HUTCH_HOOK_CMD_MAX,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(description),
	        .cli = "description",
	        .metavar = "TEXT",
	        TYPE(text),
	        AT(description),
	        .max = 1024,
	        .flags = HUTCH_OPT_SESSION,
	},
	{
	        NAMED(resolver),
	        .env = "HUTCH_RESOLVER",
	        TYPE(resolver),
	        AT(resolver),
	        .flags = HUTCH_OPT_POOL_KEY | HUTCH_OPT_HIDDEN,
	},
	{
	        NAMED(upstream_ca),
	        .env = "HUTCH_UPSTREAM_CA",
	        TYPE(text),
	        AT(upstream_ca),
	        .max = 4096,
	        .flags = HUTCH_OPT_HIDDEN,
	},
	{
	        NAMED(net_pool),
	        .env = "HUTCH_NET_POOL",
	        TYPE(net_pool),
	        AT(net_pool),
	        .flags = HUTCH_OPT_POOL_KEY | HUTCH_OPT_HIDDEN,
	},
	{
	        NAMED(image_store),
	        .env = "HUTCH_IMAGE_STORE",
	        TYPE(image_store),
	        AT(image_store),
	        .flags = HUTCH_OPT_POOL_KEY | HUTCH_OPT_HIDDEN,
	},
};

const struct hutch_option_type *hutch_option_type(const struct hutch_option *o)
{
	return types[o->type];
}

const char *hutch_option_help(const struct hutch_option *o)
{
	return HUTCH_STRPOOL_STR(option_helps, o->help);
}

const struct hutch_option *hutch_options(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(options);
	return options;
}

const struct hutch_option *hutch_option_find(const char *name)
{
	for (size_t i = 0; name && i < ELEMENTSOF(options); i++)
		if (!strcmp(options[i].name, name))
			return &options[i];
	return NULL;
}

const struct hutch_option *hutch_option_find_cli(const char *flag)
{
	for (size_t i = 0; flag && i < ELEMENTSOF(options); i++)
		if (options[i].cli[0] && !strcmp(options[i].cli, flag))
			return &options[i];
	return NULL;
}

int hutch_option_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                       struct hutch_err *err)
{
	return hutch_option_type(o)->parse(o, c, s, err);
}

int hutch_option_parse_as(const struct hutch_option *o, struct hutch_config *c, const char *s,
                          const char *label, struct hutch_err *err)
{
	/* The row as the caller knows it: the type's messages name it by
	 * label ("--ttl" for ttl_seconds) where they are written, so no
	 * message is rewritten afterwards. */
	struct hutch_option as = *o;

	snprintf(as.name, sizeof(as.name), "%s", label);
	return hutch_option_type(o)->parse(&as, c, s, err);
}

int hutch_option_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                           struct hutch_err *err)
{
	if (hutch_option_type(o)->from_json)
		return hutch_option_type(o)->from_json(o, c, v, err);
	if (!cJSON_IsString(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected a string", o->name);
	return hutch_option_type(o)->parse(o, c, v->valuestring, err);
}

void hutch_option_text(const struct hutch_option *o, const struct hutch_config *c,
                       void (*emit)(void *ud, const char *s), void *ud)
{
	hutch_option_type(o)->text(o, c, emit, ud);
}

static void note_set(void *ud, const char *s)
{
	(void)s;
	*(bool *)ud = true;
}

bool hutch_option_is_set(const struct hutch_option *o, const struct hutch_config *c)
{
	bool set = false;

	hutch_option_type(o)->text(o, c, note_set, &set);
	return set;
}

void hutch_option_swap(const struct hutch_option *o, struct hutch_config *a, struct hutch_config *b)
{
	unsigned char tmp[sizeof(struct hutch_config)];

	memcpy(tmp, FIELD(o, a, char), o->size);
	memcpy(FIELD(o, a, char), FIELD(o, b, char), o->size);
	memcpy(FIELD(o, b, char), tmp, o->size);
}

void hutch_config_init(struct hutch_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < ELEMENTSOF(options); i++)
		types[options[i].type]->init(&options[i], c);
}

void hutch_config_done(struct hutch_config *c)
{
	for (size_t i = 0; i < ELEMENTSOF(options); i++)
		if (types[options[i].type]->done)
			types[options[i].type]->done(&options[i], c);
}

int hutch_config_set(struct hutch_config *c, const char *key, const char *value,
                     struct hutch_err *err)
{
	const struct hutch_option *o = hutch_option_find(key);

	if (!o)
		return hutch_err_set(err, -EINVAL, "unknown option '%s'", key);
	return hutch_option_type(o)->parse(o, c, value, err);
}

/* The rows' members of the object being written. */
static void options_write(const struct hutch_config *c, unsigned flags, struct hutch_jw *w)
{
	for (size_t i = 0; i < ELEMENTSOF(options); i++) {
		if ((options[i].flags & flags) != flags)
			continue;
		if (!flags && (options[i].flags & HUTCH_OPT_HIDDEN))
			continue;
		types[options[i].type]->to_json(&options[i], c, w);
	}
}

void hutch_option_write(const struct hutch_option *o, const struct hutch_config *c,
                        struct hutch_jw *w)
{
	types[o->type]->to_json(o, c, w);
}

cJSON *hutch_options_to_json(const struct hutch_config *c, unsigned flags)
{
	struct hutch_jw w;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_jw_open(&w, NULL, '{');
	options_write(c, flags, &w);
	hutch_jw_close(&w, '{');
	return hutch_jw_to_cjson(&w);
}

void hutch_config_write(const struct hutch_config *c, const char *key, struct hutch_jw *w)
{
	hutch_jw_open(w, key, '{');
	options_write(c, 0, w);
	/* hutch create --no-limits: a CLI flag, not a row (no pool key row,
	 * poolkey.c adds it), shown so the API says it too. */
	hutch_jw_bool(w, "no_limits", c->no_limits);
	/* The store of an image's sandbox or the host-derived root's (a
	 * hidden row, HUTCH_IMAGE_STORE at its create): hutch fork takes the
	 * source's snapshot there (a full one of the host-derived root's),
	 * whatever the forking shell's HUTCH_IMAGE_STORE says (cli/verb-fork.c). */
	if (c->image_store[0])
		hutch_jw_str(w, "image_store", c->image_store);
	/* What the instance type means, for readers of /status. */
	hutch_jw_open(w, "limits", '{');
	hutch_jw_num(w, "vcpu", (double)c->type->cpu_millis / 1000.0);
	hutch_jw_num(w, "memory_bytes", (double)c->type->memory_bytes);
	hutch_jw_num(w, "disk_bytes", (double)c->type->disk_bytes);
	hutch_jw_num(w, "pids", (double)c->type->pids_max);
	hutch_jw_close(w, '{');
	hutch_jw_close(w, '{');
}

cJSON *hutch_config_to_json(const struct hutch_config *c)
{
	struct hutch_jw w;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_config_write(c, NULL, &w);
	return hutch_jw_to_cjson(&w);
}

int hutch_options_from_json(struct hutch_config *c, const cJSON *obj, unsigned flags,
                            struct hutch_err *err)
{
	const struct hutch_option *o;
	const cJSON *it;
	int r;

	/* Every field known before any is set. */
	cJSON_ArrayForEach(it, obj) {
		o = hutch_option_find(it->string);
		if (!o || (o->flags & flags) != flags)
			return hutch_err_set(err, -EINVAL, "unknown field '%s'", it->string);
	}
	cJSON_ArrayForEach(it, obj) {
		r = hutch_option_from_json(hutch_option_find(it->string), c, it, err);
		if (r < 0)
			return r;
	}
	return 0;
}
