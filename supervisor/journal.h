/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session journal's writer (the format: runtime/journal-format.h): one line
 * per API request (but for the passive /health and /status), written when
 * the request has ended and its command, if it started one, has exited; a
 * command that outlives its request (a background process) gets an "exit"
 * line of its own at its end naming the request's line ("of"). Each line:
 * time, caller (uid and pid from SO_PEERCRED, or "tcp": the executor's
 * listener), route, command line or file path (secrets= values replaced by
 * [secret NAME]; environments are never written), HTTP status, exit
 * status, duration.
 *
 * Bounded: a file grows to journal_max_bytes / 2, is then renamed
 * journal.1.jsonl (replacing the one before) and a new one starts with a
 * "rotated" line; so at most journal_max_bytes on disk, the oldest lines
 * dropped. journal_max_bytes 0: no journal. A write that fails stops the
 * journal (said once in the events log); the sandbox carries on.
 *
 * A request's record (struct hutch_jrec) is shared by the request (api.c)
 * and the commands it started (cmd.c): each holds a reference.
 */
#ifndef HUTCH_SUP_JOURNAL_H
#define HUTCH_SUP_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sup;
struct hutch_cmd_hook;
struct cmd;
struct hutch_jrec;

/* A request has started (its headers are in); uid -1: not a unix socket
 * peer (the executor's TCP listener). NULL: no journal (off, failed, or
 * out of memory), which every function below accepts. */
struct hutch_jrec *hutch_journal_request_begin(struct sup *s, const char *method, const char *url,
                                               int uid, int pid);
/* The request has ended with this HTTP status (0: none sent); drops the
 * request's reference. */
void hutch_journal_request_end(struct hutch_jrec *jr, unsigned status);
/* The command engine's hook (cmd.h; api.c sets it with the request's
 * record as hook_ud): a command started for the request takes a reference
 * and gives its command line (a file builtin's: its operation and path);
 * at its end its exit, or nothing if it is freed before it ran. */
extern const struct hutch_cmd_hook hutch_journal_cmd_hook;
/* hutch diff --since SEQ: the id of the first command that the request on
 * journal line seq started (a run, exec or process line of the last 4,096):
 * 0; -ENOENT none such, -ENODATA no journal. */
int hutch_journal_command_of(struct sup *s, uint64_t seq, uint64_t *ret_cmd);
/* The command line (a file builtin's operation) of the request that
 * started c, or NULL (no journal, or c started outside a request). */
const char *hutch_journal_cmd_line(const struct cmd *c);
/* The sandbox has ended: the files move beside the tombstone
 * ($RT/.gone/<id>.journal, .journal.1), still open for the last requests'
 * lines. */
void hutch_journal_keep(struct sup *s);
/* The supervisor is done: the "end" line, and the file is closed. */
void hutch_journal_close(struct sup *s);

#endif
