/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An image recipe (recipe.c; the default image's is image/default.recipe,
 * built into the binary): base SUITE, packages P..., run COMMAND, env
 * NAME=VALUE, one per line, # comments, a line ending in \ goes on.
 */
#ifndef HUTCH_RECIPE_H
#define HUTCH_RECIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define HUTCH_RECIPE_MAX (64u << 10) /* bytes */

struct hutch_recipe {
	char suite[64]; /* base */
	char *packages; /* "a,b,c": mmdebstrap's --include */
	char **runs;    /* each step's text, NULL-terminated */
	size_t nruns;
	char **env; /* "NAME=VALUE" in order (a later one of a name wins) */
	size_t nenv;
};

/* Parse text (len bytes); 0, or -EINVAL (err names the line), -EFBIG,
 * -ENOMEM. r is filled only on success; hutch_recipe_done() frees it. */
int hutch_recipe_parse(const char *text, size_t len, struct hutch_recipe *r, struct hutch_err *err);
void hutch_recipe_done(struct hutch_recipe *r);
/* The shell script that runs r's steps in order, each in a subshell under
 * set -eu, announcing each ("hutch: recipe step 2/4: ...") and stopping at
 * the first that fails. malloc'ed; NULL when out of memory. */
char *hutch_recipe_script(const struct hutch_recipe *r);

/* The default image's recipe, image/default.recipe, as built in. */
extern const char hutch_image_default_recipe[];

#endif
