/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CLI verbs for background processes: hutch ps, logs, kill, stdin and
 * exec -d (whose options are exec's, in verb-sandbox.c).
 * Each is one or a few requests to the sandbox's API (docs/api.md,
 * "Background processes"). `logs -f` follows the output by absolute
 * offsets, so what it prints is exactly what the process wrote, whatever
 * happens to the connections in between.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "state.h"
#include "stream.h"
#include "verbs.h"

/* While a process runs, how long one request waits for new stdout before
 * looking at stderr again. */
#define FOLLOW_WAIT "0.25"

/*
 * One request; on a 2xx answer stores the parsed JSON in *ret and returns 0,
 * else prints the API's message and returns the exit code of its class
 * (hutch_cli_api_error(): 65 an unknown process, 66 the sandbox ended, 64
 * a refused request, 70 a process not running or a bound reached).
 */
static int call_n(const struct hutch_paths *p, const char *method, const char *path,
                  const char *body, size_t len, cJSON **ret)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	long status;
	int r;

	r = hutch_client_request(p->sock, method, path, body, len, &resp, &err);
	if (r < 0) {
		hutch_http_resp_done(&resp);
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", err.msg);
	}
	status = resp.status;
	*ret = status >= 200 && status < 300
	               ? cJSON_ParseWithLength(resp.body.data ? resp.body.data : "", resp.body.len)
	               : NULL;
	r = *ret ? 0
	         : hutch_cli_api_error(status, resp.body.data && resp.body.len
	                                               ? resp.body.data
	                                               : "unexpected answer from the sandbox");
	hutch_http_resp_done(&resp);
	return r;
}

static int call(const struct hutch_paths *p, const char *method, const char *path, const char *body,
                cJSON **ret)
{
	return call_n(p, method, path, body, body ? strlen(body) : 0, ret);
}

/* POST req as JSON. On success *ret holds the answer, printed already when
 * json is set (the caller then prints nothing). */
static int post(const struct hutch_paths *p, const char *path, const cJSON *req, bool json,
                cJSON **ret)
{
	_cleanup_free_ char *body = cJSON_PrintUnformatted(req);
	int r;

	if (!body)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	r = call(p, "POST", path, body, ret);
	if (r == 0 && json) {
		_cleanup_free_ char *text = cJSON_Print(*ret);
		printf("%s\n", text ? text : "{}");
	}
	return r;
}

/* A process id as the user typed it: "p3" or "3". */
static int proc_id(const char *arg, char *buf, size_t size)
{
	const char *digits = arg[0] == 'p' ? arg + 1 : arg;

	if (!*digits || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 9)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "'%s' is not a process id (like p1; see hutch ps SANDBOX)",
		                      arg);
	snprintf(buf, size, "p%s", digits);
	return 0;
}

/* The "ID PROC" positionals of logs and kill: the process id checked, the
 * sandbox resolved and live. */
static int id_and_proc(size_t nargs, const char *const *args, const char *usage, char *proc,
                       size_t size, struct hutch_paths *p)
{
	int r;

	if (nargs < 2)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing %s: %s",
		                      nargs ? "process id" : "sandbox id", usage);
	r = proc_id(args[1], proc, size);
	if (r)
		return r;
	return hutch_cli_open_live(args[0], p);
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- hutch ps ---- */

static void print_row(const cJSON *pr)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(pr, "pid");
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(pr, "exit_code");
	const char *sig = str_of(pr, "signal_name");
	char pidbuf[16] = "-", exitbuf[24] = "-";

	if (cJSON_IsNumber(pid))
		snprintf(pidbuf, sizeof(pidbuf), "%d", pid->valueint);
	if (cJSON_IsNumber(code))
		snprintf(exitbuf, sizeof(exitbuf), "%d", code->valueint);
	else if (sig)
		snprintf(exitbuf, sizeof(exitbuf), "%s", sig);
	printf("%-6s %-8s %-8s %-8s %-21s %s\n", str_of(pr, "id") ?: "?", pidbuf,
	       str_of(pr, "status") ?: "?", exitbuf, str_of(pr, "started_at") ?: "",
	       str_of(pr, "command") ?: "");
}

static int cmd_ps(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *res = NULL;
	struct hutch_paths p;
	const cJSON *procs, *pr;
	int r;

	if (!a->npos)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "missing sandbox id: hutch ps ID lists one sandbox's background "
		        "processes; the sandboxes themselves (docker ps) are 'hutch ls'");
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	r = call(&p, "GET", "/v1/list_processes", NULL, &res);
	if (r)
		return r;
	procs = cJSON_GetObjectItemCaseSensitive(res, "processes");
	if (a->json) {
		_cleanup_free_ char *text = cJSON_Print(procs);
		printf("%s\n", text ? text : "[]");
		return 0;
	}
	printf("%-6s %-8s %-8s %-8s %-21s %s\n", "ID", "PID", "STATUS", "EXIT", "STARTED",
	       "COMMAND");
	cJSON_ArrayForEach(pr, procs)
		print_row(pr);
	return 0;
}

/* ---- hutch logs ---- */

