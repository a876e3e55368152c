/* SPDX-License-Identifier: Apache-2.0 */
/* What init sets in its new namespaces before it builds the root; see ns.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "netpolicy.h"
#include "ns.h"
#include "proto.h"

/* The listeners of the DNS stub, TLS proxy and host ports live in our
 * network namespace but are served by the supervisor on the host. */
static int send_listeners(int sock, const struct hutch_net_plan *net, struct hutch_err *err)
{
	struct hutch_net_listener ls[HUTCH_NET_LISTENERS_MAX];
	struct hutch_msg_net_fd body[HUTCH_NET_LISTENERS_MAX];
	int fds[HUTCH_NET_LISTENERS_MAX];
	struct hutch_err warn = { 0 };
	int n, r;

	_Static_assert(HUTCH_NET_LISTENERS_MAX <= HUTCH_PROTO_FDS_MAX, "one message");
	n = hutch_net_child_listeners(net, ls, ELEMENTSOF(ls), &warn, err);
	/* what the user asked for and does not get, said (HUTCH_MSG_NOTE) */
	if (n >= 0 && warn.code &&
	    (r = hutch_proto_send(sock, HUTCH_MSG_NOTE, 0, &warn, sizeof(warn), NULL, 0)) < 0) {
		for (int i = 0; i < n; i++)
			close(ls[i].fd);
		return hutch_err_set_errno(err, r, "pass a warning to the supervisor");
	}
	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++) {
		body[i] = (struct hutch_msg_net_fd){ .kind = ls[i].kind, .port = ls[i].port };
		fds[i] = ls[i].fd;
	}
	r = hutch_proto_send(sock, HUTCH_MSG_NET_FDS, 0, body, (size_t)n * sizeof(body[0]), fds,
	                     (size_t)n);
	hutch_close_many(fds, (size_t)n);
	return r < 0 ? hutch_err_set_errno(err, r, "pass the listeners to the supervisor") : 0;
}

int hutch_init_write_sysctls(const char *const *kv, const char *prefix, struct hutch_err *err)
{
	for (; *kv; kv++) {
		const char *eq = strchr(*kv, '=');
		char path[PATH_MAX] = "/proc/sys/";
		size_t n = strlen(path);
		int r;

		if (!eq || (size_t)(eq - *kv) + n >= sizeof(path))
			return hutch_err_set(err, -EINVAL, "linux.sysctl: bad entry");
		if (prefix && strncmp(*kv, prefix, strlen(prefix)) != 0)
			continue;
		/* net.ipv4.ping_group_range -> /proc/sys/net/ipv4/ping_group_range */
		for (const char *k = *kv; k < eq; k++)
			path[n++] = *k == '.' ? '/' : *k;
		path[n] = '\0';
		r = hutch_write_knob_at(AT_FDCWD, path, eq + 1);
		if (r < 0)
			return hutch_err_set_errno(err, r, "linux.sysctl.%.*s: write '%s'",
			                           (int)(eq - *kv), *kv, eq + 1);
	}
	return 0;
}

static int setup_net(int sock, const struct hutch_net_plan *net, struct hutch_err *err)
{
	if (hutch_net_setup_child(net, err) < 0 || send_listeners(sock, net, err) < 0)
		return hutch_err_prefix(err, "network");
	return 0;
}

/* Off the path to GO: the namespace the clone did not make (its kernel
 * setup, the per-net tables, lo) is made while the supervisor writes our
 * id maps and waits for the disk. Our user namespace owns it, as it
 * would own one made by the clone: we hold every capability there,
 * mapped or not yet. Nothing else runs in the sandbox yet, and nothing
 * of ours reaches the host's network before it. */
int hutch_init_make_net(int sock, const struct hutch_net_plan *net, struct hutch_err *err)
{
	if (unshare(CLONE_NEWNET) < 0)
		return hutch_err_set_errno(err, -errno, "create network namespace");
	return setup_net(sock, net, err);
}

/* Host name, network, and a container's sysctls of those namespaces. */
int hutch_init_setup_ns(int sock, const char *hostname, const struct hutch_net_plan *net,
                        const char *const *sysctls, struct hutch_err *err)
{
	/* NULL: a pod's namespace, joined (supervisor/pod.c), is the pod's
	 * to set up; its container changes neither. */
	if (hostname && sethostname(hostname, strlen(hostname)) < 0)
		return hutch_err_set_errno(err, -errno, "set hostname '%s'", hostname);
	if (net && setup_net(sock, net, err) < 0)
		return err->code;
	/* Through the /proc we still share with the host (the new root's
	 * /proc/sys is read-only): its net and ipc entries are those of our
	 * namespaces, which our user namespace owns. */
	if (sysctls && hutch_init_write_sysctls(sysctls, NULL, err) < 0)
		return err->code;
	return 0;
}
