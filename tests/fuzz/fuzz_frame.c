/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the exec stream's frame decoder (base/frame.c,
 * scripts/fuzz): the input, fed to a decoder of each side in pieces whose
 * sizes come from its first byte, must decode the same events whatever
 * the split; every event stays inside the input or the decoder, every
 * length inside its bound, a returned piece given back with
 * dec_unread() is decoded again to the same bytes, and a caller that
 * moves a data frame's bytes itself (dec_pending(), dec_skip(): splice)
 * sees the same bytes. A RESULT frame's payload is read as the CLI reads
 * it (hutch_frame_result_decode()): its message stays inside the payload,
 * and what it decodes encodes back to the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A RESULT frame's payload as hutch's CLI reads it. */
static void check_result(const char *data, size_t len)
{
	struct hutch_frame_result res;
	char back[HUTCH_FRAME_CTL_MAX];
	size_t n;

	if (hutch_frame_result_decode(data, len, &res) < 0)
		return;
	if (res.message < data + HUTCH_FRAME_RESULT_HDR ||
	    res.message + res.message_len != data + len || (res.flags & ~HUTCH_FRAME_RESULT_FLAGS))
		abort();
	n = hutch_frame_result_encode(&res, back, sizeof(back));
	if (n != len || memcmp(back, data, len) != 0)
		abort();
}

/* Decode all of in, pieces of at most step bytes; sum a digest of the
 * events so that two splits can be compared. */
static uint64_t run(unsigned allowed, const uint8_t *in, size_t n, size_t step, bool giveback,
                    bool mover)
{
	static struct hutch_frame_dec d;
	uint64_t digest = 1469598103934665603ull;
	size_t off = 0;

	hutch_frame_dec_init(&d, allowed);
	while (off < n) {
		struct hutch_frame_ev ev;
		size_t piece = n - off < step ? n - off : step;
		enum hutch_frame_type t;
		size_t left = mover ? hutch_frame_dec_pending(&d, &t) : 0;
		ssize_t r;

		if (left) { /* as a splice would: straight from the input */
			size_t k = left < piece ? left : piece;

			if (t != HUTCH_FRAME_STDIN && t != HUTCH_FRAME_STDOUT &&
			    t != HUTCH_FRAME_STDERR)
				abort();
			for (size_t i = 0; i < k; i++)
				digest = (digest ^ in[off + i]) * 1099511628211ull;
			hutch_frame_dec_skip(&d, k);
			off += k;
			continue;
		}
		r = hutch_frame_decode(&d, (const char *)in + off, piece, &ev);

		if (r < 0)
			return digest ^ 0xdead;
		if (r == 0 || (size_t)r > piece)
			abort();
		if (ev.kind == HUTCH_FRAME_EV_DATA) {
			if (ev.data < (const char *)in + off ||
			    ev.data + ev.len > (const char *)in + off + piece)
				abort();
			if (ev.len > HUTCH_FRAME_DATA_MAX)
				abort();
			if (giveback && ev.len > 1) {
				/* take half, give the rest back */
				size_t keep = ev.len / 2;
				hutch_frame_dec_unread(&d, ev.len - keep);
				r -= (ssize_t)(ev.len - keep);
				ev.len = keep;
			}
		}
		if (ev.kind == HUTCH_FRAME_EV_CTL && ev.len > HUTCH_FRAME_CTL_MAX)
			abort();
		if (ev.kind == HUTCH_FRAME_EV_CTL && ev.type == HUTCH_FRAME_RESULT)
			check_result(ev.data, ev.len);
		if (ev.kind == HUTCH_FRAME_EV_EOF || ev.kind == HUTCH_FRAME_EV_CTL)
			digest = (digest ^ ((uint64_t)ev.kind << 8 | ev.type)) * 1099511628211ull;
		for (size_t i = 0; ev.kind == HUTCH_FRAME_EV_DATA && i < ev.len; i++)
			digest = (digest ^ (uint8_t)ev.data[i]) * 1099511628211ull;
		for (size_t i = 0; ev.kind == HUTCH_FRAME_EV_CTL && i < ev.len; i++)
			digest = (digest ^ (uint8_t)ev.data[i]) * 1099511628211ull;
		off += (size_t)r;
	}
	return digest;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++, size--;
	for (unsigned side = 0; side < 2; side++) {
		unsigned allowed = side ? HUTCH_FRAME_FROM_SERVER : HUTCH_FRAME_FROM_CLIENT;
		uint64_t whole = run(allowed, data, size, size ? size : 1, false, false);

		/* Data pieces digest byte by byte (where a piece ends is not
		 * seen), ends and control frames whole: any split gives the
		 * same digest. */
		if (run(allowed, data, size, step, false, false) != whole)
			abort();
		if (run(allowed, data, size, step, false, true) != whole)
			abort();
		if (run(allowed, data, size, step, true, false) != whole)
			abort();
	}
	return 0;
}
