/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox creation and teardown. hutch_sandbox_create() runs in the CLI: it
 * reserves the state directory (under a temporary name until locked, so gc
 * never sees a half-made sandbox), then double-forks a detached supervisor
 * and waits on a pipe for "ready" or an error. The supervisor builds the
 * sandbox (hutch_sup_setup): uid slot, cgroup, seccomp program, init via
 * clone3 with every namespace, id maps, then waits for init's READY. If the
 * CLI is killed meanwhile, the supervisor finishes anyway: the result is a
 * working sandbox, or nothing once gc has run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress.h"
#include "fdutil.h"
#include "init.h"
#include "log.h"
#include "proto.h"
#include "sandbox.h"
#include "seccomp-filter.h"
#include "supervisor.h"
#include "syscalls.h"

#define INIT_READY_TIMEOUT_MS 20000

static cJSON *state_json(const struct sup *s, const char *status)
{
	cJSON *o = cJSON_CreateObject(), *cg;
	const char *dirs[HUTCH_CGROUP_MAX_DIRS];
	size_t n;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", s->id);
	cJSON_AddStringToObject(o, "status", status);
	cJSON_AddNumberToObject(o, "supervisor_pid", (double)getpid());
	cJSON_AddNumberToObject(o, "init_pid", (double)s->init_pid);
	cJSON_AddNumberToObject(o, "created_at", (double)s->created_at);
	cJSON_AddNumberToObject(o, "expires_at", (double)s->expires_at);
	cJSON_AddStringToObject(o, "socket", s->paths.sock);
	cJSON_AddItemToObject(o, "config", hutch_config_to_json(s->cfg));
	cg = cJSON_AddObjectToObject(o, "cgroup");
	if (cg && s->cg) {
		cJSON *arr = cJSON_AddArrayToObject(cg, "dirs");
		cJSON_AddStringToObject(cg, "version", hutch_cgroup_version(s->cg));
		n = hutch_cgroup_dirs(s->cg, dirs, HUTCH_CGROUP_MAX_DIRS);
		for (size_t i = 0; arr && i < n; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(dirs[i]));
	}
	cJSON_AddNumberToObject(o, "uid_base", (double)s->uid_base);
	return o;
}

int hutch_sup_write_state(struct sup *s, const char *status)
{
	_cleanup_cjson_ cJSON *j = state_json(s, status);

	return j ? hutch_state_write(&s->paths, j) : -ENOMEM;
}

static int write_id_map(pid_t pid, const char *file, uid_t base)
{
	char path[64], map[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, HUTCH_UID_RANGE);
	return hutch_write_knob_at(AT_FDCWD, path, map);
}

/* Child side of clone3: keep only the init socket and the stage fd. */
static __attribute__((noreturn)) void init_child(struct sup *s, int sock, int *cg_fds,
                                                 size_t n_cg_fds)
{
	struct hutch_init_params p = { 0 };
	char hostname[32];

	/* First, while we are one thread and nothing runs in the sandbox;
	 * GO tells us to report a failure. */
	p.cgroup_join_err = hutch_cgroup_join_self(cg_fds, n_cg_fds);
	hutch_proctitle_set("hutch-init");
	if (dup3(sock, 3, O_CLOEXEC) < 0)
		_exit(1);
	if (sys_close_range(4, ~0U, 0) < 0)
		_exit(1);
	snprintf(hostname, sizeof(hostname), "hutch-%s", s->id);
	p.sock = 3;
	p.supervisor_pid = getppid();
	p.hostname = hostname;
	p.net = &s->cfg->net;
	p.seccomp = &s->seccomp;
	/* The new root's tmpfs goes on top of the child's own "/" (a host
	 * directory fd opened before clone() belongs to the wrong mount
	 * namespace to be a mount target). */
	p.rootfs.stage_fd = -1;
	p.rootfs.hostname = hostname;
	p.rootfs.disk_bytes = s->cfg->type->disk_bytes;
	p.rootfs.app_uid = HUTCH_APP_UID;
	p.rootfs.app_gid = HUTCH_APP_GID;
	p.net_child = &s->net.child;
	if (s->cfg->net.mode == HUTCH_NET_NONE) {
		p.rootfs.resolv_conf = "# hutch: network none, no DNS\n";
		p.rootfs.extra_hosts = NULL;
	} else {
		/* The DNS stub: the supervisor, through a listener in our netns. */
		p.rootfs.resolv_conf = "# hutch: the sandbox's DNS stub\n"
		                       "nameserver 127.0.0.1\n"
		                       "options timeout:2 attempts:2\n";
		p.rootfs.extra_hosts = HUTCH_NET_HOST_INTERNAL "\thost.hutch.internal\n";
	}
	hutch_init_main(&p);
}

