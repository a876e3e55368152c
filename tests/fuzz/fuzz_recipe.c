/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the image recipe parser (image/recipe.c,
 * scripts/fuzz): a recipe may be a user's file. Any input is accepted or
 * refused with a message, never read past its end; an accepted one has a
 * base and packages, and its script is made.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"

/* The built-in recipe is linked into hutch_image; here it is not used. */
const char hutch_image_default_recipe[] = "";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_recipe r;
	struct hutch_err err = { 0 };
	char *copy = malloc(size ? size : 1), *script;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (hutch_recipe_parse(copy, size, &r, &err) == 0) {
		if (!r.suite[0] || !r.packages)
			abort();
		script = hutch_recipe_script(&r);
		if (!script)
			abort();
		free(script);
		hutch_recipe_done(&r);
	} else if (err.code == 0 || !err.msg[0]) {
		abort();
	}
	free(copy);
	return 0;
}
