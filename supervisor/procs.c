/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background processes: bookkeeping, kill with a grace period and the
 * waiting requests (see procs.h). A background process is an ordinary
 * command of the engine (cmd.h) whose sink is its record here: output goes
 * to its rings (base/ring.h), its end is kept; no request owns it, so a
 * client going away never kills it. The end of the sandbox does.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "procs.h"
#include "proto.h"
#include "supervisor.h"

struct hutch_procs *hutch_procs_get(struct sup *s)
{
	if (!s->procs) {
		s->procs = calloc(1, sizeof(*s->procs));
		if (s->procs)
			s->procs->tail = &s->procs->head;
	}
	return s->procs;
}

static void proc_free(struct hutch_proc *p)
{
	hutch_proc_stdin_close(p);
	if (p->cmd)
		hutch_cmd_release(p->cmd);
	free(p->command);
	free(p->error);
	cJSON_Delete(p->changes);
	cJSON_Delete(p->egress);
	hutch_ring_done(&p->out);
	hutch_ring_done(&p->err);
	free(p);
}

void hutch_procs_free(struct sup *s)
{
	struct hutch_procs *set = s->procs;

	if (!set)
		return;
	for (struct hutch_proc *p = set->head, *next; p; p = next) {
		next = p->next;
		proc_free(p);
	}
	free(set);
	s->procs = NULL;
}

/* Wake every waiting request; each looks again and may wait again. */
static void wake_all(struct hutch_procs *set)
{
	struct hutch_proc_wait *w = set->waiters;

	set->waiters = NULL;
	while (w) {
		struct hutch_proc_wait *next = w->next;
		w->queued = false;
		w->next = NULL;
		w->wake(w);
		w = next;
	}
}

void hutch_proc_wait_add(struct sup *s, struct hutch_proc_wait *w)
{
	struct hutch_procs *set = hutch_procs_get(s);

	if (!set || w->queued)
		return;
	w->next = set->waiters;
	set->waiters = w;
	w->queued = true;
}

void hutch_proc_wait_cancel(struct sup *s, struct hutch_proc_wait *w)
{
	if (!s->procs)
		return;
	for (struct hutch_proc *p = s->procs->head; p; p = p->next)
		if (p->stdin_writer == w)
			p->stdin_writer = NULL;
	if (!w->queued)
		return;
	for (struct hutch_proc_wait **pp = &s->procs->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->queued = false;
}

struct hutch_proc *hutch_proc_find_num(struct sup *s, unsigned num)
{
	if (!s->procs)
		return NULL;
	for (struct hutch_proc *p = s->procs->head; p; p = p->next)
		if (p->num == num)
			return p;
	return NULL;
}

struct hutch_proc *hutch_proc_find(struct sup *s, const char *id)
{
	char *end;
	unsigned long num;

	if (id && strlen(id) == 36 && s->procs) {
		for (struct hutch_proc *p = s->procs->head; p; p = p->next)
			if (!strcmp(p->uuid, id))
				return p;
		return NULL;
	}
	if (!id || id[0] != 'p' || id[1] < '1' || id[1] > '9')
		return NULL;
	errno = 0;
	num = strtoul(id + 1, &end, 10);
	if (errno || *end || num > UINT32_MAX)
		return NULL;
	return hutch_proc_find_num(s, (unsigned)num);
}

static void proc_spawned(void *ud, struct cmd *c)
{
	struct hutch_proc *p = ud;

	p->pid = c->pid;
	if (p->set)
		wake_all(p->set);
}

static bool proc_output(void *ud, struct cmd *c, bool is_err, const char *buf, size_t n)
{
	struct hutch_proc *p = ud;

	hutch_ring_write(is_err ? &p->err : &p->out, buf, n);
	if (p->set)
		wake_all(p->set);
	return true;
}

static void proc_done(void *ud, struct cmd *c);

/* Wake the request writing to p's stdin: its pipe has room, or is gone. */
static void stdin_wake(struct hutch_proc *p)
{
	if (p->stdin_writer)
		p->stdin_writer->wake(p->stdin_writer);
}

static void on_stdin_room(struct hutch_watch *w, uint32_t events)
{
	struct hutch_proc *p = w->ptr;

	hutch_loop_del(p->loop, &p->w_in);
	stdin_wake(p);
}

ssize_t hutch_proc_stdin_write(struct hutch_proc *p, const char *data, size_t n)
{
	ssize_t r;

	if (p->in_fd < 0)
		return -EPIPE;
	do
		r = write(p->in_fd, data, n);
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN) {
		/* The writer is woken once when the pipe has room (EPOLLERR
		 * when the reader went). */
		if (!hutch_watch_active(&p->w_in) &&
		    hutch_loop_add(p->loop, &p->w_in, p->in_fd, EPOLLOUT) < 0) {
			hutch_proc_stdin_close(p);
			return -EPIPE;
		}
		return -EAGAIN;
	}
	if (r < 0) { /* EPIPE: the process closed its end; the rest is dropped */
		hutch_proc_stdin_close(p);
		return -EPIPE;
	}
	p->stdin_bytes += (uint64_t)r;
	return r;
}

