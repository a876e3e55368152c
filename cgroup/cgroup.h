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

#include "cgroup-limits.h"
#include "cgroup-root.h"
#include "cgroup-systemd.h"

struct hutch_cgroup;

/* Detect the hierarchy and compute (not create) the sandbox's directories,
 * named "hutch-<name>", below the caller's own cgroup. */
int hutch_cgroup_new(const char *name, struct hutch_cgroup **ret, struct hutch_err *err);
/* The same, but the sandbox's cgroup is path under the same parent
 * instead of "hutch-<name>" (a container's linux.cgroupsPath: 1 to
 * HUTCH_CGROUP_PATH_DEPTH '/'-separated names, a leading '/' ignored:
 * never outside where hutch nests). path NULL: hutch_cgroup_new().
 * hutch_cgroup_create() makes the missing parents, hutch_cgroup_destroy()
 * removes those it made. */
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
/* On v2, our own cgroup can give a sandbox its controllers only by
 * writing into ancestors that are not ours (a login session, a plain
 * service or scope): the sandbox should get a delegated scope of its own
 * (cgroup-systemd.h). */
bool hutch_cgroup_needs_scope(void);
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
 * child joins by itself with hutch_cgroup_join_self():
 * a thread moving itself is migrated without the global threadgroup lock,
 * whose write side waits for an RCU grace period (5-20 ms here) on every
 * move of another pid. Returns how many fds; 0 on v2 (clone into it). */
int hutch_cgroup_open_join(const struct hutch_cgroup *cg, int *fds, size_t max);
/* In the (single-threaded) child: write "0" to each fd; closes them all. */
int hutch_cgroup_join_self(int *fds, size_t n);
/*
 * v1 with a freezer: the commands live in a child freezer cgroup
 * ("cmds") and idle sleep freezes that one, never init. The
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
/* Whether hutch_cgroup_open_cmds() has a freezer cgroup to open (v1 with
 * a freezer), known before the cgroups are made. */
bool hutch_cgroup_has_cmds(const struct hutch_cgroup *cg);
/* Move pid into the sandbox's cgroups (nothing to do if the clone put it
 * there). A migration waits for an RCU grace period (cgroup.procs takes
 * the threadgroup rwsem for writing): 5-20 ms on an idle 2-CPU VM. */
int hutch_cgroup_enter(struct hutch_cgroup *cg, pid_t pid, struct hutch_err *err);
/* Count of OOM kills so far in this cgroup (memory.events / memory.oom_control). */
int hutch_cgroup_oom_kills(struct hutch_cgroup *cg, uint64_t *ret);
int hutch_cgroup_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret);
/* Freeze / thaw every process (v1 freezer, v2 cgroup.freeze). */
int hutch_cgroup_freeze(struct hutch_cgroup *cg, bool frozen, struct hutch_err *err);
/* New limits for a created cgroup (a container's oci update). */
int hutch_cgroup_update(struct hutch_cgroup *cg, const struct hutch_limits *lim,
                        struct hutch_err *err);
/* SIGKILL everything left, wait until empty (bounded), rmdir every directory. */
int hutch_cgroup_destroy(struct hutch_cgroup *cg, struct hutch_err *err);
/*
 * A cgroup for a helper run beside the sandbox's (CRIU's dump or restore,
 * runtime/criu.h), so that every process of the run, whatever it forks or
 * however it regroups (setsid, setpgid), can be killed at once: the
 * sandbox's directory plus HUTCH_CGROUP_RUN_SUFFIX in the one hierarchy
 * that kills a whole tree (v2: the unified one, cgroup.kill; v1: the
 * freezer's, frozen and killed; without one, the first), empty, made anew
 * (a leftover of an earlier run killed and removed first). Its path into
 * ret_dir; an fd of its cgroup.procs (close-on-exec; a child joins by
 * writing "0", a self-migration) as the return, or -errno with err set.
 * hutch_cgroup_remove_dir() kills what is in it and removes it; gc removes
 * the one of each dead sandbox's recorded directories.
 */
#define HUTCH_CGROUP_RUN_SUFFIX "-run"
int hutch_cgroup_run_new(const struct hutch_cgroup *cg, char *ret_dir, size_t size,
                         struct hutch_err *err);
/* gc: same as destroy for a directory recorded earlier. Refuses paths not
 * under /sys/fs/cgroup or whose last component does not start "hutch-". */
int hutch_cgroup_remove_dir(const char *dir, struct hutch_err *err);

#endif
