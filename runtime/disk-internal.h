/* SPDX-License-Identifier: Apache-2.0 */
/* What disk.c gives disk-fork.c: a disk made, and handed over. */
#ifndef HUTCH_DISK_INTERNAL_H
#define HUTCH_DISK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "disk.h"
#include "error.h"

/* A disk of bytes made (the template copied into *file, a loop device,
 * ext4 mounted detached, its directories laid out): its mount *mnt and
 * root *root. */
int hutch_disk_make(const char *runtime_dir, uint64_t bytes, int *file, int *mnt, int *root,
                    struct hutch_err *err);
/* Its second half: the ext4 on /dev/loop<nr> mounted detached (the loop
 * device's fd is the caller's to close after: autoclear). */
int hutch_disk_mount(const char *runtime_dir, int nr, int *mnt, int *root, struct hutch_err *err);
/* Where a runtime dir's disks' files are made: an O_TMPFILE's fd, or
 * -errno with err set. */
int hutch_disk_new_file(const char *runtime_dir, struct hutch_err *err);
/* disk-pool.c: where the disks' files go without a pool: the runtime dir,
 * or /var/tmp when that is in memory (NULL when that is too). */
const char *hutch_disk_files_where(const char *runtime_dir);
/* The first of paths (NULL-ended) that is an executable, or NULL. */
const char *hutch_disk_tool(const char *const paths[]);
/* A free loop device on file (autoclear, direct I/O): its fd; *nr its number. */
int hutch_disk_loop_attach(int file, int *nr, struct hutch_err *err);
/* The runtime dir's pool (disk-pool.c): an fd of its root (a detached
 * XFS mount), -EOPNOTSUPP where there is to be none (the files' file
 * system shares extents, no mkfs.xfs or XFS), -ENOENT when its holder
 * does not run (disk-stock.c starts it). */
int hutch_disk_pool_open(const char *runtime_dir);
/* Its holder started (the stock's process: in the creator's cgroup) in
 * dirfd (the stock's .disk) if it does not run: 1, 0 where there is to be
 * none, -errno with err set. */
int hutch_disk_pool_start(const char *runtime_dir, int dirfd, struct hutch_err *err);
/* Its directories given to req's ids and cloned for init: fds[] as
 * HUTCH_MSG_READY carries them ([HUTCH_DISK_ROOT] is root, [_FILE] file). */
int hutch_disk_hand_over(int mnt, int root, int file, const struct hutch_disk_request *req,
                         int fds[HUTCH_DISK_FDS], struct hutch_err *err);

#endif
