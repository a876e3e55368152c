/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the option table (runtime/options.c) and the warm pool's
 * key (runtime/poolkey.c): every row's default is valid, string and typed
 * JSON setters agree, JSON output and input round-trip through the table,
 * and the pool key is the one earlier versions computed (clients in other
 * languages and running pools depend on it).
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

#include "cmdenv.h"
#include "criu.h"
#include "idmap.h"
#include "lxcfs.h"
#include "options.h"
#include "poolkey.h"

static void count_values(void *ud, const char *s)
{
	(void)s;
	(*(size_t *)ud)++;
}

/* Each row: names, a type, a field inside the struct; the default (if
 * any) re-parses to itself; the CLI and API names find the row. */
static void test_table_rows(void **state)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };
	const struct hutch_option *o;
	size_t n;

	(void)state;
	o = hutch_options(&n);
	assert_true(n >= 13);
	hutch_config_init(&c);
	for (size_t i = 0; i < n; i++) {
		size_t values = 0;
		/* The row's strings (char arrays, no pointers: issue 31) each
		 * keep their NUL: C lets a literal fill an array without one. */
		assert_non_null(memchr(o[i].name, 0, sizeof(o[i].name)));
		assert_non_null(memchr(o[i].cli, 0, sizeof(o[i].cli)));
		assert_non_null(memchr(o[i].env, 0, sizeof(o[i].env)));
		assert_non_null(memchr(o[i].metavar, 0, sizeof(o[i].metavar)));
		assert_non_null(memchr(o[i].def_str, 0, sizeof(o[i].def_str)));
		assert_true(o[i].name[0]);
		assert_non_null(hutch_option_type(&o[i]));
		assert_true(o[i].help > 0 && strlen(hutch_option_help(&o[i])) > 10);
		assert_true(o[i].offset + o[i].size <= sizeof(c));
		assert_true(o[i].cli[0] || o[i].env[0]); /* reachable somehow */
		assert_ptr_equal(hutch_option_find(o[i].name), &o[i]);
		if (o[i].cli[0]) {
			assert_true(o[i].metavar[0]);
			assert_ptr_equal(hutch_option_find_cli(o[i].cli), &o[i]);
		}
		/* At most one of "fixed at creation" and "given at a claim". */
		assert_false((o[i].flags & HUTCH_OPT_POOL_KEY) && (o[i].flags & HUTCH_OPT_SESSION));
		hutch_option_text(&o[i], &c, count_values, &values);
		if (o[i].def_str[0]) {
			hutch_err_clear(&err);
			assert_int_equal(hutch_option_parse(&o[i], &c, o[i].def_str, &err), 0);
		}
	}
	assert_null(hutch_option_find("bogus"));
	assert_null(hutch_option_find_cli("ttl_seconds"));
	assert_int_equal(hutch_config_validate(&c, &err), 0);
	hutch_config_done(&c);
}

static int from_json(struct hutch_config *c, const char *json, unsigned flags,
                     struct hutch_err *err)
{
	cJSON *j = cJSON_Parse(json);
	int r;

	assert_non_null(j);
	hutch_err_clear(err);
	r = hutch_options_from_json(c, j, flags, err);
	cJSON_Delete(j);
	return r;
}

/* The API's setter: numbers as numbers, strings as strings, null unsets
 * text; the messages of the string setter. */
