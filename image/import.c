/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Importing an image into the store: an OCI image layout directory (what
 * skopeo writes), or an archive (docker save's format, or an OCI layout in
 * a tar), which is first unpacked into tmp/ with the same hostile-safe
 * unpacker and then read as a layout or by its manifest.json.
 *
 * Every JSON document is checked against its digest before it is parsed;
 * every layer against both its blob digest and its config's diff_id, in
 * the one pass that unpacks it. A layer is unpacked into tmp/ and renamed
 * into layers/ only once both match, so layers/ holds only verified trees.
 *
 * As root, the unpacking runs in a child process in a new user namespace
 * that maps its ids 0-65535 onto HUTCH_IMAGE_STORE_IDS: it has no
 * privilege over any host file but the half-made layer (chowned to the
 * store's root first), cannot create a device node (only the overlayfs
 * whiteout, which mknod() allows anyone), and a set-uid file it might
 * still make would be set-uid to an id no host process uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"
#include "syscalls.h"

#if defined(__x86_64__)
#define HOST_ARCH "amd64"
#elif defined(__aarch64__)
#define HOST_ARCH "arm64"
#else
#define HOST_ARCH "unknown"
#endif

/* A file of an unpacked archive or a layout, symlinks resolved inside it. */
static int open_in(int root, const char *path, struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
		                .resolve =
		                        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	struct stat st;
	int fd = (int)sys_openat2(root, path, &how, sizeof(how));

	/* A file the layout lacks, or one that leads out of it, is the
	 * caller's input (64, as before the classes), not an I/O failure. */
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -errno,
		                           "open '%s' of the image: %s", path, strerror(errno));
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s' of the image", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'%s' of the image is not a file", path);
	}
	return fd;
}

/* Read a JSON document; with want, check its digest first. */
static int read_doc(int root, const char *path, const char *want, char **ret, size_t *ret_len,
                    struct hutch_err *err)
{
	_cleanup_close_ int fd = open_in(root, path, err);
	_cleanup_free_ char *buf = NULL;
	char got[HUTCH_IMAGE_DIGEST_LEN + 1];
	struct hutch_sha256 h;
	ssize_t n;

	if (fd < 0)
		return fd;
	buf = malloc(HUTCH_IMAGE_JSON_MAX + 1);
	if (!buf)
		return hutch_err_set(err, -ENOMEM, "read '%s'", path);
	n = hutch_read_all(fd, buf, HUTCH_IMAGE_JSON_MAX + 1);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '%s' of the image", path);
	if (n > HUTCH_IMAGE_JSON_MAX)
		return hutch_err_set(err, -EFBIG, "'%s' of the image is too large", path);
	hutch_sha256_init(&h);
	hutch_sha256_update(&h, buf, (size_t)n);
	hutch_sha256_final(&h, got);
	if (want && strcmp(want, got))
		return hutch_err_set(err, -EBADMSG, "'%s' has digest %s, not %s", path, got, want);
	buf[n] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = (size_t)n;
	return 0;
}

static void blob_path(const char *digest, char out[HUTCH_IMAGE_DIGEST_LEN + 16])
{
	snprintf(out, HUTCH_IMAGE_DIGEST_LEN + 16, "blobs/sha256/%s", digest + 7);
}

static int write_map(pid_t pid, const char *file, const char *content)
{
	char path[64];
	_cleanup_close_ int fd = -EBADF;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return hutch_write_all(fd, content, strlen(content));
}

/*
 * What the unpacker child writes on its result pipe, each a type byte and
 * a fixed-size body, so that the parent reads a bounded amount per
 * message and never a length from the child: 'u' (no body) once its user
 * namespace exists, 'p' and a uint64_t (the blob's bytes read so far) any
 * number of times, 'r' and a struct hutch_unpack_report last.
 */
#define MSG_USERNS   'u'
#define MSG_PROGRESS HUTCH_UNPACK_MSG_PROGRESS
#define MSG_RESULT   HUTCH_UNPACK_MSG_RESULT

