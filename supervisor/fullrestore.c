/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots, the restore (docs/snapshots.md "Full snapshots: the
 * restore"): hutch create --snapshot FULLNAME.
 *
 * The new sandbox is made as any plain sandbox is (its uid slot, a fresh
 * range; its cgroups with its own limits; its disk; lxcfs's views; an init
 * of its own, "the donor"); then its processes are replaced by the dump's,
 * restored by stock CRIU:
 *
 *   - the disk is filled from the dump's files.tar, by a helper in the
 *     donor's user and mount namespaces (the ids the new range's);
 *   - CRIU's images are copied into the state dir's criu/ owned by the new
 *     range's root (the restored tasks read them after they entered their
 *     user namespace), the user namespace's map moved onto the new range
 *     and the host name made the new sandbox's (runtime/criu-img.c); the
 *     large ones (the pages) are not copied but read where the dump is,
 *     through a read-only bind idmapped onto the new range's root, in the
 *     restorer's mount namespace only (place_image());
 *   - the network namespace is made empty by CRIU and its lo brought up
 *     (network none's, the only one a dump has), not restored from the
 *     dump (hutch_criu_write_lo_up());
 *   - every mount CRIU named external at the dump is the donor's mount at
 *     the same path (its disk's directories, lxcfs's views, the host's
 *     binds, the cgroup views of the new cgroups), and the restored root is
 *     the donor's root tmpfs (its /etc made for the new sandbox): cloned
 *     (open_tree) in the donor's mount namespace by a child that unshared
 *     its own, then attached there under a staging tmpfs, where CRIU
 *     (--root, --external mnt[KEY]:PATH) binds them;
 *   - the external files (init's executable, libraries, fds on host files)
 *     are the donor init's: by key when the same file, else by role (its
 *     fds 4-6: the commands' freezer cgroup, lxcfs's tree), duplicated
 *     from it (pidfd_getfd) and given by --inherit-fd; init's socket is a
 *     new socketpair's end;
 *   - the cgroups are the new sandbox's (--manage-cgroups=soft,
 *     --cgroup-root per hierarchy where the donor is), the restored init the
 *     supervisor's child (--restore-sibling);
 *   - CRIU and all it forks run in a cgroup of their own (runtime/criu.h),
 *     killed after it (its helpers) or with the supervisor.
 *
 * Then the supervisor adopts it (its pidfd, its socket, its mount
 * namespace held), kills the donor, and makes the restored init
 * non-dumpable again (it was dumped dumpable). The donor's writable
 * layer's fds (snapshots) stay: they are the same disk's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "criu.h"
#include "events.h"
#include "fdutil.h"
#include "fullrestore.h"
#include "fullsnap.h"
#include "image.h"
#include "initproc.h"
#include "proto.h"
#include "snapshot.h"
#include "supervisor.h"
#include "syscalls.h"
#include "util.h"

#define ARGS_MAX   512
#define PASS_FIRST 100 /* the fds CRIU inherits, from here on */
#define RESTORE_MS 300000
#define IMG_MAX    (64u << 20) /* a userns or utsns image, at most */
#define LOG_TAIL   (64 << 10)
#define WORK       "criu"
#define LO_UP      "lo-up.sh" /* the work dir's setup-namespaces action */
/* An image of at least this size (the pages) is read in place, not copied:
 * an idmapped, read-only bind of the store's file over a placeholder. */
#define INPLACE_MIN (1u << 20)
#define INPLACE_MAX 64
/* The staging tmpfs, in the restorer's own mount namespace: a path every
 * ancestor of which the restored root (the new range's) may search, as
 * CRIU binds the externals from there as that task (not the runtime dir,
 * which may sit in a directory private to its owner). */
#define STAGE "/tmp"

