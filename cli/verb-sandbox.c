/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox verbs: run, create, exec, ls, inspect, rm, gc. Their options
 * are the tables below and the sandbox option table (runtime/options.c);
 * args.c parses them, stream.c runs commands.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "disk.h"
#include "fdutil.h"
#include "format.h"
#include "lxcfs.h"
#include "pool.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "verb-opts.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                             \
	X(json, "print the result as JSON")                                                       \
	X(run_opts_json,                                                                          \
	  "keep CMD's output and print one JSON object: exit code, signal, OOM, timeout, "        \
	  "duration, output and its sizes, the files it changed")                                 \
	X(rm, "docker's habit: run always deletes its sandbox")                                   \
	X(detach, "start CMD in the background, print its process id")                            \
	X(exec_opts_json,                                                                         \
	  "keep CMD's output and print one JSON object: exit code, signal, OOM, timeout, "        \
	  "duration, output and its sizes, the files it changed (with -d: the answer as "         \
	  "JSON)")                                                                                \
	X(quiet, "print the ids only")                                                            \
	X(ls_opts_json, "print a JSON array")                                                     \
	X(filter, "only the sandboxes that match (repeatable; one key: any value, several keys: " \
	          "all): id=PREFIX, status=S, network=none|all|allow[:...], instance-type=T, "    \
	          "region=R, description=TEXT (a part of it)")                                    \
	X(format,                                                                                 \
	  "print each sandbox with a Go-like template, as docker does: {{.ID}} {{.Status}} "      \
	  "{{.Type}} {{.Network}} {{.Region}} {{.Description}} {{.Created}} {{.Expires}} "        \
	  "{{.Live}} {{.Socket}} {{.Ports}} {{.Config.KEY}}, {{json .}} (or 'json'), "            \
	  "{{upper X}}, "                                                                         \
	  "{{lower X}}; 'table ...' adds a header and aligns the columns at \\t ('table' "        \
	  "alone: ls's columns)")                                                                 \
	X(all, "delete every sandbox")                                                            \
	X(force, "no error for an id that names no sandbox (one that ended never is one); "       \
	         "a sandbox that does not answer is killed")                                      \
	X(rm_opts_quiet, "print nothing")                                                         \
	X(rm_opts_json, "print the ids removed as a JSON array")                                  \
	VERB_OPTS_HELP(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt create_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	NO_LIMITS_OPT,
	PROGRESS_OPT,
	DOCKER_USER,
	DOCKER_MOUNT,
	DOCKER_NAME,
	DOCKER_LABEL,
	DOCKER_CREATE_RM,
	{ .name = "" },
};

static const struct hutch_cli_opt run_opts[] = {
	COMMAND_OPTS(0),
	NO_LIMITS_OPT,
	PROGRESS_OPT,
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(run_opts_json) },
	{ .name = "rm", .kind = HUTCH_CLI_FLAG, A(rm), HELP(rm) },
	DOCKER_WORKDIR,
	DOCKER_ENV_FILE,
	DOCKER_USER,
	DOCKER_MOUNT,
	DOCKER_NAME,
	DOCKER_LABEL,
	DOCKER_RUN_DETACH,
	{ .name = "" },
};

static const struct hutch_cli_opt exec_opts[] = {
	{ .name = "detach", .short_name = 'd', .kind = HUTCH_CLI_FLAG, A(detach), HELP(detach) },
	COMMAND_OPTS(ATTACHED),
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(exec_opts_json) },
	DOCKER_WORKDIR,
	DOCKER_ENV_FILE,
	DOCKER_USER,
	{ .name = "" },
};

static const struct hutch_cli_opt ls_opts[] = {
	{ .name = "quiet", .short_name = 'q', .kind = HUTCH_CLI_FLAG, A(quiet), HELP(quiet) },
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(ls_opts_json) },
	{ .name = "filter",
	  .short_name = 'f',
	  .kind = HUTCH_CLI_LIST,
	  A(filter),
	  .metavar = "KEY=VALUE",
	  .complete = "@filters",
	  HELP(filter) },
	{ .name = "format",
	  .kind = HUTCH_CLI_STRING,
	  A(format),
	  .metavar = "TEMPLATE",
	  .complete = "table json",
	  HELP(format) },
	{ .name = "" },
};

