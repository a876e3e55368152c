/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the DNS stub's wire format: queries built here and as dig
 * sends them (EDNS OPT), replies and queries into buffers of every size,
 * and responses with CNAME chains, compression (loops, forward pointers,
 * too many hops), wrong ids and questions, NXDOMAIN and TC; every prefix of
 * a message is refused without reading past it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "dns-internal.h"

/* A message under construction. */
struct msg {
	uint8_t b[HUTCH_DNS_MSG_MAX + 512];
	size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void u8(struct msg *m, unsigned v)
{
	uint8_t c = (uint8_t)v;

	put(m, &c, 1);
}

static void u16(struct msg *m, unsigned v)
{
	u8(m, v >> 8);
	u8(m, v);
}

static void u32(struct msg *m, uint32_t v)
{
	u16(m, v >> 16);
	u16(m, v & 0xffff);
}

static void header(struct msg *m, unsigned id, unsigned flags, unsigned qd, unsigned an)
{
	m->n = 0;
	u16(m, id);
	u16(m, flags);
	u16(m, qd);
	u16(m, an);
	u16(m, 0);
	u16(m, 0);
}

/* A name in labels, no compression; "" is the root. Returns its offset. */
static size_t name(struct msg *m, const char *text)
{
	size_t at = m->n;

	while (*text) {
		size_t k = strcspn(text, ".");

		u8(m, (unsigned)k);
		put(m, text, k);
		text += k + (text[k] == '.');
	}
	u8(m, 0);
	return at;
}

static void pointer(struct msg *m, size_t to)
{
	u16(m, 0xc000u | (unsigned)to);
}

static void question(struct msg *m, const char *qname, unsigned type, unsigned class)
{
	name(m, qname);
	u16(m, type);
	u16(m, class);
}

/* A response to "a.b" A with id 1 and an answers, the first owned by the
 * question name through a pointer. */
static void ab_response(struct msg *m, unsigned an)
{
	header(m, 1, 0x8180, 1, an);
	question(m, "a.b", 1, 1);
	pointer(m, 12);
}

/* The fixed part of a record after its owner; rdlength is patched by
 * rr_end(). Returns where rdlength is. */
static size_t rr_start(struct msg *m, unsigned type, unsigned class, uint32_t ttl)
{
	u16(m, type);
	u16(m, class);
	u32(m, ttl);
	u16(m, 0);
	return m->n - 2;
}

static void rr_end(struct msg *m, size_t rdlen_at)
{
	size_t len = m->n - rdlen_at - 2;

	m->b[rdlen_at] = (uint8_t)(len >> 8);
	m->b[rdlen_at + 1] = (uint8_t)len;
}

static void a_record(struct msg *m, uint32_t ttl, const char *addr)
{
	size_t at = rr_start(m, HUTCH_DNS_TYPE_A, HUTCH_DNS_CLASS_IN, ttl);
	struct in_addr in;

	assert_int_equal(inet_pton(AF_INET, addr, &in), 1);
	put(m, &in, 4);
	rr_end(m, at);
}

static uint32_t ip(const char *addr)
{
	struct in_addr in;

	assert_int_equal(inet_pton(AF_INET, addr, &in), 1);
	return in.s_addr;
}

/* Heap copies of exactly len bytes, so ASan sees any read past the end. */
static int parse_query(const uint8_t *b, size_t len, struct hutch_dns_question *q)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	memcpy(copy, b, len);
	r = hutch_dns_parse_query(copy, len, q);
	free(copy);
	return r;
}

static int parse_response(const uint8_t *b, size_t len, uint16_t id, const char *qname,
                          struct hutch_dns_answer *a)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	memcpy(copy, b, len);
	r = hutch_dns_parse_response(copy, len, id, qname, HUTCH_DNS_TYPE_A, a);
	free(copy);
	return r;
}

/* --- queries ------------------------------------------------------------ */

