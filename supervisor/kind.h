/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox kinds: what differs between a plain sandbox (the host-derived
 * root), an image sandbox (--image: an OCI image's layers), an OCI
 * container (a bundle's rootfs, one main process) and a pod member (a
 * container that joins a pod's namespaces, or a CNI network namespace).
 * Each kind is one row, a const struct hutch_kind in the kind's own file;
 * the table (kind.c) picks one when the sandbox is created, and setup,
 * spawn, status and teardown call through s->kind, never asking which
 * kind it is. An op left NULL does nothing (or the common thing, where
 * its comment says so). A new kind: a row in its own file, named in
 * kind.c's table (docs/architecture.md, "Sandbox kinds").
 *
 * The ops are listed in the order the sandbox's life calls them.
 */
#ifndef HUTCH_KIND_H
#define HUTCH_KIND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "jsonw.h"

struct sup;
struct cJSON;
struct hutch_cgroup;
struct hutch_config;
struct hutch_container;
struct hutch_resources;
struct hutch_init_params;
struct hutch_limits;

/*
 * What the kind's setup ops and its status op are given instead of the
 * sandbox (struct sup): the kind's own state and what of the sandbox they
 * read, made by setup.c from s after the uid slot and setup's own while
 * it runs (the image's use from prepare_root on, which the "creating"
 * state records, handed to s->image when setup ends); status.c's from s
 * after it (the kind's own state, its config and id). The ops before
 * (join, joins, cgroup) and after setup (ready, ended, done, leave) take
 * s.
 */
struct hutch_kind_setup {
	struct hutch_container *container; /* the container kinds' own: s->container */
	struct hutch_image_use *image;     /* the image kind's own, made by prepare_root */
	const struct hutch_config *cfg;
	const char *id;
	uid_t uid_base;
	bool rootless;
	const char *const *cmdenv; /* the commands' environment, made after prepare_root */
};

/* A uid slot held: s->slot, s->slot_fd, s->uid_base (hutch_kind_join()). */
struct hutch_kind_slot {
	unsigned slot;
	int fd; /* its lock, held for the supervisor's life */
	uid_t uid_base;
};

struct hutch_kind {
	const char *name; /* "plain", "image", "container", "pod" */
	/* Whether this row is the kind of a sandbox of cfg (ct: the
	 * container asked for, or NULL); the table asks in its order. */
	bool (*is)(const struct hutch_config *cfg, const struct hutch_container *ct);
	/* The instance type's sizes are seen inside: CPUs spread by uid
	 * slot, lxcfs's /proc views, v1 cgroups at /sys/fs/cgroup. A
	 * container keeps its runtime's view, as with runc. */
	bool sizes_inside;
	/* The API's handlers are loaded after ready (hutch_api_start_late()),
	 * not while init builds the root. */
	bool api_after_ready;

	/* The CLI's side and setup's: where its cgroup goes and what it
	 * adds to the limits (NULL each: hutch's own place, none). */
	void (*cgroup)(const struct sup *s, const char **ret_path,
	               const struct hutch_resources **ret_res);
	/* The new supervisor, before its stdio goes to /dev/null. */
	int (*keep_stdio)(struct sup *s);
	/* Setup, before the uid slot: namespaces to join (pod.h); a pod's
	 * uid slot, pinned, in *ret_slot (its fd >= 0), else none. */
	int (*join)(struct sup *s, struct hutch_kind_slot *ret_slot, struct hutch_err *err);
	/* After a join: whether the namespace of this CLONE_NEW* type is
	 * joined, not the sandbox's own (NULL: none is). */
	bool (*joins)(const struct sup *s, int nstype);
	/* After the uid slot: the root's parts made on the host side (an
	 * image's layers). */
	int (*prepare_root)(struct hutch_kind_setup *k, struct hutch_err *err);
	/* Before the cgroup is made: lim lowered, mounts opened. */
	int (*prepare)(struct hutch_kind_setup *k, struct hutch_limits *lim, struct hutch_err *err);
	/* The clone of init, like fork() (0 in init, its pid here, or
	 * -errno with err set); NULL: clone3 into the cgroup (setup.c). */
	pid_t (*clone)(struct hutch_kind_setup *k, uint64_t flags, int *ret_pidfd,
	               struct hutch_err *err);
	/* Child side of the clone: the lowest fd number the kind's fds
	 * wait at (above every fd init places; NULL: setup's), then (first
	 * < 0) moved there and (first >= 0) placed from first on, returning
	 * the next free number (or -1); then init's parameters completed. */
	int (*stash_fd)(const struct hutch_kind_setup *k);
	int (*child_fds)(struct hutch_kind_setup *k, int first);
	void (*init_params)(struct hutch_kind_setup *k, struct hutch_init_params *p);
	/* After the clone (also when it failed): the parent's copies go. */
	void (*spawned)(struct hutch_kind_setup *k);
	/* Before GO, after the id maps (init: init's pid, setup's until
	 * setup ends). */
	int (*before_go)(struct hutch_kind_setup *k, pid_t init, struct hutch_err *err);
	/* Setup: init sent a terminal's master (HUTCH_MSG_CONSOLE); false:
	 * not expected (the caller closes it and fails). */
	bool (*take_console)(struct hutch_kind_setup *k, int fd);
	/* Setup is over (init ready or failed). */
	void (*setup_done)(struct hutch_kind_setup *k);
	/* The API's socket (NULL: hutch_api_start()). */
	int (*api_start)(struct sup *s, struct hutch_err *err);
	/* Once ready, before the creator hears it. */
	int (*ready)(struct sup *s, struct hutch_err *err);
	/* state.json ("creating" too, during setup) and GET /status: what
	 * the kind adds, as members of the record being written (a writer,
	 * base/jsonw.h: the record is written without libcjson). */
	void (*status)(const struct hutch_kind_setup *k, struct hutch_jw *w);
	/* Teardown's first phase, init and every process dead, before the
	 * DELETE answer: what a client may act on next let go (an image's
	 * use record, which snapshot rm and image rm look at). */
	void (*ended)(struct sup *s);
	/* The end of teardown, after the mounts went. */
	void (*done)(struct sup *s);
	/* The loop is over; never returns (NULL: the supervisor exits 0/1). */
	void (*leave)(struct sup *s) __attribute__((noreturn));
};

/* The rows, each in its kind's file. */
extern const struct hutch_kind hutch_kind_plain;     /* kind.c: the default */
extern const struct hutch_kind hutch_kind_image;     /* sandbox-image.c */
extern const struct hutch_kind hutch_kind_container; /* container-kind.c */
extern const struct hutch_kind hutch_kind_pod;       /* pod.c */

/* The kind of a sandbox of cfg (ct: a container, or NULL). */
const struct hutch_kind *hutch_kind_choose(const struct hutch_config *cfg,
                                           const struct hutch_container *ct);
/* The kind's join (kind->join: a pod's slot and network), then s->joins
 * from kind->joins, once: setup reads the mask, not the kind; then the
 * uid slot (s->slot, slot_fd, uid_base, written here only): the pod's
 * pinned one, else one of its own unless it joins a user namespace. */
int hutch_kind_join(struct sup *s, struct hutch_err *err);
/* The sandbox's cgroup (not made yet) where its kind places it
 * (kind->cgroup), in *ret_cg (the CLI's struct hutch_setup_in, or
 * setup's own); with s->scope_bus (the supervisor's setup under systemd
 * without delegation; the CLI leaves it "" otherwise), in a delegated
 * scope made first. */
int hutch_kind_cgroup_new(struct sup *s, struct hutch_cgroup **ret_cg, struct hutch_err *err);

#endif