static void child_progress(void *ud, uint64_t read)
{
	char msg[1 + sizeof(uint64_t)] = { MSG_PROGRESS };

	memcpy(msg + 1, &read, sizeof(read));
	(void)hutch_write_all(*(int *)ud, msg, sizeof(msg)); /* < PIPE_BUF: one write */
}

_Noreturn static void child(pid_t parent, int go, int res, int fd, int dirfd,
                            struct hutch_unpack_limits *lim)
{
	struct hutch_unpack_report out = { 0 };
	char c = MSG_USERNS;

	lim->progress = lim->progress ? child_progress : NULL;
	lim->progress_ud = &res;
	if (unshare(CLONE_NEWUSER) < 0) {
		out.r = hutch_err_set_errno(&out.err, -errno, "unpack: new user namespace");
	} else {
		(void)hutch_write_all(res, &c, 1);
		/* The parent-death signal after the change of ids, which clears
		 * it: a killed import leaves no unpacker writing on. */
		if (hutch_read_all(go, &c, 1) != 1 || c != 'g' || setresgid(0, 0, 0) < 0 ||
		    setresuid(0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
		    getppid() != parent)
			out.r = hutch_err_set_errno(&out.err, -EPERM, "unpack: become store root");
		else
			out.r = hutch_image_unpack(fd, dirfd, lim, &out.res, &out.err);
	}
	c = MSG_RESULT;
	(void)hutch_write_all(res, &c, 1);
	(void)hutch_write_all(res, &out, sizeof(out));
	_exit(0);
}

static int map_child(pid_t pid)
{
	char map[64];
	int r;

	snprintf(map, sizeof(map), "0 %u 65536\n", HUTCH_IMAGE_STORE_IDS);
	if ((r = write_map(pid, "uid_map", map)) < 0 ||
	    (r = write_map(pid, "setgroups", "deny")) < 0 ||
	    (r = write_map(pid, "gid_map", map)) < 0)
		return r;
	return 0;
}

int store_unpack(int fd, int dirfd, struct hutch_unpack_limits *lim,
                 struct hutch_unpack_result *ret, struct hutch_err *err)
{
	struct hutch_unpack_report out = { 0 };
	int go[2] = { -EBADF, -EBADF }, res[2] = { -EBADF, -EBADF };
	pid_t pid, parent = getpid();
	int r = 0, status;
	char c = 0;

	if (geteuid() != 0)
		return hutch_image_unpack(fd, dirfd, lim, ret, err); /* rootless: our own ids */
	if (fchown(dirfd, HUTCH_IMAGE_STORE_IDS, HUTCH_IMAGE_STORE_IDS) < 0)
		return hutch_err_set_errno(err, -errno,
		                           "unpack: hand the layer to the store's ids");
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0) {
		r = hutch_err_set_errno(err, -errno, "unpack: pipe");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		r = hutch_err_set_errno(err, -errno, "unpack: fork");
		goto out;
	}
	if (pid == 0)
		child(parent, go[0], res[1], fd, dirfd, lim);
	closep(&res[1]);
	if (hutch_read_all(res[0], &c, 1) == 1 && c == MSG_USERNS) {
		r = map_child(pid);
		c = r < 0 ? 'x' : 'g';
		(void)hutch_write_all(go[1], &c, 1);
		if (hutch_image_read_reports(res[0], &out, lim) < 0)
			out.r = hutch_err_set(&out.err, r < 0 ? r : -EIO,
			                      "unpack: the unpacker died");
	} else if (c != MSG_RESULT ||
	           hutch_read_all(res[0], &out, sizeof(out)) != (ssize_t)sizeof(out)) {
		out.r = hutch_err_set(&out.err, -EIO, "unpack: the unpacker died");
	}
	if (out.r < 0)
		(void)kill(pid, SIGKILL); /* it may still be there, having said nonsense */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (out.r < 0) {
		*err = out.err;
		err->msg[sizeof(err->msg) - 1] = '\0';
		err->code = r = out.r;
	} else {
		*ret = out.res;
		r = 0;
	}
out:
	hutch_close_many(go, 2);
	hutch_close_many(res, 2);
	return r;
}

