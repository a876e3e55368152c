/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cgroups of one sandbox: the part common to both backends. Detects the
 * hierarchy once (pure v2 when /sys/fs/cgroup is cgroup2, otherwise the v1
 * controllers, ignoring any v2 tree of a hybrid host), locates the caller's
 * own cgroup from /proc/self/cgroup and /proc/self/mountinfo, and computes
 * the "hutch-<name>" directories below it. Everything that only turns text
 * into paths or numbers is a pure function here so the unit test can reach
 * it; the backends (cgroup-v1.c, cgroup-v2.c) write the knobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"
#include "util.h"

#include "cgroup-internal.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* ---- OS helpers shared by the backends ---- */

void hutch_cgroup_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int hutch_cgroup_open_dir(const char *dir)
{
	_cleanup_close_ int root = -EBADF;
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = HUTCH_RESOLVE_HOST,
	};
	const char *rel;
	int fd;

	/* Resolve below /sys/fs/cgroup with the kernel's help: no symlink or
	 * ".." can lead us out, whatever the string says. */
	if (strncmp(dir, CG_ROOT, strlen(CG_ROOT)) != 0 ||
	    (dir[strlen(CG_ROOT)] != '/' && dir[strlen(CG_ROOT)] != '\0'))
		return -EINVAL;
	rel = dir + strlen(CG_ROOT);
	while (*rel == '/')
		rel++;
	if (!*rel)
		rel = ".";
	root = open(CG_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = sys_openat2(root, rel, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int hutch_cgroup_open_with_parent(const char *dir, int *ret_fd, int *ret_parent,
                                  const char **ret_name, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF, pfd = -EBADF;
	char parent[4096];
	const char *base = strrchr(dir, '/');

	if (!base || (size_t)(base - dir) >= sizeof(parent))
		return hutch_err_set(err, -EINVAL, "bad cgroup path '%s'", dir);
	memcpy(parent, dir, (size_t)(base - dir));
	parent[base - dir] = '\0';
	fd = hutch_cgroup_open_dir(dir);
	if (fd == -ENOENT)
		return 1;
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "open cgroup '%s'", dir);
	pfd = hutch_cgroup_open_dir(parent);
	if (pfd < 0)
		return hutch_err_set_errno(err, pfd, "open cgroup '%s'", parent);
	*ret_fd = TAKE_FD(fd);
	*ret_parent = TAKE_FD(pfd);
	*ret_name = base + 1;
	return 0;
}

int hutch_cgroup_try_remove(int fd, int parent, const char *name, const char *dir, int64_t deadline,
                            struct hutch_err *err)
{
	(void)hutch_cgroup_rmdir_children(fd);
	if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 1;
	if (errno != EBUSY)
		return hutch_err_set_errno(err, -errno, "remove cgroup '%s'", dir);
	if (hutch_now_mono_ms() >= deadline)
		return hutch_err_set(err, -EBUSY, "cgroup '%s' still busy after %d ms", dir,
		                     CG_WAIT_MS);
	return 0;
}

/* Read cgroup.procs of dirfd into pids; returns the count. */
static int read_pids(int dirfd, pid_t *pids, size_t max)
{
	char buf[16384];
	ssize_t n = hutch_read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	/* A full buffer may end in half a number: drop the last line; the
	 * caller loops until the cgroup is empty anyway. */
	if ((size_t)n == sizeof(buf) - 1) {
		char *nl = strrchr(buf, '\n');
		if (nl)
			nl[1] = '\0';
	}
	return (int)hutch_cgroup_parse_pids(buf, pids, max);
}

int hutch_cgroup_kill_procs(int dirfd)
{
	pid_t pids[1024], again[1024];
	int fds[1024];
	int n, m;

	n = read_pids(dirfd, pids, ELEMENTSOF(pids));
	if (n <= 0)
		return n == -ENOENT ? 0 : n;
	/* Pin each process with a pidfd, then re-read the list: a pid still
	 * listed after its pidfd was opened is the process we pinned (or a
	 * newer one in this very cgroup), never a stranger that reused it. */
	for (int i = 0; i < n; i++) {
		fds[i] = sys_pidfd_open(pids[i], 0);
		if (fds[i] < 0)
			fds[i] = errno == ENOSYS ? -ENOSYS : -ESRCH;
	}
	m = read_pids(dirfd, again, ELEMENTSOF(again));
	for (int i = 0; i < n; i++) {
		bool listed = false;

		for (int j = 0; j < m && !listed; j++)
			listed = again[j] == pids[i];
		if (listed && fds[i] >= 0)
			(void)sys_pidfd_send_signal(fds[i], SIGKILL, NULL, 0);
		else if (listed && fds[i] == -ENOSYS)
			(void)kill(pids[i], SIGKILL); /* pre-5.3 kernel: best effort */
		if (fds[i] >= 0)
			close(fds[i]);
	}
	return n;
}

DIR *hutch_cgroup_opendir(int dirfd)
{
	/* A fresh open file description: a dup() would share the directory
	 * offset, and a second walk of the same fd would see nothing. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return d;
}

int hutch_cgroup_rmdir_children(int dirfd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int r = 0;

	d = hutch_cgroup_opendir(dirfd);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int sub;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			int q = hutch_cgroup_rmdir_children(sub);
			close(sub);
			if (q < 0 && r == 0)
				r = q;
		}
		if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	return r;
}

/* ---- locating the caller's cgroups ---- */

struct cg_text {
	char *proc;      /* /proc/self/cgroup */
	char *mountinfo; /* /proc/self/mountinfo */
};

static void cg_text_done(struct cg_text *t)
{
	free(t->proc);
	free(t->mountinfo);
}

static int cg_text_read(struct cg_text *t, struct hutch_err *err)
{
	ssize_t n;

	*t = (struct cg_text){ 0 };
	n = hutch_read_file_alloc_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &t->proc);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '/proc/self/cgroup'");
	n = hutch_read_file_alloc_at(AT_FDCWD, "/proc/self/mountinfo", 16 << 20, &t->mountinfo);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '/proc/self/mountinfo'");
	return 0;
}

/* The directory of our own cgroup in the hierarchy of controller (NULL: v2). */
static int own_dir(const struct cg_text *t, const char *controller, char *ret, size_t size,
                   struct hutch_err *err)
{
	const char *what = controller ? controller : "cgroup2";
	char own[4096];
	struct cg_mount m;
	int r;

	r = hutch_cgroup_parse_mountinfo(t->mountinfo, controller, &m);
	if (r < 0)
		return hutch_err_set(err, r, "no %s hierarchy mounted under '" CG_ROOT "'", what);
	r = hutch_cgroup_parse_proc(t->proc, controller, own, sizeof(own));
	if (r < 0)
		return hutch_err_set(err, r, "no %s entry in '/proc/self/cgroup'", what);
	r = hutch_cgroup_path_join(&m, own, ret, size);
	if (r < 0)
		return hutch_err_set_errno(err, r, "own %s cgroup '%s' is not visible at '%s'",
		                           what, own, m.mountpoint);
	return 0;
}

/* leaf: "hutch-<name>", or a container's cgroupsPath (without its '/'). */
static int add_dir(struct hutch_cgroup *cg, const char *parent, const char *leaf, unsigned int ctrl)
{
	char *dir = NULL;

	if (asprintf(&dir, "%s/%s", parent, leaf) < 0)
		return -ENOMEM;
	/* Controllers co-mounted in one hierarchy share one directory. */
	for (size_t i = 0; i < cg->n_dirs; i++) {
		if (!strcmp(cg->dirs[i], dir)) {
			cg->ctrls[i] |= ctrl;
			free(dir);
			return 0;
		}
	}
	if (cg->n_dirs >= HUTCH_CGROUP_MAX_DIRS) {
		free(dir);
		return -E2BIG;
	}
	cg->dirs[cg->n_dirs] = dir;
	cg->ctrls[cg->n_dirs++] = ctrl;
	return 0;
}

/* The freezer comes first: destroying it first thaws and kills everything,
 * so the other hierarchies are empty by the time we reach them. Those with
 * a field only when a container's resources ask (the field names it). */
static const struct {
	const char *name;
	unsigned int bit;
	bool required;
	const char *field;
} v1_ctrls[] = {
	{ "freezer", CG_CTRL_FREEZER, false, NULL },
	{ "cpu", CG_CTRL_CPU, true, NULL },
	{ "memory", CG_CTRL_MEMORY, true, NULL },
	{ "pids", CG_CTRL_PIDS, true, NULL },
	{ "cpuset", CG_CTRL_CPUSET, false, "linux.resources.cpu.cpus/mems" },
	{ "blkio", CG_CTRL_BLKIO, false, "linux.resources.blockIO" },
	{ "hugetlb", CG_CTRL_HUGETLB, false, "linux.resources.hugepageLimits" },
	{ "net_cls", CG_CTRL_NET_CLS, false, "linux.resources.network.classID" },
	{ "net_prio", CG_CTRL_NET_PRIO, false, "linux.resources.network.priorities" },
};

static int setup_v1(struct hutch_cgroup *cg, const struct cg_text *t, const char *name,
                    unsigned int extra, struct hutch_err *err)
{
	for (size_t i = 0; i < ELEMENTSOF(v1_ctrls); i++) {
		const char *c = v1_ctrls[i].name, *field = v1_ctrls[i].field;
		char dir[4096];
		int r;

		if (field && !((extra << CG_CTRL_EXTRA_SHIFT) & v1_ctrls[i].bit))
			continue;
		r = own_dir(t, c, dir, sizeof(dir), err);
		if (r == -ENOENT && field)
			return hutch_err_set(err, -EOPNOTSUPP,
			                     "%s: this host has no cgroup v1 %s hierarchy mounted "
			                     "under '" CG_ROOT
			                     "' (mount -t cgroup -o %s %s " CG_ROOT
			                     "/%s), or drop the field",
			                     field, c, c, c, c);
		if (r == -ENOENT && !v1_ctrls[i].required)
			continue;
		if (r < 0)
			return hutch_err_prefix(err, "cgroup v1");
		r = add_dir(cg, dir, name, v1_ctrls[i].bit);
		if (r < 0)
			return hutch_err_set_errno(err, r, "cgroup v1: add '%s'", dir);
	}
	return 0;
}

#define V2_CTRLS "cpu memory pids"

bool hutch_cgroup_needs_scope(void)
{
	struct hutch_err e;
	struct cg_text t;
	char own[4096];
	bool needs = false;

	char ns[2][64] = { "", "" };

	if (!hutch_cgroup_host_is_v2())
		return false;
	/* In a cgroup namespace of its own (a container's), systemd's units
	 * are outside what we can see: never ask it. */
	if (readlink("/proc/self/ns/cgroup", ns[0], sizeof(ns[0]) - 1) > 0 &&
	    readlink("/proc/1/ns/cgroup", ns[1], sizeof(ns[1]) - 1) > 0 && strcmp(ns[0], ns[1]))
		return false; /* (an ordinary user cannot read pid 1's: no namespace assumed) */
	if (cg_text_read(&t, &e) >= 0 && own_dir(&t, NULL, own, sizeof(own), &e) >= 0)
		needs = !hutch_cgroup_v2_is_placeable(own, V2_CTRLS);
	cg_text_done(&t);
	return needs;
}

static int setup_v2(struct hutch_cgroup *cg, const struct cg_text *t, const char *name,
                    struct hutch_err *err)
{
	char own[4096], parent[4096];
	int r;

	r = own_dir(t, NULL, own, sizeof(own), err);
	if (r < 0)
		return hutch_err_prefix(err, "cgroup v2");
	r = hutch_cgroup_v2_pick_parent(own, V2_CTRLS, parent, sizeof(parent), err);
	if (r < 0)
		return r;
	r = add_dir(cg, parent, name,
	            CG_CTRL_CPU | CG_CTRL_MEMORY | CG_CTRL_PIDS | CG_CTRL_FREEZER);
	if (r < 0)
		return hutch_err_set_errno(err, r, "cgroup v2: add '%s'", parent);
	return 0;
}

static int root_fs_type(long *ret, struct hutch_err *err)
{
	struct statfs sfs;

	if (statfs(CG_ROOT, &sfs) < 0)
		return hutch_err_set_errno(err, -errno, "statfs '" CG_ROOT "'");
	*ret = (long)sfs.f_type;
	return 0;
}

/* Create the cgroup directory dir (its parent must exist); returns an fd of
 * it, and hands the parent's fd to *ret_parent when asked (for rollback). */
int hutch_cgroup_make_dir(const char *dir, int *ret_parent, struct hutch_err *err)
{
	_cleanup_close_ int pfd = -EBADF;
	char parent[4096];
	const char *base = strrchr(dir, '/');
	int fd;

	if (!base || (size_t)(base - dir) >= sizeof(parent))
		return hutch_err_set(err, -EINVAL, "bad cgroup path '%s'", dir);
	memcpy(parent, dir, (size_t)(base - dir));
	parent[base - dir] = '\0';
	pfd = hutch_cgroup_open_dir(parent);
	if (pfd < 0)
		return hutch_err_set_errno(err, pfd, "open cgroup '%s'", parent);
	if (mkdirat(pfd, base + 1, 0755) < 0) {
		if (errno == EEXIST)
			return hutch_err_set(err, -EEXIST,
			                     "cgroup '%s' already exists (left over? run hutch gc)",
			                     dir);
		return hutch_err_set_errno(err, -errno, "create cgroup '%s'", dir);
	}
	fd = openat(pfd, base + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		(void)unlinkat(pfd, base + 1, AT_REMOVEDIR);
		return hutch_err_set_errno(err, r, "open cgroup '%s'", dir);
	}
	if (ret_parent)
		*ret_parent = TAKE_FD(pfd);
	return fd;
}

/* ---- public API ---- */

int hutch_cgroup_new(const char *name, struct hutch_cgroup **ret, struct hutch_err *err)
{
	return hutch_cgroup_new_at(name, NULL, ret, err);
}

int hutch_cgroup_new_at(const char *id, const char *path, struct hutch_cgroup **ret,
                        struct hutch_err *err)
{
	return hutch_cgroup_new_for(id, path, NULL, ret, err);
}

int hutch_cgroup_new_for(const char *id, const char *path, const struct hutch_resources *res,
                         struct hutch_cgroup **ret, struct hutch_err *err)
{
	struct hutch_cgroup *cg = NULL;
	char name[HUTCH_CGROUP_PATH_MAX + 16];
	struct cg_text t;
	long type = 0;
	int r;

	if (!hutch_cgroup_name_is_valid(id))
		return hutch_err_set(err, -EINVAL, "invalid cgroup name '%s'", id ? id : "");
	if (path && !hutch_cgroup_path_is_valid(path))
		return hutch_err_set(err, -EINVAL, "invalid cgroup path '%.300s'", path);
	snprintf(name, sizeof(name), "%s%s", path ? "" : CG_PREFIX,
	         path ? path + (*path == '/') : id);
	r = root_fs_type(&type, err);
	if (r < 0)
		return r;
	cg = calloc(1, sizeof(*cg));
	if (!cg)
		return hutch_err_set_errno(err, -ENOMEM, "allocate cgroup");
	r = cg_text_read(&t, err);
	if (r >= 0) {
		if (type == CGROUP2_SUPER_MAGIC) {
			cg->ops = &hutch_cgroup_v2_ops;
			r = setup_v2(cg, &t, name, err);
		} else {
			/* tmpfs with v1 hierarchies, perhaps plus a v2 tree at
			 * "unified" that we ignore: it has no controllers. */
			cg->ops = &hutch_cgroup_v1_ops;
			r = setup_v1(cg, &t, name, res ? hutch_resources_extra(res) : 0, err);
		}
	}
	cg_text_done(&t);
	if (r < 0) {
		hutch_cgroup_free(cg);
		return r;
	}
	for (const char *c = name; path && *c; c++)
		cg->depth += *c == '/';
	*ret = cg;
	return 0;
}

struct hutch_cgroup *hutch_cgroup_free(struct hutch_cgroup *cg)
{
	if (!cg)
		return NULL;
	for (size_t i = 0; i < cg->n_dirs; i++)
		free(cg->dirs[i]);
	free(cg);
	return NULL;
}

const char *hutch_cgroup_version(const struct hutch_cgroup *cg)
{
	return cg->ops->version;
}

size_t hutch_cgroup_dirs(const struct hutch_cgroup *cg, const char **ret_dirs, size_t max)
{
	size_t n = cg->n_dirs < max ? cg->n_dirs : max;

	for (size_t i = 0; i < n; i++)
		ret_dirs[i] = cg->dirs[i];
	return cg->n_dirs;
}

int hutch_cgroup_dir_for(const struct hutch_cgroup *cg, unsigned int ctrl)
{
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->ctrls[i] & ctrl)
			return (int)i;
	return -ENOENT;
}

