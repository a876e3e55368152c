/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small bounded JSON writer whose text is byte for byte what
 * cJSON_PrintUnformatted() prints for the same tree: members in the order
 * written, strings escaped as cJSON escapes them (hutch_buf_append_json_str():
 * every byte in is a byte out, only '"', '\\' and those below 0x20
 * escaped), numbers as cJSON's print_number() formats a double. It lets
 * the hot path (state.json's records, the journal's lines) write JSON
 * without loading libcjson (base/cjson-dl.c); whatever parses JSON still
 * uses the library.
 *
 * Every call takes the member's key (NULL: a value in an array, or the
 * top); the first failure (no memory, the cap passed) sticks and is
 * returned by hutch_jw_finish(), so callers write a whole record and check
 * once. Nesting is at most HUTCH_JW_DEPTH levels.
 */
#ifndef HUTCH_JSONW_H
#define HUTCH_JSONW_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define HUTCH_JW_DEPTH 32

struct hutch_jw {
	struct hutch_buf b;
	int r;          /* the first failure, or 0 */
	unsigned depth; /* open objects and arrays */
	bool first;     /* nothing written yet at this depth */
};

/* A writer of at most cap bytes (a record over it fails with -E2BIG). */
void hutch_jw_init(struct hutch_jw *w, size_t cap);
/* '{' or '[' opened as key's value; hutch_jw_close() ends it. */
void hutch_jw_open(struct hutch_jw *w, const char *key, char brace);
void hutch_jw_close(struct hutch_jw *w, char brace);
/* A string; s NULL writes nothing, as cJSON_AddStringToObject() adds
 * nothing for it. */
void hutch_jw_str(struct hutch_jw *w, const char *key, const char *s);
/* A number, as libcjson 1.7.15 prints a double: %1.15g unless that does
 * not read back (within DBL_EPSILON), then %1.17g; NaN and infinities
 * null (tests/unit/test_jsonw.c compares it with the library's). */
void hutch_jw_num(struct hutch_jw *w, const char *key, double d);
void hutch_jw_bool(struct hutch_jw *w, const char *key, bool v);
/* A value printed elsewhere as cJSON_PrintUnformatted() prints it (a
 * tree's text, written as the tree would be); NULL writes nothing. */
void hutch_jw_raw(struct hutch_jw *w, const char *key, const char *json);
void hutch_jw_null(struct hutch_jw *w, const char *key);
/* The text (NUL-terminated, the caller's to free) and its length, or
 * -ENOMEM, -E2BIG (over the cap) or -EINVAL (unbalanced); the writer is
 * done either way. */
int hutch_jw_finish(struct hutch_jw *w, char **ret, size_t *ret_len);
/* Compact text as this writer (or cJSON_PrintUnformatted()) prints it,
 * laid out as cJSON_Print() lays out the same tree: a member a line,
 * indented by a tab a level (objects and arrays both count), "key":<TAB>,
 * an array's values on one line after ", " (create --json without
 * libcjson). The text (NUL-terminated, the caller's to free) and its
 * length, or -ENOMEM, -E2BIG (over HUTCH_JW_CJSON_MAX) or -EINVAL (not
 * such text: an open string, nesting past HUTCH_JW_DEPTH). */
int hutch_jw_pretty(const char *json, size_t len, char **ret, size_t *ret_len);
/* The text parsed by libcjson (loading it), for a caller that needs a
 * tree (GET /status, create --json): one writer for both. The writer is
 * done; NULL on any failure. A cap of HUTCH_JW_CJSON_MAX fits them all. */
#define HUTCH_JW_CJSON_MAX (1u << 20)
struct cJSON;
struct cJSON *hutch_jw_to_cjson(struct hutch_jw *w);
void hutch_jw_done(struct hutch_jw *w);

#endif
