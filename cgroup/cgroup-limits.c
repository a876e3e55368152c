/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure helpers of the cgroup interface's values (cgroup-limits.h): a
 * container's resources, which v1 controllers they need, merged by oci
 * update, shares as a v2 weight, the unified key check. No syscalls: the
 * unit test and the spec fuzzer reach them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-limits.h"

unsigned int hutch_resources_extra(const struct hutch_resources *res)
{
	unsigned int m = 0;

	if (res->cpus[0] || res->mems[0])
		m |= HUTCH_CGROUP_EXTRA_CPUSET;
	if (res->blkio_weight || res->blkio_leaf_weight)
		m |= HUTCH_CGROUP_EXTRA_BLKIO;
	for (size_t i = 0; i < HUTCH_RES_DEV_LISTS; i++)
		if (res->ndev[i])
			m |= HUTCH_CGROUP_EXTRA_BLKIO;
	if (res->given & HUTCH_RES_HUGEPAGES)
		m |= HUTCH_CGROUP_EXTRA_HUGETLB;
	if (res->given & HUTCH_RES_CLASSID)
		m |= HUTCH_CGROUP_EXTRA_NET_CLS;
	if (res->nprios)
		m |= HUTCH_CGROUP_EXTRA_NET_PRIO;
	return m;
}

void hutch_resources_merge(struct hutch_resources *dst, const struct hutch_resources *upd)
{
	dst->given |= upd->given;
	if (upd->cpu_shares)
		dst->cpu_shares = upd->cpu_shares;
	if (upd->cpu_period) {
		dst->cpu_quota = upd->cpu_quota;
		dst->cpu_period = upd->cpu_period;
	}
	if (upd->cpus[0])
		memcpy(dst->cpus, upd->cpus, sizeof(dst->cpus));
	if (upd->mems[0])
		memcpy(dst->mems, upd->mems, sizeof(dst->mems));
	if (upd->mem_reservation)
		dst->mem_reservation = upd->mem_reservation;
	if (upd->mem_swap)
		dst->mem_swap = upd->mem_swap;
	if (upd->given & HUTCH_RES_KERNEL_TCP)
		dst->kernel_tcp = upd->kernel_tcp;
	if (upd->given & HUTCH_RES_SWAPPINESS)
		dst->swappiness = upd->swappiness;
	if (upd->blkio_weight)
		dst->blkio_weight = upd->blkio_weight;
	if (upd->blkio_leaf_weight)
		dst->blkio_leaf_weight = upd->blkio_leaf_weight;
	for (size_t i = 0; i < HUTCH_RES_DEV_LISTS; i++)
		if (upd->ndev[i]) {
			memcpy(dst->dev[i], upd->dev[i], sizeof(dst->dev[i]));
			dst->ndev[i] = upd->ndev[i];
		}
	if (upd->given & HUTCH_RES_HUGEPAGES) {
		memcpy(dst->hugepages, upd->hugepages, sizeof(dst->hugepages));
		dst->nhugepages = upd->nhugepages;
	}
	if (upd->given & HUTCH_RES_CLASSID)
		dst->classid = upd->classid;
	if (upd->nprios) {
		memcpy(dst->prios, upd->prios, sizeof(dst->prios));
		dst->nprios = upd->nprios;
	}
	if (upd->nunified) {
		memcpy(dst->unified, upd->unified, sizeof(dst->unified));
		dst->nunified = upd->nunified;
	}
}

uint64_t hutch_cgroup_shares_to_weight(uint64_t shares)
{
	if (shares < 2)
		shares = 2;
	if (shares > 262144)
		shares = 262144;
	return 1 + ((shares - 2) * 9999) / 262142;
}

/* A decimal of at most 19 digits, or "max" (UINT64_MAX). */
static int parse_max(const char *s, uint64_t *ret)
{
	char *end = NULL;

	if (!strcmp(s, "max")) {
		*ret = UINT64_MAX;
		return 0;
	}
	if (!s[0] || strspn(s, "0123456789") != strlen(s) || strlen(s) > 19)
		return -EINVAL;
	*ret = strtoull(s, &end, 10);
	return 0;
}

