/* SPDX-License-Identifier: Apache-2.0 */
/* JSON written as cJSON_PrintUnformatted() prints it; see jsonw.h. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "jsonw.h"

void hutch_jw_init(struct hutch_jw *w, size_t cap)
{
	hutch_buf_init(&w->b, cap);
	w->r = 0;
	w->depth = 0;
	w->first = true;
}

static void put(struct hutch_jw *w, const char *s, size_t n)
{
	if (w->r >= 0)
		w->r = hutch_buf_append(&w->b, s, n);
}

/* The separator and the key of the next value. */
static void member(struct hutch_jw *w, const char *key)
{
	if (!w->first)
		put(w, ",", 1);
	w->first = false;
	if (key && w->r >= 0) {
		w->r = hutch_buf_append_json_str(&w->b, key);
		put(w, ":", 1);
	}
}

void hutch_jw_open(struct hutch_jw *w, const char *key, char brace)
{
	member(w, key);
	put(w, &brace, 1);
	if (++w->depth > HUTCH_JW_DEPTH && w->r >= 0)
		w->r = -EINVAL;
	w->first = true;
}

void hutch_jw_close(struct hutch_jw *w, char brace)
{
	char end = brace == '{' ? '}' : ']';

	put(w, &end, 1);
	if (w->depth-- == 0 && w->r >= 0)
		w->r = -EINVAL;
	w->first = false;
}

void hutch_jw_str(struct hutch_jw *w, const char *key, const char *s)
{
	if (!s)
		return;
	member(w, key);
	if (w->r >= 0)
		w->r = hutch_buf_append_json_str(&w->b, s);
}

/* cJSON's compare_double(): equal within DBL_EPSILON of the larger. */
static bool close_enough(double a, double b)
{
	double max = fabs(a) > fabs(b) ? fabs(a) : fabs(b);

	return fabs(a - b) <= max * DBL_EPSILON;
}

void hutch_jw_num(struct hutch_jw *w, const char *key, double d)
{
	char num[32];
	double back = 0;
	int n;

	/* libcjson 1.7.15's print_number(): no integer case (-0.0 is "-0") */
	if (isnan(d) || isinf(d)) {
		n = snprintf(num, sizeof(num), "null");
	} else {
		n = snprintf(num, sizeof(num), "%1.15g", d);
		if (sscanf(num, "%lg", &back) != 1 || !close_enough(back, d))
			n = snprintf(num, sizeof(num), "%1.17g", d);
	}
	member(w, key);
	put(w, num, (size_t)n);
}

void hutch_jw_bool(struct hutch_jw *w, const char *key, bool v)
{
	member(w, key);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void hutch_jw_raw(struct hutch_jw *w, const char *key, const char *json)
{
	if (!json)
		return;
	member(w, key);
	put(w, json, strlen(json));
}

void hutch_jw_null(struct hutch_jw *w, const char *key)
{
	member(w, key);
	put(w, "null", 4);
}

int hutch_jw_finish(struct hutch_jw *w, char **ret, size_t *ret_len)
{
	int r = w->r;

	if (r >= 0 && w->depth)
		r = -EINVAL;
	if (r >= 0 && w->b.truncated)
		r = -E2BIG;
	if (r >= 0)
		r = hutch_buf_append(&w->b, "", 1); /* the NUL */
	if (r >= 0 && w->b.truncated)
		r = -E2BIG;
	if (r < 0) {
		hutch_jw_done(w);
		return r;
	}
	*ret = w->b.data;
	*ret_len = w->b.len - 1;
	w->b.data = NULL;
	hutch_jw_done(w);
	return 0;
}

/* n tabs: cJSON_Print()'s indent at depth n. */
static void indent(struct hutch_jw *w, unsigned n)
{
	while (n--)
		put(w, "\t", 1);
}

/* One byte of compact text outside a string, as cJSON_Print() prints
 * it; kind[] says what each open level is. print_object(): "{\n", each
 * member at depth tabs, ":\t", ",\n" between, "\n" and depth - 1 tabs
 * before "}" (an empty object: "{\n" and the tabs); print_array(): ", "
 * between, no line breaks. */
static void pretty_byte(struct hutch_jw *w, char *kind, const char *p, const char *end)
{
	char c = *p;

	if (c == '{' || c == '[') {
		if (w->depth >= HUTCH_JW_DEPTH) {
			w->r = -EINVAL;
			return;
		}
		kind[w->depth++] = c;
		put(w, p, 1);
		if (c == '{') {
			put(w, "\n", 1);
			if (p + 1 < end && p[1] != '}')
				indent(w, w->depth);
		}
	} else if (c == '}' || c == ']') {
		if (!w->depth || kind[w->depth - 1] != (c == '}' ? '{' : '[')) {
			w->r = -EINVAL;
			return;
		}
		w->depth--;
		if (c == '}' && p[-1] != '{')
			put(w, "\n", 1);
		if (c == '}')
			indent(w, w->depth);
		put(w, p, 1);
	} else if (c == ',' && w->depth) {
		put(w, kind[w->depth - 1] == '{' ? ",\n" : ", ", 2);
		if (kind[w->depth - 1] == '{')
			indent(w, w->depth);
	} else if (c == ':') {
		put(w, ":\t", 2);
	} else {
		put(w, p, 1);
	}
}

int hutch_jw_pretty(const char *json, size_t len, char **ret, size_t *ret_len)
{
	const char *p = json, *end = json + len;
	char kind[HUTCH_JW_DEPTH];
	struct hutch_jw w;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	while (p < end && w.r >= 0) {
		const char *q = p + 1;

		if (*p != '"') {
			pretty_byte(&w, kind, p++, end);
			continue;
		}
		/* a string, whole: its escapes are the writer's */
		while (q < end && *q != '"')
			q += *q == '\\' ? 2 : 1;
		if (q >= end) {
			hutch_jw_done(&w);
			return -EINVAL;
		}
		put(&w, p, (size_t)(q + 1 - p));
		p = q + 1;
	}
	return hutch_jw_finish(&w, ret, ret_len);
}

struct cJSON *hutch_jw_to_cjson(struct hutch_jw *w)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	if (hutch_jw_finish(w, &text, &len) < 0)
		return NULL;
	return cJSON_ParseWithLength(text, len);
}

void hutch_jw_done(struct hutch_jw *w)
{
	hutch_buf_done(&w->b);
	w->r = -EINVAL;
}
