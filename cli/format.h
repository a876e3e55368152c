/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ls --filter and --format, as docker has them, over the one sandbox JSON
 * (sandbox-json.c), and the templates of stats --format over its samples
 * (verb-stats.c's fields); pure, so tests/unit/test_cli.c drives it.
 *
 * A filter is KEY=VALUE: id (a prefix), status, network (a mode, or the
 * whole spec), instance-type, region, description (a substring). Filters
 * of one key are alternatives, of different keys all must hold.
 *
 * A template is text with actions, a subset of Go's text/template as
 * docker uses it: {{.Field}}, {{.Config.key}}, {{.}}, {{json ARG}},
 * {{upper ARG}}, {{lower ARG}}; a leading "table " prints a header row and
 * aligns the columns (cells end at tabs); "\t" and "\n" written as two
 * characters are a tab and a newline. "json" alone is {{json .}}, "table"
 * alone ls's own columns.
 */
#ifndef HUTCH_FORMAT_H
#define HUTCH_FORMAT_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"

#define HUTCH_CLI_FILTERS_MAX 32

struct hutch_cli_filters {
	size_t n;
	struct {
		unsigned key; /* which filter (format.c) */
		const char *value;
	} f[HUTCH_CLI_FILTERS_MAX];
};

/* specs: a JSON array of "KEY=VALUE" strings (NULL: no filter); the values
 * point into it. -EINVAL with a message naming the --filter on error. */
int hutch_cli_filters_parse(const cJSON *specs, struct hutch_cli_filters *ret,
                            struct hutch_err *err);
/* Every filter's KEY=VALUE for completion, a space before each: the values
 * where they are few (status, network, instance-type), else "KEY=". */
void hutch_cli_filter_words(FILE *f);
/* Does the sandbox (its JSON) pass every filter? */
bool hutch_cli_filters_match(const struct hutch_cli_filters *f, const cJSON *sandbox);

struct hutch_cli_tmpl;

/* A field's text function: the string it makes of the whole object,
 * malloc'ed; NULL: out of memory. */
typedef char *hutch_cli_field_text(const cJSON *o);

/* What {{.Name}} prints: the JSON value at "key" (in the object "in", "":
 * at the top), or, when text is set (not 0), the string its set's texts[text]
 * makes of the whole object ({{json .Name}} then gives the JSON value at
 * key if there is one). The strings are in the row, not pointers: a table
 * without pointers is read-only data the dynamic loader does not relocate,
 * at every start of hutch (issue 31: CLI start, docs/performance.md). */
struct hutch_cli_field {
	char name[16], header[20];
	char key[16], in[8];
	unsigned char text; /* the index in its set's texts[]; 0: none */
};

/* The fields of one verb's objects; fields ends with a zeroed row. */
struct hutch_cli_fields {
	const struct hutch_cli_field *fields;
	hutch_cli_field_text *const *texts; /* the rows' text functions ([0] unused) */
	const char *names;                  /* for messages: ".ID, .Status, ..." */
	const char *table;                  /* what "table" alone is */
	const char *sub;  /* the one field with keys below it (.Config.KEY), or NULL */
	const char *verb; /* whose --json names those keys */
};

/* ls's: a sandbox as ls --json gives it. */
extern const struct hutch_cli_fields hutch_cli_sandbox_fields;

/* Parse format over set's fields; *ret is freed with hutch_cli_tmpl_free().
 * -EINVAL with a message saying where and what is wrong, -ENOMEM. */
int hutch_cli_tmpl_parse_fields(const char *format, const struct hutch_cli_fields *set,
                                struct hutch_cli_tmpl **ret, struct hutch_err *err);
/* The same over hutch_cli_sandbox_fields (ls). */
int hutch_cli_tmpl_parse(const char *format, struct hutch_cli_tmpl **ret, struct hutch_err *err);
struct hutch_cli_tmpl *hutch_cli_tmpl_free(struct hutch_cli_tmpl *t);
/* Print the template for each of n objects (a header first for a
 * table, then the columns aligned); -ENOMEM. */
int hutch_cli_tmpl_print(const struct hutch_cli_tmpl *t, cJSON *const *sandboxes, size_t n,
                         FILE *f);

/* A sandbox's "ports" (ls --json) as docker ps shows them:
 * "127.0.0.1:8080->80/tcp, ..."; "" if none. */
void hutch_cli_ports_text(const cJSON *ports, char *buf, size_t size);

#endif
