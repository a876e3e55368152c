/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcjson is dlopen()ed at the first cJSON call that needs it
 * (cjson-dl.c); callers use <cjson/cJSON.h> as always.
 */
#ifndef HUTCH_CJSON_DL_H
#define HUTCH_CJSON_DL_H

#include <stdbool.h>

/* True once this process has loaded libcjson (the budgets' tests, and a
 * caller that wants to know its path stayed without it). */
bool hutch_cjson_is_loaded(void);

#endif
