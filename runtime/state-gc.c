/* SPDX-License-Identifier: Apache-2.0 */
/* A dead sandbox's end, and gc (see state.h): what its supervisor left
 * reaped (its cgroups, its image use record, its records kept beside the
 * tombstone, its state dir), a sandbox killed; gc of dead, retired and
 * half-made sandboxes and old tombstones, skipped when nothing can have
 * died since the last one. state.c: the state it reads. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "fdutil.h"
#include "journal-format.h"
#include "state.h"
#include "syscalls.h"

/* $RT/.gc: the runtime dir's link count after the last full gc (see
 * hutch_state_gc_auto()); $RT/.gc-pruned: its mtime says when tombstones
 * were last pruned. */
#define GC_MARK     ".gc"
#define GONE_PRUNED ".gc-pruned"

static void reap_cgroups(const cJSON *state, struct hutch_err *err)
{
	const cJSON *dirs = cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(state, "cgroup"), "dirs");
	const cJSON *it;

	cJSON_ArrayForEach(it, dirs) {
		char run[4096];

		if (!cJSON_IsString(it))
			continue;
		(void)hutch_cgroup_remove_dir(it->valuestring, err);
		/* A CRIU run's, beside it (hutch_cgroup_run_new()), that its
		 * watcher did not remove (killed too): gone is 0, one open. */
		if ((size_t)snprintf(run, sizeof(run), "%s" HUTCH_CGROUP_RUN_SUFFIX,
		                     it->valuestring) < sizeof(run))
			(void)hutch_cgroup_remove_dir(run, err);
	}
}

/* The image use record state.json names (supervisor/status.c), which its
 * supervisor removes at the end unless it was killed: only a file named
 * after this sandbox in a users/ directory. */
static void reap_image_use(const cJSON *state, const char *id)
{
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(state, "image_use");
	const char *base, *path = cJSON_IsString(u) ? u->valuestring : NULL;
	size_t len;

	if (!path || path[0] != '/')
		return;
	base = strrchr(path, '/') + 1;
	len = (size_t)(base - path);
	if (strcmp(base, id) != 0 || len < 7 || strncmp(base - 7, "/users/", 7) != 0)
		return;
	(void)unlink(path);
}

/* What a state dir holds that is kept beside the tombstone once the
 * sandbox ended, as $RT/.gone/<id><suffix>: the supervisor's log
 * (supervisor/events.h), the session journal (runtime/journal-format.h)
 * and the egress log (supervisor/netlog.h). */
static const struct {
	const char *name, *suffix;
} kept_records[] = {
	{ "events.log", ".events" },
	{ HUTCH_JOURNAL_FILE, HUTCH_JOURNAL_SUFFIX },
	{ HUTCH_JOURNAL_OLD_FILE, HUTCH_JOURNAL_OLD_SUFFIX },
	{ "net.jsonl", ".net" },
	{ "net.1.jsonl", ".net.1" },
};

static bool is_kept_suffix(const char *tail)
{
	for (size_t i = 0; i < sizeof(kept_records) / sizeof(kept_records[0]); i++)
		if (!strcmp(tail, kept_records[i].suffix))
			return true;
	return false;
}

/* A sandbox whose supervisor died (killed or crashed) ends as one that
 * ended by itself does: its tombstone (unless its supervisor wrote one
 * before it died: reason is why gc or rm removes it), a last line in its
 * log saying so, its records moved beside the tombstone, where hutch
 * journal, events and net-log find them until the tombstones' prune, and
 * its journal's end line, with the tombstone's reason and who wrote it. */
