/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filesystem snapshots on the supervisor's side (docs/snapshots.md): the
 * writable directories init passes at setup, and the capture: the sandbox
 * frozen, its writes read into a new image of the store, thawed.
 */
#ifndef HUTCH_SUP_SNAPSHOT_H
#define HUTCH_SUP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"

struct sup;
struct hutch_image_store;

/* HUTCH_MSG_WRITE_FDS at setup: which[i] says what fds[i] is; takes the
 * fds (closes them on failure). */
int hutch_sup_snapshot_take_fds(struct sup *s, const uint32_t *which, size_t nwhich, int *fds,
                                size_t nfds, struct hutch_err *err);
/* The writable directory which (HUTCH_ROOTFS_WRITE_*) as init passed it,
 * or -EBADF (the supervisor keeps it). */
int hutch_sup_snapshot_fd(struct sup *s, unsigned which);
/* The sandbox's store (where its image is, where snapshots go), open with
 * its writers' lock taken. */
int hutch_sup_snapshot_store(struct sup *s, struct hutch_image_store **ret, struct hutch_err *err);
/* At the end: the fds closed. */
void hutch_sup_snapshot_done(struct sup *s);
/* A new snapshot's name in store (its writers' lock held): *name checked
 * free when given, else made snap-<id>-<n> in buf (n counts this
 * sandbox's snapshots of both kinds; names taken are skipped) and *name
 * pointed at it. */
int hutch_sup_snapshot_name(struct sup *s, struct hutch_image_store *store, const char **name,
                            char *buf, size_t size, struct hutch_err *err);
/* -EINVAL (usage) naming the rules when name is no snapshot name. */
int hutch_sup_snapshot_name_check(const char *name, struct hutch_err *err);
/*
 * Snapshot the sandbox's filesystem as image name of its store (name NULL
 * or "": snap-<id>-<n>). On success *ret is {name, base, layer, layers,
 * bytes, files, frozen_ms, duration_ms}. Refused with the reason: the
 * host-derived root (no image to stack on), a sandbox without a cgroup
 * to freeze, a name taken or invalid. env: NULL, or
 * "NAME=VALUE" entries (NULL-terminated) set in the snapshot's Env over
 * its image's (hutch build's; hutch_image_commit()).
 */
int hutch_sup_snapshot(struct sup *s, const char *name, const char *const *env, cJSON **ret,
                       struct hutch_err *err);
/* -EOPNOTSUPP (not capable): a sandbox without a cgroup cannot be frozen
 * for what ("a snapshot"); an ordinary user's names the fix. */
int hutch_sup_snapshot_no_cgroup(struct sup *s, const char *what, struct hutch_err *err);
/*
 * Rootless: a child of the supervisor in a user namespace of its own
 * mapped as the sandbox's (the snapshot's writer reads appuser's files
 * there, the rollback's worker writes them). The child calls _child()
 * (unshare, then waits on sync), the supervisor _parent() with the
 * child's pid (newuidmap/newgidmap, the sandbox's slot). what prefixes the
 * errors ("snapshot").
 */
int hutch_sup_own_userns_child(int sync, const char *what, struct hutch_err *err);
int hutch_sup_own_userns_parent(struct sup *s, pid_t pid, int sync, const char *what,
                                struct hutch_err *err);
/* hutch diff --since NAME: the change generation that snapshot NAME of
 * this sandbox follows (one of its last 16): 0, or -ENOENT. */
int hutch_sup_snapshot_gen(struct sup *s, const char *name, uint64_t *ret_gen);

#endif
