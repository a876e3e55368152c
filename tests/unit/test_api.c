/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the API's pure parts: the route table lookup (405 versus
 * 404, one row per URL and method, the flags that the request life reads)
 * the errno table of the file endpoints, and the request-body field
 * validator (unknown fields, types, required, bounds, messages).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fields.h"
#include "file-errno.h"
#include "file-req.h"
#include "http.h"
#include "routes.h"

static const struct hutch_api_route *find(const char *url, const char *method, bool *known)
{
	unsigned k = 7; /* must be reset by the lookup */
	const struct hutch_api_route *rt = hutch_api_route_find(url, method, false, &k);

	*known = k != 0;
	return rt;
}

/* The two namespaces: unprefixed paths the contract shares are the
 * executor's, /v1/ is all native, TCP only the executor's. */
static void test_route_namespaces(void **state)
{
	unsigned k;

	(void)state;
	assert_ptr_equal(hutch_api_route_handler(hutch_api_route_find("/run", "POST", false, &k)),
	                 hutch_exec_serve_run);
	assert_ptr_equal(hutch_api_route_handler(hutch_api_route_find("/run", "GET", false, &k)),
	                 hutch_exec_serve_run); /* the executor checks no method there */
	assert_ptr_equal(
	        hutch_api_route_handler(hutch_api_route_find("/v1/run", "POST", false, &k)),
	        hutch_api_serve_run);
	assert_ptr_equal(
	        hutch_api_route_handler(hutch_api_route_find("/v1/list_dir", "POST", false, &k)),
	        hutch_api_serve_file);
	assert_ptr_equal(
	        hutch_api_route_handler(hutch_api_route_find("/list_dir", "POST", false, &k)),
	        hutch_exec_serve_file);
	/* native-only paths: unprefixed and /v1/ */
	assert_ptr_equal(hutch_api_route_handler(hutch_api_route_find("/status", "GET", false, &k)),
	                 hutch_api_serve_status);
	assert_ptr_equal(
	        hutch_api_route_handler(hutch_api_route_find("/v1/status", "GET", false, &k)),
	        hutch_api_serve_status);
	assert_ptr_equal(hutch_api_route_handler(hutch_api_route_find("/v1/", "DELETE", false, &k)),
	                 hutch_api_serve_delete);
	assert_null(hutch_api_route_find("/v1/process_logs_streaming", "GET", false, &k));
	assert_int_equal(k, 0);
	/* the executor's 405 is its own */
	assert_null(hutch_api_route_find("/kill_process", "GET", false, &k));
	assert_int_equal(k, HUTCH_ROUTE_KNOWN_EXECUTOR);
	assert_null(hutch_api_route_find("/v1/kill_process", "GET", false, &k));
	assert_int_equal(k, HUTCH_ROUTE_KNOWN);
	/* TCP: the contract only */
	assert_non_null(hutch_api_route_find("/run", "POST", true, &k));
	assert_non_null(hutch_api_route_find("/health", "GET", true, &k));
	/* only /health is served without the bearer secret */
	assert_true(hutch_api_route_find("/health", "GET", true, &k)->flags &
	            HUTCH_ROUTE_NO_SECRET);
	assert_false(hutch_api_route_find("/run", "POST", true, &k)->flags & HUTCH_ROUTE_NO_SECRET);
	assert_null(hutch_api_route_find("/status", "GET", true, &k));
	assert_int_equal(k, 0);
	assert_null(hutch_api_route_find("/v1/run", "POST", true, &k));
	assert_null(hutch_api_route_find("/", "DELETE", true, &k));
	assert_null(hutch_api_route_find("/files", "GET", true, &k));
	assert_null(hutch_api_route_find("/exec", "POST", true, &k));
}

/* The rows hold their strings (char arrays, no pointers: issue 31), each
 * with its NUL (C lets a literal fill an array without one), and a
 * handler. */
