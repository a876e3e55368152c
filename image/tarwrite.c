/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's writes as one OCI layer (a tar stream), for a filesystem
 * snapshot (docs/snapshots.md): the overlayfs upper directory of its root
 * and its separate writable mounts (/workspace, /home/appuser, /tmp), each
 * walked by fd from an open directory, written with libarchive.
 *
 * The overlay's own form becomes the OCI form that image/unpack.c reads
 * back: a whiteout (character device 0/0) is an empty ".wh.NAME" entry, a
 * directory marked opaque (user.overlay.opaque=y, the userxattr form this
 * overlay is mounted with) gets a ".wh..wh..opq" entry, and the root of a
 * separate mount is opaque too (the mount hid whatever the image had
 * there). Ids are the sandbox's (host id minus id_base), others nobody.
 *
 * Runs on the host while the sandbox is frozen: no process of the sandbox
 * can change the trees under the walk. Still, every name is opened
 * beneath its directory's fd without following a symlink or crossing a
 * mount, and only directories and regular files are ever opened (never a
 * FIFO or a device).
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "image-internal.h"
#include "image.h"
#include "libinit.h"
#include "syscalls.h"

#define NOBODY      65534u
#define OPAQUE_NAME ".wh..wh..opq"
#define COPY_BUF    (1u << 17)
#define EFTYPE_LIKE EINVAL /* libarchive's ARCHIVE_ERRNO_FILE_FORMAT, private */

struct walk {
	struct archive *a;
	int out;
	struct hutch_sha256 sha; /* of every byte written to out */
	struct archive_entry_linkresolver *links;
	uid_t id_base;
	char *buf; /* COPY_BUF bytes */
	struct hutch_image_tar_stats *st;
	struct hutch_err *err;
};

#ifdef HUTCH_ARCHIVE_STATIC
/*
 * The static libarchive's pax writer calls this internal for a file type
 * it cannot archive; it is defined beside the table of every writer
 * format (archive_write_set_format.o), and linking that pulls the xar
 * writer and with it libxml2, which the CLI must not load. What
 * libarchive's own does (we never pass such a type: sockets and devices
 * are skipped before). A duplicate definition fails the link loudly.
 */
void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
                                                const char *format);
void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
                                                const char *format)
{
	archive_set_error(a, EFTYPE_LIKE, "%s: %s format cannot archive its type",
	                  archive_entry_pathname(entry), format);
}
#endif

static unsigned int sandbox_id(const struct walk *w, unsigned int host)
{
	return host >= w->id_base && host - w->id_base < 65536 ? host - w->id_base : NOBODY;
}

static int arc_fail(struct walk *w, const char *what, const char *path)
{
	return hutch_err_set(w->err, -EIO, "snapshot: %s '%s': %s", what, path,
	                     archive_error_string(w->a));
}

/* An empty regular file entry: a whiteout or the opaque marker. */
static int put_marker(struct walk *w, const char *path)
{
	struct archive_entry *e = archive_entry_new();
	int r;

	if (!e)
		return hutch_err_set(w->err, -ENOMEM, "snapshot");
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0);
	archive_entry_set_size(e, 0);
	r = archive_write_header(w->a, e);
	archive_entry_free(e);
	return r == ARCHIVE_OK ? 0 : arc_fail(w, "write", path);
}

