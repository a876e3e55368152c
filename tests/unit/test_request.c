/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for /run request bodies: cmd or argv, env merged over the
 * defaults, cwd, timeout, max_output_bytes, stdin, and the refusals
 * (wrong types, unknown fields, invalid JSON with its byte offset); the
 * JSON-free form of hutch's CLI (base/frame.h) read as its JSON is, for
 * every byte 1-255, and refused with the JSON's messages.
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

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "frame.h"
#include "proto.h"
#include "request.h"

/* Parse a body that must be accepted. */
static void parse_ok(const char *body, struct hutch_run_req *r)
{
	struct hutch_err err = { 0 };

	if (hutch_run_req_parse(body, strlen(body), NULL, r, &err) != 0)
		fail_msg("%s refused: %s", body, err.msg);
}

/* Parse a body that must be refused with code and a message containing why;
 * the output struct must stay untouched. */
static void parse_bad(const char *body, int code, const char *why)
{
	struct hutch_run_req r;
	struct hutch_err err = { 0 };
	int rc;

	memset(&r, 0x5a, sizeof(r));
	rc = hutch_run_req_parse(body, strlen(body), NULL, &r, &err);
	if (rc != code)
		fail_msg("%s: got %d (%s), want %d", body, rc, err.msg, code);
	assert_int_equal(err.code, code);
	/* The caller's mistake, whatever the errno: 400 (docs/errors.md). */
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_USAGE);
	if (!strstr(err.msg, why))
		fail_msg("%s: message lacks '%s': %s", body, why, err.msg);
	assert_ptr_equal(r.argv, (void *)0x5a5a5a5a5a5a5a5aull);
}

