/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full snapshots, the dump (docs/snapshots.md "Full snapshots").
 *
 * The sandbox's whole process tree is dumped, init its root (pid 1 of its
 * pid namespace), so that CRIU records the user, pid, mount, network,
 * uts, ipc and cgroup namespaces as its own and a restore can remake them
 * on a new uid range. What hutch does for stock CRIU (4.1 or later: this
 * kernel's vDSO) to take that dump:
 *
 *   - init is made dumpable for the dump (HUTCH_MSG_DUMPABLE) and not
 *     again after it: CRIU opens init's /proc ns files from inside the
 *     sandbox's user namespace, which a non-dumpable init refuses;
 *   - every mount CRIU cannot remake by itself (one whose root is not its
 *     file system's, or not a tmpfs, proc, devpts or mqueue: the disk's
 *     ext4, the host's binds, lxcfs, cgroup v1) is named external, keyed
 *     by its mount id, and so is every read-only tmpfs (hutch's masks,
 *     the same in the restore's new sandbox), /dev (hutch's, the same)
 *     and /dev/shm (its files in files.tar); the root tmpfs is taken from
 *     --root at restore;
 *   - the network namespace's configuration is not dumped (--empty-ns
 *     net: network none's lo, which the restore makes again);
 *   - init's files on mounts outside its mount namespace (its executable,
 *     its libraries' mappings, its fds on host files) are named external
 *     (mount id and inode), as is its socket to the supervisor;
 *   - init called setsid() and made its socket in the sandbox's network
 *     namespace (init/init.c), so CRIU finds both in what it dumps.
 *
 * The disk's files and /dev/shm's (external mounts: CRIU keeps their paths
 * only) are read at CRIU's post-dump action, while it still holds every
 * task stopped: a script of the snapshot's directory tells the supervisor
 * on a FIFO and waits on another until files.tar is written.
 *
 * The dump goes into the store's tmp/ (0700) while the store's writers'
 * lock is held, and is renamed full/NAME whole, its files 0600: they hold
 * the processes' memory. The sandbox runs on (--leave-running); CRIU
 * stops its tasks by ptrace meanwhile. CRIU is a child of the supervisor
 * with PDEATHSIG, in a cgroup of its own with all it forks (runtime/criu.h):
 * a supervisor killed takes it, its forks and the sandbox along, and the
 * half-made directory stays in tmp/ for the next lock holder to clear.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "criu.h"
#include "disk.h"
#include "events.h"
#include "fdutil.h"
#include "fullsnap.h"
#include "image.h"
#include "netpolicy.h"
#include "proto.h"
#include "rootfs.h"
#include "snapshot.h"
#include "supervisor.h"
#include "syscalls.h"
#include "util.h"
#include "volume.h"

#define ARGS_MAX   512
#define MOUNTS_MAX 256
#define LOG_TAIL   (64 << 10)
#define SHM_PATH   "/dev/shm"

struct criu_argv {
	char *v[ARGS_MAX + 1];
	size_t n;
	unsigned long long mnt_ids[MOUNTS_MAX]; /* init's mount namespace's */
	size_t nmnt;
	unsigned long long shm_mnt;    /* /dev/shm's, 0: none */
	struct hutch_full_files files; /* the external files, their roles */
};

static void criu_argv_done(struct criu_argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	a->n = 0;
}

static int add(struct criu_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add(struct criu_argv *a, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (a->n >= ARGS_MAX)
		return -E2BIG;
	va_start(ap, fmt);
	r = vasprintf(&a->v[a->n], fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	a->v[++a->n] = NULL;
	return 0;
}

/* What a restore could not remake: refused before anything is made. */
static int check(struct sup *s, struct hutch_err *err)
{
	if (s->idmap.rootless)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EPERM,
		                           "full snapshots need root: CRIU dumps the sandbox's "
		                           "process tree as the host's root");
	if (!s->cg)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP,
		        "a sandbox without a cgroup (--no-limits) cannot be "
		        "fully snapshotted: its restore needs cgroups of its own");
	if (s->container || s->joins)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "an OCI container or pod member cannot be fully "
		        "snapshotted: only a plain sandbox (hutch create --image "
		        "host)");
	if (s->image)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "a sandbox made from an image (its root an overlayfs) cannot be fully "
		        "snapshotted yet: only the host-derived root's dump is built (hutch create "
		        "--image host); a filesystem snapshot (without --full) works");
	if (s->cfg->net.mode != HUTCH_NET_NONE)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "network %s cannot be fully snapshotted: its host side "
		                           "(veth and NAT, or the egress proxy) is not in CRIU's "
		                           "dump; only network none",
		                           hutch_net_mode_name(s->cfg->net.mode));
	if (s->cfg->volumes && s->cfg->volumes->n)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "a sandbox with volumes (-v) cannot be fully snapshotted: "
		        "their host directories are not part of the dump");
	if (s->cfg->header_bindings)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "a sandbox with header bindings cannot be fully "
		                           "snapshotted: their proxy is the supervisor's");
	if (s->cfg->change_lists)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "a sandbox with change lists cannot be fully snapshotted: CRIU keeps no "
		        "fanotify file-system mark, so a restore would list no change; create "
		        "it with --change-lists off");
	if (s->idle.sleeping || s->idle.paused)
		return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EBUSY,
		                           "the sandbox is %s: resume it first",
		                           s->idle.paused ? "paused" : "asleep");
	return 0;
}

