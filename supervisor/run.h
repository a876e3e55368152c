/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's main loop (run.c). */
#ifndef HUTCH_RUN_H
#define HUTCH_RUN_H

struct sup;

/* Serve the sandbox until it has ended and its last answers are sent.
 * Returns 0 or -errno. */
int hutch_sup_run(struct sup *s);

struct hutch_cgroup;

/* The loop and the command engine opened before setup ends (a run's
 * command queued for init while it builds the root: hooks.c), on init's
 * socket and cgroup, which setup hands to s as they are; hutch_sup_run()
 * then keeps them. 0 or -errno. */
int hutch_sup_loop_open(struct sup *s, int init_sock, struct hutch_cgroup *cg);

#endif
