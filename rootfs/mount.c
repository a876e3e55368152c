/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mount helpers of the rootfs library, all on the new mount API: a new file
 * system is fsopen()/fsconfig()/fsmount()ed into a detached mount, a bind is
 * an open_tree(OPEN_TREE_CLONE) whose attributes are set with
 * mount_setattr() while it is still detached (so nothing is ever visible
 * writable, even briefly), and both are attached with move_mount() onto a
 * target opened once with openat2(), or, where the target is one name in
 * a directory fd, by that name (see rootfs_mount_fs()). No path is
 * resolved twice and no string path of the host is ever used as a mount
 * target.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"

/*
 * The kernel explains many fsconfig()/fsmount() failures (bad option,
 * "proc: ... too revealing") through the fs context fd; append the first
 * message to err when there is room. Reading never blocks: an empty log
 * gives ENODATA.
 */
static int fs_fail(int fsfd, struct hutch_err *err)
{
	char log[128];
	size_t len = strlen(err->msg);
	ssize_t n;

	n = read(fsfd, log, sizeof(log) - 1);
	if (n <= 2 || len + 16 >= sizeof(err->msg))
		return err->code;
	log[n] = '\0';
	log[strcspn(log, "\n")] = '\0';
	/* Messages come as "e proc: text"; drop the severity letter. */
	snprintf(err->msg + len, sizeof(err->msg) - len, " (kernel: %s)", log + 2);
	return err->code;
}

static int fs_set_option(int fsfd, const char *fstype, const char *opt, const char *where,
                         struct hutch_err *err)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	char key[64];
	int r;

	if (klen == 0 || klen >= sizeof(key))
		return hutch_err_set(err, -EINVAL, "bad %s option '%s' for '%s'", fstype, opt,
		                     where);
	memcpy(key, opt, klen);
	key[klen] = '\0';
	if (eq)
		r = sys_fsconfig(fsfd, FSCONFIG_SET_STRING, key, eq + 1, 0);
	else
		r = sys_fsconfig(fsfd, FSCONFIG_SET_FLAG, key, NULL, 0);
	if (r < 0) {
		hutch_err_set_errno(err, -errno, "set %s option '%s' for '%s'", fstype, opt, where);
		return fs_fail(fsfd, err);
	}
	return 0;
}

/* opts names the source itself ("source=shm"). */
static bool has_source(const char *const *opts)
{
	for (; opts && *opts; opts++)
		if (!strncmp(*opts, "source=", 7))
			return true;
	return false;
}

int rootfs_fs_new(const char *fstype, const char *const *opts, unsigned int attrs,
                  const char *where, struct hutch_err *err)
{
	_cleanup_close_ int fsfd = -EBADF;
	int mntfd, r;

	fsfd = sys_fsopen(fstype, FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return hutch_err_set_errno(err, -errno, "mount %s on '%s': fsopen", fstype, where);
	/* The source mountinfo shows ("none" without one), as mount(8) names
	 * it: runtime-spec checkers compare it with a bundle's "source". */
	if (!has_source(opts))
		(void)sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "source", fstype, 0);
	for (; opts && *opts; opts++) {
		r = fs_set_option(fsfd, fstype, *opts, where, err);
		if (r < 0)
			return r;
	}
	if (sys_fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		hutch_err_set_errno(err, -errno, "mount %s on '%s'", fstype, where);
		return fs_fail(fsfd, err);
	}
	mntfd = sys_fsmount(fsfd, FSMOUNT_CLOEXEC, attrs);
	if (mntfd < 0) {
		hutch_err_set_errno(err, -errno, "mount %s on '%s'", fstype, where);
		return fs_fail(fsfd, err);
	}
	return mntfd;
}

int rootfs_clone_new(int dirfd, const char *path, unsigned int attrs, const char *where,
                     struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	unsigned int flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
	                     AT_SYMLINK_NOFOLLOW | (*path ? 0 : AT_EMPTY_PATH);
	struct mount_attr attr = { .attr_set = attrs };

	/*
	 * Always recursive: it takes the host's submounts along, and a
	 * non-recursive clone of a mount with locked children (every host
	 * mount, seen from a user namespace) is refused anyway.
	 */
	fd = sys_open_tree(dirfd, path, flags);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "bind '%s': open_tree", where);
	if (attrs &&
	    sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "bind '%s': set mount attributes", where);
	return TAKE_FD(fd);
}

int rootfs_open_target(int dirfd, const char *path, bool missing_ok, const char *where,
                       struct hutch_err *err)
{
	/*
	 * No O_NOFOLLOW: with RESOLVE_NO_SYMLINKS a symlink in any position,
	 * the last one included, fails with ELOOP instead of handing back an
	 * O_PATH fd of the link itself to mount over.
	 */
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = HUTCH_RESOLVE_HOST };
	int fd;

	fd = sys_openat2(dirfd, path, &how, sizeof(how));
	if (fd < 0) {
		if (errno == ENOENT && missing_ok)
			return -ENOENT;
		return hutch_err_set_errno(err, -errno, "open mount point '%s'", where);
	}
	return fd;
}

