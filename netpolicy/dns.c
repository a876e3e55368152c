/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DNS wire format (RFC 1035 §4) for the allow-mode DNS stub and the
 * supervisor's resolver: queries from inside a sandbox are parsed and
 * answered, queries to the upstream server are built and its answers
 * parsed. Both directions are hostile.
 *
 * The bounds: messages up to HUTCH_DNS_MSG_MAX bytes; names decode to at
 * most 253 characters of letters, digits, '-' and '_' (hostname-internal.h)
 * in labels of 1..63; a query may not use compression at all, a response
 * may, but each pointer must point strictly before itself (so pointers
 * cannot loop) and past the header, at most PTR_HOPS_MAX per name. The
 * CNAME chain is followed at most CNAME_CHAIN_MAX links, each link one pass
 * over the answer section, so a response costs at most
 * (CNAME_CHAIN_MAX + 1) x (answers) x (one bounded name decode). libc only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dns-internal.h"
#include "hostname-internal.h"

#define HDR_SIZE        12
#define RR_FIXED        10 /* type, class, ttl, rdlength */
#define A_RR_SIZE       16 /* pointer, fixed part, IPv4 address */
#define PTR_HOPS_MAX    16
#define CNAME_CHAIN_MAX 8
#define TYPE_CNAME      5
#define TTL_MAX         0x7fffffffu /* RFC 2181 §8: larger TTLs count as 0 */

#define FLAG_QR        0x8000u
#define FLAG_OPCODE    0x7800u
#define FLAG_TC        0x0200u
#define FLAG_RD        0x0100u
#define FLAG_RA        0x0080u
#define FLAG_RCODE     0x000fu
#define LABEL_PTR      0xc0u
#define PTR_OFFSET_MAX 0x3fffu

_Static_assert(HOSTNAME_MAX == HUTCH_DNS_NAME_MAX, "one name limit");

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* Decodes the name at msg[off] into out (HUTCH_DNS_NAME_MAX + 1 bytes),
 * lowercased, "" for the root. *ret_end is the offset just past the name's
 * bytes at off (past the first pointer if there is one). Pointers are
 * refused unless ptrs is set. */
static int name_read(const uint8_t *msg, size_t len, size_t off, bool ptrs, char *out,
                     size_t *ret_end)
{
	size_t pos = off, end = 0, n = 0;
	unsigned hops = 0;

	for (;;) {
		size_t c;

		if (pos >= len)
			return -EBADMSG;
		c = msg[pos];
		if ((c & LABEL_PTR) == LABEL_PTR) {
			size_t target;

			if (!ptrs || pos + 1 >= len || ++hops > PTR_HOPS_MAX)
				return -EBADMSG;
			target = (c & ~LABEL_PTR) << 8 | msg[pos + 1];
			if (target < HDR_SIZE || target >= pos)
				return -EBADMSG;
			if (end == 0)
				end = pos + 2;
			pos = target;
			continue;
		}
		/* 0x40 and 0x80 are the extended and reserved label types. */
		if (c & LABEL_PTR)
			return -EBADMSG;
		if (c == 0)
			break;
		if (c > len - pos - 1 || n + (n > 0) + c > HUTCH_DNS_NAME_MAX)
			return -EBADMSG;
		if (n > 0)
			out[n++] = '.';
		for (size_t i = 1; i <= c; i++) {
			if (!hostname_char_ok(msg[pos + i]))
				return -EBADMSG;
			out[n++] = hostname_lower(msg[pos + i]);
		}
		pos += 1 + c;
	}
	out[n] = '\0';
	*ret_end = end ? end : pos + 1;
	return 0;
}

/* Encodes a text name (checked, lowercased, one trailing dot allowed) into
 * out. Returns the bytes written, or 0 if the name is invalid or out too
 * small. */
static size_t name_write(const char *text, uint8_t *out, size_t outsz)
{
	char name[HUTCH_DNS_NAME_MAX + 1];
	int n = hostname_normalize(text, strnlen(text, HUTCH_DNS_NAME_MAX + 2), name);
	size_t label = 0;

	/* n characters become n + 2 bytes: the first length, one per dot,
	 * the final 0; the root is the final 0 alone. */
	if (n < 0 || outsz < 1 || (n > 0 && (size_t)n + 2 > outsz))
		return 0;
	if (n == 0) {
		out[0] = 0;
		return 1;
	}
	for (int i = 0; i <= n; i++) {
		if (i == n || name[i] == '.') {
			out[label] = (uint8_t)(i - label);
			label = (size_t)i + 1;
		} else {
			out[i + 1] = (uint8_t)name[i];
		}
	}
	out[n + 1] = 0;
	return (size_t)n + 2;
}

