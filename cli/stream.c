/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running a command in a sandbox with its streams relayed (hutch run and
 * exec): the framed byte stream of base/frame.h, on exec.sock (hutch
 * exec), run's hand-over socket, or POST /exec's upgraded connection
 * where the sandbox has no exec.sock; standard input (with -i) goes out in STDIN frames as it
 * is read, STDOUT and STDERR frames are written out byte-exact as they
 * come, and the EXIT frame becomes hutch's exit code. Nothing is read
 * from stdin without -i: the stream then starts with its end of file, sent
 * with the request. Both directions wait in one poll(), so a command that
 * does not read its input never stops its output reaching us, and memory
 * stays at one frame each way. Ctrl-C and SIGTERM hang up, which kills
 * the command only.
 *
 * Bytes are spliced where the kernel can, never passing through our
 * memory: when our stdout (or stderr) is a pipe, a data frame's bytes go
 * from the socket into it (only headers and control frames are read, so
 * the socket is never read past them); -i without a terminal moves
 * stdin's pages into a pipe of our own, whose length (FIONREAD, exact:
 * we are its only reader, which stdin's other readers may not be) makes
 * the frame header, and from there to the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "frame.h"
#include "state.h"
#include "stream.h"
#include "util.h"

#define STDIN_CHUNK (256u << 10)
#define SOCK_CHUNK  (256u << 10)

static volatile sig_atomic_t interrupted, winched;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

static void on_winch(int sig)
{
	winched = 1;
}

/* -t: the caller's terminal in raw mode while the command runs (keys go
 * to the sandbox's terminal as they are typed: ^C, ^Z, ^\ reach its
 * foreground group there, not hutch), restored on every way out of
 * hutch_cli_stream_command(). */
struct tty_mode {
	bool raw;
	struct termios saved;
};

static int tty_raw(struct tty_mode *m)
{
	struct termios t;
	struct sigaction sa = { .sa_handler = on_winch };

	if (tcgetattr(0, &m->saved) < 0)
		return -errno;
	t = m->saved;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSADRAIN, &t) < 0)
		return -errno;
	m->raw = true;
	sigaction(SIGWINCH, &sa, NULL);
	return 0;
}

static void tty_restore(struct tty_mode *m)
{
	if (m->raw)
		(void)tcsetattr(0, TCSADRAIN, &m->saved);
	m->raw = false;
}

void hutch_cli_catch_interrupts(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int hutch_cli_interrupted(void)
{
	return interrupted;
}

/* ---- streaming a command ---- */

struct run_state {
	int exit_code;
	bool got_exit;
	struct hutch_cli_capture *cap; /* --json: output and result kept */
};

/* The result's exit code; its message (a kill, a timeout) is printed
 * unless quiet (--json has it in the JSON). */
static int json_exit_code(const cJSON *res, bool quiet)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
	const cJSON *sig = cJSON_GetObjectItemCaseSensitive(res, "signal");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(res, "message");

	if (cJSON_IsString(msg) && !quiet)
		fprintf(stderr, "hutch: %s\n", msg->valuestring);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "timed_out")))
		return HUTCH_EXIT_TIMEOUT;
	if (cJSON_IsNumber(code))
		return code->valueint;
	if (cJSON_IsNumber(sig))
		return 128 + sig->valueint;
	return HUTCH_EXIT_FAILURE;
}

int hutch_cli_api_error(long status, const char *body)
{
	_cleanup_cjson_ cJSON *j = cJSON_Parse(body);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
	/* its class: the one its code names ("not_found", or a finer
	 * status's row: 403 access_denied), else its status's; its exit code
	 * from the one table (base/error.c, docs/errors.md) */
	enum hutch_errc cls = hutch_errc_of_answer(
	        (int)status, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "code")));

	fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : body);
	return hutch_errc_exit(cls);
}

