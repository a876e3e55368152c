/* SPDX-License-Identifier: Apache-2.0 */
/*
 * try-syscall: run inside a sandbox, attempt each named operation and print
 * "NAME: ok" or "NAME: errno N (text)", one line each, then exit 0 (77 on a
 * usage error). In the spirit of bubblewrap's tests/try-syscall.c: the
 * tests read the errno to tell "blocked by seccomp" (EPERM, ENOSYS for
 * clone3, EAFNOSUPPORT...) from "blocked by missing capabilities" or "not
 * blocked at all". Every operation uses arguments that make it harmless
 * even if it is allowed: NULL or nonexistent paths, invalid fds, a module
 * module image, ioctls on fd -1, reboot with a wrong magic number.
 * Self-contained (no hutch headers) and linked -static-pie so it runs in
 * any root.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/reboot.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef AF_PACKET
#define AF_PACKET 17
#endif
#ifndef NETLINK_AUDIT
#define NETLINK_AUDIT 9
#endif

#define BOGUS_PATH "/nonexistent-try-syscall"

/* Each operation returns 0 on success or an errno value. */
typedef int (*op_fn)(void);

static int res(long r)
{
	return r < 0 ? errno : 0;
}

/* For calls that create an fd: close it if we got one. */
static int res_fd(long r)
{
	if (r < 0)
		return errno;
	close((int)r);
	return 0;
}

static int op_mount(void)
{
	return res(mount("none", BOGUS_PATH, "tmpfs", 0, NULL));
}

static int op_umount(void)
{
	return res(umount2(BOGUS_PATH, MNT_DETACH));
}

/* The flags init's re-binding of the /proc views uses, which the filter
 * lets through (runtime/seccomp.c, add_views_rules()): on a view itself,
 * the kernel must still refuse a command (no CAP_SYS_ADMIN). */
#ifndef UMOUNT_NOFOLLOW
#define UMOUNT_NOFOLLOW 8
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
static int op_umount_views(void)
{
	return res(umount2("/proc/meminfo", MNT_DETACH | UMOUNT_NOFOLLOW));
}

static int op_move_mount_views(void)
{
	int fd = open("/proc/uptime", O_PATH | O_CLOEXEC), r;

	if (fd < 0)
		return errno;
	r = res(syscall(__NR_move_mount, fd, "", AT_FDCWD, "/proc/meminfo",
	                MOVE_MOUNT_F_EMPTY_PATH));
	close(fd);
	return r;
}

static int op_pivot_root(void)
{
	return res(syscall(__NR_pivot_root, BOGUS_PATH, BOGUS_PATH));
}

static int op_chroot(void)
{
	return res(chroot(BOGUS_PATH));
}

/* Runs in a throw-away child so a success changes nothing here. */
static int in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn());
	if (waitpid(pid, &status, 0) < 0)
		return errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
}

static int do_unshare_user(void)
{
	return res(unshare(CLONE_NEWUSER));
}

static int do_unshare_net(void)
{
	return res(unshare(CLONE_NEWNET));
}

static int op_unshare_user(void)
{
	return in_child(do_unshare_user);
}

static int op_unshare_net(void)
{
	return in_child(do_unshare_net);
}

/* The raw syscall, as a process escaping libc's clone3-first logic would use. */
static int op_clone_newuser(void)
{
	int status;
	long pid = syscall(__NR_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL,
	                   NULL);

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(0);
	(void)waitpid((pid_t)pid, &status, 0);
	return 0;
}

/* clone3 with a zeroed, 64-byte struct clone_args: a plain fork if allowed. */
static int op_clone3(void)
{
	unsigned long long args[8] = { 0 };
	int status;
	long pid;

	args[4] = SIGCHLD; /* exit_signal */
#ifdef __NR_clone3
	pid = syscall(__NR_clone3, args, sizeof(args));
#else
	errno = ENOSYS;
	pid = -1;
#endif
	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(0);
	(void)waitpid((pid_t)pid, &status, 0);
	return 0;
}

static int op_setns(void)
{
	return res(setns(-1, 0));
}

/* BPF_PROG_LOAD with a NULL attr: EFAULT if bpf() is reachable. */
static int op_bpf(void)
{
	return res_fd(syscall(__NR_bpf, 5, NULL, 0));
}