static void test_typed_json(void **state)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };

	(void)state;
	hutch_config_init(&c);
	assert_int_equal(from_json(&c,
	                           "{\"ttl_seconds\": 90, \"idle_timeout_seconds\": 0, "
	                           "\"max_output_bytes\": 1000, \"region\": \"eu1\", "
	                           "\"on_destroy\": \"echo bye\", \"host_ports\": [8080, 9090]}",
	                           0, &err),
	                 0);
	assert_int_equal(c.ttl_seconds, 90);
	assert_int_equal(c.max_output_bytes, 1000);
	assert_string_equal(c.region, "eu1");
	assert_string_equal(c.on_destroy, "echo bye");
	assert_int_equal(c.nhost_ports, 2);
	assert_int_equal(c.host_ports[1], 9090);

	assert_int_equal(from_json(&c, "{\"ttl_seconds\": 1.5}", 0, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid ttl_seconds '1.5': expected a whole number of "
	                             "seconds from 1 to 31622400");
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": -5}", 0, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid ttl_seconds '-5': expected a whole number of "
	                             "seconds from 1 to 31622400");
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": \"60\"}", 0, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid ttl_seconds '60': expected a whole number of "
	                             "seconds from 1 to 31622400, as a JSON number");
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": true}", 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "field 'ttl_seconds' has the wrong type"));
	assert_int_equal(from_json(&c, "{\"max_output_bytes\": 0}", 0, &err), -EINVAL);
	assert_non_null(
	        strstr(err.msg, "invalid max_output_bytes '0': expected a number of bytes"));
	assert_int_equal(from_json(&c, "{\"region\": 5}", 0, &err), -EINVAL);
	assert_int_equal(from_json(&c, "{\"host_ports\": [0]}", 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid host port '0'"));
	assert_int_equal(c.nhost_ports, 2); /* a refused list changes nothing */
	assert_int_equal(c.ttl_seconds, 90);

	assert_int_equal(from_json(&c, "{\"on_destroy\": null}", 0, &err), 0);
	assert_null(c.on_destroy);
	assert_int_equal(from_json(&c, "{\"on_destroy\": \"\"}", 0, &err), -EINVAL);
	assert_string_equal(err.msg, "invalid on_destroy: empty");

	/* Unknown fields, and fields the flags leave out, are refused before
	 * anything is set. */
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": 5, \"bogus\": 1}", 0, &err), -EINVAL);
	assert_string_equal(err.msg, "unknown field 'bogus'");
	assert_int_equal(c.ttl_seconds, 90);
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": 5, \"instance_type\": \"nano\"}",
	                           HUTCH_OPT_SESSION, &err),
	                 -EINVAL);
	assert_string_equal(err.msg, "unknown field 'instance_type'");
	assert_int_equal(from_json(&c, "{\"ttl_seconds\": 5}", HUTCH_OPT_SESSION, &err), 0);
	assert_int_equal(c.ttl_seconds, 5);
	hutch_config_done(&c);
}

/* to_json with flags gives what from_json with the same flags takes: the
 * CLI's claim body is the supervisor's claim input. */
static void test_json_round_trip(void **state)
{
	struct hutch_config a, b;
	struct hutch_err err = { 0 };
	cJSON *j, *k;
	char *ta, *tb;

	(void)state;
	hutch_config_init(&a);
	hutch_config_init(&b);
	assert_int_equal(hutch_config_set(&a, "ttl_seconds", "77", &err), 0);
	assert_int_equal(hutch_config_set(&a, "on_destroy", "true", &err), 0);
	assert_int_equal(hutch_config_set(&a, "region", "eu1", &err), 0);
	j = hutch_options_to_json(&a, HUTCH_OPT_SESSION);
	assert_non_null(j);
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "instance_type"));
	assert_int_equal(hutch_options_from_json(&b, j, HUTCH_OPT_SESSION, &err), 0);
	k = hutch_options_to_json(&b, HUTCH_OPT_SESSION);
	ta = cJSON_PrintUnformatted(j);
	tb = cJSON_PrintUnformatted(k);
	assert_string_equal(ta, tb);
	free(ta);
	free(tb);
	cJSON_Delete(j);
	cJSON_Delete(k);
	/* Swap moves owned values without copying them. */
	hutch_option_swap(hutch_option_find("on_destroy"), &a, &b);
	assert_string_equal(b.on_destroy, "true");
	hutch_config_done(&a);
	hutch_config_done(&b);
}

static void key_of(const char *type, const char *network, const char *ports, const char *resolver,
                   char *buf, size_t size)
{
	struct hutch_config c;
	struct hutch_err err = { 0 };
	char copy[64];

	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "instance_type", type, &err), 0);
	assert_int_equal(hutch_config_set(&c, "network", network, &err), 0);
	snprintf(copy, sizeof(copy), "%s", ports);
	for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
		assert_int_equal(hutch_config_set(&c, "host_ports", p, &err), 0);
	if (resolver)
		assert_int_equal(hutch_config_set(&c, "resolver", resolver, &err), 0);
	hutch_pool_key(&c, buf, size);
	hutch_config_done(&c);
}

