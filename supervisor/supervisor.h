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
#include "config.h"
#include "hostnet.h"
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
#define HUTCH_SSE_QUEUE_MAX   (256u << 10)
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

/* epoll user data: what an fd is. */
enum watch_kind {
	W_MHD = 1,
	W_INIT,
	W_PIDFD,
	W_SIGNAL,
	W_TTL,
	W_CMD_OUT,
	W_CMD_ERR,
	W_CMD_IN,
	W_CMD_TIMER,
	W_CMD_CONN,
	W_IDLE,      /* idle.c: idle timer */
	W_HOOK,      /* hooks.c: deadline of the on_destroy hook */
	W_FILE_PIPE, /* api-files.c: a raw upload/download pipe */
	W_NET,       /* netpolicy/egress.c: DNS stub, TLS proxy, host ports */
};

struct watch {
	enum watch_kind kind;
	void *ptr;
};

enum cmd_state {
	CMD_SPAWNING,
	CMD_RUNNING,
	CMD_DONE,
};

struct cmd {
	struct sup *sup;
	uint64_t id;
	bool retired; /* freed at the end of the current event batch */
	enum cmd_state state;
	struct request *req; /* NULL once the client is gone */
	bool streaming;
	pid_t pid;
	int out_fd, err_fd, in_fd, timer_fd, conn_fd;
	struct watch w_out, w_err, w_in, w_timer, w_conn;
	bool out_paused;
	char *stdin_data;
	size_t stdin_len, stdin_off;
	struct hutch_buf out, err; /* /run: captured output */
	struct hutch_buf sse;      /* /run_streaming: encoded events not yet sent */
	size_t sse_off;
	bool sse_end_queued, sse_finished;
	char carry_out[4], carry_err[4];
	size_t ncarry_out, ncarry_err;
	double started, duration;
	double timeout;
	uint64_t max_output;
	int status; /* wait status */
	bool exited, timed_out, oom_killed, killed_by_client;
	bool keep_tail; /* hooks: keep the last bytes of stdout, not the first */
	/* Called once when the command is done instead of resuming a request;
	 * the callback owns c from then on (hutch_cmd_free()). */
	void (*on_done)(struct cmd *c);
	const char *spawn_error; /* static message if spawning failed */
	char spawn_errbuf[128];
	struct hutch_proc *proc; /* background process (procs.c) or NULL */
	struct cmd *next;
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
	int epfd, sigfd, ttl_fd, init_sock, pidfd, listen_fd, lock_fd, slot_fd;
	int mntns_fd; /* init's mount namespace: torn down after the DELETE answer */
	pid_t init_pid;
	bool init_dead;
	struct watch w_mhd, w_init, w_pidfd, w_signal, w_ttl;
	struct MHD_Daemon *mhd;
	struct hutch_cgroup *cg;
	struct sock_fprog seccomp;
	struct cmd *cmds;
	uint64_t oom_seen;         /* the cgroup's OOM-kill count already reported */
	struct cmd *graveyard;     /* retired commands, freed after the event batch */
	struct hutch_procs *procs; /* background processes (procs.c), lazily */
	uint64_t next_cmd_id;
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
		struct watch w;
	} net;
	struct sup_idle { /* idle.c */
		int fd;
		struct watch w;
		bool armed, sleeping;
		unsigned sleeps;
		double last_wake_ms; /* request arrival to thawed, last wake-up */
	} idle;
	struct sup_hooks {       /* hooks.c */
		int result_fd;   /* the creating CLI's pipe until ready/failed */
		int phase;       /* enum in hooks.c */
		int deadline_fd; /* on_destroy time bound */
		struct watch w_deadline;
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
int hutch_sup_watch(struct sup *s, int fd, uint32_t events, struct watch *w);
void hutch_sup_unwatch(struct sup *s, int fd);
cJSON *hutch_sup_status_json(struct sup *s);
/* Start a command; on failure fills err (a 4xx-worthy message). */
struct cmd *hutch_cmd_start(struct sup *s, const char *const *argv, const char *const *envp,
                            const char *cwd, const char *stdin_data, size_t stdin_len,
                            double timeout, uint64_t max_output, bool streaming,
                            struct hutch_err *err);
/* Free a command whose on_done callback ran. */
void hutch_cmd_free(struct cmd *c);
/* sandbox.c: rewrite state.json with this status ("running", "sleeping"). */
int hutch_sup_write_state(struct sup *s, const char *status);
/* supervisor.c: end the sandbox now (teardown), skipping on_destroy. */
void hutch_sup_end_now(struct sup *s, const char *reason);
/* Signal cmd's tree (flags: HUTCH_KILL_*); a command still spawning is
 * killed with SIGKILL once it has started. */
void hutch_cmd_kill(struct cmd *c, int sig, unsigned flags);
/* The same with HUTCH_SPAWN_* flags for init; HUTCH_CMD_OPEN_STDIN (never
 * sent) leaves stdin's write end open and unwatched in c->in_fd for the
 * caller to stream into (stdin_data must then be empty). */
#define HUTCH_CMD_OPEN_STDIN (1u << 31)
struct cmd *hutch_cmd_start_flags(struct sup *s, const char *const *argv, const char *const *envp,
                                  const char *cwd, const char *stdin_data, size_t stdin_len,
                                  double timeout, uint64_t max_output, bool streaming,
                                  uint32_t flags, struct hutch_err *err);
/* api-files.c: an event on a W_FILE_PIPE watch. */
void hutch_api_files_event(struct watch *w, uint32_t events);
/* The client of cmd went away: kill the command tree if still running. */
void hutch_cmd_orphan(struct cmd *c);
/* Result JSON of a finished command (stdout/stderr included unless streaming). */
cJSON *hutch_cmd_result_json(struct cmd *c, bool with_output);
/* api.c */
/* Load the HTTP server library now (mhd.h), ignoring a failure that
 * hutch_api_start() then reports: called while init builds the root, so
 * the load overlaps with it and init (already cloned) never maps it. */
void hutch_api_preload(void);
int hutch_api_start(struct sup *s, struct hutch_err *err);
void hutch_api_stop(struct sup *s);
/* Add libmicrohttpd's epoll fd to the loop. */
int hutch_api_watch(struct sup *s);
/* A streaming client consumed queued events. */
void hutch_cmd_sse_consumed(struct cmd *c);
/* A command made progress (output or done): wake its request. */
void hutch_api_cmd_event(struct cmd *c);
/* Sandbox going away: answer every waiting request. */
void hutch_api_sandbox_ended(struct sup *s);
void hutch_api_run(struct sup *s);
/* How long the loop may sleep before libmicrohttpd needs hutch_api_run(). */
int hutch_api_timeout_ms(struct sup *s);

#endif
