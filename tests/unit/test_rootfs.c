/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the rootfs library's pure parts: the synthesized /etc
 * databases, and the tables that decide what of the host becomes visible
 * (system dirs, /etc allow-list, /dev nodes, /proc masks); the lookup of
 * lxcfs's views beside its caller (base/bounded.h), which must leave the
 * caller's errno alone. The mounting itself needs namespaces and is
 * covered by the integration tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounded.h"
#include "cleanup.h"
#include "rootfs-internal.h"
#include "rootfs.h"
#include "syscalls.h"
#include "util.h"

static void test_passwd(void **state)
{
	_cleanup_free_ char *p = hutch_rootfs_passwd(1000, 1000);

	assert_non_null(p);
	assert_string_equal(p, "root:x:0:0:root:/root:/usr/sbin/nologin\n"
	                       "appuser:x:1000:1000:appuser:/home/appuser:/bin/bash\n"
	                       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
}

static void test_passwd_shell_and_ids(void **state)
{
	_cleanup_free_ char *p = rootfs_passwd_render(1234, 2345, "/bin/sh");

	assert_non_null(p);
	assert_non_null(strstr(p, "\nappuser:x:1234:2345:appuser:/home/appuser:/bin/sh\n"));
}

static void test_passwd_invalid(void **state)
{
	static const unsigned int bad[] = { 0, 5, 65534, 65535, 70000 };

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		errno = 0;
		assert_null(rootfs_passwd_render(bad[i], 1000, "/bin/sh"));
		assert_int_equal(errno, EINVAL);
		assert_null(rootfs_passwd_render(1000, bad[i], "/bin/sh"));
		assert_null(hutch_rootfs_group(bad[i]));
	}
	/* A shell cannot add fields or lines. */
	assert_null(rootfs_passwd_render(1000, 1000, "/bin/sh:0:0"));
	assert_null(rootfs_passwd_render(1000, 1000, "/bin/sh\nevil::0:0::/:/bin/sh"));
	assert_null(rootfs_passwd_render(1000, 1000, ""));
}

/* An image's passwd and group keep their entries; appuser replaces
 * whatever had its name or ids; a root entry is added when missing. */
static void test_passwd_merge(void **state)
{
	char *p;

	(void)state;
	p = rootfs_passwd_merge("root:x:0:0:root:/root:/bin/bash\n"
	                        "daemon:x:1:1::/:/nologin\n"
	                        "node:x:1000:1000::/home/node:/bin/sh\n"
	                        "appuser:x:1001:1001::/x:/bin/sh\n"
	                        "\n"
	                        "last:x:7:7::/:/bin/sh",
	                        1000, 1000, "/bin/sh");
	assert_string_equal(p, "root:x:0:0:root:/root:/bin/bash\n"
	                       "daemon:x:1:1::/:/nologin\n"
	                       "last:x:7:7::/:/bin/sh\n"
	                       "appuser:x:1000:1000:appuser:/home/appuser:/bin/sh\n");
	free(p);
	p = rootfs_passwd_merge(NULL, 1000, 1000, "/bin/sh");
	assert_string_equal(p, "root:x:0:0:root:/root:/bin/sh\n"
	                       "appuser:x:1000:1000:appuser:/home/appuser:/bin/sh\n");
	free(p);
	p = rootfs_passwd_merge("daemon:x:1:1::/:/nologin\n", 1000, 1000, "/bin/sh");
	assert_string_equal(p, "root:x:0:0:root:/root:/bin/sh\n"
	                       "daemon:x:1:1::/:/nologin\n"
	                       "appuser:x:1000:1000:appuser:/home/appuser:/bin/sh\n");
	free(p);
	/* A line with no uid field is kept: only the image's libc reads it. */
	p = rootfs_passwd_merge("odd\nroot:x:0:0::/:/bin/sh\n", 1000, 1000, "/bin/sh");
	assert_string_equal(p, "odd\nroot:x:0:0::/:/bin/sh\n"
	                       "appuser:x:1000:1000:appuser:/home/appuser:/bin/sh\n");
	free(p);
	assert_null(rootfs_passwd_merge("", 0, 1000, "/bin/sh"));
	assert_null(rootfs_passwd_merge("", 1000, 1000, "/bin/sh:x"));
	p = rootfs_group_merge("root:x:0:\nnode:x:1000:\nstaff:x:50:node\n", 1000);
	assert_string_equal(p, "root:x:0:\nstaff:x:50:node\nappuser:x:1000:\n");
	free(p);
	assert_null(rootfs_group_merge("", 65534));
}

