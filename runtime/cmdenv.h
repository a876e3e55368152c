/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every command in a sandbox starts with, whoever starts it (an API
 * request, a file built-in, a setup step or hook): the working directory
 * and the default environment, which a request's "env" is merged over.
 * One definition; docs/api.md shows it.
 */
#ifndef HUTCH_CMDENV_H
#define HUTCH_CMDENV_H

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
/* hutch_default_env followed by hutch_ca_env (setup steps and hooks). */
extern const char *const hutch_default_ca_env[HUTCH_DEFAULT_ENV_LEN + HUTCH_CA_ENV_LEN + 1];

#endif