static int op_perf_event_open(void)
{
	return res_fd(syscall(__NR_perf_event_open, NULL, 0, -1, -1, 0UL));
}

static int op_init_module(void)
{
	return res(syscall(__NR_init_module, NULL, 0UL, ""));
}

static int op_finit_module(void)
{
	return res(syscall(__NR_finit_module, -1, "", 0));
}

static int op_delete_module(void)
{
	return res(syscall(__NR_delete_module, "try_syscall_nonexistent", O_NONBLOCK));
}

/* Too many segments and a bogus architecture: EINVAL right after the capability check. */
static int op_kexec_load(void)
{
	return res(syscall(__NR_kexec_load, 0UL, 1000UL, NULL, 0xffff0000UL));
}

/* KEYCTL_GET_KEYRING_ID (0) of an invalid special keyring id. */
static int op_keyctl(void)
{
	return res(syscall(__NR_keyctl, 0, 0, 0));
}

static int op_add_key(void)
{
	return res(syscall(__NR_add_key, "user", NULL, NULL, 0, 0));
}

static int op_userfaultfd(void)
{
	return res_fd(syscall(__NR_userfaultfd, O_CLOEXEC));
}

static int op_io_uring_setup(void)
{
#ifdef __NR_io_uring_setup
	return res_fd(syscall(__NR_io_uring_setup, 1, NULL));
#else
	return ENOSYS;
#endif
}

static int op_open_by_handle_at(void)
{
	return res_fd(syscall(__NR_open_by_handle_at, -1, NULL, O_RDONLY));
}

/*
 * On fd -1, so nothing is ever pushed into a terminal: EBADF means the
 * request reached the kernel, EPERM that the filter stopped it.
 */
static int op_tiocsti(void)
{
	return res(ioctl(-1, TIOCSTI, "x"));
}

/* The same request with garbage in the high 32 bits, which the kernel ignores. */
static int op_tiocsti_high(void)
{
	return res(syscall(__NR_ioctl, -1, 0x100000000UL | TIOCSTI, "x"));
}

static int op_socket(int family, int type, int protocol)
{
	return res_fd(socket(family, type | SOCK_CLOEXEC, protocol));
}

static int op_socket_packet(void)
{
	return op_socket(AF_PACKET, SOCK_RAW, 0);
}

static int op_socket_raw(void)
{
	return op_socket(AF_INET, SOCK_RAW, 1 /* IPPROTO_ICMP */);
}

static int op_socket_netlink_audit(void)
{
	return op_socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
}

static int op_socket_netlink_route(void)
{
	return op_socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
}

static int op_socket_inet(void)
{
	return op_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
}

static int op_socket_inet6(void)
{
	return op_socket(AF_INET6, SOCK_DGRAM, 0);
}

static int op_socket_unix(void)
{
	return op_socket(AF_UNIX, SOCK_STREAM, 0);
}

static int op_socket_vsock(void)
{
	return op_socket(40 /* AF_VSOCK */, SOCK_STREAM, 0);
}

static int op_socket_alg(void)
{
	return op_socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0);
}

