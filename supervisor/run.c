/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's main loop (see supervisor.h): the sandbox-wide watches
 * (signals, TTL, init's pidfd, the HTTP server, the egress proxy; pasta's
 * in pasta.c) and the
 * order of work in each turn. Commands are the engine's (cmd.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "events.h"
#include "hooks.h"
#include "idle.h"
#include "journal.h"
#include "lifecycle.h"
#include "log.h"
#include "netlog.h"
#include "netpolicy.h"
#include "pasta.h"
#include "ports.h"
#include "procview.h"
#include "run.h"
#include "supervisor.h"
#include "syscalls.h"

#define GONE_LINGER_MS 5000 /* how long a torn-down supervisor serves the last answers */

static void on_signal(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			hutch_sup_end(s, "deleted");
	}
}

static void on_ttl(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_loop_del(&s->loop, w);
	hutch_sup_end(s, "expired");
}

static void on_init_exit(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_loop_del(&s->loop, w);
	hutch_sup_init_died(s); /* without being asked to */
}

static void on_egress(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_net_plan_run(&s->net.plan);
}

/* A command exits: what the kernel logged of its NAT flows (queued before
 * its exit) and what the proxy has to do are done first, while it still
 * runs (netpolicy/natlog.c), then its connections are summed up for its
 * result and journal line (netlog.h). */
static void egress_before_exit(void *ud, struct cmd *c)
{
	struct sup *s = ud;

	hutch_net_plan_run(&s->net.plan);
	if (!c->egress)
		c->egress = hutch_netlog_summary(s, c->id);
}

/* A command starts: what the NAT path's log holds is attributed first. */
static void egress_before_start(void *ud)
{
	struct sup *s = ud;

	hutch_egress_command_starts(s->net.plan.egress);
}

int hutch_sup_loop_open(struct sup *s, int init_sock, struct hutch_cgroup *cg)
{
	int r = hutch_loop_init(&s->loop);

	if (r < 0)
		return r;
	r = hutch_cmds_init(&s->cmds, &s->loop, init_sock, cg, s->cfg->type);
	if (r < 0)
		hutch_loop_done(&s->loop);
	return r;
}

/* The disk's maker of our own (runtime/disk.c; the stock's makers and a
 * fork's forker are not our children) ends once it handed the disk over,
 * its mount namespace torn down after, so setup does not wait for it:
 * reaped as it ends, not at the sandbox's (a zombie for the sandbox's
 * life before, a pooled one's too). */
static void on_disk_maker_exit(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	(void)events;
	if (s->disk_job.pid > 0 && waitpid(s->disk_job.pid, NULL, WNOHANG) == s->disk_job.pid)
		s->disk_job.pid = -1;
	hutch_loop_close(&s->loop, &s->w_disk_maker, &s->disk_maker_fd);
}

/* Without the watch it is reaped at the end, as before. */
static void disk_maker_watch(struct sup *s)
{
	if (s->disk_job.pid <= 0)
		return;
	hutch_watch_init(&s->w_disk_maker, on_disk_maker_exit, s);
	s->disk_maker_fd = sys_pidfd_open(s->disk_job.pid, 0);
	if (s->disk_maker_fd >= 0 &&
	    hutch_loop_add(&s->loop, &s->w_disk_maker, s->disk_maker_fd, EPOLLIN) < 0)
		closep(&s->disk_maker_fd);
}

/* SIGTERM and SIGINT (blocked: mask) read from a signalfd, the TTL from a
 * timerfd. */
static int watch_signals_and_ttl(struct sup *s, const sigset_t *mask)
{
	struct itimerspec its = { 0 };
	int r;

	s->sigfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
	s->ttl_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->sigfd < 0 || s->ttl_fd < 0)
		return -errno;
	/* A TTL already past (a create slower than its TTL) fires at once; a
	 * negative it_value is EINVAL, which ended such a sandbox as "crashed". */
	its.it_value.tv_sec = s->expires_at - hutch_now_realtime();
	if (its.it_value.tv_sec <= 0) {
		its.it_value.tv_sec = 0;
		its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(s->ttl_fd, 0, &its, NULL) < 0)
		return -errno;
	hutch_watch_init(&s->w_signal, on_signal, s);
	hutch_watch_init(&s->w_ttl, on_ttl, s);
	if ((r = hutch_loop_add(&s->loop, &s->w_signal, s->sigfd, EPOLLIN)) < 0)
		return r;
	return hutch_loop_add(&s->loop, &s->w_ttl, s->ttl_fd, EPOLLIN);
}

