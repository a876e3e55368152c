/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Setup script and lifecycle hooks; see hooks.h. A step is an ordinary
 * command (hutch_cmd_start) whose completion calls step_done() instead of
 * resuming a request. Decisions that tear the sandbox down are not taken in
 * step_done() (it runs inside the command bookkeeping) but recorded and
 * carried out by hutch_hooks_after_events() between loop iterations.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "events.h"
#include "fdutil.h"
#include "hooks.h"
#include "idle.h"
#include "kind.h"
#include "netpolicy.h"
#include "status.h"
#include "supervisor.h"

enum phase {
	PHASE_NONE,
	PHASE_SETUP,
	PHASE_ON_CREATE,
	PHASE_READY,
	PHASE_ON_DESTROY,
	PHASE_FAILED,
};

/* The script goes in on stdin and is written to a file, then run from it
 * with stdin from /dev/null: a script that reads its input (cat, read)
 * must not eat its own text, and a long script must not hit the 128 KiB
 * limit of one argv string. stderr joins stdout so the tail keeps order. */
static const char setup_wrapper[] = "f=$(mktemp /tmp/.hutch-setup.XXXXXX) || exit 126\n"
                                    "cat >\"$f\" || exit 126\n"
                                    "sh \"$f\" </dev/null 2>&1\n"
                                    "s=$?\n"
                                    "rm -f \"$f\"\n"
                                    "exit $s\n";
/* A hook command is $1, evaluated as `sh -c` would run it. */
static const char hook_wrapper[] = "eval \"$1\" </dev/null 2>&1";

static const char *step_name(int phase)
{
	switch (phase) {
	case PHASE_SETUP:
		return "setup_script";
	case PHASE_ON_CREATE:
		return "on_create";
	default:
		return "on_destroy";
	}
}

/* Write the result to the creator's socket (error first, then failure
 * details) and close it; -EPIPE when it is gone (nobody got the id). */
static int report(struct sup *s, const struct hutch_err *err, const struct hutch_setup_failure *f)
{
	int r;

	if (s->hooks.result_fd < 0)
		return -EPIPE;
	r = hutch_write_all(s->hooks.result_fd, err, sizeof(*err));
	if (r >= 0 && f)
		r = hutch_write_all(s->hooks.result_fd, f, sizeof(*f));
	hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
	s->hooks.awaiting_ack = false;
	return r < 0 ? r : 0;
}

/* A sandbox whose creator never received its id is deleted: nobody else
 * can find it (issue 18 #3: an interrupted create left a medium sandbox
 * running for its whole TTL). Carried out by the lifecycle after the batch
 * (hutch_hooks_after_events()), as a failed setup step is. */
static void creator_gone(struct sup *s)
{
	hutch_err_set(&s->hooks.fail_err, -ECANCELED,
	              "the creating process went away before it received the sandbox's id");
	s->hooks.failure_noted = true;
	s->hooks.phase = PHASE_FAILED;
	hutch_event(s, "the creating process went away before it received the id: deleting");
}

/*
 * The creator's socket: its end closed while setup steps run (EPOLLHUP),
 * or, once told "ready", its acknowledgement (one byte, after it printed or
 * kept the id: supervisor/sandbox.h, hutch_created_ack()) or its end
 * closed without one. Only an acknowledged sandbox is handed over; one
 * whose creator went away at any point before is deleted (issue 26: a
 * create interrupted as the setup script ended left a sandbox whose id was
 * never printed).
 */
