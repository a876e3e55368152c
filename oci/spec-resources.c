/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.resources -> struct hutch_oci_resources (spec-resources.h). Every
 * field of runtime-spec 1.x's LinuxResources is read: honoured (written by
 * cgroup/cgroup-res.c, lowered where it names one of hutch's limits),
 * accepted with what hutch does instead (memory.swap: no swap; memory.kernel:
 * deprecated, the kernel ignores it; devices: hutch's /dev is the default set
 * whatever the list says), or refused naming the field (realtime CPU time,
 * rdma, cpu.idle). docs/kubernetes.md "linux.resources" is the table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "spec-resources.h"

#define LR "linux.resources."

/* A number where -1 (or null, or absence) means "not given": 1 when given
 * (into *ret), 0 when not, or -errno. */
static int opt_u64(const cJSON *obj, const char *key, const char *field, uint64_t max,
                   uint64_t *ret, struct hutch_err *err)
{
	const cJSON *j = hutch_oci_json_item(obj, key);
	uint64_t v = 0;
	int r;

	if (!j || cJSON_IsNull(j) || (cJSON_IsNumber(j) && j->valuedouble == -1))
		return 0;
	r = hutch_oci_json_u64(obj, key, field, max, &v, err);
	if (r < 0)
		return r;
	*ret = v;
	return 1;
}

/* A cpuset list ("0-3,5"), at most size-1 bytes. */
static int cpuset_list(const cJSON *cpu, const char *key, char *ret, size_t size,
                       struct hutch_err *err)
{
	const cJSON *j = hutch_oci_json_item(cpu, key);
	size_t n;

	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsString(j))
		return hutch_err_set(err, -EINVAL, LR "cpu.%s: not a string", key);
	n = strlen(j->valuestring);
	if (n >= size || strspn(j->valuestring, "0123456789,-") != n)
		return hutch_err_set(err, -EINVAL,
		                     LR "cpu.%s: not a list of numbers and ranges (\"0-2,4\") of "
		                        "up to %zu bytes",
		                     key, size - 1);
	memcpy(ret, j->valuestring, n + 1);
	return 0;
}

static int parse_cpu(const cJSON *cpu, struct hutch_oci_resources *ret, struct hutch_err *err)
{
	static const char *const refused[] = { "realtimeRuntime", "realtimePeriod", "idle", NULL };
	const cJSON *quota = hutch_oci_json_item(cpu, "quota");
	int r;

	if (cpu && !cJSON_IsNull(cpu) && !cJSON_IsObject(cpu))
		return hutch_err_set(err, -EINVAL, LR "cpu: not an object");
	for (size_t i = 0; refused[i]; i++) {
		const cJSON *j = hutch_oci_json_item(cpu, refused[i]);

		if (j && !cJSON_IsNull(j) && !(cJSON_IsNumber(j) && j->valuedouble == 0))
			return hutch_err_set(err, -EPERM,
			                     LR "cpu.%s: refused (hutch gives a sandbox no "
			                        "realtime CPU time or scheduling class of its own)",
			                     refused[i]);
	}
	/* -1 is "unlimited" in the spec: hutch's own limit stays. */
	if (cJSON_IsNumber(quota) && quota->valuedouble < 0)
		quota = NULL;
	if ((quota && (r = hutch_oci_json_u64(cpu, "quota", LR "cpu.quota", 1ull << 40,
	                                      &ret->cpu_quota, err)) < 0) ||
	    (r = hutch_oci_json_u64(cpu, "period", LR "cpu.period", 1000000, &ret->cpu_period,
	                            err)) < 0 ||
	    (r = hutch_oci_json_u64(cpu, "shares", LR "cpu.shares", 262144, &ret->res.cpu_shares,
	                            err)) < 0 ||
	    (r = cpuset_list(cpu, "cpus", ret->res.cpus, sizeof(ret->res.cpus), err)) < 0 ||
	    (r = cpuset_list(cpu, "mems", ret->res.mems, sizeof(ret->res.mems), err)) < 0)
		return r;
	if (ret->cpu_quota && !ret->cpu_period)
		ret->cpu_period = 100000;
	if (ret->cpu_quota) { /* the period kept as asked, not 100 ms */
		ret->res.cpu_quota = ret->cpu_quota;
		ret->res.cpu_period = ret->cpu_period;
	}
	return 0;
}

