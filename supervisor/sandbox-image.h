/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --image on the supervisor's side: the layers of the sandbox's image,
 * opened as idmapped detached mounts before clone3 (image/layers.c), and
 * the commands' environment with the image's Env.
 */
#ifndef HUTCH_SANDBOX_IMAGE_H
#define HUTCH_SANDBOX_IMAGE_H

#include "error.h"

struct sup;

/* Before clone3, after the uid slot: s->image and s->cmdenv (the default
 * environment for the host root). */
int hutch_sup_image_prepare(struct sup *s, struct hutch_err *err);
/* After clone3: the parent's copies of the layer fds (init holds them). */
void hutch_sup_image_close_layers(struct sup *s);
/* At the end: the use record and the environment. */
void hutch_sup_image_done(struct sup *s);

#endif
