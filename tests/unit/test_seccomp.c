/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for runtime/seccomp.c, seccomp-load.c and runtime/caps.c. Each case forks a
 * child that installs the real filter (no root needed: the child sets
 * no_new_privs first) and tries one operation; the child's exit status
 * carries the errno it saw (0 = success), or it dies of SIGSYS for calls
 * from a foreign ABI. The capability test needs root to have something to
 * drop, and is skipped otherwise.
 */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "caps.h"
#include "error.h"
#include "seccomp-filter.h"

extern char **environ;

static struct sock_fprog prog;

static int setup(void **state)
{
	struct hutch_err err = { 0 };

	(void)state;
	/* The compiled-in program, as a sandbox gets it. */
	if (hutch_seccomp_program(HUTCH_NET_NONE, &prog, &err) < 0) {
		fprintf(stderr, "program: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return 0;
}

/* Run op in a child, under the filter if filtered; returns the raw wait status. */
static int run_child(int (*op)(void), bool filtered)
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int r;

		/* cmocka's handlers would catch SIGSYS/SIGSEGV and run the suite on here. */
		for (int sig = 1; sig < NSIG; sig++)
			(void)signal(sig, SIG_DFL);
		if (!filtered)
			_exit(op());
		r = hutch_seccomp_load(&prog);

		if (r < 0)
			_exit(250);
		_exit(op());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static int run_filtered(int (*op)(void))
{
	return run_child(op, true);
}

static void assert_result(int (*op)(void), int expected_errno)
{
	int status = run_filtered(op);

	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), expected_errno);
}

static int res(long r)
{
	return r < 0 ? errno : 0;
}

static int res_fd(long r)
{
	if (r < 0)
		return errno;
	close((int)r);
	return 0;
}

/* Denied operations. */

static int op_mount(void)
{
	return res(mount("none", "/nonexistent-hutch-test", "tmpfs", 0, NULL));
}

static int op_unshare_user(void)
{
	return res(unshare(CLONE_NEWUSER));
}

static int op_clone_newuser(void)
{
	long pid = syscall(__NR_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL,
	                   NULL);

	if (pid == 0)
		_exit(0);
	if (pid > 0)
		(void)waitpid((pid_t)pid, NULL, 0);
	return res(pid);
}

static int op_clone3(void)
{
	unsigned long long args[8] = { 0 };
	long pid;

	args[4] = SIGCHLD;
	pid = syscall(__NR_clone3, args, sizeof(args));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		(void)waitpid((pid_t)pid, NULL, 0);
	return res(pid);
}

static int op_socket_packet(void)
{
	return res_fd(socket(17 /* AF_PACKET */, SOCK_RAW | SOCK_CLOEXEC, 0));
}

static int op_socket_raw(void)
{
	return res_fd(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, 1));
}

static int op_socket_netlink_audit(void)
{
	return res_fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 9 /* NETLINK_AUDIT */));
}

static int op_socketpair_inet(void)
{
	int sv[2];

	return res(socketpair(AF_INET, SOCK_STREAM, 0, sv));
}

/* fd -1: EBADF would mean the request reached the kernel. */
static int op_tiocsti(void)
{
	return res(ioctl(-1, TIOCSTI, "x"));
}

static int op_tiocsti_high_bits(void)
{
	return res(syscall(__NR_ioctl, -1, 0x100000000UL | TIOCSTI, "x"));
}

static int op_tioclinux(void)
{
	return res(syscall(__NR_ioctl, -1, 0x541CUL, NULL));
}

static int op_personality_bad(void)
{
	return res(personality(READ_IMPLIES_EXEC));
}

static int op_bpf(void)
{
	return res_fd(syscall(__NR_bpf, 5, NULL, 0));
}

static int op_io_uring(void)
{
	return res_fd(syscall(__NR_io_uring_setup, 1, NULL));
}

/* Allowed operations. */

static int op_getpid(void)
{
	return res(getpid());
}

