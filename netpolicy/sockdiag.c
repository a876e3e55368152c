/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TCP socket's inode by its exact addresses, from sock_diag
 * (sockdiag-internal.h). The request is the kernel's struct, built by
 * hand: one fixed message, no attribute (libnl would add nothing).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "cleanup.h"
#include "sockdiag-internal.h"

int sockdiag_open(int *ret, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return hutch_err_set_errno(err, -errno, "egress log: sock_diag socket");
	*ret = TAKE_FD(fd);
	return 0;
}

/* Is h the answer to seq about the socket asked for (not a listener)? */
static int answer(const struct nlmsghdr *h, size_t len, uint32_t seq,
                  const struct inet_diag_req_v2 *req, uint32_t *ret_inode)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);

	if (!NLMSG_OK(h, len))
		return -EPROTO;
	if (h->nlmsg_seq != seq)
		return 1; /* an earlier request's: read on */
	if (h->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(h);

		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EPROTO;
		return e->error < 0 ? e->error : -EPROTO;
	}
	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EPROTO;
	/* The kernel's look-up falls back to a listener of the port. */
	if (m->idiag_state == TCP_LISTEN || m->id.idiag_sport != req->id.idiag_sport ||
	    m->id.idiag_dport != req->id.idiag_dport ||
	    m->id.idiag_src[0] != req->id.idiag_src[0] ||
	    m->id.idiag_dst[0] != req->id.idiag_dst[0] || !m->idiag_inode)
		return -ENOENT;
	*ret_inode = m->idiag_inode;
	return 0;
}

int sockdiag_inode(int fd, uint32_t *seq, const struct sockaddr_in *local,
                   const struct sockaddr_in *remote, uint32_t *ret_inode)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q = {
		.h = { .nlmsg_len = sizeof(q),
		       .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST,
		       .nlmsg_seq = ++*seq },
		.r = { .sdiag_family = AF_INET,
		       .sdiag_protocol = IPPROTO_TCP,
		       .idiag_states = ~0u,
		       .id = { .idiag_sport = local->sin_port,
		               .idiag_dport = remote->sin_port,
		               .idiag_src = { local->sin_addr.s_addr },
		               .idiag_dst = { remote->sin_addr.s_addr },
		               .idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } } },
	};
	union {
		struct nlmsghdr h;
		char buf[1024];
	} a;

	if (fd < 0)
		return -EBADF;
	if (send(fd, &q, sizeof(q), 0) < 0)
		return -errno;
	/* The kernel answers within the send: the answer is queued now. */
	for (int i = 0; i < 8; i++) {
		ssize_t n = recv(fd, &a, sizeof(a), MSG_DONTWAIT);
		int r;

		if (n < 0)
			return errno == EAGAIN ? -ENOENT : -errno;
		r = answer(&a.h, (size_t)n, *seq, &q.r, ret_inode);
		if (r <= 0)
			return r;
	}
	return -ENOENT;
}
