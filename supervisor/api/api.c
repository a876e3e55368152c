/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 + JSON API on the sandbox's unix socket, served by
 * libmicrohttpd inside the supervisor's epoll loop (MHD_USE_EPOLL without an
 * internal thread: its epoll fd sits in ours). This file keeps the daemon
 * and each request's life: it looks the route up in the table (routes.h),
 * refuses what is not served (unknown route or method, a pooled sandbox,
 * headers or body too large, an ended sandbox), reads a JSON body and calls
 * the route's handler. A request waiting for a command is suspended and
 * resumed when the command finishes; a streaming response suspends itself in
 * its content reader when no event is queued. docs/api.md is the reference
 * for what is served here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "api-conn.h"
#include "api.h"
#include "cleanup.h"
#include "executor.h"
#include "fdutil.h"
#include "idle.h"
#include "journal.h"
#include "kind.h"
#include "mhd.h"
#include "procs.h"
#include "routes.h"
#include "supervisor.h"

#define UNLINK(head, tail, c, prev, next)                              \
	do {                                                           \
		*((c)->prev ? &(c)->prev->next : &(head)) = (c)->next; \
		*((c)->next ? &(c)->next->prev : &(tail)) = (c)->prev; \
		(c)->prev = (c)->next = NULL;                          \
	} while (0)
#define APPEND(head, tail, c, prev, next)                        \
	do {                                                     \
		(c)->prev = (tail);                              \
		(c)->next = NULL;                                \
		*((c)->prev ? &(c)->prev->next : &(head)) = (c); \
		(tail) = (c);                                    \
	} while (0)

static void conn_unwait(struct sup *s, struct hutch_api_conn *c)
{
	if (!c || !c->waiting)
		return;
	UNLINK(s->conns.head, s->conns.tail, c, prev, next);
	c->waiting = false;
}

static void conn_wait(struct sup *s, struct hutch_api_conn *c)
{
	if (!c || c->waiting)
		return;
	c->since_ms = hutch_now_mono_ms();
	APPEND(s->conns.head, s->conns.tail, c, prev, next);
	c->waiting = true;
}

static void conn_settled(struct sup *s, struct hutch_api_conn *c)
{
	if (!c->half_closed)
		return;
	UNLINK(s->conns.hhead, s->conns.htail, c, hprev, hnext);
	c->half_closed = false;
}

/* The client half-closed (or hung up): settled after libmicrohttpd's next
 * run (settle_half_closed()), once it has read what came before. */
static void on_conn_rdhup(struct hutch_watch *w, uint32_t events)
{
	struct hutch_api_conn *c = w->ptr;
	struct sup *s = c->s;

	hutch_loop_close(&s->loop, w, &c->dup_fd);
	if (c->half_closed)
		return;
	APPEND(s->conns.hhead, s->conns.htail, c, hprev, hnext);
	c->half_closed = true;
}

/* libmicrohttpd watches connections edge-triggered and takes a read
 * shorter than its buffer for "drained": a client's end of file that came
 * in one wake-up with the request's last bytes is never read, and a request
 * cut short by a half-close was neither answered nor closed (issue 18 #1).
 * Once the client has half-closed, everything it sent is read (nothing is
 * left in the socket) and its request is still incomplete (headers or body
 * missing), nothing more can complete it: shut our reading side, which
 * wakes libmicrohttpd to read the end of file and close the connection as
 * it would have. A complete request is left alone (its answer is still
 * due); a suspended one is looked at again after it resumes. */
static void settle_half_closed(struct sup *s)
{
	struct hutch_api_conn *c, *next;
	int unread;

	for (c = s->conns.hhead; c; c = next) {
		bool incomplete = c->waiting || (c->req && !c->req->complete);

		next = c->hnext;
		if (c->req && c->req->suspended)
			continue;
		if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
			continue; /* libmicrohttpd is still reading */
		if (incomplete)
			(void)shutdown(c->fd, SHUT_RD);
		else if (c->req)
			continue; /* answered first; waits again after it */
		conn_settled(s, c);
	}
}

/* Refuse r before its handler: with a JSON error, or (text) the executor's
 * plain-text one. */
static void refuse_with(struct request *r, enum hutch_errc cls, const char *code, const char *msg,
                        const char *text)
{
	r->refuse_cls = cls;
	r->refuse_code = code;
	if (text)
		r->refuse_text = text;
	else
		r->refuse = hutch_api_error_json(code, msg);
}

/* The executor's bearer secret (executor.c) on the TCP listener: Go's
 * mux answers an unknown path 404 first, then the secret is checked on
 * every route but those that say so (/health), then the handler checks
 * the method. */
