/* SPDX-License-Identifier: Apache-2.0 */
/* The default command environment and an image's; see cmdenv.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmdenv.h"

const char *const hutch_default_env[HUTCH_DEFAULT_ENV_LEN + 1] = {
	"PATH=" HUTCH_DEFAULT_PATH, "HOME=/home/appuser", "LANG=C.UTF-8", "USER=appuser", NULL,
};

#define CA_BUNDLE "/etc/hutch/ca-certificates.crt"

const char *const hutch_ca_env[HUTCH_CA_ENV_LEN + 1] = {
	"SSL_CERT_FILE=" CA_BUNDLE,
	"REQUESTS_CA_BUNDLE=" CA_BUNDLE,
	"CURL_CA_BUNDLE=" CA_BUNDLE,
	"GIT_SSL_CAINFO=" CA_BUNDLE,
	"NODE_EXTRA_CA_CERTS=/etc/hutch/sandbox-ca.crt",
	NULL,
};

/* The length of NAME in "NAME=VALUE", 0 if it is not one. */
static size_t name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq && eq != kv ? (size_t)(eq - kv) : 0;
}

static bool has_name(char *const *env, size_t n, const char *kv)
{
	size_t len = name_len(kv);

	for (size_t i = 0; i < n; i++)
		if (name_len(env[i]) == len && !strncmp(env[i], kv, len))
			return true;
	return false;
}

char **hutch_cmdenv_build(const char *const *image_env, const char *const *extra)
{
	size_t n = 0, cap = HUTCH_DEFAULT_ENV_LEN + 1;
	char **env;

	for (const char *const *e = image_env; e && *e; e++)
		cap++;
	for (const char *const *e = extra; e && *e; e++)
		cap++;
	if (cap > HUTCH_CMDENV_MAX + 1)
		cap = HUTCH_CMDENV_MAX + 1;
	env = calloc(cap, sizeof(char *));
	if (!env)
		return NULL;
	/* Whose the command is stays ours: HOME and USER are appuser's. */
	for (size_t i = 0; i < HUTCH_DEFAULT_ENV_LEN; i++)
		if (!strncmp(hutch_default_env[i], "HOME=", 5) ||
		    !strncmp(hutch_default_env[i], "USER=", 5))
			env[n++] = (char *)hutch_default_env[i];
	/* The CA bundle of header bindings before the image's own: the
	 * proxy's CA must be trusted whatever bundle the image names. */
	for (const char *const *e = extra; e && *e && n + 1 < cap; e++)
		if (name_len(*e) && !has_name(env, n, *e))
			env[n++] = (char *)*e;
	/* The image's own, PATH and LANG included; the first of a name wins. */
	for (const char *const *e = image_env; e && *e && n + 1 < cap; e++)
		if (name_len(*e) && !has_name(env, n, *e))
			env[n++] = (char *)*e;
	for (size_t i = 0; i < HUTCH_DEFAULT_ENV_LEN && n + 1 < cap; i++)
		if (!has_name(env, n, hutch_default_env[i]))
			env[n++] = (char *)hutch_default_env[i];
	for (size_t i = 0; i < n; i++)
		if (!(env[i] = strdup(env[i]))) {
			hutch_cmdenv_free(env);
			return NULL;
		}
	return env;
}

void hutch_cmdenv_free(char **env)
{
	for (char **e = env; e && *e; e++)
		free(*e);
	free(env);
}

size_t hutch_cmdenv_len(const char *const *env)
{
	size_t n = 0;

	while (env && env[n])
		n++;
	return n;
}

const char *hutch_cmdenv_get(const char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, len) && (*env)[len] == '=')
			return *env + len + 1;
	return NULL;
}
