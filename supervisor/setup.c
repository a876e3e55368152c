/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a sandbox (see setup.h): uid slot, network, seccomp program,
 * cgroup, init via clone3 with every namespace, id maps, then init's READY
 * and the listening sockets it made for the network mode. Runs in the new
 * supervisor process, before its event loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
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

#include "api.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "fdutil.h"
#include "fullrestore.h"
#include "init.h"
#include "initproc.h"
#include "kind.h"
#include "log.h"
#include "netlog.h"
#include "netpolicy.h"
#include "ports.h"
#include "proto.h"
#include "sandbox-image.h"
#include "seccomp-filter.h"
#include "setup.h"
#include "snapshot.h"
#include "status.h"
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
 * What the options decide for setup, once, after the kind's join (the uid
 * slot): plan, then apply; each step takes what it needs of the plan and
 * the objects it owns (docs/architecture.md, "Setup: plan, then apply").
 */
struct setup_plan {
	struct hutch_limits lim;             /* the cgroups' */
	struct hutch_disk_plan disk;         /* the writable places' disk */
	bool net_joined;                     /* a pod's (or CNI's) netns: no plan of its own */
	struct hutch_net_plan_params net;    /* before the clone: addresses, host ports, resolver */
	struct hutch_net_bindings *bindings; /* header bindings' (NULL: none), protected */
	enum hutch_net_mode seccomp_mode;    /* the seccomp program's */
	struct hutch_sup_volumes_plan volumes; /* -v's */
	struct hutch_sup_record creating;      /* state.json's: s's part; setup adds its own */
	/* init's clone and parameters: */
	const struct hutch_kind *kind;
	unsigned joins;                  /* CLONE_NEW* joined (hutch_kind_join()) */
	unsigned slot;                   /* the uid slot: the id maps', the CPUs' offset */
	const struct hutch_idmap *idmap; /* root or rootless: the maps' writer */
	size_t cpus;                     /* the CPUs init sees (0: all it may use) */
	bool change_lists;
	bool api_preload; /* the API's handlers loaded while init builds the root */
	char hostname[64];
};

/*
 * What setup makes, its own while it runs, handed to s when it ends, on
 * every path (a failed setup's too: the end undoes what was made): the
 * disk's maker (the creator's, taken before the fork, or one of setup's
 * own), the disk's fds it answers, the cgroup (the creator's, or one
 * setup places in a scope), the host ports' listeners, the commands'
 * environment, the volumes' mounts, init's process, the network plan,
 * the seccomp program, lxcfs's tree (closed once init has it) and what
 * init sends before READY; the kind's ops' part (kind.h: an image's use).
 */
struct setup_made {
	struct hutch_disk_job disk_job;
	int disk_fds[HUTCH_DISK_FDS];
	struct hutch_initproc init; /* init's process, once cloned */
	struct hutch_kind_setup kind;
	struct hutch_cgroup *cg;        /* NULL: --no-limits */
	struct hutch_ports *ports;      /* -p's listeners (NULL: none) */
	char **cmdenv;                  /* the commands' environment (NULL: the default) */
	struct hutch_sup_volumes *vols; /* -v's mounts (NULL: none) */
	int procview_fd;
	struct hutch_net_plan net;
	struct sock_fprog seccomp;
	bool tmpfs; /* GO: no disk after all, config.workspace "tmpfs" */
	/* init's writable layer's fds (HUTCH_MSG_WRITE_FDS), for snapshot.c */
	uint32_t write_which[HUTCH_ROOTFS_WRITE_FDS];
	int write_fds[HUTCH_ROOTFS_WRITE_FDS];
	size_t nwrite, nwrite_which;
};

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
 * cgroup fds (4, 5; hutch_cgroup_open_cmds()), lxcfs's tree and the
 * volumes' mounts (after them), then the kind's fds (an image's layers, a
 * container's mounts); p as init_params() made it. */
static __attribute__((noreturn)) void init_child(const struct setup_plan *plan,
                                                 struct setup_made *m, struct hutch_init_params *p,
                                                 const struct hutch_sup_volumes *vols, int sock,
                                                 int *cg_fds, size_t n_cg_fds, const int cmds[2])
{
	static int keep[4 + HUTCH_VOLUMES_MAX];
	const struct hutch_kind *k = plan->kind;
	size_t pv = m->procview_fd >= 0, nkeep = 3 + pv + (vols ? vols->n : 0);
	int next, stash = k->stash_fd ? k->stash_fd(&m->kind) : (int)nkeep + 19;

	/* The supervisor's hold of /sys/fs/cgroup: closed here, before the
	 * fds below are moved onto its number and the rest closed. */
	hutch_cgroup_root_forget();
	/* First, while we are one thread and nothing runs in the sandbox;
	 * GO tells us to report a failure. */
	p->cgroup_join_err = hutch_cgroup_join_self(cg_fds, n_cg_fds);
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
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] >= 0 && dup3(keep[i], 3 + (int)i, O_CLOEXEC) < 0)
			_exit(1);
	next = 3 + (int)nkeep;
	if (k->child_fds && (next = k->child_fds(&m->kind, next)) < 0)
		_exit(1);
	if (sys_close_range((unsigned)next, ~0U, 0) < 0)
		_exit(1);
	p->supervisor_pid = getppid();
	if (k->init_params)
		k->init_params(&m->kind, p);
	hutch_init_main(p);
}

