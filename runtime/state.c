/* SPDX-License-Identifier: Apache-2.0 */
/* On-disk sandbox state: the runtime dir, state dirs and state.json, liveness
 * through flock, uid slots, tombstones; see state.h (a dead sandbox's reaping
 * and gc: state-gc.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "state.h"

const char *hutch_runtime_dir(void)
{
	static char user_dir[4096]; /* computed once per process, like the env */
	const char *d = getenv("HUTCH_RUNTIME_DIR");

	if (d && *d)
		return d;
	if (geteuid() == 0)
		return HUTCH_DEFAULT_RUNTIME_DIR;
	if (!user_dir[0] && hutch_state_user_runtime_dir(user_dir, sizeof(user_dir)) < 0)
		snprintf(user_dir, sizeof(user_dir), "/tmp/hutch-%u", (unsigned)geteuid());
	return user_dir;
}

int hutch_runtime_dir_bound(const char *runtime_dir, struct hutch_err *err)
{
	size_t len = strlen(runtime_dir);

	if (len <= HUTCH_RUNTIME_DIR_MAX)
		return 0;
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -ENAMETOOLONG,
	                           "the runtime directory '%.80s...' is %zu bytes long, over %d: "
	                           "set HUTCH_RUNTIME_DIR to a shorter one",
	                           runtime_dir, len, HUTCH_RUNTIME_DIR_MAX);
}

int hutch_paths_init(const char *runtime_dir, const char *id, struct hutch_paths *ret)
{
	bool valid = hutch_id_is_valid(id);

	if (!valid || strlen(runtime_dir) > HUTCH_RUNTIME_DIR_MAX) {
		ret->id[0] = ret->dir[0] = ret->sock[0] = ret->exec[0] = '\0';
		ret->state[0] = ret->lock[0] = ret->root[0] = '\0';
		return valid ? -ENAMETOOLONG : -EINVAL;
	}
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	snprintf(ret->dir, sizeof(ret->dir), "%s/%s", runtime_dir, id);
	snprintf(ret->sock, sizeof(ret->sock), "%s/api.sock", ret->dir);
	snprintf(ret->exec, sizeof(ret->exec), "%s/" HUTCH_EXEC_SOCK_NAME, ret->dir);
	snprintf(ret->state, sizeof(ret->state), "%s/state.json", ret->dir);
	snprintf(ret->lock, sizeof(ret->lock), "%s/lock", ret->dir);
	snprintf(ret->root, sizeof(ret->root), "%s/root", ret->dir);
	return 0;
}

int hutch_state_create_lock(const char *runtime_dir, int op)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/.create.lock", runtime_dir);
	return hutch_lock_at(AT_FDCWD, path, op);
}

/* Whether a pod's container holds the slot's pin (hutch_slot_pin()):
 * its processes still run with the slot's ids, so the slot is not free
 * although the sandbox that took it is gone. */
static bool slot_is_pinned(int dirfd, unsigned slot)
{
	char name[24];
	_cleanup_close_ int fd = -EBADF;

	snprintf(name, sizeof(name), "%u.pin", slot);
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0; /* released when fd closes */
}

int hutch_slot_pin(const char *dir, unsigned slot, struct hutch_err *err)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/%u.pin", dir, slot);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open uid slot pin '%s'", path);
	if (flock(fd, LOCK_SH) < 0) {
		int r = -errno;

		close(fd);
		return hutch_err_set_errno(err, r, "lock uid slot pin '%s'", path);
	}
	return fd;
}

int hutch_slot_acquire(const char *dir, unsigned nslots, unsigned *ret_slot, struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF;
	unsigned start;
	int r;

	if (nslots == 0)
		return hutch_err_set(err, -ERANGE, "no uid slots");
	r = hutch_mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0)
		return hutch_err_set_errno(err, r, "create '%s'", dir);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s'", dir);
	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (unsigned)getpid();
	for (unsigned i = 0; i < nslots; i++) {
		unsigned slot = (start + i) % nslots;
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "%u", slot);
		fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return hutch_err_set_errno(err, -errno, "open uid slot '%s/%s'", dir, name);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && !slot_is_pinned(dirfd, slot)) {
			*ret_slot = slot;
			return fd;
		}
		close(fd);
	}
	return hutch_err_set(err, -EBUSY, "all %u uid ranges are in use: remove sandboxes first",
	                     nslots);
}

