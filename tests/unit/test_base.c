/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the base library: number parsing, sandbox ids, UTF-8
 * repair, the bounded buffer, time formatting, error messages, base64, and
 * the file helpers on a private temporary directory (no root needed).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "base64.h"
#include "cjson-dl.h"
#include "error.h"
#include "fdutil.h"
#include "frame.h"
#include "ring.h"
#include "util.h"

#define FFFD "\xef\xbf\xbd"

static void test_parse_u64(void **state)
{
	static const char *const bad[] = { "", " 1", "1 ", "+1", "-1", "1s", "0x10", "1.0", "1e3" };
	uint64_t v = 7;

	(void)state;
	assert_int_equal(hutch_parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(hutch_parse_u64("007", 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(hutch_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(hutch_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(hutch_parse_u64("11", 0, 10, &v), -ERANGE);
	assert_int_equal(hutch_parse_u64("4", 5, 10, &v), -ERANGE);
	v = 42;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(hutch_parse_u64(bad[i], 0, UINT64_MAX, &v), -EINVAL);
	assert_int_equal(hutch_parse_u64(NULL, 0, 10, &v), -EINVAL);
	assert_int_equal(v, 42); /* untouched on failure */
}

static void test_ids(void **state)
{
	char a[HUTCH_ID_LEN + 1], b[HUTCH_ID_LEN + 1];

	(void)state;
	assert_true(hutch_id_is_valid("0123456789ab"));
	assert_true(hutch_id_is_valid("ffffffffffff"));
	assert_false(hutch_id_is_valid("0123456789a"));
	assert_false(hutch_id_is_valid("0123456789abc"));
	assert_false(hutch_id_is_valid("0123456789AB"));
	assert_false(hutch_id_is_valid("0123456789ag"));
	assert_false(hutch_id_is_valid("../456789ab"));
	assert_false(hutch_id_is_valid(""));
	assert_false(hutch_id_is_valid(NULL));

	assert_true(hutch_id_prefix_is_valid("0"));
	assert_true(hutch_id_prefix_is_valid("0123"));
	assert_true(hutch_id_prefix_is_valid("0123456789ab"));
	assert_false(hutch_id_prefix_is_valid("0123456789abc"));
	assert_false(hutch_id_prefix_is_valid(""));
	assert_false(hutch_id_prefix_is_valid("01 3"));
	assert_false(hutch_id_prefix_is_valid("."));
	assert_false(hutch_id_prefix_is_valid("A"));
	assert_false(hutch_id_prefix_is_valid(NULL));

	assert_int_equal(hutch_id_new(a), 0);
	assert_int_equal(hutch_id_new(b), 0);
	assert_int_equal(strlen(a), HUTCH_ID_LEN);
	assert_true(hutch_id_is_valid(a));
	assert_true(hutch_id_is_valid(b));
	assert_string_not_equal(a, b);
}

/* Sanitize len bytes of in (no carry) and compare with want. */
static void utf8_is(const char *in, size_t len, const char *want)
{
	char *out = hutch_utf8_sanitize(in, len, NULL);

	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
}

static void test_utf8_valid(void **state)
{
	/* 1, 2, 3 and 4 byte forms, and the edges of the ranges. */
	static const char ok[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
	                         "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
	                         "\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\x7f";
	size_t carry = 99;
	char *out;

	(void)state;
	utf8_is(ok, sizeof(ok) - 1, ok);
	utf8_is("", 0, "");
	out = hutch_utf8_sanitize(ok, sizeof(ok) - 1, &carry);
	assert_string_equal(out, ok);
	assert_int_equal(carry, 0);
	free(out);
}

static void test_utf8_invalid(void **state)
{
	(void)state;
	/* Stray continuation bytes, bytes never valid. */
	utf8_is("a\x80z", 3, "a" FFFD "z");
	utf8_is("\xbf\xbf", 2, FFFD FFFD);
	utf8_is("\xff\xfe", 2, FFFD FFFD);
	utf8_is("\xf5\x80\x80\x80", 4, FFFD FFFD FFFD FFFD);
	/* A lead byte followed by a non-continuation byte: only the lead goes. */
	utf8_is("\xc3(", 2, FFFD "(");
	utf8_is("\xe2\x82(", 3, FFFD FFFD "(");
	/* Overlong encodings of '/', of U+07FF and of U+FFFF. */
	utf8_is("\xc0\xaf", 2, FFFD FFFD);
	utf8_is("\xc1\xbf", 2, FFFD FFFD);
	utf8_is("\xe0\x80\xaf", 3, FFFD FFFD FFFD);
	utf8_is("\xe0\x9f\xbf", 3, FFFD FFFD FFFD);
	utf8_is("\xf0\x80\x80\xaf", 4, FFFD FFFD FFFD FFFD);
	utf8_is("\xf0\x8f\xbf\xbf", 4, FFFD FFFD FFFD FFFD);
	/* UTF-16 surrogates U+D800 and U+DFFF. */
	utf8_is("\xed\xa0\x80", 3, FFFD FFFD FFFD);
	utf8_is("\xed\xbf\xbf", 3, FFFD FFFD FFFD);
	/* Past U+10FFFF. */
	utf8_is("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD);
	/* NUL bytes never reach the JSON output as NUL. */
	utf8_is("a\0b", 3, "a" FFFD "b");
}

static void test_utf8_carry(void **state)
{
	/* A euro sign split over two reads. */
	static const char chunk1[] = "ab\xe2\x82";
	static const char chunk2[] = "\xe2\x82\xac!"; /* carry prepended */
	size_t carry = 99;
	char *out;

	(void)state;
	out = hutch_utf8_sanitize(chunk1, 4, &carry);
	assert_string_equal(out, "ab");
	assert_int_equal(carry, 2);
	free(out);
	out = hutch_utf8_sanitize(chunk2, 4, &carry);
	assert_string_equal(out, "\xe2\x82\xac!");
	assert_int_equal(carry, 0);
	free(out);
	/* 1, 2 and 3 bytes of a 4-byte sequence are all carried. */
	for (size_t n = 1; n <= 3; n++) {
		out = hutch_utf8_sanitize("\xf0\x9f\x98\x80", n, &carry);
		assert_string_equal(out, "");
		assert_int_equal(carry, n);
		free(out);
	}
	/* Without carry (the last chunk) the incomplete tail is replaced. */
	utf8_is("ab\xe2\x82", 4, "ab" FFFD FFFD);
	utf8_is("\xf0\x9f\x98", 3, FFFD FFFD FFFD);
	/* An invalid sequence before the end is replaced, not carried. */
	out = hutch_utf8_sanitize("\xe2(\xe2", 3, &carry);
	assert_string_equal(out, FFFD "(");
	assert_int_equal(carry, 1);
	free(out);
}

/* A ring of 8 bytes followed by absolute offsets across wraps. */
static void test_ring(void **state)
{
	struct hutch_ring r;
	char out[32];

	(void)state;
	hutch_ring_init(&r, 8);
	assert_int_equal(hutch_ring_read(&r, 0, out, sizeof(out)), 0); /* empty */
	hutch_ring_write(&r, "abcde", 5);
	assert_int_equal(r.total, 5);
	assert_int_equal(r.start, 0);
	assert_int_equal(hutch_ring_read(&r, 0, out, sizeof(out)), 5);
	assert_memory_equal(out, "abcde", 5);
	assert_int_equal(hutch_ring_read(&r, 3, out, 1), 1); /* bounded by max */
	assert_memory_equal(out, "d", 1);
	/* Wrap: "fghij" overwrites a and b. */
	hutch_ring_write(&r, "fghij", 5);
	assert_int_equal(r.total, 10);
	assert_int_equal(r.start, 2);
	assert_int_equal(hutch_ring_read(&r, 0, out, sizeof(out)), 0); /* overwritten */
	assert_int_equal(hutch_ring_read(&r, 2, out, sizeof(out)), 8);
	assert_memory_equal(out, "cdefghij", 8);
	assert_int_equal(hutch_ring_read(&r, 7, out, sizeof(out)), 3);
	assert_memory_equal(out, "hij", 3);
	assert_int_equal(hutch_ring_read(&r, 10, out, sizeof(out)), 0); /* at the end */
	/* One write longer than the ring keeps its last bytes. */
	hutch_ring_write(&r, "0123456789AB", 12);
	assert_int_equal(r.total, 22);
	assert_int_equal(r.start, 14);
	assert_int_equal(hutch_ring_read(&r, 14, out, sizeof(out)), 8);
	assert_memory_equal(out, "456789AB", 8);
	assert_true(r.alloc <= r.cap);
	hutch_ring_done(&r);
	assert_null(r.data);

	/* A short stream never allocates the whole capacity. */
	hutch_ring_init(&r, 1 << 20);
	hutch_ring_write(&r, "hello", 5);
	assert_true(r.alloc < (1u << 20));
	assert_int_equal(hutch_ring_read(&r, 0, out, sizeof(out)), 5);
	assert_memory_equal(out, "hello", 5);
	hutch_ring_done(&r);
}

/* The tail of an output: the last cap bytes, whatever the chunking. */
static void test_buf_tail(void **state)
{
	struct hutch_buf b;

	(void)state;
	hutch_buf_init(&b, 8);
	assert_int_equal(hutch_buf_append_tail(&b, "abc", 3), 0);
	assert_int_equal(hutch_buf_append_tail(&b, "defgh", 5), 0);
	assert_int_equal(b.len, 8);
	assert_false(b.truncated); /* exactly cap */
	assert_int_equal(hutch_buf_append_tail(&b, "ij", 2), 0);
	assert_int_equal(b.len, 8);
	assert_memory_equal(b.data, "cdefghij", 8);
	assert_true(b.truncated);
	/* One chunk longer than cap keeps its own last bytes. */
	assert_int_equal(hutch_buf_append_tail(&b, "0123456789", 10), 0);
	assert_memory_equal(b.data, "23456789", 8);
	assert_int_equal(b.total, 20);
	hutch_buf_done(&b);

	/* A chunk of exactly cap into an empty buffer is not truncation. */
	hutch_buf_init(&b, 4);
	assert_int_equal(hutch_buf_append_tail(&b, "wxyz", 4), 0);
	assert_false(b.truncated);
	assert_memory_equal(b.data, "wxyz", 4);
	hutch_buf_done(&b);

	/* cap 0: count only. */
	hutch_buf_init(&b, 0);
	assert_int_equal(hutch_buf_append_tail(&b, "abc", 3), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.total, 3);
	assert_true(b.truncated);
	hutch_buf_done(&b);
}

static void test_buf(void **state)
{
	struct hutch_buf b;
	char big[10000];

	(void)state;
	memset(big, 'x', sizeof(big));
	hutch_buf_init(&b, 8);
	assert_int_equal(hutch_buf_append(&b, "abc", 3), 0);
	assert_int_equal(hutch_buf_append(&b, "defg", 4), 0);
	assert_int_equal(b.len, 7);
	assert_false(b.truncated);
	assert_int_equal(hutch_buf_append(&b, "hij", 3), 0);
	assert_int_equal(b.len, 8);
	assert_memory_equal(b.data, "abcdefgh", 8);
	assert_true(b.truncated);
	assert_int_equal(b.total, 10);
	assert_int_equal(hutch_buf_append(&b, "k", 1), 0);
	assert_int_equal(b.len, 8);
	assert_int_equal(b.total, 11);
	assert_true(b.alloc <= 8);
	hutch_buf_done(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);

	/* Exactly cap bytes is not truncation; growth past the first block. */
	hutch_buf_init(&b, sizeof(big));
	assert_int_equal(hutch_buf_append(&b, big, 5000), 0);
	assert_int_equal(hutch_buf_append(&b, big, 5000), 0);
	assert_int_equal(b.len, 10000);
	assert_false(b.truncated);
	assert_memory_equal(b.data, big, sizeof(big));
	assert_int_equal(hutch_buf_append(&b, "", 0), 0);
	assert_false(b.truncated);
	hutch_buf_done(&b);

	/* cap 0: count only. */
	hutch_buf_init(&b, 0);
	assert_int_equal(hutch_buf_append(&b, big, 100), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.total, 100);
	assert_true(b.truncated);
	assert_null(b.data);
	hutch_buf_done(&b);
}

/* user.containers.override_stat: "UID:GID:0MODE", a type after it taken
 * (containers/storage's), anything else refused. */
static void test_override_stat(void **state)
{
	static const char *const bad[] = {
		"",         "1000",         "1000:1000",    "1000:1000:",
		"x:0:0755", "0:0:0789",     "65536:0:0644", "0:0:010000",
		"0::0644",  "0:0:0644:Dir", "0:0:0644:a b", "-1:0:0644"
	};
	unsigned int uid = 1, gid = 1, mode = 1;
	char buf[HUTCH_OVERRIDE_STAT_MAX + 1];
	int n;

	(void)state;
	n = hutch_override_stat_format(1000, 1000, 0600, buf, sizeof(buf));
	assert_int_equal(n, 14);
	assert_string_equal(buf, "1000:1000:0600");
	assert_int_equal(hutch_override_stat_parse(buf, (size_t)n, &uid, &gid, &mode), 0);
	assert_true(uid == 1000 && gid == 1000 && mode == 0600);
	assert_int_equal(hutch_override_stat_parse("0:0:01777:dir", 13, &uid, &gid, &mode), 0);
	assert_true(uid == 0 && gid == 0 && mode == 01777);
	assert_int_equal(hutch_override_stat_parse("65534:5:644", 11, &uid, &gid, &mode), 0);
	assert_true(uid == 65534 && gid == 5 && mode == 0644);
	/* not NUL-ended: the length is the value's */
	assert_int_equal(hutch_override_stat_parse("33:33:0640xyz", 10, &uid, &gid, &mode), 0);
	assert_true(uid == 33 && mode == 0640);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		        hutch_override_stat_parse(bad[i], strlen(bad[i]), &uid, &gid, &mode),
		        -EINVAL);
}

/* overlayfs's lowerdir before Linux 6.13: the layers' mount point names,
 * top first, in one string fsconfig takes (at most 255 bytes). */
static void test_overlay_lowerdir(void **state)
{
	char buf[512], big[4096];
	int n;

	(void)state;
	assert_int_equal(hutch_overlay_lowerdir(1, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "0");
	assert_int_equal(hutch_overlay_lowerdir(3, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "2:1:0");
	assert_int_equal(hutch_overlay_lowerdir(12, buf, sizeof(buf)), 25);
	assert_string_equal(buf, "11:10:9:8:7:6:5:4:3:2:1:0");
	assert_int_equal(hutch_overlay_lowerdir(0, buf, sizeof(buf)), -EINVAL);
	/* No character overlayfs would unescape or split on but ':' between
	 * layers: the names are decimal. */
	n = hutch_overlay_lowerdir(HUTCH_OVERLAY_PATH_LAYERS, big, sizeof(big));
	assert_true(n > 0 && n <= HUTCH_OVERLAY_STRING_MAX && (size_t)n == strlen(big));
	assert_int_equal(strspn(big, "0123456789:"), n);
	assert_int_equal(strncmp(big, "87:86:", 6), 0);
	assert_string_equal(big + n - 4, ":1:0");
	/* One more does not fit in 255 bytes, whatever the buffer. */
	assert_int_equal(hutch_overlay_lowerdir(HUTCH_OVERLAY_PATH_LAYERS + 1, big, sizeof(big)),
	                 -E2BIG);
	assert_int_equal(hutch_overlay_lowerdir(128, big, sizeof(big)), -E2BIG);
	/* Nor in a buffer too small for it. */
	assert_int_equal(hutch_overlay_lowerdir(3, buf, 5), -E2BIG);
	assert_int_equal(hutch_overlay_lowerdir(3, buf, 6), 5);
	assert_int_equal(hutch_overlay_lowerdir(1, buf, 0), -E2BIG);
}

static void test_kernel_at_least(void **state)
{
	(void)state;
	assert_true(hutch_kernel_at_least("6.1.0-18-amd64", 5, 19));
	assert_false(hutch_kernel_at_least("6.1.0-18-amd64", 6, 13));
	assert_true(hutch_kernel_at_least("6.13.0", 6, 13));
	assert_true(hutch_kernel_at_least("6.18.44-fc-v1272", 6, 13));
	assert_false(hutch_kernel_at_least("5.15.0-91-generic", 5, 19));
	assert_true(hutch_kernel_at_least("10.0", 6, 13));
	assert_false(hutch_kernel_at_least("6", 5, 11));
	assert_false(hutch_kernel_at_least("", 5, 11));
	assert_false(hutch_kernel_at_least(NULL, 5, 11));
}

/* base/timewrap.c: what the hutch link calls for time(), the second
 * glibc's time() gives (its vDSO tick's), and stored through t. */
time_t __wrap_time(time_t *t);

static void test_wrap_time(void **state)
{
	time_t before = time(NULL), stored = 0, got = __wrap_time(&stored), after = time(NULL);

	(void)state;
	assert_true(got >= before && got <= after);
	assert_true(stored == got);
	assert_true(__wrap_time(NULL) >= got);
}

static void test_round(void **state)
{
	(void)state;
	assert_true(hutch_round(0.0) == 0.0);
	assert_true(hutch_round(0.49999999999999994) == 0.0);
	assert_true(hutch_round(0.5) == 1.0);
	assert_true(hutch_round(1.5) == 2.0);
	assert_true(hutch_round(2.5) == 3.0);
	assert_true(hutch_round(-0.5) == -1.0);
	assert_true(hutch_round(-2.4) == -2.0);
	assert_true(hutch_round(-2.6) == -3.0);
	assert_true(hutch_round(123456.7891 * 1000) / 1000 == 123456.789);
	assert_true(hutch_round(9007199254740993.0) == 9007199254740993.0);
	assert_true(hutch_round(1e300) == 1e300);
	assert_true(hutch_round(-1e300) == -1e300);
	assert_true(hutch_round(__builtin_nan("")) != hutch_round(__builtin_nan("")));
}

static void test_format_time(void **state)
{
	char buf[32];

	(void)state;
	hutch_format_time(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00Z");
	hutch_format_time(1700000000, buf, sizeof(buf));
	assert_string_equal(buf, "2023-11-14T22:13:20Z");
	hutch_format_time(951782400, buf, sizeof(buf)); /* leap day */
	assert_string_equal(buf, "2000-02-29T00:00:00Z");
	/* The same as gmtime_r() and strftime() over four centuries, a day
	 * and a few seconds at a time (1900 and 2100 are not leap years). */
	for (int64_t t = -2208988800LL; t < 4133980800LL; t += 86400 * 7 + 3607) {
		time_t tt = (time_t)t;
		struct tm tm;
		char want[32];

		gmtime_r(&tt, &tm);
		strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%SZ", &tm);
		hutch_format_time(t, buf, sizeof(buf));
		assert_string_equal(buf, want);
	}
	assert_true(hutch_now_realtime() > 1700000000);
	assert_true(hutch_now_mono_ms() >= 0);
}

static void test_err(void **state)
{
	struct hutch_err err;
	char long_arg[600];

	(void)state;
	memset(long_arg, 'x', sizeof(long_arg) - 1);
	long_arg[sizeof(long_arg) - 1] = '\0';

	assert_int_equal(hutch_err_set(&err, -ENOENT, "no %s here", "file"), -ENOENT);
	assert_int_equal(err.code, -ENOENT);
	assert_string_equal(err.msg, "no file here");
	assert_int_equal(hutch_err_prefix(&err, "opening '%s'", "a"), -ENOENT);
	assert_string_equal(err.msg, "opening 'a': no file here");

	assert_int_equal(hutch_err_set_errno(&err, -EACCES, "open %s", "x"), -EACCES);
	assert_string_equal(err.msg, "open x: Permission denied");

	/* Truncation: always NUL-terminated, never past the array. */
	hutch_err_set(&err, -EINVAL, "%s", long_arg);
	assert_int_equal(strlen(err.msg), HUTCH_ERR_MSG_MAX - 1);
	hutch_err_prefix(&err, "%s", long_arg);
	assert_int_equal(strlen(err.msg), HUTCH_ERR_MSG_MAX - 1);
	assert_int_equal(err.code, -EINVAL);
	hutch_err_set(&err, -EINVAL, "short");
	hutch_err_prefix(&err, "%s", long_arg);
	assert_int_equal(strlen(err.msg), HUTCH_ERR_MSG_MAX - 1);
	hutch_err_set_errno(&err, -EIO, "%s", long_arg);
	assert_int_equal(strlen(err.msg), HUTCH_ERR_MSG_MAX - 1);
	/* The prefix may quote the old message itself. */
	hutch_err_set(&err, -EINVAL, "inner");
	hutch_err_prefix(&err, "outer (%s)", err.msg);
	assert_string_equal(err.msg, "outer (inner): inner");
	/* A message that filled the array keeps working after a prefix. */
	memset(err.msg, 'y', sizeof(err.msg)); /* not even NUL-terminated */
	hutch_err_prefix(&err, "p");
	assert_int_equal(strlen(err.msg), HUTCH_ERR_MSG_MAX - 1);
	assert_memory_equal(err.msg, "p: yyy", 6);

	hutch_err_clear(&err);
	assert_int_equal(err.code, 0);
	assert_string_equal(err.msg, "");
}

/* A fresh private directory, removed by the test. */
static int tmpdir(char *path, size_t size)
{
	const char *base = getenv("TMPDIR");

	snprintf(path, size, "%s/hutch-test-base-XXXXXX", base && *base ? base : "/tmp");
	assert_non_null(mkdtemp(path));
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void test_files(void **state)
{
	char path[PATH_MAX], buf[64], *big = NULL;
	struct stat st;
	int dfd;

	(void)state;
	dfd = tmpdir(path, sizeof(path));
	assert_true(dfd >= 0);
	assert_int_equal(hutch_write_file_at(dfd, "f", "hello\n", 0600), 0);
	assert_int_equal(fstatat(dfd, "f", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(hutch_read_file_at(dfd, "f", buf, sizeof(buf)), 6);
	assert_string_equal(buf, "hello\n");
	/* Truncated on rewrite. */
	assert_int_equal(hutch_write_file_at(dfd, "f", "hi", 0600), 0);
	assert_int_equal(hutch_read_file_at(dfd, "f", buf, sizeof(buf)), 2);
	assert_string_equal(buf, "hi");
	/* At most max - 1 bytes, NUL-terminated. */
	assert_int_equal(hutch_read_file_at(dfd, "f", buf, 2), 1);
	assert_string_equal(buf, "h");
	assert_int_equal(hutch_read_file_at(dfd, "f", buf, 0), -EINVAL);
	/* Bytes in are bytes out: a NUL does not end the file. */
	assert_int_equal(hutch_write_bytes_at(dfd, "nul", "a\0b\n", 4, 0600), 0);
	assert_int_equal(fstatat(dfd, "nul", &st, 0), 0);
	assert_int_equal(st.st_size, 4);
	assert_int_equal(hutch_read_file_at(dfd, "missing", buf, sizeof(buf)), -ENOENT);
	/* Knobs: existing files only. */
	assert_int_equal(hutch_write_knob_at(dfd, "f", "max"), 0);
	assert_int_equal(hutch_read_file_at(dfd, "f", buf, sizeof(buf)), 3);
	assert_int_equal(hutch_write_knob_at(dfd, "nope", "1"), -ENOENT);

	/* Neither helper follows a symlink. */
	assert_int_equal(symlinkat("f", dfd, "link"), 0);
	assert_int_equal(hutch_read_file_at(dfd, "link", buf, sizeof(buf)), -ELOOP);
	assert_int_equal(hutch_write_file_at(dfd, "link", "x", 0600), -ELOOP);
	assert_int_equal(hutch_read_file_alloc_at(dfd, "link", 100, &big), -ELOOP);

	/* Whole-file reads: a file of exactly max bytes fits, one more does not. */
	assert_int_equal(hutch_write_file_at(dfd, "f", "0123456789", 0600), 0);
	assert_int_equal(hutch_read_file_alloc_at(dfd, "f", 100, &big), 10);
	assert_string_equal(big, "0123456789");
	free(big);
	big = NULL;
	assert_int_equal(hutch_read_file_alloc_at(dfd, "f", 10, &big), 10);
	assert_string_equal(big, "0123456789");
	free(big);
	big = NULL;
	assert_int_equal(hutch_read_file_alloc_at(dfd, "f", 9, &big), -EFBIG);
	assert_null(big);
	assert_int_equal(hutch_write_file_at(dfd, "empty", "", 0600), 0);
	assert_int_equal(hutch_read_file_alloc_at(dfd, "empty", 100, &big), 0);
	assert_string_equal(big, "");
	free(big);

	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, path), 0);
	assert_int_equal(fstatat(AT_FDCWD, path, &st, 0), -1);
	close(dfd);
}

static void test_mkdir_p(void **state)
{
	char path[PATH_MAX];
	struct stat st;
	int dfd;

	(void)state;
	dfd = tmpdir(path, sizeof(path));
	assert_true(dfd >= 0);
	assert_int_equal(hutch_mkdir_p_at(dfd, "a/b//c/", 0700), 0);
	assert_int_equal(fstatat(dfd, "a/b/c", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(hutch_mkdir_p_at(dfd, "a/b/c", 0700), 0); /* exists: fine */
	assert_int_equal(hutch_mkdir_p_at(dfd, "a", 0700), 0);
	/* A file in the way of a parent, or of the directory itself. */
	assert_int_equal(hutch_write_file_at(dfd, "a/file", "", 0600), 0);
	assert_int_equal(hutch_mkdir_p_at(dfd, "a/file/d", 0700), -ENOTDIR);
	assert_int_equal(hutch_mkdir_p_at(dfd, "a/file", 0700), -ENOTDIR);
	assert_int_equal(hutch_mkdir_p_at(dfd, "", 0700), -EINVAL);
	/* Absolute paths ignore dirfd. */
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/x/y");
	assert_int_equal(hutch_mkdir_p_at(AT_FDCWD, path, 0700), 0);
	assert_int_equal(fstatat(dfd, "x/y", &st, 0), 0);
	path[strlen(path) - 4] = '\0';
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, path), 0);
	close(dfd);
}

static void test_rm_rf_symlink(void **state)
{
	char path[PATH_MAX], outside[PATH_MAX], buf[16];
	struct stat st;
	int dfd, ofd;

	(void)state;
	dfd = tmpdir(path, sizeof(path));
	ofd = tmpdir(outside, sizeof(outside));
	assert_true(dfd >= 0 && ofd >= 0);
	/* Outside: a directory with a file, which rm -rf must not touch. */
	assert_int_equal(mkdirat(ofd, "keep", 0700), 0);
	assert_int_equal(hutch_write_file_at(ofd, "keep/precious", "data", 0600), 0);

	/* Inside: a tree with symlinks to the outside dir, its file, and a
	 * dangling one, at the top and deeper down. */
	assert_int_equal(hutch_mkdir_p_at(dfd, "tree/sub/deeper", 0700), 0);
	assert_int_equal(hutch_write_file_at(dfd, "tree/sub/deeper/f", "x", 0600), 0);
	assert_int_equal(hutch_write_file_at(dfd, "tree/g", "x", 0600), 0);
	assert_int_equal(symlinkat(outside, dfd, "tree/to-outside"), 0);
	assert_int_equal(symlinkat(outside, dfd, "tree/sub/deeper/to-outside"), 0);
	snprintf(buf, sizeof(buf), "../../..");
	assert_int_equal(symlinkat(buf, dfd, "tree/sub/up"), 0);
	assert_int_equal(symlinkat("/nonexistent/x", dfd, "tree/dangling"), 0);
	assert_int_equal(hutch_rm_rf_at(dfd, "tree"), 0);
	assert_int_equal(fstatat(dfd, "tree", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);

	/* The top path itself a symlink to a directory: only the link goes. */
	assert_int_equal(symlinkat(outside, dfd, "top-link"), 0);
	assert_int_equal(hutch_rm_rf_at(dfd, "top-link"), 0);
	assert_int_equal(fstatat(dfd, "top-link", &st, AT_SYMLINK_NOFOLLOW), -1);

	/* Missing path: nothing to do. A plain file: removed. */
	assert_int_equal(hutch_rm_rf_at(dfd, "missing"), 0);
	assert_int_equal(hutch_write_file_at(dfd, "plain", "x", 0600), 0);
	assert_int_equal(hutch_rm_rf_at(dfd, "plain"), 0);
	assert_int_equal(fstatat(dfd, "plain", &st, AT_SYMLINK_NOFOLLOW), -1);

	/* Everything outside survived. */
	assert_int_equal(hutch_read_file_at(ofd, "keep/precious", buf, sizeof(buf)), 4);
	assert_string_equal(buf, "data");

	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, path), 0);
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, outside), 0);
	assert_int_equal(fstatat(AT_FDCWD, outside, &st, 0), -1);
	close(dfd);
	close(ofd);
}

static void b64_roundtrip(const char *plain, size_t len, const char *coded)
{
	char *enc = hutch_base64_encode(plain, len), *dec = NULL;
	size_t n = 99;

	assert_non_null(enc);
	assert_string_equal(enc, coded);
	assert_int_equal(hutch_base64_decode(coded, &dec, &n), 0);
	assert_int_equal(n, len);
	assert_memory_equal(dec, plain, len);
	free(enc);
	free(dec);
}

static void test_base64(void **state)
{
	static const unsigned char all[3] = { 0xfb, 0xff, 0x00 };
	char *dec = NULL;
	size_t n = 0;

	(void)state;
	/* RFC 4648 section 10 vectors, and bytes that use '+', '/' and NUL. */
	b64_roundtrip("", 0, "");
	b64_roundtrip("f", 1, "Zg==");
	b64_roundtrip("fo", 2, "Zm8=");
	b64_roundtrip("foo", 3, "Zm9v");
	b64_roundtrip("foob", 4, "Zm9vYg==");
	b64_roundtrip("fooba", 5, "Zm9vYmE=");
	b64_roundtrip("foobar", 6, "Zm9vYmFy");
	b64_roundtrip((const char *)all, 3, "+/8A");

	/* White space anywhere is skipped; missing padding is accepted. */
	assert_int_equal(hutch_base64_decode(" Zm9v\r\nYmFy\t", &dec, &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(dec, "foobar", 6);
	free(dec);
	assert_int_equal(hutch_base64_decode("Zm8", &dec, &n), 0);
	assert_int_equal(n, 2);
	free(dec);
}

static void test_base64_bad(void **state)
{
	static const char *const bad[] = {
		"Zm9v!",             /* outside the alphabet */
		"Zm-v",              /* base64url is not accepted */
		"Zg==Zg==",          /* data after padding */
		"Zg=a",     "Zg===", /* three '=' */
		"Z",                 /* a dangling sextet */
		"Zm9vY",    "\xc3\xa9",
	};
	char *dec = (char *)0x1;
	size_t n = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hutch_base64_decode(bad[i], &dec, &n), -EINVAL);
		/* outputs untouched on failure */
		assert_ptr_equal(dec, (char *)0x1);
		assert_int_equal(n, 7);
	}
}

static void test_io(void **state)
{
	int p[2];
	char buf[8];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(hutch_write_all(p[1], "abcdef", 6), 0);
	close(p[1]);
	/* read_all stops at EOF and reports what it got. */
	assert_int_equal(hutch_read_all(p[0], buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "abcdef", 6);
	assert_int_equal(hutch_read_all(p[0], buf, sizeof(buf)), 0);
	assert_int_equal(hutch_fd_nonblock(p[0], true), 0);
	assert_true(fcntl(p[0], F_GETFL) & O_NONBLOCK);
	assert_int_equal(hutch_fd_nonblock(p[0], false), 0);
	assert_false(fcntl(p[0], F_GETFL) & O_NONBLOCK);
	close(p[0]);
	assert_int_equal(hutch_write_all(p[0], "x", 1), -EBADF);
	assert_int_equal(hutch_fd_nonblock(p[0], true), -EBADF);
}

/* A unix socket path of any length: bound and connected to through its
 * directory's fd when it does not fit sun_path. */
static void test_unix_addr(void **state)
{
	char path[1024], dir[1400], sock[1800], name[200];
	struct sockaddr_un sa;
	int dfd, fd = -1, s, c;

	(void)state;
	dfd = tmpdir(path, sizeof(path));
	assert_true(dfd >= 0);
	assert_int_equal(hutch_unix_addr("/run/x.sock", &sa, &fd), 0);
	assert_string_equal(sa.sun_path, "/run/x.sock");
	assert_int_equal(sa.sun_family, AF_UNIX);
	assert_int_equal(fd, -EBADF);

	memset(name, 'd', 120);
	name[120] = '\0';
	snprintf(dir, sizeof(dir), "%s/%s", path, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(sock, sizeof(sock), "%s/exec.sock", dir);
	assert_true(strlen(sock) > sizeof(sa.sun_path));
	assert_int_equal(hutch_unix_addr(sock, &sa, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(strncmp(sa.sun_path, "/proc/self/fd/", 14), 0);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 1), 0);
	close(fd);
	assert_int_equal(access(sock, F_OK), 0); /* where the long path says */
	assert_int_equal(hutch_unix_addr(sock, &sa, &fd), 0);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	close(c);
	close(s);

	/* A last name too long even then; a missing directory. */
	name[100] = '\0';
	snprintf(sock, sizeof(sock), "%s/%s", dir, name);
	assert_int_equal(hutch_unix_addr(sock, &sa, &fd), -ENAMETOOLONG);
	assert_int_equal(fd, -EBADF);
	snprintf(sock, sizeof(sock), "%s/missing/exec.sock", dir);
	assert_int_equal(hutch_unix_addr(sock, &sa, &fd), -ENOENT);
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, path), 0);
	close(dfd);
}

/* The class table (docs/errors.md): the CLI's documented exit codes and
 * the HTTP statuses per class; a class said at the failure wins over the
 * errno, survives hutch_err_prefix() and is cleared by a later set. */
static void test_error_classes(void **state)
{
	struct hutch_err err = { 0 };

	(void)state;
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_USAGE), 64);
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_NOT_FOUND), 65);
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_GONE), 66);
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_NOT_CAPABLE), 69);
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_INTERNAL), 70);
	assert_int_equal(hutch_errc_exit(HUTCH_ERRC_SETUP), 71);
	assert_int_equal(hutch_errc_http(HUTCH_ERRC_USAGE), 400);
	assert_int_equal(hutch_errc_http(HUTCH_ERRC_NOT_FOUND), 404);
	assert_int_equal(hutch_errc_http(HUTCH_ERRC_GONE), 410);
	assert_int_equal(hutch_errc_http(HUTCH_ERRC_CONFLICT), 409);
	assert_int_equal(hutch_errc_http(HUTCH_ERRC_LIMIT), 413);
	assert_int_equal(hutch_errc_http((enum hutch_errc)99), 500);
	/* the other way, the CLI's for an API answer: 413 is limit's, 70 */
	assert_int_equal(hutch_errc_of_http(413), HUTCH_ERRC_LIMIT);
	assert_int_equal(hutch_errc_exit(hutch_errc_of_http(413)), 70);
	assert_int_equal(hutch_errc_of_http(400), HUTCH_ERRC_USAGE);
	assert_int_equal(hutch_errc_of_http(404), HUTCH_ERRC_NOT_FOUND);
	assert_int_equal(hutch_errc_of_http(410), HUTCH_ERRC_GONE);
	assert_int_equal(hutch_errc_of_http(501), HUTCH_ERRC_NOT_CAPABLE);
	assert_int_equal(hutch_errc_of_http(500), HUTCH_ERRC_INTERNAL);
	assert_int_equal(hutch_errc_of_http(429), HUTCH_ERRC_INTERNAL);
	for (int c = HUTCH_ERRC_USAGE; c < HUTCH_ERRC_N; c++) {
		assert_int_equal(hutch_errc_of_name(hutch_errc_name((enum hutch_errc)c)), c);
		if (c != HUTCH_ERRC_SETUP) /* 500, internal's */
			assert_int_equal(hutch_errc_of_http(hutch_errc_http((enum hutch_errc)c)),
			                 c);
	}
	assert_int_equal(hutch_errc_of_name("too_large"), HUTCH_ERRC_NONE);
	assert_int_equal(hutch_errc_of_name(NULL), HUTCH_ERRC_NONE);
	/* HTTP's finer statuses: the status by class and code, and an
	 * answer's class back (the CLI's exit code: 403 access_denied is
	 * not_capable's 69, 405 usage's 64; was 70) */
	assert_int_equal(hutch_errc_status(HUTCH_ERRC_NOT_CAPABLE, "access_denied"), 403);
	assert_int_equal(hutch_errc_status(HUTCH_ERRC_USAGE, "access_denied"), 400);
	assert_int_equal(hutch_errc_status(HUTCH_ERRC_LIMIT, "output_over"), 500);
	assert_int_equal(hutch_errc_status(HUTCH_ERRC_LIMIT, NULL), 413);
	assert_int_equal(hutch_errc_of_answer(403, "access_denied"), HUTCH_ERRC_NOT_CAPABLE);
	assert_int_equal(hutch_errc_exit(hutch_errc_of_answer(403, "access_denied")), 69);
	assert_int_equal(hutch_errc_of_answer(403, NULL), HUTCH_ERRC_NOT_CAPABLE);
	assert_int_equal(hutch_errc_of_answer(401, NULL), HUTCH_ERRC_NOT_CAPABLE);
	assert_int_equal(hutch_errc_of_answer(405, "method_not_allowed"), HUTCH_ERRC_USAGE);
	assert_int_equal(hutch_errc_exit(hutch_errc_of_answer(426, "upgrade_required")), 64);
	assert_int_equal(hutch_errc_of_answer(429, "too_many_processes"), HUTCH_ERRC_LIMIT);
	assert_int_equal(hutch_errc_of_answer(431, NULL), HUTCH_ERRC_LIMIT);
	assert_int_equal(hutch_errc_of_answer(500, "output_over"), HUTCH_ERRC_LIMIT);
	assert_int_equal(hutch_errc_of_answer(500, "spawn_failed"), HUTCH_ERRC_INTERNAL);
	assert_int_equal(hutch_errc_of_answer(404, "process_not_found"), HUTCH_ERRC_NOT_FOUND);
	assert_int_equal(hutch_errc_of_answer(410, "gone"), HUTCH_ERRC_GONE);
	assert_int_equal(hutch_errc_of_answer(409, "not_found"), HUTCH_ERRC_NOT_FOUND);
	assert_int_equal(hutch_errc_of_answer(418, NULL), HUTCH_ERRC_INTERNAL);
	for (int c = HUTCH_ERRC_NONE; c < HUTCH_ERRC_N; c++)
		assert_non_null(hutch_errc_name((enum hutch_errc)c));

	hutch_err_set(&err, -ENOENT, "no such thing");
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_INTERNAL); /* ENOENT says nothing */
	hutch_err_set_class(&err, HUTCH_ERRC_NOT_FOUND, -ENOENT, "no image '%s'", "x");
	hutch_err_prefix(&err, "inspect");
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_NOT_FOUND);
	assert_string_equal(err.msg, "inspect: no image 'x'");
	hutch_err_set(&err, -EOPNOTSUPP, "no freezer");
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_NOT_CAPABLE);
	hutch_err_set_errno(&err, -EADDRINUSE, "bind");
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_CONFLICT);
	err.cls = 1234; /* from a hostile init: out of range, the errno decides */
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_CONFLICT);
}