/* init cloned, the volumes' mounts (m->vols) placed in it: m->init (setup's until it ends). */
static int spawn_init(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const struct hutch_kind *kind = plan->kind;
	struct hutch_sup_volumes *vols = m->vols;
	int sv[2], pidfd = -1, bufsz = HUTCH_PROTO_SOCK_BUF, r;
	int cg_fds[HUTCH_CGROUP_MAX_DIRS], cmds[2];
	struct hutch_init_params p = { 0 };
	size_t n_cg_fds = 0;
	_cleanup_close_ int cgfd = -EBADF;
	struct clone_args args = { 0 };
	long pid = -1;

	init_params(plan, m, &p);
	/* v1: the commands' own freezer cgroup (see hutch_cgroup_open_cmds()). */
	r = hutch_cgroup_open_cmds(m->cg, &cmds[0], &cmds[1]);
	if (r < 0 && r != -EOPNOTSUPP)
		return hutch_err_set_errno(err, r, "open the commands' freezer cgroup");
	p.cmds_tasks_fd = cmds[0] >= 0 ? 4 : -1;
	p.cmds_state_fd = cmds[1] >= 0 ? 5 : -1;
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
	 * cgroup; v1 (or a v2 kernel before 5.7) has the child join by itself.
	 * Failing both, hutch_cgroup_enter() migrates it after all, as for a
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
	} else {
		r = hutch_cgroup_open_join(m->cg, cg_fds, ELEMENTSOF(cg_fds));
		n_cg_fds = r > 0 ? (size_t)r : 0;
	}
	if (!kind->clone && (cgfd < 0 || pid < 0))
		pid = sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = kind->clone ? (int)pid : -errno;
		hutch_close_many(cg_fds, n_cg_fds);
		hutch_close_many(cmds, 2);
		close(sv[0]);
		close(sv[1]);
		if (kind->clone)
			return r; /* err says which step */
		return hutch_err_set_errno(err, r, "clone3 with new namespaces");
	}
	if (pid == 0) {
		close(sv[0]);
		init_child(plan, m, &p, vols, sv[1], cg_fds, n_cg_fds, cmds);
	}
	if (n_cg_fds > 0)
		hutch_cgroup_mark_entered(m->cg); /* init reports a failure */
	hutch_close_many(cg_fds, n_cg_fds);
	hutch_close_many(cmds, 2);
	hutch_sup_volumes_close_mounts(vols);
	closep(&m->procview_fd);
	close(sv[1]);
	m->init = (struct hutch_initproc){ .pid = (pid_t)pid, .pidfd = pidfd, .sock = sv[0] };
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

