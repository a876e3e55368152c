/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch snapshot ID [NAME]: a live sandbox's filesystem as an image of the
 * store (POST /snapshot; docs/snapshots.md); hutch snapshot ls, inspect
 * and rm: the store's snapshots (images whose reference says "snapshot"),
 * rm refused while a live sandbox uses one. Spawning is create's
 * --snapshot NAME. hutch rollback ID SNAPSHOT: POST /rollback.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "criu.h"
#include "image.h"
#include "state.h"
#include "stream.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const char snapshot_usage[] =
        "usage: hutch snapshot ID [NAME] [--json]        snapshot a sandbox's filesystem\n"
        "       hutch snapshot ls [--json]               list the snapshots\n"
        "       hutch snapshot inspect NAME              a snapshot as JSON\n"
        "       hutch snapshot rm NAME...                forget snapshots (not while used)\n"
        "\n"
        "A snapshot is an image of the store: the sandbox's image's layers, shared, plus one\n"
        "layer of what the sandbox wrote (its root's changes, /workspace, /home/appuser,\n"
        "/tmp), taken with the sandbox frozen. 'hutch create --snapshot NAME' (or --image\n"
        "NAME) starts sandboxes from it. Only sandboxes made from an image can be\n"
        "snapshotted (not the host-derived root), and only with a cgroup to freeze (not\n"
        "--no-limits; an ordinary user's: in a delegated cgroup v2). --full: processes and memory\n"
        "too, dumped by CRIU (HUTCH_CRIU or PATH; 4.1 or later) into the store, private\n"
        "to its owner; only a plain sandbox (--image host, network none, no volumes, no\n"
        "header bindings, --change-lists off); 'hutch create --snapshot NAME' restores\n"
        "it into a new sandbox (its own uid range, cgroups, disk; network none), the\n"
        "processes carrying on; see 'hutch doctor', docs/snapshots.md.\n";

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                    \
	X(json, "print the result as JSON")                                              \
	X(full, "processes and memory too (CRIU's dump; create --snapshot restores it)") \
	X(ls_opts_json, "print JSON")                                                    \
	HUTCH_CLI_STORE_HELP(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt take_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	{ .name = "full", .kind = HUTCH_CLI_FLAG, A(all), HELP(full) },
	{ .name = "" },
};
static const struct hutch_cli_opt ls_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(ls_opts_json) },
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};
static const struct hutch_cli_opt store_opts[] = {
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};

static int fail(const struct hutch_err *err)
{
	return hutch_cli_fail(hutch_errc_exit(hutch_err_class(err)), "%s", err->msg);
}

static int cmd_take(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *j = NULL;
	_cleanup_free_ char *text = NULL;
	struct hutch_paths p;
	const cJSON *name, *frozen, *bytes;
	int r;

	if (a->all) {
		/* Refused at once where the CRIU found (as create finds it for
		 * the supervisor) fails 'criu check'; the supervisor checks its own. */
		struct hutch_criu c;
		char why[1024];

		hutch_criu_probe(hutch_runtime_dir(), &c);
		if (!c.works) {
			hutch_criu_refusal(&c, why, sizeof(why));
			return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "%s", why);
		}
	}
	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing sandbox id: hutch snapshot ID [NAME]");
	if (a->npos > 1 && !hutch_image_name_is_valid(a->pos[1]))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid snapshot name '%.64s': letters, digits and "
		                      "._:/@+- (not first), no '..'",
		                      a->pos[1]);
	if (!body || (a->npos > 1 && !cJSON_AddStringToObject(body, "name", a->pos[1])) ||
	    (a->all && !cJSON_AddStringToObject(body, "type", "full")) ||
	    !(text = cJSON_PrintUnformatted(body)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	r = hutch_cli_call(p.sock, "POST", "/snapshot", text, 201, &j);
	if (r)
		return r;
	name = cJSON_GetObjectItemCaseSensitive(j, "name");
	frozen = cJSON_GetObjectItemCaseSensitive(j, "frozen_ms");
	bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
		return 0;
	}
	printf("%s\n", cJSON_IsString(name) ? name->valuestring : "");
	if (a->all && cJSON_IsNumber(bytes))
		fprintf(stderr,
		        "hutch: full snapshot of %.0f bytes (processes and memory: private to its "
		        "owner)\n",
		        bytes->valuedouble);
	else if (cJSON_IsNumber(frozen) && cJSON_IsNumber(bytes))
		fprintf(stderr,
		        "hutch: snapshot of %.0f bytes of changes, sandbox frozen %.1f ms\n",
		        bytes->valuedouble, frozen->valuedouble);
	return 0;
}

