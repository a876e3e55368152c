/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The char-array string type of the option table (options-field.h):
 * region, resolver, address pool, the image's name and store. Below
 * options.c and options-image.c, which both use it. And the on/off type
 * (a bool field: "on" or "off" as text, true or false in JSON).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "options-field.h"

void hutch_opt_chars_set(const struct hutch_option *o, struct hutch_config *c, const char *s)
{
	snprintf(FIELD(o, c, char), o->size, "%s", s);
}

void hutch_opt_chars_init(const struct hutch_option *o, struct hutch_config *c)
{
	hutch_opt_chars_set(o, c, o->def_str);
}

void hutch_opt_chars_to_json(const struct hutch_option *o, const struct hutch_config *c,
                             struct hutch_jw *w)
{
	hutch_jw_str(w, o->name, CFIELD(o, c, char));
}

void hutch_opt_chars_text(const struct hutch_option *o, const struct hutch_config *c,
                          void (*emit)(void *ud, const char *s), void *ud)
{
	emit(ud, CFIELD(o, c, char));
}

/* ---- on/off: a bool; "on"/"off" (also "true"/"false", "1"/"0"), JSON true/false ---- */

static void switch_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, bool) = o->def != 0;
}

static int switch_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	static const char *const on[] = { "on", "true", "1" }, *const off[] = { "off", "false",
		                                                                "0" };

	for (size_t i = 0; i < 3; i++)
		if (!strcmp(s, on[i]) || !strcmp(s, off[i])) {
			*FIELD(o, c, bool) = !strcmp(s, on[i]);
			return 0;
		}
	return hutch_err_set(err, -EINVAL, "invalid %s '%.32s': on or off", o->name, s);
}

static int switch_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                            struct hutch_err *err)
{
	if (!cJSON_IsBool(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected true or false",
		                     o->name);
	*FIELD(o, c, bool) = cJSON_IsTrue(v);
	return 0;
}

static void switch_to_json(const struct hutch_option *o, const struct hutch_config *c,
                           struct hutch_jw *w)
{
	hutch_jw_bool(w, o->name, *CFIELD(o, c, bool));
}

static void switch_text(const struct hutch_option *o, const struct hutch_config *c,
                        void (*emit)(void *ud, const char *s), void *ud)
{
	emit(ud, *CFIELD(o, c, bool) ? "on" : "off");
}

const struct hutch_option_type hutch_opt_switch = {
	.init = switch_init,
	.parse = switch_parse,
	.from_json = switch_from_json,
	.to_json = switch_to_json,
	.text = switch_text,
};
