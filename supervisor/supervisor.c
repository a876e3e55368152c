/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's event loop and command bookkeeping (see supervisor.h).
 * A command is: a spawn request to init with three pipe ends (stdin read
 * end, stdout and stderr write ends), the read/write ends kept here in the
 * loop, an optional timeout timerfd, and the client's connection fd watched
 * for hang-up. It is done when init reports its exit and both pipes are
 * drained; output written before the exit is in the pipes by then.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress.h"
#include "fdutil.h"
#include "hooks.h"
#include "idle.h"
#include "log.h"
#include "procs.h"
#include "proto.h"
#include "supervisor.h"
#include "syscalls.h"

/* How long a torn-down supervisor keeps serving the last answers. */
#define GONE_LINGER_MS 5000

int hutch_sup_watch(struct sup *s, int fd, uint32_t events, struct watch *w)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void hutch_sup_unwatch(struct sup *s, int fd)
{
	if (fd >= 0)
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
}

static void close_watched(struct sup *s, int *fd)
{
	if (*fd < 0)
		return;
	hutch_sup_unwatch(s, *fd);
	close(*fd);
	*fd = -EBADF;
}

/* Retire a command: unlink it, close its fds, and free it only after the
 * current epoll batch, whose later events may still point at it. */
static void cmd_free(struct cmd *c)
{
	struct sup *s = c->sup;

	if (c->retired)
		return;

	for (struct cmd **pp = &s->cmds; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	close_watched(s, &c->out_fd);
	close_watched(s, &c->err_fd);
	close_watched(s, &c->in_fd);
	close_watched(s, &c->timer_fd);
	if (c->conn_fd >= 0)
		hutch_sup_unwatch(s, c->conn_fd); /* owned by libmicrohttpd */
	free(c->stdin_data);
	hutch_buf_done(&c->out);
	hutch_buf_done(&c->err);
	hutch_buf_done(&c->sse);
	c->retired = true;
	c->next = s->graveyard;
	s->graveyard = c;
}

static void free_graveyard(struct sup *s)
{
	while (s->graveyard) {
		struct cmd *c = s->graveyard;
		s->graveyard = c->next;
		free(c);
	}
}

void hutch_cmd_kill(struct cmd *c, int sig, unsigned flags)
{
	struct hutch_msg_kill k = { .signal = sig, .flags = flags };

	if (c->state == CMD_SPAWNING)
		c->killed_by_client = true; /* SIGKILL once it has started */
	if (c->state == CMD_RUNNING && !c->sup->init_dead)
		(void)hutch_proto_send(c->sup->init_sock, HUTCH_MSG_KILL, c->id, &k, sizeof(k),
		                       NULL, 0);
}

static void send_kill(struct cmd *c, int sig)
{
	hutch_cmd_kill(c, sig, 0);
}

/* Append one SSE event whose data is a JSON object. */
static void sse_event(struct cmd *c, const char *event, cJSON *data)
{
	_cleanup_free_ char *text = cJSON_PrintUnformatted(data);
	char head[64];

	if (!text)
		return;
	snprintf(head, sizeof(head), "event: %s\ndata: ", event);
	(void)hutch_buf_append(&c->sse, head, strlen(head));
	(void)hutch_buf_append(&c->sse, text, strlen(text));
	(void)hutch_buf_append(&c->sse, "\n\n", 2);
}

static void sse_output(struct cmd *c, const char *event, char *carry, size_t *ncarry,
                       const char *data, size_t len)
{
	_cleanup_free_ char *joined = NULL, *clean = NULL;
	_cleanup_cjson_ cJSON *o = NULL;
	size_t total = *ncarry + len, rest = 0;

	joined = malloc(total);
	if (!joined)
		return;
	memcpy(joined, carry, *ncarry);
	memcpy(joined + *ncarry, data, len);
	clean = hutch_utf8_sanitize(joined, total, len ? &rest : NULL);
	if (!clean)
		return;
	if (rest > 3)
		rest = 0;
	memcpy(carry, joined + total - rest, rest);
	*ncarry = rest;
	if (!*clean)
		return;
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "data", clean);
	sse_event(c, event, o);
}

