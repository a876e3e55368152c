/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API's one route table (routes.c): every endpoint is a row (URL,
 * method, handler, flags), so that adding one is a row plus its handler
 * declared below. api.c looks the row up once per request and applies the
 * flags (pool, activity, body, ended sandbox, access, the executor's
 * secret) and never names a path; docs/api.md is the reference of what
 * each endpoint answers, docs/architecture.md ("Where a new thing goes")
 * the files a new one touches.
 */
#ifndef HUTCH_ROUTES_H
#define HUTCH_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* Served while the sandbox waits in a warm pool; other routes are refused
 * with 409 sandbox_pooled until POST /claim. */
#define HUTCH_ROUTE_POOLED (1u << 0)
/* Watching the sandbox: neither wakes it from idle sleep nor counts as
 * activity (every other request does, before it is served). */
#define HUTCH_ROUTE_PASSIVE (1u << 1)
/* The handler answers after the sandbox ended itself; others get 410. */
#define HUTCH_ROUTE_ENDED (1u << 2)
/* The raw body kind: the handler gets every access-handler call after the
 * first, upload chunks included, and does all the checks itself (no
 * Content-Length bound, no 410). Without it the body is JSON: api.c reads
 * it whole, up to HUTCH_MAX_BODY (413 beyond), then calls the handler. */
#define HUTCH_ROUTE_RAW (1u << 3)
/* The request waits for the sandbox's end (in s->waiters): DELETE /. */
#define HUTCH_ROUTE_WAITS_END (1u << 4)
/* The cloud executor's contract (api-executor*.c): served at the
 * unprefixed path, on the unix socket and on the TCP listener, with the
 * executor's own answers (plain-text errors, its status codes). */
#define HUTCH_ROUTE_EXECUTOR (1u << 5)
/* A native row whose path the contract also serves: only as /v1/<path>.
 * Every native row is served under /v1/; the others unprefixed too. */
#define HUTCH_ROUTE_V1_ONLY (1u << 6)
/* It runs a command (access "files" and "none" refuse it). */
#define HUTCH_ROUTE_COMMANDS (1u << 7)
/* It reads or writes files (access "none" refuses it). */
#define HUTCH_ROUTE_FILES (1u << 8)
/* On the executor's TCP listener, served without the bearer secret
 * (Go's /health: the cloud's probes carry none). */
#define HUTCH_ROUTE_NO_SECRET (1u << 9)

/* Called for each access-handler call once the body is read (JSON) or on
 * every call after the first (raw; upload/upload_size are the chunk). A
 * handler that leaves its request suspended is called again on resume. */
typedef enum MHD_Result (*hutch_api_handler)(struct request *r, const char *upload,
                                             size_t *upload_size);

/* A row holds no pointer (issue 31: CLI start): strings in the row, the
 * handler an index (hutch_api_route_handler()). */
struct hutch_api_route {
	char url[24];
	char method[8];  /* "": any (the executor checks none there) */
	uint8_t handler; /* hutch_api_route_handler() */
	unsigned flags;  /* HUTCH_ROUTE_* */
	int arg;         /* the handler's: the file operation (api-files.h) */
};

/* The row's handler; the table (its rows, for the unit test). */
hutch_api_handler hutch_api_route_handler(const struct hutch_api_route *rt);
const struct hutch_api_route *hutch_api_routes(size_t *ret_n);

/* The row of url + method as seen on the unix socket or (tcp) on the
 * executor's TCP listener, or NULL; *ret_known then says whether url is
 * served with another method (405, not 404), and by which API. */
#define HUTCH_ROUTE_KNOWN          1u
#define HUTCH_ROUTE_KNOWN_EXECUTOR 2u
const struct hutch_api_route *hutch_api_route_find(const char *url, const char *method, bool tcp,
                                                   unsigned *ret_known);
/* Why the sandbox's access option (the cloud's) refuses rt (403), or NULL. */
const char *hutch_api_access_refusal(const struct sup *s, const struct hutch_api_route *rt);
/* A pooled sandbox serves nobody until it is claimed but the routes that
 * say so (HUTCH_ROUTE_POOLED): the refusal's message written into buf (n
 * bytes) and returned, or NULL: served. */
const char *hutch_api_pooled_refusal(const struct sup *s, const struct hutch_api_route *rt,
                                     char *buf, size_t n);

/* Handlers. session.c: */
enum MHD_Result hutch_api_serve_health(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_status(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_stats(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_delete(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_claim(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_timeout(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_net_log(struct request *r, const char *upload, size_t *size);
/* POST /snapshot (api-snapshot.c) */
enum MHD_Result hutch_api_serve_snapshot(struct request *r, const char *upload, size_t *size);
/* POST /rollback (api-snapshot.c) */
enum MHD_Result hutch_api_serve_rollback(struct request *r, const char *upload, size_t *size);
/* POST /fork {"count": N, "disk_bytes": B}: hutch fork's disks (supervisor/fork.h). */
enum MHD_Result hutch_api_serve_fork(struct request *r, const char *upload, size_t *size);
/* POST /diff (api-diff.c) */
enum MHD_Result hutch_api_serve_diff(struct request *r, const char *upload, size_t *size);
/* api-run.c: */
enum MHD_Result hutch_api_serve_run(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_run_streaming(struct request *r, const char *upload, size_t *size);
/* api-exec.c: */
enum MHD_Result hutch_api_serve_exec(struct request *r, const char *upload, size_t *size);
/* api-procs.c: */
enum MHD_Result hutch_api_serve_start_process(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_list_processes(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_kill_process(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_process_output(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_process_stdin(struct request *r, const char *upload, size_t *size);
/* api-files.c (raw; the operation is the row's arg): */
enum MHD_Result hutch_api_serve_file(struct request *r, const char *upload, size_t *size);
/* api-ports.c: */
enum MHD_Result hutch_api_serve_bind_port(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_api_serve_unbind_port(struct request *r, const char *upload, size_t *size);
/* The executor's contract. executor-run.c: */
enum MHD_Result hutch_exec_serve_run(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_exec_serve_run_streaming(struct request *r, const char *upload, size_t *size);
/* executor-files.c (JSON body; the operation is the row's arg): */
enum MHD_Result hutch_exec_serve_file(struct request *r, const char *upload, size_t *size);
/* executor-procs.c: */
enum MHD_Result hutch_exec_serve_start_process(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_exec_serve_list_processes(struct request *r, const char *upload,
                                                size_t *size);
enum MHD_Result hutch_exec_serve_kill_process(struct request *r, const char *upload, size_t *size);
enum MHD_Result hutch_exec_serve_logs_streaming(struct request *r, const char *upload,
                                                size_t *size);

#endif
