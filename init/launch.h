/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How init starts a command, and the real syscalls of its request
 * handling. The handling (init.c) makes every syscall that needs pid 1 of
 * a sandbox through a struct hutch_init_sys (as youki's syscall trait):
 * hutch_init_sys_linux here in init, a unit test's fakes elsewhere
 * (tests/unit/test_init.c, through init.h's hutch_init_server_*()).
 */
#ifndef HUTCH_INIT_LAUNCH_H
#define HUTCH_INIT_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

struct hutch_spawn_req;
struct hutch_proc_entry;
struct hutch_changes;

/* The syscalls of init's request handling; each op gets the ud the
 * handling was given. */
struct hutch_init_sys {
	/* Start the command on stdio fds[3] with the extra fds as its 3, 4,
	 * ...: its pid, or -errno. */
	pid_t (*spawn)(void *ud, const struct hutch_spawn_req *req, const int fds[3],
	               const int *extra, size_t nextra);
	/* waitpid(-1, status, WNOHANG) */
	pid_t (*wait_any)(void *ud, int *status);
	void (*kill_tree)(void *ud, pid_t root, int sig);             /* proctree.h */
	size_t (*proc_scan)(void *ud, struct hutch_proc_entry **ret); /* proctree.h */
	int (*pty_open)(void *ud, uint32_t winsize, uid_t owner, int *ret_master,
	                int *ret_slave); /* pty.h */
	/* The /proc views re-bound: fds by view index (-1: none), or NULL:
	 * only detached (rootfs.h: hutch_rootfs_views_rebind()). 0 or -errno. */
	int (*views)(void *ud, const int *fds);
};

/* What every command's start shares, set up once by init. */
struct hutch_init_spawner {
	char *child_stack; /* its stack: a few pages above a guard page */
	int oom_fd;        /* init's /proc/self/oom_score_adj, or -EBADF */
	char oom_orig[16]; /* its value at start */
	int join_fd;       /* v1: the commands' freezer cgroup's "tasks", or -1 */
	const struct sock_fprog *extra_seccomp; /* a container's profile, or NULL */
	bool container; /* commands get the capabilities they ask (caps.h) */
	/* init was born in a pod's pid namespace (init.c), where the pod's
	 * processes could attach to a dumpable init: no oom_score_adj file */
	bool shared_pid;
	/* init's change lists (changes.h), or NULL: the builtin "diff" reads
	 * its forked copy. */
	const struct hutch_changes *changes;
};

/* Once, while init is still dumpable: the stack, oom_fd. 0 or -errno. */
int hutch_init_spawner_prepare(struct hutch_init_spawner *s);

/* The command child's steps in the calling process, then execve() (or
 * _exit() with the child's status): the container's main process as PID 1
 * of its pid namespace (pidns.c). */
__attribute__((noreturn)) void hutch_init_exec_request(const struct hutch_init_spawner *s,
                                                       const struct hutch_spawn_req *req,
                                                       const int fds[3], const int *extra,
                                                       size_t nextra);

/* The real ones; ud: the struct hutch_init_spawner. */
extern const struct hutch_init_sys hutch_init_sys_linux;

#endif