static int spawn_init(struct sup *s, struct hutch_err *err)
{
	int sv[2], pidfd = -1, bufsz = 4 << 20, r;
	int cg_fds[HUTCH_CGROUP_MAX_DIRS];
	size_t n_cg_fds = 0;
	_cleanup_close_ int cgfd = -EBADF;
	struct clone_args args = { 0 };
	long pid = -1;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "socketpair");
	/* Spawn requests carry argv and env: let one datagram hold the largest. */
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &bufsz, sizeof(bufsz));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &bufsz, sizeof(bufsz));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUFFORCE, &bufsz, sizeof(bufsz));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &bufsz, sizeof(bufsz));
	args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
	             CLONE_NEWNET | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&pidfd;
	args.exit_signal = SIGCHLD;
	/* Into the cgroups without a migration of another pid (whose RCU
	 * grace period was most of a cold create): v2 clones straight into the
	 * cgroup; v1 (or a v2 kernel before 5.7) has the child join by itself.
	 * Failing both, hutch_cgroup_enter() migrates it after all. */
	cgfd = hutch_cgroup_clone_fd(s->cg);
	if (cgfd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
		pid = sys_clone3(&args, sizeof(args));
		if (pid >= 0)
			hutch_cgroup_mark_entered(s->cg);
		args.flags &= ~(uint64_t)CLONE_INTO_CGROUP;
		args.cgroup = 0;
	} else {
		r = hutch_cgroup_open_join(s->cg, cg_fds, ELEMENTSOF(cg_fds));
		n_cg_fds = r > 0 ? (size_t)r : 0;
	}
	if (cgfd < 0 || pid < 0)
		pid = sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = -errno;
		hutch_close_many(cg_fds, n_cg_fds);
		close(sv[0]);
		close(sv[1]);
		return hutch_err_set_errno(err, r, "clone3 with new namespaces");
	}
	if (pid == 0) {
		close(sv[0]);
		init_child(s, sv[1], cg_fds, n_cg_fds);
	}
	if (n_cg_fds > 0)
		hutch_cgroup_mark_entered(s->cg); /* init reports a failure */
	hutch_close_many(cg_fds, n_cg_fds);
	close(sv[1]);
	s->init_sock = sv[0];
	s->init_pid = (pid_t)pid;
	s->pidfd = pidfd;
	return 0;
}

/* init's listeners (hostile input: the count, kinds and fds must agree). */
static int take_listeners(struct sup *s, const struct hutch_msg_net_fd *body, size_t len, int *fds,
                          size_t nfds, struct hutch_err *err)
{
	size_t n = len / sizeof(body[0]);
	bool ok = len % sizeof(body[0]) == 0 && n == nfds && s->net.nlisteners == 0 &&
	          s->cfg->net.mode != HUTCH_NET_NONE;

	for (size_t i = 0; ok && i < n; i++)
		ok = (body[i].kind == HUTCH_NET_L_DNS || body[i].kind == HUTCH_NET_L_PROXY ||
		      body[i].kind == HUTCH_NET_L_HOSTPORT) &&
		     body[i].port > 0 && body[i].port <= 65535;
	if (!ok) {
		hutch_close_many(fds, nfds);
		return hutch_err_set(err, -EPROTO, "sandbox init sent bad network listeners");
	}
	for (size_t i = 0; i < n; i++)
		s->net.listeners[i] = (struct hutch_net_listener){
			.fd = fds[i],
			.kind = (enum hutch_net_listener_kind)body[i].kind,
			.port = (uint16_t)body[i].port,
		};
	s->net.nlisteners = n;
	return 0;
}

