/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Volume specs (volume.h), parsed and checked. Pure. The option type is
 * volopt.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume.h"

#define FORM "give SRC:PATH[:ro|rw], e.g. /srv/data:/data or work:/workspace:rw"

/*
 * An absolute path without ".", ".." or empty parts, into out without a
 * trailing "/" ("/" alone stays "/"). what names the part in messages.
 */
static int clean_path(const char *opt, const char *what, const char *s, size_t len, char *out,
                      struct hutch_err *err)
{
	size_t o = 0;

	if (len >= HUTCH_VOLUME_PATH_MAX)
		return hutch_err_set(err, -ENAMETOOLONG, "invalid %s: %s is longer than %d bytes",
		                     opt, what, HUTCH_VOLUME_PATH_MAX - 1);
	for (size_t i = 0; i < len;) {
		size_t part;

		while (i < len && s[i] == '/')
			i++;
		part = strcspn(s + i, "/");
		if (part > len - i)
			part = len - i;
		if (part == 0)
			break;
		if ((part == 1 && s[i] == '.') || (part == 2 && s[i] == '.' && s[i + 1] == '.'))
			return hutch_err_set(err, -EINVAL,
			                     "invalid %s: %s '%.*s' has a '.' or '..' part; give "
			                     "the path without them (realpath -s prints it)",
			                     opt, what, (int)len, s);
		out[o++] = '/';
		memcpy(out + o, s + i, part);
		o += part;
		i += part;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

static int check_dst(const char *opt, const char *dst, struct hutch_err *err)
{
	static const char *const kernel[] = { "/proc", "/sys", "/dev", NULL };

	if (!strcmp(dst, "/"))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s: PATH '/' would hide the sandbox's root; mount "
		                     "on a directory, e.g. /workspace or /data",
		                     opt);
	for (const char *const *k = kernel; *k; k++)
		if (under(dst, *k))
			return hutch_err_set(err, -EINVAL,
			                     "invalid %s: PATH '%s' is under %s, which the kernel "
			                     "and hutch make; mount elsewhere, e.g. /data",
			                     opt, dst, *k);
	return 0;
}

static int parse_src(const char *opt, const char *s, size_t len, struct hutch_volume *v,
                     struct hutch_err *err)
{
	if (len == 0)
		return hutch_err_set(err, -EINVAL, "invalid %s: SRC is empty; " FORM, opt);
	if (s[0] == '/')
		return clean_path(opt, "SRC", s, len, v->src, err);
	if (len <= HUTCH_VOLUME_NAME_MAX) {
		memcpy(v->src, s, len);
		v->src[len] = '\0';
		if (hutch_volume_name_is_valid(v->src)) {
			v->named = true;
			return 0;
		}
	}
	{
		/* The fix for a relative path: from the caller's directory. */
		const char *rel = s;
		size_t shown = len > 64 ? 64 : len;

		while (!strncmp(rel, "./", 2) && (size_t)(rel - s) + 2 <= len)
			rel += 2;
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid %s: SRC '%.*s' is neither an absolute host directory "
		        "(e.g. \"$PWD/%.*s\") nor a volume name (letters, digits, '_', "
		        "'.', '-', at most %d, e.g. work)",
		        opt, (int)shown, s, (int)(shown - (size_t)(rel - s)), rel,
		        HUTCH_VOLUME_NAME_MAX);
	}
}

int hutch_volume_parse_as(const char *name, const char *s, struct hutch_volume *ret,
                          struct hutch_err *err)
{
	struct hutch_volume v = { .rw = false };
	const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	size_t dlen;
	int r;

	if (!c1)
		return hutch_err_set(err, -EINVAL, "invalid %s '%.64s': no PATH; " FORM, name, s);
	if (c2 && strchr(c2 + 1, ':'))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.64s': too many ':' (paths with ':' cannot be "
		                     "mounted); " FORM,
		                     name, s);
	if (c2 && strcmp(c2 + 1, "rw") && strcmp(c2 + 1, "ro"))
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.64s': the mode is ro (the default) or rw, not "
		                     "'%.16s'",
		                     name, s, c2 + 1);
	v.rw = c2 && !strcmp(c2 + 1, "rw");
	r = parse_src(name, s, (size_t)(c1 - s), &v, err);
	if (r < 0)
		return r;
	dlen = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
	if (dlen == 0 || c1[1] != '/')
		return hutch_err_set(err, -EINVAL,
		                     "invalid %s '%.64s': PATH inside must be absolute, e.g. /data",
		                     name, s);
	r = clean_path(name, "PATH", c1 + 1, dlen, v.dst, err);
	if (r >= 0)
		r = check_dst(name, v.dst, err);
	if (r < 0)
		return r;
	*ret = v;
	return 0;
}

