/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the image store's JSON parsers (image/oci.c): the
 * input as an image index (by platform and by tag), a manifest, a config
 * and a docker-save manifest.json. Every result must be 0 or a negative
 * errno with a message; what a success returns must be well formed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int r, const struct hutch_err *err)
{
	if (r < 0 && (r != err->code || !err->msg[0]))
		abort();
	if (r > 0)
		abort();
}

/* A ".." component, which parse_docker_manifest() must refuse. */
static bool has_dotdot(const char *p)
{
	size_t n = strlen(p);

	return !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") ||
	       (n >= 3 && !strcmp(p + n - 3, "/.."));
}

static void index_(const char *buf, size_t size, const char *tag)
{
	struct hutch_err err = { 0 };
	char d[HUTCH_IMAGE_DIGEST_LEN + 1];
	bool nested = false;
	int r = hutch_image_parse_index(buf, size, tag, "linux", "amd64", d, &nested, &err);

	check(r, &err);
	if (r == 0 && !hutch_image_digest_is_valid(d))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct hutch_err err = { 0 };
	struct hutch_image_manifest *m = calloc(1, sizeof(*m));
	struct hutch_image_docker *d = calloc(1, sizeof(*d));
	struct hutch_image_config c = { 0 };
	int r;

	if (!m || !d)
		abort();
	index_(buf, size, NULL);
	index_(buf, size, "latest");
	r = hutch_image_parse_manifest(buf, size, m, &err);
	check(r, &err);
	for (size_t i = 0; r == 0 && i < m->n_layers; i++)
		if (!hutch_image_digest_is_valid(m->layers[i]))
			abort();
	r = hutch_image_parse_config(buf, size, &c, &err);
	check(r, &err);
	for (char **e = c.env; r == 0 && e && *e; e++)
		if (!strchr(*e, '='))
			abort();
	hutch_image_config_done(&c);
	r = hutch_image_parse_docker_manifest(buf, size, d, &err);
	check(r, &err);
	for (size_t i = 0; r == 0 && i < d->n_layers; i++)
		if (d->layers[i][0] == '/' || has_dotdot(d->layers[i]))
			abort();
	free(m);
	free(d);
	return 0;
}
