/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch replay JOURNAL|ID [--into ID | create options]: a session journal
 * (verb-journal.c, supervisor/journal.h) run again, its chain checked
 * first, into a fresh sandbox of the journal's image (or --into one):
 * each command line (cwd, shell, stdin when kept) through POST /v1/run,
 * each file operation that succeeded (a write's content when the journal
 * holds it) through the file routes, in the journal's order; read-only
 * requests skipped. It is issue 29's test of the journal's completeness:
 * what a line does not hold (an environment, streamed stdin, a large or
 * secret-bearing write, a cut command line) is named, line by line, as not
 * reproduced, and a command whose exit differs from the journal's is named
 * too (docs/api.md, "hutch replay").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base64.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "journal-format.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

#define EXIT_BROKEN  1 /* the journal's chain is broken: nothing replayed */
#define EXIT_DIFFERS 2 /* replayed, but not all of it reproduced */

struct replay {
	const char *sock;
	const cJSON *lines;
	uint64_t seq; /* the line being replayed */
	unsigned commands, files, skipped, differed;
};

static const char *str(const cJSON *o, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static bool num(const cJSON *o, const char *name, double *v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);

	if (cJSON_IsNumber(n))
		*v = n->valuedouble;
	return cJSON_IsNumber(n);
}

static void differs(struct replay *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void differs(struct replay *rp, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "hutch: replay: line %" PRIu64 ": ", rp->seq);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	rp->differed++;
}

/* One request to the sandbox; 0 with the answer in *ret (may be NULL),
 * or an exit code (the sandbox is gone, or does not answer). */
static int call(struct replay *rp, const char *path, cJSON *body, long *status, cJSON **ret)
{
	_cleanup_free_ char *text = cJSON_PrintUnformatted(body);
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	int r;

	cJSON_Delete(body);
	if (!text)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	r = hutch_client_request(rp->sock, "POST", path, text, strlen(text), &resp, &err);
	if (r < 0)
		return hutch_cli_lost(rp->sock, r, err.msg);
	*status = resp.status;
	*ret = cJSON_ParseWithLength(resp.body.data ? resp.body.data : "", resp.body.len);
	hutch_http_resp_done(&resp);
	return 0;
}

/* The line that says how line seq's command ended: itself, or a later
 * {"of": seq} (a command that outlived its request). */
static const cJSON *exit_of(const struct replay *rp, const cJSON *line, uint64_t seq)
{
	const cJSON *l;
	double of = -1;

	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(line, "running")))
		return line;
	cJSON_ArrayForEach(l, rp->lines)
		if (num(l, "of", &of) && (uint64_t)of == seq)
			return l;
	return NULL;
}

/* Bytes a line holds ("stdin", "content"): decoded into *ret, checked
 * against their SHA-256; 0, or 1 with why they cannot be had. */
static int data_of(const cJSON *line, const char *field, char **ret, size_t *ret_len, char why[160])
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(line, field);
	char sum[HUTCH_JOURNAL_HASH_LEN + 1];
	double size = 0;

	*ret = NULL;
	*ret_len = 0;
	if (!d)
		return 0;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "streamed"))) {
		if (num(d, "size", &size))
			snprintf(why, 160,
			         "its %s (%.0f bytes) was streamed: the journal has its size only",
			         field, size);
		else
			snprintf(why, 160, "its %s was streamed: the journal does not have it",
			         field);
		return 1;
	}
	(void)num(d, "size", &size);
	if (str(d, "withheld")) {
		snprintf(why, 160, "its %s (%.0f bytes) is not in the journal (%s)", field, size,
		         !strcmp(str(d, "withheld"), "secret")
		                 ? "it holds a secrets= value"
		                 : "more than 4 KiB: its digest only");
		return 1;
	}
	if (!str(d, "base64") || hutch_base64_decode(str(d, "base64"), ret, ret_len) < 0) {
		snprintf(why, 160, "its %s is not readable in the journal", field);
		return 1;
	}
	hutch_journal_hash(*ret, *ret_len, sum);
	if (!str(d, "sha256") || strcmp(sum, str(d, "sha256"))) {
		free(*ret);
		*ret = NULL;
		snprintf(why, 160, "its %s does not match its SHA-256", field);
		return 1;
	}
	return 0;
}

