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
#define ANY       NULL /* the executor checks no method there */

static const struct hutch_api_route routes[] = {
	/* the cloud executor's contract (api-executor*.c) */
	{ "/health", ANY, hutch_api_serve_health, EXEC | POOLED | PASSIVE | ENDED | NO_SECRET, 0 },
	{ "/run", ANY, hutch_exec_serve_run, EXEC | CMD, 0 },
	{ "/run_streaming", ANY, hutch_exec_serve_run_streaming, EXEC | CMD, 0 },
	{ "/write_file", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_WRITE_FILE },
	{ "/read_file", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_READ_FILE },
	{ "/delete_file", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_DELETE_FILE },
	{ "/make_dir", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_MAKE_DIR },
	{ "/delete_dir", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_DELETE_DIR },
	{ "/list_dir", ANY, hutch_exec_serve_file, EXEC | FILES, HUTCH_FILE_LIST_DIR },
	{ "/start_process", "POST", hutch_exec_serve_start_process, EXEC | CMD, 0 },
	{ "/list_processes", "GET", hutch_exec_serve_list_processes, EXEC, 0 },
	{ "/kill_process", "POST", hutch_exec_serve_kill_process, EXEC, 0 },
	{ "/process_logs_streaming", "GET", hutch_exec_serve_logs_streaming, EXEC, 0 },
	/* hutch's native API: /v1/..., and unprefixed where not V1 */
	{ "/health", "GET", hutch_api_serve_health, V1 | POOLED | PASSIVE | ENDED, 0 },
	{ "/status", "GET", hutch_api_serve_status, POOLED | PASSIVE, 0 },
	{ "/stats", "GET", hutch_api_serve_stats, POOLED | PASSIVE, 0 },
	{ "/net_log", "GET", hutch_api_serve_net_log, V1 | PASSIVE, 0 },
	{ "/", "DELETE", hutch_api_serve_delete, POOLED | ENDED | HUTCH_ROUTE_WAITS_END, 0 },
	{ "/claim", "POST", hutch_api_serve_claim, POOLED, 0 },
	{ "/timeout", "POST", hutch_api_serve_timeout, 0, 0 },
	{ "/snapshot", "POST", hutch_api_serve_snapshot, 0, 0 },
	{ "/rollback", "POST", hutch_api_serve_rollback, 0, 0 },
	{ "/fork", "POST", hutch_api_serve_fork, 0, 0 },
	{ "/diff", "POST", hutch_api_serve_diff, FILES, 0 },
	{ "/run", "POST", hutch_api_serve_run, V1 | CMD, 0 },
	{ "/run_streaming", "POST", hutch_api_serve_run_streaming, V1 | CMD, 0 },
	{ "/exec", "POST", hutch_api_serve_exec, CMD, 0 },
	{ "/start_process", "POST", hutch_api_serve_start_process, V1 | CMD, 0 },
	{ "/list_processes", "GET", hutch_api_serve_list_processes, V1, 0 },
	{ "/kill_process", "POST", hutch_api_serve_kill_process, V1, 0 },
	{ "/process_output", "GET", hutch_api_serve_process_output, 0, 0 },
	{ "/process_stdin", "POST", hutch_api_serve_process_stdin, RAW | CMD, 0 },
	{ "/write_file", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_WRITE_FILE },
	{ "/read_file", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_READ_FILE },
	{ "/delete_file", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_DELETE_FILE },
	{ "/make_dir", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_MAKE_DIR },
	{ "/delete_dir", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_DELETE_DIR },
	{ "/list_dir", "POST", hutch_api_serve_file, V1 | RAW | FILES, HUTCH_FILE_LIST_DIR },
	{ "/files", "PUT", hutch_api_serve_file, RAW | FILES, HUTCH_FILE_PUT },
	{ "/files", "GET", hutch_api_serve_file, RAW | FILES, HUTCH_FILE_GET },
	/* ports out of the sandbox (api-ports.c) */
	/* the executor's too (its shapes; api-ports.c): on TCP as well */
	{ "/bind_port", "POST", hutch_api_serve_bind_port, EXEC, 0 },
	{ "/unbind_port", "POST", hutch_api_serve_unbind_port, EXEC, 0 },
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
		if (!rt->method || !strcmp(method, rt->method))
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
