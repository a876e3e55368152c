/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP handlers of the background-process endpoints: POST /start_process,
 * GET /list_processes, POST /kill_process, GET /process_output, POST
 * /process_stdin (reference: docs/api.md). A handler that must wait leaves its request queued
 * (w->queued) and suspended; a wake-up resumes it and api.c calls the
 * handler again, which looks at the process afresh. Request bodies and
 * query strings are hostile input: strictly typed, unknown fields refused.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "base64.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "fields.h"
#include "mhd.h"
#include "procs.h"
#include "request.h"
#include "routes.h"
#include "supervisor.h"

static enum MHD_Result not_found(struct MHD_Connection *conn, const char *id)
{
	return hutch_api_refuse(
	        conn, HUTCH_ERRC_NOT_FOUND, "process_not_found",
	        "no background process '%.32s' in this sandbox (see GET /list_processes)", id);
}

static const struct hutch_field kill_fields[] = {
	{ "id", HUTCH_FIELD_STRING, HUTCH_FIELD_REQUIRED | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "missing 'id' (a process id such as \"p1\")" },
	{ "grace_seconds", HUTCH_FIELD_NUMBER, HUTCH_FIELD_NULLABLE, 0, HUTCH_PROC_GRACE_MAX,
	  "'grace_seconds' must be a number from 0 to {max}" },
};

/* Parse the body of /kill_process: {"id": "p1", "grace_seconds": 5}. */
static int parse_kill(const char *body, size_t len, char *id, size_t idsize, double *grace,
                      struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *jid, *jg;

	if (hutch_fields_check_text(body, len, err) < 0)
		return -EINVAL;
	j = cJSON_ParseWithLength(body, len);
	if (!j || !cJSON_IsObject(j))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "the request body must be a JSON object: {\"id\": \"p1\"}");
	if (hutch_fields_check(j, kill_fields, ELEMENTSOF(kill_fields), HUTCH_FIELDS_LIST_KNOWN,
	                       err) < 0)
		return -EINVAL;
	jid = cJSON_GetObjectItemCaseSensitive(j, "id");
	jg = cJSON_GetObjectItemCaseSensitive(j, "grace_seconds");
	if (strlen(jid->valuestring) >= idsize)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "'id' is too long");
	strcpy(id, jid->valuestring);
	*grace = cJSON_IsNumber(jg) ? jg->valuedouble : HUTCH_PROC_GRACE_DEFAULT;
	return 0;
}

/* What to show as the command: the shell string, or the argv joined. */
static char *command_text(const char *body, size_t len, char *const *argv)
{
	_cleanup_cjson_ cJSON *j = cJSON_ParseWithLength(body, len);
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(j, "cmd");
	size_t n = 1;
	char *s;

	if (cJSON_IsString(cmd))
		return strdup(cmd->valuestring);
	for (char *const *a = argv; *a; a++)
		n += strlen(*a) + 1;
	s = calloc(1, n);
	for (char *const *a = argv; s && *a; a++) {
		if (a != argv)
			strcat(s, " ");
		strcat(s, *a);
	}
	return s;
}

static enum MHD_Result h_start(struct sup *s, struct MHD_Connection *conn, const char *body,
                               size_t len, struct hutch_proc_wait *w)
{
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	_cleanup_free_ char *command = NULL;
	struct hutch_proc *p;

	if (w->started) {
		/* Started before: answer once init reported the pid. */
		p = hutch_proc_find_num(s, w->num);
		if (p && !p->pid && !p->done) {
			hutch_proc_wait_add(s, w);
			return MHD_YES;
		}
		if (!p)
			return hutch_api_refuse(conn, HUTCH_ERRC_INTERNAL, "spawn_failed",
			                        "the process vanished");
		return hutch_api_respond_json(conn, MHD_HTTP_OK, hutch_proc_json(p));
	}
	if (hutch_start_req_parse(body, len, s->cmdenv, &req, &err) < 0)
		return hutch_api_respond_err(conn, &err, "invalid_request");
	command = command_text(body, len, req.argv);
	if (!command) {
		hutch_run_req_done(&req);
		return hutch_api_refuse(conn, HUTCH_ERRC_INTERNAL, NULL, "out of memory");
	}
	p = hutch_proc_start(s, command, (const char *const *)req.argv,
	                     (const char *const *)req.envp, req.cwd, req.stdin_open, &err);
	hutch_run_req_done(&req);
	/* A limit of a count: HTTP's finer 429 (base/error.c's table) rather than
	 * the class's 413, which a command too large gets. */
	if (!p && hutch_err_class(&err) == HUTCH_ERRC_LIMIT && err.code == -EAGAIN)
		return hutch_api_respond_err(conn, &err, "too_many_processes");
	if (!p)
		return hutch_api_respond_err(conn, &err, hutch_api_spawn_code(&err));
	w->started = true;
	w->num = p->num;
	hutch_proc_wait_add(s, w);
	return MHD_YES;
}