static void test_query_round_trip(void **state)
{
	uint8_t out[512];
	struct hutch_dns_question q;
	size_t n = hutch_dns_build_query(0xbeef, "WWW.Example.com.", HUTCH_DNS_TYPE_AAAA, out,
	                                 sizeof(out));

	assert_int_equal(n, 12 + 17 + 4);
	assert_int_equal(parse_query(out, n, &q), 0);
	assert_int_equal(q.id, 0xbeef);
	assert_int_equal(q.flags, 0x0100);
	assert_string_equal(q.name, "www.example.com");
	assert_int_equal(q.qtype, HUTCH_DNS_TYPE_AAAA);
	assert_int_equal(q.qclass, HUTCH_DNS_CLASS_IN);
	assert_int_equal(q.end, n);
	/* The root. */
	n = hutch_dns_build_query(1, "", HUTCH_DNS_TYPE_A, out, sizeof(out));
	assert_int_equal(n, 12 + 1 + 4);
	assert_int_equal(parse_query(out, n, &q), 0);
	assert_string_equal(q.name, "");
	assert_int_equal(hutch_dns_build_query(1, ".", HUTCH_DNS_TYPE_A, out, sizeof(out)), n);
}

static void test_query_build_refused(void **state)
{
	static const char *bad[] = { "a..b", ".a", "a b", "a/b", "..", "a\xff", "x.-*", "café" };
	char big[300];
	uint8_t out[512];
	size_t full = hutch_dns_build_query(7, "example.org", HUTCH_DNS_TYPE_A, out, sizeof(out));

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (hutch_dns_build_query(1, bad[i], HUTCH_DNS_TYPE_A, out, sizeof(out)) != 0)
			fail_msg("'%s' encoded", bad[i]);
	memset(big, 'a', sizeof(big));
	big[64] = '\0';
	assert_int_equal(hutch_dns_build_query(1, big, HUTCH_DNS_TYPE_A, out, sizeof(out)), 0);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = i % 60 == 59 ? '.' : 'a';
	big[254] = '\0';
	assert_int_equal(hutch_dns_build_query(1, big, HUTCH_DNS_TYPE_A, out, sizeof(out)), 0);
	big[253] = '\0';
	assert_int_equal(hutch_dns_build_query(1, big, HUTCH_DNS_TYPE_A, out, sizeof(out)),
	                 12 + 255 + 4);
	/* Every buffer smaller than the query. */
	for (size_t sz = 0; sz < full; sz++) {
		uint8_t *tight = malloc(sz ? sz : 1);

		assert_non_null(tight);
		assert_int_equal(
		        hutch_dns_build_query(7, "example.org", HUTCH_DNS_TYPE_A, tight, sz), 0);
		free(tight);
	}
}

/* What `dig +cookie example.COM` sends: RD and AD set, one OPT record. */
static const uint8_t dig_query[] = {
	0x5a, 0x17, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x07,
	'e',  'x',  'a',  'm',  'p',  'l',  'e',  0x03, 'C',  'O',  'M',  0x00, 0x00,
	0x01, 0x00, 0x01, 0x00, 0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x0c, 0x00, 0x0a, 0x00, 0x08, 0x8a, 0x3c, 0x21, 0x53, 0x4d, 0xe2, 0x05, 0x6f,
};

static void test_query_edns(void **state)
{
	struct hutch_dns_question q;

	assert_int_equal(parse_query(dig_query, sizeof(dig_query), &q), 0);
	assert_int_equal(q.id, 0x5a17);
	assert_int_equal(q.flags, 0x0120);
	assert_string_equal(q.name, "example.com");
	assert_int_equal(q.qtype, HUTCH_DNS_TYPE_A);
	assert_int_equal(q.end, 29);
	/* Every prefix that cuts the header or question is malformed; the
	 * additional section is not looked at. */
	for (size_t k = 0; k < sizeof(dig_query); k++)
		assert_int_equal(parse_query(dig_query, k, &q), k < 29 ? -EBADMSG : 0);
}

