/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating a sandbox from the CLI (see sandbox.h): reserve the state
 * directory (under a temporary name until locked, so gc never sees a
 * half-made sandbox), then fork a supervisor in a session of its own and
 * wait on a pipe for "ready" or an error (an OCI container's supervisor
 * is double-forked, see fork_supervisor()). The supervisor builds the sandbox
 * (setup.c) and runs its loop (run.c). If the CLI is killed meanwhile, the
 * supervisor finishes anyway: the result is a working sandbox, or nothing
 * once gc has run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "answer.h"
#include "api.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "events.h"
#include "fdutil.h"
#include "hooks.h"
#include "kind.h"
#include "lifecycle.h"
#include "log.h"
#include "lxcfs.h"
#include "run.h"
#include "sandbox-image.h"
#include "sandbox.h"
#include "setup.h"
#include "supervisor.h"

/* Wipe the environment strings of this process: /proc/<pid>/environ of the
 * supervisor (and of init, cloned from it) shows the memory they occupy.
 * The three test hooks a supervisor acts on are kept: the store's unpacker
 * stopping itself during a snapshot (image/unpack.c), the rollback's
 * worker during a rollback (image/rollback.c) and a fork's forker before
 * it fills its disk (runtime/disk-fork.c), which the fault tests
 * interrupt there (test_snapshot_faults.py, test_rollback.py), and the
 * supervisor itself once init is READY (test_lifecycle.py: a run's command over
 * before the steps after READY, hooks.h). HUTCH_CRIU
 * too: the CRIU a full snapshot's refusal names (runtime/criu.h); and
 * HUTCH_LXCFS: the lxcfs a supervisor starts when the runtime dir's ended
 * under its sandbox is the one a create would start (procview.c).
 * One pass, in place: a kept entry stays where it is (environ compacted
 * over the wiped ones), every other string is zeroed. No copies: the
 * PATH_MAX copy of each hook this did (20 KiB of zeroed stack) and
 * clearenv()/setenv() cost 0.2 ms and 9 page faults of a create (issue 31,
 * docs/performance.md). */
static bool is_kept_hook(const char *entry)
{
	static const char *const hooks[] = { "HUTCH_TEST_UNPACK_STOP_AFTER=",
		                             "HUTCH_TEST_ROLLBACK_STOP_AFTER=",
		                             "HUTCH_TEST_FORK_STOP=",
		                             "HUTCH_TEST_NATLOG_SYSCTLS=",
		                             "HUTCH_TEST_READY_STOP=",
		                             "HUTCH_CRIU=",
		                             "HUTCH_LXCFS=" };

	if (strncmp(entry, "HUTCH_", 6) != 0)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(hooks); i++)
		if (!strncmp(entry, hooks[i], strlen(hooks[i])))
			return true;
	return false;
}

static void scrub_environment(void)
{
	extern char **environ;
	size_t kept = 0;

	if (!environ)
		return;
	for (char **e = environ; *e; e++) {
		if (is_kept_hook(*e))
			environ[kept++] = *e;
		else
			memset(*e, 0, strlen(*e));
	}
	environ[kept] = NULL;
}

/* Close every fd the CLI's caller let us inherit (ours are all O_CLOEXEC):
 * a long-lived supervisor must not hold a caller's pipe open. Which fds
 * the caller passed is known only from the table, so the walk stays (a
 * close_range() would take ours too), but through getdents64() into a
 * small stack buffer: opendir()'s 32 KiB malloc()ed buffer and readdir()
 * cost 0.3 ms and 6 page faults of a create (issue 31,
 * docs/performance.md). */
static void close_inherited_fds(void)
{
	_cleanup_close_ int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[1024] __attribute__((aligned(8)));
	ssize_t n;

	if (d < 0)
		return;
	while ((n = getdents64(d, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);
			int fd = atoi(de->d_name), fl;

			off += de->d_reclen;
			if (fd <= 2 || fd == d)
				continue;
			fl = fcntl(fd, F_GETFD);
			if (fl >= 0 && !(fl & FD_CLOEXEC))
				close(fd);
		}
	}
}