void hutch_proc_stdin_close(struct hutch_proc *p)
{
	if (p->loop)
		hutch_loop_close(p->loop, &p->w_in, &p->in_fd);
	stdin_wake(p);
}

/* A random (version 4) UUID, as the executor names its processes. */
static int make_uuid(char buf[static 37])
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		return -EIO;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
	         b[13], b[14], b[15]);
	return 0;
}

struct hutch_proc *hutch_proc_start(struct sup *s, const char *command, const char *const *argv,
                                    const char *const *envp, const char *cwd, bool stdin_open,
                                    struct hutch_err *err)
{
	struct hutch_procs *set = hutch_procs_get(s);
	struct hutch_proc *p;
	struct cmd *c;

	if (!set)
		return hutch_err_set(err, -ENOMEM, "out of memory"), NULL;
	if (set->nrunning >= HUTCH_PROCS_MAX_RUNNING)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -EAGAIN,
		                           "%u background processes are running, the most a "
		                           "sandbox may have: kill one first",
		                           set->nrunning),
		       NULL;
	p = calloc(1, sizeof(*p));
	if (!p || make_uuid(p->uuid) < 0 || !(p->command = strdup(command))) {
		free(p);
		return hutch_err_set(err, -ENOMEM, "out of memory"), NULL;
	}
	c = hutch_cmd_start(
	        &s->cmds,
	        &(struct hutch_spawn){
	                .argv = argv, .envp = envp, .cwd = cwd, .stdin_open = stdin_open },
	        &(struct hutch_cmd_sink){ .output = proc_output,
	                                  .spawned = proc_spawned,
	                                  .done = proc_done,
	                                  .ud = p },
	        err);
	if (!c) {
		free(p->command);
		free(p);
		return NULL;
	}
	p->cmd = c;
	p->cmd_id = c->id;
	p->set = set;
	p->loop = &s->loop;
	p->stdin_kept = stdin_open;
	p->in_fd = stdin_open ? hutch_cmd_take_stdin(c) : -EBADF;
	hutch_watch_init(&p->w_in, on_stdin_room, p);
	p->num = ++set->next_num;
	p->started_at = hutch_now_realtime();
	hutch_ring_init(&p->out, HUTCH_PROC_RING_BYTES);
	hutch_ring_init(&p->err, HUTCH_PROC_RING_BYTES);
	*set->tail = p;
	set->tail = &p->next;
	set->nrunning++;
	return p;
}

void hutch_proc_kill(struct hutch_proc *p, double grace)
{
	int64_t at;

	if (p->done || !p->cmd)
		return;
	if (grace <= 0) {
		p->kill_requested = true;
		p->kill_at_ms = 0;
		hutch_cmd_kill(p->cmd, SIGKILL, HUTCH_KILL_REST_ON_EXIT);
		return;
	}
	at = hutch_now_mono_ms() + (int64_t)(grace * 1000);
	if (!p->kill_requested) {
		p->kill_requested = true;
		p->kill_at_ms = at;
		hutch_cmd_kill(p->cmd, SIGTERM, HUTCH_KILL_REST_ON_EXIT);
	} else if (p->kill_at_ms && at < p->kill_at_ms) {
		p->kill_at_ms = at; /* a second kill with a shorter grace */
	}
}

/* Keep at most HUTCH_PROCS_MAX_FINISHED finished processes: drop the oldest. */
static void evict_finished(struct hutch_procs *set)
{
	while (set->nfinished > HUTCH_PROCS_MAX_FINISHED) {
		for (struct hutch_proc **pp = &set->head; *pp; pp = &(*pp)->next) {
			struct hutch_proc *p = *pp;
			if (!p->done)
				continue;
			*pp = p->next;
			if (set->tail == &p->next)
				set->tail = pp;
			proc_free(p);
			set->nfinished--;
			break;
		}
	}
}

