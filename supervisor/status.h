/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox reports of itself: its state.json (read by hutch ls, gc
 * and the CLI) and the GET /status answer.
 */
#ifndef HUTCH_STATUS_H
#define HUTCH_STATUS_H

#include <cjson/cJSON.h>

struct sup;
struct hutch_cgroup;

/* Rewrite state.json with this status ("creating", "running", "pooled",
 * "sleeping"). Returns 0 or -errno. */
int hutch_sup_write_state(struct sup *s, const char *status);
/* The first, "creating", written by setup with the cgroup it holds until
 * it ends (cg, NULL: none), which gc removes after a crash. */
int hutch_sup_write_creating(struct sup *s, const struct hutch_cgroup *cg);
/* The GET /status answer (caller owns it); NULL if out of memory. */
cJSON *hutch_sup_status_json(struct sup *s);

#endif
