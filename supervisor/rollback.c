/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rollback in place, the supervisor's side (docs/snapshots.md):
 *
 *   1. opens the store and takes its writers' lock (held to the end: no
 *      prune or rm takes the snapshot's layers meanwhile) and the
 *      snapshot's layers, refused unless it is of the sandbox's image's
 *      lineage (image/rollback.c);
 *   2. freezes the sandbox's cgroup (as a snapshot does);
 *   3. forks a worker that makes the sandbox's tree the snapshot's at every
 *      path that can differ, writing through the sandbox's own root
 *      (/proc/<init>/root: its overlay and writable mounts) by fd, never
 *      behind the overlay's back (image/rollback.c);
 *   4. thaws: the processes run on, with the snapshot's files.
 *
 * The worker is host root with the sandbox root's file system ids (files
 * it makes through the overlay must be owned by an id the sandbox's user
 * namespace maps), its capabilities kept (SECBIT_NO_SETUID_FIXUP): it reads
 * the store's layers whatever their modes. An ordinary user's worker is
 * root of a user namespace of its own mapped as the sandbox's (as the
 * snapshot's writer: hutch_sup_own_userns_child()), so it may write
 * appuser's files; that user's store holds no owners (its files are all
 * the user's), so each path keeps its live owner and one made takes its
 * directory's (keep_owners). It dies with the supervisor;
 * if the supervisor is killed, so is the sandbox (init's PDEATHSIG), and
 * nothing of the store was written. A worker that fails or dies after its
 * first change leaves a tree part way: the sandbox is then ended (init
 * killed: "crashed"), never handed back half rolled back.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "events.h"
#include "fdutil.h"
#include "fullsnap.h"
#include "image.h"
#include "rollback.h"
#include "rootfs.h"
#include "snapshot.h"
#include "supervisor.h"

struct worker_result {
	int r;
	struct hutch_image_rollback_stats st;
	struct hutch_err err;
};

static int check(struct sup *s, struct hutch_err *err)
{
	if (!s->image)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "the host-derived root cannot be rolled back: it is this machine's /usr "
		        "with only /workspace, /home/appuser and /tmp writable, and it has no "
		        "snapshots; create the sandbox from an image (--image hutch-default), "
		        "snapshot it, then roll it back");
	if (!s->cg)
		return hutch_sup_snapshot_no_cgroup(s, "a rollback", err);
	if (hutch_sup_snapshot_fd(s, HUTCH_ROOTFS_WRITE_UPPER) < 0)
		return hutch_err_set(err, -EIO, "the sandbox's writable layer is not known");
	return 0;
}

static int mnt_id(int fd, uint64_t *ret)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0)
		return -errno;
	*ret = sx.stx_mnt_id;
	return 0;
}

/*
 * init's root. An ordinary user may not open it while init is not
 * dumpable (its mm's user namespace is the host's: only CAP_SYS_PTRACE
 * there passes), so init is made dumpable for the open, as for a full
 * snapshot's dump, and not again right after (before the freeze: init
 * must answer). Meanwhile only a process of init's uid could ptrace it:
 * the user's own, and a plain sandbox's commands are appuser's.
 */
