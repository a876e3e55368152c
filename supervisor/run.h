/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's main loop (run.c). */
#ifndef HUTCH_RUN_H
#define HUTCH_RUN_H

struct sup;

/* Serve the sandbox until it has ended and its last answers are sent.
 * Returns 0 or -errno. */
int hutch_sup_run(struct sup *s);

#endif
