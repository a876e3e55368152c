/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An OCI container's own pid namespace, nested in the sandbox's, whose
 * PID 1 is the container's main process (runc's contract; critest's
 * ContainerPID): made at create, handed the main process at start.
 */
#ifndef HUTCH_INIT_PIDNS_H
#define HUTCH_INIT_PIDNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

#include "error.h"
#include "launch.h"

struct hutch_init_nest {
	pid_t pid;   /* the inner PID 1, as init sees it; 0: no nested namespace */
	int sock;    /* to it until the main process is handed over, else -EBADF */
	int proc_fd; /* a detached proc of the inner namespace, for the root's /proc */
};

/*
 * In init, while it still holds every capability of its user namespace
 * and before the root is built: a detached proc of init's namespace for
 * proctree.c, the nested namespace and its PID 1 (sp and seccomp: what it
 * restricts itself with and runs the main process by). 0 or -errno with
 * err set.
 */
int hutch_init_nest_pidns(struct hutch_init_nest *nest, const struct hutch_init_spawner *sp,
                          const struct sock_fprog *seccomp, struct hutch_err *err);

/* The main process's SPAWN (body, its stdio and extra fds, not closed)
 * forwarded to the inner PID 1, once: its pid, or -errno. */
pid_t hutch_init_nest_start(struct hutch_init_nest *nest, uint64_t id, const char *body, size_t len,
                            const int stdio[3], const int *extra, size_t nextra);

#endif
