/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "publish" option type (-p, the API's "publish": ports published out
 * of the sandbox), one spec per value (portspec.h), an array of specs in
 * JSON. Its row is in options.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "options.h"
#include "portspec.h"

/* ---- the option type: each value adds one; JSON: an array of specs ---- */

static void spec_text(const struct hutch_port_spec *p, char *buf, size_t size)
{
	char host[HUTCH_PORT_ADDR_MAX + 10];

	hutch_port_spec_host(p, 0, host, sizeof(host));
	snprintf(buf, size, "%s:%u", host, p->sandbox_port);
}

static int publish_add(const struct hutch_option *o, struct hutch_config *c,
                       const struct hutch_port_spec *p, struct hutch_err *err)
{
	for (size_t i = 0; i < c->npublish; i++) {
		const struct hutch_port_spec *q = &c->publish[i];
		if (p->host_port && q->host_port == p->host_port &&
		    !strcmp(q->host_addr, p->host_addr))
			return hutch_err_set(err, -EINVAL,
			                     "invalid %s: host port %s:%u is given twice", o->name,
			                     p->host_addr, p->host_port);
	}
	if (c->npublish >= HUTCH_PUBLISH_MAX)
		return hutch_err_set(err, -E2BIG, "invalid %s: at most %d published ports", o->name,
		                     HUTCH_PUBLISH_MAX);
	c->publish[c->npublish++] = *p;
	return 0;
}

static void publish_init(const struct hutch_option *o, struct hutch_config *c)
{
	(void)o;
	c->npublish = 0;
}

static int publish_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                         struct hutch_err *err)
{
	struct hutch_port_spec p;

	if (hutch_port_spec_parse_as(o->name, s, &p, err) < 0)
		return err->code;
	return publish_add(o, c, &p, err);
}

/* An array of specs (strings) replaces the set. */
static int publish_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                             struct hutch_err *err)
{
	struct hutch_config tmp = { .npublish = 0 };
	const cJSON *it;
	int r;

	if (!cJSON_IsArray(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected an array of strings",
		                     o->name);
	cJSON_ArrayForEach(it, v) {
		if (!cJSON_IsString(it))
			return hutch_err_set(err, -EINVAL,
			                     "field '%s' has the wrong type: expected an array of "
			                     "strings such as \"8080:80\"",
			                     o->name);
		r = publish_parse(o, &tmp, it->valuestring, err);
		if (r < 0)
			return r;
	}
	c->npublish = tmp.npublish;
	memcpy(c->publish, tmp.publish, sizeof(c->publish));
	return 0;
}

static void publish_to_json(const struct hutch_option *o, const struct hutch_config *c,
                            struct hutch_jw *w)
{
	char buf[HUTCH_PORTSPEC_MAX];

	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; i < c->npublish; i++) {
		spec_text(&c->publish[i], buf, sizeof(buf));
		hutch_jw_str(w, NULL, buf);
	}
	hutch_jw_close(w, '[');
}

static void publish_text(const struct hutch_option *o, const struct hutch_config *c,
                         void (*emit)(void *ud, const char *s), void *ud)
{
	char buf[HUTCH_PORTSPEC_MAX];

	(void)o;
	for (size_t i = 0; i < c->npublish; i++) {
		spec_text(&c->publish[i], buf, sizeof(buf));
		emit(ud, buf);
	}
}

const struct hutch_option_type hutch_opt_publish = {
	.init = publish_init,
	.parse = publish_parse,
	.from_json = publish_from_json,
	.to_json = publish_to_json,
	.text = publish_text,
};
