/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option types of the network's lists (options.h). host_ports: a set
 * of TCP ports, each value adds one. header_bindings: --header-binding
 * HOST:HEADER=VALUE, one binding per value, or a JSON array of {"host",
 * "header", "value"} objects. The set lives in its own pages
 * (netpolicy.h: struct hutch_net_bindings); what is shown of it —
 * to_json(), text() — is host and header only, never a value.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "options.h"
#include "util.h"

#define FIELD(o, c, T)  ((T *)(void *)((char *)(c) + (o)->offset))
#define CFIELD(o, c, T) ((const T *)(const void *)((const char *)(c) + (o)->offset))

/* ---- host ports: a set of TCP ports; each value adds one ---- */

static int port_add(struct hutch_config *c, uint64_t port, struct hutch_err *err)
{
	for (size_t i = 0; i < c->nhost_ports; i++)
		if (c->host_ports[i] == port)
			return 0;
	if (c->nhost_ports >= HUTCH_NET_HOST_PORTS_MAX)
		return hutch_err_set(err, -E2BIG, "too many host ports: at most %d",
		                     HUTCH_NET_HOST_PORTS_MAX);
	c->host_ports[c->nhost_ports++] = (uint16_t)port;
	return 0;
}

static int port_invalid(const char *value, struct hutch_err *err)
{
	return hutch_err_set(err, -EINVAL,
	                     "invalid host port '%.40s': give a TCP port number from 1 to "
	                     "65535, e.g. --host-port 8080",
	                     value);
}

static void ports_init(const struct hutch_option *o, struct hutch_config *c)
{
	(void)o;
	c->nhost_ports = 0;
}

static int ports_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                       struct hutch_err *err)
{
	uint64_t port;

	(void)o;
	if (hutch_parse_u64(s, 1, 65535, &port) < 0)
		return port_invalid(s, err);
	return port_add(c, port, err);
}

/* An array of port numbers replaces the set. */
static int ports_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                           struct hutch_err *err)
{
	struct hutch_config tmp = { .nhost_ports = 0 };
	const cJSON *it;
	char shown[32];
	int r;

	if (!cJSON_IsArray(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected an array of numbers",
		                     o->name);
	cJSON_ArrayForEach(it, v) {
		double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
		snprintf(shown, sizeof(shown), "%g", d);
		if (d != hutch_round(d) || d < 1 || d > 65535)
			return port_invalid(cJSON_IsNumber(it) ? shown : "(not a number)", err);
		r = port_add(&tmp, (uint64_t)d, err);
		if (r < 0)
			return r;
	}
	c->nhost_ports = tmp.nhost_ports;
	memcpy(c->host_ports, tmp.host_ports, sizeof(c->host_ports));
	return 0;
}

static void ports_to_json(const struct hutch_option *o, const struct hutch_config *c,
                          struct hutch_jw *w)
{
	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; i < c->nhost_ports; i++)
		hutch_jw_num(w, NULL, c->host_ports[i]);
	hutch_jw_close(w, '[');
}

static void ports_text(const struct hutch_option *o, const struct hutch_config *c,
                       void (*emit)(void *ud, const char *s), void *ud)
{
	char buf[8];

	(void)o;
	for (size_t i = 0; i < c->nhost_ports; i++) {
		snprintf(buf, sizeof(buf), "%u", c->host_ports[i]);
		emit(ud, buf);
	}
}

const struct hutch_option_type hutch_opt_host_ports = {
	.init = ports_init,
	.parse = ports_parse,
	.from_json = ports_from_json,
	.to_json = ports_to_json,
	.text = ports_text,
};

static void bind_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, struct hutch_net_bindings *) = NULL;
}

static void bind_done(const struct hutch_option *o, struct hutch_config *c)
{
	struct hutch_net_bindings **b = FIELD(o, c, struct hutch_net_bindings *);

	hutch_net_bindings_free(*b);
	*b = NULL;
}

/* One binding, parsed into a scratch copy inside the set's own pages (the
 * secret never lands on the stack or the heap). */
static int bind_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                      struct hutch_err *err)
{
	struct hutch_net_bindings **b = FIELD(o, c, struct hutch_net_bindings *);
	struct hutch_net_binding *slot;
	int r;

	if (!*b) {
		r = hutch_net_bindings_new(b);
		if (r < 0)
			return hutch_err_set_errno(err, r, "allocate the header bindings");
	}
	if ((*b)->n >= HUTCH_NET_BINDINGS_MAX)
		return hutch_err_set(err, -E2BIG, "too many header bindings: at most %d",
		                     HUTCH_NET_BINDINGS_MAX);
	slot = &(*b)->b[(*b)->n];
	r = hutch_net_binding_parse(s, slot, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < (*b)->n; i++)
		if (!strcmp((*b)->b[i].host, slot->host) &&
		    !strcasecmp((*b)->b[i].header, slot->header)) {
			r = hutch_err_set(err, -EEXIST,
			                  "header binding '%.128s:%.64s' is given twice",
			                  slot->host, slot->header);
			explicit_bzero(slot, sizeof(*slot));
			return r;
		}
	(*b)->n++;
	return 0;
}

