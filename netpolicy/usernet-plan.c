/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pasta's life in a sandbox's plan (rootless mode all; usernet.c starts
 * and stops the process): started on create, watched by the supervisor,
 * restarted when it ends.
 *
 * A restart needs init's user and network namespaces, and a pasta started
 * then, as the user outside init's user namespace, can no longer open
 * init's /proc/PID/ns: init made itself non-dumpable before READY. So the
 * plan opens both while init still waits for GO (dumpable, the user's
 * own process) and keeps them, with the sandbox's cgroup, for the plan's
 * life; every pasta, the first one too, is given them as fds. Holding
 * them keeps init's network namespace alive after init until plan_done.
 *
 * The restart never blocks the supervisor's loop: the new pasta is forked
 * and its pid file pipe becomes what the supervisor watches (ready, or EOF
 * when it ended first), with a deadline of HUTCH_NET_HELPER_READY_S. A
 * pasta that keeps dying (a failed start too) is restarted at most
 * HUTCH_NET_HELPER_RESTARTS times in any HUTCH_NET_HELPER_WINDOW_S
 * seconds, then left down for good: a helper that cannot stay up is
 * not retried forever at the sandbox's expense (its CPU, its log).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdutil.h"
#include "hostnet-internal.h"
#include "netpolicy.h"

/* Forget the running or starting pasta (stopped and reaped by now). */
static void forget(struct hutch_net_plan *plan)
{
	hutch_close_many(&plan->helper_pidfd, 1);
	hutch_close_many(&plan->helper_ready_fd, 1);
	hutch_close_many(&plan->helper_err_fd, 1);
	plan->helper_pid = 0;
	plan->helper_deadline = 0;
}

/* Start pasta on the kept fds; returns at once (proc filled). */
static int spawn(struct hutch_net_plan *plan, struct hutch_err *err)
{
	const struct hutch_net_usernet_fds in = { .userns_fd = plan->helper_userns_fd,
		                                  .netns_fd = plan->helper_netns_fd,
		                                  .cgroup_fd = plan->helper_cgroup_fd };
	struct hutch_net_usernet_proc p = { .pidfd = -EBADF, .ready_fd = -EBADF, .err_fd = -EBADF };
	int r = hutch_net_usernet_spawn(plan->usernet_helper, &plan->addrs, &in, &p, err);

	plan->helper_pid = p.pid;
	plan->helper_pidfd = p.pidfd;
	plan->helper_ready_fd = p.ready_fd;
	plan->helper_err_fd = p.err_fd;
	return r;
}

static int open_ns(pid_t pid, const char *ns, int *ret, struct hutch_err *err)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	*ret = open(path, O_RDONLY | O_CLOEXEC);
	return *ret < 0 ? hutch_err_set_errno(err, -errno, "open '%s'", path) : 0;
}

int hutch_net_plan_attach_helper(struct hutch_net_plan *plan, pid_t init_pid, int cgfd,
                                 struct hutch_err *err)
{
	int r;

	if (!plan->usernet_helper || plan->helper_state != HUTCH_NET_HELPER_NONE) {
		if (cgfd >= 0)
			close(cgfd);
		return 0;
	}
	plan->helper_cgroup_fd = cgfd;
	r = open_ns(init_pid, "user", &plan->helper_userns_fd, err);
	if (r >= 0)
		r = open_ns(init_pid, "net", &plan->helper_netns_fd, err);
	if (r >= 0)
		r = spawn(plan, err);
	if (r >= 0)
		r = hutch_net_usernet_wait_ready(plan->helper_pid, plan->helper_ready_fd,
		                                 plan->helper_err_fd, err);
	if (r < 0)
		return hutch_err_prefix(err, "user-mode networking");
	hutch_close_many(&plan->helper_ready_fd, 1);
	hutch_close_many(&plan->helper_err_fd, 1);
	plan->helper_state = HUTCH_NET_HELPER_RUNNING;
	return 0;
}

int hutch_net_plan_helper_fd(const struct hutch_net_plan *plan)
{
	if (!plan->usernet_helper)
		return -1;
	if (plan->helper_state == HUTCH_NET_HELPER_RUNNING)
		return plan->helper_pidfd;
	if (plan->helper_state == HUTCH_NET_HELPER_STARTING)
		return plan->helper_ready_fd;
	return -1;
}

double hutch_net_plan_helper_deadline(const struct hutch_net_plan *plan)
{
	return plan->usernet_helper && plan->helper_state == HUTCH_NET_HELPER_STARTING
	               ? plan->helper_deadline
	               : 0;
}

/* "exited with status 1", "killed by signal 9" */
static void describe_status(int status, char *buf, size_t size)
{
	if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
}

/* Restarts in the window that ends now. */
static unsigned recent_restarts(const struct hutch_net_plan *plan, double now)
{
	unsigned n = 0;

	for (unsigned i = 0; i < HUTCH_NET_HELPER_RESTARTS; i++)
		if (plan->helper_restart_at[i] > 0 &&
		    now - plan->helper_restart_at[i] < HUTCH_NET_HELPER_WINDOW_S)
			n++;
	return n;
}

/* pasta is gone (why: what happened to it): restart it if the budget
 * allows, else down for good. */
