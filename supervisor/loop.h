/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's event loop: one epoll fd whose watches are callbacks.
 * A watch is embedded in the object it serves (a command, a request, the
 * idle timer) and names its function; the loop knows nothing of what it
 * calls. Removing a watch also forgets any event of it still waiting in the
 * batch being dispatched, and objects that may be pointed at by the batch
 * are freed through hutch_loop_defer() after it: no callback ever runs for
 * a watch that was removed, nor on freed memory.
 *
 * Single-threaded, like the whole supervisor.
 */
#ifndef HUTCH_LOOP_H
#define HUTCH_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct hutch_watch;
typedef void (*hutch_watch_fn)(struct hutch_watch *w, uint32_t events);

struct hutch_watch {
	hutch_watch_fn fn;
	void *ptr; /* the object it serves */
	int fd;    /* -1 when not in the loop */
};

/* Something to free after the current batch (embed it; fn frees the
 * object that contains it). */
struct hutch_deferred {
	void (*fn)(struct hutch_deferred *d);
	struct hutch_deferred *next;
};

#define HUTCH_LOOP_BATCH 64

struct hutch_loop {
	int epfd;
	struct hutch_deferred *deferred;
	/* The batch being dispatched: entries of removed watches are
	 * cleared so that their events are dropped. */
	struct hutch_watch *batch[HUTCH_LOOP_BATCH];
	int nbatch, cur;
};

/* Returns 0 or -errno. */
int hutch_loop_init(struct hutch_loop *l);
/* Runs every deferred free and closes the epoll fd. */
void hutch_loop_done(struct hutch_loop *l);
static inline void hutch_watch_init(struct hutch_watch *w, hutch_watch_fn fn, void *ptr)
{
	*w = (struct hutch_watch){ .fn = fn, .ptr = ptr, .fd = -1 };
}
/* Watch fd for events (EPOLLIN, ...) with w; w must be set up with
 * hutch_watch_init() and not be in the loop. Returns 0 or -errno. */
int hutch_loop_add(struct hutch_loop *l, struct hutch_watch *w, int fd, uint32_t events);
/* New events for a watch in the loop (0: none, the watch stays). */
int hutch_loop_mod(struct hutch_loop *l, struct hutch_watch *w, uint32_t events);
/* Stop watching (no-op when not in the loop); the fd is not closed. */
void hutch_loop_del(struct hutch_loop *l, struct hutch_watch *w);
/* hutch_loop_del(), then close *fd and set it to -EBADF. */
void hutch_loop_close(struct hutch_loop *l, struct hutch_watch *w, int *fd);
static inline bool hutch_watch_active(const struct hutch_watch *w)
{
	return w->fd >= 0;
}
/* Free d's object after the current or next batch (at the end of
 * hutch_loop_run_once()), never at once: callers may still be walking a
 * list that holds it. */
void hutch_loop_defer(struct hutch_loop *l, struct hutch_deferred *d,
                      void (*fn)(struct hutch_deferred *d));
/* Wait up to timeout_ms (-1: forever) and dispatch what arrived, then run
 * the deferred frees. Returns the number of events, or -errno (not EINTR,
 * which counts as 0). */
int hutch_loop_run_once(struct hutch_loop *l, int timeout_ms);

#endif
