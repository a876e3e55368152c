/* SPDX-License-Identifier: Apache-2.0 */
/* Supervisor <-> init messages; see proto.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "caps.h"
#include "cleanup.h"
#include "fdutil.h"
#include "proto.h"

ssize_t hutch_proto_spawn_encode(const char *const *argv, const char *const *envp, const char *cwd,
                                 char **ret_buf)
{
	struct hutch_msg_spawn fixed = { .uid = HUTCH_SPAWN_DEFAULT_ID,
		                         .gid = HUTCH_SPAWN_DEFAULT_ID };
	size_t len = sizeof(fixed);
	char *buf, *p;

	for (; argv[fixed.argc]; fixed.argc++)
		len += strlen(argv[fixed.argc]) + 1;
	for (; envp[fixed.envc]; fixed.envc++)
		len += strlen(envp[fixed.envc]) + 1;
	len += strlen(cwd) + 1;
	if (fixed.argc == 0 || fixed.argc > HUTCH_SPAWN_MAX_ARGS ||
	    fixed.envc > HUTCH_SPAWN_MAX_ENV)
		return -EINVAL;
	if (len + sizeof(struct hutch_msg_hdr) > HUTCH_PROTO_MAX)
		return -E2BIG;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &fixed, sizeof(fixed));
	p = buf + sizeof(fixed);
	for (uint32_t i = 0; i < fixed.argc; i++)
		p = stpcpy(p, argv[i]) + 1;
	for (uint32_t i = 0; i < fixed.envc; i++)
		p = stpcpy(p, envp[i]) + 1;
	p = stpcpy(p, cwd) + 1;
	*ret_buf = buf;
	return (ssize_t)len;
}

int hutch_proto_spawn_decode(const char *body, size_t len, struct hutch_spawn_req *ret)
{
	struct hutch_msg_spawn fixed;
	const char *p, *end = body + len;
	uint32_t n = 0;

	if (len < sizeof(fixed) + 2 || body[len - 1] != '\0')
		return -EBADMSG;
	memcpy(&fixed, body, sizeof(fixed));
	if (fixed.argc == 0 || fixed.argc > HUTCH_SPAWN_MAX_ARGS ||
	    fixed.envc > HUTCH_SPAWN_MAX_ENV || fixed.uid > HUTCH_SPAWN_MAX_ID ||
	    fixed.gid > HUTCH_SPAWN_MAX_ID)
		return -EBADMSG;
	for (size_t i = 0; i < ELEMENTSOF(fixed.caps); i++)
		if (fixed.caps[i] & ~HUTCH_CAPS_CONTAINER_MAX)
			return -EBADMSG;
	if (fixed.ngroups > HUTCH_SPAWN_MAX_GROUPS)
		return -EBADMSG;
	for (uint32_t i = 0; i < fixed.ngroups; i++)
		if (fixed.groups[i] > HUTCH_SPAWN_MAX_ID)
			return -EBADMSG;
	p = body + sizeof(fixed);
	for (uint32_t i = 0; i < fixed.argc + fixed.envc + 1; i++) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			return -EBADMSG;
		if (i < fixed.argc)
			ret->argv[i] = p;
		else if (i < fixed.argc + fixed.envc)
			ret->envp[i - fixed.argc] = p;
		else
			ret->cwd = p;
		p = z + 1;
		n++;
	}
	if (p != end)
		return -EBADMSG;
	ret->argv[fixed.argc] = NULL;
	ret->envp[fixed.envc] = NULL;
	ret->argc = fixed.argc;
	ret->envc = fixed.envc;
	ret->flags = fixed.flags;
	ret->winsize = fixed.winsize;
	ret->uid = fixed.uid;
	ret->gid = fixed.gid;
	memcpy(ret->caps, fixed.caps, sizeof(ret->caps));
	ret->ngroups = fixed.ngroups;
	for (uint32_t i = 0; i < fixed.ngroups; i++)
		ret->groups[i] = fixed.groups[i];
	return 0;
}

/* One datagram: hdr, body (len bytes: none for a body in a memfd), fds. */
static int send_datagram(int sock, const struct hutch_msg_hdr *hdr, const void *body, size_t len,
                         const int *fds, size_t nfds)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)hdr, .iov_len = sizeof(*hdr) },
		{ .iov_base = (void *)body, .iov_len = len },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * (HUTCH_PROTO_FDS_MAX + 1))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t n;

	if (nfds > 0) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == sizeof(*hdr) + len ? 0 : -EMSGSIZE;
}

