/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /exec (docs/api.md): a command whose stdin, stdout and stderr
 * travel byte-exact over the request's own connection. The request is an
 * ordinary JSON body (/run's fields) with "Upgrade: hutch-exec"; it is
 * answered 101 and the socket then carries frames (base/frame.h) both
 * ways, relayed here between the socket and the command's pipes.
 *
 * Memory is bounded and each direction has back-pressure: the socket is
 * read into one buffer only when the previous read has gone into the
 * command's stdin (a full pipe stops the reading until EPOLLOUT), and the
 * command's output is framed into a queue that pauses the command's pipes
 * (hutch_cmd_resume_output()) beyond EXEC_OUT_HIGH until the socket has
 * taken it. A half-close of the client (read end of file) is the end of
 * stdin only (issue 18 #7); a hang-up (EPOLLHUP: both directions) or a
 * broken frame kills the command. The last frame is EXIT (the result
 * JSON of /run, without output), RESULT (the same in brief, binary, when
 * the body asked: "exit_frame": "brief") or ERROR (the sandbox ended); the socket
 * is then handed back to libmicrohttpd, which closes it.
 *
 * hutch run's and hutch exec's commands come without HTTP (exec-run.c): on
 * the socket the run's "E" brought (supervisor/sandbox.h), or exec.sock's
 * (exec-sock.c), the length (4 bytes, big-endian) and the same JSON body
 * first, then the same frames; a refusal is a REFUSED frame with /exec's
 * answer and its status. That socket is ours and closed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "fdutil.h"
#include "frame.h"
#include "journal.h"
#include "request.h"
#include "routes.h"
#include "supervisor.h"

#include "exec-internal.h"

#define EXEC_UPGRADE   "hutch-exec"
#define EXEC_PIPE_SIZE (1u << 20) /* the command's pipes: fewer wakeups per byte */

/* libmicrohttpd completed the request: before the upgrade, the client
 * went away (end); after it, the stream lives on its own. */
static void exec_detach(void *p)
{
	struct hutch_exec *x = p;

	if (!x)
		return;
	x->r = NULL;
	if (!x->urh)
		hutch_exec_end(x);
}

static bool pump_in(struct hutch_exec *x);

/* A tty's master is known now: its input may flow. */
static void on_spawned(void *ud, struct cmd *c)
{
	struct hutch_exec *x = ud;

	if (x->started)
		return;
	x->in_fd = hutch_cmd_take_stdin(c);
	x->started = true;
	if (x->live && pump_in(x))
		hutch_exec_update_events(x);
}

/*
 * The EXIT frame is a control frame (at most HUTCH_FRAME_CTL_MAX bytes): a
 * change list too long for it goes as its counts alone, every entry counted
 * in "omitted" (POST /v1/run and GET /processes give the list whole).
 */
static char *fit_exit_frame(cJSON *j)
{
	char *text = cJSON_PrintUnformatted(j);
	cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "changes"), *om;
	static const char *const lists[] = { "created", "modified", "deleted" };
	double n = 0;

	if (!text || strlen(text) < HUTCH_FRAME_CTL_MAX || !cJSON_IsObject(ch))
		return text;
	free(text);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		cJSON *l = cJSON_GetObjectItemCaseSensitive(ch, lists[i]);

		n += cJSON_GetArraySize(l);
		cJSON_ReplaceItemInObjectCaseSensitive(ch, lists[i], cJSON_CreateArray());
	}
	om = cJSON_GetObjectItemCaseSensitive(ch, "omitted");
	n += cJSON_IsNumber(om) ? om->valuedouble : 0;
	cJSON_ReplaceItemInObjectCaseSensitive(ch, "omitted", cJSON_CreateNumber(n));
	return cJSON_PrintUnformatted(j);
}

static void on_done(void *ud, struct cmd *c)
{
	struct hutch_exec *x = ud;
	struct sup *s = x->s;
	bool gone = s->state != SUP_RUNNING, brief = x->brief && !gone;
	cJSON *j = gone ? hutch_api_ended_json(s) : brief ? NULL : hutch_cmd_result_json(c, 0);
	_cleanup_free_ char *text = NULL;
	char res[HUTCH_FRAME_CTL_MAX]; /* "exit_frame": "brief": a RESULT frame, no JSON */
	size_t n = brief ? hutch_cmd_result_brief(c, res, sizeof(res)) : 0;

	if (j && c->spawn_error && !gone)
		cJSON_AddStringToObject(j, "error", c->spawn_error);
	text = j ? fit_exit_frame(j) : NULL;
	cJSON_Delete(j);
	hutch_loop_close(&s->loop, &x->w_in, &x->in_fd);
	x->finished = true;
	/* Its journal line (the command's exit known: the journal's hook ran
	 * first) before its answer, not at the stream's end: a `hutch journal`
	 * right after the exec or run returned missed it now and then. */
	hutch_journal_request_end(x->jr, 0);
	x->jr = NULL;
	if (x->owed) { /* its pipe is closed: the frame cannot be completed */
		hutch_exec_abort(x);
		return;
	}
	if (brief ? !hutch_exec_queue_frame(x, HUTCH_FRAME_RESULT, res, n)
	          : !text || !hutch_exec_queue_frame(x, gone ? HUTCH_FRAME_ERROR : HUTCH_FRAME_EXIT,
	                                             text, strnlen(text, HUTCH_FRAME_CTL_MAX))) {
		hutch_exec_abort(x);
		return;
	}
	if (hutch_exec_flush(x))
		hutch_exec_update_events(x);
}

