/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --image in the supervisor (see sandbox-image.h). The store's path and
 * the manifest the CLI resolved come in the configuration; the layers are
 * opened here, as root, because idmapping a mount needs CAP_SYS_ADMIN over
 * the host's file system, which init never has (an ordinary user's are
 * opened as directories, which init clones in its own mount namespace).
 */
#include <errno.h>
#include <stdlib.h>

#include "cleanup.h"
#include "cmdenv.h"
#include "fdutil.h"
#include "image.h"
#include "log.h"
#include "sandbox-image.h"
#include "snapshot.h"
#include "supervisor.h"

/* The commands' environment: the default one unless an image or header
 * bindings (the CA bundle's variables) add to it. */
static int cmdenv_set(struct sup *s, const char *const *image_env, struct hutch_err *err)
{
	const char *extra[HUTCH_CA_ENV_LEN + HUTCH_SECRETS_MAX + 1];
	const struct hutch_secrets *x = s->cfg->secrets;
	size_t n = 0;

	/* The secrets first: over the image's Env (the first of a name wins). */
	for (size_t i = 0; x && i < x->n; i++)
		extra[n++] = x->env[i];
	for (size_t i = 0; s->cfg->header_bindings && i < HUTCH_CA_ENV_LEN; i++)
		extra[n++] = hutch_ca_env[i];
	extra[n] = NULL;
	if (!image_env && !n)
		return 0;
	s->cmdenv_owned = hutch_cmdenv_build(image_env, n ? extra : NULL);
	if (!s->cmdenv_owned)
		return hutch_err_set(err, -ENOMEM, "the commands' environment");
	s->cmdenv = (const char *const *)s->cmdenv_owned;
	return 0;
}

int hutch_sup_image_prepare(struct sup *s, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = s->cfg->image_store[0] ? s->cfg->image_store
	                                          : hutch_image_store_path(buf, sizeof(buf));
	int r;

	s->cmdenv = hutch_default_env;
	if (!hutch_config_has_image(s->cfg))
		return cmdenv_set(s, NULL, err);
	if (!path)
		return hutch_err_set(err, -EINVAL, "--image %s: no image store", s->cfg->image);
	s->image = calloc(1, sizeof(*s->image));
	if (!s->image)
		return hutch_err_set(err, -ENOMEM, "image");
	s->image->use_fd = s->image->users_dir = -EBADF;
	r = hutch_image_store_open(path, &store, err);
	if (r < 0)
		return r;
	/* Root idmaps the store's ids onto the sandbox's; an ordinary user's
	 * layers are the user's own files, the sandbox's root already. */
	r = hutch_image_use(store, s->cfg->image, s->cfg->image_manifest, s->id, s->uid_base,
	                    !s->idmap.rootless, s->image, err);
	if (r < 0)
		return r;
	return cmdenv_set(s, (const char *const *)s->image->config.env, err);
}

void hutch_sup_image_close_layers(struct sup *s)
{
	if (!s->image)
		return;
	hutch_close_many(s->image->layer_fds, s->image->n_layers);
}

void hutch_sup_image_done(struct sup *s)
{
	hutch_sup_snapshot_done(s);
	if (s->image) {
		hutch_image_use_release(s->image);
		free(s->image);
		s->image = NULL;
	}
	s->cmdenv = hutch_default_env;
	hutch_cmdenv_free(s->cmdenv_owned);
	s->cmdenv_owned = NULL;
}