/* Keys computed by the pool key's first implementation: a changed key
 * turns every running pool cold. */
static void test_pool_key(void **state)
{
	char key[HUTCH_POOL_KEY_MAX], first[HUTCH_POOL_KEY_MAX];
	struct hutch_config c;
	struct hutch_err err = { 0 };

	(void)state;
	key_of("medium", "none", "", NULL, key, sizeof(key));
	assert_string_equal(key, "medium-none-1888714574d8fab0");
	key_of("small", "all", "8080,9090", NULL, key, sizeof(key));
	assert_string_equal(key, "small-all-21d385031daeb7c1");
	key_of("nano", "allow:pypi.org", "", "192.0.2.53:5353", key, sizeof(key));
	assert_string_equal(key, "nano-allow-9fc3fcd7c4695174");

	/* Per-session options do not change the key; some options keep a
	 * creation away from pools. */
	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "ttl_seconds", "60", &err), 0);
	assert_int_equal(hutch_config_set(&c, "on_destroy", "true", &err), 0);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_equal(key, "medium-none-1888714574d8fab0");
	assert_true(hutch_pool_can_serve(&c));
	assert_int_equal(hutch_config_set(&c, "on_create", "true", &err), 0);
	assert_false(hutch_pool_can_serve(&c));
	hutch_config_done(&c);
	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "setup_script", "true", &err), 0);
	assert_false(hutch_pool_can_serve(&c));
	hutch_config_done(&c);

	/* --no-limits: a pool of its own, served from too. */
	hutch_config_init(&c);
	c.no_limits = true;
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_equal(key, "medium-none-a13f76a79bd31d1d");
	assert_true(hutch_pool_can_serve(&c));
	hutch_config_done(&c);

	/* --change-lists off: a pool of its own too; on (the default) is
	 * the key of before; the switch's values. */
	hutch_config_init(&c);
	assert_true(c.change_lists);
	assert_int_equal(hutch_config_set(&c, "change_lists", "on", &err), 0);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_equal(key, "medium-none-1888714574d8fab0");
	assert_int_equal(hutch_config_set(&c, "change_lists", "off", &err), 0);
	assert_false(c.change_lists);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_not_equal(key, "medium-none-1888714574d8fab0");
	assert_true(hutch_pool_can_serve(&c));
	assert_int_equal(hutch_config_set(&c, "change_lists", "no", &err), -EINVAL);
	assert_false(c.change_lists);
	hutch_config_done(&c);

	/* --net-log off: the same. */
	hutch_config_init(&c);
	assert_true(c.net_log);
	assert_int_equal(hutch_config_set(&c, "net_log", "off", &err), 0);
	assert_false(c.net_log);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_not_equal(key, "medium-none-1888714574d8fab0");
	assert_true(hutch_pool_can_serve(&c));
	hutch_config_done(&c);

	/* An image is another pool; its manifest and store too; "host" is
	 * the pools' key of before --image. */
	hutch_config_init(&c);
	assert_int_equal(hutch_config_set(&c, "image", "host", &err), 0);
	assert_int_equal(hutch_config_set(&c, "image_store", "/srv/store", &err), 0);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_equal(key, "medium-none-1888714574d8fab0");
	assert_int_equal(hutch_config_set(&c, "image", "python:3.12", &err), 0);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_not_equal(key, "medium-none-1888714574d8fab0");
	snprintf(first, sizeof(first), "%s", key);
	snprintf(c.image_manifest, sizeof(c.image_manifest), "sha256:%064d", 1);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_not_equal(key, first);
	snprintf(first, sizeof(first), "%s", key);
	assert_int_equal(hutch_config_set(&c, "image_store", "/srv/other", &err), 0);
	hutch_pool_key(&c, key, sizeof(key));
	assert_string_not_equal(key, first);
	/* Another name forgets the manifest resolved for the first. */
	assert_int_equal(hutch_config_set(&c, "image", "python:3.13", &err), 0);
	assert_string_equal(c.image_manifest, "");
	assert_int_equal(hutch_config_set(&c, "image", "a..b", &err), -EINVAL);
	assert_int_equal(hutch_config_set(&c, "image", "-rf", &err), -EINVAL);
	/* Files to import: paths, and the transports skopeo and podman write. */
	assert_int_equal(hutch_config_set(&c, "image", "../x", &err), 0);
	assert_int_equal(hutch_config_set(&c, "image", "oci:/srv/lay", &err), 0);
	assert_int_equal(hutch_config_set(&c, "image", "docker-archive:./a.tar", &err), 0);
	assert_int_equal(hutch_config_set(&c, "image", "/a\nb", &err), -EINVAL);
	assert_int_equal(hutch_config_set(&c, "image_store", "rel/dir", &err), -EINVAL);
	hutch_config_done(&c);
}

