/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 + JSON API on the sandbox's unix socket, served by
 * libmicrohttpd inside the supervisor's epoll loop (MHD_USE_EPOLL without an
 * internal thread: its epoll fd sits in ours). A request waiting for a
 * command is suspended and resumed when the command finishes; a streaming
 * response suspends itself in its content reader when no event is queued.
 * docs/api.md is the reference for what is served here.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "api-files.h"
#include "api.h"
#include "claim.h"
#include "cleanup.h"
#include "idle.h"
#include "mhd.h"
#include "procs.h"
#include "request.h"
#include "sse.h"
#include "status.h"
#include "supervisor.h"

enum route {
	R_NONE,
	R_HEALTH,
	R_STATUS,
	R_RUN,
	R_RUN_STREAMING,
	R_DELETE,
	R_CLAIM,
	R_START_PROCESS, /* the four in enum hutch_procs_route's order */
	R_LIST_PROCESSES,
	R_KILL_PROCESS,
	R_PROCESS_OUTPUT,
};

struct request {
	struct sup *s;
	struct MHD_Connection *conn;
	enum route route;
	struct hutch_buf body;
	bool too_large;
	bool suspended;
	bool answered;
	struct cmd *cmd;             /* /run, /run_streaming */
	struct hutch_sse sse;        /* /run_streaming: events not yet sent */
	struct hutch_watch w_conn;   /* the client's socket while a command runs */
	struct cmd *hangup_cmd;      /* killed if the client hangs up */
	struct request *next_waiter; /* DELETE / waiting for the teardown */
	bool counted;                /* in s->requests_open (idle activity) */
	struct hutch_proc_wait pw;   /* background-process routes (api-procs.c) */
	int fop;                     /* file routes (api-files.c): operation, or < 0 */
	struct hutch_file_req *file;
	unsigned refuse_status; /* answer refuse (an error) once the body is read */
	cJSON *refuse;
};

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
	_cleanup_free_ char *text = j ? cJSON_PrintUnformatted(j) : NULL;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t len;

	cJSON_Delete(j);
	if (!text)
		return MHD_NO;
	len = strlen(text);
	text[len] = '\0';
	resp = hutch_mhd.create_response_from_buffer(len, text, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = hutch_mhd.queue_response(conn, status, resp);
	hutch_mhd.destroy_response(resp);
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

enum MHD_Result hutch_api_respond_error(struct MHD_Connection *conn, unsigned status,
                                        const char *code, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return respond_json(conn, status, hutch_api_error_json(code, msg));
}

static cJSON *ended_error_json(struct sup *s)
{
	cJSON *o = cJSON_CreateObject(), *e;
	char at[40], msg[256];
	bool expired = s->end.reason && !strcmp(s->end.reason, "expired");

	hutch_format_time(s->end.at, at, sizeof(at));
	if (expired)
		snprintf(msg, sizeof(msg), "sandbox %s expired at %s (ttl_seconds %llu)", s->id, at,
		         (unsigned long long)s->cfg->ttl_seconds);
	else
		snprintf(msg, sizeof(msg), "sandbox %s was %s at %s", s->id,
		         s->end.reason ? s->end.reason : "deleted", at);
	e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(e, "code", expired ? "sandbox_expired" : "sandbox_deleted");
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "at", at);
	return o;
}

static enum route match_route(const char *url, const char *method, bool *method_ok)
{
	static const struct {
		const char *url, *method;
		enum route route;
	} routes[] = {
		{ "/health", "GET", R_HEALTH },
		{ "/status", "GET", R_STATUS },
		{ "/run", "POST", R_RUN },
		{ "/run_streaming", "POST", R_RUN_STREAMING },
		{ "/start_process", "POST", R_START_PROCESS },
		{ "/list_processes", "GET", R_LIST_PROCESSES },
		{ "/kill_process", "POST", R_KILL_PROCESS },
		{ "/process_output", "GET", R_PROCESS_OUTPUT },
		{ "/", "DELETE", R_DELETE },
		{ "/claim", "POST", R_CLAIM },
	};
	*method_ok = false;
	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		if (strcmp(url, routes[i].url) != 0)
			continue;
		if (!strcmp(method, routes[i].method)) {
			*method_ok = true;
			return routes[i].route;
		}
		return R_NONE;
	}
	return R_NONE;
}

