/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filesystem snapshots, the supervisor's side (docs/snapshots.md).
 *
 * At setup init passes read-only fds of the directories the sandbox
 * writes: the overlay's upper directory (on the writable layer's tmpfs,
 * which left every mount tree when the root was built: the fd is the only
 * way to it) and /workspace, /home/appuser, /tmp when they are tmpfs of
 * their own. A snapshot then:
 *
 *   1. opens the store and takes its writers' lock (before the freeze: an
 *      import holding it would otherwise keep the sandbox frozen);
 *   2. freezes the sandbox's cgroup (idle sleep's freezer; a sandbox
 *      asleep or paused is already frozen and stays so);
 *   3. forks a writer that walks the fds into a tar stream (image/
 *      tarwrite.c) on a pipe (rootless: in a user namespace of its own
 *      mapped as the sandbox's, own_userns_child()), while this process
 *      unpacks that stream into the store as a new top layer over the sandbox's image (image/
 *      commit.c: the importer's hostile-safe unpacker, in the store's user
 *      namespace);
 *   4. thaws, and answers how long the sandbox was frozen.
 *
 * The host reads the sandbox's files here, against DESIGN's rule that file
 * operations run inside: inside, nothing can run while the cgroup is
 * frozen, and a capture that let the sandbox run would not be a snapshot.
 * So the walk is by fd only, on trees no process can change while it
 * runs, never following a symlink nor crossing a mount, opening only
 * directories and regular files; and what it writes is read back as
 * hostile input. The supervisor serves nothing else meanwhile (the
 * sandbox is frozen anyway).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "events.h"
#include "fdutil.h"
#include "image.h"
#include "rootfs.h"
#include "snapshot.h"
#include "supervisor.h"

#define MARKS_KEPT 16

struct sup_snapshot {
	int fds[HUTCH_ROOTFS_WRITE_FDS];
	unsigned taken; /* snapshots made: the default names' counter */
	/* hutch diff --since NAME: the last MARKS_KEPT snapshots taken, each
	 * with the change generation it follows (init/changes.h). */
	struct {
		char name[HUTCH_IMAGE_NAME_MAX + 1];
		uint64_t gen;
	} marks[MARKS_KEPT];
	unsigned nmarks;
};

int hutch_sup_snapshot_gen(struct sup *s, const char *name, uint64_t *ret_gen)
{
	for (unsigned i = 0; s->snap && i < MARKS_KEPT && i < s->snap->nmarks; i++)
		if (!strcmp(s->snap->marks[i].name, name)) {
			*ret_gen = s->snap->marks[i].gen;
			return 0;
		}
	return -ENOENT;
}

/* s->snap, made on first use (its fds none yet). */
static struct sup_snapshot *snap_of(struct sup *s)
{
	if (!s->snap && (s->snap = calloc(1, sizeof(*s->snap))))
		for (size_t i = 0; i < HUTCH_ROOTFS_WRITE_FDS; i++)
			s->snap->fds[i] = -EBADF;
	return s->snap;
}

int hutch_sup_snapshot_take_fds(struct sup *s, const uint32_t *which, size_t nwhich, int *fds,
                                size_t nfds, struct hutch_err *err)
{
	struct sup_snapshot *sn = snap_of(s);

	if (!sn) {
		hutch_close_many(fds, nfds);
		return hutch_err_set(err, -ENOMEM, "the writable layer's fds");
	}
	if (nwhich != nfds) {
		hutch_close_many(fds, nfds);
		return hutch_err_set(err, -EPROTO, "init passed %zu fds for %zu directories", nfds,
		                     nwhich);
	}
	for (size_t i = 0; i < nfds; i++) {
		if (which[i] >= HUTCH_ROOTFS_WRITE_FDS || sn->fds[which[i]] >= 0) {
			hutch_close_many(fds + i, nfds - i);
			return hutch_err_set(err, -EPROTO, "init passed a bad writable directory");
		}
		sn->fds[which[i]] = fds[i];
		fds[i] = -EBADF;
	}
	return 0;
}

int hutch_sup_snapshot_fd(struct sup *s, unsigned which)
{
	return s->snap && which < HUTCH_ROOTFS_WRITE_FDS ? s->snap->fds[which] : -EBADF;
}

void hutch_sup_snapshot_done(struct sup *s)
{
	if (!s->snap)
		return;
	hutch_close_many(s->snap->fds, HUTCH_ROOTFS_WRITE_FDS);
	free(s->snap);
	s->snap = NULL;
}

