/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request stream parser of intercepted connections (httpreq-internal.h):
 * RFC 9112 framing only — where a head ends, how long its body is — and
 * the rewrite of each head with the bound headers. Strict where framing is
 * at stake (request smuggling lives in the differences between parsers:
 * the proxy and the upstream must never disagree on where a request
 * ends), so whatever RFC 9112 lets a server refuse is refused here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <string.h>
#include <strings.h>

#include "httpreq-internal.h"

static bool is_tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static long bad(struct httpreq *r, const char *why)
{
	r->state = HQ_BAD;
	r->why = why;
	return -1;
}

void httpreq_init(struct httpreq *r, const struct httpreq_header *hdrs, size_t nhdrs)
{
	memset(r, 0, offsetof(struct httpreq, buf));
	r->state = HQ_HEAD;
	r->hdrs = hdrs;
	r->nhdrs = nhdrs;
}

size_t httpreq_extra(const struct httpreq_header *hdrs, size_t nhdrs)
{
	size_t n = 0;

	for (size_t i = 0; i < nhdrs; i++)
		n += strlen(hdrs[i].name) + 2 + hdrs[i].value_len + 2;
	return n;
}

static bool is_bound(const struct httpreq *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->nhdrs; i++)
		if (strlen(r->hdrs[i].name) == len && !strncasecmp(r->hdrs[i].name, name, len))
			return true;
	return false;
}

/* Appends n bytes to out (the caller checked the room). */
static void put(uint8_t *out, size_t *out_len, const void *p, size_t n)
{
	memcpy(out + *out_len, p, n);
	*out_len += n;
}

/* Trims optional white space (SP, HTAB) around [*v, *v + *n). */
static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

/* A decimal Content-Length; -1 if not one. */
static int64_t parse_length(const char *v, size_t n)
{
	int64_t x = 0;

	if (n == 0 || n > 18)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x. Sets *raw for CONNECT. */
static const char *check_request_line(const char *l, size_t n, bool *raw, bool *http10)
{
	const char *sp1 = memchr(l, ' ', n), *sp2;
	size_t mlen;

	if (!sp1 || sp1 == l)
		return "malformed HTTP request line";
	mlen = (size_t)(sp1 - l);
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((uint8_t)l[i]))
			return "malformed HTTP request method";
	sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
	if (!sp2 || sp2 == sp1 + 1 || (size_t)(l + n - sp2 - 1) != 8)
		return "malformed HTTP request line";
	for (const char *p = sp1 + 1; p < sp2; p++)
		if ((uint8_t)*p <= ' ' || *p == 0x7f)
			return "malformed HTTP request target";
	if (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8))
		return "not an HTTP/1.x request (only HTTP/1.1 is spoken to a bound host)";
	*http10 = sp2[8] == '0';
	*raw = mlen == 7 && !memcmp(l, "CONNECT", 7);
	return NULL;
}

struct head_info {
	int64_t length; /* -1: none */
	bool chunked, raw;
};

