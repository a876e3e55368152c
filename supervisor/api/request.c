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

static int parse_argv(const cJSON *cmd, const cJSON *argv, struct hutch_run_req *r,
                      struct hutch_err *err)
{
	size_t n = 0;
	const cJSON *it;

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
	if (n == 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'argv' is empty: give at least the program");
	if (n > HUTCH_SPAWN_MAX_ARGS)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -E2BIG,
		                           "'argv' has more than %d entries", HUTCH_SPAWN_MAX_ARGS);
	r->argv = calloc(n + 1, sizeof(char *));
	if (!r->argv)
		return -ENOMEM;
	n = 0;
	cJSON_ArrayForEach(it, argv) {
		if (!cJSON_IsString(it))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'argv[%zu]' must be a string", n);
		r->argv[n] = strdup(it->valuestring);
		if (!r->argv[n++])
			return -ENOMEM;
	}
	if (!*r->argv[0])
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "'argv[0]' is empty: give the program to run");
	return 0;
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

static int parse_env(const cJSON *env, const char *const *base, struct hutch_run_req *r,
                     struct hutch_err *err)
{
	size_t n = 0, nbase = hutch_cmdenv_len(base), max = nbase;
	const cJSON *it;

	if (env)
		max += (size_t)cJSON_GetArraySize(env);
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
	cJSON_ArrayForEach(it, env) {
		if (!env_name_is_valid(it->string))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid environment variable name '%.64s': use letters, "
			        "digits and '_', not starting with a digit",
			        it->string);
		if (!cJSON_IsString(it))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "'env.%.64s' must be a string", it->string);
		if (add_env(r->envp, &n, it->string, it->valuestring) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int parse_cwd(const cJSON *cwd, struct hutch_run_req *r, struct hutch_err *err)
{
	const char *v = HUTCH_WORKSPACE;

	if (cwd)
		v = cwd->valuestring;
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
		if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > 65535 ||
		    it->valuedouble != (double)(int)it->valuedouble)
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "'tty.%s' must be a whole number from 1 to 65535", it->string);
		*(rows ? &r->rows : &r->cols) = (uint16_t)it->valueint;
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

static int parse_req(const char *body, size_t len, const struct hutch_field *fields, size_t nfields,
                     const char *const *base_env, struct hutch_run_req *ret, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_run_req r = { 0 };
	const char *end = NULL;
	const cJSON *stdin_j;
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
	rc = parse_argv(cJSON_GetObjectItemCaseSensitive(j, "cmd"),
	                cJSON_GetObjectItemCaseSensitive(j, "argv"), &r, err);
	if (rc >= 0)
		rc = parse_env(cJSON_GetObjectItemCaseSensitive(j, "env"),
		               base_env ? base_env : hutch_default_env, &r, err);
	if (rc >= 0)
		rc = parse_cwd(cJSON_GetObjectItemCaseSensitive(j, "cwd"), &r, err);
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
	if (rc == -ENOMEM)
		hutch_err_set(err, -ENOMEM, "out of memory");
	if (rc < 0) {
		hutch_run_req_done(&r);
		return rc;
	}
	*ret = r;
	return 0;
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