static void on_creator_event(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	_cleanup_close_ int stream = -EBADF;
	bool acked = false;
	char b = 0;

	if ((s->hooks.awaiting_ack || s->hooks.run_creator) && (events & EPOLLIN)) {
		ssize_t n = hutch_recv_byte_fd(s->hooks.result_fd, &b, &stream, MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EINTR)
			return;
		/* (no stray write: stdout on this fd) */
		acked = n == 1 && (b == 'A' || b == 'R' || (b == 'E' && stream >= 0));
	}
	if (s->hooks.run_creator) {
		/* A run's socket, after its "R": "D" or its end (the CLI
		 * died) deletes the sandbox, in the lifecycle's turn
		 * (supervisor/run.c); the socket closes when the sandbox is
		 * gone (hutch_hooks_sandbox_ended()), the answer. */
		s->hooks.run_delete = true;
		hutch_loop_del(&s->loop,
		               &s->hooks.w_result); /* no more events: EPOLLHUP would repeat */
		return;
	}
	if (acked && b != 'A' && s->hooks.awaiting_ack) {
		s->hooks.awaiting_ack = false;
		s->hooks.run_creator = true;
		hutch_event(s, "handed over: to its run, deleted when the run ends");
		/* "E": the run's command comes on the socket it brought */
		if (stream >= 0 && hutch_api_exec_stream(s, TAKE_FD(stream)) < 0)
			s->hooks.run_delete = true;
		return;
	}
	hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
	if (acked) {
		s->hooks.awaiting_ack = false;
		hutch_event(s, "handed over: its creator acknowledged the id");
		return;
	}
	if (s->hooks.phase != PHASE_FAILED &&
	    (s->hooks.phase != PHASE_READY || s->hooks.awaiting_ack))
		creator_gone(s);
}

static void close_log(struct sup *s)
{
	if (s->hooks.log_fd >= 0)
		close(s->hooks.log_fd);
	s->hooks.log_fd = -EBADF;
}

/* A run's command that came with the create ("E" before the answer,
 * hutch_sandbox_create_run()) goes to init before anything that only the
 * API, `hutch ls` and the creator read (state.json's "running", "ready" on
 * this socket, the events): init starts it while those are written, and
 * the creator, woken by "ready", no longer takes the CPU the command's
 * start waits for (issue 31). Anything else on the socket (nothing yet, its
 * end) is left for on_creator_event() after "ready". */
