/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container's supervisor side (see container.h): the bundle's rootfs and
 * binds as detached mounts made before clone() (init cannot reach host
 * paths: it is root of a user namespace the host's files do not belong to),
 * the rootfs idmapped onto the sandbox's ids, the start FIFO, the main
 * process, the status file, and the exit that mirrors the main process's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "cmd.h"
#include "container.h"
#include "events.h"
#include "fdutil.h"
#include "idle.h"
#include "kind.h"
#include "lifecycle.h"
#include "log.h"
#include "pasta.h"
#include "proto.h"
#include "supervisor.h"
#include "syscalls.h"

static bool is_new_fs(const struct hutch_container_mount *m)
{
	return m->tmpfs || m->mqueue || m->sysfs || m->cgroup2;
}

int hutch_container_take_stdio(struct sup *s)
{
	struct hutch_container *ct = s->container;

	ct->pty_master = ct->exec_fd = -EBADF;
	for (int i = 0; i < 3; i++) {
		ct->stdio[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
		if (ct->stdio[i] < 0)
			ct->stdio[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (ct->stdio[i] < 0)
			return -errno;
	}
	return 0;
}

/*
 * A detached clone of a host tree (the rootfs, a bind's source) is a peer
 * of the host's mount when that is shared (open_tree() keeps the peer
 * group; systemd makes "/" shared), and moving it into init's mount
 * namespace keeps it so: every mount init made under it (/proc, /dev, a
 * tmpfs) would appear on the host, and the host's mounts in the
 * container. So each clone is made private, recursively, before anything
 * else, or a slave when the bundle asks (host to container only, never
 * back). Shared (a peer group of the container's own) and unbindable are
 * init's to set (rootfs/bundle.c).
 */
static int set_propagation(int fd, bool slave)
{
	struct mount_attr attr = { .propagation = slave ? MS_SLAVE : MS_PRIVATE };

	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}

static int open_bind(struct hutch_container *ct, size_t i, struct hutch_err *err)
{
	const struct hutch_container_mount *m = &ct->mounts[i];
	struct mount_attr attr = { .attr_set = m->attrs | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	unsigned int flags =
	        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (m->recursive ? AT_RECURSIVE : 0);
	struct stat st;
	int fd, r;

	if (m->readonly)
		attr.attr_set |= MOUNT_ATTR_RDONLY;
	fd = sys_open_tree(AT_FDCWD, m->source, flags);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "mounts: open the source '%s' of '%s'",
		                           m->source, m->dest);
	ct->mount_fds[i] = fd;
	r = set_propagation(fd, m->propagation == MS_SLAVE);
	if (r < 0)
		return hutch_err_set_errno(err, r, "mounts: set the propagation of '%s'", m->dest);
	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "mounts: set the flags of '%s'", m->dest);
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "mounts: stat '%s'", m->source);
	ct->rmounts[i] = (struct hutch_rootfs_mount){
		.kind = HUTCH_ROOTFS_MOUNT_BIND,
		.dest = m->dest,
		.fd = fd,
		.is_dir = S_ISDIR(st.st_mode),
		.propagation = m->propagation == MS_SLAVE ? 0 : m->propagation,
		.propagation_recursive = m->propagation_recursive,
	};
	return 0;
}

static int open_mounts(struct hutch_container *ct, struct hutch_err *err);

/* A mount pod.c made (a CNI network namespace's sysfs): placed as a bind. */
static void place_premade(struct hutch_container *ct, size_t i)
{
	const struct hutch_container_mount *m = &ct->mounts[i];

	ct->rmounts[i] = (struct hutch_rootfs_mount){
		.kind = HUTCH_ROOTFS_MOUNT_BIND,
		.dest = m->dest,
		.fd = ct->mount_fds[i],
		.is_dir = true,
		.propagation = m->propagation == MS_SLAVE ? 0 : m->propagation,
		.propagation_recursive = m->propagation_recursive,
	};
}

/* The bundle's limits may only lower the instance type's. */
static void lower(const struct hutch_limits *c, struct hutch_limits *lim)
{
	uint64_t quota = c->res.cpu_quota, period = c->res.cpu_period;

	/* A quota at the bundle's own period: at most the type's share of it. */
	if (period && lim->cpu_millis && quota * 1000 > lim->cpu_millis * period)
		quota = lim->cpu_millis * period / 1000;
	if (c->cpu_millis && c->cpu_millis < lim->cpu_millis)
		lim->cpu_millis = c->cpu_millis;
	if (c->memory_bytes && c->memory_bytes < lim->memory_bytes)
		lim->memory_bytes = c->memory_bytes;
	if (c->pids_max && c->pids_max < lim->pids_max)
		lim->pids_max = c->pids_max;
	/* The rest goes as asked: the writers lower what is a limit of
	 * hutch's (reservation, unified keys) to these (cgroup-res.c). */
	lim->res = c->res;
	lim->res.cpu_quota = quota;
}

int hutch_container_prepare(struct hutch_kind_setup *k, struct hutch_limits *lim,
                            struct hutch_err *err)
{
	lower(&k->container->limits, lim);
	return open_mounts(k->container, err);
}

static const char *new_fs_type(const struct hutch_container_mount *m)
{
	return m->mqueue ? "mqueue" : m->sysfs ? "sysfs" : m->cgroup2 ? "cgroup2" : "tmpfs";
}

static int open_mounts(struct hutch_container *ct, struct hutch_err *err)
{
	int r;

	ct->root_fd = sys_open_tree(AT_FDCWD, ct->rootfs,
	                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (ct->root_fd < 0)
		return hutch_err_set_errno(err, -errno, "root.path: open '%s'", ct->rootfs);
	/* Shared or unbindable "/" is init's to set, after pivot_root()
	 * (which refuses a shared root). */
	r = set_propagation(ct->root_fd, ct->root_propagation == MS_SLAVE);
	if (r < 0)
		return hutch_err_set_errno(err, r, "root.path: set the propagation of '%s'",
		                           ct->rootfs);
	for (size_t i = 0; i < ct->nmounts; i++) {
		const struct hutch_container_mount *m = &ct->mounts[i];

		if (m->premade) {
			place_premade(ct, i);
			continue;
		}
		if (!is_new_fs(m)) {
			r = open_bind(ct, i, err);
			if (r < 0)
				return r;
			continue;
		}
		ct->rmounts[i] = (struct hutch_rootfs_mount){
			.kind = HUTCH_ROOTFS_MOUNT_FS,
			.fstype = new_fs_type(m),
			.dest = m->dest,
			.opts = (const char *const *)m->tmpfs_opts,
			.attrs = m->attrs | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			         (m->mqueue || m->sysfs || m->cgroup2 ? MOUNT_ATTR_NOEXEC : 0) |
			         (m->readonly || m->sysfs || m->cgroup2 ? MOUNT_ATTR_RDONLY : 0),
			.propagation = m->propagation,
			.propagation_recursive = m->propagation_recursive,
		};
	}
	ct->bundle = (struct hutch_rootfs_bundle){
		.root_fd = ct->root_fd,
		.readonly = ct->readonly,
		.root_propagation =
		        ct->root_propagation == MS_SHARED || ct->root_propagation == MS_UNBINDABLE
		                ? ct->root_propagation
		                : 0,
		.mounts = ct->rmounts,
		.nmounts = ct->nmounts,
		.masked = (const char *const *)ct->masked_paths,
		.readonly_paths = (const char *const *)ct->readonly_paths,
	};
	return 0;
}

int hutch_container_stash_fd(const struct hutch_container *ct)
{
	return ct->nmounts + 7 > 16 ? (int)ct->nmounts + 7 : 16;
}

int hutch_container_child_fds(struct hutch_kind_setup *k, int first)
{
	struct hutch_container *ct = k->container;
	int n = 0;

	/* Twice: first out of the way of init's own fds (first < 0), then
	 * into place from first on. */
	if (first < 0) {
		ct->root_fd = fcntl(ct->root_fd, F_DUPFD_CLOEXEC, hutch_container_stash_fd(ct));
		for (size_t i = 0; i < ct->nmounts; i++)
			if (!is_new_fs(&ct->mounts[i]))
				ct->rmounts[i].fd = fcntl(ct->rmounts[i].fd, F_DUPFD_CLOEXEC,
				                          hutch_container_stash_fd(ct));
		return ct->root_fd < 0 ? -1 : 0;
	}
	if (dup3(ct->root_fd, first + n, O_CLOEXEC) < 0)
		return -1;
	ct->bundle.root_fd = first + n++;
	for (size_t i = 0; i < ct->nmounts; i++) {
		if (is_new_fs(&ct->mounts[i]))
			continue;
		if (ct->rmounts[i].fd < 0 || dup3(ct->rmounts[i].fd, first + n, O_CLOEXEC) < 0)
			return -1;
		ct->rmounts[i].fd = first + n++;
	}
	return first + n;
}

static void write_status(struct sup *s, const char *status)
{
	struct hutch_container *ct = s->container;
	_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	char tmp[sizeof(ct->status_path) + 8];

	if (!j)
		return;
	cJSON_AddStringToObject(j, "status", status);
	cJSON_AddNumberToObject(j, "pid", (double)getpid());
	cJSON_AddStringToObject(j, "sandbox", s->id);
	cJSON_AddNumberToObject(j, "init_pid", (double)s->init_pid);
	if (ct->host_pid > 0) {
		cJSON_AddNumberToObject(j, "process_pid", (double)ct->host_pid);
		cJSON_AddNumberToObject(j, "process_start", (double)ct->start_time);
	}
	if (ct->exited)
		cJSON_AddNumberToObject(j, "exit_status", ct->status);
	text = cJSON_PrintUnformatted(j);
	if (!text)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", ct->status_path);
	if (hutch_write_file_at(AT_FDCWD, tmp, text, 0600) < 0 ||
	    hutch_rename_replace(tmp, ct->status_path) < 0)
		hutch_log_errno(HUTCH_LOG_WARN, -errno, "write '%s'", ct->status_path);
	else
		ct->announced = true;
}

/* How many pid namespaces deep pid is (NSpid's fields), 0 if unknown. */
static int ns_depth(pid_t pid)
{
	char path[64], st[2048], *line, *save = NULL;
	int depth = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (hutch_read_file_at(AT_FDCWD, path, st, sizeof(st)) <= 0 ||
	    !(line = strstr(st, "\nNSpid:")))
		return 0;
	line += 7;
	*strchrnul(line, '\n') = '\0';
	for (char *tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		depth++;
	return depth;
}

/* The main process's host pid: the child of init whose pid in init's
 * namespace (NSpid's field at init's depth: the last one, or the one
 * before in a container's nested namespace, init/pidns.c) is the one init
 * reported. */
static void find_host_pid(struct sup *s, pid_t ns_pid)
{
	struct hutch_container *ct = s->container;
	char path[96], buf[4096], *save = NULL;
	int depth = ns_depth(s->init_pid);

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->init_pid,
	         (int)s->init_pid);
	if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return;
	for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		char st[2048], *line, *p, *save2 = NULL, *f;
		long pid = strtol(tok, NULL, 10);
		int i = 1;

		snprintf(path, sizeof(path), "/proc/%ld/status", pid);
		if (hutch_read_file_at(AT_FDCWD, path, st, sizeof(st)) <= 0)
			continue;
		line = strstr(st, "\nNSpid:");
		if (!line)
			continue;
		line += 7;
		*strchrnul(line, '\n') = '\0';
		for (f = strtok_r(line, " \t", &save2); f && i < depth;
		     f = strtok_r(NULL, " \t", &save2))
			i++;
		if (!f || strtol(f, NULL, 10) != ns_pid)
			continue;
		ct->host_pid = (pid_t)pid;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		if (hutch_read_file_at(AT_FDCWD, path, st, sizeof(st)) > 0 &&
		    (p = strrchr(st, ')')) != NULL)
			(void)sscanf(p + 1,
			             " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			             "%*d %*d %*d %*d %llu",
			             &ct->start_time);
		return;
	}
}

static void on_proc_spawned(void *ud, struct cmd *c)
{
	struct sup *s = ud;

	find_host_pid(s, c->pid);
	write_status(s, "running");
	hutch_event(s, "container process started: pid %d (host %d)", (int)c->pid,
	            (int)s->container->host_pid);
}

/*
 * The container's process ended; the sandbox ended with it (init killed
 * and reaped, so its pid namespace is empty) and status.json says stopped.
 * The shim or conmon waits for this pid's exit to publish the container's,
 * and the rest of the teardown (cgroups, the state dir, the last API
 * answers) need not delay it: a child of ours takes that over and this
 * process exits now with the process's status, as a runc container's
 * process exits before runc delete removes its cgroup. The child keeps
 * the container's lock (inherited) until it is done; delete waits for
 * that lock, and state says stopped meanwhile. The stdio go first, so
 * the caller's pipes see their end at once. Not with a helper process of
 * ours (pasta), which the teardown reaps, nor while on_destroy runs.
 */
static void exit_early(struct sup *s)
{
	struct hutch_container *ct = s->container;
	pid_t pid;

	if (s->state != SUP_GONE || s->net.plan.helper_pid > 0)
		return;
	hutch_close_many(ct->stdio, 3);
	pid = fork();
	if (pid > 0)
		hutch_exit_like(ct->status);
	if (pid == 0)
		ct->handed_off = true;
	/* fork() failed: this process finishes the teardown, then exits. */
}

static void on_proc_done(void *ud, struct cmd *c)
{
	struct sup *s = ud;
	struct hutch_container *ct = s->container;

	ct->exited = true;
	ct->status = c->status;
	ct->proc = NULL;
	if (c->spawn_error)
		hutch_event(s, "container process: %s", c->spawn_error);
	hutch_event(s, "container process ended: wait status %d", c->status);
	hutch_cmd_release(c);
	write_status(s, "stopped");
	hutch_sup_end(s, "exited");
	exit_early(s);
}

static int exec_listen(struct sup *s);

/* The main process could not start (or a startContainer hook failed). */
static void start_failed(struct sup *s, const struct hutch_err *err)
{
	hutch_event(s, "container process: %s", err->msg);
	s->container->exited = true;
	s->container->status = 127 << 8;
	write_status(s, "stopped");
	hutch_sup_end(s, "exited");
}

static void start_process(struct sup *s)
{
	struct hutch_container *ct = s->container;
	struct hutch_spawn sp = {
		.argv = (const char *const *)ct->argv,
		.envp = (const char *const *)ct->envp,
		.cwd = ct->cwd,
		.stdio_fds = ct->stdio,
		.set_ids = true,
		.extra_filter = ct->seccomp.len > 0,
		.held_tty = ct->terminal,
		.main = true,
		.uid = ct->uid,
		.gid = ct->gid,
		.extra_fds = ct->preserve_fds,
		.nextra_fds = ct->npreserve,
	};
	struct hutch_cmd_sink sink = { .spawned = on_proc_spawned, .done = on_proc_done, .ud = s };
	struct hutch_err err = { 0 };

	memcpy(sp.caps, ct->caps, sizeof(sp.caps));
	sp.ngroups = (uint32_t)ct->ngroups;
	memcpy(sp.groups, ct->groups, sizeof(sp.groups));
	ct->started = true;
	if (exec_listen(s) < 0)
		hutch_event(s, "oci exec: cannot listen on '%s'", ct->exec_path);
	ct->proc = hutch_cmd_start(&s->cmds, &sp, &sink, &err);
	hutch_close_many(ct->preserve_fds, ct->npreserve);
	if (!ct->proc)
		start_failed(s, &err);
}

/* ---- oci exec: more processes in a running container ---- */

struct exec_conn {
	struct sup *s;
	int fd;
	struct hutch_watch w;
	struct cmd *cmd;
};

static void exec_conn_free(struct exec_conn *x)
{
	if (x->cmd)
		hutch_cmd_release(x->cmd); /* kills it if it still runs */
	hutch_loop_close(&x->s->loop, &x->w, &x->fd);
	free(x);
}

static void exec_fail(struct exec_conn *x, int code, const char *msg)
{
	struct hutch_err err = { 0 };

	hutch_err_set(&err, code, "%s", msg);
	(void)hutch_proto_send(x->fd, HUTCH_MSG_FAILED, 0, &err, sizeof(err), NULL, 0);
	exec_conn_free(x);
}

static void on_exec_spawned(void *ud, struct cmd *c)
{
	struct exec_conn *x = ud;
	struct hutch_msg_spawned rep = { .pid = c->pid };
	int master = -EBADF;

	if (c->tty) {
		/* The terminal is the client's (its console socket's) alone. */
		master = hutch_cmd_take_stdout(c);
		closep((int[]){ hutch_cmd_take_stdin(c) });
		(void)hutch_fd_nonblock(master, false);
	}
	(void)hutch_proto_send(x->fd, HUTCH_MSG_SPAWNED, 0, &rep, sizeof(rep), &master,
	                       master >= 0 ? 1 : 0);
	closep(&master);
}

static void on_exec_done(void *ud, struct cmd *c)
{
	struct exec_conn *x = ud;
	struct hutch_msg_exited e = { .status = c->status };

	x->cmd = NULL;
	hutch_cmd_release(c);
	if (c->spawn_error) {
		exec_fail(x, -ENOEXEC, c->spawn_error);
		return;
	}
	(void)hutch_proto_send(x->fd, HUTCH_MSG_EXITED, 0, &e, sizeof(e), NULL, 0);
	exec_conn_free(x);
}

static void exec_start(struct exec_conn *x, const char *body, size_t len, int *fds, size_t nfds)
{
	static struct hutch_spawn_req req; /* large: keep it off the stack */
	struct hutch_container *ct = x->s->container;
	struct hutch_cmd_sink sink = { .spawned = on_exec_spawned, .done = on_exec_done, .ud = x };
	struct hutch_spawn sp = { 0 };
	struct hutch_err err = { 0 };
	size_t nstd;
	bool tty, bad;

	if (hutch_proto_spawn_decode(body, len, &req) < 0 ||
	    (req.flags & ~(uint32_t)(HUTCH_SPAWN_TTY | HUTCH_SPAWN_EXTRA_FDS)) != 0) {
		hutch_close_many(fds, nfds);
		exec_fail(x, -EBADMSG, "bad exec request");
		return;
	}
	tty = req.flags & HUTCH_SPAWN_TTY;
	nstd = tty ? 0 : 3; /* then --preserve-fds' (HUTCH_SPAWN_EXTRA_FDS) */
	bad = nfds < nstd || ((req.flags & HUTCH_SPAWN_EXTRA_FDS) ? nfds == nstd : nfds != nstd);
	if (bad || !ct->started || ct->exited || x->s->state != SUP_RUNNING) {
		hutch_close_many(fds, nfds);
		exec_fail(x, -ESRCH, bad ? "bad exec request" : "the container is not running");
		return;
	}
	sp = (struct hutch_spawn){
		.argv = req.argv,
		.envp = req.envp,
		.cwd = req.cwd,
		.stdio_fds = tty ? NULL : fds,
		.extra_fds = fds + nstd,
		.nextra_fds = nfds - nstd,
		.tty = tty,
		.rows = (uint16_t)(req.winsize >> 16),
		.cols = (uint16_t)req.winsize,
		.set_ids = true,
		.uid = req.uid,
		.gid = req.gid,
		.extra_filter = ct->seccomp.len > 0,
	};
	memcpy(sp.caps, req.caps, sizeof(sp.caps));
	sp.ngroups = req.ngroups;
	for (uint32_t i = 0; i < req.ngroups; i++)
		sp.groups[i] = req.groups[i];
	x->cmd = hutch_cmd_start(&x->s->cmds, &sp, &sink, &err);
	hutch_close_many(fds, nfds);
	if (!x->cmd)
		exec_fail(x, err.code, err.msg);
}

/* oci pause / resume: the sandbox's cgroup freezer, as idle sleep uses it
 * (v1: the commands' freezer cgroup, init stays awake; v2: the whole). */
static void exec_freeze(struct exec_conn *x, const char *body, size_t len)
{
	struct sup *s = x->s;
	struct hutch_container *ct = s->container;
	struct hutch_msg_exited done = { 0 };
	struct hutch_err err = { 0 };
	uint32_t frozen;

	if (len != sizeof(frozen)) {
		exec_fail(x, -EBADMSG, "bad pause request");
		return;
	}
	memcpy(&frozen, body, sizeof(frozen));
	if (!ct->started || ct->exited || s->state != SUP_RUNNING) {
		exec_fail(x, -ESRCH, "the container is not running");
		return;
	}
	if (ct->paused == (frozen != 0)) {
		exec_fail(x, -EALREADY,
		          frozen ? "the container is paused already"
		                 : "the container is not paused");
		return;
	}
	if (hutch_cgroup_freeze(s->cg, frozen != 0, &err) < 0) {
		exec_fail(x, err.code, err.msg);
		return;
	}
	ct->paused = frozen != 0;
	hutch_idle_paused(s, ct->paused);
	write_status(s, ct->paused ? "paused" : "running");
	hutch_event(s, "container %s", ct->paused ? "paused" : "resumed");
	hutch_sup_pasta_thawed(s);
	(void)hutch_proto_send(x->fd, HUTCH_MSG_EXITED, 0, &done, sizeof(done), NULL, 0);
	exec_conn_free(x);
}

/* oci update: new limits, each still no higher than the instance type's. */
static void exec_update(struct exec_conn *x, const char *body, size_t len)
{
	struct sup *s = x->s;
	struct hutch_container *ct = s->container;
	struct hutch_limits want, next = ct->limits;
	struct hutch_limits lim = { .cpu_millis = s->cfg->type->cpu_millis,
		                    .memory_bytes = s->cfg->type->memory_bytes,
		                    .pids_max = s->cfg->type->pids_max };
	struct hutch_msg_exited done = { 0 };
	struct hutch_err err = { 0 };

	if (len != sizeof(want)) {
		exec_fail(x, -EBADMSG, "bad update request");
		return;
	}
	memcpy(&want, body, sizeof(want));
	if (ct->exited || s->state != SUP_RUNNING) {
		exec_fail(x, -ESRCH, "the container is not running");
		return;
	}
	next.cpu_millis = want.cpu_millis ? want.cpu_millis : next.cpu_millis;
	next.memory_bytes = want.memory_bytes ? want.memory_bytes : next.memory_bytes;
	next.pids_max = want.pids_max ? want.pids_max : next.pids_max;
	hutch_resources_merge(&next.res, &want.res);
	lower(&next, &lim);
	if (hutch_cgroup_update(s->cg, &lim, &err) < 0) {
		exec_fail(x, err.code, err.msg);
		return;
	}
	ct->limits = next;
	hutch_event(s, "container limits: %llu cpu millis, %llu bytes, %llu pids",
	            (unsigned long long)lim.cpu_millis, (unsigned long long)lim.memory_bytes,
	            (unsigned long long)lim.pids_max);
	(void)hutch_proto_send(x->fd, HUTCH_MSG_EXITED, 0, &done, sizeof(done), NULL, 0);
	exec_conn_free(x);
}

static void on_exec_conn(struct hutch_watch *w, uint32_t events)
{
	struct exec_conn *x = w->ptr;
	struct hutch_msg_hdr hdr;
	_cleanup_free_ char *body = NULL;
	int fds[HUTCH_PROTO_FDS_MAX];
	size_t nfds = HUTCH_PROTO_FDS_MAX;
	ssize_t n;

	if (x->cmd) { /* one request per connection: anything more is a hang-up */
		exec_conn_free(x);
		return;
	}
	body = malloc(HUTCH_PROTO_MAX);
	if (!body) {
		exec_conn_free(x);
		return;
	}
	n = hutch_proto_recv(x->fd, &hdr, body, HUTCH_PROTO_MAX, fds, &nfds);
	if (n == -EAGAIN)
		return;
	if (n >= 0 && hdr.type == HUTCH_MSG_FREEZE && nfds == 0) {
		exec_freeze(x, body, (size_t)n);
		return;
	}
	if (n >= 0 && hdr.type == HUTCH_MSG_UPDATE && nfds == 0) {
		exec_update(x, body, (size_t)n);
		return;
	}
	if (n < 0 || hdr.type != HUTCH_MSG_SPAWN) {
		if (n >= 0)
			hutch_close_many(fds, nfds);
		exec_conn_free(x);
		return;
	}
	exec_start(x, body, (size_t)n, fds, nfds);
}

static void on_exec_listen(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	int fd;

	while ((fd = accept4(s->container->exec_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >=
	       0) {
		struct exec_conn *x = calloc(1, sizeof(*x));

		if (!x) {
			close(fd);
			continue;
		}
		x->s = s;
		x->fd = fd;
		hutch_watch_init(&x->w, on_exec_conn, x);
		if (hutch_loop_add(&s->loop, &x->w, fd, EPOLLIN) < 0) {
			close(fd);
			free(x);
		}
	}
}

/* The exec socket (container.h): root only, in the container's state dir. */
static int exec_listen(struct sup *s)
{
	struct hutch_container *ct = s->container;
	struct sockaddr_un sa;
	_cleanup_close_ int dirfd = -EBADF;
	mode_t old;
	int r;

	if (!ct->exec_path[0])
		return 0;
	/* Any --root: a long path is bound through its directory's fd. */
	if ((r = hutch_unix_addr(ct->exec_path, &sa, &dirfd)) < 0)
		return r;
	ct->exec_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ct->exec_fd < 0)
		return -errno;
	old = umask(0077);
	r = bind(ct->exec_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(ct->exec_fd, 16) < 0)
		return -errno;
	hutch_watch_init(&ct->w_exec, on_exec_listen, s);
	return hutch_loop_add(&s->loop, &ct->w_exec, ct->exec_fd, EPOLLIN);
}

/* `oci start` opened the FIFO for writing: start the main process, once. */
static void on_fifo(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	struct hutch_container *ct = s->container;
	struct hutch_err err = { 0 };
	char buf[16];

	if ((events & EPOLLIN) && read(ct->fifo_fd, buf, sizeof(buf)) <= 0 && !(events & EPOLLHUP))
		return;
	hutch_loop_close(&s->loop, &ct->w_fifo, &ct->fifo_fd);
	(void)unlink(ct->fifo_path);
	if (ct->started || s->state != SUP_RUNNING)
		return;
	if (ct->run_hooks && ct->run_hooks(ct, HUTCH_CONTAINER_HOOKS_START, s->init_pid, &err) < 0)
		start_failed(s, &err);
	else
		start_process(s);
}

/* The container's terminal to its console socket; then it is the
 * receiver's alone. */
static int send_console(struct hutch_container *ct)
{
	int r;

	if (ct->pty_master < 0)
		return -EPROTO;
	r = hutch_console_send(ct->console_socket, ct->pty_master);
	closep(&ct->pty_master);
	return r;
}

int hutch_container_ready(struct sup *s, struct hutch_err *err)
{
	struct hutch_container *ct = s->container;
	int r;

	if (ct->terminal && (r = send_console(ct)) < 0)
		return hutch_err_set_errno(err, r, "send the terminal to the console socket '%s'",
		                           ct->console_socket);
	if (ct->run_hooks &&
	    (r = ct->run_hooks(ct, HUTCH_CONTAINER_HOOKS_CREATE, s->init_pid, err)) < 0)
		return r;

	for (size_t i = 0; i < ct->nmounts; i++)
		if (ct->mounts[i].idmap_errno)
			hutch_event(
			        s,
			        "mounts: '%s' not idmapped (%s): its files keep their host owners",
			        ct->mounts[i].dest, strerror(ct->mounts[i].idmap_errno));
	/* init has attached them: our references can go. */
	closep(&ct->root_fd);
	for (size_t i = 0; i < ct->nmounts; i++)
		if (!is_new_fs(&ct->mounts[i]))
			closep(&ct->mount_fds[i]);
	write_status(s, "created");
	/* Our read end makes a writer's open() succeed at once; EPOLLIN
	 * (or EPOLLHUP once that writer closed) is the trigger. */
	ct->fifo_fd = open(ct->fifo_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (ct->fifo_fd < 0)
		return -errno;
	hutch_watch_init(&ct->w_fifo, on_fifo, s);
	return hutch_loop_add(&s->loop, &ct->w_fifo, ct->fifo_fd, EPOLLIN);
}

void hutch_container_exit(struct sup *s)
{
	struct hutch_container *ct = s->container;

	hutch_close_many(ct->stdio, 3);
	if (ct->handed_off)
		_exit(0); /* the status was the parent's to give (exit_early()) */
	if (!ct->exited) {
		/* Ended before its process did (deleted, expired, killed
		 * before start): as if killed. A create that failed wrote
		 * no status: its caller removes the state dir once answered,
		 * and a status written now raced that (the dir was left). */
		ct->exited = true;
		ct->status = SIGKILL;
		if (ct->announced)
			write_status(s, "stopped");
	}
	hutch_exit_like(ct->status);
}
