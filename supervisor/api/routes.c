/* SPDX-License-Identifier: Apache-2.0 */
/* The route table; see routes.h. Two namespaces share the unprefixed
 * paths: the cloud executor's contract (EXEC rows, also served over the
 * TCP listener) and hutch's native API, all of it under /v1/; a native
 * row whose path the contract also serves is reached only through /v1/
 * (V1). docs/api.md has the table. */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "file-req.h"
#include "routes.h"
#include "supervisor.h"

#define POOLED    HUTCH_ROUTE_POOLED
#define PASSIVE   HUTCH_ROUTE_PASSIVE
#define ENDED     HUTCH_ROUTE_ENDED
#define RAW       HUTCH_ROUTE_RAW
#define EXEC      HUTCH_ROUTE_EXECUTOR
#define V1        HUTCH_ROUTE_V1_ONLY
#define CMD       HUTCH_ROUTE_COMMANDS
#define FILES     HUTCH_ROUTE_FILES
#define NO_SECRET HUTCH_ROUTE_NO_SECRET
#define ANY       "" /* the executor checks no method there */

/* The handlers: a row holds an index (H()), not a pointer, so the table
 * is read-only data rather than a relocated page (issue 31: CLI start;
 * the supervisor is the CLI's binary). */
#define HANDLERS(X)                        \
	X(hutch_api_serve_health)          \
	X(hutch_exec_serve_run)            \
	X(hutch_exec_serve_run_streaming)  \
	X(hutch_exec_serve_file)           \
	X(hutch_exec_serve_start_process)  \
	X(hutch_exec_serve_list_processes) \
	X(hutch_exec_serve_kill_process)   \
	X(hutch_exec_serve_logs_streaming) \
	X(hutch_api_serve_status)          \
	X(hutch_api_serve_stats)           \
	X(hutch_api_serve_net_log)         \
	X(hutch_api_serve_delete)          \
	X(hutch_api_serve_claim)           \
	X(hutch_api_serve_timeout)         \
	X(hutch_api_serve_snapshot)        \
	X(hutch_api_serve_rollback)        \
	X(hutch_api_serve_fork)            \
	X(hutch_api_serve_diff)            \
	X(hutch_api_serve_run)             \
	X(hutch_api_serve_run_streaming)   \
	X(hutch_api_serve_exec)            \
	X(hutch_api_serve_start_process)   \
	X(hutch_api_serve_list_processes)  \
	X(hutch_api_serve_kill_process)    \
	X(hutch_api_serve_process_output)  \
	X(hutch_api_serve_process_stdin)   \
	X(hutch_api_serve_file)            \
	X(hutch_api_serve_bind_port)       \
	X(hutch_api_serve_unbind_port)
#define HANDLER_ID(f)  HANDLER_##f,
#define HANDLER_PTR(f) [HANDLER_##f] = f,
enum {
	HANDLERS(HANDLER_ID) HANDLERS_N
};
static const hutch_api_handler handlers[HANDLERS_N] = { HANDLERS(HANDLER_PTR) };
_Static_assert(HANDLERS_N <= UINT8_MAX, "a route's handler index is a uint8_t");
#define H(f) HANDLER_##f

