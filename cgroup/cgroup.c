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

#include "cgroup-place.h"
#include "cgroup-util.h"
#include "cgroup-v1.h"
#include "cgroup-v2.h"
#include "cgroup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* ---- locating the caller's cgroups ---- */

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

static int setup_v1(struct hutch_cgroup *cg, const struct cg_text *t, const char *name,
                    unsigned int extra, struct hutch_err *err)
{
	for (size_t i = 0; i < hutch_cgroup_n_v1_ctrls; i++) {
		const char *c = hutch_cgroup_v1_ctrls[i].name,
		           *field = hutch_cgroup_v1_ctrls[i].field[0]
		                            ? hutch_cgroup_v1_ctrls[i].field
		                            : NULL;
		char dir[4096];
		int r;

		unsigned int bit = hutch_cgroup_v1_ctrls[i].bit;

		/* cpuset, blkio not asked for: joined for the views if there. */
		if (bit == CG_CTRL_BLKIO && !((extra << CG_CTRL_EXTRA_SHIFT) & bit))
			field = NULL, bit = CG_CTRL_BLKIO_VIEW;
		else if (bit == CG_CTRL_CPUSET && !((extra << CG_CTRL_EXTRA_SHIFT) & bit))
			field = NULL, bit = CG_CTRL_CPUSET_VIEW;
		else if (field && !((extra << CG_CTRL_EXTRA_SHIFT) & bit))
			continue;
		r = hutch_cgroup_own_dir(t, c, dir, sizeof(dir), err);
		if (r == -ENOENT && field)
			return hutch_err_set(err, -EOPNOTSUPP,
			                     "%s: this host has no cgroup v1 %s hierarchy mounted "
			                     "under '" CG_ROOT
			                     "' (mount -t cgroup -o %s %s " CG_ROOT
			                     "/%s), or drop the field",
			                     field, c, c, c, c);
		if (r == -ENOENT && !hutch_cgroup_v1_ctrls[i].required)
			continue;
		if (r < 0)
			return hutch_err_prefix(err, "cgroup v1");
		r = add_dir(cg, dir, name, bit);
		if (r < 0)
			return hutch_err_set_errno(err, r, "cgroup v1: add '%s'", dir);
	}
	return 0;
}

#define V2_CTRLS "cpu memory pids"

/* What hutch_cgroup_needs_scope() read of /proc/self/cgroup and mountinfo
 * when its answer was no: the sandbox's cgroup is placed from where the
 * caller is, and hutch_cgroup_new_for(), which a create calls right after
 * (supervisor/sandbox.c), takes it instead of reading both again (the
 * kernel's formatting of mountinfo was the CLI's dearest read). Taken
 * once; an answer of yes (a scope will move us) keeps nothing. */
static struct cg_text kept_text;

static void kept_text_drop(void)
{
	hutch_cgroup_text_done(&kept_text);
	kept_text = (struct cg_text){ 0 };
}

static int text_take(struct cg_text *t, struct hutch_err *err)
{
	if (!kept_text.proc)
		return hutch_cgroup_text_read(t, err);
	*t = kept_text;
	kept_text = (struct cg_text){ 0 };
	return 0;
}

bool hutch_cgroup_needs_scope(void)
{
	struct hutch_err e;
	struct cg_text t;
	char own[4096];
	bool needs = false;

	char ns[2][64] = { "", "" };

	kept_text_drop();
	if (!hutch_cgroup_host_is_v2())
		return false;
	/* In a cgroup namespace of its own (a container's), systemd's units
	 * are outside what we can see: never ask it. */
	if (readlink("/proc/self/ns/cgroup", ns[0], sizeof(ns[0]) - 1) > 0 &&
	    readlink("/proc/1/ns/cgroup", ns[1], sizeof(ns[1]) - 1) > 0 && strcmp(ns[0], ns[1]))
		return false; /* (an ordinary user cannot read pid 1's: no namespace assumed) */
	if (hutch_cgroup_text_read(&t, &e) >= 0 &&
	    hutch_cgroup_own_dir(&t, NULL, own, sizeof(own), &e) >= 0)
		needs = !hutch_cgroup_v2_is_placeable(own, V2_CTRLS);
	if (!needs && t.proc && t.mountinfo)
		kept_text = t;
	else
		hutch_cgroup_text_done(&t);
	return needs;
}

static int setup_v2(struct hutch_cgroup *cg, const struct cg_text *t, const char *name,
                    struct hutch_err *err)
{
	char own[4096], parent[4096];
	int r;

