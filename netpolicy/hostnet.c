/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host side of mode all: the veth pair of one sandbox, and the state shared
 * by every sandbox (the nftables table, IPv4 forwarding).
 *
 * Locking, on HUTCH_NET_STATE_DIR/lock: attach holds LOCK_SH from ensuring
 * the table until its link exists, so attaches run concurrently; the
 * "last one out" check (no hutch<slot> link left -> remove the table,
 * restore forwarding) runs under LOCK_EX, so it can never see the moment
 * between an attach's table and its link. Detach and gc wait for LOCK_EX
 * rather than skip when busy: skipping could leave the table behind when
 * two sandboxes leave at once (each seeing the other's link), and the
 * shared holders only hold it for a few netlink round trips.
 *
 * Forwarding: if net.ipv4.ip_forward is 0, the file "forwarding-<netns
 * inode>" in the state directory records that hutch turns it on, before it
 * does; the last one out writes 0 back only if that record exists. The
 * knob, the table and the links are the network namespace's own, so is the
 * record: a hutch run in a namespace of its own (the tests' own_net, a
 * container's) must not make the machine's last one out turn the machine's
 * forwarding off, nor the other way round.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "hostnet-internal.h"

#define IP_FORWARD      "/proc/sys/net/ipv4/ip_forward"
#define FORWARDING_FILE "forwarding-%llu"
#define LOCK_FILE       "lock"
#define VETH_PEER_NAME  "eth0"

/* Open (creating) the state directory and its lock file, and flock it. */
static int lock_state(int how, int *ret_dirfd, int *ret_lockfd, struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lockfd = -EBADF;
	int r;

	r = hutch_mkdir_p_at(AT_FDCWD, HUTCH_NET_STATE_DIR, 0700);
	if (r < 0)
		return hutch_err_set_errno(err, r, "create '%s'", HUTCH_NET_STATE_DIR);
	dirfd = open(HUTCH_NET_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s'", HUTCH_NET_STATE_DIR);
	lockfd = openat(dirfd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lockfd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s/%s'", HUTCH_NET_STATE_DIR,
		                           LOCK_FILE);
	while (flock(lockfd, how) < 0) {
		if (errno != EINTR)
			return hutch_err_set_errno(err, -errno, "lock '%s/%s'", HUTCH_NET_STATE_DIR,
			                           LOCK_FILE);
	}
	*ret_dirfd = TAKE_FD(dirfd);
	*ret_lockfd = TAKE_FD(lockfd);
	return 0;
}

/* The record's name for this thread's network namespace. */
static int forwarding_file(char name[static 32], struct hutch_err *err)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return hutch_err_set_errno(err, -errno, "stat '/proc/thread-self/ns/net'");
	(void)snprintf(name, 32, FORWARDING_FILE, (unsigned long long)st.st_ino);
	return 0;
}

/* Turn IPv4 forwarding on, recording first that hutch did. */
static int forwarding_on(int dirfd, struct hutch_err *err)
{
	char v[8], name[32];
	ssize_t n;
	int r;

	n = hutch_read_file_at(AT_FDCWD, IP_FORWARD, v, sizeof(v));
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "read '%s'", IP_FORWARD);
	if (v[0] != '0')
		return 0;
	r = forwarding_file(name, err);
	if (r < 0)
		return r;
	r = hutch_write_file_at(dirfd, name, "hutch turned net.ipv4.ip_forward on\n", 0600);
	if (r < 0)
		return hutch_err_set_errno(err, r, "record '%s/%s'", HUTCH_NET_STATE_DIR, name);
	r = hutch_write_knob_at(AT_FDCWD, IP_FORWARD, "1");
	if (r < 0)
		return hutch_err_set_errno(err, r, "turn on IPv4 forwarding ('%s')", IP_FORWARD);
	return 0;
}

/* Put forwarding back if hutch turned it on. */
static int forwarding_restore(int dirfd, struct hutch_err *err)
{
	struct stat st;
	char name[32];
	int r;

	r = forwarding_file(name, err);
	if (r < 0)
		return r;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
		                       : hutch_err_set_errno(err, -errno, "check '%s/%s'",
		                                             HUTCH_NET_STATE_DIR, name);
	r = hutch_write_knob_at(AT_FDCWD, IP_FORWARD, "0");
	if (r < 0)
		return hutch_err_set_errno(err, r, "turn off IPv4 forwarding ('%s')", IP_FORWARD);
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return hutch_err_set_errno(err, -errno, "remove '%s/%s'", HUTCH_NET_STATE_DIR,
		                           name);
	return 0;
}

/* Call fn(sk, name, slot, ud) for each link named hutch<slot>, until it
 * returns non-zero (which is returned). */
static int foreach_hutch_link(struct nl_sock *sk,
                              int (*fn)(struct nl_sock *sk, const char *name, unsigned slot,
                                        void *ud),
                              void *ud, struct hutch_err *err)
{
	_cleanup_nl_cache_ struct nl_cache *links = NULL;
	int r;

	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &links);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "list links: %s", nl_geterror(r));
	for (struct nl_object *o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		const char *name = rtnl_link_get_name((struct rtnl_link *)o);
		long slot = name ? hutch_net_link_slot(name) : -1;

		if (slot < 0)
			continue;
		r = fn(sk, name, (unsigned)slot, ud);
		if (r != 0)
			return r;
	}
	return 0;
}

static int found_one(struct nl_sock *sk, const char *name, unsigned slot, void *ud)
{
	return 1;
}

/* Under LOCK_EX: if no hutch link remains, remove the table and restore
 * forwarding. */
