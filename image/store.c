/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image store on disk (layout in image.h): opening and locking it,
 * reference names, and what reads or forgets images: list, inspect,
 * remove, prune. Importing is import.c's.
 *
 * Every writer holds an exclusive flock() on "lock" for its whole run, so
 * anything found in tmp/ by a lock holder is a leftover of a killed writer
 * and is removed. A layer or reference appears by rename() only once it is
 * complete: a reader never sees half of one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"

/* An absolute path from the environment, or NULL. */
static const char *env_abs(const char *name)
{
	const char *p = getenv(name);

	return p && p[0] == '/' ? p : NULL;
}

const char *hutch_image_store_path(char *buf, size_t size)
{
	const char *p = getenv("HUTCH_IMAGE_STORE");
	int n;

	if (p && *p)
		return p;
	if (geteuid() == 0)
		return "/var/lib/hutch";
	/* An ordinary user's images are theirs alone (XDG base directories:
	 * data under $XDG_DATA_HOME, else ~/.local/share). */
	if ((p = env_abs("XDG_DATA_HOME")))
		n = snprintf(buf, size, "%s/hutch", p);
	else if ((p = env_abs("HOME")))
		n = snprintf(buf, size, "%s/.local/share/hutch", p);
	else
		return NULL;
	return n > 0 && (size_t)n < size ? buf : NULL;
}

bool hutch_image_name_is_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > HUTCH_IMAGE_NAME_MAX || name[0] == '.' || name[0] == '/' ||
	    strstr(name, ".."))
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("._:/@+-", *c)))
			return false;
	return true;
}

/* A name as one file name: '/' is not allowed in names, '%' never appears. */
void store_ref_file(const char *name, char out[HUTCH_IMAGE_NAME_MAX + 1])
{
	size_t i;

	for (i = 0; name[i] && i < HUTCH_IMAGE_NAME_MAX; i++)
		out[i] = name[i] == '/' ? '%' : name[i];
	out[i] = '\0';
}

static int open_sub(int dirfd, const char *name, struct hutch_err *err)
{
	int fd;

	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "create store directory '%s'", name);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open store directory '%s'", name);
	return fd;
}

static int open_dirs(struct hutch_image_store *s, struct hutch_err *err)
{
	_cleanup_close_ int blobs = -EBADF;

	if ((s->layers = open_sub(s->dirfd, "layers", err)) < 0 ||
	    (s->images = open_sub(s->dirfd, "images", err)) < 0 ||
	    (s->tmp = open_sub(s->dirfd, "tmp", err)) < 0 ||
	    (blobs = open_sub(s->dirfd, "blobs", err)) < 0 ||
	    (s->blobs = open_sub(blobs, "sha256", err)) < 0)
		return err->code;
	return 0;
}

int store_open_users(struct hutch_image_store *s, struct hutch_err *err)
{
	return open_sub(s->dirfd, "users", err);
}

int store_open_owners(struct hutch_image_store *s, struct hutch_err *err)
{
	return open_sub(s->dirfd, "owners", err);
}

int store_open_full(struct hutch_image_store *s, struct hutch_err *err)
{
	return open_sub(s->dirfd, "full", err);
}

/* Leftovers of a killed writer: only ever called with the lock held. */
static void clean_tmp(struct hutch_image_store *s)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = fcntl(s->tmp, F_DUPFD_CLOEXEC, 3);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			(void)hutch_rm_rf_at(s->tmp, de->d_name);
}

static int not_ours(const char *path, struct hutch_err *err)
{
	return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EACCES,
	                           "image store '%s': permission denied: another user's store? "
	                           "An ordinary user's images are in a store of their own "
	                           "($XDG_DATA_HOME/hutch or ~/.local/share/hutch, or "
	                           "HUTCH_IMAGE_STORE)",
	                           path);
}

/*
 * An ordinary user uses only a store of their own that no one else can
 * write: its layers become the root of the user's sandboxes, so a store
 * another user made (or can change) could plant files there, and using
 * it would read that user's images. Root's store is root's by making.
 */
