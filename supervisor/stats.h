/* SPDX-License-Identifier: Apache-2.0 */
/* What a sandbox uses now (GET /stats, hutch stats); see stats.c. */
#ifndef HUTCH_STATS_H
#define HUTCH_STATS_H

#include <cjson/cJSON.h>

struct sup;

/* The GET /stats answer (caller owns it); NULL if out of memory. */
cJSON *hutch_sup_stats_json(struct sup *s);

#endif
