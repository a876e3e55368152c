/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch journal ID [--verify] [--follow] [--json]: a sandbox's session
 * journal (runtime/journal-format.h, supervisor/journal.h), live or ended
 * (kept beside its tombstone for 7 days): every API request with its
 * caller, route, command line or path, status, exit and duration. --verify
 * walks the hash chain and says where it breaks (exit 1); --follow keeps
 * printing new lines until the journal's end.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "fdutil.h"
#include "journal-format.h"
#include "state.h"
#include "verbs.h"

#define EXIT_BROKEN 1 /* --verify: the chain is broken */

struct jsrc {
	char dir[4300];            /* where the files are */
	char cur[4400], old[4400]; /* the current file and the one before it */
	bool gone;                 /* the sandbox has ended */
	struct hutch_paths live;   /* its state dir's paths while it lives (!gone) */
	char id[HUTCH_ID_LEN + 1]; /* the sandbox's */
};

/* A file of the journal: its lines as they come (a line is printed only
 * once its newline is there). */
struct jfile {
	int fd;
	char buf[HUTCH_JOURNAL_LINE_MAX + 1];
	size_t len;
};

struct jout {
	struct hutch_cli_args *a;
	struct hutch_journal_check check;
	uint64_t lines;
	bool reaped; /* the end line is its reaper's (gc, rm: "by"), not its supervisor's */
};

static void src_in(struct jsrc *s, const char *dir, const char *cur, const char *old, bool gone)
{
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	snprintf(s->cur, sizeof(s->cur), "%s/%s", dir, cur);
	snprintf(s->old, sizeof(s->old), "%s/%s", dir, old);
	s->gone = gone;
}

/* A live sandbox without a journal file: 0 if it keeps none (created
 * with --journal-max 0), -ENOENT if it keeps one that starts at its first
 * request (s->cur is still to come), 1 if it has ended meanwhile. */
static int journal_off(const struct hutch_paths *p)
{
	_cleanup_cjson_ cJSON *st = NULL;
	const cJSON *max;

	if (hutch_state_read(p, &st) < 0)
		return 1;
	max = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "config"),
	                                       "journal_max_bytes");
	if (cJSON_IsNumber(max) && max->valuedouble == 0)
		return 0;
	return access(p->dir, F_OK) == 0 ? -ENOENT : 1;
}

/* Where ID's journal is: its state dir, its retired one (it has just
 * ended), beside its tombstone. */
static int locate(const char *id, struct jsrc *s)
{
	char dir[4300], cur[64], old[64];
	struct hutch_paths p;
	int r = hutch_cli_resolve_as(id, HUTCH_CLI_GONE_OK, &p);

	if (r && r != HUTCH_CLI_SKIP)
		return r;
	snprintf(s->id, sizeof(s->id), "%s", r ? id : p.id);
	if (!r) {
		src_in(s, p.dir, HUTCH_JOURNAL_FILE, HUTCH_JOURNAL_OLD_FILE, false);
		s->live = p;
		if (access(s->cur, F_OK) == 0 || errno != ENOENT)
			return 0;
		r = journal_off(&p);
		if (r <= 0) /* on, but no request yet (or ended since: read below) */
			return r < 0 ? 0
			             : hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
			                              "sandbox '%s' keeps no journal: it was "
			                              "created with --journal-max 0",
			                              p.id);
		id = p.id;
	}
	snprintf(dir, sizeof(dir), "%s/.dead-%s", hutch_runtime_dir(), id);
	src_in(s, dir, HUTCH_JOURNAL_FILE, HUTCH_JOURNAL_OLD_FILE, true);
	if (access(s->cur, F_OK) == 0)
		return 0;
	snprintf(dir, sizeof(dir), "%s/.gone", hutch_runtime_dir());
	snprintf(cur, sizeof(cur), "%s" HUTCH_JOURNAL_SUFFIX, id);
	snprintf(old, sizeof(old), "%s" HUTCH_JOURNAL_OLD_SUFFIX, id);
	src_in(s, dir, cur, old, true);
	if (access(s->cur, F_OK) == 0 || errno != ENOENT)
		return 0;
	return hutch_cli_no_record(id, "journal",
	                           "a journal is kept 7 days after the sandbox ended, and none is "
	                           "written with --journal-max 0");
}

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool num(const cJSON *o, const char *name, double *v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);

	if (cJSON_IsNumber(n))
		*v = n->valuedouble;
	return cJSON_IsNumber(n);
}

