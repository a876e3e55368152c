/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named volumes (hutch volume, -v NAME:PATH): directories of the image
 * store (image.h), <store>/volumes/NAME/data, that outlive sandboxes. A
 * sandbox using one holds NAME/ flock()ed shared for its life; rm takes it
 * exclusive without waiting, so a volume in use is never removed. NAME/
 * itself is never mounted: nothing inside can take that lock.
 */
#ifndef HUTCH_IMAGE_VOLSTORE_H
#define HUTCH_IMAGE_VOLSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "image.h"

#define HUTCH_VOLUME_NAME_MAX 64 /* bytes, without the NUL */

/* [A-Za-z0-9][A-Za-z0-9_.-]*, at most HUTCH_VOLUME_NAME_MAX bytes. Pure. */
bool hutch_volume_name_is_valid(const char *name);

/* Create volume name; 1 if made, 0 if it was there. */
int hutch_volume_create(struct hutch_image_store *s, const char *name, struct hutch_err *err);
/* For a sandbox: create it if missing, hold it (*ret_lock, flock()ed
 * shared; closing it ends the use) and return an O_PATH fd of its data
 * directory. */
int hutch_volume_use(struct hutch_image_store *s, const char *name, int *ret_lock,
                     struct hutch_err *err);
/* Remove it with its files; -EBUSY (err: hutch rm the sandbox first) while
 * a sandbox uses it, -ENOENT if there is none. */
int hutch_volume_rm(struct hutch_image_store *s, const char *name, struct hutch_err *err);

struct hutch_volume_info {
	char name[HUTCH_VOLUME_NAME_MAX + 1];
	char path[4096]; /* its data directory on the host */
	int64_t created; /* seconds since the epoch */
	bool in_use;     /* a sandbox holds it */
};
/* One volume; -ENOENT if there is none. */
int hutch_volume_inspect(struct hutch_image_store *s, const char *name,
                         struct hutch_volume_info *ret, struct hutch_err *err);
/* The names, sorted, into a new array of *ret_n strings (caller frees each
 * and the array). */
int hutch_volume_list(struct hutch_image_store *s, char ***ret, size_t *ret_n,
                      struct hutch_err *err);

#endif