static const struct hutch_cli_opt rm_opts[] = {
	{ .name = "all", .kind = HUTCH_CLI_FLAG, A(all), HELP(all) },
	{ .name = "force", .short_name = 'f', .kind = HUTCH_CLI_FLAG, A(force), HELP(force) },
	{ .name = "quiet",
	  .short_name = 'q',
	  .kind = HUTCH_CLI_FLAG,
	  A(quiet),
	  HELP(rm_opts_quiet) },
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(rm_opts_json) },
	{ .name = "" },
};

static cJSON *removed_json; /* rm --json collects ids here */

static void print_removed(void)
{
	_cleanup_free_ char *t = NULL;

	if (!removed_json)
		return;
	t = cJSON_PrintUnformatted(removed_json);
	printf("%s\n", t ? t : "[]");
	cJSON_Delete(removed_json);
	removed_json = NULL;
}

static int delete_sandbox(const struct hutch_paths *p, bool quiet, bool force)
{
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	int r;

	r = hutch_client_request(p->sock, "DELETE", "/", NULL, 0, &resp, &err);
	if (r == -ETIMEDOUT && !force)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "remove sandbox %s: %s; hutch rm -f %s kills it", p->id,
		                      err.msg, p->id);
	if (r == -ETIMEDOUT) {
		r = hutch_state_kill(p, &err);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "remove sandbox %s: %s", p->id,
			                      err.msg);
	} else if (r < 0) {
		/* No supervisor answers: clean up what it left. */
		r = hutch_state_reap(hutch_runtime_dir(), p->id, "deleted", &err);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "remove sandbox %s: %s", p->id,
			                      err.msg);
		if (r == 0)
			return hutch_cli_fail(
			        HUTCH_EXIT_FAILURE,
			        "sandbox %s is alive but does not answer on '%s': try "
			        "again; if it stays so, kill its supervisor "
			        "(supervisor_pid of hutch inspect) and run 'hutch gc'",
			        p->id, p->sock);
	} else {
		long status = resp.status;
		hutch_http_resp_done(&resp);
		if (status != 200 && status != 410)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "delete sandbox %s: HTTP %ld",
			                      p->id, status);
		/* The supervisor answers once every process of the sandbox
		 * is dead, its cgroups are removed and it can no longer be
		 * found; it removes the host link and mounts right after,
		 * then exits (gc does it if it dies first). */
	}
	if (removed_json)
		cJSON_AddItemToArray(removed_json, cJSON_CreateString(p->id));
	if (!quiet)
		printf("%s\n", p->id);
	return 0;
}

/* A command with its streams relayed, or with --json its output kept
 * and its result printed as JSON (max: the bytes kept of each stream);
 * returns its exit code either way. */
static int stream_command(const struct hutch_paths *p, int pidfd, uint64_t max,
                          struct hutch_cli_args *a, int sent_fd, int (*ack)(void *ud, int fd),
                          void *ud)
{
	struct hutch_cli_capture cap;
	int r, pr;

	/* sent_fd >= 0: the command went with the create, relayed on it */
	if (!a->json)
		return sent_fd >= 0
		               ? hutch_cli_run_relay(p->sock, sent_fd, pidfd, a, NULL)
		               : hutch_cli_stream_run(p->sock, pidfd, a->cmd, a, NULL, ack, ud);
	hutch_cli_capture_init(&cap, max);
	r = sent_fd >= 0 ? hutch_cli_run_relay(p->sock, sent_fd, pidfd, a, &cap)
	                 : hutch_cli_stream_run(p->sock, pidfd, a->cmd, a, &cap, ack, ud);
	/* No result (hutch's own failure, Ctrl-C, the sandbox gone): the
	 * message is on stderr and the exit code says which, as without
	 * --json. */
	pr = cap.result ? hutch_cli_capture_print(&cap, p->id) : 0;
	hutch_cli_capture_done(&cap);
	return pr ? pr : r;
}

/* --json and -t: a terminal merges stdout and stderr and is for people. */
static int check_json_tty(const struct hutch_cli_args *a)
{
	if (a->json && a->tty)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--json does not go with -t: a terminal merges stdout and "
		                      "stderr; drop -t (-i streams stdin without one); see 'hutch "
		                      "%s --help'",
		                      a->verb->name);
	return 0;
}

/* hutch run's acknowledgement (hutch_cli_stream_run()), with the
 * command's stream ("E") unless a Ctrl-C came meanwhile (it waited,
 * blocked, for the acknowledgement: the command then never starts). */
struct run_ack {
	struct hutch_created *c;
	bool failed;
};