static bool tcp_refused(struct request *r, unsigned known)
{
	if (!r->route && !known) {
		refuse_with(r, HUTCH_ERRC_NOT_FOUND, NULL, NULL, "404 page not found");
		return true;
	}
	if ((r->route && (r->route->flags & HUTCH_ROUTE_NO_SECRET)) ||
	    hutch_executor_authorized(r->s, r->conn))
		return false;
	refuse_with(r, HUTCH_ERRC_NOT_CAPABLE, "unauthorized", NULL, "Unauthorized");
	return true;
}

/* Requests answered with an error without being served: a pooled sandbox
 * serves nobody until it is claimed; what access forbids; unknown routes
 * and methods. */
static void refuse_early(struct request *r, const char *url, const char *method, unsigned known)
{
	struct sup *s = r->s;
	const struct hutch_api_route *rt = r->route;
	const char *denied = rt ? hutch_api_access_refusal(s, rt) : NULL;
	char msg[512];

	if (r->tcp && tcp_refused(r, known))
		return;
	if (rt && hutch_api_pooled_refusal(s, rt, msg, sizeof(msg))) {
		refuse_with(r, HUTCH_ERRC_CONFLICT, "sandbox_pooled", msg, NULL);
	} else if (denied) {
		refuse_with(r, HUTCH_ERRC_NOT_CAPABLE, "access_denied", denied,
		            (rt->flags & HUTCH_ROUTE_EXECUTOR) ? denied : NULL);
	} else if (!rt && known == HUTCH_ROUTE_KNOWN_EXECUTOR) {
		refuse_with(r, HUTCH_ERRC_USAGE, "method_not_allowed", NULL, "Method not allowed");
	} else if (!rt && known) {
		snprintf(msg, sizeof(msg), "%s is not allowed on %s; see docs/api.md", method, url);
		refuse_with(r, HUTCH_ERRC_USAGE, "method_not_allowed", msg, NULL);
	} else if (!rt) {
		snprintf(msg, sizeof(msg), "no endpoint %s %s; see docs/api.md", method, url);
		refuse_with(r, HUTCH_ERRC_NOT_FOUND, "not_found", msg, NULL);
	}
}

static enum MHD_Result respond_refusal(struct request *r)
{
	cJSON *j = r->refuse;

	r->refuse = NULL;
	r->answered = true;
	if (r->refuse_text)
		return hutch_api_refuse_text(r->conn, r->refuse_cls, r->refuse_code,
		                             r->refuse_text);
	return hutch_api_respond_json(r->conn, hutch_api_status(r->refuse_cls, r->refuse_code), j);
}

static enum MHD_Result refuse_body_too_large(struct MHD_Connection *conn)
{
	return hutch_api_refuse(conn, HUTCH_ERRC_LIMIT, "too_large",
	                        "request body larger than %u bytes: put large data in a "
	                        "file with PUT /files (streamed, no bound) and name it",
	                        HUTCH_MAX_BODY);
}

/* The first access-handler call of a request: headers only. */
static enum MHD_Result start_request(struct sup *s, bool tcp, struct MHD_Connection *conn,
                                     const char *url, const char *method, void **con_cls)
{
	unsigned known;
	const struct hutch_api_route *rt = hutch_api_route_find(url, method, tcp, &known);
	bool passive = rt && (rt->flags & HUTCH_ROUTE_PASSIVE);
	const char *cl;
	struct request *r;
	struct hutch_err err = { 0 };

	struct hutch_api_conn *c = conn_of(conn);

	conn_unwait(s, c); /* its headers are complete */
	if (hutch_api_headers_too_large(conn))
		return hutch_api_refuse(conn, HUTCH_ERRC_LIMIT, "headers_too_large",
		                        "request headers larger than %u bytes together: send "
		                        "large values in the body",
		                        HUTCH_MAX_HEADERS);
	if (hutch_api_check_codings(conn, &err) < 0)
		return hutch_api_respond_err(conn, &err,
		                             hutch_err_class(&err) == HUTCH_ERRC_NOT_CAPABLE
		                                     ? "not_implemented"
		                                     : "invalid_request");
	/* Watching a sandbox (health, status) neither wakes it nor keeps it
	 * awake; any other request thaws it before it is served. */
	if (!passive) {
		hutch_idle_touch(s);
		hutch_idle_wake(s, hutch_now_mono_sec());
	}
	cl = hutch_mhd.lookup_connection_value(conn, MHD_HEADER_KIND,
	                                       MHD_HTTP_HEADER_CONTENT_LENGTH);
	r = calloc(1, sizeof(*r));
	if (!r)
		return MHD_NO;
	hutch_api_request_init(r, s, conn);
	r->route = rt;
	r->tcp = tcp;
	*con_cls = r;
	if (c)
		c->req = r;
	if (!passive) /* watching the sandbox is not on the record */
		r->jrec = hutch_journal_request_begin(s, method, url, tcp || !c ? -1 : c->uid,
		                                      tcp || !c ? -1 : c->pid);
	refuse_early(r, url, method, known);
	/* A refused request is answered once its body is read (a client still
	 * sending it would see a broken pipe), unless the body is too large to
	 * read at all. */
	if (r->refuse_cls && (!cl || strtoull(cl, NULL, 10) <= HUTCH_MAX_BODY))
		return MHD_YES;
	if (r->refuse_cls)
		return respond_refusal(r);
	if (cl && !(rt->flags & HUTCH_ROUTE_RAW) && strtoull(cl, NULL, 10) > HUTCH_MAX_BODY)
		return refuse_body_too_large(conn);
	if (!passive) {
		r->counted = true;
		hutch_idle_begin(s);
	}
	return MHD_YES;
}

