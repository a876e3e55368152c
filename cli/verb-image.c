/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch image pull, import, ls, inspect, rm and prune: the image store's verbs
 * (the store itself: image/). Each subcommand is a verb of its own for the
 * parser, "image import" and so on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "idmap.h"
#include "image.h"
#include "progress.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const char image_usage[] =
        "usage: hutch image pull REF [NAME]                 pull from a registry (skopeo)\n"
        "       hutch image import SRC [NAME] [--tag TAG]   import an OCI layout or an archive\n"
        "       hutch image ls [--json]                     list the images\n"
        "       hutch image inspect NAME                    an image as JSON\n"
        "       hutch image rm NAME...                      forget images (layers stay)\n"
        "       hutch image prune                           remove layers no image uses\n"
        "       hutch image build-default [NAME] [--recipe FILE]  build an image from a recipe\n"
        "\n"
        "The store is /var/lib/hutch (an ordinary user's: $XDG_DATA_HOME/hutch or\n"
        "~/.local/share/hutch, theirs alone), or HUTCH_IMAGE_STORE, or --store DIR. SRC is an OCI\n"
        "image layout directory (as 'skopeo copy ... oci:DIR' writes) or a 'docker save' /\n"
        "'podman save' archive. REF is a registry reference (docker.io/library/debian:12,\n"
        "localhost:5000/x:1, python:3.12 for Docker Hub). Every digest is checked; each\n"
        "layer is unpacked once. Pull, import and build-default show a progress bar on a\n"
        "terminal, lines otherwise (-q: nothing); an interrupted pull, run again, downloads\n"
        "only the blobs it had not finished.\n";

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                    \
	X(quiet, "print nothing: no progress bar or lines, no summary (skopeo and "      \
	         "mmdebstrap run --quiet)")                                              \
	X(tag, "the layout's manifest of this org.opencontainers.image.ref.name")        \
	X(recipe, "build from this recipe (default: the built-in image/default.recipe)") \
	X(json, "print JSON")                                                            \
	HUTCH_CLI_STORE_HELP(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

#define QUIET_OPT                                                                                 \
	{                                                                                         \
		.name = "quiet", .short_name = 'q', .kind = HUTCH_CLI_FLAG, A(quiet), HELP(quiet) \
	}

static const struct hutch_cli_opt import_opts[] = {
	{ .name = "tag", .kind = HUTCH_CLI_STRING, A(tag), .metavar = "TAG", HELP(tag) },
	QUIET_OPT,
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};
static const struct hutch_cli_opt fetch_opts[] = {
	QUIET_OPT,
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};
static const struct hutch_cli_opt build_opts[] = {
	QUIET_OPT,
	HUTCH_CLI_STORE_OPT,
	{ .name = "recipe", .kind = HUTCH_CLI_STRING, A(recipe), .metavar = "FILE", HELP(recipe) },
	{ .name = "" },
};
static const struct hutch_cli_opt ls_opts[] = {
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};
static const struct hutch_cli_opt store_opts[] = {
	HUTCH_CLI_STORE_OPT,
	{ .name = "" },
};

/* --store, HUTCH_IMAGE_STORE, else root's or the user's own store;
 * NULL (said on stderr) when an ordinary user has no home to put it in. */
static const char *store_path(const char *given, char *buf, size_t size)
{
	const char *path = given && *given ? given : hutch_image_store_path(buf, size);

	if (!path)
		hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE,
		               "no image store: an ordinary user's is $XDG_DATA_HOME/hutch or "
		               "$HOME/.local/share/hutch, and neither variable is an absolute "
		               "path: set one, or HUTCH_IMAGE_STORE (or --store DIR)");
	return path;
}

int hutch_cli_open_store(const struct hutch_cli_args *a, struct hutch_image_store **ret)
{
	return hutch_cli_image_store_open(a->store, ret);
}

