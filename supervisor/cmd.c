/* SPDX-License-Identifier: Apache-2.0 */
/* The command engine; see cmd.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base64.h"
#include "cgroup.h"
#include "changes-format.h"
#include "cleanup.h"
#include "cmd.h"
#include "config.h"
#include "fdutil.h"
#include "frame.h"
#include "proto.h"
#include "util.h"

static void cmd_freed(struct hutch_deferred *d)
{
	free((struct cmd *)((char *)d - offsetof(struct cmd, dfree)));
}

/* Unlink the command, close its fds, and free it after the loop's batch,
 * whose later events may still point at it. */
static void cmd_free(struct cmd *c)
{
	struct hutch_cmds *set = c->set;

	for (struct cmd **pp = &set->list; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	hutch_loop_close(set->loop, &c->w_out, &c->out_fd);
	hutch_loop_close(set->loop, &c->w_err, &c->err_fd);
	hutch_loop_close(set->loop, &c->w_in, &c->in_fd);
	hutch_loop_close(set->loop, &c->w_timer, &c->timer_fd);
	free(c->stdin_data);
	hutch_buf_done(&c->out);
	hutch_buf_done(&c->err);
	cJSON_Delete(c->changes);
	c->changes = NULL;
	cJSON_Delete(c->egress);
	c->egress = NULL;
	if (c->hook_ref)
		set->hook->put(c->hook_ref);
	c->hook_ref = NULL;
	hutch_loop_defer(set->loop, &c->dfree, cmd_freed);
}

void hutch_cmd_kill(struct cmd *c, int sig, unsigned flags)
{
	struct hutch_msg_kill k = { .signal = sig, .flags = flags };

	if (c->state == CMD_SPAWNING)
		c->kill_on_start = true; /* SIGKILL once it has started */
	if (c->state == CMD_RUNNING && !c->set->init_dead)
		(void)hutch_proto_send(c->set->init_sock, HUTCH_MSG_KILL, c->id, &k, sizeof(k),
		                       NULL, 0);
}

void hutch_cmd_release(struct cmd *c)
{
	c->sink = (struct hutch_cmd_sink){ 0 };
	c->released = true;
	if (c->state == CMD_DONE) {
		cmd_free(c);
		return;
	}
	c->kill_on_start = true;
	hutch_cmd_kill(c, SIGKILL, 0);
	hutch_cmd_resume_output(c); /* nobody will read it: drain to the end */
}

static void pause_output(struct cmd *c, bool pause)
{
	uint32_t ev = pause ? 0 : EPOLLIN;

	if (c->out_paused == pause)
		return;
	c->out_paused = pause;
	c->out_was_paused |= pause;
	(void)hutch_loop_mod(c->set->loop, &c->w_out, ev);
	(void)hutch_loop_mod(c->set->loop, &c->w_err, ev);
}

void hutch_cmd_resume_output(struct cmd *c)
{
	pause_output(c, false);
}

static void capture(struct cmd *c, bool is_err, const char *buf, size_t n)
{
	if (c->capture == HUTCH_CAPTURE_TAIL)
		hutch_buf_append_tail(&c->out, buf, n);
	else
		(void)hutch_buf_append(is_err ? &c->err : &c->out, buf, n);
}

/* Read what is available on one output pipe; returns false at EOF. */
static bool drain_pipe(struct cmd *c, bool is_err)
{
	int *fd = is_err ? &c->err_fd : &c->out_fd;
	struct hutch_watch *w = is_err ? &c->w_err : &c->w_out;
	char buf[65536];
	ssize_t m = 0;

	while (c->sink.move && (m = c->sink.move(c->sink.ud, c, is_err, *fd)) > 0)
		;
	if (m == -EAGAIN)
		return true;
	if (m == -ENOBUFS && !c->exited) {
		pause_output(c, true);
		return true;
	}
	for (;;) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			hutch_loop_close(c->set->loop, w, fd);
			return false;
		}
		if (!c->sink.output) {
			if (!c->released)
				capture(c, is_err, buf, (size_t)n);
			continue;
		}
		if (!c->sink.output(c->sink.ud, c, is_err, buf, (size_t)n) && !c->exited) {
			pause_output(c, true);
			return true;
		}
	}
}

