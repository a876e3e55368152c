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

/* Before clone3, after the kind's prepare_root: s->cmdenv (the default
 * environment, an image's Env, secrets, the CA bundle's variables). */
int hutch_sup_env_prepare(struct sup *s, struct hutch_err *err);
/* At the end: back to the default environment. */
void hutch_sup_env_done(struct sup *s);

#endif