static int copy_data(struct walk *w, int fd, const char *path, uint64_t size)
{
	uint64_t done = 0;

	while (done < size) {
		size_t want = size - done < COPY_BUF ? (size_t)(size - done) : COPY_BUF;
		ssize_t n = read(fd, w->buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return hutch_err_set_errno(w->err, -errno, "snapshot: read '%s'", path);
		if (n == 0) /* it cannot shrink while frozen; pad what the header said */
			memset(w->buf, 0, (n = (ssize_t)want));
		if (archive_write_data(w->a, w->buf, (size_t)n) != n)
			return arc_fail(w, "write", path);
		done += (uint64_t)n;
	}
	w->st->bytes += size;
	return 0;
}

/* Write e (and, for a file whose data goes now, its data from fd). */
static int put_entry(struct walk *w, struct archive_entry *e, int fd, const char *path)
{
	struct archive_entry *sparse = NULL;
	bool data;
	int r;

	archive_entry_linkify(w->links, &e, &sparse);
	if (!e)
		return 0; /* a hard link whose other names come later: none here */
	data = archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0 &&
	       !archive_entry_hardlink(e);
	r = archive_write_header(w->a, e);
	if (r != ARCHIVE_OK)
		return arc_fail(w, "write", path);
	w->st->entries++;
	return data ? copy_data(w, fd, path, (uint64_t)archive_entry_size(e)) : 0;
}

static int walk_dir(struct walk *w, int dirfd, const char *prefix);

/* A directory: its entry, its opaque marker, its contents. */
static int put_dir(struct walk *w, struct archive_entry *e, int fd, const char *path, bool opaque)
{
	char mark[PATH_MAX];
	char val[2];
	int r;

	if (path[0]) {
		r = put_entry(w, e, -EBADF, path);
		if (r < 0)
			return r;
	}
	if (!opaque)
		opaque = fgetxattr(fd, "user.overlay.opaque", val, sizeof(val)) == 1 &&
		         val[0] == 'y';
	if (opaque) {
		if (snprintf(mark, sizeof(mark), "%s%s" OPAQUE_NAME, path, path[0] ? "/" : "") >=
		    (int)sizeof(mark))
			return hutch_err_set(w->err, -ENAMETOOLONG, "snapshot: '%s'", path);
		r = put_marker(w, mark);
		if (r < 0)
			return r;
	}
	return walk_dir(w, fd, path);
}

static void fill_entry(struct walk *w, struct archive_entry *e, const char *path,
                       const struct stat *st)
{
	struct stat s = *st;

	s.st_uid = sandbox_id(w, st->st_uid);
	s.st_gid = sandbox_id(w, st->st_gid);
	archive_entry_copy_stat(e, &s);
	archive_entry_set_pathname(e, path);
	if (!S_ISREG(st->st_mode))
		archive_entry_set_size(e, 0);
}

/* One name of dirfd at path (the archive's name for it). */
static int walk_one(struct walk *w, int dirfd, const char *name, const char *path)
{
	struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	struct archive_entry *e = NULL;
	_cleanup_close_ int fd = -EBADF;
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int r = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return hutch_err_set_errno(w->err, -errno, "snapshot: stat '%s'", path);
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
		char wh[PATH_MAX];
		const char *slash = strrchr(path, '/');
		int dlen = slash ? (int)(slash - path + 1) : 0;

		if (snprintf(wh, sizeof(wh), "%.*s.wh.%s", dlen, path, name) >= (int)sizeof(wh))
			return hutch_err_set(w->err, -ENAMETOOLONG, "snapshot: '%s'", path);
		return put_marker(w, wh);
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) &&
	    !S_ISFIFO(st.st_mode))
		return 0; /* sockets, devices: not file contents */
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			how.flags |= O_DIRECTORY;
		fd = (int)sys_openat2(dirfd, name, &how, sizeof(how));
		if (fd < 0 || fstat(fd, &st) < 0)
			return hutch_err_set_errno(w->err, -errno, "snapshot: open '%s'", path);
	}
	if (!(e = archive_entry_new()))
		return hutch_err_set(w->err, -ENOMEM, "snapshot");
	fill_entry(w, e, path, &st);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (n < 0)
			r = hutch_err_set_errno(w->err, -errno, "snapshot: read link '%s'", path);
		else
			target[n] = '\0', archive_entry_copy_symlink(e, target);
	}
	if (r >= 0)
		r = S_ISDIR(st.st_mode) ? put_dir(w, e, fd, path, false)
		                        : put_entry(w, e, fd, path);
	archive_entry_free(e);
	return r;
}

