/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the supervisor's command engine (supervisor/cmd.c) and of
 * the background processes' bound (supervisor/procs.c), without root: the
 * engine talks to a fake init, the other end of a SOCK_SEQPACKET
 * socketpair held by the test, which reads the SPAWN and KILL messages the
 * engine sends and answers SPAWNED and EXITED as init would (or as a
 * hostile init might). The command's pipes are real: the fake writes its
 * output into the ends that came with SPAWN.
 *
 * No sleeps: the loop is turned until the effect it waits for is seen,
 * with a bound of turns far beyond any load.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd.h"
#include "fdutil.h"
#include "loop.h"
#include "pipe-util.h"
#include "procs.h"
#include "proto.h"
#include "supervisor.h"

/* The most loop turns a test waits for something (each up to 50 ms). */
#define MAX_TURNS 2000

struct env {
	struct sup *s; /* its loop and command engine are the ones tested */
	int init;      /* the fake init's end */
	/* what the sink saw */
	int spawned, done;
	pid_t spawned_pid;
};

/* One message the engine sent to init. */
struct msg {
	struct hutch_msg_hdr hdr;
	ssize_t n;
	int fds[HUTCH_PROTO_FDS_MAX];
	size_t nfds;
	char body[64 * 1024];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	int sv[2];

	assert_non_null(e);
	e->s = calloc(1, sizeof(*e->s));
	assert_non_null(e->s);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(hutch_fd_nonblock(sv[0], true), 0);
	assert_int_equal(hutch_loop_init(&e->s->loop), 0);
	assert_int_equal(hutch_cmds_init(&e->s->cmds, &e->s->loop, sv[0], NULL, NULL), 0);
	e->s->init_sock = sv[0];
	e->init = sv[1];
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	hutch_procs_free(e->s);
	/* init is gone: whatever still runs ends, and is freed by the loop */
	hutch_cmds_finish_all(&e->s->cmds);
	for (struct cmd *c = e->s->cmds.list, *next; c; c = next) {
		next = c->next;
		hutch_cmd_release(c);
	}
	hutch_loop_del(&e->s->loop, &e->s->cmds.w_init);
	hutch_loop_done(&e->s->loop);
	close(e->s->init_sock);
	close(e->init);
	free(e->s);
	free(e);
	return 0;
}

