/* SPDX-License-Identifier: Apache-2.0 */
/* The session journal's writer; see journal.h (and runtime/journal-format.h for
 * the format). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base64.h"
#include "cleanup.h"
#include "cmd.h"
#include "cmdenv.h"
#include "events.h"
#include "fdutil.h"
#include "fileops.h"
#include "journal-format.h"
#include "journal.h"
#include "jsonw.h"
#include "state.h"
#include "supervisor.h"
#include "util.h"

#define TEXT_MAX    4096       /* bytes of a command line or path kept */
#define DATA_INLINE 4096       /* bytes of a write's content or stdin kept whole */
#define COMMAND_MAX (1u << 20) /* bytes of an argv joined before that */

struct hutch_journal {
	int fd;       /* the current file, O_APPEND */
	uint64_t seq; /* the next line's */
	char prev[HUTCH_JOURNAL_HASH_LEN + 1];
	uint64_t bytes;    /* in the current file */
	bool failed, kept; /* kept: moved beside the tombstone (no more rotation) */
	char dir[4300];    /* where its files are */
	char name[64], old_name[64];
	/* The command that each of the last COMMANDS_KEPT lines of a command
	 * started (hutch diff --since SEQ), a ring, oldest first from ncmd;
	 * grown to COMMANDS_KEPT as commands come (ncap), not allocated
	 * whole: 64 KiB zeroed are 16 page faults on a one-command run's
	 * path (docs/performance.md, issue 31). */
	struct {
		uint64_t seq, cmd;
	} * cmds;
	size_t ncmds, ncap;
};

#define COMMANDS_KEPT 4096

struct hutch_jrec {
	struct sup *s;
	unsigned refs;
	int64_t at_ms;  /* realtime, the request's start */
	double started; /* monotonic seconds */
	int uid, pid;
	char route[160];
	char *command, *path, *op, *cwd;
	char mode[8]; /* a write's or make_dir's, "": the default */
	/* The command line, path or cwd is not the one given (cut, a secret
	 * or invalid UTF-8 replaced); shell: "bash" for bash -c's string */
	bool inexact;
	const char *shell;
	/* What replay needs besides the command line: a write's content or
	 * a command's stdin (struct data below), set at attach. */
	struct data {
		bool has, streamed;
		uint64_t size;
		char sha256[HUTCH_JOURNAL_HASH_LEN + 1];
		char *base64;         /* the bytes, when at most DATA_INLINE */
		const char *withheld; /* else why not: "large", "secret" */
	} data;
	unsigned status;
	bool ended;    /* the request */
	unsigned cmds; /* attached commands not done */
	bool has_exit; /* the last command done: its result below */
	int wstatus;
	bool timed_out, oom_killed, spawn_failed;
	double cmd_sec;
	uint64_t first_cmd; /* the first command's id (cmd.h), 0: none */
	/* The last command's change list, as counts (changes-format.h);
	 * has_changes false: it had none (changed nothing, or lists off). */
	bool has_changes, changes_shared, changes_incomplete;
	double changes_n[4]; /* created, modified, deleted, omitted */
	cJSON *egress;       /* the last command's egress summary (netlog.h), or NULL */
	uint64_t line;       /* the request's line, once written (seq + 1; 0: not yet) */
};

static void fail(struct sup *s, struct hutch_journal *j, int r, const char *what)
{
	j->failed = true;
	hutch_event(s, "journal: %s: %s; no more lines are written", what, strerror(-r));
}

static int open_file(struct hutch_journal *j, const char *name, int flags)
{
	char path[sizeof(j->dir) + 64];

	int fd;

	snprintf(path, sizeof(path), "%s/%s", j->dir, name);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
	/* Held while it is written: a reader of an ended sandbox's journal
	 * waits for its last lines (runtime/journal-format.h). */
	if (fd >= 0)
		(void)flock(fd, LOCK_EX | LOCK_NB);
	return fd;
}

/* Append one line made of w's members and "prev" (w done). Written with
 * base/jsonw.h, byte for byte what cJSON_PrintUnformatted() printed (the
 * chain's hashes are over these bytes): no line loads libcjson, 1.4-1.8 ms
 * of CPU on a run's path (docs/performance.md, issue 31). */