static void suspend(struct request *r)
{
	if (!r->suspended) {
		hutch_mhd.suspend_connection(r->conn);
		r->suspended = true;
	}
}

static void resume(struct request *r)
{
	if (r->suspended) {
		r->suspended = false;
		hutch_mhd.resume_connection(r->conn);
	}
}

/* Content reader of /run_streaming. */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *r = cls;
	struct cmd *c = r->cmd;
	struct sup *s = r->s;
	ssize_t n;

	if (!c)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (c->state == CMD_DONE && !r->sse.end_queued) {
		if (s->state != SUP_RUNNING)
			hutch_sse_event(&r->sse, "error", ended_error_json(s));
		else
			hutch_sse_event(&r->sse, "exit", hutch_cmd_result_json(c, false));
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
	suspend(r);
	return 0;
}

static bool on_sse_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct request *r = ud;

	hutch_sse_output(&r->sse, is_err, buf, n);
	resume(r);
	return !hutch_sse_full(&r->sse);
}

static void on_cmd_done(void *ud, struct cmd *c)
{
	struct request *r = ud;

	hutch_sse_flush(&r->sse); /* an incomplete UTF-8 sequence at the end */
	resume(r);
}

static void on_hangup(struct hutch_watch *w, uint32_t events)
{
	struct request *r = w->ptr;

	if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	hutch_loop_del(&r->s->loop, w);
	if (r->hangup_cmd && r->hangup_cmd->state != CMD_DONE)
		hutch_cmd_kill(r->hangup_cmd, SIGKILL, 0);
}

void hutch_api_kill_on_hangup(struct request *r, struct cmd *c)
{
	const union MHD_ConnectionInfo *ci =
	        hutch_mhd.get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	r->hangup_cmd = c;
	if (ci && ci->connect_fd >= 0)
		(void)hutch_loop_add(&r->s->loop, &r->w_conn, ci->connect_fd, EPOLLRDHUP);
}

static enum MHD_Result start_command(struct request *r, bool streaming)
{
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	struct sup *s = r->s;
	struct hutch_cmd_sink sink = { .done = on_cmd_done, .ud = r };
	struct hutch_spawn sp;
	struct cmd *c;

	if (hutch_run_req_parse(r->body.data ? r->body.data : "", r->body.len, &req, &err) < 0)
		return hutch_api_respond_error(r->conn, err.code == -ENOMEM ? 500 : 400,
		                               "invalid_request", "%s", err.msg);
	sp = (struct hutch_spawn){
		.argv = (const char *const *)req.argv,
		.envp = (const char *const *)req.envp,
		.cwd = req.cwd,
		.stdin_data = req.stdin_data,
		.stdin_len = req.stdin_len,
		.timeout = req.timeout,
		.max_output = req.max_output ? req.max_output : s->cfg->max_output_bytes,
	};
	if (streaming) {
		sink.output = on_sse_output;
		sp.max_output = 0; /* nothing captured */
	}
	c = hutch_cmd_start(&s->cmds, &sp, &sink, &err);
	hutch_run_req_done(&req);
	if (!c)
		return hutch_api_respond_error(r->conn, err.code == -E2BIG ? 413 : 500,
		                               err.code == -E2BIG ? "too_large" : "spawn_failed",
		                               "%s", err.msg);
	r->cmd = c;
	/* Watch the client's socket: if it hangs up, the command is killed. */
	hutch_api_kill_on_hangup(r, c);
	if (streaming) {
		struct MHD_Response *resp = hutch_mhd.create_response_from_callback(
		        MHD_SIZE_UNKNOWN, 64 * 1024, sse_reader, r, NULL);
		enum MHD_Result ret;
		if (!resp)
			return MHD_NO;
		(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                                    "text/event-stream");
		(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
		                                    "no-cache");
		ret = hutch_mhd.queue_response(r->conn, MHD_HTTP_OK, resp);
		hutch_mhd.destroy_response(resp);
		r->answered = true;
		return ret;
	}
	suspend(r);
	return MHD_YES;
}

static enum MHD_Result finish_run(struct request *r)
{
	struct cmd *c = r->cmd;
	struct sup *s = r->s;
	cJSON *res;

