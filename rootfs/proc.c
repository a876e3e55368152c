/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's /proc: a new procfs instance for the sandbox's pid
 * namespace, with the kernel's sensitive files masked the way crun and
 * Docker do it: files get /dev/null bound over them, directories an empty
 * read-only tmpfs, and the knobs that stay readable become read-only binds
 * of themselves. There is no /sys at all.
 *
 * The kernel lets a user namespace mount procfs only while a fully visible
 * procfs exists in its mount namespace (mount_too_revealing()), so this
 * runs before the host root, with its /proc, is detached.
 *
 * The instance's sizes (issue 27): lxcfs's files (runtime/lxcfs.h) are
 * bound over meminfo, cpuinfo, stat, uptime, loadavg, swaps and diskstats
 * when the supervisor passed its tree. That tree is a detached clone of
 * the runtime dir's views (binds of lxcfs's files, made once per lxcfs:
 * reaching them asks lxcfs nothing, so no bind here waits for it), a
 * mount of the host's namespace: it can be moved into ours (as the image
 * layers are) but not cloned from where it is, so it is attached in the
 * old root first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounded.h"
#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"
#include "syscalls.h"
#include "util.h"

/* Paths relative to /proc; missing ones are skipped (they depend on the kernel config). */
const struct rootfs_proc_entry rootfs_proc_entries[] = {
	{ "acpi", ROOTFS_PROC_MASK_DIR },         { "kcore", ROOTFS_PROC_MASK_FILE },
	{ "keys", ROOTFS_PROC_MASK_FILE },        { "latency_stats", ROOTFS_PROC_MASK_FILE },
	{ "timer_list", ROOTFS_PROC_MASK_FILE },  { "timer_stats", ROOTFS_PROC_MASK_FILE },
	{ "sched_debug", ROOTFS_PROC_MASK_FILE }, { "scsi", ROOTFS_PROC_MASK_DIR },
	{ "asound", ROOTFS_PROC_READONLY },       { "bus", ROOTFS_PROC_READONLY },
	{ "fs", ROOTFS_PROC_READONLY },           { "irq", ROOTFS_PROC_READONLY },
	{ "sys", ROOTFS_PROC_READONLY },          { "sysrq-trigger", ROOTFS_PROC_READONLY },
};
const size_t rootfs_proc_entries_len = ELEMENTSOF(rootfs_proc_entries);

#define PROC_ATTRS (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

/* A detached mount to put over /proc/<e->name>. */
static int mask_source(struct rootfs_ctx *ctx, const struct rootfs_proc_entry *e, int target,
                       const char *where, struct hutch_err *err)
{
	switch (e->action) {
	case ROOTFS_PROC_MASK_FILE:
		/*
		 * The host's /dev/null, read-only; nodev would turn reads
		 * into EACCES instead of the empty file callers expect.
		 */
		return rootfs_clone_new(ctx->host_root, "dev/null",
		                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
		                        where, err);
	case ROOTFS_PROC_MASK_DIR:
		break; /* mask_one() calls rootfs_mask_dir() */
	case ROOTFS_PROC_READONLY:
		break; /* mask_one() calls readonly_one() */
	}
	return hutch_err_set(err, -EINVAL, "unknown /proc action for '%s'", where);
}

/*
 * A read-only bind of /proc/<name> over itself, by name on init's own
 * fresh procfs, whose entries are never symlinks and never followed
 * (AT_SYMLINK_NOFOLLOW, no MOVE_MOUNT_T_SYMLINKS): the clone is the
 * lookup, so an absent entry still costs one syscall and a present one
 * no open of the target.
 */
