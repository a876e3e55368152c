/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's event loop; see loop.h. */
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop.h"

int hutch_loop_init(struct hutch_loop *l)
{
	*l = (struct hutch_loop){ .epfd = epoll_create1(EPOLL_CLOEXEC) };
	return l->epfd < 0 ? -errno : 0;
}

static void run_deferred(struct hutch_loop *l)
{
	while (l->deferred) {
		struct hutch_deferred *d = l->deferred;
		l->deferred = d->next;
		d->fn(d);
	}
}

void hutch_loop_done(struct hutch_loop *l)
{
	run_deferred(l);
	if (l->epfd >= 0)
		close(l->epfd);
	l->epfd = -EBADF;
}

int hutch_loop_add(struct hutch_loop *l, struct hutch_watch *w, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	w->fd = fd;
	return 0;
}

int hutch_loop_mod(struct hutch_loop *l, struct hutch_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (w->fd < 0)
		return -EBADF;
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void hutch_loop_del(struct hutch_loop *l, struct hutch_watch *w)
{
	if (w->fd < 0)
		return;
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->fd = -1;
	/* An event of w may wait later in the batch being dispatched. */
	for (int i = l->cur; i < l->nbatch; i++)
		if (l->batch[i] == w)
			l->batch[i] = NULL;
}

void hutch_loop_close(struct hutch_loop *l, struct hutch_watch *w, int *fd)
{
	if (w->fd == *fd)
		hutch_loop_del(l, w);
	if (*fd >= 0)
		close(*fd);
	*fd = -EBADF;
}

void hutch_loop_defer(struct hutch_loop *l, struct hutch_deferred *d,
                      void (*fn)(struct hutch_deferred *d))
{
	d->fn = fn;
	d->next = l->deferred;
	l->deferred = d;
}

int hutch_loop_run_once(struct hutch_loop *l, int timeout_ms)
{
	struct epoll_event evs[HUTCH_LOOP_BATCH];
	uint32_t events[HUTCH_LOOP_BATCH];
	int n = epoll_wait(l->epfd, evs, HUTCH_LOOP_BATCH, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		l->batch[i] = evs[i].data.ptr;
		events[i] = evs[i].events;
	}
	l->nbatch = n;
	for (l->cur = 0; l->cur < n; l->cur++) {
		struct hutch_watch *w = l->batch[l->cur];
		if (w)
			w->fn(w, events[l->cur]);
	}
	l->nbatch = l->cur = 0;
	run_deferred(l);
	return n;
}
