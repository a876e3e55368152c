/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.json -> struct hutch_oci_spec (see spec.h). Every refusal names
 * the field, as runsc does: what a bundle asks that hutch does not do on
 * purpose (host or joined namespaces, capabilities beyond the default set,
 * devices beyond hutch's /dev, sysctls of the host) is an error, never
 * silently dropped. Hooks are the engine's (spec-hooks.h), not refused.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>

#include "caps.h"
#include "cleanup.h"
#include "json.h"
#include "spec.h"

/* Names in rows, not pointers: no relocation at start (issue 31). */
const char hutch_oci_default_caps[][HUTCH_OCI_CAP_NAME_MAX] = {
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FSETID",
	"CAP_FOWNER",
	"CAP_MKNOD",
	"CAP_NET_RAW",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETFCAP",
	"CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT",
	"CAP_KILL",
	"CAP_AUDIT_WRITE",
	"",
};
/* Their numbers, in the same order (caps.h: HUTCH_CAPS_CONTAINER_MAX). */
static const int default_cap_numbers[] = {
	CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,
	CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,           CAP_SETUID,
	CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
	CAP_KILL,    CAP_AUDIT_WRITE,
};

/* Namespaces a bundle must ask for (else it asks for the host's). */
static const char *const required_ns[] = { "pid", "network", "ipc", "uts", "mount", NULL };
static const char *const known_ns[] = { "pid",  "network", "ipc",  "uts", "mount",
	                                "user", "cgroup",  "time", NULL };
/* Those a pod's containers join by path, in spec.h's join[] order. */
static const char *const joinable_ns[] = { "user", "network", "ipc", "uts", "pid", NULL };

/* The names in the rows, not pointers: no relocation, the table stays in
 * read-only data the dynamic loader never writes (issue 31: CLI start). */
static const struct {
	char name[20];
	int resource;
} rlimit_names[] = {
	{ "RLIMIT_AS", RLIMIT_AS },
	{ "RLIMIT_CORE", RLIMIT_CORE },
	{ "RLIMIT_CPU", RLIMIT_CPU },
	{ "RLIMIT_DATA", RLIMIT_DATA },
	{ "RLIMIT_FSIZE", RLIMIT_FSIZE },
	{ "RLIMIT_LOCKS", RLIMIT_LOCKS },
	{ "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },
	{ "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
	{ "RLIMIT_NICE", RLIMIT_NICE },
	{ "RLIMIT_NOFILE", RLIMIT_NOFILE },
	{ "RLIMIT_NPROC", RLIMIT_NPROC },
	{ "RLIMIT_RSS", RLIMIT_RSS },
	{ "RLIMIT_RTPRIO", RLIMIT_RTPRIO },
	{ "RLIMIT_RTTIME", RLIMIT_RTTIME },
	{ "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
	{ "RLIMIT_STACK", RLIMIT_STACK },
};

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

/* s's index in list, or -1. */
static int in_list_at(const char *const *list, const char *s)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(list[i], s))
			return i;
	return -1;
}

static int parse_root(const cJSON *root, struct hutch_oci_spec *s, struct hutch_err *err)
{
	int r;

	if (!cJSON_IsObject(root))
		return hutch_err_set(err, -EINVAL, "root: missing");
	r = hutch_oci_json_str(root, "path", "root.path", &s->root_path, err);
	if (r < 0)
		return r;
	if (!s->root_path || !s->root_path[0])
		return hutch_err_set(err, -EINVAL, "root.path: missing");
	s->root_readonly = hutch_oci_json_bool(root, "readonly");
	return 0;
}

static const char *const cap_sets[HUTCH_CAPS_SETS] = { "bounding", "effective", "permitted",
	                                               "inheritable", "ambient" };

/* One set: names of the default set only, onto a mask. */
static int parse_cap_set(const cJSON *arr, size_t set, uint64_t *ret, struct hutch_err *err)
{
	const cJSON *e;
	size_t n = 0;

	if (arr && !cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "process.capabilities.%s: not an array",
		                     cap_sets[set]);
	cJSON_ArrayForEach(e, arr) {
		size_t k = 0;

		if (!cJSON_IsString(e))
			return hutch_err_set(err, -EINVAL,
			                     "process.capabilities.%s[%zu]: not a string",
			                     cap_sets[set], n);
		while (hutch_oci_default_caps[k][0] &&
		       strcmp(hutch_oci_default_caps[k], e->valuestring))
			k++;
		if (!hutch_oci_default_caps[k][0])
			return hutch_err_set(err, -EPERM,
			                     "process.capabilities.%s[%zu]: %.64s is beyond "
			                     "the default set, which hutch refuses",
			                     cap_sets[set], n, e->valuestring);
		*ret |= HUTCH_CAP_BIT(default_cap_numbers[k]);
		n++;
	}
	return 0;
}

/* What the kernel would refuse at capset() or PR_CAP_AMBIENT_RAISE, named
 * here instead of a process that fails to start. */
static int check_cap_sets(const uint64_t *c, struct hutch_err *err)
{
	static const struct {
		size_t set, within;
		const char *why;
	} rules[] = {
		{ HUTCH_CAPS_EFFECTIVE, HUTCH_CAPS_PERMITTED, "not in permitted" },
		{ HUTCH_CAPS_INHERITABLE, HUTCH_CAPS_BOUNDING, "not in bounding" },
		{ HUTCH_CAPS_AMBIENT, HUTCH_CAPS_PERMITTED, "not in permitted" },
		{ HUTCH_CAPS_AMBIENT, HUTCH_CAPS_INHERITABLE, "not in inheritable" },
	};

	for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
		uint64_t extra = c[rules[i].set] & ~c[rules[i].within];

		for (size_t k = 0; extra && hutch_oci_default_caps[k][0]; k++)
			if (extra & HUTCH_CAP_BIT(default_cap_numbers[k]))
				return hutch_err_set(err, -EINVAL, "process.capabilities.%s: %s %s",
				                     cap_sets[rules[i].set],
				                     hutch_oci_default_caps[k], rules[i].why);
	}
	return 0;
}

static int parse_caps(const cJSON *caps, uint64_t *ret, struct hutch_err *err)
{
	int r;

	if (!caps || cJSON_IsNull(caps))
		return 0;
	for (size_t i = 0; i < HUTCH_CAPS_SETS; i++)
		if ((r = parse_cap_set(hutch_oci_json_item(caps, cap_sets[i]), i, &ret[i], err)) <
		    0)
			return r;
	return check_cap_sets(ret, err);
}

static int parse_rlimits(const cJSON *arr, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *e;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "process.rlimits: not an array");
	cJSON_ArrayForEach(e, arr) {
		struct hutch_oci_rlimit *rl;
		const cJSON *type = hutch_oci_json_item(e, "type");
		char field[64];
		size_t k;
		int r;

		if (s->nrlimits == HUTCH_OCI_MAX_RLIMITS)
			return hutch_err_set(err, -E2BIG, "process.rlimits: more than %d",
			                     HUTCH_OCI_MAX_RLIMITS);
		rl = &s->rlimits[s->nrlimits];
		for (k = 0; k < sizeof(rlimit_names) / sizeof(rlimit_names[0]); k++)
			if (cJSON_IsString(type) &&
			    !strcmp(type->valuestring, rlimit_names[k].name))
				break;
		if (k == sizeof(rlimit_names) / sizeof(rlimit_names[0]))
			return hutch_err_set(err, -EINVAL, "process.rlimits[%zu].type: unknown",
			                     s->nrlimits);
		rl->resource = rlimit_names[k].resource;
		snprintf(field, sizeof(field), "process.rlimits[%zu].soft", s->nrlimits);
		r = hutch_oci_json_u64(e, "soft", field, UINT64_MAX, &rl->soft, err);
		snprintf(field, sizeof(field), "process.rlimits[%zu].hard", s->nrlimits);
		if (r >= 0)
			r = hutch_oci_json_u64(e, "hard", field, UINT64_MAX, &rl->hard, err);
		if (r < 0)
			return r;
		if (rl->soft > rl->hard)
			return hutch_err_set(err, -EINVAL, "process.rlimits[%zu]: soft above hard",
			                     s->nrlimits);
		s->nrlimits++;
	}
	return 0;
}

