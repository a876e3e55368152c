/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container: a sandbox built like every other (same supervisor, init,
 * namespaces, cgroups, seccomp, network), with three differences that an
 * OCI runtime needs (oci/ fills this from a bundle; nothing here knows
 * JSON or the runtime-spec):
 *
 *   - its root is a host directory (the bundle's rootfs) plus the mounts
 *     asked for, not hutch's host-derived root;
 *   - it has one main process, given at creation and started on a
 *     trigger (a process that opens the start FIFO for writing: `oci
 *     start`), with the creator's stdin, stdout and stderr;
 *   - the main process's end is the sandbox's end, and the supervisor
 *     then exits with the main process's wait status (its exit code, or
 *     death by the same signal), so that whoever waits for the supervisor
 *     (a subreaper: containerd's shim, podman's conmon) sees the
 *     container's status.
 *
 * The supervisor reports the container's status in a small JSON file
 * (status_path), rewritten atomically at each change:
 *   {"status": "created"|"running"|"stopped", "pid": supervisor pid,
 *    "sandbox": id, "process_pid": host pid of the main process,
 *    "process_start": its start time in clock ticks since boot,
 *    "exit_status": wait status once stopped}
 */
#ifndef HUTCH_CONTAINER_H
#define HUTCH_CONTAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

#include "cgroup.h"
#include "error.h"
#include "loop.h"
#include "proto.h"
#include "rootfs.h"

struct sup;
struct cmd;

#define HUTCH_CONTAINER_MAX_MOUNTS  64
#define HUTCH_CONTAINER_MAX_RLIMITS 16

struct hutch_container_mount {
	char *dest;   /* absolute path inside the root */
	char *source; /* BIND: absolute host path */
	bool tmpfs;   /* else a bind */
	bool mqueue;  /* a new mqueue, else a bind or tmpfs */
	/* A new sysfs (the sandbox's network namespace's; hutch masks
	 * firmware and powercap under it) or cgroup2 (the sandbox's own
	 * cgroup, v2 hosts), read-only whatever the bundle says. */
	bool sysfs, cgroup2;
	/* Made by pod.c, its fd in mount_fds[]: a sysfs of a CNI network
	 * namespace (sysfs then false), placed as a bind. */
	bool premade;
	bool readonly, recursive;
	char *tmpfs_opts[4]; /* "size=...", "mode=..."; NULL-terminated */
	unsigned int attrs;  /* MOUNT_ATTR_NOSUID | ... */
	/* Propagation asked (MS_SHARED, MS_SLAVE, MS_PRIVATE, MS_UNBINDABLE;
	 * 0: none) and its r-form. Whatever is asked, a bind never propagates
	 * from the container to the host (container.c). */
	unsigned long propagation;
	bool propagation_recursive;
	/* before_go: a bind that could not be idmapped (its errno), said in
	 * the events once ready (hutch_container_ready()). */
	int idmap_errno;
};

struct hutch_container_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t soft, hard;
};

/* Namespaces of a pod a container joins (linux.namespaces[].path; see
 * pod.h), by HUTCH_POD_NS_*. */
enum hutch_pod_ns {
	HUTCH_POD_NS_USER,
	HUTCH_POD_NS_NET,
	HUTCH_POD_NS_IPC,
	HUTCH_POD_NS_UTS,
	HUTCH_POD_NS_PID,
	HUTCH_POD_NS_N,
};

struct hutch_pod_join {
	const char *path[HUTCH_POD_NS_N]; /* as the bundle gives them; NULL: its own */
	unsigned index[HUTCH_POD_NS_N];   /* linux.namespaces[index], for messages */
	bool network_given;               /* run.hutch.network was given */
	/* A cgroup namespace's path: checked to be one, not joined. */
	const char *cgroup_path;
	unsigned cgroup_index;
	/* The supervisor's (pod.c): each namespace opened and checked, the
	 * pod's user namespace in fd[HUTCH_POD_NS_USER] whenever any is
	 * joined; -EBADF: its own. active: something is joined. */
	int fd[HUTCH_POD_NS_N];
	bool joined[HUTCH_POD_NS_N]; /* fd[k] was opened: outlives the fds' close */
	bool active;
	/* fd[HUTCH_POD_NS_NET] is a network namespace owned by the host's
	 * user namespace, not the host's own (the CRI's, wired by CNI):
	 * joined as host root before the user namespace (pod.c). */
	bool cni;
};

