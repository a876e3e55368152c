/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hutch command line: run, create, exec, ls, inspect, rm, gc, doctor,
 * version. Turns every error into one message that names the problem and
 * the fix, and a documented exit code (cli.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli-cp.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "fdutil.h"
#include "log.h"
#include "pool.h"
#include "sandbox.h"
#include "state.h"
#include "syscalls.h"

#define STDIN_MAX (6u << 20)

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

static const char *const main_usage =
        "usage: hutch COMMAND [OPTIONS]\n"
        "\n"
        "Local, isolated, throw-away Linux sandboxes with Python, a shell and /workspace.\n"
        "\n"
        "commands:\n"
        "  run [OPTIONS] -- CMD [ARG...]   create a sandbox, run CMD, print its output, delete it\n"
        "  create [OPTIONS]                create a sandbox and print its id\n"
        "  exec ID [OPTIONS] -- CMD...     run CMD in a sandbox, exit with its exit code\n"
        "  exec -d ID [OPTIONS] -- CMD...  start CMD in the background, print its process id\n"
        "  ps ID [--json]                  list a sandbox's background processes\n"
        "  logs ID PROC [-f]               print (-f: follow) a background process's output\n"
        "  kill ID PROC [--grace S]        stop a background process and all its children\n"
        "  ls [-q] [--json]                list sandboxes\n"
        "  inspect ID                      show a sandbox's status and options (JSON)\n"
        "  rm [--json] ID... | --all       delete sandboxes (dead and gone on return)\n"
        "  cp SRC DST                      copy files/directories: LOCAL ID:PATH or ID:PATH LOCAL\n"
        "  gc                              remove what dead sandboxes left behind\n"
        "  pool start|stop|ls              keep sandboxes of a configuration ready (warm pool)\n"
        "  doctor [--json]                 check that this host can run sandboxes\n"
        "  version [--json]                print the version\n"
        "\n"
        "'hutch COMMAND --help' shows a command's options. Exit codes: the command's own for\n"
        "run/exec; 64 usage error, 65 no such sandbox, 66 sandbox expired or deleted, 69 host\n"
        "not capable (not root, missing kernel feature), 70 other failure, 71 setup script or\n"
        "on_create hook failed, 124 timeout.\n"
        "State lives in $HUTCH_RUNTIME_DIR (default /run/hutch). Network: "
        "HUTCH_RESOLVER=IP[:PORT]\n"
        "is the DNS server the sandboxes' DNS stub asks (default: the host's first IPv4\n"
        "nameserver); HUTCH_NET_POOL=CIDR the addresses of --network all "
        "(default " HUTCH_NET_POOL_DEFAULT ").\n";

static const char *const create_options =
        "sandbox options:\n"
        "  --instance-type T   nano, micro, small, medium (default), large, xlarge, 2xlarge\n"
        "  --ttl S             delete the sandbox S seconds after creation (default 86400)\n"
        "  --idle-timeout S    freeze the sandbox after S seconds without requests; the next\n"
        "                      request wakes it; 0 = never (default)\n"
        "  --setup-script FILE run FILE (a shell script) once as appuser in /workspace before\n"
        "                      create returns; failure or timeout deletes the sandbox (exit 71)\n"
        "  --setup-timeout S   time limit of the setup script and of --on-create (default 600)\n"
        "  --on-create CMD     shell command run after the setup script, before create returns\n"
        "  --on-destroy CMD    shell command run at rm / DELETE and at TTL expiry, before the\n"
        "                      processes are killed (at most 30 s)\n"
        "  --region R          default nl-north-1; other regions allow only --network all\n"
        "  --network N         none (default: no network), all (any address beyond this\n"
        "                      machine), or allow:HOST[,HOST...] (only TLS to the listed\n"
        "                      names/IPs; HOST is name, name:port, ip or ip:port)\n"
        "  --host-port PORT    let the sandbox reach 127.0.0.1:PORT on the host as\n"
        "                      host.hutch.internal:PORT (TCP; repeatable; all or allow)\n"
        "  --max-output B      bytes of stdout/stderr kept per command (default 4194304)\n";

static const char *const exec_options =
        "command options:\n"
        "  --cwd DIR           working directory (default /workspace)\n"
        "  -e, --env K=V       set an environment variable (repeatable)\n"
        "  --timeout S         kill the command and its children after S seconds (exit 124)\n"
        "  -n, --no-stdin      do not pass standard input (it is passed when not a terminal)\n";

enum {
	OPT_INSTANCE_TYPE = 1000,
	OPT_TTL,
	OPT_IDLE,
	OPT_REGION,
	OPT_NETWORK,
	OPT_HOST_PORT,
	OPT_MAX_OUTPUT,
	OPT_SETUP_SCRIPT,
	OPT_SETUP_TIMEOUT,
	OPT_ON_CREATE,
	OPT_ON_DESTROY,
	OPT_CWD,
	OPT_TIMEOUT,
	OPT_JSON,
	OPT_ALL,
	OPT_HELP,
};

struct exec_opts {
	const char *cwd;
	double timeout;
	cJSON *env;
	bool no_stdin;
};

static bool is_root_needed(void)
{
	return geteuid() != 0;
}

static int config_opt(struct hutch_config *cfg, int opt, const char *arg)
{
	static const struct {
		int opt;
		const char *key;
	} map[] = {
		{ OPT_INSTANCE_TYPE, "instance_type" },
		{ OPT_TTL, "ttl_seconds" },
		{ OPT_IDLE, "idle_timeout_seconds" },
		{ OPT_REGION, "region" },
		{ OPT_NETWORK, "network" },
		{ OPT_HOST_PORT, "host_ports" },
		{ OPT_MAX_OUTPUT, "max_output_bytes" },
		{ OPT_SETUP_TIMEOUT, "setup_script_timeout_seconds" },
		{ OPT_ON_CREATE, "on_create" },
		{ OPT_ON_DESTROY, "on_destroy" },
	};
	struct hutch_err err = { 0 };

	if (opt == OPT_SETUP_SCRIPT) {
		/* The user's own file: symlinks are fine here. */
		_cleanup_close_ int fd = open(arg, O_RDONLY | O_CLOEXEC);
		_cleanup_free_ char *text = malloc(HUTCH_SETUP_SCRIPT_MAX + 2);
		ssize_t n = fd < 0  ? -errno
		            : !text ? -ENOMEM
		                    : hutch_read_all(fd, text, HUTCH_SETUP_SCRIPT_MAX + 1);
		if (n < 0)
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "cannot read --setup-script '%s': %s", arg,
			                      strerror((int)-n));
		text[n] = '\0';
		if (strlen(text) != (size_t)n)
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "--setup-script '%s' is not a text file", arg);
		if (hutch_config_set(cfg, "setup_script", text, &err) < 0)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "--setup-script '%s': %s", arg,
			                      err.msg);
		return 0;
	}

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (map[i].opt == opt) {
			if (hutch_config_set(cfg, map[i].key, arg, &err) < 0)
				return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
			return 0;
		}
	return 1; /* not a config option */
}