static void close_stdin(struct hutch_exec *x)
{
	/* A terminal has no end of input but a byte (^D): the master stays. */
	if (!x->tty)
		hutch_loop_close(&x->s->loop, &x->w_in, &x->in_fd);
}

static void on_control(struct hutch_exec *x, const struct hutch_frame_ev *ev)
{
	const uint8_t *d = (const uint8_t *)ev->data;
	uint32_t sig;

	if (ev->type == HUTCH_FRAME_RESIZE && ev->len == 4 && x->tty && x->in_fd >= 0) {
		struct winsize ws = { .ws_row = (unsigned short)(d[0] << 8 | d[1]),
			              .ws_col = (unsigned short)(d[2] << 8 | d[3]) };
		(void)ioctl(x->in_fd, TIOCSWINSZ, &ws); /* SIGWINCH to its foreground */
		return;
	}
	if (ev->type != HUTCH_FRAME_SIGNAL || ev->len != 4 || !x->cmd)
		return;
	sig = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
	if (sig >= 1 && sig < 65)
		hutch_cmd_kill(x->cmd, (int)sig, 0);
}

/* Write one data piece to stdin. Returns the bytes taken; when the pipe
 * did not take them all it is watched for room. */
static size_t feed_stdin(struct hutch_exec *x, const char *data, size_t n)
{
	ssize_t w;

	if (x->in_fd < 0)
		return n; /* closed, or the command stopped reading: dropped */
	do
		w = write(x->in_fd, data, n);
	while (w < 0 && errno == EINTR);
	if (w < 0 && errno != EAGAIN) {
		close_stdin(x); /* EPIPE: the rest of stdin is dropped */
		return n;
	}
	if (w < 0)
		w = 0;
	if (x->cmd)
		x->cmd->stdin_streamed += (size_t)w;
	if ((size_t)w < n && !hutch_watch_active(&x->w_in))
		(void)hutch_loop_add(&x->s->loop, &x->w_in, x->in_fd, EPOLLOUT);
	return (size_t)w;
}

/* Decode what was read, writing stdin data into the pipe until it is full.
 * Returns false if the stream ended. */
static bool pump_in(struct hutch_exec *x)
{
	while (x->started && x->ioff < x->ilen) {
		struct hutch_frame_ev ev;
		ssize_t r = hutch_frame_decode(&x->dec, x->ibuf + x->ioff, x->ilen - x->ioff, &ev);
		size_t w;

		if (r < 0) {
			hutch_exec_end(x); /* a broken stream: the command is killed */
			return false;
		}
		if (ev.kind == HUTCH_FRAME_EV_DATA) {
			w = feed_stdin(x, ev.data, ev.len);
			if (w < ev.len) { /* the pipe is full: the rest waits */
				hutch_frame_dec_unread(&x->dec, ev.len - w);
				x->ioff += (size_t)r - (ev.len - w);
				return true;
			}
		} else if (ev.kind == HUTCH_FRAME_EV_EOF) {
			close_stdin(x);
		} else if (ev.kind == HUTCH_FRAME_EV_CTL) {
			on_control(x, &ev);
		}
		x->ioff += (size_t)r;
	}
	if (x->ioff < x->ilen)
		return true; /* not started: the rest waits */
	x->ioff = x->ilen = 0;
	if (hutch_watch_active(&x->w_in))
		hutch_loop_del(&x->s->loop, &x->w_in);
	return true;
}

static void on_stdin_room(struct hutch_watch *w, uint32_t events)
{
	struct hutch_exec *x = w->ptr;

	hutch_loop_del(&x->s->loop, &x->w_in);
	x->in_full = false;
	if (pump_in(x))
		hutch_exec_update_events(x);
}

/* Move the current stdin frame's bytes from the socket into the command's
 * stdin pipe (splice: no copy here). Returns 1 if it moved some, -1 to
 * wait (the socket is empty, or the pipe is full: then watched for room),
 * 0 to read them instead (not a stdin frame, a terminal, stdin closed). */