static const char *env_get(char **envp, const char *key)
{
	size_t n = strlen(key);

	for (; *envp; envp++)
		if (!strncmp(*envp, key, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static size_t count(char **v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

static void test_cmd(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"cmd\": \"echo hi | tr a-z A-Z\"}", &r);
	assert_int_equal(count(r.argv), 3);
	assert_string_equal(r.argv[0], "/bin/sh");
	assert_string_equal(r.argv[1], "-c");
	assert_string_equal(r.argv[2], "echo hi | tr a-z A-Z");
	/* Defaults of everything else. */
	assert_string_equal(r.cwd, "/workspace");
	assert_true(r.timeout == 0);
	assert_int_equal(r.max_output, 0);
	assert_null(r.stdin_data);
	assert_int_equal(r.stdin_len, 0);
	hutch_run_req_done(&r);
	assert_null(r.argv);
	hutch_run_req_done(&r); /* idempotent */
}

static void test_argv(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"argv\": [\"python3\", \"-c\", \"print(1)\", \"\"]}", &r);
	assert_int_equal(count(r.argv), 4);
	assert_string_equal(r.argv[0], "python3");
	assert_string_equal(r.argv[2], "print(1)");
	assert_string_equal(r.argv[3], "");
	hutch_run_req_done(&r);

	parse_bad("{\"cmd\": \"true\", \"argv\": [\"true\"]}", -EINVAL, "not both");
	parse_bad("{}", -EINVAL, "missing 'cmd'");
	parse_bad("{\"cwd\": \"/\"}", -EINVAL, "missing 'cmd'");
	parse_bad("{\"cmd\": 1}", -EINVAL, "'cmd' must be a string");
	parse_bad("{\"cmd\": [\"true\"]}", -EINVAL, "'cmd' must be a string");
	parse_bad("{\"cmd\": null}", -EINVAL, "'cmd' must be a string");
	parse_bad("{\"argv\": \"true\"}", -EINVAL, "'argv' must be an array of strings");
	parse_bad("{\"argv\": {\"0\": \"true\"}}", -EINVAL, "'argv' must be an array");
	parse_bad("{\"argv\": []}", -EINVAL, "'argv' is empty");
	parse_bad("{\"argv\": [\"\"]}", -EINVAL, "'argv[0]' is empty");
	parse_bad("{\"argv\": [\"ls\", 1]}", -EINVAL, "'argv[1]' must be a string");
	parse_bad("{\"argv\": [null]}", -EINVAL, "'argv[0]' must be a string");
	parse_bad("{\"argv\": [\"ls\", [\"-l\"]]}", -EINVAL, "'argv[1]' must be a string");
}

static void test_argv_too_many(void **state)
{
	size_t n = 4097;
	char *body = malloc(16 + n * 4), *w;

	(void)state;
	assert_non_null(body);
	w = body + sprintf(body, "{\"argv\":[");
	for (size_t i = 0; i < n; i++)
		w += sprintf(w, "%s\"a\"", i ? "," : "");
	sprintf(w, "]}");
	parse_bad(body, -E2BIG, "'argv' has more than 4096 entries");
	free(body);
}

static void test_env(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"cmd\": \"env\"}", &r);
	assert_string_equal(env_get(r.envp, "PATH"), HUTCH_DEFAULT_PATH);
	assert_string_equal(env_get(r.envp, "HOME"), "/home/appuser");
	assert_string_equal(env_get(r.envp, "LANG"), "C.UTF-8");
	assert_string_equal(env_get(r.envp, "USER"), "appuser");
	assert_int_equal(count(r.envp), 4);
	hutch_run_req_done(&r);

	/* Override a default (once, in place), add new ones, values may hold '='. */
	parse_ok("{\"cmd\": \"env\", \"env\": {\"PATH\": \"/opt/bin\", \"_X1\": \"a=b\", "
	         "\"EMPTY\": \"\", \"PA\": \"short\"}}",
	         &r);
	assert_string_equal(env_get(r.envp, "PATH"), "/opt/bin");
	assert_string_equal(env_get(r.envp, "_X1"), "a=b");
	assert_string_equal(env_get(r.envp, "EMPTY"), "");
	assert_string_equal(env_get(r.envp, "PA"), "short");
	assert_string_equal(env_get(r.envp, "HOME"), "/home/appuser");
	assert_int_equal(count(r.envp), 7);
	hutch_run_req_done(&r);

	/* A variable given twice is refused (issue 18 #6: cJSON keeps both). */
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A\": \"1\", \"A\": \"2\"}}", -EINVAL,
	          "duplicate key 'A' in 'env'");
	/* A NUL byte would cut the command short (issue 18 #6). */
	parse_bad("{\"cmd\": \"echo A\\u0000; rm x\"}", -EINVAL, "'cmd' contains a NUL byte");

	parse_bad("{\"cmd\": \"env\", \"env\": {\"1A\": \"x\"}}", -EINVAL,
	          "invalid environment variable name '1A'");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A-B\": \"x\"}}", -EINVAL,
	          "invalid environment variable name 'A-B'");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"\": \"x\"}}", -EINVAL,
	          "invalid environment variable name ''");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A=B\": \"x\"}}", -EINVAL,
	          "invalid environment variable name 'A=B'");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A\": 1}}", -EINVAL, "'env.A' must be a string");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A\": null}}", -EINVAL,
	          "'env.A' must be a string");
	parse_bad("{\"cmd\": \"env\", \"env\": {\"A\": {}}}", -EINVAL, "'env.A' must be a string");
	parse_bad("{\"cmd\": \"env\", \"env\": [\"A=1\"]}", -EINVAL, "'env' must be an object");
	parse_bad("{\"cmd\": \"env\", \"env\": \"A=1\"}", -EINVAL, "'env' must be an object");
}

static void test_cwd(void **state)
{
	struct hutch_run_req r;
	char *body, *w;

	(void)state;
	parse_ok("{\"cmd\": \"pwd\", \"cwd\": \"/tmp\"}", &r);
	assert_string_equal(r.cwd, "/tmp");
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"pwd\", \"cwd\": \"src/app\"}", &r);
	assert_string_equal(r.cwd, "/workspace/src/app");
	hutch_run_req_done(&r);
	parse_bad("{\"cmd\": \"pwd\", \"cwd\": \"\"}", -EINVAL, "'cwd' is empty");
	parse_bad("{\"cmd\": \"pwd\", \"cwd\": 1}", -EINVAL, "'cwd' must be a string");

	body = malloc(5000);
	assert_non_null(body);
	w = body + sprintf(body, "{\"cmd\": \"pwd\", \"cwd\": \"/");
	memset(w, 'd', 3999);
	sprintf(w + 3999, "\"}");
	parse_ok(body, &r); /* 4000 bytes */
	assert_int_equal(strlen(r.cwd), 4000);
	hutch_run_req_done(&r);
	sprintf(w + 3999, "d\"}");
	parse_bad(body, -ENAMETOOLONG, "'cwd' is longer than 4000 bytes");
	free(body);
}

