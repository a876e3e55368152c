/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every verb of the hutch command, by the file that holds it; main.c
 * dispatches to them, args.c parses their options.
 */
#ifndef HUTCH_VERBS_H
#define HUTCH_VERBS_H

#include <stdint.h>

#include "args.h"

/* verb-sandbox.c */
extern const struct hutch_cli_verb hutch_verb_run, hutch_verb_create, hutch_verb_exec,
        hutch_verb_ls, hutch_verb_inspect, hutch_verb_rm, hutch_verb_gc;
/* Create a sandbox of cfg as hutch create does (the environment's options,
 * validation, --image resolved, a warm pool's, --progress WHEN); 0 with c
 * filled, to hand over (hutch_created_ack()), or an exit code after saying
 * why. */
struct hutch_created;
int hutch_cli_create_sandbox(struct hutch_config *cfg, const char *progress,
                             struct hutch_created *c);
/* The same for hutch run, its command's stream_fd (-1: none) sent with a
 * cold create (c->command_sent; hutch_sandbox_create_run()). */
int hutch_cli_create_run(struct hutch_config *cfg, const char *progress, int stream_fd,
                         struct hutch_created *c);
/* verb-fork.c: fork ID [-n N], rollback ID SNAPSHOT */
extern const struct hutch_cli_verb hutch_verb_fork;
/* verb-procs.c */
extern const struct hutch_cli_verb hutch_verb_ps, hutch_verb_logs, hutch_verb_kill,
        hutch_verb_stdin;
/* hutch exec -d (the verb is exec's): start a background process. */
int hutch_cli_exec_detached(struct hutch_cli_args *a);
/* verb-pool.c: "pool start", "pool stop", "pool ls", "pool key" */
extern const struct hutch_cli_verb hutch_verb_pool_start, hutch_verb_pool_stop, hutch_verb_pool_ls,
        hutch_verb_pool_key;
/* hutch pool SUB ...: argv[0] is "pool". */
int hutch_cli_pool(int argc, char **argv, const struct hutch_cli_verb *const *all);
/* verb-stats.c, verb-events.c, verb-timeout.c */
extern const struct hutch_cli_verb hutch_verb_stats, hutch_verb_events, hutch_verb_set_timeout;
/* verb-image.c: "image pull", "image import", "image ls", "image inspect", "image rm",
 * "image prune", "image build-default" */
extern const struct hutch_cli_verb hutch_verb_image_pull, hutch_verb_image_import,
        hutch_verb_image_ls, hutch_verb_image_inspect, hutch_verb_image_rm, hutch_verb_image_prune,
        hutch_verb_image_build_default;
/* hutch image SUB ...: argv[0] is "image". */
int hutch_cli_image(int argc, char **argv, const struct hutch_cli_verb *const *all);
/* verb-journal.c */
extern const struct hutch_cli_verb hutch_verb_journal;
/* The lines of a journal, oldest first, parsed (ret: a cJSON array), and
 * its chain checked in check (check->why set at the first break: the
 * lines after it are not in ret); arg is a sandbox's id (live or ended,
 * both files) or a journal file's path. 0, or an exit code after saying
 * why. */
struct hutch_journal_check;
int hutch_cli_journal_load(const char *arg, cJSON **ret, struct hutch_journal_check *check);
/* verb-replay.c */
extern const struct hutch_cli_verb hutch_verb_replay;
/* verb-diff.c */
extern const struct hutch_cli_verb hutch_verb_diff;
/* verb-netlog.c */
extern const struct hutch_cli_verb hutch_verb_net_log;
/* verb-volume.c: "volume create", "volume ls", "volume inspect", "volume rm" */
extern const struct hutch_cli_verb hutch_verb_volume_create, hutch_verb_volume_ls,
        hutch_verb_volume_inspect, hutch_verb_volume_rm;
/* hutch volume SUB ...: argv[0] is "volume". */
int hutch_cli_volume(int argc, char **argv, const struct hutch_cli_verb *const *all);
/* --store, HUTCH_IMAGE_STORE or the default, opened (verb-image.c); 0 or
 * the exit code, said on stderr. */
struct hutch_image_store;
int hutch_cli_image_store_open(const char *given, struct hutch_image_store **ret);
/* The same for a verb that only reads or removes: 0 and *ret NULL (nothing
 * made) when the store is not made yet; hutch_cli_store_absent() then says
 * "no WHAT 'NAME'" with why (65). */
int hutch_cli_image_store_find(const char *given, struct hutch_image_store **ret);
int hutch_cli_store_absent(const char *what, const char *name, const char *given);
/* verb-snapshot.c: "snapshot" (capture), "snapshot ls", "snapshot inspect", "snapshot rm",
 * "rollback" */
extern const struct hutch_cli_verb hutch_verb_snapshot, hutch_verb_snapshot_ls,
        hutch_verb_snapshot_inspect, hutch_verb_snapshot_rm, hutch_verb_rollback;
/* hutch snapshot SUB ... or hutch snapshot ID [NAME]: argv[0] is "snapshot". */
int hutch_cli_snapshot(int argc, char **argv, const struct hutch_cli_verb *const *all);
/* verb-port.c */
extern const struct hutch_cli_verb hutch_verb_port;
/* cp.c's copies into a sandbox, as hutch cp LOCAL ID:PATH makes them (a
 * file keeps its mode, a directory goes as a tar stream); the bytes of fd
 * (length, or -1: chunked) into remote with mode (octal text, or NULL).
 * 0 or an exit code after saying why. */
struct hutch_paths;
int hutch_cli_cp_in(const struct hutch_paths *p, const char *local, const char *remote);
int hutch_cli_cp_put(const struct hutch_paths *p, const char *remote, int fd, int64_t length,
                     const char *mode);
/* verb-build.c */
extern const struct hutch_cli_verb hutch_verb_build;
/* cp.c, doctor.c, completion.c */
extern const struct hutch_cli_verb hutch_verb_cp, hutch_verb_doctor, hutch_verb_completion;

#endif
