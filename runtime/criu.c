/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRIU found and checked (criu.h). hutch runs criu as a program, never
 * links it: CRIU is GPL, and a dump or restore is a process tree of its
 * own anyway. What 'criu check' says is read and kept short for doctor
 * and the refusal; the verdict is cached per binary and kernel in the
 * runtime dir (one file, .criu-check, replaced whole by rename: a dot file,
 * as the dir's other files of hutch's own, beside the sandboxes' ids).
 */
#include "criu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"
#include "util.h"

#define CACHE_NAME       ".criu-check"
#define KDAT_NAME        ".criu-kdat"
#define KDAT_MAX         (64 << 10)
#define DEFAULT_PATH     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CHECK_TIMEOUT_MS 30000
#define OUTPUT_MAX       8192

void hutch_criu_parse_version(const char *out, char *buf, size_t size)
{
	const char *v = strstr(out, "Version:");
	size_t n;

	buf[0] = '\0';
	if (!v || size == 0)
		return;
	v += strlen("Version:");
	v += strspn(v, " \t");
	n = strcspn(v, " \t\r\n");
	if (n >= size)
		n = size - 1;
	memcpy(buf, v, n);
	buf[n] = '\0';
}

/* Append line (n bytes) to buf as "; "-separated text, within size. */
static void append(char *buf, size_t size, const char *line, size_t n)
{
	size_t len = strlen(buf);

	if (len && len + 2 < size) {
		memcpy(buf + len, "; ", 3);
		len += 2;
	}
	if (len + 1 >= size)
		return;
	if (n > size - len - 1)
		n = size - len - 1;
	memcpy(buf + len, line, n);
	buf[len + n] = '\0';
}

void hutch_criu_summarize_check(const char *out, char *buf, size_t size)
{
	const char *last = NULL;
	size_t last_n = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	for (const char *p = out; *p;) {
		size_t n = strcspn(p, "\n");
		const char *l = p, *close;

		p += n + (p[n] == '\n');
		while (n && (l[n - 1] == '\r' || l[n - 1] == ' ' || l[n - 1] == '.'))
			n--;
		if (n == 0)
			continue;
		last = l;
		last_n = n;
		/* "Error (criu/vdso.c:401): vdso: ..." -> "vdso: ..." */
		if (n < 6 || strncmp(l, "Error", 5))
			continue;
		close = memmem(l, n, "): ", 3);
		if (close) {
			n -= (size_t)(close + 3 - l);
			l = close + 3;
		}
		append(buf, size, l, n);
	}
	if (!buf[0] && last)
		append(buf, size, last, last_n);
}

/* The binary: HUTCH_CRIU, else the first executable criu in PATH. */
static bool find_binary(struct hutch_criu *c)
{
	const char *env = getenv("HUTCH_CRIU"), *path = getenv("PATH");

	if (env && *env) {
		if (env[0] == '/' && access(env, X_OK) == 0) {
			snprintf(c->path, sizeof(c->path), "%s", env);
			return true;
		}
		snprintf(c->detail, sizeof(c->detail),
		         "HUTCH_CRIU='%.200s' is not an executable file's absolute path", env);
		return false;
	}
	if (!path || !*path)
		path = DEFAULT_PATH;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");

		if (n && n < sizeof(c->path) - 6) {
			snprintf(c->path, sizeof(c->path), "%.*s/criu", (int)n, p);
			if (c->path[0] == '/' && access(c->path, X_OK) == 0)
				return true;
		}
		p += n + (p[n] == ':');
	}
	c->path[0] = '\0';
	snprintf(c->detail, sizeof(c->detail), "no criu in PATH and HUTCH_CRIU unset");
	return false;
}

/* Run path with argv, its stdout and stderr into out (NUL-ended); its exit
 * status (0-255), 256 when killed by a signal, or -errno (-ETIMEDOUT). */
static int run(const char *path, const char *const *argv, char *out, size_t size)
{
	_cleanup_close_ int rd = -EBADF, wr = -EBADF;
	int64_t deadline = hutch_now_mono_ms() + CHECK_TIMEOUT_MS;
	size_t len = 0;
	int fds[2], status, r = 0;
	pid_t pid, parent = getpid();

	out[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	rd = fds[0];
	wr = fds[1];
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || null < 0)
			_exit(126);
		/* The child's stdio, for the exec: */
		if (dup2(null, 0) < 0 || dup2(wr, 1) < 0) /* lint-fds: ok: child stdio */
			_exit(126);
		if (dup2(wr, 2) < 0) /* lint-fds: ok: child stdio */
			_exit(126);
		(void)sys_close_range(3, ~0U, 0);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	closep(&wr);
	for (;;) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		int64_t left = deadline - hutch_now_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			r = -ETIMEDOUT;
			(void)kill(pid, SIGKILL);
			break;
		}
		n = read(rd, out + len, len + 1 < size ? size - len - 1 : 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* EOF (or a full buffer: the rest is not read) */
		len += (size_t)n;
		out[len] = '\0';
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (r < 0)
		return r;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 256;
}

