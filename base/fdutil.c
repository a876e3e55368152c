/* SPDX-License-Identifier: Apache-2.0 */
/* OS-touching helpers with no sandbox knowledge; see fdutil.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"
#include "util.h"

/* In the start's text: `hutch version` writes its line with it (issue 31). */
HUTCH_START_TEXT int hutch_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t hutch_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int hutch_write_bytes_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode)
{
	_cleanup_close_ int fd = -EBADF;

	fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	return hutch_write_all(fd, buf, len);
}

int hutch_write_file_at(int dirfd, const char *path, const char *content, mode_t mode)
{
	return hutch_write_bytes_at(dirfd, path, content, strlen(content), mode);
}

int hutch_rename_replace(const char *from, const char *to)
{
	/* Measured on this VM's ext4 (no journal, discard): a rename over a
	 * state.json 145-280 us, and the removal of that file later 2-9 ms of
	 * a synchronous discard; swapped and unlinked 40-70 us and none. */
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0)
		return unlink(from) < 0 && errno != ENOENT ? -errno : 0;
	/* no file to replace yet, or a file system without exchange */
	if (errno != ENOENT && errno != EINVAL && errno != ENOSYS)
		return -errno;
	return rename(from, to) < 0 ? -errno : 0;
}

int hutch_write_knob_at(int dirfd, const char *path, const char *value)
{
	_cleanup_close_ int fd = -EBADF;
	size_t len = strlen(value);
	ssize_t n;

	fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/* Knobs take one write; a short write is an error. */
	n = write(fd, value, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

ssize_t hutch_read_file_at(int dirfd, const char *path, char *buf, size_t max)
{
	_cleanup_close_ int fd = -EBADF;
	ssize_t n;

	if (max == 0)
		return -EINVAL;
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = hutch_read_all(fd, buf, max - 1);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return n;
}

ssize_t hutch_read_file_alloc_at(int dirfd, const char *path, size_t max, char **ret)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, alloc = 0;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (len == alloc && (alloc < max || !buf)) {
			char *p;

			alloc = alloc ? alloc * 2 : 16384;
			if (alloc > max)
				alloc = max;
			p = realloc(buf, alloc + 1);
			if (!p)
				return -ENOMEM;
			buf = p;
		}
		/* Full at max: one byte more (into the NUL's slot) tells a file of
		 * exactly max bytes from a larger one. */
		n = read(fd, buf + len, len < alloc ? alloc - len : 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		if (len == alloc)
			return -EFBIG;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	return (ssize_t)len;
}

/* For file systems whose readdir() leaves d_type unknown. */
static bool is_dir_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static int rm_rf_children(int fd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int r = 0;

	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type == DT_DIR ||
		    (de->d_type == DT_UNKNOWN && is_dir_at(dirfd(d), de->d_name))) {
			int sub = openat(dirfd(d), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				int q = rm_rf_children(sub);
				if (q < 0 && r == 0)
					r = q;
			}
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT &&
			    r == 0)
				r = -errno;
		} else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0) {
			r = -errno;
		}
	}
	return r;
}

