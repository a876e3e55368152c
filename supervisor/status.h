/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox reports of itself: its state.json (read by hutch ls, gc
 * and the CLI) and the GET /status answer.
 */
#ifndef HUTCH_STATUS_H
#define HUTCH_STATUS_H

#include <cjson/cJSON.h>

struct sup;

/* Rewrite state.json with this status ("creating", "running", "pooled",
 * "sleeping"). Returns 0 or -errno. */
int hutch_sup_write_state(struct sup *s, const char *status);
/* The GET /status answer (caller owns it); NULL if out of memory. */
cJSON *hutch_sup_status_json(struct sup *s);

#endif
