/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How a sandbox's ids map onto the host, the one thing besides the cgroup
 * parent and the network wiring that differs between root and rootless
 * mode (DESIGN §2).
 *
 * Root: each sandbox takes a uid slot of 65536 host ids of its own
 * (HUTCH_UID_BASE + slot * 65536) and the supervisor writes uid_map and
 * gid_map itself.
 *
 * Rootless (not root): the sandbox's root is the caller, and only the few
 * other ids a sandbox uses (appuser, nobody, and the tty group) come from
 * the caller's subordinate ranges (/etc/subuid, /etc/subgid),
 * HUTCH_IDMAP_STRIDE ids per slot, so one 65536-id range serves 16384
 * sandboxes at once, each with ids of its own. The maps are written by the
 * setuid newuidmap/newgidmap (package uidmap), which check the ranges
 * against those files. The slots are the caller's own (a directory of
 * theirs), since the ranges are.
 */
#ifndef HUTCH_IDMAP_H
#define HUTCH_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Host ids per rootless slot: appuser, nobody, tty (gid), one spare. */
#define HUTCH_IDMAP_STRIDE 4u
#define HUTCH_SUBUID_FILE  "/etc/subuid"
#define HUTCH_SUBGID_FILE  "/etc/subgid"

struct hutch_idmap {
	bool rootless;
	uid_t uid; /* the caller (rootless: the sandbox's root) */
	gid_t gid;
	uint32_t subuid, subuid_n; /* the caller's first usable subordinate ranges */
	uint32_t subgid, subgid_n;
	unsigned slots;                    /* how many sandboxes at once */
	char slots_dir[4096];              /* the uid slots' lock files */
	char newuidmap[64], newgidmap[64]; /* rootless: the helpers' paths */
};

/*
 * Fill m for the calling process: root mode when the effective uid is 0,
 * else rootless, which needs the caller's subordinate ids (at least
 * HUTCH_IDMAP_STRIDE of each) and the newuidmap/newgidmap helpers. Errors
 * name the fix; -EPERM when the host or the account lacks something.
 * Call it before the environment is cleared (the slots dir comes from
 * XDG_RUNTIME_DIR).
 */
int hutch_idmap_detect(struct hutch_idmap *m, struct hutch_err *err);

/*
 * Pure: find the first range of the subordinate-id file text (lines
 * "name_or_uid:start:count") for the user called name or with the number
 * id, with at least min ids. Returns 0 and fills the range, or -ENOENT.
 */
int hutch_idmap_parse_subid(const char *text, const char *name, uint32_t id, uint32_t min,
                            uint32_t *ret_start, uint32_t *ret_count);

/*
 * Pure: the map of slot, as newuidmap takes it (triples "inside outside
 * count" separated by spaces) or as /proc/PID/uid_map takes it (one triple
 * per line), for uids (gid false) or gids. Returns the length or -ENOSPC.
 */
int hutch_idmap_format(const struct hutch_idmap *m, unsigned slot, bool gid, bool lines, char *buf,
                       size_t size);

/* The host uid that appuser (uid 1000 inside) has in slot. */
uid_t hutch_idmap_app_uid(const struct hutch_idmap *m, unsigned slot);

/* Write pid's uid_map and gid_map for slot (root: the files; rootless:
 * newuidmap and newgidmap, whose complaint ends up in err). */
int hutch_idmap_write(const struct hutch_idmap *m, unsigned slot, pid_t pid, struct hutch_err *err);

/*
 * The same in two halves, so that the caller works while the helpers run:
 * _start() writes the files (root) or starts newuidmap and newgidmap at
 * once (rootless: each is a setuid exec that reads the password and
 * subordinate-id files, ~1-2 ms); _finish() waits for them and reports
 * the first that refused. _finish() must follow every _start(), whatever
 * it returned.
 */
struct hutch_idmap_helper {
	const char *path;
	pid_t pid;
	int out; /* read end of its stdout + stderr */
	char args[256];
};
struct hutch_idmap_job {
	pid_t target;
	int started; /* helpers running */
	struct hutch_idmap_helper h[2];
};
int hutch_idmap_write_start(const struct hutch_idmap *m, unsigned slot, pid_t pid,
                            struct hutch_idmap_job *job, struct hutch_err *err);
int hutch_idmap_write_finish(struct hutch_idmap_job *job, struct hutch_err *err);

#endif