void hutch_sup_full_runtime_dir(const struct sup *s, char *buf, size_t size)
{
	char *slash;

	snprintf(buf, size, "%s", s->paths.dir);
	slash = strrchr(buf, '/');
	if (slash && slash != buf)
		*slash = '\0';
}

/* The runtime dir (the state dir's parent): the CRIU verdict's cache. */
static void probe(struct sup *s, struct hutch_criu *c)
{
	char rt[sizeof(s->paths.dir)];

	hutch_sup_full_runtime_dir(s, rt, sizeof(rt));
	hutch_criu_probe(rt, c);
}

/* Mountinfo's fields: id, root, mount point, the mount's options, file
 * system type. */
static bool parse_mount(char *line, unsigned long long *id, char **root, char **mp, char **opts,
                        char **fstype)
{
	char *sep = strstr(line, " - "), *save = NULL, *f[6];

	if (!sep)
		return false;
	*sep = '\0';
	for (size_t i = 0; i < 6; i++)
		if (!(f[i] = strtok_r(i ? NULL : line, " ", &save)))
			return false;
	*id = strtoull(f[0], NULL, 10);
	*root = f[3];
	*mp = f[4];
	*opts = f[5];
	*fstype = strtok_r(sep + 3, " ", &save);
	return *fstype != NULL;
}

/* A mount CRIU remakes from its dump: its file system's root, of a kind
 * CRIU makes. Not a read-only tmpfs (the masks /proc/acpi, /usr/local,
 * the cgroup views' /sys/fs/cgroup): hutch made its contents at the
 * create, and nothing in the sandbox can remount it writable (no command
 * has CAP_SYS_ADMIN), so the restore's new sandbox has the same; named
 * external, it is not archived (a tar and gzip each, 0.1-0.4 s at load
 * 10) nor unpacked at the restore, which binds the new sandbox's own.
 * Nor /dev and /dev/shm (rootfs/dev.c): /dev holds what hutch put there
 * (mount points, symlinks; 0755, the sandbox root's, whom no command is),
 * the same in the new sandbox; /dev/shm (1777: the commands') is written
 * into files.tar in CRIU's stop (capture_files()) and restored into the
 * new sandbox's own before CRIU binds it. */
static bool criu_remakes(const char *mp, const char *root, const char *opts, const char *fstype)
{
	static const char *const own[] = { "tmpfs", "proc", "devpts", "mqueue" };

	if (strcmp(root, "/"))
		return false;
	if (!strcmp(fstype, "tmpfs") &&
	    ((!strncmp(opts, "ro", 2) && (!opts[2] || opts[2] == ',')) || !strcmp(mp, "/dev") ||
	     !strcmp(mp, SHM_PATH)))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(own); i++)
		if (!strcmp(fstype, own[i]))
			return true;
	return false;
}

