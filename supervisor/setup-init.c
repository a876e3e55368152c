/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init's clone, setup's step (setup-internal.h; setup.c calls it): its
 * parameters (the CPUs it sees, the v1 cgroups it shows, the network and
 * the root's), clone3 into the cgroup with every namespace, the child's
 * side (the fds it keeps, then hutch_init_main()), and what init sends
 * until READY (its listeners, its writable layer's fds, a console, its
 * socket made in its netns), read as hostile input.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "init.h"
#include "kind.h"
#include "netpolicy.h"
#include "proto.h"
#include "setup-internal.h"
#include "supervisor.h"
#include "syscalls.h"
#include "volumes.h"

#define INIT_READY_TIMEOUT_MS 20000

/* Big socket buffers: SO_*BUFFORCE as root, else as big as the host's
 * net.core.[rw]mem_max allow (a request larger than that is refused). */
static void sock_buffers(int fd, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

/*
 * The CPUs a sandbox sees (nproc, os.cpu_count(), sched_getaffinity): its
 * vCPUs rounded up (nano's 0.25 -> 1), taken from the CPUs we may use at an
 * offset by uid slot so that sandboxes spread. The quota still bounds the
 * time; this is what sizes thread pools and make -j inside. Commands
 * inherit it; one may widen its own mask again (as on any host), never its
 * CPU time.
 */
static void limit_cpus(const struct setup_plan *plan)
{
	cpu_set_t have, want;
	size_t n = plan->cpus, count = 0, k = 0;
	int cpus[CPU_SETSIZE];

	if (n == 0 || sched_getaffinity(0, sizeof(have), &have) < 0)
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &have))
			cpus[count++] = c;
	if (n >= count)
		return;
	CPU_ZERO(&want);
	for (size_t i = ((size_t)plan->slot * n) % count; k < n; i = (i + 1) % count, k++)
		CPU_SET(cpus[i], &want);
	(void)sched_setaffinity(0, sizeof(want), &want);
}

static bool sizes_sandbox(const char *hierarchy)
{
	static const char *const ctrls[] = { "cpu", "cpuacct", "memory", "pids", NULL };
	char copy[64], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", hierarchy);
	for (char *c = strtok_r(copy, ",", &save); c; c = strtok_r(NULL, ",", &save))
		for (const char *const *w = ctrls; *w; w++)
			if (!strcmp(c, *w))
				return true;
	return false;
}

/* v1 and hybrid: the hierarchies of the sandbox's cgroups by their name
 * under /sys/fs/cgroup ("memory", "cpu,cpuacct"), for init's view: those
 * that size it (cpu, cpuacct, memory, pids; each mount ~0.1 ms). */
static const char *const *cgroup1_names(const struct hutch_cgroup *cg)
{
	static char buf[HUTCH_CGROUP_MAX_DIRS][64];
	static const char *names[HUTCH_CGROUP_MAX_DIRS + 1];
	const char *dirs[HUTCH_CGROUP_MAX_DIRS];
	size_t n, k = 0;

	if (!cg || strcmp(hutch_cgroup_version(cg), "v1"))
		return NULL;
	n = hutch_cgroup_dirs(cg, dirs, HUTCH_CGROUP_MAX_DIRS);
	for (size_t i = 0; i < n && i < HUTCH_CGROUP_MAX_DIRS; i++) {
		const char *h = dirs[i] + strlen("/sys/fs/cgroup/");
		size_t len = strcspn(h, "/");

		if (strncmp(dirs[i], "/sys/fs/cgroup/", 15) || len == 0 || len >= sizeof(buf[0]) ||
		    memchr(h, '=', len))
			continue;
		snprintf(buf[k], sizeof(buf[k]), "%.*s", (int)len, h);
		if (!sizes_sandbox(buf[k]))
			continue;
		names[k] = buf[k];
		k++;
	}
	names[k] = NULL;
	return names;
}