static int splice_in(struct hutch_exec *x)
{
	enum hutch_frame_type t;
	size_t left = hutch_frame_dec_pending(&x->dec, &t);
	int queued = 0;
	ssize_t n;

	if (!left || t != HUTCH_FRAME_STDIN || x->tty || x->no_splice_in || x->in_fd < 0)
		return 0;
	n = splice(x->sock, NULL, x->in_fd, NULL, left, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	if (n > 0) {
		hutch_frame_dec_skip(&x->dec, (size_t)n);
		if (x->cmd)
			x->cmd->stdin_streamed += (size_t)n;
		return 1;
	}
	if (n < 0 && errno == EAGAIN) {
		if (ioctl(x->sock, FIONREAD, &queued) < 0 || queued == 0)
			return -1;
		x->in_full = true;
		if (!hutch_watch_active(&x->w_in))
			(void)hutch_loop_add(&x->s->loop, &x->w_in, x->in_fd, EPOLLOUT);
		return -1;
	}
	if (n < 0 && errno != EPIPE && errno != EINTR)
		x->no_splice_in = true;
	return 0; /* the end of file, EPIPE: read() and write() say so */
}

/* What to read from the socket: while stdin frames may be spliced, never
 * past the current header or control frame. */
static size_t read_size(const struct hutch_exec *x)
{
	enum hutch_frame_type t;
	size_t left = hutch_frame_dec_pending(&x->dec, &t);

	if (x->tty || x->no_splice_in)
		return EXEC_IN_BUF;
	if (!left)
		left = x->dec.left ? x->dec.left : HUTCH_FRAME_HDR - x->dec.hdr_len;
	return left < EXEC_IN_BUF ? left : EXEC_IN_BUF;
}

/* ibuf at least size bytes (its content is not kept: read before use). */
static int ibuf_room(struct hutch_exec *x, size_t size)
{
	char *p;

	if (size <= x->icap)
		return 0;
	p = malloc(size);
	if (!p)
		return -ENOMEM;
	free(x->ibuf);
	x->ibuf = p;
	x->icap = size;
	return 0;
}

static bool read_sock(struct hutch_exec *x)
{
	size_t want;
	ssize_t n;

	if (splice_in(x))
		return true;
	want = read_size(x);
	if (want > x->icap && ibuf_room(x, EXEC_IN_BUF) < 0) {
		hutch_exec_end(x);
		return false;
	}
	do
		n = read(x->sock, x->ibuf, want);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return true;
	if (n < 0) {
		hutch_exec_end(x);
		return false;
	}
	if (n == 0) {
		/* A half-close: the client has no more input, but may still
		 * read the output (issue 18 #7). */
		x->rd_eof = true;
		close_stdin(x);
		return true;
	}
	x->ioff = 0;
	x->ilen = (size_t)n;
	return pump_in(x);
}

static void on_sock(struct hutch_watch *w, uint32_t events)
{
	struct hutch_exec *x = w->ptr;

	if (x->reading) {
		x->reading(x);
		return;
	}
	/* Hung up both ways: the client is gone, whatever it sent last (its
	 * end of file must not let the command run on to completion). */
	if (events & (EPOLLHUP | EPOLLERR)) {
		hutch_exec_end(x);
		return;
	}
	if ((events & EPOLLOUT) && !hutch_exec_flush(x))
		return;
	if ((events & EPOLLIN) && !x->rd_eof && x->ioff == x->ilen && !read_sock(x))
		return;
	hutch_exec_update_events(x);
}

void hutch_exec_go(struct hutch_exec *x, const char *extra, size_t extra_size)
{
	x->live = true;
	(void)hutch_fd_nonblock(x->sock, true);
	if (ibuf_room(x, extra_size) < 0) {
		hutch_exec_end(x);
		return;
	}
	if (extra_size) /* memcpy from NULL is undefined even for 0 bytes (UBSan) */
		memcpy(x->ibuf, extra, extra_size);
	x->ilen = extra_size;
	if (x->aborted || (!hutch_watch_active(&x->w_sock) &&
	                   hutch_loop_add(&x->s->loop, &x->w_sock, x->sock, 0) < 0)) {
		hutch_exec_end(x);
		return;
	}
	if (pump_in(x) && hutch_exec_flush(x))
		hutch_exec_update_events(x);
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                       size_t extra_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct hutch_exec *x = cls;

	x->urh = urh;
	x->sock = sock;
	hutch_exec_go(x, extra, extra_size);
}

static enum MHD_Result refuse_no_upgrade(struct request *r)
{
	return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "upgrade_required",
	                        "POST /exec streams over the connection: send "
	                        "'Connection: Upgrade' and 'Upgrade: " EXEC_UPGRADE
	                        "' (docs/api.md)");
}

