/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch events [ID] [-f]: the supervisor's own log of a sandbox (supervisor/
 * events.h): what it did and why, with times, also after the sandbox has
 * ended (kept beside its tombstone for 7 days). Without an id, every
 * sandbox's log (live ones and those kept), merged in time order, each
 * line with its sandbox's id after the time. -f follows: new lines as they
 * are written, until the sandbox ends (with an id) or Ctrl-C (without,
 * sandboxes created meanwhile included).
 *
 * Following is inotify on the state directories, not polling: a
 * supervisor writes each line with one write() to events.log in its state
 * directory (O_APPEND), which is renamed to .dead-ID when the sandbox ends
 * (the watch goes with it), then moves the log to .gone/ and removes the
 * directory. The log's fd, opened once, reads every line whatever its
 * name; the watch's end (IN_IGNORED) says nothing more comes. A supervisor
 * that was killed writes no end: a check every two seconds of its lock
 * (held by a live supervisor) ends the follow there (with an id: 66, as
 * journal --follow).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "events.h"
#include "fdutil.h"
#include "state.h"
#include "util.h"
#include "verbs.h"

#define TAIL_LINE_MAX 1024 /* hutch_event() writes lines of at most 512 bytes */

/* One sandbox's log being read. */
struct tail {
	char id[HUTCH_ID_LEN + 1];
	int fd;  /* its log, -EBADF until there is one */
	int wd;  /* the watch of its state directory, -1 when none */
	bool ok; /* a row in use */
	size_t npart;
	char part[TAIL_LINE_MAX]; /* the start of a line not yet ended */
};

struct follow {
	int ino;                /* the inotify fd */
	int root_wd;            /* the runtime dir's watch (no id: new sandboxes) */
	bool all;               /* no id: lines carry it, new sandboxes are followed */
	bool killed;            /* with an id: its supervisor died without its end */
	struct tail *t;         /* the sandboxes read */
	size_t n, alloc;        /* rows of t used, allocated */
	struct hutch_buf lines; /* history: whole lines, sorted before printing */
};

