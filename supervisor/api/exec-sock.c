/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch exec's socket: exec.sock beside api.sock in the sandbox's state
 * directory (0600, as api.sock), each connection one command, read and
 * served by exec-run.c as hutch run's socket is (the request's length
 * and POST /exec's JSON body, then its frames; the API's rules applied
 * there). Why a socket of its own: POST /exec's libmicrohttpd connection
 * costs the supervisor a fresh 256 KiB pool whose read buffer, half of
 * it, is zeroed page by page once the request is read (31 of its 33 page
 * faults per exec, ~1 ms of its CPU; docs/performance.md), and the
 * pool's size is the daemon's, which raw uploads need large.
 *
 * Bounded as the API is: at most HUTCH_MAX_CONNECTIONS streams of its
 * own at once (beyond, new connections wait in the backlog until one
 * ends), and a request not whole within HUTCH_API_HEADER_TIMEOUT_MS ends
 * its connection. A stream is activity from its connection to its end
 * (hutch_idle_begin(), _end()), as an HTTP request is from its headers
 * to its end. The listener is edge-triggered: it is drained on each
 * event, and again when a paused one has room. Out of fds or memory
 * (EMFILE, ENFILE, ENOMEM), the waiting connection stays in the backlog
 * and is taken again EXEC_SOCK_RETRY_MS later (no new edge comes when an
 * fd is freed elsewhere, e.g. by an HTTP connection's end): the client
 * waits for an fd, as beyond the bound, instead of for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "exec-internal.h"
#include "fdutil.h"
#include "http.h"
#include "idle.h"
#include "log.h"
#include "supervisor.h"
#include "util.h"

#define EXEC_SOCK_BACKLOG  256
#define EXEC_SOCK_RETRY_MS 100

static void accept_all(struct sup *s);

static void on_end(struct hutch_exec *x)
{
	struct sup *s = x->s;

	hutch_idle_end(s);
	s->exec_sock.open--;
	if (s->exec_sock.paused && s->exec_sock.fd >= 0) {
		s->exec_sock.paused = false;
		accept_all(s);
	}
}

/* Take what waits; paused at the bound, or out of fds or memory (the
 * next stream's end tries again). */
static void accept_all(struct sup *s)
{
	struct hutch_exec *x;
	int fd;

	for (;;) {
		if (s->exec_sock.open >= HUTCH_MAX_CONNECTIONS) {
			s->exec_sock.paused = true;
			return;
		}
		fd = accept4(s->exec_sock.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && errno == EAGAIN)
			return;
		x = fd < 0 ? NULL : hutch_exec_open_own(s, fd);
		if (!x) { /* out of fds or memory: a stream's end or the retry */
			s->exec_sock.paused = s->exec_sock.open > 0;
			s->exec_sock.retry_ms = hutch_now_mono_ms() + EXEC_SOCK_RETRY_MS;
			return;
		}
		x->on_end = on_end;
		x->since_ms = hutch_now_mono_ms();
		s->exec_sock.open++;
		hutch_idle_begin(s);
		x->reading(x); /* the request is likely there already */
	}
}

static void on_accept(struct hutch_watch *w, uint32_t events)
{
	(void)events;
	accept_all(w->ptr);
}

int hutch_api_exec_listen(struct sup *s, struct hutch_err *err)
{
	int fd = hutch_unix_listen(s->paths.exec, EXEC_SOCK_BACKLOG);
	char link[sizeof(s->paths.exec)];

	if (fd < 0)
		return hutch_err_set_errno(err, fd, "listen on '%s'", s->paths.exec);
	hutch_watch_init(&s->exec_sock.w, on_accept, s);
	s->exec_sock.fd = fd;
	/* The name hutch's CLI connects to (runtime/state.h): without it (it
	 * cannot be made) the CLI goes by POST /exec, slower, never wrong (symlinkat: no import
	 * more at every start, test_budgets.py version.instructions). */
	if (snprintf(link, sizeof(link), "%s/" HUTCH_EXEC_FORMS_NAME, s->paths.dir) <
	            (int)sizeof(link) &&
	    symlinkat(HUTCH_EXEC_SOCK_NAME, AT_FDCWD, link) < 0 && errno != EEXIST)
		hutch_log(HUTCH_LOG_WARN, "exec.sock's link (hutch exec goes by POST /exec): %m");
	return 0;
}

int hutch_api_exec_watch(struct sup *s)
{
	if (s->exec_sock.fd < 0)
		return 0;
	return hutch_loop_add(&s->loop, &s->exec_sock.w, s->exec_sock.fd, EPOLLIN | EPOLLET);
}

void hutch_api_exec_unlisten(struct sup *s)
{
	if (s->exec_sock.fd < 0)
		return;
	hutch_loop_close(&s->loop, &s->exec_sock.w, &s->exec_sock.fd);
	s->exec_sock.paused = false;
	s->exec_sock.retry_ms = 0;
}

/* exec.sock's streams still reading their request. */
static bool waits_request(const struct hutch_exec *x)
{
	return x->on_end == on_end && x->reading && !x->ended;
}

void hutch_api_exec_expire(struct sup *s)
{
	int64_t now = hutch_now_mono_ms();
	struct hutch_exec *x, *next;

	for (x = s->execs; x; x = next) {
		next = x->next;
		if (waits_request(x) && now - x->since_ms >= HUTCH_API_HEADER_TIMEOUT_MS)
			hutch_exec_end(x);
	}
	if (s->exec_sock.retry_ms && now >= s->exec_sock.retry_ms && s->exec_sock.fd >= 0) {
		s->exec_sock.retry_ms = 0;
		s->exec_sock.paused = false;
		accept_all(s);
	}
}

int hutch_api_exec_timeout_ms(struct sup *s)
{
	int64_t now = hutch_now_mono_ms(), left, least = -1;

	for (const struct hutch_exec *x = s->execs; x; x = x->next) {
		if (!waits_request(x))
			continue;
		left = x->since_ms + HUTCH_API_HEADER_TIMEOUT_MS - now;
		left = left < 0 ? 0 : left;
		if (least < 0 || left < least)
			least = left;
	}
	if (s->exec_sock.retry_ms) {
		left = s->exec_sock.retry_ms - now;
		left = left < 0 ? 0 : left;
		if (least < 0 || left < least)
			least = left;
	}
	return (int)least;
}
