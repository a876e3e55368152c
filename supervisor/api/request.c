/* SPDX-License-Identifier: Apache-2.0 */
/* API request bodies; see request.h. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base64.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "config.h"
#include "fields.h"
#include "frame.h"
#include "proto.h"
#include "request.h"

/* The command: /run's fields and /start_process's. */
/* clang-format off */
#define COMMAND_FIELDS \
	{ "cmd", HUTCH_FIELD_STRING, 0, 0, 0, NULL }, \
	{ "argv", HUTCH_FIELD_ARRAY, 0, 0, 0, "'argv' must be an array of strings" }, \
	{ "cwd", HUTCH_FIELD_STRING, 0, 0, 0, NULL }, \
	{ "env", HUTCH_FIELD_OBJECT, 0, 0, 0, "'env' must be an object of strings" }
/* clang-format on */

/* clang-format off */
#define RUN_FIELDS \
	COMMAND_FIELDS, \
	{ "stdin", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE, 0, 0, NULL }, \
	{ "timeout", HUTCH_FIELD_NUMBER, HUTCH_FIELD_NULLABLE, 0, (double)HUTCH_MAX_TTL, \
	  "'timeout' must be a number of seconds >= 0 (0 or null: no timeout)" }, \
	{ "max_output_bytes", HUTCH_FIELD_INTEGER, HUTCH_FIELD_NULLABLE, 1, \
	  (double)HUTCH_MAX_MAX_OUTPUT, \
	  "'max_output_bytes' must be a whole number from 1 to {max}" }, \
	{ "encoding", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE, 0, 0, NULL }, \
	{ "tty", HUTCH_FIELD_OBJECT, HUTCH_FIELD_NULLABLE, 0, 0, \
	  "'tty' must be an object: {\"rows\": R, \"cols\": C}" }
/* clang-format on */

static const struct hutch_field run_fields[] = { RUN_FIELDS };
/* /exec's (and hutch run's command on its hand-over): /run's, and the
 * form of the exit frame. */
static const struct hutch_field exec_fields[] = {
	RUN_FIELDS,
	{ "exit_frame", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE, 0, 0, NULL },
};
/* /start_process's: the command (no timeout or output cap),
 * and "stdin": true to keep its standard input open (POST /process_stdin). */
static const struct hutch_field start_fields[] = {
	COMMAND_FIELDS,
	{ "stdin", HUTCH_FIELD_BOOL, HUTCH_FIELD_NULLABLE, 0, 0,
	  "'stdin' must be true (keep the process's stdin open for POST /process_stdin) or "
	  "false" },
};

void hutch_run_req_done(struct hutch_run_req *r)
{
	for (char **p = r->argv; p && *p; p++)
		free(*p);
	for (char **p = r->envp; p && *p; p++)
		free(*p);
	free(r->argv);
	free(r->envp);
	free(r->cwd);
	free(r->stdin_data);
	memset(r, 0, sizeof(*r));
}

static bool env_name_is_valid(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

/* r->argv for n words (JSON's argv, or the JSON-free form's). */
static int argv_new(size_t n, struct hutch_run_req *r, struct hutch_err *err)
{
	if (n == 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'argv' is empty: give at least the program");
	if (n > HUTCH_SPAWN_MAX_ARGS)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -E2BIG,
		                           "'argv' has more than %d entries", HUTCH_SPAWN_MAX_ARGS);
	r->argv = calloc(n + 1, sizeof(char *));
	return r->argv ? 0 : -ENOMEM;
}

static int argv0_check(const struct hutch_run_req *r, struct hutch_err *err)
{
	if (!*r->argv[0])
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'argv[0]' is empty: give the program to run");
	return 0;
}

static int parse_argv(const cJSON *cmd, const cJSON *argv, struct hutch_run_req *r,
                      struct hutch_err *err)
{
	size_t n = 0;
	const cJSON *it;
	int rc;

	if (cmd && argv)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "give either 'cmd' or 'argv', not both");
	if (!cmd && !argv)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "missing 'cmd' (a shell command string) or 'argv' (an array)");
	if (cmd) {
		r->argv = calloc(4, sizeof(char *));
		if (!r->argv)
			return -ENOMEM;
		r->argv[0] = strdup("/bin/sh");
		r->argv[1] = strdup("-c");
		r->argv[2] = strdup(cmd->valuestring);
		return r->argv[0] && r->argv[1] && r->argv[2] ? 0 : -ENOMEM;
	}
	n = (size_t)cJSON_GetArraySize(argv);
	rc = argv_new(n, r, err);
	if (rc < 0)
		return rc;
	n = 0;
	cJSON_ArrayForEach(it, argv) {
		if (!cJSON_IsString(it))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'argv[%zu]' must be a string", n);
		r->argv[n] = strdup(it->valuestring);
		if (!r->argv[n++])
			return -ENOMEM;
	}
	return argv0_check(r, err);
}