static int parse_memory(const cJSON *mem, struct hutch_oci_resources *ret, struct hutch_err *err)
{
	struct hutch_resources *res = &ret->res;
	uint64_t v = 0, kernel = 0;
	int r;

	if (mem && !cJSON_IsNull(mem) && !cJSON_IsObject(mem))
		return hutch_err_set(err, -EINVAL, LR "memory: not an object");
	if ((r = opt_u64(mem, "limit", LR "memory.limit", 1ull << 50, &ret->memory_limit, err)) <
	            0 ||
	    (r = opt_u64(mem, "reservation", LR "memory.reservation", 1ull << 50,
	                 &res->mem_reservation, err)) < 0 ||
	    /* Deprecated (runtime-spec 1.0.2); kernels since 5.16 ignore
	     * it, and the memory limit counts kernel memory: accepted,
	     * checked, not written, as runc 1.1 does. */
	    (r = opt_u64(mem, "kernel", LR "memory.kernel", 1ull << 50, &kernel, err)) < 0)
		return r;
	if ((r = opt_u64(mem, "swap", LR "memory.swap", 1ull << 51, &res->mem_swap, err)) < 0)
		return r;
	/* 0, like -1, is "not set" (runc's reading: engines send it so). */
	if (r > 0 && res->mem_swap && ret->memory_limit && res->mem_swap < ret->memory_limit)
		return hutch_err_set(err, -EINVAL,
		                     LR "memory.swap: %llu is below memory.limit (%llu): "
		                        "swap is memory plus swap",
		                     (unsigned long long)res->mem_swap,
		                     (unsigned long long)ret->memory_limit);
	if ((r = opt_u64(mem, "kernelTCP", LR "memory.kernelTCP", 1ull << 50, &v, err)) < 0)
		return r;
	if (r > 0) {
		res->kernel_tcp = v;
		res->given |= HUTCH_RES_KERNEL_TCP;
	}
	if ((r = opt_u64(mem, "swappiness", LR "memory.swappiness", 100, &v, err)) < 0)
		return r;
	if (r > 0) {
		res->swappiness = (uint32_t)v;
		res->given |= HUTCH_RES_SWAPPINESS;
	}
	if (hutch_oci_json_bool(mem, "disableOOMKiller"))
		res->given |= HUTCH_RES_OOM_DISABLE;
	return 0;
}

/* One blockIO list ("weightDevice", "throttle...") into list l. */
static int parse_dev_list(const cJSON *bio, const char *key, size_t l, struct hutch_resources *res,
                          struct hutch_err *err)
{
	const cJSON *arr = hutch_oci_json_item(bio, key), *e;
	bool weight = l == HUTCH_RES_WEIGHT_DEV;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, LR "blockIO.%s: not an array", key);
	cJSON_ArrayForEach(e, arr) {
		struct hutch_res_dev *d;
		uint64_t major = 0, minor = 0, v = 0, leaf = 0;
		char field[96];
		size_t i = res->ndev[l];
		int r;

		if (i == HUTCH_RES_MAX_DEVICES)
			return hutch_err_set(err, -E2BIG, LR "blockIO.%s: more than %d", key,
			                     HUTCH_RES_MAX_DEVICES);
		snprintf(field, sizeof(field), LR "blockIO.%s[%zu]", key, i);
		if (!hutch_oci_json_item(e, "major") || !hutch_oci_json_item(e, "minor"))
			return hutch_err_set(err, -EINVAL, "%s: no major or minor", field);
		if ((r = hutch_oci_json_u64(e, "major", field, 0xfff, &major, err)) < 0 ||
		    (r = hutch_oci_json_u64(e, "minor", field, 0xfffff, &minor, err)) < 0 ||
		    (r = hutch_oci_json_u64(e, weight ? "weight" : "rate", field,
		                            weight ? 1000 : UINT64_MAX >> 1, &v, err)) < 0 ||
		    (weight &&
		     (r = hutch_oci_json_u64(e, "leafWeight", field, 1000, &leaf, err)) < 0))
			return r;
		if (weight && ((v && v < 10) || (leaf && leaf < 10)))
			return hutch_err_set(err, -EINVAL, "%s: a weight is 10 to 1000", field);
		d = &res->dev[l][i];
		*d = (struct hutch_res_dev){ .major = (int64_t)major,
			                     .minor = (int64_t)minor,
			                     .value = v,
			                     .leaf_weight = (uint16_t)leaf };
		res->ndev[l]++;
	}
	return 0;
}