/* init's parameters, made before the clone (the child has a copy): the
 * root's, the network's, its socket where init_child() places it. The
 * commands' cgroup fds are spawn_init()'s to add; what only the child
 * knows (its cgroups joined, the volumes' and the kind's fds, its
 * parent) the child adds. */
static void init_params(const struct setup_plan *plan, struct setup_made *m,
                        struct hutch_init_params *p)
{
	p->rootfs.cgroup1 = plan->kind->sizes_inside ? cgroup1_names(m->cg) : NULL;
	p->rootfs.cgroup2 = m->cg && !strcmp(hutch_cgroup_version(m->cg), "v2");
	p->sock = 3;
	p->hostname = (plan->joins & CLONE_NEWUTS) ? NULL : plan->hostname;
	p->net = (plan->joins & CLONE_NEWNET) ? NULL : &m->net;
	/* A kind that clones init itself (a pod's) places it in namespaces
	 * of its own choosing: the common clone only. */
	p->net_early = p->net && !plan->kind->clone && hutch_net_plan_init_only(&m->net);
	p->seccomp = &m->seccomp;
	p->console_uid = -1;
	p->change_lists = plan->change_lists;
	/* The new root's tmpfs goes on top of the child's own "/" (a host
	 * directory fd opened before clone() belongs to the wrong mount
	 * namespace to be a mount target). */
	p->rootfs.stage_fd = -1;
	p->rootfs.hostname = plan->hostname;
	p->rootfs.disk_bytes = plan->disk.bytes;
	p->rootfs.app_uid = HUTCH_APP_UID;
	p->rootfs.app_gid = HUTCH_APP_GID;
	p->rootfs.resolv_conf = m->net.resolv_conf;
	p->rootfs.extra_hosts = m->net.extra_hosts;
	p->rootfs.procview_fd = m->procview_fd >= 0 ? 6 : -1;
}

/* Child side of clone3: keep only the init socket (fd 3), the commands'
 * cgroup fds (4, 5; hutch_cgroup_open_cmds(); on v1 they come later, with
 * HUTCH_MSG_CGROUPS), lxcfs's tree and the volumes' mounts (after them),
 * then the kind's fds (an image's layers, a container's mounts); p as
 * init_params() made it. */
static __attribute__((noreturn)) void init_child(const struct setup_plan *plan,
                                                 struct setup_made *m, struct hutch_init_params *p,
                                                 const struct hutch_sup_volumes *vols, int sock,
                                                 const int cmds[2])
{
	static int keep[4 + HUTCH_VOLUMES_MAX];
	const struct hutch_kind *k = plan->kind;
	size_t pv = m->procview_fd >= 0, nkeep = 3 + pv + (vols ? vols->n : 0);
	int next, stash = k->stash_fd ? k->stash_fd(&m->kind) : (int)nkeep + 19;

	/* The supervisor's hold of /sys/fs/cgroup: closed here, before the
	 * fds below are moved onto its number and the rest closed. */
	hutch_cgroup_root_forget();
	hutch_proctitle_set("hutch-init");
	keep[0] = sock;
	keep[1] = cmds[0];
	keep[2] = cmds[1];
	if (m->procview_fd >= 0)
		keep[3] = m->procview_fd;
	hutch_sup_volumes_pass(vols, keep, 3 + pv, &p->rootfs);
	limit_cpus(plan);
	/* Out of the way first, so that no dup3() below overwrites another
	 * (the kind's fds too, then placed after init's own). */
	if (k->child_fds && k->child_fds(&m->kind, -1) < 0)
		_exit(1);
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] >= 0 && (keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, stash)) < 0)
			_exit(1);
	/* A number without an fd of ours (4 and 5 until CGROUPS comes) is
	 * left free, not holding what the supervisor had there. */
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] >= 0 ? dup3(keep[i], 3 + (int)i, O_CLOEXEC) < 0
		                 : close(3 + (int)i) < 0 && errno != EBADF)
			_exit(1);
	next = 3 + (int)nkeep;
	if (k->child_fds && (next = k->child_fds(&m->kind, next)) < 0)
		_exit(1);
	if (sys_close_range((unsigned)next, ~0U, 0) < 0)
		_exit(1);
	if (k->init_params)
		k->init_params(&m->kind, p);
	hutch_init_main(p);
}

