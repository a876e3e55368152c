/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/jsonw.c: the JSON writer of state.json and the journal prints what
 * cJSON_PrintUnformatted() prints for the same tree (byte for byte; numbers
 * by value, as cJSON's own print of them changes with its version), for
 * hostile strings (every byte, keys too), numbers at every edge of cJSON's
 * formats, nesting and the writer's own failures; and writing loads no
 * libcjson.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "cjson-dl.h"
#include "config.h"
#include "jsonw.h"
#include "options.h"

/* Every byte but NUL, alone and in runs, and a few mixes. */
#define NSTR 300
static char strs[NSTR][64];

static void make_strings(void)
{
	static const char *const mixes[] = { "",
		                             "plain",
		                             "q\"uote\\back/slash",
		                             "\b\f\n\r\t\v\a",
		                             "caf\xc3\xa9 \xff\xfe \xed\xa0\x80 \xf4\x90\x80\x80",
		                             "\xc3", /* a cut sequence */
		                             "\\u0000 \\\" </script>",
		                             "\x7f\x80\x9f\xa0",
		                             "id-0123456789ab",
		                             "/var/tmp/rt/abc/api.sock" };
	size_t i = 0;

	for (int c = 1; c < 256; c++, i++)
		snprintf(strs[i], sizeof(strs[i]), "%c%c%c", c, 'x', c);
	for (size_t m = 0; m < sizeof(mixes) / sizeof(mixes[0]); m++, i++)
		snprintf(strs[i], sizeof(strs[i]), "%s", mixes[m]);
	for (; i < NSTR; i++) /* pseudo-random bytes, no NUL */
		for (size_t k = 0; k < sizeof(strs[i]) - 1; k++)
			strs[i][k] = (char)(1 + (i * 131 + k * 7919 + (k * k * i)) % 255);
}

static const double nums[] = { 0,
	                       -0.0,
	                       1,
	                       -1,
	                       0.5,
	                       0.1,
	                       1.0 / 3,
	                       2.0 / 3,
	                       -2.5,
	                       1e-300,
	                       4.9e-324,
	                       1e300,
	                       1.7976931348623157e308,
	                       (double)INT_MAX,
	                       (double)INT_MAX + 1,
	                       (double)INT_MAX - 0.5,
	                       (double)INT_MIN,
	                       (double)INT_MIN - 1,
	                       (double)INT_MIN + 0.5,
	                       4294967295.0,
	                       4194304,
	                       67108864,
	                       2147483648.0,
	                       21474836480.0,
	                       1796648684.0,
	                       1796648684123.0,
	                       9007199254740992.0,
	                       9007199254740993.0,
	                       123456789012345678.0,
	                       18446744073709551615.0,
	                       9223372036854775807.0,
	                       -9223372036854775808.0,
	                       0.30000000000000004,
	                       100.25,
	                       1234.5678,
	                       NAN,
	                       INFINITY,
	                       -INFINITY };

/* The writer's text for the test tree, then cJSON's for the same tree.
 * Not inlined: GCC 12 then takes the returned text for a pointer to its
 * local (-Wdangling-pointer, a false positive). */
__attribute__((noinline)) static char *write_tree(void)
{
	struct hutch_jw w;
	char *text = NULL, key[8];
	size_t len;

	hutch_jw_init(&w, SIZE_MAX);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_open(&w, "strings", '[');
	for (size_t i = 0; i < NSTR; i++)
		hutch_jw_str(&w, NULL, strs[i]);
	hutch_jw_close(&w, '[');
	hutch_jw_open(&w, "keys", '{');
	for (size_t i = 0; i < NSTR; i++)
		hutch_jw_str(&w, strs[i], strs[NSTR - 1 - i]);
	hutch_jw_close(&w, '{');
	hutch_jw_open(&w, "nums", '{');
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		snprintf(key, sizeof(key), "n%zu", i);
		hutch_jw_num(&w, key, nums[i]);
	}
	for (unsigned i = 0; i < 2000; i++) { /* doubles of every exponent */
		uint64_t bits = (uint64_t)i * 0x9e3779b97f4a7c15ull;
		double d;
		memcpy(&d, &bits, sizeof(d));
		hutch_jw_num(&w, "r", d);
		hutch_jw_num(&w, "i", (double)(int64_t)(bits >> (i % 64)));
	}
	hutch_jw_close(&w, '{');
	hutch_jw_str(&w, "skipped", NULL); /* nothing, as cJSON adds nothing */
	hutch_jw_bool(&w, "t", true);
	hutch_jw_bool(&w, "f", false);
	hutch_jw_null(&w, "z");
	hutch_jw_open(&w, "empty_obj", '{');
	hutch_jw_close(&w, '{');
	hutch_jw_open(&w, "empty_arr", '[');
	hutch_jw_close(&w, '[');
	hutch_jw_open(&w, "nest", '[');
	hutch_jw_open(&w, NULL, '[');
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_open(&w, "a", '[');
	hutch_jw_num(&w, NULL, 1);
	hutch_jw_null(&w, NULL);
	hutch_jw_bool(&w, NULL, true);
	hutch_jw_close(&w, '[');
	hutch_jw_close(&w, '{');
	hutch_jw_close(&w, '[');
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_close(&w, '{');
	hutch_jw_close(&w, '[');
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), 0);
	assert_int_equal(len, strlen(text));
	return text;
}

