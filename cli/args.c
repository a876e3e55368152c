/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command line parser and --help of every verb; see args.h. The
 * sandbox options come from runtime/options.c, so a new option needs no
 * code here.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "options.h"
#include "poolkey.h"
#include "util.h"

#define HELP_COLUMN 22 /* where the help text starts */
#define HELP_WIDTH  92 /* where it wraps */

#define ARG(a, o, T) ((T *)(void *)((char *)(a) + (o)->offset))

#define STR_(x) #x
#define STR(x)  STR_(x)

/* The rows' ranges (HUTCH_CLI_RANGE_*). */
static const struct hutch_cli_range ranges[HUTCH_CLI_RANGE_N] = {
	[HUTCH_CLI_RANGE_TIMEOUT] = { .max = DBL_MAX,
	                              .invalid = "invalid --timeout '%s': give a number of "
	                                         "seconds, e.g. 30" },
	[HUTCH_CLI_RANGE_GRACE] = { .max = 3600,
	                            .def = -1,
	                            .invalid = "--grace must be seconds from 0 to 3600, not '%s'" },
	[HUTCH_CLI_RANGE_FORKS] = { .umin = 1,
	                            .umax = 100,
	                            .udef = 1,
	                            .invalid = "invalid -n '%s': give a number of forks from 1 "
	                                       "to 100",
	                            .missing = "-n needs a number of forks" },
	[HUTCH_CLI_RANGE_POOL_SIZE] = { .umin = 1,
	                                .umax = HUTCH_POOL_MAX_SIZE,
	                                .udef = 4,
	                                .invalid = "invalid --size '%s': give a number of "
	                                           "sandboxes from 1 to " STR(HUTCH_POOL_MAX_SIZE),
	                                .missing =
	                                        "invalid --size '': give a number of "
	                                        "sandboxes from 1 to " STR(HUTCH_POOL_MAX_SIZE) },
	[HUTCH_CLI_RANGE_MAX_BYTES] = { .umin = 1,
	                                .umax = UINT64_MAX,
	                                .invalid = "invalid --max-bytes '%s': expected a number "
	                                           "of bytes, at least 1",
	                                .missing = "--max-bytes needs a number of bytes" },
};

/* A row's range, all 0 when it has none. */
static const struct hutch_cli_range *range_of(const struct hutch_cli_opt *o)
{
	return &ranges[o->range < HUTCH_CLI_RANGE_N ? o->range : HUTCH_CLI_RANGE_NONE];
}

#define JSON_HELP(X) X(json, "print JSON")
const HUTCH_STRPOOL_TYPE(hutch_cli_json_pool_t,
                         JSON_HELP) hutch_cli_json_pool = HUTCH_STRPOOL_INIT(JSON_HELP);

const struct hutch_cli_opt hutch_cli_json_opts[] = {
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  .help = HUTCH_STRPOOL_AT(hutch_cli_json_pool_t, json) },
	{ .name = "" },
};

const char *hutch_cli_opt_help(const struct hutch_cli_verb *verb, const struct hutch_cli_opt *o)
{
	return verb->help_pool ? verb->help_pool + o->help : "";
}

/* The verb's message with its one "%s" replaced by value. */
static int fail_value(const char *message, const char *value)
{
	const char *at = strstr(message, "%s");

	if (!at)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", message);
	return hutch_cli_fail(HUTCH_EXIT_USAGE, "%.*s%s%s", (int)(at - message), message, value,
	                      at + 2);
}