/* init cloned, the volumes' mounts (m->vols) placed in it: m->init (setup's until it ends). */
int hutch_sup_setup_spawn_init(const struct setup_plan *plan, struct setup_made *m,
                               struct hutch_err *err)
{
	const struct hutch_kind *kind = plan->kind;
	struct hutch_sup_volumes *vols = m->vols;
	int sv[2], pidfd = -1, bufsz = HUTCH_PROTO_SOCK_BUF, r;
	int cmds[2] = { -EBADF, -EBADF };
	struct hutch_init_params p = { 0 };
	_cleanup_close_ int cgfd = -EBADF;
	struct clone_args args = { 0 };
	long pid = -1;

	init_params(plan, m, &p);
	/* v1: the commands' own freezer cgroup (see hutch_cgroup_open_cmds()),
	 * made after the clone (hutch_sup_setup_send_cgroups()) but for a
	 * kind that clones init itself. */
	p.cgroups_late = plan->cgroups_late;
	r = p.cgroups_late ? 0 : hutch_cgroup_open_cmds(m->cg, &cmds[0], &cmds[1]);
	if (r < 0 && r != -EOPNOTSUPP)
		return hutch_err_set_errno(err, r, "open the commands' freezer cgroup");
	p.cmds_tasks_fd = cmds[0] >= 0 || (p.cgroups_late && hutch_cgroup_has_cmds(m->cg)) ? 4 : -1;
	p.cmds_state_fd = p.cmds_tasks_fd >= 0 ? 5 : -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		hutch_close_many(cmds, 2);
		return hutch_err_set_errno(err, r, "socketpair");
	}
	/* Spawn requests carry argv and env: let one datagram hold the largest. */
	sock_buffers(sv[0], bufsz);
	sock_buffers(sv[1], bufsz);
	args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
	             (p.net_early ? 0 : CLONE_NEWNET) | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&pidfd;
	args.exit_signal = SIGCHLD;
	/* Into the cgroups without a migration of another pid (whose RCU
	 * grace period was most of a cold create): v2 clones straight into the
	 * cgroup; v1 has init join by itself, once the supervisor made them
	 * after this clone (plan->cgroups_late). Failing both (a v2 kernel
	 * before 5.7), hutch_cgroup_enter() migrates it after all, as for a
	 * kind that clones init itself (a pod's container: its init is cloned
	 * in the pod's user namespace, where host root's cgroup files are not
	 * ours to write). */
	if (kind->clone)
		pid = kind->clone(&m->kind, args.flags & ~(uint64_t)CLONE_PIDFD, &pidfd, err);
	else if ((cgfd = hutch_cgroup_clone_fd(m->cg)) >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
		pid = sys_clone3(&args, sizeof(args));
		if (pid >= 0)
			hutch_cgroup_mark_entered(m->cg);
		args.flags &= ~(uint64_t)CLONE_INTO_CGROUP;
		args.cgroup = 0;
	}
	if (!kind->clone && (cgfd < 0 || pid < 0))
		pid = sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = kind->clone ? (int)pid : -errno;
		hutch_close_many(cmds, 2);
		close(sv[0]);
		close(sv[1]);
		if (kind->clone)
			return r; /* err says which step */
		return hutch_err_set_errno(err, r, "clone3 with new namespaces");
	}
	if (pid == 0) {
		close(sv[0]);
		init_child(plan, m, &p, vols, sv[1], cmds);
	}
	hutch_close_many(cmds, 2);
	hutch_sup_volumes_close_mounts(vols);
	closep(&m->procview_fd);
	close(sv[1]);
	m->init = (struct hutch_initproc){ .pid = (pid_t)pid, .pidfd = pidfd, .sock = sv[0] };
	return 0;
}