static void test_group(void **state)
{
	_cleanup_free_ char *g = hutch_rootfs_group(1000);

	assert_non_null(g);
	/* tty (5) must exist: /dev/pts is mounted with gid=5. */
	assert_string_equal(g, "root:x:0:\ntty:x:5:\nappuser:x:1000:\nnogroup:x:65534:\n");
}

static void test_hosts(void **state)
{
	_cleanup_free_ char *h = rootfs_hosts_render("box", NULL);
	_cleanup_free_ char *x = rootfs_hosts_render("box", "10.0.0.1 a.example");
	_cleanup_free_ char *y = rootfs_hosts_render("box", "10.0.0.1 a\n10.0.0.2 b\n");

	assert_string_equal(
	        h, "127.0.0.1\tlocalhost box\n::1\tlocalhost ip6-localhost ip6-loopback\n");
	/* Extra lines come last and always end with a newline. */
	assert_non_null(x);
	assert_non_null(strstr(x, "ip6-loopback\n10.0.0.1 a.example\n"));
	assert_int_equal(x[strlen(x) - 1], '\n');
	assert_non_null(strstr(y, "ip6-loopback\n10.0.0.1 a\n10.0.0.2 b\n"));
	assert_int_equal(strstr(y, "b\n")[2], '\0');
}

static void test_hostname(void **state)
{
	static const char *const good[] = { "a", "hutch-0123abcd", "box.local", "A1" };
	static const char *const bad[] = {
		"",
		"-x",
		".x",
		"a b",
		"a\n127.0.0.1 evil",
		"a\tb",
		"a/b",
		"a_b",
		"0123456789012345678901234567890123456789012345678901234567890123"
		"4"
	};

	for (size_t i = 0; i < ELEMENTSOF(good); i++)
		assert_true(rootfs_hostname_is_valid(good[i]));
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_false(rootfs_hostname_is_valid(bad[i]));
	assert_false(rootfs_hostname_is_valid(NULL));
	errno = 0;
	assert_null(rootfs_hosts_render("a\nb", NULL));
	assert_int_equal(errno, EINVAL);
}

static void test_nsswitch(void **state)
{
	assert_non_null(strstr(rootfs_nsswitch_conf, "passwd:         files\n"));
	assert_non_null(strstr(rootfs_nsswitch_conf, "group:          files\n"));
	assert_non_null(strstr(rootfs_nsswitch_conf, "hosts:          files dns\n"));
	/* No NSS module that would talk to a host daemon. */
	assert_null(strstr(rootfs_nsswitch_conf, "systemd"));
	assert_null(strstr(rootfs_nsswitch_conf, "sss"));
	assert_null(strstr(rootfs_nsswitch_conf, "mdns"));
}

static void test_etc_allow_list(void **state)
{
	static const char *const shared[] = {
		"ssl",        "ca-certificates", "ca-certificates.conf", "ld.so.cache",
		"ld.so.conf", "ld.so.conf.d",    "alternatives",         "localtime",
		"python3",    "python3.11",      "python3.12",           "os-release",
		"terminfo",   "profile"
	};
	static const char *const private[] = {
		"shadow",    "gshadow",           "passwd",        "group",  "hosts",
		"hostname",  "resolv.conf",       "nsswitch.conf", "ssh",    "machine-id",
		"sudoers",   "sudoers.d",         "apt",           "docker", "python",
		"python2.7", "python3/../shadow", "ssl/x",         "",       "."
	};

	for (size_t i = 0; i < ELEMENTSOF(shared); i++)
		assert_true(rootfs_etc_is_shared(shared[i]));
	for (size_t i = 0; i < ELEMENTSOF(private); i++)
		assert_false(rootfs_etc_is_shared(private[i]));
}