static int wait_ready(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
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
	ssize_t n;
	int r;

again:
	r = poll(&pfd, 1, INIT_READY_TIMEOUT_MS);
	if (r <= 0)
		return hutch_err_set(err, -ETIMEDOUT, "sandbox init did not get ready in %d s",
		                     INIT_READY_TIMEOUT_MS / 1000);
	nfds = ELEMENTSOF(fds);
	n = hutch_proto_recv(m->init.sock, &hdr, &u, sizeof(u), fds, &nfds);
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
		/* init's socket, made in its network namespace: the same number */
		r = dup3(fds[0], m->init.sock, O_CLOEXEC); /* lint-fds: ok: the same number */
		closep(&fds[0]);
		if (r < 0)
			return hutch_err_set_errno(err, -errno, "take init's socket");
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

/* Before GO: init's id maps, its cgroup, its network's host side; the
 * rootless map helpers run while the rest is done. */
static int map_and_attach(const struct setup_plan *plan, struct setup_made *m,
                          struct hutch_err *err)
{
	pid_t init = m->init.pid;
	struct hutch_idmap_job job;
	struct hutch_err e2 = { 0 };
	bool cni;
	int r, q;

	/* A joined user namespace (a pod's) has its maps, a joined network
	 * namespace its wiring (pod.c). */
	if (plan->joins & CLONE_NEWUSER) {
		r = hutch_cgroup_enter(m->cg, init, err);
		if (r >= 0 && !(plan->joins & CLONE_NEWNET) &&
		    (r = hutch_net_plan_attach(&m->net, init, err)) < 0)
			(void)hutch_err_prefix(err, "network");
		return r;
	}
	r = hutch_idmap_write_start(plan->idmap, plan->slot, init, &job, err);
	if (r >= 0)
		r = hutch_cgroup_enter(m->cg, init, err);
	/* A CNI network namespace (pod.h) is CNI's to wire: no plan. */
	cni = (plan->joins & CLONE_NEWNET);
	if (r >= 0 && !cni && (r = hutch_net_plan_attach(&m->net, init, err)) < 0)
		(void)hutch_err_prefix(err, "network");
	q = hutch_idmap_write_finish(&job, r < 0 ? &e2 : err);
	if (r >= 0 && q < 0)
		return hutch_err_prefix(err, "id maps of sandbox init");
	/* pasta joins init's user namespace: once its maps are written; and
	 * the sandbox's cgroup (v2), which counts its memory. */
	if (r < 0 || cni || !m->net.usernet_helper)
		return r;
	q = hutch_cgroup_clone_fd(m->cg);
	r = hutch_net_plan_attach_helper(&m->net, init, q < 0 ? -1 : q, err);
	return r < 0 ? hutch_err_prefix(err, "network") : r;
}

/* The plan, and the kind's ops' part (k): what of s the steps read. */
static void setup_plan(const struct sup *s, struct setup_plan *p, struct hutch_kind_setup *k)
{
	const struct hutch_config *c = s->cfg;
	char *slash;

	p->lim = (struct hutch_limits){
		.cpu_millis = c->type->cpu_millis,
		.memory_bytes = c->type->memory_bytes,
		.pids_max = c->type->pids_max,
	};
	p->disk = (struct hutch_disk_plan){
		.want = c->disk_from[0] ? HUTCH_DISK_WANT_FORK /* sandbox.c took its forker */
		        : s->kind->sizes_inside && !strcmp(c->workspace, "disk")
		                ? HUTCH_DISK_WANT_DISK
		                : HUTCH_DISK_WANT_NONE,
		.can = s->kind->sizes_inside && !s->idmap.rootless,
		.bytes = c->type->disk_bytes,
		.uid_base = s->uid_base,
	};
	p->net_joined = s->joins & CLONE_NEWNET;
	p->net = (struct hutch_net_plan_params){
		.policy = &c->net,
		.host_ports = c->host_ports,
		.nhost_ports = c->nhost_ports,
		.resolver = c->resolver_addr.sin_family ? &c->resolver_addr : NULL,
		.pool = c->net_pool_value.prefix ? &c->net_pool_value : NULL,
		.slot = s->slot,
		.bindings = c->header_bindings,
		.upstream_ca = c->upstream_ca,
		.usernet_helper = s->net.pasta[0] ? s->net.pasta : NULL,
		.log_nat = c->net_log && c->nat_log,
		.log_owner = c->net_log,
	};
	p->bindings = c->header_bindings;
	p->seccomp_mode = c->net.mode;
	p->volumes = (struct hutch_sup_volumes_plan){
		.set = c->volumes,
		.rootless = s->idmap.rootless,
		.uid_base = s->uid_base,
		.image_store = c->image_store,
	};
	p->creating = (struct hutch_sup_record){
		.id = s->id,
		.status = "creating",
		.paths = &s->paths,
		.cfg = c,
		.created_at = s->created_at,
		.expires_at = s->expires_at,
		.uid_base = s->uid_base,
		.slot = s->slot,
		.kind = s->kind,
	};
	snprintf(p->disk.runtime_dir, sizeof(p->disk.runtime_dir), "%s", s->paths.dir);
	slash = strrchr(p->disk.runtime_dir, '/');
	if (slash)
		*slash = '\0';
	p->kind = s->kind;
	p->joins = s->joins;
	p->slot = s->slot;
	p->idmap = &s->idmap;
	p->cpus = c->no_limits || !s->kind->sizes_inside
	                  ? 0
	                  : (size_t)((c->type->cpu_millis + 999) / 1000);
	p->change_lists = c->change_lists;
	/* Overlaps with init building the root; a container's and a run's
	 * are loaded on demand instead (hutch_api_start_late()). */
	p->api_preload = !hutch_api_on_demand(s);
	snprintf(p->hostname, sizeof(p->hostname), "hutch-%s", s->id);
	*k = (struct hutch_kind_setup){
		.container = s->container,
		.cfg = c,
		.id = s->id,
		.uid_base = s->uid_base,
		.rootless = s->idmap.rootless,
	};
}

#define TMPFS_WHY "workspace: tmpfs (charged to memory), not a disk: %s"

/* Under systemd without delegation: the cgroup in a delegated scope of
 * its own (kind.c), *ret_cg; the CLI left none for this. */
static int place_in_scope(struct sup *s, struct hutch_cgroup **ret_cg, struct hutch_err *err)
{
	if (!s->scope_bus[0] || s->cfg->no_limits)
		return 0;
	return hutch_kind_cgroup_new(s, ret_cg, err);
}

/* GO, once the disk is finished (one that could not be made leaves tmpfs,
 * said in the log and by config.workspace, never a sandbox refused, but a
 * fork's: its files are the fork): it carries the sandbox CA's certificate
 * (header bindings), made after the clone: its key is the supervisor's
 * alone; and the disk's mounts, made meanwhile, with the change lists' group marked on it. The
 * mounts stay open here until the end: the last close of a clone init did not attach (the writable
 * layer's on the host root) waits for an RCU grace period, 5-15 ms, which init's setup would wait
 * for. */
static int send_go(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const char *pem;
	int fds[HUTCH_DISK_MOUNTS + 1];
	struct hutch_err why = { 0 };
	size_t n = 0;
	int r = hutch_disk_setup_finish(&plan->disk, &m->disk_job, m->disk_fds, &why, err);

	if (r < 0)
		return r;
	if (r > 0) { /* a disk that could not be made leaves tmpfs, never a sandbox refused */
		m->tmpfs = true;
		hutch_log(HUTCH_LOG_WARN, TMPFS_WHY, why.msg);
	}
	pem = hutch_net_plan_ca_pem(&m->net);
	if (m->disk_fds[HUTCH_DISK_ROOT] >= 0) {
		memcpy(fds, m->disk_fds, sizeof(fds[0]) * HUTCH_DISK_MOUNTS);
		n = HUTCH_DISK_MOUNTS;
		fds[n] = plan->change_lists ? hutch_disk_watch(m->disk_fds[HUTCH_DISK_ROOT])
		                            : -ENOENT;
		if (fds[n] >= 0)
			n++;
		else if (fds[n] != -ENOENT)
			hutch_log_errno(HUTCH_LOG_WARN, fds[n], "change lists: watch the disk");
	}
	r = hutch_proto_send(m->init.sock, HUTCH_MSG_GO, 0, pem, pem ? strlen(pem) : 0, fds, n);
	if (n > HUTCH_DISK_MOUNTS)
		close(fds[HUTCH_DISK_MOUNTS]); /* init's */
	return r < 0 ? hutch_err_set_errno(err, r, "start sandbox init") : 0;
}

/* After the uid slot, setup's own (made, even failed: the end undoes them): -p's
 * listeners, an image's layers and use ("creating" records it), the environment. */
static int prepare_parts(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const struct hutch_config *c = plan->creating.cfg;
	struct hutch_kind_setup *k = &m->kind;
	int r = hutch_ports_open(c->publish, c->npublish, &m->ports, err); /* a port in use: now */

	if (r >= 0 && plan->kind->prepare_root)
		r = plan->kind->prepare_root(k, err);
	if (r >= 0)
		r = hutch_sup_env_make(c, k->image, &m->cmdenv, err);
	k->cmdenv = m->cmdenv ? (const char *const *)m->cmdenv : hutch_default_env;
	return r;
}

/* The cgroups, then init cloned into them, its ids mapped and its network
 * attached. */
static int cgroup_and_init(const struct setup_plan *plan, struct setup_made *m,
                           struct hutch_err *err)
{
	int r;

	r = m->cg ? hutch_cgroup_create(m->cg, &plan->lim, err) : 0; /* NULL: --no-limits */
	if (r < 0)
		return r;
	/* Header bindings' secrets: zeros in init and everything forked after
	 * it, locked in memory where the host allows it. */
	r = hutch_net_bindings_protect(plan->bindings);
	if (r < 0)
		return hutch_err_set_errno(err, r, "protect the header bindings (MADV_WIPEONFORK)");
	if (r > 0)
		hutch_log(HUTCH_LOG_WARN, "header bindings: mlock refused (RLIMIT_MEMLOCK): their "
		                          "pages may be swapped");
	r = spawn_init(plan, m, err);
	if (plan->kind->spawned)
		plan->kind->spawned(&m->kind); /* init holds or is in them now */
	if (r < 0)
		return r;
	/* With header bindings: no ptrace or /proc/PID/mem of the supervisor,
	 * no core dump (it holds their secrets and the sandbox's CA key).
	 * After the clone: init starts dumpable (its own /proc files). */
	if (plan->bindings && prctl(PR_SET_DUMPABLE, 0) < 0)
		return hutch_err_set_errno(err, -errno, "make the supervisor non-dumpable");
	return map_and_attach(plan, m, err);
}

/* From the kind's prepare on, the steps take the plan and setup's own
 * objects, not s. */
static int init_steps(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const struct hutch_kind *kind = plan->kind;
	int r;

	hutch_cgroup_root_hold(); /* the cgroups made, opened, joined: one open of the root */
	r = cgroup_and_init(plan, m, err);
	hutch_cgroup_root_release();
	if (r < 0)
		return r;
	if (kind->before_go && (r = kind->before_go(&m->kind, m->init.pid, err)) < 0)
		return r;
	if ((r = send_go(plan, m, err)) < 0)
		return r;
	if (plan->api_preload)
		hutch_api_preload();
	r = wait_ready(plan, m, err);
	if (kind->setup_done)
		kind->setup_done(&m->kind);
	if (r < 0)
		return r;
	r = hutch_fd_nonblock(m->init.sock, true);
	return r < 0 ? hutch_err_set_errno(err, r, "init socket") : 0;
}

static int setup_steps(struct sup *s, struct setup_made *m, struct hutch_err *err)
{
	struct sock_fprog seccomp;
	struct setup_plan plan;
	const char *why;
	int r;

	r = place_in_scope(s, &m->cg, err);
	if (r < 0)
		return r;
	r = hutch_kind_join(s, err); /* a pod's: its slot, its network; the uid slot */
	if (r < 0)
		return r;
	setup_plan(s, &plan, &m->kind);
	/* the disk (runtime/disk.h) made while the rest is */
	r = hutch_disk_setup_start(&plan.disk, &m->disk_job, &why, err);
	if (r < 0)
		return r;
	if (r > 0) /* what status and inspect show (an ordinary user's always: docs/api.md) */
		snprintf(s->cfg->workspace, sizeof(s->cfg->workspace), "tmpfs");
	if (r > 0 && why)
		hutch_log(HUTCH_LOG_WARN, TMPFS_WHY, why);
	r = prepare_parts(&plan, m, err);
	if (r < 0)
		return r;
	/* the volumes' mounts, made from the plan (even failed: the end undoes them) */
	r = hutch_sup_volumes_prepare(&plan.volumes, &m->vols, err);
	if (r < 0)
		return r;
	m->net.policy = plan.net.policy; /* a joined network namespace: the pod's plan */
	if (!plan.net_joined) {
		/* made, even failed: the end undoes it */
		r = hutch_net_plan_make(&m->net, &plan.net, err);
		if (r < 0)
			return hutch_err_prefix(err, "network");
		if (m->net.warning.code)
			hutch_log(HUTCH_LOG_WARN, "%s", m->net.warning.msg);
	}
	r = hutch_seccomp_program(plan.seccomp_mode, &seccomp, err);
	if (r < 0)
		return hutch_err_prefix(err, "seccomp");
	m->seccomp = seccomp;
	plan.creating.cg = m->cg; /* gc's record of what it undoes after a crash */
	plan.creating.ports = m->ports;
	plan.creating.kind_part = &m->kind;
	r = hutch_sup_write_record(&plan.creating);
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s'", plan.creating.paths->state);
	if (plan.kind->prepare && (r = plan.kind->prepare(&m->kind, &plan.lim, err)) < 0)
		return r;
	return init_steps(&plan, m, err);
}

/* What setup made goes to s when it ends, on every path: the end undoes
 * it, also after a failure. */
static int hand_over(struct sup *s, struct setup_made *m, int r, struct hutch_err *err)
{
	int q;

	hutch_ports_adopt(s, m->ports);
	s->image = m->kind.image;
	hutch_sup_env_take(s, m->cmdenv);
	s->volumes = m->vols;
	s->disk_job = m->disk_job;
	memcpy(s->disk_fds, m->disk_fds, sizeof(s->disk_fds));
	s->net.plan = m->net;
	s->seccomp = m->seccomp;
	s->cg = m->cg;
	closep(&m->procview_fd); /* init has it, or never will */
	if (m->tmpfs)
		snprintf(s->cfg->workspace, sizeof(s->cfg->workspace), "tmpfs");
	hutch_initproc_started(s, &m->init);
	if (m->nwrite == 0 && m->nwrite_which == 0)
		return r;
	if (r < 0) {
		hutch_close_many(m->write_fds, m->nwrite);
		return r;
	}
	q = hutch_sup_snapshot_take_fds(s, m->write_which, m->nwrite_which, m->write_fds, m->nwrite,
	                                err);
	return q < 0 ? q : r;
}

int hutch_sup_setup(struct sup *s, const struct hutch_setup_in *in, struct hutch_err *err)
{
	struct setup_made made = {
		.disk_job = in->disk_job,
		.init = { .pid = 0, .pidfd = -EBADF, .sock = -EBADF },
		.procview_fd = in->procview_fd,
		.cg = in->cg, /* the CLI's, or NULL: the scope's (place_in_scope()) */
	};
	int r;

	for (size_t i = 0; i < HUTCH_DISK_FDS; i++)
		made.disk_fds[i] = -EBADF;
	r = setup_steps(s, &made, err);
	r = hand_over(s, &made, r, err);
	if (r < 0)
		return r;
	/* init is ready: */
	hutch_initproc_hold_mntns(s); /* dropped after the DELETE answer */
	if (!(s->joins & CLONE_NEWNET))
		hutch_netlog_start(s);
	r = (s->joins & CLONE_NEWNET) ? 0 : hutch_net_plan_serve(&s->net.plan, err);
	if (r < 0)
		return hutch_err_prefix(err, "network");
	/* A full snapshot's processes replace init's (fullrestore.c). */
	if (s->cfg->full_snapshot[0] && (r = hutch_sup_restore_full(s, err)) < 0)
		return r;
	/* "running" is written when the setup steps are done (hooks.c). */
	return 0;
}
