/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How init starts a command (see launch.h), moved out of init.c with the
 * request handling's syscall seam: each child drops to appuser, loses
 * every capability, and only then execs. What is the same for every
 * command (the bounding and ambient sets, securebits, no_new_privs and
 * the seccomp filter) is applied once to init itself and inherited;
 * commands are cloned with CLONE_VM | CLONE_VFORK, as posix_spawn() does,
 * not forked.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/seccomp.h>

#include "caps.h"
#include "changes.h"
#include "fileops.h"
#include "launch.h"
#include "proctree.h"
#include "proto.h"
#include "pty.h"
#include "rootfs.h"
#include "seccomp-filter.h"
#include "syscalls.h"

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
	bool container;                         /* the spawner's */
	const struct hutch_changes *changes;    /* the spawner's */
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

		environ = (char **)req->envp;      /* forked: our own copy */
		if (!strcmp(req->argv[0], "diff")) /* hutch diff: our copy of the history */
			_exit(hutch_changes_diff_main(a->changes, (int)req->argc, req->argv));
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
static void set_oom_adj(const struct hutch_init_spawner *s, bool for_child)
{
	if (s->oom_fd < 0)
		return;
	if (for_child)
		(void)!pwrite(s->oom_fd, "500", 3, 0);
	else
		(void)!pwrite(s->oom_fd, s->oom_orig, strlen(s->oom_orig), 0);
}

/* What the command child reads, for req on fds. */
static void args_of(struct spawn_args *a, const struct hutch_init_spawner *s,
                    const struct hutch_spawn_req *req, const int fds[3], const int *extra,
                    size_t nextra, const char **sh_argv)
{
	*a = (struct spawn_args){ .req = req,
		                  .fds = fds,
		                  .extra = extra,
		                  .nextra = (int)nextra,
		                  .path = "/bin:/usr/bin",
		                  .sh_argv = sh_argv,
		                  .join_fd = s->join_fd,
		                  .extra_seccomp = s->extra_seccomp,
		                  .container = s->container,
		                  .changes = s->changes };
	for (uint32_t i = 0; i < req->envc; i++)
		if (strncmp(req->envp[i], "PATH=", 5) == 0) {
			a->path = req->envp[i] + 5;
			break;
		}
	sh_argv[0] = "/bin/sh";
	for (uint32_t i = 1; i <= req->argc; i++) /* argv[argc] is NULL */
		sh_argv[i + 1] = req->argv[i];
}

/* Start the command: clone(CLONE_VM | CLONE_VFORK) on the child stack, so
 * neither init's page tables are copied nor any page faulted copy-on-write;
 * fork() for builtins, which run hutch code. Returns the pid or -errno. */
static pid_t spawn_command(const struct hutch_init_spawner *s, const struct hutch_spawn_req *req,
                           const int fds[3], const int *extra, size_t nextra)
{
	static const char *sh_argv[HUTCH_SPAWN_MAX_ARGS + 2];
	struct spawn_args a;
	sigset_t all, old;
	pid_t pid;
	int saved;

	args_of(&a, s, req, fds, extra, nextra, sh_argv);
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

/* The container's main process handed to the inner PID 1 (pidns.c): the
 * command child's steps in this process, which then execs. */
void hutch_init_exec_request(const struct hutch_init_spawner *s, const struct hutch_spawn_req *req,
                             const int fds[3], const int *extra, size_t nextra)
{
	static const char *sh_argv[HUTCH_SPAWN_MAX_ARGS + 2];
	struct spawn_args a;

	args_of(&a, s, req, fds, extra, nextra, sh_argv);
	_exit(command_child(&a));
}

/*
 * Once, while init is still dumpable (its /proc files are then its own):
 * keep /proc/self/oom_score_adj open for set_oom_adj(), and map the
 * command stack below a guard page. Its few pages are faulted in by the
 * first command, not here: an idle (pooled) sandbox does not pay them.
 */
int hutch_init_spawner_prepare(struct hutch_init_spawner *s)
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

static pid_t sys_spawn(void *ud, const struct hutch_spawn_req *req, const int fds[3],
                       const int *extra, size_t nextra)
{
	return spawn_command(ud, req, fds, extra, nextra);
}

static pid_t sys_wait_any(void *ud, int *status)
{
	return waitpid(-1, status, WNOHANG);
}

static void sys_kill_tree(void *ud, pid_t root, int sig)
{
	hutch_proc_kill_tree(root, sig);
}

static size_t sys_proc_scan(void *ud, struct hutch_proc_entry **ret)
{
	return hutch_proc_scan(ret);
}

static int sys_pty_open(void *ud, uint32_t winsize, uid_t owner, int *ret_master, int *ret_slave)
{
	return hutch_init_pty_open(winsize, owner, ret_master, ret_slave);
}

static int sys_views(void *ud, const int *fds)
{
	struct hutch_err err = { 0 };

	(void)ud;
	return hutch_rootfs_views_rebind(fds, &err);
}

const struct hutch_init_sys hutch_init_sys_linux = {
	.spawn = sys_spawn,
	.wait_any = sys_wait_any,
	.kill_tree = sys_kill_tree,
	.proc_scan = sys_proc_scan,
	.pty_open = sys_pty_open,
	.views = sys_views,
};
