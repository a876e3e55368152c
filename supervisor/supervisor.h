/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor: one detached process per sandbox on the host. It owns the
 * sandbox's cgroup, timers and API socket, and talks to init over a
 * socketpair. Single-threaded, one epoll loop (timerfd, signalfd, pidfd,
 * libmicrohttpd's epoll fd, command pipes).
 */
#ifndef HUTCH_SUPERVISOR_H
#define HUTCH_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>
#include <netinet/in.h>

#include "cgroup.h"
#include "cmd.h"
#include "config.h"
#include "hostnet.h"
#include "loop.h"
#include "state.h"
#include "util.h"

struct MHD_Connection;
struct MHD_Daemon;
struct sup;
struct request;
struct hutch_setup_failure;
struct hutch_proc;
struct hutch_procs;
struct hutch_egress;

#define HUTCH_MAX_BODY        (8u << 20) /* request body bound */
#define HUTCH_MAX_CONNECTIONS 256

enum sup_state {
	SUP_RUNNING,
	SUP_CLOSING, /* DELETE / or SIGTERM: tearing down */
	SUP_GONE,    /* torn down; answering the last requests */
};

/* Why the sandbox ended ("deleted", "expired", "crashed"). */
struct sup_end {
	const char *reason;
	int64_t at;
	bool retired;        /* the state dir is ".dead-<id>" (s->paths) */
	bool finish_pending; /* hutch_sup_teardown_finish() still to run */
	bool finished;       /* it ran */
};

struct sup {
	struct hutch_config *cfg;
	struct hutch_paths paths;
	char id[HUTCH_ID_LEN + 1];
	enum sup_state state;
	struct sup_end end;
	int64_t created_at, expires_at;
	unsigned slot;
	uid_t uid_base;
	struct hutch_loop loop;
	struct hutch_cmds cmds; /* the command engine (cmd.h) */
	int sigfd, ttl_fd, init_sock, pidfd, listen_fd, lock_fd, slot_fd;
	int mntns_fd; /* init's mount namespace: torn down after the DELETE answer */
	pid_t init_pid;
	struct hutch_watch w_mhd, w_pidfd, w_signal, w_ttl;
	struct MHD_Daemon *mhd;
	struct hutch_cgroup *cg;
	struct sock_fprog seccomp;
	struct hutch_procs *procs; /* background processes (procs.c), lazily */
	unsigned nconnections;
	bool delete_pending;     /* a DELETE / is waiting for teardown */
	struct request *waiters; /* requests answered when the sandbox has ended */
	int64_t last_request_ms;
	unsigned requests_open;               /* requests being served (idle: activity) */
	struct sup_net {                      /* network all / allow (netpolicy/) */
		struct hutch_net_addrs addrs; /* all: the sandbox's /30, host link */
		struct hutch_net_child child; /* what init configures */
		bool attached;                /* all: host side made (or being made) */
		struct sockaddr_in resolver;
		struct hutch_net_listener listeners[HUTCH_NET_LISTENERS_MAX];
		size_t nlisteners;           /* received from init, not yet served */
		struct hutch_egress *egress; /* serves them once ready */
		struct hutch_watch w;
	} net;
	struct sup_idle { /* idle.c */
		int fd;
		struct hutch_watch w;
		bool armed, sleeping;
		unsigned sleeps;
		double last_wake_ms; /* request arrival to thawed, last wake-up */
	} idle;
	struct sup_hooks {       /* hooks.c */
		int result_fd;   /* the creating CLI's pipe until ready/failed */
		int phase;       /* enum in hooks.c */
		int deadline_fd; /* on_destroy time bound */
		struct hutch_watch w_deadline;
		const char *end_reason; /* end_sandbox() waiting for on_destroy */
		bool destroy_done;
		cJSON *results;            /* per hook: exit code, duration, output tail */
		struct cmd *step;          /* the step command running */
		struct hutch_err fail_err; /* a failed step, reported after teardown */
		struct hutch_setup_failure *failure;
		bool failure_noted; /* failed, details lost (out of memory) */
	} hooks;
};

/* sandbox.c: create the sandbox (runs in the new supervisor process). */
int hutch_sup_setup(struct sup *s, struct hutch_err *err);
/* sandbox.c: what a client can observe, before DELETE / answers: kill
 * init and wait until the whole pid namespace is dead, write the tombstone
 * (reason, or none if NULL), retire the state dir (hutch_state_retire())
 * so that the sandbox can no longer be found; idempotent. */
void hutch_sup_teardown(struct sup *s, const char *reason);
/* sandbox.c: the rest, after the answer: egress, host link, cgroups, then
 * the retired dir (last: it tells gc what is left if we die first). */
void hutch_sup_teardown_finish(struct sup *s);
/* supervisor.c */
int hutch_sup_run(struct sup *s);
cJSON *hutch_sup_status_json(struct sup *s);
/* sandbox.c: rewrite state.json with this status ("running", "sleeping"). */
int hutch_sup_write_state(struct sup *s, const char *status);
/* supervisor.c: end the sandbox now (teardown), skipping on_destroy. */
void hutch_sup_end_now(struct sup *s, const char *reason);
/* api.c */
/* Load the HTTP server library now (mhd.h), ignoring a failure that
 * hutch_api_start() then reports: called while init builds the root, so
 * the load overlaps with it and init (already cloned) never maps it. */
void hutch_api_preload(void);
int hutch_api_start(struct sup *s, struct hutch_err *err);
void hutch_api_stop(struct sup *s);
/* Add libmicrohttpd's epoll fd to the loop. */
int hutch_api_watch(struct sup *s);
/* Sandbox going away: answer every waiting request. */
void hutch_api_sandbox_ended(struct sup *s);
void hutch_api_run(struct sup *s);
/* How long the loop may sleep before libmicrohttpd needs hutch_api_run(). */
int hutch_api_timeout_ms(struct sup *s);

#endif
