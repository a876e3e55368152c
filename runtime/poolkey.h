/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool's key: which ready sandboxes a creation may take. It
 * covers what is fixed when a sandbox is made (the options marked
 * HUTCH_OPT_POOL_KEY in options.c: instance type, network policy, host
 * ports, resolver, address pool; and --no-limits); the per-session options
 * (HUTCH_OPT_SESSION) are given at the claim. Shared by the CLI (claims, keepers) and printed by
 * `hutch pool key --json` for clients in other languages, which must never
 * compute it themselves. Pure functions: unit-tested in test_runtime.c.
 */
#ifndef HUTCH_POOLKEY_H
#define HUTCH_POOLKEY_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define HUTCH_POOL_MAX_SIZE    256
#define HUTCH_POOL_KEY_MAX     64
#define HUTCH_POOL_SANDBOX_TTL 3600 /* a pooled sandbox unclaimed this long is replaced */

/* "<type>-<mode>-<16 hex>": the configuration's pool. */
void hutch_pool_key(const struct hutch_config *cfg, char *buf, size_t size);
/* Can this creation be served from a pool? (no HUTCH_OPT_NO_POOL option
 * set: setup script, on_create hook; not itself a pooled sandbox) */
bool hutch_pool_can_serve(const struct hutch_config *cfg);

#endif
