/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fork's disk (disk.h, "Forks"; docs/snapshots.md "Fork"). The source's
 * supervisor starts one forker per fork: a process of its own (the
 * supervisor's sibling, reaped by whoever reaps orphans, as lxcfs) that
 *
 *   1. makes a disk of the fork's size and says so on ctl
 *      (HUTCH_MSG_READY, or FAILED): where the source's file can be
 *      cloned, a clone of it (tried now) on a loop device, else a new disk
 *      (disk.c: the template, a loop device, ext4);
 *   2. on ctl's GO (the source frozen meanwhile) clones the source's file
 *      again (prepare() and fill() say how), or copies the source disk's
 *      writable places into it with `cp -a` (coreutils: owners, modes,
 *      times, hard links, extended attributes such as the overlay's
 *      opaque marks, its whiteouts' devices; symlinks never followed) and
 *      says so (READY or FAILED); a clone is mounted after that;
 *   3. waits, at most HUTCH_DISK_FORK_TAKE_MS, for the fork's creator on
 *      its listening socket: GO with the fork's ids maps the disk's owners
 *      onto the fork's id range (idmapped mounts: the disk's root for the
 *      supervisor, its four places for init, each a detached clone mapped
 *      with mount_setattr(MOUNT_ATTR_IDMAP); no file is chowned, so the
 *      cost is the same whatever the source wrote) and answers as a maker
 *      does (READY with the fds); KILL (`hutch gc`, or the supervisor's on ctl
 *      when a fork failed), the end of POST /fork's client (hutch fork:
 *      its creates, which would take the disk, died with it) or its time
 *      up ends it, and the disk with it.
 *
 * A forker made ahead (hutch_disk_fork_start_ahead(): the source's
 * supervisor makes the next fork's after a fork by clone) does step 1
 * without the source: its file in the disks' pool, of the fork's size,
 * on its loop device; it is given the source's disk and the listener when
 * a fork takes it, syncs the source's file system as step 1 does, and
 * goes on from there (LOOP_CONFIGURE, 1-40 ms, and the forker's start are
 * then off the fork's path).
 *
 * The copy runs on the source's files, so its cost is what the source
 * wrote (the data read from the page cache it was written to); it is the
 * only time the source is frozen. Measured: docs/snapshots.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "disk-internal.h"
#include "fdutil.h"
#include "proto.h"
#include "syscalls.h"
#include "util.h"

#define ID_RANGE 65536u
#define CP_PATH  "/usr/bin/cp"
#define FORK_FDS 6
/* A fork's disk's name, once its create is there before it: its source
 * names it within a POST /fork (answered after; hutch fork waits for it). */
#define FORK_APPEAR_MS 30000
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef BLKFLSBUF
#define BLKFLSBUF _IO(0x12, 97)
#endif
#ifndef FICLONE /* linux/fs.h, which clashes with sys/mount.h */
#define FICLONE _IOW(0x94, 9, int)
#endif

enum {
	DISK_FILE,
	DISK_MNT,
	DISK_ROOT
};

/* The disk's ids (on disk: those of the sandbox that first wrote it,
 * whatever forks came between) seen as the fork's: a user namespace whose
 * maps take the disk's range (its "layer", owned by the range's root, says
 * where it starts) onto the fork's, root kept as root (the file system's
 * root and lost+found). Its process made ahead (ns, > 0: the taker's ids
 * are known only once it asks, and making a process then cost 3-30 ms at
 * load 9), else now. Its fd, or -errno. */
static int fork_userns(int root, uid_t to, pid_t ns, struct hutch_err *err)
{
	char umap[96], gmap[96];
	struct stat st;
	pid_t pid = 0;
	int fd;

	if (fstatat(root, "layer", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return hutch_err_set_errno(err, -errno, "fork: its disk's layer");
	if (st.st_uid == 0 || st.st_gid == 0)
		return hutch_err_set(err, -EINVAL, "fork: its disk's layer is owned by root");
	snprintf(umap, sizeof(umap), "0 0 1\n%u %u %u\n", (unsigned)st.st_uid, (unsigned)to,
	         ID_RANGE);
	snprintf(gmap, sizeof(gmap), "0 0 1\n%u %u %u\n", (unsigned)st.st_gid, (unsigned)to,
	         ID_RANGE);
	/* Its process killed, reaped once the fork has its disk (its exit
	 * tears a namespace down, ~5 ms: not on the fork's path), forker()'s
	 * end; one made now (none made ahead) is reaped at once. */
	if (ns > 0) {
		fd = hutch_userns_finish(ns, umap, gmap);
	} else {
		fd = hutch_userns_fd(umap, gmap, &pid);
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
	}
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "fork: a user namespace for its ids");
	return fd;
}

/* mnt (a detached clone) idmapped by userns. */
static int idmap(int mnt, int userns)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns };

	return sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ? -errno : 0;
}

/* disk[DISK_ROOT] replaced by the root of an idmapped clone of the disk's
 * mount (the supervisor's: a fork of the fork, its diff, see the fork's
 * ids); *ret_userns for the places' clones. */
static int map_ids(int disk[3], uid_t to, pid_t ns, int *ret_userns, struct hutch_err *err)
{
	_cleanup_close_ int userns = -EBADF, view = -EBADF;
	int r, root;

	if ((r = userns = fork_userns(disk[DISK_ROOT], to, ns, err)) < 0)
		return r;
	view = sys_open_tree(disk[DISK_MNT], "",
	                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (view < 0 || (r = idmap(view, userns)) < 0)
		return hutch_err_set_errno(err, view < 0 ? -errno : r,
		                           "fork: map its disk's ids onto the fork's (an idmapped "
		                           "mount)");
	root = openat(view, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return hutch_err_set_errno(err, -errno, "fork: its disk's mapped root");
	closep(&disk[DISK_ROOT]);
	disk[DISK_ROOT] = root;
	*ret_userns = TAKE_FD(userns);
	return 0;
}

/* cp -a of the source disk's places into root (same names). */
static int copy(int src, int root, struct hutch_err *err)
{
	char p[4][64];
	int status = 0;
	pid_t pid;

	snprintf(p[0], sizeof(p[0]), "/proc/self/fd/%d/workspace", src);
	snprintf(p[1], sizeof(p[1]), "/proc/self/fd/%d/home", src);
	snprintf(p[2], sizeof(p[2]), "/proc/self/fd/%d/tmp", src);
	snprintf(p[3], sizeof(p[3]), "/proc/self/fd/%d/layer", src);
	pid = fork();
	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "fork: fork cp");
	if (pid == 0) {
		char *const argv[] = { "cp", "-a", p[0], p[1], p[2], p[3], ".", NULL };
		char *const envp[] = { "PATH=/usr/bin:/bin", "LC_ALL=C", NULL };

		if (fchdir(root) < 0 || fcntl(src, F_SETFD, 0) < 0)
			_exit(126);
		hutch_stdio_to_null();
		execve(CP_PATH, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hutch_err_set(err, -EIO,
		                     "fork: copying the source's files failed (cp: status %d; "
		                     "a fork's disk smaller than what the source wrote?)",
		                     status);
	return 0;
}

/* Its creator's connection, or -1: none in HUTCH_DISK_FORK_TAKE_MS, the
 * supervisor said KILL on ctl (a fork that failed; ctl's EOF alone, the
 * supervisor done with it, is no reason to end), or the client ended
 * (its pidfd readable; a connection already made is served). */
static int await_taker(int listener, int ctl, int client)
{
	struct pollfd pfd[3] = { { .fd = listener, .events = POLLIN },
		                 { .fd = ctl, .events = POLLIN },
		                 { .fd = client, .events = POLLIN } };
	double end = hutch_now_mono_sec() + HUTCH_DISK_FORK_TAKE_MS / 1e3;

	for (;;) {
		double left = end - hutch_now_mono_sec();
		struct hutch_msg_hdr hdr = { 0 };
		size_t nfds = 0;

		if (left <= 0 || poll(pfd, 3, (int)(left * 1e3) + 1) < 0) {
			if (left > 0 && errno == EINTR)
				continue;
			return -1;
		}
		if (pfd[0].revents & POLLIN)
			return accept4(listener, NULL, NULL, SOCK_CLOEXEC);
		if (pfd[2].revents)
			return -1;
		if (pfd[1].revents) {
			if (hutch_proto_recv(ctl, &hdr, NULL, 0, NULL, &nfds) >= 0 &&
			    hdr.type == HUTCH_MSG_KILL)
				return -1;
			pfd[1].fd = -1; /* EOF: the supervisor is done with it */
		}
	}
}

/* The fork's creator, once: its request served (e: why there is no disk;
 * ns: the user namespace's process made ahead, or <= 0). */
static void serve(int listener, int ctl, int client, int disk[3], pid_t ns, struct hutch_err *e)
{
	int fds[HUTCH_DISK_FDS] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
	struct hutch_disk_request req = { 0 };
	struct hutch_msg_hdr hdr = { 0 };
	_cleanup_close_ int c = await_taker(listener, ctl, client), userns = -EBADF;
	size_t nfds = 0;
	ssize_t n;
	int r;

	if (c < 0)
		return;
	n = hutch_proto_recv(c, &hdr, &req, sizeof(req), NULL, &nfds);
	if (n != (ssize_t)sizeof(req) || hdr.type != HUTCH_MSG_GO)
		return;
	if (e->code < 0 || map_ids(disk, req.uid_base, ns, &userns, e) < 0 ||
	    hutch_disk_hand_over(disk[DISK_MNT], disk[DISK_ROOT], disk[DISK_FILE], &req, fds, e) <
	            0)
		goto failed;
	for (size_t i = 0; i < HUTCH_DISK_MOUNTS; i++)
		if ((r = idmap(fds[i], userns)) < 0) {
			hutch_err_set_errno(e, r, "fork: map the ids of its disk's places");
			goto failed;
		}
	(void)hutch_proto_send(c, HUTCH_MSG_READY, 0, NULL, 0, fds, HUTCH_DISK_FDS);
	return;
failed:
	(void)hutch_proto_send(c, HUTCH_MSG_FAILED, 0, e, sizeof(*e), NULL, 0);
}

/* The fork's disk made, to be filled at GO: by a clone of the source's
 * file where the file system shares extents and the sizes match (tried
 * now, the source running: a failure here costs the frozen time nothing),
 * else a new disk, laid out, for cp. *cloning: which; a clone's loop
 * device is set up now too (*loop, /dev/loop<*nr>): LOOP_CONFIGURE took
 * 7-43 ms at load 10, which the fork's create waited for after the thaw. */
static int prepare(const struct hutch_disk_fork *f, int disk[3], bool *cloning, int *loop, int *nr,
                   struct hutch_err *err)
{
	struct stat st;

	*cloning = false;
	if (f->src_file >= 0 && fstat(f->src_file, &st) == 0 && (uint64_t)st.st_size == f->bytes &&
	    (disk[DISK_FILE] = hutch_disk_new_file(f->runtime_dir, err)) >= 0) {
		if (ioctl(disk[DISK_FILE], FICLONE, f->src_file) == 0) {
			/* What the source has in memory written out now, while it
			 * runs: the sync at GO, frozen, has only the rest to write
			 * (1.1 s -> 13-18 ms frozen after 100 MB just written). */
			(void)syncfs(f->src_root);
			*cloning = true;
			return *loop = hutch_disk_loop_attach(disk[DISK_FILE], nr, err);
		}
		closep(&disk[DISK_FILE]);
	}
	hutch_err_clear(err);
	return hutch_disk_make(f->runtime_dir, f->bytes, &disk[DISK_FILE], &disk[DISK_MNT],
	                       &disk[DISK_ROOT], err);
}

/* GO, the source frozen: its files into the fork's disk. The clone: what
 * the source's ext4 holds in memory written through to its file first
 * (syncfs: nothing of the sandbox runs, its file system stands still);
 * then the loop device's block cache dropped (nothing mounted it yet, but
 * a probe of the new device, udev's, may have read the file as it was). */
static int fill(const struct hutch_disk_fork *f, const int disk[3], bool cloning, int loop,
                struct hutch_err *err)
{
	if (!cloning)
		return copy(f->src_root, disk[DISK_ROOT], err);
	if (syncfs(f->src_root) < 0 || ftruncate(disk[DISK_FILE], 0) < 0 ||
	    ioctl(disk[DISK_FILE], FICLONE, f->src_file) < 0 || ioctl(loop, BLKFLSBUF, 0) < 0)
		return hutch_err_set_errno(err, -errno, "fork: clone the source's disk");
	return 0;
}

/* Made ahead (hutch_disk_fork_start_ahead()): a file of the fork's size
 * in the disks' pool on its loop device, filled by a clone at GO as
 * prepare()'s is; the source's disk and the listener come when taken. */
static int prepare_ahead(const struct hutch_disk_fork *f, int disk[3], int *loop, int *nr,
                         struct hutch_err *err)
{
	if ((disk[DISK_FILE] = hutch_disk_new_file(f->runtime_dir, err)) < 0)
		return disk[DISK_FILE];
	if (ftruncate(disk[DISK_FILE], (off_t)f->bytes) < 0)
		return hutch_err_set_errno(err, -errno, "fork: size its disk's file");
	return *loop = hutch_disk_loop_attach(disk[DISK_FILE], nr, err);
}

/* Made ahead, taken (hutch_disk_fork_give()): the fork's listener, its
 * name (into name[]) and path, and the source's disk (and the client's
 * pidfd, if known), what the source's file system holds in memory written
 * out while it runs (as prepare() does); 0, or -1: the supervisor let it
 * go (ctl's end, KILL). */
static int await_give(int ctl, struct hutch_disk_fork *f, int *listener,
                      char name[HUTCH_DISK_FORK_NAME_MAX])
{
	int fds[5] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
	struct hutch_msg_hdr hdr = { 0 };
	size_t nfds = 5;
	ssize_t n = hutch_proto_recv(ctl, &hdr, name, HUTCH_DISK_FORK_NAME_MAX - 1, fds, &nfds);

	if (n < 0 || hdr.type != HUTCH_MSG_SOCKET || nfds < 4) {
		if (n >= 0)
			hutch_close_many(fds, nfds);
		return -1;
	}
	name[n] = '\0';
	*listener = fds[0];
	f->name = name;
	f->path = fds[1];
	f->src_root = fds[2];
	f->src_file = fds[3];
	f->client = fds[4];
	(void)syncfs(f->src_root);
	return 0;
}

/* The forker's first part: its disk made (ahead: and taken), READY, the
 * ids' user namespace begun (*ns: its process dies with us, PDEATHSIG).
 * 0, or -1: nothing more to do. */
static int made(struct hutch_disk_fork *f, int ctl, int *listener, int disk[3], bool *cloning,
                int *loop, int *nr, pid_t *ns, char name[HUTCH_DISK_FORK_NAME_MAX])
{
	bool ahead = f->src_file < 0;
	struct hutch_err e = { 0 };
	int r;

	*cloning = ahead;
	r = ahead ? prepare_ahead(f, disk, loop, nr, &e) : prepare(f, disk, cloning, loop, nr, &e);
	if (r < 0) {
		(void)hutch_proto_send(ctl, HUTCH_MSG_FAILED, 0, &e, sizeof(e), NULL, 0);
		return -1;
	}
	if (hutch_proto_send(ctl, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0) < 0)
		return -1;
	*ns = hutch_userns_start();
	if (!ahead)
		return 0;
	if (await_give(ctl, f, listener, name) < 0)
		return -1;
	return hutch_proto_send(ctl, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0) < 0 ? -1 : 0;
}

/* The forker's work, f's name and path set (made ahead: once given);
 * *ns: the user namespace's process it made, or <= 0. */
static void forker_run(struct hutch_disk_fork *f, int ctl, int listener,
                       char name[HUTCH_DISK_FORK_NAME_MAX], pid_t *ns)
{
	int disk[3] = { -EBADF, -EBADF, -EBADF };
	struct hutch_msg_hdr hdr = { 0 };
	struct hutch_err e = { 0 };
	int loop = -EBADF, nr = -1;
	bool cloning;
	size_t nfds = 0;

	if (made(f, ctl, &listener, disk, &cloning, &loop, &nr, ns, name) < 0)
		return;
	if (hutch_proto_recv(ctl, &hdr, NULL, 0, NULL, &nfds) != 0 || hdr.type != HUTCH_MSG_GO)
		return;
	if (getenv("HUTCH_TEST_FORK_STOP"))
		(void)raise(SIGSTOP); /* the fault tests' point (test_snapshot_faults.py) */
	if (fill(f, disk, cloning, loop, &e) < 0) {
		(void)hutch_proto_send(ctl, HUTCH_MSG_FAILED, 0, &e, sizeof(e), NULL, 0);
		return;
	}
	/* the source's disk is not held by a fork not yet taken */
	close(f->src_root);
	if (f->src_file >= 0)
		close(f->src_file);
	if (hutch_proto_send(ctl, HUTCH_MSG_READY, 0, &cloning, sizeof(cloning), NULL, 0) < 0)
		return;
	/* The clone mounted after the thaw; a failure is its taker's to hear.
	 * The mount holds the loop device from then on (autoclear). */
	if (cloning) {
		(void)hutch_disk_mount(f->runtime_dir, nr, &disk[DISK_MNT], &disk[DISK_ROOT], &e);
		closep(&loop);
	}
	serve(listener, ctl, f->client, disk, *ns, &e);
}

/* Our socket's name removed at our end, whatever ended us (its taker
 * removed it already; not taken: it stayed in $RT/.disk until hutch gc),
 * while the name is still our socket's: a name freed by its taker may be
 * given to another forker since (POST /fork's "names" are its caller's). */
static void drop_name(const struct hutch_disk_fork *f)
{
	_cleanup_close_ int dirfd = -EBADF;
	struct stat ours, now;
	char dir[4096];

	if (!f->name || f->path < 0 || fstat(f->path, &ours) < 0)
		return;
	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, f->runtime_dir);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd >= 0 && fstatat(dirfd, f->name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    now.st_ino == ours.st_ino && now.st_dev == ours.st_dev)
		(void)unlinkat(dirfd, f->name, 0);
}

_Noreturn static void forker(const struct hutch_disk_fork *from, int ctl, int listener)
{
	struct hutch_disk_fork fk = *from;
	char name[HUTCH_DISK_FORK_NAME_MAX] = "";
	pid_t ns = 0;

	forker_run(&fk, ctl, listener, name, &ns);
	drop_name(&fk);
	/* Its user namespace's process reaped, not left a zombie of ours
	 * (then of whoever reaps orphans): killed, if not already, and
	 * waited for with nothing of the fork's held (the disk's fds and the
	 * loop device are its taker's now). */
	if (ns > 0) {
		(void)sys_close_range(3, ~0U, 0);
		(void)kill(ns, SIGKILL);
		(void)waitpid(ns, NULL, 0);
	}
	_exit(0);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Every fd but keep[] (and stdio) closed: the supervisor's are not ours. */
static void keep_only(int keep[FORK_FDS])
{
	unsigned from = 3;

	qsort(keep, FORK_FDS, sizeof(keep[0]), cmp_int);
	for (size_t i = 0; i < FORK_FDS; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < from)
			continue; /* none, or stdio */
		if ((unsigned)keep[i] > from)
			(void)sys_close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	(void)sys_close_range(from, ~0u, 0);
}

/* The forker is our sibling (CLONE_PARENT: our parent, init or the
 * subreaper that took us when we were made a daemon, reaps it, as it would
 * an orphan), in one process creation: a fork and an orphaned grandchild
 * were two, and a wait for the first to end, on the fork's path. */
static int start(const struct hutch_disk_fork *f, int listener, int *ret_ctl, int *ret_pidfd,
                 struct hutch_err *err)
{
	int pidfd = -EBADF;
	struct clone_args args = { .flags = CLONE_PARENT | (ret_pidfd ? CLONE_PIDFD : 0),
		                   .pidfd = (uint64_t)(uintptr_t)&pidfd };
	int sv[2];
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "fork: socketpair");
	pid = sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		int r = -errno;

		hutch_close_many(sv, 2);
		return hutch_err_set_errno(err, r, "fork: clone3 its forker");
	}
	if (pid == 0) {
		int keep[FORK_FDS] = {
			f->src_root, f->src_file, sv[1], listener, f->client, f->path
		};

		keep_only(keep);
		forker(f, sv[1], listener);
	}
	close(sv[1]);
	*ret_ctl = sv[0];
	if (ret_pidfd)
		*ret_pidfd = pidfd;
	return 0;
}

int hutch_disk_fork_start(const struct hutch_disk_fork *f, int listener, int *ret_ctl,
                          struct hutch_err *err)
{
	return start(f, listener, ret_ctl, NULL, err);
}

int hutch_disk_fork_start_ahead(const char *runtime_dir, uint64_t bytes, int *ret_ctl,
                                int *ret_pidfd, struct hutch_err *err)
{
	const struct hutch_disk_fork f = { .runtime_dir = runtime_dir,
		                           .bytes = bytes,
		                           .src_root = -EBADF,
		                           .src_file = -EBADF,
		                           .client = -EBADF,
		                           .path = -EBADF };

	return start(&f, -EBADF, ret_ctl, ret_pidfd, err);
}

int hutch_disk_fork_give(int ctl, const struct hutch_disk_fork *f, int listener,
                         struct hutch_err *err)
{
	const int fds[5] = { listener, f->path, f->src_root, f->src_file, f->client };
	int r = hutch_proto_send(ctl, HUTCH_MSG_SOCKET, 0, f->name, strlen(f->name), fds,
	                         f->client >= 0 ? 5 : 4);

	return r < 0 ? hutch_err_set_errno(err, r, "fork: give its forker made ahead its disk") : 0;
}

int hutch_disk_fork_wait(int ctl, int timeout_ms, struct hutch_err *err)
{
	struct pollfd pfd = { .fd = ctl, .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	struct hutch_err child = { 0 };
	size_t nfds = 0;
	ssize_t n;

	if (poll(&pfd, 1, timeout_ms) <= 0)
		return hutch_err_set(err, -ETIMEDOUT, "fork: its disk not ready in %d s",
		                     timeout_ms / 1000);
	n = hutch_proto_recv(ctl, &hdr, &child, sizeof(child), NULL, &nfds);
	if (n == 0 && hdr.type == HUTCH_MSG_READY)
		return 0;
	if (n == (ssize_t)sizeof(bool) && hdr.type == HUTCH_MSG_READY)
		return *(const bool *)&child ? 1 : 0; /* filled: cloned or copied */
	if (hdr.type == HUTCH_MSG_FAILED && (size_t)n == sizeof(child)) {
		child.msg[sizeof(child.msg) - 1] = '\0';
		return hutch_err_set(err, child.code < 0 ? child.code : -EIO, "%s", child.msg);
	}
	return hutch_err_set(err, -EPROTO, "fork: its disk's maker ended without an answer");
}

bool hutch_disk_can_clone(const char *runtime_dir, int file, uint64_t bytes)
{
	struct hutch_err e = { 0 };
	_cleanup_close_ int probe = -EBADF;
	struct stat st;

	if (file < 0 || fstat(file, &st) < 0 || (uint64_t)st.st_size != bytes)
		return false;
	probe = hutch_disk_new_file(runtime_dir, &e);
	return probe >= 0 && ioctl(probe, FICLONE, file) == 0;
}

bool hutch_disk_fork_name_is_valid(const char *name)
{
	size_t n = strlen(name);

	if (n < sizeof("fork-x.sock") - 1 || n >= HUTCH_DISK_FORK_NAME_MAX ||
	    strncmp(name, "fork-", 5) || strcmp(name + n - 5, ".sock"))
		return false;
	for (size_t i = 5; i < n - 5; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

/* A socket bound at '.name' (our own: any left over is removed first),
 * listening, then renamed to name: a creator that sees the name appear
 * (hutch fork waits for it, docs/snapshots.md "Fork") can connect at
 * once, never to a socket bound and not yet listening (ECONNREFUSED).
 * exclusive: a name taken is refused (EEXIST: a creator chose it), else
 * replaced (the supervisor's own counter, reused after a crash). */
int hutch_disk_fork_listen(const char *runtime_dir, const char *name, bool exclusive, int *ret_path,
                           struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, s = -EBADF, path = -EBADF;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[4096], tmp[HUTCH_DISK_FORK_NAME_MAX + 1];

	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "fork: mkdir '%s'", dir);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return hutch_err_set_errno(err, -errno, "fork: open '%s'", dir);
	snprintf(tmp, sizeof(tmp), ".%s", name);
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, tmp) >=
	    (int)sizeof(sa.sun_path))
		return hutch_err_set(err, -ENAMETOOLONG, "fork: socket name '%s'", name);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	(void)unlinkat(dirfd, tmp, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 1) < 0 ||
	    (path = openat(dirfd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "fork: listen on '%s/%s'", dir, tmp);
	if (renameat2(dirfd, tmp, dirfd, name, exclusive ? RENAME_NOREPLACE : 0) < 0) {
		int r = -errno;

		(void)unlinkat(dirfd, tmp, 0);
		return hutch_err_set_errno(err, r, "fork: name its socket '%s/%s'", dir, name);
	}
	*ret_path = TAKE_FD(path);
	return TAKE_FD(s);
}

void hutch_disk_fork_forget(const char *runtime_dir, const char *name)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/" HUTCH_DISK_DIR "/%s", runtime_dir, name);
	(void)unlink(path);
}

int hutch_disk_fork_take(const char *runtime_dir, const char *name, struct hutch_disk_job *job)
{
	_cleanup_close_ int dirfd = -EBADF, s = -EBADF;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[4096];

	job->pid = -1;
	job->sock = -EBADF;
	if (!*name || strchr(name, '/'))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name) >=
	    (int)sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* Taken: nobody else may connect (the forker serves one). */
	(void)unlinkat(dirfd, name, 0);
	job->sock = TAKE_FD(s);
	return 0;
}

int hutch_disk_fork_await(const char *runtime_dir, const char *name, struct pollfd *watch,
                          size_t nwatch, int timeout_ms)
{
	_cleanup_close_ int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), dir = -EBADF;
	double end = hutch_now_mono_sec() + timeout_ms / 1e3;
	struct pollfd p[3];
	char path[4096];

	if (nwatch > ELEMENTSOF(p) - 1)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/" HUTCH_DISK_DIR, runtime_dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) /* its forker's makes it too */
		return -errno;
	dir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || dir < 0 || inotify_add_watch(in, path, IN_MOVED_TO | IN_ONLYDIR) < 0)
		return -errno;
	p[0] = (struct pollfd){ .fd = in, .events = POLLIN };
	memcpy(p + 1, watch, nwatch * sizeof(*watch));
	for (;;) {
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		double left = end - hutch_now_mono_sec();

		/* looked at before every watch: a name that came with the
		 * answer (POST /fork answers once its names are there) counts */
		if (faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			return 0;
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(p, nwatch + 1, (int)(left * 1e3) + 1) < 0 && errno != EINTR)
			return -errno;
		for (size_t i = 1; i <= nwatch; i++)
			if (p[i].revents && faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
				return -ECANCELED;
		while (read(in, buf, sizeof(buf)) > 0)
			;
	}
}