int hutch_cli_call(const char *sock, const char *method, const char *path, const char *body,
                   long want, cJSON **ret)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	const char *text;
	int r;

	r = hutch_client_request(sock, method, path, body, body ? strlen(body) : 0, &resp, &err);
	if (r < 0)
		return hutch_cli_lost(sock, r, err.msg);
	if (resp.status != want) {
		text = resp.body.data ? resp.body.data : "";
		r = hutch_cli_api_error(resp.status, text);
		hutch_http_resp_done(&resp);
		return r;
	}
	*ret = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	return 0;
}

/* One direction each: stdin to the socket (one frame at a time), the
 * socket to stdout and stderr. */
struct relay {
	const char *path; /* the socket's, for hutch_cli_lost() */
	int sock;
	int pidfd;    /* a run's supervisor (-1: none): its death ends the wait */
	bool dead;    /* it died: what it sent is read, then no more waited for */
	bool in_open; /* stdin still to be read */
	char *obuf;   /* the frame being sent */
	size_t ooff, olen;
	char *ibuf;
	struct hutch_frame_dec dec;
	struct run_state *rs;
	bool eof;
	bool splice_to[3]; /* by fd (1, 2): a pipe, spliced into */
	int via[2];        /* -i: stdin spliced through this pipe, or -1 */
	uint32_t in_owed;  /* bytes of the stdin frame sent still in via[0] */
};

/* A RESULT frame (the exit frame in brief, asked for without --json):
 * its exit code, as json_exit_code() makes it of the JSON. */
static int brief_exit_code(const char *data, size_t len)
{
	struct hutch_frame_result res;

	if (hutch_frame_result_decode(data, len, &res) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "broken stream from the sandbox: a malformed result");
	if (res.message_len)
		fprintf(stderr, "hutch: %.*s\n", (int)res.message_len, res.message);
	if (res.flags & HUTCH_FRAME_RESULT_TIMEOUT)
		return HUTCH_EXIT_TIMEOUT;
	if (res.flags & HUTCH_FRAME_RESULT_EXITED)
		return res.exit_code;
	if (res.flags & HUTCH_FRAME_RESULT_SIGNAL)
		return 128 + res.signal;
	return HUTCH_EXIT_FAILURE;
}

static void on_final(struct run_state *rs, enum hutch_frame_type t, const char *data, size_t len)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *m;

	rs->got_exit = true;
	if (t == HUTCH_FRAME_RESULT) { /* no JSON: libcjson stays unloaded */
		rs->exit_code = brief_exit_code(data, len);
		return;
	}
	j = cJSON_ParseWithLength(data, len);
	m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"),
	                                     "message");
	if (t == HUTCH_FRAME_REFUSED) { /* hutch run's: what POST /exec answers */
		_cleanup_free_ char *body = strndup(data, len);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");

		rs->exit_code = hutch_cli_api_error(
		        cJSON_IsNumber(st) ? (long)st->valuedouble : 500, body ? body : "");
		return;
	}
	if (t == HUTCH_FRAME_EXIT) {
		rs->exit_code = j ? json_exit_code(j, rs->cap) : HUTCH_EXIT_FAILURE;
		if (rs->cap && cJSON_IsObject(j))
			rs->cap->result = TAKE_PTR(j);
		return;
	}
	fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : "error");
	rs->exit_code = HUTCH_EXIT_GONE;
}

/* Output written out, or kept (--json). */
static int output(struct run_state *rs, const struct hutch_frame_ev *ev)
{
	bool err = ev->type == HUTCH_FRAME_STDERR;

	if (rs->cap)
		return hutch_buf_append(err ? &rs->cap->err : &rs->cap->out, ev->data, ev->len);
	(void)hutch_write_all(err ? 2 : 1, ev->data, ev->len);
	return 0;
}

/* What the sandbox sent: output written out, the last frame noted.
 * Returns -EPROTO on a broken stream. */
