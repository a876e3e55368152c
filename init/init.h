/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init: PID 1 of a sandbox. Child side of clone(): finishes the namespaces,
 * builds the root, then serves the supervisor's spawn and kill requests,
 * reaps every process and reports the exits of the commands it started.
 */
#ifndef HUTCH_INIT_H
#define HUTCH_INIT_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"
#include "netpolicy.h"
#include "rootfs.h"

#define HUTCH_APP_UID 1000
#define HUTCH_APP_GID 1000

struct hutch_init_params {
	int sock;             /* SOCK_SEQPACKET to the supervisor */
	const char *hostname; /* NULL: a pod's uts namespace, joined */
	struct hutch_rootfs_config rootfs;
	/* Made by the supervisor before clone; NULL: a pod's network
	 * namespace, joined (supervisor/pod.c), which init leaves alone. */
	const struct hutch_net_plan *net;
	/* The network namespace is init's to make (the clone made none):
	 * unshared and set up before GO, while the supervisor writes the id
	 * maps and waits for the disk (hutch_net_plan_init_only()). */
	bool net_early;
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
	/* v1: the cgroups are made after the clone (supervisor/setup.c) and
	 * come before GO (HUTCH_MSG_CGROUPS): joined then, before anything
	 * runs in the sandbox; a GO without them fails the setup. */
	bool cgroups_late;
	/* v1: the commands' freezer cgroup: its "tasks" (each command joins)
	 * and "freezer.state" (thawed when the supervisor dies); -1 if none.
	 * With cgroups_late, the numbers CGROUPS's last two fds are placed at. */
	int cmds_tasks_fd, cmds_state_fd;
	bool change_lists; /* keep change lists (changes.h): the sandbox's change_lists */
};

/* Child side; never returns. */
__attribute__((noreturn)) void hutch_init_main(const struct hutch_init_params *p);

/*
 * init's request handling (SPAWN, KILL, CONNECT, the exits it reports)
 * behind a thin seam over the syscalls only pid 1 of a sandbox can make
 * (as youki's syscall trait): hutch_init_main() serves with the real ones;
 * tests/unit/test_init.c drives the same handling over a socketpair with
 * fakes (struct hutch_init_sys, launch.h), as an ordinary process; each
 * op gets the ud given to hutch_init_server_new().
 */
struct hutch_init_server;
/* A server of the supervisor's requests on sock (SOCK_SEQPACKET, not
 * owned) that makes its syscalls through sys; NULL if out of memory. */
struct hutch_init_server *hutch_init_server_new(int sock, const struct hutch_init_sys *sys,
                                                void *ud);
void hutch_init_server_free(struct hutch_init_server *srv);
/* Receive one message and handle it: 0 (a broken message is dropped), 1
 * when the supervisor hung up, -errno when the socket failed. */
int hutch_init_server_message(struct hutch_init_server *srv);
/* Reap what has exited; report the exits of the commands it started. */
void hutch_init_server_reap(struct hutch_init_server *srv);

#endif