/* The question at msg[off]: name, type, class; *ret_end just past it. */
static int question_read(const uint8_t *msg, size_t len, size_t off, bool ptrs, char *name,
                         uint16_t *ret_type, uint16_t *ret_class, size_t *ret_end)
{
	size_t end;
	int r = name_read(msg, len, off, ptrs, name, &end);

	if (r < 0)
		return r;
	if (len - end < 4)
		return -EBADMSG;
	*ret_type = get16(msg + end);
	*ret_class = get16(msg + end + 2);
	*ret_end = end + 4;
	return 0;
}

int hutch_dns_parse_query(const uint8_t *msg, size_t len, struct hutch_dns_question *q)
{
	struct hutch_dns_question t = { 0 };
	int r;

	if (len < HDR_SIZE || len > HUTCH_DNS_MSG_MAX)
		return -EBADMSG;
	t.id = get16(msg);
	t.flags = get16(msg + 2);
	t.end = HDR_SIZE;
	/* A response, another opcode, not exactly one question, or records
	 * in the answer or authority section: nothing the stub serves. */
	if ((t.flags & (FLAG_QR | FLAG_OPCODE)) || get16(msg + 4) != 1 || get16(msg + 6) != 0 ||
	    get16(msg + 8) != 0) {
		*q = t;
		return -ENOTSUP;
	}
	r = question_read(msg, len, HDR_SIZE, false, t.name, &t.qtype, &t.qclass, &t.end);
	if (r < 0)
		return r;
	*q = t;
	return 0;
}

size_t hutch_dns_build_reply(const struct hutch_dns_question *q, int rcode, const uint32_t *addrs,
                             size_t naddrs, uint32_t ttl, uint8_t *out, size_t outsz)
{
	bool has_question = q->qtype != 0;
	size_t pos = HDR_SIZE, n;

	if (!has_question)
		naddrs = 0;
	if (outsz < HDR_SIZE)
		return 0;
	if (has_question) {
		n = name_write(q->name, out + pos, outsz - pos);
		if (n == 0 || outsz - pos - n < 4)
			return 0;
		pos += n;
		put16(out + pos, q->qtype);
		put16(out + pos + 2, q->qclass);
		pos += 4;
	}
	if (naddrs > UINT16_MAX || naddrs > (outsz - pos) / A_RR_SIZE)
		return 0;
	for (size_t i = 0; i < naddrs; i++, pos += A_RR_SIZE) {
		/* The owner is the question name, always at the header's end. */
		put16(out + pos, LABEL_PTR << 8 | HDR_SIZE);
		put16(out + pos + 2, HUTCH_DNS_TYPE_A);
		put16(out + pos + 4, HUTCH_DNS_CLASS_IN);
		put32(out + pos + 6, ttl);
		put16(out + pos + 10, 4);
		memcpy(out + pos + 12, &addrs[i], 4);
	}
	put16(out, q->id);
	put16(out + 2, (uint16_t)(FLAG_QR | (q->flags & (FLAG_OPCODE | FLAG_RD)) | FLAG_RA |
	                          ((unsigned)rcode & FLAG_RCODE)));
	put16(out + 4, has_question);
	put16(out + 6, (uint16_t)naddrs);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return pos;
}

size_t hutch_dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out,
                             size_t outsz)
{
	size_t n;

	if (outsz < HDR_SIZE)
		return 0;
	n = name_write(name, out + HDR_SIZE, outsz - HDR_SIZE);
	if (n == 0 || outsz - HDR_SIZE - n < 4)
		return 0;
	put16(out, id);
	put16(out + 2, FLAG_RD);
	put16(out + 4, 1);
	memset(out + 6, 0, 6);
	put16(out + HDR_SIZE + n, qtype);
	put16(out + HDR_SIZE + n + 2, HUTCH_DNS_CLASS_IN);
	return HDR_SIZE + n + 4;
}

/* One resource record of the answer section. */
struct rr {
	char owner[HUTCH_DNS_NAME_MAX + 1];
	uint16_t type, class;
	uint32_t ttl;
	size_t rdata, rdlen; /* offset and length of the data */
};

static int rr_read(const uint8_t *msg, size_t len, size_t off, struct rr *rr, size_t *ret_end)
{
	size_t p;
	int r = name_read(msg, len, off, true, rr->owner, &p);

	if (r < 0)
		return r;
	if (len - p < RR_FIXED)
		return -EBADMSG;
	rr->type = get16(msg + p);
	rr->class = get16(msg + p + 2);
	rr->ttl = get32(msg + p + 4);
	rr->rdlen = get16(msg + p + 8);
	rr->rdata = p + RR_FIXED;
	if (len - rr->rdata < rr->rdlen)
		return -EBADMSG;
	*ret_end = rr->rdata + rr->rdlen;
	return 0;
}

