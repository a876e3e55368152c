/* SPDX-License-Identifier: Apache-2.0 */
/* A call bounded in time by a CLONE_VM child (bounded.h). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounded.h"
#include "syscalls.h"
#include "util.h"

/* Wait for the child of pidfd up to ms: its exit status (reaped), or
 * -ETIMEDOUT while it runs, -ECHILD if a signal ended it. */
static int wait_exit(int pidfd, pid_t pid, int ms)
{
	int64_t deadline = hutch_now_mono_ms() + ms;
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r, status = 0;

	do
		r = poll(&p, 1,
		         (int)(deadline - hutch_now_mono_ms() > 0 ? deadline - hutch_now_mono_ms()
		                                                  : 0));
	while (r < 0 && hutch_now_mono_ms() < deadline);
	if (r <= 0)
		return -ETIMEDOUT;
	if (waitpid(pid, &status, __WALL | WNOHANG) != pid)
		return -ETIMEDOUT;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -ECHILD;
}

int hutch_bounded_call(int (*fn)(void *), void *arg, int timeout_ms)
{
	static char stack[16384] __attribute__((aligned(16)));
	int pidfd = -EBADF, r;
	pid_t pid;

	/* we wait in poll() while it runs */
	pid = clone(fn, stack + sizeof(stack), CLONE_VM | CLONE_PIDFD | SIGCHLD, arg, &pidfd);
	if (pid < 0) /* no bound then: the call as it is */
		return fn(arg);
	r = wait_exit(pidfd, pid, timeout_ms);
	if (r == -ETIMEDOUT) {
		(void)sys_pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
		(void)wait_exit(pidfd, pid, 100);
	}
	close(pidfd);
	return r;
}
