/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Privilege drop for a command's child. init is root in the sandbox's user
 * namespace with every capability there; each command it forks becomes
 * appuser with no capability in any set and no way to regain one: the
 * bounding set is emptied (so no execve() of a file with capabilities, or
 * of anything as uid 0, can grant one), the ambient and inheritable sets
 * are cleared, supplementary groups dropped, and securebits locked so that
 * uid 0 is never special again. Everything here is raw prctl()/capset()
 * without allocation, because it runs between fork() and execve(); libcap
 * is only used in init, by hutch_caps_prepare().
 */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <sys/capability.h>

#include "caps.h"
#include "syscalls.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_IS_SET    1
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Capability numbers are below 64 as long as the kernel's sets are two u32 words. */
#define CAP_PROBE_MAX 63

/*
 * Securebits for appuser: uid 0 gets no capabilities on execve() (NOROOT),
 * setuid() never fixes capabilities up (irrelevant once they are gone, but
 * locked so nothing can turn it on), KEEP_CAPS stays off, and ambient
 * capabilities can never be raised. Every bit is locked.
 */
#define HUTCH_SECUREBITS                                                        \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | \
	 SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |                \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/*
 * Highest capability the running kernel knows, probed with PR_CAPBSET_READ
 * (EINVAL past the last one): no /proc read, no allocation, no global.
 */
static int last_cap_probe(void)
{
	int cap;

	for (cap = 0; cap <= CAP_PROBE_MAX; cap++)
		if (prctl(PR_CAPBSET_READ, (unsigned long)cap, 0L, 0L, 0L) < 0)
			break;
	return cap - 1;
}

int hutch_caps_prepare(void)
{
	int last = last_cap_probe();
	int lib = cap_max_bits() - 1;

	if (last < 0)
		return -ENOSYS;
	/*
	 * The kernel may know capabilities this libcap does not (or the
	 * reverse); the child always uses the kernel's number, so only check
	 * that ambient capabilities exist (Linux 4.3), which we must clear.
	 */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 0L, 0L, 0L) < 0)
		return -errno;
	return last > lib ? last : lib;
}

static int drop_bounding(int last)
{
	for (int cap = 0; cap <= last; cap++)
		if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0L, 0L, 0L) < 0)
			return -errno;
	return 0;
}

static int clear_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (sys_capset(&hdr, data) < 0)
		return -errno;
	return 0;
}

/* After the drop: every set empty, ids as asked. */
static int verify(uid_t uid, gid_t gid, int last)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (sys_capget(&hdr, data) < 0)
		return -errno;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -ENOTRECOVERABLE;
	for (int cap = 0; cap <= last; cap++) {
		if (prctl(PR_CAPBSET_READ, (unsigned long)cap, 0L, 0L, 0L) != 0)
			return -ENOTRECOVERABLE;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, (unsigned long)cap, 0L, 0L) != 0)
			return -ENOTRECOVERABLE;
	}
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -errno;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return -ENOTRECOVERABLE;
	if (getgroups(0, NULL) != 0)
		return -ENOTRECOVERABLE;
	return 0;
}

/*
 * Order matters: securebits, the bounding set and groups need CAP_SETPCAP
 * and CAP_SETGID, which setresuid() to a non-zero uid takes away, so they
 * come first; capset() last clears what uid 0 would keep.
 */
int hutch_caps_drop_child(uid_t uid, gid_t gid)
{
	int last = last_cap_probe();
	int r;

	if (last < 0)
		return -ENOSYS;
	if (prctl(PR_SET_SECUREBITS, (unsigned long)HUTCH_SECUREBITS, 0L, 0L, 0L) < 0)
		return -errno;
	r = drop_bounding(last);
	if (r < 0)
		return r;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0L, 0L, 0L) < 0)
		return -errno;
	/* Fails with EPERM if the user namespace was set up with setgroups "deny". */
	if (setgroups(0, NULL) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0)
		return -errno;
	if (setresuid(uid, uid, uid) < 0)
		return -errno;
	r = clear_caps();
	if (r < 0)
		return r;
	return verify(uid, gid, last);
}
