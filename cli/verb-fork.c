/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch fork ID [-n N]: N new sandboxes from a live one's filesystem
 * (docs/snapshots.md). The same route as Python's session.fork(): POST
 * /snapshot on the source (frozen for the capture, thawed after, running
 * on), then N creations from that snapshot, each with the sandbox options
 * given here (its own id, limits, network, TTL). All or none: the forks
 * are handed over (supervisor/sandbox.h) only once every one is ready, so
 * a failure, Ctrl-C or kill of this process part-way deletes those made.
 * The snapshot stays in the store, named on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "options.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "verb-opts.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const struct hutch_cli_opt fork_opts[] = {
	{ .name = "count",
	  .short_name = 'n',
	  .kind = HUTCH_CLI_U64,
	  A(size),
	  .metavar = "N",
	  .umin = 1,
	  .umax = 100, /* E2B's fork(count <= 100) */
	  .udef = 1,
	  .help = "how many forks (1 to 100, default 1)",
	  .invalid = "invalid -n '%s': give a number of forks from 1 to 100",
	  .missing = "-n needs a number of forks" },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  A(json),
	  .help = "print {source, snapshot, frozen_ms, forks: [ids]}" },
	PROGRESS_OPT,
	{ 0 },
};

/* The source's store (GET /status's config): its snapshot is there, so
 * the forks' HUTCH_IMAGE_STORE must be it whatever this shell's says. */
static int use_source_store(const struct hutch_paths *p)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const char *store;
	int r;

	if ((r = hutch_cli_call(p->sock, "GET", "/status", NULL, 200, &j)))
		return r;
	store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(j, "config"), "image_store"));
	if (store && *store && setenv("HUTCH_IMAGE_STORE", store, 1) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

/* POST /snapshot: the answer ({name, frozen_ms, ...}) or an exit code. */
static int take_snapshot(const struct hutch_paths *p, cJSON **ret)
{
	int r = hutch_cli_call(p->sock, "POST", "/snapshot", "{}", 201, ret);

	if (r)
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p->id);
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(*ret, "name")))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "fork: the snapshot's answer has no name");
	return 0;
}

static void print_forks(const struct hutch_cli_args *a, const char *src, const cJSON *snap,
                        const struct hutch_created *c, size_t n)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "name"));
	const cJSON *frozen = cJSON_GetObjectItemCaseSensitive(snap, "frozen_ms");

	if (a->json) {
		_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
		_cleanup_free_ char *t = NULL;
		cJSON *ids = cJSON_AddArrayToObject(o, "forks");

		cJSON_AddStringToObject(o, "source", src);
		cJSON_AddStringToObject(o, "snapshot", name);
		cJSON_AddNumberToObject(o, "frozen_ms", cJSON_GetNumberValue(frozen));
		for (size_t i = 0; ids && i < n; i++)
			cJSON_AddItemToArray(ids, cJSON_CreateString(c[i].id));
		t = cJSON_PrintUnformatted(o);
		printf("%s\n", t ? t : "{}");
		return;
	}
	for (size_t i = 0; i < n; i++)
		printf("%s\n", c[i].id);
	fprintf(stderr, "hutch: %zu fork%s of %s from snapshot %s (frozen %.1f ms)\n", n,
	        n == 1 ? "" : "s", src, name, cJSON_GetNumberValue(frozen));
}

static int cmd_fork(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *snap = NULL;
	_cleanup_free_ struct hutch_created *c = NULL;
	struct hutch_err err = { 0 };
	struct hutch_paths p;
	size_t made = 0, n = (size_t)a->size;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch fork ID [-n N]");
	if (a->cfg.image[0])
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "fork starts from the source's filesystem: --image and "
		                      "--snapshot do not apply (create --snapshot NAME does that)");
	/* The forks' options checked before the snapshot is taken (create
	 * checks them again, with the environment's, for each). */
	if ((r = hutch_cli_config_from_env(&a->cfg)))
		return r;
	if (hutch_config_validate(&a->cfg, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	if (a->progress && strcmp(a->progress, "auto") && strcmp(a->progress, "always") &&
	    strcmp(a->progress, "never"))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid --progress '%s': give auto, always or never",
		                      a->progress);
	if (!(c = calloc(n, sizeof(*c))))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if ((r = hutch_cli_open_live(a->pos[0], &p)) || (r = use_source_store(&p)) ||
	    (r = take_snapshot(&p, &snap)))
		return r;
	a->cfg.no_limits = a->no_limits;
	if (hutch_option_parse(hutch_option_find("snapshot"), &a->cfg,
	                       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "name")),
	                       &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: %s", err.msg);
	for (; made < n; made++) {
		r = hutch_cli_create_sandbox(&a->cfg, a->progress, &c[made]);
		if (r)
			break;
	}
	if (r) {
		for (size_t i = 0; i < made; i++)
			hutch_created_drop(&c[i]); /* their supervisors delete them */
		fprintf(stderr, "hutch: fork %zu of %zu failed; %s deleted; snapshot %s kept\n",
		        made + 1, n, made ? "the forks made were" : "nothing made to be",
		        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "name")));
		return r;
	}
	print_forks(a, p.id, snap, c, n);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		r = hutch_cli_fail(HUTCH_EXIT_FAILURE, "write the forks' ids: %s; deleting them",
		                   strerror(errno));
		for (size_t i = 0; i < n; i++)
			hutch_created_drop(&c[i]);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		if (hutch_created_ack(&c[i]) < 0)
			r = hutch_cli_fail(HUTCH_EXIT_FAILURE,
			                   "fork %s: its supervisor went away before the hand-over",
			                   c[i].id);
	return r;
}

const struct hutch_cli_verb hutch_verb_fork = {
	.name = "fork",
	.synopsis = "ID [-n N] [--json] [OPTIONS]",
	.about = "N new sandboxes (default 1, at most 100) from a live sandbox's filesystem: a\n"
	         "snapshot of it (frozen for the capture, then running on), then N sandboxes made\n"
	         "from it, each with its own id and the options given here (limits, network,\n"
	         "TTL...; create's defaults otherwise). Prints their ids, one a line; all or none\n"
	         "are made. The snapshot stays in the store (its name on stderr): 'hutch snapshot\n"
	         "rm' it once the forks are gone. Processes and memory are not forked.\n",
	.opts = fork_opts,
	.sandbox_opts = true,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_fork,
};