/* A JSON string written without libcjson is what cJSON_PrintUnformatted()
 * writes, and cJSON reads it back to the same bytes. */
static void test_json_str(void **state)
{
	static const char *const in[] = { "",           "plain",        "q\"uote\\back",
		                          "\b\f\n\r\t", "\x01\x1f\x7f", "caf\xc3\xa9 \xff",
		                          "a/b</c>" };

	assert_false(hutch_cjson_is_loaded()); /* nothing above called it */
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct hutch_buf b;
		cJSON *s = cJSON_CreateString(in[i]), *back;
		char *want = cJSON_PrintUnformatted(s);

		hutch_buf_init(&b, SIZE_MAX);
		assert_int_equal(hutch_buf_append_json_str(&b, in[i]), 0);
		assert_int_equal(hutch_buf_append(&b, "", 1), 0);
		assert_string_equal(b.data, want);
		back = cJSON_Parse(b.data);
		assert_true(cJSON_IsString(back));
		assert_string_equal(back->valuestring, in[i]);
		cJSON_Delete(back);
		cJSON_Delete(s);
		free(want);
		hutch_buf_done(&b);
	}
	assert_true(hutch_cjson_is_loaded());
	/* a NULL item answers without the library, as the library would */
	assert_null(cJSON_GetObjectItemCaseSensitive(NULL, "x"));
	assert_false(cJSON_IsString(NULL));
	assert_int_equal(cJSON_GetArraySize(NULL), 0);
	cJSON_Delete(NULL);
}

