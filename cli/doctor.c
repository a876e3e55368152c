/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hutch doctor`: checks, by trying them, the host features a sandbox
 * needs, and says for each missing one how to fix it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cgroup-probe.h"
#include "cleanup.h"
#include "cli.h"
#include "criu.h"
#include "disk.h"
#include "fdutil.h"
#include "idmap.h"
#include "image.h"
#include "lxcfs.h"
#include "mhd.h"
#include "netpolicy.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"
#include "verbs.h"

struct check {
	const char *name;
	bool required;
	bool ok;
	char detail[1024];
};

/* Fork a child that unshares flags; 0 if it worked. */
static int try_unshare(int flags)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(unshare(flags) < 0 ? (errno & 0xff) ?: 1 : 0);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status))
		return -EPERM;
	return WEXITSTATUS(status) == 0 ? 0 : -WEXITSTATUS(status); /* unshare's errno */
}

/* Is this process chrooted (its root not its mount namespace's)? The
 * kernel refuses it a new user namespace. "/" against pid 1's root, as
 * systemd's running_in_chroot(); where pid 1's root cannot be read, no
 * mount at "/" in mountinfo (which shows only the mounts under our root). */
static bool in_chroot(void)
{
	_cleanup_fclose_ FILE *f = NULL;
	struct stat a, b;
	char line[4096], *mp;

	if (stat("/", &a) < 0)
		return false;
	if (stat("/proc/1/root/", &b) == 0)
		return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the fifth field */
		mp = line;
		for (int i = 0; i < 4 && mp; i++)
			mp = strchr(mp + 1, ' ');
		if (mp && !strncmp(mp, " / ", 3))
			return false;
	}
	return f != NULL;
}

static bool file_has(const char *path, const char *needle)
{
	char buf[8192];

	if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return false;
	return strstr(buf, needle) != NULL;
}

/* Root mode, or rootless with what it needs (idmap.h). */
static void check_mode(struct check *c)
{
	struct hutch_idmap m;
	struct hutch_err err = { 0 };

	c->ok = hutch_idmap_detect(&m, &err) == 0;
	if (!c->ok)
		snprintf(c->detail, sizeof(c->detail), "rootless: %s", err.msg);
	else if (!m.rootless)
		snprintf(c->detail, sizeof(c->detail), "root mode");
	else
		snprintf(c->detail, sizeof(c->detail),
		         "rootless: subordinate uids %u-%u and gids %u-%u (%u sandboxes at once), "
		         "%s, runtime dir '%.200s'",
		         m.subuid, m.subuid + m.subuid_n - 1, m.subgid, m.subgid + m.subgid_n - 1,
		         m.slots, m.newuidmap, hutch_runtime_dir());
}

/* Ubuntu 23.10+: an unconfined process may unshare, but its new user
 * namespace has no capabilities unless an AppArmor profile allows it.
 * HUTCH_TEST_APPARMOR_SYSCTL names another file to read instead (tests:
 * Debian's kernels have no such sysctl); doctor only reports from it. */
#define APPARMOR_USERNS_SYSCTL "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
#define PACKAGED_PROFILE       "/usr/share/doc/hutch/examples/apparmor/hutch"
#define OVERLAY_BY_PATH \
	"by path (Linux before 6.13: images of at most " STR(HUTCH_OVERLAY_PATH_LAYERS) " layers)"
#define STR_(x) #x
#define STR(x)  STR_(x)

/* Where the profile hutch ships is on this host: the Debian package's
 * copy, the source tree's next to a build's binary, else the tree's path. */
static void apparmor_profile(const char *exe, char *buf, size_t size)
{
	char path[PATH_MAX + 64], *slash;
	_cleanup_free_ char *real = NULL;

	if (access(PACKAGED_PROFILE, R_OK) == 0) {
		snprintf(buf, size, "%s", PACKAGED_PROFILE);
		return;
	}
	snprintf(path, sizeof(path), "%s", exe);
	slash = strrchr(path, '/');
	if (slash) {
		snprintf(slash, sizeof(path) - (size_t)(slash - path),
		         "/../packaging/apparmor/hutch");
		real = realpath(path, NULL);
	}
	snprintf(buf, size, "%s", real ? real : "packaging/apparmor/hutch (hutch's source tree)");
}

static void check_userns(struct check *c)
{
	const char *sysctl = getenv("HUTCH_TEST_APPARMOR_SYSCTL");
	char buf[32] = "", aa[8] = "", exe[PATH_MAX] = "", profile[PATH_MAX + 64];
	char elsewhere[200] = "";
	ssize_t n;
	int r;

	(void)hutch_read_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", buf, sizeof(buf));
	(void)hutch_read_file_at(AT_FDCWD, sysctl && *sysctl ? sysctl : APPARMOR_USERNS_SYSCTL, aa,
	                         sizeof(aa));
	if (geteuid() != 0 && aa[0] == '1') {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		apparmor_profile(exe, profile, sizeof(profile));
		/* The profile attaches to the paths hutch is installed at. */
		if (strcmp(exe, "/usr/bin/hutch") && strcmp(exe, "/usr/local/bin/hutch"))
			snprintf(elsewhere, sizeof(elsewhere),
			         " (it covers /usr/bin/hutch and /usr/local/bin/hutch: install "
			         "%.100s "
			         "there first)",
			         exe);
		c->ok = false;
		snprintf(c->detail, sizeof(c->detail),
		         "AppArmor restricts unprivileged user namespaces "
		         "(kernel.apparmor_restrict_unprivileged_userns=1): load hutch's profile: "
		         "sudo install -m 644 %.150s /etc/apparmor.d/hutch && sudo apparmor_parser "
		         "-r "
		         "/etc/apparmor.d/hutch%s; or run hutch as root",
		         profile, elsewhere);
		return;
	}
	r = try_unshare(CLONE_NEWUSER);
	c->ok = r == 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail), "user namespaces work");
	else if (atoi(buf) <= 0)
		snprintf(c->detail, sizeof(c->detail),
		         "user namespaces are off: sysctl -w user.max_user_namespaces=15000 (and "
		         "kernel.unprivileged_userns_clone=1 on older Debian kernels)");
	else if (r == -EPERM && in_chroot())
		snprintf(c->detail, sizeof(c->detail),
		         "user namespaces are on (user.max_user_namespaces=%d) but refused to a "
		         "chrooted process: run hutch outside the chroot, or in a container whose "
		         "root is its mount namespace's (pivot_root: docker, podman, "
		         "systemd-nspawn)",
		         atoi(buf));
	else
		snprintf(
		        c->detail, sizeof(c->detail),
		        "user namespaces are on (user.max_user_namespaces=%d) but unshare("
		        "CLONE_NEWUSER) fails: %s (a container runtime's seccomp profile or an LSM "
		        "may forbid it)",
		        atoi(buf), strerror(-r));
}

static void check_namespaces(struct check *c)
{
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET |
	            CLONE_NEWCGROUP;

	c->ok = geteuid() == 0 ? try_unshare(flags) == 0 : try_unshare(flags | CLONE_NEWUSER) == 0;
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "mount, pid, uts, ipc, net and cgroup namespaces work"
	               : "cannot create mount/pid/uts/ipc/net/cgroup namespaces: the kernel lacks "
	                 "CONFIG_*_NS or a container runtime forbids it (run hutch on the host or "
	                 "in a privileged container)");
}

static void check_cgroups(struct check *c)
{
	struct hutch_cgroup_probe p = { 0 };

	(void)hutch_cgroup_probe(&p);
	c->ok = p.has_cpu && p.has_memory && p.has_pids && p.can_create;
	snprintf(c->detail, sizeof(c->detail), "%s%s%s: cpu %s, memory %s, pids %s, freezer %s%s%s",
	         p.v2_unified ? "cgroup v2" : "cgroup v1", p.hybrid ? " (hybrid)" : "",
	         p.in_scope ? " in a delegated systemd scope of each sandbox's own" : "",
	         p.has_cpu ? "yes" : "no", p.has_memory ? "yes" : "no", p.has_pids ? "yes" : "no",
	         p.has_freezer ? "yes" : "no", p.detail[0] ? "; " : "", p.detail);
	/* An ordinary user can still create sandboxes, with --no-limits. */
	if (geteuid() != 0 && !c->ok) {
		size_t len = strlen(c->detail);

		c->required = false;
		snprintf(c->detail + len, sizeof(c->detail) - len,
		         "; your sandboxes get no limits here: %s, or create them with --no-limits",
		         p.v2_unified
		                 ? "run hutch under 'systemd-run --user --scope -p Delegate=yes'"
		                 : "run as root, or boot with systemd.unified_cgroup_hierarchy=1");
	}
}

static void check_seccomp(struct check *c)
{
	c->ok = prctl(PR_GET_SECCOMP) >= 0 && file_has("/proc/self/status", "Seccomp:");
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "seccomp filters available"
	               : "the kernel lacks CONFIG_SECCOMP_FILTER: use a kernel built with it");
}

static void check_mount_api(struct check *c)
{
	int fd = sys_fsopen("tmpfs", 0);

	c->ok = fd >= 0 || errno != ENOSYS;
	if (fd >= 0)
		close(fd);
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "fsopen/open_tree/move_mount available (Linux >= 5.2)"
	               : "the kernel lacks the new mount API: use Linux 5.10 or later");
}

/* --image needs idmapped mounts of the store's file system and overlayfs
 * taking them (by fd from Linux 6.13, by path before: at most
 * HUTCH_OVERLAY_PATH_LAYERS layers): tried on the store (or, before it
 * exists, its parent), nothing mounted. An ordinary user's overlay is
 * made in the sandbox's user namespace, which doctor has not: the kernel's
 * version says which way it takes the layers. */
static void check_overlay(struct check *c)
{
	char dir[4096], buf[4096];
	const char *store = hutch_image_store_path(buf, sizeof(buf));
	struct hutch_err err = { 0 };
	struct utsname u;
	bool by_fd;
	struct stat st;
	int r;

	snprintf(dir, sizeof(dir), "%s", store ? store : "/");
	while (stat(dir, &st) < 0 && strrchr(dir, '/') && strcmp(dir, "/"))
		*(strrchr(dir, '/') == dir ? dir + 1 : strrchr(dir, '/')) = '\0';
	if (geteuid() != 0) {
		if (uname(&u) < 0)
			snprintf(u.release, sizeof(u.release), "unknown");
		by_fd = hutch_kernel_at_least(u.release, 6, 13);
		c->ok = file_has("/proc/filesystems", "overlay") &&
		        hutch_kernel_at_least(u.release, 5, 11);
		if (c->ok)
			snprintf(c->detail, sizeof(c->detail),
			         "overlayfs available (an ordinary user's layers are their own "
			         "files, stacked in each sandbox's user namespace) %s",
			         by_fd ? "by fd (Linux 6.13+)" : OVERLAY_BY_PATH);
		else
			snprintf(c->detail, sizeof(c->detail),
			         "--image cannot work: overlayfs missing (modprobe overlay) or "
			         "Linux "
			         "before 5.11 (this is %.64s)",
			         u.release);
		return;
	}
	r = hutch_image_probe(dir, &err);
	c->ok = r >= 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail),
		         "overlayfs stacks idmapped layers of %.300s %s (--image)", dir,
		         r == HUTCH_IMAGE_LAYERS_BY_FD ? "by fd (Linux 6.13+)" : OVERLAY_BY_PATH);
	else
		snprintf(c->detail, sizeof(c->detail), "--image cannot work: %.300s", err.msg);
}

static void check_store(struct check *c)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	_cleanup_cjson_ cJSON *all = NULL;
	char buf[4096];
	const char *path = hutch_image_store_path(buf, sizeof(buf));
	struct hutch_err err = { 0 };
	struct stat st;

	if (!path) {
		c->ok = true;
		snprintf(c->detail, sizeof(c->detail),
		         "no store: neither XDG_DATA_HOME nor HOME is an absolute path (set one, "
		         "or HUTCH_IMAGE_STORE, for --image)");
		return;
	}
	if (stat(path, &st) < 0) {
		c->ok = true;
		snprintf(c->detail, sizeof(c->detail),
		         "%.300s: not made yet (the first image pull or import makes it)", path);
		return;
	}
	c->ok = hutch_image_store_open(path, &s, &err) == 0 && hutch_image_list(s, &all, &err) == 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail), "%.300s: %d image%s", path,
		         cJSON_GetArraySize(all), cJSON_GetArraySize(all) == 1 ? "" : "s");
	else
		snprintf(c->detail, sizeof(c->detail), "%.300s", err.msg);
}

static void check_skopeo(struct check *c)
{
	struct hutch_err err = { 0 };
	char version[128];

	c->ok = hutch_image_skopeo_version(version, sizeof(version), &err) == 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail), "%.100s (hutch image pull)", version);
	else if (err.code == -ENOENT)
		snprintf(c->detail, sizeof(c->detail), "%s",
		         "skopeo missing: only 'hutch image pull' needs it (Debian: apt-get "
		         "install skopeo)");
	else
		snprintf(c->detail, sizeof(c->detail), "skopeo does not run: %.300s", err.msg);
}

static void check_nftables(struct check *c)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	c->ok = fd >= 0;
	if (fd >= 0)
		close(fd);
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "nftables netlink available (network all uses the table inet hutch)"
	               : "nfnetlink unavailable: modprobe nf_tables (only network all needs it)");
}

/* The supervisor dlopen()s the HTTP server library (mhd.h): ldd does not show it. */
static void check_http_server(struct check *c)
{
	struct hutch_err err = { 0 };

	c->ok = hutch_mhd_load(&err) == 0;
	snprintf(c->detail, sizeof(c->detail), "%s%s",
	         c->ok ? "libmicrohttpd loads (the supervisor's HTTP server)"
	               : "apt-get install libmicrohttpd12: ",
	         c->ok ? "" : err.msg);
}

/* network all and allow dlopen() libnl (netpolicy.h): ldd does not show it. */
static void check_libnl(struct check *c)
{
	struct hutch_err err = { 0 };

	c->ok = hutch_net_libnl_check(&err) == 0;
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "libnl loads (network all and allow wire links, addresses and routes "
	                 "with it; none needs none)"
	               : err.msg);
}

static void check_forwarding(struct check *c)
{
	struct hutch_err err = { 0 };
	char which[512];
	int n;

	if (geteuid() != 0) {
		c->ok = true;
		snprintf(c->detail, sizeof(c->detail), "%s",
		         "not needed: network all as an ordinary user goes through pasta");
		return;
	}
	n = hutch_nft_forward_blockers(which, sizeof(which), &err);
	c->ok = n == 0;
	if (n < 0)
		snprintf(c->detail, sizeof(c->detail), "cannot list nftables chains: %s", err.msg);
	else if (n == 0)
		snprintf(c->detail, sizeof(c->detail), "%s",
		         "no firewall chain drops forwarded packets (network all can get out)");
	else
		snprintf(c->detail, sizeof(c->detail),
		         "%.200s drop%s forwarded packets by policy (Docker does this): network "
		         "all cannot get out until they accept the hutch* interfaces, e.g. "
		         "'iptables -I DOCKER-USER -i hutch+ -j ACCEPT' and the same with -o",
		         which, n == 1 ? "s" : "");
}

/* Rootless network all: pasta (Debian's passt) and /dev/net/tun. */
static void check_usernet(struct check *c)
{
	struct hutch_err err = { 0 };
	char path[256];

	if (geteuid() == 0) {
		c->ok = true;
		snprintf(c->detail, sizeof(c->detail), "%s",
		         "not needed as root (network all uses a veth pair and nftables)");
		return;
	}
	c->ok = hutch_net_usernet_check(getenv("HUTCH_PASTA"), path, sizeof(path), &err) == 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail),
		         "%.200s and /dev/net/tun usable (network all through pasta)", path);
	else
		snprintf(c->detail, sizeof(c->detail), "%s", err.msg);
}

/*
 * The instance's sizes in /proc (runtime/lxcfs.h): root's sandboxes only.
 * For an ordinary user lxcfs cannot run (measured, docs/architecture.md):
 * /dev/fuse may be root's alone, and lxcfs 5.0 mounts the cgroup
 * hierarchies privately at its start, which a user namespace may not.
 */
static void check_views(struct check *c)
{
	const char *bin = hutch_lxcfs_binary();
	bool fuse = access("/dev/fuse", R_OK | W_OK) == 0;
	const char *fix = !bin ? (getenv("HUTCH_LXCFS") ? "HUTCH_LXCFS=none switches lxcfs off"
	                                                : "apt-get install lxcfs")
	                       : "no /dev/fuse: modprobe fuse";

	c->ok = bin && fuse && geteuid() == 0;
	if (c->ok)
		snprintf(c->detail, sizeof(c->detail),
		         "%s: /proc/meminfo, cpuinfo, stat, uptime and the online CPUs show each "
		         "sandbox's instance type",
		         bin);
	else if (geteuid() != 0)
		snprintf(c->detail, sizeof(c->detail),
		         "an ordinary user's sandboxes see the kernel's /proc (the host's memory "
		         "and "
		         "CPUs; nproc and /sys/fs/cgroup still show the limits where they apply): "
		         "lxcfs runs for root only (%slxcfs 5.0 mounts the cgroup hierarchies at "
		         "its "
		         "start, which a user namespace may not); run as root for the views",
		         fuse ? "" : "/dev/fuse is not yours to open; ");
	else
		snprintf(c->detail, sizeof(c->detail),
		         "sandboxes see the host's memory and CPUs in /proc (nproc and "
		         "/sys/fs/cgroup "
		         "still show the limits): %s",
		         fix);
}

static void check_python(struct check *c)
{
	c->ok = access("/usr/bin/python3", X_OK) == 0 && access("/bin/sh", X_OK) == 0;
	snprintf(c->detail, sizeof(c->detail), "%s",
	         c->ok ? "/usr/bin/python3 and /bin/sh present (sandboxes share the host's /usr)"
	               : "sandboxes get the host's /usr: apt-get install python3");
}

/* A disk per sandbox (runtime/disk.h) and, where the host cannot clone
 * files, the runtime dir's pool its files and forks' clones go in. */
static void check_disks(struct check *c)
{
	const char *why = NULL, *pool;

	c->ok = hutch_disk_possible(&why);
	if (!c->ok) {
		snprintf(c->detail, sizeof(c->detail),
		         "/workspace, /home and /tmp are tmpfs (counted in memory): %s", why);
		return;
	}
	pool = hutch_disk_pool_why_not(hutch_runtime_dir());
	snprintf(c->detail, sizeof(c->detail),
	         "a disk per sandbox (ext4 on a loop device, the instance's size); %s%s",
	         pool ? "no disks' pool: " : "",
	         pool ? pool
	              : "its file a clone in the "
	                "runtime dir's XFS pool "
	                "(forks clone it)");
}

/* Full snapshots (processes and memory): refused on every host for now;
 * the line says so and what the CRIU found says to 'criu check' (its
 * verdict cached per binary and kernel in the runtime dir). */
static void check_full_snapshots(struct check *c)
{
	struct hutch_criu criu;

	hutch_criu_probe(hutch_runtime_dir(), &criu);
	c->ok = criu.works;
	hutch_criu_refusal(&criu, c->detail, sizeof(c->detail));
}

/* The checks: name, required, function (cmd_doctor()'s rows). */
#define CHECKS(X)                                 \
	X("mode", true, check_mode)               \
	X("user namespaces", true, check_userns)  \
	X("namespaces", true, check_namespaces)   \
	X("cgroups", true, check_cgroups)         \
	X("seccomp", true, check_seccomp)         \
	X("mount API", true, check_mount_api)     \
	X("python3", true, check_python)          \
	X("/proc views", false, check_views)      \
	X("HTTP server", true, check_http_server) \
	X("overlayfs", false, check_overlay)      \
	X("image store", false, check_store)      \
	X("skopeo", false, check_skopeo)          \
	X("nftables", false, check_nftables)      \
	X("libnl", false, check_libnl)            \
	X("forwarding", false, check_forwarding)  \
	X("user network", false, check_usernet)   \
	X("disks", false, check_disks)            \
	X("full snapshots", false, check_full_snapshots)
#define CHECK_ROW(n, req, fn) { n, req },
#define CHECK_FN(n, req, fn)  fn,

static int cmd_doctor(struct hutch_cli_args *a)
{
	bool json = a->json;
	/* The rows are a const table and each check is filled from its row:
	 * an initialised local array of 17 struct check (1 KiB detail each)
	 * is a 17 KiB template in .data with a pointer per KiB, which the
	 * dynamic loader writes at the start of every hutch command (5 page
	 * faults of hutch version, issue 31). The names are in the rows and
	 * the functions apart, both from CHECKS: only the functions' table is
	 * relocated at start, not the names'. */
	static const struct {
		char name[20];
		bool required;
	} rows[] = { CHECKS(CHECK_ROW) };
	static void (*const fns[ELEMENTSOF(rows)])(struct check *) = { CHECKS(CHECK_FN) };

	struct check checks[ELEMENTSOF(rows)];
	bool all_ok = true;
	_cleanup_cjson_ cJSON *arr = json ? cJSON_CreateArray() : NULL;

	for (size_t i = 0; i < ELEMENTSOF(checks); i++) {
		checks[i] = (struct check){ .name = rows[i].name, .required = rows[i].required };
		fns[i](&checks[i]);
		if (checks[i].required && !checks[i].ok)
			all_ok = false;
		if (json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "check", checks[i].name);
			cJSON_AddBoolToObject(o, "ok", checks[i].ok);
			cJSON_AddBoolToObject(o, "required", checks[i].required);
			cJSON_AddStringToObject(o, "detail", checks[i].detail);
			cJSON_AddItemToArray(arr, o);
		} else {
			printf("%-5s %-16s %s\n",
			       checks[i].ok ? "ok" : (checks[i].required ? "FAIL" : "warn"),
			       checks[i].name, checks[i].detail);
		}
	}
	if (json) {
		_cleanup_free_ char *t = cJSON_Print(arr);
		printf("%s\n", t ? t : "[]");
	} else {
		printf("%s\n",
		       all_ok ? "this host can run hutch sandboxes"
		              : "this host cannot run hutch sandboxes yet: fix the FAIL lines");
	}
	return all_ok ? 0 : HUTCH_EXIT_NOT_CAPABLE;
}

const struct hutch_cli_verb hutch_verb_doctor = {
	.name = "doctor",
	.synopsis = "[--json]",
	.about = "Check namespaces, user namespaces, cgroups v1/v2, seccomp, the mount API, "
	         "python3, lxcfs's /proc views, overlayfs with idmapped layers, the image store, "
	         "skopeo, nftables, (for ordinary users) pasta and the disks; say what is missing "
	         "and how "
	         "to fix it.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.run = cmd_doctor,
};