/* The body in a sealed memfd, passed after the message's own fds
 * (HUTCH_MSG_F_MEMFD, proto.h). */
static int send_memfd(int sock, struct hutch_msg_hdr *hdr, const void *body, size_t len,
                      const int *fds, size_t nfds)
{
	int all[HUTCH_PROTO_FDS_MAX + 1];
	_cleanup_close_ int mfd = memfd_create("hutch-msg", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (mfd < 0)
		return -errno;
	if (hutch_write_all(mfd, body, len) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	if (nfds)
		memcpy(all, fds, nfds * sizeof(fds[0]));
	all[nfds] = mfd;
	hdr->type |= HUTCH_MSG_F_MEMFD;
	return send_datagram(sock, hdr, NULL, 0, all, nfds + 1);
}

int hutch_proto_send(int sock, uint32_t type, uint64_t id, const void *body, size_t len,
                     const int *fds, size_t nfds)
{
	struct hutch_msg_hdr hdr = { .type = type, .len = (uint32_t)len, .id = id };
	int r;

	if (nfds > HUTCH_PROTO_FDS_MAX || (type & HUTCH_MSG_F_MEMFD) ||
	    len + sizeof(hdr) > HUTCH_PROTO_MAX)
		return -EINVAL;
	r = send_datagram(sock, &hdr, body, len, fds, nfds);
	/* Larger than this socket's send buffer may be (a rootless
	 * supervisor's, any init's: net.core.wmem_max): the body apart. */
	if ((r == -EMSGSIZE || r == -ENOBUFS) && len > 0)
		r = send_memfd(sock, &hdr, body, len, fds, nfds);
	return r;
}

/* A HUTCH_MSG_F_MEMFD message's body, from the last of its fds (closed):
 * only a memfd sealed against writes and shrinking is read (a pipe or a
 * file on a FUSE mount could block the reader), at most cap bytes. */
static int read_memfd(struct hutch_msg_hdr *hdr, void *buf, size_t cap, int mfd)
{
	int seals = fcntl(mfd, F_GET_SEALS);
	ssize_t n = -1;

	if (seals >= 0 &&
	    (seals & (F_SEAL_WRITE | F_SEAL_SHRINK)) == (F_SEAL_WRITE | F_SEAL_SHRINK) &&
	    hdr->len <= cap)
		n = pread(mfd, buf, hdr->len, 0);
	close(mfd);
	if (n < 0 || (size_t)n != hdr->len)
		return -EBADMSG;
	hdr->type &= ~HUTCH_MSG_F_MEMFD;
	return 0;
}

ssize_t hutch_proto_recv(int sock, struct hutch_msg_hdr *hdr, void *buf, size_t cap, int *fds,
                         size_t *nfds)
{
	struct iovec iov[2] = {
		{ .iov_base = hdr, .iov_len = sizeof(*hdr) },
		{ .iov_base = buf, .iov_len = cap },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * (HUTCH_PROTO_FDS_MAX + 1))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = iov,
		              .msg_iovlen = 2,
		              .msg_control = u.buf,
		              .msg_controllen = sizeof(u.buf) };
	size_t want = nfds ? *nfds : 0, got = 0, nin = 0;
	int in[HUTCH_PROTO_FDS_MAX + 1];
	bool bad;
	ssize_t n;

	memset(hdr, 0, sizeof(*hdr));
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (nin < ELEMENTSOF(in))
				in[nin++] = fd;
			else
				close(fd);
		}
	}
	bad = n > 0 && ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < sizeof(*hdr));
	if (!bad && n > 0 && (hdr->type & HUTCH_MSG_F_MEMFD))
		bad = (size_t)n != sizeof(*hdr) || nin == 0 ||
		      read_memfd(hdr, buf, cap, in[--nin]) < 0;
	else if (!bad && n > 0)
		bad = hdr->len != (size_t)n - sizeof(*hdr);
	for (size_t i = 0; i < nin; i++) {
		if (got < want && !bad)
			fds[got++] = in[i];
		else
			close(in[i]);
	}
	if (nfds)
		*nfds = got;
	if (n == 0)
		return 0;
	return bad ? -EBADMSG : (ssize_t)hdr->len;
}
