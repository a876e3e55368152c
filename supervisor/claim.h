/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's side of a warm-pool claim; see claim.c. */
#ifndef HUTCH_CLAIM_H
#define HUTCH_CLAIM_H

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

/* The session ends seconds from now (the TTL timer re-armed, expires_at
 * moved; state.json is the caller's). 0 or -errno. */
int hutch_sup_set_expiry(struct sup *s, uint64_t seconds);

#endif
