/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forks by disk copy, the source's side (POST /fork, docs/snapshots.md
 * "Fork"): for a sandbox whose writable places are a disk of its own
 * (runtime/disk.h), each fork's disk is made by a forker (runtime/
 * disk-fork.c) before the freeze; then the sandbox is frozen, every
 * forker copies its disk's files at once, and it is thawed. No image of
 * the store is made: each fork is created from the source's image with
 * its forker's disk, taken by name (hutch fork; the forker waits for it).
 *
 * A fork by clone makes the next fork's forker FORK_AHEAD_MS after it
 * (runtime/disk-fork.c: its file and loop device ready); the next fork's
 * first disk is that forker's, given the source's disk then.
 *
 * The host reads the sandbox's files here, as a snapshot does (snapshot.c
 * says why): while the cgroup is frozen, by `cp -a` in a process outside
 * the sandbox, never following a symlink, into a disk no process of any
 * sandbox can reach yet.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "disk.h"
#include "events.h"
#include "fdutil.h"
#include "fork.h"
#include "proto.h"
#include "supervisor.h"
#include "util.h"

#define FORK_MADE_MS 30000
#define FORK_COPY_MS 600000
/* A fork by clone makes the next one's forker this long after its answer
 * (not at once: the forks' creates, which end after it, would share the
 * CPUs with it; short: a fork, its rm and the next fork took 300-500 ms
 * at load 9-12), and the source's end waits for it at most
 * FORK_AHEAD_END_MS. */
#define FORK_AHEAD_MS     200
#define FORK_AHEAD_END_MS 1000

struct forker {
	char name[64];
	int ctl;
};

static int check(struct sup *s, struct hutch_err *err)
{
	if (s->idmap.rootless)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EPERM,
		                           "an ordinary user's sandbox has no disk to fork (its "
		                           "writable places are tmpfs): a fork goes through a "
		                           "snapshot (POST /snapshot; hutch fork does so)");
	if (!s->cg)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
		                           "a sandbox without a cgroup (--no-limits) cannot be "
		                           "frozen for a fork");
	if (s->disk_fds[HUTCH_DISK_ROOT] < 0)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
		                           "its writable places are not a disk (workspace %s): "
		                           "a fork goes through a snapshot",
		                           s->cfg->workspace);
	return 0;
}

static void runtime_dir(const struct sup *s, char *buf, size_t len)
{
	char *slash;

	snprintf(buf, len, "%s", s->paths.dir);
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
}

/* Can the source's disk be cloned for a fork's of bytes: its size, and a
 * clone tried in a new file of the pool, once (a round trip to the pool's
 * process and a clone, 1-11 ms at load 9, on every fork's path before):
 * the disk's file and where it is stay. */
static bool can_clone(struct sup *s, const char *rt, uint64_t bytes)
{
	struct stat st;
	int file = s->disk_fds[HUTCH_DISK_FILE];

	if (file < 0 || fstat(file, &st) < 0 || (uint64_t)st.st_size != bytes)
		return false;
	if (!s->fork_clones)
		s->fork_clones = hutch_disk_can_clone(rt, file, bytes);
	return s->fork_clones;
}

/* The forker made ahead let go (KILL: it waits to be given its disk's
 * source), its end waited for up to wait_ms on its pidfd. */
static void ahead_drop(struct sup *s, int wait_ms)
{
	struct sup_fork_ahead *a = &s->fork_ahead;
	struct pollfd p = { .fd = a->pidfd, .events = POLLIN };

	if (!a->held)
		return;
	a->held = false;
	(void)hutch_proto_send(a->ctl, HUTCH_MSG_KILL, 0, NULL, 0, NULL, 0);
	closep(&a->ctl);
	if (wait_ms > 0 && a->pidfd >= 0)
		(void)poll(&p, 1, wait_ms);
	closep(&a->pidfd);
}

/* The first fork's forker: the one made ahead where its disk's size is
 * this fork's, given the source's disk and the fork's listener (it syncs
 * the source's file system and answers READY as a new forker does). 1:
 * taken, 0: none or failed (a forker is made now). */
static int take_ahead(struct sup *s, struct forker *f, const struct hutch_disk_fork *df,
                      int listener)
{
	struct sup_fork_ahead *a = &s->fork_ahead;
	struct hutch_err e = { 0 };
	_cleanup_close_ int ctl = -EBADF;

	if (!a->held || a->bytes != df->bytes) {
		ahead_drop(s, 0);
		return 0;
	}
	a->held = false;
	ctl = TAKE_FD(a->ctl);
	closep(&a->pidfd);
	if (hutch_disk_fork_wait(ctl, FORK_MADE_MS, &e) != 0 ||
	    hutch_disk_fork_give(ctl, df, listener, &e) < 0) {
		hutch_event(s, "fork: its forker made ahead failed (%s); one made now", e.msg);
		(void)hutch_proto_send(ctl, HUTCH_MSG_KILL, 0, NULL, 0, NULL, 0);
		return 0;
	}
	f->ctl = TAKE_FD(ctl);
	return 1;
}