static enum MHD_Result h_list(struct sup *s, struct MHD_Connection *conn)
{
	cJSON *o = cJSON_CreateObject(), *arr;

	if (!o)
		return MHD_NO;
	arr = cJSON_AddArrayToObject(o, "processes");
	for (struct hutch_proc *p = s->procs ? s->procs->head : NULL; p; p = p->next)
		cJSON_AddItemToArray(arr, hutch_proc_json(p));
	return hutch_api_respond_json(conn, MHD_HTTP_OK, o);
}

static enum MHD_Result h_kill(struct sup *s, struct MHD_Connection *conn, const char *body,
                              size_t len, struct hutch_proc_wait *w)
{
	struct hutch_err err = { 0 };
	struct hutch_proc *p;
	char id[32];
	double grace = 0;

	if (w->started) {
		/* Signalled before: answer once it is dead. */
		p = hutch_proc_find_num(s, w->num);
		if (p && !p->done) {
			hutch_proc_wait_add(s, w);
			return MHD_YES;
		}
		if (!p)
			return hutch_api_refuse(conn, HUTCH_ERRC_NOT_FOUND, "process_not_found",
			                        "process p%u ended and was dropped from the list",
			                        w->num);
		return hutch_api_respond_json(conn, MHD_HTTP_OK, hutch_proc_json(p));
	}
	if (parse_kill(body, len, id, sizeof(id), &grace, &err) < 0)
		return hutch_api_respond_err(conn, &err, "invalid_request");
	p = hutch_proc_find(s, id);
	if (!p)
		return not_found(conn, id);
	if (p->done) {
		char when[40];
		hutch_format_time(p->ended_at, when, sizeof(when));
		return hutch_api_refuse(conn, HUTCH_ERRC_CONFLICT, "process_not_running",
		                        "process %s is not running: it %s at %s", id,
		                        p->kill_requested ? "was killed" : "exited", when);
	}
	hutch_proc_kill(p, grace);
	w->started = true;
	w->num = p->num;
	hutch_proc_wait_add(s, w);
	return MHD_YES;
}

struct output_args {
	const char *id;
	bool is_err, base64;
	uint64_t offset;
	double wait;
};

static int parse_output_args(struct MHD_Connection *conn, struct output_args *a,
                             struct hutch_err *err)
{
	const char *stream =
	        hutch_mhd.lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "stream");
	const char *off = hutch_mhd.lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "offset");
	const char *enc =
	        hutch_mhd.lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "encoding");
	const char *wait = hutch_mhd.lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "wait");
	char *end;

	a->id = hutch_mhd.lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "id");
	if (!a->id || !*a->id)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "missing query parameter 'id' (?id=p1)");
	if (stream && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'stream' must be stdout or stderr");
	a->is_err = stream && !strcmp(stream, "stderr");
	if (enc && strcmp(enc, "utf-8") != 0 && strcmp(enc, "base64") != 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'encoding' must be utf-8 or base64");
	a->base64 = enc && !strcmp(enc, "base64");
	a->offset = 0;
	if (off) {
		errno = 0;
		a->offset = strtoull(off, &end, 10);
		if (!*off || *off == '-' || *end || errno)
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'offset' must be a byte count (0 or more)");
	}
	a->wait = 0;
	if (wait && !strcmp(wait, "true")) {
		a->wait = 30;
	} else if (wait && strcmp(wait, "false") != 0) {
		a->wait = strtod(wait, &end);
		if (!*wait || *end || !isfinite(a->wait) || a->wait < 0 ||
		    a->wait > HUTCH_PROC_WAIT_MAX)
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'wait' must be true, false or seconds from 0 to %g",
			        HUTCH_PROC_WAIT_MAX);
	}
	return 0;
}

