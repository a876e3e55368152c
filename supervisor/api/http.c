/* SPDX-License-Identifier: Apache-2.0 */
/* What a route handler does with its request; see http.h. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include "api-conn.h"
#include "cleanup.h"
#include "error.h"
#include "http.h"
#include "journal.h"
#include "supervisor.h"

void hutch_api_journal_answered(struct MHD_Connection *conn, unsigned status)
{
	struct hutch_api_conn *c = conn_of(conn);

	/* (without a context: at its completion, on_completed()) */
	if (c && c->req && c->req->jrec) {
		hutch_journal_request_end(c->req->jrec, status);
		c->req->jrec = NULL;
	}
}

enum MHD_Result hutch_api_respond_buffer(struct MHD_Connection *conn, unsigned status,
                                         const char *type, const char *data, size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = hutch_mhd.create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (!strncmp(type, "text/plain", 10)) /* Go's http.Error */
		(void)hutch_mhd.add_response_header(resp, "X-Content-Type-Options", "nosniff");
	hutch_api_journal_answered(conn, status);
	ret = hutch_mhd.queue_response(conn, status, resp);
	hutch_mhd.destroy_response(resp);
	return ret;
}

enum MHD_Result hutch_api_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
	_cleanup_free_ char *text = j ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	if (!text)
		return MHD_NO;
	return hutch_api_respond_buffer(conn, status, "application/json", text, strlen(text));
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
	_cleanup_free_ char *body = NULL;

	if (asprintf(&body, "%s\n", text) < 0)
		return MHD_NO;
	return hutch_api_respond_buffer(conn, status, "text/plain; charset=utf-8", body,
	                                strlen(body));
}

enum MHD_Result hutch_api_respond_sse(struct request *r, MHD_ContentReaderCallback reader)
{
	struct MHD_Response *resp = hutch_mhd.create_response_from_callback(
	        MHD_SIZE_UNKNOWN, 64 * 1024, reader, r, NULL);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	                                    "text/event-stream");
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = hutch_mhd.queue_response(r->conn, MHD_HTTP_OK, resp);
	hutch_mhd.destroy_response(resp);
	r->answered = true;
	return ret;
}

cJSON *hutch_api_error_json(const char *code, const char *msg)
{
	cJSON *o = cJSON_CreateObject(), *e;

	if (!o)
		return NULL;
	e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", msg);
	return o;
}

unsigned hutch_api_status(enum hutch_errc cls, const char *code)
{
	return (unsigned)hutch_errc_status(cls, code);
}

enum MHD_Result hutch_api_refuse(struct MHD_Connection *conn, enum hutch_errc cls, const char *code,
                                 const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hutch_api_respond_json(
	        conn, hutch_api_status(cls, code),
	        hutch_api_error_json(code ? code : hutch_errc_name(cls), msg));
}

enum MHD_Result hutch_api_refuse_text(struct MHD_Connection *conn, enum hutch_errc cls,
                                      const char *code, const char *text)
{
	return respond_text(conn, hutch_api_status(cls, code), text);
}

cJSON *hutch_api_err_json(const struct hutch_err *err, const char *code, unsigned *ret_status)
{
	enum hutch_errc cls = hutch_err_class(err);

	*ret_status = hutch_api_status(cls, code);
	return hutch_api_error_json(code ? code : hutch_errc_name(cls), err->msg);
}

enum MHD_Result hutch_api_respond_err(struct MHD_Connection *conn, const struct hutch_err *err,
                                      const char *code)
{
	unsigned status;
	cJSON *j = hutch_api_err_json(err, code, &status);

	return hutch_api_respond_json(conn, status, j);
}

const char *hutch_api_spawn_code(const struct hutch_err *err)
{
	switch (hutch_err_class(err)) {
	case HUTCH_ERRC_LIMIT:
		return "too_large";
	case HUTCH_ERRC_GONE: /* init died before the loop saw it (cmd.c) */
		return "sandbox_deleted";
	default:
		return "spawn_failed";
	}
}

bool hutch_api_cmd_wait(struct request *r, const struct cmd *c, enum MHD_Result *ret)
{
	*ret = MHD_YES;
	if (c->state != CMD_DONE) {
		hutch_api_suspend(r);
		return true;
	}
	r->answered = true;
	if (r->s->state == SUP_RUNNING)
		return false;
	*ret = hutch_api_respond_ended(r->conn, r->s);
	return true;
}

enum MHD_Result hutch_api_respond_ended(struct MHD_Connection *conn, struct sup *s)
{
	return hutch_api_respond_json(conn, hutch_api_status(HUTCH_ERRC_GONE, NULL),
	                              hutch_api_ended_json(s));
}

cJSON *hutch_api_ended_json(struct sup *s)
{
	cJSON *o = cJSON_CreateObject(), *e;
	char at[40], msg[256];
	bool expired = s->end.reason && !strcmp(s->end.reason, "expired");

	hutch_format_time(s->end.at, at, sizeof(at));
	if (expired)
		snprintf(msg, sizeof(msg), "sandbox %s expired at %s (ttl_seconds %llu)", s->id, at,
		         (unsigned long long)s->cfg->ttl_seconds);
	else
		snprintf(msg, sizeof(msg), "sandbox %s %s at %s", s->id,
		         hutch_gone_words(s->end.reason), at);
	e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(e, "code", expired ? "sandbox_expired" : "sandbox_deleted");
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "at", at);
	return o;
}

