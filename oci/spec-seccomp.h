/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.seccomp of a bundle's config.json, parsed (spec-seccomp.c) for
 * oci/seccomp.c to compile. Pure and bounded, like the rest of the spec.
 */
#ifndef HUTCH_OCI_SPEC_SECCOMP_H
#define HUTCH_OCI_SPEC_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

/* linux.seccomp, in libseccomp's terms but without its header (this file
 * is pure): actions and comparisons are numbered as below. */
#define HUTCH_OCI_SECCOMP_MAX_RULES 1024
#define HUTCH_OCI_SECCOMP_MAX_NAMES 1024 /* per rule */
#define HUTCH_OCI_SECCOMP_MAX_ARGS  6
enum hutch_oci_sc_action {
	HUTCH_OCI_SC_ALLOW,
	HUTCH_OCI_SC_ERRNO,
	HUTCH_OCI_SC_KILL_THREAD,
	HUTCH_OCI_SC_KILL_PROCESS,
	HUTCH_OCI_SC_TRAP,
	HUTCH_OCI_SC_LOG,
};
struct hutch_oci_sc_arg {
	uint32_t index;
	uint64_t value, value_two;
	int op; /* 1 NE, 2 LT, 3 LE, 4 EQ, 5 GE, 6 GT, 7 MASKED_EQ (libseccomp's SCMP_CMP_*) */
};
struct hutch_oci_sc_rule {
	char **names; /* NULL-terminated */
	size_t nnames;
	enum hutch_oci_sc_action action;
	uint32_t errno_ret;
	struct hutch_oci_sc_arg args[HUTCH_OCI_SECCOMP_MAX_ARGS];
	size_t nargs;
};
struct hutch_oci_seccomp {
	bool present;
	enum hutch_oci_sc_action default_action;
	uint32_t default_errno;
	struct hutch_oci_sc_rule *rules;
	size_t nrules;
};

/* Parse j (linux.seccomp; NULL or null: none) into sc; on failure err
 * names the field. What was allocated is freed with the spec
 * (hutch_oci_spec_done()). */
int hutch_oci_parse_seccomp(const cJSON *j, struct hutch_oci_seccomp *sc, struct hutch_err *err);

#endif