static int exec_opt(struct exec_opts *eo, int opt, const char *arg)
{
	const char *eq;
	char *end;

	switch (opt) {
	case OPT_CWD:
		eo->cwd = arg;
		return 0;
	case OPT_TIMEOUT:
		eo->timeout = strtod(arg, &end);
		if (*end || end == arg || eo->timeout < 0)
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "invalid --timeout '%s': give a number of seconds, e.g. 30", arg);
		return 0;
	case 'e':
		eq = strchr(arg, '=');
		if (!eq || eq == arg)
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "invalid --env '%s': write it as NAME=VALUE", arg);
		if (!eo->env)
			eo->env = cJSON_CreateObject();
		{
			char *name = strndup(arg, (size_t)(eq - arg));
			cJSON_DeleteItemFromObjectCaseSensitive(eo->env, name);
			cJSON_AddStringToObject(eo->env, name, eq + 1);
			free(name);
		}
		return 0;
	case 'n':
		eo->no_stdin = true;
		return 0;
	}
	return 1;
}

static const struct option create_longopts[] = {
	{ "instance-type", required_argument, NULL, OPT_INSTANCE_TYPE },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE },
	{ "region", required_argument, NULL, OPT_REGION },
	{ "network", required_argument, NULL, OPT_NETWORK },
	{ "host-port", required_argument, NULL, OPT_HOST_PORT },
	{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
	{ "setup-script", required_argument, NULL, OPT_SETUP_SCRIPT },
	{ "setup-timeout", required_argument, NULL, OPT_SETUP_TIMEOUT },
	{ "on-create", required_argument, NULL, OPT_ON_CREATE },
	{ "on-destroy", required_argument, NULL, OPT_ON_DESTROY },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, 'e' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "no-stdin", no_argument, NULL, 'n' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/* Read all of stdin when it is not a terminal. */
static int read_stdin(char **ret, size_t *ret_len)
{
	struct hutch_buf b;
	char chunk[65536];

	*ret = NULL;
	*ret_len = 0;
	if (isatty(0))
		return 0;
	hutch_buf_init(&b, STDIN_MAX + 1);
	for (;;) {
		ssize_t n = read(0, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR) {
			if (interrupted)
				break;
			continue;
		}
		if (n <= 0)
			break;
		(void)hutch_buf_append(&b, chunk, (size_t)n);
		if (b.truncated) {
			hutch_buf_done(&b);
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "standard input is larger than %u bytes: copy the data into the "
			        "sandbox as a file, or pass -n to not send stdin",
			        STDIN_MAX);
		}
	}
	*ret = hutch_utf8_sanitize(b.data ? b.data : "", b.len, NULL);
	*ret_len = *ret ? strlen(*ret) : 0;
	hutch_buf_done(&b);
	return 0;
}