struct restore {
	struct sup *s;
	int snapfd;      /* full/NAME */
	cJSON *meta;     /* its snapshot.json */
	int workfd;      /* the state dir's criu/ */
	char work[4200]; /* its path */
	uid_t old_base;
	char *argv[ARGS_MAX + 1];
	size_t argc;
	int pass[HUTCH_FULL_FILES_MAX + 1]; /* CRIU's, from PASS_FIRST on */
	size_t npass;
	char mnt_path[HUTCH_FULL_FILES_MAX * 4][128]; /* the external mounts: path, key */
	char mnt_key[HUTCH_FULL_FILES_MAX * 4][32];
	size_t nmnt;
	/* The images read in place: detached mounts of the store's files,
	 * idmapped so that the new range's root owns them (the userns that
	 * maps their owner, made once; -EBADF: none yet, another -errno: it
	 * cannot be made, the images are copied). */
	int inplace[INPLACE_MAX];
	char inplace_name[INPLACE_MAX][64];
	size_t ninplace;
	int idmap;
	uid_t idmap_uid;
	gid_t idmap_gid;
	const struct hutch_criu *criu;
	char rt[4096]; /* the runtime dir */
	int run;       /* CRIU's /run (hutch_criu_run_dir()), -errno: none */
	ino_t run_kdat;
};

static int arg(struct restore *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int arg(struct restore *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->argc >= ARGS_MAX)
		return -E2BIG;
	va_start(ap, fmt);
	n = vasprintf(&r->argv[r->argc], fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	r->argv[++r->argc] = NULL;
	return 0;
}

static void restore_done(struct restore *r)
{
	for (size_t i = 0; i < r->argc; i++)
		free(r->argv[i]);
	hutch_close_many(r->pass, r->npass);
	hutch_close_many(r->inplace, r->ninplace);
	if (r->idmap >= 0)
		close(r->idmap);
	if (r->run >= 0)
		close(r->run);
	closep(&r->snapfd);
	if (r->workfd >= 0) {
		(void)hutch_rm_rf_at(r->workfd, "images");
		closep(&r->workfd);
		(void)hutch_rm_rf_at(AT_FDCWD, r->work);
	}
	cJSON_Delete(r->meta);
}

/* snapshot.json: what the restore needs of it, or why it cannot. */
static int read_meta(struct restore *r, struct hutch_err *err)
{
	const cJSON *base = cJSON_GetObjectItemCaseSensitive(r->meta, "uid_base");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(r->meta, "criu_args");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(r->meta, "files");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(r->meta, "type");

	if (!cJSON_IsString(type) || strcmp(type->valuestring, "full") || !cJSON_IsNumber(base) ||
	    base->valuedouble < 1 || !cJSON_IsArray(args))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "--snapshot %s: its snapshot.json is not a full "
		                           "snapshot's (type, uid_base, criu_args)",
		                           r->s->cfg->full_snapshot);
	if (!cJSON_IsObject(files))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "--snapshot %s: made before restores were built (its "
		                           "snapshot.json names no external files' roles): take it "
		                           "again with 'hutch snapshot --full'",
		                           r->s->cfg->full_snapshot);
	r->old_base = (uid_t)base->valuedouble;
	return 0;
}

/* The user namespace that maps the store's owner (from) onto the new
 * range's root, for idmapped mounts: its fd, or -errno (no in place read,
 * then: the images are copied). */
static int idmap_userns(struct restore *r, const struct stat *st)
{
	char umap[48], gmap[48];
	pid_t pid = 0;

	if (r->idmap != -EBADF)
		return r->idmap >= 0 && r->idmap_uid == st->st_uid && r->idmap_gid == st->st_gid
		               ? r->idmap
		               : -EINVAL;
	snprintf(umap, sizeof(umap), "%u %u 1\n", (unsigned)st->st_uid, (unsigned)r->s->uid_base);
	snprintf(gmap, sizeof(gmap), "%u %u 1\n", (unsigned)st->st_gid, (unsigned)r->s->uid_base);
	r->idmap = hutch_userns_fd(umap, gmap, &pid);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	if (r->idmap == -EBADF)
		r->idmap = -EINVAL;
	r->idmap_uid = st->st_uid;
	r->idmap_gid = st->st_gid;
	return r->idmap;
}

/* A large image (the pages) read in place, not copied (200 MB: 0.3-0.5 s):
 * a read-only clone of the store's file, idmapped so that its owner (root,
 * 0600) is the new range's root, bound by stage_mounts() over an empty
 * placeholder in the restorer's own mount namespace only; shared by the N
 * restores of a fork --full. 1 placed, 0 to be copied (small, or no idmap
 * on that file system), or -errno. */
