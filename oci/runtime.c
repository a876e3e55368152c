/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI runtime command line (see oci.h): global options as runc takes
 * them (--root, --log, --log-format, --systemd-cgroup, --debug), then
 * create, start, state, kill, delete, features and run. Errors go to stderr
 * and, with --log, to that file (one JSON object per line with
 * --log-format json, as containerd reads runc's); the exit status is 1,
 * as runc's.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"
#include "oci.h"
#include "sandbox.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

#define WAIT_MS 10000 /* start and delete --force wait at most this for the supervisor */

struct hutch_oci_opts hutch_oci_opts = { .root = HUTCH_OCI_DEFAULT_ROOT, .log_fd = -1 };

int hutch_oci_fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "hutch oci: %s\n", msg);
	if (hutch_oci_opts.log_fd >= 0) {
		char line[1400];
		if (hutch_oci_opts.log_json) {
			_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
			_cleanup_free_ char *text = NULL;
			char ts[40];
			time_t now = time(NULL);
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
			cJSON_AddStringToObject(j, "level", "error");
			cJSON_AddStringToObject(j, "msg", msg);
			cJSON_AddStringToObject(j, "time", ts);
			text = cJSON_PrintUnformatted(j);
			snprintf(line, sizeof(line), "%s\n", text ? text : "{}");
		} else {
			snprintf(line, sizeof(line), "level=error msg=\"%s\"\n", msg);
		}
		(void)hutch_write_all(hutch_oci_opts.log_fd, line, strlen(line));
	}
	return 1;
}

static int fail_err(const struct hutch_err *err)
{
	return hutch_oci_fail("%s", err->msg);
}

/* Read bundle/config.json, bounded. */
static int read_config(const char *bundle, char **ret, size_t *ret_len, struct hutch_err *err)
{
	char path[4200];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/config.json", bundle);
	n = hutch_read_file_alloc_at(AT_FDCWD, path, HUTCH_OCI_CONFIG_MAX + 1, ret);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '%s'", path);
	*ret_len = (size_t)n;
	return 0;
}

static int write_state_json(const struct hutch_oci_paths *p, const char *id, const char *bundle,
                            const struct hutch_oci_spec *spec, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	struct timespec now;
	char ts[64];

	clock_gettime(CLOCK_REALTIME, &now);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", gmtime(&now.tv_sec));
	snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%09ldZ", now.tv_nsec);
	cJSON_AddStringToObject(j, "id", id);
	cJSON_AddStringToObject(j, "bundle", bundle);
	cJSON_AddStringToObject(j, "created", ts);
	if (spec->annotations)
		cJSON_AddItemToObject(j, "annotations", cJSON_Parse(spec->annotations));
	/* start and delete run poststart and poststop from here: a
	 * config.json changed after create changes nothing. */
	if (spec->hooks_json)
		cJSON_AddItemToObject(j, "hooks", cJSON_Parse(spec->hooks_json));
	text = cJSON_PrintUnformatted(j);
	if (!text || hutch_write_file_at(AT_FDCWD, p->state, text, 0600) < 0)
		return hutch_err_set_errno(err, -EIO, "write '%s'", p->state);
	return 0;
}

static int write_pid_file(const char *path, pid_t pid)
{
	char tmp[4200], num[24];

	snprintf(tmp, sizeof(tmp), "%s.hutch-tmp", path);
	snprintf(num, sizeof(num), "%d", (int)pid);
	if (hutch_write_file_at(AT_FDCWD, tmp, num, 0644) < 0 || rename(tmp, path) < 0)
		return -errno;
	return 0;
}

/* The container's state dir with its lock, FIFO and state.json. */
static int make_state_dir(const struct hutch_oci_paths *p, const char *id, const char *bundle,
                          const struct hutch_oci_spec *spec, struct hutch_container *ct,
                          struct hutch_err *err)
{
	int r = hutch_mkdir_p_at(AT_FDCWD, hutch_oci_opts.root, 0711);

