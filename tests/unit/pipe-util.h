/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipes for the unit tests that watch fds close (test_proto.c,
 * test_supervisor.c): a pipe whose read end does not block, and whether
 * that end is at its end (every copy of the write end closed) rather than
 * merely empty.
 */
#ifndef HUTCH_TEST_PIPE_UTIL_H
#define HUTCH_TEST_PIPE_UTIL_H

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

static inline void nb_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
}

static inline bool write_end_closed(int rfd)
{
	char c;

	return read(rfd, &c, 1) == 0;
}

#endif
