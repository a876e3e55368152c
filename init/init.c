/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init, PID 1 of the sandbox (see init.h). It runs as namespace root with
 * every capability inside the sandbox's user namespace, and is the only
 * process that starts commands (launch.c: each child drops to appuser,
 * loses every capability, and only then execs). Here: its setup, and its
 * request handling, which makes the syscalls only pid 1 can make through
 * a struct hutch_init_sys (launch.h), so that a unit test drives it. init
 * never execs itself, and it is not dumpable, so appuser can neither
 * ptrace it nor read its memory or open its /proc entries.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/seccomp.h>

#include "caps.h"
#include "cgroup.h"
#include "changes.h"
#include "cleanup.h"
#include "fdutil.h"
#include "fileops.h"
#include "init.h"
#include "ns.h"
#include "pidns.h"
#include "proctree.h"
#include "proto.h"
#include "pty.h"
#include "seccomp-filter.h"
#include "syscalls.h"

struct child {
	pid_t pid;
	uint64_t id;
	bool kill_rest; /* HUTCH_KILL_REST_ON_EXIT was asked */
	pid_t *sids;    /* sessions of its tree when that was asked */
	size_t nsids;
};

struct init_state {
	int sock;
	struct child *children;
	size_t n, alloc;
	int cmds_state_fd; /* v1: its freezer.state, thawed when we go, or -1 */
	int held_slave;    /* the container's pty (HUTCH_SPAWN_HELD_TTY), or -EBADF */
	/* Born in a pod's pid namespace (not its PID 1): the subreaper of
	 * its commands, non-dumpable throughout, its descendants killed when
	 * the supervisor goes (the namespace does not end with us). */
	bool shared_pid;
	struct hutch_init_spawner spawner; /* what each command's spawn needs (launch.h) */
	const struct hutch_init_sys *sys;  /* the syscalls of the handling (launch.h) */
	void *sys_ud;
	struct hutch_changes *changes; /* change lists (changes.h), or NULL */
	/* An OCI container's own pid namespace, nested (pidns.h); pid 0: none */
	struct hutch_init_nest nest;
};

static __attribute__((noreturn)) void fail(int sock, struct hutch_err *err)
{
	(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, err, sizeof(*err), NULL, 0);
	_exit(1);
}

static int track(struct init_state *s, pid_t pid, uint64_t id)
{
	if (s->n == s->alloc) {
		size_t na = s->alloc ? s->alloc * 2 : 16;
		struct child *c = realloc(s->children, na * sizeof(*c));
		if (!c)
			return -ENOMEM;
		s->children = c;
		s->alloc = na;
	}
	s->children[s->n++] = (struct child){ .pid = pid, .id = id };
	return 0;
}

