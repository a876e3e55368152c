/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating a sandbox from the CLI: records its state, forks a detached
 * supervisor that builds it, and waits until it is ready or has failed.
 */
#ifndef HUTCH_SANDBOX_H
#define HUTCH_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "error.h"
#include "hooks.h"
#include "state.h"

struct hutch_created {
	char id[HUTCH_ID_LEN + 1];
	struct hutch_paths paths;
	int64_t created_at, expires_at;
	/* The hand-over: the supervisor keeps the sandbox only once its
	 * creator acknowledged the id (hutch_created_ack()); if this fd closes
	 * first (the creator was interrupted, killed), it deletes it. */
	int handover_fd;
	/* Its supervisor: a pidfd (-EBADF: none) and its pid. A run's waits
	 * on the hand-over (its stream, its end) end with its death, as the
	 * create's answer does (answer.h): a process it forked may hold the
	 * socket's other end after it died. Closed with the hand-over unless
	 * kept for a run; a copy sent to another process carries neither. */
	int sup_pidfd;
	pid_t sup_pid;
	/* hutch_sandbox_create_run(): the command went before the answer
	 * (its stream is the caller's; hutch_created_sent_run() then, not
	 * hutch_created_ack_run()). */
	bool command_sent;
};

/* The creator has the id (printed, or kept): the sandbox is handed over.
 * A CLI calls it after it wrote the id out, with SIGINT and SIGTERM
 * blocked since the answer came (hutch_sandbox_create() blocks them; this
 * restores the mask). -EPIPE: the supervisor is gone. */
int hutch_created_ack(struct hutch_created *c);
/* The same for `hutch run`: the sandbox is handed over to this process
 * and lives as long as the socket (kept in c->handover_fd): the supervisor
 * deletes it when the socket says so (hutch_created_end_run()) or closes
 * (this process died, even by SIGKILL). Saves run's DELETE / (a connection
 * and a request of the supervisor's, a round trip). -EPIPE: the
 * supervisor is gone (the socket closed).
 * stream_fd >= 0 (one end of a socketpair, kept by the supervisor): the
 * command goes with the acknowledgement ("E"), one round trip instead of
 * a connection to the API and POST /exec: the caller writes the request
 * on its end (hutch_api_exec_stream() reads it), and its frames follow as
 * on POST /exec's upgraded connection. */
int hutch_created_ack_run(struct hutch_created *c, int stream_fd);
/* The run's command went with the create (c->command_sent): the
 * hand-over is over, the socket kept as after hutch_created_ack_run(). */
void hutch_created_sent_run(struct hutch_created *c);
/* Delete a run's sandbox and wait until it is gone: 0, or -EPROTO when
 * the supervisor said something else, -EPIPE without a socket (the caller
 * then deletes it the ordinary way); -ESRCH when its supervisor died
 * before the sandbox was gone (c->sup_pidfd), err saying so and whether
 * what it left was removed (as gc does). Closes the socket and pidfd. */
int hutch_created_end_run(struct hutch_created *c, struct hutch_err *err);
/* The creator gives the sandbox up before the hand-over (hutch fork when a
 * later fork failed): its supervisor deletes it. */
void hutch_created_drop(struct hutch_created *c);

/* Needs root. On success the sandbox is ready for commands (its setup
 * script and on_create hook have run). When a setup step failed, returns
 * -ECANCELED with err set and *ret_setup filled (ret_setup may be NULL).
 * progress_fd >= 0: the setup steps' output is copied there as it comes
 * (create --progress); -1: not shown. */
int hutch_sandbox_create(struct hutch_config *cfg, const char *runtime_dir,
                         struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                         int progress_fd, struct hutch_err *err);
/* The same for hutch run with its command made ready before
 * (stream_fd, hutch_created_ack_run()'s): sent with the create, so the
 * supervisor starts it in the turn the sandbox becomes ready, first (before
 * the "ready" answer), with no round trip to the caller; ret->command_sent says it went (not: the
 * acknowledgement carries it). A SIGINT or SIGTERM during the create then
 * no longer keeps the command from starting: the caller deletes the
 * sandbox at once ("D"), which kills it. */
int hutch_sandbox_create_run(struct hutch_config *cfg, const char *runtime_dir, int stream_fd,
                             struct hutch_created *ret, struct hutch_setup_failure *ret_setup,
                             int progress_fd, struct hutch_err *err);
/* The same for a container (container.h): its root, mounts and main
 * process; ct stays the caller's and must outlive the call (the
 * supervisor has its own copy of the memory). ct may be NULL. */
struct hutch_container;
int hutch_sandbox_create_container(struct hutch_config *cfg, struct hutch_container *ct,
                                   const char *runtime_dir, struct hutch_created *ret,
                                   struct hutch_setup_failure *ret_setup, int progress_fd,
                                   struct hutch_err *err);

/* The caller's fds (n of them, -1s skipped) that the supervisors of its
 * creates from now on close as they start: hutch fork's creators' sockets
 * (cli/fork-creators.c), which a supervisor, forked from the creator and
 * living on, would otherwise hold open for its whole life (a creator's
 * end kept open after the creator: its collector would wait on it for
 * nothing). fds is the caller's, kept while it creates; NULL, 0: none. */
void hutch_sandbox_not_inherited(const int *fds, size_t n);

/* Remove host network state (links, the nftables table, the forwarding
 * switch) that no live sandbox uses. */
int hutch_sandbox_net_gc(struct hutch_err *err);

#endif