/* The body of /v1/run or /v1/start_process for a command line. */
static cJSON *command_body(struct replay *rp, const cJSON *line, const cJSON *end)
{
	cJSON *b = cJSON_CreateObject();
	_cleanup_free_ char *in = NULL, *b64 = NULL;
	char why[160];
	size_t len;
	double ms = 0;

	if (str(line, "shell")) { /* bash -c's string */
		cJSON *argv = cJSON_AddArrayToObject(b, "argv");
		cJSON_AddItemToArray(argv, cJSON_CreateString(str(line, "shell")));
		cJSON_AddItemToArray(argv, cJSON_CreateString("-c"));
		cJSON_AddItemToArray(argv, cJSON_CreateString(str(line, "command")));
	} else {
		cJSON_AddStringToObject(b, "cmd", str(line, "command"));
	}
	if (str(line, "cwd"))
		cJSON_AddStringToObject(b, "cwd", str(line, "cwd"));
	if (data_of(line, "stdin", &in, &len, why))
		differs(rp, "%s; run with an empty stdin", why);
	else if (in && (b64 = hutch_base64_encode(in, len))) {
		cJSON_AddStringToObject(b, "stdin", b64);
		cJSON_AddStringToObject(b, "encoding", "base64");
	}
	/* a command that timed out ran for about its timeout */
	if (end && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, "timed_out")) &&
	    num(end, "ms", &ms))
		cJSON_AddNumberToObject(b, "timeout", ms / 1000);
	return b;
}

/* What the journal says of how it ended, for messages: "exit 3". */
static void how(const cJSON *o, char out[48])
{
	double v = 0;

	if (num(o, "exit", &v))
		snprintf(out, 48, "exit %.0f", v);
	else if (num(o, "signal", &v))
		snprintf(out, 48, "signal %.0f", v);
	else if (num(o, "exit_code", &v) && v >= 0)
		snprintf(out, 48, "exit %.0f", v);
	else
		snprintf(out, 48, "no exit");
}

static int replay_command(struct replay *rp, const cJSON *line)
{
	const cJSON *end = exit_of(rp, line, rp->seq);
	_cleanup_cjson_ cJSON *ans = NULL;
	char was[48], now[48];
	double sig;
	long status = 0;
	int r;

	rp->commands++;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(line, "inexact")))
		differs(rp, "its command line in the journal is not the one run (cut at 4 KiB, a "
		            "secret or invalid UTF-8 replaced)");
	/* A background process that did not end by itself (killed, or still
	 * running): started again in the background, not waited for. */
	if (!end || num(end, "signal", &sig)) {
		r = call(rp, "/v1/start_process", command_body(rp, line, NULL), &status, &ans);
		if (!r && status != 201 && status != 200)
			differs(rp, "start_process answered %ld", status);
		return r;
	}
	r = call(rp, "/v1/run", command_body(rp, line, end), &status, &ans);
	if (r)
		return r;
	if (status != 200) {
		differs(rp, "/v1/run answered %ld", status);
		return 0;
	}
	how(end, was);
	how(ans, now);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, "spawn_failed")))
		snprintf(was, sizeof(was), "no start");
	if (strcmp(was, now))
		differs(rp, "'%.200s' ended with %s, the journal says %s", str(line, "command"),
		        now, was);
	return 0;
}

/* A file operation that succeeded, through the file routes (what a
 * builtin of the executor's routes did, through /v1/run's argv). */
