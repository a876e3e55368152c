/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A command without HTTP, on a socket of our own: hutch run's (the run's
 * acknowledgement, "E" of supervisor/sandbox.h, brings it) or a
 * connection to hutch exec's socket (exec.sock, exec-sock.c). On it come
 * the request's length (4 bytes, big-endian) and POST /exec's JSON body,
 * then the frames of POST /exec's upgraded connection (api-exec.c). The
 * API's rules apply as to POST /exec: a pooled sandbox, --access, an
 * ended sandbox, the body's bound; what POST /exec would answer other
 * than 101 comes back as one REFUSED frame, its JSON with the status
 * added. The request is on the journal (its caller from SO_PEERCRED) and
 * wakes a sleeping sandbox, as POST /exec's does. A run saves a
 * connection, an HTTP request and its answer (one round trip to the
 * supervisor, not two); an exec saves libmicrohttpd's connection, its
 * 256 KiB pool among it (docs/performance.md).
 *
 * A warm run's claim comes the same way, its command's stream (a
 * socketpair's end, the request written in it) passed with the request,
 * whose body is {"claim": {session options}}: the sandbox claimed as
 * POST /claim does, the command started from that stream as a cold run's
 * "E", one CLAIMED frame answers, and the connection is from then on the
 * run's hand-over socket (hooks.c). It saves the run two connections to
 * the API (POST /claim, DELETE /), their pools, and a round trip.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "claim.h"
#include "cleanup.h"
#include "exec-internal.h"
#include "hooks.h"
#include "http.h"
#include "idle.h"
#include "journal.h"
#include "routes.h"
#include "supervisor.h"

#define RUN_LEN      4    /* the body's length, before it */
#define RUN_READ_MIN 4096 /* a read takes the frames after a small body too */

static uint32_t body_len(const struct hutch_exec *x)
{
	const uint8_t *p = (const uint8_t *)x->req;

	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The command started, or refused as POST /exec would be: 0, or -1 with
 * *status and *answer. */
static int start(struct hutch_exec *x, bool too_large, unsigned *status, cJSON **answer)
{
	struct sup *s = x->s;
	unsigned known;
	const struct hutch_api_route *rt = hutch_api_route_find("/exec", "POST", false, &known);
	const char *no = rt ? hutch_api_access_refusal(s, rt) : NULL;
	char msg[512];

	if (rt && hutch_api_pooled_refusal(s, rt, msg, sizeof(msg))) {
		*status = hutch_api_status(HUTCH_ERRC_CONFLICT, "sandbox_pooled");
		*answer = hutch_api_error_json("sandbox_pooled", msg);
		return -1;
	}
	if (too_large) {
		snprintf(msg, sizeof(msg), "request body larger than %u bytes", HUTCH_MAX_BODY);
		*status = 413;
		*answer = hutch_api_error_json("too_large", msg);
		return -1;
	}
	if (s->state != SUP_RUNNING) {
		*status = 410;
		*answer = hutch_api_ended_json(s);
		return -1;
	}
	if (no) {
		*status = 403;
		*answer = hutch_api_error_json("access_denied", no);
		return -1;
	}
	return hutch_exec_begin(x, x->req + RUN_LEN, body_len(x), status, answer);
}

/* A refusal's answer queued as the stream's only frame, then the end. */
static void refuse(struct hutch_exec *x, unsigned status, cJSON *answer)
{
	_cleanup_free_ char *text = NULL;

	if (answer)
		cJSON_AddNumberToObject(answer, "status", status);
	text = answer ? cJSON_PrintUnformatted(answer) : NULL;
	cJSON_Delete(answer);
	x->finished = true; /* the stream ends once the answer is sent */
	if (!text || !hutch_exec_queue_frame(x, HUTCH_FRAME_REFUSED, text,
	                                     strnlen(text, HUTCH_FRAME_CTL_MAX))) {
		hutch_exec_end(x);
		return;
	}
	hutch_exec_go(x, x->req + x->req_got, 0); /* what came after is not read */
}

/* A warm run's claim: the sandbox claimed, its command started from the
 * stream that came with the request, the connection made the run's
 * hand-over socket; or refused as POST /claim would be. */
static int claim_run(struct hutch_exec *x, unsigned *status, cJSON **answer)
{
	struct sup *s = x->s;
	_cleanup_cjson_ cJSON *body = cJSON_ParseWithLength(x->req + RUN_LEN, body_len(x));
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(body, "claim");
	struct hutch_err err = { 0 };
	uint8_t frame[HUTCH_FRAME_HDR + 128];
	int n, sock, stream;

	if (s->state != SUP_RUNNING) {
		*status = 410;
		*answer = hutch_api_ended_json(s);
		return -1;
	}
	if (!cJSON_IsObject(opts) || cJSON_GetArraySize(body) != 1) {
		*status = hutch_api_status(HUTCH_ERRC_USAGE, "invalid_request");
		*answer = hutch_api_error_json("invalid_request",
		                               "a request that brings a stream must be "
		                               "{\"claim\": {options}}");
		return -1;
	}
	if (hutch_sup_claim_start(s, opts, &err) < 0) {
		*answer = hutch_api_err_json(&err,
		                             hutch_err_class(&err) == HUTCH_ERRC_CONFLICT
		                                     ? "not_pooled"
		                                     : "invalid_request",
		                             status);
		return -1;
	}
	n = snprintf((char *)frame + HUTCH_FRAME_HDR, sizeof(frame) - HUTCH_FRAME_HDR,
	             "{\"id\":\"%s\",\"created_at_unix\":%lld,\"expires_at_unix\":%lld}", s->id,
	             (long long)s->created_at, (long long)s->expires_at);
	hutch_frame_header(frame, HUTCH_FRAME_CLAIMED, (uint32_t)n);
	/* The connection leaves the stream (not closed by its end), then
	 * the command starts as a cold run's "E", then the answer, which
	 * fits the empty socket's buffer; the hand-over last, its watch
	 * seeing a run gone meanwhile. */
	stream = TAKE_FD(x->passed_fd);
	sock = x->sock;
	x->own = false;
	hutch_exec_end(x);
	if (hutch_api_exec_stream(s, stream) < 0)
		s->hooks.run_delete = true;
	(void)send(sock, frame, HUTCH_FRAME_HDR + (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)hutch_hooks_run_claimed(s, sock);
	return 0;
}

/* The request is whole (or too large to read): on the journal, started
 * and streamed (a warm run's claim: claimed, its stream started), or
 * refused. */
static void take(struct hutch_exec *x, bool too_large)
{
	struct sup *s = x->s;
	struct ucred cr = { .uid = (uid_t)-1, .pid = -1 };
	socklen_t crlen = sizeof(cr);
	bool claim = x->passed_fd >= 0 && !too_large;
	struct hutch_jrec *jr;
	cJSON *answer = NULL;
	unsigned status = 0;
	int r;

	x->reading = NULL;
	(void)getsockopt(x->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen);
	hutch_idle_touch(s);
	hutch_idle_wake(s, hutch_now_mono_sec());
	jr = hutch_journal_request_begin(s, "POST", claim ? "/claim" : "/exec", (int)cr.uid,
	                                 (int)cr.pid);
	if (claim) {
		r = claim_run(x, &status, &answer);
		hutch_journal_request_end(jr, r < 0 ? status : 200);
		if (r < 0)
			refuse(x, status, answer);
		return;
	}
	hutch_cmds_set_hook(&s->cmds, &hutch_journal_cmd_hook, jr);
	r = start(x, too_large, &status, &answer);
	hutch_cmds_set_hook(&s->cmds, &hutch_journal_cmd_hook, NULL);
	if (r < 0) {
		hutch_journal_request_end(jr, status);
		refuse(x, status, answer);
		return;
	}
	x->jr = jr; /* its line once the stream ends */
	hutch_exec_go(x, x->req + RUN_LEN + body_len(x), x->req_got - RUN_LEN - body_len(x));
}

/* The request's next bytes (room at most), and an fd that came with them
 * into x->passed_fd (the first one; any other is closed): recv()'s. */
static ssize_t recv_request(struct hutch_exec *x, size_t room)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { x->req + x->req_got, room };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)
	};
	ssize_t n = recvmsg(x->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *c = n < 0 ? NULL : CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < nfd; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (x->passed_fd < 0)
				x->passed_fd = fd;
			else
				close(fd);
		}
	}
	return n;
}