/* lxcfs's hold and pidfd (acquire_procview()) closed: the creator's
 * once the supervisor has them, or a failed create's (its tree for init
 * is struct hutch_setup_in's, setup's). */
static void close_procview(struct sup *s)
{
	closep(&s->procview_hold);
	closep(&s->procview_pidfd);
}

/* struct hutch_setup_in's init_serving: a run's command queued for init
 * while it builds the root (issue 31: READY to the command's start was a
 * round trip through this process, which then opened the API's sockets,
 * its loop and the events before SPAWN; now init forks the command as it
 * sends READY, and this work runs meanwhile). */
struct early_run {
	struct sup *s;
	int result_fd;
};

static void run_early(void *ud, int init_sock, struct hutch_cgroup *cg, char **cmdenv)
{
	struct early_run *e = ud;

	if (!hutch_hooks_can_run_early(e->s, e->result_fd) ||
	    hutch_sup_loop_open(e->s, init_sock, cg) < 0)
		return;
	hutch_sup_env_take(e->s, cmdenv); /* the pointer setup hands over at its end */
	hutch_hooks_run_early(e->s, e->result_fd);
}

static __attribute__((noreturn)) void
supervisor_main(struct sup *s, const struct hutch_setup_in *in, int result_fd)
{
	struct early_run early = { .s = s, .result_fd = result_fd };
	struct hutch_setup_in setup_in = *in;
	double t0;
	struct hutch_err err = { 0 };
	int r;

	if (s->container)
		hutch_answer_send_pidfd(result_fd);
	hutch_answer_test_stop(result_fd);
	scrub_environment();
	close_inherited_fds();
	{
		char title[64];
		snprintf(title, sizeof(title), "hutch-supervisor %s", s->id);
		hutch_proctitle_set(title);
	}
	if (s->kind->keep_stdio && s->kind->keep_stdio(s) < 0)
		_exit(1);
	hutch_stdio_to_null();
	hutch_log_init(-1, HUTCH_LOG_ERROR, "hutch-supervisor");
	/* Start from default dispositions: not the CLI's handlers (hutch run
	 * sets them), nor what its caller ignored (a shell's "cmd &" ignores
	 * SIGINT and SIGQUIT), which init and so every command would inherit.
	 * Then ignore only SIGPIPE and SIGHUP; init resets those two per
	 * command. */
	hutch_signals_default();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	t0 = hutch_now_mono_sec();
	setup_in.init_serving = run_early;
	setup_in.init_serving_ud = &early;
	setup_in.creator_fd = result_fd;
	r = hutch_sup_setup(s, &setup_in, &err);
	if (r >= 0 && getenv("HUTCH_TEST_READY_STOP"))
		(void)raise(SIGSTOP);
	/* A run's command that is over already: its status relayed first, and
	 * no API socket for a sandbox that ends in this turn (hooks.h). */
	if (r >= 0 && !hutch_hooks_run_over(s))
		r = hutch_api_open(s, &err);
	if (r < 0) {
		hutch_event(s, "creation failed: %s", err.msg);
		hutch_sup_teardown(s, NULL);
		hutch_sup_teardown_finish(s);
		/* Our use of lxcfs ends before the answer: the creator stops
		 * it when no other sandbox uses it (release_procview()). */
		close_procview(s);
		(void)hutch_write_all(result_fd, &err, sizeof(err));
		_exit(1);
	}
	hutch_event(s,
	            "created: instance type %s, network %s, ttl %llu s, idle timeout %llu s, "
	            "cgroup %s; supervisor %d, init %d; built in %.1f ms",
	            s->cfg->type->name, s->cfg->network_spec,
	            (unsigned long long)s->cfg->ttl_seconds,
	            (unsigned long long)s->cfg->idle_timeout_seconds,
	            s->cg ? hutch_cgroup_version(s->cg) : "none", (int)getpid(), (int)s->init_pid,
	            (hutch_now_mono_sec() - t0) * 1000.0);
	if (s->net.plan.helper_pid > 0)
		hutch_event(s, "network all through pasta, pid %d (user-mode networking)",
		            (int)s->net.plan.helper_pid);
	hutch_hooks_report_to(s, result_fd);
	r = hutch_sup_run(s);
	if (s->kind->leave)
		s->kind->leave(s);
	_exit(r < 0 ? 1 : 0);
}

