/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for hutch build's file parser (image/buildspec.c,
 * scripts/fuzz): a build file may come from a repository its user did not
 * write. Any input is accepted or refused with a message, never read past
 * its end; an accepted one keeps its bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buildspec.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_buildspec b;
	struct hutch_err err = { 0 };
	char *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (hutch_buildspec_parse(copy, size, &b, &err) == 0) {
		if (!b.env || b.nenv > HUTCH_IMAGE_SNAPSHOT_ENV_MAX ||
		    b.nfiles > HUTCH_BUILDSPEC_STEPS_MAX || b.ncopies > HUTCH_BUILDSPEC_STEPS_MAX ||
		    b.nruns > HUTCH_BUILDSPEC_STEPS_MAX || b.env[b.nenv])
			abort();
		for (size_t i = 0; i < b.nenv; i++)
			if (!hutch_image_env_is_valid(b.env[i]))
				abort();
		for (size_t i = 0; i < b.nruns; i++)
			if (!b.runs[i].command[0])
				abort();
		hutch_buildspec_done(&b);
	} else if (err.code == 0 || !err.msg[0]) {
		abort();
	}
	free(copy);
	return 0;
}
