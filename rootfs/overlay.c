/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The root of a sandbox made from an image (--image), child side: the
 * image's layers, which the supervisor cloned and idmapped (store ids onto
 * the sandbox's), stacked with overlayfs under a writable layer of the
 * sandbox's own, then the image's /etc completed and the image checked.
 *
 *   1. a tmpfs of the instance type's disk size is stacked on our "/" (like
 *      the host-derived root's tmpfs): it holds disk/upper/, disk/work/
 *      and one mount point per layer (with the sandbox's disk,
 *      runtime/disk.h, the tmpfs is small and disk/ is the disk's);
 *   2. each layer's detached mount (rootless: cloned here first, see
 *      clone_layer_here()) is attached there: overlayfs takes a
 *      private clone of every layer, which the kernel allows only from our
 *      own mount namespace (a detached mount belongs to the supervisor's
 *      user namespace: EPERM);
 *   3. fsopen("overlay") with the layers as lowerdir+ (top first, by fd;
 *      before Linux 6.13 by path, see make_overlay_by_path()),
 *      upperdir, workdir and userxattr (whiteouts are 0/0 devices, opaque
 *      directories user.overlay.opaque, as image/unpack.c wrote them),
 *      mounted nosuid, nodev on top of that tmpfs: the new root.
 *
 * Everything under the overlay is the image's and treated as hostile until
 * pivot_root: every path is opened beneath the overlay's root without
 * following symlinks, and files of /etc are replaced, never written
 * through (an image can make /etc/passwd a FIFO or a symlink to the host).
 * After pivot_root the tmpfs and the layer mounts are gone from the tree
 * with the old root; the overlay keeps its private clones.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"
#include "util.h"

#define ETC_FILE_MAX (1 << 20) /* an image's passwd or group */

/* The tmpfs of the writable layer and the layers' mount points. */
static int make_rw(struct rootfs_ctx *ctx, int *ret_rw, struct hutch_err *err)
{
	char size[40];
	const char *opts[] = { size, "mode=0755", NULL };
	const unsigned int flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
	_cleanup_close_ int rw = -EBADF;
	int r;

	/* With a disk, the tmpfs holds only the mount points and the disk's
	 * upper/ and work/ are attached on disk/. */
	snprintf(size, sizeof(size), "size=%" PRIu64,
	         ctx->cfg->disk_fds ? (uint64_t)1 << 20 : ctx->cfg->disk_bytes);
	rw = rootfs_fs_new("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/ (upper)", err);
	if (rw < 0)
		return rw;
	if (sys_move_mount(rw, "", ctx->host_root, "", flags) < 0)
		return hutch_err_set_errno(err, -errno, "mount the writable layer's tmpfs");
	if (ctx->cfg->disk_fds) {
		if ((r = rootfs_mkdir(rw, "disk", 0700, "/ (disk)", err)) < 0 ||
		    (r = rootfs_attach(ctx->cfg->disk_fds[HUTCH_ROOTFS_WRITE_UPPER], rw, "disk",
		                       "the disk", "/ (upper)", err)) < 0)
			return r;
	} else if ((r = rootfs_mkdir(rw, "disk", 0700, "/ (disk)", err)) < 0 ||
	           (r = rootfs_mkdir(rw, "disk/upper", 0755, "/ (upper)", err)) < 0 ||
	           (r = rootfs_mkdir(rw, "disk/work", 0700, "/ (work)", err)) < 0) {
		return r;
	}
	if ((r = rootfs_mkdir(rw, "layers", 0700, "/ (layers)", err)) < 0)
		return r;
	*ret_rw = TAKE_FD(rw);
	return 0;
}

/*
 * Rootless: layer i is a directory of the host's mount namespace (an O_PATH
 * fd, which overlayfs refuses: its private clone must come from our own
 * namespace). The same directory is found again by path in ours, checked
 * to be the same inode as the fd, and cloned read-only, nosuid, nodev: a
 * detached mount like root's idmapped ones, without the idmapping (the
 * user's files are our root's already).
 */