/* When a container's hooks run (oci/hooks.c says which phases). */
enum hutch_container_hook_point {
	HUTCH_CONTAINER_HOOKS_CREATE, /* built (rootfs, mounts, namespaces), before "created" */
	HUTCH_CONTAINER_HOOKS_START,  /* the start trigger, before the main process */
};

struct hutch_container {
	/* What to build and run (malloc'ed strings, owned by the caller). */
	char *rootfs; /* absolute host path */
	bool readonly;
	unsigned long root_propagation; /* linux.rootfsPropagation (MS_*), 0: private */
	struct hutch_container_mount mounts[HUTCH_CONTAINER_MAX_MOUNTS];
	size_t nmounts;
	char **argv, **envp; /* NULL-terminated */
	char *cwd;
	uint32_t uid, gid;
	uint32_t groups[HUTCH_SPAWN_MAX_GROUPS]; /* process.user.additionalGids */
	size_t ngroups;
	uint64_t caps[5]; /* the main process's sets (proto.h's SPAWN) */
	struct hutch_container_rlimit rlimits[HUTCH_CONTAINER_MAX_RLIMITS];
	size_t nrlimits;
	char hostname[64]; /* "" = hutch's */
	/* linux.cgroupsPath, relative to where hutch nests sandboxes (cgroup.h
	 * hutch_cgroup_new_at); "" = hutch's own "hutch-<id>" */
	char cgroup_path[HUTCH_CGROUP_PATH_MAX + 1];
	/* The bundle's seccomp profile, stacked on hutch's filter in the main
	 * process (the kernel's intersection); len 0: none. */
	struct sock_fprog seccomp;
	/* linux.maskedPaths, linux.readonlyPaths: NULL-terminated, or NULL */
	char **masked_paths, **readonly_paths;
	/* linux.sysctl, "key=value", namespaced keys only (oci/spec.c checks):
	 * NULL-terminated, or NULL */
	char **sysctls;
	struct hutch_limits limits; /* lower limits than the instance type's; 0 = its own */
	char status_path[4200];     /* the status file (see above) */
	char fifo_path[4200];       /* the start FIFO, made by the caller */
	/* `oci exec`: a SOCK_SEQPACKET socket the supervisor listens on once
	 * started. A client sends one SPAWN (proto.h; uid, gid, flags as
	 * for init; stdin, stdout, stderr as SCM_RIGHTS, none with TTY); the
	 * answer is SPAWNED (with TTY: the pty's master as SCM_RIGHTS) or
	 * FAILED (struct hutch_err), then EXITED with the wait status. A
	 * client that hangs up first has its process killed. */
	char exec_path[4200]; /* any length: hutch_unix_addr() */
	/* process.terminal: the process runs on a pty init opens during
	 * setup; its master is sent to console_socket (a unix socket path,
	 * SCM_RIGHTS, runc's way) before the creator hears "ready". */
	bool terminal;
	char console_socket[4096]; /* any length: hutch_unix_connect() */
	int lock_fd;               /* held (flock) for the supervisor's life, or -1 */
	/* --preserve-fds: the caller's fds 3, 4, ... (close-on-exec copies),
	 * the main process's 3, 4, ...; closed once it is spawned. */
	int preserve_fds[HUTCH_SPAWN_MAX_EXTRA_FDS];
	size_t npreserve;
	struct hutch_pod_join join;
	/* A bundle's hooks, run by the supervisor (synchronously, each
	 * bounded by its own timeout) at each point with init's host pid;
	 * NULL: none, nothing is done. A failure (err says which hook) fails
	 * the create, or stops the container before its process runs. */
	int (*run_hooks)(const struct hutch_container *ct, enum hutch_container_hook_point point,
	                 pid_t init_pid, struct hutch_err *err);
	void *hooks_ctx;

