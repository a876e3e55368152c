/* SPDX-License-Identifier: Apache-2.0 */
/* The exec stream's frames; see frame.h. Pure: no I/O, no allocation. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "frame.h"

void hutch_frame_dec_init(struct hutch_frame_dec *d, unsigned allowed)
{
	/* ctl (4 KiB) is not cleared; error, after it, is */
	memset(d, 0, offsetof(struct hutch_frame_dec, ctl));
	d->allowed = allowed;
	d->error = NULL;
}

void hutch_frame_header(uint8_t hdr[HUTCH_FRAME_HDR], enum hutch_frame_type t, uint32_t len)
{
	hdr[0] = (uint8_t)t;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
}

static bool is_data(uint8_t t)
{
	return t == HUTCH_FRAME_STDIN || t == HUTCH_FRAME_STDOUT || t == HUTCH_FRAME_STDERR;
}

static ssize_t fail(struct hutch_frame_dec *d, const char *why)
{
	d->error = why;
	return -EPROTO;
}

/* The header is complete: check it. */
static ssize_t start_frame(struct hutch_frame_dec *d, struct hutch_frame_ev *ev)
{
	uint32_t len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
	               (uint32_t)d->hdr[3] << 8 | d->hdr[4];

	d->type = d->hdr[0];
	if (d->type >= HUTCH_FRAME_NTYPES || !(d->allowed & HUTCH_FRAME_BIT(d->type)))
		return fail(d, "unexpected frame type");
	if (len > (is_data(d->type) ? HUTCH_FRAME_DATA_MAX : HUTCH_FRAME_CTL_MAX))
		return fail(d, "frame longer than its bound");
	d->left = len;
	d->ctl_len = 0;
	d->hdr_len = 0;
	if (len == 0) {
		ev->kind = is_data(d->type) ? HUTCH_FRAME_EV_EOF : HUTCH_FRAME_EV_CTL;
		ev->type = (enum hutch_frame_type)d->type;
		ev->data = d->ctl;
	}
	return 0;
}

ssize_t hutch_frame_decode(struct hutch_frame_dec *d, const char *buf, size_t n,
                           struct hutch_frame_ev *ev)
{
	size_t take;

	*ev = (struct hutch_frame_ev){ .kind = HUTCH_FRAME_EV_NONE };
	if (d->error)
		return -EPROTO;
	if (n == 0)
		return 0;
	if (d->left == 0) { /* in a header */
		take = HUTCH_FRAME_HDR - d->hdr_len;
		take = take < n ? take : n;
		memcpy(d->hdr + d->hdr_len, buf, take);
		d->hdr_len += take;
		if (d->hdr_len == HUTCH_FRAME_HDR && start_frame(d, ev) < 0)
			return -EPROTO;
		return (ssize_t)take;
	}
	take = d->left < n ? d->left : n;
	d->left -= (uint32_t)take;
	ev->type = (enum hutch_frame_type)d->type;
	if (is_data(d->type)) {
		ev->kind = HUTCH_FRAME_EV_DATA;
		ev->data = buf;
		ev->len = take;
		return (ssize_t)take;
	}
	memcpy(d->ctl + d->ctl_len, buf, take);
	d->ctl_len += take;
	if (d->left == 0) {
		ev->kind = HUTCH_FRAME_EV_CTL;
		ev->data = d->ctl;
		ev->len = d->ctl_len;
	}
	return (ssize_t)take;
}

size_t hutch_frame_dec_pending(const struct hutch_frame_dec *d, enum hutch_frame_type *type)
{
	if (d->error || d->left == 0 || !is_data(d->type))
		return 0;
	*type = (enum hutch_frame_type)d->type;
	return d->left;
}

void hutch_frame_dec_skip(struct hutch_frame_dec *d, size_t n)
{
	d->left -= (uint32_t)(n < d->left ? n : d->left);
}

void hutch_frame_dec_unread(struct hutch_frame_dec *d, size_t k)
{
	d->left += (uint32_t)k;
}

size_t hutch_frame_result_encode(const struct hutch_frame_result *r, char *buf, size_t size)
{
	size_t n = r->message_len;

	if (size < HUTCH_FRAME_RESULT_HDR)
		return 0;
	if (size > HUTCH_FRAME_CTL_MAX)
		size = HUTCH_FRAME_CTL_MAX;
	if (n > size - HUTCH_FRAME_RESULT_HDR)
		n = size - HUTCH_FRAME_RESULT_HDR;
	buf[0] = (char)(r->flags & HUTCH_FRAME_RESULT_FLAGS);
	buf[1] = (char)r->exit_code;
	buf[2] = (char)r->signal;
	buf[3] = 0;
	if (n)
		memcpy(buf + HUTCH_FRAME_RESULT_HDR, r->message, n);
	return HUTCH_FRAME_RESULT_HDR + n;
}

int hutch_frame_result_decode(const char *data, size_t len, struct hutch_frame_result *ret)
{
	const uint8_t *d = (const uint8_t *)data;

	if (len < HUTCH_FRAME_RESULT_HDR || len > HUTCH_FRAME_CTL_MAX)
		return -EPROTO;
	if ((d[0] & ~HUTCH_FRAME_RESULT_FLAGS) || d[3])
		return -EPROTO;
	if (memchr(data + HUTCH_FRAME_RESULT_HDR, 0, len - HUTCH_FRAME_RESULT_HDR))
		return -EPROTO;
	*ret = (struct hutch_frame_result){
		.flags = d[0],
		.exit_code = d[1],
		.signal = d[2],
		.message = data + HUTCH_FRAME_RESULT_HDR,
		.message_len = len - HUTCH_FRAME_RESULT_HDR,
	};
	return 0;
}
