/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seccomp allow-list every sandbox command runs under. The rules below
 * are compiled with libseccomp (hutch_seccomp_compile()) to one classic
 * BPF program per network mode at build time (seccomp-gen.c writes them
 * into a C file that is part of hutch; seccomp-load.c looks them up), and
 * each sandbox's init installs its program on itself once setup is done
 * (hutch_seccomp_load()); every command inherits it, and init itself runs
 * under it from then on.
 * This file is not linked into hutch. The list follows the spirit of Docker's default
 * profile for an unprivileged container (moby profiles/seccomp/default.json)
 * and is written out here as grouped tables, plus argument filters for the
 * calls that are only safe with some arguments: clone (no namespace flags),
 * ioctl (no TIOCSTI/TIOCLINUX), socket/socketpair (families the network
 * mode needs, never raw or packet sockets) and personality (Docker's safe
 * values).
 *
 * Error choice: anything not on the list fails with EPERM, as under Docker.
 * It is the truthful answer ("policy forbids this") and it is also where the
 * argument filters land when they do not match. Two exceptions return
 * ENOSYS instead, so that libc and tools fall back as they would on an
 * older kernel: clone3 (its flags sit in memory where a filter cannot read
 * them, and glibc >= 2.34 retries with clone only on ENOSYS) and a few
 * syscalls newer than this table whose callers are known to probe.
 *
 * Architectures: only the native ABI is allowed. Everything else (i386 via
 * int 0x80, x32 on x86_64) kills the process. The image is host-derived, so
 * there are no foreign binaries to run, x32 is disabled in most kernels, and
 * on i386 the socketcall() multiplexer would hide socket()'s arguments from
 * the filter. libseccomp checks the x32 syscall bit on x86_64 for us.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <seccomp.h>

#include "cleanup.h"
#include "error.h"
#include "fdutil.h"
#include "seccomp-filter.h"

static inline void seccompp(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}
#define _cleanup_seccomp_ _cleanup_(seccompp)

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* clone()'s flags are its first argument except on s390, where the stack comes first. */
#if defined(__s390__) || defined(__s390x__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* Every namespace flag; a command may create threads and processes, never namespaces. */
#define CLONE_NS_FLAGS                                                                             \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWCGROUP | CLONE_NEWTIME)

/* The kernel reads int and unsigned int arguments as 32 bits: compare only those. */
#define LO32 0xffffffffULL

/*
 * Allowed unconditionally. Names this libseccomp does not know, or that do
 * not exist on the native architecture (the 32-bit variants), are skipped,
 * so the table can list every ABI's spelling.
 *
 * Deliberately absent (they fall to EPERM): mount, umount, umount2 and
 * move_mount (but for init's re-binding of the /proc views, below:
 * add_views_rules()), pivot_root, chroot, the rest of the new mount API
 * (fsopen, fsconfig, fsmount, fspick, open_tree, mount_setattr), unshare, setns, bpf,
 * perf_event_open, kexec_load, kexec_file_load, init_module, finit_module,
 * delete_module, keyctl, add_key, request_key, userfaultfd, io_uring_setup,
 * io_uring_enter, io_uring_register, open_by_handle_at, name_to_handle_at,
 * lookup_dcookie, acct, swapon, swapoff, reboot, syslog, quotactl,
 * quotactl_fd, settimeofday, stime, clock_settime, adjtimex, clock_adjtime,
 * sethostname, setdomainname, iopl, ioperm, modify_ldt, vhangup,
 * nfsservctl, fanotify_init, pidfd_getfd, kcmp, process_madvise,
 * set_mempolicy, mbind, move_pages, migrate_pages, uselib,
 * ustat, sysfs, _sysctl. Most of these need a capability appuser does not
 * have; the filter removes the kernel attack surface behind them as well
 * (io_uring, bpf, userfaultfd, keyrings and perf have been the source of
 * many local privilege escalations).
 *
 * Allowed on purpose although sensitive: ptrace, process_vm_readv and
 * process_vm_writev. Since Linux 4.8 seccomp is re-checked after a tracer
 * changes a syscall, so ptrace cannot bypass the filter; the kernel limits
 * it to processes of the same uid with no more capabilities (appuser has
 * none), the pid namespace hides everything outside the sandbox, and
 * debuggers, strace and profilers need it.
 */