/*
 * tmp/ as the top of a hierarchy (chattr +T) where the file system has
 * the flag (ext4): each directory made in it, a layer being unpacked, is
 * placed as a top-level directory is (Orlov: a block group of the disk
 * with more free inodes and fewer directories than the average, from a
 * hash of its name), and its files follow it, rather than all in the
 * store's group. On an ext4 without a journal every new inode's search
 * skips each inode of its group deleted in the last minutes (the kernel's
 * recently_deleted(), one buffer look-up each): after a prune of a
 * snapshot of 1,000 files, the next one's 1,000 creates scanned 1,000
 * and more deleted inodes each, 74% of its unpacker's CPU
 * (docs/snapshots.md "Where the time went on this machine's ext4").
 * A placement hint only: where it cannot be set, nothing changes.
 */
static void spread_tmp(int tmp)
{
	int flags = 0;

	if (ioctl(tmp, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
		flags |= FS_TOPDIR_FL;
		(void)ioctl(tmp, FS_IOC_SETFLAGS, &flags);
	}
}

int store_make_tmp(struct hutch_image_store *s, const char *what, char name[64],
                   struct hutch_err *err)
{
	static unsigned counter;
	int fd;

	spread_tmp(s->tmp);
	snprintf(name, 64, "%s-%d-%u", what, (int)getpid(), counter++);
	if (mkdirat(s->tmp, name, 0755) < 0)
		return hutch_err_set_errno(err, -errno, "create '%s' in the store", name);
	fd = openat(s->tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s' in the store", name);
	return fd;
}

/* One import's state for its progress reports. */
struct run {
	struct hutch_image_import_stats *st;
	struct hutch_image_progress p; /* of the layer being unpacked */
	uint64_t before;               /* blob bytes of the layers unpacked before it */
	uint64_t image_bytes;          /* uncompressed bytes of the image's layers so far */
};

static void report(struct run *run, size_t n, const char *diff_id, uint64_t bytes, bool cached)
{
	if (run->st->on_layer)
		run->st->on_layer(run->st->ud, run->st->layers, n, diff_id, bytes, cached);
}

/* The unpacker's count of blob bytes read, to on_progress. The count comes
 * from the unpacker child: clamped to the blob's size, never backwards. */
static void on_read(void *ud, uint64_t read)
{
	struct run *run = ud;

	if (read > run->p.size)
		read = run->p.size;
	if (read < run->p.read)
		return;
	run->p.read = read;
	run->p.total_read = run->before + read;
	if (run->st->on_progress)
		run->st->on_progress(run->st->ud, &run->p);
}

/* Unpack fd into dir, reporting progress as what (layer i of n, or 0 of 0
 * for an archive). */
static int unpack_reporting(struct run *run, int fd, int dir, int owners_fd, size_t i, size_t n,
                            const char *what, struct hutch_unpack_result *res,
                            struct hutch_err *err)
{
	struct hutch_unpack_limits lim;
	bool image_bound;
	struct stat sb;
	uint64_t left;
	int r;

	hutch_unpack_limits_default(&lim);
	lim.keep_owners = owners_fd >= 0;
	lim.owners_fd = owners_fd;
	run->p.layer = i;
	run->p.layers = n;
	run->p.diff_id = what;
	run->p.read = 0;
	run->p.size = fstat(fd, &sb) == 0 && sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
	if (run->p.total_size < run->before + run->p.size)
		run->p.total_size = run->before + run->p.size; /* an archive's own */
	run->p.total_read = run->before;
	if (run->st->on_progress) {
		lim.progress = on_read;
		lim.progress_ud = run;
		run->st->on_progress(run->st->ud, &run->p);
	}
	/* A layer (not an archive) gets what is left of the image's bound,
	 * when that is less than a layer's own. */
	left = lim.max_image_bytes > run->image_bytes ? lim.max_image_bytes - run->image_bytes : 0;
	image_bound = n > 0 && left < lim.max_bytes;
	if (image_bound)
		lim.max_bytes = left;
	r = store_unpack(fd, dir, &lim, res, err);
	run->before += run->p.size;
	if (r == -EFBIG && image_bound)
		return hutch_err_set(err, r,
		                     "image is larger than %llu bytes (HUTCH_IMAGE_MAX_BYTES) at "
		                     "layer %zu of %zu",
		                     (unsigned long long)lim.max_image_bytes, i, n);
	if (r >= 0 && n > 0)
		run->image_bytes += res->bytes;
	return r;
}

static bool have_layer(struct hutch_image_store *s, const char *diff_id)
{
	return faccessat(s->layers, diff_id + 7, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The size of a layer's blob that is to be unpacked (0 if in the store). */
static uint64_t size_to_unpack(struct hutch_image_store *s, int root, const char *path,
                               const char *diff_id)
{
	struct hutch_err ignored = { 0 };
	_cleanup_close_ int fd = -EBADF;
	struct stat sb;

	if (have_layer(s, diff_id) || (fd = open_in(root, path, &ignored)) < 0 ||
	    fstat(fd, &sb) < 0)
		return 0;
	return (uint64_t)sb.st_size;
}

/* One layer into layers/<hex of diff_id>, unless it is there already; n:
 * the image's number of layers, for the progress report. */
static int import_layer(struct hutch_image_store *s, int root, const char *path,
                        const char *want_blob, const char *diff_id, size_t n, struct run *run,
                        struct hutch_err *err)
{
	struct hutch_image_import_stats *st = run->st;
	_cleanup_close_ int fd = -EBADF, dir = -EBADF;
	struct hutch_unpack_result res = { 0 };
	_cleanup_close_ int owners = -EBADF;
	char tmp[64];
	int r;

	st->layers++;
	/* A layer already in the store counts nothing towards the image's
	 * bound: it was bounded when it came, and takes no more room now. */
	if (have_layer(s, diff_id)) {
		st->cached++;
		report(run, n, diff_id, 0, true);
		return 0;
	}
	fd = open_in(root, path, err);
	if (fd < 0)
		return fd;
	dir = store_make_tmp(s, "layer", tmp, err);
	if (dir < 0)
		return dir;
	r = owners = store_owners_begin(s, tmp, err);
	if (r >= 0 || r == -EBADF)
		r = unpack_reporting(run, fd, dir, owners, st->layers, n, diff_id, &res, err);
	if (r >= 0 && want_blob && strcmp(res.blob_digest, want_blob))
		r = hutch_err_set(err, -EBADMSG, "layer '%s' has digest %s, not %s", path,
		                  res.blob_digest, want_blob);
	if (r >= 0 && strcmp(res.diff_id, diff_id))
		r = hutch_err_set(err, -EBADMSG, "layer '%s' has diff_id %s, not %s", path,
		                  res.diff_id, diff_id);
	if (r >= 0)
		r = store_owners_end(s, tmp, &owners, diff_id, err);
	if (r >= 0 && renameat(s->tmp, tmp, s->layers, diff_id + 7) < 0)
		r = hutch_err_set_errno(err, -errno, "store layer %s", diff_id);
	if (r < 0) {
		(void)store_owners_end(s, tmp, &owners, NULL, err);
		(void)hutch_rm_rf_at(s->tmp, tmp);
		return r;
	}
	st->bytes += res.bytes;
	report(run, n, diff_id, res.bytes, false);
	return 0;
}

static int save_blob(struct hutch_image_store *s, const char *digest, const char *buf, size_t len,
                     struct hutch_err *err)
{
	int r;

	if (!digest)
		return 0;
	/* Whole: the digest was checked over len bytes, NULs included. */
	r = store_write_file(s, s->blobs, digest + 7, buf, len, err);
	return r < 0 ? hutch_err_prefix(err, "store blob %s", digest) : 0;
}

/* images/<name>: what a sandbox needs to find its layers. */
static int save_ref(struct hutch_image_store *s, const char *name, const char *manifest,
                    const struct hutch_image_config *c, const char *config, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
	cJSON *layers;

	if (!j || !cJSON_AddStringToObject(j, "name", name) ||
	    !(manifest ? cJSON_AddStringToObject(j, "manifest", manifest)
	               : cJSON_AddNullToObject(j, "manifest")) ||
	    !cJSON_AddStringToObject(j, "config", config) ||
	    !(layers = cJSON_AddArrayToObject(j, "layers")) ||
	    !cJSON_AddNumberToObject(j, "imported", (double)time(NULL)))
		return hutch_err_set(err, -ENOMEM, "image reference");
	for (size_t i = 0; i < c->n_diff_ids; i++)
		cJSON_AddItemToArray(layers, cJSON_CreateString(c->diff_ids[i]));
	return store_write_ref(s, name, j, err);
}

/* The manifest of a layout: by tag, else this platform's (one nested index deep). */
static int layout_manifest(int root, const char *tag, char digest[HUTCH_IMAGE_DIGEST_LEN + 1],
                           struct hutch_err *err)
{
	_cleanup_free_ char *buf = NULL;
	char path[HUTCH_IMAGE_DIGEST_LEN + 16];
	bool nested = false;
	size_t len;
	int r;

	r = read_doc(root, "index.json", NULL, &buf, &len, err);
	if (r < 0)
		return r;
	r = hutch_image_parse_index(buf, len, tag, "linux", HOST_ARCH, digest, &nested, err);
	if (r < 0 || !nested)
		return r;
	free(TAKE_PTR(buf));
	blob_path(digest, path);
	r = read_doc(root, path, digest, &buf, &len, err);
	if (r < 0)
		return r;
	return hutch_image_parse_index(buf, len, NULL, "linux", HOST_ARCH, digest, &nested, err);
}

static int import_layout(struct hutch_image_store *s, int root, const char *tag, const char *name,
                         struct run *run, struct hutch_err *err)
{
	_cleanup_free_ char *mbuf = NULL, *cbuf = NULL;
	_cleanup_free_ struct hutch_image_manifest *m = calloc(1, sizeof(*m));
	struct hutch_image_config c = { 0 };
	char digest[HUTCH_IMAGE_DIGEST_LEN + 1], path[HUTCH_IMAGE_DIGEST_LEN + 16];
	size_t mlen, clen;
	int r;

	if (!m)
		return hutch_err_set(err, -ENOMEM, "image manifest");
	if ((r = layout_manifest(root, tag, digest, err)) < 0)
		return r;
	blob_path(digest, path);
	if ((r = read_doc(root, path, digest, &mbuf, &mlen, err)) < 0 ||
	    (r = hutch_image_parse_manifest(mbuf, mlen, m, err)) < 0)
		return r;
	blob_path(m->config, path);
	if ((r = read_doc(root, path, m->config, &cbuf, &clen, err)) < 0 ||
	    (r = hutch_image_parse_config(cbuf, clen, &c, err)) < 0)
		return r;
	if (c.n_diff_ids != m->n_layers)
		r = hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                        "image has %zu layers but %zu diff_ids", m->n_layers,
		                        c.n_diff_ids);
	for (size_t i = 0; r >= 0 && i < m->n_layers; i++) {
		blob_path(m->layers[i], path);
		run->p.total_size += size_to_unpack(s, root, path, c.diff_ids[i]);
	}
	for (size_t i = 0; r >= 0 && i < m->n_layers; i++) {
		blob_path(m->layers[i], path);
		r = import_layer(s, root, path, m->layers[i], c.diff_ids[i], m->n_layers, run, err);
	}
	if (r >= 0 && (r = save_blob(s, digest, mbuf, mlen, err)) >= 0 &&
	    (r = save_blob(s, m->config, cbuf, clen, err)) >= 0)
		r = save_ref(s, name, digest, &c, m->config, err);
	hutch_image_config_done(&c);
	return r;
}

/* docker save's own format: manifest.json, a config file, uncompressed layer tars. */
static int import_docker(struct hutch_image_store *s, int root, const char *name, struct run *run,
                         struct hutch_err *err)
{
	_cleanup_free_ char *mbuf = NULL, *cbuf = NULL;
	_cleanup_free_ struct hutch_image_docker *d = calloc(1, sizeof(*d));
	struct hutch_image_config c = { 0 };
	char cdigest[HUTCH_IMAGE_DIGEST_LEN + 1];
	struct hutch_sha256 h;
	size_t mlen, clen;
	int r;

	if (!d)
		return hutch_err_set(err, -ENOMEM, "image manifest");
	if ((r = read_doc(root, "manifest.json", NULL, &mbuf, &mlen, err)) < 0 ||
	    (r = hutch_image_parse_docker_manifest(mbuf, mlen, d, err)) < 0 ||
	    (r = read_doc(root, d->config, NULL, &cbuf, &clen, err)) < 0 ||
	    (r = hutch_image_parse_config(cbuf, clen, &c, err)) < 0)
		return r;
	hutch_sha256_init(&h);
	hutch_sha256_update(&h, cbuf, clen);
	hutch_sha256_final(&h, cdigest);
	if (c.n_diff_ids != d->n_layers)
		r = hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                        "image has %zu layers but %zu diff_ids", d->n_layers,
		                        c.n_diff_ids);
	for (size_t i = 0; r >= 0 && i < d->n_layers; i++)
		run->p.total_size += size_to_unpack(s, root, d->layers[i], c.diff_ids[i]);
	/* The layers' digests are their diff_ids: checked as they unpack. */
	for (size_t i = 0; r >= 0 && i < d->n_layers; i++)
		r = import_layer(s, root, d->layers[i], NULL, c.diff_ids[i], d->n_layers, run, err);
	if (r >= 0 && (r = save_blob(s, cdigest, cbuf, clen, err)) >= 0)
		r = save_ref(s, name, NULL, &c, cdigest, err);
	hutch_image_config_done(&c);
	return r;
}

static int import_archive(struct hutch_image_store *s, int fd, const char *tag, const char *name,
                          struct run *run, struct hutch_err *err)
{
	struct hutch_unpack_result res;
	_cleanup_close_ int dir = -EBADF;
	char tmp[64];
	int r;

	dir = store_make_tmp(s, "archive", tmp, err);
	if (dir < 0)
		return dir;
	r = unpack_reporting(run, fd, dir, -EBADF, 0, 0, NULL, &res, err);
	/* The layers' own progress starts anew: their bytes are counted again. */
	run->before = run->p.total_size = 0;
	if (r < 0)
		r = hutch_err_prefix(err, "image archive");
	else if (faccessat(dir, "oci-layout", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		r = import_layout(s, dir, tag, name, run, err);
	else
		r = import_docker(s, dir, name, run, err);
	(void)hutch_rm_rf_at(s->tmp, tmp);
	return r;
}

int hutch_image_import(struct hutch_image_store *s, const char *src, const char *tag,
                       const char *name, struct hutch_image_import_stats *stats,
                       struct hutch_err *err)
{
	struct hutch_image_import_stats st = { 0 };
	struct run run = { .st = &st };
	_cleanup_close_ int fd = -EBADF;
	struct stat sb;
	int r;

	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image name '%.*s' (letters, digits and "
		                           "._:/@+- only)",
		                           HUTCH_IMAGE_NAME_MAX, name ? name : "");
	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		r = hutch_err_set_errno(err, -errno, "open image '%s'", src);
		if (r == -ENOENT)
			err->cls = HUTCH_ERRC_NOT_FOUND; /* the path given names nothing */
		return r;
	}
	r = store_lock(s, err);
	if (r < 0)
		return r;
	if (stats) {
		st.on_layer = stats->on_layer;
		st.on_progress = stats->on_progress;
		st.ud = stats->ud;
	}
	if (S_ISDIR(sb.st_mode))
		r = import_layout(s, fd, tag, name, &run, err);
	else if (S_ISREG(sb.st_mode))
		r = import_archive(s, fd, tag, name, &run, err);
	else
		r = hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                        "image '%s' is neither a directory nor a file", src);
	if (r < 0)
		return r;
	if (stats)
		*stats = st;
	return 0;
}