static int readonly_one(int proc, const char *name, const char *where, struct hutch_err *err)
{
	_cleanup_close_ int src = -EBADF;

	src = rootfs_clone_new(proc, name, MOUNT_ATTR_RDONLY | PROC_ATTRS, where, err);
	if (src == -ENOENT) {
		hutch_err_clear(err);
		return 0;
	}
	if (src < 0)
		return src;
	if (sys_move_mount(src, "", proc, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return hutch_err_set_errno(err, -errno, "mount bind on '%s'", where);
	return 0;
}

static int mask_one(struct rootfs_ctx *ctx, int proc, const struct rootfs_proc_entry *e,
                    struct hutch_err *err)
{
	_cleanup_close_ int target = -EBADF, src = -EBADF;
	char where[64];

	snprintf(where, sizeof(where), "/proc/%.*s", (int)sizeof(e->name), e->name);
	if (e->action == ROOTFS_PROC_READONLY)
		return readonly_one(proc, e->name, where, err);
	/* Open the target first: most absent entries then cost one syscall. */
	target = rootfs_open_target(proc, e->name, true, where, err);
	if (target == -ENOENT)
		return 0;
	if (target < 0)
		return target;
	if (e->action == ROOTFS_PROC_MASK_DIR)
		return rootfs_mask_dir(ctx, target, where, err);
	src = mask_source(ctx, e, target, where, err);
	if (src < 0)
		return src;
	return rootfs_attach_fd(src, target, "mask", where, err);
}

/* The files lxcfs serves, as /proc names them. */
static const char *const view_files[] = { "meminfo", "cpuinfo", "stat",      "uptime",
	                                  "loadavg", "swaps",   "diskstats", NULL };
/* Where lxcfs's tree is attached for the length of the binds: a directory
 * of the host's tree below our new root, detached with the old root after
 * pivot_root. Its own umount2() would have cost an RCU grace period (2-8 ms
 * measured on this 2-CPU VM, against 0.1 ms for all the binds). */
static const char *const view_mount_points[] = { "tmp", "mnt", "dev", NULL };

/*
 * /sys/devices/system/cpu/online, lxcfs's: glibc counts online CPUs
 * (sysconf(_SC_NPROCESSORS_ONLN), Python's os.cpu_count(), get_nprocs())
 * from it first, then from /proc/stat, whose lxcfs view is the host's on
 * cgroup v2 (lxcfs 5.0 computes it from cpuacct, which v2 has not:
 * lxc/lxcfs#593). Made on the root's /sys (no sysfs behind it); skipped
 * when this lxcfs serves no /sys.
 */
static int bind_cpu_online(struct rootfs_ctx *ctx, const char *dir, struct hutch_err *err)
{
	static const char *const dirs[] = { "sys", "sys/devices", "sys/devices/system",
		                            "sys/devices/system/cpu", NULL };
	static const char *const where = "/sys/devices/system/cpu/online";
	_cleanup_close_ int src = -EBADF;
	char from[64];
	int r;

	snprintf(from, sizeof(from), "%s%s", dir, where);
	/* Its flags are the tree's (setup_views()). */
	src = rootfs_clone_new(ctx->host_root, from, 0, where, err);
	if (src == -ENOENT) {
		hutch_err_clear(err);
		return 0;
	}
	if (src < 0)
		return src;
	for (const char *const *d = dirs; *d; d++)
		if ((r = rootfs_mkdir(ctx->root, *d, 0555, where, err)) < 0)
			return r;
	r = rootfs_mkfile(ctx->root, where + 1, where, err);
	/* A file init has just made in its own root tmpfs: attached by name. */
	if (r >= 0 && sys_move_mount(src, "", ctx->root, where + 1, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = hutch_err_set_errno(err, -errno, "mount lxcfs view on '%s'", where);
	return r;
}

/* View i (rootfs.h) by its path relative to lxcfs's root, which is its
 * path relative to the sandbox's root as well: view_files' order. */
static const char *const view_paths[HUTCH_ROOTFS_VIEWS] = {
	"proc/meminfo", "proc/cpuinfo", "proc/stat",      "proc/uptime",
	"proc/loadavg", "proc/swaps",   "proc/diskstats", "sys/devices/system/cpu/online",
};

const char *hutch_rootfs_view_path(size_t i)
{
	return i < HUTCH_ROOTFS_VIEWS ? view_paths[i] : NULL;
}

/* The probe, in a child that runs beside the supervisor, sharing its
 * memory and errno (base/bounded.h): one raw statx() of a constant path,
 * AT_STATX_FORCE_SYNC: a request lxcfs must answer whatever the kernel
 * has cached (its failure ignored, as init's binds need no answer); the
 * fd is the argument's value, no memory of the caller's. */
HUTCH_BOUNDED_FN static int probe_views(void *arg)
{
	int procview_fd = (int)(intptr_t)arg;
	struct statx stx;

	(void)sys_raw(__NR_statx, procview_fd, view_paths[0],
	              AT_STATX_FORCE_SYNC | AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx);
	return 0;
}

void hutch_rootfs_views_probe_start(struct hutch_bounded *b, int procview_fd, int timeout_ms)
{
	*b = (struct hutch_bounded)HUTCH_BOUNDED_INIT;
	if (procview_fd >= 0)
		hutch_bounded_start(b, probe_views, (void *)(intptr_t)procview_fd, timeout_ms);
}

int hutch_rootfs_views_probe_wait(struct hutch_bounded *b)
{
	/* A child that did not answer was killed (base/bounded.h). */
	return hutch_bounded_wait(b) < 0 ? -ETIMEDOUT : 0;
}

static void view_path(size_t i, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", view_paths[i]);
}

int hutch_rootfs_views_clone(int lxcfs_root, int ret_fds[HUTCH_ROOTFS_VIEWS], struct hutch_err *err)
{
	/* As setup_views() makes them: read-only, private. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | PROC_ATTRS,
		                   .propagation = MS_PRIVATE };
	int fds[HUTCH_ROOTFS_VIEWS], n = 0;
	char from[64];

	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++) {
		view_path(i, from, sizeof(from));
		/* A mount of the caller's namespace: cloned where it is. */
		fds[i] = sys_open_tree(lxcfs_root, from,
		                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
		if (fds[i] < 0 && errno == ENOENT)
			continue; /* not served by this lxcfs */
		if (fds[i] < 0 ||
		    sys_mount_setattr(fds[i], "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			int r = hutch_err_set_errno(err, -errno, "clone lxcfs view '%s'", from);

			hutch_close_many(fds, i + 1);
			return r;
		}
		n++;
	}
	memcpy(ret_fds, fds, sizeof(fds));
	return n;
}

int hutch_rootfs_views_rebind(const int *fds, struct hutch_err *err)
{
	int r = 0;
	char path[64] = "/";

	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++) {
		view_path(i, path + 1, sizeof(path) - 1);
		/* The view's mount, whatever its lxcfs: none left, the next
		 * umount2() finds the path is no mount's root (EINVAL; /proc's
		 * own root is never a view's path) or absent (ENOENT). */
		for (int k = 0; k < 4 && umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; k++)
			;
		if (!fds || fds[i] < 0)
			continue;
		/* Our own /proc's file, or the file init made on the root's
		 * /sys (absent: this view was skipped at setup, skip it). */
		if (sys_move_mount(fds[i], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0 &&
		    errno != ENOENT && r == 0)
			r = hutch_err_set_errno(err, -errno, "mount lxcfs view on '%s'", path);
	}
	return r;
}

static int setup_views(struct rootfs_ctx *ctx, int proc, struct hutch_err *err)
{
	/* Private: attached below a copy of the host's tree, it would join
	 * a peer group of the host's (and CRIU restores no group whose
	 * mounts have different roots: full snapshots). */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | PROC_ATTRS,
		                   .propagation = MS_PRIVATE };
	_cleanup_close_ int at = -EBADF;
	const char *dir = NULL;
	char from[64], where[64];
	int r;

	if (ctx->cfg->procview_fd < 0)
		return 0;
	for (const char *const *d = view_mount_points; *d && at < 0; d++) {
		at = openat(ctx->host_root, *d, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		dir = *d;
	}
	if (at < 0)
		return hutch_err_set_errno(err, -errno, "find a place for lxcfs's tree");
	r = rootfs_attach_fd(ctx->cfg->procview_fd, at, "lxcfs", "/proc views", err);
	if (r < 0)
		return r;
	/*
	 * The views' flags are set once, on the attached tree (procview_fd
	 * names its root now): every clone below inherits them, one
	 * mount_setattr() instead of one per view.
	 */
	if (sys_mount_setattr(ctx->cfg->procview_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
	                      sizeof(attr)) < 0)
		return hutch_err_set_errno(err, -errno, "make lxcfs's tree read-only");
	for (const char *const *f = view_files; *f; f++) {
		_cleanup_close_ int src = -EBADF;

		snprintf(where, sizeof(where), "/proc/%s", *f);
		snprintf(from, sizeof(from), "%s/proc/%s", dir, *f);
		src = rootfs_clone_new(ctx->host_root, from, 0, where, err);
		if (src < 0)
			return src;
		/*
		 * Attached by name on our own fresh procfs, whose files are
		 * never symlinks and never followed (no
		 * MOVE_MOUNT_T_SYMLINKS): no open of the target first. A
		 * view this kernel's /proc has not is skipped.
		 */
		if (sys_move_mount(src, "", proc, *f, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
			if (errno == ENOENT)
				continue;
			return hutch_err_set_errno(err, -errno, "mount lxcfs view on '%s'", where);
		}
	}
	return bind_cpu_online(ctx, dir, err);
}

int rootfs_setup_proc(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	_cleanup_close_ int proc = -EBADF;
	int r;

	r = rootfs_mkdir(ctx->root, "proc", 0555, "/proc", err);
	if (r < 0)
		return r;
	/* procfs picks the pid namespace of the caller: we are its PID 1;
	 * a container's nested one's was made by its PID 1. */
	if (ctx->cfg->proc_mnt) {
		proc = fcntl(*ctx->cfg->proc_mnt, F_DUPFD_CLOEXEC, 3);
		if (proc < 0)
			return hutch_err_set_errno(err, -errno, "mount proc on '/proc'");
		r = rootfs_attach(proc, ctx->root, "proc", "proc", "/proc", err);
	} else {
		proc = rootfs_mount_fs(ctx->root, "proc", "proc", NULL, PROC_ATTRS, "/proc", err);
		r = proc;
	}
	if (r < 0)
		return r;
	for (size_t i = 0; i < rootfs_proc_entries_len; i++) {
		r = mask_one(ctx, proc, &rootfs_proc_entries[i], err);
		if (r < 0)
			return r;
	}
	return setup_views(ctx, proc, err);
}
