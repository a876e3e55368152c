/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init, PID 1 of the sandbox (see init.h). It runs as namespace root with
 * every capability inside the sandbox's user namespace, and is the only
 * process that starts commands: each child drops to appuser, loses every
 * capability, and only then execs. What is the same for every command
 * (the bounding and ambient sets, securebits, no_new_privs and the seccomp
 * filter) is applied once to init itself and inherited; commands are cloned
 * with CLONE_VM | CLONE_VFORK, as posix_spawn() does, not forked. init never execs itself, and it
 * is not dumpable, so appuser can neither ptrace it nor read its memory or open its /proc entries.
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
#include "cleanup.h"
#include "fdutil.h"
#include "fileops.h"
#include "init.h"
#include "ns.h"
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
	char *child_stack; /* CHILD_STACK_SIZE bytes above a guard page */
	int oom_fd;        /* our /proc/self/oom_score_adj, or -EBADF */
	char oom_orig[16]; /* its value at start */
	struct child *children;
	size_t n, alloc;
	int cmds_tasks_fd; /* v1: commands join their freezer cgroup here, or -1 */
	int cmds_state_fd; /* v1: its freezer.state, thawed when we go, or -1 */
	const struct sock_fprog *extra_seccomp; /* a container's profile, or NULL */
	int held_slave; /* the container's pty (HUTCH_SPAWN_HELD_TTY), or -EBADF */
	bool container; /* commands get the capabilities they ask (caps.h) */
	/* Born in a pod's pid namespace (not its PID 1): the subreaper of
	 * its commands, non-dumpable throughout, its descendants killed when
	 * the supervisor goes (the namespace does not end with us). */
	bool shared_pid;
};

static __attribute__((noreturn)) void fail(int sock, struct hutch_err *err)
{
	(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, err, sizeof(*err), NULL, 0);
	_exit(1);
}

/* Command children have their own small stack: clone(CLONE_VM) shares
 * init's memory, and init is suspended (CLONE_VFORK) until the child has
 * exec'd or exited, so one stack serves every command. */
#define CHILD_STACK_SIZE (64 * 1024)

/* Everything the command child reads, prepared by init before clone(). */
struct spawn_args {
	const struct hutch_spawn_req *req;
	const int *fds;
	const int *extra; /* HUTCH_SPAWN_EXTRA_FDS: the command's 3, 4, ... */
	int nextra;
	const char *path;     /* PATH of the command's environment */
	const char **sh_argv; /* ENOEXEC fallback: sh_argv[1] is set by the child */
	int join_fd;          /* v1: the commands' freezer cgroup's "tasks", or -1 */
	const struct sock_fprog *extra_seccomp; /* HUTCH_SPAWN_EXTRA_FILTER */
	bool container;                         /* init_state's */
};

/* Append src to buf[*n] within cap (no libc formatting: vfork-safe). */
static void append(char *buf, size_t cap, size_t *n, const char *src)
{
	while (*src && *n < cap)
		buf[(*n)++] = *src++;
}

/*
 * Report on the command's stderr and exit. Runs in a child that shares
 * init's memory: no stdio, no locale (strerrordesc_np() is a table lookup),
 * no allocation, only the stack.
 */
static __attribute__((noreturn)) void child_fail(const char *what, const char *arg, int code,
                                                 int status)
{
	const char *desc = strerrordesc_np(code);
	char buf[512];
	size_t n = 0;

	append(buf, sizeof(buf) - 1, &n, "hutch: ");
	append(buf, sizeof(buf) - 1, &n, what);
	append(buf, sizeof(buf) - 1, &n, " '");
	append(buf, sizeof(buf) - 1, &n, arg);
	append(buf, sizeof(buf) - 1, &n, "': ");
	append(buf, sizeof(buf) - 1, &n, desc ? desc : "Unknown error");
	buf[n++] = '\n';
	(void)!write(2, buf, n);
	_exit(status);
}