int hutch_cgroup_create(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err)
{
	int r = hutch_cgroup_make_parents(cg, err);

	if (r >= 0)
		r = cg->ops->create(cg, lim, err);
	if (r < 0)
		hutch_cgroup_remove_made(cg);
	return r;
}

int hutch_cgroup_clone_fd(const struct hutch_cgroup *cg)
{
	if (!cg || cg->ops != &hutch_cgroup_v2_ops || cg->n_dirs != 1)
		return -EOPNOTSUPP;
	return hutch_cgroup_open_dir(cg->dirs[0]);
}

void hutch_cgroup_mark_entered(struct hutch_cgroup *cg)
{
	if (cg)
		cg->entered = true;
}

int hutch_cgroup_open_join(const struct hutch_cgroup *cg, int *fds, size_t max)
{
	size_t n = 0;

	if (!cg || cg->ops != &hutch_cgroup_v1_ops)
		return 0;
	if (cg->n_dirs > max)
		return -E2BIG;
	for (; n < cg->n_dirs; n++) {
		_cleanup_close_ int dir = hutch_cgroup_open_dir(cg->dirs[n]);
		int fd = dir < 0 ? dir : openat(dir, "tasks", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0) {
			int r = dir < 0 ? dir : -errno;
			hutch_close_many(fds, n);
			return r;
		}
		fds[n] = fd;
	}
	return (int)n;
}

