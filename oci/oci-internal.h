/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the oci files share: the global options, the state directory of one
 * container (state.c) and the bundle's mapping onto a sandbox (map.c).
 *
 * A container's state lives in ROOT/ID/ (ROOT: --root, default
 * /run/hutch-oci):
 *   state.json   written by create: id, bundle, created, annotations
 *   status.json  written by the supervisor (container.h): status, pids
 *   exec.fifo    the start trigger, gone once started
 *   lock         flock()ed by the supervisor for its whole life
 *   exec.sock    the supervisor's socket for `exec` (container.h), once started
 *   hook-error   why a startContainer hook stopped the container (hooks.c)
 * The sandbox itself is an ordinary hutch sandbox in $HUTCH_RUNTIME_DIR
 * (hutch ls, hutch exec and hutch events see it).
 */
#ifndef HUTCH_OCI_INTERNAL_H
#define HUTCH_OCI_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <linux/filter.h>

#include "config.h"
#include "container.h"
#include "error.h"
#include "spec.h"

#define HUTCH_OCI_DEFAULT_ROOT "/run/hutch-oci"
#define HUTCH_OCI_VERSION      "1.0.2"
#define HUTCH_OCI_ID_MAX       128

struct hutch_oci_opts {
	const char *root;
	const char *log;
	bool log_json;
	bool systemd_cgroup; /* linux.cgroupsPath is SLICE:PREFIX:NAME */
	int log_fd;
};

/* ---- fail.c: the global options, the error report ---- */

extern struct hutch_oci_opts hutch_oci_opts;
/* Print the error (stderr and --log) and return 1, runc's exit status. */
int hutch_oci_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- runtime.c: create, start, state ---- */

int hutch_oci_cmd_create(int argc, char **argv);
int hutch_oci_cmd_start(int argc, char **argv);
int hutch_oci_cmd_state(int argc, char **argv);
struct hutch_oci_create_args {
	const char *id, *bundle, *pid_file, *console_socket;
	unsigned int preserve_fds; /* the caller's 3, 4, ... go to the process */
};
/* --preserve-fds N: 0 to HUTCH_SPAWN_MAX_EXTRA_FDS; 0 or 1 (reported). */
int hutch_oci_parse_preserve_fds(const char *arg, unsigned int *ret);
int hutch_oci_parse_create(int argc, char **argv, struct hutch_oci_create_args *a, bool *detach);
/* Returns 0 or 1 (reported); *ret_pid: the supervisor's pid. */
int hutch_oci_create(const struct hutch_oci_create_args *a, pid_t *ret_pid);
int hutch_oci_start(const char *id);

/* ---- list.c: list; checkpoint, restore, events refused ---- */

int hutch_oci_cmd_list(int argc, char **argv);
int hutch_oci_cmd_refused(int argc, char **argv);

/* ---- control.c: kill, delete, features, run ---- */

int hutch_oci_cmd_kill(int argc, char **argv);
int hutch_oci_cmd_delete(int argc, char **argv);
int hutch_oci_cmd_features(int argc, char **argv);
int hutch_oci_cmd_run(int argc, char **argv);
int hutch_oci_cmd_ps(int argc, char **argv);

/* ---- exec.c ---- */

int hutch_oci_cmd_exec(int argc, char **argv);
int hutch_oci_cmd_pause(int argc, char **argv);
int hutch_oci_cmd_resume(int argc, char **argv);
int hutch_oci_cmd_update(int argc, char **argv);

/* ---- seccomp.c ---- */

/* linux.seccomp compiled (libseccomp, loaded at run time); ret->len 0
 * without a profile; ret->filter is malloc'ed. */
int hutch_oci_seccomp_compile(const struct hutch_oci_seccomp *sc, struct sock_fprog *ret,
                              struct hutch_err *err);

/* ---- state.c ---- */

struct hutch_oci_paths {
	char dir[4096], state[4200], status[4200], fifo[4200], lock[4200], exec[4200];
};

/* What `state` reports, read from the files and the lock. */
struct hutch_oci_state {
	char status[16]; /* creating, created, running, stopped */
	pid_t pid;       /* the supervisor: what a subreaper waits for */
	pid_t process_pid, init_pid;
	unsigned long long process_start;
	char sandbox[64];
	bool alive; /* the supervisor holds the lock */
	cJSON *doc; /* state.json */
};

/* Container ids: [A-Za-z0-9][A-Za-z0-9_.+-]*, at most HUTCH_OCI_ID_MAX. */
bool hutch_oci_id_is_valid(const char *id);
int hutch_oci_paths_init(const char *root, const char *id, struct hutch_oci_paths *ret,
                         struct hutch_err *err);
/* -ENOENT (err: "container ID does not exist") if there is none. */
int hutch_oci_state_read(const struct hutch_oci_paths *p, const char *id,
                         struct hutch_oci_state *ret, struct hutch_err *err);
void hutch_oci_state_done(struct hutch_oci_state *st);
/* What state's "pid" says (see state.c). */
pid_t hutch_oci_state_pid(const struct hutch_oci_state *st);
/* The runtime-spec's state JSON (caller deletes). */
cJSON *hutch_oci_state_json(const struct hutch_oci_state *st, const char *id);

/* ---- hooks.c: a bundle's hooks run (spec-hooks.h) ---- */

/* ct->hooks_ctx of a container with hooks the supervisor runs. */
struct hutch_oci_hooks_ctx {
	const struct hutch_oci_hooks *hooks;
	struct hutch_oci_paths paths;
	char id[HUTCH_OCI_ID_MAX + 1]; /* a copy: the supervisor reuses argv's memory */
};
/* Run phase's hooks in order with state (the state JSON) on their stdin,
 * stopping at the first failure (err names phase, index, path and the exit
 * status or signal). ns_pid > 0: in that process's namespaces (the
 * container's init). */
int hutch_oci_hooks_run(const struct hutch_oci_hooks *hooks, enum hutch_oci_hook_phase phase,
                        const char *state, pid_t ns_pid, struct hutch_err *err);
/* container.h's run_hooks (create: prestart, createRuntime,
 * createContainer; start: startContainer). */
int hutch_oci_hooks_supervisor(const struct hutch_container *ct,
                               enum hutch_container_hook_point point, pid_t init_pid,
                               struct hutch_err *err);
/* poststart or poststop, from the hooks state.json keeps: every one runs,
 * failures are logged (stderr, --log) and ignored, as the spec asks. */
int hutch_oci_hooks_after(const struct hutch_oci_paths *p, const char *id,
                          const struct hutch_oci_state *st, enum hutch_oci_hook_phase phase);

/* ---- map.c ---- */

/* The bundle's spec onto a sandbox's options and a container; bundle is
 * the bundle's absolute path. Strings of ct point into spec or are
 * malloc'ed for the process's life. */
int hutch_oci_map(const struct hutch_oci_spec *spec, const char *bundle, struct hutch_config *cfg,
                  struct hutch_container *ct, struct hutch_err *err);

#endif
