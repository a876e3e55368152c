/* SPDX-License-Identifier: Apache-2.0 */
/* A call bounded in time by a CLONE_VM child (bounded.h). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounded.h"
#include "syscalls.h"
#include "util.h"

/* The child's stack: one child at a time (busy while it may run). */
static char stack[16384] __attribute__((aligned(16)));
static bool busy;

/* Wait for the child of pidfd until deadline: its exit status (reaped),
 * or -ETIMEDOUT while it runs, -ECHILD if a signal ended it. */
static int wait_exit(int pidfd, pid_t pid, int64_t deadline)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int64_t left;
	int r, status = 0;

	do {
		left = deadline - hutch_now_mono_ms();
		r = poll(&p, 1, (int)(left > 0 ? left : 0));
	} while (r < 0 && hutch_now_mono_ms() < deadline);
	if (r <= 0)
		return -ETIMEDOUT;
	if (waitpid(pid, &status, __WALL | WNOHANG) != pid)
		return -ETIMEDOUT;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -ECHILD;
}

void hutch_bounded_start(struct hutch_bounded *b, int (*fn)(void *), void *arg, int timeout_ms)
{
	*b = (struct hutch_bounded)HUTCH_BOUNDED_INIT;
	if (busy) {
		b->result = -EBUSY;
		return;
	}
	b->deadline_ms = hutch_now_mono_ms() + timeout_ms;
	b->pid = clone(fn, stack + sizeof(stack), CLONE_VM | CLONE_PIDFD | SIGCHLD, arg, &b->pidfd);
	if (b->pid < 0) { /* no bound then: the call as it is */
		b->pid = 0;
		b->pidfd = -EBADF;
		b->result = fn(arg);
		return;
	}
	busy = true;
	if (!HUTCH_RAW_SYSCALLS) /* fn writes errno: not beside us */
		(void)hutch_bounded_wait(b);
}

int hutch_bounded_wait(struct hutch_bounded *b)
{
	if (b->pid <= 0)
		return b->result;
	b->result = wait_exit(b->pidfd, b->pid, b->deadline_ms);
	if (b->result == -ETIMEDOUT) {
		(void)sys_pidfd_send_signal(b->pidfd, SIGKILL, NULL, 0);
		(void)wait_exit(b->pidfd, b->pid, hutch_now_mono_ms() + 100);
	}
	close(b->pidfd);
	b->pidfd = -EBADF;
	b->pid = 0;
	busy = false;
	return b->result;
}

void hutch_bounded_cancel(struct hutch_bounded *b)
{
	if (b->pid <= 0)
		return;
	(void)sys_pidfd_send_signal(b->pidfd, SIGKILL, NULL, 0);
	b->deadline_ms = hutch_now_mono_ms() + 100;
	(void)hutch_bounded_wait(b);
}

int hutch_bounded_call(int (*fn)(void *), void *arg, int timeout_ms)
{
	struct hutch_bounded b;

	hutch_bounded_start(&b, fn, arg, timeout_ms);
	return hutch_bounded_wait(&b);
}
