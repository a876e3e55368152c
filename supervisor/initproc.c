/* SPDX-License-Identifier: Apache-2.0 */
/* init's process as the supervisor holds it; see initproc.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "initproc.h"
#include "supervisor.h"
#include "syscalls.h"

void hutch_initproc_started(struct sup *s, const struct hutch_initproc *p)
{
	s->init_sock = p->sock;
	s->init_pid = p->pid;
	s->init_killed = false;
	s->pidfd = p->pidfd;
}

void hutch_initproc_hold_mntns(struct sup *s)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)s->init_pid);
	s->mntns_fd = open(path, O_RDONLY | O_CLOEXEC);
}

/* One SIGKILL: it cannot be blocked or ignored, so a second to the same
 * init (a run's end sent three: its stream's end, the teardown's start,
 * the reap) is a syscall for nothing. */
static void kill_init(struct sup *s)
{
	int r;

	if (s->init_pid <= 0 || s->init_killed)
		return;
	r = s->pidfd >= 0 ? sys_pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0)
	                  : kill(s->init_pid, SIGKILL);
	s->init_killed = r == 0;
}

void hutch_initproc_kill_unless_hook(struct sup *s)
{
	if (!s->cfg->on_destroy)
		kill_init(s);
}

void hutch_initproc_kill_now(struct sup *s)
{
	kill_init(s);
}

void hutch_initproc_reap(struct sup *s)
{
	if (s->init_pid <= 0)
		return;
	kill_init(s);
	if (s->pidfd >= 0) {
		struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };

		/* PID 1 exits only after the kernel has killed its whole pid
		 * namespace. */
		(void)poll(&pfd, 1, 5000);
	}
	(void)waitpid(s->init_pid, NULL, 0);
	s->init_pid = 0;
	s->init_killed = false;
}

void hutch_initproc_release_mntns(struct sup *s)
{
	if (s->mntns_fd >= 0)
		close(s->mntns_fd);
	s->mntns_fd = -EBADF;
}
