/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What store.c and import.c share: the open store (its directory fds and
 * lock) and the reference files.
 */
#ifndef HUTCH_STORE_INTERNAL_H
#define HUTCH_STORE_INTERNAL_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "image-internal.h"
#include "image.h"

struct hutch_image_store {
	char *path;
	int dirfd;                      /* the store's root */
	int layers, images, tmp, blobs; /* its directories (blobs: blobs/sha256) */
	int lock;                       /* flock()ed "lock" once store_lock() ran, or -1 */
	bool made;                      /* this open made the store's directory */
};

/* Take the writers' lock (kept until the store is freed), clear tmp/. */
int store_lock(struct hutch_image_store *s, struct hutch_err *err);
/* A reference name as its file name in images/. */
void store_ref_file(const char *name, char out[HUTCH_IMAGE_NAME_MAX + 1]);
/* The reference file of name, parsed (an object). -ENOENT if unknown. */
int store_read_ref(struct hutch_image_store *s, const char *name, cJSON **ret,
                   struct hutch_err *err);

/* Write text as dirfd/name: into tmp/ first, then renamed into place, so
 * that an interrupted write leaves only a file of tmp/ (the next writer's
 * to remove). The lock must be held. */
int store_write_file(struct hutch_image_store *s, int dirfd, const char *name, const void *buf,
                     size_t len, struct hutch_err *err);
/* Write images/<name> from j, whole, renamed into place. */
int store_write_ref(struct hutch_image_store *s, const char *name, const cJSON *j,
                    struct hutch_err *err);
/*
 * If an image of the store has the manifest digest and all its layers,
 * name it name too and return its number of layers (> 0); 0 if none has.
 */
int store_ref_copy_by_manifest(struct hutch_image_store *s, const char *manifest, const char *name,
                               struct hutch_err *err);

/* The store's users/ directory (created if needed): one use record per
 * sandbox (layers.c). */
int store_open_users(struct hutch_image_store *s, struct hutch_err *err);
/* The store's full/ directory (created if needed, 0700): full snapshots
 * (fullstore.c). */
int store_open_full(struct hutch_image_store *s, struct hutch_err *err);

/* The store's owners/ directory (created if needed): an ordinary user's
 * layers' owners indexes (owners.c). */
int store_open_owners(struct hutch_image_store *s, struct hutch_err *err);
/* owners.c: in an ordinary user's store, the owners index of the layer
 * being unpacked into tmp/<tmp> is begun in tmp/ (its fd, for the
 * unpacker's owners_fd; -EBADF in root's store, which has owners of its
 * own); end closes it and, given the layer's diff_id and a non-empty
 * index, renames it to owners/<hex> (before the layer goes into
 * layers/), else removes it. */
int store_owners_begin(struct hutch_image_store *s, const char *tmp, struct hutch_err *err);
int store_owners_end(struct hutch_image_store *s, const char *tmp, int *fd, const char *diff_id,
                     struct hutch_err *err);
/* The owners indexes of config's layers, one after the other (NUL-ended
 * paths, bottom layer first) in *ret (malloc()ed, NULL if none). */
int store_owners_read(struct hutch_image_store *s, const struct hutch_image_config *config,
                      char **ret, size_t *ret_len, struct hutch_err *err);

/* A new directory in tmp/, open; its name in name (what: its prefix). */
int store_make_tmp(struct hutch_image_store *s, const char *what, char name[64],
                   struct hutch_err *err);
/* hutch_image_unpack() of fd into dirfd, as root in a user namespace owning
 * only the store's ids (import.c); lim->progress, if set, hears of the
 * blob's bytes read. */
int store_unpack(int fd, int dirfd, struct hutch_unpack_limits *lim,
                 struct hutch_unpack_result *ret, struct hutch_err *err);

#endif
