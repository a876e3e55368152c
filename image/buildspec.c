/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch build's file (buildspec.h; docs/snapshots.md "The builder"),
 * parsed with cJSON into plain strings: every key checked for its type and
 * bounds, unknown keys refused (a typo never builds something else), each
 * refusal naming the key and the fix. Pure (no I/O): the CLI does the
 * rest. Also the one check of an environment entry that snapshots' Env
 * takes (hutch_image_env_is_valid(), image.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buildspec.h"
#include "cleanup.h"
#include "image.h"

#define ENV_ENTRY_MAX (32u << 10)

bool hutch_image_env_is_valid(const char *entry)
{
	size_t n = strspn(entry, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789");

	return n > 0 && !(entry[0] >= '0' && entry[0] <= '9') && entry[n] == '=' &&
	       !strchr(entry, '\n') && strlen(entry) <= ENV_ENTRY_MAX;
}

/* "'KEY' WHAT": the key named and what it must be. */
static int bad(struct hutch_err *err, const char *key, const char *what)
{
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "'%s' %s", key, what);
}

/* A path: a non-empty string without a newline, bounded. */
static bool is_path(const cJSON *j)
{
	return cJSON_IsString(j) && j->valuestring[0] && !strchr(j->valuestring, '\n') &&
	       strlen(j->valuestring) <= HUTCH_BUILDSPEC_PATH_MAX;
}

static int dup_to(char **dst, const char *src, struct hutch_err *err)
{
	if (!(*dst = strdup(src)))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* An array or object of at most max entries (kind: 1 array, 2 object):
 * its size, or -EINVAL. */
static int sized(const cJSON *j, bool object, size_t max, const char *key, struct hutch_err *err)
{
	int n;

	if (object ? !cJSON_IsObject(j) : !cJSON_IsArray(j))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "'%s' must be %s", key,
		                           object ? "an object" : "an array");
	n = cJSON_GetArraySize(j);
	if ((size_t)n > max)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'%s' has %d entries: at most %zu", key, n, max);
	return n;
}

static int parse_env(const cJSON *j, struct hutch_buildspec *b, struct hutch_err *err)
{
	int n = sized(j, true, HUTCH_IMAGE_SNAPSHOT_ENV_MAX, "env", err);
	const cJSON *e;

	if (n < 0)
		return n;
	if (!(b->env = calloc((size_t)n + 1, sizeof(*b->env))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, j) {
		char *nv = NULL;

		if (!cJSON_IsString(e))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'env' value of '%.64s' must be a string",
			                           e->string);
		if (asprintf(&nv, "%s=%s", e->string, e->valuestring) < 0)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		b->env[b->nenv++] = nv;
		if (strchr(e->string, '=') || !hutch_image_env_is_valid(nv))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'env' name '%.64s' must be letters, digits and _ "
			        "(not a digit first), its value without a newline",
			        e->string);
	}
	return 0;
}

static int parse_files(const cJSON *j, struct hutch_buildspec *b, struct hutch_err *err)
{
	int n = sized(j, true, HUTCH_BUILDSPEC_STEPS_MAX, "files", err);
	const cJSON *e;
	int r;

	if (n < 0)
		return n;
	if (!(b->files = calloc((size_t)n + 1, sizeof(*b->files))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, j) {
		struct hutch_build_file *f = &b->files[b->nfiles];

		if (!e->string[0] || strchr(e->string, '\n') ||
		    strlen(e->string) > HUTCH_BUILDSPEC_PATH_MAX)
			return bad(err, "files",
			           "keys must be sandbox paths (no newline, at most 4095 bytes)");
		if (!cJSON_IsString(e))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'files' value of '%.64s' must be the file's text "
			        "(a string)",
			        e->string);
		if ((r = dup_to(&f->path, e->string, err)) < 0 ||
		    (r = dup_to(&f->content, e->valuestring, err)) < 0)
			return r;
		b->nfiles++;
	}
	return 0;
}

static int parse_copies(const cJSON *j, struct hutch_buildspec *b, struct hutch_err *err)
{
	int n = sized(j, false, HUTCH_BUILDSPEC_STEPS_MAX, "copy", err);
	const cJSON *e;
	int r;

	if (n < 0)
		return n;
	if (!(b->copies = calloc((size_t)n + 1, sizeof(*b->copies))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, j) {
		const cJSON *src = cJSON_GetObjectItemCaseSensitive(e, "src");
		const cJSON *dst = cJSON_GetObjectItemCaseSensitive(e, "dst");
		struct hutch_build_copy *c = &b->copies[b->ncopies];

		if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) != 2 || !is_path(src) ||
		    !is_path(dst))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'copy' entry %zu must be {\"src\": HOST_PATH, "
			                           "\"dst\": SANDBOX_PATH}",
			                           b->ncopies + 1);
		if ((r = dup_to(&c->src, src->valuestring, err)) < 0 ||
		    (r = dup_to(&c->dst, dst->valuestring, err)) < 0)
			return r;
		b->ncopies++;
	}
	return 0;
}

