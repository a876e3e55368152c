/* SPDX-License-Identifier: Apache-2.0 */
/* Request body fields; see fields.h. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "fields.h"
#include "util.h"

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
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "unknown field '%s'",
		                           name);
	for (size_t i = 0; i < n && len < sizeof(known); i++)
		len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", i ? ", " : "",
		                        spec[i].name);
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
	                           "unknown field '%.64s' (known: %s)", name, known);
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
		return f->type == HUTCH_FIELD_NUMBER ||
		       v->valuedouble == hutch_round(v->valuedouble);
	case HUTCH_FIELD_ARRAY:
		return cJSON_IsArray(v);
	case HUTCH_FIELD_OBJECT:
		return cJSON_IsObject(v);
	case HUTCH_FIELD_BOOL:
		return cJSON_IsBool(v);
	}
	return false;
}

static int check_one(const cJSON *o, const struct hutch_field *f, struct hutch_err *err)
{
	static const char *const types[] = {
		[HUTCH_FIELD_STRING] = "a string",        [HUTCH_FIELD_NUMBER] = "a number",
		[HUTCH_FIELD_INTEGER] = "a whole number", [HUTCH_FIELD_ARRAY] = "an array",
		[HUTCH_FIELD_OBJECT] = "an object",       [HUTCH_FIELD_BOOL] = "true or false",
	};
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->name);
	const char *at;

	if (v && cJSON_IsNull(v) && (f->flags & HUTCH_FIELD_NULLABLE))
		v = NULL;
	if (!v) {
		if (!(f->flags & HUTCH_FIELD_REQUIRED))
			return 0;
		if (f->msg && strstr(f->msg, "missing"))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "%s", f->msg);
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "missing '%s'", f->name);
	}
	if (value_ok(f, v))
		return 0;
	if (f->msg && (at = strstr(f->msg, "{max}")))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           f->type == HUTCH_FIELD_INTEGER ? "%.*s%.0f%s"
		                                                          : "%.*s%g%s",
		                           (int)(at - f->msg), f->msg, f->max, at + 5);
	if (f->msg)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "%s", f->msg);
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "'%s' must be %s", f->name,
	                           types[f->type]);
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The first name that o (an object) holds twice, or NULL; -ENOMEM as
 * *oom. cJSON keeps every member and lookups take the first, so a second
 * "cmd" or "path" was silently ignored (issue 18 #6). Sorted: a body of
 * many keys costs n log n, not n squared. */
static const char *duplicate_in(const cJSON *o, bool *oom)
{
	_cleanup_free_ const cJSON **names = NULL;
	const cJSON *it;
	size_t n = 0, i = 0;

	cJSON_ArrayForEach(it, o)
		n++;
	if (n < 2)
		return NULL;
	names = malloc(n * sizeof(*names));
	if (!names) {
		*oom = true;
		return NULL;
	}
	cJSON_ArrayForEach(it, o)
		names[i++] = it;
	qsort(names, n, sizeof(*names), by_name);
	for (i = 1; i < n; i++)
		if (!strcmp(names[i - 1]->string, names[i]->string))
			return names[i]->string;
	return NULL;
}

/* A duplicate key in o or any object below it; field names the member of
 * the body it belongs to (NULL at the top). */
static int check_duplicates(const cJSON *o, const char *field, int depth, struct hutch_err *err)
{
	bool oom = false;
	const char *dup = cJSON_IsObject(o) ? duplicate_in(o, &oom) : NULL;
	const cJSON *it;
	int r;

	if (oom)
		return hutch_err_set(err, -ENOMEM, "out of memory checking the request body");
	if (dup && !field)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "duplicate field '%.64s' in the request body: send each "
		                           "field once",
		                           dup);
	if (dup)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "duplicate key '%.64s' in '%.64s': send each key once",
		                           dup, field);
	cJSON_ArrayForEach(it, o) {
		if (!cJSON_IsObject(it) && !cJSON_IsArray(it))
			continue;
		r = check_duplicates(it, depth == 0 ? it->string : field, depth + 1, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int hutch_fields_check_text(const char *text, size_t len, struct hutch_err *err)
{
	const char *str = NULL, *last = NULL, *key = NULL;
	size_t last_len = 0, key_len = 0;
	bool in_str = false, expect_name = false, str_is_name = false;
	int depth = 0;

	/* Only strings hold escapes, and at the top level of the body's
	 * object a string is a member's name where a name is due (after '{'
	 * or ','), else its value; so this much lexing finds a NUL and the
	 * member it is in. cJSON parses the text itself. */
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		/* (A NUL outside strings is invalid JSON: cJSON says where.) */
		bool nul =
		        in_str && (c == '\0' || (c == '\\' && i + 5 < len && text[i + 1] == 'u' &&
		                                 !memcmp(text + i + 2, "0000", 4)));

		if (nul && in_str && depth >= 1 && !(depth == 1 && str_is_name) && key)
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'%.*s' contains a NUL byte (\\u0000), which would cut "
			        "it short: remove it (file contents with NUL bytes "
			        "travel base64-encoded, or raw through /files)",
			        (int)(key_len < 64 ? key_len : 64), key);
		if (nul)
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "the request body has a NUL byte (\\u0000) at byte %zu, "
			        "%s: remove it",
			        i,
			        in_str && depth == 1 && str_is_name ? "in a field's name"
			                                            : "outside any field");
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"') {
				in_str = false;
				last = str;
				last_len = (size_t)(text + i - str);
			}
		} else if (c == '"') {
			in_str = true;
			str = text + i + 1;
			str_is_name = depth == 1 && expect_name;
		} else if (c == '{' || c == '[') {
			expect_name = ++depth == 1 && c == '{';
		} else if (c == '}' || c == ']') {
			depth--;
		} else if (c == ',' && depth == 1) {
			expect_name = true;
		} else if (c == ':' && depth == 1 && last) {
			key = last;
			key_len = last_len;
			expect_name = false;
		}
	}
	return 0;
}

int hutch_fields_check(const cJSON *o, const struct hutch_field *spec, size_t n, unsigned flags,
                       struct hutch_err *err)
{
	const cJSON *it;
	int r;

	r = check_duplicates(o, NULL, 0, err);
	if (r < 0)
		return r;
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
