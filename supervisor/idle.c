/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Idle sleep; see idle.h. One timerfd, never re-armed per request: requests
 * only stamp s->idle.last_ms (and count themselves in s->idle.open
 * while served), through hutch_idle_touch(), _begin() and _end(); the
 * relayed connections are counted by ports.c (hutch_ports_activity()). When the timer fires it
 * checks both: busy or recently used means re-arm for the remainder, otherwise freeze. So a busy
 * sandbox costs one timer expiry per idle period, not one timerfd_settime() per request.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "events.h"
#include "idle.h"
#include "log.h"
#include "pasta.h"
#include "ports.h"
#include "status.h"
#include "supervisor.h"

static int arm(struct sup *s, int64_t ms)
{
	struct itimerspec its = { 0 };

	if (ms < 1)
		ms = 1;
	its.it_value.tv_sec = ms / 1000;
	its.it_value.tv_nsec = (ms % 1000) * 1000000;
	if (timerfd_settime(s->idle.fd, 0, &its, NULL) < 0)
		return -errno;
	s->idle.armed = true;
	return 0;
}

static void fall_asleep(struct sup *s)
{
	struct hutch_err err = { 0 };

	if (hutch_cgroup_freeze(s->cg, true, &err) < 0) {
		/* e.g. a process stuck in uninterruptible sleep: try again later */
		hutch_log(HUTCH_LOG_WARN, "idle sleep: %s, retrying later", err.msg);
		(void)arm(s, (int64_t)s->cfg->idle_timeout_seconds * 1000);
		return;
	}
	s->idle.sleeping = true;
	s->idle.sleeps++;
	(void)hutch_sup_write_state(s, "sleeping");
	hutch_event(s, "asleep: no request for %llu s; the commands are frozen",
	            (unsigned long long)s->cfg->idle_timeout_seconds);
}

/* The timer fired: sleep, or re-arm for the time still to wait. A
 * command's end counts as activity like a request's. */
static void on_timer(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	int64_t timeout_ms = (int64_t)s->cfg->idle_timeout_seconds * 1000;
	unsigned conns;
	int64_t conns_ms = hutch_ports_activity(s, &conns);
	int64_t last =
	        s->idle.last_ms > s->cmds.last_done_ms ? s->idle.last_ms : s->cmds.last_done_ms;
	int64_t idle_ms = hutch_now_mono_ms() - (conns_ms > last ? conns_ms : last);
	uint64_t ticks;

	(void)!read(s->idle.fd, &ticks, sizeof(ticks));
	s->idle.armed = false;
	if (s->state != SUP_RUNNING || s->idle.sleeping)
		return;
	if (s->idle.paused) { /* oci pause's, not ours: look again later */
		(void)arm(s, timeout_ms);
		return;
	}
	if (s->idle.open > 0 || conns > 0) {
		/* A /run, a stream, a transfer or a relayed connection in
		 * flight: its end is activity, and the next expiry measures
		 * from there. */
		(void)arm(s, timeout_ms);
		return;
	}
	if (idle_ms < timeout_ms) {
		(void)arm(s, timeout_ms - idle_ms);
		return;
	}
	fall_asleep(s);
}

int hutch_idle_start(struct sup *s)
{
	if (s->cfg->idle_timeout_seconds == 0 || !s->cg)
		return 0;
	s->idle.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->idle.fd < 0)
		return -errno;
	hutch_watch_init(&s->idle.w, on_timer, s);
	if (hutch_loop_add(&s->loop, &s->idle.w, s->idle.fd, EPOLLIN) < 0)
		return -errno;
	s->idle.last_ms = hutch_now_mono_ms();
	return arm(s, (int64_t)s->cfg->idle_timeout_seconds * 1000);
}

void hutch_idle_wake(struct sup *s, double arrival_sec)
{
	struct hutch_err err = { 0 };

	if (!s->idle.sleeping || s->idle.paused)
		return;
	if (hutch_cgroup_freeze(s->cg, false, &err) < 0)
		hutch_log(HUTCH_LOG_ERROR, "wake from idle sleep: %s", err.msg);
	s->idle.sleeping = false;
	s->idle.last_wake_ms = (hutch_now_mono_sec() - arrival_sec) * 1000.0;
	hutch_event(s, "woke: thawed in %.1f ms", s->idle.last_wake_ms);
	s->idle.last_ms = hutch_now_mono_ms();
	(void)hutch_sup_write_state(s, "running");
	if (!s->idle.armed && s->state == SUP_RUNNING)
		(void)arm(s, (int64_t)s->cfg->idle_timeout_seconds * 1000);
	hutch_sup_pasta_thawed(s);
}

void hutch_idle_touch(struct sup *s)
{
	s->idle.last_ms = hutch_now_mono_ms();
}

void hutch_idle_begin(struct sup *s)
{
	s->idle.open++;
}

void hutch_idle_end(struct sup *s)
{
	if (s->idle.open > 0)
		s->idle.open--;
	hutch_idle_touch(s);
}

void hutch_idle_paused(struct sup *s, bool paused)
{
	s->idle.paused = paused;
	s->idle.sleeping = false; /* what idle sleep froze is now thawed, or paused */
}

void hutch_idle_wake_to_end(struct sup *s)
{
	/* A frozen cgroup v1 task does not die of SIGKILL until thawed (asleep
	 * or paused by oci pause alike). */
	if (s->idle.paused) {
		s->idle.paused = false;
		s->idle.sleeping = true;
	}
	hutch_idle_wake(s, hutch_now_mono_sec());
}
