/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every command in a sandbox starts with, whoever starts it (an API
 * request, a file built-in, a setup step or hook): the working directory
 * and the default environment, which a request's "env" is merged over.
 * One definition; docs/api.md shows it.
 */
#ifndef HUTCH_CMDENV_H
#define HUTCH_CMDENV_H

#include <stdbool.h>
#include <stddef.h>

#define HUTCH_WORKSPACE    "/workspace"
#define HUTCH_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* "K=V" strings, NULL-terminated; HUTCH_DEFAULT_ENV_LEN of them. */
#define HUTCH_DEFAULT_ENV_LEN 4
extern const char *const hutch_default_env[HUTCH_DEFAULT_ENV_LEN + 1];
/* With header bindings, also (under a request's own "env"): the CA bundle
 * that trusts the sandbox's CA, for the clients that read a variable. */
#define HUTCH_CA_ENV_LEN 5
extern const char *const hutch_ca_env[HUTCH_CA_ENV_LEN + 1];

/* At most this many entries in a sandbox's environment (an image's Env
 * included), so that a request's own still fit HUTCH_SPAWN_MAX_ENV. */
#define HUTCH_CMDENV_MAX 256

/*
 * The environment of a sandbox made from an image or with header
 * bindings: HOME and USER are appuser's, then extra (hutch_ca_env with
 * header bindings, or NULL), then the image's Env (its PATH, LANG and the
 * rest; the first of a name wins), then the defaults for what is not set.
 * Bounded by HUTCH_CMDENV_MAX. NULL-terminated, malloc'ed (free with
 * hutch_cmdenv_free()); NULL when out of memory. Pure.
 */
char **hutch_cmdenv_build(const char *const *image_env, const char *const *extra);
void hutch_cmdenv_free(char **env);
size_t hutch_cmdenv_len(const char *const *env);
/* The value of name in env, or NULL. */
const char *hutch_cmdenv_get(const char *const *env, const char *name);

#endif
