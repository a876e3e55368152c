/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rollback in place (docs/snapshots.md): a live sandbox's tree made equal
 * to a snapshot's, through the sandbox's own tree (its overlay root and
 * writable mounts, written by fd), never behind the overlay's back: an
 * overlay whose upper directory is changed while mounted keeps stale
 * dentries.
 *
 * The snapshot's tree is read from its layers' directories in the store as
 * overlayfs would merge them (top first; a 0/0 character device is a
 * whiteout, user.overlay.opaque=y hides the layers below), its ids the
 * store's mapped onto the sandbox's. Only the paths that can differ are
 * visited: those named in the guides (the sandbox's upper directory and
 * the layers either side has beyond the ones they share), and everything
 * below a directory opaque in a guide, replaced, new, or the root of a
 * separate writable mount (/workspace, /home/appuser, /tmp). Every other
 * path is the shared layers' on both sides.
 *
 * Each path, top down: what the snapshot lacks is removed, a file whose
 * content differs is written to a temporary name and renamed over, a
 * missing one created; owners, modes and mtimes set as the snapshot's.
 * Another mount met on the way (/proc, /dev, a volume) is left alone, as
 * are the files hutch writes per sandbox (hostname, hosts, resolv.conf,
 * the sandbox CA). The caller freezes the sandbox: nothing inside runs
 * meanwhile. What the snapshot holds is what a sandbox wrote, hostile: only
 * directories and regular files are opened, never following a symlink.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"
#include "syscalls.h"

#define COPY_BUF (1u << 17)
#define NOBODY   65534u

/* Hutch's own files of each sandbox: the live ones stay. */
static const char *const kept[] = {
	"etc/hostname",
	"etc/hosts",
	"etc/resolv.conf",
	"etc/hutch",
	"etc/ssl/certs/ca-certificates.crt",
};

/* Directories at one path, top first, owned. */
struct view {
	int fds[HUTCH_IMAGE_ROLLBACK_GUIDES_MAX];
	size_t n;
};

struct ctx {
	const struct hutch_image_rollback *rb;
	struct hutch_image_rollback_stats *st;
	char *buf, *buf2; /* COPY_BUF each */
	unsigned long long tmp_seq;
	struct hutch_err *err;
};

static void view_done(struct view *v)
{
	hutch_close_many(v->fds, v->n);
	v->n = 0;
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int fd)
{
	char val[2];

	return fgetxattr(fd, "user.overlay.opaque", val, sizeof(val)) == 1 && val[0] == 'y';
}