static void append(struct sup *s, struct hutch_journal *j, struct hutch_jw *w)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	hutch_jw_str(w, "prev", j->prev);
	hutch_jw_close(w, '{');
	r = hutch_jw_finish(w, &text, &len);
	if (r < 0)
		return fail(s, j, r, "format a line");
	text[len] = '\n'; /* over the NUL: written with its length */
	r = hutch_write_all(j->fd, text, len + 1);
	if (r < 0)
		return fail(s, j, r, "write");
	hutch_journal_hash(text, len, j->prev);
	j->seq++;
	j->bytes += len + 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A line's start in w: '{', "seq" and "time". */
static void line_new(struct hutch_journal *j, int64_t at_ms, struct hutch_jw *w)
{
	char t[40];
	int64_t sec = at_ms / 1000;

	hutch_format_time(sec, t, sizeof(t));
	/* "...Z" with milliseconds */
	if (strlen(t) > 1 && t[strlen(t) - 1] == 'Z')
		snprintf(t + strlen(t) - 1, sizeof(t) - strlen(t) + 1, ".%03dZ",
		         (int)(at_ms % 1000));
	hutch_jw_init(w, SIZE_MAX);
	hutch_jw_open(w, NULL, '{');
	hutch_jw_num(w, "seq", (double)j->seq);
	hutch_jw_str(w, "time", t);
}

/* The file's first line, made on first use. */
static struct hutch_journal *journal_get(struct sup *s)
{
	struct hutch_journal *j = s->journal;
	struct hutch_jw w;

	if (j) /* a claim may have turned it off (HUTCH_OPT_SESSION) */
		return j->failed || j->fd < 0 || !s->cfg->journal_max_bytes ? NULL : j;
	if (!s->cfg->journal_max_bytes)
		return NULL;
	j = s->journal = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->dir, sizeof(j->dir), "%s", s->paths.dir);
	snprintf(j->name, sizeof(j->name), HUTCH_JOURNAL_FILE);
	snprintf(j->old_name, sizeof(j->old_name), HUTCH_JOURNAL_OLD_FILE);
	memset(j->prev, '0', HUTCH_JOURNAL_HASH_LEN);
	j->fd = open_file(j, j->name, O_EXCL);
	if (j->fd < 0) {
		fail(s, j, -errno, "create " HUTCH_JOURNAL_FILE);
		return NULL;
	}
	line_new(j, now_ms(), &w);
	hutch_jw_str(&w, "journal", "start");
	hutch_jw_str(&w, "sandbox", s->id);
	hutch_jw_num(&w, "max_bytes", (double)s->cfg->journal_max_bytes);
	/* What a replay starts from (hutch replay): the root and the size. */
	hutch_jw_str(&w, "image",
	             hutch_config_has_image(s->cfg) ? s->cfg->image : HUTCH_IMAGE_HOST);
	if (hutch_config_has_image(s->cfg) && s->cfg->image_manifest[0])
		hutch_jw_str(&w, "image_manifest", s->cfg->image_manifest);
	hutch_jw_str(&w, "instance_type", s->cfg->type->name);
	append(s, j, &w);
	return j->failed ? NULL : j;
}

/* Past half the bound: the file becomes the old one and a new one starts
 * with a "rotated" line that continues the chain. */
static void maybe_rotate(struct sup *s, struct hutch_journal *j)
{
	char from[sizeof(j->dir) + 64], to[sizeof(j->dir) + 64];
	struct hutch_jw w;
	int fd;

	if (j->kept || j->bytes < s->cfg->journal_max_bytes / 2)
		return;
	snprintf(from, sizeof(from), "%s/%s", j->dir, j->name);
	snprintf(to, sizeof(to), "%s/%s", j->dir, j->old_name);
	if (rename(from, to) < 0)
		return fail(s, j, -errno, "rotate");
	fd = open_file(j, j->name, O_EXCL);
	if (fd < 0)
		return fail(s, j, -errno, "rotate");
	close(j->fd);
	j->fd = fd;
	j->bytes = 0;
	line_new(j, now_ms(), &w);
	hutch_jw_str(&w, "journal", "rotated");
	append(s, j, &w);
}

struct hutch_jrec *hutch_journal_request_begin(struct sup *s, const char *method, const char *url,
                                               int uid, int pid)
{
	struct hutch_jrec *jr;

	if (!journal_get(s))
		return NULL;
	jr = calloc(1, sizeof(*jr));
	if (!jr)
		return NULL;
	jr->s = s;
	jr->refs = 1;
	jr->at_ms = now_ms();
	jr->started = hutch_now_mono_sec();
	jr->uid = uid;
	jr->pid = pid;
	snprintf(jr->route, sizeof(jr->route), "%s %s", method, url);
	return jr;
}

