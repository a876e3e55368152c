/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init, PID 1 of the sandbox (see init.h). It runs as namespace root with
 * every capability inside the sandbox's user namespace, and is the only
 * process that forks commands: each child drops to appuser, loses every
 * capability, gets no_new_privs and the seccomp filter, and only then
 * execs. init never execs itself, and it is not dumpable, so appuser can
 * neither ptrace it nor read its memory or open its /proc entries.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "cleanup.h"
#include "fdutil.h"
#include "fileops.h"
#include "init.h"
#include "proto.h"
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
	const struct sock_fprog *seccomp;
	struct child *children;
	size_t n, alloc;
};

static __attribute__((noreturn)) void fail(int sock, struct hutch_err *err)
{
	(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, err, sizeof(*err), NULL, 0);
	_exit(1);
}

static void child_fail(const char *what, const char *arg, int code, int status)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "hutch: %s '%s': %s\n", what, arg, strerror(code));

	if (n > 0)
		(void)!write(2, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
	_exit(status);
}

/*
 * Make the command, and everything it forks, a better OOM victim than init.
 * Files in /workspace and /tmp are tmpfs pages charged to the sandbox's
 * memory cgroup but owned by no process, so when a write fills the cgroup
 * the OOM killer compares resident sets alone and init, bigger than dd or
 * sh, was chosen: the whole sandbox died. Raising oom_score_adj needs no
 * privilege; appuser can lower it back only to init's 0, which at worst
 * lets a sandbox kill its own init. Best effort: the sandbox works without.
 * init is not dumpable, so its /proc files (and this child's) belong to
 * host root, which namespace root cannot open: the child is made dumpable
 * just for the write. Nothing can ptrace it meanwhile: it is still namespace
 * root and appuser has no capability.
 */
static void prefer_as_oom_victim(void)
{
	static const char adj[] = "500";
	int fd;

	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return;
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, adj, sizeof(adj) - 1);
		close(fd);
	}
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* In the forked child: become the command. Never returns. */
static __attribute__((noreturn)) void
exec_command(const struct init_state *s, const struct hutch_spawn_req *req, const int fds[3])
{
	extern char **environ;
	sigset_t none;
	int r;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Handlers do not survive execve, ignored signals do: reset those
	 * the supervisor ignores (init inherits them), not all 64. */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (setsid() < 0)
		_exit(126);
	for (int i = 0; i < 3; i++) {
		/* dup2 clears O_CLOEXEC on the target; fds[i] >= 3 always (0-2 are
		 * open on /dev/null in init), so no overlap. */
		if (dup2(fds[i], i) < 0) /* lint-fds: ok: 0-2 for exec */
			_exit(126);
	}
	if (sys_close_range(3, ~0U, 0) < 0)
		_exit(126);
	prefer_as_oom_victim();
	r = hutch_caps_drop_child(HUTCH_APP_UID, HUTCH_APP_GID);
	if (r < 0)
		child_fail("cannot drop privileges for", req->argv[0], -r, 126);
	if (chdir(req->cwd) < 0)
		child_fail("cannot change directory to", req->cwd, errno, 126);
	r = hutch_seccomp_load(s->seccomp);
	if (r < 0)
		child_fail("cannot load seccomp filter for", req->argv[0], -r, 126);
	environ = (char **)req->envp;
	if (req->flags & HUTCH_SPAWN_BUILTIN)
		_exit(hutch_fileop_main((int)req->argc, req->argv));
	execvp(req->argv[0], (char *const *)req->argv);
	r = errno;
	child_fail("cannot execute", req->argv[0], r, r == ENOENT ? 127 : 126);
	_exit(127);
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
	pid_t pid;

	if (nfds != 3 || hutch_proto_spawn_decode(body, len, &req) < 0) {
		rep.error = -EBADMSG;
		goto reply;
	}
	pid = fork();
	if (pid < 0) {
		rep.error = -errno;
		goto reply;
	}
	if (pid == 0)
		exec_command(s, &req, fds);
	if (track(s, pid, id) < 0) {
		kill(pid, SIGKILL);
		rep.error = -ENOMEM;
		goto reply;
	}
	rep.pid = pid;
reply:
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	(void)hutch_proto_send(s->sock, HUTCH_MSG_SPAWNED, id, &rep, sizeof(rep), NULL, 0);
}