static void test_cmdenv(void **state)
{
	const char *image[] = {
		"PATH=/opt/bin:/usr/bin", "HOME=/root", "LANG=C", "X=1", "X=2", "NOEQ", "=bad", NULL
	};
	char **env = hutch_cmdenv_build(image, NULL);
	const char *const *e = (const char *const *)env;

	(void)state;
	assert_non_null(env);
	assert_string_equal(hutch_cmdenv_get(e, "PATH"), "/opt/bin:/usr/bin");
	assert_string_equal(hutch_cmdenv_get(e, "HOME"), "/home/appuser");
	assert_string_equal(hutch_cmdenv_get(e, "USER"), "appuser");
	assert_string_equal(hutch_cmdenv_get(e, "LANG"), "C");
	assert_string_equal(hutch_cmdenv_get(e, "X"), "1");
	assert_null(hutch_cmdenv_get(e, "NOEQ"));
	assert_int_equal(hutch_cmdenv_len(e), 5);
	hutch_cmdenv_free(env);
	/* No Env at all: the defaults. */
	env = hutch_cmdenv_build(NULL, NULL);
	e = (const char *const *)env;
	assert_string_equal(hutch_cmdenv_get(e, "PATH"), HUTCH_DEFAULT_PATH);
	assert_int_equal(hutch_cmdenv_len(e), HUTCH_DEFAULT_ENV_LEN);
	hutch_cmdenv_free(env);
	/* Header bindings' CA variables win over an image's own. */
	const char *ca_image[] = { "SSL_CERT_FILE=/img.pem", "Y=1", NULL };
	env = hutch_cmdenv_build(ca_image, hutch_ca_env);
	e = (const char *const *)env;
	assert_string_equal(hutch_cmdenv_get(e, "SSL_CERT_FILE"), "/etc/hutch/ca-certificates.crt");
	assert_string_equal(hutch_cmdenv_get(e, "Y"), "1");
	assert_int_equal(hutch_cmdenv_len(e), HUTCH_DEFAULT_ENV_LEN + HUTCH_CA_ENV_LEN + 1);
	hutch_cmdenv_free(env);
}

/* /etc/subuid lines: by name or by uid, first big enough range, hostile text. */
static void test_subid_parse(void **state)
{
	const char *text = "# comment\n"
	                   "alice:100000:65536\n"
	                   "bob:200000:2\n"
	                   "bob:300000:65536\n"
	                   "1234:400000:8\n"
	                   "eve:1:99999999999\n"
	                   "mallory:x:10\n"
	                   "carol:500000:10"; /* no final newline */
	uint32_t start = 0, count = 0;

	(void)state;
	assert_int_equal(hutch_idmap_parse_subid(text, "alice", 1, 4, &start, &count), 0);
	assert_int_equal(start, 100000);
	assert_int_equal(count, 65536);
	/* bob's first range is too small for one sandbox: the next one */
	assert_int_equal(hutch_idmap_parse_subid(text, "bob", 2, 4, &start, &count), 0);
	assert_int_equal(start, 300000);
	assert_int_equal(hutch_idmap_parse_subid(text, "dave", 1234, 4, &start, &count), 0);
	assert_int_equal(start, 400000);
	assert_int_equal(hutch_idmap_parse_subid(text, "carol", 7, 4, &start, &count), 0);
	assert_int_equal(start, 500000);
	/* a prefix of a name is not the name; garbage and overflow are no range */
	assert_int_equal(hutch_idmap_parse_subid(text, "ali", 9, 4, &start, &count), -ENOENT);
	assert_int_equal(hutch_idmap_parse_subid(text, "eve", 9, 4, &start, &count), -ENOENT);
	assert_int_equal(hutch_idmap_parse_subid(text, "mallory", 9, 4, &start, &count), -ENOENT);
	assert_int_equal(hutch_idmap_parse_subid("", "alice", 9, 4, &start, &count), -ENOENT);
	assert_int_equal(hutch_idmap_parse_subid(":::\n::\n:", "", 9, 4, &start, &count), -ENOENT);
}