static cJSON *cjson_tree_itself(void)
{
	cJSON *o = cJSON_CreateObject(), *a, *k, *n, *nest, *in, *io;
	char key[8];

	a = cJSON_AddArrayToObject(o, "strings");
	for (size_t i = 0; i < NSTR; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(strs[i]));
	k = cJSON_AddObjectToObject(o, "keys");
	for (size_t i = 0; i < NSTR; i++)
		cJSON_AddStringToObject(k, strs[i], strs[NSTR - 1 - i]);
	n = cJSON_AddObjectToObject(o, "nums");
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		snprintf(key, sizeof(key), "n%zu", i);
		cJSON_AddNumberToObject(n, key, nums[i]);
	}
	for (unsigned i = 0; i < 2000; i++) {
		uint64_t bits = (uint64_t)i * 0x9e3779b97f4a7c15ull;
		double d;
		memcpy(&d, &bits, sizeof(d));
		cJSON_AddNumberToObject(n, "r", d);
		cJSON_AddNumberToObject(n, "i", (double)(int64_t)(bits >> (i % 64)));
	}
	cJSON_AddStringToObject(o, "skipped", NULL);
	cJSON_AddBoolToObject(o, "t", true);
	cJSON_AddBoolToObject(o, "f", false);
	cJSON_AddNullToObject(o, "z");
	cJSON_AddObjectToObject(o, "empty_obj");
	cJSON_AddArrayToObject(o, "empty_arr");
	nest = cJSON_AddArrayToObject(o, "nest");
	in = cJSON_CreateArray();
	io = cJSON_CreateObject();
	a = cJSON_AddArrayToObject(io, "a");
	cJSON_AddItemToArray(a, cJSON_CreateNumber(1));
	cJSON_AddItemToArray(a, cJSON_Parse("null")); /* no CreateNull in cjson-dl */
	cJSON_AddItemToArray(a, cJSON_Parse("true"));
	cJSON_AddItemToArray(in, io);
	cJSON_AddItemToArray(nest, in);
	cJSON_AddItemToArray(nest, cJSON_CreateObject());
	return o;
}

static char *cjson_tree(void)
{
	cJSON *o = cjson_tree_itself();
	char *text = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	return text;
}

/* The two texts are the same: byte for byte but the numbers, which are
 * compared by value read back (cJSON's own print of them changes with its
 * version: 1.7.15 prints -0.0 as "-0", 1.7.18 as "0"; either reads back
 * as the value written). The tree's numbers are all in "nums", between
 * "keys" and "t". */
