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
 * holder's ancestor among init's children from its status (NSpid, NSsid:
 * their last field is the sandbox's view). The supervisor may read them
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
static void add_children(pid_t pid, int parent, pid_t *pids, int *parents, size_t *n)
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
			pids[*n] = (pid_t)v;
			parents[(*n)++] = parent;
		}
	}
}

/* The last field of a "NSpid:" or "NSsid:" line of pid's status. */
static pid_t ns_field(pid_t pid, const char *key)
{
	char path[64], line[256];
	_cleanup_fclose_ FILE *f = NULL;
	size_t klen = strlen(key);

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *last;

		if (strncmp(line, key, klen) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		last = strrchr(line, '\t');
		return last ? (pid_t)strtol(last + 1, NULL, 10) : 0;
	}
	return 0;
}

int hutch_netowner_find(pid_t init_pid, uint32_t inode, pid_t *ret_pid, pid_t *ret_top,
                        pid_t *ret_top_sid)
{
	_cleanup_free_ pid_t *pids = calloc(WALK_MAX, sizeof(*pids));
	_cleanup_free_ int *parents = calloc(WALK_MAX, sizeof(*parents));
	char link[48];
	size_t n = 0;

	if (!pids || !parents)
		return -ENOMEM;
	if (init_pid <= 0 || !inode)
		return -ENOENT;
	snprintf(link, sizeof(link), "socket:[%" PRIu32 "]", inode);
	add_children(init_pid, -1, pids, parents, &n);
	for (size_t i = 0; i < n; i++) {
		int top = (int)i;

		if (!holds(pids[i], link)) {
			add_children(pids[i], (int)i, pids, parents, &n);
			continue;
		}
		while (parents[top] >= 0)
			top = parents[top];
		*ret_pid = ns_field(pids[i], "NSpid:");
		*ret_top = ns_field(pids[top], "NSpid:");
		*ret_top_sid = ns_field(pids[top], "NSsid:");
		return 0;
	}
	return -ENOENT;
}