/* process.user.additionalGids: ids of the sandbox's range, as uid and gid. */
static int parse_groups(const cJSON *arr, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *e;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "process.user.additionalGids: not an array");
	cJSON_ArrayForEach(e, arr) {
		if (s->ngroups == HUTCH_OCI_MAX_GROUPS)
			return hutch_err_set(err, -E2BIG,
			                     "process.user.additionalGids: more than %d",
			                     HUTCH_OCI_MAX_GROUPS);
		if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 65535 ||
		    e->valuedouble != (double)(uint32_t)e->valuedouble)
			return hutch_err_set(
			        err, -EINVAL,
			        "process.user.additionalGids[%zu]: not an id of 0-65535",
			        s->ngroups);
		s->groups[s->ngroups++] = (uint32_t)e->valuedouble;
	}
	return 0;
}

static int parse_process(const cJSON *p, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *user = hutch_oci_json_item(p, "user");
	uint64_t uid = 0, gid = 0;
	int r;

	if (!cJSON_IsObject(p))
		return hutch_err_set(err, -EINVAL,
		                     "process: missing (hutch runs no container "
		                     "without a process)");
	s->terminal = hutch_oci_json_bool(p, "terminal");
	if ((r = hutch_oci_json_strv(p, "args", "process.args", HUTCH_OCI_MAX_ARGS, &s->args,
	                             &s->nargs, err)) < 0 ||
	    (r = hutch_oci_json_strv(p, "env", "process.env", HUTCH_OCI_MAX_ENV, &s->env, &s->nenv,
	                             err)) < 0 ||
	    (r = hutch_oci_json_str(p, "cwd", "process.cwd", &s->cwd, err)) < 0)
		return r;
	if (s->nargs == 0)
		return hutch_err_set(err, -EINVAL, "process.args: empty");
	if (!s->cwd || s->cwd[0] != '/')
		return hutch_err_set(err, -EINVAL, "process.cwd: not an absolute path");
	for (size_t i = 0; i < s->nenv; i++)
		if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
			return hutch_err_set(err, -EINVAL, "process.env[%zu]: not KEY=VALUE", i);
	if ((r = hutch_oci_json_u64(user, "uid", "process.user.uid", 65535, &uid, err)) < 0 ||
	    (r = hutch_oci_json_u64(user, "gid", "process.user.gid", 65535, &gid, err)) < 0)
		return r;
	if (hutch_oci_json_item(user, "username"))
		return hutch_err_set(err, -EINVAL,
		                     "process.user.username: not supported (Windows)");
	s->uid = (uint32_t)uid;
	s->gid = (uint32_t)gid;
	if ((r = parse_groups(hutch_oci_json_item(user, "additionalGids"), s, err)) < 0)
		return r;
	if ((r = parse_caps(hutch_oci_json_item(p, "capabilities"), s->caps, err)) < 0)
		return r;
	return parse_rlimits(hutch_oci_json_item(p, "rlimits"), s, err);
}