	r = hutch_cgroup_own_dir(t, NULL, own, sizeof(own), err);
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

/* ---- public API ---- */

bool hutch_cgroup_path_is_valid(const char *path)
{
	size_t depth = 0;

	if (!path || strlen(path) > HUTCH_CGROUP_PATH_MAX)
		return false;
	if (*path == '/')
		path++;
	do {
		size_t n = strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                        "0123456789_.-");

		if (n == 0 || path[0] == '.' || (path[n] && path[n] != '/') ||
		    ++depth > HUTCH_CGROUP_PATH_DEPTH)
			return false;
		path += n;
	} while (*path++ == '/');
	return true;
}

bool hutch_cgroup_host_is_v2(void)
{
	struct hutch_err e;
	long type = 0;

	return hutch_cgroup_root_fs_type(&type, &e) == 0 && type == CGROUP2_SUPER_MAGIC;
}

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
	r = hutch_cgroup_root_fs_type(&type, err);
	if (r < 0)
		return r;
	cg = calloc(1, sizeof(*cg));
	if (!cg)
		return hutch_err_set_errno(err, -ENOMEM, "allocate cgroup");
	r = text_take(&t, err);
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
	hutch_cgroup_text_done(&t);
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

int hutch_cgroup_create(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err)
{
	int r;

	hutch_cgroup_root_hold();
	r = hutch_cgroup_make_parents(cg, err);
	if (r >= 0)
		r = cg->ops->create(cg, lim, err);
	if (r < 0)
		hutch_cgroup_remove_made(cg);
	hutch_cgroup_root_release();
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

bool hutch_cgroup_has_cmds(const struct hutch_cgroup *cg)
{
	return cg && cg->ops == &hutch_cgroup_v1_ops &&
	       hutch_cgroup_dir_for(cg, CG_CTRL_FREEZER) >= 0;
}

int hutch_cgroup_open_cmds(const struct hutch_cgroup *cg, int *ret_tasks, int *ret_state)
{
	_cleanup_close_ int dir = -EBADF, tasks = -EBADF, state = -EBADF;
	int i;

	*ret_tasks = *ret_state = -EBADF;
	if (!hutch_cgroup_has_cmds(cg))
		return -EOPNOTSUPP;
	i = hutch_cgroup_dir_for(cg, CG_CTRL_FREEZER);
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

	hutch_cgroup_root_hold();
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
	hutch_cgroup_root_release();
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

/* A run's join file: v1's "tasks" (a thread moving itself skips the
 * threadgroup lock: hutch_cgroup_open_join()), else v2's cgroup.procs. */
static int open_procs(const char *dir)
{
	_cleanup_close_ int d = hutch_cgroup_open_dir(dir);
	int fd;

	if (d < 0)
		return d;
	fd = openat(d, "tasks", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = openat(d, "cgroup.procs", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int hutch_cgroup_run_new(const struct hutch_cgroup *cg, char *ret_dir, size_t size,
                         struct hutch_err *err)
{
	const char *dir = cg->n_dirs ? cg->dirs[0] : NULL;
	int fd, r;

	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->ctrls[i] & CG_CTRL_FREEZER) {
			dir = cg->dirs[i];
			break;
		}
	if (!dir)
		return hutch_err_set(err, -ENOENT, "a run's cgroup: the sandbox has no cgroup");
	if ((size_t)snprintf(ret_dir, size, "%s" HUTCH_CGROUP_RUN_SUFFIX, dir) >= size)
		return hutch_err_set(err, -ENAMETOOLONG, "a run's cgroup: '%s' too long", dir);
	if ((r = hutch_cgroup_remove_dir(ret_dir, err)) < 0)
		return r;
	if (mkdir(ret_dir, 0700) < 0)
		return hutch_err_set_errno(err, -errno, "make the run's cgroup '%s'", ret_dir);
	fd = open_procs(ret_dir);
	if (fd < 0) {
		(void)rmdir(ret_dir);
		return hutch_err_set_errno(err, fd, "open '%s/cgroup.procs'", ret_dir);
	}
	return fd;
}

int hutch_cgroup_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret)
{
	*ret = (struct hutch_cgroup_usage){ UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
		                            UINT64_MAX };
	cg->ops->usage(cg, ret);
	if (cg->ops->oom_kills(cg, &ret->oom_kills) < 0)
		ret->oom_kills = UINT64_MAX;
	return 0;
}