static const struct hutch_api_route routes[] = {
	/* the cloud executor's contract (api-executor*.c) */
	{ "/health", ANY, H(hutch_api_serve_health), EXEC | POOLED | PASSIVE | ENDED | NO_SECRET,
	  0 },
	{ "/run", ANY, H(hutch_exec_serve_run), EXEC | CMD, 0 },
	{ "/run_streaming", ANY, H(hutch_exec_serve_run_streaming), EXEC | CMD, 0 },
	{ "/write_file", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_WRITE_FILE },
	{ "/read_file", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_READ_FILE },
	{ "/delete_file", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_DELETE_FILE },
	{ "/make_dir", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_MAKE_DIR },
	{ "/delete_dir", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_DELETE_DIR },
	{ "/list_dir", ANY, H(hutch_exec_serve_file), EXEC | FILES, HUTCH_FILE_LIST_DIR },
	{ "/start_process", "POST", H(hutch_exec_serve_start_process), EXEC | CMD, 0 },
	{ "/list_processes", "GET", H(hutch_exec_serve_list_processes), EXEC, 0 },
	{ "/kill_process", "POST", H(hutch_exec_serve_kill_process), EXEC, 0 },
	{ "/process_logs_streaming", "GET", H(hutch_exec_serve_logs_streaming), EXEC, 0 },
	/* hutch's native API: /v1/..., and unprefixed where not V1 */
	{ "/health", "GET", H(hutch_api_serve_health), V1 | POOLED | PASSIVE | ENDED, 0 },
	{ "/status", "GET", H(hutch_api_serve_status), POOLED | PASSIVE, 0 },
	{ "/stats", "GET", H(hutch_api_serve_stats), POOLED | PASSIVE, 0 },
	{ "/net_log", "GET", H(hutch_api_serve_net_log), V1 | PASSIVE, 0 },
	{ "/", "DELETE", H(hutch_api_serve_delete), POOLED | ENDED | HUTCH_ROUTE_WAITS_END, 0 },
	{ "/claim", "POST", H(hutch_api_serve_claim), POOLED, 0 },
	{ "/timeout", "POST", H(hutch_api_serve_timeout), 0, 0 },
	{ "/snapshot", "POST", H(hutch_api_serve_snapshot), 0, 0 },
	{ "/rollback", "POST", H(hutch_api_serve_rollback), 0, 0 },
	{ "/fork", "POST", H(hutch_api_serve_fork), 0, 0 },
	{ "/diff", "POST", H(hutch_api_serve_diff), FILES, 0 },
	{ "/run", "POST", H(hutch_api_serve_run), V1 | CMD, 0 },
	{ "/run_streaming", "POST", H(hutch_api_serve_run_streaming), V1 | CMD, 0 },
	{ "/exec", "POST", H(hutch_api_serve_exec), CMD, 0 },
	{ "/start_process", "POST", H(hutch_api_serve_start_process), V1 | CMD, 0 },
	{ "/list_processes", "GET", H(hutch_api_serve_list_processes), V1, 0 },
	{ "/kill_process", "POST", H(hutch_api_serve_kill_process), V1, 0 },
	{ "/process_output", "GET", H(hutch_api_serve_process_output), 0, 0 },
	{ "/process_stdin", "POST", H(hutch_api_serve_process_stdin), RAW | CMD, 0 },
	{ "/write_file", "POST", H(hutch_api_serve_file), V1 | RAW | FILES, HUTCH_FILE_WRITE_FILE },
	{ "/read_file", "POST", H(hutch_api_serve_file), V1 | RAW | FILES, HUTCH_FILE_READ_FILE },
	{ "/delete_file", "POST", H(hutch_api_serve_file), V1 | RAW | FILES,
	  HUTCH_FILE_DELETE_FILE },
	{ "/make_dir", "POST", H(hutch_api_serve_file), V1 | RAW | FILES, HUTCH_FILE_MAKE_DIR },
	{ "/delete_dir", "POST", H(hutch_api_serve_file), V1 | RAW | FILES, HUTCH_FILE_DELETE_DIR },
	{ "/list_dir", "POST", H(hutch_api_serve_file), V1 | RAW | FILES, HUTCH_FILE_LIST_DIR },
	{ "/files", "PUT", H(hutch_api_serve_file), RAW | FILES, HUTCH_FILE_PUT },
	{ "/files", "GET", H(hutch_api_serve_file), RAW | FILES, HUTCH_FILE_GET },
	/* ports out of the sandbox (api-ports.c) */
	/* the executor's too (its shapes; api-ports.c): on TCP as well */
	{ "/bind_port", "POST", H(hutch_api_serve_bind_port), EXEC, 0 },
	{ "/unbind_port", "POST", H(hutch_api_serve_unbind_port), EXEC, 0 },
};

/* Is row rt in the namespace of an unprefixed path (v1 false) or of a
 * /v1/ one, as seen from the unix socket or the TCP listener? */
static bool in_namespace(const struct hutch_api_route *rt, bool v1, bool tcp)
{
	if (tcp)
		return !v1 && (rt->flags & HUTCH_ROUTE_EXECUTOR);
	if (v1)
		return !(rt->flags & HUTCH_ROUTE_EXECUTOR);
	return !(rt->flags & HUTCH_ROUTE_V1_ONLY);
}

hutch_api_handler hutch_api_route_handler(const struct hutch_api_route *rt)
{
	return handlers[rt->handler];
}

const struct hutch_api_route *hutch_api_routes(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(routes);
	return routes;
}

const struct hutch_api_route *hutch_api_route_find(const char *url, const char *method, bool tcp,
                                                   unsigned *ret_known)
{
	bool v1 = !strncmp(url, "/v1/", 4);
	const char *path = v1 ? url + 3 : url;

	*ret_known = 0;
	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		const struct hutch_api_route *rt = &routes[i];
		if (strcmp(path, rt->url) != 0 || !in_namespace(rt, v1, tcp))
			continue;
		if (!rt->method[0] || !strcmp(method, rt->method))
			return rt;
		*ret_known = rt->flags & HUTCH_ROUTE_EXECUTOR ? HUTCH_ROUTE_KNOWN_EXECUTOR
		                                              : HUTCH_ROUTE_KNOWN;
	}
	return NULL;
}

const char *hutch_api_pooled_refusal(const struct sup *s, const struct hutch_api_route *rt,
                                     char *buf, size_t n)
{
	if (!s->cfg->pool_key[0] || (rt->flags & HUTCH_ROUTE_POOLED))
		return NULL;
	snprintf(buf, n,
	         "sandbox %s waits in a warm pool: take it with 'hutch create' "
	         "(POST /claim) first",
	         s->id);
	return buf;
}

/* The access option (the cloud's): "files" runs no commands, "none"
 * neither runs commands nor touches files. NULL: allowed. */
const char *hutch_api_access_refusal(const struct sup *s, const struct hutch_api_route *rt)
{
	const char *a = s->cfg->access;

	if ((rt->flags & HUTCH_ROUTE_COMMANDS) && !strcmp(a, "files"))
		return "this sandbox was created with access \"files\": it reads and writes "
		       "files and runs no commands";
	if ((rt->flags & (HUTCH_ROUTE_COMMANDS | HUTCH_ROUTE_FILES)) && !strcmp(a, "none"))
		return "this sandbox was created with access \"none\": it runs no commands "
		       "and reads or writes no files";
	return NULL;
}
