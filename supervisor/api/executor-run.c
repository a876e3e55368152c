/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor's /run and /run_streaming (executor.h): {"cmd", "cwd",
 * "env"} run by sh -c. /run answers {"stdout", "stderr", "error" (only when
 * the exit code is not 0: "Non-zero exit code"), "code"} and hutch's extra
 * "changes" (cmd.h); a command ended
 * by a signal has code -1, as Go reports it. /run_streaming answers server-
 * sent events, one "output" event per line of either stream with the
 * stream's name in the data ({"data": line, "stream": "stdout"}, the line
 * without its end), then "complete" {"code": N, "error": bool}.
 *
 * A "cwd" that is not a directory is refused with 400 "Invalid working
 * directory: CWD" before anything runs, as the executor's os.Stat check
 * does: a "test -d" of the sandbox's own shell, as appuser, decides (the
 * supervisor never resolves a sandbox path). The command itself is a
 * command of the engine like the native /run's: killed if the client hangs
 * up. /run keeps all of its output, as the executor does: the one bound is
 * the sandbox's executor_max_output_bytes per stream (64 MiB by default);
 * a command that writes more is killed and the answer is a 500 whose text
 * names the option, never a silent cut (the contract's answer has no field
 * to flag one).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "executor.h"
#include "request.h"
#include "routes.h"
#include "supervisor.h"

/* A line longer than this is sent in pieces of this size (the executor's
 * reader has no bound; ours keeps the supervisor's memory flat). */
#define LINE_MAX_BYTES (64u << 10)

struct exec_run {
	struct hutch_exec_cmd cmd;
	/* /run_streaming: the partial line of each stream; /run: the whole
	 * output of each stream */
	struct hutch_buf line[2];
	int over; /* /run: 1 + the stream that passed the bound, 0: none */
};

static void run_free(void *p)
{
	struct exec_run *x = p;

	if (!x)
		return;
	hutch_exec_cmd_done(&x->cmd);
	hutch_buf_done(&x->line[0]);
	hutch_buf_done(&x->line[1]);
	free(x);
}

static int code_of(const struct cmd *c)
{
	return WIFEXITED(c->status) && !c->timed_out ? WEXITSTATUS(c->status) : -1;
}

/* ---- /run_streaming: lines as events ---- */

struct line_to {
	struct request *r;
	bool is_err;
};

static void queue_line(void *ud, const char *p, size_t n)
{
	const struct line_to *to = ud;
	_cleanup_free_ char *text = NULL;
	cJSON *o;

	/* strings.TrimRight(line, "\r\n") */
	while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r'))
		n--;
	text = hutch_utf8_sanitize(p, n, NULL);
	o = text ? cJSON_CreateObject() : NULL;
	if (!o)
		return;
	/* Go's json.Marshal of a map: keys in order. */
	cJSON_AddStringToObject(o, "data", text);
	cJSON_AddStringToObject(o, "stream", to->is_err ? "stderr" : "stdout");
	hutch_sse_event(&to->r->sse, "output", o);
}

/* Queue the complete lines of stream is_err; at the end all of it. */
static void queue_lines(struct request *r, bool is_err, bool end)
{
	struct exec_run *x = r->state;
	struct line_to to = { r, is_err };

	hutch_exec_lines(&x->line[is_err], end, LINE_MAX_BYTES, queue_line, &to);
}

static bool on_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct request *r = ud;
	struct exec_run *x = r->state;

	(void)hutch_buf_append(&x->line[is_err], buf, n);
	queue_lines(r, is_err, false);
	hutch_api_resume(r);
	return !hutch_sse_full(&r->sse);
}

/* /run: keep everything up to the bound; past it kill the command. */
static bool on_capture(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct request *r = ud;
	struct exec_run *x = r->state;
	struct hutch_buf *b = &x->line[is_err];

	if (x->over)
		return true; /* killed: what is left in the pipes is dropped */
	if (b->len + n > r->s->cfg->executor_max_output_bytes || hutch_buf_append(b, buf, n) < 0) {
		x->over = 1 + is_err;
		hutch_cmd_kill(c, SIGKILL, 0);
	}
	return true;
}

static void on_done(void *ud, struct cmd *c)
{
	hutch_api_resume(ud);
}

