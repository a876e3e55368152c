/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the pure half of the cgroup module: reading
 * /proc/self/cgroup and /proc/self/mountinfo texts of v1, hybrid and v2
 * hosts, turning them into sandbox directories, formatting limits, parsing
 * keyed knob files, and the gc guard. No root, no cgroupfs needed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup-util.h"
#include "cgroup.h"

/* This development machine: v1 controllers, one v2 tree without any. */
static const char hybrid_proc[] = "9:name=systemd:/\n"
                                  "8:pids:/\n"
                                  "7:blkio:/\n"
                                  "6:freezer:/\n"
                                  "5:devices:/\n"
                                  "4:memory:/process_api/12442b61\n"
                                  "3:cpuset:/\n"
                                  "2:cpuacct:/\n"
                                  "1:cpu:/\n"
                                  "0::/\n";

static const char hybrid_mountinfo[] =
        "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
        "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

/* systemd v1 layout: cpu and cpuacct co-mounted, optional fields present. */
static const char comount_proc[] = "12:pids:/user.slice/user-0.slice/session-3.scope\n"
                                   "4:cpu,cpuacct:/user.slice\n"
                                   "3:memory:/user.slice/user-0.slice/session-3.scope\n"
                                   "1:name=systemd:/user.slice/user-0.slice/session-3.scope\n";
static const char comount_mountinfo[] =
        "25 24 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
        "29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:11 - cgroup cgroup "
        "rw,cpu,cpuacct\n"
        "30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n"
        "31 25 0:28 / /sys/fs/cgroup/pids rw,nosuid shared:13 - cgroup cgroup rw,pids\n";

static const char v2_proc[] = "0::/user.slice/user-1000.slice/session-2.scope\n";
static const char v2_mountinfo[] =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "27 21 0:23 / /sys/fs/cgroup rw,nosuid,nodev shared:5 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n";

static void test_parse_proc_hybrid(void **state)
{
	char p[256];

	(void)state;
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, "memory", p, sizeof(p)), 0);
	assert_string_equal(p, "/process_api/12442b61");
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, "cpu", p, sizeof(p)), 0);
	assert_string_equal(p, "/");
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, "freezer", p, sizeof(p)), 0);
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, NULL, p, sizeof(p)), 0);
	assert_string_equal(p, "/");
	/* "cpu" must not match "cpuset" or "cpuacct". */
	assert_int_equal(
	        hutch_cgroup_parse_proc("3:cpuset:/a\n2:cpuacct:/b\n", "cpu", p, sizeof(p)),
	        -ENOENT);
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, "rdma", p, sizeof(p)), -ENOENT);
	assert_int_equal(hutch_cgroup_parse_proc(hybrid_proc, "memory", p, 8), -ENAMETOOLONG);
}

static void test_parse_proc_comount_and_v2(void **state)
{
	char p[256];

	(void)state;
	assert_int_equal(hutch_cgroup_parse_proc(comount_proc, "cpu", p, sizeof(p)), 0);
	assert_string_equal(p, "/user.slice");
	assert_int_equal(hutch_cgroup_parse_proc(comount_proc, "cpuacct", p, sizeof(p)), 0);
	assert_string_equal(p, "/user.slice");
	assert_int_equal(hutch_cgroup_parse_proc(comount_proc, "freezer", p, sizeof(p)), -ENOENT);
	/* No v2 line in a pure v1 host. */
	assert_int_equal(hutch_cgroup_parse_proc(comount_proc, NULL, p, sizeof(p)), -ENOENT);
	assert_int_equal(hutch_cgroup_parse_proc(v2_proc, NULL, p, sizeof(p)), 0);
	assert_string_equal(p, "/user.slice/user-1000.slice/session-2.scope");
	assert_int_equal(hutch_cgroup_parse_proc(v2_proc, "memory", p, sizeof(p)), -ENOENT);
	/* No trailing newline, garbage lines skipped. */
	assert_int_equal(hutch_cgroup_parse_proc("garbage\n0::/x", NULL, p, sizeof(p)), 0);
	assert_string_equal(p, "/x");
}

