/* SPDX-License-Identifier: Apache-2.0 */
/* A command run with its output streamed (hutch run, exec); see stream.c. */
#ifndef HUTCH_STREAM_H
#define HUTCH_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "util.h"

struct hutch_cli_args;
struct hutch_paths;

/* run --json, exec --json (run-json.c): the output kept, not written out,
 * and the exit frame's result. */
struct hutch_cli_capture {
	struct hutch_buf out, err;
	cJSON *result; /* the exit frame's JSON, NULL until it came */
};
#define HUTCH_CLI_CAPTURE_DEFAULT (4u << 20) /* the default --max-output */
/* Keep at most max_bytes of each stream. */
void hutch_cli_capture_init(struct hutch_cli_capture *c, uint64_t max_bytes);
void hutch_cli_capture_done(struct hutch_cli_capture *c);
/* The sandbox's max_output_bytes (its state.json), else the default. */
uint64_t hutch_cli_capture_limit(const struct hutch_paths *p);
/* Print the result with the output as one JSON object; 0 or an exit
 * code. */
int hutch_cli_capture_print(struct hutch_cli_capture *c, const char *sandbox_id);

/* SIGINT and SIGTERM are recorded, not fatal, from now on (a run or exec
 * then ends its command only). */
void hutch_cli_catch_interrupts(void);
/* The signal caught since, 0 if none. */
int hutch_cli_interrupted(void);
/* Run argv (NULL-terminated) in the sandbox behind sock with a's --cwd,
 * --env, --timeout, --interactive (stdin streamed); returns the command's exit code, or
 * hutch's (cli.h) after printing why. cap: NULL, or where the output and
 * the result go instead of stdout and stderr (--json). */
int hutch_cli_stream_command(const char *sock, char **argv, const struct hutch_cli_args *a,
                             struct hutch_cli_capture *cap);
/* The same for hutch run, without the API: the command and its frames go
 * on a socketpair whose other end ack(ud, fd) hands the supervisor with
 * the run's acknowledgement (supervisor/sandbox.h's "E"), or ack(ud, -1)
 * acknowledges alone when nothing is to run. ack returns 0 when it was
 * sent with fd, else the exit code to return at once (it said why).
 * pidfd: the supervisor's (-1: none), whose death ends the wait for the
 * stream's end (a process it forked may hold the socket), as lost. */
int hutch_cli_stream_run(const char *sock, int pidfd, char **argv, const struct hutch_cli_args *a,
                         struct hutch_cli_capture *cap, int (*ack)(void *ud, int fd), void *ud);
/* (exec-body.c) hutch run's command made ready before its sandbox: the request (as
 * hutch_cli_stream_run() writes it) whole on a socketpair, whose end
 * *ret_theirs goes with the create (hutch_sandbox_create_run(): the
 * supervisor starts the command as soon as the sandbox is ready, no round
 * trip to us) and *ret_ours is for hutch_cli_run_relay(). 0, or 1 when it
 * cannot go before (-t sets the terminal up first; a request larger than
 * the socket takes at once): hutch_cli_stream_run() then, after the
 * create. */
int hutch_cli_run_prepare(char **argv, const struct hutch_cli_args *a, int *ret_ours,
                          int *ret_theirs);
/* The command's frames relayed on our end of it; its exit code, or
 * hutch's after printing why (cap as for hutch_cli_stream_command();
 * pidfd as for hutch_cli_stream_run()). */
int hutch_cli_run_relay(const char *sock, int fd, int pidfd, const struct hutch_cli_args *a,
                        struct hutch_cli_capture *cap);
/* The command's request (POST /exec's body, hutch run's on its hand-over)
 * as JSON text (malloc'ed, NULL when out of memory): argv (NULL: -it's
 * login shell), a's --cwd, -t's size and TERM, -e, --timeout, and with
 * brief "exit_frame": "brief" (the end as a RESULT frame; POST /exec asks
 * for it with a header instead, which an older supervisor ignores). */
#define HUTCH_CLI_BODY_BRIEF (1u << 0) /* the exit as a RESULT frame */
#define HUTCH_CLI_BODY_OWN   (1u << 1) /* for a socket of ours: the JSON-free form */
char *hutch_cli_exec_body(char **argv, const struct hutch_cli_args *a, unsigned flags,
                          size_t *ret_len);
/* The caller's terminal's size (stdin's), false if unknown. */
bool hutch_cli_window_size(uint16_t *rows, uint16_t *cols);
/* Print an API error answer's message; returns the exit code of its
 * class: the one its code names ("not_found": 65), else its HTTP status's
 * (404: 65, 410: 66, 501: 69, 400: 64, 409 and 413: 70; another: 70),
 * from base/error.c's one table. */
int hutch_cli_api_error(long status, const char *body);
/* One request to the sandbox at sock (body: JSON text or NULL): 0 with
 * *ret the answer's JSON (NULL if it is none) when its status is want;
 * else prints why (hutch_cli_lost(), hutch_cli_api_error()) and returns
 * the exit code. */
int hutch_cli_call(const char *sock, const char *method, const char *path, const char *body,
                   long want, cJSON **ret);

#endif
