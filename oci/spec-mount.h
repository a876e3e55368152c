/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mounts of a bundle's config.json (spec-mount.c), for the parser
 * (spec.c). Errors name the field.
 */
#ifndef HUTCH_OCI_SPEC_MOUNT_H
#define HUTCH_OCI_SPEC_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"

#define HUTCH_OCI_MAX_MOUNTS 64

enum hutch_oci_mount_kind {
	HUTCH_OCI_MOUNT_BIND,
	HUTCH_OCI_MOUNT_TMPFS,
	HUTCH_OCI_MOUNT_MQUEUE, /* a new mqueue (the container's own ipc namespace) */
	HUTCH_OCI_MOUNT_HUTCH,  /* /proc, /dev, /dev/pts, /dev/shm: hutch's own take its place */
	HUTCH_OCI_MOUNT_SYSFS,  /* a new sysfs (the container's network namespace's), read-only */
	HUTCH_OCI_MOUNT_CGROUP, /* the container's own cgroup (cgroup namespace), read-only */
};

struct hutch_oci_mount {
	enum hutch_oci_mount_kind kind;
	char *dest, *source; /* source: BIND only */
	bool recursive, readonly, noexec;
	/* A propagation option (shared, slave, private, unbindable; MS_*,
	 * 0: none given) and whether its r-form (rshared, ...) was. */
	unsigned long propagation;
	bool propagation_recursive;
	char *size, *mode; /* TMPFS: "size=" and "mode=" values as given (checked), or NULL */
};

/* mounts[] into mounts[0..*n) (absent or null: none); on failure too,
 * *n counts the entries to free (hutch_oci_mounts_done()). */
int hutch_oci_parse_mounts(const cJSON *arr, struct hutch_oci_mount mounts[HUTCH_OCI_MAX_MOUNTS],
                           size_t *n, struct hutch_err *err);
void hutch_oci_mounts_done(struct hutch_oci_mount *mounts, size_t n);
/* linux.rootfsPropagation: MS_* into *ret (0: not given); its r-form is
 * the same (it applies to the whole root either way, as runc does). */
int hutch_oci_parse_root_propagation(const cJSON *lx, unsigned long *ret, struct hutch_err *err);
/* A ".." component anywhere in path. */
bool hutch_oci_has_dotdot(const char *path);

#endif
