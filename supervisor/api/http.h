/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One request of the API as every route handler sees it (struct request),
 * and what a handler does with it: answer JSON or an error, suspend the
 * connection while it waits and resume it, kill a command if the client
 * hangs up. api.c owns the request's life (created on its first
 * access-handler call, freed when libmicrohttpd completes it); the route
 * handlers (routes.h) fill and answer it.
 */
#ifndef HUTCH_HTTP_H
#define HUTCH_HTTP_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "loop.h"
#include "mhd.h"
#include "procs.h"
#include "sse.h"
#include "util.h"

/* libmicrohttpd's per-connection buffer: raw uploads reach us in pieces of
 * up to about half of it. libmicrohttpd maps it per connection and touches
 * all of it (it zeroes the pool), so its size is paid on every new
 * connection: measured on the 2-core VM, 1 MiB cost 3.7 ms per connection
 * (page faults) for 1.3-2 GB/s uploads; 256 KiB costs 0.86 ms for the same
 * ~2 GB/s; 64 KiB 0.34 ms but 1.1-1.5 GB/s. */
#define HUTCH_CONN_MEMORY (1u << 18)

/* Bound on the request headers (names and values): the connection buffer
 * above is large for uploads, not for headers. */
#define HUTCH_MAX_HEADERS (64u << 10)

/* How long a client may keep a connection without a request, and take
 * for a request's headers: from accepting the connection or answering its
 * previous request to the end of the headers (a deadline, not an idle
 * time, so a client sending a byte now and then cannot hold it longer).
 * Then the connection is closed. */
#define HUTCH_API_HEADER_TIMEOUT_MS 10000

/* How long a request's body or answer may make no progress (libmicrohttpd's
 * connection timeout). A request waiting for the sandbox (a command, a long
 * poll, a pipe) is suspended and not timed; a client that stops reading an
 * answer or sending a body for this long is cut off. */
#define HUTCH_API_IDLE_TIMEOUT_S 120

struct cmd;
struct hutch_err;
struct sup;
struct hutch_api_route;

struct request {
	struct sup *s;
	struct MHD_Connection *conn;
	const struct hutch_api_route *route; /* NULL: refused (unknown route) */
	struct hutch_buf body;               /* JSON routes: the whole body */
	bool too_large;
	bool complete; /* its body was read to the end */
	bool suspended;
	bool answered;
	struct cmd *cmd;             /* /run, /run_streaming */
	bool base64;                 /* /run: output as base64 ("encoding") */
	struct hutch_sse sse;        /* /run_streaming: events not yet sent */
	struct hutch_watch w_conn;   /* the client's socket while a command runs */
	struct cmd *hangup_cmd;      /* killed if the client hangs up */
	bool hung_up;                /* the client hung up while watched */
	struct request *next_waiter; /* DELETE / waiting for the teardown */
	bool counted;                /* in s->requests_open (idle activity) */
	struct hutch_proc_wait pw;   /* background-process routes (api-procs.c) */
	void *state;                 /* a handler's own state (raw file routes) */
	void (*state_free)(void *state);
	/* Refused before its handler (api.c): answered once the body is read,
	 * with refuse (an error's JSON) or refuse_text (the executor's plain
	 * text), the status hutch_api_status(refuse_cls, refuse_code). */
	enum hutch_errc refuse_cls; /* HUTCH_ERRC_NONE: not refused */
	const char *refuse_code;
	cJSON *refuse;
	const char *refuse_text;
	bool tcp;                /* came through the executor's TCP listener */
	struct hutch_jrec *jrec; /* its journal record (supervisor/journal.h), or NULL */
};

/* Fill a zeroed request of s on conn. */
void hutch_api_request_init(struct request *r, struct sup *s, struct MHD_Connection *conn);
void hutch_api_suspend(struct request *r);
/* DELETE /: r waits, suspended, for the teardown (s->waiters), which the
 * loop then starts (s->delete_pending); answered when the sandbox ended. */
void hutch_api_wait_end(struct request *r);
/* r is done: no longer waiting; the last of its route's waits gone
 * (waits_end: HUTCH_ROUTE_WAITS_END), no DELETE / is pending. */
void hutch_api_wait_done(struct request *r, bool waits_end);
void hutch_api_resume(struct request *r);
/* Queue j (consumed) as a JSON answer. */
enum MHD_Result hutch_api_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j);
/* Answer 200 text/event-stream whose body the content reader produces
 * (it suspends r when nothing is queued); r is then answered. */
