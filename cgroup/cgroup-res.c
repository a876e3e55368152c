/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rest of a container's linux.resources (struct hutch_resources,
 * cgroup-limits.h) beyond the three limits every sandbox has: cpu shares, cpuset,
 * memory reservation, swappiness, the OOM killer, kernel TCP memory, block
 * I/O, huge pages, net_cls/net_prio and cgroup v2's unified keys. Written
 * by the one cgroup writer `create` and `oci` share (cgroup-v1.c and
 * cgroup-v2.c call in here after hutch's own limits), never to raise one of
 * them: a reservation or a unified key that names one of hutch's limits is
 * lowered to it. What the host cannot honour (no such controller or knob)
 * is an error naming the linux.resources field, never silence. The pure
 * part (shares to weight, the unified key check, merge) is in
 * cgroup-limits.c, unit-tested and fuzzed with the spec parser.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-limits.h"
#include "cgroup-res.h"
#include "cgroup-util.h"

/* ---- writing ---- */

/* One knob for field; a knob the host lacks is named with the fix. */
static int res_knob(int fd, const char *dir, const char *field, const char *name, const char *value,
                    struct hutch_err *err)
{
	int r = hutch_write_knob_at(fd, name, value);

	if (r == -ENOENT)
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "%s: this host's cgroup '%s' has no '%s' (its controller "
		                     "or the kernel's support for it is missing): drop the field",
		                     field, dir, name);
	if (r < 0)
		return hutch_err_set_errno(err, r, "%s: write '%s' to '%s/%s'", field, value, dir,
		                           name);
	return 0;
}

static int res_knob_u64(int fd, const char *dir, const char *field, const char *name, uint64_t v,
                        struct hutch_err *err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return res_knob(fd, dir, field, name, buf, err);
}

/* memory.reservation, never above the memory limit: a sandbox reserves
 * at most what it may use. */
static uint64_t reservation(const struct hutch_limits *lim)
{
	uint64_t v = lim->res.mem_reservation;

	return lim->memory_bytes && v > lim->memory_bytes ? lim->memory_bytes : v;
}

/* cpuset.mems first: cpus alone do not make a cpuset usable. */
static int cpuset(int fd, const char *dir, const struct hutch_resources *res, struct hutch_err *err)
{
	int r = 0;

	if (res->mems[0])
		r = res_knob(fd, dir, "linux.resources.cpu.mems", "cpuset.mems", res->mems, err);
	if (r >= 0 && res->cpus[0])
		r = res_knob(fd, dir, "linux.resources.cpu.cpus", "cpuset.cpus", res->cpus, err);
	return r;
}