static int add_env(char **envp, size_t *n, const char *key, const char *value)
{
	size_t klen = strlen(key);
	char *kv;

	if (asprintf(&kv, "%s=%s", key, value) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		if (!strncmp(envp[i], key, klen) && envp[i][klen] == '=') {
			free(envp[i]);
			envp[i] = kv;
			return 0;
		}
	envp[(*n)++] = kv;
	return 0;
}

/* r->envp: base's, room for nenv more; *ret_n its count. */
static int env_new(size_t nenv, const char *const *base, struct hutch_run_req *r, size_t *ret_n,
                   struct hutch_err *err)
{
	size_t n = 0, nbase = hutch_cmdenv_len(base), max = nbase + nenv;

	if (max > HUTCH_SPAWN_MAX_ENV)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -E2BIG,
		                           "'env' has more than %zu entries",
		                           HUTCH_SPAWN_MAX_ENV - nbase);
	r->envp = calloc(max + 1, sizeof(char *));
	if (!r->envp)
		return -ENOMEM;
	for (size_t i = 0; i < nbase; i++) {
		r->envp[n] = strdup(base[i]);
		if (!r->envp[n++])
			return -ENOMEM;
	}
	*ret_n = n;
	return 0;
}

static int env_name_check(const char *name, struct hutch_err *err)
{
	if (!env_name_is_valid(name))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid environment variable name '%.64s': use letters, "
		        "digits and '_', not starting with a digit",
		        name);
	return 0;
}

static int parse_env(const cJSON *env, const char *const *base, struct hutch_run_req *r,
                     struct hutch_err *err)
{
	size_t n = 0;
	const cJSON *it;
	int rc = env_new(env ? (size_t)cJSON_GetArraySize(env) : 0, base, r, &n, err);

	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(it, env) {
		if (env_name_check(it->string, err) < 0)
			return err->code;
		if (!cJSON_IsString(it))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'env.%.64s' must be a string", it->string);
		if (add_env(r->envp, &n, it->string, it->valuestring) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* cwd NULL: none given. */
static int parse_cwd(const char *cwd, struct hutch_run_req *r, struct hutch_err *err)
{
	const char *v = cwd ? cwd : HUTCH_WORKSPACE;

	if (!*v)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'cwd' is empty: omit it for %s", HUTCH_WORKSPACE);
	if (strlen(v) > 4000)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -ENAMETOOLONG,
		                           "'cwd' is longer than 4000 bytes");
	if (v[0] == '/')
		r->cwd = strdup(v);
	else if (asprintf(&r->cwd, "%s/%s", HUTCH_WORKSPACE, v) < 0)
		r->cwd = NULL;
	return r->cwd ? 0 : -ENOMEM;
}

/* Types and bounds are checked (run_fields). */
static void parse_numbers(const cJSON *timeout, const cJSON *maxout, struct hutch_run_req *r)
{
	if (cJSON_IsNumber(timeout))
		r->timeout = timeout->valuedouble;
	if (cJSON_IsNumber(maxout))
		r->max_output = (uint64_t)maxout->valuedouble;
}

static int tty_dim_refused(const char *name, struct hutch_err *err)
{
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
	                           "'tty.%s' must be a whole number from 1 to 65535", name);
}

/* "rows" or "cols" (name) set to v. */
static int tty_dim(const char *name, double v, struct hutch_run_req *r, struct hutch_err *err)
{
	if (!(v >= 1 && v <= 65535) || v != (double)(int)v) /* NaN too */
		return tty_dim_refused(name, err);
	*(!strcmp(name, "rows") ? &r->rows : &r->cols) = (uint16_t)v;
	return 0;
}

/* "tty": {"rows": R, "cols": C}, each a whole number 1-65535 (absent: the
 * kernel's default size). */
static int parse_tty(const cJSON *tty, struct hutch_run_req *r, struct hutch_err *err)
{
	const cJSON *it;

	if (!cJSON_IsObject(tty))
		return 0;
	r->tty = true;
	cJSON_ArrayForEach(it, tty) {
		bool rows = !strcmp(it->string, "rows"), cols = !strcmp(it->string, "cols");

		if (!rows && !cols)
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "unknown field 'tty.%.32s' (known: rows, cols)",
			                           it->string);
		if (!cJSON_IsNumber(it))
			return tty_dim_refused(it->string, err);
		if (tty_dim(it->string, it->valuedouble, r, err) < 0)
			return err->code;
	}
	return 0;
}

