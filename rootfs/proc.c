/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's /proc: a new procfs instance for the sandbox's pid
 * namespace, with the kernel's sensitive files masked the way crun and
 * Docker do it: files get /dev/null bound over them, directories an empty
 * read-only tmpfs, and the knobs that stay readable become read-only binds
 * of themselves. There is no /sys at all.
 *
 * The kernel lets a user namespace mount procfs only while a fully visible
 * procfs exists in its mount namespace (mount_too_revealing()), so this
 * runs before the host root, with its /proc, is detached.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "cleanup.h"
#include "rootfs-internal.h"

/* Paths relative to /proc; missing ones are skipped (they depend on the kernel config). */
const struct rootfs_proc_entry rootfs_proc_entries[] = {
	{ "acpi", ROOTFS_PROC_MASK_DIR },         { "kcore", ROOTFS_PROC_MASK_FILE },
	{ "keys", ROOTFS_PROC_MASK_FILE },        { "latency_stats", ROOTFS_PROC_MASK_FILE },
	{ "timer_list", ROOTFS_PROC_MASK_FILE },  { "timer_stats", ROOTFS_PROC_MASK_FILE },
	{ "sched_debug", ROOTFS_PROC_MASK_FILE }, { "scsi", ROOTFS_PROC_MASK_DIR },
	{ "asound", ROOTFS_PROC_READONLY },       { "bus", ROOTFS_PROC_READONLY },
	{ "fs", ROOTFS_PROC_READONLY },           { "irq", ROOTFS_PROC_READONLY },
	{ "sys", ROOTFS_PROC_READONLY },          { "sysrq-trigger", ROOTFS_PROC_READONLY },
};
const size_t rootfs_proc_entries_len = ELEMENTSOF(rootfs_proc_entries);

#define PROC_ATTRS (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

/* A detached mount to put over /proc/<e->name>. */
static int mask_source(struct rootfs_ctx *ctx, const struct rootfs_proc_entry *e, int target,
                       const char *where, struct hutch_err *err)
{
	switch (e->action) {
	case ROOTFS_PROC_MASK_FILE:
		/*
		 * The host's /dev/null, read-only; nodev would turn reads
		 * into EACCES instead of the empty file callers expect.
		 */
		return rootfs_clone_new(ctx->host_root, "dev/null",
		                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
		                        where, err);
	case ROOTFS_PROC_MASK_DIR:
		break; /* mask_one() calls rootfs_mask_dir() */
	case ROOTFS_PROC_READONLY:
		return rootfs_clone_new(target, "", MOUNT_ATTR_RDONLY | PROC_ATTRS, where, err);
	}
	return hutch_err_set(err, -EINVAL, "unknown /proc action for '%s'", where);
}

static int mask_one(struct rootfs_ctx *ctx, int proc, const struct rootfs_proc_entry *e,
                    struct hutch_err *err)
{
	_cleanup_close_ int target = -EBADF, src = -EBADF;
	char where[64];

	snprintf(where, sizeof(where), "/proc/%s", e->name);
	/* Open the target first: most absent entries then cost one syscall. */
	target = rootfs_open_target(proc, e->name, true, where, err);
	if (target == -ENOENT)
		return 0;
	if (target < 0)
		return target;
	if (e->action == ROOTFS_PROC_MASK_DIR)
		return rootfs_mask_dir(ctx, target, where, err);
	src = mask_source(ctx, e, target, where, err);
	if (src < 0)
		return src;
	return rootfs_attach_fd(src, target, e->action == ROOTFS_PROC_READONLY ? "bind" : "mask",
	                        where, err);
}

int rootfs_setup_proc(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	_cleanup_close_ int proc = -EBADF;
	int r;

	r = rootfs_mkdir(ctx->root, "proc", 0555, "/proc", err);
	if (r < 0)
		return r;
	/* procfs picks the pid namespace of the caller: we are its PID 1. */
	proc = rootfs_mount_fs(ctx->root, "proc", "proc", NULL, PROC_ATTRS, "/proc", err);
	if (proc < 0)
		return proc;
	for (size_t i = 0; i < rootfs_proc_entries_len; i++) {
		r = mask_one(ctx, proc, &rootfs_proc_entries[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}