/* Grouped lines read better than one name per line. */
/* clang-format off */
static const char *const allowed[] = {
	/* process lifetime and identity */
	"execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4", "waitid", "waitpid",
	"getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "restart_syscall",
	"uname", "sysinfo", "getcpu", "getrandom", "umask", "prctl", "arch_prctl", "seccomp",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"capget", "capset", /* capset can only lower what the process has */

	/* limits, priorities, scheduling */
	"getrlimit", "setrlimit", "ugetrlimit", "prlimit64", "getrusage", "times", "getpriority",
	"setpriority", "ioprio_get", "ioprio_set", "sched_yield", "sched_getaffinity",
	"sched_setaffinity", "sched_getparam", "sched_setparam", "sched_getscheduler",
	"sched_setscheduler", "sched_getattr", "sched_setattr", "sched_get_priority_max",
	"sched_get_priority_min", "sched_rr_get_interval", "sched_rr_get_interval_time64",

	/* credentials: changing ids needs CAP_SETUID/CAP_SETGID, which appuser lacks */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"getuid32", "geteuid32", "getgid32", "getegid32", "getresuid32", "getresgid32",
	"getgroups32", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setgroups", "setfsuid", "setfsgid", "setuid32", "setgid32", "setreuid32", "setregid32",
	"setresuid32", "setresgid32", "setgroups32", "setfsuid32", "setfsgid32",

	/* other processes: signals, pidfds, tracing (see above) */
	"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open",
	"pidfd_send_signal", "process_mrelease", "ptrace", "process_vm_readv",
	"process_vm_writev",

	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
	"rt_sigtimedwait", "rt_sigtimedwait_time64", "sigaltstack", "signalfd", "signalfd4",
	"sigreturn", "sigprocmask", "pause", "alarm", "getitimer", "setitimer",

	/* memory */
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
	"mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "membarrier",
	"memfd_create", "memfd_secret", "pkey_alloc", "pkey_free", "pkey_mprotect", "cachestat",
	"map_shadow_stack",
	"get_mempolicy", /* a read of the caller's own NUMA policy; ps and top probe it */

	/* threads and futexes */
	"futex", "futex_time64", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
	"get_thread_area", "set_thread_area",

	/* clocks and timers (reading only: setting the time is absent) */
	"clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64",
	"clock_nanosleep", "clock_nanosleep_time64", "nanosleep", "gettimeofday", "time",
	"timer_create", "timer_delete", "timer_settime", "timer_settime64", "timer_gettime",
	"timer_gettime64", "timer_getoverrun", "timerfd_create", "timerfd_settime",
	"timerfd_settime64", "timerfd_gettime", "timerfd_gettime64",

	/* file descriptors and I/O */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "preadv2", "pwritev",
	"pwritev2", "lseek", "_llseek", "close", "close_range", "dup", "dup2", "dup3", "fcntl",
	"fcntl64", "flock", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
	"fallocate", "fadvise64", "fadvise64_64", "readahead", "copy_file_range", "sendfile",
	"sendfile64", "splice", "tee", "vmsplice", "pipe", "pipe2", "eventfd", "eventfd2",

	/* paths: open, stat, directories, links, attributes */
	"open", "openat", "openat2", "creat", "stat", "stat64", "lstat", "lstat64", "fstat",
	"fstat64", "newfstatat", "fstatat64", "statx", "statfs", "statfs64", "fstatfs",
	"fstatfs64", "access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd",
	"chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link",
	"linkat", "symlink", "symlinkat", "unlink", "unlinkat", "readlink", "readlinkat",
	"truncate", "truncate64", "ftruncate", "ftruncate64", "chmod", "fchmod", "fchmodat",
	"fchmodat2", "chown", "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32",
	"utime", "utimes", "utimensat", "utimensat_time64", "futimesat",
	"mknod", "mknodat", /* FIFOs and sockets; device nodes need CAP_MKNOD */
	"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr",
	"llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	"fanotify_mark", /* useless without fanotify_init, which is absent */

	/* polling */
	"poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "epoll_ctl_old", "epoll_wait_old",

	/* Linux AIO (not io_uring) */
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	"io_pgetevents_time64",

	/* sockets once created (creation is filtered below) */
	"bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "shutdown", "send", "sendto", "sendmsg", "sendmmsg", "recv",
	"recvfrom", "recvmsg", "recvmmsg", "recvmmsg_time64",

	/* System V and POSIX IPC, private to the sandbox's ipc namespace */
	"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
	"semtimedop_time64", "semctl", "shmget", "shmat", "shmdt", "shmctl", "mq_open",
	"mq_unlink", "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive",
	"mq_timedreceive_time64", "mq_notify", "mq_getsetattr",

	/* architecture-specific helpers (skipped where they do not exist) */
	"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint",
	"cacheflush", "set_tls", "riscv_flush_icache", "s390_runtime_instr",
};
/* clang-format on */