/* A namespace's path: a pod's user, network, ipc, uts or pid namespace is
 * joined (supervisor/pod.c checks whose it is); a cgroup namespace's path
 * is checked to be one, and a new one made all the same (the container's
 * own cgroup is its root); the others are refused. */
static int parse_ns_path(const cJSON *e, const char *type, size_t i, struct hutch_oci_spec *s,
                         struct hutch_err *err)
{
	char field[64];
	char *path = NULL;
	int r, k = in_list_at(joinable_ns, type);

	snprintf(field, sizeof(field), "linux.namespaces[%zu].path", i);
	if (k < 0 && strcmp(type, "cgroup"))
		return hutch_err_set(err, -EPERM,
		                     "%s: joining an existing %s namespace is refused (hutch makes "
		                     "its own; a pod's containers share only user, network, ipc, "
		                     "uts and pid)",
		                     field, type);
	r = hutch_oci_json_str(e, "path", field, &path, err);
	if (r < 0)
		return r;
	if (path[0] != '/') {
		free(path);
		return hutch_err_set(err, -EINVAL, "%s: not an absolute path", field);
	}
	if (k < 0) {
		free(s->cgroup_ns.path);
		s->cgroup_ns.path = path;
		s->cgroup_ns.index = (unsigned)i;
		return 0;
	}
	free(s->join[k].path);
	s->join[k].path = path;
	s->join[k].index = (unsigned)i;
	return 0;
}