static int b64_value(char c)
{
	const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(tab, c) : NULL;

	return p ? (int)(p - tab) : -1;
}

/* Decode base64 in place; returns the byte count or -EINVAL. */
static ssize_t b64_decode(char *s)
{
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (char *p = s; *p && *p != '='; p++) {
		int v = b64_value(*p);
		if (v < 0)
			return -EINVAL;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	return (ssize_t)o;
}

struct follow {
	const char *stream; /* "stdout" or "stderr" */
	int fd;
	uint64_t offset;
	bool eof;
};

/* Fetch one stream from f->offset and write it out. */
static int fetch(const struct hutch_paths *p, const char *proc, struct follow *f, bool wait,
                 bool *running)
{
	_cleanup_cjson_ cJSON *res = NULL;
	const cJSON *next, *dropped;
	char path[160];
	char *data;
	ssize_t n;
	int r;

	snprintf(path, sizeof(path),
	         "/process_output?id=%s&stream=%s&offset=%llu&encoding=base64%s", proc, f->stream,
	         (unsigned long long)f->offset, wait ? "&wait=" FOLLOW_WAIT : "");
	r = call(p, "GET", path, NULL, &res);
	if (r)
		return r;
	next = cJSON_GetObjectItemCaseSensitive(res, "next_offset");
	dropped = cJSON_GetObjectItemCaseSensitive(res, "dropped");
	data = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res, "data"));
	if (!cJSON_IsNumber(next) || !data || (n = b64_decode(data)) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "unexpected answer from the sandbox");
	if (cJSON_IsNumber(dropped) && dropped->valuedouble > 0)
		fprintf(stderr,
		        "hutch: %.0f bytes of %s were overwritten before they were read "
		        "(a process keeps the last %u KiB of each stream)\n",
		        dropped->valuedouble, f->stream, 1024u);
	if (n > 0 && hutch_write_all(f->fd, data, (size_t)n) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "write %s: %s", f->stream,
		                      strerror(errno));
	f->offset = (uint64_t)next->valuedouble;
	f->eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "eof"));
	*running = !strcmp(str_of(res, "status") ?: "", "running");
	return 0;
}

/* logs -f: the followed process's own exit status, as exec gives it:
 * its exit code, or 128 + the signal that killed it. */
static int proc_exit_code(const struct hutch_paths *p, const char *proc)
{
	_cleanup_cjson_ cJSON *res = NULL;
	const cJSON *pr;
	int r = call(p, "GET", "/v1/list_processes", NULL, &res);

	if (r)
		return r;
	cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(res, "processes")) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(pr, "exit_code");
		const cJSON *sig = cJSON_GetObjectItemCaseSensitive(pr, "signal");

		if (strcmp(str_of(pr, "id") ?: "", proc) != 0)
			continue;
		if (cJSON_IsNumber(code))
			return code->valueint;
		if (cJSON_IsNumber(sig))
			return 128 + sig->valueint;
		break;
	}
	return hutch_cli_fail(HUTCH_EXIT_FAILURE,
	                      "process %s ended, but its exit status is "
	                      "not listed (see hutch ps)",
	                      proc);
}

static int cmd_logs(struct hutch_cli_args *a)
{
	struct follow out = { "stdout", 1, 0, false }, err = { "stderr", 2, 0, false };
	struct hutch_paths p;
	bool running = true;
	char proc[16];
	int r;

	r = id_and_proc(a->npos, (const char *const *)a->pos, "hutch logs ID PROC [-f]", proc,
	                sizeof(proc), &p);
	if (r)
		return r;
	do {
		bool was = running;
		r = fetch(&p, proc, &out, a->follow && was, &running);
		if (!r)
			r = fetch(&p, proc, &err, false, &running);
		if (r)
			return r;
	} while (a->follow && (running || !out.eof || !err.eof));
	return a->follow ? proc_exit_code(&p, proc) : 0;
}

/* ---- hutch kill ---- */

static int cmd_kill(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject(), *res = NULL;
	struct hutch_paths p;
	char proc[16];
	int r;

	r = id_and_proc(a->npos, (const char *const *)a->pos, "hutch kill ID PROC", proc,
	                sizeof(proc), &p);
	if (r)
		return r;
	cJSON_AddStringToObject(req, "id", proc);
	if (a->grace >= 0)
		cJSON_AddNumberToObject(req, "grace_seconds", a->grace);
	r = post(&p, "/v1/kill_process", req, a->json, &res);
	if (r)
		return r;
	if (!a->json) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
		if (cJSON_IsNumber(code))
			printf("%s killed (exited with code %d)\n", proc, code->valueint);
		else
			printf("%s killed (%s)\n", proc, str_of(res, "signal_name") ?: "signal");
	}
	return 0;
}

/* ---- hutch stdin ---- */

#define STDIN_PIECE (1u << 20) /* one request each: memory stays at this */

/* Our stdin, as it comes, to PROC's (started with exec -d -i); --close
 * then closes PROC's stdin. */
