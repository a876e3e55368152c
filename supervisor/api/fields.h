/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one check of a JSON request body's fields (pure, unit-tested): a
 * declarative spec per body (name, type, required, bounds, message) checked
 * once, before the handler reads the values. Bodies come from any local
 * client and are hostile: strictly typed, bounded, unknown fields refused
 * so that typos surface.
 */
#ifndef HUTCH_FIELDS_H
#define HUTCH_FIELDS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"

enum hutch_field_type {
	HUTCH_FIELD_STRING,
	HUTCH_FIELD_NUMBER,  /* finite, within [min, max] */
	HUTCH_FIELD_INTEGER, /* a whole number within [min, max] */
	HUTCH_FIELD_ARRAY,
	HUTCH_FIELD_OBJECT,
	HUTCH_FIELD_BOOL,
};

#define HUTCH_FIELD_REQUIRED (1u << 0) /* absent: "missing '<name>'" (or msg) */
#define HUTCH_FIELD_NULLABLE (1u << 1) /* null counts as absent */
#define HUTCH_FIELD_NONEMPTY (1u << 2) /* a string: "" is refused like a wrong type */

struct hutch_field {
	const char *name;
	enum hutch_field_type type;
	unsigned flags;  /* HUTCH_FIELD_* */
	double min, max; /* numbers */
	/* The message for a wrong type or value (and, with REQUIRED, a
	 * missing field when it contains "missing"); "{max}" in it stands for
	 * max (%g, or %.0f for a whole number); NULL: "'<name>' must be a string"
	 * (a number, an array, ...). */
	const char *msg;
};

/* Unknown fields are listed with the known ones: "unknown field 'x'
 * (known: a, b)", the name cut at 64 bytes; without it: "unknown field
 * 'x'". */
#define HUTCH_FIELDS_LIST_KNOWN (1u << 0)

/* Check the members of the JSON object o against spec (n rows): a key
 * given twice (in o or any object below it: cJSON keeps both and lookups
 * take the first) first, then unknown fields, then every row in order. 0,
 * or -EINVAL with err filled. */
int hutch_fields_check(const cJSON *o, const struct hutch_field *spec, size_t n, unsigned flags,
                       struct hutch_err *err);

/* Check a JSON body's text, before cJSON parses it, for a NUL byte,
 * escaped (\u0000) or raw: cJSON decodes it into the string, and every C
 * string after it ends there ("safe.txt\u0000/../x" was "safe.txt").
 * 0, or -EINVAL with err naming the top-level field it is in. */
int hutch_fields_check_text(const char *text, size_t len, struct hutch_err *err);

#endif