static void test_query_refused(void **state)
{
	struct msg m;
	struct hutch_dns_question q;
	char label[64];

	/* A compression pointer, even a valid backwards one. */
	header(&m, 1, 0, 1, 0);
	pointer(&m, 12);
	u16(&m, 1);
	u16(&m, 1);
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	/* Labels of type 0x40 and 0x80. */
	header(&m, 1, 0, 1, 0);
	put(&m, "\x41x\0\0\1\0\1", 7);
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	m.b[12] = 0x81;
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	/* A label of 64, a name of 254, bytes that are no host name. */
	memset(label, 'a', sizeof(label));
	header(&m, 1, 0, 1, 0);
	u8(&m, 64);
	put(&m, label, 64);
	question(&m, "", 1, 1);
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	header(&m, 1, 0, 1, 0);
	for (int i = 0; i < 4; i++) {
		u8(&m, 63);
		put(&m, label, 63);
	}
	question(&m, "a", 1, 1); /* 4 * 64 + 1 = 257 characters */
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	header(&m, 1, 0, 1, 0);
	for (int i = 0; i < 3; i++) {
		u8(&m, 63);
		put(&m, label, 63);
	}
	u8(&m, 61);
	put(&m, label, 61);
	question(&m, "", 1, 1); /* 3 * 64 + 61 = 253 */
	assert_int_equal(parse_query(m.b, m.n, &q), 0);
	assert_int_equal(strlen(q.name), 253);
	m.b[12 + 3 * 64] = 62;
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	header(&m, 1, 0, 1, 0);
	question(&m, "a.b\x01.c", 1, 1);
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	header(&m, 1, 0, 1, 0);
	put(&m, "\3a.b\0\0\1\0\1", 9); /* a '.' inside a label */
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
	/* Too large. */
	header(&m, 1, 0, 1, 0);
	question(&m, "a", 1, 1);
	m.n = HUTCH_DNS_MSG_MAX + 1;
	assert_int_equal(parse_query(m.b, m.n, &q), -EBADMSG);
}

static void test_query_not_served(void **state)
{
	static const struct {
		unsigned flags, qd, an;
	} cases[] = {
		{ 0x8100, 1, 0 }, /* a response */
		{ 0x2000, 1, 0 }, /* opcode 4, NOTIFY */
		{ 0x0100, 0, 0 }, { 0x0100, 2, 0 }, { 0x0100, 1, 1 },
	};
	struct msg m;
	struct hutch_dns_question q;
	uint8_t out[512];
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		header(&m, 0x4242, cases[i].flags, cases[i].qd, cases[i].an);
		question(&m, "example.com", 1, 1);
		memset(&q, 0xaa, sizeof(q));
		assert_int_equal(parse_query(m.b, m.n, &q), -ENOTSUP);
		assert_int_equal(q.id, 0x4242);
		assert_int_equal(q.flags, cases[i].flags);
		assert_int_equal(q.qtype, 0);
		/* The reply carries no question and no answer. */
		n = hutch_dns_build_reply(&q, HUTCH_DNS_RCODE_NOTIMP, NULL, 0, 0, out, sizeof(out));
		assert_int_equal(n, 12);
		assert_memory_equal(out, "\x42\x42", 2);
		assert_int_equal(out[3] & 0xf, HUTCH_DNS_RCODE_NOTIMP);
		assert_int_equal(out[2] & 0x80, 0x80);
		assert_int_equal(out[2] & 0x78, cases[i].flags >> 8 & 0x78);
		assert_memory_equal(out + 4, "\0\0\0\0\0\0\0\0", 8);
	}
	/* A short header leaves q alone. */
	memset(&q, 0xaa, sizeof(q));
	assert_int_equal(parse_query(m.b, 11, &q), -EBADMSG);
	assert_int_equal(q.id, 0xaaaa);
}

/* --- replies ------------------------------------------------------------ */

