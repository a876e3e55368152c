/* SPDX-License-Identifier: Apache-2.0 */
/* Where a sandbox's cgroup nests (cgroup-place.c). */
#ifndef HUTCH_CGROUP_PLACE_H
#define HUTCH_CGROUP_PLACE_H

#include <stdbool.h>
#include <stddef.h>

#include "cgroup-util.h"
#include "error.h"

/* mkdir the missing parents of a cgroupsPath's
 * directories, top down (v2: each delegating cpu memory pids), counting
 * them in cg->made; and rmdir those, deepest first. */
int hutch_cgroup_make_parents(struct hutch_cgroup *cg, struct hutch_err *err);
void hutch_cgroup_remove_made(struct hutch_cgroup *cg);

/*
 * v2: the directory to nest sandboxes in, starting from
 * our own cgroup directory own, such that its cgroup.subtree_control lists
 * every controller in want (space separated). A delegated own (systemd's
 * mark, or our cgroup namespace's root) has its processes moved into a
 * leaf child and the controllers enabled in it; otherwise the nearest
 * ancestor that can have them.
 */
int hutch_cgroup_v2_pick_parent(const char *own, const char *want, char *ret, size_t size,
                                struct hutch_err *err);
/* own needs no write above itself to give children the
 * controllers of want (it has them already, is the real root, or is ours:
 * delegated, or our cgroup namespace's root). */
bool hutch_cgroup_v2_is_placeable(const char *own, const char *want);

#endif