	if (r < 0)
		return hutch_err_set_errno(err, r, "create --root '%s'", hutch_oci_opts.root);
	if (mkdir(p->dir, 0711) < 0)
		return errno == EEXIST
		               ? hutch_err_set(err, -EEXIST, "container %s exists already", id)
		               : hutch_err_set_errno(err, -errno, "create '%s'", p->dir);
	ct->lock_fd = open(p->lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (ct->lock_fd < 0 || flock(ct->lock_fd, LOCK_EX) < 0)
		return hutch_err_set_errno(err, -errno, "lock '%s'", p->lock);
	if (mkfifo(p->fifo, 0600) < 0)
		return hutch_err_set_errno(err, -errno, "create '%s'", p->fifo);
	snprintf(ct->status_path, sizeof(ct->status_path), "%s", p->status);
	snprintf(ct->fifo_path, sizeof(ct->fifo_path), "%s", p->fifo);
	/* A unix socket's path is short: with a longer --root, no exec. */
	if (strlen(p->exec) < sizeof(ct->exec_path))
		memcpy(ct->exec_path, p->exec, strlen(p->exec) + 1);
	return write_state_json(p, id, bundle, spec, err);
}

/* The caller's fds 3 .. 3+n-1, as close-on-exec copies above them (the
 * supervisor closes every inherited fd that is not). */
static int take_preserved(unsigned int n, int *ret)
{
	for (unsigned int i = 0; i < n; i++) {
		ret[i] = fcntl(3 + (int)i, F_DUPFD_CLOEXEC, 3 + (int)n);
		if (ret[i] < 0) {
			hutch_close_many(ret, i);
			return hutch_oci_fail("--preserve-fds %u: fd %u is not open", n, 3 + i);
		}
	}
	return 0;
}

/* Hooks the supervisor runs (create's and startContainer): without them
 * it has nothing to call. */
static bool has_supervisor_hooks(const struct hutch_oci_hooks *h)
{
	return h->n[HUTCH_OCI_HOOK_PRESTART] || h->n[HUTCH_OCI_HOOK_CREATE_RUNTIME] ||
	       h->n[HUTCH_OCI_HOOK_CREATE_CONTAINER] || h->n[HUTCH_OCI_HOOK_START_CONTAINER];
}

int hutch_oci_create(const struct hutch_oci_create_args *a, pid_t *ret_pid)
{
	static struct hutch_oci_spec spec; /* the supervisor's copy lives on */
	static struct hutch_container ct;
	static struct hutch_config cfg;
	static struct hutch_oci_hooks_ctx hooks_ctx;
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_created created;
	struct hutch_err err = { 0 };
	_cleanup_free_ char *text = NULL, *bundle = NULL;
	size_t len = 0;
	int r;

	if (hutch_oci_paths_init(hutch_oci_opts.root, a->id, &p, &err) < 0)
		return fail_err(&err);
	if (take_preserved(a->preserve_fds, ct.preserve_fds))
		return 1;
	ct.npreserve = a->preserve_fds;
	bundle = realpath(a->bundle ? a->bundle : ".", NULL);
	if (!bundle)
		return hutch_oci_fail("bundle '%s': %s", a->bundle ? a->bundle : ".",
		                      strerror(errno));
	if (read_config(bundle, &text, &len, &err) < 0 ||
	    hutch_oci_spec_parse(text, len, &spec, &err) < 0)
		return fail_err(&err);
	if (spec.terminal && !a->console_socket)
		return hutch_oci_fail("process.terminal: a terminal needs --console-socket");
	if (!spec.terminal && a->console_socket)
		return hutch_oci_fail("--console-socket: process.terminal is not set");
	if (a->console_socket && strlen(a->console_socket) >= sizeof(ct.console_socket))
		return hutch_oci_fail("--console-socket: longer than %zu bytes",
		                      sizeof(ct.console_socket) - 1);
	ct.terminal = spec.terminal;
	if (a->console_socket)
		snprintf(ct.console_socket, sizeof(ct.console_socket), "%s", a->console_socket);
	hutch_config_init(&cfg);
	ct.lock_fd = -1;
	if (hutch_oci_map(&spec, bundle, &cfg, &ct, &err) < 0)
		return fail_err(&err);
	if (has_supervisor_hooks(&spec.hooks)) {
		hooks_ctx.hooks = &spec.hooks;
		hooks_ctx.paths = p;
		snprintf(hooks_ctx.id, sizeof(hooks_ctx.id), "%s", a->id);
		ct.run_hooks = hutch_oci_hooks_supervisor;
		ct.hooks_ctx = &hooks_ctx;
	}
	r = make_state_dir(&p, a->id, bundle, &spec, &ct, &err);
	if (r >= 0)
		r = hutch_sandbox_create_container(&cfg, &ct, hutch_runtime_dir(), &created, NULL,
		                                   -1, &err);
	if (ct.lock_fd >= 0)
		close(ct.lock_fd);
	if (r < 0) {
		if (r != -EEXIST)
			(void)hutch_rm_rf_at(AT_FDCWD, p.dir);
		return fail_err(&err);
	}
	if (hutch_oci_state_read(&p, a->id, &st, &err) < 0)
		return fail_err(&err);
	hutch_oci_state_done(&st);
	if (a->pid_file && (r = write_pid_file(a->pid_file, st.pid)) < 0)
		return hutch_oci_fail("--pid-file '%s': %s", a->pid_file, strerror(-r));
	if (ret_pid)
		*ret_pid = st.pid;
	return 0;
}

int hutch_oci_parse_preserve_fds(const char *arg, unsigned int *ret)
{
	char *end;
	unsigned long n = strtoul(arg, &end, 10);

	if (!*arg || *end || arg[0] == '-' || n > HUTCH_SPAWN_MAX_EXTRA_FDS)
		return hutch_oci_fail("--preserve-fds: '%.32s' is not a number of fds from 0 to %d",
		                      arg, HUTCH_SPAWN_MAX_EXTRA_FDS);
	*ret = (unsigned int)n;
	return 0;
}

int hutch_oci_parse_create(int argc, char **argv, struct hutch_oci_create_args *a, bool *detach)
{
	static const struct option lo[] = {
		{ "bundle", required_argument, NULL, 'b' },
		{ "pid-file", required_argument, NULL, 'p' },
		{ "console-socket", required_argument, NULL, 'c' },
		{ "detach", no_argument, NULL, 'd' },
		{ "no-pivot", no_argument, NULL, 'n' },
		{ "no-new-keyring", no_argument, NULL, 'k' },
		{ "preserve-fds", required_argument, NULL, 'f' },
		{ "keep", no_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+b:d", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			a->bundle = optarg;
			break;
		case 'p':
			a->pid_file = optarg;
			break;
		case 'c':
			a->console_socket = optarg;
			break;
		case 'd':
			if (detach)
				*detach = true;
			break;
		case 'f':
			if (hutch_oci_parse_preserve_fds(optarg, &a->preserve_fds))
				return 1;
			break;
		case 'n':
		case 'k':
		case 'K':
			break;
		default:
			return hutch_oci_fail("%s: unknown option", argv[0]);
		}
	}
	if (optind != argc - 1)
		return hutch_oci_fail("usage: %s [OPTIONS] CONTAINER-ID", argv[0]);
	a->id = argv[optind];
	return 0;
}

static int cmd_create(int argc, char **argv)
{
	struct hutch_oci_create_args a = { 0 };

	if (hutch_oci_parse_create(argc, argv, &a, NULL))
		return 1;
	return hutch_oci_create(&a, NULL);
}

/* Wait until the status has left "created" (the process is spawned or
 * could not be); with startContainer hooks, as long as they take (each has
 * its timeout, or none, as runc waits). */
static void wait_started(const struct hutch_oci_paths *p, const char *id, bool hooks)
{
	struct hutch_err err = { 0 };

	for (int ms = 0; hooks || ms < WAIT_MS; ms++) {
		struct hutch_oci_state st;
		bool done;

		if (hutch_oci_state_read(p, id, &st, &err) < 0)
			return;
		done = strcmp(st.status, "created") != 0;
		hutch_oci_state_done(&st);
		if (done)
			return;
		(void)poll(NULL, 0, 1);
	}
}

/* After the trigger: a startContainer hook's failure, else poststart. */
static int after_start(const struct hutch_oci_paths *p, const char *id)
{
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_free_ char *why = NULL;
	char path[sizeof(p->dir) + 16];

	snprintf(path, sizeof(path), "%s/hook-error", p->dir);
	if (hutch_read_file_alloc_at(AT_FDCWD, path, sizeof(err.msg), &why) > 0)
		return hutch_oci_fail("cannot start container %s: %s", id, why);
	if (hutch_oci_state_read(p, id, &st, &err) < 0)
		return fail_err(&err);
	(void)hutch_oci_hooks_after(p, id, &st, HUTCH_OCI_HOOK_POSTSTART);
	hutch_oci_state_done(&st);
	return 0;
}

int hutch_oci_start(const char *id)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_close_ int fd = -EBADF;
	bool hooks;