static int parse_encoding(const cJSON *enc, struct hutch_run_req *r, struct hutch_err *err)
{
	if (!cJSON_IsString(enc) || !strcmp(enc->valuestring, "utf-8"))
		return 0;
	if (strcmp(enc->valuestring, "base64"))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "'encoding' must be \"utf-8\" (text) or \"base64\" (exact "
		        "bytes)");
	r->base64 = true;
	return 0;
}

/* /exec's "exit_frame": "json" (the result's JSON, the default) or
 * "brief" (its RESULT frame, base/frame.h). */
static int parse_exit_frame(const cJSON *f, struct hutch_run_req *r, struct hutch_err *err)
{
	if (!cJSON_IsString(f) || !strcmp(f->valuestring, "json"))
		return 0;
	if (strcmp(f->valuestring, "brief"))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'exit_frame' must be \"json\" (the result as JSON) or "
		                           "\"brief\" (exit code, signal, message)");
	r->brief = true;
	return 0;
}

/* stdin as given: text, or base64 of exact bytes. */
static int parse_stdin(const char *v, struct hutch_run_req *r, struct hutch_err *err)
{
	int rc;

	if (!r->base64) {
		r->stdin_len = strlen(v);
		r->stdin_data = strdup(v);
		return r->stdin_data ? 0 : -ENOMEM;
	}
	rc = hutch_base64_decode(v, &r->stdin_data, &r->stdin_len);
	if (rc == -EINVAL)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'stdin' is not valid base64 (\"encoding\": "
		                           "\"base64\")");
	return rc;
}

/* r handed to *ret, or freed on failure rc (out of memory said so). */
static int req_end(int rc, struct hutch_run_req *r, struct hutch_run_req *ret,
                   struct hutch_err *err)
{
	if (rc == -ENOMEM)
		hutch_err_set(err, -ENOMEM, "out of memory");
	if (rc < 0) {
		hutch_run_req_done(r);
		return rc;
	}
	*ret = *r;
	return 0;
}

