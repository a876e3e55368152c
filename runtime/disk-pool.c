/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A runtime dir's pool of disks' files (disk.h "The pool"; docs/snapshots.md
 * "Fork"): where the host's file system for the disks' files shares no
 * extents (ext4, most hosts), the templates and every sandbox's disk file
 * go into an XFS of hutch's own with reflinks, so that a disk is a clone
 * of its template and a fork a clone of its source's disk (FICLONE: the
 * extent map, not the data), whatever the host's file system. It is
 *
 *   - a nameless file (O_TMPFILE, where the disks' files went before: the
 *     runtime dir, or /var/tmp when that is in memory) as large as the
 *     file system holding it (sparse: the host fills before the pool
 *     can), `mkfs.xfs -m reflink=1` of it (~65 MB of log and headers);
 *   - behind a loop device (autoclear, direct I/O: no second page cache)
 *     mounted (discard: a freed extent punches a hole in the file, so what
 *     a sandbox's disk used goes back to the host when it ends) on
 *     runtime_dir/.disk/pool, 0700;
 *   - made by the dir's stock (disk-stock.c) when it finds none (under a
 *     lock, in the stock's own .disk: a holder never makes that directory
 *     again after `hutch gc` removed it), and held by a process of its own
 *     until `hutch gc` once no sandbox is left, or until the dir has had
 *     no sandbox and no asker for POOL_IDLE_SECONDS (a gc that never came:
 *     nothing outlives its use), or its socket is gone: its loop device
 *     detaches itself and the file is freed once the last disk file in it
 *     is closed.
 *
 * On XFS or btrfs hosts the files go where they went (they clone there
 * already); without mkfs.xfs or the kernel's XFS, or with HUTCH_DISK_POOL=none
 * (the switch), too (a fork then takes the snapshot or copy route);
 * `hutch doctor` says which.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "disk-internal.h"
#include "fdutil.h"
#include "proto.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

#define XFS_SUPER_MAGIC   0x58465342
#define TMPFS_MAGIC       0x01021994
#define RAMFS_MAGIC       0x858458f6
#define LOOP_TRIES        16
#define BTRFS_SUPER_MAGIC 0x9123683e
#define POOL_MIN          (4ULL << 30)
#define POOL_MAX          (8ULL << 40) /* ext4's largest file is 16 TiB */
#define POOL_SOCK         "pool.sock"
#define POOL_LOCK         "pool.lock"
#define POOL_TICK_MS      5000
#define POOL_START_MS     30000
#define POOL_IDLE_SECONDS 60 /* past the stock's 30: its makers' disks go first */
#define POOL_FD_DIR       1000

static bool in_memory(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) < 0 || (unsigned long)sf.f_type == TMPFS_MAGIC ||
	       (unsigned long)sf.f_type == RAMFS_MAGIC;
}

const char *hutch_disk_files_where(const char *runtime_dir)
{
	const char *where = in_memory(runtime_dir) ? "/var/tmp" : runtime_dir;

	return in_memory(where) ? NULL : where;
}

int hutch_disk_loop_attach(int file, int *nr, struct hutch_err *err)
{
	struct loop_config lc = { .fd = (uint32_t)file, .block_size = 4096 };
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	int r = -EBUSY;

	lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
	if (ctl < 0)
		return hutch_err_set_errno(err, -errno, "disk: open /dev/loop-control");
	/* Another create may take the same free device: EBUSY, ask again. */
	for (int i = 0; i < LOOP_TRIES && r == -EBUSY; i++) {
		char path[32];
		int fd, n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			return hutch_err_set_errno(err, -errno, "disk: a free loop device");
		snprintf(path, sizeof(path), "/dev/loop%d", n);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return hutch_err_set_errno(err, -errno, "disk: open '%s'", path);
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			*nr = n;
			return fd;
		}
		r = -errno;
		close(fd);
	}
	return hutch_err_set_errno(err, r, "disk: configure a loop device");
}

const char *hutch_disk_tool(const char *const paths[])
{
	for (const char *const *p = paths; *p; p++)
		if (access(*p, X_OK) == 0)
			return *p;
	return NULL;
}

static const char *mkfs_xfs_path(void)
{
	return hutch_disk_tool(
	        (const char *const[]){ "/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs", NULL });
}

static bool fs_is(const char *path, unsigned long magic)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && (unsigned long)sf.f_type == magic;
}

static bool shares_extents(const char *dir)
{
	return fs_is(dir, XFS_SUPER_MAGIC) || fs_is(dir, BTRFS_SUPER_MAGIC);
}