	if (hutch_oci_paths_init(hutch_oci_opts.root, id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, id, &st, &err) < 0)
		return fail_err(&err);
	hooks = cJSON_GetObjectItemCaseSensitive(st.doc, "hooks") != NULL;
	if (strcmp(st.status, "created") != 0) {
		int r = hutch_oci_fail("cannot start container %s: it is %s, not created", id,
		                       st.status);
		hutch_oci_state_done(&st);
		return r;
	}
	hutch_oci_state_done(&st);
	/* Non-blocking: ENXIO if no supervisor has the FIFO open. */
	fd = open(p.fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return hutch_oci_fail("cannot start container %s: %s", id,
		                      errno == ENXIO ? "its supervisor is gone" : strerror(errno));
	if (write(fd, "0", 1) != 1)
		return hutch_oci_fail("cannot start container %s: %s", id, strerror(errno));
	closep(&fd);
	wait_started(&p, id, hooks);
	return hooks ? after_start(&p, id) : 0;
}

static int cmd_start(int argc, char **argv)
{
	if (argc != 2)
		return hutch_oci_fail("usage: start CONTAINER-ID");
	return hutch_oci_start(argv[1]);
}

static int cmd_state(int argc, char **argv)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *j = NULL;
	_cleanup_free_ char *text = NULL;

