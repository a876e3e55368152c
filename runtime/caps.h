/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Privilege drop for a command's child, run after fork() from init (which is
 * namespace root with every capability in the sandbox's user namespace).
 */
#ifndef HUTCH_CAPS_H
#define HUTCH_CAPS_H

#include <sys/types.h>

/*
 * Child side: setgroups(none), drop the whole bounding set, clear
 * ambient and inheritable sets, setresgid/setresuid to (uid, gid), verify
 * that no capability is left in any set. Returns 0 or a negative errno.
 * Does not allocate after the first call (call hutch_caps_prepare() once in
 * init first).
 */
int hutch_caps_drop_child(uid_t uid, gid_t gid);
/* Init side, once: resolve the last capability number. */
int hutch_caps_prepare(void);

#endif