struct proc_entry {
	pid_t pid, ppid, pgrp, sid;
	bool marked;
};

/* Snapshot of every process: pid, parent, session. Returns the count. */
static size_t scan_procs(struct proc_entry **ret)
{
	_cleanup_closedir_ DIR *d = opendir("/proc");
	struct proc_entry *v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;

	*ret = NULL;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[64], buf[512], *p;
		long pid, ppid, pgrp, sess;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = strtol(de->d_name, NULL, 10);
		if (pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
			continue;
		/* Fields after the last ')' (comm may hold anything):
		 * state ppid pgrp session */
		p = strrchr(buf, ')');
		if (!p || sscanf(p + 1, " %*c %ld %ld %ld", &ppid, &pgrp, &sess) != 3)
			continue;
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 64;
			struct proc_entry *q = realloc(v, na * sizeof(*v));
			if (!q)
				break;
			v = q;
			alloc = na;
		}
		v[n++] = (struct proc_entry){ (pid_t)pid, (pid_t)ppid, (pid_t)pgrp, (pid_t)sess,
			                      false };
	}
	*ret = v;
	return n;
}

/*
 * Kill a command's whole tree: every process of its session, and every
 * descendant of its main process or of a session member (by parent links,
 * which also catches children that made a session of their own with
 * setsid()). Killed processes cannot fork, so a few rounds reach a fixed
 * point. What escapes: a process whose parent chain to the command was
 * already broken (a double-forked daemon in a new session); it lives until
 * the sandbox ends.
 */
static void kill_tree(pid_t root, int sig)
{
	/* Snapshot before the first kill: once the main process dies, init
	 * reaps it and its children's parent link points at init. */
	for (int round = 0; round < 4; round++) {
		struct proc_entry *v = NULL;
		size_t n = scan_procs(&v);
		bool grew = true;
		int killed = 0;

		for (size_t i = 0; i < n; i++)
			v[i].marked = v[i].pid == root || v[i].sid == root || v[i].pgrp == root;
		while (grew) {
			grew = false;
			for (size_t i = 0; i < n; i++) {
				if (v[i].marked)
					continue;
				for (size_t j = 0; j < n; j++)
					if (v[j].marked && v[j].pid == v[i].ppid) {
						v[i].marked = grew = true;
						break;
					}
			}
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].marked && kill(v[i].pid, sig) == 0)
				killed++;
		free(v);
		if (killed == 0 || sig != SIGKILL)
			break;
	}
}

/*
 * For HUTCH_KILL_REST_ON_EXIT: remember the sessions of c's tree now (its
 * own and those that members made with setsid()). Once the main process is
 * gone, a setsid() child it left has init as parent and no link to the
 * tree; its session still names it.
 */
static void record_sessions(struct child *c)
{
	struct proc_entry *v = NULL;
	size_t n = scan_procs(&v);
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
				record_sessions(&s->children[i]);
			}
			kill_tree(s->children[i].pid, k.signal);
		}
}

static void reap(struct init_state *s)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < s->n; i++) {
			struct hutch_msg_exited e = { .status = status };
			if (s->children[i].pid != pid)
				continue;
			/* Its session and descendants die before the exit is
			 * reported, so "exited" means the whole tree is gone. */
			if (s->children[i].kill_rest)
				kill_tree(pid, SIGKILL);
			for (size_t j = 0; j < s->children[i].nsids; j++)
				kill_tree(s->children[i].sids[j], SIGKILL);
			free(s->children[i].sids);
			(void)hutch_proto_send(s->sock, HUTCH_MSG_EXITED, s->children[i].id, &e,
			                       sizeof(e), NULL, 0);
			s->children[i] = s->children[--s->n];
			break;
		}
	}
}

