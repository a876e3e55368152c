/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress's epoll fd and tick timer (evloop-internal.h).
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cleanup.h"
#include "evloop-internal.h"

int evloop_init(struct evloop *l, struct evloop_ev *tick_ev, struct hutch_err *err)
{
	struct epoll_event tk = { .events = EPOLLIN, .data.ptr = tick_ev };

	l->tick_armed = false;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->epfd < 0 || l->tickfd < 0) {
		int r = -errno;
		evloop_done(l);
		return hutch_err_set_errno(err, r, "create the network proxy's sockets");
	}
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tickfd, &tk) < 0) {
		int r = -errno;
		evloop_done(l);
		return hutch_err_set_errno(err, r, "watch the network proxy's sockets");
	}
	return 0;
}

void evloop_done(struct evloop *l)
{
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->tickfd >= 0)
		close(l->tickfd);
	l->epfd = l->tickfd = -1;
}

int evloop_watch(struct evloop *l, int fd, struct evloop_ev *ev, uint32_t *cur, uint32_t want)
{
	struct epoll_event ee = { .events = want, .data.ptr = ev };

	if (*cur == want)
		return 0;
	if (epoll_ctl(l->epfd, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ee) < 0)
		return -errno;
	*cur = want;
	return 0;
}

void evloop_unwatch(struct evloop *l, int fd)
{
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void evloop_tick(struct evloop *l, bool on)
{
	struct itimerspec its = { 0 };

	if (l->tick_armed == on)
		return;
	if (on) {
		its.it_value.tv_nsec = EVLOOP_TICK_MS * 1000000L;
		its.it_interval.tv_nsec = EVLOOP_TICK_MS * 1000000L;
	}
	if (timerfd_settime(l->tickfd, 0, &its, NULL) == 0)
		l->tick_armed = on;
}

void evloop_tick_ack(struct evloop *l)
{
	uint64_t expirations;

	(void)!read(l->tickfd, &expirations, sizeof(expirations));
}

void evloop_run(struct evloop *l)
{
	struct epoll_event evs[64];
	int n = epoll_wait(l->epfd, evs, (int)ELEMENTSOF(evs), 0);

	for (int i = 0; i < n; i++) {
		struct evloop_ev *ev = evs[i].data.ptr;
		ev->fn(ev->ptr, evs[i].events);
	}
}
