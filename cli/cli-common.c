/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the CLI verbs (verb-*.c, cp.c, args.c): one
 * error message format, and turning an id or prefix the user typed into a
 * sandbox, with the error that says why when there is none.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli.h"
#include "state.h"

int hutch_cli_fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("hutch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int hutch_cli_resolve(const char *arg, struct hutch_paths *p)
{
	return hutch_cli_resolve_as(arg, 0, p);
}

int hutch_cli_resolve_as(const char *arg, unsigned flags, struct hutch_paths *p)
{
	const char *rt = hutch_runtime_dir();
	char id[HUTCH_ID_LEN + 1], reason[64];
	struct hutch_err e = { 0 };
	int64_t at;
	int r;

	r = hutch_state_resolve(rt, arg, id);
	if (r == -ENOTUNIQ)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "'%s' matches several sandboxes: give more of the id", arg);
	if (r == -EINVAL)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "'%s' is not a sandbox id (ids are %d lowercase hex characters; "
		        "see hutch ls)",
		        arg, HUTCH_ID_LEN);
	if (r < 0) {
		if (hutch_gone_read(rt, arg, reason, sizeof(reason), &at) > 0)
			return flags & HUTCH_CLI_GONE_OK ? HUTCH_CLI_SKIP : hutch_cli_gone(arg, "");
		if (flags & HUTCH_CLI_MISSING_OK)
			return HUTCH_CLI_SKIP;
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND, "no sandbox '%s' in %s (see hutch ls)",
		                      arg, rt);
	}
	if (hutch_runtime_dir_bound(rt, &e) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", e.msg);
	(void)hutch_paths_init(rt, id, p); /* a valid id, a runtime dir within bound */
	return 0;
}

int hutch_cli_gone(const char *id, const char *tail)
{
	char reason[64], when[40];
	int64_t at;

	if (hutch_gone_read(hutch_runtime_dir(), id, reason, sizeof(reason), &at) <= 0)
		return hutch_cli_fail(HUTCH_EXIT_GONE,
		                      "sandbox %s was removed (its state directory is gone; no "
		                      "tombstone says why)%s",
		                      id, tail);
	hutch_format_time(at, when, sizeof(when));
	return hutch_cli_fail(HUTCH_EXIT_GONE, "sandbox %s %s at %s%s%s", id,
	                      hutch_gone_words(reason), when,
	                      !strcmp(reason, "expired") ? " (ttl reached)" : "", tail);
}

int hutch_cli_supervisor_gone(const char *id, const char *what)
{
	return hutch_cli_fail(HUTCH_EXIT_GONE,
	                      "sandbox %s is not running: its supervisor is gone (killed or "
	                      "crashed; 'hutch doctor' checks the host)%s%s; run 'hutch gc' to "
	                      "remove what it left",
	                      id, what ? " and left no " : "", what ? what : "");
}

int hutch_cli_check_live(const struct hutch_paths *p)
{
	return hutch_state_is_live(p) == 0 ? hutch_cli_supervisor_gone(p->id, NULL) : 0;
}

int hutch_cli_no_record(const char *id, const char *what, const char *keep)
{
	const char *rt = hutch_runtime_dir();
	char reason[64], when[40];
	struct hutch_paths p;
	int64_t at;

	/* The classes of the other verbs (docs/errors.md): a sandbox that
	 * was there and ended is gone, one never seen (or pruned) not found. */
	if (hutch_gone_read(rt, id, reason, sizeof(reason), &at) > 0) {
		hutch_format_time(at, when, sizeof(when));
		return hutch_cli_fail(HUTCH_EXIT_GONE,
		                      "sandbox %s %s at %s; no %s of it is kept (%s)", id,
		                      hutch_gone_words(reason), when, what, keep);
	}
	if (hutch_paths_init(rt, id, &p) == 0 && access(p.dir, F_OK) == 0 &&
	    hutch_state_is_live(&p) == 0)
		return hutch_cli_supervisor_gone(id, what);
	return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND, "no %s of sandbox '%s' (%s)", what, id, keep);
}

int hutch_cli_lost(const char *sock, int code, const char *msg)
{
	char rt[4096], reason[64], *slash;
	int64_t deadline = hutch_now_mono_ms() + 1000, at;
	struct hutch_paths p;
	const char *id;

	/* The socket is $RT/<id>/api.sock. A supervisor that died closed the
	 * connection (or, before we connected, its listening socket: a
	 * refusal) and released its lock together, but its init may hold the
	 * lock a moment longer while it dies (the kernel closes fds one by
	 * one): allow it a moment. */
	snprintf(rt, sizeof(rt), "%s", sock);
	if ((code != -ECONNRESET && code != -ECONNREFUSED) || !(slash = strrchr(rt, '/')))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", msg);
	*slash = '\0';
	if (!(slash = strrchr(rt, '/')))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", msg);
	*slash = '\0';
	id = slash + 1;
	if (hutch_paths_init(rt, id, &p) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", msg);
	while (hutch_state_is_live(&p) == 1 && hutch_now_mono_ms() < deadline)
		(void)usleep(10000);
	if (hutch_state_is_live(&p) == 1)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", msg);
	if (hutch_gone_read(rt, id, reason, sizeof(reason), &at) > 0)
		return hutch_cli_gone(id, "");
	return hutch_cli_fail(HUTCH_EXIT_GONE,
	                      "sandbox %s is gone: its supervisor died (killed or crashed) "
	                      "before the command's end was reported; run 'hutch gc' to "
	                      "remove what it left",
	                      id);
}

int hutch_cli_open_live(const char *arg, struct hutch_paths *p)
{
	int r = hutch_cli_resolve(arg, p);

	return r ? r : hutch_cli_check_live(p);
}

int hutch_cli_lines_drain(struct hutch_cli_lines *f, const char *path,
                          void (*fn)(void *ud, const char *line, size_t len), void *ud)
{
	for (;;) {
		char *nl;
		ssize_t n;

		while ((nl = memchr(f->buf, '\n', f->len))) {
			size_t l = (size_t)(nl - f->buf);

			fn(ud, f->buf, l);
			memmove(f->buf, nl + 1, f->len - l - 1);
			f->len -= l + 1;
		}
		if (f->len == f->cap) { /* a line too long: not one of ours */
			fn(ud, f->buf, f->len);
			f->len = 0;
		}
		n = read(f->fd, f->buf + f->len, f->cap - f->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "read '%s': %s", path,
			                      strerror(errno));
		if (n == 0)
			return 0;
		f->len += (size_t)n;
	}
}

void hutch_cli_wait_writer(int fd)
{
	for (int i = 0; i < 1000 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK; i++)
		(void)poll(NULL, 0, 10);
}