static cJSON *output_json(struct hutch_proc *p, const struct output_args *a)
{
	const struct hutch_ring *r = a->is_err ? &p->err : &p->out;
	uint64_t start = a->offset > r->start ? a->offset : r->start;
	size_t n = (size_t)(r->total - start), carry = 0;
	_cleanup_free_ char *buf = malloc(n + 1), *data = NULL;
	cJSON *o;
	char id[16];

	if (!buf)
		return NULL;
	n = hutch_ring_read(r, start, buf, n);
	if (a->base64) {
		data = hutch_base64_encode(buf, n);
	} else {
		/* Hold back a sequence cut by the end of what is written so
		 * far: it is sent whole with the next read. */
		data = hutch_utf8_sanitize(buf, n, p->done ? NULL : &carry);
		if (carry > 3)
			carry = 0;
	}
	o = data ? cJSON_CreateObject() : NULL;
	if (!o)
		return NULL;
	snprintf(id, sizeof(id), "p%u", p->num);
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "stream", a->is_err ? "stderr" : "stdout");
	cJSON_AddNumberToObject(o, "offset", (double)start);
	cJSON_AddNumberToObject(o, "next_offset", (double)(start + n - carry));
	cJSON_AddNumberToObject(o, "dropped", (double)(start - a->offset));
	cJSON_AddStringToObject(o, "encoding", a->base64 ? "base64" : "utf-8");
	cJSON_AddStringToObject(o, "data", data);
	cJSON_AddStringToObject(o, "status",
	                        !p->done            ? "running"
	                        : p->kill_requested ? "killed"
	                                            : "exited");
	cJSON_AddBoolToObject(o, "eof", p->done && start + n - carry == r->total);
	return o;
}

static enum MHD_Result h_output(struct sup *s, struct MHD_Connection *conn,
                                struct hutch_proc_wait *w)
{
	struct output_args a = { 0 };
	struct hutch_err err = { 0 };
	const struct hutch_ring *r;
	struct hutch_proc *p;
	cJSON *o;

	if (parse_output_args(conn, &a, &err) < 0)
		return hutch_api_respond_err(conn, &err, "invalid_request");
	p = hutch_proc_find(s, a.id);
	if (!p)
		return not_found(conn, a.id);
	r = a.is_err ? &p->err : &p->out;
	if (a.offset > r->total)
		return hutch_api_refuse(
		        conn, HUTCH_ERRC_USAGE, "invalid_request",
		        "'offset' %llu is past the end of %s (%llu bytes written so far)",
		        (unsigned long long)a.offset, a.is_err ? "stderr" : "stdout",
		        (unsigned long long)r->total);
	if (a.offset == r->total && !p->done && a.wait > 0) {
		int64_t now = hutch_now_mono_ms();
		if (!w->started) {
			w->started = true;
			w->deadline_ms = now + (int64_t)(a.wait * 1000);
		}
		if (now < w->deadline_ms) {
			hutch_proc_wait_add(s, w);
			return MHD_YES;
		}
	}
	o = output_json(p, &a);
	if (!o)
		return hutch_api_refuse(conn, HUTCH_ERRC_INTERNAL, NULL, "out of memory");
	return hutch_api_respond_json(conn, MHD_HTTP_OK, o);
}

static void proc_wake(struct hutch_proc_wait *w)
{
	hutch_api_resume((struct request *)((char *)w - offsetof(struct request, pw)));
}

/* Answer, or leave r waiting (suspended) until a process changes. */
static enum MHD_Result serve(struct request *r, enum MHD_Result ret)
{
	if (r->pw.queued)
		hutch_api_suspend(r);
	else
		r->answered = true;
	return ret == MHD_YES ? MHD_YES : MHD_NO;
}

enum MHD_Result hutch_api_serve_start_process(struct request *r, const char *upload, size_t *size)
{
	r->pw.wake = proc_wake;
	return serve(r,
	             h_start(r->s, r->conn, r->body.data ? r->body.data : "", r->body.len, &r->pw));
}

enum MHD_Result hutch_api_serve_list_processes(struct request *r, const char *upload, size_t *size)
{
	r->pw.wake = proc_wake;
	return serve(r, h_list(r->s, r->conn));
}

enum MHD_Result hutch_api_serve_kill_process(struct request *r, const char *upload, size_t *size)
{
	r->pw.wake = proc_wake;
	return serve(r,
	             h_kill(r->s, r->conn, r->body.data ? r->body.data : "", r->body.len, &r->pw));
}

enum MHD_Result hutch_api_serve_process_output(struct request *r, const char *upload, size_t *size)
{
	r->pw.wake = proc_wake;
	return serve(r, h_output(r->s, r->conn, &r->pw));
}

/* ---- POST /process_stdin?id=p1[&eof=true]: the raw body to its stdin ---- */

/* A stdin request's own state: the answer is given once the whole body
 * is read (a refusal drops the rest of it first). */
struct stdin_req {
	unsigned status; /* an answer decided before the body's end, 0: none */
	cJSON *answer;
	bool eof, broken, claimed;
	uint64_t moved; /* bytes of this request written */
};

static void stdin_req_free(void *state)
{
	struct stdin_req *sr = state;

	cJSON_Delete(sr->answer);
	free(sr);
}

static void stdin_refuse(struct stdin_req *sr, unsigned status, const char *code, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));

static void stdin_refuse(struct stdin_req *sr, unsigned status, const char *code, const char *fmt,
                         ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sr->status = status;
	sr->answer = hutch_api_error_json(code, msg);
}