static int walk_dir(struct walk *w, int dirfd, const char *prefix)
{
	_cleanup_closedir_ DIR *d = NULL;
	char path[PATH_MAX];
	struct dirent *de;
	int fd, r;

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return hutch_err_set_errno(w->err, -errno, "snapshot: read '%s'", prefix);
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "",
		             de->d_name) >= (int)sizeof(path))
			return hutch_err_set(w->err, -ENAMETOOLONG, "snapshot: '%s/%s'", prefix,
			                     de->d_name);
		r = walk_one(w, dirfd, de->d_name, path);
		if (r < 0)
			return r;
	}
	if (errno)
		return hutch_err_set_errno(w->err, -errno, "snapshot: read '%s'", prefix);
	return 0;
}

/* A separate mount at src->prefix: its root directory as an opaque one. */
static int walk_src(struct walk *w, const struct hutch_image_tar_src *src)
{
	_cleanup_close_ int fd = -EBADF;
	struct archive_entry *e;
	struct stat st;
	int r;

	fd = openat(src->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return hutch_err_set_errno(w->err, -errno, "snapshot: open '/%s'", src->prefix);
	if (!src->prefix[0])
		return walk_dir(w, fd, "");
	if (!(e = archive_entry_new()))
		return hutch_err_set(w->err, -ENOMEM, "snapshot");
	fill_entry(w, e, src->prefix, &st);
	r = put_dir(w, e, fd, src->prefix, true);
	archive_entry_free(e);
	return r;
}

/* libarchive's blocks to out, hashed on the way: the diff_id is this
 * side's work, on the other CPU than the unpacker's. */
static la_ssize_t write_out(struct archive *a, void *ud, const void *buf, size_t len)
{
	struct walk *w = ud;
	int r = hutch_write_all(w->out, buf, len);

	if (r < 0) {
		archive_set_error(a, -r, "write the layer: %s", strerror(-r));
		return -1;
	}
	hutch_sha256_update(&w->sha, buf, len);
	return (la_ssize_t)len;
}

static int write_all_srcs(struct walk *w, const struct hutch_image_tar_src *srcs, size_t n)
{
	hutch_libinit_run(); /* liblzma's CRC64 dispatch, not set at the start */
	if (!(w->a = archive_write_new()) || !(w->links = archive_entry_linkresolver_new()) ||
	    !(w->buf = malloc(COPY_BUF)))
		return hutch_err_set(w->err, -ENOMEM, "snapshot");
	/* pax: long names and large files; restricted: a plain ustar header
	 * where one does (what docker and buildkit write). */
	if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
	    /* 128 KiB writes into the pipe, not libarchive's 10 KiB ones. */
	    archive_write_set_bytes_per_block(w->a, 128 * 1024) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
	    /* Names are bytes (the C locale cannot translate them to UTF-8):
	     * pax's hdrcharset=BINARY says so, and the unpacker takes them. */
	    archive_write_set_format_option(w->a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_open2(w->a, w, NULL, write_out, NULL, NULL) != ARCHIVE_OK)
		return arc_fail(w, "open", "the layer");
	archive_entry_linkresolver_set_strategy(w->links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	for (size_t i = 0; i < n; i++) {
		int r = walk_src(w, &srcs[i]);

		if (r < 0)
			return r;
	}
	return archive_write_close(w->a) == ARCHIVE_OK ? 0 : arc_fail(w, "close", "the layer");
}

int hutch_image_tar_dirs(int out, const struct hutch_image_tar_src *srcs, size_t n, uid_t id_base,
                         struct hutch_image_tar_stats *ret, struct hutch_err *err)
{
	struct hutch_image_tar_stats st = { 0 };
	struct walk w = { .out = out, .id_base = id_base, .st = &st, .err = err };
	int r;

	hutch_sha256_init(&w.sha);
	r = write_all_srcs(&w, srcs, n);
	if (w.a)
		(void)archive_write_free(w.a);
	if (w.links)
		archive_entry_linkresolver_free(w.links);
	free(w.buf);
	if (r >= 0)
		hutch_sha256_final(&w.sha, st.digest);
	if (r >= 0 && ret)
		*ret = st;
	return r;
}
