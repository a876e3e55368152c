/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One image layer, unpacked as hostile input. libarchive reads the tar and
 * its compression; every file system change is made here, by fd, beneath
 * the layer's directory: a parent directory is opened with openat2()
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), so a
 * path through a symlink the layer planted fails with ELOOP, and the final
 * component is created with O_EXCL / O_NOFOLLOW semantics. Nothing is ever
 * resolved against a string path outside the layer.
 *
 * Two libarchive readers are chained so that one pass gives both digests:
 * the outer reader undoes the compression (format "raw") while the blob's
 * bytes are hashed as they are read from the fd; the inner reader parses
 * the tar from the outer one's data, which is hashed again (the diff_id)
 * and counted against the size bound, so a compression bomb stops at
 * max_bytes however small its blob.
 *
 * Not restored, on purpose: set-uid, set-gid and sticky bits of files,
 * device nodes (skipped: a layer cannot hand a sandbox a disk), extended
 * attributes (security.capability is a set-uid by another name), ACLs.
 *
 * An ordinary user's store (no chown) keeps the owners it cannot give, and
 * a directory's mode narrower than the 0700 the unpacker needs to fill it,
 * in user.containers.override_stat (keep_owners; containers/storage's
 * convention), of regular files and directories only (the kernel allows
 * user.* attributes on nothing else), and lists their paths in the layer's
 * owners index.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "cleanup.h"
#include "fdutil.h"
#include "image-internal.h"
#include "libinit.h"
#include "syscalls.h"
#include "util.h"

#define OPAQUE_NAME   ".wh..wh..opq"
#define ID_MAX        65535u /* ids above are stored as nobody */
#define NOBODY        65534u
#define PROGRESS_READ (64 * 1024)

struct unpack {
	int fd, dirfd;
	const struct hutch_unpack_limits *lim;
	struct archive *outer, *inner;
	struct hutch_sha256 blob, diff;
	uint64_t bytes, apparent, entries, skipped;
	uint64_t read;       /* of the blob, for progress */
	int64_t reported_ms; /* when progress was last reported */
	bool too_big;
	bool owned; /* the entry just made has an override (keep_owners) */
	/* Not compressed: the tar is the blob, byte for byte, so its digest
	 * is the blob's and the stream is hashed once, not twice (a
	 * snapshot's layer, a docker archive's: a third of the time of an
	 * uncompressed 100 MB layer went to the second pass). */
	bool plain;
	/* 1 MiB, a snapshot's whole pipe: a read takes all the writer put in
	 * it, and a file of 100 KiB is mostly one data block, one pwrite
	 * (64 KiB: 2.6 reads and pwrites a file). Reads of PROGRESS_READ
	 * where progress is reported (an import: its bytes lines as often
	 * as before). */
	char buf[1 << 20], data[1 << 20];
	/* The parent directory of the last plain regular file, kept open for
	 * the next one in the same directory (one_entry()). */
	int kept_fd;
	size_t kept_len;
	char kept[PATH_MAX];
};

/* A number of the environment, or def when it is unset or not a number. */
static uint64_t env_u64(const char *name, uint64_t def, bool zero_ok)
{
	const char *s = getenv(name);
	char *end = NULL;
	unsigned long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 10);
	return errno || *end || s[0] == '-' || (v == 0 && !zero_ok) ? def : v;
}

void hutch_unpack_limits_default(struct hutch_unpack_limits *l)
{
	*l = (struct hutch_unpack_limits){ 0 };
	l->max_image_bytes = env_u64("HUTCH_IMAGE_MAX_BYTES", 16ULL << 30, false);
	l->max_bytes = env_u64("HUTCH_IMAGE_MAX_LAYER_BYTES", l->max_image_bytes, false);
	l->max_entries = 1000000;
	l->chown = geteuid() == 0;
	l->owners_fd = -EBADF;
	l->progress_ms = env_u64("HUTCH_PROGRESS_INTERVAL_MS", 100, true);
	l->stop_after = env_u64("HUTCH_TEST_UNPACK_STOP_AFTER", 0, false);
}

