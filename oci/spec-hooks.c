/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.json's hooks -> struct hutch_oci_hooks (see spec-hooks.h),
 * checked as strictly as the rest of the bundle: an unknown phase, a
 * relative path, a timeout that is not a whole number of seconds above 0
 * is an error naming the field, never a hook silently not run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "spec-hooks.h"

const char *const hutch_oci_hook_names[HUTCH_OCI_HOOK_PHASES] = {
	"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

static void hook_done(struct hutch_oci_hook *h)
{
	for (size_t i = 0; i < h->nargs; i++)
		free(h->args[i]);
	for (size_t i = 0; i < h->nenv; i++)
		free(h->env[i]);
	free(h->args);
	free(h->env);
	free(h->path);
}

void hutch_oci_hooks_done(struct hutch_oci_hooks *h)
{
	for (size_t p = 0; p < HUTCH_OCI_HOOK_PHASES; p++) {
		for (size_t i = 0; i < h->n[p]; i++)
			hook_done(&h->hooks[p][i]);
		free(h->hooks[p]);
	}
	memset(h, 0, sizeof(*h));
}

static int parse_timeout(const cJSON *e, const char *field, unsigned int *ret,
                         struct hutch_err *err)
{
	const cJSON *t = hutch_oci_json_item(e, "timeout");

	if (!t || cJSON_IsNull(t))
		return 0;
	/* The spec's: "MUST be greater than zero". */
	if (!cJSON_IsNumber(t) || t->valuedouble < 1 ||
	    t->valuedouble > HUTCH_OCI_HOOK_TIMEOUT_MAX ||
	    t->valuedouble != (double)(unsigned int)t->valuedouble)
		return hutch_err_set(err, -EINVAL,
		                     "%s.timeout: not a whole number of seconds from 1 to %d",
		                     field, HUTCH_OCI_HOOK_TIMEOUT_MAX);
	*ret = (unsigned int)t->valuedouble;
	return 0;
}

/* One hook; field: "hooks.PHASE[i]". On failure h is freed by the caller
 * (hook_done of a zeroed or partly filled hook is safe). */
static int parse_hook(const cJSON *e, const char *field, struct hutch_oci_hook *h,
                      struct hutch_err *err)
{
	char f[96];
	int r;

	if (!cJSON_IsObject(e))
		return hutch_err_set(err, -EINVAL, "%s: not an object", field);
	snprintf(f, sizeof(f), "%s.path", field);
	r = hutch_oci_json_str(e, "path", f, &h->path, err);
	if (r < 0)
		return r;
	if (!h->path || h->path[0] != '/')
		return hutch_err_set(err, -EINVAL, "%s: not an absolute path", f);
	snprintf(f, sizeof(f), "%s.args", field);
	r = hutch_oci_json_strv(e, "args", f, 1024, &h->args, &h->nargs, err);
	if (r < 0)
		return r;
	snprintf(f, sizeof(f), "%s.env", field);
	r = hutch_oci_json_strv(e, "env", f, 1024, &h->env, &h->nenv, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < h->nenv; i++)
		if (!strchr(h->env[i], '=') || h->env[i][0] == '=')
			return hutch_err_set(err, -EINVAL, "%s[%zu]: not KEY=VALUE", f, i);
	return parse_timeout(e, field, &h->timeout, err);
}

static int parse_phase(const cJSON *arr, size_t p, struct hutch_oci_hooks *ret,
                       struct hutch_err *err)
{
	const cJSON *e;
	size_t n;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "hooks.%s: not an array",
		                     hutch_oci_hook_names[p]);
	n = (size_t)cJSON_GetArraySize(arr);
	if (n > HUTCH_OCI_MAX_HOOKS)
		return hutch_err_set(err, -E2BIG, "hooks.%s: more than %d hooks",
		                     hutch_oci_hook_names[p], HUTCH_OCI_MAX_HOOKS);
	if (n == 0)
		return 0;
	ret->hooks[p] = calloc(n, sizeof(*ret->hooks[p]));
	if (!ret->hooks[p])
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, arr) {
		char field[64];
		int r;

		snprintf(field, sizeof(field), "hooks.%s[%zu]", hutch_oci_hook_names[p], ret->n[p]);
		r = parse_hook(e, field, &ret->hooks[p][ret->n[p]], err);
		ret->n[p]++; /* freed on failure too */
		if (r < 0)
			return r;
	}
	ret->total += n;
	return 0;
}

int hutch_oci_hooks_parse(const cJSON *obj, struct hutch_oci_hooks *ret, struct hutch_err *err)
{
	const cJSON *e;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		return hutch_err_set(err, -EINVAL, "hooks: not an object");
	cJSON_ArrayForEach(e, obj) {
		size_t p = 0;

		while (p < HUTCH_OCI_HOOK_PHASES && strcmp(e->string, hutch_oci_hook_names[p]))
			p++;
		if (p == HUTCH_OCI_HOOK_PHASES)
			r = hutch_err_set(err, -EINVAL,
			                  "hooks.%.64s: unknown phase (prestart, createRuntime, "
			                  "createContainer, startContainer, poststart, poststop)",
			                  e->string);
		else if (ret->hooks[p] || ret->n[p])
			r = hutch_err_set(err, -EINVAL, "hooks.%s: given twice", e->string);
		else
			r = parse_phase(e, p, ret, err);
		if (r < 0) {
			hutch_oci_hooks_done(ret);
			return r;
		}
	}
	return 0;
}