static void pause_output(struct cmd *c, bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN };

	if (c->out_paused == pause)
		return;
	c->out_paused = pause;
	ev.data.ptr = &c->w_out;
	if (c->out_fd >= 0)
		(void)epoll_ctl(c->sup->epfd, EPOLL_CTL_MOD, c->out_fd, &ev);
	ev.data.ptr = &c->w_err;
	if (c->err_fd >= 0)
		(void)epoll_ctl(c->sup->epfd, EPOLL_CTL_MOD, c->err_fd, &ev);
}

/* Streaming client consumed events: read from the pipes again. */
void hutch_cmd_sse_consumed(struct cmd *c)
{
	if (c->sse_off == c->sse.len) {
		c->sse.len = 0;
		c->sse_off = 0;
		c->sse.total = 0;
		c->sse.truncated = false;
	} else if (c->sse_off >= HUTCH_SSE_QUEUE_MAX / 2) {
		/* Compact: a client that never quite catches up must not make
		 * the buffer grow with everything ever sent. */
		memmove(c->sse.data, c->sse.data + c->sse_off, c->sse.len - c->sse_off);
		c->sse.len -= c->sse_off;
		c->sse_off = 0;
	}
	if (c->sse.len - c->sse_off < HUTCH_SSE_QUEUE_MAX / 2)
		pause_output(c, false);
}

/* Read what is available on one output pipe; returns false at EOF. */
static bool drain_pipe(struct cmd *c, int *fd, bool is_err)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			close_watched(c->sup, fd);
			return false;
		}
		if (c->proc) {
			hutch_proc_output(c->proc, is_err, buf, (size_t)n);
			continue;
		}
		if (c->streaming) {
			if (is_err)
				sse_output(c, "stderr", c->carry_err, &c->ncarry_err, buf,
				           (size_t)n);
			else
				sse_output(c, "stdout", c->carry_out, &c->ncarry_out, buf,
				           (size_t)n);
			if (c->sse.len - c->sse_off >= HUTCH_SSE_QUEUE_MAX && !c->exited) {
				pause_output(c, true);
				return true;
			}
		} else {
			if (c->keep_tail)
				hutch_hooks_tail_append(&c->out, buf, (size_t)n);
			else
				(void)hutch_buf_append(is_err ? &c->err : &c->out, buf, (size_t)n);
		}
	}
}

static void maybe_done(struct cmd *c)
{
	if (c->state == CMD_DONE || !c->exited)
		return;
	/* init reported the exit: everything the command wrote is in the
	 * pipes. Later writers (background children) are cut off. */
	if (c->out_fd >= 0)
		drain_pipe(c, &c->out_fd, false);
	if (c->err_fd >= 0)
		drain_pipe(c, &c->err_fd, true);
	close_watched(c->sup, &c->out_fd);
	close_watched(c->sup, &c->err_fd);
	close_watched(c->sup, &c->in_fd);
	close_watched(c->sup, &c->timer_fd);
	c->duration = hutch_now_mono_sec() - c->started;
	if (WIFSIGNALED(c->status) && WTERMSIG(c->status) == SIGKILL && c->sup->cg &&
	    !c->timed_out) {
		/* Every OOM victim dies of SIGKILL: the first such death to see
		 * the cgroup's counter move claims the kill. Read here, not at
		 * each spawn, to keep file reads off the exec path. */
		uint64_t now = 0;
		if (hutch_cgroup_oom_kills(c->sup->cg, &now) == 0 && now > c->sup->oom_seen) {
			c->oom_killed = true;
			c->sup->oom_seen = now;
		}
	}
	if (c->streaming) {
		if (c->ncarry_out)
			sse_output(c, "stdout", c->carry_out, &c->ncarry_out, "", 0);
		if (c->ncarry_err)
			sse_output(c, "stderr", c->carry_err, &c->ncarry_err, "", 0);
	}
	c->state = CMD_DONE;
	c->sup->last_request_ms = hutch_now_mono_ms();
	if (c->on_done)
		c->on_done(c); /* hooks.c: owns c now */
	else if (c->req)
		hutch_api_cmd_event(c);
	else
		cmd_free(c);
}

