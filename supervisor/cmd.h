/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command engine: every process the supervisor has init start (a /run,
 * a background process, a file operation, a setup step) is a struct cmd.
 * A command is a spawn request to init with three pipe ends (stdin read
 * end, stdout and stderr write ends); the other ends stay here, in the
 * loop, with an optional timeout. It is done when init reports its exit
 * and both pipes are drained: everything it wrote before exiting is in the
 * pipes by then.
 *
 * The engine does not know who reads a command: its owner attaches a sink
 * (output, spawned, done callbacks). Without an output callback the engine
 * captures the output itself into c->out and c->err (the first max_output
 * bytes of each, or with HUTCH_CAPTURE_TAIL the last ones of both merged).
 * The owner lets go with hutch_cmd_release(): a command still running is
 * killed then and freed when it is done, without a callback.
 */
#ifndef HUTCH_CMD_H
#define HUTCH_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "loop.h"
#include "proto.h"
#include "util.h"

struct cmd;
struct hutch_cgroup;
struct hutch_instance_type;

enum hutch_capture {
	HUTCH_CAPTURE_HEAD, /* the first max_output bytes of each stream */
	HUTCH_CAPTURE_TAIL, /* the last max_output bytes, stdout and stderr merged */
};

/* What to start, and how. */
struct hutch_spawn {
	const char *const *argv;
	const char *const *envp;
	const char *cwd;
	const char *stdin_data; /* written to stdin, which is then closed */
	size_t stdin_len;
	bool stdin_open;     /* leave stdin's write end for hutch_cmd_take_stdin() */
	bool builtin;        /* a file builtin of init (proto.h HUTCH_SPAWN_BUILTIN) */
	unsigned pipe_size;  /* F_SETPIPE_SZ of the three pipes (streams), 0: the default */
	bool tty;            /* on a pty of the sandbox (proto.h HUTCH_SPAWN_TTY): no pipes;
	                      * once spawned, stdin and stdout are its master, no stderr */
	uint16_t rows, cols; /* the tty's size, 0: the kernel's default */
	/* Given stdin, stdout, stderr (a container's: the creator's own) sent
	 * instead of pipes, or NULL; the command is then done at its exit. */
	const int *stdio_fds;
	/* More fds, the command's 3, 4, ... (proto.h HUTCH_SPAWN_EXTRA_FDS;
	 * duplicated for the message, the caller keeps its own). */
	const int *extra_fds;
	size_t nextra_fds;
	bool set_ids;      /* run as uid, gid (inside the sandbox) instead of appuser */
	bool extra_filter; /* with init's extra seccomp filter (proto.h HUTCH_SPAWN_EXTRA_FILTER) */
	bool held_tty;     /* on the pty init holds (proto.h HUTCH_SPAWN_HELD_TTY): no pipes */
	bool main;         /* a container's main process (proto.h HUTCH_SPAWN_MAIN) */
	uint32_t uid, gid;
	uint64_t caps[5]; /* with set_ids: a container's sets (proto.h) */
	/* with set_ids: a container's additional groups */
	uint32_t ngroups, groups[HUTCH_SPAWN_MAX_GROUPS];
	double timeout;      /* seconds, 0 = none: then SIGKILL to the tree */
	uint64_t max_output; /* per stream when captured */
	enum hutch_capture capture;
};

/* The owner's callbacks; each may be NULL. ud is the owner's. */
struct hutch_cmd_sink {
	/* Bytes the command wrote. Return false to stop reading both pipes
	 * until hutch_cmd_resume_output() (the consumer is full). */
	bool (*output)(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n);
	/* Optional, before output: move what fd (stdout's or stderr's read
	 * end) holds to the consumer without reading it here (splice).
	 * Returns the bytes moved (> 0; called again), -EAGAIN when fd is
	 * empty, -ENOBUFS when the consumer is full (output pauses until
	 * hutch_cmd_resume_output(); after the command's exit the rest is
	 * read and given to output() instead), or 0: read fd and give it to
	 * output() (fd may be empty or at its end: read() tells). */
	ssize_t (*move)(void *ud, struct cmd *c, bool is_err, int fd);
	/* init started it: c->pid is known. */
	void (*spawned)(void *ud, struct cmd *c);
	/* It is done (exited, or init could not start it: c->spawn_error). */
	void (*done)(void *ud, struct cmd *c);
	void *ud;
};

enum cmd_state {
	CMD_SPAWNING,
	CMD_RUNNING,
	CMD_DONE,
};

/* An observer of commands: attach() when one starts (hook_ud set; id is
 * the command's; its result, may be NULL, is the command's hook_ref), then
 * done() at its end or put() if it is freed without one. */
struct hutch_cmd_hook {
	void *(*attach)(void *ud, uint64_t id, const struct hutch_spawn *sp);
	void (*done)(void *ref, const struct cmd *c);
	void (*put)(void *ref);
};

/* The engine of one supervisor. */
struct hutch_cmds {
	struct hutch_loop *loop;
	int init_sock;
	bool init_dead;
	struct hutch_watch w_init;
	struct hutch_cgroup *cg;                /* for the OOM counter; may be NULL */
	const struct hutch_instance_type *type; /* for the OOM message */
	uint64_t oom_seen;                      /* the cgroup's OOM kills already reported */
	uint64_t next_id;
	int64_t last_done_ms; /* monotonic: when a command last finished */
	/* Told of the commands started while hook_ud is set
	 * (hutch_cmds_set_hook(): the session journal, journal.h). */
	const struct hutch_cmd_hook *hook;
	void *hook_ud;
	struct cmd *list;
	/* init's answers that are not about commands (HUTCH_MSG_CONNECTED,
	 * supervisor/ports.c, hutch_cmds_on_message()): fd is the one that came
	 * with it or -EBADF, and belongs to the callee. NULL: dropped. */
	void (*on_message)(void *ud, uint32_t type, uint64_t id, const void *body, size_t len,
	                   int fd);
	void *on_message_ud;
	/* Set by the owner (NULL: none): called before c's exit is taken,
	 * while it still counts as running. The egress log reads what the
	 * kernel logged of the command's last connections first, so they are
	 * still the command's, then sums them up in c->egress
	 * (supervisor/run.c). */
	void (*before_exit)(void *ud, struct cmd *c);
	void *before_exit_ud;
	/* Set by the owner (NULL: none): called before a new command counts
	 * as running (before_exit's ud). The NAT path's log reads what it
	 * holds first, so it stays the commands' that ran when it was sent. */
	void (*before_start)(void *ud);
};