/* text with every secrets= value in it replaced by "[secret NAME]" (the
 * search goes on after the mark: a value may be part of a mark), then cut
 * at TEXT_MAX bytes (after: a cut could leave a value's head) and made
 * valid UTF-8. NULL if out of memory. *inexact (if given) is set when the
 * result is not text (replay cannot run it: hutch replay). */
static char *redact(const struct sup *s, const char *text, bool *inexact)
{
	const struct hutch_secrets *x = s->cfg->secrets;
	_cleanup_free_ char *out = strdup(text);
	char *clean;
	size_t len;

	for (size_t i = 0; out && x && i < x->n; i++) {
		const char *eq = strchr(x->env[i], '=');
		size_t vlen = eq ? strlen(eq + 1) : 0, from = 0;
		char mark[HUTCH_SECRET_NAME_MAX + 16];
		char *at;

		if (!vlen)
			continue;
		snprintf(mark, sizeof(mark), "[secret %.*s]", (int)(eq - x->env[i]), x->env[i]);
		while (out && (at = strstr(out + from, eq + 1))) {
			size_t head = (size_t)(at - out);
			char *next = malloc(head + strlen(mark) + strlen(at + vlen) + 1);

			if (next)
				sprintf(next, "%.*s%s%s", (int)head, out, mark, at + vlen);
			free(out);
			out = next;
			from = head + strlen(mark);
		}
	}
	if (!out)
		return NULL;
	len = strlen(out);
	clean = hutch_utf8_sanitize(out, len > TEXT_MAX ? TEXT_MAX : len, NULL);
	if (inexact && clean && strcmp(clean, text))
		*inexact = true;
	return clean;
}

/* A shell command as its string; anything else as its words, quoted
 * where a word needs it. */
static char *command_line(const struct sup *s, const char *const *argv, bool *inexact,
                          const char **shell)
{
	struct hutch_buf b;
	char *line;

	if (argv[0] && argv[1] && argv[2] && !strcmp(argv[1], "-c") &&
	    (!strcmp(argv[0], "/bin/sh") || !strcmp(argv[0], "sh") ||
	     !strcmp(argv[0], "/bin/bash") || !strcmp(argv[0], "bash"))) {
		*shell = strstr(argv[0], "bash") ? "bash" : NULL;
		return redact(s, argv[2], inexact);
	}
	hutch_buf_init(&b, COMMAND_MAX); /* redacted whole, then cut */
	for (const char *const *a = argv; *a; a++) {
		bool plain = **a && !strpbrk(*a, " \t\n'\"\\$`;&|<>(){}*?[]#~");

		if (a != argv)
			(void)hutch_buf_append(&b, " ", 1);
		if (plain) {
			(void)hutch_buf_append(&b, *a, strlen(*a));
			continue;
		}
		(void)hutch_buf_append(&b, "'", 1);
		for (const char *p = *a; *p; p++)
			(void)(*p == '\'' ? hutch_buf_append(&b, "'\\''", 4)
			                  : hutch_buf_append(&b, p, 1));
		(void)hutch_buf_append(&b, "'", 1);
	}
	(void)hutch_buf_append(&b, "", 1);
	line = b.data ? redact(s, b.data, inexact) : NULL;
	if (b.len >= COMMAND_MAX)
		*inexact = true;
	hutch_buf_done(&b);
	return line;
}

/* Does data hold a secrets= value? Then it is not kept (its digest is). */
static bool holds_secret(const struct sup *s, const char *data, size_t len)
{
	const struct hutch_secrets *x = s->cfg->secrets;

	for (size_t i = 0; x && i < x->n; i++) {
		const char *eq = strchr(x->env[i], '=');

		if (eq && eq[1] && memmem(data, len, eq + 1, strlen(eq + 1)))
			return true;
	}
	return false;
}

/* The bytes a command was given (a write's content, a command's stdin):
 * size and SHA-256, the bytes themselves (base64) when small and free of
 * secrets; streamed ones (PUT /files, /exec) are known only by their
 * count, which the stream's owner keeps (cmd.h stdin_counted). */
