/* SPDX-License-Identifier: Apache-2.0 */
/* Error context helpers; see error.h. No allocation, safe after clone(). */
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
}