int hutch_cli_image_store_open(const char *given, struct hutch_image_store **ret)
{
	struct hutch_err err = { 0 };
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = store_path(given, buf, sizeof(buf));

	if (!path)
		return HUTCH_EXIT_NOT_CAPABLE;
	if (hutch_image_store_open(path, ret, &err) < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "%s", err.msg);
	return 0;
}

/* The read-only verbs (ls, inspect, rm, prune) on a store not made yet:
 * 0 and *ret NULL, nothing made (a listing is empty, a name is not there). */
int hutch_cli_image_store_find(const char *given, struct hutch_image_store **ret)
{
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = store_path(given, buf, sizeof(buf));

	*ret = NULL;
	if (!path)
		return HUTCH_EXIT_NOT_CAPABLE;
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	return hutch_cli_image_store_open(given, ret);
}

int hutch_cli_store_absent(const char *what, const char *name, const char *given)
{
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = store_path(given, buf, sizeof(buf));

	return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
	                      "no %s '%s': the image store '%s' is not made yet (the first image "
	                      "pull, import or build, volume or snapshot makes it)",
	                      what, name, path ? path : "");
}

static int fail(const struct hutch_err *err)
{
	return hutch_cli_fail(hutch_errc_exit(hutch_err_class(err)), "%s", err->msg);
}

/* NAME defaults to SRC's last component. */
static const char *default_name(const char *src)
{
	size_t len = strlen(src);
	const char *base;

	while (len > 1 && src[len - 1] == '/')
		len--;
	for (base = src + len; base > src && base[-1] != '/'; base--)
		;
	return base;
}

static int cmd_import(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_image_import_stats st = { 0 };
	struct hutch_cli_progress prog;
	struct hutch_err err = { 0 };
	_cleanup_free_ char *name = NULL;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "image import needs SRC; see 'hutch image "
		                                        "--help'");
	name = a->npos > 1
	               ? strdup(a->pos[1])
	               : strndup(default_name(a->pos[0]), strcspn(default_name(a->pos[0]), "/"));
	if (!name)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if ((r = hutch_cli_open_store(a, &s)))
		return r;
	hutch_cli_progress_init(&prog, a->quiet);
	hutch_cli_progress_attach(&prog, &st);
	r = hutch_image_import(s, a->pos[0], a->tag, name, &st, &err);
	hutch_cli_progress_done(&prog);
	if (r < 0) /* nothing imported: a store made for it is not left behind */
		(void)hutch_image_store_unmake(s);
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "import '%s': %s",
		                      a->pos[0], err.msg);
	if (!a->quiet)
		printf("%s: %zu layers (%zu cached), %.1f MB unpacked\n", name, st.layers,
		       st.cached, (double)st.bytes / 1e6);
	return 0;
}

static int cmd_pull(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_image_import_stats st = { 0 };
	struct hutch_cli_progress prog;
	struct hutch_err err = { 0 };
	const char *name = a->npos > 1 ? a->pos[1] : a->pos[0];
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "image pull needs REF; see 'hutch image "
		                                        "--help'");
	if (!hutch_image_ref_is_valid(a->pos[0]))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid image reference '%s': a registry reference such as "
		                      "docker.io/library/debian:12",
		                      a->pos[0]);
	if (!hutch_image_name_is_valid(name))
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "invalid image name '%s'", name);
	if ((r = hutch_cli_open_store(a, &s)))
		return r;
	hutch_cli_progress_init(&prog, a->quiet);
	hutch_cli_progress_attach(&prog, &st);
	r = hutch_image_pull(s, a->pos[0], name, &st, &err);
	hutch_cli_progress_done(&prog);
	if (r < 0) /* nothing imported: a store made for it is not left behind */
		(void)hutch_image_store_unmake(s);
	if (r < 0 && hutch_err_class(&err) == HUTCH_ERRC_NOT_CAPABLE)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "%s", err.msg);
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "pull '%s': %s",
		                      a->pos[0], err.msg);
	if (!a->quiet)
		printf("%s: %zu layers (%zu cached), %.1f MB unpacked\n", name, st.layers,
		       st.cached, (double)st.bytes / 1e6);
	return 0;
}