static int clone_layer_here(const struct hutch_rootfs_config *cfg, size_t i, struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
		                               MOUNT_ATTR_NODEV };
	_cleanup_close_ int dir = -EBADF, here = -EBADF, mnt = -EBADF;
	struct stat want, got;

	dir = open(cfg->layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0)
		here = sys_openat2(dir, cfg->layer_names[i], &how, sizeof(how));
	if (here < 0)
		return hutch_err_set_errno(err, -errno, "open layer %zu in '%s'", i,
		                           cfg->layer_dir);
	if (fstat(here, &got) < 0 || fstat(cfg->layer_fds[i], &want) < 0)
		return hutch_err_set_errno(err, -errno, "stat layer %zu", i);
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
		return hutch_err_set(err, -ESTALE,
		                     "layer %zu changed in '%s' while the sandbox was made", i,
		                     cfg->layer_dir);
	mnt = sys_open_tree(here, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (mnt < 0)
		return hutch_err_set_errno(err, -errno, "clone layer %zu", i);
	if (sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "make layer %zu read-only", i);
	return TAKE_FD(mnt);
}

/* Attach layer i under rw/layers/<i>; its O_PATH fd in our namespace. */
static int attach_layer(int rw, size_t i, int layer_fd, struct hutch_err *err)
{
	char name[32], where[48];
	_cleanup_close_ int target = -EBADF;
	int r, fd;

	snprintf(name, sizeof(name), "layers/%zu", i);
	snprintf(where, sizeof(where), "layer %zu", i);
	r = rootfs_mkdir(rw, name, 0755, where, err);
	if (r < 0)
		return r;
	target = rootfs_open_target(rw, name, false, where, err);
	if (target < 0)
		return target;
	r = rootfs_attach_fd(layer_fd, target, "image layer", where, err);
	if (r < 0)
		return r;
	fd = openat(rw, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open %s", where);
	return fd;
}

static int set_fd(int fsfd, const char *key, int fd, struct hutch_err *err)
{
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FD, key, NULL, fd) < 0)
		return hutch_err_set_errno(err, -errno, "overlayfs option '%s'", key);
	return 0;
}

static int set_string(int fsfd, const char *key, const char *value, struct hutch_err *err)
{
	if (sys_fsconfig(fsfd, FSCONFIG_SET_STRING, key, value, 0) < 0)
		return hutch_err_set_errno(err, -errno, "overlayfs option '%s=%s'", key, value);
	return 0;
}

/* userxattr, then the superblock and its detached mount. A refusal on an
 * old kernel names the version overlayfs needs for what we ask of it. */