/* The blob's bytes read, to the progress callback: at most once per
 * progress_ms, and at the end (force). */
static void report(struct unpack *u, bool force)
{
	int64_t now;

	if (!u->lim->progress)
		return;
	now = hutch_now_mono_ms();
	if (!force && u->reported_ms && now - u->reported_ms < (int64_t)u->lim->progress_ms)
		return;
	u->reported_ms = now ? now : 1;
	u->lim->progress(u->lim->progress_ud, u->read);
}

static la_ssize_t read_fd(struct archive *a, void *ptr, const void **out)
{
	struct unpack *u = ptr;
	ssize_t n;

	do
		n = read(u->fd, u->buf, u->lim->progress ? PROGRESS_READ : sizeof(u->buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "read layer");
		return -1;
	}
	if (!u->lim->digest_given)
		hutch_sha256_update(&u->blob, u->buf, (size_t)n);
	u->read += (uint64_t)n;
	report(u, false);
	*out = u->buf;
	return n;
}

static la_ssize_t read_outer(struct archive *a, void *ptr, const void **out)
{
	struct unpack *u = ptr;
	la_ssize_t n = archive_read_data(u->outer, u->data, sizeof(u->data));

	if (n < 0) {
		archive_set_error(a, archive_errno(u->outer), "%s", archive_error_string(u->outer));
		return -1;
	}
	u->bytes += (uint64_t)n;
	if (u->bytes > u->lim->max_bytes) {
		u->too_big = true;
		archive_set_error(a, EFBIG, "layer larger than its bound");
		return -1;
	}
	if (!u->plain)
		hutch_sha256_update(&u->diff, u->data, (size_t)n);
	*out = u->data;
	return n;
}

int hutch_image_clean_path(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	const char *p = in;

	if (!in || in[0] == '/')
		return -EINVAL;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (o + n + 2 > outlen)
				return -ENAMETOOLONG;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n + (slash ? 1 : 0);
	}
	out[o] = '\0';
	return o ? 0 : -ENOENT; /* "./": the layer's root itself */
}

/* Open a directory beneath the layer root, never through a symlink. */
static int open_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_DIRECTORY | O_CLOEXEC,
		.resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV,
	};
	int fd = (int)sys_openat2(dirfd, rel, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* The parent directory of rel (created 0755 as needed, like tar does). */
static int open_parent(struct unpack *u, char *rel, const char **ret_base)
{
	char *slash = strrchr(rel, '/');
	int fd, r;

	if (!slash) {
		*ret_base = rel;
		return open_beneath(u->dirfd, ".", O_RDONLY);
	}
	*slash = '\0';
	*ret_base = slash + 1;
	fd = open_beneath(u->dirfd, rel, O_RDONLY);
	if (fd != -ENOENT)
		goto out;
	/* Walk down, creating what is missing; each step by fd, no symlinks. */
	fd = open_beneath(u->dirfd, ".", O_RDONLY);
	for (char *c = rel; fd >= 0 && c && *c;) {
		char *next = strchr(c, '/');
		int sub;

		if (next)
			*next = '\0';
		if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST)
			r = -errno;
		else
			r = 0;
		sub = r < 0 ? r : open_beneath(fd, c, O_RDONLY);
		if (next)
			*next = '/';
		(void)close(fd);
		fd = sub;
		c = next ? next + 1 : NULL;
	}
out:
	*slash = '/';
	return fd;
}

/* Make room for a new entry: tar's later entries replace earlier ones. */
static int clear_name(int parent, const char *base, bool keep_dir)
{
	struct stat st;

	if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode)) {
		if (keep_dir)
			return 1;
		return hutch_rm_rf_at(parent, base);
	}
	return unlinkat(parent, base, 0) < 0 ? -errno : 0;
}

static unsigned int clamp_id(la_int64_t id)
{
	return id < 0 || id > ID_MAX ? NOBODY : (unsigned int)id;
}

