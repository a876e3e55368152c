/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filesystem snapshots in the store (docs/snapshots.md): a new image that
 * is an existing image plus one layer, the sandbox's writes, on top. The
 * layer arrives as a tar stream (tarwrite.c's, written on the host from
 * the frozen sandbox's writable directories) and is unpacked like any
 * imported layer, in the store's user namespace, as hostile input: what a
 * sandbox wrote is its own business and may be anything. The base's layers
 * are named again, never copied: a snapshot costs its changes only.
 *
 * The config is the base's with the new diff_id and a history entry; the
 * reference has no manifest (as a docker archive's: the config's digest
 * names the content) and a "snapshot" object: what it came from.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"

int hutch_image_store_lock(struct hutch_image_store *s, struct hutch_err *err)
{
	return store_lock(s, err);
}

/* env over the config's Env ("config": {"Env": [...]}, made if missing):
 * an entry of the same name removed, the new one appended. */
static int set_env(cJSON *j, const char *const *env, struct hutch_err *err)
{
	cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config"), *arr, *it, *next;

	if (!env || !env[0])
		return 0;
	if (!cJSON_IsObject(cfg)) {
		cJSON_DeleteItemFromObjectCaseSensitive(j, "config");
		if (!(cfg = cJSON_AddObjectToObject(j, "config")))
			return hutch_err_set(err, -ENOMEM, "snapshot config");
	}
	arr = cJSON_GetObjectItemCaseSensitive(cfg, "Env");
	if (!cJSON_IsArray(arr)) {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, "Env");
		if (!(arr = cJSON_AddArrayToObject(cfg, "Env")))
			return hutch_err_set(err, -ENOMEM, "snapshot config");
	}
	for (size_t i = 0; env[i]; i++) {
		size_t n = strcspn(env[i], "=") + 1;

		if (i >= HUTCH_IMAGE_SNAPSHOT_ENV_MAX || !hutch_image_env_is_valid(env[i]))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "env entry %zu is not NAME=VALUE (at most %d)",
			                           i, HUTCH_IMAGE_SNAPSHOT_ENV_MAX);
		for (it = arr->child; it; it = next) {
			next = it->next;
			if (cJSON_IsString(it) && !strncmp(it->valuestring, env[i], n))
				cJSON_Delete(cJSON_DetachItemViaPointer(arr, it));
		}
		cJSON_AddItemToArray(arr, cJSON_CreateString(env[i]));
	}
	if (cJSON_GetArraySize(arr) > HUTCH_IMAGE_ENV_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "the snapshot's Env would have more than %d entries",
		                           HUTCH_IMAGE_ENV_MAX);
	return 0;
}

/* The base's config with diff_id on top and env set; its digest in
 * ret_digest. */
static int new_config(struct hutch_image_store *s, const struct hutch_image_use *base,
                      const char *diff_id, const char *const *env,
                      char ret_digest[HUTCH_IMAGE_DIGEST_LEN + 1], struct hutch_err *err)
{
	_cleanup_free_ char *buf = NULL, *text = NULL;
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_sha256 h;
	cJSON *rootfs, *ids, *hist, *ev;
	char when[32];
	time_t now = time(NULL);
	ssize_t n;

	if (!hutch_image_digest_is_valid(base->config_digest))
		return hutch_err_set(err, -EINVAL, "the base image names no config");
	n = hutch_read_file_alloc_at(s->blobs, base->config_digest + 7, 4 << 20, &buf);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n,
		                           "read the base image's config (pruned since the "
		                           "sandbox started?)");
	j = cJSON_ParseWithLength(buf, (size_t)n);
	rootfs = cJSON_GetObjectItemCaseSensitive(j, "rootfs");
	ids = cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids");
	if (!cJSON_IsArray(ids))
		return hutch_err_set(err, -EINVAL, "the base image's config has no diff_ids");
	cJSON_AddItemToArray(ids, cJSON_CreateString(diff_id));
	if (set_env(j, env, err) < 0)
		return err->code;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	cJSON_DeleteItemFromObjectCaseSensitive(j, "created");
	(void)cJSON_AddStringToObject(j, "created", when);
	hist = cJSON_GetObjectItemCaseSensitive(j, "history");
	if (!cJSON_IsArray(hist)) {
		cJSON_DeleteItemFromObjectCaseSensitive(j, "history");
		hist = NULL; /* a history must have one entry per layer: none at all */
	}
	if (hist && (ev = cJSON_CreateObject())) {
		(void)cJSON_AddStringToObject(ev, "created", when);
		(void)cJSON_AddStringToObject(ev, "created_by",
		                              env && env[0] ? "hutch build" : "hutch snapshot");
		cJSON_AddItemToArray(hist, ev);
	}
	if (!(text = cJSON_PrintUnformatted(j)))
		return hutch_err_set(err, -ENOMEM, "snapshot config");
	hutch_sha256_init(&h);
	hutch_sha256_update(&h, text, strlen(text));
	hutch_sha256_final(&h, ret_digest);
	return store_write_file(s, s->blobs, ret_digest + 7, text, strlen(text), err);
}

