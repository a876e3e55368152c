/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec: another process in a running container, as runc's (`exec
 * [--process FILE] [-d] [--pid-file F] [--console-socket S] [-t] [--cwd D]
 * [-e K=V]... [-u UID[:GID]] ID [CMD...]`). The process is the bundle's
 * (its env, cwd, user) with the options on top, or the --process file,
 * checked by the same parser as config.json. It is started by the
 * container's supervisor (its exec socket, container.h), as a child of
 * hutch's init like every command, with this call's stdin, stdout and
 * stderr (or, with a terminal, a new pty whose master goes to
 * --console-socket).
 *
 * What waits for it: without --detach, this process, which exits with its
 * status. With --detach (conmon's way), a proxy double-forked from here,
 * so reparented to the caller's subreaper: its pid is the --pid-file's,
 * it holds the exec socket's connection (its death kills the process)
 * and exits with the process's status, as the supervisor does for the
 * container's own process.
 *
 * pause and resume ask the same socket to freeze or thaw the container,
 * update to write new limits into its cgroup.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"
#include "proto.h"

#define EXEC_MAX_ENV 256 /* -e options */

struct exec_args {
	const char *process, *pid_file, *console_socket, *cwd, *user;
	const char *env[EXEC_MAX_ENV + 1];
	size_t nenv;
	bool detach, tty;
	unsigned int preserve_fds; /* the caller's 3, 4, ... go to the process */
	const char *id;
	char **cmd;
};

static int parse_args(int argc, char **argv, struct exec_args *a)
{
	static const struct option lo[] = {
		{ "process", required_argument, NULL, 'p' },
		{ "pid-file", required_argument, NULL, 'P' },
		{ "console-socket", required_argument, NULL, 'c' },
		{ "cwd", required_argument, NULL, 'w' },
		{ "env", required_argument, NULL, 'e' },
		{ "user", required_argument, NULL, 'u' },
		{ "detach", no_argument, NULL, 'd' },
		{ "tty", no_argument, NULL, 't' },
		{ "no-new-privs", no_argument, NULL, 'n' },
		{ "preserve-fds", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:e:u:dt", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			a->process = optarg;
			break;
		case 'P':
			a->pid_file = optarg;
			break;
		case 'c':
			a->console_socket = optarg;
			break;
		case 'w':
			a->cwd = optarg;
			break;
		case 'u':
			a->user = optarg;
			break;
		case 'd':
			a->detach = true;
			break;
		case 't':
			a->tty = true;
			break;
		case 'n':
			break; /* always */
		case 'e':
			if (a->nenv == EXEC_MAX_ENV || !strchr(optarg, '='))
				return hutch_oci_fail("exec: --env '%s': KEY=VALUE, at most %d",
				                      optarg, EXEC_MAX_ENV);
			a->env[a->nenv++] = optarg;
			break;
		case 'f':
			if (hutch_oci_parse_preserve_fds(optarg, &a->preserve_fds))
				return 1;
			break;
		default:
			return hutch_oci_fail("exec: unknown option");
		}
	}
	if (optind >= argc || (!a->process && optind + 1 >= argc))
		return hutch_oci_fail("usage: exec [OPTIONS] CONTAINER-ID COMMAND [ARG...] | "
		                      "exec --process FILE CONTAINER-ID");
	a->id = argv[optind];
	a->cmd = argv + optind + 1;
	return 0;
}

/* A process object checked by the config.json parser: wrapped into the
 * least config it accepts. */
static int parse_process(const char *text, struct hutch_oci_spec *ret, struct hutch_err *err)
{
	static const char head[] = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"x\"},"
	                           "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":"
	                           "\"network\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":"
	                           "\"mount\"}]},\"process\":";
	_cleanup_free_ char *doc = NULL;
	size_t n = strlen(text);

	doc = malloc(sizeof(head) + n + 2);
	if (!doc)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	memcpy(doc, head, sizeof(head) - 1);
	memcpy(doc + sizeof(head) - 1, text, n);
	memcpy(doc + sizeof(head) - 1 + n, "}", 2);
	return hutch_oci_spec_parse(doc, sizeof(head) + n, ret, err);
}

/* The process: --process, or the bundle's with the options on top. */
static int load_process(const struct exec_args *a, const struct hutch_oci_state *st,
                        struct hutch_oci_spec *spec, struct hutch_err *err)
{
	_cleanup_free_ char *text = NULL;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(st->doc, "bundle");
	char path[4200];
	ssize_t n;

	if (a->process) {
		n = hutch_read_file_alloc_at(AT_FDCWD, a->process, HUTCH_OCI_CONFIG_MAX, &text);
		if (n < 0)
			return hutch_err_set_errno(err, (int)n, "--process '%s'", a->process);
		return parse_process(text, spec, err);
	}
	snprintf(path, sizeof(path), "%s/config.json", cJSON_IsString(b) ? b->valuestring : "");
	n = hutch_read_file_alloc_at(AT_FDCWD, path, HUTCH_OCI_CONFIG_MAX, &text);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read the bundle's '%s'", path);
	return hutch_oci_spec_parse(text, (size_t)n, spec, err);
}

/* The SPAWN body: argv, env (the spec's then -e), cwd, uid, gid, TTY, capabilities. */
static ssize_t encode(const struct exec_args *a, const struct hutch_oci_spec *spec, bool tty,
                      char **ret, struct hutch_err *err)
{
	_cleanup_free_ const char **env = calloc(spec->nenv + a->nenv + 1, sizeof(char *));
	char *const *argv = a->process ? spec->args : a->cmd;
	uint32_t uid = spec->uid, gid = spec->gid, flags = tty ? HUTCH_SPAWN_TTY : 0;
	uint32_t ngroups = (uint32_t)spec->ngroups;
	ssize_t len;

	if (!env)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < spec->nenv; i++)
		env[i] = spec->env[i];
	for (size_t i = 0; i < a->nenv; i++)
		env[spec->nenv + i] = a->env[i];
	if (a->user) {
		unsigned u = 0, g = 0;
		int k = sscanf(a->user, "%u:%u", &u, &g);
		if (k < 1 || u > HUTCH_SPAWN_MAX_ID || (k == 2 && g > HUTCH_SPAWN_MAX_ID))
			return hutch_err_set(err, -EINVAL, "--user '%s': UID[:GID], 0-65535",
			                     a->user);
		uid = u;
		gid = k == 2 ? g : gid;
	}
	len = hutch_proto_spawn_encode((const char *const *)argv, env, a->cwd ? a->cwd : spec->cwd,
	                               ret);
	if (len < 0)
		return hutch_err_set_errno(err, (int)len, "the process");
	memcpy(*ret + offsetof(struct hutch_msg_spawn, flags), &flags, sizeof(flags));
	memcpy(*ret + offsetof(struct hutch_msg_spawn, uid), &uid, sizeof(uid));
	memcpy(*ret + offsetof(struct hutch_msg_spawn, gid), &gid, sizeof(gid));
	memcpy(*ret + offsetof(struct hutch_msg_spawn, caps), spec->caps, sizeof(spec->caps));
	memcpy(*ret + offsetof(struct hutch_msg_spawn, ngroups), &ngroups, sizeof(ngroups));
	memcpy(*ret + offsetof(struct hutch_msg_spawn, groups), spec->groups, sizeof(spec->groups));
	return len;
}

/* One answer of the supervisor; the terminal's master comes with SPAWNED. */
static int recv_answer(int sock, uint32_t want, int *ret_status, int *ret_fd, struct hutch_err *err)
{
	union {
		struct hutch_err err;
		struct hutch_msg_spawned spawned;
		struct hutch_msg_exited exited;
	} u;
	struct hutch_msg_hdr hdr;
	int fd = -EBADF;
	size_t nfds = 1;
	ssize_t n = hutch_proto_recv(sock, &hdr, &u, sizeof(u), &fd, &nfds);

	if (n < 0 || (n == 0 && hdr.type == 0))
		return hutch_err_set(err, n < 0 ? (int)n : -EPIPE,
		                     "the container's supervisor "
		                     "went away");
	if (nfds == 0)
		fd = -EBADF;
	if (hdr.type == HUTCH_MSG_FAILED && (size_t)n == sizeof(u.err)) {
		closep(&fd);
		u.err.msg[sizeof(u.err.msg) - 1] = '\0';
		return hutch_err_set(err, u.err.code < 0 ? u.err.code : -EIO, "%s", u.err.msg);
	}
	if (hdr.type != want ||
	    (size_t)n != (want == HUTCH_MSG_EXITED ? sizeof(u.exited) : sizeof(u.spawned))) {
		closep(&fd);
		return hutch_err_set(err, -EPROTO, "unexpected answer from the supervisor");
	}
	if (ret_status)
		*ret_status = want == HUTCH_MSG_EXITED ? u.exited.status : 0;
	if (ret_fd)
		*ret_fd = fd;
	else
		closep(&fd);
	return 0;
}

/* Wait for EXITED and exit as the process did. */
static __attribute__((noreturn)) void wait_and_exit(int sock)
{
	struct hutch_err err = { 0 };
	int status = 0;

	if (recv_answer(sock, HUTCH_MSG_EXITED, &status, NULL, &err) < 0) {
		hutch_oci_fail("exec: %s", err.msg);
		_exit(255);
	}
	hutch_exit_like(status);
}

/* --detach: the proxy (see above); its pid to the pid-file. */
static int detach(int sock, const char *pid_file)
{
	int pfd[2];
	pid_t pid, proxy = 0;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return hutch_oci_fail("exec: pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		return hutch_oci_fail("exec: fork: %s", strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		(void)setsid();
		proxy = fork();
		if (proxy == 0) {
			close(pfd[1]);
			wait_and_exit(sock);
		}
		(void)hutch_write_all(pfd[1], &proxy, sizeof(proxy));
		_exit(proxy < 0);
	}
	close(pfd[1]);
	(void)waitpid(pid, NULL, 0);
	if (hutch_read_all(pfd[0], &proxy, sizeof(proxy)) != sizeof(proxy) || proxy <= 0) {
		close(pfd[0]);
		return hutch_oci_fail("exec: could not start the waiting process");
	}
	close(pfd[0]);
	if (pid_file) {
		char num[24], tmp[4200];
		snprintf(num, sizeof(num), "%d", (int)proxy);
		snprintf(tmp, sizeof(tmp), "%s.hutch-tmp", pid_file);
		if (hutch_write_file_at(AT_FDCWD, tmp, num, 0644) < 0 || rename(tmp, pid_file) < 0)
			return hutch_oci_fail("--pid-file '%s': %s", pid_file, strerror(errno));
	}
	return 0;
}

/* The container's supervisor's exec socket (container.h). */
static int connect_supervisor(const struct hutch_oci_paths *p, struct hutch_err *err)
{
	struct sockaddr_un sa;
	_cleanup_close_ int dirfd = -EBADF;
	int sock, r;

	/* Any --root: a long path is reached through its directory's fd. */
	if ((r = hutch_unix_addr(p->exec, &sa, &dirfd)) < 0)
		return hutch_err_set_errno(err, r, "the exec socket '%s'", p->exec);
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		hutch_err_set_errno(err, -errno, "connect to the container's supervisor");
		if (sock >= 0)
			close(sock);
		return err->code;
	}
	return sock;
}

static int start(const struct exec_args *a, const struct hutch_oci_paths *p,
                 const struct hutch_oci_spec *spec, int *ret_sock, struct hutch_err *err)
{
	_cleanup_close_ int sock = -EBADF;
	_cleanup_free_ char *body = NULL;
	bool tty = a->tty || (a->process && spec->terminal);
	int fds[3 + HUTCH_SPAWN_MAX_EXTRA_FDS] = { 0, 1, 2 }, master = -EBADF, r;
	size_t nstd = tty ? 0 : 3;
	ssize_t len;

	if (tty && !a->console_socket)
		return hutch_err_set(err, -EINVAL, "a terminal needs --console-socket");
	/* --preserve-fds: our 3, 4, ... become the process's, after stdio. */
	for (unsigned int i = 0; i < a->preserve_fds; i++) {
		if (fcntl(3 + (int)i, F_GETFD) < 0)
			return hutch_err_set(err, -EBADF, "--preserve-fds %u: fd %u is not open",
			                     a->preserve_fds, 3 + i);
		fds[3 + i] = 3 + (int)i;
	}
	len = encode(a, spec, tty, &body, err);
	if (len < 0)
		return (int)len;
	if (a->preserve_fds) {
		uint32_t flags;

		memcpy(&flags, body + offsetof(struct hutch_msg_spawn, flags), sizeof(flags));
		flags |= HUTCH_SPAWN_EXTRA_FDS;
		memcpy(body + offsetof(struct hutch_msg_spawn, flags), &flags, sizeof(flags));
	}
	sock = connect_supervisor(p, err);
	if (sock < 0)
		return sock;
	/* stdio (none with a tty), then the preserved ones. */
	r = hutch_proto_send(sock, HUTCH_MSG_SPAWN, 0, body, (size_t)len, fds + 3 - nstd,
	                     nstd + a->preserve_fds);
	if (r < 0)
		return hutch_err_set_errno(err, r, "send the process");
	r = recv_answer(sock, HUTCH_MSG_SPAWNED, NULL, &master, err);
	if (r < 0)
		return r;
	if (tty) {
		r = master >= 0 ? hutch_console_send(a->console_socket, master) : -EPROTO;
		closep(&master);
		if (r < 0)
			return hutch_err_set_errno(err, r, "--console-socket '%s'",
			                           a->console_socket);
	}
	closep(&master);
	*ret_sock = TAKE_FD(sock);
	return 0;
}

int hutch_oci_cmd_exec(int argc, char **argv)
{
	static struct hutch_oci_spec spec;
	struct exec_args a = { 0 };
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	int sock = -EBADF, r;

	if (parse_args(argc, argv, &a))
		return 1;
	if (hutch_oci_paths_init(hutch_oci_opts.root, a.id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, a.id, &st, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	if (strcmp(st.status, "running") != 0) {
		r = hutch_oci_fail("cannot exec in container %s: it is %s, not running", a.id,
		                   st.status);
		hutch_oci_state_done(&st);
		return r;
	}
	r = load_process(&a, &st, &spec, &err);
	hutch_oci_state_done(&st);
	if (r >= 0)
		r = start(&a, &p, &spec, &sock, &err);
	if (r < 0)
		return hutch_oci_fail("exec in container %s: %s", a.id, err.msg);
	if (a.detach) {
		r = detach(sock, a.pid_file);
		close(sock);
		return r;
	}
	wait_and_exit(sock);
}

/*
 * One request to a running (or paused) container's supervisor on its exec
 * socket (pause, resume, update): the container's status must be one of
 * want ("a|b"); the answer is EXITED or FAILED. Returns 0 or 1 (reported).
 */
static int ask(const char *verb, const char *id, const char *want, uint32_t type, const void *body,
               size_t len)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_close_ int sock = -EBADF;
	char status[sizeof(st.status) + 2];

	if (hutch_oci_paths_init(hutch_oci_opts.root, id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, id, &st, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	hutch_oci_state_done(&st);
	snprintf(status, sizeof(status), "|%s|", st.status);
	if (!strstr(want, status))
		return hutch_oci_fail("cannot %s container %s: it is %s, not %.*s", verb, id,
		                      st.status, (int)strcspn(want + 1, "|"), want + 1);
	sock = connect_supervisor(&p, &err);
	if (sock >= 0 && hutch_proto_send(sock, type, 0, body, len, NULL, 0) < 0)
		hutch_err_set_errno(&err, -errno, "send the request");
	if (sock < 0 || err.code < 0 || recv_answer(sock, HUTCH_MSG_EXITED, NULL, NULL, &err) < 0)
		return hutch_oci_fail("%s container %s: %s", verb, id, err.msg);
	return 0;
}

/* pause / resume ID: the supervisor freezes or thaws the container's
 * cgroup (HUTCH_MSG_FREEZE). */
static int freeze(int argc, char **argv, bool frozen)
{
	uint32_t body = frozen;

	if (argc != 2 || argv[1][0] == '-')
		return hutch_oci_fail("usage: %s CONTAINER-ID", frozen ? "pause" : "resume");
	return ask(frozen ? "pause" : "resume", argv[1], frozen ? "|running|" : "|paused|",
	           HUTCH_MSG_FREEZE, &body, sizeof(body));
}

int hutch_oci_cmd_pause(int argc, char **argv)
{
	return freeze(argc, argv, true);
}

int hutch_oci_cmd_resume(int argc, char **argv)
{
	return freeze(argc, argv, false);
}

/* runc's --memory: bytes, or with a k, m, g suffix (1024s); 0 on error. */
static uint64_t parse_size(const char *v)
{
	char *end = NULL;
	unsigned long long n = strtoull(v, &end, 10);
	int shift = 0;

	if (end == v || n == 0)
		return 0;
	switch (*end | 0x20) {
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	default:
		if (*end)
			return 0;
	}
	if (*end && (end[1] && ((end[1] | 0x20) != 'b' || end[2])))
		return 0;
	return n > (UINT64_MAX >> shift) ? 0 : (uint64_t)n << shift;
}

/* Up to 64 KiB of stdin (a pipe: containerd's shim writes the JSON). */
static ssize_t read_stdin(char **ret)
{
	char *buf = malloc(65536 + 1);
	size_t len = 0;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	while (len <= 65536 && (n = read(0, buf + len, 65536 + 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (len += (size_t)n) > 65536) {
			free(buf);
			return n < 0 ? -errno : -EFBIG;
		}
	}
	buf[len] = '\0';
	*ret = buf;
	return (ssize_t)len;
}

/* --resources FILE ('-': stdin): linux.resources' JSON, through the
 * config.json parser (wrapped into the least config it accepts). */
static int read_resources(const char *path, struct hutch_oci_spec *spec, struct hutch_err *err)
{
	static const char head[] = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"x\"},"
	                           "\"process\":{\"args\":[\"x\"],\"cwd\":\"/\"},"
	                           "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":"
	                           "\"network\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":"
	                           "\"mount\"}],\"resources\":";
	_cleanup_free_ char *text = NULL, *doc = NULL;
	ssize_t n = strcmp(path, "-") ? hutch_read_file_alloc_at(AT_FDCWD, path, 65536, &text)
	                              : read_stdin(&text);

	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "--resources '%s'", path);
	doc = malloc(sizeof(head) + (size_t)n + 3);
	if (!doc)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	memcpy(doc, head, sizeof(head) - 1);
	memcpy(doc + sizeof(head) - 1, text, (size_t)n);
	memcpy(doc + sizeof(head) - 1 + n, "}}", 3);
	return hutch_oci_spec_parse(doc, sizeof(head) + (size_t)n + 1, spec, err);
}

static int parse_update(int argc, char **argv, struct hutch_limits *want, const char **id)
{
	static const struct option opts[] = {
		{ "resources", required_argument, NULL, 'r' },
		{ "memory", required_argument, NULL, 'm' },
		{ "cpu-quota", required_argument, NULL, 'q' },
		{ "cpu-period", required_argument, NULL, 'p' },
		{ "pids-limit", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	static struct hutch_oci_spec spec;
	struct hutch_err err = { 0 };
	uint64_t quota = 0, period = 100000;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+r:", opts, NULL)) != -1) {
		if (c == 'r' && read_resources(optarg, &spec, &err) < 0)
			return hutch_oci_fail("update: %s", err.msg);
		if (c == 'r') {
			want->memory_bytes = spec.resources.memory_limit;
			want->pids_max = spec.resources.pids_limit;
			want->res = spec.resources.res;
			quota = spec.resources.cpu_quota;
			period = spec.resources.cpu_period ? spec.resources.cpu_period : period;
		} else if (c == 'm' && !(want->memory_bytes = parse_size(optarg))) {
			return hutch_oci_fail("update: --memory '%s': bytes, or N[kmg]", optarg);
		} else if ((c == 'q' || c == 'p' || c == 'P') &&
		           (!isdigit(optarg[0]) || !atoll(optarg))) {
			return hutch_oci_fail("update: '%s': a positive number", optarg);
		} else if (c == 'q' || c == 'p' || c == 'P') {
			*(c == 'q'   ? &quota
			  : c == 'p' ? &period
			             : &want->pids_max) = strtoull(optarg, NULL, 10);
		} else if (c == '?') {
			return hutch_oci_fail(
			        "update: '%s' is not supported (hutch sets memory, cpu "
			        "quota and period, pids)",
			        argv[optind - 1]);
		}
	}
	if (quota) {
		want->cpu_millis = quota * 1000 / period ? quota * 1000 / period : 1;
		want->res.cpu_quota = quota; /* at its own period, as at create */
		want->res.cpu_period = period;
	}
	if (optind != argc - 1)
		return hutch_oci_fail("usage: update [-r FILE|-] [--memory N] [--cpu-quota N] "
		                      "[--cpu-period N] [--pids-limit N] CONTAINER-ID");
	*id = argv[optind];
	return 0;
}

/* update ID: new limits, lowered to the instance type's as at create. */
int hutch_oci_cmd_update(int argc, char **argv)
{
	struct hutch_limits want = { 0 };
	const char *id = NULL;

	if (parse_update(argc, argv, &want, &id))
		return 1;
	return ask("update", id, "|running|paused|", HUTCH_MSG_UPDATE, &want, sizeof(want));
}
