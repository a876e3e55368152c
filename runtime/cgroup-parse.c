/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure half of the cgroup module: parsing /proc/<pid>/cgroup,
 * /proc/<pid>/mountinfo and keyed knob files, joining paths, formatting
 * limit values, the gc guard and a container's resources (shares to
 * weight, the unified key check, merge). No syscalls, so the unit test covers it
 * without root; declarations and contracts are in cgroup-internal.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"

#include "cgroup-internal.h"

bool hutch_cgroup_path_is_valid(const char *path)
{
	size_t depth = 0;

	if (!path || strlen(path) > HUTCH_CGROUP_PATH_MAX)
		return false;
	if (*path == '/')
		path++;
	do {
		size_t n = strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                        "0123456789_.-");

		if (n == 0 || path[0] == '.' || (path[n] && path[n] != '/') ||
		    ++depth > HUTCH_CGROUP_PATH_DEPTH)
			return false;
		path += n;
	} while (*path++ == '/');
	return true;
}

bool hutch_cgroup_name_is_valid(const char *name)
{
	size_t n;

	if (!name || !*name || name[0] == '.')
		return false;
	for (n = 0; name[n]; n++) {
		char c = name[n];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
		if (!ok || n >= CG_NAME_MAX)
			return false;
	}
	return true;
}

/* True if the comma-separated list [list, list+len) contains word. */
static bool csv_has(const char *list, size_t len, const char *word)
{
	size_t wlen = strlen(word);
	const char *end = list + len;

	while (list < end) {
		const char *comma = memchr(list, ',', (size_t)(end - list));
		size_t n = comma ? (size_t)(comma - list) : (size_t)(end - list);

		if (n == wlen && !memcmp(list, word, wlen))
			return true;
		if (!comma)
			break;
		list = comma + 1;
	}
	return false;
}

static int copy_str(const char *s, size_t len, char *ret, size_t size)
{
	if (len >= size)
		return -ENAMETOOLONG;
	memcpy(ret, s, len);
	ret[len] = '\0';
	return 0;
}

int hutch_cgroup_parse_proc(const char *text, const char *controller, char *ret, size_t size)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchrnul(line, '\n');
		const char *c1 = memchr(line, ':', (size_t)(eol - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;

		if (c2) {
			size_t clen = (size_t)(c2 - c1 - 1);
			bool match;

			/* v2 is "0::<path>": hierarchy 0, empty controller list. */
			if (!controller)
				match = clen == 0 && c1 - line == 1 && line[0] == '0';
			else
				match = clen > 0 && csv_has(c1 + 1, clen, controller);
			if (match && c2 + 1 < eol && c2[1] == '/')
				return copy_str(c2 + 1, (size_t)(eol - c2 - 1), ret, size);
		}
		line = *eol ? eol + 1 : NULL;
	}
	return -ENOENT;
}

/* Copy mountinfo field [s, s+len) decoding the \ooo octal escapes. */
static int unescape_field(const char *s, size_t len, char *ret, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		}
		if (o + 1 >= size)
			return -ENAMETOOLONG;
		ret[o++] = c;
	}
	ret[o] = '\0';
	return 0;
}

/* Split one mountinfo line into its space-separated fields (at most max). */
static size_t split_fields(const char *line, const char *eol, const char **f, size_t *flen,
                           size_t max)
{
	size_t n = 0;
	const char *p = line;

	while (p < eol && n < max) {
		const char *sp;

		while (p < eol && *p == ' ')
			p++;
		if (p >= eol)
			break;
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (!sp)
			sp = eol;
		f[n] = p;
		flen[n] = (size_t)(sp - p);
		n++;
		p = sp;
	}
	return n;
}

static bool field_is(const char *f, size_t len, const char *s)
{
	return strlen(s) == len && !memcmp(f, s, len);
}

/* Does one parsed mountinfo line describe the mount we want? */
static bool mount_matches(const char **f, const size_t *flen, size_t n, const char *controller)
{
	size_t sep;

	/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
	for (sep = 6; sep < n && !field_is(f[sep], flen[sep], "-"); sep++)
		;
	if (sep + 1 >= n)
		return false;
	if (!controller)
		return field_is(f[sep + 1], flen[sep + 1], "cgroup2");
	if (!field_is(f[sep + 1], flen[sep + 1], "cgroup") || sep + 3 >= n)
		return false;
	return csv_has(f[sep + 3], flen[sep + 3], controller);
}

int hutch_cgroup_parse_mountinfo(const char *text, const char *controller, struct cg_mount *ret)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchrnul(line, '\n');
		const char *f[16];
		size_t flen[16], n;
		struct cg_mount m;

		n = split_fields(line, eol, f, flen, ELEMENTSOF(f));
		line = *eol ? eol + 1 : NULL;
		if (n < 7 || !mount_matches(f, flen, n, controller))
			continue;
		if (unescape_field(f[3], flen[3], m.root, sizeof(m.root)) < 0 ||
		    unescape_field(f[4], flen[4], m.mountpoint, sizeof(m.mountpoint)) < 0)
			continue;
		/* Only mounts where we look for them (and where gc may remove). */
		if (strcmp(m.mountpoint, CG_ROOT) != 0 &&
		    strncmp(m.mountpoint, CG_ROOT "/", strlen(CG_ROOT "/")) != 0)
			continue;
		*ret = m;
		return 0;
	}
	return -ENOENT;
}

