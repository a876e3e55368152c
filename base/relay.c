/* SPDX-License-Identifier: Apache-2.0 */
/* A splice() relay between two sockets, one direction; see relay.h. */
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "relay.h"

int hutch_relay_dir_init(struct hutch_relay_dir *d)
{
	int sz;

	*d = (struct hutch_relay_dir)HUTCH_RELAY_DIR_INIT;
	if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		d->pipe[0] = d->pipe[1] = -EBADF;
		return -errno;
	}
	/* Larger than the default 64 KiB moves more per wake-up; without the
	 * privilege to go beyond the per-user pipe budget the default stays. */
	(void)fcntl(d->pipe[1], F_SETPIPE_SZ, (int)HUTCH_RELAY_PIPE_SIZE);
	sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

void hutch_relay_dir_done(struct hutch_relay_dir *d)
{
	for (int i = 0; i < 2; i++)
		if (d->pipe[i] >= 0) {
			close(d->pipe[i]);
			d->pipe[i] = -EBADF;
		}
	d->len = 0;
}

int hutch_relay_dir_put(struct hutch_relay_dir *d, const void *buf, size_t n)
{
	ssize_t w;

	if (n > d->cap - d->len)
		return -ENOBUFS;
	while (n > 0) {
		w = write(d->pipe[1], buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		d->len += (size_t)w;
		buf = (const char *)buf + w;
		n -= (size_t)w;
	}
	return 0;
}

/* Out of the pipe into wfd: 1 if bytes moved, 0 if none could, -errno. */
static int drain(struct hutch_relay_dir *d, int wfd)
{
	ssize_t n;

	if (d->len == 0)
		return 0;
	n = splice(d->pipe[0], NULL, wfd, NULL, d->len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	d->len -= (size_t)n;
	d->moved += (uint64_t)n;
	d->full = false;
	return n > 0;
}

/* From rfd into the pipe: 1 if bytes moved or the end came, 0, -errno. */
static int fill(struct hutch_relay_dir *d, int rfd)
{
	ssize_t n;

	if (!hutch_relay_dir_wants_in(d))
		return 0;
	n = splice(rfd, NULL, d->pipe[1], NULL, d->cap - d->len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		/* Either rfd has nothing or the pipe's slots are full (small
		 * segments fill them before its size): with bytes waiting, read
		 * again only once some have gone out, so that a readable rfd
		 * and a full pipe never spin the loop. */
		d->full = d->len > 0;
		return 0;
	}
	if (n == 0)
		d->eof = true;
	d->len += (size_t)n;
	return 1;
}

int hutch_relay_dir_pump(struct hutch_relay_dir *d, int rfd, int wfd)
{
	int a, b, rounds = 0;

	/* Bounded: one busy connection does not hold the loop. */
	do {
		a = drain(d, wfd);
		if (a < 0)
			return a;
		b = fill(d, rfd);
		if (b < 0)
			return b;
	} while ((a > 0 || (b > 0 && !d->eof)) && ++rounds < 16);
	if (hutch_relay_dir_finished(d) && !d->shut) {
		d->shut = true;
		(void)shutdown(wfd, SHUT_WR);
	}
	return 0;
}

int hutch_relay_pump2(struct hutch_relay_dir *up, struct hutch_relay_dir *down, int a, int b)
{
	int r = hutch_relay_dir_pump(up, a, b);

	if (r == 0)
		r = hutch_relay_dir_pump(down, b, a);
	if (r < 0)
		return r;
	return hutch_relay_dir_finished(up) && hutch_relay_dir_finished(down);
}

void hutch_relay_events(const struct hutch_relay_dir *up, const struct hutch_relay_dir *down,
                        uint32_t *ret_a, uint32_t *ret_b)
{
	*ret_a = (hutch_relay_dir_wants_in(up) ? EPOLLIN : 0) |
	         (hutch_relay_dir_wants_out(down) ? EPOLLOUT : 0);
	*ret_b = (hutch_relay_dir_wants_in(down) ? EPOLLIN : 0) |
	         (hutch_relay_dir_wants_out(up) ? EPOLLOUT : 0);
}