static void keep_data(struct hutch_jrec *jr, const struct hutch_spawn *sp)
{
	struct data *d = &jr->data;

	free(d->base64);
	memset(d, 0, sizeof(*d));
	if (sp->stdin_open) {
		d->has = d->streamed = true;
		d->size = UINT64_MAX; /* until its end */
		return;
	}
	if (!sp->stdin_len)
		return;
	d->has = true;
	d->size = sp->stdin_len;
	hutch_journal_hash(sp->stdin_data, sp->stdin_len, d->sha256);
	if (sp->stdin_len > DATA_INLINE)
		d->withheld = "large";
	else if (holds_secret(jr->s, sp->stdin_data, sp->stdin_len))
		d->withheld = "secret";
	else
		d->base64 = hutch_base64_encode(sp->stdin_data, sp->stdin_len);
}

static void cmd_attach_builtin(struct hutch_jrec *jr, const struct hutch_spawn *sp)
{
	const char *const *argv = sp->argv;

	if (!jr->op && !strcmp(argv[0], "diff")) { /* its argument: a generation */
		jr->op = strdup(argv[0]);
	} else if (!jr->path && argv[1]) {
		jr->op = strdup(argv[0]);
		jr->path = redact(jr->s, argv[1], &jr->inexact);
		if ((!strcmp(argv[0], HUTCH_FOP_WRITE) || !strcmp(argv[0], HUTCH_FOP_MKDIR)) &&
		    argv[2] && strlen(argv[2]) < sizeof(jr->mode))
			snprintf(jr->mode, sizeof(jr->mode), "%s", argv[2]);
		if (!strcmp(argv[0], HUTCH_FOP_WRITE) || !strcmp(argv[0], HUTCH_FOP_TAR_X))
			keep_data(jr, sp);
	}
}

static void *cmd_attach(void *ud, uint64_t id, const struct hutch_spawn *sp)
{
	struct hutch_jrec *jr = ud;

	if (!jr || !sp->argv[0])
		return NULL;
	if (!jr->first_cmd)
		jr->first_cmd = id;
	if (sp->builtin) {
		cmd_attach_builtin(jr, sp);
	} else {
		free(jr->command);
		jr->inexact = false;
		jr->command = command_line(jr->s, sp->argv, &jr->inexact, &jr->shell);
		free(jr->cwd);
		jr->cwd = sp->cwd && strcmp(sp->cwd, HUTCH_WORKSPACE)
		                  ? redact(jr->s, sp->cwd, &jr->inexact)
		                  : NULL;
		keep_data(jr, sp);
	}
	jr->refs++;
	jr->cmds++;
	return jr;
}

/* The bytes as a field: {"size", "sha256", "base64"} or "withheld"; a
 * streamed one {"streamed": true, "size"} (no size: not counted). */
static void add_data(struct hutch_jw *w, const struct hutch_jrec *jr)
{
	const struct data *d = &jr->data;

	if (!d->has || (d->streamed && d->size == 0)) /* counted: none */
		return;
	hutch_jw_open(w, jr->command ? "stdin" : "content", '{');
	if (d->streamed) {
		hutch_jw_bool(w, "streamed", true);
		if (d->size != UINT64_MAX)
			hutch_jw_num(w, "size", (double)d->size);
	} else {
		hutch_jw_num(w, "size", (double)d->size);
		hutch_jw_str(w, "sha256", d->sha256);
		if (d->base64)
			hutch_jw_str(w, "base64", d->base64);
		else
			hutch_jw_str(w, "withheld", d->withheld);
	}
	hutch_jw_close(w, '{');
}

static const char *const change_counts[4] = { "created", "modified", "deleted", "omitted" };

/* A command's change list as its counts: {"created": N, "modified": N,
 * "deleted": N, "omitted": N} and "shared" / "complete": false when so. */
static void add_changes(struct hutch_jw *w, const struct hutch_jrec *jr)
{
	if (!jr->has_changes)
		return;
	hutch_jw_open(w, "changes", '{');
	for (size_t i = 0; i < 4; i++)
		hutch_jw_num(w, change_counts[i], jr->changes_n[i]);
	if (jr->changes_shared)
		hutch_jw_bool(w, "shared", true);
	if (jr->changes_incomplete)
		hutch_jw_bool(w, "complete", false);
	hutch_jw_close(w, '{');
}