/*
 * execvp() of the command with its own environment, without touching
 * environ (shared with init): one execve() per PATH entry, as glibc's
 * execvpe() does, skipping the entries that fail with "not there"; a file
 * without a #! line (ENOEXEC) runs under /bin/sh like with execvp().
 */
static int exec_path(const struct spawn_args *a)
{
	const char *file = a->req->argv[0];
	char *const *argv = (char *const *)a->req->argv;
	char *const *envp = (char *const *)a->req->envp;
	char buf[PATH_MAX];
	bool eacces = false;
	const char *p = a->path;

	if (strchr(file, '/')) {
		execve(file, argv, envp);
		if (errno == ENOEXEC) {
			a->sh_argv[1] = file;
			execve("/bin/sh", (char *const *)a->sh_argv, envp);
			errno = ENOEXEC;
		}
		return errno;
	}
	if (strlen(file) > NAME_MAX)
		return ENAMETOOLONG;
	for (;;) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p), flen = strlen(file);

		/* An empty entry is the current directory, as in execvp(). */
		if (dlen + flen + 2 <= sizeof(buf)) {
			memcpy(buf, p, dlen);
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(dlen ? buf : file, argv, envp);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ENODEV:
			case ETIMEDOUT:
			case ESTALE:
				break;
			case ENOEXEC:
				a->sh_argv[1] = dlen ? buf : file;
				execve("/bin/sh", (char *const *)a->sh_argv, envp);
				return ENOEXEC;
			default:
				return errno;
			}
		}
		if (*end == '\0')
			break;
		p = end + 1;
	}
	return eacces ? EACCES : ENOENT;
}

/*
 * The command's child, between clone() and execve(). With clone(CLONE_VM)
 * it runs on its own stack in init's memory while init waits, so it only
 * makes syscalls and writes nothing but its stack (and sh_argv[1] for a
 * script without #!): no malloc, no stdio, no globals (errno aside, which
 * init does not read across the clone).
 * init's restriction (caps.c) emptied the bounding and ambient sets (a container's: see set_child).
 * Builtins (file operations) run as full processes: they are forked.
 */
/* The extra fds onto 3, 4, ...: first all above that range, so that
 * none is overwritten before it is placed (child side, its stack only). */
static int place_extra_fds(const struct spawn_args *a)
{
	int tmp[HUTCH_SPAWN_MAX_EXTRA_FDS];

	for (int i = 0; i < a->nextra; i++)
		if ((tmp[i] = fcntl(a->extra[i], F_DUPFD_CLOEXEC, 3 + a->nextra)) < 0)
			return -errno;
	for (int i = 0; i < a->nextra; i++)
		if (dup2(tmp[i], 3 + i) < 0) /* lint-fds: ok: the command's, for exec */
			return -errno;
	return 0;
}