/* Every mount CRIU cannot remake: --external mnt[PATH]:mID. */
static int add_mounts(struct criu_argv *a, pid_t pid, struct hutch_err *err)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	if (!(f = fopen(path, "re")))
		return hutch_err_set_errno(err, -errno, "read init's mounts");
	while (getline(&line, &cap, f) > 0) {
		char *root, *mp, *opts, *fstype;
		unsigned long long id;

		line[strcspn(line, "\n")] = '\0';
		if (!parse_mount(line, &id, &root, &mp, &opts, &fstype))
			return hutch_err_set(err, -EIO, "init's mountinfo: an unreadable line");
		if (a->nmnt >= MOUNTS_MAX)
			return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
			                           "more than %d mounts", MOUNTS_MAX);
		a->mnt_ids[a->nmnt++] = id;
		if (!strcmp(mp, SHM_PATH) && !strcmp(fstype, "tmpfs") && !strcmp(root, "/"))
			a->shm_mnt = id;
		if (!strcmp(mp, "/") || criu_remakes(mp, root, opts, fstype))
			continue;
		if ((r = add(a, "--external")) < 0 || (r = add(a, "mnt[%s]:m%llu", mp, id)) < 0)
			return hutch_err_set_errno(err, r, "criu's arguments");
	}
	return 0;
}

/* The mount id an fd's file is on (its fdinfo), or -errno. */
static long long mount_of(int fd)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (getline(&line, &cap, f) > 0)
		if (!strncmp(line, "mnt_id:", 7))
			return strtoll(line + 7, NULL, 10);
	return -ENOENT;
}

/* One file init has (its exe, an fd, a mapping): external when it is on
 * a mount outside init's mount namespace (ids), once per (mount, inode),
 * into f with its role ("exe", "fd/N", "map": what a restore matches). */
static int add_file(struct hutch_full_files *f, const unsigned long long *ids, size_t nids,
                    const char *proc_path, const char *role, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	char target[16];
	struct stat st;
	long long mnt;
	char key[64];
	ssize_t n;

	n = readlink(proc_path, target, sizeof(target));
	if (n <= 0 || target[0] != '/')
		return 0; /* a socket, a pipe, an anonymous inode: CRIU's */
	if ((fd = open(proc_path, O_PATH | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0)
		return errno == ENOENT ? 0
		                       : hutch_err_set_errno(err, -errno, "open '%s'", proc_path);
	if ((mnt = mount_of(fd)) < 0)
		return hutch_err_set_errno(err, (int)mnt, "the mount of '%s'", proc_path);
	for (size_t i = 0; i < nids; i++)
		if (ids[i] == (unsigned long long)mnt)
			return 0;
	snprintf(key, sizeof(key), "file[%llx:%llx]", mnt, (unsigned long long)st.st_ino);
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->f[i].key, key))
			return 0;
	if (f->n >= HUTCH_FULL_FILES_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "init has more than %d files outside its mounts",
		                           HUTCH_FULL_FILES_MAX);
	snprintf(f->f[f->n].key, sizeof(f->f[0].key), "%s", key);
	snprintf(f->f[f->n].role, sizeof(f->f[0].role), "%s", role);
	snprintf(f->f[f->n].path, sizeof(f->f[0].path), "%s", proc_path);
	f->n++;
	return 0;
}

static int add_files_in(struct hutch_full_files *f, const unsigned long long *ids, size_t nids,
                        pid_t pid, const char *dir, struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	char path[384], role[40];
	struct dirent *de;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, dir);
	if (!(d = opendir(path)))
		return hutch_err_set_errno(err, -errno, "read '%s'", path);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/%s/%s", (int)pid, dir, de->d_name);
		snprintf(role, sizeof(role), "%s/%.20s", dir, de->d_name);
		if ((r = add_file(f, ids, nids, path, strcmp(dir, "fd") ? "map" : role, err)) < 0)
			return r;
	}
	return 0;
}

