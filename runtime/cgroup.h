/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cgroups of one sandbox, v1 (one directory per controller) or v2 (one
 * unified directory), nested under the cgroup of the calling process. The
 * backend is chosen once in hutch_cgroup_new(); callers never branch on it.
 * A sandbox created with --no-limits has no cgroup: the setup functions
 * below (clone_fd, open_cmds, open_join, mark_entered, enter, freeze) take
 * a NULL cg for it and do nothing (freeze: -EOPNOTSUPP).
 */
#ifndef HUTCH_CGROUP_H
#define HUTCH_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct hutch_cgroup;

/*
 * What a container's linux.resources asks beyond the three limits (OCI
 * runtime-spec names; oci/spec-resources.c parses and bounds it, the
 * backends write it through cgroup-res.c). Fixed size: it travels by value
 * in oci update's message (proto.h). A field counts only when given:
 * numbers 0 and strings "" are "not given", the flags below say so for
 * fields where 0 is a value.
 */
#define HUTCH_RES_MAX_DEVICES   16 /* per blockIO list */
#define HUTCH_RES_MAX_HUGEPAGES 8
#define HUTCH_RES_MAX_PRIOS     16 /* network.priorities */
#define HUTCH_RES_MAX_UNIFIED   16
enum {
	HUTCH_RES_SWAPPINESS = 1u << 0,
	HUTCH_RES_OOM_DISABLE = 1u << 1, /* memory.disableOOMKiller: true */
	HUTCH_RES_KERNEL_TCP = 1u << 2,
	HUTCH_RES_CLASSID = 1u << 3,
	HUTCH_RES_HUGEPAGES = 1u << 4, /* nhugepages entries given (a limit may be 0) */
};
/* blockIO's per-device entries: weight (and leaf weight) or a rate. */
struct hutch_res_dev {
	int64_t major, minor;
	uint64_t value;       /* weight, bytes or ops per second */
	uint16_t leaf_weight; /* weightDevice only; 0: not given */
};
/* The blockIO lists, in this order. */
enum {
	HUTCH_RES_WEIGHT_DEV,
	HUTCH_RES_READ_BPS,
	HUTCH_RES_WRITE_BPS,
	HUTCH_RES_READ_IOPS,
	HUTCH_RES_WRITE_IOPS,
	HUTCH_RES_DEV_LISTS
};
struct hutch_resources {
	uint32_t given;      /* HUTCH_RES_* */
	uint64_t cpu_shares; /* 2..262144 */
	/* cpu.quota at the bundle's cpu.period (both or neither), lowered to
	 * cpu_millis at that period by the caller; 0: hutch's 100 ms period */
	uint64_t cpu_quota, cpu_period;
	char cpus[256], mems[64];
	uint64_t mem_reservation;
	uint64_t mem_swap; /* memory + swap: only the memory limit or more (no swap) */
	uint64_t kernel_tcp;
	uint32_t swappiness;                      /* 0..100 */
	uint16_t blkio_weight, blkio_leaf_weight; /* 10..1000 */
	struct hutch_res_dev dev[HUTCH_RES_DEV_LISTS][HUTCH_RES_MAX_DEVICES];
	uint8_t ndev[HUTCH_RES_DEV_LISTS];
	struct {
		char size[16]; /* "2MB", "1GB": as the kernel's knob names it */
		uint64_t limit;
	} hugepages[HUTCH_RES_MAX_HUGEPAGES];
	uint8_t nhugepages;
	uint32_t classid;
	struct {
		char name[16];
		uint32_t prio;
	} prios[HUTCH_RES_MAX_PRIOS];
	uint8_t nprios;
	struct {
		char key[64], value[256];
	} unified[HUTCH_RES_MAX_UNIFIED];
	uint8_t nunified;
};

struct hutch_limits {
	uint64_t cpu_millis;   /* 1000 = one CPU; becomes a CFS quota */
	uint64_t memory_bytes; /* hard limit, no swap */
	uint64_t pids_max;
	struct hutch_resources res; /* a container's: the rest of linux.resources */
};

/* Pure helpers of struct hutch_resources (cgroup-res.c). */
/* The v1 controllers (besides cpu, memory, pids, freezer) res needs:
 * a mask of HUTCH_CGROUP_EXTRA_*. */
