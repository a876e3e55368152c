/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rootfs: assembles a sandbox's root file system. Runs on the child side of
 * clone(), in init, inside the new user + mount + pid namespaces as
 * namespace root, before any command runs.
 */
#ifndef HUTCH_ROOTFS_H
#define HUTCH_ROOTFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bounded.h"
#include "error.h"

/* One mount an OCI bundle asks for, beyond the root (rootfs/bundle.c). */
enum hutch_rootfs_mount_kind {
	HUTCH_ROOTFS_MOUNT_BIND, /* fd: a detached mount the supervisor made (open_tree) */
	HUTCH_ROOTFS_MOUNT_FS,   /* a new file system: fstype (tmpfs, mqueue, sysfs, cgroup2) with
	                            opts */
};
struct hutch_rootfs_mount {
	enum hutch_rootfs_mount_kind kind;
	const char *dest;        /* absolute, inside the root; resolved in it */
	int fd;                  /* BIND: the detached mount, its attributes already set */
	bool is_dir;             /* BIND: the mount point is a directory (else a file) */
	const char *fstype;      /* FS */
	const char *const *opts; /* FS: "size=...", "mode=...", NULL-terminated, or NULL */
	unsigned int attrs;      /* FS: MOUNT_ATTR_* */
	/* Its propagation (MS_SHARED, ...; 0: as it is: a new FS private, a
	 * BIND private or a slave, as the supervisor made it), set once
	 * attached; recursively with propagation_recursive. */
	unsigned long propagation;
	bool propagation_recursive;
};
/* An OCI bundle's root instead of hutch's host-derived one. */
struct hutch_rootfs_bundle {
	int root_fd;   /* detached mount of the bundle's rootfs (idmapped by the supervisor) */
	bool readonly; /* "/" ends read-only (root.readonly) */
	/* MS_SHARED or MS_UNBINDABLE: "/" made so, recursively, after
	 * pivot_root() (linux.rootfsPropagation); else 0 (private or slave:
	 * the supervisor's). */
	unsigned long root_propagation;
	const struct hutch_rootfs_mount *mounts;
	size_t nmounts;
	/* Then, each if it exists: masked (an empty read-only tmpfs over a
	 * directory, /dev/null over anything else) and made read-only (a
	 * read-only bind of itself). NULL-terminated, or NULL. */
	const char *const *masked;
	const char *const *readonly_paths;
};