	if (c->state != CMD_DONE) {
		suspend(r);
		return MHD_YES;
	}
	r->answered = true;
	if (s->state != SUP_RUNNING)
		return respond_json(r->conn, MHD_HTTP_GONE, ended_error_json(s));
	res = hutch_cmd_result_json(c, true);
	if (c->spawn_error)
		cJSON_AddStringToObject(res, "error", c->spawn_error);
	return respond_json(r->conn, MHD_HTTP_OK, res);
}

static void proc_wake(struct hutch_proc_wait *w)
{
	resume((struct request *)((char *)w - offsetof(struct request, pw)));
}

/* Background-process routes: api-procs.c answers or leaves r waiting. */
static enum MHD_Result procs_route(struct request *r)
{
	int ret;

	r->pw.wake = proc_wake;
	ret = hutch_api_procs(r->s, r->conn, (enum hutch_procs_route)(r->route - R_START_PROCESS),
	                      r->body.data ? r->body.data : "", r->body.len, &r->pw);
	if (r->pw.queued)
		suspend(r);
	else
		r->answered = true;
	return ret == MHD_YES ? MHD_YES : MHD_NO;
}

/* POST /claim: a pooled sandbox starts its session (claim.c). */
static enum MHD_Result claim(struct request *r)
{
	_cleanup_cjson_ cJSON *body = cJSON_ParseWithLength(r->body.data ? r->body.data : "{}",
	                                                    r->body.data ? r->body.len : 2);
	struct hutch_err err = { 0 };
	cJSON *o;

	if (!body)
		return hutch_api_respond_error(r->conn, MHD_HTTP_BAD_REQUEST, "invalid_json",
		                               "the body is not JSON");
	o = hutch_sup_claim(r->s, body, &err);
	if (!o)
		return hutch_api_respond_error(
		        r->conn, err.code == -EALREADY ? MHD_HTTP_CONFLICT : MHD_HTTP_BAD_REQUEST,
		        err.code == -EALREADY ? "not_pooled" : "invalid_request", "%s", err.msg);
	return respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result dispatch(struct request *r)
{
	struct sup *s = r->s;

	if (r->too_large)
		return hutch_api_respond_error(r->conn, 413, "too_large",
		                               "request body larger than %u bytes", HUTCH_MAX_BODY);
	if (s->state != SUP_RUNNING && r->route != R_HEALTH)
		return respond_json(r->conn, MHD_HTTP_GONE, ended_error_json(s));
	switch (r->route) {
	case R_HEALTH: {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "status", s->state == SUP_RUNNING ? "ok" : "closing");
		return respond_json(r->conn, MHD_HTTP_OK, o);
	}
	case R_STATUS:
		return respond_json(r->conn, MHD_HTTP_OK, hutch_sup_status_json(s));
	case R_RUN:
		return start_command(r, false);
	case R_RUN_STREAMING:
		return start_command(r, true);
	case R_START_PROCESS:
	case R_LIST_PROCESSES:
	case R_KILL_PROCESS:
	case R_PROCESS_OUTPUT:
		return procs_route(r);
	case R_CLAIM:
		return claim(r);
	case R_DELETE:
		s->delete_pending = true;
		r->next_waiter = s->waiters;
		s->waiters = r;
		suspend(r);
		return MHD_YES;
	default:
		return MHD_NO;
	}
}

/* Requests answered with an error without being served: a pooled sandbox
 * serves nobody until it is claimed; unknown routes and methods. */
