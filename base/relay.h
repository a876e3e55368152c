/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A byte relay between two stream sockets, one direction at a time, for
 * an event loop: the bytes read from one socket and not yet written to the
 * other wait in a pipe, moved with splice() (no copy through user memory,
 * a bounded buffer per direction). Knows nothing of event loops: the owner
 * pumps a direction when one of its sockets is ready and watches what the
 * direction says it waits for. Used by the egress proxy and host-port relay
 * (netpolicy/proxy.c) and by the ports published out of a sandbox
 * (supervisor/ports.c).
 */
#ifndef HUTCH_RELAY_H
#define HUTCH_RELAY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The pipe of one direction (F_SETPIPE_SZ; the kernel may round it). */
#define HUTCH_RELAY_PIPE_SIZE (256u << 10)

struct hutch_relay_dir {
	int pipe[2];    /* -EBADF until hutch_relay_dir_init() */
	size_t len;     /* bytes waiting in the pipe */
	size_t cap;     /* the pipe's size */
	bool eof;       /* the reading side has ended */
	bool full;      /* the pipe took no more (its slots may fill before cap) */
	bool shut;      /* the writing side has been shut down (eof passed on) */
	uint64_t moved; /* bytes written to the writing side so far */
};

/* An empty direction with no pipe yet (safe to _done()). */
#define HUTCH_RELAY_DIR_INIT               \
	{                                  \
		.pipe = { -EBADF, -EBADF } \
	}

/* Make the pipe (non-blocking, close-on-exec). Returns 0 or -errno. */
int hutch_relay_dir_init(struct hutch_relay_dir *d);
/* Close the pipe; idempotent. */
void hutch_relay_dir_done(struct hutch_relay_dir *d);
/* Queue bytes already read from the reading side (a ClientHello) before
 * anything else; at most the pipe's size. Returns 0 or -errno. */
int hutch_relay_dir_put(struct hutch_relay_dir *d, const void *buf, size_t n);
/* Move what can move now from rfd through the pipe into wfd without
 * blocking; once rfd has ended and the pipe is empty, shut wfd's writing
 * side. Returns 0, or -errno when a socket failed (reset the connection). */
int hutch_relay_dir_pump(struct hutch_relay_dir *d, int rfd, int wfd);

/* A connection relayed both ways: up from socket a to b, down from b to
 * a. Pump both; 1 when both directions have finished, 0 while it goes
 * on, -errno when a socket failed (reset the connection). */
int hutch_relay_pump2(struct hutch_relay_dir *up, struct hutch_relay_dir *down, int a, int b);
/* What a and b wait for now (EPOLLIN / EPOLLOUT bits). */
void hutch_relay_events(const struct hutch_relay_dir *up, const struct hutch_relay_dir *down,
                        uint32_t *ret_a, uint32_t *ret_b);

/* Read rfd when it is readable (EPOLLIN). */
static inline bool hutch_relay_dir_wants_in(const struct hutch_relay_dir *d)
{
	return !d->eof && !d->full && d->len < d->cap;
}
/* Write wfd when it is writable (EPOLLOUT). */
static inline bool hutch_relay_dir_wants_out(const struct hutch_relay_dir *d)
{
	return d->len > 0;
}
/* Everything is across and the end passed on. */
static inline bool hutch_relay_dir_finished(const struct hutch_relay_dir *d)
{
	return d->eof && d->len == 0;
}

#endif
