/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch build's file (docs/snapshots.md "The builder"): JSON with the
 * base image, the snapshot's name, a working directory, env, files,
 * copies from the host and commands. Parsed by buildspec.c, pure and
 * fuzzed (tests/fuzz/fuzz_buildspec.c): a build file may come from a
 * repository its user did not write.
 */
#ifndef HUTCH_BUILDSPEC_H
#define HUTCH_BUILDSPEC_H

#include <stddef.h>

#include "error.h"

#define HUTCH_BUILDSPEC_MAX       (16u << 20) /* bytes of the file */
#define HUTCH_BUILDSPEC_STEPS_MAX 1000        /* entries of files, copy, run each */
#define HUTCH_BUILDSPEC_PATH_MAX  4095        /* bytes of a path */

struct hutch_build_file {
	char *path; /* in the sandbox */
	char *content;
};
struct hutch_build_copy {
	char *src; /* on the host, as written (relative: to the file's directory) */
	char *dst; /* in the sandbox */
};
struct hutch_build_cmd {
	char *command;  /* sh -c */
	char *cwd;      /* or NULL: the workdir */
	double timeout; /* seconds, 0: none */
};

struct hutch_buildspec {
	char *name, *image, *workdir; /* each NULL when not given */
	char **env;                   /* "NAME=VALUE", NULL-terminated (never NULL) */
	size_t nenv;
	struct hutch_build_file *files;
	size_t nfiles;
	struct hutch_build_copy *copies;
	size_t ncopies;
	struct hutch_build_cmd *runs;
	size_t nruns;
};

/* Parse text (len bytes, not NUL-terminated): 0, or -EINVAL (class usage,
 * err names the key and what it must be), -EFBIG (more than
 * HUTCH_BUILDSPEC_MAX), -ENOMEM. b is filled only on success;
 * hutch_buildspec_done() frees it. */
int hutch_buildspec_parse(const char *text, size_t len, struct hutch_buildspec *b,
                          struct hutch_err *err);
void hutch_buildspec_done(struct hutch_buildspec *b);

#endif