static void handle_spawn(struct init_state *s, uint64_t id, const char *body, size_t len, int *fds,
                         size_t nfds)
{
	static struct hutch_spawn_req req; /* large: keep it off the stack */
	struct hutch_msg_spawned rep = { 0 };
	_cleanup_close_ int master = -EBADF, slave = -EBADF;
	int pty[3];
	size_t nstd;
	bool tty;
	pid_t pid;

	if (hutch_proto_spawn_decode(body, len, &req) < 0) {
		rep.error = -EBADMSG;
		goto reply;
	}
	tty = req.flags & HUTCH_SPAWN_TTY;
	/* stdio's three (none with a tty), then the extra fds if flagged. */
	nstd = tty ? 0 : 3;
	if (nfds < nstd || ((req.flags & HUTCH_SPAWN_EXTRA_FDS) ? nfds == nstd : nfds != nstd)) {
		rep.error = -EBADMSG;
		goto reply;
	}
	if (tty && (req.flags & HUTCH_SPAWN_HELD_TTY)) {
		/* Given once: the process that owns it keeps the only slave,
		 * so the master sees its end when it exits. */
		slave = TAKE_FD(s->held_slave);
		if (slave < 0) {
			rep.error = -EBADMSG;
			goto reply;
		}
		pty[0] = pty[1] = pty[2] = slave;
	} else if (tty) {
		rep.error = s->sys->pty_open(s->sys_ud, req.winsize, req.uid, &master, &slave);
		if (rep.error < 0)
			goto reply;
		pty[0] = pty[1] = pty[2] = slave;
	}
	hutch_changes_start(s->changes, id);
	if ((req.flags & HUTCH_SPAWN_MAIN) && s->nest.sock >= 0)
		pid = hutch_init_nest_start(&s->nest, id, body, len, tty ? pty : fds, fds + nstd,
		                            nfds - nstd);
	else
		pid = s->sys->spawn(s->sys_ud, &req, tty ? pty : fds, fds + nstd, nfds - nstd);
	if (pid < 0 || track(s, pid, id) < 0) {
		if (pid > 0)
			kill(pid, SIGKILL);
		rep.error = pid < 0 ? pid : -ENOMEM;
		(void)hutch_changes_end(s->changes, id, 0, NULL);
		goto reply;
	}
	rep.pid = pid;
reply:
	hutch_close_many(fds, nfds);
	(void)hutch_proto_send(s->sock, HUTCH_MSG_SPAWNED, id, &rep, sizeof(rep),
	                       rep.pid ? &master : NULL, rep.pid && master >= 0 ? 1 : 0);
}

/*
 * For HUTCH_KILL_REST_ON_EXIT: remember the sessions of c's tree now (its
 * own and those that members made with setsid()). Once the main process is
 * gone, a setsid() child it left has init as parent and no link to the
 * tree; its session still names it.
 */
static void record_sessions(struct init_state *s, struct child *c)
{
	struct hutch_proc_entry *v = NULL;
	size_t n = s->sys->proc_scan(s->sys_ud, &v);
	bool grew = true;

	for (size_t i = 0; i < n; i++)
		v[i].marked = v[i].pid == c->pid || v[i].sid == c->pid;
	while (grew) {
		grew = false;
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n && !v[i].marked; j++)
				if (v[j].marked && v[j].pid == v[i].ppid)
					v[i].marked = grew = true;
	}
	for (size_t i = 0; i < n; i++) {
		pid_t *q;
		if (!v[i].marked || v[i].sid != v[i].pid || c->nsids >= 4096)
			continue;
		q = realloc(c->sids, (c->nsids + 1) * sizeof(*q));
		if (!q)
			break;
		c->sids = q;
		c->sids[c->nsids++] = v[i].sid;
	}
	free(v);
}

static void handle_kill(struct init_state *s, uint64_t id, const char *body, size_t len)
{
	struct hutch_msg_kill k;

	if (len != sizeof(k))
		return;
	memcpy(&k, body, sizeof(k));
	if (k.signal <= 0 || k.signal >= NSIG)
		return;
	for (size_t i = 0; i < s->n; i++)
		if (s->children[i].id == id) {
			if (k.flags & HUTCH_KILL_REST_ON_EXIT) {
				s->children[i].kill_rest = true;
				record_sessions(s, &s->children[i]);
			}
			s->sys->kill_tree(s->sys_ud, s->children[i].pid, k.signal);
		}
}

/* A published port (HUTCH_MSG_CONNECT): the socket is made and connected
 * here, in the sandbox's network namespace, and handed to the supervisor,
 * which relays it to the host; init never waits for the connection. */
static void handle_connect(struct init_state *s, uint64_t id, const char *body, size_t len)
{
	struct hutch_msg_connect m;
	struct hutch_msg_connected rep = { 0 };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	_cleanup_close_ int fd = -EBADF;

	if (len != sizeof(m))
		return;
	memcpy(&m, body, sizeof(m));
	a4.sin_port = a6.sin6_port = htons((uint16_t)m.port);
	fd = socket(m.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || m.port == 0 || m.port > 65535)
		rep.error = fd < 0 ? -errno : -EINVAL;
	else if (connect(fd, m.ipv6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
	                 m.ipv6 ? sizeof(a6) : sizeof(a4)) < 0 &&
	         errno != EINPROGRESS)
		rep.error = -errno;
	(void)hutch_proto_send(s->sock, HUTCH_MSG_CONNECTED, id, &rep, sizeof(rep), &fd,
	                       rep.error ? 0 : 1);
}