static int wait_ready(struct sup *s, struct hutch_err *err)
{
	struct pollfd pfd = { .fd = s->init_sock, .events = POLLIN };
	struct hutch_msg_hdr hdr;
	union {
		struct hutch_err child_err;
		struct hutch_msg_net_fd net[HUTCH_NET_LISTENERS_MAX];
	} u;
	struct hutch_err child_err;
	int fds[HUTCH_NET_LISTENERS_MAX];
	size_t nfds;
	ssize_t n;
	int r;

again:
	r = poll(&pfd, 1, INIT_READY_TIMEOUT_MS);
	if (r <= 0)
		return hutch_err_set(err, -ETIMEDOUT, "sandbox init did not get ready in %d s",
		                     INIT_READY_TIMEOUT_MS / 1000);
	nfds = ELEMENTSOF(fds);
	n = hutch_proto_recv(s->init_sock, &hdr, &u, sizeof(u), fds, &nfds);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read from sandbox init");
	if (hdr.type == HUTCH_MSG_NET_FDS) {
		r = take_listeners(s, u.net, (size_t)n, fds, nfds, err);
		if (r < 0)
			return r;
		goto again;
	}
	hutch_close_many(fds, nfds);
	memcpy(&child_err, &u.child_err, sizeof(child_err));
	if (hdr.type == HUTCH_MSG_READY && n == 0)
		return 0;
	if (hdr.type == HUTCH_MSG_FAILED && (size_t)n == sizeof(child_err)) {
		child_err.msg[sizeof(child_err.msg) - 1] = '\0';
		return hutch_err_set(err, child_err.code < 0 ? child_err.code : -EIO,
		                     "sandbox setup: %s", child_err.msg);
	}
	return hutch_err_set(err, -EPROTO, "sandbox init exited during setup");
}

/* Before clone(): the addresses, host ports and upstream resolver. */
static int net_prepare(struct sup *s, struct hutch_err *err)
{
	const struct hutch_config *c = s->cfg;
	struct hutch_net_pool pool;
	int r;

	if (c->net.mode == HUTCH_NET_NONE)
		return 0;
	s->net.child.nhost_ports = c->nhost_ports;
	memcpy(s->net.child.host_ports, c->host_ports, sizeof(c->host_ports));
	if (c->resolver[0]) {
		if (hutch_config_parse_resolver(c->resolver, &s->net.resolver) < 0)
			return hutch_err_set(err, -EINVAL, "invalid resolver '%s'", c->resolver);
	} else if (hutch_net_default_resolver(&s->net.resolver, err) < 0) {
		/* No IPv4 nameserver on the host: the sandbox still works by
		 * address; its DNS stub answers SERVFAIL and /status says why. */
		hutch_log(HUTCH_LOG_WARN, "%s", err->msg);
		hutch_err_clear(err);
		memset(&s->net.resolver, 0, sizeof(s->net.resolver));
	}
	if (c->net.mode != HUTCH_NET_ALL)
		return 0;
	r = hutch_net_pool_parse(c->net_pool[0] ? c->net_pool : HUTCH_NET_POOL_DEFAULT, &pool, err);
	if (r >= 0)
		r = hutch_net_pool_addrs(&pool, s->slot, &s->net.addrs, err);
	if (r >= 0)
		r = hutch_net_pool_check_clash(&pool, err);
	if (r < 0)
		return r;
	s->net.child.addr = s->net.addrs.sandbox;
	s->net.child.gateway = s->net.addrs.gateway;
	return 0;
}

