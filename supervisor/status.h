/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox reports of itself: its state.json (read by hutch ls, gc
 * and the CLI) and the GET /status answer.
 */
#ifndef HUTCH_STATUS_H
#define HUTCH_STATUS_H

#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

struct sup;
struct hutch_cgroup;
struct hutch_config;
struct hutch_kind;
struct hutch_kind_setup;
struct hutch_paths;
struct hutch_ports;

/*
 * What state.json says of a sandbox. hutch_sup_write_state() fills it
 * from s; setup fills it from its plan and its own objects for the first,
 * "creating", before s holds them: the cgroup, the forwards and the
 * image's use, which gc undoes after a crash (docs/architecture.md,
 * "Setup: plan, then apply").
 */
struct hutch_sup_record {
	const char *id;
	const char *status; /* "creating", "running", "pooled", "sleeping" */
	const struct hutch_paths *paths;
	const struct hutch_config *cfg;
	int64_t created_at, expires_at;
	pid_t init_pid;                /* 0: not cloned yet */
	const struct hutch_cgroup *cg; /* NULL: none */
	uid_t uid_base;
	unsigned slot;
	const struct hutch_ports *ports; /* NULL: none */
	uint16_t executor_port;          /* 0: not listening (yet) */
	const struct hutch_kind *kind;
	const struct hutch_kind_setup *kind_part; /* its status op's */
};

/* Rewrite state.json with this status ("running", "pooled", "sleeping").
 * Returns 0 or -errno. */
int hutch_sup_write_state(struct sup *s, const char *status);
/* Rewrite state.json from rec (setup's "creating"). 0 or -errno. */
int hutch_sup_write_record(const struct hutch_sup_record *rec);
/* The GET /status answer (caller owns it); NULL if out of memory. */
cJSON *hutch_sup_status_json(struct sup *s);

#endif