	if (argc != 2)
		return hutch_oci_fail("usage: state CONTAINER-ID");
	if (hutch_oci_paths_init(hutch_oci_opts.root, argv[1], &p, &err) < 0 ||
	    hutch_oci_state_read(&p, argv[1], &st, &err) < 0)
		return fail_err(&err);
	j = hutch_oci_state_json(&st, argv[1]);
	hutch_oci_state_done(&st);
	text = j ? cJSON_Print(j) : NULL;
	if (!text)
		return hutch_oci_fail("out of memory");
	printf("%s\n", text);
	return 0;
}

static const char usage[] =
        "usage: hutch oci [GLOBAL OPTIONS] COMMAND [OPTIONS] CONTAINER-ID\n"
        "       (also as hutch-runc: a runtime for containerd's runc shim and podman)\n"
        "\n"
        "commands (runtime-spec 1.x, as runc):\n"
        "  create [-b BUNDLE] [--pid-file F] ID  build the container; its process waits for start\n"
        "  start ID                              start the container's process\n"
        "  state ID                              print the container's state (JSON)\n"
        "  kill [--all] ID [SIGNAL]              signal the container's process (default TERM;\n"
        "                                        --all: each of its processes; 0: only ask)\n"
        "  delete [--force] ID                   remove a stopped or created one (--force: any)\n"
        "  run [-b BUNDLE] [-d] [--pid-file F] ID  create and start; without -d wait for the end\n"
        "  create/run --console-socket PATH      process.terminal: the pty's master goes there\n"
        "  create/run/exec --preserve-fds N      our fds 3..3+N-1 are the process's 3, 4, ...\n"
        "  ps [--format table|json] ID           host pids of the container's processes\n"
        "  exec [-d] [--pid-file F] [-t --console-socket S] [--process FILE | ID CMD...]\n"
        "                                        another process in a running container\n"
        "  pause ID / resume ID                  freeze / thaw the container's processes\n"
        "  update [-r FILE|-] [--memory N] [--cpu-quota N] [--cpu-period N] [--pids-limit N] ID\n"
        "                                        new limits, no higher than the instance type's;\n"
        "                                        -r: linux.resources JSON, as at create\n"
        "  list [-q] [--format table|json]       the containers under --root\n"
        "  features                              what this runtime supports (JSON)\n"
        "  checkpoint, restore: refused (CRIU images hold the whole memory); events: not\n"
        "    supported (read the container's cgroup)\n"
        "\n"
        "global options: --root DIR (default " HUTCH_OCI_DEFAULT_ROOT "), --log FILE,\n"
        "  --log-format text|json, --debug,\n"
        "  --systemd-cgroup (linux.cgroupsPath is SLICE:PREFIX:NAME; cgroups nest under the "
        "caller's)\n"
        "linux.resources: every field honoured, lowered to the instance type's, or refused\n"
        "  naming the field (realtime, rdma; what this host's cgroups lack); see\n"
        "  docs/kubernetes.md\n"
        "annotations: run.hutch.network (none, all, allow:HOST,...), run.hutch.ttl-seconds,\n"
        "  run.hutch.instance-type (nano ... 2xlarge)\n"
        "pods: linux.namespaces[].path may name another hutch container's network, ipc,\n"
        "  uts and user namespaces (podman pod, the CRI's pause container); its id range\n"
        "  and network policy are then the pod's; a network namespace CNI made (the CRI's,\n"
        "  not the host's) is joined with no capability over it, its policy the cluster's\n"
        "  (run.hutch.network other than none is refused); see docs/kubernetes.md\n"
        "hooks: prestart, createRuntime (create, the caller's namespaces), createContainer\n"
        "  (create, the container's), startContainer (start, in the container), poststart,\n"
        "  poststop (delete); the state JSON on stdin, each within its timeout\n";

