/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A command's pseudo-terminal (HUTCH_SPAWN_TTY), opened by init on the
 * sandbox's private devpts: no terminal of the host or of the caller is
 * ever involved; the master goes to the supervisor, which relays it.
 */
#ifndef HUTCH_INIT_PTY_H
#define HUTCH_INIT_PTY_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Open a new pty, its size winsize (rows << 16 | columns; 0: the kernel's
 * default) and its slave owned by owner (appuser), as login does. On success
 * *ret_master and *ret_slave are close-on-exec fds and 0 is returned;
 * else -errno. */
int hutch_init_pty_open(uint32_t winsize, uid_t owner, int *ret_master, int *ret_slave);

/* A container's terminal (HUTCH_MSG_CONSOLE), during setup: open a pty
 * whose slave owner owns, send its master to the supervisor on sock, keep
 * the slave in *ret_slave for the HUTCH_SPAWN_HELD_TTY command. */
int hutch_init_console_open(int sock, uid_t owner, int *ret_slave, struct hutch_err *err);

#endif