/* A decoder made in memory that held anything (a stack's): its error,
 * after the 4 KiB ctl, cleared by the init too (it was not: a CLAIMED
 * frame read by a decoder on the CLI's stack failed at random). */
static void test_frame_dec_init_dirty(void **state)
{
	struct hutch_frame_dec d;
	struct hutch_frame_ev ev;
	uint8_t f[HUTCH_FRAME_HDR + 2];
	size_t off = 0;

	(void)state;
	memset(&d, 0xa5, sizeof(d));
	hutch_frame_dec_init(&d, HUTCH_FRAME_BIT(HUTCH_FRAME_CLAIMED));
	hutch_frame_header(f, HUTCH_FRAME_CLAIMED, 2);
	memcpy(f + HUTCH_FRAME_HDR, "{}", 2);
	do {
		ssize_t n = hutch_frame_decode(&d, (const char *)f + off, sizeof(f) - off, &ev);
		assert_true(n > 0);
		off += (size_t)n;
	} while (ev.kind != HUTCH_FRAME_EV_CTL);
	assert_int_equal(ev.type, HUTCH_FRAME_CLAIMED);
	assert_int_equal(ev.len, 2);
	assert_memory_equal(ev.data, "{}", 2);
}

/* The RESULT frame's payload: encoded, decoded back; the hostile ones
 * refused. */