static int run_ack(void *ud, int fd)
{
	struct run_ack *k = ud;
	sigset_t pending;
	bool stop = hutch_cli_interrupted() ||
	            (sigpending(&pending) == 0 &&
	             (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM)));

	if (hutch_created_ack_run(k->c, stop ? -EBADF : fd) < 0) {
		k->failed = true;
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "sandbox %s: its supervisor went away",
		                      k->c->id);
	}
	if (fd >= 0 && stop) /* the signal came with the restored mask */
		return 128 + (hutch_cli_interrupted() ? hutch_cli_interrupted() : SIGINT);
	return 0;
}

static int cmd_run(struct hutch_cli_args *a)
{
	struct hutch_created c;
	struct run_ack k = { .c = &c };
	struct hutch_err err = { 0 };
	_cleanup_close_ int ours = -EBADF;
	int theirs = -EBADF, r, end;

	if (!a->cmd)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing command: hutch run [OPTIONS] -- CMD [ARG...]");
	r = check_json_tty(a);
	if (r)
		return r;
	/* Catch Ctrl-C before creating: dying during create would leave a
	 * detached sandbox behind for its whole TTL. */
	hutch_cli_catch_interrupts();
	a->cfg->no_limits = a->no_limits;
	a->cfg->api_on_demand = true; /* the command goes with the hand-over */
	/* The command made ready first goes with a cold create: the
	 * supervisor starts it in the turn the sandbox is ready, with no
	 * round trip to us (supervisor/sandbox.h). */
	(void)hutch_cli_run_prepare(a->cmd, a, &ours, &theirs);
	r = hutch_cli_create_run(a->cfg, a->progress, theirs, &c);
	closep(&theirs);
	if (r)
		return r;
	if (c.handover_fd >= 0 && c.command_sent) {
		hutch_created_sent_run(&c); /* a signal held since the answer comes now */
		r = hutch_cli_interrupted()
		            ? 128 + hutch_cli_interrupted()
		            : stream_command(&c.paths, c.sup_pidfd, a->cfg->max_output_bytes, a,
		                             ours, NULL, NULL);
	} else if (c.handover_fd >= 0) {
		/* the command goes with the acknowledgement (supervisor/sandbox.h) */
		r = stream_command(&c.paths, c.sup_pidfd, a->cfg->max_output_bytes, a, -EBADF,
		                   run_ack, &k);
		if (k.failed)
			return r;
	} else { /* a warm pool's sandbox: exec.sock, or POST /exec */
		r = hutch_cli_interrupted() ? 128 + hutch_cli_interrupted()
		                            : stream_command(&c.paths, -1, a->cfg->max_output_bytes,
		                                             a, -EBADF, NULL, NULL);
	}
	/* Deleted through the hand-over socket (supervisor/sandbox.h); the
	 * ordinary way when that did not answer; its supervisor's death
	 * said (what it left reaped as gc does). */
	end = hutch_created_end_run(&c, &err);
	if (end == -ESRCH)
		fprintf(stderr, "hutch: %s\n", err.msg);
	else if (end < 0)
		(void)delete_sandbox(&c.paths, true, true);
	return r;
}

static int cmd_create(struct hutch_cli_args *a)
{
	struct hutch_created c;
	int r;

	a->cfg->no_limits = a->no_limits;
	r = hutch_cli_create_sandbox(a->cfg, a->progress, &c);
	if (r)
		return r;
	/* --json: sandbox-json.c, without libcjson (its failure to make the
	 * text, -ENOMEM, is said as a write's) */
	r = a->json ? hutch_cli_print_created(a->cfg, &c) : printf("%s\n", c.id) < 0 ? -errno : 0;
	/* Handed over only once the id is out (supervisor/sandbox.h): if it
	 * could not be written, the sandbox goes with this process. */
	if (r < 0 || fflush(stdout) != 0 || ferror(stdout))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "write the id of sandbox %s: %s; deleting it", c.id,
		                      strerror(r < 0 ? -r : errno));
	if (hutch_created_ack(&c) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "sandbox %s: its supervisor went away before the hand-over",
		                      c.id);
	return 0;
}

