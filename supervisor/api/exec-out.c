/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An exec stream's way out and its end (exec-internal.h; api-exec.c starts
 * the stream, reads its way in): the command's output framed into a queue
 * that pauses the command's pipes beyond EXEC_OUT_HIGH until the socket
 * has taken it, or spliced straight from its pipe while nothing waits
 * (no copy); sent as the socket takes it; the end (the command killed if
 * it runs, the socket handed back or closed, the journal's line) and the
 * stream's free.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "frame.h"
#include "initproc.h"
#include "journal.h"
#include "routes.h"
#include "supervisor.h"

#include "exec-internal.h"

#define EXEC_OUT_HIGH (256u << 10) /* framed output queued: pause the command beyond */

static void exec_freed(struct hutch_deferred *d)
{
	struct hutch_exec *x =
	        (struct hutch_exec *)((char *)d - offsetof(struct hutch_exec, dfree));

	closep(&x->passed_fd);
	free(x->ibuf);
	free(x->obuf);
	free(x->req);
	free(x);
}

/* The end: the command is killed if it runs, the socket handed back. */
void hutch_exec_end(struct hutch_exec *x)
{
	struct sup *s = x->s;

	if (x->ended)
		return;
	x->ended = true;
	hutch_loop_del(&s->loop, &x->w_sock);
	hutch_loop_del(&s->loop, &x->w_in);
	/* A command killed here must not see a clean end of its input first:
	 * its stdin closes when it is dead. */
	if (x->cmd && x->cmd->state != CMD_DONE && x->in_fd >= 0)
		hutch_cmd_hold_fd(x->cmd, TAKE_FD(x->in_fd));
	hutch_loop_close(&s->loop, &x->w_in, &x->in_fd);
	if (x->cmd)
		hutch_cmd_release(x->cmd);
	x->cmd = NULL;
	for (struct hutch_exec **pp = &s->execs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	if (x->r) {
		x->r->state = NULL; /* the request must not free us */
		x->r = NULL;
	}
	if (x->urh)
		(void)hutch_mhd.upgrade_action(x->urh, MHD_UPGRADE_ACTION_CLOSE);
	x->urh = NULL;
	if (x->own)
		close(x->sock);
	if (x->run) {
		/* A run's own stream is over: its CLI deletes the sandbox next ("D" or its
		 * end). That begins now, init dying before this turn's journal, events lines. */
		s->hooks.run_delete = true;
		hutch_initproc_kill_unless_hook(s);
	}
	hutch_journal_request_end(x->jr, 0); /* (NULL: nothing) */
	x->jr = NULL;
	if (x->on_end)
		x->on_end(x);
	hutch_loop_defer(&s->loop, &x->dfree, exec_freed);
}

void hutch_exec_free(struct hutch_exec *x)
{
	exec_freed(&x->dfree);
}

/* A failure: end now, or before the upgrade kill the command and end when
 * libmicrohttpd hands the socket over (it still holds a pointer to us). */
void hutch_exec_abort(struct hutch_exec *x)
{
	if (x->urh || !x->r) {
		hutch_exec_end(x);
		return;
	}
	x->aborted = true;
	if (x->cmd)
		hutch_cmd_kill(x->cmd, SIGKILL, 0);
}

void hutch_exec_update_events(struct hutch_exec *x)
{
	uint32_t ev = 0;

	if (x->ended || !x->live)
		return;
	if (!x->rd_eof && x->ioff == x->ilen && !x->in_full)
		ev |= EPOLLIN;
	if (x->ooff < x->olen || x->owed || x->out_blocked)
		ev |= EPOLLOUT;
	(void)hutch_loop_mod(&x->s->loop, &x->w_sock, ev);
}

static int out_reserve(struct hutch_exec *x, size_t n)
{
	char *p;

	if (x->ooff == x->olen)
		x->ooff = x->olen = 0;
	if (x->ooff > 0 && x->olen + n > x->ocap) {
		memmove(x->obuf, x->obuf + x->ooff, x->olen - x->ooff);
		x->olen -= x->ooff;
		x->ooff = 0;
	}
	if (x->olen + n <= x->ocap)
		return 0;
	p = realloc(x->obuf, x->olen + n);
	if (!p)
		return -ENOMEM;
	x->obuf = p;
	x->ocap = x->olen + n;
	return 0;
}

/* Queue hlen header bytes (0 or a frame's) and n bytes of data, sending
 * what the socket takes at once when nothing waits before it (one writev,
 * no copy). Returns false if the client is gone. */
static bool queue_iov(struct hutch_exec *x, const uint8_t *hdr, size_t hlen, const char *data,
                      size_t n)
{
	size_t sent = 0;

	if (x->live && x->ooff == x->olen && !x->out_blocked) {
		struct iovec iov[2] = { { (void *)hdr, hlen }, { (void *)data, n } };
		ssize_t w = hlen ? writev(x->sock, iov, n ? 2 : 1) : write(x->sock, data, n);

		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		sent = w > 0 ? (size_t)w : 0;
	}
	if (out_reserve(x, hlen + n - sent) < 0)
		return false;
	if (sent < hlen) {
		memcpy(x->obuf + x->olen, hdr + sent, hlen - sent);
		x->olen += hlen - sent;
		sent = 0;
	} else {
		sent -= hlen;
	}
	if (n > sent) /* memcpy from NULL is undefined even for 0 bytes (UBSan) */
		memcpy(x->obuf + x->olen, data + sent, n - sent);
	x->olen += n - sent;
	return true;
}

/* Queue one frame. */
bool hutch_exec_queue_frame(struct hutch_exec *x, enum hutch_frame_type t, const char *data,
                            size_t n)
{
	uint8_t hdr[HUTCH_FRAME_HDR];

	hutch_frame_header(hdr, t, (uint32_t)n);
	return queue_iov(x, hdr, sizeof(hdr), data, n);
}

/* Send the current frame's owed bytes straight from their pipe to the
 * socket (splice: the pages move, no copy here). Returns false if the
 * stream ended. */
static bool splice_owed(struct hutch_exec *x)
{
	while (x->owed) {
		ssize_t w = splice(x->owed_fd, NULL, x->sock, NULL, x->owed,
		                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) { /* the bytes are there: the socket is full */
			x->out_blocked = true;
			return true;
		}
		if (w <= 0) {
			hutch_exec_end(x); /* the client is gone */
			return false;
		}
		x->owed -= (uint32_t)w;
	}
	return true;
}

/* Send what is queued; at the end of the stream, end. Returns false if
 * the stream ended. */
bool hutch_exec_flush(struct hutch_exec *x)
{
	if (x->live && x->ooff == x->olen)
		x->out_blocked = false;
	while (x->live && x->ooff < x->olen) {
		ssize_t w = send(x->sock, x->obuf + x->ooff, x->olen - x->ooff, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			hutch_exec_end(x); /* the client is gone */
			return false;
		}
		x->ooff += (size_t)w;
		if (x->ooff == x->olen)
			x->out_blocked = false;
	}
	if (x->live && !x->out_blocked && x->owed && !splice_owed(x))
		return false;
	if (x->cmd && x->olen - x->ooff < EXEC_OUT_HIGH && !x->owed)
		hutch_cmd_resume_output(x->cmd);
	if (x->finished && x->live && x->ooff == x->olen) {
		hutch_exec_end(x);
		return false;
	}
	return true;
}

/* The read path takes over while bytes of a spliced frame are owed (the
 * command exited while the socket was full): they are the first ones of
 * their pipe, so they are queued before anything else, from buf if it
 * came from that pipe, else read from it now. */
static bool settle_owed(struct hutch_exec *x, enum hutch_frame_type t, const char **buf, size_t *n)
{
	char tmp[16384];

	if (x->owed && x->owed_type == t) {
		size_t k = *n < x->owed ? *n : x->owed;

		if (!queue_iov(x, NULL, 0, *buf, k))
			return false;
		x->owed -= (uint32_t)k;
		*buf += k;
		*n -= k;
	}
	while (x->owed) {
		ssize_t r = read(x->owed_fd, tmp, x->owed < sizeof(tmp) ? x->owed : sizeof(tmp));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || !queue_iov(x, NULL, 0, tmp, (size_t)r))
			return false;
		x->owed -= (uint32_t)r;
	}
	return true;
}

/* Output moved by splice while nothing waits before it: a frame header
 * for what the pipe holds now, then its bytes from the pipe to the socket
 * (see struct hutch_cmd_sink's move). */
ssize_t hutch_exec_on_move(void *ud, struct cmd *c, bool is_err, int fd)
{
	struct hutch_exec *x = ud;
	enum hutch_frame_type t = is_err ? HUTCH_FRAME_STDERR : HUTCH_FRAME_STDOUT;
	uint8_t hdr[HUTCH_FRAME_HDR];
	uint32_t before;
	int avail = 0;
	ssize_t w;

	if (!x->live || x->ooff < x->olen || x->out_blocked || (x->owed && x->owed_fd != fd))
		return -ENOBUFS; /* what waits goes first */
	if (!x->owed) {
		if (ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0)
			return 0; /* empty or at its end: read() says which */
		x->owed = (uint32_t)avail < HUTCH_FRAME_DATA_MAX ? (uint32_t)avail
		                                                 : HUTCH_FRAME_DATA_MAX;
		x->owed_fd = fd;
		x->owed_type = t;
		hutch_frame_header(hdr, t, x->owed);
		w = send(x->sock, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			x->owed = 0;
			x->out_blocked = true;
			hutch_exec_update_events(x);
			return -ENOBUFS;
		}
		if (w < 0) {
			x->owed = 0;
			hutch_exec_abort(x);
			return -ENOBUFS;
		}
		if ((size_t)w < sizeof(hdr)) { /* the rest of the header is queued */
			if (!queue_iov(x, hdr + w, sizeof(hdr) - (size_t)w, NULL, 0))
				hutch_exec_abort(x);
			hutch_exec_update_events(x);
			return -ENOBUFS;
		}
	}
	before = x->owed;
	if (!splice_owed(x))
		return -ENOBUFS;
	if (x->owed) {
		hutch_exec_update_events(x);
		return -ENOBUFS;
	}
	return before;
}

bool hutch_exec_on_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct hutch_exec *x = ud;
	enum hutch_frame_type t = is_err ? HUTCH_FRAME_STDERR : HUTCH_FRAME_STDOUT;

	if (x->owed && !settle_owed(x, t, &buf, &n)) {
		hutch_exec_abort(x);
		return false;
	}
	if (n && !hutch_exec_queue_frame(x, t, buf, n)) {
		hutch_exec_abort(x);
		return false;
	}
	hutch_exec_update_events(x);
	return x->olen - x->ooff < EXEC_OUT_HIGH;
}