static int cmd_build_default(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_image_import_stats st = { 0 };
	struct hutch_cli_progress prog;
	struct hutch_err err = { 0 };
	const char *name = a->npos ? a->pos[0] : HUTCH_IMAGE_DEFAULT_NAME;
	int r;

	if (!hutch_image_name_is_valid(name))
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "invalid image name '%s'", name);
	if ((r = hutch_cli_open_store(a, &s)))
		return r;
	hutch_cli_progress_init(&prog, a->quiet);
	hutch_cli_progress_attach(&prog, &st);
	r = hutch_image_build_default(s, name, a->recipe, &st, &err);
	hutch_cli_progress_done(&prog);
	if (r < 0) /* nothing imported: a store made for it is not left behind */
		(void)hutch_image_store_unmake(s);
	if (r < 0 && hutch_err_class(&err) == HUTCH_ERRC_NOT_CAPABLE)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "%s", err.msg);
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "build-default: %s",
		                      err.msg);
	if (!a->quiet)
		printf("%s: %zu layers, %.1f MB unpacked\n", name, st.layers,
		       (double)st.bytes / 1e6);
	return 0;
}

static void print_table(const cJSON *arr)
{
	const cJSON *img;

	printf("%-40s %-19s %6s %s\n", "NAME", "CONFIG", "LAYERS", "IMPORTED");
	cJSON_ArrayForEach(img, arr) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(img, "name");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(img, "config");
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(img, "imported");
		time_t when = cJSON_IsNumber(t) ? (time_t)t->valuedouble : 0;
		char ts[32] = "";
		struct tm tm;

		if (gmtime_r(&when, &tm))
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%-40s %-19.19s %6d %s\n", cJSON_IsString(n) ? n->valuestring : "?",
		       cJSON_IsString(c) ? c->valuestring : "?",
		       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(img, "layers")), ts);
	}
}

static int cmd_ls(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *arr = NULL;
	struct hutch_err err = { 0 };
	int r;

	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (!s && !(arr = cJSON_CreateArray()))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (s && hutch_image_list(s, &arr, &err) < 0)
		return fail(&err);
	if (a->json) {
		_cleanup_free_ char *t = cJSON_Print(arr);
		puts(t ? t : "[]");
	} else {
		print_table(arr);
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
		                      "image inspect needs one NAME; see 'hutch image ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (!s)
		return hutch_cli_store_absent("image", a->pos[0], a->store);
	if (hutch_image_inspect(s, a->pos[0], &j, &err) < 0)
		return fail(&err);
	t = cJSON_Print(j);
	puts(t ? t : "{}");
	return 0;
}

static int cmd_rm(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_err err = { 0 };
	int r, rc = 0;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "image rm needs a NAME; see 'hutch image ls'");
	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	for (size_t i = 0; i < a->npos; i++)
		if (!s)
			rc = hutch_cli_store_absent("image", a->pos[i], a->store);
		else if (hutch_image_remove(s, a->pos[i], &err) < 0)
			rc = fail(&err);
	return rc;
}

static int cmd_prune(struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_err err = { 0 };
	size_t n = 0;
	int r;

	if ((r = hutch_cli_image_store_find(a->store, &s)))
		return r;
	if (s && hutch_image_prune(s, &n, &err) < 0)
		return fail(&err);
	if (!a->quiet)
		printf("removed %zu unused layers\n", n);
	return 0;
}

/* Without --image: the default image once 'hutch image build-default'
 * made it (in root's store, or the user's own), else the host root. One
 * access(): no store is made or opened. */
static void pick_default(struct hutch_config *cfg, const char *store)
{
	char file[HUTCH_IMAGE_STORE_MAX + 64];

	snprintf(file, sizeof(file), "%s/images/%s", store ? store : "", HUTCH_IMAGE_DEFAULT_NAME);
	snprintf(cfg->image, sizeof(cfg->image), "%s",
	         store && access(file, F_OK) == 0 ? HUTCH_IMAGE_DEFAULT_NAME : HUTCH_IMAGE_HOST);
}