int hutch_sup_setup_send_cgroups(struct setup_made *m, struct hutch_err *err)
{
	int fds[HUTCH_CGROUP_MAX_DIRS + 2];
	uint32_t njoin;
	size_t n;
	int r = hutch_cgroup_open_join(m->cg, fds, HUTCH_CGROUP_MAX_DIRS);

	if (r < 0)
		return hutch_err_set_errno(err, r, "open the sandbox's cgroups' tasks files");
	n = njoin = (uint32_t)r;
	r = hutch_cgroup_open_cmds(m->cg, &fds[n], &fds[n + 1]);
	if (r < 0 && r != -EOPNOTSUPP) {
		hutch_close_many(fds, n);
		return hutch_err_set_errno(err, r, "open the commands' freezer cgroup");
	}
	n += r < 0 ? 0 : 2;
	r = hutch_proto_send(m->init.sock, HUTCH_MSG_CGROUPS, 0, &njoin, sizeof(njoin), fds, n);
	hutch_close_many(fds, n);
	if (r < 0)
		return hutch_err_set_errno(err, r, "send sandbox init its cgroups");
	hutch_cgroup_mark_entered(m->cg); /* init joins, or reports a failure */
	return 0;
}

/* init's listeners (hostile input: the count, kinds and fds must agree). */
static int take_listeners(struct hutch_net_plan *plan, const struct hutch_msg_net_fd *body,
                          size_t len, int *fds, size_t nfds, struct hutch_err *err)
{
	struct hutch_net_listener ls[HUTCH_NET_LISTENERS_MAX];
	size_t n = len / sizeof(body[0]);

	if (len % sizeof(body[0]) != 0 || n != nfds || n > ELEMENTSOF(ls)) {
		hutch_close_many(fds, nfds);
		return hutch_err_set(err, -EPROTO, "sandbox init sent bad network listeners");
	}
	/* Which kinds and ports are right is the plan's to check; a port
	 * that does not fit 16 bits is passed on as 0, which it refuses. */
	for (size_t i = 0; i < n; i++)
		ls[i] = (struct hutch_net_listener){
			.fd = fds[i],
			.kind = (enum hutch_net_listener_kind)body[i].kind,
			.port = body[i].port <= 65535 ? (uint16_t)body[i].port : 0,
		};
	return hutch_net_plan_take_listeners(plan, ls, n, err);
}

/* init's writable layer's fds, kept for snapshot.c, which checks them when
 * setup ends (hutch_sup_snapshot_take_fds()); a second message's replace
 * the first's. */
static int keep_write_fds(struct setup_made *m, const uint32_t *which, size_t nwhich, int *fds,
                          size_t nfds, struct hutch_err *err)
{
	hutch_close_many(m->write_fds, m->nwrite);
	m->nwrite = m->nwrite_which = 0;
	if (nfds > ELEMENTSOF(m->write_fds) || nwhich > ELEMENTSOF(m->write_which)) {
		hutch_close_many(fds, nfds);
		return hutch_err_set(err, -EPROTO, "init passed %zu fds for %zu directories", nfds,
		                     nwhich);
	}
	memcpy(m->write_which, which, nwhich * sizeof(which[0]));
	memcpy(m->write_fds, fds, nfds * sizeof(fds[0]));
	m->nwrite_which = nwhich;
	m->nwrite = nfds;
	return 0;
}

/* init's socket, made in its network namespace (HUTCH_MSG_SOCKET): the
 * same number from now on; fd closed. */
static int take_socket(struct setup_made *m, int fd, struct hutch_err *err)
{
	int r = dup3(fd, m->init.sock, O_CLOEXEC); /* lint-fds: ok: the same number */

	close(fd);
	if (r < 0)
		return hutch_err_set_errno(err, -errno, "take init's socket");
	/* Our end's send buffer bounds what a spawn request sends inline: init
	 * could make it only as big as net.core.wmem_max allows (212,992 bytes
	 * on 6.1), we force it as root (a rootless supervisor cannot: a larger
	 * request's body goes in a memfd, runtime/proto.h). */
	sock_buffers(m->init.sock, HUTCH_PROTO_SOCK_BUF);
	/* what init reads once READY is sent may be queued from now */
	if (m->init_serving)
		m->init_serving(m->init_serving_ud, m->init.sock, m->cg, m->cmdenv);
	m->init_serving = NULL;
	return 0;
}