/* ---- streaming a command ---- */

struct run_state {
	int exit_code;
	bool got_exit;
};

static int json_exit_code(const cJSON *res)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
	const cJSON *sig = cJSON_GetObjectItemCaseSensitive(res, "signal");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(res, "message");

	if (cJSON_IsString(msg))
		fprintf(stderr, "hutch: %s\n", msg->valuestring);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "timed_out")))
		return HUTCH_EXIT_TIMEOUT;
	if (cJSON_IsNumber(code))
		return code->valueint;
	if (cJSON_IsNumber(sig))
		return 128 + sig->valueint;
	return HUTCH_EXIT_FAILURE;
}

static int on_event(void *ud, const char *event, const char *data, size_t len)
{
	struct run_state *rs = ud;
	_cleanup_cjson_ cJSON *j = cJSON_ParseWithLength(data, len);
	const cJSON *d;

	if (!j)
		return 0;
	if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
		d = cJSON_GetObjectItemCaseSensitive(j, "data");
		if (cJSON_IsString(d))
			(void)hutch_write_all(event[3] == 'o' ? 1 : 2, d->valuestring,
			                      strlen(d->valuestring));
	} else if (!strcmp(event, "exit")) {
		rs->exit_code = json_exit_code(j);
		rs->got_exit = true;
	} else if (!strcmp(event, "error")) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
		fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : "error");
		rs->exit_code = HUTCH_EXIT_GONE;
		rs->got_exit = true;
	}
	return 0;
}

static int api_error_exit(long status, const char *body)
{
	_cleanup_cjson_ cJSON *j = cJSON_Parse(body);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");

	fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : body);
	if (status == 410)
		return HUTCH_EXIT_GONE;
	if (status == 400 || status == 413)
		return HUTCH_EXIT_USAGE;
	return HUTCH_EXIT_FAILURE;
}

static int stream_command(const char *sock, char **argv, const struct exec_opts *eo)
{
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject();
	_cleanup_free_ char *body = NULL, *in = NULL;
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE };
	cJSON *arr = cJSON_AddArrayToObject(req, "argv");
	size_t in_len = 0;
	int r;

	for (char **a = argv; *a; a++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(*a));
	if (eo->cwd)
		cJSON_AddStringToObject(req, "cwd", eo->cwd);
	if (eo->env)
		cJSON_AddItemReferenceToObject(req, "env", eo->env);
	if (eo->timeout > 0)
		cJSON_AddNumberToObject(req, "timeout", eo->timeout);
	if (!eo->no_stdin) {
		r = read_stdin(&in, &in_len);
		if (r)
			return r;
		if (interrupted) /* while reading stdin: CMD never starts */
			return 128 + interrupted;
		if (in_len)
			cJSON_AddStringToObject(req, "stdin", in);
	}
	body = cJSON_PrintUnformatted(req);
	if (!body)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	r = hutch_client_stream(sock, "/run_streaming", body, strlen(body), on_event, &rs,
	                        &interrupted, &resp, &err);
	if (r < 0) {
		hutch_http_resp_done(&resp);
		if (r == -ECANCELED)
			return 128 + (interrupted ? interrupted : SIGINT);
		if (rs.got_exit)
			return rs.exit_code; /* the last event came; a broken end does not matter */
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", err.msg);
	}
	if (resp.status != 200) {
		r = api_error_exit(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	hutch_http_resp_done(&resp);
	if (interrupted)
		return 128 + interrupted;
	if (!rs.got_exit)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "the sandbox closed the stream before the command "
		                      "finished");
	return rs.exit_code;
}

/* ---- resolving sandboxes ---- */

/* ---- verbs ---- */

/* The verb being run, for messages (exec parses options after its ID). */
static const char *cli_verb = "";

