/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock_diag of the sandbox's network namespace (issue 29, the egress log's
 * exact owner): init opens a NETLINK_SOCK_DIAG socket there (its netns is
 * fixed at socket()) and passes it up with the listeners; the egress asks
 * it for one TCP socket by its exact addresses (an INET_DIAG_REQ_V2 with
 * the 4-tuple, no dump: the kernel's own hash look-up, answered within the
 * send). What it gives is the socket's inode; which process holds that is
 * the supervisor's business (supervisor/netowner.c).
 *
 * Why not /proc/INIT/net/tcp (what it replaced): the kernel formats that
 * file by walking its whole established hash (shared by every namespace of
 * the machine) and every TIME_WAIT socket of the namespace, for each look-
 * up: at a connection rate of ~100/s it was half the supervisor's CPU
 * (perf: established_get_first) and the allow proxy's rate fell to 0.7x.
 */
#ifndef HUTCH_SOCKDIAG_INTERNAL_H
#define HUTCH_SOCKDIAG_INTERNAL_H

#include <netinet/in.h>
#include <stdint.h>

#include "error.h"

/* init, in the sandbox's netns: the socket (non-blocking, close-on-exec). */
int sockdiag_open(int *ret, struct hutch_err *err);

/* The inode of the TCP socket of fd's namespace whose own end is local and
 * whose peer is remote. *seq numbers the requests (an answer to an earlier
 * one still queued is skipped). 0, -ENOENT (none, TIME_WAIT: no inode, or a
 * listener), -errno. */
int sockdiag_inode(int fd, uint32_t *seq, const struct sockaddr_in *local,
                   const struct sockaddr_in *remote, uint32_t *ret_inode);

#endif
