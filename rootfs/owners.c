/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rootless --image: the owners an ordinary user's store keeps for its
 * files (image/unpack.c: user.containers.override_stat, "UID:GID:0MODE";
 * the paths in the layers' owners indexes, image/owners.c), applied to the
 * merged root before anything runs. The layers are the user's files, the
 * sandbox's root: a file appuser owned in the image is chowned (and a
 * directory's mode narrowed) through the overlay, which copies it up into
 * the sandbox's own writable layer (a directory: its attributes only; a
 * regular file: its bytes too). An owner the sandbox does not map (its
 * user namespace maps 0, appuser and nobody: distinct ids per sandbox, not
 * the whole range) stays root's, as every file of a rootless image was;
 * the mode is applied still.
 *
 * The image is hostile until pivot_root: every path is opened beneath the
 * overlay's root without symlinks or other mounts; only regular files and
 * directories are touched, by fd; a path a higher layer removed, or made a
 * symlink or something else, is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"
#include "syscalls.h"
#include "util.h"

/* chown what the sandbox maps: both ids, else one of them, else neither. */
static int set_owner(int fd, const struct stat *st, unsigned int uid, unsigned int gid)
{
	if (st->st_uid == uid && st->st_gid == gid)
		return 0;
	if (fchown(fd, uid, gid) == 0)
		return 1;
	if (errno != EINVAL)
		return -errno;
	if (st->st_uid != uid && fchown(fd, uid, (gid_t)-1) == 0)
		return 1;
	if (st->st_gid != gid && fchown(fd, (uid_t)-1, gid) == 0)
		return 1;
	return errno == EINVAL ? 0 : -errno;
}

static int apply_one(int root, const char *path, struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	char v[HUTCH_OVERRIDE_STAT_MAX + 1];
	_cleanup_close_ int fd = -EBADF;
	unsigned int uid, gid, mode;
	struct stat st;
	ssize_t n;
	int r, changed;

	fd = (int)sys_openat2(root, path, &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ||
		                       errno == ENXIO
		               ? 0
		               : hutch_err_set_errno(err, -errno, "image file '/%s'", path);
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "image file '/%s'", path);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return 0;
	n = fgetxattr(fd, HUTCH_OVERRIDE_STAT_XATTR, v, sizeof(v) - 1);
	if (n < 0 || hutch_override_stat_parse(v, (size_t)n, &uid, &gid, &mode) < 0)
		return 0; /* a higher layer's file, which has its owners (root's) */
	mode &= S_ISDIR(st.st_mode) ? 01777u : 0777u; /* never set-uid or set-gid */
	changed = r = set_owner(fd, &st, uid, gid);
	if (r >= 0 && (st.st_mode & 07777) != mode) {
		r = fchmod(fd, mode) < 0 ? -errno : 0;
		changed = 1;
	}
	/* The copy-up copied the attribute where the upper file system takes
	 * user.* attributes (tmpfs from Linux 6.6); before 6.6 (Debian 12's
	 * 6.1) it skipped it, and removing it from the tmpfs copy is refused
	 * with EOPNOTSUPP: there is nothing to remove. */
	if (r >= 0 && changed && fremovexattr(fd, HUTCH_OVERRIDE_STAT_XATTR) < 0 &&
	    errno != ENODATA && errno != EOPNOTSUPP)
		r = -errno;
	return r < 0 ? hutch_err_set_errno(err, r, "give image file '/%s' its owner", path) : 0;
}

int rootfs_image_owners(int root, const char *list, size_t len, struct hutch_err *err)
{
	for (size_t at = 0; at < len;) {
		const char *path = list + at;
		size_t n = strnlen(path, len - at);
		int r;

		if (n == len - at)
			break; /* not NUL-ended: the store's index cut short */
		at += n + 1;
		if (n == 0)
			continue;
		r = apply_one(root, path, err);
		if (r < 0)
			return r;
	}
	return 0;
}