static void read_request(struct hutch_exec *x)
{
	for (;;) {
		size_t want = x->req_got < RUN_LEN ? RUN_LEN : RUN_LEN + (size_t)body_len(x);
		size_t cap = want > RUN_READ_MIN ? want : RUN_READ_MIN;
		ssize_t n;

		if (x->req_got >= RUN_LEN && body_len(x) > HUTCH_MAX_BODY) {
			take(x, true);
			return;
		}
		if (x->req_got >= want) {
			take(x, false);
			return;
		}
		if (cap > x->req_cap) {
			char *p = realloc(x->req, cap);

			if (!p) {
				hutch_exec_end(x);
				return;
			}
			x->req = p;
			x->req_cap = cap;
		}
		n = recv_request(x, x->req_cap - x->req_got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* the rest comes */
		if (n <= 0) {
			hutch_exec_end(x); /* the run went away */
			return;
		}
		x->req_got += (size_t)n;
	}
}

struct hutch_exec *hutch_exec_open_own(struct sup *s, int fd)
{
	struct hutch_exec *x = hutch_exec_new(s);

	if (!x) {
		close(fd);
		return NULL;
	}
	x->sock = fd;
	x->own = true;
	x->reading = read_request;
	if (hutch_loop_add(&s->loop, &x->w_sock, fd, EPOLLIN) < 0) {
		close(fd);
		hutch_exec_free(x);
		return NULL;
	}
	x->next = s->execs;
	s->execs = x;
	return x;
}

int hutch_api_exec_stream(struct sup *s, int fd)
{
	struct hutch_exec *x = hutch_exec_open_own(s, fd);

	if (!x)
		return -ENOMEM;
	x->run = true;
	read_request(x); /* it is likely there already */
	return 0;
}