static void assert_same_text(const char *mine, const char *theirs)
{
	const char *ma = strstr(mine, ",\"nums\":{"), *ta = strstr(theirs, ",\"nums\":{");
	const char *mz, *tz;
	cJSON *a, *b, *x, *y;

	assert_non_null(ma);
	assert_non_null(ta);
	assert_int_equal(ma - mine, ta - theirs);
	assert_memory_equal(mine, theirs, (size_t)(ma - mine));
	mz = strstr(ma, "},\"t\":true,");
	tz = strstr(ta, "},\"t\":true,");
	assert_non_null(mz);
	assert_non_null(tz);
	assert_string_equal(mz, tz);
	a = cJSON_Parse(mine);
	b = cJSON_Parse(theirs);
	assert_non_null(a);
	assert_non_null(b);
	x = cJSON_GetObjectItemCaseSensitive(a, "nums")->child;
	y = cJSON_GetObjectItemCaseSensitive(b, "nums")->child;
	for (; x && y; x = x->next, y = y->next) {
		assert_string_equal(x->string, y->string);
		assert_int_equal(x->type, y->type); /* NaN and infinities: null */
		if (x->type == cJSON_Number)
			assert_true(x->valuedouble == y->valuedouble);
	}
	assert_null(x);
	assert_null(y);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

/* Runs first: the writer and a config written by it load no libcjson,
 * then both texts are cJSON's. */
static void test_same_as_cjson(void **state)
{
	struct hutch_config c;
	struct hutch_jw w;
	char *mine, *theirs, *cfg_text = NULL;
	size_t len;
	cJSON *cfg;

	(void)state;
	make_strings();
	mine = write_tree();
	hutch_config_init(&c);
	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_config_write(&c, NULL, &w);
	assert_int_equal(hutch_jw_finish(&w, &cfg_text, &len), 0);
	assert_false(hutch_cjson_is_loaded());

	theirs = cjson_tree();
	assert_same_text(mine, theirs);
	/* the config's text read back and printed by cJSON is the same */
	cfg = cJSON_Parse(cfg_text);
	assert_non_null(cfg);
	free(theirs);
	theirs = cJSON_PrintUnformatted(cfg);
	assert_string_equal(cfg_text, theirs);
	cJSON_Delete(cfg);
	hutch_config_done(&c);
	free(theirs);
	free(mine);
	free(cfg_text);
}

/* Hostile option values (description, image store) through the config. */
static void test_config_hostile(void **state)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };
	cJSON *j;
	char *a, *b = NULL;
	struct hutch_jw w;
	size_t len;

	(void)state;
	make_strings();
	for (size_t i = 0; i < NSTR; i++) {
		hutch_config_init(&c);
		if (strs[i][0])
			assert_int_equal(hutch_config_set(&c, "description", strs[i], &err), 0);
		snprintf(c.image_store, sizeof(c.image_store), "%s", strs[NSTR - 1 - i]);
		j = hutch_config_to_json(&c);
		assert_non_null(j);
		a = cJSON_PrintUnformatted(j);
		hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
		hutch_config_write(&c, NULL, &w);
		assert_int_equal(hutch_jw_finish(&w, &b, &len), 0);
		assert_string_equal(a, b);
		if (strs[i][0])
			assert_string_equal(
			        cJSON_GetObjectItemCaseSensitive(j, "description")->valuestring,
			        strs[i]);
		free(a);
		free(b);
		cJSON_Delete(j);
		hutch_config_done(&c);
	}
}

static void test_failures(void **state)
{
	struct hutch_jw w;
	char *text = (char *)"untouched";
	size_t len = 7;

	(void)state;
	/* over the cap: -E2BIG, nothing returned */
	hutch_jw_init(&w, 8);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_str(&w, "key", "a value longer than eight bytes");
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), -E2BIG);
	assert_string_equal(text, "untouched");
	assert_int_equal(len, 7);
	/* the cap counts the NUL: "{}" fits in 3, not in 2 */
	hutch_jw_init(&w, 3);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), 0);
	assert_string_equal(text, "{}");
	free(text);
	hutch_jw_init(&w, 2);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), -E2BIG);
	/* unbalanced, both ways */
	hutch_jw_init(&w, 64);
	hutch_jw_open(&w, NULL, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), -EINVAL);
	hutch_jw_init(&w, 64);
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), -EINVAL);
	/* too deep */
	hutch_jw_init(&w, 4096);
	for (int i = 0; i <= HUTCH_JW_DEPTH; i++)
		hutch_jw_open(&w, NULL, '[');
	for (int i = 0; i <= HUTCH_JW_DEPTH; i++)
		hutch_jw_close(&w, '[');
	assert_int_equal(hutch_jw_finish(&w, &text, &len), -EINVAL);
	/* the tree a failed writer gives is none */
	hutch_jw_init(&w, 4);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_str(&w, "k", "too long");
	hutch_jw_close(&w, '{');
	assert_null(hutch_jw_to_cjson(&w));
}

/* A tree printed by cJSON and written raw among the writer's members (the
 * journal's "egress") is the same text as cJSON's print of the whole, for
 * every hostile string as key and value; NULL writes nothing. */