int hutch_sup_setup(struct sup *s, struct hutch_err *err)
{
	struct hutch_limits lim = {
		.cpu_millis = s->cfg->type->cpu_millis,
		.memory_bytes = s->cfg->type->memory_bytes,
		.pids_max = s->cfg->type->pids_max,
	};
	int r;

	r = hutch_slot_acquire(&s->slot, err);
	if (r < 0)
		return r;
	s->slot_fd = r;
	s->uid_base = HUTCH_UID_BASE + s->slot * HUTCH_UID_RANGE;
	r = net_prepare(s, err);
	if (r < 0)
		return hutch_err_prefix(err, "network");
	r = hutch_seccomp_program(s->cfg->net.mode, &s->seccomp, err);
	if (r < 0)
		return hutch_err_prefix(err, "seccomp");
	r = hutch_sup_write_state(s, "creating");
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s'", s->paths.state);
	r = hutch_cgroup_create(s->cg, &lim, err);
	if (r < 0)
		return r;
	r = spawn_init(s, err);
	if (r < 0)
		return r;
	r = write_id_map(s->init_pid, "uid_map", s->uid_base);
	if (r >= 0)
		r = write_id_map(s->init_pid, "gid_map", s->uid_base);
	if (r < 0)
		return hutch_err_set_errno(err, r, "write id maps of sandbox init");
	r = hutch_cgroup_enter(s->cg, s->init_pid, err);
	if (r < 0)
		return r;
	if (s->cfg->net.mode == HUTCH_NET_ALL) {
		/* Before GO: init configures eth0, which must exist by then. */
		s->net.attached = true; /* teardown removes what was made */
		r = hutch_net_host_attach(&s->net.addrs, s->init_pid, err);
		if (r < 0)
			return hutch_err_prefix(err, "network");
	}
	r = hutch_proto_send(s->init_sock, HUTCH_MSG_GO, 0, NULL, 0, NULL, 0);
	if (r < 0)
		return hutch_err_set_errno(err, r, "start sandbox init");
	hutch_api_preload(); /* overlaps with init building the root */
	r = wait_ready(s, err);
	if (r < 0)
		return r;
	r = hutch_fd_nonblock(s->init_sock, true);
	if (r < 0)
		return hutch_err_set_errno(err, r, "init socket");
	/* Keep a reference to the sandbox's mount namespace: when init dies,
	 * the kernel then does not unmount its tree (and wait for an expedited
	 * RCU grace period) before the death is seen; teardown_finish() drops
	 * it after the DELETE answer. Best effort: without it, init's exit
	 * does that work. */
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)s->init_pid);
		s->mntns_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (s->cfg->net.mode != HUTCH_NET_NONE) {
		r = hutch_egress_new(&s->cfg->net, &s->net.resolver, &s->net.egress, err);
		if (r >= 0) {
			r = hutch_egress_add_listeners(s->net.egress, s->net.listeners,
			                               s->net.nlisteners, err);
			s->net.nlisteners = 0; /* the egress owns them now */
		}
		if (r < 0)
			return hutch_err_prefix(err, "network");
	}
	/* "running" is written when the setup steps are done (hooks.c). */
	return 0;
}

/* The runtime dir is the parent of the sandbox's state dir. The supervisor
 * cleared its environment (scrub_environment()), so hutch_runtime_dir()
 * would name the default, not the dir the sandbox was created in. */
static void write_tombstone(const struct sup *s, const char *reason)
{
	char rt[sizeof(s->paths.dir)];
	char *slash;

	snprintf(rt, sizeof(rt), "%s", s->paths.dir);
	slash = strrchr(rt, '/');
	if (!slash)
		return;
	*slash = '\0';
	(void)hutch_gone_write(rt, s->id, reason, hutch_now_realtime());
}

void hutch_sup_teardown(struct sup *s, const char *reason)
{
	int r;

	if (s->init_pid > 0) {
		if (s->pidfd >= 0) {
			struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };
			(void)sys_pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
			/* PID 1 exits only after the kernel has killed its whole
			 * pid namespace. */
			(void)poll(&pfd, 1, 5000);
		} else {
			(void)kill(s->init_pid, SIGKILL);
		}
		(void)waitpid(s->init_pid, NULL, 0);
		s->init_pid = 0;
	}
	s->cmds.init_dead = true;
	if (s->end.retired)
		return;
	/* The tombstone first: whoever no longer finds the sandbox finds
	 * why. */
	if (reason)
		write_tombstone(s, reason);
	r = hutch_state_retire(&s->paths, &s->paths);
	if (r < 0) {
		/* Cannot hide it: remove everything before answering. */
		hutch_log_errno(HUTCH_LOG_WARN, r, "retire '%s', removing it now", s->paths.dir);
		hutch_sup_teardown_finish(s);
		(void)hutch_rm_rf_at(AT_FDCWD, s->paths.dir);
		s->end.retired = true; /* nothing left to do */
		return;
	}
	s->end.retired = true;
	s->end.finish_pending = true;
}

