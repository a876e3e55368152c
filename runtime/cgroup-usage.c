/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox's cgroups say it uses (hutch stats, GET /stats): the part
 * common to both backends; each backend's usage() reads its own knobs.
 */
#include <stdint.h>
#include <string.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-internal.h"

uint64_t hutch_cgroup_read_u64(const char *dir, const char *name)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(dir);
	char buf[64];
	uint64_t v;

	if (fd < 0 || hutch_read_file_at(fd, name, buf, sizeof(buf)) < 0)
		return UINT64_MAX;
	buf[strcspn(buf, "\n")] = '\0';
	return hutch_parse_u64(buf, 0, UINT64_MAX - 1, &v) < 0 ? UINT64_MAX : v;
}

int hutch_cgroup_usage(struct hutch_cgroup *cg, struct hutch_cgroup_usage *ret)
{
	*ret = (struct hutch_cgroup_usage){ UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
		                            UINT64_MAX };
	cg->ops->usage(cg, ret);
	if (cg->ops->oom_kills(cg, &ret->oom_kills) < 0)
		ret->oom_kills = UINT64_MAX;
	return 0;
}