static void queue_end(struct request *r)
{
	struct cmd *c = r->cmd;
	struct sup *s = r->s;
	cJSON *o = cJSON_CreateObject();
	char msg[256];

	queue_lines(r, false, true);
	queue_lines(r, true, true);
	if (!o)
		return;
	if (s->state != SUP_RUNNING) {
		_cleanup_cjson_ cJSON *e = hutch_api_ended_json(s);
		const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "error"), "message");
		snprintf(msg, sizeof(msg), "%s", cJSON_IsString(m) ? m->valuestring : "ended");
		cJSON_AddStringToObject(o, "error", msg);
		hutch_sse_event(&r->sse, "error", o);
	} else if (c->spawn_error) {
		cJSON_AddStringToObject(o, "error", "Failed to start command");
		hutch_sse_event(&r->sse, "error", o);
	} else {
		cJSON_AddNumberToObject(o, "code", code_of(c));
		cJSON_AddBoolToObject(o, "error", code_of(c) != 0);
		hutch_sse_event(&r->sse, "complete", o);
	}
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	return hutch_api_sse_command(cls, buf, max, queue_end);
}

/* ---- both ---- */

static enum MHD_Result start_command(struct request *r, struct exec_run *x, bool streaming)
{
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	struct sup *s = r->s;
	struct hutch_cmd_sink sink = { .done = on_done, .ud = r };
	struct hutch_spawn sp;

	if (hutch_run_req_parse(x->cmd.body, x->cmd.len, s->cmdenv, &req, &err) < 0)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	sp = (struct hutch_spawn){
		.argv = (const char *const *)req.argv,
		.envp = (const char *const *)req.envp,
		.cwd = req.cwd,
	};
	sink.output = streaming ? on_output : on_capture;
	r->cmd = hutch_cmd_start(&s->cmds, &sp, &sink, &err);
	hutch_run_req_done(&req);
	if (!r->cmd)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_INTERNAL, NULL,
		                             "Failed to start command");
	hutch_api_kill_on_hangup(r, r->cmd);
	if (streaming)
		return hutch_api_respond_sse(r, stream_reader);
	hutch_api_suspend(r);
	return MHD_YES;
}

static enum MHD_Result finish_run(struct request *r)
{
	struct exec_run *x = r->state;
	struct cmd *c = r->cmd;
	struct sup *s = r->s;
	_cleanup_free_ char *out = NULL, *err = NULL;
	enum MHD_Result ret;
	cJSON *o;

	if (hutch_api_cmd_wait(r, c, &ret))
		return ret;
	if (c->spawn_error)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_INTERNAL, NULL,
		                             "Failed to start command");
	if (x->over) {
		char msg[384];
		snprintf(msg, sizeof(msg),
		         "the command wrote more than %llu bytes to %s, the sandbox's "
		         "executor_max_output_bytes, and was killed: raise it with hutch create "
		         "--executor-max-output B or LocalSandbox(executor_max_output_bytes=B) "
		         "(at most %llu), or read large output through a file",
		         (unsigned long long)s->cfg->executor_max_output_bytes,
		         x->over == 2 ? "stderr" : "stdout", HUTCH_MAX_EXEC_MAX_OUTPUT);
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_LIMIT, "output_over", msg);
	}
	out = hutch_utf8_sanitize(x->line[0].data ? x->line[0].data : "", x->line[0].len, NULL);
	err = hutch_utf8_sanitize(x->line[1].data ? x->line[1].data : "", x->line[1].len, NULL);
	o = out && err ? cJSON_CreateObject() : NULL;
	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "stdout", out);
	cJSON_AddStringToObject(o, "stderr", err);
	if (code_of(c) != 0)
		cJSON_AddStringToObject(o, "error", "Non-zero exit code");
	cJSON_AddNumberToObject(o, "code", code_of(c));
	/* hutch's extra (docs/api.md): the cloud's client reads the fields
	 * above by name and ignores the rest. */
	if (c->changes)
		cJSON_AddItemToObject(o, "changes", cJSON_Duplicate(c->changes, true));
	if (c->egress)
		cJSON_AddItemToObject(o, "egress", cJSON_Duplicate(c->egress, true));
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result serve(struct request *r, bool streaming)
{
	struct exec_run *x = r->state;

	if (r->cmd)
		return finish_run(r);
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return MHD_NO;
		hutch_buf_init(&x->line[0], SIZE_MAX);
		hutch_buf_init(&x->line[1], SIZE_MAX);
		r->state = x;
		r->state_free = run_free;
		if (hutch_exec_cmd_parse(r, &x->cmd) < 0)
			return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
			                             HUTCH_EXEC_INVALID);
	}
	if (!hutch_exec_cmd_checked(r, &x->cmd))
		return MHD_YES; /* suspended, or answered */
	return start_command(r, x, streaming);
}

enum MHD_Result hutch_exec_serve_run(struct request *r, const char *upload, size_t *size)
{
	return serve(r, false);
}

enum MHD_Result hutch_exec_serve_run_streaming(struct request *r, const char *upload, size_t *size)
{
	return serve(r, true);
}
