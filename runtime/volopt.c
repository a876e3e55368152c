/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "volumes" option type (-v, --volume, the API's "volumes"): one spec
 * per value (volume.h), repeatable; an array of spec strings in JSON,
 * which replaces the set. Its row is in options.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "config.h"
#include "options.h"
#include "volume.h"

/* ---- the option type: each value adds one; JSON: an array of specs ---- */

static void volumes_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, struct hutch_volumes *) = NULL;
}

static void volumes_done(const struct hutch_option *o, struct hutch_config *c)
{
	struct hutch_volumes **set = FIELD(o, c, struct hutch_volumes *);

	free(*set);
	*set = NULL;
}

static int add_one(const char *name, struct hutch_volumes **set, const char *s,
                   struct hutch_err *err)
{
	struct hutch_volume v;
	int r;

	r = hutch_volume_parse_as(name, s, &v, err);
	if (r < 0)
		return r;
	if (!*set && !(*set = calloc(1, sizeof(**set))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	return hutch_volumes_add(name, *set, &v, err);
}

static int volumes_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                         struct hutch_err *err)
{
	return add_one(o->name, FIELD(o, c, struct hutch_volumes *), s, err);
}

/* An array of specs (strings) replaces the set. */
static int volumes_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                             struct hutch_err *err)
{
	struct hutch_volumes **set = FIELD(o, c, struct hutch_volumes *), *tmp = NULL;
	const cJSON *it;
	int r = 0;

	if (!cJSON_IsArray(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected an array of strings "
		                     "such as \"/srv/data:/data\"",
		                     o->name);
	cJSON_ArrayForEach(it, v) {
		if (!cJSON_IsString(it))
			r = hutch_err_set(err, -EINVAL,
			                  "field '%s' has the wrong type: expected an array of "
			                  "strings such as \"/srv/data:/data\"",
			                  o->name);
		else
			r = add_one(o->name, &tmp, it->valuestring, err);
		if (r < 0) {
			free(tmp);
			return r;
		}
	}
	free(*set);
	*set = tmp;
	return 0;
}

static void volumes_to_json(const struct hutch_option *o, const struct hutch_config *c,
                            struct hutch_jw *w)
{
	const struct hutch_volumes *set = *CFIELD(o, c, struct hutch_volumes *);
	char buf[HUTCH_VOLUME_SPEC_MAX];

	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; set && i < set->n; i++) {
		hutch_volume_text(&set->v[i], buf, sizeof(buf));
		hutch_jw_str(w, NULL, buf);
	}
	hutch_jw_close(w, '[');
}

static void volumes_text(const struct hutch_option *o, const struct hutch_config *c,
                         void (*emit)(void *ud, const char *s), void *ud)
{
	const struct hutch_volumes *set = *CFIELD(o, c, struct hutch_volumes *);
	char buf[HUTCH_VOLUME_SPEC_MAX];

	for (size_t i = 0; set && i < set->n; i++) {
		hutch_volume_text(&set->v[i], buf, sizeof(buf));
		emit(ud, buf);
	}
}

const struct hutch_option_type hutch_opt_volumes = {
	.init = volumes_init,
	.parse = volumes_parse,
	.from_json = volumes_from_json,
	.to_json = volumes_to_json,
	.text = volumes_text,
	.done = volumes_done,
};