/*
 * The runtime dir's lxcfs ended and the supervisor sends the views of the
 * one that runs now, or none (HUTCH_MSG_VIEWS, supervisor/procview.c):
 * the dead views detached, the new ones attached in their place, before
 * any later request (a command's spawn) is read. A body of the wrong
 * size, an index out of range or a count of fds that is neither none nor
 * one per index: ignored. The fds are closed by the caller.
 */
static void handle_views(struct init_state *s, const char *body, size_t len, const int *fds,
                         size_t nfds)
{
	int by[HUTCH_ROOTFS_VIEWS];
	uint32_t which[HUTCH_ROOTFS_VIEWS];
	size_t n = len / sizeof(which[0]);

	if (!s->sys->views || len % sizeof(which[0]) || n > HUTCH_ROOTFS_VIEWS ||
	    (nfds && nfds != n))
		return;
	memcpy(which, body, len);
	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++)
		by[i] = -1;
	for (size_t i = 0; i < n; i++)
		if (which[i] >= HUTCH_ROOTFS_VIEWS)
			return;
	for (size_t i = 0; i < nfds; i++)
		by[which[i]] = fds[i];
	(void)s->sys->views(s->sys_ud, nfds ? by : NULL);
}

/* EXITED, with the command's change list when there is one. */
static void send_exited(struct init_state *s, uint64_t id, int status)
{
	struct hutch_msg_exited e = { .status = status };
	_cleanup_free_ char *body = NULL;
	size_t n = hutch_changes_end(s->changes, id, sizeof(e), &body);

	if (body)
		memcpy(body, &e, sizeof(e));
	(void)hutch_proto_send(s->sock, HUTCH_MSG_EXITED, id, body ?: (char *)&e,
	                       body ? n : sizeof(e), NULL, 0);
}

static void reap(struct init_state *s)
{
	int status;
	pid_t pid;

	while ((pid = s->sys->wait_any(s->sys_ud, &status)) > 0) {
		for (size_t i = 0; i < s->n; i++) {
			if (s->children[i].pid != pid)
				continue;
			/* Its session and descendants die before the exit is
			 * reported, so "exited" means the whole tree is gone. */
			if (s->children[i].kill_rest)
				s->sys->kill_tree(s->sys_ud, pid, SIGKILL);
			for (size_t j = 0; j < s->children[i].nsids; j++)
				s->sys->kill_tree(s->sys_ud, s->children[i].sids[j], SIGKILL);
			free(s->children[i].sids);
			send_exited(s, s->children[i].id, status);
			s->children[i] = s->children[--s->n];
			break;
		}
	}
}

/* The supervisor is gone: so is the sandbox. On v1, thaw the commands
 * first: a task the v1 freezer holds ignores even SIGKILL, and the kernel
 * kills our pid namespace only once we exit. */
static __attribute__((noreturn)) void supervisor_gone(struct init_state *s)
{
	if (s->cmds_state_fd >= 0)
		(void)!write(s->cmds_state_fd, "THAWED", 6);
	if (s->shared_pid)
		hutch_proc_kill_descendants(SIGKILL);
	_exit(0);
}

/*
 * A full snapshot's dump (HUTCH_MSG_DUMPABLE): CRIU checks from inside the
 * sandbox's user namespace that init's namespaces are its, opening
 * the files of /proc/1/ns, which a non-dumpable init (its mm's user namespace the
 * host's) refuses to everybody without CAP_SYS_PTRACE on the host. So the
 * supervisor makes init dumpable for the dump and not again after it.
 * Meanwhile only a process of init's own uid (the sandbox's root) could
 * ptrace it: a plain sandbox's commands are appuser's, and a container
 * (whose processes may be root) never gets here.
 */
