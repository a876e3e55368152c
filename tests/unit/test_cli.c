/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the command line parser (cli/args.c): options before and
 * after positionals, "--", where a command starts, attached and bundled
 * values, the sandbox options from the option table, defaults, and which
 * errors name which exit code. The verbs here are made up; the real ones
 * are driven by tests/integration/test_cli.py.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "format.h"
#include "progress.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static int run_nothing(struct hutch_cli_args *a)
{
	(void)a;
	return 0;
}

#define HELP_TEXTS(X) \
	X(d, "d") X(c, "c") X(e, "e") X(t, "t") X(n, "n") X(s, "s") X(g, "g") X(a, "a") X(q, "q")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt exec_opts[] = {
	{ .name = "detach", .short_name = 'd', .kind = HUTCH_CLI_FLAG, A(detach), HELP(d) },
	{ .name = "cwd", .kind = HUTCH_CLI_STRING, A(cwd), .metavar = "DIR", HELP(c) },
	{ .name = "env",
	  .short_name = 'e',
	  .kind = HUTCH_CLI_ENV,
	  A(env),
	  .metavar = "K=V",
	  HELP(e) },
	{ .name = "timeout",
	  .kind = HUTCH_CLI_SECONDS,
	  A(timeout),
	  .metavar = "S",
	  .range = HUTCH_CLI_RANGE_TIMEOUT,
	  HELP(t),
	  .modes = 1 },
	{ .name = "no-stdin",
	  .short_name = 'n',
	  .kind = HUTCH_CLI_FLAG,
	  A(interactive),
	  HELP(n),
	  .modes = 1 },
	{ .name = "" },
};

static const struct hutch_cli_opt other_opts[] = {
	{ .name = "size",
	  .kind = HUTCH_CLI_U64,
	  A(size),
	  .metavar = "N",
	  .range = HUTCH_CLI_RANGE_POOL_SIZE, /* 1 to 256, 4 */
	  HELP(s) },
	{ .name = "grace",
	  .kind = HUTCH_CLI_SECONDS,
	  A(grace),
	  .metavar = "S",
	  .range = HUTCH_CLI_RANGE_GRACE, /* 0 to 3600, -1 */
	  HELP(g) },
	{ .name = "all", .kind = HUTCH_CLI_FLAG, A(all), HELP(a) },
	{ .name = "quiet", .short_name = 'q', .kind = HUTCH_CLI_FLAG, A(quiet), HELP(q) },
	{ .name = "" },
};

static const struct hutch_cli_verb exec_verb = {
	.name = "exec",
	.synopsis = "ID -- CMD",
	.about = "Run.\n",
	.opts = exec_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.command = true,
	.max_pos = 1,
	.run = run_nothing,
};

static const struct hutch_cli_verb create_verb = {
	.name = "create",
	.synopsis = "[OPTIONS]",
	.about = "Create.\n",
	.sandbox_opts = true,
	.run = run_nothing,
};

static const struct hutch_cli_verb other_verb = {
	.name = "other",
	.synopsis = "ID...",
	.about = "Other.\n",
	.opts = other_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = run_nothing,
};

static const struct hutch_cli_verb *const all[] = { &exec_verb, &create_verb, &other_verb, NULL };

/* Parse a NULL-terminated list of words (the first is the verb). */
static int parse(const struct hutch_cli_verb *v, struct hutch_cli_args *a, char **words)
{
	int argc = 0;

	while (words[argc])
		argc++;
	return hutch_cli_parse(v, all, argc, words, a);
}

static void test_options_around_the_id(void **state)
{
	char *before[] = { "exec", "--cwd", "/tmp", "-e", "A=1", "abc", "--", "ls", "-l", NULL };
	char *after[] = { "exec", "abc", "--cwd=/tmp", "-eA=1", "-e", "A=2", "ls", "-l", NULL };
	char *nocmd[] = { "exec", "abc", "-d", NULL };
	struct hutch_cli_args a;

	(void)state;
	assert_int_equal(parse(&exec_verb, &a, before), 0);
	assert_int_equal(a.npos, 1);
	assert_string_equal(a.pos[0], "abc");
	assert_string_equal(a.cwd, "/tmp");
	assert_int_equal(a.env.n, 1);
	assert_string_equal(a.env.kv[0], "A=1");
	assert_non_null(a.cmd);
	assert_string_equal(a.cmd[0], "ls");
	assert_string_equal(a.cmd[1], "-l"); /* the command's own options */
	assert_null(a.cmd[2]);
	hutch_cli_args_done(&a);

	/* The first word after the id starts the command, "--" or not; a
	 * repeated -e keeps the last value. */
	assert_int_equal(parse(&exec_verb, &a, after), 0);
	assert_string_equal(a.pos[0], "abc");
	assert_string_equal(a.cwd, "/tmp");
	assert_string_equal(a.env.kv[0], "A=2");
	assert_int_equal(a.env.n, 1);
	assert_string_equal(a.cmd[0], "ls");
	assert_string_equal(a.cmd[1], "-l");
	hutch_cli_args_done(&a);

	assert_int_equal(parse(&exec_verb, &a, nocmd), 0);
	assert_true(a.detach);
	assert_null(a.cmd);
	hutch_cli_args_done(&a);
}