static int reserve_dir(const char *runtime_dir, struct sup *s, struct hutch_err *err)
{
	_cleanup_close_ int create_lock = -EBADF;
	char tmp[4200];
	int r;

	if ((r = hutch_runtime_dir_bound(runtime_dir, err)) < 0)
		return r;
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
	/* Not over anything of that name (an empty directory would be
	 * replaced): RENAME_NOREPLACE, one syscall, where the file system
	 * has it; else looked at first, as before. */
	r = renameat2(AT_FDCWD, tmp, AT_FDCWD, s->paths.dir, RENAME_NOREPLACE) < 0 ? -errno : 0;
	if (r == -EINVAL)
		r = access(s->paths.dir, F_OK) == 0 ? -EEXIST
		    : rename(tmp, s->paths.dir) < 0 ? -errno
		                                    : 0;
	if (r == -EEXIST)
		return hutch_err_set(err, -EEXIST, "sandbox '%s' exists already", s->id);
	if (r < 0)
		return hutch_err_set_errno(err, r, "rename '%s'", tmp);
	return 0;
}

/* A create that failed before its supervisor: the state dir removed, then
 * its lock let go. The other order let a gc in between take the lock of a
 * dir nobody holds and reap it, with a "supervisor-died" tombstone for an
 * id never handed out. HUTCH_TEST_CREATE_FAIL_STOP (test_crash.py): stop
 * once the lock is let go, for a gc to run there. */
static void unreserve(struct sup *s)
{
	(void)hutch_rm_rf_at(AT_FDCWD, s->paths.dir);
	closep(&s->lock_fd);
	if (getenv("HUTCH_TEST_CREATE_FAIL_STOP"))
		(void)raise(SIGSTOP);
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

/*
 * The sandbox's cgroup, or none with --no-limits. Root nests under its own
 * cgroup as always. Rootless gets limits only where cgroup v2 delegates
 * the controllers to the caller (a systemd user manager's delegated
 * unit); where it cannot, say so and how to fix it here, before the
 * supervisor exists, rather than as a permission error from mkdir.
 */
#define NO_LIMITS_FIX "or pass --no-limits (no CPU, memory, pids limits)"

static int place_cgroup(struct sup *s, struct hutch_setup_in *in, struct hutch_err *err)
{
	const char *dirs[HUTCH_CGROUP_MAX_DIRS];
	size_t n;
	int r;

	if (s->cfg->no_limits)
		return 0;
	if (s->idmap.rootless && !hutch_cgroup_host_is_v2())
		return hutch_err_set(
		        err, -EOPNOTSUPP,
		        "limits for ordinary users need cgroup v2 with delegation, this "
		        "host has v1 controllers: run as root, or boot with "
		        "systemd.unified_cgroup_hierarchy=1, " NO_LIMITS_FIX);
	/* Under systemd, a sandbox whose own cgroup is not delegated gets a
	 * delegated scope of its own: the supervisor makes it (setup.c) and
	 * places the cgroup then. */
	if (hutch_cgroup_needs_scope() &&
	    hutch_cgroup_systemd_address(s->scope_bus, sizeof(s->scope_bus)) == 0)
		return 0;
	s->scope_bus[0] = '\0';
	r = hutch_kind_cgroup_new(s, &in->cg, err);
	if (r < 0 && s->idmap.rootless) {
		char why[sizeof(err->msg)];

		memcpy(why, err->msg, sizeof(why));
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "%.100s: run hutch under 'systemd-run --user --scope -p "
		                     "Delegate=yes', " NO_LIMITS_FIX,
		                     why);
	}
	if (r < 0)
		return r;
	if (!s->idmap.rootless)
		return 0;
	n = hutch_cgroup_dirs(in->cg, dirs, ELEMENTSOF(dirs));
	for (size_t i = 0; i < n && i < ELEMENTSOF(dirs); i++) {
		char parent[4096];
		char *slash;

		snprintf(parent, sizeof(parent), "%s", dirs[i]);
		slash = strrchr(parent, '/');
		if (slash)
			*slash = '\0';
		if (access(parent, W_OK) < 0) {
			in->cg = hutch_cgroup_free(in->cg);
			return hutch_err_set(
			        err, -EOPNOTSUPP,
			        "cgroup '%.80s' is not delegated to you: run hutch under "
			        "'systemd-run --user --scope -p Delegate=yes', " NO_LIMITS_FIX,
			        parent);
		}
	}
	return 0;
}