static int place_image(struct restore *r, int from, int to, const char *name, const struct stat *st)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY |
		                               MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		                               MOUNT_ATTR_NOEXEC,
		                   .propagation = MS_PRIVATE }; /* as stage_mounts()'s */
	_cleanup_close_ int mnt = -EBADF, out = -EBADF;
	int userns;

	if ((uint64_t)st->st_size < INPLACE_MIN || r->ninplace >= INPLACE_MAX ||
	    strlen(name) >= sizeof(r->inplace_name[0]) || (userns = idmap_userns(r, st)) < 0)
		return 0;
	mnt = sys_open_tree(from, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	attr.userns_fd = (uint64_t)userns;
	if (mnt < 0 || sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return 0; /* not on a file system that idmaps: copied */
	out = openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0 || fchown(out, r->s->uid_base, r->s->uid_base) < 0)
		return -errno;
	snprintf(r->inplace_name[r->ninplace], sizeof(r->inplace_name[0]), "%s", name);
	r->inplace[r->ninplace++] = TAKE_FD(mnt);
	return 1;
}

/* One image copied into images/ (the new range's root's, 0600), the user
 * and uts namespaces' rewritten; a large one placed instead. */
static int copy_image(struct restore *r, int from, int to, const char *name, struct hutch_err *err)
{
	_cleanup_close_ int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int out = -EBADF;
	_cleanup_free_ uint8_t *buf = NULL, *done = NULL;
	bool userns = !strncmp(name, "userns-", 7), utsns = !strncmp(name, "utsns-", 6);
	char host[80];
	size_t len = 0;
	struct stat st;
	int q = 0;

	if (in < 0 || fstat(in, &st) < 0)
		return hutch_err_set_errno(err, -errno, "read the image '%s'", name);
	if (!userns && !utsns && (q = place_image(r, from, to, name, &st)) != 0)
		return q < 0 ? hutch_err_set_errno(err, q, "place the image '%s'", name) : 0;
	out = openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (out < 0 || fchown(out, r->s->uid_base, r->s->uid_base) < 0)
		return hutch_err_set_errno(err, -errno, "copy the image '%s'", name);
	if (!userns && !utsns) {
		for (off_t left = st.st_size; left > 0;) {
			ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);

			if (n <= 0)
				return hutch_err_set_errno(err, n < 0 ? -errno : -EIO,
				                           "copy the image '%s'", name);
			left -= n;
		}
		return 0;
	}
	if (st.st_size > IMG_MAX || !(buf = malloc((size_t)st.st_size + 1)) ||
	    hutch_read_all(in, buf, (size_t)st.st_size) != st.st_size)
		return hutch_err_set(err, -EIO, "read the image '%s'", name);
	snprintf(host, sizeof(host), "hutch-%s", r->s->id);
	q = userns ? hutch_criu_img_remap_userns(buf, (size_t)st.st_size, r->old_base,
	                                         r->s->uid_base, HUTCH_UID_RANGE, &done, &len)
	           : hutch_criu_img_set_nodename(buf, (size_t)st.st_size, host, &done, &len);
	if (q < 0)
		return hutch_err_set_errno(err, q, "rewrite the image '%s'%s", name,
		                           q == -ERANGE ? ": a map outside the source's range"
		                                        : "");
	return hutch_write_all(out, done, len) < 0
	               ? hutch_err_set_errno(err, -errno, "write the image '%s'", name)
	               : 0;
}

