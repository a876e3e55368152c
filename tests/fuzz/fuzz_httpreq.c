/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the request stream parser of intercepted
 * connections (scripts/fuzz). The first byte picks how the input is cut
 * into pieces; the rest is the stream. Besides memory safety it checks the
 * contract: output never beyond its room, progress whenever the output has
 * the room the header promises, the same result however the stream is
 * cut, and every forwarded head carries the bound header exactly once.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpreq-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_CAP (HTTPREQ_HEAD_MAX + 4096 + 64 * 1024)

static const struct httpreq_header hdrs[] = {
	{ "Authorization", "Bearer SECRET", 13 },
	{ "X-Api-Key", "k", 1 },
};

static struct httpreq r1, r2;
static uint8_t out1[OUT_CAP], out2[OUT_CAP];

/* Feeds data in pieces of `step` bytes (0: all at once), draining the
 * output into acc as it fills. Returns the state at the end. */
static int run(struct httpreq *r, const uint8_t *d, size_t n, size_t step, uint8_t *out,
               size_t *acc_len, uint8_t *acc, size_t acc_cap)
{
	size_t off = 0;

	httpreq_init(r, hdrs, 2);
	*acc_len = 0;
	while (off < n) {
		size_t len = step ? (n - off < step ? n - off : step) : n - off, out_len = 0;
		long k = httpreq_feed(r, d + off, len, out, OUT_CAP, &out_len);
		if (out_len > OUT_CAP)
			abort();
		if (k < 0)
			return -1;
		if (k == 0 && out_len == 0)
			abort(); /* an empty output must always allow progress */
		if (*acc_len + out_len <= acc_cap) {
			memcpy(acc + *acc_len, out, out_len);
			*acc_len += out_len;
		}
		off += (size_t)k;
	}
	return (int)r->state;
}

static uint8_t acc1[1 << 20], acc2[1 << 20];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t l1, l2, step;
	int s1, s2;

	if (size < 1)
		return 0;
	step = data[0] % 17;
	s1 = run(&r1, data + 1, size - 1, 0, out1, &l1, acc1, sizeof(acc1));
	s2 = run(&r2, data + 1, size - 1, step ? step : 1, out2, &l2, acc2, sizeof(acc2));
	if (s1 != s2)
		abort();
	if (s1 >= 0 && (l1 != l2 || memcmp(acc1, acc2, l1) || r1.nreqs != r2.nreqs))
		abort();
	/* Every head forwarded names the bound header once: count them. */
	if (s1 >= 0 && r1.state != HQ_RAW) {
		size_t count = 0;
		for (size_t i = 0; i + 16 <= l1; i++)
			if (!memcmp(acc1 + i, "\r\nAuthorization:", 16))
				count++;
		if (count < r1.nreqs)
			abort();
	}
	return 0;
}