static bool run_command_first(struct sup *s)
{
	_cleanup_close_ int stream = -EBADF;
	char b = 0;

	if (s->hooks.result_fd < 0 || s->cfg->pool_key[0] ||
	    recv(s->hooks.result_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 1 || b != 'E' ||
	    hutch_recv_byte_fd(s->hooks.result_fd, &b, &stream, MSG_DONTWAIT) != 1)
		return false;
	if (stream < 0 || hutch_api_exec_stream(s, TAKE_FD(stream)) < 0)
		s->hooks.run_delete = true;
	return true;
}

bool hutch_hooks_can_run_early(struct sup *s, int result_fd)
{
	const struct hutch_config *c = s->cfg;
	char b = 0;

	return !s->container && !s->kind->api_after_ready && !c->setup_script && !c->on_create &&
	       !c->pool_key[0] && !c->full_snapshot[0] && !s->joins &&
	       hutch_net_policy_wired_mode(&c->net) == HUTCH_NET_NONE &&
	       recv(result_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && b == 'E';
}

void hutch_hooks_run_early(struct sup *s, int result_fd)
{
	/* read here, reported to once setup is over: a setup that fails
	 * after this is answered by supervisor_main(), not the teardown */
	s->hooks.result_fd = result_fd;
	s->hooks.run_early = run_command_first(s);
	s->hooks.result_fd = -EBADF;
}

bool hutch_hooks_run_over(struct sup *s)
{
	if (!s->hooks.run_early || s->loop.epfd < 0)
		return false;
	/* one look, not a wait: a status not in yet is the loop's, as before */
	if (!s->hooks.run_delete)
		(void)hutch_loop_run_once(&s->loop, 0);
	return s->hooks.run_delete;
}

static void ready(struct sup *s)
{
	struct hutch_err err = { 0 };
	bool run = false, over;
	int r;

	s->hooks.phase = PHASE_READY;
	s->ready = true;
	close_log(s);
	run = s->hooks.run_early || run_command_first(s);
	/* A run's command over at READY (hutch_hooks_run_over()) ends the
	 * sandbox in this turn: "running" and the idle timer would have no
	 * reader. Not looked for again here: of 100 runs traced at load 6-8,
	 * 20 were over at that look, none more by this point (0.1-0.2 ms on). */
	over = s->hooks.run_early && s->hooks.run_delete;
	r = over ? 0 : hutch_sup_write_state(s, s->cfg->pool_key[0] ? "pooled" : "running");
	if (r >= 0 && !over)
		r = hutch_idle_start(s);
	if (r >= 0 && s->kind->ready)
		r = s->kind->ready(s, &s->hooks.fail_err);
	if (r < 0) {
		/* Reported once torn down, like a failed step. */
		if (!s->hooks.fail_err.code)
			hutch_err_set_errno(&s->hooks.fail_err, r, "start the sandbox");
		s->hooks.failure_noted = true;
		s->hooks.phase = PHASE_FAILED;
		return;
	}
	/* The events' line before the creator's answer: a `hutch events`
	 * right after `hutch create` returned finds it (it missed it now and
	 * then at load, test_lifecycle.py's events test). */
	hutch_event(s, "ready%s", s->cfg->pool_key[0] ? ": waiting in a warm pool" : "");
	/* "ready", and the socket kept until the creator acknowledges. */
	if (s->hooks.result_fd < 0 || hutch_write_all(s->hooks.result_fd, &err, sizeof(err)) < 0 ||
	    hutch_loop_mod(&s->loop, &s->hooks.w_result, EPOLLIN | EPOLLRDHUP) < 0) {
		hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
		creator_gone(s);
		return;
	}
	if (run) {
		/* its command started above: "D" or the socket's end from now */
		s->hooks.run_creator = true;
		hutch_event(s, "handed over: to its run, deleted when the run ends");
		return;
	}
	s->hooks.awaiting_ack = true;
	/* The acknowledgement may be here already ("E" sent with the create
	 * but not in when run_command_first() looked): acted on in this turn. */
	on_creator_event(&s->hooks.w_result, EPOLLIN);
}

static void step_done(void *ud, struct cmd *c);

/* A step's output: its tail (the failure report, GET /status) and, while
 * the sandbox is being created, setup.log, which the creating CLI shows as
 * it comes; past HUTCH_SETUP_LOG_MAX a note ends the log. */
static bool step_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	static const char note[] = "\n[hutch: the rest of the output is not shown: setup.log "
	                           "keeps its first 1 MiB]\n";
	struct sup *s = ud;
	size_t room = HUTCH_SETUP_LOG_MAX - s->hooks.log_bytes;

	(void)hutch_buf_append_tail(&s->hooks.tail, buf, n);
	if (s->hooks.log_fd < 0 || c != s->hooks.step)
		return true;
	(void)hutch_write_all(s->hooks.log_fd, buf, n < room ? n : room);
	s->hooks.log_bytes += n < room ? n : room;
	if (n >= room) {
		(void)hutch_write_all(s->hooks.log_fd, note, sizeof(note) - 1);
		close_log(s);
	}
	return true;
}

static int start_step(struct sup *s, int phase)
{
	const struct hutch_config *cfg = s->cfg;
	struct hutch_err err = { 0 };
	const char *argv[6] = { "/bin/sh", "-c", NULL, NULL, NULL, NULL };
	const char *in = NULL;
	double timeout = (double)cfg->setup_script_timeout_seconds;
	struct cmd *c;

	if (phase == PHASE_SETUP) {
		argv[2] = setup_wrapper;
		argv[3] = "hutch-setup";
		in = cfg->setup_script;
	} else {
		argv[2] = hook_wrapper;
		argv[3] = step_name(phase);
		argv[4] = phase == PHASE_ON_CREATE ? cfg->on_create : cfg->on_destroy;
		if (phase == PHASE_ON_DESTROY)
			timeout = HUTCH_ON_DESTROY_SECONDS;
	}
	c = hutch_cmd_start(
	        &s->cmds,
	        &(struct hutch_spawn){ .argv = argv,
	                               .envp = s->cmdenv,
	                               .cwd = HUTCH_WORKSPACE,
	                               .stdin_data = in,
	                               .stdin_len = in ? strlen(in) : 0,
	                               .timeout = timeout,
	                               .max_output = HUTCH_HOOK_TAIL,
	                               .capture = HUTCH_CAPTURE_TAIL },
	        &(struct hutch_cmd_sink){ .output = step_output, .done = step_done, .ud = s },
	        &err);
	if (!c)
		return err.code;
	hutch_buf_done(&s->hooks.tail);
	hutch_buf_init(&s->hooks.tail, HUTCH_HOOK_TAIL);
	s->hooks.step = c;
	hutch_event(s, "%s started (bounded to %.0f s)", step_name(phase), timeout);
	s->hooks.phase = phase;
	return 0;
}

/* Record why creation failed; the report goes to the CLI once the sandbox
 * is torn down (hutch_hooks_sandbox_ended()), so that when create returns
 * nothing of the sandbox is left. */
static void fail(struct sup *s, int phase, const char *what, struct cmd *c)
{
	struct hutch_setup_failure f = { 0 };
	struct hutch_err err = { 0 };

	snprintf(f.id, sizeof(f.id), "%s", s->id);
	snprintf(f.step, sizeof(f.step), "%s", step_name(phase));
	f.exit_code = -1;
	if (c) {
		if (WIFEXITED(c->status) && !c->timed_out)
			f.exit_code = WEXITSTATUS(c->status);
		else if (WIFSIGNALED(c->status))
			f.signal = WTERMSIG(c->status);
		f.timed_out = c->timed_out;
		snprintf(f.tail, sizeof(f.tail), "%.*s", (int)s->hooks.tail.len,
		         s->hooks.tail.data ? s->hooks.tail.data : "");
	}
	close_log(s);
	if (s->state != SUP_RUNNING && s->end.reason && !strcmp(s->end.reason, "expired"))
		hutch_err_set(&err, -ECANCELED,
		              "the sandbox's TTL (%llu s) ran out during %s: give --ttl more "
		              "seconds than the setup takes",
		              (unsigned long long)s->cfg->ttl_seconds, f.step);
	else if (s->state != SUP_RUNNING && s->end.reason)
		hutch_err_set(&err, -ECANCELED, "the sandbox ended (%s) during %s", s->end.reason,
		              f.step);
	else if (f.timed_out)
		hutch_err_set(&err, -ECANCELED, "%s timed out after %llu s", f.step,
		              (unsigned long long)s->cfg->setup_script_timeout_seconds);
	else if (f.exit_code >= 0)
		hutch_err_set(&err, -ECANCELED, "%s failed with exit status %d", f.step,
		              f.exit_code);
	else if (f.signal)
		hutch_err_set(&err, -ECANCELED, "%s was killed by signal %d", f.step, f.signal);
	else
		hutch_err_set(&err, -ECANCELED, "%s: %s", f.step, what);
	s->hooks.phase = PHASE_FAILED;
	s->hooks.fail_err = err;
	hutch_event(s, "%s", err.msg);
	free(s->hooks.failure);
	s->hooks.failure = malloc(sizeof(f)); /* NULL: the error alone is reported */
	if (s->hooks.failure)
		*s->hooks.failure = f;
	else
		s->hooks.failure_noted = true;
}

static cJSON *step_json(struct cmd *c, const struct hutch_buf *tail)
{
	cJSON *o = hutch_cmd_result_json(c, false);
	_cleanup_free_ char *clean = NULL;

	if (!o)
		return NULL;
	clean = hutch_utf8_sanitize(tail->data ? tail->data : "", tail->len, NULL);
	cJSON_AddStringToObject(o, "output", clean ? clean : "");
	cJSON_AddBoolToObject(o, "output_truncated", tail->truncated);
	return o;
}

static void step_done(void *ud, struct cmd *c)
{
	struct sup *s = ud;
	int phase = s->hooks.phase;
	bool ok = WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0 && !c->timed_out &&
	          !c->spawn_error;

	if (c == s->hooks.step) {
		s->hooks.step = NULL;
		hutch_event(s, "%s ended: %s %d after %.1f ms%s", step_name(phase),
		            WIFSIGNALED(c->status) ? "signal" : "exit",
		            WIFSIGNALED(c->status) ? WTERMSIG(c->status) : WEXITSTATUS(c->status),
		            c->duration * 1000.0, c->timed_out ? " (timed out)" : "");
		if (!s->hooks.results)
			s->hooks.results = cJSON_CreateObject();
		if (s->hooks.results) {
			cJSON_DeleteItemFromObjectCaseSensitive(s->hooks.results, step_name(phase));
			cJSON_AddItemToObject(s->hooks.results, step_name(phase),
			                      step_json(c, &s->hooks.tail));
		}
		if (phase == PHASE_ON_DESTROY) {
			s->hooks.destroy_done = true;
		} else if (!ok || s->state != SUP_RUNNING) {
			fail(s, phase, "the sandbox ended", c);
		} else if (phase == PHASE_SETUP && s->cfg->on_create) {
			int r = start_step(s, PHASE_ON_CREATE);
			if (r < 0)
				fail(s, PHASE_ON_CREATE, strerror(-r), NULL);
		} else {
			ready(s);
		}
	}
	hutch_cmd_release(c);
}

void hutch_hooks_begin(struct sup *s)
{
	int r = 0, phase = PHASE_NONE;

	/* While the steps run, watch the creator: only errors are reported
	 * for events 0, and a pipe's write end sees EPOLLERR once the read
	 * end is closed. */
	hutch_watch_init(&s->hooks.w_result, on_creator_event, s);
	if (s->hooks.result_fd >= 0)
		(void)hutch_loop_add(&s->loop, &s->hooks.w_result, s->hooks.result_fd, 0);
	if (s->cfg->setup_script)
		phase = PHASE_SETUP;
	else if (s->cfg->on_create)
		phase = PHASE_ON_CREATE;
	if (phase == PHASE_NONE) {
		ready(s);
		return;
	}
	r = start_step(s, phase);
	if (r < 0)
		fail(s, phase, strerror(-r), NULL);
}

static void on_deadline(struct hutch_watch *w, uint32_t events)
{
	hutch_hooks_on_deadline(w->ptr);
}

bool hutch_hooks_destroy_start(struct sup *s)
{
	struct itimerspec its = { .it_value.tv_sec = HUTCH_ON_DESTROY_SECONDS + 5 };

	if (!s->cfg->on_destroy || s->hooks.phase != PHASE_READY || s->cmds.init_dead)
		return false;
	/* A sleeping sandbox cannot run anything. */
	hutch_idle_wake(s, hutch_now_mono_sec());
	if (start_step(s, PHASE_ON_DESTROY) < 0)
		return false;
	/* Backstop if init cannot even report the hook's end. */
	s->hooks.deadline_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->hooks.deadline_fd >= 0 &&
	    timerfd_settime(s->hooks.deadline_fd, 0, &its, NULL) == 0) {
		hutch_watch_init(&s->hooks.w_deadline, on_deadline, s);
		(void)hutch_loop_add(&s->loop, &s->hooks.w_deadline, s->hooks.deadline_fd, EPOLLIN);
	}
	return true;
}

