/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Built-in file operations (see fileops.h). This runs in a child of init
 * that is already appuser, capability-less, no_new_privs and under the
 * seccomp filter, in the sandbox's mount namespace with /workspace as its
 * working directory: every path here is resolved by the kernel exactly as
 * for a command appuser runs, so symlinks, "..", absolute paths and
 * /proc/1/root lead only where appuser could go anyway. The code therefore
 * needs no containment checks of its own; it needs clear errors and
 * all-or-nothing writes.
 *
 * Writes go to an O_TMPFILE inode in the target's directory, which is only
 * given a name (linkat through /proc/self/fd, then rename over the target)
 * once every byte is in: a full tmpfs, a killed writer or a client that hung
 * up leave no file and no temporary name behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "fdutil.h"
#include "fileops.h"

#define COPY_CHUNK (1u << 20)

/* Report one error on stderr for the supervisor and return exit status 1. */
static int fail(int code, const char *what, const char *path)
{
	char buf[PATH_MAX + 256];
	int n;

	if (code < 0)
		code = -code;
	n = snprintf(buf, sizeof(buf), "E%d %s '%s': %s\n", code, what, path, strerror(code));
	if (n > 0)
		(void)!write(2, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
	return 1;
}

static int parse_mode(const char *s, mode_t *ret)
{
	char *end;
	unsigned long m;

	if (!*s)
		return 0;
	errno = 0;
	m = strtoul(s, &end, 8);
	if (errno || *end || m > 07777)
		return -EINVAL;
	*ret = (mode_t)m;
	return 1;
}

/* mkdir -p, as appuser; an existing directory (or symlink to one) is fine. */
static int mkdir_parents(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		struct stat st;
		char c = *p;
		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		if (stat(buf, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		*p = c;
		if (c == '\0')
			return 0;
	}
}

static void split_dir(const char *path, char *dir, size_t size, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		snprintf(dir, size, ".");
		*base = path;
	} else if (slash == path) {
		snprintf(dir, size, "/");
		*base = slash + 1;
	} else {
		snprintf(dir, size, "%.*s", (int)(slash - path), path);
		*base = slash + 1;
	}
}

/* Copy stdin to fd; returns the byte count or -errno. read() + write(),
 * not splice(): splicing a pipe into a tmpfs file copies into the page
 * cache under the pipe's mutex, so the supervisor filling the pipe spun on
 * that mutex (38 % of its CPU in a 1 GiB upload, perf record -a). */
static int64_t copy_in(int fd)
{
	_cleanup_free_ char *buf = malloc(COPY_CHUNK);
	int64_t total = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(0, buf, COPY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return total;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			off += w;
		}
		total += n;
	}
}

/* Give the anonymous inode fd the name path: link to a temporary name in
 * the same directory, then rename over the target. */
static int publish(int fd, const char *dir, const char *base, const char *path)
{
	char proc[64], tmp[PATH_MAX];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (int i = 0; i < 100; i++) {
		int n = snprintf(tmp, sizeof(tmp), "%s/.%s.hutch-%d-%d", dir, base, (int)getpid(),
		                 i);
		if (n < 0 || n >= (int)sizeof(tmp))
			return fail(ENAMETOOLONG, "cannot write", path);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
			break;
		if (errno != EEXIST)
			return fail(errno, "cannot write", path);
	}
	if (rename(tmp, path) < 0) {
		int e = errno;
		(void)unlink(tmp);
		return fail(e, "cannot write", path);
	}
	return 0;
}

static int op_write(int argc, const char *const *argv)
{
	_cleanup_close_ int fd = -EBADF;
	char dir[PATH_MAX];
	const char *path, *base;
	mode_t mode = 0644;
	struct stat st;
	int64_t want, got;
	int r;

	if (argc != 4 && (argc != 5 || strcmp(argv[4], "noparents") != 0))
		return fail(EINVAL, "bad arguments for", "write");
	path = argv[1];
	want = strtoll(argv[3], NULL, 10);
	r = parse_mode(argv[2], &mode);
	if (r < 0)
		return fail(EINVAL, "invalid mode for", path);
	split_dir(path, dir, sizeof(dir), &base);
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return fail(EISDIR, "cannot write", path);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return fail(EISDIR, "cannot write", path);
		if (r == 0)
			mode = st.st_mode & 07777; /* keep an existing file's mode */
	}
	if (argc == 4 && strcmp(dir, ".") != 0 && strcmp(dir, "/") != 0) {
		int e = mkdir_parents(dir, 0755);
		if (e < 0)
			return fail(e, "cannot create parent directories of", path);
	}
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(errno, "cannot write", path);
	got = copy_in(fd);
	if (got < 0)
		return fail((int)got, "cannot write", path);
	if (want >= 0 && got != want)
		return fail(EPIPE, "upload ended early, nothing written to", path);
	if (fchmod(fd, mode) < 0)
		return fail(errno, "cannot set the mode of", path);
	return publish(fd, dir, base, path);
}