int hutch_cgroup_open_cmds(const struct hutch_cgroup *cg, int *ret_tasks, int *ret_state)
{
	_cleanup_close_ int dir = -EBADF, tasks = -EBADF, state = -EBADF;
	int i = cg ? hutch_cgroup_dir_for(cg, CG_CTRL_FREEZER) : -ENOENT;

	*ret_tasks = *ret_state = -EBADF;
	if (!cg || cg->ops != &hutch_cgroup_v1_ops || i < 0)
		return -EOPNOTSUPP;
	dir = hutch_cgroup_open_dir(cg->dirs[i]);
	if (dir < 0)
		return dir;
	tasks = openat(dir, HUTCH_CGROUP_CMDS "/tasks", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	state = openat(dir, HUTCH_CGROUP_CMDS "/freezer.state", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (tasks < 0 || state < 0)
		return -errno;
	*ret_tasks = TAKE_FD(tasks);
	*ret_state = TAKE_FD(state);
	return 0;
}

int hutch_cgroup_join_self(int *fds, size_t n)
{
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		if (r >= 0 && write(fds[i], "0", 1) != 1)
			r = -errno;
	}
	hutch_close_many(fds, n);
	return r;
}

int hutch_cgroup_enter(struct hutch_cgroup *cg, pid_t pid, struct hutch_err *err)
{
	char buf[32];

	if (!cg || cg->entered)
		return 0;
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[i]);
		int r = fd < 0 ? fd : hutch_write_knob_at(fd, "cgroup.procs", buf);

		if (r < 0)
			return hutch_err_set_errno(err, r, "move pid %d into '%s'", (int)pid,
			                           cg->dirs[i]);
	}
	return 0;
}