static void use_ttl(struct hutch_dns_answer *a, uint32_t ttl, bool *ttl_set)
{
	if (ttl > TTL_MAX)
		ttl = 0;
	if (!*ttl_set || ttl < a->ttl)
		a->ttl = ttl;
	*ttl_set = true;
}

/* One pass over the answer section at msg[off]: keeps the A records owned
 * by `owner` and returns the target of its CNAME record in next ("" if
 * none). In a truncated response (TC) the walk stops quietly at the first
 * record that does not parse; otherwise that is -EBADMSG. */
static int answers_scan(const uint8_t *msg, size_t len, size_t off, unsigned count,
                        const char *owner, char *next, struct hutch_dns_answer *a, bool *ttl_set)
{
	struct rr rr;
	size_t end;

	next[0] = '\0';
	for (unsigned i = 0; i < count; i++, off = end) {
		if (rr_read(msg, len, off, &rr, &end) < 0)
			return a->truncated ? 0 : -EBADMSG;
		if (rr.class != HUTCH_DNS_CLASS_IN || strcmp(rr.owner, owner) != 0)
			continue;
		if (rr.type == HUTCH_DNS_TYPE_A) {
			if (rr.rdlen != 4)
				return -EBADMSG;
			if (a->naddrs < HUTCH_DNS_ADDRS_MAX) {
				memcpy(&a->addrs[a->naddrs++], msg + rr.rdata, 4);
				use_ttl(a, rr.ttl, ttl_set);
			}
		} else if (rr.type == TYPE_CNAME && next[0] == '\0') {
			if (name_read(msg, len, rr.rdata, true, next, &end) < 0 ||
			    end != rr.rdata + rr.rdlen)
				return -EBADMSG;
			use_ttl(a, rr.ttl, ttl_set);
		}
	}
	return 0;
}

/* Follows name through the CNAME chain of the answer section, collecting the
 * A records of every name on it. A loop or a chain longer than
 * CNAME_CHAIN_MAX ends the walk with what was found so far. */
static int answers_collect(const uint8_t *msg, size_t len, size_t off, unsigned count,
                           const char *name, struct hutch_dns_answer *a)
{
	char chain[CNAME_CHAIN_MAX + 1][HUTCH_DNS_NAME_MAX + 1];
	char next[HUTCH_DNS_NAME_MAX + 1];
	bool ttl_set = false;

	memcpy(chain[0], name, strlen(name) + 1);
	for (size_t step = 0;; step++) {
		int r = answers_scan(msg, len, off, count, chain[step], next, a, &ttl_set);

		if (r < 0)
			return r;
		if (next[0] == '\0' || step == CNAME_CHAIN_MAX)
			return 0;
		for (size_t i = 0; i <= step; i++)
			if (strcmp(chain[i], next) == 0)
				return 0;
		memcpy(chain[step + 1], next, sizeof(next));
	}
}

int hutch_dns_parse_response(const uint8_t *msg, size_t len, uint16_t id, const char *name,
                             uint16_t qtype, struct hutch_dns_answer *ret)
{
	struct hutch_dns_answer a = { 0 };
	char want[HUTCH_DNS_NAME_MAX + 1], got[HUTCH_DNS_NAME_MAX + 1];
	uint16_t flags, type, class;
	size_t off;
	int r;

	if (len < HDR_SIZE || len > HUTCH_DNS_MSG_MAX)
		return -EBADMSG;
	/* An invalid name cannot have been asked, so nothing answers it. */
	if (hostname_normalize(name, strnlen(name, HUTCH_DNS_NAME_MAX + 2), want) < 0)
		return -ESRCH;
	flags = get16(msg + 2);
	if (get16(msg) != id || !(flags & FLAG_QR) || (flags & FLAG_OPCODE) || get16(msg + 4) != 1)
		return -ESRCH;
	r = question_read(msg, len, HDR_SIZE, true, got, &type, &class, &off);
	if (r < 0)
		return r;
	if (strcmp(got, want) != 0 || type != qtype || class != HUTCH_DNS_CLASS_IN)
		return -ESRCH;
	a.rcode = flags & FLAG_RCODE;
	a.truncated = flags & FLAG_TC;
	r = answers_collect(msg, len, off, get16(msg + 6), want, &a);
	if (r < 0)
		return r;
	*ret = a;
	return 0;
}