/* --image PATH: the store's name for it, "local" + its real path (each
 * file imported once; 'hutch image import' imports it again). */
static int path_name(const char *image, char *name, size_t len)
{
	_cleanup_free_ char *real = realpath(hutch_image_source_path(image), NULL);

	if (!real)
		return hutch_cli_fail(errno == ENOENT ? HUTCH_EXIT_NOT_FOUND : HUTCH_EXIT_FAILURE,
		                      "--image %s: %s", image, strerror(errno));
	if ((size_t)snprintf(name, len, "local%s", real) >= len || !hutch_image_name_is_valid(name))
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "--image %s: its path cannot name an image of the store "
		        "(letters, digits and ._:/@+- only, at most %d bytes): import "
		        "it under a name with 'hutch image import %s NAME', then "
		        "--image NAME",
		        image, HUTCH_IMAGE_NAME_MAX, hutch_image_source_path(image));
	return 0;
}

/* A reference that names its registry ("docker.io/library/python:3.12",
 * "localhost:5000/x"): the first component has a '.' or a ':' or is
 * localhost. A short name ("python:3.12") is never pulled by create, as
 * podman's short-name rule: which registry it means is a guess. */
static bool names_registry(const char *ref)
{
	size_t first = strcspn(ref, "/");

	return ref[first] == '/' && (memchr(ref, '.', first) || memchr(ref, ':', first) ||
	                             (first == 9 && !strncmp(ref, "localhost", 9)));
}

/* An image not yet in the store: a file is imported, a whole registry
 * reference pulled, the default image built, each with its progress on
 * stderr, as 'docker run' pulls what it lacks. -ENOENT for anything else. */
static bool fetchable(const char *image, const char *name)
{
	return hutch_image_source_path(image) || !strcmp(name, HUTCH_IMAGE_DEFAULT_NAME) ||
	       (hutch_image_ref_is_valid(name) && names_registry(name));
}

static int fetch_missing(struct hutch_image_store *s, const char *image, const char *name,
                         bool quiet)
{
	struct hutch_image_import_stats st = { 0 };
	struct hutch_cli_progress prog;
	struct hutch_err err = { 0 };
	int r;

	if (!fetchable(image, name))
		return -ENOENT;
	hutch_cli_progress_init(&prog, quiet);
	hutch_cli_progress_attach(&prog, &st);
	if (hutch_image_source_path(image)) {
		if (!quiet)
			fprintf(stderr, "hutch: importing %s as %s\n", image, name);
		r = hutch_image_import(s, hutch_image_source_path(image), NULL, name, &st, &err);
	} else if (!strcmp(name, HUTCH_IMAGE_DEFAULT_NAME)) {
		if (!quiet)
			fprintf(stderr, "hutch: building the default image (once; 'hutch image "
			                "build-default')\n");
		r = hutch_image_build_default(s, name, NULL, &st, &err);
	} else {
		if (!quiet)
			fprintf(stderr,
			        "hutch: pulling %s (once; 'hutch image pull' pulls it again)\n",
			        name);
		r = hutch_image_pull(s, name, name, &st, &err);
	}
	hutch_cli_progress_done(&prog);
	/* The class says it (docs/errors.md): a bad image or reference is
	 * usage, a missing pull or build tool not capable. Nothing imported:
	 * a store made for it is not left behind. */
	if (r < 0)
		(void)hutch_image_store_unmake(s);
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "--image %s: %s",
		                      image, err.msg);
	return 0;
}

/*
 * --snapshot of a full snapshot: a plain sandbox (the dump's kind) made
 * cold, its processes restored from the dump by its supervisor
 * (supervisor/fullrestore.c). What the dump refused is refused here too,
 * before anything is made; change lists are off, as the source's were.
 */