/* The route's handler; the commands it starts are the request's in the
 * journal. */
static enum MHD_Result serve_route(struct request *r, const char *upload, size_t *size)
{
	enum MHD_Result ret;

	hutch_cmds_set_hook(&r->s->cmds, &hutch_journal_cmd_hook, r->jrec);
	ret = hutch_api_route_handler(r->route)(r, upload, size);
	hutch_cmds_set_hook(&r->s->cmds, &hutch_journal_cmd_hook, NULL);
	return ret;
}

static enum MHD_Result serve_request(struct sup *s, bool tcp, struct MHD_Connection *conn,
                                     const char *url, const char *method, const char *upload_data,
                                     size_t *upload_data_size, void **con_cls)
{
	struct request *r = *con_cls;
	size_t none = 0;

	if (!r)
		return start_request(s, tcp, conn, url, method, con_cls);
	if (!*upload_data_size)
		r->complete = true; /* its whole body was read */
	if (r->refuse_cls) {
		if (*upload_data_size) {
			*upload_data_size = 0; /* read and dropped */
			return MHD_YES;
		}
		return r->answered ? MHD_YES : respond_refusal(r);
	}
	if (r->route->flags & HUTCH_ROUTE_RAW)
		return serve_route(r, upload_data, upload_data_size);
	if (*upload_data_size) {
		if (hutch_buf_append(&r->body, upload_data, *upload_data_size) < 0 ||
		    r->body.truncated)
			r->too_large = true;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->answered)
		return MHD_YES;
	if (r->too_large)
		return refuse_body_too_large(r->conn);
	/* An ended sandbox serves no route but those that say so; a request
	 * whose command has started answers from it (410 too). */
	if (s->state != SUP_RUNNING && !(r->route->flags & HUTCH_ROUTE_ENDED) && !r->cmd)
		return hutch_api_respond_ended(conn, s);
	return serve_route(r, NULL, &none);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	return serve_request(cls, false, conn, url, method, upload_data, upload_data_size, con_cls);
}

/* The executor's TCP listener (executor.c): its own daemon, the same
 * requests but for the namespace and the secret. */
static enum MHD_Result on_request_tcp(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
	return serve_request(cls, true, conn, url, method, upload_data, upload_data_size, con_cls);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct request *r = *con_cls;
	struct hutch_api_conn *c;

	if (!r)
		return;
	/* A keep-alive connection waits for its next request's headers; a
	 * closing one leaves the list in on_connection(). */
	c = conn_of(conn);
	if (c) {
		c->req = NULL;
		conn_wait(r->s, c);
	}
	hutch_loop_del(&r->s->loop, &r->w_conn);
	if (r->jrec) {
		const union MHD_ConnectionInfo *ci =
		        hutch_mhd.get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);

		hutch_journal_request_end(r->jrec, ci ? ci->http_status : 0);
	}
	if (r->cmd)
		hutch_cmd_release(r->cmd); /* killed if still running */
	hutch_sse_done(&r->sse);
	hutch_proc_wait_cancel(r->s, &r->pw);
	hutch_api_wait_done(r, r->route && (r->route->flags & HUTCH_ROUTE_WAITS_END));
	if (r->counted)
		hutch_idle_end(r->s); /* its end is activity */
	if (r->state_free)
		r->state_free(r->state);
	hutch_buf_done(&r->body);
	cJSON_Delete(r->refuse);
	free(r);
	*con_cls = NULL;
}