static int op_read(int argc, const char *const *argv)
{
	_cleanup_close_ int fd = -EBADF;
	const char *path;
	struct stat st;
	uint64_t size, max, left;

	if (argc != 3)
		return fail(EINVAL, "bad arguments for", "read");
	path = argv[1];
	max = (uint64_t)strtoll(argv[2], NULL, 10);
	/* O_NONBLOCK: opening a FIFO must not hang; only regular files are read. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail(errno, "cannot read", path);
	if (fstat(fd, &st) < 0)
		return fail(errno, "cannot read", path);
	if (S_ISDIR(st.st_mode))
		return fail(EISDIR, "cannot read", path);
	if (!S_ISREG(st.st_mode))
		return fail(EINVAL, "not a regular file, cannot read", path);
	size = (uint64_t)st.st_size;
	if (size > max)
		return fail(EFBIG, "too large to read this way", path);
	if (hutch_write_all(1, &size, sizeof(size)) < 0)
		return 1;
	for (left = size; left > 0;) {
		ssize_t n = sendfile(1, fd, NULL, left > COPY_CHUNK ? COPY_CHUNK : left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(errno, "cannot read", path);
		if (n == 0)
			break; /* shrank meanwhile: the supervisor sees a short body */
		left -= (uint64_t)n;
	}
	return 0;
}

static int op_rm(int argc, const char *const *argv)
{
	struct stat st;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "rm");
	if (lstat(argv[1], &st) < 0)
		return fail(errno, "cannot delete", argv[1]);
	if (S_ISDIR(st.st_mode))
		return fail(EISDIR, "cannot delete", argv[1]);
	if (unlink(argv[1]) < 0)
		return fail(errno, "cannot delete", argv[1]);
	return 0;
}

static int op_mkdir(int argc, const char *const *argv)
{
	mode_t mode = 0755;
	int r;

	if (argc != 3)
		return fail(EINVAL, "bad arguments for", "mkdir");
	if (parse_mode(argv[2], &mode) < 0)
		return fail(EINVAL, "invalid mode for", argv[1]);
	r = mkdir_parents(argv[1], mode);
	if (r < 0)
		return fail(r, "cannot create directory", argv[1]);
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	if ((flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT) {
		(void)fail(errno, "cannot delete", p);
		errno = 0; /* reported */
		return -1;
	}
	return 0;
}

static int op_rmdir(int argc, const char *const *argv)
{
	struct stat st;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "rmdir");
	if (lstat(argv[1], &st) < 0)
		return fail(errno, "cannot delete directory", argv[1]);
	if (!S_ISDIR(st.st_mode))
		return fail(ENOTDIR, "cannot delete directory", argv[1]);
	/* FTW_PHYS: never follow a symlink out of the tree; FTW_MOUNT: stay on
	 * this file system. */
	errno = 0;
	if (nftw(argv[1], rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
		/* rm_one reported its failure (errno 0); else nftw's own */
		return errno ? fail(errno, "cannot delete directory", argv[1]) : 1;
	return 0;
}

/* Go's os.Remove: unlink, else rmdir; of two failures the one that
 * applies (rmdir of a non-directory says ENOTDIR: then unlink's). */
static int op_remove(int argc, const char *const *argv)
{
	int e;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "remove");
	if (unlink(argv[1]) == 0)
		return 0;
	e = errno;
	if (rmdir(argv[1]) == 0)
		return 0;
	return fail(errno != ENOTDIR ? errno : e, "cannot delete", argv[1]);
}

/* Go's os.RemoveAll: a missing path is done already; a non-directory is
 * unlinked; a directory goes as with rmdir (no symlink followed, no mount
 * crossed). */
static int op_remove_all(int argc, const char *const *argv)
{
	struct stat st;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "remove-all");
	if (lstat(argv[1], &st) < 0)
		return errno == ENOENT ? 0 : fail(errno, "cannot delete", argv[1]);
	if (!S_ISDIR(st.st_mode))
		return unlink(argv[1]) < 0 && errno != ENOENT
		               ? fail(errno, "cannot delete", argv[1])
		               : 0;
	return op_rmdir(argc, argv);
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "directory";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

static int by_name(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;

	return strcmp(cJSON_GetObjectItem(x, "name")->valuestring,
	              cJSON_GetObjectItem(y, "name")->valuestring);
}

static int op_ls(int argc, const char *const *argv)
{
	_cleanup_closedir_ DIR *d = NULL;
	_cleanup_cjson_ cJSON *arr = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ cJSON **v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "ls");
	d = opendir(argv[1]);
	if (!d)
		return fail(errno, "cannot list directory", argv[1]);
	while ((de = readdir(d))) {
		struct stat st;
		char mode[8];
		cJSON *o;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		if (n == alloc) {
			cJSON **q = realloc(v, (alloc = alloc ? alloc * 2 : 64) * sizeof(*v));
			if (!q)
				return fail(ENOMEM, "cannot list directory", argv[1]);
			v = q;
		}
		o = cJSON_CreateObject();
		snprintf(mode, sizeof(mode), "%o", (unsigned)(st.st_mode & 07777));
		cJSON_AddStringToObject(o, "name", de->d_name);
		cJSON_AddStringToObject(o, "type", type_name(st.st_mode));
		cJSON_AddNumberToObject(o, "size", (double)st.st_size);
		cJSON_AddStringToObject(o, "mode", mode);
		cJSON_AddNumberToObject(o, "mtime",
		                        (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9);
		v[n++] = o;
	}
	if (n)
		qsort(v, n, sizeof(*v), by_name);
	arr = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, v[i]);
	text = cJSON_PrintUnformatted(arr);
	if (!text || hutch_write_all(1, text, strlen(text)) < 0)
		return fail(ENOMEM, "cannot list directory", argv[1]);
	return 0;
}