static void refuse_early(struct request *r, const char *url, const char *method, bool method_ok)
{
	struct sup *s = r->s;
	enum route route = r->route;
	char msg[512];

	if (s->cfg->pool_key[0] && (r->fop >= 0 || route == R_RUN || route == R_RUN_STREAMING ||
	                            route >= R_START_PROCESS)) {
		snprintf(msg, sizeof(msg),
		         "sandbox %s waits in a warm pool: take it with 'hutch create' "
		         "(POST /claim) first",
		         s->id);
		r->refuse_status = MHD_HTTP_CONFLICT;
		r->refuse = hutch_api_error_json("sandbox_pooled", msg);
	} else if (route == R_NONE && r->fop < 0) {
		if (method_ok || r->fop == -2 || strcmp(url, "/") == 0 ||
		    match_route(url, "GET", &method_ok) != R_NONE ||
		    match_route(url, "POST", &method_ok) != R_NONE) {
			snprintf(msg, sizeof(msg), "%s is not allowed on %s; see docs/api.md",
			         method, url);
			r->refuse_status = MHD_HTTP_METHOD_NOT_ALLOWED;
			r->refuse = hutch_api_error_json("method_not_allowed", msg);
		} else {
			snprintf(msg, sizeof(msg), "no endpoint %s %s; see docs/api.md", method,
			         url);
			r->refuse_status = MHD_HTTP_NOT_FOUND;
			r->refuse = hutch_api_error_json("not_found", msg);
		}
	}
}

static enum MHD_Result respond_refusal(struct request *r)
{
	cJSON *j = r->refuse;

	r->refuse = NULL;
	r->answered = true;
	return respond_json(r->conn, r->refuse_status, j);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	struct sup *s = cls;
	struct request *r = *con_cls;

	if (!r) {
		bool method_ok;
		enum route route = match_route(url, method, &method_ok);
		int fop = route == R_NONE ? hutch_api_files_route(url, method) : -1;
		const char *cl;

		if (hutch_api_headers_too_large(conn))
			return hutch_api_respond_error(conn, 431, "too_large",
			                               "request headers larger than %u bytes",
			                               HUTCH_MAX_HEADERS);

		/* Watching a sandbox (health, status) neither wakes it nor keeps
		 * it awake; any other request thaws it before it is served. */
		if (route != R_HEALTH && route != R_STATUS) {
			s->last_request_ms = hutch_now_mono_ms();
			hutch_idle_wake(s, hutch_now_mono_sec());
		}
		cl = hutch_mhd.lookup_connection_value(conn, MHD_HEADER_KIND,
		                                       MHD_HTTP_HEADER_CONTENT_LENGTH);
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->s = s;
		r->conn = conn;
		r->route = route;
		r->fop = fop;
		hutch_buf_init(&r->body, HUTCH_MAX_BODY);
		hutch_sse_init(&r->sse);
		hutch_watch_init(&r->w_conn, on_hangup, r);
		*con_cls = r;
		refuse_early(r, url, method, method_ok);
		/* A refused request is answered once its body is read (a client
		 * still sending it would see a broken pipe), unless the body is
		 * too large to read at all. */
		if (r->refuse && (!cl || strtoull(cl, NULL, 10) <= HUTCH_MAX_BODY))
			return MHD_YES;
		if (r->refuse)
			return respond_refusal(r);
		if (cl && fop < 0 && strtoull(cl, NULL, 10) > HUTCH_MAX_BODY)
			return hutch_api_respond_error(conn, 413, "too_large",
			                               "request body larger than %u bytes",
			                               HUTCH_MAX_BODY);
		if (route != R_HEALTH && route != R_STATUS) {
			r->counted = true;
			s->requests_open++;
		}
		return MHD_YES;
	}
	if (r->refuse_status) {
		if (*upload_data_size) {
			*upload_data_size = 0; /* read and dropped */
			return MHD_YES;
		}
		return r->answered ? MHD_YES : respond_refusal(r);
	}
	if (r->fop >= 0)
		return hutch_api_files_access(s, r, conn, r->fop, &r->file, upload_data,
		                              upload_data_size);
	if (*upload_data_size) {
		if (hutch_buf_append(&r->body, upload_data, *upload_data_size) < 0 ||
		    r->body.truncated)
			r->too_large = true;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->answered)
		return MHD_YES;
	if (r->route == R_DELETE && s->state == SUP_GONE) {
		cJSON *o = cJSON_CreateObject();
		r->answered = true;
		cJSON_AddStringToObject(o, "id", s->id);
		cJSON_AddBoolToObject(o, "deleted", true);
		return respond_json(conn, MHD_HTTP_OK, o);
	}
	if (r->cmd)
		return finish_run(r);
	return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct request *r = *con_cls;

