/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch fork ID [-n N]: N new sandboxes from a live one's filesystem
 * (docs/snapshots.md "Fork"). A source whose writable places are a disk
 * that can be cloned (and forks that want one; the host-derived root's
 * disk is copied if not): POST /fork on the source makes N disks, clones
 * of its own taken while it is frozen, then N creations from the source's
 * image, each taking its disk by name (runtime/disk.h "Forks").
 * Else (no clone, tmpfs, an ordinary user) the route of Python's session.fork():
 * POST /snapshot on the source, then N creations from that snapshot, which
 * stays in the store (named on stderr). Each fork has the sandbox options
 * given here (its own id, limits, network, TTL). All or none: the forks
 * are handed over (supervisor/sandbox.h) only once every one is ready, so
 * a failure, Ctrl-C or kill of this process part-way deletes those made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "disk.h"
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

/* The source's store (GET /status's config): its image and snapshots are
 * there, so the forks' HUTCH_IMAGE_STORE must be it whatever this shell's
 * says. *by_disk: its writable places are a disk (POST /fork); *host: the
 * host-derived root, which has no snapshots (its disk copied, if need be). */
static int use_source_store(const struct hutch_paths *p, bool *by_disk, bool *host)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *cfg;
	const char *store, *ws, *image;
	int r;

	if ((r = hutch_cli_call(p->sock, "GET", "/status", NULL, 200, &j)))
		return r;
	cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
	store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "image_store"));
	ws = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "workspace"));
	image = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "image"));
	*by_disk = ws && !strcmp(ws, "disk");
	*host = !image || !*image || !strcmp(image, "host");
	if (store && *store && setenv("HUTCH_IMAGE_STORE", store, 1) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

/* POST /fork: 0 with the answer ({disks, image, method, frozen_ms}), or an
 * exit code. copy false: only where the source's disk can be cloned; where
 * it cannot (501), *fallback is set (the snapshot route, faster than
 * copying the files into a new disk: docs/snapshots.md). */
static int fork_disks(const struct hutch_paths *p, const struct hutch_config *cfg, size_t n,
                      bool copy, cJSON **ret, bool *fallback)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	char body[160];
	int r;

	snprintf(body, sizeof(body), "{\"count\": %zu, \"disk_bytes\": %llu, \"copy\": %s}", n,
	         (unsigned long long)cfg->type->disk_bytes, copy ? "true" : "false");
	if ((r = hutch_client_request(p->sock, "POST", "/fork", body, strlen(body), &resp, &err)) <
	    0)
		return hutch_cli_lost(p->sock, r, err.msg);
	if (resp.status == 501 && !copy) {
		hutch_http_resp_done(&resp);
		*fallback = true;
		return 0;
	}
	if (resp.status != 201) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p->id);
	}
	*ret = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(*ret, "disks")) != (int)n ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(*ret, "image")))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: the source's answer has no disks");
	return 0;
}

/* The disks no fork took (a failure part-way) ended now, not after their
 * forkers' wait: a connection closed unasked ends a forker. */
static void drop_disks(const cJSON *ans, size_t from)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(ans, "disks");

	for (int i = (int)from; i < cJSON_GetArraySize(d); i++) {
		struct hutch_disk_job job;

		if (hutch_disk_fork_take(hutch_runtime_dir(),
		                         cJSON_GetStringValue(cJSON_GetArrayItem(d, i)), &job) >= 0)
			closep(&job.sock);
	}
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

/* snap: the snapshot's answer (the snapshot route) or POST /fork's. */
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
		if (name)
			cJSON_AddStringToObject(o, "snapshot", name);
		else
			cJSON_AddNullToObject(o, "snapshot");
		if (!name)
			cJSON_AddStringToObject(
			        o, "method",
			        cJSON_GetStringValue(
			                cJSON_GetObjectItemCaseSensitive(snap, "method")));
		cJSON_AddNumberToObject(o, "frozen_ms", cJSON_GetNumberValue(frozen));
		for (size_t i = 0; ids && i < n; i++)
			cJSON_AddItemToArray(ids, cJSON_CreateString(c[i].id));
		t = cJSON_PrintUnformatted(o);
		printf("%s\n", t ? t : "{}");
		return;
	}
	for (size_t i = 0; i < n; i++)
		printf("%s\n", c[i].id);
	if (name)
		fprintf(stderr, "hutch: %zu fork%s of %s from snapshot %s (frozen %.1f ms)\n", n,
		        n == 1 ? "" : "s", src, name, cJSON_GetNumberValue(frozen));
	else
		fprintf(stderr, "hutch: %zu fork%s of %s, its disk %s (frozen %.1f ms)\n", n,
		        n == 1 ? "" : "s", src,
		        strcmp(cJSON_GetStringValue(
		                       cJSON_GetObjectItemCaseSensitive(snap, "method"))
		                       ?: "",
		               "clone")
		                ? "copied"
		                : "cloned",
		        cJSON_GetNumberValue(frozen));
}