static void test_frame_result(void **state)
{
	struct hutch_frame_result r = { .flags = HUTCH_FRAME_RESULT_SIGNAL,
		                        .signal = 9,
		                        .message = "killed by signal 9 (SIGKILL)",
		                        .message_len = 28 },
	                          d;
	char buf[HUTCH_FRAME_CTL_MAX + 16], big[HUTCH_FRAME_CTL_MAX + 16];
	size_t n = hutch_frame_result_encode(&r, buf, sizeof(buf));

	assert_int_equal(n, HUTCH_FRAME_RESULT_HDR + 28);
	assert_int_equal(hutch_frame_result_decode(buf, n, &d), 0);
	assert_int_equal(d.flags, HUTCH_FRAME_RESULT_SIGNAL);
	assert_int_equal(d.signal, 9);
	assert_int_equal(d.message_len, 28);
	assert_memory_equal(d.message, r.message, 28);
	/* an exit code alone, no message */
	r = (struct hutch_frame_result){ .flags = HUTCH_FRAME_RESULT_EXITED, .exit_code = 3 };
	n = hutch_frame_result_encode(&r, buf, sizeof(buf));
	assert_int_equal(n, HUTCH_FRAME_RESULT_HDR);
	assert_int_equal(hutch_frame_result_decode(buf, n, &d), 0);
	assert_int_equal(d.exit_code, 3);
	assert_int_equal(d.message_len, 0);
	/* a message cut to the control frame's bound */
	memset(big, 'm', sizeof(big));
	r.message = big;
	r.message_len = sizeof(big);
	n = hutch_frame_result_encode(&r, buf, sizeof(buf));
	assert_int_equal(n, HUTCH_FRAME_CTL_MAX);
	assert_int_equal(hutch_frame_result_decode(buf, n, &d), 0);
	/* refused: short, unknown flags, the reserved byte, a NUL, too long */
	assert_int_equal(hutch_frame_result_decode("\x01\x00\x00", 3, &d), -EPROTO);
	assert_int_equal(hutch_frame_result_decode("\x10\x00\x00\x00", 4, &d), -EPROTO);
	assert_int_equal(hutch_frame_result_decode("\x01\x00\x00\x01", 4, &d), -EPROTO);
	assert_int_equal(hutch_frame_result_decode("\x01\x00\x00\x00a\0b", 7, &d), -EPROTO);
	assert_int_equal(hutch_frame_result_decode(buf, HUTCH_FRAME_CTL_MAX + 1, &d), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_frame_dec_init_dirty),
		cmocka_unit_test(test_frame_result),
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_utf8_invalid),
		cmocka_unit_test(test_utf8_carry),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_buf_tail),
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_err),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_mkdir_p),
		cmocka_unit_test(test_rm_rf_symlink),
		cmocka_unit_test(test_unix_addr),
		cmocka_unit_test(test_io),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_base64_bad),
		cmocka_unit_test(test_overlay_lowerdir),
		cmocka_unit_test(test_override_stat),
		cmocka_unit_test(test_kernel_at_least),
		cmocka_unit_test(test_round),
		cmocka_unit_test(test_wrap_time),
		cmocka_unit_test(test_error_classes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
