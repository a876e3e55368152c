/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a container's caller sees of it, for the supervisor and `oci
 * exec` alike (see container.h): a terminal's master handed to a console
 * socket as runc hands it, and a process's end re-enacted by the waited
 * pid (its exit code, or death by the same signal).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "container.h"
#include "fdutil.h"

int hutch_console_send(const char *path, int master)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = { 0 };
	_cleanup_close_ int sock = -EBADF;
	char name[32];
	struct iovec iov = { .iov_base = name };
	struct msghdr msg = { .msg_iov = &iov,
		              .msg_iovlen = 1,
		              .msg_control = u.buf,
		              .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	unsigned int n = 0;
	int r;

	if (ioctl(master, TIOCGPTN, &n) < 0)
		return -errno;
	/* Blocking, as runc's: the receiver may read it as a plain file. */
	r = hutch_fd_nonblock(master, false);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "/dev/pts/%u", n);
	iov.iov_len = strlen(name);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	if ((r = hutch_unix_connect(sock, path)) < 0) /* any length */
		return r;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &master, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}
