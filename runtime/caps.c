/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Privilege drop for the commands init starts. init is root in the
 * sandbox's user namespace with every capability there; each command
 * becomes appuser with no capability in any set and no way to regain one.
 *
 * The drop is split in two. What is the same for every command and what
 * init itself never needs is dropped once, in init (hutch_caps_restrict_init):
 * the bounding set (it only matters at execve(), which init never calls,
 * and no process can add to it again), the ambient and inheritable sets,
 * and the locked securebits (uid 0 is never special at execve(), ambient
 * capabilities can never be raised). Children inherit all of that. Each
 * child then only changes ids and clears what uid 0 still holds
 * (hutch_caps_drop_child): a handful of syscalls instead of two per
 * capability. The child side is raw syscalls without allocation or global
 * writes, because it runs between clone(CLONE_VM) and execve(). No libcap:
 * the kernel says where its capabilities end (EINVAL past the last), and its
 * constructor would probe the bounding set at every hutch process's start.
 */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "caps.h"
#include "syscalls.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_IS_SET    1
#define PR_CAP_AMBIENT_RAISE     2
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Capability numbers are below 64 as long as the kernel's sets are two u32 words. */
#define CAP_PROBE_MAX 63

/*
 * Securebits for init and, by inheritance, every command: uid 0 gets no
 * capabilities on execve() (NOROOT), setuid() never fixes capabilities up
 * (NO_SETUID_FIXUP off and locked: the children's setresuid() away from 0
 * clears their permitted and effective sets), KEEP_CAPS stays off, and
 * ambient capabilities can never be raised. Every bit is locked. None of
 * it changes what init can do: it never execs and never changes its ids.
 */
#define HUTCH_SECUREBITS                                                        \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | \
	 SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |                \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/* A container's init: only the locks (see hutch_caps_restrict_container). */
#define HUTCH_SECUREBITS_CONTAINER \
	(SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/*
 * init's own sets after the drop: the securebits as set, nothing
 * inheritable, and so nothing ambient. The bounding set is not read back:
 * each PR_CAPBSET_DROP that returned 0 is the kernel's word that the bit
 * is clear (cap_prctl_drop() lowers it and commits the new credentials
 * before it returns), no process can raise it again, and the loop reads
 * the bits it keeps (41 reads fewer at each sandbox's start).
 */
static int verify_init(unsigned long bits)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (prctl(PR_GET_SECUREBITS, 0L, 0L, 0L, 0L) != (int)bits)
		return -ENOTRECOVERABLE;
	if (sys_capget(&hdr, data) < 0)
		return -errno;
	/* An empty inheritable set is an empty ambient set too: the kernel
	 * keeps ambient within permitted and inheritable (capabilities(7):
	 * "no capability can ever be ambient if it is not both permitted and
	 * inheritable"; capset() trims it), so the ambient set needs no read
	 * per capability. */
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].inheritable)
			return -ENOTRECOVERABLE;
	return 0;
}

/*
 * The bounding set down to keep, the kernel's last capability found on the
 * way: PR_CAPBSET_DROP (or, for a bit kept, PR_CAPBSET_READ) fails with
 * EINVAL past it, whatever the headers we were built with know. One call
 * per capability, no probe before it. A kept bit must still be there.
 */
static int drop_bounding(uint64_t keep)
{
	int cap;

	for (cap = 0; cap <= CAP_PROBE_MAX; cap++) {
		bool kept = (keep >> cap) & 1;
		int r = prctl(kept ? PR_CAPBSET_READ : PR_CAPBSET_DROP, (unsigned long)cap, 0L, 0L,
		              0L);

		if (r < 0 && errno == EINVAL)
			break;
		if (r < 0)
			return -errno;
		if (kept && r != 1)
			return -ENOTRECOVERABLE;
	}
	/* None known (not Linux 2.6.25's prctl), or more than two u32 words. */
	if (cap == 0)
		return -ENOSYS;
	return cap > CAP_PROBE_MAX ? -ENOTRECOVERABLE : 0;
}

static int restrict_init(unsigned long bits, uint64_t keep)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };
	int r;

	/* Securebits and the bounding set need CAP_SETPCAP, which init keeps. */
	if (prctl(PR_SET_SECUREBITS, bits, 0L, 0L, 0L) < 0)
		return -errno;
	r = drop_bounding(keep);
	if (r < 0)
		return r;
	/* Ambient capabilities exist since Linux 4.3: a failure here is an
	 * error, not something to skip. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0L, 0L, 0L) < 0)
		return -errno;
	/* Keep effective and permitted, clear inheritable. */
	if (sys_capget(&hdr, data) < 0)
		return -errno;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		data[i].inheritable = 0;
	if (sys_capset(&hdr, data) < 0)
		return -errno;
	return verify_init(bits);
}

int hutch_caps_restrict_init(void)
{
	return restrict_init(HUTCH_SECUREBITS, 0);
}

int hutch_caps_restrict_container(void)
{
	return restrict_init(HUTCH_SECUREBITS_CONTAINER, HUTCH_CAPS_CONTAINER_MAX);
}