static int cmd_stdin(struct hutch_cli_args *a)
{
	_cleanup_free_ char *buf = malloc(STDIN_PIECE);
	struct hutch_paths p;
	char proc[16], path[64];
	int r;

	r = id_and_proc(a->npos, (const char *const *)a->pos, "hutch stdin ID PROC [--close]", proc,
	                sizeof(proc), &p);
	if (r)
		return r;
	if (!buf)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	snprintf(path, sizeof(path), "/process_stdin?id=%s", proc);
	for (;;) {
		_cleanup_cjson_ cJSON *res = NULL;
		ssize_t n = read(0, buf, STDIN_PIECE);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EISDIR) /* the caller's slip (< DIR), not the system's */
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "standard input is a directory: give a file or a pipe "
			        "(hutch stdin ID PROC < FILE)");
		if (n < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "read standard input: %s",
			                      strerror(errno));
		if (n == 0)
			break;
		r = call_n(&p, "POST", path, buf, (size_t)n, &res);
		if (r)
			return r;
	}
	if (a->close) {
		_cleanup_cjson_ cJSON *res = NULL;

		snprintf(path, sizeof(path), "/process_stdin?id=%s&eof=true", proc);
		return call_n(&p, "POST", path, "", 0, &res);
	}
	return 0;
}

/* ---- hutch exec -d ---- */

int hutch_cli_exec_detached(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject(), *res = NULL;
	struct hutch_paths p;
	cJSON *arr, *env;
	int r;

	if (!a->npos)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch exec -d ID -- CMD [ARG...]");
	if (!a->cmd)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing command: hutch exec -d ID -- CMD [ARG...]");
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	if (a->cwd)
		cJSON_AddStringToObject(req, "cwd", a->cwd);
	env = cJSON_AddObjectToObject(req, "env");
	for (size_t i = 0; i < a->env.n; i++) {
		const char *eq = strchr(a->env.kv[i], '=');
		_cleanup_free_ char *name = strndup(a->env.kv[i], (size_t)(eq - a->env.kv[i]));

		if (!name || !cJSON_AddStringToObject(env, name, eq + 1))
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	}
	arr = cJSON_AddArrayToObject(req, "argv");
	for (char **c = a->cmd; *c; c++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(*c));
	if (a->interactive)
		cJSON_AddTrueToObject(req, "stdin");
	r = post(&p, "/v1/start_process", req, a->json, &res);
	if (r)
		return r;
	if (!a->json)
		printf("%s\n", str_of(res, "id") ?: "?");
	return 0;
}

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                             \
	X(follow, "keep printing new output until the process ends (Ctrl-C stops following; the " \
	          "process keeps running)")                                                       \
	X(close, "then close PROC's standard input (it reads end of file)")                       \
	X(grace, "seconds between SIGTERM and SIGKILL (default 5; 0: SIGKILL at once)")           \
	X(json, "print the answer as JSON")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt logs_opts[] = {
	{ .name = "follow", .short_name = 'f', .kind = HUTCH_CLI_FLAG, A(follow), HELP(follow) },
	{ .name = "" },
};

static const struct hutch_cli_opt stdin_opts[] = {
	{ .name = "close", .kind = HUTCH_CLI_FLAG, A(close), HELP(close) },
	{ .name = "" },
};

static const struct hutch_cli_opt kill_opts[] = {
	{ .name = "grace",
	  .kind = HUTCH_CLI_SECONDS,
	  A(grace),
	  .metavar = "S",
	  .range = HUTCH_CLI_RANGE_GRACE,
	  HELP(grace) },
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_ps = {
	.name = "ps",
	.synopsis = "ID [--json]",
	.about =
	        "List the background processes of a sandbox (running ones and the last finished "
	        "ones): id, pid inside the sandbox, status (running, exited, killed), exit code or "
	        "signal, start time, command.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_ps,
};

const struct hutch_cli_verb hutch_verb_logs = {
	.name = "logs",
	.synopsis = "ID PROC [-f]",
	.about = "Print what background process PROC (p1, p2... see hutch ps) wrote: its stdout to "
	         "stdout, its stderr to stderr. The sandbox keeps the last 1 MiB of each stream.\n",
	.opts = logs_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.id_pos = 1,
	.pos_complete = "@procs",
	.run = cmd_logs,
};

const struct hutch_cli_verb hutch_verb_kill = {
	.name = "kill",
	.synopsis = "ID PROC [--grace S] [--json]",
	.about = "Stop background process PROC and every process it started: SIGTERM, then SIGKILL "
	         "after S seconds (default 5; 0: SIGKILL at once). Returns when it is dead.\n",
	.opts = kill_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.id_pos = 1,
	.pos_complete = "@procs",
	.run = cmd_kill,
};

const struct hutch_cli_verb hutch_verb_stdin = {
	.name = "stdin",
	.synopsis = "ID PROC [--close]",
	.about =
	        "Send standard input, byte-exact, as it comes and until its end, to background "
	        "process PROC (started with hutch exec -d -i); --close then closes PROC's standard "
	        "input. Without --close it stays open for more. Exits 70 if PROC's standard input "
	        "is closed (or was never open).\n",
	.opts = stdin_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.id_pos = 1,
	.pos_complete = "@procs",
	.run = cmd_stdin,
};