/* Root or rootless, decided here while the environment is ours, and what
 * root mode has that rootless mode does not (yet). */
/*
 * A disk from the runtime dir's stock (runtime/disk.h), taken here by the
 * creator, whose cgroup a stock started here lives in (as lxcfs): asked
 * here, its answer read by the supervisor at its disk step (setup.c,
 * hutch_disk_stock_answer()), which asks the maker for the disk or, with
 * none taken, makes its own. The take's hold is this creator's until it exits (a run once
 * its command is over, a create once the id is out), so that the stock's
 * refill does not compete with the run for a CPU (issue 31); the
 * supervisor closes its copy (fork_supervisor()). One per process: a
 * second take lets the first go.
 */
static int disk_hold = -EBADF;

/* hutch_sandbox_not_inherited()'s: closed in the supervisor as it starts. */
static const int *not_inherited;
static size_t not_inherited_n;

void hutch_sandbox_not_inherited(const int *fds, size_t n)
{
	not_inherited = fds;
	not_inherited_n = fds ? n : 0;
}

static void take_disk(struct sup *s, const char *runtime_dir, struct hutch_disk_job *job)
{
	/* a fork: its disk or no sandbox, never an empty one; its supervisor
	 * takes it (setup.c), once it is made (the create runs before) */
	if (s->cfg->disk_from[0])
		return;
	/* (root's alone: rootless is any other uid. A stock is started only
	 * where hutch_disk_possible() says so, and a disk taken from one is
	 * not asked about again: runtime/disk.c) */
	if (s->kind->sizes_inside && !strcmp(s->cfg->workspace, "disk") && !s->idmap.rootless) {
		closep(&disk_hold);
		(void)hutch_disk_stock_take(runtime_dir, s->cfg->type->disk_bytes, job, &disk_hold);
	}
}

/*
 * The instance's sizes in /proc: lxcfs, shared by the runtime dir's
 * sandboxes, started here by the first (runtime/lxcfs.h), in the creator's
 * cgroup. Without lxcfs (not installed, HUTCH_LXCFS=none, an ordinary
 * user: its FUSE mount would need allow_other) /proc is the kernel's.
 * Containers keep their runtime's /proc, as with runc.
 */
static int acquire_procview(struct sup *s, const char *runtime_dir, struct hutch_setup_in *in,
                            struct hutch_err *err)
{
	int r;

	if (!s->kind->sizes_inside || s->idmap.rootless)
		return 0;
	r = hutch_lxcfs_acquire(runtime_dir, &in->procview_fd, &s->procview_hold,
	                        &s->procview_pidfd, err);
	if (r < 0 && r != -ENOENT && r != -EPERM)
		return r;
	in->views_unanswered = r == 1; /* the event says so (setup.c) */
	/* the rest of what is inside: its disk */
	take_disk(s, runtime_dir, &in->disk_job);
	return 0;
}

/* The supervisor holds lxcfs's tree and hold now, and the disk's maker:
 * the creator's copies go, closed where they are (release_procview() may
 * follow). */
static void handed_to_supervisor(struct sup *s, struct hutch_setup_in *in)
{
	closep(&in->procview_fd);
	close_procview(s);
	closep(&in->disk_job.sock);
}

/* A create that failed after acquire_procview(): lxcfs stops if no
 * other sandbox of the runtime dir uses it, as after the last rm (a
 * refused option must not leave a FUSE mount running). */
