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
#include <unistd.h>

#include <http_parser.h>

#include "cleanup.h"
#include "client.h"
#include "fdutil.h"
#include "util.h"

#define RESP_MAX (300u << 20)
/* How long an answer may take (HUTCH_API_TIMEOUT, seconds; 0 waits
 * forever): every request of the CLI is answered at once by a working
 * supervisor (a stream's is its 101), so a silent one is stopped or stuck,
 * and the CLI says so instead of hanging (issue 18). */
#define API_TIMEOUT_DEFAULT 30

/* The wait in ms, or -1 for none; an invalid value is refused. */
int hutch_client_timeout_ms(struct hutch_err *err)
{
	const char *v = getenv("HUTCH_API_TIMEOUT");
	uint64_t sec = API_TIMEOUT_DEFAULT;

	if (v && *v && hutch_parse_u64(v, 0, 86400, &sec) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid HUTCH_API_TIMEOUT '%s': give whole seconds from 0 "
		                     "(no limit) to 86400",
		                     v);
	return sec == 0 ? -1 : (int)(sec * 1000);
}

struct conn_ctx {
	struct hutch_http_resp *resp;
	bool complete;
};

void hutch_http_resp_done(struct hutch_http_resp *r)
{
	hutch_buf_done(&r->body);
}

int hutch_client_connect(const char *path, struct hutch_err *err)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "socket");
	/* Any length of HUTCH_RUNTIME_DIR: a path beyond sun_path's 108 bytes
	 * is reached through its directory's fd. */
	if ((r = hutch_unix_connect(fd, path)) < 0) {
		close(fd);
		return hutch_err_set_errno(err, r == -ENOENT ? -ECONNREFUSED : r,
		                           "cannot connect to '%s'", path);
	}
	return fd;
}

/*
 * Head, body and tail in one sendmsg(): one syscall, and the supervisor
 * reads the whole request at one wakeup. MSG_NOSIGNAL: a server that
 * answered early and closed (a 409 from a pooled sandbox) must not kill the
 * CLI with SIGPIPE; -EPIPE is returned and the answer is still read. hdrs
 * are extra header lines; tail goes right after the body (the first frames
 * of an upgraded stream).
 */
static int send_request(int fd, const char *method, const char *path, const char *hdrs,
                        const char *body, size_t len, const void *tail, size_t tail_len)
{
	char head[1024];
	struct iovec iov[3];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
	int n;

	n = snprintf(head, sizeof(head),
	             "%s %s HTTP/1.1\r\nHost: sandbox\r\n%s"
	             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	             method, path, hdrs ? hdrs : "Connection: close\r\n", body ? len : 0);
	if (n < 0 || n >= (int)sizeof(head))
		return -EINVAL;
	iov[0] = (struct iovec){ head, (size_t)n };
	iov[1] = (struct iovec){ (void *)body, body ? len : 0 };
	iov[2] = (struct iovec){ (void *)tail, tail ? tail_len : 0 };
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

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn_ctx *c = p->data;

	return hutch_buf_append(&c->resp->body, at, len) < 0 ? -1 : 0;
}

static int on_complete(http_parser *p)
{
	struct conn_ctx *c = p->data;

	c->complete = true;
	return 0;
}

/* Read the answer whole into c->resp; with ret_extra, an answer 101 (an
 * upgrade) ends at its head and the bytes after it are the stream's first
 * (*ret_extra, malloc'ed). */
