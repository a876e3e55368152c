/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes of the sandbox's pid namespace (init's /proc), for kill
 * and for the sessions a command's tree made (init.c).
 */
#ifndef HUTCH_PROCTREE_H
#define HUTCH_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct hutch_proc_entry {
	pid_t pid, ppid, pgrp, sid;
	bool marked; /* the caller's */
};

/* Read the processes from this proc (a detached mount of init's own pid
 * namespace, kept by init; not closed) instead of "/proc", which shows the
 * container's nested pid namespace (pidns.c), where init is not. */
void hutch_proc_set_root(int procfd);

/* Snapshot of every process but init (PID 1, and the caller): pid, parent, group, session, into
 * *ret (malloc'ed; NULL when none). Returns the count. */
size_t hutch_proc_scan(struct hutch_proc_entry **ret);

/*
 * Kill a command's whole tree: every process of its session, and every
 * descendant of its main process or of a session member (by parent links,
 * which also catches children that made a session of their own with
 * setsid()). Killed processes cannot fork, so a few rounds reach a fixed
 * point. What escapes: a process whose parent chain to the command was
 * already broken (a double-forked daemon in a new session); it lives until
 * the sandbox ends.
 */
void hutch_proc_kill_tree(pid_t root, int sig);

/* Every descendant of the calling init (a pod member's, not PID 1 of the
 * pod's pid namespace, whose end does not take them with it: init is
 * their child subreaper, so none escapes by double-forking). */
void hutch_proc_kill_descendants(int sig);

#endif
