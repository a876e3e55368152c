/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox mounts of an image (supervisor, host side, before
 * clone3): the reference and config read from the store, a use record that
 * prune respects, and one detached mount per layer.
 *
 * The layers' files belong to the store's ids (HUTCH_IMAGE_STORE_IDS..
 * +65535), which no sandbox maps. Each layer is cloned with
 * open_tree(OPEN_TREE_CLONE) and idmapped with mount_setattr(MOUNT_ATTR_IDMAP)
 * through a throw-away user namespace whose map is "STORE_IDS uid_base
 * 65536": seen through the clone, store id 0 is the sandbox's root and
 * store id 1000 its appuser, while the files on disk stay unchanged and
 * shared by every sandbox. The clones are read-only, nosuid and nodev
 * before anyone else holds them. Idmapping a mount needs CAP_SYS_ADMIN
 * over the file system's superblock (the host's), which init never has:
 * the supervisor makes them and init inherits the fds (docs/history.md,
 * "Images").
 *
 * An ordinary user cannot idmap (CAP_SYS_ADMIN over the host's superblock
 * is root's): the layers of the user's own store are the user's files,
 * and the sandbox's root is the user, so image root is sandbox root with
 * no mapping at all. Each layer is then handed on as an O_PATH fd of its
 * directory, with the directory's path (layer_dir): init finds it again in
 * its own mount namespace and clones it there (rootfs/overlay.c).
 *
 * The use record users/<id> is a file held flock()ed shared for the
 * sandbox's life (the fd stays open in the supervisor); prune marks the
 * layers of every record it cannot lock exclusively as used.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"
#include "syscalls.h"
#include "util.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

#define USE_ATTRS (MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

void hutch_image_use_done(struct hutch_image_use *u)
{
	hutch_image_use_reap(u);
	hutch_close_many(u->layer_fds, u->n_layers);
	u->n_layers = 0;
	hutch_image_config_done(&u->config);
	closep(&u->use_fd);
	closep(&u->users_dir);
	free(u->layer_dir);
	u->layer_dir = NULL;
	free(u->owners);
	u->owners = NULL;
	u->owners_len = 0;
	free(u->use_path);
	u->use_path = NULL;
}

void hutch_image_use_let_go(struct hutch_image_use *u)
{
	if (u->users_dir >= 0 && u->id[0])
		(void)unlinkat(u->users_dir, u->id, 0);
	closep(&u->use_fd); /* its shared lock: the use is over */
}

void hutch_image_use_release(struct hutch_image_use *u)
{
	if (u->users_dir >= 0 && u->id[0])
		(void)unlinkat(u->users_dir, u->id, 0);
	hutch_image_use_done(u);
}

int hutch_image_resolve(struct hutch_image_store *s, const char *name,
                        char ret_manifest[HUTCH_IMAGE_DIGEST_LEN + 1], struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *ref = NULL;
	const cJSON *m;
	int r;

	r = store_read_ref(s, name, &ref, err);
	if (r < 0)
		return r;
	m = cJSON_GetObjectItemCaseSensitive(ref, "manifest");
	/* An image imported from a docker archive has no manifest digest:
	 * its config's digest names its content as well. */
	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(ref, "config");
	if (!cJSON_IsString(m) || !hutch_image_digest_is_valid(m->valuestring))
		return hutch_err_set(err, -EINVAL, "image '%s' has a damaged reference file", name);
	memcpy(ret_manifest, m->valuestring, HUTCH_IMAGE_DIGEST_LEN + 1);
	return 0;
}

/* The reference's layers (diff_ids, bottom first) and its parsed config. */
static int read_image(struct hutch_image_store *s, const char *name, const char *want,
                      struct hutch_image_use *u, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *ref = NULL;
	_cleanup_free_ char *buf = NULL;
	const cJSON *cfg, *layers;
	ssize_t n;
	int r;

	r = hutch_image_resolve(s, name, u->manifest, err);
	if (r < 0)
		return r;
	if (want && *want && strcmp(want, u->manifest) != 0)
		return hutch_err_set(err, -ESTALE, "image '%s' changed while the sandbox was made",
		                     name);
	r = store_read_ref(s, name, &ref, err);
	if (r < 0)
		return r;
	cfg = cJSON_GetObjectItemCaseSensitive(ref, "config");
	layers = cJSON_GetObjectItemCaseSensitive(ref, "layers");
	if (!cJSON_IsString(cfg) || !hutch_image_digest_is_valid(cfg->valuestring) ||
	    !cJSON_IsArray(layers) || cJSON_GetArraySize(layers) > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set(err, -EINVAL, "image '%s' has a damaged reference file", name);
	memcpy(u->config_digest, cfg->valuestring, HUTCH_IMAGE_DIGEST_LEN + 1);
	u->snapshot = hutch_image_is_snapshot(ref);
	n = hutch_read_file_alloc_at(s->blobs, cfg->valuestring + 7, 4 << 20, &buf);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read the config of image '%s'", name);
	r = hutch_image_parse_config(buf, (size_t)n, &u->config, err);
	if (r < 0)
		return hutch_err_prefix(err, "image '%s'", name);
	if (u->config.n_diff_ids != (size_t)cJSON_GetArraySize(layers) || u->config.n_diff_ids == 0)
		return hutch_err_set(err, -EINVAL, "image '%s' names %d layers, its config %zu",
		                     name, cJSON_GetArraySize(layers), u->config.n_diff_ids);
	return 0;
}

/* users/<id>, created and held shared: prune sees the use as live. */
static int record_use(struct hutch_image_store *s, const char *id, struct hutch_image_use *u,
                      struct hutch_err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	u->users_dir = store_open_users(s, err);
	if (u->users_dir < 0)
		return u->users_dir;
	snprintf(u->id, sizeof(u->id), "%s", id);
	u->use_fd = openat(u->users_dir, u->id, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                   0644);
	if (u->use_fd < 0)
		return hutch_err_set_errno(err, -errno, "record the use of image layers");
	if (asprintf(&u->use_path, "%s/users/%s", s->path, u->id) < 0) {
		u->use_path = NULL;
		return hutch_err_set(err, -ENOMEM, "record the use of image layers");
	}
	if (flock(u->use_fd, LOCK_SH) < 0)
		return hutch_err_set_errno(err, -errno, "lock the use of image layers");
	/* The diff_ids one a line: what prune keeps. */
	text = malloc(u->config.n_diff_ids * (HUTCH_IMAGE_DIGEST_LEN + 1) + 1);
	if (!text)
		return hutch_err_set(err, -ENOMEM, "record the use of image layers");
	for (size_t i = 0; i < u->config.n_diff_ids; i++)
		len += (size_t)sprintf(text + len, "%s\n", u->config.diff_ids[i]);
	r = hutch_write_all(u->use_fd, text, len);
	if (r < 0)
		return hutch_err_set_errno(err, r, "record the use of image layers");
	return 0;
}

/*
 * A user namespace mapping the store's ids onto the sandbox's: its fd. Its
 * process is killed once the fd is open, and *ret_pid is to be reaped:
 * waiting for it at once cost ~5 ms of every create (its exit tears down
 * a user namespace and a copy of the supervisor's memory).
 */
static int store_userns(uid_t uid_base, pid_t *ret_pid, struct hutch_err *err)
{
	char map[64];
	int fd;

	snprintf(map, sizeof(map), "%u %u 65536\n", HUTCH_IMAGE_STORE_IDS, (unsigned)uid_base);
	fd = hutch_userns_fd(map, map, ret_pid);
	if (fd == -ENOSYS || (fd < 0 && *ret_pid == 0))
		return hutch_err_set_errno(err, fd, "clone a user namespace for the layers");
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "map the store's ids onto the sandbox's");
	return fd;
}

void hutch_image_use_reap(struct hutch_image_use *u)
{
	if (u->helper_pid > 0)
		(void)waitpid(u->helper_pid, NULL, 0);
	u->helper_pid = 0;
}

static int missing(const char *diff_id, struct hutch_err *err)
{
	return hutch_err_set(
	        err, -ENOENT,
	        "layer %.19s is missing from the store: import or pull the image again", diff_id);
}

static int clone_layer(struct hutch_image_store *s, const char *diff_id, int userns,
                       struct hutch_err *err)
{
	struct mount_attr attr = { .attr_set = USE_ATTRS, .userns_fd = (uint64_t)userns };
	_cleanup_close_ int fd = -EBADF;

	fd = sys_open_tree(s->layers, diff_id + 7,
	                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT
		               ? missing(diff_id, err)
		               : hutch_err_set_errno(err, -errno, "clone layer %.19s", diff_id);
	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno,
		                           "idmap layer %.19s (overlayfs needs "
		                           "idmapped mounts: Linux 5.19+ on ext4, xfs, "
		                           "btrfs or tmpfs)",
		                           diff_id);
	return TAKE_FD(fd);
}

/* Rootless: the layer's directory, beneath the store's layers/. */
static int open_layer_dir(struct hutch_image_store *s, const char *diff_id, struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	int fd = sys_openat2(s->layers, diff_id + 7, &how, sizeof(how));

	if (fd < 0)
		return errno == ENOENT
		               ? missing(diff_id, err)
		               : hutch_err_set_errno(err, -errno, "open layer %.19s", diff_id);
	return fd;
}

/* The store's layers/ as this mount namespace names it (init's copy of it
 * has the same path). */
static int layer_dir_path(struct hutch_image_store *s, char **ret, struct hutch_err *err)
{
	char link[64], buf[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", s->layers);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n < 0)
		return hutch_err_set_errno(err, -errno, "find the store's layers");
	buf[n] = '\0';
	if (buf[0] != '/')
		return hutch_err_set(err, -EINVAL,
		                     "the store's layers are not reachable ('%.200s')", buf);
	*ret = strdup(buf);
	return *ret ? 0 : hutch_err_set(err, -ENOMEM, "find the store's layers");
}

int hutch_image_use(struct hutch_image_store *s, const char *name, const char *want_manifest,
                    const char *id, uid_t uid_base, bool idmap, struct hutch_image_use *ret,
                    struct hutch_err *err)
{
	struct hutch_image_use u = { .use_fd = -EBADF, .users_dir = -EBADF };
	_cleanup_close_ int userns = -EBADF;
	int r;

	r = read_image(s, name, want_manifest, &u, err);
	if (r >= 0)
		r = record_use(s, id, &u, err);
	if (r >= 0)
		r = idmap ? (userns = store_userns(uid_base, &u.helper_pid, err))
		          : layer_dir_path(s, &u.layer_dir, err);
	if (r >= 0 && !idmap)
		r = store_owners_read(s, &u.config, &u.owners, &u.owners_len, err);
	for (size_t i = 0; r >= 0 && i < u.config.n_diff_ids; i++) {
		r = idmap ? clone_layer(s, u.config.diff_ids[i], userns, err)
		          : open_layer_dir(s, u.config.diff_ids[i], err);
		if (r >= 0)
			u.layer_fds[u.n_layers++] = r;
	}
	if (r < 0) {
		hutch_image_use_release(&u);
		return r;
	}
	*ret = u;
	return 0;
}

int hutch_image_probe(const char *path, struct hutch_err *err)
{
	struct mount_attr attr = { .attr_set = USE_ATTRS };
	_cleanup_close_ int userns = -EBADF, fd = -EBADF, fsfd = -EBADF;
	int how = HUTCH_IMAGE_LAYERS_BY_FD;
	struct utsname u;
	struct stat st;
	pid_t pid = 0;

	fd = sys_open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "clone '%s'", path);
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return hutch_err_set(err, -ENOTDIR, "'%s' is not a directory", path);
	if (uname(&u) < 0)
		snprintf(u.release, sizeof(u.release), "unknown");
	userns = store_userns(HUTCH_IMAGE_STORE_IDS, &pid, err);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	if (userns < 0)
		return userns;
	attr.userns_fd = (uint64_t)userns;
	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno,
		                           "idmapped mounts of '%s' (Linux 5.19+ on ext4, xfs, "
		                           "btrfs or tmpfs)",
		                           path);
	fsfd = sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return hutch_err_set_errno(err, -errno, "overlayfs (modprobe overlay)");
	/* What rootfs/overlay.c does: EOPNOTSUPP (6.1's legacy option
	 * parser) or EINVAL (6.5-6.12) before 6.13 is a kernel whose
	 * overlayfs takes the layers by path (as strings 6.1's fsconfig
	 * checks only at create: the version says whether idmapped layers
	 * will be taken). */
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FD, "lowerdir+", NULL, fd) < 0) {
		if ((errno != EINVAL && errno != EOPNOTSUPP) ||
		    hutch_kernel_at_least(u.release, 6, 13))
			return hutch_err_set_errno(err, -errno,
			                           "overlayfs layers by fd (lowerdir+)");
		if (!hutch_kernel_at_least(u.release, 5, 19))
			return hutch_err_set(err, -EOPNOTSUPP,
			                     "overlayfs over idmapped layers needs Linux 5.19+, "
			                     "this kernel is %.64s",
			                     u.release);
		how = HUTCH_IMAGE_LAYERS_BY_PATH;
	}
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
		return hutch_err_set_errno(err, -errno, "overlayfs option userxattr (Linux 5.11+)");
	return how;
}
