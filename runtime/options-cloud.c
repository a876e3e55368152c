/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option types of the cloud sandbox's (MistralSandbox's) options that
 * say what a session may do and reach beyond the network mode: access
 * ("all", "files": files only, no commands; "none": neither), enforced by
 * the supervisor on every request (supervisor/api/api.c); secrets
 * (NAME=VALUE given to every command's environment, the values never
 * shown: state.json, status, inspect and ls have the names only); egress
 * (IP/CIDR destinations, normalized as the cloud's client does, enforced
 * by nftables in the sandbox's netns: netpolicy/nft.c); and workspace
 * (disk or tmpfs), which the cloud has no need of.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

#include "options-field.h"

const char *const hutch_access_values[] = { "all", "files", "none", NULL };

static int access_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	for (size_t i = 0; hutch_access_values[i]; i++)
		if (!strcmp(s, hutch_access_values[i])) {
			hutch_opt_chars_set(o, c, s);
			return 0;
		}
	return hutch_err_set(err, -EINVAL,
	                     "invalid %s '%.32s': all (commands and files), files (files "
	                     "only, no commands) or none (neither)",
	                     o->name, s);
}

const struct hutch_option_type hutch_opt_access = {
	.init = hutch_opt_chars_init,
	.parse = access_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};

/* workspace: not the cloud's (its disk is always a disk), hutch's way back
 * to tmpfs (runtime/disk.h). */
static int workspace_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                           struct hutch_err *err)
{
	if (strcmp(s, "disk") && strcmp(s, "tmpfs"))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.32s': disk (a file system of the disk size, "
		                     "never memory) or tmpfs (memory)",
		                     o->name, s);
	hutch_opt_chars_set(o, c, s);
	return 0;
}

const struct hutch_option_type hutch_opt_workspace = {
	.init = hutch_opt_chars_init,
	.parse = workspace_parse,
	.to_json = hutch_opt_chars_to_json,
	.text = hutch_opt_chars_text,
};

/* ---- secrets ---- */

static bool secret_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > HUTCH_SECRET_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static void secrets_free(struct hutch_secrets *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n; i++) {
		explicit_bzero(x->env[i], strlen(x->env[i]));
		free(x->env[i]);
	}
	free(x);
}

/* Add NAME=VALUE (value: len bytes); errors name the secret, never its
 * value. */
static int secret_add(struct hutch_secrets **xp, const char *name, size_t nlen, const char *value,
                      size_t vlen, struct hutch_err *err)
{
	struct hutch_secrets *x = *xp;
	char *kv;

	if (!secret_name_ok(name, nlen))
		return hutch_err_set(err, -EINVAL,
		                     "invalid secret name '%.*s': letters, digits and _, not "
		                     "starting with a digit, at most %d bytes (an environment "
		                     "variable's name)",
		                     (int)(nlen > 64 ? 64 : nlen), name, HUTCH_SECRET_NAME_MAX);
	if (vlen > HUTCH_SECRET_VALUE_MAX || memchr(value, '\0', vlen))
		return hutch_err_set(err, -EINVAL,
		                     "invalid secret '%.*s': its value must be at most %d bytes "
		                     "without NUL",
		                     (int)nlen, name, HUTCH_SECRET_VALUE_MAX);
	if (!x && !(x = *xp = calloc(1, sizeof(*x))))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < x->n; i++)
		if (!strncmp(x->env[i], name, nlen) && x->env[i][nlen] == '=')
			return hutch_err_set(err, -EEXIST, "secret '%.*s' is given twice",
			                     (int)nlen, name);
	if (x->n >= HUTCH_SECRETS_MAX)
		return hutch_err_set(err, -E2BIG, "too many secrets: at most %d",
		                     HUTCH_SECRETS_MAX);
	kv = malloc(nlen + vlen + 2);
	if (!kv)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	memcpy(kv, name, nlen);
	kv[nlen] = '=';
	memcpy(kv + nlen + 1, value, vlen);
	kv[nlen + 1 + vlen] = '\0';
	x->env[x->n++] = kv;
	x->env[x->n] = NULL;
	return 0;
}

