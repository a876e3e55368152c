/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An image recipe (image/default.recipe is the default image's): a base,
 * Debian packages, shell steps and environment, one per line, read here
 * into struct hutch_recipe and turned into the script that build.c has
 * run in the image being built. Pure: unit-tested and fuzzed, since a
 * recipe may come from a user's file. The format is kept this small on
 * purpose (not a Dockerfile): what the default image needs and what a user
 * changing it would need, nothing more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "recipe.h"

static bool word_ok(const char *w, size_t n, const char *first, const char *rest)
{
	if (n == 0 || !strchr(first, w[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!strchr(rest, w[i]))
			return false;
	return true;
}

#define LOWER  "abcdefghijklmnopqrstuvwxyz"
#define DIGITS "0123456789"
#define UPPER  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

static int push(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strndup(s, len);
	if (!nv[*n])
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

/* "packages a b c": each a Debian package name, added to r->packages
 * (comma-separated, mmdebstrap's --include). */
static int add_packages(struct hutch_recipe *r, const char *p, size_t len, unsigned line,
                        struct hutch_err *err)
{
	size_t i = 0;

	while (i < len) {
		size_t start, n, have = r->packages ? strlen(r->packages) : 0;
		char *np;

		while (i < len && (p[i] == ' ' || p[i] == '\t'))
			i++;
		start = i;
		while (i < len && p[i] != ' ' && p[i] != '\t')
			i++;
		n = i - start;
		if (n == 0)
			break;
		if (!word_ok(p + start, n, LOWER DIGITS, LOWER DIGITS "+-.") || n > 128)
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "line %u: '%.*s' is not a Debian package name",
			                           line, (int)(n > 64 ? 64 : n), p + start);
		np = realloc(r->packages, have + n + 2);
		if (!np)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		if (have)
			np[have++] = ',';
		memcpy(np + have, p + start, n);
		np[have + n] = '\0';
		r->packages = np;
	}
	return 0;
}

static int one_line(struct hutch_recipe *r, const char *p, size_t len, unsigned line,
                    struct hutch_err *err)
{
	size_t kw = 0, at;

	while (kw < len && p[kw] != ' ' && p[kw] != '\t')
		kw++;
	at = kw;
	while (at < len && (p[at] == ' ' || p[at] == '\t'))
		at++;
	if (at == len)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "line %u: '%.*s' needs a value", line, (int)kw, p);
	if (kw == 4 && !memcmp(p, "base", 4)) {
		if (r->suite[0])
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "line %u: a second 'base'", line);
		if (len - at >= sizeof(r->suite) ||
		    !word_ok(p + at, len - at, LOWER, LOWER DIGITS "-"))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "line %u: 'base' takes a Debian release, such as "
			        "bookworm",
			        line);
		memcpy(r->suite, p + at, len - at);
		r->suite[len - at] = '\0';
		return 0;
	}
	if (kw == 8 && !memcmp(p, "packages", 8))
		return add_packages(r, p + at, len - at, line, err);
	if (kw == 3 && !memcmp(p, "run", 3))
		return push(&r->runs, &r->nruns, p + at, len - at) < 0
		               ? hutch_err_set(err, -ENOMEM, "out of memory")
		               : 0;
	if (kw == 3 && !memcmp(p, "env", 3)) {
		const char *eq = memchr(p + at, '=', len - at);
		if (!eq || !word_ok(p + at, (size_t)(eq - p - at), UPPER LOWER "_",
		                    UPPER LOWER DIGITS "_"))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "line %u: 'env' takes NAME=VALUE (NAME: letters, "
			        "digits, _)",
			        line);
		return push(&r->env, &r->nenv, p + at, len - at) < 0
		               ? hutch_err_set(err, -ENOMEM, "out of memory")
		               : 0;
	}
	return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
	                           "line %u: unknown '%.*s' (a recipe line is base, packages, run "
	                           "or env)",
	                           line, (int)(kw > 32 ? 32 : kw), p);
}