static int setup_loop(struct sup *s)
{
	sigset_t mask;
	int r;

	/* opened already when a run's command went to init before READY */
	if (s->loop.epfd < 0 && (r = hutch_sup_loop_open(s, s->init_sock, s->cg)) < 0)
		return r;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	/* A run over already (hutch_hooks_run_over()) ends in this turn: a
	 * SIGTERM then waits, blocked, and the TTL cannot come. */
	if (!(s->hooks.run_early && s->hooks.run_delete) &&
	    (r = watch_signals_and_ttl(s, &mask)) < 0)
		return r;
	hutch_watch_init(&s->w_pidfd, on_init_exit, s);
	hutch_watch_init(&s->net.w, on_egress, s);
	if ((r = hutch_loop_add(&s->loop, &s->w_pidfd, s->pidfd, EPOLLIN)) < 0 ||
	    (r = hutch_api_watch(s)) < 0 || (r = hutch_ports_watch(s, hutch_idle_wake)) < 0)
		return r;
	if ((r = hutch_sup_pasta_watch(s)) < 0)
		return r;
	/* Without it the views only die with their lxcfs: not fatal. */
	(void)hutch_procview_watch(s);
	disk_maker_watch(s);
	if (s->netlog) {
		s->cmds.before_exit = egress_before_exit;
		s->cmds.before_start = egress_before_start;
		s->cmds.before_exit_ud = s;
	}
	if (hutch_net_plan_fd(&s->net.plan) >= 0)
		return hutch_loop_add(&s->loop, &s->net.w, hutch_net_plan_fd(&s->net.plan),
		                      EPOLLIN);
	return 0;
}

/* A container's API (api.h): libmicrohttpd on the first connection to
 * its socket, which it accepts (still readable) in this batch's
 * hutch_api_run(). */
static void on_first_connection(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	struct hutch_err err = { 0 };

	(void)events;
	hutch_loop_del(&s->loop, w);
	if (hutch_api_start_late(s, &err) < 0) {
		hutch_event(s, "start the API: %s", err.msg);
		hutch_sup_end(s, "crashed");
	}
}

static int api_on_connect(struct sup *s)
{
	if (s->listen_fd < 0)
		return 0;
	hutch_watch_init(&s->w_listen, on_first_connection, s);
	return hutch_loop_add(&s->loop, &s->w_listen, s->listen_fd, EPOLLIN);
}

/* After each batch: timers of background processes, the HTTP server, a
 * pending DELETE, what setup steps decided, the kernel's share of the
 * teardown once every DELETE / has its answer. */
static void after_events(struct sup *s)
{
	hutch_api_run(s);
	if ((s->delete_pending || s->hooks.run_delete) && s->state == SUP_RUNNING) {
		hutch_sup_end(s, "deleted");
		hutch_api_run(s);
	}
	if (s->state != SUP_GONE) {
		hutch_sup_after_events(s);
		if (s->state == SUP_GONE)
			hutch_api_run(s);
	}
	if (s->end.finish_pending && !s->waiters)
		hutch_sup_teardown_finish(s);
}

/* How long the next wait may be, or false when the loop is over. */
static bool next_timeout(struct sup *s, int64_t *gone_ms, int *ret_timeout)
{
	int timeout = hutch_api_timeout_ms(s);
	/* w_listen armed (fn: a zeroed watch's fd is 0) and not yet fired */
	bool api_waits = s->w_listen.fn && hutch_watch_active(&s->w_listen);

	if (s->state == SUP_GONE && s->nconnections == 0 && !s->delete_pending && api_waits &&
	    poll(&(struct pollfd){ .fd = s->listen_fd, .events = POLLIN }, 1, 0) == 1) {
		/* A client connected to a container's API as it ended, its event
		 * not dispatched yet: served (an ended sandbox's answers), as
		 * when libmicrohttpd ran from the start and accepted it. */
		on_first_connection(&s->w_listen, EPOLLIN);
		hutch_api_run(s);
	}
	if (s->state == SUP_GONE && s->nconnections == 0 && !s->delete_pending)
		return false;
	if (s->state == SUP_GONE && !*gone_ms)
		*gone_ms = hutch_now_mono_ms();
	if (*gone_ms && hutch_now_mono_ms() - *gone_ms > GONE_LINGER_MS)
		return false; /* a client that does not read its last answer */
	if (s->state == SUP_GONE && (timeout < 0 || timeout > 50))
		timeout = 50; /* finishing the last responses */
	*ret_timeout = timeout;
	return true;
}

int hutch_sup_run(struct sup *s)
{
	int64_t gone_ms = 0;
	int timeout, n, r;

	r = setup_loop(s);
	if (r < 0) {
		hutch_sup_end(s, "crashed");
		hutch_sup_teardown_finish(s);
		return r;
	}
	hutch_idle_touch(s);
	hutch_hooks_begin(s); /* setup script, on_create, then "ready" to the CLI */
	/* Without steps "ready" ran at once, and may have failed (a
	 * container's hooks): act on it before waiting for any event. */
	after_events(s);
	if (!s->mhd && s->state == SUP_RUNNING && (r = api_on_connect(s)) < 0) {
		hutch_event(s, "watch the API's socket: %s", strerror(-r));
		hutch_sup_end(s, "crashed");
	}
	while (next_timeout(s, &gone_ms, &timeout)) {
		n = hutch_loop_run_once(&s->loop, timeout);
		if (n < 0)
			return n;
		/* Idle for a while once gone: only idle keep-alive connections
		 * are left. A zero timeout is libmicrohttpd asking to run again
		 * (e.g. to end a resumed event stream), not idleness. */
		if (n == 0 && timeout > 0 && s->state == SUP_GONE && !s->delete_pending)
			break;
		after_events(s);
	}
	if (s->end.finish_pending)
		hutch_sup_teardown_finish(s);
	hutch_api_stop(s);
	hutch_journal_close(s); /* after the last request's line */
	hutch_netlog_free(s);
	hutch_loop_done(&s->loop);
	return 0;
}
