/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A create held for a source's next fork (docs/snapshots.md "Fork": a
 * sandbox made before the fork). After a fork by clone, `hutch fork
 * --hold` starts a *holder* for its source and options (one per source and
 * runtime/poolkey.h hutch_hold_key()): a detached process whose creator
 * (fork-creators.c) runs one fork's create at once, on a disk's name of
 * its own that nothing makes yet, so that its supervisor does everything
 * up to the disk (its cgroups, init's clone, its maps and network) and
 * awaits the name (runtime/disk.h, HUTCH_DISK_FORK_HOLD_MS). The next
 * `hutch fork` of that source with those options claims it: it renames
 * the token $RT/.forkhold/<source>-<key>.disk (only one rename succeeds),
 * reads the disk's name in it and sends it in POST /fork's "names" at
 * once; then, on its connection to the holder's socket, gets the
 * creator's socket (the create's result and hand-over come there, as
 * from any creator) and the write end of the pipe the held supervisor
 * watches (its closing, by a fork that failed or died, ends the held
 * create). The held create takes its disk as a fork's create does. So a fork is the disk's clone
 * and the hand-over, then init's root.
 *
 * A held sandbox is not listed (state.json's "held_for": ls, ls --json,
 * Python's list), and its TTL is counted from its hand-over
 * (supervisor/claim.c). It ends with its holder: the source's end (its
 * supervisor's pidfd: rm, TTL, kill), `hutch rm` of the source (ended and
 * awaited here), SIGTERM, the holder's time limit; a holder killed (-9)
 * kills its creator (PDEATHSIG) and so the held create, and `hutch gc`
 * removes its files.
 */
#ifndef HUTCH_CLI_FORK_HOLD_H
#define HUTCH_CLI_FORK_HOLD_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "config.h"

struct hutch_cli_args;
struct hutch_fork_creator;

/* Whether forks of cfg may be held (none with a setup script, a hook,
 * published ports, header bindings, volumes or secrets, which are a
 * sandbox's own, as a warm pool's: runtime/poolkey.h). */
bool hutch_fork_hold_can(const struct hutch_config *cfg);
/* The held create of src with key claimed (its token renamed, so no
 * round trip with the holder before POST /fork): cr's disk's name set
 * (pid 0: not our child), *ret_conn our connection to the holder, whose
 * answer hutch_fork_hold_take() reads. 1: claimed; 0: none (no holder,
 * another claimed it: make the fork as without). */
int hutch_fork_hold_claim(const char *rt, const char *src, const char *key,
                          struct hutch_fork_creator *cr, int *ret_conn);
/* The holder's answer on conn: cr->sock the creator's socket (its
 * create's result and hand-over come there, as from any creator) and
 * *ret_pipe (close it to end the held create). 0, or -errno (the held
 * create ends with its holder: that fork failed). */
int hutch_fork_hold_take(int conn, struct hutch_fork_creator *cr, int *ret_pipe);
/* A holder started for src's next fork of a->cfg (key its hold key),
 * detached, unless one holds for them already. Nothing said: a fork
 * without a held create is made as before. */
void hutch_fork_hold_start(struct hutch_cli_args *a, const char *src, const char *key);
/* src's holders (NULL: every one) ended, their held creates with them,
 * and awaited (each at most 30 s). */
void hutch_fork_hold_end(const char *rt, const char *src);
/* Whether a sandbox's state (state.json's object) is a create held for a
 * fork ("held_for"): no sandbox yet, not listed. */
bool hutch_fork_held(const cJSON *state);
/* gc: the files of holders that died (kill -9); how many. */
int hutch_fork_hold_gc(const char *rt);

#endif