static int check_owner(int dirfd, const char *path, struct hutch_err *err)
{
	struct stat st;

	if (geteuid() == 0)
		return 0;
	if (fstat(dirfd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "image store '%s'", path);
	if (st.st_uid != geteuid() || (st.st_mode & 022))
		return hutch_err_set(err, -EPERM,
		                     "image store '%s' is not yours alone (owner uid %u, mode "
		                     "%04o): chmod go-w it if yours, or set HUTCH_IMAGE_STORE "
		                     "to a directory of yours",
		                     path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

/*
 * The store is its owner's alone, root's too: no other user may reach a
 * layer. A layer's files are the root of sandboxes, and its own 1777
 * directories (tmp, var/tmp, run/lock) stay 1777 in it: whoever could
 * reach them could plant files (a FIFO, a symlink to /etc/shadow) seen in
 * every sandbox of the image. A store made before (0755) is closed when
 * opened.
 */
static int make_private(int dirfd, const char *path, struct hutch_err *err)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "image store '%s'", path);
	/* (A read-only store cannot be changed, by anyone: left as it is.) */
	if (st.st_uid == geteuid() && (st.st_mode & 077) && fchmod(dirfd, st.st_mode & 07700) < 0 &&
	    errno != EROFS)
		return hutch_err_set_errno(err, -errno,
		                           "image store '%s': make it private (chmod 0700)", path);
	return 0;
}

static int store_open(const char *path, struct hutch_image_store **ret, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return hutch_err_set(err, -ENOMEM, "open image store");
	s->dirfd = s->layers = s->images = s->tmp = s->blobs = s->lock = -EBADF;
	if (!(s->path = strdup(path)))
		return hutch_err_set(err, -ENOMEM, "open image store");
	/* A store (and the directories made for it, as the XDG base
	 * directories want them for an ordinary user's) is its owner's alone. */
	s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0 && errno == ENOENT) {
		r = hutch_mkdir_p_at(AT_FDCWD, path, 0700);
		if (r < 0)
			return hutch_err_set_errno(err, r,
			                           "create image store '%s' (HUTCH_IMAGE_STORE, "
			                           "XDG_DATA_HOME or HOME names where)",
			                           path);
		s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		s->made = s->dirfd >= 0;
	}
	if (s->dirfd < 0)
		return errno == EACCES
		               ? not_ours(path, err)
		               : hutch_err_set_errno(err, -errno, "open image store '%s'", path);
	r = check_owner(s->dirfd, path, err);
	if (r < 0 || (r = make_private(s->dirfd, path, err)) < 0)
		return r;
	r = open_dirs(s, err);
	if (r < 0)
		return hutch_err_prefix(err, "image store '%s'", path);
	*ret = TAKE_PTR(s);
	return 0;
}

int hutch_image_store_open(const char *path, struct hutch_image_store **ret, struct hutch_err *err)
{
	int r = store_open(path, ret, err);

	/* A store (or a directory of it) this user may not open or make is
	 * beyond them, not a failure of the system. */
	if (r == -EACCES && err->cls == HUTCH_ERRC_NONE)
		err->cls = HUTCH_ERRC_NOT_CAPABLE;
	return r;
}

/* Directories only (but the file skip), each (to depth levels down)
 * holding directories only. Takes dirfd. */
static bool only_empty_dirs(int fd, int depth, const char *skip)
{
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		(void)close(fd);
		return false;
	}
	while ((de = readdir(d))) {
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (skip && !strcmp(de->d_name, skip)))
			continue;
		if (depth == 0 ||
		    (sub = openat(dirfd(d), de->d_name,
		                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    !only_empty_dirs(sub, depth - 1, NULL))
			return false;
	}
	return true;
}

int hutch_image_store_unmake(struct hutch_image_store *s)
{
	struct hutch_err err = { 0 };
	int fd, r;

	if (!s || !s->made)
		return 0;
	/* Under the writers' lock (tmp/'s leftovers cleared): a store
	 * anything went into meanwhile is kept. The lock file is the only
	 * file; blobs/sha256 is two levels down. */
	if ((r = store_lock(s, &err)) < 0)
		return r;
	fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!only_empty_dirs(fd, 2, "lock"))
		return 0;
	if ((r = hutch_rm_rf_at(AT_FDCWD, s->path)) < 0)
		return r;
	s->made = false;
	return 1;
}