	/* The supervisor's. */
	int stdio[3];
	int fifo_fd, root_fd, pty_master, exec_fd;
	struct hutch_watch w_exec;
	int mount_fds[HUTCH_CONTAINER_MAX_MOUNTS];
	struct hutch_rootfs_mount rmounts[HUTCH_CONTAINER_MAX_MOUNTS];
	struct hutch_rootfs_bundle bundle;
	struct hutch_watch w_fifo;
	struct cmd *proc;
	pid_t host_pid;
	unsigned long long start_time;
	int status;
	bool started, exited;
	bool paused;     /* oci pause: frozen until oci resume (idle sleep leaves it alone) */
	bool handed_off; /* this is the child finishing the teardown (on_proc_done()) */
	bool announced;  /* status.json written: the create succeeded (write_status()) */
};

/* The supervisor's steps, in order (each fills err and returns -errno):
 * the ops of the container's row of the kinds table (kind.h), which a
 * pod member's row (pod.c) shares. */
#define HUTCH_CONTAINER_KIND_OPS                                                              \
	.sizes_inside = false, .api_after_ready = true, .cgroup = hutch_container_cgroup,     \
	.keep_stdio = hutch_container_take_stdio, .prepare = hutch_container_prepare,         \
	.stash_fd = hutch_container_stash, .child_fds = hutch_container_child_fds,            \
	.init_params = hutch_container_init_params, .before_go = hutch_container_before_go,   \
	.take_console = hutch_container_take_console, .api_start = hutch_container_api_start, \
	.ready = hutch_container_ready, .leave = hutch_container_exit
struct hutch_init_params;
struct hutch_kind_setup;
/* linux.cgroupsPath for hutch_cgroup_new_at() (NULL: none given) and the
 * bundle's resources (container-kind.c). */
void hutch_container_cgroup(const struct sup *s, const char **ret_path,
                            const struct hutch_resources **ret_res);
/* In the new supervisor, before its stdio goes to /dev/null: keep them. */
int hutch_container_take_stdio(struct sup *s);
/* Before clone(): lim lowered to the bundle's limits; the rootfs and
 * bind mounts as detached mounts. */
int hutch_container_prepare(struct hutch_kind_setup *k, struct hutch_limits *lim,
                            struct hutch_err *err);
/* After init's id maps: idmap the rootfs onto the sandbox's ids, set
 * init's rlimits (the main process inherits them). */
int hutch_container_before_go(struct hutch_kind_setup *k, pid_t init, struct hutch_err *err);
/* Child side of clone(), init: the lowest fd number above every one
 * init places its fds on (3 up to past the mounts'), where they wait
 * to be placed; low, so a low RLIMIT_NOFILE is no refusal. */
int hutch_container_stash_fd(const struct hutch_container *ct);
/* The rootfs and mount fds moved to first, first+1, ...; returns the
 * next free fd number. first < 0: out of the way, to the stash. */
int hutch_container_child_fds(struct hutch_kind_setup *k, int first);
/* The same for the kinds table (kind.h). */
int hutch_container_stash(const struct hutch_kind_setup *k);
/* Child side: init's parameters for the container's root and process. */
void hutch_container_init_params(struct hutch_kind_setup *k, struct hutch_init_params *p);
/* Setup: the terminal's master init sent (false: none expected). */
bool hutch_container_take_console(struct hutch_kind_setup *k, int fd);
/* The sandbox is ready: its create hooks, status "created", wait for the
 * start FIFO. */
int hutch_container_ready(struct sup *s, struct hutch_err *err);
/* The API's socket: only listening until ready, unless an executor port
 * is served from the start. */
int hutch_container_api_start(struct sup *s, struct hutch_err *err);
/* The loop is over: exit with the main process's status (never returns). */
__attribute__((noreturn)) void hutch_container_exit(struct sup *s);
/* A terminal's master to a console socket (a unix socket path) as runc
 * sends it: "/dev/pts/N" as data, the fd as SCM_RIGHTS, the fd made
 * blocking. The caller keeps (and closes) its master. 0 or -errno. */
int hutch_console_send(const char *path, int master);

#endif