static void test_route_table(void **state)
{
	size_t n;
	const struct hutch_api_route *rt = hutch_api_routes(&n);

	(void)state;
	assert_true(n > 30);
	for (size_t i = 0; i < n; i++) {
		assert_non_null(memchr(rt[i].url, 0, sizeof(rt[i].url)));
		assert_non_null(memchr(rt[i].method, 0, sizeof(rt[i].method)));
		assert_int_equal(rt[i].url[0], '/');
		assert_non_null(hutch_api_route_handler(&rt[i]));
	}
}

static void test_route_find(void **state)
{
	const struct hutch_api_route *rt;
	bool known;

	(void)state;
	rt = find("/v1/run", "POST", &known);
	assert_non_null(rt);
	assert_ptr_equal(hutch_api_route_handler(rt), hutch_api_serve_run);
	assert_string_equal(rt->url, "/run");
	/* Two rows share /files: the method picks one. */
	rt = find("/files", "GET", &known);
	assert_non_null(rt);
	assert_int_equal(rt->arg, HUTCH_FILE_GET);
	rt = find("/files", "PUT", &known);
	assert_non_null(rt);
	assert_int_equal(rt->arg, HUTCH_FILE_PUT);
	assert_ptr_equal(hutch_api_route_handler(find("/", "DELETE", &known)),
	                 hutch_api_serve_delete);
	assert_ptr_equal(hutch_api_route_handler(find("/v1/list_dir", "POST", &known)),
	                 hutch_api_serve_file);

	/* A known URL with another method: 405 (url_known). */
	assert_null(find("/files", "POST", &known));
	assert_true(known);
	assert_null(find("/", "GET", &known));
	assert_true(known);
	assert_null(find("/v1/run", "GET", &known));
	assert_true(known);
	assert_null(find("/v1/health", "get", &known)); /* methods are case-sensitive */
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
	static const char *const pooled[][2] = { { "/v1/health", "GET" },
		                                 { "/status", "GET" },
		                                 { "/", "DELETE" },
		                                 { "/claim", "POST" } };
	static const char *const not_pooled[][2] = {
		{ "/v1/run", "POST" },           { "/v1/run_streaming", "POST" },
		{ "/v1/start_process", "POST" }, { "/process_output", "GET" },
		{ "/v1/write_file", "POST" },    { "/files", "PUT" },
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
	assert_true(find("/v1/health", "GET", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_true(find("/status", "GET", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_false(find("/v1/run", "POST", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_false(find("/claim", "POST", &known)->flags & HUTCH_ROUTE_PASSIVE);
	assert_true(find("/v1/health", "GET", &known)->flags & HUTCH_ROUTE_ENDED);
	assert_false(find("/status", "GET", &known)->flags & HUTCH_ROUTE_ENDED);
	rt = find("/", "DELETE", &known);
	assert_true(rt->flags & HUTCH_ROUTE_ENDED);
	assert_true(rt->flags & HUTCH_ROUTE_WAITS_END);
	assert_true(find("/v1/read_file", "POST", &known)->flags & HUTCH_ROUTE_RAW);
	assert_true(find("/files", "GET", &known)->flags & HUTCH_ROUTE_RAW);
	assert_false(find("/v1/run", "POST", &known)->flags & HUTCH_ROUTE_RAW);
	assert_false(find("/v1/kill_process", "POST", &known)->flags & HUTCH_ROUTE_RAW);
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

static const struct hutch_field spec[] = {
	{ "id", HUTCH_FIELD_STRING, HUTCH_FIELD_REQUIRED | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "missing 'id' (a process id such as \"p1\")" },
	{ "path", HUTCH_FIELD_STRING, 0, 0, 0, NULL },
	{ "grace", HUTCH_FIELD_NUMBER, HUTCH_FIELD_NULLABLE, 0, 3600,
	  "'grace' must be from 0 to {max}" },
	{ "max", HUTCH_FIELD_INTEGER, HUTCH_FIELD_NULLABLE, 1, 268435456,
	  "'max' must be a whole number from 1 to {max}" },
	{ "argv", HUTCH_FIELD_ARRAY, HUTCH_FIELD_REQUIRED, 0, 0, NULL },
	{ "env", HUTCH_FIELD_OBJECT, 0, 0, 0, NULL },
};

static void check(const char *body, unsigned flags, const char *want)
{
	struct hutch_err err = { 0 };
	cJSON *o = cJSON_Parse(body);
	int r;

	assert_non_null(o);
	r = hutch_fields_check(o, spec, sizeof(spec) / sizeof(spec[0]), flags, &err);
	cJSON_Delete(o);
	if (!want) {
		if (r != 0)
			fail_msg("%s refused: %s", body, err.msg);
		return;
	}
	assert_int_equal(r, -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.msg, want);
}

static void test_fields(void **state)
{
	(void)state;
	check("{\"id\": \"p1\", \"argv\": []}", 0, NULL);
	check("{\"id\": \"p1\", \"argv\": [], \"grace\": null, \"max\": null, \"env\": {}}", 0,
	      NULL);
	check("{\"id\": \"p1\", \"argv\": [], \"grace\": 3600, \"max\": 1}", 0, NULL);
	/* Unknown fields come first, in both styles. */
	check("{\"id\": 5, \"bogus\": 1}", 0, "unknown field 'bogus'");
	check("{\"bogus\": 1}", HUTCH_FIELDS_LIST_KNOWN,
	      "unknown field 'bogus' (known: id, path, grace, max, argv, env)");
	/* Required: the row's message when it says "missing", else the default. */
	check("{\"argv\": []}", 0, "missing 'id' (a process id such as \"p1\")");
	check("{\"id\": \"\", \"argv\": []}", 0, "missing 'id' (a process id such as \"p1\")");
	check("{\"id\": \"p1\"}", 0, "missing 'argv'");
	/* Types: the default message, or the row's. */
	check("{\"id\": \"p1\", \"argv\": [], \"path\": 5}", 0, "'path' must be a string");
	check("{\"id\": \"p1\", \"argv\": [], \"path\": null}", 0, "'path' must be a string");
	check("{\"id\": \"p1\", \"argv\": {}}", 0, "'argv' must be an array");
	check("{\"id\": \"p1\", \"argv\": [], \"env\": []}", 0, "'env' must be an object");
	/* Bounds, with {max} filled in (%g, or %.0f for whole numbers). */
	check("{\"id\": \"p1\", \"argv\": [], \"grace\": -1}", 0, "'grace' must be from 0 to 3600");
	check("{\"id\": \"p1\", \"argv\": [], \"grace\": 3600.5}", 0,
	      "'grace' must be from 0 to 3600");
	check("{\"id\": \"p1\", \"argv\": [], \"grace\": \"5\"}", 0,
	      "'grace' must be from 0 to 3600");
	check("{\"id\": \"p1\", \"argv\": [], \"max\": 0}", 0,
	      "'max' must be a whole number from 1 to 268435456");
	check("{\"id\": \"p1\", \"argv\": [], \"max\": 1.5}", 0,
	      "'max' must be a whole number from 1 to 268435456");
	check("{\"id\": \"p1\", \"argv\": [], \"max\": 268435457}", 0,
	      "'max' must be a whole number from 1 to 268435456");
}

static void check_text(const char *body, size_t len, const char *want)
{
	struct hutch_err err = { 0 };
	int r = hutch_fields_check_text(body, len, &err);

	if (!want) {
		if (r != 0)
			fail_msg("%s refused: %s", body, err.msg);
		return;
	}
	assert_int_equal(r, -EINVAL);
	if (!strstr(err.msg, want))
		fail_msg("'%s' is not in '%s'", want, err.msg);
}

/* Duplicate keys (issue 18 #6): cJSON keeps both, lookups take the first. */
static void test_fields_duplicates(void **state)
{
	(void)state;
	check("{\"id\": \"p1\", \"argv\": [], \"id\": \"p2\"}", 0,
	      "duplicate field 'id' in the request body: send each field once");
	check("{\"id\": \"p1\", \"argv\": [], \"env\": {\"B\": \"1\", \"A\": \"2\", \"B\": \"3\"}}",
	      0, "duplicate key 'B' in 'env': send each key once");
	check("{\"id\": \"p1\", \"argv\": [{\"x\": 1, \"x\": 2}]}", 0,
	      "duplicate key 'x' in 'argv': send each key once");
	check("{\"id\": \"p1\", \"argv\": [], \"env\": {\"A\": \"1\", \"a\": \"2\"}}", 0, NULL);
}

/* NUL bytes, escaped or raw, and the field they are in (issue 18 #6). */
#define TEXT(s) s, sizeof(s) - 1

static void test_fields_nul(void **state)
{
	static const char raw[] = "{\"cmd\": \"a\0b\"}";

	(void)state;
	check_text(TEXT("{\"path\": \"safe.txt\\u0000/../x.py\"}"), "'path' contains a NUL byte");
	check_text(TEXT("{\"a\": 1, \"env\": {\"K\": \"v\\u0000\"}}"), "'env' contains");
	check_text(TEXT("{\"env\": {\"K\\u0000\": \"v\"}, \"b\": 2}"), "'env' contains");
	check_text(TEXT("{\"argv\": [\"x\", \"\\u0000\"]}"), "'argv' contains");
	check_text(TEXT(raw), "'cmd' contains a NUL byte");
	check_text(TEXT("{\"a\\u0000\": 1}"), "in a field's name");
	check_text(TEXT("\"\\u0000\""), "NUL byte (\\u0000) at byte 1, outside any field");
	/* An escaped backslash before "u0000" is text, and so is U+0100. */
	check_text(TEXT("{\"cmd\": \"\\\\u0000\"}"), NULL);
	check_text(TEXT("{\"cmd\": \"\\u0100\"}"), NULL);
	check_text(TEXT("{\"a\": \"x\"}"), NULL);
}

/* Every error answer's status comes from its class (base/error.c's
 * table) but where HTTP has a finer one for that class and code. */
static void test_api_status(void **state)
{
	static const struct {
		enum hutch_errc cls;
		const char *code;
		unsigned status;
	} rows[] = {
		{ HUTCH_ERRC_USAGE, NULL, 400 },
		{ HUTCH_ERRC_USAGE, "invalid_request", 400 },
		{ HUTCH_ERRC_NOT_FOUND, "not_found", 404 },
		{ HUTCH_ERRC_GONE, NULL, 410 },
		{ HUTCH_ERRC_CONFLICT, "sandbox_pooled", 409 },
		{ HUTCH_ERRC_LIMIT, "too_large", 413 },
		{ HUTCH_ERRC_NOT_CAPABLE, "not_implemented", 501 },
		{ HUTCH_ERRC_INTERNAL, "spawn_failed", 500 },
		/* the finer rows */
		{ HUTCH_ERRC_NOT_CAPABLE, "unauthorized", 401 },
		{ HUTCH_ERRC_NOT_CAPABLE, "access_denied", 403 },
		{ HUTCH_ERRC_USAGE, "method_not_allowed", 405 },
		{ HUTCH_ERRC_USAGE, "upgrade_required", 426 },
		{ HUTCH_ERRC_LIMIT, "too_many_processes", 429 },
		{ HUTCH_ERRC_LIMIT, "headers_too_large", 431 },
		{ HUTCH_ERRC_LIMIT, "output_over", 500 },
		/* a row is its class's: the same code of another class is the
		 * class's; a class out of range is internal */
		{ HUTCH_ERRC_INTERNAL, "too_many_processes", 500 },
		{ HUTCH_ERRC_USAGE, "access_denied", 400 },
		{ (enum hutch_errc)99, NULL, 500 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		assert_int_equal(hutch_api_status(rows[i].cls, rows[i].code), rows[i].status);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_table),       cmocka_unit_test(test_route_find),
		cmocka_unit_test(test_route_namespaces),  cmocka_unit_test(test_route_flags),
		cmocka_unit_test(test_file_errno),        cmocka_unit_test(test_fields),
		cmocka_unit_test(test_fields_duplicates), cmocka_unit_test(test_fields_nul),
		cmocka_unit_test(test_api_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
