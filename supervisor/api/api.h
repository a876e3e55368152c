/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's HTTP/1.1 + JSON API (docs/api.md), served by
 * libmicrohttpd inside the supervisor's event loop; what the rest of the
 * supervisor calls of it.
 */
#ifndef HUTCH_API_H
#define HUTCH_API_H

#include <stdbool.h>

#include "error.h"

struct sup;

/* Load the HTTP server library now (mhd.h), ignoring a failure that
 * hutch_api_start() then reports: called while init builds the root, so
 * the load overlaps with it and init (already cloned) never maps it. */
void hutch_api_preload(void);
int hutch_api_start(struct sup *s, struct hutch_err *err);
/* A container's (no executor port): only the socket before ready, which
 * queues connections; libmicrohttpd, its ~5 ms load off the ready path,
 * by hutch_api_start_late(), on the socket's first connection
 * (s->w_listen, run.c, armed right after ready): a container
 * nobody asks through hutch's API (a CRI pod's) never maps
 * libmicrohttpd and the TLS libraries it links, about 250 kB of private
 * pages per supervisor (docs/kubernetes.md, density). */
int hutch_api_listen(struct sup *s, struct hutch_err *err);
/* Whether the API starts on demand: a container's, and hutch run's
 * (config.h's api_on_demand), unless an executor port is served. */
bool hutch_api_on_demand(const struct sup *s);
/* The API at create: the kind's way, the socket alone when on demand,
 * else hutch_api_start(). */
int hutch_api_open(struct sup *s, struct hutch_err *err);
int hutch_api_start_late(struct sup *s, struct hutch_err *err);
void hutch_api_stop(struct sup *s);
/* Add libmicrohttpd's epoll fd to the loop. */
int hutch_api_watch(struct sup *s);
/* Sandbox going away: answer every waiting request. */
void hutch_api_sandbox_ended(struct sup *s);
void hutch_api_run(struct sup *s);
/* End every upgraded exec stream (api-exec.c): their commands are killed,
 * their sockets handed back to libmicrohttpd, before it stops. */
void hutch_api_exec_close_all(struct sup *s);
/* hutch run's command on fd, a socket of its own (exec-run.c,
 * supervisor/sandbox.h's "E"): read, started and streamed as POST
 * /exec's; fd is ours either way. -ENOMEM: not taken. */
int hutch_api_exec_stream(struct sup *s, int fd);
/* hutch exec's socket (exec-sock.c): exec.sock beside api.sock, where
 * each connection carries one command as hutch run's socket does (the
 * request's length and JSON body, then POST /exec's frames), no HTTP and
 * no libmicrohttpd connection. Listened on at create when the API starts
 * at once (hutch_api_open()), watched with it, closed before the streams
 * end at the stop; a stream whose request is not whole within
 * HUTCH_API_HEADER_TIMEOUT_MS ends (hutch_api_exec_expire(), with
 * hutch_api_run(); the loop's wait bounded by _timeout_ms(), -1: any),
 * and a listener out of fds or memory accepts again there. */
int hutch_api_exec_listen(struct sup *s, struct hutch_err *err);
int hutch_api_exec_watch(struct sup *s);
void hutch_api_exec_unlisten(struct sup *s);
void hutch_api_exec_expire(struct sup *s);
int hutch_api_exec_timeout_ms(struct sup *s);
/* How long the loop may sleep before libmicrohttpd needs hutch_api_run(). */
int hutch_api_timeout_ms(struct sup *s);

#endif