void hutch_sup_teardown_finish(struct sup *s)
{
	struct hutch_err err = { 0 };

	s->end.finish_pending = false;
	if (s->end.finished)
		return;
	s->end.finished = true;
	if (s->mntns_fd >= 0)
		close(s->mntns_fd); /* the sandbox's files and mounts go now */
	s->mntns_fd = -EBADF;
	hutch_egress_free(s->net.egress);
	s->net.egress = NULL;
	for (size_t i = 0; i < s->net.nlisteners; i++)
		close(s->net.listeners[i].fd);
	s->net.nlisteners = 0;
	if (s->net.attached && hutch_net_host_detach(&s->net.addrs, &err) < 0)
		hutch_log(HUTCH_LOG_WARN, "%s", err.msg);
	s->net.attached = false;
	hutch_err_clear(&err);
	if (s->cg && hutch_cgroup_destroy(s->cg, &err) < 0)
		hutch_log(HUTCH_LOG_WARN, "%s", err.msg);
	/* Last: until here the retired dir's state.json names the cgroups
	 * for gc, should this process die midway. */
	if (s->end.retired)
		(void)hutch_rm_rf_at(AT_FDCWD, s->paths.dir);
}

/* ---- CLI side ---- */

/* Wipe the environment strings of this process: /proc/<pid>/environ of the
 * supervisor (and of init, cloned from it) shows the memory they occupy. */
static void scrub_environment(void)
{
	extern char **environ;

	for (char **e = environ; e && *e; e++)
		memset(*e, 0, strlen(*e));
	(void)clearenv();
}

/* Close every fd the CLI's caller let us inherit (ours are all O_CLOEXEC):
 * a long-lived supervisor must not hold a caller's pipe open. */
static void close_inherited_fds(void)
{
	_cleanup_closedir_ DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name), fl;
		if (fd <= 2 || fd == dirfd(d))
			continue;
		fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			close(fd);
	}
}

static __attribute__((noreturn)) void supervisor_main(struct sup *s, int result_fd)
{
	struct hutch_err err = { 0 };
	int r;

	scrub_environment();
	close_inherited_fds();
	{
		char title[64];
		snprintf(title, sizeof(title), "hutch-supervisor %s", s->id);
		hutch_proctitle_set(title);
	}
	hutch_stdio_to_null();
	hutch_log_init(-1, HUTCH_LOG_ERROR, "hutch-supervisor");
	/* Start from default dispositions: not the CLI's handlers (hutch run
	 * sets them), nor what its caller ignored (a shell's "cmd &" ignores
	 * SIGINT and SIGQUIT), which init and so every command would inherit.
	 * Then ignore only SIGPIPE and SIGHUP; init resets those two per
	 * command. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	r = hutch_sup_setup(s, &err);
	if (r >= 0)
		r = hutch_api_start(s, &err);
	if (r < 0) {
		hutch_sup_teardown(s, NULL);
		hutch_sup_teardown_finish(s);
		(void)hutch_write_all(result_fd, &err, sizeof(err));
		_exit(1);
	}
	/* The loop reports ready (or the setup failure) on result_fd once
	 * the setup script and on_create have run (hooks.c). */
	s->hooks.result_fd = result_fd;
	_exit(hutch_sup_run(s) < 0 ? 1 : 0);
}

static int reserve_dir(const char *runtime_dir, struct sup *s, struct hutch_err *err)
{
	_cleanup_close_ int create_lock = -EBADF;
	char tmp[4200];
	int r;

	r = hutch_mkdir_p_at(AT_FDCWD, runtime_dir, 0711);
	if (r < 0)
		return hutch_err_set_errno(err, r, "create runtime dir '%s'", runtime_dir);
	/* Held until the directory has its final name (see gc_new()). */
	create_lock = hutch_state_create_lock(runtime_dir, LOCK_SH);
	if (create_lock < 0)
		return hutch_err_set_errno(err, create_lock, "lock '%s/.create.lock'", runtime_dir);
	for (int tries = 0; tries < 8; tries++) {
		r = hutch_id_new(s->id);
		if (r < 0)
			return hutch_err_set_errno(err, r, "make a sandbox id");
		snprintf(tmp, sizeof(tmp), "%s/.new-%s", runtime_dir, s->id);
		if (mkdir(tmp, 0711) == 0)
			break;
		if (errno != EEXIST)
			return hutch_err_set_errno(err, -errno, "create '%s'", tmp);
	}
	r = hutch_paths_init(runtime_dir, s->id, &s->paths);
	if (r < 0)
		return hutch_err_set_errno(err, r, "sandbox paths");
	snprintf(tmp + strlen(tmp), sizeof(tmp) - strlen(tmp), "/lock");
	s->lock_fd = open(tmp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX) < 0)
		return hutch_err_set_errno(err, -errno, "lock '%s'", tmp);
	tmp[strlen(tmp) - 5] = '\0';
	if (access(s->paths.dir, F_OK) == 0)
		return hutch_err_set(err, -EEXIST, "sandbox '%s' exists already", s->id);
	if (rename(tmp, s->paths.dir) < 0)
		return hutch_err_set_errno(err, -errno, "rename '%s'", tmp);
	return 0;
}

