/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor's background processes (executor.h): POST /start_process
 * (201 {"id": UUID, "pid", "status": "running"}), GET /list_processes
 * ({"processes": [{"command", "id", "pid", "status"}]}), POST /kill_process
 * ({"success": true, "message": ...}, or 400 {"success": false, "error":
 * "process not found: ID" | "process is not running (status: S)"}) and
 * GET /process_logs_streaming?id=UUID (server-sent "log" events, one a
 * line, {"timestamp", "stream", "data"}: what is held first, stdout then
 * stderr, then lines as they come; "complete" when the process has ended).
 * Statuses: running, completed (exit 0), failed (another exit code),
 * killed (a signal: exit code -1).
 *
 * They are the native background processes (procs.h) seen through the
 * contract: the same table, named by the UUID each process also has; the
 * native API (/v1/) names them p<N> and gives the richer record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cleanup.h"
#include "executor.h"
#include "request.h"
#include "routes.h"
#include "supervisor.h"

/* A log line longer than this is sent in pieces (the ring holds 1 MiB). */
#define LOG_LINE_MAX (64u << 10)

#define STREAM_ENDED "{\"message\":\"stream ended\"}"

static const char *status_of(const struct hutch_proc *p)
{
	if (!p->done)
		return "running";
	if (p->error)
		return "failed";
	if (WIFSIGNALED(p->status))
		return "killed";
	return WEXITSTATUS(p->status) == 0 ? "completed" : "failed";
}

static void proc_wake(struct hutch_proc_wait *w)
{
	hutch_api_resume((struct request *)((char *)w - offsetof(struct request, pw)));
}

static enum MHD_Result wait_for_change(struct request *r)
{
	r->pw.wake = proc_wake;
	hutch_proc_wait_add(r->s, &r->pw);
	hutch_api_suspend(r);
	return MHD_YES;
}

static enum MHD_Result error_500(struct request *r, const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "error", msg);
	return hutch_exec_respond_json(r->conn, hutch_api_status(HUTCH_ERRC_INTERNAL, NULL), o);
}

/* ---- POST /start_process ---- */

static void start_free(void *p)
{
	hutch_exec_cmd_done(p);
	free(p);
}

static enum MHD_Result start_answer(struct request *r)
{
	struct hutch_proc *p = hutch_proc_find_num(r->s, r->pw.num);
	cJSON *o;

	if (p && !p->pid && !p->done)
		return wait_for_change(r);
	if (!p || p->error)
		return error_500(r, p && p->error ? p->error : "failed to start command");
	o = cJSON_CreateObject();
	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "id", p->uuid);
	cJSON_AddNumberToObject(o, "pid", p->pid);
	cJSON_AddStringToObject(o, "status", "running");
	return hutch_exec_respond_json(r->conn, MHD_HTTP_CREATED, o);
}

enum MHD_Result hutch_exec_serve_start_process(struct request *r, const char *upload, size_t *size)
{
	struct hutch_exec_cmd *x = r->state;
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	struct hutch_proc *p;

	if (r->pw.started)
		return start_answer(r);
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return MHD_NO;
		r->state = x;
		r->state_free = start_free;
		if (hutch_exec_cmd_parse(r, x) < 0)
			return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
			                             HUTCH_EXEC_INVALID);
		if (x->empty)
			return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
			                             "Command is required");
	}
	if (!hutch_exec_cmd_checked(r, x))
		return MHD_YES;
	if (hutch_start_req_parse(x->body, x->len, r->s->cmdenv, &req, &err) < 0)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	p = hutch_proc_start(r->s, req.argv[2], (const char *const *)req.argv,
	                     (const char *const *)req.envp, req.cwd, false, &err);
	hutch_run_req_done(&req);
	if (!p)
		return error_500(r, err.msg);
	r->pw.started = true;
	r->pw.num = p->num;
	return start_answer(r);
}

/* ---- GET /list_processes ---- */

enum MHD_Result hutch_exec_serve_list_processes(struct request *r, const char *upload, size_t *size)
{
	cJSON *o = cJSON_CreateObject(), *arr;

	if (!o)
		return MHD_NO;
	arr = cJSON_AddArrayToObject(o, "processes");
	for (struct hutch_proc *p = r->s->procs ? r->s->procs->head : NULL; p; p = p->next) {
		cJSON *e = cJSON_CreateObject();
		if (!e)
			break;
		cJSON_AddStringToObject(e, "command", p->command);
		cJSON_AddStringToObject(e, "id", p->uuid);
		cJSON_AddNumberToObject(e, "pid", p->pid);
		cJSON_AddStringToObject(e, "status", status_of(p));
		cJSON_AddItemToArray(arr, e);
	}
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

/* ---- POST /kill_process ---- */

static enum MHD_Result kill_answer(struct request *r, bool ok, const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return MHD_NO;
	cJSON_AddBoolToObject(o, "success", ok);
	cJSON_AddStringToObject(o, ok ? "message" : "error", msg);
	return hutch_exec_respond_json(
	        r->conn, ok ? MHD_HTTP_OK : hutch_api_status(HUTCH_ERRC_USAGE, NULL), o);
}

enum MHD_Result hutch_exec_serve_kill_process(struct request *r, const char *upload, size_t *size)
{
	_cleanup_cjson_ cJSON *in = NULL;
	struct hutch_proc *p;
	bool bad = false;
	const char *id;
	char msg[128];