int hutch_sup_snapshot_no_cgroup(struct sup *s, const char *what, struct hutch_err *err)
{
	if (s->idmap.rootless)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
		        "an ordinary user's sandbox without a cgroup (--no-limits) cannot be "
		        "frozen for %s: create it with limits, in a cgroup v2 your user "
		        "manager delegates (a login session, or systemd-run --user --scope -p "
		        "Delegate=yes), or as root",
		        what);
	return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
	                           "a sandbox without a cgroup (--no-limits) cannot be "
	                           "frozen for %s",
	                           what);
}

/* Why this sandbox cannot be snapshotted, or 0. */
static int check(struct sup *s, struct hutch_err *err)
{
	if (!s->image)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "the host-derived root cannot be snapshotted: it is this machine's /usr "
		        "with only /workspace, /home/appuser and /tmp writable, no image to "
		        "stack a layer on; create the sandbox from an image (--image "
		        "hutch-default) to snapshot it");
	if (!s->cg)
		return hutch_sup_snapshot_no_cgroup(s, "a snapshot", err);
	if (!s->snap || s->snap->fds[HUTCH_ROOTFS_WRITE_UPPER] < 0)
		return hutch_err_set(err, -EIO, "the sandbox's writable layer is not known");
	return 0;
}

struct writer_result {
	int r;
	struct hutch_image_tar_stats st;
	struct hutch_err err;
};

/* The writer's end as capture() sees it: its result, read once. */
struct writer_end {
	int res; /* the result pipe's read end */
	bool read;
	struct writer_result w;
};

static const struct writer_result *writer_result(struct writer_end *we)
{
	if (!we->read && hutch_read_all(we->res, &we->w, sizeof(we->w)) != (ssize_t)sizeof(we->w))
		we->w.r = hutch_err_set(&we->w.err, -EIO, "snapshot: the writer died");
	we->read = true;
	we->w.err.msg[sizeof(we->w.err.msg) - 1] = '\0';
	return &we->w;
}

/* hutch_image_commit()'s digest: the writer hashed the stream as it wrote
 * it (the unpacker has read it to its end: the writer is done). */
static int writer_digest(void *ud, char out[HUTCH_IMAGE_DIGEST_LEN + 1], struct hutch_err *err)
{
	const struct writer_result *w = writer_result(ud);

	if (w->r < 0) {
		*err = w->err;
		return err->code = w->r;
	}
	memcpy(out, w->st.digest, HUTCH_IMAGE_DIGEST_LEN + 1);
	out[HUTCH_IMAGE_DIGEST_LEN] = '\0';
	return 0;
}

/*
 * Rootless: appuser's files are owned on the host by a subordinate id of
 * the caller's, which the supervisor (the caller) may not read or write.
 * So a child that must (the snapshot's writer, the rollback's worker)
 * moves into a user namespace of its own whose map is the sandbox's (0 the
 * caller; appuser, nobody and tty the slot's subordinate ids, written by
 * newuidmap, which checks them as it does for init): there it holds the
 * capabilities over exactly the sandbox's ids, and stat shows the ids the
 * sandbox sees. It joins nothing of the sandbox's.
 * The child's half: unshare, say so on sync, wait for the maps.
 */
int hutch_sup_own_userns_child(int sync, const char *what, struct hutch_err *err)
{
	char c = 'u';

	if (unshare(CLONE_NEWUSER) < 0)
		return hutch_err_set_errno(err, -errno, "%s: the child's user namespace", what);
	if (hutch_write_all(sync, &c, 1) < 0 || hutch_read_all(sync, &c, 1) != 1)
		return hutch_err_set(err, -EIO, "%s: the child's id maps were not written", what);
	return 0;
}

int hutch_sup_own_userns_parent(struct sup *s, pid_t pid, int sync, const char *what,
                                struct hutch_err *err)
{
	char c;
	int r;

	if (hutch_read_all(sync, &c, 1) != 1)
		return hutch_err_set(err, -EIO, "%s: the child died before its user namespace",
		                     what);
	if ((r = hutch_idmap_write(&s->idmap, s->slot, pid, err)) < 0)
		return hutch_err_prefix(err, "%s: the child's id maps", what);
	return hutch_write_all(sync, &c, 1) == 0
	               ? 0
	               : hutch_err_set(err, -EIO, "%s: the child died before its maps", what);
}

