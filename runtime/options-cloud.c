/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option types of the cloud sandbox's (MistralSandbox's) options that
 * say what a session may do and reach beyond the network mode: access
 * ("all", "files": files only, no commands; "none": neither), enforced by
 * the supervisor on every request (supervisor/api/api.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "options-field.h"

const char *const hutch_access_values[] = { "all", "files", "none", NULL };

static int access_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	for (size_t i = 0; hutch_access_values[i]; i++)
		if (!strcmp(s, hutch_access_values[i])) {
			hutch_opt_chars_set(o, c, s);
			return 0;
		}
	return hutch_err_set(err, -EINVAL,
	                     "invalid access '%.32s': all (commands and files), files (files "
	                     "only, no commands) or none (neither)",
	                     s);
}

const struct hutch_option_type hutch_opt_access = {
	.init = hutch_opt_chars_init,
	.parse = access_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};
