/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CLI verbs for background processes: hutch ps, logs, kill and exec -d.
 * Each is one or a few requests to the sandbox's API (docs/api.md,
 * "Background processes"). `logs -f` follows the output by absolute
 * offsets, so what it prints is exactly what the process wrote, whatever
 * happens to the connections in between.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "state.h"

/* While a process runs, how long one request waits for new stdout before
 * looking at stderr again. */
#define FOLLOW_WAIT "0.25"

/*
 * One request; on a 2xx answer stores the parsed JSON in *ret and returns 0,
 * else prints the API's message and returns an exit code: 65 for an unknown
 * process, 66 when the sandbox ended, 64 for a refused request, 70 else.
 */
static int call(const struct hutch_paths *p, const char *method, const char *path, const char *body,
                cJSON **ret)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *m;
	long status;
	int r;

	r = hutch_client_request(p->sock, method, path, body, body ? strlen(body) : 0, &resp, &err);
	if (r < 0) {
		hutch_http_resp_done(&resp);
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", err.msg);
	}
	status = resp.status;
	j = cJSON_ParseWithLength(resp.body.data ? resp.body.data : "", resp.body.len);
	hutch_http_resp_done(&resp);
	if (status >= 200 && status < 300 && j) {
		*ret = TAKE_PTR(j);
		return 0;
	}
	m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"),
	                                     "message");
	fprintf(stderr, "hutch: %s\n",
	        cJSON_IsString(m) ? m->valuestring : "unexpected answer from the sandbox");
	if (status == 404)
		return HUTCH_EXIT_NOT_FOUND;
	if (status == 410)
		return HUTCH_EXIT_GONE;
	if (status == 400 || status == 413)
		return HUTCH_EXIT_USAGE;
	return HUTCH_EXIT_FAILURE;
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

static int help(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 1;
		}
	}
	return 0;
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

int hutch_cli_ps(int argc, char **argv)
{
	static const char usage[] =
	        "usage: hutch ps ID [--json]\n\nList the background processes of a sandbox "
	        "(running ones and the last finished ones): id, pid inside the sandbox, status "
	        "(running, exited, killed), exit code or signal, start time, command.\n";
	_cleanup_cjson_ cJSON *res = NULL;
	struct hutch_paths p;
	const cJSON *procs, *pr;
	const char *sid = NULL;
	bool json = false;
	int r;

	if (help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-')
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unknown option '%s' for 'ps'; see 'hutch ps "
			                      "--help'",
			                      argv[i]);
		else if (!sid)
			sid = argv[i];
		else
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unexpected argument '%s'; see 'hutch ps "
			                      "--help'",
			                      argv[i]);
	}
	if (!sid)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch ps ID");
	r = hutch_cli_open_live(sid, &p);
	if (r)
		return r;
	r = call(&p, "GET", "/list_processes", NULL, &res);
	if (r)
		return r;
	procs = cJSON_GetObjectItemCaseSensitive(res, "processes");
	if (json) {
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

int hutch_cli_logs(int argc, char **argv)
{
	static const char usage[] =
	        "usage: hutch logs ID PROC [-f]\n\nPrint what background process PROC (p1, "
	        "p2... see hutch ps) wrote: its stdout to stdout, its stderr to stderr. The "
	        "sandbox keeps the last 1 MiB of each stream.\n\n"
	        "  -f, --follow   keep printing new output until the process ends (Ctrl-C stops "
	        "following;\n                 the process keeps running)\n";
	struct follow out = { "stdout", 1, 0, false }, err = { "stderr", 2, 0, false };
	const char *args[2] = { NULL, NULL };
	struct hutch_paths p;
	bool follow = false, running = true;
	size_t nargs = 0;
	char proc[16];
	int r;

	if (help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
			follow = true;
		else if (argv[i][0] == '-')
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unknown option '%s' for 'logs'; see 'hutch "
			                      "logs --help'",
			                      argv[i]);
		else if (nargs < 2)
			args[nargs++] = argv[i];
		else
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unexpected argument '%s'; see 'hutch logs "
			                      "--help'",
			                      argv[i]);
	}
	r = id_and_proc(nargs, args, "hutch logs ID PROC [-f]", proc, sizeof(proc), &p);
	if (r)
		return r;
	do {
		bool was = running;
		r = fetch(&p, proc, &out, follow && was, &running);
		if (!r)
			r = fetch(&p, proc, &err, false, &running);
		if (r)
			return r;
	} while (follow && (running || !out.eof || !err.eof));
	return 0;
}