static void test_timeout(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"cmd\": \"true\", \"timeout\": 2.5}", &r);
	assert_true(r.timeout == 2.5);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"timeout\": null}", &r);
	assert_true(r.timeout == 0);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"timeout\": 0}", &r);
	assert_true(r.timeout == 0);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"timeout\": 31622400}", &r);
	hutch_run_req_done(&r);

	parse_bad("{\"cmd\": \"true\", \"timeout\": -1}", -EINVAL, "'timeout' must be a number");
	parse_bad("{\"cmd\": \"true\", \"timeout\": 31622401}", -EINVAL, "'timeout'");
	parse_bad("{\"cmd\": \"true\", \"timeout\": 1e308}", -EINVAL, "'timeout'");
	parse_bad("{\"cmd\": \"true\", \"timeout\": 1e999}", -EINVAL, "'timeout'");
	parse_bad("{\"cmd\": \"true\", \"timeout\": -1e999}", -EINVAL, "'timeout'");
	parse_bad("{\"cmd\": \"true\", \"timeout\": \"5\"}", -EINVAL, "'timeout'");
	parse_bad("{\"cmd\": \"true\", \"timeout\": true}", -EINVAL, "'timeout'");
	/* NaN and Infinity are not JSON. */
	parse_bad("{\"cmd\": \"true\", \"timeout\": NaN}", -EINVAL, "invalid JSON");
	parse_bad("{\"cmd\": \"true\", \"timeout\": Infinity}", -EINVAL, "invalid JSON");
}

static void test_max_output(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"cmd\": \"true\", \"max_output_bytes\": 1}", &r);
	assert_int_equal(r.max_output, 1);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"max_output_bytes\": 268435456}", &r);
	assert_int_equal(r.max_output, 268435456);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"max_output_bytes\": 1e3}", &r);
	assert_int_equal(r.max_output, 1000);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"true\", \"max_output_bytes\": null}", &r);
	assert_int_equal(r.max_output, 0);
	hutch_run_req_done(&r);

	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": 0}", -EINVAL,
	          "'max_output_bytes' must be a whole number from 1 to 268435456");
	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": 268435457}", -EINVAL,
	          "'max_output_bytes'");
	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": -5}", -EINVAL, "'max_output_bytes'");
	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": 1.5}", -EINVAL, "'max_output_bytes'");
	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": 1e999}", -EINVAL,
	          "'max_output_bytes'");
	parse_bad("{\"cmd\": \"true\", \"max_output_bytes\": \"1024\"}", -EINVAL,
	          "'max_output_bytes'");
}

static void test_stdin(void **state)
{
	struct hutch_run_req r;

	(void)state;
	parse_ok("{\"cmd\": \"cat\", \"stdin\": \"line 1\\nline 2\\n\\u00e9\"}", &r);
	assert_string_equal(r.stdin_data, "line 1\nline 2\n\xc3\xa9");
	assert_int_equal(r.stdin_len, 16);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"cat\", \"stdin\": \"\"}", &r);
	assert_non_null(r.stdin_data);
	assert_int_equal(r.stdin_len, 0);
	hutch_run_req_done(&r);
	parse_ok("{\"cmd\": \"cat\", \"stdin\": null}", &r);
	assert_null(r.stdin_data);
	hutch_run_req_done(&r);
	parse_bad("{\"cmd\": \"cat\", \"stdin\": 5}", -EINVAL, "'stdin' must be a string");
	parse_bad("{\"cmd\": \"cat\", \"stdin\": [\"a\"]}", -EINVAL, "'stdin' must be a string");
}

