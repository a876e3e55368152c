/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch pool start, stop, ls and key: the warm pool's verbs (the pool
 * itself: pool.c). Each subcommand is a verb of its own for the parser,
 * "pool start" and so on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "pool.h"
#include "poolkey.h"
#include "state.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const char pool_usage[] =
        "usage: hutch pool start [--size N] [OPTIONS]   keep N sandboxes of this configuration\n"
        "                                             ready (default 4); returns once they are\n"
        "       hutch pool stop [--all | OPTIONS]      stop that pool, deleting its ready "
        "sandboxes\n"
        "       hutch pool ls [--json]                 list the pools\n"
        "       hutch pool key [OPTIONS] [--json]      print the pool key of a configuration\n"
        "\n"
        "A keeper process per configuration (instance type, network, host ports) keeps N\n"
        "sandboxes created; 'hutch create' and 'hutch run' with that configuration take one\n"
        "and give it their own TTL, idle timeout, region, output cap and on_destroy, so they\n"
        "only hand a sandbox over. A pooled sandbox is used once; the keeper replaces it.\n"
        "Creations with --setup-script or --on-create are never served from a pool.\n"
        "OPTIONS: --instance-type, --network, --host-port (as for create); 'hutch pool start\n"
        "--help' lists them all.\n";

/* The environment's options and the rules between options; 0 or an exit
 * code. */
static int complete_config(struct hutch_config *cfg)
{
	struct hutch_err err = { 0 };
	int r = hutch_cli_config_from_env(cfg);

	if (r)
		return r;
	if (hutch_config_validate(cfg, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	return hutch_cli_resolve_image(cfg, false);
}

static int cmd_start(struct hutch_cli_args *a)
{
	struct hutch_err err = { 0 };
	char key[HUTCH_POOL_KEY_MAX];
	enum hutch_errc cls;
	pid_t pid = 0;
	int r;

	a->cfg->no_limits = a->no_limits;
	r = complete_config(a->cfg);
	if (r)
		return r;
	hutch_pool_key(a->cfg, key, sizeof(key));
	r = hutch_pool_start(a->cfg, (unsigned)a->size, hutch_runtime_dir(), a->foreground, &pid,
	                     &err);
	cls = r < 0 ? hutch_err_class(&err) : HUTCH_ERRC_NONE;
	if (cls == HUTCH_ERRC_USAGE)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	/* A first fill that failed is 70 (the man page), unless this host
	 * cannot (69, as create's). */
	if (r < 0)
		return hutch_cli_fail(cls == HUTCH_ERRC_NOT_CAPABLE ? HUTCH_EXIT_NOT_CAPABLE
		                                                    : HUTCH_EXIT_FAILURE,
		                      "cannot start the pool: %s", err.msg);
	printf("pool %s: %llu sandboxes ready (keeper pid %d)\n", key, (unsigned long long)a->size,
	       (int)pid);
	return 0;
}

static int cmd_stop(struct hutch_cli_args *a)
{
	struct hutch_err err = { 0 };
	char key[HUTCH_POOL_KEY_MAX];
	int r;

	a->cfg->no_limits = a->no_limits;
	r = complete_config(a->cfg);
	if (r)
		return r;
	hutch_pool_key(a->cfg, key, sizeof(key));
	r = hutch_pool_stop(hutch_runtime_dir(), a->all ? NULL : key, &err);
	if (r == 0 && !a->all)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
		                      "no pool runs for this configuration (%s); 'hutch pool "
		                      "ls' lists them",
		                      key);
	printf("stopped %d pool%s\n", r, r == 1 ? "" : "s");
	return 0;
}

static int cmd_ls(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *arr = hutch_pool_list(hutch_runtime_dir());
	const cJSON *p;

	if (a->json) {
		_cleanup_free_ char *t = cJSON_Print(arr);
		printf("%s\n", t);
		return 0;
	}
	printf("%-40s %5s %5s %8s\n", "POOL", "SIZE", "READY", "KEEPER");
	cJSON_ArrayForEach(p, arr) {
		printf("%-40s %5d %5d %8d%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(p, "key")),
		       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "size")),
		       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "ready")),
		       (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "keeper_pid")),
		       cJSON_IsTrue(cJSON_GetObjectItem(p, "alive")) ? "" : " (dead)");
	}
	return 0;
}