int hutch_rm_rf_at(int dirfd, const char *path)
{
	int fd, r;

	fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			return unlinkat(dirfd, path, 0) < 0 ? -errno : 0;
		return errno == ENOENT ? 0 : -errno;
	}
	r = rm_rf_children(fd);
	if (unlinkat(dirfd, path, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return r < 0 ? r : -errno;
	return r;
}

/* The walk of hutch_mkdir_p_at(), apart: its 4 KiB copy of the path is
 * then no part of the common case's stack (-fstack-clash-protection
 * writes each page of a frame: a page fault each after a fork). */
static __attribute__((noinline)) int mkdir_p_walk(int dirfd, const char *path, size_t len,
                                                  mode_t mode)
{
	char buf[4096];

	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdirat(dirfd, buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdirat(dirfd, buf, mode) < 0) {
		struct stat st;

		if (errno != EEXIST)
			return -errno;
		/* Like mkdir -p: an existing non-directory is an error. */
		if (fstatat(dirfd, buf, &st, 0) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return 0;
}

int hutch_mkdir_p_at(int dirfd, const char *path, mode_t mode)
{
	size_t len = strlen(path);
	struct stat st;

	if (len == 0 || len >= 4096)
		return -EINVAL;
	/* Mostly there already (the runtime dir, the uid slots' dir): one
	 * fstatat(), not a mkdirat() per component and then one. */
	if (fstatat(dirfd, path, &st, 0) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	return mkdir_p_walk(dirfd, path, len, mode);
}

int hutch_fd_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

void hutch_close_reset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

int hutch_unix_listen(const char *path, int backlog)
{
	struct sockaddr_un sa;
	_cleanup_close_ int dirfd = -EBADF;
	mode_t old;
	int fd, r;

	if ((r = hutch_unix_addr(path, &sa, &dirfd)) < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)unlink(path);
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, backlog) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int hutch_unix_connect(int fd, const char *path)
{
	struct sockaddr_un sa;
	_cleanup_close_ int dirfd = -EBADF;
	int r = hutch_unix_addr(path, &sa, &dirfd);

	if (r < 0)
		return r;
	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
}

int hutch_spare_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

void hutch_accept_shed(int lfd, int *spare)
{
	if (*spare < 0)
		return;
	close(*spare);
	hutch_close_reset(accept4(lfd, NULL, NULL, SOCK_CLOEXEC));
	*spare = hutch_spare_fd();
}

void hutch_close_many(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -EBADF;
	}
}

void hutch_stdio_to_null(void)
{
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (devnull < 0)
		return;
	dup2(devnull, 0); /* lint-fds: ok: stdio */
	dup2(devnull, 1); /* lint-fds: ok: stdio */
	dup2(devnull, 2); /* lint-fds: ok: stdio */
	if (devnull > 2)
		close(devnull);
}

/* The mask of a "SigIgn:" or "SigCgt:" line of /proc/self/status (bit
 * sig - 1 for signal sig), or every bit when it is not there. */
static uint64_t status_mask(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	char *end;
	unsigned long long v;

	if (!p)
		return UINT64_MAX;
	errno = 0;
	v = strtoull(p + strlen(key), &end, 16);
	if (errno || end == p + strlen(key) || *end != '\n')
		return UINT64_MAX;
	return (uint64_t)v;
}

void hutch_signals_default(void)
{
	char status[4096]; /* SigCgt is within the first ~1,100 bytes */
	uint64_t set = UINT64_MAX;

	/* Only a handler or SIG_IGN differs from the default, and the kernel
	 * lists both: three syscalls instead of one sigaction() per signal. */
	if (hutch_read_file_at(AT_FDCWD, "/proc/self/status", status, sizeof(status)) > 0)
		set = status_mask(status, "\nSigIgn:\t") | status_mask(status, "\nSigCgt:\t");
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && (sig > 64 || (set >> (sig - 1)) & 1))
			signal(sig, SIG_DFL);
}

int hutch_lock_at(int dirfd, const char *name, int op)
{
	int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return -errno;
	if (flock(fd, op) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

pid_t hutch_fork_detached(void)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid < 0 ? -errno : pid;
	if (setsid() < 0)
		_exit(1);
	pid = fork();
	if (pid != 0)
		_exit(pid < 0 ? 1 : 0);
	return 0;
}

pid_t hutch_fork_session(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0 && setsid() < 0)
		_exit(1);
	return pid;
}

pid_t hutch_fork_detached_bare(int keep)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid < 0 ? -errno : pid;
	if (keep > 3)
		(void)sys_close_range(3, (unsigned)keep - 1, 0);
	(void)sys_close_range(keep >= 3 ? (unsigned)keep + 1 : 3, ~0U, 0);
	if (setsid() < 0)
		_exit(1);
	pid = fork();
	if (pid != 0)
		_exit(pid < 0 ? 1 : 0);
	return 0;
}

/* Exit as a process with this wait status did: its code, or death by its
 * signal (re-raised, no core). For whoever waits for us in its stead. */
void hutch_exit_like(int status)
{
	struct rlimit no_core = { 0, 0 };
	sigset_t all;
	int sig = SIGKILL;

	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		sig = WTERMSIG(status);
	/* Die of the same signal, without a core of ours. */
	(void)setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigfillset(&all);
	sigdelset(&all, sig);
	sigprocmask(SIG_SETMASK, &all, NULL);
	(void)raise(sig);
	_exit(128 + sig);
}

int hutch_unix_addr(const char *path, struct sockaddr_un *ret, int *ret_dirfd)
{
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = NULL;
	int fd, n;

	memset(ret, 0, sizeof(*ret));
	ret->sun_family = AF_UNIX;
	*ret_dirfd = -EBADF;
	if (strlen(path) < sizeof(ret->sun_path)) {
		memcpy(ret->sun_path, path, strlen(path));
		return 0;
	}
	/* The directory by fd: the kernel resolves /proc/self/fd/N to it
	 * (a magic link), so any length of directory path works. */
	if (!slash || !slash[1] || !(dir = strndup(path, (size_t)(slash - path) + 1)))
		return slash && slash[1] ? -ENOMEM : -EINVAL;
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(ret->sun_path, sizeof(ret->sun_path), "/proc/self/fd/%d/%s", fd, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(ret->sun_path)) {
		close(fd);
		memset(ret->sun_path, 0, sizeof(ret->sun_path));
		return -ENAMETOOLONG;
	}
	*ret_dirfd = fd;
	return 0;
}

pid_t hutch_userns_start(void)
{
	struct clone_args args = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
	pid_t parent = getpid();
	long pid;

	pid = sys_clone3(&args, sizeof(args));
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Only its namespace matters; it is killed once that is open,
		 * or with its parent (made ahead, the parent may end first). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(0);
		for (;;)
			pause();
	}
	return (pid_t)pid;
}

int hutch_userns_finish(pid_t pid, const char *uid_map, const char *gid_map)
{
	char path[64];
	int fd = -EBADF, r;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	r = hutch_write_knob_at(AT_FDCWD, path, uid_map);
	if (r >= 0) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
		r = hutch_write_knob_at(AT_FDCWD, path, gid_map);
	}
	if (r >= 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	(void)kill(pid, SIGKILL);
	return r < 0 ? r : fd;
}

int hutch_userns_fd(const char *uid_map, const char *gid_map, pid_t *ret_pid)
{
	pid_t pid = hutch_userns_start();

	*ret_pid = 0;
	if (pid < 0)
		return pid;
	*ret_pid = pid;
	return hutch_userns_finish(pid, uid_map, gid_map);
}

int hutch_send_byte_fd(int sock, char b, int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	ssize_t n;

	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

ssize_t hutch_recv_byte_fd(int sock, char *b, int *ret_fd, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} u;
	struct iovec iov = { .iov_base = b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov,
		            .msg_iovlen = 1,
		            .msg_control = u.buf,
		            .msg_controllen = sizeof(u.buf) };
	ssize_t n;

	*ret_fd = -EBADF;
	do
		n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fds[4];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (k < 4 ? k : 4));
		for (size_t i = 0; i < k && i < 4; i++) {
			if (*ret_fd < 0)
				*ret_fd = fds[i];
			else
				close(fds[i]);
		}
	}
	return n;
}