/* CLI: NAME=VALUE, the value a literal (visible in ps) or @env:VAR,
 * @file:PATH, @fd:N (repeatable). */
static int secrets_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                         struct hutch_err *err)
{
	struct hutch_secrets **xp = FIELD(o, c, struct hutch_secrets *);
	const char *eq = strchr(s, '=');
	char *buf, what[128];
	size_t len = 0;
	int r;

	if (!eq)
		return hutch_err_set(err, -EINVAL,
		                     "invalid secret '%.64s': give NAME=VALUE, the value as "
		                     "@env:VAR, @file:PATH or @fd:N (a literal is visible in ps)",
		                     s);
	if (eq[1] != '@')
		return secret_add(xp, s, (size_t)(eq - s), eq + 1, strlen(eq + 1), err);
	buf = malloc(HUTCH_SECRET_VALUE_MAX + 1);
	if (!buf)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	snprintf(what, sizeof(what), "secret '%.*s'", (int)((eq - s) > 64 ? 64 : (eq - s)), s);
	r = hutch_secret_read(eq + 2, what, buf, HUTCH_SECRET_VALUE_MAX, &len, err);
	if (r >= 0)
		r = secret_add(xp, s, (size_t)(eq - s), buf, len, err);
	explicit_bzero(buf, HUTCH_SECRET_VALUE_MAX + 1);
	free(buf);
	return r;
}

/* API: an object of NAME: "VALUE" (replaces the set). */
static int secrets_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                             struct hutch_err *err)
{
	struct hutch_secrets **xp = FIELD(o, c, struct hutch_secrets *), *x = NULL;
	const cJSON *it;
	int r;

	if (!cJSON_IsObject(v))
		return hutch_err_set(err, -EINVAL,
		                     "field 'secrets' has the wrong type: expected an object of "
		                     "NAME: \"VALUE\"");
	cJSON_ArrayForEach(it, v) {
		if (!cJSON_IsString(it)) {
			secrets_free(x);
			return hutch_err_set(err, -EINVAL,
			                     "secret '%.64s': the value must be a string",
			                     it->string);
		}
		r = secret_add(&x, it->string, strlen(it->string), it->valuestring,
		               strlen(it->valuestring), err);
		if (r < 0) {
			secrets_free(x);
			return r;
		}
	}
	secrets_free(*xp);
	*xp = x;
	return 0;
}

/* The names only, ever. */
static void secrets_to_json(const struct hutch_option *o, const struct hutch_config *c,
                            struct hutch_jw *w)
{
	const struct hutch_secrets *x = *CFIELD(o, c, struct hutch_secrets *);

	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; x && i < x->n; i++) {
		size_t n = strcspn(x->env[i], "=");
		char name[HUTCH_SECRET_NAME_MAX + 1];
		memcpy(name, x->env[i], n);
		name[n] = '\0';
		hutch_jw_str(w, NULL, name);
	}
	hutch_jw_close(w, '[');
}

static void secrets_text(const struct hutch_option *o, const struct hutch_config *c,
                         void (*emit)(void *ud, const char *s), void *ud)
{
	const struct hutch_secrets *x = *CFIELD(o, c, struct hutch_secrets *);
	char name[HUTCH_SECRET_NAME_MAX + 1];

	for (size_t i = 0; x && i < x->n; i++) {
		size_t n = strcspn(x->env[i], "=");
		memcpy(name, x->env[i], n);
		name[n] = '\0';
		emit(ud, name);
	}
}

static void secrets_init(const struct hutch_option *o, struct hutch_config *c)
{
	*FIELD(o, c, struct hutch_secrets *) = NULL;
}

static void secrets_done(const struct hutch_option *o, struct hutch_config *c)
{
	struct hutch_secrets **xp = FIELD(o, c, struct hutch_secrets *);

	secrets_free(*xp);
	*xp = NULL;
}