static int parse_req(const char *body, size_t len, const struct hutch_field *fields, size_t nfields,
                     const char *const *base_env, struct hutch_run_req *ret, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_run_req r = { 0 };
	const char *end = NULL;
	const cJSON *stdin_j, *cwd;
	int rc;

	rc = hutch_fields_check_text(body, len, err);
	if (rc < 0)
		return rc;
	j = cJSON_ParseWithLengthOpts(body, len, &end, 0);
	/* Only whitespace may follow the value. (cJSON's own check,
	 * require_null_terminated, wants a NUL inside len, which a body of
	 * exactly len bytes does not have.) */
	while (j && end < body + len &&
	       (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (j && end != body + len) {
		cJSON_Delete(j);
		j = NULL;
	}
	if (!j)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid JSON at byte %zu of the request body",
		                           end && end >= body ? (size_t)(end - body) : 0);
	if (!cJSON_IsObject(j))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the request body must be a JSON object");
	rc = hutch_fields_check(j, fields, nfields, HUTCH_FIELDS_LIST_KNOWN, err);
	if (rc < 0)
		return rc;
	cwd = cJSON_GetObjectItemCaseSensitive(j, "cwd");
	rc = parse_argv(cJSON_GetObjectItemCaseSensitive(j, "cmd"),
	                cJSON_GetObjectItemCaseSensitive(j, "argv"), &r, err);
	if (rc >= 0)
		rc = parse_env(cJSON_GetObjectItemCaseSensitive(j, "env"),
		               base_env ? base_env : hutch_default_env, &r, err);
	if (rc >= 0)
		rc = parse_cwd(cwd ? cwd->valuestring : NULL, &r, err);
	if (rc >= 0)
		parse_numbers(cJSON_GetObjectItemCaseSensitive(j, "timeout"),
		              cJSON_GetObjectItemCaseSensitive(j, "max_output_bytes"), &r);
	if (rc >= 0)
		rc = parse_encoding(cJSON_GetObjectItemCaseSensitive(j, "encoding"), &r, err);
	if (rc >= 0)
		rc = parse_tty(cJSON_GetObjectItemCaseSensitive(j, "tty"), &r, err);
	if (rc >= 0)
		rc = parse_exit_frame(cJSON_GetObjectItemCaseSensitive(j, "exit_frame"), &r, err);
	stdin_j = cJSON_GetObjectItemCaseSensitive(j, "stdin");
	if (rc >= 0 && cJSON_IsString(stdin_j))
		rc = parse_stdin(stdin_j->valuestring, &r, err);
	r.stdin_open = cJSON_IsTrue(stdin_j);
	return req_end(rc, &r, ret, err);
}

int hutch_run_req_parse(const char *body, size_t len, const char *const *base_env,
                        struct hutch_run_req *ret, struct hutch_err *err)
{
	return parse_req(body, len, run_fields, ELEMENTSOF(run_fields), base_env, ret, err);
}

int hutch_exec_req_parse(const char *body, size_t len, const char *const *base_env,
                         struct hutch_run_req *ret, struct hutch_err *err)
{
	return parse_req(body, len, exec_fields, ELEMENTSOF(exec_fields), base_env, ret, err);
}

int hutch_start_req_parse(const char *body, size_t len, const char *const *base_env,
                          struct hutch_run_req *ret, struct hutch_err *err)
{
	return parse_req(body, len, start_fields, ELEMENTSOF(start_fields), base_env, ret, err);
}

/* The JSON-free form (base/frame.h, HUTCH_REQ_MAGIC) taken apart: values
 * point into the body. */
struct bin_req {
	const char **argv, **env;
	size_t argc, nenv;
	const char *cwd, *timeout, *tty;
	bool brief;
};

static int bin_refused(struct hutch_err *err, const char *what)
{
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "invalid request: %s", what);
}

/* Each field once but argv's and env's; arrays counted by the first pass
 * (b->argv NULL), filled by the second. */
static int bin_fields(const char *p, const char *end, struct bin_req *b, struct hutch_err *err)
{
	bool fill = b->argv != NULL;
	size_t na = 0, ne = 0;

	while (p < end) {
		char tag = *p++;
		const char *v = p, **one = NULL;

		if (p == end)
			return bin_refused(err, "a field without its value");
		p += strlen(p) + 1; /* the body ends with a NUL (checked) */
		if (tag == HUTCH_REQ_ARG) {
			if (fill)
				b->argv[na] = v;
			na++;
			continue;
		}
		if (tag == HUTCH_REQ_ENV) {
			if (fill)
				b->env[ne] = v;
			ne++;
			continue;
		}
		if (tag == HUTCH_REQ_CWD)
			one = &b->cwd;
		else if (tag == HUTCH_REQ_TIMEOUT)
			one = &b->timeout;
		else if (tag == HUTCH_REQ_TTY)
			one = &b->tty;
		else if (tag != HUTCH_REQ_BRIEF)
			return bin_refused(err, "a field of an unknown tag");
		if (!fill && ((one && *one) || (!one && b->brief)))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "duplicate field '%s' in the request body: send "
			                           "each field once",
			                           tag == HUTCH_REQ_CWD       ? "cwd"
			                           : tag == HUTCH_REQ_TIMEOUT ? "timeout"
			                           : tag == HUTCH_REQ_TTY     ? "tty"
			                                                      : "exit_frame");
		if (one)
			*one = v;
		else
			b->brief = true;
	}
	b->argc = na;
	b->nenv = ne;
	return 0;
}

/* A name given twice in env, as the JSON's check says it. */
static int bin_env_duplicates(const struct bin_req *b, struct hutch_err *err)
{
	for (size_t i = 1; i < b->nenv; i++) {
		size_t len = strcspn(b->env[i], "=");

		for (size_t k = 0; k < i; k++)
			if (!strncmp(b->env[k], b->env[i], len) && b->env[k][len] == '=')
				return hutch_err_set_class(
				        err, HUTCH_ERRC_USAGE, -EINVAL,
				        "duplicate key '%.*s' in 'env': send each "
				        "key once",
				        (int)(len < 64 ? len : 64), b->env[i]);
	}
	return 0;
}

