/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The helpers below every cgroup file (cgroup-util.h). First the pure
 * ones: parsing /proc/<pid>/cgroup, /proc/<pid>/mountinfo and keyed knob
 * files, joining paths, formatting limit values, the gc guard; no
 * syscalls, so the unit test covers them without root. Then the OS ones
 * the backends share: opening a cgroup directory beneath /sys/fs/cgroup,
 * killing and removing, reading knobs, the caller's own cgroups. Nothing
 * here calls up into cgroup.c or a backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"
#include "util.h"

#include "cgroup-root.h"
#include "cgroup-util.h"

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

/* ---- OS helpers shared by the backends ---- */

void hutch_cgroup_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int hutch_cgroup_open_dir(const char *dir)
{
	_cleanup_close_ int root = -EBADF;
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = HUTCH_RESOLVE_HOST,
	};
	const char *rel;
	int fd;

	/* Resolve below /sys/fs/cgroup with the kernel's help: no symlink or
	 * ".." can lead us out, whatever the string says. */
	if (strncmp(dir, CG_ROOT, strlen(CG_ROOT)) != 0 ||
	    (dir[strlen(CG_ROOT)] != '/' && dir[strlen(CG_ROOT)] != '\0'))
		return -EINVAL;
	rel = dir + strlen(CG_ROOT);
	while (*rel == '/')
		rel++;
	if (!*rel)
		rel = ".";
	if (hutch_cgroup_root_held() >= 0) {
		fd = sys_openat2(hutch_cgroup_root_held(), rel, &how, sizeof(how));
		return fd < 0 ? -errno : fd;
	}
	root = open(CG_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = sys_openat2(root, rel, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int hutch_cgroup_open_parent(const char *dir, int *ret_parent, const char **ret_name,
                             struct hutch_err *err)
{
	char parent[4096];
	const char *base = strrchr(dir, '/');
	int pfd;

	if (!base || !base[1] || (size_t)(base - dir) >= sizeof(parent))
		return hutch_err_set(err, -EINVAL, "bad cgroup path '%s'", dir);
	memcpy(parent, dir, (size_t)(base - dir));
	parent[base - dir] = '\0';
	pfd = hutch_cgroup_open_dir(parent);
	if (pfd == -ENOENT)
		return 1;
	if (pfd < 0)
		return hutch_err_set_errno(err, pfd, "open cgroup '%s'", parent);
	*ret_parent = pfd;
	*ret_name = base + 1;
	return 0;
}

int hutch_cgroup_try_remove(int fd, int parent, const char *name, const char *dir, int64_t deadline,
                            struct hutch_err *err)
{
	(void)hutch_cgroup_rmdir_children(fd);
	if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 1;
	if (errno != EBUSY)
		return hutch_err_set_errno(err, -errno, "remove cgroup '%s'", dir);
	if (hutch_now_mono_ms() >= deadline)
		return hutch_err_set(err, -EBUSY, "cgroup '%s' still busy after %d ms", dir,
		                     CG_WAIT_MS);
	return 0;
}

/* Read cgroup.procs of dirfd into pids; returns the count. */
static int read_pids(int dirfd, pid_t *pids, size_t max)
{
	char buf[16384];
	ssize_t n = hutch_read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	/* A full buffer may end in half a number: drop the last line; the
	 * caller loops until the cgroup is empty anyway. */
	if ((size_t)n == sizeof(buf) - 1) {
		char *nl = strrchr(buf, '\n');
		if (nl)
			nl[1] = '\0';
	}
	return (int)hutch_cgroup_parse_pids(buf, pids, max);
}

int hutch_cgroup_kill_procs(int dirfd)
{
	pid_t pids[1024], again[1024];
	int fds[1024];
	int n, m;

	n = read_pids(dirfd, pids, ELEMENTSOF(pids));
	if (n <= 0)
		return n == -ENOENT ? 0 : n;
	/* Pin each process with a pidfd, then re-read the list: a pid still
	 * listed after its pidfd was opened is the process we pinned (or a
	 * newer one in this very cgroup), never a stranger that reused it. */
	for (int i = 0; i < n; i++) {
		fds[i] = sys_pidfd_open(pids[i], 0);
		if (fds[i] < 0)
			fds[i] = errno == ENOSYS ? -ENOSYS : -ESRCH;
	}
	m = read_pids(dirfd, again, ELEMENTSOF(again));
	for (int i = 0; i < n; i++) {
		bool listed = false;

		for (int j = 0; j < m && !listed; j++)
			listed = again[j] == pids[i];
		if (listed && fds[i] >= 0)
			(void)sys_pidfd_send_signal(fds[i], SIGKILL, NULL, 0);
		else if (listed && fds[i] == -ENOSYS)
			(void)kill(pids[i], SIGKILL); /* pre-5.3 kernel: best effort */
		if (fds[i] >= 0)
			close(fds[i]);
	}
	return n;
}

DIR *hutch_cgroup_opendir(int dirfd)
{
	/* A fresh open file description: a dup() would share the directory
	 * offset, and a second walk of the same fd would see nothing. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return d;
}

int hutch_cgroup_rmdir_children(int dirfd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int r = 0;

	d = hutch_cgroup_opendir(dirfd);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int sub;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			int q = hutch_cgroup_rmdir_children(sub);
			close(sub);
			if (q < 0 && r == 0)
				r = q;
		}
		if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	return r;
}

/* ---- the caller's own cgroups ---- */

void hutch_cgroup_text_done(struct cg_text *t)
{
	free(t->proc);
	free(t->mountinfo);
}

int hutch_cgroup_text_read(struct cg_text *t, struct hutch_err *err)
{
	ssize_t n;

	*t = (struct cg_text){ 0 };
	n = hutch_read_file_alloc_at(AT_FDCWD, "/proc/self/cgroup", 1 << 20, &t->proc);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '/proc/self/cgroup'");
	n = hutch_read_file_alloc_at(AT_FDCWD, "/proc/self/mountinfo", 16 << 20, &t->mountinfo);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '/proc/self/mountinfo'");
	return 0;
}

int hutch_cgroup_own_dir(const struct cg_text *t, const char *controller, char *ret, size_t size,
                         struct hutch_err *err)
{
	const char *what = controller ? controller : "cgroup2";
	char own[4096];
	struct cg_mount m;
	int r;

	r = hutch_cgroup_parse_mountinfo(t->mountinfo, controller, &m);
	if (r < 0)
		return hutch_err_set(err, r, "no %s hierarchy mounted under '" CG_ROOT "'", what);
	r = hutch_cgroup_parse_proc(t->proc, controller, own, sizeof(own));
	if (r < 0)
		return hutch_err_set(err, r, "no %s entry in '/proc/self/cgroup'", what);
	r = hutch_cgroup_path_join(&m, own, ret, size);
	if (r < 0)
		return hutch_err_set_errno(err, r, "own %s cgroup '%s' is not visible at '%s'",
		                           what, own, m.mountpoint);
	return 0;
}

/* The freezer comes first: destroying it first thaws and kills everything,
 * so the other hierarchies are empty by the time we reach them. Those with
 * a field only when a container's resources ask (the field names it). */
const struct cg_v1_ctrl hutch_cgroup_v1_ctrls[] = {
	{ "freezer", CG_CTRL_FREEZER, false, "" },
	{ "cpu", CG_CTRL_CPU, true, "" },
	{ "cpuacct", CG_CTRL_CPUACCT, false, "" },
	{ "memory", CG_CTRL_MEMORY, true, "" },
	{ "pids", CG_CTRL_PIDS, true, "" },
	{ "cpuset", CG_CTRL_CPUSET, false, "linux.resources.cpu.cpus/mems" },
	{ "blkio", CG_CTRL_BLKIO, false, "linux.resources.blockIO" },
	{ "hugetlb", CG_CTRL_HUGETLB, false, "linux.resources.hugepageLimits" },
	{ "net_cls", CG_CTRL_NET_CLS, false, "linux.resources.network.classID" },
	{ "net_prio", CG_CTRL_NET_PRIO, false, "linux.resources.network.priorities" },
};
const size_t hutch_cgroup_n_v1_ctrls = ELEMENTSOF(hutch_cgroup_v1_ctrls);

/* Asked once a process: what is mounted at /sys/fs/cgroup is the boot's
 * choice (v2, or v1's tmpfs), and a create asked it twice in a row
 * (hutch_cgroup_needs_scope(), then hutch_cgroup_new_for()). A failure is
 * not kept. */
int hutch_cgroup_root_fs_type(long *ret, struct hutch_err *err)
{
	static long type;
	struct statfs sfs;

	if (!type) {
		if (statfs(CG_ROOT, &sfs) < 0)
			return hutch_err_set_errno(err, -errno, "statfs '" CG_ROOT "'");
		type = (long)sfs.f_type ? (long)sfs.f_type : -1;
	}
	*ret = type;
	return 0;
}

int hutch_cgroup_make_dir(const char *dir, int *ret_parent, struct hutch_err *err)
{
	_cleanup_close_ int pfd = -EBADF;
	char parent[4096];
	const char *base = strrchr(dir, '/');
	int fd;

	if (!base || (size_t)(base - dir) >= sizeof(parent))
		return hutch_err_set(err, -EINVAL, "bad cgroup path '%s'", dir);
	memcpy(parent, dir, (size_t)(base - dir));
	parent[base - dir] = '\0';
	pfd = hutch_cgroup_open_dir(parent);
	if (pfd < 0)
		return hutch_err_set_errno(err, pfd, "open cgroup '%s'", parent);
	if (mkdirat(pfd, base + 1, 0755) < 0) {
		if (errno == EEXIST)
			return hutch_err_set(err, -EEXIST,
			                     "cgroup '%s' already exists (left over? run hutch gc)",
			                     dir);
		return hutch_err_set_errno(err, -errno, "create cgroup '%s'", dir);
	}
	fd = openat(pfd, base + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		(void)unlinkat(pfd, base + 1, AT_REMOVEDIR);
		return hutch_err_set_errno(err, r, "open cgroup '%s'", dir);
	}
	if (ret_parent)
		*ret_parent = TAKE_FD(pfd);
	return fd;
}

uint64_t hutch_cgroup_read_u64(const char *dir, const char *name)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(dir);
	char buf[64];
	uint64_t v;

	if (fd < 0 || hutch_read_file_at(fd, name, buf, sizeof(buf)) < 0)
		return UINT64_MAX;
	buf[strcspn(buf, "\n")] = '\0';
	return hutch_parse_u64(buf, 0, UINT64_MAX - 1, &v) < 0 ? UINT64_MAX : v;
}

int hutch_cgroup_dir_for(const struct hutch_cgroup *cg, unsigned int ctrl)
{
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->ctrls[i] & ctrl)
			return (int)i;
	return -ENOENT;
}
