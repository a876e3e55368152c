/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI image format's JSON documents, parsed as hostile input: an image
 * index (index.json or a manifest list: which manifest for this platform),
 * an image manifest (the config blob and the layers, in order), an image
 * config (diff_ids, Env, WorkingDir) and a docker-save manifest.json. Pure:
 * no I/O, bounded sizes, every digest checked for form before it names a
 * file. Fuzzed by tests/fuzz/fuzz_oci.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "image-internal.h"

bool hutch_image_digest_is_valid(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != HUTCH_IMAGE_DIGEST_LEN)
		return false;
	for (const char *p = d + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int parse(const char *buf, size_t len, const char *what, cJSON **ret, struct hutch_err *err)
{
	const char *end = NULL;
	cJSON *j;

	if (len > HUTCH_IMAGE_JSON_MAX)
		return hutch_err_set(err, -EFBIG, "%s is larger than %d bytes", what,
		                     HUTCH_IMAGE_JSON_MAX);
	j = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!j)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "%s is not JSON (at byte %zu)", what,
		                           end ? (size_t)(end - buf) : (size_t)0);
	*ret = j;
	return 0;
}

static const char *str_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int copy_digest(const cJSON *o, const char *what, char out[HUTCH_IMAGE_DIGEST_LEN + 1],
                       struct hutch_err *err)
{
	const char *d = str_field(o, "digest");

	if (!hutch_image_digest_is_valid(d))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "%s has no valid sha256 digest", what);
	memcpy(out, d, HUTCH_IMAGE_DIGEST_LEN + 1);
	return 0;
}

static bool is_index_type(const char *mt)
{
	return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
	              !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

/*
 * A manifest of the index for tag (its org.opencontainers.image.ref.name)
 * or, without a tag, for (os, arch); one without a platform counts as a
 * match only when it is the index's single entry.
 */
static bool entry_matches(const cJSON *m, const char *tag, const char *os, const char *arch, int n)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "platform");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(m, "annotations");
	const char *pos, *parch, *ref;

	if (tag) {
		ref = cJSON_IsObject(ann) ? str_field(ann, "org.opencontainers.image.ref.name")
		                          : NULL;
		return ref && !strcmp(ref, tag);
	}
	if (!cJSON_IsObject(p))
		return n == 1;
	pos = str_field(p, "os");
	parch = str_field(p, "architecture");
	return pos && parch && !strcmp(pos, os) && !strcmp(parch, arch);
}

int hutch_image_parse_index(const char *buf, size_t len, const char *tag, const char *os,
                            const char *arch, char ret_digest[HUTCH_IMAGE_DIGEST_LEN + 1],
                            bool *ret_nested, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *ms, *m;
	int r, n;

	r = parse(buf, len, "image index", &j, err);
	if (r < 0)
		return r;
	ms = cJSON_GetObjectItemCaseSensitive(j, "manifests");
	if (!cJSON_IsArray(ms) || (n = cJSON_GetArraySize(ms)) == 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "image index has no manifests");
	if (n > HUTCH_IMAGE_INDEX_MAX)
		return hutch_err_set(err, -E2BIG, "image index has more than %d manifests",
		                     HUTCH_IMAGE_INDEX_MAX);
	cJSON_ArrayForEach(m, ms) {
		if (!cJSON_IsObject(m) || !entry_matches(m, tag, os, arch, n))
			continue;
		r = copy_digest(m, "image index entry", ret_digest, err);
		if (r < 0)
			return r;
		*ret_nested = is_index_type(str_field(m, "mediaType"));
		return 0;
	}
	if (tag)
		return hutch_err_set(err, -ENOENT, "image index has no manifest named '%.64s'",
		                     tag);
	return hutch_err_set(err, -ENOENT, "image index has no manifest for %s/%s", os, arch);
}

static bool layer_type_ok(const char *mt)
{
	/* Foreign (non-distributable) layers would have to be fetched from a URL. */
	return !mt ||
	       (strstr(mt, "tar") && !strstr(mt, "foreign") && !strstr(mt, "nondistributable"));
}

int hutch_image_parse_manifest(const char *buf, size_t len, struct hutch_image_manifest *ret,
                               struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_image_manifest m = { 0 };
	const cJSON *cfg, *layers, *l;
	int r;

	r = parse(buf, len, "image manifest", &j, err);
	if (r < 0)
		return r;
	if (is_index_type(str_field(j, "mediaType")) ||
	    cJSON_GetObjectItemCaseSensitive(j, "manifests"))
		return hutch_err_set(err, -EMEDIUMTYPE, "image manifest is an index");
	cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
	if (!cJSON_IsObject(cfg))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "image manifest has no config");
	r = copy_digest(cfg, "image config", m.config, err);
	if (r < 0)
		return r;
	layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
	if (!cJSON_IsArray(layers))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "image manifest has no layers");
	if (cJSON_GetArraySize(layers) > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set(err, -E2BIG, "image has more than %d layers",
		                     HUTCH_IMAGE_LAYERS_MAX);
	cJSON_ArrayForEach(l, layers) {
		if (!cJSON_IsObject(l) || !layer_type_ok(str_field(l, "mediaType")))
			return hutch_err_set(err, -EMEDIUMTYPE,
			                     "image layer %zu is not a tar layer", m.n_layers);
		r = copy_digest(l, "image layer", m.layers[m.n_layers], err);
		if (r < 0)
			return r;
		m.n_layers++;
	}
	*ret = m;
	return 0;
}