/* The fds first: a file init has open and mapped keeps its fd's role. */
static int collect(struct hutch_full_files *f, const unsigned long long *ids, size_t nids,
                   pid_t pid, struct hutch_err *err)
{
	char path[64];
	int r;

	f->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if ((r = add_files_in(f, ids, nids, pid, "fd", err)) < 0 ||
	    (r = add_file(f, ids, nids, path, "exe", err)) < 0)
		return r;
	return add_files_in(f, ids, nids, pid, "map_files", err);
}

int hutch_sup_full_files(pid_t pid, struct hutch_full_files *ret, struct hutch_err *err)
{
	struct criu_argv a = { 0 };
	int r = add_mounts(&a, pid, err);

	if (r >= 0)
		r = collect(ret, a.mnt_ids, a.nmnt, pid, err);
	criu_argv_done(&a);
	return r;
}

/* init's files outside its mounts, and its socket to the supervisor
 * (fd 3: supervisor/setup.c), whose other end is not in the dump. */
static int add_init_files(struct criu_argv *a, pid_t pid, struct hutch_err *err)
{
	char path[64], target[64];
	ssize_t n;
	int r;

	if ((r = collect(&a->files, a->mnt_ids, a->nmnt, pid, err)) < 0)
		return r;
	for (size_t i = 0; i < a->files.n; i++)
		if (add(a, "--external") < 0 || add(a, "%s", a->files.f[i].key) < 0)
			return hutch_err_set(err, -E2BIG, "criu's arguments");
	snprintf(path, sizeof(path), "/proc/%d/fd/3", (int)pid);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0 || strncmp(target, "socket:[", 8))
		return hutch_err_set(err, -EPROTO, "init's fd 3 is not its socket");
	target[n] = '\0';
	if (add(a, "--external") < 0 || add(a, "unix[%.*s]", (int)(n - 9), target + 8) < 0)
		return hutch_err_set(err, -E2BIG, "criu's arguments");
	return 0;
}

/* init dumpable or not (HUTCH_MSG_DUMPABLE), seen done: /proc/PID/status's
 * owner is init's uid (the slot's base; an ordinary user's sandbox: the
 * user) when dumpable, the host's root when not (its mm's user namespace
 * is the host's: the kernel's task_dump_owner(); /proc/PID itself always
 * shows the uid). Bounded: 5 s. */
