/* SPDX-License-Identifier: Apache-2.0 */
/*
 * -v on the supervisor's side: each volume's directory opened safely and
 * cloned as a detached, idmapped mount before clone3 (init attaches them:
 * rootfs/volumes.c), and the named volumes' use held for the sandbox's
 * life (image/volstore.h).
 */
#ifndef HUTCH_SUP_VOLUMES_H
#define HUTCH_SUP_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "volume.h"

struct sup;

struct hutch_sup_volumes {
	size_t n;
	int mounts[HUTCH_VOLUMES_MAX];       /* detached mounts; -EBADF once init holds them */
	int locks[HUTCH_VOLUMES_MAX];        /* a named volume's use, else -EBADF */
	const char *dsts[HUTCH_VOLUMES_MAX]; /* PATH inside (the configuration's) */
};

/* What -v needs, from setup's plan (setup.c's setup_plan()). */
struct hutch_sup_volumes_plan {
	const struct hutch_volumes *set; /* the volumes asked for, or NULL */
	bool rootless;                   /* no idmapped mounts: -v refused */
	uid_t uid_base;                  /* appuser's host ids are uid_base + HUTCH_APP_UID */
	const char *image_store;         /* named volumes' store; "": the default */
};

/* Before clone3, after the uid slot: the volumes' object in *ret (NULL
 * without -v), also when it fails (what was made, for the end to let
 * go: the caller hands it to s->volumes either way). */
int hutch_sup_volumes_prepare(const struct hutch_sup_volumes_plan *p,
                              struct hutch_sup_volumes **ret, struct hutch_err *err);
/* Child side of clone3: the mounts of v (NULL: none) into keep[at..]
 * (init's fds 3 + at.., once init_child() dup3()s keep[i] to 3 + i) and
 * rc's volumes. */
struct hutch_rootfs_config;
void hutch_sup_volumes_pass(const struct hutch_sup_volumes *v, int *keep, size_t at,
                            struct hutch_rootfs_config *rc);
/* After clone3: the parent's copies of v's mounts (init holds them). */
void hutch_sup_volumes_close_mounts(struct hutch_sup_volumes *v);
/* At the end, after the sandbox's mounts went: the uses. */
/* Teardown's first phase (nothing of the sandbox runs): the volumes'
 * use locks go before the DELETE answer, so that `hutch rm ID && hutch
 * volume rm NAME` finds the volume free. */
void hutch_sup_volumes_let_go(struct sup *s);
void hutch_sup_volumes_done(struct sup *s);

#endif