/* A run entry: "COMMAND" or {"command", "cwd", "timeout"}. */
static int parse_cmd(const cJSON *e, struct hutch_build_cmd *c, size_t i, struct hutch_err *err)
{
	const cJSON *cmd = e, *cwd = NULL, *t = NULL, *k;
	int r;

	if (cJSON_IsObject(e)) {
		cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
		cwd = cJSON_GetObjectItemCaseSensitive(e, "cwd");
		t = cJSON_GetObjectItemCaseSensitive(e, "timeout");
		cJSON_ArrayForEach(k, e)
			if (strcmp(k->string, "command") && strcmp(k->string, "cwd") &&
			    strcmp(k->string, "timeout"))
				cmd = NULL;
	}
	if (!cJSON_IsString(cmd) || !cmd->valuestring[0] || (cwd && !is_path(cwd)) ||
	    (t && (!cJSON_IsNumber(t) || !isfinite(t->valuedouble) || t->valuedouble <= 0 ||
	           t->valuedouble > 1e9)))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'run' entry %zu must be a command (a string) or "
		                           "{\"command\": STRING, \"cwd\": PATH, \"timeout\": "
		                           "SECONDS}",
		                           i + 1);
	if ((r = dup_to(&c->command, cmd->valuestring, err)) < 0 ||
	    (cwd && (r = dup_to(&c->cwd, cwd->valuestring, err)) < 0))
		return r;
	c->timeout = t ? t->valuedouble : 0;
	return 0;
}

static int parse_runs(const cJSON *j, struct hutch_buildspec *b, struct hutch_err *err)
{
	int n = sized(j, false, HUTCH_BUILDSPEC_STEPS_MAX, "run", err);
	const cJSON *e;
	int r;

	if (n < 0)
		return n;
	if (!(b->runs = calloc((size_t)n + 1, sizeof(*b->runs))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, j) {
		if ((r = parse_cmd(e, &b->runs[b->nruns], b->nruns, err)) < 0)
			return r;
		b->nruns++;
	}
	return 0;
}

/* One top-level key into b. */
static int parse_key(const cJSON *k, struct hutch_buildspec *b, struct hutch_err *err)
{
	static const char keys[] = "image, name, workdir, env, files, copy, run";
	const char *s = k->string;

	if (!strcmp(s, "image") || !strcmp(s, "name")) {
		char **dst = !strcmp(s, "image") ? &b->image : &b->name;
		if (!cJSON_IsString(k) || !k->valuestring[0] || strlen(k->valuestring) > 255)
			return bad(err, s, "must be a name (a string)");
		return *dst ? bad(err, s, "is given twice") : dup_to(dst, k->valuestring, err);
	}
	if (!strcmp(s, "workdir")) {
		if (!is_path(k))
			return bad(err, s, "must be a sandbox path (a string)");
		return b->workdir ? bad(err, s, "is given twice")
		                  : dup_to(&b->workdir, k->valuestring, err);
	}
	if (!strcmp(s, "env") || !strcmp(s, "files") || !strcmp(s, "copy") || !strcmp(s, "run")) {
		bool twice = !strcmp(s, "env")     ? b->env != NULL
		             : !strcmp(s, "files") ? b->files != NULL
		             : !strcmp(s, "copy")  ? b->copies != NULL
		                                   : b->runs != NULL;
		if (twice)
			return bad(err, s, "is given twice");
		return !strcmp(s, "env")     ? parse_env(k, b, err)
		       : !strcmp(s, "files") ? parse_files(k, b, err)
		       : !strcmp(s, "copy")  ? parse_copies(k, b, err)
		                             : parse_runs(k, b, err);
	}
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
	                           "unknown key '%.64s' (a build file has %s)", s, keys);
}

int hutch_buildspec_parse(const char *text, size_t len, struct hutch_buildspec *ret,
                          struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_buildspec b = { 0 };
	const char *end = NULL;
	const cJSON *k;
	int r = 0;

	if (len > HUTCH_BUILDSPEC_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EFBIG,
		                           "the build file has more than %u bytes",
		                           HUTCH_BUILDSPEC_MAX);
	j = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!j)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the build file is not JSON (at byte %zu)",
		                           end && end >= text ? (size_t)(end - text) : 0);
	if (!cJSON_IsObject(j))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the build file must be a JSON object");
	cJSON_ArrayForEach(k, j)
		if (!k->string || (r = parse_key(k, &b, err)) < 0)
			break;
	if (r >= 0 && !b.env && !(b.env = calloc(1, sizeof(*b.env))))
		r = hutch_err_set(err, -ENOMEM, "out of memory");
	if (r < 0) {
		hutch_buildspec_done(&b);
		return r;
	}
	*ret = b;
	return 0;
}

void hutch_buildspec_done(struct hutch_buildspec *b)
{
	for (size_t i = 0; b->env && i < b->nenv; i++)
		free(b->env[i]);
	for (size_t i = 0; i < b->nfiles; i++) {
		free(b->files[i].path);
		free(b->files[i].content);
	}
	for (size_t i = 0; i < b->ncopies; i++) {
		free(b->copies[i].src);
		free(b->copies[i].dst);
	}
	for (size_t i = 0; i < b->nruns; i++) {
		free(b->runs[i].command);
		free(b->runs[i].cwd);
	}
	free(b->env);
	free(b->files);
	free(b->copies);
	free(b->runs);
	free(b->name);
	free(b->image);
	free(b->workdir);
	*b = (struct hutch_buildspec){ 0 };
}