int hutch_recipe_parse(const char *text, size_t len, struct hutch_recipe *r, struct hutch_err *err)
{
	_cleanup_free_ char *joined = NULL;
	size_t i = 0, jl = 0;
	unsigned line = 0, first = 0;
	int ret;

	*r = (struct hutch_recipe){ 0 };
	if (len > HUTCH_RECIPE_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EFBIG,
		                           "the recipe is over %u bytes", HUTCH_RECIPE_MAX);
	if (memchr(text, '\0', len))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the recipe has a NUL byte");
	joined = malloc(len + 1);
	if (!joined)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	while (i < len) {
		const char *p = text + i, *nl = memchr(p, '\n', len - i);
		size_t n = nl ? (size_t)(nl - p) : len - i;
		bool more;

		i += n + (nl ? 1 : 0);
		line++;
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		/* A line ending in \ goes on: kept as written, the shell reads
		 * the backslash-newline as one line. */
		more = n > 0 && p[n - 1] == '\\' && i < len;
		if (jl == 0) {
			while (n > 0 && (*p == ' ' || *p == '\t'))
				p++, n--;
			if (n == 0 || *p == '#')
				continue;
			first = line;
		}
		memcpy(joined + jl, p, n);
		jl += n;
		if (more) {
			joined[jl++] = '\n';
			continue;
		}
		ret = one_line(r, joined, jl, first, err);
		jl = 0;
		if (ret < 0) {
			hutch_recipe_done(r);
			return ret;
		}
	}
	if (!r->suite[0] || !r->packages) {
		hutch_recipe_done(r);
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the recipe needs a 'base' and 'packages'");
	}
	return 0;
}

void hutch_recipe_done(struct hutch_recipe *r)
{
	for (size_t i = 0; i < r->nruns; i++)
		free(r->runs[i]);
	for (size_t i = 0; i < r->nenv; i++)
		free(r->env[i]);
	free(r->runs);
	free(r->env);
	free(r->packages);
	*r = (struct hutch_recipe){ 0 };
}

/* Append s (n bytes) to the growing buffer *b of length *len. */
static int put(char **b, size_t *len, const char *s, size_t n)
{
	char *nb = realloc(*b, *len + n + 1);

	if (!nb)
		return -ENOMEM;
	memcpy(nb + *len, s, n);
	*len += n;
	nb[*len] = '\0';
	*b = nb;
	return 0;
}

char *hutch_recipe_script(const struct hutch_recipe *r)
{
	static const char head[] =
	        "#!/bin/sh\n"
	        "# The recipe's run steps (hutch image build-default), each in a subshell\n"
	        "export HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive\n"
	        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
	        "export npm_config_update_notifier=false\n"
	        "# the build host's CA bundle, for the build only (build.c)\n"
	        "ca=/tmp/hutch-build-ca.crt\n"
	        "[ ! -s $ca ] || export SSL_CERT_FILE=$ca CURL_CA_BUNDLE=$ca "
	        "NODE_EXTRA_CA_CERTS=$ca npm_config_cafile=$ca\n";
	_cleanup_free_ char *b = NULL;
	size_t len = 0;
	char line[160];

	if (put(&b, &len, head, sizeof(head) - 1) < 0)
		return NULL;
	for (size_t i = 0; i < r->nruns; i++) {
		const char *s = r->runs[i];
		size_t first = strcspn(s, "\n'");
		int n = snprintf(line, sizeof(line),
		                 "echo 'hutch: recipe step %zu/%zu: %.*s%s' >&2\n(set -eu\n", i + 1,
		                 r->nruns, (int)(first > 72 ? 72 : first), s,
		                 first > 72 || s[first] ? " ..." : "");
		if (put(&b, &len, line, (size_t)n) < 0 || put(&b, &len, s, strlen(s)) < 0)
			return NULL;
		/* Not "( ... ) || exit": set -e is ignored left of ||. */
		n = snprintf(line, sizeof(line),
		             "\n)\n[ $? -eq 0 ] || { echo 'hutch: recipe step %zu/%zu failed' >&2; "
		             "exit 1; }\n",
		             i + 1, r->nruns);
		if (put(&b, &len, line, (size_t)n) < 0)
			return NULL;
	}
	return TAKE_PTR(b);
}