bool hutch_slot_is_held(unsigned slot)
{
	char path[sizeof(HUTCH_SLOTS_DIR) + 16];
	_cleanup_close_ int fd = -EBADF;

	snprintf(path, sizeof(path), "%s/%u", HUTCH_SLOTS_DIR, slot);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return false; /* released when fd closes */
	return errno == EWOULDBLOCK;
}

int hutch_state_write_text(const struct hutch_paths *p, const char *text, size_t len)
{
	char tmp[4300];
	int r;

	if (len > HUTCH_STATE_MAX)
		return -E2BIG; /* hutch_state_read() could not read it back */
	snprintf(tmp, sizeof(tmp), "%s.tmp", p->state);
	r = hutch_write_file_at(AT_FDCWD, tmp, text, 0600);
	if (r < 0)
		return r;
	return hutch_rename_replace(tmp, p->state);
}

int hutch_state_read(const struct hutch_paths *p, cJSON **ret)
{
	char buf[HUTCH_STATE_MAX];
	ssize_t n = hutch_read_file_at(AT_FDCWD, p->state, buf, sizeof(buf));
	cJSON *j;

	if (n < 0)
		return (int)n;
	j = cJSON_ParseWithLength(buf, (size_t)n);
	if (!j)
		return -EBADMSG;
	*ret = j;
	return 0;
}

int hutch_state_is_live(const struct hutch_paths *p)
{
	_cleanup_close_ int fd = open(p->lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return 0; /* nobody holds it; closing fd drops our lock */
	return errno == EWOULDBLOCK ? 1 : -errno;
}

int hutch_gone_write(const char *runtime_dir, const char *id, const char *reason, int64_t at)
{
	char path[4200], dir[4200], text[256];
	int r;

	snprintf(path, sizeof(path), "%s/.gone/%s", runtime_dir, id);
	snprintf(text, sizeof(text), "%s %lld\n", reason, (long long)at);
	r = hutch_write_file_at(AT_FDCWD, path, text, 0600);
	if (r != -ENOENT)
		return r;
	/* The runtime dir's first tombstone: .gone made then, not tried (EEXIST)
	 * before every one, a syscall on a run's way to its answer. */
	snprintf(dir, sizeof(dir), "%s/.gone", runtime_dir);
	(void)mkdir(dir, 0700);
	return hutch_write_file_at(AT_FDCWD, path, text, 0600);
}

int hutch_gone_keep(const char *state_dir, const char *id, const char *name, const char *suffix)
{
	char from[4200], to[4200];
	const char *slash = strrchr(state_dir, '/');

	if (!slash)
		return -EINVAL;
	snprintf(from, sizeof(from), "%s/%s", state_dir, name);
	snprintf(to, sizeof(to), "%.*s/.gone/%s%s", (int)(slash - state_dir), state_dir, id,
	         suffix);
	return rename(from, to) < 0 ? -errno : 0;
}

int hutch_gone_read(const char *runtime_dir, const char *id, char *reason, size_t size, int64_t *at)
{
	char path[4200], text[256], word[64];
	long long t;

	if (!hutch_id_is_valid(id))
		return 0;
	snprintf(path, sizeof(path), "%s/.gone/%s", runtime_dir, id);
	if (hutch_read_file_at(AT_FDCWD, path, text, sizeof(text)) < 0)
		return 0;
	if (sscanf(text, "%63s %lld", word, &t) != 2)
		return 0;
	snprintf(reason, size, "%s", word);
	*at = t;
	return 1;
}

const char *hutch_gone_words(const char *reason)
{
	if (reason && (!strcmp(reason, "expired") || !strcmp(reason, "crashed")))
		return reason;
	if (reason && !strcmp(reason, HUTCH_GONE_SUPERVISOR_DIED))
		return "ended: its supervisor died (killed or crashed) and hutch gc removed it";
	return "was deleted";
}

static int cmp_ids(const void *a, const void *b)
{
	return strcmp(a, b);
}

int hutch_state_list(const char *runtime_dir, char (**ret)[HUTCH_ID_LEN + 1], size_t *ret_n)
{
	_cleanup_closedir_ DIR *d = opendir(runtime_dir);
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;

	*ret = NULL;
	*ret_n = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (!hutch_id_is_valid(de->d_name))
			continue;
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 32;
			void *q = realloc(ids, na * sizeof(*ids));
			if (!q) {
				free(ids);
				return -ENOMEM;
			}
			ids = q;
			alloc = na;
		}
		memcpy(ids[n++], de->d_name, HUTCH_ID_LEN + 1);
	}
	if (n)
		qsort(ids, n, sizeof(*ids), cmp_ids);
	*ret = ids;
	*ret_n = n;
	return 0;
}

