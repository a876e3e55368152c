/* SPDX-License-Identifier: Apache-2.0 */
/*
 * -v in the supervisor (see volumes.h). A host directory is opened with
 * openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) from the absolute
 * path given (the parser refused "." and ".." parts), so a symlink
 * anywhere in it is refused rather than followed, and the directory is
 * what the path names when the sandbox is made, never re-resolved. It is
 * cloned by that fd (open_tree, not recursive: mounts below it stay out)
 * and idmapped through a throw-away user namespace that maps the
 * directory's owner onto appuser's host ids: the owner's files are
 * appuser's inside, what appuser writes is the owner's on the host, and
 * every other id shows as nobody and cannot be written as. Read-only
 * unless rw; always nosuid and nodev. Idmapping needs CAP_SYS_ADMIN over
 * the file system, which init never has: made here, init inherits the fds
 * (as the image's layers: image/layers.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "fdutil.h"
#include "image.h"
#include "init.h"
#include "rootfs.h"
#include "supervisor.h"
#include "syscalls.h"
#include "volstore.h"
#include "volumes.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

/* A few file systems by their statfs magic, for the refusal's message. */
static const char *fs_name(int dir)
{
	static const struct {
		unsigned long magic;
		char name[12]; /* in the row: no relocation at start (issue 31) */
	} known[] = {
		{ 0xEF53, "ext4" },      { 0x01021994, "tmpfs" },     { 0x58465342, "xfs" },
		{ 0x9123683E, "btrfs" }, { 0x794c7630, "overlayfs" }, { 0x6969, "nfs" },
		{ 0x65735546, "fuse" },  { 0xFF534D42, "cifs" },      { 0x01021997, "9p" },
		{ 0x2011BAB0, "exfat" }, { 0x4d44, "vfat" },
	};
	struct statfs sf;

	if (fstatfs(dir, &sf) < 0)
		return "unknown";
	for (size_t i = 0; i < ELEMENTSOF(known); i++)
		if ((unsigned long)sf.f_type == known[i].magic)
			return known[i].name;
	return "another file system";
}

static int open_host_dir(const char *path, struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(AT_FDCWD, path, &how, sizeof(how));

	if (fd >= 0)
		return fd;
	switch (errno) {
	case ENOENT:
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_FOUND, -ENOENT,
		        "volume '%s': no such directory on the host: mkdir -p it "
		        "first",
		        path);
	case ELOOP:
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -ELOOP,
		        "volume '%s': a symlink is on the way, and volumes follow "
		        "none: give the directory it leads to (realpath '%s')",
		        path, path);
	case ENOTDIR:
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -ENOTDIR,
		        "volume '%s' is not a directory: a volume is a directory "
		        "(put the file in one)",
		        path);
	default:
		return hutch_err_set_errno(err, -errno, "volume '%s': open", path);
	}
}

/* The detached, idmapped clone of dir: its owner's ids are appuser's. */
static int idmapped_clone(int dir, const char *what, bool rw, uid_t uid_base, struct hutch_err *err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
		                               MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY) };
	_cleanup_close_ int userns = -EBADF, mnt = -EBADF;
	char umap[48], gmap[48];
	struct stat st;
	pid_t pid = 0;

	if (fstat(dir, &st) < 0)
		return hutch_err_set_errno(err, -errno, "volume '%s': stat", what);
	snprintf(umap, sizeof(umap), "%u %u 1\n", (unsigned)st.st_uid,
	         (unsigned)(uid_base + HUTCH_APP_UID));
	snprintf(gmap, sizeof(gmap), "%u %u 1\n", (unsigned)st.st_gid,
	         (unsigned)(uid_base + HUTCH_APP_GID));
	userns = hutch_userns_fd(umap, gmap, &pid);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	if (userns < 0)
		return hutch_err_set_errno(err, userns,
		                           "volume '%s': a user namespace to map its "
		                           "owner onto appuser",
		                           what);
	mnt = sys_open_tree(dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (mnt < 0)
		return hutch_err_set_errno(err, -errno, "volume '%s': clone", what);
	attr.userns_fd = (uint64_t)userns;
	if (sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -errno,
		                           "volume '%s': its file system (%s) cannot give idmapped "
		                           "mounts, which keep its files' owner as appuser sees "
		                           "them (Linux 5.12+ on ext4, xfs, btrfs; tmpfs 6.3+): "
		                           "use a directory on one of those",
		                           what, fs_name(dir));
	return TAKE_FD(mnt);
}

