/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --image on the supervisor's side: the image sandbox's row of the kinds
 * table (kind.h: hutch_kind_image), whose layers are opened as idmapped
 * detached mounts before clone3 (image/layers.c); and, for every kind,
 * the commands' environment (the image's Env, where there is one).
 */
#ifndef HUTCH_SANDBOX_IMAGE_H
#define HUTCH_SANDBOX_IMAGE_H

#include "error.h"

struct sup;
struct hutch_config;
struct hutch_image_use;

/* Before clone3, after the kind's prepare_root: the commands'
 * environment of a sandbox of cfg with image's Env (NULL: no image),
 * secrets and the CA bundle's variables, setup's own in *ret_owned (NULL:
 * the default environment, nothing added) until hutch_sup_env_take(). */
int hutch_sup_env_make(const struct hutch_config *cfg, const struct hutch_image_use *image,
                       char ***ret_owned, struct hutch_err *err);
/* The sandbox takes it: s->cmdenv, s->cmdenv_owned (owned, NULL: the
 * default). */
void hutch_sup_env_take(struct sup *s, char **owned);
/* At the end: back to the default environment. */
void hutch_sup_env_done(struct sup *s);

#endif