struct hutch_image_store *hutch_image_store_free(struct hutch_image_store *s)
{
	if (!s)
		return NULL;
	closep(&s->dirfd);
	closep(&s->layers);
	closep(&s->images);
	closep(&s->tmp);
	closep(&s->blobs);
	closep(&s->lock);
	free(s->path);
	free(s);
	return NULL;
}

void hutch_image_store_freep(struct hutch_image_store **s)
{
	hutch_image_store_free(*s);
}

int store_lock(struct hutch_image_store *s, struct hutch_err *err)
{
	struct stat st;

	if (s->lock >= 0)
		return 0;
	s->lock = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock < 0)
		return hutch_err_set_errno(err, -errno, "open image store lock");
	if (flock(s->lock, LOCK_EX) < 0) {
		int r = -errno;

		closep(&s->lock);
		return hutch_err_set_errno(err, r, "lock image store");
	}
	/* Removed while this waited: a first import into it failed and took
	 * back the store it made (hutch_image_store_unmake()). */
	if (fstat(s->dirfd, &st) == 0 && st.st_nlink == 0) {
		closep(&s->lock);
		return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -ESTALE,
		                           "image store '%s' was removed while this waited for "
		                           "its lock (a first import into it failed): run the "
		                           "command again",
		                           s->path);
	}
	clean_tmp(s);
	return 0;
}

int store_read_ref(struct hutch_image_store *s, const char *name, cJSON **ret,
                   struct hutch_err *err)
{
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	_cleanup_free_ char *buf = NULL;
	cJSON *j;
	ssize_t n;

	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image name '%.*s'", HUTCH_IMAGE_NAME_MAX,
		                           name ? name : "");
	store_ref_file(name, file);
	n = hutch_read_file_alloc_at(s->images, file, 1 << 20, &buf);
	if (n == -ENOENT)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                           "no image '%s' in the store", name);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read image '%s'", name);
	j = cJSON_ParseWithLength(buf, (size_t)n);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return hutch_err_set(err, -EINVAL, "image '%s' has a damaged reference file", name);
	}
	*ret = j;
	return 0;
}