static int replay_file(struct replay *rp, const cJSON *line, const char *op)
{
	_cleanup_cjson_ cJSON *ans = NULL;
	_cleanup_free_ char *data = NULL, *b64 = NULL;
	cJSON *b = cJSON_CreateObject(), *argv;
	const char *path = str(line, "path"), *route;
	char why[160];
	size_t len;
	long status = 0;
	int r;

	rp->files++;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(line, "inexact")))
		differs(rp,
		        "its path in the journal is not the one given (cut, a secret or invalid "
		        "UTF-8 replaced)");
	cJSON_AddStringToObject(b, "path", path);
	if (str(line, "mode"))
		cJSON_AddStringToObject(b, "mode", str(line, "mode"));
	if (!strcmp(op, "write")) {
		route = "/v1/write_file";
		if (data_of(line, "content", &data, &len, why)) {
			cJSON_Delete(b);
			differs(rp, "write of '%s' not replayed: %s", path, why);
			return 0;
		}
		b64 = hutch_base64_encode(data ? data : "", len);
		cJSON_AddStringToObject(b, "content", b64 ? b64 : "");
		cJSON_AddStringToObject(b, "encoding", "base64");
	} else if (!strcmp(op, "mkdir")) {
		route = "/v1/make_dir";
	} else if (!strcmp(op, "rm")) {
		route = "/v1/delete_file";
	} else if (!strcmp(op, "rmdir")) {
		route = "/v1/delete_dir";
	} else if (!strcmp(op, "remove") || !strcmp(op, "remove-all")) {
		route = "/v1/run"; /* Go's os.Remove, os.RemoveAll */
		cJSON_DeleteItemFromObjectCaseSensitive(b, "path");
		argv = cJSON_AddArrayToObject(b, "argv");
		cJSON_AddItemToArray(argv, cJSON_CreateString("rm"));
		cJSON_AddItemToArray(argv,
		                     cJSON_CreateString(!strcmp(op, "remove") ? "-d" : "-rf"));
		cJSON_AddItemToArray(argv, cJSON_CreateString("--"));
		cJSON_AddItemToArray(argv, cJSON_CreateString(path));
	} else { /* tar-x: an upload's tar, streamed */
		cJSON_Delete(b);
		differs(rp, "%s of '%s' not replayed: its data was streamed", op, path);
		return 0;
	}
	r = call(rp, route, b, &status, &ans);
	if (!r && status != 200)
		differs(rp, "%s of '%s' answered %ld, the journal says 200", op, path, status);
	else if (!r && !strcmp(route, "/v1/run") &&
	         cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ans, "exit_code")) != 0)
		differs(rp, "%s of '%s' failed", op, path);
	return r;
}

/* Requests that change nothing in the sandbox's files, or nothing replay
 * can give again: skipped (rollback, process stdin: named). */
static int replay_other(struct replay *rp, const cJSON *line, const char *route)
{
	rp->skipped++;
	if (strstr(route, "/rollback") || strstr(route, "/process_stdin"))
		differs(rp, "%s not replayed: the journal does not hold what it gave", route);
	return 0;
}

static int replay_line(struct replay *rp, const cJSON *line)
{
	const char *route = str(line, "route"), *op = str(line, "op");
	double st = 200, seq = 0;

	if (!num(line, "seq", &seq) || !route) /* the journal's own, an "of" line */
		return 0;
	rp->seq = (uint64_t)seq;
	if (str(line, "command"))
		return replay_command(rp, line);
	if (op && str(line, "path") && strcmp(op, "read") && strcmp(op, "ls") &&
	    strcmp(op, "tar-c")) {
		/* a failed file operation changed nothing */
		if (num(line, "status", &st) && (st < 200 || st > 299)) {
			rp->skipped++;
			return 0;
		}
		return replay_file(rp, line, op);
	}
	return replay_other(rp, line, route);
}

