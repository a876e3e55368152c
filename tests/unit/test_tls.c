/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the ClientHello parser: real hellos from openssl, the same
 * bytes arriving one at a time or spread over several records, and hellos
 * built here whose lengths lie, that are too large, or whose server name
 * breaks the rules; plain HTTP and SSLv2 are not TLS.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tls-fixtures.h"
#include "tls-internal.h"

#define SNI_SIZE 256

struct fixture {
	const uint8_t *buf;
	size_t len;
	const char *sni;
};

static const struct fixture fixtures[] = {
	{ fx_sni13, sizeof(fx_sni13), "example.com" },
	{ fx_nosni, sizeof(fx_nosni), "" },
	{ fx_sni12, sizeof(fx_sni12), "api.github.com" },
};

static int parse(const uint8_t *buf, size_t len, char *sni, size_t *need)
{
	return hutch_tls_parse_client_hello(buf, len, sni, SNI_SIZE, need);
}

/* Parses a copy of exactly len bytes on the heap, so ASan sees any read
 * past the end. */
static int parse_exact(const uint8_t *buf, size_t len, char *sni, size_t *need)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	memcpy(copy, buf, len);
	r = parse(copy, len, sni, need);
	free(copy);
	return r;
}

/* Re-frames a single-record hello: the handshake payload split into
 * records of the sizes in cuts (0-terminated; the rest goes last). */
static size_t reframe(const uint8_t *in, size_t len, const size_t *cuts, uint8_t *out)
{
	const uint8_t *p = in + 5;
	size_t left = len - 5, n = 0;

	for (size_t i = 0; left > 0; i++) {
		size_t k = cuts[i] && cuts[i] < left ? cuts[i] : left;

		memcpy(out + n, in, 3);
		out[n + 3] = (uint8_t)(k >> 8);
		out[n + 4] = (uint8_t)k;
		memcpy(out + n + 5, p, k);
		n += 5 + k;
		p += k;
		left -= k;
		if (!cuts[i])
			break;
	}
	return n;
}

/* Every prefix of a complete stream asks for more, with a need that is a
 * true lower bound; the whole stream gives the name. */
static void check_prefixes(const uint8_t *buf, size_t len, const char *want)
{
	char sni[SNI_SIZE];
	size_t need;

	for (size_t k = 0; k < len; k++) {
		need = 0;
		if (parse_exact(buf, k, sni, &need) != 0)
			fail_msg("prefix of %zu bytes (of %zu) not 0", k, len);
		assert_true(need > k);
		assert_true(need <= len);
		assert_true(need <= HUTCH_TLS_HELLO_MAX);
	}
	assert_int_equal(parse_exact(buf, len, sni, &need), 1);
	assert_string_equal(sni, want);
}

static void test_fixtures(void **state)
{
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++)
		check_prefixes(fixtures[i].buf, fixtures[i].len, fixtures[i].sni);
}

/* A reader that only ever reads up to `need` gets there. */
static void test_need_drives_reader(void **state)
{
	char sni[SNI_SIZE];
	size_t have = 0, need = 0, steps = 0;
	int r;

	while ((r = parse_exact(fx_sni13, have, sni, &need)) == 0) {
		assert_true(need > have);
		have = need;
		steps++;
	}
	assert_int_equal(r, 1);
	assert_true(steps <= 4);
	assert_string_equal(sni, "example.com");
}

