/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The held /sys/fs/cgroup (cgroup-root.h). A create, the commands'
 * cgroup, init's joins and a teardown resolve 15-20 cgroup directories
 * beneath the root, and each open()+close() of it was 2 syscalls: 33 opens
 * per `hutch run` on a v1 host, ~11 us each on this VM (issue 31). Per
 * process, like the log sink: the one mutable state of the module, a
 * cache of one fd, dropped in a child that goes on without its parent's
 * fds (hutch_cgroup_root_forget()).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cgroup-root.h"

static int held_root = -EBADF;
static unsigned held_count;

void hutch_cgroup_root_hold(void)
{
	if (held_count++ == 0 &&
	    (held_root = open("/sys/fs/cgroup", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		held_root = -EBADF;
}

void hutch_cgroup_root_release(void)
{
	if (held_count == 0 || --held_count > 0)
		return;
	if (held_root >= 0)
		close(held_root);
	held_root = -EBADF;
}

void hutch_cgroup_root_forget(void)
{
	if (held_root >= 0)
		close(held_root);
	held_root = -EBADF;
	held_count = 0;
}

int hutch_cgroup_root_held(void)
{
	return held_root;
}