static int cmd_rollback(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *j = NULL;
	_cleanup_free_ char *text = NULL;
	const cJSON *changes, *frozen;
	struct hutch_paths p;
	int r;

	if (a->npos < 2)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing %s: hutch rollback ID SNAPSHOT",
		                      a->npos ? "snapshot" : "sandbox id and snapshot");
	if (!hutch_image_name_is_valid(a->pos[1]))
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "invalid snapshot name '%.64s'", a->pos[1]);
	if (!body || !cJSON_AddStringToObject(body, "snapshot", a->pos[1]) ||
	    !(text = cJSON_PrintUnformatted(body)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if ((r = hutch_cli_open_live(a->pos[0], &p)) ||
	    (r = hutch_cli_call(p.sock, "POST", "/rollback", text, 200, &j)))
		return r;
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
		return 0;
	}
	changes = cJSON_GetObjectItemCaseSensitive(j, "changes");
	frozen = cJSON_GetObjectItemCaseSensitive(j, "frozen_ms");
	if (cJSON_IsNumber(changes) && cJSON_IsNumber(frozen))
		fprintf(stderr, "hutch: rolled back to %s: %.0f changes, sandbox frozen %.1f ms\n",
		        a->pos[1], changes->valuedouble, frozen->valuedouble);
	return 0;
}

/* The store's snapshots: hutch_image_list() filtered. */
/* Full snapshots as rows of ls: {"name", "snapshot": their snapshot.json}. */
static int add_full(struct hutch_image_store *s, cJSON *out)
{
	_cleanup_cjson_ cJSON *full = NULL;
	struct hutch_err err = { 0 };
	cJSON *m;

	if (hutch_image_full_list(s, &full, &err) < 0)
		return 0; /* a store without full/: none */
	cJSON_ArrayForEach(m, full) {
		cJSON *row = cJSON_CreateObject();

		if (!row ||
		    !cJSON_AddStringToObject(row, "name",
		                             cJSON_GetStringValue(cJSON_GetObjectItem(m, "name"))
		                                     ?: "") ||
		    !cJSON_AddItemToObject(row, "snapshot", cJSON_Duplicate(m, true))) {
			cJSON_Delete(row);
			return -ENOMEM;
		}
		cJSON_AddItemToArray(out, row);
	}
	return 0;
}

static int cmd_ls(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *all = NULL, *out = cJSON_CreateArray();
	struct hutch_err err = { 0 };
	const cJSON *img;
	int r;

	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (s && hutch_image_list(s, &all, &err) < 0)
		return fail(&err);
	if (!out)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	cJSON_ArrayForEach(img, all)
		if (hutch_image_is_snapshot(img))
			cJSON_AddItemToArray(out, cJSON_Duplicate(img, true));
	if (s && add_full(s, out) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (a->json) {
		_cleanup_free_ char *t = cJSON_Print(out);
		puts(t ? t : "[]");
		return 0;
	}
	printf("%-32s %-24s %-14s %7s %s\n", "NAME", "BASE", "SOURCE", "LAYERS", "CREATED");
	cJSON_ArrayForEach(img, out) {
		const cJSON *sn = cJSON_GetObjectItemCaseSensitive(img, "snapshot");
		const cJSON *base = cJSON_GetObjectItemCaseSensitive(sn, "base");
		const cJSON *src = cJSON_GetObjectItemCaseSensitive(sn, "source");
		const cJSON *created = cJSON_GetObjectItemCaseSensitive(sn, "created");
		char when[32] = "";
		time_t t = cJSON_IsNumber(created) ? (time_t)created->valuedouble : 0;

		if (t)
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(sn, "type");
		bool full = cJSON_IsString(type) && !strcmp(type->valuestring, "full");
		char layers[16];

		snprintf(layers, sizeof(layers), "%d",
		         cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(img, "layers")));
		printf("%-32s %-24s %-14.12s %7s %s\n",
		       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(img, "name")) ?: "",
		       full ? "(full: processes)" : cJSON_GetStringValue(base) ?: "",
		       cJSON_GetStringValue(src) ?: "", full ? "-" : layers, when);
	}
	return 0;
}