static void release_procview(struct sup *s, struct hutch_setup_in *in, const char *runtime_dir)
{
	struct hutch_err e = { 0 };

	closep(&in->procview_fd);
	close_procview(s);
	if (s->kind->sizes_inside && !s->idmap.rootless)
		(void)hutch_lxcfs_release(runtime_dir, &e);
}

static int mode_check(struct sup *s, const char *runtime_dir, struct hutch_err *err)
{
	int r = hutch_idmap_detect(&s->idmap, err);

	if (r < 0)
		return r;
	r = hutch_runtime_dir_check(runtime_dir, err);
	if (r < 0)
		return r;
	/* Mode all without root: user-mode networking (netpolicy/usernet.c). */
	if (s->idmap.rootless && hutch_net_policy_wired_mode(&s->cfg->net) == HUTCH_NET_ALL) {
		r = hutch_net_usernet_check(getenv("HUTCH_PASTA"), s->net.pasta,
		                            sizeof(s->net.pasta), err);
		if (r < 0) { /* the host cannot: exit 69, like a missing newuidmap */
			err->cls = HUTCH_ERRC_NOT_CAPABLE;
			return err->code = -EOPNOTSUPP;
		}
	}
	return 0;
}

/* The signal mask before the first answer came, restored when the last
 * hand-over open is acknowledged or dropped (hutch fork holds several). */
static sigset_t handover_old;
static unsigned handover_open;

static void handover_block(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void)sigprocmask(SIG_BLOCK, &set, handover_open++ ? NULL : &handover_old);
}

/* The hand-over is over: the signal mask restored when it was the last
 * one open; the socket closed unless keep (a run's). */
static void handover_done(struct hutch_created *c, bool keep)
{
	if (!keep) {
		closep(&c->handover_fd);
		closep(&c->sup_pidfd);
	}
	if (handover_open && !--handover_open)
		(void)sigprocmask(SIG_SETMASK, &handover_old, NULL);
}

static void handover_end(struct hutch_created *c)
{
	handover_done(c, false);
}

/* "ready" came: what the creator gets, the hand-over socket with it. From
 * the answer to the acknowledgement, a SIGINT or SIGTERM waits: the id is
 * given out whole or the sandbox deleted (a SIGKILL in between deletes
 * it, its id perhaps printed). */
static void handed(const struct sup *s, int fd, pid_t pid, int pidfd, struct hutch_created *ret)
{
	handover_block();
	memset(ret, 0, sizeof(*ret));
	ret->handover_fd = fd;
	ret->sup_pid = pid;
	ret->sup_pidfd = pidfd;
	memcpy(ret->id, s->id, sizeof(ret->id));
	ret->paths = s->paths;
	ret->created_at = s->created_at;
	ret->expires_at = s->expires_at;
}

int hutch_created_ack(struct hutch_created *c)
{
	ssize_t n;

	if (c->handover_fd < 0) {
		closep(&c->sup_pidfd);
		return 0;
	}
	n = send(c->handover_fd, "A", 1, MSG_NOSIGNAL);
	handover_end(c);
	return n == 1 ? 0 : -EPIPE;
}

int hutch_created_ack_run(struct hutch_created *c, int stream_fd)
{
	int r;

	if (c->handover_fd < 0)
		return 0;
	/* "E" carries the command's stream, "R" nothing */
	r = hutch_send_byte_fd(c->handover_fd, stream_fd >= 0 ? 'E' : 'R', stream_fd);
	handover_done(c, r >= 0);
	return r >= 0 ? 0 : -EPIPE;
}

void hutch_created_sent_run(struct hutch_created *c)
{
	if (c->handover_fd >= 0)
		handover_done(c, true);
}