static int new_ref(struct hutch_image_store *s, const struct hutch_image_use *base,
                   const char *base_name, const char *name, const char *config, const char *diff_id,
                   const cJSON *meta, size_t *ret_layers, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
	cJSON *layers, *m;

	if (!j || !cJSON_AddStringToObject(j, "name", name) ||
	    !cJSON_AddNullToObject(j, "manifest") ||
	    !cJSON_AddStringToObject(j, "config", config) ||
	    !(layers = cJSON_AddArrayToObject(j, "layers")) ||
	    !cJSON_AddNumberToObject(j, "imported", (double)time(NULL)))
		return hutch_err_set(err, -ENOMEM, "snapshot reference");
	if (base->config.n_diff_ids + 1 > HUTCH_IMAGE_LAYERS_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "a snapshot of '%s' would have more than %d layers",
		                           base_name, HUTCH_IMAGE_LAYERS_MAX);
	for (size_t i = 0; i < base->config.n_diff_ids; i++)
		cJSON_AddItemToArray(layers, cJSON_CreateString(base->config.diff_ids[i]));
	cJSON_AddItemToArray(layers, cJSON_CreateString(diff_id));
	m = meta ? cJSON_Duplicate(meta, true) : cJSON_CreateObject();
	if (!m)
		return hutch_err_set(err, -ENOMEM, "snapshot reference");
	cJSON_DeleteItemFromObjectCaseSensitive(m, "base");
	(void)cJSON_AddStringToObject(m, "base", base_name);
	cJSON_AddItemToObject(j, "snapshot", m);
	*ret_layers = (size_t)cJSON_GetArraySize(layers);
	return store_write_ref(s, name, j, err);
}

/* The layer of tar_fd into layers/<hex of its diff_id>. */
static int commit_layer(struct hutch_image_store *s, int tar_fd, hutch_image_digest_fn digest,
                        void *digest_ud, struct hutch_image_commit_result *ret,
                        struct hutch_err *err)
{
	struct hutch_unpack_result res = { 0 };
	struct hutch_unpack_limits lim;
	_cleanup_close_ int dir = -EBADF, owners = -EBADF;
	char tmp[64];
	int r;

	hutch_unpack_limits_default(&lim);
	dir = store_make_tmp(s, "snapshot", tmp, err);
	if (dir < 0)
		return dir;
	/* an ordinary user's store: the owners the files cannot have kept */
	r = owners = store_owners_begin(s, tmp, err);
	lim.keep_owners = owners >= 0;
	lim.owners_fd = owners;
	lim.digest_given = digest != NULL;
	if (r >= 0 || r == -EBADF)
		r = store_unpack(tar_fd, dir, &lim, &res, err);
	if (r >= 0 && digest && (r = digest(digest_ud, res.diff_id, err)) >= 0 &&
	    !hutch_image_digest_is_valid(res.diff_id))
		r = hutch_err_set(err, -EPROTO, "the layer's writer gave no valid digest");
	if (r >= 0) {
		memcpy(ret->diff_id, res.diff_id, sizeof(ret->diff_id));
		ret->bytes = res.bytes;
		ret->cached = faccessat(s->layers, res.diff_id + 7, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		if (!ret->cached)
			r = store_owners_end(s, tmp, &owners, res.diff_id, err);
		if (r >= 0 && !ret->cached && renameat(s->tmp, tmp, s->layers, res.diff_id + 7) < 0)
			r = hutch_err_set_errno(err, -errno, "store layer %s", res.diff_id);
	}
	(void)store_owners_end(s, tmp, &owners, NULL, err);
	if (r < 0 || ret->cached)
		(void)hutch_rm_rf_at(s->tmp, tmp);
	return r < 0 ? hutch_err_prefix(err, "snapshot layer") : 0;
}

int hutch_image_commit(struct hutch_image_store *s, const struct hutch_image_use *base,
                       const char *base_name, const char *name, int tar_fd,
                       hutch_image_digest_fn digest, void *digest_ud, const cJSON *meta,
                       const char *const *env, struct hutch_image_commit_result *ret,
                       struct hutch_err *err)
{
	struct hutch_image_commit_result res = { 0 };
	char config[HUTCH_IMAGE_DIGEST_LEN + 1];
	int r;

	if ((r = store_lock(s, err)) < 0 || (r = hutch_image_name_free(s, name, err)) < 0)
		return r;
	r = commit_layer(s, tar_fd, digest, digest_ud, &res, err);
	if (r >= 0)
		r = new_config(s, base, res.diff_id, env, config, err);
	if (r >= 0)
		r = new_ref(s, base, base_name, name, config, res.diff_id, meta, &res.layers, err);
	if (r < 0)
		return r;
	*ret = res;
	return 0;
}

int hutch_image_snapshot_remove(struct hutch_image_store *s, const char *name,
                                struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *ref = NULL;
	int r;

	if ((r = store_lock(s, err)) < 0 || (r = store_read_ref(s, name, &ref, err)) < 0)
		return r == -ENOENT ? hutch_err_set_class(err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		                                          "no snapshot '%s' in the store", name)
		                    : r;
	if (!hutch_image_is_snapshot(ref))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'%s' is an image, not a snapshot: 'hutch image rm %s'",
		                           name, name);
	return hutch_image_remove(s, name, err); /* refused while in use */
}