static int cmd_exec(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	int r;

	if (a->detach) {
		r = hutch_cli_check_mode(a, DETACHED, "exec -d",
		                         " (it takes --cwd, -e, -i, --json)");
		return r ? r : hutch_cli_exec_detached(a); /* verb-procs.c */
	}
	r = hutch_cli_check_mode(a, ATTACHED, "exec", " without -d");
	if (!r)
		r = check_json_tty(a);
	if (r)
		return r;
	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch exec ID -- CMD [ARG...]");
	r = hutch_cli_resolve(a->pos[0], &p);
	if (r)
		return r;
	if (!a->cmd && !(a->tty && a->interactive))
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "missing command: hutch exec ID -- CMD [ARG...] (or exec -it ID "
		        "for a login shell)");
	r = hutch_cli_check_live(&p);
	if (r)
		return r;
	hutch_cli_catch_interrupts();
	/* The bytes kept of each stream (the sandbox's --max-output, from its
	 * state.json) matter to --json only: without it, no read and no parse
	 * on exec's path (issue 31). */
	return stream_command(&p, -1, a->json ? hutch_cli_capture_limit(&p) : 0, a, -EBADF, NULL,
	                      NULL);
}

static cJSON *describe(const char *id, bool *live)
{
	struct hutch_paths p;
	cJSON *state = NULL;

	(void)hutch_paths_init(hutch_runtime_dir(), id, &p);
	*live = hutch_state_is_live(&p) > 0;
	if (hutch_state_read(&p, &state) < 0) {
		state = cJSON_CreateObject();
		cJSON_AddStringToObject(state, "id", id);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(state, "live");
	cJSON_AddBoolToObject(state, "live", *live);
	/* Caught between mkdir and the first state.json, or a broken file. */
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(state, "status")))
		cJSON_AddStringToObject(state, "status", *live ? "creating" : "unknown");
	hutch_cli_sandbox_json(state, *live); /* a dead one says so: "dead" */
	return state;
}

/* ls's own columns. */
static void print_row(const cJSON *s)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(s, "config");
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(s, "expires_at_unix");
	char when[40] = "-", ports[256];

	if (cJSON_IsNumber(exp))
		hutch_format_time((int64_t)exp->valuedouble, when, sizeof(when));
	hutch_cli_ports_text(cJSON_GetObjectItemCaseSensitive(s, "ports"), ports, sizeof(ports));
	printf("%-12s  %-8s  %-8s  %-8s  %-20s  %-10s  %s\n",
	       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id")) ?: "?",
	       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "status")) ?: "?",
	       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "instance_type")) ?: "?",
	       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "network")) ?: "?", when,
	       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "region")) ?: "?", ports);
}

/* The sandboxes that pass the filters, as JSON, into arr, newest first. */
static int list_sandboxes(const struct hutch_cli_filters *f, cJSON *arr)
{
	_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	_cleanup_free_ cJSON **v = NULL;
	size_t n, m = 0;
	int r;

	r = hutch_state_list(hutch_runtime_dir(), &ids, &n);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "list '%s': %s", hutch_runtime_dir(),
		                      strerror(-r));
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	for (size_t i = 0; i < n; i++) {
		bool live;
		cJSON *s = describe(ids[i], &live);

		if (s && hutch_cli_filters_match(f, s))
			v[m++] = s;
		else
			cJSON_Delete(s);
	}
	qsort(v, m, sizeof(*v), hutch_cli_sandbox_cmp);
	for (size_t i = 0; i < m; i++)
		cJSON_AddItemToArray(arr, v[i]);
	return 0;
}

static int print_format(const struct hutch_cli_tmpl *t, cJSON *arr)
{
	_cleanup_free_ cJSON **v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*v));
	size_t n = 0;
	cJSON *s;

	if (!v)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	cJSON_ArrayForEach(s, arr) {
		v[n++] = s;
	}
	if (hutch_cli_tmpl_print(t, v, n, stdout) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

/* ls once its filters and template are checked. */
static int print_list(const struct hutch_cli_args *a, const struct hutch_cli_filters *f,
                      const struct hutch_cli_tmpl *t)
{
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	const cJSON *s;
	int r;

	r = arr ? list_sandboxes(f, arr) : hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (r)
		return r;
	if (t)
		return print_format(t, arr);
	if (a->json) {
		_cleanup_free_ char *text = cJSON_Print(arr);
		printf("%s\n", text);
		return 0;
	}
	if (!a->quiet)
		printf("%-12s  %-8s  %-8s  %-8s  %-20s  %-10s  %s\n", "ID", "STATUS", "TYPE",
		       "NETWORK", "EXPIRES", "REGION", "PORTS");
	cJSON_ArrayForEach(s, arr) {
		if (a->quiet)
			printf("%s\n",
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id")));
		else
			print_row(s);
	}
	return 0;
}

static int cmd_ls(struct hutch_cli_args *a)
{
	struct hutch_cli_tmpl *t = NULL;
	struct hutch_cli_filters f;
	struct hutch_err err = { 0 };
	int r;

	if (a->format && (a->json || a->quiet))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "give --format or %s, not both; see 'hutch ls --help'",
		                      a->json ? "--json" : "-q");
	if (hutch_cli_filters_parse(a->filter, &f, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s; see 'hutch ls --help'", err.msg);
	/* A bad template is refused before anything is listed. */
	r = a->format ? hutch_cli_tmpl_parse(a->format, &t, &err) : 0;
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)),
		                      "%s; see 'hutch ls --help'", err.msg);
	r = print_list(a, &f, t);
	hutch_cli_tmpl_free(t);
	return r;
}