static void test_double_dash(void **state)
{
	char *words[] = { "other", "--all", "--", "-q", "--size", NULL };
	char *bundle[] = { "other", "-q", "x", "--size", "5", "y", "--grace", "0.5", NULL };
	struct hutch_cli_args a;

	(void)state;
	/* After "--", everything is a positional. */
	assert_int_equal(parse(&other_verb, &a, words), 0);
	assert_true(a.all);
	assert_false(a.quiet);
	assert_int_equal(a.npos, 2);
	assert_string_equal(a.pos[0], "-q");
	assert_string_equal(a.pos[1], "--size");
	assert_int_equal(a.size, 4); /* the default */
	assert_true(a.grace < 0);
	hutch_cli_args_done(&a);

	assert_int_equal(parse(&other_verb, &a, bundle), 0);
	assert_true(a.quiet);
	assert_int_equal(a.npos, 2);
	assert_int_equal(a.size, 5);
	assert_true(a.grace == 0.5);
	hutch_cli_args_done(&a);
}

/* A short command line keeps its positionals in the args (no malloc: the
 * start of `hutch version`, issue 31); a longer one on the heap. Both as
 * many as given, in order; ASan sees a free of the inline room or a leak
 * of the heap's. */
static void test_positionals_inline_and_on_the_heap(void **state)
{
	char *few[] = { "other", "a", "b", NULL };
	char *edge[] = { "other", "a", "b", "c", "d", NULL };
	char *many[] = { "other", "a", "b", "c", "d", "e", "f", "g", "h", NULL };
	char **lines[] = { few, edge, many };
	struct hutch_cli_args a;

	(void)state;
	for (size_t l = 0; l < ELEMENTSOF(lines); l++) {
		size_t n = 0;

		while (lines[l][n + 1])
			n++;
		assert_int_equal(parse(&other_verb, &a, lines[l]), 0);
		assert_int_equal(a.npos, n);
		for (size_t i = 0; i < n; i++)
			assert_string_equal(a.pos[i], lines[l][i + 1]);
		assert_null(a.pos[n]);
		if (n + 2 <= ELEMENTSOF(a.pos_few))
			assert_ptr_equal(a.pos, a.pos_few);
		else
			assert_ptr_not_equal(a.pos, a.pos_few);
		hutch_cli_args_done(&a);
		assert_null(a.pos);
	}
}

static void test_sandbox_options(void **state)
{
	char *words[] = { "create",      "--ttl", "60",          "--instance-type=nano",
		          "--host-port", "8080",  "--host-port", "9090",
		          NULL };
	char *bad[] = { "create", "--ttl", "soon", NULL };
	struct hutch_cli_args a;

	(void)state;
	assert_int_equal(parse(&create_verb, &a, words), 0);
	assert_int_equal(a.cfg->ttl_seconds, 60);
	assert_string_equal(a.cfg->type->name, "nano");
	assert_int_equal(a.cfg->nhost_ports, 2);
	hutch_cli_args_done(&a);
	assert_int_equal(parse(&create_verb, &a, bad), HUTCH_EXIT_USAGE);
	hutch_cli_args_done(&a);
}

/* Every verb's option rows (char arrays, no pointers: issue 31, CLI
 * start): each string keeps its NUL (C lets a literal fill an array
 * without one), each row has a help text from its file's pool, a range
 * the table has, and a table fits hutch_cli_args.given. */