static int parse_env(const cJSON *env, struct hutch_image_config *c, struct hutch_err *err)
{
	const cJSON *e;
	size_t n = 0;

	if (!env || cJSON_IsNull(env))
		return 0;
	if (!cJSON_IsArray(env))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "image config Env is not an array");
	if (cJSON_GetArraySize(env) > HUTCH_IMAGE_ENV_MAX)
		return hutch_err_set(err, -E2BIG, "image config has more than %d Env entries",
		                     HUTCH_IMAGE_ENV_MAX);
	c->env = calloc((size_t)cJSON_GetArraySize(env) + 1, sizeof(char *));
	if (!c->env)
		return hutch_err_set(err, -ENOMEM, "image config Env");
	cJSON_ArrayForEach(e, env) {
		const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
		const char *eq = s ? strchr(s, '=') : NULL;

		/* NAME=VALUE with a name that execve() can carry. */
		if (!eq || eq == s || memchr(s, '\n', strlen(s)))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "image config Env entry %zu is not NAME=VALUE",
			                           n);
		c->env[n] = strdup(s);
		if (!c->env[n])
			return hutch_err_set(err, -ENOMEM, "image config Env");
		n++;
	}
	return 0;
}

static int parse_diff_ids(const cJSON *rootfs, struct hutch_image_config *c, struct hutch_err *err)
{
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids"), *d;
	const char *type = str_field(rootfs, "type");

	if (!type || strcmp(type, "layers") || !cJSON_IsArray(ids))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "image config has no rootfs of type layers");
	if (cJSON_GetArraySize(ids) > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set(err, -E2BIG, "image has more than %d layers",
		                     HUTCH_IMAGE_LAYERS_MAX);
	cJSON_ArrayForEach(d, ids) {
		if (!cJSON_IsString(d) || !hutch_image_digest_is_valid(d->valuestring))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "image config diff_id %zu is not sha256",
			                           c->n_diff_ids);
		memcpy(c->diff_ids[c->n_diff_ids++], d->valuestring, HUTCH_IMAGE_DIGEST_LEN + 1);
	}
	return 0;
}

int hutch_image_parse_config(const char *buf, size_t len, struct hutch_image_config *ret,
                             struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_image_config c = { 0 };
	const cJSON *conf;
	const char *wd, *os, *arch;
	int r;

	r = parse(buf, len, "image config", &j, err);
	if (r < 0)
		return r;
	os = str_field(j, "os");
	arch = str_field(j, "architecture");
	snprintf(c.os, sizeof(c.os), "%s", os ? os : "");
	snprintf(c.arch, sizeof(c.arch), "%s", arch ? arch : "");
	r = parse_diff_ids(cJSON_GetObjectItemCaseSensitive(j, "rootfs"), &c, err);
	conf = cJSON_GetObjectItemCaseSensitive(j, "config");
	if (r >= 0 && cJSON_IsObject(conf)) {
		r = parse_env(cJSON_GetObjectItemCaseSensitive(conf, "Env"), &c, err);
		wd = str_field(conf, "WorkingDir");
		if (r >= 0 && wd && *wd && !(c.workdir = strdup(wd)))
			r = hutch_err_set(err, -ENOMEM, "image config WorkingDir");
	}
	if (r < 0) {
		hutch_image_config_done(&c);
		return r;
	}
	*ret = c;
	return 0;
}

void hutch_image_config_done(struct hutch_image_config *c)
{
	for (char **e = c->env; e && *e; e++)
		free(*e);
	free(c->env);
	free(c->workdir);
	c->env = NULL;
	c->workdir = NULL;
}

/* A file name inside a docker-save archive: relative, no "..", bounded. */
static bool archive_path_ok(const char *p)
{
	size_t len = p ? strlen(p) : 0;

	if (len == 0 || len >= HUTCH_IMAGE_PATH_MAX || p[0] == '/')
		return false;
	for (const char *c = p; (c = strstr(c, "..")); c += 2)
		if ((c == p || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
			return false;
	return true;
}

int hutch_image_parse_docker_manifest(const char *buf, size_t len, struct hutch_image_docker *ret,
                                      struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_image_docker d = { 0 };
	const cJSON *first, *layers, *l;
	const char *cfg;
	int r;

	r = parse(buf, len, "docker archive manifest.json", &j, err);
	if (r < 0)
		return r;
	first = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, 0) : NULL;
	if (!cJSON_IsObject(first))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "docker archive manifest.json names no image");
	cfg = str_field(first, "Config");
	layers = cJSON_GetObjectItemCaseSensitive(first, "Layers");
	if (!archive_path_ok(cfg) || !cJSON_IsArray(layers))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "docker archive manifest.json has no Config "
		                           "and Layers");
	if (cJSON_GetArraySize(layers) > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set(err, -E2BIG, "image has more than %d layers",
		                     HUTCH_IMAGE_LAYERS_MAX);
	snprintf(d.config, sizeof(d.config), "%s", cfg);
	cJSON_ArrayForEach(l, layers) {
		if (!cJSON_IsString(l) || !archive_path_ok(l->valuestring))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "docker archive layer %zu has a bad path",
			                           d.n_layers);
		snprintf(d.layers[d.n_layers++], HUTCH_IMAGE_PATH_MAX, "%s", l->valuestring);
	}
	*ret = d;
	return 0;
}
