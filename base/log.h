/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One logging API. A message is formatted into a stack buffer and written
 * with one write() to the log fd, so it is safe in a child after clone().
 * The level and fd are the only process-wide state, set once at startup.
 */
#ifndef HUTCH_LOG_H
#define HUTCH_LOG_H

enum hutch_log_level {
	HUTCH_LOG_ERROR = 0,
	HUTCH_LOG_WARN = 1,
	HUTCH_LOG_INFO = 2,
	HUTCH_LOG_DEBUG = 3,
};

void hutch_log_init(int fd, enum hutch_log_level level, const char *tag);
void hutch_log(enum hutch_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* Log with ": strerror(-code)" appended; returns code. */
int hutch_log_errno(enum hutch_log_level level, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
