/* SPDX-License-Identifier: Apache-2.0 */
/* Exit codes of the hutch CLI (documented in README and hutch(1)). An
 * error's class gives its code through base/error.c's one table
 * (hutch_errc_exit(), docs/errors.md); these name the same numbers. */
#ifndef HUTCH_CLI_H
#define HUTCH_CLI_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#define HUTCH_EXIT_USAGE       64  /* bad command line or option value */
#define HUTCH_EXIT_NOT_FOUND   65  /* no such sandbox */
#define HUTCH_EXIT_GONE        66  /* the sandbox expired or was deleted */
#define HUTCH_EXIT_NOT_CAPABLE 69  /* not root, or the kernel lacks a feature */
#define HUTCH_EXIT_FAILURE     70  /* anything else went wrong in hutch */
#define HUTCH_EXIT_SETUP       71  /* the setup script or on_create hook failed or timed out */
#define HUTCH_EXIT_TIMEOUT     124 /* the command ran past --timeout */

struct hutch_paths;
struct hutch_cli_args;
struct hutch_image_store;

/* A file read as it grows (hutch journal, net-log): buf holds cap + 1
 * bytes, len of them read but not yet given out. */
struct hutch_cli_lines {
	int fd;
	char *buf;
	size_t len, cap;
};
/* Give fn each complete line the file has now, without its newline (and
 * a run of cap bytes without one, as a line); 0, or prints why (path
 * names the file) and returns the exit code. */
int hutch_cli_lines_drain(struct hutch_cli_lines *f, const char *path,
                          void (*fn)(void *ud, const char *line, size_t len), void *ud);
/* An ended sandbox's supervisor may still be writing a file's last lines
 * (rm returns at the DELETE answer), holding its flock: wait for it to
 * let go, at most 10 s (one that hangs: read what is there). */
void hutch_cli_wait_writer(int fd);

/* verb-image.c: the store of --store, HUTCH_IMAGE_STORE, else root's or
 * the user's own, opened; else prints why and returns the exit code. */
int hutch_cli_open_store(const struct hutch_cli_args *a, struct hutch_image_store **ret);

/* cli-common.c: print "hutch: MESSAGE" to stderr; returns code. */
int hutch_cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An id or unique prefix -> paths; else prints why (64 ambiguous or not an
 * id, 65 unknown, 66 expired/deleted) and returns that exit code. */
int hutch_cli_resolve(const char *arg, struct hutch_paths *p);
/* The same, quietly returning HUTCH_CLI_SKIP (no message) for an ended
 * sandbox (HUTCH_CLI_GONE_OK) or one never seen (HUTCH_CLI_MISSING_OK):
 * rm is idempotent. */
#define HUTCH_CLI_GONE_OK    (1u << 0)
#define HUTCH_CLI_MISSING_OK (1u << 1)
#define HUTCH_CLI_SKIP       (-2)
int hutch_cli_resolve_as(const char *arg, unsigned flags, struct hutch_paths *p);
/* 66, naming why and when sandbox id ended (its tombstone: "sandbox ID
 * was deleted at T"), then tail; without a tombstone, that it was removed. */
int hutch_cli_gone(const char *id, const char *tail);
/* 66: sandbox id's supervisor is gone (killed or crashed: nobody holds
 * its lock), what it left for 'hutch gc'; what: the record it left none
 * of ("journal", ...), or NULL. */
int hutch_cli_supervisor_gone(const char *id, const char *what);
/* 66 with the message if p's supervisor is gone, else 0. */
int hutch_cli_check_live(const struct hutch_paths *p);
/* A record kept of sandbox id (what: "journal", "egress log", "log") that
 * is not there; keep says for how long one is kept, when none is written.
 * 66 if the sandbox is gone (a tombstone: when and why; a state dir no
 * supervisor holds: 'hutch gc'), else 65 (no such sandbox, or pruned). */
int hutch_cli_no_record(const char *id, const char *what, const char *keep);
/* hutch_cli_resolve(), then hutch_cli_check_live(). */
int hutch_cli_open_live(const char *arg, struct hutch_paths *p);
/* A request to the sandbox at sock failed with code (msg says how): if the
 * connection ended or was refused because the sandbox is gone (its
 * supervisor died or it was deleted), say which and return
 * HUTCH_EXIT_GONE; else print msg and return HUTCH_EXIT_FAILURE. */
int hutch_cli_lost(const char *sock, int code, const char *msg);

/* verb-image.c: --image NAME (not host) to its manifest digest in cfg
 * (the pool key, and what the supervisor mounts), fetching what the store
 * lacks with its progress on stderr (none when quiet); 0, or prints why
 * (65: no such image or snapshot, 64: an invalid name) and returns the exit code. */
struct hutch_config;
int hutch_cli_resolve_image(struct hutch_config *cfg, bool quiet);
/* What of cfg a full snapshot's restore cannot make (a plain sandbox of
 * network none, as the dump's source): "volumes (-v)", ...; NULL: none. */
const char *hutch_cli_full_restore_drop(const struct hutch_config *cfg);

/* fork-full.c: hutch fork --full's dump recorded in the runtime dir rt
 * before it is asked for (source, its name, its store), the record held
 * locked in *ret_fd (0, or -errno); dropped by unmark once the dump is
 * removed (hutch_cli_fork_full_remove(): 1 removed, 0 none, or -errno
 * said in err); hutch gc removes the dumps of the records nobody holds
 * (the count of records gone). */
int hutch_cli_fork_full_mark(const char *rt, const char *source, const char *name,
                             const char *store, int *ret_fd);
void hutch_cli_fork_full_unmark(const char *rt, const char *name, int *fd);
struct hutch_err;
int hutch_cli_fork_full_remove(const char *store, const char *name, struct hutch_err *err);
int hutch_cli_fork_full_gc(const char *rt);
/* hutch fork --full of a->pos[0] (fork-full.c): one dump, n restores by
 * the creators cr (unstarted) into c, the dump removed, the forks handed
 * over; 0 or the exit code (said). */
struct hutch_fork_creator;
struct hutch_created;
int hutch_cli_fork_full(struct hutch_cli_args *a, struct hutch_fork_creator *cr,
                        struct hutch_created *c, size_t n);

/* sandbox-json.c: give o (the create answer, a state.json, GET /status)
 * the one sandbox schema: "status" (dead when not live), "live", and
 * created_at / expires_at as RFC 3339 strings plus "<name>_unix", "root"
 * ("host" or "image") and "image" (its name or null) from config.image. */
void hutch_cli_sandbox_json(cJSON *o, bool live);
/* create --json (sandbox-json.c): the sandbox c just created with cfg
 * in that schema, printed to stdout as cJSON_Print() lays it out, written
 * with base/jsonw.c (libcjson loaded only for -p's ports and
 * --executor-port's secret, which state.json has); 0 or -errno. */
struct hutch_created;
int hutch_cli_print_created(const struct hutch_config *cfg, const struct hutch_created *c);
/* "hutch: root: ..." on fd (nothing when fd < 0): which root a sandbox
 * created with cfg has, for people. */
void hutch_cli_say_root(const struct hutch_config *cfg, int fd);
/* qsort() order of two such sandboxes (cJSON **): newest first, as docker
 * ps, by created_at_unix; one being made (none yet) before all; then id. */
int hutch_cli_sandbox_cmp(const void *x, const void *y);

#endif
