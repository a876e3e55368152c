/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pasta's watches in the supervisor's loop (rootless mode all; the plan's
 * side is netpolicy/usernet-plan.c): its pidfd while it runs, its pid file
 * pipe and a deadline while a restart starts. A sandbox frozen by idle
 * sleep or oci pause keeps what pasta did for its thaw: a pasta restarted
 * into a frozen cgroup could never be ready.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "events.h"
#include "log.h"
#include "netpolicy.h"
#include "pasta.h"
#include "supervisor.h"

/* Watch what pasta's state asks for (usernet-plan.c): its pidfd while
 * it runs, its pid file pipe and deadline while a restart starts. */
static void helper_rearm(struct sup *s)
{
	int fd = hutch_net_plan_helper_fd(&s->net.plan);
	double dl = hutch_net_plan_helper_deadline(&s->net.plan);
	struct itimerspec its = { 0 };
	int r = 0;

	hutch_loop_del(&s->loop, &s->net.w_helper);
	if (fd >= 0)
		r = hutch_loop_add(&s->loop, &s->net.w_helper, fd, EPOLLIN);
	if (r >= 0 && s->net.helper_timer_fd >= 0) {
		its.it_value.tv_sec = (time_t)dl;
		its.it_value.tv_nsec = (long)((dl - (double)(time_t)dl) * 1e9);
		if (timerfd_settime(s->net.helper_timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
			r = -errno;
	}
	if (r < 0)
		hutch_log_errno(HUTCH_LOG_ERROR, r, "watch pasta");
}

/* A frozen sandbox (idle sleep, oci pause): pasta's end, or a starting
 * pasta's deadline, waits for the thaw (hutch_sup_net_thawed()). A pasta
 * started now would be frozen in the sandbox's cgroup, miss its deadline
 * three times and leave the network down for good. */
static bool helper_defer(struct sup *s, bool timeout)
{
	if (!s->idle.sleeping && !s->idle.paused)
		return false;
	hutch_loop_del(&s->loop, &s->net.w_helper);
	if (!s->net.helper_deferred)
		hutch_event(s, "network: %s while the sandbox is frozen; acted on when it thaws",
		            timeout ? "a restarting pasta was not ready" : "pasta ended");
	s->net.helper_deferred = true;
	return true;
}

/* pasta (rootless mode all) ended without being asked to, or a restarted
 * one is ready, failed or late (timeout): the events and the log say what
 * the plan made of it, /status shows it. */
static void helper_event(struct sup *s, bool timeout)
{
	char msg[640];
	int r;

	if (s->state != SUP_RUNNING) {
		hutch_loop_del(&s->loop, &s->net.w_helper);
		return; /* the teardown stops and reaps it */
	}
	if (helper_defer(s, timeout))
		return;
	r = hutch_net_plan_helper_event(&s->net.plan, hutch_now_mono_sec(), timeout, msg,
	                                sizeof(msg));
	if (r < 0)
		hutch_log(HUTCH_LOG_ERROR, "%s", msg);
	if (r != 0)
		hutch_event(s, "%s", msg);
	helper_rearm(s);
}

void hutch_sup_pasta_thawed(struct sup *s)
{
	if (!s->net.helper_deferred || s->idle.sleeping || s->idle.paused)
		return;
	s->net.helper_deferred = false;
	hutch_net_plan_helper_thawed(&s->net.plan, hutch_now_mono_sec());
	helper_event(s, false);
}

void hutch_sup_pasta_ending(struct sup *s)
{
	s->net.helper_deferred = false;
}

static void on_helper(struct hutch_watch *w, uint32_t events)
{
	helper_event(w->ptr, false);
}

static void on_helper_timer(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	uint64_t ticks;

	if (read(s->net.helper_timer_fd, &ticks, sizeof(ticks)) == (ssize_t)sizeof(ticks))
		helper_event(s, true);
}

int hutch_sup_pasta_watch(struct sup *s)
{
	int r;

	hutch_watch_init(&s->net.w_helper, on_helper, s);
	hutch_watch_init(&s->net.w_helper_timer, on_helper_timer, s);
	if (hutch_net_plan_helper_fd(&s->net.plan) < 0)
		return 0;
	s->net.helper_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->net.helper_timer_fd < 0)
		return -errno;
	if ((r = hutch_loop_add(&s->loop, &s->net.w_helper_timer, s->net.helper_timer_fd,
	                        EPOLLIN)) < 0 ||
	    (r = hutch_loop_add(&s->loop, &s->net.w_helper, hutch_net_plan_helper_fd(&s->net.plan),
	                        EPOLLIN)) < 0)
		return r;
	return 0;
}