static const struct hutch_cli_opt *find_opt(const struct hutch_cli_verb *v, const char *name,
                                            size_t len, char short_name)
{
	for (const struct hutch_cli_opt *o = v->opts; o && o->name[0]; o++) {
		if (short_name ? o->short_name == short_name
		               : strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	}
	return NULL;
}

/* An option of some verb, or a sandbox option: "does not apply" rather
 * than "unknown". */
static bool is_known(const struct hutch_cli_verb *const *all, const char *name, size_t len,
                     char short_name)
{
	char flag[64];

	for (; all && *all; all++)
		if (find_opt(*all, name, len, short_name))
			return true;
	if (short_name || len >= sizeof(flag))
		return false;
	memcpy(flag, name, len);
	flag[len] = '\0';
	return hutch_option_find_cli(flag) != NULL;
}

int hutch_cli_env_set(struct hutch_cli_env *e, const char *name, size_t nlen, const char *value)
{
	char *kv, **p;

	if (asprintf(&kv, "%.*s=%s", (int)nlen, name, value) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < e->n; i++)
		if (!strncmp(e->kv[i], kv, nlen + 1)) { /* the same name: it goes last */
			free(e->kv[i]);
			memmove(e->kv + i, e->kv + i + 1, (e->n - i - 1) * sizeof(*e->kv));
			e->n--;
			break;
		}
	p = reallocarray(e->kv, e->n + 1, sizeof(*e->kv));
	if (!p) {
		free(kv);
		return -ENOMEM;
	}
	e->kv = p;
	e->kv[e->n++] = kv;
	return 0;
}

void hutch_cli_env_done(struct hutch_cli_env *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->kv[i]);
	free(e->kv);
	e->kv = NULL;
	e->n = 0;
}