static int set_owner(struct unpack *u, int parent, const char *base, struct archive_entry *e)
{
	if (!u->lim->chown)
		return 0;
	if (fchownat(parent, base, clamp_id(archive_entry_uid(e)), clamp_id(archive_entry_gid(e)),
	             AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* keep_owners: the tar's owners and the mode the entry should have, where
 * the file (fd: a regular file or directory) has others; an override of a
 * name made again is removed when the new entry needs none. */
static int keep_owner(struct unpack *u, int fd, struct archive_entry *e, mode_t want, mode_t has)
{
	unsigned int uid = clamp_id(archive_entry_uid(e)), gid = clamp_id(archive_entry_gid(e));
	char v[HUTCH_OVERRIDE_STAT_MAX + 1];
	int n;

	u->owned = false;
	if (!u->lim->keep_owners || u->lim->chown)
		return 0;
	if (uid == 0 && gid == 0 && want == has) {
		if (fremovexattr(fd, HUTCH_OVERRIDE_STAT_XATTR) < 0 && errno != ENODATA)
			return -errno;
		return 0;
	}
	n = hutch_override_stat_format(uid, gid, want, v, sizeof(v));
	if (n < 0)
		return n;
	if (fsetxattr(fd, HUTCH_OVERRIDE_STAT_XATTR, v, (size_t)n, 0) < 0)
		return -errno;
	u->owned = true;
	return 0;
}

static int write_data(struct unpack *u, int fd, struct archive_entry *e)
{
	const void *buf;
	size_t len;
	la_int64_t off, end = 0;
	int r;

	while ((r = archive_read_data_block(u->inner, &buf, &len, &off)) == ARCHIVE_OK) {
		if (off < 0 || (uint64_t)off + len > u->lim->max_bytes)
			return -EFBIG;
		if (off + (la_int64_t)len > end)
			end = off + (la_int64_t)len;
		for (size_t done = 0; done < len;) {
			ssize_t n =
			        pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			done += (size_t)n;
		}
	}
	if (r != ARCHIVE_EOF)
		return u->too_big ? -EFBIG : -EIO;
	/* Sparse files end in a hole that no block wrote (the file is new:
	 * one whose blocks reach its size needs no truncate, a syscall that
	 * cost ext4 an extent walk per file). */
	if (end != archive_entry_size(e) && ftruncate(fd, archive_entry_size(e)) < 0)
		return -errno;
	return 0;
}

static int make_file(struct unpack *u, int parent, const char *base, struct archive_entry *e)
{
	_cleanup_close_ int fd = -EBADF;
	la_int64_t size = archive_entry_size(e);
	mode_t perm = archive_entry_perm(e) & 0777;
	struct timespec ts[2];
	int r;

	/* The apparent size counts too: a sparse bomb is small on the wire. */
	if (size < 0 || (uint64_t)size > u->lim->max_bytes ||
	    (u->apparent += (uint64_t)size) > u->lim->max_bytes)
		return -EFBIG;
	/* Made with its mode (the umask is 0 here; set-id bits never given;
	 * the fd writes whatever the mode): no fchmod. A name taken (tar's
	 * later entries replace earlier ones) is cleared only then, not
	 * looked up before every file. */
	fd = openat(parent, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm);
	if (fd < 0 && errno == EEXIST) {
		if ((r = clear_name(parent, base, false)) < 0)
			return r;
		fd = openat(parent, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		            perm);
	}
	if (fd < 0)
		return -errno;
	r = write_data(u, fd, e);
	if (r < 0)
		return r;
	/* fchown() clears set-id bits at most, which the file has not. */
	if (u->lim->chown &&
	    fchown(fd, clamp_id(archive_entry_uid(e)), clamp_id(archive_entry_gid(e))) < 0)
		return -errno;
	r = keep_owner(u, fd, e, perm, perm);
	if (r < 0)
		return r;
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	(void)futimens(fd, ts);
	return 0;
}

static int make_dir(struct unpack *u, int parent, const char *base, struct archive_entry *e)
{
	_cleanup_close_ int fd = -EBADF;
	mode_t want = archive_entry_perm(e) & 01777, mode = want;
	int r;

	r = clear_name(parent, base, true);
	if (r < 0)
		return r;
	if (r == 0 && mkdirat(parent, base, 0700) < 0)
		return -errno;
	fd = open_beneath(parent, base, O_RDONLY);
	if (fd < 0)
		return fd;
	if (u->lim->chown &&
	    fchown(fd, clamp_id(archive_entry_uid(e)), clamp_id(archive_entry_gid(e))) < 0)
		return -errno;
	/* Without CAP_DAC_OVERRIDE the unpacker must still write into it. */
	if (!u->lim->chown)
		mode |= 0700;
	if (fchmod(fd, mode) < 0)
		return -errno;
	return keep_owner(u, fd, e, want, mode);
}

/* A hard link names a file already unpacked in this layer, never outside. */
static int make_hardlink(struct unpack *u, int parent, const char *base, const char *target)
{
	char rel[PATH_MAX];
	_cleanup_close_ int tparent = -EBADF;
	const char *tbase;
	struct stat st;
	int r;

	/* -EXDEV: the target is not a file of this layer. */
	r = hutch_image_clean_path(target, rel, sizeof(rel));
	if (r < 0)
		return -EXDEV;
	tparent = open_parent(u, rel, &tbase);
	if (tparent < 0)
		return tparent == -ELOOP ? -ELOOP : -EXDEV;
	if (fstatat(tparent, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)))
		return -EXDEV;
	if (linkat(tparent, tbase, parent, base, 0) < 0)
		return -errno;
	if (u->lim->keep_owners && S_ISREG(st.st_mode)) {
		_cleanup_close_ int fd =
		        openat(parent, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

		u->owned = fd >= 0 && fgetxattr(fd, HUTCH_OVERRIDE_STAT_XATTR, NULL, 0) > 0;
	}
	return 0;
}

static int make_whiteout(int parent, const char *base)
{
	const char *name = base + strlen(".wh.");
	int r;

	if (!strcmp(base, OPAQUE_NAME)) {
		/* fsetxattr() needs a real fd, not O_PATH. */
		if (fsetxattr(parent, "user.overlay.opaque", "y", 1, 0) < 0)
			return -errno;
		return 0;
	}
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
		return -EINVAL;
	r = clear_name(parent, name, false);
	if (r < 0)
		return r;
	/* The overlayfs whiteout: the one device node mknod() allows anyone. */
	return mknodat(parent, name, S_IFCHR, makedev(0, 0)) < 0 ? -errno : 0;
}

static int make_entry(struct unpack *u, int parent, const char *base, struct archive_entry *e)
{
	const char *link = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	int r;

	if (!strncmp(base, ".wh.", 4))
		return make_whiteout(parent, base);
	/* A regular file clears its name itself, if taken (make_file()). */
	if (type != AE_IFDIR && (type != AE_IFREG || link) &&
	    (r = clear_name(parent, base, false)) < 0)
		return r;
	if (link)
		return make_hardlink(u, parent, base, link);
	switch (type) {
	case AE_IFREG:
		return make_file(u, parent, base, e);
	case AE_IFDIR:
		return make_dir(u, parent, base, e);
	case AE_IFLNK:
		/* The target is only text: nothing here ever follows it. */
		if (!archive_entry_symlink(e) ||
		    symlinkat(archive_entry_symlink(e), parent, base) < 0)
			return errno ? -errno : -EINVAL;
		return set_owner(u, parent, base, e);
	case AE_IFIFO:
		if (mkfifoat(parent, base, archive_entry_perm(e) & 0777) < 0)
			return -errno;
		return set_owner(u, parent, base, e);
	default:
		u->skipped++; /* devices, sockets */
		return 0;
	}
}

/*
 * The parent of rel, opened (open_parent()), or for a plain regular file
 * (no hard link, no whiteout) in the same directory as the one before it,
 * that one's, kept open: such an entry changes nothing but the name it
 * makes (clear_name() removes at most what is below that name), so the
 * directory is the one open_parent() would find again. Any other entry
 * closes it first. *owned: the fd is the caller's to close.
 */
static int parent_of(struct unpack *u, struct archive_entry *e, char *rel, const char **base,
                     bool *owned)
{
	const char *slash = strrchr(rel, '/'), *name = slash ? slash + 1 : rel;
	size_t len = slash ? (size_t)(slash - rel) : 0;
	bool plain = archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e) &&
	             strncmp(name, ".wh.", 4);
	int fd;

	*owned = false;
	if (plain && u->kept_fd >= 0 && u->kept_len == len && !memcmp(u->kept, rel, len)) {
		*base = name;
		return u->kept_fd;
	}
	closep(&u->kept_fd);
	fd = open_parent(u, rel, base);
	if (fd >= 0 && plain) {
		memcpy(u->kept, rel, len);
		u->kept_len = len;
		return u->kept_fd = fd;
	}
	*owned = true;
	return fd;
}

static int one_entry(struct unpack *u, struct archive_entry *e, struct hutch_err *err)
{
	const char *path = archive_entry_pathname(e);
	_cleanup_close_ int own = -EBADF;
	char rel[PATH_MAX];
	const char *base;
	bool owned;
	int parent, r;

	if (++u->entries > u->lim->max_entries)
		return hutch_err_set(err, -EFBIG, "layer has more than %llu entries",
		                     (unsigned long long)u->lim->max_entries);
	if (u->entries == u->lim->stop_after)
		(void)raise(SIGSTOP); /* the test hook: interrupted here */
	r = hutch_image_clean_path(path, rel, sizeof(rel));
	if (r == -ENOENT)
		return 0; /* the root directory itself: its mode is ours */
	if (r < 0)
		return hutch_err_set(err, r, "layer entry '%s' leaves the layer",
		                     path ? path : "(none)");
	parent = parent_of(u, e, rel, &base, &owned);
	if (owned)
		own = parent;
	u->owned = false;
	r = parent < 0 ? parent : make_entry(u, parent, base, e);
	if (r >= 0 && u->owned &&
	    (r = hutch_write_all(u->lim->owners_fd, rel, strlen(rel) + 1)) < 0)
		return hutch_err_set_errno(err, r, "write the layer's owners index");
	if (r == -ELOOP)
		return hutch_err_set(err, r, "layer entry '%s' goes through a symlink", rel);
	if (r == -EXDEV)
		return hutch_err_set(err, r,
		                     "layer entry '%s' is a hard link to '%s', which is "
		                     "not a file of this layer",
		                     rel, archive_entry_hardlink(e));
	if (r == -EFBIG)
		return hutch_err_set(err, r, "layer is larger than %llu bytes (at '%s')",
		                     (unsigned long long)u->lim->max_bytes, rel);
	if (r == -EINVAL && !strncmp(base, ".wh.", 4))
		return hutch_err_set(err, r, "layer entry '%s' is a whiteout of no name", rel);
	if (r < 0)
		return hutch_err_set_errno(err, r, "layer entry '%s'", rel);
	return 0;
}

static int open_readers(struct unpack *u, struct hutch_err *err)
{
	struct archive_entry *raw;

	hutch_libinit_run(); /* liblzma's CRC64 dispatch, not set at the start */
	u->outer = archive_read_new();
	u->inner = archive_read_new();
	if (!u->outer || !u->inner)
		return hutch_err_set(err, -ENOMEM, "layer reader");
	(void)archive_read_support_filter_gzip(u->outer);
	(void)archive_read_support_filter_bzip2(u->outer);
	(void)archive_read_support_filter_xz(u->outer);
	(void)archive_read_support_filter_zstd(u->outer);
	(void)archive_read_support_format_raw(u->outer);
	(void)archive_read_support_format_tar(u->inner);
	if (archive_read_open(u->outer, u, NULL, read_fd, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(u->outer, &raw) != ARCHIVE_OK)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "layer is not readable: %s",
		                           archive_error_string(u->outer));
	u->plain = archive_filter_count(u->outer) == 1 &&
	           archive_filter_code(u->outer, 0) == ARCHIVE_FILTER_NONE;
	if (u->lim->digest_given && !u->plain)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "layer is compressed (%s) where a plain tar was due: "
		                           "its digest is not its diff_id",
		                           archive_filter_name(u->outer, 0));
	if (archive_read_open(u->inner, u, NULL, read_outer, NULL) != ARCHIVE_OK)
		return hutch_err_set_class(err, u->too_big ? HUTCH_ERRC_LIMIT : HUTCH_ERRC_USAGE,
		                           u->too_big ? -EFBIG : -EINVAL, "layer is not a tar: %s",
		                           archive_error_string(u->inner));
	return 0;
}

/* The digests cover every byte: the tar's padding and the blob's tail too. */
static int drain(struct unpack *u, struct hutch_err *err)
{
	la_ssize_t n;
	const void *p;

	while ((n = read_outer(u->inner, u, &p)) > 0)
		;
	if (n < 0)
		return hutch_err_set(err, u->too_big ? -EFBIG : -EIO, "layer: %s",
		                     archive_error_string(u->inner));
	while ((n = read_fd(u->outer, u, &p)) > 0)
		;
	if (n < 0)
		return hutch_err_set_errno(err, -EIO, "read layer");
	report(u, true);
	return 0;
}

static int run(struct unpack *u, struct hutch_err *err)
{
	struct archive_entry *e;
	int r;

	r = open_readers(u, err);
	if (r < 0)
		return r;
	while ((r = archive_read_next_header(u->inner, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		r = one_entry(u, e, err);
		if (r < 0)
			return u->too_big ? hutch_err_set(err, -EFBIG,
			                                  "layer is larger than %llu "
			                                  "bytes",
			                                  (unsigned long long)u->lim->max_bytes)
			                  : r;
	}
	if (r != ARCHIVE_EOF)
		return u->too_big ? hutch_err_set(err, -EFBIG, "layer is larger than %llu bytes",
		                                  (unsigned long long)u->lim->max_bytes)
		                  : hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                                        "layer is not a valid tar: %s",
		                                        archive_error_string(u->inner));
	return drain(u, err);
}

int hutch_image_unpack(int fd, int dirfd, const struct hutch_unpack_limits *limits,
                       struct hutch_unpack_result *ret, struct hutch_err *err)
{
	_cleanup_free_ struct unpack *u = calloc(1, sizeof(*u));
	mode_t old;
	int r;

	if (!u)
		return hutch_err_set(err, -ENOMEM, "layer reader");
	u->fd = fd;
	u->dirfd = dirfd;
	u->lim = limits;
	u->kept_fd = -EBADF;
	hutch_sha256_init(&u->blob);
	hutch_sha256_init(&u->diff);
	old = umask(0);
	r = run(u, err);
	closep(&u->kept_fd);
	(void)umask(old);
	if (u->inner)
		(void)archive_read_free(u->inner);
	if (u->outer)
		(void)archive_read_free(u->outer);
	if (r < 0)
		return r;
	ret->blob_digest[0] = ret->diff_id[0] = '\0';
	if (!u->lim->digest_given)
		hutch_sha256_final(&u->blob, ret->blob_digest);
	if (!u->lim->digest_given && u->plain)
		memcpy(ret->diff_id, ret->blob_digest, sizeof(ret->diff_id));
	else if (!u->lim->digest_given)
		hutch_sha256_final(&u->diff, ret->diff_id);
	ret->bytes = u->bytes;
	ret->entries = u->entries;
	ret->skipped = u->skipped;
	return 0;
}
