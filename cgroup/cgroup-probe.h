/* SPDX-License-Identifier: Apache-2.0 */
/* What the host offers for sandboxes' cgroups, for `hutch doctor`
 * (cgroup-probe.c). */
#ifndef HUTCH_CGROUP_PROBE_H
#define HUTCH_CGROUP_PROBE_H

#include <stdbool.h>

struct hutch_cgroup_probe {
	bool v2_unified; /* /sys/fs/cgroup is cgroup2 (pure v2) */
	bool hybrid;     /* v1 controllers plus a v2 tree */
	bool has_cpu, has_memory, has_pids, has_freezer;
	bool can_create;  /* a sandbox's cgroup could be made and removed */
	bool in_scope;    /* probed in a delegated scope of its own (systemd), as sandboxes get */
	char detail[256]; /* what is missing and how to fix it */
};
int hutch_cgroup_probe(struct hutch_cgroup_probe *ret);

#endif
