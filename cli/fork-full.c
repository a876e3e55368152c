/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch fork --full's dump, never left behind (docs/snapshots.md "Full
 * fork"). The dump is a full snapshot of the source's store that the
 * forks' creates restore and the fork removes after, whatever happened.
 * So that a fork killed part way (kill -9 of the CLI, or of the source's
 * supervisor) leaves nothing once `hutch gc` ran, the fork records the
 * dump before asking for it: $RT/.fork-full/NAME, {source, name, store},
 * made as .NAME.tmp, locked (flock) and renamed, held locked for the
 * fork's life. gc takes every record nobody holds: the snapshot removed
 * where it is, the record with it; a record whose snapshot is not (yet)
 * there is kept while its source lives (its supervisor may still be
 * dumping: it publishes the snapshot at the end), dropped once it is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "fdutil.h"
#include "image.h"
#include "state.h"
#include "verbs.h"

#define DIR_NAME ".fork-full"
#define TEXT_MAX 8192

static int open_dir(const char *rt, bool make)
{
	char path[4096];

	if ((size_t)snprintf(path, sizeof(path), "%s/" DIR_NAME, rt) >= sizeof(path))
		return -ENAMETOOLONG;
	if (make && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int hutch_cli_fork_full_mark(const char *rt, const char *source, const char *name,
                             const char *store, int *ret_fd)
{
	_cleanup_close_ int dir = open_dir(rt, true), fd = -EBADF;
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	char tmp[HUTCH_IMAGE_NAME_MAX + 8];

	if (dir < 0)
		return dir;
	if (!o || !cJSON_AddStringToObject(o, "source", source) ||
	    !cJSON_AddStringToObject(o, "name", name) ||
	    !cJSON_AddStringToObject(o, "store", store) || !(text = cJSON_PrintUnformatted(o)))
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0 || hutch_write_all(fd, text, strlen(text)) < 0 ||
	    renameat(dir, tmp, dir, name) < 0) {
		int r = -errno;

		(void)unlinkat(dir, tmp, 0);
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

void hutch_cli_fork_full_unmark(const char *rt, const char *name, int *fd)
{
	_cleanup_close_ int dir = open_dir(rt, false);

	if (dir >= 0)
		(void)unlinkat(dir, name, 0);
	closep(fd);
}

int hutch_cli_fork_full_remove(const char *store, const char *name, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	int r;

	/* A store not there has no snapshot (opening it would make it). */
	if (access(store, F_OK) < 0 && errno == ENOENT)
		return 0;
	if ((r = hutch_image_store_open(store, &s, err)) < 0)
		return r;
	if ((r = hutch_image_full_exists(s, name)) <= 0)
		return r < 0 ? hutch_err_set_errno(err, r, "look for full snapshot '%s'", name) : 0;
	if ((r = hutch_image_store_lock(s, err)) < 0 ||
	    (r = hutch_image_full_remove(s, name, err)) < 0)
		return r;
	return 1;
}

/* One record nobody holds: 1 when it is gone (its snapshot with it). */
static int gc_one(const char *rt, int dir, const char *file)
{
	_cleanup_close_ int fd = openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_cjson_ cJSON *o = NULL;
	char text[TEXT_MAX + 1];
	struct hutch_err err = { 0 };
	struct hutch_paths p;
	const char *src, *name, *store;
	ssize_t n;
	int r;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return 0; /* gone meanwhile, or its fork goes on */
	n = read(fd, text, TEXT_MAX);
	text[n > 0 ? n : 0] = '\0';
	o = cJSON_Parse(text);
	src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "source"));
	name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
	store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "store"));
	if (file[0] != '.' && src && name && store && hutch_image_name_is_valid(name)) {
		if ((r = hutch_cli_fork_full_remove(store, name, &err)) < 0) {
			fprintf(stderr, "hutch: gc: a full fork's dump '%s' in '%s': %s\n", name,
			        store, err.msg);
			return 0;
		}
		/* Not there: its source may still be dumping into it. */
		if (r == 0 && hutch_paths_init(rt, src, &p) == 0 && hutch_state_is_live(&p) > 0)
			return 0;
	}
	return unlinkat(dir, file, 0) == 0;
}

int hutch_cli_fork_full_gc(const char *rt)
{
	_cleanup_close_ int dir = open_dir(rt, false);
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *e;
	int removed = 0, fd;

	if (dir < 0 || (fd = fcntl(dir, F_DUPFD_CLOEXEC, 3)) < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			removed += gc_one(rt, dir, e->d_name);
	return removed;
}