void hutch_hooks_on_deadline(struct sup *s)
{
	hutch_loop_del(&s->loop, &s->hooks.w_deadline);
	s->hooks.destroy_done = true;
}

void hutch_hooks_record_destroy(struct sup *s)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -EBADF;
	char path[sizeof(s->paths.dir) + 64], *slash;
	cJSON *res = cJSON_GetObjectItemCaseSensitive(s->hooks.results, "on_destroy");

	snprintf(path, sizeof(path), "%s", s->paths.dir);
	slash = strrchr(path, '/');
	if (!slash)
		return;
	snprintf(slash, sizeof(path) - (size_t)(slash - path), "/.gone/%s", s->id);
	text = res ? cJSON_PrintUnformatted(res) : strdup("{\"status\": \"not_finished\"}");
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || !text)
		return;
	(void)hutch_write_all(fd, "on_destroy ", 11);
	(void)hutch_write_all(fd, text, strlen(text));
	(void)hutch_write_all(fd, "\n", 1);
}

enum hutch_hooks_verdict hutch_hooks_after_events(struct sup *s)
{
	if (s->hooks.phase == PHASE_FAILED && s->state == SUP_RUNNING)
		return HUTCH_HOOKS_FAILED;
	if (s->hooks.phase == PHASE_ON_DESTROY && s->hooks.destroy_done &&
	    s->state == SUP_CLOSING) {
		s->hooks.phase = PHASE_NONE;
		return HUTCH_HOOKS_DESTROY_DONE;
	}
	return HUTCH_HOOKS_CONTINUE;
}