int hutch_volumes_add(const char *name, struct hutch_volumes *set, const struct hutch_volume *v,
                      struct hutch_err *err)
{
	for (size_t i = 0; i < set->n; i++) {
		const char *d = set->v[i].dst;

		if (!strcmp(d, v->dst))
			return hutch_err_set(err, -EINVAL,
			                     "invalid %s: PATH '%s' is given twice; one volume per "
			                     "directory",
			                     name, d);
		if (under(d, v->dst) || under(v->dst, d))
			return hutch_err_set(err, -EINVAL,
			                     "invalid %s: PATH '%s' and '%s' are one inside the "
			                     "other; mount them side by side",
			                     name, d, v->dst);
	}
	if (set->n >= HUTCH_VOLUMES_MAX)
		return hutch_err_set(err, -E2BIG, "invalid %s: at most %d volumes", name,
		                     HUTCH_VOLUMES_MAX);
	set->v[set->n++] = *v;
	return 0;
}

/* One key=value of --mount into the spec's parts. */
static int mount_key(const char *k, size_t klen, const char *v, const char **src, const char **dst,
                     bool *ro, struct hutch_err *err)
{
#define IS(name) (klen == strlen(name) && !strncmp(k, name, klen))
	if (IS("type")) {
		if (v && (!strcmp(v, "bind") || !strcmp(v, "volume")))
			return 0;
		return hutch_err_set(err, -EINVAL,
		                     "invalid --mount: type=%.16s: only bind and volume (the "
		                     "writable /tmp and /workspace are tmpfs already)",
		                     v ? v : "");
	}
	if ((IS("source") || IS("src") || IS("target") || IS("destination") || IS("dst")) &&
	    (!v || !*v))
		return hutch_err_set(err, -EINVAL, "invalid --mount: %.*s has no value", (int)klen,
		                     k);
	if (IS("source") || IS("src"))
		*src = v;
	else if (IS("target") || IS("destination") || IS("dst"))
		*dst = v;
	else if ((IS("readonly") || IS("ro")) && (!v || !strcmp(v, "true") || !strcmp(v, "1") ||
	                                          !strcmp(v, "false") || !strcmp(v, "0")))
		*ro = !v || !strcmp(v, "true") || !strcmp(v, "1");
	else
		return hutch_err_set(err, -EINVAL,
		                     "invalid --mount: '%.*s' is not taken (type, source, target, "
		                     "readonly[=false] are)",
		                     (int)(klen > 32 ? 32 : klen), k);
	return 0;
#undef IS
}

int hutch_volume_from_mount(const char *s, char *spec, size_t size, struct hutch_err *err)
{
	char buf[HUTCH_VOLUME_SPEC_MAX], *save = NULL;
	const char *src = NULL, *dst = NULL;
	bool ro = true;
	int r;

	if (strlen(s) >= sizeof(buf))
		return hutch_err_set(err, -ENAMETOOLONG, "invalid --mount: too long");
	memcpy(buf, s, strlen(s) + 1);
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		r = mount_key(kv, eq ? (size_t)(eq - kv) : strlen(kv), eq ? eq + 1 : NULL, &src,
		              &dst, &ro, err);
		if (r < 0)
			return r;
	}
	if (!src || !dst)
		return hutch_err_set(err, -EINVAL,
		                     "invalid --mount '%.64s': give source=SRC,target=PATH (or -v "
		                     "SRC:PATH[:rw])",
		                     s);
	if ((size_t)snprintf(spec, size, "%s:%s:%s", src, dst, ro ? "ro" : "rw") >= size)
		return hutch_err_set(err, -ENAMETOOLONG, "invalid --mount: too long");
	return 0;
}

void hutch_volume_text(const struct hutch_volume *v, char *buf, size_t size)
{
	snprintf(buf, size, "%s:%s:%s", v->src, v->dst, v->rw ? "rw" : "ro");
}
