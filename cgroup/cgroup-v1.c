/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v1 backend: one "hutch-<name>" directory per hierarchy (cpu, or a
 * co-mounted cpu,cpuacct; memory; pids; freezer when mounted). Limits are
 * written per controller; freezing uses freezer.state, which passes through
 * FREEZING and may need the write repeated; teardown freezes, kills and
 * thaws so that a fork loop cannot outrun the kill and frozen tasks receive
 * their SIGKILL.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-res.h"
#include "cgroup-util.h"
#include "cgroup-v1.h"

/* Write one knob; on failure fill err naming the knob and the directory. */
static int knob(int fd, const char *dir, const char *name, const char *value, struct hutch_err *err)
{
	int r = hutch_write_knob_at(fd, name, value);

	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s' to '%s/%s'", value, dir, name);
	return 0;
}

static int write_cpu(int fd, const char *dir, const struct hutch_limits *lim, struct hutch_err *err)
{
	char quota[32];
	int r;

	char period[32] = "100000";

	r = hutch_cgroup_fmt_cpu_v1(lim->cpu_millis, quota, sizeof(quota));
	if (r < 0)
		return hutch_err_set(err, r, "cpu limit of %llu millis is below the minimum of 10",
		                     (unsigned long long)lim->cpu_millis);
	/* A container's quota at its own period (lowered by the caller). */
	r = hutch_cgroup_fmt_cpu_period(&lim->res, quota, period, sizeof(quota));
	if (r < 0)
		return hutch_err_set(err, r, "linux.resources.cpu.quota: below the minimum of %llu",
		                     CG_QUOTA_MIN_US);
	r = knob(fd, dir, "cpu.cfs_period_us", period, err);
	if (r < 0)
		return r;
	return knob(fd, dir, "cpu.cfs_quota_us", quota, err);
}

/* fresh: the directory was just made, its memsw still unlimited: the
 * memory limit goes first and memsw after it, one try each (writing memsw
 * first there fails EINVAL: 4 syscalls per create). Otherwise (oci update)
 * memsw goes first when it can (a raise), else after the memory limit. */
static int write_memory(int fd, const char *dir, const struct hutch_limits *lim, bool fresh,
                        struct hutch_err *err)
{
	char val[32];
	bool memsw;
	int r;

	hutch_cgroup_fmt_limit(lim->memory_bytes, false, val, sizeof(val));
	/* Best effort: keep anonymous memory out of swap where allowed. */
	(void)hutch_write_knob_at(fd, "memory.swappiness", "0");
	/* memsw (memory + swap) exists only with swap accounting; setting it
	 * equal to the memory limit means "no swap". It must never be below
	 * limit_in_bytes. */
	if (fresh) {
		r = knob(fd, dir, "memory.limit_in_bytes", val, err);
		if (r < 0)
			return r;
		r = hutch_write_knob_at(fd, "memory.memsw.limit_in_bytes", val);
		if (r == -ENOENT)
			return 0; /* no swap accounting */
		if (r < 0)
			return hutch_err_set_errno(err, r, "write '%s' to '%s/%s'", val, dir,
			                           "memory.memsw.limit_in_bytes");
		return 0;
	}
	memsw = faccessat(fd, "memory.memsw.limit_in_bytes", F_OK, 0) == 0;
	if (memsw && hutch_write_knob_at(fd, "memory.memsw.limit_in_bytes", val) == 0)
		return knob(fd, dir, "memory.limit_in_bytes", val, err);
	r = knob(fd, dir, "memory.limit_in_bytes", val, err);
	if (r < 0)
		return r;
	if (memsw)
		return knob(fd, dir, "memory.memsw.limit_in_bytes", val, err);
	return 0;
}

static int write_limits(int fd, const char *dir, unsigned int ctrls, const struct hutch_limits *lim,
                        bool fresh, struct hutch_err *err)
{
	char val[32];
	int r;

	if (ctrls & CG_CTRL_CPU) {
		r = write_cpu(fd, dir, lim, err);
		if (r < 0)
			return r;
	}
	if (ctrls & CG_CTRL_MEMORY) {
		r = write_memory(fd, dir, lim, fresh, err);
		if (r < 0)
			return r;
	}
	if (ctrls & CG_CTRL_PIDS) {
		hutch_cgroup_fmt_limit(lim->pids_max, true, val, sizeof(val));
		r = knob(fd, dir, "pids.max", val, err);
		if (r < 0)
			return r;
	}
	return hutch_cgroup_res_write_v1(fd, dir, ctrls, lim, err);
}

