/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One lxcfs per runtime dir (lxcfs.h). The layout of $RT/.lxcfs/:
 *
 *   lock      flock'ed exclusively to start or stop lxcfs
 *   users     flock'ed shared by every live supervisor (gc: exclusive = unused)
 *   pid       hutch's record of lxcfs: its pid, written by the child before
 *             exec, and flock'ed exclusively by lxcfs for its whole life (the
 *             open file the starter locked, fd 3 across the exec): lxcfs
 *             lives while the lock is held, whatever else happened
 *   lxcfs.pid lxcfs's own pidfile (-p), never read: lxcfs unlinks it by its
 *             path when it exits, up to 5 s after SIGTERM (its loadavg thread
 *             sleeps in 5-s steps), so after a gc it removed the pidfile of
 *             the next lxcfs started in the same dir meanwhile, and the create
 *             after that started a third over a live mount (test_sizes)
 *   meminfo loadavg   what lxcfs reads as the host's (start())
 *   mnt/     lxcfs's FUSE mount, on a shared bind of mnt onto itself
 *   views/   a private bind of views onto itself; below it, at each view's
 *            path (proc/meminfo, ..., rootfs.h), a bind of that file of
 *            lxcfs's mount, for the views it serves: made once per lxcfs
 *            (the set cannot change while it runs), so that a create's
 *            binds reach lxcfs's files without a lookup through its mount,
 *            which lxcfs must answer (its entries are valid 0.5 s): a
 *            create asks lxcfs one thing, the supervisor's bounded probe
 *   views.made  written once views/ is complete, for the lxcfs of mnt
 *
 * lxcfs runs in a mount namespace of its own where /proc/meminfo and
 * /proc/loadavg are those two files: lxcfs copies the lines it does not
 * recompute from the reader's cgroup out of the host's files, and those
 * (DirectMap*, CommitLimit, VmallocUsed, ...) would show the host's memory.
 * /proc/stat stays the host's: lxcfs computes the sandbox's idle time from
 * the host's live cpu lines (a frozen copy showed 0 idle, a busy CPU), so
 * its other lines (intr, ctxt, processes, procs_running) pass through. Its FUSE mount reaches the
 * host's mount namespace because mnt is a shared mount whose peer in lxcfs's namespace receives it.
 * Started from the CLI's create (before the supervisor moves into a scope of its own), so it lives
 * in the creator's cgroup.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounded.h"
#include "cleanup.h"
#include "fdutil.h"
#include "lxcfs.h"
#include "rootfs.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

#define LXCFS_DIR   ".lxcfs"
#define VIEWS       "views"
#define VIEWS_MADE  "views.made"
#define DEAD_SUFFIX ".dead-"
/* A refused create's release: asked again for up to 2 s while the users
 * lock is held and the dir has no sandbox (a process forked while it was
 * held, not yet scheduled to close what it inherited). */
#define RELEASE_TRIES       100
#define RELEASE_WAIT_MS     20
#define FUSE_SUPER_MAGIC    0x65735546
#define LXCFS_START_SECONDS 10
#define LXCFS_ANSWER_MS     5000 /* as the supervisor's lookup (supervisor/setup.c) */

const char *hutch_lxcfs_binary(void)
{
	static const char *const paths[] = { "/usr/bin/lxcfs", "/usr/local/bin/lxcfs", NULL };
	const char *env = getenv("HUTCH_LXCFS");

	if (env && *env)
		return strcmp(env, "none") ? env : NULL;
	for (const char *const *p = paths; *p; p++)
		if (access(*p, X_OK) == 0)
			return *p;
	return NULL;
}

