/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch doctor's look at the host's cgroups (cgroup-probe.h): the
 * hierarchy, its controllers, and whether a sandbox's cgroup can be made
 * and removed, judged where a sandbox would be placed (in a delegated
 * scope of its own when hutch_cgroup_needs_scope() says so).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-probe.h"
#include "cgroup-util.h"
#include "cgroup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static void probe_add(struct hutch_cgroup_probe *p, const char *msg)
{
	size_t len = strlen(p->detail);
	int room = (int)(sizeof(p->detail) - len);

	/* Truncation is fine: this is advice for a human. */
	snprintf(p->detail + len, (size_t)room, "%s%.*s", len ? "; " : "", room, msg);
}

static void probe_controllers(struct hutch_cgroup_probe *p, const struct cg_text *t)
{
	if (p->v2_unified) {
		char own[4096], buf[512] = "";
		_cleanup_close_ int fd = -EBADF;
		struct hutch_err e;

		if (hutch_cgroup_own_dir(t, NULL, own, sizeof(own), &e) < 0)
			return probe_add(p, e.msg);
		fd = hutch_cgroup_open_dir(own);
		if (fd >= 0)
			(void)hutch_read_file_at(fd, "cgroup.controllers", buf, sizeof(buf));
		p->has_cpu = hutch_cgroup_list_has(buf, "cpu");
		p->has_memory = hutch_cgroup_list_has(buf, "memory");
		p->has_pids = hutch_cgroup_list_has(buf, "pids");
		/* cgroup.freeze exists in every non-root cgroup since 5.2. */
		p->has_freezer = strcmp(own, CG_ROOT) == 0 ||
		                 (fd >= 0 && faccessat(fd, "cgroup.freeze", F_OK, 0) == 0);
		return;
	}
	for (size_t i = 0; i < hutch_cgroup_n_v1_ctrls; i++) {
		struct cg_mount m;
		bool has = hutch_cgroup_parse_mountinfo(t->mountinfo, hutch_cgroup_v1_ctrls[i].name,
		                                        &m) == 0;

		if (hutch_cgroup_v1_ctrls[i].bit == CG_CTRL_CPU)
			p->has_cpu = has;
		else if (hutch_cgroup_v1_ctrls[i].bit == CG_CTRL_MEMORY)
			p->has_memory = has;
		else if (hutch_cgroup_v1_ctrls[i].bit == CG_CTRL_PIDS)
			p->has_pids = has;
		else if (hutch_cgroup_v1_ctrls[i].bit == CG_CTRL_FREEZER)
			p->has_freezer = has;
	}
	{
		struct cg_mount m;
		p->hybrid = hutch_cgroup_parse_mountinfo(t->mountinfo, NULL, &m) == 0;
	}
}

/* mkdir and rmdir the directories of a throw-away sandbox "probe-<pid>". */
static void probe_create(struct hutch_cgroup_probe *p)
{
	struct hutch_cgroup *cg = NULL;
	struct hutch_err e;
	char name[32], msg[HUTCH_ERR_MSG_MAX + 32];

	snprintf(name, sizeof(name), "probe-%d", (int)getpid());
	if (hutch_cgroup_new(name, &cg, &e) < 0) {
		snprintf(msg, sizeof(msg), "cannot place a sandbox cgroup: %s", e.msg);
		return probe_add(p, msg);
	}
	p->can_create = true;
	for (size_t i = 0; i < cg->n_dirs && p->can_create; i++) {
		if (mkdir(cg->dirs[i], 0755) < 0) {
			snprintf(msg, sizeof(msg), "mkdir '%s': %s", cg->dirs[i], strerror(errno));
			probe_add(p, msg);
			p->can_create = false;
		}
	}
	for (size_t i = 0; i < cg->n_dirs; i++)
		(void)rmdir(cg->dirs[i]);
	hutch_cgroup_free(cg);
}

static int probe_here(struct hutch_cgroup_probe *ret)
{
	struct hutch_cgroup_probe p = { 0 };
	struct hutch_err e;
	struct cg_text t;
	long type = 0;
	int r;

	r = hutch_cgroup_root_fs_type(&type, &e);
	if (r < 0)
		return r;
	p.v2_unified = type == CGROUP2_SUPER_MAGIC;
	r = hutch_cgroup_text_read(&t, &e);
	if (r < 0) {
		hutch_cgroup_text_done(&t);
		return r;
	}
	probe_controllers(&p, &t);
	hutch_cgroup_text_done(&t);
	if (!p.has_cpu)
		probe_add(&p, "no cpu controller");
	if (!p.has_memory)
		probe_add(&p, "no memory controller");
	if (!p.has_pids)
		probe_add(&p, "no pids controller");
	if (!p.has_freezer)
		probe_add(&p, "no freezer (idle sleep unavailable)");
	probe_create(&p);
	*ret = p;
	return 0;
}

/* The same in a child moved into a throw-away delegated scope
 * "hutch-probe-<pid>.scope", which ends with it. */
static int probe_in_scope(const char *address, struct hutch_cgroup_probe *ret)
{
	struct hutch_cgroup_probe p = { .v2_unified = true, .in_scope = true };
	_cleanup_close_ int rd = -EBADF, wr = -EBADF;
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	rd = fds[0], wr = fds[1];
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct hutch_err e = { 0 };
		char name[32];

		snprintf(name, sizeof(name), "probe-%d", (int)getpid());
		if (hutch_cgroup_systemd_scope(address, name, &e) < 0)
			snprintf(p.detail, sizeof(p.detail),
			         "no delegated scope for a sandbox: %.200s", e.msg);
		else if (probe_here(&p) == 0)
			p.in_scope = true;
		_exit(hutch_write_all(wr, &p, sizeof(p)) < 0 ? 1 : 0);
	}
	close(TAKE_FD(wr));
	do
		n = read(rd, &p, sizeof(p));
	while (n < 0 && errno == EINTR);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(p))
		return -EIO;
	p.detail[sizeof(p.detail) - 1] = '\0';
	*ret = p;
	return 0;
}

/* Where a sandbox would go: under systemd without delegation, the
 * supervisor asks for a delegated scope of its own (supervisor/sandbox.c),
 * so the probe does too, in a child; probing our own cgroup there would
 * judge a place no sandbox uses, and climbing from it writes into
 * systemd's slices. */
int hutch_cgroup_probe(struct hutch_cgroup_probe *ret)
{
	char address[4200];

	if (hutch_cgroup_needs_scope() &&
	    hutch_cgroup_systemd_address(address, sizeof(address)) == 0)
		return probe_in_scope(address, ret);
	return probe_here(ret);
}