static void keep_records(const struct hutch_paths *p, const char *reason)
{
	char rt[sizeof(p->dir)], line[320], path[4400], old[64], *slash;
	_cleanup_close_ int fd = -EBADF;
	int64_t at, now = hutch_now_realtime();
	const char *by = strcmp(reason, HUTCH_GONE_SUPERVISOR_DIED) ? "rm" : "gc";
	int n;

	snprintf(rt, sizeof(rt), "%s", p->dir);
	slash = strrchr(rt, '/');
	if (!slash)
		return;
	*slash = '\0';
	if (hutch_gone_read(rt, p->id, old, sizeof(old), &at) <= 0) {
		(void)hutch_gone_write(rt, p->id, reason, now);
		snprintf(old, sizeof(old), "%s", reason);
	}
	/* What its supervisor moved before it died stays as it is. */
	for (size_t i = 0; i < sizeof(kept_records) / sizeof(kept_records[0]); i++) {
		snprintf(path, sizeof(path), "%s/.gone/%s%s", rt, p->id, kept_records[i].suffix);
		if (access(path, F_OK) < 0 && errno == ENOENT)
			(void)hutch_gone_keep(p->dir, p->id, kept_records[i].name,
			                      kept_records[i].suffix);
	}
	/* its journal's end line, with the tombstone's reason */
	snprintf(path, sizeof(path), "%s/.gone/%s%s", rt, p->id, HUTCH_JOURNAL_SUFFIX);
	(void)hutch_journal_end_dead(path, old, by, now);
	snprintf(path, sizeof(path), "%s/.gone/%s%s", rt, p->id, kept_records[0].suffix);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	n = hutch_format_utc(now, line, sizeof(line));
	n += snprintf(line + n, sizeof(line) - (size_t)n,
	              ".000Z %s: its supervisor was gone (killed or crashed); what it left "
	              "is removed\n",
	              by);
	if (fd >= 0)
		(void)hutch_write_all(fd, line, (size_t)n);
}

/* Remove the sandbox dir p->dir, the cgroups and the image use record its
 * state.json records, unless its supervisor (the lock holder) is alive;
 * its records kept with a tombstone of reason (keep_records()). */
static int reap_paths(const struct hutch_paths *p, const char *reason, struct hutch_err *err)
{
	_cleanup_close_ int lock = -EBADF;
	_cleanup_cjson_ cJSON *state = NULL;
	struct stat st;
	int r;

	/* Hold the lock ourselves while removing, so a concurrent gc or a
	 * racing create cannot interleave. */
	lock = open(p->lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
		return 0; /* alive */
	/* Removed by its holder while we waited for it (a failed create:
	 * sandbox.c's unreserve()): nothing of it to reap, no tombstone. */
	if (lock >= 0 && fstat(lock, &st) == 0 && st.st_nlink == 0)
		return 0;
	if (hutch_state_read(p, &state) == 0) {
		reap_cgroups(state, err);
		reap_image_use(state, p->id);
	}
	keep_records(p, reason);
	r = hutch_rm_rf_at(AT_FDCWD, p->dir);
	if (r < 0)
		return hutch_err_set_errno(err, r, "remove '%s'", p->dir);
	return 1;
}

int hutch_state_reap(const char *runtime_dir, const char *id, const char *reason,
                     struct hutch_err *err)
{
	struct hutch_paths p;
	int r;

	r = hutch_paths_init(runtime_dir, id, &p);
	if (r < 0)
		return hutch_err_set(err, r, "invalid sandbox id '%s'", id);
	return reap_paths(&p, reason, err);
}

/* True if process pid (through /proc) has the file of st open. */
static bool holds_file(pid_t pid, const struct stat *st)
{
	char path[64];
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while ((de = readdir(d))) {
		struct stat fst;
		if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &fst, 0) < 0)
			continue;
		if (fst.st_dev == st->st_dev && fst.st_ino == st->st_ino)
			return true;
	}
	return false;
}

