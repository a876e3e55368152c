/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.seccomp of a bundle's config.json (see spec-seccomp.h): kept to
 * be compiled by oci/seccomp.c and stacked on hutch's own filter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "spec-seccomp.h"

static int sc_action(const cJSON *j, const char *field, enum hutch_oci_sc_action *ret,
                     struct hutch_err *err)
{
	static const struct {
		const char *name;
		enum hutch_oci_sc_action action;
	} actions[] = {
		{ "SCMP_ACT_ALLOW", HUTCH_OCI_SC_ALLOW },
		{ "SCMP_ACT_ERRNO", HUTCH_OCI_SC_ERRNO },
		{ "SCMP_ACT_KILL", HUTCH_OCI_SC_KILL_THREAD },
		{ "SCMP_ACT_KILL_THREAD", HUTCH_OCI_SC_KILL_THREAD },
		{ "SCMP_ACT_KILL_PROCESS", HUTCH_OCI_SC_KILL_PROCESS },
		{ "SCMP_ACT_TRAP", HUTCH_OCI_SC_TRAP },
		{ "SCMP_ACT_LOG", HUTCH_OCI_SC_LOG },
	};

	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (cJSON_IsString(j) && !strcmp(j->valuestring, actions[i].name)) {
			*ret = actions[i].action;
			return 0;
		}
	/* SCMP_ACT_TRACE and SCMP_ACT_NOTIFY hand syscalls to a process
	 * outside: refused. */
	return hutch_err_set(err, -EPERM, "%s: %.40s is refused or unknown", field,
	                     cJSON_IsString(j) ? j->valuestring : "?");
}

static int sc_args(const cJSON *arr, struct hutch_oci_sc_rule *rule, const char *field,
                   struct hutch_err *err)
{
	static const char *const ops[] = { "SCMP_CMP_NE",        "SCMP_CMP_LT", "SCMP_CMP_LE",
		                           "SCMP_CMP_EQ",        "SCMP_CMP_GE", "SCMP_CMP_GT",
		                           "SCMP_CMP_MASKED_EQ", NULL };
	const cJSON *a;

	cJSON_ArrayForEach(a, arr) {
		struct hutch_oci_sc_arg *x;
		const cJSON *op = hutch_oci_json_item(a, "op");
		uint64_t index = 0;
		int r;

		if (rule->nargs == HUTCH_OCI_SECCOMP_MAX_ARGS)
			return hutch_err_set(err, -E2BIG, "%s.args: more than 6", field);
		x = &rule->args[rule->nargs];
		if ((r = hutch_oci_json_u64(a, "index", field, 5, &index, err)) < 0 ||
		    (r = hutch_oci_json_u64(a, "value", field, UINT64_MAX, &x->value, err)) < 0 ||
		    (r = hutch_oci_json_u64(a, "valueTwo", field, UINT64_MAX, &x->value_two, err)) <
		            0)
			return r;
		x->index = (uint32_t)index;
		x->op = 0;
		for (int k = 0; ops[k]; k++)
			if (cJSON_IsString(op) && !strcmp(op->valuestring, ops[k]))
				x->op = k + 1;
		if (!x->op)
			return hutch_err_set(err, -EINVAL, "%s.args[%zu].op: unknown", field,
			                     rule->nargs);
		rule->nargs++;
	}
	return 0;
}

static int sc_rule(const cJSON *e, size_t i, struct hutch_oci_seccomp *sc, struct hutch_err *err)
{
	struct hutch_oci_sc_rule *rule = &sc->rules[sc->nrules];
	char field[64];
	uint64_t eno = 1;
	int r;

	snprintf(field, sizeof(field), "linux.seccomp.syscalls[%zu]", i);
	r = hutch_oci_json_strv(e, "names", field, HUTCH_OCI_SECCOMP_MAX_NAMES, &rule->names,
	                        &rule->nnames, err);
	if (r < 0)
		return r;
	sc->nrules++;
	if ((r = sc_action(hutch_oci_json_item(e, "action"), field, &rule->action, err)) < 0 ||
	    (r = hutch_oci_json_u64(e, "errnoRet", field, 4095, &eno, err)) < 0)
		return r;
	rule->errno_ret = (uint32_t)eno;
	if (hutch_oci_json_item(e, "args") && !cJSON_IsArray(hutch_oci_json_item(e, "args")))
		return hutch_err_set(err, -EINVAL, "%s.args: not an array", field);
	return sc_args(hutch_oci_json_item(e, "args"), rule, field, err);
}

/* linux.seccomp: kept to be stacked on hutch's own filter (the kernel
 * applies both: a syscall passes only if each allows it). */
int hutch_oci_parse_seccomp(const cJSON *j, struct hutch_oci_seccomp *sc, struct hutch_err *err)
{
	const cJSON *calls = hutch_oci_json_item(j, "syscalls"), *e;
	uint64_t eno = 1;
	size_t i = 0;
	int r;

	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsObject(j))
		return hutch_err_set(err, -EINVAL, "linux.seccomp: not an object");
	if (hutch_oci_json_item(j, "listenerPath"))
		return hutch_err_set(err, -EPERM, "linux.seccomp.listenerPath: refused");
	sc->present = true;
	if ((r = sc_action(hutch_oci_json_item(j, "defaultAction"), "linux.seccomp.defaultAction",
	                   &sc->default_action, err)) < 0 ||
	    (r = hutch_oci_json_u64(j, "defaultErrnoRet", "linux.seccomp.defaultErrnoRet", 4095,
	                            &eno, err)) < 0)
		return r;
	sc->default_errno = (uint32_t)eno;
	if (calls && !cJSON_IsArray(calls))
		return hutch_err_set(err, -EINVAL, "linux.seccomp.syscalls: not an array");
	if (cJSON_GetArraySize(calls) > HUTCH_OCI_SECCOMP_MAX_RULES)
		return hutch_err_set(err, -E2BIG, "linux.seccomp.syscalls: more than %d",
		                     HUTCH_OCI_SECCOMP_MAX_RULES);
	sc->rules = calloc((size_t)cJSON_GetArraySize(calls) + 1, sizeof(*sc->rules));
	if (!sc->rules)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, calls) {
		r = sc_rule(e, i++, sc, err);
		if (r < 0)
			return r;
	}
	return 0;
}