static void test_raw(void **state)
{
	struct hutch_jw w;
	char *mine, *inner_text, *theirs;
	size_t len;
	cJSON *whole = cJSON_CreateObject(), *inner = cJSON_CreateObject();

	(void)state;
	make_strings();
	for (size_t i = 0; i < NSTR; i++)
		cJSON_AddStringToObject(inner, strs[i], strs[(i + 7) % NSTR]);
	cJSON_AddNumberToObject(inner, "n", 3.25);
	inner_text = cJSON_PrintUnformatted(inner);
	assert_non_null(inner_text);
	hutch_jw_init(&w, SIZE_MAX);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_str(&w, strs[3], strs[4]);
	hutch_jw_raw(&w, "egress", inner_text);
	hutch_jw_raw(&w, "none", NULL);
	hutch_jw_num(&w, "ms", 1.5);
	hutch_jw_close(&w, '{');
	assert_int_equal(hutch_jw_finish(&w, &mine, &len), 0);
	cJSON_AddStringToObject(whole, strs[3], strs[4]);
	cJSON_AddItemToObject(whole, "egress", inner);
	cJSON_AddNumberToObject(whole, "ms", 1.5);
	theirs = cJSON_PrintUnformatted(whole);
	assert_string_equal(mine, theirs);
	assert_int_equal(len, strlen(theirs));
	cJSON_Delete(whole);
	free(inner_text);
	free(mine);
	free(theirs);
}

/* A tree's compact text laid out by hutch_jw_pretty() is cJSON_Print()'s
 * of the tree (its numbers printed by cJSON both times: parsed back, the
 * largest doubles of the test tree are infinities). */
static void assert_pretty_as_cjson(cJSON *tree)
{
	char *compact, *theirs, *mine = NULL;
	size_t len;

	assert_non_null(tree);
	compact = cJSON_PrintUnformatted(tree);
	theirs = cJSON_Print(tree);
	assert_int_equal(hutch_jw_pretty(compact, strlen(compact), &mine, &len), 0);
	assert_int_equal(len, strlen(mine));
	assert_string_equal(mine, theirs);
	cJSON_Delete(tree);
	free(compact);
	free(theirs);
	free(mine);
}

/* create --json's layout without libcjson: every shape (empty objects
 * and arrays at each depth, arrays of objects, hostile strings full of
 * braces, colons, commas and escaped quotes, keys too), the config, and
 * what is not such text refused. */
static void test_pretty(void **state)
{
	static const char *const shapes[] = {
		"{}",
		"[]",
		"{\"a\":{}}",
		"{\"a\":[]}",
		"[{}]",
		"[[]]",
		"[{},[],{}]",
		"[1,\"x\",null]",
		"{\"a\":[{\"b\":{\"c\":[]},\"d\":[1,2]},{}],\"e\":{\"f\":{}}}",
		"\"s\"",
		"1",
		"true",
		"{\"k\\\"{:,\":\"v\\\\,[]}\\\"\",\"x\":\"\\\"\"}",
	};
	static const char *const bad[] = { "{", "[}", "{]", "}", "{\"a", "\"\\" };
	struct hutch_config c;
	struct hutch_jw w;
	char *text = NULL, *out = NULL;
	size_t len;

	(void)state;
	make_strings();
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		assert_pretty_as_cjson(cJSON_Parse(shapes[i]));
	assert_pretty_as_cjson(cjson_tree_itself());
	hutch_config_init(&c);
	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_config_write(&c, NULL, &w);
	assert_int_equal(hutch_jw_finish(&w, &text, &len), 0);
	assert_pretty_as_cjson(cJSON_Parse(text));
	free(text);
	hutch_config_done(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(hutch_jw_pretty(bad[i], strlen(bad[i]), &out, &len), -EINVAL);
	text = malloc(2 * HUTCH_JW_DEPTH + 2);
	assert_non_null(text);
	memset(text, '[', HUTCH_JW_DEPTH + 1);
	memset(text + HUTCH_JW_DEPTH + 1, ']', HUTCH_JW_DEPTH + 1);
	assert_int_equal(hutch_jw_pretty(text, 2 * HUTCH_JW_DEPTH + 2, &out, &len), -EINVAL);
	assert_int_equal(hutch_jw_pretty(text + 1, 2 * HUTCH_JW_DEPTH, &out, &len), 0);
	free(out);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_as_cjson), cmocka_unit_test(test_config_hostile),
		cmocka_unit_test(test_failures),      cmocka_unit_test(test_raw),
		cmocka_unit_test(test_pretty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