int rootfs_attach_fd(int mntfd, int target, const char *what, const char *where,
                     struct hutch_err *err)
{
	if (sys_move_mount(mntfd, "", target, "",
	                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return hutch_err_set_errno(err, -errno, "mount %s on '%s'", what, where);
	return 0;
}

int rootfs_attach(int mntfd, int dirfd, const char *path, const char *what, const char *where,
                  struct hutch_err *err)
{
	_cleanup_close_ int target = -EBADF;

	target = rootfs_open_target(dirfd, path, false, where, err);
	if (target < 0)
		return target;
	return rootfs_attach_fd(mntfd, target, what, where, err);
}

/* One component of a path, neither "." nor "..": nothing to resolve but
 * the name itself in its directory. */
static bool is_one_name(const char *path)
{
	return *path && !strchr(path, '/') && strcmp(path, ".") && strcmp(path, "..");
}

int rootfs_mount_fs(int dirfd, const char *path, const char *fstype, const char *const *opts,
                    unsigned int attrs, const char *where, struct hutch_err *err)
{
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	mntfd = rootfs_fs_new(fstype, opts, attrs, where, err);
	if (mntfd < 0)
		return mntfd;
	/*
	 * One name: attached by it, without openat2() and close() (issue 31:
	 * /proc, /dev, its pts and shm, each v1 cgroup view). move_mount()
	 * without MOVE_MOUNT_T_SYMLINKS follows no symlink in the name (there
	 * is no other component), and a file system's root is a directory,
	 * which the kernel moves onto nothing but a directory (onto a link,
	 * even one to a directory: EINVAL, on 6.18; openat2() failed ELOOP):
	 * the same refusals.
	 */
	if (is_one_name(path)) {
		if (sys_move_mount(mntfd, "", dirfd, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return hutch_err_set_errno(err, -errno, "mount %s on '%s'", fstype, where);
		return TAKE_FD(mntfd);
	}
	r = rootfs_attach(mntfd, dirfd, path, fstype, where, err);
	if (r < 0)
		return r;
	return TAKE_FD(mntfd);
}

int rootfs_bind(int src_dirfd, const char *src, int dst_dirfd, const char *dst, unsigned int attrs,
                const char *where, struct hutch_err *err)
{
	_cleanup_close_ int mntfd = -EBADF;

	mntfd = rootfs_clone_new(src_dirfd, src, attrs, where, err);
	if (mntfd < 0)
		return mntfd;
	return rootfs_attach(mntfd, dst_dirfd, dst, "bind", where, err);
}

int rootfs_bind_new(int src_dirfd, const char *src, int dst_dirfd, const char *name,
                    unsigned int attrs, const char *where, struct hutch_err *err)
{
	_cleanup_close_ int mntfd = -EBADF;

	if (!is_one_name(name))
		return rootfs_bind(src_dirfd, src, dst_dirfd, name, attrs, where, err);
	mntfd = rootfs_clone_new(src_dirfd, src, attrs, where, err);
	if (mntfd < 0)
		return mntfd;
	if (sys_move_mount(mntfd, "", dst_dirfd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return hutch_err_set_errno(err, -errno, "mount bind on '%s'", where);
	return 0;
}

int rootfs_mkdir(int dirfd, const char *path, mode_t mode, const char *where, struct hutch_err *err)
{
	if (mkdirat(dirfd, path, mode) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "create directory '%s'", where);
	return 0;
}

int rootfs_mkfile(int dirfd, const char *path, const char *where, struct hutch_err *err)
{
	/* mknod() of a regular file needs no privilege and no fd. */
	if (mknodat(dirfd, path, S_IFREG | 0644, 0) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "create mount point '%s'", where);
	return 0;
}

int rootfs_copy_symlink(int src_dirfd, int dst_dirfd, const char *name, const char *where,
                        struct hutch_err *err)
{
	char target[PATH_MAX];
	ssize_t n;

	n = readlinkat(src_dirfd, name, target, sizeof(target));
	if (n < 0)
		return hutch_err_set_errno(err, -errno, "read host symlink '%s'", where);
	if ((size_t)n >= sizeof(target))
		return hutch_err_set(err, -ENAMETOOLONG, "read host symlink '%s': too long", where);
	target[n] = '\0';
	if (symlinkat(target, dst_dirfd, name) < 0)
		return hutch_err_set_errno(err, -errno, "create symlink '%s' -> '%s'", where,
		                           target);
	return 0;
}

int rootfs_mask_dir(struct rootfs_ctx *ctx, int target, const char *where, struct hutch_err *err)
{
	static const char *const opts[] = { "size=4k", "mode=0555", NULL };
	const unsigned int attrs = ROOTFS_ATTR_HOST_RO | MOUNT_ATTR_NOEXEC;
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	if (ctx->empty >= 0)
		mntfd = rootfs_clone_new(ctx->empty, "", 0, where, err);
	else
		mntfd = rootfs_fs_new("tmpfs", opts, attrs, where, err);
	if (mntfd < 0)
		return mntfd;
	r = rootfs_attach_fd(mntfd, target, "mask", where, err);
	if (r < 0)
		return r;
	if (ctx->empty < 0)
		ctx->empty = TAKE_FD(mntfd);
	return 0;
}