static int create_overlay(int fsfd, size_t n, bool idmapped, struct hutch_err *err)
{
	struct utsname u;
	const char *need = NULL;
	int mnt, code;

	if (sys_fsconfig(fsfd, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		code = -errno;
		if (uname(&u) < 0)
			snprintf(u.release, sizeof(u.release), "unknown");
		else if (!hutch_kernel_at_least(u.release, 5, 11))
			need = "Linux 5.11+ (option userxattr)";
		else if (idmapped && !hutch_kernel_at_least(u.release, 5, 19))
			need = "Linux 5.19+ (idmapped layers)";
		if (need)
			return hutch_err_set(err, code,
			                     "mount overlayfs of %zu layers: overlayfs needs %s, "
			                     "this kernel is %.64s",
			                     n, need, u.release);
		return hutch_err_set_errno(err, code, "mount overlayfs of %zu layers", n);
	}
	mnt = sys_fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return hutch_err_set_errno(err, -errno, "mount overlayfs of %zu layers", n);
	return mnt;
}

/*
 * Before Linux 6.13 overlayfs takes no layer by fd (6.1's options are
 * strings only; 6.5-6.12's lowerdir+ is a string): the same attached
 * mounts then go by path, relative to rw/layers, a directory of our own
 * tmpfs in our own mount namespace that nothing of the image is in and
 * nothing else writes: "n-1:...:0" are the mount points the layers are
 * attached on (top first), ../disk/upper and ../disk/work the writable layer. The
 * kernel resolves them from our cwd (6.1 at CMD_CREATE, later kernels at
 * each fsconfig), so the names are ours alone and need no escaping. One
 * string of at most 255 bytes: HUTCH_OVERLAY_PATH_LAYERS layers.
 */
static int make_overlay_by_path(int rw, size_t n, bool idmapped, struct hutch_err *err)
{
	char lower[HUTCH_OVERLAY_STRING_MAX + 1];
	_cleanup_close_ int fsfd = -EBADF, dir = -EBADF;
	int r;

	if (hutch_overlay_lowerdir(n, lower, sizeof(lower)) < 0)
		return hutch_err_set(err, -E2BIG,
		                     "an image of %zu layers: overlayfs before Linux 6.13 takes "
		                     "layers only as one string of paths, at most %d layers",
		                     n, HUTCH_OVERLAY_PATH_LAYERS);
	dir = openat(rw, "layers", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || fchdir(dir) < 0)
		return hutch_err_set_errno(err, -errno, "enter the layers' directory");
	fsfd = sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return hutch_err_set_errno(err, -errno, "mount overlayfs");
	if ((r = set_string(fsfd, "lowerdir", lower, err)) < 0 ||
	    (r = set_string(fsfd, "upperdir", "../disk/upper", err)) < 0 ||
	    (r = set_string(fsfd, "workdir", "../disk/work", err)) < 0)
		return r;
	return create_overlay(fsfd, n, idmapped, err);
}

/* Did lowerdir+ by fd fail (errno) because the kernel is before 6.13?
 * 6.1's overlayfs still has the legacy option parser, for which fsconfig
 * refuses any fd with EOPNOTSUPP (measured in the v2 VM); 6.5-6.12's
 * lowerdir+ is a string option: EINVAL. On 6.13+ either is a refusal of
 * its own (a layer that is not a directory, say), never a reason to try
 * paths. */
static bool takes_no_fds(int code)
{
	struct utsname u;

	return (code == EINVAL || code == EOPNOTSUPP) && uname(&u) == 0 &&
	       !hutch_kernel_at_least(u.release, 6, 13);
}

/* The overlay of the layers (top first) under rw's upper/. The top layer
 * by fd is the probe: one failed fsconfig before 6.13 (EOPNOTSUPP on
 * 6.1, EINVAL on 6.5-6.12), nothing else differs on 6.13+. */
static int make_overlay(int rw, const int *layers, size_t n, bool idmapped, struct hutch_err *err)
{
	_cleanup_close_ int fsfd = -EBADF, upper = -EBADF, work = -EBADF;
	int r;

	fsfd = sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return hutch_err_set_errno(err, -errno,
		                           "mount overlayfs (is the "
		                           "overlay module loaded?)");
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FD, "lowerdir+", NULL, layers[n - 1]) < 0) {
		r = -errno;
		if (takes_no_fds(-r))
			return make_overlay_by_path(rw, n, idmapped, err);
		return hutch_err_set_errno(err, r, "overlayfs option 'lowerdir+'");
	}
	for (size_t i = n - 1; i-- > 0;) {
		r = set_fd(fsfd, "lowerdir+", layers[i], err);
		if (r < 0)
			return r;
	}
	upper = openat(rw, "disk/upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	work = openat(rw, "disk/work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (upper < 0 || work < 0)
		return hutch_err_set_errno(err, -errno, "open the writable layer");
	if ((r = set_fd(fsfd, "upperdir", upper, err)) < 0 ||
	    (r = set_fd(fsfd, "workdir", work, err)) < 0)
		return r;
	return create_overlay(fsfd, n, idmapped, err);
}