/* exec -t's terminal and /run's byte-exact form. */
static void test_tty_and_encoding(void **state)
{
	struct hutch_run_req r;
	struct hutch_err err = { 0 };
	const char *ok = "{\"cmd\": \"sh\", \"tty\": {\"rows\": 31, \"cols\": 101}, "
	                 "\"encoding\": \"base64\", \"stdin\": \"AP8=\"}";

	(void)state;
	assert_int_equal(hutch_run_req_parse(ok, strlen(ok), NULL, &r, &err), 0);
	assert_true(r.tty && r.base64);
	assert_int_equal(r.rows, 31);
	assert_int_equal(r.cols, 101);
	assert_int_equal(r.stdin_len, 2);
	assert_memory_equal(r.stdin_data, "\0\xff", 2);
	hutch_run_req_done(&r);
	parse_bad("{\"cmd\": \"sh\", \"tty\": {\"rows\": 0}}", -EINVAL,
	          "'tty.rows' must be a whole number from 1 to 65535");
	parse_bad("{\"cmd\": \"sh\", \"tty\": {\"cols\": 2.5}}", -EINVAL, "'tty.cols' must be");
	parse_bad("{\"cmd\": \"sh\", \"tty\": {\"width\": 2}}", -EINVAL,
	          "unknown field 'tty.width' (known: rows, cols)");
	parse_bad("{\"cmd\": \"sh\", \"tty\": true}", -EINVAL, "'tty' must be an object");
	parse_bad("{\"cmd\": \"sh\", \"encoding\": \"base64\", \"stdin\": \"!!\"}", -EINVAL,
	          "'stdin' is not valid base64");
}

static void test_unknown_field(void **state)
{
	(void)state;
	parse_bad("{\"cmd\": \"true\", \"timout\": 5}", -EINVAL,
	          "unknown field 'timout' (known: cmd, argv, cwd, env, stdin, timeout, "
	          "max_output_bytes, encoding, tty)");
	/* Field names are case-sensitive. */
	parse_bad("{\"Cmd\": \"true\"}", -EINVAL, "unknown field 'Cmd'");
}

/* /start_process: the command and "stdin" as a boolean only. */
static void test_start_stdin(void **state)
{
	struct hutch_run_req r = { 0 };
	struct hutch_err err = { 0 };
	static const char *const bad[] = {
		"{\"cmd\": \"cat\", \"stdin\": \"x\"}",
		"{\"cmd\": \"cat\", \"stdin\": 1}",
		"{\"cmd\": \"cat\", \"timeout\": 1}",
	};

	(void)state;
	assert_int_equal(
	        hutch_start_req_parse("{\"cmd\": \"cat\", \"stdin\": true}", 29, NULL, &r, &err),
	        0);
	assert_true(r.stdin_open);
	assert_null(r.stdin_data);
	hutch_run_req_done(&r);
	assert_int_equal(
	        hutch_start_req_parse("{\"cmd\": \"cat\", \"stdin\": null}", 29, NULL, &r, &err),
	        0);
	assert_false(r.stdin_open);
	hutch_run_req_done(&r);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		assert_int_equal(hutch_start_req_parse(bad[i], strlen(bad[i]), NULL, &r, &err),
		                 -EINVAL);
		assert_true(strstr(err.msg, i < 2 ? "'stdin' must be true" : "unknown field") !=
		            NULL);
	}
	/* /run's stdin stays a string */
	parse_bad("{\"cmd\": \"cat\", \"stdin\": true}", -EINVAL, "'stdin' must be a string");
}

static void test_invalid_json(void **state)
{
	struct hutch_run_req r;
	struct hutch_err err = { 0 };
	/* Not NUL-terminated at len: the parser must stay inside the buffer. */
	static const char cut[] = "{\"cmd\": \"true\"}XXXX";

	(void)state;
	/* The offset is that of the first byte cJSON could not take. */
	parse_bad("{\"cmd\": tru}", -EINVAL, "invalid JSON at byte 8 of the request body");
	parse_bad("{\"cmd\" \"true\"}", -EINVAL, "invalid JSON at byte 7 ");
	parse_bad("{\"cmd\": \"true\"", -EINVAL, "invalid JSON at byte ");
	parse_bad("", -EINVAL, "invalid JSON at byte 0 ");
	parse_bad("   ", -EINVAL, "invalid JSON");
	/* Only whitespace may follow the object. */
	parse_bad("{\"cmd\": \"true\"} x", -EINVAL, "invalid JSON at byte 16 ");
	parse_bad("{\"cmd\": \"true\"}{}", -EINVAL, "invalid JSON at byte 15 ");
	parse_ok("  {\"cmd\": \"true\"}\r\n\t ", &r);
	hutch_run_req_done(&r);
	assert_int_equal(hutch_run_req_parse(cut, 15, NULL, &r, &err), 0);
	assert_string_equal(r.argv[2], "true");
	hutch_run_req_done(&r);
	assert_int_equal(hutch_run_req_parse(cut, 14, NULL, &r, &err), -EINVAL);
	assert_int_equal(hutch_run_req_parse(cut, 16, NULL, &r, &err), -EINVAL);
	/* A NUL inside the body is junk too. */
	assert_int_equal(hutch_run_req_parse("{\"cmd\": \"true\"}\0x", 17, NULL, &r, &err),
	                 -EINVAL);
	assert_non_null(strstr(err.msg, "at byte 15 "));

	parse_bad("[\"true\"]", -EINVAL, "the request body must be a JSON object");
	parse_bad("\"true\"", -EINVAL, "must be a JSON object");
	parse_bad("null", -EINVAL, "must be a JSON object");
	parse_bad("42", -EINVAL, "must be a JSON object");
}

