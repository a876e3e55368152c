/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor: one detached process per sandbox on the host. It owns the
 * sandbox's cgroup, timers and API socket, and talks to init over a
 * socketpair. Single-threaded, one event loop (loop.h).
 *
 * This header is the supervisor's state, struct sup, and nothing else: the
 * files that act on it declare their functions in their own headers
 * (setup.h builds it, run.h runs the loop, lifecycle.h ends it, status.h
 * reports it, idle.h, hooks.h, procs.h, claim.h, api/api.h), so that none
 * of them depends on another through this one.
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
#include "disk.h"
#include "idmap.h"
#include "loop.h"
#include "netpolicy.h"
#include "state.h"
#include "util.h"

struct MHD_Connection;
struct MHD_Daemon;
struct sup;
struct request;
struct hutch_setup_failure;
struct hutch_proc;
struct hutch_procs;
struct hutch_api_conn;
struct hutch_exec;
struct hutch_ports;
struct hutch_container;
struct hutch_image_use;
struct hutch_journal;
struct hutch_netlog;
struct hutch_sup_volumes;
struct sup_snapshot;
struct hutch_kind;

#define HUTCH_MAX_BODY        (8u << 20) /* request body bound */
#define HUTCH_MAX_CONNECTIONS 256

enum sup_state {
	SUP_RUNNING,
	SUP_CLOSING, /* DELETE / or SIGTERM: tearing down */
	SUP_GONE,    /* torn down; answering the last requests */
};

/* Why the sandbox ended ("deleted", "expired", "crashed"), stored once,
 * and where its teardown is (lifecycle.c). */
struct sup_end {
	const char *reason;
	int64_t at;
	bool destroy_hook;    /* closing: on_destroy runs first (hooks.c) */
	bool retired;         /* the state dir is ".dead-<id>" (s->paths) */
	bool finish_pending;  /* hutch_sup_teardown_finish() still to run */
	bool finished;        /* it ran */
	bool cgroups_removed; /* lifecycle.c's remove_cgroups() ran */
};

