/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's main loop (see supervisor.h): the sandbox-wide watches
 * (signals, TTL, init's pidfd, the HTTP server, the egress proxy) and the
 * order of work in each turn. Commands are the engine's (cmd.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress.h"
#include "fdutil.h"
#include "hooks.h"
#include "idle.h"
#include "log.h"
#include "procs.h"
#include "supervisor.h"

#define GONE_LINGER_MS 5000 /* how long a torn-down supervisor serves the last answers */

/* Close: on_destroy first when there is one (hooks.c calls
 * hutch_sup_end_now() when it is done), then teardown. */
static void end_sandbox(struct sup *s, const char *reason)
{
	if (s->state == SUP_RUNNING && hutch_hooks_destroy_start(s, reason))
		return;
	if (s->state == SUP_CLOSING && s->hooks.end_reason)
		return; /* on_destroy is running; it is bounded */
	hutch_sup_end_now(s, reason);
}

void hutch_sup_end_now(struct sup *s, const char *reason)
{
	if (s->state == SUP_GONE)
		return;
	/* A frozen cgroup v1 task does not die of SIGKILL until thawed. */
	hutch_idle_wake(s, hutch_now_mono_sec());
	s->state = SUP_CLOSING;
	s->end.reason = reason;
	s->end.at = hutch_now_realtime();
	hutch_sup_teardown(s, reason);
	/* Every command is dead now: finish them with what they wrote. */
	hutch_cmds_finish_all(&s->cmds);
	s->state = SUP_GONE;
	hutch_hooks_sandbox_ended(s);
	hutch_api_sandbox_ended(s);
}

static void on_signal(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			end_sandbox(s, "deleted");
	}
}

static cJSON *network_json(struct sup *s)
{
	const struct hutch_net_policy *p = &s->cfg->net;
	cJSON *o = s->net.egress ? hutch_egress_status(s->net.egress) : cJSON_CreateObject();
	cJSON *hosts, *ports;
	char ip[INET_ADDRSTRLEN];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "mode", hutch_net_mode_name(p->mode));
	hosts = cJSON_AddArrayToObject(o, "hosts");
	for (size_t i = 0; hosts && i < p->nhosts; i++) {
		char h[HUTCH_NET_HOST_MAX + 8];
		snprintf(h, sizeof(h), "%s:%u", p->hosts[i].name,
		         p->hosts[i].port ? p->hosts[i].port : 443);
		cJSON_AddItemToArray(hosts, cJSON_CreateString(h));
	}
	ports = cJSON_AddArrayToObject(o, "host_ports");
	for (size_t i = 0; ports && i < s->cfg->nhost_ports; i++)
		cJSON_AddItemToArray(ports, cJSON_CreateNumber(s->cfg->host_ports[i]));
	if (p->mode == HUTCH_NET_ALL) {
		inet_ntop(AF_INET, &s->net.addrs.sandbox, ip, sizeof(ip));
		cJSON_AddStringToObject(o, "address", ip);
		inet_ntop(AF_INET, &s->net.addrs.gateway, ip, sizeof(ip));
		cJSON_AddStringToObject(o, "gateway", ip);
		cJSON_AddStringToObject(o, "host_link", s->net.addrs.host_if);
	}
	return o;
}