static int take_frames(struct relay *rl, const char *buf, size_t n)
{
	while (n > 0) {
		struct hutch_frame_ev ev;
		ssize_t r = hutch_frame_decode(&rl->dec, buf, n, &ev);

		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE,
			                      "broken stream from the sandbox: %s", rl->dec.error);
		if (ev.kind == HUTCH_FRAME_EV_DATA && output(rl->rs, &ev) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		else if (ev.kind == HUTCH_FRAME_EV_CTL)
			on_final(rl->rs, ev.type, ev.data, ev.len);
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read one chunk of stdin into a frame (length 0 at its end). */
static void read_stdin_frame(struct relay *rl)
{
	ssize_t n = read(0, rl->obuf + HUTCH_FRAME_HDR, STDIN_CHUNK);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		n = 0;
		rl->in_open = false;
	}
	hutch_frame_header((uint8_t *)rl->obuf, HUTCH_FRAME_STDIN, (uint32_t)n);
	rl->ooff = 0;
	rl->olen = HUTCH_FRAME_HDR + (size_t)n;
}

/* -i, spliced: what stdin has now moves into our pipe, a frame header
 * for it is queued, its bytes follow from the pipe (send_pending). */
static void splice_stdin_frame(struct relay *rl)
{
	ssize_t n = splice(0, NULL, rl->via[1], NULL, HUTCH_FRAME_DATA_MAX,
	                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	int avail = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) { /* stdin cannot be spliced (EINVAL): read it */
		hutch_close_many(rl->via, 2);
		rl->via[0] = rl->via[1] = -1;
		read_stdin_frame(rl);
		return;
	}
	if (n > 0 && ioctl(rl->via[0], FIONREAD, &avail) < 0)
		avail = (int)n;
	hutch_frame_header((uint8_t *)rl->obuf, HUTCH_FRAME_STDIN, (uint32_t)avail);
	rl->ooff = 0;
	rl->olen = HUTCH_FRAME_HDR;
	rl->in_owed = (uint32_t)avail;
	if (n == 0)
		rl->in_open = false;
}

static void queue_resize(struct relay *rl)
{
	uint16_t rows, cols;
	uint8_t *o = (uint8_t *)rl->obuf;

	winched = 0;
	if (!hutch_cli_window_size(&rows, &cols))
		return;
	hutch_frame_header(o, HUTCH_FRAME_RESIZE, 4);
	o[5] = (uint8_t)(rows >> 8), o[6] = (uint8_t)rows;
	o[7] = (uint8_t)(cols >> 8), o[8] = (uint8_t)cols;
	rl->ooff = 0;
	rl->olen = HUTCH_FRAME_HDR + 4;
}

/* splice() into the socket has no MSG_NOSIGNAL: a sandbox that closed the
 * stream would kill us with SIGPIPE before its last frame is read. The
 * signal is blocked around it and, when EPIPE says it was raised, taken
 * back; a reader of our stdout that went away still stops us as before. */
static ssize_t splice_to_sock(int in, int sock, size_t len)
{
	struct timespec zero = { 0 };
	sigset_t pipe_set, old;
	ssize_t n;
	int saved;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe_set, &old);
	n = splice(in, NULL, sock, NULL, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	saved = errno;
	if (n < 0 && errno == EPIPE)
		(void)sigtimedwait(&pipe_set, NULL, &zero);
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return n;
}

/* One step of sending: the queued frame (or header), then the stdin
 * bytes it owes from our pipe. Returns false to wait for room. */
static bool send_step(struct relay *rl)
{
	ssize_t w;

	if (rl->ooff == rl->olen && rl->in_owed) {
		w = splice_to_sock(rl->via[0], rl->sock, rl->in_owed);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return false;
		if (w <= 0) { /* the sandbox stopped reading: its answer follows */
			rl->in_open = false;
			rl->in_owed = 0;
			return false;
		}
		rl->in_owed -= (uint32_t)w;
		return true;
	}
	w = send(rl->sock, rl->obuf + rl->ooff, rl->olen - rl->ooff, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (w < 0) { /* the sandbox stopped reading: its answer follows */
		rl->in_open = false;
		rl->ooff = rl->olen = 0;
		return false;
	}
	rl->ooff += (size_t)w;
	if (rl->ooff == rl->olen)
		rl->ooff = rl->olen = 0;
	return true;
}

static void send_pending(struct relay *rl)
{
	while ((rl->ooff < rl->olen || rl->in_owed) && send_step(rl))
		;
}

/* Move the current data frame's bytes from the socket into our stdout or
 * stderr pipe. Returns 1 if it moved some (or met the end), 0 if that
 * stream is not spliced (read it), -1 to wait for more. */
static int splice_data(struct relay *rl)
{
	enum hutch_frame_type t;
	size_t left = hutch_frame_dec_pending(&rl->dec, &t);
	int fd = t == HUTCH_FRAME_STDERR ? 2 : 1;
	ssize_t n;

	if (!left || !rl->splice_to[fd])
		return 0;
	n = splice(rl->sock, NULL, fd, NULL, left, SPLICE_F_MOVE | SPLICE_F_MORE);
	if (n > 0) {
		hutch_frame_dec_skip(&rl->dec, (size_t)n);
		return 1;
	}
	if (n == 0) {
		rl->eof = true;
		return 1;
	}
	if (errno == EAGAIN || errno == EINTR)
		return -1;
	/* EPIPE and the like: read it instead, and drop it as write does */
	rl->splice_to[fd] = false;
	return 0;
}

/* What to read from the socket: with a stream spliced, not past the
 * current header or frame (its data must stay in the socket). */
static size_t recv_size(const struct relay *rl)
{
	enum hutch_frame_type t;
	size_t left;

	if (!rl->splice_to[1] && !rl->splice_to[2])
		return SOCK_CHUNK;
	left = hutch_frame_dec_pending(&rl->dec, &t);
	if (!left)
		left = rl->dec.left ? rl->dec.left : HUTCH_FRAME_HDR - rl->dec.hdr_len;
	return left < SOCK_CHUNK ? left : SOCK_CHUNK;
}

static int recv_frames(struct relay *rl)
{
	ssize_t n = splice_data(rl);

	if (n) { /* (dead: nothing more comes, the socket empty) */
		rl->eof = rl->eof || (n < 0 && rl->dead);
		return 0;
	}
	n = recv(rl->sock, rl->ibuf, recv_size(rl), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		rl->eof = rl->dead && errno == EAGAIN;
		return 0;
	}
	if (n <= 0) {
		rl->eof = true;
		return 0;
	}
	if (take_frames(rl, rl->ibuf, (size_t)n))
		return -1;
	/* a header just read: its bytes are likely there already */
	while (!rl->eof && splice_data(rl) > 0)
		;
	return 0;
}

static int relay_loop(struct relay *rl)
{
	while (!rl->rs->got_exit && !rl->eof) {
		bool pending = rl->ooff < rl->olen || rl->in_owed;
		/* The socket's EOF needs every holder of its other end gone: a
		 * run's is bounded by its supervisor's life too (pidfd). */
		struct pollfd p[3] = { { .fd = rl->sock,
			                 .events = POLLIN | (pending ? POLLOUT : 0) },
			               { .fd = rl->pidfd, .events = POLLIN },
			               { .fd = 0, .events = POLLIN } };
		int r;

		if (interrupted)
			return 128 + interrupted;
		if (winched && !pending)
			queue_resize(rl);
		if (poll(p, rl->in_open && !pending ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "poll: %s", strerror(errno));
		}
		/* A resize signalled while we slept goes before the keys typed
		 * after it: the kernel sends SIGWINCH when the size changes,
		 * before those keys exist, and its handler has run by now. */
		pending = rl->ooff < rl->olen || rl->in_owed;
		if (winched && !pending)
			queue_resize(rl);
		if (rl->in_open && rl->ooff == rl->olen && !rl->in_owed && p[2].revents) {
			if (rl->via[0] >= 0)
				splice_stdin_frame(rl);
			else
				read_stdin_frame(rl);
		}
		if (rl->ooff < rl->olen || rl->in_owed)
			send_pending(rl);
		rl->dead = rl->dead || p[1].revents;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) || rl->dead) {
			r = recv_frames(rl);
			if (r)
				return HUTCH_EXIT_FAILURE;
		}
	}
	if (!rl->rs->got_exit) /* its supervisor died, or it was deleted (66) */
		return hutch_cli_lost(rl->path, -ECONNRESET,
		                      "the sandbox closed the stream before the command "
		                      "finished");
	return rl->rs->exit_code;
}