static void keep_changes(struct hutch_jrec *jr, const cJSON *ch)
{
	jr->has_changes = cJSON_IsObject(ch);
	if (!jr->has_changes)
		return;
	for (size_t i = 0; i < 4; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(ch, change_counts[i]);
		jr->changes_n[i] = i < 3               ? cJSON_GetArraySize(v)
		                   : cJSON_IsNumber(v) ? v->valuedouble
		                                       : 0;
	}
	jr->changes_shared = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ch, "shared"));
	jr->changes_incomplete = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(ch, "complete"));
}

static void add_exit(struct hutch_jw *w, const struct hutch_jrec *jr)
{
	if (jr->spawn_failed)
		hutch_jw_bool(w, "spawn_failed", true);
	else if (WIFEXITED(jr->wstatus))
		hutch_jw_num(w, "exit", WEXITSTATUS(jr->wstatus));
	else if (WIFSIGNALED(jr->wstatus))
		hutch_jw_num(w, "signal", WTERMSIG(jr->wstatus));
	if (jr->timed_out)
		hutch_jw_bool(w, "timed_out", true);
	if (jr->oom_killed)
		hutch_jw_bool(w, "oom_killed", true);
	add_changes(w, jr);
	if (jr->egress) { /* a tree of the library's (netlog.c): it is loaded */
		_cleanup_free_ char *text = cJSON_PrintUnformatted(jr->egress);

		hutch_jw_raw(w, "egress", text);
	}
}

static double ms(double sec)
{
	return hutch_round(sec * 1e6) / 1e3; /* microsecond precision */
}

/* A new line of jr's sandbox's journal (rotated first if due) started in
 * w, or NULL (no line). */
static struct hutch_journal *line_of(struct hutch_jrec *jr, int64_t at_ms, struct hutch_jw *w)
{
	struct hutch_journal *j = journal_get(jr->s);

	if (!j)
		return NULL;
	maybe_rotate(jr->s, j);
	if (j->failed)
		return NULL;
	line_new(j, at_ms, w);
	return j;
}

static void keep_command(struct hutch_journal *j, uint64_t seq, uint64_t cmd)
{
	/* Below COMMANDS_KEPT the ring is not full: slot ncmds is the next
	 * one, and the array only needs to reach it. */
	if (j->ncmds == j->ncap && j->ncap < COMMANDS_KEPT) {
		size_t n = j->ncap ? j->ncap * 4 : 16;
		void *p;

		if (n > COMMANDS_KEPT)
			n = COMMANDS_KEPT;
		p = reallocarray(j->cmds, n, sizeof(*j->cmds));
		if (!p)
			return;
		j->cmds = p;
		j->ncap = n;
	}
	j->cmds[j->ncmds++ % COMMANDS_KEPT].seq = seq;
	j->cmds[(j->ncmds - 1) % COMMANDS_KEPT].cmd = cmd;
}

static void write_request(struct hutch_jrec *jr)
{
	struct hutch_jw w;
	struct hutch_journal *j = line_of(jr, jr->at_ms, &w);

	if (!j)
		return;
	if (jr->uid >= 0) {
		hutch_jw_open(&w, "caller", '{');
		hutch_jw_num(&w, "uid", jr->uid);
		hutch_jw_num(&w, "pid", jr->pid);
		hutch_jw_close(&w, '{');
	} else {
		hutch_jw_str(&w, "caller", "tcp");
	}
	hutch_jw_str(&w, "route", jr->route);
	hutch_jw_str(&w, "command", jr->command);
	hutch_jw_str(&w, "op", jr->op);
	hutch_jw_str(&w, "path", jr->path);
	if (jr->command)
		hutch_jw_str(&w, "shell", jr->shell);
	hutch_jw_str(&w, "cwd", jr->cwd);
	if (jr->inexact)
		hutch_jw_bool(&w, "inexact", true);
	if (jr->mode[0])
		hutch_jw_str(&w, "mode", jr->mode);
	add_data(&w, jr);
	if (jr->status)
		hutch_jw_num(&w, "status", jr->status);
	if (jr->has_exit && !jr->cmds && jr->command) /* a builtin's is the status's */
		add_exit(&w, jr);
	else if (jr->cmds)
		hutch_jw_bool(&w, "running", true); /* an "exit" line follows */
	hutch_jw_num(&w, "ms", ms(hutch_now_mono_sec() - jr->started));
	jr->line = j->seq + 1;
	if (jr->first_cmd && jr->command)
		keep_command(j, j->seq, jr->first_cmd);
	append(jr->s, j, &w);
}