static int parse_blkio(const cJSON *bio, struct hutch_resources *res, struct hutch_err *err)
{
	static const char *const lists[HUTCH_RES_DEV_LISTS] = {
		"weightDevice",           "throttleReadBpsDevice",   "throttleWriteBpsDevice",
		"throttleReadIOPSDevice", "throttleWriteIOPSDevice",
	};
	uint64_t w = 0, leaf = 0;
	int r;

	if (!bio || cJSON_IsNull(bio))
		return 0;
	if (!cJSON_IsObject(bio))
		return hutch_err_set(err, -EINVAL, LR "blockIO: not an object");
	if ((r = hutch_oci_json_u64(bio, "weight", LR "blockIO.weight", 1000, &w, err)) < 0 ||
	    (r = hutch_oci_json_u64(bio, "leafWeight", LR "blockIO.leafWeight", 1000, &leaf, err)) <
	            0)
		return r;
	if ((w && w < 10) || (leaf && leaf < 10))
		return hutch_err_set(err, -EINVAL, LR "blockIO.%s: a weight is 10 to 1000",
		                     w && w < 10 ? "weight" : "leafWeight");
	res->blkio_weight = (uint16_t)w;
	res->blkio_leaf_weight = (uint16_t)leaf;
	for (size_t l = 0; l < HUTCH_RES_DEV_LISTS; l++)
		if ((r = parse_dev_list(bio, lists[l], l, res, err)) < 0)
			return r;
	return 0;
}

/* "2MB", "1GB", "64KB": the kernel's name in hugetlb.<size>.* */
static bool is_page_size(const char *s)
{
	size_t d = strspn(s, "0123456789");

	return d > 0 && d < 8 && s[0] != '0' && strchr("KMG", s[d]) && s[d] && s[d + 1] == 'B' &&
	       !s[d + 2];
}

static int parse_hugepages(const cJSON *arr, struct hutch_resources *res, struct hutch_err *err)
{
	const cJSON *e;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, LR "hugepageLimits: not an array");
	cJSON_ArrayForEach(e, arr) {
		const cJSON *size = hutch_oci_json_item(e, "pageSize");
		size_t i = res->nhugepages;
		char field[64];
		int r;

		if (i == HUTCH_RES_MAX_HUGEPAGES)
			return hutch_err_set(err, -E2BIG, LR "hugepageLimits: more than %d",
			                     HUTCH_RES_MAX_HUGEPAGES);
		snprintf(field, sizeof(field), LR "hugepageLimits[%zu]", i);
		if (!cJSON_IsString(size) || !is_page_size(size->valuestring))
			return hutch_err_set(err, -EINVAL, "%s.pageSize: not a size like \"2MB\"",
			                     field);
		snprintf(res->hugepages[i].size, sizeof(res->hugepages[i].size), "%s",
		         size->valuestring);
		r = hutch_oci_json_u64(e, "limit", field, 1ull << 50, &res->hugepages[i].limit,
		                       err);
		if (r < 0)
			return r;
		res->nhugepages++;
	}
	if (res->nhugepages) /* an empty list asks for nothing */
		res->given |= HUTCH_RES_HUGEPAGES;
	return 0;
}

static int parse_network(const cJSON *net, struct hutch_resources *res, struct hutch_err *err)
{
	const cJSON *prios = hutch_oci_json_item(net, "priorities"), *e;
	uint64_t v = 0;
	int r;

	if (!net || cJSON_IsNull(net))
		return 0;
	if (!cJSON_IsObject(net))
		return hutch_err_set(err, -EINVAL, LR "network: not an object");
	if ((r = opt_u64(net, "classID", LR "network.classID", UINT32_MAX, &v, err)) < 0)
		return r;
	if (r > 0) {
		res->classid = (uint32_t)v;
		res->given |= HUTCH_RES_CLASSID;
	}
	if (prios && !cJSON_IsNull(prios) && !cJSON_IsArray(prios))
		return hutch_err_set(err, -EINVAL, LR "network.priorities: not an array");
	cJSON_ArrayForEach(e, prios) {
		const cJSON *name = hutch_oci_json_item(e, "name");
		size_t i = res->nprios, n;
		char field[64];

		if (i == HUTCH_RES_MAX_PRIOS)
			return hutch_err_set(err, -E2BIG, LR "network.priorities: more than %d",
			                     HUTCH_RES_MAX_PRIOS);
		snprintf(field, sizeof(field), LR "network.priorities[%zu]", i);
		n = cJSON_IsString(name) ? strlen(name->valuestring) : 0;
		if (n == 0 || n >= sizeof(res->prios[i].name) ||
		    strcspn(name->valuestring, " /\n\t:") != n)
			return hutch_err_set(err, -EINVAL, "%s.name: not an interface name", field);
		memcpy(res->prios[i].name, name->valuestring, n + 1);
		v = 0;
		if ((r = hutch_oci_json_u64(e, "priority", field, UINT32_MAX, &v, err)) < 0)
			return r;
		res->prios[i].prio = (uint32_t)v;
		res->nprios++;
	}
	return 0;
}

