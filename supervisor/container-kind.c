/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI container's row of the kinds table (kind.h): what setup, init's
 * parameters and the API do differently for a container (container.h),
 * whose steps are container.c's. A pod member (pod.c) is a container
 * too: its row takes these ops, HUTCH_CONTAINER_KIND_OPS, and adds the
 * joins.
 */
#include <errno.h>
#include <stdio.h>

#include "api.h"
#include "container.h"
#include "init.h"
#include "kind.h"
#include "pod.h"
#include "supervisor.h"

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

int hutch_container_stash(const struct sup *s)
{
	return hutch_container_stash_fd(s->container);
}

/* Child side: the container's host name, profile, terminal, sysctls and
 * bundle (its mounts: hutch_container_child_fds() placed them). */
void hutch_container_init_params(struct sup *s, struct hutch_init_params *p)
{
	struct hutch_container *ct = s->container;

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

bool hutch_container_take_console(struct sup *s, int fd)
{
	if (!s->container->terminal || s->container->pty_master >= 0)
		return false;
	s->container->pty_master = fd;
	return true;
}

/* Only the socket before ready (hutch_api_start_late()), unless an
 * executor port is served from the start. */
int hutch_container_api_start(struct sup *s, struct hutch_err *err)
{
	return s->cfg->executor_listen[0] ? hutch_api_start(s, err) : hutch_api_listen(s, err);
}

const struct hutch_kind hutch_kind_container = {
	.name = "container",
	.is = is_container,
	HUTCH_CONTAINER_KIND_OPS,
	.join = hutch_pod_join_prepare,
};