static int command_child(void *arg)
{
	const struct spawn_args *a = arg;
	const struct hutch_spawn_req *req = a->req;
	sigset_t none;
	int r;

	/* Handlers do not survive execve, ignored signals do: reset those
	 * the supervisor ignores (init inherits them), not all 64. init
	 * installs no handler. Then unblock what init blocked around clone(). */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGUSR2, SIG_DFL); /* init's handler for its PDEATHSIG (v1) */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int i = 0; i < 3; i++) {
		/* dup2 clears O_CLOEXEC on the target; fds[i] >= 3 always (0-2 are
		 * open on /dev/null in init), so no overlap. Only a failure here
		 * cannot be told: stderr is not the command's yet. */
		if (dup2(a->fds[i], i) < 0) /* lint-fds: ok: 0-2 for exec */
			_exit(126);
	}
	/* From here every failure names its step on the command's stderr
	 * (an exit 126 of ~1 ms with no word could not be traced). */
	if (setsid() < 0)
		child_fail("cannot start a session for", req->argv[0], errno, 126);
	/* A terminal: the pty's slave becomes the new session's controlling
	 * terminal, so ^C reaches its foreground group. */
	if ((req->flags & HUTCH_SPAWN_TTY) && ioctl(0, TIOCSCTTY, 0) < 0)
		child_fail("cannot take the terminal for", req->argv[0], errno, 126);
	/* v1: out of init's freezer cgroup into the commands' one, which idle
	 * sleep freezes without init (a thread moving itself: no global lock). */
	if (a->join_fd >= 0 && write(a->join_fd, "0", 1) != 1)
		child_fail("cannot join the commands' cgroup for", req->argv[0], errno, 126);
	if (a->nextra > 0 && (r = place_extra_fds(a)) < 0)
		child_fail("cannot place the extra fds of", req->argv[0], -r, 126);
	if (sys_close_range(3 + (unsigned)a->nextra, ~0U, 0) < 0)
		child_fail("cannot close init's fds for", req->argv[0], errno, 126);
	r = a->container
	            ? hutch_caps_set_child(req->uid, req->gid, req->groups, req->ngroups, req->caps)
	            : hutch_caps_drop_child(req->uid, req->gid);
	if (r < 0)
		child_fail("cannot drop privileges for", req->argv[0], -r, 126);
	if (chdir(req->cwd) < 0)
		child_fail("cannot change directory to", req->cwd, errno, 126);
	r = hutch_seccomp_check_inherited();
	if (r < 0)
		child_fail("no seccomp filter for", req->argv[0], -r, 126);
	/* Last before execve: the profile may deny what the steps above use. */
	if ((req->flags & HUTCH_SPAWN_EXTRA_FILTER) &&
	    (!a->extra_seccomp ||
	     sys_seccomp(SECCOMP_SET_MODE_FILTER, 0, (void *)a->extra_seccomp) < 0))
		child_fail("cannot load the container's seccomp profile for", req->argv[0],
		           a->extra_seccomp ? errno : EINVAL, 126);
	if (req->flags & HUTCH_SPAWN_BUILTIN) {
		extern char **environ;

		environ = (char **)req->envp; /* forked: our own copy */
		_exit(hutch_fileop_main((int)req->argc, req->argv));
	}
	r = exec_path(a);
	child_fail("cannot execute", req->argv[0], r, r == ENOENT ? 127 : 126);
}

/*
 * Make the command, and everything it forks, a better OOM victim than init.
 * Files in /workspace and /tmp are tmpfs pages charged to the sandbox's
 * memory cgroup but owned by no process, so when a write fills the cgroup
 * the OOM killer compares resident sets alone and init, bigger than dd or
 * sh, was chosen: the whole sandbox died. The child inherits
 * oom_score_adj at clone(), so init raises its own for the length of the
 * clone (it is suspended meanwhile: CLONE_VFORK) and lowers it back, which
 * needs no privilege down to the value init started with. The child could
 * not write its own: with init's non-dumpable memory its /proc files belong
 * to host root. Best effort: the sandbox works without.
 */
static void set_oom_adj(const struct init_state *s, bool for_child)
{
	if (s->oom_fd < 0)
		return;
	if (for_child)
		(void)!pwrite(s->oom_fd, "500", 3, 0);
	else
		(void)!pwrite(s->oom_fd, s->oom_orig, strlen(s->oom_orig), 0);
}

/* Start the command: clone(CLONE_VM | CLONE_VFORK) on the child stack, so
 * neither init's page tables are copied nor any page faulted copy-on-write;
 * fork() for builtins, which run hutch code. Returns the pid or -errno. */