static bool in_list(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (!strcmp(*list, name))
			return true;
	return false;
}

static void test_system_dirs(void **state)
{
	static const char *const never[] = { "etc",   "home", "root", "run", "var",  "srv", "mnt",
		                             "media", "opt",  "boot", "tmp", "proc", "sys", "dev" };

	/* /usr first: the /bin, /lib, /sbin symlinks of merged /usr point into it. */
	assert_string_equal(rootfs_system_dirs[0], "usr");
	static const char *const always[] = { "bin", "sbin", "lib", "lib64" };

	for (size_t i = 0; i < ELEMENTSOF(always); i++)
		assert_true(in_list(rootfs_system_dirs, always[i]));
	for (size_t i = 0; i < ELEMENTSOF(never); i++)
		assert_false(in_list(rootfs_system_dirs, never[i]));
}

static void test_dev_nodes(void **state)
{
	static const char *const wanted[] = { "null", "zero", "full", "random", "urandom", "tty" };
	size_t n = 0;

	for (const char *const *p = rootfs_dev_nodes; *p; p++)
		n++;
	assert_int_equal(n, 6);
	for (size_t i = 0; i < ELEMENTSOF(wanted); i++)
		assert_true(in_list(rootfs_dev_nodes, wanted[i]));
	assert_false(in_list(rootfs_dev_nodes, "kmsg"));
	assert_false(in_list(rootfs_dev_nodes, "mem"));
	assert_false(in_list(rootfs_dev_nodes, "console"));
}

static const struct rootfs_proc_entry *proc_entry(const char *name)
{
	for (size_t i = 0; i < rootfs_proc_entries_len; i++)
		if (!strcmp(rootfs_proc_entries[i].name, name))
			return &rootfs_proc_entries[i];
	return NULL;
}

static void test_proc_masks(void **state)
{
	static const char *const files[] = { "kcore",      "keys",        "latency_stats",
		                             "timer_list", "timer_stats", "sched_debug" };
	static const char *const dirs[] = { "acpi", "scsi" };
	static const char *const ro[] = { "asound", "bus", "fs", "irq", "sys", "sysrq-trigger" };

	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		assert_int_equal(proc_entry(files[i])->action, ROOTFS_PROC_MASK_FILE);
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		assert_int_equal(proc_entry(dirs[i])->action, ROOTFS_PROC_MASK_DIR);
	for (size_t i = 0; i < ELEMENTSOF(ro); i++)
		assert_int_equal(proc_entry(ro[i])->action, ROOTFS_PROC_READONLY);
	assert_int_equal(rootfs_proc_entries_len,
	                 ELEMENTSOF(files) + ELEMENTSOF(dirs) + ELEMENTSOF(ro));
	/* Single components only, each once: they are opened beneath /proc. */
	for (size_t i = 0; i < rootfs_proc_entries_len; i++) {
		assert_null(strchr(rootfs_proc_entries[i].name, '/'));
		assert_ptr_equal(proc_entry(rootfs_proc_entries[i].name), &rootfs_proc_entries[i]);
	}
}

/* A value no syscall of the lookup gives. */
#define SENTINEL EL2HLT

/* Until the child of b has exited, unreaped (poll() that succeeds leaves
 * errno alone). */
static void wait_child_gone(const struct hutch_bounded *b)
{
	struct pollfd p = { .fd = b->pidfd, .events = POLLIN };

	assert_true(b->pid > 0);
	assert_int_equal(poll(&p, 1, 10000), 1);
}

