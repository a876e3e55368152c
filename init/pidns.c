/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's process as PID 1 of its pid namespace (see pidns.h;
 * docs/history.md, "The container's process as PID 1"). init stays
 * PID 1 of the sandbox's namespace; a namespace nested in it holds the
 * container's processes, its PID 1 the container's main process.
 *
 * At create, before the root is built: init keeps a detached proc of its
 * own namespace (proctree.c reads it: "/proc" will be the inner one's),
 * unshare()s CLONE_NEWPID (only where its children are born changes) and
 * forks the inner PID 1. That child makes a proc of the inner namespace
 * (proc takes the namespace of the process that makes it) and passes it
 * up, which init attaches as the root's /proc with the usual masks
 * (rootfs/proc.c); then the child closes every fd but its socket and
 * v1's commands' cgroup, restricts itself as init does (non-dumpable,
 * the container's capability bounds, the sandbox's seccomp filter) and
 * waits. At start init forwards it the main process's SPAWN as it came
 * (body and fds), and it runs launch.c's command child steps itself and
 * execs. Every later command init clones is born in the inner namespace
 * too, beside it, as runc's exec'd processes are; once the main process
 * has ended the kernel ends the inner namespace.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caps.h"
#include "cleanup.h"
#include "fdutil.h"
#include "pidns.h"
#include "proctree.h"
#include "proto.h"
#include "seccomp-filter.h"
#include "syscalls.h"

/* A detached proc of the calling process's pid namespace, or -errno. */
static int proc_new(void)
{
	_cleanup_close_ int fs = sys_fsopen("proc", FSOPEN_CLOEXEC);
	int mnt;

	if (fs < 0)
		return -errno;
	(void)sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", "proc", 0);
	if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
	                  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	return mnt < 0 ? -errno : mnt;
}

/* Close every fd above 2 but a and b (either may be negative). */
static void close_all_but(int a, int b)
{
	unsigned int from = 3;
	int keep[2] = { a < b ? a : b, a < b ? b : a };

	for (int i = 0; i < 2; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned int)keep[i] > from)
			(void)sys_close_range(from, (unsigned int)keep[i] - 1, 0);
		from = (unsigned int)keep[i] + 1;
	}
	(void)sys_close_range(from, ~0U, 0);
}

/* The inner PID 1: its proc up, restricted, then the main process's
 * request, which it runs (never returns). */
static __attribute__((noreturn)) void inner_main(int sock, const struct hutch_init_spawner *sp,
                                                 const struct sock_fprog *seccomp)
{
	static char body[HUTCH_PROTO_MAX];
	static struct hutch_spawn_req req;
	struct hutch_msg_hdr hdr;
	int fds[HUTCH_PROTO_FDS_MAX], proc;
	size_t nfds = HUTCH_PROTO_FDS_MAX;
	ssize_t n;

	close_all_but(sock, sp->join_fd);
	proc = proc_new();
	if (proc < 0 || hutch_proto_send(sock, HUTCH_MSG_READY, 0, NULL, 0, &proc, 1) < 0)
		_exit(1);
	close(proc);
	if (prctl(PR_SET_DUMPABLE, 0) < 0 || hutch_caps_restrict_container() < 0 ||
	    hutch_seccomp_load(seccomp) < 0)
		_exit(1);
	n = hutch_proto_recv(sock, &hdr, body, sizeof(body), fds, &nfds);
	/* init went (the container deleted before start): so does the
	 * namespace with us. */
	if (n <= 0 || hdr.type != HUTCH_MSG_SPAWN || nfds < 3 ||
	    hutch_proto_spawn_decode(body, (size_t)n, &req) < 0)
		_exit(1);
	close(sock);
	/* Forked before the root was built: pivot_root() moved our root (it
	 * was init's), not a working directory of the host's init had. */
	if (chdir("/") < 0)
		_exit(126);
	hutch_init_exec_request(sp, &req, fds, fds + 3, nfds - 3);
}

int hutch_init_nest_pidns(struct hutch_init_nest *nest, const struct hutch_init_spawner *sp,
                          const struct sock_fprog *seccomp, struct hutch_err *err)
{
	_cleanup_close_ int outer = -EBADF;
	struct hutch_msg_hdr hdr = { 0 };
	int sv[2], proc = -EBADF, r;
	size_t nfds = 1;
	char b;
	pid_t pid;

	outer = proc_new();
	if (outer < 0)
		return hutch_err_set_errno(err, outer,
		                           "mount a proc of the sandbox's pid namespace");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "socketpair");
	if (unshare(CLONE_NEWPID) < 0) {
		r = -errno;
		hutch_close_many(sv, 2);
		return hutch_err_set_errno(err, r, "make the container's pid namespace");
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		inner_main(sv[1], sp, seccomp);
	}
	r = -errno;
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return hutch_err_set_errno(err, r, "start the container's PID 1");
	}
	nest->pid = pid;
	nest->sock = sv[0];
	if (hutch_proto_recv(sv[0], &hdr, &b, sizeof(b), &proc, &nfds) < 0 ||
	    hdr.type != HUTCH_MSG_READY || nfds != 1)
		return hutch_err_set(
		        err, -EPROTO,
		        "mount a proc of the container's pid namespace: its PID 1 failed");
	nest->proc_fd = proc;
	hutch_proc_set_root(TAKE_FD(outer));
	return 0;
}

pid_t hutch_init_nest_start(struct hutch_init_nest *nest, uint64_t id, const char *body, size_t len,
                            const int stdio[3], const int *extra, size_t nextra)
{
	int fds[HUTCH_PROTO_FDS_MAX];
	int r;

	if (nest->sock < 0 || 3 + nextra > HUTCH_PROTO_FDS_MAX)
		return -ESRCH;
	memcpy(fds, stdio, 3 * sizeof(int));
	if (nextra)
		memcpy(fds + 3, extra, nextra * sizeof(int));
	r = hutch_proto_send(nest->sock, HUTCH_MSG_SPAWN, id, body, len, fds, 3 + nextra);
	closep(&nest->sock);
	return r < 0 ? r : nest->pid;
}
