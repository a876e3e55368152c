/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Root assembly, child side of clone(): the order of the steps, the host
 * system directories, the writable tmpfs mounts and the switch into the new
 * root. The steps:
 *
 *   1. make every mount of our new mount namespace private;
 *   2. create the root tmpfs and attach it (over cfg->stage_fd, or over
 *      our own "/" — see attach_root());
 *   3. share /usr, /bin, /lib*, /sbin read-only (symlinks stay symlinks),
 *      with the host-only /usr/local hidden;
 *   4. /etc, /proc, /dev (etc.c, proc.c, dev.c);
 *   5. tmpfs /workspace, /home/appuser, /tmp (or the disk's directories:
 *      runtime/disk.h), then the volumes (volumes.c);
 *   6. pivot_root() into it, detach the old root, make "/" read-only.
 *
 * The host tree is only ever reached through one O_PATH fd of our own "/",
 * opened before anything is stacked on it, and closed before returning so
 * no fd of the host root survives into init's later life.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "rootfs-internal.h"

const char *const rootfs_system_dirs[] = { "usr",   "bin",    "lib",  "lib32",
	                                   "lib64", "libx32", "sbin", NULL };
const char *const rootfs_host_only_dirs[] = { "usr/local", NULL };

int rootfs_make_private(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	struct mount_attr attr = { .propagation = MS_PRIVATE };

	/* Nothing we mount may propagate out, nothing from the host may come in. */
	if (sys_mount_setattr(ctx->host_root, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
	                      sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "make mounts private");
	return 0;
}

/* A bundle's linux.rootfsPropagation of shared or unbindable, once "/" is
 * the bundle's root (pivot_root() refuses a shared one). */
static int root_propagation(unsigned long prop, struct hutch_err *err)
{
	struct mount_attr attr = { .propagation = prop };

	if (prop && sys_mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "linux.rootfsPropagation: set it on '/'");
	return 0;
}

/*
 * An fd the supervisor opened before clone() names a mount of the
 * supervisor's mount namespace, not of our copy, and move_mount() refuses
 * it with EINVAL. The host path may not be traversable from here either, so
 * it cannot be re-resolved. In that case the root tmpfs is stacked on our
 * own "/" instead: this mount namespace is ours alone, pivot_root() works
 * the same, and no host directory is needed at all.
 */
static int attach_root(struct rootfs_ctx *ctx, int mntfd, struct hutch_err *err)
{
	const unsigned int flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;

	if (ctx->cfg->stage_fd >= 0) {
		if (sys_move_mount(mntfd, "", ctx->cfg->stage_fd, "", flags) == 0)
			return 0;
		if (errno != EINVAL)
			return hutch_err_set_errno(err, -errno,
			                           "mount root tmpfs on stage directory");
		hutch_log(HUTCH_LOG_DEBUG, "stage directory is not in our mount namespace, "
		                           "stacking the root on '/'");
	}
	if (sys_move_mount(mntfd, "", ctx->host_root, "", flags) < 0)
		return hutch_err_set_errno(err, -errno, "mount root tmpfs on '/'");
	return 0;
}

static int create_root(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	static const char *const opts[] = { "size=16m", "mode=0755", NULL };
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	mntfd = rootfs_fs_new("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/", err);
	if (mntfd < 0)
		return mntfd;
	r = attach_root(ctx, mntfd, err);
	if (r < 0)
		return r;
	ctx->root = TAKE_FD(mntfd);
	return 0;
}

static int share_system_dirs(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	char where[32];
	struct stat st;
	int r;

	for (const char *const *n = rootfs_system_dirs; *n; n++) {
		snprintf(where, sizeof(where), "/%s", *n);
		if (fstatat(ctx->host_root, *n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return hutch_err_set_errno(err, -errno, "stat host '%s'", where);
		}
		if (S_ISLNK(st.st_mode)) {
			/* Merged /usr: "/bin -> usr/bin" is copied, not bound. */
			r = rootfs_copy_symlink(ctx->host_root, ctx->root, *n, where, err);
		} else if (S_ISDIR(st.st_mode)) {
			r = rootfs_mkdir(ctx->root, *n, 0755, where, err);
			if (r >= 0)
				r = rootfs_bind_new(ctx->host_root, *n, ctx->root, *n,
				                    ROOTFS_ATTR_HOST_RO, where, err);
		} else {
			continue;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * What the host's administrator put beside the distribution (cloud CLIs,
 * database servers, in-house tools, a second Python in /usr/local) differs
 * from host to host and is no part of a reproducible root: an empty
 * read-only tmpfs covers it (issue 14, image host).
 */
static int hide_host_only(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	char where[32];

	for (const char *const *p = rootfs_host_only_dirs; *p; p++) {
		_cleanup_close_ int target = -EBADF;
		int r;

		snprintf(where, sizeof(where), "/%s", *p);
		target = rootfs_open_target(ctx->root, *p, true, where, err);
		if (target == -ENOENT)
			continue;
		if (target < 0)
			return target;
		r = rootfs_mask_dir(ctx, target, where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

const char *const hutch_rootfs_write_paths[HUTCH_ROOTFS_WRITE_FDS] = { "", "workspace",
	                                                               "home/appuser", "tmp" };

static int mount_writable(struct rootfs_ctx *ctx, int which, const char *mode, bool app_owned,
                          struct hutch_err *err)
{
	const char *path = hutch_rootfs_write_paths[which];
	const struct hutch_rootfs_config *cfg = ctx->cfg;
	char size[40], uid[24], gid[24], where[32];
	/* Root-owned mounts stop the list before uid=/gid=. */
	const char *opts[] = { size, mode, app_owned ? uid : NULL, gid, NULL };
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	snprintf(size, sizeof(size), "size=%" PRIu64, cfg->disk_bytes);
	snprintf(uid, sizeof(uid), "uid=%u", (unsigned int)cfg->app_uid);
	snprintf(gid, sizeof(gid), "gid=%u", (unsigned int)cfg->app_gid);
	snprintf(where, sizeof(where), "/%s", path);
	r = rootfs_mkdir(ctx->root, path, 0755, where, err);
	if (r < 0)
		return r;
	/* A snapshot's image has them in its layers: the overlay's upper
	 * directory takes the writes (docs/snapshots.md). */
	if (cfg->writable_in_layer)
		return 0;
	if (cfg->disk_fds) {
		r = rootfs_attach(cfg->disk_fds[which], ctx->root, path, "the disk", where, err);
		mntfd = r < 0 ? r : fcntl(cfg->disk_fds[which], F_DUPFD_CLOEXEC, 3);
	} else {
		mntfd = rootfs_mount_fs(ctx->root, path, "tmpfs", opts,
		                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, where, err);
	}
	if (mntfd >= 0 && cfg->write_fds &&
	    (cfg->write_fds[which] = openat(mntfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "open '%s'", where);
	return mntfd < 0 ? mntfd : 0;
}

static int setup_writable(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	int r;

	r = rootfs_mkdir(ctx->root, "home", 0755, "/home", err);
	if (r < 0)
		return r;
	if ((r = mount_writable(ctx, HUTCH_ROOTFS_WRITE_WORKSPACE, "mode=0755", true, err)) < 0 ||
	    (r = mount_writable(ctx, HUTCH_ROOTFS_WRITE_HOME, "mode=0755", true, err)) < 0 ||
	    (r = mount_writable(ctx, HUTCH_ROOTFS_WRITE_TMP, "mode=1777", false, err)) < 0)
		return r;
	return 0;
}

/*
 * One v1 hierarchy at /sys/fs/cgroup/<name>: "cpu,cpuacct" is mounted with
 * the flags cpu and cpuacct. A user namespace may mount a v1 hierarchy only
 * with exactly the controllers it already has on the host, which its name
 * under the host's /sys/fs/cgroup lists (systemd's and docker's layout).
 */
static int mount_cgroup1(struct rootfs_ctx *ctx, int cgdir, const char *name, struct hutch_err *err)
{
	const unsigned int attrs = ROOTFS_ATTR_HOST_RO | MOUNT_ATTR_NOEXEC;
	char ctrls[64], where[96], *save = NULL;
	const char *opts[8] = { NULL };
	size_t n = 0;
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	snprintf(where, sizeof(where), "/sys/fs/cgroup/%s", name);
	if (strlen(name) >= sizeof(ctrls) || strchr(name, '/') || name[0] == '.')
		return hutch_err_set(err, -EINVAL, "cgroup v1 hierarchy name '%s'", name);
	snprintf(ctrls, sizeof(ctrls), "%s", name);
	for (char *c = strtok_r(ctrls, ",", &save); c && n < ELEMENTSOF(opts) - 1;
	     c = strtok_r(NULL, ",", &save))
		opts[n++] = c;
	r = rootfs_mkdir(cgdir, name, 0555, where, err);
	if (r < 0)
		return r;
	mntfd = rootfs_mount_fs(cgdir, name, "cgroup", opts, attrs, where, err);
	return mntfd < 0 ? mntfd : 0;
}

/* v1: a read-only tmpfs with one directory per hierarchy the sandbox is in;
 * co-mounted ones ("cpu,cpuacct") also by each name, as symlinks. */
static int setup_cgroup1(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	static const char *const opts[] = { "size=4k", "mode=0755", NULL };
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	mntfd = rootfs_mount_fs(ctx->root, "sys/fs/cgroup", "tmpfs", opts,
	                        ROOTFS_ATTR_HOST_RO & ~MOUNT_ATTR_RDONLY, "/sys/fs/cgroup", err);
	if (mntfd < 0)
		return mntfd;
	for (const char *const *h = ctx->cfg->cgroup1; *h; h++) {
		char one[64], *save = NULL;

		r = mount_cgroup1(ctx, mntfd, *h, err);
		if (r < 0)
			return r;
		if (!strchr(*h, ','))
			continue;
		snprintf(one, sizeof(one), "%s", *h);
		for (char *c = strtok_r(one, ",", &save); c; c = strtok_r(NULL, ",", &save))
			if (symlinkat(*h, mntfd, c) < 0 && errno != EEXIST)
				return hutch_err_set_errno(err, -errno, "symlink /sys/fs/cgroup/%s",
				                           c);
	}
	if (sys_mount_setattr(mntfd, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return hutch_err_set_errno(err, -errno, "make /sys/fs/cgroup read-only");
	return 0;
}

/*
 * /sys/fs/cgroup: the sandbox's own cgroup, read-only, as docker shows it.
 * The mount's root is the root of init's cgroup namespace (the sandbox's
 * cgroup), so nothing above it is visible; /sys itself is a directory of
 * the read-only root tmpfs, with no sysfs behind it. v2: the unified tree;
 * v1 and hybrid: each hierarchy the sandbox has a cgroup in.
 */
static int setup_cgroupfs(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	static const char *const opts[] = { NULL };
	const unsigned int attrs = ROOTFS_ATTR_HOST_RO | MOUNT_ATTR_NOEXEC;
	_cleanup_close_ int mntfd = -EBADF;
	int r;

	if (!ctx->cfg->cgroup2 && !(ctx->cfg->cgroup1 && ctx->cfg->cgroup1[0]))
		return 0;
	if ((r = rootfs_mkdir(ctx->root, "sys", 0555, "/sys", err)) < 0 ||
	    (r = rootfs_mkdir(ctx->root, "sys/fs", 0555, "/sys/fs", err)) < 0 ||
	    (r = rootfs_mkdir(ctx->root, "sys/fs/cgroup", 0555, "/sys/fs/cgroup", err)) < 0)
		return r;
	if (!ctx->cfg->cgroup2)
		return setup_cgroup1(ctx, err);
	mntfd = rootfs_mount_fs(ctx->root, "sys/fs/cgroup", "cgroup2", opts, attrs,
	                        "/sys/fs/cgroup", err);
	return mntfd < 0 ? mntfd : 0;
}

int rootfs_enter_root(struct rootfs_ctx *ctx, bool readonly, struct hutch_err *err)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };

	/*
	 * pivot_root(2) has no fd form: "." after fchdir() to the root mount
	 * names the new root without any path. pivot_root(".", ".") stacks
	 * the old root on top of the new one; unmounting "." then detaches
	 * the old root and everything under it (the host's whole tree).
	 */
	if (fchdir(ctx->root) < 0)
		return hutch_err_set_errno(err, -errno, "enter the new root");
	if (sys_pivot_root(".", ".") < 0)
		return hutch_err_set_errno(err, -errno, "pivot_root into the new root");
	if (umount2(".", MNT_DETACH) < 0)
		return hutch_err_set_errno(err, -errno, "detach the old root");
	if (chdir("/") < 0)
		return hutch_err_set_errno(err, -errno, "change directory to '/'");
	/* Only now: every mount point and /etc file is in place. Submounts
	 * keep their flags. An image's root stays writable: its writes go to
	 * the sandbox's own layer. */
	if (readonly && sys_mount_setattr(ctx->root, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return hutch_err_set_errno(err, -errno, "make '/' read-only");
	return 0;
}

/* Refuse a bad configuration before the first mount. */
static int check_config(const struct hutch_rootfs_config *cfg, struct hutch_err *err)
{
	if (!rootfs_hostname_is_valid(cfg->hostname))
		return hutch_err_set(err, -EINVAL, "invalid hostname '%s'",
		                     cfg->hostname ? cfg->hostname : "");
	/* tmpfs reads size=0 as "no limit": refuse it rather than lift the cap. */
	if (cfg->disk_bytes == 0)
		return hutch_err_set(err, -EINVAL, "disk size of the writable mounts is 0");
	if (!rootfs_app_id_is_valid(cfg->app_uid) || !rootfs_app_id_is_valid(cfg->app_gid))
		return hutch_err_set(err, -EINVAL, "invalid app uid %u / gid %u",
		                     (unsigned int)cfg->app_uid, (unsigned int)cfg->app_gid);
	return 0;
}

/* --image: the overlay of the image's layers instead of the host's dirs. */
static int setup_image(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	int r;

	if ((r = rootfs_make_private(ctx, err)) < 0 || (r = rootfs_image_root(ctx, err)) < 0 ||
	    (r = rootfs_image_etc(ctx, err)) < 0 || (r = rootfs_setup_proc(ctx, err)) < 0 ||
	    (r = rootfs_setup_dev(ctx, err)) < 0 || (r = setup_writable(ctx, err)) < 0 ||
	    (r = setup_cgroupfs(ctx, err)) < 0 || (r = rootfs_setup_volumes(ctx, err)) < 0 ||
	    (r = rootfs_enter_root(ctx, false, err)) < 0)
		return r;
	return rootfs_image_check(ctx->cfg, err);
}

static int setup(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	int r;

	r = check_config(ctx->cfg, err);
	if (r < 0)
		return r;

	ctx->host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ctx->host_root < 0)
		return hutch_err_set_errno(err, -errno, "open host '/'");
	if (ctx->cfg->bundle) {
		r = rootfs_make_private(ctx, err);
		if (r >= 0)
			r = rootfs_setup_bundle(ctx, err);
		if (r >= 0)
			r = rootfs_enter_root(ctx, ctx->cfg->bundle->readonly, err);
		return r < 0 ? r : root_propagation(ctx->cfg->bundle->root_propagation, err);
	}
	if (ctx->cfg->n_layers)
		return setup_image(ctx, err);
	if ((r = rootfs_make_private(ctx, err)) < 0 || (r = create_root(ctx, err)) < 0 ||
	    (r = share_system_dirs(ctx, err)) < 0 || (r = hide_host_only(ctx, err)) < 0 ||
	    (r = rootfs_setup_etc(ctx, err)) < 0 || (r = rootfs_setup_proc(ctx, err)) < 0 ||
	    (r = rootfs_setup_dev(ctx, err)) < 0 || (r = setup_writable(ctx, err)) < 0 ||
	    (r = setup_cgroupfs(ctx, err)) < 0 || (r = rootfs_setup_volumes(ctx, err)) < 0)
		return r;
	return rootfs_enter_root(ctx, true, err);
}

int hutch_rootfs_setup_child(const struct hutch_rootfs_config *cfg, struct hutch_err *err)
{
	struct rootfs_ctx ctx = {
		.cfg = cfg, .host_root = -EBADF, .root = -EBADF, .empty = -EBADF
	};
	struct timespec t0, t1;
	mode_t old_umask;
	int r;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Mount point and /etc modes must not depend on the supervisor's umask. */
	old_umask = umask(022);
	r = setup(&ctx, err);
	(void)umask(old_umask);
	closep(&ctx.host_root);
	closep(&ctx.root);
	closep(&ctx.empty);
	if (r < 0)
		return r;
	(void)clock_gettime(CLOCK_MONOTONIC, &t1);
	hutch_log(HUTCH_LOG_DEBUG, "rootfs ready in %.2f ms",
	          (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	return 0;
}
