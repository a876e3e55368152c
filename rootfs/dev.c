/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's minimal /dev: a small tmpfs holding binds of six harmless
 * host device nodes (mknod() of a device is refused in a user namespace),
 * a private devpts instance so the sandbox's ptys are its own, a /dev/shm
 * tmpfs for POSIX shared memory, and the usual symlinks into /proc/self/fd.
 * Nothing else of the host's /dev (disks, consoles, kmsg, fuse, loop
 * devices) exists inside.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "rootfs-internal.h"

const char *const rootfs_dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };

static const struct {
	const char *name;
	const char *target;
} dev_links[] = {
	{ "ptmx", "pts/ptmx" },          { "fd", "/proc/self/fd" },
	{ "stdin", "/proc/self/fd/0" },  { "stdout", "/proc/self/fd/1" },
	{ "stderr", "/proc/self/fd/2" },
};

static int bind_nodes(struct rootfs_ctx *ctx, int dev, struct hutch_err *err)
{
	_cleanup_close_ int host_dev = -EBADF;
	char where[32];
	int r;

	host_dev = openat(ctx->host_root, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (host_dev < 0)
		return hutch_err_set_errno(err, -errno, "open host '/dev'");
	for (const char *const *n = rootfs_dev_nodes; *n; n++) {
		snprintf(where, sizeof(where), "/dev/%s", *n);
		r = rootfs_mkfile(dev, *n, where, err);
		if (r < 0)
			return r;
		/* Device nodes need a mount without nodev; they stay nosuid, noexec. */
		r = rootfs_bind_new(host_dev, *n, dev, *n, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
		                    where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int mount_pts_shm(struct rootfs_ctx *ctx, int dev, struct hutch_err *err)
{
	/* gid=5 is the tty group of our /etc/group; ptmx is usable by everyone. */
	static const char *const pts_opts[] = { "newinstance", "ptmxmode=0666", "mode=0620",
		                                "gid=5", NULL };
	char size[40];
	const char *shm_opts[] = { "source=shm", size, "mode=1777", NULL };
	_cleanup_close_ int pts = -EBADF, shm = -EBADF;
	int r;

	snprintf(size, sizeof(size), "size=%" PRIu64, ctx->cfg->disk_bytes);
	r = rootfs_mkdir(dev, "pts", 0755, "/dev/pts", err);
	if (r < 0)
		return r;
	pts = rootfs_mount_fs(dev, "pts", "devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
	                      "/dev/pts", err);
	if (pts < 0)
		return pts;
	r = rootfs_mkdir(dev, "shm", 01777, "/dev/shm", err);
	if (r < 0)
		return r;
	shm = rootfs_mount_fs(dev, "shm", "tmpfs", shm_opts,
	                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, "/dev/shm",
	                      err);
	return shm < 0 ? shm : 0;
}

int rootfs_setup_dev(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	/* Only mount points and symlinks live here: a few KiB is plenty. */
	static const char *const dev_opts[] = { "size=64k", "mode=0755", NULL };
	_cleanup_close_ int dev = -EBADF;
	int r;

	r = rootfs_mkdir(ctx->root, "dev", 0755, "/dev", err);
	if (r < 0)
		return r;
	dev = rootfs_mount_fs(ctx->root, "dev", "tmpfs", dev_opts,
	                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, "/dev", err);
	if (dev < 0)
		return dev;
	r = bind_nodes(ctx, dev, err);
	if (r < 0)
		return r;
	r = mount_pts_shm(ctx, dev, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(dev_links); i++)
		if (symlinkat(dev_links[i].target, dev, dev_links[i].name) < 0)
			return hutch_err_set_errno(err, -errno, "create symlink '/dev/%s'",
			                           dev_links[i].name);
	return 0;
}