/* Rootless maps: root is the caller, appuser/nobody/tty one id each, and
 * slots never share an id; root mode keeps its 65536-id ranges. */
static void test_idmap_format(void **state)
{
	struct hutch_idmap m = { .rootless = true,
		                 .uid = 1001,
		                 .gid = 1002,
		                 .subuid = 100000,
		                 .subuid_n = 65536,
		                 .subgid = 200000,
		                 .subgid_n = 65536 };
	char buf[256];

	(void)state;
	assert_true(hutch_idmap_format(&m, 0, false, false, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0 1001 1 1000 100000 1 65534 100001 1");
	assert_true(hutch_idmap_format(&m, 3, true, false, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0 1002 1 1000 200012 1 65534 200013 1 5 200014 1");
	assert_true(hutch_idmap_format(&m, 1, false, true, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0 1001 1\n1000 100004 1\n65534 100005 1\n");
	assert_int_equal(hutch_idmap_app_uid(&m, 2), 100008);
	assert_int_equal(hutch_idmap_format(&m, 0, true, false, buf, 10), -ENOSPC);
	m.rootless = false;
	assert_true(hutch_idmap_format(&m, 1, false, true, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0 268500992 65536\n");
}

/* lxcfs's copy of the host's meminfo: names kept, figures 0 but MemTotal. */
static void test_lxcfs_meminfo(void **state)
{
	static const char host[] = "MemTotal:       24570288 kB\n"
	                           "MemFree:        20000000 kB\n"
	                           "CommitLimit:    12285144 kB\n"
	                           "HugePages_Total:       0\n"
	                           "DirectMap2M:    25135104 kB\n"
	                           "Odd:";
	char *out = hutch_lxcfs_meminfo_render(host);

	(void)state;
	assert_non_null(out);
	assert_string_equal(out, "MemTotal:       24570288 kB\n"
	                         "MemFree: 0 kB\n"
	                         "CommitLimit: 0 kB\n"
	                         "HugePages_Total: 0\n"
	                         "DirectMap2M: 0 kB\n"
	                         "Odd: 0\n");
	free(out);
}

/* What 'criu --version' and 'criu check' print, as measured here: Debian
 * 12's 3.17.1 on Linux 6.18 and a 4.2 built from source. */
static void test_criu_output(void **state)
{
	char buf[512], small[16];

	(void)state;
	hutch_criu_parse_version("Version: 4.2\nGitID: v4.2\n", buf, sizeof(buf));
	assert_string_equal(buf, "4.2");
	hutch_criu_parse_version("Version: 3.17.1\n", buf, sizeof(buf));
	assert_string_equal(buf, "3.17.1");
	hutch_criu_parse_version("criu: not found\n", buf, sizeof(buf));
	assert_string_equal(buf, "");
	hutch_criu_summarize_check(
	        "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds\n"
	        "Error (criu/vdso.c:613): vdso: Failed to fill self vdso symtable\n"
	        "Error (criu/kerndat.c:1615): kerndat_vdso_fill_symtable failed when "
	        "initializing kerndat.\n"
	        "Error (criu/crtools.c:260): Could not initialize kernel features detection.\n",
	        buf, sizeof(buf));
	assert_string_equal(buf, "vdso: Unexpected rt vDSO area bounds; vdso: Failed to fill self "
	                         "vdso symtable; kerndat_vdso_fill_symtable failed when "
	                         "initializing kerndat; Could not initialize kernel features "
	                         "detection");
	hutch_criu_summarize_check("Warn  (criu/kerndat.c:1799): Hardware breakpoints don't seem "
	                           "to work (status=137f)\nLooks good.\n",
	                           buf, sizeof(buf));
	assert_string_equal(buf, "Looks good");
	hutch_criu_summarize_check("", buf, sizeof(buf));
	assert_string_equal(buf, "");
	/* Bounded: cut, always NUL-ended. */
	hutch_criu_summarize_check("Error (x.c:1): a long message here\nError (y): more\n", small,
	                           sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, "a long message ", sizeof(small) - 1);
}

/* The images a restore rewrites, as CRIU 4.2 wrote them here (a plain
 * sandbox of base 1288634368; its host name): the maps moved onto the new
 * range, the host name the new sandbox's, the magics and other fields
 * kept; a map outside the source's range, a truncated file refused. */
static void test_criu_images(void **state)
{
	static const uint8_t userns[] = {
		0x19, 0x43, 0x56, 0x54, 0x06, 0x49, 0x47, 0x55, 0x1c, 0x00, 0x00, 0x00, 0x0a, 0x0c,
		0x08, 0x00, 0x10, 0x80, 0x80, 0xbc, 0xe6, 0x04, 0x18, 0x80, 0x80, 0x04, 0x12, 0x0c,
		0x08, 0x00, 0x10, 0x80, 0x80, 0xbc, 0xe6, 0x04, 0x18, 0x80, 0x80, 0x04,
	};
	static const uint8_t want[] = {
		0x19, 0x43, 0x56, 0x54, 0x06, 0x49, 0x47, 0x55, 0x1a, 0x00, 0x00, 0x00, 0x0a,
		0x0b, 0x08, 0x00, 0x10, 0x80, 0x80, 0x80, 0x02, 0x18, 0x80, 0x80, 0x04, 0x12,
		0x0b, 0x08, 0x00, 0x10, 0x80, 0x80, 0x80, 0x02, 0x18, 0x80, 0x80, 0x04,
	};
	static const uint8_t utsns[] = { 0x19, 0x43, 0x56, 0x54, 0x03, 0x32, 0x47, 0x54,
		                         0x0c, 0x00, 0x00, 0x00, 0x0a, 0x04, 'o',  'l',
		                         'd',  '!',  0x12, 0x04, 'd',  'o',  'm',  '!' };
	uint8_t *out = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(hutch_criu_img_remap_userns(userns, sizeof(userns), 1288634368, 4194304,
	                                             65536, &out, &len),
	                 0);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	free(out);
	/* Another source's range: refused, nothing made. */
	out = NULL;
	assert_int_equal(hutch_criu_img_remap_userns(userns, sizeof(userns), 1288700000, 4194304,
	                                             65536, &out, &len),
	                 -ERANGE);
	assert_null(out);
	assert_int_equal(hutch_criu_img_remap_userns(userns, sizeof(userns) - 3, 1288634368,
	                                             4194304, 65536, &out, &len),
	                 -EBADMSG);
	assert_int_equal(
	        hutch_criu_img_set_nodename(utsns, sizeof(utsns), "hutch-0123456789ab", &out, &len),
	        0);
	assert_int_equal(len, 8 + 4 + 2 + 18 + 6);
	assert_memory_equal(out, utsns, 8);
	assert_int_equal(out[8], 26);
	assert_memory_equal(out + 12,
	                    "\x0a\x12hutch-0123456789ab\x12\x04"
	                    "dom!",
	                    26);
	free(out);
	assert_int_equal(hutch_criu_img_set_nodename(utsns, 10, "x", &out, &len), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_rows),      cmocka_unit_test(test_typed_json),
		cmocka_unit_test(test_json_round_trip), cmocka_unit_test(test_pool_key),
		cmocka_unit_test(test_subid_parse),     cmocka_unit_test(test_idmap_format),
		cmocka_unit_test(test_cmdenv),          cmocka_unit_test(test_lxcfs_meminfo),
		cmocka_unit_test(test_criu_output),     cmocka_unit_test(test_criu_images),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