/* One header line [l, l + n): checked and noted in hi; false + *why if refused. */
static bool check_field(const char *l, size_t n, struct head_info *hi, const char **why)
{
	const char *colon = memchr(l, ':', n), *v;
	size_t nlen, vlen;
	int64_t len;

	if (n && (l[0] == ' ' || l[0] == '\t'))
		return *why = "obsolete line folding in an HTTP header", false;
	if (!colon || colon == l)
		return *why = "malformed HTTP header line", false;
	nlen = (size_t)(colon - l);
	for (size_t i = 0; i < nlen; i++)
		if (!is_tchar((uint8_t)l[i]))
			return *why = "malformed HTTP header name", false;
	v = colon + 1;
	vlen = n - nlen - 1;
	trim(&v, &vlen);
	for (size_t i = 0; i < vlen; i++)
		if (((uint8_t)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
			return *why = "control character in an HTTP header value", false;
	if (nlen == 14 && !strncasecmp(l, "content-length", 14)) {
		len = parse_length(v, vlen);
		if (len < 0 || (hi->length >= 0 && hi->length != len))
			return *why = "invalid or conflicting Content-Length", false;
		hi->length = len;
	} else if (nlen == 17 && !strncasecmp(l, "transfer-encoding", 17)) {
		if (hi->chunked || vlen != 7 || strncasecmp(v, "chunked", 7))
			return *why = "a transfer coding other than chunked", false;
		hi->chunked = true;
	} else if (nlen == 7 && !strncasecmp(l, "upgrade", 7)) {
		hi->raw = true;
	}
	return true;
}

/* A complete head in r->buf[0..hlen) (ending CRLF CRLF): checked and
 * written to out with the bound headers. */
static long take_head(struct httpreq *r, size_t hlen, uint8_t *out, size_t *out_len)
{
	struct head_info hi = { .length = -1 };
	const char *p = r->buf, *end = r->buf + hlen - 2, *why = NULL, *eol;
	bool http10 = false;

	for (size_t i = 0; i < hlen; i++)
		if ((r->buf[i] == '\n' && (i == 0 || r->buf[i - 1] != '\r')) ||
		    (r->buf[i] == '\r' && (i + 1 == hlen || r->buf[i + 1] != '\n')) || !r->buf[i])
			return bad(r, "a bare CR, LF or NUL in an HTTP request head");
	while (p < end && p[0] == '\r') /* empty lines before the request line */
		p += 2;
	if (p >= end)
		return bad(r, "empty HTTP request");
	eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
	why = check_request_line(p, (size_t)(eol - p), &hi.raw, &http10);
	if (why)
		return bad(r, why);
	put(out, out_len, p, (size_t)(eol - p) + 2);
	for (p = eol + 2; p < end; p = eol + 2) {
		eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
		if (!check_field(p, (size_t)(eol - p), &hi, &why))
			return bad(r, why);
		if (!is_bound(r, p, (size_t)((const char *)memchr(p, ':', (size_t)(eol - p)) - p)))
			put(out, out_len, p, (size_t)(eol - p) + 2);
	}
	if (hi.chunked && (hi.length >= 0 || http10))
		return bad(r, "both Content-Length and Transfer-Encoding (or chunked in HTTP/1.0)");
	for (size_t i = 0; i < r->nhdrs; i++) {
		put(out, out_len, r->hdrs[i].name, strlen(r->hdrs[i].name));
		put(out, out_len, ": ", 2);
		put(out, out_len, r->hdrs[i].value, r->hdrs[i].value_len);
		put(out, out_len, "\r\n", 2);
	}
	put(out, out_len, "\r\n", 2);
	r->nreqs++;
	r->len = 0;
	if (hi.raw)
		r->state = HQ_RAW;
	else if (hi.chunked)
		r->state = HQ_CHUNK_LINE;
	else if (hi.length > 0) {
		r->state = HQ_BODY;
		r->left = (uint64_t)hi.length;
	} else
		r->state = HQ_HEAD;
	return 0;
}

/* Gathers a head; returns the bytes consumed or -1. */
static long feed_head(struct httpreq *r, const uint8_t *in, size_t len, uint8_t *out,
                      size_t out_cap, size_t *out_len)
{
	size_t old = r->len, n = len < HTTPREQ_HEAD_MAX - old ? len : HTTPREQ_HEAD_MAX - old;
	size_t from = old > 3 ? old - 3 : 0, hlen;
	const char *end;

	/* The whole rewritten head must fit at once. */
	if (out_cap - *out_len < HTTPREQ_HEAD_MAX + httpreq_extra(r->hdrs, r->nhdrs))
		return 0;
	memcpy(r->buf + old, in, n);
	end = memmem(r->buf + from, old + n - from, "\r\n\r\n", 4);
	if (!end) {
		r->len = old + n;
		if (r->len == HTTPREQ_HEAD_MAX)
			return bad(r, "HTTP request head larger than 32 KiB");
		return (long)n;
	}
	hlen = (size_t)(end - r->buf) + 4;
	if (take_head(r, hlen, out, out_len) < 0)
		return -1;
	return (long)(hlen - old);
}

/* A chunk-size line or a trailer line: gathered in buf up to CRLF, then
 * checked and passed on. */
static long feed_line(struct httpreq *r, const uint8_t *in, size_t len, uint8_t *out,
                      size_t out_cap, size_t *out_len)
{
	size_t max = r->state == HQ_CHUNK_LINE ? HTTPREQ_LINE_MAX : HTTPREQ_TRAIL_MAX;
	size_t n = 0, l;
	uint64_t size = 0;
	int digits = 0;

	while (n < len && r->len < max) {
		r->buf[r->len++] = (char)in[n++];
		if (r->len >= 2 && r->buf[r->len - 2] == '\r' && r->buf[r->len - 1] == '\n')
			break;
	}
	if (r->len < 2 || r->buf[r->len - 2] != '\r' || r->buf[r->len - 1] != '\n') {
		if (r->len >= max)
			return bad(r, "HTTP chunk-size or trailer line too long");
		return (long)n;
	}
	l = r->len - 2;
	for (size_t i = 0; i < l; i++)
		if (r->buf[i] == '\n' || r->buf[i] == '\r' || !r->buf[i])
			return bad(r, "a bare CR, LF or NUL in an HTTP chunked body");
	if (out_cap - *out_len < r->len)
		return bad(r, "internal: no room for a chunk line"); /* cannot happen: see proxy */
	if (r->state == HQ_CHUNK_LINE) {
		for (; (size_t)digits < l; digits++) {
			char c = r->buf[digits];
			int v = c >= '0' && c <= '9'   ? c - '0'
			        : c >= 'a' && c <= 'f' ? c - 'a' + 10
			        : c >= 'A' && c <= 'F' ? c - 'A' + 10
			                               : -1;
			if (v < 0)
				break;
			if (digits >= 15)
				return bad(r, "HTTP chunk size too large");
			size = size << 4 | (uint64_t)v;
		}
		if (digits == 0 || ((size_t)digits < l && r->buf[digits] != ';' &&
		                    r->buf[digits] != ' ' && r->buf[digits] != '\t'))
			return bad(r, "malformed HTTP chunk size");
		put(out, out_len, r->buf, r->len);
		r->state = size ? HQ_CHUNK_DATA : HQ_TRAILER;
		r->left = size;
		r->trail = 0;
	} else if (l == 0) {
		put(out, out_len, "\r\n", 2);
		r->state = HQ_HEAD;
	} else {
		struct head_info hi = { .length = -1 };
		const char *why = NULL;
		r->trail += r->len;
		if (r->trail > HTTPREQ_TRAIL_MAX)
			return bad(r, "HTTP trailer section larger than 32 KiB");
		if (!check_field(r->buf, l, &hi, &why))
			return bad(r, why);
		/* A trailer field of a bound name is dropped, as in a head. */
		if (!is_bound(r, r->buf, (size_t)((const char *)memchr(r->buf, ':', l) - r->buf)))
			put(out, out_len, r->buf, r->len);
	}
	r->len = 0;
	return (long)n;
}

/* Body bytes (HQ_BODY, HQ_CHUNK_DATA, HQ_RAW) as they are. */
static long feed_pass(struct httpreq *r, const uint8_t *in, size_t len, uint8_t *out,
                      size_t out_cap, size_t *out_len)
{
	size_t n = out_cap - *out_len;

	if (n > len)
		n = len;
	if (r->state != HQ_RAW && n > r->left)
		n = (size_t)r->left;
	put(out, out_len, in, n);
	if (r->state == HQ_RAW)
		return (long)n;
	r->left -= n;
	if (r->left == 0) {
		if (r->state == HQ_CHUNK_DATA) {
			r->state = HQ_CHUNK_CRLF;
			r->left = 2;
		} else {
			r->state = HQ_HEAD;
		}
	}
	return (long)n;
}

long httpreq_feed(struct httpreq *r, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                  size_t *out_len)
{
	size_t used = 0;

	while (used < len && r->state != HQ_BAD) {
		const uint8_t *p = in + used;
		size_t n = len - used;
		long k;

		switch (r->state) {
		case HQ_HEAD:
			k = feed_head(r, p, n, out, out_cap, out_len);
			break;
		case HQ_CHUNK_LINE:
		case HQ_TRAILER:
			if (out_cap - *out_len < HTTPREQ_TRAIL_MAX)
				return (long)used;
			k = feed_line(r, p, n, out, out_cap, out_len);
			break;
		case HQ_CHUNK_CRLF:
			if (p[0] != (r->left == 2 ? '\r' : '\n'))
				return bad(r, "HTTP chunk data not followed by CRLF");
			if (out_cap - *out_len < 1)
				return (long)used;
			put(out, out_len, p, 1);
			if (--r->left == 0)
				r->state = HQ_CHUNK_LINE;
			k = 1;
			break;
		default:
			k = feed_pass(r, p, n, out, out_cap, out_len);
			break;
		}
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		used += (size_t)k;
	}
	return r->state == HQ_BAD ? -1 : (long)used;
}