static int open_log(const char *dir)
{
	char path[4400];

	snprintf(path, sizeof(path), "%s/events.log", dir);
	return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

/* One whole line of t's log: printed (follow) or kept to be sorted. The
 * id goes after the time when all are shown ("TIME ID message"). */
static int emit(struct follow *f, const struct tail *t, const char *line, size_t len, bool now)
{
	const char *sp = f->all ? memchr(line, ' ', len) : NULL;
	char out[TAIL_LINE_MAX + HUTCH_ID_LEN + 2];
	size_t n;

	if (sp)
		n = (size_t)snprintf(out, sizeof(out), "%.*s %s%.*s", (int)(sp - line), line, t->id,
		                     (int)(line + len - sp), sp);
	else
		n = (size_t)snprintf(out, sizeof(out), "%.*s", (int)len, line);
	if (n >= sizeof(out))
		n = sizeof(out) - 1;
	if (now)
		return hutch_write_all(STDOUT_FILENO, out, n);
	return hutch_buf_append(&f->lines, out, n);
}

/* Read t's log to its end; whole lines are emitted, the rest kept. */
static int drain(struct follow *f, struct tail *t, bool now)
{
	char buf[16384];
	ssize_t n;

	while (t->fd >= 0 && (n = read(t->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			int r = 0;

			if (t->npart < sizeof(t->part))
				t->part[t->npart++] = buf[i];
			if (buf[i] != '\n')
				continue;
			if (t->part[t->npart - 1] != '\n') /* too long: cut */
				t->part[t->npart - 1] = '\n';
			r = emit(f, t, t->part, t->npart, now);
			t->npart = 0;
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static struct tail *add_tail(struct follow *f, const char *id)
{
	struct tail *t;

	if (f->n == f->alloc) {
		size_t na = f->alloc ? f->alloc * 2 : 16;
		void *q = realloc(f->t, na * sizeof(*f->t));
		if (!q)
			return NULL;
		f->t = q;
		f->alloc = na;
	}
	t = &f->t[f->n++];
	memset(t, 0, offsetof(struct tail, part));
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->fd = -EBADF;
	t->wd = -1;
	t->ok = true;
	return t;
}

static void end_tail(struct follow *f, struct tail *t, bool now)
{
	(void)drain(f, t, now);
	if (t->wd >= 0)
		(void)inotify_rm_watch(f->ino, t->wd);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -EBADF;
	t->wd = -1;
	t->ok = false;
}

/* A live sandbox's log: its directory watched first, then the log opened
 * and read, so that no line falls between the two. 1 if it ended before
 * the watch (its log is being moved beside its tombstone). */
static int watch_live(struct follow *f, const char *id, bool now)
{
	struct hutch_paths p;
	struct tail *t;

	if (hutch_paths_init(hutch_runtime_dir(), id, &p) < 0)
		return 0;
	for (size_t i = 0; i < f->n; i++)
		if (f->t[i].ok && !strcmp(f->t[i].id, id))
			return 0;
	t = add_tail(f, id);
	if (!t)
		return -ENOMEM;
	if (f->ino >= 0)
		t->wd = inotify_add_watch(f->ino, p.dir,
		                          IN_CREATE | IN_MODIFY | IN_MOVED_FROM | IN_DELETE |
		                                  IN_ONLYDIR | IN_DONT_FOLLOW);
	if (f->ino >= 0 && t->wd < 0) { /* ended meanwhile: its log moves */
		t->ok = false;
		return 1;
	}
	t->fd = open_log(p.dir);
	return drain(f, t, now);
}

/* An ended sandbox's kept log (.gone/ID.events), read whole. */
static int read_kept(struct follow *f, const char *id)
{
	char path[4300];
	struct tail *t = add_tail(f, id);
	int r;

	if (!t)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/.gone/%s" HUTCH_EVENTS_SUFFIX, hutch_runtime_dir(), id);
	t->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	r = drain(f, t, false);
	end_tail(f, t, false);
	return r;
}

static int by_time(const void *x, const void *y)
{
	const char *a = *(const char *const *)x, *b = *(const char *const *)y;
	int c = strncmp(a, b, 24); /* "2026-12-05T13:47:22.123Z" */

	return c ? c : a < b ? -1 : a > b; /* stable: a sandbox's lines keep their order */
}

/* The history gathered, in time order. */
static int print_sorted(struct follow *f)
{
	_cleanup_free_ char **v = NULL;
	size_t n = 0, cap = 0;
	char *p = f->lines.data, *end = p + f->lines.len;

	for (char *q = p; q < end; q++)
		cap += *q == '\n';
	v = calloc(cap + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (; p < end && n < cap; p = (char *)memchr(p, '\n', (size_t)(end - p)) + 1)
		v[n++] = p;
	qsort(v, n, sizeof(*v), by_time);
	for (size_t i = 0; i < n; i++) {
		size_t len = (size_t)((char *)memchr(v[i], '\n', (size_t)(end - v[i])) - v[i]) + 1;
		if (hutch_write_all(STDOUT_FILENO, v[i], len) < 0)
			return -errno;
	}
	return 0;
}

/* Every sandbox of the runtime dir: the live ones (watched when
 * following) and the logs kept of ended ones. */
static int gather_all(struct follow *f)
{
	_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	_cleanup_closedir_ DIR *gone = NULL;
	char path[4300];
	struct dirent *de;
	size_t n;
	int r;

	r = hutch_state_list(hutch_runtime_dir(), &ids, &n);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = watch_live(f, ids[i], false); /* 1: ended, its log read next time */
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/.gone", hutch_runtime_dir());
	gone = opendir(path);
	while (gone && (de = readdir(gone))) {
		size_t len = strlen(de->d_name), sl = strlen(HUTCH_EVENTS_SUFFIX);
		char id[HUTCH_ID_LEN + 1];

		if (len != HUTCH_ID_LEN + sl ||
		    strcmp(de->d_name + HUTCH_ID_LEN, HUTCH_EVENTS_SUFFIX))
			continue;
		snprintf(id, sizeof(id), "%.*s", HUTCH_ID_LEN, de->d_name);
		if (hutch_id_is_valid(id) && (r = read_kept(f, id)) < 0)
			return r;
	}
	return 0;
}

/* Whether t's supervisor still holds its lock, under its id or retired. */
static bool still_live(const struct tail *t)
{
	struct hutch_paths p, dead;

	if (hutch_paths_init(hutch_runtime_dir(), t->id, &p) < 0)
		return false;
	if (hutch_state_is_live(&p) > 0)
		return true;
	return hutch_state_retired_paths(&p, &dead) >= 0 && hutch_state_is_live(&dead) > 0;
}

/* One inotify event: new lines, a log created or moved away, a sandbox
 * ended or new. Returns <0 on a write error. */
static int on_event(struct follow *f, const struct inotify_event *ev)
{
	if (ev->wd == f->root_wd) {
		if (ev->len && hutch_id_is_valid(ev->name))
			return watch_live(f, ev->name, true) < 0 ? -EIO : 0;
		return 0;
	}
	for (size_t i = 0; i < f->n; i++) {
		struct tail *t = &f->t[i];

		if (!t->ok || t->wd != ev->wd)
			continue;
		if (ev->mask & IN_IGNORED) {
			t->wd = -1; /* the kernel removed the watch */
			end_tail(f, t, true);
		} else if (ev->len && !strcmp(ev->name, "events.log")) {
			if (t->fd < 0 && (ev->mask & (IN_CREATE | IN_MODIFY))) {
				char dir[4300];
				snprintf(dir, sizeof(dir), "%s/%s", hutch_runtime_dir(), t->id);
				t->fd = open_log(dir);
			}
			if (ev->mask & IN_MOVED_FROM) /* kept: the supervisor's last step */
				end_tail(f, t, true);
			else
				return drain(f, t, true);
		}
		return 0;
	}
	return 0;
}

static size_t live_tails(const struct follow *f)
{
	size_t n = 0;

	for (size_t i = 0; i < f->n; i++)
		n += f->t[i].ok;
	return n;
}

/* Follow until the one sandbox ends (!all) or forever (all). */
static int follow_loop(struct follow *f)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd pfd = { .fd = f->ino, .events = POLLIN };

	while (f->all || live_tails(f)) {
		ssize_t n;
		int r = poll(&pfd, 1, 2000);

		if (r < 0 && errno != EINTR)
			return -errno;
		if (r == 0) { /* a killed supervisor writes no end */
			for (size_t i = 0; i < f->n; i++)
				if (f->t[i].ok && !still_live(&f->t[i])) {
					end_tail(f, &f->t[i], true);
					f->killed = !f->all;
				}
			continue;
		}
		n = read(f->ino, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if ((r = on_event(f, ev)) < 0)
				return r;
			p += sizeof(*ev) + ev->len;
		}
	}
	return 0;
}

static void follow_done(struct follow *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->t[i].fd >= 0)
			close(f->t[i].fd);
	free(f->t);
	hutch_buf_done(&f->lines);
	if (f->ino >= 0)
		close(f->ino);
}

/* Every sandbox: the history in time order, then (-f) what comes. */
static int events_all(struct follow *f, bool follow)
{
	int r;

	if (follow) {
		f->ino = inotify_init1(IN_CLOEXEC);
		if (f->ino < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "inotify: %s", strerror(errno));
		f->root_wd = inotify_add_watch(f->ino, hutch_runtime_dir(),
		                               IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
		if (f->root_wd < 0)
			return hutch_cli_fail(
			        errno == ENOENT ? HUTCH_EXIT_NOT_FOUND : HUTCH_EXIT_FAILURE,
			        "cannot follow '%s': %s%s", hutch_runtime_dir(), strerror(errno),
			        errno == ENOENT ? " (no sandbox was made there yet)" : "");
	}
	r = gather_all(f);
	if (r >= 0)
		r = print_sorted(f);
	if (r >= 0 && follow)
		r = follow_loop(f);
	return r < 0 ? hutch_cli_fail(HUTCH_EXIT_FAILURE, "events: %s", strerror(-r)) : 0;
}

/* An ended sandbox's log: beside its tombstone, or in its retired state
 * dir for the moment between its end and the move. */
static int open_ended(const char *id)
{
	char path[4300];
	int fd;

	snprintf(path, sizeof(path), "%s/.gone/%s" HUTCH_EVENTS_SUFFIX, hutch_runtime_dir(), id);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/" HUTCH_RETIRED_PREFIX "%s", hutch_runtime_dir(), id);
	fd = open_log(path);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/.gone/%s" HUTCH_EVENTS_SUFFIX, hutch_runtime_dir(), id);
	return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC); /* moved meanwhile */
}

/* An ended sandbox's log, printed whole (nothing to follow); -ENOENT if
 * none was kept. */
static int print_ended(struct follow *f, const char *id)
{
	struct tail *t = add_tail(f, id);
	int r;

	if (!t)
		return -ENOMEM;
	t->fd = open_ended(id);
	if (t->fd < 0)
		return -ENOENT;
	r = drain(f, t, true);
	end_tail(f, t, true);
	return r;
}

static int events_one(struct follow *f, const char *arg, bool follow)
{
	struct hutch_paths p;
	int r = hutch_cli_resolve_as(arg, HUTCH_CLI_GONE_OK, &p);
	bool ended = r == HUTCH_CLI_SKIP;

	if (r && !ended)
		return r;
	if (ended) {
		r = print_ended(f, arg);
	} else {
		if (follow && (f->ino = inotify_init1(IN_CLOEXEC)) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "inotify: %s", strerror(errno));
		r = watch_live(f, p.id, true);
		if (r == 1) /* ended between the two looks */
			r = print_ended(f, p.id);
		else if (r >= 0 && f->t[0].fd < 0 && !follow)
			r = -ENOENT; /* not one line yet */
		else if (r >= 0 && follow)
			r = follow_loop(f);
	}
	if (r == -ENOENT)
		return hutch_cli_no_record(ended ? arg : p.id, "log",
		                           "a log is kept 7 days after the sandbox ended");
	if (r >= 0 && f->killed) /* as journal --follow: no end will come */
		return hutch_cli_supervisor_gone(p.id, NULL);
	return r < 0 ? hutch_cli_fail(HUTCH_EXIT_FAILURE, "events: %s", strerror(-r)) : 0;
}

static int cmd_events(struct hutch_cli_args *a)
{
	struct follow f = { .ino = -EBADF, .root_wd = -1, .all = a->npos == 0 };
	int r;

	hutch_buf_init(&f.lines, SIZE_MAX);
	r = f.all ? events_all(&f, a->follow) : events_one(&f, a->pos[0], a->follow);
	follow_done(&f);
	return r;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                         \
	X(follow, "keep printing new lines: with an id until the sandbox ends (0; 66 if its " \
	          "supervisor died: killed or crashed), without one until Ctrl-C (sandboxes " \
	          "created meanwhile included)")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt events_opts[] = {
	{ .name = "follow",
	  .short_name = 'f',
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, follow),
	  HELP(follow) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_events = {
	.name = "events",
	.synopsis = "[ID] [-f]",
	.about = "Print the supervisor's log of a sandbox: its creation with timings, setup\n"
	         "steps, idle sleep and wake, a claim from a warm pool, why it ended and its\n"
	         "teardown, one timestamped line each. Kept 7 days after the sandbox ended;\n"
	         "at most 64 KiB. Without an id: every sandbox's log (live and kept), in time\n"
	         "order, each line with its sandbox's id after the time.\n",
	.opts = events_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_events,
};
