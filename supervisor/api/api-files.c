/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file endpoints' handler (routes.c: raw body kind, the operation in
 * the row's arg): it creates the request's struct hutch_file_req on its
 * first call and steps it along on every access-handler call after;
 * file-json.c and file-stream.c do the work, file-req.h says what a file
 * request is.
 */
#include <errno.h>
#include <stdlib.h>

#include "cleanup.h"
#include "file-json.h"
#include "file-req.h"
#include "file-stream.h"
#include "routes.h"
#include "supervisor.h"

static void file_req_free(void *p)
{
	struct hutch_file_req *fr = p;
	struct cmd *c;

	if (!fr)
		return;
	c = fr->cmd;
	if (c && fr->op == HUTCH_FILE_PUT && fr->pipe_fd >= 0 && c->state != CMD_DONE) {
		/* The upload did not end: keep the writer's stdin open so it
		 * never sees a clean EOF, and kill it. Its O_TMPFILE inode
		 * goes with it; no partial file is ever published. */
		hutch_loop_del(&fr->s->loop, &fr->w_pipe);
		hutch_cmd_hold_fd(c, fr->pipe_fd);
		fr->pipe_fd = -EBADF;
	}
	hutch_file_stream_close(fr);
	if (c)
		hutch_cmd_release(c);
	cJSON_Delete(fr->pending);
	hutch_buf_done(&fr->body);
	free(fr->path);
	free(fr);
}

static struct hutch_file_req *file_req_new(struct request *r)
{
	struct hutch_file_req *fr = calloc(1, sizeof(*fr));

	if (!fr)
		return NULL;
	fr->s = r->s;
	fr->r = r;
	fr->conn = r->conn;
	fr->op = (enum hutch_file_op)r->route->arg;
	hutch_file_stream_init(fr);
	hutch_buf_init(&fr->body, HUTCH_MAX_BODY);
	r->state = fr;
	r->state_free = file_req_free;
	return fr;
}

/* PUT and GET /files. */
static enum MHD_Result serve_stream(struct request *r, struct hutch_file_req *fr,
                                    const char *upload, size_t *size)
{
	if (!fr->cmd) {
		enum MHD_Result ret = hutch_file_stream_start(fr);
		if (fr->pending)
			return hutch_api_serve_file(r, upload, size);
		if (fr->answered || ret != MHD_YES)
			return ret;
	}
	if (fr->op == HUTCH_FILE_GET)
		return hutch_file_stream_get(fr);
	if (*size)
		return hutch_file_stream_put(fr, upload, size);
	return hutch_file_stream_finish_put(fr);
}

/* The JSON endpoints: read the body, start, wait, finish. */
static enum MHD_Result serve_json(struct hutch_file_req *fr, const char *upload, size_t *size)
{
	if (*size) {
		if (hutch_buf_append(&fr->body, upload, *size) < 0 || fr->body.truncated)
			fr->body.len = 0, fr->body.truncated = true;
		*size = 0;
		return MHD_YES;
	}
	if (fr->body.truncated)
		return hutch_file_answer_error(fr, 413, "too_large",
		                               "request body larger than %u bytes: use PUT /files "
		                               "for large files",
		                               HUTCH_MAX_BODY);
	if (!fr->cmd)
		return hutch_file_json_start(fr);
	if (fr->cmd->state != CMD_DONE) {
		hutch_api_suspend(fr->r);
		return MHD_YES;
	}
	return hutch_file_json_finish(fr);
}

enum MHD_Result hutch_api_serve_file(struct request *r, const char *upload, size_t *size)
{
	struct hutch_file_req *fr = r->state;
	struct sup *s = r->s;

	if (!fr) {
		fr = file_req_new(r);
		if (!fr)
			return MHD_NO;
	}
	if ((fr->op == HUTCH_FILE_PUT || fr->op == HUTCH_FILE_GET) && *size == 0)
		fr->body_done = true;
	if (fr->op == HUTCH_FILE_GET && *size) {
		/* Refused once the body is in (libmicrohttpd answers only then;
		 * an upload left unread closed the connection unanswered). */
		if (!fr->pending)
			(void)hutch_file_answer_error(
			        fr, 400, "invalid_request",
			        "GET /files takes no request body: the path goes "
			        "in the query (GET /files?path=P)");
		*size = 0;
		return MHD_YES;
	}
	if (fr->pending) {
		if (!fr->body_done) {
			*size = 0; /* the rest of a refused upload */
			return MHD_YES;
		}
		fr->answered = true;
		return hutch_api_respond_json(fr->conn, fr->pending_status, TAKE_PTR(fr->pending));
	}
	if (fr->answered)
		return MHD_YES;
	if (!fr->cmd && s->state != SUP_RUNNING)
		return hutch_file_answer(fr, 410, hutch_api_ended_json(s));
	if (fr->op == HUTCH_FILE_PUT || fr->op == HUTCH_FILE_GET)
		return serve_stream(r, fr, upload, size);
	return serve_json(fr, upload, size);
}