static void test_split_records(void **state)
{
	uint8_t out[2048];
	size_t len;
	char sni[SNI_SIZE];
	size_t need;

	/* Two records, cut at every offset of the handshake payload. */
	for (size_t cut = 1; cut < sizeof(fx_sni13) - 5; cut++) {
		size_t cuts[] = { cut, 0 };

		len = reframe(fx_sni13, sizeof(fx_sni13), cuts, out);
		assert_int_equal(len, sizeof(fx_sni13) + 5);
		if (parse_exact(out, len, sni, &need) != 1)
			fail_msg("two records cut at %zu not parsed", cut);
		assert_string_equal(sni, "example.com");
	}
	/* Records of 1, 3 and 2 bytes (the handshake header spread over
	 * three records), then the rest; every prefix must wait. */
	{
		size_t cuts[] = { 1, 3, 2, 0 };

		len = reframe(fx_sni12, sizeof(fx_sni12), cuts, out);
		check_prefixes(out, len, "api.github.com");
	}
	/* Bytes after the hello in its last record are not looked at. */
	{
		uint8_t more[512];

		memcpy(more, fx_nosni, sizeof(fx_nosni));
		memset(more + sizeof(fx_nosni), 0xee, 7);
		more[4] = (uint8_t)(more[4] + 7);
		assert_int_equal(parse_exact(more, sizeof(fx_nosni) + 7, sni, &need), 1);
		assert_string_equal(sni, "");
	}
}

/* --- hellos built here ---------------------------------------------- */

struct buf {
	uint8_t b[40000];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put_uint(struct buf *b, size_t v, size_t bytes)
{
	for (size_t i = bytes; i-- > 0;) {
		uint8_t c = (uint8_t)(v >> (8 * i));

		put(b, &c, 1);
	}
}

/* A server_name extension with one entry of the given type and name. */
static void sni_ext(struct buf *b, uint8_t type, const char *name, size_t len)
{
	put_uint(b, 0, 2);
	put_uint(b, len + 5, 2);
	put_uint(b, len + 3, 2);
	put_uint(b, type, 1);
	put_uint(b, len, 2);
	put(b, name, len);
}

/* A complete hello in one record around the extensions block ext (none at
 * all if ext is NULL). */
static void hello(struct buf *out, const struct buf *ext)
{
	static const uint8_t fixed[] = { 3, 3 };
	struct buf *body = calloc(1, sizeof(*body));

	assert_non_null(body);
	put(body, fixed, 2);
	for (int i = 0; i < 32; i++)
		put_uint(body, (size_t)i, 1);
	put_uint(body, 0, 1);      /* session_id */
	put_uint(body, 2, 2);      /* cipher_suites */
	put_uint(body, 0x1301, 2); /* TLS_AES_128_GCM_SHA256 */
	put_uint(body, 1, 1);      /* compression_methods */
	put_uint(body, 0, 1);      /* null */
	if (ext) {
		put_uint(body, ext->n, 2);
		put(body, ext->b, ext->n);
	}
	out->n = 0;
	put_uint(out, 0x160301, 3);
	put_uint(out, body->n + 4, 2);
	put_uint(out, 1, 1);
	put_uint(out, body->n, 3);
	put(out, body->b, body->n);
	free(body);
}

/* The result of a hello whose only extension is server_name(type, name). */
static int hello_with_name(const char *name, size_t len, char *sni)
{
	struct buf *ext = calloc(1, sizeof(*ext)), *h = calloc(1, sizeof(*h));
	size_t need;
	int r;

	assert_true(ext && h);
	sni_ext(ext, 0, name, len);
	hello(h, ext);
	r = parse_exact(h->b, h->n, sni, &need);
	free(ext);
	free(h);
	return r;
}

static void test_names(void **state)
{
	char sni[SNI_SIZE], name[300];

	assert_int_equal(hello_with_name("Example.COM.", 12, sni), 1);
	assert_string_equal(sni, "example.com");
	assert_int_equal(hello_with_name("_a-b.c_d.e9", 11, sni), 1);
	assert_string_equal(sni, "_a-b.c_d.e9");

	assert_int_equal(hello_with_name("a..b", 4, sni), -EBADMSG);
	assert_int_equal(hello_with_name(".a", 2, sni), -EBADMSG);
	assert_int_equal(hello_with_name(".", 1, sni), -EBADMSG);
	assert_int_equal(hello_with_name("a.b..", 5, sni), -EBADMSG);
	assert_int_equal(hello_with_name("a b", 3, sni), -EBADMSG);
	assert_int_equal(hello_with_name("a\0b", 3, sni), -EBADMSG);
	assert_int_equal(hello_with_name("a*.b", 4, sni), -EBADMSG);
	assert_int_equal(hello_with_name("caf\xc3\xa9", 5, sni), -EBADMSG);
	assert_int_equal(hello_with_name("", 0, sni), -EBADMSG);

	/* Labels of 63 are fine, 64 is not. */
	memset(name, 'a', 64);
	assert_int_equal(hello_with_name(name, 63, sni), 1);
	assert_int_equal(strlen(sni), 63);
	assert_int_equal(hello_with_name(name, 64, sni), -EBADMSG);
	/* 253 characters are fine (254 with a trailing dot), 254 are not. */
	for (size_t i = 0; i < sizeof(name); i++)
		name[i] = i % 50 == 49 ? '.' : 'x';
	name[253] = '.';
	assert_int_equal(hello_with_name(name, 253, sni), 1);
	assert_int_equal(strlen(sni), 253);
	assert_int_equal(hello_with_name(name, 254, sni), 1);
	assert_int_equal(strlen(sni), 253);
	name[253] = 'x';
	assert_int_equal(hello_with_name(name, 254, sni), -EBADMSG);
}

static void test_server_name_list(void **state)
{
	struct buf *ext = calloc(1, sizeof(*ext)), *h = calloc(1, sizeof(*h));
	char sni[SNI_SIZE];
	size_t need;

	assert_true(ext && h);
	/* No extensions at all, and an empty extensions block. */
	hello(h, NULL);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), 1);
	assert_string_equal(sni, "");
	hello(h, ext);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), 1);
	/* Another extension first, then an unknown name type (skipped). */
	put_uint(ext, 0xff01, 2);
	put_uint(ext, 1, 2);
	put_uint(ext, 0, 1);
	sni_ext(ext, 7, "ignored", 7);
	hello(h, ext);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), 1);
	assert_string_equal(sni, "");
	/* Two server_name extensions. */
	sni_ext(ext, 0, "a.b", 3);
	sni_ext(ext, 0, "c.d", 3);
	hello(h, ext);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), -EBADMSG);
	/* Two host_names in one list. */
	ext->n = 0;
	put_uint(ext, 0, 2);
	put_uint(ext, 2 + 2 * 6, 2);
	put_uint(ext, 2 * 6, 2);
	put(ext, "\0\0\3a.b\0\0\3c.d", 12);
	hello(h, ext);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), -EBADMSG);
	/* An empty list. */
	ext->n = 0;
	put(ext, "\0\0\0\2\0\0", 6);
	hello(h, ext);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), -EBADMSG);
	free(ext);
	free(h);
}