int hutch_cgroup_update(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err)
{
	if (!cg)
		return hutch_err_set(err, -EOPNOTSUPP, "the sandbox has no cgroup (--no-limits)");
	return cg->ops->update(cg, lim, err);
}

int hutch_cgroup_oom_kills(struct hutch_cgroup *cg, uint64_t *ret)
{
	return cg->ops->oom_kills(cg, ret);
}

int hutch_cgroup_freeze(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err)
{
	if (!cg)
		return hutch_err_set(err, -EOPNOTSUPP, "the sandbox has no cgroup (--no-limits)");
	return cg->ops->freeze(cg, frozen, err);
}

int hutch_cgroup_destroy(struct hutch_cgroup *cg, struct hutch_err *err)
{
	int ret = 0;

	/* Keep going after a failure: leave as little behind as we can and
	 * report the first problem. */
	for (size_t i = 0; i < cg->n_dirs; i++) {
		struct hutch_err e;
		int r = cg->ops->remove_dir(cg->dirs[i], &e);

		if (r < 0 && ret == 0) {
			ret = r;
			*err = e;
		}
	}
	if (ret == 0)
		hutch_cgroup_remove_made(cg);
	return ret;
}

int hutch_cgroup_remove_dir(const char *dir, struct hutch_err *err)
{
	struct statfs sfs;

	if (!hutch_cgroup_dir_is_removable(dir))
		return hutch_err_set(err, -EINVAL, "refusing to remove '%s': not a hutch cgroup",
		                     dir ? dir : "");
	if (statfs(dir, &sfs) < 0) {
		if (errno == ENOENT)
			return 0;
		return hutch_err_set_errno(err, -errno, "statfs '%s'", dir);
	}
	if (sfs.f_type == CGROUP2_SUPER_MAGIC)
		return hutch_cgroup_v2_ops.remove_dir(dir, err);
	if (sfs.f_type == CGROUP_SUPER_MAGIC)
		return hutch_cgroup_v1_ops.remove_dir(dir, err);
	return hutch_err_set(err, -EINVAL, "refusing to remove '%s': not on a cgroup filesystem",
	                     dir);
}