int rootfs_image_root(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	const struct hutch_rootfs_config *cfg = ctx->cfg;
	const unsigned int flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
	int layers[HUTCH_ROOTFS_LAYERS_MAX];
	_cleanup_close_ int rw = -EBADF, mnt = -EBADF;
	size_t n = 0;
	int r;

	if (cfg->n_layers == 0 || cfg->n_layers > HUTCH_ROOTFS_LAYERS_MAX)
		return hutch_err_set(err, -EINVAL, "image with %zu layers", cfg->n_layers);
	r = make_rw(ctx, &rw, err);
	while (r >= 0 && n < cfg->n_layers) {
		_cleanup_close_ int here = -EBADF;

		if (cfg->layer_dir)
			r = here = clone_layer_here(cfg, n, err);
		if (r >= 0)
			r = attach_layer(rw, n, cfg->layer_dir ? here : cfg->layer_fds[n], err);
		if (r >= 0)
			layers[n++] = r;
	}
	if (r >= 0)
		r = mnt = make_overlay(rw, layers, n, !cfg->layer_dir, err);
	hutch_close_many(layers, n);
	if (r >= 0 && cfg->owners_len)
		r = rootfs_image_owners(mnt, cfg->owners, cfg->owners_len, err);
	if (r < 0)
		return r;
	/* The overlay holds private clones of its layers and upper dir:
	 * the tmpfs (and the layer mounts on it) leave the tree now, so
	 * that the overlay stacks on "/" directly, as the host-derived
	 * root's tmpfs does. Left there, the tmpfs would sit between the
	 * host's root and ours, and the old root's detach after pivot_root
	 * (umount of ".", which follows the mounts on top) would take the
	 * tmpfs instead of the host's tree. */
	if (cfg->write_fds &&
	    (cfg->write_fds[HUTCH_ROOTFS_WRITE_UPPER] =
	             openat(rw, "disk/upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "open the writable layer");
	if (fchdir(rw) < 0 || umount2(".", MNT_DETACH) < 0)
		return hutch_err_set_errno(err, -errno, "detach the writable layer's tmpfs");
	if (sys_move_mount(mnt, "", ctx->host_root, "", flags) < 0)
		return hutch_err_set_errno(err, -errno, "mount the image's root on '/'");
	ctx->root = TAKE_FD(mnt);
	return 0;
}

/* ---- the image's /etc ---- */

/* dir/name as a regular file of at most ETC_FILE_MAX bytes, or NULL. */
static char *read_etc(int etc, const char *name)
{
	struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_close_ int fd = sys_openat2(etc, name, &how, sizeof(how));
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ETC_FILE_MAX)
		return NULL;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	n = hutch_read_all(fd, buf, (size_t)st.st_size);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return TAKE_PTR(buf);
}

/* Replace /etc/name: what the image had there is unlinked, never opened. */
static int replace_etc(int etc, const char *name, const char *content, struct hutch_err *err)
{
	return rootfs_replace_file(etc, name, content, "/etc", err);
}

/*
 * Header bindings on an image: the CA files as on the host root
 * (rootfs_ca_files()), after the image's own bundle, read in the image's
 * root (its symlinks resolved there, a FIFO or a device refused); the
 * image's /etc/ssl/certs/ca-certificates.crt, when it is a plain file
 * reached without a symlink, is then replaced by the whole bundle (in this
 * sandbox's own layer) for the tools that read only that.
 */
static int image_ca(struct rootfs_ctx *ctx, int etc, struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
		                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct open_how dir_how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                    .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_free_ char *bundle = NULL, *all = NULL;
	_cleanup_close_ int fd = -EBADF, certs = -EBADF;
	struct stat st;
	ssize_t n = 0;
	int r;

	fd = sys_openat2(ctx->root, "etc/ssl/certs/ca-certificates.crt", &how, sizeof(how));
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size <= (off_t)ROOTFS_CA_BUNDLE_MAX && (bundle = malloc((size_t)st.st_size + 1)))
		n = hutch_read_all(fd, bundle, (size_t)st.st_size);
	r = rootfs_ca_files(etc, bundle, n > 0 ? (size_t)n : 0, ctx->cfg->ca_pem, &all, err);
	if (r < 0)
		return r;
	certs = sys_openat2(etc, "ssl/certs", &dir_how, sizeof(dir_how));
	if (certs < 0 || fstatat(certs, "ca-certificates.crt", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return rootfs_replace_file(certs, "ca-certificates.crt", all, "/etc/ssl/certs", err);
}

static int write_ids(struct rootfs_ctx *ctx, int etc, struct hutch_err *err)
{
	const struct hutch_rootfs_config *cfg = ctx->cfg;
	_cleanup_free_ char *passwd = read_etc(etc, "passwd"), *group = read_etc(etc, "group");
	_cleanup_free_ char *new_passwd = NULL, *new_group = NULL;
	int r;

	new_passwd = rootfs_passwd_merge(passwd, cfg->app_uid, cfg->app_gid,
	                                 rootfs_pick_shell(ctx->root));
	new_group = rootfs_group_merge(group, cfg->app_gid);
	if (!new_passwd || !new_group)
		return hutch_err_set_errno(err, -errno,
		                           "merge appuser into the image's /etc/passwd");
	if ((r = replace_etc(etc, "passwd", new_passwd, err)) < 0 ||
	    (r = replace_etc(etc, "group", new_group, err)) < 0)
		return r;
	return 0;
}

int rootfs_image_etc(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	const struct hutch_rootfs_config *cfg = ctx->cfg;
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_free_ char *hosts = NULL, *hostname = NULL;
	_cleanup_close_ int etc = -EBADF;
	int r;

	r = rootfs_mkdir(ctx->root, "etc", 0755, "/etc", err);
	if (r < 0)
		return r;
	etc = sys_openat2(ctx->root, "etc", &how, sizeof(how));
	if (etc < 0)
		return hutch_err_set_errno(err, -errno, "open the image's '/etc'");
	r = write_ids(ctx, etc, err);
	if (r < 0)
		return r;
	hosts = rootfs_hosts_render(cfg->hostname, cfg->extra_hosts);
	if (!hosts || asprintf(&hostname, "%s\n", cfg->hostname) < 0)
		return hutch_err_set(err, -ENOMEM, "render /etc/hosts");
	if ((r = replace_etc(etc, "hostname", hostname, err)) < 0 ||
	    (r = replace_etc(etc, "hosts", hosts, err)) < 0 ||
	    (r = replace_etc(etc, "resolv.conf", cfg->resolv_conf ? cfg->resolv_conf : "", err)) <
	            0)
		return r;
	/* The image's own name service configuration is its libc's; ours
	 * only when it has none. */
	if (faccessat(etc, "nsswitch.conf", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
	    (r = replace_etc(etc, "nsswitch.conf", rootfs_nsswitch_conf, err)) < 0)
		return r;
	return cfg->ca_pem ? image_ca(ctx, etc, err) : 0;
}

/* ---- the image must have a shell and python3 ---- */

static bool is_executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

static bool has_on_path(const char *path, const char *name)
{
	char buf[4096];

	for (const char *p = path; p && *p;) {
		const char *end = strchrnul(p, ':');
		size_t len = (size_t)(end - p);

		if (len && p[0] == '/' && len + strlen(name) + 2 <= sizeof(buf)) {
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, p, name);
			if (is_executable(buf))
				return true;
		}
		p = *end ? end + 1 : end;
	}
	return false;
}

int rootfs_image_check(const struct hutch_rootfs_config *cfg, struct hutch_err *err)
{
	const char *path = cfg->path ? cfg->path : "/usr/local/bin:/usr/bin:/bin";
	bool sh = is_executable("/bin/sh"), py = has_on_path(path, "python3");

	if (sh && py)
		return 0;
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -ENOEXEC,
	                           "image '%s' has no %s%s%s: a sandbox needs /bin/sh and python3 "
	                           "(PATH %s)",
	                           cfg->image ? cfg->image : "", sh ? "" : "/bin/sh",
	                           sh || py ? "" : " and no ", py ? "" : "python3", path);
}