int store_write_file(struct hutch_image_store *s, int dirfd, const char *name, const void *buf,
                     size_t len, struct hutch_err *err)
{
	static unsigned counter;
	char tmp[64];
	int r;

	snprintf(tmp, sizeof(tmp), "file-%d-%u", (int)getpid(), counter++);
	r = hutch_write_bytes_at(s->tmp, tmp, buf, len, 0644);
	if (r >= 0 && renameat(s->tmp, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(s->tmp, tmp, 0);
		return hutch_err_set_errno(err, r, "store '%s'", name);
	}
	return 0;
}

int store_write_ref(struct hutch_image_store *s, const char *name, const cJSON *j,
                    struct hutch_err *err)
{
	_cleanup_free_ char *text = cJSON_Print(j);
	char file[HUTCH_IMAGE_NAME_MAX + 1];

	if (!text)
		return hutch_err_set(err, -ENOMEM, "image reference");
	store_ref_file(name, file);
	if (store_write_file(s, s->images, file, text, strlen(text), err) < 0)
		return hutch_err_prefix(err, "store image '%s'", name);
	return 0;
}

/* Every layer the reference names is in layers/. */
static bool layers_present(struct hutch_image_store *s, const cJSON *img)
{
	const cJSON *l;

	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(img, "layers"))
		if (!cJSON_IsString(l) || !hutch_image_digest_is_valid(l->valuestring) ||
		    faccessat(s->layers, l->valuestring + 7, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			return false;
	return true;
}

int store_ref_copy_by_manifest(struct hutch_image_store *s, const char *manifest, const char *name,
                               struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *all = NULL;
	cJSON *img, *copy;
	int r;

	r = hutch_image_list(s, &all, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(img, all) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(img, "manifest");

		if (!cJSON_IsString(m) || strcmp(m->valuestring, manifest) ||
		    !layers_present(s, img))
			continue;
		copy = img;
		cJSON_ReplaceItemInObjectCaseSensitive(copy, "name", cJSON_CreateString(name));
		cJSON_ReplaceItemInObjectCaseSensitive(copy, "imported",
		                                       cJSON_CreateNumber((double)time(NULL)));
		r = store_write_ref(s, name, copy, err);
		if (r < 0)
			return r;
		return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(copy, "layers")) ?: 1;
	}
	return 0;
}

int hutch_image_list(struct hutch_image_store *s, cJSON **ret, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd;

	fd = fcntl(s->images, F_DUPFD_CLOEXEC, 3);
	if (fd < 0 || !arr)
		return hutch_err_set_errno(err, fd < 0 ? -errno : -ENOMEM, "list images");
	d = fdopendir(fd);
	if (!d) {
		(void)close(fd);
		return hutch_err_set_errno(err, -errno, "list images");
	}
	while ((de = readdir(d))) {
		struct hutch_err ignored = { 0 };
		char name[HUTCH_IMAGE_NAME_MAX + 1];
		cJSON *j = NULL;

		if (de->d_name[0] == '.' || strlen(de->d_name) > HUTCH_IMAGE_NAME_MAX)
			continue;
		memcpy(name, de->d_name, strlen(de->d_name) + 1);
		for (char *c = name; *c; c++)
			if (*c == '%')
				*c = '/';
		if (store_read_ref(s, name, &j, &ignored) == 0)
			cJSON_AddItemToArray(arr, j);
	}
	*ret = TAKE_PTR(arr);
	return 0;
}

int hutch_image_inspect(struct hutch_image_store *s, const char *name, cJSON **ret,
                        struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	_cleanup_free_ char *buf = NULL;
	struct hutch_image_config c = { 0 };
	const cJSON *cfg;
	char platform[40];
	cJSON *env;
	ssize_t n;
	int r;

	r = store_read_ref(s, name, &j, err);
	if (r < 0)
		return r;
	cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
	if (!cJSON_IsString(cfg) || !hutch_image_digest_is_valid(cfg->valuestring))
		return hutch_err_set(err, -EINVAL, "image '%s' names no config", name);
	n = hutch_read_file_alloc_at(s->blobs, cfg->valuestring + 7, 4 << 20, &buf);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read the config of image '%s'", name);
	r = hutch_image_parse_config(buf, (size_t)n, &c, err);
	if (r < 0)
		return r;
	env = cJSON_AddArrayToObject(j, "env");
	for (char **e = c.env; env && e && *e; e++)
		cJSON_AddItemToArray(env, cJSON_CreateString(*e));
	(void)cJSON_AddStringToObject(j, "workdir", c.workdir ? c.workdir : "");
	snprintf(platform, sizeof(platform), "%s/%s", c.os, c.arch);
	(void)cJSON_AddStringToObject(j, "platform", platform);
	hutch_image_config_done(&c);
	*ret = TAKE_PTR(j);
	return 0;
}

bool hutch_image_is_snapshot(const cJSON *ref)
{
	return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ref, "snapshot"));
}

/* The id of a live sandbox (its use record locked) whose root has layer,
 * into ret_id; 0 if none. */
