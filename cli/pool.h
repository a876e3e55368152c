/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool (`hutch pool`): a detached keeper process per
 * configuration keeps N sandboxes created and ready, so that `hutch create`
 * with that configuration only hands one over. A pooled sandbox is an
 * ordinary sandbox whose supervisor refuses everything but GET /health,
 * GET /status, POST /claim and DELETE / until it is claimed; it is claimed
 * once and never returns to the pool.
 *
 * On disk, in $RT/.pool/<key>/: "keeper.lock" (flock'ed by the keeper for
 * its life; holds its pid and size), "config" (the options, for ls), and
 * one empty file per ready sandbox, named by its id. A creator claims a
 * sandbox by unlinking its file (only one unlink can succeed), then sends
 * POST /claim with the options a pool does not fix (TTL, idle timeout,
 * region, output cap, on_destroy); hutch run sends them with its command
 * on exec.sock instead (docs/api.md, POST /claim). The keeper sees the
 * unlink (inotify) and creates a replacement.
 *
 * The key covers what is fixed at creation: instance type, network policy,
 * host ports, resolver and address pool. Creations with a setup script or
 * an on_create hook are not served from a pool (the script would run at
 * claim time anyway; that is where their time goes).
 */
#ifndef HUTCH_POOL_H
#define HUTCH_POOL_H

#include <stdbool.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "error.h"
#include "poolkey.h"
#include "sandbox.h"

/* CLI: take a ready sandbox from the pool of cfg's key and give it cfg's
 * per-session options. 1: claimed (ret filled); 0: no pool or it is empty
 * (create cold); < 0: error with err set.
 * stream_fd >= 0: hutch run's command made ready (cli/stream.c,
 * hutch_cli_run_prepare()'s end of a socketpair, its request in it): the
 * claim goes on the sandbox's exec.sock with it, in one message, and the
 * command starts with the claim; ret->command_sent then says so, and
 * ret->handover_fd is the run's hand-over as after a cold run's create
 * (supervisor/sandbox.h: "D" deletes, its closing says gone). No
 * connection to the API, no POST /claim, no DELETE /. */
int hutch_pool_claim(const struct hutch_config *cfg, const char *runtime_dir, int stream_fd,
                     struct hutch_created *ret, struct hutch_err *err);

/* CLI: the claim of one sandbox (id) whose token was taken, body the
 * session options' JSON; stream_fd as above. 1: claimed (ret filled), <
 * 0: not (err set), the caller tries the next. */
int hutch_pool_claim_taken(const char *runtime_dir, const char *id, const char *body, int stream_fd,
                           struct hutch_created *ret, struct hutch_err *err);

/* CLI: start a keeper for cfg with size sandboxes; returns once they are
 * ready (or the first creation failed). -EEXIST if one runs already.
 * foreground: this process becomes the keeper (a service's main process):
 * it says on stdout and to systemd ($NOTIFY_SOCKET, READY=1) when the
 * pool is full, and exits 0 after SIGTERM or SIGINT (its unclaimed
 * sandboxes deleted), 70 if the first fill fails. */
int hutch_pool_start(struct hutch_config *cfg, unsigned size, const char *runtime_dir,
                     bool foreground, pid_t *ret_pid, struct hutch_err *err);
/* CLI: stop the keeper of key (NULL: every pool), deleting its unclaimed
 * sandboxes; returns how many pools were stopped. */
int hutch_pool_stop(const char *runtime_dir, const char *key, struct hutch_err *err);
/* CLI: [{key, size, ready, keeper_pid, config}] */
cJSON *hutch_pool_list(const char *runtime_dir);
/* `hutch pool key --json`: {key, pool_dir, keeper_lock, socket (a ready
 * sandbox's, "{id}" for its id), servable, claim (the POST /claim body)};
 * NULL on allocation failure. */
cJSON *hutch_pool_describe(const struct hutch_config *cfg, const char *runtime_dir);
/* gc: pools whose keeper died: delete their unclaimed sandboxes. */
int hutch_pool_gc(const char *runtime_dir, struct hutch_err *err);

#endif