/* Patches the big-endian field of `bytes` bytes at off by delta. */
static void patch(uint8_t *b, size_t off, size_t bytes, int delta)
{
	size_t v = 0;

	for (size_t i = 0; i < bytes; i++)
		v = v << 8 | b[off + i];
	v += (size_t)(long)delta;
	for (size_t i = bytes; i-- > 0; v >>= 8)
		b[off + i] = (uint8_t)v;
}

static void test_lying_lengths(void **state)
{
	struct buf *ext = calloc(1, sizeof(*ext)), *h = calloc(1, sizeof(*h));
	uint8_t copy[512];
	char sni[SNI_SIZE];
	size_t need, n;
	/* Offsets in a built hello: record 0, handshake 5, body 9, session_id
	 * 43, cipher_suites 44, compression 48, extensions 50, the
	 * server_name extension 52 (type, length 54, list 56, type 58, name
	 * length 59, name 61). */
	static const struct {
		size_t off, bytes;
		int delta, want;
	} lies[] = {
		{ 43, 1, +1, -EBADMSG }, { 43, 1, 33, -EBADMSG },    { 44, 2, -1, -EBADMSG },
		{ 44, 2, -2, -EBADMSG }, { 48, 1, -1, -EBADMSG },    { 50, 2, +1, -EBADMSG },
		{ 50, 2, -1, -EBADMSG }, { 54, 2, +1, -EBADMSG },    { 54, 2, -1, -EBADMSG },
		{ 56, 2, +1, -EBADMSG }, { 56, 2, -1, -EBADMSG },    { 59, 2, +1, -EBADMSG },
		{ 59, 2, -1, -EBADMSG }, { 9, 2, -0x100, -EBADMSG }, { 5, 1, +1, -EPROTO },
		{ 0, 1, +1, -EPROTO },   { 1, 1, +1, -EPROTO },
	};

	assert_true(ext && h);
	sni_ext(ext, 0, "host.example", 12);
	hello(h, ext);
	n = h->n;
	assert_true(n <= sizeof(copy));
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		memcpy(copy, h->b, n);
		patch(copy, lies[i].off, lies[i].bytes, lies[i].delta);
		if (parse_exact(copy, n, sni, &need) != lies[i].want)
			fail_msg("lie %zu not refused", i);
	}
	/* The handshake claims one byte less than the record holds: the
	 * hello ends before its extensions do. */
	memcpy(copy, h->b, n);
	patch(copy, 6, 3, -1);
	assert_int_equal(parse_exact(copy, n, sni, &need), -EBADMSG);
	/* The handshake claims more than the record: wait for the next one,
	 * and an alert there breaks the hello. */
	memcpy(copy, h->b, n);
	patch(copy, 6, 3, +10);
	assert_int_equal(parse_exact(copy, n, sni, &need), 0);
	assert_int_equal(need, n + 5 + 10);
	memcpy(copy + n, "\x15\x03\x03\x00\x02\x02\x28", 7);
	assert_int_equal(parse_exact(copy, n + 7, sni, &need), -EBADMSG);
	/* A record with a zero length. */
	assert_int_equal(parse_exact((const uint8_t *)"\x16\x03\x01\x00\x00", 5, sni, &need),
	                 -EBADMSG);
	free(ext);
	free(h);
}