/* A message from the engine is waiting for the fake init. */
static bool init_readable(struct env *e)
{
	struct pollfd p = { .fd = e->init, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* Turn the loop until cond holds; fails the test past MAX_TURNS. */
static void run_until(struct env *e, bool (*cond)(struct env *e))
{
	for (int i = 0; i < MAX_TURNS && !cond(e); i++)
		assert_true(hutch_loop_run_once(&e->s->loop, 50) >= 0);
	assert_true(cond(e));
}

static bool is_done(struct env *e)
{
	return e->done > 0;
}

/* The next message the engine sent (it must be there). */
static void init_recv(struct env *e, struct msg *m)
{
	m->nfds = HUTCH_PROTO_FDS_MAX;
	if (!init_readable(e))
		run_until(e, init_readable);
	m->n = hutch_proto_recv(e->init, &m->hdr, m->body, sizeof(m->body), m->fds, &m->nfds);
	assert_true(m->n >= 0);
}

static void msg_close(struct msg *m)
{
	hutch_close_many(m->fds, m->nfds);
	m->nfds = 0;
}

static void init_spawned(struct env *e, uint64_t id, int32_t pid, int32_t error)
{
	struct hutch_msg_spawned sp = { .pid = pid, .error = error };

	assert_int_equal(hutch_proto_send(e->init, HUTCH_MSG_SPAWNED, id, &sp, sizeof(sp), NULL, 0),
	                 0);
}

static void init_exited(struct env *e, uint64_t id, int status)
{
	struct hutch_msg_exited ex = { .status = status };

	assert_int_equal(hutch_proto_send(e->init, HUTCH_MSG_EXITED, id, &ex, sizeof(ex), NULL, 0),
	                 0);
}

static void on_spawned(void *ud, struct cmd *c)
{
	struct env *e = ud;

	e->spawned++;
	e->spawned_pid = c->pid;
}

static void on_done(void *ud, struct cmd *c)
{
	struct env *e = ud;

	e->done++;
}

static struct cmd *start(struct env *e, const struct hutch_spawn *sp)
{
	struct hutch_cmd_sink sink = { .spawned = on_spawned, .done = on_done, .ud = e };
	struct hutch_err err = { 0 };
	struct cmd *c = hutch_cmd_start(&e->s->cmds, sp, &sink, &err);

	assert_non_null(c);
	return c;
}

static const char *const argv_echo[] = { "echo", "hi", NULL };
static const char *const envp_one[] = { "A=1", NULL };

/* SPAWN carries argv, env, cwd and three fds; output written to them is
 * captured; the exit status makes the result. */
static void test_run_captures_output_and_exit(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/workspace", .max_output = 1024
	};
	static struct hutch_spawn_req req;
	struct cmd *c = start(e, &sp);
	struct msg m;
	cJSON *res, *j;

	init_recv(e, &m);
	assert_int_equal(m.hdr.type, HUTCH_MSG_SPAWN);
	assert_int_equal(m.hdr.id, c->id);
	assert_int_equal(m.nfds, 3);
	assert_int_equal(hutch_proto_spawn_decode(m.body, (size_t)m.n, &req), 0);
	assert_int_equal(req.argc, 2);
	assert_string_equal(req.argv[0], "echo");
	assert_string_equal(req.argv[1], "hi");
	assert_int_equal(req.envc, 1);
	assert_string_equal(req.envp[0], "A=1");
	assert_string_equal(req.cwd, "/workspace");
	assert_int_equal(req.flags, 0);
	/* no stdin data: the command reads end of file at once */
	assert_int_equal(read(m.fds[0], m.body, 1), 0);
	assert_int_equal(write(m.fds[1], "hi\n", 3), 3);
	assert_int_equal(write(m.fds[2], "oops", 4), 4);
	msg_close(&m);
	assert_int_equal(c->state, CMD_SPAWNING);
	init_spawned(e, c->id, 42, 0);
	init_exited(e, c->id, 3 << 8);
	run_until(e, is_done);
	assert_int_equal(e->spawned, 1);
	assert_int_equal(e->spawned_pid, 42);
	assert_int_equal(c->state, CMD_DONE);
	assert_true(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 3);
	assert_int_equal(c->out.len, 3);
	assert_memory_equal(c->out.data, "hi\n", 3);
	assert_int_equal(c->err.len, 4);
	assert_memory_equal(c->err.data, "oops", 4);
	assert_int_equal(hutch_cmds_running(&e->s->cmds), 0);
	res = hutch_cmd_result_json(c, HUTCH_RESULT_OUTPUT);
	assert_non_null(res);
	assert_string_equal(cJSON_GetObjectItem(res, "status")->valuestring, "exited");
	assert_int_equal(cJSON_GetObjectItem(res, "exit_code")->valueint, 3);
	assert_string_equal(cJSON_GetObjectItem(res, "stdout")->valuestring, "hi\n");
	j = cJSON_GetObjectItem(res, "timed_out");
	assert_true(cJSON_IsFalse(j));
	cJSON_Delete(res);
	hutch_cmd_release(c);
}

/* Output is drained when init reports the exit, even before the pipes'
 * end of file (a background child may still hold them). */
static void test_exit_drains_pipes_held_open(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/", .max_output = 64
	};
	struct cmd *c = start(e, &sp);
	struct msg m;

	init_recv(e, &m);
	assert_int_equal(write(m.fds[1], "left", 4), 4);
	init_spawned(e, c->id, 7, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done); /* m.fds still open: no EOF */
	assert_int_equal(c->out.len, 4);
	assert_memory_equal(c->out.data, "left", 4);
	/* the engine closed its read ends: a late writer gets EPIPE */
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(write(m.fds[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	msg_close(&m);
	hutch_cmd_release(c);
}

/* Standard input given as data reaches the command, then end of file. */
static void test_stdin_data(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/", .stdin_data = "abc", .stdin_len = 3
	};
	struct cmd *c = start(e, &sp);
	struct msg m;
	char buf[8];
	ssize_t n = 0, r;

	init_recv(e, &m);
	assert_int_equal(hutch_fd_nonblock(m.fds[0], true), 0);
	/* the engine writes when the loop says the pipe has room */
	while ((r = read(m.fds[0], buf + n, sizeof(buf) - (size_t)n)) != 0) {
		if (r < 0) {
			assert_int_equal(errno, EAGAIN);
			assert_true(hutch_loop_run_once(&e->s->loop, 50) >= 0);
			continue;
		}
		n += r;
	}
	assert_int_equal(n, 3);
	assert_memory_equal(buf, "abc", 3);
	msg_close(&m);
	init_spawned(e, c->id, 8, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	hutch_cmd_release(c);
}

/* The timeout: SIGKILL to the command through init, result "timed_out". */
static void test_timeout_kills(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/", .timeout = 0.001
	};
	struct cmd *c = start(e, &sp);
	struct hutch_msg_kill k;
	struct msg m;
	cJSON *res;

	init_recv(e, &m);
	msg_close(&m);
	init_spawned(e, c->id, 9, 0);
	init_recv(e, &m); /* the timer fired: the engine asks init to kill */
	assert_int_equal(m.hdr.type, HUTCH_MSG_KILL);
	assert_int_equal(m.hdr.id, c->id);
	assert_int_equal(m.n, sizeof(k));
	memcpy(&k, m.body, sizeof(k));
	assert_int_equal(k.signal, SIGKILL);
	assert_true(c->timed_out);
	assert_int_equal(e->done, 0);
	init_exited(e, c->id, SIGKILL);
	run_until(e, is_done);
	res = hutch_cmd_result_json(c, 0);
	assert_string_equal(cJSON_GetObjectItem(res, "status")->valuestring, "timed_out");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(res, "exit_code")));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(res, "timed_out")));
	cJSON_Delete(res);
	hutch_cmd_release(c);
}