/* One line for people: time, caller, route, result, duration, what. */
static void print_human(const char *line, size_t len)
{
	_cleanup_cjson_ cJSON *o = cJSON_ParseWithLength(line, len);
	const cJSON *caller, *ch, *eg;
	char who[32] = "", result[48] = "", took[24] = "", chg[80] = "", net[112] = "";
	double na = 0, nr = 0, up = 0, down = 0;
	double nc = 0, nm = 0, nd = 0, no = 0;
	double v = 0, uid = 0;

	if (!o) {
		printf("%.*s\n", (int)len, line);
		return;
	}
	if (str(o, "journal")) {
		printf("%s  -- journal %s%s%s%s%s%s\n", str(o, "time") ?: "?", str(o, "journal"),
		       str(o, "reason") ? ": " : "", str(o, "reason") ?: "",
		       str(o, "by") ? " (written by hutch " : "", str(o, "by") ?: "",
		       str(o, "by") ? ": its supervisor died before writing it)" : "");
		return;
	}
	caller = cJSON_GetObjectItemCaseSensitive(o, "caller");
	if (cJSON_IsString(caller))
		snprintf(who, sizeof(who), "%s", caller->valuestring);
	else if (num(caller, "uid", &uid))
		snprintf(who, sizeof(who), "uid %.0f", uid);
	if (num(o, "exit", &v))
		snprintf(result, sizeof(result), "exit %.0f", v);
	else if (num(o, "signal", &v))
		snprintf(result, sizeof(result), "signal %.0f", v);
	else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "running")))
		snprintf(result, sizeof(result), "running");
	else if (num(o, "status", &v))
		snprintf(result, sizeof(result), "%.0f", v);
	if (num(o, "ms", &v))
		snprintf(took, sizeof(took), "%.1f ms", v);
	/* a command's change summary: created, modified, deleted (omitted) */
	ch = cJSON_GetObjectItemCaseSensitive(o, "changes");
	if (num(ch, "created", &nc) && num(ch, "modified", &nm) && num(ch, "deleted", &nd))
		snprintf(chg, sizeof(chg), "  [+%.0f ~%.0f -%.0f, %.0f more]", nc, nm, nd,
		         num(ch, "omitted", &no) ? no : 0);
	/* its egress summary: connections allowed, refused, bytes each way */
	eg = cJSON_GetObjectItemCaseSensitive(o, "egress");
	if (num(eg, "allowed", &na) && num(eg, "refused", &nr) && num(eg, "bytes_up", &up) &&
	    num(eg, "bytes_down", &down))
		snprintf(net, sizeof(net), "  [net %.0f allowed %.0f refused, up %.0f down %.0f%s]",
		         na, nr, up, down,
		         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(eg, "shared")) ? ", shared"
		                                                                      : "");
	if (num(o, "of", &v)) {
		printf("%s  %-8s  %-26s  %-9s  %10s  (of line %.0f)%s%s\n", str(o, "time") ?: "?",
		       "", "exit", result, took, v, chg, net);
		return;
	}
	printf("%s  %-8s  %-26s  %-9s  %10s  %s%s%s\n", str(o, "time") ?: "?", who,
	       str(o, "route") ?: "?", result, took, str(o, "command") ?: str(o, "path") ?: "",
	       chg, net);
}

