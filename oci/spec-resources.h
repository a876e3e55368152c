/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bundle's linux.resources (runtime-spec 1.x), parsed and bounded:
 * memory, cpu and pids limits (lowered to the instance type's by the
 * caller), and the rest into struct hutch_resources (cgroup/cgroup.h),
 * which the cgroup writer honours or fails naming the field. What hutch
 * refuses on purpose (realtime CPU time, rdma) is refused here, naming
 * the field. Pure; fuzzed with config.json (tests/fuzz/fuzz_ocispec.c).
 * `oci update -r` goes through the same function.
 */
#ifndef HUTCH_OCI_SPEC_RESOURCES_H
#define HUTCH_OCI_SPEC_RESOURCES_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "cgroup.h"
#include "error.h"

#define HUTCH_OCI_MAX_CGROUP_DEVICES 256 /* linux.resources.devices */

struct hutch_oci_resources {
	/* 0 = not given */
	uint64_t memory_limit, cpu_quota, cpu_period, pids_limit;
	struct hutch_resources res;
};

/* res: the linux.resources object, or NULL. On failure err names the
 * field (e.g. "linux.resources.cpu.realtimeRuntime: ..."). */
int hutch_oci_parse_resources(const cJSON *res, struct hutch_oci_resources *ret,
                              struct hutch_err *err);

#endif
