/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Disk that behaves as disk (issue 27): each sandbox's writable places
 * (/workspace, /home/appuser, /tmp and an image's writable layer) on one
 * ext4 file system of the instance's disk size, of its own: a sparse copy
 * of a template (made once per runtime dir and size by mke2fs) in an
 * O_TMPFILE on the host's disk, behind a loop device (autoclear, direct
 * I/O), mounted by the supervisor's side (root only: an ordinary user gets
 * no loop device, and keeps tmpfs). The disk size answers ENOSPC, `df`
 * tells the truth, and its page cache is reclaimable: writing never
 * OOM-kills. Nothing has a name: when the last mount of it goes (the
 * sandbox's mount namespace, also after a kill -9 of the supervisor) the
 * loop device detaches itself and the file is freed. docs/history.md
 * "Disk that behaves as disk".
 */
#ifndef HUTCH_DISK_H
#define HUTCH_DISK_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "rootfs.h"

/* What a made disk hands over: detached mounts of its directories for
 * init, by rootfs.h's HUTCH_ROOTFS_WRITE_* ([UPPER]: a directory holding
 * upper/ and work/ of an image's overlay; /workspace and /home/appuser
 * appuser's, 0755; /tmp 1777), then an fd of its root (the supervisor's,
 * for the shutdown) and of its file. */
enum {
	HUTCH_DISK_MOUNTS = HUTCH_ROOTFS_WRITE_FDS,
	HUTCH_DISK_ROOT = HUTCH_DISK_MOUNTS, /* O_RDONLY fd of the file system's root */
	HUTCH_DISK_FILE,                     /* its file (O_RDWR): a fork clones it (disk-fork.c) */
	HUTCH_DISK_FDS
};

/* Where a runtime dir's templates and stocks live. */
#define HUTCH_DISK_DIR ".disk"
/* Disks of each size a runtime dir's stock keeps made (disk-stock.c). */
#define HUTCH_DISK_STOCK 2

/* A disk being made by a child process while the rest of the sandbox is. */
struct hutch_disk_job {
	pid_t pid;
	int sock;
};

/*
 * Can this process make disks here? Root with /dev/loop-control and
 * mke2fs; else false with *why saying what is missing (static text).
 */
bool hutch_disk_possible(const char **why);

/*
 * Why runtime_dir's disks' files get no pool of their own (disk-pool.c;
 * static text naming the fix or the switch), NULL when they do.
 */
const char *hutch_disk_pool_why_not(const char *runtime_dir);

/* What a disk's taker asks its maker for (HUTCH_MSG_GO). */
struct hutch_disk_request {
	uid_t uid_base; /* the sandbox's root on the host; appuser is +1000 */
};

/*
 * A disk's maker, in a process of its own (it _exit()s): makes a disk of
 * bytes (the template in runtime_dir/.disk/, the file in runtime_dir when
 * that is on a disk, else in /var/tmp), then waits on sock for its taker's
 * request and answers with the fds (or HUTCH_MSG_FAILED, which it also
 * sends at once when the disk could not be made). EOF on sock ends it.
 */
__attribute__((noreturn)) void hutch_disk_maker(const char *runtime_dir, uint64_t bytes, int sock);
/* runtime_dir's template for bytes made, if it was not (mke2fs). */
int hutch_disk_template(const char *runtime_dir, uint64_t bytes, struct hutch_err *err);
/*
 * Make a disk of bytes now, in a child process, so that it overlaps the
 * rest of the setup (when the stock had none). 0 or -errno with err set.
 */
int hutch_disk_start(const char *runtime_dir, uint64_t bytes, struct hutch_disk_job *job,
                     struct hutch_err *err);
/* Ask job's maker (own or the stock's) for the disk, owned by the
 * sandbox whose host ids start at uid_base. */
int hutch_disk_request(struct hutch_disk_job *job, uid_t uid_base, struct hutch_err *err);
/* Wait for it: fds[HUTCH_DISK_FDS] on success (the caller closes them). */
int hutch_disk_finish(struct hutch_disk_job *job, int fds[HUTCH_DISK_FDS], struct hutch_err *err);
/* At the end (or a failed setup): end the child if it runs, reap it. */
void hutch_disk_abandon(struct hutch_disk_job *job);

/* What a sandbox's options ask of its disk: its setup's plan decides it
 * once (supervisor/setup.c), the steps below carry it out. */
enum hutch_disk_want {
	HUTCH_DISK_WANT_NONE, /* none: --workspace tmpfs, a kind without sizes inside */
	HUTCH_DISK_WANT_DISK, /* its own: the stock's maker (taken before) or one of its own */
	HUTCH_DISK_WANT_FORK, /* a fork's: its forker's (taken before) or none at all */
};
struct hutch_disk_plan {
	enum hutch_disk_want want;
	bool can;                   /* this sandbox may have one (root, sizes inside) */
	uint64_t bytes;             /* the instance type's disk */
	uid_t uid_base;             /* its owner: the sandbox's root on the host */
	char runtime_dir[PATH_MAX]; /* where a maker of its own works */
	/* A fork's (want FORK): its forker's socket's name, taken by the
	 * supervisor itself: at the disk step's start if it is there, else
	 * awaited at its end, after init's clone (hutch_disk_fork_await()),
	 * while creator_fd (the creator's end: its hang-up) and answer_fd
	 * (hutch fork's POST /fork: readable once answered; the name comes
	 * before) say whether it can still come (-1: not watched). */
	const char *fork_from;
	int creator_fd, answer_fd;
};
/*
 * A setup's disk step, before the clone: job's maker (the stock's, or a
 * fork's forker, taken before; sock -1: none) asked for the disk, else
 * (want DISK) one of its own started. 0: being made (or none wanted, or a
 * fork's not made yet: hutch_disk_fork_setup_take() after the clone); 1:
 * tmpfs instead, *why says why (static text, NULL: an ordinary user's,
 * always tmpfs); < 0 with err.
 */
int hutch_disk_setup_start(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                           const char **why, struct hutch_err *err);
/*
 * A fork's forker (want FORK) taken by the setup itself, by its name: at
 * the disk step's start (wait false: taken if it is there, else left),
 * and before its end (wait true, init cloned meanwhile: awaited as
 * struct hutch_disk_plan says, taken and asked; -ENOLINK with err: it will
 * not come, its creator or hutch fork gave up; -ETIMEDOUT). 0 otherwise
 * (another disk, or taken already).
 */
int hutch_disk_fork_setup_take(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                               bool wait, struct hutch_err *err);
/*
 * Its end, before GO: fds as hutch_disk_finish() (none when none was
 * asked). 1: tmpfs instead (a disk that could not be made: why has the
 * maker's error); < 0 with err: a fork's (its files are the fork).
 */
int hutch_disk_setup_finish(const struct hutch_disk_plan *p, struct hutch_disk_job *job,
                            int fds[HUTCH_DISK_FDS], struct hutch_err *why, struct hutch_err *err);

/* The change lists' fanotify group (changes-format.h) marked on the disk
 * of root: init's (init/changes.c), which may not mark a file system of
 * the host's user namespace. An fd or -errno. */
int hutch_disk_watch(int root);

/*
 * The end of a sandbox, its processes dead: the file system is shut down
 * without writing back what is still in memory (a throw-away disk), so
 * that its unmount is quicker, where there is such data (its delayed
 * allocation blocks; always where they cannot be read: Linux < 6.8). Its
 * last reference (root's close, or the last mount's) unmounts it.
 */
void hutch_disk_shutdown(int root);

/*
 * The stock (runtime/disk-stock.c): disks made ahead of time, HUTCH_DISK_STOCK
 * of each size per runtime dir, by a process of the dir's own that refills
 * it once its takers are done (its makers at a low priority; at once when
 * it is empty) and ends when the dir has had no sandbox and no take for a
 * while, or at `hutch gc`. Take one: the stock asked, not waited for (job->pid
 * HUTCH_DISK_JOB_ASKED, job->sock its connection, whose answer
 * hutch_disk_stock_answer() reads where the disk is needed: the
 * supervisor's disk step), and in *ret_hold a copy of the connection,
 * which the taker keeps open until it is done (closed by its exit; a
 * process forked from it that outlives it, a supervisor, closes its copy):
 * the stock refills then. -EAGAIN when the stock could not be asked (a
 * stock is started when none runs: the next create finds one), another
 * -errno when it could not be reached.
 */
#define HUTCH_DISK_JOB_ASKED (-2)
int hutch_disk_stock_take(const char *runtime_dir, uint64_t bytes, struct hutch_disk_job *job,
                          int *ret_hold);
/*
 * The stock's answer to job's take (HUTCH_DISK_JOB_ASKED; else nothing to
 * do, 0): job then holds its maker's socket (job->pid -1, made or being
 * made), or nothing (-EAGAIN: none in stock, or no answer within 2 s) and
 * the setup makes its own. The connection read is closed (the taker's hold
 * is the other copy).
 */
int hutch_disk_stock_answer(struct hutch_disk_job *job);
/* Stop runtime_dir's stocks and wait (bounded) for them to end. */
void hutch_disk_stock_stop(const char *runtime_dir);

/*
 * Forks (runtime/disk-fork.c): a disk filled with a copy of a live
 * sandbox's disk, made by a forker the source's supervisor starts, taken
 * by the fork's creator by name, as from the stock. The forker's socket
 * $RT/.disk/fork-*.sock, listening: start it on listener, filling its disk
 * from the source's once told (a clone of its file where the file system
 * shares extents and the sizes match, else cp -a of its files); *ret_ctl: its control socket (READY
 * when made, GO: copy, READY when copied, or FAILED with the reason; hutch_disk_fork_wait()).
 */
#define HUTCH_DISK_FORK_TAKE_MS 300000
struct hutch_disk_fork {
	const char *runtime_dir;
	uint64_t bytes;   /* the fork's disk size */
	int src_root;     /* the source's disk: its root (HUTCH_DISK_ROOT) */
	int src_file;     /* and its file (HUTCH_DISK_FILE): cloned where it can be */
	int client;       /* a pidfd of the fork's client (hutch fork), or -EBADF:
	                   * its end ends the forker while no fork took its disk */
	const char *name; /* its socket's name in $RT/.disk, and an O_PATH fd of */
	int path;         /* that socket (-EBADF: none): the forker removes the name
	                   * at its end while it is still its socket's */
};
/* A forker's socket's name ("fork-[a-z0-9-]+.sock", shorter than
 * HUTCH_DISK_FORK_NAME_MAX): given by the supervisor, or by the creator
 * (POST /fork's "names"). */
#define HUTCH_DISK_FORK_NAME_MAX 64
bool hutch_disk_fork_name_is_valid(const char *name);
/* The listening socket, its name made to appear once it listens;
 * exclusive: -EEXIST if the name is taken, else it replaces it. *ret_path:
 * an O_PATH fd of the socket's file (struct hutch_disk_fork's path). */
int hutch_disk_fork_listen(const char *runtime_dir, const char *name, bool exclusive, int *ret_path,
                           struct hutch_err *err);
int hutch_disk_fork_start(const struct hutch_disk_fork *f, int listener, int *ret_ctl,
                          struct hutch_err *err);
/* A forker made ahead (a source's next fork's, docs/snapshots.md "Fork"):
 * its file of bytes made in the disks' pool (cloning only), its loop device
 * configured and its ids' user namespace begun now, READY on *ret_ctl once
 * done; then it waits, holding none of the source's, until
 * hutch_disk_fork_give() (f's source's disk, client, name and path, and
 * the fork's listener; READY once it synced the source's file system, and
 * from there on as a forker started on them) or ctl's end or KILL.
 * *ret_pidfd: its pidfd, for the source's end to wait on. */
int hutch_disk_fork_start_ahead(const char *runtime_dir, uint64_t bytes, int *ret_ctl,
                                int *ret_pidfd, struct hutch_err *err);
int hutch_disk_fork_give(int ctl, const struct hutch_disk_fork *f, int listener,
                         struct hutch_err *err);
/* The forker's next answer on ctl: 0 (READY; 1 when its disk was filled
 * by a clone) or -errno with err its reason. */
int hutch_disk_fork_wait(int ctl, int timeout_ms, struct hutch_err *err);
/* Can a disk of bytes be filled by cloning file (a disk's HUTCH_DISK_FILE)
 * here: its size, and a clone tried into a new file (XFS, btrfs: yes). */
bool hutch_disk_can_clone(const char *runtime_dir, int file, uint64_t bytes);
/* The socket's name removed (a fork that failed before it was taken; a
 * forker removes its own at its end). */
void hutch_disk_fork_forget(const char *runtime_dir, const char *name);
/* The fork's creator: the forker's socket as job's (job->pid -1), asked
 * as a stock's maker is (hutch_disk_request()); -errno if it is gone. */
int hutch_disk_fork_take(const char *runtime_dir, const char *name, struct hutch_disk_job *job);
/*
 * Wait until the forker's socket name appears in runtime_dir's $RT/.disk
 * (a fork's supervisor whose create ran before its disk was made, at most
 * timeout_ms): 0 once it is there; -ECANCELED as soon as one of watch[]
 * (at most 2; events set by the caller) has an event with the name still
 * absent; -ETIMEDOUT; or -errno.
 */
struct pollfd;
int hutch_disk_fork_await(const char *runtime_dir, const char *name, struct pollfd *watch,
                          size_t nwatch, int timeout_ms);

/* `hutch gc`: runtime_dir's stocks and templates go when no sandbox is left in it
 * (a create meanwhile makes its own again). */
void hutch_disk_gc(const char *runtime_dir);

#endif
