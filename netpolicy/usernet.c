/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mode all for ordinary users: user-mode networking through pasta (Debian's
 * passt package). An ordinary user cannot make a veth pair, turn on
 * forwarding or install the host's nftables table, so the sandbox's eth0 is
 * a tap device that pasta (started by the supervisor, as the user, joined
 * to init's user and network namespaces) serves: every connection out of it
 * becomes a socket that pasta opens on the host, as the user.
 *
 * pasta would reach whatever the user reaches, the host included, so the
 * policy is enforced before a packet gets to pasta, in the sandbox's own
 * network namespace: init installs the table "inet hutch_usernet" (nft.c)
 * before it drops its capabilities, refusing the blocked ranges of mode all
 * (allow.c), every IPv4 address the host has (and the /30s of root mode's
 * host links) as seen when the sandbox was made, and all IPv6. Commands
 * hold no CAP_NET_ADMIN in that namespace: they cannot change it. pasta is
 * told never to map the gateway to the host's loopback (--no-map-gw; the
 * gateway is in 10/8 besides) and to forward no port either way.
 *
 * pasta runs in the foreground as the supervisor's child, with SIGKILL as
 * its parent-death signal: it ends with the sandbox (plan_done kills and
 * reaps it) or with a supervisor killed outright. It runs in the sandbox's
 * cgroup (its memory, CPU and pid are the sandbox's). It joins init's
 * namespaces by fds the plan holds, not by init's pid (usernet-plan.c:
 * a restarted pasta could not open a non-dumpable init's /proc/PID/ns).
 * The supervisor watches its pidfd: a pasta that dies is noticed and
 * restarted (usernet-plan.c). Ready
 * means its pid file was written, which pasta does once the tap exists and
 * is configured; the pid file is a pipe (/proc/self/fd/N), so nothing
 * touches the disk.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "hostnet-internal.h"
#include "syscalls.h"

#define PASTA_PACKAGE    "passt"
#define TUN_PATH         "/dev/net/tun"
#define READY_TIMEOUT_MS (HUTCH_NET_HELPER_READY_S * 1000)
#define PIDFILE_FD       3
/* The host's addresses as set elements: a /32 or a /30 each, at most. */
#define HOST_BLOCK_MAX 4096

static const char *const pasta_dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin" };

/* pasta's path into ret: the override if set, else the first in
 * pasta_dirs; -ENOENT when it is not executable there. */
static int find_pasta(const char *override, char *ret, size_t size)
{
	if (override && override[0]) {
		snprintf(ret, size, "%s", override);
		return access(ret, X_OK) == 0 ? 0 : -ENOENT;
	}
	for (size_t i = 0; i < ELEMENTSOF(pasta_dirs); i++) {
		snprintf(ret, size, "%s/pasta", pasta_dirs[i]);
		if (access(ret, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

int hutch_net_usernet_check(const char *override, char *ret_path, size_t size,
                            struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	bool given = override && override[0];

	if (find_pasta(override, ret_path, size) < 0)
		return hutch_err_set(err, -ENOENT,
		                     "network all as an ordinary user needs pasta (user-mode "
		                     "networking), not found%s%.100s%s: install the '" PASTA_PACKAGE
		                     "' package (apt-get install " PASTA_PACKAGE
		                     "), or run as root, or use --network none or allow:HOST,...",
		                     given ? " at '" : "", given ? override : "",
		                     given ? "' (HUTCH_PASTA)" : "");
	fd = open(TUN_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = -errno;
		return hutch_err_set_errno(
		        err, e,
		        "network all as an ordinary user needs " TUN_PATH " (pasta's tap "
		        "device): %s; udev makes it mode 0666 on a standard system (as root: "
		        "'chmod 0666 " TUN_PATH "', or 'modprobe tun' if it is missing)",
		        e == -ENOENT ? "it does not exist" : "you cannot open it");
	}
	return 0;
}

static int append(char *buf, size_t size, size_t *used, uint32_t a, unsigned bits)
{
	uint32_t h = ntohl(a);
	int n = snprintf(buf + *used, size - *used, "%s%u.%u.%u.%u/%u", *used ? ", " : "", h >> 24,
	                 (h >> 16) & 0xff, (h >> 8) & 0xff, h & 0xff, bits);

	if (n < 0 || (size_t)n >= size - *used)
		return -ENOSPC;
	*used += (size_t)n;
	return 0;
}

int hutch_net_usernet_host_block(char **ret, struct hutch_err *err)
{
	struct ifaddrs *ifa = NULL;
	_cleanup_free_ char *buf = malloc(HOST_BLOCK_MAX);
	size_t used = 0;
	int r = 0;

	if (!buf)
		return hutch_err_set(err, -ENOMEM, "list the host's addresses");
	buf[0] = '\0';
	if (getifaddrs(&ifa) < 0)
		return hutch_err_set_errno(err, -errno, "list the host's addresses");
	for (struct ifaddrs *i = ifa; r >= 0 && i; i = i->ifa_next) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
		const struct sockaddr_in *m = (const struct sockaddr_in *)i->ifa_netmask;

		if (!a || a->sin_family != AF_INET)
			continue;
		r = append(buf, HOST_BLOCK_MAX, &used, a->sin_addr.s_addr, 32);
		/* A root-mode sandbox sits on the far end of a hutch link. */
		if (r >= 0 && m && hutch_net_link_slot(i->ifa_name) >= 0)
			r = append(buf, HOST_BLOCK_MAX, &used,
			           a->sin_addr.s_addr & m->sin_addr.s_addr,
			           (unsigned)__builtin_popcount(m->sin_addr.s_addr));
	}
	freeifaddrs(ifa);
	if (r < 0)
		return hutch_err_set(err, r,
		                     "the host has more IPv4 addresses than a sandbox's "
		                     "block list holds (%d bytes)",
		                     HOST_BLOCK_MAX);
	*ret = TAKE_PTR(buf);
	return 0;
}

/* Into the sandbox's cgroup (cgfd, v2; -1: none), so that pasta's memory,
 * CPU and pid count are the sandbox's, as its traffic is: join by writing
 * "0" (a self-migration), saying why on stderr when it cannot. */
static int join_cgroup(int cgfd, int err_w)
{
	_cleanup_close_ int fd = -EBADF;

	if (cgfd < 0)
		return 0;
	fd = openat(cgfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (fd >= 0 && write(fd, "0", 1) == 1)
		return 0;
	dprintf(err_w, "cannot join the sandbox's cgroup: %s\n", strerror(errno));
	return -1;
}

/* In the child, before execve: only the pid file pipe (PIDFILE_FD),
 * init's user and network namespaces (USERNS_FD, NETNS_FD) and stderr (the
 * supervisor reads pasta's complaint from it) stay open. */
static _Noreturn void exec_pasta(const char *path, char *const argv[], const int fds[3], int err_w,
                                 pid_t parent, int cgfd)
{
	char *envp[] = { (char *)"PATH=/usr/bin:/bin", NULL };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), high[3];
	sigset_t none;

	/* A process group of its own: stop() kills the group, so a wrapper
	 * given as HUTCH_PASTA that forks pasta does not leave it behind. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || null < 0 ||
	    setpgid(0, 0) < 0 || join_cgroup(cgfd, err_w) < 0)
		_exit(127);
	/* The supervisor's blocked signals and ignored SIGPIPE would be
	 * inherited; pasta of Debian 12 even refuses to start with SIGPIPE
	 * already ignored ("Couldn't install signal handlers"). */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)signal(SIGPIPE, SIG_DFL);
	/* Above the targets first: a source may sit on another's target. */
	for (int i = 0; i < 3; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, PIDFILE_FD + 16)) < 0)
			_exit(127);
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || /* lint-fds: ok: child stdio */
	    dup2(err_w, 2) < 0)                       /* lint-fds: ok: child stdio */
		_exit(127);
	for (int i = 0; i < 3; i++)
		if (dup2(high[i], PIDFILE_FD + i) < 0) /* lint-fds: ok: pasta's fds 3-5 */
			_exit(127);
	if (sys_close_range(PIDFILE_FD + 3, ~0U, 0) < 0)
		_exit(127);
	execve(path, argv, envp);
	_exit(127);
}