/* Each "Name:   value kB" line with value 0, except the names in keep. */
static char *render(const char *host, const char *const *keep)
{
	size_t cap = 2 * strlen(host) + 16, len = 0;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	for (const char *l = host; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l), name = strcspn(l, ": ");
		bool kept = false;

		for (const char *const *k = keep; !kept && k && *k; k++)
			kept = strlen(*k) == name && !strncmp(l, *k, name);
		if (kept || name >= n) {
			memcpy(out + len, l, n);
			len += n;
		} else {
			/* "intr 1 2 3" -> "intr 0"; "MemFree: 5 kB" -> "MemFree: 0 kB" */
			const char *unit = strstr(l, " kB");
			bool kb = unit && unit < l + n;

			len += (size_t)snprintf(out + len, cap - len, "%.*s%s 0%s", (int)name, l,
			                        l[name] == ':' ? ":" : "", kb ? " kB" : "");
		}
		out[len++] = '\n';
		l = nl ? nl + 1 : l + n;
	}
	out[len] = '\0';
	return out;
}

char *hutch_lxcfs_meminfo_render(const char *host)
{
	static const char *const keep[] = { "MemTotal", NULL };

	return render(host, keep);
}

static int write_source(int dirfd, const char *name, char *(*fn)(const char *))
{
	_cleanup_free_ char *host = NULL, *text = NULL;
	char path[32];
	size_t cap = 1 << 16;
	ssize_t n;
	_cleanup_close_ int fd = -EBADF;

	snprintf(path, sizeof(path), "/proc/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	host = malloc(cap);
	if (fd < 0 || !host)
		return fd < 0 ? -errno : -ENOMEM;
	n = read(fd, host, cap - 1);
	if (n < 0)
		return -errno;
	host[n] = '\0';
	text = fn(host);
	if (!text)
		return -ENOMEM;
	return hutch_write_file_at(dirfd, name, text, 0644);
}

static void stop(int dirfd, const char *dir, const char *mnt, int sig);

struct probe {
	const char *mnt;
	char file[4200];
};

/* In a child sharing our memory and errno (running(), base/bounded.h: raw
 * syscalls only): 1 if lxcfs's mount is there and answers. */
HUTCH_BOUNDED_FN static int probe_mount(void *arg)
{
	const struct probe *p = arg;
	struct statfs sfs;

	if (sys_raw(__NR_statfs, p->mnt, &sfs, 0, 0, 0) < 0 || sfs.f_type != FUSE_SUPER_MAGIC)
		return 0;
	/* a dead daemon answers ENOTCONN */
	return sys_raw(__NR_faccessat, AT_FDCWD, p->file, R_OK, 0, 0) == 0;
}

/* 1: lxcfs's mount answers; 0: not mounted yet (or its daemon dead);
 * <0: mounted, but no answer within LXCFS_ANSWER_MS (stopped, hung). Both
 * calls are requests to lxcfs once it is mounted: bounded, a create must
 * not wait for ever (base/bounded.h). */
static int running(const char *mnt)
{
	struct probe p = { .mnt = mnt };

	if (snprintf(p.file, sizeof(p.file), "%s/proc/meminfo", mnt) >= (int)sizeof(p.file))
		return 0;
	return hutch_bounded_call(probe_mount, &p, LXCFS_ANSWER_MS);
}

/* Unmount whatever is stacked on mnt (a dead lxcfs, our shared binds). */
static void unmount_all(const char *mnt)
{
	for (int i = 0; i < 8 && umount2(mnt, MNT_DETACH) == 0; i++)
		;
}

/* views/ gone: nothing of it mounted or left (mounts detached at once). */
static void views_unmake(int dirfd, const char *dir)
{
	char views[4200];

	(void)unlinkat(dirfd, VIEWS_MADE, 0);
	if (snprintf(views, sizeof(views), "%s/" VIEWS, dir) < (int)sizeof(views))
		for (int i = 0; i < 8 && umount2(views, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++)
			;
	(void)hutch_rm_rf_at(dirfd, VIEWS);
}

/* views/ is complete and its binds are of the lxcfs mounted on mnt now
 * (devices from what the kernel has cached: no request to lxcfs). */
static bool views_made(int dirfd)
{
	struct statx m, v;

	return faccessat(dirfd, VIEWS_MADE, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
	       statx(dirfd, "mnt", AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &m) == 0 &&
	       statx(dirfd, VIEWS "/proc/meminfo", AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
	             STATX_TYPE, &v) == 0 &&
	       m.stx_dev_major == v.stx_dev_major && m.stx_dev_minor == v.stx_dev_minor;
}

/* bind_views()' answer is its exit status: a bit a view. */
_Static_assert(HUTCH_ROOTFS_VIEWS <= 8, "one bit a view in an exit status");

struct views_job {
	int mnt, views; /* O_PATH: lxcfs's root, views/ */
	const char *paths[HUTCH_ROOTFS_VIEWS];
};

/* In a child sharing our memory and errno (base/bounded.h: raw syscalls
 * only): each view lxcfs serves cloned from its mount (the lookups lxcfs
 * answers) onto its file in views/. Bit i set: view i bound. */
HUTCH_BOUNDED_FN static int bind_views(void *arg)
{
	const struct views_job *j = arg;
	int bound = 0;

	for (int i = 0; i < HUTCH_ROOTFS_VIEWS; i++) {
		long fd = sys_raw(__NR_open_tree, j->mnt, j->paths[i],
		                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW, 0, 0);

		if (fd < 0)
			continue; /* not served by this lxcfs */
		if (sys_raw(__NR_move_mount, fd, "", j->views, j->paths[i],
		            MOVE_MOUNT_F_EMPTY_PATH) == 0)
			bound |= 1 << i;
		(void)sys_raw(__NR_close, fd, 0, 0, 0, 0);
	}
	return bound;
}

/* Each view's file in views/ (a private mount: nothing propagates from
 * or to it), bound there in a bounded child; the files of views lxcfs
 * does not serve removed. 0, or -errno with err set (views/ gone). */
static int views_make_files(int dirfd, const char *views, struct views_job *j,
                            struct hutch_err *err)
{
	char sub[64];
	int r;

	if ((r = hutch_mkdir_p_at(dirfd, VIEWS, 0755)) < 0)
		return hutch_err_set_errno(err, r, "lxcfs: mkdir '%s'", views);
	if (mount(views, views, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, views, NULL, MS_PRIVATE, NULL) < 0)
		return hutch_err_set_errno(err, -errno, "lxcfs: make '%s' a private mount", views);
	j->views = openat(dirfd, VIEWS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->views < 0)
		return hutch_err_set_errno(err, -errno, "lxcfs: open '%s'", views);
	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++) {
		const char *slash;

		j->paths[i] = hutch_rootfs_view_path(i);
		slash = strrchr(j->paths[i], '/');
		snprintf(sub, sizeof(sub), "%.*s", (int)(slash - j->paths[i]), j->paths[i]);
		if ((r = hutch_mkdir_p_at(j->views, sub, 0755)) < 0 ||
		    (r = hutch_write_file_at(j->views, j->paths[i], "", 0444)) < 0)
			return hutch_err_set_errno(err, r, "lxcfs: make '%s/%s'", views,
			                           j->paths[i]);
	}
	return 0;
}

/*
 * views/ for the lxcfs mounted on mnt now, once (views_made(): made
 * already). Bounded by LXCFS_ANSWER_MS: a lxcfs that does not answer
 * the lookups leaves no views/ (-ETIMEDOUT). 0, or -errno with err set.
 */
static int views_make(int dirfd, const char *dir, struct hutch_err *err)
{
	struct views_job j = { .mnt = -EBADF, .views = -EBADF };
	char views[4200];
	int bound = 0, r;

	if (views_made(dirfd))
		return 0;
	if (snprintf(views, sizeof(views), "%s/" VIEWS, dir) >= (int)sizeof(views))
		return hutch_err_set(err, -ENAMETOOLONG, "lxcfs: '%s' is too long", dir);
	views_unmake(dirfd, dir);
	r = views_make_files(dirfd, views, &j, err);
	/* The mount's root: reaching it asks lxcfs nothing. */
	if (r >= 0 && (j.mnt = openat(dirfd, "mnt", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = hutch_err_set_errno(err, -errno, "lxcfs: open '%s/mnt'", dir);
	/* -ETIMEDOUT: acquire()'s 1, said by the supervisor (no message here) */
	if (r >= 0 && (bound = hutch_bounded_call(bind_views, &j, LXCFS_ANSWER_MS)) < 0)
		r = hutch_err_set(err, bound, "lxcfs: bind its views in '%s': %s", views,
		                  strerror(-bound));
	/* Ours alone: no peers of lxcfs's mount (a clone of a shared mount is one). */
	if (r >= 0 && mount(NULL, views, NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		r = hutch_err_set_errno(err, -errno, "lxcfs: make '%s' private", views);
	for (size_t i = 0; r >= 0 && i < HUTCH_ROOTFS_VIEWS; i++)
		if (!(bound & (1 << i)))
			(void)unlinkat(j.views, j.paths[i], 0);
	if (r >= 0 && !(bound & 1)) /* proc/meminfo: views_made() looks at it */
		r = hutch_err_set(err, -EIO, "lxcfs: its mount '%s/mnt' serves no proc/meminfo",
		                  dir);
	if (r >= 0 && (r = hutch_write_file_at(dirfd, VIEWS_MADE, "", 0644)) < 0)
		r = hutch_err_set_errno(err, r, "lxcfs: write '%s/" VIEWS_MADE "'", dir);
	if (j.mnt >= 0)
		close(j.mnt);
	if (j.views >= 0)
		close(j.views);
	if (r < 0)
		views_unmake(dirfd, dir);
	return r;
}

/* rec: the new "pid" record, locked: lxcfs keeps it as fd 3. */
static __attribute__((noreturn)) void lxcfs_child(const char *dir, const char *bin, int rec)
{
	static const char *const srcs[] = { "meminfo", "loadavg", NULL };
	char pidfile[4200], mnt[4200], src[4200], dst[64];
	sigset_t none;

	if (ftruncate(rec, 0) < 0 || dprintf(rec, "%d\n", (int)getpid()) < 0 ||
	    snprintf(pidfile, sizeof(pidfile), "%s/lxcfs.pid", dir) >= (int)sizeof(pidfile) ||
	    snprintf(mnt, sizeof(mnt), "%s/mnt", dir) >= (int)sizeof(mnt))
		_exit(127);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/proc", NULL, MS_PRIVATE, NULL) < 0)
		_exit(127);
	for (const char *const *s = srcs; *s; s++) {
		if (snprintf(src, sizeof(src), "%s/%s", dir, *s) >= (int)sizeof(src))
			_exit(127);
		snprintf(dst, sizeof(dst), "/proc/%s", *s);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			_exit(127);
	}
	hutch_stdio_to_null();
	/* The record, inherited on purpose: lxcfs holds its lock for life. */
	if ((rec == 3 ? fcntl(3, F_SETFD, 0) : dup3(rec, 3, 0)) < 0) /* lint-fds: ok */
		_exit(127);
	(void)sys_close_range(4, ~0U, 0);
	hutch_signals_default();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execl(bin, "lxcfs", "--enable-cfs", "--enable-loadavg", "-p", pidfile, mnt, (char *)NULL);
	_exit(127);
}

static int start(int dirfd, const char *dir, const char *bin, struct hutch_err *err)
{
	_cleanup_close_ int mounts = -EBADF, rec = -EBADF;
	char mnt[4200];
	double deadline;
	pid_t pid;
	int status, r;

	if (snprintf(mnt, sizeof(mnt), "%s/mnt", dir) >= (int)sizeof(mnt))
		return hutch_err_set(err, -ENAMETOOLONG, "lxcfs: '%s' is too long", dir);
	/* Gone since (a supervisor's restart, procview.c): said at once, not
	 * after LXCFS_START_SECONDS of waiting for a mount. */
	if (access(bin, X_OK) < 0)
		return hutch_err_set_errno(err, -errno, "lxcfs: '%s'", bin);
	unmount_all(mnt);
	/* A new record (a lxcfs still exiting keeps the old one locked), and
	 * no pidfile of a former lxcfs: one still exiting holds a lock on it
	 * that would make the new one give up. */
	(void)unlinkat(dirfd, "pid", 0);
	(void)unlinkat(dirfd, "lxcfs.pid", 0);
	rec = hutch_lock_at(dirfd, "pid", LOCK_EX | LOCK_NB);
	if (rec < 0)
		return hutch_err_set_errno(err, rec, "lxcfs: lock '%s/pid'", dir);
	if (mkdirat(dirfd, "mnt", 0755) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "lxcfs: mkdir '%s'", mnt);
	if ((r = write_source(dirfd, "meminfo", hutch_lxcfs_meminfo_render)) < 0 ||
	    (r = hutch_write_file_at(dirfd, "loadavg", "0.00 0.00 0.00 0/0 0\n", 0644)) < 0)
		return hutch_err_set_errno(err, r, "lxcfs: write the /proc sources in '%s'", dir);
	if (mount(mnt, mnt, NULL, MS_BIND, NULL) < 0 || mount(NULL, mnt, NULL, MS_SHARED, NULL) < 0)
		return hutch_err_set_errno(err, -errno, "lxcfs: make '%s' a shared mount", mnt);
	mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (mounts < 0) {
		r = hutch_err_set_errno(err, -errno, "lxcfs: open mountinfo");
		unmount_all(mnt);
		return r;
	}
	/* lxcfs stays in the foreground: a child of a child, in a session of
	 * its own, so that no caller has to reap it. */
	pid = hutch_fork_detached();
	if (pid < 0) {
		unmount_all(mnt);
		return hutch_err_set_fork(err, pid, "lxcfs");
	}
	if (pid == 0)
		lxcfs_child(dir, bin, rec);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* Its mount reaches our namespace when it is up: mountinfo polls
	 * POLLPRI on every change of our mount table. */
	deadline = hutch_now_mono_sec() + LXCFS_START_SECONDS;
	while ((r = running(mnt)) != 1) {
		struct pollfd pfd = { .fd = mounts, .events = POLLPRI };
		double left = deadline - hutch_now_mono_sec();

		if (r < 0) { /* ours, started just now: killed, its mount gone */
			stop(dirfd, dir, mnt, SIGKILL);
			return hutch_err_set(
			        err, -ETIMEDOUT,
			        "lxcfs mounted its views but did not answer within %d s (stopped "
			        "or hung?) and was killed: check that lxcfs runs, or set "
			        "HUTCH_LXCFS=none to create sandboxes without the /proc views "
			        "(lxcfs '%s', its mount '%s')",
			        LXCFS_ANSWER_MS / 1000, bin, mnt);
		}
		if (left <= 0) {
			unmount_all(mnt);
			return hutch_err_set(err, -ETIMEDOUT,
			                     "lxcfs: '%s' did not mount '%s' within %d s", bin, mnt,
			                     LXCFS_START_SECONDS);
		}
		(void)poll(&pfd, 1, (int)(left * 1000) + 1);
	}
	return 0;
}

/* The pid of the dir's lxcfs, else 0; held: only a live one's (its record
 * is locked; else pidfd_of() looks). *ret_rec: the record, open. No
 * request to the FUSE mount: a create must not wait for lxcfs to be
 * scheduled. */
static pid_t lxcfs_pid(int dirfd, int *ret_rec, bool held)
{
	_cleanup_close_ int fd = openat(dirfd, "pid", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[32] = "";
	long pid;
	ssize_t n;

	/* Our shared lock, if we get it, goes with the close. */
	if (fd < 0 || (held && (flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)) ||
	    (n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return 0;
	buf[n] = '\0';
	pid = strtol(buf, NULL, 10);
	if (pid <= 1 || pid > INT32_MAX)
		return 0;
	if (ret_rec)
		*ret_rec = TAKE_FD(fd);
	return (pid_t)pid;
}

/* Something else than our own bind of mnt onto itself is mounted there
 * (lxcfs's FUSE mount: another device), from what the kernel has cached
 * (AT_STATX_DONT_SYNC: no request to lxcfs). */
static bool mounted(int dirfd)
{
	struct statx d, m;

	if (statx(dirfd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &d) < 0 ||
	    statx(dirfd, "mnt", AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &m) < 0)
		return false;
	return d.stx_dev_major != m.stx_dev_major || d.stx_dev_minor != m.stx_dev_minor;
}

/*
 * dir, open and locked exclusively, as it is at its path now: a gc that held
 * the lock meanwhile may have removed it, and the lock we then got is of a
 * removed dir where nothing can be made (a create took that ENOENT for "no
 * lxcfs installed" and went without the views: test_sizes' racing creates).
 * make: create it (again). 1 locked, 0 gone (make false), <0 error.
 */
static int lock_dir(const char *dir, bool make, int *ret_dirfd, int *ret_lock,
                    struct hutch_err *err)
{
	for (int i = 0; i < 8; i++) {
		_cleanup_close_ int dirfd = -EBADF, lock = -EBADF;
		struct stat a, b;

		/* opened first: made once a runtime dir, not tried at every create */
		dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dirfd < 0 && errno == ENOENT && make) {
			if (mkdir(dir, 0700) < 0 && errno != EEXIST)
				return hutch_err_set_errno(err, -errno, "lxcfs: mkdir '%s'", dir);
			dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (dirfd < 0 && errno != ENOENT)
			return hutch_err_set_errno(err, -errno, "lxcfs: open '%s'", dir);
		lock = dirfd < 0 ? -ENOENT : hutch_lock_at(dirfd, "lock", LOCK_EX);
		if (lock < 0 && lock != -ENOENT)
			return hutch_err_set_errno(err, lock, "lxcfs: lock '%s/lock'", dir);
		if (lock >= 0 && fstat(dirfd, &a) == 0 && stat(dir, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			*ret_dirfd = TAKE_FD(dirfd);
			*ret_lock = TAKE_FD(lock);
			return 1;
		}
		if (!make)
			return 0;
	}
	return hutch_err_set(err, -EAGAIN, "lxcfs: '%s' kept being removed", dir);
}

/* A pidfd of the lxcfs of pid that holds the record rec, or -errno: the
 * record still locked once the pidfd is open means the pid is still its
 * (a live process's pid is never reused). */
static int pidfd_of(pid_t pid, int rec)
{
	_cleanup_close_ int pidfd = -EBADF;

	if (pid <= 0)
		return -ESRCH;
	pidfd = sys_pidfd_open(pid, 0);
	if (pidfd < 0)
		return -errno;
	if (flock(rec, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
		return -ESRCH; /* our shared lock, if we got it, goes with rec's close */
	return TAKE_FD(pidfd);
}

/*
 * Under the dir's lock: the dir's lxcfs alive and mounted, or replaced (a
 * lxcfs whose mount is gone is ended, one that died is found by its
 * record's lock, free); *ret_pidfd: a pidfd of the one that runs, or
 * -errno (no watch then).
 */
static int ensure(int dirfd, const char *dir, const char *mnt, const char *bin, int *ret_pidfd,
                  struct hutch_err *err)
{
	_cleanup_close_ int rec = -EBADF;
	/* The record's lock looked at once, by pidfd_of() (after the pidfd's
	 * open: the proof that the pid is still lxcfs's), not also before
	 * (issue 31: one flock fewer a create); a record not held is
	 * -ESRCH there, as a pid that is gone. */
	pid_t pid = lxcfs_pid(dirfd, &rec, false);
	int r, pidfd = pid && mounted(dirfd) ? pidfd_of(pid, rec) : -ESRCH;

	if (pidfd == -ESRCH) {
		closep(&rec);
		stop(dirfd, dir, mnt, SIGTERM);
		/* -ENOENT is "not installed" to our caller, not a failed start */
		if ((r = start(dirfd, dir, bin, err)) < 0)
			return r == -ENOENT ? -EIO : r;
		pid = lxcfs_pid(dirfd, &rec, true);
		pidfd = pidfd_of(pid, rec);
	}
	*ret_pidfd = pidfd;
	return 0;
}

static int dir_paths(const char *runtime_dir, char dir[4096], char mnt[4200], struct hutch_err *err)
{
	if (snprintf(dir, 4096, "%s/" LXCFS_DIR, runtime_dir) >= 4096 ||
	    snprintf(mnt, 4200, "%s/mnt", dir) >= 4200)
		return hutch_err_set(err, -ENAMETOOLONG, "lxcfs: '%s' is too long", runtime_dir);
	return 0;
}

int hutch_lxcfs_acquire(const char *runtime_dir, int *ret_tree, int *ret_hold, int *ret_pidfd,
                        struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lock = -EBADF, hold = -EBADF, tree = -EBADF;
	const char *bin = hutch_lxcfs_binary();
	char dir[4096], mnt[4200];
	int r, pidfd = -EBADF;

	if (!bin)
		return -ENOENT;
	if (geteuid() != 0)
		return -EPERM;
	if ((r = dir_paths(runtime_dir, dir, mnt, err)) < 0)
		return r;
	if ((r = lock_dir(dir, true, &dirfd, &lock, err)) < 0)
		return r;
	if ((r = ensure(dirfd, dir, mnt, bin, &pidfd, err)) < 0)
		return r;
	hold = hutch_lock_at(dirfd, "users", LOCK_SH);
	r = hold < 0 ? hutch_err_set_errno(err, hold, "lxcfs: lock '%s/users'", dir)
	             : views_make(dirfd, dir, err);
	if (r == -ETIMEDOUT) { /* no views: the supervisor says why */
		hutch_err_clear(err);
		r = 1;
	}
	/* The views' tree: reaching its files asks lxcfs nothing. */
	if (r == 0 &&
	    (tree = sys_open_tree(dirfd, VIEWS,
	                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)) < 0)
		r = hutch_err_set_errno(err, -errno, "lxcfs: clone '%s/" VIEWS "'", dir);
	if (r < 0) {
		closep(&pidfd);
		return r;
	}
	*ret_tree = TAKE_FD(tree);
	*ret_hold = TAKE_FD(hold);
	*ret_pidfd = pidfd;
	return r;
}

int hutch_lxcfs_revive(const char *runtime_dir, int *ret_root, int *ret_pidfd,
                       struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lock = -EBADF, root = -EBADF;
	const char *bin = hutch_lxcfs_binary();
	char dir[4096], mnt[4200];
	int r, pidfd = -EBADF;

	if (!bin)
		return hutch_err_set(err, -ENOENT, "lxcfs: no binary (HUTCH_LXCFS)");
	if ((r = dir_paths(runtime_dir, dir, mnt, err)) < 0)
		return r;
	/* Our users hold keeps gc from removing the dir: gone is an error */
	if ((r = lock_dir(dir, false, &dirfd, &lock, err)) <= 0)
		return r < 0 ? r : hutch_err_set(err, -ENOENT, "lxcfs: '%s' is gone", dir);
	if ((r = ensure(dirfd, dir, mnt, bin, &pidfd, err)) < 0)
		return r;
	/* Its root in our namespace: the views are cloned from there. */
	root = open(mnt, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0) {
		closep(&pidfd);
		return hutch_err_set_errno(err, -errno, "lxcfs: open '%s'", mnt);
	}
	*ret_root = TAKE_FD(root);
	*ret_pidfd = pidfd;
	return 0;
}

/* The process of pid holds the record rec as its fd 3 (it is that lxcfs). */
static bool holds(pid_t pid, int rec)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/fd/3", (int)pid);
	return stat(path, &a) == 0 && fstat(rec, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* sig to the dir's lxcfs (SIGTERM: it unmounts and exits, seconds later:
 * no wait, the next start makes a new record; SIGKILL: one that did not
 * answer) through a pidfd opened before checking that the pid is still
 * its, and our mounts gone (its views' first: they are its). */
static void stop(int dirfd, const char *dir, const char *mnt, int sig)
{
	_cleanup_close_ int rec = -EBADF, pidfd = -EBADF;
	pid_t pid = lxcfs_pid(dirfd, &rec, true);

	if (pid > 0 && (pidfd = sys_pidfd_open(pid, 0)) >= 0 && holds(pid, rec))
		(void)sys_pidfd_send_signal(pidfd, sig, NULL, 0);
	views_unmake(dirfd, dir);
	unmount_all(mnt);
}

/* 2: in use (its users lock held), else as hutch_lxcfs_gc(). */
static int gc_once(const char *runtime_dir, struct hutch_err *err);

int hutch_lxcfs_gc(const char *runtime_dir, struct hutch_err *err)
{
	int r = gc_once(runtime_dir, err);

	return r == 2 ? 0 : r;
}

int hutch_lxcfs_release(const char *runtime_dir, struct hutch_err *err)
{
	int r = gc_once(runtime_dir, err);

	for (int i = 0; r == 2 && i < RELEASE_TRIES; i++) {
		char(*ids)[HUTCH_ID_LEN + 1] = NULL;
		size_t n = 1;

		/* in use by a sandbox: its to stop */
		if (hutch_state_list(runtime_dir, &ids, &n) < 0 || n > 0) {
			free(ids);
			return 0;
		}
		free(ids);
		(void)poll(NULL, 0, RELEASE_WAIT_MS);
		r = gc_once(runtime_dir, err);
	}
	return r == 2 ? 0 : r;
}

static int gc_once(const char *runtime_dir, struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lock = -EBADF, users = -EBADF;
	char dir[4096], mnt[4200], dead[4300];
	int r;

	if (snprintf(dir, sizeof(dir), "%s/" LXCFS_DIR, runtime_dir) >= (int)sizeof(dir) ||
	    snprintf(mnt, sizeof(mnt), "%s/mnt", dir) >= (int)sizeof(mnt))
		return 0;
	/* Gone meanwhile: another gc's, or a new one at that path (in use) */
	if ((r = lock_dir(dir, false, &dirfd, &lock, err)) <= 0)
		return r;
	users = hutch_lock_at(dirfd, "users", LOCK_EX | LOCK_NB);
	if (users == -EWOULDBLOCK)
		return 2;
	if (users < 0)
		return hutch_err_set_errno(err, users, "lxcfs: lock '%s/users'", dir);
	stop(dirfd, dir, mnt, SIGTERM);
	/* Renamed away under the lock, then removed: a create that opened the
	 * dir before and waits for its lock would make a new "lock" file in
	 * it while it is being removed, pass lock_dir()'s check (the dir
	 * still at its path) and start lxcfs in a dir going away ("make
	 * '.../mnt' a shared mount: No such file or directory", seen in
	 * test_creates_racing_with_gc_share_one_lxcfs). Now its check fails
	 * and it makes a new dir. Its "lock" file, made in the old dir after
	 * the removal listed it, fails the removal: listed again (thrice). */
	snprintf(dead, sizeof(dead), "%s" DEAD_SUFFIX "%d", dir, (int)getpid());
	if (rename(dir, dead) < 0)
		return hutch_err_set_errno(err, -errno, "lxcfs: rename '%s'", dir);
	for (int i = 0; (r = hutch_rm_rf_at(AT_FDCWD, dead)) < 0 && i < 3; i++)
		(void)poll(NULL, 0, 10);
	if (r < 0)
		return hutch_err_set_errno(err, r, "lxcfs: remove '%s'", dead);
	return 1;
}
