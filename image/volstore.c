/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named volumes in the image store (volume.h): volumes/NAME/data. The
 * store is its owner's alone (store.c), so are its volumes; what a sandbox
 * writes there keeps the ids it is written with (supervisor/volumes.c maps
 * the data directory's owner onto appuser).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"
#include "syscalls.h"
#include "volstore.h"

bool hutch_volume_name_is_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > HUTCH_VOLUME_NAME_MAX ||
	    !strchr("abcdefghijklmnopqrstuvwxyz"
	            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
	            name[0]))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
	       n;
}

static int bad_name(const char *name, struct hutch_err *err)
{
	return hutch_err_set_class(
	        err, HUTCH_ERRC_USAGE, -EINVAL,
	        "invalid volume name '%.80s': letters, digits, '_', '.' and '-', "
	        "starting with a letter or digit, at most %d",
	        name, HUTCH_VOLUME_NAME_MAX);
}

static int no_volume(const char *name, struct hutch_err *err)
{
	return hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
	                           "no volume '%s' (hutch volume ls lists them)", name);
}

/* volumes/ of the store, created when create is set. */
static int open_volumes(struct hutch_image_store *s, bool create, struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	int fd;

	if (create && mkdirat(s->dirfd, "volumes", 0700) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "create '%s/volumes'", s->path);
	fd = sys_openat2(s->dirfd, "volumes", &how, sizeof(how));
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s/volumes'", s->path);
	return fd;
}

/* volumes/NAME (O_RDONLY: flock()able), made with its data/ when create. */
static int open_one(struct hutch_image_store *s, const char *name, bool create,
                    struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_close_ int vols = -EBADF, fd = -EBADF;

	if (!hutch_volume_name_is_valid(name))
		return bad_name(name, err);
	vols = open_volumes(s, create, err);
	if (vols < 0)
		return vols == -ENOENT ? no_volume(name, err) : vols;
	if (create) {
		if (mkdirat(vols, name, 0700) < 0 && errno != EEXIST)
			return hutch_err_set_errno(err, -errno, "create volume '%s'", name);
	}
	fd = sys_openat2(vols, name, &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT ? no_volume(name, err)
		                       : hutch_err_set_errno(err, -errno, "open volume '%s'", name);
	if (create && mkdirat(fd, "data", 0755) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "create volume '%s'", name);
	return TAKE_FD(fd);
}

int hutch_volume_create(struct hutch_image_store *s, const char *name, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	int existed;

	if (!hutch_volume_name_is_valid(name))
		return bad_name(name, err);
	fd = open_one(s, name, false, err);
	existed = fd >= 0;
	closep(&fd);
	fd = open_one(s, name, true, err);
	if (fd < 0)
		return fd;
	return existed ? 0 : 1;
}

int hutch_volume_use(struct hutch_image_store *s, const char *name, int *ret_lock,
                     struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_close_ int fd = -EBADF;
	int data;

	fd = open_one(s, name, true, err);
	if (fd < 0)
		return fd;
	/* Shared: sandboxes share a volume; rm's exclusive try fails. */
	if (flock(fd, LOCK_SH) < 0)
		return hutch_err_set_errno(err, -errno, "lock volume '%s'", name);
	data = sys_openat2(fd, "data", &how, sizeof(how));
	if (data < 0)
		return hutch_err_set_errno(err, -errno, "open volume '%s' (removed meanwhile?)",
		                           name);
	*ret_lock = TAKE_FD(fd);
	return data;
}

int hutch_volume_rm(struct hutch_image_store *s, const char *name, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF, vols = -EBADF;
	int r;

	fd = open_one(s, name, false, err);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK
		               ? hutch_err_set(err, -EBUSY,
		                               "volume '%s' is in use by a sandbox: hutch rm it "
		                               "first (hutch ls --json shows its volumes)",
		                               name)
		               : hutch_err_set_errno(err, -errno, "lock volume '%s'", name);
	vols = open_volumes(s, false, err);
	if (vols < 0)
		return vols;
	r = hutch_rm_rf_at(vols, name);
	if (r < 0)
		return hutch_err_set_errno(err, r, "remove volume '%s'", name);
	return 0;
}

int hutch_volume_inspect(struct hutch_image_store *s, const char *name,
                         struct hutch_volume_info *ret, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	struct hutch_volume_info v = { .in_use = false };
	struct stat st;

	fd = open_one(s, name, false, err);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "stat volume '%s'", name);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		v.in_use = errno == EWOULDBLOCK;
	snprintf(v.name, sizeof(v.name), "%s", name);
	snprintf(v.path, sizeof(v.path), "%s/volumes/%s/data", s->path, name);
	v.created = (int64_t)st.st_mtim.tv_sec;
	*ret = v;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int hutch_volume_list(struct hutch_image_store *s, char ***ret, size_t *ret_n,
                      struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	char **names = NULL, **bigger;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int fd;

	fd = open_volumes(s, false, err);
	if (fd == -ENOENT) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return hutch_err_set_errno(err, -errno, "list '%s/volumes'", s->path);
	}
	while ((de = readdir(d))) {
		if (!hutch_volume_name_is_valid(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			bigger = realloc(names, cap * sizeof(*names));
			if (!bigger)
				break;
			names = bigger;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	if (de) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return hutch_err_set(err, -ENOMEM, "list volumes");
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*ret = names;
	*ret_n = n;
	return 0;
}
