/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the option type files share (options.c, options-image.c): a row's
 * field in struct hutch_config, and the type of strings kept in a char
 * array of the struct.
 */
#ifndef HUTCH_OPTIONS_INTERNAL_H
#define HUTCH_OPTIONS_INTERNAL_H

#include "options.h"

#define FIELD(o, c, T)  ((T *)(void *)((char *)(c) + (o)->offset))
#define CFIELD(o, c, T) ((const T *)(const void *)((const char *)(c) + (o)->offset))

/* The field's string: set (truncated to the field), the default, to JSON, as text. */
void hutch_opt_chars_set(const struct hutch_option *o, struct hutch_config *c, const char *s);
void hutch_opt_chars_init(const struct hutch_option *o, struct hutch_config *c);
void hutch_opt_chars_to_json(const struct hutch_option *o, const struct hutch_config *c,
                             cJSON *obj);
void hutch_opt_chars_text(const struct hutch_option *o, const struct hutch_config *c,
                          void (*emit)(void *ud, const char *s), void *ud);

#endif