static void handle_dumpable(struct init_state *s, const char *body, size_t len)
{
	uint32_t on;

	if (len != sizeof(on) || s->spawner.container || s->shared_pid)
		return;
	memcpy(&on, body, sizeof(on));
	(void)prctl(PR_SET_DUMPABLE, on == 1 ? 1 : 0);
}

/* One message of the supervisor: 0, 1 when it hung up, -errno. */
static int serve_message(struct init_state *s)
{
	static char body[HUTCH_PROTO_MAX];
	struct hutch_msg_hdr hdr;
	int fds[HUTCH_PROTO_FDS_MAX];
	size_t nfds = HUTCH_PROTO_FDS_MAX;
	ssize_t n = hutch_proto_recv(s->sock, &hdr, body, sizeof(body), fds, &nfds);

	if (n < 0 && n != -EAGAIN && n != -EBADMSG)
		return (int)n;
	if (n == 0 && hdr.type == 0)
		return 1; /* the sandbox goes with it */
	if (n < 0)
		return 0;
	if (hdr.type == HUTCH_MSG_SPAWN)
		handle_spawn(s, hdr.id, body, (size_t)n, fds, nfds);
	else if (hdr.type == HUTCH_MSG_KILL)
		handle_kill(s, hdr.id, body, (size_t)n);
	else if (hdr.type == HUTCH_MSG_CONNECT)
		handle_connect(s, hdr.id, body, (size_t)n);
	else if (hdr.type == HUTCH_MSG_DUMPABLE)
		handle_dumpable(s, body, (size_t)n);
	else if (hdr.type == HUTCH_MSG_VIEWS)
		handle_views(s, body, (size_t)n, fds, nfds);
	if (hdr.type != HUTCH_MSG_SPAWN)
		hutch_close_many(fds, nfds);
	return 0;
}

static __attribute__((noreturn)) void serve(struct init_state *s, int sigfd)
{
	struct pollfd pfd[3] = { { .fd = s->sock, .events = POLLIN },
		                 { .fd = sigfd, .events = POLLIN },
		                 { .events = POLLIN } };

	for (;;) {
		int timeout = -1;

		pfd[2].fd = hutch_changes_poll_fd(s->changes, &timeout);
		if (poll(pfd, 3, timeout) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				if (si.ssi_signo == SIGUSR2)
					supervisor_gone(s); /* our PDEATHSIG (v1) */
			reap(s);
		}
		if (pfd[2].fd >= 0 && pfd[2].revents)
			hutch_changes_read(s->changes);
		if (pfd[0].revents) {
			int r = serve_message(s);
			if (r > 0)
				supervisor_gone(s);
			if (r < 0)
				_exit(1);
		}
	}
}

/* v1: the cgroups made after our clone (HUTCH_MSG_CGROUPS, proto.h),
 * joined while we are one thread and nothing runs in the sandbox; the
 * commands' freezer files placed at the numbers p names. 0 or -errno,
 * reported once GO came. */
static int join_cgroups(const struct hutch_init_params *p, const void *body, ssize_t n, int *fds,
                        size_t nfds)
{
	size_t ncmds = p->cmds_tasks_fd >= 0 ? 2 : 0;
	uint32_t njoin = 0;
	int r;

	if (n == sizeof(njoin))
		memcpy(&njoin, body, sizeof(njoin));
	if (n != sizeof(njoin) || (size_t)njoin + ncmds != nfds) {
		hutch_close_many(fds, nfds);
		return -EPROTO;
	}
	r = hutch_cgroup_join_self(fds, njoin); /* closes them: 4 and 5 are free */
	for (size_t i = 0; i < ncmds; i++) {
		int at = i == 0 ? p->cmds_tasks_fd : p->cmds_state_fd, fd = fds[njoin + i];

		if (fd != at && dup3(fd, at, O_CLOEXEC) < 0 && r >= 0)
			r = -errno;
		if (fd != at)
			close(fd);
	}
	return r;
}