const struct hutch_option_type hutch_opt_secrets = {
	.init = secrets_init,
	.parse = secrets_parse,
	.from_json = secrets_from_json,
	.to_json = secrets_to_json,
	.text = secrets_text,
	.done = secrets_done,
};

/* ---- egress: the cloud's outbound allow list (netpolicy.h) ---- */

static int egress_add(struct hutch_net_policy *p, const char *entry, struct hutch_err *err)
{
	struct hutch_net_cidr cidr;
	int r = hutch_net_cidr_parse(entry, &cidr, err);

	if (r < 0)
		return r;
	if (p->negress >= HUTCH_NET_EGRESS_MAX)
		return hutch_err_set(err, -E2BIG, "too many egress entries: at most %d",
		                     HUTCH_NET_EGRESS_MAX);
	p->egress[p->negress++] = cidr;
	p->egress_set = true;
	return 0;
}

static void egress_init(const struct hutch_option *o, struct hutch_config *c)
{
	(void)o;
	c->net.egress_set = false;
	c->net.negress = 0;
}

/* CLI: one IP or CIDR per value (repeatable); "" gives the empty list,
 * which blocks everything. */
static int egress_parse(const struct hutch_option *o, struct hutch_config *c, const char *s,
                        struct hutch_err *err)
{
	(void)o;
	if (!s[0]) {
		c->net.egress_set = true;
		return 0;
	}
	return egress_add(&c->net, s, err);
}

/* API: an array of strings replaces the list ([] blocks everything);
 * null: no egress policy. */
static int egress_from_json(const struct hutch_option *o, struct hutch_config *c, const cJSON *v,
                            struct hutch_err *err)
{
	struct hutch_net_policy tmp = { .egress_set = true };
	const cJSON *it;
	int r;

	if (cJSON_IsNull(v)) {
		egress_init(o, c);
		return 0;
	}
	if (!cJSON_IsArray(v))
		return hutch_err_set(err, -EINVAL,
		                     "field '%s' has the wrong type: expected an array of IP "
		                     "addresses or CIDRs",
		                     o->name);
	cJSON_ArrayForEach(it, v) {
		if (!cJSON_IsString(it))
			return hutch_err_set(err, -EINVAL,
			                     "invalid egress entry: expected an IP address or CIDR "
			                     "as a string");
		r = egress_add(&tmp, it->valuestring, err);
		if (r < 0)
			return r;
	}
	c->net.egress_set = true;
	c->net.negress = tmp.negress;
	memcpy(c->net.egress, tmp.egress, tmp.negress * sizeof(tmp.egress[0]));
	return 0;
}

/* The normalized list, or null when not given. */
static void egress_to_json(const struct hutch_option *o, const struct hutch_config *c,
                           struct hutch_jw *w)
{
	char buf[HUTCH_NET_CIDR_TEXT];

	if (!c->net.egress_set) {
		hutch_jw_null(w, o->name);
		return;
	}
	hutch_jw_open(w, o->name, '[');
	for (size_t i = 0; i < c->net.negress; i++) {
		hutch_net_cidr_format(&c->net.egress[i], buf, sizeof(buf));
		hutch_jw_str(w, NULL, buf);
	}
	hutch_jw_close(w, '[');
}

static void egress_text(const struct hutch_option *o, const struct hutch_config *c,
                        void (*emit)(void *ud, const char *s), void *ud)
{
	char buf[HUTCH_NET_CIDR_TEXT];

	(void)o;
	if (c->net.egress_set && c->net.negress == 0)
		emit(ud, ""); /* the empty list, as --egress '' gives it */
	for (size_t i = 0; i < c->net.negress; i++) {
		hutch_net_cidr_format(&c->net.egress[i], buf, sizeof(buf));
		emit(ud, buf);
	}
}

const struct hutch_option_type hutch_opt_egress = {
	.init = egress_init,
	.parse = egress_parse,
	.from_json = egress_from_json,
	.to_json = egress_to_json,
	.text = egress_text,
};
