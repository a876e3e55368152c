/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /sys/fs/cgroup held open across a series of cgroup lookups: every
 * cgroup directory opened meanwhile (hutch_cgroup_open_dir()) is resolved
 * beneath that fd instead of an open() and close() of the root each.
 */
#ifndef HUTCH_CGROUP_ROOT_H
#define HUTCH_CGROUP_ROOT_H

/* Keep /sys/fs/cgroup open (O_PATH, close-on-exec) until the matching
 * release. Holds nest; hutch_cgroup_create() and hutch_cgroup_destroy()
 * hold it themselves, a caller holds it across a series (the supervisor:
 * create, the commands' cgroup, init's joins). A failure to open leaves
 * it unheld: each lookup opens the root, as without. Per process. */
void hutch_cgroup_root_hold(void);
void hutch_cgroup_root_release(void);
/* In a child that goes on without its parent's fds (it closes them all):
 * close this process's copy and forget every hold, so that no later
 * lookup uses the number. */
void hutch_cgroup_root_forget(void);
/* The held fd, or a negative errno when none is held. */
int hutch_cgroup_root_held(void);

#endif