static int open_store(const char *store_path, struct hutch_image_store **ret, struct hutch_err *err)
{
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path = store_path[0] ? store_path : hutch_image_store_path(buf, sizeof(buf));

	if (*ret)
		return 0;
	if (!path)
		return hutch_err_set(err, -EINVAL,
		                     "named volumes: no image store (set "
		                     "HUTCH_IMAGE_STORE)");
	return hutch_image_store_open(path, ret, err);
}

static int prepare_one(const struct hutch_sup_volumes_plan *p, struct hutch_sup_volumes *m,
                       const struct hutch_volume *v, struct hutch_image_store **store,
                       struct hutch_err *err)
{
	_cleanup_close_ int dir = -EBADF;
	int r;

	if (v->named) {
		r = open_store(p->image_store, store, err);
		if (r < 0)
			return r;
		dir = hutch_volume_use(*store, v->src, &m->locks[m->n], err);
	} else {
		dir = open_host_dir(v->src, err);
	}
	if (dir < 0)
		return dir;
	r = idmapped_clone(dir, v->src, v->rw, p->uid_base, err);
	if (r < 0)
		return r;
	m->mounts[m->n] = r;
	m->dsts[m->n] = v->dst;
	m->n++;
	return 0;
}

int hutch_sup_volumes_prepare(const struct hutch_sup_volumes_plan *p,
                              struct hutch_sup_volumes **ret, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	const struct hutch_volumes *set = p->set;
	struct hutch_sup_volumes *m;
	int r = 0;

	*ret = NULL;
	if (!set || !set->n)
		return 0;
	if (p->rootless)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_CAPABLE, -EPERM,
		        "volumes need idmapped mounts (the files' owner seen as "
		        "appuser), which only root can make: run hutch as root, or "
		        "copy files in and out with hutch cp");
	m = calloc(1, sizeof(*m));
	if (!m)
		return hutch_err_set(err, -ENOMEM, "volumes");
	for (size_t i = 0; i < HUTCH_VOLUMES_MAX; i++)
		m->mounts[i] = m->locks[i] = -EBADF;
	*ret = m;
	for (size_t i = 0; r >= 0 && i < set->n; i++)
		r = prepare_one(p, m, &set->v[i], &store, err);
	return r;
}

void hutch_sup_volumes_pass(const struct hutch_sup_volumes *v, int *keep, size_t at,
                            struct hutch_rootfs_config *rc)
{
	static int fds[HUTCH_VOLUMES_MAX];
	size_t n = v ? v->n : 0;

	for (size_t i = 0; i < n; i++) {
		keep[at + i] = v->mounts[i];
		fds[i] = 3 + (int)(at + i);
	}
	rc->volume_fds = fds;
	rc->volume_dsts = n ? v->dsts : NULL;
	rc->n_volumes = n;
}

void hutch_sup_volumes_close_mounts(struct hutch_sup_volumes *v)
{
	if (v)
		hutch_close_many(v->mounts, v->n);
}

void hutch_sup_volumes_let_go(struct sup *s)
{
	if (s->volumes)
		hutch_close_many(s->volumes->locks, HUTCH_VOLUMES_MAX);
}

void hutch_sup_volumes_done(struct sup *s)
{
	if (!s->volumes)
		return;
	hutch_close_many(s->volumes->mounts, HUTCH_VOLUMES_MAX);
	hutch_close_many(s->volumes->locks, HUTCH_VOLUMES_MAX);
	free(s->volumes);
	s->volumes = NULL;
}