struct hutch_rootfs_config {
	/* O_PATH|O_DIRECTORY fd of an empty host directory where the new
	 * root's tmpfs is attached before pivot_root, or -1. Only fd-relative
	 * operations are used on it: the host path may not be traversable from
	 * inside the user namespace. It must name a mount of the child's own
	 * mount namespace (e.g. opened by the child, or "." inherited as cwd
	 * through clone()); an fd opened by the supervisor before clone() names
	 * the supervisor's mount, which move_mount() refuses with EINVAL. With
	 * -1, or on that EINVAL, the root is stacked on the child's own "/"
	 * instead, which needs no host directory at all. Not closed. */
	int stage_fd;
	const char *hostname;    /* goes to /etc/hostname and /etc/hosts */
	uint64_t disk_bytes;     /* size= of each writable tmpfs */
	uid_t app_uid;           /* 1000 */
	gid_t app_gid;           /* 1000 */
	const char *resolv_conf; /* full content of /etc/resolv.conf */
	const char *extra_hosts; /* extra /etc/hosts lines, or NULL */
	/* Mount cgroup2 read-only at /sys/fs/cgroup: the caller's cgroup
	 * namespace, whose root is the sandbox's own cgroup (v2 only), so
	 * tools inside size themselves from its limits. */
	bool cgroup2;
	/* v1 and hybrid hosts: the hierarchies the sandbox has a cgroup in,
	 * each by its name under the host's /sys/fs/cgroup ("memory",
	 * "cpu,cpuacct"), NULL-terminated, or NULL: each is mounted read-only
	 * at /sys/fs/cgroup/<name> with the caller's cgroup namespace as its
	 * root (the sandbox's own cgroup there). */
	const char *const *cgroup1;
	/* A detached clone of lxcfs's views (runtime/lxcfs.h: a tree whose
	 * proc/meminfo, ... are binds of lxcfs's files), or -1: they are bound
	 * over /proc's meminfo, cpuinfo, stat, ... so that they show the
	 * sandbox's own sizes. Not closed. */
	int procview_fd;
	/* A detached proc to attach as /proc (an OCI container's nested pid
	 * namespace's: init/pidns.c), or NULL: a new one of the caller's pid
	 * namespace. Not closed. */
	const int *proc_mnt;
	/* The sandbox CA of header bindings (PEM), or NULL: written to
	 * /etc/hutch/sandbox-ca.crt and, with the host's bundle, to
	 * /etc/hutch/ca-certificates.crt, which is mounted over
	 * /etc/ssl/certs/ca-certificates.crt. */
	const char *ca_pem;
	/* NULL: hutch's host-derived root. Else the bundle's root with hutch's
	 * /proc and /dev and the bundle's mounts; no /etc is written and no
	 * writable tmpfs is added (the bundle says what it wants). */
	const struct hutch_rootfs_bundle *bundle;
	/* --image: the image's layers as detached, idmapped, read-only
	 * mounts (bottom first; made by the supervisor, inherited; rootless
	 * see layer_dir), stacked
	 * with overlayfs under a writable layer on a tmpfs of disk_bytes;
	 * n_layers 0: the host-derived root. image names it in messages,
	 * path is the commands' PATH (where python3 must be). */
	const int *layer_fds;
	size_t n_layers;
	/* Rootless (no idmapping): layer_fds are O_PATH fds of directories
	 * of the host's mount namespace, layer_dir/layer_names[i]; NULL:
	 * detached mounts (root). */
	const char *layer_dir;
	const char *const *layer_names;
	/* Rootless: paths (NUL-ended, relative to the image's root) whose
	 * files keep their owners and mode in the store's
	 * user.containers.override_stat (image/owners.c); applied to the
	 * merged root before anything runs (rootfs/owners.c). */
	const char *owners;
	size_t owners_len;
	const char *image;
	const char *path;
	/* -v: detached mounts (idmapped by the supervisor), each attached on
	 * volume_dsts[i] (absolute, checked: runtime/volume.h) once the
	 * writable mounts are there (rootfs/volumes.c); a missing directory is
	 * made, a symlink on the way refused. Not with a bundle. */
	const int *volume_fds;
	const char *const *volume_dsts;
	size_t n_volumes;
	/* Filesystem snapshots (docs/snapshots.md), image roots only: where
	 * to leave read-only directory fds of what the sandbox writes, -1
	 * where none: [HUTCH_ROOTFS_WRITE_UPPER] the overlay's upper
	 * directory, then /workspace, /home/appuser and /tmp when they are
	 * mounts of their own. NULL: none kept. The caller closes them. */
	int *write_fds;
	/* The image is a snapshot: /workspace, /home/appuser and /tmp are in
	 * its layers (and so in the writable layer), not fresh tmpfs. */
	bool writable_in_layer;
	/* The sandbox's disk (runtime/disk.h), or NULL (tmpfs of disk_bytes):
	 * detached mounts of its directories by HUTCH_ROOTFS_WRITE_*
	 * ([UPPER]: one holding upper/ and work/), attached in place of the
	 * writable tmpfs. Not closed. */
	const int *disk_fds;
};

enum {
	HUTCH_ROOTFS_WRITE_UPPER,
	HUTCH_ROOTFS_WRITE_WORKSPACE,
	HUTCH_ROOTFS_WRITE_HOME,
	HUTCH_ROOTFS_WRITE_TMP,
	HUTCH_ROOTFS_WRITE_FDS,
};
/* Where each write fd is in the sandbox ("" the root): "workspace", ... */
extern const char *const hutch_rootfs_write_paths[HUTCH_ROOTFS_WRITE_FDS];

