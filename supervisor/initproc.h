/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init's process as the supervisor holds it: struct sup's init_sock,
 * pidfd, init_pid and mntns_fd are written here only. setup.c starts init
 * and, when setup ends, hands its pid, pidfd and socket over, then holds
 * its mount namespace; lifecycle.c reaps it and lets the namespace go.
 */
#ifndef HUTCH_INITPROC_H
#define HUTCH_INITPROC_H

#include <sys/types.h>

struct sup;

/* init's process as setup makes it: setup's own until setup ends. */
struct hutch_initproc {
	pid_t pid; /* 0: not cloned */
	int pidfd; /* or < 0 */
	int sock;  /* the supervisor's end of init's socket, or < 0 */
};

/* Setup ended (also when it failed): init's pid, pidfd and the
 * supervisor's end of its socket are the sandbox's from now on (none
 * when p->pid is 0). */
void hutch_initproc_started(struct sup *s, const struct hutch_initproc *p);
/* Keep a reference to init's mount namespace: when init dies, the kernel
 * then does not unmount its tree (and wait for an expedited RCU grace
 * period) before the death is seen. Best effort: without it, init's exit
 * does that work. */
void hutch_initproc_hold_mntns(struct sup *s);
/* SIGKILL to init (its whole pid namespace), not waited for, unless an
 * on_destroy hook must run in it first: the kernel tears the namespaces
 * down while the caller finishes its turn (a run's last lines);
 * hutch_initproc_reap() waits for it. */
void hutch_initproc_kill_unless_hook(struct sup *s);
/* SIGKILL to init now, whatever runs in it (the teardown's first act: it
 * dies while the sandbox is retired); hutch_initproc_reap() waits for it. */
void hutch_initproc_kill_now(struct sup *s);
/* Kill init (its whole pid namespace) and reap it; init_pid is 0 after. */
void hutch_initproc_reap(struct sup *s);
/* The hold of hutch_initproc_hold_mntns() let go: the sandbox's files and
 * mounts go now (teardown's second phase). */
void hutch_initproc_release_mntns(struct sup *s);

#endif