static void test_too_big(void **state)
{
	struct buf *ext = calloc(1, sizeof(*ext)), *h = calloc(1, sizeof(*h));
	char sni[SNI_SIZE];
	size_t need;

	assert_true(ext && h);
	/* Record and handshake headers: a record longer than 2^14, hellos
	 * that announce more than HUTCH_TLS_HELLO_MAX, or more than fits once
	 * the second record's header is counted; the last one still fits. */
	static const struct {
		const char *bytes;
		size_t len;
		int want;
	} heads[] = {
		{ "\x16\x03\x01\x40\x01", 5, -EBADMSG },
		{ "\x16\x03\x01\x40\x00\x01\x00\x40\x0c", 9, -E2BIG },
		{ "\x16\x03\x01\x40\x00\x01\xff\xff\xff", 9, -E2BIG },
		{ "\x16\x03\x01\x40\x00\x01\x00\x40\x07", 9, -E2BIG },
		{ "\x16\x03\x01\x40\x00\x01\x00\x40\x00", 9, 0 },
	};

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		const uint8_t *b = (const uint8_t *)heads[i].bytes;

		if (parse_exact(b, heads[i].len, sni, &need) != heads[i].want)
			fail_msg("header %zu not refused", i);
	}
	assert_int_equal(need, 5 + 16384 + 5 + 4);
	/* The largest hello in one record is fine... */
	sni_ext(ext, 0, "big.example", 11);
	{
		/* Fill the record: 4 handshake header, 41 fixed body, 2
		 * extensions length; the padding extension takes the rest. */
		size_t target = 16384 - 4 - 41 - 2, pad = target - ext->n - 4;

		put_uint(ext, 21, 2);
		put_uint(ext, pad, 2);
		while (ext->n < target)
			put_uint(ext, 0, 1);
	}
	hello(h, ext);
	assert_int_equal(h->n, 5 + 16384);
	assert_int_equal(parse_exact(h->b, h->n, sni, &need), 1);
	assert_string_equal(sni, "big.example");
	/* ...one more byte of it needs a second record, and more records
	 * than the limit allows are -E2BIG as soon as it is known. */
	{
		uint8_t *two = malloc(HUTCH_TLS_HELLO_MAX + 100);
		size_t cuts[] = { 16384 - 64, 0 }, len;

		assert_non_null(two);
		len = reframe(h->b, h->n, cuts, two);
		assert_int_equal(parse_exact(two, len, sni, &need), 1);
		patch(two, 6, 3, +(HUTCH_TLS_HELLO_MAX - 16384 - 10 + 1));
		assert_int_equal(parse_exact(two, 5 + 16384 - 64, sni, &need), -E2BIG);
		free(two);
	}
	/* Many tiny records: the headers count towards the limit. */
	{
		uint8_t *many = malloc(6 * 4000);
		size_t n = 0;
		int r = 0;

		assert_non_null(many);
		for (size_t i = 0; i < 4000; i++, n += 6)
			memcpy(many + n,
			       i == 0 ? "\x16\x03\x01\x00\x01\x01" : "\x16\x03\x01\x00\x01\x00", 6);
		many[5 + 6 * 1] = 0x00;
		many[5 + 6 * 2] = 0x3f;
		many[5 + 6 * 3] = 0xff;
		for (size_t k = 6; k <= n && r == 0; k += 6)
			r = parse_exact(many, k, sni, &need);
		assert_int_equal(r, -E2BIG);
		free(many);
	}
	free(ext);
	free(h);
}