/* Wait up to ms for the lock to be free, then reap. */
static int reap_when_free(const struct hutch_paths *p, int ms, struct hutch_err *err)
{
	for (int waited = 0;; waited += 10) {
		int r = reap_paths(p, "deleted", err);
		if (r != 0 || waited >= ms)
			return r;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
}

int hutch_state_kill(const struct hutch_paths *p, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *state = NULL;
	_cleanup_close_ int pidfd = -EBADF;
	const cJSON *pid;
	struct stat st;
	int r;

	r = hutch_state_read(p, &state);
	if (r < 0)
		return hutch_err_set_errno(err, r, "read the state of sandbox %s", p->id);
	pid = cJSON_GetObjectItemCaseSensitive(state, "supervisor_pid");
	if (!cJSON_IsNumber(pid) || pid->valuedouble < 2)
		return hutch_err_set(err, -EPROTO, "the state of sandbox %s names no supervisor",
		                     p->id);
	if (stat(p->lock, &st) < 0)
		return hutch_err_set_errno(err, -errno, "stat '%s'", p->lock);
	/* The pidfd is taken before the check: if the pid was reused, the
	 * new process does not hold the lock file and nothing is sent. */
	pidfd = sys_pidfd_open((pid_t)pid->valueint, 0);
	if (pidfd < 0 && errno != ESRCH)
		return hutch_err_set_errno(err, -errno, "pidfd_open(%d)", pid->valueint);
	if (pidfd >= 0 && holds_file((pid_t)pid->valueint, &st)) {
		if (sys_pidfd_send_signal(pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
			return hutch_err_set_errno(err, -errno, "kill supervisor %d",
			                           pid->valueint);
		(void)poll(&(struct pollfd){ .fd = pidfd, .events = POLLIN }, 1, 5000);
	}
	/* Its init dies with it (parent-death signal), and with init every
	 * process of the sandbox; the lock goes with the last of them. */
	r = reap_when_free(p, 5000, err);
	if (r == 0)
		return hutch_err_set(err, -EBUSY, "sandbox %s is still held by a process", p->id);
	return r;
}

/* Remove tombstones older than HUTCH_GONE_KEEP_SECONDS. Unless all is set,
 * at most once per HUTCH_GONE_PRUNE_SECONDS (the mtime of $RT/.gc-pruned
 * says when it last ran): the tombstones of a week of churn
 * are many, and pruning them hourly instead of at every create loses
 * nothing. */
static void gc_gone(const char *runtime_dir, bool all)
{
	char path[4200], stamp_path[4200];
	_cleanup_closedir_ DIR *d = NULL;
	_cleanup_close_ int stamp = -EBADF;
	struct dirent *de;
	struct stat st;
	time_t now = time(NULL);

	snprintf(stamp_path, sizeof(stamp_path), "%s/" GONE_PRUNED, runtime_dir);
	if (!all && lstat(stamp_path, &st) == 0 && st.st_mtime <= now &&
	    now - st.st_mtime < HUTCH_GONE_PRUNE_SECONDS)
		return;
	snprintf(path, sizeof(path), "%s/.gone", runtime_dir);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char id[HUTCH_ID_LEN + 1];

		/* A tombstone "<id>", and the records kept beside it
		 * (kept_records[]). */
		const char *tail = de->d_name + HUTCH_ID_LEN;

		memcpy(id, de->d_name, HUTCH_ID_LEN);
		id[HUTCH_ID_LEN] = '\0';
		if (!hutch_id_is_valid(id) || (*tail && !is_kept_suffix(tail)))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now - st.st_mtime > HUTCH_GONE_KEEP_SECONDS)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	stamp = open(stamp_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (stamp >= 0)
		(void)futimens(stamp, NULL);
}

/* The runtime dir's link count: 2 + its subdirectories (sandbox dirs,
 * ".new-*", .gone) on tmpfs, ext4, xfs. 0 when the file system does not
 * count subdirectories that way (btrfs says 1): then every gc is full. */
static nlink_t subdir_links(const char *runtime_dir)
{
	struct stat st;

	if (stat(runtime_dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_nlink < 2)
		return 0;
	return st.st_nlink;
}

/* Remember the link count after a full gc, in the content of $RT/.gc; its
 * mtime says when. Written whole through a temporary name; not written
 * when it says that count already and is recent (marked: what
 * gc_can_skip() read, 0 for none or an old one): its mtime then stays
 * that of an earlier gc with the same count, so the next full gc is due
 * sooner, never later (six syscalls off a create whose gc found what the
 * last found: a run's retired dir, still being removed by its
 * supervisor). */
static void gc_mark(const char *runtime_dir, nlink_t links, unsigned long long marked)
{
	char path[4200], tmp[4300], text[32];

	if (!links || links == marked)
		return;
	snprintf(path, sizeof(path), "%s/" GC_MARK, runtime_dir);
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)links);
	/* swapped, not renamed over (hutch_rename_replace(): a create's gc
	 * would otherwise wait for the old mark's discard, 0.5-4 ms here) */
	if (hutch_write_file_at(AT_FDCWD, tmp, text, 0600) < 0 ||
	    hutch_rename_replace(tmp, path) < 0)
		(void)unlink(tmp);
}

/* True if nothing can have died since the last full gc: the runtime dir
 * has exactly the subdirectories it had then (a sandbox dir that its
 * supervisor did not remove keeps the count up), and that gc is recent.
 * *ret_marked: the count the mark holds when it is recent, else 0. */
static bool gc_can_skip(const char *runtime_dir, unsigned long long *ret_marked)
{
	char path[4200], text[32];
	_cleanup_close_ int fd = -EBADF;
	unsigned long long marked;
	nlink_t links = subdir_links(runtime_dir);
	struct stat st;
	time_t now = time(NULL);
	ssize_t n;

	if (!links)
		return false;
	snprintf(path, sizeof(path), "%s/" GC_MARK, runtime_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0)
		return false;
	/* Only root's own 0600 marker counts (the runtime dir is root's). */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return false;
	/* A file's times may be a second past time(): the kernel stamps them
	 * from a finer clock than time()'s coarse one (multigrain timestamps),
	 * so a mark made this second can read as made the next. */
	if (st.st_mtime > now + 1 || now - st.st_mtime >= HUTCH_GC_RESCAN_SECONDS)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	if (n <= 0)
		return false;
	text[n] = '\0';
	if (sscanf(text, "%llu", &marked) != 1)
		return false;
	*ret_marked = marked;
	return marked == (unsigned long long)links;
}

/* What one scan of the runtime dir found for a gc: a sandbox "<id>", a
 * half-made ".new-<id>" and a retired ".dead-<id>" (hutch_state_retire()).
 * One scan, not one per kind (issue 31: three scans of the dir, 15
 * syscalls, in every full gc of a create's). */
enum gc_kind {
	GC_SANDBOX,
	GC_NEW,
	GC_DEAD,
	GC_DEAD_HELD
};

struct gc_entry {
	char id[HUTCH_ID_LEN + 1];
	unsigned char kind;
};

struct gc_scan {
	DIR *dir;
	struct gc_entry *v;
	size_t n, alloc;
	bool any_new;
};

static void gc_scan_done(struct gc_scan *sc)
{
	if (sc->dir)
		closedir(sc->dir);
	free(sc->v);
}

static int gc_scan(const char *runtime_dir, struct gc_scan *sc)
{
	const size_t plen = strlen(HUTCH_RETIRED_PREFIX);
	struct dirent *de;

	*sc = (struct gc_scan){ 0 };
	sc->dir = opendir(runtime_dir);
	if (!sc->dir)
		return -errno;
	while ((de = readdir(sc->dir))) {
		const char *id = de->d_name;
		unsigned char kind = GC_SANDBOX;

		if (!strncmp(id, ".new-", 5)) {
			kind = GC_NEW;
			id += 5;
		} else if (!strncmp(id, HUTCH_RETIRED_PREFIX, plen)) {
			kind = GC_DEAD;
			id += plen;
		}
		if (!hutch_id_is_valid(id))
			continue;
		if (sc->n == sc->alloc) {
			size_t na = sc->alloc ? sc->alloc * 2 : 32;
			void *q = realloc(sc->v, na * sizeof(*sc->v));
			if (!q)
				return -ENOMEM;
			sc->v = q;
			sc->alloc = na;
		}
		memcpy(sc->v[sc->n].id, id, HUTCH_ID_LEN + 1);
		sc->v[sc->n++].kind = kind;
		sc->any_new |= kind == GC_NEW;
	}
	return 0;
}

/* Half-made sandboxes (".new-<id>") whose creator died before renaming
 * them: none can be in the making while we hold the create lock
 * exclusively (one seen before we held it and renamed since is gone:
 * ENOENT, nothing removed). No lock taken when the scan saw none. */
static int gc_new(const char *runtime_dir, const struct gc_scan *sc)
{
	_cleanup_close_ int lock = -EBADF;
	int n = 0;

	if (!sc->any_new)
		return 0;
	lock = hutch_state_create_lock(runtime_dir, LOCK_EX | LOCK_NB);
	if (lock < 0)
		return 0;
	for (size_t i = 0; i < sc->n; i++) {
		char name[HUTCH_ID_LEN + 8];

		if (sc->v[i].kind != GC_NEW)
			continue;
		snprintf(name, sizeof(name), ".new-%s", sc->v[i].id);
		if (hutch_rm_rf_at(dirfd(sc->dir), name) == 0)
			n++;
	}
	return n;
}

/* Retired sandboxes whose supervisor died before finishing its teardown
 * (their state.json still names the cgroups); one whose supervisor still
 * holds it is marked GC_DEAD_HELD: it removes the dir itself, soon. */
static int gc_retired(const char *runtime_dir, struct gc_scan *sc, struct hutch_err *err)
{
	int n = 0;

	for (size_t i = 0; i < sc->n; i++) {
		struct hutch_paths p;
		int r;

		if (sc->v[i].kind != GC_DEAD ||
		    hutch_paths_init(runtime_dir, sc->v[i].id, &p) < 0 ||
		    hutch_state_retired_paths(&p, &p) < 0)
			continue;
		r = reap_paths(&p, HUTCH_GONE_SUPERVISOR_DIED, err);
		if (r > 0)
			n++;
		else if (r == 0)
			sc->v[i].kind = GC_DEAD_HELD;
	}
	return n;
}

/* The link count the mark keeps: without the retired dirs whose
 * supervisors were removing them (still there after the count was
 * taken): each is gone by the next create, and counted it made that
 * create's gc a full one again (a run's `.dead-` dir outlives its answer:
 * back to back runs did a full gc every second or third, ~30 syscalls). A
 * dir gone between the count and its check is left counted: a mark too
 * high costs one more full gc, never a skipped one. */
static nlink_t mark_links(const char *runtime_dir, const struct gc_scan *sc)
{
	nlink_t links = subdir_links(runtime_dir);

	for (size_t i = 0; i < sc->n && links > 2; i++) {
		char name[HUTCH_ID_LEN + 16];
		struct stat st;

		if (sc->v[i].kind != GC_DEAD_HELD)
			continue;
		snprintf(name, sizeof(name), HUTCH_RETIRED_PREFIX "%s", sc->v[i].id);
		if (fstatat(dirfd(sc->dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			links--;
	}
	return links;
}

static int gc(const char *runtime_dir, bool all, unsigned long long marked, struct hutch_err *err)
{
	struct gc_scan sc;
	int r, reaped = 0;

	r = gc_scan(runtime_dir, &sc);
	if (r < 0) {
		gc_scan_done(&sc);
		return r == -ENOENT ? 0 : hutch_err_set_errno(err, r, "list '%s'", runtime_dir);
	}
	for (size_t i = 0; i < sc.n; i++) {
		if (sc.v[i].kind != GC_SANDBOX)
			continue;
		r = hutch_state_reap(runtime_dir, sc.v[i].id, HUTCH_GONE_SUPERVISOR_DIED, err);
		if (r > 0)
			reaped++;
	}
	reaped += gc_new(runtime_dir, &sc);
	reaped += gc_retired(runtime_dir, &sc, err);
	gc_gone(runtime_dir, all);
	gc_mark(runtime_dir, mark_links(runtime_dir, &sc), marked);
	gc_scan_done(&sc);
	return reaped;
}

int hutch_state_gc(const char *runtime_dir, struct hutch_err *err)
{
	return gc(runtime_dir, true, 0, err);
}

int hutch_state_gc_auto(const char *runtime_dir, struct hutch_err *err)
{
	unsigned long long marked = 0;

	if (gc_can_skip(runtime_dir, &marked))
		return 0;
	return gc(runtime_dir, false, marked, err);
}