/* An ended sandbox, for inspect: what its tombstone says, as JSON, so that
 * clients in other languages read the CLI's answer, never the file. */
static void print_ended(const char *id)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *t = NULL;
	char reason[64], when[40];
	int64_t at;

	if (hutch_gone_read(hutch_runtime_dir(), id, reason, sizeof(reason), &at) <= 0)
		return;
	hutch_format_time(at, when, sizeof(when));
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "status", reason);
	cJSON_AddStringToObject(o, "ended_at", when);
	cJSON_AddNumberToObject(o, "ended_at_unix", (double)at);
	t = cJSON_Print(o);
	if (t)
		printf("%s\n", t);
}

static int cmd_inspect(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch inspect ID");
	r = hutch_cli_resolve(a->pos[0], &p);
	if (r == HUTCH_EXIT_GONE)
		print_ended(a->pos[0]); /* and exit 66, the message on stderr */
	if (r)
		return r;
	r = hutch_client_request(p.sock, "GET", "/status", NULL, 0, &resp, &err);
	if (r < 0 && r != -ECONNREFUSED && r != -ENOENT && r != -ECONNRESET)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", err.msg); /* silent, or bad input */
	if (r < 0) { /* no supervisor: what state.json says */
		bool live;
		_cleanup_cjson_ cJSON *s = describe(p.id, &live);
		_cleanup_free_ char *t = cJSON_Print(s);
		printf("%s\n", t);
		return 0;
	}
	if (resp.status != 200) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	{
		_cleanup_cjson_ cJSON *j = cJSON_Parse(resp.body.data);
		_cleanup_free_ char *t = NULL;
		if (j)
			hutch_cli_sandbox_json(j, true);
		t = j ? cJSON_Print(j) : NULL;
		printf("%s\n", t ? t : resp.body.data);
	}
	hutch_http_resp_done(&resp);
	return 0;
}

static int cmd_rm(struct hutch_cli_args *a)
{
	bool quiet = a->quiet;
	int r, worst = 0;

	if (a->json) {
		quiet = true;
		removed_json = cJSON_CreateArray();
	}
	if (a->all) {
		_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
		size_t n;
		if (a->npos)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "give ids or --all, not both");
		r = hutch_state_list(hutch_runtime_dir(), &ids, &n);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "list: %s", strerror(-r));
		for (size_t i = 0; i < n; i++) {
			struct hutch_paths p;
			(void)hutch_paths_init(hutch_runtime_dir(), ids[i], &p);
			r = delete_sandbox(&p, quiet, a->force);
			if (r && !worst)
				worst = r;
		}
		print_removed();
		return worst;
	}
	if (!a->npos)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch rm ID... (or --all)");
	for (size_t i = 0; i < a->npos; i++) {
		struct hutch_paths p;
		/* Idempotent: a sandbox that ended (expired, deleted) is
		 * already what rm wants; -f also passes over unknown ids. */
		r = hutch_cli_resolve_as(
		        a->pos[i], HUTCH_CLI_GONE_OK | (a->force ? HUTCH_CLI_MISSING_OK : 0), &p);
		if (r == HUTCH_CLI_SKIP)
			continue;
		if (!r)
			r = delete_sandbox(&p, quiet, a->force);
		if (r && !worst)
			worst = r;
	}
	print_removed();
	return worst;
}

