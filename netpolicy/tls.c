/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ClientHello parser for the allow-mode TLS proxy (DESIGN.md §4): decides
 * from the first bytes of a connection whether it is TLS at all and which
 * server name it asks for. Two layers are walked: TLS records (RFC 8446
 * §5.1), whose handshake payloads are joined into one buffer until the
 * ClientHello is whole, then the ClientHello itself (§4.1.2) down to the
 * server_name extension (RFC 6066 §3). Every length is checked against the
 * bytes that enclose it; a length that points past its container is
 * -EBADMSG, never a read past the buffer. libc only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hostname-internal.h"
#include "tls-internal.h"

#define REC_HDR           5
#define REC_HANDSHAKE     22
#define REC_PAYLOAD_MAX   16384u /* 2^14, RFC 8446 §5.1 */
#define HS_HDR            4
#define HS_CLIENT_HELLO   1
#define HS_MAX            (HUTCH_TLS_HELLO_MAX - REC_HDR)
#define EXT_SERVER_NAME   0
#define SNI_HOST_NAME     0
#define SESSION_ID_MAX    32
#define HELLO_RANDOM_SIZE 32

/* A read cursor over a bounded byte range. */
struct cur {
	const uint8_t *p;
	size_t n;
};

static bool take(struct cur *c, size_t k, const uint8_t **ret)
{
	if (c->n < k)
		return false;
	if (ret)
		*ret = c->p;
	c->p += k;
	c->n -= k;
	return true;
}

/* Reads a big-endian integer of 1..3 bytes. */
static bool take_uint(struct cur *c, size_t k, size_t *ret)
{
	const uint8_t *p;
	size_t v = 0;

	if (!take(c, k, &p))
		return false;
	for (size_t i = 0; i < k; i++)
		v = (v << 8) | p[i];
	*ret = v;
	return true;
}

/* Reads a vector with a k-byte length prefix into sub; its length must lie
 * within [min, max] and within c. */
static bool take_vec(struct cur *c, size_t k, size_t min, size_t max, struct cur *sub)
{
	size_t n;

	if (!take_uint(c, k, &n) || n < min || n > max)
		return false;
	sub->p = c->p;
	sub->n = n;
	return take(c, n, NULL);
}

/* server_name extension data: a ServerNameList of (type, name) entries. At
 * most one host_name (RFC 6066: no two names of the same type); other types
 * are skipped. */
static int parse_server_name(struct cur ext, char *sni)
{
	struct cur list, name;
	size_t type;
	bool seen = false;

	if (!take_vec(&ext, 2, 1, SIZE_MAX, &list) || ext.n != 0)
		return -EBADMSG;
	while (list.n > 0) {
		if (!take_uint(&list, 1, &type) || !take_vec(&list, 2, 1, SIZE_MAX, &name))
			return -EBADMSG;
		if (type != SNI_HOST_NAME)
			continue;
		if (seen || hostname_normalize((const char *)name.p, name.n, sni) <= 0)
			return -EBADMSG;
		seen = true;
	}
	return 0;
}

/* The ClientHello body (after the 4-byte handshake header). */
static int parse_hello(struct cur c, char *sni)
{
	struct cur v, exts, ext;
	size_t version, type;
	bool seen = false;
	int r;

	sni[0] = '\0';
	if (!take_uint(&c, 2, &version) || (version >> 8) != 3 ||
	    !take(&c, HELLO_RANDOM_SIZE, NULL) || !take_vec(&c, 1, 0, SESSION_ID_MAX, &v) ||
	    !take_vec(&c, 2, 2, SIZE_MAX, &v) || v.n % 2 != 0 || !take_vec(&c, 1, 1, SIZE_MAX, &v))
		return -EBADMSG;
	/* Extensions may be absent altogether (before TLS 1.2, RFC 5246 §7.4.1.2). */
	if (c.n == 0)
		return 1;
	if (!take_vec(&c, 2, 0, SIZE_MAX, &exts) || c.n != 0)
		return -EBADMSG;
	while (exts.n > 0) {
		if (!take_uint(&exts, 2, &type) || !take_vec(&exts, 2, 0, SIZE_MAX, &ext))
			return -EBADMSG;
		if (type != EXT_SERVER_NAME)
			continue;
		if (seen)
			return -EBADMSG;
		seen = true;
		r = parse_server_name(ext, sni);
		if (r < 0)
			return r;
	}
	return 1;
}

