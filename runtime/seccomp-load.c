/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime side of the seccomp filter: look up the program compiled
 * into hutch for a network mode (see seccomp-filter.h, seccomp-gen.c),
 * install it in init once (every command inherits it), and check in each
 * command's child that it is there.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "error.h"
#include "seccomp-filter.h"
#include "seccomp-internal.h"
#include "syscalls.h"

int hutch_seccomp_program(enum hutch_net_mode mode, struct sock_fprog *ret, struct hutch_err *err)
{
	for (size_t i = 0; i < hutch_seccomp_ncompiled; i++) {
		const struct hutch_seccomp_compiled *c = &hutch_seccomp_compiled[i];

		if (c->mode != (int)mode)
			continue;
		if (c->len == 0 || c->len > BPF_MAXINSNS)
			break;
		ret->len = c->len;
		/* sock_fprog has no const; seccomp(2) only reads the program. */
		ret->filter = (struct sock_filter *)c->insns;
		return 0;
	}
	return hutch_err_set(err, -EINVAL, "no seccomp program for network mode %d", (int)mode);
}

/*
 * Install prog in the calling process (init, once): no allocation, no
 * locks, only two syscalls. Speculative-store-bypass mitigation stays on
 * (no SECCOMP_FILTER_FLAG_SPEC_ALLOW); the child is single-threaded, so no
 * TSYNC either.
 */
int hutch_seccomp_load(const struct sock_fprog *prog)
{
	if (!prog || !prog->filter || prog->len == 0)
		return -EINVAL;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0)
		return -errno;
	if (sys_seccomp(SECCOMP_SET_MODE_FILTER, 0, (void *)prog) < 0)
		return -errno;
	return 0;
}

/*
 * Child side, before execve(): fail closed unless the filter and
 * no_new_privs are in place (inherited from init). Two syscalls instead of
 * a seccomp(2) load per command, which costs the kernel a BPF translation,
 * a JIT and the action-cache emulation of every syscall number each time.
 */
int hutch_seccomp_check_inherited(void)
{
	if (prctl(PR_GET_SECCOMP, 0L, 0L, 0L, 0L) != SECCOMP_MODE_FILTER)
		return -ENOTRECOVERABLE;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0L, 0L, 0L, 0L) != 1)
		return -ENOTRECOVERABLE;
	return 0;
}
