/* SPDX-License-Identifier: Apache-2.0 */
/*
 * -v, child side: each volume's detached mount (made and idmapped by the
 * supervisor) attached on its PATH in the new root, after the writable
 * tmpfs mounts (a volume on /workspace or below it stacks on them) and
 * before pivot_root. PATH's directories are walked one at a time from the
 * root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a missing one
 * is made (root's, 0755), a symlink (an image may hold one pointing
 * anywhere) or anything not a directory refuses the volume.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"

static int open_dir(int parent, const char *name, const char *dst, struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	int fd = sys_openat2(parent, name, &how, sizeof(how));

	if (fd < 0 && errno == ENOENT && mkdirat(parent, name, 0755) == 0)
		fd = sys_openat2(parent, name, &how, sizeof(how));
	if (fd >= 0)
		return fd;
	if (errno == ELOOP || errno == ENOTDIR)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -errno,
		        "volume on '%s': '%s' on the way is %s in this root; mount "
		        "the volume elsewhere",
		        dst, name, errno == ELOOP ? "a symlink" : "not a directory");
	if (errno == EROFS)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EROFS,
		                           "volume on '%s': '%s' cannot be made there (read-only "
		                           "in this root): mount on an existing directory or a "
		                           "new one under /, /workspace, /home/appuser or /tmp",
		                           dst, name);
	return hutch_err_set_errno(err, -errno, "volume on '%s': open '%s'", dst, name);
}

/* The directory dst (absolute, checked by the parser), made if missing. */
static int make_target(int root, const char *dst, struct hutch_err *err)
{
	char path[PATH_MAX], *save = NULL;
	_cleanup_close_ int dir = -EBADF;

	if (strlen(dst) >= sizeof(path) || dst[0] != '/')
		return hutch_err_set(err, -EINVAL, "volume on '%s': not an absolute path", dst);
	memcpy(path, dst, strlen(dst) + 1);
	dir = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (dir < 0)
		return hutch_err_set_errno(err, -errno, "volume on '%s'", dst);
	for (char *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = open_dir(dir, c, dst, err);

		if (next < 0)
			return next;
		closep(&dir);
		dir = next;
	}
	return TAKE_FD(dir);
}

int rootfs_setup_volumes(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	const struct hutch_rootfs_config *cfg = ctx->cfg;

	for (size_t i = 0; i < cfg->n_volumes; i++) {
		_cleanup_close_ int target = -EBADF;
		int r;

		target = make_target(ctx->root, cfg->volume_dsts[i], err);
		if (target < 0)
			return target;
		r = rootfs_attach_fd(cfg->volume_fds[i], target, "volume", cfg->volume_dsts[i],
		                     err);
		if (r < 0)
			return r;
	}
	return 0;
}