	if (r->pw.started) {
		/* SIGKILL sent: answer once it is dead, so that a listing right
		 * after says "killed". */
		p = hutch_proc_find_num(r->s, r->pw.num);
		if (p && !p->done)
			return wait_for_change(r);
		return kill_answer(r, true, "Process killed successfully");
	}
	if (hutch_exec_body(r, (const char *const[]){ "id", NULL }, &in) < 0)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	id = hutch_exec_string(in, "id", &bad);
	if (bad)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	if (!*id)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
		                             "Process ID is required");
	p = hutch_proc_find(r->s, id);
	if (!p) {
		snprintf(msg, sizeof(msg), "process not found: %.64s", id);
		return kill_answer(r, false, msg);
	}
	if (p->done) {
		snprintf(msg, sizeof(msg), "process is not running (status: %s)", status_of(p));
		return kill_answer(r, false, msg);
	}
	hutch_proc_kill(p, 0); /* the executor sends SIGKILL; we send it to the tree */
	r->pw.started = true;
	r->pw.num = p->num;
	return wait_for_change(r);
}

/* ---- GET /process_logs_streaming ---- */

struct exec_logs {
	unsigned num;
	bool found, ended;
	uint64_t off[2];
	struct hutch_buf line[2];
};

static void logs_free(void *p)
{
	struct exec_logs *x = p;

	if (!x)
		return;
	hutch_buf_done(&x->line[0]);
	hutch_buf_done(&x->line[1]);
	free(x);
}

/* RFC 3339 with nanoseconds, trailing zeros cut (Go's time.RFC3339Nano). */
static void timestamp(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	char frac[16];
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(frac, sizeof(frac), ".%09ld", ts.tv_nsec);
	for (n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	if (n == 1)
		frac[0] = '\0';
	n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, size - n, "%sZ", frac);
}

struct line_to {
	struct request *r;
	bool is_err;
};

static void queue_log(void *ud, const char *p, size_t n)
{
	const struct line_to *to = ud;
	_cleanup_free_ char *text = NULL;
	char when[48];
	cJSON *o;

	/* bufio.ScanLines: the "\n" and one "\r" before it go. */
	if (n && p[n - 1] == '\n')
		n--;
	if (n && p[n - 1] == '\r')
		n--;
	text = hutch_utf8_sanitize(p, n, NULL);
	o = text ? cJSON_CreateObject() : NULL;
	if (!o)
		return;
	timestamp(when, sizeof(when));
	cJSON_AddStringToObject(o, "timestamp", when);
	cJSON_AddStringToObject(o, "stream", to->is_err ? "stderr" : "stdout");
	cJSON_AddStringToObject(o, "data", text);
	hutch_sse_event(&to->r->sse, "log", o);
}

/* Move what the process wrote since last time into events, line by line. */
static void pull(struct request *r, struct exec_logs *x, struct hutch_proc *p, bool end)
{
	for (int i = 0; i < 2 && !hutch_sse_full(&r->sse); i++) {
		const struct hutch_ring *ring = i ? &p->err : &p->out;
		struct hutch_buf *b = &x->line[i];
		size_t n;
		char *tmp;

		if (x->off[i] < ring->start)
			x->off[i] = ring->start; /* overwritten meanwhile */
		n = (size_t)(ring->total - x->off[i]);
		tmp = n ? malloc(n) : NULL;
		if (tmp) {
			n = hutch_ring_read(ring, x->off[i], tmp, n);
			(void)hutch_buf_append(b, tmp, n);
			x->off[i] += n;
			free(tmp);
		}
		hutch_exec_lines(b, end, LOG_LINE_MAX, queue_log, &(struct line_to){ r, i });
	}
}

static ssize_t logs_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *r = cls;
	struct exec_logs *x = r->state;
	struct hutch_proc *p = hutch_proc_find_num(r->s, x->num);
	ssize_t n;

	if (!x->ended && p && x->found) {
		pull(r, x, p, false);
		if (p->done && x->off[0] == p->out.total && x->off[1] == p->err.total &&
		    !hutch_sse_full(&r->sse)) {
			pull(r, x, p, true); /* the last lines without an end */
			hutch_sse_event(&r->sse, "complete", cJSON_Parse(STREAM_ENDED));
			x->ended = true;
		}
	} else if (!x->ended) {
		/* Not found (the error event is queued), or dropped from the
		 * list meanwhile. */
		if (x->found)
			hutch_sse_event(&r->sse, "complete", cJSON_Parse(STREAM_ENDED));
		x->ended = true;
	}
	n = hutch_sse_read(&r->sse, buf, max);
	if (n > 0)
		return n;
	if (x->ended || r->s->state != SUP_RUNNING)
		return MHD_CONTENT_READER_END_OF_STREAM;
	r->pw.wake = proc_wake;
	hutch_proc_wait_add(r->s, &r->pw);
	hutch_api_suspend(r);
	return 0;
}

enum MHD_Result hutch_exec_serve_logs_streaming(struct request *r, const char *upload, size_t *size)
{
	const char *id = hutch_mhd.lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "id");
	struct exec_logs *x;
	struct hutch_proc *p;
	char msg[160];

	if (!id || !*id)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
		                             "Process ID is required");
	x = calloc(1, sizeof(*x));
	if (!x)
		return MHD_NO;
	hutch_buf_init(&x->line[0], SIZE_MAX);
	hutch_buf_init(&x->line[1], SIZE_MAX);
	r->state = x;
	r->state_free = logs_free;
	p = hutch_proc_find(r->s, id);
	if (p) {
		x->found = true;
		x->num = p->num;
	} else {
		cJSON *o = cJSON_CreateObject();
		snprintf(msg, sizeof(msg), "process not found: %.64s", id);
		cJSON_AddStringToObject(o, "error", msg);
		hutch_sse_event(&r->sse, "error", o);
	}
	return hutch_api_respond_sse(r, logs_reader);
}
