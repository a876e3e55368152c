/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a sandbox, in its new supervisor process: uid slot, network
 * plan, seccomp program, cgroup, init through clone3() with every
 * namespace, id maps, then init's READY and the listeners it made.
 */
#ifndef HUTCH_SETUP_H
#define HUTCH_SETUP_H

#include "error.h"

struct sup;

/* What fails is left for hutch_sup_teardown() to undo. */
int hutch_sup_setup(struct sup *s, struct hutch_err *err);

#endif