	if (!r)
		return;
	hutch_loop_del(&r->s->loop, &r->w_conn);
	if (r->cmd)
		hutch_cmd_release(r->cmd); /* killed if still running */
	hutch_sse_done(&r->sse);
	hutch_proc_wait_cancel(r->s, &r->pw);
	for (struct request **pp = &r->s->waiters; *pp; pp = &(*pp)->next_waiter)
		if (*pp == r) {
			*pp = r->next_waiter;
			break;
		}
	if (r->route == R_DELETE && !r->s->waiters)
		r->s->delete_pending = false;
	if (r->counted) {
		r->s->requests_open--;
		r->s->last_request_ms = hutch_now_mono_ms(); /* its end is activity */
	}
	hutch_api_files_free(r->file);
	hutch_buf_done(&r->body);
	cJSON_Delete(r->refuse);
	free(r);
	*con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct sup *s = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		s->nconnections++;
	else if (s->nconnections > 0)
		s->nconnections--;
}

void hutch_api_sandbox_ended(struct sup *s)
{
	/* Commands were finished by the teardown and have resumed their
	 * requests; a pending DELETE answers now too. */
	for (struct request *r = s->waiters; r; r = r->next_waiter)
		resume(r);
}

int hutch_api_timeout_ms(struct sup *s)
{
	MHD_UNSIGNED_LONG_LONG t;

	/* libmicrohttpd watches connection sockets edge-triggered: when it
	 * still has work it says so through a zero timeout. */
	int procs = hutch_procs_timeout_ms(s); /* kill grace, long polls */

	if (!s->mhd || hutch_mhd.get_timeout(s->mhd, &t) != MHD_YES)
		return procs;
	if (t > 60000)
		t = 60000;
	return procs >= 0 && procs < (int)t ? procs : (int)t;
}

void hutch_api_run(struct sup *s)
{
	hutch_procs_tick(s);
	if (s->mhd)
		(void)hutch_mhd.run(s->mhd);
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)unlink(path);
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 256) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

void hutch_api_preload(void)
{
	struct hutch_err ignored = { 0 };

	(void)hutch_mhd_load(&ignored); /* hutch_api_start() reports a failure */
	/* libmicrohttpd's first Date header loads the time zone (open, read
	 * /etc/localtime's zone file): do it now, not in a claim's or the first
	 * command's answer. */
	tzset();
}

int hutch_api_start(struct sup *s, struct hutch_err *err)
{
	const union MHD_DaemonInfo *info;
	int fd, r;

	r = hutch_mhd_load(err);
	if (r < 0)
		return r;
	fd = listen_unix(s->paths.sock);
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "listen on '%s'", s->paths.sock);
	s->listen_fd = fd;
	s->mhd = hutch_mhd_start_daemon(
	        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO, 0, NULL, NULL, on_request,
	        s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)HUTCH_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, 0u,
	        /* raw uploads arrive in chunks of about half of this */
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HUTCH_CONN_MEMORY, MHD_OPTION_END);
	if (!s->mhd)
		return hutch_err_set(err, -EIO, "start the HTTP server on '%s'", s->paths.sock);
	info = hutch_mhd.get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return hutch_err_set(err, -EIO, "HTTP server has no epoll fd");
	return 0;
}

static void on_mhd_event(struct hutch_watch *w, uint32_t events)
{
}

int hutch_api_watch(struct sup *s)
{
	const union MHD_DaemonInfo *info =
	        hutch_mhd.get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);

	/* Nothing to do on its events: the loop runs libmicrohttpd after
	 * every batch (hutch_api_run()). */
	hutch_watch_init(&s->w_mhd, on_mhd_event, s);
	return hutch_loop_add(&s->loop, &s->w_mhd, info->epoll_fd, EPOLLIN);
}

void hutch_api_stop(struct sup *s)
{
	if (s->mhd) {
		hutch_mhd.stop_daemon(s->mhd);
		s->mhd = NULL;
	}
	hutch_procs_free(s);
}

/* For api-files.c (api-files.h). */
void hutch_api_suspend(struct request *r)
{
	suspend(r);
}

void hutch_api_resume(struct request *r)
{
	resume(r);
}

enum MHD_Result hutch_api_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
	return respond_json(conn, status, j);
}

cJSON *hutch_api_ended_json(struct sup *s)
{
	return ended_error_json(s);
}