static __attribute__((noreturn)) void serve(struct init_state *s, int sigfd)
{
	static char body[HUTCH_PROTO_MAX];
	struct pollfd pfd[2] = { { .fd = s->sock, .events = POLLIN },
		                 { .fd = sigfd, .events = POLLIN } };

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				;
			reap(s);
		}
		if (pfd[0].revents) {
			struct hutch_msg_hdr hdr;
			int fds[3];
			size_t nfds = 3;
			ssize_t n = hutch_proto_recv(s->sock, &hdr, body, sizeof(body), fds, &nfds);
			if (n < 0 && n != -EAGAIN && n != -EBADMSG)
				_exit(1);
			if (n == 0 && hdr.type == 0)
				_exit(0); /* supervisor gone: the sandbox goes with it */
			if (n < 0)
				continue;
			if (hdr.type == HUTCH_MSG_SPAWN)
				handle_spawn(s, hdr.id, body, (size_t)n, fds, nfds);
			else if (hdr.type == HUTCH_MSG_KILL)
				handle_kill(s, hdr.id, body, (size_t)n);
			if (hdr.type != HUTCH_MSG_SPAWN)
				for (size_t i = 0; i < nfds; i++)
					close(fds[i]);
		}
	}
}

static int wait_go(int sock)
{
	struct hutch_msg_hdr hdr;
	char buf[16];
	ssize_t n = hutch_proto_recv(sock, &hdr, buf, sizeof(buf), NULL, NULL);

	if (n < 0)
		return (int)n;
	return hdr.type == HUTCH_MSG_GO ? 0 : -EPROTO;
}

/* The listeners of the DNS stub, TLS proxy and host ports live in our
 * network namespace but are served by the supervisor on the host. */
static int send_listeners(const struct hutch_init_params *p, struct hutch_err *err)
{
	struct hutch_net_listener ls[HUTCH_NET_LISTENERS_MAX];
	struct hutch_msg_net_fd body[HUTCH_NET_LISTENERS_MAX];
	int fds[HUTCH_NET_LISTENERS_MAX];
	int n, r;

	_Static_assert(HUTCH_NET_LISTENERS_MAX <= HUTCH_PROTO_FDS_MAX, "one message");
	n = hutch_net_child_listeners(p->net, p->net_child, ls, ELEMENTSOF(ls), err);
	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++) {
		body[i] = (struct hutch_msg_net_fd){ .kind = ls[i].kind, .port = ls[i].port };
		fds[i] = ls[i].fd;
	}
	r = hutch_proto_send(p->sock, HUTCH_MSG_NET_FDS, 0, body, (size_t)n * sizeof(body[0]), fds,
	                     (size_t)n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return r < 0 ? hutch_err_set_errno(err, r, "pass the listeners to the supervisor") : 0;
}

void hutch_init_main(const struct hutch_init_params *p)
{
	struct init_state s = { .sock = p->sock, .seccomp = p->seccomp };
	struct hutch_err err = { 0 };
	sigset_t mask;
	int sigfd, r;

	/* If the supervisor dies, so does the sandbox (and with PID 1, its
	 * whole pid namespace). Check the race with a parent already gone. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != p->supervisor_pid)
		_exit(1);
	if (wait_go(p->sock) < 0)
		_exit(1);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		hutch_err_set_errno(&err, -errno, "become root in the user namespace");
		fail(p->sock, &err);
	}
	/* The supervisor moved us into the sandbox cgroup: make that the
	 * root of our cgroup namespace. */
	if (unshare(CLONE_NEWCGROUP) < 0) {
		hutch_err_set_errno(&err, -errno, "create cgroup namespace");
		fail(p->sock, &err);
	}
	if (sethostname(p->hostname, strlen(p->hostname)) < 0) {
		hutch_err_set_errno(&err, -errno, "set hostname '%s'", p->hostname);
		fail(p->sock, &err);
	}
	if (hutch_net_setup_child(p->net, p->net_child, &err) < 0) {
		hutch_err_prefix(&err, "network");
		fail(p->sock, &err);
	}
	if (send_listeners(p, &err) < 0) {
		hutch_err_prefix(&err, "network");
		fail(p->sock, &err);
	}
	if (hutch_rootfs_setup_child(&p->rootfs, &err) < 0)
		fail(p->sock, &err);
	r = hutch_caps_prepare();
	if (r < 0) {
		hutch_err_set_errno(&err, r, "prepare capability drop");
		fail(p->sock, &err);
	}
	if (prctl(PR_SET_DUMPABLE, 0) < 0) {
		hutch_err_set_errno(&err, -errno, "make init non-dumpable");
		fail(p->sock, &err);
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0) {
		hutch_err_set_errno(&err, -errno, "signalfd");
		fail(p->sock, &err);
	}
	if (hutch_proto_send(p->sock, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0) < 0)
		_exit(1);
	serve(&s, sigfd);
}
