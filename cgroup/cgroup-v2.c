/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v2 backend: one "hutch-<name>" directory in the unified tree, its
 * parent chosen in hutch_cgroup_new() so that cpu, memory and pids are
 * delegated to it. Waits use the kernel's notifications: cgroup.events
 * ("populated", "frozen") raises POLLPRI when it changes
 * (Documentation/admin-guide/cgroup-v2.rst). cgroup.kill (5.14) kills a
 * whole subtree atomically; older kernels fall back to freeze + kill loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-res.h"
#include "cgroup-util.h"
#include "cgroup-v2.h"

static int knob(int fd, const char *dir, const char *name, const char *value, struct hutch_err *err)
{
	int r = hutch_write_knob_at(fd, name, value);

	/* No such knob: its controller is not enabled for the parent, so the
	 * sandbox would have no such limit. Never hand that out. */
	if (r == -ENOENT)
		return hutch_err_set(
		        err, -EOPNOTSUPP,
		        "cgroup v2: no %.*s controller for '%s', so no %s limit (systemd "
		        "turns controllers off outside delegated units): run hutch in a "
		        "unit with Delegate=yes (systemd-run --scope -p Delegate=yes)",
		        (int)strcspn(name, "."), name, dir, name);
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s' to '%s/%s'", value, dir, name);
	return 0;
}

/* Like knob() but a knob the kernel does not have (ENOENT) is fine. */
static int knob_opt(int fd, const char *dir, const char *name, const char *value,
                    struct hutch_err *err)
{
	if (faccessat(fd, name, F_OK, 0) < 0 && errno == ENOENT)
		return 0;
	return knob(fd, dir, name, value, err);
}

static int write_limits(int fd, const char *dir, const struct hutch_limits *lim,
                        struct hutch_err *err)
{
	char cpu[64], mem[32], pids[32];
	int r;

	r = hutch_cgroup_fmt_cpu_v2(lim->cpu_millis, cpu, sizeof(cpu));
	if (r < 0)
		return hutch_err_set(err, r, "cpu limit of %llu millis is below the minimum of 10",
		                     (unsigned long long)lim->cpu_millis);
	if (lim->res.cpu_period) { /* a container's quota at its own period */
		char q[32], p[32];

		r = hutch_cgroup_fmt_cpu_period(&lim->res, q, p, sizeof(q));
		if (r < 0)
			return hutch_err_set(err, r,
			                     "linux.resources.cpu.quota: below the minimum of %llu",
			                     CG_QUOTA_MIN_US);
		snprintf(cpu, sizeof(cpu), "%s %s", q, p);
	}
	hutch_cgroup_fmt_limit(lim->memory_bytes, true, mem, sizeof(mem));
	hutch_cgroup_fmt_limit(lim->pids_max, true, pids, sizeof(pids));
	if ((r = knob(fd, dir, "cpu.max", cpu, err)) < 0 ||
	    (r = knob(fd, dir, "memory.max", mem, err)) < 0 ||
	    /* No swap: memory.swap.max exists only with swap accounting. */
	    (r = knob_opt(fd, dir, "memory.swap.max", "0", err)) < 0 ||
	    (r = knob(fd, dir, "pids.max", pids, err)) < 0 ||
	    /* One OOM kill takes one process, not the whole sandbox (init
	     * survives and reports it); 0 is the default, say it anyway. */
	    (r = knob_opt(fd, dir, "memory.oom.group", "0", err)) < 0)
		return r;
	return hutch_cgroup_res_write_v2(fd, dir, lim, err);
}

static int v2_create(struct hutch_cgroup *cg, const struct hutch_limits *lim, struct hutch_err *err)
{
	_cleanup_close_ int pfd = -EBADF, fd = -EBADF;
	const char *dir = cg->dirs[0];
	const char *base = strrchr(dir, '/');
	char probe[64];
	int r;

	if (hutch_cgroup_fmt_cpu_v2(lim->cpu_millis, probe, sizeof(probe)) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "cpu limit of %llu millis is below the minimum of 10",
		                     (unsigned long long)lim->cpu_millis);
	fd = hutch_cgroup_make_dir(dir, &pfd, err);
	if (fd < 0)
		return fd;
	r = write_limits(fd, dir, lim, err);
	if (r < 0)
		(void)unlinkat(pfd, base + 1, AT_REMOVEDIR);
	return r;
}

static int v2_oom_kills(struct hutch_cgroup *cg, uint64_t *ret)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[0]);
	char buf[512];
	ssize_t n;

	if (fd < 0)
		return fd;
	/* Hierarchical: counts kills in nested cgroups too. */
	n = hutch_read_file_at(fd, "memory.events", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return hutch_cgroup_parse_keyed(buf, "oom_kill", ret);
}

static void v2_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[0]);
	char buf[1024];

	if (fd >= 0 && hutch_read_file_at(fd, "cpu.stat", buf, sizeof(buf)) >= 0 &&
	    hutch_cgroup_parse_keyed(buf, "usage_usec", &ret->cpu_usec) < 0)
		ret->cpu_usec = UINT64_MAX;
	ret->mem_current = hutch_cgroup_read_u64(cg->dirs[0], "memory.current");
	ret->mem_peak = hutch_cgroup_read_u64(cg->dirs[0], "memory.peak"); /* 5.19+ */
	ret->pids = hutch_cgroup_read_u64(cg->dirs[0], "pids.current");
}

