/* SPDX-License-Identifier: Apache-2.0 */
/* A command's pseudo-terminal; see pty.h. */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cleanup.h"
#include "proto.h"
#include "pty.h"

#define TTY_GID 5 /* the tty group of the sandbox's /etc/group (rootfs/etc.c) */

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int hutch_init_pty_open(uint32_t winsize, uid_t owner, int *ret_master, int *ret_slave)
{
	_cleanup_close_ int master = -EBADF, slave = -EBADF;
	struct winsize ws = { .ws_row = (unsigned short)(winsize >> 16),
		              .ws_col = (unsigned short)(winsize & 0xffff) };
	int unlock = 0;

	/* The sandbox's own devpts instance (rootfs/dev.c, newinstance). */
	master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (master < 0)
		return -errno;
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
		return -errno;
	/* The peer by the master, not by a path a process could swap. */
	slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return -errno;
	if (winsize && ioctl(master, TIOCSWINSZ, &ws) < 0)
		return -errno;
	/* Best effort: programs that reopen their terminal by its name. */
	(void)!fchown(slave, owner, TTY_GID);
	*ret_master = TAKE_FD(master);
	*ret_slave = TAKE_FD(slave);
	return 0;
}

int hutch_init_console_open(int sock, uid_t owner, int *ret_slave, struct hutch_err *err)
{
	_cleanup_close_ int master = -EBADF;
	int r;

	r = hutch_init_pty_open(0, owner, &master, ret_slave);
	if (r < 0)
		return hutch_err_set_errno(err, r, "open the container's terminal");
	r = hutch_proto_send(sock, HUTCH_MSG_CONSOLE, 0, NULL, 0, &master, 1);
	return r < 0 ? hutch_err_set_errno(err, r, "pass the terminal to the supervisor") : 0;
}