/* The end of a background process: keep its result. */
static void proc_done(void *ud, struct cmd *c)
{
	struct hutch_proc *p = ud;
	struct hutch_procs *set = p->set;

	p->status = c->status;
	p->done = true;
	hutch_proc_stdin_close(p); /* nobody reads it any more */
	p->kill_at_ms = 0;
	p->ended_at = hutch_now_realtime();
	if (p->pid == 0)
		p->pid = c->pid;
	if (c->spawn_error)
		p->error = strdup(c->spawn_error);
	p->changes = TAKE_PTR(c->changes);
	p->egress = TAKE_PTR(c->egress);
	p->cmd = NULL;
	hutch_cmd_release(c);
	set->nrunning--;
	set->nfinished++;
	wake_all(set);
}

void hutch_procs_tick(struct sup *s)
{
	struct hutch_procs *set = s->procs;
	int64_t now = hutch_now_mono_ms();
	bool wake = false;

	if (!set)
		return;
	evict_finished(set);
	for (struct hutch_proc *p = set->head; p; p = p->next)
		if (p->kill_at_ms && now >= p->kill_at_ms && !p->done && p->cmd) {
			p->kill_at_ms = 0;
			hutch_cmd_kill(p->cmd, SIGKILL, HUTCH_KILL_REST_ON_EXIT);
		}
	for (struct hutch_proc_wait *w = set->waiters; w; w = w->next)
		if (w->deadline_ms && now >= w->deadline_ms)
			wake = true;
	if (wake)
		wake_all(set);
}

int hutch_procs_timeout_ms(struct sup *s)
{
	struct hutch_procs *set = s->procs;
	int64_t now = hutch_now_mono_ms(), next = -1;

	if (!set)
		return -1;
	for (struct hutch_proc *p = set->head; p; p = p->next)
		if (p->kill_at_ms && (next < 0 || p->kill_at_ms < next))
			next = p->kill_at_ms;
	for (struct hutch_proc_wait *w = set->waiters; w; w = w->next)
		if (w->deadline_ms && (next < 0 || w->deadline_ms < next))
			next = w->deadline_ms;
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

static const char *signal_name(int sig, char *buf, size_t size)
{
	const char *abbrev = sigabbrev_np(sig);

	snprintf(buf, size, "SIG%s", abbrev ? abbrev : "?");
	return buf;
}

cJSON *hutch_proc_json(struct hutch_proc *p)
{
	cJSON *o = cJSON_CreateObject();
	char id[16], t[40], sig[16];

	if (!o)
		return NULL;
	snprintf(id, sizeof(id), "p%u", p->num);
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "uuid", p->uuid);
	cJSON_AddStringToObject(o, "command", p->command);
	cJSON_AddStringToObject(o, "status",
	                        !p->done            ? "running"
	                        : p->kill_requested ? "killed"
	                                            : "exited");
	if (p->pid > 0)
		cJSON_AddNumberToObject(o, "pid", p->pid);
	else
		cJSON_AddNullToObject(o, "pid");
	if (p->done && WIFEXITED(p->status))
		cJSON_AddNumberToObject(o, "exit_code", WEXITSTATUS(p->status));
	else
		cJSON_AddNullToObject(o, "exit_code");
	if (p->done && WIFSIGNALED(p->status)) {
		cJSON_AddNumberToObject(o, "signal", WTERMSIG(p->status));
		cJSON_AddStringToObject(o, "signal_name",
		                        signal_name(WTERMSIG(p->status), sig, sizeof(sig)));
	} else {
		cJSON_AddNullToObject(o, "signal");
		cJSON_AddNullToObject(o, "signal_name");
	}
	hutch_format_time(p->started_at, t, sizeof(t));
	cJSON_AddStringToObject(o, "started_at", t);
	if (p->done) {
		hutch_format_time(p->ended_at, t, sizeof(t));
		cJSON_AddStringToObject(o, "ended_at", t);
	} else {
		cJSON_AddNullToObject(o, "ended_at");
	}
	cJSON_AddNumberToObject(o, "stdout_bytes", (double)p->out.total);
	cJSON_AddNumberToObject(o, "stderr_bytes", (double)p->err.total);
	if (p->stdin_kept) {
		cJSON_AddBoolToObject(o, "stdin_open", p->in_fd >= 0);
		cJSON_AddNumberToObject(o, "stdin_bytes", (double)p->stdin_bytes);
	}
	if (p->error)
		cJSON_AddStringToObject(o, "error", p->error);
	if (p->changes)
		cJSON_AddItemToObject(o, "changes", cJSON_Duplicate(p->changes, true));
	if (p->egress)
		cJSON_AddItemToObject(o, "egress", cJSON_Duplicate(p->egress, true));
	return o;
}
