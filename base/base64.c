/* SPDX-License-Identifier: Apache-2.0 */
/* Base64; see base64.h. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *hutch_base64_encode(const void *in, size_t len)
{
	const unsigned char *p = in;
	char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

int hutch_base64_decode(const char *in, char **ret, size_t *ret_len)
{
	size_t len = strlen(in), n = 0;
	unsigned char *out = malloc(len / 4 * 3 + 3);
	uint32_t acc = 0;
	int bits = 0, pad = 0;

	if (!out)
		return -ENOMEM;
	for (const char *p = in; *p; p++) {
		const char *k;
		if (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
			continue;
		if (*p == '=') {
			pad++;
			continue;
		}
		k = strchr(b64, *p);
		if (!k || pad) {
			free(out);
			return -EINVAL;
		}
		acc = acc << 6 | (uint32_t)(k - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	if (pad > 2 || bits >= 6) {
		free(out);
		return -EINVAL;
	}
	*ret = (char *)out;
	*ret_len = n;
	return 0;
}
