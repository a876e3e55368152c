/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes of the sandbox's pid namespace, as init sees them in
 * /proc: a snapshot, and a command's whole tree killed (see proctree.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "proctree.h"

static int proc_root = AT_FDCWD;

void hutch_proc_set_root(int procfd)
{
	proc_root = procfd;
}

size_t hutch_proc_scan(struct hutch_proc_entry **ret)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct hutch_proc_entry *v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;
	long self = (long)getpid(); /* 1, but in a pod's pid namespace */

	*ret = NULL;
	if (proc_root == AT_FDCWD) {
		d = opendir("/proc");
	} else {
		int fd = openat(proc_root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && !(d = fdopendir(fd)))
			close(fd);
	}
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[64], buf[512], *p;
		long pid, ppid, pgrp, sess;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = strtol(de->d_name, NULL, 10);
		if (pid <= 1 || pid == self)
			continue;
		snprintf(path, sizeof(path), "%s%ld/stat", proc_root == AT_FDCWD ? "/proc/" : "",
		         pid);
		if (hutch_read_file_at(proc_root, path, buf, sizeof(buf)) <= 0)
			continue;
		/* Fields after the last ')' (comm may hold anything):
		 * state ppid pgrp session */
		p = strrchr(buf, ')');
		if (!p || sscanf(p + 1, " %*c %ld %ld %ld", &ppid, &pgrp, &sess) != 3)
			continue;
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 64;
			struct hutch_proc_entry *q = realloc(v, na * sizeof(*v));
			if (!q)
				break;
			v = q;
			alloc = na;
		}
		v[n++] = (struct hutch_proc_entry){ (pid_t)pid, (pid_t)ppid, (pid_t)pgrp,
			                            (pid_t)sess, false };
	}
	*ret = v;
	return n;
}

/* The tree of root (its session and group too, or only its descendants),
 * killed in up to rounds snapshots. */
static void kill_marked(pid_t root, int sig, bool session, int rounds)
{
	/* Snapshot before the first kill: once the main process dies, init
	 * reaps it and its children's parent link points at init. */
	for (int round = 0; round < rounds; round++) {
		struct hutch_proc_entry *v = NULL;
		size_t n = hutch_proc_scan(&v);
		bool grew = true;
		int killed = 0;

		for (size_t i = 0; i < n; i++)
			v[i].marked =
			        session ? v[i].pid == root || v[i].sid == root || v[i].pgrp == root
			                : v[i].ppid == root;
		while (grew) {
			grew = false;
			for (size_t i = 0; i < n; i++) {
				if (v[i].marked)
					continue;
				for (size_t j = 0; j < n; j++)
					if (v[j].marked && v[j].pid == v[i].ppid) {
						v[i].marked = grew = true;
						break;
					}
			}
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].marked && kill(v[i].pid, sig) == 0)
				killed++;
		free(v);
		if (killed == 0 || sig != SIGKILL)
			break;
	}
}

void hutch_proc_kill_tree(pid_t root, int sig)
{
	kill_marked(root, sig, true, 4);
}

void hutch_proc_kill_descendants(int sig)
{
	/* Init is their subreaper: an orphan is reparented to it, so each
	 * round's snapshot has every survivor below it (and a process being
	 * killed forks nothing more). */
	kill_marked(getpid(), sig, false, 64);
}
