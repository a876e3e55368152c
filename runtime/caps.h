/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Privilege drop for the commands init starts: once in init for what is the
 * same for every command, then a few syscalls in each command's child
 * (between clone() and execve()). init is namespace root with every
 * capability in the sandbox's user namespace. Also, on the host, the bound
 * put on a helper that handles data from a sandbox (hutch_caps_bound_drop).
 */
#ifndef HUTCH_CAPS_H
#define HUTCH_CAPS_H

#include <sys/types.h>

/*
 * Init side, once, after the last setup step that needs privilege: lock the
 * securebits (no capabilities from uid 0 at execve(), ambient never raised),
 * empty the bounding and ambient sets and the inheritable set of the calling
 * process, keeping its effective and permitted sets; verify. Everything it
 * forks or clones afterwards inherits this. Returns 0 or a negative errno.
 */
int hutch_caps_restrict_init(void);
/*
 * Child side, in a process whose parent called hutch_caps_restrict_init():
 * setgroups(none), setresgid/setresuid to (uid, gid), clear every set,
 * verify that no capability is left and the securebits are those of the
 * restriction (fails closed otherwise). Returns 0 or a negative errno.
 * Raw syscalls only: no allocation, no global state, safe after
 * clone(CLONE_VM).
 */
int hutch_caps_drop_child(uid_t uid, gid_t gid);
/*
 * Host side, in a child about to exec a helper on data from a sandbox:
 * remove cap from the bounding set, so that the helper run as root does not
 * get it back at execve(). Returns 0 when cap is out of the bounding set
 * afterwards (or the caller has no way to hold it: not root and not in its
 * permitted set), else a negative errno.
 */
int hutch_caps_bound_drop(int cap);

#endif