static void test_not_tls(void **state)
{
	static const char *http[] = { "G", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "CONNECT a:443",
		                      "\x16\x04", "\x15\x03\x03\x00\x02" };
	/* An SSLv2-style CLIENT-HELLO (two-byte header with the high bit). */
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15 };
	/* A ServerHello handshake message instead of a ClientHello. */
	static const uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0, 0, 0 };
	char sni[SNI_SIZE];
	size_t need;

	for (size_t i = 0; i < sizeof(http) / sizeof(http[0]); i++)
		assert_int_equal(parse_exact((const uint8_t *)http[i], strlen(http[i]), sni, &need),
		                 -EPROTO);
	assert_int_equal(parse_exact(sslv2, sizeof(sslv2), sni, &need), -EPROTO);
	assert_int_equal(parse_exact(sslv2, 1, sni, &need), -EPROTO);
	assert_int_equal(parse_exact(server_hello, 6, sni, &need), -EPROTO);
	/* A legacy_version other than 3.x inside a ClientHello. */
	{
		uint8_t b[400];

		memcpy(b, fx_nosni, sizeof(fx_nosni));
		b[9] = 2;
		assert_int_equal(parse_exact(b, sizeof(fx_nosni), sni, &need), -EBADMSG);
	}
	/* sni must have room for any name. */
	assert_int_equal(hutch_tls_parse_client_hello(fx_sni13, sizeof(fx_sni13), sni, 253, &need),
	                 -EINVAL);
}

/* On anything but 1 the name is left alone; on anything but 0 need is. */
static void test_outputs_untouched(void **state)
{
	char sni[SNI_SIZE] = "keep";
	size_t need = 12345;

	assert_int_equal(parse_exact((const uint8_t *)"GET", 3, sni, &need), -EPROTO);
	assert_int_equal(parse_exact(fx_sni13, 10, sni, &need), 0);
	assert_string_equal(sni, "keep");
	assert_int_equal(parse_exact(fx_sni13, sizeof(fx_sni13), sni, NULL), 1);
	assert_int_equal(parse_exact(fx_sni13, 10, sni, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),          cmocka_unit_test(test_need_drives_reader),
		cmocka_unit_test(test_split_records),     cmocka_unit_test(test_names),
		cmocka_unit_test(test_server_name_list),  cmocka_unit_test(test_lying_lengths),
		cmocka_unit_test(test_too_big),           cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_outputs_untouched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