static void test_parse_mountinfo(void **state)
{
	struct cg_mount m;

	(void)state;
	assert_int_equal(hutch_cgroup_parse_mountinfo(hybrid_mountinfo, "cpu", &m), 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup/cpu");
	assert_string_equal(m.root, "/");
	assert_int_equal(hutch_cgroup_parse_mountinfo(hybrid_mountinfo, NULL, &m), 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup/unified");
	assert_int_equal(hutch_cgroup_parse_mountinfo(hybrid_mountinfo, "systemd", &m), -ENOENT);
	assert_int_equal(hutch_cgroup_parse_mountinfo(comount_mountinfo, "cpu", &m), 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup/cpu,cpuacct");
	assert_int_equal(hutch_cgroup_parse_mountinfo(comount_mountinfo, "cpuacct", &m), 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup/cpu,cpuacct");
	assert_int_equal(hutch_cgroup_parse_mountinfo(comount_mountinfo, NULL, &m), -ENOENT);
	assert_int_equal(hutch_cgroup_parse_mountinfo(v2_mountinfo, NULL, &m), 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup");
	assert_int_equal(hutch_cgroup_parse_mountinfo(v2_mountinfo, "memory", &m), -ENOENT);
	/* Mounts elsewhere are ignored; escapes are decoded. */
	assert_int_equal(hutch_cgroup_parse_mountinfo(
	                         "1 0 0:1 / /mnt/cg rw - cgroup2 cgroup2 rw\n"
	                         "2 0 0:1 /a\\040b /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
	                         NULL, &m),
	                 0);
	assert_string_equal(m.mountpoint, "/sys/fs/cgroup");
	assert_string_equal(m.root, "/a b");
	/* "/sys/fs/cgroupx" is not under /sys/fs/cgroup. */
	assert_int_equal(hutch_cgroup_parse_mountinfo(
	                         "1 0 0:1 / /sys/fs/cgroupx rw - cgroup2 cgroup2 rw\n", NULL, &m),
	                 -ENOENT);
}

static void test_path_join(void **state)
{
	struct cg_mount root = { .mountpoint = "/sys/fs/cgroup/memory", .root = "/" };
	struct cg_mount sub = { .mountpoint = "/sys/fs/cgroup", .root = "/docker/abc" };
	char p[256];

	(void)state;
	assert_int_equal(hutch_cgroup_path_join(&root, "/", p, sizeof(p)), 0);
	assert_string_equal(p, "/sys/fs/cgroup/memory");
	assert_int_equal(hutch_cgroup_path_join(&root, "/process_api/x", p, sizeof(p)), 0);
	assert_string_equal(p, "/sys/fs/cgroup/memory/process_api/x");
	assert_int_equal(hutch_cgroup_path_join(&sub, "/docker/abc", p, sizeof(p)), 0);
	assert_string_equal(p, "/sys/fs/cgroup");
	assert_int_equal(hutch_cgroup_path_join(&sub, "/docker/abc/init", p, sizeof(p)), 0);
	assert_string_equal(p, "/sys/fs/cgroup/init");
	assert_int_equal(hutch_cgroup_path_join(&sub, "/docker/abcd", p, sizeof(p)), -ENOENT);
	assert_int_equal(hutch_cgroup_path_join(&sub, "/other", p, sizeof(p)), -ENOENT);
	assert_int_equal(hutch_cgroup_path_join(&root, "relative", p, sizeof(p)), -EINVAL);
	assert_int_equal(hutch_cgroup_path_join(&root, "/x", p, 10), -ENAMETOOLONG);
}

static void test_keyed(void **state)
{
	uint64_t v = 99;

	(void)state;
	assert_int_equal(hutch_cgroup_parse_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
	                                          "oom_kill", &v),
	                 0);
	assert_int_equal(v, 3);
	assert_int_equal(hutch_cgroup_parse_keyed("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n"
	                                          "oom_group_kill 0\n",
	                                          "oom", &v),
	                 0);
	assert_int_equal(v, 2);
	assert_int_equal(hutch_cgroup_parse_keyed("populated 1\nfrozen 0\n", "populated", &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(hutch_cgroup_parse_keyed("populated 1\nfrozen 0", "frozen", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(hutch_cgroup_parse_keyed("oom_kill_disable 0\n", "oom_kill", &v), -ENOENT);
	assert_int_equal(hutch_cgroup_parse_keyed("oom_kill x\n", "oom_kill", &v), -EINVAL);
	assert_int_equal(hutch_cgroup_parse_keyed("", "oom_kill", &v), -ENOENT);
}

static void test_list_has(void **state)
{
	(void)state;
	assert_true(hutch_cgroup_list_has("cpuset cpu io memory hugetlb pids rdma misc\n",
	                                  "cpu memory pids"));
	assert_true(hutch_cgroup_list_has("memory pids cpu", "cpu"));
	assert_false(hutch_cgroup_list_has("cpuset io memory pids\n", "cpu memory pids"));
	assert_false(hutch_cgroup_list_has("", "cpu"));
	assert_false(hutch_cgroup_list_has("hugetlb\n", "memory"));
	assert_true(hutch_cgroup_list_has("", ""));
}

static void test_fmt(void **state)
{
	char b[64];

	(void)state;
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(500, b, sizeof(b)), 0);
	assert_string_equal(b, "50000");
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(2000, b, sizeof(b)), 0);
	assert_string_equal(b, "200000");
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(0, b, sizeof(b)), 0);
	assert_string_equal(b, "-1");
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(10, b, sizeof(b)), 0);
	assert_string_equal(b, "1000");
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(9, b, sizeof(b)), -EINVAL);
	assert_int_equal(hutch_cgroup_fmt_cpu_v1(UINT64_MAX, b, sizeof(b)), -EINVAL);
	assert_int_equal(hutch_cgroup_fmt_cpu_v2(250, b, sizeof(b)), 0);
	assert_string_equal(b, "25000 100000");
	assert_int_equal(hutch_cgroup_fmt_cpu_v2(0, b, sizeof(b)), 0);
	assert_string_equal(b, "max 100000");
	assert_int_equal(hutch_cgroup_fmt_cpu_v2(1, b, sizeof(b)), -EINVAL);
	hutch_cgroup_fmt_limit(268435456, false, b, sizeof(b));
	assert_string_equal(b, "268435456");
	hutch_cgroup_fmt_limit(0, false, b, sizeof(b));
	assert_string_equal(b, "-1");
	hutch_cgroup_fmt_limit(0, true, b, sizeof(b));
	assert_string_equal(b, "max");
	hutch_cgroup_fmt_limit(64, true, b, sizeof(b));
	assert_string_equal(b, "64");
}

static void test_removable(void **state)
{
	(void)state;
	assert_true(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/hutch-abc"));
	assert_true(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/memory/x/y/hutch-0123456789ab"));
	assert_true(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/cpu,cpuacct/hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/hutch-"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/user.slice"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroupx/hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable("/tmp/hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable("sys/fs/cgroup/hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/../../tmp/hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/hutch-a/.."));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/hutch-a/."));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup/hutch-a/"));
	assert_false(hutch_cgroup_dir_is_removable("/sys/fs/cgroup//hutch-a"));
	assert_false(hutch_cgroup_dir_is_removable(NULL));
}

static void test_name_and_pids(void **state)
{
	pid_t pids[4];

	(void)state;
	assert_true(hutch_cgroup_name_is_valid("0123456789ab"));
	assert_true(hutch_cgroup_name_is_valid("probe-42"));
	assert_false(hutch_cgroup_name_is_valid(""));
	assert_false(hutch_cgroup_name_is_valid(NULL));
	assert_false(hutch_cgroup_name_is_valid(".."));
	assert_false(hutch_cgroup_name_is_valid("a/b"));
	assert_false(hutch_cgroup_name_is_valid("a b"));
	assert_false(hutch_cgroup_name_is_valid(
	        "x123456789012345678901234567890123456789012345678901234567890123456789"));
	/* A container's cgroupsPath: names joined by '/', one leading '/'. */
	assert_true(hutch_cgroup_path_is_valid("/default/c1"));
	assert_true(hutch_cgroup_path_is_valid("kubepods.slice/cri-containerd-0a.scope"));
	assert_true(hutch_cgroup_path_is_valid("a/b/c/d/e/f/g/h"));
	assert_false(hutch_cgroup_path_is_valid("a/b/c/d/e/f/g/h/i"));
	assert_false(hutch_cgroup_path_is_valid(NULL));
	assert_false(hutch_cgroup_path_is_valid(""));
	assert_false(hutch_cgroup_path_is_valid("/"));
	assert_false(hutch_cgroup_path_is_valid("//a"));
	assert_false(hutch_cgroup_path_is_valid("a//b"));
	assert_false(hutch_cgroup_path_is_valid("a/"));
	assert_false(hutch_cgroup_path_is_valid("a/../b"));
	assert_false(hutch_cgroup_path_is_valid("a/.hidden"));
	assert_false(hutch_cgroup_path_is_valid("a/b c"));
	assert_int_equal(hutch_cgroup_parse_pids("12\n345\n6\n", pids, 4), 3);
	assert_int_equal(pids[1], 345);
	assert_int_equal(hutch_cgroup_parse_pids("1\n2\n3\n4\n5\n", pids, 4), 4);
	assert_int_equal(hutch_cgroup_parse_pids("", pids, 4), 0);
}

/* cpu.shares -> cpu.weight as runc and crun convert it (v2 only: pure). */
static void test_shares_to_weight(void **state)
{
	(void)state;
	assert_int_equal(hutch_cgroup_shares_to_weight(2), 1);
	assert_int_equal(hutch_cgroup_shares_to_weight(1024), 39);
	assert_int_equal(hutch_cgroup_shares_to_weight(512), 20);
	assert_int_equal(hutch_cgroup_shares_to_weight(262144), 10000);
	/* Outside the kernel's range: clamped, as the kernel clamps v1. */
	assert_int_equal(hutch_cgroup_shares_to_weight(0), 1);
	assert_int_equal(hutch_cgroup_shares_to_weight(1u << 30), 10000);
}

static int unified(const char *key, const char *value, const struct hutch_limits *lim, char *ret)
{
	const char *why = NULL;
	int r = hutch_cgroup_unified_check(key, value, lim, ret, 256, &why);

	if (r < 0)
		assert_non_null(why);
	return r;
}

/* linux.resources.unified: only knobs of allowed controllers, never a
 * path, and hutch's limits lowered, never raised. */
static void test_unified_check(void **state)
{
	struct hutch_limits lim = { .cpu_millis = 500, .memory_bytes = 1u << 30, .pids_max = 100 };
	char v[256];

	(void)state;
	assert_int_equal(unified("memory.max", "max", &lim, v), 0);
	assert_string_equal(v, "1073741824");
	assert_int_equal(unified("memory.high", "99999999999", &lim, v), 0);
	assert_string_equal(v, "1073741824");
	assert_int_equal(unified("memory.high", "4096", &lim, v), 0);
	assert_string_equal(v, "4096");
	assert_int_equal(unified("memory.low", "max", &lim, v), 0);
	assert_string_equal(v, "1073741824");
	assert_int_equal(unified("memory.swap.max", "max", &lim, v), 0);
	assert_string_equal(v, "0");
	assert_int_equal(unified("pids.max", "max", &lim, v), 0);
	assert_string_equal(v, "100");
	assert_int_equal(unified("pids.max", "7", &lim, v), 0);
	assert_string_equal(v, "7");
	assert_int_equal(unified("cpu.max", "max 100000", &lim, v), 0);
	assert_string_equal(v, "50000 100000");
	assert_int_equal(unified("cpu.max", "200000 100000", &lim, v), 0);
	assert_string_equal(v, "50000 100000");
	assert_int_equal(unified("cpu.max", "10000", &lim, v), 0);
	assert_string_equal(v, "10000 100000");
	assert_int_equal(unified("cpu.weight", "300", &lim, v), 0);
	assert_string_equal(v, "300");
	assert_int_equal(unified("io.max", "8:0 rbps=1048576", &lim, v), 0);
	/* Refused: other controllers, hutch's own knobs, paths, bad values. */
	assert_int_equal(unified("cgroup.procs", "1", &lim, v), -EPERM);
	assert_int_equal(unified("cgroup.subtree_control", "+cpu", &lim, v), -EPERM);
	assert_int_equal(unified("rdma.max", "x", &lim, v), -EPERM);
	assert_int_equal(unified("memory.oom.group", "1", &lim, v), -EPERM);
	assert_int_equal(unified("../memory.max", "1", &lim, v), -EINVAL);
	assert_int_equal(unified("memory/../../x", "1", &lim, v), -EINVAL);
	assert_int_equal(unified("memory..max", "1", &lim, v), -EINVAL);
	assert_int_equal(unified("", "1", &lim, v), -EINVAL);
	assert_int_equal(unified("Memory.max", "1", &lim, v), -EINVAL);
	assert_int_equal(unified("memory.max", "1\n", &lim, v), -EINVAL);
	assert_int_equal(unified("memory.max", "lots", &lim, v), -EINVAL);
	assert_int_equal(unified("memory.max", "-1", &lim, v), -EINVAL);
	assert_int_equal(unified("cpu.max", "max 100000 9", &lim, v), -EINVAL);
	assert_int_equal(unified("cpu.max", "500 100000", &lim, v), -EINVAL);
	assert_int_equal(unified("cpu.max", "50000 10", &lim, v), -EINVAL);
}

/* oci update: a given field replaces, an absent one stays; the extra v1
 * controllers follow what is given. */
static void test_resources_merge(void **state)
{
	struct hutch_resources a = { 0 }, b = { 0 };

	(void)state;
	a.cpu_shares = 512;
	snprintf(a.cpus, sizeof(a.cpus), "0");
	assert_int_equal(hutch_resources_extra(&a), HUTCH_CGROUP_EXTRA_CPUSET);
	b.given = HUTCH_RES_SWAPPINESS;
	b.swappiness = 0;
	b.ndev[HUTCH_RES_READ_BPS] = 1;
	b.dev[HUTCH_RES_READ_BPS][0] = (struct hutch_res_dev){ .major = 8, .value = 1 };
	hutch_resources_merge(&a, &b);
	assert_int_equal(a.cpu_shares, 512);
	assert_string_equal(a.cpus, "0");
	assert_true(a.given & HUTCH_RES_SWAPPINESS);
	assert_int_equal(a.ndev[HUTCH_RES_READ_BPS], 1);
	assert_int_equal(hutch_resources_extra(&a),
	                 HUTCH_CGROUP_EXTRA_CPUSET | HUTCH_CGROUP_EXTRA_BLKIO);
	memset(&b, 0, sizeof(b));
	b.given = HUTCH_RES_HUGEPAGES | HUTCH_RES_CLASSID;
	assert_int_equal(hutch_resources_extra(&b),
	                 HUTCH_CGROUP_EXTRA_HUGETLB | HUTCH_CGROUP_EXTRA_NET_CLS);
}

/* The held root (cgroup-root.h): holds nest, the last release closes it,
 * forget drops every hold; a lookup resolves the same directory either
 * way. Needs only a readable /sys/fs/cgroup. */
static void test_root_hold(void **state)
{
	int fd;

	(void)state;
	if (access("/sys/fs/cgroup", R_OK | X_OK) < 0)
		skip();
	assert_true(hutch_cgroup_root_held() < 0);
	fd = hutch_cgroup_open_dir("/sys/fs/cgroup");
	assert_true(fd >= 0);
	close(fd);
	hutch_cgroup_root_hold();
	hutch_cgroup_root_hold();
	assert_true(hutch_cgroup_root_held() >= 0);
	fd = hutch_cgroup_open_dir("/sys/fs/cgroup");
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(hutch_cgroup_open_dir("/etc"), -EINVAL);
	hutch_cgroup_root_release();
	assert_true(hutch_cgroup_root_held() >= 0);
	hutch_cgroup_root_release();
	assert_true(hutch_cgroup_root_held() < 0);
	hutch_cgroup_root_release(); /* unbalanced: nothing to release */
	assert_true(hutch_cgroup_root_held() < 0);
	hutch_cgroup_root_hold();
	hutch_cgroup_root_hold();
	hutch_cgroup_root_forget();
	assert_true(hutch_cgroup_root_held() < 0);
	hutch_cgroup_root_hold(); /* counts from zero again */
	hutch_cgroup_root_release();
	assert_true(hutch_cgroup_root_held() < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_proc_hybrid),
		cmocka_unit_test(test_parse_proc_comount_and_v2),
		cmocka_unit_test(test_parse_mountinfo),
		cmocka_unit_test(test_path_join),
		cmocka_unit_test(test_keyed),
		cmocka_unit_test(test_list_has),
		cmocka_unit_test(test_fmt),
		cmocka_unit_test(test_removable),
		cmocka_unit_test(test_name_and_pids),
		cmocka_unit_test(test_shares_to_weight),
		cmocka_unit_test(test_unified_check),
		cmocka_unit_test(test_resources_merge),
		cmocka_unit_test(test_root_hold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
