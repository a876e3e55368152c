/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init: PID 1 of a sandbox. Child side of clone(): finishes the namespaces,
 * builds the root, then serves the supervisor's spawn and kill requests,
 * reaps every process and reports the exits of the commands it started.
 */
#ifndef HUTCH_INIT_H
#define HUTCH_INIT_H

#include <linux/filter.h>
#include <sys/types.h>

#include "netpolicy.h"
#include "rootfs.h"

#define HUTCH_APP_UID 1000
#define HUTCH_APP_GID 1000

struct hutch_init_params {
	int sock;             /* SOCK_SEQPACKET to the supervisor */
	pid_t supervisor_pid; /* to detect a parent that died before PDEATHSIG */
	const char *hostname; /* NULL: a pod's uts namespace, joined */
	struct hutch_rootfs_config rootfs;
	/* Made by the supervisor before clone; NULL: a pod's network
	 * namespace, joined (supervisor/pod.c), which init leaves alone. */
	const struct hutch_net_plan *net;
	const struct sock_fprog *seccomp; /* built by the supervisor before clone */
	/* A container's own profile, loaded on top of seccomp in each command
	 * spawned with HUTCH_SPAWN_EXTRA_FILTER (its main process), or NULL. */
	const struct sock_fprog *extra_seccomp;
	/* A container's terminal: open a pty during setup, its slave owned by
	 * this uid, send the master with CONSOLE, keep the slave for the
	 * HUTCH_SPAWN_HELD_TTY command; -1: none. */
	int console_uid;
	/* A container's sysctls of its own network and ipc namespaces,
	 * "key=value", written once the root is built; NULL-terminated, or NULL. */
	const char *const *sysctls;
	int cgroup_join_err; /* joining the cgroups right after clone failed: -errno */
	/* v1: the commands' freezer cgroup: its "tasks" (each command joins)
	 * and "freezer.state" (thawed when the supervisor dies); -1 if none. */
	int cmds_tasks_fd, cmds_state_fd;
};

/* Child side; never returns. */
__attribute__((noreturn)) void hutch_init_main(const struct hutch_init_params *p);

#endif
