/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's side of a warm-pool claim; see claim.c. */
#ifndef HUTCH_CLAIM_H
#define HUTCH_CLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

struct sup;

/* POST /claim. body: the options marked HUTCH_OPT_SESSION in
 * runtime/options.c (ttl_seconds, idle_timeout_seconds, max_output_bytes,
 * region, on_destroy...), each optional. Returns the created answer or NULL
 * with err set (-EALREADY when not pooled / claimed already, -EINVAL). */
cJSON *hutch_sup_claim(struct sup *s, const cJSON *body, struct hutch_err *err);
/* The same claim without the answer (a warm run's on exec.sock, which
 * answers in brief): 0, or -errno with err set as above. */
int hutch_sup_claim_start(struct sup *s, const cJSON *body, struct hutch_err *err);

/* A create held for its source's next fork (cfg->fork_held; cli/fork-hold.c):
 * its TTL counted from now, not from its creation: once its disk came
 * (handed false: before the TTL timer is armed) and again at its
 * hand-over (handed true: the timer re-armed, "held_for" dropped from
 * state.json, so listed from now on). Nothing for another sandbox. */
void hutch_sup_held_restart(struct sup *s, bool handed);

/* The session ends seconds from now (the TTL timer re-armed, expires_at
 * moved; state.json is the caller's). 0 or -errno. */
int hutch_sup_set_expiry(struct sup *s, uint64_t seconds);

#endif