static int open_dir(int dirfd, const char *name)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	int fd = (int)sys_openat2(dirfd, name, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* The live tree's: beneath, no symlinks, but into the writable mounts. */
static int open_live(int dirfd, const char *name, int flags)
{
	struct open_how how = { .flags = (uint64_t)flags | O_NOFOLLOW | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	int fd = (int)sys_openat2(dirfd, name, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

static int changed(struct ctx *c)
{
	c->st->changes++;
	if (c->rb->stop_after && c->st->changes == c->rb->stop_after)
		(void)raise(SIGSTOP); /* the fault tests' point (HUTCH_TEST_ROLLBACK_STOP_AFTER) */
	return 0;
}

static unsigned int map_id(const struct ctx *c, unsigned int store_id)
{
	unsigned int id = store_id - HUTCH_IMAGE_STORE_IDS;

	return (unsigned int)c->rb->id_base +
	       (store_id >= HUTCH_IMAGE_STORE_IDS && id < 65536 ? id : NOBODY);
}

/* The snapshot's entry name in view t: its layer's index, or -ENOENT. */
static int lookup(const struct view *t, const char *name, struct stat *ret)
{
	for (size_t i = 0; i < t->n; i++) {
		if (fstatat(t->fds[i], name, ret, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		return is_whiteout(ret) ? -ENOENT : (int)i;
	}
	return -ENOENT;
}

/* The snapshot's directory name (found in layer top): its layers below. */
static int sub_view(const struct view *t, size_t top, const char *name, struct view *ret)
{
	struct stat st;

	ret->n = 0;
	for (size_t i = top; i < t->n; i++) {
		int fd;

		if (fstatat(t->fds[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		if (!S_ISDIR(st.st_mode))
			break; /* a whiteout or a file hides the layers below */
		if ((fd = open_dir(t->fds[i], name)) < 0)
			return fd;
		ret->fds[ret->n++] = fd;
		if (is_opaque(fd))
			break;
	}
	return 0;
}

/* The guides' directories at name; *full when a guide replaced it. */
static int sub_guides(const struct view *g, const char *name, struct view *ret, bool *full)
{
	struct stat st;

	ret->n = 0;
	for (size_t i = 0; i < g->n; i++) {
		int fd;

		if (fstatat(g->fds[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		if (!S_ISDIR(st.st_mode)) {
			*full = true;
			continue;
		}
		if ((fd = open_dir(g->fds[i], name)) < 0)
			return fd;
		ret->fds[ret->n++] = fd;
		if (is_opaque(fd))
			*full = true;
	}
	return 0;
}

/* ---- names of a directory level: a sorted set ---- */

struct names {
	char **v;
	size_t n, cap;
};

static void names_done(struct names *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->v[i]);
	free(n->v);
	*n = (struct names){ 0 };
}

static int names_add(struct names *n, const char *name)
{
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (n->n == n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 32;
		char **v = realloc(n->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		n->v = v;
		n->cap = cap;
	}
	if (!(n->v[n->n] = strdup(name)))
		return -ENOMEM;
	n->n++;
	return 0;
}

static int names_add_dir(struct names *n, int dirfd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	if (!(d = fdopendir(fd))) {
		(void)close(fd);
		return -errno;
	}
	while ((errno = 0, de = readdir(d)))
		if ((r = names_add(n, de->d_name)) < 0)
			return r;
	return errno ? -errno : 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_sort_unique(struct names *n)
{
	size_t out = 0;

	if (n->n)
		qsort(n->v, n->n, sizeof(*n->v), cmp_name);
	for (size_t i = 0; i < n->n; i++) {
		if (out && !strcmp(n->v[out - 1], n->v[i])) {
			free(n->v[i]);
			continue;
		}
		n->v[out++] = n->v[i];
	}
	n->n = out;
}

/* The caller's extra paths below path: their next component. */
static int names_add_extra(struct ctx *c, struct names *n, const char *path)
{
	size_t plen = strlen(path);

	for (size_t i = 0; i < c->rb->n_extra; i++) {
		const char *e = c->rb->extra[i], *rest, *slash;
		char comp[NAME_MAX + 1];
		int r;

		if (plen && (strncmp(e, path, plen) || e[plen] != '/'))
			continue;
		rest = plen ? e + plen + 1 : e;
		slash = strchr(rest, '/');
		snprintf(comp, sizeof(comp), "%.*s",
		         slash ? (int)(slash - rest) : (int)strlen(rest), rest);
		if (*comp && (r = names_add(n, comp)) < 0)
			return r;
	}
	return 0;
}

static bool is_kept(const char *path)
{
	for (size_t i = 0; i < ELEMENTSOF(kept); i++)
		if (!strcmp(path, kept[i]))
			return true;
	return false;
}

/* ---- the live side ---- */

static int mnt_id_at(int dirfd, const char *name, uint64_t *ret)
{
	struct statx sx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH), STATX_MNT_ID,
	          &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	*ret = sx.stx_mnt_id;
	return 0;
}

static bool mount_is_ours(const struct ctx *c, uint64_t id)
{
	for (size_t i = 0; i < c->rb->n_mnt; i++)
		if (c->rb->mnt_ids[i] == id)
			return true;
	return false;
}

static int remove_at(struct ctx *c, int dirfd, const char *name, const struct stat *st,
                     const char *path);

/* Empty directory fd; 1 if something had to stay (another mount). */
static int empty_dir(struct ctx *c, int fd, const char *path)
{
	struct names n = { 0 };
	bool stayed = false;
	int r = names_add_dir(&n, fd);

	for (size_t i = 0; r >= 0 && i < n.n; i++) {
		char sub[PATH_MAX];
		struct stat st;

		snprintf(sub, sizeof(sub), "%s/%s", path, n.v[i]);
		if (fstatat(fd, n.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		r = remove_at(c, fd, n.v[i], &st, sub);
		stayed |= r > 0;
	}
	names_done(&n);
	return r < 0 ? hutch_err_set_errno(c->err, r, "rollback: empty '/%s'", path) : stayed;
}

/* Remove name (st: its lstat) of the live tree; 1 if a mount kept it. */
static int remove_at(struct ctx *c, int dirfd, const char *name, const struct stat *st,
                     const char *path)
{
	_cleanup_close_ int fd = -EBADF;
	uint64_t mnt, here;
	int r;

	if (S_ISDIR(st->st_mode)) {
		if ((r = mnt_id_at(dirfd, name, &mnt)) < 0 || (r = mnt_id_at(dirfd, "", &here)) < 0)
			return hutch_err_set_errno(c->err, r, "rollback: stat '/%s'", path);
		if (mnt != here)
			return 1; /* a mount point: another mount's, left alone */
		if ((fd = open_live(dirfd, name, O_RDONLY | O_DIRECTORY)) < 0)
			return hutch_err_set_errno(c->err, fd, "rollback: open '/%s'", path);
		if ((r = empty_dir(c, fd, path)) != 0)
			return r;
	}
	if (unlinkat(dirfd, name, S_ISDIR(st->st_mode) ? AT_REMOVEDIR : 0) < 0)
		return hutch_err_set_errno(c->err, -errno, "rollback: remove '/%s'", path);
	return changed(c);
}

/*
 * The owner the live name gets: the snapshot's, or with keep_owners (an
 * ordinary user's store, whose files are all the user's) the live entry's
 * it replaces (was), else its directory's.
 */
static int owner_of(const struct ctx *c, int dirfd, const struct stat *tst, const struct stat *was,
                    unsigned int *uid, unsigned int *gid)
{
	struct stat dir;

	if (!c->rb->keep_owners) {
		*uid = map_id(c, tst->st_uid);
		*gid = map_id(c, tst->st_gid);
		return 0;
	}
	if (!was && fstat(dirfd, &dir) < 0)
		return -errno;
	*uid = was ? was->st_uid : dir.st_uid;
	*gid = was ? was->st_gid : dir.st_gid;
	return 0;
}

/* Owner, mode and times of the live name (lst: its lstat, NULL if made
 * now) as the snapshot's tst; was: the live entry the name replaces. */
static int set_meta(struct ctx *c, int dirfd, const char *name, const struct stat *tst,
                    const struct stat *lst, const struct stat *was, const char *path)
{
	unsigned int uid = 0, gid = 0;
	int r = owner_of(c, dirfd, tst, was, &uid, &gid);
	mode_t mode = tst->st_mode & 01777; /* never set-uid nor set-gid */
	struct timespec ts[2] = { tst->st_atim, tst->st_mtim };
	bool touched = false;

	if (r < 0)
		return hutch_err_set_errno(c->err, r, "rollback: the owner of '/%s'", path);
	if (!lst || lst->st_uid != uid || lst->st_gid != gid) {
		if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return hutch_err_set_errno(c->err, -errno, "rollback: chown '/%s'", path);
		touched = true;
	}
	if (!S_ISLNK(tst->st_mode) && (!lst || touched || (lst->st_mode & 07777) != mode)) {
		if (fchmodat(dirfd, name, mode, 0) < 0)
			return hutch_err_set_errno(c->err, -errno, "rollback: chmod '/%s'", path);
		touched = true;
	}
	if (!lst || lst->st_mtim.tv_sec != ts[1].tv_sec || lst->st_mtim.tv_nsec != ts[1].tv_nsec) {
		if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return hutch_err_set_errno(c->err, -errno, "rollback: times of '/%s'",
			                           path);
		touched = touched || lst;
	}
	return touched && lst ? changed(c) : 0;
}

static int read_full(int fd, char *buf, size_t len)
{
	ssize_t n = hutch_read_all(fd, buf, len);

	return n < 0 ? (int)n : n == (ssize_t)len ? 0 : -EIO;
}

/* Do two open regular files of the same size hold the same bytes? */
static int same_content(struct ctx *c, int a, int b, off_t size)
{
	for (off_t done = 0; done < size;) {
		size_t want = size - done < COPY_BUF ? (size_t)(size - done) : COPY_BUF;
		int r;

		if ((r = read_full(a, c->buf, want)) < 0 || (r = read_full(b, c->buf2, want)) < 0)
			return r;
		if (memcmp(c->buf, c->buf2, want))
			return 0;
		done += (off_t)want;
	}
	return 1;
}

static int copy_data(struct ctx *c, int from, int to, off_t size)
{
	for (off_t done = 0; done < size;) {
		size_t want = size - done < COPY_BUF ? (size_t)(size - done) : COPY_BUF;
		int r = read_full(from, c->buf, want);

		if (r < 0 || (r = hutch_write_all(to, c->buf, want)) < 0)
			return r;
		done += (off_t)want;
	}
	c->st->bytes += (uint64_t)size;
	return 0;
}

/* The snapshot's regular file (in layer tfd) as the live name, unless
 * the live file (lst, or NULL) holds its bytes already. */
static int put_file(struct ctx *c, int tfd, int dirfd, const char *name, const struct stat *tst,
                    const struct stat *lst, const char *path)
{
	_cleanup_close_ int src = open_live(tfd, name, O_RDONLY | O_NONBLOCK), dst = -EBADF;
	struct stat st;
	char tmp[64];
	int r;

	if (src < 0 || fstat(src, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != tst->st_size)
		return hutch_err_set_errno(c->err, src < 0 ? src : -EIO,
		                           "rollback: open the snapshot's '/%s'", path);
	if (lst && S_ISREG(lst->st_mode) && lst->st_size == st.st_size) {
		_cleanup_close_ int cur = open_live(dirfd, name, O_RDONLY | O_NONBLOCK);

		r = cur < 0 ? cur : same_content(c, src, cur, st.st_size);
		if (r < 0)
			return hutch_err_set_errno(c->err, r, "rollback: compare '/%s'", path);
		if (r > 0)
			return set_meta(c, dirfd, name, tst, lst, lst, path);
		if (lseek(src, 0, SEEK_SET) < 0)
			return hutch_err_set_errno(c->err, -errno, "rollback: read '/%s'", path);
	}
	snprintf(tmp, sizeof(tmp), ".hutch-rollback.%d.%llu", (int)getpid(), ++c->tmp_seq);
	dst = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0)
		return hutch_err_set_errno(c->err, -errno, "rollback: write '/%s'", path);
	r = copy_data(c, src, dst, st.st_size);
	if (r < 0)
		r = hutch_err_set_errno(c->err, r, "rollback: write '/%s'", path);
	if (r >= 0)
		r = set_meta(c, dirfd, tmp, tst, NULL, lst, path);
	if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = hutch_err_set_errno(c->err, -errno, "rollback: rename onto '/%s'", path);
	if (r < 0) {
		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	return changed(c);
}

static int put_symlink(struct ctx *c, int tfd, int dirfd, const char *name, const struct stat *tst,
                       const struct stat *lst, const char *path)
{
	char target[PATH_MAX], cur[PATH_MAX], tmp[64];
	ssize_t n = readlinkat(tfd, name, target, sizeof(target) - 1), m;

	if (n < 0)
		return hutch_err_set_errno(c->err, -errno, "rollback: read link '/%s'", path);
	target[n] = '\0';
	if (lst && S_ISLNK(lst->st_mode) &&
	    (m = readlinkat(dirfd, name, cur, sizeof(cur) - 1)) == n && !memcmp(cur, target, n))
		return set_meta(c, dirfd, name, tst, lst, lst, path);
	snprintf(tmp, sizeof(tmp), ".hutch-rollback.%d.%llu", (int)getpid(), ++c->tmp_seq);
	if (symlinkat(target, dirfd, tmp) < 0)
		return hutch_err_set_errno(c->err, -errno, "rollback: link '/%s'", path);
	if (set_meta(c, dirfd, tmp, tst, NULL, lst, path) < 0 ||
	    renameat(dirfd, tmp, dirfd, name) < 0) {
		int e = c->err->code ? c->err->code : -errno;

		(void)unlinkat(dirfd, tmp, 0);
		return c->err->code ? e : hutch_err_set_errno(c->err, e, "rollback: '/%s'", path);
	}
	return changed(c);
}

static int sync_dir(struct ctx *c, int live, struct view *t, struct view *g, bool full,
                    const char *path);

/* Both sides have a directory at name. */
static int sync_subdir(struct ctx *c, int dirfd, const char *name, struct view *t, size_t top,
                       struct view *g, bool full, const char *path)
{
	struct view st_view = { .n = 0 }, sg = { .n = 0 };
	_cleanup_close_ int fd = -EBADF;
	int r;

	if ((fd = open_live(dirfd, name, O_RDONLY | O_DIRECTORY)) < 0)
		return hutch_err_set_errno(c->err, fd, "rollback: open '/%s'", path);
	r = sub_view(t, top, name, &st_view);
	if (r >= 0)
		r = sub_guides(g, name, &sg, &full);
	if (r < 0)
		r = hutch_err_set_errno(c->err, r, "rollback: read '/%s'", path);
	if (r >= 0)
		r = sync_dir(c, fd, &st_view, &sg, full, path);
	view_done(&st_view);
	view_done(&sg);
	return r;
}

/* The snapshot's entry (layer top, tst) made at the missing live name. */
static int create_at(struct ctx *c, int dirfd, const char *name, struct view *t, size_t top,
                     const struct stat *tst, const char *path)
{
	struct view sv = { .n = 0 }, none = { .n = 0 };
	_cleanup_close_ int fd = -EBADF;
	int r;

	if (S_ISREG(tst->st_mode))
		return put_file(c, t->fds[top], dirfd, name, tst, NULL, path);
	if (S_ISLNK(tst->st_mode))
		return put_symlink(c, t->fds[top], dirfd, name, tst, NULL, path);
	if (S_ISFIFO(tst->st_mode)) {
		if (mkfifoat(dirfd, name, 0600) < 0)
			return hutch_err_set_errno(c->err, -errno, "rollback: make '/%s'", path);
		return set_meta(c, dirfd, name, tst, NULL, NULL, path) ?: changed(c);
	}
	if (!S_ISDIR(tst->st_mode))
		return 0; /* sockets, devices: never in a layer's contents */
	if (mkdirat(dirfd, name, 0700) < 0 ||
	    (fd = open_live(dirfd, name, O_RDONLY | O_DIRECTORY)) < 0)
		return hutch_err_set_errno(c->err, fd < 0 && errno ? -errno : fd,
		                           "rollback: make '/%s'", path);
	(void)changed(c);
	/* its entries take its owner (keep_owners): given before they are made */
	r = c->rb->keep_owners ? set_meta(c, dirfd, name, tst, NULL, NULL, path) : 0;
	if (r >= 0 && (r = sub_view(t, top, name, &sv)) < 0)
		r = hutch_err_set_errno(c->err, r, "rollback: read '/%s'", path);
	if (r >= 0)
		r = sync_dir(c, fd, &sv, &none, true, path);
	view_done(&sv);
	return r < 0 ? r : set_meta(c, dirfd, name, tst, NULL, NULL, path);
}

/* One name of a directory level: the live entry made the snapshot's. */
static int sync_name(struct ctx *c, int live, struct view *t, struct view *g, bool full,
                     const char *name, const char *path)
{
	struct stat tst, lst;
	int top = lookup(t, name, &tst), r = 0;
	uint64_t mnt = 0, dir = 0;
	bool here = fstatat(live, name, &lst, AT_SYMLINK_NOFOLLOW) == 0;

	if (!here && errno != ENOENT)
		return hutch_err_set_errno(c->err, -errno, "rollback: stat '/%s'", path);
	if (top < 0 && top != -ENOENT)
		return hutch_err_set_errno(c->err, top, "rollback: the snapshot's '/%s'", path);
	if (here && (r = mnt_id_at(live, name, &mnt)) >= 0 &&
	    (r = mnt_id_at(live, "", &dir)) >= 0 && mnt != dir && !mount_is_ours(c, mnt))
		return 0; /* /proc, /dev, a volume: not the sandbox's files */
	if (here && r < 0)
		return hutch_err_set_errno(c->err, r, "rollback: stat '/%s'", path);
	if (top < 0) {
		r = here ? remove_at(c, live, name, &lst, path) : 0;
		return r < 0 ? r : 0;
	}
	if (here && (lst.st_mode & S_IFMT) == (tst.st_mode & S_IFMT)) {
		if (S_ISREG(tst.st_mode))
			return put_file(c, t->fds[top], live, name, &tst, &lst, path);
		if (S_ISLNK(tst.st_mode))
			return put_symlink(c, t->fds[top], live, name, &tst, &lst, path);
		if (S_ISDIR(tst.st_mode)) {
			/* a writable mount's root: all of it */
			r = sync_subdir(c, live, name, t, (size_t)top, g, full || mnt != dir, path);
			/* its times after its entries changed them */
			if (r >= 0 && fstatat(live, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
				r = set_meta(c, live, name, &tst, &lst, &lst, path);
			return r;
		}
		return set_meta(c, live, name, &tst, &lst, &lst, path);
	}
	if (here && (r = remove_at(c, live, name, &lst, path)) != 0)
		return r < 0 ? r : 0; /* a mount point stays what it is */
	return create_at(c, live, name, t, (size_t)top, &tst, path);
}

static int sync_dir(struct ctx *c, int live, struct view *t, struct view *g, bool full,
                    const char *path)
{
	struct names n = { 0 };
	int r = 0;

	if (full) {
		r = names_add_dir(&n, live);
		for (size_t i = 0; r >= 0 && i < t->n; i++)
			r = names_add_dir(&n, t->fds[i]);
	}
	for (size_t i = 0; r >= 0 && i < g->n; i++)
		r = names_add_dir(&n, g->fds[i]);
	if (r >= 0)
		r = names_add_extra(c, &n, path);
	if (r < 0) {
		names_done(&n);
		return hutch_err_set_errno(c->err, r, "rollback: read '/%s'", path);
	}
	names_sort_unique(&n);
	for (size_t i = 0; r >= 0 && i < n.n; i++) {
		char sub[PATH_MAX];

		if (snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "/" : "", n.v[i]) >=
		    (int)sizeof(sub)) {
			r = hutch_err_set(c->err, -ENAMETOOLONG, "rollback: '/%s/%s'", path,
			                  n.v[i]);
			break;
		}
		if (is_kept(sub) || !strncmp(n.v[i], ".hutch-rollback.", 16))
			continue;
		r = sync_name(c, live, t, g, full, n.v[i], sub);
	}
	names_done(&n);
	return r < 0 ? r : 0;
}

/* The views own their fds: duplicates of the caller's. */
static int dup_view(const int *fds, size_t n, struct view *ret, struct hutch_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);

		if (fd < 0)
			return hutch_err_set_errno(err, -errno, "rollback");
		ret->fds[ret->n++] = fd;
	}
	return 0;
}

int hutch_image_rollback_tree(const struct hutch_image_rollback *rb,
                              struct hutch_image_rollback_stats *ret, struct hutch_err *err)
{
	struct hutch_image_rollback_stats st = { 0 };
	struct ctx c = { .rb = rb, .st = &st, .err = err };
	struct view t = { .n = 0 }, g = { .n = 0 };
	int r = 0;

	if (rb->n_target > HUTCH_IMAGE_LAYERS_MAX || rb->n_guides > HUTCH_IMAGE_ROLLBACK_GUIDES_MAX)
		return hutch_err_set(err, -E2BIG, "rollback: too many layers");
	c.buf = malloc(COPY_BUF);
	c.buf2 = malloc(COPY_BUF);
	if (!c.buf || !c.buf2)
		r = hutch_err_set(err, -ENOMEM, "rollback");
	r = r < 0 ? r : dup_view(rb->target, rb->n_target, &t, err);
	r = r < 0 ? r : dup_view(rb->guides, rb->n_guides, &g, err);
	if (r >= 0)
		r = sync_dir(&c, rb->live, &t, &g, false, "");
	view_done(&t);
	view_done(&g);
	free(c.buf);
	free(c.buf2);
	*ret = st; /* what was changed, on failure too: was it half done? */
	return r;
}

/* ---- the snapshot's layers and the guides, from the store ---- */

static int open_layer(struct hutch_image_store *s, const char *diff_id, struct hutch_err *err)
{
	int fd = hutch_image_digest_is_valid(diff_id) ? open_dir(s->layers, diff_id + 7) : -EINVAL;

	if (fd < 0)
		return hutch_err_set_errno(err, fd, "open layer %.19s (pruned?)", diff_id);
	return fd;
}

void hutch_image_rollback_src_done(struct hutch_image_rollback_src *src)
{
	hutch_close_many(src->target, src->n_target);
	hutch_close_many(src->guides, src->n_guides);
	src->n_target = src->n_guides = 0;
}

/* The layers both share (bottom first), or why name is no rollback target. */
static int shared_prefix(const char *name, const cJSON *layers, const struct hutch_image_use *cur,
                         const char *cur_name, size_t *ret, struct hutch_err *err)
{
	size_t n = (size_t)cJSON_GetArraySize(layers), k = 0;

	while (k < n && k < cur->config.n_diff_ids &&
	       cJSON_IsString(cJSON_GetArrayItem(layers, (int)k)) &&
	       !strcmp(cJSON_GetArrayItem(layers, (int)k)->valuestring, cur->config.diff_ids[k]))
		k++;
	/* The snapshot descends from the sandbox's image, or the image from it. */
	if (k == 0 || (k != n && k != cur->config.n_diff_ids))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "snapshot '%s' is not of this sandbox's image '%s': a sandbox rolls back "
		        "only to a snapshot of its image's lineage (of this sandbox, of another of "
		        "'%s', or one its image was spawned from); to start from '%s', 'hutch "
		        "create --snapshot %s'",
		        name, cur_name, cur_name, name, name);
	*ret = k;
	return 0;
}

int hutch_image_rollback_open(struct hutch_image_store *s, const char *name,
                              const struct hutch_image_use *cur, const char *cur_name,
                              struct hutch_image_rollback_src *ret, struct hutch_err *err)
{
	struct hutch_image_rollback_src src = { .n_target = 0 };
	_cleanup_cjson_ cJSON *ref = NULL;
	const cJSON *layers;
	size_t n, k = 0;
	int r = store_read_ref(s, name, &ref, err);

	if (r == -ENOENT)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                           "no snapshot '%s' in the store ('hutch snapshot ls')",
		                           name);
	if (r < 0)
		return r;
	if (!hutch_image_is_snapshot(ref))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'%s' is an image, not a snapshot: roll back to a "
		                           "snapshot ('hutch snapshot ls')",
		                           name);
	layers = cJSON_GetObjectItemCaseSensitive(ref, "layers");
	n = (size_t)cJSON_GetArraySize(layers);
	if (!cJSON_IsArray(layers) || n == 0 || n > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set(err, -EINVAL, "snapshot '%s' has a damaged reference", name);
	if ((r = shared_prefix(name, layers, cur, cur_name, &k, err)) < 0)
		return r;
	/* The snapshot's layers top first; the ones beyond k guide the walk. */
	for (size_t i = n; r >= 0 && i-- > 0;) {
		const cJSON *d = cJSON_GetArrayItem(layers, (int)i);

		r = open_layer(s, cJSON_IsString(d) ? d->valuestring : "", err);
		if (r >= 0)
			src.target[src.n_target++] = r;
		if (r >= 0 && i >= k && (r = fcntl(r, F_DUPFD_CLOEXEC, 3)) < 0)
			r = hutch_err_set_errno(err, -errno, "rollback");
		if (r >= 0 && i >= k)
			src.guides[src.n_guides++] = r;
	}
	/* The sandbox image's own layers beyond k: what it differs in. */
	for (size_t i = k; r >= 0 && i < cur->config.n_diff_ids; i++)
		if ((r = open_layer(s, cur->config.diff_ids[i], err)) >= 0)
			src.guides[src.n_guides++] = r;
	if (r < 0) {
		hutch_image_rollback_src_done(&src);
		return r;
	}
	*ret = src;
	return 0;
}
