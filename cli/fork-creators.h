/* SPDX-License-Identifier: Apache-2.0 */
/* cli/fork-creators.c: what hutch fork's two routes share (verb-fork.c's
 * by disk or snapshot, fork-full.c's --full): the N creates at once, each
 * in a creator child, handed over all or none. */
#ifndef HUTCH_CLI_FORK_CREATORS_H
#define HUTCH_CLI_FORK_CREATORS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "disk.h"

struct hutch_cli_args;
struct hutch_created;
struct hutch_paths;

/* A fork's creator: its pid, our end of its socket (closed: it gives up,
 * if it still waits for its disk), the disk's name ("": none, a snapshot
 * is the forks' root). Unstarted: pid 0, sock -EBADF. */
struct hutch_fork_creator {
	pid_t pid;
	int sock;
	char disk[HUTCH_DISK_FORK_NAME_MAX];
};

/* The n creators started, each on its disk (cr[i].disk, set) or none, a
 * create of a->cfg each; not_theirs: an fd of ours they close (a full
 * fork's record, whose lock must end with us, not with a supervisor a
 * creator leaves behind; -EBADF: none). 0, or prints why and returns the
 * exit code (those started: give them up). */
int hutch_fork_creators_start(struct hutch_cli_args *a, struct hutch_fork_creator *cr, size_t n,
                              int not_theirs);
/* Every creator's answer, in order, and every creator reaped: 0 with the
 * n forks in c[], or the first failure's exit code (*failed: its index)
 * with every fork made dropped (its supervisor deletes it). */
int hutch_fork_creators_collect(struct hutch_fork_creator *cr, size_t n, struct hutch_created *c,
                                size_t *failed);
/* The creators given up (each waiting for a disk that will not come
 * ends; a create on one ends with its forker), and reaped. */
void hutch_fork_creators_give_up(struct hutch_fork_creator *cr, size_t n);

/* The source's config ({"config": ...}): its state.json's, else GET
 * /status's; 0 or the exit code (said). */
int hutch_fork_source_config(const struct hutch_paths *p, cJSON **ret);
/* a->cfg's root set: the snapshot v (by_disk false) or the image v with
 * a disk each; 0 or the exit code (said). */
int hutch_fork_root(struct hutch_cli_args *a, const char *v, bool by_disk);

/* --json's object o (its other fields set) given "forks": the ids, and
 * printed; o NULL: the ids, one a line. */
void hutch_fork_print_ids(cJSON *o, const struct hutch_created *c, size_t n);
/* print (the route's: its --json or lines; ans is the source's answer,
 * POST /fork's or /snapshot's) called, then the hand-overs, with SIGINT
 * and SIGTERM held meanwhile (an id is given out whole or its sandbox
 * deleted: sandbox.h); 0, or the exit code (said) with every fork dropped. */
int hutch_fork_hand_over(struct hutch_cli_args *a, const char *src, const cJSON *ans,
                         struct hutch_created *c, size_t n,
                         void (*print)(const struct hutch_cli_args *a, const char *src,
                                       const cJSON *ans, const struct hutch_created *c, size_t n));

#endif