/* How the user spelled the option getopt_long() just returned. */
static void option_name(int opt, int longindex, char *buf, size_t size)
{
	if (longindex >= 0)
		snprintf(buf, size, "--%s", create_longopts[longindex].name);
	else
		snprintf(buf, size, "-%c", opt);
}

static int parse_common(int argc, char **argv, const char *usage, struct hutch_config *cfg,
                        struct exec_opts *eo, bool *json, bool *all, bool *quiet)
{
	int opt, longindex;
	char name[64];

	optind = 1;
	opterr = 0; /* our own messages, naming the verb and the fix */
	for (;;) {
		int r;
		longindex = -1;
		opt = getopt_long(argc, argv, "+:e:nq", create_longopts, &longindex);
		if (opt == -1)
			break;
		if (opt == OPT_HELP) {
			fputs(usage, stdout);
			exit(0);
		}
		if (opt == '?') {
			if (optopt > 0 && optopt < 128)
				snprintf(name, sizeof(name), "-%c", optopt);
			else
				snprintf(name, sizeof(name), "%s", argv[optind - 1]);
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unknown option '%s' for '%s'; see 'hutch %s --help'",
			                      name, cli_verb, cli_verb);
		}
		if (opt == ':')
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "option '%s' needs a value; see 'hutch %s --help'",
			                      argv[optind - 1], cli_verb);
		if (opt == OPT_JSON && json) {
			*json = true;
			continue;
		}
		if (opt == OPT_ALL && all) {
			*all = true;
			continue;
		}
		if (opt == 'q' && quiet) {
			*quiet = true;
			continue;
		}
		r = cfg ? config_opt(cfg, opt, optarg) : 1;
		if (r == 1 && eo)
			r = exec_opt(eo, opt, optarg);
		if (r == 1) {
			option_name(opt, longindex, name, sizeof(name));
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "option '%s' does not apply to '%s'; see 'hutch %s --help'", name,
			        cli_verb, cli_verb);
		}
		if (r)
			return r;
	}
	return 0;
}

/* Host-wide network settings come from the environment (tests point the
 * resolver at their own DNS server this way). */
static int config_from_env(struct hutch_config *cfg)
{
	static const struct {
		const char *var, *key;
	} vars[] = { { "HUTCH_RESOLVER", "resolver" }, { "HUTCH_NET_POOL", "net_pool" } };
	struct hutch_err err = { 0 };

	for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
		const char *v = getenv(vars[i].var);
		if (v && *v && hutch_config_set(cfg, vars[i].key, v, &err) < 0)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s=%s: %s", vars[i].var, v,
			                      err.msg);
	}
	return 0;
}

static int create_sandbox(struct hutch_config *cfg, struct hutch_created *c)
{
	struct hutch_setup_failure setup = { 0 };
	struct hutch_err err = { 0 };
	int r;

	if (is_root_needed())
		return hutch_cli_fail(
		        HUTCH_EXIT_NOT_CAPABLE,
		        "creating a sandbox needs root for now: run 'sudo hutch ...' (a service "
		        "for non-root users comes later)");
	r = config_from_env(cfg);
	if (r)
		return r;
	r = hutch_config_validate(cfg, &err);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	r = hutch_pool_claim(cfg, hutch_runtime_dir(), c, &err);
	if (r > 0)
		return 0;      /* a warm sandbox from `hutch pool` */
	hutch_err_clear(&err); /* no pool, or nothing ready: create cold */
	r = hutch_sandbox_create(cfg, hutch_runtime_dir(), c, &setup, &err);
	if (r == -ECANCELED && setup.step[0]) {
		size_t n = strlen(setup.tail);
		fprintf(stderr, "hutch: cannot create sandbox: %s; sandbox %s was deleted\n",
		        err.msg, setup.id);
		if (n) {
			fprintf(stderr, "hutch: last %zu bytes of its output:\n%s%s", n, setup.tail,
			        setup.tail[n - 1] == '\n' ? "" : "\n");
		}
		return HUTCH_EXIT_SETUP;
	}
	if (r < 0)
		return hutch_cli_fail(
		        r == -EPERM || r == -ENOSYS || r == -EOPNOTSUPP ? HUTCH_EXIT_NOT_CAPABLE
		                                                        : HUTCH_EXIT_FAILURE,
		        "cannot create sandbox: %s (run 'hutch doctor' to check this host)",
		        err.msg);
	return 0;
}

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