static pid_t spawn_command(struct init_state *s, const struct hutch_spawn_req *req,
                           const int fds[3], const int *extra, size_t nextra)
{
	static const char *sh_argv[HUTCH_SPAWN_MAX_ARGS + 2];
	struct spawn_args a = { .req = req,
		                .fds = fds,
		                .extra = extra,
		                .nextra = (int)nextra,
		                .path = "/bin:/usr/bin",
		                .sh_argv = sh_argv,
		                .join_fd = s->cmds_tasks_fd,
		                .extra_seccomp = s->extra_seccomp,
		                .container = s->container };
	sigset_t all, old;
	pid_t pid;
	int saved;

	for (uint32_t i = 0; i < req->envc; i++)
		if (strncmp(req->envp[i], "PATH=", 5) == 0) {
			a.path = req->envp[i] + 5;
			break;
		}
	sh_argv[0] = "/bin/sh";
	for (uint32_t i = 1; i <= req->argc; i++) /* argv[argc] is NULL */
		sh_argv[i + 1] = req->argv[i];
	/* No signal may run in the child before it resets its dispositions. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	set_oom_adj(s, true);
	if (req->flags & HUTCH_SPAWN_BUILTIN) {
		pid = fork();
		if (pid == 0)
			_exit(command_child(&a));
	} else {
		pid = clone(command_child, s->child_stack + CHILD_STACK_SIZE,
		            CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	}
	saved = errno;
	set_oom_adj(s, false);
	/* The child's setresuid() set the shared memory's dumpable flag to
	 * fs.suid_dumpable: make sure init stays non-dumpable. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid < 0 ? -saved : pid;
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
		rep.error = hutch_init_pty_open(req.winsize, req.uid, &master, &slave);
		if (rep.error < 0)
			goto reply;
		pty[0] = pty[1] = pty[2] = slave;
	}
	pid = spawn_command(s, &req, tty ? pty : fds, fds + nstd, nfds - nstd);
	if (pid < 0) {
		rep.error = pid;
		goto reply;
	}
	if (track(s, pid, id) < 0) {
		kill(pid, SIGKILL);
		rep.error = -ENOMEM;
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
static void record_sessions(struct child *c)
{
	struct hutch_proc_entry *v = NULL;
	size_t n = hutch_proc_scan(&v);
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
			hutch_proc_kill_tree(s->children[i].pid, k.signal);
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
				hutch_proc_kill_tree(pid, SIGKILL);
			for (size_t j = 0; j < s->children[i].nsids; j++)
				hutch_proc_kill_tree(s->children[i].sids[j], SIGKILL);
			free(s->children[i].sids);
			(void)hutch_proto_send(s->sock, HUTCH_MSG_EXITED, s->children[i].id, &e,
			                       sizeof(e), NULL, 0);
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
				if (si.ssi_signo == SIGUSR2)
					supervisor_gone(s); /* our PDEATHSIG (v1) */
			reap(s);
		}
		if (pfd[0].revents) {
			struct hutch_msg_hdr hdr;
			int fds[HUTCH_PROTO_FDS_MAX];
			size_t nfds = HUTCH_PROTO_FDS_MAX;
			ssize_t n = hutch_proto_recv(s->sock, &hdr, body, sizeof(body), fds, &nfds);
			if (n < 0 && n != -EAGAIN && n != -EBADMSG)
				_exit(1);
			if (n == 0 && hdr.type == 0)
				supervisor_gone(s); /* the sandbox goes with it */
			if (n < 0)
				continue;
			if (hdr.type == HUTCH_MSG_SPAWN)
				handle_spawn(s, hdr.id, body, (size_t)n, fds, nfds);
			else if (hdr.type == HUTCH_MSG_KILL)
				handle_kill(s, hdr.id, body, (size_t)n);
			else if (hdr.type == HUTCH_MSG_CONNECT)
				handle_connect(s, hdr.id, body, (size_t)n);
			if (hdr.type != HUTCH_MSG_SPAWN)
				hutch_close_many(fds, nfds);
		}
	}
}

/*
 * Once, while init is still dumpable (its /proc files are then its own):
 * keep /proc/self/oom_score_adj open for set_oom_adj(), and map the
 * command stack below a guard page. Its few pages are faulted in by the
 * first command, not here: an idle (pooled) sandbox does not pay them.
 */
