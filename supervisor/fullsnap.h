/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots, the dump (docs/snapshots.md "Full snapshots"): the
 * sandbox's whole process tree, init its root, dumped by CRIU into the
 * store as full/NAME, private to the store's owner. What a restore could
 * not remake is refused before anything is made.
 */
#ifndef HUTCH_SUP_FULLSNAP_H
#define HUTCH_SUP_FULLSNAP_H

#include <cjson/cJSON.h>

#include "error.h"

struct sup;

/*
 * POST /snapshot {"type": "full"}: the dump as full snapshot name (NULL:
 * snap-<id>-<n>); *ret the answer (name, type, source, criu, bytes,
 * duration_ms). The sandbox runs on after it. Refusals: usage (a kind,
 * network, volume, binding or change-list setting a restore cannot
 * remake), not capable (rootless, --no-limits, no CRIU that passes
 * 'criu check'), conflict (the name taken, the sandbox asleep or
 * paused), I/O (CRIU's own error lines).
 */
int hutch_sup_snapshot_full(struct sup *s, const char *name, cJSON **ret, struct hutch_err *err);

#endif
