/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots in the store (docs/snapshots.md): full/NAME/ holds a
 * snapshot.json and CRIU's images of the sandbox's process tree. They
 * hold the processes' memory, so secrets: the directory is 0700 and every
 * file 0600, the store's owner's only (root's store: root's). A snapshot
 * is made in tmp/ (a killed writer's leftover is cleared by the next lock
 * holder) and renamed into full/ whole. The name space is the images':
 * a name is taken by an image or a full snapshot, never both.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "image-internal.h"
#include "store-internal.h"

#define META_MAX (1 << 20) /* a snapshot.json, at most */

int hutch_image_full_exists(struct hutch_image_store *s, const char *name)
{
	_cleanup_close_ int full = -EBADF;
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	struct hutch_err err = { 0 };
	struct stat st;

	if ((full = store_open_full(s, &err)) < 0)
		return full;
	store_ref_file(name, file);
	if (fstatat(full, file, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	return 1;
}

/* The one name space of images and full snapshots. */
int hutch_image_name_free(struct hutch_image_store *s, const char *name, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *ref = NULL;
	int r = store_read_ref(s, name, &ref, err);

	if (r == 0)
		return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EEXIST,
		                           "an image or snapshot called '%s' exists: choose "
		                           "another name, or 'hutch snapshot rm %s' first",
		                           name, name);
	if (r == -ENOENT) {
		*err = (struct hutch_err){ 0 };
		r = hutch_image_full_exists(s, name);
		if (r > 0)
			return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EEXIST,
			                           "a full snapshot called '%s' exists: choose "
			                           "another name, or 'hutch snapshot rm %s' first",
			                           name, name);
		return r < 0 ? hutch_err_set_errno(err, r, "look for snapshot '%s'", name) : 0;
	}
	return r;
}

int hutch_image_name_pick(const char *stem, unsigned *counter,
                          int (*taken)(void *ud, const char *name, struct hutch_err *err), void *ud,
                          char *buf, size_t size, struct hutch_err *err)
{
	unsigned n = *counter;

	for (int i = 0; i < HUTCH_IMAGE_NAME_TRIES; i++) {
		int r;

		if ((size_t)snprintf(buf, size, "%s-%u", stem, ++n) >= size)
			return hutch_err_set(err, -ENAMETOOLONG, "a name after '%s'", stem);
		r = taken(ud, buf, err);
		if (r == 0) {
			*counter = n;
			return 0;
		}
		if (r != -EEXIST)
			return r;
		*err = (struct hutch_err){ 0 };
	}
	return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EEXIST,
	                           "%d names after '%s-%u' are taken: give the snapshot a name",
	                           HUTCH_IMAGE_NAME_TRIES, stem, *counter);
}

static int store_name_taken(void *ud, const char *name, struct hutch_err *err)
{
	return hutch_image_name_free(ud, name, err);
}

int hutch_image_name_next(struct hutch_image_store *s, const char *stem, unsigned *counter,
                          char *buf, size_t size, struct hutch_err *err)
{
	return hutch_image_name_pick(stem, counter, store_name_taken, s, buf, size, err);
}

int hutch_image_full_new(struct hutch_image_store *s, const char *name, char ret_tmp[64],
                         struct hutch_err *err)
{
	int r, fd;

	if ((r = hutch_image_name_free(s, name, err)) < 0)
		return r;
	if ((fd = store_make_tmp(s, "full", ret_tmp, err)) < 0)
		return fd;
	if (fchmod(fd, 0700) < 0) {
		r = hutch_err_set_errno(err, -errno, "make '%s' private", ret_tmp);
		(void)close(fd);
		(void)hutch_rm_rf_at(s->tmp, ret_tmp);
		return r;
	}
	return fd;
}

/* Every entry of dirfd 0600 (directories 0700), not following links. */
static int make_private(int dirfd, struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return hutch_err_set_errno(err, -errno, "read the snapshot's directory");
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hutch_err_set_errno(err, -errno, "stat '%s'", de->d_name);
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sub = openat(
			        dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int r;

			if (sub < 0 || fchmod(sub, 0700) < 0)
				return hutch_err_set_errno(err, -errno, "make '%s' private",
				                           de->d_name);
			if ((r = make_private(sub, err)) < 0)
				return r;
		} else if (S_ISREG(st.st_mode) && fchmodat(dirfd, de->d_name, 0600, 0) < 0) {
			return hutch_err_set_errno(err, -errno, "make '%s' private", de->d_name);
		} else if (!S_ISREG(st.st_mode) && unlinkat(dirfd, de->d_name, 0) < 0) {
			return hutch_err_set_errno(err, -errno, "remove '%s'", de->d_name);
		}
	}
	return 0;
}

int hutch_image_full_publish(struct hutch_image_store *s, const char *tmp, const char *name,
                             struct hutch_err *err)
{
	_cleanup_close_ int full = -EBADF, dir = -EBADF;
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	int r;

