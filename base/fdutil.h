/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OS-touching helpers that know nothing about sandboxes: whole reads and
 * writes, small files, directory removal, fd passing. All return >= 0 on
 * success or a negative errno.
 */
#ifndef HUTCH_FDUTIL_H
#define HUTCH_FDUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Lookup flags for host directories we own (cgroup, state dirs). */
#define HUTCH_RESOLVE_HOST (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)

/* write() all of buf, retrying on EINTR and short writes. */
int hutch_write_all(int fd, const void *buf, size_t len);
/* read() until len bytes or EOF; returns bytes read. */
ssize_t hutch_read_all(int fd, void *buf, size_t len);
/* Write a small file relative to dirfd (created/truncated with mode):
 * len bytes of buf, NULs included; _file_ writes a string. */
int hutch_write_bytes_at(int dirfd, const char *path, const void *buf, size_t len, mode_t mode);
int hutch_write_file_at(int dirfd, const char *path, const char *content, mode_t mode);
/* rename(from, to) that replaces an existing to by swapping the two
 * (RENAME_EXCHANGE) and unlinking from, its old content: readers see the
 * old file or the new whole, as with rename(), but ext4 does not force the
 * new file's blocks out (its auto_da_alloc on a rename over a file), so a
 * short-lived file is never allocated and its removal issues no discard. */
int hutch_rename_replace(const char *from, const char *to);
/* Write a string to an existing file (cgroup and /proc knobs), no O_CREAT. */
int hutch_write_knob_at(int dirfd, const char *path, const char *value);
/* Read a small file (at most max-1 bytes) into buf, NUL-terminated; returns length. */
ssize_t hutch_read_file_at(int dirfd, const char *path, char *buf, size_t max);
/* Read a whole file of unknown size (at most max bytes) into a new
 * NUL-terminated buffer (/proc/self/mountinfo can be large); returns length. */
ssize_t hutch_read_file_alloc_at(int dirfd, const char *path, size_t max, char **ret);
/* Remove a directory tree relative to dirfd without following symlinks. */
int hutch_rm_rf_at(int dirfd, const char *path);
/* mkdir -p relative to dirfd. */
int hutch_mkdir_p_at(int dirfd, const char *path, mode_t mode);
/* Set O_NONBLOCK on fd. */
int hutch_fd_nonblock(int fd, bool on);
/* Close a socket with a TCP reset (SO_LINGER 0): a connection refused. */
void hutch_close_reset(int fd);
/*
 * A level-triggered listener whose accept4() failed with EMFILE/ENFILE
 * would fire forever. Give up *spare (an fd kept open for this, -EBADF:
 * nothing to do), take the waiting connection and reset it, take the
 * spare again (the libev/nginx way). hutch_spare_fd() opens one.
 */
void hutch_accept_shed(int lfd, int *spare);
int hutch_spare_fd(void);
/* A non-blocking, close-on-exec unix stream socket listening on path
 * (a stale file there replaced), 0600 (the umask while it is bound): the
 * fd, or -errno. A path of any length: hutch_unix_addr()'s. */
int hutch_unix_listen(const char *path, int backlog);
/* connect() of the unix socket fd to path, of any length (a long one
 * through its directory's fd, hutch_unix_addr()): 0 or -errno. */
int hutch_unix_connect(int fd, const char *path);
struct sockaddr_un;
/* A unix socket address for path, for bind() or connect(): the path itself
 * when it fits sun_path (107 bytes), else "/proc/self/fd/N/NAME" through an
 * O_PATH fd N of its directory, returned in *ret_dirfd (-EBADF when not
 * needed; the caller closes it after the call). -ENAMETOOLONG only when
 * even that does not fit (a last name of over 90 bytes). */
int hutch_unix_addr(const char *path, struct sockaddr_un *ret, int *ret_dirfd);
/* A last name that hutch_unix_addr() always fits, whatever the fd's number:
 * 108 - "/proc/self/fd/" (14) - 10 digits - '/' - NUL. */
#define HUTCH_UNIX_NAME_MAX 82
/* Open (create, 0600, no symlink) dirfd/name and flock() it with op; the
 * fd, or -errno (-EWOULDBLOCK with LOCK_NB when held). */
int hutch_lock_at(int dirfd, const char *name, int op);
/*
 * A user namespace with these uid_map and gid_map contents (lines of
 * "INSIDE OUTSIDE COUNT"; the caller needs CAP_SETUID/CAP_SETGID over the
 * outside ids), for mount_setattr(MOUNT_ATTR_IDMAP): its fd. The process
 * that made it is killed once the fd is open and *ret_pid is left to reap
 * (at once, or later: its exit tears down a namespace and a copy of the
 * caller's memory, ~5 ms). -errno on failure (*ret_pid set if it ran).
 */
int hutch_userns_fd(const char *uid_map, const char *gid_map, pid_t *ret_pid);
/* The same in two steps, for a namespace made ahead of knowing its maps:
 * its process started (its pid, to reap, or -errno; it dies with its
 * parent), then its maps written and its fd opened (the fd or -errno; the
 * process killed either way, still to reap). */
pid_t hutch_userns_start(void);
int hutch_userns_finish(pid_t pid, const char *uid_map, const char *gid_map);
/* One byte on a unix socket, with fd passed along (SCM_RIGHTS) when
 * fd >= 0: 0 or -errno. */
int hutch_send_byte_fd(int sock, char b, int fd);
/* Receive one byte (recvmsg flags, e.g. MSG_DONTWAIT) and the fd that came
 * with it into *ret_fd (-EBADF if none; any more are closed): 1, 0 at the
 * end of the stream, or -errno. */
ssize_t hutch_recv_byte_fd(int sock, char *b, int *ret_fd, int flags);
/* Close fds[0..n) and mark them -EBADF. */
void hutch_close_many(int *fds, size_t n);
/* Every signal's disposition back to SIG_DFL (but SIGKILL's and SIGSTOP's):
 * the caller's handlers, and what its own caller ignored, which a child
 * would inherit across execve(). Only those that differ are reset, as
 * /proc/self/status lists them (all of them when it cannot be read). */
void hutch_signals_default(void);
/* Point fds 0, 1 and 2 at /dev/null (a detached process). */
void hutch_stdio_to_null(void);
/* Fork a detached grandchild: it gets 0 (new session, reparented to init or
 * the nearest subreaper); the caller gets the middle child's pid, to reap
 * at once, or -errno. */
pid_t hutch_fork_detached(void);
/* The same, the grandchild holding none of the caller's fds but 0, 1, 2
 * and keep (-1: none), closed before the middle child exits: once the
 * caller has reaped it, no lock or socket of the caller's is held on by a
 * child not yet scheduled, but the one it is given (keep >= 3). */
pid_t hutch_fork_detached_bare(int keep);
/* Fork a child in a new session of its own, for a caller that exits soon
 * and never waits for it: the child is reparented to init or the nearest
 * subreaper then (until then, if it ends first, it is the caller's zombie).
 * One fork where hutch_fork_detached() makes two: no middle child, whose
 * copy of the caller's address space costs ~3 ms of CPU and 15 page faults
 * on the path of `hutch run` (docs/performance.md). Returns 0 in the
 * child, its pid in the caller, or -errno. */
pid_t hutch_fork_session(void);
/* Exit as a process with this wait status did: its code, or death by its
 * signal (re-raised, no core). For whoever waits for us in its stead. */
__attribute__((noreturn)) void hutch_exit_like(int status);

#endif