static int parse_namespaces(const cJSON *arr, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *e;
	size_t i = 0;
	int r;

	if (arr && !cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "linux.namespaces: not an array");
	cJSON_ArrayForEach(e, arr) {
		const cJSON *type = hutch_oci_json_item(e, "type"),
		            *path = hutch_oci_json_item(e, "path");

		if (!cJSON_IsString(type) || !in_list(known_ns, type->valuestring))
			return hutch_err_set(err, -EINVAL, "linux.namespaces[%zu].type: unknown",
			                     i);
		if (path && !cJSON_IsNull(path) &&
		    (r = parse_ns_path(e, type->valuestring, i, s, err)) < 0)
			return r;
		i++;
	}
	for (size_t k = 0; required_ns[k]; k++) {
		bool found = false;

		cJSON_ArrayForEach(e, arr) {
			const cJSON *type = hutch_oci_json_item(e, "type");
			found = found || !strcmp(type->valuestring, required_ns[k]);
		}
		if (!found)
			return hutch_err_set(err, -EPERM,
			                     "linux.namespaces: no %s namespace means the host's, "
			                     "which hutch refuses",
			                     required_ns[k]);
	}
	return 0;
}

/*
 * linux.sysctl: only keys that belong to the container's own network or
 * ipc namespace (what runc calls namespaced), so that a value changes
 * nothing outside it; anything else (kernel.*, vm.*, fs.* beyond mqueue)
 * is the host's, and refused.
 */