static bool is_opt(const char *a, size_t klen, const char *name)
{
	return strlen(name) == klen && !strncmp(a, name, klen);
}

/* Global options before the command; returns the command's index. */
static int parse_global(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *eq = strchr(a, '='), *val = NULL;
		size_t klen = eq ? (size_t)(eq - a) : strlen(a);

		if (!strcmp(a, "--version") || !strcmp(a, "-v") || !strcmp(a, "--help") ||
		    !strcmp(a, "-h"))
			return i; /* handled as a command */
		if (is_opt(a, klen, "--root") || is_opt(a, klen, "--log") ||
		    is_opt(a, klen, "--log-format") || is_opt(a, klen, "--criu") ||
		    is_opt(a, klen, "--rootless")) {
			val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val)
				return -1;
		} else if (!is_opt(a, klen, "--systemd-cgroup") && !is_opt(a, klen, "--debug")) {
			return -1;
		}
		if (is_opt(a, klen, "--root"))
			hutch_oci_opts.root = val;
		else if (is_opt(a, klen, "--log"))
			hutch_oci_opts.log = val;
		else if (is_opt(a, klen, "--log-format"))
			hutch_oci_opts.log_json = !strcmp(val, "json");
		else if (is_opt(a, klen, "--systemd-cgroup"))
			hutch_oci_opts.systemd_cgroup = true;
		/* --debug, --criu, --rootless: accepted */
	}
	return i;
}

int hutch_oci_main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "create", cmd_create },
		{ "start", cmd_start },
		{ "state", cmd_state },
		{ "kill", hutch_oci_cmd_kill },
		{ "delete", hutch_oci_cmd_delete },
		{ "features", hutch_oci_cmd_features },
		{ "run", hutch_oci_cmd_run },
		{ "ps", hutch_oci_cmd_ps },
		{ "exec", hutch_oci_cmd_exec },
		{ "pause", hutch_oci_cmd_pause },
		{ "resume", hutch_oci_cmd_resume },
		{ "update", hutch_oci_cmd_update },
		{ "list", hutch_oci_cmd_list },
		{ "checkpoint", hutch_oci_cmd_refused },
		{ "restore", hutch_oci_cmd_refused },
		{ "events", hutch_oci_cmd_refused },
	};
	int i = parse_global(argc, argv);
	const char *cmd;

	if (i < 0 || i >= argc) {
		fputs(usage, stderr);
		return 1;
	}
	cmd = argv[i];
	if (hutch_oci_opts.log) {
		hutch_oci_opts.log_fd =
		        open(hutch_oci_opts.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (hutch_oci_opts.log_fd < 0)
			return hutch_oci_fail("--log '%s': %s", hutch_oci_opts.log,
			                      strerror(errno));
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-v") || !strcmp(cmd, "version")) {
		printf("hutch-runc version %s\nspec: %s\n", HUTCH_VERSION, HUTCH_OCI_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if (!strcmp(cmd, cmds[k].name))
			return cmds[k].fn(argc - i, argv + i);
	return hutch_oci_fail("unknown command '%s'; see 'hutch oci --help'", cmd);
}
