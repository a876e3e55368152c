/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to one fd with one write() per message; see log.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static int log_fd = 2;
static enum hutch_log_level log_level = HUTCH_LOG_WARN;
static const char *log_tag = "hutch";

HUTCH_START_TEXT void hutch_log_init(int fd, enum hutch_log_level level, const char *tag)
{
	log_fd = fd;
	log_level = level;
	if (tag)
		log_tag = tag;
}

static void log_v(enum hutch_log_level level, int code, const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char buf[1024];
	int n, m;

	if (level > log_level || log_fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%s[%d]: %s: ", log_tag, (int)getpid(), names[level]);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	if (code)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", strerror(-code));
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(log_fd, buf, (size_t)n);
}

void hutch_log(enum hutch_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(level, 0, fmt, ap);
	va_end(ap);
}

int hutch_log_errno(enum hutch_log_level level, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(level, code, fmt, ap);
	va_end(ap);
	return code;
}