static int op_socketpair_inet(void)
{
	int sv[2];

	if (socketpair(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/*
 * PTRACE_SEIZE rather than PTRACE_ATTACH: same permission checks, but pid 1
 * is never stopped; the kernel detaches when this process exits.
 */
static int op_ptrace_init(void)
{
	return res(ptrace(PTRACE_SEIZE, 1, NULL, NULL));
}

/* Sets the name it already has, in the sandbox's own uts namespace anyway. */
static int op_sethostname(void)
{
	char name[256] = "";

	if (gethostname(name, sizeof(name) - 1) < 0)
		return errno;
	return res(sethostname(name, strlen(name)));
}

/*
 * "Ctrl-Alt-Del sends SIGINT to init", with a wrong second magic number:
 * the kernel checks CAP_SYS_BOOT first (EPERM), then the magic (EINVAL),
 * so it never acts.
 */
static int op_reboot(void)
{
	return res(syscall(__NR_reboot, LINUX_REBOOT_MAGIC1, 0x12345678, LINUX_REBOOT_CMD_CAD_OFF,
	                   NULL));
}

static int op_syslog(void)
{
	static char buf[4096];

	return res(syscall(__NR_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, (int)sizeof(buf)));
}

/* Tries READ_IMPLIES_EXEC, then restores the previous persona. */
static int op_personality_bad(void)
{
	int old = personality(0xffffffff);

	if (personality(READ_IMPLIES_EXEC) < 0)
		return errno;
	if (old >= 0)
		(void)personality((unsigned long)old);
	return 0;
}

static int op_personality_query(void)
{
	return res(personality(0xffffffff));
}

static int op_swapon(void)
{
	return res(syscall(__NR_swapon, BOGUS_PATH, 0));
}

static int op_acct(void)
{
	return res(syscall(__NR_acct, BOGUS_PATH)); /* NULL would switch accounting off */
}

static int op_settimeofday(void)
{
	return res(syscall(__NR_settimeofday, NULL, NULL));
}

static int op_getpid(void)
{
	return res(getpid());
}

static const struct op {
	const char *name;
	op_fn fn;
} ops[] = {
	{ "mount", op_mount },
	{ "umount", op_umount },
	{ "umount-views", op_umount_views },
	{ "move-mount-views", op_move_mount_views },
	{ "pivot_root", op_pivot_root },
	{ "chroot", op_chroot },
	{ "unshare-user", op_unshare_user },
	{ "unshare-net", op_unshare_net },
	{ "clone-newuser", op_clone_newuser },
	{ "clone3", op_clone3 },
	{ "setns", op_setns },
	{ "bpf", op_bpf },
	{ "perf_event_open", op_perf_event_open },
	{ "init_module", op_init_module },
	{ "finit_module", op_finit_module },
	{ "delete_module", op_delete_module },
	{ "kexec_load", op_kexec_load },
	{ "keyctl", op_keyctl },
	{ "add_key", op_add_key },
	{ "userfaultfd", op_userfaultfd },
	{ "io_uring_setup", op_io_uring_setup },
	{ "open_by_handle_at", op_open_by_handle_at },
	{ "tiocsti", op_tiocsti },
	{ "tiocsti-high", op_tiocsti_high },
	{ "socket-packet", op_socket_packet },
	{ "socket-raw", op_socket_raw },
	{ "socket-netlink-audit", op_socket_netlink_audit },
	{ "socket-netlink-route", op_socket_netlink_route },
	{ "socket-inet", op_socket_inet },
	{ "socket-inet6", op_socket_inet6 },
	{ "socket-unix", op_socket_unix },
	{ "socket-vsock", op_socket_vsock },
	{ "socket-alg", op_socket_alg },
	{ "socketpair-inet", op_socketpair_inet },
	{ "ptrace-init", op_ptrace_init },
	{ "sethostname", op_sethostname },
	{ "reboot", op_reboot },
	{ "syslog", op_syslog },
	{ "personality-bad", op_personality_bad },
	{ "personality-query", op_personality_query },
	{ "swapon", op_swapon },
	{ "acct", op_acct },
	{ "settimeofday", op_settimeofday },
	{ "getpid", op_getpid },
};

#define NOPS (sizeof(ops) / sizeof(ops[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: try-syscall NAME... | all\noperations:");
	for (size_t i = 0; i < NOPS; i++)
		fprintf(f, " %s", ops[i].name);
	fputc('\n', f);
}

static int run(const char *name)
{
	for (size_t i = 0; i < NOPS; i++) {
		if (strcmp(ops[i].name, name) != 0)
			continue;
		errno = 0;
		int e = ops[i].fn();

		if (e == 0)
			printf("%s: ok\n", name);
		else
			printf("%s: errno %d (%s)\n", name, e, strerror(e));
		fflush(stdout);
		return 0;
	}
	fprintf(stderr, "try-syscall: unknown operation '%s'\n", name);
	return -1;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc < 2) {
		usage(stderr);
		return 77;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "all") == 0) {
			for (size_t j = 0; j < NOPS; j++)
				(void)run(ops[j].name);
		} else if (run(argv[i]) < 0) {
			bad = 1;
		}
	}
	return bad ? 77 : 0;
}