static int restart_or_down(struct hutch_net_plan *plan, double now, const char *why, char *msg,
                           size_t size)
{
	struct hutch_err e = { 0 };
	unsigned n = recent_restarts(plan, now);

	if (n >= HUTCH_NET_HELPER_RESTARTS) {
		plan->helper_state = HUTCH_NET_HELPER_DOWN;
		snprintf(plan->helper_error, sizeof(plan->helper_error),
		         "%.120s; restarted %u times in %d s, not restarted again: the sandbox has "
		         "no network (make it again for a new one)",
		         why, n, HUTCH_NET_HELPER_WINDOW_S);
		snprintf(msg, size, "network down for good: %s", plan->helper_error);
		return -EIO;
	}
	plan->helper_restart_at[plan->helper_restarts % HUTCH_NET_HELPER_RESTARTS] = now;
	plan->helper_restarts++;
	if (spawn(plan, &e) < 0) {
		(void)hutch_net_usernet_stop(plan->helper_pid);
		forget(plan);
		plan->helper_state = HUTCH_NET_HELPER_DOWN;
		snprintf(plan->helper_error, sizeof(plan->helper_error),
		         "%.100s; its restart failed: %.80s: the sandbox has no network", why,
		         e.msg);
		snprintf(msg, size, "network down for good: %s", plan->helper_error);
		return -EIO;
	}
	plan->helper_state = HUTCH_NET_HELPER_STARTING;
	plan->helper_deadline = now + HUTCH_NET_HELPER_READY_S;
	snprintf(plan->helper_error, sizeof(plan->helper_error), "%.200s", why);
	snprintf(msg, size, "network down: %s; restarting it as pid %d (restart %u of %d in %d s)",
	         why, (int)plan->helper_pid, n + 1, HUTCH_NET_HELPER_RESTARTS,
	         HUTCH_NET_HELPER_WINDOW_S);
	return -EIO;
}

/* A starting pasta's pid file pipe fired: ready (1), or it ended (< 0). */
static int started(struct hutch_net_plan *plan, double now, bool timeout, char *msg, size_t size)
{
	char got[32], out[160] = "", why[256];
	pid_t pid = plan->helper_pid;
	ssize_t n = 0;

	if (!timeout) {
		(void)hutch_fd_nonblock(plan->helper_ready_fd, true);
		n = read(plan->helper_ready_fd, got, sizeof(got));
		if (n < 0 && errno == EAGAIN)
			return 0; /* not yet */
	}
	if (n > 0) {
		hutch_close_many(&plan->helper_ready_fd, 1);
		hutch_close_many(&plan->helper_err_fd, 1);
		plan->helper_deadline = 0;
		plan->helper_state = HUTCH_NET_HELPER_RUNNING;
		snprintf(msg, size, "network up: pasta restarted, pid %d", (int)pid);
		return 1;
	}
	hutch_net_usernet_complaint(plan->helper_err_fd, out, sizeof(out));
	if (timeout)
		snprintf(why, sizeof(why),
		         "the restarted pasta (pid %d) was not ready within %d s%s%s", (int)pid,
		         HUTCH_NET_HELPER_READY_S, out[0] ? ": " : "", out);
	else
		snprintf(why, sizeof(why), "the restarted pasta (pid %d) failed%s%s", (int)pid,
		         out[0] ? ": " : "", out);
	(void)hutch_net_usernet_stop(pid);
	forget(plan);
	return restart_or_down(plan, now, why, msg, size);
}

int hutch_net_plan_helper_event(struct hutch_net_plan *plan, double now, bool timeout, char *msg,
                                size_t size)
{
	char how[48], why[128];
	pid_t old = plan->helper_pid;

	if (!plan->usernet_helper)
		return 0;
	if (plan->helper_state == HUTCH_NET_HELPER_STARTING)
		return started(plan, now, timeout, msg, size);
	if (plan->helper_state != HUTCH_NET_HELPER_RUNNING || timeout || old <= 0)
		return 0;
	describe_status(hutch_net_usernet_stop(old), how, sizeof(how));
	forget(plan);
	snprintf(why, sizeof(why), "pasta (pid %d) %s", (int)old, how);
	return restart_or_down(plan, now, why, msg, size);
}

void hutch_net_plan_helper_thawed(struct hutch_net_plan *plan, double now)
{
	if (plan->helper_state == HUTCH_NET_HELPER_STARTING)
		plan->helper_deadline = now + HUTCH_NET_HELPER_READY_S;
}

void hutch_net_plan_helper_status(const struct hutch_net_plan *plan, cJSON *o)
{
	static const char *const states[] = {
		[HUTCH_NET_HELPER_NONE] = "down",
		[HUTCH_NET_HELPER_RUNNING] = "running",
		[HUTCH_NET_HELPER_STARTING] = "starting",
		[HUTCH_NET_HELPER_DOWN] = "down",
	};

	cJSON_AddStringToObject(o, "helper", "pasta");
	cJSON_AddNumberToObject(o, "helper_pid", plan->helper_pid);
	cJSON_AddStringToObject(o, "helper_state", states[plan->helper_state]);
	cJSON_AddNumberToObject(o, "helper_restarts", plan->helper_restarts);
	if (plan->helper_error[0])
		cJSON_AddStringToObject(o, "helper_error", plan->helper_error);
}

void hutch_net_plan_helper_done(struct hutch_net_plan *plan)
{
	if (!plan->usernet_helper)
		return;
	(void)hutch_net_usernet_stop(plan->helper_pid);
	forget(plan);
	hutch_close_many(&plan->helper_userns_fd, 1);
	hutch_close_many(&plan->helper_netns_fd, 1);
	hutch_close_many(&plan->helper_cgroup_fd, 1);
}