/* Awaited (the disk step's end, init cloned meanwhile): its creator's
 * end and hutch fork's request watched. */
static int setup_await(const struct hutch_disk_plan *p, struct hutch_err *err)
{
	struct pollfd w[2];
	size_t n = 0;
	int r;

	if (p->creator_fd >= 0)
		w[n++] = (struct pollfd){ .fd = p->creator_fd, .events = POLLRDHUP };
	if (p->answer_fd >= 0)
		w[n++] = (struct pollfd){ .fd = p->answer_fd, .events = POLLIN };
	r = hutch_disk_fork_await(p->runtime_dir, p->fork_from, w, n, FORK_APPEAR_MS);
	if (r == -ECANCELED)
		return hutch_err_set_class(err, HUTCH_ERRC_GONE, -ENOLINK,
		                           "fork: its disk ('%s') will not come: its creator ended "
		                           "or the source answered without it",
		                           p->fork_from);
	if (r == -ETIMEDOUT)
		return hutch_err_set_errno(err, r, "fork: its disk ('%s') did not come in %d s",
		                           p->fork_from, FORK_APPEAR_MS / 1000);
	return r < 0 ? hutch_err_set_errno(err, r, "fork: await its disk ('%s')", p->fork_from) : 0;
}

int hutch_disk_fork_setup_take(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                               bool wait, struct hutch_err *err)
{
	int r;

	if (p->want != HUTCH_DISK_WANT_FORK || job->sock >= 0)
		return 0;
	if (wait && (r = setup_await(p, err)) < 0)
		return r;
	r = hutch_disk_fork_take(p->runtime_dir, p->fork_from, job);
	if (r == -ENOENT && !wait)
		return 0;
	if (r < 0)
		return hutch_err_set_errno(err, r, "fork: take its disk ('%s')", p->fork_from);
	return wait ? hutch_disk_request(job, p->uid_base, err) : 0;
}