const char *hutch_cli_full_restore_drop(const struct hutch_config *cfg)
{
	return cfg->net.mode != HUTCH_NET_NONE   ? "a network but none"
	       : cfg->volumes && cfg->volumes->n ? "volumes (-v)"
	       : cfg->header_bindings            ? "header bindings"
	       : cfg->disk_from[0]               ? "a fork's disk"
	                                         : NULL;
}

static int full_restore(struct hutch_config *cfg, const char *name)
{
	const char *what = hutch_cli_full_restore_drop(cfg);

	if (geteuid() != 0)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE,
		                      "--snapshot %s: a full snapshot's restore needs root (CRIU "
		                      "restores the process tree as the host's root)",
		                      name);
	if (what)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--snapshot %s: a full snapshot restores a plain sandbox of "
		                      "network none, as its source was: drop %s",
		                      name, what);
	snprintf(cfg->full_snapshot, sizeof(cfg->full_snapshot), "%s", name);
	snprintf(cfg->image, sizeof(cfg->image), "%s", HUTCH_IMAGE_HOST);
	cfg->image_manifest[0] = '\0';
	cfg->image_snapshot = false;
	cfg->change_lists = false;
	cfg->no_pool = true;
	return 0;
}

int hutch_cli_resolve_image(struct hutch_config *cfg, bool quiet)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	char name[HUTCH_IMAGE_NAME_MAX + 1], buf[HUTCH_IMAGE_STORE_MAX + 1];
	struct hutch_idmap m;
	const char *path =
	        cfg->image_store[0] ? cfg->image_store : hutch_image_store_path(buf, sizeof(buf));
	struct hutch_err err = { 0 };
	int r;

	if (!cfg->image[0])
		pick_default(cfg, path);
	if (!hutch_config_has_image(cfg))
		return 0;
	/* An ordinary user who cannot run a sandbox at all hears that first,
	 * before anything is imported or pulled into a store. */
	if (geteuid() != 0 && hutch_idmap_detect(&m, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "cannot create sandbox: %s", err.msg);
	if (!path && !(path = store_path(NULL, buf, sizeof(buf))))
		return HUTCH_EXIT_NOT_CAPABLE;
	/* The supervisor opens the same store: an ordinary user's default
	 * is named (root's stays implicit, so its pool keys do not change). */
	if (geteuid() != 0 && path != cfg->image_store)
		snprintf(cfg->image_store, sizeof(cfg->image_store), "%s", path);
	snprintf(name, sizeof(name), "%s", cfg->image);
	if (hutch_image_source_path(cfg->image) && (r = path_name(cfg->image, name, sizeof(name))))
		return r;
	/* A name that would not be fetched, in a store not made yet: not
	 * found, and the store still not made (as the read-only verbs). */
	if (access(path, F_OK) < 0 && errno == ENOENT &&
	    (cfg->image_snapshot || !fetchable(cfg->image, name)))
		r = -ENOENT;
	else if (hutch_image_store_open(path, &s, &err) < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "--image %s: %s",
		                      cfg->image, err.msg);
	else
		r = hutch_image_resolve(s, name, cfg->image_manifest, &err);
	if (r == -ENOENT && s && hutch_image_full_exists(s, name) > 0)
		return full_restore(cfg, name);
	/* Not in the store: not found (65, docs/errors.md), as build's base,
	 * image inspect and a -v directory that is not there. */
	if (r == -ENOENT && cfg->image_snapshot)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
		                      "--snapshot %s: no such snapshot in the store '%s' ('hutch "
		                      "snapshot ls' lists them; 'hutch snapshot ID %s' makes it)",
		                      cfg->image, path, cfg->image);
	if (r == -ENOENT) {
		r = s ? fetch_missing(s, cfg->image, name, quiet) : -ENOENT;
		if (r == 0)
			r = hutch_image_resolve(s, name, cfg->image_manifest, &err);
		else if (r == -ENOENT)
			return hutch_cli_fail(
			        HUTCH_EXIT_NOT_FOUND,
			        "--image %s: no such image in the store '%s': run 'hutch image "
			        "pull %s' or 'hutch image import SRC %s' first ('hutch image ls' "
			        "lists the images); create pulls a whole reference by itself "
			        "(docker.io/library/NAME:TAG), never a short name",
			        cfg->image, path, cfg->image, cfg->image);
		else
			return r;
	}
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "--image %s: %s", cfg->image, err.msg);
	snprintf(cfg->image, sizeof(cfg->image), "%s", name);
	return 0;
}