/* Checks what there is of a record header at buf[off..len). The first
 * record decides whether this is TLS at all (-EPROTO); a later one that is
 * not a handshake record breaks the ClientHello (-EBADMSG). */
static int check_record_start(const uint8_t *buf, size_t len, size_t off)
{
	int bad = off == 0 ? -EPROTO : -EBADMSG;

	if (len > off && buf[off] != REC_HANDSHAKE)
		return bad;
	if (len > off + 1 && buf[off + 1] != 3)
		return bad;
	return 0;
}

/* Reports that more bytes are needed: at least `total` in all. */
static int want_more(size_t total, size_t *need)
{
	if (total > HUTCH_TLS_HELLO_MAX)
		return -E2BIG;
	if (need)
		*need = total;
	return 0;
}

/* What the handshake bytes gathered so far say: -EPROTO if not a
 * ClientHello, -E2BIG if it announces more than fits, else 0 with the total
 * handshake length in *ret_want (0 while the header is incomplete). */
static int hello_length(const uint8_t *hs, size_t hs_len, size_t *ret_want)
{
	size_t body;

	if (hs_len >= 1 && hs[0] != HS_CLIENT_HELLO)
		return -EPROTO;
	if (hs_len < HS_HDR) {
		*ret_want = 0;
		return 0;
	}
	body = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
	if (HS_HDR + body > HS_MAX)
		return -E2BIG;
	*ret_want = HS_HDR + body;
	return 0;
}

/* Joins the payloads of the handshake records in buf into hs (HS_MAX
 * bytes) until the ClientHello is whole. Returns 1 with its length in
 * *ret_len, 0 with *need set when more bytes are needed, or -errno. */
static int gather_hello(const uint8_t *buf, size_t len, uint8_t *hs, size_t *ret_len, size_t *need)
{
	size_t off = 0, hs_len = 0, want = 0;

	for (;;) {
		size_t rlen, avail, after, total;
		int r = check_record_start(buf, len, off);

		if (r < 0)
			return r;
		/* Bytes still missing: this record's rest and, if the hello
		 * goes on beyond it, one more record header and the rest. */
		total = want ? want : HS_HDR;
		if (len - off < REC_HDR)
			return want_more(off + REC_HDR + (total - hs_len), need);
		rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (rlen == 0 || rlen > REC_PAYLOAD_MAX)
			return -EBADMSG;
		if (off + REC_HDR + rlen > HUTCH_TLS_HELLO_MAX)
			return -E2BIG;
		avail = len - off - REC_HDR < rlen ? len - off - REC_HDR : rlen;
		/* hs_len <= off, so hs_len + avail <= HUTCH_TLS_HELLO_MAX - REC_HDR. */
		memcpy(hs + hs_len, buf + off + REC_HDR, avail);
		hs_len += avail;
		r = hello_length(hs, hs_len, &want);
		if (r < 0)
			return r;
		if (want && hs_len >= want) {
			*ret_len = want;
			return 1;
		}
		if (avail < rlen) {
			after = hs_len + (rlen - avail);
			total = want ? want : HS_HDR;
			return want_more(off + REC_HDR + rlen +
			                         (total > after ? REC_HDR + total - after : 0),
			                 need);
		}
		off += REC_HDR + rlen;
	}
}

int hutch_tls_parse_client_hello(const uint8_t *buf, size_t len, char *sni, size_t sni_size,
                                 size_t *need)
{
	uint8_t hs[HS_MAX];
	char name[HOSTNAME_MAX + 1];
	size_t hs_len = 0;
	int r;

	if (sni_size < HOSTNAME_MAX + 1)
		return -EINVAL;
	r = gather_hello(buf, len, hs, &hs_len, need);
	if (r <= 0)
		return r;
	r = parse_hello((struct cur){ hs + HS_HDR, hs_len - HS_HDR }, name);
	if (r == 1)
		memcpy(sni, name, strlen(name) + 1);
	return r;
}