/* /exec's "exit_frame": "json" (the default) or "brief"; /run has no
 * such field. */
static void test_exit_frame(void **state)
{
	struct hutch_run_req r;
	struct hutch_err err = { 0 };
	static const char brief[] = "{\"argv\": [\"true\"], \"exit_frame\": \"brief\"}";
	static const char json[] = "{\"argv\": [\"true\"], \"exit_frame\": \"json\"}";
	static const char bad[] = "{\"argv\": [\"true\"], \"exit_frame\": \"short\"}";

	assert_int_equal(hutch_exec_req_parse(brief, strlen(brief), NULL, &r, &err), 0);
	assert_true(r.brief);
	hutch_run_req_done(&r);
	assert_int_equal(hutch_exec_req_parse(json, strlen(json), NULL, &r, &err), 0);
	assert_false(r.brief);
	hutch_run_req_done(&r);
	assert_int_equal(hutch_exec_req_parse(bad, strlen(bad), NULL, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'exit_frame' must be"));
	parse_bad(brief, -EINVAL, "exit_frame");
}

/* A request in both forms: the JSON-free one (bin, its length) and the
 * JSON cJSON prints for the same fields (json). Fields: "a" argv words,
 * "e" env NAME=VALUE, then cwd, timeout text, tty text (NULL: absent). */
struct both {
	char bin[1 << 16];
	size_t len;
	char *json;
};

static void bin_put(struct both *b, char tag, const char *v)
{
	size_t n = strlen(v) + 1;

	assert_true(b->len + 1 + n <= sizeof(b->bin));
	b->bin[b->len++] = tag;
	memcpy(b->bin + b->len, v, n);
	b->len += n;
}

static void both_make(struct both *b, const char *const *argv, const char *const *env,
                      const char *cwd, const char *timeout, const char *tty, bool brief)
{
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "argv"), *e = NULL;

	memcpy(b->bin, HUTCH_REQ_MAGIC, HUTCH_REQ_MAGIC_LEN);
	b->len = HUTCH_REQ_MAGIC_LEN;
	for (; argv && *argv; argv++) {
		bin_put(b, HUTCH_REQ_ARG, *argv);
		cJSON_AddItemToArray(a, cJSON_CreateString(*argv));
	}
	if (cwd) {
		bin_put(b, HUTCH_REQ_CWD, cwd);
		cJSON_AddStringToObject(o, "cwd", cwd);
	}
	if (tty) {
		cJSON *t = cJSON_AddObjectToObject(o, "tty");
		int rows = 0, cols = 0;

		bin_put(b, HUTCH_REQ_TTY, tty);
		if (sscanf(tty, "%d %d", &rows, &cols) == 2) {
			cJSON_AddNumberToObject(t, "rows", rows);
			cJSON_AddNumberToObject(t, "cols", cols);
		}
	}
	for (; env && *env; env++) {
		const char *eq = strchr(*env, '=');
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
		bin_put(b, HUTCH_REQ_ENV, *env);
		if (!e)
			e = cJSON_AddObjectToObject(o, "env");
		cJSON_AddItemToObject(e, name, cJSON_CreateString(eq + 1));
	}
	if (timeout) {
		bin_put(b, HUTCH_REQ_TIMEOUT, timeout);
		cJSON_AddNumberToObject(o, "timeout", strtod(timeout, NULL));
	}
	if (brief) {
		bin_put(b, HUTCH_REQ_BRIEF, "");
		cJSON_AddStringToObject(o, "exit_frame", "brief");
	}
	b->json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	assert_non_null(b->json);
}

static void assert_same_vec(char **x, char **y)
{
	for (; *x && *y; x++, y++)
		assert_string_equal(*x, *y);
	assert_null(*x);
	assert_null(*y);
}

/* Both forms accepted, into the same request. */
static void both_same(struct both *b)
{
	struct hutch_run_req x, y;
	struct hutch_err err = { 0 };

	if (hutch_exec_req_parse_bin(b->bin, b->len, NULL, &x, &err) < 0)
		fail_msg("the JSON-free form refused: %s", err.msg);
	if (hutch_exec_req_parse(b->json, strlen(b->json), NULL, &y, &err) < 0)
		fail_msg("%s refused: %s", b->json, err.msg);
	assert_same_vec(x.argv, y.argv);
	assert_same_vec(x.envp, y.envp);
	assert_string_equal(x.cwd, y.cwd);
	assert_true(x.timeout == y.timeout);
	assert_int_equal(x.tty, y.tty);
	assert_int_equal(x.rows, y.rows);
	assert_int_equal(x.cols, y.cols);
	assert_int_equal(x.brief, y.brief);
	assert_null(x.stdin_data);
	hutch_run_req_done(&x);
	hutch_run_req_done(&y);
	free(b->json);
}

/* Both forms refused with the same code and message. */
static void both_refused(struct both *b, const char *why)
{
	struct hutch_run_req x;
	struct hutch_err ex = { 0 }, ey = { 0 };
	struct hutch_run_req y;
	int rx, ry;

	memset(&x, 0x5a, sizeof(x));
	rx = hutch_exec_req_parse_bin(b->bin, b->len, NULL, &x, &ex);
	ry = hutch_exec_req_parse(b->json, strlen(b->json), NULL, &y, &ey);
	if (ry >= 0)
		hutch_run_req_done(&y);
	if (rx >= 0 || ry >= 0)
		fail_msg("%s: accepted (JSON-free %d, JSON %d)", b->json, rx, ry);
	assert_int_equal(rx, ry);
	assert_string_equal(ex.msg, ey.msg);
	assert_int_equal(hutch_err_class(&ex), HUTCH_ERRC_USAGE);
	if (!strstr(ex.msg, why))
		fail_msg("%s: message lacks '%s': %s", b->json, why, ex.msg);
	assert_ptr_equal(x.argv, (void *)0x5a5a5a5a5a5a5a5aull);
	free(b->json);
}

/* Every byte 1-255 in argv, env values and cwd, alone and in runs, comes
 * out as the JSON's does. */
static void test_bin_bytes(void **state)
{
	static struct both b;
	char words[255][8], vals[255][16], cwd[300];
	const char *argv[257], *env[256];

	(void)state;
	for (int c = 1; c < 256; c++) {
		snprintf(words[c - 1], sizeof(words[c - 1]), "%c%c%c", c, c, 'x');
		snprintf(vals[c - 1], sizeof(vals[c - 1]), "V%03d=%c-%c", c, c, c);
		argv[c] = words[c - 1];
		env[c - 1] = vals[c - 1];
		cwd[c - 1] = (char)c == '/' ? 'x' : (char)c;
	}
	argv[0] = "/bin/echo";
	argv[256] = NULL;
	env[255] = NULL;
	cwd[255] = '\0';
	both_make(&b, argv, env, cwd, "2.5", "24 80", true);
	both_same(&b);
	/* a base variable replaced, the defaults kept, no optional fields */
	both_make(&b, (const char *[]){ "true", NULL }, (const char *[]){ "HOME=/x\xff", NULL },
	          NULL, NULL, NULL, false);
	both_same(&b);
	both_make(&b, (const char *[]){ "sh", "-c", "", NULL }, NULL, "/", "0.1", "", false);
	both_same(&b);
}

/* The CLI's possible mistakes: each refused in both forms alike. */
static void test_bin_refusals(void **state)
{
	static struct both b;
	static const char *many[HUTCH_SPAWN_MAX_ARGS + 2];
	char long_cwd[4100];

	(void)state;
	both_make(&b, (const char *[]){ "", NULL }, NULL, NULL, NULL, NULL, false);
	both_refused(&b, "'argv[0]' is empty");
	both_make(&b, NULL, NULL, NULL, NULL, NULL, false);
	both_refused(&b, "'argv' is empty");
	both_make(&b, (const char *[]){ "true", NULL }, (const char *[]){ "1A=x", NULL }, NULL,
	          NULL, NULL, false);
	both_refused(&b, "invalid environment variable name '1A'");
	both_make(&b, (const char *[]){ "true", NULL }, (const char *[]){ "A-\xff=x", NULL }, NULL,
	          NULL, NULL, false);
	both_refused(&b, "invalid environment variable name");
	both_make(&b, (const char *[]){ "true", NULL }, NULL, "", NULL, NULL, false);
	both_refused(&b, "'cwd' is empty");
	memset(long_cwd, 'd', sizeof(long_cwd) - 1);
	long_cwd[sizeof(long_cwd) - 1] = '\0';
	both_make(&b, (const char *[]){ "true", NULL }, NULL, long_cwd, NULL, NULL, false);
	both_refused(&b, "longer than 4000");
	both_make(&b, (const char *[]){ "true", NULL }, NULL, NULL, "1e12", NULL, false);
	both_refused(&b, "'timeout' must be a number");
	both_make(&b, (const char *[]){ "true", NULL }, NULL, NULL, "-1", NULL, false);
	both_refused(&b, "'timeout' must be a number");
	both_make(&b, (const char *[]){ "true", NULL }, NULL, NULL, NULL, "0 80", false);
	both_refused(&b, "'tty.rows' must be a whole number");
	both_make(&b, (const char *[]){ "true", NULL }, NULL, NULL, NULL, "24 70000", false);
	both_refused(&b, "'tty.cols' must be a whole number");
	for (size_t i = 0; i <= HUTCH_SPAWN_MAX_ARGS; i++)
		many[i] = "x";
	both_make(&b, many, NULL, NULL, NULL, NULL, false);
	both_refused(&b, "'argv' has more than");
}

/* The JSON-free form's own mistakes (no JSON has them). */
static void test_bin_malformed(void **state)
{
#define B(lit) lit, sizeof(lit) - 1
	static const struct {
		const char *body;
		size_t len;
		const char *why;
	} bad[] = {
		{ B("\0hutch-req-1"
		    "atrue"),
		  "no NUL" },
		{ B("\0hutch-req-1"
		    "atrue\0z\0"),
		  "unknown tag" },
		{ B("\0hutch-req-1"
		    "atrue\0\0"),
		  "without its value" },
		{ B("\0hutch-req-2"
		    "atrue\0"),
		  "not the JSON-free form" },
		{ B("\0hutch-req-1"
		    "atrue\0eNOEQ\0"),
		  "without '='" },
		{ B("\0hutch-req-1"
		    "atrue\0c/a\0c/b\0"),
		  "duplicate field 'cwd'" },
		{ B("\0hutch-req-1"
		    "atrue\0b\0b\0"),
		  "duplicate field 'exit_frame'" },
		{ B("\0hutch-req-1"
		    "atrue\0eA=1\0eA=2\0"),
		  "duplicate key 'A' in 'env'" },
		{ B("\0hutch-req-1"
		    "atrue\0tx\0"),
		  "'timeout' must be" },
		{ B("\0hutch-req-1"
		    "atrue\0y24\0"),
		  "'tty.rows' must be" },
	};
#undef B

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hutch_run_req r;
		struct hutch_err err = { 0 };

		memset(&r, 0x5a, sizeof(r));
		assert_int_equal(hutch_exec_req_parse_bin(bad[i].body, bad[i].len, NULL, &r, &err),
		                 -EINVAL);
		assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_USAGE);
		if (!strstr(err.msg, bad[i].why))
			fail_msg("%zu: message lacks '%s': %s", i, bad[i].why, err.msg);
		assert_ptr_equal(r.argv, (void *)0x5a5a5a5a5a5a5a5aull);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmd),           cmocka_unit_test(test_argv),
		cmocka_unit_test(test_argv_too_many), cmocka_unit_test(test_env),
		cmocka_unit_test(test_cwd),           cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_max_output),    cmocka_unit_test(test_stdin),
		cmocka_unit_test(test_unknown_field), cmocka_unit_test(test_tty_and_encoding),
		cmocka_unit_test(test_invalid_json),  cmocka_unit_test(test_start_stdin),
		cmocka_unit_test(test_exit_frame),    cmocka_unit_test(test_bin_bytes),
		cmocka_unit_test(test_bin_refusals),  cmocka_unit_test(test_bin_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