static int delete_sandbox(const struct hutch_paths *p, bool quiet)
{
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	int r;

	r = hutch_client_request(p->sock, "DELETE", "/", NULL, 0, &resp, &err);
	if (r < 0) {
		/* No supervisor answers: clean up what it left. */
		r = hutch_state_reap(hutch_runtime_dir(), p->id, &err);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "remove sandbox %s: %s", p->id,
			                      err.msg);
		if (r == 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE,
			                      "sandbox %s is alive but does not answer on '%s'",
			                      p->id, p->sock);
	} else {
		long status = resp.status;
		hutch_http_resp_done(&resp);
		if (status != 200 && status != 410)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "delete sandbox %s: HTTP %ld",
			                      p->id, status);
		/* The supervisor answers once every process of the sandbox
		 * is dead and it can no longer be found; it removes the
		 * cgroups and host link right after, then exits (gc does it
		 * if it dies first). */
	}
	if (removed_json)
		cJSON_AddItemToArray(removed_json, cJSON_CreateString(p->id));
	if (!quiet)
		printf("%s\n", p->id);
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	struct hutch_config cfg;
	struct exec_opts eo = { 0 };
	struct hutch_created c;
	struct sigaction sa = { .sa_handler = on_interrupt };
	int r;

	hutch_config_init(&cfg);
	r = parse_common(argc, argv,
	                 "usage: hutch run [OPTIONS] -- CMD [ARG...]\n\nCreate a sandbox, run CMD "
	                 "in it with its output streamed, delete the sandbox, exit with CMD's exit "
	                 "code.\n\n",
	                 &cfg, &eo, NULL, NULL, NULL);
	if (r)
		return r;
	if (optind >= argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing command: hutch run [OPTIONS] -- CMD [ARG...]");
	/* Catch Ctrl-C before creating: dying during create would leave a
	 * detached sandbox behind for its whole TTL. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	r = create_sandbox(&cfg, &c);
	if (r)
		return r;
	if (interrupted)
		r = 128 + interrupted;
	else
		r = stream_command(c.paths.sock, argv + optind, &eo);
	(void)delete_sandbox(&c.paths, true);
	cJSON_Delete(eo.env);
	return r;
}

static int cmd_create(int argc, char **argv)
{
	struct hutch_config cfg;
	struct hutch_created c;
	bool json = false;
	int r;

	hutch_config_init(&cfg);
	r = parse_common(argc, argv, "usage: hutch create [OPTIONS] [--json]\n\n", &cfg, NULL,
	                 &json, NULL, NULL);
	if (r)
		return r;
	if (optind < argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	r = create_sandbox(&cfg, &c);
	if (r)
		return r;
	if (json) {
		_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
		_cleanup_free_ char *t = NULL;
		char when[40];
		hutch_format_time(c.expires_at, when, sizeof(when));
		cJSON_AddStringToObject(o, "id", c.id);
		cJSON_AddStringToObject(o, "socket", c.paths.sock);
		cJSON_AddStringToObject(o, "expires_at", when);
		cJSON_AddNumberToObject(o, "expires_at_unix", (double)c.expires_at);
		cJSON_AddItemToObject(o, "config", hutch_config_to_json(&cfg));
		t = cJSON_Print(o);
		printf("%s\n", t);
	} else {
		printf("%s\n", c.id);
	}
	return 0;
}

static int cmd_exec(int argc, char **argv)
{
	struct exec_opts eo = { 0 };
	struct hutch_paths p;
	struct sigaction sa = { .sa_handler = on_interrupt };
	const char *usage =
	        "usage: hutch exec ID [OPTIONS] -- CMD [ARG...]\n\nRun CMD in a "
	        "sandbox; stdout and stderr stream as they come; exit with CMD's exit "
	        "code. Ctrl-C kills CMD (and its children) only.\n\nWith -d (--detach), "
	        "before or after ID: start CMD in the background, print its process\n"
	        "id (p1, p2...) and return at once; see hutch ps, logs, kill.\n\n";
	int r;

	for (int i = 1; i < argc && i < 3; i++)
		if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--detach"))
			return hutch_cli_exec_detached(argc, argv); /* cli-procs.c */
	if (argc >= 2 && !strcmp(argv[1], "--help")) {
		printf("%s%s", usage, exec_options);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-')
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch exec ID -- CMD [ARG...]");
	r = hutch_cli_resolve(argv[1], &p);
	if (r)
		return r;
	r = parse_common(argc - 1, argv + 1, usage, NULL, &eo, NULL, NULL, NULL);
	if (r)
		return r;
	if (optind + 1 >= argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing command: hutch exec ID -- CMD [ARG...]");
	if (hutch_state_is_live(&p) == 0)
		return hutch_cli_fail(
		        HUTCH_EXIT_GONE,
		        "sandbox %s is not running: its supervisor is gone (killed or crashed); "
		        "run 'hutch gc' to remove what it left",
		        p.id);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	r = stream_command(p.sock, argv + optind + 1, &eo);
	cJSON_Delete(eo.env);
	return r;
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
	return state;
}

static int cmd_ls(int argc, char **argv)
{
	_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	_cleanup_cjson_ cJSON *arr = NULL;
	bool json = false, quiet = false;
	size_t n;
	int r;

	r = parse_common(argc, argv, "usage: hutch ls [-q] [--json]\n\nList sandboxes.\n", NULL,
	                 NULL, &json, NULL, &quiet);
	if (r)
		return r;
	r = hutch_state_list(hutch_runtime_dir(), &ids, &n);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "list '%s': %s", hutch_runtime_dir(),
		                      strerror(-r));
	if (json)
		arr = cJSON_CreateArray();
	else if (!quiet)
		printf("%-12s  %-8s  %-8s  %-8s  %-20s  %s\n", "ID", "STATUS", "TYPE", "NETWORK",
		       "EXPIRES", "REGION");
	for (size_t i = 0; i < n; i++) {
		bool live;
		cJSON *s = describe(ids[i], &live);
		const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(s, "config");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(s, "status");
		const cJSON *exp = cJSON_GetObjectItemCaseSensitive(s, "expires_at");
		char when[40] = "-";

		if (quiet) {
			printf("%s\n", ids[i]);
			cJSON_Delete(s);
			continue;
		}
		if (json) {
			cJSON_AddItemToArray(arr, s);
			continue;
		}
		if (cJSON_IsNumber(exp))
			hutch_format_time((int64_t)exp->valuedouble, when, sizeof(when));
		printf("%-12s  %-8s  %-8s  %-8s  %-20s  %s\n", ids[i],
		       live ? (cJSON_IsString(st) ? st->valuestring : "?") : "dead",
		       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "instance_type"))
		               ?: "?",
		       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "network"))
		               ?: "?",
		       when,
		       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "region"))
		               ?: "?");
		cJSON_Delete(s);
	}
	if (json) {
		_cleanup_free_ char *t = cJSON_Print(arr);
		printf("%s\n", t);
	}
	return 0;
}

