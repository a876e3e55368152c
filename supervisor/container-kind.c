/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI container's row of the kinds table (kind.h): what setup, init's
 * parameters and the API do differently for a container (container.h),
 * whose steps are container.c's. A pod member (pod.c) is a container
 * too: its row takes these ops, HUTCH_CONTAINER_KIND_OPS, and adds the
 * joins.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "container.h"
#include "init.h"
#include "kind.h"
#include "pod.h"
#include "supervisor.h"
#include "syscalls.h"

static bool is_container(const struct hutch_config *cfg, const struct hutch_container *ct)
{
	(void)cfg;
	return ct != NULL;
}

void hutch_container_cgroup(const struct sup *s, const char **ret_path,
                            const struct hutch_resources **ret_res)
{
	*ret_path = s->container->cgroup_path[0] ? s->container->cgroup_path : NULL;
	*ret_res = &s->container->limits.res;
}

int hutch_container_stash(const struct hutch_kind_setup *k)
{
	return hutch_container_stash_fd(k->container);
}

/* Child side: the container's host name, profile, terminal, sysctls and
 * bundle (its mounts: hutch_container_child_fds() placed them). */
void hutch_container_init_params(struct hutch_kind_setup *k, struct hutch_init_params *p)
{
	struct hutch_container *ct = k->container;

	if (ct->hostname[0]) {
		if (p->hostname)
			p->hostname = ct->hostname;
		p->rootfs.hostname = ct->hostname;
	}
	p->extra_seccomp = ct->seccomp.len ? &ct->seccomp : NULL;
	p->console_uid = ct->terminal ? (int)ct->uid : -1;
	p->sysctls = (const char *const *)ct->sysctls;
	p->rootfs.bundle = &ct->bundle;
}

bool hutch_container_take_console(struct hutch_kind_setup *k, int fd)
{
	if (!k->container->terminal || k->container->pty_master >= 0)
		return false;
	k->container->pty_master = fd;
	return true;
}

/* Only the socket before ready (hutch_api_start_late()), unless an
 * executor port is served from the start. */
int hutch_container_api_start(struct sup *s, struct hutch_err *err)
{
	return s->cfg->executor_listen[0] ? hutch_api_start(s, err) : hutch_api_listen(s, err);
}

/*
 * The bundle's binds (hostPath, emptyDir, configMap and secret volumes,
 * the CRI's /etc/hosts ...), idmapped onto the sandbox's ids as the
 * rootfs: a file of host uid N (N < 65536) shows as the container's uid
 * N, host root's as the container's root, with the rights of those ids,
 * as Kubernetes mounts the volumes of a pod that has a user namespace of
 * its own, and as runc's container (host root) has them. A volume owned
 * by host root with mode 0700 is then the container root's, as under
 * runc. Ids beyond the sandbox's range (65536 and up) stay unmapped:
 * nobody, and closed to every capability inside (the kernel's
 * capable_wrt_inode_uidgid). A file system that cannot idmap (EINVAL:
 * nfs, proc ...) keeps its host owners, said in the events once ready.
 */
static void idmap_binds(struct hutch_container *ct, int userns)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns };

	for (size_t i = 0; i < ct->nmounts; i++) {
		if (ct->rmounts[i].kind != HUTCH_ROOTFS_MOUNT_BIND || ct->mounts[i].premade ||
		    ct->mount_fds[i] < 0)
			continue;
		if (sys_mount_setattr(ct->mount_fds[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
		                      sizeof(attr)) < 0)
			ct->mounts[i].idmap_errno = errno;
	}
}

/*
 * The bundle's files belong to host ids 0-65535 (unpacked by a root
 * containerd or podman); inside they must be the sandbox's 0-65535. An
 * idmapped mount with the sandbox's own user namespace does that without
 * touching a file: a file of host uid 0 shows as the sandbox's root. The
 * binds too (idmap_binds()).
 */
int hutch_container_before_go(struct hutch_kind_setup *k, pid_t init, struct hutch_err *err)
{
	struct hutch_container *ct = k->container;
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
	_cleanup_close_ int userns = -EBADF;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)init);
	userns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns < 0)
		return hutch_err_set_errno(err, -errno, "open the sandbox's user namespace");
	attr.userns_fd = (uint64_t)userns;
	if (sys_mount_setattr(ct->root_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) <
	    0)
		return hutch_err_set_errno(err, -errno,
		                           "root.path: idmap '%s' onto the sandbox's ids "
		                           "(the file system must support idmapped mounts)",
		                           ct->rootfs);
	idmap_binds(ct, userns);
	for (size_t i = 0; i < ct->nrlimits; i++) {
		struct rlimit rl = { .rlim_cur = ct->rlimits[i].soft,
			             .rlim_max = ct->rlimits[i].hard };
		if (prlimit(init, ct->rlimits[i].resource, &rl, NULL) < 0)
			return hutch_err_set_errno(err, -errno, "process.rlimits[%zu]: set", i);
	}
	return 0;
}

const struct hutch_kind hutch_kind_container = {
	.name = "container",
	.is = is_container,
	HUTCH_CONTAINER_KIND_OPS,
	.join = hutch_pod_join_prepare,
};