static int prepare_spawn(struct init_state *s)
{
	char *m;
	ssize_t n;

	m = mmap(NULL, CHILD_STACK_SIZE + 4096, PROT_READ | PROT_WRITE,
	         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	if (mprotect(m, 4096, PROT_NONE) < 0)
		return -errno;
	s->child_stack = m + 4096;
	/* In a pod's pid namespace the pod's processes could attach to a
	 * dumpable init (pod.c): no oom_score_adj file there. */
	if (s->shared_pid || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return 0;
	s->oom_fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	if (s->oom_fd < 0)
		return 0;
	n = pread(s->oom_fd, s->oom_orig, sizeof(s->oom_orig) - 1, 0);
	/* Already at least as likely a victim as the commands would be: leave it. */
	if (n <= 0 || strtol(s->oom_orig, NULL, 10) >= 500) {
		close(s->oom_fd);
		s->oom_fd = -EBADF;
		return 0;
	}
	s->oom_orig[n] = '\0';
	return 0;
}

/* GO, with the sandbox CA's PEM (header bindings) for rootfs->ca_pem. */
static int wait_go(int sock, struct hutch_rootfs_config *rootfs)
{
	static char ca[8192]; /* zeroed: what GO carries stays NUL terminated */
	struct hutch_msg_hdr hdr = { 0 };
	ssize_t n = hutch_proto_recv(sock, &hdr, ca, sizeof(ca) - 1, NULL, NULL);

	rootfs->ca_pem = n > 0 ? ca : NULL;
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

void hutch_init_main(const struct hutch_init_params *p)
{
	struct init_state s = { .sock = p->sock,
		                .oom_fd = -EBADF,
		                .cmds_tasks_fd = p->cmds_tasks_fd,
		                .cmds_state_fd = p->cmds_state_fd,
		                .extra_seccomp = p->extra_seccomp,
		                .held_slave = -EBADF,
		                .container = p->rootfs.bundle != NULL,
		                .shared_pid = getpid() != 1 };
	struct hutch_err err = { 0 };
	struct hutch_rootfs_config rootfs = p->rootfs;
	int write_fds[HUTCH_ROOTFS_WRITE_FDS] = { -EBADF, -EBADF, -EBADF, -EBADF };
	int sigfd, r;

	/* If the supervisor dies, so does the sandbox (and with PID 1, its
	 * whole pid namespace). Check the race with a parent already gone. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != p->supervisor_pid)
		_exit(1);
	if (s.shared_pid && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		_exit(1);
	if (wait_go(p->sock, &rootfs) < 0)
		_exit(1);
	if (p->cgroup_join_err < 0) {
		hutch_err_set_errno(&err, p->cgroup_join_err, "join the sandbox's cgroups");
		fail(p->sock, &err);
	}
	/* The new uid set the dumpable flag to fs.suid_dumpable: in a pod's
	 * pid namespace, where the pod's root now could attach, clear it. */
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 ||
	    (s.shared_pid && prctl(PR_SET_DUMPABLE, 0) < 0)) {
		hutch_err_set_errno(&err, -errno, "become root in the user namespace");
		fail(p->sock, &err);
	}
	/* We are in the sandbox's cgroups (cloned into, or joined right after
	 * clone): make them the root of our cgroup namespace. */
	if (unshare(CLONE_NEWCGROUP) < 0) {
		hutch_err_set_errno(&err, -errno, "create cgroup namespace");
		fail(p->sock, &err);
	}
	if (hutch_init_setup_ns(p->sock, p->hostname, p->net, p->sysctls, &err) < 0)
		fail(p->sock, &err);
	if (rootfs.n_layers && !rootfs.bundle)
		rootfs.write_fds = write_fds;
	if (hutch_rootfs_setup_child(&rootfs, &err) < 0 ||
	    send_write_fds(p->sock, write_fds, &err) < 0)
		fail(p->sock, &err);
	if (p->console_uid >= 0 &&
	    hutch_init_console_open(p->sock, (uid_t)p->console_uid, &s.held_slave, &err) < 0)
		fail(p->sock, &err);
	r = prepare_spawn(&s);
	if (r < 0) {
		hutch_err_set_errno(&err, r, "allocate the command stack");
		fail(p->sock, &err);
	}
	r = s.container ? hutch_caps_restrict_container() : hutch_caps_restrict_init();
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
	serve(&s, sigfd);
}