static int cmd_inspect(int argc, char **argv)
{
	struct hutch_paths p;
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	int r;

	r = parse_common(argc, argv,
	                 "usage: hutch inspect ID\n\nPrint a sandbox's status as JSON.\n", NULL,
	                 NULL, NULL, NULL, NULL);
	if (r)
		return r;
	if (optind >= argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch inspect ID");
	r = hutch_cli_resolve(argv[optind], &p);
	if (r)
		return r;
	r = hutch_client_request(p.sock, "GET", "/status", NULL, 0, &resp, &err);
	if (r < 0) {
		bool live;
		_cleanup_cjson_ cJSON *s = describe(p.id, &live);
		_cleanup_free_ char *t = cJSON_Print(s);
		printf("%s\n", t);
		return 0;
	}
	if (resp.status != 200) {
		r = api_error_exit(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	{
		_cleanup_cjson_ cJSON *j = cJSON_Parse(resp.body.data);
		_cleanup_free_ char *t = j ? cJSON_Print(j) : NULL;
		printf("%s\n", t ? t : resp.body.data);
	}
	hutch_http_resp_done(&resp);
	return 0;
}

static int cmd_rm(int argc, char **argv)
{
	bool all = false, quiet = false, json = false;
	int r, worst = 0;

	r = parse_common(
	        argc, argv,
	        "usage: hutch rm [-q] [--json] ID... | --all\n\nDelete sandboxes; returns "
	        "when their processes are dead and they are gone from ls (cgroups and host "
	        "links go right after). Prints the ids removed (--json: a JSON array).\n",
	        NULL, NULL, &json, &all, &quiet);
	if (r)
		return r;
	if (json) {
		quiet = true;
		removed_json = cJSON_CreateArray();
	}
	if (all) {
		_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
		size_t n;
		if (optind < argc)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "give ids or --all, not both");
		r = hutch_state_list(hutch_runtime_dir(), &ids, &n);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "list: %s", strerror(-r));
		for (size_t i = 0; i < n; i++) {
			struct hutch_paths p;
			(void)hutch_paths_init(hutch_runtime_dir(), ids[i], &p);
			r = delete_sandbox(&p, quiet);
			if (r && !worst)
				worst = r;
		}
		print_removed();
		return worst;
	}
	if (optind >= argc)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch rm ID... (or --all)");
	for (int i = optind; i < argc; i++) {
		struct hutch_paths p;
		r = hutch_cli_resolve(argv[i], &p);
		if (!r)
			r = delete_sandbox(&p, quiet);
		if (r && !worst)
			worst = r;
	}
	print_removed();
	return worst;
}

static int cmd_gc(int argc, char **argv)
{
	struct hutch_err err = { 0 };
	bool json = false;
	int r;

	r = parse_common(argc, argv,
	                 "usage: hutch gc [--json]\n\nRemove the cgroups, state, host links and "
	                 "nftables rules that dead sandboxes left behind (also run by every "
	                 "create).\n",
	                 NULL, NULL, &json, NULL, NULL);
	if (r)
		return r;
	r = hutch_state_gc(hutch_runtime_dir(), &err);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "gc: %s", err.msg);
	r += hutch_pool_gc(hutch_runtime_dir(), &err);
	if (hutch_sandbox_net_gc(&err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "gc of the host network state: %s",
		                      err.msg);
	if (json)
		printf("{\"removed\": %d}\n", r);
	else
		printf("removed %d dead sandbox%s\n", r, r == 1 ? "" : "es");
	return 0;
}

static const char pool_usage[] =
        "usage: hutch pool start [--size N] [OPTIONS]   keep N sandboxes of this configuration\n"
        "                                             ready (default 4); returns once they are\n"
        "       hutch pool stop [--all | OPTIONS]      stop that pool, deleting its ready "
        "sandboxes\n"
        "       hutch pool ls [--json]                 list the pools\n"
        "\n"
        "A keeper process per configuration (instance type, network, host ports) keeps N\n"
        "sandboxes created; 'hutch create' and 'hutch run' with that configuration take one\n"
        "and give it their own TTL, idle timeout, region, output cap and on_destroy, so they\n"
        "only hand a sandbox over. A pooled sandbox is used once; the keeper replaces it.\n"
        "Creations with --setup-script or --on-create are never served from a pool.\n"
        "OPTIONS: --instance-type, --network, --host-port (as for create).\n";

static int cmd_pool(int argc, char **argv)
{
	struct hutch_config cfg;
	struct hutch_err err = { 0 };
	const char *sub = argc > 1 ? argv[1] : NULL;
	unsigned long size = 4;
	bool json = false, all = false;
	int r, i, n = 0;
	char **rest;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(pool_usage, sub ? stdout : stderr);
		return sub ? 0 : HUTCH_EXIT_USAGE;
	}
	if (strcmp(sub, "start") && strcmp(sub, "stop") && strcmp(sub, "ls"))
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "unknown pool command '%s': use start, stop or ls; see 'hutch "
		        "pool --help'",
		        sub);
	/* --size is ours; everything else goes to the create options. */
	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (!rest)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	rest[n++] = argv[1];
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--size") || !strncmp(argv[i], "--size=", 7)) {
			const char *v = argv[i][6] == '=' ? argv[i] + 7
			                : i + 1 < argc    ? argv[++i]
			                                  : "";
			char *end;
			size = strtoul(v, &end, 10);
			if (!*v || *end || size < 1 || size > HUTCH_POOL_MAX_SIZE ||
			    strcmp(sub, "start")) {
				free(rest);
				return hutch_cli_fail(
				        HUTCH_EXIT_USAGE,
				        strcmp(sub, "start")
				                ? "--size applies to 'hutch pool start' only"
				                : "invalid --size '%s': give a number of "
				                  "sandboxes from 1 to %d",
				        v, HUTCH_POOL_MAX_SIZE);
			}
			continue;
		}
		rest[n++] = argv[i];
	}
	hutch_config_init(&cfg);
	r = parse_common(n, rest, pool_usage, strcmp(sub, "ls") ? &cfg : NULL, NULL,
	                 !strcmp(sub, "ls") ? &json : NULL, !strcmp(sub, "stop") ? &all : NULL,
	                 NULL);
	if (!r && optind < n)
		r = hutch_cli_fail(HUTCH_EXIT_USAGE, "unexpected argument '%s'", rest[optind]);
	free(rest);
	if (r)
		return r;
	if (!strcmp(sub, "ls")) {
		_cleanup_cjson_ cJSON *arr = hutch_pool_list(hutch_runtime_dir());
		const cJSON *p;
		if (json) {
			_cleanup_free_ char *t = cJSON_Print(arr);
			printf("%s\n", t);
			return 0;
		}
		printf("%-40s %5s %5s %8s\n", "POOL", "SIZE", "READY", "KEEPER");
		cJSON_ArrayForEach(p, arr) {
			printf("%-40s %5d %5d %8d%s\n",
			       cJSON_GetStringValue(cJSON_GetObjectItem(p, "key")),
			       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "size")),
			       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "ready")),
			       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "keeper_pid")),
			       cJSON_IsTrue(cJSON_GetObjectItem(p, "alive")) ? "" : " (dead)");
		}
		return 0;
	}
	if (is_root_needed())
		return hutch_cli_fail(
		        HUTCH_EXIT_NOT_CAPABLE,
		        "a pool creates sandboxes, which needs root for now: run 'sudo "
		        "hutch pool ...'");
	r = config_from_env(&cfg);
	if (r)
		return r;
	if (hutch_config_validate(&cfg, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	if (!strcmp(sub, "stop")) {
		char key[HUTCH_POOL_KEY_MAX];
		hutch_pool_key(&cfg, key, sizeof(key));
		r = hutch_pool_stop(hutch_runtime_dir(), all ? NULL : key, &err);
		if (r == 0 && !all)
			return hutch_cli_fail(
			        HUTCH_EXIT_NOT_FOUND,
			        "no pool runs for this configuration (%s); 'hutch pool "
			        "ls' lists them",
			        key);
		printf("stopped %d pool%s\n", r, r == 1 ? "" : "s");
		return 0;
	}
	{
		pid_t pid = 0;
		char key[HUTCH_POOL_KEY_MAX];
		hutch_pool_key(&cfg, key, sizeof(key));
		r = hutch_pool_start(&cfg, (unsigned)size, hutch_runtime_dir(), &pid, &err);
		if (r == -EEXIST || r == -EINVAL)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "cannot start the pool: %s",
			                      err.msg);
		printf("pool %s: %lu sandboxes ready (keeper pid %d)\n", key, size, (int)pid);
	}
	return 0;
}

