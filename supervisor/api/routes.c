/* SPDX-License-Identifier: Apache-2.0 */
/* The route table; see routes.h. */
#include <string.h>

#include "cleanup.h"
#include "file-req.h"
#include "routes.h"

#define POOLED  HUTCH_ROUTE_POOLED
#define PASSIVE HUTCH_ROUTE_PASSIVE
#define ENDED   HUTCH_ROUTE_ENDED
#define RAW     HUTCH_ROUTE_RAW

static const struct hutch_api_route routes[] = {
	{ "/health", "GET", hutch_api_serve_health, POOLED | PASSIVE | ENDED, 0 },
	{ "/status", "GET", hutch_api_serve_status, POOLED | PASSIVE, 0 },
	{ "/stats", "GET", hutch_api_serve_stats, POOLED | PASSIVE, 0 },
	{ "/", "DELETE", hutch_api_serve_delete, POOLED | ENDED | HUTCH_ROUTE_WAITS_END, 0 },
	{ "/claim", "POST", hutch_api_serve_claim, POOLED, 0 },
	{ "/timeout", "POST", hutch_api_serve_timeout, 0, 0 },
	{ "/run", "POST", hutch_api_serve_run, 0, 0 },
	{ "/run_streaming", "POST", hutch_api_serve_run_streaming, 0, 0 },
	{ "/exec", "POST", hutch_api_serve_exec, 0, 0 },
	{ "/start_process", "POST", hutch_api_serve_start_process, 0, 0 },
	{ "/list_processes", "GET", hutch_api_serve_list_processes, 0, 0 },
	{ "/kill_process", "POST", hutch_api_serve_kill_process, 0, 0 },
	{ "/process_output", "GET", hutch_api_serve_process_output, 0, 0 },
	{ "/process_stdin", "POST", hutch_api_serve_process_stdin, RAW, 0 },
	{ "/write_file", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_WRITE_FILE },
	{ "/read_file", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_READ_FILE },
	{ "/delete_file", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_DELETE_FILE },
	{ "/make_dir", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_MAKE_DIR },
	{ "/delete_dir", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_DELETE_DIR },
	{ "/list_dir", "POST", hutch_api_serve_file, RAW, HUTCH_FILE_LIST_DIR },
	{ "/files", "PUT", hutch_api_serve_file, RAW, HUTCH_FILE_PUT },
	{ "/files", "GET", hutch_api_serve_file, RAW, HUTCH_FILE_GET },
	/* ports out of the sandbox (api-ports.c) */
	{ "/bind_port", "POST", hutch_api_serve_bind_port, 0, 0 },
	{ "/unbind_port", "POST", hutch_api_serve_unbind_port, 0, 0 },
};

const struct hutch_api_route *hutch_api_route_find(const char *url, const char *method,
                                                   bool *url_known)
{
	*url_known = false;
	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		if (strcmp(url, routes[i].url) != 0)
			continue;
		if (!strcmp(method, routes[i].method))
			return &routes[i];
		*url_known = true;
	}
	return NULL;
}