enum {
	HUTCH_CGROUP_EXTRA_CPUSET = 1u << 0,
	HUTCH_CGROUP_EXTRA_BLKIO = 1u << 1,
	HUTCH_CGROUP_EXTRA_HUGETLB = 1u << 2,
	HUTCH_CGROUP_EXTRA_NET_CLS = 1u << 3,
	HUTCH_CGROUP_EXTRA_NET_PRIO = 1u << 4,
};
unsigned int hutch_resources_extra(const struct hutch_resources *res);
/* oci update: what upd gives replaces dst's (lists: as a whole). */
void hutch_resources_merge(struct hutch_resources *dst, const struct hutch_resources *upd);
/* cpu.shares (2..262144) as cgroup v2's cpu.weight (1..10000), as runc
 * and crun convert it. */
uint64_t hutch_cgroup_shares_to_weight(uint64_t shares);
/* A linux.resources.unified key and value, checked against lim: 0 with
 * ret the value to write (lowered to lim's where it is one of hutch's
 * limits), or -EPERM / -EINVAL with why (a static string) set. */
int hutch_cgroup_unified_check(const char *key, const char *value, const struct hutch_limits *lim,
                               char *ret, size_t size, const char **why);

#define HUTCH_CGROUP_MAX_DIRS 12

/* Detect the hierarchy and compute (not create) the sandbox's directories,
 * named "hutch-<name>", below the caller's own cgroup. */
int hutch_cgroup_new(const char *name, struct hutch_cgroup **ret, struct hutch_err *err);
/* The same, but the sandbox's cgroup is path under the same parent
 * instead of "hutch-<name>" (a container's linux.cgroupsPath: 1 to
 * HUTCH_CGROUP_PATH_DEPTH '/'-separated names, a leading '/' ignored:
 * never outside where hutch nests). path NULL: hutch_cgroup_new().
 * hutch_cgroup_create() makes the missing parents, hutch_cgroup_destroy()
 * removes those it made. */
#define HUTCH_CGROUP_PATH_DEPTH 8
#define HUTCH_CGROUP_PATH_MAX   511
int hutch_cgroup_new_at(const char *name, const char *path, struct hutch_cgroup **ret,
                        struct hutch_err *err);
/* v1: the same, plus the directories of the extra controllers a
 * container's resources need (hutch_resources_extra()); a controller the
 * host has not mounted is an error naming the linux.resources field. */
int hutch_cgroup_new_for(const char *name, const char *path, const struct hutch_resources *res,
                         struct hutch_cgroup **ret, struct hutch_err *err);
/* True if path is one hutch_cgroup_new_at() takes (pure). */
bool hutch_cgroup_path_is_valid(const char *path);
struct hutch_cgroup *hutch_cgroup_free(struct hutch_cgroup *cg);
/* True when /sys/fs/cgroup is cgroup2 (pure v2). */
bool hutch_cgroup_host_is_v2(void);
/*
 * systemd (cgroup-systemd.c). needs_scope: on v2, our own cgroup can give
 * a sandbox its controllers only by writing into ancestors that are not
 * ours (a login session, a plain service or scope), so the sandbox should
 * get a delegated unit of its own. systemd_address: systemd's private
 * socket for the caller (root: the system manager; else the user's, from
 * XDG_RUNTIME_DIR), -ENOENT without systemd. systemd_scope: move the
 * calling process into a new transient scope "hutch-<name>.scope" with
 * Delegate=yes (wait until it is there); hutch_cgroup_new() then nests in
 * it.
 */
bool hutch_cgroup_needs_scope(void);
int hutch_cgroup_systemd_address(char *ret, size_t size);
int hutch_cgroup_systemd_scope(const char *address, const char *name, struct hutch_err *err);
/* "v1" or "v2". */
const char *hutch_cgroup_version(const struct hutch_cgroup *cg);
/* The absolute directories this sandbox uses (to record before creating). */
size_t hutch_cgroup_dirs(const struct hutch_cgroup *cg, const char **ret_dirs, size_t max);
/* Create the directories and write the limits. */
int hutch_cgroup_create(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err);
/* v2: a directory fd of the sandbox's cgroup (after create) for
 * clone3(CLONE_INTO_CGROUP), which starts the child inside it without a
 * migration. v1: -EOPNOTSUPP (see hutch_cgroup_open_join()). */