static int check_args(struct hutch_cli_args *a)
{
	struct hutch_err err = { 0 };
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch fork ID [-n N]");
	if (a->cfg.image[0])
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "fork starts from the source's filesystem: --image and "
		                      "--snapshot do not apply (create --snapshot NAME does that)");
	/* The forks' options checked before anything is made (create
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
	return 0;
}

/* The forks' root: the snapshot's (name) or the source's image with a
 * disk each (POST /fork's answer). */
static int root_of_forks(struct hutch_cli_args *a, const cJSON *ans, bool by_disk)
{
	const char *opt = by_disk ? "image" : "snapshot";
	const char *v = cJSON_GetStringValue(
	        cJSON_GetObjectItemCaseSensitive(ans, by_disk ? "image" : "name"));
	struct hutch_err err = { 0 };

	a->cfg.no_limits = a->no_limits;
	if (hutch_option_parse(hutch_option_find(opt), &a->cfg, v, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: %s", err.msg);
	return 0;
}

static int cmd_fork(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *snap = NULL;
	_cleanup_free_ struct hutch_created *c = NULL;
	const cJSON *disks;
	struct hutch_paths p;
	size_t made = 0, n = (size_t)a->size;
	bool by_disk = false, host = false, fallback = false;
	int r;

	if ((r = check_args(a)))
		return r;
	if (!(c = calloc(n, sizeof(*c))))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if ((r = hutch_cli_open_live(a->pos[0], &p)) || (r = use_source_store(&p, &by_disk, &host)))
		return r;
	by_disk = by_disk && geteuid() == 0 && !strcmp(a->cfg.workspace, "disk");
	if (by_disk && (r = fork_disks(&p, &a->cfg, n, host, &snap, &fallback)))
		return r;
	by_disk = by_disk && !fallback;
	if ((!by_disk && (r = take_snapshot(&p, &snap))) || (r = root_of_forks(a, snap, by_disk))) {
		if (by_disk && snap)
			drop_disks(snap, 0);
		return r;
	}
	disks = cJSON_GetObjectItemCaseSensitive(snap, "disks");
	for (; made < n; made++) {
		if (by_disk)
			snprintf(a->cfg.disk_from, sizeof(a->cfg.disk_from), "%s",
			         cJSON_GetStringValue(cJSON_GetArrayItem(disks, (int)made)));
		r = hutch_cli_create_sandbox(&a->cfg, a->progress, &c[made]);
		if (r)
			break;
	}
	if (r) {
		for (size_t i = 0; i < made; i++)
			hutch_created_drop(&c[i]); /* their supervisors delete them */
		if (by_disk) {
			drop_disks(snap, made + 1);
			fprintf(stderr, "hutch: fork %zu of %zu failed; %s deleted\n", made + 1, n,
			        made ? "the forks made were" : "nothing made to be");
		} else
			fprintf(stderr,
			        "hutch: fork %zu of %zu failed; %s deleted; snapshot %s kept\n",
			        made + 1, n, made ? "the forks made were" : "nothing made to be",
			        cJSON_GetStringValue(
			                cJSON_GetObjectItemCaseSensitive(snap, "name")));
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
	         "clone of its disk where the runtime dir's file system can (XFS, btrfs), else a\n"
	         "snapshot (it stays in the store, named on stderr: 'hutch snapshot rm' it once\n"
	         "the forks are gone); the sandbox frozen meanwhile, then running on. Then N\n"
	         "sandboxes made from it, each with its own id and the options given here\n"
	         "(limits, network, TTL...; create's defaults otherwise). Prints their ids, one a\n"
	         "line; all or none are made. Processes and memory are not forked.\n",
	.opts = fork_opts,
	.sandbox_opts = true,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_fork,
};