/*
 * Syscalls newer than libseccomp 2.5.4's table, by x86_64 number, so that
 * hosts with a newer glibc or util-linux keep working. On other
 * architectures they fall to the default action.
 */
struct newer_syscall {
	const char *name;
	int x86_64_nr;
	bool allow; /* else ENOSYS: callers fall back as on an older kernel */
};

static const struct newer_syscall newer[] = {
	{ "statmount", 457, false }, /* libmount falls back to mountinfo */
	{ "listmount", 458, false },
	{ "lsm_get_self_attr", 459, false },
	{ "lsm_set_self_attr", 460, false },
	{ "lsm_list_modules", 461, false },
	{ "mseal", 462, true },      /* only restricts the caller */
	{ "setxattrat", 463, true }, /* the *xattr family with a dirfd */
	{ "getxattrat", 464, true },
	{ "listxattrat", 465, true },
	{ "removexattrat", 466, true },
};

/* Native number for name, or -1 if unknown here or not a native syscall. */
static int resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	return nr < 0 ? -1 : nr;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned int n,
                    const struct scmp_arg_cmp *cmp, struct hutch_err *err)
{
	int nr = resolve(name);
	int r;

	if (nr < 0)
		return 0;
	r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (r < 0)
		return hutch_err_set_errno(err, r, "rule for '%s'", name);
	return 0;
}

/*
 * Allow ioctl unless the low 32 bits of its request are in denied[]
 * (ascending). The complement becomes aligned power-of-two blocks, one
 * masked comparison each. Rules for one syscall are OR'ed and these never
 * overlap, so the result does not depend on how libseccomp orders
 * overlapping rules with different actions (it leaves that undefined: an
 * unconditional allow would swallow a conditional deny). The high 32 bits
 * are not compared because the kernel ignores them too (cmd is an
 * unsigned int): the check sees exactly the request the kernel will act on,
 * and sign-extended requests from musl still pass.
 */
static int allow_ioctl_except(scmp_filter_ctx ctx, const uint32_t *denied, size_t n,
                              struct hutch_err *err)
{
	uint64_t lo = 0;

	for (size_t i = 0; i <= n; i++) {
		/* allow [lo, end): up to the next denied request, or to 2^32 */
		uint64_t end = i < n ? denied[i] : LO32 + 1;

		while (lo < end) {
			uint64_t size = 1;
			struct scmp_arg_cmp cmp;
			int r;

			while (size < (1ULL << 32) && (lo & (size * 2 - 1)) == 0 &&
			       lo + size * 2 <= end)
				size *= 2;
			cmp = SCMP_CMP(1, SCMP_CMP_MASKED_EQ, LO32 & ~(size - 1), lo);
			r = add_rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &cmp, err);
			if (r < 0)
				return r;
			lo += size;
		}
		lo = end + 1;
	}
	return 0;
}

/* clone without namespace flags; clone3 returns ENOSYS so glibc uses clone. */
static int add_clone_rules(scmp_filter_ctx ctx, struct hutch_err *err)
{
	struct scmp_arg_cmp cmp =
	        SCMP_CMP(CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, (uint64_t)CLONE_NS_FLAGS, 0);
	int r;

	r = add_rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &cmp, err);
	if (r < 0)
		return r;
	return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err);
}

