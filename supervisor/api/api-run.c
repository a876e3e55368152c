/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /run and POST /run_streaming (docs/api.md): one command of the
 * engine (cmd.h) per request. /run suspends its request until the command
 * is done and answers its result; /run_streaming answers at once with a
 * server-sent event stream (sse.h) that a content reader feeds from the
 * command's output sink and suspends on when no event is queued. A client
 * that hangs up kills its command.
 */
#include <errno.h>

#include "cmdenv.h"
#include "request.h"
#include "routes.h"
#include "supervisor.h"

ssize_t hutch_api_sse_command(struct request *r, char *buf, size_t max,
                              void (*queue_end)(struct request *r))
{
	struct cmd *c = r->cmd;
	ssize_t n;

	if (!c)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (c->state == CMD_DONE && !r->sse.end_queued) {
		queue_end(r);
		r->sse.end_queued = true;
	}
	n = hutch_sse_read(&r->sse, buf, max);
	if (n > 0) {
		if (hutch_sse_has_room(&r->sse))
			hutch_cmd_resume_output(c);
		return n;
	}
	if (r->sse.end_queued)
		return MHD_CONTENT_READER_END_OF_STREAM;
	hutch_api_suspend(r);
	return 0;
}

static void queue_exit(struct request *r)
{
	struct sup *s = r->s;

	if (s->state != SUP_RUNNING)
		hutch_sse_event(&r->sse, "error", hutch_api_ended_json(s));
	else
		hutch_sse_event(&r->sse, "exit", hutch_cmd_result_json(r->cmd, 0));
}

/* Content reader of /run_streaming. */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	return hutch_api_sse_command(cls, buf, max, queue_exit);
}

static bool on_sse_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct request *r = ud;

	hutch_sse_output(&r->sse, is_err, buf, n);
	hutch_api_resume(r);
	return !hutch_sse_full(&r->sse);
}

static void on_cmd_done(void *ud, struct cmd *c)
{
	struct request *r = ud;

	hutch_sse_flush(&r->sse); /* an incomplete UTF-8 sequence at the end */
	hutch_api_resume(r);
}

static enum MHD_Result start_command(struct request *r, bool streaming)
{
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	struct sup *s = r->s;
	struct hutch_cmd_sink sink = { .done = on_cmd_done, .ud = r };
	struct hutch_spawn sp;
	struct cmd *c;

	if (hutch_run_req_parse(r->body.data ? r->body.data : "", r->body.len, r->s->cmdenv, &req,
	                        &err) < 0)
		return hutch_api_respond_err(r->conn, &err, "invalid_request");
	sp = (struct hutch_spawn){
		.argv = (const char *const *)req.argv,
		.envp = (const char *const *)req.envp,
		.cwd = req.cwd,
		.stdin_data = req.stdin_data,
		.stdin_len = req.stdin_len,
		.timeout = req.timeout,
		.max_output = req.max_output ? req.max_output : s->cfg->max_output_bytes,
	};
	if (req.tty) {
		hutch_run_req_done(&req);
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'tty' needs a stream both ways: use POST /exec");
	}
	r->base64 = req.base64;
	r->sse.base64 = req.base64;
	if (streaming) {
		sink.output = on_sse_output;
		sp.max_output = 0; /* nothing captured */
	}
	c = hutch_cmd_start(&s->cmds, &sp, &sink, &err);
	hutch_run_req_done(&req);
	if (!c)
		return hutch_api_respond_err(r->conn, &err, hutch_api_spawn_code(&err));
	r->cmd = c;
	/* Watch the client's socket: if it hangs up, the command is killed. */
	hutch_api_kill_on_hangup(r, c);
	if (streaming)
		return hutch_api_respond_sse(r, sse_reader);
	hutch_api_suspend(r);
	return MHD_YES;
}

static enum MHD_Result finish_run(struct request *r)
{
	struct cmd *c = r->cmd;
	enum MHD_Result ret;
	cJSON *res;

	if (hutch_api_cmd_wait(r, c, &ret))
		return ret;
	res = hutch_cmd_result_json(c, HUTCH_RESULT_OUTPUT | (r->base64 ? HUTCH_RESULT_BASE64 : 0));
	if (c->spawn_error)
		cJSON_AddStringToObject(res, "error", c->spawn_error);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, res);
}

enum MHD_Result hutch_api_serve_run(struct request *r, const char *upload, size_t *size)
{
	return r->cmd ? finish_run(r) : start_command(r, false);
}

enum MHD_Result hutch_api_serve_run_streaming(struct request *r, const char *upload, size_t *size)
{
	/* Answered once started: libmicrohttpd calls the content reader. */
	return r->cmd ? finish_run(r) : start_command(r, true);
}
