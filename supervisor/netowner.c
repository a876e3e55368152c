/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which process inside a sandbox made a TCP connection (netlog.h,
 * hutch_netowner_find()): asked only when several commands run at once,
 * where the time of a connection cannot tell them apart.
 *
 * Read from the host, never inside the sandbox: given the socket's inode
 * (sock_diag of the sandbox's netns by the connection's exact addresses,
 * hutch_egress_sock_inode()), init's descendants by /proc/PID/task/TID/
 * children (a breadth-first walk, bounded), each one's /proc/PID/fd links
 * ("socket:[INODE]", the kernel's text), and the pid and session of the
 * holder's ancestor among init's children, up its parents (PPid) from
 * their status (NSpid, NSsid: their last field is the sandbox's view).
 * The holders found last are looked at first (a client that connects again
 * is found by one look at its fds): a hint only orders the search, the
 * fds and the parents are read each time, so the answer stays exact. The supervisor may read them
 * (root, or, rootless, the owner of the sandbox's user namespace, which
 * has CAP_SYS_PTRACE in it); nothing read here is a path that resolves in
 * the sandbox. The socket exists from the client's socket() and is in its
 * fd table by the time the proxy accepts, so a client that still holds it
 * is found; one that closed it at once is not (-ENOENT: by time then).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "netlog.h"

#define WALK_MAX 4096 /* processes looked at, at most */

/* Does pid hold socket:[inode]? */
static bool holds(pid_t pid, const char *link)
{
	char path[64], buf[64];
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	size_t want = strlen(link);

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while ((de = readdir(d))) {
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		n = readlinkat(dirfd(d), de->d_name, buf, sizeof(buf));
		if (n == (ssize_t)want && !memcmp(buf, link, want))
			return true;
	}
	return false;
}

/* Append pid's children (of every thread) to the walk. */
static void add_children(pid_t pid, pid_t *pids, size_t *n)
{
	char path[300], buf[4096];
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && *n < WALK_MAX) {
		_cleanup_close_ int fd = -EBADF;
		ssize_t len;
		char *p, *end;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/children", de->d_name);
		fd = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		for (p = buf; *n < WALK_MAX; p = end) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			pids[(*n)++] = (pid_t)v;
		}
	}
}

/* From pid's status: its parent (the host's view) and the last fields of
 * NSpid and NSsid (the sandbox's view). One read: the file is ~1.5 KiB. */
struct pstatus {
	pid_t ppid, nspid, nssid;
};

static pid_t last_field(const char *buf, const char *key)
{
	const char *line = strstr(buf, key), *end, *last;

	if (!line)
		return 0;
	end = strchrnul(line + 1, '\n'); /* key starts with the newline before it */
	last = memrchr(line, '\t', (size_t)(end - line));
	return last ? (pid_t)strtol(last + 1, NULL, 10) : 0;
}

static int read_status(pid_t pid, struct pstatus *ret)
{
	char path[64], buf[4096];
	_cleanup_close_ int fd = -EBADF;
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	if (len <= 0)
		return len < 0 ? -errno : -ENOENT;
	buf[len] = '\0';
	ret->ppid = last_field(buf, "\nPPid:");
	ret->nspid = last_field(buf, "\nNSpid:");
	ret->nssid = last_field(buf, "\nNSsid:");
	return ret->ppid > 0 && ret->nspid > 0 ? 0 : -ENOENT;
}

/* holder's pid, and its ancestor among init's children (pid, session), up
 * its parents: -ENOENT when it is not init's descendant (or has gone). */
static int top_of(pid_t init_pid, pid_t holder, pid_t *ret_pid, pid_t *ret_top, pid_t *ret_top_sid)
{
	struct pstatus st;
	pid_t cur = holder;

	for (int depth = 0; depth < WALK_MAX; depth++) {
		if (read_status(cur, &st) < 0)
			return -ENOENT;
		if (cur == holder)
			*ret_pid = st.nspid;
		if (st.ppid == init_pid) {
			*ret_top = st.nspid;
			*ret_top_sid = st.nssid;
			return 0;
		}
		if (st.ppid <= 1)
			return -ENOENT;
		cur = st.ppid;
	}
	return -ENOENT;
}

int hutch_netowner_find(pid_t init_pid, uint32_t inode, struct hutch_netowner_hints *hints,
                        pid_t *ret_pid, pid_t *ret_top, pid_t *ret_top_sid)
{
	_cleanup_free_ pid_t *pids = NULL;
	char link[48];
	size_t n = 0;

	if (init_pid <= 0 || !inode)
		return -ENOENT;
	snprintf(link, sizeof(link), "socket:[%" PRIu32 "]", inode);
	/* The processes that held the last ones first: a client that
	 * connects again is found by one look at its fds. */
	for (size_t i = 0; i < HUTCH_NETOWNER_HINTS; i++)
		if (hints->pid[i] > 0 && holds(hints->pid[i], link) &&
		    top_of(init_pid, hints->pid[i], ret_pid, ret_top, ret_top_sid) == 0)
			return 0;
	pids = calloc(WALK_MAX, sizeof(*pids));
	if (!pids)
		return -ENOMEM;
	add_children(init_pid, pids, &n);
	for (size_t i = 0; i < n; i++) {
		if (!holds(pids[i], link)) {
			add_children(pids[i], pids, &n);
			continue;
		}
		if (top_of(init_pid, pids[i], ret_pid, ret_top, ret_top_sid) < 0)
			return -ENOENT;
		hints->pid[hints->next++ % HUTCH_NETOWNER_HINTS] = pids[i];
		return 0;
	}
	return -ENOENT;
}
