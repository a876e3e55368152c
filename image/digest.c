/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 for the image store: nettle's, behind three calls so the rest of
 * the library neither includes nettle nor allocates a context. Linked from
 * nettle's static archive where Debian ships it.
 */
#include <stdio.h>
#include <string.h>

#include <nettle/sha2.h>

#include "image-internal.h"

_Static_assert(sizeof(struct sha256_ctx) <= sizeof(struct hutch_sha256),
               "struct hutch_sha256 must hold a struct sha256_ctx");

void hutch_sha256_init(struct hutch_sha256 *h)
{
	sha256_init((struct sha256_ctx *)h);
}

void hutch_sha256_update(struct hutch_sha256 *h, const void *buf, size_t len)
{
	sha256_update((struct sha256_ctx *)h, len, buf);
}

void hutch_sha256_final(struct hutch_sha256 *h, char out[HUTCH_IMAGE_DIGEST_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest((struct sha256_ctx *)h, sizeof(d), d);
	memcpy(out, "sha256:", 7);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[7 + 2 * i] = hex[d[i] >> 4];
		out[8 + 2 * i] = hex[d[i] & 15];
	}
	out[HUTCH_IMAGE_DIGEST_LEN] = '\0';
}