/* GO (its id HUTCH_GO_NO_VIEWS: rootfs->procview_fd closed, no views),
 * with the sandbox CA's PEM (header bindings) for rootfs->ca_pem and
 * the disk's mounts (runtime/disk.h; none: tmpfs) for rootfs->disk_fds,
 * then the change lists' fanotify group marked on it (*group, or -1);
 * on v1 the cgroups before it (*joined: 1 until they come, then 0 or -errno). */
static int wait_go(const struct hutch_init_params *p, struct hutch_rootfs_config *rootfs,
                   int *group, int *joined)
{
	static char ca[8192]; /* zeroed: what GO carries stays NUL terminated */
	static int fds[HUTCH_CGROUP_MAX_DIRS + 2];
	struct hutch_msg_hdr hdr = { 0 };
	size_t nfds = ELEMENTSOF(fds);
	ssize_t n = hutch_proto_recv(p->sock, &hdr, ca, sizeof(ca) - 1, fds, &nfds);

	if (n >= 0 && hdr.type == HUTCH_MSG_CGROUPS && p->cgroups_late && *joined > 0) {
		*joined = join_cgroups(p, ca, n, fds, nfds);
		memset(ca, 0, sizeof(ca));
		return wait_go(p, rootfs, group, joined);
	}
	if (n >= 0 && hdr.type == HUTCH_MSG_GO && hdr.id == HUTCH_GO_NO_VIEWS)
		closep(&rootfs->procview_fd); /* lxcfs did not answer: the kernel's files */
	else if (n >= 0 && hdr.id != HUTCH_GO_ALL)
		return -EPROTO;
	rootfs->ca_pem = n > 0 ? ca : NULL;
	rootfs->disk_fds = n >= 0 && nfds >= HUTCH_ROOTFS_WRITE_FDS ? fds : NULL;
	*group = n >= 0 && nfds == HUTCH_ROOTFS_WRITE_FDS + 1 ? fds[HUTCH_ROOTFS_WRITE_FDS] : -1;
	if (rootfs->bundle && *group >= 0) /* a container has no change lists */
		closep(group);
	if (n >= 0 && nfds && (!rootfs->disk_fds || nfds > HUTCH_ROOTFS_WRITE_FDS + 1))
		return -EPROTO;
	return n < 0 ? (int)n : hdr.type == HUTCH_MSG_GO && strlen(ca) == (size_t)n ? 0 : -EPROTO;
}

static void on_usr2(int sig)
{
	(void)sig; /* never runs: SIGUSR2 is blocked and read from the signalfd */
}

/*
 * The parent-death signal, set again once init serves: the kernel clears
 * it when credentials change (commit_creds()), and init's setresuid(0)
 * in its user namespace changed its euid, so the PDEATHSIG set right
 * after clone() was gone; only the socket's end of file told init of its
 * supervisor's death, which a frozen init never reads (cgroup v2: a
 * sleeping sandbox outlived its killed supervisor, found on the v2 VM).
 *
 * v2: SIGKILL, which reaches a task cgroup.freeze holds.
 * v1 (the commands have their own freezer cgroup, init is never frozen):
 * SIGUSR2, so that init thaws the commands before it exits
 * (supervisor_gone()); the v1 freezer holds a frozen task even against
 * SIGKILL. A pid namespace's init drops signals it has no handler for, so
 * it gets one, blocked and read from the signalfd. Nothing inside can
 * send it: commands run as appuser, and init is root of the namespace.
 * A pod member's init (a pod's pid namespace, not its PID 1) takes the
 * same way on v1 and v2, so that its commands die with it (the namespace
 * does not); there the pod's root can send it, and could as well kill it
 * (sharing a pid namespace is that), nothing beyond. A supervisor dying before this point is seen
 * on the socket (nothing can be frozen yet: sleep needs the loop to be up).
 */