static int read_answer(int fd, const char *sock, struct conn_ctx *c, volatile sig_atomic_t *cancel,
                       char **ret_extra, size_t *ret_extra_len, struct hutch_err *err)
{
	http_parser_settings settings = { .on_body = on_body, .on_message_complete = on_complete };
	http_parser parser;
	/* In .bss, not on the stack: a 64 KiB frame is probed page by page
	 * (-fstack-clash-protection), 16 faults on every HTTP call whatever
	 * the answer's size; here only the pages a read() fills fault (one for
	 * most answers). The CLI has no threads and one call at a time. */
	static char buf[65536];
	int timeout = hutch_client_timeout_ms(err);
	int64_t deadline = hutch_now_mono_ms() + timeout;

	if (timeout == -EINVAL)
		return timeout;
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = c;
	while (!c->complete) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t rest = deadline - hutch_now_mono_ms();
		int left = timeout < 0 ? -1 : rest > 0 ? (int)rest : 0;
		ssize_t n;
		size_t used;
		int p;

		if (cancel && *cancel)
			return hutch_err_set(err, -ECANCELED, "interrupted");
		p = poll(&pfd, 1, left);
		if (p == 0)
			return hutch_err_set(
			        err, -ETIMEDOUT,
			        "the sandbox did not answer within %d s on '%s': its "
			        "supervisor is stopped or stuck (HUTCH_API_TIMEOUT sets "
			        "the wait)",
			        timeout / 1000, sock);
		if (p < 0 || (n = read(fd, buf, sizeof(buf))) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return hutch_err_set_errno(err, -errno, "read from '%s'", sock);
		}
		used = http_parser_execute(&parser, &settings, buf, (size_t)n);
		c->resp->status = parser.status_code;
		if (ret_extra && parser.upgrade && parser.status_code == 101) {
			*ret_extra_len = (size_t)n - used;
			*ret_extra = malloc(*ret_extra_len + 1);
			if (!*ret_extra)
				return hutch_err_set(err, -ENOMEM, "out of memory");
			memcpy(*ret_extra, buf + used, *ret_extra_len);
			return 0;
		}
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

int hutch_client_upgrade(const char *sock, const char *path, const char *proto, const char *headers,
                         const char *body, size_t len, const void *tail, size_t tail_len,
                         volatile sig_atomic_t *cancel, struct hutch_http_resp *ret, int *ret_fd,
                         char **ret_extra, size_t *ret_extra_len, struct hutch_err *err)
{
	struct conn_ctx c = { .resp = ret };
	_cleanup_close_ int fd = -EBADF;
	char hdrs[256];
	int r;

	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	*ret_fd = -EBADF;
	*ret_extra = NULL;
	*ret_extra_len = 0;
	if (cancel && *cancel) /* nothing sent: nothing starts */
		return hutch_err_set(err, -ECANCELED, "interrupted");
	fd = hutch_client_connect(sock, err);
	if (fd < 0)
		return fd;
	snprintf(hdrs, sizeof(hdrs), "Connection: Upgrade\r\nUpgrade: %s\r\n%s", proto, headers);
	r = send_request(fd, "POST", path, hdrs, body, len, tail, tail_len);
	if (r < 0 && r != -EPIPE)
		return hutch_err_set_errno(err, r, "send request to '%s'", sock);
	r = read_answer(fd, sock, &c, cancel, ret_extra, ret_extra_len, err);
	if (r < 0)
		return r;
	(void)hutch_buf_append(&ret->body, "", 1); /* NUL-terminate */
	ret->body.len--;
	if (ret->status == 101)
		*ret_fd = TAKE_FD(fd);
	return 0;
}

int hutch_client_request_begin(const char *sock, const char *method, const char *path,
                               const char *body, size_t len, int *ret_fd, struct hutch_err *err)
{
	_cleanup_close_ int fd = hutch_client_connect(sock, err);
	int r;

	if (fd < 0)
		return fd;
	r = send_request(fd, method, path, NULL, body, len, NULL, 0);
	if (r < 0 && r != -EPIPE)
		return hutch_err_set_errno(err, r, "send request to '%s'", sock);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int hutch_client_request_end(int fd, const char *sock, struct hutch_http_resp *ret,
                             struct hutch_err *err)
{
	struct conn_ctx c = { .resp = ret };
	int r;

	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	r = read_answer(fd, sock, &c, NULL, NULL, NULL, err);
	close(fd);
	if (r < 0)
		return r;
	(void)hutch_buf_append(&ret->body, "", 1); /* NUL-terminate */
	ret->body.len--;
	return 0;
}

int hutch_client_request(const char *sock, const char *method, const char *path, const char *body,
                         size_t len, struct hutch_http_resp *ret, struct hutch_err *err)
{
	int fd = -EBADF, r = hutch_client_request_begin(sock, method, path, body, len, &fd, err);

	if (r < 0) {
		memset(ret, 0, sizeof(*ret));
		hutch_buf_init(&ret->body, RESP_MAX);
		return r;
	}
	return hutch_client_request_end(fd, sock, ret, err);
}