static int set_env(struct hutch_cli_args *a, const char *value)
{
	const char *eq = strchr(value, '=');

	if (!eq || eq == value)
		return fail_value("invalid --env '%s': write it as NAME=VALUE", value);
	if (hutch_cli_env_set(&a->env, value, (size_t)(eq - value), eq + 1) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

#define ENV_FILE_MAX (1u << 20)

/* --env-file FILE, as docker reads it: NAME=VALUE per line (the value
 * as written: no quotes removed), '#' lines and blank ones skipped, a NAME
 * alone takes the caller's value (skipped when it has none). */
static int set_env_file(struct hutch_cli_args *a, const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = malloc(ENV_FILE_MAX + 1);
	ssize_t n = fd < 0 ? -errno : !text ? -ENOMEM : hutch_read_all(fd, text, ENV_FILE_MAX + 1);
	char *line, *rest;
	int r;

	if (n < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "cannot read --env-file '%s': %s", path,
		                      strerror((int)-n));
	if ((size_t)n > ENV_FILE_MAX || memchr(text, '\0', (size_t)n))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--env-file '%s': not a text file of at most 1 MiB", path);
	text[n] = '\0';
	for (rest = text; (line = strsep(&rest, "\n"));) {
		_cleanup_free_ char *both = NULL;
		size_t len = strlen(line);
		const char *v;

		if (len && line[len - 1] == '\r')
			line[--len] = '\0';
		line += strspn(line, " \t");
		if (!*line || *line == '#')
			continue;
		if (!strchr(line, '=')) {
			if (!(v = getenv(line)))
				continue;
			if (asprintf(&both, "%s=%s", line, v) < 0)
				return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		}
		r = set_env(a, both ? both : line);
		if (r)
			return r;
	}
	return 0;
}

static int add_to_list(cJSON **list, const char *value)
{
	if (!*list)
		*list = cJSON_CreateArray();
	if (!*list || !cJSON_AddItemToArray(*list, cJSON_CreateString(value)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

static int set_sandbox(struct hutch_cli_args *a, const struct hutch_option *o, const char *value);

/* docker's --mount: the -v spec it means, added to the volumes. */
static int set_mount(struct hutch_cli_args *a, const char *value)
{
	struct hutch_err err = { 0 };
	char spec[HUTCH_VOLUME_SPEC_MAX];

	if (hutch_volume_from_mount(value, spec, sizeof(spec), &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	return set_sandbox(a, hutch_option_find("volumes"), spec);
}

/* One of the verb's own options. */
static int set_opt(struct hutch_cli_args *a, const struct hutch_cli_opt *o, const char *value)
{
	char *end;
	double d;

	switch (o->kind) {
	case HUTCH_CLI_FLAG:
		*ARG(a, o, bool) = true;
		return 0;
	case HUTCH_CLI_STRING:
		*ARG(a, o, const char *) = value;
		return 0;
	case HUTCH_CLI_ENV:
		return set_env(a, value);
	case HUTCH_CLI_ENV_FILE:
		return set_env_file(a, value);
	case HUTCH_CLI_LIST:
		return add_to_list(ARG(a, o, cJSON *), value);
	case HUTCH_CLI_U64:
		if (hutch_parse_u64(value, range_of(o)->umin, range_of(o)->umax,
		                    ARG(a, o, uint64_t)) < 0)
			return fail_value(range_of(o)->invalid, value);
		return 0;
	case HUTCH_CLI_SECONDS:
		d = strtod(value, &end);
		if (end == value || *end || !isfinite(d) || d < range_of(o)->min ||
		    d > range_of(o)->max)
			return fail_value(range_of(o)->invalid, value);
		*ARG(a, o, double) = d;
		return 0;
	case HUTCH_CLI_MOUNT:
		return set_mount(a, value);
	case HUTCH_CLI_REFUSE:
		break;
	}
	return fail_value(hutch_cli_opt_help(a->verb, o), value);
}

/* A sandbox option; a file option's value is the file's text. */
static int set_sandbox(struct hutch_cli_args *a, const struct hutch_option *o, const char *value)
{
	struct hutch_err err = { 0 };
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *text = NULL;
	ssize_t n;

	char flag[64];

	snprintf(flag, sizeof(flag), "--%s", o->cli);
	if (!(o->flags & HUTCH_OPT_CLI_FILE)) {
		if (hutch_option_parse_as(o, a->cfg, value, flag, &err) < 0)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
		return 0;
	}
	/* The user's own file: symlinks are fine here. */
	fd = open(value, O_RDONLY | O_CLOEXEC);
	text = malloc(o->max + 2);
	n = fd < 0 ? -errno : !text ? -ENOMEM : hutch_read_all(fd, text, o->max + 1);
	if (n < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "cannot read --%s '%s': %s", o->cli, value,
		                      strerror((int)-n));
	text[n] = '\0';
	if (strlen(text) != (size_t)n)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "--%s '%s' is not a text file", o->cli,
		                      value);
	if (hutch_option_parse(o, a->cfg, text, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "--%s '%s': %s", o->cli, value, err.msg);
	return 0;
}

/* The state of one parse. */
struct parser {
	const struct hutch_cli_verb *verb;
	const struct hutch_cli_verb *const *all;
	int argc, i;
	char **argv;
};

/* The value of the option at argv[p->i]: attached (--x=V, -xV) or the
 * next argument. */
static int take_value(struct parser *p, const char *spelled, const char *attached,
                      const char *missing, const char **ret)
{
	if (attached) {
		*ret = attached;
		return 0;
	}
	if (p->i + 1 < p->argc) {
		*ret = p->argv[++p->i];
		return 0;
	}
	if (missing)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", missing);
	return hutch_cli_fail(HUTCH_EXIT_USAGE, "option '%s' needs a value; see 'hutch %s --help'",
	                      spelled, p->verb->name);
}

static int not_here(struct parser *p, const char *spelled, const char *name, size_t len,
                    char short_name)
{
	const char *v = p->verb->name;

	if (is_known(p->all, name, len, short_name))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "option '%s' does not apply to '%s'; see 'hutch %s --help'",
		                      spelled, v, v);
	return hutch_cli_fail(HUTCH_EXIT_USAGE,
	                      "unknown option '%s' for '%s'; see 'hutch %s --help'", spelled, v, v);
}

/* The verb's own option o, spelled as spelled; attached: its =VALUE. */
static int own_option(struct parser *p, struct hutch_cli_args *a, const struct hutch_cli_opt *o,
                      const char *spelled, const char *attached)
{
	const char *value = NULL;
	int r;

	a->given[o - p->verb->opts] = spelled;
	if (o->kind == HUTCH_CLI_REFUSE) /* with or without a value: what to use instead */
		return fail_value(hutch_cli_opt_help(p->verb, o), spelled);
	if (o->kind == HUTCH_CLI_FLAG) {
		if (attached)
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "option '%s' takes no value; see 'hutch %s --help'",
			                      spelled, p->verb->name);
		return set_opt(a, o, NULL);
	}
	r = take_value(p, spelled, attached, range_of(o)->missing[0] ? range_of(o)->missing : NULL,
	               &value);
	return r ? r : set_opt(a, o, value);
}

/* "--name" or "--name=VALUE". */
static int long_option(struct parser *p, struct hutch_cli_args *a)
{
	const char *arg = p->argv[p->i], *name = arg + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct hutch_cli_opt *o = find_opt(p->verb, name, len, 0);
	const struct hutch_option *so = NULL;
	char flag[64];
	const char *value = NULL;
	int r;

	if (o) /* spelled as the argument itself, which outlives the parse */
		return own_option(p, a, o, arg, eq ? eq + 1 : NULL);
	if (p->verb->sandbox_opts && len < sizeof(flag)) {
		memcpy(flag, name, len);
		flag[len] = '\0';
		so = hutch_option_find_cli(flag);
	}
	if (!so)
		return not_here(p, arg, name, len, 0);
	snprintf(flag, sizeof(flag), "--%s", so->cli);
	r = take_value(p, flag, eq ? eq + 1 : NULL, NULL, &value);
	return r ? r : set_sandbox(a, so, value);
}

/* The sandbox option with short name c (-p), or NULL. */
static const struct hutch_option *sandbox_short(char c)
{
	size_t n;
	const struct hutch_option *opts = hutch_options(&n);

	for (size_t i = 0; i < n; i++)
		if (opts[i].cli_short == c)
			return &opts[i];
	return NULL;
}

/* "-x", "-xy" (flags), "-xVALUE". */
static int short_options(struct parser *p, struct hutch_cli_args *a)
{
	const char *arg = p->argv[p->i];

	for (const char *c = arg + 1; *c; c++) {
		const struct hutch_cli_opt *o = find_opt(p->verb, NULL, 0, *c);
		const struct hutch_option *so = p->verb->sandbox_opts ? sandbox_short(*c) : NULL;
		char spelled[3] = { '-', *c, '\0' };
		const char *value = NULL;
		int r;

		if (!o && so) { /* -pVALUE or -p VALUE */
			r = take_value(p, spelled, c[1] ? c + 1 : NULL, NULL, &value);
			return r ? r : set_sandbox(a, so, value);
		}
		if (!o)
			return not_here(p, spelled, NULL, 0, *c);
		if (o->kind != HUTCH_CLI_FLAG && o->kind != HUTCH_CLI_REFUSE)
			return own_option(p, a, o, arg, c[1] ? c + 1 : NULL);
		r = own_option(p, a, o, arg, NULL);
		if (r)
			return r;
	}
	return 0;
}

static bool is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

/* A positional, or the start of the command. 1: the command starts here. */
static int positional(struct parser *p, struct hutch_cli_args *a)
{
	const struct hutch_cli_verb *v = p->verb;

	if (v->command && a->npos == v->max_pos) {
		a->cmd = p->argv + p->i;
		return 1;
	}
	if (a->npos == v->max_pos)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "unexpected argument '%s'; see 'hutch %s --help'",
		                      p->argv[p->i], v->name);
	a->pos[a->npos++] = p->argv[p->i];
	return 0;
}

int hutch_cli_parse(const struct hutch_cli_verb *verb, const struct hutch_cli_verb *const *all,
                    int argc, char **argv, struct hutch_cli_args *a)
{
	struct parser p = { verb, all, argc, 1, argv };
	bool options = true;
	int r = 0;

	memset(a, 0, sizeof(*a));
	a->verb = verb;
	a->verbs = all;
	for (const struct hutch_cli_opt *o = verb->opts; o && o->name[0]; o++) {
		if (o->kind == HUTCH_CLI_U64)
			*ARG(a, o, uint64_t) = range_of(o)->udef;
		else if (o->kind == HUTCH_CLI_SECONDS)
			*ARG(a, o, double) = range_of(o)->def;
	}
	/* Only a verb that takes the sandbox options has a configuration:
	 * its defaults run every option row's init (the instance type, the
	 * network policy, the bindings ...), code and data on pages the
	 * other verbs (exec, rm, ls, version ...) never touch otherwise
	 * (issue 31: CLI start). The others have a->cfg NULL. */
	if (verb->sandbox_opts) {
		a->cfg = calloc(1, sizeof(*a->cfg));
		if (!a->cfg)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		hutch_config_init(a->cfg);
	}
	a->pos = (size_t)argc + 1 <= ELEMENTSOF(a->pos_few)
	                 ? a->pos_few
	                 : calloc((size_t)argc + 1, sizeof(*a->pos));
	if (!a->pos)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	for (; p.i < argc && r == 0; p.i++) {
		const char *arg = argv[p.i];
		if (options && !strcmp(arg, "--")) {
			options = false;
			continue;
		}
		if (!options || arg[0] != '-' || !arg[1]) {
			r = positional(&p, a);
			continue;
		}
		if (is_help(arg)) {
			hutch_cli_help(verb, stdout);
			return HUTCH_CLI_HELP_SHOWN;
		}
		r = arg[1] == '-' ? long_option(&p, a) : short_options(&p, a);
	}
	return r > 0 && a->cmd ? 0 : r;
}

void hutch_cli_args_done(struct hutch_cli_args *a)
{
	if (a->cfg) {
		hutch_config_done(a->cfg);
		free(a->cfg);
		a->cfg = NULL;
	}
	hutch_cli_env_done(&a->env);
	cJSON_Delete(a->filter);
	a->filter = NULL;
	if (a->pos != a->pos_few)
		free(a->pos);
	a->pos = NULL;
}

int hutch_cli_run(const struct hutch_cli_verb *verb, const struct hutch_cli_verb *const *all,
                  int argc, char **argv)
{
	struct hutch_cli_args a;
	struct hutch_err err = { 0 };
	int r = hutch_cli_parse(verb, all, argc, argv, &a);

	/* A bad HUTCH_API_TIMEOUT is the caller's setting: 64 before any
	 * request, not a failed request (70) halfway. */
	if (r == 0 && hutch_client_timeout_ms(&err) < -1)
		r = hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	if (r == 0)
		r = verb->run(&a);
	else if (r == HUTCH_CLI_HELP_SHOWN)
		r = 0;
	hutch_cli_args_done(&a);
	return r;
}

int hutch_cli_run_group(const char *group, const char *usage, const char *choices,
                        const struct hutch_cli_verb *const *subs, int argc, char **argv,
                        const struct hutch_cli_verb *const *all)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	size_t skip = strlen(group) + 1;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(usage, sub ? stdout : stderr);
		return sub ? 0 : HUTCH_EXIT_USAGE;
	}
	for (size_t i = 0; subs[i]; i++)
		if (!strcmp(subs[i]->name + skip, sub))
			return hutch_cli_run(subs[i], all, argc - 1, argv + 1);
	return hutch_cli_fail(HUTCH_EXIT_USAGE,
	                      "unknown %s command '%s': use %s; see 'hutch %s --help'", group, sub,
	                      choices, group);
}

int hutch_cli_check_mode(const struct hutch_cli_args *a, unsigned mode, const char *what,
                         const char *takes)
{
	const struct hutch_cli_opt *opts = a->verb->opts;

	for (size_t i = 0; opts && opts[i].name[0]; i++)
		if (a->given[i] && opts[i].modes && !(opts[i].modes & mode))
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "option '%s' does not apply to '%s'%s; see 'hutch %s "
			                      "--help'",
			                      a->given[i], what, takes, a->verb->name);
	return 0;
}

int hutch_cli_config_from_env(struct hutch_config *cfg)
{
	struct hutch_err err = { 0 };
	const struct hutch_option *opts;
	size_t n;

	opts = hutch_options(&n);
	for (size_t i = 0; i < n; i++) {
		const char *v = opts[i].env[0] ? getenv(opts[i].env) : NULL;
		if (v && *v && hutch_option_parse(&opts[i], cfg, v, &err) < 0)
			return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s=%s: %s", opts[i].env, v,
			                      err.msg);
	}
	return 0;
}

