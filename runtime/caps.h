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

#include <linux/capability.h>
#include <stdint.h>
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
 * The capabilities a container's process may hold (oci/): Docker's,
 * containerd's and Kubernetes' default set, every one of them confined to
 * the sandbox's own user namespace (docs/kubernetes.md says why each is
 * harmless there): CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW,
 * SETGID, SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL,
 * AUDIT_WRITE.
 */
#define HUTCH_CAPS_CONTAINER_MAX                                                                  \
	(HUTCH_CAP_BIT(CAP_CHOWN) | HUTCH_CAP_BIT(CAP_DAC_OVERRIDE) | HUTCH_CAP_BIT(CAP_FSETID) | \
	 HUTCH_CAP_BIT(CAP_FOWNER) | HUTCH_CAP_BIT(CAP_MKNOD) | HUTCH_CAP_BIT(CAP_NET_RAW) |      \
	 HUTCH_CAP_BIT(CAP_SETGID) | HUTCH_CAP_BIT(CAP_SETUID) | HUTCH_CAP_BIT(CAP_SETFCAP) |     \
	 HUTCH_CAP_BIT(CAP_SETPCAP) | HUTCH_CAP_BIT(CAP_NET_BIND_SERVICE) |                       \
	 HUTCH_CAP_BIT(CAP_SYS_CHROOT) | HUTCH_CAP_BIT(CAP_KILL) | HUTCH_CAP_BIT(CAP_AUDIT_WRITE))
#define HUTCH_CAP_BIT(cap) (1ULL << (cap))
/* A process's sets, as the runtime-spec names them. */
enum {
	HUTCH_CAPS_BOUNDING,
	HUTCH_CAPS_EFFECTIVE,
	HUTCH_CAPS_PERMITTED,
	HUTCH_CAPS_INHERITABLE,
	HUTCH_CAPS_AMBIENT,
	HUTCH_CAPS_SETS
};
/*
 * Init side, once, for a container: as hutch_caps_restrict_init() but the
 * bounding set keeps HUTCH_CAPS_CONTAINER_MAX, and of the securebits only
 * the locks are set (uid 0 is root at execve(), as runc has it, bounded by
 * no_new_privs to what the process held; ambient capabilities may be
 * raised; keep-caps stays settable for one setresuid()). Every command of
 * the container then goes through hutch_caps_set_child().
 */
int hutch_caps_restrict_container(void);
/*
 * Child side, in a container: bounding set to sets[BOUNDING] (within
 * HUTCH_CAPS_CONTAINER_MAX, else -EPERM), no supplementary groups, ids to
 * (uid, gid) keeping the permitted set, then effective, permitted,
 * inheritable and ambient as asked; verified (fails closed). The kernel's
 * rules at execve() then apply: uid 0 keeps (inheritable | bounding) &
 * permitted, another uid its ambient set. Same constraints as
 * hutch_caps_drop_child() (raw syscalls only).
 */
int hutch_caps_set_child(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups,
                         const uint64_t sets[HUTCH_CAPS_SETS]);

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