static int line_out(struct jout *o, const char *line, size_t len)
{
	o->lines++;
	if (o->a->verify) {
		(void)hutch_journal_check_line(&o->check, line, len);
		return 0;
	}
	if (o->a->json)
		printf("%.*s\n", (int)len, line);
	else
		print_human(line, len);
	if (o->a->follow) /* each line as it comes, to a pipe too */
		(void)fflush(stdout);
	/* --follow stops at the end line: it is checked as it goes */
	(void)hutch_journal_check_line(&o->check, line, len);
	o->reaped = o->check.ended && memmem(line, len, "\"by\":\"", 6);
	return 0;
}

static void line_cb(void *ud, const char *line, size_t len)
{
	(void)line_out(ud, line, len);
}

/* The complete lines f has now; 0, or an error exit code. */
static int drain(struct jfile *f, struct jout *o, const char *path)
{
	struct hutch_cli_lines l = {
		.fd = f->fd, .buf = f->buf, .len = f->len, .cap = sizeof(f->buf) - 1
	};
	int r = hutch_cli_lines_drain(&l, path, line_cb, o);

	f->len = l.len;
	return r;
}

static int open_or_fail(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return hutch_cli_fail(errno == EACCES ? HUTCH_EXIT_NOT_CAPABLE : HUTCH_EXIT_FAILURE,
		                      "open '%s': %s", path, strerror(errno));
	return 0;
}

/* --follow of a live sandbox whose supervisor was killed: its state dir is
 * still there (until gc) and nobody holds its lock, no end line will come.
 * 66 with the way out, else 0. */
static int supervisor_killed(const struct jsrc *s)
{
	if (s->gone || access(s->live.dir, F_OK) < 0)
		return 0;
	return hutch_cli_check_live(&s->live);
}

#define REAPED \
	"; its journal's end line is hutch gc's or rm's (its supervisor died before writing one)"

/* --follow of a sandbox whose dir (its state dir, or the retired one) is
 * gone: its supervisor writes its last lines (holding the file's lock), or
 * it died and rm or gc removed what it left (the file kept beside the
 * tombstone, or deleted). 0 once the end line is there, else 66 naming
 * why and when it ended. */
static int dir_gone(struct jfile *f, struct jout *o, const struct jsrc *s)
{
	int r;

	hutch_cli_wait_writer(f->fd);
	if ((r = drain(f, o, s->cur)) || (o->check.ended && !o->reaped))
		return r;
	return hutch_cli_gone(s->id, o->reaped ? REAPED
	                                       : "; its journal ends without an end line "
	                                         "(its supervisor died before writing one)");
}

/* A watch on fd's file wherever it is now (the magic link resolves to the
 * open file, moved or not). */
static int watch_fd(int in, int fd)
{
	char path[sizeof("/proc/self/fd/") + 12];

	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return inotify_add_watch(in, path, IN_MODIFY | IN_MOVE_SELF);
}

/* --follow: new lines of f until the end line. The file moves beside the
 * tombstone when the sandbox ends (the watch follows its inode); a
 * rotation makes a new file in the dir (its watch wakes us). */
static int follow(struct jfile *f, struct jout *o, struct jsrc *s)
{
	_cleanup_close_ int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	struct stat a, b;
	char ev[4096];
	int r;

	/* The open file's inode, by its fd: by path, a sandbox ending since
	 * the open (its file moved beside the tombstone) failed the watch. Its
	 * dir gone meanwhile is the end's path, below. */
	if (in < 0 || watch_fd(in, f->fd) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "watch '%s': %s", s->cur,
		                      strerror(errno));
	if (!s->gone && inotify_add_watch(in, s->dir, IN_CREATE | IN_MOVED_TO) < 0) {
		if (errno != ENOENT)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "watch '%s': %s", s->dir,
			                      strerror(errno));
		return dir_gone(f, o, s);
	}
	while (!o->check.ended) {
		struct pollfd p = { .fd = in, .events = POLLIN };

		if ((r = drain(f, o, s->cur)))
			return r;
		if (o->check.ended)
			break;
		/* Rotated: the rest of this file, then the new one. */
		if (fstat(f->fd, &a) == 0 && stat(s->cur, &b) == 0 && a.st_ino != b.st_ino) {
			if ((r = drain(f, o, s->cur)))
				return r;
			close(f->fd);
			if ((r = open_or_fail(s->cur, &f->fd)))
				return r;
			(void)watch_fd(in, f->fd);
			continue;
		}
		r = poll(&p, 1, 1000);
		if (r > 0) {
			while (read(in, ev, sizeof(ev)) > 0)
				;
			continue;
		}
		/* Nothing for a while: a supervisor that died writes no end. */
		if (r == 0 && (r = supervisor_killed(s)))
			return drain(f, o, s->cur) ?: r;
		if (r == 0 && access(s->dir, F_OK) < 0)
			return dir_gone(f, o, s);
	}
	return o->reaped ? hutch_cli_gone(s->id, REAPED) : 0;
}

