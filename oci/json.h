/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded getters of config.json's fields (oci/spec.c, spec-seccomp.c):
 * each checks the type, fills err naming the field on a mismatch, and
 * returns 0 or a negative errno. Pure.
 */
#ifndef HUTCH_OCI_JSON_H
#define HUTCH_OCI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

#define HUTCH_OCI_MAX_STRING 4096 /* any one string */

/* obj[key] if obj is an object, else NULL. */
const cJSON *hutch_oci_json_item(const cJSON *obj, const char *key);
/* A string of at most HUTCH_OCI_MAX_STRING bytes; *ret malloc'ed, NULL when absent. */
int hutch_oci_json_str(const cJSON *obj, const char *key, const char *field, char **ret,
                       struct hutch_err *err);
/* A whole number in [0, max]; absent: *ret unchanged. */
int hutch_oci_json_u64(const cJSON *obj, const char *key, const char *field, uint64_t max,
                       uint64_t *ret, struct hutch_err *err);
/* true only for JSON true. */
bool hutch_oci_json_bool(const cJSON *obj, const char *key);
/* An array of at most max strings into a new NULL-terminated vector. */
int hutch_oci_json_strv(const cJSON *obj, const char *key, const char *field, size_t max,
                        char ***ret, size_t *ret_n, struct hutch_err *err);

#endif
