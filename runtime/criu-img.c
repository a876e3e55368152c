/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two CRIU images a restore rewrites (criu.h; docs/snapshots.md "Full
 * snapshots: the restore"): the user namespace's (userns-ID.img: its uid
 * and gid maps, moved from the source's range onto the new sandbox's, never
 * the source's) and the uts namespace's (utsns-ID.img: the host name, the
 * new sandbox's). Pure: bytes in, bytes out.
 *
 * A CRIU image is two 32-bit magics (kept as they are), then entries, each
 * a little-endian 32-bit size and a protobuf message of that size. Only the
 * fields named below are touched; every other field is copied verbatim, so
 * a later CRIU's additions pass through. What is read is checked against
 * the buffer's end (the store is root's, but a truncated file must fail,
 * not be read past).
 *
 *   userns_entry { repeated uid_elem uid_map = 1; repeated uid_elem gid_map = 2; }
 *   uid_elem     { uint32 first = 1; uint32 lower_first = 2; uint32 count = 3; }
 *   utsns_entry  { bytes nodename = 1; bytes domainname = 2; }
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "criu.h"

#define IMG_HEAD  8
#define ENTRY_MAX (1u << 20)

struct out {
	uint8_t *p;
	size_t n, cap;
};

static int put(struct out *o, const void *data, size_t len)
{
	if (o->n + len > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		uint8_t *p;

		while (cap < o->n + len)
			cap *= 2;
		if (!(p = realloc(o->p, cap)))
			return -ENOMEM;
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->n, data, len);
	o->n += len;
	return 0;
}

static int put_varint(struct out *o, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	return put(o, b, n);
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -EBADMSG;
		*v |= (uint64_t)(**p & 0x7f) << shift;
		if (!(*(*p)++ & 0x80))
			return 0;
	}
	return -EBADMSG;
}

/* One field at *p: its number, wire type, and its value (a varint in
 * *vint; bytes at *val, *vlen for wire type 2); *raw..*p is the whole. */
struct field {
	uint32_t num, wt;
	uint64_t vint;
	const uint8_t *val, *raw;
	size_t vlen, rawlen;
};

static int get_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
	uint64_t key, len;
	int r;

	f->raw = *p;
	if ((r = get_varint(p, end, &key)) < 0)
		return r;
	f->num = (uint32_t)(key >> 3);
	f->wt = (uint32_t)(key & 7);
	switch (f->wt) {
	case 0:
		r = get_varint(p, end, &f->vint);
		break;
	case 1:
	case 5:
		len = f->wt == 1 ? 8 : 4;
		if ((size_t)(end - *p) < len)
			return -EBADMSG;
		*p += len;
		break;
	case 2:
		if ((r = get_varint(p, end, &len)) < 0 || len > (uint64_t)(end - *p))
			return -EBADMSG;
		f->val = *p;
		f->vlen = (size_t)len;
		*p += len;
		break;
	default:
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	f->rawlen = (size_t)(*p - f->raw);
	return 0;
}

struct remap {
	uint32_t old_base, new_base, count;
	size_t seen;
};

/* One uid_elem, its lower_first moved; an extent outside the source's
 * range is refused (what was dumped is not a sandbox of hutch's). */
static int remap_elem(struct remap *m, const uint8_t *p, const uint8_t *end, struct out *o)
{
	uint64_t lower = 0, count = 0;
	bool have_lower = false;
	struct field f;
	int r;

	for (const uint8_t *q = p; q < end;) {
		if ((r = get_field(&q, end, &f)) < 0)
			return r;
		if (f.num == 2 && f.wt == 0) {
			lower = f.vint;
			have_lower = true;
		} else if (f.num == 3 && f.wt == 0) {
			count = f.vint;
		}
	}
	if (!have_lower || lower < m->old_base || count > m->count ||
	    lower - m->old_base > m->count - count)
		return -ERANGE;
	while (p < end) {
		if ((r = get_field(&p, end, &f)) < 0)
			return r;
		if (f.num == 2 && f.wt == 0)
			r = put_varint(o, (2 << 3) | 0)
			            ?: put_varint(o, lower - m->old_base + m->new_base);
		else
			r = put(o, f.raw, f.rawlen);
		if (r < 0)
			return r;
	}
	m->seen++;
	return 0;
}