/* ---- probe ---- */

static void probe_add(struct hutch_cgroup_probe *p, const char *msg)
{
	size_t len = strlen(p->detail);
	int room = (int)(sizeof(p->detail) - len);

	/* Truncation is fine: this is advice for a human. */
	snprintf(p->detail + len, (size_t)room, "%s%.*s", len ? "; " : "", room, msg);
}

static void probe_controllers(struct hutch_cgroup_probe *p, const struct cg_text *t)
{
	if (p->v2_unified) {
		char own[4096], buf[512] = "";
		_cleanup_close_ int fd = -EBADF;
		struct hutch_err e;

		if (own_dir(t, NULL, own, sizeof(own), &e) < 0)
			return probe_add(p, e.msg);
		fd = hutch_cgroup_open_dir(own);
		if (fd >= 0)
			(void)hutch_read_file_at(fd, "cgroup.controllers", buf, sizeof(buf));
		p->has_cpu = hutch_cgroup_list_has(buf, "cpu");
		p->has_memory = hutch_cgroup_list_has(buf, "memory");
		p->has_pids = hutch_cgroup_list_has(buf, "pids");
		/* cgroup.freeze exists in every non-root cgroup since 5.2. */
		p->has_freezer = strcmp(own, CG_ROOT) == 0 ||
		                 (fd >= 0 && faccessat(fd, "cgroup.freeze", F_OK, 0) == 0);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(v1_ctrls); i++) {
		struct cg_mount m;
		bool has = hutch_cgroup_parse_mountinfo(t->mountinfo, v1_ctrls[i].name, &m) == 0;

		if (v1_ctrls[i].bit == CG_CTRL_CPU)
			p->has_cpu = has;
		else if (v1_ctrls[i].bit == CG_CTRL_MEMORY)
			p->has_memory = has;
		else if (v1_ctrls[i].bit == CG_CTRL_PIDS)
			p->has_pids = has;
		else
			p->has_freezer = has;
	}
	{
		struct cg_mount m;
		p->hybrid = hutch_cgroup_parse_mountinfo(t->mountinfo, NULL, &m) == 0;
	}
}