static int last_one_out(struct nl_sock *sk, struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lockfd = -EBADF;
	int r;

	r = lock_state(LOCK_EX, &dirfd, &lockfd, err);
	if (r < 0)
		return r;
	r = foreach_hutch_link(sk, found_one, NULL, err);
	if (r != 0)
		return r < 0 ? r : 0;
	r = hutch_nft_remove(err);
	if (r < 0)
		return r;
	return forwarding_restore(dirfd, err);
}

/* Delete a link by name; a missing one is success. */
static int link_delete(struct nl_sock *sk, const char *name, struct hutch_err *err)
{
	_cleanup_rtnl_link_ struct rtnl_link *link = NULL;
	int r;

	link = rtnl_link_alloc();
	if (!link)
		return hutch_err_set(err, -ENOMEM, "allocate link");
	rtnl_link_set_name(link, name);
	r = rtnl_link_delete(sk, link);
	if (r < 0 && r != -NLE_OBJ_NOTFOUND && r != -NLE_NODEV)
		return hutch_err_set(err, hutch_nl_errno(r), "delete link '%s': %s", name,
		                     nl_geterror(r));
	return 0;
}

/* The veth pair: host end a->host_if here, peer "eth0" in init_pid's netns. */
static int veth_create(struct nl_sock *sk, const struct hutch_net_addrs *a, pid_t init_pid,
                       struct hutch_err *err)
{
	_cleanup_rtnl_link_ struct rtnl_link *peer = NULL;
	struct rtnl_link *veth;
	int r;

	veth = rtnl_link_veth_alloc();
	if (!veth)
		return hutch_err_set(err, -ENOMEM, "allocate veth");
	rtnl_link_set_name(veth, a->host_if);
	peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, VETH_PEER_NAME);
	rtnl_link_set_ns_pid(peer, init_pid);
	r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_veth_release(veth);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r),
		                     "create veth '%s' (peer in pid %d): %s", a->host_if,
		                     (int)init_pid, nl_geterror(r));
	return 0;
}

/* Address and up on the host end. The host end gets no IPv6 (the table
 * refuses IPv6 from a sandbox anyway; this also spares it a link-local
 * address): best effort, the knob is absent when IPv6 is off. */
static int host_end_setup(struct nl_sock *sk, const struct hutch_net_addrs *a,
                          struct hutch_err *err)
{
	_cleanup_rtnl_link_ struct rtnl_link *link = NULL;
	char knob[96];
	int r;

	(void)snprintf(knob, sizeof(knob), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", a->host_if);
	(void)hutch_write_knob_at(AT_FDCWD, knob, "1");
	r = rtnl_link_get_kernel(sk, 0, a->host_if, &link);
	if (r < 0)
		return hutch_err_set(err, hutch_nl_errno(r), "find link '%s': %s", a->host_if,
		                     nl_geterror(r));
	r = hutch_nl_addr_add(sk, rtnl_link_get_ifindex(link), a->gateway, 30, err);
	if (r < 0)
		return hutch_err_prefix(err, "link '%s'", a->host_if);
	return hutch_nl_link_up(sk, a->host_if, err);
}

/* Table, forwarding and link, under LOCK_SH. */
static int attach_locked(struct nl_sock *sk, const struct hutch_net_addrs *a, pid_t init_pid,
                         bool *ret_made_link, struct hutch_err *err)
{
	_cleanup_close_ int dirfd = -EBADF, lockfd = -EBADF;
	int r;

	r = lock_state(LOCK_SH, &dirfd, &lockfd, err);
	if (r < 0)
		return r;
	r = hutch_nft_ensure(&a->pool, err);
	if (r < 0)
		return r;
	r = forwarding_on(dirfd, err);
	if (r < 0)
		return r;
	r = veth_create(sk, a, init_pid, err);
	if (r < 0)
		return r;
	*ret_made_link = true;
	return host_end_setup(sk, a, err);
}

int hutch_net_host_attach(const struct hutch_net_addrs *a, pid_t init_pid, struct hutch_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	struct hutch_err ignored = { 0 };
	bool made_link = false;
	int r;

	if (a->pool.prefix < 8 || a->pool.prefix > 28 || hutch_net_link_slot(a->host_if) < 0)
		return hutch_err_set(err, -EINVAL,
		                     "network addresses not from hutch_net_pool_addrs()");
	r = hutch_nl_open(&sk, err);
	if (r < 0)
		return r;
	r = attach_locked(sk, a, init_pid, &made_link, err);
	if (r < 0) {
		/* Undo: our link, then the shared state if we were alone. */
		if (made_link)
			(void)link_delete(sk, a->host_if, &ignored);
		(void)last_one_out(sk, &ignored);
		return hutch_err_prefix(err, "attach network");
	}
	return 0;
}

int hutch_net_host_detach(const struct hutch_net_addrs *a, struct hutch_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	int r;

	r = hutch_nl_open(&sk, err);
	if (r < 0)
		return r;
	r = link_delete(sk, a->host_if, err);
	if (r < 0)
		return r;
	return last_one_out(sk, err);
}

struct gc_ctx {
	bool (*slot_alive)(unsigned slot, void *ud);
	void *ud;
	struct hutch_err *err;
};

static int delete_if_dead(struct nl_sock *sk, const char *name, unsigned slot, void *ud)
{
	struct gc_ctx *gc = ud;

	return gc->slot_alive(slot, gc->ud) ? 0 : link_delete(sk, name, gc->err);
}

int hutch_net_host_gc(bool (*slot_alive)(unsigned slot, void *ud), void *ud, struct hutch_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	struct gc_ctx gc = { .slot_alive = slot_alive, .ud = ud, .err = err };
	int r;

	r = hutch_nl_open(&sk, err);
	if (r < 0)
		return r;
	r = foreach_hutch_link(sk, delete_if_dead, &gc, err);
	if (r < 0)
		return r;
	return last_one_out(sk, err);
}