static void test_reply_round_trip(void **state)
{
	struct hutch_dns_question q;
	struct hutch_dns_answer a;
	uint32_t addrs[] = { ip("192.0.2.1"), ip("198.51.100.7") };
	uint8_t out[512];
	size_t n;

	assert_int_equal(parse_query(dig_query, sizeof(dig_query), &q), 0);
	n = hutch_dns_build_reply(&q, HUTCH_DNS_RCODE_NOERROR, addrs, 2, 60, out, sizeof(out));
	assert_int_equal(n, 12 + 13 + 4 + 2 * 16);
	assert_memory_equal(out, "\x5a\x17\x81\x80\0\1\0\2\0\0\0\0", 12);
	assert_int_equal(parse_response(out, n, 0x5a17, "Example.com.", &a), 0);
	assert_int_equal(a.rcode, 0);
	assert_false(a.truncated);
	assert_int_equal(a.naddrs, 2);
	assert_int_equal(a.addrs[0], addrs[0]);
	assert_int_equal(a.addrs[1], addrs[1]);
	assert_int_equal(a.ttl, 60);
	/* NXDOMAIN, without addresses. */
	n = hutch_dns_build_reply(&q, HUTCH_DNS_RCODE_NXDOMAIN, NULL, 0, 0, out, sizeof(out));
	assert_int_equal(n, 12 + 13 + 4);
	assert_int_equal(parse_response(out, n, 0x5a17, "example.com", &a), 0);
	assert_int_equal(a.rcode, HUTCH_DNS_RCODE_NXDOMAIN);
	assert_int_equal(a.naddrs, 0);
	assert_int_equal(a.ttl, 0);
}

static void test_reply_small_buffers(void **state)
{
	struct hutch_dns_question q;
	uint32_t addrs[3] = { ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3") };
	uint8_t out[512];
	size_t full;

	assert_int_equal(parse_query(dig_query, sizeof(dig_query), &q), 0);
	full = hutch_dns_build_reply(&q, 0, addrs, 3, 1, out, sizeof(out));
	assert_int_equal(full, 12 + 17 + 48);
	for (size_t sz = 0; sz < full; sz++) {
		uint8_t *tight = malloc(sz ? sz : 1);

		assert_non_null(tight);
		assert_int_equal(hutch_dns_build_reply(&q, 0, addrs, 3, 1, tight, sz), 0);
		free(tight);
	}
	/* A name the caller broke, and more addresses than ancount holds. */
	strcpy(q.name, "a..b");
	assert_int_equal(hutch_dns_build_reply(&q, 0, addrs, 1, 1, out, sizeof(out)), 0);
	strcpy(q.name, "a.b");
	assert_int_equal(hutch_dns_build_reply(&q, 0, addrs, (size_t)1 << 20, 1, out, sizeof(out)),
	                 0);
	assert_int_equal(hutch_dns_build_reply(&q, 0, addrs, SIZE_MAX, 1, out, sizeof(out)), 0);
}

/* --- responses ---------------------------------------------------------- */

/* One label, to be followed by more labels or a pointer. */
static void label(struct msg *m, const char *text)
{
	u8(m, (unsigned)strlen(text));
	put(m, text, strlen(text));
}

/* Six answers to www.example.com A, compressed as servers do: an unrelated
 * A record, www.example.com CNAME edge.cdn.net, edge.cdn.net CNAME
 * b.cdn.net, two A records of b.cdn.net (TTL 300 and 30) and a CH-class
 * one that does not count. */
static void cname_response(struct msg *m, unsigned flags)
{
	size_t cdn, b, at;

	header(m, 0x1234, flags, 1, 6);
	question(m, "WWW.example.com", 1, 1);
	label(m, "unrelated");
	pointer(m, 12 + 4);
	a_record(m, 5, "203.0.113.99");
	pointer(m, 12);
	at = rr_start(m, 5, 1, 100);
	label(m, "edge");
	cdn = m->n;
	name(m, "cdn.net");
	rr_end(m, at);
	pointer(m, cdn - 5);
	at = rr_start(m, 5, 1, 200);
	b = m->n;
	label(m, "b");
	pointer(m, cdn);
	rr_end(m, at);
	pointer(m, b);
	a_record(m, 300, "192.0.2.10");
	pointer(m, b);
	a_record(m, 30, "192.0.2.11");
	pointer(m, b);
	at = rr_start(m, 1, 3, 1);
	put(m, "\1\2\3\4", 4);
	rr_end(m, at);
}

static void test_response_cname_chain(void **state)
{
	struct msg m;
	struct hutch_dns_answer a;

	cname_response(&m, 0x8180);
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "www.EXAMPLE.com", &a), 0);
	assert_int_equal(a.rcode, 0);
	assert_int_equal(a.naddrs, 2);
	assert_int_equal(a.addrs[0], ip("192.0.2.10"));
	assert_int_equal(a.addrs[1], ip("192.0.2.11"));
	assert_int_equal(a.ttl, 30);
	/* Truncated anywhere: malformed, never a read past the end. */
	for (size_t k = 0; k < m.n; k++)
		if (parse_response(m.b, k, 0x1234, "www.example.com", &a) != -EBADMSG)
			fail_msg("prefix of %zu bytes not -EBADMSG", k);
	/* With TC set the walk stops where the message does. */
	cname_response(&m, 0x8380);
	for (size_t k = m.n - 40; k < m.n; k++) {
		assert_int_equal(parse_response(m.b, k, 0x1234, "www.example.com", &a), 0);
		assert_true(a.truncated);
		assert_int_equal(a.naddrs, k >= m.n - 16 ? 2 : k >= m.n - 32 ? 1 : 0);
	}
}