int hutch_sup_full_dumpable(struct sup *s, bool on, struct hutch_err *err)
{
	uint32_t v = on;
	uid_t want = !on ? 0 : s->idmap.rootless ? getuid() : s->uid_base;
	char path[48];
	struct stat st;
	int r;

	r = hutch_proto_send(s->init_sock, HUTCH_MSG_DUMPABLE, 0, &v, sizeof(v), NULL, 0);
	if (r < 0)
		return hutch_err_set_errno(err, r, "ask init to be %sdumpable", on ? "" : "non-");
	snprintf(path, sizeof(path), "/proc/%d/status", (int)s->init_pid);
	for (int i = 0; i < 5000; i++) {
		if (stat(path, &st) < 0)
			return hutch_err_set_errno(err, -errno, "init is gone");
		if (st.st_uid == want)
			return 0;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	return hutch_err_set(err, -ETIMEDOUT, "init did not become %sdumpable", on ? "" : "non-");
}

/* The sandbox's /dev/shm, beneath init's root (no symlink followed), the
 * mount mountinfo named there (shm_mnt): its fd, or the error. */
static int open_shm(pid_t pid, unsigned long long shm_mnt, struct hutch_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
		                           RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int root = -EBADF, fd = -EBADF;
	char path[48];

	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	if ((root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (fd = sys_openat2(root, SHM_PATH + 1, &how, sizeof(how))) < 0)
		return hutch_err_set_errno(err, -errno, "open " SHM_PATH);
	if (mount_of(fd) != (long long)shm_mnt)
		return hutch_err_set(err, -EXDEV, SHM_PATH " is not the tmpfs hutch mounted there");
	return TAKE_FD(fd);
}

/*
 * The disk's files (/workspace, /home/appuser, /tmp: external mounts, whose
 * contents CRIU does not keep) and /dev/shm's (external too: criu_remakes())
 * as files.tar beside the images, an OCI layer (image/tarwrite.c: by fd, no
 * symlink followed, ids mapped back to the sandbox's), read while CRIU
 * still holds every task stopped after the dump (its post-dump action):
 * what the processes' open files and memory say they wrote. A sandbox on
 * tmpfs has no disk: CRIU dumps tmpfs mounts' contents itself.
 */
static int capture_files(struct sup *s, unsigned long long shm_mnt, int dirfd, uint64_t *ret_bytes,
                         struct hutch_err *err)
{
	static const char *const sub[HUTCH_ROOTFS_WRITE_FDS] = {
		[HUTCH_ROOTFS_WRITE_WORKSPACE] = "workspace",
		[HUTCH_ROOTFS_WRITE_HOME] = "home",
		[HUTCH_ROOTFS_WRITE_TMP] = "tmp",
	};
	struct hutch_image_tar_src srcs[HUTCH_ROOTFS_WRITE_FDS + 1];
	int fds[HUTCH_ROOTFS_WRITE_FDS + 1] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
	_cleanup_close_ int out = -EBADF;
	struct hutch_image_tar_stats st = { 0 };
	size_t n = 0;
	int r = 0;

	*ret_bytes = 0;
	for (size_t i = 0; i < HUTCH_ROOTFS_WRITE_FDS && s->disk_fds[HUTCH_DISK_ROOT] >= 0; i++) {
		if (!sub[i])
			continue;
		fds[i] = openat(s->disk_fds[HUTCH_DISK_ROOT], sub[i],
		                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fds[i] < 0)
			continue; /* not on the disk */
		srcs[n++] = (struct hutch_image_tar_src){ .dirfd = fds[i],
			                                  .prefix = hutch_rootfs_write_paths[i] };
	}
	if (shm_mnt && (r = fds[HUTCH_ROOTFS_WRITE_FDS] = open_shm(s->init_pid, shm_mnt, err)) >= 0)
		srcs[n++] = (struct hutch_image_tar_src){ .dirfd = fds[HUTCH_ROOTFS_WRITE_FDS],
			                                  .prefix = SHM_PATH + 1 };
	if (r >= 0 && n &&
	    (out = openat(dirfd, "files.tar", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                  0600)) < 0)
		r = hutch_err_set_errno(err, -errno, "create files.tar");
	else if (r >= 0 && n)
		r = hutch_image_tar_dirs(out, srcs, n, s->uid_base, &st, err);
	hutch_close_many(fds, ELEMENTSOF(fds));
	*ret_bytes = st.bytes;
	return r < 0 ? hutch_err_prefix(err, "the sandbox's files") : 0;
}

/* CRIU's post-dump action (--action-script): it says so on the FIFO
 * "stopped" and waits on "go" for its exit status, while every task is
 * still stopped. Reached through the supervisor's fd of the directory. */
static int write_script(int dirfd, struct hutch_err *err)
{
	char text[512];
	int n;

	n = snprintf(text, sizeof(text),
	             "#!/bin/sh\n[ \"$CRTOOLS_SCRIPT_ACTION\" = post-dump ] || exit 0\n"
	             "d=/proc/%d/fd/%d\necho stopped > $d/stopped || exit 1\n"
	             "r=$(timeout 300 head -n1 $d/go) || exit 1\nexit $r\n",
	             (int)getpid(), dirfd);
	if (mkfifoat(dirfd, "stopped", 0600) < 0 || mkfifoat(dirfd, "go", 0600) < 0 ||
	    hutch_write_bytes_at(dirfd, "post-dump.sh", text, (size_t)n, 0700) < 0)
		return hutch_err_set_errno(err, -errno, "CRIU's post-dump action");
	return 0;
}

/* While CRIU runs: at its post-dump action, the disk's files read, then it
 * is let go ("0": resume, else fail). 0 also when CRIU ended without it
 * (its exit says why). */
static int serve_post_dump(struct sup *s, pid_t pid, unsigned long long shm_mnt, int dirfd,
                           uint64_t *ret_files, struct hutch_err *err)
{
	_cleanup_close_ int pfd = sys_pidfd_open(pid, 0), go = -EBADF;
	_cleanup_close_ int stopped = openat(dirfd, "stopped", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct pollfd p[2] = { { .fd = stopped, .events = POLLIN },
		               { .fd = pfd, .events = POLLIN } };
	int r;

	if (stopped < 0 || pfd < 0)
		return hutch_err_set_errno(err, -errno, "wait for CRIU");
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return hutch_err_set_errno(err, -errno, "wait for CRIU");
		}
		if (p[0].revents & POLLIN)
			break;
		if (p[1].revents)
			return 0;
	}
	r = capture_files(s, shm_mnt, dirfd, ret_files, err);
	/* The script opens "go" for reading right after its write. */
	for (int i = 0; i < 10000 && go < 0; i++) {
		go = openat(dirfd, "go", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (go < 0 && (errno != ENXIO || poll(&p[1], 1, 1) > 0))
			break;
	}
	if (go < 0 || write(go, r < 0 ? "1\n" : "0\n", 2) != 2)
		return r < 0 ? r : hutch_err_set_errno(err, -EIO, "let CRIU go on");
	return r;
}

/* criu dump in dirfd's images/ (its log dump.log there): 0, or its
 * exit's error with CRIU's own error lines. */
static int run_criu(struct sup *s, const struct hutch_criu *c, const struct criu_argv *a, int dirfd,
                    uint64_t *ret_files, struct hutch_err *err)
{
	static char *const envp[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		                      "/sbin:/bin",
		                      NULL };
	_cleanup_free_ char *log = malloc(LOG_TAIL + 1);
	_cleanup_close_ int lfd = -EBADF;
	char why[512];
	int status, r;
	pid_t pid;
	off_t end;
	ssize_t n;

	char rt[sizeof(s->paths.dir)];
	ino_t kdat = 0;
	_cleanup_close_ int run = -EBADF;
	_cleanup_(hutch_criu_cg_end) struct hutch_criu_cg cg = HUTCH_CRIU_CG_INIT;

	if (!log)
		return hutch_err_set(err, -ENOMEM, "criu dump");
	if ((r = hutch_criu_cg_new(s->cg, &cg, err)) < 0)
		return hutch_err_prefix(err, "criu dump");
	hutch_sup_full_runtime_dir(s, rt, sizeof(rt));
	run = hutch_criu_run_dir(rt, c, &kdat);
	pid = fork();
	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "fork criu");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (hutch_criu_cg_join(&cg) < 0)
			_exit(HUTCH_CRIU_CG_EXIT);
		/* The child's stdio: /dev/null (CRIU logs to images/dump.log). */
		if (null < 0 || fchdir(dirfd) < 0)
			_exit(127);
		for (int fd = 0; fd < 3; fd++)
			if (dup2(null, fd) < 0) /* lint-fds: ok: child stdio */
				_exit(127);
		/* CRIU's /run (its kernel features' cache), in a mount
		 * namespace of its own only: without it, CRIU detects them. */
		if (run >= 0 && unshare(CLONE_NEWNS) == 0 &&
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
			(void)hutch_criu_run_dir_attach(run);
		(void)sys_close_range(3, ~0U, 0);
		execve(c->path, a->v, envp);
		_exit(127);
	}
	r = serve_post_dump(s, pid, a->shm_mnt, dirfd, ret_files, err);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		hutch_criu_run_dir_keep(rt, c, run, kdat);
	hutch_criu_cg_end(&cg); /* what CRIU left (its action waiting on "go") */
	if (r < 0)
		return r;
	if (WIFEXITED(status) && WEXITSTATUS(status) == HUTCH_CRIU_CG_EXIT)
		return hutch_criu_cg_refused(&cg, "criu dump", err);
	/* A dump is whole when CRIU says so and wrote its inventory. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	    faccessat(dirfd, "images/inventory.img", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_IO, -EIO,
		        "criu dump exited 0 without an inventory.img: not CRIU?");
	log[0] = '\0';
	if ((lfd = openat(dirfd, "images/dump.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
	    (end = lseek(lfd, 0, SEEK_END)) >= 0 &&
	    (n = pread(lfd, log, LOG_TAIL, end > LOG_TAIL ? end - LOG_TAIL : 0)) >= 0)
		log[n] = '\0';
	hutch_criu_summarize_check(log, why, sizeof(why));
	if (WIFSIGNALED(status))
		return hutch_err_set_class(err, HUTCH_ERRC_IO, -EINTR,
		                           "criu dump was killed (signal %d): %.400s",
		                           WTERMSIG(status), why);
	return hutch_err_set_class(err, HUTCH_ERRC_IO, -EIO, "criu dump failed (exit %d): %.400s",
	                           WIFEXITED(status) ? WEXITSTATUS(status) : -1, why);
}

/* The bytes of the regular files of dirfd/sub. */
static uint64_t bytes_of(int parent, const char *sub)
{
	_cleanup_closedir_ DIR *d = NULL;
	uint64_t sum = 0;
	struct dirent *de;
	int fd = openat(parent, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_size;
	}
	return sum;
}

/* snapshot.json: what a restore needs besides CRIU's images. */
static int write_meta(struct sup *s, int dirfd, const struct hutch_criu *c,
                      const struct criu_argv *a, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	cJSON *args = o ? cJSON_AddArrayToObject(o, "criu_args") : NULL, *files;

	if (!args || !cJSON_AddStringToObject(o, "type", "full") ||
	    !cJSON_AddStringToObject(o, "source", s->id) ||
	    !cJSON_AddNumberToObject(o, "created", (double)time(NULL)) ||
	    !cJSON_AddStringToObject(o, "criu", c->version) ||
	    !cJSON_AddStringToObject(o, "kernel", c->kernel) ||
	    !cJSON_AddNumberToObject(o, "uid_base", (double)s->uid_base) ||
	    !cJSON_AddStringToObject(o, "instance_type", s->cfg->type->name))
		return hutch_err_set(err, -ENOMEM, "snapshot.json");
	for (size_t i = 0; i < a->n; i++)
		if (!cJSON_AddItemToArray(args, cJSON_CreateString(a->v[i])))
			return hutch_err_set(err, -ENOMEM, "snapshot.json");
	if (!(files = cJSON_AddObjectToObject(o, "files")))
		return hutch_err_set(err, -ENOMEM, "snapshot.json");
	for (size_t i = 0; i < a->files.n; i++)
		if (!cJSON_AddStringToObject(files, a->files.f[i].key, a->files.f[i].role))
			return hutch_err_set(err, -ENOMEM, "snapshot.json");
	if (!(text = cJSON_Print(o)))
		return hutch_err_set(err, -ENOMEM, "snapshot.json");
	return hutch_write_bytes_at(dirfd, "snapshot.json", text, strlen(text), 0600) < 0
	               ? hutch_err_set_errno(err, -errno, "write snapshot.json")
	               : 0;
}

/* CRIU's arguments: the dump of init's tree into images/, the sandbox left
 * running, every mount and file of the host named external. The network
 * namespace's configuration is not dumped (--empty-ns net): a sandbox that
 * can be dumped has network none, whose namespace is lo, up, and nothing
 * else (no command holds CAP_NET_ADMIN to change it); the restore makes
 * that again. CRIU would run eight programs for it (ip addr, route, rule
 * save; iptables-save, ip6tables-save and their legacy ones), 0.5-0.6 s
 * at load 10, and as many again to restore it. */
static int make_argv(struct sup *s, const char *criu, int dirfd, struct criu_argv *a,
                     struct hutch_err *err)
{
	int r;

	if (add(a, "%s", criu) < 0 || add(a, "dump") < 0 || add(a, "-t") < 0 ||
	    add(a, "%d", (int)s->init_pid) < 0 || add(a, "-D") < 0 || add(a, "images") < 0 ||
	    add(a, "-o") < 0 || add(a, "dump.log") < 0 || add(a, "--leave-running") < 0 ||
	    add(a, "--network-lock") < 0 || add(a, "skip") < 0 || add(a, "--empty-ns") < 0 ||
	    add(a, "net") < 0 || add(a, "--action-script") < 0 ||
	    add(a, "/proc/%d/fd/%d/post-dump.sh", (int)getpid(), dirfd) < 0)
		return hutch_err_set(err, -ENOMEM, "criu's arguments");
	if ((r = add_mounts(a, s->init_pid, err)) < 0 ||
	    (r = add_init_files(a, s->init_pid, err)) < 0)
		return r;
	return 0;
}

/* The dump into the store's tmp/ dirfd; init dumpable only meanwhile. */
static int dump(struct sup *s, const struct hutch_criu *c, int dirfd, uint64_t *ret_files,
                struct hutch_err *err)
{
	struct criu_argv a = { 0 };
	struct hutch_err back = { 0 };
	int r;

	if (mkdirat(dirfd, "images", 0700) < 0)
		return hutch_err_set_errno(err, -errno, "make the images' directory");
	r = make_argv(s, c->path, dirfd, &a, err);
	if (r >= 0)
		r = write_script(dirfd, err);
	if (r >= 0 && (r = hutch_sup_full_dumpable(s, true, err)) >= 0) {
		r = run_criu(s, c, &a, dirfd, ret_files, err);
		if (hutch_sup_full_dumpable(s, false, &back) < 0) {
			/* Not to be handed back dumpable: the sandbox ends. */
			hutch_event(s, "full snapshot: %s; ending the sandbox", back.msg);
			(void)kill(s->init_pid, SIGKILL);
			if (r >= 0)
				r = hutch_err_set(err, back.code, "%s", back.msg);
		}
	}
	(void)unlinkat(dirfd, "post-dump.sh", 0);
	if (r >= 0)
		r = write_meta(s, dirfd, c, &a, err);
	criu_argv_done(&a);
	return r;
}

int hutch_sup_snapshot_full(struct sup *s, const char *name, cJSON **ret, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *store = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	char auto_name[64], tmp[64], why[1024];
	struct hutch_criu c;
	double t0 = hutch_now_mono_sec(), ms;
	uint64_t bytes, files = 0;
	cJSON *o;
	int r;

	if ((r = check(s, err)) < 0)
		return r;
	if (name && *name && (r = hutch_sup_snapshot_name_check(name, err)) < 0)
		return r;
	probe(s, &c);
	if (!c.works) {
		hutch_criu_refusal(&c, why, sizeof(why));
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -EOPNOTSUPP, "%s", why);
	}
	if ((r = hutch_sup_snapshot_store(s, &store, err)) < 0 ||
	    (r = hutch_sup_snapshot_name(s, store, &name, auto_name, sizeof(auto_name), err)) < 0 ||
	    (dirfd = hutch_image_full_new(store, name, tmp, err)) < 0)
		return r < 0 ? r : dirfd;
	r = dump(s, &c, dirfd, &files, err);
	bytes = bytes_of(dirfd, "images");
	if (r >= 0)
		r = hutch_image_full_publish(store, tmp, name, err);
	if (r < 0) {
		hutch_image_full_abandon(store, tmp);
		return r;
	}
	ms = (hutch_now_mono_sec() - t0) * 1e3;
	hutch_event(s, "full snapshot %s: %llu bytes, %.1f ms", name, (unsigned long long)bytes,
	            ms);
	if (!(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "name", name) ||
	    !cJSON_AddStringToObject(o, "type", "full") ||
	    !cJSON_AddStringToObject(o, "source", s->id) ||
	    !cJSON_AddStringToObject(o, "criu", c.version) ||
	    !cJSON_AddNumberToObject(o, "bytes", (double)bytes) ||
	    !cJSON_AddNumberToObject(o, "file_bytes", (double)files) ||
	    !cJSON_AddNumberToObject(o, "duration_ms", ms)) {
		cJSON_Delete(o);
		return hutch_err_set(err, -ENOMEM, "full snapshot");
	}
	*ret = o;
	return 0;
}