/* criu/ (the new range's root's) with images/ copied into it. */
static int make_work(struct restore *r, struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	_cleanup_close_ int to = -EBADF;
	uid_t u = r->s->uid_base;
	struct dirent *de;
	int from, q;

	snprintf(r->work, sizeof(r->work), "%s/" WORK, r->s->paths.dir);
	if (mkdir(r->work, 0700) < 0 ||
	    (r->workfd = open(r->work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fchown(r->workfd, u, u) < 0 || mkdirat(r->workfd, "images", 0711) < 0 ||
	    (to = openat(r->workfd, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	            0 ||
	    fchown(to, u, u) < 0)
		return hutch_err_set_errno(err, -errno, "make '%s'", r->work);
	from = openat(r->snapfd, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (from < 0 || !(d = fdopendir(from))) {
		if (from >= 0)
			close(from);
		return hutch_err_set_errno(err, -errno, "open the snapshot's images");
	}
	while ((de = readdir(d)))
		if (de->d_type == DT_REG && strcmp(de->d_name, "dump.log") &&
		    (q = copy_image(r, dirfd(d), to, de->d_name, err)) < 0)
			return q;
	return 0;
}

/* The disk filled from files.tar: GNU tar as the new sandbox's root, in
 * the donor's user and mount namespaces (the ids the new range's; what a
 * hostile archive could reach is that sandbox's own files). The overlay
 * markers of the layer format (.wh..wh..opq) are not files. */
static int fill_disk(struct restore *r, struct hutch_err *err)
{
	static char *const argv[] = {
		"tar", "-C", "/", "--numeric-owner", "-xpf", "-", "--exclude=.wh..wh..opq", NULL
	};
	static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	_cleanup_close_ int tar = openat(r->snapfd, "files.tar", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int userns = -EBADF, mntns = -EBADF;
	char path[64];
	int status;
	pid_t pid;

	if (tar < 0)
		return hutch_err_set_errno(err, -errno, "open the snapshot's files.tar");
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)r->s->init_pid);
	userns = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)r->s->init_pid);
	mntns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns < 0 || mntns < 0)
		return hutch_err_set_errno(err, -errno, "open the new init's namespaces");
	if ((pid = fork()) < 0)
		return hutch_err_set_errno(err, -errno, "fork the disk's filler");
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		(void)prctl(PR_SET_DUMPABLE, 0);
		if (dup2(tar, 0) < 0) /* lint-fds: ok: the child's stdin */
			_exit(126);
		if (setns(userns, CLONE_NEWUSER) < 0 || setns(mntns, CLONE_NEWNS) < 0 ||
		    setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 || chdir("/") < 0)
			_exit(126);
		(void)sys_close_range(3, ~0U, 0);
		execve("/usr/bin/tar", argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hutch_err_set_class(err, HUTCH_ERRC_IO, -EIO,
		                           "fill the new disk from the snapshot's files.tar: tar "
		                           "%s %d",
		                           WIFEXITED(status) ? "exited" : "was killed by signal",
		                           WIFEXITED(status) ? WEXITSTATUS(status)
		                                             : WTERMSIG(status));
	return 0;
}

/* The external mounts (mnt[PATH]:KEY) of the dump's arguments. */
static int read_mounts(struct restore *r, struct hutch_err *err)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(r->meta, "criu_args")) {
		const char *v = cJSON_IsString(a) ? a->valuestring : "", *end, *key;

		if (strncmp(v, "mnt[", 4) || !(end = strstr(v, "]:")))
			continue;
		key = end + 2;
		if (r->nmnt >= ELEMENTSOF(r->mnt_path) ||
		    end - v - 4 >= (long)sizeof(r->mnt_path[0]) ||
		    strlen(key) >= sizeof(r->mnt_key[0]) || strchr(key, '/') || v[4] != '/')
			return hutch_err_set(err, -EINVAL, "the dump's external mount '%.80s'", v);
		snprintf(r->mnt_path[r->nmnt], sizeof(r->mnt_path[0]), "%.*s", (int)(end - v - 4),
		         v + 4);
		snprintf(r->mnt_key[r->nmnt], sizeof(r->mnt_key[0]), "%s", key);
		r->nmnt++;
	}
	return 0;
}

/* One fd of the donor's for CRIU to inherit, as key. */
static int pass_fd(struct restore *r, int fd, const char *key, struct hutch_err *err)
{
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "the new init's file for %s", key);
	r->pass[r->npass] = fd;
	if (arg(r, "--inherit-fd") < 0 || arg(r, "fd[%zu]:%s", PASS_FIRST + r->npass, key) < 0) {
		r->npass++;
		return hutch_err_set(err, -E2BIG, "criu's arguments");
	}
	r->npass++;
	return 0;
}

/* Each external file of the dump, the donor's of the same key (the same
 * host file), else of the same role (an fd of the same number). */
