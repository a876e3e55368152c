/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An exec stream (api-exec.c, its way out and end exec-out.c) as its
 * three ways in share it: POST /exec's upgraded connection, hutch run's
 * socket and a connection to hutch exec's socket (exec-run.c, exec-sock.c).
 */
#ifndef HUTCH_EXEC_INTERNAL_H
#define HUTCH_EXEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cJSON.h"
#include "frame.h"
#include "loop.h"

#define EXEC_IN_BUF (256u << 10) /* socket -> stdin: one read at a time */
/* ibuf's first size: frame headers and small frames while stdin is
 * spliced (a 256 KiB malloc() is an mmap() and, at the stream's end, a
 * munmap() before a run's answer); EXEC_IN_BUF once a read asks for more */
#define EXEC_IN_FIRST 4096u

struct sup;
struct request;
struct cmd;
struct MHD_UpgradeResponseHandle;
struct hutch_jrec;

struct hutch_exec {
	struct sup *s;
	struct request *r; /* until libmicrohttpd completes the request */
	struct cmd *cmd;
	struct MHD_UpgradeResponseHandle *urh; /* set once upgraded */
	int sock;                              /* libmicrohttpd's (never closed here), or our own */
	bool live;                             /* the stream is on: upgraded, or its request read */
	bool own; /* a socket of ours (exec-run.c): closed at the end */
	bool run; /* a run's (hutch_api_exec_stream()): its end ends the sandbox */
	/* exec.sock's (exec-sock.c): its accounting at the end; when the
	 * connection came, for the request's deadline */
	void (*on_end)(struct hutch_exec *x);
	int64_t since_ms;
	/* a run's: its request is being read (exec-run.c), this on its events */
	void (*reading)(struct hutch_exec *x);
	char *req; /* that request as it comes (the length, the body) */
	size_t req_got, req_cap;
	/* the fd that came with it: a warm run's claim brings its command's
	 * stream (exec-run.c); -EBADF, or closed with x */
	int passed_fd;
	struct hutch_jrec *jr; /* its journal line, written at the end (as POST /exec's) */
	int in_fd;             /* the command's stdin; -EBADF once closed */
	struct hutch_watch w_sock, w_in;
	struct hutch_frame_dec dec;
	char *ibuf; /* icap bytes: EXEC_IN_FIRST, EXEC_IN_BUF, or libmicrohttpd's extra bytes */
	size_t ioff, ilen, icap;
	char *obuf; /* frames not yet sent */
	size_t ooff, olen, ocap;
	bool rd_eof, finished, ended, aborted;
	bool started; /* stdin is known (a tty's master comes once spawned) */
	bool tty;
	bool brief; /* "exit_frame": "brief": the end as a RESULT frame */
	/* Output spliced from the command's pipe (on_move): the current
	 * frame's header is sent, owed of its bytes are still in owed_fd;
	 * out_blocked: the socket was full with nothing queued. */
	uint32_t owed;
	int owed_fd;
	enum hutch_frame_type owed_type;
	bool out_blocked;
	/* Input spliced from the socket into the command's stdin pipe: the
	 * pipe is full (in_full: watched for room), or splicing failed once
	 * (no_splice_in: read and written as before). */
	bool in_full, no_splice_in;
	struct hutch_deferred dfree;
	struct hutch_exec *next;
};

/* A stream of s's, not started (no socket, no command). */
struct hutch_exec *hutch_exec_new(struct sup *s);
/* Free one that never started (hutch_exec_end() for the others). */
void hutch_exec_free(struct hutch_exec *x);
/* A stream of s's on fd, a socket of our own whose request (length, JSON
 * body) is read as it comes, then started or refused as POST /exec
 * (exec-run.c); fd is the stream's, or closed on failure: NULL. */
struct hutch_exec *hutch_exec_open_own(struct sup *s, int fd);
/* Start the command of an /exec body (len bytes) for x: 0, or -1 with
 * *status and *answer (the caller's) the HTTP answer that refuses it. */
int hutch_exec_begin(struct hutch_exec *x, const char *body, size_t len, unsigned *status,
                     cJSON **answer);
/* The socket (x->sock) carries frames now; extra: bytes of it already
 * read. */
void hutch_exec_go(struct hutch_exec *x, const char *extra, size_t n);
/* Queue one frame; false if the client is gone. */
bool hutch_exec_queue_frame(struct hutch_exec *x, enum hutch_frame_type t, const char *data,
                            size_t n);
/* Send what is queued, ending the stream once finished and sent; false
 * if it ended. */
bool hutch_exec_flush(struct hutch_exec *x);
/* exec-out.c: the end (the command killed if it runs, the socket handed
 * back); a failure's (before the upgrade: the command killed, the end when
 * libmicrohttpd hands the socket over). */
void hutch_exec_end(struct hutch_exec *x);
void hutch_exec_abort(struct hutch_exec *x);
/* The socket's events as the stream's state asks (in: room to read; out:
 * a queue or owed bytes). */
void hutch_exec_update_events(struct hutch_exec *x);
/* The command's sink (struct hutch_cmd_sink): its output framed and
 * queued (false: pause it), or moved by splice while nothing waits. */
bool hutch_exec_on_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n);
ssize_t hutch_exec_on_move(void *ud, struct cmd *c, bool is_err, int fd);

#endif
