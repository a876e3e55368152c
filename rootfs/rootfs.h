/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rootfs: assembles a sandbox's root file system. Runs on the child side of
 * clone(), in init, inside the new user + mount + pid namespaces as
 * namespace root, before any command runs.
 */
#ifndef HUTCH_ROOTFS_H
#define HUTCH_ROOTFS_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct hutch_rootfs_config {
	/* O_PATH|O_DIRECTORY fd of an empty host directory (opened by the
	 * supervisor) where the new root's tmpfs is attached before pivot_root.
	 * Only fd-relative operations are used on it: the host path may not be
	 * traversable from inside the user namespace. */
	int stage_fd;
	const char *hostname;   /* goes to /etc/hostname and /etc/hosts */
	uint64_t disk_bytes;    /* size= of each writable tmpfs */
	uid_t app_uid;          /* 1000 */
	gid_t app_gid;          /* 1000 */
	const char *resolv_conf; /* full content of /etc/resolv.conf */
	const char *extra_hosts; /* extra /etc/hosts lines, or NULL */
};

/*
 * Child side. Builds the root (tmpfs /, read-only host system dirs,
 * synthesized /etc, masked /proc, minimal /dev with private devpts, tmpfs
 * /workspace /tmp /home/appuser), pivot_root()s into it and detaches the old
 * root. On success "/" is the new root and the cwd is "/".
 */
int hutch_rootfs_setup_child(const struct hutch_rootfs_config *cfg, struct hutch_err *err);

/* Pure: the /etc/passwd and /etc/group contents for the sandbox (caller frees). */
char *hutch_rootfs_passwd(uid_t app_uid, gid_t app_gid);
char *hutch_rootfs_group(gid_t app_gid);

#endif