static int cmd_doctor(int argc, char **argv)
{
	bool json = false;
	int r = parse_common(argc, argv,
	                     "usage: hutch doctor [--json]\n\nCheck namespaces, user namespaces, "
	                     "cgroups v1/v2, seccomp, the mount API, python3, overlayfs and "
	                     "nftables; say what is missing and how to fix it.\n",
	                     NULL, NULL, &json, NULL, NULL);
	if (r)
		return r;
	return hutch_doctor(json);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
		const char *const *extra;
	} verbs[] = {
		{ "run", cmd_run, NULL },         { "create", cmd_create, NULL },
		{ "exec", cmd_exec, NULL },       { "ls", cmd_ls, NULL },
		{ "inspect", cmd_inspect, NULL }, { "rm", cmd_rm, NULL },
		{ "gc", cmd_gc, NULL },           { "doctor", cmd_doctor, NULL },
		{ "ps", hutch_cli_ps, NULL },     { "logs", hutch_cli_logs, NULL },
		{ "kill", hutch_cli_kill, NULL }, { "cp", hutch_cli_cp, NULL },
		{ "pool", cmd_pool, NULL },
	};

	hutch_proctitle_init(argc, argv);
	hutch_log_init(2, getenv("HUTCH_DEBUG") ? HUTCH_LOG_DEBUG : HUTCH_LOG_WARN, "hutch");
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(main_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? HUTCH_EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		if (argc >= 3 && !strcmp(argv[2], "--json"))
			printf("{\"version\": \"%s\"}\n", HUTCH_VERSION);
		else if (argc >= 3 && !strcmp(argv[2], "--help"))
			printf("usage: hutch version [--json]\n\nPrint hutch's version.\n");
		else if (argc >= 3)
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "unexpected argument '%s'; see 'hutch version --help'", argv[2]);
		else
			printf("hutch %s\n", HUTCH_VERSION);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		if (strcmp(argv[1], verbs[i].name) != 0)
			continue;
		cli_verb = verbs[i].name;
		if ((!strcmp(argv[1], "run") || !strcmp(argv[1], "create")) && argc >= 3 &&
		    !strcmp(argv[2], "--help")) {
			printf("usage: hutch %s [OPTIONS]%s\n\n%s%s", argv[1],
			       argv[1][0] == 'r' ? " -- CMD [ARG...]" : " [--json]", create_options,
			       argv[1][0] == 'r' ? exec_options : "");
			return 0;
		}
		return verbs[i].fn(argc - 1, argv + 1);
	}
	return hutch_cli_fail(HUTCH_EXIT_USAGE, "unknown command '%s'; see 'hutch --help'",
	                      argv[1]);
}