const struct hutch_cli_verb hutch_verb_image_pull = {
	.name = "image pull",
	.synopsis = "REF [NAME]",
	.about = "Pull an image from a registry with skopeo (this machine's platform from a "
	         "multi-arch index) and import it as NAME (default: REF).\n"
	         "An interrupted pull, run again, downloads only the blobs it had not "
	         "finished.\n",
	.opts = fetch_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.run = cmd_pull,
};
const struct hutch_cli_verb hutch_verb_image_build_default = {
	.name = "image build-default",
	.synopsis = "[NAME] [--recipe FILE]",
	.about = "Build an image from a recipe and import it as NAME "
	         "(default " HUTCH_IMAGE_DEFAULT_NAME
	         "): the built-in\nimage/default.recipe (Debian bookworm, the cloud image's tools "
	         "where Debian or the npm\nregistry has them: Node 22, npm, pnpm, corepack, git, "
	         "gh, "
	         "rg, jq, curl, python3 with pip\nand venv, pre-commit; docs/images.md), or FILE. "
	         "mmdebstrap makes the base and runs\nthe recipe's steps in it, with the network; "
	         "its progress and each step's are shown.\nMeasured: 3-12 min on 2 shared cores, "
	         "895 MB (docs/images.md). Packages come from\nHUTCH_DEBIAN_MIRROR (a URL or an "
	         "apt sources file), else this host's Debian sources, else\ndeb.debian.org.\n",
	.opts = build_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.run = cmd_build_default,
};
const struct hutch_cli_verb hutch_verb_image_import = {
	.name = "image import",
	.synopsis = "SRC [NAME] [--tag TAG]",
	.about = "Import an OCI image layout directory or a docker-save archive into the store as "
	         "NAME (default: SRC's file name).\n",
	.opts = import_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 2,
	.run = cmd_import,
};
const struct hutch_cli_verb hutch_verb_image_ls = {
	.name = "image ls",
	.synopsis = "[--json]",
	.about = "List the images of the store.\n",
	.opts = ls_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.run = cmd_ls,
};
const struct hutch_cli_verb hutch_verb_image_inspect = {
	.name = "image inspect",
	.synopsis = "NAME",
	.about = "Print an image as JSON: config, manifest, layers, env, workdir, platform.\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.pos_complete = "@images",
	.max_pos = 1,
	.run = cmd_inspect,
};
const struct hutch_cli_verb hutch_verb_image_rm = {
	.name = "image rm",
	.synopsis = "NAME...",
	.about = "Forget images; their layers stay until 'hutch image prune'.\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.pos_complete = "@images",
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_rm,
};
const struct hutch_cli_verb hutch_verb_image_prune = {
	.name = "image prune",
	.synopsis = "",
	.about = "Remove the layers and blobs that no image names.\n",
	.opts = store_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.run = cmd_prune,
};

int hutch_cli_image(int argc, char **argv, const struct hutch_cli_verb *const *all)
{
	static const struct hutch_cli_verb *const subs[] = {
		&hutch_verb_image_pull,
		&hutch_verb_image_import,
		&hutch_verb_image_ls,
		&hutch_verb_image_inspect,
		&hutch_verb_image_rm,
		&hutch_verb_image_prune,
		&hutch_verb_image_build_default,
		NULL,
	};

	return hutch_cli_run_group("image", image_usage,
	                           "pull, import, ls, inspect, rm, prune or build-default", subs,
	                           argc, argv, all);
}
