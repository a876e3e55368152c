/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots, the restore (docs/snapshots.md "Full snapshots: the
 * restore"): a plain sandbox just made (its init "the donor") has its
 * processes replaced by the dump's of cfg->full_snapshot, restored by CRIU
 * onto its own uid range, cgroups, disk and mounts.
 */
#ifndef HUTCH_SUP_FULLRESTORE_H
#define HUTCH_SUP_FULLRESTORE_H

#include "error.h"

struct sup;

/*
 * After setup, init ready: the restore (s->cfg->full_snapshot). 0: the
 * restored init is s's (init_pid, pidfd, init_sock), the donor reaped.
 * Failures: not capable (no CRIU that passes 'criu check'), usage (a
 * snapshot this build cannot restore), I/O (CRIU's own error lines); the
 * caller tears the sandbox down, the snapshot untouched.
 */
int hutch_sup_restore_full(struct sup *s, struct hutch_err *err);

#endif