static void test_response_wrong(void **state)
{
	struct msg m;
	struct hutch_dns_answer a = { .rcode = 99 };

	cname_response(&m, 0x8180);
	assert_int_equal(parse_response(m.b, m.n, 0x1235, "www.example.com", &a), -ESRCH);
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "example.com", &a), -ESRCH);
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "www.example.com.x", &a), -ESRCH);
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "bad..name", &a), -ESRCH);
	assert_int_equal(hutch_dns_parse_response(m.b, m.n, 0x1234, "www.example.com",
	                                          HUTCH_DNS_TYPE_AAAA, &a),
	                 -ESRCH);
	assert_int_equal(a.rcode, 99);
	m.b[2] &= 0x7f; /* QR clear */
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "www.example.com", &a), -ESRCH);
	m.b[2] |= 0x80 | 0x28; /* opcode 5 */
	assert_int_equal(parse_response(m.b, m.n, 0x1234, "www.example.com", &a), -ESRCH);
	header(&m, 1, 0x8180, 1, 0);
	question(&m, "a.b", 1, 3); /* class CH */
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -ESRCH);
	header(&m, 1, 0x8180, 0, 0); /* no question (FORMERR style) */
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -ESRCH);
}

static void test_response_nxdomain_tc(void **state)
{
	struct msg m;
	struct hutch_dns_answer a;

	header(&m, 9, 0x8183, 1, 0);
	question(&m, "nope.example", 1, 1);
	assert_int_equal(parse_response(m.b, m.n, 9, "nope.example", &a), 0);
	assert_int_equal(a.rcode, HUTCH_DNS_RCODE_NXDOMAIN);
	assert_int_equal(a.naddrs, 0);
	assert_false(a.truncated);
	/* TC, the answers announced but cut off. */
	header(&m, 9, 0x8380, 1, 3);
	question(&m, "big.example", 1, 1);
	pointer(&m, 12);
	a_record(&m, 10, "192.0.2.1");
	pointer(&m, 12);
	assert_int_equal(parse_response(m.b, m.n, 9, "big.example", &a), 0);
	assert_true(a.truncated);
	assert_int_equal(a.naddrs, 1);
	/* Without TC the same is malformed. */
	m.b[2] = 0x81;
	assert_int_equal(parse_response(m.b, m.n, 9, "big.example", &a), -EBADMSG);
}

static void test_response_pointers(void **state)
{
	struct msg m;
	struct hutch_dns_answer a;
	size_t at;

	/* A pointer to itself, forward, into the header, past the end. */
	static const unsigned targets[] = { 0, 1, 2, 11, 0x3fff };

	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		header(&m, 1, 0x8180, 1, 1);
		question(&m, "a.b", 1, 1);
		at = m.n;
		pointer(&m, targets[i] == 0 ? at : targets[i] == 1 ? at + 2 : targets[i]);
		a_record(&m, 1, "192.0.2.1");
		assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -EBADMSG);
	}
	/* Two pointers that point at each other. */
	header(&m, 1, 0x8180, 1, 1);
	question(&m, "a.b", 1, 1);
	at = m.n;
	pointer(&m, at + 2);
	pointer(&m, at);
	a_record(&m, 1, "192.0.2.1");
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -EBADMSG);
	/* A chain of 16 backward hops is followed, 17 are too many. */
	for (unsigned hops = 16; hops <= 17; hops++) {
		header(&m, 1, 0x8180, 1, 1);
		question(&m, "a.b", 1, 1);
		/* Hop targets live in a CNAME-free record's rdata: an
		 * unused TXT record before the answer. */
		m.b[7] = 2;
		u16(&m, 0xc00c);
		at = rr_start(&m, 16, 1, 1);
		{
			size_t prev = 12;

			for (unsigned h = 1; h < hops; h++) {
				size_t here = m.n;

				pointer(&m, prev);
				prev = here;
			}
			rr_end(&m, at);
			pointer(&m, prev);
		}
		a_record(&m, 1, "192.0.2.1");
		assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), hops == 16 ? 0 : -EBADMSG);
		if (hops == 16)
			assert_int_equal(a.naddrs, 1);
	}
}

