/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw syscalls that glibc 2.36 does not wrap (or wraps inconsistently), in
 * one place to audit the ABI. Each returns what the kernel returns through
 * syscall(2): -1 with errno set. Missing __NR_ numbers give -1/ENOSYS.
 */
#ifndef HUTCH_SYSCALLS_H
#define HUTCH_SYSCALLS_H

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SO_PEERPIDFD /* Linux 6.5 */
#define SO_PEERPIDFD 77
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define sys_missing()           \
	({                      \
		errno = ENOSYS; \
		-1;             \
	})

static inline long sys_clone3(struct clone_args *args, size_t size)
{
#ifdef __NR_clone3
	return syscall(__NR_clone3, args, size);
#else
	return sys_missing();
#endif
}

static inline int sys_pidfd_open(pid_t pid, unsigned int flags)
{
#ifdef __NR_pidfd_open
	return (int)syscall(__NR_pidfd_open, pid, flags);
#else
	return sys_missing();
#endif
}

/* A duplicate of another process's fd (close-on-exec), by its pidfd. */
static inline int sys_pidfd_getfd(int pidfd, int fd, unsigned int flags)
{
#ifdef __NR_pidfd_getfd
	return (int)syscall(__NR_pidfd_getfd, pidfd, fd, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_pidfd_send_signal(int pidfd, int sig, siginfo_t *info, unsigned int flags)
{
#ifdef __NR_pidfd_send_signal
	return (int)syscall(__NR_pidfd_send_signal, pidfd, sig, info, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_close_range(unsigned int first, unsigned int last, unsigned int flags)
{
#ifdef __NR_close_range
	return (int)syscall(__NR_close_range, first, last, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(__NR_pivot_root, new_root, put_old);
}

static inline int sys_openat2(int dirfd, const char *path, struct open_how *how, size_t size)
{
#ifdef __NR_openat2
	return (int)syscall(__NR_openat2, dirfd, path, how, size);
#else
	return sys_missing();
#endif
}

static inline int sys_open_tree(int dirfd, const char *path, unsigned int flags)
{
#ifdef __NR_open_tree
	return (int)syscall(__NR_open_tree, dirfd, path, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_move_mount(int from_dirfd, const char *from_path, int to_dirfd,
                                 const char *to_path, unsigned int flags)
{
#ifdef __NR_move_mount
	return (int)syscall(__NR_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_fsopen(const char *fsname, unsigned int flags)
{
#ifdef __NR_fsopen
	return (int)syscall(__NR_fsopen, fsname, flags);
#else
	return sys_missing();
#endif
}

static inline int sys_fsconfig(int fd, unsigned int cmd, const char *key, const void *value,
                               int aux)
{
#ifdef __NR_fsconfig
	return (int)syscall(__NR_fsconfig, fd, cmd, key, value, aux);
#else
	return sys_missing();
#endif
}

static inline int sys_fsmount(int fd, unsigned int flags, unsigned int attr_flags)
{
#ifdef __NR_fsmount
	return (int)syscall(__NR_fsmount, fd, flags, attr_flags);
#else
	return sys_missing();
#endif
}

static inline int sys_mount_setattr(int dirfd, const char *path, unsigned int flags,
                                    struct mount_attr *attr, size_t size)
{
#ifdef __NR_mount_setattr
	return (int)syscall(__NR_mount_setattr, dirfd, path, flags, attr, size);
#else
	return sys_missing();
#endif
}

/* seccomp(2): glibc 2.36 has no wrapper. prog is a struct sock_fprog *. */
static inline int sys_seccomp(unsigned int op, unsigned int flags, void *args)
{
#ifdef __NR_seccomp
	return (int)syscall(__NR_seccomp, op, flags, args);
#else
	return sys_missing();
#endif
}

/* capget(2)/capset(2): raw, so the child never goes through libcap. */
static inline int sys_capget(void *header, void *data)
{
	return (int)syscall(__NR_capget, header, data);
}

static inline int sys_capset(void *header, const void *data)
{
	return (int)syscall(__NR_capset, header, data);
}

/*
 * The kernel's value as it is (-errno on failure), errno never written:
 * for a child that shares our memory and TLS (base/bounded.h), where
 * glibc's wrappers and syscall(2) would write errno, ours, while we run
 * beside it. HUTCH_RAW_SYSCALLS 0: no such path on this architecture
 * (syscall(2) then, and bounded.c waits for such a child at once).
 */
#if defined(__x86_64__)
#define HUTCH_RAW_SYSCALLS 1
static inline long sys_raw5(long n, long a, long b, long c, long d, long e)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;

	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
	                 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
#define HUTCH_RAW_SYSCALLS 1
static inline long sys_raw5(long n, long a, long b, long c, long d, long e)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;

	__asm__ volatile("svc 0"
	                 : "+r"(x0)
	                 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4)
	                 : "memory", "cc");
	return x0;
}
#else
#define HUTCH_RAW_SYSCALLS 0
static inline long sys_raw5(long n, long a, long b, long c, long d, long e)
{
	long r = syscall(n, a, b, c, d, e);

	return r < 0 ? -errno : r;
}
#endif

#define sys_raw(n, a, b, c, d, e) \
	sys_raw5((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e))

#endif
