/* SPDX-License-Identifier: Apache-2.0 */
/* Raw PUT/GET /files (file-stream.c). */
#ifndef HUTCH_FILE_STREAM_H
#define HUTCH_FILE_STREAM_H

#include <stddef.h>

#include "file-req.h"

/* A new request: no pipe yet. */
void hutch_file_stream_init(struct hutch_file_req *fr);
/* Check the query string, start the built-in, take over its pipe end. */
enum MHD_Result hutch_file_stream_start(struct hutch_file_req *fr);
/* PUT: move an upload chunk into the pipe (what does not fit stays in
 * libmicrohttpd's buffer: *size is left, the connection suspended). */
enum MHD_Result hutch_file_stream_put(struct hutch_file_req *fr, const char *data, size_t *size);
/* PUT: the body is in; answer once the writer is done. */
enum MHD_Result hutch_file_stream_finish_put(struct hutch_file_req *fr);
/* GET: read the size header, then answer with the streamed body. */
enum MHD_Result hutch_file_stream_get(struct hutch_file_req *fr);
/* Close the pipe end (and its watch); idempotent. */
void hutch_file_stream_close(struct hutch_file_req *fr);

#endif