/* mkdir dir (must not exist) and return an fd on it. */
static int v1_create(struct hutch_cgroup *cg, const struct hutch_limits *lim, struct hutch_err *err)
{
	char probe[32];
	size_t made = 0;
	int r = 0;

	/* Validate before touching the filesystem. */
	if (hutch_cgroup_fmt_cpu_v1(lim->cpu_millis, probe, sizeof(probe)) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "cpu limit of %llu millis is below the minimum of 10",
		                     (unsigned long long)lim->cpu_millis);
	r = hutch_cgroup_res_check_v1(cg, &lim->res, err);
	if (r < 0)
		return r;
	for (; made < cg->n_dirs; made++) {
		bool cpuset = cg->ctrls[made] & (CG_CTRL_CPUSET | CG_CTRL_CPUSET_VIEW);
		_cleanup_close_ int pfd = -EBADF;
		_cleanup_close_ int fd =
		        hutch_cgroup_make_dir(cg->dirs[made], cpuset ? &pfd : NULL, err);

		if (fd < 0) {
			r = fd;
			break;
		}
		/* Its parents (a cgroupsPath's, made empty) and itself. */
		r = cpuset ? hutch_cgroup_cpuset_inherit(fd, pfd, cg->dirs[made], err) : 0;
		if (r >= 0)
			r = write_limits(fd, cg->dirs[made], cg->ctrls[made], lim, true, err);
		if (r >= 0 && (cg->ctrls[made] & CG_CTRL_FREEZER) &&
		    mkdirat(fd, HUTCH_CGROUP_CMDS, 0755) < 0 && errno != EEXIST)
			r = hutch_err_set_errno(err, -errno, "create cgroup '%s/%s'",
			                        cg->dirs[made], HUTCH_CGROUP_CMDS);
		if (r < 0) {
			made++;
			break;
		}
	}
	if (r < 0) {
		/* Nothing has entered yet: the directories are empty. */
		while (made-- > 0) {
			_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[made]);
			if (fd >= 0)
				(void)unlinkat(fd, HUTCH_CGROUP_CMDS, AT_REMOVEDIR);
			(void)rmdir(cg->dirs[made]);
		}
	}
	return r;
}

static int v1_oom_kills(struct hutch_cgroup *cg, uint64_t *ret)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[512];
	ssize_t n;
	int i = hutch_cgroup_dir_for(cg, CG_CTRL_MEMORY);

	if (i < 0)
		return i;
	fd = hutch_cgroup_open_dir(cg->dirs[i]);
	if (fd < 0)
		return fd;
	n = hutch_read_file_at(fd, "memory.oom_control", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	/* "oom_kill" appeared in 4.13; older kernels cannot count. */
	return hutch_cgroup_parse_keyed(buf, "oom_kill", ret);
}

static void v1_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret)
{
	int cpu = hutch_cgroup_dir_for(cg, CG_CTRL_CPU);
	int mem = hutch_cgroup_dir_for(cg, CG_CTRL_MEMORY);
	int pids = hutch_cgroup_dir_for(cg, CG_CTRL_PIDS);

	if (cpu >= 0) {
		/* cpuacct, where it is co-mounted with cpu (nanoseconds). */
		uint64_t ns = hutch_cgroup_read_u64(cg->dirs[cpu], "cpuacct.usage");
		ret->cpu_usec = ns == UINT64_MAX ? ns : ns / 1000;
	}
	if (mem >= 0) {
		ret->mem_current = hutch_cgroup_read_u64(cg->dirs[mem], "memory.usage_in_bytes");
		ret->mem_peak = hutch_cgroup_read_u64(cg->dirs[mem], "memory.max_usage_in_bytes");
	}
	if (pids >= 0)
		ret->pids = hutch_cgroup_read_u64(cg->dirs[pids], "pids.current");
}

static bool state_is(int fd, const char *want)
{
	char buf[64];

	if (hutch_read_file_at(fd, "freezer.state", buf, sizeof(buf)) < 0)
		return false;
	buf[strcspn(buf, "\n")] = '\0';
	return strcmp(buf, want) == 0;
}

/*
 * Set freezer.state and wait (bounded) until it reads back. Freezing can
 * stall in FREEZING while a task sits in an uninterruptible sleep; writing
 * FROZEN again makes the kernel retry.
 */
static int set_state(int fd, const char *state, unsigned int timeout_ms)
{
	int64_t deadline = hutch_now_mono_ms() + timeout_ms;
	unsigned int nap = 1;
	int r;

	for (;;) {
		r = hutch_write_knob_at(fd, "freezer.state", state);
		if (r < 0)
			return r;
		if (state_is(fd, state))
			return 0;
		if (hutch_now_mono_ms() >= deadline)
			return -ETIMEDOUT;
		hutch_cgroup_sleep_ms(nap);
		nap = nap < 32 ? nap * 2 : 50;
	}
}