/*
 * ioctl with any request but TIOCSTI (pushes input into a terminal that a
 * process outside may read from: the classic sandbox escape) and TIOCLINUX
 * (the same through the console's selection buffer).
 */
static int add_ioctl_rules(scmp_filter_ctx ctx, struct hutch_err *err)
{
	static const uint32_t denied[] = { TIOCSTI, TIOCLINUX }; /* ascending */

	return allow_ioctl_except(ctx, denied, ELEMENTSOF(denied), err);
}

/*
 * umount2 and move_mount with exactly the flags init uses to re-bind the
 * /proc views when the runtime dir's lxcfs ended under a live sandbox
 * (rootfs.h: hutch_rootfs_views_rebind()): init runs under this filter
 * too, and holds CAP_SYS_ADMIN in the sandbox's user namespace. For every
 * command the kernel still says EPERM, as the filter did: both calls
 * check CAP_SYS_ADMIN over the caller's mount namespace (may_mount())
 * before they touch a mount (move_mount first thing; umount2 after the
 * path's lookup, which stat() makes as well), no command holds it in any
 * namespace (appuser has no capabilities, a container's set never has
 * it: caps.h), and none can make a namespace where it would (clone and
 * unshare are filtered above).
 */
static int add_views_rules(scmp_filter_ctx ctx, struct hutch_err *err)
{
	struct scmp_arg_cmp umount =
	        SCMP_CMP(1, SCMP_CMP_MASKED_EQ, LO32, (uint64_t)(MNT_DETACH | UMOUNT_NOFOLLOW));
	struct scmp_arg_cmp move =
	        SCMP_CMP(4, SCMP_CMP_MASKED_EQ, LO32, (uint64_t)MOVE_MOUNT_F_EMPTY_PATH);
	int r = add_rule(ctx, SCMP_ACT_ALLOW, "umount2", 1, &umount, err);

	return r < 0 ? r : add_rule(ctx, SCMP_ACT_ALLOW, "move_mount", 1, &move, err);
}

/* personality(2): only the values Docker allows (query, PER_LINUX, UNAME26, PER_LINUX32). */
static int add_personality_rules(scmp_filter_ctx ctx, struct hutch_err *err)
{
	static const uint32_t ok[] = { PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
		                       0xffffffffu };

	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		struct scmp_arg_cmp cmp = SCMP_CMP(0, SCMP_CMP_MASKED_EQ, LO32, ok[i]);
		int r = add_rule(ctx, SCMP_ACT_ALLOW, "personality", 1, &cmp, err);

		if (r < 0)
			return r;
	}
	return 0;
}

static int allow_socket(scmp_filter_ctx ctx, int family, int type, int protocol,
                        struct hutch_err *err)
{
	struct scmp_arg_cmp cmp[3];
	unsigned int n = 0;

	cmp[n++] = SCMP_CMP(0, SCMP_CMP_MASKED_EQ, LO32, (uint64_t)family);
	/* type may carry SOCK_NONBLOCK | SOCK_CLOEXEC: compare SOCK_TYPE_MASK only */
	if (type >= 0)
		cmp[n++] = SCMP_CMP(1, SCMP_CMP_MASKED_EQ, 0xfULL, (uint64_t)type);
	if (protocol >= 0)
		cmp[n++] = SCMP_CMP(2, SCMP_CMP_MASKED_EQ, LO32, (uint64_t)protocol);
	return add_rule(ctx, SCMP_ACT_ALLOW, "socket", n, cmp, err);
}

/*
 * Socket families per network mode. Every mode gets unix sockets, TCP and
 * UDP over IPv4/IPv6 (with mode none the netns has only loopback, so they
 * reach nothing outside but local servers and test suites still work), and
 * NETLINK_ROUTE, which glibc's getaddrinfo() and `ip addr` read. Never raw
 * or packet sockets, other netlink protocols (audit, xfrm, uevents...) or
 * exotic families (AF_ALG, AF_VSOCK, AF_KEY, bluetooth...), whose modules
 * are frequent sources of kernel bugs. Kept per mode so later modes can
 * differ (allow mode might drop UDP beyond the DNS stub, for instance).
 */