/* The writer child: the tar of the writable directories on out. */
_Noreturn static void writer(struct sup *s, int *data, int res, int sync)
{
	int out = data[1];

	struct hutch_image_tar_src srcs[HUTCH_ROOTFS_WRITE_FDS];
	struct writer_result w = { 0 };
	uid_t id_base = s->uid_base;
	size_t n = 0;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	closep(&data[0]); /* the unpacker's end: gone when it stops reading */
	if (sync >= 0) {
		if ((w.r = hutch_sup_own_userns_child(sync, "snapshot", &w.err)) < 0) {
			(void)hutch_write_all(res, &w, sizeof(w));
			_exit(0);
		}
		id_base = 0; /* stat shows the sandbox's own ids */
	}
	for (size_t i = 0; i < HUTCH_ROOTFS_WRITE_FDS; i++)
		if (s->snap->fds[i] >= 0)
			srcs[n++] = (struct hutch_image_tar_src){
				.dirfd = s->snap->fds[i], .prefix = hutch_rootfs_write_paths[i]
			};
	w.r = hutch_image_tar_dirs(out, srcs, n, id_base, &w.st, &w.err);
	(void)close(out);
	(void)hutch_write_all(res, &w, sizeof(w));
	_exit(0);
}

/* Capture into the (locked) store: writer and unpacker joined by a pipe. */
static int capture(struct sup *s, struct hutch_image_store *store, const char *name,
                   const cJSON *meta, const char *const *env, struct hutch_image_commit_result *ret,
                   struct hutch_image_tar_stats *ret_st, struct hutch_err *err)
{
	int data[2] = { -EBADF, -EBADF }, res[2] = { -EBADF, -EBADF };
	int sync[2] = { -EBADF, -EBADF };
	struct writer_end we = { .w = { .r = -EIO } };
	const struct writer_result *w;
	pid_t pid;
	int r;

	if (pipe2(data, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0 ||
	    (s->idmap.rootless && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)) {
		r = hutch_err_set_errno(err, -errno, "snapshot: pipe");
		goto out;
	}
	/* 1 MiB in flight, not 64 KiB: fewer switches between the writer and
	 * the unpacker (the default size where the system's bound is lower). */
	(void)fcntl(data[1], F_SETPIPE_SZ, 1 << 20);
	pid = fork();
	if (pid < 0) {
		r = hutch_err_set_errno(err, -errno, "snapshot: fork");
		goto out;
	}
	if (pid == 0) {
		closep(&sync[0]);
		writer(s, data, res[1], sync[1]);
	}
	closep(&data[1]);
	closep(&res[1]);
	closep(&sync[1]);
	if (sync[0] >= 0 &&
	    (r = hutch_sup_own_userns_parent(s, pid, sync[0], "snapshot", err)) < 0) {
		(void)kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		/* The writer's own failure (its unshare) says more. */
		if (hutch_read_all(res[0], &we.w, sizeof(we.w)) == (ssize_t)sizeof(we.w) &&
		    we.w.r < 0) {
			we.w.err.msg[sizeof(we.w.err.msg) - 1] = '\0';
			*err = we.w.err;
			r = err->code = we.w.r;
		}
		goto out;
	}
	closep(&sync[0]);
	we.res = res[0];
	r = hutch_image_commit(store, s->image, s->cfg->image, name, data[0], writer_digest, &we,
	                       meta, env, ret, err);
	closep(&data[0]); /* a writer still writing (the commit failed) ends on EPIPE */
	w = writer_result(&we);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	/* The writer's failure explains the unpacker's (a cut stream). */
	if (w->r < 0) {
		*err = w->err;
		r = err->code = w->r;
	}
	if (r >= 0)
		*ret_st = w->st;
out:
	hutch_close_many(data, 2);
	hutch_close_many(res, 2);
	hutch_close_many(sync, 2);
	return r;
}

static cJSON *answer(struct sup *s, const char *name, const struct hutch_image_commit_result *c,
                     const struct hutch_image_tar_stats *st, double frozen_ms, double total_ms)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	(void)cJSON_AddStringToObject(o, "name", name);
	(void)cJSON_AddStringToObject(o, "type", "filesystem");
	(void)cJSON_AddStringToObject(o, "source", s->id);
	(void)cJSON_AddStringToObject(o, "base", s->cfg->image);
	(void)cJSON_AddStringToObject(o, "layer", c->diff_id);
	(void)cJSON_AddNumberToObject(o, "layers", (double)c->layers);
	(void)cJSON_AddNumberToObject(o, "bytes", (double)st->bytes);
	(void)cJSON_AddNumberToObject(o, "entries", (double)st->entries);
	(void)cJSON_AddNumberToObject(o, "frozen_ms", frozen_ms);
	(void)cJSON_AddNumberToObject(o, "duration_ms", total_ms);
	return o;
}