static int remap_entry(void *ud, const uint8_t *p, const uint8_t *end, struct out *o)
{
	struct remap *m = ud;
	struct field f;
	int r;

	while (p < end) {
		if ((r = get_field(&p, end, &f)) < 0)
			return r;
		if ((f.num == 1 || f.num == 2) && f.wt == 2) {
			struct out e = { 0 };

			r = remap_elem(m, f.val, f.val + f.vlen, &e);
			if (r >= 0)
				r = put_varint(o, (f.num << 3) | 2) ?: put_varint(o, e.n)
				                                   ?: put(o, e.p, e.n);
			free(e.p);
		} else {
			r = put(o, f.raw, f.rawlen);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int rename_entry(void *ud, const uint8_t *p, const uint8_t *end, struct out *o)
{
	const char *name = ud;
	bool done = false;
	struct field f;
	int r;

	while (p < end) {
		if ((r = get_field(&p, end, &f)) < 0)
			return r;
		if (f.num == 1 && f.wt == 2 && !done) {
			r = put_varint(o, (1 << 3) | 2) ?: put_varint(o, strlen(name))
			                                ?: put(o, name, strlen(name));
			done = true;
		} else if (f.num == 1) {
			continue; /* a repeated nodename: one is written */
		} else {
			r = put(o, f.raw, f.rawlen);
		}
		if (r < 0)
			return r;
	}
	return done ? 0 : -EBADMSG;
}

/* Every entry of the image through fn; the magics kept. */
static int rewrite(const uint8_t *in, size_t len,
                   int (*fn)(void *, const uint8_t *, const uint8_t *, struct out *), void *ud,
                   uint8_t **ret, size_t *ret_len)
{
	struct out o = { 0 };
	size_t at = IMG_HEAD;
	int r = 0;

	if (len < IMG_HEAD + 4)
		return -EBADMSG;
	if ((r = put(&o, in, IMG_HEAD)) < 0)
		return r;
	while (at < len && r >= 0) {
		struct out e = { 0 };
		uint32_t size, le;

		if (len - at < 4) {
			r = -EBADMSG;
			break;
		}
		memcpy(&le, in + at, 4);
		size = le32toh(le);
		at += 4;
		if (size > ENTRY_MAX || size > len - at) {
			r = -EBADMSG;
			break;
		}
		r = fn(ud, in + at, in + at + size, &e);
		le = htole32((uint32_t)e.n);
		if (r >= 0)
			r = put(&o, &le, 4) ?: put(&o, e.p, e.n);
		free(e.p);
		at += size;
	}
	if (r < 0) {
		free(o.p);
		return r;
	}
	*ret = o.p;
	*ret_len = o.n;
	return 0;
}

int hutch_criu_img_remap_userns(const uint8_t *in, size_t len, uint32_t old_base, uint32_t new_base,
                                uint32_t count, uint8_t **ret, size_t *ret_len)
{
	struct remap m = { .old_base = old_base, .new_base = new_base, .count = count };
	uint8_t *out = NULL;
	size_t n = 0;
	int r = rewrite(in, len, remap_entry, &m, &out, &n);

	if (r >= 0 && m.seen == 0)
		r = -EBADMSG; /* no map at all: not a user namespace of hutch's */
	if (r < 0) {
		free(out);
		return r;
	}
	*ret = out;
	*ret_len = n;
	return 0;
}

int hutch_criu_img_set_nodename(const uint8_t *in, size_t len, const char *nodename, uint8_t **ret,
                                size_t *ret_len)
{
	return rewrite(in, len, rename_entry, (void *)nodename, ret, ret_len);
}
