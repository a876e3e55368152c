/* SPDX-License-Identifier: Apache-2.0 */
/* What disk.c gives disk-fork.c: a disk made, and handed over. */
#ifndef HUTCH_DISK_INTERNAL_H
#define HUTCH_DISK_INTERNAL_H

#include <stdint.h>

#include "disk.h"
#include "error.h"

/* A disk of bytes made (the template copied into *file, a loop device,
 * ext4 mounted detached, its directories laid out): its mount *mnt and
 * root *root. */
int hutch_disk_make(const char *runtime_dir, uint64_t bytes, int *file, int *mnt, int *root,
                    struct hutch_err *err);
/* A disk's file (an ext4) behind a loop device and mounted detached. */
int hutch_disk_attach(const char *runtime_dir, int file, int *mnt, int *root,
                      struct hutch_err *err);
/* Where a runtime dir's disks' files are made: an O_TMPFILE's fd, or
 * -errno with err set. */
int hutch_disk_new_file(const char *runtime_dir, struct hutch_err *err);
/* Its directories given to req's ids and cloned for init: fds[] as
 * HUTCH_MSG_READY carries them ([HUTCH_DISK_ROOT] is root, [_FILE] file). */
int hutch_disk_hand_over(int mnt, int root, int file, const struct hutch_disk_request *req,
                         int fds[HUTCH_DISK_FDS], struct hutch_err *err);

#endif
