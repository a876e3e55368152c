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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "exec-internal.h"
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

/* The request is whole (or too large to read): on the journal, started
 * and streamed, or refused. */
static void take(struct hutch_exec *x, bool too_large)
{
	struct sup *s = x->s;
	struct ucred cr = { .uid = (uid_t)-1, .pid = -1 };
	socklen_t crlen = sizeof(cr);
	size_t used = too_large ? x->req_got : RUN_LEN + (size_t)body_len(x);
	_cleanup_free_ char *text = NULL;
	struct hutch_jrec *jr;
	cJSON *answer = NULL;
	unsigned status = 0;
	int r;

	x->reading = NULL;
	(void)getsockopt(x->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen);
	hutch_idle_touch(s);
	hutch_idle_wake(s, hutch_now_mono_sec());
	jr = hutch_journal_request_begin(s, "POST", "/exec", (int)cr.uid, (int)cr.pid);
	hutch_cmds_set_hook(&s->cmds, &hutch_journal_cmd_hook, jr);
	r = start(x, too_large, &status, &answer);
	hutch_cmds_set_hook(&s->cmds, &hutch_journal_cmd_hook, NULL);
	if (r < 0)
		hutch_journal_request_end(jr, status);
	else
		x->jr = jr; /* its line once the stream ends */
	if (r < 0) {
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
		used = x->req_got; /* what came after is not read */
	}
	hutch_exec_go(x, x->req + used, x->req_got - used);
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
		n = recv(x->sock, x->req + x->req_got, x->req_cap - x->req_got, MSG_DONTWAIT);
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
