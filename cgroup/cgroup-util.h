/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cgroup backends share, below all of them (cgroup-util.c): the
 * object, the backend table (v1 and v2 each fill one, chosen once in
 * hutch_cgroup_new()), the pure text helpers that turn /proc/self/cgroup,
 * /proc/self/mountinfo and knob contents into paths and numbers (tested
 * without root), and the OS helpers. Private to cgroup/ and the unit test;
 * nothing here calls up into cgroup.c or a backend.
 */
#ifndef HUTCH_CGROUP_UTIL_H
#define HUTCH_CGROUP_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup-limits.h"
#include "error.h"

#define CG_ROOT     "/sys/fs/cgroup"
#define CG_PREFIX   "hutch-"
#define CG_NAME_MAX 64
/* How long destroy and freeze wait for the kernel before giving up. */
#define CG_WAIT_MS 2000
/* Name of the commands' own freezer cgroup below the sandbox's (v1;
 * hutch_cgroup_open_cmds()). */
#define HUTCH_CGROUP_CMDS "cmds"

struct hutch_cgroup;

/* One backend. Per-directory operations take an absolute path so that
 * hutch_cgroup_remove_dir() (gc) can share them. */
struct cgroup_ops {
	const char *version;
	int (*create)(struct hutch_cgroup *cg, const struct hutch_limits *lim,
	              struct hutch_err *err);
	int (*oom_kills)(struct hutch_cgroup *cg, uint64_t *ret);
	/* cpu_usec, mem_current, mem_peak, pids (oom_kills is the caller's). */
	void (*usage)(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret);
	int (*freeze)(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err);
	/* Write lim into the existing directories (oci update). */
	int (*update)(struct hutch_cgroup *cg, const struct hutch_limits *lim,
	              struct hutch_err *err);
	/* Kill everything in dir (and below), wait, rmdir. Missing dir: 0. */
	int (*remove_dir)(const char *dir, struct hutch_err *err);
};

/* v1 controller bits; a hierarchy directory may carry several. */
enum {
	CG_CTRL_CPU = 1u << 0,
	CG_CTRL_MEMORY = 1u << 1,
	CG_CTRL_PIDS = 1u << 2,
	CG_CTRL_FREEZER = 1u << 3,
	/* Only when a container's resources ask: HUTCH_CGROUP_EXTRA_*, shifted
	 * past the four above (derived, so the two cannot drift apart). */
#define CG_CTRL_EXTRA_SHIFT 4
	CG_CTRL_CPUSET = HUTCH_CGROUP_EXTRA_CPUSET << CG_CTRL_EXTRA_SHIFT,
	CG_CTRL_BLKIO = HUTCH_CGROUP_EXTRA_BLKIO << CG_CTRL_EXTRA_SHIFT,
	CG_CTRL_HUGETLB = HUTCH_CGROUP_EXTRA_HUGETLB << CG_CTRL_EXTRA_SHIFT,
	CG_CTRL_NET_CLS = HUTCH_CGROUP_EXTRA_NET_CLS << CG_CTRL_EXTRA_SHIFT,
	CG_CTRL_NET_PRIO = HUTCH_CGROUP_EXTRA_NET_PRIO << CG_CTRL_EXTRA_SHIFT,
	/* No limit of its own: joined so that lxcfs's views (runtime/lxcfs.h)
	 * count the sandbox's CPU time and I/O, not the host's (cpuacct where
	 * it is not co-mounted with cpu; blkio when a container does not ask
	 * for it), and find its CPU quota (lxcfs looks the cpu hierarchy up
	 * by the reader's cpuset path; the parent's CPUs, inherited). */
	CG_CTRL_CPUACCT = 1u << 15,
	CG_CTRL_BLKIO_VIEW = 1u << 16,
	CG_CTRL_CPUSET_VIEW = 1u << 17,
};

struct hutch_cgroup {
	const struct cgroup_ops *ops;
	size_t n_dirs;
	char *dirs[HUTCH_CGROUP_MAX_DIRS];         /* absolute, "/sys/fs/cgroup/.../hutch-<name>" */
	unsigned int ctrls[HUTCH_CGROUP_MAX_DIRS]; /* v1: CG_CTRL_* held by dirs[i]; v2: all */
	bool entered; /* init is in it from its start: cloned into it (v2) or joined by itself (v1)
	               */
	unsigned int depth; /* parents the path names (hutch_cgroup_new_at) */
	unsigned char made[HUTCH_CGROUP_MAX_DIRS]; /* of them, made by create (the deepest) */
};

/* Index of the directory holding controller bit ctrl, or -ENOENT. */
int hutch_cgroup_dir_for(const struct hutch_cgroup *cg, unsigned int ctrl);

/* ---- pure helpers (no syscalls) ---- */

/* True if name is usable in "hutch-<name>": 1..CG_NAME_MAX of [A-Za-z0-9_.-],
 * not starting with '.'. */
bool hutch_cgroup_name_is_valid(const char *name);

/*
 * Find the cgroup path of a /proc/<pid>/cgroup text. controller NULL: the v2
 * line "0::<path>"; else the v1 line whose comma-separated controller list
 * contains controller (e.g. "cpu" matches "4:cpu,cpuacct:/x"). Returns 0, or
 * -ENOENT if absent, -ENAMETOOLONG if it does not fit.
 */
int hutch_cgroup_parse_proc(const char *text, const char *controller, char *ret, size_t size);

struct cg_mount {
	char mountpoint[256];
	char root[256]; /* mount's root within its hierarchy, usually "/" */
};

