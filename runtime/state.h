/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-disk state of sandboxes: $HUTCH_RUNTIME_DIR (default /run/hutch)/<id>/
 * holds api.sock, exec.sock (hutch exec's), state.json, lock (flock'ed by
 * the live supervisor) and root (the empty mount point of the sandbox root). A supervisor's lock is
 * released by the kernel when it dies, which is how gc tells live from
 * dead. <runtime>/.gone/<id> remembers why a sandbox ended (expired,
 * deleted, crashed, supervisor-died) so later calls can say so. uid slots live in a machine-wide
 * directory so that two runtime dirs never share a host id range.
 * (state.c; a dead sandbox's reaping, kill and gc: state-gc.c.)
 */
#ifndef HUTCH_STATE_H
#define HUTCH_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "util.h"

#define HUTCH_DEFAULT_RUNTIME_DIR "/run/hutch"
#define HUTCH_SLOTS_DIR           "/run/hutch-uids"
#define HUTCH_UID_BASE            0x10000000u /* 268435456 */
#define HUTCH_UID_RANGE           65536u
#define HUTCH_SLOTS               16384u
#define HUTCH_GONE_KEEP_SECONDS   (7 * 86400)
#define HUTCH_GONE_PRUNE_SECONDS  3600
#define HUTCH_GC_RESCAN_SECONDS   60

/* The runtime dir: $HUTCH_RUNTIME_DIR, else /run/hutch as root and
 * $XDG_RUNTIME_DIR/hutch or /tmp/hutch-<uid> otherwise (never NULL). */
const char *hutch_runtime_dir(void);

/* hutch exec's socket's name, beside api.sock (supervisor/api/exec-sock.c) */
#define HUTCH_EXEC_SOCK_NAME "exec.sock"
/* A symlink to it, made by a supervisor that also reads the request form
 * without JSON (base/frame.h, HUTCH_REQ_MAGIC): hutch's CLI connects there
 * and sends that form; where it is missing (a supervisor of an older hutch
 * still running after an upgrade) the CLI goes by POST /exec's JSON, which
 * every supervisor reads. exec.sock itself keeps taking JSON. */
#define HUTCH_EXEC_FORMS_NAME "exec-forms.sock"

/* The longest runtime directory hutch_paths_init() takes (its sockets'
 * paths must fit a sockaddr_un's 108 bytes anyway). It bounds the paths
 * below so that struct hutch_paths fits a page: seven 4 KiB buffers made
 * every function holding one touch seven pages, whatever the paths'
 * length (issue 31). */
#define HUTCH_RUNTIME_DIR_MAX 512
/* "<runtime dir>/.dead-<id>" (hutch_state_retired_paths()) and a file in it */
#define HUTCH_PATHS_DIR_MAX  (HUTCH_RUNTIME_DIR_MAX + sizeof("/.dead-") + HUTCH_ID_LEN)
#define HUTCH_PATHS_FILE_MAX (HUTCH_PATHS_DIR_MAX + 16)

/* Paths of one sandbox (fixed buffers, 3.3 KB in all). */
struct hutch_paths {
	char id[HUTCH_ID_LEN + 1];
	char dir[HUTCH_PATHS_DIR_MAX];
	char sock[HUTCH_PATHS_FILE_MAX];
	char exec[HUTCH_PATHS_FILE_MAX]; /* hutch exec's socket (supervisor/api/exec-sock.c) */
	char state[HUTCH_PATHS_FILE_MAX];
	char lock[HUTCH_PATHS_FILE_MAX];
	char root[HUTCH_PATHS_FILE_MAX];
};
/* -ENAMETOOLONG: runtime_dir is longer than HUTCH_RUNTIME_DIR_MAX; then,
 * as for an invalid id (-EINVAL), every path is empty. */
/* HUTCH_RUNTIME_DIR's bound (HUTCH_RUNTIME_DIR_MAX, hutch_paths_init()'s):
 * 0, or -ENAMETOOLONG with the usage error that names the fix in *err. */
int hutch_runtime_dir_bound(const char *runtime_dir, struct hutch_err *err);
int hutch_paths_init(const char *runtime_dir, const char *id, struct hutch_paths *ret);

/* Open and flock (LOCK_SH or LOCK_EX, maybe | LOCK_NB) $RT/.create.lock.
 * Creators hold it shared while a ".new-<id>" directory exists; gc sweeps
 * those only when it gets it exclusively. Returns the fd or -errno. */
int hutch_state_create_lock(const char *runtime_dir, int op);

/* Take a free uid slot of the nslots whose lock files are in dir
 * (idmap.h: HUTCH_SLOTS_DIR as root, the caller's own rootless): returns
 * the locked fd (keep it open for the sandbox's life) and the slot number.
 * The slots are opened by name beneath dir's fd: no path buffers (a
 * supervisor's stack before its clone3, issue 31). */
int hutch_slot_acquire(const char *dir, unsigned nslots, unsigned *ret_slot, struct hutch_err *err);
/* A pod's container runs with the ids of the pod's slot (supervisor/pod.c):
 * it pins the slot (a shared lock on "<dir>/<slot>.pin", the fd returned,
 * kept for its life) and hutch_slot_acquire() skips a pinned slot even
 * when no supervisor holds it. The caller checks, after pinning, that the
 * slot's sandbox still lives. */
int hutch_slot_pin(const char *dir, unsigned slot, struct hutch_err *err);
/* True while a supervisor holds the slot. */
bool hutch_slot_is_held(unsigned slot);

/* The largest state.json hutch_state_read() reads back. */
#define HUTCH_STATE_MAX 65536
/* Write state.json's text (len bytes, NUL-terminated) atomically (temp +
 * rename); -E2BIG over HUTCH_STATE_MAX. The supervisor writes it without
 * libcjson (supervisor/status.c, base/jsonw.h). */
int hutch_state_write_text(const struct hutch_paths *p, const char *text, size_t len);
/* Read state.json (caller deletes). */
int hutch_state_read(const struct hutch_paths *p, cJSON **ret);
/* 1 if a supervisor holds the lock, 0 if not, -errno. */
int hutch_state_is_live(const struct hutch_paths *p);

/* Tombstones. */
int hutch_gone_write(const char *runtime_dir, const char *id, const char *reason, int64_t at);
/* Move state_dir/name beside the tombstone, as <runtime dir>/.gone/<id>
 * <suffix> (the runtime dir is state_dir's parent; the same file system).
 * 0, or -errno (-ENOENT: no such file, nothing to keep). */
int hutch_gone_keep(const char *state_dir, const char *id, const char *name, const char *suffix);
/* 1 and fills reason/at if a tombstone exists, 0 if not. */
int hutch_gone_read(const char *runtime_dir, const char *id, char *reason, size_t size,
                    int64_t *at);

/* The reason of a sandbox whose supervisor died (killed or crashed) and
 * which gc removed: its tombstone's time is gc's. */
#define HUTCH_GONE_SUPERVISOR_DIED "supervisor-died"
/* How a sandbox that ended for reason ("deleted", "expired", "crashed",
 * "supervisor-died") is said, for "sandbox ID <this> at TIME" in every
 * message (API, CLI): "was deleted", "expired", "crashed", "ended: its
 * supervisor died (killed or crashed) and hutch gc removed it". */
const char *hutch_gone_words(const char *reason);

/* Resolve a full id or unique prefix to an existing sandbox id. -ENOENT if
 * none, -ENOTUNIQ if ambiguous. */
int hutch_state_resolve(const char *runtime_dir, const char *prefix,
                        char ret_id[static HUTCH_ID_LEN + 1]);
/* List ids of sandbox dirs (sorted); *ret is malloc'ed array of ids. */
int hutch_state_list(const char *runtime_dir, char (**ret)[HUTCH_ID_LEN + 1], size_t *ret_n);

/* Remove what a dead sandbox left (cgroup dirs recorded in state.json, the
 * state dir); refuses if its supervisor is alive. Its journal, log and
 * egress log are kept beside a tombstone of reason ("deleted" for rm,
 * HUTCH_GONE_SUPERVISOR_DIED for gc; one its supervisor wrote stays), as
 * a supervisor's own end keeps them. Returns 1 if removed. */
int hutch_state_reap(const char *runtime_dir, const char *id, const char *reason,
                     struct hutch_err *err);
/* For `rm -f` of a sandbox whose supervisor does not answer: SIGKILL the
 * supervisor named in state.json (only if that process holds the sandbox's
 * lock file open, so a reused pid is never hit), then reap as above.
 * Returns 1 when removed. */
int hutch_state_kill(const struct hutch_paths *p, struct hutch_err *err);
/* Take a sandbox out of sight once its processes are dead: rename its dir
 * to "<runtime>/.dead-<id>" (not an id, so ls, resolve and connect no
 * longer find it; its lock, still held, and state.json, naming the
 * cgroups, stay until the supervisor's teardown finishes, or gc does it).
 * Fills *ret with the new paths on success. */
#define HUTCH_RETIRED_PREFIX ".dead-"
_Static_assert(sizeof(HUTCH_RETIRED_PREFIX) == sizeof(".dead-"), "HUTCH_PATHS_DIR_MAX");
int hutch_state_retire(const struct hutch_paths *p, struct hutch_paths *ret);
/* The paths hutch_state_retire() gives p, without renaming anything. */
int hutch_state_retired_paths(const struct hutch_paths *p, struct hutch_paths *ret);
/* gc: reap every dead sandbox (retired ones included) and stale
 * tombstones; returns how many reaped.
 * O(sandboxes + tombstones): `hutch gc`. */
int hutch_state_gc(const char *runtime_dir, struct hutch_err *err);
/* gc as every create runs it. O(1) when nothing can have died since the
 * last full gc: the runtime dir has the same number of subdirectories as
 * after it (a supervisor removes its own dir when it ends; one that crashed
 * leaves it, which changes the count) and it ran less than
 * HUTCH_GC_RESCAN_SECONDS ago. Otherwise a full gc, with tombstones pruned
 * at most every HUTCH_GONE_PRUNE_SECONDS. A crashed sandbox whose count
 * change was masked (another sandbox ended cleanly between two creates) is
 * reaped by the first create after HUTCH_GC_RESCAN_SECONDS, or `hutch gc`. */
int hutch_state_gc_auto(const char *runtime_dir, struct hutch_err *err);

/* The default runtime dir of a caller who is not root:
 * $XDG_RUNTIME_DIR/hutch when that is set, else /tmp/hutch-<uid>. */
int hutch_state_user_runtime_dir(char *buf, size_t size);

/*
 * Rootless: make dir if missing (mode 0700) and check that it is a real
 * directory (no symlink), owned by the caller and writable by no one else,
 * so no other user can plant or read sandboxes there (/tmp/hutch-<uid>
 * could have been made by anyone). Root: 0 without a look.
 */
int hutch_runtime_dir_check(const char *dir, struct hutch_err *err);

#endif