int hutch_created_end_run(struct hutch_created *c, struct hutch_err *err)
{
	int r;

	if (c->handover_fd < 0) {
		closep(&c->sup_pidfd);
		return -EPIPE;
	}
	/* "D": delete now. Its answer is the supervisor's end of the socket
	 * closing, once every process of the sandbox is dead and it can no
	 * longer be found (as DELETE / answers). A sandbox that ended
	 * before (its TTL, a crash) closed it already: EOF at once. The
	 * supervisor begins the deletion when the run's stream ends, so it
	 * may close the socket with our "D" unread: ECONNRESET, as final.
	 * Bounded by its life: a process it forked may hold that end. */
	(void)send(c->handover_fd, "D", 1, MSG_NOSIGNAL);
	r = hutch_answer_wait_eof(c->handover_fd, c->sup_pidfd);
	closep(&c->handover_fd);
	closep(&c->sup_pidfd);
	/* died: done if it could no longer be found (its end was over) */
	if (r != -ESRCH || (access(c->paths.dir, F_OK) < 0 && errno == ENOENT))
		return r == -ESRCH ? 0 : r;
	(void)hutch_answer_died(c->id, c->paths.dir, c->sup_pid, "before the run ended", err);
	return -ESRCH;
}

void hutch_created_drop(struct hutch_created *c)
{
	if (c->handover_fd >= 0)
		handover_end(c);
	closep(&c->sup_pidfd);
}

/* The supervisor, in a session of its own, talking back on pipefd[1]; the
 * caller keeps pipefd[0]. Every caller of a sandbox's create exits soon
 * after it (the CLI's create and run, the pool keeper's child), never
 * waiting for the supervisor, which is then reparented to init or the
 * nearest subreaper: one fork, not a double fork's two, is enough (~3 ms
 * of CPU and 15 page faults of `hutch run` less). An OCI container's stays
 * double-forked, reparented to the shim at once, as docs/history.md
 * tells shims ("Which pid is waited for"). */
static pid_t fork_supervisor(struct sup *s, const struct hutch_setup_in *in, int log_fd,
                             int pipefd[2], struct hutch_err *err)
{
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipefd) < 0)
		return hutch_err_set_errno(err, -errno, "socketpair");
	pid = s->container ? hutch_fork_detached() : hutch_fork_session();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return hutch_err_set_fork(err, pid, "the sandbox's supervisor");
	}
	if (pid == 0) {
		close(pipefd[0]);
		if (log_fd >= 0)
			close(log_fd);
		closep(&disk_hold); /* the creator's (take_disk()) */
		for (size_t i = 0; i < not_inherited_n; i++)
			if (not_inherited[i] >= 0)
				close(not_inherited[i]);
		supervisor_main(s, in, pipefd[1]);
	}
	return pid;
}

static int create(struct hutch_config *cfg, struct hutch_container *ct, const char *runtime_dir,
                  int stream_fd, struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                  int progress_fd, struct hutch_err *err);

int hutch_sandbox_create(struct hutch_config *cfg, const char *runtime_dir,
                         struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                         int progress_fd, struct hutch_err *err)
{
	return create(cfg, NULL, runtime_dir, -EBADF, ret, ret_setup, progress_fd, err);
}

int hutch_sandbox_create_run(struct hutch_config *cfg, const char *runtime_dir, int stream_fd,
                             struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                             int progress_fd, struct hutch_err *err)
{
	return create(cfg, NULL, runtime_dir, stream_fd, ret, ret_setup, progress_fd, err);
}

int hutch_sandbox_create_container(struct hutch_config *cfg, struct hutch_container *ct,
                                   const char *runtime_dir, struct hutch_created *ret,
                                   struct hutch_setup_failure *ret_setup, int progress_fd,
                                   struct hutch_err *err)
{
	return create(cfg, ct, runtime_dir, -EBADF, ret, ret_setup, progress_fd, err);
}

/* The creator's struct sup before anything is made: every fd unset. */
static void sup_init(struct sup *s, struct hutch_config *cfg, struct hutch_container *ct)
{
	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->container = ct;
	s->kind = hutch_kind_choose(cfg, ct);
	s->cmdenv = hutch_default_env;
	s->loop.epfd = s->sigfd = s->ttl_fd = s->init_sock = s->pidfd = s->listen_fd = -EBADF;
	s->exec_sock.fd = -EBADF;
	s->lock_fd = s->slot_fd = s->mntns_fd = s->procview_hold = -EBADF;
	s->procview_pidfd = s->disk_watch = -EBADF;
	s->idle.fd = s->hooks.deadline_fd = s->hooks.result_fd = s->events.fd = -EBADF;
	s->hooks.log_fd = s->net.helper_timer_fd = -EBADF;
	s->disk_job.pid = -1;
	s->disk_job.sock = -EBADF;
	s->disk_maker_fd = -EBADF;
	for (size_t i = 0; i < HUTCH_DISK_FDS; i++)
		s->disk_fds[i] = -EBADF;
}