/*
 * Find a cgroup mount in a /proc/<pid>/mountinfo text. controller NULL: a
 * cgroup2 mount; else a "cgroup" mount whose super options contain
 * controller. Only mounts at or under /sys/fs/cgroup count; the first wins.
 */
int hutch_cgroup_parse_mountinfo(const char *text, const char *controller, struct cg_mount *ret);

/*
 * The directory that corresponds to cgroup path own_path (from /proc/self/
 * cgroup) under mount m: mountpoint + (own_path minus m->root). -ENOENT if
 * own_path is not visible through this mount (outside its root).
 */
int hutch_cgroup_path_join(const struct cg_mount *m, const char *own_path, char *ret, size_t size);

/* Value of "key N" in a flat keyed file (memory.events, memory.oom_control,
 * cgroup.events). -ENOENT if the key is absent, -EINVAL if malformed. */
int hutch_cgroup_parse_keyed(const char *text, const char *key, uint64_t *ret);

/* True if every name in want (space separated) is listed in have (a
 * cgroup.controllers / cgroup.subtree_control text). */
bool hutch_cgroup_list_has(const char *have, const char *want);

/* Limit values as the kernel wants them. 0 means "no limit" ("-1" for v1,
 * "max" for v2). cpu: -EINVAL if the quota would be below the kernel's
 * minimum (cpu_millis < 10). */
int hutch_cgroup_fmt_cpu_v1(uint64_t cpu_millis, char *quota, size_t size);
int hutch_cgroup_fmt_cpu_v2(uint64_t cpu_millis, char *cpu_max, size_t size);
void hutch_cgroup_fmt_limit(uint64_t value, bool v2, char *buf, size_t size);
/* A container's cpu quota and period (res->cpu_quota at res->cpu_period)
 * into quota and period (each size bytes); without a period both are left
 * as they are. -EINVAL: a quota below the kernel's minimum. */
int hutch_cgroup_fmt_cpu_period(const struct hutch_resources *res, char *quota, char *period,
                                size_t size);

/* The gc guard: absolute, under /sys/fs/cgroup/, no "." / ".." component,
 * no "//", last component starting "hutch-". */
bool hutch_cgroup_dir_is_removable(const char *dir);

/* ---- OS helpers shared by the backends ---- */

/* Open an absolute cgroup directory (no symlinks, no magic links). */
int hutch_cgroup_open_dir(const char *dir);
/* For removal: open dir's parent alone. Returns 1 when the parent is gone
 * (so is dir), 0 with *ret_parent and *ret_name (dir's last component)
 * set, or -errno with err set. */
int hutch_cgroup_open_parent(const char *dir, int *ret_parent, const char **ret_name,
                             struct hutch_err *err);
/* One removal attempt: rmdir the children, then dir (name in parent).
 * 1: gone; 0: still busy, try again; -errno with err set: another error,
 * or still busy at deadline (CLOCK_MONOTONIC ms). */
int hutch_cgroup_try_remove(int fd, int parent, const char *name, const char *dir, int64_t deadline,
                            struct hutch_err *err);
/* The number in knob name of cgroup dir (a decimal, or "max"), or
 * UINT64_MAX when it cannot be read. */
uint64_t hutch_cgroup_read_u64(const char *dir, const char *name);
/* Parse a cgroup.procs text into pids; returns count (at most max). */
size_t hutch_cgroup_parse_pids(const char *text, pid_t *pids, size_t max);
/* SIGKILL every process listed in dirfd's cgroup.procs, re-checking membership
 * through pidfds so a recycled pid is never signalled. Returns the number of
 * processes seen, or a negative errno. */
int hutch_cgroup_kill_procs(int dirfd);
/* Walk the children of dirfd independently of other walks (own offset). */
DIR *hutch_cgroup_opendir(int dirfd);
/* rmdir every child cgroup of dirfd, depth first. */
int hutch_cgroup_rmdir_children(int dirfd);
/* Sleep ms milliseconds. */
void hutch_cgroup_sleep_ms(unsigned int ms);
/* Create the cgroup directory dir (its parent must exist); returns an fd of
 * it, and hands the parent's fd to *ret_parent when asked (for rollback). */
int hutch_cgroup_make_dir(const char *dir, int *ret_parent, struct hutch_err *err);
/* The file system type of /sys/fs/cgroup (statfs's f_type). */
int hutch_cgroup_root_fs_type(long *ret, struct hutch_err *err);

/* ---- the caller's own cgroups ---- */

/* /proc/self/cgroup and /proc/self/mountinfo, read once. */
struct cg_text {
	char *proc;
	char *mountinfo;
};
int hutch_cgroup_text_read(struct cg_text *t, struct hutch_err *err);
void hutch_cgroup_text_done(struct cg_text *t);
/* The directory of our own cgroup in the hierarchy of controller (NULL: v2). */
int hutch_cgroup_own_dir(const struct cg_text *t, const char *controller, char *ret, size_t size,
                         struct hutch_err *err);
/* The v1 controllers hutch uses, in the order they are set up and
 * destroyed; those with a field only when a container's resources ask
 * (the field names it). */
/* The strings in the row, not pointers: no relocation, the table stays
 * in read-only data the dynamic loader never writes (issue 31: CLI
 * start). */
struct cg_v1_ctrl {
	char name[12];
	unsigned int bit; /* CG_CTRL_* */
	bool required;
	char field[40]; /* "": none */
};
extern const struct cg_v1_ctrl hutch_cgroup_v1_ctrls[];
extern const size_t hutch_cgroup_n_v1_ctrls;

#endif
