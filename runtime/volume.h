/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Volumes (-v, --volume, the API's "volumes"): SRC:PATH[:ro|rw], where
 * SRC is an absolute host directory or the name of a named volume of the
 * store (hutch volume), and PATH the absolute directory inside the
 * sandbox it is mounted on; read-only unless ":rw". The spec is parsed and
 * checked here (pure: no syscalls; unit-tested); the option type is
 * volopt.c, the mounts supervisor/volumes.c and rootfs/volumes.c.
 */
#ifndef HUTCH_VOLUME_H
#define HUTCH_VOLUME_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "volstore.h" /* the names of named volumes */

#define HUTCH_VOLUMES_MAX     16  /* per sandbox */
#define HUTCH_VOLUME_PATH_MAX 512 /* bytes of SRC and of PATH, with the NUL */
#define HUTCH_VOLUME_SPEC_MAX (2 * HUTCH_VOLUME_PATH_MAX + 8)

/* The option's --help text (options.c). */
#define HUTCH_VOLUME_HELP                                                                     \
	"mount SRC on PATH inside, read-only unless :rw: SRC:PATH[:ro|rw], SRC an absolute "  \
	"host directory (its owner's files are appuser's inside) or a named volume (made on " \
	"first use; hutch volume ls); PATH absolute, not /, /proc, /sys or /dev (repeatable)"

struct hutch_volume {
	char src[HUTCH_VOLUME_PATH_MAX]; /* "/host/dir" (no "." or ".." parts) or a name */
	char dst[HUTCH_VOLUME_PATH_MAX]; /* absolute, no "//", "." or "..", no trailing "/" */
	bool named;                      /* src is a named volume */
	bool rw;
};

struct hutch_volumes {
	size_t n;
	struct hutch_volume v[HUTCH_VOLUMES_MAX];
};

/* Parse one spec; err names the problem and the fix, and the option as the
 * caller knows it (name: "volumes" in the API, "--volume" in the CLI). */
int hutch_volume_parse_as(const char *name, const char *s, struct hutch_volume *ret,
                          struct hutch_err *err);
/* Add v to the set, refusing a PATH given twice or one inside another's. */
int hutch_volumes_add(const char *name, struct hutch_volumes *set, const struct hutch_volume *v,
                      struct hutch_err *err);
/*
 * docker's --mount as a spec: "type=bind|volume,source=SRC,target=PATH
 * [,readonly[=true|false]]" (src, destination, dst and ro are its other
 * names) into spec ("SRC:PATH:ro|rw"). Read-only unless readonly=false,
 * as -v (docker's default is read-write). Other types and keys are
 * refused naming them. The spec is then parsed as -v's.
 */
int hutch_volume_from_mount(const char *s, char *spec, size_t size, struct hutch_err *err);
/* "SRC:PATH:ro" or ":rw", as the spec is shown. */
void hutch_volume_text(const struct hutch_volume *v, char *buf, size_t size);

#endif