/*
 * Wait until cgroup.events of dirfd says "key want", at most timeout_ms.
 * The file is re-read from offset 0 after each POLLPRI; the poll timeout is
 * capped so a missed notification costs 100 ms, not the whole wait.
 */
static int wait_event(int dirfd, const char *key, uint64_t want, unsigned int timeout_ms)
{
	_cleanup_close_ int fd = -EBADF;
	int64_t deadline = hutch_now_mono_ms() + timeout_ms;

	fd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLPRI };
		char buf[256];
		uint64_t v;
		int64_t left;
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		int r;

		if (n < 0)
			return -errno;
		buf[n] = '\0';
		r = hutch_cgroup_parse_keyed(buf, key, &v);
		if (r < 0)
			return r;
		if (v == want)
			return 0;
		left = deadline - hutch_now_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left < 100 ? (int)left : 100) < 0 && errno != EINTR)
			return -errno;
	}
}

static int v2_freeze(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[0]);
	int r;

	if (fd < 0)
		return hutch_err_set_errno(err, fd, "open cgroup '%s'", cg->dirs[0]);
	r = hutch_write_knob_at(fd, "cgroup.freeze", frozen ? "1" : "0");
	if (r == -ENOENT)
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "no cgroup.freeze in '%s' (kernel older than 5.2)",
		                     cg->dirs[0]);
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s/cgroup.freeze'", cg->dirs[0]);
	r = wait_event(fd, "frozen", frozen ? 1 : 0, CG_WAIT_MS);
	if (r == -ETIMEDOUT && frozen) {
		/* Leave it running rather than half frozen. */
		(void)hutch_write_knob_at(fd, "cgroup.freeze", "0");
		return hutch_err_set(err, r,
		                     "cgroup '%s' did not freeze within %d ms, thawed again",
		                     cg->dirs[0], CG_WAIT_MS);
	}
	if (r < 0)
		return hutch_err_set_errno(err, r, "wait for '%s' to %s", cg->dirs[0],
		                           frozen ? "freeze" : "thaw");
	return 0;
}

/* Pre-5.14 kernels: kill by pid in dirfd and below. The tree is frozen by
 * the caller, so nothing forks meanwhile; the kills land after the thaw. */
static void kill_tree(int fd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;

	(void)hutch_cgroup_kill_procs(fd);
	d = hutch_cgroup_opendir(fd);
	while (d && (de = readdir(d))) {
		_cleanup_close_ int sub = -EBADF;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			kill_tree(sub);
	}
}

static int kill_all(int fd, bool *has_kill)
{
	int r = hutch_write_knob_at(fd, "cgroup.kill", "1");

	*has_kill = r != -ENOENT;
	if (*has_kill)
		return r;
	(void)hutch_write_knob_at(fd, "cgroup.freeze", "1");
	(void)wait_event(fd, "frozen", 1, 200);
	kill_tree(fd);
	(void)hutch_write_knob_at(fd, "cgroup.freeze", "0");
	return 0;
}

static int v2_remove_dir(const char *dir, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF, pfd = -EBADF;
	int64_t deadline = hutch_now_mono_ms() + CG_WAIT_MS;
	const char *name;
	unsigned int nap = 1;
	bool has_kill = true;
	int r;

	/* Fast path, from the parent alone (as v1_remove_dir()): a sandbox
	 * whose init has been reaped leaves its cgroup empty (its pid
	 * namespace died with it) and without children, and rmdir refuses a
	 * populated cgroup or one with children (EBUSY), so nothing alive is
	 * skipped. The cgroup's own fd, cgroup.kill and the wait for
	 * "populated 0" only when it is refused (issue 31). */
	r = hutch_cgroup_open_parent(dir, &pfd, &name, err);
	if (r != 0)
		return r > 0 ? 0 : r;
	if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno != EBUSY)
		return hutch_err_set_errno(err, -errno, "remove cgroup '%s'", dir);
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
		                       : hutch_err_set_errno(err, -errno, "open cgroup '%s'", dir);
	r = kill_all(fd, &has_kill);
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s/cgroup.kill'", dir);
	for (;;) {
		int64_t left = deadline - hutch_now_mono_ms();

		/* Without cgroup.kill, wake up often to kill newcomers. */
		if (!has_kill && left > 100)
			left = 100;
		(void)wait_event(fd, "populated", 0, left > 0 ? (unsigned int)left : 0);
		r = hutch_cgroup_try_remove(fd, pfd, name, dir, deadline, err);
		if (r != 0)
			return r > 0 ? 0 : r;
		/* Something survived or appeared: kill again. */
		(void)kill_all(fd, &has_kill);
		hutch_cgroup_sleep_ms(nap);
		nap = nap < 32 ? nap * 2 : 50;
	}
}

static int v2_update(struct hutch_cgroup *cg, const struct hutch_limits *lim, struct hutch_err *err)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(cg->dirs[0]);

	if (fd < 0)
		return hutch_err_set_errno(err, fd, "open cgroup '%s'", cg->dirs[0]);
	return write_limits(fd, cg->dirs[0], lim, err);
}

const struct cgroup_ops hutch_cgroup_v2_ops = {
	.version = "v2",
	.create = v2_create,
	.update = v2_update,
	.oom_kills = v2_oom_kills,
	.usage = v2_usage,
	.freeze = v2_freeze,
	.remove_dir = v2_remove_dir,
};