void hutch_hooks_sandbox_ended(struct sup *s)
{
	struct hutch_err err = { 0 };

	if (s->hooks.result_fd < 0)
		return;
	if (s->hooks.run_creator) { /* a run's: its closing says the sandbox is gone */
		hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
		return;
	}
	if (s->hooks.awaiting_ack) { /* told ready already: nothing more to say */
		hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
		s->hooks.awaiting_ack = false;
		return;
	}
	if (s->hooks.failure || s->hooks.failure_noted) {
		report(s, &s->hooks.fail_err, s->hooks.failure);
		return;
	}
	hutch_err_set(&err, -EIO, "the sandbox ended (%s) before it was ready",
	              s->end.reason ? s->end.reason : "deleted");
	report(s, &err, NULL);
}

int hutch_hooks_open_log(struct sup *s, int *ret_read, struct hutch_err *err)
{
	char path[sizeof(s->paths.dir) + 16];

	if (!s->cfg->setup_script && !s->cfg->on_create)
		return 0;
	snprintf(path, sizeof(path), "%s/%s", s->paths.dir, HUTCH_SETUP_LOG);
	s->hooks.log_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->hooks.log_fd < 0)
		return hutch_err_set_errno(err, -errno, "create '%s'", path);
	*ret_read = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (*ret_read < 0)
		return hutch_err_set_errno(err, -errno, "open '%s'", path);
	return 0;
}

void hutch_hooks_report_to(struct sup *s, int result_fd)
{
	s->hooks.result_fd = result_fd;
}

int hutch_hooks_run_claimed(struct sup *s, int fd)
{
	/* A pooled sandbox's creator (the keeper's) acknowledged long ago:
	 * the socket is free, and from now on it is as a run's after "R". */
	if (s->hooks.result_fd >= 0 || s->hooks.run_creator) {
		close(fd);
		return -EBUSY;
	}
	s->hooks.result_fd = fd;
	s->hooks.run_creator = true;
	hutch_watch_init(&s->hooks.w_result, on_creator_event, s);
	if (hutch_loop_add(&s->loop, &s->hooks.w_result, fd, EPOLLIN | EPOLLRDHUP) < 0) {
		hutch_loop_close(&s->loop, &s->hooks.w_result, &s->hooks.result_fd);
		s->hooks.run_delete = true;
		return -ENOMEM;
	}
	hutch_event(s, "handed over: to its run, deleted when the run ends");
	return 0;
}
