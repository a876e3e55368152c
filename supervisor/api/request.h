/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing and validation of API request bodies (pure, unit-tested). Bodies
 * come from any local client and are treated as hostile: bounded, strictly
 * typed, unknown fields refused so that typos surface.
 */
#ifndef HUTCH_REQUEST_H
#define HUTCH_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmdenv.h" /* HUTCH_WORKSPACE, the default environment */
#include "error.h"

struct hutch_run_req {
	char **argv; /* NULL-terminated */
	char **envp; /* NULL-terminated "K=V", defaults merged in */
	char *cwd;   /* absolute */
	char *stdin_data;
	size_t stdin_len;
	double timeout;      /* seconds, 0 = none */
	uint64_t max_output; /* bytes per stream, 0 = sandbox default */
	bool base64;         /* "encoding": "base64": stdin and output as base64 */
	bool tty;            /* "tty": {"rows", "cols"}: on a pseudo-terminal (/exec) */
	bool stdin_open;     /* /start_process "stdin": true: kept open (/process_stdin) */
	uint16_t rows, cols; /* its size, 0: the kernel's default */
	bool brief;          /* /exec "exit_frame": "brief": a RESULT frame, not EXIT's JSON */
};

/* Parse a /run or /run_streaming body; its env is merged over base_env
 * (the sandbox's, NULL: hutch_default_env). */
int hutch_run_req_parse(const char *body, size_t len, const char *const *base_env,
                        struct hutch_run_req *ret, struct hutch_err *err);
/* Parse a /exec body (hutch run's on its hand-over too): /run's fields
 * and "exit_frame" ("json" or "brief"). */
int hutch_exec_req_parse(const char *body, size_t len, const char *const *base_env,
                         struct hutch_run_req *ret, struct hutch_err *err);
/* Parse the JSON-free form of a /exec body (base/frame.h, HUTCH_REQ_MAGIC:
 * hutch's CLI's, on its own sockets only): what it carries is checked and
 * refused as the JSON would be, with the same messages. */
int hutch_exec_req_parse_bin(const char *body, size_t len, const char *const *base_env,
                             struct hutch_run_req *ret, struct hutch_err *err);
/* Parse a /start_process body: cmd, argv, cwd, env and stdin (a boolean). */
int hutch_start_req_parse(const char *body, size_t len, const char *const *base_env,
                          struct hutch_run_req *ret, struct hutch_err *err);
void hutch_run_req_done(struct hutch_run_req *r);

#endif