static int op_socket_inet(void)
{
	return res_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

static int op_socket_inet6_dgram(void)
{
	return res_fd(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

static int op_socket_netlink_route(void)
{
	return res_fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
}

static int op_socketpair_unix(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* Other ioctls reach the kernel: EBADF on fd -1. */
static int op_tcgets(void)
{
	struct termios t;

	return res(ioctl(-1, TCGETS, &t));
}

static void *thread_fn(void *arg)
{
	return arg;
}

static int op_pthread(void)
{
	pthread_t t;
	void *ret = NULL;
	int r = pthread_create(&t, NULL, thread_fn, (void *)1);

	if (r != 0)
		return r;
	r = pthread_join(t, &ret);
	return r != 0 ? r : (ret == (void *)1 ? 0 : 200);
}

static int op_fork(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(7);
	if (waitpid(pid, &status, 0) < 0)
		return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : 200;
}

/* posix_spawn is clone(CLONE_VM | CLONE_VFORK) after clone3's ENOSYS. */
static int op_posix_spawn(void)
{
	char *argv[] = { "true", NULL };
	int status;
	pid_t pid;
	int r = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);

	if (r != 0)
		return r;
	if (waitpid(pid, &status, 0) < 0)
		return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 200;
}

static int op_personality_query(void)
{
	return res(personality(0xffffffff));
}

static int op_getrandom(void)
{
	char buf[16];

	return res(syscall(__NR_getrandom, buf, sizeof(buf), 0));
}

static void test_build(void **state)
{
	struct sock_fprog p = { 0 };
	struct hutch_err err = { 0 };

	(void)state;
	assert_true(prog.len > 0 && prog.len <= BPF_MAXINSNS);
	assert_non_null(prog.filter);
	for (int m = HUTCH_NET_NONE; m <= HUTCH_NET_ALLOW; m++) {
		struct sock_fprog built = { 0 };

		/* What the build compiled in is what the rules give now. */
		assert_int_equal(hutch_seccomp_program((enum hutch_net_mode)m, &built, &err), 0);
		assert_int_equal(hutch_seccomp_compile((enum hutch_net_mode)m, &p, &err), 0);
		assert_int_equal(built.len, p.len);
		assert_memory_equal(built.filter, p.filter, p.len * sizeof(*p.filter));
		hutch_seccomp_prog_done(&p);
		assert_null(p.filter);
	}
	assert_int_equal(hutch_seccomp_compile((enum hutch_net_mode)42, &p, &err), -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_null(p.filter);
	err.code = 0;
	assert_int_equal(hutch_seccomp_program((enum hutch_net_mode)42, &p, &err), -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_null(p.filter);
	assert_int_equal(hutch_seccomp_load(NULL), -EINVAL);
}

/* What init does once, then a command's child: the check passes only where
 * the filter and no_new_privs were inherited. */
static int op_inherited(void)
{
	pid_t pid;
	int status;

	pid = fork();
	if (pid < 0)
		return 90;
	if (pid == 0)
		_exit(hutch_seccomp_check_inherited() == 0 ? 0 : 91);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 92;
	return WEXITSTATUS(status);
}

static int op_not_inherited(void)
{
	return hutch_seccomp_check_inherited() == -ENOTRECOVERABLE ? 0 : 93;
}

static void test_check_inherited(void **state)
{
	(void)state;
	assert_result(op_inherited, 0);
	assert_int_equal(WEXITSTATUS(run_child(op_not_inherited, false)), 0);
}

static void test_denied(void **state)
{
	(void)state;
	assert_result(op_mount, EPERM);
	assert_result(op_unshare_user, EPERM);
	assert_result(op_clone_newuser, EPERM);
	assert_result(op_clone3, ENOSYS);
	assert_result(op_socket_packet, EPERM);
	assert_result(op_socket_raw, EPERM);
	assert_result(op_socket_netlink_audit, EPERM);
	assert_result(op_socketpair_inet, EPERM);
	assert_result(op_tiocsti, EPERM);
	assert_result(op_tiocsti_high_bits, EPERM);
	assert_result(op_tioclinux, EPERM);
	assert_result(op_personality_bad, EPERM);
	assert_result(op_bpf, EPERM);
	assert_result(op_io_uring, EPERM);
}

static void test_allowed(void **state)
{
	(void)state;
	assert_result(op_getpid, 0);
	assert_result(op_socket_inet, 0);
	assert_result(op_socket_inet6_dgram, 0);
	assert_result(op_socket_netlink_route, 0);
	assert_result(op_socketpair_unix, 0);
	assert_result(op_tcgets, EBADF);
	assert_result(op_pthread, 0);
	assert_result(op_fork, 0);
	assert_result(op_posix_spawn, 0);
	assert_result(op_personality_query, 0);
	assert_result(op_getrandom, 0);
}

#ifdef __x86_64__
/* i386 getpid (20) through int 0x80: the audit arch is i386, not ours. */
static int op_int80(void)
{
	long ret = 20;

	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
	return ret < 0 ? 201 : 0;
}

/* x32 getpid: x86_64's audit arch with the x32 bit in the number. */
static int op_x32(void)
{
	return res(syscall(0x40000000L | __NR_getpid));
}

static void test_foreign_abi_killed(void **state)
{
	int status;

	(void)state;
	/* Kernels without ia32 emulation (or booted with ia32_emulation=0) fault on int 0x80. */
	status = run_child(op_int80, false);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		status = run_filtered(op_int80);
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGSYS);
	}
	/* x32 is checked by the filter itself, whether or not the kernel has it. */
	status = run_filtered(op_x32);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSYS);
}
#endif

static int caps_child(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	int r = hutch_caps_drop_child(65534, 65534);

	if (r < 0)
		return 100 + (-r & 0x7f);
	if (syscall(__NR_capget, &hdr, data) < 0)
		return 210;
	for (int i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return 211;
	if (prctl(PR_CAPBSET_READ, 0L /* CAP_CHOWN */, 0L, 0L, 0L) != 0)
		return 212;
	if (getuid() != 65534 || getgid() != 65534 || getgroups(0, NULL) != 0)
		return 213;
	/* No way back: these need capabilities. */
	if (setuid(0) == 0 || setgroups(0, NULL) == 0)
		return 214;
	/* The filter still loads after the drop (no_new_privs, no CAP_SYS_ADMIN needed). */
	if (hutch_seccomp_load(&prog) < 0)
		return 215;
	return 0;
}

/* init's side, then a command's: in a child of a child, so that the test
 * process keeps its bounding set. */
static int caps_init(void)
{
	pid_t pid;
	int status;

	/* Without the restriction the child's drop fails closed. */
	pid = fork();
	if (pid < 0)
		return 220;
	if (pid == 0)
		_exit(hutch_caps_drop_child(65534, 65534) == -ENOTRECOVERABLE ? 0 : 1);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 221;
	if (hutch_caps_restrict_init() < 0)
		return 222;
	/* init keeps what it needs to drop its children's privileges. */
	if (prctl(PR_CAPBSET_READ, 0L, 0L, 0L, 0L) != 0 || setgroups(0, NULL) < 0)
		return 223;
	pid = fork();
	if (pid < 0)
		return 224;
	if (pid == 0)
		_exit(caps_child());
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 225;
	return WEXITSTATUS(status);
}

/* A container's command: uid 1000 keeps CAP_KILL through its ambient set,
 * CAP_CHOWN stays bounded, nothing else. */
static int caps_container_child(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	uint64_t sets[HUTCH_CAPS_SETS] = { 0 };
	uint64_t kill = HUTCH_CAP_BIT(CAP_KILL);
	gid_t groups[] = { 5, 1001 }, got[4];
	int r;

	sets[HUTCH_CAPS_BOUNDING] = kill | HUTCH_CAP_BIT(CAP_CHOWN);
	sets[HUTCH_CAPS_EFFECTIVE] = sets[HUTCH_CAPS_PERMITTED] = kill;
	sets[HUTCH_CAPS_INHERITABLE] = sets[HUTCH_CAPS_AMBIENT] = kill;
	/* Beyond the set: refused before anything changes. */
	sets[HUTCH_CAPS_PERMITTED] |= HUTCH_CAP_BIT(CAP_SYS_ADMIN);
	if (hutch_caps_set_child(1000, 1000, NULL, 0, sets) != -EPERM)
		return 230;
	sets[HUTCH_CAPS_PERMITTED] = kill;
	r = hutch_caps_set_child(1000, 1000, groups, 2, sets);
	if (r < 0)
		return 100 + (-r & 0x7f);
	/* process.user.additionalGids */
	if (getgroups(4, got) != 2 || got[0] != 5 || got[1] != 1001)
		return 232;
	if (syscall(__NR_capget, &hdr, data) < 0)
		return 231;
	if (data[0].effective != kill || data[0].permitted != kill || data[1].permitted)
		return 232;
	if (prctl(PR_CAPBSET_READ, (unsigned long)CAP_CHOWN, 0L, 0L, 0L) != 1 ||
	    prctl(PR_CAPBSET_READ, (unsigned long)CAP_SETUID, 0L, 0L, 0L) != 0 ||
	    prctl(PR_CAPBSET_READ, (unsigned long)CAP_SYS_ADMIN, 0L, 0L, 0L) != 0)
		return 233;
	if (prctl(PR_CAP_AMBIENT, 1L /* IS_SET */, (unsigned long)CAP_KILL, 0L, 0L) != 1)
		return 234;
	if (getuid() != 1000 || setuid(0) == 0)
		return 235;
	return 0;
}

/* A container's init: the default set stays bounded; a plain command's
 * drop fails closed under it (other securebits). */
static int plain_drop_refused(void)
{
	return hutch_caps_drop_child(65534, 65534) == -ENOTRECOVERABLE ? 0 : 1;
}

/* fn in a child: its exit code, or 250 when it did not exit. */
static int in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn());
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 250;
	return WEXITSTATUS(status);
}

static int caps_container_init(void)
{
	if (hutch_seccomp_load(&prog) < 0) /* no_new_privs: set_child checks it */
		return 240;
	if (hutch_caps_restrict_container() < 0)
		return 241;
	if (prctl(PR_CAPBSET_READ, (unsigned long)CAP_SYS_ADMIN, 0L, 0L, 0L) != 0 ||
	    prctl(PR_CAPBSET_READ, (unsigned long)CAP_NET_RAW, 0L, 0L, 0L) != 1)
		return 242;
	if (in_child(plain_drop_refused) != 0)
		return 243;
	return in_child(caps_container_child);
}

/* Root only: op, unfiltered, in a child, must exit 0. */
static void assert_root_child_ok(int (*op)(void))
{
	int status;

	if (geteuid() != 0)
		skip();
	status = run_child(op, false);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_caps_drop(void **state)
{
	(void)state;
	assert_root_child_ok(caps_init);
}

static void test_caps_container(void **state)
{
	(void)state;
	assert_root_child_ok(caps_container_init);
}

/* Root without CAP_MKNOD in its bounding set: an exec'd helper gets no
 * CAP_MKNOD back, so mknod of a device fails (what hutch cp relies on when
 * it extracts a sandbox's tar stream). */
static int bound_drop_child(void)
{
	char dir[] = "/tmp/hutch-test-mknod-XXXXXX", node[64];
	int r;

	if (hutch_caps_bound_drop(CAP_MKNOD) < 0)
		return 1;
	if (prctl(PR_CAPBSET_READ, CAP_MKNOD, 0, 0, 0) != 0)
		return 2;
	if (hutch_caps_bound_drop(CAP_MKNOD) < 0) /* idempotent */
		return 3;
	if (!mkdtemp(dir))
		return 4;
	snprintf(node, sizeof(node), "%s/mem", dir);
	/* the bounding set limits what execve() grants: ask a new program */
	{
		char cmd[160];

		snprintf(cmd, sizeof(cmd), "mknod %s c 1 1 2>/dev/null", node);
		r = system(cmd);
	}
	unlink(node);
	rmdir(dir);
	return r != 0 ? 0 : 5;
}

static void test_caps_bound_drop(void **state)
{
	(void)state;
	assert_root_child_ok(bound_drop_child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build),
		cmocka_unit_test(test_check_inherited),
		cmocka_unit_test(test_denied),
		cmocka_unit_test(test_allowed),
#ifdef __x86_64__
		cmocka_unit_test(test_foreign_abi_killed),
#endif
		cmocka_unit_test(test_caps_drop),
		cmocka_unit_test(test_caps_container),
		cmocka_unit_test(test_caps_bound_drop),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
