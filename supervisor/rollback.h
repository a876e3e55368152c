/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rollback in place on the supervisor's side (docs/snapshots.md): a live
 * sandbox's filesystem returned to a snapshot of its image's lineage, the
 * sandbox frozen meanwhile, its processes running on after.
 */
#ifndef HUTCH_SUP_ROLLBACK_H
#define HUTCH_SUP_ROLLBACK_H

#include <cjson/cJSON.h>

#include "error.h"

struct sup;

/*
 * Roll the sandbox's files back to snapshot name of its store. On success
 * *ret is {snapshot, changes, bytes, frozen_ms, duration_ms}. Refused with
 * the reason (nothing changed): the host-derived root, an ordinary user's
 * sandbox, one without a cgroup, an unknown snapshot, one of another
 * image. A failure part way ends the sandbox (it is never left half
 * rolled back) and says so.
 */
int hutch_sup_rollback(struct sup *s, const char *name, cJSON **ret, struct hutch_err *err);

#endif