/*
 * The views' lookup runs beside the supervisor's setup, sharing its errno
 * (CLONE_VM, the same TLS): every one of its lookups fails here (an empty
 * directory for lxcfs's tree: ENOENT), and the caller's errno is still
 * its own after the child ended. With glibc's statx() in the child it
 * was ENOENT: a setup step between the start and GO that reads errno
 * after a failure of its own could read the child's.
 */
static void test_views_lookup_leaves_errno(void **state)
{
	char dir[] = "/tmp/hutch-test-views-XXXXXX";
	struct hutch_bounded b;
	_cleanup_close_ int fd = -EBADF;

	(void)state;
	assert_non_null(mkdtemp(dir));
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	errno = SENTINEL;
	hutch_rootfs_views_probe_start(&b, fd, 5000);
	wait_child_gone(&b);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hutch_rootfs_views_probe_wait(&b), 0);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(rmdir(dir), 0);
	/* No tree: nothing started, nothing to wait for. */
	hutch_rootfs_views_probe_start(&b, -1, 5000);
	assert_int_equal(b.pid, 0);
	assert_int_equal(hutch_rootfs_views_probe_wait(&b), 0);
}

/* A child that blocks (a read of an empty pipe, as a lookup that lxcfs
 * never answers), or returns its argument. */
HUTCH_BOUNDED_FN static int block_on(void *arg)
{
	char c;

	(void)sys_raw(__NR_read, (int)(intptr_t)arg, &c, 1, 0, 0);
	return 0;
}

HUTCH_BOUNDED_FN static int give(void *arg)
{
	return (int)(intptr_t)arg;
}

/* The bound runs from the start, not the wait; one child at a time; a
 * cancel kills and reaps at once. */
static void test_bounded_start_and_wait(void **state)
{
	struct hutch_bounded a, b;
	int pipefd[2];
	int64_t t0;

	(void)state;
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	t0 = hutch_now_mono_ms();
	hutch_bounded_start(&a, block_on, (void *)(intptr_t)pipefd[0], 300);
	assert_true(a.pid > 0);
	hutch_bounded_start(&b, give, (void *)7, 1000); /* a runs: refused */
	assert_int_equal(hutch_bounded_wait(&b), -EBUSY);
	(void)poll(NULL, 0, 200); /* our own work, 200 of the 300 ms */
	assert_int_equal(hutch_bounded_wait(&a), -ETIMEDOUT);
	assert_true(hutch_now_mono_ms() - t0 < 2000);
	assert_int_equal(hutch_bounded_wait(&a), -ETIMEDOUT); /* once known: the same */
	hutch_bounded_start(&b, give, (void *)7, 1000);
	assert_int_equal(hutch_bounded_wait(&b), 7);
	hutch_bounded_start(&a, block_on, (void *)(intptr_t)pipefd[0], 60000);
	t0 = hutch_now_mono_ms();
	hutch_bounded_cancel(&a);
	assert_int_equal(a.pid, 0);
	assert_true(hutch_now_mono_ms() - t0 < 2000);
	assert_int_equal(hutch_bounded_call(give, (void *)9, 1000), 9);
	close(pipefd[0]);
	close(pipefd[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_passwd),
		cmocka_unit_test(test_passwd_shell_and_ids),
		cmocka_unit_test(test_passwd_invalid),
		cmocka_unit_test(test_group),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_hostname),
		cmocka_unit_test(test_nsswitch),
		cmocka_unit_test(test_etc_allow_list),
		cmocka_unit_test(test_system_dirs),
		cmocka_unit_test(test_dev_nodes),
		cmocka_unit_test(test_proc_masks),
		cmocka_unit_test(test_passwd_merge),
		cmocka_unit_test(test_views_lookup_leaves_errno),
		cmocka_unit_test(test_bounded_start_and_wait),
	};

	return cmocka_run_group_tests_name("rootfs", tests, NULL, NULL);
}
