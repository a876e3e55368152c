/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for runtime/journal-format.c: the hash of a line (SHA-256,
 * against a known vector) and the chain check of a journal's lines: a good
 * chain, an edited line, a cut middle, head and tail, a reordering, a
 * rotation's first line, a line after the end.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "journal-format.h"

#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

/* A chain of n lines: the start, n - 2 requests, the end (or none). */
static int make(char lines[][256], int n, bool end)
{
	char prev[HUTCH_JOURNAL_HASH_LEN + 1] = ZEROS;

	for (int i = 0; i < n; i++) {
		const char *kind = i == 0              ? ",\"journal\":\"start\""
		                   : end && i == n - 1 ? ",\"journal\":\"end\""
		                                       : ",\"route\":\"POST /run\"";

		snprintf(lines[i], 256, "{\"seq\":%d%s,\"prev\":\"%s\"}", i, kind, prev);
		hutch_journal_hash(lines[i], strlen(lines[i]), prev);
	}
	return n;
}

/* 0 if lines (in the order of idx) verify, else the 1-based line that breaks. */
static int check(char lines[][256], const int *idx, int n, struct hutch_journal_check *c)
{
	hutch_journal_check_init(c);
	for (int i = 0; i < n; i++)
		if (hutch_journal_check_line(c, lines[idx[i]], strlen(lines[idx[i]])) == -EBADMSG)
			return i + 1;
	return 0;
}

static void test_hash(void **state)
{
	char h[HUTCH_JOURNAL_HASH_LEN + 1];

	(void)state;
	hutch_journal_hash("abc", 3, h);
	assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_chain(void **state)
{
	char l[6][256];
	struct hutch_journal_check c;
	const int all[] = { 0, 1, 2, 3, 4, 5 }, middle[] = { 0, 1, 3, 4, 5 },
	          head[] = { 1, 2, 3, 4, 5 }, swap[] = { 0, 2, 1, 3, 4, 5 };

	(void)state;
	make(l, 6, true);
	assert_int_equal(check(l, all, 6, &c), 0);
	assert_true(c.started && c.ended);
	assert_int_equal(c.lines, 6);
	assert_int_equal(check(l, all, 5, &c), 0); /* a cut tail: no end (the reader says) */
	assert_false(c.ended);
	assert_int_equal(check(l, middle, 5, &c), 3);
	assert_non_null(strstr(c.why, "missing (cut)"));
	assert_int_equal(check(l, head, 5, &c), 1);
	assert_non_null(strstr(c.why, "first lines are missing"));
	assert_int_equal(check(l, swap, 6, &c), 2);
	l[2][strlen(l[2]) - 80] ^= 1; /* an edited line: the next one breaks */
	assert_int_equal(check(l, all, 6, &c), 4);
	assert_non_null(strstr(c.why, "changed"));
}

static void test_rotated_and_after_end(void **state)
{
	char l[4][256];
	struct hutch_journal_check c;
	const int all[] = { 0, 1, 2, 3 }, again[] = { 0, 1, 2, 3, 3 };

	(void)state;
	make(l, 4, true);
	/* A file that starts after a rotation: its first prev is unchecked. */
	snprintf(l[0], sizeof(l[0]), "{\"seq\":7,\"journal\":\"rotated\",\"prev\":\"%s\"}",
	         "1111111111111111111111111111111111111111111111111111111111111111");
	hutch_journal_check_init(&c);
	assert_int_equal(hutch_journal_check_line(&c, l[0], strlen(l[0])), 0);
	assert_false(c.started);
	assert_int_equal(hutch_journal_check_line(&c, "not json", 8), -EBADMSG);
	make(l, 4, true);
	assert_int_equal(check(l, all, 4, &c), 0);
	assert_int_equal(check(l, again, 5, &c), 5);
	assert_non_null(strstr(c.why, "after the journal's end"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_rotated_and_after_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