enum MHD_Result hutch_api_respond_sse(struct request *r, MHD_ContentReaderCallback reader);
/* A content reader's work for a command's event stream (api-run.c):
 * queue_end(r) once the command is done, then the queued events; resumes
 * the command's output when there is room, suspends r when nothing is
 * queued. */
ssize_t hutch_api_sse_command(struct request *r, char *buf, size_t max,
                              void (*queue_end)(struct request *r));
/* conn's request is answered with status: its journal
 * line now, before the answer goes (api.c), so that a `hutch journal`
 * after the caller has its answer finds it. */
void hutch_api_journal_answered(struct MHD_Connection *conn, unsigned status);
/* Answer a body of len bytes with the Content-Type type. */
enum MHD_Result hutch_api_respond_buffer(struct MHD_Connection *conn, unsigned status,
                                         const char *type, const char *data, size_t len);
/* {"error": {"code": code, "message": msg}} (caller owns it). */
cJSON *hutch_api_error_json(const char *code, const char *msg);
/* The status of a refusal of class cls whose endpoint code is code:
 * hutch_errc_status() (base/error.c's tables: the class's, or HTTP's finer
 * one, 405 method_not_allowed, 429 too_many_processes, ...). Every error
 * answer of the API takes its status from here. */
unsigned hutch_api_status(enum hutch_errc cls, const char *code);
/* Refuse a request: its status hutch_api_status(cls, code), as
 * hutch_api_respond_err() answers an error that came up from below; code
 * is the endpoint's name for it (docs/api.md), NULL the class's own. A
 * handler that refuses says the class, not a status. */
enum MHD_Result hutch_api_refuse(struct MHD_Connection *conn, enum hutch_errc cls, const char *code,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same in the executor's form (Go's http.Error: text/plain, nosniff,
 * the text and a newline): its contract's words, the status still
 * hutch_api_status(cls, code); code is not sent. */
enum MHD_Result hutch_api_refuse_text(struct MHD_Connection *conn, enum hutch_errc cls,
                                      const char *code, const char *text);
/* A route's command c, started: while it runs r waits (suspended); once
 * it is done r is answered, with the 410 of a sandbox that ended
 * meanwhile. true: *ret is the handler's answer for now (waiting, or the
 * 410); false: c is done in a running sandbox and the caller answers it. */
bool hutch_api_cmd_wait(struct request *r, const struct cmd *c, enum MHD_Result *ret);
/* The 410 of a sandbox that has ended (class gone), hutch_api_ended_json()'s
 * body. */
enum MHD_Result hutch_api_respond_ended(struct MHD_Connection *conn, struct sup *s);
/* Answer err, an error that crossed into the API: its status from its
 * class (base/error.c's one table, docs/errors.md), its message; code is
 * the endpoint's name for it (docs/api.md), NULL the class's own. */
enum MHD_Result hutch_api_respond_err(struct MHD_Connection *conn, const struct hutch_err *err,
                                      const char *code);
/* The same answer's body, its status in *ret_status (caller owns it). */
cJSON *hutch_api_err_json(const struct hutch_err *err, const char *code, unsigned *ret_status);
/* The code of a command's start that failed (hutch_cmd_start()): a bound
 * (class limit) "too_large", init found dead (class gone)
 * "sandbox_deleted", else "spawn_failed". */
const char *hutch_api_spawn_code(const struct hutch_err *err);
/* Kill c (SIGKILL to its tree) if the client of r hangs up (both
 * directions; a half-close is not a hang-up) while it runs: libmicrohttpd
 * does not look at a suspended connection's socket. With c NULL the
 * request is resumed instead, r->hung_up set. */
void hutch_api_kill_on_hangup(struct request *r, struct cmd *c);
/* The 410 body of a sandbox that has ended. */
cJSON *hutch_api_ended_json(struct sup *s);
/* The request's headers together exceed HUTCH_MAX_HEADERS. */
bool hutch_api_headers_too_large(struct MHD_Connection *conn);
/* 0 when the request's body framing is one libmicrohttpd reads (none,
 * Content-Length, or "chunked" alone); else -EINVAL and err says why and
 * its class: not_capable an unknown transfer coding (501), usage an
 * ambiguous framing (400). */
int hutch_api_check_codings(struct MHD_Connection *conn, struct hutch_err *err);

#endif