static int relay(const char *path, int sock, int pidfd, bool interactive, const char *extra,
                 size_t extra_len, unsigned allowed, struct run_state *rs)
{
	/* In .bss, not malloc()ed: 256 KiB each was an mmap() and a munmap()
	 * per buffer on every exec and run (issue 31); only the pages a frame
	 * touches fault either way. One relay per CLI process. */
	static char obuf[HUTCH_FRAME_HDR + STDIN_CHUNK];
	static char ibuf[SOCK_CHUNK];
	struct relay rl = {
		.path = path,
		.sock = sock,
		.pidfd = pidfd,
		.in_open = interactive,
		.obuf = obuf,
		.ibuf = ibuf,
		.rs = rs,
		.via = { -1, -1 },
	};
	int r;

	/* Our pipes (stdin with -i, stdout, stderr) get room for a whole
	 * frame: fewer, larger moves; only their capacity changes. */
	for (int fd = 0; fd <= 2; fd++) {
		struct stat st;
		bool fifo = fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);

		if (fifo && (fd > 0 || interactive))
			(void)fcntl(fd, F_SETPIPE_SZ, (int)HUTCH_FRAME_DATA_MAX);
		/* --json keeps the output: it must pass through take_frames(). */
		if (fd > 0)
			rl.splice_to[fd] = fifo && !rs->cap;
	}
	/* Non-blocking: a splice into the socket must never wait (the
	 * output has to be read meanwhile). */
	(void)hutch_fd_nonblock(sock, true);
	if (interactive && !isatty(0) && pipe2(rl.via, O_CLOEXEC | O_NONBLOCK) == 0)
		(void)fcntl(rl.via[1], F_SETPIPE_SZ, (int)HUTCH_FRAME_DATA_MAX);
	else
		rl.via[0] = rl.via[1] = -1;
	hutch_frame_dec_init(&rl.dec, allowed);
	r = take_frames(&rl, extra, extra_len) ? HUTCH_EXIT_FAILURE : relay_loop(&rl);
	if (rl.via[0] >= 0)
		hutch_close_many(rl.via, 2);
	return r;
}