static int bin_timeout(const char *v, struct hutch_run_req *r, struct hutch_err *err)
{
	const struct hutch_field *f = NULL;
	char *end = NULL;
	double d;

	for (size_t i = 0; i < ELEMENTSOF(exec_fields); i++)
		if (!strcmp(exec_fields[i].name, "timeout"))
			f = &exec_fields[i];
	errno = 0;
	d = strtod(v, &end);
	if (!*v || *end || !isfinite(d) || d < f->min || d > f->max)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "%s", f->msg);
	r->timeout = d;
	return 0;
}

/* "" or "ROWS COLS". */
static int bin_tty(const char *v, struct hutch_run_req *r, struct hutch_err *err)
{
	double rows, cols;
	int n = -1;

	r->tty = true;
	if (!*v)
		return 0;
	if (sscanf(v, "%lf %lf%n", &rows, &cols, &n) != 2 || v[n])
		return tty_dim_refused("rows", err);
	if (tty_dim("rows", rows, r, err) < 0 || tty_dim("cols", cols, r, err) < 0)
		return err->code;
	return 0;
}

static int bin_env(const struct bin_req *b, const char *const *base, struct hutch_run_req *r,
                   struct hutch_err *err)
{
	size_t n = 0;
	int rc = env_new(b->nenv, base, r, &n, err);

	for (size_t i = 0; rc >= 0 && i < b->nenv; i++) {
		const char *eq = strchr(b->env[i], '=');
		_cleanup_free_ char *name =
		        eq ? strndup(b->env[i], (size_t)(eq - b->env[i])) : NULL;

		if (!eq)
			return bin_refused(err, "an 'env' field without '='");
		if (!name)
			return -ENOMEM;
		rc = env_name_check(name, err) ?: add_env(r->envp, &n, name, eq + 1);
	}
	return rc;
}

/* The request's checks in the order of the JSON's (fields, argv, env,
 * cwd, tty), with its messages. */
static int bin_check(const struct bin_req *b, const char *const *base, struct hutch_run_req *r,
                     struct hutch_err *err)
{
	int rc = bin_env_duplicates(b, err);

	if (rc >= 0 && b->timeout)
		rc = bin_timeout(b->timeout, r, err);
	if (rc >= 0) /* none: as the CLI's JSON's "argv": [] */
		rc = argv_new(b->argc, r, err);
	for (size_t i = 0; rc >= 0 && i < b->argc; i++)
		if (!(r->argv[i] = strdup(b->argv[i])))
			rc = -ENOMEM;
	if (rc >= 0)
		rc = argv0_check(r, err);
	if (rc >= 0)
		rc = bin_env(b, base, r, err);
	if (rc >= 0)
		rc = parse_cwd(b->cwd, r, err);
	if (rc >= 0 && b->tty)
		rc = bin_tty(b->tty, r, err);
	r->brief = b->brief;
	return rc;
}

int hutch_exec_req_parse_bin(const char *body, size_t len, const char *const *base_env,
                             struct hutch_run_req *ret, struct hutch_err *err)
{
	const char *p = body + HUTCH_REQ_MAGIC_LEN, *end = body + len;
	struct bin_req b = { 0 };
	struct hutch_run_req r = { 0 };
	_cleanup_free_ const char **words = NULL;
	int rc;

	if (len < HUTCH_REQ_MAGIC_LEN || memcmp(body, HUTCH_REQ_MAGIC, HUTCH_REQ_MAGIC_LEN))
		return bin_refused(err, "not the JSON-free form");
	if (p < end && end[-1])
		return bin_refused(err, "its last field has no NUL");
	rc = bin_fields(p, end, &b, err);
	if (rc < 0)
		return rc;
	words = calloc(b.argc + b.nenv + 1, sizeof(*words));
	if (!words)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	b.argv = words;
	b.env = words + b.argc;
	(void)bin_fields(p, end, &b, err);
	rc = bin_check(&b, base_env ? base_env : hutch_default_env, &r, err);
	return req_end(rc, &r, ret, err);
}