int hutch_sup_snapshot_store(struct sup *s, struct hutch_image_store **ret, struct hutch_err *err)
{
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = s->cfg->image_store[0] ? s->cfg->image_store
	                                          : hutch_image_store_path(buf, sizeof(buf));
	int r;

	if (!path)
		return hutch_err_set(err, -EINVAL, "no image store");
	if ((r = hutch_image_store_open(path, ret, err)) < 0 ||
	    (r = hutch_image_store_lock(*ret, err)) < 0)
		return r;
	return 0;
}

int hutch_sup_snapshot_name(struct sup *s, struct hutch_image_store *store, const char **name,
                            char *buf, size_t size, struct hutch_err *err)
{
	char stem[32];

	if (*name && **name)
		return hutch_image_name_free(store, *name, err);
	if (!snap_of(s))
		return hutch_err_set(err, -ENOMEM, "snapshot");
	/* One count for both kinds, a name taken (given by hand, or kept
	 * by a store that outlived an id) skipped: never a conflict. */
	snprintf(stem, sizeof(stem), "snap-%.12s", s->id);
	*name = buf;
	return hutch_image_name_next(store, stem, &s->snap->taken, buf, size, err);
}

static int open_store(struct sup *s, const char **name, char *buf, size_t size,
                      struct hutch_image_store **ret, struct hutch_err *err)
{
	int r = hutch_sup_snapshot_store(s, ret, err);

	return r < 0 ? r : hutch_sup_snapshot_name(s, *ret, name, buf, size, err);
}

int hutch_sup_snapshot_name_check(const char *name, struct hutch_err *err)
{
	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid snapshot name '%.64s': letters, digits and "
		                           "._:/@+- (not first), no '..', at most %d bytes",
		                           name, HUTCH_IMAGE_NAME_MAX);
	return 0;
}

int hutch_sup_snapshot(struct sup *s, const char *name, const char *const *env, cJSON **ret,
                       struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	struct hutch_image_commit_result res = { 0 };
	struct hutch_image_tar_stats st = { 0 };
	_cleanup_cjson_ cJSON *meta = cJSON_CreateObject();
	bool frozen = s->idle.sleeping || s->idle.paused;
	struct hutch_err thaw_err = { 0 };
	char auto_name[64];
	double t0, t1, t2;
	int r;

	if ((r = check(s, err)) < 0)
		return r;
	if (name && *name && (r = hutch_sup_snapshot_name_check(name, err)) < 0)
		return r;
	if (!meta || !cJSON_AddStringToObject(meta, "source", s->id) ||
	    !cJSON_AddStringToObject(meta, "type", "filesystem") ||
	    !cJSON_AddNumberToObject(meta, "created", (double)time(NULL)))
		return hutch_err_set(err, -ENOMEM, "snapshot");
	t0 = hutch_now_mono_sec();
	if ((r = open_store(s, &name, auto_name, sizeof(auto_name), &store, err)) < 0)
		return r;
	t1 = hutch_now_mono_sec();
	if (!frozen && (r = hutch_cgroup_freeze(s->cg, true, err)) < 0)
		return hutch_err_prefix(err, "freeze the sandbox for the snapshot");
	r = capture(s, store, name, meta, env, &res, &st, err);
	if (!frozen && hutch_cgroup_freeze(s->cg, false, &thaw_err) < 0)
		hutch_event(s, "snapshot: thaw failed: %s", thaw_err.msg);
	t2 = hutch_now_mono_sec();
	if (r < 0)
		return r;
	hutch_event(s, "snapshot %s: %llu bytes in %llu entries, frozen %.1f ms", name,
	            (unsigned long long)st.bytes, (unsigned long long)st.entries,
	            frozen ? 0.0 : (t2 - t1) * 1e3);
	/* After the last command started so far has ended (2 * id + 1): a
	 * command still running, or a background writer since, counts after. */
	snprintf(s->snap->marks[s->snap->nmarks % MARKS_KEPT].name, HUTCH_IMAGE_NAME_MAX + 1, "%s",
	         name);
	s->snap->marks[s->snap->nmarks++ % MARKS_KEPT].gen = 2 * s->cmds.next_id + 1;
	*ret = answer(s, name, &res, &st, frozen ? 0.0 : (t2 - t1) * 1e3, (t2 - t0) * 1e3);
	return *ret ? 0 : hutch_err_set(err, -ENOMEM, "snapshot");
}