/*
 * Child side. Builds the root (tmpfs /, read-only host system dirs,
 * synthesized /etc, masked /proc, minimal /dev with private devpts, tmpfs
 * /workspace /tmp /home/appuser, and with cgroup2 /sys/fs/cgroup), pivot_root()s into it and
 * detaches the old root. On success "/" is the new (read-only) root, the cwd is "/" and no fd
 * opened here remains. Must run as root of the new user namespace, as PID 1
 * of the new pid namespace, while the host /proc is still fully visible
 * (the kernel refuses a new procfs otherwise). Returns 0, or a negative
 * errno with err naming the step and path; nothing is undone on failure.
 */
int hutch_rootfs_setup_child(const struct hutch_rootfs_config *cfg, struct hutch_err *err);

/*
 * Host side, before the child binds them: asks lxcfs one thing through
 * procview_fd's proc/meminfo (a statx() it must answer: the views' binds
 * themselves ask it nothing, runtime/lxcfs.h), in a child sharing the
 * caller's memory (base/bounded.h), beside the caller from _start()
 * (procview_fd -1: none) to _wait(). Bounded: a lxcfs that does not
 * answer (stopped, hung) within timeout_ms of the start gives -ETIMEDOUT
 * (the caller then leaves the views out: the sandbox's reads of them
 * would wait for ever), the child killed then; 0 otherwise (an error
 * answered is an answer). hutch_bounded_cancel() instead of the wait on
 * a failure meanwhile.
 */
void hutch_rootfs_views_probe_start(struct hutch_bounded *b, int procview_fd, int timeout_ms);
int hutch_rootfs_views_probe_wait(struct hutch_bounded *b);

/* The lxcfs views a sandbox may have, by index: /proc's meminfo, cpuinfo,
 * stat, uptime, loadavg, swaps, diskstats, then
 * /sys/devices/system/cpu/online. */
#define HUTCH_ROOTFS_VIEWS 8
/* View i's path relative to lxcfs's root ("proc/meminfo", ...; NULL past
 * the last): where setup_child() finds it in procview_fd's tree too. */
const char *hutch_rootfs_view_path(size_t i);

/*
 * Host side, for a live sandbox whose lxcfs was replaced
 * (supervisor/procview.c): a detached clone of each view a live lxcfs
 * serves, read-only and private as setup_child() makes them, from
 * lxcfs_root (an O_PATH fd of its mount's root in the caller's mount
 * namespace): ret_fds[i] by index, -1 for one it does not serve. Returns
 * how many, or -errno with err set (none left open).
 */
int hutch_rootfs_views_clone(int lxcfs_root, int ret_fds[HUTCH_ROOTFS_VIEWS],
                             struct hutch_err *err);

/*
 * Inside, after setup_child() (init, in its mount namespace, "/" the
 * sandbox's root): every view's mount detached (a dead lxcfs's answers
 * ENOTCONN), and fds[i] attached in its place where given (fds NULL or
 * fds[i] < 0: the kernel's own file shows again). Needs CAP_SYS_ADMIN in
 * the sandbox's user namespace; umount2() and move_mount() with exactly
 * these flags are on the sandbox's seccomp list for it (runtime/seccomp.c).
 * Returns 0, or the first failure with err set (the others still done).
 * The fds are not closed.
 */
int hutch_rootfs_views_rebind(const int *fds, struct hutch_err *err);

/*
 * Pure: the /etc/passwd and /etc/group contents for the sandbox (caller
 * frees; appuser's shell is /bin/bash here, setup_child() falls back to
 * /bin/sh without bash). NULL with errno EINVAL for an id that is 0, 5,
 * 65534 or above, ENOMEM on allocation failure.
 */
char *hutch_rootfs_passwd(uid_t app_uid, gid_t app_gid);
char *hutch_rootfs_group(gid_t app_gid);

#endif