static void cache_key(const struct hutch_criu *c, const struct stat *st, char *buf, size_t size)
{
	snprintf(buf, size, "%s %llu %llu %lld %lld.%09ld %s", c->path,
	         (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
	         (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
	         c->kernel);
}

/* The cached verdict for key: line 1 the key, 2 "1"/"0", 3 version, 4 detail. */
static bool cache_read(int dirfd, const char *key, struct hutch_criu *c)
{
	char text[PATH_MAX + 1024], *lines[4] = { NULL }, *save = NULL, *p = text;

	if (dirfd < 0 || hutch_read_file_at(dirfd, CACHE_NAME, text, sizeof(text)) < 0)
		return false;
	for (size_t i = 0; i < 4; i++, p = NULL)
		lines[i] = strtok_r(p, "\n", &save);
	if (!lines[0] || !lines[1] || !lines[2] || strcmp(lines[0], key))
		return false;
	c->works = !strcmp(lines[1], "1");
	c->old = !strcmp(lines[1], "2");
	snprintf(c->version, sizeof(c->version), "%s", strcmp(lines[2], "-") ? lines[2] : "");
	snprintf(c->detail, sizeof(c->detail), "%s", lines[3] ? lines[3] : "");
	c->cached = true;
	return true;
}

static void cache_write(int dirfd, const char *key, const struct hutch_criu *c)
{
	char text[PATH_MAX + 1024], tmp[64];

	if (dirfd < 0)
		return;
	snprintf(text, sizeof(text), "%s\n%d\n%s\n%s\n", key,
	         c->works ? 1
	         : c->old ? 2
	                  : 0,
	         c->version[0] ? c->version : "-", c->detail);
	snprintf(tmp, sizeof(tmp), "%s.%d", CACHE_NAME, (int)getpid());
	if (hutch_write_file_at(dirfd, tmp, text, 0644) < 0 ||
	    renameat(dirfd, tmp, dirfd, CACHE_NAME) < 0)
		(void)unlinkat(dirfd, tmp, 0);
}

/* criu --version, then criu check, then whether its dump takes the option
 * that an older CRIU does not know (Debian 12's 3.17.1 passes 'criu check'
 * on 6.1, then refuses it: no pid is given, so a CRIU that knows it stops
 * at that, doing nothing): the verdict into c. */
static void check(struct hutch_criu *c)
{
	static const char *const version_argv[] = { "criu", "--version", NULL };
	static const char *const check_argv[] = { "criu", "check", NULL };
	static const char *const skip_argv[] = { "criu", "dump", "--network-lock", "skip", NULL };
	_cleanup_free_ char *out = malloc(OUTPUT_MAX);
	int r;

	if (!out) {
		snprintf(c->detail, sizeof(c->detail), "out of memory");
		return;
	}
	if (run(c->path, version_argv, out, OUTPUT_MAX) >= 0)
		hutch_criu_parse_version(out, c->version, sizeof(c->version));
	r = run(c->path, check_argv, out, OUTPUT_MAX);
	c->works = r == 0;
	if (r < 0)
		snprintf(c->detail, sizeof(c->detail), "'criu check' did not end: %s",
		         r == -ETIMEDOUT ? "killed after 30 s" : strerror(-r));
	else
		hutch_criu_summarize_check(out, c->detail, sizeof(c->detail));
	if (c->works && run(c->path, skip_argv, out, OUTPUT_MAX) >= 0 &&
	    strstr(out, "--network-lock")) {
		c->works = false;
		c->old = true;
		hutch_criu_summarize_check(out, c->detail, sizeof(c->detail));
	}
}

void hutch_criu_probe(const char *runtime_dir, struct hutch_criu *ret)
{
	_cleanup_close_ int dirfd = -EBADF;
	struct hutch_criu c = { 0 };
	char key[PATH_MAX + 256];
	struct utsname u;
	struct stat st;

	if (uname(&u) == 0)
		snprintf(c.kernel, sizeof(c.kernel), "%s", u.release);
	if (!find_binary(&c) || stat(c.path, &st) < 0) {
		*ret = c;
		return;
	}
	if (runtime_dir)
		dirfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cache_key(&c, &st, key, sizeof(key));
	if (!cache_read(dirfd, key, &c)) {
		check(&c);
		cache_write(dirfd, key, &c);
	}
	*ret = c;
}

void hutch_criu_refusal(const struct hutch_criu *c, char *buf, size_t size)
{
	/* Kept under the API's 768 bytes of message with a CRIU path of ~100. */
	static const char head[] = "full snapshots (processes and memory) need a CRIU that passes "
	                           "'criu check'";
	static const char fix[] = "CRIU " HUTCH_CRIU_MIN " or later handles this kernel's vDSO "
	                          "(" HUTCH_CRIU_MEASURED " built from source passes on Linux "
	                          "6.18): set HUTCH_CRIU to it";
	static const char tail[] = "filesystem snapshots work";
	const char *v = c->version[0] ? c->version : "(version unknown)";

	if (!c->path[0])
		snprintf(buf, size,
		         "%s: %s (Debian 12's criu 3.17.1 fails it on Linux 6.18: vdso: "
		         "Unexpected rt vDSO area bounds); %s; %s",
		         head, c->detail, fix, tail);
	else if (c->old)
		snprintf(buf, size,
		         "full snapshots (processes and memory) need a CRIU whose dump takes "
		         "hutch's options: criu %s at %.100s passes 'criu check' on Linux %s, but "
		         "'criu dump --network-lock skip' says: %.160s; CRIU " HUTCH_CRIU_MEASURED
		         " built from source takes them: set HUTCH_CRIU to it; %s",
		         v, c->path, c->kernel, c->detail, tail);
	else if (!c->works)
		snprintf(buf, size, "%s: criu %s at %.100s fails it on Linux %s: %.160s; %s; %s",
		         head, v, c->path, c->kernel, c->detail, fix, tail);
	else
		snprintf(buf, size,
		         "criu %s at %.100s passes 'criu check' on Linux %s%s: 'hutch snapshot "
		         "--full' dumps a plain sandbox and 'hutch create --snapshot' restores it "
		         "into a new one, 'hutch fork --full' does both (docs/snapshots.md); %s",
		         v, c->path, c->kernel, c->cached ? " (cached)" : "", tail);
}

/*
 * CRIU's own cache of what it detected of the kernel (/run/criu.kdat): it
 * keeps it only where /run is a tmpfs (a file that does not outlive a
 * boot), and spends 0.3-0.5 s (load 10-14) detecting it again on each run
 * where /run is not (this host's /run is ext4). So each dump and restore
 * is given a /run of its own: a detached tmpfs with criu.kdat in it, the
 * runtime dir's copy (.criu-kdat: a line with the binary's identity, the
 * kernel and the boot's id, then CRIU's bytes), taken again from it after
 * a run where there was none.
 */
static bool kdat_key(const struct hutch_criu *c, char *buf, size_t size)
{
	char boot[64] = "";
	struct stat st;
	ssize_t n =
	        hutch_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", boot, sizeof(boot));

	if (n <= 0 || stat(c->path, &st) < 0)
		return false;
	boot[strcspn(boot, "\n")] = '\0';
	cache_key(c, &st, buf, size);
	if (strlen(buf) + strlen(boot) + 2 >= size)
		return false;
	strcat(buf, " ");
	strcat(buf, boot);
	return true;
}

int hutch_criu_run_dir(const char *runtime_dir, const struct hutch_criu *c, ino_t *ret_kdat)
{
	_cleanup_close_ int fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC), rt = -EBADF, in = -EBADF;
	_cleanup_close_ int out = -EBADF;
	_cleanup_free_ char *buf = malloc(PATH_MAX + 512 + KDAT_MAX);
	char key[PATH_MAX + 512];
	struct stat st;
	ssize_t n = 0;
	char *nl;
	int mnt;

	*ret_kdat = 0;
	if (fs < 0 || !buf || sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", "1m", 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fs < 0 ? fs : -errno;
	mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
	                  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0)
		return -errno;
	if (runtime_dir && kdat_key(c, key, sizeof(key)) &&
	    (rt = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0 &&
	    (in = openat(rt, KDAT_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
		n = hutch_read_all(in, buf, PATH_MAX + 512 + KDAT_MAX);
	if (n > 0 && (nl = memchr(buf, '\n', (size_t)n)) && (size_t)(nl - buf) == strlen(key) &&
	    !memcmp(buf, key, strlen(key)) &&
	    (out = openat(mnt, "criu.kdat", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0 &&
	    hutch_write_all(out, nl + 1, (size_t)(n - (nl + 1 - buf))) >= 0 && fstat(out, &st) == 0)
		*ret_kdat = st.st_ino;
	return mnt;
}

int hutch_criu_run_dir_attach(int mnt)
{
	return sys_move_mount(mnt, "", AT_FDCWD, "/run", MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
}

void hutch_criu_run_dir_keep(const char *runtime_dir, const struct hutch_criu *c, int mnt,
                             ino_t kdat)
{
	_cleanup_close_ int in = -EBADF, rt = -EBADF, out = -EBADF;
	_cleanup_free_ char *buf = malloc(KDAT_MAX);
	char key[PATH_MAX + 512], tmp[64];
	struct stat st;
	ssize_t n;

	/* The one filled, not replaced by CRIU (it unlinks one it finds
	 * stale and renames a new one in: another inode): kept as it is. */
	if (mnt < 0 || !runtime_dir || !buf || !kdat_key(c, key, sizeof(key)) ||
	    (in = openat(mnt, "criu.kdat", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(in, &st) < 0 || (kdat && st.st_ino == kdat) ||
	    (n = hutch_read_all(in, buf, KDAT_MAX)) <= 0 || n >= KDAT_MAX ||
	    (rt = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d", KDAT_NAME, (int)getpid());
	strcat(key, "\n");
	out = openat(rt, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0 || hutch_write_all(out, key, strlen(key)) < 0 ||
	    hutch_write_all(out, buf, (size_t)n) < 0 || renameat(rt, tmp, rt, KDAT_NAME) < 0)
		(void)unlinkat(rt, tmp, 0);
}

/*
 * CRIU forks processes of its own (usernsd, cgroupd, a restore's helpers,
 * the action scripts and what they run) that do not die with it: the
 * parent-death signal a child of the supervisor is given is not inherited
 * by its forks, and a process group is left by any setsid() or setpgid()
 * (coreutils' timeout, in the post-dump action, makes a group of its own).
 * A supervisor killed during a dump left a fork of CRIU stopped under pid
 * 1; one killed during a restore left helpers holding the new sandbox's
 * disk. So a run's processes are in a cgroup of their own beside the
 * sandbox's (hutch_cgroup_run_new()), which nothing in it leaves but the
 * restored tasks CRIU moves into the new sandbox's; a watcher, a child of
 * the caller outside it, kills it and removes it once its pipe ends: when
 * the caller is done with CRIU or dies. gc removes one a watcher killed
 * too left (state-gc.c).
 */
int hutch_criu_cg_new(const struct hutch_cgroup *cg, struct hutch_criu_cg *ret,
                      struct hutch_err *err)
{
	int p[2], join;
	pid_t pid;

	*ret = (struct hutch_criu_cg){ .join = -EBADF, .let_go = -EBADF, .watch = -1 };
	if ((join = hutch_cgroup_run_new(cg, ret->dir, sizeof(ret->dir), err)) < 0)
		return hutch_err_prefix(err, "CRIU's cgroup");
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(join);
		return hutch_err_set_errno(err, -errno, "CRIU's cgroup: its watcher's pipe");
	}
	pid = fork();
	if (pid == 0) {
		struct hutch_err e;
		char c;

		(void)sys_close_range(3, (unsigned)p[0] - 1, 0);
		(void)sys_close_range((unsigned)p[0] + 1, ~0U, 0);
		while (read(p[0], &c, 1) != 0 && errno == EINTR)
			;
		_exit(hutch_cgroup_remove_dir(ret->dir, &e) < 0);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		close(join);
		(void)rmdir(ret->dir);
		return hutch_err_set_errno(err, -errno, "CRIU's cgroup: fork its watcher");
	}
	ret->join = join;
	ret->let_go = p[1];
	ret->watch = pid;
	return 0;
}

int hutch_criu_cg_join(const struct hutch_criu_cg *c)
{
	return c->join >= 0 && write(c->join, "0", 1) == 1 ? 0 : -errno;
}

int hutch_criu_cg_refused(const struct hutch_criu_cg *c, const char *what, struct hutch_err *err)
{
	return hutch_err_set_class(err, HUTCH_ERRC_IO, -EIO,
	                           "%s: CRIU could not join its cgroup '%.300s': the cgroup "
	                           "file system refused the move; check that it is writable",
	                           what, c->dir);
}

void hutch_criu_cg_end(struct hutch_criu_cg *c)
{
	closep(&c->join);
	closep(&c->let_go);
	while (c->watch > 0 && waitpid(c->watch, NULL, 0) < 0 && errno == EINTR)
		;
	c->watch = -1;
}

int hutch_criu_write_lo_up(int dirfd, const char *name)
{
	static const char text[] = "#!/bin/sh\n"
	                           "[ \"$CRTOOLS_SCRIPT_ACTION\" = setup-namespaces ] || exit 0\n"
	                           "exec nsenter -t \"$CRTOOLS_INIT_PID\" -n ip link set lo up\n";

	return hutch_write_bytes_at(dirfd, name, text, sizeof(text) - 1, 0700) < 0 ? -errno : 0;
}