void hutch_sup_setup_warn(struct setup_made *m, const char *fmt, ...)
{
	char *line;
	va_list ap;

	if (m->nwarnings >= SETUP_WARNINGS_MAX)
		return;
	line = m->warnings[m->nwarnings++];
	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof(m->warnings[0]), fmt, ap);
	va_end(ap);
	for (; *line; line++)
		if (*line < 0x20 || *line >= 0x7f)
			*line = '?';
}

int hutch_sup_setup_wait_ready(const struct setup_plan *plan, struct setup_made *m,
                               struct hutch_err *err)
{
	struct pollfd pfd = { .fd = m->init.sock, .events = POLLIN };
	const struct hutch_kind *kind = plan->kind;
	struct hutch_msg_hdr hdr;
	union {
		struct hutch_err child_err;
		struct hutch_msg_net_fd net[HUTCH_NET_LISTENERS_MAX];
		uint32_t which[HUTCH_ROOTFS_WRITE_FDS];
	} u;
	struct hutch_err child_err;
	int fds[HUTCH_NET_LISTENERS_MAX];
	size_t nfds;
	bool reset_seen = false;
	ssize_t n;
	int r;

again:
	r = poll(&pfd, 1, INIT_READY_TIMEOUT_MS);
	if (r <= 0)
		return hutch_err_set(err, -ETIMEDOUT, "sandbox init did not get ready in %d s",
		                     INIT_READY_TIMEOUT_MS / 1000);
	nfds = ELEMENTSOF(fds);
	n = hutch_proto_recv(m->init.sock, &hdr, &u, sizeof(u), fds, &nfds);
	/* init exited with a message of ours unread (a run's SPAWN queued
	 * before READY): the socket's error comes first, once; what init sent
	 * before (FAILED) is still queued behind it. */
	if (n == -ECONNRESET && !reset_seen) {
		reset_seen = true;
		goto again;
	}
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read from sandbox init");
	if (hdr.type == HUTCH_MSG_CONSOLE && n == 0 && nfds == 1 && kind->take_console &&
	    kind->take_console(&m->kind, fds[0]))
		goto again;
	if (hdr.type == HUTCH_MSG_WRITE_FDS) {
		r = keep_write_fds(m, u.which, (size_t)n / sizeof(u.which[0]), fds, nfds, err);
		if (r < 0)
			return r;
		goto again;
	}
	if (hdr.type == HUTCH_MSG_SOCKET && n == 0 && nfds == 1) {
		if (take_socket(m, fds[0], err) < 0)
			return err->code;
		goto again;
	}
	if (hdr.type == HUTCH_MSG_NOTE && (size_t)n == sizeof(child_err) && nfds == 0) {
		u.child_err.msg[sizeof(u.child_err.msg) - 1] = '\0';
		hutch_sup_setup_warn(m, "%s", u.child_err.msg);
		goto again;
	}
	if (hdr.type == HUTCH_MSG_CHANGES_GROUP && n == 0 && nfds == 1) {
		closep(&m->disk_watch); /* init's own group (a tmpfs's): kept to the end */
		m->disk_watch = fds[0];
		goto again;
	}
	if (hdr.type == HUTCH_MSG_NET_FDS) {
		r = take_listeners(&m->net, u.net, (size_t)n, fds, nfds, err);
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
		return hutch_err_set_class(err, hutch_err_class(&child_err),
		                           child_err.code < 0 ? child_err.code : -EIO,
		                           "sandbox setup: %s", child_err.msg);
	}
	return hutch_err_set(err, -EPROTO, "sandbox init exited during setup");
}