static int add_socket_rules(scmp_filter_ctx ctx, enum hutch_net_mode mode, struct hutch_err *err)
{
	static const int inet_families[] = { AF_INET, AF_INET6 };
	static const int inet_types[] = { SOCK_STREAM, SOCK_DGRAM };
	struct scmp_arg_cmp unix_only = SCMP_CMP(0, SCMP_CMP_MASKED_EQ, LO32, AF_UNIX);
	int r;

	switch (mode) {
	case HUTCH_NET_NONE:
	case HUTCH_NET_ALL:
	case HUTCH_NET_ALLOW:
		break;
	default:
		return hutch_err_set(err, -EINVAL, "unknown network mode %d", (int)mode);
	}

	r = allow_socket(ctx, AF_UNIX, -1, -1, err);
	if (r < 0)
		return r;
	for (size_t f = 0; f < ELEMENTSOF(inet_families); f++)
		for (size_t t = 0; t < ELEMENTSOF(inet_types); t++) {
			r = allow_socket(ctx, inet_families[f], inet_types[t], -1, err);
			if (r < 0)
				return r;
		}
	r = allow_socket(ctx, AF_NETLINK, -1, NETLINK_ROUTE, err);
	if (r < 0)
		return r;
	return add_rule(ctx, SCMP_ACT_ALLOW, "socketpair", 1, &unix_only, err);
}

static int add_table_rules(scmp_filter_ctx ctx, struct hutch_err *err)
{
	int r;

	for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
		r = add_rule(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ELEMENTSOF(newer); i++) {
		uint32_t action = newer[i].allow ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(ENOSYS);
		int nr = resolve(newer[i].name);

#ifdef __x86_64__
		if (nr < 0)
			nr = newer[i].x86_64_nr;
#endif
		if (nr < 0)
			continue;
		r = seccomp_rule_add(ctx, action, nr, 0);
		if (r < 0)
			return hutch_err_set_errno(err, r, "rule for '%s'", newer[i].name);
	}
	return 0;
}

/* Copy the exported program out of a memfd (libseccomp 2.5 has no export to memory). */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *ret, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ struct sock_filter *insns = NULL;
	struct stat st;
	ssize_t n;
	int r;

	fd = memfd_create("hutch-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "memfd_create");
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return hutch_err_set_errno(err, r, "export filter");
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "stat exported filter");
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return hutch_err_set(err, -E2BIG, "exported filter has bad size %lld",
		                     (long long)st.st_size);
	insns = malloc((size_t)st.st_size);
	if (!insns)
		return hutch_err_set_errno(err, -ENOMEM, "allocate filter");
	if (lseek(fd, 0, SEEK_SET) < 0)
		return hutch_err_set_errno(err, -errno, "rewind exported filter");
	n = hutch_read_all(fd, insns, (size_t)st.st_size);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read exported filter");
	if (n != st.st_size)
		return hutch_err_set(err, -EIO, "short read of exported filter");

	ret->len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	ret->filter = TAKE_PTR(insns);
	return 0;
}

int hutch_seccomp_compile(enum hutch_net_mode mode, struct sock_fprog *ret, struct hutch_err *err)
{
	_cleanup_seccomp_ scmp_filter_ctx ctx = NULL;
	int r;

	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return hutch_err_set(err, -ENOMEM, "init filter");
	/* Foreign ABIs die at once instead of probing around the filter (see top). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return hutch_err_set_errno(err, r, "set bad-arch action");
	/* The child sets no_new_privs itself, before installing the program. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (r < 0)
		return hutch_err_set_errno(err, r, "clear nnp attribute");
	/* Binary search over syscall numbers instead of a linear chain: ~9 jumps, not ~300. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return hutch_err_set_errno(err, r, "set optimize level");

	r = add_table_rules(ctx, err);
	if (r >= 0)
		r = add_clone_rules(ctx, err);
	if (r >= 0)
		r = add_ioctl_rules(ctx, err);
	if (r >= 0)
		r = add_personality_rules(ctx, err);
	if (r >= 0)
		r = add_views_rules(ctx, err);
	if (r >= 0)
		r = add_socket_rules(ctx, mode, err);
	if (r < 0)
		return r;
	return export_prog(ctx, ret, err);
}

void hutch_seccomp_prog_done(struct sock_fprog *prog)
{
	if (!prog)
		return;
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
