/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option types of --image (options.h): the image's name ("host", a
 * name of the store or a registry reference, or a file to import; its
 * manifest, once the CLI resolved it, is part of the pool key) and the store's path
 * (HUTCH_IMAGE_STORE). Pure.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "options-field.h"
#include "options.h"

/* ---- the image: "host" or a name of the image store ---- */

static bool image_name_is_valid(const char *s)
{
	size_t len = strlen(s);

	/* image.h's hutch_image_name_is_valid(), which runtime does not link. */
	if (len == 0 || len > HUTCH_IMAGE_REF_MAX || s[0] == '.' || s[0] == '/' || s[0] == '-' ||
	    strstr(s, ".."))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._:/@+-", *s))
			return false;
	return true;
}

const char *hutch_image_source_path(const char *image)
{
	static const char *const transports[] = { "oci:", "oci-archive:", "docker-archive:" };

	for (size_t i = 0; i < sizeof(transports) / sizeof(*transports); i++)
		if (!strncmp(image, transports[i], strlen(transports[i])))
			return image + strlen(transports[i]);
	if (image[0] == '/' || !strncmp(image, "./", 2) || !strncmp(image, "../", 3))
		return image;
	return NULL;
}

/* A file to import: any path without control characters. */
static bool image_path_is_valid(const char *s)
{
	const char *path = hutch_image_source_path(s);

	if (!path || !*path || strlen(s) > HUTCH_IMAGE_REF_MAX)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int image_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                       struct hutch_err *err)
{
	/* Unset (the default, never parsed) is resolved by the CLI: the default
	 * image or host. Given empty, it is a mistake (an unset shell
	 * variable, --image "$IMG"), not a request for the default. */
	if (!*s)
		return hutch_err_set(
		        err, -EINVAL,
		        "an empty %s is not the default: give 'host' for the "
		        "host-derived root, or leave the option out for the default "
		        "(hutch-default once 'hutch image build-default' made it, else "
		        "host)",
		        o->name);
	if (!image_name_is_valid(s) && !image_path_is_valid(s))
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid %s '%.64s': give 'host', a registry reference or the "
		        "name of an image of the store ('hutch image ls'), e.g. "
		        "docker.io/library/python:3.12-bookworm, or the path of an OCI "
		        "layout or a 'docker save' archive (/abs, ./rel, oci:PATH, "
		        "docker-archive:PATH; at most %d bytes)",
		        o->name, s, HUTCH_IMAGE_REF_MAX);
	if (strcmp(s, CFIELD(o, c, char)) != 0)
		c->image_manifest[0] = '\0'; /* resolved again for the new name */
	hutch_opt_chars_set(o, c, s);
	return 0;
}

/* The pool key's text: the name and, once resolved, the manifest; none
 * for the host-derived root, so that the keys of pools made before --image
 * existed stay the same. */
static void image_text(const struct hutch_option *o, const struct hutch_config *c,
                       void (*emit)(void *ud, const char *s), void *ud)
{
	if (!hutch_config_has_image(c))
		return;
	emit(ud, CFIELD(o, c, char));
	if (c->image_manifest[0])
		emit(ud, c->image_manifest);
}

const struct hutch_option_type hutch_opt_image = {
	.init = hutch_opt_chars_init,
	.parse = image_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = image_text,
};

/* ---- --snapshot NAME: --image NAME, where NAME must be a snapshot ---- */

static void snapshot_init(const struct hutch_option *o, struct hutch_config *c)
{
	(void)o;
	c->image_snapshot = false; /* the field is image's: its row sets it */
}

static int snapshot_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                          struct hutch_err *err)
{
	if (!image_name_is_valid(s) || !strcmp(s, HUTCH_IMAGE_HOST) || hutch_image_source_path(s))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.64s': give the name of a snapshot of the store "
		                     "('hutch snapshot ls')",
		                     o->name, s);
	if (strcmp(s, CFIELD(o, c, char)) != 0)
		c->image_manifest[0] = '\0';
	hutch_opt_chars_set(o, c, s);
	c->image_snapshot = true;
	return 0;
}

/* Carried by the image row, in JSON and in the pool key alike. */
static void snapshot_to_json(const struct hutch_option *o, const struct hutch_config *c,
                             struct hutch_jw *w)
{
	(void)o, (void)c, (void)w;
}

static void snapshot_text(const struct hutch_option *o, const struct hutch_config *c,
                          void (*emit)(void *ud, const char *s), void *ud)
{
	(void)o, (void)c, (void)emit, (void)ud;
}

const struct hutch_option_type hutch_opt_snapshot = {
	.init = snapshot_init,
	.parse = snapshot_parse,
	.to_json = snapshot_to_json,
	.text = snapshot_text,
};

static int store_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                       struct hutch_err *err)
{
	if (s[0] != '/' || strlen(s) >= o->size)
		return hutch_err_set(err, -EINVAL,
		                     "invalid image store '%.64s' (HUTCH_IMAGE_STORE): give an "
		                     "absolute path shorter than %zu bytes",
		                     s, (size_t)o->size);
	hutch_opt_chars_set(o, c, s);
	return 0;
}

/* Only an image's sandboxes depend on the store. */
static void store_text(const struct hutch_option *o, const struct hutch_config *c,
                       void (*emit)(void *ud, const char *s), void *ud)
{
	if (hutch_config_has_image(c))
		emit(ud, CFIELD(o, c, char));
}

const struct hutch_option_type hutch_opt_image_store = {
	.init = hutch_opt_chars_init,
	.parse = store_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = store_text,
};
