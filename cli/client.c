/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CLI side of the API; see client.h. The CLI only ever speaks HTTP/1.1 to a
 * local unix socket, so it writes requests itself and parses responses with
 * http-parser (nodejs' parser, linked statically): libcurl's dynamic
 * dependencies alone cost ~11 ms of loader time on every CLI call. Waits are
 * poll()s that a signal interrupts, so Ctrl-C takes effect at once.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <http_parser.h>

#include "cleanup.h"
#include "client.h"
#include "fdutil.h"

#define RESP_MAX (300u << 20)

struct conn_ctx {
	struct hutch_http_resp *resp;
	bool complete;
	/* streaming */
	hutch_sse_cb cb;
	void *ud;
	struct hutch_buf line; /* partial line */
	char event[32];
	struct hutch_buf data; /* data of the event being read */
	bool aborted;
};

void hutch_http_resp_done(struct hutch_http_resp *r)
{
	hutch_buf_done(&r->body);
}

static int connect_unix(const char *path, struct hutch_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return hutch_err_set(err, -ENAMETOOLONG, "socket path '%s' is too long", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(fd);
		return hutch_err_set_errno(err, r == -ENOENT ? -ECONNREFUSED : r,
		                           "cannot connect to '%s'", path);
	}
	return fd;
}

/*
 * Head and body in one sendmsg(): one syscall, and the supervisor reads the
 * whole request at one wakeup. MSG_NOSIGNAL: a server that answered early
 * and closed (a 409 from a pooled sandbox) must not kill the CLI with
 * SIGPIPE; -EPIPE is returned and the answer is still read.
 */
static int send_request(int fd, const char *method, const char *path, const char *body, size_t len)
{
	char head[1024];
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	int n;

	n = snprintf(head, sizeof(head),
	             "%s %s HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n"
	             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	             method, path, body ? len : 0);
	if (n < 0 || n >= (int)sizeof(head))
		return -EINVAL;
	iov[0] = (struct iovec){ head, (size_t)n };
	iov[1] = (struct iovec){ (void *)body, body ? len : 0 };
	while (mh.msg_iovlen > 0) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Skip what was sent: whole iovecs, then part of the next. */
		while (mh.msg_iovlen > 0 && (size_t)w >= mh.msg_iov[0].iov_len) {
			w -= (ssize_t)mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + w;
			mh.msg_iov[0].iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int dispatch_line(struct conn_ctx *c, const char *line, size_t len)
{
	if (len == 0) {
		int r = 0;
		if (c->event[0] || c->data.len) {
			(void)hutch_buf_append(&c->data, "", 1);
			r = c->cb(c->ud, c->event[0] ? c->event : "message",
			          c->data.data ? c->data.data : "", c->data.len - 1);
		}
		c->event[0] = '\0';
		c->data.len = 0;
		return r;
	}
	if (len >= 6 && !memcmp(line, "event:", 6)) {
		size_t off = line[6] == ' ' ? 7 : 6, n = len - off;
		if (n >= sizeof(c->event))
			n = sizeof(c->event) - 1;
		memcpy(c->event, line + off, n);
		c->event[n] = '\0';
	} else if (len >= 5 && !memcmp(line, "data:", 5)) {
		size_t off = line[5] == ' ' ? 6 : 5;
		if (c->data.len)
			(void)hutch_buf_append(&c->data, "\n", 1);
		(void)hutch_buf_append(&c->data, line + off, len - off);
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn_ctx *c = p->data;

	if (!c->cb || p->status_code != 200)
		return hutch_buf_append(&c->resp->body, at, len) < 0 ? -1 : 0;
	for (size_t i = 0; i < len; i++) {
		if (at[i] != '\n') {
			if (hutch_buf_append(&c->line, at + i, 1) < 0)
				return -1;
			continue;
		}
		if (dispatch_line(c, c->line.data ? c->line.data : "", c->line.len) < 0) {
			c->aborted = true;
			return -1;
		}
		c->line.len = 0;
	}
	return 0;
}

static int on_complete(http_parser *p)
{
	struct conn_ctx *c = p->data;

	c->complete = true;
	return 0;
}

static int exchange(const char *sock, const char *method, const char *path, const char *body,
                    size_t len, struct conn_ctx *c, volatile sig_atomic_t *cancel,
                    struct hutch_err *err)
{
	http_parser_settings settings = { .on_body = on_body, .on_message_complete = on_complete };
	_cleanup_close_ int fd = -EBADF;
	http_parser parser;
	char buf[65536];
	int r;

	if (cancel && *cancel) /* nothing sent: nothing starts */
		return hutch_err_set(err, -ECANCELED, "interrupted");
	fd = connect_unix(sock, err);
	if (fd < 0)
		return fd;
	r = send_request(fd, method, path, body, len);
	if (r < 0 && r != -EPIPE)
		return hutch_err_set_errno(err, r, "send request to '%s'", sock);
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = c;
	while (!c->complete) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		size_t used;

		if (cancel && *cancel)
			return hutch_err_set(err, -ECANCELED, "interrupted");
		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return hutch_err_set_errno(err, -errno, "poll");
		}
		n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return hutch_err_set_errno(err, -errno, "read from '%s'", sock);
		}
		used = http_parser_execute(&parser, &settings, buf, (size_t)n);
		c->resp->status = parser.status_code;
		if (c->aborted)
			return 0;
		/* An end of file before the answer is complete is the
		 * connection's end (its supervisor died, issue 18 #5), not a
		 * bad answer, whatever the parser says of it. */
		if (n == 0 && !c->complete)
			return hutch_err_set(err, -ECONNRESET,
			                     "the sandbox closed the connection before answering");
		if (used != (size_t)n || HTTP_PARSER_ERRNO(&parser) != HPE_OK)
			return hutch_err_set(err, -EPROTO, "bad HTTP answer from '%s': %s", sock,
			                     http_errno_description(HTTP_PARSER_ERRNO(&parser)));
	}
	return 0;
}

int hutch_client_request(const char *sock, const char *method, const char *path, const char *body,
                         size_t len, struct hutch_http_resp *ret, struct hutch_err *err)
{
	struct conn_ctx c = { .resp = ret };
	int r;

	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	r = exchange(sock, method, path, body, len, &c, NULL, err);
	if (r < 0)
		return r;
	(void)hutch_buf_append(&ret->body, "", 1); /* NUL-terminate */
	ret->body.len--;
	return 0;
}

int hutch_client_stream(const char *sock, const char *path, const char *body, size_t len,
                        hutch_sse_cb cb, void *ud, volatile sig_atomic_t *cancel,
                        struct hutch_http_resp *ret, struct hutch_err *err)
{
	struct conn_ctx c = { .resp = ret, .cb = cb, .ud = ud };
	int r;

	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	hutch_buf_init(&c.line, 64u << 20);
	hutch_buf_init(&c.data, 64u << 20);
	r = exchange(sock, "POST", path, body, len, &c, cancel, err);
	hutch_buf_done(&c.line);
	hutch_buf_done(&c.data);
	if (r < 0)
		return r;
	(void)hutch_buf_append(&ret->body, "", 1);
	ret->body.len--;
	return 0;
}