/* The key and the pool's files, for clients in other languages, which
 * must never compute them (runtime/poolkey.h). Needs no root. */
static int cmd_key(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *t = NULL;
	int r;

	a->cfg->no_limits = a->no_limits;
	r = complete_config(a->cfg);

	if (r)
		return r;
	o = hutch_pool_describe(a->cfg, hutch_runtime_dir());
	if (!o)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (!a->json) {
		printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(o, "key")));
		return 0;
	}
	t = cJSON_Print(o);
	printf("%s\n", t ? t : "{}");
	return 0;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                         \
	X(no_limits, "sandboxes without a cgroup (no CPU, memory or pids limit), as 'create " \
	             "--no-limits' makes and takes")                                          \
	X(size, "how many sandboxes to keep ready (default 4)")                               \
	X(foreground,                                                                         \
	  "be the keeper instead of starting one (a service's main process): say when the "   \
	  "pool is full (stdout, systemd's READY=1), run until SIGTERM, then delete the "     \
	  "sandboxes not taken (hutch-pool@.service)")                                        \
	X(all, "stop every pool")                                                             \
	X(stop_opts_size, "--size applies to 'hutch pool start' only")                        \
	X(json, "print the result as JSON")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

/* As create's: a pool of sandboxes without a cgroup, for ordinary users
 * where cgroup v2 is not delegated; only creations with --no-limits take
 * from it (it is part of the key). */
#define NO_LIMITS_OPT                                                                      \
	{                                                                                  \
		.name = "no-limits", .kind = HUTCH_CLI_FLAG, A(no_limits), HELP(no_limits) \
	}

static const struct hutch_cli_opt start_opts[] = {
	NO_LIMITS_OPT,
	{ .name = "size",
	  .kind = HUTCH_CLI_U64,
	  A(size),
	  .metavar = "N",
	  .range = HUTCH_CLI_RANGE_POOL_SIZE,
	  HELP(size) },
	{ .name = "foreground", .kind = HUTCH_CLI_FLAG, A(foreground), HELP(foreground) },
	{ .name = "" },
};

static const struct hutch_cli_opt stop_opts[] = {
	{ .name = "all", .kind = HUTCH_CLI_FLAG, A(all), HELP(all) },
	NO_LIMITS_OPT,
	{ .name = "size", .kind = HUTCH_CLI_REFUSE, HELP(stop_opts_size) },
	{ .name = "" },
};

static const struct hutch_cli_opt key_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	NO_LIMITS_OPT,
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_pool_start = {
	.name = "pool start",
	.synopsis = "[--size N] [--foreground] [OPTIONS]",
	.about = "Start a keeper that keeps N sandboxes of this configuration ready; returns once "
	         "they are. A pool cannot hold sandboxes with --setup-script, --on-create or "
	         "--header-binding.\n",
	.opts = start_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.run = cmd_start,
};

const struct hutch_cli_verb hutch_verb_pool_stop = {
	.name = "pool stop",
	.synopsis = "[--all | OPTIONS]",
	.about = "Stop the pool of this configuration (--all: every pool), deleting its ready "
	         "sandboxes.\n",
	.opts = stop_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.run = cmd_stop,
};

const struct hutch_cli_verb hutch_verb_pool_ls = {
	.name = "pool ls",
	.synopsis = "[--json]",
	.about = "List the pools: key, size, ready sandboxes, keeper.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.run = cmd_ls,
};

const struct hutch_cli_verb hutch_verb_pool_key = {
	.name = "pool key",
	.synopsis = "[OPTIONS] [--json]",
	.about = "Print the pool key of this configuration (--json: with the pool's directory, its "
	         "keeper's lock file, whether a creation with these options can be served from a "
	         "pool and the POST /claim body it would send): what clients in other languages "
	         "use to claim from a pool.\n",
	.opts = key_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.run = cmd_key,
};

int hutch_cli_pool(int argc, char **argv, const struct hutch_cli_verb *const *all)
{
	static const struct hutch_cli_verb *const subs[] = {
		&hutch_verb_pool_start,
		&hutch_verb_pool_stop,
		&hutch_verb_pool_ls,
		&hutch_verb_pool_key,
		NULL,
	};

	return hutch_cli_run_group("pool", pool_usage, "key, start, stop or ls", subs, argc, argv,
	                           all);
}