/* mkdir and rmdir the directories of a throw-away sandbox "probe-<pid>". */
static void probe_create(struct hutch_cgroup_probe *p)
{
	struct hutch_cgroup *cg = NULL;
	struct hutch_err e;
	char name[32], msg[HUTCH_ERR_MSG_MAX + 32];

	snprintf(name, sizeof(name), "probe-%d", (int)getpid());
	if (hutch_cgroup_new(name, &cg, &e) < 0) {
		snprintf(msg, sizeof(msg), "cannot place a sandbox cgroup: %s", e.msg);
		return probe_add(p, msg);
	}
	p->can_create = true;
	for (size_t i = 0; i < cg->n_dirs && p->can_create; i++) {
		if (mkdir(cg->dirs[i], 0755) < 0) {
			snprintf(msg, sizeof(msg), "mkdir '%s': %s", cg->dirs[i], strerror(errno));
			probe_add(p, msg);
			p->can_create = false;
		}
	}
	for (size_t i = 0; i < cg->n_dirs; i++)
		(void)rmdir(cg->dirs[i]);
	hutch_cgroup_free(cg);
}

int hutch_cgroup_probe_here(struct hutch_cgroup_probe *ret)
{
	struct hutch_cgroup_probe p = { 0 };
	struct hutch_err e;
	struct cg_text t;
	long type = 0;
	int r;

	r = root_fs_type(&type, &e);
	if (r < 0)
		return r;
	p.v2_unified = type == CGROUP2_SUPER_MAGIC;
	r = cg_text_read(&t, &e);
	if (r < 0) {
		cg_text_done(&t);
		return r;
	}
	probe_controllers(&p, &t);
	cg_text_done(&t);
	if (!p.has_cpu)
		probe_add(&p, "no cpu controller");
	if (!p.has_memory)
		probe_add(&p, "no memory controller");
	if (!p.has_pids)
		probe_add(&p, "no pids controller");
	if (!p.has_freezer)
		probe_add(&p, "no freezer (idle sleep unavailable)");
	probe_create(&p);
	*ret = p;
	return 0;
}

/* Where a sandbox would go: under systemd without delegation, the
 * supervisor asks for a delegated scope of its own (supervisor/sandbox.c),
 * so the probe does too, in a child; probing our own cgroup there would
 * judge a place no sandbox uses, and climbing from it writes into
 * systemd's slices. */
int hutch_cgroup_probe(struct hutch_cgroup_probe *ret)
{
	char address[4200];

	if (hutch_cgroup_needs_scope() &&
	    hutch_cgroup_systemd_address(address, sizeof(address)) == 0)
		return hutch_cgroup_systemd_probe(address, ret);
	return hutch_cgroup_probe_here(ret);
}