/* unified: keys checked now (syntax, allowed controllers); values
 * lowered to the instance type's limits when written (cgroup-res.c). */
static int parse_unified(const cJSON *obj, struct hutch_resources *res, struct hutch_err *err)
{
	static const struct hutch_limits none;
	const cJSON *e;

	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		return hutch_err_set(err, -EINVAL, LR "unified: not an object");
	cJSON_ArrayForEach(e, obj) {
		size_t i = res->nunified;
		const char *why = NULL;
		char v[256];
		int r;

		if (i == HUTCH_RES_MAX_UNIFIED)
			return hutch_err_set(err, -E2BIG, LR "unified: more than %d keys",
			                     HUTCH_RES_MAX_UNIFIED);
		if (!cJSON_IsString(e))
			return hutch_err_set(err, -EINVAL, LR "unified.%.64s: not a string",
			                     e->string);
		r = hutch_cgroup_unified_check(e->string, e->valuestring, &none, v, sizeof(v),
		                               &why);
		if (r < 0)
			return hutch_err_set(err, r, LR "unified.%.64s: %s", e->string, why);
		snprintf(res->unified[i].key, sizeof(res->unified[i].key), "%s", e->string);
		snprintf(res->unified[i].value, sizeof(res->unified[i].value), "%s",
		         e->valuestring);
		res->nunified++;
	}
	return 0;
}

/* devices: hutch's /dev holds the default set and nothing can make or
 * reach another device node (the container's root is not the host's), so
 * its rules change nothing: checked and bounded, not written. */
static int parse_devices(const cJSON *arr, struct hutch_err *err)
{
	const cJSON *e;
	size_t i = 0;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, LR "devices: not an array");
	if (cJSON_GetArraySize(arr) > HUTCH_OCI_MAX_CGROUP_DEVICES)
		return hutch_err_set(err, -E2BIG, LR "devices: more than %d",
		                     HUTCH_OCI_MAX_CGROUP_DEVICES);
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsObject(e) || !cJSON_IsBool(hutch_oci_json_item(e, "allow")))
			return hutch_err_set(err, -EINVAL, LR "devices[%zu]: no boolean allow", i);
		i++;
	}
	return 0;
}

int hutch_oci_parse_resources(const cJSON *res, struct hutch_oci_resources *ret,
                              struct hutch_err *err)
{
	const cJSON *pids = hutch_oci_json_item(res, "pids");
	const cJSON *plim = hutch_oci_json_item(pids, "limit"),
	            *rdma = hutch_oci_json_item(res, "rdma");
	int r;

	if (!res || cJSON_IsNull(res))
		return 0;
	if (!cJSON_IsObject(res))
		return hutch_err_set(err, -EINVAL, "linux.resources: not an object");
	if (rdma && !cJSON_IsNull(rdma) && cJSON_GetArraySize(rdma) > 0)
		return hutch_err_set(err, -EPERM,
		                     LR "rdma: refused (hutch gives a sandbox no RDMA device)");
	if (cJSON_IsNumber(plim) && plim->valuedouble <= 0)
		plim = NULL;
	if ((r = parse_cpu(hutch_oci_json_item(res, "cpu"), ret, err)) < 0 ||
	    (r = parse_memory(hutch_oci_json_item(res, "memory"), ret, err)) < 0 ||
	    (plim && (r = hutch_oci_json_u64(pids, "limit", LR "pids.limit", 1ull << 32,
	                                     &ret->pids_limit, err)) < 0) ||
	    (r = parse_blkio(hutch_oci_json_item(res, "blockIO"), &ret->res, err)) < 0 ||
	    (r = parse_hugepages(hutch_oci_json_item(res, "hugepageLimits"), &ret->res, err)) < 0 ||
	    (r = parse_network(hutch_oci_json_item(res, "network"), &ret->res, err)) < 0 ||
	    (r = parse_unified(hutch_oci_json_item(res, "unified"), &ret->res, err)) < 0)
		return r;
	return parse_devices(hutch_oci_json_item(res, "devices"), err);
}
