/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw PUT/GET /files (file-req.h). The supervisor takes over one pipe end
 * of the built-in (stdin's write end for PUT, stdout's read end for GET,
 * both 1 MiB pipes) and moves bytes between it and the connection without
 * holding more than what libmicrohttpd already buffers: an upload chunk
 * that does not fit into the pipe stays unconsumed in libmicrohttpd's
 * connection buffer and the connection is suspended until the pipe is
 * writable again (EPOLLOUT, one-shot); a download's content reader
 * suspends on an empty pipe until EPOLLIN. Supervisor memory is flat
 * whatever the file size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "fdutil.h"
#include "file-req.h"
#include "file-stream.h"
#include "fileops.h"
#include "proto.h"
#include "supervisor.h"

#define PIPE_SIZE      (1u << 20)
#define DOWNLOAD_BLOCK (256u << 10)

static void on_pipe(struct hutch_watch *w, uint32_t events)
{
	struct hutch_file_req *fr = w->ptr;

	hutch_api_resume(fr->r);
}

/* One-shot: the connection is resumed once, then suspends again. */
static void arm_pipe(struct hutch_file_req *fr, uint32_t what)
{
	struct hutch_loop *loop = &fr->s->loop;

	if (fr->pipe_fd < 0)
		return;
	if (!hutch_watch_active(&fr->w_pipe))
		(void)hutch_loop_add(loop, &fr->w_pipe, fr->pipe_fd, what | EPOLLONESHOT);
	else
		(void)hutch_loop_mod(loop, &fr->w_pipe, what | EPOLLONESHOT);
}

void hutch_file_stream_close(struct hutch_file_req *fr)
{
	hutch_loop_close(&fr->s->loop, &fr->w_pipe, &fr->pipe_fd);
}

/* The query's arguments as libmicrohttpd decoded them, with their sizes:
 * "%00" decodes to a NUL byte that would cut a C string short
 * ("safe.txt%00.png" was "safe.txt"), and of an argument given twice the
 * lookup takes the first (issue 18 #6). */
struct query_check {
	unsigned seen[3];
	char msg[160];
};

static const char *const query_names[] = { "path", "mode", "format" };

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
	struct query_check *q = cls;

	if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
		snprintf(q->msg, sizeof(q->msg),
		         "query parameter '%.32s' contains a NUL byte (%%00): remove it", key);
		return MHD_NO;
	}
	for (size_t i = 0; i < 3; i++)
		if (!strcmp(key, query_names[i]) && q->seen[i]++) {
			snprintf(q->msg, sizeof(q->msg),
			         "query parameter '%s' given twice: give it once", key);
			return MHD_NO;
		}
	return MHD_YES;
}

enum MHD_Result hutch_file_stream_start(struct hutch_file_req *fr)
{
	const char *path =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *mode =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "mode");
	const char *fmt =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "format");
	const char *cl = hutch_mhd.lookup_connection_value(fr->conn, MHD_HEADER_KIND,
	                                                   MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct hutch_err err = { 0 };
	const char *argv[5] = { 0 };
	char sizebuf[32] = "-1";
	struct query_check q = { 0 };
	struct cmd *c;

	(void)hutch_mhd.get_connection_values_n(fr->conn, MHD_GET_ARGUMENT_KIND, check_arg, &q);
	if (q.msg[0])
		return hutch_file_answer_error(fr, 400, "invalid_request", "%s", q.msg);
	if (!path)
		return hutch_file_answer_error(fr, 400, "invalid_request",
		                               "missing query parameter 'path'");
	if (hutch_file_check_path(path, &err) < 0 ||
	    (mode && hutch_file_check_mode(mode, &err) < 0))
		return hutch_file_answer_error(fr, 400, "invalid_request", "%s", err.msg);
	if (fmt && strcmp(fmt, "tar") != 0)
		return hutch_file_answer_error(
		        fr, 400, "invalid_request",
		        "invalid 'format' \"%.16s\": only \"tar\" (a directory)", fmt);
	fr->path = strdup(path);
	fr->tar = fmt != NULL;
	if (cl)
		snprintf(sizebuf, sizeof(sizebuf), "%llu", strtoull(cl, NULL, 10));
	if (fr->op == HUTCH_FILE_PUT && fr->tar)
		argv[0] = HUTCH_FOP_TAR_X, argv[1] = path;
	else if (fr->op == HUTCH_FILE_PUT)
		argv[0] = HUTCH_FOP_WRITE, argv[1] = path, argv[2] = mode ? mode : "",
		argv[3] = sizebuf;
	else if (fr->tar)
		argv[0] = HUTCH_FOP_TAR_C, argv[1] = path;
	else
		argv[0] = HUTCH_FOP_READ, argv[1] = path, argv[2] = "-1";
	c = hutch_file_start_builtin(fr, argv, NULL, 0, 64u << 10, fr->op == HUTCH_FILE_PUT, &err);
	if (!c)
		return hutch_file_answer_error(fr, 500, "spawn_failed", "%s", err.msg);
	/* Take over the streaming end from the command engine. */
	fr->pipe_fd = fr->op == HUTCH_FILE_PUT ? hutch_cmd_take_stdin(c) : hutch_cmd_take_stdout(c);
	(void)fcntl(fr->pipe_fd, F_SETPIPE_SZ, PIPE_SIZE);
	(void)hutch_fd_nonblock(fr->pipe_fd, true);
	hutch_api_kill_on_hangup(fr->r, c);
	return MHD_YES;
}