void hutch_api_suspend(struct request *r)
{
	if (!r->suspended) {
		hutch_mhd.suspend_connection(r->conn);
		r->suspended = true;
	}
}

void hutch_api_wait_end(struct request *r)
{
	r->s->delete_pending = true;
	r->next_waiter = r->s->waiters;
	r->s->waiters = r;
	hutch_api_suspend(r);
}

void hutch_api_wait_done(struct request *r, bool waits_end)
{
	for (struct request **pp = &r->s->waiters; *pp; pp = &(*pp)->next_waiter)
		if (*pp == r) {
			*pp = r->next_waiter;
			break;
		}
	if (waits_end && !r->s->waiters)
		r->s->delete_pending = false;
}

void hutch_api_resume(struct request *r)
{
	if (r->suspended) {
		r->suspended = false;
		hutch_mhd.resume_connection(r->conn);
	}
}

static void on_hangup(struct hutch_watch *w, uint32_t events)
{
	struct request *r = w->ptr;

	/* Only a hang-up of both directions means the client is gone: a
	 * half-close (EPOLLRDHUP: curl -T -, nc -N, HTTP/1.0 clients) still
	 * waits for the answer (issue 18 #7). */
	if (!(events & (EPOLLHUP | EPOLLERR)))
		return;
	hutch_loop_del(&r->s->loop, w);
	r->hung_up = true;
	if (r->hangup_cmd && r->hangup_cmd->state != CMD_DONE)
		hutch_cmd_kill(r->hangup_cmd, SIGKILL, 0);
	else if (!r->hangup_cmd)
		hutch_api_resume(r); /* its handler sees hung_up and ends */
}

void hutch_api_kill_on_hangup(struct request *r, struct cmd *c)
{
	const union MHD_ConnectionInfo *ci =
	        hutch_mhd.get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	r->hangup_cmd = c;
	if (ci && ci->connect_fd >= 0)
		(void)hutch_loop_add(&r->s->loop, &r->w_conn, ci->connect_fd, 0); /* HUP, ERR */
}

void hutch_api_request_init(struct request *r, struct sup *s, struct MHD_Connection *conn)
{
	r->s = s;
	r->conn = conn;
	hutch_buf_init(&r->body, HUTCH_MAX_BODY);
	hutch_sse_init(&r->sse);
	hutch_watch_init(&r->w_conn, on_hangup, r);
}

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
	size_t *total = cls;

	*total += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

bool hutch_api_headers_too_large(struct MHD_Connection *conn)
{
	size_t total = 0;

	(void)hutch_mhd.get_connection_values(conn, MHD_HEADER_KIND, add_header_size, &total);
	return total > HUTCH_MAX_HEADERS;
}

/* The transfer codings of a request, in order, across its
 * Transfer-Encoding header lines. */
struct codings {
	unsigned n, chunked;
	unsigned unknown;
	bool chunked_last, with_length;
	char first_unknown[32];
};

static void add_codings(struct codings *c, const char *value)
{
	const char *p = value;

	while (*p) {
		size_t len;

		p += strspn(p, " \t,");
		len = strcspn(p, ",");
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (!len)
			continue;
		c->n++;
		c->chunked_last = len == 7 && !strncasecmp(p, "chunked", 7);
		if (c->chunked_last)
			c->chunked++;
		else if (!c->unknown++)
			snprintf(c->first_unknown, sizeof(c->first_unknown), "%.*s",
			         (int)(len < 31 ? len : 31), p);
		p += len;
	}
}

static enum MHD_Result collect_codings(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
	struct codings *c = cls;

	if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		add_codings(c, value ? value : "");
	else if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
		c->with_length = true;
	return MHD_YES;
}

int hutch_api_check_codings(struct MHD_Connection *conn, struct hutch_err *err)
{
	struct codings c = { 0 };

	(void)hutch_mhd.get_connection_values(conn, MHD_HEADER_KIND, collect_codings, &c);
	/* libmicrohttpd knows "chunked" alone; with any other value it reads
	 * the body until the client closes, so such a request was never
	 * answered (issue 18 #1). RFC 9112 6.1: an unknown coding is 501 (this
	 * server cannot), a body whose framing is unclear (chunked twice or
	 * not last, or with a Content-Length too) is 400 (the client's). */
	if (c.unknown)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EINVAL,
		                           "transfer coding '%s' is not implemented: send the "
		                           "body with Content-Length or 'Transfer-Encoding: "
		                           "chunked'",
		                           c.first_unknown);
	if (c.chunked > 1 || (c.n && !c.chunked_last) || (c.n && c.with_length))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "ambiguous request body: use 'Transfer-Encoding: "
		                           "chunked' once, or Content-Length alone");
	return 0;
}