static int op_tar(int argc, const char *const *argv, bool create)
{
	static const char *const tar_c[] = { "tar", "-cf", "-", ".", NULL };
	static const char *const tar_x[] = { "tar", "-xf", "-", "--no-same-owner", NULL };
	uint64_t size = HUTCH_FOP_SIZE_UNKNOWN;
	struct stat st;
	int r;

	if (argc != 2)
		return fail(EINVAL, "bad arguments for", "tar");
	if (!create) {
		r = mkdir_parents(argv[1], 0755);
		if (r < 0)
			return fail(r, "cannot create directory", argv[1]);
	} else if (stat(argv[1], &st) < 0) {
		return fail(errno, "cannot read directory", argv[1]);
	} else if (!S_ISDIR(st.st_mode)) {
		return fail(ENOTDIR, "cannot read directory", argv[1]);
	}
	if (chdir(argv[1]) < 0)
		return fail(errno, "cannot enter directory", argv[1]);
	if (create && hutch_write_all(1, &size, sizeof(size)) < 0)
		return 1;
	execvp("tar", (char *const *)(create ? tar_c : tar_x));
	return fail(errno, "cannot execute", "tar");
}

int hutch_fileop_main(int argc, const char *const *argv)
{
	const char *op = argv[0];

	if (!strcmp(op, HUTCH_FOP_WRITE))
		return op_write(argc, argv);
	if (!strcmp(op, HUTCH_FOP_READ))
		return op_read(argc, argv);
	if (!strcmp(op, HUTCH_FOP_RM))
		return op_rm(argc, argv);
	if (!strcmp(op, HUTCH_FOP_MKDIR))
		return op_mkdir(argc, argv);
	if (!strcmp(op, HUTCH_FOP_RMDIR))
		return op_rmdir(argc, argv);
	if (!strcmp(op, HUTCH_FOP_LS))
		return op_ls(argc, argv);
	if (!strcmp(op, HUTCH_FOP_REMOVE))
		return op_remove(argc, argv);
	if (!strcmp(op, HUTCH_FOP_REMOVE_ALL))
		return op_remove_all(argc, argv);
	if (!strcmp(op, HUTCH_FOP_TAR_C) || !strcmp(op, HUTCH_FOP_TAR_X))
		return op_tar(argc, argv, op[4] == 'c');
	return fail(ENOSYS, "unknown file operation", op);
}
