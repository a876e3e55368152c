/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox option table: one row per option of struct hutch_config,
 * naming its API/JSON field, its CLI flag (and environment variable), its
 * type, default and help text, and where it lands in the struct. Every
 * reader and writer of options goes through it: hutch_config_init() and
 * _done(), hutch_config_set() (strings: CLI, environment), the typed JSON
 * setter (the API's POST /claim), hutch_config_to_json(), the CLI's parser
 * and --help (cli/args.c), the warm pool's key and claim body.
 *
 * Adding an option: a field in struct hutch_config, a row in options.c,
 * the docs. Nothing else, as long as an existing type fits and the code
 * that uses the value reads it from the struct.
 *
 * Pure: no syscalls; unit-tested in tests/unit/test_runtime.c.
 */
#ifndef HUTCH_OPTIONS_H
#define HUTCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "error.h"
#include "options-field.h"

/* The types; hutch_opt_script is text shown by its size only. */
extern const struct hutch_option_type hutch_opt_seconds, hutch_opt_bytes, hutch_opt_text,
        hutch_opt_script, hutch_opt_region, hutch_opt_instance_type, hutch_opt_network,
        hutch_opt_host_ports, hutch_opt_resolver, hutch_opt_net_pool, hutch_opt_listen,
        hutch_opt_image, hutch_opt_image_store, hutch_opt_snapshot,
        hutch_opt_publish /* publish.c */, hutch_opt_header_bindings /* netopt.c */,
        hutch_opt_access, hutch_opt_secrets, hutch_opt_egress,
        hutch_opt_workspace /* options-cloud.c */, hutch_opt_volumes /* volopt.c */,
        hutch_opt_switch /* options-field.c: on/off */;
/* access's values, NULL-terminated: "all", "files", "none". */
extern const char *const hutch_access_values[];

/* The table, in a fixed order (the pool key hashes its rows in it). */
const struct hutch_option *hutch_options(size_t *ret_n);
/* By API/JSON name, by CLI flag (without "--"); NULL if none. */
const struct hutch_option *hutch_option_find(const char *name);
const struct hutch_option *hutch_option_find_cli(const char *flag);

/* Set from a string; err says which option and why. */
int hutch_option_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                       struct hutch_err *err);
/* The same, the message naming the option as label ("--ttl") instead of
 * its API name (ttl_seconds): the CLI's errors name its flags. */
int hutch_option_parse_as(const struct hutch_option *o, struct hutch_config *c, const char *s,
                          const char *label, struct hutch_err *err);
/* Set from a JSON value; a value of the wrong type is -EINVAL. */
int hutch_option_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                           struct hutch_err *err);
/* Call emit(ud, text) for each value the option holds. */
void hutch_option_text(const struct hutch_option *o, const struct hutch_config *c,
                       void (*emit)(void *ud, const char *s), void *ud);
/* True if the option holds a value other than "unset" (text options). */
bool hutch_option_is_set(const struct hutch_option *o, const struct hutch_config *c);
/* Exchange the option's field between two configurations. */
void hutch_option_swap(const struct hutch_option *o, struct hutch_config *a,
                       struct hutch_config *b);

/* The options whose rows have all of flags, as a JSON object (flags 0:
 * every option not HUTCH_OPT_HIDDEN). NULL on allocation failure. */
cJSON *hutch_options_to_json(const struct hutch_config *c, unsigned flags);
/* o's member ("name": value) as hutch_config_write() writes it. */
void hutch_option_write(const struct hutch_option *o, const struct hutch_config *c,
                        struct hutch_jw *w);
/* Set every option in obj whose row has all of flags; an unknown field or
 * one without those flags is -EINVAL ("unknown field 'x'"). */
int hutch_options_from_json(struct hutch_config *c, const cJSON *obj, unsigned flags,
                            struct hutch_err *err);

#endif
