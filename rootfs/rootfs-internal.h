/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private interface of the rootfs library: the mount helpers every step
 * uses (mount.c), the steps themselves (etc.c, proc.c, dev.c, called in
 * order by rootfs.c), and the pure tables and renderers, exposed here so
 * the unit test can check exactly what gets mounted and written.
 *
 * All helpers return >= 0 (an fd or 0) on success and a negative errno on
 * failure, with err filled with a message naming the step and the path as
 * it will appear inside the sandbox. Every fd they return is O_CLOEXEC and
 * owned by the caller.
 */
#ifndef HUTCH_ROOTFS_INTERNAL_H
#define HUTCH_ROOTFS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "rootfs.h"
#include "syscalls.h"

/* Mount attributes of the read-only host binds (/usr, /lib*, /etc files). */
#define ROOTFS_ATTR_HOST_RO (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* Where the pieces come from and go to during setup_child(). */
struct rootfs_ctx {
	const struct hutch_rootfs_config *cfg;
	int host_root; /* O_PATH "/" of the host tree (our mount ns copy) */
	int root;      /* the new root tmpfs mount */
	int empty;     /* the first empty mask attached (rootfs_mask_dir()), or -1 */
};

/* ---- mount.c: fd-based mount helpers ---- */

/*
 * New detached mount of fstype. opts is a NULL-terminated list of "key=value"
 * strings or bare "flag" names; attrs are MOUNT_ATTR_* for fsmount(). where
 * is the in-sandbox path, for messages only.
 */
int rootfs_fs_new(const char *fstype, const char *const *opts, unsigned int attrs,
                  const char *where, struct hutch_err *err);
/* Detached recursive clone of dirfd/path (not following a final symlink), with attrs set. */
int rootfs_clone_new(int dirfd, const char *path, unsigned int attrs, const char *where,
                     struct hutch_err *err);
/*
 * Open a mount point once, as O_PATH, with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS). Returns -ENOENT without touching err when
 * missing_ok is set and the target does not exist.
 */
int rootfs_open_target(int dirfd, const char *path, bool missing_ok, const char *where,
                       struct hutch_err *err);
/* Attach the detached mount mntfd over the opened target; what names it in messages. */
int rootfs_attach_fd(int mntfd, int target, const char *what, const char *where,
                     struct hutch_err *err);
/* rootfs_open_target() + rootfs_attach_fd(). */
int rootfs_attach(int mntfd, int dirfd, const char *path, const char *what, const char *where,
                  struct hutch_err *err);
/* rootfs_fs_new() + rootfs_attach() on an existing directory; returns the mount fd. */
int rootfs_mount_fs(int dirfd, const char *path, const char *fstype, const char *const *opts,
                    unsigned int attrs, const char *where, struct hutch_err *err);
/* rootfs_clone_new() of src + rootfs_attach() on dst. */
int rootfs_bind(int src_dirfd, const char *src, int dst_dirfd, const char *dst, unsigned int attrs,
                const char *where, struct hutch_err *err);
/*
 * rootfs_bind() onto a mount point init has just made in a file system of
 * its own (the new root's or /dev's fresh tmpfs, which nothing else can
 * write): name is one path component, attached by name with move_mount(),
 * which never follows a symlink in its last component without
 * MOVE_MOUNT_T_SYMLINKS, instead of opening it first (two syscalls fewer
 * per bind; /etc and /dev have 23 of them). Anything else goes through
 * rootfs_bind().
 */
int rootfs_bind_new(int src_dirfd, const char *src, int dst_dirfd, const char *name,
                    unsigned int attrs, const char *where, struct hutch_err *err);
/* Create the mount point dirfd/path as a directory (mode) or an empty file. */
int rootfs_mkdir(int dirfd, const char *path, mode_t mode, const char *where,
                 struct hutch_err *err);
int rootfs_mkfile(int dirfd, const char *path, const char *where, struct hutch_err *err);
/* Copy the symlink src_dirfd/name to dst_dirfd/name verbatim. */
int rootfs_copy_symlink(int src_dirfd, int dst_dirfd, const char *name, const char *where,
                        struct hutch_err *err);

/* ---- rootfs.c: host system directories ---- */

/* The host top-level directories shared read-only ("usr", "bin", ...), NULL-terminated. */
extern const char *const rootfs_system_dirs[];
/* Host-only directories below them, hidden by an empty tmpfs ("usr/local"). */
extern const char *const rootfs_host_only_dirs[];

/*
 * Cover the directory target (O_PATH) with an empty read-only tmpfs. The
 * first call makes it; later ones clone that mount (one superblock for
 * every mask, a third of the cost of a new tmpfs each).
 */
int rootfs_mask_dir(struct rootfs_ctx *ctx, int target, const char *where, struct hutch_err *err);

/* The final step of either root: pivot_root() into ctx->root, detach the
 * old root, "/" read-only when readonly. */
int rootfs_enter_root(struct rootfs_ctx *ctx, bool readonly, struct hutch_err *err);
/* Make every mount of our namespace private (the first step of either root). */
int rootfs_make_private(struct rootfs_ctx *ctx, struct hutch_err *err);