/* stream_fd >= 0: a run's command, sent ("E") before the answer. */
static int create(struct hutch_config *cfg, struct hutch_container *ct, const char *runtime_dir,
                  int stream_fd, struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                  int progress_fd, struct hutch_err *err)
{
	static struct sup s; /* the supervisor keeps it for its whole life */
	/* what is made for setup before the fork (setup.h) */
	struct hutch_setup_in in = HUTCH_SETUP_IN_INIT;
	_cleanup_close_ int log_fd = -EBADF, sup_pidfd = -EBADF;
	int pipefd[2]; /* a socketpair: "ready" one way, the acknowledgement back */
	pid_t pid;
	int r;
	bool sent;

	sup_init(&s, cfg, ct);
	r = hutch_config_validate(cfg, err);
	if (r < 0)
		return r;
	r = mode_check(&s, runtime_dir, err);
	if (r < 0)
		return r;
	(void)hutch_state_gc_auto(runtime_dir, err);
	/* A table or forwarding switch left by a crash would otherwise stay
	 * until the next hutch gc (links die with their namespaces). */
	if (hutch_net_policy_has_host_side(&cfg->net) && !s.idmap.rootless)
		(void)hutch_sandbox_net_gc(err);
	hutch_err_clear(err);
	r = reserve_dir(runtime_dir, &s, err);
	if (r < 0)
		return r;
	r = hutch_hooks_open_log(&s, &log_fd, err);
	if (r >= 0 && (r = place_cgroup(&s, &in, err)) >= 0)
		r = acquire_procview(&s, runtime_dir, &in, err);
	if (r < 0) {
		if (s.hooks.log_fd >= 0)
			close(s.hooks.log_fd);
		unreserve(&s);
		return r;
	}
	s.created_at = hutch_now_realtime();
	s.expires_at = s.created_at + (int64_t)cfg->ttl_seconds;
	pid = fork_supervisor(&s, &in, log_fd, pipefd, err);
	if (pid < 0) {
		/* what the supervisor would have held: the disk's maker, the
		 * stock's hold, setup.log */
		hutch_disk_abandon(&in.disk_job);
		closep(&disk_hold);
		if (s.hooks.log_fd >= 0)
			close(s.hooks.log_fd);
		in.cg = hutch_cgroup_free(in.cg);
		unreserve(&s);
		release_procview(&s, &in, runtime_dir);
		return pid;
	}
	close(pipefd[1]);
	close(s.lock_fd);
	sup_pidfd = hutch_answer_pidfd(s.container != NULL, pid, pipefd[0]);
	/* The command before the answer: the supervisor reads it once ready
	 * (supervisor/hooks.c), in the turn that makes it ready. Not sent: the
	 * acknowledgement carries it after all. */
	sent = stream_fd >= 0 && hutch_send_byte_fd(pipefd[0], 'E', stream_fd) >= 0;
	handed_to_supervisor(&s, &in);
	/* The supervisor has its copy of the secrets; ours go now. */
	hutch_net_bindings_forget(cfg->header_bindings);
	if (s.hooks.log_fd >= 0)
		close(s.hooks.log_fd);
	r = hutch_answer_read(s.id, s.paths.dir, pid, pipefd[0], sup_pidfd, log_fd, progress_fd,
	                      ret_setup, err);
	if (r < 0) {
		close(pipefd[0]);
		release_procview(&s, &in, runtime_dir);
		return r;
	}
	handed(&s, pipefd[0], pid, TAKE_FD(sup_pidfd), ret);
	ret->command_sent = sent;
	return 0;
}
