/* SPDX-License-Identifier: Apache-2.0 */
/* The default command environment; see cmdenv.h. */
#include "cmdenv.h"

const char *const hutch_default_env[HUTCH_DEFAULT_ENV_LEN + 1] = {
	"PATH=" HUTCH_DEFAULT_PATH, "HOME=/home/appuser", "LANG=C.UTF-8", "USER=appuser", NULL,
};
