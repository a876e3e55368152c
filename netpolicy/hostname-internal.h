/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host name rules shared by the TLS and DNS parsers: which bytes a name
 * may contain (letters, digits, '-', '_'), labels of 1..63 characters, at
 * most 253 characters in text form. Header-only and libc-free so that each
 * parser still compiles on its own in a fuzz target.
 *
 * Why so strict: the names end up compared against the allow-list. A '.'
 * inside a DNS label, a NUL or a space would give two different names the
 * same text, so anything outside the set is refused rather than escaped.
 */
#ifndef HUTCH_HOSTNAME_INTERNAL_H
#define HUTCH_HOSTNAME_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOSTNAME_MAX       253 /* text form, without the trailing dot */
#define HOSTNAME_LABEL_MAX 63

static inline bool hostname_char_ok(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* ASCII only: the C library's tolower() depends on the locale. */
static inline char hostname_lower(uint8_t c)
{
	return (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

/* Checks the text name in[0..len) and writes it to out (at least
 * HOSTNAME_MAX + 1 bytes) lowercased, without one trailing dot, NUL
 * terminated. Returns its length, 0 for the root ("" or "."), or -1 if it
 * breaks a rule (then out holds garbage). */
static inline int hostname_normalize(const char *in, size_t len, char *out)
{
	size_t label = 0;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len > HOSTNAME_MAX)
		return -1;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)in[i];

		if (c == '.') {
			if (label == 0)
				return -1;
			label = 0;
		} else if (!hostname_char_ok(c) || ++label > HOSTNAME_LABEL_MAX) {
			return -1;
		}
		out[i] = hostname_lower(c);
	}
	if (len > 0 && label == 0)
		return -1;
	out[len] = '\0';
	return (int)len;
}

#endif