static void on_ahead(struct hutch_watch *w, uint32_t events)
{
	struct sup *s = w->ptr;
	struct sup_fork_ahead *a = &s->fork_ahead;
	struct hutch_err err = { 0 };
	char rt[sizeof(s->paths.dir)];
	uint64_t n;

	(void)events;
	(void)!read(a->timer_fd, &n, sizeof(n));
	if (a->held || s->state != SUP_RUNNING || s->disk_fds[HUTCH_DISK_ROOT] < 0)
		return;
	runtime_dir(s, rt, sizeof(rt));
	if (hutch_disk_fork_start_ahead(rt, a->bytes, &a->ctl, &a->pidfd, &err) < 0) {
		hutch_event(s, "fork: a forker made ahead: %s", err.msg);
		return;
	}
	a->held = true;
	hutch_event(s, "fork: the next fork's forker made ahead");
}

/* After a fork by clone: the next fork's forker made FORK_AHEAD_MS from
 * now, its disk of bytes (one of another size let go). */
static void ahead_arm(struct sup *s, uint64_t bytes)
{
	struct sup_fork_ahead *a = &s->fork_ahead;
	const struct itimerspec its = { .it_value = { .tv_sec = FORK_AHEAD_MS / 1000,
		                                      .tv_nsec =
		                                              FORK_AHEAD_MS % 1000 * 1000000L } };

	if (a->held && a->bytes != bytes)
		ahead_drop(s, 0);
	a->bytes = bytes;
	if (!a->timer) {
		a->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (a->timer_fd < 0)
			return;
		hutch_watch_init(&a->w, on_ahead, s);
		if (hutch_loop_add(&s->loop, &a->w, a->timer_fd, EPOLLIN) < 0) {
			closep(&a->timer_fd);
			return;
		}
		a->timer = true;
	}
	(void)timerfd_settime(a->timer_fd, 0, &its, NULL);
}

void hutch_sup_fork_done(struct sup *s)
{
	if (s->fork_ahead.timer) {
		hutch_loop_close(&s->loop, &s->fork_ahead.w, &s->fork_ahead.timer_fd);
		s->fork_ahead.timer = false;
	}
	ahead_drop(s, FORK_AHEAD_END_MS);
}

/* Every forker's next answer: 0 (1: every disk a clone), or the first
 * failure. */
static int wait_all(struct forker *f, size_t n, int timeout_ms, struct hutch_err *err)
{
	int r = 1;

	for (size_t i = 0; i < n; i++) {
		struct hutch_err e = { 0 };
		int k = hutch_disk_fork_wait(f[i].ctl, timeout_ms, &e);

		if (k < 0 && r >= 0) {
			*err = e;
			r = e.code;
		} else if (k == 0 && r > 0)
			r = 0;
	}
	return r;
}

static int go_all(struct forker *f, size_t n, struct hutch_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (hutch_proto_send(f[i].ctl, HUTCH_MSG_GO, 0, NULL, 0, NULL, 0) < 0)
			return hutch_err_set(err, -EPIPE, "fork: its disk's maker went away");
	return 0;
}

/* The forkers started (each makes its disk meanwhile), their sockets
 * named names[i] (the creator's, made to appear only once they listen:
 * its creates run meanwhile and take their disks as the names appear),
 * or, names NULL, by our counter; each given client (the request's
 * client's pidfd: its end ends a forker whose disk no fork took). */
static int start_all(struct sup *s, const char *rt, struct forker *f, size_t n, uint64_t bytes,
                     const cJSON *names, int client, bool *ahead, struct hutch_err *err)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int listener = -EBADF, path = -EBADF;
		int r;

		if (names)
			snprintf(f[i].name, sizeof(f[i].name), "%s",
			         cJSON_GetStringValue(cJSON_GetArrayItem(names, (int)i)));
		else
			snprintf(f[i].name, sizeof(f[i].name), "fork-%.12s-%u.sock", s->id,
			         ++s->forks_made);
		if ((r = listener = hutch_disk_fork_listen(rt, f[i].name, names != NULL, &path,
		                                           err)) < 0) {
			f[i].name[0] = '\0'; /* not ours to remove */
			if (r == -EEXIST)
				err->cls = HUTCH_ERRC_CONFLICT;
			return r;
		}
		const struct hutch_disk_fork df = { .runtime_dir = rt,
			                            .bytes = bytes,
			                            .src_root = s->disk_fds[HUTCH_DISK_ROOT],
			                            .src_file = s->disk_fds[HUTCH_DISK_FILE],
			                            .client = client,
			                            .name = f[i].name,
			                            .path = path };

		if (i == 0 && (*ahead = take_ahead(s, &f[i], &df, listener)))
			continue;
		if ((r = hutch_disk_fork_start(&df, listener, &f[i].ctl, err)) < 0) {
			hutch_disk_fork_forget(rt, f[i].name);
			f[i].name[0] = '\0';
			return r;
		}
	}
	return 0;
}

