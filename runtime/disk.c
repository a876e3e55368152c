/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's disk (disk.h). The steps, in a child of the supervisor:
 *
 *   1. the template runtime_dir/.disk/ext4-<bytes>: mke2fs once (no
 *      journal: a throw-away disk needs no crash recovery; lazy inode
 *      tables, never zeroed: mounted noinit_itable; no backup superblocks
 *      and its metadata packed at its start: 5 extents, not 23, so that a
 *      clone in the pool's XFS stays in its inode, no block allocated; its
 *      directories made in it by mke2fs -d, not by each disk's maker: no
 *      block group's bitmaps loaded, nothing written back at its end but
 *      the inodes' block and the superblock), renamed into place so that
 *      concurrent creates never see half of one;
 *   2. an O_TMPFILE of that size on a disk (the runtime dir, or /var/tmp
 *      when the runtime dir is in memory) and the template's data copied
 *      into it (~1.5 MB for 2.5 GiB: the rest is holes);
 *   3. a free loop device configured on it in one LOOP_CONFIGURE,
 *      autoclear (detached once the last mount goes) and direct I/O (no
 *      second page cache of the file, charged to no one);
 *   4. ext4 mounted detached (fsopen, fsmount: nosuid, nodev; nobarrier:
 *      its file is nameless, so no crash leaves it to recover, and a cache
 *      flush, a syncfs's or a fsync's inside, went down the loop devices
 *      (the pool's too) to the host's disk: 0.6-12 ms for a syncfs with nothing to write,
 *      0.1 ms without, the fork's frozen one among them), its
 *      directories made and given to the sandbox's ids, each cloned
 *      (open_tree) for init to attach.
 *
 * Measured (12-05, load 13-18, 2.5 GiB): copy 1-6 ms, LOOP_CONFIGURE
 * 2-30 ms (its queue freezes wait for RCU grace periods), the mount 1-30
 * ms; done while the supervisor makes the rest, it overlaps the create.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "changes-format.h"
#include "cleanup.h"
#include "disk-internal.h"
#include "disk.h"
#include "fdutil.h"
#include "proto.h"
#include "syscalls.h"

#define DISK_WAIT_MS  30000
#define COPY_CHUNK    (1 << 20)
#define APP_ID_OFFSET 1000
#ifndef FICLONE /* linux/fs.h, which clashes with sys/mount.h */
#define FICLONE _IOW(0x94, 9, int)
#endif
#define EXT4_IOC_SHUTDOWN           _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2
struct fs_sysfs_path_ { /* linux/fs.h's struct fs_sysfs_path (Linux 6.8) */
	uint8_t len;
	char name[128];
};
#define FS_IOC_GETFSSYSFSPATH_ _IOR(0x15, 1, struct fs_sysfs_path_)

static const char *mke2fs_path(void)
{
	return hutch_disk_tool((const char *const[]){ "/usr/sbin/mke2fs", "/sbin/mke2fs", NULL });
}

bool hutch_disk_possible(const char **why)
{
	if (geteuid() != 0) {
		*why = "an ordinary user gets no loop device";
		return false;
	}
	if (access("/dev/loop-control", W_OK) < 0) {
		*why = "no /dev/loop-control (the loop driver)";
		return false;
	}
	if (!mke2fs_path()) {
		*why = "no mke2fs (e2fsprogs)";
		return false;
	}
	return true;
}

static const struct {
	const char *name;
	mode_t mode;
	bool app;
} layout[] = {
	{ "workspace", 0755, true }, { "home", 0755, true },         { "tmp", 01777, false },
	{ "layer", 0755, false },    { "layer/upper", 0755, false }, { "layer/work", 0700, false },
};

/* The directories as a tree at dir (root's, made 0755), for mke2fs -d. */
static int layout_tree(const char *dir, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;

	if (mkdir(dir, 0755) < 0 || chmod(dir, 0755) < 0 ||
	    (fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "disk: make '%s'", dir);
	for (size_t i = 0; i < ELEMENTSOF(layout); i++)
		if (mkdirat(fd, layout[i].name, layout[i].mode) < 0 ||
		    fchmodat(fd, layout[i].name, layout[i].mode, 0) < 0)
			return hutch_err_set_errno(err, -errno, "disk: make '%s/%s'", dir,
			                           layout[i].name);
	return 0;
}

/* mke2fs into a file of its own, renamed to path when whole. */
static int make_template(const char *path, uint64_t bytes, struct hutch_err *err)
{
	char tmp[4300], tree[4310];
	_cleanup_close_ int fd = -EBADF;
	int status = 0, r;
	pid_t pid;

	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	snprintf(tree, sizeof(tree), "%s.tree", tmp);
	(void)hutch_rm_rf_at(AT_FDCWD, tree); /* a maker of this pid that died */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		return hutch_err_set_errno(err, -errno, "disk: make '%s'", tmp);
	if ((r = layout_tree(tree, err)) < 0) {
		(void)hutch_rm_rf_at(AT_FDCWD, tree);
		(void)unlink(tmp);
		return r;
	}
	pid = fork();
	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "disk: fork mke2fs");
	if (pid == 0) {
		char *const argv[] = { "mke2fs",
			               "-q",
			               "-F",
			               "-t",
			               "ext4",
			               "-b",
			               "4096",
			               "-m",
			               "0",
			               "-O",
			               "^has_journal,^resize_inode,sparse_super2",
			               "-E",
			               "nodiscard,lazy_itable_init=1,root_owner=0:0,"
			               "num_backup_sb=0,packed_meta_blocks=1",
			               "-d",
			               tree,
			               "-L",
			               "hutch",
			               tmp,
			               NULL };
		char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

		hutch_stdio_to_null();
		execve(mke2fs_path(), argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	(void)hutch_rm_rf_at(AT_FDCWD, tree);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		(void)unlink(tmp);
		return hutch_err_set(err, -EIO,
		                     "disk: mke2fs of %" PRIu64 " bytes failed (status %d)", bytes,
		                     status);
	}
	if (rename(tmp, path) < 0) {
		(void)unlink(tmp);
		return hutch_err_set_errno(err, -errno, "disk: rename '%s'", tmp);
	}
	return 0;
}

static int open_template(const char *runtime_dir, uint64_t bytes, struct hutch_err *err)
{
	_cleanup_close_ int pool = hutch_disk_pool_open(runtime_dir);
	char dir[4096], path[4200];
	int fd;

	/* In the pool where there is one (each disk a clone of it), through
	 * its fd: /proc/PID/ (not self) for mke2fs too. */
	if (pool >= 0)
		snprintf(dir, sizeof(dir), "/proc/%d/fd/%d", (int)getpid(), pool);
	else
		snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	snprintf(path, sizeof(path), "%s/ext4-%" PRIu64, dir, bytes);
	/* Twice: `hutch gc` may remove the directory while we make it. */
	for (int i = 0; i < 2; i++) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			return fd >= 0 ? fd
			               : hutch_err_set_errno(err, -errno, "disk: open '%s'", path);
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return hutch_err_set_errno(err, -errno, "disk: mkdir '%s'", dir);
		hutch_err_clear(err);
		(void)make_template(path, bytes, err);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && err->code)
		return err->code;
	return fd >= 0 ? fd : hutch_err_set_errno(err, -errno, "disk: open '%s'", path);
}

int hutch_disk_template(const char *runtime_dir, uint64_t bytes, struct hutch_err *err)
{
	int fd = open_template(runtime_dir, bytes, err);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int hutch_disk_new_file(const char *runtime_dir, struct hutch_err *err)
{
	const char *where = hutch_disk_files_where(runtime_dir);
	_cleanup_close_ int pool = hutch_disk_pool_open(runtime_dir);
	int fd;

	if (pool >= 0) {
		fd = openat(pool, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		return fd >= 0 ? fd : hutch_err_set_errno(err, -errno, "disk: a file in its pool");
	}
	if (!where)
		return hutch_err_set(err, -ENOSPC, "disk: '/var/tmp' is in memory, no disk to use");
	fd = open(where, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd >= 0 ? fd : hutch_err_set_errno(err, -errno, "disk: a file in '%s'", where);
}

/* The template into a new nameless file: a clone where its file system
 * shares extents (XFS, btrfs), else its data (not its holes) copied. */
static int copy_template(int src, const char *runtime_dir, struct hutch_err *err)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int dst = -EBADF;
	struct stat st;
	off_t off = 0;

	if ((dst = hutch_disk_new_file(runtime_dir, err)) < 0)
		return dst;
	if (ioctl(dst, FICLONE, src) == 0)
		return TAKE_FD(dst);
	buf = malloc(COPY_CHUNK);
	if (!buf || fstat(src, &st) < 0 || ftruncate(dst, st.st_size) < 0)
		return hutch_err_set_errno(err, buf ? -errno : -ENOMEM, "disk: size its file");
	for (;;) {
		off_t data = lseek(src, off, SEEK_DATA), hole;

		if (data < 0)
			break; /* ENXIO: no data after off */
		hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return hutch_err_set_errno(err, -errno, "disk: read the template");
		for (off_t p = data; p < hole;) {
			size_t want =
			        (size_t)(hole - p) < COPY_CHUNK ? (size_t)(hole - p) : COPY_CHUNK;
			ssize_t n = pread(src, buf, want, p);

			if (n <= 0 || pwrite(dst, buf, (size_t)n, p) != n)
				return hutch_err_set_errno(err, n < 0 ? -errno : -EIO,
				                           "disk: copy the template");
			p += n;
		}
		off = hole;
	}
	return TAKE_FD(dst);
}

static int mount_ext4(int nr, struct hutch_err *err)
{
	_cleanup_close_ int fs = sys_fsopen("ext4", FSOPEN_CLOEXEC);
	char dev[32];
	int mnt;

	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	if (fs < 0 || sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return hutch_err_set_errno(err, -errno, "disk: mount ext4 of '%s'", dev);
	mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return mnt >= 0 ? mnt : hutch_err_set_errno(err, -errno, "disk: mount ext4 of '%s'", dev);
}

/* The directories, in the template since it has them (mke2fs -d: its
 * last one there, all are); made here in a template of an older hutch
 * (root's). */
static int lay_out(int root, struct hutch_err *err)
{
	if (faccessat(root, layout[ELEMENTSOF(layout) - 1].name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(layout); i++)
		if ((mkdirat(root, layout[i].name, layout[i].mode) < 0 && errno != EEXIST) ||
		    fchmodat(root, layout[i].name, layout[i].mode, 0) < 0)
			return hutch_err_set_errno(err, -errno, "disk: make '%s'", layout[i].name);
	return 0;
}

/* ... given to the sandbox's ids (root: base) once it is taken. */
static int give(int root, uid_t base, struct hutch_err *err)
{
	for (size_t i = 0; i < ELEMENTSOF(layout); i++) {
		uid_t id = base + (layout[i].app ? APP_ID_OFFSET : 0);

		if (fchownat(root, layout[i].name, id, id, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(root, layout[i].name, layout[i].mode, 0) < 0)
			return hutch_err_set_errno(err, -errno, "disk: own '%s'", layout[i].name);
	}
	return 0;
}

/* The template's data (its superblock, descriptors, group 0's bitmaps and
 * first inodes, its directories: 22 blocks in 4 runs) read into the new
 * disk's device at once, not block by block as the mount and the first
 * lookups ask for it (11 reads of 4 KiB, each through two loop devices:
 * -> 4). A hint: what it does not read is read when asked. */
static void read_ahead(int dev, int tmpl)
{
	for (off_t off = 0;;) {
		off_t data = lseek(tmpl, off, SEEK_DATA), hole;

		if (data < 0 || (hole = lseek(tmpl, data, SEEK_HOLE)) < 0)
			return;
		(void)readahead(dev, data, (size_t)(hole - data));
		off = hole;
	}
}

int hutch_disk_mount(const char *runtime_dir, int nr, int *mnt, int *root, struct hutch_err *err)
{
	_cleanup_close_ int probe = -EBADF;
	int r;

	if ((r = *mnt = mount_ext4(nr, err)) < 0)
		return r;
	/* Linux before 6.15 clones (open_tree) only from a mount of the
	 * caller's namespace, which a detached one is not: there it is
	 * attached in a namespace of this child's own, private, on
	 * runtime_dir. */
	probe = sys_open_tree(*mnt, ".", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (probe < 0 && errno == EINVAL &&
	    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	     sys_move_mount(*mnt, "", AT_FDCWD, runtime_dir, MOVE_MOUNT_F_EMPTY_PATH) < 0))
		return hutch_err_set_errno(err, -errno,
		                           "disk: attach it in a namespace of its own");
	*root = openat(*mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*root < 0)
		return hutch_err_set_errno(err, -errno, "disk: open its root");
	return 0;
}

/* The file system, mounted and laid out: its file, mount (*mnt) and root. */
int hutch_disk_make(const char *runtime_dir, uint64_t bytes, int *file, int *mnt, int *root,
                    struct hutch_err *err)
{
	_cleanup_close_ int tmpl = -EBADF, loop = -EBADF;
	int nr = -1, r;

	if ((r = tmpl = open_template(runtime_dir, bytes, err)) < 0 ||
	    (r = *file = copy_template(tmpl, runtime_dir, err)) < 0 ||
	    (r = loop = hutch_disk_loop_attach(*file, &nr, err)) < 0)
		return r;
	read_ahead(loop, tmpl);
	/* the loop device's fd closed after the mount: autoclear */
	if ((r = hutch_disk_mount(runtime_dir, nr, mnt, root, err)) < 0)
		return r;
	return lay_out(*root, err);
}

/* Taken: owned by the ids in the request, each directory cloned. */
int hutch_disk_hand_over(int mnt, int root, int file, const struct hutch_disk_request *req,
                         int fds[HUTCH_DISK_FDS], struct hutch_err *err)
{
	static const char *const names[HUTCH_DISK_MOUNTS] = {
		[HUTCH_ROOTFS_WRITE_UPPER] = "layer",
		[HUTCH_ROOTFS_WRITE_WORKSPACE] = "workspace",
		[HUTCH_ROOTFS_WRITE_HOME] = "home",
		[HUTCH_ROOTFS_WRITE_TMP] = "tmp",
	};
	int r = give(root, req->uid_base, err);

	for (size_t i = 0; r >= 0 && i < HUTCH_DISK_MOUNTS; i++) {
		fds[i] = sys_open_tree(mnt, names[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fds[i] < 0)
			r = hutch_err_set_errno(err, -errno, "disk: clone '%s'", names[i]);
	}
	fds[HUTCH_DISK_ROOT] = root;
	fds[HUTCH_DISK_FILE] = file;
	return r;
}

void hutch_disk_maker(const char *runtime_dir, uint64_t bytes, int sock)
{
	int fds[HUTCH_DISK_FDS] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
	struct hutch_disk_request req = { 0 };
	struct hutch_msg_hdr hdr = { 0 };
	struct hutch_err e = { 0 };
	int mnt = -EBADF, root = -EBADF, file = -EBADF;
	size_t nfds = 0;
	ssize_t n;

	if (hutch_disk_make(runtime_dir, bytes, &file, &mnt, &root, &e) < 0) {
		/* Said at once (a stock drops it); kept until the end of
		 * whoever takes it, to tell it why. */
		(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, &e, sizeof(e), NULL, 0);
		while (hutch_proto_recv(sock, &hdr, &req, sizeof(req), NULL, &nfds) > 0)
			;
		_exit(0);
	}
	/* Its taker's request: EOF (a stock that ended, a create that failed)
	 * ends it, and the disk goes with its last mount. */
	n = hutch_proto_recv(sock, &hdr, &req, sizeof(req), NULL, &nfds);
	if (n != (ssize_t)sizeof(req) || hdr.type != HUTCH_MSG_GO)
		_exit(0);
	if (hutch_disk_hand_over(mnt, root, file, &req, fds, &e) < 0)
		(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, &e, sizeof(e), NULL, 0);
	else
		(void)hutch_proto_send(sock, HUTCH_MSG_READY, 0, NULL, 0, fds, HUTCH_DISK_FDS);
	_exit(0);
}

int hutch_disk_start(const char *runtime_dir, uint64_t bytes, struct hutch_disk_job *job,
                     struct hutch_err *err)
{
	int sv[2];

	job->pid = -1;
	job->sock = -EBADF;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "disk: socketpair");
	job->pid = fork();
	if (job->pid < 0) {
		int r = -errno;

		close(sv[0]);
		close(sv[1]);
		return hutch_err_set_errno(err, r, "disk: fork");
	}
	if (job->pid == 0) {
		close(sv[0]);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		hutch_disk_maker(runtime_dir, bytes, sv[1]);
	}
	close(sv[1]);
	job->sock = sv[0];
	return 0;
}

int hutch_disk_request(struct hutch_disk_job *job, uid_t uid_base, struct hutch_err *err)
{
	struct hutch_disk_request req = { .uid_base = uid_base };
	int r = hutch_proto_send(job->sock, HUTCH_MSG_GO, 0, &req, sizeof(req), NULL, 0);

	return r < 0 ? hutch_err_set_errno(err, r, "disk: ask its maker") : 0;
}

int hutch_disk_setup_start(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                           const char **why, struct hutch_err *err)
{
	*why = NULL;
	if (p->want == HUTCH_DISK_WANT_FORK) {
		if (!p->can)
			return hutch_err_set(err, -EINVAL, "fork: no disk to take");
		/* not made yet: taken after init's clone (hutch_disk_fork_setup_take()) */
		return job->sock < 0 ? 0 : hutch_disk_request(job, p->uid_base, err);
	}
	if (p->want == HUTCH_DISK_WANT_NONE)
		return 0;
	/* A stock's disk taken (job->sock) was taken where the creator asked
	 * hutch_disk_possible() (supervisor/sandbox.c): not asked again. */
	if (!p->can || (job->sock < 0 && !hutch_disk_possible(why))) {
		closep(&job->sock);
		return 1;
	}
	/* A stock's maker that cannot be asked (its stock ended while it was
	 * being made): one of our own. */
	if (job->sock >= 0 && hutch_disk_request(job, p->uid_base, err) >= 0)
		return 0;
	closep(&job->sock);
	hutch_err_clear(err);
	if (hutch_disk_start(p->runtime_dir, p->bytes, job, err) < 0)
		return err->code;
	return hutch_disk_request(job, p->uid_base, err);
}

int hutch_disk_setup_finish(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                            int fds[HUTCH_DISK_FDS], struct hutch_err *why, struct hutch_err *err)
{
	if (p->want == HUTCH_DISK_WANT_FORK && job->sock < 0)
		return hutch_err_set(err, -EINVAL, "fork: no disk taken");
	if (job->sock < 0 || hutch_disk_finish(job, fds, why) >= 0)
		return 0;
	if (p->want == HUTCH_DISK_WANT_FORK) { /* a fork without the source's files: none */
		*err = *why;
		return err->code;
	}
	return 1;
}

static void reap(struct hutch_disk_job *job)
{
	closep(&job->sock);
	if (job->pid > 0)
		while (waitpid(job->pid, NULL, 0) < 0 && errno == EINTR)
			;
	job->pid = -1;
}

int hutch_disk_finish(struct hutch_disk_job *job, int fds[HUTCH_DISK_FDS], struct hutch_err *err)
{
	struct pollfd pfd = { .fd = job->sock, .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	struct hutch_err child = { 0 };
	size_t nfds = HUTCH_DISK_FDS;
	ssize_t n;

	if (poll(&pfd, 1, DISK_WAIT_MS) <= 0) {
		hutch_disk_abandon(job);
		return hutch_err_set(err, -ETIMEDOUT, "disk: not made in %d s",
		                     DISK_WAIT_MS / 1000);
	}
	n = hutch_proto_recv(job->sock, &hdr, &child, sizeof(child), fds, &nfds);
	/* Its exit tears its mount namespace down (an RCU grace period):
	 * not waited for here; the supervisor reaps it as it ends (its
	 * pidfd watched: supervisor/run.c), else hutch_disk_abandon(). */
	closep(&job->sock);
	if (job->pid > 0 && waitpid(job->pid, NULL, WNOHANG) == job->pid)
		job->pid = -1;
	if (n == 0 && hdr.type == HUTCH_MSG_READY && nfds == HUTCH_DISK_FDS)
		return 0;
	if (n > 0)
		hutch_close_many(fds, nfds);
	if (hdr.type == HUTCH_MSG_FAILED && (size_t)n == sizeof(child)) {
		child.msg[sizeof(child.msg) - 1] = '\0';
		return hutch_err_set(err, child.code < 0 ? child.code : -EIO, "%s", child.msg);
	}
	return hutch_err_set(err, -EPROTO, "disk: its maker ended without an answer");
}

void hutch_disk_abandon(struct hutch_disk_job *job)
{
	if (job->pid > 0)
		(void)kill(job->pid, SIGKILL);
	reap(job);
}

int hutch_disk_watch(int root)
{
	int fd = fanotify_init(HUTCH_CHANGES_FAN_INIT, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, HUTCH_CHANGES_FAN_EVENTS, root,
	                  ".") < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

/* Data written and not yet on the disk (ext4's delayed allocation: what
 * a sandbox wrote within the last ~30 s)? True where it cannot be told.
 * Not counted: dirty pages of blocks already allocated (a file rewritten
 * in place, or written where fallocate() reserved it): the unmount
 * writes those back, at most ~30 s of them (the flusher's expiry). */
static bool unwritten(int root)
{
	struct fs_sysfs_path_ fsp = { 0 };
	_cleanup_close_ int fd = -EBADF;
	char path[200], buf[32];
	ssize_t n;

	if (ioctl(root, FS_IOC_GETFSSYSFSPATH_, &fsp) < 0 || fsp.len >= sizeof(fsp.name))
		return true;
	fsp.name[fsp.len] = '\0';
	snprintf(path, sizeof(path), "/sys/fs/%s/delayed_allocation_blocks", fsp.name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 ||
	    (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return true;
	buf[n] = '\0';
	return strtoull(buf, NULL, 10) != 0;
}

void hutch_disk_shutdown(int root)
{
	uint32_t how = EXT4_GOING_FLAGS_NOLOGFLUSH;

	/* Only where there is data to drop: each shutdown writes a line at
	 * KERN_ALERT, which the kernel's console prints (a serial port's,
	 * ~0.9 ms of CPU per run in a VM); what the unmount writes back
	 * otherwise (the inodes' block, the superblock) it writes either way. */
	if (root < 0 || !unwritten(root))
		return;
	(void)ioctl(root, EXT4_IOC_SHUTDOWN, &how);
}