static void test_verb_tables(void **state)
{
	static const struct hutch_cli_verb *const verbs[] = {
		&hutch_verb_build,
		&hutch_verb_completion,
		&hutch_verb_cp,
		&hutch_verb_create,
		&hutch_verb_diff,
		&hutch_verb_doctor,
		&hutch_verb_events,
		&hutch_verb_exec,
		&hutch_verb_fork,
		&hutch_verb_gc,
		&hutch_verb_image_build_default,
		&hutch_verb_image_import,
		&hutch_verb_image_inspect,
		&hutch_verb_image_ls,
		&hutch_verb_image_prune,
		&hutch_verb_image_pull,
		&hutch_verb_image_rm,
		&hutch_verb_inspect,
		&hutch_verb_journal,
		&hutch_verb_kill,
		&hutch_verb_logs,
		&hutch_verb_ls,
		&hutch_verb_net_log,
		&hutch_verb_pool_key,
		&hutch_verb_pool_ls,
		&hutch_verb_pool_start,
		&hutch_verb_pool_stop,
		&hutch_verb_port,
		&hutch_verb_ps,
		&hutch_verb_replay,
		&hutch_verb_rm,
		&hutch_verb_rollback,
		&hutch_verb_run,
		&hutch_verb_set_timeout,
		&hutch_verb_snapshot,
		&hutch_verb_snapshot_inspect,
		&hutch_verb_snapshot_ls,
		&hutch_verb_snapshot_rm,
		&hutch_verb_stats,
		&hutch_verb_stdin,
		&hutch_verb_volume_create,
		&hutch_verb_volume_inspect,
		&hutch_verb_volume_ls,
		&hutch_verb_volume_rm,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		const struct hutch_cli_opt *o = verbs[i]->opts;
		size_t n = 0;

		assert_true(!o || verbs[i]->help_pool);
		for (; o && o->name[0]; o++, n++) {
			assert_non_null(memchr(o->name, 0, sizeof(o->name)));
			assert_non_null(memchr(o->metavar, 0, sizeof(o->metavar)));
			assert_non_null(memchr(o->complete, 0, sizeof(o->complete)));
			assert_true(o->help > 0);
			assert_true(strlen(hutch_cli_opt_help(verbs[i], o)) > 3);
			assert_true(o->range < HUTCH_CLI_RANGE_N);
		}
		assert_true(n <= HUTCH_CLI_OPTS_MAX);
	}
}

static void test_errors(void **state)
{
	static char *cases[][5] = {
		{ "create", "--bogus", NULL },         /* unknown */
		{ "create", "--cwd", "/", NULL },      /* another verb's: does not apply */
		{ "other", "--ttl", "5", NULL },       /* a sandbox option: does not apply */
		{ "create", "--ttl", NULL },           /* needs a value */
		{ "create", "extra", NULL },           /* no positionals */
		{ "other", "--size", NULL },           /* its own message */
		{ "other", "--size", "257", NULL },    /* out of range */
		{ "other", "--grace", "nan", NULL },   /* not finite */
		{ "other", "--all=1", NULL },          /* a flag takes no value */
		{ "exec", "-x", NULL },                /* unknown short */
		{ "exec", "--env", "=x", "id", NULL }, /* no name */
		{ "exec", "--timeout", "-1", NULL },   /* below range */
	};
	const struct hutch_cli_verb *verb_of[] = {
		&create_verb, &create_verb, &other_verb, &create_verb, &create_verb, &other_verb,
		&other_verb,  &other_verb,  &other_verb, &exec_verb,   &exec_verb,   &exec_verb,
	};
	struct hutch_cli_args a;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(verb_of[i], &a, cases[i]), HUTCH_EXIT_USAGE);
		hutch_cli_args_done(&a);
	}
}