static int find_user(struct hutch_image_store *s, const char *layer, char ret_id[64],
                     struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = store_open_users(s, err);

	if (fd < 0)
		return fd;
	if (!(d = fdopendir(fd))) {
		(void)close(fd);
		return hutch_err_set_errno(err, -errno, "read the store's users");
	}
	while ((de = readdir(d))) {
		_cleanup_close_ int rec = -EBADF;
		char buf[HUTCH_IMAGE_LAYERS_MAX * (HUTCH_IMAGE_DIGEST_LEN + 1) + 1];
		ssize_t n;

		if (de->d_name[0] == '.' ||
		    (rec = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			continue;
		if (flock(rec, LOCK_EX | LOCK_NB) == 0)
			continue; /* no live holder */
		n = hutch_read_all(rec, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strstr(buf, layer)) {
			snprintf(ret_id, 64, "%.63s", de->d_name);
			return 1;
		}
	}
	return 0;
}

static int snapshot_unused(struct hutch_image_store *s, const char *name, const cJSON *ref,
                           struct hutch_err *err)
{
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(ref, "layers");
	const cJSON *top = cJSON_GetArrayItem(layers, cJSON_GetArraySize(layers) - 1);
	char id[64];
	int r;

	if (!hutch_image_is_snapshot(ref))
		return 0;
	if (!cJSON_IsString(top))
		return hutch_err_set(err, -EINVAL, "snapshot '%s' has a damaged reference", name);
	r = find_user(s, top->valuestring, id, err);
	if (r < 0)
		return r;
	if (r > 0)
		return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EBUSY,
		                           "snapshot '%s' is in use by sandbox %s (spawned or "
		                           "forked from it, or pooled): 'hutch rm %s' first",
		                           name, id, id);
	return 0;
}

int hutch_image_remove(struct hutch_image_store *s, const char *name, struct hutch_err *err)
{
	char file[HUTCH_IMAGE_NAME_MAX + 1];
	_cleanup_cjson_ cJSON *ref = NULL;
	int r;

	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image name '%.*s'", HUTCH_IMAGE_NAME_MAX,
		                           name ? name : "");
	r = store_lock(s, err);
	if (r < 0)
		return r;
	/* A snapshot a live sandbox's root holds stays (as snapshot rm). */
	if (store_read_ref(s, name, &ref, err) == 0 && (r = snapshot_unused(s, name, ref, err)) < 0)
		return r;
	hutch_err_clear(err);
	store_ref_file(name, file);
	if (unlinkat(s->images, file, 0) < 0)
		return errno == ENOENT
		               ? hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                                     "no image '%s' in the store", name)
		               : hutch_err_set_errno(err, -errno, "remove image '%s'", name);
	return 0;
}

/* The names of dir's entries that used (an object of digests) lacks. */
static size_t remove_unused(int dir, const cJSON *used)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	char digest[300];
	size_t n = 0;
	int fd = fcntl(dir, F_DUPFD_CLOEXEC, 3);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(digest, sizeof(digest), "sha256:%s", de->d_name);
		if (cJSON_GetObjectItemCaseSensitive(used, digest))
			continue;
		if (hutch_rm_rf_at(dir, de->d_name) == 0)
			n++;
	}
	return n;
}

static void mark(cJSON *used, const cJSON *v)
{
	if (cJSON_IsString(v) && !cJSON_GetObjectItemCaseSensitive(used, v->valuestring))
		(void)cJSON_AddTrueToObject(used, v->valuestring);
}

/* One use record: if a live sandbox holds it, its layers are used; if
 * none does (its supervisor died), it is removed. */
static void mark_use(cJSON *used, int users, const char *name)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[HUTCH_IMAGE_LAYERS_MAX * (HUTCH_IMAGE_DIGEST_LEN + 1) + 1];
	ssize_t n;

	fd = openat(users, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		(void)unlinkat(users, name, 0);
		return;
	}
	n = hutch_read_all(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return;
	buf[n] = '\0';
	for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (hutch_image_digest_is_valid(line) &&
		    !cJSON_GetObjectItemCaseSensitive(used, line))
			(void)cJSON_AddTrueToObject(used, line);
}

/* The layers of every live sandbox (and so of every pooled one). */
static int mark_users(struct hutch_image_store *s, cJSON *used, struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = store_open_users(s, err);

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		(void)close(fd);
		return hutch_err_set_errno(err, -errno, "read the store's users");
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			mark_use(used, dirfd(d), de->d_name);
	return 0;
}

int hutch_image_prune(struct hutch_image_store *s, size_t *ret_removed, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *all = NULL, *used = cJSON_CreateObject();
	_cleanup_close_ int owners = -EBADF;
	const cJSON *img, *l;
	int r;

	if (!used)
		return hutch_err_set(err, -ENOMEM, "prune images");
	r = store_lock(s, err);
	if (r < 0)
		return r;
	r = hutch_image_list(s, &all, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(img, all) {
		mark(used, cJSON_GetObjectItemCaseSensitive(img, "config"));
		mark(used, cJSON_GetObjectItemCaseSensitive(img, "manifest"));
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(img, "layers"))
			mark(used, l);
	}
	r = mark_users(s, used, err);
	if (r < 0)
		return r;
	*ret_removed = remove_unused(s->layers, used);
	(void)remove_unused(s->blobs, used);
	owners = openat(s->dirfd, "owners", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (owners >= 0)
		(void)remove_unused(owners, used); /* an index goes with its layer */
	(void)hutch_rm_rf_at(s->dirfd, "oci");
	return 0;
}