static int open_root(struct sup *s, struct hutch_err *err)
{
	struct hutch_err again = { 0 };
	char root[64];
	int fd = -EBADF, r = 0;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)s->init_pid);
	if (s->idmap.rootless && (r = hutch_sup_full_dumpable(s, true, err)) < 0)
		(void)hutch_err_prefix(err, "rollback: open the sandbox's root");
	if (r >= 0 && (fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = hutch_err_set_errno(err, -errno, "open the sandbox's root");
	/* not dumpable again whatever happened */
	if (s->idmap.rootless && hutch_sup_full_dumpable(s, false, &again) < 0 && r >= 0) {
		*err = again;
		r = hutch_err_prefix(err, "rollback: after opening the sandbox's root");
	}
	if (r < 0 && fd >= 0)
		(void)close(fd);
	return r < 0 ? r : fd;
}

/* The live side: init's root, the mounts written, the extra paths. */
static int live_side(struct sup *s, struct hutch_image_rollback *rb, const char **extra,
                     struct hutch_err *err)
{
	int r;

	if ((rb->live = open_root(s, err)) < 0)
		return rb->live;
	if ((r = mnt_id(rb->live, &rb->mnt_ids[rb->n_mnt++])) < 0)
		return hutch_err_set_errno(err, r, "the sandbox's root mount");
	for (unsigned i = HUTCH_ROOTFS_WRITE_UPPER + 1; i < HUTCH_ROOTFS_WRITE_FDS; i++) {
		int fd = hutch_sup_snapshot_fd(s, i);

		if (fd < 0)
			continue;
		if ((r = mnt_id(fd, &rb->mnt_ids[rb->n_mnt++])) < 0)
			return hutch_err_set_errno(err, r, "the mount of '/%s'",
			                           hutch_rootfs_write_paths[i]);
		extra[rb->n_extra++] = hutch_rootfs_write_paths[i];
	}
	return 0;
}

_Noreturn static void worker(struct sup *s, const struct hutch_image_rollback *rb, int res,
                             int sync, pid_t parent)
{
	struct worker_result w = { 0 };

	if (sync >= 0) /* rootless: the sandbox's ids, in a user namespace of its own */
		w.r = hutch_sup_own_userns_child(sync, "rollback", &w.err);
	else if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP) < 0)
		w.r = hutch_err_set_errno(&w.err, -errno, "rollback: keep capabilities");
	if (sync < 0) {
		(void)setfsgid(s->uid_base);
		(void)setfsuid(s->uid_base);
	}
	/* After the id change, which clears it; the parent may be gone since. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	if (w.r >= 0)
		w.r = hutch_image_rollback_tree(rb, &w.st, &w.err);
	(void)hutch_write_all(res, &w, sizeof(w));
	_exit(0);
}

static int run_worker(struct sup *s, const struct hutch_image_rollback *rb,
                      struct hutch_image_rollback_stats *ret, struct hutch_err *err)
{
	int res[2] = { -EBADF, -EBADF }, sync[2] = { -EBADF, -EBADF };
	struct worker_result w = { .r = -EIO };
	pid_t pid, self = getpid();
	bool got;
	int r = 0;

	if (pipe2(res, O_CLOEXEC) < 0 ||
	    (s->idmap.rootless && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)) {
		r = hutch_err_set_errno(err, -errno, "rollback: pipe");
		hutch_close_many(res, 2);
		return r;
	}
	pid = fork();
	if (pid < 0) {
		hutch_close_many(res, 2);
		hutch_close_many(sync, 2);
		return hutch_err_set_errno(err, -errno, "rollback: fork");
	}
	if (pid == 0) {
		closep(&sync[0]);
		worker(s, rb, res[1], sync[1], self);
	}
	closep(&res[1]);
	closep(&sync[1]);
	/* its maps before it changes anything */
	if (sync[0] >= 0 && (r = hutch_sup_own_userns_parent(s, pid, sync[0], "rollback", err)) < 0)
		(void)kill(pid, SIGKILL);
	closep(&sync[0]);
	got = hutch_read_all(res[0], &w, sizeof(w)) == (ssize_t)sizeof(w);
	if (r < 0 && !(got && w.r < 0)) {
		/* no maps: it changed nothing (its own failure, its unshare, says more) */
		w = (struct worker_result){ .r = r, .err = *err };
	} else if (!got) {
		/* it died: how far it got is unknown, so say it changed things */
		w = (struct worker_result){ .r = -EIO, .st = { .changes = 1 } };
		(void)hutch_err_set(&w.err, -EIO, "rollback: the worker died");
	}
	closep(&res[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	*ret = w.st;
	if (w.r < 0) {
		w.err.msg[sizeof(w.err.msg) - 1] = '\0';
		*err = w.err;
		return err->code = w.r;
	}
	return 0;
}

static cJSON *answer(const char *name, const struct hutch_image_rollback_stats *st,
                     double frozen_ms, double total_ms)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	(void)cJSON_AddStringToObject(o, "snapshot", name);
	(void)cJSON_AddNumberToObject(o, "changes", (double)st->changes);
	(void)cJSON_AddNumberToObject(o, "bytes", (double)st->bytes);
	(void)cJSON_AddNumberToObject(o, "frozen_ms", frozen_ms);
	(void)cJSON_AddNumberToObject(o, "duration_ms", total_ms);
	return o;
}

