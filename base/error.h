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

/*
 * What kind of failure it is, said where it happens (docs/errors.md). The
 * CLI's exit code and the native API's HTTP status come from the one table
 * in error.c keyed by it; nobody reads the message to decide. An error set
 * without a class gets one from its errno (hutch_err_class()).
 */
enum hutch_errc {
	HUTCH_ERRC_NONE = 0,    /* not said: derived from the errno */
	HUTCH_ERRC_USAGE,       /* the caller asked wrong: an option, a value, a body */
	HUTCH_ERRC_NOT_FOUND,   /* no such sandbox, image, process, file */
	HUTCH_ERRC_GONE,        /* it was there and ended: expired, deleted, crashed */
	HUTCH_ERRC_NOT_CAPABLE, /* this host or user cannot: privileges, a kernel feature, a tool */
	HUTCH_ERRC_CONFLICT,    /* its state forbids it now: exists, busy, not running */
	HUTCH_ERRC_LIMIT,       /* a bound was reached: a size, a count */
	HUTCH_ERRC_IO,          /* the system failed under us: disk, network, a peer */
	HUTCH_ERRC_INTERNAL,    /* anything else: a bug, out of memory */
	HUTCH_ERRC_SETUP,       /* the setup script or on_create failed or timed out */
	HUTCH_ERRC_N
};

struct hutch_err {
	int code;                    /* negative errno, same as the return value */
	char msg[HUTCH_ERR_MSG_MAX]; /* one line, lower case, no trailing period */
	int cls;                     /* enum hutch_errc; HUTCH_ERRC_NONE: from code */
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
/* Like hutch_err_set(), and say the class. */
int hutch_err_set_class(struct hutch_err *err, enum hutch_errc cls, int code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* A fork() (or clone) that failed with code: EAGAIN is the process limit
 * (a cgroup's pids.max, RLIMIT_NPROC), class limit, said with the fix;
 * else "what: fork: strerror". */
int hutch_err_set_fork(struct hutch_err *err, int code, const char *what);
/* The class err says, else the one its code implies. */
enum hutch_errc hutch_err_class(const struct hutch_err *err);
/* The class a bare negative errno implies (the default of the above). */
enum hutch_errc hutch_errc_of_errno(int code);

/* The one table (error.c): per class, its name in docs/errors.md, the
 * CLI's exit code and the native API's HTTP status. */
const char *hutch_errc_name(enum hutch_errc cls);
int hutch_errc_exit(enum hutch_errc cls);
int hutch_errc_http(enum hutch_errc cls);
/* The status of an error of class cls whose API code is code: the
 * class's, or HTTP's finer one where the table of finer statuses has a row
 * for that class and code (403 access_denied, 405 method_not_allowed, 429
 * too_many_processes, ...; docs/errors.md). */
int hutch_errc_status(enum hutch_errc cls, const char *code);
/* The other way: the class whose status it is (500: internal); a status
 * of no class's row is internal. */
enum hutch_errc hutch_errc_of_http(int status);
/* The class a name of the table names ("not_found"), else HUTCH_ERRC_NONE. */
enum hutch_errc hutch_errc_of_name(const char *name);
/* The class of an API's error answer, for its client: the one its code
 * names (a class's name, or a finer status's row: 403 access_denied is
 * not_capable), else its status's class, else the class of the finer
 * status's row (a plain-text answer), else internal. */
enum hutch_errc hutch_errc_of_answer(int status, const char *code);

#endif
