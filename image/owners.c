/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An ordinary user's store keeps no file owners (the user cannot chown to
 * other ids): the unpacker writes them in user.containers.override_stat
 * of each file that needs one (unpack.c) and lists those files' paths in
 * the layer's owners index, owners/<hex of its diff_id> (NUL-ended
 * relative paths), so that a sandbox's root applies them without walking
 * the image (rootfs/overlay.c). The index is made in tmp/ beside the
 * layer and renamed into owners/ before the layer into layers/, so a layer
 * in the store has its index whole; prune removes an index with its layer.
 * Root's store has owners of its own: no index.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"

#define OWNERS_MAX (64u << 20) /* the indexes of one image, together */

static void index_name(const char *tmp, char name[80])
{
	snprintf(name, 80, "%.64s.owners", tmp);
}

int store_owners_begin(struct hutch_image_store *s, const char *tmp, struct hutch_err *err)
{
	char name[80];
	int fd;

	if (geteuid() == 0)
		return -EBADF; /* root's store: owners of its own */
	index_name(tmp, name);
	fd = openat(s->tmp, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "create a layer's owners index");
	return fd;
}

int store_owners_end(struct hutch_image_store *s, const char *tmp, int *fd, const char *diff_id,
                     struct hutch_err *err)
{
	_cleanup_close_ int owners = -EBADF;
	char name[80];
	struct stat st;
	int r = 0;

	if (*fd < 0)
		return 0;
	index_name(tmp, name);
	if (diff_id && fstat(*fd, &st) == 0 && st.st_size > 0) {
		owners = store_open_owners(s, err);
		r = owners < 0 ? owners : 0;
		if (r >= 0 && renameat(s->tmp, name, owners, diff_id + 7) < 0)
			r = hutch_err_set_errno(err, -errno, "store the owners index of %.19s",
			                        diff_id);
	}
	(void)unlinkat(s->tmp, name, 0);
	closep(fd);
	return r;
}

/* Append owners/<hex> of one layer (if it has one) to *buf. */
static int read_one(int owners, const char *diff_id, char **buf, size_t *len, struct hutch_err *err)
{
	_cleanup_close_ int fd = openat(owners, diff_id + 7, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	char *grown;
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT
		               ? 0
		               : hutch_err_set_errno(err, -errno, "open the owners index of %.19s",
		                                     diff_id);
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "read the owners index of %.19s", diff_id);
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > OWNERS_MAX - *len)
		return hutch_err_set(err, -EFBIG,
		                     "the owners index of layer %.19s is larger than %u bytes "
		                     "(files whose owners an ordinary user's store keeps)",
		                     diff_id, OWNERS_MAX);
	grown = realloc(*buf, *len + (size_t)st.st_size + 1);
	if (!grown)
		return hutch_err_set(err, -ENOMEM, "read the owners index of %.19s", diff_id);
	*buf = grown;
	n = hutch_read_all(fd, *buf + *len, (size_t)st.st_size);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read the owners index of %.19s", diff_id);
	/* NUL-ended, always: a cut file ends its last path here */
	if (n > 0 && (*buf)[*len + (size_t)n - 1] != '\0')
		(*buf)[*len + (size_t)n++] = '\0';
	*len += (size_t)n;
	return 0;
}

int store_owners_read(struct hutch_image_store *s, const struct hutch_image_config *config,
                      char **ret, size_t *ret_len, struct hutch_err *err)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int owners = -EBADF;
	size_t len = 0;
	int r;

	owners = openat(s->dirfd, "owners", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (owners < 0)
		return errno == ENOENT ? 0
		                       : hutch_err_set_errno(err, -errno,
		                                             "open the store's owners indexes");
	for (size_t i = 0; i < config->n_diff_ids; i++) {
		r = read_one(owners, config->diff_ids[i], &buf, &len, err);
		if (r < 0)
			return r;
	}
	*ret = len ? TAKE_PTR(buf) : NULL;
	*ret_len = len;
	return 0;
}
