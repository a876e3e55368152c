/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bundle's spec onto hutch (see oci-internal.h): the annotations become
 * sandbox options (run.hutch.network, run.hutch.ttl-seconds,
 * run.hutch.instance-type), linux.resources lower the instance type's
 * limits (never raise them), the root and mounts and the process go to the
 * container, with the paths of a pod's namespaces it joins (checked by
 * the supervisor, supervisor/pod.c). What hutch always does on top is not
 * asked for here: its own user namespace and id range (or its pod's),
 * every other namespace, its seccomp allow-list, no_new_privs.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "oci-internal.h"
#include "syscalls.h"

static int set_option(struct hutch_config *cfg, const char *key, const char *value,
                      const char *annotation, struct hutch_err *err)
{
	int r;

	if (!value)
		return 0;
	r = hutch_config_set(cfg, key, value, err);
	return r < 0 ? hutch_err_prefix(err, "annotations.%s", annotation) : 0;
}

static int map_mounts(const struct hutch_oci_spec *spec, const struct hutch_config *cfg,
                      struct hutch_container *ct, struct hutch_err *err)
{
	for (size_t i = 0; i < spec->nmounts; i++) {
		const struct hutch_oci_mount *m = &spec->mounts[i];
		struct hutch_container_mount *cm;
		size_t k = 0;

		if (m->kind == HUTCH_OCI_MOUNT_HUTCH ||
		    /* v1: no cgroup2 of the sandbox's own to show (docs/kubernetes.md) */
		    (m->kind == HUTCH_OCI_MOUNT_CGROUP && !hutch_cgroup_host_is_v2()))
			continue;
		cm = &ct->mounts[ct->nmounts++];
		cm->dest = m->dest;
		cm->source = m->source;
		cm->tmpfs = m->kind == HUTCH_OCI_MOUNT_TMPFS;
		cm->mqueue = m->kind == HUTCH_OCI_MOUNT_MQUEUE;
		cm->sysfs = m->kind == HUTCH_OCI_MOUNT_SYSFS;
		cm->cgroup2 = m->kind == HUTCH_OCI_MOUNT_CGROUP;
		cm->readonly = m->readonly;
		cm->recursive = m->recursive;
		cm->attrs = m->noexec ? MOUNT_ATTR_NOEXEC : 0;
		cm->propagation = m->propagation;
		cm->propagation_recursive = m->propagation_recursive;
		if (!cm->tmpfs)
			continue;
		/* A tmpfs without a size would be bounded by nothing but the
		 * memory limit: give it the instance type's disk size. */
		if ((m->size ? asprintf(&cm->tmpfs_opts[k++], "size=%s", m->size)
		             : asprintf(&cm->tmpfs_opts[k++], "size=%" PRIu64,
		                        cfg->type->disk_bytes)) < 0)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		if (m->mode && asprintf(&cm->tmpfs_opts[k++], "mode=%s", m->mode) < 0)
			return hutch_err_set(err, -ENOMEM, "out of memory");
	}
	return 0;
}

static int map_rootfs(const struct hutch_oci_spec *spec, const char *bundle,
                      struct hutch_container *ct, struct hutch_err *err)
{
	char path[PATH_MAX * 2];

	if (spec->root_path[0] == '/')
		snprintf(path, sizeof(path), "%s", spec->root_path);
	else
		snprintf(path, sizeof(path), "%s/%s", bundle, spec->root_path);
	ct->rootfs = realpath(path, NULL);
	if (!ct->rootfs)
		return hutch_err_set_errno(err, -errno, "root.path: '%s'", path);
	ct->readonly = spec->root_readonly;
	ct->root_propagation = spec->root_propagation;
	return 0;
}

int hutch_oci_map(const struct hutch_oci_spec *spec, const char *bundle, struct hutch_config *cfg,
                  struct hutch_container *ct, struct hutch_err *err)
{
	int r;

	if ((r = set_option(cfg, "instance_type", spec->instance_type, "run.hutch.instance-type",
	                    err)) < 0 ||
	    (r = set_option(cfg, "network", spec->network, "run.hutch.network", err)) < 0 ||
	    (r = set_option(cfg, "ttl_seconds", spec->ttl_seconds, "run.hutch.ttl-seconds", err)) <
	            0)
		return r;
	_Static_assert((int)HUTCH_OCI_JOIN_N == (int)HUTCH_POD_NS_N &&
	                       (int)HUTCH_OCI_JOIN_NET == (int)HUTCH_POD_NS_NET &&
	                       (int)HUTCH_OCI_JOIN_UTS == (int)HUTCH_POD_NS_UTS &&
	                       (int)HUTCH_OCI_JOIN_PID == (int)HUTCH_POD_NS_PID,
	               "one order");
	for (size_t k = 0; k < HUTCH_OCI_JOIN_N; k++) {
		ct->join.path[k] = spec->join[k].path;
		ct->join.index[k] = spec->join[k].index;
	}
	ct->join.network_given = spec->network != NULL;
	ct->join.cgroup_path = spec->cgroup_ns.path;
	ct->join.cgroup_index = spec->cgroup_ns.index;
	r = map_rootfs(spec, bundle, ct, err);
	if (r < 0)
		return r;
	r = map_mounts(spec, cfg, ct, err);
	if (r < 0)
		return r;
	ct->argv = spec->args;
	ct->envp = spec->env;
	if (!ct->envp) {
		ct->envp = calloc(1, sizeof(char *));
		if (!ct->envp)
			return hutch_err_set(err, -ENOMEM, "out of memory");
	}
	r = hutch_oci_seccomp_compile(&spec->seccomp, &ct->seccomp, err);
	if (r < 0)
		return r;
	ct->masked_paths = spec->masked_paths;
	ct->sysctls = spec->sysctls;
	ct->readonly_paths = spec->readonly_paths;
	ct->cwd = spec->cwd;
	ct->uid = spec->uid;
	ct->gid = spec->gid;
	_Static_assert(HUTCH_OCI_MAX_GROUPS == HUTCH_SPAWN_MAX_GROUPS, "one bound");
	memcpy(ct->groups, spec->groups, sizeof(ct->groups));
	ct->ngroups = spec->ngroups;
	memcpy(ct->caps, spec->caps, sizeof(ct->caps));
	if (spec->cgroups_path &&
	    (r = hutch_oci_cgroups_path(spec->cgroups_path, hutch_oci_opts.systemd_cgroup,
	                                ct->cgroup_path, sizeof(ct->cgroup_path), err)) < 0)
		return r;
	if (ct->cgroup_path[0] && !hutch_cgroup_path_is_valid(ct->cgroup_path))
		return hutch_err_set(err, -EINVAL,
		                     "linux.cgroupsPath: '%.300s': up to %d names of "
		                     "[A-Za-z0-9_.-], none starting with '.', %d bytes",
		                     ct->cgroup_path, HUTCH_CGROUP_PATH_DEPTH,
		                     HUTCH_CGROUP_PATH_MAX);
	for (size_t i = 0; i < spec->nrlimits; i++)
		ct->rlimits[ct->nrlimits++] = (struct hutch_container_rlimit){
			.resource = spec->rlimits[i].resource,
			.soft = spec->rlimits[i].soft,
			.hard = spec->rlimits[i].hard,
		};
	if (spec->hostname && strlen(spec->hostname) >= sizeof(ct->hostname))
		return hutch_err_set(err, -EINVAL, "hostname: longer than %zu bytes",
		                     sizeof(ct->hostname) - 1);
	if (spec->hostname)
		snprintf(ct->hostname, sizeof(ct->hostname), "%s", spec->hostname);
	ct->limits.memory_bytes = spec->resources.memory_limit;
	ct->limits.pids_max = spec->resources.pids_limit;
	ct->limits.res = spec->resources.res;
	if (spec->resources.cpu_quota && spec->resources.cpu_period) {
		ct->limits.cpu_millis =
		        spec->resources.cpu_quota * 1000 / spec->resources.cpu_period;
		if (ct->limits.cpu_millis == 0)
			ct->limits.cpu_millis = 1;
	}
	return 0;
}
