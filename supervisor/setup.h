/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a sandbox, in its new supervisor process: uid slot, network
 * plan, seccomp program, cgroup, init through clone3() with every
 * namespace, id maps, then init's READY and the listeners it made.
 */
#ifndef HUTCH_SETUP_H
#define HUTCH_SETUP_H

#include <stdbool.h>

#include "disk.h"
#include "error.h"

struct sup;
struct hutch_cgroup;

/* What the creator made for setup before the fork: setup's own, handed
 * to s when setup ends (also when it failed). */
struct hutch_setup_in {
	/* The disk's maker taken from the runtime dir's stock, or a fork's
	 * (sandbox.c; sock -EBADF: none, setup starts one of its own). */
	struct hutch_disk_job disk_job;
	/* lxcfs's views, a clone of the runtime dir's for init's /proc
	 * (sandbox.c; -EBADF: none); setup closes it once init has it. */
	int procview_fd;
	/* None because lxcfs did not answer their lookups (runtime/lxcfs.h):
	 * said as when it does not answer setup's probe. */
	bool views_unanswered;
	/* The sandbox's cgroup where its kind places it (sandbox.c), not
	 * made yet; NULL: --no-limits, or under systemd without delegation,
	 * where setup makes its own in a delegated scope first. */
	struct hutch_cgroup *cg;
	/* Called once, when init's socket is the one it serves on (right
	 * after GO, while init builds the root), with what a command's start
	 * needs of setup's own objects: init's socket, the cgroup, the
	 * commands' environment (NULL: the default). A run's command is
	 * queued for init there, read as init is ready (sandbox.c,
	 * hooks.c). NULL: nothing. */
	void (*init_serving)(void *ud, int init_sock, struct hutch_cgroup *cg, char **cmdenv);
	void *init_serving_ud;
	/* The creator's end of the answer's socket (not setup's to close; -1:
	 * none): a fork's disk is awaited only while it is open. */
	int creator_fd;
};

/* What fails is left for hutch_sup_teardown() to undo. */
int hutch_sup_setup(struct sup *s, const struct hutch_setup_in *in, struct hutch_err *err);

/* A struct hutch_setup_in with nothing in it yet (the creator's). */
#define HUTCH_SETUP_IN_INIT                                                       \
	{                                                                         \
		.disk_job = { .pid = -1, .sock = -EBADF }, .procview_fd = -EBADF, \
		.creator_fd = -EBADF                                              \
	}

#endif
