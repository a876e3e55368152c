/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The instance's sizes in /proc (issue 27): one lxcfs per runtime dir,
 * shared by every sandbox of that dir. lxcfs answers each read from the
 * cgroups of the process that reads, so one instance serves all sandboxes.
 *
 * Lifecycle (no central daemon): the first create that finds none running
 * (no lxcfs holds the lock on hutch's record of it, or its mount is gone)
 * starts it (under the dir's lock); each supervisor holds a shared flock on
 * the dir's users file for its whole life; `hutch gc` stops lxcfs when no
 * supervisor holds it. The files live in $RUNTIME_DIR/.lxcfs/. When lxcfs
 * ends under live sandboxes, each of their supervisors revives it (the
 * first starts a new one) and has its init re-bind the views.
 */
#ifndef HUTCH_LXCFS_H
#define HUTCH_LXCFS_H

#include "error.h"

/*
 * For a new sandbox of runtime_dir: start lxcfs if none runs, then take a
 * shared hold on it (*ret_hold: an fd to keep open for the sandbox's life)
 * and a detached clone of its views (*ret_tree, for init: proc/meminfo,
 * ..., binds of lxcfs's files made once per lxcfs, so that init's binds
 * ask lxcfs nothing; the views it does not serve absent);
 * *ret_pidfd: a pidfd of that lxcfs, whose end the supervisor watches
 * (supervisor/procview.c), or -errno when none could be opened. 0 on
 * success; 1 when lxcfs runs but did not answer the lookups of its views
 * within 5 s (stopped or hung; once per lxcfs: *ret_tree -EBADF, the hold
 * and pidfd as on success, err untouched): a sandbox without the views;
 * -ENOENT (err untouched) when lxcfs is not installed or is
 * switched off (HUTCH_LXCFS=none): no views then. Root only (-EPERM
 * otherwise, err untouched).
 */
int hutch_lxcfs_acquire(const char *runtime_dir, int *ret_tree, int *ret_hold, int *ret_pidfd,
                        struct hutch_err *err);

/*
 * For a live sandbox that holds runtime_dir's lxcfs (acquire()'s hold)
 * whose lxcfs ended: the one a create or another supervisor started
 * meanwhile, else a new one started here, as acquire() would.
 * *ret_root: an O_PATH fd of its mount's root in the caller's mount
 * namespace (the views are cloned from there); *ret_pidfd as acquire()'s.
 * 0, or -errno with err set (no lxcfs could be started).
 */
int hutch_lxcfs_revive(const char *runtime_dir, int *ret_root, int *ret_pidfd,
                       struct hutch_err *err);

/* The lxcfs binary hutch runs (HUTCH_LXCFS, else /usr/bin, /usr/local/bin),
 * or NULL: none, or HUTCH_LXCFS=none. */
const char *hutch_lxcfs_binary(void);

/* `hutch gc`: stop runtime_dir's lxcfs and remove its files when no
 * sandbox holds it. 1 if stopped, 0 if in use or none, <0 on error. */
int hutch_lxcfs_gc(const char *runtime_dir, struct hutch_err *err);

/* A refused create's end of its use (its fds closed): as hutch_lxcfs_gc(),
 * but while the dir has no sandbox and the lock is still held (by a child
 * forked meanwhile, for a moment), asked again, for up to 2 s. */
int hutch_lxcfs_release(const char *runtime_dir, struct hutch_err *err);

/*
 * What lxcfs reads as the host's /proc/meminfo (pure, for the unit test):
 * each line of host with its value 0, except MemTotal (lxcfs shows the
 * smaller of it and the limit). lxcfs recomputes the lines it knows from
 * the reader's cgroup and passes the others through, so those others
 * (CommitLimit, DirectMap*, VmallocUsed...: the host's memory) must not
 * carry the host's figures. NULL + errno on failure.
 */
char *hutch_lxcfs_meminfo_render(const char *host);

#endif