struct sup {
	struct hutch_config *cfg;
	/* What kind of sandbox this is (kind.h), chosen once at creation:
	 * setup, spawn, status and teardown call through it. */
	const struct hutch_kind *kind;
	/* The namespaces (CLONE_NEW*) it joins rather than makes: written
	 * once by hutch_kind_join() (kind.c), read as s->joins & CLONE_NEW*. */
	unsigned joins;
	struct hutch_container *container; /* an OCI container (container.h), or NULL */
	struct hutch_paths paths;
	char id[HUTCH_ID_LEN + 1];
	enum sup_state state; /* lifecycle.c changes it */
	bool ready;           /* setup steps done (hooks.c) */
	struct sup_end end;
	int64_t created_at, expires_at;
	unsigned slot;
	uid_t uid_base;           /* root: of the slot's range; rootless: appuser's host uid */
	struct hutch_idmap idmap; /* root or rootless (idmap.h), found by the CLI */
	char scope_bus[4200];     /* systemd's socket: setup makes a delegated scope, "" none */
	struct hutch_loop loop;
	struct hutch_cmds cmds; /* the command engine (cmd.h) */
	int sigfd, ttl_fd, init_sock, pidfd, listen_fd, lock_fd, slot_fd;
	int mntns_fd; /* init's mount namespace: torn down after the DELETE answer (initproc.c) */
	/* lxcfs (runtime/lxcfs.h): the shared hold kept for the supervisor's
	 * life (the clone of its mount for init is setup's: setup.h). */
	int procview_hold;
	/* That lxcfs's pidfd, watched (procview.c): when it ends, a new one
	 * is found or started and init re-binds the views. */
	int procview_pidfd;
	struct hutch_watch w_procview;
	/* The disk (runtime/disk.h), handed over by setup when it ends: its
	 * maker (reaped as it ends), its mounts (sent to init with GO, closed)
	 * and its root, kept for the shutdown at the end. */
	struct hutch_disk_job disk_job;
	int disk_fds[HUTCH_DISK_FDS];
	/* A maker of our own: its pidfd, watched to reap it as it ends (run.c). */
	int disk_maker_fd;
	struct hutch_watch w_disk_maker;
	/* The change lists' fanotify group, init's (the supervisor's made on
	 * the disk and sent with GO, or init's own on a tmpfs, sent before
	 * READY): a copy kept so that init's exit is not its last close, whose end waits for an
	 * SRCU grace period (fsnotify_destroy_group(), 3-15 ms); closed at
	 * the teardown's end, after the answer (issue 31). */
	int disk_watch;
	pid_t init_pid;   /* with init_sock, pidfd: written by initproc.c only */
	bool init_killed; /* SIGKILL sent to that init (initproc.c): never again */
	struct hutch_watch w_mhd, w_pidfd, w_signal, w_ttl;
	struct hutch_watch w_listen; /* a container's API before its first connection */
	struct MHD_Daemon *mhd;
	struct hutch_cgroup *cg;
	struct sock_fprog seccomp;
	struct hutch_procs *procs; /* background processes (procs.c), lazily */
	struct hutch_ports *ports; /* ports out of the sandbox (ports.c), lazily */
	unsigned nconnections;
	struct sup_conns { /* api.c: connections waiting for a request's headers */
		struct hutch_api_conn *head, *tail;   /* oldest first */
		struct hutch_api_conn *hhead, *htail; /* half-closed, unsettled */
		bool rerun; /* a connection closed: run libmicrohttpd again at once */
	} conns;
	bool delete_pending;      /* a DELETE / is waiting for teardown */
	struct request *waiters;  /* requests answered when the sandbox has ended */
	struct hutch_exec *execs; /* upgraded exec streams (api/api-exec.c) */
	struct sup_exec_sock {    /* hutch exec's socket (api/exec-sock.c) */
		int fd;           /* listening; -EBADF: none */
		struct hutch_watch w;
		unsigned open;    /* its streams not yet ended */
		bool paused;      /* at HUTCH_MAX_CONNECTIONS: not accepting */
		int64_t retry_ms; /* out of fds or memory: accept again then (0: not) */
	} exec_sock;
	struct sup_executor {           /* --executor-port (api/executor.c) */
		struct MHD_Daemon *mhd; /* on the TCP listener; NULL: none */
		struct hutch_watch w_mhd;
		uint16_t port;   /* bound (a port 0 asked for any) */
		char secret[65]; /* the bearer secret, hex */
	} executor;
	/* What every command starts with (runtime/cmdenv.h): the default
	 * environment, or an image's (owned: cmdenv_owned). */
	const char *const *cmdenv;
	char **cmdenv_owned;
	struct hutch_image_use *image;     /* --image: its layers' use (sandbox-image.c) */
	struct hutch_sup_volumes *volumes; /* -v: the mounts and uses (volumes.c), or NULL */
	struct sup_snapshot *snap;         /* an image root's writable dirs (snapshot.c) */
	unsigned forks_made;               /* fork.c: its forkers' socket names' counter */
	bool fork_clones;                  /* fork.c: its disk's file clones here */
	struct sup_fork_ahead {            /* fork.c: the next fork's forker, made ahead */
		bool held;                 /* ctl, pidfd: its (bytes: its disk's size) */
		bool timer;                /* timer_fd made: when to make it */
		int ctl, pidfd, timer_fd;
		uint64_t bytes;
		struct hutch_watch w;
	} fork_ahead;
	struct sup_net {                    /* the network mode (netpolicy/) */
		struct hutch_net_plan plan; /* made before clone, carried to init */
		char pasta[256];            /* rootless mode all: the helper, found by the CLI */
		struct hutch_watch w;
		struct hutch_watch w_helper; /* pasta's pidfd or pid file pipe (run.c) */
		struct hutch_watch w_helper_timer;
		int helper_timer_fd;  /* a restarted pasta's deadline */
		bool helper_deferred; /* pasta's event waits for the thaw (run.c) */
		/* A joined network namespace (pod.c), not wired here: the
		 * pod's sandbox id, or the CNI's ("" for both: its own). */
		char joined_pod[HUTCH_ID_LEN + 1];
		bool joined_cni;
	} net;
	struct hutch_journal *journal; /* journal.c: the session journal, made on first use */
	struct hutch_netlog *netlog;   /* netlog.c: the egress log (allow, all), or NULL */
	struct sup_events {            /* events.c: the supervisor's own log */
		int fd;
		size_t bytes;
		bool full;
	} events;
	struct sup_idle { /* idle.c */
		int fd;
		struct hutch_watch w;
		bool armed, sleeping;
		bool paused; /* oci pause froze it (hutch_idle_paused()): not ours to freeze or thaw
		              */
		int64_t last_ms; /* monotonic: the last activity (hutch_idle_touch()) */
		unsigned open;   /* requests and relayed connections being served */
		unsigned sleeps;
		double last_wake_ms; /* request arrival to thawed, last wake-up */
	} idle;
	struct sup_hooks {     /* hooks.c */
		int result_fd; /* the creator's socket until it acknowledged (a run's: until gone)
		                */
		struct hutch_watch w_result; /* its closing: the creator is gone */
		bool awaiting_ack;           /* ready told; not handed over until acknowledged */
		bool run_creator; /* acknowledged by a run ("R"): the socket is kept, its end
		                     deletes */
		bool run_delete;  /* that socket said delete ("D") or closed, or
		                   * the run's own stream ("E") ended */
		bool run_early;   /* the run's command went to init before READY */
		int phase;        /* enum in hooks.c */
		int deadline_fd;  /* on_destroy time bound */
		struct hutch_watch w_deadline;
		bool destroy_done;
		cJSON *results;            /* per hook: exit code, duration, output tail */
		struct cmd *step;          /* the step command running */
		struct hutch_err fail_err; /* a failed step, reported after teardown */
		struct hutch_setup_failure *failure;
		bool failure_noted;    /* failed, details lost (out of memory) */
		int log_fd;            /* setup.log, open until ready or failed; -EBADF: none */
		uint64_t log_bytes;    /* written to it (at most HUTCH_SETUP_LOG_MAX) */
		struct hutch_buf tail; /* the running step's last HUTCH_HOOK_TAIL bytes */
	} hooks;
};

#endif
