/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forks by disk copy on the source's side (POST /fork, docs/snapshots.md
 * "Fork"): count disks of bytes made, filled with a copy of the sandbox's
 * disk while it is frozen, each waiting for its fork's creator.
 */
#ifndef HUTCH_SUP_FORK_H
#define HUTCH_SUP_FORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

struct sup;

/*
 * On success *ret is {disks: [names], source, image, method ("clone":
 * every disk a clone of the source's file; "copy"), frozen_ms, duration_ms}: a fork is created with
 * the image and one name (hutch_config.disk_from). Refused (not capable) for a sandbox whose
 * writable places are not a disk, an ordinary user's, one without a cgroup,
 * and, copy false, one whose disk cannot be cloned (no reflinks, another
 * size): nothing made. names (NULL: ours): the disks' socket names, the
 * creator's (hutch_disk_fork_name_is_valid(), count of them, a name taken
 * refused): its creates may start before this call and take each disk as
 * its name appears (the forker answers once the disk is filled).
 * client: a pidfd of the request's client (-EBADF: none known), given to
 * every forker: its end ends those whose disk no fork took.
 */
int hutch_sup_fork(struct sup *s, size_t count, uint64_t bytes, bool copy, const cJSON *names,
                   int client, cJSON **ret, struct hutch_err *err);

/* The source's end: its forker made ahead (a fork by clone makes one for
 * the next, FORK_AHEAD_MS after it) let go and waited for (bounded), so
 * that its loop device and its file in the disks' pool go first. */
void hutch_sup_fork_done(struct sup *s);

#endif
