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
	s->pidfd = p->pidfd;
}

void hutch_initproc_hold_mntns(struct sup *s)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)s->init_pid);
	s->mntns_fd = open(path, O_RDONLY | O_CLOEXEC);
}

void hutch_initproc_kill_unless_hook(struct sup *s)
{
	if (s->init_pid <= 0 || s->cfg->on_destroy)
		return;
	if (s->pidfd >= 0)
		(void)sys_pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
	else
		(void)kill(s->init_pid, SIGKILL);
}

void hutch_initproc_kill_now(struct sup *s)
{
	if (s->init_pid <= 0)
		return;
	if (s->pidfd >= 0)
		(void)sys_pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
	else
		(void)kill(s->init_pid, SIGKILL);
}

void hutch_initproc_reap(struct sup *s)
{
	if (s->init_pid <= 0)
		return;
	if (s->pidfd >= 0) {
		struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };

		hutch_initproc_kill_now(s);
		/* PID 1 exits only after the kernel has killed its whole pid
		 * namespace. */
		(void)poll(&pfd, 1, 5000);
	} else {
		hutch_initproc_kill_now(s);
	}
	(void)waitpid(s->init_pid, NULL, 0);
	s->init_pid = 0;
}

void hutch_initproc_release_mntns(struct sup *s)
{
	if (s->mntns_fd >= 0)
		close(s->mntns_fd);
	s->mntns_fd = -EBADF;
}