void hutch_net_usernet_complaint(int err_r, char *buf, size_t size)
{
	ssize_t n;

	(void)hutch_fd_nonblock(err_r, true);
	n = read(err_r, buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
	for (char *c = buf; *c; c++)
		if (*c == '\n' || (unsigned char)*c < 0x20)
			*c = *(c + 1) ? ' ' : '\0';
}

int hutch_net_usernet_wait_ready(pid_t pid, int ready_r, int err_r, struct hutch_err *err)
{
	struct pollfd p = { .fd = ready_r, .events = POLLIN };
	char out[256] = "";
	int r;

	do
		r = poll(&p, 1, READY_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r > 0) {
		char got[32];
		if (read(ready_r, got, sizeof(got)) > 0)
			return 0;
	}
	(void)kill(pid, SIGKILL);
	hutch_net_usernet_complaint(err_r, out, sizeof(out));
	if (r == 0)
		return hutch_err_set(err, -ETIMEDOUT, "pasta did not start within %d s%s%.150s",
		                     READY_TIMEOUT_MS / 1000, out[0] ? ": " : "", out);
	return hutch_err_set(err, -EIO, "pasta failed%s%.180s", out[0] ? ": " : "", out);
}

int hutch_net_usernet_spawn(const char *path, const struct hutch_net_addrs *a,
                            const struct hutch_net_usernet_fds *in,
                            struct hutch_net_usernet_proc *ret, struct hutch_err *err)
{
	char addr[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], pidfile[32], userns[32], netns[32];
	char *argv[] = { (char *)path, "--foreground", "--quiet", "--ipv4-only", "--no-map-gw",
		         /* No port forwarded either way: -T/-U default to "auto", which
		          * would bind the host's listening loopback ports inside. */
		         "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-dhcp",
		         "--ns-ifname", "eth0", "--config-net", "--address", addr, "--netmask",
		         "30", "--gateway", gw, "--pid", pidfile,
		         /* init's namespaces by the fds we hold, not by its pid: a
		          * non-dumpable init's /proc/PID/ns is closed to the user
		          * outside its user namespace (a restart); the supervisor
		          * reaps pasta, so no watch of the namespace's path either */
		         "--userns", userns, "--netns", netns, "--no-netns-quit", NULL };
	_cleanup_close_ int ready_r = -EBADF, ready_w = -EBADF, err_r = -EBADF, err_w = -EBADF;
	pid_t self = getpid(), pid;
	int fds[2];

	inet_ntop(AF_INET, &a->sandbox, addr, sizeof(addr));
	inet_ntop(AF_INET, &a->gateway, gw, sizeof(gw));
	snprintf(pidfile, sizeof(pidfile), "/proc/self/fd/%d", PIDFILE_FD);
	snprintf(userns, sizeof(userns), "/proc/self/fd/%d", PIDFILE_FD + 1);
	snprintf(netns, sizeof(netns), "/proc/self/fd/%d", PIDFILE_FD + 2);
	if (pipe2(fds, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	ready_r = fds[0], ready_w = fds[1];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	err_r = fds[0], err_w = fds[1];
	pid = fork();
	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "fork '%s'", path);
	if (pid == 0)
		exec_pasta(path, argv, (const int[3]){ ready_w, in->userns_fd, in->netns_fd },
		           err_w, self, in->cgroup_fd);
	(void)setpgid(pid, pid); /* the child does it too: no window either way */
	/* Our child, not reaped yet: the pidfd is pasta's, whatever happens. */
	ret->pid = pid; /* reaped by hutch_net_usernet_stop(), also on failure */
	ret->pidfd = sys_pidfd_open(pid, 0);
	ret->ready_fd = TAKE_FD(ready_r);
	ret->err_fd = TAKE_FD(err_r);
	if (ret->pidfd < 0)
		return hutch_err_set_errno(err, -errno, "pidfd of pasta");
	return 0;
}

int hutch_net_usernet_stop(pid_t pid)
{
	int status = 0;

	if (pid <= 0)
		return 0;
	/* Nothing of pasta's is worth a grace period. The group is pid's
	 * from the fork on (setpgid in the child and in start()). */
	(void)kill(-pid, SIGKILL);
	(void)kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}