static int pass_files(struct restore *r, int donor_pidfd, struct hutch_err *err)
{
	struct hutch_full_files *have = calloc(1, sizeof(*have));
	const cJSON *f;
	int q = have ? hutch_sup_full_files(r->s->init_pid, have, err)
	             : hutch_err_set(err, -ENOMEM, "the new init's files");

	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(r->meta, "files")) {
		const char *role = cJSON_IsString(f) ? f->valuestring : "";
		size_t i, n = have ? have->n : 0;

		if (q < 0)
			break;
		for (i = 0; i < n && strcmp(have->f[i].key, f->string); i++)
			;
		for (size_t j = 0; i == n && j < n && !strncmp(role, "fd/", 3); j++)
			if (!strcmp(have->f[j].role, role))
				i = j;
		if (i == n) {
			q = hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -ENOENT,
			        "--snapshot %s: its init had %s (%s), which this hutch's init does "
			        "not: "
			        "the snapshot was taken with another build of hutch or of its "
			        "libraries; restore it with the build that took it",
			        r->s->cfg->full_snapshot, f->string, role);
			break;
		}
		q = pass_fd(r,
		            !strncmp(have->f[i].role, "fd/", 3)
		                    ? sys_pidfd_getfd(donor_pidfd, atoi(have->f[i].role + 3), 0)
		                    : open(have->f[i].path, O_RDONLY | O_CLOEXEC),
		            f->string + 1, err); /* ile[...]: what CRIU matches */
	}
	free(have);
	return q;
}

/* --cgroup-root of each hierarchy where the donor is not in the
 * supervisor's cgroup: the new sandbox's. */
static int cgroup_roots(struct restore *r, struct hutch_err *err)
{
	char path[64], mine[64][256], line[512];
	_cleanup_fclose_ FILE *self = fopen("/proc/self/cgroup", "re"), *f = NULL;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)r->s->init_pid);
	if (!self || !(f = fopen(path, "re")))
		return hutch_err_set_errno(err, -errno, "read the cgroups");
	while (n < ELEMENTSOF(mine) && fgets(mine[n], sizeof(mine[0]), self))
		n++;
	while (fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *p;
		bool same = false;

		if (!ctrl || !(p = strchr(ctrl + 1, ':')))
			continue;
		for (size_t i = 0; i < n; i++)
			same = same || !strcmp(mine[i], line);
		line[strcspn(line, "\n")] = '\0';
		*p++ = '\0';
		if (same || !strncmp(ctrl + 1, "name=", 5))
			continue;
		if (arg(r, "--cgroup-root") < 0 ||
		    (ctrl[1] ? arg(r, "%s:%s", ctrl + 1, p) : arg(r, "%s", p)) < 0)
			return hutch_err_set(err, -E2BIG, "criu's arguments");
	}
	return 0;
}

static int make_argv(struct restore *r, const char *criu, struct hutch_err *err)
{
	int q = 0;

	if (arg(r, "%s", criu) < 0 || arg(r, "restore") < 0 || arg(r, "-D") < 0 ||
	    arg(r, STAGE "/work/images") < 0 || arg(r, "-o") < 0 || arg(r, "restore.log") < 0 ||
	    arg(r, "-d") < 0 || arg(r, "--restore-sibling") < 0 || arg(r, "--root") < 0 ||
	    arg(r, STAGE "/root") < 0 || arg(r, "--manage-cgroups=soft") < 0 ||
	    arg(r, "--pidfile") < 0 || arg(r, STAGE "/work/pid") < 0 ||
	    arg(r, "--ext-unix-sk") < 0 || arg(r, "--empty-ns") < 0 || arg(r, "net") < 0 ||
	    arg(r, "--action-script") < 0 || arg(r, STAGE "/work/" LO_UP) < 0)
		return hutch_err_set(err, -E2BIG, "criu's arguments");
	for (size_t i = 0; i < r->nmnt && q >= 0; i++)
		q = arg(r, "--external")
		            ?: arg(r, "mnt[%s]:" STAGE "/%s", r->mnt_key[i], r->mnt_key[i]);
	if (q < 0)
		return hutch_err_set(err, -E2BIG, "criu's arguments");
	return cgroup_roots(r, err);
}

