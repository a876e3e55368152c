/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The values that cross the cgroup interface: a sandbox's limits, a
 * container's linux.resources, what a sandbox uses; and the pure helpers
 * on them (cgroup-limits.c). No syscalls, no cgroup object: oci/ parses
 * into these, proto.h carries them, the backends write them.
 */
#ifndef HUTCH_CGROUP_LIMITS_H
#define HUTCH_CGROUP_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How many directories a sandbox's cgroup has at most (v1: one per
 * hierarchy; hutch_cgroup_dirs()). */
#define HUTCH_CGROUP_MAX_DIRS 12
/* A container's linux.cgroupsPath: at most this many '/'-separated names
 * and bytes (hutch_cgroup_new_at()). */
#define HUTCH_CGROUP_PATH_DEPTH 8
#define HUTCH_CGROUP_PATH_MAX   511
/* hutch's CFS period, and the kernel's minimum cfs_quota_us / cpu.max
 * quota. */
#define CG_PERIOD_US    100000ULL
#define CG_QUOTA_MIN_US 1000ULL

/*
 * What a container's linux.resources asks beyond the three limits (OCI
 * runtime-spec names; oci/spec-resources.c parses and bounds it, the
 * backends write it through cgroup-res.c). Fixed size: it travels by value
 * in oci update's message (proto.h). A field counts only when given:
 * numbers 0 and strings "" are "not given", the flags below say so for
 * fields where 0 is a value.
 */
#define HUTCH_RES_MAX_DEVICES   16 /* per blockIO list */
#define HUTCH_RES_MAX_HUGEPAGES 8
#define HUTCH_RES_MAX_PRIOS     16 /* network.priorities */
#define HUTCH_RES_MAX_UNIFIED   16
enum {
	HUTCH_RES_SWAPPINESS = 1u << 0,
	HUTCH_RES_OOM_DISABLE = 1u << 1, /* memory.disableOOMKiller: true */
	HUTCH_RES_KERNEL_TCP = 1u << 2,
	HUTCH_RES_CLASSID = 1u << 3,
	HUTCH_RES_HUGEPAGES = 1u << 4, /* nhugepages entries given (a limit may be 0) */
};
/* blockIO's per-device entries: weight (and leaf weight) or a rate. */
struct hutch_res_dev {
	int64_t major, minor;
	uint64_t value;       /* weight, bytes or ops per second */
	uint16_t leaf_weight; /* weightDevice only; 0: not given */
};
/* The blockIO lists, in this order. */
enum {
	HUTCH_RES_WEIGHT_DEV,
	HUTCH_RES_READ_BPS,
	HUTCH_RES_WRITE_BPS,
	HUTCH_RES_READ_IOPS,
	HUTCH_RES_WRITE_IOPS,
	HUTCH_RES_DEV_LISTS
};
struct hutch_resources {
	uint32_t given;      /* HUTCH_RES_* */
	uint64_t cpu_shares; /* 2..262144 */
	/* cpu.quota at the bundle's cpu.period (both or neither), lowered to
	 * cpu_millis at that period by the caller; 0: hutch's 100 ms period */
	uint64_t cpu_quota, cpu_period;
	char cpus[256], mems[64];
	uint64_t mem_reservation;
	uint64_t mem_swap; /* memory + swap: only the memory limit or more (no swap) */
	uint64_t kernel_tcp;
	uint32_t swappiness;                      /* 0..100 */
	uint16_t blkio_weight, blkio_leaf_weight; /* 10..1000 */
	struct hutch_res_dev dev[HUTCH_RES_DEV_LISTS][HUTCH_RES_MAX_DEVICES];
	uint8_t ndev[HUTCH_RES_DEV_LISTS];
	struct {
		char size[16]; /* "2MB", "1GB": as the kernel's knob names it */
		uint64_t limit;
	} hugepages[HUTCH_RES_MAX_HUGEPAGES];
	uint8_t nhugepages;
	uint32_t classid;
	struct {
		char name[16];
		uint32_t prio;
	} prios[HUTCH_RES_MAX_PRIOS];
	uint8_t nprios;
	struct {
		char key[64], value[256];
	} unified[HUTCH_RES_MAX_UNIFIED];
	uint8_t nunified;
};

struct hutch_limits {
	uint64_t cpu_millis;   /* 1000 = one CPU; becomes a CFS quota */
	uint64_t memory_bytes; /* hard limit, no swap */
	uint64_t pids_max;
	struct hutch_resources res; /* a container's: the rest of linux.resources */
};

/* Pure helpers of these values (cgroup-limits.c). */
/* The v1 controllers (besides cpu, memory, pids, freezer) res needs:
 * a mask of HUTCH_CGROUP_EXTRA_*. */
enum {
	HUTCH_CGROUP_EXTRA_CPUSET = 1u << 0,
	HUTCH_CGROUP_EXTRA_BLKIO = 1u << 1,
	HUTCH_CGROUP_EXTRA_HUGETLB = 1u << 2,
	HUTCH_CGROUP_EXTRA_NET_CLS = 1u << 3,
	HUTCH_CGROUP_EXTRA_NET_PRIO = 1u << 4,
};
unsigned int hutch_resources_extra(const struct hutch_resources *res);
/* oci update: what upd gives replaces dst's (lists: as a whole). */
void hutch_resources_merge(struct hutch_resources *dst, const struct hutch_resources *upd);
/* cpu.shares (2..262144) as cgroup v2's cpu.weight (1..10000), as runc
 * and crun convert it. */
uint64_t hutch_cgroup_shares_to_weight(uint64_t shares);
/* A linux.resources.unified key and value, checked against lim: 0 with
 * ret the value to write (lowered to lim's where it is one of hutch's
 * limits), or -EPERM / -EINVAL with why (a static string) set. */
int hutch_cgroup_unified_check(const char *key, const char *value, const struct hutch_limits *lim,
                               char *ret, size_t size, const char **why);

/* What the sandbox uses now, for hutch stats; a counter the host cannot
 * give (v1 without cpuacct, a kernel without memory.peak) is UINT64_MAX. */
struct hutch_cgroup_usage {
	uint64_t cpu_usec;    /* CPU time used since creation */
	uint64_t mem_current; /* bytes charged now (processes and tmpfs pages) */
	uint64_t mem_peak;    /* the most ever charged */
	uint64_t pids;        /* tasks now */
	uint64_t oom_kills;
};

#endif
