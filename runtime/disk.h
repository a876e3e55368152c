/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Disk that behaves as disk (issue 27): each sandbox's writable places
 * (/workspace, /home/appuser, /tmp and an image's writable layer) on one
 * ext4 file system of the instance's disk size, of its own: a sparse copy
 * of a template (made once per runtime dir and size by mke2fs) in an
 * O_TMPFILE on the host's disk, behind a loop device (autoclear, direct
 * I/O), mounted by the supervisor's side (root only: an ordinary user gets
 * no loop device, and keeps tmpfs). The disk size answers ENOSPC, `df`
 * tells the truth, and its page cache is reclaimable: writing never
 * OOM-kills. Nothing has a name: when the last mount of it goes (the
 * sandbox's mount namespace, also after a kill -9 of the supervisor) the
 * loop device detaches itself and the file is freed. docs/architecture.md
 * "Disk that behaves as disk".
 */
#ifndef HUTCH_DISK_H
#define HUTCH_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "rootfs.h"

/* What a made disk hands over: detached mounts of its directories for
 * init, by rootfs.h's HUTCH_ROOTFS_WRITE_* ([UPPER]: a directory holding
 * upper/ and work/ of an image's overlay; /workspace and /home/appuser
 * appuser's, 0755; /tmp 1777), then an fd of its root (the supervisor's,
 * for the shutdown). */
enum {
	HUTCH_DISK_MOUNTS = HUTCH_ROOTFS_WRITE_FDS,
	HUTCH_DISK_ROOT = HUTCH_DISK_MOUNTS, /* O_RDONLY fd of the file system's root */
	HUTCH_DISK_FDS
};

/* A disk being made by a child process while the rest of the sandbox is. */
struct hutch_disk_job {
	pid_t pid;
	int sock;
};

/*
 * Can this process make disks here? Root with /dev/loop-control and
 * mke2fs; else false with *why saying what is missing (static text).
 */
bool hutch_disk_possible(const char **why);

/*
 * Make a disk of bytes for the sandbox whose host ids start at uid_base
 * (its root; appuser is uid_base + 1000): in a child process, so that it
 * overlaps the rest of the setup. The template lives in
 * runtime_dir/.disk/; the file in runtime_dir when that is on a disk, else
 * in /var/tmp. 0 or -errno with err set.
 */
int hutch_disk_start(const char *runtime_dir, uint64_t bytes, uid_t uid_base,
                     struct hutch_disk_job *job, struct hutch_err *err);
/* Wait for it: fds[HUTCH_DISK_FDS] on success (the caller closes them). */
int hutch_disk_finish(struct hutch_disk_job *job, int fds[HUTCH_DISK_FDS], struct hutch_err *err);
/* At the end (or a failed setup): end the child if it runs, reap it. */
void hutch_disk_abandon(struct hutch_disk_job *job);

/*
 * The end of a sandbox, its processes dead: the file system is shut down
 * without writing back what is still in memory (a throw-away disk), so
 * that its unmount is quicker. Its last reference (root's close, or the
 * last mount's) unmounts it.
 */
void hutch_disk_shutdown(int root);

/* `hutch gc`: runtime_dir's templates go when no sandbox is left in it
 * (a create meanwhile makes its own again). */
void hutch_disk_gc(const char *runtime_dir);

#endif
