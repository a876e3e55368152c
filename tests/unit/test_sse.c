/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the server-sent events of /run_streaming (supervisor/api/
 * sse.c): framing, UTF-8 sequences split across chunks, the flush of an
 * incomplete sequence at the end, reading in pieces, and the queue bound
 * that pauses the command's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sse.h"

/* Everything queued, as a string. */
static char *drain(struct hutch_sse *e)
{
	static char out[1 << 16];
	size_t len = 0;
	ssize_t n;

	while ((n = hutch_sse_read(e, out + len, 7)) > 0) /* small reads on purpose */
		len += (size_t)n;
	out[len] = '\0';
	return out;
}

static void test_framing(void **state)
{
	struct hutch_sse e;
	cJSON *exit = cJSON_CreateObject();

	(void)state;
	hutch_sse_init(&e);
	hutch_sse_output(&e, false, "hi\n", 3);
	hutch_sse_output(&e, true, "oops", 4);
	cJSON_AddNumberToObject(exit, "exit_code", 3);
	hutch_sse_event(&e, "exit", exit);
	assert_string_equal(drain(&e), "event: stdout\ndata: {\"data\":\"hi\\n\"}\n\n"
	                               "event: stderr\ndata: {\"data\":\"oops\"}\n\n"
	                               "event: exit\ndata: {\"exit_code\":3}\n\n");
	assert_int_equal(hutch_sse_read(&e, (char[8]){ 0 }, 8), 0);
	hutch_sse_done(&e);
}

/* "é" (C3 A9) split across two chunks arrives whole; a stream's carry does
 * not leak into the other stream. */
static void test_split_utf8(void **state)
{
	struct hutch_sse e;

	(void)state;
	hutch_sse_init(&e);
	hutch_sse_output(&e, false, "caf\xc3", 4);
	hutch_sse_output(&e, true, "x", 1);
	hutch_sse_output(&e, false, "\xa9", 1);
	assert_string_equal(drain(&e), "event: stdout\ndata: {\"data\":\"caf\"}\n\n"
	                               "event: stderr\ndata: {\"data\":\"x\"}\n\n"
	                               "event: stdout\ndata: {\"data\":\"\xc3\xa9\"}\n\n");
	hutch_sse_done(&e);
}

/* An incomplete sequence left at the end is flushed as U+FFFD (one per
 * byte, as hutch_utf8_sanitize() replaces it), not lost. */
static void test_flush(void **state)
{
	struct hutch_sse e;

	(void)state;
	hutch_sse_init(&e);
	hutch_sse_output(&e, true, "\xe2\x82", 2);
	assert_string_equal(drain(&e), "");
	hutch_sse_flush(&e);
	assert_string_equal(drain(&e),
	                    "event: stderr\ndata: {\"data\":\"\xef\xbf\xbd\xef\xbf\xbd\"}\n\n");
	hutch_sse_flush(&e); /* nothing left */
	assert_string_equal(drain(&e), "");
	hutch_sse_done(&e);
}

/* Full at the bound; room again only below half of it. */
static void test_bound(void **state)
{
	struct hutch_sse e;
	static char chunk[4096], sink[1 << 16];

	(void)state;
	memset(chunk, 'a', sizeof(chunk));
	hutch_sse_init(&e);
	while (!hutch_sse_full(&e))
		hutch_sse_output(&e, false, chunk, sizeof(chunk));
	assert_false(hutch_sse_has_room(&e));
	while (!hutch_sse_has_room(&e))
		assert_true(hutch_sse_read(&e, sink, sizeof(sink)) > 0);
	assert_false(hutch_sse_full(&e));
	/* Compaction keeps the queue from growing with all ever sent. */
	for (int i = 0; i < 1000; i++) {
		hutch_sse_output(&e, false, chunk, sizeof(chunk));
		assert_true(hutch_sse_read(&e, sink, sizeof(chunk) + 64) > 0);
	}
	assert_true(e.q.alloc <= 2 * HUTCH_SSE_QUEUE_MAX);
	hutch_sse_done(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_split_utf8),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