int hutch_cgroup_path_join(const struct cg_mount *m, const char *own_path, char *ret, size_t size)
{
	size_t rlen = strlen(m->root);
	const char *rest = own_path;
	int n;

	if (own_path[0] != '/')
		return -EINVAL;
	/* A mount of a sub-tree ("root" is not "/") shows only paths below it. */
	if (strcmp(m->root, "/") != 0) {
		if (strncmp(own_path, m->root, rlen) != 0 ||
		    (own_path[rlen] != '\0' && own_path[rlen] != '/'))
			return -ENOENT;
		rest = own_path + rlen;
	}
	if (strcmp(rest, "/") == 0)
		rest = "";
	n = snprintf(ret, size, "%s%s", m->mountpoint, rest);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	/* cgroup paths from the kernel never end in '/' except the root. */
	return 0;
}

int hutch_cgroup_parse_keyed(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	const char *line = text;

	while (line && *line) {
		const char *eol = strchrnul(line, '\n');

		if ((size_t)(eol - line) > klen + 1 && !strncmp(line, key, klen) &&
		    line[klen] == ' ') {
			char num[32];
			int r = copy_str(line + klen + 1, (size_t)(eol - line - klen - 1), num,
			                 sizeof(num));

			if (r < 0)
				return -EINVAL;
			return hutch_parse_u64(num, 0, UINT64_MAX, ret) < 0 ? -EINVAL : 0;
		}
		line = *eol ? eol + 1 : NULL;
	}
	return -ENOENT;
}

bool hutch_cgroup_list_has(const char *have, const char *want)
{
	const char *w = want;

	while (*w) {
		const char *we, *h = have;
		size_t wl;
		bool found = false;

		while (*w == ' ')
			w++;
		if (!*w)
			break;
		we = w + strcspn(w, " ");
		wl = (size_t)(we - w);
		while (*h && !found) {
			size_t hl;

			h += strspn(h, " \n");
			hl = strcspn(h, " \n");
			found = hl == wl && hl > 0 && !memcmp(h, w, wl);
			h += hl;
		}
		if (!found)
			return false;
		w = we;
	}
	return true;
}

int hutch_cgroup_fmt_cpu_v1(uint64_t cpu_millis, char *quota, size_t size)
{
	/* 1000 millis = one CPU = a full period (100000 us). */
	if (cpu_millis == 0) {
		snprintf(quota, size, "-1");
		return 0;
	}
	if (cpu_millis > UINT64_MAX / 100 || cpu_millis * 100 < CG_QUOTA_MIN_US)
		return -EINVAL;
	snprintf(quota, size, "%llu", (unsigned long long)(cpu_millis * 100));
	return 0;
}

int hutch_cgroup_fmt_cpu_v2(uint64_t cpu_millis, char *cpu_max, size_t size)
{
	char q[32];
	int r;

	if (cpu_millis == 0) {
		snprintf(cpu_max, size, "max %llu", CG_PERIOD_US);
		return 0;
	}
	r = hutch_cgroup_fmt_cpu_v1(cpu_millis, q, sizeof(q));
	if (r < 0)
		return r;
	snprintf(cpu_max, size, "%s %llu", q, CG_PERIOD_US);
	return 0;
}

int hutch_cgroup_fmt_cpu_period(const struct hutch_resources *res, char *quota, char *period,
                                size_t size)
{
	if (!res->cpu_period || !res->cpu_quota)
		return 0;
	if (res->cpu_quota < CG_QUOTA_MIN_US)
		return -EINVAL;
	snprintf(quota, size, "%" PRIu64, res->cpu_quota);
	snprintf(period, size, "%" PRIu64, res->cpu_period);
	return 0;
}

void hutch_cgroup_fmt_limit(uint64_t value, bool v2, char *buf, size_t size)
{
	if (value == 0)
		snprintf(buf, size, "%s", v2 ? "max" : "-1");
	else
		snprintf(buf, size, "%llu", (unsigned long long)value);
}

bool hutch_cgroup_dir_is_removable(const char *dir)
{
	const char *last, *p;

	if (!dir || strncmp(dir, CG_ROOT "/", strlen(CG_ROOT "/")) != 0)
		return false;
	if (strstr(dir, "//"))
		return false;
	/* No "." or ".." component anywhere (a plain substring test would
	 * also refuse "a..b", which is fine: we never make such names). */
	if (strstr(dir, "/./") || strstr(dir, ".."))
		return false;
	p = dir + strlen(dir);
	if (p[-1] == '/' || (p - dir >= 2 && p[-1] == '.' && p[-2] == '/'))
		return false;
	last = strrchr(dir, '/') + 1;
	return strncmp(last, CG_PREFIX, strlen(CG_PREFIX)) == 0 && last[strlen(CG_PREFIX)] != '\0';
}

size_t hutch_cgroup_parse_pids(const char *text, pid_t *pids, size_t max)
{
	size_t n = 0;
	const char *p = text;

	while (*p && n < max) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v > 0)
			pids[n++] = (pid_t)v;
		p = end;
		while (*p == '\n')
			p++;
	}
	return n;
}

/* ---- a container's resources (cgroup.h struct hutch_resources) ---- */

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