static int arm_pdeathsig(const struct init_state *s)
{
	struct sigaction sa = { .sa_handler = on_usr2 };

	if (s->cmds_state_fd < 0 && !s->shared_pid)
		return prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ? -errno : 0;
	if (sigaction(SIGUSR2, &sa, NULL) < 0 || prctl(PR_SET_PDEATHSIG, SIGUSR2) < 0)
		return -errno;
	return 0;
}

/* SIGCHLD (and on v1 the parent-death SIGUSR2) through a signalfd.
 * Returns it, or -errno with err set. */
static int setup_signals(const struct init_state *s, struct hutch_err *err)
{
	sigset_t mask;
	int sigfd, r;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (s->cmds_state_fd >= 0 || s->shared_pid)
		sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		return hutch_err_set_errno(err, -errno, "signalfd");
	r = arm_pdeathsig(s);
	if (r < 0) {
		close(sigfd);
		return hutch_err_set_errno(err, r, "set the parent-death signal");
	}
	return sigfd;
}

/* An image root's writable directories to the supervisor, which reads
 * them (frozen) for a filesystem snapshot; init keeps none. */
static int send_write_fds(int sock, int *fds, struct hutch_err *err)
{
	uint32_t which[HUTCH_ROOTFS_WRITE_FDS];
	int pass[HUTCH_ROOTFS_WRITE_FDS];
	size_t n = 0;
	int r;

	for (uint32_t i = 0; i < HUTCH_ROOTFS_WRITE_FDS; i++)
		if (fds[i] >= 0)
			which[n] = i, pass[n++] = fds[i];
	r = n ? hutch_proto_send(sock, HUTCH_MSG_WRITE_FDS, 0, which, n * sizeof(which[0]), pass, n)
	      : 0;
	hutch_close_many(fds, HUTCH_ROOTFS_WRITE_FDS);
	return r < 0 ? hutch_err_set_errno(err, r, "pass the writable layer to the supervisor") : 0;
}

/*
 * The socket to the supervisor made again, in the sandbox's network
 * namespace (HUTCH_MSG_SOCKET), the same fd number from now on: CRIU
 * dumps a process's sockets only from the network namespaces it dumps
 * (docs/snapshots.md, full snapshots). Its buffers as big as the first's
 * (supervisor/setup.c): init holds CAP_NET_ADMIN over its own namespace
 * yet (a joined one's: as big as net.core's maxima allow).
 */
