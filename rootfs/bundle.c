/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An OCI bundle's root (hutch oci, rootfs.h's struct hutch_rootfs_bundle),
 * child side of clone(), in place of the host-derived root's steps:
 *
 *   1. the bundle's rootfs, a detached mount the supervisor made before
 *      clone() and idmapped onto the sandbox's ids, is attached over our
 *      own "/" (as the host-derived root's tmpfs is);
 *   2. hutch's own /proc (masked) and /dev (six nodes, private devpts,
 *      /dev/shm): proc.c and dev.c, the same code as every sandbox;
 *   3. the bundle's mounts in their order: binds (detached mounts the
 *      supervisor made, by fd) and tmpfs; their mount points are made in
 *      the bundle's tree, resolved inside it (RESOLVE_IN_ROOT: an image's
 *      /var/run -> /run symlink is followed within the root, never out);
 *   4. pivot_root(), "/" read-only if root.readonly says so.
 *
 * No host path is resolved here: every host tree arrives as an fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "rootfs-internal.h"

#define BUNDLE_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int open_in_root(int root, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = BUNDLE_RESOLVE };
	int fd = (int)sys_openat2(root, path, &how, sizeof(how));

	/* Our own mounts (/proc, /dev) are other file systems: cross them. */
	if (fd < 0 && errno == EXDEV) {
		how.resolve &= ~(uint64_t)RESOLVE_NO_XDEV;
		fd = (int)sys_openat2(root, path, &how, sizeof(how));
	}
	return fd < 0 ? -errno : fd;
}

/* Open dest (absolute, inside the root) as O_PATH, making the missing
 * directories on the way and the last component as a directory or an
 * empty file. */
static int make_target(int root, const char *dest, bool is_dir, struct hutch_err *err)
{
	char path[PATH_MAX];
	size_t len = strlen(dest);
	int fd;

	if (len >= sizeof(path) || dest[0] != '/')
		return hutch_err_set(err, -EINVAL, "bad mount destination '%s'", dest);
	memcpy(path, dest, len + 1);
	for (char *p = path + 1;; p++) {
		bool last = *p == '\0';
		char saved = *p;
		_cleanup_close_ int parent = -EBADF;
		char *slash;

		if (*p != '/' && !last)
			continue;
		*p = '\0';
		fd = open_in_root(root, path, O_PATH);
		if (fd >= 0) {
			if (last)
				return fd;
			close(fd);
			*p = saved;
			continue;
		}
		if (fd != -ENOENT)
			return hutch_err_set_errno(err, fd, "open mount point '%s'", path);
		slash = strrchr(path, '/');
		*slash = '\0';
		parent = open_in_root(root, slash == path ? "/" : path, O_PATH | O_DIRECTORY);
		*slash = '/';
		if (parent < 0)
			return hutch_err_set_errno(err, parent, "open mount point's parent of '%s'",
			                           path);
		if (last && !is_dir)
			fd = rootfs_mkfile(parent, slash + 1, path, err);
		else
			fd = rootfs_mkdir(parent, slash + 1, 0755, path, err);
		if (fd < 0)
			return fd;
		fd = open_in_root(root, path, O_PATH);
		if (fd < 0)
			return hutch_err_set_errno(err, fd, "open mount point '%s'", path);
		if (last)
			return fd;
		close(fd);
		*p = saved;
	}
}

/* The propagation asked of a mount, on it once attached (fd). A new
 * mount is private, and stays so when asked to be a slave (no master). */