/* --follow of a live sandbox that has had no request yet: wait for its
 * journal file (made at the first request) while the sandbox lives. */
static int wait_created(const struct jsrc *s)
{
	_cleanup_close_ int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char ev[4096];
	int n, r;

	if (in < 0 || inotify_add_watch(in, s->dir, IN_CREATE) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "watch '%s': %s", s->dir,
		                      strerror(errno));
	while (access(s->cur, F_OK) < 0) {
		struct pollfd p = { .fd = in, .events = POLLIN };

		if (access(s->dir, F_OK) < 0)
			return hutch_cli_fail(HUTCH_EXIT_GONE,
			                      "the sandbox ended without a request: no journal");
		n = poll(&p, 1, 1000);
		if (n > 0)
			while (read(in, ev, sizeof(ev)) > 0)
				;
		else if (n == 0 && (r = supervisor_killed(s)))
			return r;
	}
	return 0;
}

static int cmd_journal(struct hutch_cli_args *a)
{
	struct jfile *f = NULL;
	struct jout o = { .a = a };
	struct jsrc s;
	int r, fd = -EBADF;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch journal ID");
	if (a->verify && a->follow)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "--verify and --follow do not go together");
	if ((r = locate(a->pos[0], &s)))
		return r;
	hutch_journal_check_init(&o.check);
	f = calloc(1, sizeof(*f));
	if (!f)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	/* The file before the last rotation first (if there is one). */
	fd = open(s.old, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		f->fd = fd;
		r = drain(f, &o, s.old);
		close(fd);
		f->len = 0;
	}
	if (!r && !s.gone && access(s.cur, F_OK) < 0 && errno == ENOENT) {
		/* No request yet: nothing to print, or (--follow) wait for it. */
		if (!a->follow) {
			free(f);
			if (a->verify)
				printf("journal of %s: no lines yet (it starts at the first "
				       "request)\n",
				       a->pos[0]);
			return 0;
		}
		r = wait_created(&s);
	}
	/* A live sandbox's file moves beside its tombstone when it ends: ended
	 * since it was located, the file is read where it went. */
	f->fd = -EBADF;
	if (!r && !s.gone && (f->fd = open(s.cur, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 &&
	    errno == ENOENT)
		r = locate(a->pos[0], &s);
	if (!r && f->fd < 0)
		r = open_or_fail(s.cur, &f->fd);
	if (!r && s.gone && !a->follow)
		hutch_cli_wait_writer(f->fd);
	if (!r)
		r = drain(f, &o, s.cur);
	if (!r && a->follow)
		r = follow(f, &o, &s);
	if (f->fd >= 0)
		close(f->fd);
	if (!r && f->len) /* a last line without its newline: cut mid-line */
		(void)hutch_journal_check_line(&o.check, "", 0);
	free(f);
	if (r || !a->verify)
		return r;
	if (o.check.why[0]) {
		printf("journal of %s: broken at %s\n", a->pos[0], o.check.why);
		return EXIT_BROKEN;
	}
	if (s.gone && !o.check.ended) {
		printf("journal of %s: broken: its end line is missing (cut)\n", a->pos[0]);
		return EXIT_BROKEN;
	}
	printf("journal of %s: %llu lines, chain intact%s%s\n", a->pos[0],
	       (unsigned long long)o.check.lines,
	       o.check.started ? "" : " (its oldest lines were rotated away)",
	       s.gone ? ", ended" : ", still being written");
	return 0;
}

/* Append the lines of the file at path to lines, checking the chain. */
static int load_file(const char *path, bool wait, cJSON *lines, struct hutch_journal_check *check)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	ssize_t len;
	size_t at = 0;
	int r;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND, "no journal '%s'", path);
	if (fd < 0 && (r = open_or_fail(path, &fd)))
		return r;
	if (wait) /* an ended sandbox's: its last lines */
		hutch_cli_wait_writer(fd);
	if (fstat(fd, &st) < 0 || !(text = malloc((size_t)st.st_size + 1)) ||
	    (len = hutch_read_all(fd, text, (size_t)st.st_size)) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "read '%s': %s", path, strerror(errno));
	/* complete lines only: one being written has no newline yet */
	while (at < (size_t)len) {
		char *nl = memchr(text + at, '\n', (size_t)len - at);
		size_t l = nl ? (size_t)(nl - text - at) : 0;

		if (!nl)
			break;
		if (hutch_journal_check_line(check, text + at, l) == 0)
			cJSON_AddItemToArray(lines, cJSON_ParseWithLength(text + at, l));
		at += l + 1;
	}
	return 0;
}

