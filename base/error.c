/* SPDX-License-Identifier: Apache-2.0 */
/* Error context helpers and the table of error classes; see error.h and
 * docs/errors.md. No allocation, safe after clone(). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

int hutch_err_set(struct hutch_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	err->code = code;
	err->cls = HUTCH_ERRC_NONE;
	return code;
}

int hutch_err_set_errno(struct hutch_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	len = strlen(err->msg);
	if (len < sizeof(err->msg))
		snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(-code));
	err->code = code;
	err->cls = HUTCH_ERRC_NONE;
	return code;
}

int hutch_err_prefix(struct hutch_err *err, const char *fmt, ...)
{
	char prefix[HUTCH_ERR_MSG_MAX];
	char old[HUTCH_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	/* Truncation is fine (the message stays NUL-terminated); using the
	 * result tells GCC so (-Wformat-truncation breaks -Werror builds). */
	if (snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old) >= (int)sizeof(err->msg))
		err->msg[sizeof(err->msg) - 1] = '\0';
	return err->code;
}

void hutch_err_clear(struct hutch_err *err)
{
	err->code = 0;
	err->msg[0] = '\0';
	err->cls = HUTCH_ERRC_NONE;
}

int hutch_err_set_class(struct hutch_err *err, enum hutch_errc cls, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	err->code = code;
	err->cls = (int)cls;
	return code;
}

int hutch_err_set_fork(struct hutch_err *err, int code, const char *what)
{
	if (code == -EAGAIN)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, code,
		                           "%s: cannot fork: the process limit is reached (the "
		                           "creator's cgroup pids.max or ulimit -u); remove "
		                           "sandboxes or raise the limit",
		                           what);
	return hutch_err_set_errno(err, code, "%s: fork", what);
}

enum hutch_errc hutch_errc_of_errno(int code)
{
	/* Only what an errno says whoever set it. EINVAL and ENOENT do not:
	 * a bad option and a kernel refusing a mount flag, no such image
	 * and a helper tool missing; their sites say the class. */
	switch (-code) {
	case EPERM:
	case ENOSYS:
	case EOPNOTSUPP:
		return HUTCH_ERRC_NOT_CAPABLE;
	case EEXIST:
	case EBUSY:
	case ENOTEMPTY:
	case EADDRINUSE:
	case EADDRNOTAVAIL:
		return HUTCH_ERRC_CONFLICT;
	case E2BIG:
	case EFBIG:
	case ENOSPC:
	case EMFILE:
	case ENFILE:
	case EMSGSIZE:
	case EDQUOT:
		return HUTCH_ERRC_LIMIT;
	case EIO:
	case EPIPE:
	case ECONNRESET:
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EPROTO:
		return HUTCH_ERRC_IO;
	default:
		return HUTCH_ERRC_INTERNAL;
	}
}

enum hutch_errc hutch_err_class(const struct hutch_err *err)
{
	if (err->cls > HUTCH_ERRC_NONE && err->cls < HUTCH_ERRC_N)
		return (enum hutch_errc)err->cls;
	return hutch_errc_of_errno(err->code);
}

/* The contract, one row per class (docs/errors.md shows this table). The
 * exit codes are the CLI's documented ones (cli/cli.h names them); a class
 * without a code of its own exits 70, as every failure did before it. */
static const struct {
	char name[12]; /* in the row: no relocation at start (issue 31) */
	int exit_code;
	int http;
} errc_table[HUTCH_ERRC_N] = {
	[HUTCH_ERRC_NONE] = { "internal", 70, 500 },
	[HUTCH_ERRC_USAGE] = { "usage", 64, 400 },
	[HUTCH_ERRC_NOT_FOUND] = { "not_found", 65, 404 },
	[HUTCH_ERRC_GONE] = { "gone", 66, 410 },
	[HUTCH_ERRC_NOT_CAPABLE] = { "not_capable", 69, 501 },
	[HUTCH_ERRC_CONFLICT] = { "conflict", 70, 409 },
	[HUTCH_ERRC_LIMIT] = { "limit", 70, 413 },
	[HUTCH_ERRC_IO] = { "io", 70, 502 },
	[HUTCH_ERRC_INTERNAL] = { "internal", 70, 500 },
	[HUTCH_ERRC_SETUP] = { "setup", 71, 500 },
};

