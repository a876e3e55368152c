/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What setup.c and setup-init.c share (not a public header): the plan
 * setup makes from the options, the objects it makes (its own until it
 * ends), and the two steps of init's clone that setup-init.c holds.
 */
#ifndef HUTCH_SETUP_INTERNAL_H
#define HUTCH_SETUP_INTERNAL_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>

#include "cgroup.h"
#include "disk.h"
#include "error.h"
#include "initproc.h"
#include "kind.h"
#include "netpolicy.h"
#include "rootfs.h"
#include "status.h"
#include "volumes.h"

/*
 * What the options decide for setup, once, after the kind's join (the uid
 * slot): plan, then apply; each step takes what it needs of the plan and
 * the objects it owns (docs/architecture.md, "Setup: plan, then apply").
 */
struct setup_plan {
	struct hutch_limits lim;             /* the cgroups' */
	struct hutch_disk_plan disk;         /* the writable places' disk */
	bool net_joined;                     /* a pod's (or CNI's) netns: no plan of its own */
	struct hutch_net_plan_params net;    /* before the clone: addresses, host ports, resolver */
	struct hutch_net_bindings *bindings; /* header bindings' (NULL: none), protected */
	enum hutch_net_mode seccomp_mode;    /* the seccomp program's */
	struct hutch_sup_volumes_plan volumes; /* -v's */
	struct hutch_sup_record creating;      /* state.json's: s's part; setup adds its own */
	/* init's clone and parameters: */
	const struct hutch_kind *kind;
	unsigned joins;                  /* CLONE_NEW* joined (hutch_kind_join()) */
	unsigned slot;                   /* the uid slot: the id maps', the CPUs' offset */
	const struct hutch_idmap *idmap; /* root or rootless: the maps' writer */
	/* v1 (init joins by itself): "creating" and the cgroups made after
	 * the clone, while init makes its network namespace; their fds sent
	 * before GO (hutch_sup_setup_send_cgroups()). v2, a kind that clones
	 * init itself, --no-limits: made before, as CLONE_INTO_CGROUP needs. */
	bool cgroups_late;
	size_t cpus; /* the CPUs init sees (0: all it may use) */
	bool change_lists;
	bool api_preload; /* the API's handlers loaded while init builds the root */
	char hostname[64];
};

/*
 * What setup makes, its own while it runs, handed to s when it ends, on
 * every path (a failed setup's too: the end undoes what was made): the
 * disk's maker (the creator's, taken before the fork, or one of setup's
 * own), the disk's fds it answers, the cgroup (the creator's, or one
 * setup places in a scope), the host ports' listeners, the commands'
 * environment, the volumes' mounts, init's process, the network plan,
 * the seccomp program, lxcfs's tree (closed once init has it) and what
 * init sends before READY; the kind's ops' part (kind.h: an image's use).
 */
#define SETUP_WARNINGS_MAX 6

struct setup_made {
	struct hutch_disk_job disk_job;
	int disk_fds[HUTCH_DISK_FDS];
	int disk_watch;             /* the change lists' group, init's (supervisor.h) */
	struct hutch_initproc init; /* init's process, once cloned */
	struct hutch_kind_setup kind;
	struct hutch_cgroup *cg;        /* NULL: --no-limits */
	struct hutch_ports *ports;      /* -p's listeners (NULL: none) */
	char **cmdenv;                  /* the commands' environment (NULL: the default) */
	struct hutch_sup_volumes *vols; /* -v's mounts (NULL: none) */
	int procview_fd;
	/* lxcfs's probe, beside the setup until GO (setup.c) */
	struct hutch_bounded views;
	bool views_left_out; /* lxcfs did not answer: GO without them */
	struct hutch_net_plan net;
	struct sock_fprog seccomp;
	bool tmpfs; /* GO: no disk after all, config.workspace "tmpfs" */
	/* what the sandbox is made without (init's HUTCH_MSG_NOTE, ours):
	 * "warning: " lines of the events log when setup hands over, our
	 * hutch_log() going nowhere once detached */
	char warnings[SETUP_WARNINGS_MAX][HUTCH_ERR_MSG_MAX + 128];
	size_t nwarnings;
	/* init's writable layer's fds (HUTCH_MSG_WRITE_FDS), for snapshot.c */
	uint32_t write_which[HUTCH_ROOTFS_WRITE_FDS];
	int write_fds[HUTCH_ROOTFS_WRITE_FDS];
	size_t nwrite, nwrite_which;
	/* struct hutch_setup_in's, called once init's socket is its last */
	void (*init_serving)(void *ud, int init_sock, struct hutch_cgroup *cg, char **cmdenv);
	void *init_serving_ud;
	int creator_fd; /* struct hutch_setup_in's, not ours */
};

/* One of m->warnings, kept as one line of printable text (init's are
 * hostile input); past SETUP_WARNINGS_MAX, dropped. */
void hutch_sup_setup_warn(struct setup_made *m, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* init cloned into the cgroup (or joining it), the volumes' mounts
 * (m->vols) placed in it: m->init, setup's until it ends. */
int hutch_sup_setup_spawn_init(const struct setup_plan *plan, struct setup_made *m,
                               struct hutch_err *err);
/* v1, after the clone and hutch_cgroup_create(): the cgroups' "tasks"
 * fds (and the commands' freezer's) to init, which joins them before GO
 * (HUTCH_MSG_CGROUPS); init counts as entered from here. */
int hutch_sup_setup_send_cgroups(struct setup_made *m, struct hutch_err *err);
/* init's messages until READY (its listeners, its writable layer's fds, a
 * console, its socket in its netns); its failure's message and class. */
int hutch_sup_setup_wait_ready(const struct setup_plan *plan, struct setup_made *m,
                               struct hutch_err *err);

#endif