cJSON *hutch_sup_status_json(struct sup *s)
{
	cJSON *o = cJSON_CreateObject();
	char created[40], expires[40];
	unsigned running = hutch_cmds_running(&s->cmds);

	if (!o)
		return NULL;
	hutch_format_time(s->created_at, created, sizeof(created));
	hutch_format_time(s->expires_at, expires, sizeof(expires));
	cJSON_AddStringToObject(o, "id", s->id);
	cJSON_AddStringToObject(o, "state",
	                        s->state != SUP_RUNNING ? "closing"
	                        : s->cfg->pool_key[0]   ? "pooled"
	                        : s->idle.sleeping      ? "sleeping"
	                                                : "running");
	cJSON_AddStringToObject(o, "created_at", created);
	cJSON_AddStringToObject(o, "expires_at", expires);
	cJSON_AddNumberToObject(o, "expires_in_seconds",
	                        (double)(s->expires_at - hutch_now_realtime()));
	cJSON_AddItemToObject(o, "config", hutch_config_to_json(s->cfg));
	cJSON_AddStringToObject(o, "cgroup_version", s->cg ? hutch_cgroup_version(s->cg) : "");
	cJSON_AddNumberToObject(o, "commands_running", running);
	cJSON_AddNumberToObject(o, "init_pid", s->init_pid);
	cJSON_AddNumberToObject(o, "supervisor_pid", getpid());
	cJSON_AddStringToObject(o, "socket", s->paths.sock);
	{
		cJSON *idle = cJSON_AddObjectToObject(o, "idle");
		cJSON_AddBoolToObject(idle, "sleeping", s->idle.sleeping);
		cJSON_AddNumberToObject(idle, "sleeps", s->idle.sleeps);
		cJSON_AddNumberToObject(idle, "last_wake_ms",
		                        round(s->idle.last_wake_ms * 1000) / 1000);
	}
	cJSON_AddItemToObject(o, "hooks",
	                      s->hooks.results ? cJSON_Duplicate(s->hooks.results, true)
	                                       : cJSON_CreateObject());
	cJSON_AddItemToObject(o, "network", network_json(s));
	return o;
}

static void on_ttl(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_loop_del(&s->loop, w);
	end_sandbox(s, "expired");
}

static void on_init_exit(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_loop_del(&s->loop, w);
	/* init died without being asked to */
	if (s->state == SUP_RUNNING)
		end_sandbox(s, "crashed");
	else if (s->hooks.end_reason)
		hutch_hooks_on_deadline(s); /* on_destroy cannot finish */
}

static void on_egress(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;

	hutch_egress_run(s->net.egress); /* NULL once torn down */
}

static int setup_loop(struct sup *s)
{
	struct itimerspec its = { 0 };
	sigset_t mask;
	int r;

	r = hutch_loop_init(&s->loop);
	if (r < 0)
		return r;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	s->ttl_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->sigfd < 0 || s->ttl_fd < 0)
		return -errno;
	its.it_value.tv_sec = s->expires_at - hutch_now_realtime();
	if (its.it_value.tv_sec <= 0)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(s->ttl_fd, 0, &its, NULL) < 0)
		return -errno;
	hutch_watch_init(&s->w_signal, on_signal, s);
	hutch_watch_init(&s->w_ttl, on_ttl, s);
	hutch_watch_init(&s->w_pidfd, on_init_exit, s);
	hutch_watch_init(&s->net.w, on_egress, s);
	if ((r = hutch_cmds_init(&s->cmds, &s->loop, s->init_sock, s->cg, s->cfg->type)) < 0 ||
	    (r = hutch_loop_add(&s->loop, &s->w_signal, s->sigfd, EPOLLIN)) < 0 ||
	    (r = hutch_loop_add(&s->loop, &s->w_ttl, s->ttl_fd, EPOLLIN)) < 0 ||
	    (r = hutch_loop_add(&s->loop, &s->w_pidfd, s->pidfd, EPOLLIN)) < 0 ||
	    (r = hutch_api_watch(s)) < 0)
		return r;
	if (s->net.egress)
		return hutch_loop_add(&s->loop, &s->net.w, hutch_egress_fd(s->net.egress), EPOLLIN);
	return 0;
}

/* After each batch: timers of background processes, the HTTP server, a
 * pending DELETE, what setup steps decided, the kernel's share of the
 * teardown once every DELETE / has its answer. */
static void after_events(struct sup *s)
{
	hutch_api_run(s);
	if (s->delete_pending && s->state == SUP_RUNNING) {
		end_sandbox(s, "deleted");
		hutch_api_run(s);
	}
	if (s->state != SUP_GONE) {
		hutch_hooks_after_events(s);
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
		end_sandbox(s, "crashed");
		hutch_sup_teardown_finish(s);
		return r;
	}
	s->last_request_ms = hutch_now_mono_ms();
	hutch_hooks_begin(s); /* setup script, on_create, then "ready" to the CLI */
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
	hutch_loop_done(&s->loop);
	return 0;
}
