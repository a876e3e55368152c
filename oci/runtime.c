/* SPDX-License-Identifier: Apache-2.0 */
/*
 * create, start and state of the OCI runtime command line (dispatch.c
 * calls them; run in control.c is create then start).
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

static int fail_err(const struct hutch_err *err)
{
	return hutch_oci_fail("%s", err->msg);
}

/* Read bundle/config.json, bounded. */
static const char *last_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

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
	snprintf(ct->exec_path, sizeof(ct->exec_path), "%s", p->exec);
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
	/* Any directory's length (reached through its fd), but the name
	 * itself must fit a unix socket address. */
	if (a->console_socket && strlen(last_name(a->console_socket)) > HUTCH_UNIX_NAME_MAX)
		return hutch_oci_fail("--console-socket '%s': its last name is over %d bytes, more "
		                      "than a unix socket address holds (108 bytes, with "
		                      "/proc/self/fd/N/ before it): give it a shorter name",
		                      a->console_socket, HUTCH_UNIX_NAME_MAX);
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
	if (r >= 0)
		r = hutch_created_ack(&created) < 0
		            ? hutch_err_set(&err, -EPIPE, "the container's supervisor went away")
		            : 0;
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

int hutch_oci_cmd_create(int argc, char **argv)
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

int hutch_oci_cmd_start(int argc, char **argv)
{
	if (argc != 2)
		return hutch_oci_fail("usage: start CONTAINER-ID");
	return hutch_oci_start(argv[1]);
}

int hutch_oci_cmd_state(int argc, char **argv)
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
