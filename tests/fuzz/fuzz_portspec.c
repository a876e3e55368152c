/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the -p / bind_port spec parser (runtime/portspec.c,
 * scripts/fuzz): any input is accepted or refused with a message, never
 * read past its end; an accepted spec has a sandbox port, a numeric host
 * address that inet_pton() takes, and prints back to a spec that parses to
 * the same value.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "portspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_port_spec p, q;
	struct hutch_err err = { 0 };
	char *s = malloc(size + 1), text[HUTCH_PORTSPEC_MAX * 2], host[80];
	unsigned char bin[16];

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (hutch_port_spec_parse(s, &p, &err) == 0) {
		if (p.sandbox_port == 0 ||
		    inet_pton(p.ipv6 ? AF_INET6 : AF_INET, p.host_addr, bin) != 1)
			abort();
		hutch_port_spec_host(&p, 0, host, sizeof(host));
		snprintf(text, sizeof(text), "%s:%u", host, p.sandbox_port);
		if (hutch_port_spec_parse(text, &q, &err) != 0 || memcmp(&p, &q, sizeof(p)) != 0)
			abort();
	} else if (err.code == 0 || !err.msg[0]) {
		abort();
	}
	free(s);
	return 0;
}
