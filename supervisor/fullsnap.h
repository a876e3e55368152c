/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots, the dump (docs/snapshots.md "Full snapshots"): the
 * sandbox's whole process tree, init its root, dumped by CRIU into the
 * store as full/NAME, private to the store's owner. What a restore could
 * not remake is refused before anything is made.
 */
#ifndef HUTCH_SUP_FULLSNAP_H
#define HUTCH_SUP_FULLSNAP_H

#include <stdbool.h>
#include <sys/types.h>

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

/*
 * init's files on mounts outside its mount namespace (its executable, its
 * libraries' mappings, its fds on host files): CRIU's external files, each
 * its key (file[MNT:INODE], hex), role ("exe", "fd/N", "map") and a path
 * under /proc/PID to reach it. The dump names them external (its
 * snapshot.json's "files": key -> role); the restore finds each in the new
 * sandbox's init by key, else by role.
 */
#define HUTCH_FULL_FILES_MAX 64
struct hutch_full_files {
	struct {
		char key[64], role[32], path[64];
	} f[HUTCH_FULL_FILES_MAX];
	size_t n;
};
int hutch_sup_full_files(pid_t pid, struct hutch_full_files *ret, struct hutch_err *err);

/* init made (non-)dumpable (HUTCH_MSG_DUMPABLE), seen done in
 * /proc/PID/status's owner, bounded by 5 s. */
int hutch_sup_full_dumpable(struct sup *s, bool on, struct hutch_err *err);
/* The runtime dir a sandbox's state dir is in (CRIU's caches are there). */
void hutch_sup_full_runtime_dir(const struct sup *s, char *buf, size_t size);

#endif