static void test_response_limits(void **state)
{
	struct msg m;
	struct hutch_dns_answer a;
	size_t at;

	/* More A records than kept (the rest do not count for the TTL), one
	 * with a TTL over 2^31 (counts as 0). */
	header(&m, 1, 0x8180, 1, 20);
	question(&m, "many.example", 1, 1);
	for (int i = 0; i < 20; i++) {
		pointer(&m, 12);
		a_record(&m, i == 3 ? 0x80000000u : 50, "192.0.2.1");
	}
	assert_int_equal(parse_response(m.b, m.n, 1, "many.example", &a), 0);
	assert_int_equal(a.naddrs, HUTCH_DNS_ADDRS_MAX);
	assert_int_equal(a.ttl, 0);
	/* An A record of 5 bytes. */
	ab_response(&m, 1);
	at = rr_start(&m, 1, 1, 1);
	put(&m, "\1\2\3\4\5", 5);
	rr_end(&m, at);
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -EBADMSG);
	/* A CNAME whose target runs past its rdata. */
	ab_response(&m, 1);
	at = rr_start(&m, 5, 1, 1);
	name(&m, "c.d");
	rr_end(&m, at);
	m.b[at + 1] -= 1;
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), -EBADMSG);
	/* A CNAME loop ends the walk; the A record on the way is kept. */
	ab_response(&m, 3);
	at = rr_start(&m, 5, 1, 1);
	name(&m, "c.d");
	rr_end(&m, at);
	name(&m, "c.d");
	at = rr_start(&m, 5, 1, 1);
	pointer(&m, 12);
	rr_end(&m, at);
	name(&m, "c.d");
	a_record(&m, 7, "192.0.2.5");
	assert_int_equal(parse_response(m.b, m.n, 1, "a.b", &a), 0);
	assert_int_equal(a.naddrs, 1);
	assert_int_equal(a.ttl, 1);
	/* A chain longer than 8 links stops after 8. */
	header(&m, 1, 0x8180, 1, 11);
	question(&m, "n0", 1, 1);
	for (int i = 0; i < 10; i++) {
		char own[8], target[8];

		snprintf(own, sizeof(own), "n%d", i);
		snprintf(target, sizeof(target), "n%d", i + 1);
		name(&m, own);
		at = rr_start(&m, 5, 1, 1);
		name(&m, target);
		rr_end(&m, at);
	}
	name(&m, "n10");
	a_record(&m, 1, "192.0.2.9");
	assert_int_equal(parse_response(m.b, m.n, 1, "n0", &a), 0);
	assert_int_equal(a.naddrs, 0);
	m.b[14] = '2'; /* the question asks for n2: 8 links reach n10 */
	assert_int_equal(parse_response(m.b, m.n, 1, "n2", &a), 0);
	assert_int_equal(a.naddrs, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_round_trip),
		cmocka_unit_test(test_query_build_refused),
		cmocka_unit_test(test_query_edns),
		cmocka_unit_test(test_query_refused),
		cmocka_unit_test(test_query_not_served),
		cmocka_unit_test(test_reply_round_trip),
		cmocka_unit_test(test_reply_small_buffers),
		cmocka_unit_test(test_response_cname_chain),
		cmocka_unit_test(test_response_wrong),
		cmocka_unit_test(test_response_nxdomain_tc),
		cmocka_unit_test(test_response_pointers),
		cmocka_unit_test(test_response_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
