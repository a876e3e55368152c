/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the option type files share, below them (options-field.c): a row
 * of the option table (options.h) and its type, the row's field in struct
 * hutch_config, and the type of strings kept in a char array of the
 * struct.
 */
#ifndef HUTCH_OPTIONS_FIELD_H
#define HUTCH_OPTIONS_FIELD_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "error.h"
#include "jsonw.h"

/* Fixed when a sandbox is made: part of the warm pool's key (poolkey.c). */
#define HUTCH_OPT_POOL_KEY (1u << 0)
/* Given when a pooled sandbox is claimed (POST /claim, cli/pool.c). */
#define HUTCH_OPT_SESSION (1u << 1)
/* A creation with this option set is never served from a pool (it runs at
 * creation: setup script, on_create). */
#define HUTCH_OPT_NO_POOL (1u << 2)
/* The CLI's value is a file name; the option gets the file's text. */
#define HUTCH_OPT_CLI_FILE (1u << 3)
/* Not shown by hutch_config_to_json() (host-wide settings). */
#define HUTCH_OPT_HIDDEN (1u << 4)

struct hutch_option;

/* How one type of option is parsed, shown and freed (options.c). */
struct hutch_option_type {
	/* The default into the field. */
	void (*init)(const struct hutch_option *o, struct hutch_config *c);
	/* From a string (CLI, environment); a refused value changes nothing. */
	int (*parse)(const struct hutch_option *o, struct hutch_config *c, const char *s,
	             struct hutch_err *err);
	/* From a JSON value (the API), typed: numbers as numbers (NULL: a
	 * JSON string through parse). */
	int (*from_json)(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
	                 struct hutch_err *err);
	/* Write the value as a member of the object being written (a
	 * writer, not cJSON: state.json without libcjson, base/jsonw.h). */
	void (*to_json)(const struct hutch_option *o, const struct hutch_config *c,
	                struct hutch_jw *w);
	/* The value as text, one emit() per value (none for an unset one). */
	void (*text)(const struct hutch_option *o, const struct hutch_config *c,
	             void (*emit)(void *ud, const char *s), void *ud);
	/* Free what the field owns (NULL: nothing). */
	void (*done)(const struct hutch_option *o, struct hutch_config *c);
};

/* A row holds no pointer (issue 31: CLI start): pointers in a PIE are
 * relocated by the dynamic loader at every start of hutch, their table a
 * page of RELRO written each time. The short strings are in the row (""
 * is none; the unit test checks each keeps its NUL), the help text is an
 * offset into options.c's pool (hutch_option_help()), the type an index
 * (hutch_option_type()). */
#define HUTCH_OPT_NAME_MAX 32
struct hutch_option {
	char name[HUTCH_OPT_NAME_MAX]; /* API/JSON field, hutch_config_set() key */
	char cli[24];                  /* CLI long option without "--"; "": none */
	char env[24];                  /* environment variable; "": none */
	char metavar[24];              /* the CLI value's name in --help */
	char def_str[16];              /* strings: default; "": unset */
	uint64_t min, max;             /* numbers: range; text: max bytes */
	uint64_t def;                  /* numbers: default */
	uint32_t offset, size;         /* the field in struct hutch_config */
	unsigned flags;                /* HUTCH_OPT_* */
	uint16_t help;                 /* --help text (the default is appended) */
	uint8_t type;                  /* enum hutch_option_type_id */
	char cli_short;                /* CLI short option (-p); 0: none */
};

/* The row's type, its help text (options.c). */
const struct hutch_option_type *hutch_option_type(const struct hutch_option *o);
const char *hutch_option_help(const struct hutch_option *o);

#define FIELD(o, c, T)  ((T *)(void *)((char *)(c) + (o)->offset))
#define CFIELD(o, c, T) ((const T *)(const void *)((const char *)(c) + (o)->offset))

/* The field's string: set (truncated to the field), the default, to JSON, as text. */
void hutch_opt_chars_set(const struct hutch_option *o, struct hutch_config *c, const char *s);
void hutch_opt_chars_init(const struct hutch_option *o, struct hutch_config *c);
void hutch_opt_chars_to_json(const struct hutch_option *o, const struct hutch_config *c,
                             struct hutch_jw *w);
void hutch_opt_chars_text(const struct hutch_option *o, const struct hutch_config *c,
                          void (*emit)(void *ud, const char *s), void *ud);

#endif