static int bind_one_json(const cJSON *it, struct hutch_net_bindings *b, struct hutch_err *err)
{
	const cJSON *host = cJSON_GetObjectItemCaseSensitive(it, "host");
	const cJSON *header = cJSON_GetObjectItemCaseSensitive(it, "header");
	const cJSON *value = cJSON_GetObjectItemCaseSensitive(it, "value");
	struct hutch_net_binding *slot;
	size_t len;
	int r;

	if (!cJSON_IsObject(it) || !cJSON_IsString(host) || !cJSON_IsString(header) ||
	    !cJSON_IsString(value) || cJSON_GetArraySize(it) != 3)
		return hutch_err_set(
		        err, -EINVAL,
		        "field 'header_bindings' has the wrong type: expected an array "
		        "of {\"host\", \"header\", \"value\"} objects (strings)");
	len = strlen(value->valuestring);
	r = hutch_net_binding_check(host->valuestring, header->valuestring, value->valuestring, len,
	                            err);
	if (r < 0)
		return r;
	if (b->n >= HUTCH_NET_BINDINGS_MAX)
		return hutch_err_set(err, -E2BIG, "too many header bindings: at most %d",
		                     HUTCH_NET_BINDINGS_MAX);
	slot = &b->b[b->n];
	memset(slot, 0, sizeof(*slot));
	for (size_t i = 0; host->valuestring[i]; i++)
		slot->host[i] = (char)(host->valuestring[i] >= 'A' && host->valuestring[i] <= 'Z'
		                               ? host->valuestring[i] + 32
		                               : host->valuestring[i]);
	if (slot->host[strlen(slot->host) - 1] == '.')
		slot->host[strlen(slot->host) - 1] = '\0';
	memcpy(slot->header, header->valuestring, strlen(header->valuestring) + 1);
	memcpy(slot->value, value->valuestring, len + 1);
	slot->value_len = len;
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->b[i].host, slot->host) && !strcasecmp(b->b[i].header, slot->header))
			return hutch_err_set(err, -EEXIST,
			                     "header binding '%.128s:%.64s' is given twice",
			                     slot->host, slot->header);
	b->n++;
	return 0;
}

/* An array replaces the set. */
static int bind_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                          struct hutch_err *err)
{
	struct hutch_net_bindings **b = FIELD(o, c, struct hutch_net_bindings *);
	struct hutch_net_bindings *nb = NULL;
	const cJSON *it;
	int r;

	if (!cJSON_IsArray(v))
		return hutch_err_set(
		        err, -EINVAL,
		        "field 'header_bindings' has the wrong type: expected an array "
		        "of {\"host\", \"header\", \"value\"} objects");
	r = hutch_net_bindings_new(&nb);
	if (r < 0)
		return hutch_err_set_errno(err, r, "allocate the header bindings");
	cJSON_ArrayForEach(it, v) {
		r = bind_one_json(it, nb, err);
		if (r < 0) {
			hutch_net_bindings_free(nb);
			return r;
		}
	}
	hutch_net_bindings_free(*b);
	*b = nb;
	return 0;
}

static void bind_to_json(const struct hutch_option *o, const struct hutch_config *c,
                         struct hutch_jw *w)
{
	const struct hutch_net_bindings *b = *CFIELD(o, c, struct hutch_net_bindings *);

	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; b && i < b->n; i++) {
		hutch_jw_open(w, NULL, '{');
		hutch_jw_str(w, "host", b->b[i].host);
		hutch_jw_str(w, "header", b->b[i].header);
		hutch_jw_close(w, '{');
	}
	hutch_jw_close(w, '[');
}

static void bind_text(const struct hutch_option *o, const struct hutch_config *c,
                      void (*emit)(void *ud, const char *s), void *ud)
{
	const struct hutch_net_bindings *b = *CFIELD(o, c, struct hutch_net_bindings *);
	char buf[HUTCH_NET_HOST_MAX + HUTCH_NET_HEADER_MAX + 2];

	for (size_t i = 0; b && i < b->n; i++) {
		snprintf(buf, sizeof(buf), "%s:%s", b->b[i].host, b->b[i].header);
		emit(ud, buf);
	}
}

const struct hutch_option_type hutch_opt_header_bindings = {
	.init = bind_init,
	.parse = bind_parse,
	.from_json = bind_from_json,
	.to_json = bind_to_json,
	.text = bind_text,
	.done = bind_done,
};