/* Died of SIGKILL, or exited as a shell does when its child died of it
 * (128 + 9): `sh -c 'python3 ...'` waits for python3 and reports 137. */
static bool killed_by_sigkill(int status)
{
	return (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
	       (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
}

/* Every OOM victim dies of SIGKILL: the first such death to see the
 * cgroup's counter move claims the kill. Read here, not at each spawn, to
 * keep file reads off the exec path. */
static void check_oom(struct cmd *c)
{
	uint64_t now = 0;

	if (!killed_by_sigkill(c->status) || !c->set->cg || c->timed_out)
		return;
	if (hutch_cgroup_oom_kills(c->set->cg, &now) == 0 && now > c->set->oom_seen) {
		c->oom_killed = true;
		c->set->oom_seen = now;
	}
}

static void maybe_done(struct cmd *c)
{
	struct hutch_loop *loop = c->set->loop;

	if (c->state == CMD_DONE || !c->exited)
		return;
	/* init reported the exit: everything the command wrote is in the
	 * pipes. Later writers (background children) are cut off. A paused
	 * consumer gets the rest now: the pipes close here. */
	if (c->out_fd >= 0)
		drain_pipe(c, false);
	if (c->err_fd >= 0)
		drain_pipe(c, true);
	hutch_loop_close(loop, &c->w_out, &c->out_fd);
	hutch_loop_close(loop, &c->w_err, &c->err_fd);
	hutch_loop_close(loop, &c->w_in, &c->in_fd);
	hutch_loop_close(loop, &c->w_timer, &c->timer_fd);
	c->duration = hutch_now_mono_sec() - c->started;
	check_oom(c);
	c->state = CMD_DONE;
	c->set->last_done_ms = hutch_now_mono_ms();
	if (c->hook_ref)
		c->set->hook->done(c->hook_ref, c);
	c->hook_ref = NULL;
	if (c->released)
		cmd_free(c);
	else if (c->sink.done)
		c->sink.done(c->sink.ud, c);
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
	hutch_loop_close(c->set->loop, &c->w_in, &c->in_fd);
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

static struct cmd *find_cmd(struct hutch_cmds *set, uint64_t id)
{
	for (struct cmd *c = set->list; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* A tty command's master (from init, hostile like every message): stdout
 * and, through a copy, stdin. */
static int take_master(struct cmd *c, int fd)
{
	if (fd < 0)
		return -EBADMSG;
	(void)hutch_fd_nonblock(fd, true);
	c->in_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (c->in_fd < 0) {
		close(fd);
		return -errno;
	}
	c->out_fd = fd;
	return hutch_loop_add(c->set->loop, &c->w_out, c->out_fd, c->out_paused ? 0 : EPOLLIN);
}

static void on_spawned(struct cmd *c, const struct hutch_msg_spawned *m, int fd)
{
	int r = 0;

	if (c->tty && m->error >= 0 && m->pid > 0)
		r = take_master(c, fd);
	else if (fd >= 0)
		close(fd); /* not asked for */
	if (m->error < 0 || m->pid <= 0 || r < 0) {
		if (m->pid > 0) { /* started, but unusable: it must not run */
			c->pid = m->pid;
			c->state = CMD_RUNNING;
			hutch_cmd_kill(c, SIGKILL, 0);
		}
		cmd_fail_spawn(c, m->error < 0 ? m->error : r < 0 ? r : -EIO);
		return;
	}
	c->pid = m->pid;
	c->state = CMD_RUNNING;
	if (c->sink.spawned)
		c->sink.spawned(c->sink.ud, c);
	if (c->kill_on_start)
		hutch_cmd_kill(c, SIGKILL, 0);
}

/* init's messages are hostile input: sizes are checked, unknown ids and
 * out-of-order messages are dropped. */
static void on_init_message(struct hutch_watch *w, uint32_t events)
{
	struct hutch_cmds *set = w->ptr;

	for (;;) {
		struct hutch_msg_hdr hdr;
		/* EXITED carries the change list (changes-format.h) */
		static union {
			struct hutch_msg_spawned spawned;
			struct hutch_msg_exited exited;
			char raw[sizeof(struct hutch_msg_exited) + HUTCH_CHANGES_MAX_BYTES];
		} body;
		int fd = -EBADF;
		size_t nfds = 1;
		ssize_t n = hutch_proto_recv(set->init_sock, &hdr, &body, sizeof(body), &fd, &nfds);
		struct cmd *c;
		bool spawned;

		if (nfds == 0 || n < 0)
			fd = -EBADF; /* none, or closed by hutch_proto_recv() */
		if (n == -EAGAIN)
			return;
		if (n == -EBADMSG && hdr.type == HUTCH_MSG_CONNECTED && set->on_message) {
			/* Its fd was lost (out of fds: MSG_CTRUNC): the waiting
			 * connection must not wait forever. */
			set->on_message(set->on_message_ud, hdr.type, hdr.id, NULL, 0, -EBADF);
			continue;
		}
		if (n == -EBADMSG)
			continue; /* hostile or broken message: ignore it */
		if (n < 0 || (n == 0 && hdr.type == 0)) {
			hutch_loop_del(set->loop, &set->w_init);
			return; /* init is gone; the pidfd tells the rest */
		}
		if (hdr.type == HUTCH_MSG_CONNECTED) {
			if (set->on_message)
				set->on_message(set->on_message_ud, hdr.type, hdr.id, &body,
				                (size_t)n, fd);
			else if (fd >= 0)
				close(fd);
			continue;
		}
		c = find_cmd(set, hdr.id);
		spawned = c && c->state == CMD_SPAWNING && hdr.type == HUTCH_MSG_SPAWNED &&
		          n == sizeof(body.spawned);
		if (!spawned && fd >= 0)
			close(fd); /* an fd comes only with SPAWNED */
		if (!c || c->state == CMD_DONE)
			continue;
		if (spawned) {
			on_spawned(c, &body.spawned, fd);
		} else if (hdr.type == HUTCH_MSG_EXITED && n >= (ssize_t)sizeof(body.exited) &&
		           c->state == CMD_RUNNING) {
			if (set->before_exit)
				set->before_exit(set->before_exit_ud, c);
			c->status = body.exited.status;
			if (n > (ssize_t)sizeof(body.exited) && !c->changes)
				c->changes = hutch_changes_to_json(body.raw + sizeof(body.exited),
				                                   (size_t)n - sizeof(body.exited));
			c->exited = true;
			maybe_done(c);
		}
	}
}

int hutch_cmds_init(struct hutch_cmds *set, struct hutch_loop *loop, int init_sock,
                    struct hutch_cgroup *cg, const struct hutch_instance_type *type)
{
	*set = (struct hutch_cmds){ .loop = loop, .init_sock = init_sock, .cg = cg, .type = type };
	hutch_watch_init(&set->w_init, on_init_message, set);
	return hutch_loop_add(loop, &set->w_init, init_sock, EPOLLIN);
}

static void on_output(struct hutch_watch *w, uint32_t events)
{
	struct cmd *c = w->ptr;
	bool is_err = w == &c->w_err;

	/* Watched for EPOLLIN and hung up without it: the pipe is empty (it
	 * reports EPOLLIN while it holds a byte) and no writer is left. Its
	 * end, without the FIONREAD and the read() that would say so: two
	 * syscalls per pipe of every command (issue 31). A paused pipe is not
	 * watched for EPOLLIN, so its EPOLLHUP says nothing of its bytes (and
	 * one resumed in this batch may have been paused at the epoll_wait():
	 * a command whose output ever paused keeps the long way). */
	if (!c->out_was_paused && (events & (EPOLLIN | EPOLLHUP)) == EPOLLHUP) {
		hutch_loop_close(c->set->loop, w, is_err ? &c->err_fd : &c->out_fd);
		return;
	}
	drain_pipe(c, is_err);
}

static void on_stdin(struct hutch_watch *w, uint32_t events)
{
	write_stdin(w->ptr);
}

static void on_timeout(struct hutch_watch *w, uint32_t events)
{
	struct cmd *c = w->ptr;
	uint64_t ticks;

	(void)!read(c->timer_fd, &ticks, sizeof(ticks));
	hutch_loop_close(c->set->loop, &c->w_timer, &c->timer_fd);
	if (c->state != CMD_DONE && !c->exited) {
		c->timed_out = true;
		hutch_cmd_kill(c, SIGKILL, 0);
	}
}

static int make_pipe(int fds[2], bool read_nonblock, bool write_nonblock)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	/* A new pipe's status flags are its access mode only (which F_SETFL
	 * ignores): set O_NONBLOCK without reading them first (F_GETFL), one
	 * syscall per pipe of every exec and run (issue 31). */
	if (read_nonblock)
		(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
	if (write_nonblock)
		(void)fcntl(fds[1], F_SETFL, O_NONBLOCK);
	return 0;
}

static int arm_timer(struct cmd *c, double seconds)
{
	struct itimerspec its = { 0 };

	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timer_fd < 0)
		return -errno;
	its.it_value.tv_sec = (time_t)seconds;
	its.it_value.tv_nsec = (long)((seconds - (double)its.it_value.tv_sec) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(c->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	return hutch_loop_add(c->set->loop, &c->w_timer, c->timer_fd, EPOLLIN);
}

static struct cmd *cmd_new(struct hutch_cmds *set, const struct hutch_spawn *sp,
                           const struct hutch_cmd_sink *sink)
{
	struct cmd *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (set->before_start)
		set->before_start(set->before_exit_ud);
	c->set = set;
	c->id = ++set->next_id;
	c->out_fd = c->err_fd = c->in_fd = c->timer_fd = -EBADF;
	if (set->hook && set->hook_ud)
		c->hook_ref = set->hook->attach(set->hook_ud, c->id, sp);
	hutch_watch_init(&c->w_out, on_output, c);
	hutch_watch_init(&c->w_err, on_output, c);
	hutch_watch_init(&c->w_in, on_stdin, c);
	hutch_watch_init(&c->w_timer, on_timeout, c);
	c->timeout = sp->timeout;
	c->capture = sp->capture;
	c->tty = sp->tty;
	if (sink)
		c->sink = *sink;
	hutch_buf_init(&c->out, sp->max_output);
	hutch_buf_init(&c->err, sp->max_output);
	c->next = set->list;
	set->list = c;
	return c;
}

/* The pipes and watches of a new command; the ends for init stay in
 * child[] (stdin's read end, stdout's and stderr's write ends). */
static int cmd_pipes(struct cmd *c, const struct hutch_spawn *sp, int child[3],
                     struct hutch_err *err)
{
	struct hutch_loop *loop = c->set->loop;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };

	if (make_pipe(in, false, true) < 0 || make_pipe(out, true, false) < 0 ||
	    make_pipe(errp, true, false) < 0) {
		int r = -errno;
		hutch_close_many(in, 2);
		hutch_close_many(out, 2);
		hutch_close_many(errp, 2);
		return hutch_err_set_errno(err, r, "create pipes");
	}
	child[0] = in[0], child[1] = out[1], child[2] = errp[1];
	if (sp->pipe_size) { /* fewer wakeups per byte; a failure keeps the default */
		(void)fcntl(in[1], F_SETPIPE_SZ, (int)sp->pipe_size);
		(void)fcntl(out[0], F_SETPIPE_SZ, (int)sp->pipe_size);
		(void)fcntl(errp[0], F_SETPIPE_SZ, (int)sp->pipe_size);
	}
	c->out_fd = out[0];
	c->err_fd = errp[0];
	c->in_fd = in[1];
	if (hutch_loop_add(loop, &c->w_out, c->out_fd, EPOLLIN) < 0 ||
	    hutch_loop_add(loop, &c->w_err, c->err_fd, EPOLLIN) < 0)
		return hutch_err_set_errno(err, -errno, "watch pipes");
	if (sp->stdin_len > 0) {
		c->stdin_data = malloc(sp->stdin_len);
		if (!c->stdin_data)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		memcpy(c->stdin_data, sp->stdin_data, sp->stdin_len);
		c->stdin_len = sp->stdin_len;
		if (hutch_loop_add(loop, &c->w_in, c->in_fd, EPOLLOUT) < 0)
			return hutch_err_set_errno(err, -errno, "watch stdin");
	} else if (!sp->stdin_open) {
		close(c->in_fd); /* EOF at once */
		c->in_fd = -EBADF;
	}
	return 0;
}

/* The command's 3, 4, ... (proto.h HUTCH_SPAWN_EXTRA_FDS), after stdio's
 * in child[]: copies for the message. */
static int dup_extra_fds(const struct hutch_spawn *sp, int *child, size_t *nchild,
                         struct hutch_err *err)
{
	if (sp->nextra_fds > HUTCH_SPAWN_MAX_EXTRA_FDS)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "more than %d fds for the command",
		                           HUTCH_SPAWN_MAX_EXTRA_FDS);
	for (size_t i = 0; i < sp->nextra_fds; i++) {
		child[*nchild] = fcntl(sp->extra_fds[i], F_DUPFD_CLOEXEC, 3);
		if (child[(*nchild)++] < 0)
			return hutch_err_set_errno(err, -errno, "the command's fd %zu", 3 + i);
	}
	return 0;
}

/* SPAWN's body for sp in *body; its length, or fills err. */
static ssize_t spawn_encode(const struct hutch_spawn *sp, char **body, struct hutch_err *err)
{
	ssize_t len = hutch_proto_spawn_encode(sp->argv, sp->envp, sp->cwd, body);

	if (len == -E2BIG)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "command and environment are larger than %u bytes: "
		                           "write the script to a file and run the file",
		                           HUTCH_PROTO_MAX - 4096);
	if (len < 0)
		return hutch_err_set_errno(err, (int)len, "encode command");
	return len;
}

/* The spawn request to init. init's end closed means init has died and
 * the loop has not yet seen it (its pidfd's event comes after this
 * request's in the same wake-up): the sandbox is ending, as the API
 * answers once it has seen it (410), not an engine failure. */
static int send_spawn(struct hutch_cmds *set, uint64_t id, const char *body, size_t len,
                      const int *child, size_t nchild, struct hutch_err *err)
{
	int r = hutch_proto_send(set->init_sock, HUTCH_MSG_SPAWN, id, body, len,
	                         nchild ? child : NULL, nchild);

	if (r == -EPIPE || r == -ECONNRESET)
		return hutch_err_set_class(err, HUTCH_ERRC_GONE, r,
		                           "the sandbox is ending: its init has exited "
		                           "(create a new sandbox)");
	if (r < 0)
		return hutch_err_set_errno(err, r, "send command to sandbox init");
	return 0;
}

static struct cmd *cmd_start(struct hutch_cmds *set, const struct hutch_spawn *sp,
                             const struct hutch_cmd_sink *sink, struct hutch_err *err)
{
	uint32_t spawn_flags = (sp->builtin ? HUTCH_SPAWN_BUILTIN : 0) |
	                       (sp->extra_filter ? HUTCH_SPAWN_EXTRA_FILTER : 0) |
	                       (sp->held_tty ? HUTCH_SPAWN_TTY | HUTCH_SPAWN_HELD_TTY : 0) |
	                       (sp->main ? HUTCH_SPAWN_MAIN : 0);
	_cleanup_free_ char *body = NULL;
	int child[HUTCH_PROTO_FDS_MAX];
	size_t nchild = sp->tty || sp->held_tty ? 0 : 3;
	struct cmd *c;
	ssize_t len;
	int r;

	for (size_t i = 0; i < HUTCH_PROTO_FDS_MAX; i++)
		child[i] = -1;
	if (sp->nextra_fds)
		spawn_flags |= HUTCH_SPAWN_EXTRA_FDS;

	len = spawn_encode(sp, &body, err);
	if (len < 0)
		return NULL;
	if (sp->tty) {
		uint32_t ws = (uint32_t)sp->rows << 16 | sp->cols;

		spawn_flags |= HUTCH_SPAWN_TTY;
		memcpy(body + offsetof(struct hutch_msg_spawn, winsize), &ws, sizeof(ws));
	}
	memcpy(body + offsetof(struct hutch_msg_spawn, flags), &spawn_flags, sizeof(spawn_flags));
	if (sp->set_ids) {
		memcpy(body + offsetof(struct hutch_msg_spawn, uid), &sp->uid, sizeof(sp->uid));
		memcpy(body + offsetof(struct hutch_msg_spawn, gid), &sp->gid, sizeof(sp->gid));
		memcpy(body + offsetof(struct hutch_msg_spawn, caps), sp->caps, sizeof(sp->caps));
		memcpy(body + offsetof(struct hutch_msg_spawn, ngroups), &sp->ngroups,
		       sizeof(sp->ngroups));
		memcpy(body + offsetof(struct hutch_msg_spawn, groups), sp->groups,
		       sizeof(sp->groups));
	}
	c = cmd_new(set, sp, sink);
	if (!c)
		return hutch_err_set(err, -ENOMEM, "out of memory"), NULL;
	/* A tty's master comes with SPAWNED. */
	if (sp->held_tty) {
		r = 0; /* no fd: its terminal is the one init holds */
	} else if (sp->stdio_fds && !sp->tty) {
		for (int i = 0; i < 3; i++) {
			child[i] = fcntl(sp->stdio_fds[i], F_DUPFD_CLOEXEC, 3);
			if (child[i] < 0) {
				r = hutch_err_set_errno(err, -errno, "the command's stdio");
				hutch_close_many(child, 3);
				cmd_free(c);
				return NULL;
			}
		}
		r = 0;
	} else {
		r = sp->tty ? 0 : cmd_pipes(c, sp, child, err);
	}
	if (r >= 0)
		r = dup_extra_fds(sp, child, &nchild, err);
	if (r >= 0 && sp->timeout > 0 && arm_timer(c, sp->timeout) < 0)
		r = hutch_err_set_errno(err, -errno, "arm timeout");
	/* Before the send: init may run the whole command before this
	 * process is scheduled again. */
	c->started = hutch_now_mono_sec();
	if (r >= 0)
		r = send_spawn(set, c->id, body, (size_t)len, child, nchild, err);
	hutch_close_many(child, HUTCH_PROTO_FDS_MAX);
	if (r < 0) {
		cmd_free(c);
		return NULL;
	}
	c->state = CMD_SPAWNING;
	return c;
}

struct cmd *hutch_cmd_start(struct hutch_cmds *set, const struct hutch_spawn *sp,
                            const struct hutch_cmd_sink *sink, struct hutch_err *err)
{
	struct cmd *c = cmd_start(set, sp, sink, err);

	/* A failure that is no bound of the command's (its pipes, its fds,
	 * init's socket) is the engine's own, whatever its errno says. */
	if (!c && err->cls == HUTCH_ERRC_NONE)
		err->cls = HUTCH_ERRC_INTERNAL;
	return c;
}

int hutch_cmd_take_stdin(struct cmd *c)
{
	int fd = c->in_fd;

	hutch_loop_del(c->set->loop, &c->w_in);
	c->in_fd = -EBADF;
	return fd >= 0 ? fd : -EBADF;
}

int hutch_cmd_take_stdout(struct cmd *c)
{
	int fd = c->out_fd;

	hutch_loop_del(c->set->loop, &c->w_out);
	c->out_fd = -EBADF;
	return fd >= 0 ? fd : -EBADF;
}

void hutch_cmd_hold_fd(struct cmd *c, int fd)
{
	hutch_loop_close(c->set->loop, &c->w_in, &c->in_fd);
	c->in_fd = fd;
}

unsigned hutch_cmds_running(const struct hutch_cmds *set)
{
	unsigned n = 0;

	for (const struct cmd *c = set->list; c; c = c->next)
		if (c->state != CMD_DONE)
			n++;
	return n;
}

void hutch_cmds_set_hook(struct hutch_cmds *set, const struct hutch_cmd_hook *hook, void *ud)
{
	set->hook = hook;
	set->hook_ud = ud;
}

void hutch_cmds_on_message(struct hutch_cmds *set,
                           void (*fn)(void *ud, uint32_t type, uint64_t id, const void *body,
                                      size_t len, int fd),
                           void *ud)
{
	set->on_message = fn;
	set->on_message_ud = ud;
}

void hutch_cmds_init_gone(struct hutch_cmds *set)
{
	set->init_dead = true;
}

void hutch_cmds_finish_all(struct hutch_cmds *set)
{
	set->init_dead = true;
	for (struct cmd *c = set->list, *next; c; c = next) {
		next = c->next;
		if (c->state != CMD_DONE) {
			c->exited = true;
			if (c->state == CMD_SPAWNING || c->status == 0)
				c->status = SIGKILL;
			maybe_done(c);
		}
	}
}

static const char *signal_name(int sig, char *buf, size_t size)
{
	const char *abbrev = sigabbrev_np(sig);

	if (!abbrev)
		return NULL;
	snprintf(buf, size, "SIG%s", abbrev);
	return buf;
}

static void add_output(cJSON *o, const char *key, const struct hutch_buf *b, bool base64)
{
	_cleanup_free_ char *clean =
	        base64 ? hutch_base64_encode(b->data ? b->data : "", b->len)
	               : hutch_utf8_sanitize(b->data ? b->data : "", b->len, NULL);
	char tkey[32];

	cJSON_AddStringToObject(o, key, clean ? clean : "");
	snprintf(tkey, sizeof(tkey), "%s_truncated", key);
	cJSON_AddBoolToObject(o, tkey, b->truncated);
}

static const char *result_status(const struct cmd *c, char *msg, size_t size)
{
	char name[16];

	if (c->timed_out) {
		snprintf(msg, size,
		         "timed out after %g s: the command and its children were killed",
		         c->timeout);
		return "timed_out";
	}
	if (c->oom_killed) {
		snprintf(msg, size, "killed: out of memory (limit %llu MiB of instance type %s)",
		         (unsigned long long)(c->set->type->memory_bytes >> 20),
		         c->set->type->name);
		return "oom_killed";
	}
	if (WIFSIGNALED(c->status)) {
		snprintf(msg, size, "killed by signal %d (%s)", WTERMSIG(c->status),
		         signal_name(WTERMSIG(c->status), name, sizeof(name)) ?: "?");
		return "signaled";
	}
	return "exited";
}

size_t hutch_cmd_result_brief(const struct cmd *c, char *buf, size_t size)
{
	char msg[128] = "";
	struct hutch_frame_result r = { .message = msg };

	(void)result_status(c, msg, sizeof(msg));
	r.message_len = strlen(msg);
	if (WIFEXITED(c->status) && !c->timed_out) {
		r.flags |= HUTCH_FRAME_RESULT_EXITED;
		r.exit_code = (uint8_t)WEXITSTATUS(c->status);
	}
	if (WIFSIGNALED(c->status)) {
		r.flags |= HUTCH_FRAME_RESULT_SIGNAL;
		r.signal = (uint8_t)WTERMSIG(c->status);
	}
	r.flags |= (c->timed_out ? HUTCH_FRAME_RESULT_TIMEOUT : 0) |
	           (c->oom_killed ? HUTCH_FRAME_RESULT_OOM : 0);
	return hutch_frame_result_encode(&r, buf, size);
}

cJSON *hutch_cmd_result_json(const struct cmd *c, unsigned what)
{
	cJSON *o = cJSON_CreateObject();
	char msg[128] = "", name[16];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "status", result_status(c, msg, sizeof(msg)));
	if (WIFEXITED(c->status) && !c->timed_out)
		cJSON_AddNumberToObject(o, "exit_code", WEXITSTATUS(c->status));
	else
		cJSON_AddNullToObject(o, "exit_code");
	if (WIFSIGNALED(c->status)) {
		cJSON_AddNumberToObject(o, "signal", WTERMSIG(c->status));
		cJSON_AddStringToObject(o, "signal_name",
		                        signal_name(WTERMSIG(c->status), name, sizeof(name)) ?: "");
	} else {
		cJSON_AddNullToObject(o, "signal");
		cJSON_AddNullToObject(o, "signal_name");
	}
	cJSON_AddBoolToObject(o, "timed_out", c->timed_out);
	cJSON_AddBoolToObject(o, "oom_killed", c->oom_killed);
	if (*msg)
		cJSON_AddStringToObject(o, "message", msg);
	cJSON_AddNumberToObject(o, "duration_ms", hutch_round(c->duration * 1e6) / 1e3);
	if (c->changes)
		cJSON_AddItemToObject(o, "changes", cJSON_Duplicate(c->changes, true));
	if (c->egress)
		cJSON_AddItemToObject(o, "egress", cJSON_Duplicate(c->egress, true));
	if (what & HUTCH_RESULT_OUTPUT) {
		add_output(o, "stdout", &c->out, what & HUTCH_RESULT_BASE64);
		add_output(o, "stderr", &c->err, what & HUTCH_RESULT_BASE64);
		if (what & HUTCH_RESULT_BASE64)
			cJSON_AddStringToObject(o, "encoding", "base64");
	}
	return o;
}