/* ---- bundle.c: an OCI bundle's root ---- */

int rootfs_setup_bundle(struct rootfs_ctx *ctx, struct hutch_err *err);

/* ---- etc.c: the synthesized /etc ---- */

/* True if host /etc/<name> is shared read-only with the sandbox. */
bool rootfs_etc_is_shared(const char *name);
/* True if id can be appuser's uid or gid: mapped, and clear of root, tty and nobody. */
bool rootfs_app_id_is_valid(unsigned int id);
/* True if name is a valid host name for /etc/hostname and /etc/hosts. */
bool rootfs_hostname_is_valid(const char *name);
/* /etc/passwd with the given login shell for appuser; NULL + errno on failure. */
char *rootfs_passwd_render(uid_t app_uid, gid_t app_gid, const char *shell);
/* /etc/hosts; extra (may be NULL) is appended, newline-terminated. */
char *rootfs_hosts_render(const char *hostname, const char *extra);
extern const char rootfs_nsswitch_conf[];
int rootfs_setup_etc(struct rootfs_ctx *ctx, struct hutch_err *err);
/* Replace dir/name (shown as where/name) with content: what was there (a
 * file, a symlink, a FIFO of an image's) is unlinked, never opened. */
int rootfs_replace_file(int dir, const char *name, const char *content, const char *where,
                        struct hutch_err *err);
/* The largest CA bundle read from a root. */
#define ROOTFS_CA_BUNDLE_MAX (16u << 20)
/*
 * Header bindings' CA files under etc (an O_PATH fd of the root's /etc),
 * whatever the root: /etc/hutch (a directory; anything else the root had
 * there is removed, never followed) with sandbox-ca.crt (the CA:
 * NODE_EXTRA_CA_CERTS) and ca-certificates.crt (the root's own bundle, n
 * bytes, may be none, then the CA: SSL_CERT_FILE & co., runtime/cmdenv.c).
 * *ret_all (may be NULL): that whole bundle.
 */
int rootfs_ca_files(int etc, const char *bundle, size_t n, const char *ca_pem, char **ret_all,
                    struct hutch_err *err);

/* appuser's shell in the root: /bin/bash when it has one, else /bin/sh. */
const char *rootfs_pick_shell(int root);
/*
 * An image's /etc/passwd (image: its text, or NULL for none) with appuser
 * added: the image's entries are kept except any named appuser or with
 * appuser's uid; a root entry is added when the image has none. The same
 * for /etc/group and appuser's gid. NULL + errno on failure. Pure.
 */
char *rootfs_passwd_merge(const char *image, uid_t app_uid, gid_t app_gid, const char *shell);
char *rootfs_group_merge(const char *image, gid_t app_gid);

/* ---- overlay.c: the root of --image ---- */

#define HUTCH_ROOTFS_LAYERS_MAX 128
/* The overlay of cfg's layers under a writable tmpfs layer, stacked on
 * "/" as ctx->root. */
int rootfs_image_root(struct rootfs_ctx *ctx, struct hutch_err *err);
/* The image's /etc: passwd and group merged with appuser; hosts,
 * hostname, resolv.conf ours; nsswitch.conf when it has none; header
 * bindings' CA files (rootfs_ca_files()). */
int rootfs_image_etc(struct rootfs_ctx *ctx, struct hutch_err *err);
/* Rootless: the owners (and modes) the user's store keeps in
 * user.containers.override_stat, for the NUL-ended paths of list, applied
 * beneath root (the merged overlay) by fd (rootfs/owners.c). */
int rootfs_image_owners(int root, const char *list, size_t len, struct hutch_err *err);
/* After pivot_root: /bin/sh and python3 on cfg->path, or -ENOEXEC naming
 * what is missing. */
int rootfs_image_check(const struct hutch_rootfs_config *cfg, struct hutch_err *err);

/* ---- volumes.c: -v ---- */

/* Attach cfg's volumes on their paths in ctx->root (before pivot_root). */
int rootfs_setup_volumes(struct rootfs_ctx *ctx, struct hutch_err *err);

/* ---- proc.c: /proc and its masks ---- */

enum rootfs_proc_action {
	ROOTFS_PROC_MASK_FILE, /* /dev/null bound over it */
	ROOTFS_PROC_MASK_DIR,  /* an empty read-only tmpfs over it */
	ROOTFS_PROC_READONLY,  /* a read-only bind of itself */
};
struct rootfs_proc_entry {
	char name[16]; /* relative to /proc; in the row: no relocation at start */
	enum rootfs_proc_action action;
};
extern const struct rootfs_proc_entry rootfs_proc_entries[];
extern const size_t rootfs_proc_entries_len;
int rootfs_setup_proc(struct rootfs_ctx *ctx, struct hutch_err *err);

/* ---- dev.c: minimal /dev ---- */

/* Host device nodes bound into /dev, NULL-terminated. */
extern const char *const rootfs_dev_nodes[];
int rootfs_setup_dev(struct rootfs_ctx *ctx, struct hutch_err *err);

#endif