/* Child: the images read in place bound over their placeholders. */
static int place_inplace(const struct restore *r)
{
	char path[128];

	for (size_t i = 0; i < r->ninplace; i++) {
		snprintf(path, sizeof(path), STAGE "/work/images/%s", r->inplace_name[i]);
		if (sys_move_mount(r->inplace[i], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return -errno;
	}
	return 0;
}

/* Child: the donor's root and external mounts cloned in its mount
 * namespace, attached under stage/ of a mount namespace of our own. */
static int stage_mounts(struct restore *r, int donor_mntns)
{
	int trees[ELEMENTSOF(r->mnt_path) + 1], own, stage;
	const char *where = STAGE;
	/* The work dir too (CRIU's restored tasks reach it by its path),
	 * cloned while it is ours: it may be under the stage's path. Private:
	 * a clone of a shared mount is its peer (systemd's /): the images put
	 * on it showed in the host's namespace, EBUSY to rm (issue 28). */
	struct mount_attr priv = { .propagation = MS_PRIVATE };
	int work =
	        sys_open_tree(r->workfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

	if (work < 0 || sys_mount_setattr(work, "", AT_EMPTY_PATH, &priv, sizeof(priv)) < 0 ||
	    unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0 ||
	    mkdir(STAGE "/work", 0700) < 0 ||
	    sys_move_mount(work, "", AT_FDCWD, STAGE "/work", MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
	    place_inplace(r) < 0 || (own = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 ||
	    setns(donor_mntns, CLONE_NEWNS) < 0)
		return -errno;
	trees[0] = sys_open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	for (size_t i = 0; i < r->nmnt; i++)
		trees[i + 1] =
		        sys_open_tree(AT_FDCWD, r->mnt_path[i],
		                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (setns(own, CLONE_NEWNS) < 0 ||
	    (stage = open(where, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	for (size_t i = 0; i <= r->nmnt; i++) {
		const char *name = i ? r->mnt_key[i - 1] : "root";
		struct stat st;
		int fd;

		if (trees[i] < 0 || fstat(trees[i], &st) < 0)
			return -errno;
		fd = S_ISDIR(st.st_mode) ? mkdirat(stage, name, 0755)
		     : (fd = openat(stage, name, O_CREAT | O_EXCL | O_CLOEXEC | O_WRONLY, 0644)) < 0
		             ? fd
		             : close(fd);
		if (fd < 0 ||
		    sys_move_mount(trees[i], "", stage, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return -errno;
	}
	return 0;
}

/* Child: the stage made, the fds CRIU inherits placed, criu exec'ed. */
static __attribute__((noreturn)) void restorer(struct restore *r, const struct hutch_criu_cg *cg,
                                               int donor_mntns, int sock, int criu_fd)
{
	static char *const envp[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		                      "/sbin:/bin",
		                      NULL };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (hutch_criu_cg_join(cg) < 0)
		_exit(HUTCH_CRIU_CG_EXIT);
	/* A group of its own: what CRIU signals on a failure is its. */
	if (null < 0 || setsid() < 0 || stage_mounts(r, donor_mntns) < 0)
		_exit(125);
	if (r->run >= 0) /* in our own mount namespace (stage_mounts()) */
		(void)hutch_criu_run_dir_attach(r->run);
	r->pass[r->npass++] = sock;
	for (size_t i = 0; i < r->npass; i++)
		if ((r->pass[i] = fcntl(r->pass[i], F_DUPFD_CLOEXEC, 1000)) < 0)
			_exit(125);
	for (size_t i = 0; i < r->npass; i++)
		if (dup2(r->pass[i], PASS_FIRST + (int)i) < 0) /* lint-fds: ok: CRIU's */
			_exit(125);
	for (int fd = 0; fd < 3; fd++)
		if (dup2(null, fd) < 0) /* lint-fds: ok: child stdio */
			_exit(125);
	if (fchdir(r->workfd) < 0)
		_exit(125);
	if ((criu_fd = fcntl(criu_fd, F_DUPFD_CLOEXEC, PASS_FIRST + (int)r->npass)) < 0)
		_exit(125);
	(void)sys_close_range(3, PASS_FIRST - 1, 0);
	(void)sys_close_range(PASS_FIRST + (unsigned)r->npass + 1, ~0U, 0);
	(void)fexecve(criu_fd, r->argv, envp);
	_exit(127);
}

/* init's socket's inode at the dump (unix[INODE]). */
static const char *sock_inode(const struct restore *r)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(r->meta, "criu_args"))
		if (cJSON_IsString(a) && !strncmp(a->valuestring, "unix[", 5))
			return a->valuestring;
	return NULL;
}

/* CRIU's error lines from its log (images/restore.log), less those it
 * prints on every restore here (a restore that works says them too). */
static void log_why(struct restore *r, char *why, size_t size)
{
	static const char *const noise[] = { "RLIMIT_NOFILE", "ddress already assigned",
		                             "Restoring FAILED", "cgroupd: recv req error" };
	_cleanup_free_ char *log = malloc(LOG_TAIL + 1), *kept = malloc(LOG_TAIL + 1);
	_cleanup_close_ int fd =
	        openat(r->workfd, "images/restore.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	size_t k = 0;
	off_t end;
	ssize_t n = -1;

	if (log && kept && fd >= 0 && (end = lseek(fd, 0, SEEK_END)) >= 0)
		n = pread(fd, log, LOG_TAIL, end > LOG_TAIL ? end - LOG_TAIL : 0);
	if (n < 0) {
		snprintf(why, size, "no restore.log");
		return;
	}
	log[n] = '\0';
	for (char *line = log, *nl; *line; line = nl) {
		bool skip = false;

		nl = line + strcspn(line, "\n");
		nl += *nl == '\n';
		for (size_t i = 0; i < ELEMENTSOF(noise); i++)
			skip = skip ||
			       memmem(line, (size_t)(nl - line), noise[i], strlen(noise[i]));
		if (!skip) {
			memcpy(kept + k, line, (size_t)(nl - line));
			k += (size_t)(nl - line);
		}
	}
	kept[k] = '\0';
	hutch_criu_summarize_check(kept, why, size);
}

/* criu restore run and waited for (bounded): 0, or its failure. */
static int run(struct restore *r, int sock, struct hutch_err *err)
{
	char path[64], why[512];
	_cleanup_close_ int mntns = -EBADF, pfd = -EBADF;
	/* by fd: the stage may hide its path in the child */
	_cleanup_close_ int criu = open(r->argv[0], O_PATH | O_CLOEXEC);
	_cleanup_(hutch_criu_cg_end) struct hutch_criu_cg cg = HUTCH_CRIU_CG_INIT;
	int status = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)r->s->init_pid);
	if ((mntns = open(path, O_RDONLY | O_CLOEXEC)) < 0 || criu < 0)
		return hutch_err_set_errno(err, -errno,
		                           "open the new init's mount namespace, criu");
	/* CRIU and its helpers (the restored tasks are moved into the new
	 * sandbox's cgroups): killed after, or with the supervisor. */
	if ((status = hutch_criu_cg_new(r->s->cg, &cg, err)) < 0)
		return hutch_err_prefix(err, "criu restore");
	r->run = hutch_criu_run_dir(r->rt, r->criu, &r->run_kdat);
	if ((pid = fork()) < 0)
		return hutch_err_set_errno(err, -errno, "fork criu");
	if (pid == 0)
		restorer(r, &cg, mntns, sock, criu);
	pfd = sys_pidfd_open(pid, 0);
	if (pfd >= 0 && poll(&(struct pollfd){ .fd = pfd, .events = POLLIN }, 1, RESTORE_MS) == 0)
		(void)kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	hutch_criu_cg_end(&cg);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		hutch_criu_run_dir_keep(r->rt, r->criu, r->run, r->run_kdat);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == HUTCH_CRIU_CG_EXIT)
		return hutch_criu_cg_refused(&cg, "criu restore", err);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 125)
		return hutch_err_set_class(err, HUTCH_ERRC_IO, -EIO,
		                           "restore: the new sandbox's mounts could not be "
		                           "staged for CRIU");
	log_why(r, why, sizeof(why));
	if (WIFSIGNALED(status))
		return hutch_err_set_class(err, HUTCH_ERRC_IO, -EINTR,
		                           "criu restore was killed (signal %d): %.400s",
		                           WTERMSIG(status), why);
	return hutch_err_set_class(err, HUTCH_ERRC_IO, -EIO,
	                           "criu restore failed (exit %d): %.400s",
	                           WIFEXITED(status) ? WEXITSTATUS(status) : -1, why);
}

/* The restored init (the supervisor's child: --restore-sibling) is the
 * sandbox's: the donor killed and reaped, its pidfd, socket and mount
 * namespace taken, non-dumpable again. */
static int adopt(struct restore *r, int sock, struct hutch_err *err)
{
	struct sup *s = r->s;
	char buf[32], path[64];
	struct hutch_initproc p = { .sock = sock };
	long ppid = 0;
	ssize_t n = hutch_read_file_at(r->workfd, "pid", buf, sizeof(buf) - 1);
	FILE *f;

	if (n <= 0)
		return hutch_err_set(err, -EIO, "criu restore wrote no pid file");
	buf[n] = '\0';
	p.pid = (pid_t)atoi(buf);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p.pid);
	if (p.pid <= 1 || !(f = fopen(path, "re")))
		return hutch_err_set(err, -ESRCH, "the restored init (pid %s) is gone", buf);
	if (fscanf(f, "%*d (%*[^)]) %*c %ld", &ppid) != 1)
		ppid = 0;
	fclose(f);
	if (ppid != getpid() || (p.pidfd = sys_pidfd_open(p.pid, 0)) < 0)
		return hutch_err_set(err, -ECHILD, "the restored init (pid %d) is not ours",
		                     (int)p.pid);
	hutch_initproc_reap(s); /* the donor, with its pid namespace */
	hutch_initproc_release_mntns(s);
	closep(&s->init_sock); /* the donor's: setup's, handed over */
	hutch_initproc_started(s, &p);
	hutch_initproc_hold_mntns(s);
	if (hutch_fd_nonblock(sock, true) < 0)
		return hutch_err_set_errno(err, -errno, "init socket");
	return hutch_sup_full_dumpable(s, false, err);
}

static int steps(struct restore *r, const struct hutch_criu *c, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	const char *ino;
	int sv[2], bufsz = HUTCH_PROTO_SOCK_BUF, q;

	if ((q = hutch_sup_snapshot_store(r->s, &store, err)) < 0 ||
	    (r->snapfd = hutch_image_full_open(store, r->s->cfg->full_snapshot, &r->meta, err)) < 0)
		return q < 0 ? q : r->snapfd;
	if ((q = read_meta(r, err)) < 0 || (q = make_work(r, err)) < 0 ||
	    (q = fill_disk(r, err)) < 0 || (q = read_mounts(r, err)) < 0 ||
	    (q = hutch_criu_write_lo_up(r->workfd, LO_UP)) < 0 ||
	    (q = make_argv(r, c->path, err)) < 0 || (q = pass_files(r, r->s->pidfd, err)) < 0)
		return q;
	/* its lock: what is read is copied, or held by its mount (in place) */
	hutch_image_store_free(TAKE_PTR(store));
	if (!(ino = sock_inode(r)))
		return hutch_err_set(err, -EINVAL, "the dump names no socket of init's");
	if (arg(r, "--inherit-fd") < 0 || arg(r, "fd[%zu]:socket:[%.*s]", PASS_FIRST + r->npass,
	                                      (int)strlen(ino) - 6, ino + 5) < 0)
		return hutch_err_set(err, -E2BIG, "criu's arguments");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return hutch_err_set_errno(err, -errno, "socketpair");
	for (int i = 0; i < 2; i++)
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &bufsz, sizeof(bufsz)) < 0 ||
		    setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &bufsz, sizeof(bufsz)) < 0)
			q = -errno;
	if (q >= 0)
		q = run(r, sv[1], err);
	close(sv[1]);
	if (q < 0) {
		close(sv[0]);
		return q;
	}
	return adopt(r, sv[0], err);
}

int hutch_sup_restore_full(struct sup *s, struct hutch_err *err)
{
	struct restore *r = calloc(1, sizeof(*r));
	double t0 = hutch_now_mono_sec();
	char why[1024];
	struct hutch_criu c;
	size_t inplace;
	int q;

	if (!r)
		return hutch_err_set(err, -ENOMEM, "restore");
	*r = (struct restore){ .s = s,
		               .snapfd = -EBADF,
		               .workfd = -EBADF,
		               .idmap = -EBADF,
		               .run = -EBADF,
		               .criu = &c };
	hutch_sup_full_runtime_dir(s, r->rt, sizeof(r->rt));
	hutch_criu_probe(r->rt, &c);
	if (!c.works) {
		hutch_criu_refusal(&c, why, sizeof(why));
		q = hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP, "%s", why);
	} else {
		q = steps(r, &c, err);
	}
	inplace = r->ninplace;
	restore_done(r);
	free(r);
	if (q < 0)
		return hutch_err_prefix(err, "restore of full snapshot %s", s->cfg->full_snapshot);
	hutch_event(s,
	            "restored from full snapshot %s in %.1f ms: init %d, %zu image%s read in place",
	            s->cfg->full_snapshot, (hutch_now_mono_sec() - t0) * 1e3, (int)s->init_pid,
	            inplace, inplace == 1 ? "" : "s");
	return 0;
}