static unsigned int errc_row(enum hutch_errc cls)
{
	return (unsigned int)cls < HUTCH_ERRC_N ? (unsigned int)cls : HUTCH_ERRC_INTERNAL;
}

const char *hutch_errc_name(enum hutch_errc cls)
{
	return errc_table[errc_row(cls)].name;
}

int hutch_errc_exit(enum hutch_errc cls)
{
	return errc_table[errc_row(cls)].exit_code;
}

int hutch_errc_http(enum hutch_errc cls)
{
	return errc_table[errc_row(cls)].http;
}

/* HTTP's finer statuses (docs/api.md, "Errors"): a refusal of the row's
 * class and code answers the row's status instead of the class's; the
 * class, which the CLI's exit code reads, stays. The API picks every
 * error's status from here (the file endpoints' errno table,
 * supervisor/api/file-errno.c, is the executor contract's), and the CLI
 * reads an answer's class back from here. */
static const struct {
	int cls;       /* enum hutch_errc */
	char code[20]; /* in the row: no relocation at start (issue 31) */
	int status;
} finer_statuses[] = {
	{ HUTCH_ERRC_NOT_CAPABLE, "unauthorized", 401 },  /* the executor's secret */
	{ HUTCH_ERRC_NOT_CAPABLE, "access_denied", 403 }, /* the sandbox's access */
	{ HUTCH_ERRC_USAGE, "method_not_allowed", 405 },  /* another method */
	{ HUTCH_ERRC_USAGE, "upgrade_required", 426 },    /* POST /exec's headers */
	{ HUTCH_ERRC_LIMIT, "too_many_processes", 429 },  /* a count, not a size */
	{ HUTCH_ERRC_LIMIT, "headers_too_large", 431 },   /* the request's headers */
	{ HUTCH_ERRC_LIMIT, "output_over", 500 },         /* the executor's /run */
};

int hutch_errc_status(enum hutch_errc cls, const char *code)
{
	for (size_t i = 0; code && i < sizeof(finer_statuses) / sizeof(finer_statuses[0]); i++)
		if (finer_statuses[i].cls == (int)cls && !strcmp(finer_statuses[i].code, code))
			return finer_statuses[i].status;
	return hutch_errc_http(cls);
}

enum hutch_errc hutch_errc_of_http(int status)
{
	for (int c = HUTCH_ERRC_NONE + 1; c < HUTCH_ERRC_N; c++)
		if (errc_table[c].http == status)
			return (enum hutch_errc)c;
	return HUTCH_ERRC_INTERNAL;
}

enum hutch_errc hutch_errc_of_name(const char *name)
{
	for (int c = HUTCH_ERRC_NONE + 1; name && c < HUTCH_ERRC_N; c++)
		if (!strcmp(name, errc_table[c].name))
			return (enum hutch_errc)c;
	return HUTCH_ERRC_NONE;
}

enum hutch_errc hutch_errc_of_answer(int status, const char *code)
{
	enum hutch_errc cls = hutch_errc_of_name(code);
	size_t n = sizeof(finer_statuses) / sizeof(finer_statuses[0]);

	if (cls != HUTCH_ERRC_NONE)
		return cls;
	/* the finer row of this status and code (500 output_over: limit) */
	for (size_t i = 0; code && i < n; i++)
		if (finer_statuses[i].status == status && !strcmp(finer_statuses[i].code, code))
			return (enum hutch_errc)finer_statuses[i].cls;
	cls = hutch_errc_of_http(status);
	if (cls != HUTCH_ERRC_INTERNAL || status == hutch_errc_http(HUTCH_ERRC_INTERNAL))
		return cls;
	/* a finer status whose answer names no code (the executor's plain
	 * text): the class of its row */
	for (size_t i = 0; i < n; i++)
		if (finer_statuses[i].status == status)
			return (enum hutch_errc)finer_statuses[i].cls;
	return HUTCH_ERRC_INTERNAL;
}
