/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's answer to its creator (sandbox.c's create): "ready" or
 * the error, on a socket, read while the supervisor lives. Both sides:
 * the CLI reads it (hutch_answer_read()), bounded by a pidfd of the
 * supervisor (hutch_answer_pidfd()); a container's supervisor sends that
 * pidfd itself (hutch_answer_send_pidfd()).
 */
#ifndef HUTCH_ANSWER_H
#define HUTCH_ANSWER_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "hooks.h"

/* Creator's side. A pidfd of the supervisor pid: our child's (not reaped,
 * so its pid is still its), or (container) a grandchild's, received on fd
 * as its first message. -errno: none (the answer's EOF bounds the wait). */
int hutch_answer_pidfd(bool container, pid_t pid, int fd);
/* Supervisor's side, first thing (a container's): a pidfd of itself. */
void hutch_answer_send_pidfd(int result_fd);
/* HUTCH_TEST_SUPERVISOR_STOP set: a child holds result_fd (and nothing
 * else) for at most two minutes, and the supervisor stops itself. */
void hutch_answer_test_stop(int result_fd);
/* Creator's side: the answer of sandbox id (state dir dir) on fd, the
 * setup steps' output shown meanwhile (progress_fd >= 0, from log_fd).
 * 0 "ready"; else err's code, *ret_setup filled if a setup step failed.
 * A supervisor that died first (pidfd, or EOF): -EIO saying so, naming its
 * log, what it left reaped as gc would. */
int hutch_answer_read(const char *id, const char *dir, pid_t pid, int fd, int pidfd, int log_fd,
                      int progress_fd, struct hutch_setup_failure *ret_setup,
                      struct hutch_err *err);
/* The supervisor (pid, state dir dir) died (when: "during setup"): what
 * it left reaped as gc would, unless a process of it still holds the
 * sandbox's lock; -EIO with err saying which. */
int hutch_answer_died(const char *id, const char *dir, pid_t pid, const char *when,
                      struct hutch_err *err);
/* A run's end (hutch_created_end_run()): its socket's EOF, bounded by the
 * supervisor's life (pidfd, -1: none) as the answer is. 0: EOF; -EPROTO:
 * a byte came; -ESRCH: it died with the socket still open (a process it
 * forked holds the other end). */
int hutch_answer_wait_eof(int fd, int pidfd);

#endif