/* Create the sandbox to replay into: the journal's image unless --image. */
static int create_target(struct hutch_cli_args *a, const cJSON *start, struct hutch_created *c)
{
	const char *image = str(start, "image"), *manifest = str(start, "image_manifest");
	int r;

	if (!a->cfg->image[0] && image && strlen(image) < sizeof(a->cfg->image))
		snprintf(a->cfg->image, sizeof(a->cfg->image), "%s", image);
	a->cfg->no_limits = a->no_limits;
	r = hutch_cli_create_sandbox(a->cfg, "never", c);
	if (r)
		return r;
	if (manifest && a->cfg->image_manifest[0] && strcmp(manifest, a->cfg->image_manifest))
		fprintf(stderr,
		        "hutch: replay: warning: image '%s' is %s now, the session ran on %s\n",
		        a->cfg->image, a->cfg->image_manifest, manifest);
	if (hutch_created_ack(c) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "sandbox %s: its supervisor went away",
		                      c->id);
	return 0;
}

static int cmd_replay(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *lines = NULL;
	struct hutch_journal_check check;
	struct replay rp = { 0 };
	struct hutch_created c;
	struct hutch_paths p;
	const cJSON *line;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing journal: hutch replay JOURNAL|ID "
		                                        "[--into ID | create options]");
	if ((r = hutch_cli_journal_load(a->pos[0], &lines, &check)))
		return r;
	if (check.why[0])
		return hutch_cli_fail(EXIT_BROKEN,
		                      "journal '%s' is broken at %s: nothing replayed (hutch "
		                      "journal --verify)",
		                      a->pos[0], check.why);
	if (!check.started)
		return hutch_cli_fail(
		        EXIT_DIFFERS,
		        "journal '%s' does not start at its session's start (its oldest "
		        "lines were rotated away, --journal-max): nothing replayed",
		        a->pos[0]);
	if (a->into) {
		if ((r = hutch_cli_open_live(a->into, &p)))
			return r;
		snprintf(c.id, sizeof(c.id), "%s", p.id);
		c.paths = p;
	} else if ((r = create_target(a, cJSON_GetArrayItem(lines, 0), &c))) {
		return r;
	}
	rp.sock = c.paths.sock;
	rp.lines = lines;
	/* A replayed command may take as long as it took (no answer wait). */
	(void)setenv("HUTCH_API_TIMEOUT", "0", 0);
	cJSON_ArrayForEach(line, lines)
		if ((r = replay_line(&rp, line)))
			return r;
	printf("%s\n", c.id);
	fprintf(stderr,
	        "hutch: replayed %d lines of journal '%s' into %s: %u commands, %u file "
	        "operations, %u requests skipped (read-only, or no change to files); %u %s\n",
	        cJSON_GetArraySize(lines), a->pos[0], c.id, rp.commands, rp.files, rp.skipped,
	        rp.differed, rp.differed == 1 ? "difference" : "differences");
	return rp.differed ? EXIT_DIFFERS : 0;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                        \
	X(into, "replay into this live sandbox instead of a new one (create options do not " \
	        "apply then)")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt replay_opts[] = {
	{ .name = "into",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, into),
	  .metavar = "ID",
	  .complete = "@sandboxes",
	  HELP(into) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_replay = {
	.name = "replay",
	.synopsis = "JOURNAL|ID [--into ID | OPTIONS]",
	.about = "Run a session journal again (hutch journal; a sandbox's id, live or ended, or\n"
	         "a journal file): its chain is checked first (broken: exit 1, nothing run),\n"
	         "then every command line (with its cwd and, when the journal holds it, its\n"
	         "stdin) and every file operation that succeeded (a write's content when the\n"
	         "journal holds it: up to 4 KiB, no secrets= value) runs in the journal's\n"
	         "order in a new sandbox of the journal's image (create OPTIONS apply) or in\n"
	         "--into ID; read-only requests are skipped. A background process that ended by\n"
	         "itself runs to its end before the next line. Prints the sandbox's id; exit 0\n"
	         "when everything was reproduced and every command ended as the journal says,\n"
	         "2 naming each line that was not (environments, streamed stdin and uploads,\n"
	         "large or secret-bearing writes are not in a journal).\n",
	.opts = replay_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.max_pos = 1,
	.run = cmd_replay,
};
