/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The last cap bytes of a stream, addressed by absolute offset: total
 * counts every byte ever written, start is the oldest offset still held.
 * A reader that remembers its offset follows the stream across reads
 * without losing or repeating bytes, and learns from start what the ring
 * has overwritten. The buffer grows geometrically up to cap, so a short
 * stream never holds cap bytes. Pure; unit-tested in test_base.c.
 */
#ifndef HUTCH_RING_H
#define HUTCH_RING_H

#include <stddef.h>
#include <stdint.h>

struct hutch_ring {
	char *data;
	size_t alloc; /* grows up to cap */
	size_t cap;
	uint64_t total; /* bytes written since the start */
	uint64_t start; /* oldest offset still held */
};

void hutch_ring_init(struct hutch_ring *r, size_t cap);
void hutch_ring_done(struct hutch_ring *r);
/* Keep p's bytes (the last cap of them). Out of memory, they are counted
 * as written and dropped (start moves past them). */
void hutch_ring_write(struct hutch_ring *r, const char *p, size_t n);
/* Copy up to max bytes from offset; 0 when offset is outside
 * [start, total). */
size_t hutch_ring_read(const struct hutch_ring *r, uint64_t offset, char *dst, size_t max);

#endif