/* ---- --help ---- */

/* "  LEFT      TEXT", TEXT wrapped at HELP_WIDTH under HELP_COLUMN. */
static void help_line(FILE *f, const char *left, const char *text)
{
	int col = fprintf(f, "  %s", left);
	const char *w = text;

	while (*w) {
		size_t len = strcspn(w, " ");
		if (col >= HELP_COLUMN && col + 1 + (int)len > HELP_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		col += fprintf(f, "%*s%.*s", col < HELP_COLUMN ? HELP_COLUMN - col : 1, "",
		               (int)len, w);
		w += len;
		w += strspn(w, " ");
	}
	fputc('\n', f);
}

static void join_value(void *ud, const char *s)
{
	char *buf = ud;
	size_t n = strlen(buf);

	snprintf(buf + n, 128 - n, "%s%s", n ? "," : "", s);
}

static void help_sandbox(FILE *f)
{
	struct hutch_config def;
	const struct hutch_option *opts;
	char left[64], text[512], shown[128];
	size_t n;

	hutch_config_init(&def);
	opts = hutch_options(&n);
	fputs("sandbox options:\n", f);
	for (size_t i = 0; i < n; i++) {
		if (!opts[i].cli[0])
			continue;
		shown[0] = '\0';
		hutch_option_text(&opts[i], &def, join_value, shown);
		snprintf(left, sizeof(left), "%s%c%s--%s %s", opts[i].cli_short ? "-" : "",
		         opts[i].cli_short ? opts[i].cli_short : ' ', opts[i].cli_short ? ", " : "",
		         opts[i].cli, opts[i].metavar);
		snprintf(text, sizeof(text), "%s%s%s%s", hutch_option_help(&opts[i]),
		         *shown ? " (default " : "", shown, *shown ? ")" : "");
		help_line(f, left, text);
	}
	fputs("environment:\n", f);
	for (size_t i = 0; i < n; i++)
		if (opts[i].env[0])
			help_line(f, opts[i].env, hutch_option_help(&opts[i]));
	hutch_config_done(&def);
}

/* text, its lines wrapped at HELP_WIDTH. */
static void help_text(FILE *f, const char *text)
{
	int col = 0;

	while (*text) {
		size_t len = strcspn(text, " \n");
		if (col && col + 1 + (int)len > HELP_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		col += fprintf(f, "%s%.*s", col ? " " : "", (int)len, text);
		text += len;
		if (*text == '\n') {
			fputc('\n', f);
			col = 0;
			text++;
		} else {
			text += strspn(text, " ");
		}
	}
}

void hutch_cli_help(const struct hutch_cli_verb *v, FILE *f)
{
	char left[96]; /* "-x, --", a name and a metavar of the row's sizes */

	fprintf(f, "usage: hutch %s%s%s\n\n", v->name, *v->synopsis ? " " : "", v->synopsis);
	help_text(f, v->about);
	if (v->opts && v->opts->name[0]) {
		fputs("\noptions:\n", f);
		for (const struct hutch_cli_opt *o = v->opts; o->name[0]; o++) {
			if (o->kind == HUTCH_CLI_REFUSE)
				continue;
			if (o->short_name)
				snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name,
				         o->name, o->metavar[0] ? " " : "", o->metavar);
			else
				snprintf(left, sizeof(left), "--%s%s%s", o->name,
				         o->metavar[0] ? " " : "", o->metavar);
			help_line(f, left, hutch_cli_opt_help(v, o));
		}
	}
	if (v->sandbox_opts) {
		fputc('\n', f);
		help_sandbox(f);
	}
}
