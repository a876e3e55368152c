/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bundle's mounts[] and linux.rootfsPropagation (spec-mount.h): the kinds
 * hutch mounts (binds, tmpfs, mqueue, sysfs, cgroup; its own /proc and
 * /dev in place of the bundle's), their flags, tmpfs sizes and modes, and
 * propagation options. Pure and bounded, part of the config.json parser
 * (spec.c) and fuzzed with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "json.h"
#include "spec-mount.h"

bool hutch_oci_has_dotdot(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")) != NULL; p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return true;
	return false;
}

/* Destinations whose mount hutch makes itself. */
static const char *const hutch_dests[] = { "/proc", "/dev", "/dev/pts", "/dev/shm", NULL };

static bool is_hutch_dest(const char *dest)
{
	for (const char *const *d = hutch_dests; *d; d++)
		if (!strcmp(*d, dest))
			return true;
	return false;
}

/* A mount propagation option or linux.rootfsPropagation value: MS_* and
 * whether it is the r-form; 0 if v is none. */
static unsigned long propagation_of(const char *v, bool *ret_recursive)
{
	static const struct {
		const char *name;
		unsigned long flag;
	} names[] = {
		{ "shared", MS_SHARED },
		{ "slave", MS_SLAVE },
		{ "private", MS_PRIVATE },
		{ "unbindable", MS_UNBINDABLE },
	};
	bool r = v[0] == 'r' && strcmp(v, "ro") != 0;

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (!strcmp(v + r, names[i].name)) {
			*ret_recursive = r;
			return names[i].flag;
		}
	return 0;
}

/* tmpfs options: size= and mode= are kept (checked), flags known, the rest refused. */
static int tmpfs_options(const cJSON *opts, struct hutch_oci_mount *m, size_t i,
                         struct hutch_err *err)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, opts) {
		const char *v = cJSON_IsString(o) ? o->valuestring : NULL;
		char **dst = NULL;

		if (!v)
			return hutch_err_set(err, -EINVAL, "mounts[%zu].options: not a string", i);
		if (!strncmp(v, "size=", 5))
			dst = &m->size;
		else if (!strncmp(v, "mode=", 5))
			dst = &m->mode;
		if (dst) {
			const char *val = v + 5;
			size_t digits = strspn(val, "0123456789");
			bool ok = digits > 0 && digits < 20 &&
			          (val[digits] == '\0' ||
			           (dst == &m->size && strchr("kmgKMG", val[digits]) &&
			            val[digits + 1] == '\0'));
			if (!ok)
				return hutch_err_set(err, -EINVAL,
				                     "mounts[%zu].options: bad '%.32s'", i, v);
			free(*dst);
			*dst = strdup(val);
			if (!*dst)
				return hutch_err_set(err, -ENOMEM, "out of memory");
		}
	}
	return 0;
}

static int parse_mount(const cJSON *e, size_t i, struct hutch_oci_mount *m, size_t *n,
                       struct hutch_err *err)
{
	const cJSON *opts = hutch_oci_json_item(e, "options"), *o;
	char field[48];
	_Bool bind = false, rec;
	char *type = NULL;
	int r;

	snprintf(field, sizeof(field), "mounts[%zu].destination", i);
	r = hutch_oci_json_str(e, "destination", field, &m->dest, err);
	if (r < 0)
		return r;
	(*n)++; /* freed with the spec from here on */
	if (!m->dest || m->dest[0] != '/' || hutch_oci_has_dotdot(m->dest))
		return hutch_err_set(err, -EINVAL, "%s: not an absolute path without '..'", field);
	if (opts && !cJSON_IsArray(opts))
		return hutch_err_set(err, -EINVAL, "mounts[%zu].options: not an array", i);
	cJSON_ArrayForEach(o, opts) {
		const char *v = cJSON_IsString(o) ? o->valuestring : "";
		if (!strcmp(v, "bind") || !strcmp(v, "rbind"))
			bind = true;
		if (!strcmp(v, "rbind"))
			m->recursive = true;
		if (!strcmp(v, "ro"))
			m->readonly = true;
		if (!strcmp(v, "noexec"))
			m->noexec = true;
		if (propagation_of(v, &rec))
			m->propagation = propagation_of(v, &m->propagation_recursive);
	}
	snprintf(field, sizeof(field), "mounts[%zu].type", i);
	r = hutch_oci_json_str(e, "type", field, &type, err);
	if (r < 0)
		return r;
	if (type && !strcmp(type, "bind"))
		bind = true;
	if (is_hutch_dest(m->dest))
		m->kind = HUTCH_OCI_MOUNT_HUTCH;
	else if (bind)
		m->kind = HUTCH_OCI_MOUNT_BIND;
	else if (type && !strcmp(type, "tmpfs"))
		m->kind = HUTCH_OCI_MOUNT_TMPFS;
	else if (type && !strcmp(type, "mqueue"))
		m->kind = HUTCH_OCI_MOUNT_MQUEUE;
	else if (type && !strcmp(type, "sysfs"))
		m->kind = HUTCH_OCI_MOUNT_SYSFS;
	else if (type && (!strcmp(type, "cgroup") || !strcmp(type, "cgroup2")))
		m->kind = HUTCH_OCI_MOUNT_CGROUP;
	else
		r = hutch_err_set(
		        err, -EPERM,
		        "%s: '%.32s' at '%.256s' is refused (hutch mounts binds, tmpfs, mqueue, "
		        "sysfs and cgroup)",
		        field, type ? type : "", m->dest);
	free(type);
	if (r < 0)
		return r;
	if (m->kind == HUTCH_OCI_MOUNT_TMPFS)
		return tmpfs_options(opts, m, i, err);
	if (m->kind != HUTCH_OCI_MOUNT_BIND)
		return 0;
	snprintf(field, sizeof(field), "mounts[%zu].source", i);
	r = hutch_oci_json_str(e, "source", field, &m->source, err);
	if (r >= 0 && (!m->source || m->source[0] != '/'))
		r = hutch_err_set(err, -EINVAL, "%s: not an absolute host path", field);
	return r;
}

int hutch_oci_parse_mounts(const cJSON *arr, struct hutch_oci_mount mounts[HUTCH_OCI_MAX_MOUNTS],
                           size_t *n, struct hutch_err *err)
{
	const cJSON *e;
	size_t i = 0;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "mounts: not an array");
	cJSON_ArrayForEach(e, arr) {
		int r;

		if (*n == HUTCH_OCI_MAX_MOUNTS)
			return hutch_err_set(err, -E2BIG, "mounts: more than %d",
			                     HUTCH_OCI_MAX_MOUNTS);
		r = parse_mount(e, i++, &mounts[*n], n, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int hutch_oci_parse_root_propagation(const cJSON *lx, unsigned long *ret, struct hutch_err *err)
{
	_cleanup_free_ char *v = NULL;
	bool rec;
	int r = hutch_oci_json_str(lx, "rootfsPropagation", "linux.rootfsPropagation", &v, err);

	if (r < 0 || !v || !v[0])
		return r;
	*ret = propagation_of(v, &rec);
	if (!*ret)
		return hutch_err_set(err, -EINVAL,
		                     "linux.rootfsPropagation: '%.32s' is none of [r]shared, "
		                     "[r]slave, [r]private, [r]unbindable",
		                     v);
	return 0;
}

void hutch_oci_mounts_done(struct hutch_oci_mount *mounts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(mounts[i].dest);
		free(mounts[i].source);
		free(mounts[i].size);
		free(mounts[i].mode);
	}
}