/* POST /exec and the relay, once the terminal (-t) is set up. */
static int run_stream(const char *sock, const char *body, size_t len,
                      const struct hutch_cli_args *a, struct hutch_cli_capture *cap)
{
	_cleanup_free_ char *extra = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE, .cap = cap };
	uint8_t eof[HUTCH_FRAME_HDR];
	size_t extra_len = 0;
	int r;

	/* Without -i, stdin's end goes with the request. */
	hutch_frame_header(eof, HUTCH_FRAME_STDIN, 0);
	/* the exit frame in brief (no JSON to parse) unless --json keeps it */
	r = hutch_client_upgrade(sock, "/exec", "hutch-exec",
	                         cap ? "" : "Hutch-Exit-Frame: brief\r\n", body, len,
	                         a->interactive ? NULL : eof, a->interactive ? 0 : sizeof(eof),
	                         &interrupted, &resp, &fd, &extra, &extra_len, &err);
	if (r < 0) {
		hutch_http_resp_done(&resp);
		if (r == -ECANCELED)
			return 128 + (interrupted ? interrupted : SIGINT);
		return hutch_cli_lost(sock, r, err.msg);
	}
	if (fd < 0) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	hutch_http_resp_done(&resp);
	return relay(sock, fd, -1, a->interactive, extra, extra_len, HUTCH_FRAME_FROM_SERVER, &rs);
}

