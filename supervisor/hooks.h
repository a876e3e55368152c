/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Setup script and lifecycle hooks (DESIGN §1), run inside the sandbox by
 * the supervisor's own command machinery, as appuser in /workspace:
 *
 *   ready:  setup_script (bounded by setup_script_timeout_seconds), then
 *           on_create (same bound); only then is "ready" written to the
 *           creating CLI. A failure or timeout deletes the sandbox and the
 *           CLI gets a struct hutch_setup_failure (exit status, output tail).
 *   end:    on_destroy at DELETE /, SIGTERM and TTL expiry, before any
 *           process is killed, bounded by HUTCH_ON_DESTROY_SECONDS; teardown
 *           proceeds whatever it does. Its result is appended to the
 *           tombstone $RT/.gone/<id> as a second line "on_destroy {json}".
 *
 * Each step's result (exit code, duration, last bytes of its output) is kept
 * for GET /status under "hooks".
 */
#ifndef HUTCH_HOOKS_H
#define HUTCH_HOOKS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

struct sup;
struct hutch_err;
struct hutch_buf;

#define HUTCH_ON_DESTROY_SECONDS 30
#define HUTCH_HOOK_TAIL          2048 /* bytes of output kept per step */
/* The setup script's and on_create's output as it comes, in the sandbox's
 * state directory for its life, at most HUTCH_SETUP_LOG_MAX bytes; the
 * creating CLI shows it while it waits (create --progress). */
#define HUTCH_SETUP_LOG     "setup.log"
#define HUTCH_SETUP_LOG_MAX (1u << 20)

/* Why a setup step failed (the supervisor writes it after the error). */
struct hutch_setup_failure {
	char id[HUTCH_ID_LEN + 1]; /* the deleted sandbox's id, for the message */
	char step[16];             /* "setup_script" or "on_create" */
	int exit_code;             /* -1 if it did not exit by itself */
	int signal;                /* 0 or the signal that killed it */
	bool timed_out;
	char tail[2049]; /* last bytes of its output (stdout and stderr merged) */
	bool shown;      /* set by the CLI: all of the output was shown (--progress) */
};

/* The event loop is up: start the setup steps, or report ready at once. */
void hutch_hooks_begin(struct sup *s);
/* setup.log, for the supervisor to write (s->hooks.log_fd) and the CLI to
 * read as it grows (*ret_read), made before the fork so that nothing of it
 * is lost; only when there are setup steps. */
int hutch_hooks_open_log(struct sup *s, int *ret_read, struct hutch_err *err);
/* The loop reports ready (or the setup failure) on result_fd, the
 * creator's socket, once the setup steps have run. */
void hutch_hooks_report_to(struct sup *s, int result_fd);
/* Whether a run's command that came with the create ("E" on result_fd,
 * the creator's socket) may start before READY: nothing is to run
 * before it (no setup steps, a restore), nothing must be attributed to it
 * (the egress log: network none only) or hold it (a pool, a container's
 * start, a pod). */
bool hutch_hooks_can_run_early(struct sup *s, int result_fd);
/* Then, with the loop open (hutch_sup_loop_open()): the command started,
 * its SPAWN queued for init, which reads it as it sends READY; "ready"
 * then finds it started. Otherwise it waits for "ready" as before. */
void hutch_hooks_run_early(struct sup *s, int result_fd);
/* A run's command started before READY: once READY came, what init's
 * socket and the command's pipes hold is read (the loop's callbacks, not a
 * wait), before the steps after READY whose only reader is another client
 * (the API's socket, the signals' and the TTL's fds, state.json's
 * "running"). True when the run is over already (its status relayed, its
 * end begun: the sandbox ends in the turn that answers "ready"), and
 * those steps are left out; false for any other sandbox, without a
 * syscall. */
bool hutch_hooks_run_over(struct sup *s);
/* A warm run claimed the sandbox on fd (exec.sock's connection, taken):
 * fd is its hand-over socket from now on, as a cold run's after "R"
 * (supervisor/sandbox.h): "D" or its end deletes the sandbox, its closing
 * says the sandbox is gone. 0, or -errno (fd closed; on -ENOMEM the
 * sandbox is deleted). */
int hutch_hooks_run_claimed(struct sup *s, int fd);
/* The sandbox is closing: start on_destroy if there is one and the
 * sandbox is ready; true if started (the end then waits for it). */
bool hutch_hooks_destroy_start(struct sup *s);
/* The on_destroy deadline fired, or init died: it cannot finish. */
void hutch_hooks_on_deadline(struct sup *s);
/* After each loop iteration: what a step's end decided, for the
 * lifecycle to carry out (hooks never end the sandbox themselves). */
enum hutch_hooks_verdict {
	HUTCH_HOOKS_CONTINUE,
	HUTCH_HOOKS_FAILED,       /* a setup step failed: delete, no tombstone */
	HUTCH_HOOKS_DESTROY_DONE, /* on_destroy is over: tear down */
};
enum hutch_hooks_verdict hutch_hooks_after_events(struct sup *s);
/* Append on_destroy's result to the tombstone (after the teardown). */
void hutch_hooks_record_destroy(struct sup *s);
/* The sandbox ended (any reason): a CLI still waiting gets an error. */
void hutch_hooks_sandbox_ended(struct sup *s);

#endif
