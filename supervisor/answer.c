/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's answer to its creator (answer.h): read while the
 * supervisor lives. Its socket's EOF alone needs every holder of the
 * supervisor's end gone, and a process it forked may hold that end after
 * it died (init until it closes what it inherited, a disk maker): the
 * creator waited for ever then. A pidfd of the supervisor, polled beside
 * the socket, ends the wait with its death; what it wrote before is read.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "answer.h"
#include "cleanup.h"
#include "fdutil.h"
#include "log.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

/* A pidfd of the supervisor, which bounds the wait for its answer
 * (read_while_alive()): our child's (not reaped: its pid is still its), or
 * a container's, a grandchild (pid is the middle child), sent by itself
 * first ('P', hutch_answer_send_pidfd()), before it forks anything that
 * could hold fd. -errno: none, the answer's EOF only. */
int hutch_answer_pidfd(bool container, pid_t pid, int fd)
{
	int pidfd = -EBADF, status;
	char b = 0;

	if (!container)
		return (pidfd = sys_pidfd_open(pid, 0)) < 0 ? -errno : pidfd;
	/* The middle child of the double fork exits at once. */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		; /* hutch run catches Ctrl-C during create */
	if (hutch_recv_byte_fd(fd, &b, &pidfd, 0) != 1 || b != 'P' || pidfd < 0) {
		if (pidfd >= 0)
			close(pidfd);
		return -EPROTO;
	}
	return pidfd;
}

/* A container's supervisor (double-forked: not its creator's child) sends
 * its creator a pidfd of itself, first (hutch_answer_pidfd()). */
void hutch_answer_send_pidfd(int result_fd)
{
	_cleanup_close_ int pidfd = sys_pidfd_open(getpid(), 0);

	(void)hutch_send_byte_fd(result_fd, 'P', pidfd);
}

/*
 * HUTCH_TEST_SUPERVISOR_STOP (test_crash.py): a child of ours holds the
 * answer's socket (as init does until it closes what it inherited, or a
 * disk maker) and nothing else, for at most two minutes; then we stop
 * ourselves, for the test to kill us there.
 */
void hutch_answer_test_stop(int result_fd)
{
	pid_t pid;

	if (!getenv("HUTCH_TEST_SUPERVISOR_STOP"))
		return;
	pid = fork();
	if (pid == 0) {
		if (result_fd > 3)
			(void)sys_close_range(3, (unsigned)result_fd - 1, 0);
		(void)sys_close_range((unsigned)result_fd + 1, ~0U, 0);
		hutch_stdio_to_null();
		hutch_proctitle_set("hutch-test-holder");
		alarm(120);
		for (;;)
			pause();
	}
	(void)raise(SIGSTOP);
}

/* Copy what setup.log gained to progress_fd (create --progress); *shown
 * counts the bytes. */
static void show_progress(int log_fd, int progress_fd, uint64_t *shown)
{
	char buf[16384];
	ssize_t n;

	while ((n = read(log_fd, buf, sizeof(buf))) > 0) {
		(void)hutch_write_all(progress_fd, buf, (size_t)n);
		*shown += (uint64_t)n;
	}
}

/* The supervisor's answer on fd, while (progress_fd >= 0) the setup steps'
 * output is shown as it comes: setup.log is read every PROGRESS_MS, and
 * once more when the answer is there. Bounded by the supervisor's life
 * (pidfd): EOF on fd needs every holder of its other end closed, and a
 * process the supervisor forked (init before it closes what it inherited,
 * a disk maker, a helper) may hold it after the supervisor died. Once
 * pidfd says it has exited, what it wrote is read and no more is waited
 * for. Returns the bytes read (fewer than len: it died), or -errno. */
#define PROGRESS_MS 50
static ssize_t read_while_alive(int fd, int pidfd, void *buf, size_t len, int log_fd,
                                int progress_fd, uint64_t *shown)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
	bool progress = log_fd >= 0 && progress_fd >= 0, dead = false;
	size_t got = 0;

	while (got < len) {
		ssize_t n;
		int r = dead ? 1 : poll(p, pidfd >= 0 ? 2 : 1, progress ? PROGRESS_MS : -1);

		if (progress)
			show_progress(log_fd, progress_fd, shown);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		/* readable, or its end gone, or its writer dead: what is there */
		n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || dead || (errno != EAGAIN && errno != EINTR))
			break;
		dead = pidfd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR));
	}
	return (ssize_t)got;
}

int hutch_answer_died(const char *id, const char *dir, pid_t pid, const char *when,
                      struct hutch_err *err)
{
	struct hutch_err e = { 0 };
	char rt[4096], *slash;

	snprintf(rt, sizeof(rt), "%s", dir);
	if ((slash = strrchr(rt, '/')))
		*slash = '\0';
	if (slash && hutch_state_reap(rt, id, HUTCH_GONE_SUPERVISOR_DIED, &e) > 0)
		return hutch_err_set(err, -EIO,
		                     "the sandbox's supervisor (pid %d) died %s (killed or "
		                     "crashed); what it left is removed; its log: hutch events %s",
		                     (int)pid, when, id);
	return hutch_err_set(err, -EIO,
	                     "the sandbox's supervisor (pid %d) died %s (killed or "
	                     "crashed); its log: hutch events %s; run 'hutch gc' to remove what "
	                     "it left",
	                     (int)pid, when, id);
}

int hutch_answer_wait_eof(int fd, int pidfd)
{
	char b;
	ssize_t n = read_while_alive(fd, pidfd, &b, 1, -EBADF, -EBADF, NULL);

	if (n == 1)
		return -EPROTO;
	/* EOF (a reset: it closed with our "D" unread), or it died first */
	n = recv(fd, &b, 1, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return 0;
	return n < 0 && errno == EAGAIN ? -ESRCH : -EPROTO;
}

/* "ready", or the error (and a failed setup step's details) on fd. */
int hutch_answer_read(const char *id, const char *dir, pid_t pid, int fd, int pidfd, int log_fd,
                      int progress_fd, struct hutch_setup_failure *ret_setup, struct hutch_err *err)
{
	struct hutch_setup_failure f;
	uint64_t shown = 0;
	ssize_t n = read_while_alive(fd, pidfd, err, sizeof(*err), log_fd, progress_fd, &shown);

	if (n != (ssize_t)sizeof(*err))
		return hutch_answer_died(id, dir, pid, "during setup", err);
	err->msg[sizeof(err->msg) - 1] = '\0';
	if (err->code >= 0)
		return 0;
	/* A failed setup step sends its details after the error. */
	n = read_while_alive(fd, pidfd, &f, sizeof(f), -EBADF, -EBADF, &shown);
	if (n == (ssize_t)sizeof(f) && ret_setup) {
		f.id[sizeof(f.id) - 1] = '\0';
		f.step[sizeof(f.step) - 1] = '\0';
		f.tail[sizeof(f.tail) - 1] = '\0';
		/* The whole output went by already (setup.log keeps its first
		 * HUTCH_SETUP_LOG_MAX bytes, and a note). */
		f.shown = progress_fd >= 0 && shown > 0 && shown < HUTCH_SETUP_LOG_MAX;
		*ret_setup = f;
	}
	return err->code;
}