static void conn_start(struct sup *s, struct MHD_Connection *conn, void **socket_context)
{
	const union MHD_ConnectionInfo *ci =
	        hutch_mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct hutch_api_conn *c = calloc(1, sizeof(*c));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c)
		return; /* served without a header deadline */
	c->s = s;
	c->fd = ci ? ci->connect_fd : -1;
	c->uid = c->pid = -1;
	if (c->fd >= 0 && getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		c->uid = (int)cred.uid;
		c->pid = (int)cred.pid;
	}
	c->dup_fd = c->fd >= 0 ? fcntl(c->fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
	hutch_watch_init(&c->w, on_conn_rdhup, c);
	if (c->dup_fd >= 0 &&
	    hutch_loop_add(&s->loop, &c->w, c->dup_fd, EPOLLRDHUP | EPOLLET) < 0) {
		close(c->dup_fd);
		c->dup_fd = -EBADF;
	}
	conn_wait(s, c);
	*socket_context = c;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct sup *s = cls;
	struct hutch_api_conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		s->nconnections++;
		conn_start(s, conn, socket_context);
		return;
	}
	if (s->nconnections > 0)
		s->nconnections--;
	/* libmicrohttpd takes its listen socket out of its epoll set at the
	 * connection limit (or when accept() ran out of fds) and puts it back
	 * only at the start of a later MHD_run(); the close that makes room
	 * happens at the end of one. Without another run at once the loop
	 * could sleep with no fd of libmicrohttpd's watched: new clients
	 * waited in the backlog forever (issue 18 #1). */
	s->conns.rerun = true;
	if (!c)
		return;
	conn_unwait(s, c);
	conn_settled(s, c);
	hutch_loop_close(&s->loop, &c->w, &c->dup_fd);
	free(c);
	*socket_context = NULL;
}

/* End the connections that waited longer than HUTCH_API_HEADER_TIMEOUT_MS
 * for a request's headers: shut the socket down, and libmicrohttpd, seeing
 * it hung up, closes it in its next run. */
static void expire_waiting(struct sup *s)
{
	int64_t now = hutch_now_mono_ms();
	struct hutch_api_conn *c;

	while ((c = s->conns.head) && now - c->since_ms >= HUTCH_API_HEADER_TIMEOUT_MS) {
		conn_unwait(s, c);
		if (c->fd >= 0)
			(void)shutdown(c->fd, SHUT_RDWR);
	}
}

void hutch_api_sandbox_ended(struct sup *s)
{
	/* Commands were finished by the teardown and have resumed their
	 * requests; a pending DELETE answers now too. */
	for (struct request *r = s->waiters; r; r = r->next_waiter)
		hutch_api_resume(r);
}

/* How long libmicrohttpd's daemon d may wait, capped at 60 s; -1: any. */
static int mhd_timeout_ms(struct MHD_Daemon *d)
{
	MHD_UNSIGNED_LONG_LONG t;

	if (!d || hutch_mhd.get_timeout(d, &t) != MHD_YES)
		return -1;
	return t > 60000 ? 60000 : (int)t;
}

