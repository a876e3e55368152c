/* SPDX-License-Identifier: Apache-2.0 */
/* Request body fields; see fields.h. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fields.h"

static const struct hutch_field *find(const struct hutch_field *spec, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(spec[i].name, name))
			return &spec[i];
	return NULL;
}

static int unknown(const char *name, const struct hutch_field *spec, size_t n, unsigned flags,
                   struct hutch_err *err)
{
	char known[256] = "";
	size_t len = 0;

	if (!(flags & HUTCH_FIELDS_LIST_KNOWN))
		return hutch_err_set(err, -EINVAL, "unknown field '%s'", name);
	for (size_t i = 0; i < n && len < sizeof(known); i++)
		len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", i ? ", " : "",
		                        spec[i].name);
	return hutch_err_set(err, -EINVAL, "unknown field '%.64s' (known: %s)", name, known);
}

static bool value_ok(const struct hutch_field *f, const cJSON *v)
{
	switch (f->type) {
	case HUTCH_FIELD_STRING:
		return cJSON_IsString(v) && (!(f->flags & HUTCH_FIELD_NONEMPTY) || *v->valuestring);
	case HUTCH_FIELD_NUMBER:
	case HUTCH_FIELD_INTEGER:
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < f->min ||
		    v->valuedouble > f->max)
			return false;
		return f->type == HUTCH_FIELD_NUMBER || v->valuedouble == floor(v->valuedouble);
	case HUTCH_FIELD_ARRAY:
		return cJSON_IsArray(v);
	case HUTCH_FIELD_OBJECT:
		return cJSON_IsObject(v);
	}
	return false;
}

static int check_one(const cJSON *o, const struct hutch_field *f, struct hutch_err *err)
{
	static const char *const types[] = {
		[HUTCH_FIELD_STRING] = "a string",        [HUTCH_FIELD_NUMBER] = "a number",
		[HUTCH_FIELD_INTEGER] = "a whole number", [HUTCH_FIELD_ARRAY] = "an array",
		[HUTCH_FIELD_OBJECT] = "an object",
	};
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->name);
	const char *at;

	if (v && cJSON_IsNull(v) && (f->flags & HUTCH_FIELD_NULLABLE))
		v = NULL;
	if (!v) {
		if (!(f->flags & HUTCH_FIELD_REQUIRED))
			return 0;
		if (f->msg && strstr(f->msg, "missing"))
			return hutch_err_set(err, -EINVAL, "%s", f->msg);
		return hutch_err_set(err, -EINVAL, "missing '%s'", f->name);
	}
	if (value_ok(f, v))
		return 0;
	if (f->msg && (at = strstr(f->msg, "{max}")))
		return hutch_err_set(err, -EINVAL,
		                     f->type == HUTCH_FIELD_INTEGER ? "%.*s%.0f%s" : "%.*s%g%s",
		                     (int)(at - f->msg), f->msg, f->max, at + 5);
	if (f->msg)
		return hutch_err_set(err, -EINVAL, "%s", f->msg);
	return hutch_err_set(err, -EINVAL, "'%s' must be %s", f->name, types[f->type]);
}

int hutch_fields_check(const cJSON *o, const struct hutch_field *spec, size_t n, unsigned flags,
                       struct hutch_err *err)
{
	const cJSON *it;
	int r;

	cJSON_ArrayForEach(it, o) {
		if (!find(spec, n, it->string))
			return unknown(it->string, spec, n, flags, err);
	}
	for (size_t i = 0; i < n; i++) {
		r = check_one(o, &spec[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}