int hutch_cgroup_clone_fd(const struct hutch_cgroup *cg);
/* init is in the cgroups from its start (cloned into them, or it joins by
 * itself and reports a failure): hutch_cgroup_enter() has nothing to do. */
void hutch_cgroup_mark_entered(struct hutch_cgroup *cg);
/* v1: open each hierarchy's "tasks" file (host root opens it) so that the
 * child joins by itself right after clone with hutch_cgroup_join_self():
 * a thread moving itself is migrated without the global threadgroup lock,
 * whose write side waits for an RCU grace period (5-20 ms here) on every
 * move of another pid. Returns how many fds; 0 on v2 (clone into it). */
int hutch_cgroup_open_join(const struct hutch_cgroup *cg, int *fds, size_t max);
/* In the (single-threaded) child: write "0" to each fd; closes them all. */
int hutch_cgroup_join_self(int *fds, size_t n);
/* Name of the commands' own freezer cgroup below the sandbox's (v1). */
#define HUTCH_CGROUP_CMDS "cmds"
/*
 * v1 with a freezer: the commands live in a child freezer cgroup
 * (HUTCH_CGROUP_CMDS) and idle sleep freezes that one, never init. The
 * v1 freezer holds a frozen task even against SIGKILL, so with init frozen
 * too, a supervisor killed while the sandbox slept left every process
 * stuck: init could not die of its PDEATHSIG, nor the rest of its pid
 * namespace. Opens the child's "tasks" (each command joins by writing "0",
 * a self-migration) and "freezer.state" (init writes THAWED there when
 * its supervisor dies, then exits). Returns 0, or -EOPNOTSUPP on v2 (a
 * task frozen by cgroup v2 still dies of a fatal signal) and without a v1
 * freezer; both fds are then -EBADF.
 */
int hutch_cgroup_open_cmds(const struct hutch_cgroup *cg, int *ret_tasks, int *ret_state);
/* Move pid into the sandbox's cgroups (nothing to do if the clone put it
 * there). A migration waits for an RCU grace period (cgroup.procs takes
 * the threadgroup rwsem for writing): 5-20 ms on an idle 2-CPU VM. */
int hutch_cgroup_enter(struct hutch_cgroup *cg, pid_t pid, struct hutch_err *err);
/* Count of OOM kills so far in this cgroup (memory.events / memory.oom_control). */
int hutch_cgroup_oom_kills(struct hutch_cgroup *cg, uint64_t *ret);
/* What the sandbox uses now, for hutch stats; a counter the host cannot
 * give (v1 without cpuacct, a kernel without memory.peak) is UINT64_MAX. */
struct hutch_cgroup_usage {
	uint64_t cpu_usec;    /* CPU time used since creation */
	uint64_t mem_current; /* bytes charged now (processes and tmpfs pages) */
	uint64_t mem_peak;    /* the most ever charged */
	uint64_t pids;        /* tasks now */
	uint64_t oom_kills;
};
int hutch_cgroup_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret);
/* Freeze / thaw every process (v1 freezer, v2 cgroup.freeze). */
int hutch_cgroup_freeze(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err);
/* New limits for a created cgroup (a container's oci update). */
int hutch_cgroup_update(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err);
/* SIGKILL everything left, wait until empty (bounded), rmdir every directory. */
int hutch_cgroup_destroy(struct hutch_cgroup *cg, struct hutch_err *err);
/* gc: same as destroy for a directory recorded earlier. Refuses paths not
 * under /sys/fs/cgroup or whose last component does not start "hutch-". */
int hutch_cgroup_remove_dir(const char *dir, struct hutch_err *err);

/* What the host offers, for `hutch doctor`. */
struct hutch_cgroup_probe {
	bool v2_unified; /* /sys/fs/cgroup is cgroup2 (pure v2) */
	bool hybrid;     /* v1 controllers plus a v2 tree */
	bool has_cpu, has_memory, has_pids, has_freezer;
	bool can_create;  /* a sandbox's cgroup could be made and removed */
	bool in_scope;    /* probed in a delegated scope of its own (systemd), as sandboxes get */
	char detail[256]; /* what is missing and how to fix it */
};
int hutch_cgroup_probe(struct hutch_cgroup_probe *ret);

#endif