static int cmd_inspect(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *j = NULL;
	_cleanup_free_ char *t = NULL;
	struct hutch_err err = { 0 };
	int r;

	if (a->npos != 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "snapshot inspect needs one NAME; see 'hutch snapshot ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (!s)
		return hutch_cli_store_absent("snapshot", a->pos[0], a->store);
	if (hutch_image_full_exists(s, a->pos[0]) > 0) {
		if (hutch_image_full_inspect(s, a->pos[0], &j, &err) < 0)
			return fail(&err);
		t = cJSON_Print(j);
		puts(t ? t : "{}");
		return 0;
	}
	if (hutch_image_inspect(s, a->pos[0], &j, &err) < 0)
		return fail(&err);
	if (!hutch_image_is_snapshot(j))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "'%s' is an image, not a snapshot: 'hutch image inspect %s'",
		                      a->pos[0], a->pos[0]);
	t = cJSON_Print(j);
	puts(t ? t : "{}");
	return 0;
}

static int cmd_rm(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	int r, rc = 0;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "snapshot rm needs a NAME; see 'hutch snapshot ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	for (size_t i = 0; i < a->npos; i++) {
		struct hutch_err err = { 0 };

		if (!s)
			rc = hutch_cli_store_absent("snapshot", a->pos[i], a->store);
		else if (hutch_image_full_exists(s, a->pos[i]) > 0) {
			/* A full snapshot (full/NAME): under the writers' lock. */
			if (hutch_image_store_lock(s, &err) < 0 ||
			    hutch_image_full_remove(s, a->pos[i], &err) < 0)
				rc = fail(&err);
		} else if (hutch_image_snapshot_remove(s, a->pos[i], &err) < 0)
			rc = fail(&err);
	}
	return rc;
}

const struct hutch_cli_verb hutch_verb_snapshot = {
	.name = "snapshot",
	.synopsis = "ID [NAME] [--json] | ls | inspect NAME | rm NAME...",
	.about = "Snapshot a live sandbox's filesystem as image NAME of its store (default\n"
	         "snap-<id>-<n>): its image's layers, shared, and one layer of what it wrote,\n"
	         "taken with the sandbox frozen (how long: on stderr, frozen_ms with --json).\n"
	         "Prints the name. 'hutch create --snapshot NAME' starts sandboxes from it.\n",
	.opts = take_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.id_pos = 1,
	.run = cmd_take,
};
const struct hutch_cli_verb hutch_verb_rollback = {
	.name = "rollback",
	.synopsis = "ID SNAPSHOT [--json]",
	.about = "Return a live sandbox's filesystem to SNAPSHOT in place: what the sandbox\n"
	         "changed since is undone, what the snapshot holds is put back (its root,\n"
	         "/workspace, /home/appuser, /tmp), the sandbox frozen meanwhile; its processes\n"
	         "run on (files they hold open stay the old ones). SNAPSHOT must be of this\n"
	         "sandbox's image's lineage: a snapshot of it, of another sandbox of its image,\n"
	         "or one its image was spawned from. Only with a cgroup to freeze (not\n"
	         "--no-limits). An ordinary user's snapshots hold no owners: each path keeps its\n"
	         "owner, one put back takes its directory's (appuser's in its workspace).\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.max_pos = 2,
	.id_pos = 1,
	.run = cmd_rollback,
};
const struct hutch_cli_verb hutch_verb_snapshot_ls = {
	.name = "snapshot ls",
	.synopsis = "[--json]",
	.about = "List the store's snapshots: name, base image, source sandbox, layers.\n",
	.opts = ls_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.run = cmd_ls,
};
const struct hutch_cli_verb hutch_verb_snapshot_inspect = {
	.name = "snapshot inspect",
	.synopsis = "NAME",
	.about = "A snapshot as JSON (the image's, with \"snapshot\": base, source, created).\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.run = cmd_inspect,
};
const struct hutch_cli_verb hutch_verb_snapshot_rm = {
	.name = "snapshot rm",
	.synopsis = "NAME...",
	.about = "Forget snapshots; refused while a live sandbox was spawned or forked from one\n"
	         "(its layers stay until 'hutch image prune').\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_rm,
};

int hutch_cli_snapshot(int argc, char **argv, const struct hutch_cli_verb *const *all)
{
	static const struct hutch_cli_verb *const subs[] = {
		&hutch_verb_snapshot_ls,
		&hutch_verb_snapshot_inspect,
		&hutch_verb_snapshot_rm,
		NULL,
	};
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(snapshot_usage, sub ? stdout : stderr);
		return sub ? 0 : HUTCH_EXIT_USAGE;
	}
	for (size_t i = 0; subs[i]; i++)
		if (!strcmp(subs[i]->name + strlen("snapshot "), sub))
			return hutch_cli_run(subs[i], all, argc - 1, argv + 1);
	return hutch_cli_run(&hutch_verb_snapshot, all, argc, argv);
}