static int cmd_gc(struct hutch_cli_args *a)
{
	struct hutch_err err = { 0 };
	int r;

	/* Each part runs whatever the one before it met (a failed one must not
	 * keep the next one's processes alive: the disks' pool, say); the
	 * first failure is said and is the exit status. */
	int failed = 0;

	r = hutch_state_gc(hutch_runtime_dir(), &err);
	if (r < 0)
		failed = hutch_cli_fail(HUTCH_EXIT_FAILURE, "gc: %s", err.msg);
	r = r < 0 ? 0 : r;
	hutch_err_clear(&err);
	r += hutch_pool_gc(hutch_runtime_dir(), &err);
	hutch_err_clear(&err);
	/* The host's network state (mode all) is root's: an ordinary user
	 * made none and may touch none. */
	if (geteuid() == 0 && hutch_sandbox_net_gc(&err) < 0 && !failed)
		failed = hutch_cli_fail(HUTCH_EXIT_FAILURE, "gc of the host network state: %s",
		                        err.msg);
	hutch_err_clear(&err);
	/* lxcfs's /proc views stop once no sandbox of this dir uses them. */
	if (hutch_lxcfs_gc(hutch_runtime_dir(), &err) < 0 && !failed)
		failed = hutch_cli_fail(HUTCH_EXIT_FAILURE, "gc of the /proc views: %s", err.msg);
	hutch_disk_gc(hutch_runtime_dir()); /* the disks' templates, with none left */
	/* A killed fork --full's dump (its source's state gone first). */
	(void)hutch_cli_fork_full_gc(hutch_runtime_dir());
	if (failed)
		return failed;
	if (a->json)
		printf("{\"removed\": %d}\n", r);
	else
		printf("removed %d dead sandbox%s\n", r, r == 1 ? "" : "es");
	return 0;
}

const struct hutch_cli_verb hutch_verb_run = {
	.name = "run",
	.synopsis = "[OPTIONS] -- CMD [ARG...]",
	.about = "Create a sandbox, run CMD in it with its output streamed, delete the sandbox, "
	         "exit "
	         "with CMD's exit code.\n",
	.opts = run_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.command = true,
	.run = cmd_run,
};

const struct hutch_cli_verb hutch_verb_create = {
	.name = "create",
	.synopsis = "[OPTIONS] [--json] [--progress WHEN]",
	.about = "Create a sandbox and print its id (--json: its id, socket, expiry and options). "
	         "The output of its setup script and on_create hook is in its state directory "
	         "(setup.log) and shown on a terminal as it comes.\n",
	.opts = create_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.run = cmd_create,
};

const struct hutch_cli_verb hutch_verb_exec = {
	.name = "exec",
	.synopsis = "ID [OPTIONS] -- CMD [ARG...]",
	.about =
	        "Run CMD in a sandbox; stdout and stderr stream as they come; exit with CMD's exit "
	        "code. Ctrl-C kills CMD (and its children) only.\n\nWith -d (--detach), before or "
	        "after ID: start CMD in the background, print its process id (p1, p2...) and "
	        "return at once; see hutch ps, logs, kill. With -d -i its standard input stays "
	        "open: write to it with hutch stdin.\n",
	.opts = exec_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.command = true,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_exec,
};

const struct hutch_cli_verb hutch_verb_ls = {
	.name = "ls",
	.synopsis = "[-q | --json | --format TEMPLATE] [--filter KEY=VALUE]...",
	.about = "List sandboxes.\n",
	.opts = ls_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.run = cmd_ls,
};

const struct hutch_cli_verb hutch_verb_inspect = {
	.name = "inspect",
	.synopsis = "ID",
	.about = "Print a sandbox's status as JSON.\n",
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_inspect,
};

const struct hutch_cli_verb hutch_verb_rm = {
	.name = "rm",
	.synopsis = "[-q] [--json] ID... | --all",
	.about = "Delete sandboxes; returns when their processes are dead, their cgroups removed "
	         "and they are gone from ls (host links and mounts go right after). Prints the ids "
	         "removed (--json: a JSON array).\n",
	.opts = rm_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.id_pos = HUTCH_CLI_MANY,
	.run = cmd_rm,
};

const struct hutch_cli_verb hutch_verb_gc = {
	.name = "gc",
	.synopsis = "[--json]",
	.about =
	        "Remove the cgroups, state, host links and nftables rules that dead sandboxes left "
	        "behind (also run by every create); stop the runtime dir's lxcfs (the /proc views) "
	        "and its stock of disks made ahead of time and remove its disks' templates once no "
	        "sandbox uses them (only here, not at create). A sandbox whose supervisor died "
	        "ends with a tombstone (status supervisor-died), its journal, log and egress log "
	        "kept 7 days as an ended sandbox's.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.run = cmd_gc,
};