/* Read-only for owners, but for the fields said otherwise. */
struct cmd {
	struct hutch_cmds *set;
	uint64_t id;
	enum cmd_state state;
	pid_t pid;
	double started, duration; /* monotonic seconds */
	double timeout;
	int status; /* wait status once done */
	bool exited, timed_out, oom_killed, released, tty;
	uint64_t stdin_len; /* bytes given as stdin_data */
	/* Bytes its owner wrote to the stdin it took (hutch_cmd_take_stdin()),
	 * for the journal: counted (and stdin_counted set) by owners that
	 * do (POST /exec); writable by the owner. */
	uint64_t stdin_streamed;
	bool stdin_counted;
	struct hutch_buf out, err; /* captured output (no sink output callback) */
	const char *spawn_error;   /* init could not start it (static or spawn_errbuf) */
	cJSON *changes;            /* its change list (changes-format.h), or NULL */
	cJSON *egress;             /* its egress summary (netlog.h), or NULL */
	char spawn_errbuf[128];
	struct hutch_cmd_sink sink;
	/* engine-private */
	void *hook_ref; /* what the hook's attach() gave it, or NULL */
	bool kill_on_start, out_paused;
	bool out_was_paused; /* ever: an EPOLLHUP of its pipes may hide bytes */
	enum hutch_capture capture;
	int out_fd, err_fd, in_fd, timer_fd;
	struct hutch_watch w_out, w_err, w_in, w_timer;
	char *stdin_data;
	size_t stdin_off;
	struct hutch_deferred dfree;
	struct cmd *next;
};

/* Take ownership of init_sock's messages (it joins the loop). */
int hutch_cmds_init(struct hutch_cmds *set, struct hutch_loop *loop, int init_sock,
                    struct hutch_cgroup *cg, const struct hutch_instance_type *type);
/* Start a command; the sink is copied. On failure fills err, its class
 * limit (the command or its fds are too many bytes) or internal, and
 * returns NULL. */
struct cmd *hutch_cmd_start(struct hutch_cmds *set, const struct hutch_spawn *sp,
                            const struct hutch_cmd_sink *sink, struct hutch_err *err);
/* Signal the command's tree (flags: proto.h HUTCH_KILL_*); a command still
 * spawning is killed with SIGKILL once it has started. */
void hutch_cmd_kill(struct cmd *c, int sig, unsigned flags);
/* The owner lets go: no more callbacks; a running command is killed with
 * SIGKILL; the command is freed (after the loop's batch) once done. */
void hutch_cmd_release(struct cmd *c);
/* Read the output pipes again after a sink's output() returned false. */
void hutch_cmd_resume_output(struct cmd *c);
/* Hand the pipe ends over to the caller, who then owns (and closes) them:
 * stdin's write end (spawned with stdin_open), stdout's read end (the
 * command is then done at its exit without waiting for stdout's EOF).
 * -EBADF if there is none. */
int hutch_cmd_take_stdin(struct cmd *c);
int hutch_cmd_take_stdout(struct cmd *c);
/* Give the engine an fd to close when the command is done (a raw upload
 * hands stdin's write end back, so that a writer killed mid-upload never
 * sees a clean end of its input). */
void hutch_cmd_hold_fd(struct cmd *c, int fd);
/* Commands not done yet. */
unsigned hutch_cmds_running(const struct hutch_cmds *set);
/* The commands started from now on are told to hook with ud (ud NULL:
 * none are; those told before keep the hook): api.c around a request's
 * handler, for the session journal. */
void hutch_cmds_set_hook(struct hutch_cmds *set, const struct hutch_cmd_hook *hook, void *ud);
/* init's messages that are not about commands go to fn (NULL: dropped). */
void hutch_cmds_on_message(struct hutch_cmds *set,
                           void (*fn)(void *ud, uint32_t type, uint64_t id, const void *body,
                                      size_t len, int fd),
                           void *ud);
/* init was reaped: no command is signalled any more. */
void hutch_cmds_init_gone(struct hutch_cmds *set);
/* init is dead: every command still running ends as killed (SIGKILL),
 * with what it wrote. */
void hutch_cmds_finish_all(struct hutch_cmds *set);
/* Result JSON of a finished command: what = 0, or HUTCH_RESULT_OUTPUT for
 * stdout and stderr as text (invalid UTF-8 replaced), with
 * HUTCH_RESULT_BASE64 as base64 of the exact bytes ("encoding": "base64"). */
#define HUTCH_RESULT_OUTPUT (1u << 0)
#define HUTCH_RESULT_BASE64 (1u << 1)
cJSON *hutch_cmd_result_json(const struct cmd *c, unsigned what);
/* The same result in brief, as a RESULT frame's payload (base/frame.h:
 * exit code, signal, timed out, OOM, the message) written into buf (size
 * bytes); returns its length. */
size_t hutch_cmd_result_brief(const struct cmd *c, char *buf, size_t size);

#endif