/* The first call: which process, and may we write to it. */
static void stdin_begin(struct request *r, struct stdin_req *sr)
{
	const char *id = hutch_mhd.lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "id");
	const char *eof = hutch_mhd.lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "eof");
	struct hutch_proc *p;

	if (!id || !*id)
		return stdin_refuse(sr, 400, "invalid_request",
		                    "missing query parameter 'id' (?id=p1)");
	if (eof && strcmp(eof, "true") != 0 && strcmp(eof, "false") != 0)
		return stdin_refuse(sr, 400, "invalid_request", "'eof' must be true or false");
	sr->eof = eof && !strcmp(eof, "true");
	p = hutch_proc_find(r->s, id);
	if (!p)
		return stdin_refuse(sr, 404, "process_not_found",
		                    "no background process '%.32s' in this sandbox (see GET "
		                    "/list_processes)",
		                    id);
	r->pw.num = p->num;
	r->pw.started = true;
	if (!p->stdin_kept)
		return stdin_refuse(sr, 409, "stdin_closed",
		                    "process %s was started without \"stdin\": true: its standard "
		                    "input was at end of file from the start",
		                    id);
	if (p->stdin_writer)
		return stdin_refuse(
		        sr, 409, "stdin_busy",
		        "another request is writing to the standard input of process %s: "
		        "send one after the other",
		        id);
	sr->claimed = true; /* one writer at a time, so pieces never interleave */
	p->stdin_writer = &r->pw;
	hutch_api_kill_on_hangup(r, NULL); /* a writer waiting for room may go */
}

/* Write what the body brought; what the pipe does not take stays with
 * libmicrohttpd, the request suspended until the pipe has room. */
static enum MHD_Result stdin_put(struct request *r, struct stdin_req *sr, struct hutch_proc *p,
                                 const char *data, size_t *size)
{
	if (r->hung_up)
		sr->broken = true; /* the client is gone: nobody to answer */
	while (*size > 0 && !sr->broken) {
		ssize_t n = p ? hutch_proc_stdin_write(p, data, *size) : -EPIPE;

		if (n == -EAGAIN) {
			hutch_api_suspend(r);
			return MHD_YES;
		}
		if (n < 0) {
			sr->broken = true;
			break;
		}
		data += n;
		*size -= (size_t)n;
		sr->moved += (uint64_t)n;
	}
	*size = 0; /* all written, or dropped after stdin closed */
	return MHD_YES;
}

static enum MHD_Result stdin_finish(struct request *r, struct stdin_req *sr, struct hutch_proc *p)
{
	cJSON *o;
	char id[16];

	r->answered = true;
	if (p)
		p->stdin_writer = NULL;
	if (r->s->state != SUP_RUNNING)
		return hutch_api_respond_json(r->conn, (unsigned)hutch_errc_http(HUTCH_ERRC_GONE),
		                              hutch_api_ended_json(r->s));
	snprintf(id, sizeof(id), "p%u", r->pw.num);
	if (sr->broken || (!p && sr->moved) || (p && p->in_fd < 0 && (sr->moved || !sr->eof)))
		return hutch_api_refuse(
		        r->conn, HUTCH_ERRC_CONFLICT, "stdin_closed",
		        "the standard input of process %s is closed (%s): %llu bytes of this "
		        "request were written",
		        id,
		        !p || p->done ? "the process ended" : "closed before, or by the process",
		        (unsigned long long)sr->moved);
	if (sr->eof && p)
		hutch_proc_stdin_close(p);
	o = cJSON_CreateObject();
	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddNumberToObject(o, "stdin_bytes", p ? (double)p->stdin_bytes : 0);
	cJSON_AddBoolToObject(o, "stdin_open", p && p->in_fd >= 0);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

enum MHD_Result hutch_api_serve_process_stdin(struct request *r, const char *upload, size_t *size)
{
	struct stdin_req *sr = r->state;
	struct hutch_proc *p;

	r->pw.wake = proc_wake;
	if (!sr) {
		sr = calloc(1, sizeof(*sr));
		if (!sr)
			return MHD_NO;
		r->state = sr;
		r->state_free = stdin_req_free;
		if (r->s->state == SUP_RUNNING)
			stdin_begin(r, sr);
	}
	if (r->answered)
		return MHD_YES;
	if (sr->status) { /* refused: the body is read and dropped first */
		if (*size) {
			*size = 0;
			return MHD_YES;
		}
		r->answered = true;
		return hutch_api_respond_json(r->conn, sr->status, TAKE_PTR(sr->answer));
	}
	p = sr->claimed ? hutch_proc_find_num(r->s, r->pw.num) : NULL;
	if (*size)
		return stdin_put(r, sr, p, upload, size);
	return stdin_finish(r, sr, p);
}