int hutch_journal_command_of(struct sup *s, uint64_t seq, uint64_t *ret_cmd)
{
	const struct hutch_journal *j = s->journal;

	if (!j || !s->cfg->journal_max_bytes)
		return -ENODATA;
	for (size_t i = 0; i < j->ncmds && i < COMMANDS_KEPT; i++)
		if (j->cmds[i].seq == seq) {
			*ret_cmd = j->cmds[i].cmd;
			return 0;
		}
	return -ENOENT;
}

static void write_exit(struct hutch_jrec *jr)
{
	struct hutch_jw w;
	struct hutch_journal *j = line_of(jr, now_ms(), &w);

	if (!j)
		return;
	hutch_jw_num(&w, "of", (double)(jr->line - 1));
	add_exit(&w, jr);
	hutch_jw_num(&w, "ms", ms(jr->cmd_sec));
	append(jr->s, j, &w);
}

static void put(struct hutch_jrec *jr)
{
	if (!jr || --jr->refs)
		return;
	free(jr->command);
	free(jr->path);
	free(jr->op);
	free(jr->cwd);
	free(jr->data.base64);
	cJSON_Delete(jr->egress);
	free(jr);
}

void hutch_journal_request_end(struct hutch_jrec *jr, unsigned status)
{
	if (!jr)
		return;
	jr->status = status;
	jr->ended = true;
	write_request(jr);
	put(jr);
}

static void cmd_put(void *ref)
{
	put(ref);
}

static void cmd_done(void *ref, const struct cmd *c)
{
	struct hutch_jrec *jr = ref;

	jr->cmds--;
	jr->has_exit = true;
	jr->wstatus = c->status;
	jr->timed_out = c->timed_out;
	jr->oom_killed = c->oom_killed;
	jr->spawn_failed = c->spawn_error != NULL;
	jr->cmd_sec = c->duration;
	if (jr->data.streamed) /* counted by the stream's owner, or not known */
		jr->data.size = c->stdin_counted ? c->stdin_streamed : UINT64_MAX;
	keep_changes(jr, c->changes);
	cJSON_Delete(jr->egress);
	jr->egress = c->egress ? cJSON_Duplicate(c->egress, true) : NULL;
	/* Its request has its line: this command outlived it. */
	if (jr->ended && jr->line && !jr->cmds)
		write_exit(jr);
	put(jr);
}

const struct hutch_cmd_hook hutch_journal_cmd_hook = {
	.attach = cmd_attach,
	.done = cmd_done,
	.put = cmd_put,
};

const char *hutch_journal_cmd_line(const struct cmd *c)
{
	const struct hutch_jrec *jr = c->hook_ref;

	return jr ? (jr->command ? jr->command : jr->op) : NULL;
}

void hutch_journal_keep(struct sup *s)
{
	struct hutch_journal *j = s->journal;
	char rt[4200], *slash;

	if (!j || j->kept)
		return;
	snprintf(rt, sizeof(rt), "%s", s->paths.dir);
	slash = strrchr(rt, '/');
	if (!slash)
		return;
	*slash = '\0';
	(void)hutch_gone_keep(s->paths.dir, s->id, HUTCH_JOURNAL_FILE, HUTCH_JOURNAL_SUFFIX);
	(void)hutch_gone_keep(s->paths.dir, s->id, HUTCH_JOURNAL_OLD_FILE,
	                      HUTCH_JOURNAL_OLD_SUFFIX);
	snprintf(j->dir, sizeof(j->dir), "%s/.gone", rt);
	snprintf(j->name, sizeof(j->name), "%s" HUTCH_JOURNAL_SUFFIX, s->id);
	snprintf(j->old_name, sizeof(j->old_name), "%s" HUTCH_JOURNAL_OLD_SUFFIX, s->id);
	j->kept = true;
}

void hutch_journal_close(struct sup *s)
{
	struct hutch_journal *j = s->journal;
	struct hutch_jw w;

	if (!j)
		return;
	if (!j->failed && j->fd >= 0) {
		line_new(j, now_ms(), &w);
		hutch_jw_str(&w, "journal", "end");
		hutch_jw_str(&w, "reason", s->end.reason ? s->end.reason : "crashed");
		append(s, j, &w);
	}
	if (j->fd >= 0)
		close(j->fd);
	free(j->cmds);
	free(j);
	s->journal = NULL;
}