/* hugetlb.<size>.<suffix>: "limit_in_bytes" (v1) or "max" (v2). */
static int hugepages(int fd, const char *dir, const struct hutch_resources *res, const char *suffix,
                     struct hutch_err *err)
{
	for (size_t i = 0; i < res->nhugepages; i++) {
		char name[64];
		int r;

		snprintf(name, sizeof(name), "hugetlb.%s.%s", res->hugepages[i].size, suffix);
		r = res_knob_u64(fd, dir, "linux.resources.hugepageLimits", name,
		                 res->hugepages[i].limit, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static const char *const dev_fields[HUTCH_RES_DEV_LISTS] = {
	"linux.resources.blockIO.weightDevice",
	"linux.resources.blockIO.throttleReadBpsDevice",
	"linux.resources.blockIO.throttleWriteBpsDevice",
	"linux.resources.blockIO.throttleReadIOPSDevice",
	"linux.resources.blockIO.throttleWriteIOPSDevice",
};

/* Read fd's cpuset knob into buf (its first line); -errno on failure. */
static int cpuset_read(int fd, const char *knob, char *buf, size_t size)
{
	ssize_t n = hutch_read_file_at(fd, knob, buf, size);

	if (n < 0)
		return (int)n;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Write the first non-empty ancestor's cpus (read by the caller) and mems
 * into each empty directory below it, top down: what copying each
 * parent's into its child did, each read once (one level: 18 syscalls
 * where that took 30). */
static int cpuset_fill(const int *dirs, size_t n, int top, const char *cpus, const char *path,
                       const char *dir, struct hutch_err *err)
{
	char mems[256];
	int r = cpuset_read(top, "cpuset.mems", mems, sizeof(mems));

	if (r < 0)
		return hutch_err_set_errno(err, r, "read '%s/cpuset.mems'", path);
	while (n-- > 0) {
		r = hutch_write_knob_at(dirs[n], "cpuset.cpus", cpus);
		if (r >= 0)
			r = hutch_write_knob_at(dirs[n], "cpuset.mems", mems);
		if (r < 0)
			return hutch_err_set_errno(
			        err, r, "copy cpuset.cpus and .mems of '%s' below it to '%s'", path,
			        dir);
	}
	return 0;
}

int hutch_cgroup_cpuset_inherit(int fd, int pfd, const char *dir, struct hutch_err *err)
{
	char path[4096], buf[256];
	int dirs[HUTCH_CGROUP_PATH_DEPTH + 2], own[HUTCH_CGROUP_PATH_DEPTH + 2];
	size_t n = 0, n_own = 0;
	int r;

	/* Unreadable: left as it is (its parents' are never looked at). */
	if (cpuset_read(fd, "cpuset.cpus", buf, sizeof(buf)) < 0 || buf[strspn(buf, " ")])
		return 0;
	snprintf(path, sizeof(path), "%s", dir);
	dirs[n++] = fd;
	for (;;) {
		char *slash = strrchr(path, '/');
		int p;

		if (n == ELEMENTSOF(dirs) || !slash || (size_t)(slash - path) <= strlen(CG_ROOT)) {
			r = hutch_err_set(err, -EINVAL, "cgroup '%s': no parent with cpus", dir);
			break;
		}
		*slash = '\0';
		p = n == 1 && pfd >= 0 ? pfd : (own[n_own++] = hutch_cgroup_open_dir(path));
		if (p < 0) {
			n_own--;
			r = hutch_err_set_errno(err, p, "open cgroup '%s'", path);
			break;
		}
		r = cpuset_read(p, "cpuset.cpus", buf, sizeof(buf));
		if (r < 0) {
			r = hutch_err_set_errno(err, r, "read '%s/cpuset.cpus'", path);
			break;
		}
		if (buf[strspn(buf, " ")]) {
			r = cpuset_fill(dirs, n, p, buf, path, dir, err);
			break;
		}
		dirs[n++] = p;
	}
	while (n_own-- > 0)
		(void)close(own[n_own]);
	return r;
}

static int v1_cpu_memory(int fd, const char *dir, unsigned int ctrls,
                         const struct hutch_limits *lim, struct hutch_err *err)
{
	const struct hutch_resources *res = &lim->res;
	int r = 0;

	if ((ctrls & CG_CTRL_CPU) && res->cpu_shares &&
	    (r = res_knob_u64(fd, dir, "linux.resources.cpu.shares", "cpu.shares", res->cpu_shares,
	                      err)) < 0)
		return r;
	if (!(ctrls & CG_CTRL_MEMORY))
		return 0;
	if (res->mem_reservation &&
	    (r = res_knob_u64(fd, dir, "linux.resources.memory.reservation",
	                      "memory.soft_limit_in_bytes", reservation(lim), err)) < 0)
		return r;
	if ((res->given & HUTCH_RES_SWAPPINESS) &&
	    (r = res_knob_u64(fd, dir, "linux.resources.memory.swappiness", "memory.swappiness",
	                      res->swappiness, err)) < 0)
		return r;
	if ((res->given & HUTCH_RES_KERNEL_TCP) &&
	    (r = res_knob_u64(fd, dir, "linux.resources.memory.kernelTCP",
	                      "memory.kmem.tcp.limit_in_bytes", res->kernel_tcp, err)) < 0)
		return r;
	if (res->given & HUTCH_RES_OOM_DISABLE)
		r = res_knob(fd, dir, "linux.resources.memory.disableOOMKiller",
		             "memory.oom_control", "1", err);
	return r;
}

static int v1_blkio(int fd, const char *dir, const struct hutch_resources *res,
                    struct hutch_err *err)
{
	static const char *const knobs[HUTCH_RES_DEV_LISTS] = {
		"blkio.weight_device",
		"blkio.throttle.read_bps_device",
		"blkio.throttle.write_bps_device",
		"blkio.throttle.read_iops_device",
		"blkio.throttle.write_iops_device",
	};
	int r;

	if (res->blkio_weight && (r = res_knob_u64(fd, dir, "linux.resources.blockIO.weight",
	                                           "blkio.weight", res->blkio_weight, err)) < 0)
		return r;
	if (res->blkio_leaf_weight &&
	    (r = res_knob_u64(fd, dir, "linux.resources.blockIO.leafWeight", "blkio.leaf_weight",
	                      res->blkio_leaf_weight, err)) < 0)
		return r;
	for (size_t l = 0; l < HUTCH_RES_DEV_LISTS; l++)
		for (size_t i = 0; i < res->ndev[l]; i++) {
			const struct hutch_res_dev *d = &res->dev[l][i];
			char v[64];

			snprintf(v, sizeof(v), "%" PRId64 ":%" PRId64 " %" PRIu64, d->major,
			         d->minor, d->value);
			if ((l != HUTCH_RES_WEIGHT_DEV || d->value) &&
			    (r = res_knob(fd, dir, dev_fields[l], knobs[l], v, err)) < 0)
				return r;
			snprintf(v, sizeof(v), "%" PRId64 ":%" PRId64 " %u", d->major, d->minor,
			         d->leaf_weight);
			if (l == HUTCH_RES_WEIGHT_DEV && d->leaf_weight &&
			    (r = res_knob(fd, dir, dev_fields[l], "blkio.leaf_weight_device", v,
			                  err)) < 0)
				return r;
		}
	return 0;
}

int hutch_cgroup_res_write_v1(int fd, const char *dir, unsigned int ctrls,
                              const struct hutch_limits *lim, struct hutch_err *err)
{
	const struct hutch_resources *res = &lim->res;
	int r = v1_cpu_memory(fd, dir, ctrls, lim, err);

	if (r < 0)
		return r;
	if ((ctrls & CG_CTRL_CPUSET) && (r = cpuset(fd, dir, res, err)) < 0)
		return r;
	if ((ctrls & CG_CTRL_BLKIO) && (r = v1_blkio(fd, dir, res, err)) < 0)
		return r;
	if ((ctrls & CG_CTRL_HUGETLB) && (r = hugepages(fd, dir, res, "limit_in_bytes", err)) < 0)
		return r;
	if ((ctrls & CG_CTRL_NET_CLS) && (res->given & HUTCH_RES_CLASSID) &&
	    (r = res_knob_u64(fd, dir, "linux.resources.network.classID", "net_cls.classid",
	                      res->classid, err)) < 0)
		return r;
	for (size_t i = 0; (ctrls & CG_CTRL_NET_PRIO) && i < res->nprios; i++) {
		char v[64];

		snprintf(v, sizeof(v), "%s %u", res->prios[i].name, res->prios[i].prio);
		r = res_knob(fd, dir, "linux.resources.network.priorities", "net_prio.ifpriomap", v,
		             err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* What cgroup v2 has no knob for: refused naming the field (as crun does). */
static int v2_refusals(const struct hutch_resources *res, struct hutch_err *err)
{
	const char *field = (res->given & HUTCH_RES_SWAPPINESS)    ? "memory.swappiness"
	                    : (res->given & HUTCH_RES_OOM_DISABLE) ? "memory.disableOOMKiller"
	                    : (res->given & HUTCH_RES_KERNEL_TCP)  ? "memory.kernelTCP"
	                    : res->blkio_leaf_weight               ? "blockIO.leafWeight"
	                    : (res->given & HUTCH_RES_CLASSID)     ? "network.classID"
	                    : res->nprios                          ? "network.priorities"
	                                                           : NULL;

	for (size_t i = 0; !field && i < res->ndev[HUTCH_RES_WEIGHT_DEV]; i++)
		if (res->dev[HUTCH_RES_WEIGHT_DEV][i].leaf_weight)
			field = "blockIO.weightDevice[].leafWeight";
	if (!field)
		return 0;
	return hutch_err_set(err, -EOPNOTSUPP,
	                     "linux.resources.%s: cgroup v2 has no such knob (cgroup v1 only): "
	                     "drop the field",
	                     field);
}

static int v2_blkio(int fd, const char *dir, const struct hutch_resources *res,
                    struct hutch_err *err)
{
	static const char *const io_max[HUTCH_RES_DEV_LISTS] = { NULL, "rbps", "wbps", "riops",
		                                                 "wiops" };
	bool bfq = faccessat(fd, "io.bfq.weight", F_OK, 0) == 0;
	const char *wknob = bfq ? "io.bfq.weight" : "io.weight";
	char v[96];
	int r;

	if (res->blkio_weight) {
		/* io.weight is 1..10000 (default 100), blkio.weight 10..1000. */
		snprintf(v, sizeof(v), "default %u",
		         bfq ? res->blkio_weight : 1 + (res->blkio_weight - 10) * 9999 / 990);
		if ((r = res_knob(fd, dir, "linux.resources.blockIO.weight", wknob, v, err)) < 0)
			return r;
	}
	for (size_t l = 0; l < HUTCH_RES_DEV_LISTS; l++)
		for (size_t i = 0; i < res->ndev[l]; i++) {
			const struct hutch_res_dev *d = &res->dev[l][i];

			if (l == HUTCH_RES_WEIGHT_DEV && !d->value)
				continue;
			if (l == HUTCH_RES_WEIGHT_DEV)
				snprintf(v, sizeof(v), "%" PRId64 ":%" PRId64 " %" PRIu64, d->major,
				         d->minor, d->value);
			else
				snprintf(v, sizeof(v), "%" PRId64 ":%" PRId64 " %s=%" PRIu64,
				         d->major, d->minor, io_max[l], d->value);
			r = res_knob(fd, dir, dev_fields[l],
			             l == HUTCH_RES_WEIGHT_DEV ? wknob : "io.max", v, err);
			if (r < 0)
				return r;
		}
	return 0;
}

static int v2_unified(int fd, const char *dir, const struct hutch_limits *lim,
                      struct hutch_err *err)
{
	const struct hutch_resources *res = &lim->res;

	for (size_t i = 0; i < res->nunified; i++) {
		char field[128], v[256];
		const char *why = NULL;
		int r = hutch_cgroup_unified_check(res->unified[i].key, res->unified[i].value, lim,
		                                   v, sizeof(v), &why);

		snprintf(field, sizeof(field), "linux.resources.unified.%s", res->unified[i].key);
		if (r < 0)
			return hutch_err_set(err, r, "%s: %s", field, why);
		r = res_knob(fd, dir, field, res->unified[i].key, v, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int hutch_cgroup_res_write_v2(int fd, const char *dir, const struct hutch_limits *lim,
                              struct hutch_err *err)
{
	const struct hutch_resources *res = &lim->res;
	int r = v2_refusals(res, err);

	if (r < 0)
		return r;
	if (res->cpu_shares &&
	    (r = res_knob_u64(fd, dir, "linux.resources.cpu.shares", "cpu.weight",
	                      hutch_cgroup_shares_to_weight(res->cpu_shares), err)) < 0)
		return r;
	if ((r = cpuset(fd, dir, res, err)) < 0)
		return r;
	if (res->mem_reservation && (r = res_knob_u64(fd, dir, "linux.resources.memory.reservation",
	                                              "memory.low", reservation(lim), err)) < 0)
		return r;
	if ((r = v2_blkio(fd, dir, res, err)) < 0)
		return r;
	if ((r = hugepages(fd, dir, res, "max", err)) < 0)
		return r;
	return v2_unified(fd, dir, lim, err);
}

int hutch_cgroup_res_check_v1(const struct hutch_cgroup *cg, const struct hutch_resources *res,
                              struct hutch_err *err)
{
	unsigned int have = 0, want = hutch_resources_extra(res) << CG_CTRL_EXTRA_SHIFT;

	if (res->nunified)
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "linux.resources.unified.%s: cgroup v2 keys, and this host "
		                     "has cgroup v1 controllers: drop the field",
		                     res->unified[0].key);
	for (size_t i = 0; i < cg->n_dirs; i++)
		have |= cg->ctrls[i];
	/* oci update cannot add a hierarchy to a running container. */
	for (unsigned int i = 0; i < 5; i++)
		if ((want & ~have) & ((1u << i) << CG_CTRL_EXTRA_SHIFT))
			return hutch_err_set(err, -EOPNOTSUPP,
			                     "linux.resources: %s was not given at create, and "
			                     "a running container's cgroup v1 hierarchies are "
			                     "fixed: give it at create",
			                     (const char *const[]){
			                             "cpu.cpus/mems", "blockIO", "hugepageLimits",
			                             "network.classID", "network.priorities" }[i]);
	return 0;
}