static bool slot_alive(unsigned slot, void *ud)
{
	(void)ud;
	return hutch_slot_is_held(slot);
}

int hutch_sandbox_net_gc(struct hutch_err *err)
{
	return hutch_net_host_gc(slot_alive, NULL, err);
}

int hutch_sandbox_create(struct hutch_config *cfg, const char *runtime_dir,
                         struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                         struct hutch_err *err)
{
	static struct sup s; /* the supervisor keeps it for its whole life */
	int pipefd[2];
	pid_t pid;
	ssize_t n;
	int r, status;

	memset(&s, 0, sizeof(s));
	s.cfg = cfg;
	s.loop.epfd = s.sigfd = s.ttl_fd = s.init_sock = s.pidfd = s.listen_fd = -EBADF;
	s.lock_fd = s.slot_fd = s.mntns_fd = -EBADF;
	s.idle.fd = s.hooks.deadline_fd = s.hooks.result_fd = -EBADF;
	r = hutch_config_validate(cfg, err);
	if (r < 0)
		return r;
	(void)hutch_state_gc_auto(runtime_dir, err);
	/* A table or forwarding switch left by a crash would otherwise stay
	 * until the next hutch gc (links die with their namespaces). */
	if (cfg->net.mode == HUTCH_NET_ALL)
		(void)hutch_sandbox_net_gc(err);
	hutch_err_clear(err);
	r = reserve_dir(runtime_dir, &s, err);
	if (r < 0)
		return r;
	r = hutch_cgroup_new(s.id, &s.cg, err);
	if (r < 0) {
		(void)hutch_rm_rf_at(AT_FDCWD, s.paths.dir);
		return r;
	}
	s.created_at = hutch_now_realtime();
	s.expires_at = s.created_at + (int64_t)cfg->ttl_seconds;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	pid = hutch_fork_detached();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		close(s.lock_fd);
		s.cg = hutch_cgroup_free(s.cg);
		(void)hutch_rm_rf_at(AT_FDCWD, s.paths.dir);
		return hutch_err_set_errno(err, pid, "fork");
	}
	if (pid == 0) {
		close(pipefd[0]);
		supervisor_main(&s, pipefd[1]);
	}
	close(pipefd[1]);
	close(s.lock_fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		; /* hutch run catches Ctrl-C during create */
	n = hutch_read_all(pipefd[0], err, sizeof(*err));
	if (n != (ssize_t)sizeof(*err)) {
		close(pipefd[0]);
		return hutch_err_set(err, -EIO, "the sandbox supervisor died during setup");
	}
	err->msg[sizeof(err->msg) - 1] = '\0';
	if (err->code < 0) {
		/* A failed setup step sends its details after the error. */
		struct hutch_setup_failure f;
		n = hutch_read_all(pipefd[0], &f, sizeof(f));
		close(pipefd[0]);
		if (n == (ssize_t)sizeof(f) && ret_setup) {
			f.id[sizeof(f.id) - 1] = '\0';
			f.step[sizeof(f.step) - 1] = '\0';
			f.tail[sizeof(f.tail) - 1] = '\0';
			*ret_setup = f;
		}
		return err->code;
	}
	close(pipefd[0]);
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->id, s.id, sizeof(ret->id));
	ret->paths = s.paths;
	ret->created_at = s.created_at;
	ret->expires_at = s.expires_at;
	return 0;
}
