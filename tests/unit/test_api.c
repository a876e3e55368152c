/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the API's pure parts: the route table lookup (405 versus
 * 404, one row per URL and method, the flags that the request life reads)
 * and the errno table of the file endpoints.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "file-errno.h"
#include "file-req.h"
#include "routes.h"

static const struct hutch_api_route *find(const char *url, const char *method, bool *known)
{
	*known = true; /* must be reset by the lookup */
	return hutch_api_route_find(url, method, known);
}

static void test_route_find(void **state)
{
	const struct hutch_api_route *rt;
	bool known;

	(void)state;
	rt = find("/run", "POST", &known);
	assert_non_null(rt);
	assert_ptr_equal(rt->serve, hutch_api_serve_run);
	assert_string_equal(rt->url, "/run");
	/* Two rows share /files: the method picks one. */
	rt = find("/files", "GET", &known);
	assert_non_null(rt);
	assert_int_equal(rt->arg, HUTCH_FILE_GET);
	rt = find("/files", "PUT", &known);
	assert_non_null(rt);
	assert_int_equal(rt->arg, HUTCH_FILE_PUT);
	assert_ptr_equal(find("/", "DELETE", &known)->serve, hutch_api_serve_delete);
	assert_ptr_equal(find("/list_dir", "POST", &known)->serve, hutch_api_serve_file);

	/* A known URL with another method: 405 (url_known). */
	assert_null(find("/files", "POST", &known));
	assert_true(known);
	assert_null(find("/", "GET", &known));
	assert_true(known);
	assert_null(find("/run", "GET", &known));
	assert_true(known);
	assert_null(find("/health", "get", &known)); /* methods are case-sensitive */
	assert_true(known);
	/* Unknown URLs: 404. Matching is exact. */
	assert_null(find("/nope", "GET", &known));
	assert_false(known);
	assert_null(find("/run/", "POST", &known));
	assert_false(known);
	assert_null(find("", "GET", &known));
	assert_false(known);
	assert_null(find("/RUN", "POST", &known));
	assert_false(known);
}

static void test_route_flags(void **state)
{
	static const char *const pooled[][2] = {
		{ "/health", "GET" }, { "/status", "GET" }, { "/", "DELETE" }, { "/claim", "POST" }
	};
	static const char *const not_pooled[][2] = {
		{ "/run", "POST" },           { "/run_streaming", "POST" },
		{ "/start_process", "POST" }, { "/process_output", "GET" },
		{ "/write_file", "POST" },    { "/files", "PUT" },
	};
	const struct hutch_api_route *rt;
	bool known;

	(void)state;
	for (size_t i = 0; i < sizeof(pooled) / sizeof(pooled[0]); i++)
		assert_true(find(pooled[i][0], pooled[i][1], &known)->flags & HUTCH_ROUTE_POOLED);
	for (size_t i = 0; i < sizeof(not_pooled) / sizeof(not_pooled[0]); i++)
		assert_false(find(not_pooled[i][0], not_pooled[i][1], &known)->flags &
		             HUTCH_ROUTE_POOLED);
	/* Only watching is passive; only health and DELETE serve an ended
	 * sandbox; the file routes take their body raw. */
	assert_true(find("/health", "GET", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_true(find("/status", "GET", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_false(find("/run", "POST", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_false(find("/claim", "POST", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_true(find("/health", "GET", &known)->flags & HUTCH_ROUTE_ENDED);
	assert_false(find("/status", "GET", &known)->flags & HUTCH_ROUTE_ENDED);
	rt = find("/", "DELETE", &known);
	assert_true(rt->flags & HUTCH_ROUTE_ENDED);
	assert_true(rt->flags & HUTCH_ROUTE_WAITS_END);
	assert_true(find("/read_file", "POST", &known)->flags & HUTCH_ROUTE_RAW);
	assert_true(find("/files", "GET", &known)->flags & HUTCH_ROUTE_RAW);
	assert_false(find("/run", "POST", &known)->flags & HUTCH_ROUTE_RAW);
	assert_false(find("/kill_process", "POST", &known)->flags & HUTCH_ROUTE_RAW);
}

static void test_file_errno(void **state)
{
	const struct hutch_file_errno *e;

	(void)state;
	e = hutch_file_errno_find(ENOENT);
	assert_non_null(e);
	assert_int_equal(e->status, 404);
	assert_string_equal(e->code, "not_found");
	assert_int_equal(hutch_file_errno_find(EROFS)->status, 403);
	assert_string_equal(hutch_file_errno_find(EPIPE)->code, "incomplete_upload");
	assert_string_equal(hutch_file_errno_find(ENOTEMPTY)->code, "exists");
	assert_int_equal(hutch_file_errno_find(ENOSPC)->status, 507);
	/* Not in the table: the caller answers 500 file_error. */
	assert_null(hutch_file_errno_find(E2BIG));
	assert_null(hutch_file_errno_find(0));
	assert_null(hutch_file_errno_find(-ENOENT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_find),
		cmocka_unit_test(test_route_flags),
		cmocka_unit_test(test_file_errno),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