static int min_timeout(int a, int b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int hutch_api_timeout_ms(struct sup *s)
{
	/* libmicrohttpd watches connection sockets edge-triggered: when it
	 * still has work it says so through a zero timeout. */
	int procs = hutch_procs_timeout_ms(s); /* kill grace, long polls */
	int64_t headers;

	if (s->conns.rerun && s->mhd)
		return 0;
	if (s->conns.head) {
		headers =
		        s->conns.head->since_ms + HUTCH_API_HEADER_TIMEOUT_MS - hutch_now_mono_ms();
		headers = headers < 0 ? 0 : headers;
		if (procs < 0 || headers < procs)
			procs = (int)headers;
	}
	procs = min_timeout(procs, hutch_api_exec_timeout_ms(s));
	return min_timeout(procs,
	                   min_timeout(mhd_timeout_ms(s->mhd), mhd_timeout_ms(s->executor.mhd)));
}

void hutch_api_run(struct sup *s)
{
	hutch_procs_tick(s);
	if (!s->mhd)
		return;
	s->conns.rerun = false;
	expire_waiting(s);
	hutch_api_exec_expire(s);
	(void)hutch_mhd.run(s->mhd);
	if (s->executor.mhd)
		(void)hutch_mhd.run(s->executor.mhd);
	if (s->conns.hhead)
		settle_half_closed(s);
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

static struct MHD_Daemon *start_daemon(struct sup *s, int fd, MHD_AccessHandlerCallback handler)
{
	return hutch_mhd_start_daemon(
	        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_TURBO, 0,
	        NULL, NULL, handler, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
	        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
	        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HUTCH_MAX_CONNECTIONS,
	        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HUTCH_API_IDLE_TIMEOUT_S,
	        /* raw uploads arrive in chunks of about half of this */
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HUTCH_CONN_MEMORY, MHD_OPTION_END);
}

bool hutch_api_on_demand(const struct sup *s)
{
	return s->kind->api_after_ready || (s->cfg->api_on_demand && !s->cfg->executor_listen[0]);
}

int hutch_api_open(struct sup *s, struct hutch_err *err)
{
	int r;

	if (s->kind->api_start)
		return s->kind->api_start(s, err);
	if (hutch_api_on_demand(s))
		return hutch_api_listen(s, err);
	/* hutch exec's socket beside it (exec-sock.c): not where the API
	 * itself waits for a first client (a run's, a container's) */
	r = hutch_api_start(s, err);
	return r < 0 ? r : hutch_api_exec_listen(s, err);
}

int hutch_api_listen(struct sup *s, struct hutch_err *err)
{
	int fd = hutch_unix_listen(s->paths.sock, 256);

	if (fd < 0)
		return hutch_err_set_errno(err, fd, "listen on '%s'", s->paths.sock);
	s->listen_fd = fd;
	return 0;
}

int hutch_api_start(struct sup *s, struct hutch_err *err)
{
	const union MHD_DaemonInfo *info;
	int fd, r;

	if (s->listen_fd < 0 && (r = hutch_api_listen(s, err)) < 0)
		return r;
	r = hutch_mhd_load(err);
	if (r < 0)
		return r;
	s->mhd = start_daemon(s, s->listen_fd, on_request);
	if (!s->mhd)
		return hutch_err_set(err, -EIO, "start the HTTP server on '%s'", s->paths.sock);
	info = hutch_mhd.get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return hutch_err_set(err, -EIO, "HTTP server has no epoll fd");
	if (!s->cfg->executor_listen[0])
		return 0;
	/* --executor-port: the contract also on TCP, behind the secret. */
	fd = hutch_executor_listen(s, err);
	if (fd < 0)
		return fd;
	s->executor.mhd = start_daemon(s, fd, on_request_tcp);
	if (!s->executor.mhd) {
		close(fd);
		return hutch_err_set(err, -EIO, "start the executor's HTTP server on %s",
		                     s->cfg->executor_listen);
	}
	return hutch_executor_publish(s, err);
}

static void on_mhd_event(struct hutch_watch *w, uint32_t events)
{
}

static int watch_daemon(struct sup *s, struct hutch_watch *w, struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *info = hutch_mhd.get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);

	/* Nothing to do on its events: the loop runs libmicrohttpd after
	 * every batch (hutch_api_run()). */
	hutch_watch_init(w, on_mhd_event, s);
	return info ? hutch_loop_add(&s->loop, w, info->epoll_fd, EPOLLIN) : -EIO;
}

int hutch_api_watch(struct sup *s)
{
	int r;

	if (!s->mhd)
		return 0; /* a container's: hutch_api_start_late() */
	r = watch_daemon(s, &s->w_mhd, s->mhd);
	if (r >= 0)
		r = hutch_api_exec_watch(s);

	if (r >= 0 && s->executor.mhd)
		r = watch_daemon(s, &s->executor.w_mhd, s->executor.mhd);
	return r;
}

int hutch_api_start_late(struct sup *s, struct hutch_err *err)
{
	int r;

	if (s->mhd)
		return 0;
	hutch_api_preload();
	r = hutch_api_start(s, err);
	return r < 0 ? r : hutch_api_watch(s);
}

void hutch_api_stop(struct sup *s)
{
	if (s->w_listen.fn && !s->mhd) /* a container's API never started */
		hutch_loop_close(&s->loop, &s->w_listen, &s->listen_fd);
	hutch_api_exec_unlisten(s);
	hutch_api_exec_close_all(s); /* their sockets go back first */
	if (s->executor.mhd) {
		hutch_mhd.stop_daemon(s->executor.mhd); /* closes its listen socket */
		s->executor.mhd = NULL;
	}
	if (s->mhd) {
		hutch_mhd.stop_daemon(s->mhd);
		s->mhd = NULL;
	}
	hutch_procs_free(s);
}
