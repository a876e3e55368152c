/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An OCI bundle's config.json (runtime-spec 1.x), parsed into what hutch
 * honours, with what hutch refuses on purpose refused here, naming the
 * field. Pure (no syscalls) and bounded: the file is hostile input (at most
 * HUTCH_OCI_CONFIG_MAX bytes, every string and array bounded), fuzzed by
 * tests/fuzz/fuzz_ocispec.c.
 *
 * Unknown fields are ignored, as the runtime-spec asks of a runtime; known
 * fields hutch has no use for (apparmorProfile, oomScoreAdj, ...) too.
 */
#ifndef HUTCH_OCI_SPEC_H
#define HUTCH_OCI_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "json.h"
#include "spec-hooks.h"
#include "spec-mount.h"
#include "spec-resources.h"
#include "spec-seccomp.h"

#define HUTCH_OCI_CONFIG_MAX  (1u << 20) /* config.json bytes */
#define HUTCH_OCI_MAX_ARGS    1024
#define HUTCH_OCI_MAX_ENV     1024
#define HUTCH_OCI_MAX_RLIMITS 16
#define HUTCH_OCI_MAX_PATHS   256 /* maskedPaths, readonlyPaths */
#define HUTCH_OCI_MAX_SYSCTLS 64
#define HUTCH_OCI_MAX_GROUPS  32 /* process.user.additionalGids (proto.h's SPAWN) */

struct hutch_oci_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t soft, hard;
};

/* linux.namespaces[].path of a pod's namespaces, in this order
 * (supervisor/container.h's HUTCH_POD_NS_*). */
enum {
	HUTCH_OCI_JOIN_USER,
	HUTCH_OCI_JOIN_NET,
	HUTCH_OCI_JOIN_IPC,
	HUTCH_OCI_JOIN_UTS,
	HUTCH_OCI_JOIN_PID,
	HUTCH_OCI_JOIN_N
};

struct hutch_oci_spec {
	char *root_path; /* as given: relative to the bundle, or absolute */
	bool root_readonly;
	/* linux.rootfsPropagation (MS_*; 0: not given), as a mount's. */
	unsigned long root_propagation;
	char **args, **env; /* NULL-terminated */
	size_t nargs, nenv;
	char *cwd;
	uint32_t uid, gid;
	uint32_t groups[HUTCH_OCI_MAX_GROUPS]; /* process.user.additionalGids */
	size_t ngroups;
	/* process.capabilities, by caps.h's HUTCH_CAPS_* (each within
	 * HUTCH_CAPS_CONTAINER_MAX; absent sets are empty) */
	uint64_t caps[5];
	bool terminal;
	struct hutch_oci_rlimit rlimits[HUTCH_OCI_MAX_RLIMITS];
	size_t nrlimits;
	char *hostname; /* or NULL */
	/* A pod's namespaces to join (NULL path: its own); index: of the
	 * entry in linux.namespaces, for messages. A cgroup namespace's path
	 * must be one (the supervisor checks), but its own is made; mount
	 * and time paths are refused. */
	struct {
		char *path;
		unsigned index;
	} join[HUTCH_OCI_JOIN_N], cgroup_ns; /* cgroup_ns: checked, not joined */
	char *cgroups_path; /* linux.cgroupsPath as given, or NULL (hutch_oci_cgroups_path) */
	struct hutch_oci_mount mounts[HUTCH_OCI_MAX_MOUNTS];
	size_t nmounts;
	struct hutch_oci_resources resources; /* linux.resources */
	/* The run.hutch.* annotations, or NULL. */
	char *network, *ttl_seconds, *instance_type;
	char *annotations;                /* the annotations object as JSON text, or NULL */
	struct hutch_oci_seccomp seccomp; /* linux.seccomp */
	/* linux.maskedPaths, linux.readonlyPaths (NULL-terminated, or NULL) */
	char **masked_paths, **readonly_paths;
	size_t nmasked, nreadonly;
	/* linux.sysctl: "key=value" strings of namespaced keys only
	 * (NULL-terminated, or NULL) */
	char **sysctls;
	size_t nsysctls;
	/* hooks (spec-hooks.h), and the object as JSON text for state.json
	 * (NULL: none) */
	struct hutch_oci_hooks hooks;
	char *hooks_json;
};

/* Parse and check text[0..len). On failure err names the field (e.g.
 * "linux.namespaces[2].path: ...") and nothing is left to free. */
int hutch_oci_spec_parse(const char *text, size_t len, struct hutch_oci_spec *ret,
                         struct hutch_err *err);
void hutch_oci_spec_done(struct hutch_oci_spec *s);

/* linux.cgroupsPath as hutch places it: under the cgroup it nests every
 * sandbox in (the caller's), whether absolute or not. systemd (runc's
 * --systemd-cgroup): "SLICE:PREFIX:NAME", SLICE expanded as systemd nests
 * slices ("a-b.slice" -> "a.slice/a-b.slice"; "" -> "system.slice"), then
 * "PREFIX-NAME.scope". Else '/'-separated names. Into ret (relative);
 * errors name the field. */
int hutch_oci_cgroups_path(const char *raw, bool systemd, char *ret, size_t size,
                           struct hutch_err *err);

/* The capabilities hutch accepts in a bundle (Docker's default set), for
 * `oci features` and the refusal; an empty name ends them. Names in the
 * rows, not pointers: the table needs no relocation at start. */
#define HUTCH_OCI_CAP_NAME_MAX 24
extern const char hutch_oci_default_caps[][HUTCH_OCI_CAP_NAME_MAX];

#endif
