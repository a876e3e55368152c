/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error context for hutch. Fallible functions return an int: >= 0 on
 * success, a negative errno on failure. Functions that touch user paths,
 * configuration or policy also fill a caller-owned struct hutch_err, whose
 * fixed size keeps it heap-free so it can be used after clone() and written
 * verbatim over a sync fd.
 */
#ifndef HUTCH_ERROR_H
#define HUTCH_ERROR_H

#include <stdarg.h>

#define HUTCH_ERR_MSG_MAX 256

struct hutch_err {
	int code;                    /* negative errno, same as the return value */
	char msg[HUTCH_ERR_MSG_MAX]; /* one line, lower case, no trailing period */
};

/* Fill err with code (a negative errno) and a formatted message; returns code. */
int hutch_err_set(struct hutch_err *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Like hutch_err_set() and append ": strerror(-code)". */
int hutch_err_set_errno(struct hutch_err *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Prepend "prefix: " to the message already in err; returns err->code. */
int hutch_err_prefix(struct hutch_err *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
void hutch_err_clear(struct hutch_err *err);

#endif
