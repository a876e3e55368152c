/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 request stream of an intercepted connection (a bound host,
 * netpolicy.h: header bindings), parsed to find where each request's head
 * ends, so that the bound headers are set on every request: existing
 * headers of those names are dropped, the bound ones added. Bodies
 * (Content-Length or chunked) and trailers pass through unchanged. Input
 * is hostile (it comes from inside the sandbox): every length is bounded,
 * and anything ambiguous for framing (obs-fold, a bare LF, both
 * Content-Length and Transfer-Encoding, two different lengths, a coding
 * other than chunked) is refused rather than guessed. After an Upgrade or
 * CONNECT request the stream is passed on as it is. libc only (the fuzz
 * target links it).
 */
#ifndef HUTCH_HTTPREQ_INTERNAL_H
#define HUTCH_HTTPREQ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTPREQ_HEAD_MAX  (32u << 10) /* a request line and its headers */
#define HTTPREQ_LINE_MAX  1024        /* a chunk-size line */
#define HTTPREQ_TRAIL_MAX (32u << 10) /* the trailer section of a chunked body */

/* One header the proxy sets: name and value, both checked beforehand
 * (hutch_net_binding_check()). */
struct httpreq_header {
	const char *name, *value;
	size_t value_len;
};

enum httpreq_state {
	HQ_HEAD,       /* gathering a request head */
	HQ_BODY,       /* Content-Length bytes left */
	HQ_CHUNK_LINE, /* a chunk-size line */
	HQ_CHUNK_DATA, /* chunk bytes left */
	HQ_CHUNK_CRLF, /* the CRLF after a chunk's data */
	HQ_TRAILER,    /* trailer lines until an empty one */
	HQ_RAW,        /* after Upgrade/CONNECT: bytes as they are */
	HQ_BAD,        /* refused; the connection ends */
};

struct httpreq {
	enum httpreq_state state;
	uint64_t left;   /* HQ_BODY, HQ_CHUNK_DATA, HQ_CHUNK_CRLF */
	size_t len;      /* bytes held in buf (head, chunk line, trailer line) */
	size_t trail;    /* trailer bytes so far */
	uint64_t nreqs;  /* requests whose head was forwarded */
	const char *why; /* HQ_BAD: a reason (static text, never input) */
	const struct httpreq_header *hdrs;
	size_t nhdrs;
	char buf[HTTPREQ_HEAD_MAX];
};

/* hdrs must outlive r. */
void httpreq_init(struct httpreq *r, const struct httpreq_header *hdrs, size_t nhdrs);

/* The room a rewritten head may need beyond the head itself. */
size_t httpreq_extra(const struct httpreq_header *hdrs, size_t nhdrs);

/* Feeds in[0..len): consumes what it can and appends what goes upstream
 * to out (out_cap bytes, out_len in use). A head is written whole or not
 * at all: give out room for HTTPREQ_HEAD_MAX + httpreq_extra() to be sure
 * of progress. Returns the bytes consumed (0 when out is full), or -1
 * when the stream is refused (r->why says why; nothing more may be fed). */
long httpreq_feed(struct httpreq *r, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                  size_t *out_len);

#endif