static void test_help_and_modes(void **state)
{
	char *help[] = { "create", "--ttl", "5", "-h", NULL };
	char *timeout[] = { "exec", "-d", "--timeout", "3", "id", NULL };
	struct hutch_cli_args a;
	FILE *f;
	char buf[8192];
	size_t n;

	(void)state;
	assert_int_equal(parse(&create_verb, &a, help), HUTCH_CLI_HELP_SHOWN);
	hutch_cli_args_done(&a);
	/* exec -d refuses the options of attached exec. */
	assert_int_equal(parse(&exec_verb, &a, timeout), 0);
	assert_int_equal(hutch_cli_check_mode(&a, 2, "exec -d", ""), HUTCH_EXIT_USAGE);
	assert_int_equal(hutch_cli_check_mode(&a, 1, "exec", ""), 0);
	hutch_cli_args_done(&a);

	/* --help lists every sandbox option of the table with its default. */
	f = tmpfile();
	assert_non_null(f);
	hutch_cli_help(&create_verb, f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_non_null(strstr(buf, "usage: hutch create [OPTIONS]"));
	assert_non_null(strstr(buf, "--ttl S"));
	assert_non_null(strstr(buf, "(default 86400)"));
	assert_non_null(strstr(buf, "--host-port PORT"));
	assert_non_null(strstr(buf, "HUTCH_RESOLVER"));
}

/* The template of format for sandboxes (JSON texts), printed into buf;
 * the parse's return value. */
static int print_tmpl(const char *format, const char *const *json, size_t n, char *buf, size_t size,
                      struct hutch_err *err)
{
	struct hutch_cli_tmpl *t = NULL;
	cJSON *v[4] = { 0 };
	FILE *f;
	size_t len;
	int r = hutch_cli_tmpl_parse(format, &t, err);

	buf[0] = '\0';
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		v[i] = cJSON_Parse(json[i]);
	f = tmpfile();
	assert_non_null(f);
	assert_int_equal(hutch_cli_tmpl_print(t, v, n, f), 0);
	rewind(f);
	len = fread(buf, 1, size - 1, f);
	buf[len] = '\0';
	fclose(f);
	for (size_t i = 0; i < n; i++)
		cJSON_Delete(v[i]);
	hutch_cli_tmpl_free(t);
	return 0;
}

static void test_templates(void **state)
{
	const char *sb[] = {
		"{\"id\": \"abc\", \"status\": \"running\", \"live\": true, \"config\": "
		"{\"network\": \"allow:x.org\", \"ttl_seconds\": 60, \"description\": \"ünï\"}}",
		"{\"id\": \"def\", \"status\": \"dead\", \"live\": false, \"config\": {}}",
	};
	struct hutch_err err = { 0 };
	char buf[1024];

	(void)state;
	assert_int_equal(print_tmpl("{{.ID}}:{{upper .Status}}:{{.Live}}:{{.Config.ttl_seconds}}",
	                            sb, 2, buf, sizeof(buf), &err),
	                 0);
	/* Missing values print as nothing. */
	assert_string_equal(buf, "abc:RUNNING:true:60\ndef:DEAD:false:\n");
	assert_int_equal(print_tmpl("{{json .Description}} {{json .Config.none}}", sb, 2, buf,
	                            sizeof(buf), &err),
	                 0);
	assert_string_equal(buf, "\"ünï\" null\nnull null\n");
	/* Columns count characters, not bytes. */
	assert_int_equal(
	        print_tmpl("table {{.Description}}\\t{{.ID}}", sb, 2, buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "DESCRIPTION   ID\nünï           abc\n              def\n");
	assert_int_equal(print_tmpl("a\\tb\\nc", sb, 1, buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "a\tb\nc\n");
	assert_int_equal(print_tmpl("x {{.ID}", sb, 1, buf, sizeof(buf), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "byte 2 is not closed"));
	assert_int_equal(print_tmpl("{{ .Nope }}", sb, 1, buf, sizeof(buf), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown field '.Nope'"));
}

/* Another verb's fields (stats --format's kind): a computed one, json of
 * a key, and no field with keys below it. */
static char *twice(const cJSON *o)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%d",
	         2 * (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "n")));
	return strdup(buf);
}

static void test_template_fields(void **state)
{
	static hutch_cli_field_text *const texts[] = { NULL, twice };
	static const struct hutch_cli_field rows[] = {
		{ "N", "N", "n", "", 0 },
		{ "Twice", "TWICE", "n", "", 1 },
		{ "Shout", "SHOUT", "", "", 1 },
		{ .name = "" },
	};
	static const struct hutch_cli_fields set = { .fields = rows,
		                                     .texts = texts,
		                                     .names = ".N, .Twice",
		                                     .table = "table {{.N}}\\t{{.Twice}}",
		                                     .verb = "test" };
	struct hutch_cli_tmpl *t = NULL;
	struct hutch_err err = { 0 };
	cJSON *v[1] = { cJSON_Parse("{\"n\": 21}") };
	char buf[256] = "";
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	(void)state;
	assert_non_null(f);
	assert_int_equal(hutch_cli_tmpl_parse_fields("{{.Twice}} {{json .Twice}} {{json .Shout}} "
	                                             "{{.N}}",
	                                             &set, &t, &err),
	                 0);
	assert_int_equal(hutch_cli_tmpl_print(t, v, 1, f), 0);
	hutch_cli_tmpl_free(t);
	assert_int_equal(hutch_cli_tmpl_parse_fields("table", &set, &t, &err), 0);
	assert_int_equal(hutch_cli_tmpl_print(t, v, 1, f), 0);
	hutch_cli_tmpl_free(t);
	fclose(f);
	assert_string_equal(buf, "42 21 \"42\" 21\nN         TWICE\n21        42\n");
	assert_int_equal(hutch_cli_tmpl_parse_fields("{{.ID}}", &set, &t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "(fields: .N, .Twice)"));
	assert_int_equal(hutch_cli_tmpl_parse_fields("{{.N.x}}", &set, &t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no field has fields below it"));
	/* A template refused is the caller's: exit 64 through the table. */
	assert_int_equal(hutch_errc_exit(hutch_err_class(&err)), 64);
	cJSON_Delete(v[0]);
}

static void test_filters(void **state)
{
	cJSON *a = cJSON_Parse("{\"id\": \"abc123\", \"status\": \"running\", \"config\": "
	                       "{\"network\": \"allow:x.org\", \"instance_type\": \"nano\"}}");
	cJSON *specs = cJSON_CreateArray();
	struct hutch_cli_filters f;
	struct hutch_err err = { 0 };

	(void)state;
	assert_int_equal(hutch_cli_filters_parse(NULL, &f, &err), 0);
	assert_true(hutch_cli_filters_match(&f, a));
	cJSON_AddItemToArray(specs, cJSON_CreateString("network=allow"));
	cJSON_AddItemToArray(specs, cJSON_CreateString("id=ab"));
	assert_int_equal(hutch_cli_filters_parse(specs, &f, &err), 0);
	assert_true(hutch_cli_filters_match(&f, a));
	/* Another value of a key given already: either matches. */
	cJSON_AddItemToArray(specs, cJSON_CreateString("id=ff"));
	assert_int_equal(hutch_cli_filters_parse(specs, &f, &err), 0);
	assert_true(hutch_cli_filters_match(&f, a));
	/* Another key: both must. */
	cJSON_AddItemToArray(specs, cJSON_CreateString("status=dead"));
	assert_int_equal(hutch_cli_filters_parse(specs, &f, &err), 0);
	assert_false(hutch_cli_filters_match(&f, a));
	cJSON_AddItemToArray(specs, cJSON_CreateString("network=allowx"));
	assert_int_equal(hutch_cli_filters_parse(specs, &f, &err), -EINVAL);
	assert_int_equal(hutch_err_class(&err), HUTCH_ERRC_USAGE);
	assert_non_null(strstr(err.msg, "'network=allowx'"));
	for (int i = 0; i < HUTCH_CLI_FILTERS_MAX; i++)
		cJSON_AddItemToArray(specs, cJSON_CreateString("id=a"));
	cJSON_DeleteItemFromArray(specs, 4);
	assert_int_equal(hutch_cli_filters_parse(specs, &f, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "too many --filter"));
	cJSON_Delete(specs);
	cJSON_Delete(a);
}

/* The bar: never wider than cols - 1, narrower terminals drop the total,
 * then the digest; numbers a lying report could give do not overflow it. */
static void test_progress_bar(void **state)
{
	struct hutch_image_progress p = { .layer = 2,
		                          .layers = 5,
		                          .diff_id = "sha256:0123456789abcdef",
		                          .read = 12300000,
		                          .size = 40000000,
		                          .total_read = 52300000,
		                          .total_size = 120000000 };
	char buf[512];

	(void)state;
	hutch_cli_progress_format(&p, 80, buf, sizeof(buf));
	assert_string_equal(buf, "layer 2/5 sha256:0123456789ab [===>        ] 12.3/40.0 MB, "
	                         "total 52.3/120.0 MB");
	hutch_cli_progress_format(&p, 50, buf, sizeof(buf));
	assert_string_equal(buf, "layer 2/5 [=======>                ] 12.3/40.0 MB");
	hutch_cli_progress_format(&p, 40, buf, sizeof(buf));
	assert_string_equal(buf, "layer 2/5 [====>         ] 12.3/40.0 MB");
	hutch_cli_progress_format(&p, 20, buf, sizeof(buf));
	assert_string_equal(buf, "layer 2/5 12.3/40.0");
	p.read = p.total_read = UINT64_MAX;
	p.size = 10;
	hutch_cli_progress_format(&p, 200, buf, sizeof(buf));
	assert_true(strlen(buf) <= 199 && strstr(buf, "[=====") && !strchr(buf, '>'));
	p = (struct hutch_image_progress){ .read = 500, .size = 999, .total_size = 999 };
	hutch_cli_progress_format(&p, 60, buf, sizeof(buf));
	assert_string_equal(buf, "archive [===================>                  ] 0.5/1.0 kB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_progress_bar),
		cmocka_unit_test(test_options_around_the_id),
		cmocka_unit_test(test_double_dash),
		cmocka_unit_test(test_positionals_inline_and_on_the_heap),
		cmocka_unit_test(test_sandbox_options),
		cmocka_unit_test(test_verb_tables),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_help_and_modes),
		cmocka_unit_test(test_templates),
		cmocka_unit_test(test_template_fields),
		cmocka_unit_test(test_filters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
