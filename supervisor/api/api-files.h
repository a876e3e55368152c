/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file endpoints of the API (api-files.c): JSON /write_file,
 * /read_file, /delete_file, /make_dir, /delete_dir, /list_dir and raw
 * PUT/GET /files. Every operation is a built-in command run by a child of
 * init (fileops.h); the supervisor only moves bytes and never resolves a
 * sandbox path. api.c routes requests here and exports the few helpers
 * below.
 */
#ifndef HUTCH_API_FILES_H
#define HUTCH_API_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

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

#include "api-internal.h"

struct request;
struct sup;
struct hutch_file_req;

/* The request's headers together exceed HUTCH_MAX_HEADERS. */
bool hutch_api_headers_too_large(struct MHD_Connection *conn);
/* Which file endpoint url + method is: >= 0 an operation, -1 not a file
 * endpoint, -2 a file endpoint with another method. */
int hutch_api_files_route(const char *url, const char *method);
/* Every access-handler call of a file request after the first; *pfr is
 * created on the first of them and freed by hutch_api_files_free(). */
enum MHD_Result hutch_api_files_access(struct sup *s, struct request *r,
                                       struct MHD_Connection *conn, int op,
                                       struct hutch_file_req **pfr, const char *upload_data,
                                       size_t *upload_data_size);
/* The request is over (answered or the client hung up). NULL-safe. */
void hutch_api_files_free(struct hutch_file_req *fr);

#endif