/* mkfs.xfs of file (an fd), in a child. */
static int mkfs_xfs(int file, struct hutch_err *err)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "disk pool: fork mkfs.xfs");
	if (pid == 0) {
		/* 4 KiB sectors: the loop device's (XFS refuses a smaller one) */
		char *const argv[] = { "mkfs.xfs", "-q",        "-K", "-m",       "reflink=1",
			               "-s",       "size=4096", "-l", "size=64m", "/proc/self/fd/3",
			               NULL };
		char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

		/* fd 3, inherited on purpose (dup2 onto itself keeps CLOEXEC) */
		if ((file == 3 ? fcntl(3, F_SETFD, 0) : dup3(file, 3, 0)) < 0) /* lint-fds: ok */
			_exit(126);
		hutch_stdio_to_null();
		execve(mkfs_xfs_path(), argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hutch_err_set(err, -EIO, "disk pool: mkfs.xfs failed (status %d)", status);
	return 0;
}

/* The pool made: the detached mount of its XFS (its root fd). */
static int make_pool(const char *runtime_dir, struct hutch_err *err)
{
	_cleanup_close_ int file = -EBADF, loop = -EBADF, fs = -EBADF, mnt = -EBADF;
	const char *where = hutch_disk_files_where(runtime_dir);
	uint64_t size;
	struct statfs sf;
	char dev[32];
	int nr = -1, r;

	if (statfs(where, &sf) < 0)
		return hutch_err_set_errno(err, -errno, "disk pool: statfs '%s'", where);
	size = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
	size = size < POOL_MIN ? POOL_MIN : size > POOL_MAX ? POOL_MAX : size;
	file = open(where, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (file < 0 || ftruncate(file, (off_t)size) < 0)
		return hutch_err_set_errno(err, -errno, "disk pool: a file in '%s'", where);
	if ((r = mkfs_xfs(file, err)) < 0 ||
	    (r = loop = hutch_disk_loop_attach(file, &nr, err)) < 0)
		return r;
	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	fs = sys_fsopen("xfs", FSOPEN_CLOEXEC);
	if (fs < 0 || sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
	                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "disk pool: mount XFS of '%s'", dev);
	r = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r < 0 || fchmod(r, 0700) < 0) {
		r >= 0 ? close(r) : 0;
		return hutch_err_set_errno(err, -errno, "disk pool: its root");
	}
	return r;
}

static int sock_at(int dirfd, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/" POOL_SOCK, dirfd);
	return 0;
}

/* Unused: no sandbox in the dir and no asker for POOL_IDLE_SECONDS. */
static bool idle(const char *runtime_dir, double last_ask)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n = 1;

	if (hutch_now_mono_sec() - last_ask < POOL_IDLE_SECONDS ||
	    hutch_state_list(runtime_dir, &ids, &n) < 0)
		return false;
	free(ids);
	return n == 0;
}

/* The holder's life: the pool's root to each root asker, until KILL (`hutch
 * gc`), its socket is gone or it is idle; ready (or why not) said on sock
 * first. */
