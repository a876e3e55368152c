/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A live sandbox survives its runtime dir's lxcfs (procview.h). The views
 * init bound over /proc's meminfo, cpuinfo, stat, uptime, ... are mounts
 * of that lxcfs's FUSE file system: when it ends (killed, crashed, OOM, or
 * ended by a create that found its mount gone) each of them answers
 * ENOTCONN, so `free`, `uptime` and `cat /proc/meminfo` fail inside, and
 * nothing of the FUSE connection can be taken over by a new lxcfs. So the
 * supervisor watches the lxcfs by a pidfd (the creator opened it with its
 * hold, runtime/lxcfs.c); when it ends, the supervisor makes sure a lxcfs
 * runs (hutch_lxcfs_revive(): the one a create or another sandbox's
 * supervisor started meanwhile, else a new one, under the dir's lock as a
 * create starts it), clones that one's views in the host's mount
 * namespace and sends them to init (HUTCH_MSG_VIEWS), which detaches the
 * dead views and attaches these in their place (rootfs.h). The host side
 * never enters the sandbox (DESIGN.md: init does the mounts, as it did
 * at setup). When no lxcfs can be started, init only detaches the views:
 * the kernel's own files (the host's figures), not errors. docs/history.md
 * tells why this way and what it costs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cleanup.h"
#include "events.h"
#include "fdutil.h"
#include "lxcfs.h"
#include "procview.h"
#include "proto.h"
#include "rootfs.h"
#include "supervisor.h"

/* The runtime dir: the sandbox's state dir's parent. */
static void runtime_dir_of(const struct sup *s, char *buf, size_t cap)
{
	char *slash;

	snprintf(buf, cap, "%s", s->paths.dir);
	slash = strrchr(buf, '/');
	if (slash && slash != buf)
		*slash = '\0';
}

/* The views to init: those of fds (by index), or with fds NULL every
 * index and no fd (detach only). */
static int send_views(struct sup *s, const int *fds)
{
	uint32_t which[HUTCH_ROOTFS_VIEWS];
	int pass[HUTCH_ROOTFS_VIEWS];
	size_t n = 0;

	for (uint32_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++) {
		if (fds && fds[i] < 0)
			continue;
		which[n] = i;
		pass[n++] = fds ? fds[i] : -1;
	}
	return hutch_proto_send(s->init_sock, HUTCH_MSG_VIEWS, 0, which, n * sizeof(which[0]),
	                        fds ? pass : NULL, fds ? n : 0);
}

static void rebind(struct sup *s)
{
	_cleanup_close_ int root = -EBADF;
	struct hutch_err err = { 0 };
	int fds[HUTCH_ROOTFS_VIEWS], pidfd = -EBADF, r;
	char rt[4096];

	runtime_dir_of(s, rt, sizeof(rt));
	r = hutch_lxcfs_revive(rt, &root, &pidfd, &err);
	if (r >= 0 && (r = hutch_rootfs_views_clone(root, fds, &err)) >= 0) {
		r = send_views(s, fds);
		hutch_close_many(fds, HUTCH_ROOTFS_VIEWS);
		if (r < 0)
			hutch_err_set_errno(&err, r, "send the views to init");
	}
	if (r < 0) {
		closep(&pidfd);
		hutch_event(s, "lxcfs ended: %s; the /proc views detached (the kernel's files)",
		            err.msg);
		(void)send_views(s, NULL);
		return;
	}
	hutch_event(s, "lxcfs ended: the /proc views re-bound to the lxcfs that runs now");
	s->procview_pidfd = pidfd;
	(void)hutch_procview_watch(s);
}

static void on_lxcfs_end(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	(void)events;
	hutch_loop_close(&s->loop, w, &s->procview_pidfd);
	if (s->state == SUP_RUNNING)
		rebind(s);
}

int hutch_procview_watch(struct sup *s)
{
	int r;

	if (s->procview_pidfd < 0)
		return 0;
	hutch_watch_init(&s->w_procview, on_lxcfs_end, s);
	r = hutch_loop_add(&s->loop, &s->w_procview, s->procview_pidfd, EPOLLIN);
	if (r < 0)
		closep(&s->procview_pidfd);
	return r;
}

void hutch_procview_done(struct sup *s)
{
	if (s->w_procview.fn)
		hutch_loop_close(&s->loop, &s->w_procview, &s->procview_pidfd);
	else
		closep(&s->procview_pidfd);
}