/* Frozen: the worker, then the thaw; a tree left part way ends the sandbox. */
static int frozen_rollback(struct sup *s, const char *name, struct hutch_image_rollback *rb,
                           struct hutch_image_rollback_stats *st, struct hutch_err *err)
{
	bool frozen = s->idle.sleeping || s->idle.paused;
	struct hutch_err thaw_err = { 0 };
	int r;

	if (!frozen && (r = hutch_cgroup_freeze(s->cg, true, err)) < 0)
		return hutch_err_prefix(err, "freeze the sandbox for the rollback");
	r = run_worker(s, rb, st, err);
	if (!frozen && hutch_cgroup_freeze(s->cg, false, &thaw_err) < 0)
		hutch_event(s, "rollback: thaw failed: %s", thaw_err.msg);
	if (r >= 0 || st->changes == 0)
		return r;
	hutch_event(s, "rollback to %s failed part way (%s): ending the sandbox", name, err->msg);
	if (s->init_pid > 0)
		(void)kill(s->init_pid, SIGKILL); /* the loop sees init die: "crashed" */
	return hutch_err_set_class(err, HUTCH_ERRC_IO, err->code,
	                           "%.150s; the sandbox was part way and has been ended (never "
	                           "left half rolled back): 'hutch create --snapshot %.40s'",
	                           err->msg, name);
}

int hutch_sup_rollback(struct sup *s, const char *name, cJSON **ret, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	struct hutch_image_rollback_src src = { .n_target = 0 };
	struct hutch_image_rollback rb = { .live = -EBADF };
	struct hutch_image_rollback_stats st = { 0 };
	const char *extra[HUTCH_ROOTFS_WRITE_FDS];
	int guides[HUTCH_IMAGE_ROLLBACK_GUIDES_MAX];
	const char *hook = getenv("HUTCH_TEST_ROLLBACK_STOP_AFTER");
	double t0 = hutch_now_mono_sec(), t1, t2;
	int r;

	if ((r = check(s, err)) < 0 || (r = hutch_sup_snapshot_store(s, &store, err)) < 0)
		return r;
	if ((r = hutch_image_rollback_open(store, name, s->image, s->cfg->image, &src, err)) < 0)
		return r;
	guides[0] = hutch_sup_snapshot_fd(s, HUTCH_ROOTFS_WRITE_UPPER);
	memcpy(guides + 1, src.guides, src.n_guides * sizeof(int));
	rb = (struct hutch_image_rollback){ .live = -EBADF,
		                            .target = src.target,
		                            .n_target = src.n_target,
		                            .guides = guides,
		                            .n_guides = src.n_guides + 1,
		                            .extra = extra,
		                            .id_base = s->uid_base,
		                            .keep_owners = s->idmap.rootless,
		                            .stop_after = hook ? strtoull(hook, NULL, 10) : 0 };
	r = live_side(s, &rb, extra, err);
	t1 = hutch_now_mono_sec();
	if (r >= 0)
		r = frozen_rollback(s, name, &rb, &st, err);
	t2 = hutch_now_mono_sec();
	closep(&rb.live);
	hutch_image_rollback_src_done(&src);
	if (r < 0)
		return r;
	hutch_event(s, "rollback to %s: %llu changes, %llu bytes written, frozen %.1f ms", name,
	            (unsigned long long)st.changes, (unsigned long long)st.bytes, (t2 - t1) * 1e3);
	*ret = answer(name, &st, (t2 - t1) * 1e3, (t2 - t0) * 1e3);
	return *ret ? 0 : hutch_err_set(err, -ENOMEM, "rollback");
}