static cJSON *answer(struct sup *s, const struct forker *f, size_t n, bool cloned, bool ahead,
                     double frozen_ms, double total_ms)
{
	cJSON *o = cJSON_CreateObject(), *a = o ? cJSON_AddArrayToObject(o, "disks") : NULL;

	if (!a)
		return cJSON_Delete(o), NULL;
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(f[i].name));
	(void)cJSON_AddStringToObject(o, "source", s->id);
	(void)cJSON_AddStringToObject(o, "image", s->cfg->image[0] ? s->cfg->image : "host");
	(void)cJSON_AddStringToObject(o, "method", cloned ? "clone" : "copy");
	(void)cJSON_AddNumberToObject(o, "made_ahead", ahead ? 1 : 0);
	(void)cJSON_AddNumberToObject(o, "frozen_ms", frozen_ms);
	(void)cJSON_AddNumberToObject(o, "duration_ms", total_ms);
	return o;
}

/* names: count valid names, all different, or NULL. */
static int check_names(const cJSON *names, size_t count, struct hutch_err *err)
{
	if (!names)
		return 0;
	if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != (int)count)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'names' must be an array of 'count' socket names");
	for (int i = 0; i < (int)count; i++) {
		const char *n = cJSON_GetStringValue(cJSON_GetArrayItem(names, i));

		if (!n || !hutch_disk_fork_name_is_valid(n))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'names' entry %d must be 'fork-[a-z0-9-]+.sock', "
			        "shorter than %d bytes",
			        i + 1, HUTCH_DISK_FORK_NAME_MAX);
		for (int j = 0; j < i; j++)
			if (!strcmp(n, cJSON_GetStringValue(cJSON_GetArrayItem(names, j))))
				return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
				                           "'names' entry %d repeats entry %d",
				                           i + 1, j + 1);
	}
	return 0;
}

int hutch_sup_fork(struct sup *s, size_t count, uint64_t bytes, bool copy, const cJSON *names,
                   int client, cJSON **ret, struct hutch_err *err)
{
	_cleanup_free_ struct forker *f = calloc(count ? count : 1, sizeof(*f));
	bool frozen = s->idle.sleeping || s->idle.paused;
	struct hutch_err thaw_err = { 0 };
	char rt[sizeof(s->paths.dir)];
	double t0, t1 = 0, t2 = 0;
	bool cloned = false, ahead = false;
	int r;

	if ((r = check(s, err)) < 0 || (r = check_names(names, count, err)) < 0)
		return r;
	if (!f)
		return hutch_err_set(err, -ENOMEM, "fork");
	for (size_t i = 0; i < count; i++)
		f[i].ctl = -EBADF;
	runtime_dir(s, rt, sizeof(rt));
	if (!copy && !can_clone(s, rt, bytes))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
		        "its disk cannot be cloned here (made before the runtime "
		        "dir's pool of disks, the disks' file system shares no "
		        "extents, or the fork's disk size differs)");
	t0 = hutch_now_mono_sec();
	if ((r = start_all(s, rt, f, count, bytes, names, client, &ahead, err)) < 0 ||
	    (r = wait_all(f, count, FORK_MADE_MS, err)) < 0)
		goto out;
	t1 = hutch_now_mono_sec();
	if (!frozen && (r = hutch_cgroup_freeze(s->cg, true, err)) < 0) {
		hutch_err_prefix(err, "freeze the sandbox for the fork");
		goto out;
	}
	if ((r = go_all(f, count, err)) >= 0)
		r = wait_all(f, count, FORK_COPY_MS, err);
	cloned = r > 0;
	if (!frozen && hutch_cgroup_freeze(s->cg, false, &thaw_err) < 0)
		hutch_event(s, "fork: thaw failed: %s", thaw_err.msg);
	t2 = hutch_now_mono_sec();
	if (r >= 0) {
		hutch_event(s, "fork: %zu disk%s %s, frozen %.1f ms%s", count,
		            count == 1 ? "" : "s", cloned ? "cloned" : "copied",
		            frozen ? 0.0 : (t2 - t1) * 1e3,
		            ahead ? ", the first's forker made ahead" : "");
		*ret = answer(s, f, count, cloned, ahead, frozen ? 0.0 : (t2 - t1) * 1e3,
		              (t2 - t0) * 1e3);
		if (!*ret)
			r = hutch_err_set(err, -ENOMEM, "fork");
		if (cloned)
			ahead_arm(s, bytes);
	}
out:
	for (size_t i = 0; i < count; i++) {
		/* a failure: every forker ends (EOF before the copy, KILL after) */
		if (r < 0 && f[i].ctl >= 0)
			(void)hutch_proto_send(f[i].ctl, HUTCH_MSG_KILL, 0, NULL, 0, NULL, 0);
		closep(&f[i].ctl);
		if (r < 0 && f[i].name[0])
			hutch_disk_fork_forget(rt, f[i].name);
	}
	return r;
}