static bool sysctl_is_namespaced(const char *key)
{
	static const char *const prefixes[] = { "net.",       "kernel.shm", "kernel.msg",
		                                "kernel.sem", "fs.mqueue.", NULL };
	size_t n = strlen(key);

	if (n == 0 || n > 128 || strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != n ||
	    strstr(key, "..") || key[n - 1] == '.')
		return false;
	for (size_t i = 0; prefixes[i]; i++)
		if (!strncmp(key, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

static int parse_sysctls(const cJSON *obj, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *e;
	size_t n = 0;

	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		return hutch_err_set(err, -EINVAL, "linux.sysctl: not an object");
	cJSON_ArrayForEach(e, obj) {
		if (++n > HUTCH_OCI_MAX_SYSCTLS)
			return hutch_err_set(err, -E2BIG, "linux.sysctl: more than %d",
			                     HUTCH_OCI_MAX_SYSCTLS);
	}
	s->sysctls = calloc(n + 1, sizeof(*s->sysctls));
	if (!s->sysctls)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, obj) {
		if (!sysctl_is_namespaced(e->string))
			return hutch_err_set(err, -EPERM,
			                     "linux.sysctl.%.128s: refused (not of the container's "
			                     "own network or ipc namespace)",
			                     e->string);
		if (!cJSON_IsString(e) || strlen(e->valuestring) > 256 ||
		    strchr(e->valuestring, '\n'))
			return hutch_err_set(err, -EINVAL, "linux.sysctl.%.128s: bad value",
			                     e->string);
		size_t len = strlen(e->string) + strlen(e->valuestring) + 2;
		s->sysctls[s->nsysctls] = malloc(len);
		if (!s->sysctls[s->nsysctls])
			return hutch_err_set(err, -ENOMEM, "out of memory");
		snprintf(s->sysctls[s->nsysctls], len, "%s=%s", e->string, e->valuestring);
		s->nsysctls++;
	}
	return 0;
}

/* linux.maskedPaths / readonlyPaths: absolute paths without "..". */
static int parse_paths(const cJSON *lx, const char *key, char ***ret, size_t *ret_n,
                       struct hutch_err *err)
{
	char field[32];
	int r;

	snprintf(field, sizeof(field), "linux.%s", key);
	r = hutch_oci_json_strv(lx, key, field, HUTCH_OCI_MAX_PATHS, ret, ret_n, err);
	for (size_t i = 0; r >= 0 && i < *ret_n; i++)
		if ((*ret)[i][0] != '/' || hutch_oci_has_dotdot((*ret)[i]))
			r = hutch_err_set(err, -EINVAL,
			                  "%s[%zu]: not an absolute path without '..'", field, i);
	return r;
}

/* "a-b-c.slice" -> "a.slice/a-b.slice/a-b-c.slice/" appended to ret. */
static int expand_slice(const char *slice, char *ret, size_t size, size_t *n)
{
	size_t len = strlen(slice);
	const char *dash = slice;

	if (len <= 6 || strcmp(slice + len - 6, ".slice") || strchr(slice, '/') ||
	    slice[0] == '-' || strstr(slice, "--") || slice[len - 7] == '-')
		return -EINVAL;
	while ((dash = strchr(dash, '-')) && dash < slice + len - 6) {
		int k = snprintf(ret + *n, size - *n, "%.*s.slice/", (int)(dash - slice), slice);

		if (k < 0 || (size_t)k >= size - *n)
			return -ENAMETOOLONG;
		*n += (size_t)k;
		dash++;
	}
	if (*n + len + 2 > size)
		return -ENAMETOOLONG;
	*n += (size_t)snprintf(ret + *n, size - *n, "%s/", slice);
	return 0;
}

int hutch_oci_cgroups_path(const char *raw, bool systemd, char *ret, size_t size,
                           struct hutch_err *err)
{
	char buf[512], *prefix, *name;
	const char *slice = buf, *dot;
	size_t n = 0;
	int k;

	if (strlen(raw) >= sizeof(buf) || strlen(raw) >= size)
		return hutch_err_set(err, -ENAMETOOLONG, "linux.cgroupsPath: too long");
	if (!systemd) {
		if (!raw[0] || strchr(raw, ':'))
			return hutch_err_set(err, -EINVAL,
			                     "linux.cgroupsPath: '%.200s' is not a cgroup path "
			                     "(SLICE:PREFIX:NAME needs --systemd-cgroup)",
			                     raw);
		memcpy(ret, raw + (raw[0] == '/'), strlen(raw + (raw[0] == '/')) + 1);
		return 0;
	}
	memcpy(buf, raw, strlen(raw) + 1);
	prefix = strchr(buf, ':');
	name = prefix ? strchr(prefix + 1, ':') : NULL;
	if (!name || !name[1] || strchr(name + 1, ':'))
		return hutch_err_set(err, -EINVAL,
		                     "linux.cgroupsPath: '%.200s' is not SLICE:PREFIX:NAME "
		                     "(--systemd-cgroup)",
		                     raw);
	*prefix++ = '\0';
	*name++ = '\0';
	if (!buf[0])
		slice = "system.slice";
	if (expand_slice(slice, ret, size, &n) < 0)
		return hutch_err_set(err, -EINVAL, "linux.cgroupsPath: bad slice '%.200s'", slice);
	dot = strrchr(name, '.');
	k = snprintf(ret + n, size - n, "%s%s%s%s", prefix, prefix[0] ? "-" : "", name,
	             dot && !strcmp(dot, ".slice") ? "" : ".scope");
	if (k < 0 || (size_t)k >= size - n)
		return hutch_err_set(err, -ENAMETOOLONG, "linux.cgroupsPath: too long");
	return 0;
}

static int parse_linux(const cJSON *lx, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *devices = hutch_oci_json_item(lx, "devices"), *e;
	size_t i = 0;
	int r;

	if (!cJSON_IsObject(lx))
		return hutch_err_set(err, -EPERM,
		                     "linux: missing (its namespaces say what the "
		                     "container shares with the host)");
	r = parse_namespaces(hutch_oci_json_item(lx, "namespaces"), s, err);
	if (r < 0)
		return r;
	r = hutch_oci_parse_root_propagation(lx, &s->root_propagation, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(e, devices) {
		static const char *const ours[] = { "/dev/null",   "/dev/zero",    "/dev/full",
			                            "/dev/random", "/dev/urandom", "/dev/tty",
			                            NULL };
		const cJSON *path = hutch_oci_json_item(e, "path");
		if (!cJSON_IsString(path) || !in_list(ours, path->valuestring))
			return hutch_err_set(err, -EPERM,
			                     "linux.devices[%zu]: %.64s is beyond the default set, "
			                     "which hutch refuses",
			                     i, cJSON_IsString(path) ? path->valuestring : "?");
		i++;
	}
	r = parse_sysctls(hutch_oci_json_item(lx, "sysctl"), s, err);
	if (r < 0)
		return r;
	if ((r = hutch_oci_parse_seccomp(hutch_oci_json_item(lx, "seccomp"), &s->seccomp, err)) <
	            0 ||
	    (r = parse_paths(lx, "maskedPaths", &s->masked_paths, &s->nmasked, err)) < 0 ||
	    (r = parse_paths(lx, "readonlyPaths", &s->readonly_paths, &s->nreadonly, err)) < 0)
		return r;
	return hutch_oci_parse_resources(hutch_oci_json_item(lx, "resources"), &s->resources, err);
}

static int parse_annotations(const cJSON *a, struct hutch_oci_spec *s, struct hutch_err *err)
{
	int r;

	if (!a || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsObject(a))
		return hutch_err_set(err, -EINVAL, "annotations: not an object");
	if ((r = hutch_oci_json_str(a, "run.hutch.network", "annotations.run.hutch.network",
	                            &s->network, err)) < 0 ||
	    (r = hutch_oci_json_str(a, "run.hutch.ttl-seconds", "annotations.run.hutch.ttl-seconds",
	                            &s->ttl_seconds, err)) < 0 ||
	    (r = hutch_oci_json_str(a, "run.hutch.instance-type",
	                            "annotations.run.hutch.instance-type", &s->instance_type,
	                            err)) < 0)
		return r;
	s->annotations = cJSON_PrintUnformatted(a);
	return s->annotations ? 0 : hutch_err_set(err, -ENOMEM, "out of memory");
}

static int parse(const cJSON *j, struct hutch_oci_spec *s, struct hutch_err *err)
{
	const cJSON *hooks = hutch_oci_json_item(j, "hooks");
	int r;

	if (!cJSON_IsObject(j))
		return hutch_err_set(err, -EINVAL, "config.json: not a JSON object");
	if (!cJSON_IsString(hutch_oci_json_item(j, "ociVersion")) ||
	    strncmp(hutch_oci_json_item(j, "ociVersion")->valuestring, "1.", 2) != 0)
		return hutch_err_set(err, -EINVAL, "ociVersion: not 1.x");
	if ((r = hutch_oci_hooks_parse(hooks, &s->hooks, err)) < 0)
		return r;
	if (s->hooks.total && !(s->hooks_json = cJSON_PrintUnformatted(hooks)))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	if ((r = parse_root(hutch_oci_json_item(j, "root"), s, err)) < 0 ||
	    (r = parse_process(hutch_oci_json_item(j, "process"), s, err)) < 0 ||
	    (r = hutch_oci_json_str(j, "hostname", "hostname", &s->hostname, err)) < 0 ||
	    (r = hutch_oci_json_str(hutch_oci_json_item(j, "linux"), "cgroupsPath",
	                            "linux.cgroupsPath", &s->cgroups_path, err)) < 0 ||
	    (r = hutch_oci_parse_mounts(hutch_oci_json_item(j, "mounts"), s->mounts, &s->nmounts,
	                                err)) < 0 ||
	    (r = parse_linux(hutch_oci_json_item(j, "linux"), s, err)) < 0)
		return r;
	return parse_annotations(hutch_oci_json_item(j, "annotations"), s, err);
}

int hutch_oci_spec_parse(const char *text, size_t len, struct hutch_oci_spec *ret,
                         struct hutch_err *err)
{
	const char *end = NULL;
	cJSON *j;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (len > HUTCH_OCI_CONFIG_MAX)
		return hutch_err_set(err, -E2BIG, "config.json: larger than %u bytes",
		                     HUTCH_OCI_CONFIG_MAX);
	j = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!j)
		return hutch_err_set(err, -EINVAL, "config.json: invalid JSON at byte %td",
		                     end ? end - text : (ptrdiff_t)0);
	r = parse(j, ret, err);
	cJSON_Delete(j);
	if (r < 0)
		hutch_oci_spec_done(ret);
	return r;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void hutch_oci_spec_done(struct hutch_oci_spec *s)
{
	free(s->cgroups_path);
	for (size_t k = 0; k < HUTCH_OCI_JOIN_N; k++)
		free(s->join[k].path);
	free(s->cgroup_ns.path);
	free(s->root_path);
	free_strv(s->args);
	free_strv(s->env);
	free(s->cwd);
	free(s->hostname);
	hutch_oci_mounts_done(s->mounts, s->nmounts);
	free(s->network);
	free(s->ttl_seconds);
	free(s->instance_type);
	free(s->annotations);
	for (size_t i = 0; i < s->seccomp.nrules; i++)
		free_strv(s->seccomp.rules[i].names);
	free(s->seccomp.rules);
	free_strv(s->masked_paths);
	free_strv(s->readonly_paths);
	free_strv(s->sysctls);
	hutch_oci_hooks_done(&s->hooks);
	free(s->hooks_json);
	memset(s, 0, sizeof(*s));
}
