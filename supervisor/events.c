/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's own log; see events.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "events.h"
#include "fdutil.h"
#include "supervisor.h"
#include "util.h"

void hutch_event(struct sup *s, const char *fmt, ...)
{
	char line[512];
	struct timespec ts;
	va_list ap;
	int n, m;

	if (s->events.full)
		return;
	if (s->events.fd < 0) {
		s->events.fd = openat(AT_FDCWD, s->paths.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (s->events.fd >= 0) {
			int dir = s->events.fd;
			s->events.fd = openat(
			        dir, "events.log",
			        O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
			close(dir);
		}
		if (s->events.fd < 0) {
			s->events.full = true; /* no log rather than a failing sandbox */
			return;
		}
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	n = hutch_format_utc(ts.tv_sec, line, sizeof(line));
	n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : n + m >= (int)sizeof(line) - 1 ? (int)sizeof(line) - 2 : n + m;
	line[n++] = '\n';
	if (s->events.bytes + (size_t)n > HUTCH_EVENTS_MAX) {
		static const char full[] = "events: the log is full; later events are not kept\n";
		(void)hutch_write_all(s->events.fd, full, sizeof(full) - 1);
		s->events.full = true;
		return;
	}
	if (hutch_write_all(s->events.fd, line, (size_t)n) >= 0)
		s->events.bytes += (size_t)n;
}

void hutch_events_keep(struct sup *s)
{
	char from[sizeof(s->paths.dir) + 16], to[sizeof(s->paths.dir) + 64], *slash;

	if (s->events.fd >= 0)
		close(s->events.fd);
	s->events.fd = -EBADF;
	s->events.full = true;
	snprintf(from, sizeof(from), "%s/events.log", s->paths.dir);
	snprintf(to, sizeof(to), "%s", s->paths.dir);
	slash = strrchr(to, '/');
	if (!slash)
		return;
	snprintf(slash, sizeof(to) - (size_t)(slash - to), "/.gone/%s" HUTCH_EVENTS_SUFFIX, s->id);
	(void)rename(from, to); /* same file system; no log: nothing to keep */
}
