/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for an OCI bundle's config.json parser (oci/spec.c),
 * which reads what `hutch oci create` is handed. Every result must be 0 or
 * a negative errno with a message naming a field; a success must respect
 * every bound and leave only what hutch accepts (absolute paths without
 * "..", uid and gid in the sandbox's range, args present).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* linux.resources: every list within its bound, every string
 * terminated, no unified key that is a path or another controller's. */
static void check_resources(const struct hutch_resources *r)
{
	for (size_t l = 0; l < HUTCH_RES_DEV_LISTS; l++)
		if (r->ndev[l] > HUTCH_RES_MAX_DEVICES)
			abort();
	if (r->nhugepages > HUTCH_RES_MAX_HUGEPAGES || r->nprios > HUTCH_RES_MAX_PRIOS ||
	    r->nunified > HUTCH_RES_MAX_UNIFIED || !memchr(r->cpus, 0, sizeof(r->cpus)) ||
	    !memchr(r->mems, 0, sizeof(r->mems)) || r->swappiness > 100 || r->cpu_shares > 262144 ||
	    (r->blkio_weight && r->blkio_weight < 10))
		abort();
	for (size_t i = 0; i < r->nunified; i++)
		if (strchr(r->unified[i].key, '/') || strstr(r->unified[i].key, "..") ||
		    !strncmp(r->unified[i].key, "cgroup.", 7) || strchr(r->unified[i].value, '\n'))
			abort();
	for (size_t i = 0; i < r->nprios; i++)
		if (!r->prios[i].name[0] || strchr(r->prios[i].name, '/'))
			abort();
}

static void check_ok(const struct hutch_oci_spec *s)
{
	if (!s->root_path || !s->args || s->nargs == 0 || !s->args[0] || s->args[s->nargs] ||
	    s->nargs > HUTCH_OCI_MAX_ARGS || s->nenv > HUTCH_OCI_MAX_ENV ||
	    s->nmounts > HUTCH_OCI_MAX_MOUNTS || s->nrlimits > HUTCH_OCI_MAX_RLIMITS || !s->cwd ||
	    s->cwd[0] != '/' || s->uid > 65535 || s->gid > 65535)
		abort();
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct hutch_oci_mount *m = &s->mounts[i];
		if (!m->dest || m->dest[0] != '/' || strlen(m->dest) > HUTCH_OCI_MAX_STRING)
			abort();
		if (m->kind == HUTCH_OCI_MOUNT_BIND && (!m->source || m->source[0] != '/'))
			abort();
		for (const char *p = m->dest; (p = strstr(p, "..")); p += 2)
			if (p[-1] == '/' && (p[2] == '\0' || p[2] == '/'))
				abort();
	}
	for (size_t i = 0; i < s->nrlimits; i++)
		if (s->rlimits[i].soft > s->rlimits[i].hard)
			abort();
	check_resources(&s->resources.res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_oci_spec s;
	struct hutch_err err = { 0 };
	int r = hutch_oci_spec_parse((const char *)data, size, &s, &err);

	if (r < 0 && (r != err.code || !err.msg[0]))
		abort();
	if (r > 0)
		abort();
	if (r == 0) {
		check_ok(&s);
		/* linux.cgroupsPath both ways: bounded, NUL-terminated, or an error. */
		for (int systemd = 0; s.cgroups_path && systemd < 2; systemd++) {
			char path[512];

			memset(path, 'x', sizeof(path));
			if (hutch_oci_cgroups_path(s.cgroups_path, systemd, path, sizeof(path),
			                           &err) == 0 &&
			    !memchr(path, '\0', sizeof(path)))
				abort();
		}
		hutch_oci_spec_done(&s);
	}
	return 0;
}