	if ((dir = openat(s->tmp, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return hutch_err_set_errno(err, -errno, "open '%s' in the store", tmp);
	if ((r = make_private(dir, err)) < 0 || (full = store_open_full(s, err)) < 0)
		return r < 0 ? r : full;
	if ((r = hutch_image_name_free(s, name, err)) < 0)
		return r;
	store_ref_file(name, file);
	if (renameat(s->tmp, tmp, full, file) < 0)
		return hutch_err_set_errno(err, -errno, "name the full snapshot '%s'", name);
	return 0;
}

void hutch_image_full_abandon(struct hutch_image_store *s, const char *tmp)
{
	(void)hutch_rm_rf_at(s->tmp, tmp);
}

int hutch_image_full_remove(struct hutch_image_store *s, const char *name, struct hutch_err *err)
{
	_cleanup_close_ int full = -EBADF;
	char file[HUTCH_IMAGE_NAME_MAX + 1], tmp[64];
	static unsigned counter;

	if ((full = store_open_full(s, err)) < 0)
		return full;
	store_ref_file(name, file);
	/* Out of the name space at once, then removed: a kill between the two
	 * leaves it in tmp/, which the next lock holder clears. */
	snprintf(tmp, sizeof(tmp), "full-rm-%d-%u", (int)getpid(), counter++);
	if (renameat(full, file, s->tmp, tmp) < 0)
		return errno == ENOENT ? hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                                             "no snapshot called '%s'", name)
		                       : hutch_err_set_errno(err, -errno, "remove '%s'", name);
	(void)hutch_rm_rf_at(s->tmp, tmp);
	return 0;
}

/* full/FILE/snapshot.json without its CRIU arguments, "name" set: what
 * ls and inspect show. */
static cJSON *meta_of(int full, const char *file, bool keep_args)
{
	_cleanup_free_ char *buf = malloc(META_MAX + 1);
	_cleanup_close_ int dir = -EBADF;
	char name[HUTCH_IMAGE_NAME_MAX + 1];
	cJSON *o;
	ssize_t n;
	size_t i;

	if (!buf ||
	    (dir = openat(full, file, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (n = hutch_read_file_at(dir, "snapshot.json", buf, META_MAX)) < 0)
		return NULL;
	if (!(o = cJSON_ParseWithLength(buf, (size_t)n)) || !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return NULL;
	}
	for (i = 0; file[i] && i < HUTCH_IMAGE_NAME_MAX; i++)
		name[i] = file[i] == '%' ? '/' : file[i];
	name[i] = '\0';
	if (!keep_args) {
		cJSON_DeleteItemFromObjectCaseSensitive(o, "criu_args");
		cJSON_DeleteItemFromObjectCaseSensitive(o, "files");
	}
	cJSON_DeleteItemFromObjectCaseSensitive(o, "name");
	(void)cJSON_AddStringToObject(o, "name", name);
	return o;
}

int hutch_image_full_list(struct hutch_image_store *s, cJSON **ret, struct hutch_err *err)
{
	_cleanup_close_ int full = -EBADF;
	_cleanup_closedir_ DIR *d = NULL;
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	struct dirent *de;
	int fd;

	if (!arr)
		return hutch_err_set(err, -ENOMEM, "full snapshots");
	if ((full = store_open_full(s, err)) < 0)
		return full;
	if ((fd = fcntl(full, F_DUPFD_CLOEXEC, 3)) < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return hutch_err_set_errno(err, -errno, "read the store's full snapshots");
	}
	while ((de = readdir(d))) {
		cJSON *o;

		if (de->d_name[0] == '.' || !(o = meta_of(full, de->d_name, false)))
			continue;
		cJSON_AddItemToArray(arr, o);
	}
	*ret = TAKE_PTR(arr);
	return 0;
}

int hutch_image_full_inspect(struct hutch_image_store *s, const char *name, cJSON **ret,
                             struct hutch_err *err)
{
	_cleanup_close_ int full = -EBADF;
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	cJSON *o;

	if ((full = store_open_full(s, err)) < 0)
		return full;
	store_ref_file(name, file);
	if (!(o = meta_of(full, file, false)))
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                           "no full snapshot '%s'", name);
	*ret = o;
	return 0;
}

int hutch_image_full_open(struct hutch_image_store *s, const char *name, cJSON **ret_meta,
                          struct hutch_err *err)
{
	_cleanup_close_ int full = -EBADF, dir = -EBADF;
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	cJSON *o;

	if ((full = store_open_full(s, err)) < 0)
		return full;
	store_ref_file(name, file);
	if ((dir = openat(full, file, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    !(o = meta_of(full, file, true)))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		        "no full snapshot '%s' (or its snapshot.json unreadable)", name);
	*ret_meta = o;
	return TAKE_FD(dir);
}
