/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /stats: what a sandbox uses now, read from the host without waking
 * it (a sleeping sandbox is not thawed to be measured): CPU time, memory
 * and pids from its cgroups, the writable tmpfs mounts' use from statfs()
 * through init's /proc/<pid>/root, network bytes from init's
 * /proc/<pid>/net/dev (every link of the sandbox's namespace but
 * loopback; in allow mode traffic passes through the supervisor's proxy
 * over loopback and is not counted there). Counters the host cannot give
 * are null.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "fdutil.h"
#include "stats.h"
#include "supervisor.h"

static void add_u64(cJSON *o, const char *key, uint64_t v)
{
	if (v == UINT64_MAX)
		cJSON_AddNullToObject(o, key);
	else
		cJSON_AddNumberToObject(o, key, (double)v);
}

/* The used and total bytes of each writable tmpfs. */
static void add_disk(cJSON *o, pid_t init, uint64_t limit)
{
	static const char *const mounts[] = { "/workspace", "/tmp", "/home/appuser" };
	cJSON *d = cJSON_AddObjectToObject(o, "disk");

	for (size_t i = 0; d && i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		char path[96];
		struct statfs st;
		cJSON *m;

		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)init, mounts[i]);
		m = cJSON_AddObjectToObject(d, mounts[i]);
		if (!m)
			break;
		if (init <= 0 || statfs(path, &st) < 0) {
			cJSON_AddNullToObject(m, "used_bytes");
		} else {
			add_u64(m, "used_bytes", (uint64_t)(st.f_blocks - st.f_bfree) * st.f_bsize);
		}
		add_u64(m, "limit_bytes", limit);
	}
}

/* Sum of every link's counters but loopback's, from /proc/<pid>/net/dev. */
static void add_network(cJSON *o, pid_t init)
{
	_cleanup_fclose_ FILE *f = NULL;
	char path[64], line[512];
	uint64_t rx = 0, tx = 0;
	bool ok = false;
	cJSON *n = cJSON_AddObjectToObject(o, "network");

	snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)init);
	f = init > 0 ? fopen(path, "re") : NULL;
	while (f && fgets(line, sizeof(line), f)) {
		char name[64];
		unsigned long long r, t, skip;

		if (sscanf(line, " %63[^:]: %llu %llu %llu %llu %llu %llu %llu %llu %llu", name, &r,
		           &skip, &skip, &skip, &skip, &skip, &skip, &skip, &t) != 10)
			continue; /* the two header lines */
		ok = true;
		if (strcmp(name, "lo") != 0)
			rx += r, tx += t;
	}
	add_u64(n, "rx_bytes", ok ? rx : UINT64_MAX);
	add_u64(n, "tx_bytes", ok ? tx : UINT64_MAX);
}

/* utime + stime (+ the reaped children's, with children) of one /proc/<pid>/stat,
 * in clock ticks; UINT64_MAX if unreadable. */
static uint64_t proc_ticks(const char *path, bool children)
{
	char buf[1024], *p;
	unsigned long long ut, st, cut, cst;
	ssize_t n = hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf));

	if (n <= 0 || !(p = strrchr(buf, ')')))
		return UINT64_MAX;
	/* after "pid (comm)": state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime cutime cstime */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut,
	           &st, &cut, &cst) != 4)
		return UINT64_MAX;
	return ut + st + (children ? cut + cst : 0);
}

/*
 * v1 hosts whose cpuacct is not co-mounted with cpu have no CPU counter in
 * the sandbox's cgroups: add up its processes instead. init reaps every
 * process of its pid namespace, so init's own and its reaped children's
 * time plus the time of those alive is all the sandbox used (at clock-tick
 * resolution). Read through init's root: the sandbox's /proc lists exactly
 * its own processes.
 */
static uint64_t cpu_usec_from_proc(pid_t init)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	char path[320];
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks, t;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)init);
	ticks = proc_ticks(path, true);
	if (ticks == UINT64_MAX || hz <= 0)
		return UINT64_MAX;
	snprintf(path, sizeof(path), "/proc/%d/root/proc", (int)init);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '2' || de->d_name[0] > '9' ||
		    strspn(de->d_name, "0123456789") != strlen(de->d_name))
			continue; /* not a pid, or 1 (init, counted above) */
		snprintf(path, sizeof(path), "/proc/%d/root/proc/%s/stat", (int)init, de->d_name);
		t = proc_ticks(path, false);
		ticks += t == UINT64_MAX ? 0 : t; /* exited meanwhile */
	}
	return ticks * 1000000 / (uint64_t)hz;
}

cJSON *hutch_sup_stats_json(struct sup *s)
{
	const struct hutch_instance_type *t = s->cfg->type;
	struct hutch_cgroup_usage u = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
		                        UINT64_MAX };
	cJSON *o = cJSON_CreateObject(), *m, *p;
	int64_t read_at;

	if (!o)
		return NULL;
	/* the time of the CPU counter, which is read first: a rate over two
	 * samples must not count the reads of memory and pids after it */
	read_at = hutch_now_mono_ms();
	if (s->cg)
		(void)hutch_cgroup_usage(s->cg, &u);
	if (u.cpu_usec == UINT64_MAX && s->init_pid > 0)
		u.cpu_usec = cpu_usec_from_proc(s->init_pid);
	cJSON_AddStringToObject(o, "id", s->id);
	cJSON_AddNumberToObject(o, "read_at_ms", (double)read_at);
	add_u64(o, "cpu_usec", u.cpu_usec);
	/* --no-limits: no cgroup, so no limit to show (null) */
	if (s->cg)
		cJSON_AddNumberToObject(o, "cpu_limit", (double)t->cpu_millis / 1000.0);
	else
		cJSON_AddNullToObject(o, "cpu_limit");
	m = cJSON_AddObjectToObject(o, "memory");
	add_u64(m, "current_bytes", u.mem_current);
	add_u64(m, "peak_bytes", u.mem_peak);
	add_u64(m, "limit_bytes", s->cg ? t->memory_bytes : UINT64_MAX);
	p = cJSON_AddObjectToObject(o, "pids");
	add_u64(p, "current", u.pids);
	add_u64(p, "limit", s->cg ? t->pids_max : UINT64_MAX);
	add_u64(o, "oom_kills", u.oom_kills);
	add_disk(o, s->init_pid, t->disk_bytes);
	add_network(o, s->init_pid);
	cJSON_AddBoolToObject(o, "sleeping", s->idle.sleeping);
	return o;
}
