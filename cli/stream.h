/* SPDX-License-Identifier: Apache-2.0 */
/* A command run with its output streamed (hutch run, exec); see stream.c. */
#ifndef HUTCH_STREAM_H
#define HUTCH_STREAM_H

struct hutch_cli_args;

/* SIGINT and SIGTERM are recorded, not fatal, from now on (a run or exec
 * then ends its command only). */
void hutch_cli_catch_interrupts(void);
/* The signal caught since, 0 if none. */
int hutch_cli_interrupted(void);
/* Run argv (NULL-terminated) in the sandbox behind sock with a's --cwd,
 * --env, --timeout, --interactive (stdin streamed); returns the command's exit code, or
 * hutch's (cli.h) after printing why. */
int hutch_cli_stream_command(const char *sock, char **argv, const struct hutch_cli_args *a);
/* Print an API error answer's message; returns the exit code of its
 * HTTP status (410: 66, 400/413: 64, else 70). */
int hutch_cli_api_error(long status, const char *body);

#endif