struct hutch_exec *hutch_exec_new(struct sup *s)
{
	struct hutch_exec *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->ibuf = malloc(EXEC_IN_FIRST);
	if (!x->ibuf) {
		free(x);
		return NULL;
	}
	x->icap = EXEC_IN_FIRST;
	x->s = s;
	x->sock = -1;
	x->in_fd = -EBADF;
	x->passed_fd = -EBADF;
	hutch_watch_init(&x->w_sock, on_sock, x);
	hutch_watch_init(&x->w_in, on_stdin_room, x);
	hutch_frame_dec_init(&x->dec, HUTCH_FRAME_FROM_CLIENT);
	return x;
}

static enum MHD_Result answer_upgrade(struct request *r, struct hutch_exec *x)
{
	struct MHD_Response *resp = hutch_mhd.create_response_for_upgrade(on_upgrade, x);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, EXEC_UPGRADE);
	ret = hutch_mhd.queue_response(r->conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	hutch_mhd.destroy_response(resp);
	r->answered = true;
	return ret;
}

/* An error that refuses the request: its status and answer. */
static int refuse(const struct hutch_err *err, const char *code, unsigned *status, cJSON **answer)
{
	*answer = hutch_api_err_json(err, code, status);
	return -1;
}

int hutch_exec_begin(struct hutch_exec *x, const char *body, size_t len, unsigned *status,
                     cJSON **answer)
{
	struct hutch_cmd_sink sink = {
		.output = hutch_exec_on_output, .spawned = on_spawned, .done = on_done, .ud = x
	};
	struct hutch_run_req req = { 0 };
	struct hutch_err err = { 0 };
	struct hutch_spawn sp;
	/* On a socket of ours, hutch's CLI's JSON-free form (base/frame.h):
	 * its run's supervisor then never loads libcjson. */
	bool bin = x->own && len && !body[0];

	if ((bin ? hutch_exec_req_parse_bin : hutch_exec_req_parse)(body, len, x->s->cmdenv, &req,
	                                                            &err) < 0)
		return refuse(&err, "invalid_request", status, answer);
	if (req.stdin_data) {
		hutch_run_req_done(&req);
		hutch_err_set_class(&err, HUTCH_ERRC_USAGE, -EINVAL,
		                    "'stdin' is not a field of /exec: stdin comes as frames on "
		                    "the connection");
		return refuse(&err, "invalid_request", status, answer);
	}
	sp = (struct hutch_spawn){
		.argv = (const char *const *)req.argv,
		.envp = (const char *const *)req.envp,
		.cwd = req.cwd,
		.stdin_open = true,
		.pipe_size = EXEC_PIPE_SIZE,
		.tty = req.tty,
		.rows = req.rows,
		.cols = req.cols,
		.timeout = req.timeout,
	};
	if (!req.tty) /* a pipe's pages can be spliced; a terminal's cannot */
		sink.move = hutch_exec_on_move;
	x->tty = req.tty;
	x->brief |= req.brief;
	x->cmd = hutch_cmd_start(&x->s->cmds, &sp, &sink, &err);
	hutch_run_req_done(&req);
	if (!x->cmd)
		return refuse(&err, hutch_api_spawn_code(&err), status, answer);
	x->cmd->stdin_counted = true; /* for the journal */
	if (!x->tty) {                /* a tty's comes once spawned */
		x->in_fd = hutch_cmd_take_stdin(x->cmd);
		x->started = true;
	}
	return 0;
}

enum MHD_Result hutch_api_serve_exec(struct request *r, const char *upload, size_t *size)
{
	const char *up = hutch_mhd.lookup_connection_value(r->conn, MHD_HEADER_KIND,
	                                                   MHD_HTTP_HEADER_UPGRADE);
	struct hutch_exec *x;
	cJSON *answer = NULL;
	unsigned status = 0;

	if (r->answered)
		return MHD_YES;
	if (!up || strcasecmp(up, EXEC_UPGRADE))
		return refuse_no_upgrade(r);
	x = hutch_exec_new(r->s);
	if (!x)
		return MHD_NO;
	x->r = r;
	/* the exit frame's form as a header too: an older supervisor ignores
	 * it, where it refuses an unknown field (docs/api.md) */
	x->brief = !strcasecmp(
	        hutch_mhd.lookup_connection_value(r->conn, MHD_HEADER_KIND, "Hutch-Exit-Frame")
	                ?: "",
	        "brief");
	if (hutch_exec_begin(x, r->body.data ? r->body.data : "", r->body.len, &status, &answer) <
	    0) {
		hutch_exec_free(x);
		return hutch_api_respond_json(r->conn, status, answer);
	}
	x->next = r->s->execs;
	r->s->execs = x;
	r->state = x;
	r->state_free = exec_detach;
	return answer_upgrade(r, x);
}

void hutch_api_exec_close_all(struct sup *s)
{
	while (s->execs)
		hutch_exec_end(s->execs);
}
