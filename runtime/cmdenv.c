/* SPDX-License-Identifier: Apache-2.0 */
/* The default command environment; see cmdenv.h. */
#include "cmdenv.h"

const char *const hutch_default_env[HUTCH_DEFAULT_ENV_LEN + 1] = {
	"PATH=" HUTCH_DEFAULT_PATH, "HOME=/home/appuser", "LANG=C.UTF-8", "USER=appuser", NULL,
};

#define CA_BUNDLE "/etc/hutch/ca-certificates.crt"
#define CA_ENV                                                                                    \
	"SSL_CERT_FILE=" CA_BUNDLE, "REQUESTS_CA_BUNDLE=" CA_BUNDLE, "CURL_CA_BUNDLE=" CA_BUNDLE, \
	        "GIT_SSL_CAINFO=" CA_BUNDLE, "NODE_EXTRA_CA_CERTS=/etc/hutch/sandbox-ca.crt"

const char *const hutch_ca_env[HUTCH_CA_ENV_LEN + 1] = { CA_ENV, NULL };

const char *const hutch_default_ca_env[HUTCH_DEFAULT_ENV_LEN + HUTCH_CA_ENV_LEN + 1] = {
	"PATH=" HUTCH_DEFAULT_PATH,
	"HOME=/home/appuser",
	"LANG=C.UTF-8",
	"USER=appuser",
	CA_ENV,
	NULL,
};