static void write_stdin(struct cmd *c)
{
	while (c->stdin_off < c->stdin_len) {
		ssize_t n =
		        write(c->in_fd, c->stdin_data + c->stdin_off, c->stdin_len - c->stdin_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			break; /* EPIPE: the command does not read its input */
		c->stdin_off += (size_t)n;
	}
	close_watched(c->sup, &c->in_fd);
}

static void cmd_fail_spawn(struct cmd *c, int code)
{
	snprintf(c->spawn_errbuf, sizeof(c->spawn_errbuf), "init could not start the command: %s",
	         strerror(-code));
	c->spawn_error = c->spawn_errbuf;
	c->exited = true;
	c->status = 127 << 8;
	maybe_done(c);
}

static struct cmd *find_cmd(struct sup *s, uint64_t id)
{
	for (struct cmd *c = s->cmds; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static void on_init_message(struct sup *s)
{
	for (;;) {
		struct hutch_msg_hdr hdr;
		union {
			struct hutch_msg_spawned spawned;
			struct hutch_msg_exited exited;
			char raw[64];
		} body;
		ssize_t n = hutch_proto_recv(s->init_sock, &hdr, &body, sizeof(body), NULL, NULL);
		struct cmd *c;

		if (n == -EAGAIN)
			return;
		if (n == -EBADMSG)
			continue; /* hostile or broken message: ignore it */
		if (n < 0 || (n == 0 && hdr.type == 0)) {
			hutch_sup_unwatch(s, s->init_sock);
			return; /* init is gone; the pidfd tells the rest */
		}
		c = find_cmd(s, hdr.id);
		if (!c || c->state == CMD_DONE)
			continue;
		if (hdr.type == HUTCH_MSG_SPAWNED && n == sizeof(body.spawned) &&
		    c->state == CMD_SPAWNING) {
			if (body.spawned.error < 0 || body.spawned.pid <= 0) {
				cmd_fail_spawn(c,
				               body.spawned.error < 0 ? body.spawned.error : -EIO);
				continue;
			}
			c->pid = body.spawned.pid;
			c->state = CMD_RUNNING;
			if (c->proc)
				hutch_proc_spawned(c->proc, c->pid);
			if (c->killed_by_client)
				send_kill(c, SIGKILL);
		} else if (hdr.type == HUTCH_MSG_EXITED && n == sizeof(body.exited) &&
		           c->state == CMD_RUNNING) {
			c->status = body.exited.status;
			c->exited = true;
			maybe_done(c);
		}
	}
}

static int make_pipe(int fds[2], bool read_nonblock, bool write_nonblock)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	if (read_nonblock)
		(void)hutch_fd_nonblock(fds[0], true);
	if (write_nonblock)
		(void)hutch_fd_nonblock(fds[1], true);
	return 0;
}

static int arm_timer(struct cmd *c, double seconds)
{
	struct itimerspec its = { 0 };

	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timer_fd < 0)
		return -errno;
	its.it_value.tv_sec = (time_t)seconds;
	its.it_value.tv_nsec = (long)((seconds - floor(seconds)) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(c->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	c->w_timer = (struct watch){ W_CMD_TIMER, c };
	return hutch_sup_watch(c->sup, c->timer_fd, EPOLLIN, &c->w_timer);
}

struct cmd *hutch_cmd_start(struct sup *s, const char *const *argv, const char *const *envp,
                            const char *cwd, const char *stdin_data, size_t stdin_len,
                            double timeout, uint64_t max_output, bool streaming,
                            struct hutch_err *err)
{
	return hutch_cmd_start_flags(s, argv, envp, cwd, stdin_data, stdin_len, timeout, max_output,
	                             streaming, 0, err);
}

struct cmd *hutch_cmd_start_flags(struct sup *s, const char *const *argv, const char *const *envp,
                                  const char *cwd, const char *stdin_data, size_t stdin_len,
                                  double timeout, uint64_t max_output, bool streaming,
                                  uint32_t flags, struct hutch_err *err)
{
	uint32_t spawn_flags = flags & ~HUTCH_CMD_OPEN_STDIN;
	_cleanup_free_ char *body = NULL;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	struct cmd *c;
	ssize_t len;
	int r;

	len = hutch_proto_spawn_encode(argv, envp, cwd, &body);
	if (len == -E2BIG)
		return hutch_err_set(err, -E2BIG,
		                     "command and environment are larger than %u bytes: write the "
		                     "script to a file and run the file",
		                     HUTCH_PROTO_MAX - 4096),
		       NULL;
	if (len < 0)
		return hutch_err_set_errno(err, (int)len, "encode command"), NULL;
	memcpy(body + offsetof(struct hutch_msg_spawn, flags), &spawn_flags, sizeof(spawn_flags));
	c = calloc(1, sizeof(*c));
	if (!c)
		return hutch_err_set(err, -ENOMEM, "out of memory"), NULL;
	c->sup = s;
	c->id = ++s->next_cmd_id;
	c->out_fd = c->err_fd = c->in_fd = c->timer_fd = c->conn_fd = -EBADF;
	c->streaming = streaming;
	c->max_output = max_output;
	c->timeout = timeout;
	hutch_buf_init(&c->out, max_output);
	hutch_buf_init(&c->err, max_output);
	hutch_buf_init(&c->sse, SIZE_MAX);
	c->next = s->cmds;
	s->cmds = c;
	if (make_pipe(in, false, true) < 0 || make_pipe(out, true, false) < 0 ||
	    make_pipe(errp, true, false) < 0) {
		r = hutch_err_set_errno(err, -errno, "create pipes");
		goto fail;
	}
	c->out_fd = out[0];
	c->err_fd = errp[0];
	c->w_out = (struct watch){ W_CMD_OUT, c };
	c->w_err = (struct watch){ W_CMD_ERR, c };
	if (hutch_sup_watch(s, c->out_fd, EPOLLIN, &c->w_out) < 0 ||
	    hutch_sup_watch(s, c->err_fd, EPOLLIN, &c->w_err) < 0) {
		r = hutch_err_set_errno(err, -errno, "watch pipes");
		goto fail;
	}
	if (stdin_len > 0) {
		c->stdin_data = malloc(stdin_len);
		if (!c->stdin_data) {
			r = hutch_err_set(err, -ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(c->stdin_data, stdin_data, stdin_len);
		c->stdin_len = stdin_len;
		c->in_fd = in[1];
		in[1] = -1;
		c->w_in = (struct watch){ W_CMD_IN, c };
		if (hutch_sup_watch(s, c->in_fd, EPOLLOUT, &c->w_in) < 0) {
			r = hutch_err_set_errno(err, -errno, "watch stdin");
			goto fail;
		}
	}
	if (flags & HUTCH_CMD_OPEN_STDIN) {
		c->in_fd = in[1];
		in[1] = -1;
	}
	if (timeout > 0 && arm_timer(c, timeout) < 0) {
		r = hutch_err_set_errno(err, -errno, "arm timeout");
		goto fail;
	}
	/* Before the send: init may run the whole command before this
	 * process is scheduled again. */
	c->started = hutch_now_mono_sec();
	{
		int fds[3] = { in[0], out[1], errp[1] };
		r = hutch_proto_send(s->init_sock, HUTCH_MSG_SPAWN, c->id, body, (size_t)len, fds,
		                     3);
		if (r < 0) {
			hutch_err_set_errno(err, r, "send command to sandbox init");
			goto fail;
		}
	}
	close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	close(out[1]);
	close(errp[1]);
	c->state = CMD_SPAWNING;
	return c;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0 && in[i] != c->in_fd)
			close(in[i]);
		if (out[i] >= 0 && out[i] != c->out_fd)
			close(out[i]);
		if (errp[i] >= 0 && errp[i] != c->err_fd)
			close(errp[i]);
	}
	cmd_free(c);
	return NULL;
}

void hutch_cmd_orphan(struct cmd *c)
{
	c->req = NULL;
	if (c->state == CMD_DONE) {
		cmd_free(c);
		return;
	}
	/* The client hung up: its command dies with the request. */
	c->killed_by_client = true;
	if (c->conn_fd >= 0) {
		hutch_sup_unwatch(c->sup, c->conn_fd);
		c->conn_fd = -EBADF;
	}
	send_kill(c, SIGKILL);
}

static const char *signal_name(int sig)
{
	static char buf[16];
	const char *abbrev = sigabbrev_np(sig);

	if (!abbrev)
		return NULL;
	snprintf(buf, sizeof(buf), "SIG%s", abbrev);
	return buf;
}

static void add_output(cJSON *o, const char *key, struct hutch_buf *b)
{
	_cleanup_free_ char *clean = hutch_utf8_sanitize(b->data ? b->data : "", b->len, NULL);
	char tkey[32];

	cJSON_AddStringToObject(o, key, clean ? clean : "");
	snprintf(tkey, sizeof(tkey), "%s_truncated", key);
	cJSON_AddBoolToObject(o, tkey, b->truncated);
}

cJSON *hutch_cmd_result_json(struct cmd *c, bool with_output)
{
	cJSON *o = cJSON_CreateObject();
	const char *status = "exited";
	char msg[128] = "";

	if (!o)
		return NULL;
	if (c->timed_out) {
		status = "timed_out";
		snprintf(msg, sizeof(msg),
		         "timed out after %g s: the command and its children were killed",
		         c->timeout);
	} else if (c->oom_killed) {
		status = "oom_killed";
		snprintf(msg, sizeof(msg),
		         "killed: out of memory (limit %llu MiB of instance type %s)",
		         (unsigned long long)(c->sup->cfg->type->memory_bytes >> 20),
		         c->sup->cfg->type->name);
	} else if (WIFSIGNALED(c->status)) {
		status = "signaled";
		snprintf(msg, sizeof(msg), "killed by signal %d (%s)", WTERMSIG(c->status),
		         signal_name(WTERMSIG(c->status)) ?: "?");
	}
	cJSON_AddStringToObject(o, "status", status);
	if (WIFEXITED(c->status) && !c->timed_out)
		cJSON_AddNumberToObject(o, "exit_code", WEXITSTATUS(c->status));
	else
		cJSON_AddNullToObject(o, "exit_code");
	if (WIFSIGNALED(c->status)) {
		cJSON_AddNumberToObject(o, "signal", WTERMSIG(c->status));
		cJSON_AddStringToObject(o, "signal_name", signal_name(WTERMSIG(c->status)) ?: "");
	} else {
		cJSON_AddNullToObject(o, "signal");
		cJSON_AddNullToObject(o, "signal_name");
	}
	cJSON_AddBoolToObject(o, "timed_out", c->timed_out);
	cJSON_AddBoolToObject(o, "oom_killed", c->oom_killed);
	if (*msg)
		cJSON_AddStringToObject(o, "message", msg);
	cJSON_AddNumberToObject(o, "duration_ms", round(c->duration * 1e6) / 1e3);
	if (with_output) {
		add_output(o, "stdout", &c->out);
		add_output(o, "stderr", &c->err);
	}
	return o;
}

static void on_cmd_event(struct sup *s, struct watch *w, uint32_t events)
{
	struct cmd *c = w->ptr;
	uint64_t ticks;

	switch (w->kind) {
	case W_CMD_OUT:
		if (!drain_pipe(c, &c->out_fd, false) || c->streaming)
			if (c->req && c->streaming)
				hutch_api_cmd_event(c);
		break;
	case W_CMD_ERR:
		if (!drain_pipe(c, &c->err_fd, true) || c->streaming)
			if (c->req && c->streaming)
				hutch_api_cmd_event(c);
		break;
	case W_CMD_IN:
		write_stdin(c);
		break;
	case W_CMD_TIMER:
		(void)!read(c->timer_fd, &ticks, sizeof(ticks));
		close_watched(s, &c->timer_fd);
		if (c->state != CMD_DONE && !c->exited) {
			c->timed_out = true;
			send_kill(c, SIGKILL);
		}
		break;
	case W_CMD_CONN:
		if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
			hutch_sup_unwatch(s, c->conn_fd);
			c->conn_fd = -EBADF;
			c->killed_by_client = true;
			send_kill(c, SIGKILL);
		}
		break;
	default:
		break;
	}
}

void hutch_cmd_free(struct cmd *c)
{
	cmd_free(c);
}

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
	for (struct cmd *c = s->cmds, *next; c; c = next) {
		next = c->next;
		if (c->state != CMD_DONE) {
			c->exited = true;
			if (c->state == CMD_SPAWNING || c->status == 0)
				c->status = SIGKILL;
			maybe_done(c);
		}
	}
	s->state = SUP_GONE;
	hutch_hooks_sandbox_ended(s);
	hutch_api_sandbox_ended(s);
}

static void on_signal(struct sup *s)
{
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
	unsigned running = 0;

	if (!o)
		return NULL;
	for (struct cmd *c = s->cmds; c; c = c->next)
		if (c->state != CMD_DONE)
			running++;
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

static int setup_loop(struct sup *s)
{
	struct itimerspec its = { 0 };
	sigset_t mask;

	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return -errno;
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
	s->w_signal = (struct watch){ W_SIGNAL, s };
	s->w_ttl = (struct watch){ W_TTL, s };
	s->w_init = (struct watch){ W_INIT, s };
	s->w_pidfd = (struct watch){ W_PIDFD, s };
	if (hutch_sup_watch(s, s->sigfd, EPOLLIN, &s->w_signal) < 0 ||
	    hutch_sup_watch(s, s->ttl_fd, EPOLLIN, &s->w_ttl) < 0 ||
	    hutch_sup_watch(s, s->init_sock, EPOLLIN, &s->w_init) < 0 ||
	    hutch_sup_watch(s, s->pidfd, EPOLLIN, &s->w_pidfd) < 0 || hutch_api_watch(s) < 0)
		return -errno;
	s->net.w = (struct watch){ W_NET, s };
	if (s->net.egress &&
	    hutch_sup_watch(s, hutch_egress_fd(s->net.egress), EPOLLIN, &s->net.w) < 0)
		return -errno;
	return 0;
}

int hutch_sup_run(struct sup *s)
{
	struct epoll_event evs[64];
	int64_t gone_ms = 0;
	int r;

	r = setup_loop(s);
	if (r < 0) {
		end_sandbox(s, "crashed");
		hutch_sup_teardown_finish(s);
		return r;
	}
	s->last_request_ms = hutch_now_mono_ms();
	hutch_hooks_begin(s); /* setup script, on_create, then "ready" to the CLI */
	for (;;) {
		int n, timeout = hutch_api_timeout_ms(s);

		if (s->state == SUP_GONE && s->nconnections == 0 && !s->delete_pending)
			break;
		if (s->state == SUP_GONE && !gone_ms)
			gone_ms = hutch_now_mono_ms();
		if (gone_ms && hutch_now_mono_ms() - gone_ms > GONE_LINGER_MS)
			break; /* a client that does not read its last answer */
		if (s->state == SUP_GONE && (timeout < 0 || timeout > 50))
			timeout = 50; /* finishing the last responses */
		n = epoll_wait(s->epfd, evs, (int)ELEMENTSOF(evs), timeout);
		if (n < 0 && errno != EINTR)
			return -errno;
		/* Idle for a while once gone: only idle keep-alive connections
		 * are left. A zero timeout is libmicrohttpd asking to run again
		 * (e.g. to end a resumed event stream), not idleness. */
		if (n == 0 && timeout > 0 && s->state == SUP_GONE && !s->delete_pending)
			break;
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			switch (w->kind) {
			case W_MHD:
				break;
			case W_INIT:
				on_init_message(s);
				break;
			case W_FILE_PIPE:
				hutch_api_files_event(w, evs[i].events);
				break;
			case W_NET:
				hutch_egress_run(s->net.egress); /* NULL once torn down */
				break;
			case W_PIDFD:
				hutch_sup_unwatch(s, s->pidfd);
				/* init died without being asked to */
				if (s->state == SUP_RUNNING)
					end_sandbox(s, "crashed");
				else if (s->hooks.end_reason)
					hutch_hooks_on_deadline(s); /* on_destroy cannot finish */
				break;
			case W_SIGNAL:
				on_signal(s);
				break;
			case W_IDLE:
				hutch_idle_on_timer(s);
				break;
			case W_HOOK:
				hutch_hooks_on_deadline(s);
				break;
			case W_TTL:
				hutch_sup_unwatch(s, s->ttl_fd);
				end_sandbox(s, "expired");
				break;
			default:
				if (!((struct cmd *)w->ptr)->retired)
					on_cmd_event(s, w, evs[i].events);
				break;
			}
		}
		free_graveyard(s);
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
		/* The kernel's share of the teardown once every DELETE /
		 * has its answer (libmicrohttpd sent it whole). */
		if (s->end.finish_pending && !s->waiters)
			hutch_sup_teardown_finish(s);
	}
	if (s->end.finish_pending)
		hutch_sup_teardown_finish(s);
	hutch_api_stop(s);
	free_graveyard(s);
	return 0;
}
