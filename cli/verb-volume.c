/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch volume create|ls|inspect|rm: the named volumes of the image store
 * (image/volstore.h), which -v NAME:PATH mounts and which outlive
 * sandboxes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "image.h"
#include "state.h"
#include "verbs.h"
#include "volstore.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const char volume_usage[] =
        "usage: hutch volume create NAME...        make named volumes (made on first -v use too)\n"
        "       hutch volume ls [--json|-q]        list them\n"
        "       hutch volume inspect NAME...       each as JSON: name, path, created, in use\n"
        "       hutch volume rm NAME...            remove them with their files (not in use)\n"
        "\n"
        "A named volume is a directory of the image store (/var/lib/hutch, an ordinary user's\n"
        "~/.local/share/hutch, or HUTCH_IMAGE_STORE, or --store DIR): volumes/NAME/data.\n"
        "'hutch create -v NAME:PATH[:rw]' mounts it on PATH, read-only unless :rw, its files\n"
        "appuser's; it outlives the sandboxes that use it, and any number of them share it.\n";

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                    \
	X(json, "print JSON")            \
	X(quiet, "print the names only") \
	HUTCH_CLI_STORE_HELP(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt ls_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	{ .name = "quiet", .short_name = 'q', .kind = HUTCH_CLI_FLAG, A(quiet), HELP(quiet) },
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

static cJSON *info_json(const struct hutch_volume_info *v)
{
	cJSON *o = cJSON_CreateObject();
	char ts[32] = "";
	time_t when = (time_t)v->created;
	struct tm tm;

	if (gmtime_r(&when, &tm))
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(o, "name", v->name);
	cJSON_AddStringToObject(o, "path", v->path);
	cJSON_AddStringToObject(o, "created", ts);
	cJSON_AddBoolToObject(o, "in_use", v->in_use);
	return o;
}

static int cmd_create(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_err err = { 0 };
	int r, rc = 0;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "volume create needs a NAME (one not in 'hutch volume ls')");
	if ((r = hutch_cli_open_store(a, &s)))
		return r;
	for (size_t i = 0; i < a->npos; i++) {
		if (hutch_volume_create(s, a->pos[i], &err) < 0)
			rc = fail(&err);
		else
			puts(a->pos[i]);
	}
	return rc;
}

static int cmd_ls(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	struct hutch_err err = { 0 };
	char **names = NULL;
	size_t n = 0;
	int r;

	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (s && hutch_volume_list(s, &names, &n, &err) < 0)
		return fail(&err);
	if (!a->json && !a->quiet)
		printf("%-32s %-20s %s\n", "NAME", "CREATED", "IN USE");
	for (size_t i = 0; i < n; i++) {
		struct hutch_volume_info v;
		cJSON *o;

		if (a->quiet)
			puts(names[i]);
		else if (hutch_volume_inspect(s, names[i], &v, &err) >= 0 && (o = info_json(&v))) {
			if (a->json)
				cJSON_AddItemToArray(arr, o);
			else {
				printf("%-32s %-20s %s\n", v.name,
				       cJSON_GetObjectItem(o, "created")->valuestring,
				       v.in_use ? "yes" : "no");
				cJSON_Delete(o);
			}
		}
		free(names[i]);
	}
	free(names);
	if (a->json) {
		_cleanup_free_ char *t = cJSON_Print(arr);
		puts(t ? t : "[]");
	}
	return 0;
}

static int cmd_inspect(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	_cleanup_free_ char *t = NULL;
	struct hutch_err err = { 0 };
	int r, rc = 0;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "volume inspect needs a NAME; see 'hutch volume ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	for (size_t i = 0; i < a->npos; i++) {
		struct hutch_volume_info v;

		if (!s)
			rc = hutch_cli_store_absent("volume", a->pos[i], a->store);
		else if (hutch_volume_inspect(s, a->pos[i], &v, &err) < 0)
			rc = fail(&err);
		else
			cJSON_AddItemToArray(arr, info_json(&v));
	}
	t = cJSON_Print(arr);
	puts(t ? t : "[]");
	return rc;
}

/* Does this sandbox's state.json list volume name? */
static bool uses(const struct hutch_paths *p, const char *name)
{
	_cleanup_cjson_ cJSON *st = NULL;
	const cJSON *cfg, *v, *it;
	size_t n = strlen(name);

	if (hutch_state_read(p, &st) < 0)
		return false;
	cfg = cJSON_GetObjectItemCaseSensitive(st, "config");
	v = cJSON_GetObjectItemCaseSensitive(cfg, "volumes");
	cJSON_ArrayForEach(it, v) {
		if (cJSON_IsString(it) && !strncmp(it->valuestring, name, n) &&
		    it->valuestring[n] == ':')
			return true;
	}
	return false;
}

/* In use: name the sandboxes of this runtime dir that use it. */
static int in_use(const char *name, const struct hutch_err *err)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	char list[256] = "";
	size_t n = 0, len = 0;

	if (hutch_state_list(hutch_runtime_dir(), &ids, &n) >= 0) {
		for (size_t i = 0; i < n && len + HUTCH_ID_LEN + 2 < sizeof(list); i++) {
			struct hutch_paths p;

			if (hutch_paths_init(hutch_runtime_dir(), ids[i], &p) >= 0 &&
			    hutch_state_is_live(&p) > 0 && uses(&p, name))
				len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
				                        len ? " " : "", ids[i]);
		}
		free(ids);
	}
	if (!len)
		return fail(err);
	return hutch_cli_fail(hutch_errc_exit(hutch_err_class(err)),
	                      "volume '%s' is in use by sandbox %s: 'hutch rm %s' first", name,
	                      list, list);
}

static int cmd_rm(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_err err = { 0 };
	int r, rc = 0;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "volume rm needs a NAME; see 'hutch volume ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	for (size_t i = 0; i < a->npos; i++) {
		if (!s)
			rc = hutch_cli_store_absent("volume", a->pos[i], a->store);
		else if ((r = hutch_volume_rm(s, a->pos[i], &err)) < 0)
			rc = hutch_err_class(&err) == HUTCH_ERRC_CONFLICT ? in_use(a->pos[i], &err)
			                                                  : fail(&err);
		else
			puts(a->pos[i]);
	}
	return rc;
}

const struct hutch_cli_verb hutch_verb_volume_create = {
	.name = "volume create",
	.synopsis = "NAME...",
	.about = "Make named volumes (-v NAME:PATH also makes one on first use).\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_create,
};
const struct hutch_cli_verb hutch_verb_volume_ls = {
	.name = "volume ls",
	.synopsis = "[--json|-q]",
	.about = "List the named volumes of the store.\n",
	.opts = ls_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.run = cmd_ls,
};
const struct hutch_cli_verb hutch_verb_volume_inspect = {
	.name = "volume inspect",
	.synopsis = "NAME...",
	.about = "Print volumes as a JSON array: name, path on the host, created, in_use.\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_inspect,
};
const struct hutch_cli_verb hutch_verb_volume_rm = {
	.name = "volume rm",
	.synopsis = "NAME...",
	.about = "Remove volumes and their files; one a sandbox uses is refused (exit 70).\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_rm,
};

int hutch_cli_volume(int argc, char **argv, const struct hutch_cli_verb *const *all)
{
	static const struct hutch_cli_verb *const subs[] = {
		&hutch_verb_volume_create,
		&hutch_verb_volume_ls,
		&hutch_verb_volume_inspect,
		&hutch_verb_volume_rm,
		NULL,
	};

	return hutch_cli_run_group("volume", volume_usage, "create, ls, inspect or rm", subs, argc,
	                           argv, all);
}
