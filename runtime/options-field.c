/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The char-array string type of the option table (options-field.h):
 * region, resolver, address pool, the image's name and store. Below
 * options.c and options-image.c, which both use it.
 */
#include <stdio.h>

#include <cjson/cJSON.h>

#include "options-field.h"

void hutch_opt_chars_set(const struct hutch_option *o, struct hutch_config *c, const char *s)
{
	snprintf(FIELD(o, c, char), o->size, "%s", s);
}

void hutch_opt_chars_init(const struct hutch_option *o, struct hutch_config *c)
{
	hutch_opt_chars_set(o, c, o->def_str ? o->def_str : "");
}

void hutch_opt_chars_to_json(const struct hutch_option *o, const struct hutch_config *c, cJSON *obj)
{
	cJSON_AddStringToObject(obj, o->name, CFIELD(o, c, char));
}

void hutch_opt_chars_text(const struct hutch_option *o, const struct hutch_config *c,
                          void (*emit)(void *ud, const char *s), void *ud)
{
	emit(ud, CFIELD(o, c, char));
}