/* After the drop: every set empty, ids as asked, init's restriction in place. */
static int verify_child(uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	/* Fail closed if the caller skipped hutch_caps_restrict_init(): the
	 * bounding and ambient sets are only empty if it ran. */
	if (prctl(PR_GET_SECUREBITS, 0L, 0L, 0L, 0L) != HUTCH_SECUREBITS)
		return -ENOTRECOVERABLE;
	if (sys_capget(&hdr, data) < 0)
		return -errno;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -ENOTRECOVERABLE;
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -errno;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return -ENOTRECOVERABLE;
	if (getgroups(0, NULL) != 0)
		return -ENOTRECOVERABLE;
	return 0;
}

/*
 * Order matters: groups need CAP_SETGID, which setresuid() to a non-zero
 * uid takes away, so they come first; capset() last clears whatever uid 0
 * would keep (nothing, with NO_SETUID_FIXUP off, but it costs one call).
 */
int hutch_caps_drop_child(uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

	/* Fails with EPERM if the user namespace was set up with setgroups "deny". */
	if (setgroups(0, NULL) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0)
		return -errno;
	if (setresuid(uid, uid, uid) < 0)
		return -errno;
	if (sys_capset(&hdr, data) < 0)
		return -errno;
	return verify_child(uid, gid);
}

static uint64_t sets_word(const struct __user_cap_data_struct d[2], size_t field)
{
	const __u32 *lo = (const __u32 *)((const char *)&d[0] + field);
	const __u32 *hi = (const __u32 *)((const char *)&d[1] + field);

	return (uint64_t)*lo | (uint64_t)*hi << 32;
}

/* After hutch_caps_set_child(): every set as asked, the rest as for a
 * plain command (ids, no groups, the container's securebits, no new
 * privileges: what bounds uid 0 at execve() to its permitted set). */
static int verify_sets(uid_t uid, gid_t gid, size_t ngroups, const uint64_t sets[HUTCH_CAPS_SETS])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (prctl(PR_GET_SECUREBITS, 0L, 0L, 0L, 0L) != HUTCH_SECUREBITS_CONTAINER ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0L, 0L, 0L, 0L) != 1)
		return -ENOTRECOVERABLE;
	if (sys_capget(&hdr, d) < 0)
		return -errno;
	if (sets_word(d, offsetof(struct __user_cap_data_struct, effective)) !=
	            sets[HUTCH_CAPS_EFFECTIVE] ||
	    sets_word(d, offsetof(struct __user_cap_data_struct, permitted)) !=
	            sets[HUTCH_CAPS_PERMITTED] ||
	    sets_word(d, offsetof(struct __user_cap_data_struct, inheritable)) !=
	            sets[HUTCH_CAPS_INHERITABLE])
		return -ENOTRECOVERABLE;
	for (int cap = 0; cap <= CAP_PROBE_MAX; cap++) {
		int b = prctl(PR_CAPBSET_READ, (unsigned long)cap, 0L, 0L, 0L);
		int a = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, (unsigned long)cap, 0L, 0L);

		if (b < 0) /* past the kernel's last capability */
			break;
		if (b != (int)((sets[HUTCH_CAPS_BOUNDING] >> cap) & 1) ||
		    a != (int)((sets[HUTCH_CAPS_AMBIENT] >> cap) & 1))
			return -ENOTRECOVERABLE;
	}
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -errno;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != (int)ngroups)
		return -ENOTRECOVERABLE;
	return 0;
}

/*
 * runc's order: bounding set first (needs CAP_SETPCAP, still ours), groups
 * (need CAP_SETGID), ids with keep-caps so that the permitted set survives
 * a move away from uid 0, then the three sets, then ambient (each in
 * permitted and inheritable, which the parser checked).
 */
int hutch_caps_set_child(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups,
                         const uint64_t sets[HUTCH_CAPS_SETS])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };

	for (int i = 0; i < HUTCH_CAPS_SETS; i++)
		if (sets[i] & ~HUTCH_CAPS_CONTAINER_MAX)
			return -EPERM;
	for (int cap = 0; cap <= CAP_PROBE_MAX; cap++)
		if ((HUTCH_CAPS_CONTAINER_MAX >> cap) & 1 &&
		    !((sets[HUTCH_CAPS_BOUNDING] >> cap) & 1) &&
		    prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0L, 0L, 0L) < 0)
			return -errno;
	if (setgroups(ngroups, ngroups ? groups : NULL) < 0)
		return -errno;
	if (prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	if (prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		d[i].effective = (__u32)(sets[HUTCH_CAPS_EFFECTIVE] >> (32 * i));
		d[i].permitted = (__u32)(sets[HUTCH_CAPS_PERMITTED] >> (32 * i));
		d[i].inheritable = (__u32)(sets[HUTCH_CAPS_INHERITABLE] >> (32 * i));
	}
	if (sys_capset(&hdr, d) < 0)
		return -errno;
	for (int cap = 0; cap <= CAP_PROBE_MAX; cap++)
		if ((sets[HUTCH_CAPS_AMBIENT] >> cap) & 1 &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, (unsigned long)cap, 0L, 0L) < 0)
			return -errno;
	return verify_sets(uid, gid, ngroups, sets);
}

int hutch_caps_bound_drop(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) == 0 ||
	    prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0) == 0)
		return 0;
	/* Still bounded (no CAP_SETPCAP): harmless only for a process that
	 * cannot have cap, now or at execve(). */
	if (geteuid() == 0 || sys_capget(&h, d) < 0 ||
	    (d[CAP_TO_INDEX(cap)].permitted & CAP_TO_MASK(cap)))
		return -EPERM;
	return 0;
}