static int resocket(int sock)
{
	_cleanup_close_ int mine = -EBADF, theirs = -EBADF;
	int sv[2], bytes = HUTCH_PROTO_SOCK_BUF;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	mine = sv[0];
	theirs = sv[1];
	/* As big as the netns's net.core.[rw]mem_max allow. No SO_*BUFFORCE
	 * first: it needs CAP_NET_ADMIN in the initial user namespace
	 * (capable()), which init, always in a user namespace of its own or
	 * a pod's, never has: it failed EPERM every time (4 syscalls). */
	for (size_t i = 0; i < 2; i++) {
		(void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
		(void)setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
	}
	if (hutch_proto_send(sock, HUTCH_MSG_SOCKET, 0, NULL, 0, &theirs, 1) < 0)
		return -EIO;
	/* init's socket keeps its number: */
	if (dup3(mine, sock, O_CLOEXEC) < 0) /* lint-fds: ok: the same number */
		return -errno;
	return 0;
}

/* The seam's server (init.h) is an init_state that serves with other
 * syscalls: the same handling, none of pid 1's setup. */
struct hutch_init_server {
	struct init_state s;
};

struct hutch_init_server *hutch_init_server_new(int sock, const struct hutch_init_sys *sys,
                                                void *ud)
{
	struct hutch_init_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	srv->s = (struct init_state){
		.sock = sock,
		.cmds_state_fd = -1,
		.held_slave = -EBADF,
		.sys = sys,
		.sys_ud = ud,
		.nest = { .sock = -EBADF, .proc_fd = -EBADF },
	};
	return srv;
}

void hutch_init_server_free(struct hutch_init_server *srv)
{
	if (!srv)
		return;
	for (size_t i = 0; i < srv->s.n; i++)
		free(srv->s.children[i].sids);
	free(srv->s.children);
	free(srv);
}

int hutch_init_server_message(struct hutch_init_server *srv)
{
	return serve_message(&srv->s);
}

void hutch_init_server_reap(struct hutch_init_server *srv)
{
	reap(&srv->s);
}

/* What each command's start needs (launch.h), from init's parameters. */
static struct hutch_init_spawner spawner_of(const struct hutch_init_params *p)
{
	return (struct hutch_init_spawner){ .oom_fd = -EBADF,
		                            .join_fd = p->cmds_tasks_fd,
		                            .extra_seccomp = p->extra_seccomp,
		                            .container = p->rootfs.bundle != NULL,
		                            .shared_pid = getpid() != 1 };
}

/* The root, then the disk's mounts closed (attached now, or unused) and
 * the writable layer's fds sent. */
static int build_root(int sock, struct hutch_rootfs_config *rootfs, int *write_fds,
                      struct hutch_err *err)
{
	int r = hutch_rootfs_setup_child(rootfs, err);

	if (rootfs->disk_fds)
		hutch_close_many((int *)rootfs->disk_fds, HUTCH_ROOTFS_WRITE_FDS);
	return r < 0 ? r : send_write_fds(sock, write_fds, err);
}

/* Root in the user namespace, the cgroup namespace, the other
 * namespaces' setup (ns.c), and a container's own pid namespace nested in
 * ours (pidns.h: its proc is the root's). 0 or -errno with err set. */
static int setup_inside(struct init_state *s, const struct hutch_init_params *p,
                        struct hutch_rootfs_config *rootfs, struct hutch_err *err)
{
	/* The new uid set the dumpable flag to fs.suid_dumpable: in a pod's
	 * pid namespace, where the pod's root now could attach, clear it. */
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 ||
	    (s->shared_pid && prctl(PR_SET_DUMPABLE, 0) < 0))
		return hutch_err_set_errno(err, -errno, "become root in the user namespace");
	/* We are in the sandbox's cgroups (cloned into, or joined right after
	 * clone): make them the root of our cgroup namespace. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		return hutch_err_set_errno(err, -errno, "create cgroup namespace");
	if (hutch_init_setup_ns(p->sock, p->hostname, p->net_early ? NULL : p->net, p->sysctls,
	                        err) < 0)
		return -1;
	if (!s->spawner.container || s->shared_pid)
		return 0;
	if (hutch_init_nest_pidns(&s->nest, &s->spawner, p->seccomp, err) < 0)
		return -1;
	rootfs->proc_mnt = &s->nest.proc_fd;
	return 0;
}

/* GO, with the network namespace made meanwhile (p->net_early: off the
 * path to GO) and, on v1, the cgroups joined as they came; a failure of
 * either is reported once GO came, to the supervisor waiting for READY. */
static void await_go(const struct hutch_init_params *p, struct hutch_rootfs_config *rootfs,
                     int *group)
{
	struct hutch_err err = { 0 };
	int joined = p->cgroups_late ? 1 : 0;

	if (p->net_early)
		(void)hutch_init_make_net(p->sock, p->net, &err);
	if (wait_go(p, rootfs, group, &joined) < 0)
		_exit(1);
	if (joined > 0) /* never run a command outside its limits */
		hutch_err_set(&err, -EPROTO, "the sandbox's cgroups did not come before GO");
	else if (joined < 0)
		hutch_err_set_errno(&err, joined, "join the sandbox's cgroups");
	if (err.code)
		fail(p->sock, &err);
}

/*
 * A supervisor that died before init's PR_SET_PDEATHSIG sends nothing:
 * init then reads EOF on its socket in wait_go() (the supervisor's end is
 * the supervisor's alone: close-on-exec, and what it forks without exec
 * dies with it) and exits before anything runs in the sandbox. A check of
 * getppid() after the prctl could not tell: in a new pid namespace it is 0
 * whether the parent lives or not (test_crash.py's
 * test_supervisor_killed_before_init_s_pdeathsig).
 */
void hutch_init_main(const struct hutch_init_params *p)
{
	struct init_state s = { .sock = p->sock,
		                .cmds_state_fd = p->cmds_state_fd,
		                .held_slave = -EBADF,
		                .shared_pid = getpid() != 1,
		                .spawner = spawner_of(p),
		                .sys = &hutch_init_sys_linux,
		                .nest = { .sock = -EBADF, .proc_fd = -EBADF } };
	struct hutch_err err = { 0 };
	struct hutch_rootfs_config rootfs = p->rootfs;
	int write_fds[HUTCH_ROOTFS_WRITE_FDS] = { -EBADF, -EBADF, -EBADF, -EBADF };
	int sigfd, group, r;

	s.sys_ud = &s.spawner;
	/* If the supervisor dies, so does the sandbox (and with PID 1, its
	 * whole pid namespace); dead before this line: see above. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(1);
	/* A session of the sandbox's own: none of its processes is then in a
	 * session led outside its pid namespace (CRIU dumps only such trees). */
	if (setsid() < 0)
		_exit(1);
	if (s.shared_pid && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		_exit(1);
	await_go(p, &rootfs, &group);
	if (setup_inside(&s, p, &rootfs, &err) < 0)
		fail(p->sock, &err);
	if (resocket(p->sock) < 0) {
		hutch_err_set_errno(&err, -EIO, "make the supervisor's socket in the sandbox");
		fail(p->sock, &err);
	}
	if (rootfs.n_layers && !rootfs.bundle)
		rootfs.write_fds = write_fds;
	if (build_root(p->sock, &rootfs, write_fds, &err) < 0)
		fail(p->sock, &err);
	closep(&s.nest.proc_fd);
	if (p->console_uid >= 0 &&
	    hutch_init_console_open(p->sock, (uid_t)p->console_uid, &s.held_slave, &err) < 0)
		fail(p->sock, &err);
	if (!s.spawner.container && p->change_lists) /* before seccomp: not its syscalls */
		s.spawner.changes = s.changes =
		        hutch_changes_new(group); /* group: sent only then */
	/* A group of init's own (a tmpfs's): a copy to the supervisor, so
	 * that init's exit is not its last close (issue 31). */
	if (hutch_changes_own_group(s.changes) >= 0) {
		int own = hutch_changes_own_group(s.changes);

		(void)hutch_proto_send(p->sock, HUTCH_MSG_CHANGES_GROUP, 0, NULL, 0, &own, 1);
	}
	r = hutch_init_spawner_prepare(&s.spawner);
	if (r < 0) {
		hutch_err_set_errno(&err, r, "allocate the command stack");
		fail(p->sock, &err);
	}
	r = s.spawner.container ? hutch_caps_restrict_container() : hutch_caps_restrict_init();
	if (r < 0) {
		hutch_err_set_errno(&err, r, "drop the capabilities no command gets");
		fail(p->sock, &err);
	}
	if (prctl(PR_SET_DUMPABLE, 0) < 0) {
		hutch_err_set_errno(&err, -errno, "make init non-dumpable");
		fail(p->sock, &err);
	}
	sigfd = setup_signals(&s, &err);
	if (sigfd < 0)
		fail(p->sock, &err);
	/* Last: from here on init itself runs under the sandbox's filter,
	 * which every command inherits (the children only check that it is
	 * there). What init still does (poll, messages, clone, kill, /proc
	 * reads, dropping a child's ids) is on the allow-list; init holds
	 * CAP_SYS_ADMIN in its namespace, but no_new_privs is set anyway so
	 * that the children inherit it. */
	r = hutch_seccomp_load(p->seccomp);
	if (r < 0) {
		hutch_err_set_errno(&err, r, "load the seccomp filter");
		fail(p->sock, &err);
	}
	if (hutch_proto_send(p->sock, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0) < 0)
		_exit(1);
	hutch_changes_index(s.changes);
	serve(&s, sigfd);
}