/* init could not start it: done at once, exit 127, the reason kept. */
static void test_spawn_error(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	struct msg m;

	init_recv(e, &m);
	msg_close(&m);
	init_spawned(e, c->id, 0, -EAGAIN);
	run_until(e, is_done);
	assert_int_equal(e->spawned, 0);
	assert_non_null(c->spawn_error);
	assert_non_null(strstr(c->spawn_error, "init could not start the command"));
	assert_true(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 127);
	hutch_cmd_release(c);
}

/* init's messages are hostile: unknown ids, wrong sizes, an exit before
 * the spawn and an fd nobody asked for change nothing. */
static void test_hostile_messages_ignored(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	struct hutch_msg_spawned sp_short = { .pid = 5 };
	int p[2];
	struct msg m;

	init_recv(e, &m);
	msg_close(&m);
	init_exited(e, c->id, 0);      /* before SPAWNED */
	init_exited(e, c->id + 99, 0); /* nobody's */
	init_spawned(e, c->id + 99, 5, 0);
	assert_int_equal(hutch_proto_send(e->init, HUTCH_MSG_SPAWNED, c->id, &sp_short, 4, NULL, 0),
	                 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(
	        hutch_proto_send(e->init, HUTCH_MSG_EXITED, c->id, &(int64_t){ 0 }, 8, &p[1], 1),
	        0);
	close(p[1]);
	for (int i = 0; i < 20; i++)
		assert_true(hutch_loop_run_once(&e->s->loop, 0) >= 0);
	assert_int_equal(c->state, CMD_SPAWNING);
	assert_int_equal(e->done, 0);
	/* the fd that came with EXITED was closed: its pipe is at its end */
	assert_int_equal(read(p[0], m.body, 1), 0);
	close(p[0]);
	init_spawned(e, c->id, 5, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	assert_int_equal(e->spawned_pid, 5);
	hutch_cmd_release(c);
}

/* A kill asked while init has not said SPAWNED yet goes out as SIGKILL
 * once it has. */
static void test_kill_while_spawning(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	struct hutch_msg_kill k;
	struct msg m;

	init_recv(e, &m);
	msg_close(&m);
	hutch_cmd_kill(c, SIGTERM, 0);
	assert_false(init_readable(e)); /* nothing to kill yet */
	init_spawned(e, c->id, 11, 0);
	init_recv(e, &m);
	assert_int_equal(m.hdr.type, HUTCH_MSG_KILL);
	memcpy(&k, m.body, sizeof(k));
	assert_int_equal(k.signal, SIGKILL);
	/* a kill of a running one carries its signal and flags */
	hutch_cmd_kill(c, SIGTERM, HUTCH_KILL_REST_ON_EXIT);
	init_recv(e, &m);
	memcpy(&k, m.body, sizeof(k));
	assert_int_equal(k.signal, SIGTERM);
	assert_int_equal(k.flags, HUTCH_KILL_REST_ON_EXIT);
	init_exited(e, c->id, SIGKILL);
	run_until(e, is_done);
	hutch_cmd_release(c);
}

static bool none_running(struct env *e)
{
	return hutch_cmds_running(&e->s->cmds) == 0;
}

static bool is_spawned(struct env *e)
{
	return e->spawned > 0;
}

/* The owner lets go of a running command: killed, no more callbacks,
 * freed once init reports its end. */
static void test_release_running(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	uint64_t id = c->id;
	struct hutch_msg_kill k;
	struct msg m;

	init_recv(e, &m);
	msg_close(&m);
	init_spawned(e, id, 12, 0);
	run_until(e, is_spawned);
	hutch_cmd_release(c);
	init_recv(e, &m);
	assert_int_equal(m.hdr.type, HUTCH_MSG_KILL);
	assert_int_equal(m.hdr.id, id);
	memcpy(&k, m.body, sizeof(k));
	assert_int_equal(k.signal, SIGKILL);
	init_exited(e, id, SIGKILL);
	run_until(e, none_running);
	assert_int_equal(e->done, 0);
	assert_null(e->s->cmds.list);
}

/* init died: every command still running ends as killed. */
static void test_init_death_finishes_all(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *a = start(e, &sp), *b = start(e, &sp);
	struct msg m;

	init_recv(e, &m);
	msg_close(&m);
	init_recv(e, &m);
	msg_close(&m);
	init_spawned(e, a->id, 20, 0);
	run_until(e, is_spawned);
	assert_int_equal(hutch_cmds_running(&e->s->cmds), 2);
	hutch_cmds_finish_all(&e->s->cmds);
	assert_int_equal(e->done, 2);
	assert_true(WIFSIGNALED(a->status) && WTERMSIG(a->status) == SIGKILL);
	assert_true(WIFSIGNALED(b->status) && WTERMSIG(b->status) == SIGKILL);
	/* no message goes to a dead init */
	hutch_cmd_kill(a, SIGTERM, 0);
	assert_false(init_readable(e));
	hutch_cmd_release(a);
	hutch_cmd_release(b);
}

/* A command larger than one message is refused before anything starts. */
static void test_too_large(void **state)
{
	struct env *e = *state;
	size_t len = HUTCH_PROTO_MAX;
	char *big = malloc(len + 1);
	const char *argv[] = { "echo", big, NULL };
	struct hutch_spawn sp = { .argv = argv, .envp = envp_one, .cwd = "/" };
	struct hutch_err err = { 0 };

	assert_non_null(big);
	memset(big, 'x', len);
	big[len] = '\0';
	assert_null(hutch_cmd_start(&e->s->cmds, &sp, NULL, &err));
	assert_int_equal(err.code, -E2BIG);
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_LIMIT); /* 413 too_large */
	assert_null(e->s->cmds.list);
	assert_false(init_readable(e));
	free(big);
}

/* Capture bounds: the head of each stream, or the merged tail. */
static void test_capture_bounds(void **state)
{
	struct env *e = *state;
	struct hutch_spawn head = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/", .max_output = 4
	};
	struct hutch_spawn tail = head;
	struct cmd *c;
	struct msg m;

	c = start(e, &head);
	init_recv(e, &m);
	assert_int_equal(write(m.fds[1], "abcdefgh", 8), 8);
	msg_close(&m);
	init_spawned(e, c->id, 30, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	assert_int_equal(c->out.len, 4);
	assert_memory_equal(c->out.data, "abcd", 4);
	assert_true(c->out.truncated);
	assert_int_equal(c->out.total, 8);
	hutch_cmd_release(c);

	e->done = 0;
	tail.capture = HUTCH_CAPTURE_TAIL;
	c = start(e, &tail);
	init_recv(e, &m);
	assert_int_equal(write(m.fds[1], "abcdefgh", 8), 8);
	msg_close(&m);
	init_spawned(e, c->id, 31, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	assert_int_equal(c->out.len, 4);
	assert_memory_equal(c->out.data, "efgh", 4);
	hutch_cmd_release(c);
}

/* The observer (the session journal) sees each command start and end. */
static int hook_attached, hook_done, hook_put;
static void *hook_attach(void *ud, uint64_t id, const struct hutch_spawn *sp)
{
	(void)id;
	assert_non_null(sp->argv);
	hook_attached++;
	return ud;
}
static void hook_end(void *ref, const struct cmd *c)
{
	hook_done++;
}
static void hook_free(void *ref)
{
	hook_put++;
}

static void test_hook_sees_start_and_end(void **state)
{
	static const struct hutch_cmd_hook hook = { hook_attach, hook_end, hook_free };
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c;
	struct msg m;

	hutch_cmds_set_hook(&e->s->cmds, &hook, e);
	c = start(e, &sp);
	hutch_cmds_set_hook(&e->s->cmds, &hook, NULL);
	init_recv(e, &m);
	msg_close(&m);
	assert_int_equal(hook_attached, 1);
	init_spawned(e, c->id, 40, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	assert_int_equal(hook_done, 1);
	hutch_cmd_release(c);
	assert_int_equal(hook_put, 0); /* done() was its end */
}

/* Background processes: at most HUTCH_PROCS_MAX_RUNNING at once; one
 * more may start when one has ended. */
static void test_procs_running_bound(void **state)
{
	struct env *e = *state;
	static const char *const argv[] = { "sleep", "1000", NULL };
	struct hutch_proc *p[HUTCH_PROCS_MAX_RUNNING];
	struct hutch_err err = { 0 };
	struct msg m;

	for (int i = 0; i < HUTCH_PROCS_MAX_RUNNING; i++) {
		p[i] = hutch_proc_start(e->s, "sleep 1000", argv, envp_one, "/", false, &err);
		assert_non_null(p[i]);
		init_recv(e, &m);
		msg_close(&m);
		init_spawned(e, p[i]->cmd->id, 100 + i, 0);
	}
	assert_null(hutch_proc_start(e->s, "sleep 1000", argv, envp_one, "/", false, &err));
	assert_int_equal(err.code, -EAGAIN);
	init_exited(e, p[0]->cmd->id, 0);
	for (int i = 0; i < MAX_TURNS && !p[0]->done; i++)
		assert_true(hutch_loop_run_once(&e->s->loop, 50) >= 0);
	assert_true(p[0]->done);
	assert_int_equal(p[1]->pid, 101);
	assert_non_null(hutch_proc_start(e->s, "sleep 1000", argv, envp_one, "/", false, &err));
	init_recv(e, &m);
	msg_close(&m);
	assert_null(hutch_proc_start(e->s, "sleep 1000", argv, envp_one, "/", false, &err));
	assert_int_equal(err.code, -EAGAIN);
	assert_ptr_equal(hutch_proc_find(e->s, "p1"), p[0]);
	assert_ptr_equal(hutch_proc_find(e->s, p[1]->uuid), p[1]);
}

/* init's answers that are not about commands (CONNECTED: a published
 * port's socket) go to the owner's on_message with their fd; without
 * one, the fd is closed and nothing else happens. */
struct seen_message {
	int n;
	uint32_t type;
	uint64_t id;
	size_t len;
	int fd;
};

static void on_message(void *ud, uint32_t type, uint64_t id, const void *body, size_t len, int fd)
{
	struct seen_message *m = ud;

	(void)body;
	m->n++;
	m->type = type;
	m->id = id;
	m->len = len;
	m->fd = fd;
}

static struct seen_message *seen_of;

static bool message_seen(struct env *e)
{
	(void)e;
	return seen_of->n > 0;
}

static int eof_fd = -1;

static bool eof_seen(struct env *e)
{
	(void)e;
	return write_end_closed(eof_fd);
}

static void test_other_messages_go_to_their_owner(void **state)
{
	struct env *e = *state;
	struct hutch_msg_connected rep = { 0 };
	struct seen_message seen = { .fd = -1 };
	int p[2];
	char b;

	hutch_cmds_on_message(&e->s->cmds, on_message, &seen);
	seen_of = &seen;
	nb_pipe(p);
	assert_int_equal(
	        hutch_proto_send(e->init, HUTCH_MSG_CONNECTED, 9, &rep, sizeof(rep), &p[1], 1), 0);
	run_until(e, message_seen);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.type, HUTCH_MSG_CONNECTED);
	assert_int_equal(seen.id, 9);
	assert_int_equal(seen.len, sizeof(rep));
	/* the fd is the one sent, and the owner's now */
	assert_true(seen.fd >= 0);
	assert_int_equal(write(seen.fd, "k", 1), 1);
	assert_int_equal(read(p[0], &b, 1), 1);
	assert_int_equal(b, 'k');
	close(seen.fd);
	/* no owner: the fd is closed (its pipe reaches its end) */
	hutch_cmds_on_message(&e->s->cmds, NULL, NULL);
	assert_int_equal(
	        hutch_proto_send(e->init, HUTCH_MSG_CONNECTED, 10, &rep, sizeof(rep), &p[1], 1), 0);
	close(p[1]);
	eof_fd = p[0];
	run_until(e, eof_seen);
	assert_int_equal(seen.n, 1);
	close(p[0]);
}

/* The pipe ends handed to the owner: stdin's write end (stdin_open),
 * stdout's read end; once taken, there is none to take again, and the
 * command is done at its exit with stdout still open. */
static void test_take_stdin_and_stdout(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = {
		.argv = argv_echo, .envp = envp_one, .cwd = "/", .stdin_open = true
	};
	struct cmd *c = start(e, &sp);
	struct msg m;
	int in, out;
	char b[4];

	init_recv(e, &m);
	assert_int_equal(m.nfds, 3);
	in = hutch_cmd_take_stdin(c);
	out = hutch_cmd_take_stdout(c);
	assert_true(in >= 0 && out >= 0);
	assert_int_equal(hutch_cmd_take_stdin(c), -EBADF);
	assert_int_equal(hutch_cmd_take_stdout(c), -EBADF);
	assert_int_equal(write(in, "in", 2), 2);
	assert_int_equal(read(m.fds[0], b, sizeof(b)), 2);
	assert_memory_equal(b, "in", 2);
	assert_int_equal(write(m.fds[1], "out", 3), 3);
	assert_int_equal(read(out, b, sizeof(b)), 3);
	assert_memory_equal(b, "out", 3);
	init_spawned(e, c->id, 11, 0);
	init_exited(e, c->id, 0);
	run_until(e, is_done);           /* m.fds[1] still open */
	assert_int_equal(c->out.len, 0); /* stdout was the owner's */
	close(in);
	close(out);
	msg_close(&m);
	hutch_cmd_release(c);
}

/* A full consumer (output() returns false) pauses both pipes until
 * hutch_cmd_resume_output(); at the exit the rest comes anyway. */
static int outputs;

static bool full_once(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	(void)ud;
	(void)c;
	(void)is_err;
	(void)buf;
	(void)n;
	return ++outputs > 1;
}

static bool output_once(struct env *e)
{
	(void)e;
	return outputs >= 1;
}

static bool output_twice(struct env *e)
{
	(void)e;
	return outputs >= 2;
}

static void test_full_consumer_pauses_output(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct hutch_cmd_sink sink = { .output = full_once, .done = on_done, .ud = e };
	struct hutch_err err = { 0 };
	struct cmd *c = hutch_cmd_start(&e->s->cmds, &sp, &sink, &err);
	struct msg m;

	assert_non_null(c);
	outputs = 0;
	init_recv(e, &m);
	init_spawned(e, c->id, 12, 0);
	assert_int_equal(write(m.fds[1], "a", 1), 1);
	run_until(e, output_once);
	assert_int_equal(write(m.fds[1], "b", 1), 1);
	/* paused: the pipes are not read, however often the loop turns */
	for (int i = 0; i < 20; i++)
		assert_true(hutch_loop_run_once(&e->s->loop, 0) >= 0);
	assert_int_equal(outputs, 1);
	hutch_cmd_resume_output(c);
	run_until(e, output_twice);
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	msg_close(&m);
	hutch_cmd_release(c);
}

/* An fd given to the engine (a raw upload's stdin end) is closed when the
 * command is done, not before. */
static void test_held_fd_closed_when_done(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	struct msg m;
	int p[2];

	nb_pipe(p);
	init_recv(e, &m);
	hutch_cmd_hold_fd(c, p[1]);
	init_spawned(e, c->id, 13, 0);
	assert_false(write_end_closed(p[0]));
	init_exited(e, c->id, 0);
	run_until(e, is_done);
	assert_true(write_end_closed(p[0]));
	close(p[0]);
	msg_close(&m);
	hutch_cmd_release(c);
}

/* init reaped: a kill sends nothing (its pid may be another's). */
static void test_no_kill_once_init_is_gone(void **state)
{
	struct env *e = *state;
	struct hutch_spawn sp = { .argv = argv_echo, .envp = envp_one, .cwd = "/" };
	struct cmd *c = start(e, &sp);
	struct msg m;

	init_recv(e, &m);
	init_spawned(e, c->id, 14, 0);
	run_until(e, is_spawned);
	hutch_cmds_init_gone(&e->s->cmds);
	hutch_cmd_kill(c, SIGTERM, 0);
	assert_false(init_readable(e));
	msg_close(&m);
	hutch_cmd_release(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_captures_output_and_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_drains_pipes_held_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stdin_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_kills, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spawn_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_messages_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_while_spawning, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_death_finishes_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_sees_start_and_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_procs_running_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_messages_go_to_their_owner, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_take_stdin_and_stdout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_consumer_pauses_output, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_fd_closed_when_done, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_kill_once_init_is_gone, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