/* ---- hutch kill ---- */

int hutch_cli_kill(int argc, char **argv)
{
	static const char usage[] =
	        "usage: hutch kill ID PROC [--grace S] [--json]\n\nStop background process PROC "
	        "and every process it started: SIGTERM, then SIGKILL after S seconds (default 5; "
	        "0: SIGKILL at once). Returns when it is dead.\n";
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject(), *res = NULL;
	const char *args[2] = { NULL, NULL };
	struct hutch_paths p;
	double grace = -1;
	bool json = false;
	size_t nargs = 0;
	char proc[16];
	int r;

	if (help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--grace") || !strncmp(argv[i], "--grace=", 8)) {
			const char *v =
			        argv[i][7] == '=' ? argv[i] + 8 : (i + 1 < argc ? argv[++i] : NULL);
			char *end;
			if (!v)
				return hutch_cli_fail(HUTCH_EXIT_USAGE,
				                      "option '--grace' needs a value");
			grace = strtod(v, &end);
			if (!*v || *end || !isfinite(grace) || grace < 0 || grace > 3600)
				return hutch_cli_fail(
				        HUTCH_EXIT_USAGE,
				        "--grace must be seconds from 0 to 3600, not '%s'", v);
		} else if (argv[i][0] == '-') {
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unknown option '%s' for 'kill'; see 'hutch "
			                      "kill --help'",
			                      argv[i]);
		} else if (nargs < 2) {
			args[nargs++] = argv[i];
		} else {
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unexpected argument '%s'; see 'hutch kill "
			                      "--help'",
			                      argv[i]);
		}
	}
	r = id_and_proc(nargs, args, "hutch kill ID PROC", proc, sizeof(proc), &p);
	if (r)
		return r;
	cJSON_AddStringToObject(req, "id", proc);
	if (grace >= 0)
		cJSON_AddNumberToObject(req, "grace_seconds", grace);
	r = post(&p, "/kill_process", req, json, &res);
	if (r)
		return r;
	if (!json) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
		if (cJSON_IsNumber(code))
			printf("%s killed (exited with code %d)\n", proc, code->valueint);
		else
			printf("%s killed (%s)\n", proc, str_of(res, "signal_name") ?: "signal");
	}
	return 0;
}

/* ---- hutch exec -d ---- */

int hutch_cli_exec_detached(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "detach", no_argument, NULL, 'd' },
		{ "cwd", required_argument, NULL, 'c' },
		{ "env", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject(), *res = NULL;
	cJSON *env = cJSON_AddObjectToObject(req, "env"), *arr;
	const char *sid = NULL;
	struct hutch_paths p;
	bool json = false;
	int opt, r;

	/* hutch exec -d ID [OPTIONS] -- CMD...; -d may also follow ID. */
	optind = 1;
	opterr = 0;
	for (;;) {
		opt = getopt_long(argc, argv, "+:de:", longopts, NULL);
		if (opt == -1 && !sid && optind < argc && argv[optind][0] != '-') {
			sid = argv[optind++]; /* the ID between the options */
			continue;
		}
		if (opt == -1)
			break;
		if (opt == 'c') {
			cJSON_AddStringToObject(req, "cwd", optarg);
		} else if (opt == 'e') {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				return hutch_cli_fail(HUTCH_EXIT_USAGE, "-e wants K=V, not '%s'",
				                      optarg);
			*eq = '\0';
			cJSON_DeleteItemFromObjectCaseSensitive(env, optarg);
			cJSON_AddStringToObject(env, optarg, eq + 1);
			*eq = '=';
		} else if (opt == 'j') {
			json = true;
		} else if (opt == ':') {
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "option '%s' needs a value",
			                      argv[optind - 1]);
		} else if (opt == '?') {
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "option '%s' does not apply to 'exec -d' (it takes --cwd, -e, "
			        "--json); see 'hutch exec --help'",
			        argv[optind - 1]);
		}
	}
	if (!sid)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch exec -d ID -- CMD [ARG...]");
	if (optind >= argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing command: hutch exec -d ID -- CMD [ARG...]");
	r = hutch_cli_open_live(sid, &p);
	if (r)
		return r;
	arr = cJSON_AddArrayToObject(req, "argv");
	for (int i = optind; i < argc; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i]));
	r = post(&p, "/start_process", req, json, &res);
	if (r)
		return r;
	if (!json)
		printf("%s\n", str_of(res, "id") ?: "?");
	return 0;
}