int hutch_state_resolve(const char *runtime_dir, const char *prefix,
                        char ret_id[static HUTCH_ID_LEN + 1])
{
	_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n, len, found = 0;
	int r;

	if (!hutch_id_prefix_is_valid(prefix))
		return -EINVAL;
	/* A whole id matches no other (all are HUTCH_ID_LEN long): look it up
	 * instead of listing the runtime dir, one syscall whatever the number
	 * of sandboxes (a listing is four, and getdents grows with them). */
	if (hutch_id_is_valid(prefix)) {
		char path[PATH_MAX];

		if (snprintf(path, sizeof(path), "%s/%s", runtime_dir, prefix) >= (int)sizeof(path))
			return -ENAMETOOLONG;
		if (faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		memcpy(ret_id, prefix, HUTCH_ID_LEN + 1);
		return 0;
	}
	r = hutch_state_list(runtime_dir, &ids, &n);
	if (r < 0)
		return r;
	len = strlen(prefix);
	for (size_t i = 0; i < n; i++) {
		if (strncmp(ids[i], prefix, len) != 0)
			continue;
		if (found++)
			return -ENOTUNIQ;
		memcpy(ret_id, ids[i], HUTCH_ID_LEN + 1);
	}
	return found ? 0 : -ENOENT;
}

int hutch_state_retired_paths(const struct hutch_paths *p, struct hutch_paths *ret)
{
	char rt[sizeof(p->dir)];
	char *slash;

	snprintf(rt, sizeof(rt), "%s", p->dir);
	slash = strrchr(rt, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	*ret = *p;
	if ((size_t)snprintf(ret->dir, sizeof(ret->dir), "%s/" HUTCH_RETIRED_PREFIX "%s", rt,
	                     p->id) >= sizeof(ret->dir))
		return -ENAMETOOLONG;
	snprintf(ret->sock, sizeof(ret->sock), "%s/api.sock", ret->dir);
	snprintf(ret->exec, sizeof(ret->exec), "%s/" HUTCH_EXEC_SOCK_NAME, ret->dir);
	snprintf(ret->state, sizeof(ret->state), "%s/state.json", ret->dir);
	snprintf(ret->lock, sizeof(ret->lock), "%s/lock", ret->dir);
	snprintf(ret->root, sizeof(ret->root), "%s/root", ret->dir);
	return 0;
}

int hutch_state_retire(const struct hutch_paths *p, struct hutch_paths *ret)
{
	struct hutch_paths q;
	int r = hutch_state_retired_paths(p, &q);

	if (r < 0)
		return r;
	if (rename(p->dir, q.dir) < 0)
		return -errno;
	*ret = q;
	return 0;
}

int hutch_state_user_runtime_dir(char *buf, size_t size)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	int n;

	if (x && x[0] == '/')
		n = snprintf(buf, size, "%s/hutch", x);
	else
		n = snprintf(buf, size, "/tmp/hutch-%u", (unsigned)geteuid());
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int hutch_runtime_dir_check(const char *dir, struct hutch_err *err)
{
	struct stat st;
	int r;

	if (geteuid() == 0)
		return 0;
	r = hutch_mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r == -EACCES || r == -EPERM || r == -EROFS)
		return hutch_err_set_errno(err, r,
		                           "create runtime dir '%.200s' (a directory above it is "
		                           "not yours to write: set HUTCH_RUNTIME_DIR or "
		                           "XDG_RUNTIME_DIR to a directory of yours)",
		                           dir);
	if (r < 0 && r != -ENOTDIR)
		return hutch_err_set_errno(err, r, "create runtime dir '%s'", dir);
	if (lstat(dir, &st) < 0)
		return hutch_err_set_errno(err, -errno, "runtime dir '%s'", dir);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return hutch_err_set(
		        err, -EPERM,
		        "runtime dir '%.100s' is not yours alone (owner %u, mode %04o): "
		        "remove it, or set XDG_RUNTIME_DIR or HUTCH_RUNTIME_DIR to a "
		        "directory of yours",
		        dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}