static int set_propagation(const struct hutch_rootfs_mount *m, int fd, struct hutch_err *err)
{
	struct mount_attr attr = { .propagation = m->propagation };
	unsigned int flags = AT_EMPTY_PATH | (m->propagation_recursive ? AT_RECURSIVE : 0);

	if (m->propagation && sys_mount_setattr(fd, "", flags, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "set the propagation of '%s'", m->dest);
	return 0;
}

/*
 * A bind: the supervisor's detached mount, attached, then a clone of it
 * made here on top, so that what is seen at the destination is as new as
 * the mounts made before it (mountinfo lists mounts by age, and the
 * bundle's order is what checkers see there; the detached mount, made
 * before clone(), is older than all of init's, and this kernel refuses to
 * clone a mount of another namespace before it is attached). Where the
 * clone is refused (an unbindable mount), the detached mount alone.
 */
static int attach_bind(const struct hutch_rootfs_mount *m, int target, struct hutch_err *err)
{
	_cleanup_close_ int clone = -EBADF;
	int r = rootfs_attach_fd(m->fd, target, "bind", m->dest, err);

	if (r < 0)
		return r;
	clone = sys_open_tree(m->fd, "",
	                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (clone < 0)
		return set_propagation(m, m->fd, err);
	r = rootfs_attach_fd(clone, target, "bind", m->dest, err);
	return r < 0 ? r : set_propagation(m, clone, err);
}

static int mount_one(struct rootfs_ctx *ctx, const struct hutch_rootfs_mount *m,
                     struct hutch_err *err)
{
	_cleanup_close_ int target = -EBADF, mntfd = -EBADF;
	int r;

	target =
	        make_target(ctx->root, m->dest, m->kind == HUTCH_ROOTFS_MOUNT_FS || m->is_dir, err);
	if (target < 0)
		return target;
	if (m->kind == HUTCH_ROOTFS_MOUNT_BIND)
		return attach_bind(m, target, err);
	mntfd = rootfs_fs_new(m->fstype, m->opts, m->attrs, m->dest, err);
	if (mntfd < 0)
		return mntfd;
	r = rootfs_attach_fd(mntfd, target, m->fstype, m->dest, err);
	return r < 0 ? r : set_propagation(m, mntfd, err);
}

/* linux.maskedPaths and readonlyPaths: what does not exist is skipped. */
static int restrict_path(struct rootfs_ctx *ctx, const char *path, bool mask, struct hutch_err *err)
{
	const unsigned int ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
	_cleanup_close_ int target = -EBADF, src = -EBADF;
	struct stat st;

	target = open_in_root(ctx->root, path, O_PATH);
	if (target == -ENOENT)
		return 0;
	if (target < 0)
		return hutch_err_set_errno(err, target, "open '%s'", path);
	if (fstat(target, &st) < 0)
		return hutch_err_set_errno(err, -errno, "stat '%s'", path);
	if (mask && S_ISDIR(st.st_mode))
		return rootfs_mask_dir(ctx, target, path, err);
	if (mask) /* nodev would make reads EACCES, not the empty file expected */
		src = rootfs_clone_new(ctx->host_root, "dev/null", ro | MOUNT_ATTR_NOEXEC, path,
		                       err);
	else
		src = rootfs_clone_new(target, "", ro, path, err);
	if (src < 0)
		return src;
	return rootfs_attach_fd(src, target, mask ? "mask" : "bind", path, err);
}

/* Under a sysfs, whatever the bundle masks: the firmware's tables (ACPI,
 * DMI, EFI variables) and the power meters (powercap's energy counters,
 * a side channel), as runc's default maskedPaths do. */
static int mask_sysfs(struct rootfs_ctx *ctx, const struct hutch_rootfs_mount *m,
                      struct hutch_err *err)
{
	static const char *const under[] = { "firmware", "devices/virtual/powercap" };

	for (size_t i = 0; i < ELEMENTSOF(under); i++) {
		char path[PATH_MAX];
		int r;

		if (snprintf(path, sizeof(path), "%s/%s", m->dest, under[i]) >= (int)sizeof(path))
			return hutch_err_set(err, -ENAMETOOLONG, "mask under '%s'", m->dest);
		r = restrict_path(ctx, path, true, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int rootfs_setup_bundle(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	const struct hutch_rootfs_bundle *b = ctx->cfg->bundle;
	const unsigned int flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
	int r;

	if (sys_move_mount(b->root_fd, "", ctx->host_root, "", flags) < 0)
		return hutch_err_set_errno(err, -errno, "mount the bundle's rootfs on '/'");
	ctx->root = fcntl(b->root_fd, F_DUPFD_CLOEXEC, 3);
	if (ctx->root < 0)
		return hutch_err_set_errno(err, -errno, "the bundle's rootfs");
	r = rootfs_setup_proc(ctx, err);
	if (r >= 0)
		r = rootfs_setup_dev(ctx, err);
	for (size_t i = 0; r >= 0 && i < b->nmounts; i++)
		r = mount_one(ctx, &b->mounts[i], err);
	for (size_t i = 0; r >= 0 && i < b->nmounts; i++)
		if (b->mounts[i].kind == HUTCH_ROOTFS_MOUNT_FS &&
		    !strcmp(b->mounts[i].fstype, "sysfs"))
			r = mask_sysfs(ctx, &b->mounts[i], err);
	for (size_t i = 0; r >= 0 && b->masked && b->masked[i]; i++)
		r = restrict_path(ctx, b->masked[i], true, err);
	for (size_t i = 0; r >= 0 && b->readonly_paths && b->readonly_paths[i]; i++)
		r = restrict_path(ctx, b->readonly_paths[i], false, err);
	return r;
}
