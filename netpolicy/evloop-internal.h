/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress's own event loop: an epoll fd that the supervisor's loop
 * watches as one fd (the way libmicrohttpd is driven), and one tick timer
 * for the deadlines of DNS queries and proxied connections. Every watched
 * fd carries a struct evloop_ev: what to call when it is ready. The parts
 * (resolver, DNS stub, proxy) register their own fds; none knows another's.
 */
#ifndef HUTCH_EVLOOP_INTERNAL_H
#define HUTCH_EVLOOP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define EVLOOP_TICK_MS 250

struct evloop_ev {
	void (*fn)(void *ptr, uint32_t events);
	void *ptr;
};

struct evloop {
	int epfd, tickfd;
	bool tick_armed;
};

/* Creates both fds (close-on-exec); the tick is watched with tick_ev. On
 * failure nothing stays open. */
int evloop_init(struct evloop *l, struct evloop_ev *tick_ev, struct hutch_err *err);
void evloop_done(struct evloop *l);
/* Make fd's interest want (EPOLL_CTL_ADD if *cur is 0, else MOD); *cur
 * tracks what is registered. Returns 0 or a negative errno. */
int evloop_watch(struct evloop *l, int fd, struct evloop_ev *ev, uint32_t *cur, uint32_t want);
void evloop_unwatch(struct evloop *l, int fd);
/* Start or stop the periodic tick (every EVLOOP_TICK_MS); idempotent. */
void evloop_tick(struct evloop *l, bool on);
/* Read the tick's expirations (call from the tick's callback). */
void evloop_tick_ack(struct evloop *l);
/* Call the callback of every ready fd; never blocks. */
void evloop_run(struct evloop *l);

#endif