int hutch_cli_journal_load(const char *arg, cJSON **ret, struct hutch_journal_check *check)
{
	_cleanup_cjson_ cJSON *lines = cJSON_CreateArray();
	struct jsrc s;
	int r;

	hutch_journal_check_init(check);
	if (!lines)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (strchr(arg, '/') || access(arg, F_OK) == 0) { /* a file */
		if ((r = load_file(arg, false, lines, check)))
			return r;
		*ret = TAKE_PTR(lines);
		return 0;
	}
	if ((r = locate(arg, &s)))
		return r;
	if (access(s.old, F_OK) == 0 && (r = load_file(s.old, false, lines, check)))
		return r;
	if (!s.gone && access(s.cur, F_OK) < 0 && errno == ENOENT)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
		                      "sandbox '%s' has no journal lines yet (it starts at the "
		                      "first request)",
		                      arg);
	if ((r = load_file(s.cur, s.gone, lines, check)))
		return r;
	*ret = TAKE_PTR(lines);
	return 0;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                              \
	X(verify, "check the hash chain: exit 0 if intact, 1 naming the first line that was "      \
	          "changed, cut or is out of sequence")                                            \
	X(follow, "keep printing new lines until the sandbox has ended (0 after its end line; 66 " \
	          "if its supervisor died: killed, or removed by gc or rm, whose end line says "   \
	          "\"by\")")                                                                       \
	X(json, "the lines as stored: one JSON object each")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt journal_opts[] = {
	{ .name = "verify",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, verify),
	  HELP(verify) },
	{ .name = "follow",
	  .short_name = 'f',
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, follow),
	  HELP(follow) },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  HELP(json) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_journal = {
	.name = "journal",
	.synopsis = "ID [--verify] [--follow] [--json]",
	.about = "Print a sandbox's session journal: every API request (but /health and\n"
	         "/status) with its time, caller (uid and pid), route, command line or file\n"
	         "path, HTTP status, exit status, the command's change counts ([+created\n"
	         "~modified -deleted, N more]), its connections in network allow and all\n"
	         "([net A allowed R refused, up B down B]) and duration; a background\n"
	         "process's exit on a line of its own. Each line carries the SHA-256 of\n"
	         "the line before it, so --verify finds a changed, removed or reordered\n"
	         "line. Files are 0600, at most --journal-max bytes (4 MiB; oldest lines\n"
	         "dropped), kept 7 days after the sandbox ended. Environments are never written; "
	         "secrets=\n"
	         "values in a command line show as [secret NAME].\n",
	.opts = journal_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_journal,
};
