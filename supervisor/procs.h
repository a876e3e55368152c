/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background processes (POST /start_process and friends): commands of the
 * supervisor (struct cmd) that belong to no request. They outlive the
 * request that started them and any client, and die with the sandbox. Their
 * stdout and stderr go to one ring buffer each; offsets into a stream are
 * absolute byte counts since the process started, so a client can follow
 * the output across requests and reconnections without losing or repeating
 * bytes (unless the ring has overwritten them, which it says).
 *
 * Everything here runs in the supervisor's single thread. Requests that wait
 * (for a pid, for output, for a kill to finish) register a struct
 * hutch_proc_wait and are woken on any change; they then look again.
 */
#ifndef HUTCH_PROCS_H
#define HUTCH_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "loop.h"
#include "ring.h"

struct sup;
struct cmd;

/* Bytes of output kept per process and stream (the newest ones). */
#define HUTCH_PROC_RING_BYTES (1u << 20)
/*
 * Bounds: the rings live in the supervisor, outside the sandbox's memory
 * limit, so their number is bounded: at worst (64 running + 64 finished) x
 * 2 streams x 1 MiB = 256 MiB of supervisor memory.
 */
#define HUTCH_PROCS_MAX_RUNNING  64
#define HUTCH_PROCS_MAX_FINISHED 64
#define HUTCH_PROC_GRACE_DEFAULT 5.0 /* seconds from SIGTERM to SIGKILL */
#define HUTCH_PROC_GRACE_MAX     3600.0
#define HUTCH_PROC_WAIT_MAX      60.0 /* longest long-poll of /process_output */

struct hutch_proc {
	struct hutch_procs *set;
	unsigned num;                 /* the id is "p<num>" */
	char uuid[37];                /* its id in the executor's contract (a UUID v4) */
	char *command;                /* for listing: the shell string or the joined argv */
	struct cmd *cmd;              /* NULL once finished */
	uint64_t cmd_id;              /* its command's id (cmd.h): POST /diff since_process */
	pid_t pid;                    /* inside the sandbox; 0 until spawned */
	int64_t started_at, ended_at; /* unix seconds */
	int status;                   /* wait status once done */
	cJSON *changes;               /* its change list once done (cmd.h), or NULL */
	cJSON *egress;                /* its egress summary at its end (netlog.h), or NULL */
	bool done, kill_requested;
	char *error;        /* init could not start it */
	int64_t kill_at_ms; /* monotonic: SIGKILL then, 0 = not pending */
	struct hutch_ring out, err;
	/* Standard input, kept open with "stdin": true (POST /process_stdin):
	 * its write end (non-blocking; -EBADF once closed), the bytes written
	 * so far, the one request writing now (set and cleared by it, or by
	 * hutch_proc_wait_cancel() when it goes) and the watch that wakes it
	 * when the pipe has room again. */
	struct hutch_loop *loop;
	int in_fd;
	bool stdin_kept;
	uint64_t stdin_bytes;
	struct hutch_proc_wait *stdin_writer;
	struct hutch_watch w_in;
	struct hutch_proc *next;
};

/* A request waiting for a change; owned by the request (api.c). */
struct hutch_proc_wait {
	void (*wake)(struct hutch_proc_wait *w);
	struct hutch_proc_wait *next;
	bool queued;         /* in the waiter list */
	bool started;        /* the handler acted once (spawned, signalled) */
	unsigned num;        /* process it is about */
	int64_t deadline_ms; /* monotonic: give up waiting then, 0 = never */
};

struct hutch_procs {
	struct hutch_proc *head, **tail;
	unsigned next_num, nrunning, nfinished;
	struct hutch_proc_wait *waiters;
};

/* The set of s, created on first use; NULL if out of memory. */
struct hutch_procs *hutch_procs_get(struct sup *s);
void hutch_procs_free(struct sup *s);
/* Start argv in the background (request already validated); with
 * stdin_open its standard input stays open for hutch_proc_stdin_write(),
 * else it reads end of file. On failure fills err: -EAGAIN too many
 * running, else spawn failures. */
struct hutch_proc *hutch_proc_start(struct sup *s, const char *command, const char *const *argv,
                                    const char *const *envp, const char *cwd, bool stdin_open,
                                    struct hutch_err *err);
/* Write to p's stdin: the bytes taken (> 0), -EAGAIN when its pipe is
 * full (p->stdin_writer is woken when it has room, or when the process
 * ends), -EPIPE when its stdin is closed (by hutch_proc_stdin_close(), or
 * the process closed its end or ended). */
ssize_t hutch_proc_stdin_write(struct hutch_proc *p, const char *data, size_t n);
/* Close p's stdin: the process reads end of file. Idempotent. */
void hutch_proc_stdin_close(struct hutch_proc *p);
/* "p3" (native) or its UUID (the executor's) -> process, or NULL. */
struct hutch_proc *hutch_proc_find(struct sup *s, const char *id);
struct hutch_proc *hutch_proc_find_num(struct sup *s, unsigned num);
/* SIGTERM the tree, SIGKILL after grace seconds (0: at once). */
void hutch_proc_kill(struct hutch_proc *p, double grace);
cJSON *hutch_proc_json(struct hutch_proc *p);

/* Waiting requests. */
void hutch_proc_wait_add(struct sup *s, struct hutch_proc_wait *w);
void hutch_proc_wait_cancel(struct sup *s, struct hutch_proc_wait *w);

/* Timers (SIGKILL after grace, long-poll deadlines), freeing finished
 * commands, bounding the finished list. Called every loop turn, after the
 * epoll batch. */
void hutch_procs_tick(struct sup *s);
/* Milliseconds until the next timer, -1 if none. */
int hutch_procs_timeout_ms(struct sup *s);

#endif