/* The request as hutch run's hand-over and hutch exec's socket take it:
 * its length (4 bytes, big-endian), the body and, without -i, stdin's
 * end; from *off on, until sent, refused (the supervisor's answer follows
 * on the socket) or, with MSG_DONTWAIT in flags, the socket full. */
static void send_request(int fd, const char *body, size_t len, bool interactive, size_t *off,
                         int flags)
{
	uint8_t head[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
		            (uint8_t)len };
	uint8_t eof[HUTCH_FRAME_HDR];
	struct iovec iov[3] = { { head, sizeof(head) },
		                { (void *)body, len },
		                { eof, interactive ? 0 : sizeof(eof) } };
	ssize_t n;

	hutch_frame_header(eof, HUTCH_FRAME_STDIN, 0);
	for (;;) {
		struct iovec v[3];
		struct msghdr m = { .msg_iov = v };
		size_t skip = *off;

		for (int i = 0; i < 3; i++) {
			if (skip >= iov[i].iov_len) {
				skip -= iov[i].iov_len;
				continue;
			}
			v[m.msg_iovlen].iov_base = (char *)iov[i].iov_base + skip;
			v[m.msg_iovlen++].iov_len = iov[i].iov_len - skip;
			skip = 0;
		}
		if (!m.msg_iovlen)
			return;
		n = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		*off += (size_t)n;
	}
}

/* hutch run's: the request on a socketpair of ours; what fits goes
 * before the acknowledgement that hands the other end over, so the
 * supervisor finds the request whole. */
static int run_handover(const char *sock, int pidfd, const char *body, size_t len,
                        const struct hutch_cli_args *a, struct hutch_cli_capture *cap,
                        int (*ack)(void *ud, int fd), void *ud)
{
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE, .cap = cap };
	_cleanup_close_ int fd = -EBADF;
	size_t off = 0;
	int sp[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		r = ack(ud, -1);
		return r ? r
		         : hutch_cli_fail(HUTCH_EXIT_FAILURE, "socketpair: %s", strerror(errno));
	}
	fd = sp[0];
	send_request(fd, body, len, a->interactive, &off, MSG_DONTWAIT);
	r = ack(ud, sp[1]);
	close(sp[1]);
	if (r)
		return r;
	send_request(fd, body, len, a->interactive, &off, 0);
	return relay(sock, fd, pidfd, a->interactive, NULL, 0,
	             HUTCH_FRAME_FROM_SERVER | HUTCH_FRAME_BIT(HUTCH_FRAME_REFUSED), &rs);
}

/* hutch exec's socket (supervisor/api/exec-sock.c): exec.sock beside the
 * API's; connected, or -errno when there is none (a supervisor older
 * than it, a run's or a container's API: POST /exec then). */
static int connect_exec_sock(const char *sock)
{
	struct hutch_err ignored = { 0 };
	const char *slash = strrchr(sock, '/');
	size_t dir = slash ? (size_t)(slash - sock) + 1 : 0;
	char path[4200];

	/* its name for the request without JSON (runtime/state.h): a
	 * supervisor of an older hutch has none, POST /exec serves it */
	if (dir + sizeof(HUTCH_EXEC_FORMS_NAME) > sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, sock, dir);
	memcpy(path + dir, HUTCH_EXEC_FORMS_NAME, sizeof(HUTCH_EXEC_FORMS_NAME));
	return hutch_client_connect(path, &ignored);
}

/* hutch exec's request on that socket, then its frames: no HTTP; a
 * refusal is what POST /exec would answer, in a REFUSED frame. */