enum MHD_Result hutch_file_stream_put(struct hutch_file_req *fr, const char *data, size_t *size)
{
	while (*size > 0 && fr->pipe_fd >= 0 && !fr->pipe_broken) {
		ssize_t n = write(fr->pipe_fd, data, *size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* Leave the rest in libmicrohttpd's buffer; come back
			 * when the writer in the sandbox has made room. */
			arm_pipe(fr, EPOLLOUT);
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (n < 0) {
			fr->pipe_broken = true; /* the writer failed: it says why */
			hutch_file_stream_close(fr);
			break;
		}
		data += n;
		*size -= (size_t)n;
		fr->moved += (uint64_t)n;
	}
	*size = 0; /* all written, or dropped after the writer failed */
	return MHD_YES;
}

enum MHD_Result hutch_file_stream_finish_put(struct hutch_file_req *fr)
{
	cJSON *o;

	hutch_file_stream_close(fr); /* end of data: the writer publishes the file */
	if (fr->cmd->state != CMD_DONE) {
		hutch_api_suspend(fr->r);
		return MHD_YES;
	}
	if (fr->s->state != SUP_RUNNING)
		return hutch_file_answer(fr, 410, hutch_api_ended_json(fr->s));
	if (!hutch_file_cmd_ok(fr->cmd))
		return hutch_file_answer_failure(fr);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", fr->path);
	if (!fr->tar)
		cJSON_AddNumberToObject(o, "size", (double)fr->moved);
	return hutch_file_answer(fr, 200, o);
}

static ssize_t get_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hutch_file_req *fr = cls;
	ssize_t n;

	if (fr->size != HUTCH_FOP_SIZE_UNKNOWN && max > fr->size - fr->moved)
		max = (size_t)(fr->size - fr->moved);
	if (fr->pipe_fd < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	do
		n = read(fr->pipe_fd, buf, max);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		fr->moved += (uint64_t)n;
		return n;
	}
	if (n < 0 && errno == EAGAIN) {
		arm_pipe(fr, EPOLLIN);
		hutch_api_suspend(fr->r);
		return 0;
	}
	if (n == 0 && (fr->size == HUTCH_FOP_SIZE_UNKNOWN || fr->moved == fr->size))
		return MHD_CONTENT_READER_END_OF_STREAM;
	return MHD_CONTENT_READER_END_WITH_ERROR; /* shrank, or the reader failed */
}

/* GET: wait for the size header (or the reader's failure), then answer
 * with a streamed body. */
enum MHD_Result hutch_file_stream_get(struct hutch_file_req *fr)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	while (fr->nhdr < sizeof(fr->hdr) && fr->pipe_fd >= 0) {
		ssize_t n = read(fr->pipe_fd, fr->hdr + fr->nhdr, sizeof(fr->hdr) - fr->nhdr);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			arm_pipe(fr, EPOLLIN);
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (n <= 0) {
			hutch_file_stream_close(fr);
			break;
		}
		fr->nhdr += (size_t)n;
	}
	if (fr->nhdr < sizeof(fr->hdr)) {
		/* No header: the reader failed; its reason comes with its exit. */
		if (fr->cmd->state != CMD_DONE) {
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (fr->s->state != SUP_RUNNING)
			return hutch_file_answer(fr, 410, hutch_api_ended_json(fr->s));
		if (!hutch_file_cmd_ok(fr->cmd))
			return hutch_file_answer_failure(fr);
		return hutch_file_answer_error(fr, 500, "file_error",
		                               "short answer from the sandbox");
	}
	memcpy(&fr->size, fr->hdr, sizeof(fr->size));
	resp = hutch_mhd.create_response_from_callback(
	        fr->size == HUTCH_FOP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : fr->size, DOWNLOAD_BLOCK,
	        get_reader, fr, NULL);
	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	                                    fr->tar ? "application/x-tar"
	                                            : "application/octet-stream");
	fr->answered = true;
	ret = hutch_mhd.queue_response(fr->conn, MHD_HTTP_OK, resp);
	hutch_mhd.destroy_response(resp);
	return ret;
}

void hutch_file_stream_init(struct hutch_file_req *fr)
{
	fr->pipe_fd = -EBADF;
	hutch_watch_init(&fr->w_pipe, on_pipe, fr);
}