static __attribute__((noreturn)) void holder(const char *runtime_dir, int dirfd, int sock)
{
	_cleanup_close_ int root = -EBADF, lst = -EBADF;
	struct hutch_err e = { 0 };
	struct sockaddr_un sa;
	struct stat sb;
	double last_ask;
	sigset_t none;

	hutch_stdio_to_null();
	hutch_signals_default();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	(void)prctl(PR_SET_NAME, "hutch-disk-pool");
	(void)unlinkat(dirfd, POOL_SOCK, 0); /* a holder that died */
	if ((root = make_pool(runtime_dir, &e)) < 0 ||
	    (lst = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0 ||
	    sock_at(dirfd, &sa) < 0 || bind(lst, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lst, 16) < 0 || fstatat(dirfd, POOL_SOCK, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (!e.code)
			hutch_err_set_errno(&e, -errno, "disk pool: its socket");
		(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, &e, sizeof(e), NULL, 0);
		_exit(0);
	}
	(void)hutch_proto_send(sock, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0);
	close(sock);
	last_ask = hutch_now_mono_sec();
	for (;;) {
		struct pollfd pfd = { .fd = lst, .events = POLLIN };
		_cleanup_close_ int c = -EBADF;
		struct hutch_msg_hdr hdr = { 0 };
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct stat now;
		size_t nfds = 0;

		if (poll(&pfd, 1, POOL_TICK_MS) == 0) {
			bool ours = fstatat(dirfd, POOL_SOCK, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
			            now.st_ino == sb.st_ino;

			if (!ours || idle(runtime_dir, last_ask)) {
				if (ours)
					(void)unlinkat(dirfd, POOL_SOCK, 0);
				_exit(0);
			}
		}
		if (!(pfd.revents & POLLIN) || (c = accept4(lst, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
		    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    cred.uid != geteuid() || hutch_proto_recv(c, &hdr, NULL, 0, NULL, &nfds) < 0)
			continue;
		if (hdr.type == HUTCH_MSG_KILL) {
			(void)unlinkat(dirfd, POOL_SOCK, 0);
			_exit(0); /* its close tells the asker it is done */
		}
		if (hdr.type == HUTCH_MSG_GO) {
			(void)hutch_proto_send(c, HUTCH_MSG_READY, 0, NULL, 0, &root, 1);
			last_ask = hutch_now_mono_sec();
		}
	}
}

const char *hutch_disk_pool_why_not(const char *runtime_dir)
{
	_cleanup_fclose_ FILE *f = NULL;
	const char *env = getenv("HUTCH_DISK_POOL");
	const char *where = hutch_disk_files_where(runtime_dir);
	char line[128];

	if (env && !strcmp(env, "none"))
		return "HUTCH_DISK_POOL=none: the disks' files are the host's (forks copy)";
	if (!where)
		return "/var/tmp is in memory: no disks' files";
	if (shares_extents(where))
		return "not needed: the disks' files' file system clones files itself (XFS, "
		       "btrfs)";
	if (!mkfs_xfs_path())
		return "no mkfs.xfs, forks copy the disk: apt-get install xfsprogs";
	f = fopen("/proc/filesystems", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strcmp(line, "\txfs\n") == 0)
			return NULL;
	return "no XFS in this kernel, forks copy the disk: modprobe xfs";
}

/* Is there to be a pool for runtime_dir's disks? */
static bool wanted(const char *runtime_dir)
{
	return !hutch_disk_pool_why_not(runtime_dir);
}

/* The dir's .disk, never made here: its stock makes it (a gc may have
 * removed it meanwhile, and then there is no pool to ask). */
static int disk_dir(const char *runtime_dir)
{
	char dir[4096];
	int fd;

	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

int hutch_disk_pool_open(const char *runtime_dir)
{
	_cleanup_close_ int dirfd = -EBADF, s = -EBADF;
	struct hutch_msg_hdr hdr = { 0 };
	struct sockaddr_un sa;
	int fd = -EBADF;
	size_t nfds = 1;

	if (!wanted(runtime_dir))
		return -EOPNOTSUPP;
	if ((dirfd = disk_dir(runtime_dir)) < 0)
		return dirfd; /* -ENOENT: no .disk, no pool */
	if ((s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (sock_at(dirfd, &sa) < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    hutch_proto_send(s, HUTCH_MSG_GO, 0, NULL, 0, NULL, 0) < 0 ||
	    hutch_proto_recv(s, &hdr, NULL, 0, &fd, &nfds) < 0)
		return -ENOENT;
	return hdr.type == HUTCH_MSG_READY && nfds == 1 ? fd : -ENOENT;
}

int hutch_disk_pool_start(const char *runtime_dir, int dirfd, struct hutch_err *err)
{
	_cleanup_close_ int lock = -EBADF, pool = -EBADF;
	struct pollfd pfd = { .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	struct hutch_err e = { 0 };
	size_t nfds = 0;
	int sv[2], status;
	ssize_t n;
	pid_t pid;

	if ((pool = hutch_disk_pool_open(runtime_dir)) >= 0 || pool == -EOPNOTSUPP)
		return pool >= 0 ? 1 : 0;
	if ((lock = hutch_lock_at(dirfd, POOL_LOCK, LOCK_EX)) < 0)
		return hutch_err_set_errno(err, lock, "disk pool: lock");
	if ((pool = hutch_disk_pool_open(runtime_dir)) >= 0)
		return 1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "disk pool: socketpair");
	pid = hutch_fork_detached();
	if (pid == 0) {
		/* Only these two: the stock's lock, say, is not the holder's. */
		if (dup3(dirfd, POOL_FD_DIR, O_CLOEXEC) < 0 ||
		    dup3(sv[1], POOL_FD_DIR + 1, O_CLOEXEC) < 0)
			_exit(0);
		(void)sys_close_range(3, POOL_FD_DIR - 1, 0);
		(void)sys_close_range(POOL_FD_DIR + 2, ~0U, 0);
		holder(runtime_dir, POOL_FD_DIR, POOL_FD_DIR + 1);
	}
	close(sv[1]);
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	pfd.fd = sv[0];
	n = poll(&pfd, 1, POOL_START_MS) > 0
	            ? hutch_proto_recv(sv[0], &hdr, &e, sizeof(e), NULL, &nfds)
	            : -ETIMEDOUT;
	close(sv[0]);
	if (n >= 0 && hdr.type == HUTCH_MSG_READY)
		return 1;
	if (hdr.type == HUTCH_MSG_FAILED && (size_t)n == sizeof(e)) {
		e.msg[sizeof(e.msg) - 1] = '\0';
		return hutch_err_set(err, e.code < 0 ? e.code : -EIO, "%s", e.msg);
	}
	return hutch_err_set(err, n < 0 ? (int)n : -EPROTO, "disk pool: its holder did not start");
}