static int exec_sock_stream(const char *sock, int fd, const char *body, size_t len,
                            const struct hutch_cli_args *a, struct hutch_cli_capture *cap)
{
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE, .cap = cap };
	struct hutch_err err = { 0 };
	int timeout = hutch_client_timeout_ms(&err);
	size_t off = 0;

	send_request(fd, body, len, a->interactive, &off, 0);
	/* Nothing answers before the command's first bytes: while none came
	 * within HUTCH_API_TIMEOUT, ask whether the supervisor answers at all
	 * (POST /exec's 101 did), else give up naming the cause as every call
	 * does. With -i stdin is relayed meanwhile: the relay waits. */
	while (!a->interactive && timeout >= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct hutch_http_resp resp = { 0 };
		int r = poll(&p, 1, timeout);

		if (r < 0 && errno == EINTR)
			continue;
		if (r != 0)
			break;
		r = hutch_client_request(sock, "GET", "/health", NULL, 0, &resp, &err);
		hutch_http_resp_done(&resp);
		if (r < 0)
			return hutch_cli_lost(sock, r, err.msg);
	}
	return relay(sock, fd, -1, a->interactive, NULL, 0,
	             HUTCH_FRAME_FROM_SERVER | HUTCH_FRAME_BIT(HUTCH_FRAME_REFUSED), &rs);
}

int hutch_cli_run_relay(const char *sock, int fd, int pidfd, const struct hutch_cli_args *a,
                        struct hutch_cli_capture *cap)
{
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE, .cap = cap };

	return relay(sock, fd, pidfd, a->interactive, NULL, 0,
	             HUTCH_FRAME_FROM_SERVER | HUTCH_FRAME_BIT(HUTCH_FRAME_REFUSED), &rs);
}

static int stream(const char *sock, int pidfd, char **argv, const struct hutch_cli_args *a,
                  struct hutch_cli_capture *cap, int (*ack)(void *ud, int fd), void *ud)
{
	bool tty_fails = a->tty && !isatty(0);
	/* exec's own socket where there is one; a run has its hand-over */
	_cleanup_close_ int xfd = ack || tty_fails ? -EBADF : connect_exec_sock(sock);
	/* brief in the body without HTTP only (POST /exec: a header) */
	bool own = ack || xfd >= 0;
	size_t len = 0;
	_cleanup_free_ char *body = hutch_cli_exec_body(
	        argv, a, (own ? HUTCH_CLI_BODY_OWN : 0) | (own && !cap ? HUTCH_CLI_BODY_BRIEF : 0),
	        &len);
	struct tty_mode tm = { 0 };
	int r;

	/* a run that runs nothing is acknowledged first, as before */
	if (ack && (!body || tty_fails) && (r = ack(ud, -1)))
		return r;
	if (!body)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (tty_fails)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "the input device is not a terminal: -t needs one on standard "
		        "input (drop -t, or use -i alone for a pipe)");
	/* Raw before the request: keys typed while it starts are not cooked
	 * (a ^D must reach the sandbox, not end our input). */
	if (a->tty && tty_raw(&tm) < 0) {
		int e = errno;

		if (ack && (r = ack(ud, -1)))
			return r;
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "cannot set the terminal to raw mode: %s",
		                      strerror(e));
	}
	if (ack)
		r = run_handover(sock, pidfd, body, len, a, cap, ack, ud);
	else if (xfd >= 0)
		r = exec_sock_stream(sock, xfd, body, len, a, cap);
	else
		r = run_stream(sock, body, len, a, cap);
	tty_restore(&tm);
	return r;
}

int hutch_cli_stream_command(const char *sock, char **argv, const struct hutch_cli_args *a,
                             struct hutch_cli_capture *cap)
{
	return stream(sock, -1, argv, a, cap, NULL, NULL);
}

int hutch_cli_stream_run(const char *sock, int pidfd, char **argv, const struct hutch_cli_args *a,
                         struct hutch_cli_capture *cap, int (*ack)(void *ud, int fd), void *ud)
{
	return stream(sock, pidfd, argv, a, cap, ack, ud);
}