/* cpu.max: "QUOTA [PERIOD]", QUOTA a number or "max"; lowered to
 * cpu_millis (1000 = one CPU) at the same period. */
static int lower_cpu_max(const char *value, uint64_t cpu_millis, char *ret, size_t size)
{
	char quota[32] = "", extra;
	uint64_t q, period = CG_PERIOD_US;
	unsigned long long p = CG_PERIOD_US;
	int n = sscanf(value, "%31s %llu %c", quota, &p, &extra);

	if (n < 1 || n > 2 || parse_max(quota, &q) < 0 || p < 1000 || p > 1000000)
		return -EINVAL;
	period = p;
	if (cpu_millis && (q == UINT64_MAX || q > cpu_millis * period / 1000))
		q = cpu_millis * period / 1000;
	if (q != UINT64_MAX && q < CG_QUOTA_MIN_US)
		return -EINVAL;
	if (q == UINT64_MAX)
		snprintf(ret, size, "max %" PRIu64, period);
	else
		snprintf(ret, size, "%" PRIu64 " %" PRIu64, q, period);
	return 0;
}

int hutch_cgroup_unified_check(const char *key, const char *value, const struct hutch_limits *lim,
                               char *ret, size_t size, const char **why)
{
	static const char *const ctrls[] = { "cpu.", "cpuset.",  "memory.", "pids.",
		                             "io.",  "hugetlb.", NULL };
	static const char *const mem_limits[] = { "memory.max", "memory.high", "memory.low",
		                                  "memory.min", NULL };
	size_t klen = strlen(key);
	bool ok = false;
	uint64_t v;

	if (klen == 0 || klen >= 64 ||
	    strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789._") != klen || strstr(key, "..") ||
	    key[0] == '.') {
		*why = "not a cgroup knob name ([a-z0-9._], no '/' or '..')";
		return -EINVAL;
	}
	if (strlen(value) >= 256 || strchr(value, '\n') || strlen(value) >= size) {
		*why = "bad value (one line of up to 255 bytes)";
		return -EINVAL;
	}
	for (size_t i = 0; ctrls[i]; i++)
		ok = ok || !strncmp(key, ctrls[i], strlen(ctrls[i]));
	if (!ok) {
		*why = "not a knob of a controller hutch allows (cpu, cpuset, memory, pids, io, "
		       "hugetlb)";
		return -EPERM;
	}
	if (!strcmp(key, "memory.oom.group")) {
		*why = "hutch's own (one OOM kill takes one process, never the container's init)";
		return -EPERM;
	}
	snprintf(ret, size, "%s", value);
	for (size_t i = 0; mem_limits[i]; i++) {
		if (strcmp(key, mem_limits[i]))
			continue;
		if (parse_max(value, &v) < 0) {
			*why = "not a number of bytes or \"max\"";
			return -EINVAL;
		}
		if (lim->memory_bytes && v > lim->memory_bytes)
			snprintf(ret, size, "%" PRIu64, lim->memory_bytes);
		return 0;
	}
	if (!strcmp(key, "memory.swap.max")) {
		if (parse_max(value, &v) < 0) {
			*why = "not a number of bytes or \"max\"";
			return -EINVAL;
		}
		snprintf(ret, size, "0"); /* hutch's sandboxes have no swap */
		return 0;
	}
	if (!strcmp(key, "pids.max")) {
		if (parse_max(value, &v) < 0) {
			*why = "not a number or \"max\"";
			return -EINVAL;
		}
		if (lim->pids_max && v > lim->pids_max)
			snprintf(ret, size, "%" PRIu64, lim->pids_max);
		return 0;
	}
	if (!strcmp(key, "cpu.max") && lower_cpu_max(value, lim->cpu_millis, ret, size) < 0) {
		*why = "not \"QUOTA|max [PERIOD]\" with a quota of 1000 or more and a period of "
		       "1000-1000000";
		return -EINVAL;
	}
	return 0;
}
