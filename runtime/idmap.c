/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's id maps, root and rootless; see idmap.h. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "idmap.h"
#include "state.h"
#include "util.h"

#define APP_ID    1000u
#define NOBODY_ID 65534u
#define TTY_GID   5u

/* Where the setuid helpers may live; the first executable one is used. */
static const char *const helper_dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin" };

int hutch_idmap_parse_subid(const char *text, const char *name, uint32_t id, uint32_t min,
                            uint32_t *ret_start, uint32_t *ret_count)
{
	char idstr[16];

	snprintf(idstr, sizeof(idstr), "%u", (unsigned)id);
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		char num[2][24];
		uint64_t start, count;

		if (c1 && line[0] != '#') {
			size_t ulen = (size_t)(c1 - line);
			const char *rest = c1 + 1, *c2;
			size_t rlen = len - ulen - 1, n1;

			c2 = memchr(rest, ':', rlen);
			n1 = c2 ? (size_t)(c2 - rest) : 0;
			if (c2 && n1 < sizeof(num[0]) && rlen - n1 - 1 < sizeof(num[1]) &&
			    ((name && strlen(name) == ulen && !memcmp(line, name, ulen)) ||
			     (strlen(idstr) == ulen && !memcmp(line, idstr, ulen)))) {
				memcpy(num[0], rest, n1);
				num[0][n1] = '\0';
				memcpy(num[1], c2 + 1, rlen - n1 - 1);
				num[1][rlen - n1 - 1] = '\0';
				if (hutch_parse_u64(num[0], 1, UINT32_MAX, &start) == 0 &&
				    hutch_parse_u64(num[1], min, UINT32_MAX, &count) == 0 &&
				    start + count - 1 <= UINT32_MAX - 1) {
					*ret_start = (uint32_t)start;
					*ret_count = (uint32_t)count;
					return 0;
				}
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

uid_t hutch_idmap_app_uid(const struct hutch_idmap *m, unsigned slot)
{
	if (!m->rootless)
		return HUTCH_UID_BASE + slot * HUTCH_UID_RANGE + APP_ID;
	return m->subuid + slot * HUTCH_IDMAP_STRIDE;
}

int hutch_idmap_format(const struct hutch_idmap *m, unsigned slot, bool gid, bool lines, char *buf,
                       size_t size)
{
	const char *sep = lines ? "\n" : " ";
	uint32_t base;
	int n;

	if (!m->rootless) {
		n = snprintf(buf, size, "0 %u %u%s", HUTCH_UID_BASE + slot * HUTCH_UID_RANGE,
		             HUTCH_UID_RANGE, lines ? "\n" : "");
		return n < 0 || (size_t)n >= size ? -ENOSPC : n;
	}
	base = (gid ? m->subgid : m->subuid) + slot * HUTCH_IDMAP_STRIDE;
	n = snprintf(buf, size, "0 %u 1%s%u %u 1%s%u %u 1",
	             gid ? (unsigned)m->gid : (unsigned)m->uid, sep, APP_ID, base, sep, NOBODY_ID,
	             base + 1);
	if (n >= 0 && (size_t)n < size && gid)
		n += snprintf(buf + n, size - (size_t)n, "%s%u %u 1", sep, TTY_GID, base + 2);
	if (n >= 0 && (size_t)n < size && lines)
		n += snprintf(buf + n, size - (size_t)n, "\n");
	return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

static int find_helper(const char *name, char *ret, size_t size)
{
	for (size_t i = 0; i < ELEMENTSOF(helper_dirs); i++) {
		snprintf(ret, size, "%s/%s", helper_dirs[i], name);
		if (access(ret, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* The caller's range in file; the error names the file and the fix. */
static int subid_range(const char *file, const char *name, uint32_t id, uint32_t *ret_start,
                       uint32_t *ret_count, struct hutch_err *err)
{
	_cleanup_free_ char *text = NULL;
	ssize_t n = hutch_read_file_alloc_at(AT_FDCWD, file, 1 << 20, &text);

	if (n == -ENOENT || (n >= 0 && hutch_idmap_parse_subid(text, name, id, HUTCH_IDMAP_STRIDE,
	                                                       ret_start, ret_count) < 0))
		return hutch_err_set(err, -EPERM,
		                     "user '%.32s' has no subordinate ids in %s: an administrator "
		                     "runs 'usermod --add-subuids 100000-165535 --add-subgids "
		                     "100000-165535 %.32s' (a free range), or run as root",
		                     name, file, name);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '%s'", file);
	return 0;
}

int hutch_idmap_detect(struct hutch_idmap *m, struct hutch_err *err)
{
	char pwbuf[4096], rt[4000];
	struct passwd pw, *pwp = NULL;
	int r;

	memset(m, 0, sizeof(*m));
	m->uid = geteuid();
	m->gid = getegid();
	if (m->uid == 0) {
		m->slots = HUTCH_SLOTS;
		snprintf(m->slots_dir, sizeof(m->slots_dir), "%s", HUTCH_SLOTS_DIR);
		return 0;
	}
	m->rootless = true;
	if (getpwuid_r(m->uid, &pw, pwbuf, sizeof(pwbuf), &pwp) != 0 || !pwp)
		return hutch_err_set(err, -EPERM,
		                     "uid %u has no user name, which newuidmap needs: add the user "
		                     "(useradd), or run as root",
		                     (unsigned)m->uid);
	r = subid_range(HUTCH_SUBUID_FILE, pw.pw_name, m->uid, &m->subuid, &m->subuid_n, err);
	if (r >= 0)
		r = subid_range(HUTCH_SUBGID_FILE, pw.pw_name, m->uid, &m->subgid, &m->subgid_n,
		                err);
	if (r < 0)
		return r;
	if (find_helper("newuidmap", m->newuidmap, sizeof(m->newuidmap)) < 0 ||
	    find_helper("newgidmap", m->newgidmap, sizeof(m->newgidmap)) < 0)
		return hutch_err_set(
		        err, -EPERM,
		        "newuidmap/newgidmap not found (rootless sandboxes map their "
		        "users with them): install the 'uidmap' package, or run as root");
	m->slots = (m->subuid_n < m->subgid_n ? m->subuid_n : m->subgid_n) / HUTCH_IDMAP_STRIDE;
	if (m->slots > HUTCH_SLOTS)
		m->slots = HUTCH_SLOTS;
	r = hutch_state_user_runtime_dir(rt, sizeof(rt));
	if (r < 0)
		return hutch_err_set_errno(err, r, "the runtime dir");
	r = hutch_runtime_dir_check(rt, err);
	if (r < 0)
		return r;
	snprintf(m->slots_dir, sizeof(m->slots_dir), "%s/.uids", rt);
	return 0;
}

/* Start helper PID MAP... (posix_spawn, empty environment): glibc's
 * clone(CLONE_VM | CLONE_VFORK) copies no page tables of the supervisor,
 * whose fork() of a process this size cost ~1 ms a helper here, and runs
 * the child at once. Its stdout and stderr are a pipe, its stdin the
 * supervisor's (/dev/null); every other fd is close-on-exec. */
static int helper_start(struct hutch_idmap_helper *h, pid_t target, struct hutch_err *err)
{
	char pidstr[16], args[256];
	char *argv[24] = { (char *)h->path, pidstr };
	char *envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	size_t argc = 2;
	int pfd[2], r;

	snprintf(pidstr, sizeof(pidstr), "%d", (int)target);
	snprintf(args, sizeof(args), "%s", h->args);
	for (char *save = NULL, *t = strtok_r(args, " ", &save); t && argc < 23;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	argv[argc] = NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	r = posix_spawn_file_actions_init(&fa);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	if (r == 0)
		r = posix_spawn(&h->pid, h->path, &fa, NULL, argv, envp);
	(void)posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (r != 0) {
		close(pfd[0]);
		return hutch_err_set_errno(err, -r, "start '%s'", h->path);
	}
	h->out = pfd[0];
	return 0;
}

/* Wait for a started helper; what it said when it failed goes into err. */
static int helper_finish(struct hutch_idmap_helper *h, pid_t target, struct hutch_err *err)
{
	char out[200] = "";
	ssize_t n = hutch_read_all(h->out, out, sizeof(out) - 1);
	int status = 0;

	close(h->out);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return hutch_err_set(err, -EPERM, "%s %d %.60s: %.120s", h->path, (int)target, h->args,
	                     out[0] ? out : "failed");
}

int hutch_idmap_write_start(const struct hutch_idmap *m, unsigned slot, pid_t pid,
                            struct hutch_idmap_job *job, struct hutch_err *err)
{
	char map[256], path[64];
	int r;

	memset(job, 0, sizeof(*job));
	job->target = pid;
	job->h[0].out = job->h[1].out = -EBADF;
	if (m->rootless) {
		job->h[0].path = m->newuidmap;
		job->h[1].path = m->newgidmap;
		for (int i = 0; i < 2; i++) {
			r = hutch_idmap_format(m, slot, i == 1, false, job->h[i].args,
			                       sizeof(job->h[i].args));
			if (r < 0)
				return hutch_err_set(err, -ENOSPC, "id map");
		}
		for (int i = 0; i < 2; i++) {
			r = helper_start(&job->h[i], pid, err);
			if (r < 0)
				return r; /* _finish() waits for the one started */
			job->started = i + 1;
		}
		return 0;
	}
	for (int gid = 0; gid <= 1; gid++) {
		r = hutch_idmap_format(m, slot, gid, true, map, sizeof(map));
		if (r < 0)
			return hutch_err_set_errno(err, r, "id map");
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, gid ? "gid_map" : "uid_map");
		r = hutch_write_knob_at(AT_FDCWD, path, map);
		if (r < 0)
			return hutch_err_set_errno(err, r, "write '%s'", path);
	}
	return 0;
}

int hutch_idmap_write_finish(struct hutch_idmap_job *job, struct hutch_err *err)
{
	struct hutch_err e2 = { 0 };
	int r = 0;

	for (int i = 0; i < job->started; i++) {
		int q = helper_finish(&job->h[i], job->target, r < 0 ? &e2 : err);

		if (q < 0 && r == 0)
			r = q;
	}
	job->started = 0;
	return r;
}

int hutch_idmap_write(const struct hutch_idmap *m, unsigned slot, pid_t pid, struct hutch_err *err)
{
	struct hutch_idmap_job job;
	int r = hutch_idmap_write_start(m, slot, pid, &job, err);
	struct hutch_err e2 = { 0 };
	int q = hutch_idmap_write_finish(&job, r < 0 ? &e2 : err);

	return r < 0 ? r : q;
}
