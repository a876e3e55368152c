/* SPDX-License-Identifier: Apache-2.0 */
/* The last bytes of a stream, by absolute offset; see ring.h. */
#include <stdlib.h>
#include <string.h>

#include "ring.h"

void hutch_ring_init(struct hutch_ring *r, size_t cap)
{
	*r = (struct hutch_ring){ .cap = cap };
}

void hutch_ring_done(struct hutch_ring *r)
{
	free(r->data);
	*r = (struct hutch_ring){ .cap = r->cap };
}

/* Before the first wrap, ring position == offset, so the buffer can grow
 * geometrically and most processes never hold the whole 1 MiB. */
void hutch_ring_write(struct hutch_ring *r, const char *p, size_t n)
{
	size_t need, pos, first;

	if (n > r->cap) {
		r->total += n - r->cap;
		p += n - r->cap;
		n = r->cap;
	}
	need = r->total + n < r->cap ? (size_t)(r->total + n) : r->cap;
	if (need > r->alloc) {
		size_t na = r->alloc ? r->alloc : 4096;
		char *q;
		while (na < need)
			na *= 2;
		if (na > r->cap)
			na = r->cap;
		q = realloc(r->data, na);
		if (!q) {
			/* Out of memory: the bytes are counted as dropped. */
			r->total += n;
			r->start = r->total;
			return;
		}
		r->data = q;
		r->alloc = na;
	}
	pos = (size_t)(r->total % r->cap);
	first = n < r->cap - pos ? n : r->cap - pos;
	memcpy(r->data + pos, p, first);
	memcpy(r->data, p + first, n - first);
	r->total += n;
	if (r->total > r->cap && r->start < r->total - r->cap)
		r->start = r->total - r->cap;
}

size_t hutch_ring_read(const struct hutch_ring *r, uint64_t offset, char *dst, size_t max)
{
	size_t n, pos, first;

	if (offset < r->start || offset >= r->total)
		return 0;
	n = r->total - offset < max ? (size_t)(r->total - offset) : max;
	pos = (size_t)(offset % r->cap);
	first = n < r->cap - pos ? n : r->cap - pos;
	memcpy(dst, r->data + pos, first);
	memcpy(dst + first, r->data, n - first);
	return n;
}
