/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --image in the supervisor (see sandbox-image.h). The store's path and
 * the manifest the CLI resolved come in the configuration; the layers are
 * opened here, as root, because idmapping a mount needs CAP_SYS_ADMIN over
 * the host's file system, which init never has (an ordinary user's are
 * opened as directories, which init clones in its own mount namespace).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "cmdenv.h"
#include "fdutil.h"
#include "image.h"
#include "init.h"
#include "kind.h"
#include "log.h"
#include "sandbox-image.h"
#include "snapshot.h"
#include "supervisor.h"
#include "volume.h"

/* The commands' environment: the default one unless an image or header
 * bindings (the CA bundle's variables) add to it. */
int hutch_sup_env_make(const struct hutch_config *cfg, const struct hutch_image_use *image,
                       char ***ret_owned, struct hutch_err *err)
{
	const char *extra[HUTCH_CA_ENV_LEN + HUTCH_SECRETS_MAX + 1];
	const char *const *image_env = image ? (const char *const *)image->config.env : NULL;
	const struct hutch_secrets *x = cfg->secrets;
	size_t n = 0;

	*ret_owned = NULL;
	/* The secrets first: over the image's Env (the first of a name wins). */
	for (size_t i = 0; x && i < x->n; i++)
		extra[n++] = x->env[i];
	for (size_t i = 0; cfg->header_bindings && i < HUTCH_CA_ENV_LEN; i++)
		extra[n++] = hutch_ca_env[i];
	extra[n] = NULL;
	if (!image_env && !n)
		return 0;
	*ret_owned = hutch_cmdenv_build(image_env, n ? extra : NULL);
	if (!*ret_owned)
		return hutch_err_set(err, -ENOMEM, "the commands' environment");
	return 0;
}

void hutch_sup_env_take(struct sup *s, char **owned)
{
	s->cmdenv_owned = owned;
	s->cmdenv = owned ? (const char *const *)owned : hutch_default_env;
}

void hutch_sup_env_done(struct sup *s)
{
	s->cmdenv = hutch_default_env;
	hutch_cmdenv_free(s->cmdenv_owned);
	s->cmdenv_owned = NULL;
}

static bool is_image(const struct hutch_config *cfg, const struct hutch_container *ct)
{
	return !ct && hutch_config_has_image(cfg);
}

/* After the uid slot: the image's layers, opened (idmapped as root). */
static int open_layers(struct hutch_kind_setup *k, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const struct hutch_config *c = k->cfg;
	const char *path =
	        c->image_store[0] ? c->image_store : hutch_image_store_path(buf, sizeof(buf));
	int r;

	if (!path)
		return hutch_err_set(err, -EINVAL, "--image %s: no image store", c->image);
	k->image = calloc(1, sizeof(*k->image));
	if (!k->image)
		return hutch_err_set(err, -ENOMEM, "image");
	k->image->use_fd = k->image->users_dir = -EBADF;
	r = hutch_image_store_open(path, &store, err);
	if (r < 0)
		return r;
	/* Root idmaps the store's ids onto the sandbox's; an ordinary user's
	 * layers are the user's own files, the sandbox's root already. */
	return hutch_image_use(store, c->image, c->image_manifest, k->id, k->uid_base, !k->rootless,
	                       k->image, err);
}

/* Child side: above init's own fds (3 to 6, the volumes' after them),
 * the layers' places after those, and room to spare. */
static int stash_fd(const struct hutch_kind_setup *k)
{
	return 7 + HUTCH_VOLUMES_MAX + (int)k->image->n_layers + 16;
}

/* Child side: the layers out of the way (first < 0), then from first on. */
static int child_fds(struct hutch_kind_setup *k, int first)
{
	struct hutch_image_use *u = k->image;

	for (size_t i = 0; i < u->n_layers; i++) {
		if (first < 0)
			u->layer_fds[i] = fcntl(u->layer_fds[i], F_DUPFD_CLOEXEC, stash_fd(k));
		else if (dup3(u->layer_fds[i], first + (int)i, O_CLOEXEC) >= 0)
			u->layer_fds[i] = first + (int)i;
		else
			return -1;
		if (u->layer_fds[i] < 0)
			return -1;
	}
	return first < 0 ? 0 : first + (int)u->n_layers;
}

/* Child side: the root is the layers (child_fds() placed them). */
static void init_params(struct hutch_kind_setup *k, struct hutch_init_params *p)
{
	static const char *names[HUTCH_IMAGE_LAYERS_MAX];
	struct hutch_image_use *u = k->image;

	if (!u->n_layers)
		return;
	for (size_t i = 0; i < u->n_layers; i++)
		names[i] = u->config.diff_ids[i] + 7; /* past "sha256:" */
	p->rootfs.layer_fds = u->layer_fds;
	p->rootfs.n_layers = u->n_layers;
	p->rootfs.layer_dir = u->layer_dir;
	p->rootfs.layer_names = names;
	p->rootfs.owners = u->owners;
	p->rootfs.owners_len = u->owners_len;
	p->rootfs.image = k->cfg->image;
	p->rootfs.path = hutch_cmdenv_get(k->cmdenv, "PATH");
	p->rootfs.writable_in_layer = u->snapshot;
}

/* After clone3: the parent's copies of the layer fds (init holds them). */
static void close_layers(struct hutch_kind_setup *k)
{
	hutch_close_many(k->image->layer_fds, k->image->n_layers);
}

static void reap(struct hutch_kind_setup *k)
{
	hutch_image_use_reap(k->image); /* long dead by now */
}

static void status(const struct hutch_kind_setup *k, struct hutch_jw *w)
{
	if (k->image && k->image->use_path)
		hutch_jw_str(w, "image_use", k->image->use_path);
}

/* Nothing of the sandbox runs any more: its use of the layers is over
 * (its mounts go in the second phase, in a mount namespace no process
 * is left in: a prune that takes a layer meanwhile frees it after them). */
static void ended(struct sup *s)
{
	if (s->image)
		hutch_image_use_let_go(s->image);
}

/* At the end: the rest. */
static void done(struct sup *s)
{
	hutch_sup_snapshot_done(s);
	if (s->image) {
		hutch_image_use_release(s->image);
		free(s->image);
		s->image = NULL;
	}
}

const struct hutch_kind hutch_kind_image = {
	.name = "image",
	.is = is_image,
	.sizes_inside = true,
	.prepare_root = open_layers,
	.stash_fd = stash_fd,
	.child_fds = child_fds,
	.init_params = init_params,
	.spawned = close_layers,
	.setup_done = reap,
	.status = status,
	.ended = ended,
	.done = done,
};
