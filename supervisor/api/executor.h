/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cloud executor's contract (Koyeb's sandbox executor: server
 * koyeb/sandbox-container, client koyeb/koyeb-python-sdk), served at the
 * unprefixed paths of the unix socket and, with --executor-port, on a TCP
 * listener behind a bearer secret. The handlers (executor-run.c,
 * executor-files.c, executor-procs.c) answer exactly what the executor
 * answers: its fields, its status codes, its plain-text errors, its SSE
 * events; hutch's richer results stay in the native API under /v1/
 * (docs/api.md has the endpoint table). This header holds what they share:
 * reading a body as the executor's Go server decodes it, writing JSON
 * text the way it encodes it, and the TCP listener (executor.c).
 */
#ifndef HUTCH_EXECUTOR_H
#define HUTCH_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "http.h"
#include "jsonw.h"
#include "util.h"

struct sup;
struct hutch_config;

/* The executor's plain-text 400 for a body it cannot decode. */
#define HUTCH_EXEC_INVALID "Invalid request"

/* The body as Go's json.Decoder reads it into the executor's request
 * structs: one JSON value; an object or null (every field empty). Anything
 * else is -EINVAL: the caller answers 400 HUTCH_EXEC_INVALID. *ret is NULL
 * for null. The object is made what Go's decoder leaves in the struct
 * (hutch_exec_go_object() with fold): only the named fields stay, each
 * once. */
int hutch_exec_body(const struct request *r, const char *const *fields, cJSON **ret);
/* The contract's one rule for a key given twice (docs/api.md): Go's
 * encoding/json, the last one wins. Go decodes every member in order into
 * the field it names, so o (an object) is rewritten to hold each name
 * once with its last value; two objects under one name merge (Go fills the
 * map it already made: {"env": {"A": "1"}, "env": {"B": "2"}} is both),
 * keys within them exact (a map's keys), also last wins; a null resets.
 * With fold, a top-level name matches a field without regard to ASCII case
 * (Go's struct fields) and names not in fields (NULL-terminated) are
 * dropped as Go ignores them. Two values of different JSON types under one
 * name are -EINVAL: one of them does not fit the field, and Go's decoder
 * reports that after the whole body. -ENOMEM. */
int hutch_exec_go_object(cJSON *o, const char *const *fields, bool fold);
/* A string field: absent or null -> "" (Go's zero value); another type
 * sets *bad. */
const char *hutch_exec_string(const cJSON *o, const char *key, bool *bad);
/* Answer a JSON text (what Go's json.Encoder writes: the value and a
 * newline), Content-Type application/json. */
enum MHD_Result hutch_exec_respond_raw(struct MHD_Connection *conn, unsigned status,
                                       const char *text, size_t len);
/* The same for a cJSON value (consumed). */
enum MHD_Result hutch_exec_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j);
/* Go's error text of a failed file system call: "OP PATH: no such file or
 * directory" (strerror with a lower-case first letter, as Go's syscall
 * table words them). */
void hutch_exec_path_error(char *buf, size_t size, const char *op, const char *path, int code);

/* A command of the contract (/run, /run_streaming, /start_process):
 * {"cmd", "cwd", "env"} made into a native body ({"argv": ["/bin/sh",
 * "-c", cmd], "cwd", "env"}) that the native parser validates, and the
 * executor's check that "cwd" is a directory before anything runs. */
struct hutch_exec_cmd {
	char *body;
	size_t len;
	bool empty;        /* "cmd" was empty or missing */
	char *cwd;         /* as given; NULL: none */
	struct cmd *check; /* test -d CWD, run by the sandbox's shell as appuser */
};
/* -EINVAL: answer 400 HUTCH_EXEC_INVALID. */
int hutch_exec_cmd_parse(const struct request *r, struct hutch_exec_cmd *x);
/* Run the cwd check (on the first call) and wait for it: false while it
 * runs (r suspended) or when it failed (r answered 400 "Invalid working
 * directory: CWD" or 500); true once the command may start. */
bool hutch_exec_cmd_checked(struct request *r, struct hutch_exec_cmd *x);
void hutch_exec_cmd_done(struct hutch_exec_cmd *x);
/* The executor's exit code: the exit status, -1 after a signal (Go). */
int hutch_exec_code(int wait_status);

/* The executor's streams go line by line: hand each complete line of b
 * (with its "\n") to emit and keep the rest; with end, the rest too. A line
 * of more than max bytes goes in pieces of max. */
void hutch_exec_lines(struct hutch_buf *b, bool end, size_t max,
                      void (*emit)(void *ud, const char *p, size_t n), void *ud);

/* The TCP listener (executor.c). Bind the address of --executor-port and
 * make the secret; returns the listening fd or -errno with err filled
 * ("address in use" names the address). */
int hutch_executor_listen(struct sup *s, struct hutch_err *err);
/* Store the secret where only the creator reads it (executor.secret in the
 * sandbox's directory, 0600) for create --json to print once. */
int hutch_executor_publish(struct sup *s, struct hutch_err *err);
/* The request carries "Authorization: Bearer <the secret>" (compared in
 * constant time). */
bool hutch_executor_authorized(struct sup *s, struct MHD_Connection *conn);
/* {"address", "port", "url"} of the listener of a sandbox of cfg on port
 * (s->executor.port) for /status and state.json, or NULL when there is
 * none (port 0: not listening yet, as during setup). Never the secret. */
cJSON *hutch_executor_json(const struct hutch_config *cfg, uint16_t port);
/* The same object written as key's value, or nothing (state.json, without
 * libcjson). */
void hutch_executor_write(const struct hutch_config *cfg, uint16_t port, const char *key,
                          struct hutch_jw *w);

#endif