static int v1_freeze(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	int i = hutch_cgroup_dir_for(cg, CG_CTRL_FREEZER);
	int r;

	if (i < 0)
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "cgroup v1 freezer is not mounted, cannot %s the sandbox",
		                     frozen ? "freeze" : "thaw");
	/* The commands' child cgroup, never init (hutch_cgroup_open_cmds()). */
	fd = hutch_cgroup_open_dir(cg->dirs[i]);
	if (fd >= 0) {
		int sub = openat(fd, HUTCH_CGROUP_CMDS,
		                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = sub < 0 ? -errno : sub;
	}
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "open cgroup '%s/%s'", cg->dirs[i],
		                           HUTCH_CGROUP_CMDS);
	r = set_state(fd, frozen ? "FROZEN" : "THAWED", CG_WAIT_MS);
	if (r == -ETIMEDOUT && frozen) {
		/* Leave it running rather than half frozen. */
		(void)set_state(fd, "THAWED", CG_WAIT_MS);
		return hutch_err_set(err, r,
		                     "cgroup '%s' did not freeze within %d ms, thawed again",
		                     cg->dirs[i], CG_WAIT_MS);
	}
	if (r < 0)
		return hutch_err_set_errno(err, r, "set '%s/freezer.state' to %s", cg->dirs[i],
		                           frozen ? "FROZEN" : "THAWED");
	return 0;
}

/* Kill what is in fd and its child cgroups, then thaw them so a frozen
 * task gets to act on its SIGKILL. Returns the number of tasks seen. */
static int kill_tree(int fd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int seen;

	seen = hutch_cgroup_kill_procs(fd);
	if (seen < 0)
		seen = 0;
	d = hutch_cgroup_opendir(fd);
	while (d && (de = readdir(d))) {
		_cleanup_close_ int sub = -EBADF;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			seen += kill_tree(sub);
	}
	if (faccessat(fd, "freezer.state", F_OK, 0) == 0)
		(void)hutch_write_knob_at(fd, "freezer.state", "THAWED");
	return seen;
}

/* rmdir name's freezer child (hutch makes one: the commands', empty once
 * init is reaped) by a path beneath the parent, then name itself: the
 * child's own fd is not needed for that (cgroupfs has no symlinks). */
static bool v1_remove_with_cmds(int pfd, const char *name)
{
	char sub[CG_NAME_MAX + sizeof("/" HUTCH_CGROUP_CMDS)];
	int n = snprintf(sub, sizeof(sub), "%s/%s", name, HUTCH_CGROUP_CMDS);

	if (n < 0 || (size_t)n >= sizeof(sub) || unlinkat(pfd, sub, AT_REMOVEDIR) < 0)
		return false;
	return unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

static int v1_remove_dir(const char *dir, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF, pfd = -EBADF;
	int64_t deadline = hutch_now_mono_ms() + CG_WAIT_MS;
	const char *name;
	int r;
	unsigned int nap = 1;

	/* Fast path, from the parent alone: a sandbox whose init has been
	 * reaped leaves the cgroup empty (its pid namespace died with it), and
	 * rmdir just works once its empty children (the freezer's cmds) are
	 * gone: rmdir refuses a cgroup with tasks, so nothing alive is
	 * skipped. The cgroup's own fd only when that is refused: 2 syscalls
	 * fewer a hierarchy, 14 on the path to a run's end and the DELETE's
	 * answer (issue 31). Without the children first it was EBUSY every
	 * time, and the freeze-kill-thaw below ran on an empty tree: most of
	 * a container's teardown. Most hierarchies have no child: rmdir
	 * first, the walk (seven syscalls per directory) only when it is
	 * refused. */
	r = hutch_cgroup_open_parent(dir, &pfd, &name, err);
	if (r != 0)
		return r > 0 ? 0 : r;
	if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno == EBUSY && v1_remove_with_cmds(pfd, name))
		return 0;
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
		                       : hutch_err_set_errno(err, -errno, "open cgroup '%s'", dir);
	(void)hutch_cgroup_rmdir_children(fd);
	if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	/* Freeze first so nothing forks between reading the list and the
	 * kill; kill_tree() thaws afterwards. Best effort: a stuck FREEZING
	 * only costs us the race protection. */
	if (faccessat(fd, "freezer.state", F_OK, 0) == 0)
		(void)set_state(fd, "FROZEN", 200);
	for (;;) {
		(void)kill_tree(fd);
		r = hutch_cgroup_try_remove(fd, pfd, name, dir, deadline, err);
		if (r != 0)
			return r > 0 ? 0 : r;
		hutch_cgroup_sleep_ms(nap);
		nap = nap < 32 ? nap * 2 : 50;
	}
}

static int v1_update(struct hutch_cgroup *cg, const struct hutch_limits *lim, struct hutch_err *err)
{
	int r0 = hutch_cgroup_res_check_v1(cg, &lim->res, err);

	if (r0 < 0)
		return r0;
	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[i]);
		int r;

		if (fd < 0)
			return hutch_err_set_errno(err, fd, "open cgroup '%s'", cg->dirs[i]);
		r = write_limits(fd, cg->dirs[i], cg->ctrls[i], lim, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

const struct cgroup_ops hutch_cgroup_v1_ops = {
	.version = "v1",
	.create = v1_create,
	.update = v1_update,
	.oom_kills = v1_oom_kills,
	.usage = v1_usage,
	.freeze = v1_freeze,
	.remove_dir = v1_remove_dir,
};
